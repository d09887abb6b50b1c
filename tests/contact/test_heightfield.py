"""Height fields as world shapes (sparsedyn.contact.heightfield): collide against coal, a flat field
against a plane, a sloped one against the tilted plane; a box resting on a flat field as on a
plane, a ball rolling down a sloped field as down the slope.

Oracles: coal's sphere-mesh ``distance`` on the field's surface triangles, built here from the grid
(exact, signed, with witness points: a different algorithm from the closest points on triangles the
library computes); coal's ``HeightField`` ``collide`` (which pairs touch); the closed forms of a plane
(test_collision checks them against coal); the rolling ball's acceleration by hand, ``5/7 g sin(a)``.
"""

import warnings

import coal
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.model.spatial import Transform
from test_collision import SIZES, cube_mesh, random_body_q

SIZE = (1.0, 0.5, 0.2, 0.1)                                      # sx, sy, top, base


def _scene(kind, world, margin=0.05, size=None, mass=1.0, inertia=None, mesh=None):
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=mass,
                                       rot_inertia=np.eye(3) if inertia is None else inertia)
    V, F = mesh if mesh is not None else (None, None)
    g = sd.Geometry("a", 0, Transform(np.eye(3), np.zeros(3)), kind, size or SIZES.get(kind, (1.0, 1.0, 1.0)),
                    "collision", vertices=V, faces=F)
    return sd.Scene(b.build().with_geometry(g), world=world, margin=margin)


def _surface_mesh(size, H):
    """The field's surface as coal triangles, from the grid: cell (i, j) split along its diagonal from
    (x_j, y_i) to (x_j+1, y_i+1), as coal's HeightField splits it."""
    sx, sy, top, _ = size
    nrow, ncol = H.shape
    V = np.array([[-sx + 2 * sx * j / (ncol - 1), -sy + 2 * sy * i / (nrow - 1), top * H[i, j]]
                  for i in range(nrow) for j in range(ncol)])
    F = []
    for i in range(nrow - 1):
        for j in range(ncol - 1):
            a, b, c, d = i * ncol + j, i * ncol + j + 1, (i + 1) * ncol + j + 1, (i + 1) * ncol + j
            F += [[a, b, c], [a, c, d]]
    g = coal.BVHModelOBBRSS()
    g.beginModel(len(F), len(V))
    g.addVertices(V)
    g.addTriangles(np.array(F))
    g.endModel()
    return g


def _height(H, x, y):
    """The surface's height at (x, y): the plane of the cell's triangle there (the test's own
    interpolation; the field of SIZE)."""
    nrow, ncol = H.shape
    gx, gy = (x + 1) / 2 * (ncol - 1), (y + 0.5) / 1 * (nrow - 1)
    j, i = min(int(gx), ncol - 2), min(int(gy), nrow - 2)
    u, v = gx - j, gy - i
    a, b, c, d = H[i, j], H[i, j + 1], H[i + 1, j + 1], H[i + 1, j]
    return 0.2 * (a + u * (b - a) + v * (c - b) if u >= v else a + v * (d - a) + u * (c - d))


def _deepest(hits, d, margin):
    """The index of the deepest of ``hits``; None, asserting there are none, where coal's distance ``d``
    is the ``margin`` or more."""
    if d >= margin:
        assert len(hits.distances) == 0
        return None
    return int(np.argmin(hits.distances))


def test_a_ball_against_coals_distance_to_the_surface():
    """A ball over a random field, centre above the surface: the hit's distance and witness points
    are coal's sphere-mesh distance to the surface triangles, and coal's HeightField collide finds the
    ball and the field touching exactly where the hit penetrates."""
    rng = np.random.default_rng(0)
    H = rng.uniform(0, 1, (6, 8))
    scene = _scene("sphere", [sd.Shape("hfield", SIZE, heights=H, name="ground")], size=(0.1,))
    mesh, field = _surface_mesh(SIZE, H), coal.HeightFieldAABB(2.0, 1.0, 0.2 * H[::-1].copy(), -0.1)
    compared = penetrating = 0
    for _ in range(150):
        c = np.array([rng.uniform(-0.8, 0.8), rng.uniform(-0.35, 0.35), 0])
        j, i = int((c[0] + 1) / (2 / 7)), int((c[1] + 0.5) / (1 / 5))       # the cell under the centre
        c[2] = 0.2 * H[i:i + 2, j:j + 2].max() + rng.uniform(0, 0.15)       # above its corners: above the surface
        res, req = coal.DistanceResult(), coal.DistanceRequest()
        req.gjk_tolerance = req.epa_tolerance = 1e-11                      # coal's default, 1e-6, is that far
        req.gjk_max_iterations = req.epa_max_iterations = 1000
        d = coal.distance(coal.Sphere(0.1), coal.Transform3s(np.eye(3), c), mesh, coal.Transform3s(), req, res)
        with sd.use_backend("numpy"):
            hits = sd.collide(scene, list(c) + [0, 0, 0, 1])
        k = _deepest(hits, d, scene.margin)
        if k is None:
            continue
        if d >= 0:
            assert abs(hits.distances[k] - d) <= 1e-9
            assert np.abs(hits.witness_a[k] - res.getNearestPoint1()).max() <= 1e-9
            assert np.abs(hits.witness_b[k] - res.getNearestPoint2()).max() <= 1e-9
        else:
            # in penetration coal's sphere-mesh distance stops short of the closest point (by up to
            # 1e-3 here; checked by sampling the triangles): the hit is at least as deep, its witness
            # point on the surface, at the distance it reports
            assert hits.distances[k] <= d + 1e-9
            wb = hits.witness_b[k]
            assert abs(_height(H, wb[0], wb[1]) - wb[2]) <= 1e-12
            assert abs(np.linalg.norm(c - wb) - 0.1 - hits.distances[k]) <= 1e-12
        # coal's HeightField: the ball and the field collide (no margin) exactly when the hit penetrates
        creq = coal.CollisionRequest()
        creq.num_max_contacts = 64
        touching = coal.collide(coal.Sphere(0.1), coal.Transform3s(np.eye(3), c), field, coal.Transform3s(), creq,
                                coal.CollisionResult())
        assert (touching > 0) == (hits.distances[k] < 0)
        compared += 1
        penetrating += d < 0
    assert compared >= 30 and penetrating >= 5


def _on_shape(kind, size, R, p, x):
    """How far point ``x`` is off the surface of an ellipsoid, a cylinder or a capsule of ``size`` placed
    ``(R, p)`` (the ellipsoid's ``|x / e|^2 - 1``, the cylinder's the larger of its distances to its side
    and its caps' planes, signed, the capsule's distance to its axis less its radius)."""
    y = (x - p) @ R
    if kind == "ellipsoid":
        return ((y / size) ** 2).sum() - 1
    if kind == "cylinder":
        return max(np.hypot(y[0], y[1]) - size[0], abs(y[2]) - size[1] / 2)
    if kind == "box":
        return (np.abs(y) - np.asarray(size) / 2).max()
    return np.hypot(y[0], y[1]) - size[0] if abs(y[2]) <= size[1] / 2 else \
        np.linalg.norm(y - [0, 0, np.sign(y[2]) * size[1] / 2]) - size[0]


@pytest.mark.parametrize("kind, size", [("ellipsoid", (0.12, 0.09, 0.06)), ("capsule", (0.05, 0.2)),
                                        ("cylinder", (0.06, 0.1)), ("box", (0.2, 0.12, 0.08))])
def test_a_curved_shape_against_coals_distance_to_the_surface(kind, size):
    """A turned ellipsoid, capsule or cylinder over a random field, centre above the corners of the cell
    under it: apart, its deepest hit is coal's distance to the surface triangles (a mesh), on a face, a
    triangle's edge (a ridge across a capsule's or a cylinder's side, or a cylinder's rim) or a grid point
    alike; in penetration at least as deep; none
    where coal's distance is the margin or more; the deepest hit's witness points on the surface and on
    the shape, its distance apart along its normal.  An ellipsoid's witness points equal coal's to
    ``sqrt(2 tol R)``: an error ``tol`` (coal's GJK tolerance, 1e-11) in a distance at its minimum moves
    the point by that on a surface of curvature radius ``R`` (at most a^2 / c = 0.24 m); a capsule's
    closest points, or a cylinder's, are not unique where its axis lies parallel to a face (or its cap)."""
    rng = np.random.default_rng(3)
    H = rng.uniform(0, 1, (6, 8))
    scene = _scene(kind, [sd.Shape("hfield", SIZE, heights=H, name="ground")], size=size)
    shape = {"ellipsoid": coal.Ellipsoid, "capsule": coal.Capsule, "cylinder": coal.Cylinder,
             "box": coal.Box}[kind](*size)
    mesh = _surface_mesh(SIZE, H)
    req = coal.DistanceRequest()
    req.gjk_tolerance = req.epa_tolerance = 1e-11
    req.gjk_max_iterations = req.epa_max_iterations = 1000
    witness = 1.01 * np.sqrt(2 * 1e-11 * size[0] ** 2 / size[-1])
    compared = penetrating = 0
    for _ in range(150):
        R, p, q = random_body_q(rng, 0.3)
        p[0] *= 2.5
        j, i = int((p[0] + 1) / (2 / 7)), int((p[1] + 0.5) / (1 / 5))       # the cell under the centre
        q[:3] = p[0], p[1], 0.2 * H[i:i + 2, j:j + 2].max() + rng.uniform(0.0, 0.2)
        q[3:] /= np.linalg.norm(q[3:])                  # (R's quaternion is a unit one to eps / w only)
        res = coal.DistanceResult()
        d = coal.distance(shape, coal.Transform3s(R, q[:3]), mesh, coal.Transform3s(), req, res)
        if d < -0.03:
            continue                     # (deep, or coal's EPA failed: -DBL_MAX)
        hits = sd.collide(scene, q.tolist())
        k = _deepest(hits, d, scene.margin)
        if k is None:
            continue
        if d >= 0:
            assert abs(hits.distances[k] - d) <= 1e-9
            if kind == "ellipsoid":
                assert np.abs(hits.witness_a[k] - res.getNearestPoint1()).max() <= witness
                assert np.abs(hits.witness_b[k] - res.getNearestPoint2()).max() <= witness
        else:
            # coal's depth against a mesh is its least against one triangle, which a thin triangle's
            # edge lets the shape leave sideways: the hit (its depth below a face, a ridge or a grid
            # point) is at least as deep
            assert hits.distances[k] <= d + 1e-9
        wa, wb = hits.witness_a[k], hits.witness_b[k]
        assert abs(_height(H, wb[0], wb[1]) - wb[2]) <= 1e-12
        R = sd.contact.collision.placements(scene, q)[0][0]
        assert abs(_on_shape(kind, size, R, q[:3], wa)) <= rounding_bound(64)
        assert np.abs(wa - wb - hits.distances[k] * hits.normals[k]).max() <= rounding_bound(64)
        compared += 1
        penetrating += d < 0
    assert compared >= 30 and penetrating >= 5


@pytest.mark.parametrize("height", [0.015, 0.005, -0.005])
def test_a_capsule_across_a_ridge_touches_its_edge(height):
    """A tent (heights 1 - |x|: a ridge along y at x = 0, its top 0.2 m up, slopes of 0.2) and a capsule
    (radius 0.05, length 0.4) lying across it along x, its axis ``height + r`` above the ridge's top:
    the one hit is the ridge's edge, at ``height``, straight up, its witness on the ridge under the axis
    (the end spheres, 0.2 m down the slopes, are farther off than the margin)."""
    H = np.tile(1 - np.abs(np.linspace(-1, 1, 9)), (5, 1))
    scene = _scene("capsule", [sd.Shape("hfield", SIZE, heights=H, name="ground")], margin=0.02, size=(0.05, 0.4))
    half_turn = [0.0, np.sin(np.pi / 4), 0.0, np.cos(np.pi / 4)]            # the axis z turned onto x
    hits = sd.collide(scene, [0.0, 0.1, 0.2 + 0.05 + height] + half_turn)
    assert len(hits.distances) == 1
    bound = rounding_bound(16)
    assert abs(hits.distances[0] - height) <= bound
    assert np.abs(hits.normals[0] - [0, 0, 1]).max() <= bound
    assert np.abs(hits.witness_b[0] - [0.0, 0.1, 0.2]).max() <= bound
    assert np.abs(hits.witness_a[0] - [0.0, 0.1, 0.2 + height]).max() <= bound


def test_a_segments_least_distances_to_a_rim_are_the_sampled_ones():
    """Random segments near a turned cylinder's rims (apart from it): the hits of ``segment_rims`` are no
    nearer than the least distance to the rim (the point's to the circle, ``sqrt(g^2 + (|w| - r)^2)``
    by hand) over 8001 points along the segment, and where that least lies inside the segment and in
    the rim's outer corner one of them is it, both to the sampling's error (a quarter of the spacing
    squared over twice the least: the distance's curvature along the segment is at most one over it)."""
    from sparsedyn.contact.heightfield import segment_rims
    rng = np.random.default_rng(5)
    r, half = 0.1, 0.05
    R, p = np.linalg.qr(rng.normal(size=(3, 3)))[0], rng.normal(size=3) * 0.1
    a = R[:, 2]
    u = rng.normal(size=(150, 3))
    C = p + half * a * rng.choice([-1.0, 1.0], (150, 1)) + r * (u - (u @ a)[:, None] * a) / \
        np.linalg.norm(u - (u @ a)[:, None] * a, axis=1)[:, None]             # points on the rims
    out = C + rng.uniform(0.005, 0.03) * rng.normal(size=(150, 3))
    D = rng.normal(size=(150, 3)) * 0.15
    P0, P1 = out - D / 2, out + D / 2
    d, wa, wb, n, edge, hit = segment_rims(P0, P1, R, p, half, r)
    S = np.linspace(0.0, 1.0, 8001)
    found = 0
    for sign in (-1.0, 1.0):
        c = p + sign * half * a
        X = P0[:, None] + S[:, None] * (P1 - P0)[:, None]                     # (150, 8001, 3)
        g = (X - c) @ a
        w = np.sqrt(np.maximum(((X - c) ** 2).sum(2) - g * g, 0.0))
        f = np.sqrt(g * g + (w - r) ** 2)
        k = np.argmin(f, 1)
        mine = hit & (np.abs((wa - c) @ a) <= rounding_bound(16)) & (d > 0)       # (on this rim, apart)
        for e in np.flatnonzero((0 < k) & (k < len(S) - 1)):
            x, least = X[e, k[e]], f[e, k[e]]
            error = (np.linalg.norm(D[e]) / 8000) ** 2 / 4 / (2 * least) + rounding_bound(16)
            ours = d[mine & (edge == e)]
            assert ours.min(initial=np.inf) >= least - error
            if (x - c) @ a * sign >= 0 and w[e, k[e]] >= r:                    # outside the side and the cap
                assert np.abs(ours - least).min(initial=np.inf) <= error, (e, ours, least)
                found += 1
    g = ((wb - wa) * n).sum(1)
    assert np.abs(np.abs(g[hit & (d > 0)]) - d[hit & (d > 0)]).max() <= rounding_bound(16)
    assert found >= 30


@pytest.mark.parametrize("height", [0.015, 0.005, -0.005])
def test_a_box_lying_across_a_ridge_touches_it_where_its_edges_cross_it(height):
    """The tent (a ridge along y at x = 0, 0.2 m up, slopes of 0.2) and a box (0.4 x 0.1 x 0.1) lying
    level across it along x, over y in [0.05, 0.15] (between the grid points at 0 and 0.25), its bottom
    ``height`` above the ridge's top: two hits where its bottom edges along x cross the ridge, at
    ``height``, straight up, the witnesses on the ridge and on the edges above it (its corners, 0.2 m
    down the slopes, are 0.04 m farther than the ridge, beyond the margin 0.02)."""
    H = np.tile(1 - np.abs(np.linspace(-1, 1, 9)), (5, 1))
    scene = _scene("box", [sd.Shape("hfield", SIZE, heights=H, name="ground")], margin=0.02, size=(0.4, 0.1, 0.1))
    hits = sd.collide(scene, [0.0, 0.1, 0.2 + 0.05 + height, 0.0, 0.0, 0.0, 1.0])
    assert len(hits.distances) == 2
    order = np.argsort(hits.witness_b[:, 1])
    bound = rounding_bound(16)
    assert np.abs(hits.distances - height).max() <= bound
    assert np.abs(hits.normals - [0, 0, 1]).max() <= bound
    assert np.abs(hits.witness_b[order] - [[0, 0.05, 0.2], [0, 0.15, 0.2]]).max() <= bound
    assert np.abs(hits.witness_a[order] - [[0, 0.05, 0.2 + height], [0, 0.15, 0.2 + height]]).max() <= bound


@pytest.mark.parametrize("height", [0.004, 0.001, -0.004])
def test_a_cylinder_standing_on_a_ridge_touches_it_where_its_rim_crosses_it(height):
    """The tent (a ridge along y at x = 0, 0.2 m up) and an upright cylinder (radius 0.1, length 0.1) whose
    axis stands at (0.05, 0.1), its bottom ``height`` above the ridge's top: its rim crosses the ridge at
    ``y = 0.1 +- sqrt(0.1^2 - 0.05^2)``, both on one edge of the grid (y from 0 to 0.25): two hits there,
    at ``height``, straight up, the witnesses on the ridge and on the rim above it (the faces hold none
    of the rim's points along their normals nearer than the margin 0.005, 0.0059 m at the lowest; the
    nearest grid point is 0.0118 m off the side)."""
    H = np.tile(1 - np.abs(np.linspace(-1, 1, 9)), (5, 1))
    scene = _scene("cylinder", [sd.Shape("hfield", SIZE, heights=H, name="ground")], margin=0.005, size=(0.1, 0.1))
    hits = sd.collide(scene, [0.05, 0.1, 0.2 + 0.05 + height, 0.0, 0.0, 0.0, 1.0])
    assert len(hits.distances) == 2
    y = 0.1 + np.array([-1, 1]) * np.sqrt(0.1 ** 2 - 0.05 ** 2)
    order = np.argsort(hits.witness_b[:, 1])
    bound = rounding_bound(16)
    assert np.abs(hits.distances - height).max() <= bound
    assert np.abs(hits.normals - [0, 0, 1]).max() <= bound
    assert np.abs(hits.witness_b[order] - np.column_stack([[0, 0], y, [0.2, 0.2]])).max() <= bound
    assert np.abs(hits.witness_a[order] - np.column_stack([[0, 0], y, [0.2 + height] * 2])).max() <= bound


@pytest.mark.parametrize("kind", ["sphere", "capsule", "box", "cylinder", "mesh", "ellipsoid"])
def test_a_flat_field_is_the_plane_at_its_height(kind):
    """A field of equal heights 0.5 (surface at z = 0.1) against the plane z = 0.1, random poses over
    its inside reaching less than its base's depth into it: the same deepest hit; for a sphere, a capsule,
    a box (the same features: the centre, the end spheres, the corners) and an ellipsoid (its support
    point on a face) the same hits."""
    rng = np.random.default_rng(["sphere", "capsule", "box", "cylinder", "mesh", "ellipsoid"].index(kind))
    H = np.full((5, 9), 0.5)
    mesh = cube_mesh(0.15) if kind == "mesh" else None
    size = (0.12, 0.09, 0.06) if kind == "ellipsoid" else None      # (within the field at every pose drawn)
    field = _scene(kind, [sd.Shape("hfield", SIZE, heights=H, name="ground")], mesh=mesh, size=size)
    plane = _scene(kind, [sd.Shape("plane", placement=(np.eye(3), [0, 0, 0.1]), name="ground")], mesh=mesh,
                   size=size)
    seen = 0
    for _ in range(30):
        _, p, q = random_body_q(rng, 0.3)
        q[2] = 0.1 + rng.uniform(0.0, 0.4)
        with sd.use_backend("numpy"):
            got, want = sd.collide(field, q), sd.collide(plane, q)
        if want.distances.min(initial=0) < -0.15:                  # below the field's base (0.2 under its top)
            continue
        assert len(got.distances) > 0 if len(want.distances) else len(got.distances) == 0
        if not len(want.distances):
            continue
        seen += 1
        bound = rounding_bound(64)
        assert abs(got.distances.min() - want.distances.min()) <= bound
        if kind in ("sphere", "capsule", "box", "ellipsoid"):
            order_g, order_w = np.lexsort(got.points.T), np.lexsort(want.points.T)
            for x, y in zip(got[1:4], want[1:4]):
                assert x.shape == y.shape and np.abs(x[order_g] - y[order_w]).max() <= bound
        assert np.abs(got.normals - [0, 0, 1]).max() <= bound
    assert seen >= 5


def test_a_sloped_field_is_the_tilted_plane():
    """Heights rising linearly along x (the surface z = top (x + sx) / (2 sx), a slope of 0.1): a ball
    over its inside has one hit, that of the tilted plane (distance, normal, witness points)."""
    rng = np.random.default_rng(4)
    H = np.tile(np.linspace(0, 1, 11), (4, 1))
    scene = _scene("sphere", [sd.Shape("hfield", SIZE, heights=H)], size=(0.1,))
    n = np.array([-0.1, 0, 1]) / np.hypot(0.1, 1)
    for _ in range(20):
        c = np.array([rng.uniform(-0.7, 0.7), rng.uniform(-0.3, 0.3), 0])
        c[2] = 0.1 * (c[0] + 1) + rng.uniform(0.05, 0.12)
        with sd.use_backend("numpy"):
            hits = sd.collide(scene, list(c) + [0, 0, 0, 1])
        h = n @ (c - [-1, 0, 0])
        d = h - 0.1
        if d >= scene.margin:
            assert len(hits.distances) == 0
            continue
        assert len(hits.distances) == 1
        bound = rounding_bound(64)
        assert abs(hits.distances[0] - d) <= bound and np.abs(hits.normals[0] - n).max() <= bound
        assert np.abs(hits.witness_b[0] - (c - h * n)).max() <= bound


def test_a_box_rests_on_a_flat_field_as_on_a_plane():
    """A 2 kg box dropped from 2 cm onto a flat field and onto the plane at its height: the same
    contacts at every step, so the same trajectory (to the solver's tolerance), at rest with its
    weight carried."""
    H = np.full((5, 9), 0.5)
    runs = []
    for world in (sd.Shape("hfield", SIZE, heights=H, name="ground"),
                  sd.Shape("plane", placement=(np.eye(3), [0, 0, 0.1]), name="ground")):
        scene = _scene("box", [world], margin=0.005, size=(0.2, 0.2, 0.2), mass=2.0, inertia=np.eye(3) * 2 * 0.04 / 6)
        q0 = np.array([0.1, 0.05, 0.22, 0, 0, 0, 1.0])
        with sd.use_backend("numpy"):
            runs.append(sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, 0.002, 150))
    field, plane = runs
    assert np.abs(field.q - plane.q).max() <= 1e-6
    assert abs(field.q[-1][2] - 0.2) <= 1e-3 and np.abs(field.v[-1]).max() <= 1e-3
    # the weight carried: the normal impulses of the last step sum to m g dt
    assert abs(np.sum(field.impulses[-1][:, 2]) - 2.0 * 9.81 * 0.002) <= 1e-3 * 2.0 * 9.81 * 0.002


def test_an_ellipsoid_dropped_into_a_bumpy_bowl_stays_on_it_and_adds_no_energy():
    """A solid ellipsoid (inertia m/5 (b^2 + c^2), ...) dropped tipped into a bowl with bumps, 600 steps
    on the default road: it lands and stays on the field; it never sinks deeper than the margin, no
    step adds more than :func:`~test_scene_physics.energy_gain_bound` (exact Coulomb friction only
    dissipates), and the landing loses energy."""
    from test_scene_physics import energy, energy_gain_bound
    E, m = (0.12, 0.09, 0.06), 1.0
    inertia = np.diag([E[1] ** 2 + E[2] ** 2, E[0] ** 2 + E[2] ** 2, E[0] ** 2 + E[1] ** 2]) * m / 5
    X, Y = np.meshgrid(np.linspace(-1, 1, 41), np.linspace(-0.5, 0.5, 21))
    H = 0.4 * (X ** 2 + (2 * Y) ** 2) + 0.08 * np.sin(7 * X) * np.cos(9 * Y) + 0.1
    scene = _scene("ellipsoid", [sd.Shape("hfield", SIZE, heights=H, name="ground")], margin=0.005, size=E, mass=m,
                   inertia=inertia)
    q0 = np.array([0.3, 0.1, 0.35, np.sin(0.3), 0.1, 0.0, np.cos(0.3)])
    r = sd.rollout(scene.model, q0 / np.r_[1, 1, 1, [np.linalg.norm(q0[3:])] * 4], [0.0] * 6, [0.0] * 6, scene, 0.002,
                   600)
    hits = [sd.collide(scene, q) for q in r.q]
    assert sum(len(h.distances) > 0 for h in hits) >= 400                 # (landed, and stayed on it)
    assert min(h.distances.min(initial=np.inf) for h in hits) >= -scene.margin
    energies = np.array([energy(scene.model, q, v) for q, v in zip(r.q, r.v)])
    assert np.diff(energies).max() <= energy_gain_bound(scene.model, r, scene)
    assert energies[-1] < energies[0] - 0.1


def egg_in_bowl(tmp_path):
    """``(path, (a, b, c), s, rest)``: an MJCF file of an ellipsoid (a, b, c) of 1 kg, free, 0.3 m over the
    lowest grid point of a bowl (heights 0.2 + 0.4 (x^2 + y^2) on a 21 x 21 grid, which MuJoCo normalises to
    [0, 1]; 1 x 1 m, 0.25 m high), the slope ``s`` of the four cells about that point (1.25 mm up a 5 cm
    side) and the height at which the egg rests on them level, ``sqrt(s^2 (a^2 + b^2) + c^2)`` (each
    plane's support distance along its normal)."""
    a, b, c = 0.12, 0.09, 0.06
    X, Y = np.meshgrid(np.linspace(-1, 1, 21), np.linspace(-1, 1, 21))
    H = 0.2 + 0.4 * (X ** 2 + Y ** 2)
    path = tmp_path / "egg.xml"
    path.write_text(f"""<mujoco><option timestep="0.002"/>
      <asset><hfield name="bowl" nrow="21" ncol="21" size="0.5 0.5 0.25 0.1"
                     elevation="{' '.join(f'{h:.17g}' for h in H.ravel())}"/></asset>
      <worldbody><geom name="bowl" type="hfield" hfield="bowl"/>
        <body name="egg" pos="0 0 0.3"><freejoint name="egg"/>
          <geom name="egg" type="ellipsoid" size="{a} {b} {c}" mass="1"/></body></worldbody></mujoco>""")
    s = 0.25 * 0.005 / 0.05
    return path, (a, b, c), s, np.sqrt(s * s * (a * a + b * b) + c * c)


def test_an_egg_dropped_level_into_a_bowl_rests_on_its_four_faces_as_by_hand_and_in_mujoco(tmp_path):
    """An ellipsoid dropped level over the lowest grid point of a bowl in an MJCF file (:func:`egg_in_bowl`):
    the four cells about that point are the planes ``z = s (+-x +- y)``, and it rests on them at ``rest``, to
    the solver's tolerance; MuJoCo's soft contact rests within 0.5 mm of that."""
    import mujoco
    path, (a, b, c), s, rest = egg_in_bowl(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                          # (MJCF elements the model does not represent)
        model = sd.load_mjcf(str(path), geometry=True)
    scene = sd.Scene(model)
    r = sd.rollout(model, [0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0], [0.0] * 6, [0.0] * 6, scene, 0.002, 500)
    assert abs(r.q[-1][2] - rest) <= 1e-6 and np.abs(r.v[-1]).max() <= 1e-6
    hits = sd.collide(scene, r.q[-1])
    assert len(hits.distances) == 4
    # (the heights are single precision, as MuJoCo keeps them: 0.25 m 2^-24 a grid point, over 5 cm)
    slope = np.array([s, s, 1]) / np.sqrt(1 + 2 * s * s)
    assert np.abs(np.abs(hits.normals) - slope).max() <= 4 * 0.25 * 2.0 ** -24 / 0.05
    mj = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(mj)
    for _ in range(500):
        mujoco.mj_step(mj, data)
    assert abs(data.qpos[2] - rest) <= 5e-4


def test_a_ball_rolls_down_a_sloped_field():
    """A solid ball (inertia 2/5 m r^2) on the slope of a sloped field (angle a = atan(0.1)), friction
    0.8: it rolls without sliding, its centre accelerating 5/7 g sin(a) down the slope."""
    H = np.tile(np.linspace(0, 1, 11), (4, 1))
    m, r = 1.0, 0.1
    scene = _scene("sphere", [sd.Shape("hfield", SIZE, heights=H, friction=0.8)], margin=0.005, size=(r,), mass=m,
                   inertia=np.eye(3) * 0.4 * m * r * r)
    a = np.arctan(0.1)
    n = np.array([-np.sin(a), 0, np.cos(a)])
    c0 = np.array([0.5, 0, 0.1 * 1.5]) + r * n                       # resting on the slope at x = 0.5
    dt, steps = 0.002, 100
    with sd.use_backend("numpy"):
        traj = sd.rollout(scene.model, np.concatenate([c0, [0, 0, 0, 1]]), np.zeros(6), np.zeros(6), scene, dt, steps)
    t = dt * steps
    down = np.array([-np.cos(a), 0, -np.sin(a)])
    travelled = (traj.q[-1][:3] - c0) @ down
    assert abs(travelled - 0.5 * (5 / 7) * 9.81 * np.sin(a) * t * t) <= 0.02 * travelled
    assert abs((traj.q[-1][:3] - c0) @ n) <= 1e-3                   # on the slope


def test_a_wheel_rolls_down_a_sloped_field_as_down_its_plane():
    """A wheel (a cylinder of radius r, its axis across the slope; inertia m r^2 / 2 about it) on the
    sloped field of the ball above and on the plane of that slope, friction 0.8: the same motion on both
    (its rims' lowest points on the faces are those on the plane), rolling without sliding, its centre
    accelerating ``g sin(a) / (1 + I / (m r^2)) = 2/3 g sin(a)`` down the slope."""
    m, r, length = 1.0, 0.1, 0.1
    inertia = np.diag([m * (3 * r * r + length ** 2) / 12] * 2 + [m * r * r / 2])
    a = np.arctan(0.1)
    n = np.array([-np.sin(a), 0, np.cos(a)])
    slope = np.array([[np.cos(a), 0, -np.sin(a)], [0, 1, 0], [np.sin(a), 0, np.cos(a)]])      # z onto n
    worlds = [sd.Shape("hfield", SIZE, heights=np.tile(np.linspace(0, 1, 11), (4, 1)), friction=0.8),
              sd.Shape("plane", placement=(slope, [0.5, 0, 0.15]), friction=0.8)]
    c0 = np.array([0.5, 0, 0.1 * 1.5]) + r * n                       # resting on the slope at x = 0.5
    q0 = np.concatenate([c0, [np.sin(np.pi / 4), 0, 0, np.cos(np.pi / 4)]])      # its axis along y
    dt, steps = 0.002, 100
    field, plane = (sd.rollout(scene.model, q0.tolist(), [0.0] * 6, [0.0] * 6, scene, dt, steps) for scene in
                    (_scene("cylinder", [w], margin=0.005, size=(r, length), mass=m, inertia=inertia)
                     for w in worlds))
    assert np.abs(field.q - plane.q).max() <= 1e-6
    t = dt * steps
    down = np.array([-np.cos(a), 0, -np.sin(a)])
    travelled = (field.q[-1][:3] - c0) @ down
    assert abs(travelled - 0.5 * (2 / 3) * 9.81 * np.sin(a) * t * t) <= 0.02 * travelled
    assert abs((field.q[-1][:3] - c0) @ n) <= 1e-3                  # on the slope


@pytest.mark.parametrize("kwargs, message", [
    (dict(size=(1, 1, 0.2, 0.1)), "heights="),
    (dict(size=(1, 1, 0.2, 0.1), heights=[[0, 1]]), r"nrow >= 2, ncol >= 2"),
    (dict(size=(1, 1, 0.2, 0.1), heights=[[0, 1.5], [0, 0]]), r"in \[0, 1\]"),
    (dict(size=(1, 1, 0.2, 0.1), heights=[[0, np.nan], [0, 0]]), "finite"),
    (dict(size=(1, -1, 0.2, 0.1), heights=np.zeros((2, 2))), "positive"),
    (dict(size=(1, 1, 0.2), heights=np.zeros((2, 2))), "4 finite sizes"),
])
def test_bad_height_fields_are_named(kwargs, message):
    with pytest.raises(ValueError, match=f"Shape 'terrain'.*{message}"):
        sd.Shape("hfield", name="terrain", **kwargs)
    with pytest.raises(ValueError, match="heights= is for kind 'hfield'"):
        sd.Shape("box", (1, 1, 1), heights=np.zeros((2, 2)))
