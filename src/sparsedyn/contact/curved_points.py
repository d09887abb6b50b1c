"""How a curved shape's contact moves with the state, for the derivatives of a step in a scene
(:mod:`~sparsedyn.contact.scene_derivatives`, whose module docstring defines a slot's ``K``): an ellipsoid's
or a cylinder's rim point on a face slides over its surface as the normal turns in its axes
(:func:`sliding_point`), and an ellipsoid's normal against a sphere turns as the sphere's centre moves over
it (:func:`turning_normal`).  Each is told from one hit, its witness points and normal (a slot's data).
"""

from __future__ import annotations

import numpy as np

from .ellipsoid import ellipsoid_support, normal_turning
from .heightfield import hfield_triangles, triangle_normals
from .scene_base import remembered

__all__ = ["sliding_point", "turning_normal"]


def sliding_point(scene, ij, R, p, Ra, oa, data):
    """``K`` (6,) ``[K_xx, K_yy, K_zz, K_xy, K_xz, K_yz]`` of the hit ``data`` (a slot's, of frame ``a`` placed at
    ``(Ra, oa)``) of the shape ``ij[0]`` (an ellipsoid or a cylinder) on the shape ``ij[1]`` (shapes placed at
    ``(R, p)``): where the hit is on a face of the shape and is a's support point along ``-n``
    (:func:`_support`), that point's derivative in the normal, both in a's axes; zero elsewhere (an edge or a
    point of the shape, a cylinder's other rim points or its flat face: its point held)."""
    i, j = ij
    n = data[4:7]
    wa = Ra @ data[1:4] + oa
    if not _on_face(scene, j, R[j], p[j], wa - (n @ wa - data[7]) * n, n):
        return 0.0
    shape = scene.shapes[i]
    x, D = _support(shape.kind, np.asarray(shape.size, float), -R[i].T @ n, R[i].T @ (wa - p[i]))
    if D is None or np.abs(x - R[i].T @ (wa - p[i])).max() > _SUPPORT_OFF * max(shape.size):
        return 0.0
    B = Ra.T @ R[i]
    return (-B @ D @ B.T)[[0, 1, 2, 0, 0, 1], [0, 1, 2, 1, 2, 2]]  # (the support along -n: d/dn = -d/dm)


def turning_normal(scene, e, R, Rs, data, wa, r, sign):
    """``K`` (6,) of the hit ``data`` (a slot's; ``wa`` a's witness point, world) of the ellipsoid ``e`` (shapes
    turned by ``R``) against a sphere of radius ``r``: how the hit's normal (from b towards a) turns as the
    sphere's centre moves, both in the axes ``Rs`` of the ellipsoid's slot frame, ``sign B A B^T`` (``A`` of
    :func:`~sparsedyn.contact.ellipsoid.normal_turning` at the hit, ``B`` the ellipsoid's axes in its frame's;
    ``sign`` -1 where the ellipsoid is ``a``, its outward normal ``-n``, and 1 where it is ``b``)."""
    n = data[4:7]
    t = n @ wa - data[7] + r                                     # (the sphere's centre from the surface)
    B = Rs.T @ R[e]
    K = sign * (B @ normal_turning(np.asarray(scene.shapes[e].size, float), sign * (R[e].T @ n), t) @ B.T)
    return K[[0, 1, 2, 0, 0, 1], [0, 1, 2, 1, 2, 2]]


#: A cylinder's rim point moves with the normal where the normal is this far from its axis at least (nearer,
#: the cylinder stands on its face: its points are held).
_TILTED = 1e-3

#: A hit's normal is a face's where they differ by this at most: the collision's accuracy (exact closed
#: forms; coal's GJK to its tolerance, 1e-11), far below the angle between two faces of a box or a field.
_SAME_NORMAL = 1e-9

#: A hit is a curved shape's support point where its witness lies within this fraction of the shape's size
#: of it: coal's GJK leaves the witness on a curved surface off by about 1e-6 m (the square root of its
#: tolerance), a cylinder's other rim points lie a radius away.
_SUPPORT_OFF = 1e-4


def _support(kind, size, m, x):
    """``(s, D)``: the support point ``s`` (3,) along ``m`` (3,) of an ellipsoid (semi-axes ``size``) or a
    cylinder (``(radius, length)`` along z: the rim of the cap on the side of the point ``x``) about its
    centre, its axes, and its derivative ``D = ds/dm`` (3, 3) on the sphere of directions: the ellipsoid's
    :func:`~sparsedyn.contact.ellipsoid.ellipsoid_support`, the rim's ``r (P - u u^T) / |P m|`` (``P`` the
    projection on the rim's plane, ``u = P m / |P m|``); ``D`` None for a cylinder standing on its face."""
    if kind == "ellipsoid":
        return ellipsoid_support(size, m)
    Pm = np.array([m[0], m[1], 0.0])
    L = np.linalg.norm(Pm)
    if L < _TILTED * np.linalg.norm(m):
        return None, None
    u = Pm / L
    return size[0] * u + np.copysign(size[1] / 2, x[2]) * np.array([0, 0, 1.0]), \
        size[0] * (np.diag([1.0, 1.0, 0.0]) - np.outer(u, u)) / L


def _on_face(scene, j, R, p, x, n):
    """Whether the world point ``x`` with the normal ``n`` (world) is on a face of the shape ``j`` placed
    at ``(R, p)``: a plane's anywhere, a box's where ``n`` is one of its axes, a height field's where
    ``n`` is the normal of the triangle under ``x``."""
    shape, nl = scene.shapes[j], R.T @ n
    if shape.kind == "box":
        return bool(np.abs(nl).max() >= 1.0 - _SAME_NORMAL)
    if shape.kind == "hfield":
        normals = _field_normals(scene, j)
        (sx, sy), (nrow, ncol) = shape.size[:2], normals.shape[:2]
        fx, fy = (R.T @ (x - p))[:2] / (2 * sx, 2 * sy) * (ncol, nrow) + (ncol / 2, nrow / 2)
        c, r = min(max(int(fx), 0), ncol - 1), min(max(int(fy), 0), nrow - 1)
        below = fx - c >= fy - r                                 # below the cell's diagonal: its first triangle
        return bool(np.abs(normals[r, c, 0 if below else 1] - nl).max() <= _SAME_NORMAL)
    return shape.kind == "plane"


def _field_normals(scene, j):
    """The unit normals (nrow - 1, ncol - 1, 2, 3) of the height field shape ``j``'s triangles per cell (its
    frame's axes, up), kept in ``scene.cache``."""
    def make():
        shape = scene.shapes[j]
        N = triangle_normals(hfield_triangles(shape.size, shape.heights))
        return N.reshape(shape.heights.shape[0] - 1, shape.heights.shape[1] - 1, 2, 3)
    return remembered(scene, "hfield normals", j, make)
