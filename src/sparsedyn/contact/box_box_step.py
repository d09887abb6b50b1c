"""A step's candidates in a scene of the collision kernel's pairs and pairs of two boxes, in four
native calls: :func:`box_box_step_rows` (and pairs of two convex shapes that coal measures and a robot's
shapes on a world height field beside them, :func:`~sparsedyn.contact.hull_pairs.hull_rows` and
:func:`~sparsedyn.contact.collision_hfield.hfield_rows`, from the routine's look-ahead; a scene with no
pair of two boxes runs the routine for its look-ahead alone).

The general road of such a scene's step (``scene_data._mixed_candidates``) computes each pair's
look-ahead (:func:`~sparsedyn.contact.look_ahead.pair_cutoffs`), the pairs of two boxes' rows
(:func:`box_box_rows`: the routine of :mod:`~sparsedyn.contact.box_box_native`, each hit's
witness point then turned into its body's frame) and the kernel's candidates, some forty NumPy calls
of a few microseconds each.  Here the bodies' velocities and the robot's shapes' placements (the
model's native callables) are written into a buffer laid out once, then one C routine
(``sd_box_box_step`` of :mod:`~sparsedyn.contact.box_box_c`) computes the look-ahead, gathers the
pairs' poses, runs the routine and writes their rows, then the collision kernel writes its
candidates beside them: the same operations as the general road's (the look-ahead's sums of three
squares to rounding).
"""

from __future__ import annotations

import ctypes
import math
from threading import get_ident

import numpy as np

from ..kernels import native_calls
from .box_box_native import _PAR, ROWS, box_box_hits, routine
from .collision_near import NEAR_COLUMNS, collision_candidates_near, free_rows
from .box_box_road import box_box_poses, box_box_road_hits, extra_rows, no_boxes
from .collision import placements
from .hull_pairs import shape_poses
from .look_ahead import _pair_bodies, body_reach

__all__ = ["box_box_rows", "box_box_step_rows", "step_buffers", "one_state"]

_NEAR, _BV, _GP = collision_candidates_near.__name__, "body_velocities", "geometry_placements"
_F64 = np.dtype(float)
_KEY = "box-box step rows"


def one_state(model, q, v, dt):
    """Whether ``q`` (nq,), ``v`` (nv,) are float64 arrays of ``model``'s shapes and ``dt`` a number in
    (0, inf): one step's state, as the native calls take it."""
    return (type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,) and type(v) is np.ndarray
            and v.dtype is _F64 and v.shape == (model.nv,) and type(dt) in (float, int) and 0 < dt < np.inf)


def _step_routine():
    """``sd_box_box_step`` (ctypes), or None without a C compiler."""
    return routine("sd_box_box_step", [ctypes.c_void_p, ctypes.c_void_p])


def _scratch(scene, mixed, poses):
    """This thread's ``(routine, plan's address, buffer's address, V, placements' outputs or None, top,
    kernel's rows or None, rows, within, md, the three native callables, the kernel plan, q's and v's
    shapes, the rows' order, [the dt in md], (the plan, the buffer), extras)`` of ``mixed``
    (``scene_data``'s plan of the scene's pairs; ``poses``:
    :func:`~sparsedyn.contact.box_box_road.box_box_poses`, the gather of its pairs of two boxes' poses, of
    none where it has none), laid out once per thread while the plan stays (``scene.cache``); ``extras``
    None, or where the plan has pairs for coal or on height fields ``(hulls, fields, held)`` of
    :func:`~sparsedyn.contact.box_box_road.extra_rows` (the look-ahead its cutoffs); False
    where the plan has other pairs than the kernel's, two boxes', coal's and on height fields (never this
    road), None where a routine or a native callable is not built (asked again at the next call)."""
    got = scene.cache.get(_KEY)
    if got is None or got[0] is not mixed:
        got = scene.cache[_KEY] = (mixed, {})
    model, bb, kp = scene.model, _boxes(scene, mixed), mixed.kernel
    K1 = len(kp.pair) if kp.pairs else 0
    H, F = len(mixed.hulls), int(mixed.fields[1].sum())
    if mixed.mesh is not None or len(mixed.boxes) or len(mixed.pair) != K1 + ROWS * len(bb.pair) + H + F:
        got[1][get_ident()] = False
        return False
    calls = native_calls(model) or {}
    road, f, kernel = poses(scene, bb), _step_routine(), calls.get(_NEAR) if kp.pairs else None
    if road is None or f is None or calls.get(_BV) is None or calls.get(_GP) is None or (kp.pairs and kernel is None):
        return None
    P, S, NB, K, G = len(bb.pair), len(scene.index), model.nbodies, len(mixed.pair), road.G
    nsrc = 12 * G + len(road.const)
    # V, rho, cut, top, par, within, rows (the kernel's K1, then the boxes'), src, E, r, md, s
    sizes = [6 * NB, NB, S, 1, 2, K, NEAR_COLUMNS * K, nsrc, 9 * P, 3 * P, 2, NB + 1]
    offs = np.cumsum([0] + sizes).tolist()
    buf = np.zeros(offs[-1])
    view = [buf[a:b] for a, b in zip(offs[:-1], offs[1:])]
    view[1][:] = body_reach(scene)[0]
    view[4][:] = _PAR
    view[7][12 * G:] = road.const
    view[8][:], view[9][:] = bb.E.reshape(-1), bb.r.reshape(-1)
    view[10][0] = scene.margin
    rows = view[6].reshape(K, NEAR_COLUMNS)
    head = [P, S, NB, K] + offs[:6] + [offs[6] + NEAR_COLUMNS * K1] + offs[7:12]
    plan = np.concatenate([head, road.gather, _pair_bodies(scene).reshape(-1), bb.pair, mixed.pair]).astype(np.int64)
    outs = (view[7][:9 * G].reshape(G, 3, 3), view[7][9 * G:12 * G].reshape(G, 3)) if G else None
    extras = (mixed.hulls, mixed.fields, (*shape_poses(scene), view[2], rows[K - H - F:])) if H or F else None
    kept = got[1][get_ident()] = (
        f, plan.ctypes.data, buf.ctypes.data, view[0].reshape(NB, 6), outs, view[3].reshape(()),
        rows[:K1] if K1 else None, rows, view[5], view[10], calls[_BV], calls[_GP], kernel, kp,
        (model.nq,), (model.nv,), mixed.order, [0.0], (plan, buf), extras)
    return kept


def _boxes(scene, mixed):
    """The plan of ``mixed``'s pairs of two boxes, or of none where it has none."""
    return mixed.bb if mixed.bb is not None else no_boxes(scene)


def step_buffers(scene, mixed, poses):
    """This thread's buffers and callables of :func:`box_box_step_rows` for ``mixed`` (``scene_data``'s
    plan) and ``poses`` (:func:`~sparsedyn.contact.box_box_road.box_box_poses`): the tuple that
    ``_scratch`` lays out once per thread (its docstring), False where the plan has pairs other than the
    kernel's and two boxes', None where a routine or a native callable is not built yet."""
    got = scene.cache.get(_KEY)
    kept = got[1].get(get_ident()) if got is not None and got[0] is mixed else None
    return _scratch(scene, mixed, poses) if kept is None else kept


def box_box_step_rows(scene, mixed, poses, q, v, dt, fresh=True):
    """``(rows, within)`` of ``mixed`` (``scene_data``'s plan of the scene's pairs; ``poses``:
    :func:`~sparsedyn.contact.box_box_road.box_box_poses`, whose gather the buffer holds) for a
    step of ``dt`` (a number > 0) from ``q`` (nq,) at ``v`` (nv,) (float64 arrays): the candidates
    (K, 11) as ``scene_data._mixed_candidates`` gives them (the kernel's, then each pair of two boxes'
    ``ROWS``, in the plan's order) and each one's pair's look-ahead (K,) [m], new arrays; None where
    the plan has other pairs than the collision kernel's and pairs of two boxes, where ``q``, ``v``
    or ``dt`` is not one state's, where ``poses`` or a routine or a native callable is not built, or
    where the bodies' velocities decline the state: the general road then answers.  ``fresh`` False:
    the rows and the look-ahead are this thread's buffers (in the plan's order: new rows where it has
    one), which the next call overwrites, for a caller that reads them before it (a step's native
    call that keeps nothing of them)."""
    kept = step_buffers(scene, mixed, poses)
    if not kept or poses(scene, _boxes(scene, mixed)) is None:       # (the gather declined: the general road)
        return None
    f, plan, buf, V, outs, top, kern, rows, within, md, bv, gp, near, kp, nq, nv, order, last, _, extras = kept
    if not (type(q) is np.ndarray and q.dtype is _F64 and q.shape == nq and type(v) is np.ndarray
            and v.dtype is _F64 and v.shape == nv and type(dt) in (float, int) and 0 < dt < math.inf):
        return None
    if bv(q, v, out=V) is None:
        return None
    if outs is not None:
        gp(q, "collision", out=outs)
    if dt != last[0]:                                      # (a trajectory's dt: written once)
        md[1] = last[0] = dt
    f(plan, buf)
    if kern is not None:
        near(q, kp.shapes, top, kp.pairs, out=kern)
    if extras is not None and extra_rows(scene, *extras, outs) is None:    # (from the routine's look-ahead)
        return None
    if not fresh:
        return (rows if order is None else rows.take(order, 0)), within
    return (rows.copy() if order is None else rows.take(order, 0)), within.copy()


def box_box_rows(scene, bb, q, cut):
    """The rows (B * ROWS, 11) (:func:`~sparsedyn.collision_candidates_near`'s columns) of the pairs of
    two boxes of ``bb`` (a :class:`~sparsedyn.contact.box_box_native.BoxBoxPlan`) at ``q`` (nq,), each
    pair's hits within its cutoff ``cut`` (B,) [m] (:func:`~sparsedyn.collide`'s, from the native
    routine) in its first rows, the other rows' distance +inf; a batch ``q`` (n, nq), ``cut`` (n, B):
    (n, B * ROWS, 11), state by state."""
    if np.ndim(q) > 1:
        return np.stack([box_box_rows(scene, bb, x, c) for x, c in zip(q, cut)]).reshape(
            np.shape(q)[:-1] + (len(bb.pair) * ROWS, NEAR_COLUMNS))
    out = free_rows((len(bb.pair) * ROWS,))
    road = box_box_poses(scene, bb) if type(q) is np.ndarray and q.dtype is _F64 and q.shape == (scene.model.nq,) \
        else None                                          # (the routine's poses gathered as laid out once)
    got = None if road is None else box_box_road_hits(scene, road, q, cut)
    if got is None:
        R, p = placements(scene, q)
        got = box_box_hits(R[bb.ia], p[bb.ia], bb.ha, R[bb.ib], p[bb.ib], bb.hb, cut, cut)
        k = got[0]
        got = (ROWS * k + np.arange(len(k)) - np.searchsorted(k, k), *got, R[bb.ia[k]], p[bb.ia[k]])
    at, k, d, wa, wb, n, Ra, pa = got
    x = (Ra.transpose(0, 2, 1) @ (wa - pa)[:, :, None])[:, :, 0]              # w_a in a's frame, then its body's
    out[at, 0], out[at, 1:4], out[at, 4:7] = d, (wa + wb) / 2, n
    out[at, 7:10], out[at, 10] = (bb.E[k] * x[:, None]).sum(2) + bb.r[k], (n * wb).sum(1)   # (sd_box_box_step's sums)
    return out
