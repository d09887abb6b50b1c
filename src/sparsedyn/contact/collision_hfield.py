"""A shape against a height field in a :class:`~sparsedyn.Scene` (:func:`hfield_pairs`, collide's narrow
phase for such pairs; :mod:`~sparsedyn.contact.collision` for the hits' conventions)."""

from __future__ import annotations

import numpy as np

from .closed_forms import sphere_box, sphere_capsule
from .collision_coal import SAME_DEPTH, _hull_vertices
from .heightfield import hfield_grid, hfield_triangles, points_on_hfield

__all__ = ["hfield_pairs"]


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


def hfield_pairs(scene, ks, R, p, margin):
    """Hits of pairs ``ks`` of a shape and a height field: each of the shape's features
    (:func:`_features`) against the surface's triangles (:func:`~sparsedyn.contact.heightfield.points_on_hfield`), and, for a box
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
        _, d, wa, wb, n = points_on_hfield(hf.size, hf.heights, triangles, C @ Rl.T + pl, r, margin)
        blocks_k = [(d, wa @ R[h].T + p[h], wb @ R[h].T + p[h], n @ R[h].T)]
        pressed = _grid_points(scene, a, grid, Rl, pl, R[h], p[h], R[a], p[a], margin)
        if pressed is not None:
            dv, w1, w2, nv = pressed
            keep = (dv < margin) & (dv < d.min(initial=np.inf) - SAME_DEPTH)
            blocks_k.append((dv[keep], w1[keep], w2[keep], nv[keep]))
        d, wa, wb, n = (np.concatenate(x) for x in zip(*blocks_k))
        if swap:
            wa, wb, n = wb, wa, -n
        blocks.append((np.full(len(d), k), d, wa, wb, n))
    return tuple(np.concatenate(x) for x in zip(*blocks))


def _grid_points(scene, a, grid, Rl, pl, Rh, ph, Ra, pa, margin):
    """``(d, w_a, w_b, n)`` of the grid points near shape ``a`` (a box or a capsule) against it, ``w_b``
    the grid point, ``n`` from the field towards the shape (world); None for other kinds."""
    s = scene.shapes[a]
    if s.kind not in ("box", "capsule"):
        return None
    near = np.linalg.norm(grid - pl, axis=1) < s.bounding_radius + margin
    V = grid[near] @ Rh.T + ph
    m = len(V)
    z = np.zeros(m)
    if s.kind == "box":
        d, wv, ws, n = sphere_box(V, z, np.tile(Ra, (m, 1, 1)), np.tile(pa, (m, 1)), np.tile(np.array(s.size) / 2, (m, 1)))
    else:
        d, wv, ws, n = sphere_capsule(V, z, np.tile(pa, (m, 1)), np.tile(Ra[:, 2], (m, 1)), np.full(m, s.size[1] / 2),
                                      np.full(m, s.size[0]))
    return d, ws, wv, -n
