"""An ellipsoid's closest points (sparsedyn.contact.ellipsoid): a point's closest point on an ellipsoid
by hand on its axes, and at random points inside and out the conditions that define it (on the surface,
the point along the normal there) with a dense sampling of the surface as the oracle that it is the
closest; a sphere against an ellipsoid by hand, against that sampling, against coal's distance where
they are apart, and as ``sd.collide`` and the step's rows find it in a scene."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact.ellipsoid import ellipsoid_closest, ellipsoid_sphere, normal_turning, point_ellipsoid

E = np.array([0.3, 0.2, 0.1])


def _rotation(rng):
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Q * np.linalg.det(Q)


def _surface(R, p, e, n=500):
    """Points of the ellipsoid ``(R, p, e)``'s surface on an n x n grid of its two angles, and the longest
    step between neighbouring samples (along an arc): a surface point lies within it of a sample."""
    u, w = np.meshgrid(np.linspace(0, np.pi, n), np.linspace(0, 2 * np.pi, n, endpoint=False), indexing="ij")
    S = np.column_stack([np.sin(u).ravel() * np.cos(w).ravel(), np.sin(u).ravel() * np.sin(w).ravel(),
                         np.cos(u).ravel()]) * e @ R.T + p
    return S, e.max() * np.pi / (n - 1)


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
    S, delta = _surface(R, p, E)
    for k in range(0, 300, 3):
        nearest = np.sqrt(((S - P[k]) ** 2).sum(1).min())
        assert abs(d[k]) - bound <= nearest <= abs(d[k]) + delta


@pytest.mark.parametrize("centre, r, d, end", [
    ([0.5, 0.0, 0.0], 0.05, 0.15, [0.3, 0.0, 0.0]),      # beyond the largest semi-axis, apart
    ([0.0, -0.25, 0.0], 0.08, -0.03, [0.0, -0.2, 0.0]),  # overlapping
    ([0.0, 0.0, 0.04], 0.02, -0.08, [0.0, 0.0, 0.1]),    # centre inside, on the smallest axis: its end
])
def test_a_sphere_centred_on_an_axis_by_hand(centre, r, d, end):
    """A sphere whose centre lies on an axis of the turned ellipsoid (0.3, 0.2, 0.1): the distance is the
    centre's to that axis's end, less the radius; the ellipsoid's witness is the end, the normal runs from
    the centre towards it (outside) or from it inwards (inside), the sphere's witness a radius along it."""
    rng = np.random.default_rng(4)
    R, p = _rotation(rng), rng.uniform(-1, 1, 3)
    c, end = np.asarray(centre, float), np.asarray(end, float)
    got_d, wa, wb, n = ellipsoid_sphere(R[None], p[None], E[None], (R @ c + p)[None], np.array([r]))
    inward = -end / np.linalg.norm(end)                  # (the ellipsoid's inward normal at an axis's end)
    bound = 1e-12 + rounding_bound(32)                   # (a point on a plane of symmetry is taken 1e-16 of e off it)
    assert abs(got_d[0] - d) <= bound
    assert np.abs(wa[0] - (R @ end + p)).max() <= bound
    assert np.abs(n[0] - R @ inward).max() <= bound
    assert np.abs(wb[0] - (R @ (c + r * inward) + p)).max() <= bound


def test_random_spheres_are_their_centres_closest_points_less_the_radius():
    """Spheres about a turned ellipsoid, apart and overlapping: the pair's distance is the centre's signed
    distance less the radius, against 250,000 points of the surface (as the point test above: the nearest
    sample lies between ``|d + r|`` and ``|d + r| + delta`` of the centre), the witnesses and normal the
    point's, ``w_a - w_b = d n``."""
    rng = np.random.default_rng(6)
    R, p = _rotation(rng), rng.uniform(-1, 1, 3)
    C = p + rng.normal(size=(120, 3)) * 0.2
    r = rng.uniform(0.01, 0.1, 120)
    d, wa, wb, n = ellipsoid_sphere(np.broadcast_to(R, (120, 3, 3)), np.broadcast_to(p, (120, 3)),
                                    np.broadcast_to(E, (120, 3)), C, r)
    dp, wap, _, np_ = point_ellipsoid(C, R, p, E)
    bound = rounding_bound(64)
    assert np.abs(d - (dp - r)).max() <= bound and np.abs(wa - wap).max() <= bound and np.abs(n - np_).max() <= bound
    assert np.abs(wa - wb - d[:, None] * n).max() <= bound
    assert (d < 0).sum() >= 20 and (d > 0).sum() >= 20
    S, delta = _surface(R, p, E)
    for k in range(0, 120, 2):
        nearest = np.sqrt(((S - C[k]) ** 2).sum(1).min())
        assert abs(d[k] + r[k]) - bound <= nearest <= abs(d[k] + r[k]) + delta


def test_apart_it_is_coals_distance():
    """Apart, coal's GJK distance (at tolerance 1e-11) is the closed form's to 1e-8; its witness points on
    the curved surfaces are within ``sqrt(2 tol R)`` (R the ellipsoid's largest radius of curvature, a
    gap's valley no flatter than it) of the exact ones."""
    import coal
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(120):
        Ra, pa, cb = _rotation(rng), rng.uniform(-0.5, 0.5, 3), rng.uniform(-0.5, 0.5, 3)
        e, rb = rng.uniform(0.05, 0.3, 3), rng.uniform(0.02, 0.3)
        d, wa, wb, n = ellipsoid_sphere(Ra[None], pa[None], e[None], cb[None], np.array([rb]))
        if d[0] <= 1e-3:
            continue                                     # (overlapping: coal's EPA, by hand and sampled above)
        req = coal.DistanceRequest()
        req.gjk_tolerance, req.gjk_max_iterations = 1e-11, 1000
        res = coal.DistanceResult()
        dc = coal.distance(coal.Ellipsoid(*e), coal.Transform3s(Ra, pa), coal.Sphere(rb),
                           coal.Transform3s(np.eye(3), cb), req, res)
        witness = 1.01 * np.sqrt(2 * 1e-11 * (e.max() ** 2 / e.min()))
        # (coal's witness on the ellipsoid lies off its surface by up to 1e-9 m, a few 1e-8 of its implicit
        # function: its distance is as far off; the closed form's lies on it to rounding)
        x = Ra.T @ (wa[0] - pa)
        assert abs(d[0] - dc) <= 1e-8 and abs(((x / e) ** 2).sum() - 1) <= rounding_bound(16)
        assert np.abs(wa[0] - res.getNearestPoint1()).max() <= witness
        assert np.abs(wb[0] - res.getNearestPoint2()).max() <= witness
        checked += 1
    assert checked >= 50


def test_a_robots_ellipsoid_and_a_world_ball_in_collide_and_the_step():
    """A free body's ellipsoid 2 mm into a world sphere below it, and a free ball 2 mm into a turned world
    ellipsoid's highest point (the pair in the other order): ``sd.collide``'s one hit is 2 mm deep along
    +z in both, and a step from rest on the default road holds the body, where it would fall."""
    builder = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0,
                                              rot_inertia=np.eye(3) * 0.01)
    R = _rotation(np.random.default_rng(8))
    up = np.array([0.0, 0.0, 1.0])
    for kind, other, turn in (("ellipsoid", "sphere", np.eye(3)), ("sphere", "ellipsoid", R)):
        sizes = {"ellipsoid": tuple(E), "sphere": (0.15,)}
        g = sd.Geometry("a", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)), kind, sizes[kind], "collision")
        world = sd.Shape(other, sizes[other], placement=(turn, np.zeros(3)), name="b")
        scene = sd.Scene(builder.build().with_geometry(g), world=[world], margin=0.01)
        # the body where its ellipsoid's bottom (on the sphere's top) or its ball's bottom (on the turned
        # ellipsoid's highest point, whose normal is up) dips 2 mm in
        m = turn.T @ up * E
        top = turn @ (E * m) / np.linalg.norm(m)        # (the support point along +z)
        centre = top + (0.15 - 0.002) * up if kind == "sphere" else np.array([0.0, 0.0, E[2] + 0.15 - 0.002])
        q = list(centre) + [0.0, 0.0, 0.0, 1.0]
        hits = sd.collide(scene, q)
        # by hand: 2 mm deep, the normal up (from the world shape below towards the body) in both orders
        bound = rounding_bound(64)
        assert hits.pairs == [("a", "b")] and abs(hits.distances[0] + 0.002) <= bound
        assert np.abs(hits.normals[0] - up).max() <= bound
        with sd.use_backend("native", deterministic=True):
            s = sd.contact_step(scene.model, q, [0.0] * 6, [0.0] * 6, scene, 0.01)
        # from rest, no torque: held where it would fall at g dt = 0.098 m/s (the step's tolerance, 1e-8 of it)
        assert np.abs(s.v).max() <= 1e-8 * 9.81 * 0.01


def test_the_normal_turns_as_a_round_ellipsoids_and_not_at_its_centre():
    """An ellipsoid of three equal semi-axes ``r`` is a sphere: a point at distance ``t`` from its surface
    turns the normal by ``P / (r + t)`` (``P`` the tangent plane's projection); at the centre (``t = -r``)
    every surface point is closest, and the turning is zero, not an error."""
    r, m = 0.07, np.array([0.6, 0.0, 0.8])
    P = np.eye(3) - np.outer(m, m)
    for t in (0.05, -0.03):
        assert np.abs(normal_turning(np.full(3, r), m, t) - P / (r + t)).max() <= rounding_bound(16) / (r + t)
    assert np.array_equal(normal_turning(np.full(3, r), np.array([0.0, 0.0, 1.0]), -r), np.zeros((3, 3)))


def test_one_point_is_the_rows_answer():
    """One point (Python's floats) and the same point among others (NumPy's rows) have the same closest
    point to rounding, inside and outside, on a plane of symmetry too."""
    rng = np.random.default_rng(9)
    for k in range(300):
        e, y = rng.uniform(0.02, 0.5, 3), rng.normal(size=3) * rng.uniform(0.01, 1.0)
        if k % 10 == 0:
            y[k % 3] = 0.0
        one = ellipsoid_closest(y[None], e[None])
        rows = ellipsoid_closest(np.stack([y, 2 * y]), np.stack([e, e]))
        for a, b in zip(one, rows):
            scale = max(1.0, np.abs(b[0]).max())
            assert a.shape == b[:1].shape and np.abs(a[0] - b[0]).max() <= rounding_bound(16) * scale
