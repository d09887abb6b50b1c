"""Shapes against a height field in one C call (sparsedyn.contact.heightfield_c): the NumPy road's hits
(sparsedyn.contact.heightfield.points_on_hfield, itself checked against coal's distance to the surface in
test_heightfield) on random fields, spheres and cutoffs, and the NumPy road's broad test and features'
hits of shapes of every kind on a tilted field; without a C compiler, None and collide's hits from the
NumPy road.

Tolerances: both roads write the same operations in the same order; a compiler that fuses a multiply and
an add moves a result by a rounding, ``rounding_bound(64)`` times the size of the coordinates, and a
normal ``(c - w_b) / D`` by that over the distance ``D`` from the centre to the surface.  Placed shapes
and a placed field: NumPy's matrix products may sum in another order, so the centres in the field's
frame lie a few roundings apart, which the closest point and the normal carry as above.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import heightfield, heightfield_c
from sparsedyn.model.spatial import Transform
from test_collision_hfield import _scene


def _random_case(rng, flat=False):
    """A field of 2-11 rows and columns (flat or random), spheres over and off it (some of radius 0:
    points), some centres on the grid's lines, and a cutoff per sphere."""
    nrow, ncol = rng.integers(2, 12, 2)
    size = (rng.uniform(0.2, 2), rng.uniform(0.2, 2), rng.uniform(0.01, 1), rng.uniform(0.01, 0.5))
    H = np.full((nrow, ncol), 0.3) if flat else rng.uniform(0, 1, (nrow, ncol))
    k = rng.integers(1, 30)
    C = np.column_stack([rng.uniform(-1.3, 1.3, k) * size[0], rng.uniform(-1.3, 1.3, k) * size[1],
                         rng.uniform(-0.3, 1.2, k) * size[2]])
    C[::3, :2] = np.round(C[::3, :2], 1)
    r = rng.uniform(0, 0.2, k) * (rng.uniform(size=k) < 0.7)
    return size, H, C, r, rng.uniform(0.001, 0.3, k)


def _spheres_c(size, H, C, r, reach, held=None):
    """The spheres ``C`` (k, 3), ``r`` (k,) as k shapes (each a sphere at its centre) against the field of
    ``size`` and ``H`` placed at the origin, in the C routine: ``(index, d, w_a, w_b, n)`` as
    points_on_hfield gives them (identity placements: every product and sum exact).  ``held``: the
    routine's buffers per thread, kept from an earlier call of as many spheres (None: new ones)."""
    x, y, z = heightfield.hfield_grid(size, H)
    k = len(C)
    table = np.column_stack([np.zeros((k, 3)), r, r, np.zeros((k, 8)), np.zeros(k), np.arange(k), np.ones(k)])
    features = np.column_stack([np.zeros((k, 3)), r])
    grid = heightfield_c.field_grid(x, y, z, size)
    got = heightfield_c.group_on_hfield_c(grid, z.max(), np.stack([np.eye(3)] * (k + 1)), np.vstack([np.zeros(3), C]),
                                          np.arange(k + 1), reach,
                                          (table, table.ctypes.data, {} if held is None else held),
                                          (features, features.ctypes.data))
    if got is None:
        pytest.fail("the C routine was not built (the test environment has a C compiler)")
    near, (t, *hits) = got
    return np.array([i for i, _ in near], int)[t], *hits


@pytest.mark.parametrize("flat", [False, True])
def test_the_c_routine_gives_the_numpy_roads_hits(flat):
    rng = np.random.default_rng(11 + flat)
    compared = below = 0
    for _ in range(300):
        size, H, C, r, reach = _random_case(rng, flat)
        want = heightfield.points_on_hfield(size, H, heightfield.hfield_triangles(size, H), C, r, reach)
        got = _spheres_c(size, H, C, r, reach)
        assert np.array_equal(got[0], want[0])
        scale = max(1.0, np.abs(C).max(), np.abs(H).max() * size[2])
        bound = rounding_bound(64) * scale
        for g, w in zip(got[1:4], want[1:4]):
            assert np.abs(g - w).max(initial=0.0) <= bound
        D = np.abs(want[1] + r[want[0]])                          # the centre's distance to the surface
        assert (np.abs(got[4] - want[4]).max(1, initial=0.0) <= bound / np.maximum(D, 1e-300) + bound).all()
        compared += len(want[0])
        below += int((want[1] + r[want[0]] < 0).sum())
    assert compared >= 1000 and below >= 50


def test_an_answer_keeps_its_hits_when_the_buffer_is_used_again():
    """The routine's buffer is kept per thread (one per group of shapes): an answer's arrays are its own,
    which the next call, on other spheres, leaves as they were; each answer is the NumPy road's."""
    rng = np.random.default_rng(3)
    size, H, C, r, reach = _random_case(rng)
    C2 = C + rng.uniform(-0.05, 0.05, C.shape)
    held = {}
    first = _spheres_c(size, H, C, r, reach, held)
    kept = [x.copy() for x in first]
    second = _spheres_c(size, H, C2, r, reach, held)
    assert len(held) == 1                                  # (this thread's buffer, made once)
    for x, y in zip(first, kept):
        assert np.array_equal(x, y)
    for got, centres in ((first, C), (second, C2)):
        want = heightfield.points_on_hfield(size, H, heightfield.hfield_triangles(size, H), centres, r, reach)
        assert np.array_equal(got[0], want[0])
        bound = rounding_bound(64) * max(1.0, np.abs(centres).max(), np.abs(H).max() * size[2])
        assert all(np.abs(g - w).max(initial=0.0) <= bound for g, w in zip(got[1:4], want[1:4]))
    assert len(first[0]) >= 1 and len(second[0]) >= 1


def test_without_a_c_compiler_collide_takes_the_numpy_road(monkeypatch):
    """The routine not built: None, and the ball's hit on the flat field (surface 0.1 high) still its
    height less its radius, from the NumPy road."""
    scene = _scene("sphere", (0.1,))
    monkeypatch.setattr(heightfield_c, "_routine", lambda: None)
    x, y, z = heightfield.hfield_grid((1.0, 1.0, 0.2, 0.1), np.zeros((3, 3)))
    grid = heightfield_c.field_grid(x, y, z, (1.0, 1.0, 0.2, 0.1))
    assert heightfield_c.group_on_hfield_c(grid, 0.0, np.stack([np.eye(3)] * 2), np.zeros((2, 3)), np.arange(2), [0.1],
                                           (np.zeros((1, 16)), 0, {}), (np.zeros((1, 4)), 0)) is None
    with sd.use_backend("native"):
        hits = sd.collide(scene, [0.3, -0.1, 0.23, 0, 0, 0, 1])
    assert len(hits.distances) == 1 and abs(hits.distances[0] - 0.03) <= rounding_bound(64)


def test_every_kind_on_a_tilted_field_has_the_numpy_roads_hits():
    """``hfield_pairs`` on the native road (the broad test and the features' hits in one C call) against
    the NumPy road, on a random 20 x 25 field tilted and moved, with a shape of each kind (a mesh's
    bounding sphere off its frame's origin) placed at random over and beside it, the field first in
    some pairs: the same shapes near it (``_feature_hits``' list: the same windows) and the same hits,
    rounding apart.  The broad test is a bound (a shape kept may still have no hit), so the roads may
    differ only where a lowest point lies within rounding of ``cut`` above the window's highest grid
    point, which random poses do not meet."""
    from sparsedyn.contact.collision_hfield import _feature_hits, _group, hfield_pairs
    rng = np.random.default_rng(5)
    b = sd.ModelBuilder("kinds").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    V = rng.uniform(-0.1, 0.1, (12, 3)) + [0.2, 0.0, 0.1]
    kinds = [("sphere", (0.1,)), ("capsule", (0.05, 0.4)), ("box", (0.2, 0.4, 0.1)), ("cylinder", (0.1, 0.3)),
             ("ellipsoid", (0.3, 0.2, 0.1)), ("mesh", (1.0, 1.0, 1.0)), ("sphere", (0.05,))]
    geometry = [sd.Geometry(f"g{i}", 0, Transform(np.eye(3), np.zeros(3)), kind, size, "collision",
                            **({"vertices": V, "faces": np.array([[0, 1, 2]])} if kind == "mesh" else {}))
                for i, (kind, size) in enumerate(kinds)]
    Rf, pf = sd.spatial.rpy_to_rot([0.2, -0.1, 0.7]), np.array([0.3, -0.2, 0.1])
    field = sd.Shape("hfield", (1.5, 1.2, 0.4, 0.2), heights=rng.uniform(0, 1, (20, 25)), name="ground",
                     placement=(Rf, pf))
    scene = sd.Scene(b.build().with_geometry(*geometry), world=[field], margin=0.05)
    h = next(i for i, s in enumerate(scene.shapes) if s.kind == "hfield")
    ks = np.array([k for k, pair in enumerate(scene.index) if h in pair])
    a = np.array([i if j == h else j for i, j in scene.index[ks]])
    group = _group(scene, h, a, rng.uniform(size=len(a)) < 0.5)
    kept = hits = 0
    for _ in range(400):
        Q, _ = np.linalg.qr(rng.normal(size=(len(scene.shapes), 3, 3)))
        R, p = Q * np.linalg.det(Q)[:, None, None], rng.uniform(-2, 2, (len(scene.shapes), 3)) * [1, 1, 0.4]
        R[h], p[h] = Rf, pf
        cut = rng.uniform(0.001, 0.2, len(a))
        with sd.use_backend("numpy"):
            want, pairs_want = _feature_hits(scene, group, R, p, cut), hfield_pairs(scene, ks, R, p, cut)
        with sd.use_backend("native"):
            got, pairs_got = _feature_hits(scene, group, R, p, cut), hfield_pairs(scene, ks, R, p, cut)
        assert [(i, tuple(map(int, w))) for i, w in want[0]] == got[0]
        assert np.array_equal(want[1][0], got[1][0]) and np.array_equal(pairs_want[0], pairs_got[0])
        bound = rounding_bound(64) * 4
        for w, g in zip(want[1][1:4] + pairs_want[1:4], got[1][1:4] + pairs_got[1:4]):
            assert np.abs(w - g).max(initial=0.0) <= bound
        D = np.abs(want[1][1] + np.array([scene.shapes[x].size[0] if scene.shapes[x].kind == "sphere" else 0.0
                                          for x in a[[i for i, _ in want[0]]][want[1][0]]]))
        assert (np.abs(want[1][4] - got[1][4]).max(1, initial=0.0) <= bound / np.maximum(D, 1e-300) + bound).all()
        kept += len(got[0])
        hits += len(got[1][1])
    assert kept >= 300 and hits >= 300
