"""An ellipsoid's closest point to a point (:func:`ellipsoid_closest`, in its frame; :func:`point_ellipsoid`,
world) and a sphere's closest pair with an ellipsoid (:func:`ellipsoid_sphere`, exact: coal's GJK leaves a
curved shape's witness point off by about the square root of its tolerance).

The closest point of an ellipsoid of semi-axes ``e`` to a point ``y`` (in its frame) is
``x_i = e_i^2 y_i / (t + e_i^2)``, ``t`` the root greater than ``-min e_i^2`` of
``F(t) = sum (e_i y_i / (t + e_i^2))^2 - 1`` (D. Eberly, "Distance from a point to an ellipse, an
ellipsoid, or a hyperellipsoid", 2013): ``F`` is convex and decreasing there, so Newton's iteration
from a point left of the root, ``max_i (e_i y_i - e_i^2)`` (where ``F >= 0``), rises to it without
passing it.  ``y - x = t y / (t + e^2)``: the signed distance is ``t |y / (t + e^2)|`` and the outward
normal ``y / (t + e^2)``, normalised.  A sphere of centre ``c`` and radius ``r`` is as far from the
ellipsoid as ``c`` is from it, less ``r`` (inside too: the ellipsoid grown by ``r`` is its offset surface,
so the least translation that parts them is along the normal at ``c``'s closest point).

As ``y`` moves, its closest point is the support point ``s(m)`` of the outward normal ``m`` there, and ``y =
s(m) + t m``: on the tangent plane ``dy = (D + t) dm`` (``D = ds/dm``, :func:`ellipsoid_support`), so the
normal turns by ``dm = (D + t P)^+ dy`` (:func:`normal_turning`; ``P`` the projection on the tangent plane).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ellipsoid_closest", "point_ellipsoid", "ellipsoid_sphere", "ellipsoid_support", "normal_turning"]

#: A point's coordinate nearer a plane of symmetry than this times the smallest semi-axis is taken
#: this far off it (where it is 0, ``F`` has no pole at ``-min e^2`` to start left of).
_FLOOR = np.finfo(float).eps
#: Newton's iterations at most (each point stops where the next iterate no longer rises; from next to
#: the pole each moves at least 1.5 times as far from it, so about 90 leave it, and a few more reach
#: the root).
_ITERATIONS = 200


def ellipsoid_closest(y, e):
    """``(d (m,), x (m, k), u (m, k))``: the signed distance of points ``y`` (m, k) from the ellipsoids
    (k = 3) or ellipses (k = 2) of semi-axes ``e`` (m, k) along their frames' axes, the closest points
    ``x`` and the unit outward normals there ``u``.  A point on a plane of symmetry is taken
    :data:`_FLOOR` of the smallest semi-axis off it, which moves its answer by as much.  One point of an
    ellipsoid: :func:`_closest_one`."""
    if y.shape == (1, 3):
        return _closest_one(y[0].tolist(), e.reshape(3).tolist())
    sign = np.where(y < 0, -1.0, 1.0)
    b = e * e
    z = np.maximum(np.abs(y), _FLOOR * e.min(1, keepdims=True))  # (on a plane of symmetry: a root right of -min b)
    a2 = (e * z) ** 2
    t = (e * z - b).max(1)                             # (F(t) >= 0: left of the root)
    for _ in range(_ITERATIONS):
        w = 1.0 / (t[:, None] + b)
        F = (a2 * w * w).sum(1) - 1.0
        step = F / (2.0 * (a2 * w * w * w).sum(1))
        moved = t + step > t
        if not moved.any():
            break
        t = np.where(moved, t + step, t)
    u = sign * z / (t[:, None] + b)                    # (y - x) / t, the outward normal's direction
    L = np.linalg.norm(u, axis=1)
    x = b * u
    x /= np.sqrt(((x / e) ** 2).sum(1))[:, None]       # (onto the surface: near a pole t + e^2 carries t's rounding)
    return t * L, x, u / L[:, None]


def _closest_one(y, e):
    """:func:`ellipsoid_closest` of one point ``y`` of an ellipsoid ``e`` (lists of 3): the same operations in
    the same order on Python's floats (its answer to rounding: NumPy may sum a row of three in another
    order; its calls on rows of three would cost five times these few dozen products), as arrays (1,),
    (1, 3), (1, 3)."""
    sign = [-1.0 if c < 0 else 1.0 for c in y]
    b = [x * x for x in e]
    z = [max(abs(c), _FLOOR * min(e)) for c in y]
    a2 = [(x * c) ** 2 for x, c in zip(e, z)]
    t = max(x * c - bx for x, c, bx in zip(e, z, b))
    for _ in range(_ITERATIONS):
        w = [1.0 / (t + bx) for bx in b]
        F = a2[0] * w[0] * w[0] + a2[1] * w[1] * w[1] + a2[2] * w[2] * w[2] - 1.0
        step = F / (2.0 * (a2[0] * w[0] * w[0] * w[0] + a2[1] * w[1] * w[1] * w[1] + a2[2] * w[2] * w[2] * w[2]))
        if not t + step > t:
            break
        t = t + step
    u = [sg * c / (t + bx) for sg, c, bx in zip(sign, z, b)]
    L = math.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
    x = [bx * c for bx, c in zip(b, u)]
    r = [c / ex for c, ex in zip(x, e)]
    s = math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
    return np.array([t * L]), np.array([[c / s for c in x]]), np.array([[c / L for c in u]])


def point_ellipsoid(P, Ra, pa, radii):
    """Points ``P`` (m, 3) against the ellipsoid of orientation ``Ra`` (3, 3), centre ``pa`` (3,) and
    semi-axes ``radii`` (3,) (along its frame's axes), world: ``(d (m,), w_a (m, 3), w_b (m, 3), n (m,
    3))``, ``d`` signed (negative: the point inside), ``w_a`` the ellipsoid's closest point, ``w_b`` the
    point, ``n`` the unit normal from the point towards the ellipsoid (its inward normal at ``w_a``)
    (:func:`ellipsoid_closest`)."""
    P = np.asarray(P, float).reshape(-1, 3)
    d, x, u = ellipsoid_closest((P - pa) @ Ra, np.broadcast_to(np.asarray(radii, float), P.shape))
    return d, x @ Ra.T + pa, P, -(u @ Ra.T)


def ellipsoid_sphere(Ra, pa, radii, cb, rb):
    """Ellipsoids of orientation ``Ra`` (k, 3, 3), centre ``pa`` (k, 3) and semi-axes ``radii`` (k, 3) and
    spheres of centre ``cb`` (k, 3), radius ``rb`` (k,), world: ``(d, w_a, w_b, n)`` of
    :mod:`~sparsedyn.contact.closed_forms` (``n`` from the sphere towards the ellipsoid, its inward
    normal at ``w_a``, the closest point to the centre; ``w_b = c_b + r_b n``)."""
    y = ((cb - pa)[:, None] @ Ra)[:, 0]                          # (R^T (c - p), k at once)
    d, x, u = ellipsoid_closest(y, np.asarray(radii, float))
    RT = Ra.swapaxes(1, 2)
    n = -(u[:, None] @ RT)[:, 0]
    return d - rb, (x[:, None] @ RT)[:, 0] + pa, cb + rb[:, None] * n, n


def ellipsoid_support(e, m):
    """``(s, D)``: the support point ``s`` (3,) along the unit ``m`` (3,) of the ellipsoid of semi-axes ``e``
    (3,) (its frame) and its derivative ``D = ds/dm`` (3, 3) on the sphere of directions, ``(E^2 - E^2 m
    m^T E^2 / |E m|^2) / |E m|`` (``E = diag(e)``; symmetric, ``D m = 0``)."""
    Em = e ** 2 * m
    h = np.sqrt(m @ Em)
    return Em / h, (np.diag(e ** 2) - np.outer(Em, Em) / h ** 2) / h


def normal_turning(e, m, t):
    """``A`` (3, 3): how the outward normal ``m`` (3,) at the closest point of the ellipsoid of semi-axes ``e``
    (3,) to a point ``y`` at signed distance ``t`` along it turns as ``y`` moves, ``dm = A dy`` (its frame;
    module docstring): ``(D + t P)^+``, computed as ``(D + t P + m m^T)^-1 - m m^T`` (symmetric, ``A m =
    0``; ``D + t`` is invertible on the tangent plane but where ``y`` is a centre of curvature: there, where
    the closest point is not one, zero).  Python's floats: a 3 x 3 inverse by its cofactors (NumPy's calls
    would cost five times its few dozen products)."""
    (x, y, z), (e0, e1, e2) = (float(c) for c in m), (float(c) ** 2 for c in e)
    u, v, w = e0 * x, e1 * y, e2 * z                              # (E^2 m)
    h = math.sqrt(x * u + y * v + z * w)
    g, s = 1.0 / h ** 3, 1.0 / h
    a, b, c = e0 * s - u * u * g + t + (1.0 - t) * x * x, e1 * s - v * v * g + t + (1.0 - t) * y * y, \
        e2 * s - w * w * g + t + (1.0 - t) * z * z
    d, e, f = -u * v * g + (1.0 - t) * x * y, -u * w * g + (1.0 - t) * x * z, -v * w * g + (1.0 - t) * y * z
    A00, A11, A22, A01, A02, A12 = b * c - f * f, a * c - e * e, a * b - d * d, e * f - d * c, d * f - b * e, \
        d * e - a * f                                            # (the cofactors of M = D + t P + m m^T)
    det = a * A00 + d * A01 + e * A02
    if det == 0.0:
        return np.zeros((3, 3))
    return np.array([[A00 / det - x * x, A01 / det - x * y, A02 / det - x * z],
                     [A01 / det - x * y, A11 / det - y * y, A12 / det - y * z],
                     [A02 / det - x * z, A12 / det - y * z, A22 / det - z * z]])
