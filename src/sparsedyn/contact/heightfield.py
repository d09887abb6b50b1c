"""Height fields: the surface of a :class:`~sparsedyn.Shape` ``"hfield"`` and points against it.

A height field (MuJoCo's ``hfield``) is a solid whose top is a grid of heights: ``size = (sx, sy,
top, base)`` and ``heights`` (nrow, ncol) in [0, 1]; the grid point ``(i, j)`` is at
``x = -sx + 2 sx j / (ncol - 1)``, ``y = -sy + 2 sy i / (nrow - 1)`` (row 0 at ``-sy``, as MuJoCo's
``hfield_data``), at height ``top * heights[i, j]``; the solid reaches down to ``z = -base``.  Each
cell is two triangles split along its diagonal from ``(x_j, y_i)`` to ``(x_j+1, y_i+1)`` (coal's
``HeightField`` splits its cells so).

:func:`points_on_hfield`: the signed distances of spheres (points with a radius) to the surface, the
closest points of its triangles (Ericson, "Real-Time Collision Detection", 2005, section 5.1.5);
:func:`cylinder_faces`: a cylinder's rim points on the faces, as on a plane; :func:`segment_rims`: the
triangles' edges against its rims.
"""

from __future__ import annotations

import numpy as np

from ..model.spatial import cross3
from .closed_forms import cylinder_plane

__all__ = ["hfield_triangles", "hfield_grid", "hfield_mesh", "points_on_hfield", "triangle_normals",
           "inside_triangles", "cylinder_faces", "segment_rims"]


def hfield_grid(size, heights):
    """``(x (ncol,), y (nrow,), z (nrow, ncol))`` of the grid points, in the shape's frame."""
    sx, sy, top, _ = size
    nrow, ncol = heights.shape
    return np.linspace(-sx, sx, ncol), np.linspace(-sy, sy, nrow), top * np.asarray(heights, float)


def hfield_triangles(size, heights):
    """The surface's triangles ``(T, 3, 3)`` (vertices in the shape's frame), two per cell, cell
    ``(i, j)`` giving triangles ``2 (i (ncol - 1) + j)`` (below its diagonal) and the next (above)."""
    x, y, z = hfield_grid(size, heights)
    X, Y = np.meshgrid(x, y)
    P = np.stack([X, Y, z], -1)                                   # (nrow, ncol, 3)
    a, b, c, d = P[:-1, :-1], P[:-1, 1:], P[1:, 1:], P[1:, :-1]    # (x_j, y_i), (x_j+1, y_i), ...
    return np.stack([np.stack([a, b, c], -2), np.stack([a, c, d], -2)], 2).reshape(-1, 3, 3)


def hfield_mesh(size, heights):
    """The surface as a triangle mesh ``(vertices (nrow ncol, 3), faces (2 (nrow - 1) (ncol - 1), 3))``,
    the triangles of :func:`hfield_triangles` (what the viewer draws)."""
    x, y, z = hfield_grid(size, heights)
    X, Y = np.meshgrid(x, y)
    nrow, ncol = z.shape
    i, j = np.meshgrid(np.arange(nrow - 1), np.arange(ncol - 1), indexing="ij")
    a, b = (i * ncol + j).ravel(), (i * ncol + j + 1).ravel()
    c, d = ((i + 1) * ncol + j + 1).ravel(), ((i + 1) * ncol + j).ravel()
    F = np.stack([np.column_stack([a, b, c]), np.column_stack([a, c, d])], 1).reshape(-1, 3)
    return np.column_stack([X.ravel(), Y.ravel(), z.ravel()]), F


def _closest_on_triangles(p, T):
    """The closest point of each triangle ``T`` (..., m, 3, 3) to the point ``p`` (..., 1, 3) or (3,):
    (..., m, 3) (Ericson's regions: a vertex, an edge or the face)."""
    a, b, c = T[..., 0, :], T[..., 1, :], T[..., 2, :]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = _dot(ab, ap), _dot(ac, ap)
    bp, cp = p - b, p - c
    d3, d4 = _dot(ab, bp), _dot(ac, bp)
    d5, d6 = _dot(ab, cp), _dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = 1.0 / (va + vb + vc)
        face = a + (vb * denom)[..., None] * ab + (vc * denom)[..., None] * ac
        on_ab = a + (d1 / (d1 - d3))[..., None] * ab
        on_ac = a + (d2 / (d2 - d6))[..., None] * ac
        on_bc = b + ((d4 - d3) / ((d4 - d3) + (d5 - d6)))[..., None] * (c - b)
    out = face
    out = np.where(((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0))[..., None], on_bc, out)
    out = np.where(((vb <= 0) & (d2 >= 0) & (d6 <= 0))[..., None], on_ac, out)
    out = np.where(((vc <= 0) & (d1 >= 0) & (d3 <= 0))[..., None], on_ab, out)
    out = np.where(((d6 >= 0) & (d5 <= d6))[..., None], c, out)
    out = np.where(((d3 >= 0) & (d4 <= d3))[..., None], b, out)
    return np.where(((d1 <= 0) & (d2 <= 0))[..., None], a, out)


def _dot(x, y):
    """The dot products of the last axis, as three products summed in order."""
    return x[..., 0] * y[..., 0] + x[..., 1] * y[..., 1] + x[..., 2] * y[..., 2]


#: The most triangles measured at once (features times their windows' triangles): memory, not speed.
_CHUNK = 1 << 16


def points_on_hfield(size, heights, triangles, centres, radii, reach):
    """Spheres of ``centres`` (k, 3) and ``radii`` (k,) (in the height field's frame) against its
    surface: ``(index, d, w_a, w_b, n)`` of those whose surface comes within ``reach`` (a number, or
    (k,) one per sphere) of the sphere (``d < reach``): ``d`` signed (negative: the centre is below the
    surface, or the sphere reaches into it), ``w_b`` the closest point of the surface, ``n`` the unit
    normal from the height field towards the sphere, ``w_a = centre - r n``.  Each sphere is measured
    against the triangles of the cells within ``r + reach`` and a cell of it (where the closest point
    may lie), all spheres at once, their windows padded to the largest by repeating an edge cell."""
    x, y, z = hfield_grid(size, heights)
    nrow, ncol = z.shape
    dx, dy = x[1] - x[0], y[1] - y[0]
    C, r = np.asarray(centres, float).reshape(-1, 3), np.asarray(radii, float).reshape(-1)
    reach = np.broadcast_to(np.asarray(reach, float), r.shape)
    w = r + reach + max(dx, dy)                                   # the cells that may hold the closest point
    k = np.flatnonzero((C[:, 0] + w >= -size[0]) & (C[:, 0] - w <= size[0]) & (C[:, 1] + w >= -size[1]) &
                       (C[:, 1] - w <= size[1]))
    C, r, w, reach = C[k], r[k], w[k], reach[k]
    if not len(k):
        return k, np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))
    j0, j1 = (np.clip(np.floor((C[:, 0] + size[0] + s * w) / dx), 0, ncol - 2).astype(int) for s in (-1, 1))
    i0, i1 = (np.clip(np.floor((C[:, 1] + size[1] + s * w) / dy), 0, nrow - 2).astype(int) for s in (-1, 1))
    ni, nj = int((i1 - i0).max(initial=0)) + 1, int((j1 - j0).max(initial=0)) + 1
    I = np.minimum(i0[:, None] + np.arange(ni), i1[:, None])      # (a cell repeated: the same triangles)
    J = np.minimum(j0[:, None] + np.arange(nj), j1[:, None])
    cells = (I[:, :, None] * (ncol - 1) + J[:, None, :]).reshape(len(k), -1)
    tri = np.concatenate([2 * cells, 2 * cells + 1], 1)           # (k, T): each cell's lower triangles, then upper
    wb, D2, m = np.zeros((len(k), 3)), np.zeros(len(k)), np.zeros(len(k), int)
    step = max(1, _CHUNK // max(1, tri.shape[1]))
    for s in range(0, len(k), step):
        Q = _closest_on_triangles(C[s:s + step, None], triangles[tri[s:s + step]])
        E = _dot(C[s:s + step, None] - Q, C[s:s + step, None] - Q)
        m[s:s + step] = np.argmin(E, 1)
        wb[s:s + step] = np.take_along_axis(Q, m[s:s + step, None, None], 1)[:, 0]
        D2[s:s + step] = np.take_along_axis(E, m[s:s + step, None], 1)[:, 0]
    D = np.sqrt(D2)
    below = _below(C, x, y, z, size)
    T = triangles[np.take_along_axis(tri, m[:, None], 1)[:, 0]]
    face_n = cross3(T[:, 1] - T[:, 0], T[:, 2] - T[:, 0])
    face_n /= np.linalg.norm(face_n, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        away = np.where(below[:, None], wb - C, C - wb) / D[:, None]
    n = np.where((D <= 1e-12 * np.maximum(1.0, np.abs(C).max(1, initial=0)))[:, None], face_n, away)
    d = np.where(below, -D, D) - r
    hit = d < reach
    return k[hit], d[hit], (C - r[:, None] * n)[hit], wb[hit], n[hit]


def _below(C, x, y, z, size):
    """Whether each point of ``C`` (k, 3) is inside the solid: over the grid, below its surface and above
    the base."""
    dx, dy = x[1] - x[0], y[1] - y[0]
    over = (-size[0] <= C[:, 0]) & (C[:, 0] <= size[0]) & (-size[1] <= C[:, 1]) & (C[:, 1] <= size[1]) & \
        (C[:, 2] >= -size[3])
    j = np.clip(((C[:, 0] - x[0]) / dx).astype(int), 0, len(x) - 2)
    i = np.clip(((C[:, 1] - y[0]) / dy).astype(int), 0, len(y) - 2)
    u, v = (C[:, 0] - x[j]) / dx, (C[:, 1] - y[i]) / dy              # in the cell, [0, 1]^2
    za, zb, zc, zd = z[i, j], z[i, j + 1], z[i + 1, j + 1], z[i + 1, j]
    h = np.where(u >= v, za + u * (zb - za) + v * (zc - zb), za + u * (zc - zd) + v * (zd - za))
    return over & (C[:, 2] < h)


def triangle_normals(T):
    """The unit normals (m, 3) of triangles ``T`` (m, 3, 3) whose corners run counter-clockwise seen from
    along them (a height field's: up)."""
    e1, e2 = T[:, 1] - T[:, 0], T[:, 2] - T[:, 0]
    n = np.column_stack([e1[:, 1] * e2[:, 2] - e1[:, 2] * e2[:, 1], e1[:, 2] * e2[:, 0] - e1[:, 0] * e2[:, 2],
                         e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]])
    return n / np.sqrt((n * n).sum(1))[:, None]


def inside_triangles(T, x):
    """Whether each point ``x`` (m, 3) of the plane of the triangle ``T`` (m, 3, 3) of a height field (its
    corners counter-clockwise seen from above) lies in it: left of each edge seen from above (the
    projection on the xy plane keeps a point of the face's plane inside or out), to a rounding of the
    corners' size."""
    inside = np.ones(len(T), bool)
    for i in range(3):
        a, b = T[:, i, :2], T[:, (i + 1) % 3, :2]
        side = (b[:, 0] - a[:, 0]) * (x[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (x[:, 0] - a[:, 0])
        inside &= side >= -1e-14 * (np.abs(a).max(1) + np.abs(x[:, :2]).max(1)) * np.abs(b - a).max(1)
    return inside


def cylinder_faces(T, Ra, pa, half, radius, reach=np.inf):
    """The cylinder ``(Ra (3, 3), pa (3,))`` (axis: its z; half length ``half``, ``radius``) against the
    triangles ``T`` (m, 3, 3) of a height field, all in one frame: ``(d, w_a, w_b, n)`` of its four rim
    points on each cap against each face's plane
    (:func:`~sparsedyn.contact.closed_forms.cylinder_plane`: the lowest along the face's normal, the
    highest and the two between) nearer than ``reach`` to it whose projection the face holds, ``n`` the
    face's normal; of the others, none."""
    nt, m = triangle_normals(T), len(T)
    d, wa, wb, n = cylinder_plane(np.broadcast_to(Ra, (m, 3, 3)), np.broadcast_to(pa, (m, 3)), np.full(m, half),
                                  np.full(m, radius), nt, T[:, 0])
    near = np.flatnonzero(d < reach)
    inside = near[inside_triangles(T[near % m], wb[near])]
    return d[inside], wa[inside], wb[inside], n[inside]


#: The points along each half of a segment at which :func:`segment_rims` starts its search.
_RIM_STARTS = np.linspace(0.0, 1.0, 9)


def segment_rims(P0, P1, R, p, half, radius, reach=np.inf):
    """The segments ``P0``, ``P1`` (e, 3) against the two rims (circles) of the cylinder ``(R (3, 3), p (3,))``
    (axis: its z; half length ``half``, ``radius``), all in one frame: ``(d, w_a, w_b, n, edge, hit)``
    per segment within ``radius + reach`` of a rim's centre (the others come no nearer that rim than
    ``reach``), per such rim and per half of the segment either side of its point nearest the rim's axis:
    the segment's (``edge``, its index) point ``w_b`` nearest the rim on that half and the rim's nearest
    point ``w_a``, ``n`` from the segment towards the cylinder, ``d = |w_a - w_b|``; where ``w_b`` is
    inside the cylinder, through the cap or the side (whichever ``w_b - w_a`` lies more along), the
    point of that surface over it, ``n`` the surface's inward normal and ``d`` minus its depth below it;
    ``hit``: whether ``w_b`` is a least distance inside the segment (not at its ends nor where the halves
    meet) and ``w_b - w_a`` lies in the rim's outer corner (along the side's and the cap's outward
    normals: the rim is then the cylinder's nearest point) or inside it (against both, to rounding).
    The least over ``s`` of ``f = g^2 + (|w| - r)^2`` (``g`` the point's height over the rim's plane,
    ``w`` its part across the axis; at most one least on each half): Newton's iteration from the least
    of :data:`_RIM_STARTS` on the half, kept in it."""
    a, D = R[:, 2], P1 - P0
    signs = np.array([-1.0, 1.0])
    C = p + signs[:, None] * half * a                                # the rims' centres (2, 3)
    t = np.clip(((C[:, None] - P0) * D).sum(2) / np.maximum((D * D).sum(1), np.finfo(float).tiny), 0.0, 1.0)
    rim, edge = np.nonzero(((P0 + t[..., None] * D - C[:, None]) ** 2).sum(2) <= (radius + reach) ** 2)
    P0, D, c, sign = P0[edge], D[edge], C[rim], signs[rim]
    g0, g1 = ((P0 - c) * a).sum(1), D @ a
    w0, w1 = (P0 - c) - g0[:, None] * a, D - g1[:, None] * a
    m = np.clip(-(w0 * w1).sum(1) / np.maximum((w1 * w1).sum(1), np.finfo(float).tiny), 0.0, 1.0)
    lo, hi = np.concatenate([np.zeros(len(m)), m]), np.concatenate([m, np.ones(len(m))])
    P0, D, c, sign, g0, g1, w0, w1, edge = (np.concatenate([x, x]) for x in (P0, D, c, sign, g0, g1, w0, w1, edge))
    d, wa, wb, n, hit = _rim_least(P0, D, p, a, c, sign, half, radius, (g0, g1, w0, w1), lo, hi)
    return d, wa, wb, n, edge, hit


def _rim_least(P0, D, p, a, c, sign, half, radius, lines, lo, hi):
    """:func:`segment_rims` on the parts ``[lo, hi]`` (k,) of the segments ``(P0, D)`` (k, 3), each against
    the rim of centre ``c`` (k, 3) on the cap ``sign`` (k,); ``lines``: ``(g0, g1, w0, w1)``, the
    segments' heights over the rim's plane and parts across the axis at ``s = 0`` and their changes along
    them."""
    g0, g1, w0, w1 = lines
    S = lo[:, None] + _RIM_STARTS * (hi - lo)[:, None]
    W = w0[:, None] + S[..., None] * w1[:, None]
    f = (g0[:, None] + S * g1[:, None]) ** 2 + (np.sqrt((W * W).sum(2)) - radius) ** 2
    s = np.take_along_axis(S, np.argmin(f, 1)[:, None], 1)[:, 0]
    ww = (w1 * w1).sum(1)
    for _ in range(6):
        g, w = g0 + s * g1, w0 + s[:, None] * w1
        h = np.maximum(np.sqrt((w * w).sum(1)), np.finfo(float).tiny)
        dh = (w * w1).sum(1) / h
        df, ddf = g * g1 + (h - radius) * dh, g1 * g1 + dh * dh + (h - radius) * (ww - dh * dh) / h
        s = np.where(ddf > 0, np.minimum(np.maximum(s - df / np.where(ddf > 0, ddf, 1.0), lo), hi), s)
    wb, w, g = P0 + s[:, None] * D, w0 + s[:, None] * w1, g0 + s * g1
    h = np.sqrt((w * w).sum(1))
    u = w / np.maximum(h, np.finfo(float).tiny)[:, None]
    wa = c + radius * u
    e = wb - wa
    dist = np.sqrt((e * e).sum(1))
    side, cap = (e * u).sum(1), sign * (e @ a)
    tol = 64 * np.finfo(float).eps * (dist + radius)                # (e . u is zero on the rim's plane)
    outer = (side >= -tol) & (cap >= -tol)
    inner = (side <= tol) & (cap <= tol) & (cap >= -2 * half - tol)           # (not past the other cap)
    inside, axial = side + cap < 0, cap <= side                     # (inside: through the cap or the side)
    exit_n = np.where(axial[:, None], -sign[:, None] * a, -u)
    n = np.where(inside[:, None], exit_n, -e / np.maximum(dist, np.finfo(float).tiny)[:, None])
    depth = np.where(axial, cap, side)
    wa = np.where(inside[:, None], wb + depth[:, None] * exit_n, wa)
    # a least inside the half: f' = 0 to Newton's convergence (the length's square root of eps of its scale)
    dh = (w * w1).sum(1) / np.maximum(h, np.finfo(float).tiny)
    DD = (D * D).sum(1)
    flat = np.abs(g * g1 + (h - radius) * dh) <= 1.5e-8 * DD + 1.5e-8 * radius * np.sqrt(DD)
    hit = flat & (lo < s) & (s < hi) & np.where(inside, inner, outer)
    return np.where(inside, depth, dist), wa, wb, n, hit
