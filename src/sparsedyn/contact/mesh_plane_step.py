"""A step's candidates in a scene of the collision kernel's pairs and robot meshes on world planes,
bound once: :func:`plane_step_rows`.

The general road of such a scene's step (``scene_data._mixed_candidates``) asks the model's native
callables for the bodies' velocities and poses, hands them to ``sd_step_rows`` of
:mod:`~sparsedyn.contact.mesh_plane_loop` (each pair's look-ahead and the mesh-plane rows, one call)
through ctypes' typed arguments (each array converted at each call), then asks the collision kernel
for its candidates with the largest look-ahead and joins the two tables, some twenty NumPy and ctypes
calls.  Here the velocities, the poses, the look-ahead and the rows are written into buffers laid out
once per scene and thread (``scene.cache``), every address handed to the routine made once (an
untyped ctypes function of its own, ``sd_step_rows_packed``, its arguments one table of addresses:
``sd_step_rows`` after its check of the velocities' sum, then the kernel's cutoff and each
candidate's look-ahead written in the same call):
the same routine on the same numbers, the same kernel call with the same cutoff, so the same rows
bit for bit.  A scene with more pairs (robot meshes on world boxes, pairs of two boxes, coal's pairs,
height fields) takes this road too: their rows (``scene_data._other_rows``, from the look-ahead the
routine wrote) fill the buffer's rows after these.  :func:`plane_stages` hands the same calls on the same
buffers to the step's native call as its stages, as :mod:`~sparsedyn.contact.box_box_fused` does those of pairs
of two boxes: a step is then one call from Python.
"""

from __future__ import annotations

import ctypes
import math
from threading import get_ident

import numpy as np

from ..algorithms.kinematics import body_velocities, forward_kinematics
from ..kernels import c_library, native_calls, use_backend
from .box_box_fused import _kernel, box_box_stages, found_of
from .box_box_road import box_box_poses
from .collision_near import NEAR_COLUMNS, SLACK, collision_candidates_near
from .look_ahead import body_reach
from .mesh_plane_loop import SOURCE, loop_plan
from .reduction import MAX_PATCH_POINTS, PATCH_DEPTH, SPAN

__all__ = ["plane_step_rows", "plane_stages", "found_stages", "boxes_alone", "meshes_on_planes"]

_NEAR, _FK, _BV = collision_candidates_near.__name__, forward_kinematics.__name__, body_velocities.__name__
_F64 = np.dtype(float)
_KEY, _STAGES = "mesh-plane step rows", "mesh-plane stages"


def _scratch(scene, mixed, q, v):
    """This thread's bound call of ``mixed`` (``scene_data``'s plan of the scene's pairs), laid out
    once per thread while the plan stays (``scene.cache``): ``(routine, head, tail, V, R, o, cut, top,
    rows, kernel's rows or None, the three native callables, the kernel plan, q's and v's shapes, the
    rows' order, [dt, its c_double], held arrays)``; False where the plan has pairs other than the
    kernel's and the mesh-plane loop's (never this road), None where the routine or a native callable
    is not built (asked again at the next call).  ``q``, ``v``: one state's, whose velocities and poses
    give the buffers' shapes."""
    got = scene.cache.get(_KEY)
    if got is None or got[0] is not mixed:
        got = scene.cache[_KEY] = (mixed, {})
    model, kp, mesh = scene.model, mixed.kernel, mixed.mesh
    lp = loop_plan(scene) if mesh is not None else None
    K1 = len(kp.pair) if kp.pairs else 0
    if lp is None or not np.array_equal(lp.pair, mesh["pairs"]) or \
            len(mixed.pair) < K1 + MAX_PATCH_POINTS * len(lp.pair):
        got[1][get_ident()] = False
        return False
    lib = c_library(SOURCE)
    calls = native_calls(model) or {}
    near = calls.get(_NEAR) if kp.pairs else None
    if lib is None or calls.get(_FK) is None or calls.get(_BV) is None or (kp.pairs and near is None):
        return None
    f = lib["sd_step_rows_packed"]                 # (a new function object: untyped, its own)
    f.restype = ctypes.c_longlong
    P, Q, K = len(lp.pair), len(scene.index), len(mixed.pair)
    ends = np.ascontiguousarray(np.array([s.body for s in scene.shapes], np.int64)[scene.index].reshape(-1, 2))
    pair, rho = np.ascontiguousarray(lp.pair, np.int64), np.array(body_reach(scene)[0], float)
    par = np.array([lp.margin, PATCH_DEPTH, SLACK, SPAN, SPAN ** 2])
    V = np.array(calls[_BV](q, v), float, order="C")
    R, o = (np.array(x, float, order="C") for x in calls[_FK](q))
    cut, top, rows, within = np.zeros(Q), np.zeros(()), np.zeros((K, NEAR_COLUMNS)), np.zeros(K)
    pick = np.ascontiguousarray(mixed.pair, np.int64)
    # the routine's arguments but dt, one table of addresses and counts (the routine also checks the
    # velocities, and writes the kernel's cutoff and each candidate's look-ahead)
    at = lambda x: x.ctypes.data                                            # noqa: E731
    table = np.array([Q, at(ends), at(rho), at(cut), P, at(pair), at(lp.body), at(R), at(o), at(lp.axes), at(lp.pb),
                      at(lp.hull), at(lp.rows), at(lp.spheres), at(V), at(par), at(rows[K1:]), len(V), at(top), K,
                      at(pick), at(within)], np.int64)
    head, tail = (ctypes.c_void_p(table.ctypes.data),), ()
    kept = got[1][get_ident()] = (
        f, head, tail, V, R, o, cut, top, rows, rows[:K1] if K1 else None, calls[_FK], calls[_BV], near, kp,
        (model.nq,), (model.nv,), mixed.order, [None, None], (ends, pair, rho, par, lp, pick, table), mixed.pair,
        within, K1 + MAX_PATCH_POINTS * P)
    return kept


def plane_step_rows(scene, mixed, q, v, dt, fresh=True, rest=None):
    """``(rows, within)`` of ``mixed`` (``scene_data``'s plan of the scene's pairs) for a step of
    ``dt`` (a number > 0) from ``q`` (nq,) at ``v`` (nv,) (float64 arrays): the candidates (K, 11)
    as ``scene_data._mixed_candidates`` gives them (the kernel's with the largest look-ahead, then
    each mesh-plane pair's :data:`~sparsedyn.contact.reduction.MAX_PATCH_POINTS` rows of
    :func:`~sparsedyn.contact.mesh_plane_loop.mesh_plane_step_rows`, in the plan's order) and each
    one's pair's look-ahead (K,) [m], new arrays; None where the plan has no mesh-plane pairs, where ``q``,
    ``v`` or ``dt`` is not one state's, on the NumPy backend, where a routine or a native callable is
    not built, or where the bodies' velocities are not finite: the general road then answers.
    ``fresh`` False: the rows and the look-ahead are this thread's buffers (in the plan's order: new
    rows where it has one), which the next call overwrites, for a caller that reads them before it (a
    step's native call that keeps nothing of them).  A plan with more pairs (meshes on world boxes, pairs
    of two boxes, coal's, height fields') has their rows from ``rest(cut)``, given every scene pair's
    look-ahead ``cut`` (Q,): a list of arrays (k, 11) joined after the mesh-plane rows, or None (no rows:
    None here too)."""
    got = scene.cache.get(_KEY)
    kept = got[1].get(get_ident()) if got is not None and got[0] is mixed else None
    if kept is None:
        model = scene.model
        if not (type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,) and type(v) is np.ndarray
                and v.dtype is _F64 and v.shape == (model.nv,)) or use_backend.current() == "numpy":
            return None
        kept = _scratch(scene, mixed, q, v)
    if not kept or use_backend.current() == "numpy":
        return None
    f, head, tail, V, R, o, cut, top, rows, kern, fk, bv, near, kp, nq, nv, order, last, _, _, within, filled = kept
    if not (type(q) is np.ndarray and q.dtype is _F64 and q.shape == nq and type(v) is np.ndarray
            and v.dtype is _F64 and v.shape == nv and type(dt) in (float, int) and 0 < dt < math.inf):
        return None
    got = bv(q, v, out=V)
    if got is not V:
        if got is None:
            return None
        V[...] = got
    got = fk(q, out=(R, o))
    if got[0] is not R or got[1] is not o:
        R[...], o[...] = got
    if dt != last[0]:                              # (a trajectory's dt: made once)
        last[:] = dt, ctypes.c_double(float(dt))
    # (top: the largest look-ahead, at least the margin; within: each candidate's pair's look-ahead)
    hits = f(*head, last[1], *tail)
    if hits < 0:
        if hits == -2:                             # (velocities whose sum overflows: pair_cutoffs, the general road)
            return None
        raise MemoryError("mesh-plane contacts: no memory for the routine's workspace")
    if kern is not None:
        near(q, kp.shapes, top, kp.pairs, out=kern)
    if filled < len(rows):                         # (the plan's other pairs: their rows after these)
        more = None if rest is None else rest(cut)
        if more is None:
            return None
        if len(more):
            rows[filled:] = more[0] if len(more) == 1 else np.concatenate(more, -2)
    if not fresh:
        return (rows if order is None else rows.take(order, 0)), within
    return (rows.copy() if order is None else rows.take(order, 0)), within.copy()


def plane_stages(scene, mixed, q, v):
    """This thread's ``(found, md, last)`` for ``mixed`` (robot meshes on planes and the collision kernel's
    pairs alone), as :func:`~sparsedyn.contact.box_box_fused.box_box_stages` gives them: ``found`` the step's
    native call's (``scene_step``) ``(rows, within, stages)``, the buffers of :func:`plane_step_rows` and the
    native calls that fill them from the call's ``q`` and ``v`` (the bodies' velocities, their poses, the
    routine, the collision kernel, the rows put in the plan's order), ``md`` the buffer whose entry 1 the
    routine reads as the step's dt, ``last`` ``[that dt]``; False where the plan has other pairs, None where
    a routine or a kernel is not built yet, or ``q``, ``v`` are not one state's float64 arrays."""
    got = scene.cache.get(_STAGES)
    kept = got[1].get(get_ident()) if got is not None and got[0] is mixed else None
    if kept is not None:
        return kept
    model = scene.model
    if not (type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,) and type(v) is np.ndarray
            and v.dtype is _F64 and v.shape == (model.nv,)) or use_backend.current() == "numpy":
        return None
    got = scene.cache.get(_KEY)
    buffers = got[1].get(get_ident()) if got is not None and got[0] is mixed else None
    buffers = _scratch(scene, mixed, q, v) if buffers is None else buffers
    if not buffers:
        return buffers
    _, _, _, V, R, o, _, top, rows, kern, fk, bv, near, kp, _, _, order, _, held, _, within, filled = buffers
    if filled < len(rows):                         # (the plan's other pairs: their rows from Python)
        return False
    bk, gk, nk = _kernel(bv, ()), _kernel(fk, ()), _kernel(near, (kp.pairs,)) if kern is not None else None
    lib = c_library(SOURCE)
    if bk is None or gk is None or (kern is not None and nk is None) or lib is None:
        return None
    md = np.array([scene.margin, np.nan])
    # q and v: the call's (the ints 0 and 1); plane_step_rows' calls in its order
    stages = ((bk, (0, 1), V), (gk, (0,), (R, o)),
              (ctypes.cast(lib["sd_step_rows_stage"], ctypes.c_void_p).value, held[6], md))
    kept = found_of(stages, (nk, kp.shapes, top, kern), order, rows, within), md, [None]
    got = scene.cache.get(_STAGES)
    if got is None or got[0] is not mixed:
        got = scene.cache[_STAGES] = (mixed, {})
    got[1][get_ident()] = kept
    return kept


def boxes_alone(mixed):
    """Whether a mixed plan's pairs are the collision kernel's and pairs of two boxes alone."""
    return mixed.mesh is None and not len(mixed.boxes) and mixed.bb is not None


def meshes_on_planes(mixed):
    """Whether a mixed plan's pairs are the collision kernel's and robot meshes on planes alone."""
    return mixed.mesh is not None and not len(mixed.boxes) and mixed.bb is None


def found_stages(scene, mixed, q, v):
    """This thread's ``(found, md, last)`` of a plan ``mixed`` whose pairs beside the collision kernel's are
    pairs of two boxes alone (:func:`~sparsedyn.contact.box_box_fused.box_box_stages`) or robot meshes on
    planes alone (:func:`plane_stages`, at one state's ``q`` and ``v``): the stages a step's native call runs
    to find its candidates; False where the plan has other pairs (or these never apply), None where a
    routine or a kernel is not built yet."""
    if boxes_alone(mixed):
        return box_box_stages(scene, mixed, box_box_poses)
    return plane_stages(scene, mixed, q, v) if meshes_on_planes(mixed) else False
