"""The box-box routine's early outs (sparsedyn.contact.box_box_c): a pair apart by more than the margin
along a separating axis, and a corner whose bound puts it off the other box by more than the cutoff,
change no hit: the routine's hits stay the NumPy road's (``closed_forms``, merged by collide's rules)
in the same order, to the closed forms' rounding, where pairs and corners lie about those thresholds;
and collide's quick call (sparsedyn.contact.collision_quick) answers each thread with the general
road's hits, bit for bit."""

import threading

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.box_box_native import box_box_hits
from sparsedyn.contact.collision import collide_within
from sparsedyn.contact.collision_quick import QUICK
from test_box_box_native import BOUND, _resting, _stack, numpy_road
from test_box_box_road import _poses
from test_closed_forms import random_pairs


def _same(got, want):
    k, d, x, n = want
    gk, gd, gwa, gwb, gn = got
    assert np.array_equal(gk, k)
    assert np.abs(gd - d).max(initial=0.0) <= BOUND and np.abs(gn - n).max(initial=0.0) <= BOUND
    assert np.abs((gwa + gwb) / 2 - x).max(initial=0.0) <= BOUND


@pytest.mark.parametrize("margin", [0.0, 0.02, 0.2])
def test_pairs_about_the_margin_keep_the_numpy_roads_hits(margin):
    """Random pairs moved apart along the line of their centres until their distance (the NumPy road's)
    is the margin give or take 1e-7 m: the separating axis test leaves some at once, the others' hits
    are the NumPy road's."""
    rng = np.random.default_rng(11)
    Ra, pa, ha, Rb, pb, hb = random_pairs(rng, 200)
    from sparsedyn.contact.closed_forms import box_box
    u = (pa - pb) / np.linalg.norm(pa - pb, axis=1)[:, None]
    d0 = box_box(Ra, pa, ha, Rb, pb, hb)[0]
    target = margin + rng.choice([-1e-7, 1e-7], 200)
    for _ in range(40):                                   # (the distance grows along u: a secant search)
        pa = pa + (target - d0)[:, None] * u
        d0 = box_box(Ra, pa, ha, Rb, pb, hb)[0]
    assert np.abs(d0 - target).max() <= 1e-9
    want = numpy_road(Ra, pa, ha, Rb, pb, hb, margin)
    assert 60 <= len(np.unique(want[0])) <= 140          # about half the pairs within the margin
    _same(box_box_hits(Ra, pa, ha, Rb, pb, hb, margin), want)


@pytest.mark.parametrize("lift", [0.0, 0.049, 0.04999, 0.05, 0.051])
def test_corners_about_the_cutoff_keep_the_numpy_roads_hits(lift):
    """Boxes resting on a box, lifted by ``lift`` [m] about the margin 0.05 m: their lower corners'
    distances are about the cutoff (their bounds too), the upper ones' far above it."""
    Ra, pa, ha, Rb, pb, hb = _resting(np.random.default_rng(12), 100)
    pa = pa + [0.0, 0.0, lift]
    want = numpy_road(Ra, pa, ha, Rb, pb, hb, 0.05)
    if lift < 0.05:
        assert len(np.unique(want[0])) >= 90            # (a few lie beside the lower box)
    _same(box_box_hits(Ra, pa, ha, Rb, pb, hb, 0.05), want)


def test_each_thread_has_its_quick_call_and_the_general_roads_hits():
    scene = _stack()
    poses = _poses(np.random.default_rng(13), 6)
    with sd.use_backend("native", deterministic=True):
        for q in poses[:2]:
            sd.collide(scene, q)
        want = [collide_within(scene, q, None) for q in poses]
        got, both = {}, threading.Barrier(2)

        def run(name):                                    # (the backend is the process's: native here)
            got[name] = [sd.collide(scene, q) for q in poses]
            if name != "main":
                both.wait(timeout=60)                     # (both alive at once: two thread ids)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        run("main")
        assert len(scene.cache[QUICK]) == 3 and all(c[1] is not None for c in scene.cache[QUICK].values())
    for hits in got.values():
        for a, b in zip(hits, want):
            assert a.pairs == b.pairs and np.array_equal(a.pair, b.pair)
            for x, y in zip(a[1:4], b[1:4]):
                assert np.array_equal(x, y)
