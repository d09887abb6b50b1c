"""Closed-form signed distances of primitive shape pairs, vectorised over the pairs of one kind (what
:func:`~sparsedyn.collide` computes on the NumPy road): each function takes arrays over ``k`` pairs and
returns ``(d, w_a, w_b, n)``, the signed distances (negative: penetration), the witness points on
``a`` and on ``b`` (world) and the unit normals from ``b`` towards ``a``.  :data:`CLOSED_FORM` maps the
pairs of kinds with a closed form to their function and hits per pair; :data:`CLOSEST` the pairs whose
closest pair alone has one (two boxes: :func:`box_box`, a capsule and a box:
:func:`~sparsedyn.contact.box_pairs.capsule_box`, coal's ``distance`` without its GJK and EPA); and
:data:`FEATURES` the pairs whose closest pair is coal's or :data:`CLOSEST`'s, with the closed-form hits
added to it (a resting face's corners).
"""

from __future__ import annotations

import numpy as np

from ..model.spatial import cross3
from .box_pairs import capsule_box, covered_ends
from .collision_coal import SAME_DEPTH
from .ellipsoid import ellipsoid_sphere
from .reduction import mesh_plane_reduced

__all__ = ["sphere_sphere", "sphere_capsule", "capsule_capsule", "sphere_box", "sphere_plane", "capsule_plane",
           "sphere_cylinder", "ellipsoid_plane", "ellipsoid_box_face", "box_plane", "cylinder_plane", "box_face_axis",
           "box_box", "box_box_face", "box_box_corners", "capsule_box_ends", "mesh_plane", "CLOSED_FORM", "CLOSEST",
           "FEATURES", "ON_FACE"]


def _dot(x, y):
    return np.einsum("...i,...i->...", x, y)


def sphere_sphere(ca, ra, cb, rb):
    """Spheres of centres ``ca``, ``cb`` (k, 3) and radii ``ra``, ``rb`` (k,)."""
    w = ca - cb
    L = np.linalg.norm(w, axis=-1)
    n = np.where(L[:, None] > 0, w / np.where(L > 0, L, 1.0)[:, None], [0.0, 0.0, 1.0])
    return L - ra - rb, ca - ra[:, None] * n, cb + rb[:, None] * n, n


def sphere_capsule(ca, ra, pb, ub, hb, rb):
    """Sphere ``(ca, ra)`` and capsule of centre ``pb``, unit axis ``ub``, half length ``hb``, radius ``rb``."""
    t = np.clip(_dot(ca - pb, ub), -hb, hb)
    return sphere_sphere(ca, ra, pb + t[:, None] * ub, rb)


def _segments(P0, d1, Q0, d2):
    """The parameters ``(s, t)`` in [0, 1] of the closest points ``P0 + s d1`` and ``Q0 + t d2`` of two
    segments (arrays over leading axes, points last; Ericson, "Real-Time Collision Detection", 2005,
    section 5.1.9; parallel segments: the one pair whose ``s`` is least)."""
    r = P0 - Q0
    # the dot products of (d1, d2) with (d1, d2, r) in one product (the arrays are small: one call, not five)
    G = np.concatenate([d1[..., None, :], d2[..., None, :]], -2) @ \
        np.concatenate([d1[..., None], d2[..., None], r[..., None]], -1)
    a, b, c, e, f = G[..., 0, 0], G[..., 0, 1], G[..., 0, 2], G[..., 1, 1], G[..., 1, 2]
    den = a * e - b * b
    parallel = den <= 1e-12 * a * e
    s = np.where(parallel, 0.0, _unit((b * f - c * e) / np.where(parallel, 1.0, den)))
    t = (b * s + f) / e
    s = np.where(t < 0, _unit(-c / a), np.where(t > 1, _unit((b - c) / a), s))
    return s, _unit(t)


def _unit(x):
    """``x`` clipped to [0, 1] (``np.clip``'s value, without its dispatch: these arrays are small)."""
    return np.minimum(np.maximum(x, 0.0), 1.0)


def capsule_capsule(pa, ua, ha, ra, pb, ub, hb, rb):
    """Two capsules: the closest points of their segments (:func:`_segments`), then two spheres there."""
    P0, d1 = pa - ha[:, None] * ua, 2 * ha[:, None] * ua
    Q0, d2 = pb - hb[:, None] * ub, 2 * hb[:, None] * ub
    s, t = _segments(P0, d1, Q0, d2)
    return sphere_sphere(P0 + s[:, None] * d1, ra, Q0 + t[:, None] * d2, rb)


def sphere_box(ca, ra, Rb, pb, hb):
    """Sphere ``(ca, ra)`` and box of orientation ``Rb`` (k, 3, 3), centre ``pb``, half extents ``hb`` (k, 3).
    A centre inside the box leaves through the nearest face."""
    x = np.einsum("kji,kj->ki", Rb, ca - pb)              # the centre in the box's axes
    y = np.clip(x, -hb, hb)
    w = x - y
    L = np.linalg.norm(w, axis=-1)
    inside = L <= 0
    depth = hb - np.abs(x)
    i = np.argmin(depth, axis=-1)
    k = np.arange(len(x))
    sign = np.where(x[k, i] < 0, -1.0, 1.0)
    n_in = np.zeros_like(x)
    n_in[k, i] = sign
    on_face = x.copy()
    on_face[k, i] = sign * hb[k, i]
    n = np.where(inside[:, None], n_in, w / np.where(inside, 1.0, L)[:, None])
    yb = np.where(inside[:, None], on_face, y)
    d = np.where(inside, -depth[k, i], L) - ra
    n_w = np.einsum("kij,kj->ki", Rb, n)
    return d, ca - ra[:, None] * n_w, pb + np.einsum("kij,kj->ki", Rb, yb), n_w


def sphere_cylinder(ca, ra, Rb, pb, hb, rb):
    """Sphere ``(ca, ra)`` and solid cylinder of orientation ``Rb`` (k, 3, 3) (axis: its z), centre
    ``pb``, half length ``hb`` (k,) and radius ``rb`` (k,).  A centre outside takes the nearest point of
    the cylinder; a centre inside leaves through the nearer of the side and the caps (on the axis, with
    the side nearer: along the cylinder's x)."""
    x = np.einsum("kji,kj->ki", Rb, ca - pb)              # the centre in the cylinder's axes
    r = np.linalg.norm(x[:, :2], axis=-1)
    radial = np.where(r[:, None] > 0, x[:, :2] / np.where(r > 0, r, 1.0)[:, None], [1.0, 0.0])
    y = np.concatenate([np.where((r > rb)[:, None], radial * rb[:, None], x[:, :2]),
                        np.clip(x[:, 2:], -hb[:, None], hb[:, None])], 1)
    w = x - y
    L = np.linalg.norm(w, axis=-1)
    inside = (r <= rb) & (np.abs(x[:, 2]) <= hb)          # (decided on the coordinates: w is then exactly 0)
    up = np.where(x[:, 2] < 0, -1.0, 1.0)
    side = rb - r < hb - np.abs(x[:, 2])                    # (inside) the side nearer than the caps
    n_in = np.where(side[:, None], np.concatenate([radial, np.zeros((len(x), 1))], 1),
                    np.stack([np.zeros_like(up), np.zeros_like(up), up], 1))
    y_in = np.where(side[:, None], np.concatenate([radial * rb[:, None], x[:, 2:]], 1),
                    np.concatenate([x[:, :2], (up * hb)[:, None]], 1))
    n = np.where(inside[:, None], n_in, w / np.where(inside, 1.0, L)[:, None])
    d = np.where(inside, -np.minimum(rb - r, hb - np.abs(x[:, 2])), L) - ra
    n_w = np.einsum("kij,kj->ki", Rb, n)
    return d, ca - ra[:, None] * n_w, pb + np.einsum("kij,kj->ki", Rb, np.where(inside[:, None], y_in, y)), n_w


def _on_plane(x, r, nb, pb):
    """Points ``x`` (k, 3) with radii ``r`` against the planes ``(nb, pb)``."""
    h = _dot(x - pb, nb)
    return h - r, x - r[:, None] * nb, x - h[:, None] * nb, nb


def sphere_plane(ca, ra, nb, pb):
    """Sphere and the half-space below the plane through ``pb`` of unit normal ``nb``."""
    return _on_plane(ca, ra, nb, pb)


def ellipsoid_plane(Ra, pa, radii, nb, pb):
    """Ellipsoid of orientation ``Ra`` (k, 3, 3), centre ``pa`` and semi-axes ``radii`` (k, 3) (along its
    frame's axes) and the plane through ``pb`` of unit normal ``nb``: one hit, the ellipsoid's point
    farthest along ``-nb`` (its support point ``pa - Ra D^2 Ra^T nb / |D Ra^T nb|``, ``D = diag(radii)``)
    and that point's projection on the plane; the signed distance ``nb . (pa - pb) - |D Ra^T nb|``."""
    m = np.einsum("kji,kj->ki", Ra, nb) * radii                          # D R^T n
    h = np.linalg.norm(m, axis=-1)
    x = pa - np.einsum("kij,kj->ki", Ra, radii * m) / h[:, None]
    d = _dot(pa - pb, nb) - h
    return d, x, x - d[:, None] * nb, nb


def ellipsoid_box_face(Ra, pa, radii, Rb, pb, hb):
    """Ellipsoid (:func:`ellipsoid_plane`'s) and box of orientation ``Rb`` (k, 3, 3), centre ``pb``, half
    extents ``hb`` (k, 3): one hit, the ellipsoid's support point against the face whose plane it lies
    farthest beyond (the largest of the six signed distances: no other plane of the box separates more)
    where its projection on that plane lies on the face (the face is then the box's nearest feature: the
    pair's distance, the face's normal); its distance +inf elsewhere (an edge or a corner nearest)."""
    k = np.arange(len(pa))
    N = np.concatenate([Rb, -Rb], 2).swapaxes(1, 2)                      # (k, 6, 3): the faces' normals
    m = np.einsum("kji,kfj->kfi", Ra, N) * radii[:, None]                # D R^T n per face
    h = np.sqrt((m * m).sum(2))
    d = ((pa - pb)[:, None] * N).sum(2) - np.concatenate([hb, hb], 1) - h
    f = np.argmax(d, 1)
    n, d = N[k, f], d[k, f]
    x = pa - np.einsum("kij,kj->ki", Ra, radii * m[k, f]) / h[k, f][:, None]
    wb = x - d[:, None] * n
    on = np.abs(np.einsum("kji,kj->ki", Rb, wb - pb)) <= hb * (1 + 1e-12)          # (the face's own axis: +-hb)
    return np.where(on.all(1), d, np.inf), x, wb, n


def capsule_plane(pa, ua, ha, ra, nb, pb):
    """Capsule and plane: two hits a pair, one per end, shape (2, k, ...)."""
    ends = np.stack([pa - ha[:, None] * ua, pa + ha[:, None] * ua])
    return _on_plane(ends.reshape(-1, 3), np.tile(ra, 2), np.tile(nb, (2, 1)), np.tile(pb, (2, 1)))


# a box's corners and edges: sign patterns of the half extents; an edge from its start along its axis
_CORNERS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
_EDGE_AXIS = np.repeat(np.arange(3), 4)
_EDGE_START = np.array([[-1 if i == a else s for i, s in enumerate(np.insert([u, v], a, 0))]
                        for a in range(3) for u in (-1, 1) for v in (-1, 1)], float)


def _corners(R, p, h):
    """The eight corners (8, k, 3) of boxes of orientations ``R`` (k, 3, 3), centres ``p``, half extents ``h``."""
    return p + np.einsum("kij,ckj->cki", R, _CORNERS[:, None, :] * h)


def box_plane(Ra, pa, ha, nb, pb):
    """Box and plane: eight hits a pair, one per corner."""
    corners = _corners(Ra, pa, ha)                                  # (8, k, 3)
    k = len(pa)
    return _on_plane(corners.reshape(-1, 3), np.zeros(8 * k), np.tile(nb, (8, 1)), np.tile(pb, (8, 1)))


def cylinder_plane(Ra, pa, ha, ra, nb, pb):
    """Cylinder and plane: eight hits a pair, four points of each rim: the lowest one (the deepest
    point of the cylinder is the lowest point of a rim), the highest and the two between."""
    u = Ra[:, :, 2]
    w = nb - _dot(nb, u)[:, None] * u
    L = np.linalg.norm(w, axis=-1)
    upright = L <= 1e-12
    w = np.where(upright[:, None], Ra[:, :, 0], w / np.where(upright, 1.0, L)[:, None])
    v = cross3(u, w)
    pts = [pa + s * ha[:, None] * u + ra[:, None] * d for s in (-1, 1) for d in (-w, w, v, -v)]
    k = len(pa)
    return _on_plane(np.concatenate(pts), np.zeros(8 * k), np.tile(nb, (8, 1)), np.tile(pb, (8, 1)))


#: A box's corner whose distance to the other box is along the pair's face axis but for this [m] (a side
#: flush with the other's, to rounding) touches through that face.
FLUSH = 1e-9


#: A face axis is the pair's unless an edge-edge axis overlaps less by more than this [m] (an edge of one box
#: crossing an edge of the other on a face resting on a face gives an edge-edge axis as near as the face's
#: up to the rounding-size tilts of the boxes).
FACE_PREFERENCE = 1e-6
#: Edges closer to parallel than this [rad] have no edge-edge separating axis (:func:`box_face_axis`).
PARALLEL_EDGES = 1e-3


#: The rows of two rotations' cross products' factors, ``(x cross y)_r = x_{r+1} y_{r+2} - x_{r+2} y_{r+1}``:
#: of the first's ``r + 1`` then ``r + 2``, of the second's ``r + 2`` then ``r + 1``.
_FIRST, _SECOND = np.array([1, 2, 0, 2, 0, 1]), np.array([2, 0, 1, 1, 2, 0])


def _separating_axes(Ra, pa, ha, Rb, pb, hb, parallel):
    """The separating axis test of two boxes over its fifteen axes (the face normals of ``a``, of ``b``,
    and the cross products of an edge of ``a`` (i) and one of ``b`` (j) at ``6 + 3 i + j``; Gottschalk,
    Lin, Manocha, "OBBTree: a hierarchical structure for rapid interference detection", 1996): the unit
    axes (k, 3, 15), the centres' offset ``(pa - pb) . axis`` (k, 15) and the overlap along each (k, 15)
    [m] (negative: the boxes are that far apart along it; infinite for edges whose cross product is
    shorter than ``parallel``, the sine of their angle)."""
    k = len(pa)
    products = Ra[:, _FIRST].reshape(k, 2, 3, 3, 1) * Rb[:, _SECOND].reshape(k, 2, 3, 1, 3)
    cross = (products[:, 0] - products[:, 1]).reshape(k, 3, 9)
    length = np.sqrt((cross * cross).sum(1))
    flat = length < parallel
    axes = np.concatenate([Ra, Rb, cross / np.where(flat, 1.0, length)[:, None, :]], -1)     # (k, 3, 15)
    c = ((pa - pb)[:, None] @ axes)[:, 0]                                 # the centres' offset along each
    # the half extents of both boxes (6) times their axes' projections on each axis (6, 15): one product
    R = np.concatenate([Ra, Rb], -1)
    radius = (np.concatenate([ha, hb], -1)[:, None] @ np.abs(R.transpose(0, 2, 1) @ axes))[:, 0]
    overlap = radius - np.abs(c)
    overlap[:, 6:][flat] = np.inf
    return axes, c, overlap


def box_face_axis(Ra, pa, ha, Rb, pb, hb):
    """The face axis (k, 3) of two boxes along which they overlap least (or are farthest apart), from
    ``b`` towards ``a``, where it is the separating axis test's least overlap over all fifteen axes
    (:func:`_separating_axes`): the normal of a face resting on a face; zero where an edge-edge axis
    overlaps less (the boxes touch edge to edge); and its index (k,) (0-2: a face axis of ``a``, 3-5: of
    ``b``)."""
    # edges nearly parallel (within PARALLEL_EDGES rad): their cross product's direction is set by the
    # rounding-size tilts of two boxes stacked square (a face on a face), not by an edge on an edge
    axes, c, overlap = _separating_axes(Ra, pa, ha, Rb, pb, hb, PARALLEL_EDGES)
    i = np.argmin(overlap[:, :6], axis=-1)
    rows = np.arange(len(pa))
    face = overlap[rows, i] <= overlap[:, 6:].min(-1) + FACE_PREFERENCE
    return axes[rows, :, i] * (np.where(c[rows, i] < 0, -1.0, 1.0) * face)[:, None], i


#: Edges closer to parallel than this (the sine of their angle) have no edge-edge axis in
#: :func:`box_box`: their cross product's direction is rounding.
EXACT_PARALLEL = 1e-12
#: The face axis is :func:`box_box`'s deepest unless an edge-edge axis overlaps less by more than this [m]
#: (a tie within rounding: the face's corner is the closest pair, not two edges' points).
FACE_TIE = 1e-12

#: The edges of the nine edge-edge axes (``6 + 3 i + l``): ``a``'s along its axis i (row 0), ``b``'s along
#: its l (row 1); and the one-hot of each edge's axis (2, 9, 3).
_EDGE_AXES = np.stack([np.repeat(np.arange(3), 3), np.tile(np.arange(3), 3)])
_EDGE_ONEHOT = np.eye(3)[_EDGE_AXES]


def _stacked(Ra, pa, ha, Rb, pb, hb):
    """The two boxes of each pair stacked on axis 1: ``R`` (k, 2, 3, 3), ``p`` and ``h`` (k, 2, 3)."""
    return (np.concatenate([Ra[:, None], Rb[:, None]], 1), np.concatenate([pa[:, None], pb[:, None]], 1),
            np.concatenate([ha[:, None], hb[:, None]], 1))


def _support_edges(R, p, h, n, axis, onehot):
    """The edges of boxes ``(R, p, h)`` ((k, 2, 3, 3), (k, 2, 3)) along their axes ``axis`` (k or 1, 2, m)
    (``onehot`` (k or 1, 2, m, 3) their one-hots) farthest along the directions ``n`` (k, 2, m, 3): their
    starts and vectors (k, 2, m, 3) (one of the four where ``n`` is square to more than the edge: the
    middle of a face or of the box), the half extents' signs (k, 2, m, 3) and the corners (k, 2, m, 3)
    farthest along ``n``."""
    sign = np.sign(n @ R)                                                 # n in the boxes' axes
    RT = R.transpose(0, 1, 3, 2)
    k = len(R)
    rows, boxes = np.arange(k)[:, None, None], np.arange(2)[:, None]
    e = RT[rows, boxes, axis] * h[rows, boxes, axis][..., None]          # half the edges
    corner = p[:, :, None] + (sign * h[:, :, None]) @ RT
    middle = corner - (sign * onehot).sum(-1)[..., None] * e
    return middle - e, 2 * e, sign, corner


def _corner_gaps(C, R, p, h):
    """Corners ``C`` (k, 2, 8, 3) outside boxes ``(R, p, h)`` ((k, 2, 3, 3), (k, 2, 3)): their distances
    (k, 2, 8), the closest points of the boxes (k, 2, 8, 3) and the unit normals from the boxes towards
    them (k, 2, 8, 3; zero on the surface), the offset taken in the box's axes (exact for a corner over a
    face)."""
    x = (C - p[:, :, None]) @ R
    y = np.minimum(np.maximum(x, -h[:, :, None]), h[:, :, None])
    w = x - y
    L = np.sqrt((w * w).sum(-1))
    RT = R.transpose(0, 1, 3, 2)
    u = w / np.where(L > 0, L, np.inf)[..., None]
    return L, p[:, :, None] + y @ RT, u @ RT


def _box_box_apart(Ra, pa, ha, Rb, pb, hb, axes, c, overlap):
    """``(d, w_a, w_b, n)`` of boxes that do not overlap, from their separating axis test
    (:func:`_separating_axes`): the least of the distances of each one's corners to the other box and of
    the closest points of the two edges farthest towards each other along each edge-edge axis (the
    distance of two convex polytopes is that of a corner and a face or of two edges, and where two
    edges hold it they are those of their axis); the normal of two edges crossing is their axis, of a
    corner over a face the face's (exact at touch); at touch elsewhere the axis apart most.  Both boxes
    are stacked on one axis (:func:`_stacked`): each array operation serves both."""
    k = len(pa)
    rows = np.arange(k)
    R, p, h = _stacked(Ra, pa, ha, Rb, pb, hb)
    C = p[:, :, None] + (_CORNERS * h[:, :, None]) @ R.transpose(0, 1, 3, 2)          # (k, 2, 8, 3)
    L, W, N = _corner_gaps(C, R[:, ::-1], p[:, ::-1], h[:, ::-1])         # a's corners against b, b's against a
    n = (axes[:, :, 6:] * np.where(c[:, 6:] < 0, -1.0, 1.0)[:, None]).transpose(0, 2, 1)     # (k, 9, 3)
    P, E, _, _ = _support_edges(R, p, h, np.concatenate([-n[:, None], n[:, None]], 1), _EDGE_AXES, _EDGE_ONEHOT)
    s, t = _segments(P[:, 0], E[:, 0], P[:, 1], E[:, 1])
    xa, xb = P[:, 0] + s[..., None] * E[:, 0], P[:, 1] + t[..., None] * E[:, 1]
    L3 = np.where(np.isfinite(overlap[:, 6:]), np.sqrt(((xa - xb) ** 2).sum(-1)), np.inf)
    across = (s > 0) & (s < 1) & (t > 0) & (t < 1)
    n3 = np.where(across[..., None], n, (xa - xb) / np.where(L3 > 0, L3, np.inf)[..., None])
    d = np.concatenate([L[:, 0], L[:, 1], L3], 1)                         # (k, 25)
    j = np.argmin(d, axis=1)
    # the candidates' (w_a, w_b, n), side by side (k, 25, 9): a's corners, b's corners, the edges' points
    pick = np.concatenate([np.concatenate([C[:, 0], W[:, 0], N[:, 0]], -1),
                           np.concatenate([W[:, 1], C[:, 1], -N[:, 1]], -1),
                           np.concatenate([xa, xb, n3], -1)], 1)[rows, j]
    nn = pick[:, 6:]
    # touching where no axis holds the normal (a corner on an edge): the axis apart most
    none = np.flatnonzero(~nn.any(-1))
    if len(none):
        i = np.argmin(overlap[none], axis=1)
        nn[none] = axes[none, :, i] * np.where(c[none, i] < 0, -1.0, 1.0)[:, None]
    return d[rows, j], pick[:, :3], pick[:, 3:6], nn


def _over_reference(v, sign, Ri, pi, hi, Rr, pr, hr):
    """The deepest corners ``v`` (m, 3) of boxes ``(Ri, pi, hi)`` along an axis of ``(Rr, pr, hr)``, their
    half extents' signs ``sign`` (m, 3) with a zero (a face or an edge parallel to the reference face:
    every point of it as deep): a point of that face or edge over the reference box instead of its
    centre, by alternating projections on the two (a few suffice for boxes with parallel faces), in the
    two boxes' axes (``T`` takes the reference's to the incident's, ``o`` its centre there)."""
    free = sign == 0
    lo, up = np.where(free, -hi, sign * hi)[:, None], np.where(free, hi, sign * hi)[:, None]
    T = Ri.transpose(0, 2, 1) @ Rr
    o = ((pr - pi)[:, None] @ Ri)
    x = (v - pr)[:, None] @ Rr                                            # (m, 1, 3) in the reference's axes
    for it in range(3):
        z = np.minimum(np.maximum(x, -hr[:, None]), hr[:, None]) @ T.transpose(0, 2, 1) + o
        z = np.minimum(np.maximum(z, lo), up)
        if it < 2:
            x = (z - o) @ T
    return pi + (z @ Ri.transpose(0, 2, 1))[:, 0]


def _box_box_deep(Ra, pa, ha, Rb, pb, hb, axes, c, overlap):
    """``(d, w_a, w_b, n)`` of overlapping boxes, from their separating axis test (:func:`_separating_axes`):
    the axis of least overlap the normal (a face's where an edge-edge axis is no less by :data:`FACE_TIE`),
    the overlap the depth, and the witness points those of coal's EPA (the minimum translation's facet
    of the boxes' Minkowski difference): on a face axis the other box's deepest corner and its
    projection on the face; on an edge-edge axis the closest points of the two deepest edges."""
    k = len(pa)
    rows = np.arange(k)
    f, e = np.argmin(overlap[:, :6], -1), 6 + np.argmin(overlap[:, 6:], -1)
    j = np.where(overlap[rows, e] < overlap[rows, f] - FACE_TIE, e, f)
    depth = overlap[rows, j]
    n = axes[rows, :, j] * np.where(c[rows, j] < 0, -1.0, 1.0)[:, None]
    R, p, h = _stacked(Ra, pa, ha, Rb, pb, hb)
    e = np.maximum(j - 6, 0)                                              # the deepest edges of the axis j
    P, E, sign, v = _support_edges(R, p, h, np.concatenate([-n[:, None, None], n[:, None, None]], 1),
                                   _EDGE_AXES[:, e].T[..., None], _EDGE_ONEHOT[:, e].transpose(1, 0, 2)[:, :, None])
    P, E, sign, v = P[:, :, 0], E[:, :, 0], sign[:, :, 0], v[:, :, 0]
    edge = j >= 6
    wa = wb = pa                                                          # (unused: no edge-edge axis)
    if edge.any():
        s, t = _segments(P[:, 0], E[:, 0], P[:, 1], E[:, 1])
        wa, wb = P[:, 0] + s[:, None] * E[:, 0], P[:, 1] + t[:, None] * E[:, 1]
    # on a face axis the incident box's deepest corner (b's on a face of a, a's on a face of b), moved
    # over the reference box where the incident box's face or edge lies along the reference face
    inc = np.where(j < 3, 1, 0)
    vi, si = v[rows, inc], sign[rows, inc]
    m = np.flatnonzero(~edge & (si == 0).any(-1))
    if len(m):
        mr, order = m[:, None], np.concatenate([inc[m, None], 1 - inc[m, None]], 1)     # (incident, reference)
        Rm, pm, hm = R[mr, order], p[mr, order], h[mr, order]
        vi[m] = _over_reference(vi[m], si[m], Rm[:, 0], pm[:, 0], hm[:, 0], Rm[:, 1], pm[:, 1], hm[:, 1])
    on_b = (inc == 0)[:, None]
    wa = np.where(edge[:, None], wa, np.where(on_b, vi, vi - depth[:, None] * n))
    wb = np.where(edge[:, None], wb, np.where(on_b, vi + depth[:, None] * n, vi))
    return -depth, wa, wb, n


def box_box(Ra, pa, ha, Rb, pb, hb):
    """Two boxes of orientations ``Ra``, ``Rb`` (k, 3, 3), centres ``pa``, ``pb`` and half extents ``ha``,
    ``hb`` (k, 3): their signed distance and closest pair of points, coal's ``distance`` in closed form,
    apart (:func:`_box_box_apart`) or overlapping (:func:`_box_box_deep`: the separating axis test)."""
    axes, c, overlap = _separating_axes(Ra, pa, ha, Rb, pb, hb, EXACT_PARALLEL)
    deep = overlap.min(-1) > 0
    count = np.count_nonzero(deep)
    if len(pa) and count in (0, len(pa)):                      # one kind: no split (most calls: a pair or two)
        return (_box_box_deep if count else _box_box_apart)(Ra, pa, ha, Rb, pb, hb, axes, c, overlap)
    d, wa, wb, n = np.zeros(len(pa)), np.zeros_like(pa), np.zeros_like(pa), np.zeros_like(pa)
    for m, f in ((~deep, _box_box_apart), (deep, _box_box_deep)):
        d[m], wa[m], wb[m], n[m] = f(Ra[m], pa[m], ha[m], Rb[m], pb[m], hb[m], axes[m], c[m], overlap[m])
    return d, wa, wb, n


def _over_face(x, Rb, pb, hb, axis, hits):
    """``hits`` ``(d, w_x, w_b, n)`` of points ``x`` (k, 3) against boxes ``(Rb, pb, hb)``, where a point lies
    over (or under) the face of ``b`` nearest in direction to ``axis`` (k, 3, zero: none), to within
    :data:`FLUSH`: against that face's plane (a corner on the common edge of two boxes stacked with
    coplanar sides is as near to the side face as to the face it rests on; its contact is the face's), its
    normal the face's own (the pair's axis may be the other box's face, tilted from this one: the hit's
    witnesses are ``d`` apart along its normal either way)."""
    y = np.einsum("kji,kj->ki", Rb, x - pb)                             # in b's axes
    o = np.einsum("kji,kj->ki", Rb, axis)
    k = np.arange(len(x))
    i = np.argmax(np.abs(o), axis=-1)
    s = np.where(o[k, i] < 0, -1.0, 1.0)
    side = y - np.clip(y, -hb, hb)
    side[k, i] = 0.0
    face = np.any(o != 0, -1) & (np.linalg.norm(side, axis=-1) <= FLUSH) & (s * y[k, i] >= -hb[k, i])
    on = np.clip(y, -hb, hb)
    on[k, i] = s * hb[k, i]
    d, wx, wb, n = hits
    wb = np.where(face[:, None], pb + np.einsum("kij,kj->ki", Rb, on), wb)
    return np.where(face, s * y[k, i] - hb[k, i], d), wx, wb, np.where(face[:, None], s[:, None] * Rb[k, :, i], n)


def _clip(polygon, c, e, h):
    """The part of ``polygon`` (a list of points) where ``e . (x - c) <= h`` (Sutherland and Hodgman; a
    point within :data:`FLUSH` of the line is on it: no crossing point beside it)."""
    out = []
    for x, y in zip(polygon, polygon[1:] + polygon[:1]):
        dx, dy = e @ (x - c) - h, e @ (y - c) - h
        if dx <= FLUSH:
            out.append(x)
        if (dx > FLUSH and dy < -FLUSH) or (dx < -FLUSH and dy > FLUSH):
            out.append(x + dx / (dx - dy) * (y - x))
    return out


def box_box_face(Ra, pa, ha, Rb, pb, hb, axis, which):
    """A face of two boxes resting on a face: the incident face clipped to the reference face (the face of
    the pair's face ``axis`` (k, 3), from ``b`` towards ``a``, of ``a`` where ``which`` (k,) < 3, else of
    ``b``), eight hits a pair, the points of the contact polygon (its vertices where an edge of one face
    crosses an edge of the other: no corner is there), the rest at infinite distance."""
    k = len(pa)
    d, wa, wb = np.full((8, k), np.inf), np.zeros((8, k, 3)), np.zeros((8, k, 3))
    for j in np.flatnonzero(np.any(axis != 0, -1)):
        on_a = which[j] < 3
        (Rr, pr, hr), (Ri, pi, hi) = ((Ra[j], pa[j], ha[j]), (Rb[j], pb[j], hb[j]))[::1 if on_a else -1]
        u = -axis[j] if on_a else axis[j]                       # the reference face's outward normal
        r = which[j] % 3
        c = pr + hr[r] * u
        t = np.argmax(np.abs(Ri.T @ u))
        sign = -np.sign(Ri[:, t] @ u)
        e1, e2 = (Ri[:, x] * hi[x] for x in range(3) if x != t)
        ci = pi + sign * hi[t] * Ri[:, t]
        polygon = [ci + e1 + e2, ci - e1 + e2, ci - e1 - e2, ci + e1 - e2]
        for x in range(3):
            if x != r:
                for s in (1.0, -1.0):
                    polygon = _clip(polygon, c, s * Rr[:, x], hr[x]) if polygon else polygon
        for m, x in enumerate(polygon[:8]):
            depth = u @ (x - c)
            d[m, j] = depth
            wa[m, j], wb[m, j] = (x - depth * u, x) if on_a else (x, x - depth * u)
    return d.reshape(-1), wa.reshape(-1, 3), wb.reshape(-1, 3), np.tile(axis, (8, 1))


def box_box_corners(Ra, pa, ha, Rb, pb, hb):
    """Two boxes: the corners of each against the other (a point against a box), sixteen hits a pair, then
    the contact polygon of a face resting on a face (:func:`box_box_face`), eight (the closest pair, an
    edge on an edge, is :func:`box_box`'s); a corner over the face of the pair's :func:`box_face_axis` touches
    through that face, not its nearest one."""
    k = len(pa)
    ca, cb = _corners(Ra, pa, ha).reshape(-1, 3), _corners(Rb, pb, hb).reshape(-1, 3)
    z = np.zeros(8 * k)
    axis, which = box_face_axis(Ra, pa, ha, Rb, pb, hb)
    n = np.tile(axis, (8, 1))
    A = np.tile(Ra, (8, 1, 1)), np.tile(pa, (8, 1)), np.tile(ha, (8, 1))
    B = np.tile(Rb, (8, 1, 1)), np.tile(pb, (8, 1)), np.tile(hb, (8, 1))
    d1, wa1, wb1, n1 = _over_face(ca, *B, n, sphere_box(ca, z, *B))
    d2, wb2, wa2, n2 = _over_face(cb, *A, -n, sphere_box(cb, z, *A))
    d3, wa3, wb3, n3 = box_box_face(Ra, pa, ha, Rb, pb, hb, axis, which)
    return (np.concatenate([d1, d2, d3]), np.concatenate([wa1, wa2, wa3]), np.concatenate([wb1, wb2, wb3]),
            np.concatenate([n1, -n2, n3]))


def capsule_box_ends(pa, ua, ha, ra, Rb, pb, hb):
    """A capsule and a box: the capsule's two end spheres against the box, two hits a pair (a
    capsule lying on a face); an end its closest pair covers (the capsule crossing an edge,
    :func:`~sparsedyn.contact.box_pairs.covered_ends`) at distance 1e300."""
    ends = np.concatenate([pa - ha[:, None] * ua, pa + ha[:, None] * ua])
    d, wa, wb, n = sphere_box(ends, np.tile(ra, 2), np.tile(Rb, (2, 1, 1)), np.tile(pb, (2, 1)), np.tile(hb, (2, 1)))
    k = len(pa)
    dc, wac, _, nc = capsule_box(pa, ua, ha, ra, Rb, pb, hb)
    dc = np.where(dc + SAME_DEPTH >= np.minimum(d[:k], d[k:]), 1e300, dc)      # collide's rule: an end as deep
    cols = lambda x: [x[:, i] for i in range(3)]                                  # noqa: E731
    got = covered_ends(dc, cols(wac), cols(nc), [(d[:k], cols(wa[:k]), None, cols(n[:k])),
                                                 (d[k:], cols(wa[k:]), None, cols(n[k:]))], ra)
    return np.concatenate([x[0] for x in got]), wa, wb, n


def mesh_plane(V, nb, pb, margin):
    """A mesh of world vertices ``V`` (N, 3) (those of its convex hull suffice) and the plane through
    ``pb`` of unit normal ``nb``: the vertices within ``margin`` reduced to the points that span their
    patch (:func:`~sparsedyn.contact.reduction.reduce_patches`: the deepest, the farthest from it and
    the farthest on either side of the line between them), at most four hits."""
    return mesh_plane_reduced(V, nb, pb, margin)


def _axis(R):
    return R[:, :, 2]


# (kind_a, kind_b) -> f(Ra, pa, size_a, Rb, pb, size_b) -> (d, w_a, w_b, n), hits per pair
CLOSED_FORM = {
    ("sphere", "sphere"): (lambda Ra, pa, sa, Rb, pb, sb: sphere_sphere(pa, sa[:, 0], pb, sb[:, 0]), 1),
    ("sphere", "capsule"): (lambda Ra, pa, sa, Rb, pb, sb:
                            sphere_capsule(pa, sa[:, 0], pb, _axis(Rb), sb[:, 1] / 2, sb[:, 0]), 1),
    ("capsule", "capsule"): (lambda Ra, pa, sa, Rb, pb, sb:
                             capsule_capsule(pa, _axis(Ra), sa[:, 1] / 2, sa[:, 0], pb, _axis(Rb), sb[:, 1] / 2,
                                             sb[:, 0]), 1),
    ("sphere", "box"): (lambda Ra, pa, sa, Rb, pb, sb: sphere_box(pa, sa[:, 0], Rb, pb, sb / 2), 1),
    ("sphere", "plane"): (lambda Ra, pa, sa, Rb, pb, sb: sphere_plane(pa, sa[:, 0], _axis(Rb), pb), 1),
    ("capsule", "plane"): (lambda Ra, pa, sa, Rb, pb, sb:
                           capsule_plane(pa, _axis(Ra), sa[:, 1] / 2, sa[:, 0], _axis(Rb), pb), 2),
    ("box", "plane"): (lambda Ra, pa, sa, Rb, pb, sb: box_plane(Ra, pa, sa / 2, _axis(Rb), pb), 8),
    ("cylinder", "plane"): (lambda Ra, pa, sa, Rb, pb, sb:
                            cylinder_plane(Ra, pa, sa[:, 1] / 2, sa[:, 0], _axis(Rb), pb), 8),
}


# Pairs whose closest pair (coal's ``distance``) has a closed form, though not their resting contacts: those
# are :data:`FEATURES`
CLOSEST = {
    ("box", "box"): (lambda Ra, pa, sa, Rb, pb, sb: box_box(Ra, pa, sa / 2, Rb, pb, sb / 2), 1),
    ("capsule", "box"): (lambda Ra, pa, sa, Rb, pb, sb:
                         capsule_box(pa, _axis(Ra), sa[:, 1] / 2, sa[:, 0], Rb, pb, sb / 2), 1),
    # (coal's EPA leaves through the side where a sphere's centre inside a cylinder is nearer a cap, and
    # gives no normal at the centre)
    ("sphere", "cylinder"): (lambda Ra, pa, sa, Rb, pb, sb:
                             sphere_cylinder(pa, sa[:, 0], Rb, pb, sb[:, 1] / 2, sb[:, 0]), 1),
    # (coal measures an ellipsoid against a half-space by GJK, to its tolerance)
    ("ellipsoid", "plane"): (lambda Ra, pa, sa, Rb, pb, sb: ellipsoid_plane(Ra, pa, sa, _axis(Rb), pb), 1),
    ("ellipsoid", "sphere"): (lambda Ra, pa, sa, Rb, pb, sb: ellipsoid_sphere(Ra, pa, sa, pb, sb[:, 0]), 1),
}


# Pairs whose closest pair is coal's or :data:`CLOSEST`'s, and the closed-form hits added to it where it is
# within the margin
FEATURES = {
    ("box", "box"): (lambda Ra, pa, sa, Rb, pb, sb: box_box_corners(Ra, pa, sa / 2, Rb, pb, sb / 2), 24),
    ("capsule", "box"): (lambda Ra, pa, sa, Rb, pb, sb:
                         capsule_box_ends(pa, _axis(Ra), sa[:, 1] / 2, sa[:, 0], Rb, pb, sb / 2), 2),
}


# Pairs whose closest pair is coal's but where a closed form's one hit holds (its distance finite): that hit,
# exact (coal's GJK leaves a curved shape's witness point off by the square root of its tolerance)
ON_FACE = {
    ("ellipsoid", "box"): (lambda Ra, pa, sa, Rb, pb, sb: ellipsoid_box_face(Ra, pa, sa, Rb, pb, sb / 2), 1),
}
