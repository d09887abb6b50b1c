"""One state's derivatives of a step in a scene from its pieces in the hand-written C routine
(sparsedyn.contact.state_derivatives_native) against the NumPy road (friction_derivatives'
``_state_derivatives``: LAPACK's pivoted Cholesky and NumPy's products, itself checked against
central differences of the step in test_scene_derivatives).

The pieces are those of real steps (the box pressed into the table: four sticking corners, a
Delassus matrix of rank 6 of 12, the position correction's normal rows of rank 3 of 4; the hand
pressed on the torso: a two-body contact; the box sliding on the table: singular mode equations that
are not symmetric), with some of their slots declared open, their correction impulses partly zero,
or no point penetrating; and the routine's two solves alone against numpy's pseudo-inverse.  Two roads differ in the order of their sums: rounding
times the condition of the systems solved on their range, squared (their right sides leave it: least
squares), ``rounding_bound``.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from test_friction_derivatives import DT, TOL
from test_scene_derivatives import _box_on_table, _box_pressed_into_table, _hand_scene
from sparsedyn.contact.friction_derivatives import _state_derivatives
from sparsedyn.contact.friction_problem import PENETRATION_SLOP
from sparsedyn.contact.scene_derivatives import rows_mode_equations, scene_step_partials
from sparsedyn.contact.scene_slotted import MODE_WEIGHTS, slotted_scene_step
from sparsedyn.kernels import native_function
from sparsedyn.contact.state_derivatives_native import (native_state_derivatives,
                                                        native_states_derivatives, state_derivatives_call)

OPEN = MODE_WEIGHTS["open"]


def _pieces(case, open_slots=()):
    """``(model, rows, state, gap, weights, correction, modes)`` of the NumPy road's pieces of the step of
    ``case`` (a test_scene_derivatives scene), the slots ``open_slots`` declared open (their weights and
    mode; the mode equations then hold them at zero impulse change)."""
    model, scene, q, v, tau, opt = case()
    with sd.use_backend("numpy"):
        step, _, s = slotted_scene_step(model, model, q, v, tau, scene, DT, dict(opt, tol=TOL))
    weights, modes = s.weights[0].copy(), list(s.modes[0])
    for i in open_slots:
        weights[i, :3], modes[i] = OPEN, "open"
    g = opt.get("gravity", model.gravity)
    P = scene_step_partials(model, q, v, step.v, s.impulses[0], s.correction[0], weights, s.data[0], s.shapes[0],
                            g, [DT], s.frames, s.kinds)
    return model, P.rows, P.state, P.gap, weights, s.correction[0].copy(), modes


def _bound(model, rows, gap, modes, correction):
    """Rounding of the two roads: the recursions' products times the condition (on its range) of each
    system solved, squared."""
    nv, m = model.nv, len(rows)
    G = rows[:, 5 * nv:5 * nv + m]
    kappa = 1.0
    held = [3 * i + k for i, x in enumerate(modes) if x != "open" for k in range(3)]
    size = np.abs(correction)                               # (a held row's impulse pulls: < 0)
    active = [3 * i + 2 for i, x in enumerate(size) if x > 1e-9 * max(size.max(), 1e-300)]
    for r in (held, active):
        if r:
            s = np.linalg.svd(G[np.ix_(r, r)], compute_uv=False)
            kappa = max(kappa, s[0] / s[s > 1e-12 * s[0]][-1])
    return rounding_bound(nv + m, kappa * kappa)


def _check(model, rows, state, gap, weights, correction, modes):
    got = native_state_derivatives(rows, state, weights, correction, model.nv, DT)
    assert got is not None                                  # the routine ran (a C compiler is there)
    assert got[2] is True                                   # its sum finite
    got = got[:2]
    ref = _state_derivatives(rows, state, gap, modes, correction, model.nv, DT)
    bound = _bound(model, rows, gap, modes, correction)
    for g, r in zip(got, ref):
        assert g.shape == (model.nv, 3 * model.nv)
        assert rel_err(g, r) <= bound, (rel_err(g, r), bound)
    return got, ref


@pytest.mark.parametrize("open_slots", [(), (1,), (0, 3), (0, 1, 2, 3)])
def test_the_pressed_box_equals_the_numpy_road(open_slots):
    """The box pressed into the table (four sticking corners, its correction active on every normal row),
    all its corners held, some declared open, and none (W alone, the correction still solved)."""
    pieces = _pieces(_box_pressed_into_table, open_slots)
    model, rows, state, gap, weights, correction, modes = pieces
    assert gap.min() < -PENETRATION_SLOP and modes.count("stick") == 4 - len(open_slots)
    _check(*pieces)


def test_the_position_corrections_active_rows_and_no_penetration():
    """The pressed box with half its correction impulses zero (their normal rows inactive: a principal
    block of the normal rows' Delassus matrix, regular), one of them a held row's pull (``l < 0``:
    active too), and with none (no correction, whatever the
    gaps: ``dq`` from ``dv`` alone; a correction runs where an impulse is nonzero, a penetration's or
    a held row's), which changes ``dq`` by far more than rounding."""
    model, rows, state, gap, weights, correction, modes = _pieces(_box_pressed_into_table)
    half = correction * [1, 0, 1, 0]
    _check(model, rows, state, gap, weights, half, modes)
    _check(model, rows, state, gap, weights, correction * [1, -0.5, 1, 0], modes)      # a held row's pull
    got, _ = _check(model, rows, state, gap, weights, np.zeros_like(correction), modes)
    pressed, _ = _check(model, rows, state, gap, weights, correction, modes)
    assert np.array_equal(got[0], pressed[0]) and rel_err(got[1], pressed[1]) > 1e-6


def test_a_two_body_contact_equals_the_numpy_road():
    """The hand pressed on the torso (both bodies' rows in each contact's)."""
    pieces = _pieces(_hand_scene)
    assert "stick" in pieces[-1] and "slide" not in pieces[-1]
    _check(*pieces)


@pytest.mark.parametrize("open_slots", [(), (2,)])
def test_sliding_contacts_equal_the_numpy_road(open_slots):
    """The box sliding on the table (four corners sliding while it turns: mode equations not symmetric,
    and singular, the normal impulses shared in a continuum of ways): the general minimum-norm solve,
    all corners held, and three (regular)."""
    pieces = _pieces(_box_on_table, open_slots)
    assert pieces[-1].count("slide") == 4 - len(open_slots)
    nv = pieces[0].nv
    held = [3 * i + k for i, x in enumerate(pieces[-1]) if x != "open" for k in range(3)]
    K = rows_mode_equations(pieces[1], nv)[0][np.ix_(held, held)]
    assert (np.linalg.matrix_rank(K) < len(K)) == (not open_slots)          # four corners: redundant
    assert np.abs(K - K.T).max() > 1e-3 * np.abs(K).max()
    _check(*pieces)


def test_a_non_finite_system_gives_nan_not_zeros():
    """A NaN on the mode equations' diagonal (an overflowed state) gives NaN derivatives, as the NumPy
    road's, and says they are not finite (the public call's finite check then reports them); never a
    silent zero solution."""
    model, rows, state, gap, weights, correction, modes = _pieces(_box_pressed_into_table)
    nv, m = model.nv, len(rows)
    rows = rows.copy()
    rows[4, 5 * nv + m + 1] = np.nan                       # (A's entry of K[4, 4])
    dv, _, finite = native_state_derivatives(rows, state, weights, correction, nv, DT)
    assert np.isnan(dv).all() and not finite
    assert np.isnan(_state_derivatives(rows, state, gap, modes, correction, nv, DT)[0]).all()


def fast_path_cases():
    """The compiler's extension loaded (asserted: the fast path, not ctypes alone), then the pieces of
    the pressed box (its slot 1 open), the sliding box and the two-body contact."""
    model = _pieces(_box_pressed_into_table)[0]
    with sd.use_backend("native", deterministic=True):          # (the compiler's extension loaded)
        sd.rnea(model, model.neutral(), np.zeros(model.nv), np.zeros(model.nv))
    assert native_function("Kernel") is not None
    for case, open_slots in ((_box_pressed_into_table, (1,)), (_box_on_table, ()), (_hand_scene, ())):
        yield _pieces(case, open_slots)


def test_the_one_state_call_equals_the_routine():
    """The routine's one-state call (the compiled kernels' fast path, its workspace allocated in the call)
    gives the ctypes call's results bit for bit, and so the NumPy road's to rounding (``_check``), on the
    pressed box (stick, position correction), the sliding box (the general solve) and the two-body
    contact; a NaN in the mode equations (an input the fast path declines: its ctypes fallback) gives
    NaN and the code 2 (not finite), as the ctypes call says."""
    for model, rows, state, gap, weights, correction, modes in fast_path_cases():
        nv, ns = model.nv, len(gap)
        call = state_derivatives_call(nv, ns, DT)
        out, rc = call(rows, state, np.ascontiguousarray(weights), correction)
        ref = _check(model, rows, state, gap, weights, correction, modes)[0]
        assert rc.tolist() == [0.0] and out.shape[:2] == (2, nv)
        assert np.array_equal(out[0, :, :3 * nv], ref[0]) and np.array_equal(out[1, :, :3 * nv], ref[1])
    model, rows, state, gap, weights, correction, modes = _pieces(_box_pressed_into_table)
    nv, m = model.nv, len(rows)
    rows = rows.copy()
    rows[4, 5 * nv + m + 1] = np.nan                       # (A's entry of K[4, 4])
    out, rc = state_derivatives_call(nv, len(gap), DT)(rows, state, np.ascontiguousarray(weights), correction)
    assert rc.tolist() == [2.0] and np.isnan(out[0, :, :3 * nv]).all()


def test_a_batch_in_one_call_equals_each_states_routine():
    """The batch call (every state in one call, the states shared among the cores) gives each state's
    one-state results bit for bit and its return code: the pressed box with corners declared open in
    turn (the held rows differ from state to state), a corner's correction inactive in others, one
    state's mode equations made NaN (code 2, NaN, its neighbours untouched), in a batch of 37 (more
    than a thread's share, not a multiple of it)."""
    model, rows, state, gap, weights, correction, modes = _pieces(_box_pressed_into_table)
    nv, ns, m = model.nv, len(gap), len(rows)
    B = 37
    R, S = np.repeat(rows[None], B, 0), np.repeat(state[None], B, 0)
    W, C = np.repeat(weights[None], B, 0), np.repeat(correction[None], B, 0)
    for b in range(B):
        if b % 5:                                            # (one state in five: every corner held)
            W[b, b % ns, :3] = OPEN
        if b % 2:                                            # (a corner's correction inactive)
            C[b, (b // 5) % ns] = 0.0
    R[7, 4, 5 * nv + m + 1] = np.nan                         # (A's entry of K[4, 4])
    dv, dq, rc = native_states_derivatives(R, S, W, C, nv, DT)
    assert dv.shape == dq.shape == (B, nv, 3 * nv) and rc.shape == (B,)
    for b in range(B):
        one = native_state_derivatives(R[b], S[b], W[b], C[b], nv, DT)
        assert np.array_equal(dv[b], one[0], equal_nan=True) and np.array_equal(dq[b], one[1], equal_nan=True)
        assert rc[b] == (2.0 if b == 7 else 0.0) and one[2] == (b != 7)
    assert np.isnan(dv[7]).all() and np.isfinite(dv[[6, 8]]).all()
    # (the states' results differ: dv with the held rows, five sets and the NaN; dq with the correction's too)
    assert len({dv[b].tobytes() for b in range(B)}) == 6 and len({dq[b].tobytes() for b in range(B)}) > 6

