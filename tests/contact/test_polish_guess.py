"""The polish's guess of a contact that its warm start holds open and its velocity closes
(:mod:`sparsedyn.contact.polish_guess`), and the warm start's round of polishes
(:func:`~sparsedyn.contact.friction_polish.warm_credit`): hand-built guesses against their local
problems, a box warm-started on one edge, and the dm_control humanoid's trajectory."""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import EPS, rounding_bound
from sparsedyn.contact import friction_polish as fp
from sparsedyn.contact.friction import ContactStepWarning
from sparsedyn.contact.friction_problem import ADMM_BUDGET
from sparsedyn.contact.polish_guess import (ALONG, NEAR, NULL, PAIR, SLIP_ERROR, SWAP_SHARE, answer_closing_guess,
                                            closing_guess, merge_guess, ratio_test, squeeze_guess, sticking_guess,
                                            swap_guess)
from sparsedyn.interop import example_robot_data_dir
from test_friction import DT, G, MASS, MODEL, MU, Q0, TOL, Z, corners
from test_friction_kernel import humanoid_settled
from test_friction_polish import _coulomb
from test_friction_polish_stage import box_polish_stage, polish_run


def _native(backend):
    return sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {}))


def test_an_open_contact_that_closes_is_guessed_closed_sticking_or_sliding():
    """Per contact ``[t_x, t_y, n]`` (``G_tt = diag(4, 3)``, ``G_nn = 2``, ``mu = 0.5``): an open contact
    (zero impulse) closing at ``u_n = -0.2`` gets the normal impulse ``0.1`` that stops it alone; no
    friction (sticking: strictly inside its cone) where its own rows stop its tangential velocity within
    the cone (contact 0: ``|u_t| = 0.04 <= mu lambda_n k = 0.5 * 0.1 * 4 = 0.2``, ``k`` the largest
    eigenvalue of ``G_tt``), else the friction ``mu lambda_n = 0.05`` against ``u_t`` (contact 1, slipping
    at 0.4 along ``t_y``: sliding, on its cone, its slip more than ``SLIP_ERROR`` times the iterate's own
    error, closed contact 2's ``|u_n| = 0.1``; with that error at 0.25, sticking); a closed contact keeps
    its impulse whatever its velocity, an open one that separates (``u_n > 0``) or has no rows stays
    open, and one closing by less than ``open_fraction`` of the largest impulse stays open."""
    Gm = np.zeros((15, 15))
    for i in range(5):
        Gm[3 * i:3 * i + 3, 3 * i:3 * i + 3] = np.diag([4.0, 3.0, 2.0]) * (i != 3)      # contact 3: no rows
    Z = np.array([[0.0, 0, 0], [0, 0, 0], [0.1, 0, 1.0], [0, 0, 0], [0, 0, 0]])
    u = np.array([[0.04, 0, -0.2], [0, 0.4, -0.2], [0.3, 0.3, -0.1], [0, 0, -0.2], [0, 0, 1e-7]])
    active = (np.diagonal(Gm)[2::3] > 0).astype(float)
    mu = np.full(5, 0.5)
    assert 0.4 > SLIP_ERROR * 0.1 and 0.4 < SLIP_ERROR * 0.25
    out = closing_guess(Gm, Z, u, active, 1e-6, mu)
    want = np.array([[0, 0, 0.1], [0, -0.05, 0.1], [0.1, 0, 1.0], [0, 0, 0], [0, 0, 0]])
    assert np.abs(out - want).max() <= 4 * np.finfo(float).eps
    op, stick, slide, _ = fp.modes(out, mu, active)
    assert list(stick) == [1, 0, 1, 0, 0] and list(slide) == [0, 1, 0, 0, 0] and list(op) == [0, 0, 0, 1, 1]
    # the iterate off by 0.25 (contact 2's normal velocity): the slip may be the error's, sticking
    u2 = u.copy()
    u2[2, 2] = 0.25
    assert np.array_equal(closing_guess(Gm, Z, u2, active, 1e-6, mu)[1], [0.0, 0.0, 0.1])
    # frictionless: sticking whatever the slip (no friction at all)
    assert np.array_equal(closing_guess(Gm, Z, u, active, 1e-6, np.zeros(5))[1], [0.0, 0.0, 0.1])
    # closing by less than open_fraction (1e-6) of the largest impulse (1, G_nn = 2): open
    tiny = closing_guess(Gm, Z, np.array([[0, 0, -1e-6]] * 5), np.ones(5), 1e-6, mu)
    assert np.array_equal(tiny[[0, 1, 4]], np.zeros((3, 3)))



def test_an_answers_open_contact_that_closes_is_closed_however_little_it_carries():
    """A polish's answer, contacts uncoupled (``G = I``: each contact's impulse stops its own free
    velocity ``g``): contact 0 closed (``n = 1``), contact 1 open and closing at ``u_n = -1e-8``, whose
    solution impulse ``1e-8`` is below ``OPEN`` of the largest (``1e-6``), so :func:`closing_guess` and the
    polish's modes read it open, and the answer is rejected by the stopping test (its dual residual
    ``1e-8`` against ``tol`` times the velocity scale 1).  :func:`answer_closing_guess` closes it
    (sticking, its impulse at least ``2 OPEN`` of the largest, so read closed), and the polish from that
    guess is the solution, ``lambda_1 = (0, 0, 1e-8)`` with ``u = 0``, accepted.  Contact 2, open, closing
    slower than the answer's own error (closed contact 3's ``|u_n| = 2e-8``), and contact 4, open and
    closing beside its closed near-duplicate 5 (that is :func:`swap_guess`'s), stay open; a separating one
    (6) and one without rows (7) too."""
    nc, tol = 8, 1e-10
    Gm = np.eye(3 * nc)
    Gm[3 * 7:3 * 7 + 3, 3 * 7:3 * 7 + 3] = 0.0                       # contact 7: no rows
    c = np.cos(0.01)
    Gm[3 * 4 + 2, 3 * 5 + 2] = Gm[3 * 5 + 2, 3 * 4 + 2] = c           # 4 and 5: near-duplicates
    assert c > 1.0 - NEAR
    active = (np.diagonal(Gm)[2::3] > 0).astype(float)
    Z = np.zeros((nc, 3))
    Z[0, 2], Z[3, 2], Z[5, 2] = 1.0, 0.5, 0.25
    u = np.zeros((nc, 3))
    u[1, 2], u[2, 2], u[3, 2], u[4, 2], u[6, 2], u[7, 2] = -1e-8, -1e-8, 2e-8, -1e-3, 1e-3, -1e-3
    out = answer_closing_guess(Gm, Z, u, active, fp.OPEN)
    want = Z.copy()
    assert np.array_equal(out, Z)                                    # the answer's error 2e-8: nothing closes
    u[3, 2] = 0.0                                                    # an exact answer (error 0): 1 and 2 close
    out = answer_closing_guess(Gm, Z, u, active, fp.OPEN)
    want[1, 2] = want[2, 2] = 2.0 * fp.OPEN
    assert np.array_equal(out, want)
    assert np.array_equal(closing_guess(Gm, Z, u, active, fp.OPEN, np.full(nc, 0.5))[[1, 2]], np.zeros((2, 3)))
    # the polish on two uncoupled contacts: from the answer with 1 open, rejected; from the guess, the solution
    g = np.array([0.0, 0.0, -1.0, 0.0, 0.0, -1e-8])
    G2, mu2, act2 = np.eye(6), np.full(2, 0.5), np.ones(2)
    z = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    bound = rounding_bound(4, 1.0 / fp.EPS)
    lam, un, _, _, _, ok, conv = fp.polished(G2, g, mu2, z, 1.0, act2, 1.0, 1.0, tol)
    assert np.abs(lam - z).max() <= bound and lam[5] == 0.0 and un[5] == -1e-8 and conv == 0.0
    guess = answer_closing_guess(G2, lam.reshape(2, 3), un.reshape(2, 3), act2, fp.OPEN).reshape(6)
    assert np.abs(guess - [0.0, 0.0, 1.0, 0.0, 0.0, 2.0 * fp.OPEN * lam[2]]).max() <= bound * fp.OPEN
    lam, un, _, _, _, ok, conv = fp.polished(G2, g, mu2, guess, 1.0, act2, 1.0, 1.0, tol)
    assert conv == 1.0
    assert np.abs(lam[:5] - [0.0, 0.0, 1.0, 0.0, 0.0]).max() <= bound and abs(lam[5] - 1e-8) <= bound * 1e-8
    assert np.abs(un).max() <= tol


def _gram(normals):
    """The Delassus-like matrix (3 k, 3 k) whose contacts' normal rows are the vectors ``normals``
    (k, d) (their Gram matrix) and whose tangential rows are the identity, uncoupled."""
    k = len(normals)
    Gm = np.eye(3 * k)
    N = np.asarray(normals, float)
    Gm[2::3, 2::3] = N @ N.T
    return Gm


def test_an_open_near_duplicate_that_closes_takes_its_partners_load():
    """Contacts 0 and 1 are near-duplicates (normal rows' correlation ``cos 0.01 = 0.99995 > 1 - NEAR``),
    2 is not (``cos 0.5``), 3 and 4 near-duplicates of each other: contact 1 open and closing
    (``u_n < 0``) beside closed 0 takes 0's impulse, 0 opens; contact 2, open and closing, has no closed
    near-duplicate and stays open (that is :func:`closing_guess`'s case); contact 4 open but separating
    stays open beside closed 3, which keeps its load."""
    a = [0.0, 0.01, 0.5]
    normals = [[np.cos(t), np.sin(t), 0.0, 0.0] for t in a] + [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, np.cos(0.01),
                                                                                      np.sin(0.01)]]
    Gm = _gram(normals)
    assert np.cos(0.01) > 1.0 - NEAR > np.cos(0.5)
    Z = np.array([[0.1, 0.2, 1.0], [0, 0, 0], [0, 0, 0], [0.3, 0.0, 0.5], [0, 0, 0]])
    u = np.array([[0.0, 0, 0.0], [0, 0, -0.1], [0, 0, -0.1], [0, 0, 0.0], [0, 0, 0.2]])
    out = swap_guess(Gm, Z, u, np.ones(5), 1e-6)
    want = np.array([[0, 0, 0], [0.1, 0.2, 1.0], [0, 0, 0], [0.3, 0.0, 0.5], [0, 0, 0]])
    assert np.array_equal(out, want)
    # a contact without rows swaps nothing, and a closing by less than open_fraction of the largest
    # impulse is no closing
    assert np.array_equal(swap_guess(Gm, Z, u, np.array([1.0, 0, 1, 1, 1]), 1e-6), Z)
    assert np.array_equal(swap_guess(Gm, Z, u * 1e-7, np.ones(5), 1e-6), Z)


def test_only_the_fastest_closing_near_duplicate_takes_its_partners_load():
    """Two pairs of near-duplicates (0, 1) and (2, 3) (correlations ``cos 0.01``), 0 and 2 closed, 1 and
    3 open and closing (``G_nn = 1``): only the pair whose open contact closes faster swaps (1 at
    ``u_n = -0.1`` against 3 at ``-0.05``: 3's load stays); closing as fast (within
    ``SWAP_SHARE``), both swap."""
    normals = [[1.0, 0.0, 0.0, 0.0], [np.cos(0.01), np.sin(0.01), 0.0, 0.0], [0.0, 0.0, 1.0, 0.0],
               [0.0, 0.0, np.cos(0.01), np.sin(0.01)]]
    Gm = _gram(normals)
    Z = np.array([[0.1, 0.2, 1.0], [0, 0, 0], [0.3, 0.0, 0.5], [0, 0, 0]])
    u = np.array([[0.0, 0, 0.0], [0, 0, -0.1], [0, 0, 0.0], [0, 0, -0.05]])
    out = swap_guess(Gm, Z, u, np.ones(4), 1e-6)
    assert np.array_equal(out, Z[[1, 0, 2, 3]])
    u[3, 2] = -0.1 * (1.0 + SWAP_SHARE) / 2.0
    assert np.array_equal(swap_guess(Gm, Z, u, np.ones(4), 1e-6), Z[[1, 0, 3, 2]])


def test_a_near_duplicate_that_the_last_swap_opened_and_that_closes_again_shares_the_load():
    """Contacts 0 and 1 near-duplicates (normal rows ``[1, 0]`` and ``[cos 0.01, sin 0.01]``: ``G_nn = 1``,
    ``G_01 = c = cos 0.01``), 0 closed (``n = 1``), 1 open closing at ``u_n = -1e-5``, and 1 opened by the
    last guess's swap (``back``): the pair's normal rows stop both with ``n_0 = 1 - c 1e-5 / s``,
    ``n_1 = 1e-5 / s`` (``s = 1 - c^2 = sin^2 0.01``), both pressing, so 1 takes the share
    ``n_1 / (n_0 + n_1)`` of 0's impulse and 0 keeps the rest (the guard ``1e-14`` on ``s`` moves it by
    ``1e-14 / s = 1e-10`` relative).  Closing at ``-0.1``, ``n_0 = 1 - c 0.1 / s < 0``: the swap; and
    without ``back`` the swap whatever the pair."""
    c, s = np.cos(0.01), np.sin(0.01) ** 2
    Gm = _gram([[1.0, 0.0], [c, np.sin(0.01)]])
    Z = np.array([[0.1, 0.2, 1.0], [0, 0, 0]])
    u = np.array([[0.0, 0, 0], [0, 0, -1e-5]])
    back = np.array([0.0, 1.0])
    n0, n1 = 1.0 - c * 1e-5 / s, 1e-5 / s
    f = n1 / (n0 + n1)
    assert 0.05 < f < 0.2
    out = swap_guess(Gm, Z, u, np.ones(2), 1e-6, back)
    assert np.allclose(out, [(1.0 - f) * Z[0], f * Z[0]], rtol=1e-9, atol=0)
    assert np.array_equal(swap_guess(Gm, Z, u, np.ones(2), 1e-6), Z[[1, 0]])
    u[1, 2] = -0.1
    assert 1.0 - c * 0.1 / s < 0
    assert np.array_equal(swap_guess(Gm, Z, u, np.ones(2), 1e-6, back), Z[[1, 0]])


def test_a_near_duplicate_closing_slower_than_the_answers_error_keeps_its_partners_load():
    """The answer's error is the largest normal velocity of its closed contacts, which its modes ask to
    be zero: contacts 0 and 1 near-duplicates (``cos 0.01``), 0 closed, 1 open closing at ``u_n = -1e-5``;
    2 closed, alone, its ``u_n`` off by ``e``.  With ``|e| = 2e-5`` (more than 1's closing, either sign)
    nothing swaps; with ``|e| = 0.5e-5`` (1 closes faster) 1 takes 0's load and 0 opens."""
    normals = [[1.0, 0.0, 0.0], [np.cos(0.01), np.sin(0.01), 0.0], [0.0, 0.0, 1.0]]
    Gm = _gram(normals)
    Z = np.array([[0.1, 0.2, 1.0], [0, 0, 0], [0.0, 0.0, 0.5]])
    for e, swaps in [(2e-5, False), (-2e-5, False), (0.5e-5, True), (-0.5e-5, True)]:
        u = np.array([[0.0, 0, 0.0], [0, 0, -1e-5], [0, 0, e]])
        out = swap_guess(Gm, Z, u, np.ones(3), 1e-6)
        assert np.array_equal(out, Z[[1, 0, 2]] if swaps else Z), e
    # the closed partner's own velocity is part of the error: 0 off by 2e-5, 2 exact: no swap
    u = np.array([[0.0, 0, 2e-5], [0, 0, -1e-5], [0, 0, 0.0]])
    assert np.array_equal(swap_guess(Gm, Z, u, np.ones(3), 1e-6), Z)


def test_closed_near_duplicates_give_their_impulse_to_the_one_that_carries_most():
    """Contacts 0 and 1 near-duplicates (``cos 0.01``), both closed: 1 (the smaller normal impulse) gives
    its impulse to 0, which carries their sum; 2 closed, no near-duplicate, keeps its own; 3, 4, 5
    near-duplicates of each other (``cos 0.01``, ``cos 0.02``), all closed: the group's sum on 5 (the
    largest; 3 shares its impulse between 4 and 5, then 4 gives what it holds to 5); 6 and 7 copies of
    one contact (the same normal row, correlation 1 > ``1 - DUPLICATE``): both keep theirs, unequal as
    they are; 8, open, stays open.  The sums to a
    rounding of each entry (3's halves and their sum are exact)."""
    normals = [[1.0, 0, 0, 0, 0], [np.cos(0.01), np.sin(0.01), 0, 0, 0], [0, 1.0, 0, 0, 0],
               [0, 0, 1.0, 0, 0], [0, 0, np.cos(0.01), np.sin(0.01), 0], [0, 0, np.cos(0.02), np.sin(0.02), 0],
               [0, 0, 0, 0, 1.0], [0, 0, 0, 0, 1.0], [0, 0, 0, 1.0, 0]]
    Gm = _gram(normals)
    Z = np.array([[0.1, 0.2, 1.0], [-0.25, 0.0, 0.5], [0.3, 0.0, 0.5], [0.5, 0.0, 1.0], [0.0, 0.25, 1.5],
                  [0.0, 0.0, 2.0], [0.125, 0.0, 0.25], [-0.125, 0.0, 0.5], [0, 0, 0]])
    out = merge_guess(Gm, Z, np.ones(9), 1e-6)
    want = np.array([[-0.15, 0.2, 1.5], [0, 0, 0], [0.3, 0.0, 0.5], [0, 0, 0], [0, 0, 0], [0.5, 0.25, 4.5],
                     Z[6], Z[7], [0, 0, 0]])
    assert np.abs(out - want).max() <= 4 * np.finfo(float).eps
    # a contact without rows gives nothing and takes nothing
    out = merge_guess(Gm, Z, np.array([1.0, 0, 1, 1, 1, 1, 1, 1, 1]), 1e-6)
    assert np.array_equal(out[:2], Z[:2])


def test_a_pair_of_one_body_sliding_with_opposed_friction_is_merged_on_the_one_that_carries_more():
    """``merge_guess`` with ``opposed`` (a polish's answer): contacts 0 and 1 a pair of one body (normal rows'
    correlation ``cos 0.5 = 0.88 > 1 - PAIR``, below ``1 - NEAR``), both on their cones (``mu = 1``) with
    opposed frictions (a squeeze): 0 gives its impulse to 1, which carries more (their sum, inside its
    cone: sticking); 2 and 3 such a pair with frictions along one direction, and 4 and 5 with 4 sticking
    (inside its cone), keep theirs; 6 and 7 (``cos 1.0 = 0.54``) are no pair.  Without ``opposed`` the
    pairs below ``1 - NEAR`` merge nothing."""
    c = np.cos
    normals = [[1.0, 0, 0, 0], [c(0.5), np.sin(0.5), 0, 0], [0, 0, 1.0, 0], [0, 0, c(0.5), np.sin(0.5)]]
    N = np.zeros((8, 8))
    N[:4, :4] = np.asarray(normals)
    N[4:6, 4:6] = [[1.0, 0], [c(0.5), np.sin(0.5)]]
    N[6:8, 6:8] = [[1.0, 0], [c(1.0), np.sin(1.0)]]
    Gm = _gram(N)
    assert 1.0 - NEAR > c(0.5) > 1.0 - PAIR > c(1.0)
    Z = np.array([[0.3, 0.0, 0.3], [-0.4, 0.0, 0.4], [0.3, 0.0, 0.3], [0.0, 0.4, 0.4], [0.1, 0.0, 0.3],
                  [-0.4, 0.0, 0.4], [0.3, 0.0, 0.3], [-0.4, 0.0, 0.4]])
    mu = np.ones(8)
    out = merge_guess(Gm, Z, np.ones(8), 1e-6, (mu, fp.STICK))
    want = Z.copy()
    want[0], want[1] = 0.0, Z[0] + Z[1]
    assert np.array_equal(out, want)
    assert fp.modes(out, mu, np.ones(8))[1][1] == 1.0                # the sum sticks
    assert np.array_equal(merge_guess(Gm, Z, np.ones(8), 1e-6), Z)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_box_warm_started_on_one_edge_is_solved_by_the_first_polish(backend):
    """The box at rest on four corners, warm-started from impulses on one edge (corners 0 and 1 carry
    the weight, 2 and 3 open: as a step after the box rocked on that edge).  Held open, corners 2
    and 3 leave the box turning about the edge, which no polish of those modes can fix (before the
    guess: two polishes rejected, then ADMM, 17 iterations); their velocity closes them, so the first
    polish guesses them closed and sticking, and the mode system of four sticking corners is exact:
    one iteration (the polish), on both roads.  The answer is the cold step's (the least-norm one of
    the redundant corners, ``m g dt / 4`` each), and Coulomb's law holds at it, from its definitions."""
    with _native(backend):
        cold = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT)
        edge = cold.impulses * np.array([2.0, 2.0, 0.0, 0.0])[:, None]
        s = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT, warm_start=edge)
    assert int(s.iterations) == 1
    assert list(s.modes) == ["stick"] * 4
    P = MASS * G * DT
    bound = (TOL + rounding_bound(12, 1.0 / fp.EPS)) * P
    assert np.abs(s.impulses[:, 2] - P / 4).max() <= bound
    assert np.abs(s.impulses - cold.impulses).max() <= bound
    with sd.use_backend("numpy"):
        pr = sd.contact_problem(MODEL, Q0, Z, Z, corners())
    u = (DT * pr.J @ pr.a + pr.G @ s.impulses.reshape(-1)).reshape(4, 3)
    cone, closing, separating, sticking, oppose = _coulomb(s.impulses, u, np.full(4, MU))
    assert cone <= TOL * P and closing <= TOL * G * DT and separating <= TOL * P * G * DT
    assert sticking <= TOL * G * DT and oppose <= TOL * G * DT


def test_a_warm_starts_round_is_paid_by_the_admm_start_it_spares():
    """The polish stage at a warm start (ADMM's iteration 0), on the box's corners at a tolerance no
    polish meets (every polish rejected): the round goes on (flag 0) while the next polish's charge,
    ``COST m`` each, stays within ``FREE`` plus :func:`~sparsedyn.contact.friction_polish.warm_credit`
    (a factorisation and a polish, ``COST m`` each, and ``FIRST`` iterations), then goes to the
    factorisation (flag -2); past ADMM's first iteration the credit is gone.  Past its ``REPEATS - 1``
    polishes a warm start's round goes on only where the polish gains ``PROGRESS`` on the round's
    best.  A cold start's round (no impulse yet) is one polish whatever the budget, then the
    factorisation, charged to no budget nor round: ADMM then starts as from the start (its first
    polish after ``FIRST`` iterations).  The box slides (at rest a polish may be exact: its residuals
    0, which meet any tolerance)."""
    inputs, stages, lay, K, S0 = box_polish_stage(np.array([0, 0, 0, 0.05, 0.02, 0.0]))
    m = 12
    assert fp.warm_credit(m) == fp.FIRST + 2 * fp.COST * m
    warm = np.tile([0.0, 0.0, MASS * G * DT / 4], 4)                 # the weight on the corners: a step before's

    def flag(it, polishes, tries=0.0, pbest=0.0, last=0.0):
        S = S0.copy()
        S[lay.S["it"]], S[lay.S["tries"]], S[lay.S["polishes"]], S[lay.S["pbest"]] = it, tries, polishes, pbest
        S[lay.S["z"]], S[lay.S["pz"]] = warm, last                  # (``last``: a later step's last answer)
        out, f = polish_run(stages, inputs, K, S)
        return f, out[lay.S["pbest"]][0], out[lay.S["pz"]]

    assert not S0[lay.S["z"]].any() and S0[lay.S["it"]][0] == 0.0                 # (the fixture's start: cold)
    out, f = polish_run(stages, inputs, K, S0.copy())
    assert f == -2.0 and out[lay.S["polishes"]][0] == 0.0 and out[lay.S["rounds"]][0] == 0.0
    assert out[lay.S["next"]][0] == fp.FIRST and out[lay.S["tries"]][0] == 0.0

    last = int((fp.FREE + fp.warm_credit(m)) // (fp.COST * m)) - 2     # the last polishes count paid
    assert fp.COST * m * (last + 2) > fp.FREE                          # (unpaid without the credit)
    assert flag(0.0, last)[0] == 0.0 and flag(0.0, last + 1)[0] == -2.0
    assert flag(1.0, last)[0] == -1.0
    # the gain (at rest a later step's polish is exact: no residual to gain on), a later step from the
    # round's first answer
    last = flag(0.0, 0.0, 0.0, 0.0, warm)[2]
    r = flag(0.0, 0.0, fp.REPEATS - 2.0, 1e3, last)[1]              # its scaled residual (min(1e3, r))
    assert 0.0 < r < 1e3
    assert flag(0.0, 0.0, fp.REPEATS - 2.0, r / fp.PROGRESS * 0.99, last)[0] == -2.0     # no gain: done
    assert flag(0.0, 0.0, fp.REPEATS - 2.0, r / fp.PROGRESS * 1.01, last)[0] == 0.0      # a gain: on
    assert flag(1.0, 0.0, fp.REPEATS - 2.0, r / fp.PROGRESS * 0.99, last)[0] == 0.0      # (ADMM's: REPEATS)
    # no gain, but the answer keeps the last answer's modes (four sliding corners, two polishes on: Newton's
    # steps on the sliding directions, no cycle of modes): on
    for _ in range(2):
        last = flag(0.0, 0.0, fp.REPEATS - 2.0, 1e3, last)[2]
    r = flag(0.0, 0.0, fp.REPEATS - 2.0, 1e3, last)[1]
    assert 0.0 < r < 1e-3
    assert flag(0.0, 0.0, fp.REPEATS - 2.0, r / fp.PROGRESS * 0.99, last)[0] == 0.0


def test_the_humanoids_trajectory_changes_modes_within_the_warm_round():
    """dm_control's humanoid lying on the floor (MuJoCo's settled state), 20 steps of ``sd.rollout``,
    each warm-started from the last step's matched impulses, on both roads: every step reaches the
    tolerance (no :class:`ContactStepWarning`), the two roads take the same iterations, and the steps
    whose contacts change modes end in the warm start's round, no step reaches ADMM (iterations within
    the round's polishes, at most ``(FREE + warm_credit) / (COST m)``, ``m = 24`` the eight slots' rows;
    before, three steps ran ADMM, 9 to 24 iterations): each foot rocks from one of its two capsules onto
    the other (a nearly redundant pair: two polishes where one lifts as the other closes, the polish of
    both closed squeezing them, merged), and the end of a capsule lands slipping beside the other
    (guessed sliding, then Newton's steps on its direction in the same modes)."""
    m, model, q, v = humanoid_settled()
    runs = {}
    for backend in ("native", "numpy"):
        with _native(backend), warnings.catch_warnings():
            warnings.simplefilter("error", ContactStepWarning)
            runs[backend] = sd.rollout(model, q, v, np.zeros(model.nv), sd.Scene(model), m.opt.timestep, 20)
    it = np.asarray(runs["native"].iterations)
    assert np.array_equal(it, np.asarray(runs["numpy"].iterations))
    rows = 24
    round_most = (fp.FREE + fp.warm_credit(rows)) // (fp.COST * rows)
    assert np.all(it[1:] <= round_most), it


#: solo12 standing on its four feet after a drop onto the floor (its step 390, no torque: the legs fold
#: slowly), each foot touching at two points a millimetre apart (normal rows' correlation 0.9987)
SOLO_Q = [5.751e-06, 1.194e-05, 0.335992968, 1.2072e-05, 0.0, 0.0, 1.0, -5.9682e-05, 0.00020083, -0.000350732,
          -5.9682e-05, 0.000200832, -0.000350737, -5.9682e-05, 0.00020083, -0.000350733, -5.9682e-05, 0.000200832,
          -0.000350736]
SOLO_V = [0.00049818, 0.0, 0.0, 0.000118661, 0.000246361, -2.21e-07, -0.001231406, 0.004143699, -0.00723661,
          -0.001231421, 0.004143775, -0.007236756, -0.001231406, 0.004143713, -0.007236636, -0.001231421,
          0.004143766, -0.007236738]


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_quadruped_standing_on_two_points_a_foot_is_solved_warm_started(backend):
    """solo12 (example-robot-data, its collision shapes and SRDF) standing: a step, then the next one
    warm-started from its impulses.  The warm start's polishes swapped each foot's load from one point to
    the other and back (the 11,000 iterations of the whole budget, every step of its standing); the
    second swap now shares it, both points pressing, within a few polishes.  The step started cold splits
    the load its own way (the least-norm split; the warm start's is the one nearest the last step's), so
    the two agree where Coulomb's law fixes the step: its velocity, to the tolerance's reach.  Both
    answers stick, so ``dv^T H dv = dlambda . (u_b - u_c)`` (``G``'s null space moves no velocity), and a
    sticking contact's velocity is bounded by the answer's complementarity residual ``c``: ``|u_t| <= c /
    (mu l_n - |l_t|)``, ``u_n <= c / l_n`` (and ``u_n >= -`` the dual residual).  The weight is carried: the
    floor's normal impulses equal ``m g dt`` plus the change of the centre of mass's vertical momentum (the
    step's base rotation adds ``|w| |p| dt``, about ``1e-7`` of them)."""
    from erd import solo12_on_floor
    model, scene = solo12_on_floor()
    dt, tau = 2e-3, np.zeros(model.nv)
    with _native(backend):
        a = sd.contact_step(model, SOLO_Q, SOLO_V, tau, scene, dt)
        b = sd.contact_step(model, a.q, a.v, tau, scene, dt, warm_start=a.impulses)
        c = sd.contact_step(model, a.q, a.v, tau, scene, dt)
    assert len(b.impulses) == 8 and list(b.modes).count("stick") == 8
    assert b.iterations <= 10 and c.iterations <= 10
    assert list(b.modes) == list(c.modes)
    mu = scene.pair_friction.min()

    def reach(s):                                                  # each sticking contact's |u| bound (nc,)
        lam, closed = np.asarray(s.impulses), np.asarray(s.modes) == "stick"
        inside = mu * lam[:, 2] - np.linalg.norm(lam[:, :2], axis=1)
        return closed * (s.residuals.complementarity / np.where(closed, inside, 1.0) +
                         s.residuals.complementarity / np.where(closed, lam[:, 2], 1.0) + s.residuals.dual)
    dv, dlam = b.v - c.v, np.asarray(b.impulses) - np.asarray(c.impulses)
    assert dv @ sd.crba(model, a.q) @ dv <= np.abs(dlam).sum(1) @ (reach(b) + reach(c))
    m = sd.subtree_masses(model)[0]
    vz = [sd.center_of_mass_velocity(model, a.q, x)[1][2] for x in (a.v, b.v)]
    weight = m * 9.81 * dt
    assert abs(np.sum(np.asarray(b.impulses)[:, 2]) - (weight + m * (vz[1] - vz[0]))) <= 1e-6 * weight


def test_a_sliding_answer_moving_along_its_friction_is_guessed_sticking():
    """:func:`~sparsedyn.contact.polish_guess.sticking_guess`: a contact on its cone's circle whose velocity
    moves along its friction (Coulomb's law wants it opposite), within 60 degrees of it (:data:`ALONG`), is moved
    inside the cone by ``2 STICK`` (read sticking by :func:`~sparsedyn.contact.friction_polish.modes`); one whose
    velocity opposes its friction, one inside its cone, an open one and one whose slip is nearly across its friction
    (80 degrees: ``u_t . lambda_t / |lambda_t| = 0.02`` of a speed of 0.112 m/s, by hand) are kept bit for bit; and
    the first too where its speed along the friction, ``0.14`` m/s by hand, is below the answer's error ``err``.  A
    contact past its circle (Newton's next iterate: ``|lambda_t| = 1.1 mu lambda_n``) moving along its friction is
    guessed sticking too: its friction's size ``(1 - 2 STICK) mu lambda_n``."""
    mu = np.full(6, 0.5)
    Z = np.array([[0.3, 0.4, 1.0], [0.3, 0.4, 1.0], [0.1, 0.0, 1.0], [0.0, 0.0, 0.0], [0.33, 0.44, 1.0],
                  [0.3, 0.4, 1.0]])
    u = np.array([[0.1, 0.1, 0.0], [-0.3, -0.4, 0.0], [0.2, 0.0, 0.0], [1.0, 0.0, 0.5], [0.1, 0.1, 0.0],
                  [0.1, -0.05, 0.0]])
    assert ALONG == 0.5
    assert np.array_equal(sticking_guess(Z, u, mu, 0.141, fp.STICK), Z)
    out = sticking_guess(Z, u, mu, 0.139, fp.STICK)
    assert np.array_equal(out[1:4], Z[1:4]) and np.array_equal(out[5], Z[5])
    assert out[0, 2] == Z[0, 2] and out[4, 2] == Z[4, 2]
    assert np.allclose(out[0, :2], Z[0, :2] * (1.0 - 2.0 * fp.STICK), rtol=0, atol=4 * EPS)
    assert np.allclose(out[4, :2], np.array([0.6, 0.8]) * 0.5 * (1.0 - 2.0 * fp.STICK), rtol=0, atol=4 * EPS)
    assert np.array_equal(sticking_guess(Z[5:], u[5:], mu[5:], 0.0, fp.STICK), Z[5:])     # across: kept at any error
    _, stick, slide, _ = fp.modes(out, mu, np.ones(6))
    assert list(stick) == [1, 0, 1, 0, 1, 0] and list(slide) == [0, 1, 0, 0, 0, 1]


#: alex (example-robot-data's ``alex_nub_hands.urdf``) dropped limp onto a floor, lying on its grippers and its
#: nubs: step 86 of ``benchmarks/drop_robots.py``'s rollout, ``(q, v)``.
ALEX_LYING = ([-0.005509183341599879, 0.00045480264688129064, 0.09372467412062348, 0.0033767382972515743,
               0.020497781339735857, 0.0012843478616524325, 0.9997833710605469, -0.0023453603978982824,
               -0.00928589389503417, -0.0639003973649914, -0.08080118495889078, 0.007078334175315793,
               0.10830270135726476, 0.1662134174769777, -0.18823285770606843, 0.03768348838433066,
               0.1330475590503913, -0.006716357541473157, 0.28061111736786826, -0.06642454755617848,
               -0.0022602756766020955, -0.09130804736710918, 0.1423204886280094, -0.11272620205287429,
               0.02838035789153248, 0.16080313167265753],
              [0.2229286092643753, 1.3692959370451387, 0.0866669340060544, -0.18146479641574456,
               0.014548325985354698, -0.14276494514840646, -0.08519968832845226, -0.3050029750561076,
               -2.147922689506821, -2.7435663834357706, 0.44565633219264444, 4.027374263410835, 5.702382415522155,
               -7.799433569004011, 0.37662793585223603, 5.827288047701982, -0.22793559267079083, 9.678014654889529,
               -2.2383534649608157, -0.225792741776699, -3.568821626928355, 4.804631742087449, -4.302374265415351,
               -0.2680872242596377, 6.4069625871681195])


def test_a_slip_across_its_friction_is_left_to_newtons_steps():
    """alex lying on its grippers and nubs (:data:`ALEX_LYING`, cold, the floor alone): five contacts, two of them
    on the nubs, whose light links make ``G``'s diagonal a thousand times the grippers'.  The solution has the right
    nub's contact sliding at 1.6e-6 m/s with its friction on its cone's edge.  Newton's steps towards it pass
    through answers whose slip there is 0.014 m/s at 88 degrees from the friction, moving slightly along it; read
    as friction the contact does not need, each was guessed sticking, whose answer put the friction outside the
    cone, and the rounds cycled between the two (3,023 iterations, past ADMM's budget).  Within 60 degrees only
    (:data:`ALONG`), the round's Newton steps reach the solution: the step ends within the budget at Coulomb's law
    to its tolerance (no :class:`~sparsedyn.ContactStepWarning`), the nub sliding.  The NumPy road: the same stages
    as the compiled kernel's, without a build of alex's."""
    root = example_robot_data_dir()
    model = sd.load_urdf(root / "alex_description/urdf/alex_nub_hands.urdf", floating_base=True, geometry=True,
                         package_dirs=[root])
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False)
    q, v = ALEX_LYING
    with sd.use_backend("numpy"), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        s = sd.contact_step(model, q, v, np.zeros(model.nv), scene, 2e-3)
    assert s.iterations < ADMM_BUDGET, s.iterations
    assert list(s.modes) == ["stick", "slide", "stick", "open", "slide"]


def _rigid_delassus(points):
    """``G = J J^T`` (3 nc, 3 nc) of the points ``points`` (nc, 3) of one free body of unit mass and unit
    inertia about its origin, contact frames the world's axes: ``J_i = [I, -[p_i]x]`` on ``(v, omega)``."""
    def cross(p):
        return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])
    J = np.vstack([np.hstack([np.eye(3), -cross(p)]) for p in points])
    return J @ J.T


def test_sticking_contacts_that_slip_along_the_null_space_are_squeezed_until_one_slides():
    """:func:`~sparsedyn.contact.polish_guess.squeeze_guess` on a free body's four points ``a = (-1, 0, 0)``,
    ``b = (1, 0, 0)``, ``c``, ``d`` (``mu = 0.5``): ``a`` and ``b`` stick and slip ``-/+ 1e-9`` m/s along x, their
    squeeze (x at ``a`` against x at ``b``, which no motion of the body shows: ``G d = 0``, by hand).  Their
    impulses move against their slips by ``x = s / sqrt 2`` each until the first reaches its cone, by hand ``b``
    (``|(-0.05 - x, 0.1)| = 0.25``: ``x = sqrt(0.0525) - 0.05``, where ``a`` needs ``sqrt(0.21) - 0.1``): ``b``
    then reads sliding, ``a`` sticking, and the open ``c`` and the sliding ``d`` are kept bit for bit.  A slip
    the body can show (``a`` and ``b`` opposed along y: a turn about z, ``max |G d| = sqrt 2``) or below the answer's
    error keeps the answer bit for bit."""
    G = _rigid_delassus(np.array([[-1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0, -1.0, 0]]))
    mv, gmax, mu = (lambda d: G @ d), G.diagonal().max(), np.full(4, 0.5)
    Z = np.array([[0.1, 0.2, 1.0], [-0.05, 0.1, 0.5], [0.0, 0.0, 0.0], [0.3, 0.4, 1.0]])
    u = np.array([[-1e-9, 0.0, 0.0], [1e-9, 0.0, 0.0], [0.0, 0.0, 0.3], [0.01, -0.02, 0.0]])
    d = np.zeros((4, 3))
    d[0, 0], d[1, 0] = 1.0, -1.0
    assert np.abs(G @ d.reshape(-1)).max() <= 8 * EPS                     # the squeeze: no motion
    out = squeeze_guess(Z, u, mu, 1e-14, fp.STICK, mv, gmax)
    x = np.sqrt(0.0525) - 0.05
    expected = Z + x * d
    assert np.allclose(out, expected, rtol=0, atol=8 * EPS), out - expected
    assert np.array_equal(out[2:], Z[2:])
    assert abs(np.hypot(*out[1, :2]) - 0.25) <= 8 * EPS
    _, stick, slide, _ = fp.modes(out, mu, np.ones(4))
    assert list(stick) == [1, 0, 0, 0] and list(slide) == [0, 1, 0, 1]
    assert np.array_equal(squeeze_guess(Z, u, mu, 2e-9, fp.STICK, mv, gmax), Z)          # below the error
    turn = np.array([[0.0, -1e-9, 0.0], [0.0, 1e-9, 0.0], [0.0, 0.0, 0.3], [0.01, -0.02, 0.0]])
    along_y = np.zeros(12)
    along_y[1], along_y[4] = 1 / np.sqrt(2), -1 / np.sqrt(2)
    assert np.abs(G @ along_y).max() > 1e6 * NULL * gmax                   # a motion: a turn about z
    assert np.array_equal(squeeze_guess(Z, turn, mu, 1e-14, fp.STICK, mv, gmax), Z)

def _ratio(z, lam, op, mu):
    return ratio_test(z, lam, op, mu, fp.OPEN, fp.STICK)


def test_the_ratio_test_steps_to_the_first_closed_contact_that_opens():
    """:func:`~sparsedyn.contact.polish_guess.ratio_test` by hand: from normal impulses ``(1, 2, 3)``
    towards an answer ``(-1, 1, -9)`` (the first and third closed contacts made negative) the step
    ``z + alpha (lam - z)`` stops at ``alpha = min(1 / (1 + 1), 3 / (3 + 9)) = 1/4``, where the third
    reaches zero; a contact open in the iterate's modes is not a bound; no negative answer: the answer (``mu = 1``:
    the second's answer inside its cone, the others' friction no bound where their normal impulse turns negative)."""
    z = np.array([[0.1, 0.0, 1.0], [0.0, 0.2, 2.0], [0.3, 0.0, 3.0]])
    lam = np.array([[0.5, 0.0, -1.0], [0.0, 0.6, 1.0], [0.7, 0.0, -9.0]])
    mu = np.ones(3)
    out = _ratio(z, lam, np.zeros(3), mu)
    assert np.allclose(out, z + 0.25 * (lam - z), rtol=0, atol=4 * EPS) and out[2, 2] == 0.0
    out = _ratio(z, lam, np.array([0.0, 0.0, 1.0]), mu)           # the third open: the first bounds (1/2)
    assert np.allclose(out, z + 0.5 * (lam - z), rtol=0, atol=4 * EPS)
    assert np.array_equal(_ratio(z, np.abs(lam), np.zeros(3), mu), np.abs(lam))


def test_the_ratio_test_steps_to_the_first_sticking_contact_that_reaches_its_cone():
    """The friction's bound by hand, ``mu = 1/2``: from ``(0.3, 0, 1)`` (strictly inside its cone) towards
    ``(0.3, 1.2, 1.4)`` (outside it) the step reaches the cone where ``0.09 + 1.44 a^2 = (1 + 0.4 a)^2 / 4``,
    ``1.4 a^2 - 0.2 a - 0.16 = 0``: ``a = (0.2 + sqrt(0.936)) / 2.8``, and the friction there is on the cone.
    Not a bound: a contact already on its cone (sliding), a frictionless one, one open in the iterate's modes,
    or an answer inside the cone."""
    z = np.array([[0.3, 0.0, 1.0], [0.5, 0.0, 1.0], [0.0, 0.0, 1.0], [0.3, 0.0, 1.0]])
    lam = np.array([[0.3, 1.2, 1.4], [0.5, 0.9, 1.0], [0.0, 0.0, 2.0], [0.3, 1.2, 1.4]])
    mu = np.array([0.5, 0.5, 0.0, 0.5])
    alpha = (0.2 + np.sqrt(0.936)) / 2.8
    out = _ratio(z[:1], lam[:1], np.zeros(1), mu[:1])
    assert np.allclose(out, z[:1] + alpha * (lam[:1] - z[:1]), rtol=0, atol=4 * EPS)
    assert abs(np.hypot(*out[0, :2]) - 0.5 * out[0, 2]) <= 8 * EPS
    for k in (1, 2):                                               # on its cone; frictionless
        assert np.array_equal(_ratio(z[k:k + 1], lam[k:k + 1], np.zeros(1), mu[k:k + 1]), lam[k:k + 1])
    assert np.array_equal(_ratio(z[3:], lam[3:], np.ones(1), mu[3:]), lam[3:])           # open
    inside = np.array([[0.3, 0.1, 1.4]])
    assert np.array_equal(_ratio(z[:1], inside, np.zeros(1), mu[:1]), inside)
