"""Spheres against a height field's surface in one C call (:func:`points_on_hfield_c`), written by hand
to mirror :func:`~sparsedyn.contact.heightfield.points_on_hfield` operation by operation: each sphere's
window of cells, the closest point of each of their triangles (Ericson, "Real-Time Collision
Detection", 2005, section 5.1.5: the first of the nearest in the NumPy road's order, the cells' lower
triangles row by row, then their upper ones), whether the centre is inside the solid, the normal and the
signed distance.  No fused multiply-add (GCC's pragma), so every operation rounds as the NumPy road's.
Without a C compiler, None: the NumPy road."""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine

__all__ = ["points_on_hfield_c"]

SOURCE = r"""
#include <math.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O2", "fp-contract=off", "no-math-errno")
#endif
#define HF_INLINE static inline __attribute__((always_inline))

HF_INLINE double hf_dot(const double *x, const double *y) { return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]; }
HF_INLINE double hf_clip(double x, double lo, double hi) { double y = x > lo ? x : lo; return y < hi ? y : hi; }

/* heightfield._closest_on_triangles of one triangle (a, b, c) and the point p: q */
static void hf_closest(const double *p, const double *a, const double *b, const double *c, double *q)
{
  double ab[3], ac[3], ap[3], bp[3], cp[3];
  for (int i = 0; i < 3; i++) { ab[i] = b[i] - a[i]; ac[i] = c[i] - a[i]; ap[i] = p[i] - a[i];
                                bp[i] = p[i] - b[i]; cp[i] = p[i] - c[i]; }
  double d1 = hf_dot(ab, ap), d2 = hf_dot(ac, ap), d3 = hf_dot(ab, bp), d4 = hf_dot(ac, bp);
  double d5 = hf_dot(ab, cp), d6 = hf_dot(ac, cp);
  double va = d3 * d6 - d5 * d4, vb = d5 * d2 - d1 * d6, vc = d1 * d4 - d3 * d2;
  if (d1 <= 0 && d2 <= 0) { for (int i = 0; i < 3; i++) q[i] = a[i]; return; }
  if (d3 >= 0 && d4 <= d3) { for (int i = 0; i < 3; i++) q[i] = b[i]; return; }
  if (d6 >= 0 && d5 <= d6) { for (int i = 0; i < 3; i++) q[i] = c[i]; return; }
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    double t = d1 / (d1 - d3);
    for (int i = 0; i < 3; i++) q[i] = a[i] + t * ab[i];
    return;
  }
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    double t = d2 / (d2 - d6);
    for (int i = 0; i < 3; i++) q[i] = a[i] + t * ac[i];
    return;
  }
  if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0) {
    double t = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    for (int i = 0; i < 3; i++) q[i] = b[i] + t * (c[i] - b[i]);
    return;
  }
  double denom = 1.0 / (va + vb + vc), s = vb * denom, t = vc * denom;
  for (int i = 0; i < 3; i++) q[i] = (a[i] + s * ab[i]) + t * ac[i];
}

/* grid point (i, j) */
HF_INLINE void hf_point(const double *x, const double *y, const double *z, long long ncol, long long i, long long j,
                        double *P)
{
  P[0] = x[j]; P[1] = y[i]; P[2] = z[i * ncol + j];
}

/* heightfield._below */
static int hf_below(const double *c, const double *x, const double *y, const double *z, long long nrow, long long ncol,
                    const double *size)
{
  double dx = x[1] - x[0], dy = y[1] - y[0];
  int over = (-size[0] <= c[0]) && (c[0] <= size[0]) && (-size[1] <= c[1]) && (c[1] <= size[1]) && (c[2] >= -size[3]);
  if (!over) return 0;
  long long j = (long long)hf_clip((c[0] - x[0]) / dx, 0.0, (double)(ncol - 2));
  long long i = (long long)hf_clip((c[1] - y[0]) / dy, 0.0, (double)(nrow - 2));
  double u = (c[0] - x[j]) / dx, v = (c[1] - y[i]) / dy;
  double za = z[i * ncol + j], zb = z[i * ncol + j + 1], zc = z[(i + 1) * ncol + j + 1], zd = z[(i + 1) * ncol + j];
  double h = u >= v ? (za + u * (zb - za)) + v * (zc - zb) : (za + u * (zc - zd)) + v * (zd - za);
  return c[2] < h;
}

/* points_on_hfield: spheres k < n (in[5k..]: centre (3), radius, reach) against the surface of the grid
   x (ncol), y (nrow), z (nrow, ncol), size (sx, sy, top, base); out[10k..]: [d, w_a (3), w_b (3), n (3)],
   hit[k] 1 where d < reach.  Returns the number of hits. */
long long sd_hfield_points(long long n, const double *in, long long nrow, long long ncol, const double *x,
                           const double *y, const double *z, const double *size, double *out, double *hit)
{
  double dx = x[1] - x[0], dy = y[1] - y[0], cell = dx > dy ? dx : dy;
  long long hits = 0;
  for (long long k = 0; k < n; k++) {
    const double *c = in + 5 * k;
    double r = c[3], reach = c[4], w = (r + reach) + cell;
    hit[k] = 0.0;
    if (!(c[0] + w >= -size[0] && c[0] - w <= size[0] && c[1] + w >= -size[1] && c[1] - w <= size[1])) continue;
    long long j0 = (long long)hf_clip(floor(((c[0] + size[0]) + (-1.0 * w)) / dx), 0.0, (double)(ncol - 2));
    long long j1 = (long long)hf_clip(floor(((c[0] + size[0]) + w) / dx), 0.0, (double)(ncol - 2));
    long long i0 = (long long)hf_clip(floor(((c[1] + size[1]) + (-1.0 * w)) / dy), 0.0, (double)(nrow - 2));
    long long i1 = (long long)hf_clip(floor(((c[1] + size[1]) + w) / dy), 0.0, (double)(nrow - 2));
    double best = INFINITY, wb[3] = {0, 0, 0}, T[3][3] = {{0}};
    for (int upper = 0; upper < 2; upper++)            /* the cells' lower triangles, then their upper ones */
      for (long long i = i0; i <= i1; i++)
        for (long long j = j0; j <= j1; j++) {
          double A[3], B[3], C[3], q[3], e[3];
          hf_point(x, y, z, ncol, i, j, A);                           /* (x_j, y_i) */
          hf_point(x, y, z, ncol, upper ? i + 1 : i, j + 1, B);       /* lower: (x_j+1, y_i); upper: (x_j+1, y_i+1) */
          hf_point(x, y, z, ncol, i + 1, upper ? j : j + 1, C);       /* lower: (x_j+1, y_i+1); upper: (x_j, y_i+1) */
          hf_closest(c, A, B, C, q);
          for (int m = 0; m < 3; m++) e[m] = c[m] - q[m];
          double D2 = hf_dot(e, e);
          if (D2 < best) {
            best = D2;
            for (int m = 0; m < 3; m++) { wb[m] = q[m]; T[0][m] = A[m]; T[1][m] = B[m]; T[2][m] = C[m]; }
          }
        }
    double D = sqrt(best), e1[3], e2[3], fn[3], nn[3];
    int below = hf_below(c, x, y, z, nrow, ncol, size);
    for (int m = 0; m < 3; m++) { e1[m] = T[1][m] - T[0][m]; e2[m] = T[2][m] - T[0][m]; }
    fn[0] = e1[1] * e2[2] - e1[2] * e2[1];
    fn[1] = e1[2] * e2[0] - e1[0] * e2[2];
    fn[2] = e1[0] * e2[1] - e1[1] * e2[0];
    double L = sqrt(hf_dot(fn, fn)), big = fabs(c[0]);
    if (fabs(c[1]) > big) big = fabs(c[1]);
    if (fabs(c[2]) > big) big = fabs(c[2]);
    if (D <= 1e-12 * (big > 1.0 ? big : 1.0))
      for (int m = 0; m < 3; m++) nn[m] = fn[m] / L;
    else
      for (int m = 0; m < 3; m++) nn[m] = (below ? wb[m] - c[m] : c[m] - wb[m]) / D;
    double d = (below ? -D : D) - r;
    if (!(d < reach)) continue;
    double *o = out + 10 * k;
    o[0] = d;
    for (int m = 0; m < 3; m++) { o[1 + m] = c[m] - r * nn[m]; o[4 + m] = wb[m]; o[7 + m] = nn[m]; }
    hit[k] = 1.0;
    hits++;
  }
  return hits;
}
"""


def _routine():
    """``sd_hfield_points`` (ctypes), or None without a C compiler."""
    return c_routine(SOURCE, "sd_hfield_points", [ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong,
                                                  ctypes.c_longlong] + [ctypes.c_void_p] * 6, ctypes.c_longlong)


def points_on_hfield_c(grid, centres, radii, reach):
    """:func:`~sparsedyn.contact.heightfield.points_on_hfield`'s ``(index, d, w_a, w_b, n)`` of the spheres
    ``centres`` (k, 3), ``radii`` (k,), ``reach`` (a number or (k,)) against the field of ``grid``
    (:func:`field_grid`), in one C call; None without a C compiler."""
    f = _routine()
    if f is None:
        return None
    table, (nrow, ncol), at = grid
    C = np.asarray(centres, float).reshape(-1, 3)
    n = len(C)
    # one buffer for the routine's arrays: one address to look up (numpy's .ctypes costs microseconds)
    buf = np.empty(16 * n)
    inp, out, hit = buf[:5 * n].reshape(n, 5), buf[5 * n:15 * n].reshape(n, 10), buf[15 * n:]
    inp[:, :3], inp[:, 3], inp[:, 4] = C, radii, reach
    b = buf.ctypes.data
    f(n, b, nrow, ncol, at[0], at[1], at[2], at[3], b + 40 * n, b + 120 * n)
    k = np.flatnonzero(hit)
    rows = out[k]
    return k, rows[:, 0], rows[:, 1:4], rows[:, 4:7], rows[:, 7:10]


def field_grid(x, y, z, size):
    """The field's arrays as :func:`points_on_hfield_c` takes them: ``(table, (nrow, ncol), addresses of
    x, y, z and size)`` (``table`` the one buffer holding them, kept with it)."""
    nrow, ncol = np.shape(z)
    table = np.concatenate([x, y, np.ravel(z), size]).astype(float)
    b = table.ctypes.data
    return table, (nrow, ncol), (b, b + 8 * ncol, b + 8 * (ncol + nrow), b + 8 * (ncol + nrow + nrow * ncol))
