"""The closed-form pairs with a broad phase (sparsedyn.contact.collision_near), on the native road
collide takes by default and on NumPy, with one cutoff or each pair's look-ahead
(``collision_candidates_ahead``).

Oracle: ``collision_candidates`` (every candidate of every pair, itself checked against coal and the
vectorised closed forms in test_collision_kernel): a pair within the cutoff has its rows, to the
rounding of two evaluations of the same closed forms (``rounding_bound(64)`` times the size of the
values); a pair farther has ``[b, 0, ...]`` with ``cutoff < b <=`` its true distance (a lower bound).
The look-ahead's cutoffs: the bound derived by hand for two free boxes (test_look_ahead), and
``pair_cutoffs`` (itself checked against it there) on the humanoid.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import dm_control_humanoid, rounding_bound
from sparsedyn.codegen import native
from sparsedyn.contact.collision_kernel import kernel_plan
from test_collision_kernel import ELLIPSOID_PAIRS, KERNEL_PAIRS
from test_collision import free_body_scene, random_body_q
from test_look_ahead import SIZES, _by_hand, _two_boxes
from test_scene_physics import FLOOR
from sparsedyn.contact.look_ahead import body_reach, pair_cutoffs


@pytest.fixture
def native_backend():
    with sd.use_backend("native", deterministic=True):
        yield


def _as_near(all_rows):
    """collision_candidates' rows (14 columns) in collision_candidates_near's 11 columns."""
    wa, wb = all_rows[:, 1:4], all_rows[:, 4:7]
    return np.column_stack([all_rows[:, :1], (wa + wb) / 2, all_rows[:, 10:13], all_rows[:, 7:10], all_rows[:, 13:]])


def _check(model, q, kp, cutoff, got):
    """``got`` (collision_candidates_near) against collision_candidates, pair by pair; the number of
    pairs computed.  ``cutoff``: a number, or one per candidate (K,) (its pair's)."""
    want = _as_near(sd.collision_candidates(model, q, kp.shapes, kp.pairs))
    bound = rounding_bound(64) * max(1.0, np.abs(want).max())
    computed = 0
    for k in np.unique(kp.pair):
        rows = kp.pair == k
        if got[rows][:, 1:].any():                       # computed: the same rows
            assert np.abs(got[rows] - want[rows]).max() <= bound
            computed += 1
        else:                                            # left out: a lower bound beyond the cutoff
            b, cut = got[rows, 0], np.broadcast_to(cutoff, kp.pair.shape)[rows]
            assert np.all(b == b[0]) and b[0] > cut[0] and b[0] <= want[rows, 0].min() + bound
    return computed


def test_near_pairs_are_the_full_kernels_and_far_ones_a_bound_beyond_the_cutoff(native_backend):
    """dm_control's humanoid at random configurations near the floor: the pairs closer than the
    cutoff (every one with a candidate within it) are computed, the others bounded."""
    model = dm_control_humanoid()
    kp = kernel_plan(sd.Scene(model))
    rng = np.random.default_rng(7)
    computed = left_out = 0
    for t in range(12):
        q = model.random_configuration(rng)
        q[2] = rng.uniform(0.0, 0.6)
        cutoff = [0.0, 0.005, 0.05][t % 3]
        got = sd.collision_candidates_near(model, q, kp.shapes, cutoff, kp.pairs)
        want = sd.collision_candidates(model, q, kp.shapes, kp.pairs)
        assert got.shape == (len(want), 11)
        close = np.unique(kp.pair[want[:, 0] < cutoff])
        assert np.all(got[np.isin(kp.pair, close), 1:].any(1))   # every pair within the cutoff computed
        n = _check(model, q, kp, cutoff, got)
        computed, left_out = computed + n, left_out + len(kp.pairs) - n
    assert computed >= 50 and left_out >= 500                    # both branches were compared
    assert [n for n in native.shared(model).kernels if n.startswith("collision_candidates_near")]


def test_numpy_road_is_the_native_one(native_backend):
    """The NumPy function (the reference, the stages run on floats) equals the native kernel, on a
    batch of states and with plain lists."""
    model = dm_control_humanoid()
    kp = kernel_plan(sd.Scene(model))
    rng = np.random.default_rng(2)
    Q = np.array([model.random_configuration(rng) for _ in range(3)])
    Q[:, 2] = 0.2
    got = sd.collision_candidates_near(model, Q, kp.shapes, 0.01, kp.pairs)
    with sd.use_backend("numpy"):
        want = sd.collision_candidates_near(model, Q.tolist(), kp.shapes.tolist(), 0.01, [list(p) for p in kp.pairs])
    assert got.shape == want.shape == (3, len(kp.pair), 11)
    assert np.abs(got - want).max() <= rounding_bound(64) * np.abs(want).max()
    for i in range(3):
        _check(model, Q[i], kp, 0.01, want[i])


EVERY_KIND = KERNEL_PAIRS + ELLIPSOID_PAIRS + [("ellipsoid", "sphere"), ("sphere", "ellipsoid")]


@pytest.mark.parametrize("kind_a, kind_b", EVERY_KIND)
def test_every_kind_of_pair_against_the_full_kernel(kind_a, kind_b, native_backend):
    """Each kind of pair at random poses, some near (computed), some far (bounded): the bound of a
    plane pair is the shape's support along the normal, of the others bounding spheres."""
    rng = np.random.default_rng(EVERY_KIND.index((kind_a, kind_b)))
    scene = free_body_scene(kind_a, kind_b)
    kp = kernel_plan(scene)
    model = scene.model
    computed = 0
    for t in range(20):
        _, _, q = random_body_q(rng, 0.4 if t % 2 else 1.5)
        got = sd.collision_candidates_near(model, tuple(q), kp.shapes, 0.01, kp.pairs)
        computed += _check(model, q, kp, 0.01, got)
    assert 0 < computed < 20


def test_a_box_lying_on_the_floor_by_hand(native_backend):
    """An upright box (edges 0.3, 0.5, 0.4) 1 mm into the floor: its four lower corners at d = -0.001,
    its upper ones at 0.399, midpoints halfway between corner and floor, normal +z; 5 cm above, with a
    cutoff of 1 cm, the pair is left out with its bound 0.05 (the box's support along the normal)."""
    scene = free_body_scene("box", "plane")
    kp = kernel_plan(scene)
    half = np.array(scene.shapes[0].size) / 2
    q = [0.3, 0.1, half[2] - 0.001, 0, 0, 0, 1]
    got = sd.collision_candidates_near(scene.model, q, kp.shapes, 0.01, kp.pairs)
    lower = got[:, 0] < 0
    assert lower.sum() == 4 and np.allclose(got[lower, 0], -0.001, atol=1e-15, rtol=0)
    assert np.allclose(got[~lower, 0], 2 * half[2] - 0.001, atol=1e-15, rtol=0)
    assert np.allclose(got[lower, 3], -0.0005, atol=1e-15, rtol=0) and np.all(got[:, 4:7] == [0, 0, 1])
    q[2] = half[2] + 0.05
    far = sd.collision_candidates_near(scene.model, q, kp.shapes, 0.01, kp.pairs)
    assert np.allclose(far[:, 0], 0.05, atol=1e-15, rtol=0) and not far[:, 1:].any()


def test_an_ellipsoid_tilted_on_the_floor_by_hand(native_backend):
    """An ellipsoid of semi-axes (0.2, 0.3, 0.4) turned by t about x, its centre at height z: its lowest
    point lies ``sqrt((0.3 sin t)^2 + (0.4 cos t)^2)`` below the centre, at ``(0, 0.3^2 sin t, -0.4^2 cos t)
    / that`` in the world's axes turned back (so its y is ``(0.4^2 - 0.3^2) sin t cos t / that``); the
    midpoint halfway to the floor, normal +z; farther than the cutoff, the row is that bound alone."""
    scene = free_body_scene("ellipsoid", "plane")
    kp = kernel_plan(scene)
    t, z = 0.6, 0.35
    reach = np.hypot(0.3 * np.sin(t), 0.4 * np.cos(t))
    q = [0.1, -0.2, z, np.sin(t / 2), 0, 0, np.cos(t / 2)]
    got = sd.collision_candidates_near(scene.model, q, kp.shapes, 0.01, kp.pairs)
    d = z - reach
    assert got.shape == (1, 11) and abs(got[0, 0] - d) <= 1e-15
    low = [0.1, -0.2 + (0.4 ** 2 - 0.3 ** 2) * np.sin(t) * np.cos(t) / reach, z - reach]
    assert np.abs(got[0, 1:4] - (low + np.array([0.1, low[1], 0.0])) / 2).max() <= 1e-15
    assert np.all(got[0, 4:7] == [0, 0, 1])
    q[2] = reach + 0.05
    far = sd.collision_candidates_near(scene.model, q, kp.shapes, 0.01, kp.pairs)
    assert abs(far[0, 0] - 0.05) <= 1e-15 and not far[0, 1:].any()


@pytest.mark.parametrize("cutoff, shapes, message", [
    (np.nan, np.zeros((2, 15)), "cutoff must be finite"),
    (0.01, np.full((2, 15), np.inf), "shapes must be finite"),
    (0.01, np.zeros((3, 15)), r"shapes must have shape \(\.\.\., 2, 15\)"),
])
def test_bad_input_is_named(cutoff, shapes, message):
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    with pytest.raises(ValueError, match=message):
        sd.collision_candidates_near(b.build(), [0, 0, 1, 0, 0, 0, 1], shapes, cutoff,
                                     [("sphere", "plane", 0, 1, 0, -1)])


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_ahead_each_pair_within_its_own_look_ahead(backend):
    """Two free boxes 6 mm above the floor (plain lists), box0 falling at 8 m/s and spinning, box1 at
    rest, a 2 ms step: each candidate's cutoff is its pair's hand bound, box0's pair (16 mm ahead) is
    computed, its four lower corners within its cutoff, and box1's (the margin, 5 mm) left out with its
    bound 6 mm."""
    scene = sd.Scene(_two_boxes(), world=[FLOOR], self_collision=False)
    kp, model = kernel_plan(scene), scene.model
    q = [0, 0, SIZES[0][2] / 2 + 0.006, 0, 0, 0, 1, 3, 0, SIZES[1][2] / 2 + 0.006, 0, 0, 0, 1]
    q[7:10] = np.subtract(q[7:10], [0.3, 0, 0.4]).tolist()           # box1's shape at OFFSET in its body
    v = [0, 0, 2.0, 0, 0, -8.0] + [0.0] * 6
    look = [scene.margin, 2e-3]
    reach = body_reach(scene)[0].tolist()
    with sd.use_backend(backend, deterministic=True):
        c, cut = sd.collision_candidates_ahead(model, q, v, kp.shapes.tolist(), reach, look, list(kp.pairs))
    hand = _by_hand(scene, np.array(v), 2e-3)
    assert c.shape == (16, 11) and cut.shape == (16,)
    assert np.abs(cut - hand[kp.pair]).max() <= rounding_bound(64) * hand.max()
    assert _check(model, np.array(q), kp, cut, c) == 1
    box0 = np.array([scene.pairs[k] == ("box0", "floor") for k in kp.pair])
    assert (c[:, 0] < cut).sum() == 4 and np.all(box0[c[:, 0] < cut])
    assert np.allclose(c[~box0, 0], 0.006, atol=1e-15, rtol=0) and not c[~box0, 1:].any()


def test_ahead_is_near_within_pair_cutoffs_on_the_humanoid(native_backend):
    """dm_control's humanoid at random configurations near the floor and random velocities: the
    cutoffs are pair_cutoffs', the pairs within them computed (the full kernel's rows), the others
    bounded beyond them; the NumPy road (a batch) is the native one."""
    model = dm_control_humanoid()
    scene = sd.Scene(model)
    kp, reach = kernel_plan(scene), body_reach(scene)[0]
    rng = np.random.default_rng(11)
    Q = np.array([model.random_configuration(rng) for _ in range(6)])
    Q[:, 2] = rng.uniform(0.05, 0.4, 6)
    V = rng.normal(size=(6, model.nv)) * [[0.0], [1.0], [3.0], [10.0], [0.3], [1.0]]
    look, computed = np.array([scene.margin, 2e-3]), 0
    for q, v in zip(Q, V):
        c, cut = sd.collision_candidates_ahead(model, q, v, kp.shapes, reach, look, kp.pairs)
        want = pair_cutoffs(scene, q, v, 2e-3)[kp.pair]
        assert np.abs(cut - want).max() <= rounding_bound(64) * want.max()
        computed += _check(model, q, kp, cut, c)
    assert 20 <= computed < 6 * len(kp.pairs) // 2
    with sd.use_backend("numpy"):
        want, want_cut = sd.collision_candidates_ahead(model, Q[:3].tolist(), V[:3], kp.shapes, reach, look,
                                                       kp.pairs)
    got, got_cut = sd.collision_candidates_ahead(model, Q[:3], V[:3], kp.shapes, reach, look, kp.pairs)
    assert np.abs(got - want).max() <= rounding_bound(64) * np.abs(want).max()
    assert np.abs(got_cut - want_cut).max() <= rounding_bound(64) * want_cut.max()


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("v, reach, look, message", [
    ([0.0] * 6, [0.1, 0.2], [0.005, 1e-3], r"reach.* shape \(\.\.\., 1\)"),
    ([0.0] * 6, [0.1], [0.005], r"look.* shape \(\.\.\., 2\)"),
    ([0.0] * 6, [0.1], [0.005, np.inf], "look.*(finite|NaN or infinite)"),
    ([0.0] * 5 + [np.nan], [0.1], [0.005, 1e-3], "v: contains NaN"),
])
def test_ahead_bad_input_is_named(v, reach, look, message, backend):
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    with sd.use_backend(backend, deterministic=True), pytest.raises(ValueError, match=message):
        sd.collision_candidates_ahead(b.build(), [0, 0, 1, 0, 0, 0, 1], v, np.zeros((2, 15)), reach, look,
                                      [("sphere", "plane", 0, 1, 0, -1)])


@pytest.mark.parametrize("step_first", [True, False], ids=["stepped, then collided", "collided, then stepped"])
def test_a_scene_builds_one_collision_kernel_whose_rows_at_rest_are_the_near_kernels(step_first, native_backend):
    """A scene's ``collide`` and its steps, in either order, build one collision kernel,
    ``collision_candidates_ahead``, never ``collision_candidates_near``; ``collide`` runs it at ``v = 0``,
    ``look = [margin, 0]`` (each pair's cutoff ``margin + 0``): its rows at random poses of a capsule
    about a box (as a plain list) are, to the bit, those of the public ``collision_candidates_near``
    built on a model of another name, and so are the hits."""
    import dataclasses
    from sparsedyn.contact.scene_data import near_candidates
    base = free_body_scene("capsule", "box").model
    names = ("stepped" if step_first else "collided", "the near kernel")
    models = [dataclasses.replace(base, name=f"capsule by a box, {n}") for n in names]
    scene = sd.Scene(models[0], world=[sd.Shape("box", (0.6, 0.4, 0.3), name="b")], margin=0.02)
    rng = np.random.default_rng(7)
    qs = [random_body_q(rng, 0.45)[2].tolist() for _ in range(40)]
    if step_first:
        sd.contact_step(models[0], qs[0], np.zeros(6), np.zeros(6), scene, 0.002)
    hits = [sd.collide(scene, q) for q in qs]
    sd.contact_step(models[0], qs[1], np.zeros(6), np.zeros(6), scene, 0.002)
    kp = kernel_plan(scene)
    built = {n.rsplit("_s", 1)[0] for n in native.shared(models[0]).kernels if n.startswith("collision")}
    assert built == {"collision_candidates_ahead"}
    assert 0 < sum(len(h.distances) for h in hits) < 40 * len(kp.pair)
    for q, h in zip(qs, hits):
        rows = near_candidates(scene, kp, np.array(q))
        want = sd.collision_candidates_near(models[1], q, kp.shapes, scene.margin, kp.pairs)
        np.testing.assert_array_equal(rows, want)
        within = want[:, 0] < scene.margin
        assert len(h.distances) == within.sum()
        np.testing.assert_array_equal(np.sort(h.distances), np.sort(want[within, 0]))
    assert {n.rsplit("_s", 1)[0] for n in native.shared(models[1]).kernels} == {"collision_candidates_near"}


def test_free_rows_hold_no_candidate():
    """A table of rows with no candidate: ``d`` +inf, every other column zero, in the shape asked for, a new
    array each time (callers write their hits into it)."""
    from sparsedyn.contact.collision_near import NEAR_COLUMNS, free_rows
    a, b = free_rows((2, 3)), free_rows((2, 3))
    assert a.shape == (2, 3, NEAR_COLUMNS) == (2, 3, 11) and a.dtype == np.float64
    assert np.all(a[..., 0] == np.inf) and not a[..., 1:].any()
    a[0, 0, 0] = 1.0
    assert b[0, 0, 0] == np.inf and free_rows((0,)).shape == (0, 11)
