"""An ellipsoid against a height field's pieces (sparsedyn.contact.ellipsoid_field): a point's closest
point on an ellipsoid by hand on its axes, and at random points inside and out the conditions that
define it (on the surface, the point along the normal there) with a dense sampling of the surface
as the oracle that it is the closest; the support point on a triangle's face against the plane's
closed form, and no hit where its projection falls off the face."""

import numpy as np
import pytest

from conftest import rounding_bound
from sparsedyn.contact.closed_forms import ellipsoid_plane
from sparsedyn.contact.ellipsoid_field import ellipsoid_faces, point_ellipsoid

E = np.array([0.3, 0.2, 0.1])


def _rotation(rng):
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Q * np.linalg.det(Q)


@pytest.mark.parametrize("point, d, closest", [
    ([0.5, 0.0, 0.0], 0.2, [0.3, 0.0, 0.0]),        # beyond the largest semi-axis
    ([0.0, -0.45, 0.0], 0.25, [0.0, -0.2, 0.0]),
    ([0.0, 0.0, 0.04], -0.06, [0.0, 0.0, 0.1]),      # inside, on the smallest axis: its end is the closest
    ([0.0, 0.0, -0.3], 0.2, [0.0, 0.0, -0.1]),
])
def test_points_on_the_axes_by_hand(point, d, closest):
    """Points on an axis of the ellipsoid (0.3, 0.2, 0.1) turned and moved: the distance to that axis's
    end, which is the closest point; the normal from the point towards the ellipsoid.  (A point on a plane
    of symmetry is taken 1e-12 of the smallest semi-axis off it: well within the bound.)"""
    rng = np.random.default_rng(0)
    R, p = _rotation(rng), rng.uniform(-1, 1, 3)
    got_d, wa, wb, n = point_ellipsoid((R @ point + p)[None], R, p, E)
    bound = 1e-12 + rounding_bound(32)
    want_n = np.sign(d) * (np.array(closest) - point) / abs(d)
    assert abs(got_d[0] - d) <= bound
    assert np.abs(wa[0] - (R @ closest + p)).max() <= bound
    assert np.abs(wb[0] - (R @ point + p)).max() <= 4 * rounding_bound(1)
    assert np.abs(n[0] - R @ want_n).max() <= bound


def test_random_points_have_the_closest_point_of_the_surface():
    """Points inside and outside a turned ellipsoid: ``w_a`` lies on the surface, the point lies at ``-d``
    along ``n`` from it, ``n`` is the inward normal there (the gradient's direction): the conditions of a
    critical point of the distance.  That it is the closest: against 250,000 points of the surface (a
    grid in the two angles, a point of the surface within ``delta`` of every other), the nearest lies
    between ``|d|`` and ``|d| + delta``."""
    rng = np.random.default_rng(1)
    R, p = _rotation(rng), rng.uniform(-1, 1, 3)
    P = p + rng.normal(size=(300, 3)) * 0.15
    d, wa, wb, n = point_ellipsoid(P, R, p, E)
    x = (wa - p) @ R
    bound = rounding_bound(64)
    assert np.abs(((x / E) ** 2).sum(1) - 1).max() <= bound
    assert np.abs(wa - d[:, None] * n - P).max() <= bound
    g = x / E ** 2
    assert np.abs(n + (g / np.linalg.norm(g, axis=1)[:, None]) @ R.T).max() <= bound
    inside = (((P - p) @ R / E) ** 2).sum(1) < 1
    assert np.array_equal(d < 0, inside) and 50 <= inside.sum() <= 250
    u, w = np.meshgrid(np.linspace(0, np.pi, 500), np.linspace(0, 2 * np.pi, 500, endpoint=False), indexing="ij")
    S = np.column_stack([np.sin(u).ravel() * np.cos(w).ravel(), np.sin(u).ravel() * np.sin(w).ravel(),
                         np.cos(u).ravel()]) * E @ R.T + p
    delta = E.max() * np.pi / 499                  # (the longest step between neighbouring samples, along an arc)
    for k in range(0, 300, 3):
        nearest = np.sqrt(((S - P[k]) ** 2).sum(1).min())
        assert abs(d[k]) - bound <= nearest <= abs(d[k]) + delta


def test_the_support_point_on_a_face_is_the_planes_and_none_off_it():
    """A turned ellipsoid over a tilted triangle wide enough to hold its support point's projection: the
    plane's closed form; over a triangle beside it (the same plane, shifted off): no hit; two triangles
    whose common edge holds it: both."""
    rng = np.random.default_rng(2)
    R, p = _rotation(rng), np.array([0.1, -0.05, 0.35])
    tilt = np.array([[np.cos(0.2), 0, np.sin(0.2)], [0, 1, 0], [-np.sin(0.2), 0, np.cos(0.2)]])
    T = np.array([[-2.0, -2.0, 0.0], [2.0, -2.0, 0.0], [0.0, 3.0, 0.0]]) @ tilt.T
    d, wa, wb, n = ellipsoid_faces(T[None], R, p, E)
    want = ellipsoid_plane(R[None], p[None], E[None], tilt[:, 2][None], T[0][None])
    assert len(d) == 1
    for x, y in zip((d, wa, wb, n), want):
        assert np.abs(x - y).max() <= rounding_bound(16)
    off = T + tilt @ [5.0, 0.0, 0.0]
    assert len(ellipsoid_faces(off[None], R, p, E)[0]) == 0
    # two triangles sharing the edge under the support point: both hold it, on their common edge
    x = want[2][0]
    e = tilt @ [0.0, 1.0, 0.0]
    pair = np.array([[x - e, x + tilt @ [1.0, 0.0, 0.0], x + e], [x - e, x + e, x - tilt @ [1.0, 0.0, 0.0]]])
    got = ellipsoid_faces(pair, R, p, E)
    assert len(got[0]) == 2 and np.abs(got[1] - want[1]).max() <= rounding_bound(16)
