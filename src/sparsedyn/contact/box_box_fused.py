"""A step's candidates of pairs of two boxes found inside the step's native call: :func:`box_box_found`.

:func:`~sparsedyn.contact.box_box_step.box_box_step_rows` finds the candidates of a scene whose pairs
are the collision kernel's and pairs of two boxes in four native calls from Python (the bodies'
velocities, the robot's shapes' placements, the box-box routine ``sd_box_box_step`` with its
look-ahead, the collision kernel), then hands them to the step's native call
(:func:`~sparsedyn.contact.scene_fused.mixed_call`).  Here the same four calls, on the same buffers
(that function's, laid out once per thread), are handed to the step's call as its stages
(``scene_step``'s ``found`` of three entries): the call runs them in the same order before it lays the
contacts out and solves, so that a step is one call from Python: the same operations on the same
numbers as the four calls', bit for bit.
"""

from __future__ import annotations

import ctypes
from threading import get_ident

import numpy as np

from .box_box_step import step_buffers

__all__ = ["box_box_found", "box_box_stages", "found_of"]

_KEY = "box-box fused stages"


def box_box_found(scene, mixed, poses, dt):
    """The ``found`` argument of the step's native call (``scene_step``) of ``mixed`` (``scene_data``'s
    plan of ``scene``'s pairs: the collision kernel's and pairs of two boxes; ``poses``:
    :func:`~sparsedyn.contact.box_box_road.box_box_poses`) for a step of ``dt`` (a float > 0): ``(rows
    (K, 11), within (K,), stages)``, this thread's buffers of
    :func:`~sparsedyn.contact.box_box_step.box_box_step_rows` and the native calls that fill them from
    the call's ``q`` and ``v`` (in the call: the rows and the look-ahead ``box_box_step_rows`` would
    return); None where that road does not apply (other pairs, a routine or a kernel not built yet)."""
    kept = box_box_stages(scene, mixed, poses)
    if not kept:
        return None
    found, md, last = kept
    if dt != last[0]:                                   # (the step's dt, read by the routine: written once)
        md[1] = last[0] = dt
    return found


def box_box_stages(scene, mixed, poses):
    """This thread's ``(found, md, last)`` for ``mixed``: ``found`` :func:`box_box_found`'s answer, ``md``
    the buffer whose entry 1 the routine reads as the step's dt, ``last`` ``[that dt]`` (a caller that
    binds them once writes each step's dt into both where it changes, as :func:`box_box_found` does);
    False where the road never applies, None where a routine or a kernel is not built yet."""
    got = scene.cache.get(_KEY)
    kept = got[1].get(get_ident()) if got is not None and got[0] is mixed else None
    return _stages(scene, mixed, poses) if kept is None else kept


def _stages(scene, mixed, poses):
    """``(found, md, last)`` of :func:`box_box_found` for this thread, kept in ``scene.cache`` while
    ``mixed`` stays (the buffers' own ``md`` and ``last``: a call of ``box_box_step_rows`` between two
    steps writes the same dt there); False where the road never applies, None where a routine or a
    kernel is not built yet (asked again at the next step)."""
    buffers = step_buffers(scene, mixed, poses)
    if buffers is None or poses(scene, mixed.bb) is None:
        return None
    kept = buffers and _laid_out(buffers)
    if kept is None:
        return None
    got = scene.cache.get(_KEY)
    if got is None or got[0] is not mixed:
        got = scene.cache[_KEY] = (mixed, {})
    got[1][get_ident()] = kept
    return kept


def _laid_out(buffers):
    """``(found, md, last)`` of ``box_box_step_rows``' ``buffers``, None where a kernel is not built yet, False
    where the plan has pairs for coal or on height fields (their rows come from Python)."""
    f, _, _, V, outs, top, kern, rows, within, md, bv, gp, near, kp, _, _, order, last, (plan, buf), extras = buffers
    if extras is not None:                              # (coal's pairs, height fields: their rows from Python)
        return False
    bk, gk = _kernel(bv, ()), _kernel(gp, ("collision",))
    nk = _kernel(near, (kp.pairs,)) if kern is not None else None
    if bk is None or (outs is not None and gk is None) or (kern is not None and nk is None):
        return None
    # q and v: the call's (the ints 0 and 1 stand for them); the stages in box_box_step_rows' order
    stages = ((bk, (0, 1), V),) + (((gk, (0,), outs),) if outs is not None else ()) + \
        ((ctypes.cast(f, ctypes.c_void_p).value, plan, buf),)
    return found_of(stages, (nk, kp.shapes, top, kern), order, rows, within), md, last


def found_of(stages, near, order, rows, within):
    """``(rows, within, stages)``, ``found`` of a step's native call whose ``stages`` fill ``rows`` (K, 11) and
    ``within`` (K,): those ``stages``, then the collision kernel's ``near`` ``(kernel, shapes, top, its rows)``
    (its rows None: no kernel's pairs), then, where ``order`` is not None, the rows taken in the plan's order
    (into a buffer of their own, as ``rows.take(order, 0)``)."""
    nk, shapes, top, kern = near
    stages += ((nk, (0, shapes, top), kern),) if kern is not None else ()
    if order is not None:
        order = np.ascontiguousarray(order, np.int64)
        out = np.empty((len(order), rows.shape[1]))
        stages += ((order, rows, out),)
        rows = out
    return rows, within, stages


def _kernel(method, key):
    """The built fast kernel of a native method for its static arguments ``key``, or None."""
    table = getattr(method, "__table__", None)
    f = table.get(key) if table is not None else None
    return f if type(f).__name__ == "Kernel" else None
