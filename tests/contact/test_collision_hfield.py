"""A shape against a height field (sparsedyn.contact.collision_hfield): the features each shape rests on,
by hand; the pairs' hits against coal and the plane are tests/contact/test_heightfield.py's."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.collision_hfield import _features, _lower_bounds, _reach_down, hfield_pairs
from sparsedyn.contact.ellipsoid import point_ellipsoid
from sparsedyn.model.spatial import Transform
from conftest import rounding_bound
from test_heightfield import SIZE


def _scene(kind, size):
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("a", 0, Transform(np.eye(3), np.zeros(3)), kind, size, "collision")
    field = sd.Shape("hfield", SIZE, heights=np.full((3, 4), 0.5), name="ground")
    return sd.Scene(b.build().with_geometry(g), world=[field], margin=0.05)


@pytest.mark.parametrize("kind, size, centres, radii", [
    ("sphere", (0.1,), [[0, 0, 0]], [0.1]),
    ("capsule", (0.1, 0.4), [[0, 0, -0.2], [0, 0, 0.2]], [0.1, 0.1]),
    ("box", (0.2, 0.4, 0.6), [[x, y, z] for x in (-0.1, 0.1) for y in (-0.2, 0.2) for z in (-0.3, 0.3)], [0.0] * 8),
    ("cylinder", (0.1, 0.4), np.zeros((0, 3)), []),               # (its rim points on each face)
    ("ellipsoid", (0.1, 0.2, 0.3), np.zeros((0, 3)), []),         # (its support point on each face)
])
def test_each_shape_rests_on_its_features(kind, size, centres, radii):
    """The features by hand in the shape's frame; none for the shapes measured against each face."""
    scene = _scene(kind, size)
    C, r = _features(scene, scene.shapes.index(next(s for s in scene.shapes if s.kind == kind)))
    assert np.array_equal(np.asarray(C, float), np.array(centres, float)) and np.array_equal(r, radii)


def test_a_sphere_over_a_flat_field_is_its_height_less_its_radius():
    """A ball of radius 0.1 at height z over the flat field (surface at 0.5 * 0.2 = 0.1): one hit at
    distance z - 0.2, normal +z, the witness on the field straight below the centre."""
    scene = _scene("sphere", (0.1,))
    k = next(i for i, pair in enumerate(scene.index) if "hfield" in {scene.shapes[j].kind for j in pair})
    R = np.stack([np.eye(3)] * len(scene.shapes))
    for z in (0.22, 0.2, 0.17):
        p = np.array([[0.3, -0.1, z] if s.kind == "sphere" else [0, 0, 0] for s in scene.shapes])
        ks, d, wa, wb, n = hfield_pairs(scene, [k], R, p, 0.05)
        bound = rounding_bound(64)                                  # a triangle's plane from its corners
        assert len(d) == 1 and abs(d[0] - (z - 0.2)) <= bound
        assert np.abs(n - [0, 0, 1]).max() <= bound and np.abs(wb - [0.3, -0.1, 0.1]).max() <= bound


def test_a_shape_is_measured_only_where_its_bounding_sphere_comes_within_its_cutoff():
    """The ball of radius 0.1 over the flat field (surface at 0.1): with the cutoff 0.05 its centre at
    0.2 + 0.049 has its hit (distance 0.049), at 0.2 + 0.051 none, and the broad test (``_near``: its
    bounding sphere's lowest point against the highest grid point under it) leaves it out unmeasured;
    off the field's edge by more than its radius, the cutoff and a cell, out as well.  A cutoff per pair: 0.04 leaves out
    the hit 0.049 that 0.05 keeps."""
    from sparsedyn.contact.collision_hfield import _near
    scene = _scene("sphere", (0.1,))
    k = next(i for i, pair in enumerate(scene.index) if "hfield" in {scene.shapes[j].kind for j in pair})
    ball, field = scene.index[k]
    R = np.stack([np.eye(3)] * len(scene.shapes))
    bound = rounding_bound(64)
    for z, hit in ((0.249, True), (0.251, False)):
        p = np.zeros((len(scene.shapes), 3))
        p[ball] = [0.3, -0.1, z]
        got = hfield_pairs(scene, [k], R, p, 0.05)[1]
        assert len(got) == hit and (not hit or abs(got[0] - 0.049) <= bound)
        assert bool(_near(scene, field, np.array([ball]), R, p, np.array([0.05]))) == hit
        assert len(hfield_pairs(scene, [k], R, p, np.array([0.04]))[1]) == 0
    p[ball] = [1.0 + 0.1 + 0.05 + 2 / 3 + 0.01, 0.0, 0.1]     # beyond the edge (sx = 1) by r, cut and a cell (2/3)
    assert _near(scene, field, np.array([ball]), R, p, np.array([0.05])) == []


def test_a_windows_block_bound_is_at_least_its_highest_grid_point():
    """``_block_max`` of random windows of a random 30 x 45 field: never below the window's highest grid
    point (so no shape with a hit is left out), the block's highest for a window inside one block and,
    where a window meets more than two blocks a side, the window's own."""
    from sparsedyn.contact.collision_hfield import BLOCK, _block_max
    rng = np.random.default_rng(4)
    z = rng.uniform(0, 1, (30, 45))
    scene = _scene("sphere", (0.1,))
    i0, j0 = rng.integers(0, 30, 500), rng.integers(0, 45, 500)
    i1 = np.minimum(i0 + rng.integers(0, 2 * BLOCK + 3, 500), 29)
    j1 = np.minimum(j0 + rng.integers(0, 2 * BLOCK + 3, 500), 44)
    got = _block_max(scene, -1, z, i0, i1, j0, j1)
    own = np.array([z[a:b + 1, c:e + 1].max() for a, b, c, e in zip(i0, i1, j0, j1)])
    assert (got >= own).all()
    one = (i0 // BLOCK == i1 // BLOCK) & (j0 // BLOCK == j1 // BLOCK)
    wide = (i1 // BLOCK - i0 // BLOCK > 1) | (j1 // BLOCK - j0 // BLOCK > 1)
    assert one.sum() >= 20 and wide.sum() >= 20
    blocks = [z[a // BLOCK * BLOCK:(a // BLOCK + 1) * BLOCK, c // BLOCK * BLOCK:(c // BLOCK + 1) * BLOCK].max()
              for a, c in zip(i0[one], j0[one])]
    assert np.array_equal(got[one], blocks) and np.array_equal(got[wide], own[wide])


def test_the_ellipsoids_lower_bounds_are_at_most_the_distance():
    """An ellipsoid's cheap bounds (:func:`_lower_bounds`, which spare the exact distance of far grid
    points and edges) against the exact distance of points (``point_ellipsoid``, its closest-point
    conditions checked in test_ellipsoid_field) and of segments (the least over 2,001 points along each,
    which is at least the segment's): never above it; ``-inf`` exactly for a point inside; a point
    on an axis's extension at its distance, the bound's scale being the smallest semi-axis (exact there)."""
    rng = np.random.default_rng(7)
    e = np.array([0.3, 0.2, 0.1])
    Y0, Y1 = rng.normal(size=(300, 3)) * 0.4, rng.normal(size=(300, 3)) * 0.4
    d = point_ellipsoid(Y0, np.eye(3), np.zeros(3), e)[0]
    low = _lower_bounds(Y0, None, e)
    assert np.all(low <= d + rounding_bound(16)) and np.array_equal(np.isinf(low), d < 0)
    s = np.linspace(0, 1, 2001)
    for k in range(0, 300, 10):
        along = point_ellipsoid(Y0[k] + s[:, None] * (Y1[k] - Y0[k]), np.eye(3), np.zeros(3), e)[0].min()
        assert _lower_bounds(Y0[k:k + 1], Y1[k:k + 1], e)[0] <= along + rounding_bound(16)
    assert abs(_lower_bounds(np.array([[0.0, 0.0, 0.35]]), None, e)[0] - 0.25) <= rounding_bound(4)


@pytest.mark.parametrize("kind, size", [("sphere", (0.1,)), ("capsule", (0.1, 0.4)), ("box", (0.2, 0.4, 0.6)),
                                        ("cylinder", (0.1, 0.4)), ("ellipsoid", (0.3, 0.2, 0.1))])
def test_how_far_a_shape_reaches_down_is_its_lowest_point(kind, size):
    """Turned at random, each kind's reach below its centre along an axis (the shapes' height above a
    field judged by it) is the greatest of its points' depths along that axis: a box's corners, a
    capsule's end spheres, a sphere's radius (exact); an ellipsoid's against the plane's closed form's
    support point; a cylinder's against 3,600 points of its two rims (a point of them within 2 pi r /
    3,600 of the lowest, so no more than that short of it)."""
    from sparsedyn.contact.closed_forms import ellipsoid_plane
    rng = np.random.default_rng(11)
    scene = _scene(kind, size)
    up = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])
    rb = scene.shapes[0].bounding_radius
    for _ in range(20):
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        R = Q * np.linalg.det(Q)
        got = _reach_down(scene, np.array([0]), R[None], up, np.array([rb]))[0]
        bound = rounding_bound(16)
        if kind == "sphere":
            assert abs(got - size[0]) <= bound
        elif kind == "capsule":
            assert abs(got - (size[0] + size[1] / 2 * abs(R[:, 2] @ up))) <= bound
        elif kind == "box":
            corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * np.array(size) / 2
            assert abs(got - (-(corners @ R.T) @ up).max()) <= bound
        elif kind == "ellipsoid":
            _, x, _, _ = ellipsoid_plane(R[None], np.zeros((1, 3)), np.array([size]), up[None], np.zeros((1, 3)))
            assert abs(got - (-x[0] @ up)) <= bound
        else:
            t = np.linspace(0, 2 * np.pi, 3600, endpoint=False)
            rim = np.column_stack([size[0] * np.cos(t), size[0] * np.sin(t), np.zeros_like(t)])
            low = max((-((rim + [0, 0, z]) @ R.T) @ up).max() for z in (-size[1] / 2, size[1] / 2))
            assert low - bound <= got <= low + 2 * np.pi * size[0] / 3600


def test_the_default_road_makes_no_triangles_of_a_field():
    """A ball into a 300 x 300 field, collided and stepped on the default road: the field's triangles (the NumPy
    road's, eighteen numbers a cell) are never made; the NumPy road makes them when it first needs them, and
    finds the same hit (its distance to rounding)."""
    from sparsedyn.contact.collision_hfield import _triangles
    b = sd.ModelBuilder("one").add_body("ball", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    model = b.build().with_geometry(sd.Geometry("ball", 0, Transform(np.eye(3), np.zeros(3)), "sphere", (0.05,),
                                                "collision"))
    heights = 0.5 + 0.01 * np.random.default_rng(3).uniform(0.0, 1.0, (300, 300))     # (the surface 0.1-0.102 m high)
    scene = sd.Scene(model, world=[sd.Shape("hfield", (3.0, 3.0, 0.2, 0.1), heights=heights, name="ground")])
    h = next(i for i, s in enumerate(scene.shapes) if s.kind == "hfield")
    q = np.array([0.1, 0.2, 0.149, 0.0, 0.0, 0.0, 1.0])                                  # (the ball 1-3 mm into it)
    key = ("height field triangles", h)
    with sd.use_backend("native", deterministic=True):
        got = sd.collide(scene, q)
        sd.contact_step(model, q, np.zeros(6), np.zeros(6), scene, 0.002)
    assert key not in scene.cache and len(got.distances) == 1
    with sd.use_backend("numpy"):
        want = sd.collide(scene, q)
    assert key in scene.cache and _triangles(scene, h).shape == (2 * 299 * 299, 3, 3)
    assert want.pairs == got.pairs and abs(want.distances[0] - got.distances[0]) <= rounding_bound(64)
