"""A box's, a capsule's, a cylinder's and an ellipsoid's hits on a height field beyond their features' in
one C call (:func:`more_on_hfield_c`), written by hand to mirror
:func:`~sparsedyn.contact.collision_hfield._more_hits` step by step and in its order: the window's grid
points against a box, a capsule, a cylinder (closest points, Ericson, "Real-Time Collision Detection", 2005,
sections 5.1.3-5.1.4) or an ellipsoid (Eberly, "Distance from a point to an ellipse, an ellipsoid, or a
hyperellipsoid", 2013), the triangles' edges against a capsule's or a cylinder's axis and a box's edges
(Ericson, section 5.1.9: the closest points of two segments), against an ellipsoid (the ellipse it makes
seen along the edge) and a cylinder's rims (Newton's iteration on the squared distance), and an ellipsoid's
support point and a cylinder's rim points on the faces.  The shapes are placed in the field's frame, where
the NumPy road places the grid points in the world for their hits: the answers agree to rounding.  A call
with more hits than its buffer is left to the NumPy road (None), as is a process without a C compiler.
No fused multiply-add (GCC's pragma)."""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine
from .closed_forms import PARALLEL_EDGES
from .collision_coal import SAME_DEPTH
from .heightfield_curved_c import CURVED
from .segments_c import SEGMENTS

__all__ = ["more_on_hfield_c", "KIND_CODES"]

#: The kinds the routine takes, by their code in its table.
KIND_CODES = {"box": 0, "capsule": 1, "cylinder": 2, "ellipsoid": 3}

#: The routine's constants: :data:`~sparsedyn.contact.collision_coal.SAME_DEPTH`, the sine of
#: :data:`~sparsedyn.contact.closed_forms.PARALLEL_EDGES`.
_PAR = np.array([SAME_DEPTH, np.sin(PARALLEL_EDGES)])
_PAR.flags.writeable = False
_PAR_AT = _PAR.ctypes.data                       # (a constant of the module: its address read once)

SOURCE = r"""
#include <math.h>
#include <float.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O2", "fp-contract=off", "no-math-errno")
#endif
#define MH static inline __attribute__((always_inline))
#define REC 24                 /* a shape's record: kind, size (3), bounding radius, cut, deepest, window (4),
                                  Rl (9, row-major: its axes in the field's frame as columns), pl (3), its index */
#define ROW 12                 /* a candidate: t, face, d, w_a (3), w_b (3), n (3), the field's frame */

typedef struct { const double *x, *y, *z; long long nrow, ncol; } mh_field;
typedef struct { double *o; long long n, cap; int full; } mh_out;

MH double mh_dot(const double *a, const double *b) { return (a[0] * b[0] + a[1] * b[1]) + a[2] * b[2]; }
MH double mh_unit(double x) { double y = x > 0.0 ? x : 0.0; return y < 1.0 ? y : 1.0; }
MH double mh_clip(double x, double lo, double hi) { double y = x > lo ? x : lo; return y < hi ? y : hi; }
MH void mh_point(const mh_field *F, long long i, long long j, double *P)
{ P[0] = F->x[j]; P[1] = F->y[i]; P[2] = F->z[i * F->ncol + j]; }
MH void mh_cross(const double *a, const double *b, double *c)
{ c[0] = a[1] * b[2] - a[2] * b[1]; c[1] = a[2] * b[0] - a[0] * b[2]; c[2] = a[0] * b[1] - a[1] * b[0]; }
/* R^T w and R w of a row-major R */
MH void mh_rt(const double *R, const double *w, double *x)
{ for (int i = 0; i < 3; i++) x[i] = (R[i] * w[0] + R[3 + i] * w[1]) + R[6 + i] * w[2]; }
MH void mh_r(const double *R, const double *w, double *x)
{ for (int i = 0; i < 3; i++) x[i] = (R[3 * i] * w[0] + R[3 * i + 1] * w[1]) + R[3 * i + 2] * w[2]; }
MH void mh_col(const double *R, int k, double *u) { u[0] = R[k]; u[1] = R[3 + k]; u[2] = R[6 + k]; }

static void mh_put(mh_out *b, double t, double face, double d, const double *wa, const double *wb, const double *n)
{
  if (b->n >= b->cap) { b->full = 1; return; }
  double *e = b->o + ROW * b->n++;
  e[0] = t; e[1] = face; e[2] = d;
  for (int i = 0; i < 3; i++) { e[3 + i] = wa[i]; e[6 + i] = wb[i]; e[9 + i] = n[i]; }
}

""" + SEGMENTS + r"""
/* collision_hfield._local_least: moving the surface point into either triangle takes it no nearer */
MH int mh_least(const double *T, const double *n) { return mh_dot(T, n) <= 0 && mh_dot(T + 3, n) <= 0; }

/* the normal R m and the point c + R y of a shape (R row-major, centre c) */
static void mh_placed(const double *R, const double *c, const double *m, const double *y, double *n, double *ws)
{
  double w[3];
  mh_r(R, m, n);
  mh_r(R, y, w);
  for (int i = 0; i < 3; i++) ws[i] = c[i] + w[i];
}

/* A grid point P against a box (centre c, half extents h), a capsule or a cylinder (radius r, half length
   h): closed_forms.sphere_box / sphere_capsule / sphere_cylinder with radius 0; ws on the shape, n from it. */
static double mh_on_box(const double *P, const double *R, const double *c, const double *h, double *ws, double *n)
{
  double w0[3] = {P[0] - c[0], P[1] - c[1], P[2] - c[2]}, x[3], y[3], w[3], m[3], yb[3];
  mh_rt(R, w0, x);
  for (int i = 0; i < 3; i++) { y[i] = mh_clip(x[i], -h[i], h[i]); w[i] = x[i] - y[i]; }
  double L = sqrt(mh_dot(w, w)), d;
  if (L <= 0) {
    int k = 0;
    for (int i = 1; i < 3; i++) if (h[i] - fabs(x[i]) < h[k] - fabs(x[k])) k = i;
    double sign = x[k] < 0 ? -1.0 : 1.0;
    for (int i = 0; i < 3; i++) { m[i] = i == k ? sign : 0.0; yb[i] = x[i]; }
    yb[k] = sign * h[k];
    d = -(h[k] - fabs(x[k]));
  } else {
    for (int i = 0; i < 3; i++) { m[i] = w[i] / L; yb[i] = y[i]; }
    d = L;
  }
  mh_placed(R, c, m, yb, n, ws);
  return d;
}

static double mh_on_capsule(const double *P, const double *u, const double *c, double r, double h, double *ws,
                            double *n)
{
  double w0[3] = {P[0] - c[0], P[1] - c[1], P[2] - c[2]}, cb[3], w[3];
  double t = mh_clip(mh_dot(w0, u), -h, h);
  for (int i = 0; i < 3; i++) { cb[i] = c[i] + t * u[i]; w[i] = P[i] - cb[i]; }
  double L = sqrt(mh_dot(w, w));
  for (int i = 0; i < 3; i++) n[i] = L > 0 ? w[i] / L : (i == 2 ? 1.0 : 0.0);
  for (int i = 0; i < 3; i++) ws[i] = cb[i] + r * n[i];
  return L - r;
}

static double mh_on_cylinder(const double *P, const double *R, const double *c, double r, double h, double *ws,
                             double *n)
{
  double w0[3] = {P[0] - c[0], P[1] - c[1], P[2] - c[2]}, x[3], y[3], w[3], m[3], yy[3];
  mh_rt(R, w0, x);
  double rr = sqrt(x[0] * x[0] + x[1] * x[1]), q0 = rr > 0 ? x[0] / rr : 1.0, q1 = rr > 0 ? x[1] / rr : 0.0;
  y[0] = rr > r ? q0 * r : x[0]; y[1] = rr > r ? q1 * r : x[1]; y[2] = mh_clip(x[2], -h, h);
  for (int i = 0; i < 3; i++) w[i] = x[i] - y[i];
  double L = sqrt(mh_dot(w, w)), d;
  if (rr <= r && fabs(x[2]) <= h) {
    double up = x[2] < 0 ? -1.0 : 1.0;
    if (r - rr < h - fabs(x[2])) { m[0] = q0; m[1] = q1; m[2] = 0.0; yy[0] = q0 * r; yy[1] = q1 * r; yy[2] = x[2]; }
    else { m[0] = 0.0; m[1] = 0.0; m[2] = up; yy[0] = x[0]; yy[1] = x[1]; yy[2] = up * h; }
    d = -(r - rr < h - fabs(x[2]) ? r - rr : h - fabs(x[2]));
  } else {
    for (int i = 0; i < 3; i++) { m[i] = w[i] / L; yy[i] = y[i]; }
    d = L;
  }
  mh_placed(R, c, m, yy, n, ws);
  return d;
}

/* The edges of family fam (0 along x, 1 along y, 2 the diagonals) of shape s's window that come within its
   reach (collision_hfield._edges, _edge_table), appended to E from E[12 n]: P0, P1, T (2, 3); the new count. */
static long long mh_edges(const mh_field *F, const double *s, int fam, double *E, long long n)
{
  long long i0 = (long long)s[7], i1 = (long long)s[8], j0 = (long long)s[9], j1 = (long long)s[10];
  double reach = s[4] + s[5];
  const double *c = s + 20;
  for (long long r = i0; r < i1; r++)
    for (long long k = j0; k < j1; k++) {
      long long er, ek, tr[2], tk[2];                  /* the far end, the third corners of the two triangles */
      if (fam == 0) {
        if (!(k + 1 < j1)) continue;
        er = r; ek = k + 1; tr[0] = r + 1; tk[0] = k + 1; tr[1] = r - 1; tk[1] = k;
      } else if (fam == 1) {
        if (!(r + 1 < i1)) continue;
        er = r + 1; ek = k; tr[0] = r; tk[0] = k - 1; tr[1] = r + 1; tk[1] = k + 1;
      } else {
        if (!(k + 1 < j1 && r + 1 < i1)) continue;
        er = r + 1; ek = k + 1; tr[0] = r; tk[0] = k + 1; tr[1] = r + 1; tk[1] = k;
      }
      double P0[3], P1[3], mid[3], D[3];
      mh_point(F, r, k, P0);
      mh_point(F, er, ek, P1);
      for (int m = 0; m < 3; m++) { D[m] = P1[m] - P0[m]; mid[m] = (P0[m] + P1[m]) / 2 - c[m]; }
      double len = sqrt(mh_dot(D, D)), half = len / 2;
      if (!(mh_dot(mid, mid) < (reach + half) * (reach + half))) continue;
      double *e = E + 12 * n++, u[3];
      for (int m = 0; m < 3; m++) { e[m] = P0[m]; e[3 + m] = P1[m]; u[m] = D[m] / len; }
      for (int q = 0; q < 2; q++) {
        double *T = e + 6 + 3 * q, W[3];
        if (!(0 <= tr[q] && tr[q] < F->nrow && 0 <= tk[q] && tk[q] < F->ncol)) { T[0] = T[1] = T[2] = 0.0; continue; }
        mh_point(F, tr[q], tk[q], W);
        for (int m = 0; m < 3; m++) W[m] -= P0[m];
        double p = mh_dot(W, u);
        for (int m = 0; m < 3; m++) T[m] = W[m] - p * u[m];
      }
    }
  return n;
}

/* collision_hfield._capsule_edges of one edge e against shape s (a capsule, or a cylinder's side) */
static void mh_axis_edge(const double *s, const double *e, mh_out *o)
{
  double u[3], A0[3], d1[3], d2[3], sa, se, X1[3], X2[3], w[3], n[3], wa[3];
  double r = s[1], h = s[2];
  mh_col(s + 11, 2, u);
  for (int m = 0; m < 3; m++) { A0[m] = s[20 + m] - (h / 2) * u[m]; d1[m] = h * u[m]; d2[m] = e[3 + m] - e[m]; }
  sg_segments(A0, d1, e, d2, &sa, &se);
  for (int m = 0; m < 3; m++) { X1[m] = A0[m] + sa * d1[m]; X2[m] = e[m] + se * d2[m]; w[m] = X1[m] - X2[m]; }
  double L = sqrt(mh_dot(w, w));
  for (int m = 0; m < 3; m++) n[m] = L > 0 ? w[m] / L : (m == 2 ? 1.0 : 0.0);
  for (int m = 0; m < 3; m++) wa[m] = X1[m] - r * n[m];
  double d = L - r;
  if (0 < sa && sa < 1 && 0 < se && se < 1 && d < s[5] && mh_least(e + 6, n)) mh_put(o, s[23], 0.0, d, wa, X2, n);
}

/* collision_hfield._box_edges of one edge e against shape s (a box): its 12 edges in closed_forms' order
   (along x, y, z; each from the corner -1 along its axis and (u, v) = (-+1, -+1) across it) */
static void mh_box_edge(const double *s, const double *e, double parallel, mh_out *o)
{
  const double *R = s + 11, *c = s + 20;
  double h[3] = {s[1] / 2, s[2] / 2, s[3] / 2}, B[3], Bm[3];
  for (int m = 0; m < 3; m++) { B[m] = e[3 + m] - e[m]; Bm[m] = (e[m] + e[3 + m]) / 2; }
  double lb = sqrt(mh_dot(B, B));
  for (int j = 0; j < 12; j++) {
    int ax = j / 4;
    double S[3], Sh[3], A0[3], A[3], g[3], t0[3];
    S[ax] = -1.0;
    {
      int o0 = ax == 0 ? 1 : 0, o1 = ax == 2 ? 1 : 2;                   /* the two other axes in order */
      S[o0] = (j % 4) / 2 ? 1.0 : -1.0; S[o1] = (j % 2) ? 1.0 : -1.0;
    }
    for (int m = 0; m < 3; m++) Sh[m] = S[m] * h[m];
    mh_r(R, Sh, t0);
    for (int m = 0; m < 3; m++) { A0[m] = c[m] + t0[m]; A[m] = R[3 * m + ax] * (2 * h[ax]); }
    for (int m = 0; m < 3; m++) g[m] = (A0[m] + A[m] / 2) - Bm[m];
    double gap = (sqrt(mh_dot(g, g)) - sqrt(mh_dot(A, A)) / 2) - lb / 2;
    if (!(gap < s[5])) continue;
    double sb, se, Y[3], X[3], n[3], q[3], mm[3];
    sg_segments(A0, A, e, B, &sb, &se);
    for (int m = 0; m < 3; m++) { Y[m] = A0[m] + sb * A[m]; X[m] = e[m] + se * B[m]; }
    mh_cross(A, B, n);
    double L = sqrt(mh_dot(n, n));
    int crossing = L > parallel * sqrt(mh_dot(A, A) * mh_dot(B, B));
    for (int m = 0; m < 3; m++) { n[m] = n[m] / (crossing ? L : 1.0); q[m] = c[m] - X[m]; }
    if (mh_dot(q, n) < 0) for (int m = 0; m < 3; m++) n[m] = n[m] * -1.0;
    for (int m = 0; m < 3; m++) q[m] = Y[m] - X[m];
    double d = mh_dot(q, n), mn[3] = {-n[0], -n[1], -n[2]};
    mh_rt(R, mn, mm);
    int corner = 1;
    for (int m = 0; m < 3; m++) corner &= (m == ax ? 0.0 : mm[m] * S[m]) >= -64 * DBL_EPSILON;
    if (crossing && 0 < sb && sb < 1 && 0 < se && se < 1 && d < s[5] && corner && mh_least(e + 6, n))
      mh_put(o, s[23], 0.0, d, Y, X, n);
  }
}

/* heightfield.inside_triangles of one point x of the plane of triangle T (3, 3) */
static int mh_inside(const double *T, const double *x)
{
  for (int i = 0; i < 3; i++) {
    const double *a = T + 3 * i, *b = T + 3 * ((i + 1) % 3);
    double side = (b[0] - a[0]) * (x[1] - a[1]) - (b[1] - a[1]) * (x[0] - a[0]);
    double A = fabs(a[0]) > fabs(a[1]) ? fabs(a[0]) : fabs(a[1]), X = fabs(x[0]) > fabs(x[1]) ? fabs(x[0]) : fabs(x[1]);
    double B = fabs(b[0] - a[0]) > fabs(b[1] - a[1]) ? fabs(b[0] - a[0]) : fabs(b[1] - a[1]);
    if (!(side >= ((-1e-14 * (A + X)) * B))) return 0;
  }
  return 1;
}

/* triangle q of the window (i0, i1, j0, j1): the cells' lower triangles row by row, then their upper ones */
static void mh_triangle(const mh_field *F, const double *s, long long q, double *T, double *nt)
{
  long long i0 = (long long)s[7], j0 = (long long)s[9], w = (long long)s[10] - 1 - j0;
  long long cells = ((long long)s[8] - 1 - i0) * w, upper = q >= cells, c = upper ? q - cells : q;
  long long i = i0 + c / w, j = j0 + c % w;
  mh_point(F, i, j, T);
  mh_point(F, upper ? i + 1 : i, j + 1, T + 3);
  mh_point(F, i + 1, upper ? j : j + 1, T + 6);
  double e1[3], e2[3];
  for (int m = 0; m < 3; m++) { e1[m] = T[3 + m] - T[m]; e2[m] = T[6 + m] - T[m]; }
  mh_cross(e1, e2, nt);
  double L = sqrt(mh_dot(nt, nt));
  for (int m = 0; m < 3; m++) nt[m] = nt[m] / L;
}

/* collision_hfield._face_hits of shape s (an ellipsoid: ellipsoid_field.ellipsoid_faces; a cylinder:
   heightfield.cylinder_faces, its rims' four points each, the rim points in turn over the triangles); the
   least distance of those kept. */
static double mh_faces(const mh_field *F, const double *s, mh_out *o)
{
  const double *R = s + 11, *c = s + 20;
  long long cells = ((long long)s[8] - 1 - (long long)s[7]) * ((long long)s[10] - 1 - (long long)s[9]);
  double least = INFINITY, T[9], nt[3], u[3];
  mh_col(R, 2, u);
  if (s[0] == 3) {
    for (long long q = 0; q < 2 * cells; q++) {
      double m[3], x[3], t[3], wb[3], g[3];
      mh_triangle(F, s, q, T, nt);
      mh_rt(R, nt, m);
      for (int k = 0; k < 3; k++) { m[k] = m[k] * s[1 + k]; t[k] = s[1 + k] * m[k]; }
      double h = sqrt(mh_dot(m, m));
      mh_r(R, t, x);
      for (int k = 0; k < 3; k++) { x[k] = c[k] - x[k] / h; g[k] = c[k] - T[k]; }
      double d = mh_dot(g, nt) - h;
      for (int k = 0; k < 3; k++) wb[k] = x[k] - d * nt[k];
      if (mh_inside(T, wb) && d < s[5]) { mh_put(o, s[23], 1.0, d, x, wb, nt); least = d < least ? d : least; }
    }
    return least;
  }
  double half = s[2] / 2, r = s[1];
  for (int p = 0; p < 8; p++)
    for (long long q = 0; q < 2 * cells; q++) {
      double w[3], v[3], x[3], g[3], wb[3];
      mh_triangle(F, s, q, T, nt);
      double nu = mh_dot(nt, u);
      for (int k = 0; k < 3; k++) w[k] = nt[k] - nu * u[k];
      double L = sqrt(mh_dot(w, w));
      if (L <= 1e-12) mh_col(R, 0, w);
      else for (int k = 0; k < 3; k++) w[k] = w[k] / L;
      mh_cross(u, w, v);
      double sg = p < 4 ? -1.0 : 1.0, dd[3];
      for (int k = 0; k < 3; k++) dd[k] = (p % 4 == 0 ? -w[k] : p % 4 == 1 ? w[k] : p % 4 == 2 ? v[k] : -v[k]);
      for (int k = 0; k < 3; k++) { x[k] = (c[k] + (sg * half) * u[k]) + r * dd[k]; g[k] = x[k] - T[k]; }
      double d = mh_dot(g, nt);
      for (int k = 0; k < 3; k++) wb[k] = x[k] - d * nt[k];
      if (d < s[5] && mh_inside(T, wb)) { mh_put(o, s[23], 1.0, d, x, wb, nt); least = d < least ? d : least; }
    }
  return least;
}

""" + CURVED + r"""
/* A grid point P against shape s (a box, a capsule or a cylinder): its candidate where within the cutoff */
static void mh_grid_point(const double *s, const double *P, mh_out *o)
{
  double ws[3], n[3], u[3], h[3] = {s[1] / 2, s[2] / 2, s[3] / 2}, d;
  if (s[0] == 0) d = mh_on_box(P, s + 11, s + 20, h, ws, n);
  else if (s[0] == 1) { mh_col(s + 11, 2, u); d = mh_on_capsule(P, u, s + 20, s[1], s[2] / 2, ws, n); }
  else d = mh_on_cylinder(P, s + 11, s + 20, s[1], s[2] / 2, ws, n);
  for (int m = 0; m < 3; m++) n[m] = -n[m];                      /* (from the field towards the shape) */
  if (d < s[5]) mh_put(o, s[23], 0.0, d, ws, P, n);
}

/* collision_hfield._more_hits of the m shapes recs (m, REC: their own index last) on the field (x, y, z) placed
   (Rh row-major, ph); par: SAME_DEPTH, sin(PARALLEL_EDGES); E: room for 3 windows' edges.  out[11 h..]: hit h,
   [k, d, w_a (3), w_b (3), n (3)] (world, w_a on the shape, n towards it).  Returns the hits' count, or -1 where
   more than cap candidates. */
long long sd_hfield_more(long long m, double *recs, const double *x, const double *y, const double *z, long long nrow,
                         long long ncol, const double *Rh, const double *ph, const double *par, double *out,
                         long long cap, double *E)
{
  mh_field F = {x, y, z, nrow, ncol};
  mh_out o = {out, 0, cap, 0};
  double P[3];
  for (int kind = 0; kind < 3; kind++)                  /* grid points: the boxes', the capsules', the cylinders' */
    for (long long k = 0; k < m; k++) {
      const double *s = recs + REC * k, *c = s + 20;
      double reach = s[4] + s[5], q[3];
      if (s[0] != kind) continue;
      for (long long r = (long long)s[7]; r < (long long)s[8]; r++)
        for (long long j = (long long)s[9]; j < (long long)s[10]; j++) {
          mh_point(&F, r, j, P);
          for (int i = 0; i < 3; i++) q[i] = P[i] - c[i];
          if (mh_dot(q, q) < reach * reach) mh_grid_point(s, P, &o);
        }
    }
  for (int boxes = 0; boxes < 2; boxes++)              /* edges: capsules' and cylinders' sides, then boxes' */
    for (int fam = 0; fam < 3; fam++)
      for (long long k = 0; k < m; k++) {
        const double *s = recs + REC * k;
        if (boxes ? s[0] != 0 : (s[0] != 1 && s[0] != 2)) continue;
        long long n = mh_edges(&F, s, fam, E, 0);
        for (long long i = 0; i < n; i++) {
          if (boxes) mh_box_edge(s, E + 12 * i, par[1], &o);
          else mh_axis_edge(s, E + 12 * i, &o);
        }
      }
  for (long long k = 0; k < m; k++) {                    /* faces, then an ellipsoid's or a cylinder's rims' more */
    double *s = recs + REC * k;
    if (s[0] != 2 && s[0] != 3) continue;
    double least = mh_faces(&F, s, &o);
    long long n = 0;
    for (int fam = 0; fam < 3; fam++) n = mh_edges(&F, s, fam, E, n);
    double deep = s[6] < least ? s[6] : least;
    if (s[0] == 3) {
      double limit = deep - par[0] < s[5] ? deep - par[0] : s[5];
      mh_ellipsoid(&F, s, E, n, limit, &o);
    } else mh_rims(s, E, n, &o);
    s[6] = deep;
  }
  if (o.full) return -1;
  long long h = 0;
  for (long long i = 0; i < o.n; i++) {
    const double *e = out + ROW * i, *s = recs + REC * (long long)e[0];
    if (!(e[1] != 0.0 || e[2] < s[6] - par[0])) continue;
    double row[11];
    row[0] = e[0]; row[1] = e[2];
    for (int j = 0; j < 3; j++) {
      row[2 + j] = ((e[3] * Rh[3 * j] + e[4] * Rh[3 * j + 1]) + e[5] * Rh[3 * j + 2]) + ph[j];
      row[5 + j] = ((e[6] * Rh[3 * j] + e[7] * Rh[3 * j + 1]) + e[8] * Rh[3 * j + 2]) + ph[j];
      row[8 + j] = (e[9] * Rh[3 * j] + e[10] * Rh[3 * j + 1]) + e[11] * Rh[3 * j + 2];
    }
    for (int j = 0; j < 11; j++) out[11 * h + j] = row[j];
    h++;
  }
  return h;
}
"""


def _routine():
    """``sd_hfield_more`` (ctypes), or None without a C compiler."""
    return c_routine(SOURCE, "sd_hfield_more", [ctypes.c_longlong] + [ctypes.c_void_p] * 4 + [ctypes.c_longlong] * 2 +
                     [ctypes.c_void_p] * 4 + [ctypes.c_longlong, ctypes.c_void_p], ctypes.c_longlong)


def more_on_hfield_c(grid, field, table, ts, windows, local, cut, deepest):
    """:func:`~sparsedyn.contact.collision_hfield._more_hits`' ``(t, d, w_a, w_b, n)`` (world, ``w_a`` on the
    shape, ``n`` from the field towards it, ``t`` each hit's shape's position in the pairs' shapes) in one C
    call: of the shapes ``ts`` (m,) (positions in the pairs' shapes, each a box, a capsule, a cylinder or an
    ellipsoid) over their ``windows`` ``(i0, i1, j0, j1)`` of rows and columns of the field's ``grid``
    (:func:`~sparsedyn.contact.heightfield_c.field_grid`) placed ``field = (Rh (3, 3), ph (3,))`` in the
    world; ``table`` (m, 5) their kind's code (:data:`KIND_CODES`), sizes (3, padded with zeros) and
    bounding radii; ``local = (Rl, pl)`` every pair's shape's placement in the field's frame ((M, 3, 3),
    (M, 3)); ``cut`` and ``deepest`` (M,) each one's cutoff and deepest feature's hit.  None where the hits
    overflow the buffer, or without a C compiler."""
    f = _routine()
    if f is None:
        return None
    _, (nrow, ncol), at = grid
    (Rh, ph), (Rl, pl), m = field, local, len(ts)
    w = np.asarray(windows, float).reshape(m, 4)
    points = (w[:, 1] - w[:, 0]) * (w[:, 3] - w[:, 2])
    cap = int(16 * points.sum()) + 64
    # one buffer (its address read once): the records (m, 24), the field's placement (12), the hits (cap,
    # 12), the routine's workspace
    buf = np.empty(24 * m + 12 + 12 * cap + 36 * int(points.max(initial=0)) + 12)
    rec = buf[:24 * m].reshape(m, 24)
    rec[:, :5], rec[:, 5], rec[:, 6], rec[:, 7:11] = table, cut[ts], deepest[ts], w
    rec[:, 11:20], rec[:, 20:23], rec[:, 23] = Rl[ts].reshape(m, 9), pl[ts], np.arange(m)
    o = 24 * m + 12
    buf[o - 12:o - 3], buf[o - 3:o] = np.reshape(Rh, 9), ph
    b = buf.ctypes.data
    h = f(m, b, at[0], at[1], at[2], nrow, ncol, b + 8 * (o - 12), b + 8 * (o - 3), _PAR_AT, b + 8 * o, cap,
          b + 8 * (o + 12 * cap))
    if h < 0:
        return None
    hits = buf[o:o + 11 * h].reshape(h, 11)
    return ts[hits[:, 0].astype(int)], hits[:, 1], hits[:, 2:5], hits[:, 5:8], hits[:, 8:11]
