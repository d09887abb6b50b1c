"""Pairs with boxes in one native loop: a tight broad phase (:func:`near_pairs`) and the patches of
robot meshes on world boxes (:func:`mesh_box_loop_patches`).

Both are C routines written by hand (:func:`~sparsedyn.kernels.c_library`), used by
:func:`~sparsedyn.collide` on the default road where a C compiler is there (else its NumPy road):

* **broad phase**, per pair ``(a, b)`` at the shapes' world poses: the bounding spheres' test of collide's
  NumPy road (a bounded shape and a plane: the sphere's height above the plane), and where it passes, lower
  bounds of the pair's distance (:mod:`~sparsedyn.contact.near_bounds_c`), each a separating-axis gap that
  rounds to less than the distance by far less than :data:`~sparsedyn.contact.collision_near.SLACK`: a shape's
  bounding sphere against the other where that is a box, the two shapes' bounding boxes in their own frames (a
  box itself; a sphere, capsule, cylinder, ellipsoid its extents; a mesh its hull's extents), a capsule's own
  gap to a shape of those kinds, and two convex shapes' gap along the steps of a distance iteration (a mesh's
  hull, climbed along its edges, or one of those kinds but a box). A pair is kept where each bound is below
  its cutoff plus the slack: never a pair within its cutoff left out, most of the pairs whose spheres alone
  overlap (a robot's links over a wide box) left out.
* **a mesh's patch on a box**, given the pair's closest points (coal's GJK/EPA on the mesh's convex
  hull): :func:`~sparsedyn.contact.reduction.mesh_box_patch`, the same operations in the same order
  (the face holding the closest pair, the hull vertices within the cutoff over it, the reduction's
  rule as in :mod:`~sparsedyn.contact.mesh_plane_loop`), all pairs in one call: its rows are the
  NumPy function's to rounding.  Given the hull's vertices as columns as well, their heights over
  the face are computed ``SD_W`` at a time (the same operations, then those below the cutoff one by one).

And for :mod:`~sparsedyn.contact.mesh_box_road`, the two ends of its table of slots: the shapes'
poses and the broad phase of its pairs (``sd_road_near``), and coal's answers checked and the
patches written into the pairs' slots (``sd_road_rows``), each given the road's tables as one table
of addresses.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_library
from .collision_coal import SAME_DEPTH, SAME_POINT, _hull_vertices, hull_graph, mesh_vertices
from .collision_near import SLACK
from .mesh_plane_loop import REDUCE, _at, _to
from .near_bounds_c import CONVEX_STEPS, KIND_CODES, NEAR_BOUNDS
from .reduction import MAX_PATCH_POINTS, SPAN

__all__ = ["near_pairs", "near_plan", "mesh_box_loop_patches"]

#: ``sd_near_pairs``: ``near`` (P,) (0/1) of the P pairs (the module docstring's broad phase); per
#: shape ``sc`` (S, 3), ``sr`` (S,) its bounding sphere (centre in its frame, radius, inf: unbounded),
#: ``bc`` (S, 3), ``be`` (S, 3) its bounding box (centre in its frame, half extents along its axes; NaN:
#: none), ``kind`` (S,) its kind's code (:data:`~sparsedyn.contact.near_bounds_c.KIND_CODES`; 1: a box, its
#: bounding box exact); per pair ``ia``, ``ib`` its shapes,
#: ``plane`` the index of its plane or -1 (a bounded shape on a plane); ``R`` (S, 3, 3), ``p`` (S, 3)
#: the shapes' world poses; ``cut`` (P,); ``par``: ``[SLACK, SAME_POINT]``; ``V`` (N, 3) the meshes' hull
#: vertices, per shape its rows ``first``, ``count`` (0: no mesh), ``adjf``, ``adj`` the hulls' edges and
#: ``start`` (S, 6) the rows to climb from (:func:`~sparsedyn.contact.collision_coal.hull_graph`).
#: ``sd_mesh_box_patches``: the rows (P * 4, 10) ``[d, w_a (3), w_b (3), n (3)]`` (``d`` +inf in a
#: free row) of P mesh-box pairs (:func:`mesh_box_loop_patches`); returns the rows filled, -1 where
#: the workspace (11 doubles a vertex of the largest hull) cannot be had.  ``sd_mesh_box_rows``: those
#: of some of a road's pairs, in its slots (``[d, x, n]``, ``x`` midway between the witnesses).
SOURCE = REDUCE + r"""
#define NB 10
typedef long long sd_mb_mask __attribute__((vector_size(8 * SD_W)));     /* a lane's comparison: -1 or 0 */
static double sd_mb_abs(double x) { return x < 0 ? -x : x; }

static void sd_mb_world(const double *R, const double *p, const double *x, double *w)
{
  for (int r = 0; r < 3; r++) w[r] = ((R[3 * r] * x[0] + R[3 * r + 1] * x[1]) + R[3 * r + 2] * x[2]) + p[r];
}

""" + NEAR_BOUNDS + f"\n#define NB_CONVEX_STEPS {CONVEX_STEPS}\n" + r"""
SD_EXPORT void sd_near_pairs(long long P, const long long *ia, const long long *ib, const long long *plane,
                             const double *sc, const double *sr, const double *bc, const double *be,
                             const long long *kind, const double *R, const double *p, const double *cut,
                             const double *par, const double *V, const long long *first, const long long *count,
                             const long long *adjf, const long long *adj, const long long *start, _Bool *near)
{
  const double slack = par[0], same = par[1];
  for (long long k = 0; k < P; k++) {
    const long long i = ia[k], j = ib[k];
    double ci[3], cj[3];
    sd_mb_world(R + 9 * i, p + 3 * i, sc + 3 * i, ci);
    sd_mb_world(R + 9 * j, p + 3 * j, sc + 3 * j, cj);
    if (plane[k] >= 0) {                              /* a bounded shape's sphere above a plane */
      const long long pl = plane[k];
      const double *c = pl == i ? cj : ci, *Rp = R + 9 * pl, *pp = p + 3 * pl;
      double h = (Rp[2] * (c[0] - pp[0]) + Rp[5] * (c[1] - pp[1])) + Rp[8] * (c[2] - pp[2]);
      near[k] = h - sr[pl == i ? j : i] < cut[k] + same;
      continue;
    }
    if (!(sr[i] + sr[j] < __builtin_inf())) { near[k] = 1; continue; }
    double e[3] = {ci[0] - cj[0], ci[1] - cj[1], ci[2] - cj[2]};
    near[k] = sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]) - sr[i] - sr[j] < cut[k];
    if (!near[k]) continue;
    const double top = cut[k] + slack;
    if (kind[j] == NB_BOX && !(nb_sphere_gap(ci, sr[i], R + 9 * j, p + 3 * j, be + 3 * j) < top)) {
      near[k] = 0; continue;
    }
    if (kind[i] == NB_BOX && !(nb_sphere_gap(cj, sr[j], R + 9 * i, p + 3 * i, be + 3 * i) < top)) {
      near[k] = 0; continue;
    }
    if (be[3 * i] == be[3 * i] && be[3 * j] == be[3 * j]) {
      double oi[3], oj[3];
      sd_mb_world(R + 9 * i, p + 3 * i, bc + 3 * i, oi);
      sd_mb_world(R + 9 * j, p + 3 * j, bc + 3 * j, oj);
      near[k] = nb_obb_gap(R + 9 * i, oi, be + 3 * i, R + 9 * j, oj, be + 3 * j) < top;
    }
    if (near[k] && (kind[i] == NB_CAPSULE || kind[j] == NB_CAPSULE) && kind[i] != NB_OTHER &&
        kind[j] != NB_OTHER) {                  /* a capsule and a shape of a support: its own gaps */
      const long long c = kind[i] == NB_CAPSULE ? i : j, o = c == i ? j : i;
      near[k] = nb_capsule_gap(R + 9 * c, p + 3 * c, be + 3 * c, kind[o], R + 9 * o, p + 3 * o, be + 3 * o) < top;
    }
    if (near[k] && (kind[i] != NB_OTHER || count[i] > 0) && (kind[j] != NB_OTHER || count[j] > 0) &&
        kind[i] != NB_BOX && kind[j] != NB_BOX) {
      /* two convex shapes, neither a box (its own bounding box, exact: the gaps above are its): a mesh's hull
         vertices lie within 2 SAME_POINT of coal's hull (merged vertices) */
      const double shrink = 2.0 * same * ((kind[i] == NB_OTHER) + (kind[j] == NB_OTHER));
      nb_shape a = {kind[i], R + 9 * i, p + 3 * i, be + 3 * i, V, first[i], count[i], adjf, adj, start + 6 * i,
                    start[6 * i]};
      nb_shape b = {kind[j], R + 9 * j, p + 3 * j, be + 3 * j, V, first[j], count[j], adjf, adj, start + 6 * j,
                    start[6 * j]};
      near[k] = nb_convex_gap(&a, &b, ci, cj, top + shrink, NB_CONVEX_STEPS) - shrink < top;
    }
  }
}

/* Vertex V (mesh frame) of the patch: kept (its rows m of the workspace, returns m + 1) where it lies over the face k
   (sign s, the other axes o1, o2) within the cutoff; else m. */
static inline long long sd_mb_vertex(const double *V, const double *Rm, const double *pm, const double *Rb,
                                     const double *pb, const double *hl, int k, int o1, int o2, double s, double cut,
                                     double d0, long long m, double *xw, double *hv, double *W)
{
  double Wv[3], x[3];
  sd_mb_world(Rm, pm, V, Wv);
  for (int j = 0; j < 3; j++) {
    x[j] = ((Wv[0] - pb[0]) * Rb[j] + (Wv[1] - pb[1]) * Rb[3 + j]) + (Wv[2] - pb[2]) * Rb[6 + j];
    if (j == k && !(x[k] * s - hl[k] < cut)) return m;     /* above the cutoff: the other axes unneeded */
  }
  const double h = x[k] * s - hl[k];
  if (!(h < cut && sd_mb_abs(x[o1]) <= hl[o1] && sd_mb_abs(x[o2]) <= hl[o2])) return m;
  hv[m] = h, xw[3 * m] = sd_mp_max(h, d0), xw[3 * m + 1] = x[o1], xw[3 * m + 2] = x[o2];
  for (int r = 0; r < 3; r++) W[3 * m + r] = Wv[r];
  return m + 1;
}

/* One pair's patch (reduction.mesh_box_patch): its rows into out, their count.  Workspace rows (row 0 the closest
   pair's, then the vertices over the face): xw [h, t1, t2] (the patch's coordinates, h clamped to d0), hv the
   vertices' own heights, W their world points; dep, D, A the reduction's.  The nv vertices V (nv, 3), or where soa
   is given the same vertices as its columns (x, y, z rows `stride` apart, NaN after the nv-th up to a multiple of 8):
   their heights SD_W at a time (the same operations as sd_mb_vertex's, which then takes those below the cutoff). */
static int sd_mb_patch(long long nv, const double *V, const double *soa, long long stride, const double *Rm,
                       const double *pm, const double *Rb, const double *pb, const double *hl, const double *cl,
                       double cut, double depth, double same, double span, double span2, double *xw, double *hv,
                       double *W, double *dep, double *D, double *A, double *out)
{
  const double d0 = cl[0], *wa0 = cl + 1, *wb0 = cl + 4, *n0 = cl + 7;
  double nb[3], xb[3], o[3];
  for (int j = 0; j < 3; j++) {
    nb[j] = (Rb[j] * n0[0] + Rb[3 + j] * n0[1]) + Rb[6 + j] * n0[2];
    xb[j] = (Rb[j] * (wb0[0] - pb[0]) + Rb[3 + j] * (wb0[1] - pb[1])) + Rb[6 + j] * (wb0[2] - pb[2]);
    o[j] = sd_mb_abs(xb[j]) - hl[j];
  }
  int k = 0;
  for (int j = 1; j < 3; j++) if (o[j] > o[k]) k = j;
  int o1 = k == 0 ? 1 : 0, o2 = k == 2 ? 1 : 2;
  const int inside = o[k] > -same && sd_mp_max(o[o1], o[o2]) < -same && nb[k] * xb[k] > 0;
  int one = 0;
  if (!inside) {                                   /* a face only where the normal is the face's */
    k = 0;
    for (int j = 1; j < 3; j++) if (sd_mb_abs(nb[j]) > sd_mb_abs(nb[k])) k = j;
    o1 = k == 0 ? 1 : 0, o2 = k == 2 ? 1 : 2;
    one = sd_mb_abs(nb[k]) < 1.0 - 1e-9;
  }
  long long m = 1;
  double nf[3];
  if (!one) {
    const double w = inside ? xb[k] : nb[k], s = (double)(w > 0) - (double)(w < 0);
    for (int r = 0; r < 3; r++) nf[r] = s * Rb[3 * r + k];
    if (!soa)                                      /* the hull vertices over the face within the cutoff */
      for (long long v = 0; v < nv; v++)
        m = sd_mb_vertex(V + 3 * v, Rm, pm, Rb, pb, hl, k, o1, o2, s, cut, d0, m, xw, hv, W);
    else
      for (long long v = 0; v < nv; v += SD_W) {
        sd_vd X, Y, Z;
        __builtin_memcpy(&X, soa + v, sizeof X);
        __builtin_memcpy(&Y, soa + stride + v, sizeof Y);
        __builtin_memcpy(&Z, soa + 2 * stride + v, sizeof Z);
        sd_vd W0 = ((Rm[0] * X + Rm[1] * Y) + Rm[2] * Z) + pm[0], W1 = ((Rm[3] * X + Rm[4] * Y) + Rm[5] * Z) + pm[1];
        sd_vd W2 = ((Rm[6] * X + Rm[7] * Y) + Rm[8] * Z) + pm[2];
        sd_vd H = (((W0 - pb[0]) * Rb[k] + (W1 - pb[1]) * Rb[3 + k]) + (W2 - pb[2]) * Rb[6 + k]) * s - hl[k];
        sd_mb_mask M = H < cut;
        long long any = 0;
        for (int l = 0; l < SD_W; l++) any |= M[l];
        if (!any) continue;
        for (int l = 0; l < SD_W; l++) {
          if (!M[l]) continue;
          const double Vv[3] = {X[l], Y[l], Z[l]};
          m = sd_mb_vertex(Vv, Rm, pm, Rb, pb, hl, k, o1, o2, s, cut, d0, m, xw, hv, W);
        }
      }
  }
  if (m == 1) {                                    /* the closest pair alone */
    for (int r = 0; r < 10; r++) out[r] = cl[r];
    return 1;
  }
  double least = hv[1];
  for (long long i = 2; i < m; i++) if (hv[i] < least) least = hv[i];
  const int first = least > d0 + same;             /* 1: the closest pair leads the patch */
  if (first) {
    xw[0] = d0;
    for (int j = 0; j < 2; j++) {
      const int c = j ? o2 : o1;
      xw[1 + j] = ((wa0[0] - pb[0]) * Rb[c] + (wa0[1] - pb[1]) * Rb[3 + c]) + (wa0[2] - pb[2]) * Rb[6 + c];
    }
  }
  const long long skip = 1 - first, M = m - skip;  /* the patch: xw's rows from skip */
  const double *x0 = xw + 3 * skip;
  long long p0 = 0;
  for (long long i = 0; i < M; i++) {
    dep[i] = depth;
    if (x0[3 * i] < x0[3 * p0]) p0 = i;
  }
  long long keep[4];
  int n = sd_mp_reduce(M, x0, p0, dep, span, span2, D, A, keep);
  for (int a = 1; a < n; a++)                      /* the deepest first (a stable sort of a few) */
    for (int b = a; b > 0 && x0[3 * keep[b]] < x0[3 * keep[b - 1]]; b--) {
      long long t = keep[b]; keep[b] = keep[b - 1]; keep[b - 1] = t;
    }
  for (int a = 0; a < n; a++) {
    double *row = out + NB * a;
    const long long i = keep[a] + skip;            /* its workspace row */
    if (i == 0) {
      for (int r = 0; r < 10; r++) row[r] = cl[r];
      continue;
    }
    row[0] = hv[i];
    for (int r = 0; r < 3; r++) {
      row[1 + r] = W[3 * i + r];
      row[4 + r] = W[3 * i + r] - hv[i] * nf[r];
      row[7 + r] = nf[r];
    }
  }
  return n;
}

/* A pair's rows (n, each [d, w_a, w_b, n]) as collide's merge keeps them (collision._hits): by depth (stable) the
   first of each w_a rounded to a multiple of `same`, then none nearer than `same` to a deeper one (ties: the
   earlier row), in their order; the others' d set to +inf after the kept.  Returns the kept count. */
static int sd_mb_distinct(int n, double *out, double same)
{
  int order[MP], one[MP], keep[MP], m = 0;
  double key[MP][3];
  for (int i = 0; i < n; i++) {
    order[i] = i;
    for (int r = 0; r < 3; r++) key[i][r] = nearbyint(out[NB * i + 1 + r] / same);
  }
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0 && out[NB * order[b]] < out[NB * order[b - 1]]; b--) {
      int t = order[b]; order[b] = order[b - 1]; order[b - 1] = t;
    }
  for (int a = 0; a < n; a++) {
    const int i = order[a];
    one[i] = 1;
    for (int b = 0; b < a; b++) {
      const int j = order[b];
      if (key[j][0] == key[i][0] && key[j][1] == key[i][1] && key[j][2] == key[i][2]) one[i] = 0;
    }
  }
  for (int i = 0; i < n; i++) {
    keep[i] = one[i];
    for (int j = 0; j < n && keep[i]; j++) {
      if (j == i || !one[j]) continue;
      double e0 = out[NB * i + 1] - out[NB * j + 1], e1 = out[NB * i + 2] - out[NB * j + 2];
      double e2 = out[NB * i + 3] - out[NB * j + 3], di = out[NB * i], dj = out[NB * j];
      if (sqrt(e0 * e0 + e1 * e1 + e2 * e2) < same && (dj < di || (dj == di && j < i))) keep[i] = 0;
    }
  }
  for (int i = 0; i < n; i++) {
    if (!keep[i]) continue;
    if (m != i) for (int c = 0; c < NB; c++) out[NB * m + c] = out[NB * i + c];
    m++;
  }
  for (int i = m; i < n; i++) out[NB * i] = __builtin_inf();
  return m;
}

/* The workspace of sd_mb_patch for the meshes ms[slot[k]] (slot NULL: ms[k]) of P pairs, `most` rows of 11 doubles
   (the largest hull's vertices and one), or NULL. */
static double *sd_mb_workspace(long long P, const long long *slot, const long long *ms, const long long *count,
                               long long *most)
{
  *most = 1;
  for (long long k = 0; k < P; k++) {
    const long long c = count[ms[slot ? slot[k] : k]];
    if (c + 1 > *most) *most = c + 1;
  }
  return malloc(11 * *most * sizeof(double));
}

/* The rows of the pair of mesh m and box b (closest pair cl) into rk (MP rows of NB, d +inf in the free ones): its
   patch, swapped where the box is the pair's a, merged (sd_mb_distinct); returns their count.  ws: sd_mb_workspace's
   for `most` rows. */
static int sd_mb_pair(long long m, long long b, const long long *first, const long long *count, const double *hull,
                      const double *soa, const long long *sfirst, long long stride, const double *half, const double *R,
                      const double *p, const double *cl, double cut, double depth, long long swap, const double *par,
                      double *ws, long long most, double *rk)
{
  double *xw = ws, *hv = xw + 3 * most, *W = hv + most, *dep = W + 3 * most, *D = dep + most, *A = D + most;
  for (long long j = 0; j < MP; j++) {
    rk[j * NB] = __builtin_inf();
    for (int c = 1; c < NB; c++) rk[j * NB + c] = 0.0;
  }
  const int n = sd_mb_patch(soa ? (count[m] + 7) / 8 * 8 : count[m], hull + 3 * first[m], soa ? soa + sfirst[m] : 0,
                            stride, R + 9 * m, p + 3 * m, R + 9 * b, p + 3 * b, half + 3 * b, cl, cut, depth, par[0],
                            par[1], par[2], xw, hv, W, dep, D, A, rk);
  if (swap)                                        /* the box first: its witness is w_a, the normal towards it */
    for (int i = 0; i < n; i++)
      for (int r = 0; r < 3; r++) {
        const double t = rk[NB * i + 1 + r];
        rk[NB * i + 1 + r] = rk[NB * i + 4 + r], rk[NB * i + 4 + r] = t, rk[NB * i + 7 + r] = -rk[NB * i + 7 + r];
      }
  return sd_mb_distinct(n, rk, par[3]);
}

SD_EXPORT long long sd_mesh_box_patches(long long P, const long long *ms, const long long *bs, const long long *first,
                                        const long long *count, const double *hull, const double *half, const double *R,
                                        const double *p, const double *closest, const double *cut, const double *depth,
                                        const long long *swap, const double *par, double *out)
{
  long long most, rows = 0;
  double *ws = sd_mb_workspace(P, 0, ms, count, &most);
  if (!ws) return -1;
  for (long long k = 0; k < P; k++)
    rows += sd_mb_pair(ms[k], bs[k], first, count, hull, 0, 0, 0, half, R, p, closest + 10 * k, cut[k], depth[k],
                       swap[k], par, ws, most, out + NB * MP * k);
  free(ws);
  return rows;
}

/* The rows of P of a road's pairs (pair k its pair slot[k], whose mesh, box, cutoff, depth, swap are ms, bs, cut,
   depth, swap at slot[k]; its closest pair closest's row k; none where that is beyond the cutoff) as collide's road
   lays them out: pair slot[k]'s MP rows
   from row MP * slot[k] of out (S rows of nc columns, collision_candidates_near's), [d, (w_a + w_b) / 2, n, 0...];
   the other rows' d +inf (and their other columns left as they were).  Returns the rows filled, -1 where the
   workspace cannot be had. */
SD_EXPORT long long sd_mesh_box_rows(long long P, const long long *slot, const long long *ms, const long long *bs,
                                     const long long *first, const long long *count, const double *hull,
                                     const double *soa, const long long *sfirst, long long stride,
                                     const double *half, const double *R, const double *p, const double *closest,
                                     const double *cut, const double *depth, const long long *swap, const double *par,
                                     long long S, long long nc, double *out)
{
  long long most, rows = 0;
  double *ws = sd_mb_workspace(P, slot, ms, count, &most), rk[NB * MP];
  if (!ws) return -1;
  for (long long j = 0; j < S; j++) out[j * nc] = __builtin_inf();     /* (a free row's other columns unread) */
  for (long long k = 0; k < P; k++) {
    const long long s = slot[k];
    if (!(closest[10 * k] < cut[s])) continue;     /* beyond its cutoff: no rows */
    const int n = sd_mb_pair(ms[s], bs[s], first, count, hull, soa, sfirst, stride, half, R, p, closest + 10 * k,
                             cut[s], depth[s], swap[s], par, ws, most, rk);
    for (int i = 0; i < n; i++) {
      double *row = out + nc * (MP * s + i), *x = rk + NB * i;
      row[0] = x[0];
      for (int r = 0; r < 3; r++) row[1 + r] = (x[1 + r] + x[4 + r]) / 2, row[4 + r] = x[7 + r];
      for (long long c = 7; c < nc; c++) row[c] = 0.0;
    }
    rows += n;
  }
  free(ws);
  return rows;
}

/* collide's road of meshes on boxes (mesh_box_road): its tables' addresses in tab, in the order of mesh_box_road's
   ROAD_TABLES (dims = [Q pairs, NG robot shapes, S shapes, the soa's stride, the slots' rows, their columns]). */
enum { T_DIMS, T_RW, T_PW, T_IA, T_IB, T_PLANE, T_SC, T_SR, T_BC, T_BE, T_KIND, T_CUT, T_NPAR, T_MS, T_BS, T_FIRST,
       T_COUNT, T_HULL, T_SOA, T_SFIRST, T_HALF, T_MCUT, T_DEPTH, T_SWAP, T_PAR, T_ADJF, T_ADJ, T_START };

/* The shapes' poses R (S, 3, 3), p (S, 3) (the robot's Rg, pg, then the world's) and the broad phase of the road's
   Q pairs into near (Q,). */
SD_EXPORT void sd_road_near(const void *const *tab, const double *Rg, const double *pg, double *R, double *p,
                            _Bool *near)
{
  const long long *dims = tab[T_DIMS], Q = dims[0], NG = dims[1], S = dims[2];
  const double *Rw = tab[T_RW], *pw = tab[T_PW];
  for (long long i = 0; i < 9 * S; i++) R[i] = i < 9 * NG ? Rg[i] : Rw[i - 9 * NG];
  for (long long i = 0; i < 3 * S; i++) p[i] = i < 3 * NG ? pg[i] : pw[i - 3 * NG];
  sd_near_pairs(Q, tab[T_IA], tab[T_IB], tab[T_PLANE], tab[T_SC], tab[T_SR], tab[T_BC], tab[T_BE], tab[T_KIND], R, p,
                tab[T_CUT], tab[T_NPAR], tab[T_HULL], tab[T_FIRST], tab[T_COUNT], tab[T_ADJF], tab[T_ADJ], tab[T_START],
                near);
}

/* Whether coal's penetration d < 0 of slot s along its normal n (mesh to box) is settled: the hull's reach along n
   beyond the box's (>= the least depth >= EPA's, its polytope's nearest face's) exceeds -d by <= SD_EPA_SLACK [m]; a
   run that EPA's cap stopped fails it unless that close to the least depth (to the hull's merged vertices' spacing). */
#define SD_EPA_SLACK 1e-9
static int sd_road_settled(const void *const *tab, long long s, const double *R, const double *p, const double *n,
                           double d)
{
  const long long m = ((const long long *)tab[T_MS])[s], b = ((const long long *)tab[T_BS])[s];
  const long long v0 = ((const long long *)tab[T_FIRST])[m], nv = ((const long long *)tab[T_COUNT])[m];
  const double *V = (const double *)tab[T_HULL] + 3 * v0, *h = (const double *)tab[T_HALF] + 3 * b;
  const double *Rm = R + 9 * m, *Rb = R + 9 * b, *pm = p + 3 * m, *pb = p + 3 * b;
  double u[3], reach = -__builtin_inf(), e = 0.0;
  for (int c = 0; c < 3; c++) {
    u[c] = (Rm[c] * n[0] + Rm[3 + c] * n[1]) + Rm[6 + c] * n[2];
    e += sd_mb_abs((Rb[c] * n[0] + Rb[3 + c] * n[1]) + Rb[6 + c] * n[2]) * h[c];
  }
  for (long long v = 0; v < nv; v++) {
    const double t = (V[3 * v] * u[0] + V[3 * v + 1] * u[1]) + V[3 * v + 2] * u[2];
    if (t > reach) reach = t;
  }
  const double depth = (reach + ((pm[0] * n[0] + pm[1] * n[1]) + pm[2] * n[2]))
                       - (((pb[0] * n[0] + pb[1] * n[1]) + pb[2] * n[2]) - e);
  return depth + d <= SD_EPA_SLACK;
}

/* sd_mesh_box_rows of the road's P pairs slot (P,) given coal's answers got: the witnesses on the meshes (P, 3), on
   the boxes (P, 3), the normals from the meshes towards the boxes (P, 3), the distances (P,); -2 where one of
   those is not finite or beyond 1e300, or a penetration is not settled (sd_road_settled) (the general road
   retries it), -1 without memory. */
SD_EXPORT long long sd_road_rows(const void *const *tab, long long P, const long long *slot, const double *R,
                                 const double *p, const double *got, double *out)
{
  const long long *dims = tab[T_DIMS];
  double *closest = malloc(10 * (P ? P : 1) * sizeof(double));
  if (!closest) return -1;
  for (long long k = 0; k < P; k++) {
    double *cl = closest + 10 * k;
    cl[0] = got[9 * P + k];
    for (int r = 0; r < 3; r++)
      cl[1 + r] = got[3 * k + r], cl[4 + r] = got[3 * (P + k) + r], cl[7 + r] = -got[3 * (2 * P + k) + r];
    for (int r = 0; r < 10; r++)
      if (!(sd_mb_abs(cl[r]) < 1e300)) { free(closest); return -2; }
    if (cl[0] < 0 && !sd_road_settled(tab, slot[k], R, p, got + 3 * (2 * P + k), cl[0])) { free(closest); return -2; }
  }
  long long n = sd_mesh_box_rows(P, slot, tab[T_MS], tab[T_BS], tab[T_FIRST], tab[T_COUNT], tab[T_HULL], tab[T_SOA],
                                 tab[T_SFIRST], dims[3], tab[T_HALF], R, p, closest, tab[T_MCUT], tab[T_DEPTH],
                                 tab[T_SWAP], tab[T_PAR], dims[4], dims[5], out);
  free(closest);
  return n;
}
"""

#: The routines once loaded: ``[(their ctypes functions, :func:`_routines`) or None, tried]``.
_ROUTINE: list = [None, False]
_P, _PP = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_void_p)


def _routines():
    """``(sd_near_pairs, sd_mesh_box_patches, sd_mesh_box_rows, sd_road_near, sd_road_rows)`` (ctypes), or
    None where no C compiler builds them."""
    if not _ROUTINE[1]:
        lib = c_library(SOURCE)
        if lib is not None:
            f, g, h = lib.sd_near_pairs, lib.sd_mesh_box_patches, lib.sd_mesh_box_rows
            f.restype, g.restype, h.restype = None, ctypes.c_longlong, ctypes.c_longlong
            f.argtypes, g.argtypes = [ctypes.c_longlong] + [_P] * 19, [ctypes.c_longlong] + [_P] * 14
            ll = ctypes.c_longlong
            h.argtypes = [ll] + [_P] * 8 + [ll] + [_P] * 8 + [ll] * 2 + [_P]
            a, b = lib.sd_road_near, lib.sd_road_rows
            a.restype, b.restype = None, ctypes.c_longlong
            a.argtypes, b.argtypes = [_PP] + [_P] * 5, [_PP, ctypes.c_longlong] + [_P] * 5
            _ROUTINE[0] = (f, g, h, a, b)
        _ROUTINE[1] = True
    return _ROUTINE[0]


def _extents(scene, k):
    """``(centre (3,), half extents (3,))`` of shape ``k``'s bounding box in its frame; NaN where it has none
    (a plane, a height field).  A mesh's: its hull vertices' extents, grown by the spacing under which
    they were merged (collision_coal's hull)."""
    s = scene.shapes[k]
    size = np.asarray(s.size, float)
    z = np.zeros(3)
    if s.kind == "box":
        return z, size / 2
    if s.kind == "sphere":
        return z, np.full(3, size[0])
    if s.kind in ("capsule", "cylinder"):
        return z, np.array([size[0], size[0], size[1] / 2 + (size[0] if s.kind == "capsule" else 0.0)])
    if s.kind == "ellipsoid":
        return z, size.copy()
    if s.kind == "mesh":
        V = _hull_vertices(scene, k)
        if len(V):
            lo, hi = V.min(0), V.max(0)
            return (lo + hi) / 2, (hi - lo) / 2 + 2 * SAME_POINT
    return np.full(3, np.nan), np.full(3, np.nan)


def near_plan(scene, c, r, pairs=None):
    """What :func:`near_pairs` hands the routine for the scene pairs ``pairs`` (sorted (P,) int; None:
    all) of ``scene`` (its shapes' bounding spheres ``c`` (S, 3) in their frames, radii ``r`` (S,),
    collide's): the tables and their addresses; kept by the scene."""
    key = "box near plan" if pairs is None else ("box near plan", pairs.tobytes())
    got = scene.cache.get(key)
    if got is None:
        idx = np.asarray(scene.index, np.int64).reshape(-1, 2)
        idx = idx if pairs is None else idx[pairs]
        kinds = np.array([s.kind for s in scene.shapes] or [""])[idx] if len(idx) else np.zeros((0, 2), str)
        on_plane = (kinds == "plane").any(1) & np.isfinite(r[idx]).any(1) if len(idx) else np.zeros(0, bool)
        plane = np.where(on_plane, np.where(kinds[:, 0] == "plane", idx[:, 0], idx[:, 1]), -1).astype(np.int64)
        ext = [_extents(scene, k) for k in range(len(scene.shapes))]
        bc = np.array([e[0] for e in ext]).reshape(-1, 3)
        be = np.array([e[1] for e in ext]).reshape(-1, 3)
        kind = np.array([KIND_CODES.get(s.kind, 0) for s in scene.shapes], np.int64)
        V, rows = mesh_vertices(scene)
        first, count = np.zeros(len(scene.shapes), np.int64), np.zeros(len(scene.shapes), np.int64)
        for k, (a, b) in rows.items():
            first[k], count[k] = a, b - a
        start, adjf, adj = hull_graph(scene)
        tables = (np.ascontiguousarray(idx[:, 0]), np.ascontiguousarray(idx[:, 1]), plane,
                  np.ascontiguousarray(c, float), np.ascontiguousarray(r, float), bc, be, kind,
                  np.array([SLACK, SAME_POINT]), np.ascontiguousarray(V, float) if len(V) else np.zeros(3), first,
                  count, adjf, adj, start)
        got = scene.cache[key] = (tables, [_ints(x) if x.dtype == np.int64 else _at(x) for x in tables], {})
    return got


def near_pairs(scene, R, p, cutoff, c, r, pairs=None):
    """(P,) bool: of the scene pairs ``pairs`` (sorted (P,) int; None: all the scene's), those whose shapes
    may come closer than ``cutoff`` (a float, or (P,) [m]) at the world poses ``R`` (S, 3, 3), ``p`` (S, 3)
    (module docstring: every pair within its cutoff, and of the others those the bounds cannot part),
    ``c``, ``r`` the shapes' bounding spheres (:func:`near_plan`); None where the routine cannot be built
    (no C compiler)."""
    got = _routines()
    if got is None:
        return None
    tables, at, fills = near_plan(scene, c, r, pairs)
    P = len(tables[0])
    if np.ndim(cutoff):
        cut = np.ascontiguousarray(cutoff, float)
        if cut.shape != (P,):
            raise ValueError(f"near_pairs: cutoff must be a float or one per pair, shape ({P},), got shape {cut.shape}")
    else:                                          # one cutoff for all: its table kept
        cut = fills.get(cutoff)
        if cut is None:
            if len(fills) > 8:
                fills.clear()
            cut = fills[cutoff] = np.full(P, float(cutoff))
    near = np.empty(max(P, 8), bool)             # (a buffer of a double at least)
    got[0](P, *at[:8], _at(R), _at(p), _at(cut), *at[8:], ctypes.c_double.from_buffer(near))
    return near[:P]


def mesh_box_loop_patches(V, ranges, half, ms, bs, R, p, closest, cutoff, depth, swap=None):
    """:func:`~sparsedyn.contact.reduction.mesh_box_patch` of P pairs in one call of the routine: pair
    ``k``'s mesh is shape ``ms[k]``, its hull vertices ``V[ranges[ms[k], 0]:ranges[ms[k], 1]]`` (rows of
    ``V`` (N, 3), in its frame), its box shape ``bs[k]`` of half sizes ``half[bs[k]]``, the shapes at the
    world poses ``R`` (S, 3, 3), ``p`` (S, 3) (``ranges`` (S, 2) int, ``half`` (S, 3): per shape, what
    is not a mesh or a box unused); ``closest`` (P, 10) the pair's closest points ``[d, w_a (3), w_b
    (3), n (3)]`` (``n`` from the box towards the mesh), ``cutoff`` (P,) [m], ``depth`` (P,) [m] the
    patch's allowance (``same``: ``SAME_DEPTH`` of collision_coal).  Returns ``(k,
    d, w_a, w_b, n)`` per hit, by pair (each pair's deepest first; ``k`` the pair's position in ``ms``):
    the NumPy function's rows to rounding, merged as :func:`~sparsedyn.collide` merges a pair's hits
    (the deepest of those whose witnesses on ``a`` coincide, to ``SAME_POINT``:
    its points distinct); ``swap`` (P,) bool: the pair's box is its ``a`` (its witness ``w_a``, the normal
    towards it); None where the routine cannot be built."""
    got = _routines()
    if got is None:
        return None
    P = len(ms)
    shapes = [np.shape(x) for x in (bs, closest, cutoff, depth)] + ([] if swap is None else [np.shape(swap)])
    if shapes != [(P,), (P, 10), (P,), (P,), (P,)][:len(shapes)]:
        raise ValueError(f"mesh_box_loop_patches: expected bs (P,), closest (P, 10), cutoff, depth and swap (P,) "
                         f"for P = {P} pairs, got shapes {shapes}")
    tables = _tables(V, ranges, half)
    out = np.empty((P * MAX_PATCH_POINTS, 10))
    sw = np.zeros(max(P, 1), np.int64) if swap is None else np.asarray(swap, np.int64)
    if got[1](P, _ints(ms), _ints(bs), *tables[3:], *(_at(x) for x in (R, p, closest, cutoff, depth)), _ints(sw),
              _PAR_AT, _to(out)) < 0:
        raise MemoryError(f"mesh-box contacts: no memory for the workspace of {int(np.ptp(np.reshape(ranges, (-1, 2)), 1).max())} hull vertices")
    sel = np.flatnonzero(out[:, 0] != np.inf)
    r = out.take(sel, 0)
    return sel // MAX_PATCH_POINTS, r[:, 0], r[:, 1:4], r[:, 4:7], r[:, 7:10]


_PAR = np.array([SAME_DEPTH, SPAN, SPAN ** 2, SAME_POINT])
_PAR_AT = ctypes.c_double.from_buffer(_PAR)
def _tables(V, ranges, half):
    """The routine's references to the tables ``V``, ``ranges``, ``half`` (:func:`mesh_box_loop_patches`):
    ``(V, ranges, half, first, count, V, half)`` (the arrays given, then the references)."""
    r = np.asarray(ranges, np.int64).reshape(-1, 2)
    return (V, ranges, half, _ints(r[:, 0]), _ints(r[:, 1] - r[:, 0]), _at(V), _at(half))


def _ints(x):
    """A reference to the first element of ``x`` as an int64 table (a copy where it is not one)."""
    x = np.ascontiguousarray(x, np.int64)
    return ctypes.c_double.from_buffer(x if x.flags.writeable else x.copy())
