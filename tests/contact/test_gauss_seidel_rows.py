"""The friction solver's Gauss-Seidel sweep contact by contact (sparsedyn.contact.gauss_seidel_rows): the
NumPy road's loop on Python floats is the traced formulation to the last bit, and leaves the free slots'
impulses zero; the rule that stops sweeps that stall after ADMM, by hand."""

import math

import numpy as np
import pytest

from sparsedyn.contact.gauss_seidel_rows import GAIN, WINDOW, contact_sweep, contacts_in_use, stalled


def _problem(nc, used, seed):
    """``(G, g, mu, lam)`` of ``nc`` slots, the first ``used`` of them contacts: ``G = J J^T`` of rank 4
    (coupled, redundant rows of scales 1e-2 to 1e2), the free slots' rows zero, open (``g_n = 0.3``)."""
    rng = np.random.default_rng(seed)
    m, k = 3 * nc, 3 * used
    J = np.zeros((m, 4))
    J[:k] = rng.normal(size=(k, 4)) * np.geomspace(1e-2, 1e2, k)[:, None]
    g = np.zeros(m)
    g[:k] = rng.normal(size=k)
    g[k + 2::3] = 0.3
    lam = np.zeros(m)
    lam[:k] = np.abs(rng.normal(size=k))
    return J @ J.T, g, rng.uniform(0.0, 1.0, nc), lam


def test_a_sweep_on_floats_is_the_traced_formulation_to_the_bit():
    """Nine slots, five of them contacts (sliding and sticking ones, a frictionless one): the sweep on
    float arrays (Python floats, the free slots left out) against the traced formulation run on numbers
    (object arrays of Python floats): the same impulses and signs of zeros, the free slots' zero.  The
    sums' rounding depends on their order here (``math.fsum`` differs), so the order is the traced one."""
    G, g, mu, lam = _problem(9, 5, 4)
    mu[1] = 0.0
    assert any(math.fsum(G[r] * lam) != sum((G[r] * lam).tolist()) for r in range(15))
    out = np.array(contact_sweep(G, g, mu, lam))
    ref = np.array(contact_sweep(*(x.astype(object) for x in (G, g, mu, lam))), float)
    assert np.array_equal(out, ref) and np.array_equal(np.signbit(out), np.signbit(ref))
    assert np.array_equal(out[15:], np.zeros(12)) and np.array_equal(out[3:5], [0.0, 0.0])   # mu = 0: no friction
    t, n = out.reshape(-1, 3)[:, :2], out[2::3]
    assert np.all(n >= 0.0) and np.all(np.hypot(t[:, 0], t[:, 1]) <= mu * n * (1 + 1e-15))    # in the cones


def test_the_contacts_in_use_end_at_the_last_busy_slot():
    """:func:`contacts_in_use`: past the returned slot ``G``, ``lam`` and the tangential ``g`` are zero and
    the normal ``g`` in ``[0, 1e8]``; a closing (``g_n < 0``) or sliding free slot counts."""
    G, g, mu, lam = _problem(4, 2, 1)
    assert contacts_in_use(G, g, lam) == 2
    g[8] = -1e-3
    assert contacts_in_use(G, g, lam) == 3
    g[8], g[9] = 0.3, 1e-9
    assert contacts_in_use(G, g, lam) == 4
    g[9] = 0.0
    G[11, 0] = G[0, 11] = 1e-300
    assert contacts_in_use(G, g, lam) == 4
    assert contacts_in_use(np.zeros((6, 6)), np.array([0, 0, 0.3, 0, 0, 2e8]), np.zeros(6)) == 2


@pytest.mark.parametrize("start", [1001.0, 170.0])
def test_sweeps_after_admm_stop_where_a_window_does_not_halve_the_residual(start):
    """``stalled`` by hand, residuals scaled by their tests ``tol ls``, ``tol vs``, ``tol ls vs``: the first
    sweep after ADMM (its 1000 iterations; or 170, where it stalled at a point that is no solution,
    :data:`~sparsedyn.contact.friction_kernel.CHECK_STALL`: before one window's length) marks its residual (the
    largest scaled one, the dual's 3) and stops nothing; a sweep inside the window keeps the mark; at the window's
    end, ``WINDOW`` sweeps later, a residual above ``GAIN`` of the mark stops, one below it marks anew; with no
    ADMM budget (``solver="pgs"``) nothing stops."""
    tol, ls, vs = 1e-8, 2.0, 0.5
    res = lambda r: np.array([0.5 * tol * ls, r * tol * vs, 0.25 * tol * ls * vs])        # noqa: E731
    stop, mark = stalled(res(3.0), ls, vs, tol, start, np.zeros(2), 1000.0)
    assert stop == 0.0 and np.allclose(mark, [3.0, start], rtol=1e-15)
    stop, same = stalled(res(1.0), ls, vs, tol, start + WINDOW - 1, mark, 1000.0)
    assert stop == 0.0 and np.array_equal(same, mark)
    assert stalled(res(3.0 * GAIN * 1.01), ls, vs, tol, start + WINDOW, mark, 1000.0)[0] == 1.0
    stop, again = stalled(res(3.0 * GAIN * 0.99), ls, vs, tol, start + WINDOW, mark, 1000.0)
    assert stop == 0.0 and np.allclose(again, [3.0 * GAIN * 0.99, start + WINDOW], rtol=1e-15)
    assert stalled(res(3.0), ls, vs, tol, 1.0 + WINDOW, np.array([3.0, 1.0]), 0.0)[0] == 0.0
