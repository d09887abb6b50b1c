"""Lower bounds of two shapes' distance for the broad phase, in C: the text that
:mod:`~sparsedyn.contact.mesh_box_loop` compiles with its own (``sd_near_pairs``).  Each is a separating-axis
gap (the projections' gap along an axis is a lower bound of the distance):

* ``nb_obb_gap``: two oriented boxes (a shape's bounding box in its frame), their six face normals and nine
  cross products of their edges (Gottschalk, Lin and Manocha, "OBBTree: a hierarchical structure for rapid
  interference detection", 1996);
* ``nb_sphere_gap``: a sphere's distance to a box;
* ``nb_capsule_gap``: a capsule and a box, sphere, capsule, cylinder or ellipsoid, along two axes near the
  closest pair's normal at little cost: from the other shape's origin to the capsule segment's point nearest
  it, and for an ellipsoid of semi-axes ``e`` its normal at the segment's point nearest its centre in its
  unit-sphere frame.  Along a unit axis ``n`` the gap is the capsule's lowest point less the other shape's
  support ``h(n)`` (how far it reaches from its origin along ``n``), each from its bounding box's half
  extents: a box's ``sum e_i |n . R_i|``, a sphere's radius, a capsule's ``r + l |n . u|`` (``l`` its half
  length, ``u`` its axis), a cylinder's ``r sqrt(1 - (n . u)^2) + l |n . u|``, an ellipsoid's ``|diag(e) R^T
  n|``.  Where a capsule's and an ellipsoid's bounding boxes overlap and the shapes do not (a limp
  quadruped's shins folded under its torso), it parts most of them.
* ``nb_convex_gap``: two convex shapes of a support point each (a box, sphere, capsule, cylinder, ellipsoid, or
  a mesh's hull vertices): the Frank-Wolfe iteration on their Minkowski difference ``D = A - B`` (Gilbert,
  Johnson and Keerthi's distance algorithm with a segment for its simplex), whose every direction ``n`` gives
  the gap ``min_D n . y``, the lowest point of ``A`` along ``n`` less the highest of ``B``; it stops once a gap
  reaches the cutoff, or once a point of ``D`` is shorter than it (the pair is near), or after
  :data:`CONVEX_STEPS` steps.  Two hulls side by side (a humanoid's thighs, its pelvis over them) are parted
  where their bounding boxes overlap.
"""

__all__ = ["NEAR_BOUNDS", "KIND_CODES", "CONVEX_STEPS"]

#: The most steps of ``nb_convex_gap`` a pair: each costs a pass over the hulls' vertices.
CONVEX_STEPS = 8

#: The broad phase's code of each kind of shape whose support its bounding box gives (the C text's
#: ``NB_*``); any other kind is 0.
KIND_CODES = {"box": 1, "sphere": 2, "capsule": 3, "cylinder": 4, "ellipsoid": 5}

NEAR_BOUNDS = r"""
static inline double nb_abs(double x) { return x < 0 ? -x : x; }

/* The separating-axis gap of two oriented boxes (axes the columns of Ra, Rb; centres ca, cb; half extents ea, eb):
   the largest over the 15 axes of the projections' gap, a lower bound of their distance (-inf: none). */
static double nb_obb_gap(const double *Ra, const double *ca, const double *ea, const double *Rb, const double *cb,
                         const double *eb)
{
  double a[3][3], b[3][3], T[3], best = -__builtin_inf();
  for (int i = 0; i < 3; i++) {
    for (int r = 0; r < 3; r++) { a[i][r] = Ra[3 * r + i]; b[i][r] = Rb[3 * r + i]; }
    T[i] = cb[i] - ca[i];
  }
  for (int k = 0; k < 15; k++) {
    double L[3];
    if (k < 3) for (int r = 0; r < 3; r++) L[r] = a[k][r];
    else if (k < 6) for (int r = 0; r < 3; r++) L[r] = b[k - 3][r];
    else {
      const double *u = a[(k - 6) / 3], *v = b[(k - 6) % 3];
      L[0] = u[1] * v[2] - u[2] * v[1];
      L[1] = u[2] * v[0] - u[0] * v[2];
      L[2] = u[0] * v[1] - u[1] * v[0];
    }
    double n2 = L[0] * L[0] + L[1] * L[1] + L[2] * L[2];
    if (n2 < 1e-12) continue;                         /* parallel edges: a face axis holds that gap */
    double ra = 0.0, rb = 0.0;
    for (int i = 0; i < 3; i++) {
      ra += ea[i] * nb_abs(L[0] * a[i][0] + L[1] * a[i][1] + L[2] * a[i][2]);
      rb += eb[i] * nb_abs(L[0] * b[i][0] + L[1] * b[i][1] + L[2] * b[i][2]);
    }
    double g = (nb_abs(L[0] * T[0] + L[1] * T[1] + L[2] * T[2]) - ra - rb) / sqrt(n2);
    if (g > best) best = g;
  }
  return best;
}

/* The distance of a sphere (world centre c, radius r) from a box (axes the columns of Rb, centre pb, half
   extents e). */
static double nb_sphere_gap(const double *c, double r, const double *Rb, const double *pb, const double *e)
{
  double out = 0.0, top = -__builtin_inf();
  for (int j = 0; j < 3; j++) {
    double x = Rb[j] * (c[0] - pb[0]) + Rb[3 + j] * (c[1] - pb[1]) + Rb[6 + j] * (c[2] - pb[2]);
    double q = nb_abs(x) - e[j];
    if (q > 0) out += q * q;
    if (q > top) top = q;
  }
  return sqrt(out) + (top < 0 ? top : 0.0) - r;
}

/* The kinds of the broad phase's table (KIND_CODES): a box (its bounding box exact), and the shapes whose
   support the bounding box's half extents e give (centred at the shape's origin). */
enum { NB_OTHER, NB_BOX, NB_SPHERE, NB_CAPSULE, NB_CYLINDER, NB_ELLIPSOID };

/* How far a shape of kind `kind` (axes the columns of R, half extents e) reaches from its origin along the unit n. */
static double nb_support(long long kind, const double *R, const double *e, const double *n)
{
  double c[3];
  for (int i = 0; i < 3; i++) c[i] = (R[i] * n[0] + R[3 + i] * n[1]) + R[6 + i] * n[2];      /* R^T n */
  const double z = nb_abs(c[2]);
  switch (kind) {
    case NB_BOX: return (e[0] * nb_abs(c[0]) + e[1] * nb_abs(c[1])) + e[2] * z;
    case NB_SPHERE: return e[0];
    case NB_CAPSULE: return e[0] + (e[2] - e[0]) * z;
    case NB_CYLINDER: return e[0] * sqrt(1.0 - z * z < 0.0 ? 0.0 : 1.0 - z * z) + e[2] * z;
    case NB_ELLIPSOID:
      return sqrt((e[0] * c[0] * e[0] * c[0] + e[1] * c[1] * e[1] * c[1]) + e[2] * c[2] * e[2] * c[2]);
  }
  return __builtin_inf();
}

/* The point of the segment a b nearest the origin into y. */
static void nb_nearest(const double *a, const double *b, double *y)
{
  double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  double uu = (u[0] * u[0] + u[1] * u[1]) + u[2] * u[2];
  double t = uu > 0.0 ? -((a[0] * u[0] + a[1] * u[1]) + a[2] * u[2]) / uu : 0.0;
  t = t < 0.0 ? 0.0 : t > 1.0 ? 1.0 : t;
  for (int r = 0; r < 3; r++) y[r] = a[r] + t * u[r];
}

/* The separating-axis gap along m (any length; -inf where zero) of a capsule (segment a b relative to the other
   shape's origin, radius rc) and the other shape (kind, R, e): a lower bound of their distance. */
static double nb_axis_gap(const double *a, const double *b, double rc, long long kind, const double *R,
                          const double *e, const double *m)
{
  double l = sqrt((m[0] * m[0] + m[1] * m[1]) + m[2] * m[2]);
  if (!(l > 0.0)) return -__builtin_inf();
  double n[3] = {m[0] / l, m[1] / l, m[2] / l};
  double pa = (n[0] * a[0] + n[1] * a[1]) + n[2] * a[2], pb = (n[0] * b[0] + n[1] * b[1]) + n[2] * b[2];
  return ((pa < pb ? pa : pb) - rc) - nb_support(kind, R, e, n);
}

/* A lower bound of the distance of capsule c (pose Rc, pc; half extents ec: radius ec[0], its segment along its z
   axis, half length ec[2] - ec[0]) and shape o of a support kind: the separating-axis gaps along the line from o's
   origin to the segment's point nearest it and, for an ellipsoid, along its normal where the segment's point nearest
   its centre in its unit-sphere frame lies (the two axes nearest the closest pair's normal at little cost). */
static double nb_capsule_gap(const double *Rc, const double *pc, const double *ec, long long kind, const double *Ro,
                             const double *po, const double *eo)
{
  const double h = ec[2] - ec[0];
  double a[3], b[3], y[3];
  for (int r = 0; r < 3; r++) a[r] = (pc[r] - po[r]) - h * Rc[3 * r + 2], b[r] = (pc[r] - po[r]) + h * Rc[3 * r + 2];
  nb_nearest(a, b, y);
  double best = nb_axis_gap(a, b, ec[0], kind, Ro, eo, y);
  if (kind == NB_ELLIPSOID) {
    double as[3], bs[3], ys[3], m[3];
    for (int i = 0; i < 3; i++) {
      as[i] = ((Ro[i] * a[0] + Ro[3 + i] * a[1]) + Ro[6 + i] * a[2]) / eo[i];
      bs[i] = ((Ro[i] * b[0] + Ro[3 + i] * b[1]) + Ro[6 + i] * b[2]) / eo[i];
    }
    nb_nearest(as, bs, ys);
    for (int i = 0; i < 3; i++) ys[i] /= eo[i];                       /* the normal in o's frame, then the world's */
    for (int r = 0; r < 3; r++) m[r] = (Ro[3 * r] * ys[0] + Ro[3 * r + 1] * ys[1]) + Ro[3 * r + 2] * ys[2];
    double g = nb_axis_gap(a, b, ec[0], kind, Ro, eo, m);
    if (g > best) best = g;
  }
  return best;
}

/* The row of a hull's vertices (rows v0 .. v0 + nv - 1 of V; adjf, adj: each row's neighbours along the hull's
   edges, rows of V) highest along c (its frame), climbing to the highest neighbour while one is higher (on a convex
   polytope a vertex with no higher neighbour is the highest) from the higher of row at (a hull vertex: the last
   climb's end) and the hull's highest vertex along the axis nearest c (starts: along +x, -x, +y, -y, +z, -z). A
   hull without edges (flat, or degenerate: its every vertex kept) is searched whole. */
static long long nb_hull_top(const double *V, long long v0, long long nv, const long long *adjf, const long long *adj,
                             const long long *starts, const double *c, long long at)
{
  if (adjf[v0] == adjf[v0 + nv]) {
    double top = -__builtin_inf();
    for (long long v = v0; v < v0 + nv; v++) {
      const double h = (V[3 * v] * c[0] + V[3 * v + 1] * c[1]) + V[3 * v + 2] * c[2];
      if (h > top) top = h, at = v;
    }
    return at;
  }
  double h = (V[3 * at] * c[0] + V[3 * at + 1] * c[1]) + V[3 * at + 2] * c[2];
  const double a0 = nb_abs(c[0]), a1 = nb_abs(c[1]), a2 = nb_abs(c[2]);
  const int i = a0 >= a1 ? (a0 >= a2 ? 0 : 2) : a1 >= a2 ? 1 : 2;
  const long long w = starts[2 * i + (c[i] < 0.0)];              /* the hull's highest vertex along c's axis */
  const double hw = (V[3 * w] * c[0] + V[3 * w + 1] * c[1]) + V[3 * w + 2] * c[2];
  if (hw > h) h = hw, at = w;
  for (;;) {
    long long next = at;
    for (long long e = adjf[at]; e < adjf[at + 1]; e++) {
      const long long u = adj[e];
      const double hu = (V[3 * u] * c[0] + V[3 * u + 1] * c[1]) + V[3 * u + 2] * c[2];
      if (hu > h) h = hu, next = u;
    }
    if (next == at) return at;
    at = next;
  }
}

/* A shape for nb_convex_gap: its kind, pose R p, half extents e; a mesh (kind NB_OTHER): its hull's rows v0 .. v0 + nv
   - 1 of V (its frame) with their neighbours adjf, adj, its rows to start climbs from (starts), and the row the last
   climb ended on (at). */
typedef struct { long long kind; const double *R, *p, *e, *V; long long v0, nv; const long long *adjf, *adj, *starts;
                 long long at; } nb_shape;

/* The point of shape s farthest along the unit n into x (world); 0 where it has no support here (a plane, a height
   field, a mesh of no vertices). */
static int nb_support_point(nb_shape *s, const double *n, double *x)
{
  const double *R = s->R, *e = s->e;
  double c[3], y[3];
  for (int i = 0; i < 3; i++) c[i] = (R[i] * n[0] + R[3 + i] * n[1]) + R[6 + i] * n[2];      /* R^T n */
  const double z = c[2] < 0.0 ? -1.0 : 1.0;
  if (s->kind == NB_BOX) {
    for (int i = 0; i < 3; i++) y[i] = c[i] < 0.0 ? -e[i] : e[i];
  } else if (s->kind == NB_SPHERE || s->kind == NB_CAPSULE) {
    for (int i = 0; i < 3; i++) y[i] = e[0] * c[i];
    if (s->kind == NB_CAPSULE) y[2] += z * (e[2] - e[0]);
  } else if (s->kind == NB_CYLINDER) {
    const double t = sqrt(c[0] * c[0] + c[1] * c[1]);
    y[0] = t > 0.0 ? e[0] * c[0] / t : e[0], y[1] = t > 0.0 ? e[0] * c[1] / t : 0.0, y[2] = z * e[2];
  } else if (s->kind == NB_ELLIPSOID) {
    double w[3] = {e[0] * c[0], e[1] * c[1], e[2] * c[2]};
    const double t = sqrt((w[0] * w[0] + w[1] * w[1]) + w[2] * w[2]);
    if (!(t > 0.0)) return 0;
    for (int i = 0; i < 3; i++) y[i] = e[i] * w[i] / t;
  } else if (s->nv > 0) {
    s->at = nb_hull_top(s->V, s->v0, s->nv, s->adjf, s->adj, s->starts, c, s->at);
    for (int i = 0; i < 3; i++) y[i] = s->V[3 * s->at + i];
  } else {
    return 0;
  }
  for (int r = 0; r < 3; r++) x[r] = ((R[3 * r] * y[0] + R[3 * r + 1] * y[1]) + R[3 * r + 2] * y[2]) + s->p[r];
  return 1;
}

/* A lower bound of the distance of shapes a and b from the world centres ca, cb of their bounding spheres (the
   module docstring's Frank-Wolfe steps, at most `steps`); -inf where a shape has no support. */
static double nb_convex_gap(nb_shape *a, nb_shape *b, const double *ca, const double *cb, double top, int steps)
{
  double n[3] = {ca[0] - cb[0], ca[1] - cb[1], ca[2] - cb[2]}, m[3], sa[3], sb[3], x[3], best = -__builtin_inf();
  double l = sqrt((n[0] * n[0] + n[1] * n[1]) + n[2] * n[2]);
  if (!(l > 0.0)) n[0] = n[1] = 0.0, n[2] = l = 1.0;
  for (int r = 0; r < 3; r++) n[r] /= l, m[r] = -n[r];
  if (!nb_support_point(a, m, sa) || !nb_support_point(b, n, sb))
    return best;
  for (int r = 0; r < 3; r++) x[r] = sa[r] - sb[r];                  /* a point of D = A - B */
  for (int it = 0; it < steps; it++) {
    l = sqrt((x[0] * x[0] + x[1] * x[1]) + x[2] * x[2]);
    if (!(l >= top)) break;                                          /* a point of D within the cutoff: near */
    for (int r = 0; r < 3; r++) n[r] = x[r] / l, m[r] = -n[r];
    nb_support_point(a, m, sa);                                      /* A's lowest point along n */
    nb_support_point(b, n, sb);                                      /* B's highest */
    double d[3], g = 0.0, xd = 0.0, dd = 0.0;
    for (int r = 0; r < 3; r++) d[r] = (sa[r] - sb[r]) - x[r], g += n[r] * (sa[r] - sb[r]);
    if (g > best) best = g;
    if (best >= top) break;
    for (int r = 0; r < 3; r++) xd += x[r] * d[r], dd += d[r] * d[r];
    if (!(dd > 0.0) || !(xd < 0.0)) break;                           /* x is D's nearest point along its segment */
    const double t = -xd / dd < 1.0 ? -xd / dd : 1.0;
    for (int r = 0; r < 3; r++) x[r] += t * d[r];
  }
  return best;
}
"""
