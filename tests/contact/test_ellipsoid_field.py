"""An ellipsoid against a height field's pieces (sparsedyn.contact.ellipsoid_field): the support point
on a triangle's face against the plane's closed form, and no hit where its projection falls off the
face."""

import numpy as np

from conftest import rounding_bound
from sparsedyn.contact.closed_forms import ellipsoid_plane
from sparsedyn.contact.ellipsoid_field import ellipsoid_faces

E = np.array([0.3, 0.2, 0.1])


def _rotation(rng):
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Q * np.linalg.det(Q)


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
