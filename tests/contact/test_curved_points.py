"""How a curved shape's contact moves with the state (sparsedyn.contact.curved_points): an ellipsoid's
point on a face slides as its support point (its derivative by central differences and, for a round
ellipsoid, by hand), an ellipsoid's normal against a sphere turns as the sphere's centre moves, in either
order (central differences of the closest point's normal), and where a hit is on a face (by hand).
The step's derivatives that use them are tested in tests/contact/test_scene_derivatives.py."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.collision import placements
from sparsedyn.contact.curved_points import _on_face, sliding_point, turning_normal
from sparsedyn.contact.ellipsoid import point_ellipsoid
from test_scene_geometry import BALL, BLOCK, FLOOR, Q, TURNED, _ball_model, _egg_model


def _hit(scene, q, n, point):
    """A slot's data ``[mu, p_a (3), n (3), offset]`` of the ellipsoid of ``scene`` (shape 0) on the plane
    of unit normal ``n`` through ``point``: its support point along ``-n`` (in its frame's axes)."""
    R, p = placements(scene, q)
    e = np.asarray(scene.shapes[0].size)
    m = -R[0].T @ n
    x = p[0] + R[0] @ (e ** 2 * m / np.linalg.norm(e * m))
    Rf, pf = sd.frame_placements(scene.model, q)
    return np.concatenate([[0.5], Rf[0].T @ (x - pf[0]), n, [n @ point]]), R, p, Rf[0], pf[0]


def _support_in_body(scene, q, u):
    """The ellipsoid's support point along ``-n`` in its frame's axes, ``n`` given in those axes as ``u``."""
    R, p = placements(scene, q)
    Rf, pf = sd.frame_placements(scene.model, q)
    e, m = np.asarray(scene.shapes[0].size), -R[0].T @ (Rf[0] @ u)
    return Rf[0].T @ (p[0] + R[0] @ (e ** 2 * m / np.linalg.norm(e * m)) - pf[0])


def _symmetric(k):
    return np.array([[k[0], k[3], k[4]], [k[3], k[1], k[5]], [k[4], k[5], k[2]]])


def test_an_ellipsoids_point_on_a_face_slides_as_its_support_point():
    """On a plane, ``K`` is the derivative of the support point (the frame's axes) in the normal (the
    frame's axes), central differences of its closed form on the unit sphere's tangent plane (truncation
    h^2 / 6 of its third derivative, below 1e-9 at h = 1e-5, rounding eps |x| / h about 1e-12); ``K`` is
    symmetric and ``K n = 0`` (to rounding)."""
    q = np.r_[Q[:3], Q[3:] / np.linalg.norm(Q[3:])]
    scene = sd.Scene(_egg_model(), world=[FLOOR])
    n = np.array([0.0, 0.0, 1.0])
    data, R, p, Ra, oa = _hit(scene, q, n, np.zeros(3))
    K = _symmetric(sliding_point(scene, (0, 1), R, p, Ra, oa, data))
    u = Ra.T @ n
    h = 1e-5
    for t in np.linalg.svd(u[None])[2][1:]:                      # two unit tangents of the normal's sphere
        dx = (_support_in_body(scene, q, u + h * t) - _support_in_body(scene, q, u - h * t)) / (2 * h)
        assert np.abs(K @ t - dx).max() <= 1e-8
    assert np.abs(K @ u).max() <= 16 * np.finfo(float).eps * np.abs(K).max() and np.array_equal(K, K.T)


def test_a_round_ellipsoids_point_slides_as_a_spheres():
    """An ellipsoid of three equal semi-axes ``r`` is a sphere, whose point under the normal ``u`` (the
    frame's axes) is ``c - r u``: ``K = -r (I - u u^T)`` by hand."""
    r = 0.07
    scene = sd.Scene(_egg_model((r, r, r)), world=[FLOOR])
    q = np.r_[Q[:3], Q[3:] / np.linalg.norm(Q[3:])]
    n = np.array([0.0, 0.0, 1.0])
    data, R, p, Ra, oa = _hit(scene, q, n, np.zeros(3))
    u = Ra.T @ n
    K = _symmetric(sliding_point(scene, (0, 1), R, p, Ra, oa, data))
    assert np.abs(K + r * (np.eye(3) - np.outer(u, u))).max() <= 4 * np.finfo(float).eps * r


@pytest.mark.parametrize("first", ["ellipsoid", "sphere"])
def test_an_ellipsoids_normal_turns_as_a_spheres_centre_moves(first):
    """Against a sphere, ``K`` is the derivative of the normal (from b towards a at the ellipsoid's point
    closest to the sphere's centre, in the axes of the ellipsoid's slot frame) in the sphere's centre (the
    same axes), the ellipsoid first in its pair (a robot's against a world ball) or second (a robot ball
    against a world ellipsoid): against central differences of the closest point's normal
    (``point_ellipsoid``) at steps h and h / 2, within twice their difference (the truncation, h^2 times
    the third derivative, falls by 4) and their rounding (eps / h); ``K`` is symmetric and ``K n = 0``."""
    q = np.r_[Q[:3], Q[3:] / np.linalg.norm(Q[3:])]
    if first == "ellipsoid":
        centre = np.array([0.1, -0.1, 0.2])
        scene = sd.Scene(_egg_model(), world=[sd.Shape("sphere", (0.05,), placement=(np.eye(3), centre))], margin=1.0)
    else:
        egg = sd.Shape("ellipsoid", (0.12, 0.08, 0.05), placement=(TURNED.E, [0.1, -0.3, 0.2]), name="egg")
        scene = sd.Scene(_ball_model(), world=[egg], margin=1.0)
    hits = sd.collide(scene, q)
    (n,), (wa,), (wb,) = hits.normals, hits.witness_a, hits.witness_b
    R, p = placements(scene, q)
    Rf, pf = sd.frame_placements(scene.model, q)
    data = np.concatenate([[0.5], Rf[0].T @ (wa - pf[0]), n, [n @ wb]])
    if first == "ellipsoid":                                     # (the robot's frame's axes; the normal inwards)
        e, Rs, sign = 0, Rf[0], -1.0
        K = _symmetric(turning_normal(scene, e, R, Rs, data, wa, 0.05, sign))
    else:                                                        # (the world's axes; the normal outwards)
        e, Rs, sign, centre = 1, np.eye(3), 1.0, p[0]
        K = _symmetric(turning_normal(scene, e, R, Rs, data, wa, scene.shapes[0].size[0], sign))

    def normal(dy):                                              # the normal in Rs's axes, the centre moved dy
        return -sign * Rs.T @ point_ellipsoid((centre + Rs @ dy)[None], R[e], p[e], scene.shapes[e].size)[3][0]

    u = Rs.T @ n
    assert np.abs(normal(np.zeros(3)) - u).max() <= 1e-12
    for axis in np.eye(3):
        d1, d2 = ((normal(h * axis) - normal(-h * axis)) / (2 * h) for h in (1e-5, 5e-6))
        assert np.abs(K @ axis - d2).max() <= 2 * np.abs(d1 - d2).max() + 64 * np.finfo(float).eps / 5e-6
    assert np.abs(K @ u).max() <= 64 * np.finfo(float).eps * np.abs(K).max() and np.array_equal(K, K.T)
    assert np.abs(K).max() >= 1.0                                # (a curved surface: the normal turns)


#: A saddle-free twisted field: heights ``0.2 + 0.4 X Y`` (``X``, ``Y`` = ``(x + 1) / 2``, ``(y + 1) / 2``), top 0.3 m.
#: Its cell (1, 1) (x, y in [-0.5, 0]) has the heights 0.225, 0.25, 0.3, 0.25 at (x, y) = (-0.5, -0.5), (0, -0.5),
#: (0, 0), (-0.5, 0): the triangle below its diagonal rises 0.3 * 0.025 / 0.5 along x and 0.3 * 0.05 / 0.5 along
#: y (its normal along (-0.015, -0.03, 1)), the one above 0.3 * 0.05 / 0.5 along x and 0.3 * 0.025 / 0.5 along y.
TWISTED = sd.Shape("hfield", (1.0, 1.0, 0.3, 0.1), heights=0.2 + 0.4 * np.outer(*[np.linspace(0, 1, 5)] * 2),
                   name="twisted")


@pytest.mark.parametrize("world, x, n, want", [
    (FLOOR, [3.0, -2.0, 0.0], [0, 0, 1.0], True),                     # a plane: a face anywhere
    (BLOCK, [-1.1, 0.1, 0.1], [0, 0, 1.0], True),                     # a box's top
    (BLOCK, [-0.8, 0.0, 0.05], [1.0, 0, 0], True),                    # its side
    (BLOCK, [-0.8, 0.1, 0.1], [0.6, 0, 0.8], False),                  # its edge
    (BALL, [1.0, 0.0, 0.2], [0, 0, 1.0], False),                      # a sphere has no face
    (TWISTED, [-0.1, -0.4, 0.0], [-0.015, -0.03, 1.0], True),         # below the cell's diagonal
    (TWISTED, [-0.4, -0.1, 0.0], [-0.015, -0.03, 1.0], False),        # above it: the other triangle's normal
    (TWISTED, [-0.4, -0.1, 0.0], [-0.03, -0.015, 1.0], True),
    (TWISTED, [-0.5, -0.5, 0.0], [0.0, 0.0, 1.0], False),             # a grid point's hit straight up
])
def test_a_face_is_told_at_the_hit(world, x, n, want):
    """Where an ellipsoid's point slides (its hit's normal is a face's normal of ``b``): a plane anywhere,
    a box along its axes, a height field on the triangle under the hit; never a sphere's."""
    scene = sd.Scene(_egg_model(), world=[world])
    R, p = placements(scene, np.r_[Q[:3], Q[3:] / np.linalg.norm(Q[3:])])
    n = np.asarray(n) / np.linalg.norm(n)
    assert _on_face(scene, 1, R[1], p[1], np.asarray(x, float), n) is want
