"""The curved pieces of :mod:`~sparsedyn.contact.heightfield_more_c`'s C routine (its text, compiled with
it): the triangles' edges against a cylinder's rims (:func:`~sparsedyn.contact.heightfield.segment_rims`:
Newton's iteration on the squared distance from a start on a grid of the edge), a grid point against an
ellipsoid (:func:`~sparsedyn.contact.ellipsoid.ellipsoid_closest`: Eberly, "Distance from a point to an
ellipse, an ellipsoid, or a hyperellipsoid", 2013) and an edge against it
(:func:`~sparsedyn.contact.ellipsoid_field.segment_ellipsoid`: the ellipse it makes seen along the edge),
each mirroring the NumPy road's operations in its order."""

__all__ = ["CURVED"]

CURVED = r"""
/* heightfield._rim_least of the part [lo, hi] of segment e (P0, D) against the rim of centre rc on cap sign of
   cylinder s (axis a), then collision_hfield._rim_edges' test */
static void mh_rim(const double *s, const double *e, const double *rc, double sign, const double *lines, double lo,
                   double hi, mh_out *o)
{
  const double *P0 = e, *a = lines + 8, g0 = lines[0], g1 = lines[1], *w0 = lines + 2, *w1 = lines + 5;
  double radius = s[1], half = s[2] / 2, D[3], W[3], best = INFINITY, sv = lo, tiny = DBL_MIN;
  for (int m = 0; m < 3; m++) D[m] = e[3 + m] - e[m];
  for (int q = 0; q < 9; q++) {
    double S = lo + (q / 8.0) * (hi - lo);
    for (int m = 0; m < 3; m++) W[m] = w0[m] + S * w1[m];
    double gg = g0 + S * g1, hw = sqrt(mh_dot(W, W)) - radius, f = gg * gg + hw * hw;
    if (f < best) { best = f; sv = S; }
  }
  double ww = mh_dot(w1, w1), w[3];
  for (int it = 0; it < 6; it++) {
    double g = g0 + sv * g1;
    for (int m = 0; m < 3; m++) w[m] = w0[m] + sv * w1[m];
    double h = sqrt(mh_dot(w, w));
    h = h > tiny ? h : tiny;
    double dh = mh_dot(w, w1) / h, df = g * g1 + (h - radius) * dh;
    double ddf = (g1 * g1 + dh * dh) + ((h - radius) * (ww - dh * dh)) / h;
    if (ddf > 0) { double t = sv - df / ddf; t = t > lo ? t : lo; sv = t < hi ? t : hi; }
  }
  double wb[3], u[3], wa[3], ev[3], n[3];
  double g = g0 + sv * g1;
  for (int m = 0; m < 3; m++) { wb[m] = P0[m] + sv * D[m]; w[m] = w0[m] + sv * w1[m]; }
  double h = sqrt(mh_dot(w, w)), hs = h > tiny ? h : tiny;
  for (int m = 0; m < 3; m++) { u[m] = w[m] / hs; wa[m] = rc[m] + radius * u[m]; ev[m] = wb[m] - wa[m]; }
  double dist = sqrt(mh_dot(ev, ev)), side = mh_dot(ev, u), cap = sign * mh_dot(ev, a);
  double tol = (64 * DBL_EPSILON) * (dist + radius);
  int outer = side >= -tol && cap >= -tol, inner = side <= tol && cap <= tol && cap >= -2 * half - tol;
  int inside = side + cap < 0, axial = cap <= side;
  double depth = axial ? cap : side, ds = dist > tiny ? dist : tiny;
  for (int m = 0; m < 3; m++) {
    double exit_n = axial ? -sign * a[m] : -u[m];
    n[m] = inside ? exit_n : -ev[m] / ds;
    if (inside) wa[m] = wb[m] + depth * exit_n;
  }
  double dh = mh_dot(w, w1) / hs, DD = mh_dot(D, D);
  int flat = fabs(g * g1 + (h - radius) * dh) <= 1.5e-8 * DD + (1.5e-8 * radius) * sqrt(DD);
  int hit = flat && lo < sv && sv < hi && (inside ? inner : outer);
  double d = inside ? depth : dist;
  if (hit && d < s[5] && mh_least(e + 6, n)) mh_put(o, s[23], 0.0, d, wa, wb, n);
}

/* heightfield.segment_rims of cylinder s's edges E (count n) and collision_hfield._rim_edges' test: the edges
   near each rim, the halves of each either side of its point nearest the axis, the first halves first */
static void mh_rims(const double *s, const double *E, long long n, mh_out *o)
{
  double a[3], half = s[2] / 2, radius = s[1], reach = s[5], tiny = DBL_MIN;
  mh_col(s + 11, 2, a);
  for (int part = 0; part < 2; part++)
    for (int rim = 0; rim < 2; rim++) {
      double sign = rim ? 1.0 : -1.0, rc[3];
      for (int m = 0; m < 3; m++) rc[m] = s[20 + m] + (sign * half) * a[m];
      for (long long i = 0; i < n; i++) {
        const double *e = E + 12 * i;
        double D[3], q[3], lines[11];
        for (int m = 0; m < 3; m++) { D[m] = e[3 + m] - e[m]; q[m] = rc[m] - e[m]; }
        double DD = mh_dot(D, D), t = mh_unit(mh_dot(q, D) / (DD > tiny ? DD : tiny));
        for (int m = 0; m < 3; m++) q[m] = (e[m] + t * D[m]) - rc[m];
        if (!(mh_dot(q, q) <= (radius + reach) * (radius + reach))) continue;
        for (int m = 0; m < 3; m++) q[m] = e[m] - rc[m];
        double g0 = mh_dot(q, a), g1 = mh_dot(D, a);
        lines[0] = g0; lines[1] = g1;
        for (int m = 0; m < 3; m++) {
          lines[2 + m] = q[m] - g0 * a[m]; lines[5 + m] = D[m] - g1 * a[m]; lines[8 + m] = a[m];
        }
        double w11 = mh_dot(lines + 5, lines + 5);
        double mm = mh_unit(-mh_dot(lines + 2, lines + 5) / (w11 > tiny ? w11 : tiny));
        mh_rim(s, e, rc, sign, lines, part ? mm : 0.0, part ? 1.0 : mm, o);
      }
    }
}

/* collision_hfield._lower_bounds of the point Y0 or the segment Y0-Y1 (the ellipsoid's frame, radii e) */
static double mh_bound(const double *Y0, const double *Y1, const double *e)
{
  double Z[3], D[3];
  for (int m = 0; m < 3; m++) Z[m] = Y0[m] / e[m];
  if (Y1) {
    for (int m = 0; m < 3; m++) D[m] = Y1[m] / e[m] - Z[m];
    double DD = mh_dot(D, D), t = mh_unit(-mh_dot(Z, D) / (DD > DBL_MIN ? DD : DBL_MIN));
    for (int m = 0; m < 3; m++) Z[m] = Z[m] + t * D[m];
  }
  double rho = sqrt(mh_dot(Z, Z)), least = e[0] < e[1] ? e[0] : e[1];
  least = least < e[2] ? least : e[2];
  return rho >= 1 ? least * (rho - 1) : -INFINITY;
}

/* ellipsoid.ellipsoid_closest of the point y of the ellipsoid (k = 3) or ellipse (k = 2) of semi-axes e
   (Eberly's Newton iteration on t, from the left of the root): the signed distance, x, u */
static double mh_closest(const double *y, const double *e, int k, double *x, double *u)
{
  double sign[3], b[3], z[3], a2[3], least = e[0], t = -INFINITY;
  for (int i = 1; i < k; i++) least = e[i] < least ? e[i] : least;
  for (int i = 0; i < k; i++) {
    sign[i] = y[i] < 0 ? -1.0 : 1.0; b[i] = e[i] * e[i];
    z[i] = fabs(y[i]) > DBL_EPSILON * least ? fabs(y[i]) : DBL_EPSILON * least;
    a2[i] = (e[i] * z[i]) * (e[i] * z[i]);
    t = e[i] * z[i] - b[i] > t ? e[i] * z[i] - b[i] : t;
  }
  for (int it = 0; it < 200; it++) {
    double F = 0.0, G = 0.0;
    for (int i = 0; i < k; i++) {
      double w = 1.0 / (t + b[i]);
      F = F + (a2[i] * w) * w; G = G + ((a2[i] * w) * w) * w;
    }
    double step = (F - 1.0) / (2.0 * G);
    if (!(t + step > t)) break;
    t = t + step;
  }
  double L = 0.0, S = 0.0;
  for (int i = 0; i < k; i++) { u[i] = (sign[i] * z[i]) / (t + b[i]); L = L + u[i] * u[i]; }
  L = sqrt(L);
  for (int i = 0; i < k; i++) { x[i] = b[i] * u[i]; S = S + (x[i] / e[i]) * (x[i] / e[i]); }
  S = sqrt(S);
  for (int i = 0; i < k; i++) { x[i] = x[i] / S; u[i] = u[i] / L; }
  return t * L;
}

/* ellipsoid_field.segment_ellipsoid of the edge e against the ellipsoid s (its frame's R, c; radii r), all in the
   field's frame: the line's distance, w_a, w_b, n (towards the ellipsoid) and the parameter of w_b along e */
static double mh_segment_ellipsoid(const double *s, const double *e, double *wa, double *wb, double *n,
                                   double *along)
{
  const double *R = s + 11, *c = s + 20, *r = s + 1;
  double q[3], p0[3], v[3], u[3], b1[3], b2[3], M[3], Mu[3], ax[3] = {0, 0, 0}, E1[3], E2[3], B[2][3];
  for (int m = 0; m < 3; m++) q[m] = e[m] - c[m];
  mh_rt(R, q, p0);
  for (int m = 0; m < 3; m++) q[m] = e[3 + m] - e[m];
  mh_rt(R, q, v);
  double length = sqrt(mh_dot(v, v));
  int k = 0;
  for (int m = 0; m < 3; m++) u[m] = v[m] / length;
  for (int m = 1; m < 3; m++) if (fabs(u[m]) < fabs(u[k])) k = m;
  ax[k] = 1.0;
  mh_cross(u, ax, b1);
  double lb = sqrt(mh_dot(b1, b1));
  for (int m = 0; m < 3; m++) b1[m] = b1[m] / lb;
  mh_cross(u, b1, b2);
  for (int m = 0; m < 3; m++) { M[m] = 1.0 / (r[m] * r[m]); Mu[m] = M[m] * u[m]; B[0][m] = b1[m]; B[1][m] = b2[m]; }
  double uMu = mh_dot(u, Mu), N[2][2];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      double bmb = ((B[i][0] * M[0]) * B[j][0] + (B[i][1] * M[1]) * B[j][1]) + (B[i][2] * M[2]) * B[j][2];
      N[i][j] = bmb - (mh_dot(B[i], Mu) * mh_dot(B[j], Mu)) / uMu;
    }
  double half = (N[0][0] - N[1][1]) / 2, mid = (N[0][0] + N[1][1]) / 2, root = hypot(half, N[0][1]);
  double theta = atan2(N[0][1], half) / 2, ct = cos(theta), st = sin(theta);
  for (int m = 0; m < 3; m++) { E1[m] = ct * b1[m] + st * b2[m]; E2[m] = ct * b2[m] - st * b1[m]; }
  double axes[2] = {1.0 / sqrt(mid + root), 1.0 / sqrt(mid - root > 0.0 ? mid - root : 0.0)};
  double y2[2] = {mh_dot(p0, E1), mh_dot(p0, E2)}, x2[2], u2[2], y[3], x[3], w[3], out[3];
  double d = mh_closest(y2, axes, 2, x2, u2);
  for (int m = 0; m < 3; m++) y[m] = x2[0] * E1[m] + x2[1] * E2[m];
  double my = mh_dot(Mu, y) / uMu, S = 0.0;
  for (int m = 0; m < 3; m++) { x[m] = y[m] - my * u[m]; S = S + (M[m] * x[m]) * x[m]; }
  S = sqrt(S);
  for (int m = 0; m < 3; m++) { x[m] = x[m] / S; q[m] = x[m] - p0[m]; }
  double a = mh_dot(q, u);
  for (int m = 0; m < 3; m++) { w[m] = p0[m] + a * u[m]; out[m] = M[m] * x[m]; }
  double lo = sqrt(mh_dot(out, out));
  for (int m = 0; m < 3; m++) out[m] = out[m] / lo;
  mh_r(R, x, wa);
  mh_r(R, w, wb);
  mh_r(R, out, n);
  for (int m = 0; m < 3; m++) { wa[m] = wa[m] + c[m]; wb[m] = wb[m] + c[m]; n[m] = -n[m]; }
  *along = a / length;
  return d;
}

/* collision_hfield._ellipsoid_hits of the ellipsoid s: its grid points, then its edges E (count n), that may
   come nearer than limit (collision_hfield._lower_bounds), their candidates within the cutoff */
static void mh_ellipsoid(const mh_field *F, const double *s, const double *E, long long n, double limit, mh_out *o)
{
  const double *R = s + 11, *c = s + 20;
  double reach = s[4] + s[5], P[3], q[3], Y0[3], Y1[3], x[3], u[3], wa[3], nn[3];
  for (long long r = (long long)s[7]; r < (long long)s[8]; r++)
    for (long long k = (long long)s[9]; k < (long long)s[10]; k++) {
      mh_point(F, r, k, P);
      for (int m = 0; m < 3; m++) q[m] = P[m] - c[m];
      if (!(mh_dot(q, q) < reach * reach)) continue;
      mh_rt(R, q, Y0);
      if (!(mh_bound(Y0, 0, s + 1) < limit)) continue;
      double d = mh_closest(Y0, s + 1, 3, x, u);
      mh_r(R, x, wa);
      mh_r(R, u, nn);
      for (int m = 0; m < 3; m++) { wa[m] = wa[m] + c[m]; nn[m] = -nn[m]; }
      if (d < s[5]) mh_put(o, s[23], 0.0, d, wa, P, nn);
    }
  for (long long i = 0; i < n; i++) {
    const double *e = E + 12 * i;
    for (int m = 0; m < 3; m++) q[m] = e[m] - c[m];
    mh_rt(R, q, Y0);
    for (int m = 0; m < 3; m++) q[m] = e[3 + m] - c[m];
    mh_rt(R, q, Y1);
    if (!(mh_bound(Y0, Y1, s + 1) < limit)) continue;
    double wb[3], along, d = mh_segment_ellipsoid(s, e, wa, wb, nn, &along);
    if (0 < along && along < 1 && mh_least(e + 6, nn) && d < s[5]) mh_put(o, s[23], 0.0, d, wa, wb, nn);
  }
}

"""
