"""The position correction's polish (sparsedyn.contact.correction): the exact solution on the active rows,
taken only where it solves the problem, checked against hand-solved problems and the problem's own
conditions."""

import math
import os

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.correction import (CORRECTION_REACH, CORRECTION_RTOL, CORRECTION_SWEEPS, STALL_GROWTH,
                                          STALL_SWEEPS, _correction_polish, _correction_sweep, correction_impulses,
                                          correction_targets, no_guesses, polish_cost, polish_due, polish_first,
                                          polish_pass)
from sparsedyn.interop import example_robot_data_dir

EPS = np.finfo(float).eps


def _sweeps(A, c, held, hi, polish=True):
    """``(l, sweeps)``: the kernel's loop of the correction's stages on floats (the polish where due)."""
    l, sweeps, due, change, best = np.zeros(len(c)), 0.0, polish_first(len(c)), 0.0, None
    while True:
        l0 = l
        l, stop, best = _correction_sweep(A, c, l, sweeps, held, hi, best)
        sweeps += 1.0
        if stop >= 0.5:
            return l, int(sweeps)
        flag, change = polish_due(sweeps, due, l, l0, change)
        if polish and flag >= 0.5:
            l, due = _correction_polish(A, c, l, held, hi), 2.0 * sweeps


def test_the_polish_takes_a_redundant_coupled_set_to_its_solution_in_one_step():
    """Eight penetrating rows on six degrees of freedom (two null directions of ``A = B B^T``, the
    nonzero eigenvalues 1 to 170 apart, as a standing robot's two soles), every row pushing at the
    solution (``c = -A l*`` with ``l* > 0``): the plain sweeps creep (more than 80, and past the
    stall's window: creeping is no stall), the first polish solves it, the next sweep confirms it.  The answer solves the
    problem: ``w = A l + c`` zero on its rows to the sweeps' tolerance, ``l >= 0``; its displacement
    ``A l`` is that of ``l*`` (``A l`` is the same for every solution)."""
    rng = np.random.default_rng(3)
    U, _ = np.linalg.qr(rng.normal(size=(8, 6)))
    V, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    B = U @ np.diag(np.geomspace(1.0, 13.0, 6)) @ V
    A = B @ B.T
    l_star = rng.uniform(0.5, 1.5, 8)
    c = -A @ l_star
    held = np.zeros(8)
    _, plain = _sweeps(A, c, held, 0.0, polish=False)
    assert plain > 80 > STALL_SWEEPS
    l, sweeps = _sweeps(A, c, held, 0.0)
    assert sweeps == polish_first(8) + 1
    assert np.all(l >= 0.0)
    w = A @ l + c
    assert np.abs(w).max() <= CORRECTION_RTOL * np.abs(c).max()
    assert np.array_equal(correction_impulses(A[None], c[None], held[None], 0.0)[0], l)


def test_the_polish_on_a_wrong_active_set_is_refused_and_on_the_right_one_is_exact():
    """Two coupled rows, ``A = [[1, 0.9], [0.9, 1]]``, ``c = [-1, -0.1]``: pushing the first row out
    lifts the second past its plane, so the solution is ``l = [1, 0]`` (``w = [0, 0.8]``).  From
    ``l = 0`` both rows would push: their system gives ``l_2 < 0``, which the first pass refuses (``l``
    returned bit for bit) and drops from its next guess, the first row alone; so the polish gives
    ``[1, 0]`` from ``l = 0`` (its second pass) and from ``l = [0.9, 0]`` (its first), to rounding."""
    A = np.array([[1.0, 0.9], [0.9, 1.0]])
    c = np.array([-1.0, -0.1])
    held = np.zeros(2)
    start = np.zeros(2)
    out, ok, after = polish_pass(A, c, start, held, 0.0, 0.0, no_guesses(2))
    a, up, raw = after[0:2], after[2:4], after[4:6]
    assert ok == 0.0 and np.array_equal(out, start)
    assert np.array_equal(a, [1.0, 0.0]) and np.array_equal(up, [0.0, 0.0]) and raw[1] < 0.0
    assert after[-1] == 0.0                                     # one row of the wrong sign: no third guess
    for l in (start, np.array([0.9, 0.0])):
        out = _correction_polish(A, c, l, held, 0.0)
        assert out[1] == 0.0 and abs(out[0] - 1.0) <= 8 * EPS


def test_the_second_guess_drops_a_near_duplicate_row_and_the_sweeps_stop_a_sweep_after():
    """A near-duplicate pair of points, ``A = [[1, 0.99], [0.99, 1]]``, ``c = [-1, -1.02]``: the solution
    pushes the deeper point alone, ``l = [0, 1.02]`` (``w = [0.99 * 1.02 - 1, 0] = [0.0098, 0]``).  The
    sweeps from zero move the load from the first row to the second slowly (``l_2 <- 0.03 + 0.9801
    l_2`` while both push: about 55 sweeps before the first row lets go, at ``l_2 = 1 / 0.99``); at the
    first polish both rows push, their system gives ``l_1 < 0``, and the second guess, the second row
    alone, is the answer, which the next sweep confirms."""
    A = np.array([[1.0, 0.99], [0.99, 1.0]])
    c = np.array([-1.0, -1.02])
    held = np.zeros(2)
    _, plain = _sweeps(A, c, held, 0.0, polish=False)
    assert plain > 5 * polish_first(2)
    l, sweeps = _sweeps(A, c, held, 0.0)
    assert sweeps == polish_first(2) + 1
    assert l[0] == 0.0 and abs(l[1] - 1.02) <= 8 * EPS
    assert abs((A @ l + c)[0] - (0.99 * 1.02 - 1.0)) <= 8 * EPS


def test_a_polish_whose_first_answer_has_one_wrong_row_takes_two_guesses_at_most():
    """Three rows, ``A = [[1, 0.8, -0.5], [0.8, 1, 0], [-0.5, 0, 1]]`` (positive definite), ``c = [-1,
    -0.1, 0.2]``: the solution pushes rows one and three, ``l = [1.2, 0, 0.4]`` (``l_1 - l_3 / 2 = 1``,
    ``-l_1 / 2 + l_3 = -0.2``; ``w_2 = 0.8 * 1.2 - 0.1 = 0.86``).  From ``l = 0`` the first guess is rows
    one and two (``l_2 = -0.7 / 0.36 < 0``, its only row of the wrong sign), the second row one alone
    (``l_1 = 1``, which leaves ``w_3 = -0.3``): both refused, no third guess, ``l`` returned bit for bit;
    the sweeps still reach the solution."""
    A = np.array([[1.0, 0.8, -0.5], [0.8, 1.0, 0.0], [-0.5, 0.0, 1.0]])
    c = np.array([-1.0, -0.1, 0.2])
    held = np.zeros(3)
    start = np.zeros(3)
    assert np.array_equal(_correction_polish(A, c, start, held, 0.0), start)
    l, sweeps = _sweeps(A, c, held, 0.0)
    assert sweeps < CORRECTION_SWEEPS
    assert np.allclose(l, [1.2, 0.0, 0.4], rtol=0.0, atol=4 * CORRECTION_RTOL)


def test_the_third_guess_lets_go_of_the_first_row_a_null_direction_unloads():
    """A rod on a plane (its height and tilt: the row of a point at ``x`` is ``[1, x]``, ``A = J J^T`` of
    rank 2), points at ``x = -2, -1.5, -0.5, 2`` penetrating by ``c = [-1.7, -1.7, -0.4, -1.6]``.  The
    solution pushes the second and fourth points: the rod rises by ``y_z`` and tilts by ``y_t`` with
    ``y_z - 1.5 y_t = 1.7``, ``y_z + 2 y_t = 1.6``, so ``y_t = -1/35``, ``y_z = 58/35``, which leaves the
    first point ``w_1 = y_z - 2 y_t - 1.7 = 1/70`` above the plane and the third ``89/70``; ``J^T l = y``
    gives ``l = [0, 234/245, 0, 172/245]``.  The plain sweeps creep (the first two points share the load,
    which moves to the second a little a sweep).  The first polish guesses the first, second and fourth
    rows, on which ``c`` is out of ``A``'s range: its answer runs along the null direction and both the
    first and the fourth rows turn negative.  Without both (the second guess) the second row alone leaves
    the fourth point in the plane; without the first (the third guess) is the solution, which the next
    sweep confirms."""
    x = np.array([-2.0, -1.5, -0.5, 2.0])
    J = np.stack([np.ones(4), x], 1)
    A, c, held = J @ J.T, np.array([-1.7, -1.7, -0.4, -1.6]), np.zeros(4)
    _, plain = _sweeps(A, c, held, 0.0, polish=False)
    assert plain > 100
    l, sweeps = _sweeps(A, c, held, 0.0)
    assert sweeps == polish_first(4) + 1
    assert np.allclose(l, [0.0, 234 / 245, 0.0, 172 / 245], rtol=0.0, atol=16 * EPS) and l[0] == l[2] == 0.0
    assert np.allclose(A @ l + c, [1 / 70, 0.0, 89 / 70, 0.0], rtol=0.0, atol=64 * EPS)
    assert np.array_equal(correction_impulses(A[None], c[None], held[None], 0.0)[0], l)


def test_the_polish_pulls_a_held_row_to_its_bands_top():
    """A free penetrating row and a held row at its plane, ``A = [[2, 1], [1, 2]]``, ``c = [-1, 0]``,
    band ``hi = 0.1``: pushing the first row alone (``l_1 = 1/2``) lifts the second by 1/2, past its
    band, so the held row pulls to its top: ``2 l_1 + l_2 = 1``, ``l_1 + 2 l_2 = 0.1``, ``l = [1.9/3,
    -0.8/3]``.  One sweep from zero gives ``[0.5, -0.2]``, on which the polish finds these rows and
    solves them (to the regularisation's bias and rounding: far below the sweeps' tolerance)."""
    A = np.array([[2.0, 1.0], [1.0, 2.0]])
    c = np.array([-1.0, 0.0])
    held, hi = np.array([0.0, 1.0]), 0.1
    l, _, _ = _correction_sweep(A, c, np.zeros(2), 0.0, held, hi)
    assert np.allclose(l, [0.5, -0.2], rtol=0.0, atol=4 * EPS)
    out = _correction_polish(A, c, l, held, hi)
    assert np.abs(out - [1.9 / 3.0, -0.8 / 3.0]).max() <= 16 * EPS
    l, sweeps = _sweeps(A, c, held, hi)
    w = A @ l + c
    assert abs(w[0]) <= CORRECTION_RTOL and abs(w[1] - hi) <= CORRECTION_RTOL and l[1] < 0.0
    assert sweeps < CORRECTION_SWEEPS


def test_an_easy_correction_runs_no_polish():
    """Uncoupled rows (``A`` diagonal): one sweep solves them, the second confirms it, before any
    polish is due (the first after 2 sweeps for four rows)."""
    A = np.diag([1.0, 2.0, 0.5, 4.0])
    c = np.array([-1.0, -0.5, 0.25, -2.0])
    l, sweeps = _sweeps(A, c, np.zeros(4), 0.0)
    assert sweeps == 2 == polish_first(4)                           # stopped before its check
    assert np.array_equal(l, np.array([1.0, 0.25, 0.0, 0.5]))
    assert polish_first(4) == 2 and polish_first(8) == 8 and polish_first(32) == 8 and polish_first(64) == 16


def test_a_polish_is_due_only_where_the_sweeps_would_take_longer_than_it_costs():
    """Two rows (a polish costs ``2 + 2 // 4 = 2`` sweeps), ``l`` of size 1, its last changes ``1e-4``
    then ``change`` (the rate ``change / 1e-4``): after ``polish_cost`` more sweeps at that rate the
    change is ``change^3 / 1e-8``; past the tolerance ``1e-6`` a polish is due (``change = 1e-3``, a
    rate of 10 counted as 1: ``1e-3``; ``1e-5``: ``1e-7``, not due), and never before ``due``."""
    l0 = np.array([1.0, 0.5])
    assert polish_cost(2) == 2
    for change, due in ((1e-3, 1.0), (1e-5, 0.0), (3e-5, 1.0)):
        flag, got = polish_due(8.0, 8.0, l0 + [change, 0.0], l0, 1e-4)
        assert flag == due and got == (l0[0] + change) - l0[0]
        assert polish_due(7.0, 8.0, l0 + [change, 0.0], l0, 1e-4)[0] == 0.0


def test_a_row_asks_only_for_the_gap_change_a_small_motion_gives():
    """``c_i -> max(c_i, -reach |J_i|_1 / dt)``: at ``dt = 0.01`` (``reach / dt = 1``) rows of ``J_n``
    ``[1, 0.1, -0.2]`` (a point on a free body: ``|J|_1 = 1.3``), ``[0.002, -0.001, 0]`` (millimetres
    per radian: ``0.003``) and ``[0.001, 0, 0]``, with ``c = [-0.25, -5, 0.3]``: the first within its
    region (bit for bit), the second raised to ``-0.003``, the third (not penetrating) as it was."""
    J_n = np.array([[1.0, 0.1, -0.2], [0.002, -0.001, 0.0], [0.001, 0.0, 0.0]])
    c = np.array([-0.25, -5.0, 0.3])
    out = correction_targets(c, J_n, 0.01)
    assert CORRECTION_REACH / 0.01 == 1.0
    assert out[0] == -0.25 and out[2] == 0.3
    assert abs(out[1] + 0.003) <= 4 * EPS * 5.0                  # c + relu(-reach - c): rounding at |c|


def test_a_hinge_whose_lever_is_a_millimetre_turns_by_the_reach_not_by_radians():
    """By hand: a hinge of inertia ``I = 0.01``, a point at a lever ``r`` overlapping by 2.5 mm over
    ``dt = 1e-3`` (``c = -2.5``): ``J = [r]``, ``A = r^2 / I``, and the correction turns it by ``dt l r /
    I``.  At ``r = 1e-3`` the plain correction ``l = -c / A`` turns it by ``gap / r = 2.5`` rad; within
    the trust region ``c = -reach r / dt`` and it turns by ``reach`` exactly (to rounding).  A free point
    of mass 1 (``J = [1]``, ``A = 1``) keeps its ``c`` and its plain correction ``l = 2.5``."""
    I, dt, r = 0.01, 1e-3, 1e-3
    J = np.array([[r]])
    A = J @ J.T / I
    c = np.array([-2.5])
    plain = correction_impulses(A[None], c[None])[0, 0]
    assert abs(dt * plain * r / I - 2.5) <= 1e-12
    turn = dt * correction_impulses(A[None], correction_targets(c, J, dt)[None])[0, 0] * r / I
    assert abs(turn - CORRECTION_REACH) <= 1e-15
    free = np.array([[1.0]])
    assert correction_targets(c, free, dt)[0] == -2.5
    assert correction_impulses(free[None], correction_targets(c, free, dt)[None])[0, 0] == 2.5


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_thigh_overlapping_its_base_along_its_hip_axis_is_left_overlapping_not_spun():
    """ANYmal B (example-robot-data) without its SRDF, in the air at its neutral configuration: each
    thigh's cylinder overlaps the base by 2.5 mm, nearly coaxial with its hip joint (the witness points
    millimetres from the joint axis: the plain correction turned the joints by 1.2, 3.0, 3.2 rad a step and
    the overlap grew to 150 mm in eight steps).  Within the trust region the joints turn by a few
    hundredths a step (each row asks for what a turn of ``reach`` gives; the mass matrix's coupling may
    spread it: below ``3 reach``); the overlap stays 2.5 mm to within the second-order motion of such a
    turn of a point within the leg's length (0.5 m) of the hip, ``(3 reach)^2 0.5 / 2``; and the joints do
    not drift: after 30 steps they are within ``reach`` of where they began."""
    root = example_robot_data_dir()
    model = sd.load_urdf(os.path.join(root, "anymal_b_simple_description", "robots", "anymal.urdf"),
                         floating_base=True, geometry=True, package_dirs=[root])
    scene = sd.Scene(model, world=[sd.Shape("plane")], friction=0.8)
    q = np.array(model.neutral(), float)
    q[2] = 0.6
    v, tau, dt = np.zeros(model.nv), np.zeros(model.nv), 1e-3
    d0 = sd.collide(scene, q).distances
    assert len(d0) == 4 and abs(d0.min() + 2.5e-3) <= 1e-6
    q_start = q.copy()
    for _ in range(30):
        s = sd.contact_step(model, q, v, tau, scene, dt)
        assert np.abs(s.q[7:] - q[7:]).max() <= 3 * CORRECTION_REACH + dt * np.abs(s.v[6:]).max()
        q, v = s.q, s.v
        assert sd.collide(scene, q).distances.min() >= d0.min() - 0.5 * (3 * CORRECTION_REACH) ** 2 * 0.5
    assert np.abs(q[7:] - q_start[7:]).max() <= CORRECTION_REACH


def _traced_form(*xs):
    """The arrays as object arrays of Python floats: :func:`_correction_sweep` then runs its traced
    formulation (the element-by-element loop the compiler traces) on numbers."""
    return [np.array(x, dtype=float).astype(object) for x in xs]


def test_a_sweep_on_floats_is_the_traced_formulation_to_the_bit():
    """The NumPy road's sweep (:func:`_float_rows` on Python floats, the rows past the last one in use
    left out) against the traced formulation run on numbers: twelve rows of a rank-3 normal block
    (coupled, redundant, of scales 1e-3 to 1e3: sums whose rounding depends on their order), a free row
    (zero diagonal) among them, a held row with ``l0 < 0``, and three free slots (zero rows and columns,
    ``l0 = 0``) after them; with and without the held band.  The same ``l`` and ``stop`` to the last bit
    (and the same sign of each zero)."""
    rng = np.random.default_rng(11)
    J = np.zeros((15, 3))
    J[:12] = rng.normal(size=(12, 3)) * np.geomspace(1e-3, 1e3, 12)[:, None]     # sums that rounding tells apart
    J[2] = 0.0
    A = J @ J.T
    c = np.concatenate((rng.normal(size=12) * 0.1, np.zeros(3)))
    held = (np.arange(15) == 3).astype(float)
    l0 = np.concatenate((rng.uniform(0.0, 1.0, 12), np.zeros(3)))
    l0[2], l0[3] = 0.0, -0.2
    assert any(math.fsum(A[i] * l0) != sum((A[i] * l0).tolist()) for i in range(12))    # the order shows
    for hi, sweeps in ((0.0, 0.0), (2.5e-3, 3.0), (2.5e-3, CORRECTION_SWEEPS - 1.0)):
        l, stop, _ = _correction_sweep(A, c, l0, sweeps, held, hi)
        ref, ref_stop, _ = _correction_sweep(*_traced_form(A, c, l0), sweeps, *_traced_form(held), hi)
        ref = ref.astype(float)
        assert l.dtype == np.float64 and np.array_equal(l, ref) and np.array_equal(np.signbit(l), np.signbit(ref))
        assert stop == ref_stop
        assert np.array_equal(l[12:], np.zeros(3)) and l[2] == 0.0      # no row there: l stays 0
    assert stop == 1.0                                                  # the last sweep stops


def test_the_rows_in_use_end_at_the_last_nonzero_row_column_or_start():
    """:func:`_rows_in_use`: the leading rows after which ``A``, ``l0`` are zero and ``c`` finite."""
    from sparsedyn.contact.correction import _rows_in_use
    A = np.zeros((5, 5))
    c, l0 = np.zeros(5), np.zeros(5)
    assert _rows_in_use(A, c, l0) == 0
    A[1, 1] = 2.0
    assert _rows_in_use(A, c, l0) == 2
    A[0, 3] = 1e-300                                                    # a column counts
    assert _rows_in_use(A, c, l0) == 4
    l0[4] = -0.5
    assert _rows_in_use(A, c, l0) == 5
    l0[4], c[4] = 0.0, np.inf
    assert _rows_in_use(A, c, l0) == 5


def test_targets_no_impulses_meet_stop_the_sweeps_at_their_best_iterate():
    """Two rows asking for opposite motions of one coordinate (``J = [[1], [-1]]``, unit mass: ``A =
    [[1, -1], [-1, 1]]``), each to close a gap of 1 (``c = [-1, -1]``): ``w_1 + w_2 = -2`` whatever
    ``l``, no impulses meet both targets.  By hand, sweep ``k`` gives ``l = [2k - 1, 2k]`` (row 1:
    ``l_1 = l_1 - w_1`` with ``w_1 = -2``; row 2 then ``w_2 = -2``), ``w = [-2, 0]``: the violation is 2
    at every sweep and the impulses grow by 2 a sweep.  The best iterate is the first, ``[1, 2]``;
    the sweeps stop after ``STALL_SWEEPS`` more that do not lower the violation, by when the impulses
    have grown from 2 to 42, past ``STALL_GROWTH`` times 2: 21 sweeps, not the cap of 1000 (the polishes
    due on the way are refused and change nothing), the same on the NumPy road's rows, on the traced
    formulation run on numbers, and in the derivatives' copy of the loop."""
    A = np.array([[1.0, -1.0], [-1.0, 1.0]])
    c = np.array([-1.0, -1.0])
    held = np.zeros(2)
    assert STALL_SWEEPS == 20 and CORRECTION_SWEEPS == 1000 and 2.0 * STALL_GROWTH <= 42.0
    l, sweeps = _sweeps(A, c, held, 0.0)
    assert sweeps == 21 and np.array_equal(l, [1.0, 2.0])
    assert np.array_equal(A @ l + c, [-2.0, 0.0])
    traced, traced_sweeps = _sweeps(*_traced_form(A, c), *_traced_form(held), 0.0)
    assert traced_sweeps == 21 and np.array_equal(traced.astype(float), [1.0, 2.0])
    assert np.array_equal(correction_impulses(A[None], c[None])[0], [1.0, 2.0])

