"""A point and a capsule against a box without branches: the closed forms the collision kernel
traces, and the NumPy road's capsule-box closest pair (:func:`capsule_box`).

Each function works on 3-vectors given as lists of three components, each component a number, a
traced scalar (the compiler's) or an array over ``k`` pairs (NumPy's vectorised road), and a
rotation as a list of rows; a choice is a product with a 0/1 step (``_step``), so one program
serves the compiled kernel and the NumPy road, the same arithmetic on both.

* :func:`point_box`: a sphere against a box, :func:`~sparsedyn.contact.closed_forms.sphere_box`'s
  answer (a centre inside the box leaves through the nearest face, the first of equal ones);
* :func:`segment_box`: a capsule against a box, coal's ``distance`` of the two (the closest pair
  of points, signed): apart, the least of the distances of the segment's ends to the box and of the
  segment to the box's twelve edges (the distance of a segment and a convex polytope is one of
  those: where the segment's closest point is inside it and the box's inside a face, the segment
  is parallel to that face and the same distance is held at an end or over an edge); the segment
  inside the box, the separating axis test over the box's three face axes and the three cross
  products of the segment with the box's edges (the faces of the two shapes' Minkowski difference),
  the witness points those of coal's EPA on that facet: on a face axis the segment's deeper end and
  its projection on the face, on a cross axis the closest points of the segment and the box's edge
  farthest along the normal.  The capsule's radius then moves the witness point on it along the
  normal (coal's swept-sphere radius).
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .collision_coal import SAME_DEPTH, SAME_POINT
from .friction_problem import _TINY, _step

__all__ = ["point_box", "segment_box", "capsule_box", "box_candidates", "merge_close", "covered_ends", "EDGE_PARALLEL",
           "FACE_TIE"]

#: A cross product of the segment and a box edge shorter than this (the sine of their angle) is no
#: separating axis (its direction is rounding).
EDGE_PARALLEL = 1e-12
#: A face axis is the penetration's unless a cross axis overlaps less by more than this [m].
FACE_TIE = 1e-12


def _pick(c, a, b):
    """``a`` where ``c`` is 1, ``b`` where it is 0 (exact: the other term is a product with 0)."""
    return c * a + (1.0 - c) * b


def _pickv(c, a, b):
    return [_pick(c, x, y) for x, y in zip(a, b)]


def _dot(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


def _sub(x, y):
    return [x[0] - y[0], x[1] - y[1], x[2] - y[2]]


def _axpy(a, x, y):
    """``y + a x``."""
    return [y[0] + a * x[0], y[1] + a * x[1], y[2] + a * x[2]]


def _abs(x):
    return bk.copysign(x, 1.0)


def _sign(x):
    """-1 where ``x < 0``, else 1 (``np.where(x < 0, -1, 1)`` but at -0.0: -1)."""
    return 2.0 * _step(x) - 1.0


def _clip(x, lo, hi):
    x = _pick(_step(x - lo), x, lo)
    return _pick(_step(hi - x), x, hi)


def _clip01(x):
    """``_clip(x, 0, 1)`` in fewer operations (a product with 0 or 1 stays exact)."""
    x = _step(x) * x
    s = _step(1.0 - x)
    return s * x + (1.0 - s)


def _to_box(R, x):
    """``R^T x``: a world vector in the box's axes (``R`` rows of the box's rotation)."""
    return [R[0][i] * x[0] + R[1][i] * x[1] + R[2][i] * x[2] for i in range(3)]


def _to_world(R, x):
    return [R[i][0] * x[0] + R[i][1] * x[1] + R[i][2] * x[2] for i in range(3)]


def point_box(c, r, R, p, h):
    """A sphere of centre ``c`` and radius ``r`` against the box of rotation ``R``, centre ``p`` and
    half extents ``h`` (world): ``(d, w_a, w_b, n)``, ``n`` from the box towards the sphere."""
    x = _to_box(R, _sub(c, p))
    y = [_clip(x[i], -h[i], h[i]) for i in range(3)]
    w = _sub(x, y)
    L = bk.sqrt(_dot(w, w))
    inside = 1.0 - _step(L - _TINY)
    depth = [h[i] - _abs(x[i]) for i in range(3)]
    # the face of least depth, the first of equal ones (np.argmin's)
    c1 = 1.0 - _step(depth[1] - depth[0])
    least = _pick(c1, depth[1], depth[0])
    c2 = 1.0 - _step(depth[2] - least)
    least = _pick(c2, depth[2], least)
    sel = [(1.0 - c1) * (1.0 - c2), c1 * (1.0 - c2), c2]
    sign = _sign(sel[0] * x[0] + sel[1] * x[1] + sel[2] * x[2])
    n_in = [sel[i] * sign for i in range(3)]
    on_face = [_pick(sel[i], sign * h[i], x[i]) for i in range(3)]
    n = _pickv(inside, n_in, [w[i] / _pick(inside, 1.0, L) for i in range(3)])
    yb = _pickv(inside, on_face, y)
    d = _pick(inside, -least, L) - r
    nw = _to_world(R, n)
    return d, _axpy(-r, nw, c), _axpy(1.0, _to_world(R, yb), p), nw


def _segments(P0, d1, Q0, d2):
    """The parameters ``(s, t)`` in [0, 1] of the closest points ``P0 + s d1``, ``Q0 + t d2`` of two
    segments (Ericson, "Real-Time Collision Detection", 2005, section 5.1.9; parallel: ``s = 0``), as
    the collision kernel's capsule pair computes them."""
    r = _sub(P0, Q0)
    a, e, f, c, b = _dot(d1, d1) + _TINY, _dot(d2, d2) + _TINY, _dot(d2, r), _dot(d1, r), _dot(d1, d2)
    den = a * e - b * b
    par = _step(1e-12 * a * e - den)
    s = (1.0 - par) * _clip01((b * f - c * e) / _pick(par, 1.0, den))
    t = (b * s + f) / e
    below, above = 1.0 - _step(t), 1.0 - _step(1.0 - t)
    s = _pick(below, _clip01(-c / a), _pick(above, _clip01((b - c) / a), s))
    return s, _clip01(t)


#: The box's twelve edges in its axes: the axis an edge runs along and the signs of its start's
#: other two coordinates (its start at ``-h`` along that axis).
_EDGES = [(i, s, t) for i in range(3) for s in (-1.0, 1.0) for t in (-1.0, 1.0)]


def _apart(P0, P1, D, h):
    """The closest pair ``(x, y, L^2)`` of the segment ``P0 + s D`` (``P1`` its other end) and the box
    of half extents ``h`` about the origin, all in the box's axes: the least of its ends' and its
    edges' (the first of equal ones)."""
    best = x = y = None
    for e in (P0, P1):
        ye = [_clip(e[i], -h[i], h[i]) for i in range(3)]
        w = _sub(e, ye)
        L2 = _dot(w, w)
        if best is None:
            best, x, y = L2, e, ye
            continue
        c = 1.0 - _step(L2 - best)
        best, x, y = _pick(c, L2, best), _pickv(c, e, x), _pickv(c, ye, y)
    for i, s, t in _EDGES:
        j, k = (i + 1) % 3, (i + 2) % 3
        Q0 = [0.0, 0.0, 0.0]
        Q0[i], Q0[j], Q0[k] = -h[i], s * h[j], t * h[k]
        D2 = [0.0, 0.0, 0.0]
        D2[i] = 2.0 * h[i]
        sp, tq = _segments(P0, D, Q0, D2)
        xe, ye = _axpy(sp, D, P0), _axpy(tq, D2, Q0)
        w = _sub(xe, ye)
        L2 = _dot(w, w)
        c = 1.0 - _step(L2 - best)
        best, x, y = _pick(c, L2, best), _pickv(c, xe, x), _pickv(c, ye, y)
    return x, y, best


def _deep(a0, u, ha, P0, P1, D, h):
    """The separating axis test of the segment (centre ``a0``, unit axis ``u``, half length ``ha``; ends
    ``P0``, ``P1``, ``D = P1 - P0``) and the box of half extents ``h`` about the origin, in the box's
    axes: ``(least overlap, n, w_segment, w_box)`` (module docstring; ``n`` from the box towards the
    segment)."""
    # the face axes, then the segment crossed with the box's axes: (0, u2, -u1), (-u2, 0, u0), (u1, -u0, 0)
    ov = [h[i] + ha * _abs(u[i]) - _abs(a0[i]) for i in range(3)]
    cross = [[0.0 * u[0], u[2], -u[1]], [-u[2], 0.0 * u[0], u[0]], [u[1], -u[0], 0.0 * u[0]]]
    axes = []
    for j in range(3):
        L = bk.sqrt(_dot(cross[j], cross[j]))
        flat = 1.0 - _step(L - EDGE_PARALLEL)
        a = [x / _pick(flat, 1.0, L) for x in cross[j]]
        axes.append(a)
        o = h[0] * _abs(a[0]) + h[1] * _abs(a[1]) + h[2] * _abs(a[2]) - _abs(_dot(a0, a))
        ov.append(_pick(flat, 1e300, o))
    # the least face overlap and the least cross one (the first of equal ones), a face's unless a cross
    # axis is less by FACE_TIE
    sel = [1.0, 0.0 * ov[0], 0.0 * ov[0]]
    least = ov[0]
    for i in (1, 2):
        c = 1.0 - _step(ov[i] - least)
        least = _pick(c, ov[i], least)
        sel = [(1.0 - c) * x for x in sel]
        sel[i] = c
    cs = [1.0, 0.0 * ov[0], 0.0 * ov[0]]
    lc = ov[3]
    for i in (1, 2):
        c = 1.0 - _step(ov[3 + i] - lc)
        lc = _pick(c, ov[3 + i], lc)
        cs = [(1.0 - c) * x for x in cs]
        cs[i] = c
    edge = 1.0 - _step(lc - (least - FACE_TIE))
    fn = [sel[i] * _sign(a0[i]) for i in range(3)]
    ca = [cs[0] * axes[0][i] + cs[1] * axes[1][i] + cs[2] * axes[2][i] for i in range(3)]
    cn = [x * _sign(_dot(a0, ca)) for x in ca]
    n = _pickv(edge, cn, fn)
    depth = _pick(edge, lc, least)
    # a face: the segment's deeper end and its projection on the face
    up = 1.0 - _step(_dot(n, u))                                  # the upper end is deeper
    e = _pickv(up, P1, P0)
    # an edge: the box's edge along the cross axis' box axis, farthest along n
    Q0 = [_pick(cs[k], -h[k], _sign(n[k]) * h[k]) for k in range(3)]
    D2 = [cs[k] * (2.0 * h[k]) for k in range(3)]
    s, t = _segments(P0, D, Q0, D2)
    xs, yb = _axpy(s, D, P0), _axpy(t, D2, Q0)
    return depth, n, _pickv(edge, xs, e), _pickv(edge, yb, _axpy(depth, n, e))


def segment_box(pa, u, ha, ra, R, p, h):
    """A capsule of centre ``pa``, unit axis ``u``, half length ``ha`` and radius ``ra`` against the box
    of rotation ``R`` (rows), centre ``p`` and half extents ``h`` (world): ``(d, w_a, w_b, n)``, coal's
    ``distance`` of the two (module docstring), ``n`` from the box towards the capsule."""
    a0, ul = _to_box(R, _sub(pa, p)), _to_box(R, u)
    P0, P1 = _axpy(-ha, ul, a0), _axpy(ha, ul, a0)
    D = _sub(P1, P0)
    x, y, L2 = _apart(P0, P1, D, h)
    depth, nd, xd, yd = _deep(a0, ul, ha, P0, P1, D, h)
    deep = 1.0 - _step(-depth)                                    # every axis overlaps: the segment is inside
    L = bk.sqrt(L2)
    pos = _step(L - _TINY)
    na = _pickv(pos, [(x[i] - y[i]) / _pick(pos, L, 1.0) for i in range(3)], nd)
    n = _pickv(deep, nd, na)
    xs, yb = _pickv(deep, xd, x), _pickv(deep, yd, y)
    d = _pick(deep, -depth, L) - ra
    nw = _to_world(R, n)
    return d, _axpy(-ra, nw, _axpy(1.0, _to_world(R, xs), p)), _axpy(1.0, _to_world(R, yb), p), nw


def _columns(x):
    return [x[:, i] for i in range(3)]


def capsule_box(pa, ua, ha, ra, Rb, pb, hb):
    """Capsules of centres ``pa``, unit axes ``ua`` (k, 3), half lengths ``ha`` and radii ``ra`` (k,) and
    boxes of rotations ``Rb`` (k, 3, 3), centres ``pb`` and half extents ``hb`` (k, 3): their signed
    distances (k,) and closest pairs ``w_a``, ``w_b`` (k, 3) and unit normals from the box towards the
    capsule (k, 3), coal's ``distance`` in closed form (:func:`segment_box`)."""
    R = [[Rb[:, i, j] for j in range(3)] for i in range(3)]
    d, wa, wb, n = segment_box(_columns(pa), _columns(ua), ha, ra, R, _columns(pb), _columns(hb))
    stack = lambda v: np.stack(np.broadcast_arrays(*v), -1)      # noqa: E731
    return np.asarray(d, float), stack(wa), stack(wb), stack(n)


#: A capsule's closest pair to a box is left out of its candidates where an end sphere is as deep
#: but for this [m] (collide's rule: coal's tolerance's, it lies on the face the ends rest on).
_SAME_DEPTH = SAME_DEPTH


def box_candidates(kind_a, Ra, pa, sa, Rb, pb, sb):
    """The collision kernel's candidates ``[(d, w_a, w_b, n)]`` (3-vectors as arrays of ``Rb``'s dtype)
    of a sphere or a capsule ``kind_a`` of pose ``(Ra, pa)`` and size ``sa`` (the
    :class:`~sparsedyn.Shape` vocabulary) against a box of pose ``(Rb, pb)`` and edge lengths ``sb``:
    a sphere's one (:func:`point_box`); a capsule's closest pair (:func:`segment_box`, its distance
    1e300 where an end is as deep, as :func:`~sparsedyn.collide` leaves it out) and its two end
    spheres (``capsule_box_ends``'s), in collide's order."""
    R = [[Rb[i, j] for j in range(3)] for i in range(3)]
    h = [sb[0] / 2, sb[1] / 2, sb[2] / 2]
    p, c = [pb[i] for i in range(3)], [pa[i] for i in range(3)]
    vec = lambda x: np.array(x, dtype=Rb.dtype)                  # noqa: E731
    if kind_a == "sphere":
        d, wa, wb, n = point_box(c, sa[0], R, p, h)
        return [(d, vec(wa), vec(wb), vec(n))]
    u, ha, ra = [Ra[i, 2] for i in range(3)], sa[1] / 2, sa[0]
    ends = [point_box(_axpy(s * ha, u, c), ra, R, p, h) for s in (-1.0, 1.0)]
    d, wa, wb, n = segment_box(c, u, ha, ra, R, p, h)
    first = 1.0 - _step(ends[1][0] - ends[0][0])
    deepest = _pick(first, ends[1][0], ends[0][0])
    d = _pick(_step(d + _SAME_DEPTH - deepest), 1e300, d)
    ends = covered_ends(d, wa, n, ends, ra)
    return [(x, vec(y), vec(z), vec(m)) for x, y, z, m in [(d, wa, wb, n)] + ends]


def covered_ends(d, wa, n, ends, ra):
    """A capsule's end spheres' hits ``ends`` ``[(d, w_a, w_b, n)]`` against a box, those its closest pair
    ``(d, w_a, n)`` (kept: ``d`` not 1e300) covers at distance 1e300: an end whose centre lies within
    the radius ``ra`` of the closest pair's point on the segment (``w_a + ra n``).

    The closest pair is kept only where it is deeper than both ends, so the segment's distance to the
    box is least inside the segment: the capsule crosses an edge or a corner of the box.  An end within
    ``ra`` of that point touches the same feature (the nearest points of the box to two centres are no
    farther apart than the centres) through the inner side of its sphere, which lies inside the
    cylinder: not a second support of the capsule but the same contact again, a fraction of a radius
    away with a normal turned by about that fraction (a foot's capsule over a stair's edge: 1.3 mm and
    0.05 rad), which leaves the contact problem nearly degenerate.  The closest pair, the deepest hit,
    stays; an end farther along the segment is a second support and stays."""
    x = _axpy(ra, n, wa)
    out = []
    for de, wae, wbe, ne in ends:
        w = _sub(x, _axpy(ra, ne, wae))
        cover = (1.0 - _step(_dot(w, w) - ra * ra)) * (1.0 - _step(d - de))
        out.append((_pick(cover, 1e300, de), wae, wbe, ne))
    return out


def merge_close(cands):
    """The candidates ``[(d, w_a, w_b, n)]`` of one pair with those whose ``w_a`` is nearer than
    ``SAME_POINT`` to a deeper one's (or an equally deep earlier one's) at distance 1e300:
    :func:`~sparsedyn.collide`'s one hit per point (a box's corner that is the closest point of the
    box to a capsule's segment and to its end: one hit on the box, the deeper)."""
    out = []
    for i, (d, wa, wb, n) in enumerate(cands):
        keep = 1.0
        for j, (dj, waj, _, _) in enumerate(cands):
            if j == i:
                continue
            w = [wa[k] - waj[k] for k in range(3)]
            near = 1.0 - _step(_dot(w, w) - SAME_POINT * SAME_POINT)
            deeper = 1.0 - _step(dj - d) if j > i else _step(d - dj)
            keep = keep * (1.0 - near * deeper)
        out.append((_pick(keep, d, 1e300), wa, wb, n))
    return out
