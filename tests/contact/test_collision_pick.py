"""collide's hits picked in one native call (the compiler's extension's ``pick``, used by
sparsedyn.contact.collision where every pair is native): the rows below the cutoff in the given order,
as NumPy's boolean mask and ``take`` pick them, entry for entry; arrays of their own; None for
arguments it does not take.  And collide on that road is the general road's (collide_within) bit for
bit, its hits untouched by a later call."""

import os

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.collision import collide_within
from sparsedyn.kernels import native_function


def _ball_and_box():
    """A ball and a box, each on a free joint, over a floor: the collision kernel's pairs alone."""
    eye = sd.spatial.Transform(np.eye(3), np.zeros(3))
    b = sd.ModelBuilder("two")
    for name in ("ball", "box"):
        b = b.add_body(name, None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.004)
    model = b.build().with_geometry(sd.Geometry("ball", 0, eye, "sphere", (0.1,), "collision"),
                                    sd.Geometry("box", 1, eye, "box", (0.2, 0.2, 0.2), "collision"))
    return sd.Scene(model, world=[sd.Shape("plane", name="floor")])


@pytest.fixture
def pick():
    with sd.use_backend("native", deterministic=True):
        scene = _ball_and_box()
        sd.collide(scene, np.r_[0, 0, 0.09, 0, 0, 0, 1, 0.5, 0, 0.09, 0, 0, 0, 1])    # (the native calls built)
        f = native_function("pick")
    if f is None:
        # CI installs a compiler (the pip compiler comes with the package): no extension there is a failure
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no compiler's extension here")
    return f


@pytest.mark.parametrize("ordered", [False, True])
def test_pick_takes_the_rows_below_the_cutoff_in_order(pick, ordered):
    rng = np.random.default_rng(1)
    for K, C in ((0, 11), (1, 7), (9, 11), (40, 11)):
        rows = rng.normal(size=(K, C))
        rows[::5, 0] = np.nan                      # (below no cutoff, as in NumPy)
        order = rng.permutation(K).astype(np.int64) if ordered else None
        every = rng.integers(0, 5, K).astype(np.int64)
        x, n, d, sel, k = pick(rows, 0.1, order, every)
        want = np.arange(K) if order is None else order
        want = want.compress(rows[want, 0] < 0.1)
        assert sel.dtype == np.int64 and np.array_equal(sel, want)
        assert k.dtype == np.int64 and np.array_equal(k, every[want]) and k.flags.writeable
        assert pick(rows, 0.1, order, None)[4] is None
        assert np.array_equal(d, rows[want, 0]) and np.array_equal(x, rows[want, 1:4])
        assert np.array_equal(n, rows[want, 4:7])
        assert x.shape == (len(want), 3) and n.shape == (len(want), 3) and d.shape == (len(want),)
        kept = [a.copy() for a in (x, n, d)]
        rows[:] = 7.0                              # (the picks are copies: the table's later values leave them)
        for a, b in zip((x, n, d), kept):
            assert np.array_equal(a, b)


def test_pick_declines_what_it_does_not_take(pick):
    rows, every = np.zeros((4, 11)), np.arange(4)
    assert pick(rows[:, :6].copy(), 0.1, None, every) is None              # fewer than 7 columns
    assert pick(rows.astype(np.float32), 0.1, None, every) is None         # not float64
    assert pick(np.asfortranarray(rows), 0.1, None, every) is None         # not C-contiguous
    assert pick(rows, 0.1, np.arange(3), every) is None                    # an order of another length
    assert pick(rows, 0.1, np.array([0, 1, 2, 4]), every) is None          # an order out of range
    assert pick(rows, 0.1, np.arange(4, dtype=np.int32), every) is None    # not int64
    assert pick(rows, 0.1, None, every[:3]) is None                        # pairs of another length
    with pytest.raises(TypeError):
        pick(rows, "a", None, every)
    with pytest.raises(TypeError):
        pick(rows, 0.1, None)


def test_collide_on_the_picked_road_is_the_general_roads_bit_for_bit():
    scene = _ball_and_box()
    rng = np.random.default_rng(2)
    with sd.use_backend("native", deterministic=True):
        base = np.r_[0, 0, 0.099, 0, 0, 0, 1, 0.5, 0, 0.099, 0, 0, 0, 1]
        sd.collide(scene, base), sd.collide(scene, base)
        assert scene.cache.get("collide road") is not None
        earlier = None
        for _ in range(20):
            q = base + np.r_[rng.normal(scale=0.004, size=3), 0, 0, 0, 0, rng.normal(scale=0.004, size=3), 0, 0, 0, 0]
            got, want = sd.collide(scene, q), collide_within(scene, q, None)
            assert got.pairs == want.pairs and np.array_equal(got.pair, want.pair)
            for a, b in zip(got[1:4], want[1:4]):
                assert a.shape == b.shape and np.array_equal(a, b)
            if earlier is not None:                # (a later call leaves an earlier call's hits)
                assert all(np.array_equal(a, b) for a, b in zip(earlier[0][1:5], earlier[1]))
            earlier = (got, [np.array(a, copy=True) for a in got[1:5]])
        assert len(got.pairs) > 0
