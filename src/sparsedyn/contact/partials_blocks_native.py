"""One state's pieces of the derivatives of a step in a scene and the six blocks made of them, in one
native call: :func:`partials_blocks_call`.

:func:`~sparsedyn.contact.fused_derivatives.fused_derivatives` runs the pieces' compiled kernel
(:func:`~sparsedyn.scene_step_partials`, its one-state entry) and the routine that writes the six blocks
(:mod:`~sparsedyn.contact.derivative_blocks_native`) one after the other on the pieces' arrays ``rows``
and ``state``, which nothing else reads.  The entry here calls both: the kernel's entry (its address
given with the routine's parameters) writes the pieces into the routine's own workspace, so that they
are neither allocated as arrays nor handed back and checked between two calls; the same code on the
same values, so the same blocks bit for bit.  Where the compiled kernels' fast path declines a call
(an input or a result not finite) it goes to the two calls.  :func:`folded_call` runs the routine that
lays the step's impulses and modes out in the slots (:mod:`~sparsedyn.contact.slot_modes_native`, or the
gathering of :mod:`~sparsedyn.contact.derivative_replay`) in the same call first, its outputs on the stack.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine, native_function
from .derivative_blocks_native import SOURCE as BLOCKS
from .derivative_replay import SOURCE as SLOT_ROUTINES
from .min_norm import RANK_RCOND
from .state_derivatives_native import _work_size

__all__ = ["partials_blocks_call", "folded_call", "SOURCE", "FOLDED"]

#: :mod:`~sparsedyn.contact.derivative_blocks_native`'s routine and ``sd_scene_partials_blocks(q, v, v_next,
#: impulses, correction, modes, contact_data, gravity, par, b0 .. b5, rc)``: ``par = [nv, ns, dt, rcond,
#: workspace doubles, entry, shapes (ns * 12)]`` (``entry``: the address of the pieces' one-state entry
#: ``(q, v, v_next, impulses, correction, modes, contact_data, shapes, gravity, dt, rows, state, gap)``, an
#: integer below 2^53, so exact); the pieces written to the workspace, then the blocks routine on them
#: (``b0 .. b5``, ``rc`` as ``sd_scene_derivative_blocks`` writes them; -1 where the workspace cannot be
#: allocated).
SOURCE = BLOCKS + r"""
typedef void (*sd_spb_pieces)(const double *, const double *, const double *, const double *, const double *,
                              const double *, const double *, const double *, const double *, const double *,
                              double *, double *, double *);

/* the pieces of the slots whose shapes (ns, 12) are given, then the blocks (par's first six entries read) */
static void sd_spb_run(const double *q, const double *v, const double *vn, const double *lam, const double *corr,
                       const double *modes, const double *data, const double *gravity, const double *par,
                       const double *shapes, double *const *b, double *rc)
{
  long long nv = (long long)par[0], ns = (long long)par[1], m = 3 * ns, kp = SD_SDV_PAD(3 * nv);
  long long work = (long long)par[4], nrows = m * (6 * nv + m + SD_SDV_AB), nstate = nv * (7 * nv + 1);
  __SIZE_TYPE__ bytes = ((__SIZE_TYPE__)(work + 2 * nv * kp + nrows + nstate + ns) * 8 + 63) / 64 * 64;
  double *w = aligned_alloc(64, bytes);
  if (!w) { rc[0] = -1.0; return; }
  double *out = w + work, *rows = out + 2 * nv * kp, *state = rows + nrows, *gap = state + nstate;
  sd_spb_pieces pieces = (sd_spb_pieces)(__UINTPTR_TYPE__)par[5];
  pieces(q, v, vn, lam, corr, modes, data, shapes, gravity, par + 2, rows, state, gap);
  rc[0] = sd_scene_state_derivatives(nv, ns, rows, state, modes, corr, par[2], par[3], out, w);
  if (rc[0] >= 0.0) sd_sdb_blocks(nv, kp, out, b);
  free(w);
}

SD_EXPORT void sd_scene_partials_blocks(const double *q, const double *v, const double *vn, const double *lam,
                                        const double *corr, const double *modes, const double *data,
                                        const double *gravity, const double *par, double *b0, double *b1,
                                        double *b2, double *b3, double *b4, double *b5, double *rc)
{
  double *b[6] = {b0, b1, b2, b3, b4, b5};
  sd_spb_run(q, v, vn, lam, corr, modes, data, gravity, par, par + 6, b, rc);
}
"""


def partials_blocks_call(pieces, shapes, nq, nv, ns, dt, blocks, blocks_par, dt_array):
    """``(g, par)``: ``g(q, v, v_next, impulses, correction, modes, contact_data, gravity, par) -> (b0, .. b5
    (nv, nv), rc (1,))``, the six blocks of the derivatives of a step whose pieces the compiled kernel
    ``pieces`` (the one-state fast kernel of :func:`~sparsedyn.scene_step_partials` for the step's slots;
    its ``entry``, the address of its one-state entry) makes of the step's arrays and the slots'
    ``shapes`` (ns, 12), for ``nq`` coordinates, ``nv`` joint velocities, ``ns`` slots and the time step
    ``dt``; in one native
    call through the compiled kernels' fast path, whose fallback is the two calls (``pieces`` on the shapes
    in the ``par`` it is given, then
    ``blocks`` with ``blocks_par``, :func:`~sparsedyn.contact.derivative_blocks_native.blocks_call`'s, and
    ``dt_array`` the pieces' ``dt`` (1,)).  None where the fast path or the library is not there or
    ``pieces`` has no entry."""
    entry, fast = getattr(pieces, "entry", None), native_function("Kernel")
    if type(entry) is not int or not 0 < entry < 2 ** 53 or fast is None:
        return None
    f = c_routine(SOURCE, "sd_scene_partials_blocks", [ctypes.POINTER(ctypes.c_double)] * 16)
    if f is None:
        return None
    shapes = np.ascontiguousarray(shapes, float)
    par = np.concatenate([[nv, ns, dt, RANK_RCOND, _work_size(nv, ns), float(entry)], shapes.reshape(-1)])
    par.flags.writeable = False

    def two_calls(q, v, v_next, impulses, correction, modes, data, gravity, par):
        p = pieces(q, v, v_next, impulses, correction, modes, data, par[6:].reshape(ns, -1), gravity, dt_array)
        return blocks(p[0], p[1], modes, correction, blocks_par)
    ins = ((nq,), (nv,), (nv,), (ns, 3), (ns,), (ns, 4), (ns, 8), (3,), (len(par),))
    return fast(ctypes.cast(f, ctypes.c_void_p).value, ins, ((nv, nv),) * 6 + ((1,),), two_calls), par


#: :data:`SOURCE`, the slots' routines (:data:`~sparsedyn.contact.derivative_replay.SOURCE`: the slots' modes
#: and the gathering of their data) and two entries that run one of them before the pieces and the blocks,
#: in one call: ``sd_scene_slots_partials_blocks(q, v, v_next, lam, u, report, corr, at, data, gravity, par,
#: b0 .. b5, rc)`` (``par = [first six of SOURCE's, tol, ns, shapes]``: ``sd_slot_modes`` on the step
#: kernel's rows ``lam``, ``u``, ``report``, ``corr`` with ``par[6:8]``) and
#: ``sd_scene_gathered_partials_blocks(q, v, v_next, lam, u, report, corr, at, c, gather, gravity, par, b0 ..
#: b5, rc)`` (``par = [first six, tol, ns, n, plain, shapes]``: ``sd_gathered_slots`` with ``par[6:10]``,
#: the slots' data its own); the slots' outputs on the stack, then the entry above on them.
FOLDED = SLOT_ROUTINES + SOURCE + r"""
SD_EXPORT void sd_scene_slots_partials_blocks(const double *q, const double *v, const double *vn, const double *lam,
                                              const double *u, const double *rep, const double *corr,
                                              const double *at, const double *data, const double *gravity,
                                              const double *par, double *b0, double *b1, double *b2, double *b3,
                                              double *b4, double *b5, double *rc)
{
  long long ns = (long long)par[1], n = ns > 0 ? ns : 1;
  double weights[4 * n], lam_s[3 * n], corr_s[n], codes[n], data_s[8 * n], mu[n], *b[6] = {b0, b1, b2, b3, b4, b5};
  sd_slot_modes(lam, u, rep, corr, at, data, par + 6, weights, lam_s, corr_s, codes, data_s, mu);
  sd_spb_run(q, v, vn, lam_s, corr_s, weights, data, gravity, par, par + 8, b, rc);
}

SD_EXPORT void sd_scene_gathered_partials_blocks(const double *q, const double *v, const double *vn,
                                                 const double *lam, const double *u, const double *rep,
                                                 const double *corr, const double *at, const double *c,
                                                 const double *gather, const double *gravity, const double *par,
                                                 double *b0, double *b1, double *b2, double *b3, double *b4,
                                                 double *b5, double *rc)
{
  long long ns = (long long)par[1], n = ns > 0 ? ns : 1;
  double weights[4 * n], lam_s[3 * n], corr_s[n], data[8 * n], *b[6] = {b0, b1, b2, b3, b4, b5};
  sd_gathered_slots(lam, u, rep, corr, at, c, gather, par + 6, weights, lam_s, corr_s, data);
  sd_spb_run(q, v, vn, lam_s, corr_s, weights, data, gravity, par, par + 10, b, rc);
}
"""


def folded_call(pb_par, lead, ins, gathered, fallback):
    """``(g, par)``: ``g(q, v, v_next, *slot inputs, gravity, par) -> (b0, .. b5 (nv, nv), rc (1,))``, the
    slots' routine and the pieces and blocks of :func:`partials_blocks_call` (whose ``par`` is ``pb_par``)
    in one native call (:data:`FOLDED`): ``gathered`` the gathering routine's entry (slot inputs ``lam, u,
    report, corr, at, c, gather``) else the slots' modes' (``lam, u, report, corr, at, data``), the shapes
    ``ins`` of all inputs but ``par``, ``lead`` the routine's parameters (``[tol, ns]``, or ``[tol, ns, n,
    plain]``); ``fallback`` (the same arguments) the separate calls, where the fast path declines.  None where the fast path or
    the library is not there."""
    fast = native_function("Kernel")
    name = "sd_scene_gathered_partials_blocks" if gathered else "sd_scene_slots_partials_blocks"
    f = None if fast is None else c_routine(FOLDED, name, [ctypes.POINTER(ctypes.c_double)] * (len(ins) + 8))
    if f is None:
        return None
    nv = int(pb_par[0])
    par = np.concatenate([pb_par[:6], np.asarray(lead, float), pb_par[6:]])
    par.flags.writeable = False
    return fast(ctypes.cast(f, ctypes.c_void_p).value, tuple(ins) + ((len(par),),), ((nv, nv),) * 6 + ((1,),),
                fallback), par
