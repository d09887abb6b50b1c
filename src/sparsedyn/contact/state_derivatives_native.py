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

``pinv(A) B`` as :mod:`~sparsedyn.contact.min_norm` computes it.  Of a positive semidefinite ``A``
(sticking and open contacts: ``K = s G``; the correction's ``G_AA``), :func:`~sparsedyn.contact.min_norm.psd_solve`'s:
the Cholesky factorisation with complete pivoting ``P^T A P = U^T U`` of LAPACK's unblocked ``dpstf2``
(the same pivots and stopping test: the rest's largest diagonal at most
:data:`~sparsedyn.contact.min_norm.RANK_RCOND` times the trace), then ``P U^-1 U^-T P^T B`` where ``U``
is square, else ``U_P^T S^-2 U_P B`` with ``S = U U^T`` (``U_P = U P^T``; ``pinv(U^T U) = U^T S^-2 U``).
Of a general ``A`` (a sliding contact), :func:`~sparsedyn.contact.min_norm.min_norm_solve`'s: QR with
column pivoting ``A P = Q [R11 R12; 0 R22]`` by Householder reflections, the rank that of the leading
``R11`` whose diagonal stays above ``RANK_RCOND`` times its first (LAPACK's ``gelsy`` estimates
``R11``'s condition incrementally: the same rank wherever ``A``'s is not within rounding of the
cut), ``[R11 R12] = [T 0] Z`` (``dtzrzf``) and ``x = P Z^T [T^-1 (Q^T B)_r; 0]``.  The same results to
rounding.  A state whose factorisation meets what those functions hand to another solve (no
positive pivot, a NaN column) is left to the NumPy road (the routine says so).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from ..kernels import c_library, c_routine, native_function
from .mesh_plane_loop import _at
from .min_norm import RANK_RCOND

__all__ = ["native_state_derivatives", "native_states_derivatives", "state_derivatives_call", "SOURCE"]

#: The C routine ``sd_scene_state_derivatives(nv, ns, rows, state, weights, correction, dt, rcond, out,
#: work)``: ``rows`` (3 ns, 9 nv + 6 ns) and ``state`` (nv, 7 nv + 1) of :class:`~sparsedyn.SlotPartials`
#: (its ``gap`` not read: the held rows are the modes', the position correction's those of its
#: impulses), ``weights`` (ns, 4) the slots' ``[open, stick, slide, mu]``,
#: ``correction`` (ns,) the position correction's normal impulses; writes ``[dv+, dq+]`` (2, nv, kp) to
#: ``out`` (their first 3 nv columns; ``kp`` = :func:`_pad` ``(3 nv)``); ``work``: its workspace
#: (:func:`_work_size` doubles).  Returns 0 (the sum of the results finite), 2 (written, the sum not
#: finite: an entry or the sum overflowed), -1 where a solve leaves the module's roads (the caller's
#: NumPy road then).  ``sd_scene_pinv_solve`` is the solves alone (:func:`native_pinv_solve`);
#: ``sd_scene_state_derivatives_kernel`` the routine in the compiled kernels' calling convention, its
#: workspace its own (:func:`state_derivatives_call`: one state's call without ctypes' conversions).
SOURCE = r"""
typedef double sd_sv __attribute__((vector_size(8 * SD_W), aligned(8)));
/* Rows of the routine's matrices are padded to a multiple of 8 doubles (every SD_W's multiple): whole vectors. */
#define SD_SDV_PAD(k) (((k) + 7) / 8 * 8)

/* y (k,) += sign sum_l c[l cs] X[l ldx + (0..k)], l = 0 .. p - 1 in order (k a multiple of SD_W; each lane's
   sum in a register, four vectors at once to hide the additions' latency; no fused multiply-add) */
static void sd_sdv_rows(long long k, long long p, const double *c, long long cs, const double *X, long long ldx,
                        double *y, double sign)
{
  long long j = 0;
  for (; j + 4 * SD_W <= k; j += 4 * SD_W) {
    sd_sv a0 = *(sd_sv *)(y + j), a1 = *(sd_sv *)(y + j + SD_W), a2 = *(sd_sv *)(y + j + 2 * SD_W);
    sd_sv a3 = *(sd_sv *)(y + j + 3 * SD_W);
    for (long long l = 0; l < p; l++) {
      const double *x = X + l * ldx + j;
      double s = sign * c[l * cs];
      a0 = a0 + s * *(const sd_sv *)x;
      a1 = a1 + s * *(const sd_sv *)(x + SD_W);
      a2 = a2 + s * *(const sd_sv *)(x + 2 * SD_W);
      a3 = a3 + s * *(const sd_sv *)(x + 3 * SD_W);
    }
    *(sd_sv *)(y + j) = a0; *(sd_sv *)(y + j + SD_W) = a1; *(sd_sv *)(y + j + 2 * SD_W) = a2;
    *(sd_sv *)(y + j + 3 * SD_W) = a3;
  }
  for (; j + 2 * SD_W <= k; j += 2 * SD_W) {
    sd_sv a0 = *(sd_sv *)(y + j), a1 = *(sd_sv *)(y + j + SD_W);
    for (long long l = 0; l < p; l++) {
      const double *x = X + l * ldx + j;
      double s = sign * c[l * cs];
      a0 = a0 + s * *(const sd_sv *)x;
      a1 = a1 + s * *(const sd_sv *)(x + SD_W);
    }
    *(sd_sv *)(y + j) = a0; *(sd_sv *)(y + j + SD_W) = a1;
  }
  for (; j + SD_W <= k; j += SD_W) {
    sd_sv acc = *(sd_sv *)(y + j);
    for (long long l = 0; l < p; l++) acc = acc + (sign * c[l * cs]) * *(const sd_sv *)(X + l * ldx + j);
    *(sd_sv *)(y + j) = acc;
  }
}

/* x (k,) /= d (k a multiple of SD_W) */
static void sd_sdv_div(long long k, double d, double *x)
{
  sd_sv dv = (sd_sv){0} + d;
  for (long long j = 0; j < k; j += SD_W) *(sd_sv *)(x + j) = *(sd_sv *)(x + j) / dv;
}

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

/* Solve (U^T U) X = X in place (U (n, n) upper, leading dimension lu; X (n, k), leading dimension k): U^T Y = X,
   then U X = Y. */
static void sd_sdv_cholsolve(long long n, long long k, const double *U, long long lu, double *X)
{
  for (long long i = 0; i < n; i++) {
    sd_sdv_rows(k, i, U + i, lu, X, k, X + i * k, -1.0);
    sd_sdv_div(k, U[i * lu + i], X + i * k);
  }
  for (long long i = n - 1; i >= 0; i--) {
    sd_sdv_rows(k, n - 1 - i, U + i * lu + i + 1, 1, X + (i + 1) * k, k, X + i * k, -1.0);
    sd_sdv_div(k, U[i * lu + i], X + i * k);
  }
}

/* The pivoted Cholesky factorisation of LAPACK's dpstf2 (upper) of A (n, n) (its lower triangle read)
   into U (n, n), its pivots piv; returns the rank, -1 where dpstf2 finds no positive pivot. */
static long long sd_sdv_pstf2(long long n, const double *A, double stop, double *U, double *wk, double *wd,
                              long long *piv)
{
  long long pvt = 0;
  double ajj;
  for (long long i = 0; i < n; i++)
    for (long long j = i; j < n; j++) U[i * n + j] = A[j * n + i];
  ajj = U[0];
  for (long long i = 1; i < n; i++)
    if (U[i * n + i] > ajj) { pvt = i; ajj = U[i * n + i]; }
  if (ajj <= 0.0 || ajj != ajj) return -1;
  for (long long i = 0; i < n; i++) { wk[i] = 0.0; piv[i] = i; }
  for (long long j = 0; j < n; j++) {
    for (long long i = j; i < n; i++) {
      if (j > 0) wk[i] += U[(j - 1) * n + i] * U[(j - 1) * n + i];
      wd[i] = U[i * n + i] - wk[i];
    }
    if (j > 0) {
      pvt = j; ajj = wd[j];
      for (long long i = j + 1; i < n; i++)
        if (wd[i] > ajj) { pvt = i; ajj = wd[i]; }
      if (ajj <= stop || ajj != ajj) return j;
    }
    if (pvt != j) {
      double s;
      long long p;
      U[pvt * n + pvt] = U[j * n + j];
      for (long long l = 0; l < j; l++) { s = U[l * n + j]; U[l * n + j] = U[l * n + pvt]; U[l * n + pvt] = s; }
      for (long long c = pvt + 1; c < n; c++) { s = U[j * n + c]; U[j * n + c] = U[pvt * n + c]; U[pvt * n + c] = s; }
      for (long long i = j + 1; i < pvt; i++) { s = U[j * n + i]; U[j * n + i] = U[i * n + pvt]; U[i * n + pvt] = s; }
      s = wk[j]; wk[j] = wk[pvt]; wk[pvt] = s;
      p = piv[j]; piv[j] = piv[pvt]; piv[pvt] = p;
    }
    ajj = sqrt(ajj);
    U[j * n + j] = ajj;
    for (long long c = j + 1; c < n; c++) {
      double s = 0.0;
      for (long long l = 0; l < j; l++) s += U[l * n + j] * U[l * n + c];
      U[j * n + c] = (U[j * n + c] - s) * (1.0 / ajj);
    }
  }
  return n;
}

/* x (n, k) = pinv(A) B of a symmetric positive semidefinite A (n, n) (its lower triangle read), as
   min_norm.psd_solve; B, x (n, k) at leading dimension k (a multiple of 8); work: 2 n n + 2 n k + 3 n doubles.
   0, or -1 where psd_solve takes its general road. */
static int sd_sdv_psd(long long n, long long k, const double *A, const double *B, double *x, double *w, double rcond)
{
  double top = 0.0;
  for (long long i = 0; i < n; i++) top += A[i * n + i];
  if (!(top > 0.0 && top < __builtin_inf())) {
    double f = top == 0.0 ? 0.0 : __builtin_nan("");
    for (long long i = 0; i < n * k; i++) x[i] = f;
    return 0;
  }
  double *U = w, *S = U + n * n, *t = S + n * n, *Bp = t + n * k, *wk = Bp + n * k, *wd = wk + n;
  long long *piv = (long long *)(wd + n);
  long long r = sd_sdv_pstf2(n, A, rcond * top, U, wk, wd, piv);
  if (r <= 0) return -1;
  for (long long i = 0; i < n; i++)                                /* P^T B */
    for (long long j = 0; j < k; j++) Bp[i * k + j] = B[piv[i] * k + j];
  if (r == n) {                                   /* regular: x = P U^-1 U^-T P^T B */
    sd_sdv_cholsolve(n, k, U, n, Bp);
    for (long long i = 0; i < n; i++)
      for (long long j = 0; j < k; j++) x[piv[i] * k + j] = Bp[i * k + j];
    return 0;
  }
  /* rank r: x = U_P^T S^-2 U_P B, S = U_r U_r^T (r, r), U_P = U_r P^T (U_r's rows upper trapezoidal) */
  for (long long a = 0; a < r; a++)
    for (long long b = a; b < r; b++) {
      double s = 0.0;
      for (long long i = b; i < n; i++) s += U[a * n + i] * U[b * n + i];
      S[a * r + b] = s;
    }
  for (long long j = 0; j < r; j++) {             /* S = C^T C, C upper (in S) */
    double d = S[j * r + j];
    for (long long l = 0; l < j; l++) d -= S[l * r + j] * S[l * r + j];
    if (!(d > 0.0)) return -1;
    d = sqrt(d);
    S[j * r + j] = d;
    for (long long c = j + 1; c < r; c++) {
      double s = S[j * r + c];
      for (long long l = 0; l < j; l++) s -= S[l * r + j] * S[l * r + c];
      S[j * r + c] = s / d;
    }
  }
  for (long long a = 0; a < r; a++) {
    for (long long j = 0; j < k; j++) t[a * k + j] = 0.0;
    sd_sdv_rows(k, n - a, U + a * n + a, 1, Bp + a * k, k, t + a * k, 1.0);
  }
  sd_sdv_cholsolve(r, k, S, r, t);
  sd_sdv_cholsolve(r, k, S, r, t);
  for (long long i = 0; i < n; i++) {
    double *y = x + piv[i] * k;
    for (long long j = 0; j < k; j++) y[j] = 0.0;
    sd_sdv_rows(k, i + 1 < r ? i + 1 : r, U + i, n, t, k, y, 1.0);
  }
  return 0;
}

/* (x_h, x_t) -= tau (x_h + v . x_t) (1, v): the reflection I - tau u u^T, u = (1, v), on a vector whose head
   is x_h and its m other entries x_t at stride xs (v's at stride vs) */
static void sd_sdv_reflect(long long m, double tau, const double *v, long long vs, double *xh, double *xt, long long xs)
{
  double s = *xh;
  for (long long l = 0; l < m; l++) s += v[l * vs] * xt[l * xs];
  s *= tau;
  *xh -= s;
  for (long long l = 0; l < m; l++) xt[l * xs] -= s * v[l * vs];
}

/* QR with column pivoting of R (n, n) in place by Householder reflections (LAPACK's dlarfg convention):
   R P = Q [R11 R12; 0 R22], the reflections' vectors in V's columns (v_j = 1) and tau, the pivots in piv;
   returns the rank r, the leading R11 whose diagonal stays above rcond times its first, or -1 (a zero
   matrix, a NaN). */
static long long sd_sdv_qrcp(long long n, double *R, double *V, double *tau, long long *piv, double rcond)
{
  for (long long j = 0; j < n; j++) piv[j] = j;
  for (long long j = 0; j < n; j++) {
    long long p = j;                              /* the pivot: the largest remaining column below row j */
    double best = -1.0;
    for (long long col = j; col < n; col++) {
      double s = 0.0;
      for (long long i = j; i < n; i++) s += R[i * n + col] * R[i * n + col];
      if (s > best) { best = s; p = col; }
    }
    if (!(best >= 0.0)) return -1;
    if (p != j) {
      for (long long i = 0; i < n; i++) { double t = R[i * n + j]; R[i * n + j] = R[i * n + p]; R[i * n + p] = t; }
      long long t = piv[j]; piv[j] = piv[p]; piv[p] = t;
    }
    double alpha = R[j * n + j], sig = 0.0;       /* H = I - tau v v^T taking R[j:, j] to (beta, 0, ...) */
    for (long long i = j + 1; i < n; i++) sig += R[i * n + j] * R[i * n + j];
    V[j * n + j] = 1.0;
    tau[j] = 0.0;
    for (long long i = j + 1; i < n; i++) V[i * n + j] = 0.0;
    if (sig != 0.0) {
      double beta = sqrt(alpha * alpha + sig);
      if (alpha > 0.0) beta = -beta;
      tau[j] = (beta - alpha) / beta;
      for (long long i = j + 1; i < n; i++) { V[i * n + j] = R[i * n + j] / (alpha - beta); R[i * n + j] = 0.0; }
      R[j * n + j] = beta;
      for (long long col = j + 1; col < n; col++)
        sd_sdv_reflect(n - 1 - j, tau[j], V + (j + 1) * n + j, n, R + j * n + col, R + (j + 1) * n + col, n);
    }
    if (j == 0 && R[0] == 0.0) return -1;
    if (j > 0 && !(__builtin_fabs(R[j * n + j]) > rcond * __builtin_fabs(R[0]))) return j;
  }
  return n;
}

/* x (n, k) = pinv(A) B of a general A (n, n) (leading dimension n), B and x (n, k) at leading dimension k (a
   multiple of 8), as min_norm.min_norm_solve (LAPACK's gelsy): sd_sdv_qrcp, the rank r that of its R11
   (gelsy: R11's condition estimated incrementally; the same rank where A's is not within rounding of the
   cut), [R11 R12] = [T 0] Z by reflections of its rows (dtzrzf), x = P Z^T [T^-1 (Q^T B)_r; 0].  work:
   2 n n + n k + 3 n doubles; 0, or -1 where sd_sdv_qrcp finds no column. */
static int sd_sdv_gen(long long n, long long k, const double *A, const double *B, double *x, double *w, double rcond)
{
  double *R = w, *V = R + n * n, *c = V + n * n, *tau = c + n * k;
  long long *piv = (long long *)(tau + n);
  for (long long i = 0; i < n * n; i++) R[i] = A[i];
  for (long long i = 0; i < n * k; i++) c[i] = B[i];
  long long r = sd_sdv_qrcp(n, R, V, tau, piv, rcond);
  if (r < 0) return -1;
  for (long long j = 0; j < r; j++) {             /* c = Q^T B (its first r rows: the first r reflections') */
    if (tau[j] == 0.0) continue;
    for (long long col = 0; col < k; col++)
      sd_sdv_reflect(n - 1 - j, tau[j], V + (j + 1) * n + j, n, c + j * k + col, c + (j + 1) * k + col, k);
  }
  /* [R11 R12] = [T 0] Z: row i's reflection on the columns (i, r .. n-1), the last row first (its vector in
     R's row i, v_i = 1), applied to the rows above */
  for (long long i = r - 1; i >= 0 && r < n; i--) {
    double alpha = R[i * n + i], sig = 0.0;
    for (long long col = r; col < n; col++) sig += R[i * n + col] * R[i * n + col];
    tau[i] = 0.0;
    if (sig == 0.0) continue;
    double beta = sqrt(alpha * alpha + sig);
    if (alpha > 0.0) beta = -beta;
    tau[i] = (beta - alpha) / beta;
    for (long long col = r; col < n; col++) R[i * n + col] /= (alpha - beta);
    R[i * n + i] = beta;
    for (long long l = 0; l < i; l++) sd_sdv_reflect(n - r, tau[i], R + i * n + r, 1, R + l * n + i, R + l * n + r, 1);
  }
  for (long long i = r - 1; i >= 0; i--) {        /* y = T^-1 c_r, then Z^T [y; 0]: the first row's first */
    sd_sdv_rows(k, r - 1 - i, R + i * n + i + 1, 1, c + (i + 1) * k, k, c + i * k, -1.0);
    sd_sdv_div(k, R[i * n + i], c + i * k);
  }
  for (long long i = r * k; i < n * k; i++) c[i] = 0.0;
  for (long long i = 0; i < r && r < n; i++) {
    if (tau[i] == 0.0) continue;
    for (long long col = 0; col < k; col++)
      sd_sdv_reflect(n - r, tau[i], R + i * n + r, 1, c + i * k + col, c + r * k + col, k);
  }
  for (long long i = 0; i < n; i++)
    for (long long col = 0; col < k; col++) x[piv[i] * k + col] = c[i * k + col];
  return 0;
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

/* x (n, k) = pinv(A) B (k a multiple of 8) by sd_sdv_psd (general = 0) or sd_sdv_gen: the solves alone */
SD_EXPORT int sd_scene_pinv_solve(long long n, long long k, const double *A, const double *B, double *x, double *w,
                                  double rcond, long long general)
{
  return general ? sd_sdv_gen(n, k, A, B, x, w, rcond) : sd_sdv_psd(n, k, A, B, x, w, rcond);
}

/* out (2, nv, kp), kp = SD_SDV_PAD(3 nv): dv+ and dq+ (their first 3 nv columns); w its workspace. */
SD_EXPORT int sd_scene_state_derivatives(long long nv, long long ns, const double *rows, const double *state,
                                         const double *weights, const double *corr, double dt, double rcond,
                                         double *out, double *w)
{
  long long m = 3 * ns, k = 3 * nv, kp = SD_SDV_PAD(k), np = SD_SDV_PAD(nv), lr = 9 * nv + 2 * m;
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
    for (long long a = 0; a < h; a++) {
      const double *row = rows + held[a] * lr;
      for (long long b = 0; b < h; b++)             /* K_HH, or its transpose: pinv(K)^T = pinv(K^T) */
        Ks[a * h + b] = slide ? rows[held[b] * lr + 5 * nv + m + held[a]] : row[5 * nv + m + held[b]];
      sd_sdv_copy(1, k, row + 5 * nv + 2 * m, 0, Rs + a * kp, kp);
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
        for (long long j = 0; j < nv; j++) Rs[a * np + j] = row[8 * nv + 2 * m + j] + row[j] / dt;
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
  long long m = 3 * ns, lr = 9 * nv + 2 * m, ls = 7 * nv + 1, lo = 2 * nv * SD_SDV_PAD(3 * nv);
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


def _pad(k):
    """``k`` rounded up to a multiple of 8: the routine's rows are whole vectors of any width."""
    return -(-k // 8) * 8


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
    (B, 3 ns, 9 nv + 6 ns), ``state`` (B, nv, 7 nv + 1), mode ``weights`` (B, ns, 4) and position
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
    k = fast(entry, ((m, 9 * nv + 2 * m), (nv, 7 * nv + 1), (ns, 4), (ns,), (5,)), ((2, nv, kp), (1,)), through_ctypes)
    return lambda rows, state, weights, correction: k(rows, state, weights, correction, par)


def native_pinv_solve(A, B, general):
    """``pinv(A) B`` (n, k) of ``A`` (n, n), ``B`` (n, k) by the routine's solves (module docstring):
    positive semidefinite ``A`` (its lower triangle read) or, with ``general``, any; None where the
    routine cannot be built or the solve leaves its road.  (The solves alone, for their tests.)"""
    f = c_routine(SOURCE, "sd_scene_pinv_solve", [ctypes.c_longlong] * 2 + [ctypes.POINTER(ctypes.c_double)] * 4 + [
        ctypes.c_double, ctypes.c_longlong], ctypes.c_int)
    if f is None:
        return None
    n, k = len(A), B.shape[1]
    kp = _pad(k)
    Bp = np.zeros((n, kp))
    Bp[:, :k] = B
    x = np.empty((n, kp))
    rc = f(n, kp, _at(np.array(A, float)), _at(Bp), _at(x), _at(np.empty(2 * n * n + 2 * n * kp + 3 * n)), RANK_RCOND,
           int(general))
    return None if rc else x[:, :k]
