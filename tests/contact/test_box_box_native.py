"""Two boxes' hits in one native call (sparsedyn.contact.box_box_native): the hand-written routine's
hits are the NumPy road's (``closed_forms.box_box`` and ``box_box_corners`` merged by collide's
rules) in the same order, to the rounding of the closed forms (a few dozen dependent operations on
lengths of order one: ``rounding_bound(64)`` metres), on random poses and boxes resting face on
face; and ``collide`` on the default road (the routine) equals the NumPy road on a stack of boxes."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact.box_box_native import box_box_hits
from sparsedyn.contact.closed_forms import box_box, box_box_corners
from sparsedyn.contact.collision import _hits
from sparsedyn.contact.collision_coal import SAME_DEPTH
from sparsedyn.model.spatial import Transform
from test_closed_forms import random_pairs

BOUND = rounding_bound(64)


class _Pairs:
    """What collide's merge (``collision._hits``) reads of a scene."""

    def __init__(self, margin, n):
        self.margin, self.pair_names = margin, [("a", "b")] * n


def numpy_road(Ra, pa, ha, Rb, pb, hb, margin):
    """collide's NumPy road on each pair: the closest pair where within ``margin``, then the corners
    and the polygon, the closest pair left out where one is as deep; merged: (pair, d, x, n)."""
    blocks = []
    for k in range(len(pa)):
        x = [v[k:k + 1] for v in (Ra, pa, ha, Rb, pb, hb)]
        d, wa, wb, n = box_box(*x)
        if not d[0] < margin:
            continue
        df, waf, wbf, nf = box_box_corners(*x)
        keep = not df.min() <= d[0] + SAME_DEPTH
        blocks.append((np.full(24 + keep, k), *(np.concatenate([a[:keep], b]) for a, b in
                                              zip((d, wa, wb, n), (df, waf, wbf, nf)))))
    h = _hits(_Pairs(margin, len(pa)), blocks)
    return h.pair, h.distances, h.points, h.normals


def _resting(rng, n):
    """Boxes on a box, each turned about z, 10 micrometres into it."""
    angle = rng.uniform(0, np.pi, n)
    c, s = np.cos(angle), np.sin(angle)
    Ra = np.zeros((n, 3, 3))
    Ra[:, 0, 0], Ra[:, 0, 1], Ra[:, 1, 0], Ra[:, 1, 1], Ra[:, 2, 2] = c, -s, s, c, 1.0
    hb, ha = rng.uniform(0.1, 0.4, (n, 3)), rng.uniform(0.05, 0.3, (n, 3))
    pa = np.c_[rng.uniform(-0.3, 0.3, (n, 2)), hb[:, 2] + ha[:, 2] - 1e-5]
    return Ra, pa, ha, np.tile(np.eye(3), (n, 1, 1)), np.zeros((n, 3)), hb


@pytest.mark.parametrize("which", ["random", "resting"])
def test_the_routines_hits_are_the_numpy_roads(which):
    rng = np.random.default_rng(7)
    pairs = random_pairs(rng, 300) if which == "random" else _resting(rng, 150)
    margin = 0.05
    k, d, x, n = numpy_road(*pairs, margin)
    got = box_box_hits(*pairs, margin)
    assert got is not None                                   # a C compiler here (the suite's machines have one)
    gk, gd, gwa, gwb, gn = got
    assert len(k) >= (300 if which == "random" else 4 * 150)    # every regime: apart, deep, face on face
    assert np.array_equal(gk, k)
    assert np.abs(gd - d).max() <= BOUND and np.abs(gn - n).max() <= BOUND
    assert np.abs((gwa + gwb) / 2 - x).max() <= BOUND
    if which == "resting":                                   # a face on a face: three points a pair at least
        held = np.unique(gk[gd < 0])                        # (the others: beside the lower box)
        assert len(held) >= 100 and np.all(np.bincount(gk)[held] >= 3)


def test_a_cutoff_below_the_margin_keeps_the_hits_within_it():
    pairs = _resting(np.random.default_rng(8), 40)
    k, d, _, _, _ = box_box_hits(*pairs, 0.05)
    k2, d2, _, _, _ = box_box_hits(*pairs, 0.05, np.full(40, -2e-5))
    keep = d < -2e-5
    assert np.array_equal(k2, k[keep]) and np.array_equal(d2, d[keep])


def _stack():
    """Two free cubes (0.2 m, 0.1 m) stacked on a world box (a table) on the floor."""
    b = sd.ModelBuilder("stack")
    for name, m in (("low", 2.0), ("high", 1.0)):
        b = b.add_body(name, None, sd.make_joint("free"), mass=m, rot_inertia=np.eye(3) * 0.01)
    model = b.build().with_geometry(
        sd.Geometry("low", 0, Transform(np.eye(3), np.zeros(3)), "box", (0.2, 0.2, 0.2), "collision"),
        sd.Geometry("high", 1, Transform(np.eye(3), np.zeros(3)), "box", (0.1, 0.1, 0.1), "collision"))
    table = sd.Shape("box", (0.6, 0.6, 0.1), placement=(np.eye(3), [0.0, 0.0, 0.05]), name="table")
    return sd.Scene(model, world=[sd.Shape("plane", name="floor"), table])


def _stack_by_a_post():
    """:func:`_stack` with a world cylinder (a post, radius 0.05 m) standing against the lower cube's side:
    its pairs with the cubes are coal's (a box and a cylinder), their rows from the routine's look-ahead."""
    scene = _stack()
    post = sd.Shape("cylinder", (0.05, 0.6), placement=(np.eye(3), [0.16, 0.0, 0.3]), name="post")
    return sd.Scene(scene.model, world=[*scene.shapes[len(scene.model.geometry("collision")):], post])


def test_collide_on_a_stack_of_boxes_is_the_numpy_road():
    scene = _stack()
    rng = np.random.default_rng(9)
    seen = set()
    for _ in range(20):
        tilt = rng.normal(scale=0.05, size=(2, 3))
        q = []
        for z, t in zip((0.2 - 1e-5, 0.35 - 2e-5), tilt):
            quat = np.r_[t / 2, 1.0]
            q += [*rng.uniform(-0.03, 0.03, 2), z, *(quat / np.linalg.norm(quat))]
        with sd.use_backend("native", deterministic=True):
            got = sd.collide(scene, q)
        with sd.use_backend("numpy"):
            want = sd.collide(scene, q)
        assert got.pairs == want.pairs and np.array_equal(got.pair, want.pair)
        for a, b in zip(got[1:4], want[1:4]):
            assert np.abs(a - b).max(initial=0.0) <= BOUND
        seen |= set(got.pairs)
    assert {("low", "table"), ("low", "high")} <= seen


def test_a_stack_of_boxes_rests_on_the_fused_road():
    """The stack at rest, 10 and 20 micrometres into its supports, on the default road: each step one
    native call (box-box rows from the routine); after 0.5 s it has not moved (no step adds energy) and
    its eight contacts (four corners under each cube) carry the weights over a step: the table's both
    cubes' (3 kg), the lower cube's top the upper's (1 kg), ``sum lambda_n = (3 + 1) g dt``."""
    from sparsedyn.contact.scene_fused import fused_step
    scene = _stack()
    model, dt, g = scene.model, 1e-3, 9.81
    q = np.r_[0, 0, 0.2 - 1e-5, 0, 0, 0, 1, 0.02, -0.01, 0.35 - 2e-5, 0, 0, 0, 1]
    v, tau = np.zeros(12), np.zeros(12)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, tau, scene, dt)                       # (grows the slot layout)
        assert fused_step(model, q, v, tau, scene, dt, np.array([dt, 1e-8, 300.0, 1e4, 0.005])) is not None
        r = sd.rollout(model, list(q), v, tau, scene, dt, 500)
    # moved by no more than the deepest penetration the correction removes (20 um) and what the speeds
    # bounded below allow over 0.5 s
    assert np.abs(r.q[-1] - q).max() <= 2e-5 + 0.5 * 1e-6 and np.abs(r.v[-1]).max() <= 1e-6
    assert len(r.impulses[-1]) == 8
    assert abs(r.impulses[-1][:, 2].sum() - 4.0 * g * dt) <= 1e-6 * 4.0 * g * dt


def test_a_batch_of_stacks_steps_as_each_state_alone():
    """Five stacks, the upper cube slid along x: one batch call (each state's box-box rows from the
    routine) gives each state's single step, bit for bit."""
    scene = _stack()
    model, dt = scene.model, 1e-3
    q = np.r_[0, 0, 0.2 - 1e-5, 0, 0, 0, 1, 0.0, -0.01, 0.35 - 2e-5, 0, 0, 0, 1]
    Q = np.repeat(q[None], 5, 0)
    Q[:, 7] = np.linspace(-0.04, 0.04, 5)
    V = np.zeros((5, 12))
    V[:, 9] = -0.05                                                         # the upper cube pressing down
    tau = np.zeros(12)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, V[0], tau, scene, dt)
        batch = sd.contact_step(model, Q, V, tau, scene, dt)
        singles = [sd.contact_step(model, Q[i], V[i], tau, scene, dt) for i in range(5)]
    assert all(len(s.impulses) == 8 for s in singles)
    assert batch.v.tobytes() == np.array([s.v for s in singles]).tobytes()
    assert batch.q.tobytes() == np.array([s.q for s in singles]).tobytes()


def test_without_a_c_compiler_the_numpy_road_answers(monkeypatch):
    """The routine unbuilt (as without a C compiler): collide on the default road takes the vectorised
    closed forms for the box pairs, the same hits as the routine's, and the stack still steps (the
    Python road), its step the routine's road's to the solver's tolerance (1e-8)."""
    from sparsedyn.contact import box_box_native
    scene, slow = _stack(), _stack()
    q = np.r_[0, 0, 0.2 - 1e-5, 0, 0, 0, 1, 0.02, -0.01, 0.35 - 2e-5, 0, 0, 0, 1]
    with sd.use_backend("native", deterministic=True):
        want = sd.collide(scene, q)
        step = sd.contact_step(scene.model, q, np.zeros(12), np.zeros(12), scene, 1e-3)
        monkeypatch.setattr(box_box_native, "c_routine", lambda *args: None)
        assert box_box_native.box_box_hits(*(np.zeros((1, 3, 3)), np.zeros((1, 3)), np.ones((1, 3))) * 2, 0.1) is None
        got = sd.collide(slow, q)
        ref = sd.contact_step(slow.model, q, np.zeros(12), np.zeros(12), slow, 1e-3)
    assert got.pairs == want.pairs and len(want.pairs) == 8
    for a, b in zip(got[1:4], want[1:4]):
        assert np.abs(a - b).max() <= BOUND
    # the same contacts in collide's order from data equal to rounding: the same solve, to its tolerance
    assert int(ref.iterations) == int(step.iterations) and list(ref.modes) == list(step.modes)
    assert np.abs(ref.impulses - step.impulses).max() <= 1e-8 * np.abs(step.impulses).max()
    assert np.abs(ref.v - step.v).max() <= 1e-8 * max(1.0, np.abs(step.v).max())


@pytest.mark.parametrize("which", ["random", "resting"])
def test_each_hits_witnesses_are_its_distance_apart_along_its_normal(which):
    """``w_a - w_b = d n`` for every hit (the step's rows place a contact's point at ``w_a`` and its plane
    through ``w_b``, :func:`~sparsedyn.collide`'s hits at their midpoint ``d / 2`` either side along ``n``:
    the two are one contact only where this holds), both roads, at random poses where a corner of one box
    lies over a face of the other tilted from the pair's axis (the pair's axis then another face's
    normal), and on boxes resting face on face."""
    rng = np.random.default_rng(9)
    pairs = random_pairs(rng, 300) if which == "random" else _resting(rng, 150)
    d, wa, wb, n = box_box_corners(*pairs)
    ok = d < 0.05                                           # (the corners far off: +inf; the others within)
    assert ok.sum() >= 400
    scale = 1 + np.abs(wa[ok]).max()
    assert np.abs(wa - wb - d[:, None] * n)[ok].max() <= BOUND * scale
    gk, gd, gwa, gwb, gn = box_box_hits(*pairs, 0.05)
    assert len(gk) >= 300
    assert np.abs(gwa - gwb - gd[:, None] * gn).max() <= BOUND * scale
