"""The float checks of the NumPy online phase (:class:`sparsedyn.sparse.checks.Monitor`).

The monitor tests a block's pivots together, after the block; its decisions and values must be
those of the rule applied pivot by pivot, state by state, as the module states it: the scale of a
pivot is ``max(|piv|, |init|, max|l|, max|u|)``, a state fails where ``|piv| / scale <= PIVOT_RTOL``
or the pivot is not finite (a NaN in the scale makes the ratio zero), and a backward error above
``BERR_TOL`` fails; ``first`` is the first failing test in the order the tests came.
"""

import math

import numpy as np
import pytest

from sparsedyn.sparse import checks
from sparsedyn.sparse.checks import BERR_TOL, PIVOT_RTOL, Monitor


class _Block:
    def __init__(self, name):
        self.name, self.proven = name, False


def _ratio(piv, init, lvals, uvals):
    """The rule for one state, in plain Python floats."""
    mags = [abs(piv), abs(init)] + [abs(x) for x in lvals] + [abs(x) for x in uvals]
    if any(math.isnan(m) for m in mags):
        return 0.0
    scale = max(mags)
    if not scale > 0 or math.isinf(scale):        # inf / inf is NaN: a zero ratio
        return 0.0
    return abs(piv) / scale


def _calls(rng, B):
    """Pivot calls of two blocks (batch ``(B,)``): random entries with small, zero, NaN and infinite
    pivots and scales, empty and missing L columns and U rows."""
    blk1, blk2 = _Block("one"), _Block("two")
    out = []
    for blk, K in ((blk1, 7), (blk2, 5)):
        for k in range(K):
            piv = rng.normal(size=B)
            init = rng.normal(size=B)
            m1, m2 = (int(x) for x in rng.integers(0, 4, size=2))
            lvals = rng.normal(size=(m1, B)) * 10.0 ** rng.integers(-3, 4, size=(m1, B))
            uvals = rng.normal(size=(m2, B)) if k % 3 else None
            if k == 2:
                piv[0] = 1e-11 * max(1.0, np.max(np.abs(lvals[:, 0]), initial=0.0))    # tiny against its scale
            if k == 3 and blk is blk2:
                piv[1], init[1] = 0.0, 0.0
                lvals, uvals = np.zeros((0, B)), None                                # zero scale
            if k == 4 and blk is blk1 and m1:
                lvals[0, 2] = np.nan                                              # a NaN in the scale
            if k == 1 and blk is blk2:
                piv[B - 1] = np.inf
            out.append((blk, k, piv, init, lvals, uvals))
    return out


def _expected(calls, B):
    bad = np.zeros(B, bool)
    ratio = np.full(B, np.inf)
    first = None
    for blk, k, piv, init, lvals, uvals in calls:
        r = np.array([_ratio(piv[s], init[s], lvals[:, s], [] if uvals is None else uvals[:, s]) for s in range(B)])
        b = ~(r > PIVOT_RTOL) | ~np.isfinite(piv)
        ratio = np.minimum(ratio, r)
        if b.any() and first is None:
            first = (blk, k, float(r.min()))
        bad |= b
    return bad, ratio, first


@pytest.mark.parametrize("hold", [None, 7])
def test_pivot_tests_of_a_block_decide_as_the_rule_pivot_by_pivot(hold, monkeypatch):
    if hold is not None:                         # tested in pieces of a few pivots: the same answers
        monkeypatch.setattr(checks, "_HOLD", hold)
    rng = np.random.default_rng(4)
    B = 6
    calls = _calls(rng, B)
    bad, ratio, first = _expected(calls, B)
    assert bad.any() and not bad.all()           # the case exercises both answers
    mon = Monitor("auto", (B,))
    for c in calls:
        mon.pivot(*c)
    assert np.array_equal(mon.bad, bad)
    assert np.array_equal(mon.ratio, ratio)
    assert mon.first[:2] == first[:2] and mon.first[2] == first[2]
    # a backward error after the pivots: it fails a state, and the first failure stays the pivot's
    err = np.zeros(B)
    err[np.argmin(bad)] = 2 * BERR_TOL
    mon.backward(calls[0][0], err)
    assert np.array_equal(mon.bad, bad | (err > BERR_TOL))
    assert mon.first[:2] == first[:2] and np.array_equal(mon.berr, err)


def test_a_backward_error_before_any_failing_pivot_comes_first():
    """Order is kept across kinds: a block's pending pivots are decided before a backward error."""
    B = 3
    blk1, blk2 = _Block("one"), _Block("two")
    mon = Monitor("auto", (B,))
    mon.pivot(blk1, 0, np.ones(B), np.ones(B), None, None)                   # passes
    mon.backward(blk1, np.array([0.0, 5 * BERR_TOL, 0.0]))
    mon.pivot(blk2, 0, np.array([1.0, 1.0, 0.0]), np.ones(B), None, None)    # fails state 2
    assert mon.bad.tolist() == [False, True, True]
    assert mon.first == (blk1, None, 5 * BERR_TOL)
    assert mon.ratio.tolist() == [1.0, 1.0, 0.0]


def test_pivots_with_a_broadcast_batch_are_tested_against_the_whole_batch():
    """Factors of configurations shared by several right-hand sides have batch (1,): their tests
    broadcast to the monitor's batch."""
    mon = Monitor("auto", (2, 3))
    blk = _Block("one")
    mon.pivot(blk, 0, np.array([[1.0], [1e-12]]), np.ones((2, 1)), np.ones((2, 2, 1)), None)
    assert mon.bad.tolist() == [[False] * 3, [True] * 3]
    assert mon.first == (blk, 0, 1e-12)
