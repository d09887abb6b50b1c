"""The minimum-norm solves of :mod:`~sparsedyn.contact.min_norm` written by hand in C, for the native routine
of a step's derivatives (:mod:`~sparsedyn.contact.state_derivatives_native`): :data:`SOURCE`, and
:func:`native_pinv_solve` (the solves alone, through ctypes).

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
rounding.  A reflection updates the rows below it, and the factorisation forms a row's sums over the
rows above it, row by row in vectors: each column's sums keep the order of one column at a time (the same
results bit for bit, without strided reads).  A factorisation that meets what those functions hand to
another solve (no positive pivot, a NaN column) returns -1.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine
from .mesh_plane_loop import _at
from .min_norm import RANK_RCOND

__all__ = ["native_pinv_solve", "SOURCE"]

#: The solves (``sd_sdv_psd``, ``sd_sdv_gen``) and the vector helpers the routine shares with them, and
#: ``sd_scene_pinv_solve(n, k, A, B, x, work, rcond, general)`` (:func:`native_pinv_solve`).
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
    /* row j: the sums over the rows above, row by row in vectors (each column's in order), in wd (the next
       column's pass writes it afresh) */
    long long c0 = j + 1, kv = (n - c0) - (n - c0) % SD_W;
    for (long long c = c0; c < n; c++) wd[c] = 0.0;
    sd_sdv_rows(kv, j, U + j, n, U + c0, n, wd + c0, 1.0);
    for (long long c = c0 + kv; c < n; c++)
      for (long long l = 0; l < j; l++) wd[c] += U[l * n + j] * U[l * n + c];
    for (long long c = c0; c < n; c++) U[j * n + c] = (U[j * n + c] - wd[c]) * (1.0 / ajj);
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

/* sd_sdv_reflect on the k columns of the row xh (k,) and the m rows xt (leading dimension ld) below it, row by
   row in vectors (each column's sums in sd_sdv_reflect's order: the same results); s: k doubles */
static void sd_sdv_reflect_rows(long long m, long long k, double tau, const double *v, long long vs, double *xh,
                                double *xt, long long ld, double *s)
{
  long long kv = k - k % SD_W;
  for (long long c = 0; c < k; c++) s[c] = xh[c];
  sd_sdv_rows(kv, m, v, vs, xt, ld, s, 1.0);
  for (long long c = kv; c < k; c++)
    for (long long l = 0; l < m; l++) s[c] += v[l * vs] * xt[l * ld + c];
  for (long long c = 0; c < k; c++) { s[c] *= tau; xh[c] -= s[c]; }
  for (long long l = 0; l < m; l++) {
    double *x = xt + l * ld;
    sd_sv vl = (sd_sv){0} + v[l * vs];
    long long c = 0;
    for (; c < kv; c += SD_W) *(sd_sv *)(x + c) = *(sd_sv *)(x + c) - *(const sd_sv *)(s + c) * vl;
    for (; c < k; c++) x[c] -= s[c] * v[l * vs];
  }
}

/* QR with column pivoting of R (n, n) in place by Householder reflections (LAPACK's dlarfg convention):
   R P = Q [R11 R12; 0 R22], the reflections' vectors in V's columns (v_j = 1) and tau, the pivots in piv;
   returns the rank r, the leading R11 whose diagonal stays above rcond times its first, or -1 (a zero
   matrix, a NaN); s: n doubles of workspace. */
static long long sd_sdv_qrcp(long long n, double *R, double *V, double *tau, long long *piv, double rcond, double *s)
{
  for (long long j = 0; j < n; j++) piv[j] = j;
  for (long long j = 0; j < n; j++) {
    long long p = j;                              /* the pivot: the largest remaining column below row j */
    double best = -1.0;
    long long kv = j + (n - j) - (n - j) % SD_W;
    for (long long col = j; col < n; col++) s[col] = 0.0;
    for (long long i = j; i < n; i++) {           /* (row by row in vectors: each column's sum in order) */
      const double *x = R + i * n;
      long long col = j;
      for (; col < kv; col += SD_W)
        *(sd_sv *)(s + col) = *(sd_sv *)(s + col) + *(const sd_sv *)(x + col) * *(const sd_sv *)(x + col);
      for (; col < n; col++) s[col] += x[col] * x[col];
    }
    for (long long col = j; col < n; col++)
      if (s[col] > best) { best = s[col]; p = col; }
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
      sd_sdv_reflect_rows(n - 1 - j, n - 1 - j, tau[j], V + (j + 1) * n + j, n, R + j * n + j + 1,
                          R + (j + 1) * n + j + 1, n, s);
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
   2 n n + n k + 2 n + max(n, k) doubles; 0, or -1 where sd_sdv_qrcp finds no column. */
static int sd_sdv_gen(long long n, long long k, const double *A, const double *B, double *x, double *w, double rcond)
{
  double *R = w, *V = R + n * n, *c = V + n * n, *tau = c + n * k;
  long long *piv = (long long *)(tau + n);
  double *s = (double *)(piv + n);                /* (n k + n doubles left: at least n and k) */
  for (long long i = 0; i < n * n; i++) R[i] = A[i];
  for (long long i = 0; i < n * k; i++) c[i] = B[i];
  long long r = sd_sdv_qrcp(n, R, V, tau, piv, rcond, s);
  if (r < 0) return -1;
  for (long long j = 0; j < r; j++) {             /* c = Q^T B (its first r rows: the first r reflections') */
    if (tau[j] == 0.0) continue;
    sd_sdv_reflect_rows(n - 1 - j, k, tau[j], V + (j + 1) * n + j, n, c + j * k, c + (j + 1) * k, k, s);
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
    sd_sdv_reflect_rows(n - r, k, tau[i], R + i * n + r, 1, c + i * k, c + r * k, k, s);
  }
  for (long long i = 0; i < n; i++)
    for (long long col = 0; col < k; col++) x[piv[i] * k + col] = c[i * k + col];
  return 0;
}

/* x (n, k) = pinv(A) B (k a multiple of 8) by sd_sdv_psd (general = 0) or sd_sdv_gen: the solves alone */
SD_EXPORT int sd_scene_pinv_solve(long long n, long long k, const double *A, const double *B, double *x, double *w,
                                  double rcond, long long general)
{
  return general ? sd_sdv_gen(n, k, A, B, x, w, rcond) : sd_sdv_psd(n, k, A, B, x, w, rcond);
}
"""


def _pad(k):
    """``k`` rounded up to a multiple of 8: the solves' rows are whole vectors of any width."""
    return -(-k // 8) * 8


def native_pinv_solve(A, B, general):
    """``pinv(A) B`` (n, k) of ``A`` (n, n), ``B`` (n, k) by the solves (module docstring): positive
    semidefinite ``A`` (its lower triangle read) or, with ``general``, any; None where no C compiler builds
    them or the solve leaves its road (-1).  (The solves alone, for their tests.)"""
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
