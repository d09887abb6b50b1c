"""One state's pieces of the derivatives of a step in a scene and the six blocks made of them, in one
native call: :func:`partials_blocks_call`.

:func:`~sparsedyn.contact.fused_derivatives.fused_derivatives` runs the pieces' compiled kernel
(:func:`~sparsedyn.scene_step_partials`, its one-state entry) and the routine that writes the six blocks
(:mod:`~sparsedyn.contact.derivative_blocks_native`) one after the other on the pieces' arrays ``rows``
and ``state``, which nothing else reads.  The entry here calls both: the kernel's entry (its address
given with the routine's parameters) writes the pieces into the routine's own workspace, so that they
are neither allocated as arrays nor handed back and checked between two calls; the same code on the
same values, so the same blocks bit for bit.  Where the compiled kernels' fast path declines a call
(an input or a result not finite) it goes to the two calls.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine, native_function
from .derivative_blocks_native import SOURCE as BLOCKS
from .min_norm import RANK_RCOND
from .state_derivatives_native import _work_size

__all__ = ["partials_blocks_call", "SOURCE"]

#: :mod:`~sparsedyn.contact.derivative_blocks_native`'s routine and ``sd_scene_partials_blocks(q, v, v_next,
#: impulses, correction, modes, contact_data, gravity, par, b0 .. b5, rc)``: ``par = [nv, ns, dt, rcond,
#: workspace doubles, entry, shapes (ns * 5)]`` (``entry``: the address of the pieces' one-state entry
#: ``(q, v, v_next, impulses, correction, modes, contact_data, shapes, gravity, dt, rows, state, gap)``, an
#: integer below 2^53, so exact); the pieces written to the workspace, then the blocks routine on them
#: (``b0 .. b5``, ``rc`` as ``sd_scene_derivative_blocks`` writes them; -1 where the workspace cannot be
#: allocated).
SOURCE = BLOCKS + r"""
typedef void (*sd_spb_pieces)(const double *, const double *, const double *, const double *, const double *,
                              const double *, const double *, const double *, const double *, const double *,
                              double *, double *, double *);

SD_EXPORT void sd_scene_partials_blocks(const double *q, const double *v, const double *vn, const double *lam,
                                        const double *corr, const double *modes, const double *data,
                                        const double *gravity, const double *par, double *b0, double *b1,
                                        double *b2, double *b3, double *b4, double *b5, double *rc)
{
  long long nv = (long long)par[0], ns = (long long)par[1], m = 3 * ns, kp = SD_SDV_PAD(3 * nv);
  long long work = (long long)par[4], nrows = m * (9 * nv + 2 * m), nstate = nv * (7 * nv + 1);
  __SIZE_TYPE__ bytes = ((__SIZE_TYPE__)(work + 2 * nv * kp + nrows + nstate + ns) * 8 + 63) / 64 * 64;
  double *w = aligned_alloc(64, bytes), *b[6] = {b0, b1, b2, b3, b4, b5};
  if (!w) { rc[0] = -1.0; return; }
  double *out = w + work, *rows = out + 2 * nv * kp, *state = rows + nrows, *gap = state + nstate;
  sd_spb_pieces pieces = (sd_spb_pieces)(__UINTPTR_TYPE__)par[5];
  pieces(q, v, vn, lam, corr, modes, data, par + 6, gravity, par + 2, rows, state, gap);
  rc[0] = sd_scene_state_derivatives(nv, ns, rows, state, modes, corr, par[2], par[3], out, w);
  if (rc[0] >= 0.0) sd_sdb_blocks(nv, kp, out, b);
  free(w);
}
"""


def partials_blocks_call(pieces, shapes, nq, nv, ns, dt, blocks, blocks_par, dt_array):
    """``(g, par)``: ``g(q, v, v_next, impulses, correction, modes, contact_data, gravity, par) -> (b0, .. b5
    (nv, nv), rc (1,))``, the six blocks of the derivatives of a step whose pieces the compiled kernel
    ``pieces`` (the one-state fast kernel of :func:`~sparsedyn.scene_step_partials` for the step's slots;
    its ``entry``, the address of its one-state entry) makes of the step's arrays and the slots'
    ``shapes`` (ns, 5), for ``nq`` coordinates, ``nv`` joint velocities, ``ns`` slots and the time step ``dt``; in one native
    call through the compiled kernels' fast path, whose fallback is the two calls (``pieces``, then
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
        p = pieces(q, v, v_next, impulses, correction, modes, data, shapes, gravity, dt_array)
        return blocks(p[0], p[1], modes, correction, blocks_par)
    ins = ((nq,), (nv,), (nv,), (ns, 3), (ns,), (ns, 4), (ns, 8), (3,), (len(par),))
    return fast(ctypes.cast(f, ctypes.c_void_p).value, ins, ((nv, nv),) * 6 + ((1,),), two_calls), par
