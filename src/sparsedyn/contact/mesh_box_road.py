""":func:`~sparsedyn.collide`'s road for a scene whose pairs a broad phase leaves to meshes on boxes.

A scene of a robot on the floor and on boxes (talos fallen onto a box) has three sorts of pairs: the
collision kernel's (:mod:`~sparsedyn.contact.collision_kernel`: primitives on a plane, spheres and
capsules), the robot's meshes on world planes (:mod:`~sparsedyn.contact.mesh_plane_loop`), and the
rest, of which the native broad phase (:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`) leaves
a few, at rest a mesh on a box (one of the two a world shape).  At each call this road lays all of
their rows out in one table of fixed slots (the kernel's rows, each mesh-plane pair's
``MAX_PATCH_POINTS``, then each mesh-box pair's as many), so that :func:`~sparsedyn.collide` picks
its hits from it as it does where every pair is native: the operations of its general road
(:func:`~sparsedyn.contact.collision.collide_within`; its hits to rounding), less its Python around
them.

* the shapes' world poses: the native ``geometry_placements`` (collide's ``placements``);
* the broad phase of the rest's pairs alone (the same routine and tables, per pair);
* for each mesh-box pair left, coal's signed distance between the mesh's convex hull and the box at
  :data:`~sparsedyn.contact.collision_coal.COAL_TOLERANCE` (a ``coal.ComputeDistance`` per pair
  kept per thread: its solver and its EPA's memory made once, where ``coal.distance`` makes them at
  each query.  The solver starts its hill climbing on the hull where the pair's last query ended:
  that changes where the climb starts, not the vertex it reaches, which is unique but on an exact
  tie of floating-point products.  EPA's iterations are capped at :data:`EPA_ITERATIONS`; its answers
  are read in place, from views of coal's results);
* the pairs' patches in one native call (:func:`~sparsedyn.contact.mesh_box_loop.mesh_box_loop_patches`'
  routine) written into their slots.

Where the broad phase leaves any other pair, or coal's answer is not finite at that tolerance, or a
penetration's depth is not that of the hull less the box along its normal (EPA stopped by the cap),
the road gives way to the general road (None), which retries it (at coal's default where needed).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..kernels import native_calls
from . import mesh_box_loop
from .collision_coal import _coal, _coal_geometry, _distance_request, _hull_convex, mesh_vertices
from .collision_near import NEAR_COLUMNS
from .mesh_box_loop import _PAR, near_plan
from .mesh_plane_loop import mesh_plane_loop_rows
from .reduction import MAX_PATCH_POINTS, patch_depth

__all__ = ["BoxRoad", "EPA_ITERATIONS", "box_road", "box_road_rows", "result_blocks", "shape_rows", "step_road"]

_GP, _FROM = "geometry_placements", ctypes.c_double.from_buffer

#: The road's cap on EPA's iterations (the general road keeps 1000).  Before each run coal's EPA links
#: twice its cap of faces, memory that a high cap makes the larger part of a penetrating query's
#: cost.  A run that settles below the cap takes the same steps under either cap; one that the cap
#: stops is caught by the patch routine's test of its depth (``sd_road_settled``) and retried by the
#: general road.
EPA_ITERATIONS = 128


class BoxRoad:
    """A scene's road (:func:`box_road`): ``kernel`` the collision kernel's ``(callable, plan)`` or None,
    ``lp`` the mesh-plane loop's plan or None, ``nk``, ``nl`` their rows; ``slot`` (Q,) each of the
    other pairs' mesh-box slot or -1; per slot ``ms``, ``bs`` the mesh and box shapes (lists), ``geoms``
    coal's hull and box, ``fixed`` their coal placements where they are world shapes (else None);
    ``every`` (rows,) each row's scene pair, ``order`` the rows by pair (None: they are); ``cutoff``
    the margin (0-d); ``shapes`` S; ``tab`` the routines' tables (:data:`ROAD_TABLES`); ``solvers``
    each thread's coal objects; ``picks`` per number of slots the order of their answers' fields;
    ``rest`` (Q,) the road's scene pairs, ``swap`` (M,) bool where a slot's box is its pair's ``a``."""

    __slots__ = ("kernel", "lp", "nk", "nl", "slot", "ms", "bs", "geoms", "fixed", "every", "order", "cutoff", "shapes",
                 "tab", "solvers", "picks", "rest", "swap", "_keep")


#: The routines' tables (sd_road_near, sd_road_rows of mesh_box_loop), in their order.
ROAD_TABLES = ("dims", "Rw", "pw", "ia", "ib", "plane", "sc", "sr", "bc", "be", "kind", "cut", "near par", "ms", "bs",
               "first", "count", "hull", "soa", "sfirst", "half", "mcut", "depth", "swap", "par", "adjf", "adj",
               "start")


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


def box_road(scene, kp, f, lp, c, r, half):
    """The :class:`BoxRoad` of ``scene``, or None where it has no pair of a mesh and a box one of which
    is a world shape outside the pairs of the collision kernel's plan ``kp`` or None (of native
    callable ``f``) and of the mesh-plane loop plan ``lp`` or None (every other pair is the road's:
    its broad phase, then the general road where one passes that is no mesh on a box), or where the
    routines, the native placements or ``f`` are not built (yet).  ``c``, ``r``
    the shapes' bounding spheres, ``half`` (S, 3) the boxes' half sizes (collide's plan).  A scene
    without such a pair is remembered as one (its ``cache``)."""
    key = "mesh-box road"
    if key in scene.cache:
        return scene.cache[key]
    gp = (native_calls(scene.model) or {}).get(_GP)
    if mesh_box_loop._routines() is None or gp is None or (kp is not None and kp.pairs and f is None):
        return None
    inside = np.zeros(len(scene.index), bool)
    for plan in (kp if kp is not None and kp.pairs else None, lp):
        inside |= plan.inside if plan is not None else False
    kernel = (f, kp) if kp is not None and kp.pairs else None
    road = scene.cache[key] = _road(scene, np.flatnonzero(~inside), kernel, lp, c, r, half)
    return road


def step_road(scene, rest, c, r, half):
    """A :class:`BoxRoad` of the scene pairs ``rest`` (sorted) alone (no kernel's, no mesh-plane rows: a
    step's mesh-box rows, :mod:`~sparsedyn.contact.mesh_box_step`), or None where none of them is a
    mesh on a box one of which is a world shape or the routines or the native placements are not
    built; ``c``, ``r``, ``half`` as for :func:`box_road`.  Not kept: the caller keeps it."""
    if mesh_box_loop._routines() is None or (native_calls(scene.model) or {}).get(_GP) is None:
        return None
    return _road(scene, np.asarray(rest, int), None, None, c, r, half)


def _road(scene, rest, kernel, lp, c, r, half):
    """The :class:`BoxRoad` of the pairs ``rest`` beside the ``kernel`` ``(f, kp)`` or None and the
    mesh-plane loop plan ``lp`` or None; None where none of ``rest`` is a mesh on a box one of which
    is a world shape."""
    shapes = scene.shapes
    slot, ms, bs, swap = np.full(len(rest), -1, np.int64), [], [], []
    for n, (i, j) in enumerate(np.asarray(scene.index, int).reshape(-1, 2)[rest].tolist()):
        if {shapes[i].kind, shapes[j].kind} == {"mesh", "box"} and min(shapes[i].body, shapes[j].body) < 0:
            m, b = (i, j) if shapes[i].kind == "mesh" else (j, i)
            slot[n] = len(ms)
            ms.append(m), bs.append(b), swap.append(int(b == i))     # (the box the pair's a)
    if not ms:
        return None
    road = BoxRoad()
    road.kernel, kp, road.rest, road.swap = kernel, None if kernel is None else kernel[1], rest, np.array(swap, bool)
    road.lp, road.slot, road.ms, road.bs, road.shapes = lp, slot, ms, bs, len(shapes)
    road.nk = len(kp.pair) if road.kernel is not None else 0
    road.nl = len(lp.pair) * MAX_PATCH_POINTS if lp is not None else 0
    coal = _coal()
    road.geoms = [(_hull_convex(scene, m), _coal_geometry(scene, b)) for m, b in zip(ms, bs)]
    road.fixed = [tuple(None if shapes[k].body >= 0 else coal.Transform3s(shapes[k].R, shapes[k].p) for k in mb)
                  for mb in zip(ms, bs)]
    none = np.zeros(0, int)
    road.every = np.concatenate([kp.pair if road.kernel is not None else none,
                                 np.repeat(lp.pair, MAX_PATCH_POINTS) if lp is not None else none,
                                 np.repeat(rest[slot >= 0], MAX_PATCH_POINTS)]).astype(int)
    order = np.argsort(road.every, kind="stable")
    road.order = None if np.array_equal(order, np.arange(len(order))) else order
    road.cutoff = np.array(float(scene.margin))
    road.tab, road._keep = _tables(scene, road, rest, swap, c, r, half)
    road.solvers, road.picks = {}, {}
    return road


def _tables(scene, road, rest, swap, c, r, half):
    """``(tab, owners)``: the addresses of the routines' tables (:data:`ROAD_TABLES`) of the road's pairs
    ``rest`` (their broad phase's: :func:`~sparsedyn.contact.mesh_box_loop.near_plan`'s of those pairs; the
    slots' ``swap`` (M,), 1 where the box is the pair's ``a``; the
    patches': the hulls, as rows and as columns, :func:`_columns`) and the arrays that own them."""
    shapes, margin, M = scene.shapes, float(scene.margin), len(road.ms)
    world = shapes[len(scene.model.geometry("collision")):]      # (collide's placements: the robot's, then these)
    Rw = np.array([s.R for s in world], float).reshape(-1, 3, 3)
    pw = np.array([s.p for s in world], float).reshape(-1, 3)
    tables, _, _ = near_plan(scene, c, r)
    V, _ = mesh_vertices(scene)
    rows = shape_rows(scene)
    first, count = np.ascontiguousarray(rows[:, 0]), np.ascontiguousarray(rows[:, 1] - rows[:, 0])
    soa, sfirst = _columns(V, first, count, sorted(set(road.ms)))
    dims = np.array([len(rest), len(shapes) - len(world), len(shapes), soa.shape[1], M * MAX_PATCH_POINTS,
                     NEAR_COLUMNS], np.int64)
    owners = {"dims": dims, "Rw": Rw, "pw": pw, **{k: np.ascontiguousarray(t[rest]) for k, t in
                                                      zip(("ia", "ib", "plane"), tables[:3])},
              **dict(zip(("sc", "sr", "bc", "be", "kind", "near par"), tables[3:9])),
              **dict(zip(("adjf", "adj", "start"), tables[12:15])),
              "cut": np.full(max(len(rest), 1), margin), "ms": np.array(road.ms, np.int64),
              "bs": np.array(road.bs, np.int64), "first": first, "count": count, "hull": V, "soa": soa,
              "sfirst": sfirst, "half": np.ascontiguousarray(half, float), "mcut": np.full(M, margin),
              "depth": np.full(M, float(patch_depth(margin, margin))),
              "swap": np.array(swap, np.int64), "par": _PAR}
    for k in ("Rw", "pw", "hull"):
        owners[k] = np.ascontiguousarray(owners[k], float) if len(owners[k]) else np.zeros(8)
    assert all(x.flags.c_contiguous and x.dtype in (np.float64, np.int64) for x in owners.values())
    return (ctypes.c_void_p * len(ROAD_TABLES))(*(owners[k].ctypes.data for k in ROAD_TABLES)), owners


def _columns(V, first, count, meshes):
    """``(soa (3, N), sfirst (S,))``: the hull vertices of the shapes ``meshes`` (their rows ``first``,
    ``count`` of ``V``) as columns, each shape's block from ``sfirst`` padded with NaN to a multiple of 8
    (the routine's widest vector)."""
    sfirst, at = np.zeros(len(first), np.int64), 0
    for m in meshes:
        sfirst[m], at = at, at + -(-int(count[m]) // 8) * 8
    soa = np.full((3, max(at, 8)), np.nan)
    for m in meshes:
        soa[:, sfirst[m]:sfirst[m] + count[m]] = V[first[m]:first[m] + count[m]].T
    return soa, sfirst


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
    scratch = road.solvers.get(threading.get_ident())
    if scratch is None:
        scratch = road.solvers[threading.get_ident()] = _scratch(road)
    R, p, near, at = scratch[5]                    # (the thread's: read back before it returns)
    routines[3](road.tab, _FROM(Rg) if len(Rg) else None, _FROM(pg) if len(pg) else None, *at)
    slot = road.slot.compress(near[:len(road.slot)])
    slots = slot.tolist()
    if slots and min(slots) < 0:
        return None                                # a pair that is no mesh on a box: the general road
    got = _closest(road, slots, R, p) if slots else np.zeros(1)
    n = routines[4](road.tab, len(slots), _FROM(slot) if slots else None, at[0], at[1], _FROM(got),
                    _FROM(out[nk + nl:]))
    if n == -1:
        raise MemoryError("mesh-box contacts: no memory for the workspace of the hulls' vertices")
    return out if n >= 0 else None


def _closest(road, slots, R, p):
    """coal's answers for the mesh-box slots ``slots`` (P) at the shapes' poses ``R``, ``p``, flat: the
    witnesses on the meshes (P, 3), on the boxes (P, 3), the normals from the meshes towards the boxes
    (P, 3), the signed distances (P,)."""
    scratch = road.solvers.get(threading.get_ident())
    if scratch is None:
        scratch = road.solvers[threading.get_ident()] = _scratch(road)
    per, tm0, tb0, req, blocks, _ = scratch
    if blocks is None:
        return _closest_copied(per, tm0, tb0, req, slots, R, p)
    for s in slots:
        _query(per[s], tm0, tb0, req, R, p)
    P = len(slots)
    pick = road.picks.get(P)
    if pick is None:                                # [d, n, a, w] per slot -> a's, w's, n's, d's
        k = 10 * np.arange(P)[:, None]
        pick = road.picks[P] = np.concatenate([(k + c).ravel() for c in ((4, 5, 6), (7, 8, 9), (1, 2, 3), (0,))])
    return np.concatenate([blocks[s] for s in slots]).take(pick)


def closest_call(road, scratch):
    """:func:`_closest` of this thread's ``scratch`` (:func:`_scratch`'s) as a function of the slots, each
    slot's query bound once: its coal objects, the placements to fill (views of the thread's poses ``R``,
    ``p``: the numbers :func:`_query` reads) and its result's view; where coal hands out no views of its
    results, :func:`_closest` itself."""
    per, tm0, tb0, req, blocks, (R, p, _, _) = scratch
    if blocks is None:
        return lambda slots: _closest(road, slots, R, p)
    bound = []
    for (fn, res, _, tm, tb, m, b), block in zip(per, blocks):
        bound.append((fn, res, tm0 if tm is None else tm, tb0 if tb is None else tb,
                      (R[m], p[m]) if tm is None else None, (R[b], p[b]) if tb is None else None, block))
    picks, cat = {}, np.concatenate

    def closest(slots):
        rows = []
        for s in slots:
            fn, res, tm, tb, at_m, at_b, block = bound[s]
            if at_m is not None:
                tm.setTransform(*at_m)
            if at_b is not None:
                tb.setTransform(*at_b)
            res.clear()
            fn(tm, tb, req, res)
            rows.append(block)
        P = len(slots)
        pick = picks.get(P)
        if pick is None:                           # [d, n, a, w] per slot -> a's, w's, n's, d's
            k = 10 * np.arange(P)[:, None]
            pick = picks[P] = cat([(k + c).ravel() for c in ((4, 5, 6), (7, 8, 9), (1, 2, 3), (0,))])
        return cat(rows).take(pick)
    return closest


def _closest_copied(per, tm0, tb0, req, slots, R, p):
    """:func:`_closest` through coal's accessors (where its result's fields are not laid out as
    :func:`_blocks` reads them)."""
    D, A, W, N = [], [], [], []
    for s in slots:
        _, res, normal = per[s][:3]
        D.append(_query(per[s], tm0, tb0, req, R, p))
        A.append(res.getNearestPoint1()), W.append(res.getNearestPoint2())
        N.append(res.normal.copy() if normal is None else normal)
    return np.concatenate(A + W + N + [D])


def _query(slot, tm0, tb0, req, R, p):
    """coal's signed distance of one slot's pair (its result written into the slot's own), the placements
    of a robot shape (no fixed transform of its own) from ``R``, ``p``, set on the thread's ``tm0``,
    ``tb0``."""
    fn, res, _, tm, tb, m, b = slot
    if tm is None:
        tm = tm0
        tm.setTransform(R[m], p[m])
    if tb is None:
        tb = tb0
        tb.setTransform(R[b], p[b])
    res.clear()
    return fn(tm, tb, req, res)


def _scratch(road):
    """A thread's coal objects for :func:`_closest`: per slot ``(ComputeDistance, result, its normal (a
    view of the result's, where coal hands out views; else None), the fixed placements of the mesh and
    the box (None: a robot shape's), their shapes)``; two placements to fill; the request (collision_coal's,
    EPA's iterations :data:`EPA_ITERATIONS`); per slot
    its result's fields as one view (:func:`_blocks`) or None; the shapes' placements ``R`` (S, 3, 3),
    ``p`` (S, 3) and the broad phase's answers (Q,) that :func:`box_road_rows` fills, with their
    ctypes views ``(R, p, near, (R's, p's, near's))``."""
    coal = _coal()
    views = _normal_views(coal)
    per = []
    for (g, h), fixed, m, b in zip(road.geoms, road.fixed, road.ms, road.bs):
        res = coal.DistanceResult()
        per.append((coal.ComputeDistance(g, h), res, res.normal if views else None, *fixed, m, b))
    S = road.shapes
    poses = np.empty((S, 3, 3)), np.empty((S, 3)), np.empty(max(len(road.slot), 8), bool)
    req = _distance_request(coal)
    req.epa_max_iterations = EPA_ITERATIONS
    return (per, coal.Transform3s(), coal.Transform3s(), req, _blocks(coal, per),
            (*poses, tuple(_FROM(x) for x in poses)))


def _normal_views(coal):
    """Whether coal hands out its results' normal as a view (a probe: the value set shows in it)."""
    probe = coal.DistanceResult()
    view = probe.normal
    probe.normal = np.array([1.0, 2.0, 3.0])
    return view[2] == 3.0


def result_blocks(coal, results):
    """Per coal ``DistanceResult`` of ``results`` the view (10,) of its ``[min_distance, normal (3), nearest
    points (3, 3)]`` (:func:`_blocks`), read with no copy by coal's accessors; None where coal hands out none."""
    views = _normal_views(coal)
    return _blocks(coal, [(None, r, r.normal if views else None) for r in results])


def _blocks(coal, per):
    """Per slot a view (10,) of its coal result's ``min_distance``, ``normal``, ``nearest_points``
    (coal's ``DistanceResult`` holds them in that order, one after the other), so that a query's
    answers are read without coal's accessors' copies; None where coal hands out no view of the
    normal or a probe query's fields are not found there."""
    if not per or per[0][2] is None:
        return None
    res = coal.DistanceResult()
    block = _block(res)
    box = coal.Box(1.0, 2.0, 3.0)
    d = coal.ComputeDistance(box, box)(coal.Transform3s(), coal.Transform3s(np.eye(3), np.array([0.25, 0.5, 3.5])),
                                       coal.DistanceRequest(), res)
    got = np.concatenate([[d], res.normal, res.getNearestPoint1(), res.getNearestPoint2()])
    if not np.array_equal(block, got) or np.array_equal(got, np.zeros(10)):
        return None
    return [_block(x[1]) for x in per]


def _block(res):
    """The view (10,) of :func:`_blocks` of the coal result ``res`` (which must outlive it)."""
    at = res.normal.__array_interface__["data"][0] - ctypes.sizeof(ctypes.c_double)
    return np.ctypeslib.as_array((ctypes.c_double * 10).from_address(at))
