"""The C source of two boxes' hits (:mod:`~sparsedyn.contact.box_box_native`), written by hand to
mirror :mod:`~sparsedyn.contact.closed_forms` operation by operation: ``box_box`` (the closest
pair: the separating axis test, then apart the nearest corner or edges, overlapping the least
overlap with EPA's witness points), ``box_box_corners`` (each box's corners against the other,
through the pair's face where they lie over it, and the contact polygon of a face on a face), and
:func:`~sparsedyn.collide`'s merge (the closest pair left out where a corner is as deep; one hit
per point, the deeper).  Two early outs skip work no hit takes: a pair apart by more than the margin
along a face's axis or an edge pair's (not near parallel) has no closest pair within it, and a corner
whose lower bound (its coordinates in the other box's axes by another rounding, less a slack far above
it) puts it farther than the cutoff and than the closest pair's depth is neither kept nor the deepest.
Rotations row by row; no fused multiply-add (the compiler's flags, and GCC's pragma)."""

from .box_box_c_step import STEP
from .segments_c import SEGMENTS

_CORE = r"""
#include <math.h>
#if defined(__GNUC__) && !defined(__clang__)
/* (GCC: the optimisations the kernels' flags leave out for generated code, back for this hand-written unit;
   still no fused multiply-add, so every operation rounds as it is written) */
#pragma GCC optimize("O2", "fp-contract=off", "no-math-errno", "tree-fre", "tree-ccp", "tree-dominator-opts", \
                     "tree-pta", "tree-dse", "dse", "forward-propagate")
#endif
#define BB_ROWS 25
typedef struct { double R[9], p[3], h[3]; } sd_bb_box;
typedef struct { double d, wa[3], wb[3], n[3]; } sd_bb_hit;
#define BB_INLINE static inline __attribute__((always_inline))

BB_INLINE double bb_col(const double *R, int r, int j) { return R[3 * r + j]; }
BB_INLINE double bb_sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }     /* np.sign */
BB_INLINE double bb_sgn(double x) { return x < 0 ? -1.0 : 1.0; }                       /* np.where(x < 0, -1, 1) */
BB_INLINE double bb_clip(double x, double lo, double hi) { double y = x > lo ? x : lo; return y < hi ? y : hi; }
BB_INLINE double bb_unit(double x) { double y = x > 0.0 ? x : 0.0; return y < 1.0 ? y : 1.0; }
BB_INLINE double bb_dot(const double *x, const double *y) { return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]; }
BB_INLINE double bb_min(double x, double y) { return y < x ? y : x; }               /* fmin of numbers */
BB_INLINE int bb_same(const double *x, const double *y) { return x[0] == y[0] && x[1] == y[1] && x[2] == y[2]; }

/* x in the box's axes, R^T (x - p); and back, p + R y */
BB_INLINE void bb_in(const sd_bb_box *b, const double *x, double *y)
{
  double w[3] = {x[0] - b->p[0], x[1] - b->p[1], x[2] - b->p[2]};
  for (int i = 0; i < 3; i++) y[i] = (b->R[i] * w[0] + b->R[3 + i] * w[1]) + b->R[6 + i] * w[2];
}
BB_INLINE void bb_out(const sd_bb_box *b, const double *y, double *x)
{
  for (int i = 0; i < 3; i++) x[i] = b->p[i] + ((b->R[3 * i] * y[0] + b->R[3 * i + 1] * y[1]) + b->R[3 * i + 2] * y[2]);
}
BB_INLINE void bb_turn(const sd_bb_box *b, const double *y, double *x)     /* R y */
{
  for (int i = 0; i < 3; i++) x[i] = (b->R[3 * i] * y[0] + b->R[3 * i + 1] * y[1]) + b->R[3 * i + 2] * y[2];
}

/* closed_forms._separating_axes: axes (15, 3), c (15), overlap (15); X (9, 3), L (9) the edge pairs'
   cross products and lengths (bb_flatten's) */
static void bb_axes(const sd_bb_box *a, const sd_bb_box *b, double parallel, double ax[15][3], double *c, double *ov,
                    double X[9][3], double *L)
{
  for (int j = 0; j < 3; j++)
    for (int r = 0; r < 3; r++) { ax[j][r] = a->R[3 * r + j]; ax[3 + j][r] = b->R[3 * r + j]; }
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double *x = X[3 * i + j];
      x[0] = a->R[3 + i] * b->R[6 + j] - a->R[6 + i] * b->R[3 + j];
      x[1] = a->R[6 + i] * b->R[j] - a->R[i] * b->R[6 + j];
      x[2] = a->R[i] * b->R[3 + j] - a->R[3 + i] * b->R[j];
      L[3 * i + j] = sqrt((x[0] * x[0] + x[1] * x[1]) + x[2] * x[2]);
    }
  double d[3] = {a->p[0] - b->p[0], a->p[1] - b->p[1], a->p[2] - b->p[2]};
  for (int m = 0; m < 15; m++) {
    int flat = m >= 6 && L[m - 6] < parallel;
    if (m >= 6) {
      double s = flat ? 1.0 : L[m - 6];
      for (int r = 0; r < 3; r++) ax[m][r] = X[m - 6][r] / s;
    }
    c[m] = bb_dot(d, ax[m]);
    double rad = 0.0, *u = ax[m];
    for (int k = 0; k < 3; k++) rad += a->h[k] * fabs((a->R[k] * u[0] + a->R[3 + k] * u[1]) + a->R[6 + k] * u[2]);
    for (int k = 0; k < 3; k++) rad += b->h[k] * fabs((b->R[k] * u[0] + b->R[3 + k] * u[1]) + b->R[6 + k] * u[2]);
    ov[m] = flat ? INFINITY : rad - fabs(c[m]);
  }
}

/* bb_axes' outputs of `parallel` turned into those of a larger `wider`: the edge pairs' axes whose length
   is in [parallel, wider) made flat (the cross product itself, no overlap) */
static void bb_flatten(const sd_bb_box *a, const sd_bb_box *b, double parallel, double wider, double ax[15][3],
                       double *c, double *ov, double X[9][3], const double *L)
{
  double d[3] = {a->p[0] - b->p[0], a->p[1] - b->p[1], a->p[2] - b->p[2]};
  for (int m = 0; m < 9; m++)
    if (L[m] < wider && !(L[m] < parallel)) {
      for (int r = 0; r < 3; r++) ax[6 + m][r] = X[m][r] / 1.0;
      c[6 + m] = bb_dot(d, ax[6 + m]);
      ov[6 + m] = INFINITY;
    }
}

""" + SEGMENTS + r"""
/* closed_forms._support_edges for one box: the edge along its axis `axis` farthest along n */
static void bb_edge(const sd_bb_box *b, const double *n, int axis, double *P, double *E, double *sign, double *corner)
{
  double y[3];
  for (int i = 0; i < 3; i++) {
    sign[i] = bb_sign((n[0] * b->R[i] + n[1] * b->R[3 + i]) + n[2] * b->R[6 + i]);
    y[i] = sign[i] * b->h[i];
  }
  bb_out(b, y, corner);
  for (int r = 0; r < 3; r++) {
    double e = b->R[3 * r + axis] * b->h[axis];
    double middle = corner[r] - sign[axis] * e;
    P[r] = middle - e;
    E[r] = 2 * e;
  }
}

/* closed_forms._corners: corner k of the box (_CORNERS' order: x slowest) */
BB_INLINE void bb_corner(const sd_bb_box *b, int k, double *x)
{
  double y[3] = {((k >> 2) & 1 ? 1.0 : -1.0) * b->h[0], ((k >> 1) & 1 ? 1.0 : -1.0) * b->h[1],
                 (k & 1 ? 1.0 : -1.0) * b->h[2]};
  bb_out(b, y, x);
}

/* closed_forms._corner_gaps for one point against a box: distance, closest point, unit normal (0 on it) */
static double bb_gap(const sd_bb_box *b, const double *C, double *W, double *N)
{
  double x[3], y[3], w[3];
  bb_in(b, C, x);
  for (int i = 0; i < 3; i++) { y[i] = bb_clip(x[i], -b->h[i], b->h[i]); w[i] = x[i] - y[i]; }
  double L = sqrt((w[0] * w[0] + w[1] * w[1]) + w[2] * w[2]);
  double s = L > 0 ? L : INFINITY;
  double u[3] = {w[0] / s, w[1] / s, w[2] / s};
  bb_out(b, y, W);
  bb_turn(b, u, N);
  return L;
}

/* closed_forms._box_box_apart */
static void bb_apart(const sd_bb_box *a, const sd_bb_box *b, double ax[15][3], const double *c, const double *ov,
                     sd_bb_hit *out)
{
  double best = INFINITY;
  for (int side = 0; side < 2; side++)                  /* a's corners against b, then b's against a */
    for (int k = 0; k < 8; k++) {
      double C[3], W[3], N[3];
      bb_corner(side ? b : a, k, C);
      double L = bb_gap(side ? a : b, C, W, N);
      if (L < best) {
        best = L;
        out->d = L;
        for (int r = 0; r < 3; r++) {
          out->wa[r] = side ? W[r] : C[r];
          out->wb[r] = side ? C[r] : W[r];
          out->n[r] = side ? -N[r] : N[r];
        }
      }
    }
  for (int m = 0; m < 9; m++) {
    double n[3], mn[3], Pa[3], Ea[3], Pb[3], Eb[3], sg[3], v[3], s, t;
    for (int r = 0; r < 3; r++) { n[r] = ax[6 + m][r] * bb_sgn(c[6 + m]); mn[r] = -n[r]; }
    bb_edge(a, mn, m / 3, Pa, Ea, sg, v);
    bb_edge(b, n, m % 3, Pb, Eb, sg, v);
    sg_segments(Pa, Ea, Pb, Eb, &s, &t);
    double xa[3], xb[3], w[3];
    for (int r = 0; r < 3; r++) { xa[r] = Pa[r] + s * Ea[r]; xb[r] = Pb[r] + t * Eb[r]; w[r] = xa[r] - xb[r]; }
    double L = isfinite(ov[6 + m]) ? sqrt((w[0] * w[0] + w[1] * w[1]) + w[2] * w[2]) : INFINITY;
    if (L < best) {
      best = L;
      int across = s > 0 && s < 1 && t > 0 && t < 1;
      double q = L > 0 ? L : INFINITY;
      out->d = L;
      for (int r = 0; r < 3; r++) { out->wa[r] = xa[r]; out->wb[r] = xb[r]; out->n[r] = across ? n[r] : w[r] / q; }
    }
  }
  if (out->n[0] == 0 && out->n[1] == 0 && out->n[2] == 0) {     /* touching where no axis holds it */
    int i = 0;
    for (int m = 1; m < 15; m++) if (ov[m] < ov[i]) i = m;
    for (int r = 0; r < 3; r++) out->n[r] = ax[i][r] * bb_sgn(c[i]);
  }
}

/* closed_forms._over_reference: the incident box's deepest corner v moved over the reference box */
static void bb_over_reference(double *v, const double *sign, const sd_bb_box *I, const sd_bb_box *Rf)
{
  double lo[3], up[3], T[9], o[3], x[3], z[3], y[3];
  for (int i = 0; i < 3; i++) {
    int free = sign[i] == 0;
    lo[i] = free ? -I->h[i] : sign[i] * I->h[i];
    up[i] = free ? I->h[i] : sign[i] * I->h[i];
  }
  for (int i = 0; i < 3; i++)                            /* T = Ri^T Rr */
    for (int j = 0; j < 3; j++)
      T[3 * i + j] = (I->R[i] * Rf->R[j] + I->R[3 + i] * Rf->R[3 + j]) + I->R[6 + i] * Rf->R[6 + j];
  bb_in(I, Rf->p, o);
  bb_in(Rf, v, x);
  for (int it = 0; it < 3; it++) {
    for (int i = 0; i < 3; i++) y[i] = bb_clip(x[i], -Rf->h[i], Rf->h[i]);
    for (int i = 0; i < 3; i++)
      z[i] = bb_clip(((y[0] * T[3 * i] + y[1] * T[3 * i + 1]) + y[2] * T[3 * i + 2]) + o[i], lo[i], up[i]);
    if (it < 2)
      for (int j = 0; j < 3; j++) x[j] = ((z[0] - o[0]) * T[j] + (z[1] - o[1]) * T[3 + j]) + (z[2] - o[2]) * T[6 + j];
  }
  bb_out(I, z, v);
}

/* closed_forms._box_box_deep */
static void bb_deep(const sd_bb_box *a, const sd_bb_box *b, double ax[15][3], const double *c, const double *ov,
                    sd_bb_hit *out)
{
  int f = 0, e = 6;
  for (int m = 1; m < 6; m++) if (ov[m] < ov[f]) f = m;
  for (int m = 7; m < 15; m++) if (ov[m] < ov[e]) e = m;
  int j = ov[e] < ov[f] - 1e-12 ? e : f;                  /* FACE_TIE */
  double depth = ov[j], n[3], mn[3];
  for (int r = 0; r < 3; r++) { n[r] = ax[j][r] * bb_sgn(c[j]); mn[r] = -n[r]; }
  int k = j - 6 > 0 ? j - 6 : 0;
  double P[2][3], E[2][3], sg[2][3], v[2][3];
  bb_edge(a, mn, k / 3, P[0], E[0], sg[0], v[0]);
  bb_edge(b, n, k % 3, P[1], E[1], sg[1], v[1]);
  out->d = -depth;
  for (int r = 0; r < 3; r++) out->n[r] = n[r];
  if (j >= 6) {
    double s, t;
    sg_segments(P[0], E[0], P[1], E[1], &s, &t);
    for (int r = 0; r < 3; r++) { out->wa[r] = P[0][r] + s * E[0][r]; out->wb[r] = P[1][r] + t * E[1][r]; }
    return;
  }
  int inc = j < 3 ? 1 : 0;
  double vi[3] = {v[inc][0], v[inc][1], v[inc][2]};
  if (sg[inc][0] == 0 || sg[inc][1] == 0 || sg[inc][2] == 0)
    bb_over_reference(vi, sg[inc], inc ? b : a, inc ? a : b);
  for (int r = 0; r < 3; r++) {
    out->wa[r] = inc == 0 ? vi[r] : vi[r] - depth * n[r];
    out->wb[r] = inc == 0 ? vi[r] + depth * n[r] : vi[r];
  }
}

/* closed_forms.box_box */
static void bb_closest(const sd_bb_box *a, const sd_bb_box *b, double ax[15][3], double *c, double *ov,
                       sd_bb_hit *out)
{
  double least = INFINITY;
  for (int m = 0; m < 15; m++) least = bb_min(least, ov[m]);
  if (least > 0) bb_deep(a, b, ax, c, ov, out); else bb_apart(a, b, ax, c, ov, out);
}

/* closed_forms.sphere_box of a point (radius 0); x: the point in b's axes */
static void bb_point(const double *C, const sd_bb_box *b, sd_bb_hit *out, double *x)
{
  double y[3], w[3], yb[3], nl[3];
  bb_in(b, C, x);
  for (int i = 0; i < 3; i++) { y[i] = bb_clip(x[i], -b->h[i], b->h[i]); w[i] = x[i] - y[i]; }
  double L = sqrt((w[0] * w[0] + w[1] * w[1]) + w[2] * w[2]);
  if (L <= 0) {                                           /* inside: out through the nearest face */
    int i = 0;
    double dep[3];
    for (int k = 0; k < 3; k++) dep[k] = b->h[k] - fabs(x[k]);
    for (int k = 1; k < 3; k++) if (dep[k] < dep[i]) i = k;
    double s = bb_sgn(x[i]);
    for (int k = 0; k < 3; k++) { nl[k] = k == i ? s : 0.0; yb[k] = k == i ? s * b->h[i] : x[k]; }
    out->d = -dep[i];
  } else {
    for (int k = 0; k < 3; k++) { nl[k] = w[k] / L; yb[k] = y[k]; }
    out->d = L;
  }
  bb_turn(b, nl, out->n);
  for (int k = 0; k < 3; k++) out->wa[k] = C[k];
  bb_out(b, yb, out->wb);
}

/* closed_forms._over_face's face of b whose outward normal is `axis`: its axis i and side s */
static void bb_face_of(const sd_bb_box *b, const double *axis, int *face, double *side)
{
  double o[3];
  for (int i = 0; i < 3; i++) o[i] = (b->R[i] * axis[0] + b->R[3 + i] * axis[1]) + b->R[6 + i] * axis[2];
  int i = 0;
  for (int k = 1; k < 3; k++) if (fabs(o[k]) > fabs(o[i])) i = k;
  *face = i;
  *side = bb_sgn(o[i]);
}

/* closed_forms._over_face: a point (y: in b's axes) over the face of b nearest in direction to `axis` (0: none;
   i, s: its bb_face_of), the hit's normal the face's own */
static void bb_over_face(const double *y, const sd_bb_box *b, const double *axis, int i, double s, sd_bb_hit *hit)
{
  if (axis[0] == 0 && axis[1] == 0 && axis[2] == 0) return;
  double side[3], on[3];
  for (int k = 0; k < 3; k++) { on[k] = bb_clip(y[k], -b->h[k], b->h[k]); side[k] = k == i ? 0.0 : y[k] - on[k]; }
  if (!(sqrt((side[0] * side[0] + side[1] * side[1]) + side[2] * side[2]) <= 1e-9 && s * y[i] >= -b->h[i])) return;
  on[i] = s * b->h[i];
  bb_out(b, on, hit->wb);
  hit->d = s * y[i] - b->h[i];
  for (int k = 0; k < 3; k++) hit->n[k] = s * b->R[3 * k + i];        /* the face's own normal */
}

/* closed_forms._clip: the part of the polygon (m points) where e . (x - c) <= h; returns its count */
static int bb_clip_polygon(double poly[][3], int m, const double *c, const double *e, double h)
{
  double out[16][3];
  int k = 0;
  for (int q = 0; q < m; q++) {
    const double *x = poly[q], *y = poly[(q + 1) % m];
    double dx = ((e[0] * (x[0] - c[0]) + e[1] * (x[1] - c[1])) + e[2] * (x[2] - c[2])) - h;
    double dy = ((e[0] * (y[0] - c[0]) + e[1] * (y[1] - c[1])) + e[2] * (y[2] - c[2])) - h;
    if (dx <= 1e-9 && k < 16) { for (int r = 0; r < 3; r++) out[k][r] = x[r]; k++; }
    if (((dx > 1e-9 && dy < -1e-9) || (dx < -1e-9 && dy > 1e-9)) && k < 16) {
      double f = dx / (dx - dy);
      for (int r = 0; r < 3; r++) out[k][r] = x[r] + f * (y[r] - x[r]);
      k++;
    }
  }
  for (int q = 0; q < k; q++) for (int r = 0; r < 3; r++) poly[q][r] = out[q][r];
  return k;
}

/* closed_forms.box_box_face: the contact polygon's points (up to 8) in hits[0..7], the rest at +inf */
static void bb_face(const sd_bb_box *a, const sd_bb_box *b, const double *axis, int which, sd_bb_hit *hits)
{
  for (int m = 0; m < 8; m++) hits[m].d = INFINITY;
  for (int m = 0; m < 8; m++)
    for (int r = 0; r < 3; r++) { hits[m].wa[r] = hits[m].wb[r] = 0.0; hits[m].n[r] = axis[r]; }
  if (axis[0] == 0 && axis[1] == 0 && axis[2] == 0) return;
  int on_a = which < 3;
  const sd_bb_box *Rr = on_a ? a : b, *Ri = on_a ? b : a;
  double u[3], cc[3], e1[3], e2[3], ci[3], poly[16][3];
  for (int r = 0; r < 3; r++) u[r] = on_a ? -axis[r] : axis[r];
  int rr = which % 3;
  for (int r = 0; r < 3; r++) cc[r] = Rr->p[r] + Rr->h[rr] * u[r];
  double pr[3];
  for (int k = 0; k < 3; k++) pr[k] = (Ri->R[k] * u[0] + Ri->R[3 + k] * u[1]) + Ri->R[6 + k] * u[2];
  int t = 0;
  for (int k = 1; k < 3; k++) if (fabs(pr[k]) > fabs(pr[t])) t = k;
  double sign = -bb_sign((Ri->R[t] * u[0] + Ri->R[3 + t] * u[1]) + Ri->R[6 + t] * u[2]);
  int x1 = t == 0 ? 1 : 0, x2 = t == 2 ? 1 : 2;
  for (int r = 0; r < 3; r++) {
    e1[r] = Ri->R[3 * r + x1] * Ri->h[x1];
    e2[r] = Ri->R[3 * r + x2] * Ri->h[x2];
    ci[r] = Ri->p[r] + sign * Ri->h[t] * Ri->R[3 * r + t];
  }
  for (int r = 0; r < 3; r++) {
    poly[0][r] = (ci[r] + e1[r]) + e2[r];
    poly[1][r] = (ci[r] - e1[r]) + e2[r];
    poly[2][r] = (ci[r] - e1[r]) - e2[r];
    poly[3][r] = (ci[r] + e1[r]) - e2[r];
  }
  int m = 4;
  for (int x = 0; x < 3; x++) {
    if (x == rr) continue;
    for (int q = 0; q < 2; q++) {
      double e[3];
      for (int r = 0; r < 3; r++) e[r] = (q ? -1.0 : 1.0) * Rr->R[3 * r + x];
      if (m) m = bb_clip_polygon(poly, m, cc, e, Rr->h[x]);
    }
  }
  for (int k = 0; k < m && k < 8; k++) {
    double depth = (u[0] * (poly[k][0] - cc[0]) + u[1] * (poly[k][1] - cc[1])) + u[2] * (poly[k][2] - cc[2]);
    hits[k].d = depth;
    for (int r = 0; r < 3; r++) {
      double under = poly[k][r] - depth * u[r];
      hits[k].wa[r] = on_a ? under : poly[k][r];
      hits[k].wb[r] = on_a ? poly[k][r] : under;
    }
  }
}

/* Lower bounds of the gaps of `a`'s 8 corners to `b` (bb_corner's order): each corner in b's axes, y = o + T (s h)
   (T = Rb^T Ra, o = Rb^T (pa - pb): other roundings than bb_in's of bb_corner's, by far less than bb_pair's
   slack), and its gap max_i |y_i| - h_i, below its distance to the box */
static void bb_corner_bounds(const sd_bb_box *a, const sd_bb_box *b, double *lo)
{
  double o[3], u[3][3];
  bb_in(b, a->p, o);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      u[j][i] = ((b->R[i] * a->R[j] + b->R[3 + i] * a->R[3 + j]) + b->R[6 + i] * a->R[6 + j]) * a->h[j];
  for (int k = 0; k < 8; k++) lo[k] = -INFINITY;
  for (int i = 0; i < 3; i++) {                         /* (the signs of the x, y, z half extents: bits 2, 1, 0 of k) */
    double x[2] = {o[i] - u[0][i], o[i] + u[0][i]}, y[4], z[8];
    for (int k = 0; k < 4; k++) y[k] = (k & 1) ? x[k >> 1] + u[1][i] : x[k >> 1] - u[1][i];
    for (int k = 0; k < 8; k++) z[k] = (k & 1) ? y[k >> 1] + u[2][i] : y[k >> 1] - u[2][i];
    for (int k = 0; k < 8; k++) {
      double e = fabs(z[k]) - b->h[i];
      lo[k] = e > lo[k] ? e : lo[k];
    }
  }
}

/* closed_forms.box_box_corners: 16 corners (a's against b, b's against a) and the polygon's 8 */
static void bb_corners(const sd_bb_box *a, const sd_bb_box *b, double ax[15][3], const double *c, const double *ov,
                       double skip, sd_bb_hit *hits)
{
  double axis[3], mx[3];
  int i = 0;
  for (int m = 1; m < 6; m++) if (ov[m] < ov[i]) i = m;
  double edge = INFINITY;
  for (int m = 6; m < 15; m++) edge = bb_min(edge, ov[m]);
  double f = (ov[i] <= edge + 1e-6) ? bb_sgn(c[i]) : 0.0;   /* FACE_PREFERENCE */
  for (int r = 0; r < 3; r++) { axis[r] = ax[i][r] * f; mx[r] = -axis[r]; }
  int fb, fa;                                           /* (the same face for every corner) */
  double sb, sa;
  bb_face_of(b, axis, &fb, &sb);
  bb_face_of(a, mx, &fa, &sa);
  /* a corner whose gap's lower bound is above `skip` (a corner off the other box by more than the cutoff: no face's
     point either, as bb_over_face takes none more than 1e-9 beside the face) is left out, d = +inf */
  double lo[2][8];
  bb_corner_bounds(a, b, lo[0]);
  bb_corner_bounds(b, a, lo[1]);
  for (int k = 0; k < 8; k++) {
    double C[3], y[3];
    if (lo[0][k] > skip) hits[k].d = INFINITY;
    else {
      bb_corner(a, k, C);
      bb_point(C, b, &hits[k], y);
      bb_over_face(y, b, axis, fb, sb, &hits[k]);
    }
    if (lo[1][k] > skip) { hits[8 + k].d = INFINITY; continue; }
    bb_corner(b, k, C);
    sd_bb_hit h;
    bb_point(C, a, &h, y);
    bb_over_face(y, a, mx, fa, sa, &h);
    hits[8 + k].d = h.d;
    for (int r = 0; r < 3; r++) {
      hits[8 + k].wa[r] = h.wb[r];
      hits[8 + k].wb[r] = h.wa[r];
      hits[8 + k].n[r] = -h.n[r];
    }
  }
  bb_face(a, b, axis, i, hits + 16);
}

/* One pair's hits as collide finds them (collision._coal_pairs, then _hits): the closest pair where
   within `margin`, and then the features, the closest pair left out where a feature is as deep
   (SAME_DEPTH); those within `cutoff`, one per point (SAME_POINT: the deepest, the first of equal
   ones), in order.  Returns their number (at most BB_ROWS). */
static int bb_pair(const sd_bb_box *a, const sd_bb_box *b, double margin, double cutoff, double same_depth,
                   double same_point, sd_bb_hit *out)
{
  sd_bb_hit all[BB_ROWS];
  int n = 0;
  double ax[15][3], c[15], ov[15], X[9][3], L[9];
  bb_axes(a, b, 1e-12, ax, c, ov, X, L);                /* EXACT_PARALLEL */
  /* slack: above the rounding of a gap along an axis (or of a corner's bound) on these lengths */
  double scale = 1.0;
  for (int i = 0; i < 3; i++) scale += (fabs(a->p[i]) + fabs(b->p[i])) + (a->h[i] + b->h[i]);
  double slack = 1e-9 * scale;
  /* apart by more than the margin along a face's axis or two edges' not near parallel: the distance is larger */
  for (int m = 0; m < 15; m++)
    if ((m < 6 || !(L[m - 6] < 1e-3)) && ov[m] < -(margin + slack)) return 0;
  bb_closest(a, b, ax, c, ov, &all[0]);
  if (!(all[0].d < margin)) return 0;
  bb_flatten(a, b, 1e-12, 1e-3, ax, c, ov, X, L);        /* PARALLEL_EDGES */
  /* a corner farther than the cutoff and than the closest pair's depth to SAME_DEPTH changes nothing below */
  double skip = all[0].d + same_depth;
  skip = (cutoff > skip ? cutoff : skip);
  bb_corners(a, b, ax, c, ov, (skip > 1e-9 ? skip : 1e-9) + slack, all + 1);
  double deepest = INFINITY;
  for (int k = 1; k < BB_ROWS; k++) deepest = bb_min(deepest, all[k].d);
  int first = deepest <= all[0].d + same_depth ? 1 : 0;
  int keep[BB_ROWS], m = 0;
  for (int k = first; k < BB_ROWS; k++) if (all[k].d < cutoff) keep[m++] = k;
  /* by depth (stable), the first of each grid cell of SAME_POINT */
  int order[BB_ROWS], alive[BB_ROWS];
  for (int q = 0; q < m; q++) order[q] = keep[q];
  for (int q = 1; q < m; q++) {                          /* insertion sort: stable */
    int x = order[q], r = q - 1;
    while (r >= 0 && all[order[r]].d > all[x].d) { order[r + 1] = order[r]; r--; }
    order[r + 1] = x;
  }
  double cell[BB_ROWS][3];
  for (int q = 0; q < m; q++) for (int r = 0; r < 3; r++) cell[q][r] = nearbyint(all[order[q]].wa[r] / same_point);
  for (int q = 0; q < m; q++) {          /* per cell its first (deepest) row, or the first as deep to same_depth */
    alive[q] = 1;
    int top = -1, held = -1;                             /* the cell's first row, and the one it holds now */
    for (int r = 0; r < q; r++)
      if (bb_same(cell[r], cell[q])) {
        if (top < 0) top = r;
        if (alive[r]) held = r;
      }
    if (top < 0) continue;
    alive[q] = 0;
    if (all[order[q]].d <= all[order[top]].d + same_depth && order[q] < order[held]) {
      alive[held] = 0;
      alive[q] = 1;
    }
  }
  /* the survivors in their first order; one nearer than SAME_POINT to a deeper one (or an equal, earlier one) goes */
  int kept[BB_ROWS], live[BB_ROWS] = {0}, nk = 0;
  for (int q = 0; q < m; q++) if (alive[q]) live[order[q]] = 1;
  for (int k = 0; k < BB_ROWS; k++) if (live[k]) kept[nk++] = k;
  for (int q = 0; q < nk; q++) {
    const sd_bb_hit *x = &all[kept[q]];
    int gone = 0;
    for (int r = 0; r < nk && !gone; r++) {
      if (r == q) continue;
      const sd_bb_hit *y = &all[kept[r]];
      double w[3] = {x->wa[0] - y->wa[0], x->wa[1] - y->wa[1], x->wa[2] - y->wa[2]};
      double L = sqrt((w[0] * w[0] + w[1] * w[1]) + w[2] * w[2]);
      int tie = fabs(y->d - x->d) <= same_depth;
      gone = L < same_point && ((!tie && y->d < x->d) || (tie && kept[r] < kept[q]));
    }
    if (!gone) out[n++] = *x;
  }
  return n;
}

/* The hits of P box pairs: `pose` (P, 30) [Ra (9, row by row), pa, ha, Rb (9), pb, hb], `cut` (P, 2)
   [margin, cutoff], `par` [SAME_DEPTH, SAME_POINT]; `out` (P, BB_ROWS, 10) [d, w_a, w_b, n], each
   pair's hits first, the rest d = +inf; `count` (P,) each pair's number (a double). */
SD_EXPORT void sd_box_box_hits(long long P, const double *pose, const double *cut, const double *par, double *out,
                               double *count)
{
  for (long long k = 0; k < P; k++) {
    sd_bb_box a, b;
    const double *x = pose + 30 * k;
    for (int i = 0; i < 9; i++) { a.R[i] = x[i]; b.R[i] = x[15 + i]; }
    for (int i = 0; i < 3; i++) { a.p[i] = x[9 + i]; a.h[i] = x[12 + i]; b.p[i] = x[24 + i]; b.h[i] = x[27 + i]; }
    sd_bb_hit hits[BB_ROWS];
    int n = bb_pair(&a, &b, cut[2 * k], cut[2 * k + 1], par[0], par[1], hits);
    double *o = out + (long long)BB_ROWS * 10 * k;
    for (int q = 0; q < BB_ROWS; q++) {
      double *row = o + 10 * q;
      if (q < n) {
        row[0] = hits[q].d;
        for (int r = 0; r < 3; r++) {
          row[1 + r] = hits[q].wa[r];
          row[4 + r] = hits[q].wb[r];
          row[7 + r] = hits[q].n[r];
        }
      } else {
        row[0] = INFINITY;
        for (int r = 1; r < 10; r++) row[r] = 0.0;
      }
    }
    count[k] = n;
  }
}

/* A pair's two boxes from `src` by the pair's gather `g` (30): a's R (9), p, h (3 each), then b's. */
static inline void bb_gather(const double *src, const long long *g, sd_bb_box *a, sd_bb_box *b)
{
  for (int i = 0; i < 9; i++) { a->R[i] = src[g[i]]; b->R[i] = src[g[15 + i]]; }
  for (int i = 0; i < 3; i++) {
    a->p[i] = src[g[9 + i]]; a->h[i] = src[g[12 + i]]; b->p[i] = src[g[24 + i]]; b->h[i] = src[g[27 + i]];
  }
}

/* collide's road (box_box_road.box_box_road_table): `plan` int64 [P, K, N, the offsets in `buf` of src,
   kern, cut, par, rows; gather (P, 30)], `buf` float64 [src (the gather's source), kern (K, 11) the
   collision kernel's candidates, cut (P, 2), par, rows (N, 7)]: the kernel's K rows [d, x, n], then
   each pair's poses gathered from src and its hits (sd_box_box_hits' BB_ROWS slots) as rows
   [d, (w_a + w_b) / 2, n], a free row's d = +inf. */
SD_EXPORT void sd_box_box_road(const long long *plan, double *buf)
{
  long long P = plan[0], K = plan[1];
  const double *src = buf + plan[3], *kern = buf + plan[4], *cut = buf + plan[5], *par = buf + plan[6];
  double *rows = buf + plan[7];
  const long long *gather = plan + 8;
  for (long long i = 0; i < K; i++)
    for (int j = 0; j < 7; j++) rows[7 * i + j] = kern[11 * i + j];
  for (long long k = 0; k < P; k++) {
    sd_bb_box a, b;
    bb_gather(src, gather + 30 * k, &a, &b);
    sd_bb_hit h[BB_ROWS];
    int n = bb_pair(&a, &b, cut[2 * k], cut[2 * k + 1], par[0], par[1], h);
    double *o = rows + 7 * (K + (long long)BB_ROWS * k);
    for (int q = 0; q < BB_ROWS; q++) {
      double *row = o + 7 * q;
      if (q < n) {
        row[0] = h[q].d;
        for (int r = 0; r < 3; r++) { row[1 + r] = (h[q].wa[r] + h[q].wb[r]) / 2; row[4 + r] = h[q].n[r]; }
      } else {
        row[0] = INFINITY;
        for (int r = 1; r < 7; r++) row[r] = 0.0;
      }
    }
  }
}
"""

#: The C translation unit, the routines above and then a step's (:mod:`~sparsedyn.contact.box_box_c_step`).
SOURCE = _CORE + STEP
