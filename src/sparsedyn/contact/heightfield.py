"""Height fields: the surface of a :class:`~sparsedyn.Shape` ``"hfield"`` and points against it.

A height field (MuJoCo's ``hfield``) is a solid whose top is a grid of heights: ``size = (sx, sy,
top, base)`` and ``heights`` (nrow, ncol) in [0, 1]; the grid point ``(i, j)`` is at
``x = -sx + 2 sx j / (ncol - 1)``, ``y = -sy + 2 sy i / (nrow - 1)`` (row 0 at ``-sy``, as MuJoCo's
``hfield_data``), at height ``top * heights[i, j]``; the solid reaches down to ``z = -base``.  Each
cell is two triangles split along its diagonal from ``(x_j, y_i)`` to ``(x_j+1, y_i+1)`` (coal's
``HeightField`` splits its cells so).

:func:`points_on_hfield`: the signed distances of spheres (points with a radius) to the surface, the
closest points of its triangles (Ericson, "Real-Time Collision Detection", 2005, section 5.1.5);
:func:`hfield_pairs`: the hits of a scene's pairs with a height field (what
:func:`~sparsedyn.collide` takes for them).
"""

from __future__ import annotations

import numpy as np

from .collision import SAME_DEPTH, _hull_vertices

__all__ = ["hfield_triangles", "hfield_grid", "hfield_mesh", "points_on_hfield", "hfield_pairs"]


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


def _features(scene, k, up):
    """The spheres ``(centres (m, 3), radii (m,))`` in shape ``k``'s frame whose contacts with a height
    field are its resting contacts: a sphere, a capsule's end spheres, a box's corners, four points of
    each of a cylinder's rims (the lowest and highest along the field's axis ``up``, in the shape's
    frame, and the two between, as against a plane), a mesh's convex hull vertices; none for an
    ellipsoid."""
    s = scene.shapes[k]
    z = np.zeros(3)
    if s.kind == "sphere":
        return z[None], np.array([s.size[0]])
    if s.kind == "capsule":
        return np.array([[0, 0, -s.size[1] / 2], [0, 0, s.size[1] / 2]]), np.full(2, s.size[0])
    if s.kind == "box":
        return np.array([[x, y, w] for x in (-1, 1) for y in (-1, 1) for w in (-1, 1)]) * np.array(s.size) / 2, \
            np.zeros(8)
    if s.kind == "cylinder":
        w = np.array([up[0], up[1], 0.0])
        L = np.linalg.norm(w)
        w = w / L if L > 1e-12 else np.array([1.0, 0, 0])
        v = np.array([-w[1], w[0], 0.0])                              # e_z x w
        rim = s.size[0] * np.array([-w, w, v, -v])
        return np.concatenate([rim - [0, 0, s.size[1] / 2], rim + [0, 0, s.size[1] / 2]]), np.zeros(8)
    if s.kind == "mesh":
        V = _hull_vertices(scene, k)
        return V, np.zeros(len(V))
    return np.zeros((0, 3)), np.zeros(0)


def hfield_pairs(scene, ks, R, p):
    """Hits of pairs ``ks`` of a shape and a height field: each of the shape's features
    (:func:`_features`) against the surface's triangles (:func:`points_on_hfield`), and, for a box
    and a capsule, the grid points against the shape (a point against a box or a capsule, closed
    forms) where one is deeper than every feature (a bump pressing into a face).  coal's
    ``HeightField`` contacts are not used: coal 3.0 reports their depth as ``-|d|`` whichever the
    side, and measures a cell as a prism whose side walls are not the surface."""
    blocks = []
    for k in ks:
        i, j = scene.index[k]
        swap = scene.shapes[i].kind == "hfield"
        a, h = (j, i) if swap else (i, j)
        hf = scene.shapes[h]
        key = ("triangles", h)
        if key not in scene.cache:
            x, y, z = hfield_grid(hf.size, hf.heights)
            X, Y = np.meshgrid(x, y)
            scene.cache[key] = (hfield_triangles(hf.size, hf.heights), np.column_stack([X.ravel(), Y.ravel(),
                                                                                         z.ravel()]))
        triangles, grid = scene.cache[key]
        Rl, pl = R[h].T @ R[a], R[h].T @ (p[a] - p[h])           # the shape in the height field's frame
        C, r = _features(scene, a, Rl[2])                         # the field's z axis in the shape's frame
        _, d, wa, wb, n = points_on_hfield(hf.size, hf.heights, triangles, C @ Rl.T + pl, r, scene.margin)
        blocks_k = [(d, wa @ R[h].T + p[h], wb @ R[h].T + p[h], n @ R[h].T)]
        pressed = _grid_points(scene, a, grid, Rl, pl, R[h], p[h], R[a], p[a])
        if pressed is not None:
            dv, w1, w2, nv = pressed
            keep = (dv < scene.margin) & (dv < d.min(initial=np.inf) - SAME_DEPTH)
            blocks_k.append((dv[keep], w1[keep], w2[keep], nv[keep]))
        d, wa, wb, n = (np.concatenate(x) for x in zip(*blocks_k))
        if swap:
            wa, wb, n = wb, wa, -n
        blocks.append((np.full(len(d), k), d, wa, wb, n))
    return tuple(np.concatenate(x) for x in zip(*blocks))


def _grid_points(scene, a, grid, Rl, pl, Rh, ph, Ra, pa):
    """``(d, w_a, w_b, n)`` of the grid points near shape ``a`` (a box or a capsule) against it, ``w_b``
    the grid point, ``n`` from the field towards the shape (world); None for other kinds."""
    from .collision import sphere_box, sphere_capsule
    s = scene.shapes[a]
    if s.kind not in ("box", "capsule"):
        return None
    near = np.linalg.norm(grid - pl, axis=1) < s.bounding_radius + scene.margin
    V = grid[near] @ Rh.T + ph
    m = len(V)
    z = np.zeros(m)
    if s.kind == "box":
        d, wv, ws, n = sphere_box(V, z, np.tile(Ra, (m, 1, 1)), np.tile(pa, (m, 1)), np.tile(np.array(s.size) / 2, (m, 1)))
    else:
        d, wv, ws, n = sphere_capsule(V, z, np.tile(pa, (m, 1)), np.tile(Ra[:, 2], (m, 1)), np.full(m, s.size[1] / 2),
                                      np.full(m, s.size[0]))
    return d, ws, wv, -n
