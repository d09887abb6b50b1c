"""Null-space inverse / forward dynamics against the full KKT system, on every example, 100 states each.

u and lambda must agree to 1e-9 relative (``rel_err``: max |x - y| / max(1, max |y|)).
For the rank-deficient four-bar (3D point closure of a planar loop, rank G = 2 < m = 3)
lambda is not unique: we compare the generalised constraint force ``G^T lambda``
(unique) and the minimum-norm lambda (both sides return the minimum-norm one).
"""

import warnings

import numpy as np
import pytest

from sparsedyn.constraints import (EXAMPLES, InfeasibleActuationError, InfeasibleActuationWarning,
                                   actuation_matrix, constrained_forward_dynamics, constrained_inverse_dynamics,
                                   five_bar, four_bar)
from conftest import rel_err, constant_subspace_types
from constraints_helpers import example_states, kkt_forward, kkt_inverse, terms

TOL = 1e-9


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_inverse_and_forward_dynamics_agree_with_kkt(name):
    mech, states = example_states(name)
    model, cs, B = mech.model, mech.constraints, mech.B
    worst = {"u": 0.0, "lam": 0.0, "Gt_lam": 0.0, "qdd": 0.0, "fd_lam": 0.0}
    for q, v, qdd in states:
        T = terms(model, cs, q, v)
        G = T[2]
        res = constrained_inverse_dynamics(cs, q, v, qdd, actuated=mech.actuated, on_infeasible="raise")
        assert res.feasible
        u_ref, lam_ref = kkt_inverse(model, cs, q, v, qdd, B, T=T)
        worst["u"] = max(worst["u"], rel_err(res.u, u_ref))
        worst["lam"] = max(worst["lam"], rel_err(res.lam, lam_ref))
        worst["Gt_lam"] = max(worst["Gt_lam"], rel_err(G.T @ res.lam, G.T @ lam_ref))
        # Forward dynamics with those efforts: KKT and ours give back qdd (round trip).
        qdd_ref, lam_fd = kkt_forward(model, cs, q, v, B @ res.u, T=T)
        fwd = constrained_forward_dynamics(cs, q, v, B @ res.u)
        worst["qdd"] = max(worst["qdd"], rel_err(qdd_ref, qdd), rel_err(fwd.a, qdd_ref))
        worst["fd_lam"] = max(worst["fd_lam"], rel_err(fwd.lam, lam_fd), rel_err(lam_fd, res.lam))
    print(name, worst)
    assert max(worst.values()) < TOL, worst


def test_regimes_of_the_examples():
    expected = {"four_bar": "fully actuated", "slider_crank": "fully actuated", "five_bar": "fully actuated",
                "delta_robot": "fully actuated", "humanoid_double_support": "over-actuated"}
    for name, regime in expected.items():
        mech, states = example_states(name)
        q, v, qdd = states[0]
        assert constrained_inverse_dynamics(mech.constraints, q, v, qdd, actuated=mech.actuated).regime == regime


def test_fully_actuated_law_is_gamma_transpose_tau():
    """The seed's feedback-cancellation law: with the actuated coordinates independent, u = gamma^T tau_req."""
    import sparsedyn as sd
    from sparsedyn.constraints import null_space
    mech, states = example_states("five_bar")
    cs = mech.constraints
    for q, v, qdd in states[:10]:
        part = mech.partition(q)
        assert [cs.dof_names[k] for k in part.independent] == list(mech.actuated)
        gamma = null_space(cs.jacobian(q), part).gamma
        u = constrained_inverse_dynamics(cs, q, v, qdd, actuated=mech.actuated).u
        assert rel_err(u, gamma.T @ sd.rnea(mech.model, q, v, qdd)) < 1e-12


def test_independent_accelerations_and_any_partition_give_the_same_efforts():
    mech, states = example_states("delta_robot")
    cs = mech.constraints
    from sparsedyn.constraints import partition
    for q, v, qdd in states[:5]:
        auto = partition(cs, q)                       # chosen by pivoted QR, not the actuated joints
        forced = mech.partition(q)
        u1 = constrained_inverse_dynamics(cs, q, v, qdd[auto.independent], actuated=mech.actuated, partition=auto).u
        u2 = constrained_inverse_dynamics(cs, q, v, qdd[forced.independent], actuated=mech.actuated,
                                          partition=forced).u
        assert rel_err(u1, u2) < 1e-10


def test_over_actuated_four_bar_weighted_minimum_norm():
    """Crank and rocker both driven (1 dof, 2 motors): weighted minimum-norm efforts, against the KKT optimum."""
    mech = four_bar()
    cs, model = mech.constraints, mech.model
    B = actuation_matrix(model, ["crank_joint", "rocker_joint"])
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, v, qdd = mech.random_state(rng)
        for w in (None, np.array([1.0, 9.0])):
            res = constrained_inverse_dynamics(cs, q, v, qdd, B=B, weights=w)
            assert res.regime == "over-actuated" and res.feasible
            u_ref, lam_ref = kkt_inverse(model, cs, q, v, qdd, B, w)
            _, G, _ = cs.evaluate(q, v)
            assert rel_err(res.u, u_ref) < TOL
            assert rel_err(G.T @ res.lam, G.T @ lam_ref) < TOL
            assert rel_err(constrained_forward_dynamics(cs, q, v, B @ res.u).a, qdd) < TOL


def test_under_actuated_five_bar_is_exact_when_possible_and_reports_the_residual_otherwise():
    mech = five_bar()
    cs, model = mech.constraints, mech.model
    B = actuation_matrix(model, ["left_joint"])           # 2 dofs, 1 motor
    rng = np.random.default_rng(4)
    for _ in range(20):
        q, v, _ = mech.random_state(rng)
        # A motion the single motor can produce (from forward dynamics) is reproduced exactly.
        u0 = rng.normal(size=1)
        qdd = constrained_forward_dynamics(cs, q, v, B @ u0).a
        res = constrained_inverse_dynamics(cs, q, v, qdd, B=B, on_infeasible="raise")
        assert res.regime == "under-actuated" and res.feasible
        assert rel_err(res.u, u0) < TOL
        # An arbitrary motion cannot be produced: least squares, residual reported, warning.
        # (the accelerations a torque at the other base joint would add are out of reach)
        qdd_bad = constrained_forward_dynamics(cs, q, v, B @ u0 + np.array([0, 0, 1.0, 0])).a
        with pytest.warns(InfeasibleActuationWarning, match="cannot produce"):
            bad = constrained_inverse_dynamics(cs, q, v, qdd_bad, B=B)
        assert not bad.feasible and np.abs(bad.residual).max() > 1e-3
        # The least-squares optimality (normal equations) in the independent coordinates.
        from sparsedyn.constraints import null_space
        import sparsedyn as sd
        gamma = null_space(cs.jacobian(q), bad.partition).gamma
        A, y = gamma.T @ B, gamma.T @ sd.rnea(model, q, v, qdd_bad)
        assert np.abs(A.T @ (A @ bad.u - y)).max() < 1e-9 * max(1.0, np.abs(y).max())
        # ... and the residual is exactly what B u + G^T lambda misses.
        _, G, _ = cs.evaluate(q, v)
        assert rel_err(B @ bad.u + G.T @ bad.lam + bad.residual, sd.rnea(model, q, v, qdd_bad)) < 1e-12
        with pytest.raises(InfeasibleActuationError, match="left_distal_joint|right"):
            constrained_inverse_dynamics(cs, q, v, qdd_bad, B=B, on_infeasible="raise")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            constrained_inverse_dynamics(cs, q, v, qdd_bad, B=B, on_infeasible="ignore")


def test_batched_calls_equal_single_calls():
    mech, states = example_states("slider_crank")
    cs = mech.constraints
    Q, V, A = (np.stack(x) for x in zip(*states[:4]))
    res = constrained_inverse_dynamics(cs, Q, V, A, actuated=mech.actuated)
    assert res.u.shape == (4, 1) and res.lam.shape == (4, 2) and res.partition.shape == (4,)
    fwd = constrained_forward_dynamics(cs, Q, V, (mech.B @ res.u[..., None])[..., 0])
    for k in range(4):
        one = constrained_inverse_dynamics(cs, Q[k], V[k], A[k], actuated=mech.actuated)
        assert np.array_equal(one.u, res.u[k]) and np.array_equal(one.lam, res.lam[k])
        assert rel_err(fwd.a[k], A[k]) < 1e-10


def test_external_forces_enter_both_directions():
    """A push on the humanoid's hand (f_ext, body frame) changes u and lambda as the KKT system says."""
    mech, states = example_states("humanoid_double_support")
    model, cs, B = mech.model, mech.constraints, mech.B
    rng = np.random.default_rng(8)
    hand = model.body("r_hand_link")
    for q, v, qdd in states[:5]:
        f_ext = np.zeros((model.nbodies, 6))
        f_ext[hand] = rng.normal(size=6) * 20
        T = terms(model, cs, q, v, f_ext)
        res = constrained_inverse_dynamics(cs, q, v, qdd, actuated=mech.actuated, f_ext=f_ext)
        u_ref, lam_ref = kkt_inverse(model, cs, q, v, qdd, B, T=T)
        assert rel_err(res.u, u_ref) < TOL and rel_err(res.lam, lam_ref) < TOL
        fwd = constrained_forward_dynamics(cs, q, v, B @ res.u, f_ext=f_ext)
        assert rel_err(fwd.a, qdd) < TOL and rel_err(fwd.lam, res.lam) < TOL
        assert rel_err(constrained_inverse_dynamics(cs, q, v, qdd, actuated=mech.actuated).u, res.u) > 1e-3


def test_without_constraints_the_solvers_are_rnea_and_aba():
    import sparsedyn as sd
    from sparsedyn.constraints import ConstraintSet
    tree = sd.random_tree(7, joint_types=constant_subspace_types(), seed=5, floating_base=True)
    cs = ConstraintSet(tree, [])
    rng = np.random.default_rng(5)
    q, v, a = tree.random_configuration(rng), rng.normal(size=tree.nv), rng.normal(size=tree.nv)
    res = constrained_inverse_dynamics(cs, q, v, a)
    assert res.lam.shape == (0,) and rel_err(res.u, sd.rnea(tree, q, v, a)) < 1e-12
    assert rel_err(constrained_forward_dynamics(cs, q, v, res.u).a, a) < 1e-10
