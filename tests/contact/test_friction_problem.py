"""The results of a contact step (sparsedyn.contact.friction_problem): one state's ContactStep computes
its modes when first read and holds them wherever it is read."""

import numpy as np
import pytest

import sparsedyn as sd
from test_friction import TOL, _arrays


def test_one_states_step_holds_its_modes_wherever_it_is_read():
    """One state's step computes its modes when first read: unpacked, indexed, sliced, as a dict,
    replaced, copied, pickled and printed it holds the definition's modes, a ContactStep; laid out in
    slots (contact ``i`` in slot ``index[i]``) its impulses and modes are those of the contacts' slots."""
    import copy
    import pickle
    from sparsedyn.contact.friction import _result
    lam = [[0.1, 0, 1e-8], [0.1, 0, 2e-8], [0.0, 0, 1.0], [0, 0, 1.0], [0, 0, 0]]
    u = [[1.0, 0, 0], [1.0, 0, 0], [6e-7, 8e-7, 0], [6e-7, 8.1e-7, 0], [0, 0, 0]]
    want = ["open", "slide", "stick", "slide", "open"]
    s = _result("contact_step", "admm", TOL, _arrays(np.zeros(6), lam, u))
    q, v, impulses, modes, residuals, iterations = s
    assert isinstance(s, sd.ContactStep) and modes.tolist() == want and s[3] is s.modes is modes
    assert s[-3].tolist() == want and s[2:4][1].tolist() == want and s._asdict()["modes"].tolist() == want
    assert s._replace(iterations=np.array(3)).modes.tolist() == want and int(s._replace(q=1)[0]) == 1
    assert copy.deepcopy(s).modes.tolist() == want and pickle.loads(pickle.dumps(s)).modes.tolist() == want
    assert repr(s).startswith("ContactStep(q=") and "modes=array(['open', 'slide', 'stick', 'slide', 'open']" in repr(s)
    index = np.array([4, 0, 2])                   # three contacts in slots 4, 0 and 2 of five
    slotted = _result("contact_step", "admm", TOL, _arrays(np.zeros(6), lam, u), index)
    assert slotted.modes.tolist() == ["open", "open", "stick"]
    assert slotted.impulses.tolist() == [lam[4], lam[0], lam[2]]


def test_a_batch_of_problems_is_its_states_and_its_j_h_inverse_and_delassus_matrix_are_crbas():
    """solo12's feet at three states (leading axes: NumPy's stacked products) equal each state's own
    problem (the one-state products), and each state's ``J H^-1`` is ``J`` solved against sd.crba's ``H``
    (to the solve's rounding bound), ``G`` is ``J H^-1 J^T``."""
    from test_friction import _solo_case
    from tests.conftest import rounding_bound, solve_bound
    model, feet, q0, V, T = _solo_case()
    Q = np.repeat(q0[None], 3, 0)
    Q[:, 7:] += 0.1 * np.random.default_rng(5).normal(size=(3, model.nq - 7))
    with sd.use_backend("numpy"):
        batch = sd.contact_problem(model, Q, V[:3], T[:3], feet)
        for i in range(3):
            P = sd.contact_problem(model, Q[i], V[i], T[i], feet)
            H = sd.crba(model, Q[i])
            kappa = np.linalg.cond(H)
            for name in ("a", "J", "JMinv", "G", "gap"):
                x, y = getattr(batch, name)[i], getattr(P, name)
                assert np.abs(x - y).max() <= rounding_bound(model.nv, kappa) * max(1.0, np.abs(y).max()), name
            JMinv = np.linalg.solve(H, P.J.T).T
            assert np.abs(P.JMinv - JMinv).max() <= solve_bound(H, JMinv[0]) * 4 * max(1.0, np.abs(JMinv).max()) + \
                rounding_bound(model.nv, kappa) * np.abs(JMinv).max()
            assert np.abs(P.G - P.J @ JMinv.T).max() <= rounding_bound(model.nv, kappa) * max(1.0, np.abs(P.G).max())


def test_vmax_of_a_float_array_is_the_pairwise_formula_not_numpys_max():
    """:func:`_vmax` of a float array reduces its pairs a level at a time in NumPy: the same value as the
    traced formula on a list, ``a + relu(b - a)`` pairwise, to the bit.  It is not ``np.max``: for
    ``[-1, 1e-17]``, ``-1 + (1e-17 + 1)`` rounds to 0; an odd length carries its last value up a level."""
    from sparsedyn.contact.friction_problem import _vmax
    assert _vmax(np.array([-1.0, 1e-17])) == 0.0 == _vmax([-1.0, 1e-17])
    assert _vmax(np.array([1.0, 3.0, 2.0])) == 3.0 and _vmax(np.array([-2.5])) == -2.5
    x = np.random.default_rng(5).normal(size=(7, 11)) * np.geomspace(1e-8, 1e8, 11)
    assert _vmax(x) == _vmax(list(x.ravel()))
    with pytest.raises(IndexError):
        _vmax(np.zeros(0))


def test_scale_rows_traced_is_one_block_product_with_the_elementwise_values():
    """:func:`_scale_rows` (``d[:, None] * X``): on floats the elementwise product itself; traced on one
    state one block product by ``diag(d)`` (a loop over the slots in use in the compiled code, not
    ``k m`` straight-line operations) whose values are the elementwise ones to the bit (one product an
    element, its factors swapped); a batch (leading axes) stays elementwise."""
    from sparsedyn.contact.friction_problem import _scale_rows
    from sparsedyn.symbolic.trace import trace_function
    rng = np.random.default_rng(3)
    d, X = rng.standard_normal(5), rng.standard_normal((5, 64))
    assert np.array_equal(_scale_rows(d, X), d[:, None] * X)
    B = rng.standard_normal((2, 5, 48))
    assert np.array_equal(_scale_rows(np.stack([d, -d]), B), np.stack([d, -d])[:, :, None] * B)
    prog = trace_function(lambda d, X: (_scale_rows(d, X),), [("d", (5,)), ("X", (5, 64))])
    assert len(prog.blocks) == 1
    assert np.array_equal(prog.evaluate([d, X])[0], d[:, None] * X)


def test_turned_impulses_turn_a_contact_frames_impulse_into_another_frames():
    """By hand: a normal +x has the frame [t, b, n] = [y, z, x] (plane_basis: t the world y projected
    where n lies near x, b = n x t), a normal +z the frame [x, y, z]; an impulse (a, b, c) of the first
    is the world vector (c, a, b), which the second reads as it is.  In its own frame an impulse is
    itself to rounding (R^T R = 1 within a few ulps of a rotation's entries)."""
    from sparsedyn.contact.friction_problem import turned_impulses
    impulses = np.array([[1.0, 2.0, 3.0], [-0.5, 0.25, 4.0]])
    x_plane, z_plane = np.array([[1.0, 0, 0, 0.3]] * 2), np.array([[0, 0, 1.0, -0.1]] * 2)
    np.testing.assert_array_equal(turned_impulses(z_plane, x_plane, impulses), impulses[:, [2, 0, 1]])
    np.testing.assert_array_equal(turned_impulses(x_plane, z_plane, impulses[:, [2, 0, 1]]), impulses)
    tilted = np.array([[0.3, -0.4, 0.866, 0.0], [-0.6, 0.1, 0.79, 0.2]])
    own = turned_impulses(tilted, tilted, impulses)
    np.testing.assert_allclose(own, impulses, rtol=0, atol=8 * np.finfo(float).eps * np.abs(impulses).max())
    R = sd.contact.friction_problem.plane_basis(tilted)[0]
    np.testing.assert_allclose(R @ turned_impulses(tilted, z_plane, impulses)[..., None],
                               impulses[..., None], rtol=0, atol=8 * np.finfo(float).eps * 4.0)
