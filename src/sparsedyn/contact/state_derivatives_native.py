"""One state's derivatives of a step in a scene from its pieces, in one native routine:
:func:`native_state_derivatives` (through ctypes), :func:`state_derivatives_call` (as the compiled
kernels' one-state fast path calls a kernel, where the compiler's extension is there: what
:func:`~sparsedyn.contact_step_derivatives` calls per step), :func:`native_states_derivatives` (a
batch of states in one call, on the machine's cores).

What :func:`~sparsedyn.contact.friction_derivatives._state_derivatives` does with NumPy and LAPACK
(a dozen products and two minimum-norm solves, each call from Python costing more than its
arithmetic at these sizes), written by hand in C (:func:`~sparsedyn.kernels.c_library`):

1. ``dv = W - (J H^-1)_H^T pinv(K_HH) R_H`` on the held rows ``H`` (the contacts not open), as
   ``T^T R_H`` with ``T = pinv(K_HH)^T (J H^-1)_H = pinv(K_HH^T) (J H^-1)_H`` (``nv`` right sides, not
   ``3 nv``);
2. where a point penetrates, the position correction's change ``W_c - (J H^-1)_A^T pinv(G_AA) (C_c + J
   / dt)_A`` on its active normal rows ``A`` added to ``dv``'s ``q`` columns for ``q+``;
3. ``dq = dt Dd dv_c + [Dq, 0, 0]`` and ``dv+ = N dv`` (the zero entries of the block-diagonal ``N``
   and ``Dd`` skipped).

``pinv(A) B`` as :mod:`~sparsedyn.contact.min_norm` computes it, by the solves of
:mod:`~sparsedyn.contact.min_norm_native` (the same results to rounding).  A state whose factorisation meets
what those functions hand to another solve (no positive pivot, a NaN column) is left to the NumPy road (the
routine says so).  The held contacts' ``K_HH`` and ``R_H`` are formed here from their blocks
(:func:`~sparsedyn.contact.scene_derivatives.mode_blocks`, in the pieces' rows).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from ..kernels import c_library, c_routine, native_function
from .mesh_plane_loop import _at
from .min_norm import RANK_RCOND
from .min_norm_native import SOURCE as SOLVES
from .min_norm_native import _pad
from .scene_derivatives import MODE_COLUMNS

__all__ = ["native_state_derivatives", "native_states_derivatives", "state_derivatives_call", "SOURCE"]

#: The C routine ``sd_scene_state_derivatives(nv, ns, rows, state, weights, correction, dt, rcond, out,
#: work)``: ``rows`` (3 ns, 6 nv + 3 ns + 7) and ``state`` (nv, 7 nv + 1) of :class:`~sparsedyn.SlotPartials`
#: (its ``gap`` not read: the held rows are the modes', the position correction's those of its
#: impulses), ``weights`` (ns, 4) the slots' ``[open, stick, slide, mu]``,
#: ``correction`` (ns,) the position correction's normal impulses; writes ``[dv+, dq+]`` (2, nv, kp) to
#: ``out`` (their first 3 nv columns; ``kp`` = :func:`_pad` ``(3 nv)``); ``work``: its workspace
#: (:func:`_work_size` doubles).  Returns 0 (the sum of the results finite), 2 (written, the sum not
#: finite: an entry or the sum overflowed), -1 where a solve leaves the module's roads (the caller's
#: NumPy road then).  ``sd_scene_state_derivatives_kernel`` is the routine in the compiled kernels' calling
#: convention, its workspace its own (:func:`state_derivatives_call`: one state's call without ctypes'
#: conversions).
SOURCE = f"#define SD_SDV_AB {MODE_COLUMNS}\n" + SOLVES + r"""
/* Y (n, k) (leading dimension ly, padded) = X's (leading dimension lx) first k columns, zeros after them */
static void sd_sdv_copy(long long n, long long k, const double *X, long long lx, double *Y, long long ly)
{
  for (long long i = 0; i < n; i++) {
    long long j = 0;
    for (; j + SD_W <= k; j += SD_W) *(sd_sv *)(Y + i * ly + j) = *(const sd_sv *)(X + i * lx + j);
    for (; j < k; j++) Y[i * ly + j] = X[i * lx + j];
    for (; j < ly; j++) Y[i * ly + j] = 0.0;
  }
}

/* y (k,) = sum_l c[l] X[l ldx + (0..k)] over l < n with c[l] != 0 (N and dint_ddq: block diagonal), in order */
static void sd_sdv_sparse(long long k, long long n, const double *c, const double *X, long long ldx, double *y,
                          long long *idx, double *val)
{
  long long q = 0;
  for (long long l = 0; l < n; l++)              /* (a branch: the same rows each call, predicted) */
    if (c[l] != 0.0) { idx[q] = l; val[q++] = c[l]; }
  for (long long j = 0; j < k; j += SD_W) {
    sd_sv acc = (sd_sv){0};
    for (long long l = 0; l < q; l++) acc = acc + val[l] * *(const sd_sv *)(X + idx[l] * ldx + j);
    *(sd_sv *)(y + j) = acc;
  }
}

/* dv (nv, kp) -= T^T R: T (h, nv) = pinv(A) (J H^-1)_idx, so that (J H^-1)_idx^T pinv(A) R comes of a solve
   with nv right sides, not 3 nv (pinv(A) is symmetric); A (h, h), R (h, kp) gathered by the caller */
static int sd_sdv_held(long long nv, long long h, long long kp, const long long *idx, const double *rows,
                       long long lr, const double *A, const double *R, double *dv, long long ldv, double *T,
                       double *Jh, double *ws, double rcond, int general)
{
  long long np = SD_SDV_PAD(nv);
  for (long long a = 0; a < h; a++) sd_sdv_copy(1, nv, rows + idx[a] * lr + nv, 0, Jh + a * np, np);
  if (general ? sd_sdv_gen(h, np, A, Jh, T, ws, rcond) : sd_sdv_psd(h, np, A, Jh, T, ws, rcond)) return -1;
  for (long long i = 0; i < nv; i++) sd_sdv_rows(kp, h, T + i, np, R, kp, dv + i * ldv, -1.0);
  return 0;
}

/* Row r of the mode equations (scene_derivatives.mode_equations) from the rows (leading dimension lr = 6 nv + m +
   SD_SDV_AB): K_r (m,) = A_r e_i + B_r G_i and R_r (3 nv, then zeros to kp) = B_r c_i, the row's contact's three
   rows of G and of C (its normal row plus f J there), A_r, B_r and f in the row's block columns */
static void sd_sdv_mode_row(long long nv, long long m, long long lr, const double *rows, long long r, double *K,
                            double *R, long long kp)
{
  long long i0 = r - r % 3, k = 3 * nv;
  const double *ab = rows + r * lr + 5 * nv + m, *G = rows + i0 * lr + 5 * nv, *C = rows + i0 * lr + 2 * nv;
  const double *Jn = rows + (i0 + 2) * lr;
  double b0 = ab[3], b1 = ab[4], b2 = ab[5], f = rows[(i0 + 2) * lr + 5 * nv + m + 6];
  for (long long j = 0; j < m; j++) K[j] = b0 * G[j] + b1 * G[lr + j] + b2 * G[2 * lr + j];
  for (long long c = 0; c < 3; c++) K[i0 + c] = ab[c] + K[i0 + c];
  for (long long j = 0; j < nv; j++) R[j] = b0 * C[j] + b1 * C[lr + j] + b2 * (C[2 * lr + j] + f * Jn[j]);
  for (long long j = nv; j < k; j++) R[j] = b0 * C[j] + b1 * C[lr + j] + b2 * C[2 * lr + j];
  for (long long j = k; j < kp; j++) R[j] = 0.0;
}

/* out (2, nv, kp), kp = SD_SDV_PAD(3 nv): dv+ and dq+ (their first 3 nv columns); w its workspace. */
SD_EXPORT int sd_scene_state_derivatives(long long nv, long long ns, const double *rows, const double *state,
                                         const double *weights, const double *corr, double dt, double rcond,
                                         double *out, double *w)
{
  long long m = 3 * ns, k = 3 * nv, kp = SD_SDV_PAD(k), np = SD_SDV_PAD(nv), lr = 6 * nv + m + SD_SDV_AB;
  long long ls = 7 * nv + 1, h = 0, na = 0;
  long long *held = (long long *)w, *act = held + m, *sidx = act + m;
  double *sval = w + 2 * m + nv, *dv = sval + nv, *dvc = dv + nv * kp, *Ks = dvc + nv * kp, *Rs = Ks + m * m;
  double *T = Rs + m * kp;
  double *Jh = T + m * np, *ws = Jh + m * np;
  int slide = 0;
  for (long long i = 0; i < ns; i++) {
    slide |= weights[4 * i + 2] != 0.0;                         /* a sliding contact: K is not symmetric */
    if (weights[4 * i] != 1.0) for (long long c = 0; c < 3; c++) held[h++] = 3 * i + c;
  }
  sd_sdv_copy(nv, k, state, ls, dv, kp);          /* W */
  if (h) {                                        /* dv = W - (J H^-1)_H^T pinv(K_HH) R_H */
    for (long long a = 0; a < h; a++) {           /* (a row of K in T: free until the solve) */
      sd_sdv_mode_row(nv, m, lr, rows, held[a], T, Rs + a * kp, kp);
      for (long long b = 0; b < h; b++)             /* K_HH, or its transpose: pinv(K)^T = pinv(K^T) */
        Ks[slide ? b * h + a : a * h + b] = T[held[b]];
    }
    if (sd_sdv_held(nv, h, kp, held, rows, lr, Ks, Rs, dv, kp, T, Jh, ws, rcond, slide)) return -1;
  }
  int moved = 0;                                  /* a correction impulse (a penetration, a held row) */
  for (long long i = 0; i < ns; i++) if (corr[i] != 0.0) moved = 1;
  const double *X = dv;
  if (moved) {                                    /* the position correction's change with q */
    double top = __builtin_fabs(corr[0]), cut;               /* (a held row pulls: l < 0) */
    for (long long i = 1; i < ns; i++) if (__builtin_fabs(corr[i]) > top) top = __builtin_fabs(corr[i]);
    cut = 1e-9 * (top > 2.2250738585072014e-308 ? top : 2.2250738585072014e-308);
    for (long long i = 0; i < ns; i++) if (__builtin_fabs(corr[i]) > cut) act[na++] = 3 * i + 2;
    sd_sdv_copy(1, nv * kp, dv, 0, dvc, nv * kp);
    for (long long i = 0; i < nv; i++)
      for (long long j = 0; j < nv; j++) dvc[i * kp + j] += state[i * ls + 5 * nv + j];
    if (na) {                                     /* - (J H^-1)_A^T pinv(G_AA) (C_c + J / dt)_A */
      for (long long a = 0; a < na; a++) {
        const double *row = rows + act[a] * lr;
        for (long long b = 0; b < na; b++) Ks[a * na + b] = row[5 * nv + act[b]];
        for (long long j = 0; j < nv; j++) Rs[a * np + j] = row[5 * nv + m + SD_SDV_AB + j] + row[j] / dt;
        for (long long j = nv; j < np; j++) Rs[a * np + j] = 0.0;
      }
      /* (its columns the q columns of dv_c: a kp-wide row update over the first np of them) */
      if (sd_sdv_held(nv, na, np, act, rows, lr, Ks, Rs, dvc, kp, T, Jh, ws, rcond, 0)) return -1;
    }
    X = dvc;
  }
  double *dq = out + nv * kp;                     /* dq = dt Dd dv_c + [Dq, 0, 0], dv+ = N dv */
  sd_sv sdt = (sd_sv){0} + dt;
  for (long long i = 0; i < nv; i++) {
    double *y = dq + i * kp;
    sd_sdv_sparse(kp, nv, state + i * ls + 4 * nv, X, kp, y, sidx, sval);
    for (long long j = 0; j < kp; j += SD_W) *(sd_sv *)(y + j) = *(sd_sv *)(y + j) * sdt;
    for (long long j = 0; j < nv; j++) y[j] += state[i * ls + 3 * nv + j];
    sd_sdv_sparse(kp, nv, state + i * ls + 6 * nv + 1, dv, kp, out + i * kp, sidx, sval);
  }
  /* one sum: finite where every entry is (else 2); over the padded rows (their padding zeros: the right
     sides' and the copies' own), in four vectors at once (one chain of 2 nv 3 nv additions waits on each) */
  sd_sv a0 = (sd_sv){0}, a1 = (sd_sv){0}, a2 = (sd_sv){0}, a3 = (sd_sv){0};
  long long n = 2 * nv * kp, j = 0;
  for (; j + 4 * SD_W <= n; j += 4 * SD_W) {
    a0 = a0 + *(const sd_sv *)(out + j); a1 = a1 + *(const sd_sv *)(out + j + SD_W);
    a2 = a2 + *(const sd_sv *)(out + j + 2 * SD_W); a3 = a3 + *(const sd_sv *)(out + j + 3 * SD_W);
  }
  for (; j < n; j += SD_W) a0 = a0 + *(const sd_sv *)(out + j);
  a0 = (a0 + a1) + (a2 + a3);
  double sum = 0.0;
  for (int l = 0; l < SD_W; l++) sum += a0[l];
  return sum - sum == 0.0 ? 0 : 2;
}

/* The routine as a kernel of the compiled kernels' calling convention (inputs, then outputs: what the
   compiler's one-state fast path calls): par = [nv, ns, dt, rcond, workspace doubles]; writes out (2, nv, kp)
   and rc (1,), the routine's return (-1 also where its workspace cannot be allocated). */
SD_EXPORT void sd_scene_state_derivatives_kernel(const double *rows, const double *state, const double *weights,
                                                 const double *corr, const double *par, double *out, double *rc)
{
  __SIZE_TYPE__ bytes = ((__SIZE_TYPE__)par[4] * 8 + 63) / 64 * 64;
  double *w = aligned_alloc(64, bytes);
  if (!w) { rc[0] = -1.0; return; }
  rc[0] = sd_scene_state_derivatives((long long)par[0], (long long)par[1], rows, state, weights, corr, par[2],
                                     par[3], out, w);
  free(w);
}

/* B states of the routine (their rows, state, weights, corrections and outputs one after another; rc (B,)
   each one's return, -1 also where its workspace of `work` doubles cannot be allocated), the states shared
   among nthreads threads where the compiler has OpenMP. */
SD_EXPORT void sd_scene_state_derivatives_many(long long B, long long nv, long long ns, const double *rows,
                                               const double *state, const double *weights, const double *corr,
                                               double dt, double rcond, long long work, double *out, double *rc,
                                               int nthreads)
{
  long long m = 3 * ns, lr = 6 * nv + m + SD_SDV_AB, ls = 7 * nv + 1, lo = 2 * nv * SD_SDV_PAD(3 * nv);
  __SIZE_TYPE__ bytes = ((__SIZE_TYPE__)work * 8 + 63) / 64 * 64;
#ifdef _OPENMP
  #pragma omp parallel for schedule(dynamic, 4) num_threads(nthreads > 0 ? nthreads : 1) if (nthreads > 1 && B > 1)
#endif
  for (long long b = 0; b < B; b++) {
    double *w = aligned_alloc(64, bytes);
    if (!w) { rc[b] = -1.0; continue; }
    rc[b] = sd_scene_state_derivatives(nv, ns, rows + b * m * lr, state + b * nv * ls, weights + 4 * ns * b,
                                       corr + ns * b, dt, rcond, out + b * lo, w);
    free(w);
  }
}
"""

def _routine():
    """``sd_scene_state_derivatives`` (ctypes), or None where no C compiler builds it (the library
    built and loaded once per process, :func:`~sparsedyn.kernels.c_library`; its function object,
    typed on first use, kept by ctypes)."""
    return c_routine(SOURCE, "sd_scene_state_derivatives", [ctypes.c_longlong] * 2 + [ctypes.POINTER(
        ctypes.c_double)] * 4 + [ctypes.c_double] * 2 + [ctypes.POINTER(ctypes.c_double)] * 2, ctypes.c_int)


def _work_size(nv, ns):
    """Doubles of the routine's workspace (``m = 3 ns``, rows padded, :func:`_pad`): its index lists, ``dv``
    and ``dv_c``, the held system, its solution and right side, and the solve's own (``2 m m + 2 m np + 3
    m``)."""
    m, kp, np_ = 3 * ns, _pad(3 * nv), _pad(nv)
    return 2 * m + 2 * nv + 2 * nv * kp + m * m + m * kp + 2 * m * np_ + (2 * m * m + 2 * m * np_ + 3 * m)


def native_state_derivatives(rows, state, weights, correction, nv, dt):
    """``(dv, dq, finite)`` of one state from its :class:`~sparsedyn.SlotPartials` ``rows``, ``state``
    (C-ordered floats), its slots' mode ``weights`` (ns, 4) and position correction impulses
    ``correction`` (ns,): ``dv``, ``dq`` (nv, 3 nv) as
    :func:`~sparsedyn.contact.friction_derivatives._state_derivatives` gives them, ``finite`` whether
    the sum of their entries is finite (where it is not, an entry or the sum overflowed: the caller
    looks at each); None where the routine cannot be built or a solve leaves its roads (module
    docstring): the caller's NumPy road then."""
    f = _routine()
    if f is None:
        return None
    ns, kp = len(weights), _pad(3 * nv)
    out = np.empty((2, nv, kp))
    rc = f(nv, ns, _at(rows), _at(state), _at(weights), _at(correction), dt, RANK_RCOND, _at(out),
           _at(np.empty(_work_size(nv, ns))))
    if rc < 0:
        return None
    return out[0, :, :3 * nv], out[1, :, :3 * nv], rc == 0


def native_states_derivatives(rows, state, weights, correction, nv, dt):
    """``(dv, dq, rc)`` of a batch of ``B`` states from their :class:`~sparsedyn.SlotPartials` ``rows``
    (B, 3 ns, 6 nv + 3 ns + 7), ``state`` (B, nv, 7 nv + 1), mode ``weights`` (B, ns, 4) and position
    correction impulses ``correction`` (B, ns): ``dv``, ``dq`` (B, nv, 3 nv) as
    :func:`native_state_derivatives` gives each state's, in one call whose states share the machine's
    cores (where the compiler has OpenMP), and ``rc`` (B,) each state's return code (0: its sum finite,
    2: not, -1: a solve left the module's roads, its ``dv`` and ``dq`` not written: the caller's NumPy
    road for that state); None where the routine cannot be built."""
    f = c_routine(SOURCE, "sd_scene_state_derivatives_many", [ctypes.c_longlong] * 3 + [
        ctypes.POINTER(ctypes.c_double)] * 4 + [ctypes.c_double] * 2 + [ctypes.c_longlong] + [
        ctypes.POINTER(ctypes.c_double)] * 2 + [ctypes.c_int])
    if f is None:
        return None
    B, ns, kp = len(weights), weights.shape[1], _pad(3 * nv)
    ins = [np.ascontiguousarray(x, float) for x in (rows, state, weights, correction)]
    out, rc = np.empty((B, 2, nv, kp)), np.empty(B)
    f(B, nv, ns, *(_at(x) for x in ins), dt, RANK_RCOND, _work_size(nv, ns), _at(out), _at(rc),
      min(os.cpu_count() or 1, B))
    return out[:, 0, :, :3 * nv], out[:, 1, :, :3 * nv], rc


def state_derivatives_call(nv, ns, dt):
    """``g(rows, state, weights, correction) -> (out (2, nv, kp), rc (1,))``: the routine for ``nv``
    joint velocities, ``ns`` slots and the time step ``dt`` (``out`` :func:`native_state_derivatives`'s
    ``[dv, dq]`` padded to ``kp`` = :func:`_pad` ``(3 nv)`` columns, ``rc`` its return code), called as
    the compiled kernels' one-state fast path calls them (the compiler's extension: no Python frame,
    the workspace allocated in the call) where that extension is there, else through ctypes (the
    fast path's fallback too: inputs of other shapes or not finite, a result not finite); None where
    the routine cannot be built.  Made once per slot layout by its caller, who keeps it."""
    f = _routine()
    if f is None:
        return None
    kp, work = _pad(3 * nv), _work_size(nv, ns)
    par = np.array([nv, ns, dt, RANK_RCOND, work], float)

    def through_ctypes(rows, state, weights, correction, par=par):
        out = np.empty((2, nv, kp))
        rc = f(nv, ns, _at(rows), _at(state), _at(weights), _at(correction), float(par[2]), float(par[3]), _at(out),
               _at(np.empty(work)))
        return out, np.array([float(rc)])
    fast = native_function("Kernel")
    if fast is None:
        return through_ctypes
    lib = c_library(SOURCE)
    entry = ctypes.cast(lib.sd_scene_state_derivatives_kernel, ctypes.c_void_p).value
    m = 3 * ns
    k = fast(entry, ((m, 6 * nv + m + MODE_COLUMNS), (nv, 7 * nv + 1), (ns, 4), (ns,), (5,)), ((2, nv, kp), (1,)),
             through_ctypes)
    return lambda rows, state, weights, correction: k(rows, state, weights, correction, par)
