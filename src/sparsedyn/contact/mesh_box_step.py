"""A step's rows of robot meshes on world boxes: :func:`mesh_box_step_rows` (:func:`mesh_box_rows`).

The rows of :mod:`~sparsedyn.contact.scene_data`'s mixed plan for its pairs of a robot mesh and a
world box, each pair's patch within its own cutoff (a step's look-ahead): the native broad phase
(:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`) of those pairs, coal's closest pair of the
mesh's convex hull and the box for each pair it leaves, then the hull vertices on the box's face in
one native call (:func:`~sparsedyn.contact.collision._mesh_box_pairs`, collide's own).

On the native road, :func:`mesh_box_step_rows` computes the same rows through a road of collide's
(:func:`~sparsedyn.contact.mesh_box_road.step_road`: the pairs' broad phase, one routine call on the
native placements; coal's queries on objects kept per thread, EPA capped as there; the patches, one
routine call), each pair's cutoff written into the thread's own copy of its tables; where it
declines (a penetration EPA did not settle under its cap, an answer not finite) the rows above
answer.  The columns the step reads beyond collide's (the witness on the mesh in its body's axes,
``n . w_b``) from the row's ``x``, ``d`` and ``n``: ``w_a = x + d n / 2``, ``w_b = x - d n / 2``.

The plan's other pairs that no road of rows covers (a cylinder on a world box: coal's closest pair
and the closed-form features of the general road, merged) have no rows: the same broad phase, in the
same call, tests them against their cutoffs, and where it leaves one the rows are refused (None), so
that the step takes the road of Contact objects; at rest they lie far apart (a robot's wrist over
the box it leans on) and cost their bound alone.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..kernels import native_calls, use_backend
from . import mesh_box_loop
from .collision import _mesh_box_pairs, _plan as _collision_plan, placements
from .collision_near import NEAR_COLUMNS
from .mesh_box_loop import near_pairs
from .mesh_box_road import ROAD_TABLES, _FROM, _GP, _closest, _scratch, step_road
from .reduction import MAX_PATCH_POINTS, patch_depth

__all__ = ["mesh_box_rows", "mesh_box_step_rows"]

_F64 = np.dtype(float)


def mesh_box_step_rows(scene, boxes, others, bb, q, cut):
    """``(rows, near)``: :func:`mesh_box_rows` of the pairs ``boxes`` (B,) beside ``others`` (O,) (sorted
    scene pairs) at ``q`` (nq,) with each scene pair's cutoff ``cut`` (P,) [m], through collide's road
    of these pairs where it answers (module docstring), and whether a pair of ``bb`` (the scene's pairs
    of two boxes, rows of their own, or None) may come within its cutoff (the same broad phase; True
    where not run); None as :func:`mesh_box_rows`."""
    if use_backend.current() != "numpy" and type(q) is np.ndarray and q.dtype is _F64 and q.ndim == 1 and \
            q.flags.c_contiguous:                  # (the native placements read q in place)
        plan = _step_plan(scene, boxes, others, bb)
        got = False if plan is None else _road_rows(scene, plan, q, np.asarray(cut, float), boxes)
        if got is not False:
            return got
    got = mesh_box_rows(scene, boxes, q, cut[boxes], others, cut[others])
    return None if got is None else (got, True)


def _step_plan(scene, boxes, others, bb):
    """``(road, two, per thread, ms, E, r)``: the :class:`~sparsedyn.contact.mesh_box_road.BoxRoad` of the
    pairs ``boxes``, ``others`` and ``bb``'s (their broad phase in one call), whether each of its pairs is
    ``bb``'s, each thread's tables (:func:`_thread_tables`), each slot's mesh and its placement in its
    body (``E`` (M, 3, 3), ``r`` (M, 3)); kept by the scene.  None where its slots are not
    ``boxes`` in order, each mesh its pair's ``a`` (then :func:`mesh_box_rows`), or it is not built
    (yet: asked again)."""
    key = "mesh-box step road"
    got = scene.cache.get(key)
    if got is not None and got[0] is boxes:
        return got[1]
    plan = _collision_plan(scene)
    rest = np.unique(np.concatenate([boxes, others, np.zeros(0, int) if bb is None else bb.pair]).astype(int))
    road = step_road(scene, rest, plan["c"], plan["r"], plan["half"])
    if road is None and (mesh_box_loop._routines() is None or native_calls(scene.model) is None or
                         native_calls(scene.model).get(_GP) is None):
        return None                                # (not built yet)
    if road is not None and not (np.array_equal(road.rest[road.slot >= 0], boxes) and not road.swap.any()):
        road = None
    plan = None
    if road is not None:                           # (each slot's mesh, its placement in its body: E, r)
        plan = (road, ~np.isin(road.rest, np.concatenate([boxes, others])), {}, np.array(road.ms, int),
                np.array([scene.shapes[i].R for i in road.ms]), np.array([scene.shapes[i].p for i in road.ms]))
    scene.cache[key] = (boxes, plan)
    return plan


def _road_rows(scene, plan, q, cut, boxes):
    """The rows of :func:`mesh_box_rows` through ``plan``'s road (:func:`_step_plan`'s) at ``q`` with the
    scene pairs' cutoffs ``cut`` (P,) and whether a pair of two boxes may be near; None where a pair of
    no rows may touch; False where the road declines."""
    gp = (native_calls(scene.model) or {}).get(_GP)
    routines = mesh_box_loop._routines()
    if gp is None or routines is None:
        return False
    road, two, threads, ms, E, r = plan
    me = threading.get_ident()
    scratch = road.solvers.get(me)
    if scratch is None:
        scratch = road.solvers[me] = _scratch(road)
    tables = threads.get(me)
    if tables is None:
        tables = threads[me] = _thread_tables(scene, road)
    tab, tcut, mcut, depth, placed, at_placed, out = tables
    cut.take(road.rest, out=tcut[:len(road.rest)])
    cut.take(boxes, out=mcut)
    depth[:] = patch_depth(mcut, scene.margin)
    gp(q, "collision", out=placed)
    R, p, near, at = scratch[5]
    routines[3](tab, *at_placed, *at)
    close, own = near[:len(road.slot)], road.slot >= 0
    if (close & ~own & ~two).any():
        return None                                # a pair of no rows may touch: the Contact objects' road
    slot = road.slot.compress(close & own)
    slots = slot.tolist()
    got = _closest(road, slots, R, p) if slots else np.zeros(1)
    n = routines[4](tab, len(slots), _FROM(slot) if slots else None, at[0], at[1], _FROM(got), _FROM(out))
    if n == -1:
        raise MemoryError("mesh-box contacts: no memory for the workspace of the hulls' vertices")
    if n < 0:
        return False
    rows = out.copy()
    k = np.flatnonzero(rows[:, 0] != np.inf)
    if len(k):                                     # w_a in the mesh's body's axes E R_m^T (w_a - p_m) + r, n . w_b
        x, d, nn = rows[k, 1:4], rows[k, :1], rows[k, 4:7]
        h = d / 2 * nn
        s = k // MAX_PATCH_POINTS
        m = ms.take(s)
        y = np.einsum("kji,kj->ki", R[m], x + h - p[m])
        rows[k, 7:10], rows[k, 10] = np.einsum("kij,kj->ki", E[s], y) + r[s], ((x - h) * nn).sum(1)
    return rows, bool(close[two].any())


def _thread_tables(scene, road):
    """This thread's copy of ``road``'s table of addresses with cutoffs of its own: ``(tab, cut (Q,),
    mcut (M,), depth (M,), the robot shapes' placements (two arrays), their addresses, rows (M * 4, 11))``."""
    own = {"cut": np.full(max(len(road.rest), 1), -np.inf), "mcut": np.zeros(len(road.ms)),
           "depth": np.zeros(len(road.ms))}
    tab = (ctypes.c_void_p * len(ROAD_TABLES))(*road.tab)
    for name, x in own.items():
        tab[ROAD_TABLES.index(name)] = x.ctypes.data
    G = len(scene.model.geometry("collision"))
    placed = np.empty((G, 3, 3)), np.empty((G, 3))
    at = (_FROM(placed[0]), _FROM(placed[1])) if G else (None, None)
    out = np.empty((len(road.ms) * MAX_PATCH_POINTS, NEAR_COLUMNS))
    return tab, own["cut"], own["mcut"], own["depth"], placed, at, out


def mesh_box_rows(scene, boxes, q, cut, others=None, other_cut=None):
    """The rows (B * MAX_PATCH_POINTS, 11) (:func:`~sparsedyn.collision_candidates_near`'s columns) of
    the pairs ``boxes`` (B,) of a robot mesh and a world box at ``q`` (nq,), each pair's patch within
    its cutoff ``cut`` (B,) [m] (:func:`~sparsedyn.collide`'s hits of the pair: coal's closest pair of
    the mesh's hull and the box, the hull vertices on its face) in its first rows; the other rows'
    distance is +inf.  ``others`` (O,): scene pairs without rows, ``other_cut`` (O,) their cutoffs
    [m]: None where the broad phase leaves one of them within its cutoff or cannot be run natively
    (module docstring)."""
    out = np.zeros((len(boxes) * MAX_PATCH_POINTS, NEAR_COLUMNS))
    out[:, 0] = np.inf
    some = others is not None and len(others) > 0
    if not len(boxes) and not some:
        return out
    R, p = placements(scene, q)
    bounded = False
    if use_backend.current() != "numpy":           # the native broad phase (the other pairs' cutoff -inf: out)
        plan = _collision_plan(scene)
        full = np.full(len(scene.index), -np.inf)
        full[boxes] = cut
        if some:
            full[others] = other_cut
        near = near_pairs(scene, R, p, full, plan["c"], plan["r"])
        if near is not None:
            if some and near.take(others).any():
                return None                        # a pair without rows may touch: the Contact objects' road
            keep = near.take(boxes)
            boxes_near, cut, bounded = boxes[keep], np.asarray(cut, float)[keep], True
    if some and not bounded:
        return None
    if not len(boxes):
        return out
    (k, d, wa, wb, n), _ = _mesh_box_pairs(scene, boxes_near if bounded else boxes, R, p, cut, bounded)
    at = MAX_PATCH_POINTS * np.searchsorted(boxes, k) + np.arange(len(k)) - np.searchsorted(k, k)
    a = scene.index[k, 0]
    E = np.array([scene.shapes[i].R for i in a.tolist()]).reshape(-1, 3, 3)      # the shape in its body
    r = np.array([scene.shapes[i].p for i in a.tolist()]).reshape(-1, 3)
    Rb = np.einsum("kij,klj->kil", R[a], E)                                     # the body's axes (world)
    ob = p[a] - np.einsum("kij,kj->ki", Rb, r)
    out[at, 0], out[at, 1:4], out[at, 4:7] = d, (wa + wb) / 2, n
    out[at, 7:10], out[at, 10] = np.einsum("kji,kj->ki", Rb, wa - ob), np.einsum("ki,ki->k", n, wb)
    return out
