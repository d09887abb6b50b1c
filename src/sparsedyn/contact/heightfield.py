"""Height fields: the surface of a :class:`~sparsedyn.Shape` ``"hfield"`` and points against it.

A height field (MuJoCo's ``hfield``) is a solid whose top is a grid of heights: ``size = (sx, sy,
top, base)`` and ``heights`` (nrow, ncol) in [0, 1]; the grid point ``(i, j)`` is at
``x = -sx + 2 sx j / (ncol - 1)``, ``y = -sy + 2 sy i / (nrow - 1)`` (row 0 at ``-sy``, as MuJoCo's
``hfield_data``), at height ``top * heights[i, j]``; the solid reaches down to ``z = -base``.  Each
cell is two triangles split along its diagonal from ``(x_j, y_i)`` to ``(x_j+1, y_i+1)`` (coal's
``HeightField`` splits its cells so).

:func:`points_on_hfield`: the signed distances of spheres (points with a radius) to the surface, the
closest points of its triangles (Ericson, "Real-Time Collision Detection", 2005, section 5.1.5).
"""

from __future__ import annotations

import numpy as np

__all__ = ["hfield_triangles", "hfield_grid", "hfield_mesh", "points_on_hfield"]


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
    """The closest point of each triangle ``T`` (m, 3, 3) to the point ``p`` (3,): (m, 3) (Ericson's
    regions: a vertex, an edge or the face)."""
    a, b, c = T[:, 0], T[:, 1], T[:, 2]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = np.einsum("ki,ki->k", ab, ap), np.einsum("ki,ki->k", ac, ap)
    bp, cp = p - b, p - c
    d3, d4 = np.einsum("ki,ki->k", ab, bp), np.einsum("ki,ki->k", ac, bp)
    d5, d6 = np.einsum("ki,ki->k", ab, cp), np.einsum("ki,ki->k", ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = 1.0 / (va + vb + vc)
        face = a + (vb * denom)[:, None] * ab + (vc * denom)[:, None] * ac
        on_ab = a + (d1 / (d1 - d3))[:, None] * ab
        on_ac = a + (d2 / (d2 - d6))[:, None] * ac
        on_bc = b + ((d4 - d3) / ((d4 - d3) + (d5 - d6)))[:, None] * (c - b)
    out = face
    out = np.where(((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0))[:, None], on_bc, out)
    out = np.where(((vb <= 0) & (d2 >= 0) & (d6 <= 0))[:, None], on_ac, out)
    out = np.where(((vc <= 0) & (d1 >= 0) & (d3 <= 0))[:, None], on_ab, out)
    out = np.where(((d6 >= 0) & (d5 <= d6))[:, None], c, out)
    out = np.where(((d3 >= 0) & (d4 <= d3))[:, None], b, out)
    return np.where(((d1 <= 0) & (d2 <= 0))[:, None], a, out)


def points_on_hfield(size, heights, triangles, centres, radii, reach):
    """Spheres of ``centres`` (k, 3) and ``radii`` (k,) (in the height field's frame) against its
    surface: ``(index, d, w_a, w_b, n)`` of those whose surface comes within ``reach`` of the sphere
    (``d < reach``): ``d`` signed (negative: the centre is below the surface, or the sphere
    reaches into it), ``w_b`` the closest point of the surface, ``n`` the unit normal from the
    height field towards the sphere, ``w_a = centre - r n``."""
    x, y, z = hfield_grid(size, heights)
    nrow, ncol = z.shape
    dx, dy = x[1] - x[0], y[1] - y[0]
    out = []
    for k, (c, r) in enumerate(zip(np.asarray(centres, float), np.asarray(radii, float))):
        w = r + reach + max(dx, dy)                               # the cells that may hold the closest point
        j0, j1 = (np.clip(np.floor((c[0] + size[0] + np.array([-w, w])) / dx), 0, ncol - 2)).astype(int)
        i0, i1 = (np.clip(np.floor((c[1] + size[1] + np.array([-w, w])) / dy), 0, nrow - 2)).astype(int)
        if c[0] + w < -size[0] or c[0] - w > size[0] or c[1] + w < -size[1] or c[1] - w > size[1]:
            continue
        cells = (np.arange(i0, i1 + 1)[:, None] * (ncol - 1) + np.arange(j0, j1 + 1)[None, :]).reshape(-1)
        tri = np.concatenate([2 * cells, 2 * cells + 1])
        q = _closest_on_triangles(c, triangles[tri])
        D2 = np.einsum("ki,ki->k", c - q, c - q)
        m = int(np.argmin(D2))
        wb, D = q[m], float(np.sqrt(D2[m]))
        below = _below(c, x, y, z, size)
        T = triangles[tri[m]]
        face_n = np.cross(T[1] - T[0], T[2] - T[0])
        face_n /= np.linalg.norm(face_n)
        n = face_n if D <= 1e-12 * max(1.0, np.abs(c).max()) else ((wb - c) if below else (c - wb)) / D
        d = (-D if below else D) - r
        if d < reach:
            out.append((k, d, c - r * n, wb, n))
    if not out:
        return np.zeros(0, int), np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))
    k, d, wa, wb, n = zip(*out)
    return np.array(k), np.array(d), np.array(wa), np.array(wb), np.array(n)


def _below(c, x, y, z, size):
    """Whether the point ``c`` is inside the solid: over the grid, below its surface and above the base."""
    if not (-size[0] <= c[0] <= size[0] and -size[1] <= c[1] <= size[1]) or c[2] < -size[3]:
        return False
    dx, dy = x[1] - x[0], y[1] - y[0]
    j = min(int((c[0] - x[0]) / dx), len(x) - 2)
    i = min(int((c[1] - y[0]) / dy), len(y) - 2)
    u, v = (c[0] - x[j]) / dx, (c[1] - y[i]) / dy                 # in the cell, [0, 1]^2
    za, zb, zc, zd = z[i, j], z[i, j + 1], z[i + 1, j + 1], z[i + 1, j]
    h = za + u * (zb - za) + v * (zc - zb) if u >= v else za + u * (zc - zd) + v * (zd - za)
    return c[2] < h
