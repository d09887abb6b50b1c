"""The closest points of two segments in C (Ericson, "Real-Time Collision Detection", 2005, section
5.1.9), the text that the hand-written units compile with theirs (:mod:`~sparsedyn.contact.box_box_c`,
:mod:`~sparsedyn.contact.heightfield_more_c`): ``sg_segments`` mirrors
:func:`~sparsedyn.contact.closed_forms._segments` operation by operation (parallel segments: the pair whose
first parameter is least)."""

__all__ = ["SEGMENTS"]

SEGMENTS = r"""
static inline double sg_unit(double x) { double y = x > 0.0 ? x : 0.0; return y < 1.0 ? y : 1.0; }
static inline double sg_dot(const double *x, const double *y) { return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]; }

/* closed_forms._segments: the parameters s, t in [0, 1] of the closest points P0 + s d1 and Q0 + t d2 */
static void sg_segments(const double *P0, const double *d1, const double *Q0, const double *d2, double *s, double *t)
{
  double r[3] = {P0[0] - Q0[0], P0[1] - Q0[1], P0[2] - Q0[2]};
  double a = sg_dot(d1, d1), b = sg_dot(d1, d2), c = sg_dot(d1, r), e = sg_dot(d2, d2), f = sg_dot(d2, r);
  double den = a * e - b * b;
  int parallel = den <= 1e-12 * a * e;
  double ss = parallel ? 0.0 : sg_unit((b * f - c * e) / den);
  double tt = (b * ss + f) / e;
  if (tt < 0) ss = sg_unit(-c / a); else if (tt > 1) ss = sg_unit((b - c) / a);
  *s = ss;
  *t = sg_unit(tt);
}
"""
