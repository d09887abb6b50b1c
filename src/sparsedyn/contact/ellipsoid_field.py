"""An ellipsoid against a height field's surface: :func:`ellipsoid_faces`, the contacts of its
support point with each triangle whose face holds that point's projection; :func:`point_ellipsoid`,
a point's signed distance to an ellipsoid (the grid points pressing into it); and
:func:`segment_ellipsoid`, a segment's line's (the triangles' edges: a ridge under it; and where
along it).  Each returns ``(d, w_a, w_b, n)`` with ``a`` the ellipsoid and ``b`` the surface (the conventions of
:mod:`~sparsedyn.contact.closed_forms`): together an ellipsoid's contacts with the surface, wherever its
closest point lies, a face, an edge or a grid point.

The closest point of an ellipsoid of semi-axes ``e`` to a point ``y`` (in its frame) is
``x_i = e_i^2 y_i / (t + e_i^2)``, ``t`` the root greater than ``-min e_i^2`` of
``F(t) = sum (e_i y_i / (t + e_i^2))^2 - 1`` (D. Eberly, "Distance from a point to an ellipse, an
ellipsoid, or a hyperellipsoid", 2013): ``F`` is convex and decreasing there, so Newton's iteration
from a point left of the root, ``max_i (e_i y_i - e_i^2)`` (where ``F >= 0``), rises to it without
passing it.  ``y - x = t y / (t + e^2)``: the signed distance is ``t |y / (t + e^2)|`` and the outward
normal ``y / (t + e^2)``, normalised.
"""

from __future__ import annotations

import numpy as np

from .closed_forms import ellipsoid_plane
from .heightfield import inside_triangles, triangle_normals

__all__ = ["point_ellipsoid", "segment_ellipsoid", "ellipsoid_faces"]

#: A point's coordinate nearer a plane of symmetry than this times the smallest semi-axis is taken
#: this far off it (where it is 0, ``F`` has no pole at ``-min e^2`` to start left of).
_FLOOR = np.finfo(float).eps
#: Newton's iterations at most (each point stops where the next iterate no longer rises; from next to
#: the pole each moves at least 1.5 times as far from it, so about 90 leave it, and a few more reach
#: the root).
_ITERATIONS = 200


def _closest(y, e):
    """``(d (m,), x (m, k), u (m, k))``: the signed distance of points ``y`` (m, k) from the ellipsoids
    (k = 3) or ellipses (k = 2) of semi-axes ``e`` (m, k) along their frames' axes, the closest points
    ``x`` and the unit outward normals there ``u``.  A point on a plane of symmetry is taken
    :data:`_FLOOR` of the smallest semi-axis off it, which moves its answer by as much."""
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


def point_ellipsoid(P, Ra, pa, radii):
    """Points ``P`` (m, 3) against the ellipsoid of orientation ``Ra`` (3, 3), centre ``pa`` (3,) and
    semi-axes ``radii`` (3,) (along its frame's axes), world: ``(d (m,), w_a (m, 3), w_b (m, 3), n (m,
    3))``, ``d`` signed (negative: the point inside), ``w_a`` the ellipsoid's closest point, ``w_b`` the
    point, ``n`` the unit normal from the point towards the ellipsoid (its inward normal at ``w_a``)
    (:func:`_closest`)."""
    P = np.asarray(P, float).reshape(-1, 3)
    d, x, u = _closest((P - pa) @ Ra, np.broadcast_to(np.asarray(radii, float), P.shape))
    return d, x @ Ra.T + pa, P, -(u @ Ra.T)


def segment_ellipsoid(P0, P1, Ra, pa, radii):
    """Segments from ``P0`` to ``P1`` (m, 3) against the ellipsoid ``(Ra, pa, radii)`` of
    :func:`point_ellipsoid`, world: ``(d, w_a, w_b, n, s)`` of each segment's line (``d`` signed, ``w_a``
    on the ellipsoid, ``w_b`` on the line, ``n`` from the line towards the ellipsoid, perpendicular to
    it) and ``s`` (m,), where ``w_b`` lies along the segment (in [0, 1]: on it).  Seen along the line,
    the ellipsoid ``x^T M x <= 1`` is the ellipse ``y^T (M - M u u^T M / u^T M u) y <= 1`` of the plane
    across the line's direction ``u``, and the line a point of it: their distance is the line's; the
    ellipsoid's point over the ellipse's closest ``y`` is ``y - (u^T M y / u^T M u) u``."""
    e = np.asarray(radii, float)
    p0, v = (P0 - pa) @ Ra, (P1 - P0) @ Ra
    length = np.linalg.norm(v, axis=1)
    u = v / length[:, None]
    k = np.argmin(np.abs(u), 1)                        # (the axis least along u: the plane's first direction)
    b1 = np.cross(u, np.eye(3)[k])
    b1 /= np.linalg.norm(b1, axis=1)[:, None]
    b2 = np.cross(u, b1)
    M = 1.0 / (e * e)
    Mu = M * u
    uMu = (u * Mu).sum(1)
    N = [[((bi * M * bj).sum(1) - (bi * Mu).sum(1) * (bj * Mu).sum(1) / uMu) for bj in (b1, b2)] for bi in (b1, b2)]
    half, mid = (N[0][0] - N[1][1]) / 2, (N[0][0] + N[1][1]) / 2
    root = np.hypot(half, N[0][1])
    theta = np.arctan2(N[0][1], half) / 2              # (the eigenvector of the larger eigenvalue)
    c, s_ = np.cos(theta), np.sin(theta)
    E1, E2 = c[:, None] * b1 + s_[:, None] * b2, c[:, None] * b2 - s_[:, None] * b1
    axes = 1.0 / np.sqrt(np.column_stack([mid + root, np.maximum(mid - root, 0.0)]))
    d, y2, _ = _closest(np.column_stack([(p0 * E1).sum(1), (p0 * E2).sum(1)]), axes)
    y = y2[:, :1] * E1 + y2[:, 1:] * E2
    x = y - ((Mu * y).sum(1) / uMu)[:, None] * u
    x /= np.sqrt((M * x * x).sum(1))[:, None]          # (onto the surface: the ellipse's axes carry N's rounding)
    along = ((x - p0) * u).sum(1)
    wb = p0 + along[:, None] * u
    out = M * x
    out /= np.linalg.norm(out, axis=1)[:, None]
    return d, x @ Ra.T + pa, wb @ Ra.T + pa, -(out @ Ra.T), along / length


def ellipsoid_faces(T, Ra, pa, radii):
    """The ellipsoid ``(Ra (3, 3), pa (3,), radii (3,))`` against triangles ``T`` (m, 3, 3) of a height
    field, corners counter-clockwise seen from above (their normals up), all in one frame: ``(d, w_a,
    w_b, n)`` of the triangles whose face holds the projection of the ellipsoid's support point along
    its normal (:func:`~sparsedyn.contact.closed_forms.ellipsoid_plane`), ``n`` the face's normal; of
    the others, none."""
    nt, m = triangle_normals(T), len(T)
    d, wa, wb, n = ellipsoid_plane(np.broadcast_to(Ra, (m, 3, 3)), np.broadcast_to(pa, (m, 3)),
                                   np.broadcast_to(radii, (m, 3)), nt, T[:, 0])
    inside = inside_triangles(T, wb)
    return d[inside], wa[inside], wb[inside], n[inside]
