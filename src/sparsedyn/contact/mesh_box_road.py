""":func:`~sparsedyn.collide`'s road for a scene whose pairs a broad phase leaves to meshes on boxes.

A scene of a robot on the floor and on boxes (talos fallen onto a box) has three sorts of pairs: the
collision kernel's (:mod:`~sparsedyn.contact.collision_kernel`: primitives on a plane, spheres and
capsules), the robot's meshes on world planes (:mod:`~sparsedyn.contact.mesh_plane_loop`), and the
rest, of which the native broad phase (:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`) leaves
a few, at rest a mesh on a box (one of the two a world shape).  At each call this road lays all of
their rows out in one table of fixed slots (the kernel's rows, each mesh-plane pair's
``MAX_PATCH_POINTS``, then each mesh-box pair's as many), so that :func:`~sparsedyn.collide` picks
its hits from it as it does where every pair is native: the same operations as its general road
(:func:`~sparsedyn.contact.collision.collide_within`), less its Python around them.

* the shapes' world poses: the native ``geometry_placements`` (collide's ``placements``);
* the broad phase of the rest's pairs alone (the same routine and tables, per pair);
* for each mesh-box pair left, coal's signed distance between the mesh's convex hull and the box at
  :data:`~sparsedyn.contact.collision_coal.COAL_TOLERANCE` (a ``coal.ComputeDistance`` per pair
  kept per thread: its solver's memory made once.  The solver starts its hill climbing on the hull
  where the pair's last query ended, which changes where it starts, not the vertex it reaches (the
  support is unique but on exact ties of floating-point products));
* the pairs' patches in one native call (:func:`~sparsedyn.contact.mesh_box_loop.mesh_box_loop_patches`'
  routine) written into their slots.

Where the broad phase leaves any other pair, or coal's query fails at that tolerance, the road
gives way to the general road (None).
"""

from __future__ import annotations

import ctypes
import math
import threading

import numpy as np

from ..kernels import native_calls
from . import mesh_box_loop
from .collision_coal import _coal, _coal_geometry, _hull_convex, _requests, mesh_vertices
from .collision_near import NEAR_COLUMNS
from .mesh_box_loop import _PAR_AT, _ints, near_plan
from .mesh_plane_loop import _at, mesh_plane_loop_rows
from .reduction import MAX_PATCH_POINTS, patch_depth

__all__ = ["BoxRoad", "box_road", "box_road_rows", "shape_rows"]

_GP, _FROM = "geometry_placements", ctypes.c_double.from_buffer


class BoxRoad:
    """A scene's road (:func:`box_road`): ``kernel`` the collision kernel's ``(callable, plan)`` or None,
    ``lp`` the mesh-plane loop's plan or None, ``nk``, ``nl`` their rows; ``rest`` (Q,) the other pairs,
    ``slot`` (Q,) each one's mesh-box slot or -1; per slot ``ms``, ``bs`` the mesh and box shapes,
    ``swap`` 1 where the box is the pair's ``a``, ``pair`` its scene pair, ``geoms`` coal's hull and
    box, ``fixed`` the box's (or world mesh's) coal placement where it is a world shape;
    ``every`` (rows,) each row's scene pair, ``order`` the rows by pair (None: they are);
    ``cutoff`` the margin (0-d); ``world`` the world shapes' ``(R, p)``; the routines' tables."""

    __slots__ = ("kernel", "lp", "nk", "nl", "rest", "slot", "ms", "bs", "swap", "pair", "geoms", "fixed", "every",
                 "order", "cutoff", "world", "ml", "bl", "near_at", "rows_at", "margin", "solvers", "_keep")


def shape_rows(scene):
    """(S, 2) int: each shape's rows of :func:`~sparsedyn.contact.collision_coal.mesh_vertices` (``(0, 0)``
    for a shape that is no mesh); kept by the scene."""
    got = scene.cache.get("mesh rows")
    if got is None:
        got = np.zeros((len(scene.shapes), 2), np.int64)
        for k, r in mesh_vertices(scene)[1].items():
            got[k] = r
        scene.cache["mesh rows"] = got
    return got


def box_road(scene, inside, kp, f, lp, c, r, half):
    """The :class:`BoxRoad` of ``scene``, or None where it has no pair of a mesh and a box one of which
    is a world shape outside ``inside`` (scene pairs,) bool or None (the pairs of the collision
    kernel's plan ``kp`` or None, of native callable ``f``, and of the mesh-plane loop plan ``lp`` or
    None), or where the routines, the native placements or ``f`` are not built (yet).  ``c``, ``r``
    the shapes' bounding spheres, ``half`` (S, 3) the boxes' half sizes (collide's plan).  A scene
    without such a pair is remembered as one (its ``cache``)."""
    key = "mesh-box road"
    if key in scene.cache:
        return scene.cache[key]
    routines = mesh_box_loop._routines()
    gp = (native_calls(scene.model) or {}).get(_GP)
    if routines is None or gp is None or (kp is not None and kp.pairs and f is None):
        return None
    kernel = (f, kp) if kp is not None and kp.pairs else None
    inside = np.zeros(len(scene.index), bool) if inside is None else inside
    shapes, idx = scene.shapes, np.asarray(scene.index, np.int64).reshape(-1, 2)
    rest = np.flatnonzero(~inside)
    slot, ms, bs, swap = np.full(len(rest), -1, np.int64), [], [], []
    for n, (i, j) in enumerate(idx[rest].tolist()):
        kinds = {shapes[i].kind, shapes[j].kind}
        if kinds == {"mesh", "box"} and min(shapes[i].body, shapes[j].body) < 0:
            m, b = (i, j) if shapes[i].kind == "mesh" else (j, i)
            slot[n] = len(ms)
            ms.append(m), bs.append(b), swap.append(int(b == i))
    if not ms:
        scene.cache[key] = None
        return None
    road = BoxRoad()
    road.kernel, road.lp, road.rest, road.slot = kernel, lp, rest, slot
    road.nk = len(kernel[1].pair) if kernel is not None else 0
    road.nl = len(lp.pair) * MAX_PATCH_POINTS if lp is not None else 0
    road.ms, road.bs, road.swap = np.array(ms, np.int64), np.array(bs, np.int64), np.array(swap, np.int64)
    road.ml, road.bl = ms, bs
    road.pair = rest[slot >= 0]
    coal, M = _coal(), len(ms)
    road.geoms = [(_hull_convex(scene, m), _coal_geometry(scene, b)) for m, b in zip(ms, bs)]
    road.fixed = [(None if shapes[m].body >= 0 else coal.Transform3s(shapes[m].R, shapes[m].p),
                   None if shapes[b].body >= 0 else coal.Transform3s(shapes[b].R, shapes[b].p)) for m, b in zip(ms, bs)]
    road.every = np.concatenate([kernel[1].pair if kernel is not None else np.zeros(0, int),
                                 np.repeat(lp.pair, MAX_PATCH_POINTS) if lp is not None else np.zeros(0, int),
                                 np.repeat(road.pair, MAX_PATCH_POINTS)]).astype(int)
    order = np.argsort(road.every, kind="stable")
    road.order = None if np.array_equal(order, np.arange(len(order))) else order
    road.margin = float(scene.margin)
    road.cutoff = np.array(road.margin)
    world = shapes[len(scene.model.geometry("collision")):]      # (collide's placements: the robot's, then these)
    road.world = (np.array([s.R for s in world], float).reshape(-1, 3, 3), np.array([s.p for s in world], float)
                  .reshape(-1, 3))
    tables, at, _ = near_plan(scene, c, r)
    ia, ib, plane = (np.ascontiguousarray(t[rest]) for t in tables[:3])
    cut = np.full(max(len(rest), 1), road.margin)
    road.near_at = (len(rest), *(_ints(x) for x in (ia, ib, plane)), *at[3:8], _at(cut), at[8])
    V, _ = mesh_vertices(scene)
    rows = shape_rows(scene)
    first, count = np.ascontiguousarray(rows[:, 0]), np.ascontiguousarray(rows[:, 1] - rows[:, 0])
    halves, cuts = np.ascontiguousarray(half, float), np.full(M, road.margin)
    depths = np.full(M, float(patch_depth(road.margin, road.margin)))
    road.rows_at = (*(_ints(x) for x in (road.ms, road.bs, first, count)), _at(V), _at(halves), _at(cuts), _at(depths),
                    _ints(road.swap), _PAR_AT)
    road._keep = (ia, ib, plane, cut, V, first, count, halves, cuts, depths, tables)   # the tables' owners
    road.solvers = {}
    scene.cache[key] = road
    return road


def box_road_rows(scene, road, q):
    """The road's rows (rows, NEAR_COLUMNS) at ``q`` (nq,) (float): the collision kernel's candidates,
    the mesh-plane pairs' patches, then each mesh-box pair's ``MAX_PATCH_POINTS`` rows ``[d, x, n,
    ...]`` (``x`` midway between the witnesses, ``d`` +inf in a free row); None where the general road
    must answer (module docstring)."""
    routines = mesh_box_loop._routines()
    calls = native_calls(scene.model)
    gp = None if calls is None else calls.get(_GP)
    if routines is None or gp is None:
        return None
    nk, nl = road.nk, road.nl
    out = np.empty((len(road.every), NEAR_COLUMNS))
    if road.kernel is not None:
        f, kp = road.kernel
        out[:nk] = f(q, kp.shapes, kp.cutoff, kp.pairs)
    if road.lp is not None and mesh_plane_loop_rows(scene, road.lp, q, out=out[nk:nk + nl]) is None:
        return None
    Rg, pg = gp(q, "collision")
    R, p = np.concatenate((Rg, road.world[0])), np.concatenate((pg, road.world[1]))
    Q, *near_at = road.near_at
    near = np.empty(max(Q, 8), bool)
    routines[0](Q, *near_at[:8], _FROM(R), _FROM(p), *near_at[8:], _FROM(near))
    slot = road.slot.compress(near[:Q])
    slots = slot.tolist()
    if slots and min(slots) < 0:
        return None                                # a pair that is no mesh on a box: the general road
    closest = _closest(road, slots, R, p) if slots else np.zeros((1, 10))
    if closest is None:
        return None
    if not slots:
        slot = np.zeros(1, np.int64)
    ms, bs, first, count, V, half, cut, depth, swap, par = road.rows_at
    tail = out[nk + nl:]
    if routines[2](len(slots), _FROM(slot), ms, bs, first, count, V, half, _FROM(R), _FROM(p), _FROM(closest), cut,
                   depth, swap, par, len(tail), NEAR_COLUMNS, _FROM(tail)) < 0:
        raise MemoryError("mesh-box contacts: no memory for the workspace of the hulls' vertices")
    return out


def _closest(road, slots, R, p):
    """(P, 10): coal's closest pairs ``[d, w_mesh, w_box, n]`` (``n`` from the box towards the mesh) of
    the mesh-box slots ``slots`` (P); None where one is not finite (or beyond 1e300 m) at coal's
    tolerance (the general road retries it at coal's default)."""
    scratch = road.solvers.get(threading.get_ident())
    if scratch is None:
        scratch = road.solvers[threading.get_ident()] = _scratch(road)
    fns, tm0, tb0, res, req = scratch
    D, A, W, N = [], [], [], []
    ms, bs, fixed = road.ml, road.bl, road.fixed
    for s in slots:
        tm, tb = fixed[s]
        if tm is None:
            m = ms[s]
            tm = tm0
            tm.setTransform(R[m], p[m])
        if tb is None:
            b = bs[s]
            tb = tb0
            tb.setTransform(R[b], p[b])
        res.clear()
        D.append(fns[s](tm, tb, req, res))
        A.append(res.getNearestPoint1()), W.append(res.getNearestPoint2()), N.append(res.normal)
    closest = np.empty((len(slots), 10))
    closest[:, 0], closest[:, 1:4], closest[:, 4:7] = D, A, W
    np.negative(N, out=closest[:, 7:])
    return closest if np.abs(closest[:, :7]).max(initial=0.0) < 1e300 else None


def _scratch(road):
    """A thread's coal objects for :func:`_closest`: a ``ComputeDistance`` per slot, two placements, a
    result and the request."""
    coal = _coal()
    return ([coal.ComputeDistance(*g) for g in road.geoms], coal.Transform3s(), coal.Transform3s(),
            coal.DistanceResult(), _requests(coal)[0])
