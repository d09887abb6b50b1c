"""One state's derivatives of a step in a scene as the six blocks of the result, in one native call:
:func:`scene_blocks_call`.

:mod:`~sparsedyn.contact.state_derivatives_native`'s routine writes ``[dv+, dq+]`` (2, nv, kp), rows
padded to whole vectors; :func:`~sparsedyn.contact_step_derivatives` returns their six column blocks
(nv, nv).  The entry here (the routine's source and one function more, built as one library by
:func:`~sparsedyn.kernels.c_library`) runs the routine into its own workspace and copies the blocks
out, so that a step's derivatives are six arrays of their own, made without a NumPy call (six views
of the padded rows cost more than the copy at these sizes), and it is called as the compiled
kernels' one-state fast path calls a kernel.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine, native_function
from .mesh_plane_loop import _at
from .min_norm import RANK_RCOND
from .scene_derivatives import MODE_COLUMNS
from .state_derivatives_native import SOURCE as ROUTINE
from .state_derivatives_native import _work_size

__all__ = ["scene_blocks_call", "blocks_call", "SOURCE"]

#: The routine's source and ``sd_scene_derivative_blocks(rows, state, weights, correction, par, b0 .. b5,
#: rc)``: ``par = [nv, ns, dt, rcond, workspace doubles]``, the routine's inputs as
#: ``sd_scene_state_derivatives_kernel`` takes them; writes ``dv+``'s column blocks ``[d/dq, d/dv,
#: d/dtau]`` to ``b0 .. b2`` and ``dq+``'s to ``b3 .. b5`` (nv, nv) and the routine's return to ``rc`` (1,)
#: (-1 also where the workspace cannot be allocated: the blocks then unwritten).
SOURCE = ROUTINE + r"""
/* the six blocks (nv, nv) of the routine's out (2, nv, kp): dv+'s column blocks to b[0 .. 2], dq+'s to b[3 .. 5] */
static void sd_sdb_blocks(long long nv, long long kp, const double *out, double *const *b)
{
  for (int h = 0; h < 6; h++)
    for (long long i = 0; i < nv; i++)
      for (long long j = 0; j < nv; j++) b[h][i * nv + j] = out[(h / 3) * nv * kp + i * kp + (h % 3) * nv + j];
}

SD_EXPORT void sd_scene_derivative_blocks(const double *rows, const double *state, const double *weights,
                                          const double *corr, const double *par, double *b0, double *b1,
                                          double *b2, double *b3, double *b4, double *b5, double *rc)
{
  long long nv = (long long)par[0], kp = SD_SDV_PAD(3 * nv), work = (long long)par[4];
  __SIZE_TYPE__ bytes = ((__SIZE_TYPE__)(work + 2 * nv * kp) * 8 + 63) / 64 * 64;
  double *w = aligned_alloc(64, bytes), *b[6] = {b0, b1, b2, b3, b4, b5};
  if (!w) { rc[0] = -1.0; return; }
  double *out = w + work;
  rc[0] = sd_scene_state_derivatives(nv, (long long)par[1], rows, state, weights, corr, par[2], par[3], out, w);
  if (rc[0] >= 0.0) sd_sdb_blocks(nv, kp, out, b);
  free(w);
}
"""


def blocks_call(nv, ns, dt):
    """``g(rows, state, weights, correction, par) -> (b0, .. b5 (nv, nv), rc (1,))``: the entry for ``nv``
    joint velocities, ``ns`` slots and the time step ``dt`` (``par``, (5,), the second of the pair
    returned: ``(g, par)``) through the compiled kernels' fast path where the compiler's extension is
    there (ctypes its fallback: inputs it declines), else through ctypes; None where the library cannot
    be built."""
    f = c_routine(SOURCE, "sd_scene_derivative_blocks", [ctypes.POINTER(ctypes.c_double)] * 12)
    if f is None:
        return None
    m, work = 3 * ns, _work_size(nv, ns)
    par = np.array([nv, ns, dt, RANK_RCOND, work], float)
    par.flags.writeable = False

    def through_ctypes(rows, state, weights, correction, par):
        outs = tuple(np.empty((nv, nv)) for _ in range(6)) + (np.zeros(1),)
        f(*(_at(x) for x in (rows, state, weights, correction, par)), *(_at(x) for x in outs))
        return outs
    fast = native_function("Kernel")
    if fast is None:
        return through_ctypes, par
    entry = ctypes.cast(f, ctypes.c_void_p).value
    k = fast(entry, ((m, 6 * nv + m + MODE_COLUMNS), (nv, 7 * nv + 1), (ns, 4), (ns,), (5,)), ((nv, nv),) * 6 + ((1,),),
             through_ctypes)
    return k, par


def scene_blocks_call(scene, nv, ns, dt):
    """``(call, par (5,), dt (1,))``: :func:`blocks_call` for ``nv`` joint velocities and ``ns`` slots of
    ``scene``'s steps, and ``dt`` as the pieces' kernel takes it, kept in ``scene.cache`` per ``(nv, ns,
    dt)``; None where the library cannot be built."""
    memo = scene.cache.setdefault("derivative blocks", {})
    key = (nv, ns, dt)
    got = memo.get(key)
    if got is None:
        if len(memo) >= 16:
            memo.clear()
        dt_array = np.array([float(dt)])
        dt_array.flags.writeable = False
        call = blocks_call(nv, ns, float(dt))
        got = memo[key] = None if call is None else call + (dt_array,)
    return got

