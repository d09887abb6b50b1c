"""A box's, a capsule's, a cylinder's and an ellipsoid's hits on a height field beyond their features' in one
C call (sparsedyn.contact.heightfield_more_c) against the NumPy road (collision_hfield._more_hits, itself
checked against coal and by hand in test_collision_hfield): shapes of each kind pressed into a random bumpy
field, tilted and moved, give the same hits in the same order; a spike and a ridge under a shape give its
deepest hit by hand; without a C compiler, the NumPy road's answer.

Tolerances: both roads write the same operations, the C road with the shapes placed in the field's frame
where the NumPy road places the grid points in the world for a grid point's hit, and the products summed
in another order: positions ``rounding_bound(64)`` times the coordinates' size apart.  A normal is a
difference over its length: a grid point's or a rim's from the shape's surface point over their distance, an
edge's a cross product over the sine of the edges' angle (at least ``sin(PARALLEL_EDGES)``), so normals
are compared within the position bound over ``sin(PARALLEL_EDGES)`` times the smallest size.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import collision_hfield, heightfield_c, heightfield_more_c
from sparsedyn.contact.closed_forms import PARALLEL_EDGES
from sparsedyn.model.spatial import Transform

KINDS = [("box", (0.3, 0.2, 0.15)), ("capsule", (0.06, 0.3)), ("cylinder", (0.08, 0.25)),
         ("ellipsoid", (0.2, 0.15, 0.1)), ("capsule", (0.1, 0.05)), ("box", (0.05, 0.4, 0.1))]


def _field_scene(rng, rows=(8, 20)):
    """A scene of one shape of each of :data:`KINDS` on a free body and a bumpy field 3 m by 2.4 m, 0.4 m
    high, tilted and moved; ``(scene, field index, the pairs with the field, their shapes, Rf, pf)``."""
    b = sd.ModelBuilder("kinds").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    geometry = [sd.Geometry(f"g{i}", 0, Transform(np.eye(3), np.zeros(3)), kind, size, "collision")
                for i, (kind, size) in enumerate(KINDS)]
    Rf, pf = sd.spatial.rpy_to_rot([0.2, -0.1, 0.7]), np.array([0.3, -0.2, 0.1])
    heights = rng.uniform(0, 1, tuple(rng.integers(*rows, 2)))
    field = sd.Shape("hfield", (1.5, 1.2, 0.4, 0.2), heights=heights, name="ground", placement=(Rf, pf))
    scene = sd.Scene(b.build().with_geometry(*geometry), world=[field], margin=0.05)
    h = next(i for i, s in enumerate(scene.shapes) if s.kind == "hfield")
    ks = np.array([k for k, pair in enumerate(scene.index) if h in pair])
    a = np.array([i if j == h else j for i, j in scene.index[ks]])
    return scene, h, ks, a, Rf, pf


def _pressed(rng, scene, h, a, Rf, pf):
    """Random placements ``(R, p)`` of every shape, each shape ``a`` centred over a random point of the field
    at the surface's height there, give or take its bounding radius (so that bumps press into it)."""
    n = len(scene.shapes)
    Q, _ = np.linalg.qr(rng.normal(size=(n, 3, 3)))
    R, p = Q * np.linalg.det(Q)[:, None, None], np.zeros((n, 3))
    sx, sy, top, _ = scene.shapes[h].size
    H = scene.shapes[h].heights
    for i in a.tolist():
        x, y = rng.uniform(-sx, sx), rng.uniform(-sy, sy)
        r, c = int(round((y + sy) / (2 * sy) * (H.shape[0] - 1))), int(round((x + sx) / (2 * sx) * (H.shape[1] - 1)))
        z = H[r, c] * top + rng.uniform(-0.6, 1.0) * scene.shapes[i].bounding_radius
        p[i] = Rf @ [x, y, z] + pf
    R[h], p[h] = Rf, pf
    return R, p


def test_every_kind_pressed_into_bumps_has_the_numpy_roads_hits(monkeypatch):
    rng = np.random.default_rng(17)
    calls = {"c": 0, "left": 0}
    routine = collision_hfield.more_on_hfield_c

    def counted(*args):
        got = routine(*args)
        calls["c" if got is not None else "left"] += 1
        return got
    monkeypatch.setattr(collision_hfield, "more_on_hfield_c", counted)
    hits, kinds = 0, set()
    for case in range(60):
        scene, h, ks, a, Rf, pf = _field_scene(rng)
        for _ in range(10):
            R, p = _pressed(rng, scene, h, a, Rf, pf)
            cut = rng.uniform(0.001, 0.1, len(ks))
            with sd.use_backend("numpy"):
                want = collision_hfield.hfield_pairs(scene, ks, R, p, cut)
            with sd.use_backend("native"):
                got = collision_hfield.hfield_pairs(scene, ks, R, p, cut)
            assert np.array_equal(want[0], got[0])
            bound = rounding_bound(64) * 4
            for w, g in zip(want[1:4], got[1:4]):
                assert np.abs(w - g).max(initial=0.0) <= bound
            least = min(min(s) for _, s in KINDS)
            assert np.abs(want[4] - got[4]).max(initial=0.0) <= bound / (np.sin(PARALLEL_EDGES) * least)
            hits += len(got[0])
            kinds |= {scene.shapes[a[np.searchsorted(ks, k)]].kind for k in got[0].tolist()}
    assert calls["c"] >= 300 and hits >= 3000 and kinds == {"box", "capsule", "cylinder", "ellipsoid"}


def test_an_ellipsoid_on_a_spike_and_no_compiler(monkeypatch):
    """An ellipsoid (semi-axes 0.3, 0.2, 0.1) level over a single spike of the field (its tip 0.5 m high at
    the centre, the faces around it sloping away more steeply than the ellipsoid's bottom), its lowest
    point 0.01 m over the tip: on the native road the routine measures it (Eberly's iteration on the tip)
    and the deepest hit is the tip at 0.01 m, the normal up; without a C compiler, None for every call and
    the NumPy road's hits."""
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("e", 0, Transform(np.eye(3), np.zeros(3)), "ellipsoid", (0.3, 0.2, 0.1), "collision")
    heights = np.zeros((5, 5))
    heights[2, 2] = 1.0
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("hfield", (1.0, 1.0, 0.5, 0.1), heights=heights)],
                     margin=0.05)
    h = next(i for i, s in enumerate(scene.shapes) if s.kind == "hfield")
    R, p = np.stack([np.eye(3)] * 2), np.zeros((2, 3))
    p[1 - h] = [0.0, 0.0, 0.61]
    calls = []
    routine = collision_hfield.more_on_hfield_c
    monkeypatch.setattr(collision_hfield, "more_on_hfield_c", lambda *x: calls.append(routine(*x)) or calls[-1])
    with sd.use_backend("native"):
        k, d, wa, wb, n = collision_hfield.hfield_pairs(scene, np.array([0]), R, p, np.array([0.05]))
    assert len(calls) == 1 and calls[0] is not None
    tip, bound = np.argmin(d), rounding_bound(64)
    assert abs(d[tip] - 0.01) <= bound and np.abs(wb[tip] - [0, 0, 0.5]).max() <= bound
    assert np.abs(wa[tip] - [0, 0, 0.51]).max() <= bound and np.abs(n[tip] - [0, 0, 1]).max() <= bound
    monkeypatch.setattr(heightfield_more_c, "_routine", lambda: None)
    monkeypatch.setattr(heightfield_c, "_routine", lambda: None)            # (no compiler: neither routine)
    scene2, h2, ks2, a2, Rf, pf = _field_scene(np.random.default_rng(3))
    R2, p2 = _pressed(np.random.default_rng(4), scene2, h2, a2, Rf, pf)
    with sd.use_backend("numpy"):
        want = collision_hfield.hfield_pairs(scene2, ks2, R2, p2, np.full(len(ks2), 0.05))
    with sd.use_backend("native"):
        got = collision_hfield.hfield_pairs(scene2, ks2, R2, p2, np.full(len(ks2), 0.05))
    assert calls[1:] and all(c is None for c in calls[1:])
    assert all(np.array_equal(w, g) for w, g in zip(want, got))


@pytest.mark.parametrize("kind, size", [("box", (0.3, 0.2, 0.15)), ("capsule", (0.06, 0.3)),
                                        ("cylinder", (0.08, 0.25))])
def test_a_ridge_under_a_shape_is_its_deepest_hit(kind, size):
    """A field of one ridge along y (the middle column of grid points 0.25 m high, the others 0): a box lying
    flat, a capsule or a cylinder lying along x, 0.01 m into it, centred over it: on the native road the
    deepest hit is 0.01 m deep, on the ridge (x = 0), its normal along the field's up."""
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("s", 0, Transform(np.eye(3), np.zeros(3)), kind, size, "collision")
    heights = np.zeros((5, 5))
    heights[:, 2] = 1.0
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("hfield", (1.0, 1.0, 0.25, 0.1), heights=heights)],
                     margin=0.05)
    h = next(i for i, s in enumerate(scene.shapes) if s.kind == "hfield")
    R, p = np.stack([np.eye(3)] * 2), np.zeros((2, 3))
    if kind != "box":
        R[1 - h] = sd.spatial.rpy_to_rot([0.0, np.pi / 2, 0.0])           # (the axis along x)
    below = size[2] / 2 if kind == "box" else size[0]                    # (the centre's height over the lowest point)
    p[1 - h] = [0.0, 0.1, 0.25 - 0.01 + below]
    with sd.use_backend("native"):
        k, d, wa, wb, n = collision_hfield.hfield_pairs(scene, np.array([0]), R, p, np.array([0.05]))
    i = np.argmin(d)
    bound = rounding_bound(64)
    assert abs(d[i] + 0.01) <= bound and abs(wb[i][0]) <= bound and abs(wb[i][2] - 0.25) <= bound
    assert np.allclose(n[i], [0, 0, 1], rtol=0, atol=bound / 0.01)
