"""Inertial-parameter identification: base parameters, least squares and its covariance, physically
consistent fits, F/T sensor regressors."""
import numpy as np
import pytest
from scipy.stats import chi2

import sparsedyn as sd
from sparsedyn import identification as idn
from sparsedyn.sensors import ForceTorque
from sparsedyn.spatial import rotx
from conftest import pendulum, rel_err
import erd


@pytest.fixture(scope="module", params=["chain", "floating", "panda"])
def robot(request):
    if request.param == "panda":
        return erd.load_pair("panda", False)[0]
    if request.param == "chain":
        return sd.random_tree(6, branching=1.0, joint_types="all", seed=11)
    return sd.random_tree(6, branching=2.0, joint_types="all", seed=12, floating_base=True)


@pytest.fixture(scope="module")
def base(robot):
    return idn.base_parameters(robot)


def test_pendulum_base_parameters_by_hand():
    """A body turning about y under gravity along -z: tau = Iyy qdd + g (m cx cos q - m cz sin q)...
    only Iyy, m cx and m cz act (hand derivation), so the rank is 3."""
    model, _ = pendulum()
    bp = idn.base_parameters(model)
    assert bp.rank == 3
    assert sorted(bp.names) == ["link.Iyy", "link.mcx", "link.mcz"]
    assert bp.K.shape == (3, 7) and not bp.K.any()


def test_base_regressor_spans_the_full_one(robot, base):
    q, v, a = idn.random_states(robot, 20, seed=99)
    Y = sd.joint_torque_regressor(robot, q, v, a)
    pi = robot.inertial_parameters()
    assert rel_err(base.regressor(Y) @ base.base(pi), Y @ pi) < 1e-10
    assert rel_err(Y[..., base.dependent], base.regressor(Y) @ base.K) < 1e-10
    assert np.linalg.matrix_rank(Y.reshape(-1, Y.shape[-1])) == base.rank
    # full() maps back onto the reference's dependent parameters
    other = pi * 1.5
    back = base.full(base.base(pi), other)
    assert rel_err(base.base(back), base.base(pi)) < 1e-12 and np.all(back[base.dependent] == other[base.dependent])


def test_noiseless_recovery(robot, base):
    q, v, a = idn.random_states(robot, 30, seed=1)
    tau = sd.rnea(robot, q, v, a)
    res = sd.identify(robot, q, v, a, tau, base=base)
    truth = base.base(robot.inertial_parameters())
    assert rel_err(res.beta, truth) < 1e-8
    # the identified model predicts the torques of other states
    q2, v2, a2 = idn.random_states(robot, 5, seed=2)
    assert rel_err(sd.rnea(res.model(robot), q2, v2, a2), sd.rnea(robot, q2, v2, a2)) < 1e-8


def test_noise_is_consistent_with_the_covariance(robot, base):
    """With Gaussian noise of known sigma, (beta - truth)^T C^-1 (beta - truth) ~ chi2(r)."""
    rng = np.random.default_rng(2024)
    q, v, a = idn.random_states(robot, 40, seed=3)
    tau = sd.rnea(robot, q, v, a)
    sigma = 0.1
    noisy = tau + sigma * rng.normal(size=tau.shape)
    res = sd.identify(robot, q, v, a, noisy, sigma=sigma, base=base)
    e = res.beta - base.base(robot.inertial_parameters())
    stat = e @ np.linalg.solve(res.covariance, e)
    r = base.rank
    assert chi2.ppf(0.0005, r) < stat < chi2.ppf(0.9995, r)
    # the residual variance (whitened: 1) agrees with the noise, within its chi2(dof) spread
    res2 = sd.identify(robot, q, v, a, noisy, base=base)
    assert chi2.ppf(0.0005, res2.dof) / res2.dof < res2.sigma2 / sigma ** 2 < chi2.ppf(0.9995, res2.dof) / res2.dof
    assert rel_err(res2.beta, res.beta) < 1e-12
    assert rel_err(res2.covariance, res.covariance * res2.sigma2 / sigma ** 2) < 1e-10


def test_physically_consistent(robot, base):
    rng = np.random.default_rng(5)
    q, v, a = idn.random_states(robot, 15, seed=4)
    tau = sd.rnea(robot, q, v, a)
    # much noise: the unconstrained full parameters are no longer physical
    noisy = tau + 3.0 * rng.normal(size=tau.shape)
    free = sd.identify(robot, q, v, a, noisy, sigma=3.0, base=base)
    assert np.linalg.eigvalsh(free.pseudo_inertias).min() < 0
    fit = sd.identify(robot, q, v, a, noisy, sigma=3.0, base=base, physically_consistent=True)
    assert np.linalg.eigvalsh(fit.pseudo_inertias).min() > -1e-9 * np.abs(fit.pseudo_inertias).max()
    assert fit.residual_rms >= free.residual_rms * (1 - 1e-9)       # a constrained fit cannot fit better
    # ... but no feasible point fits better than it: the truth is feasible (its regularization term is
    # zero, the reference being the model's own parameters)
    truth_rms = np.sqrt(np.mean(((noisy - sd.rnea(robot, q, v, a)) / 3.0) ** 2))
    assert fit.residual_rms <= truth_rms * (1 + 1e-9)
    # noiseless: the truth is feasible and fits exactly, so the fit reproduces it (barrier gap 1e-10)
    exact = sd.identify(robot, q, v, a, tau, base=base, physically_consistent=True)
    assert rel_err(exact.beta, base.base(robot.inertial_parameters())) < 1e-8


def test_pseudo_inertia_round_trip(robot):
    pi = robot.inertial_parameters()
    J = idn.pseudo_inertia(pi)
    assert J.shape == (robot.nbodies, 4, 4)
    assert rel_err(idn.parameters_from_pseudo_inertia(J), pi) < 1e-14
    # a physical body has a positive semidefinite pseudo-inertia (second moment of mass)
    assert np.linalg.eigvalsh(J).min() > -1e-12




def test_force_torque_regressor_matches_the_estimation_model():
    """The F/T regressor times pi is what the estimation module simulates for the sensor."""
    model = sd.random_tree(5, branching=1.0, joint_types=("revolute", "prismatic", "spherical"), seed=21)
    joint = model.joint_names[2]
    frame = model.body_names[2]
    R = rotx(0.4)
    sensors = [ForceTorque("ft", joint), ForceTorque("ft_rot", joint, frame=frame, rotation=R,
                                                     direction="child_to_parent")]
    prob = sd.EstimationProblem(model, sensors=sensors + [sd.estimation.JointTorque("tau", model.joint_names)])
    q, v, a = idn.random_states(model, 3, seed=7)
    y = prob.unpack(prob.measurements(q, v, a)[0])
    pi = model.inertial_parameters()
    for s in sensors:
        assert rel_err(idn.force_torque_regressor(model, q, v, a, s) @ pi, y[s.name]) < 1e-12
    assert rel_err(sd.joint_torque_regressor(model, q, v, a) @ pi, y["tau"]) < 1e-12


def test_identify_from_force_torque_sensor():
    """A sensor in joint 2 sees the subtree beyond it: its base parameters are recovered exactly."""
    model = sd.random_tree(5, branching=1.0, joint_types=("revolute", "prismatic", "spherical"), seed=21)
    s = ForceTorque("ft", model.joint_names[2])
    bp = idn.base_parameters(model, sensors=[s], joint_torques=False)
    # the sensor's wrench depends on the bodies beyond it only
    beyond = range(2, model.nbodies)
    assert all(c // 10 in beyond for c in bp.independent)
    q, v, a = idn.random_states(model, 10, seed=8)
    y = idn.force_torque_regressor(model, q, v, a, s) @ model.inertial_parameters()
    res = sd.identify(model, q, v, a, ft={s: y}, base=bp)
    assert rel_err(res.beta, bp.base(model.inertial_parameters())) < 1e-8
    # torques and the sensor together
    tau = sd.rnea(model, q, v, a)
    both = sd.identify(model, q, v, a, tau, ft={s: y})
    assert both.base.rank >= bp.rank
    assert rel_err(both.beta, both.base.base(model.inertial_parameters())) < 1e-8


def test_bad_input(robot):
    q, v, a = idn.random_states(robot, 2)
    with pytest.raises(ValueError, match=r"tau: expected shape \(2, "):
        sd.identify(robot, q, v, a, np.zeros((2, 1)))
    with pytest.raises(ValueError, match="no measurements"):
        sd.identify(robot, q, v, a)
    with pytest.raises(ValueError, match="pi: expected"):
        robot.with_inertial_parameters(np.zeros(3))
    with pytest.raises(TypeError, match="expected a ForceTorque"):
        idn.force_torque_regressor(robot, q, v, a, sd.estimation.JointTorque("t", [robot.joint_names[0]]))


@pytest.fixture(scope="module")
def icub():
    """iCub with its six F/T sensors, all on merged fixed joints: the leg and arm sensors have the
    moving bodies beyond them on their child side, the foot sensors none."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(erd.robots_dir() / "icub_description/robots/icub_reduced.urdf", floating_base=True)
    sensors = [s for s in model.sensors if s.kind == "force_torque"]
    assert len(sensors) == 6 and {len(model.fixed_joint(s.joint).children) for s in sensors} == {0, 1}
    return model, sensors


def test_fixed_joint_force_torque_regressor_matches_the_estimation_model(icub):
    model, sensors = icub
    prob = sd.EstimationProblem(model, sensors=sensors)
    q, v, a = idn.random_states(model, 2, seed=9)
    y = prob.unpack(prob.measurements(q, v, a)[0])
    for s in sensors:
        Ys = idn.force_torque_regressor(model, q, v, a, s)
        assert Ys.shape == (2, 6, 10 * model.nbodies + 10)
        pi = idn.model_parameters(model, (s.joint,))
        assert rel_err(Ys @ pi, y[s.name]) < 1e-12


def test_identify_from_fixed_joint_force_torque_sensors(icub):
    """The six sensors alone, no noise: the base parameters (bodies beyond the sensors and the
    child-side pieces) are recovered."""
    model, sensors = icub
    bp = idn.base_parameters(model, sensors=sensors, joint_torques=False)
    assert bp.pieces == tuple(s.joint for s in sensors)
    q, v, a = idn.random_states(model, 12, seed=10)
    ft = {s: idn.force_torque_regressor(model, q, v, a, s) @ idn.model_parameters(model, (s.joint,))
          for s in sensors}
    res = sd.identify(model, q, v, a, ft=ft, base=bp)
    truth = bp.of_model(model)
    assert rel_err(res.beta, truth) < 1e-8
    assert set(res.child_sides) == set(bp.pieces)


def test_fixed_joint_sensor_with_moving_bodies_on_both_sides_is_refused():
    b = sd.ModelBuilder("m")
    rev = sd.make_joint("revolute", (0, 0, 1))
    b.add_body("a", None, rev, mass=1.0, com=[0.1, 0, 0], rot_inertia=0.01 * np.eye(3))
    b.add_body("c1", "a", rev, mass=1.0).add_body("c2", "a", rev, mass=1.0)
    b.add_fixed_joint("ft_joint", "a", inertia=np.zeros((6, 6)), children=["c1"])
    model = b.build()
    q, v, a = idn.random_states(model, 2)
    with pytest.raises(ValueError, match="'ft_joint' has moving bodies on both sides"):
        idn.force_torque_regressor(model, q, v, a, ForceTorque("ft", "ft_joint"))
    with pytest.raises(KeyError, match="has no sensor 'nope'"):
        idn.force_torque_regressor(model, q, v, a, "nope")
