"""Sensitivities of estimates (the traced online phase differentiated): identities with RNEA's
derivatives, linearity in the measurements, finite differences in q."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from sparsedyn import estimation as est
from sparsedyn.estimation.derivatives import estimate_derivatives
from sparsedyn.estimation.problem import Estimate


@pytest.fixture(scope="module")
def model():
    return sd.random_tree(4, branching=1.5, joint_types=("revolute", "prismatic", "helical"), seed=3)


def state(model, seed):
    rng = np.random.default_rng(seed)
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def tau_of(problem, M):
    """The joint-force rows of a sensitivity matrix (n, k) -> (nv, k)."""
    return np.moveaxis(Estimate(problem, np.moveaxis(M, -1, 0)).tau, 0, -1)


def test_inverse_dynamics_sensitivities_are_rnea_derivatives(model):
    """With every joint acceleration measured exactly the estimate's torques are RNEA's, so their
    sensitivities to q, qd and the measured qdd are rnea_derivatives' three matrices."""
    prob = est.EstimationProblem(model, [est.JointAcceleration("qdd", model.joint_names)])
    e = prob.analyze()
    assert e.verdict.kind == "well posed"
    q, qd, qdd = state(model, 1)
    dq, dqd, dy = estimate_derivatives(e, q, qd, qdd)
    assert dq.shape == (e.n, model.nv) and dy.shape == (e.n, prob.ny)
    for got, want in zip((dq, dqd, dy), sd.rnea_derivatives(model, q, qd, qdd)):
        assert rel_err(tau_of(prob, got), want) < 1e-12


def test_least_squares_sensitivities(model):
    """Noisy accelerations and torques on every joint: over-determined, solved by weighted least
    squares.  The estimate is linear in y (so dd/dy is exact for a unit change) and dd/dq agrees
    with central differences on the tangent space."""
    prob = est.EstimationProblem(model, [est.JointAcceleration("qdd", model.joint_names, covariance=0.1, exact=False),
                                         est.JointTorque("tau", model.joint_names, covariance=0.5)])
    e = prob.analyze()
    assert e.verdict.kind == "over-determined"
    q, qd, _ = state(model, 2)
    y = np.random.default_rng(3).normal(size=prob.ny)
    dq, dqd, dy = estimate_derivatives(e, q, qd, y)
    d0 = e.solve(q, qd, y).d
    for k in range(prob.ny):
        assert rel_err(e.solve(q, qd, y + np.eye(prob.ny)[k]).d - d0, dy[:, k]) < 1e-10
    h = 1e-6
    fd = np.stack([(e.solve(sd.integrate(model, q, h * u), qd, y).d - e.solve(sd.integrate(model, q, -h * u), qd, y).d)
                   / (2 * h) for u in np.eye(model.nv)], -1)
    assert rel_err(dq, fd) < 1e-6
    fd = np.stack([(e.solve(q, qd + h * u, y).d - e.solve(q, qd - h * u, y).d) / (2 * h) for u in np.eye(model.nv)], -1)
    assert rel_err(dqd, fd) < 1e-6
    # Batched like solve.
    Q = np.stack([q, model.random_configuration(4)])
    batched = estimate_derivatives(e, Q, qd, y)
    assert rel_err(batched[0][0], dq) < 1e-12 and batched[2].shape == (2, e.n, prob.ny)


def test_a_zero_pivot_of_the_fixed_order_is_an_error_not_nan():
    """At the humanoid's standing pose at rest the estimator's fixed pivot order meets a zero pivot
    (solve() takes its dense fallback there): the derivatives are refused with a clear error, never
    returned as NaN; a generic state nearby differentiates."""
    hum = sd.humanoid()
    prob = sd.EstimationProblem(hum, sensors=[sd.ForceTorque("l_ft", "l_ankle_roll"),
                                              sd.ForceTorque("r_ft", "r_ankle_roll")], contacts=["l_sole", "r_sole"])
    est = prob.analyze()
    y = prob.pack(qdd=np.zeros(hum.nv), l_ft=np.zeros(6), r_ft=np.zeros(6))
    q0, v0 = sd.humanoid_standing_configuration(), np.zeros(hum.nv)
    with pytest.raises(ValueError, match="zero pivot"):
        estimate_derivatives(est, q0, v0, y)
    with pytest.raises(ValueError, match=r"state \(1,\) of the batch"):
        estimate_derivatives(est, np.stack([sd.integrate(hum, q0, np.full(hum.nv, 1e-3)), q0]), v0, y)
    q1 = sd.integrate(hum, q0, np.full(hum.nv, 1e-3))
    assert all(np.all(np.isfinite(x)) for x in estimate_derivatives(est, q1, v0, y))
