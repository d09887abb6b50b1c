"""Robot meshes on world planes in one native loop: :func:`mesh_plane_loop_rows`.

The patches of :func:`~sparsedyn.contact.reduction.mesh_plane_patches` (each pair's hull vertices
within its cutoff reduced to the points spanning their patch) at one state, computed by a C routine
written by hand (:func:`~sparsedyn.kernels.c_library`) that loops over the table of hull vertices,
from the bodies' world poses of the compiled forward kinematics.  Per pair ``k`` (a mesh on body
``b``, its hull vertices ``v`` in the body's frame, against the plane through ``p_b`` of axes
``[n, t1, t2]``, :func:`~sparsedyn.contact.reduction.plane_axes`):

1. broad phase: the pair is computed only where its bounding sphere's height above the plane,
   ``n . (R c + o - p_b) - r``, and that of the lowest corner of its box about the hull's vertices
   (centre ``b``, half sizes ``e`` in the body's frame), ``n . (R b + o - p_b) - |R^T n| . e``, are
   below its cutoff (plus :data:`~sparsedyn.contact.collision_near.SLACK`; the box bounds a long
   link lying above the plane tighter than the sphere: none of its vertices' heights is computed);
2. each vertex's coordinates ``x = v A + off`` along the plane's axes, ``A = R^T [n t1 t2]``,
   ``off = [n t1 t2]^T (o - p_b)`` (height first), kept where the height is below the cutoff;
3. the kept vertices reduced to the patch's points (:mod:`~sparsedyn.contact.reduction`: the deepest
   ``p0``, the farthest from it ``p1``, the farthest from the line on either side ``p2``, ``p3``,
   among the points touching with ``p0``, each point's allowance :func:`~sparsedyn.contact.reduction.patch_depth`'s
   or, given the pair's rotation over the step, :func:`~sparsedyn.contact.reduction.rotation_depth`'s),
   each first least or largest taken as NumPy's ``argmin`` / ``argmax`` do.

The same operations as the NumPy functions, in the same order, with no fused multiply-add: the rows
are theirs to rounding.  The work grows with the vertices of the pairs near their planes; a pair far
from its plane costs its bound alone (the traced kernel of :func:`~sparsedyn.mesh_plane_heights`
runs a straight line over every vertex).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from ..algorithms.kinematics import body_velocities, forward_kinematics
from ..kernels import c_library, native_calls
from .collision_near import NEAR_COLUMNS, SLACK
from .mesh_plane import mesh_plane_plan
from .reduction import MAX_PATCH_POINTS, PATCH_DEPTH, SPAN

__all__ = ["REDUCE", "mesh_plane_loop_rows", "mesh_plane_rows_call", "mesh_plane_step_rows", "mesh_plane_loop_hits", "loop_plan", "LoopPlan"]

#: The reduction of one patch in C (:func:`~sparsedyn.contact.reduction.reduce_patches`' rule), shared with
#: :mod:`~sparsedyn.contact.mesh_box_loop`: ``sd_mp_reduce`` of a patch's points ``[h, t1, t2]``; the start
#: of each routine's source (its optimisation set here, for the whole translation unit).
REDUCE = r"""
/* GCC's -O3 for the translation unit (its loops vectorised: a table's fill, the heights' pass), fused
   multiply-add still off: IEEE arithmetic either way, so the same numbers. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=off")
#endif
#define MP 4
static double sd_mp_max(double a, double b) { return a > b ? a : b; }   /* np.maximum of numbers */

/* The kept points of one patch (reduction._reduce; p0 its deepest), in order: their count, their indices in keep. */
static int sd_mp_reduce(long long m, const double *xw, long long p0, const double *dep, double span, double span2,
                        double *D, double *A, long long *keep)
{
  double top = sd_mp_max(xw[3 * p0], 0.0);
  long long p1 = 0;
  for (long long i = 0; i < m; i++) {
    double r1 = xw[3 * i + 1] - xw[3 * p0 + 1], r2 = xw[3 * i + 2] - xw[3 * p0 + 2];
    D[i] = xw[3 * i] <= top + dep[i] ? r1 * r1 + r2 * r2 : 0.0;
    if (D[i] > D[p1]) p1 = i;
  }
  double e0 = xw[3 * p1 + 1] - xw[3 * p0 + 1], e1 = xw[3 * p1 + 2] - xw[3 * p0 + 2], L = sqrt(D[p1]);
  double s = L > 0 ? L : 1.0;
  long long p2 = 0, p3 = 0;
  for (long long i = 0; i < m; i++) {
    double r1 = xw[3 * i + 1] - xw[3 * p0 + 1], r2 = xw[3 * i + 2] - xw[3 * p0 + 2];
    A[i] = xw[3 * i] <= top + dep[i] ? (e0 * r2 - e1 * r1) / s : 0.0;
    if (A[i] > A[p2]) p2 = i;
    if (A[i] < A[p3]) p3 = i;
  }
  long long got[4] = {p0, -1, -1, -1};
  if (D[p1] > span2) got[1] = p1;
  if (A[p2] > span) got[2] = p2;
  if (A[p3] < -span) got[3] = p3;
  int n = 0;
  for (long long i = 0; i < m && n < 4; i++)              /* sorted, each once */
    if (i == got[0] || i == got[1] || i == got[2] || i == got[3]) keep[n++] = i;
  return n;
}

"""

#: The C routine: ``sd_mesh_plane_rows`` writes the rows (P * 4, 11) (:data:`NEAR_COLUMNS`: ``[d, x
#: (3), n (3), local (3), n . w_b]``, ``d`` +inf in a free row) of the ``P`` pairs; ``par``:
#: ``[margin (NaN: none), PATCH_DEPTH, SLACK, SPAN, SPAN ** 2]``; ``spin`` (P, 3) or NULL; ``vel`` (nb, 6)
#: the bodies' spatial velocities (body axes, angular first) or NULL, each mesh's rotation over the step
#: ``dt`` then ``R omega dt`` (a world plane's is zero; ``spin`` unused).  It returns
#: the number of rows filled, -1 where its workspace (7 doubles a vertex of the largest hull) cannot be had.
SOURCE = REDUCE + r"""
#define NC 11
typedef long long sd_mp_mask __attribute__((vector_size(8 * SD_W)));     /* a lane's comparison: -1 or 0 */
/* Whether any lane of M is set: AVX's sign-bit mask where the lanes are its four, else lane by lane. */
#if defined(__AVX__) && SD_W == 4 && (defined(__GNUC__) || defined(__clang__))
typedef double sd_mp_v4 __attribute__((vector_size(32)));
static int sd_mp_any(sd_mp_mask M) { return __builtin_ia32_movmskpd256((sd_mp_v4)M) != 0; }
#else
static int sd_mp_any(sd_mp_mask M) { long long any = 0; for (int l = 0; l < SD_W; l++) any |= M[l]; return any != 0; }
#endif

/* Each pair's allowance above its deepest point (reduction.patch_depth / rotation_depth). */
static void sd_mp_depth(long long m, const double *xw, long long p0, const double *ax, const double *spin, double base,
                        double d0, double *dep)
{
  double th[3];
  int known = spin != 0;
  if (known) {
    for (int i = 0; i < 3; i++) th[i] = (ax[i] * spin[0] + ax[3 + i] * spin[1]) + ax[6 + i] * spin[2];
    known = th[0] == th[0] && th[1] == th[1] && th[2] == th[2];
  }
  if (!known) { for (long long i = 0; i < m; i++) dep[i] = d0; return; }
  double a = sqrt((th[0] * th[0] + th[1] * th[1]) + th[2] * th[2]);
  double c = ((a - sin(a)) + 1.0) - cos(a);
  double w0 = th[0] * 0.0, w1 = th[2], w2 = th[1] * -1.0;
  for (long long i = 0; i < m; i++) {
    double r0 = xw[3 * i] - xw[3 * p0], r1 = xw[3 * i + 1] - xw[3 * p0 + 1], r2 = xw[3 * i + 2] - xw[3 * p0 + 2];
    double low = (r0 * w0 + r1 * w1) + r2 * w2;
    dep[i] = (base + sd_mp_max(0.0, low)) + sqrt((r0 * r0 + r1 * r1) + r2 * r2) * c;
  }
}

SD_EXPORT long long sd_mesh_plane_rows(long long P, const long long *body, const double *R, const double *o,
                                       const double *axes, const double *pb, const double *hull, const long long *rows,
                                       const double *sphere, const double *cut, const double *spin, const double *vel,
                                       double dt, const double *par, double *out)
{
  const double margin = par[0], base = par[1], slack = par[2], span = par[3], span2 = par[4];
  long long hits = 0;
  __builtin_memset(out, 0, P * MP * NC * sizeof(double));            /* (+0.0: all bits zero) */
  for (long long j = 0; j < P * MP; j++) out[j * NC] = __builtin_inf();
  long long most = 1;
  for (long long k = 0; k < P; k++) if (rows[k + 1] - rows[k] > most) most = rows[k + 1] - rows[k];
  /* the workspace: a pair's kept vertices' coordinates, allowances, D and A, and their rows in hull */
  double *xw = aligned_alloc(64, (7 * most * sizeof(double) + 63) / 64 * 64);
  if (!xw) return -1;
  double *dep = xw + 3 * most, *D = dep + most, *Aw = D + most;
  long long *iw = (long long *)(Aw + most);
  const double *hx = hull, *hy = hull + rows[P], *hz = hull + 2 * rows[P];
  for (long long k = 0; k < P; k++) {
    const double *Rb = R + 9 * body[k], *ob = o + 3 * body[k], *ax = axes + 9 * k, *q = pb + 3 * k;
    const double *sp = sphere + 10 * k;
    double cw[3], w[3], A[9], off[3];
    for (int i = 0; i < 3; i++) {
      cw[i] = ((Rb[3 * i] * sp[0] + Rb[3 * i + 1] * sp[1]) + Rb[3 * i + 2] * sp[2]) + ob[i] - q[i];
      w[i] = ob[i] - q[i];
    }
    double bound = ((ax[0] * cw[0] + ax[3] * cw[1]) + ax[6] * cw[2]) - sp[3];
    if (!(bound < cut[k] + slack)) continue;                       /* the broad phase: the sphere */
    for (int i = 0; i < 3; i++)
      for (int c = 0; c < 3; c++) A[3 * i + c] = (Rb[i] * ax[c] + Rb[3 + i] * ax[3 + c]) + Rb[6 + i] * ax[6 + c];
    for (int c = 0; c < 3; c++) off[c] = (ax[c] * w[0] + ax[3 + c] * w[1]) + ax[6 + c] * w[2];
    /* and the box: its lowest corner's height, n . (R b + o - p_b) - |R^T n| . e */
    bound = (((A[0] * sp[4] + A[3] * sp[5]) + A[6] * sp[6]) + off[0])
            - ((__builtin_fabs(A[0]) * sp[7] + __builtin_fabs(A[3]) * sp[8]) + __builtin_fabs(A[6]) * sp[9]);
    if (!(bound < cut[k] + slack)) continue;
    /* the heights, SD_W vertices at a time (the same operations: no fused multiply-add), and the
       coordinates of those below the cutoff (a padding vertex, NaN, never is) */
    const long long v0 = rows[k], v1 = rows[k + 1];
    long long m = 0;
    for (long long v = v0; v < v1; v += SD_W) {
      sd_vd X, Y, Z, H;
      __builtin_memcpy(&X, hx + v, sizeof X);
      __builtin_memcpy(&Y, hy + v, sizeof Y);
      __builtin_memcpy(&Z, hz + v, sizeof Z);
      H = ((X * A[0] + Y * A[3]) + Z * A[6]) + off[0];
      sd_mp_mask M = H < cut[k];
      if (!sd_mp_any(M)) continue;
      for (int l = 0; l < SD_W; l++) {
        if (!M[l]) continue;
        const long long u = v + l;
        xw[3 * m] = H[l];
        xw[3 * m + 1] = ((hx[u] * A[1] + hy[u] * A[4]) + hz[u] * A[7]) + off[1];
        xw[3 * m + 2] = ((hx[u] * A[2] + hy[u] * A[5]) + hz[u] * A[8]) + off[2];
        iw[m++] = u;
      }
    }
    if (!m) continue;
    long long p0 = 0;
    for (long long i = 1; i < m; i++) if (xw[3 * i] < xw[3 * p0]) p0 = i;
    double d0 = base + (margin == margin ? 2.0 * sd_mp_max(cut[k] - margin, 0.0) : 0.0);
    double turn[3];                              /* the mesh's rotation over the step (world), from its body's */
    if (vel) {
      const double *w = vel + 6 * body[k];
      for (int r = 0; r < 3; r++) turn[r] = ((Rb[3 * r] * w[0] + Rb[3 * r + 1] * w[1]) + Rb[3 * r + 2] * w[2]) * dt;
    }
    const double *th = margin != margin ? 0 : vel ? turn : spin ? spin + 3 * k : 0;
    sd_mp_depth(m, xw, p0, ax, th, base, d0, dep);
    long long keep[4];
    int n = sd_mp_reduce(m, xw, p0, dep, span, span2, D, Aw, keep);
    for (int j = 0; j < n; j++) {
      long long i = keep[j];
      const double V[3] = {hx[iw[i]], hy[iw[i]], hz[iw[i]]};
      double *row = out + (MP * k + j) * NC, h = xw[3 * i], W[3], wb[3];
      for (int r = 0; r < 3; r++) {
        W[r] = ((Rb[3 * r] * V[0] + Rb[3 * r + 1] * V[1]) + Rb[3 * r + 2] * V[2]) + ob[r];
        wb[r] = W[r] - h * ax[3 * r];
      }
      row[0] = h;
      for (int r = 0; r < 3; r++) {
        row[1 + r] = (W[r] + wb[r]) / 2.0;
        row[4 + r] = ax[3 * r];
        row[7 + r] = V[r];
      }
      row[10] = (ax[0] * wb[0] + ax[3] * wb[1]) + ax[6] * wb[2];
      hits++;
    }
  }
  free(xw);
  return hits;
}

/* A step's look-ahead and rows: each of the scene's Q pairs' cutoff ``margin + dt (s_a + s_b)`` into
   ``cutall`` (Q,) (``ends`` (Q, 2) its bodies, -1 a world shape's; per body ``s = |v_o| + |omega| rho``,
   ``vel`` (nb, 6) its spatial velocity, the collision kernel's _pair_cutoffs, term by term), then
   sd_mesh_plane_rows of the P mesh-plane pairs (``pair`` (P,) their scene pairs) with their cutoffs
   and the bodies' velocities over the step ``dt``.  ``par``: as there. */
SD_EXPORT long long sd_step_rows(long long Q, const long long *ends, const double *rho, double *cutall, long long P,
                                 const long long *pair, const long long *body, const double *R, const double *o,
                                 const double *axes, const double *pb, const double *hull, const long long *rows,
                                 const double *sphere, const double *vel, double dt, const double *par, double *out)
{
  const double margin = par[0];
  for (long long k = 0; k < Q; k++) {
    double s[2];
    int n = 0;
    for (int e = 0; e < 2; e++) {
      const long long j = ends[2 * k + e];
      if (j < 0) continue;
      const double *w = vel + 6 * j;
      s[n++] = sqrt((w[3] * w[3] + w[4] * w[4]) + w[5] * w[5])
               + sqrt((w[0] * w[0] + w[1] * w[1]) + w[2] * w[2]) * rho[j];
    }
    cutall[k] = margin + dt * (n == 2 ? s[0] + s[1] : n ? s[0] : 0.0);
  }
  double *cut = malloc((P ? P : 1) * sizeof(double));
  if (!cut) return -1;
  for (long long k = 0; k < P; k++) cut[k] = cutall[pair[k]];
  long long hits = sd_mesh_plane_rows(P, body, R, o, axes, pb, hull, rows, sphere, cut, 0, vel, dt, par, out);
  free(cut);
  return hits;
}

/* sd_step_rows where the sum of the nb bodies' velocities ``vel`` (nb, 6) is finite (else -2, nothing
   written: a velocity not finite or overflowing, the general road's case), then ``top[0]`` the largest
   of the cutoffs ``cutall`` and the margin ``par[0]`` (the collision kernel's cutoff for its pairs), and
   ``within[j] = cutall[pick[j]]`` for the K candidates of scene pairs ``pick``. */
SD_EXPORT long long sd_step_rows_top(long long Q, const long long *ends, const double *rho, double *cutall, long long P,
                                     const long long *pair, const long long *body, const double *R, const double *o,
                                     const double *axes, const double *pb, const double *hull, const long long *rows,
                                     const double *sphere, const double *vel, double dt, const double *par, double *out,
                                     long long nb, double *top, long long K, const long long *pick, double *within)
{
  double s = 0.0;
  for (long long j = 0; j < 6 * nb; j++) s += vel[j];
  if (!(s - s == 0.0)) return -2;                        /* (NaN or inf: s - s is NaN) */
  long long hits = sd_step_rows(Q, ends, rho, cutall, P, pair, body, R, o, axes, pb, hull, rows, sphere, vel, dt, par,
                                out);
  if (hits < 0) return hits;
  double t = par[0];
  for (long long k = 0; k < Q; k++) if (cutall[k] > t) t = cutall[k];
  top[0] = t;
  for (long long j = 0; j < K; j++) within[j] = cutall[pick[j]];
  return hits;
}

/* sd_step_rows_top of its 22 arguments but ``dt`` packed in the 64-bit words ``a`` in order (the counts
   Q, P, nb, K as integers, the others addresses): one table made once, for a caller whose buffers stay. */
SD_EXPORT long long sd_step_rows_packed(const long long *a, double dt)
{
#define SD_D(i) ((double *)(__INTPTR_TYPE__)a[i])
#define SD_L(i) ((const long long *)(__INTPTR_TYPE__)a[i])
  return sd_step_rows_top(a[0], SD_L(1), SD_D(2), SD_D(3), a[4], SD_L(5), SD_L(6), SD_D(7), SD_D(8), SD_D(9), SD_D(10),
                          SD_D(11), SD_L(12), SD_D(13), SD_D(14), dt, SD_D(15), SD_D(16), a[17], SD_D(18), a[19],
                          SD_L(20), SD_D(21));
#undef SD_D
#undef SD_L
}

/* sd_step_rows_packed as a stage of the step's native call (scene_step's found), dt = buf[1]: nonzero where it
   writes no rows (-2: velocities whose sum overflows, -1: no memory), the caller's road then. */
SD_EXPORT int sd_step_rows_stage(const long long *a, double *buf)
{
  return sd_step_rows_packed(a, buf[1]) < 0;
}
"""

#: The routines once loaded: ``[sd_mesh_plane_rows or None, tried, sd_step_rows or None]``.
_ROUTINE: list = [None, False, None]
_FK, _BODY_VELOCITIES, _NONE = forward_kinematics.__name__, body_velocities.__name__, {}
#: Each pair's hull vertices are a block of a multiple of this many (the widest vector of the routine's
#: height pass), NaN after the last.
_PAD = 8


def _routine():
    """``sd_mesh_plane_rows`` (ctypes), or None where no C compiler builds it."""
    if not _ROUTINE[1]:
        lib = c_library(SOURCE)
        if lib is not None:
            f = lib.sd_mesh_plane_rows
            f.restype = ctypes.c_longlong
            f.argtypes = [ctypes.c_longlong] + [ctypes.POINTER(ctypes.c_double)] * 11 + [ctypes.c_double] + \
                [ctypes.POINTER(ctypes.c_double)] * 2
            g = lib.sd_step_rows
            g.restype = ctypes.c_longlong
            g.argtypes = [ctypes.c_longlong] + [ctypes.POINTER(ctypes.c_double)] * 3 + [ctypes.c_longlong] + \
                [ctypes.POINTER(ctypes.c_double)] * 10 + [ctypes.c_double] + [ctypes.POINTER(ctypes.c_double)] * 2
            _ROUTINE[0], _ROUTINE[2] = f, g
        _ROUTINE[1] = True
    return _ROUTINE[0]


def _at(x):
    """A ctypes reference to the first element of the float array ``x`` (C-contiguous; a copy where
    it is read-only), the cheapest way to hand its address to the routine."""
    x = np.ascontiguousarray(x, float)
    return ctypes.c_double.from_buffer(x if x.flags.writeable else x.copy())


class LoopPlan:
    """A scene's robot meshes on world planes as the routine takes them (:func:`loop_plan`): ``pair``
    (P,) their scene pairs, ``body`` (P,) their meshes' bodies, ``hull`` (3, N) the hull vertices'
    coordinates in the bodies' frames (pair after pair, each pair's block padded with NaN to a
    multiple of 8, the widest vector of the loop), ``rows`` (P + 1,) each pair's first column of ``hull``,
    ``spheres`` (P, 10) the bounding spheres (centre in the body, radius) and the boxes about the hull
    vertices (centre, half sizes, in the body), ``axes`` (P, 3, 3) the
    planes' axes, ``pb`` (P, 3) their points, ``margin`` the scene's margin [m], ``cut`` (P,) the
    margin per pair, ``inside`` (scene pairs,) bool: the pairs here."""

    __slots__ = ("pair", "body", "hull", "rows", "spheres", "axes", "pb", "margin", "cut", "inside", "_at", "_step")


def loop_plan(scene):
    """The :class:`LoopPlan` of ``scene`` (from :func:`~sparsedyn.contact.mesh_plane.mesh_plane_plan`:
    the same pairs, in the same order), or None where it has no robot mesh on a world plane; kept by
    the scene."""
    key = "mesh-plane loop plan"
    if key in scene.cache:
        return scene.cache[key]
    mp = mesh_plane_plan(scene)
    lp = None
    if mp is not None:
        lp = LoopPlan()
        shapes = scene.shapes
        meshes = [shapes[p[0]] for p in mp.pairs]
        lp.pair, lp.margin, lp.inside = mp.pair, float(scene.margin), mp.inside
        lp.cut = np.full(len(mp.pair), lp.margin)
        lp.body = np.array([s.body for s in meshes], np.int64)
        rows = np.concatenate([[0], np.cumsum([p[4] for p in mp.pairs])])
        size = -(-np.diff(rows) // _PAD) * _PAD                 # each pair's block padded with NaN
        lp.rows = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
        lp.hull = np.full((3, lp.rows[-1]), np.nan)
        for s, a, b, at in zip(meshes, rows[:-1], rows[1:], lp.rows[:-1]):
            lp.hull[:, at:at + b - a] = (mp.hull[a:b] @ s.R.T + s.p).T
        lp.spheres = np.ascontiguousarray(np.c_[[s.R @ c + s.p for s, c in zip(meshes, mp.spheres[:, :3])],
                                                mp.spheres[:, 3], _boxes(lp.hull, lp.rows)])
        lp.axes, lp.pb = np.ascontiguousarray(mp.axes), np.ascontiguousarray(mp.pb)
        par = np.array([lp.margin, PATCH_DEPTH, SLACK, SPAN, SPAN ** 2])
        ints = lambda x: ctypes.cast(x.ctypes.data, ctypes.POINTER(ctypes.c_double))     # noqa: E731 (int64 tables)
        lp._at = (ints(lp.body), _at(lp.axes), _at(lp.pb), _at(lp.hull), ints(lp.rows), _at(lp.spheres),
                  _at(par), _at(lp.cut), par)
        lp._step = None                                     # (mesh_plane_step_rows's, made when first asked)
    scene.cache[key] = lp
    return lp


def _boxes(hull, rows):
    """(P, 6): each pair's box about its hull vertices, ``[centre (3), half sizes (3)]`` in the body's
    frame, of the columns ``hull`` (3, N) (NaN: padding) in the blocks ``rows`` (P + 1,); the half
    sizes a little larger than the vertices' spread, so that the box holds every vertex after rounding."""
    out = np.zeros((len(rows) - 1, 6))
    for k in range(len(rows) - 1):
        V = hull[:, rows[k]:rows[k + 1]]
        lo, hi = np.nanmin(V, 1), np.nanmax(V, 1)
        out[k, :3], out[k, 3:] = (lo + hi) / 2, (hi - lo) / 2 * (1 + 1e-12) + 1e-12
    return out


def mesh_plane_loop_rows(scene, lp, q, cut=None, spin=None, ahead=None, out=None):
    """The rows (P * MAX_PATCH_POINTS, 11) (:func:`~sparsedyn.collision_candidates_near`'s columns,
    the point in its body's frame) of the plan ``lp``'s pairs at ``q`` (nq,) (float), each pair's
    patch within its cutoff ``cut`` (P,) [m] (None: the margin) in its first rows, the other rows'
    distance +inf: those of :func:`~sparsedyn.contact.scene_data.mesh_plane_rows` (module
    docstring); ``spin`` (P, 3) or None as there, or ``ahead`` ``(v, dt)``: a step's, each pair's
    rotation then :func:`~sparsedyn.contact.look_ahead.pair_spins`' computed in the loop (unknown
    where ``v`` or ``dt`` is not finite); ``out``: a table of those rows' shape to write them into (a new one:
    None; C-contiguous float).  None where the routine cannot be built (no C compiler)."""
    f = _routine()
    if f is None:
        return None
    model = scene.model
    calls = native_calls(model) or _NONE
    fk = calls.get(_FK)
    R, o = fk(q) if fk is not None else forward_kinematics(model, q)
    vel, dt = None, 0.0
    if ahead is not None:
        v, dt = np.asarray(ahead[0], float), ahead[1]
        bv = calls.get(_BODY_VELOCITIES)
        V = bv(q, v) if bv is not None and v.shape == (model.nv,) else body_velocities(model, q, v)
        if isinstance(dt, (float, int, np.floating, np.integer)) and 0 < dt < np.inf and math.isfinite(V.sum()):
            vel, dt = _at(V), float(dt)
        spin = None
    P = len(lp.pair)
    if out is None:
        out = np.empty((P * MAX_PATCH_POINTS, NEAR_COLUMNS))
    body, axes, pb, hull, rows, spheres, par, margin, _ = lp._at
    if f(P, body, _to(R), _to(o), axes, pb, hull, rows, spheres, margin if cut is None else _at(cut),
         None if spin is None else _at(spin), vel, dt, par, _to(out)) < 0:
        raise MemoryError(f"mesh-plane contacts: no memory for the workspace of {int(np.diff(lp.rows).max())} "
                          f"hull vertices")
    return out


def mesh_plane_rows_call(scene, lp, out):
    """:func:`mesh_plane_loop_rows` of the plan ``lp``'s pairs at the margin, bound once into ``out``
    (P * MAX_PATCH_POINTS, 11) (C-contiguous float64, kept alive by the call): a function of ``q``
    (nq,) float64 that writes the rows into ``out`` and returns it; the same routine on the same
    numbers, with the model's native forward kinematics (once built: until then
    :func:`mesh_plane_loop_rows` itself) written into buffers of its own and every address handed to
    the routine made once (a ctypes function of its own, untyped: no conversion per argument).  None
    where the routine is not built or ``out`` is not such a table."""
    f = _routine()
    if f is None or not (out.flags.c_contiguous and out.flags.writeable and out.dtype == np.float64
                         and out.shape == (len(lp.pair) * MAX_PATCH_POINTS, NEAR_COLUMNS)):
        return None
    g = c_library(SOURCE)["sd_mesh_plane_rows"]     # (a new function object: its own argument types)
    g.restype = ctypes.c_longlong
    void = ctypes.c_void_p
    addr = lambda p: void(ctypes.cast(p, void).value if isinstance(p, ctypes._Pointer)  # noqa: E731
                          else ctypes.addressof(p))
    body, axes, pb, hull, rows, spheres, par, margin, _ = lp._at
    head = (ctypes.c_longlong(len(lp.pair)), addr(body))
    tail = tuple(addr(x) for x in (axes, pb, hull, rows, spheres, margin)) + (None, None, ctypes.c_double(0.0),
                                                                             addr(par), void(out.ctypes.data))
    held, model = [], scene.model                  # [fk, its buffers (R, o), their addresses] once built

    def call(q):
        if not held:
            fk = (native_calls(model) or _NONE).get(_FK)
            if fk is None:
                return mesh_plane_loop_rows(scene, lp, q, out=out)
            bufs = tuple(np.array(x, float, order="C") for x in fk(q))
            held[:] = fk, bufs, tuple(void(x.ctypes.data) for x in bufs)
        fk, bufs, at = held
        got = fk(q, out=bufs)
        if got[0] is not bufs[0] or got[1] is not bufs[1]:
            bufs[0][...], bufs[1][...] = got
        if g(*head, *at, *tail) < 0:
            raise MemoryError(f"mesh-plane contacts: no memory for the workspace of {int(np.diff(lp.rows).max())} "
                              f"hull vertices")
        return out
    return call


def mesh_plane_step_rows(scene, lp, q, v, dt, rho):
    """``(cutoff, rows)`` of a step of ``dt`` (a float > 0) from ``q`` (nq,), ``v`` (nv,) (float64
    arrays): each scene pair's look-ahead (Q,) [m] (:func:`~sparsedyn.contact.look_ahead.pair_cutoffs`'
    bound, its bodies' reach ``rho`` (nb,) :func:`~sparsedyn.contact.look_ahead.body_reach`'s, computed
    term by term as the collision kernel computes it) and :func:`mesh_plane_loop_rows`
    of the plan ``lp``'s pairs with those cutoffs and ``ahead=(v, dt)``, in one call of the routine;
    None where it cannot be built, the model's kinematics are not built natively yet, or the bodies'
    velocities overflow (then :func:`~sparsedyn.contact.look_ahead.pair_cutoffs`); a ``v`` with a NaN
    is refused by name (as :func:`mesh_plane_loop_rows` refuses it)."""
    f = _routine() and _ROUTINE[2]
    calls = native_calls(scene.model) or _NONE
    fk, bv = calls.get(_FK), calls.get(_BODY_VELOCITIES)
    if f is None or fk is None or bv is None:
        return None
    V = bv(q, v)
    if not math.isfinite(V.sum()):
        return None
    R, o = fk(q)
    if lp._step is None:                           # every scene pair's bodies (-1: a world shape), the reach
        ends = np.ascontiguousarray(np.array([s.body for s in scene.shapes], np.int64)[scene.index].reshape(-1, 2))
        pair, rho = np.ascontiguousarray(lp.pair, np.int64), np.array(rho, float)
        ints = lambda x: ctypes.cast(x.ctypes.data, ctypes.POINTER(ctypes.c_double))     # noqa: E731 (int64 tables)
        lp._step = (len(ends), ints(ends), _at(rho), ints(pair), (ends, pair, rho))
    Q, ends, rho, pair, _ = lp._step
    body, axes, pb, hull, rows, spheres, par, _, _ = lp._at
    cut, out = np.empty(Q), np.empty((len(lp.pair) * MAX_PATCH_POINTS, NEAR_COLUMNS))
    if f(Q, ends, rho, _to(cut), len(lp.pair), pair, body, _to(R), _to(o), axes, pb, hull, rows, spheres, _to(V), dt,
         par, _to(out)) < 0:
        raise MemoryError(f"mesh-plane contacts: no memory for the workspace of {int(np.diff(lp.rows).max())} "
                          f"hull vertices")
    return cut, out


def _to(x):
    """:func:`_at` of a new float array (the kernels' results, those made here): its own buffer."""
    try:
        return _FROM(x)
    except (TypeError, ValueError):                # (read-only or not contiguous: a copy)
        return _at(x)


_FROM = ctypes.c_double.from_buffer


def mesh_plane_loop_hits(scene, lp, q, cutoff=None, spin=None):
    """:func:`~sparsedyn.collide`'s hits ``(k, d, w_a, w_b, n)`` of the plan ``lp``'s pairs at ``q``
    (nq,) (float), by pair (each pair's in its vertices' order), those of the NumPy road
    (:func:`~sparsedyn.contact.reduction.mesh_plane_patches`) to rounding: each pair's patch within
    its cutoff, ``cutoff`` (scene pairs,) [m] or None (the scene's margin); ``spin`` (scene pairs, 3)
    or None (:func:`~sparsedyn.contact.collision.collide_within`'s).  None where the routine cannot be
    built."""
    rows = mesh_plane_loop_rows(scene, lp, q, None if cutoff is None else cutoff.take(lp.pair),
                                None if spin is None else spin.take(lp.pair, 0))
    if rows is None:
        return None
    sel = np.flatnonzero(rows[:, 0] != np.inf)
    r = rows.take(sel, 0)
    d, x, n = r[:, 0], r[:, 1:4], r[:, 4:7]
    h = d[:, None] / 2 * n
    return lp.pair.take(sel // MAX_PATCH_POINTS), d, x + h, x - h, n
