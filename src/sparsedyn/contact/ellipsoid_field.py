"""An ellipsoid against a height field's surface: :func:`ellipsoid_faces`, the contacts of its
support point with each triangle whose face holds that point's projection; and
:func:`segment_ellipsoid`, a segment's line's (the triangles' edges: a ridge under it; and where
along it).  Each returns ``(d, w_a, w_b, n)`` with ``a`` the ellipsoid and ``b`` the surface (the conventions of
:mod:`~sparsedyn.contact.closed_forms`): together an ellipsoid's contacts with the surface, wherever its
closest point lies, a face, an edge or a grid point (a grid point's is
:func:`~sparsedyn.contact.ellipsoid.point_ellipsoid`'s).

A point's closest point on an ellipsoid, and an ellipse's seen along a line, are
:func:`~sparsedyn.contact.ellipsoid.ellipsoid_closest`'s (Eberly's root).
"""

from __future__ import annotations

import numpy as np

from ..model.spatial import cross3
from .closed_forms import ellipsoid_plane
from .ellipsoid import ellipsoid_closest
from .heightfield import inside_triangles, triangle_normals

__all__ = ["segment_ellipsoid", "ellipsoid_faces"]

def segment_ellipsoid(P0, P1, Ra, pa, radii):
    """Segments from ``P0`` to ``P1`` (m, 3) against the ellipsoid ``(Ra, pa, radii)`` of
    :func:`~sparsedyn.contact.ellipsoid.point_ellipsoid`, world: ``(d, w_a, w_b, n, s)`` of each segment's line (``d`` signed, ``w_a``
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
    b1 = cross3(u, np.eye(3)[k])
    b1 /= np.linalg.norm(b1, axis=1)[:, None]
    b2 = cross3(u, b1)
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
    d, y2, _ = ellipsoid_closest(np.column_stack([(p0 * E1).sum(1), (p0 * E2).sum(1)]), axes)
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
