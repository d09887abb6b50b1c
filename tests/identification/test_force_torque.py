"""F/T sensor regressors (sparsedyn.identification.force_torque): the regressor times
force_torque_parameters is what the sensor reads (the estimation module's sensor model, Pinocchio's
joint wrench), on moving and merged fixed joints, in memory bounded by a chunk of states."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import identification as idn
from sparsedyn.model.sensors import ForceTorque
from sparsedyn.model.spatial import rotx
from conftest import rel_err
import erd


@pytest.fixture(scope="module")
def icub():
    return erd.icub_with_sensors()


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


def test_fixed_joint_force_torque_regressor_matches_the_estimation_model(icub):
    """On the default (native) road, states as plain lists: ``force_torque_regressor(...) @
    force_torque_parameters(...)`` is what the estimation module's sensor model reads, for the six
    sensors on fixed joints (10 NB + 10 columns: the child side's parameters follow the model's)."""
    model, sensors = icub
    prob = sd.EstimationProblem(model, sensors=sensors)
    q, v, a = idn.random_states(model, 2, seed=9)
    with pytest.warns(sd.estimation.ModelViolationWarning, match="free joint 'root_joint'"):
        y = prob.unpack(prob.measurements(q, v, a)[0])           # random motion, no contact: compared only
    with sd.use_backend("native", deterministic=True):
        for s in sensors:
            Ys = sd.force_torque_regressor(model, q.tolist(), v.tolist(), a.tolist(), s.name)
            assert Ys.shape == (2, 6, 10 * model.nbodies + 10)
            pi = sd.force_torque_parameters(model, s)
            assert rel_err(pi, idn.model_parameters(model, (s.joint,))) == 0
            assert rel_err(Ys @ pi, y[s.name]) < 1e-12


def test_moving_joint_force_torque_regressor_is_pinocchio_joint_wrench(monkeypatch):
    """A sensor on a moving joint of the Panda (joint frame, axes turned, child-to-parent): the columns
    are ``model.inertial_parameters()``'s, and ``Y_s pi = -R^T`` Pinocchio's ``data.f`` of the joint;
    worked through in chunks of states (3 states a chunk here) on the native road."""
    import pinocchio as pin
    model, pm = erd.load_pair("panda", False)
    R = rotx(0.3)
    s = ForceTorque("ft", model.joint_names[4], rotation=R, direction="child_to_parent")
    q, v, a = idn.random_states(model, 7, seed=3)
    monkeypatch.setattr(idn.force_torque, "FT_CHUNK", 3)
    with sd.use_backend("native", deterministic=True):
        Ys = sd.force_torque_regressor(model, q, v, a, s)
    pi = sd.force_torque_parameters(model, s)
    assert Ys.shape == (7, 6, 10 * model.nbodies) and rel_err(pi, model.inertial_parameters()) == 0
    data = pm.createData()
    for k in range(7):
        pin.rnea(pm, data, q[k], v[k], a[k])
        f = data.f[pm.getJointId(s.joint)]
        assert rel_err(Ys[k] @ pi, -np.concatenate([R.T @ f.angular, R.T @ f.linear])) < 1e-12


def test_force_torque_regressor_memory_is_bounded_by_a_chunk(icub, monkeypatch):
    """tracemalloc's peak beyond the result stays near one chunk's joint-wrench rows for 4x more states
    (it held the wrenches of every joint of every state before: 6 NB times more than the result)."""
    import tracemalloc
    model, sensors = icub
    monkeypatch.setattr(idn.force_torque, "FT_CHUNK", 100)
    chunk = 100 * 6 * 10 * model.nbodies * 8                   # one chunk's wrench rows (bytes)
    beyond = []
    for n in (500, 2000):
        q, v, a = idn.random_states(model, n, seed=1)
        tracemalloc.start()
        Y = sd.force_torque_regressor(model, q, v, a, sensors[0])
        beyond.append(tracemalloc.get_traced_memory()[1] - Y.nbytes)
        tracemalloc.stop()
    assert beyond[1] < 4 * chunk < Y.nbytes and beyond[1] < 1.5 * beyond[0]


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
