"""Shapes against a height field in one C call (:func:`group_on_hfield_c`), written by hand to mirror
the NumPy road operation by operation: which shapes come near it (the broad test of
:func:`~sparsedyn.contact.collision_hfield._near`: a shape's lowest point against the highest grid point
under it), and their features (spheres and points) against its surface as
:func:`~sparsedyn.contact.heightfield.points_on_hfield` measures them: each sphere's window of cells,
the closest point of each of their triangles (Ericson, "Real-Time Collision Detection", 2005, section
5.1.5: the first of the nearest in the NumPy road's order, the cells' lower triangles row by row, then
their upper ones), whether the centre is inside the solid, the normal and the
signed distance.  No fused multiply-add (GCC's pragma), so every operation rounds as the NumPy road's
(the placements' products summed in NumPy's order, which a BLAS may not keep: rounding apart).
:func:`group_rows_call` adds a second routine after the first: its hits as a step's rows
(:func:`~sparsedyn.contact.collision_hfield.hfield_rows`' layout), where they are the features' alone.
Without a C compiler, None: the NumPy road."""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..kernels import c_routine
from .collision_coal import SAME_POINT

__all__ = ["group_on_hfield_c", "group_call", "group_rows_call", "NO_HITS"]

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

/* points_on_hfield of one sphere (centre c, radius r) within reach of the surface of the grid x (ncol), y (nrow),
   z (nrow, ncol), size (sx, sy, top, base): 1 and o = [d, w_a (3), w_b (3), n (3)] where d < reach, else 0. */
static int hf_sphere(const double *c, double r, double reach, long long nrow, long long ncol, const double *x,
                     const double *y, const double *z, const double *size, double *o)
{
  double dx = x[1] - x[0], dy = y[1] - y[0], cell = dx > dy ? dx : dy, w = (r + reach) + cell;
  if (!(c[0] + w >= -size[0] && c[0] - w <= size[0] && c[1] + w >= -size[1] && c[1] - w <= size[1])) return 0;
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
  if (!(d < reach)) return 0;
  o[0] = d;
  for (int m = 0; m < 3; m++) { o[1 + m] = c[m] - r * nn[m]; o[4 + m] = wb[m]; o[7 + m] = nn[m]; }
  return 1;
}

/* collision_hfield._near of one shape (its world placement R row-major, p; cut; rec: its bounding sphere's
   centre (3, its frame) and radius, its support coefficients (8, _supports) and 1 where it has none) against
   the field placed (Rh row-major, ph) whose highest grid point is top: 1 and got = [i0, i1, j0, j1] (the window's
   rows i0:i1 and columns j0:j1) where kept, else 0. */
static int hf_near(const double *Rh, const double *ph, const double *R, const double *p, double cut, const double *rec,
                   long long nrow, long long ncol, const double *z, const double *size, double top, double *got)
{
  const double *c = rec, rb = rec[3], *coef = rec + 4;
  double dx = 2 * size[0] / (double)(ncol - 1), dy = 2 * size[1] / (double)(nrow - 1), cell = dx > dy ? dx : dy;
  double P[3], o[3], u[3];
  for (int i = 0; i < 3; i++) P[i] = (p[i] + ((R[3 * i] * c[0] + R[3 * i + 1] * c[1]) + R[3 * i + 2] * c[2])) - ph[i];
  for (int j = 0; j < 3; j++) o[j] = (P[0] * Rh[j] + P[1] * Rh[3 + j]) + P[2] * Rh[6 + j];
  if (!((o[2] - rb) - top < cut)) return 0;                          /* (the bounding sphere first: cheap) */
  double down = rb;
  if (coef[8] == 0.0) {
    for (int j = 0; j < 3; j++) u[j] = fabs((R[j] * Rh[2] + R[3 + j] * Rh[5]) + R[6 + j] * Rh[8]);
    if (u[2] > 1.0) u[2] = 1.0;
    double e0 = coef[5] * u[0], e1 = coef[6] * u[1], e2 = coef[7] * u[2];
    double s = ((coef[0] + ((coef[1] * u[0] + coef[2] * u[1]) + coef[3] * u[2])) + coef[4] * sqrt(1.0 - u[2] * u[2]))
               + sqrt((e0 * e0 + e1 * e1) + e2 * e2);
    down = s < rb ? s : rb;
  }
  if (!((o[2] - down) - top < cut)) return 0;
  double w = (rb + cut) + cell;
  if (!(o[0] + w >= -size[0] && o[0] - w <= size[0] && o[1] + w >= -size[1] && o[1] - w <= size[1])) return 0;
  long long j0 = (long long)hf_clip(floor(((o[0] + size[0]) + (-1.0 * w)) / dx), 0.0, (double)(ncol - 1));
  long long j1 = (long long)hf_clip(floor(((o[0] + size[0]) + w) / dx), 0.0, (double)(ncol - 1));
  long long i0 = (long long)hf_clip(floor(((o[1] + size[1]) + (-1.0 * w)) / dy), 0.0, (double)(nrow - 1));
  long long i1 = (long long)hf_clip(floor(((o[1] + size[1]) + w) / dy), 0.0, (double)(nrow - 1));
  i1 = i1 + 1 < nrow - 1 ? i1 + 1 : nrow - 1;                         /* (the window's last grid points) */
  j1 = j1 + 1 < ncol - 1 ? j1 + 1 : ncol - 1;
  double low = (o[2] - down) - cut, high = -INFINITY;
  for (long long i = i0; i <= i1 && !(low < high); i++)
    for (long long j = j0; j <= j1; j++)
      if (z[i * ncol + j] > high) high = z[i * ncol + j];
  if (!(low < high)) return 0;
  got[0] = (double)i0; got[1] = (double)(i1 + 1); got[2] = (double)j0; got[3] = (double)(j1 + 1);
  return 1;
}

/* The shapes k < m near the field (hf_near) and their features' hits: R[0..9), p[0..3): the field's placement
   (row-major); R[9 (k + 1)..], p[3 (k + 1)..], cut[k]: shape k's and its cutoff; table[16k..]: its hf_near
   record (13), 1 where its pair's first shape is the field, its first feature and its features' count;
   feats[4i..]: feature i's centre (its shape's frame) and radius.  out[0]: how many are kept; out[1 + 5j..]:
   the j-th kept, [k, i0, i1, j0, j1] (hf_near's window); out[1 + 5m + 11h..]: hit h, [j, d, w_a (3), w_b (3),
   n (3)] (world, w_a on the pair's first shape, n towards it), the kept in turn, each one's features in turn.
   Returns the number of hits. */
long long sd_hfield_group(long long m, const double *Rs, const double *ps, const double *cut, const double *table,
                          long long nrow, long long ncol, const double *x, const double *y, const double *z,
                          const double *size, double top, const double *feats, double *out)
{
  const double *Rh = Rs, *ph = ps;
  long long h = 0, kept = 0;
  double *hits = out + 1 + 5 * m;
  for (long long k = 0; k < m; k++) {
    const double *rec = table + 16 * k, *R = Rs + 9 * (k + 1), *p = ps + 3 * (k + 1);
    double *got = out + 1 + 5 * kept;
    if (!hf_near(Rh, ph, R, p, cut[k], rec, nrow, ncol, z, size, top, got + 1)) continue;
    got[0] = (double)k;
    double Rl[9], pl[3], o[10];                           /* the shape in the field's frame: Rh^T R, Rh^T (p - ph) */
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) Rl[3 * i + j] = (Rh[i] * R[j] + Rh[3 + i] * R[3 + j]) + Rh[6 + i] * R[6 + j];
    for (int j = 0; j < 3; j++)
      pl[j] = ((p[0] - ph[0]) * Rh[j] + (p[1] - ph[1]) * Rh[3 + j]) + (p[2] - ph[2]) * Rh[6 + j];
    long long first = (long long)rec[14], count = (long long)rec[15];
    for (long long i = first; i < first + count; i++) {
      const double *f = feats + 4 * i;
      double c[3];
      for (int j = 0; j < 3; j++) c[j] = ((f[0] * Rl[3 * j] + f[1] * Rl[3 * j + 1]) + f[2] * Rl[3 * j + 2]) + pl[j];
      if (!hf_sphere(c, f[3], cut[k], nrow, ncol, x, y, z, size, o)) continue;
      double *e = hits + 11 * h++, sa = rec[13] != 0.0 ? -1.0 : 1.0;
      e[0] = (double)kept; e[1] = o[0];
      for (int j = 0; j < 3; j++) {                                        /* (world) */
        double wa = ((o[1] * Rh[3 * j] + o[2] * Rh[3 * j + 1]) + o[3] * Rh[3 * j + 2]) + ph[j];
        double wb = ((o[4] * Rh[3 * j] + o[5] * Rh[3 * j + 1]) + o[6] * Rh[3 * j + 2]) + ph[j];
        e[2 + j] = sa > 0 ? wa : wb; e[5 + j] = sa > 0 ? wb : wa;
        e[8 + j] = sa * ((o[7] * Rh[3 * j] + o[8] * Rh[3 * j + 1]) + o[9] * Rh[3 * j + 2]);
      }
    }
    kept++;
  }
  out[0] = (double)kept;
  return h;
}

/* hfield_rows of the h hits sd_hfield_group left in out for its m shapes (their placements Rs, ps after the
   field's), into rows (nrows rows of c columns, each first written free: d = +inf, zeros): shape k's pair's rows
   from pose[15k] (their count pose[15k + 1]), its hits in turn, each [d, (w_a + w_b) / 2, n, E (R^T (w_a - p)) + r,
   n . w_b] (collision_near.hit_rows; E = pose[15k + 3..], r = pose[15k + 12..] the shape's placement in its body).
   -1 where the Python road answers: a kept shape with hits of more kinds (pose[15k + 2]), more hits than its
   pair's rows, or two hits of one pair within 2 same of each other (collision_coal.one_per_point keeps one). */
long long sd_hfield_rows(long long m, long long h, const double *Rs, const double *ps, const double *out,
                         const double *pose, double same, long long nrows, long long c, double *rows)
{
  for (long long i = 0; i < nrows; i++) {
    rows[c * i] = INFINITY;
    for (long long j = 1; j < c; j++) rows[c * i + j] = 0.0;
  }
  long long kept = (long long)out[0];
  for (long long j = 0; j < kept; j++)
    if (pose[15 * (long long)out[1 + 5 * j] + 2] != 0.0) return -1;
  const double *hits = out + 1 + 5 * m;
  long long rank = 0;
  for (long long t = 0; t < h; t++) {
    const double *e = hits + 11 * t, *wa = e + 2, *wb = e + 5, *n = e + 8;
    rank = t > 0 && e[0] == e[-11] ? rank + 1 : 0;
    long long k = (long long)out[1 + 5 * (long long)e[0]];
    const double *P = pose + 15 * k, *R = Rs + 9 * (k + 1), *p = ps + 3 * (k + 1), *E = P + 3, *r = P + 12;
    if (rank >= (long long)P[1]) return -1;
    for (long long u = t - rank; u < t; u++) {               /* (the pair's hits before this one) */
      const double *x = hits + 11 * u + 2;
      if (fabs(x[0] - wa[0]) < 2 * same && fabs(x[1] - wa[1]) < 2 * same && fabs(x[2] - wa[2]) < 2 * same)
        return -1;
    }
    double *row = rows + c * ((long long)P[0] + rank), full[11], x[3], l[3];
    for (int i = 0; i < 3; i++) x[i] = wa[i] - p[i];
    for (int i = 0; i < 3; i++) l[i] = (R[i] * x[0] + R[3 + i] * x[1]) + R[6 + i] * x[2];
    full[0] = e[1];
    for (int i = 0; i < 3; i++) {
      full[1 + i] = (wa[i] + wb[i]) / 2;
      full[4 + i] = n[i];
      full[7 + i] = ((E[3 * i] * l[0] + E[3 * i + 1] * l[1]) + E[3 * i + 2] * l[2]) + r[i];
    }
    full[10] = (n[0] * wb[0] + n[1] * wb[1]) + n[2] * wb[2];
    for (long long j = 0; j < c && j < 11; j++) row[j] = full[j];
  }
  return h;
}
"""


def _routine():
    """``sd_hfield_group`` (ctypes), or None without a C compiler."""
    return c_routine(SOURCE, "sd_hfield_group", [ctypes.c_longlong] + [ctypes.c_void_p] * 4 + [ctypes.c_longlong] * 2 +
                     [ctypes.c_void_p] * 4 + [ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_longlong)


def group_on_hfield_c(grid, top, R, p, each, cut, table, features):
    """``(near, (t, d, w_a, w_b, n))`` in one C call: of the shapes ``each[1:]`` (m,) placed ``R``, ``p``
    (world, every shape's: (S, 3, 3), (S, 3)) with cutoffs ``cut`` (m,), those that may have a hit within
    their cutoff of the field ``each[0]`` of ``grid`` (:func:`field_grid`) whose highest grid point is
    ``top``, as :func:`~sparsedyn.contact.collision_hfield._near` finds them (``near`` its list ``[(k,
    (i0, i1, j0, j1))]``, the window's own highest point, no blocks), and their features' hits as
    :func:`~sparsedyn.contact.heightfield.points_on_hfield` finds them in the field's frame, in the
    world (``t`` (h,) each one's shape's position in ``near``, ``w_a`` on the pair's first shape and
    ``n`` towards it; where none is near, empty read-only arrays).  ``table = (rows (m, 16), their
    address, {thread: its call})``: each shape's bounding sphere's centre (its frame) and radius, its
    support coefficients (8), 1 where it has none, 1 where its pair's first shape is the field, its first
    feature and its features' count in ``features = (the table (N, 4), its address)`` (each a centre in
    its shape's frame and a radius); None without a C compiler."""
    m = len(each) - 1
    got = table[2].get(threading.get_ident()) or _scratch(table, m, len(features[0]))
    if got is None:
        return None
    f, buf, Rs, ps, cuts, o, (b, bR, bp, bo) = got
    _, (nrow, ncol), at = grid
    R.take(each, 0, Rs)
    p.take(each, 0, ps)
    cuts[:] = cut
    h = f(m, b, bR, bp, table[1], nrow, ncol, at[0], at[1], at[2], at[3], top, features[1], bo)
    kept = int(buf[o])
    if not kept:
        return [], NO_HITS
    near = buf[o + 1:o + 1 + 5 * kept].reshape(-1, 5).astype(int).tolist()
    hits = buf[o + 1 + 5 * m:o + 1 + 5 * m + 11 * h].reshape(h, 11).copy()
    return [(x[0], tuple(x[1:])) for x in near], (hits[:, 0].astype(int), hits[:, 1], hits[:, 2:5], hits[:, 5:8],
                                                   hits[:, 8:11])


def group_call(grid, top, R, p, each, table, features, at, cut):
    """``near() -> bool``: whether any shape of ``each[1:]`` may have a hit within its cutoff of the field
    ``each[0]`` (:func:`group_on_hfield_c`'s arguments ``grid``, ``top``, ``each``, ``table``, ``features``;
    the placements ``R`` (S, 3, 3), ``p`` (S, 3) and the cutoffs ``cut.take(at)`` (m,) as they are when
    called), its routine's call on the same numbers, bound once (this thread's buffers); None without a C
    compiler."""
    got = table[2].get(threading.get_ident()) or _scratch(table, len(each) - 1, len(features[0]))
    if got is None:
        return None
    f, buf, Rs, ps, cuts, o, (b, bR, bp, bo) = got
    m, take, (_, (nrow, ncol), a) = len(each) - 1, cut.take, grid
    args = (m, b, bR, bp, table[1], nrow, ncol, a[0], a[1], a[2], a[3], top, features[1], bo)

    def near():
        R.take(each, 0, Rs)
        p.take(each, 0, ps)
        take(at, out=cuts)
        f(*args)
        return buf[o] != 0.0
    return near


def group_rows_call(grid, top, R, p, each, table, features, at, cut, pose, rows):
    """``written() -> bool``: :func:`group_call`'s routine, then its shapes' hits written as
    :func:`~sparsedyn.contact.collision_hfield.hfield_rows` writes them into ``rows`` (F, c) (C-contiguous; every
    row free first: where no shape is near, all of them), in one more C call; False where that road must answer
    instead (a shape near with hits of more kinds, more hits than its pair's rows, or two of a pair's hits at one
    point).  ``pose`` (m, 15): per shape of ``each[1:]`` its pair's first row in ``rows``, their count, 1 where
    it is of a kind with more hits, and its placement in its body (``E`` (9) row-major, ``r`` (3)); None without
    a C compiler or where ``rows`` is not C-contiguous."""
    got = table[2].get(threading.get_ident()) or _scratch(table, len(each) - 1, len(features[0]))
    g = _rows_routine()
    if got is None or g is None or not rows.flags.c_contiguous:
        return None
    f, buf, Rs, ps, cuts, o, (b, bR, bp, bo) = got
    m, take, (_, (nrow, ncol), a) = len(each) - 1, cut.take, grid
    args = (m, b, bR, bp, table[1], nrow, ncol, a[0], a[1], a[2], a[3], top, features[1], bo)
    pose = np.ascontiguousarray(pose, float)
    rest = (b, bR, bo, pose.ctypes.data, SAME_POINT, len(rows), rows.shape[1], rows.ctypes.data)

    def written():
        R.take(each, 0, Rs)
        p.take(each, 0, ps)
        take(at, out=cuts)
        return g(m, f(*args), *rest) >= 0
    written.pose, written.rows = pose, rows          # (their addresses are the routine's: kept alive with the call)
    return written


def _rows_routine():
    """``sd_hfield_rows`` (ctypes), or None without a C compiler."""
    return c_routine(SOURCE, "sd_hfield_rows", [ctypes.c_longlong] * 2 + [ctypes.c_void_p] * 4 +
                     [ctypes.c_double, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_void_p], ctypes.c_longlong)


def _scratch(table, m, n):
    """This thread's call of :func:`group_on_hfield_c` for ``m`` shapes with ``n`` features in all, made once
    per thread and kept in ``table``: ``(the routine, its buffer, the buffer's views of the poses (m + 1, 3,
    3), (m + 1, 3) and the cutoffs (m,), where the output starts, the addresses the routine takes)`` (one
    buffer: its address read once); None without a C compiler."""
    f = _routine()
    if f is None:
        return None
    o = 12 * (m + 1) + m
    buf = np.empty(o + 1 + 5 * m + 11 * n)
    b = buf.ctypes.data
    got = table[2][threading.get_ident()] = (f, buf, buf[:9 * (m + 1)].reshape(m + 1, 3, 3),
                                             buf[9 * (m + 1):12 * (m + 1)].reshape(m + 1, 3), buf[o - m:o], o,
                                             (b, b + 72 * (m + 1), b + 96 * (m + 1), b + 8 * o))
    return got


def _no_hits():
    empty = (np.zeros(0, int), np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)))
    for x in empty:
        x.flags.writeable = False
    return empty


#: No hits, ``(t, d, w_a, w_b, n)`` of none: empty read-only arrays, shared by the answers that have none.
NO_HITS = _no_hits()


def field_grid(x, y, z, size):
    """The field's arrays as :func:`group_on_hfield_c` takes them: ``(table, (nrow, ncol), addresses of
    x, y, z and size)`` (``table`` the one buffer holding them, kept with it)."""
    nrow, ncol = np.shape(z)
    table = np.concatenate([x, y, np.ravel(z), size]).astype(float)
    b = table.ctypes.data
    return table, (nrow, ncol), (b, b + 8 * ncol, b + 8 * (ncol + nrow), b + 8 * (ncol + nrow + nrow * ncol))
