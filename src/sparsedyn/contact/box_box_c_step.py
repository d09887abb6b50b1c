"""The C source of a step's rows of the pairs of two boxes (``sd_box_box_step``, used by
:mod:`~sparsedyn.contact.box_box_step`): the look-ahead of each pair, then the hits of
:mod:`~sparsedyn.contact.box_box_c`'s ``bb_pair`` within it, as rows in the step's columns.  Appended to
:data:`~sparsedyn.contact.box_box_c.SOURCE` (it calls that unit's static routines)."""

STEP = r"""
/* A step's rows of the pairs of two boxes (box_box_step.box_box_step_rows): `plan` int64 [P, S, NB, K, the
   offsets in `buf` of V, rho, cut, top, par, within, rows, src, E, r, md, s; gather (P, 30), each scene
   pair's two bodies (S, 2) (NB: the world), each box pair's scene pair (P), each row's scene pair (K)];
   `buf` float64: V (NB, 6) the bodies' spatial velocities [omega, v_o] (body axes), rho (NB) their
   reach, md [margin, dt], src the gather's source (sd_box_box_road's), E (P, 9), r (P, 3) each box a's
   placement in its body; out: cut (S) each scene pair's look-ahead (look_ahead.pair_cutoffs: the margin
   plus dt (|v_o| + |omega| rho) of its bodies; all the margin where one is not finite), top its largest
   (at least the margin), within (K) each row's pair's, and each box pair's BB_ROWS rows (11 columns:
   [d, (w_a + w_b) / 2, n, w_a in a's body, n . w_b], a free row's d = +inf, the others 0).  Returns 0 (a stage of
   the step's native call: scene_step's). */
SD_EXPORT int sd_box_box_step(const long long *plan, double *buf)
{
  long long P = plan[0], S = plan[1], NB = plan[2], K = plan[3];
  const double *V = buf + plan[4], *rho = buf + plan[5], *par = buf + plan[8], *src = buf + plan[11];
  const double *E = buf + plan[12], *r = buf + plan[13], *md = buf + plan[14];
  double *cut = buf + plan[6], *top = buf + plan[7], *within = buf + plan[9], *rows = buf + plan[10];
  double *s = buf + plan[15];
  const long long *gather = plan + 16, *body = gather + 30 * P, *bpair = body + 2 * S, *rpair = bpair + P;
  double margin = md[0], dt = md[1], total = 0.0, hi = margin;
  for (long long b = 0; b < NB; b++) {
    const double *x = V + 6 * b;
    double w = sqrt((x[0] * x[0] + x[1] * x[1]) + x[2] * x[2]), u = sqrt((x[3] * x[3] + x[4] * x[4]) + x[5] * x[5]);
    s[b] = u + w * rho[b];
    total += s[b];
  }
  s[NB] = 0.0;
  for (long long k = 0; k < S; k++) {
    cut[k] = isfinite(total) ? margin + dt * (s[body[2 * k]] + s[body[2 * k + 1]]) : margin;
    hi = fmax(hi, cut[k]);
  }
  *top = hi;
  for (long long i = 0; i < K; i++) within[i] = cut[rpair[i]];
  for (long long k = 0; k < P; k++) {
    sd_bb_box a, b;
    bb_gather(src, gather + 30 * k, &a, &b);
    sd_bb_hit h[BB_ROWS];
    double c = cut[bpair[k]];
    int n = bb_pair(&a, &b, c, c, par[0], par[1], h);
    const double *Ek = E + 9 * k, *rk = r + 3 * k;
    for (int q = 0; q < BB_ROWS; q++) {
      double *row = rows + 11 * ((long long)BB_ROWS * k + q);
      if (q < n) {
        double x[3];
        bb_in(&a, h[q].wa, x);                               /* w_a in a's axes, then in its body's */
        row[0] = h[q].d;
        for (int i = 0; i < 3; i++) {
          row[1 + i] = (h[q].wa[i] + h[q].wb[i]) / 2;
          row[4 + i] = h[q].n[i];
          row[7 + i] = ((Ek[3 * i] * x[0] + Ek[3 * i + 1] * x[1]) + Ek[3 * i + 2] * x[2]) + rk[i];
        }
        row[10] = (h[q].n[0] * h[q].wb[0] + h[q].n[1] * h[q].wb[1]) + h[q].n[2] * h[q].wb[2];
      } else {
        row[0] = INFINITY;
        for (int i = 1; i < 11; i++) row[i] = 0.0;
      }
    }
  }
  return 0;
}
"""
