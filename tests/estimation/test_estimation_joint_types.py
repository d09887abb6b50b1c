"""Estimation on a humanoid whose hips are spherical_zyx joints (a motion subspace that depends on q):
the estimates equal the classical recursion's ground truth (RNEA) and the contact forces of
``sd.contact_dynamics`` for the same state and torques."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import estimation as est
from sparsedyn.estimation.casestudy import case_problems, consistent_state
from conftest import rel_err

TOL = 1e-9      # as the estimation suite: square and least-squares solves of these well-conditioned problems


@pytest.fixture(scope="module")
def model():
    m = sd.humanoid(hips="spherical_zyx")
    assert [m.joints[m.joint(h)].type for h in ("l_hip", "r_hip")] == ["spherical_zyx"] * 2
    return m


@pytest.mark.parametrize("case", ["eq23-nz", "ankle-ft", "ankle-ft-imu"])
def test_case_study_recovers_the_rnea_truth(model, case):
    prob = case_problems(model, feet=("l_sole", "r_sole"))[case]
    solver = prob.analyze()
    rng = np.random.default_rng(3)
    q, qd, qdd, w = consistent_state(prob, rng, batch=(3,))
    y, truth = prob.measurements(q, qd, qdd, w)
    e = solver.solve(q, qd, y)
    assert rel_err(e.d, truth["d"]) < TOL and rel_err(e.tau, truth["tau"]) < TOL
    for c in w:
        assert rel_err(e.contacts[c], w[c]) < TOL


def test_unknown_hip_accelerations_are_estimated(model):
    """F/T sensors at the ankles and torque sensors at the hips determine the hips' three Euler-angle
    accelerations (and the soles' wrenches)."""
    sensors = [est.ForceTorque("l_ft", "l_ankle_roll"), est.ForceTorque("r_ft", "r_ankle_roll"),
               est.JointTorque("hips", ["l_hip", "r_hip"])]
    prob = est.EstimationProblem(model, sensors, ["l_sole", "r_sole"], unknown_accelerations=["l_hip", "r_hip"])
    solver = prob.analyze()
    rng = np.random.default_rng(1)
    q, qd, qdd, w = consistent_state(prob, rng, batch=(3,))
    y, truth = prob.measurements(q, qd, qdd, w)
    e = solver.solve(q, qd, y)
    assert rel_err(e.d, truth["d"]) < TOL
    hips = np.r_[model.v_slice(model.joint("l_hip")), model.v_slice(model.joint("r_hip"))]
    assert rel_err(e.qdd[..., hips], qdd[..., hips]) < TOL


def test_contact_forces_equal_contact_dynamics(model):
    """Torques on every actuated joint and the accelerations of a contact simulation: the estimated sole
    wrenches are the simulation's contact forces (both [n; f] at the sole frame, in its axes)."""
    actuated = [n for n, j in zip(model.joint_names, model.joints) if j.type != "free"]
    prob = est.EstimationProblem(model, [est.JointTorque("torques", actuated)], ["l_sole", "r_sole"])
    solver = prob.analyze()
    rng = np.random.default_rng(8)
    for _ in range(2):
        q, qd = model.random_configuration(rng), rng.normal(size=model.nv)
        tau = 10 * rng.normal(size=model.nv)
        tau[model.v_slice(0)] = 0.0                                 # the floating base is not actuated
        sim = sd.contact_dynamics(model, q, qd, tau, (sd.Contact("l_sole"), sd.Contact("r_sole")))
        y = prob.pack(qdd=prob.known_accelerations(sim.a), torques=tau[6:])
        e = solver.solve(q, qd, y)
        assert rel_err(e.contacts["l_sole"], sim.forces[:6]) < TOL
        assert rel_err(e.contacts["r_sole"], sim.forces[6:]) < TOL
        assert rel_err(e.tau, tau) < TOL
