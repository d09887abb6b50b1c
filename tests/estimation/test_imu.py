"""The floating base's state from IMU readings, against readings simulated independently.

The IMU's readings come from finite differences of the frame's world velocity along the
trajectory (not from the formula the helper inverts); the error of the central difference
is O(h^2) ~ 1e-8 relative, far below the tolerance.
"""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.estimation import imu_base_state
from sparsedyn.model.spatial import quat_to_rot, rot_to_quat, rotx, rotz

H = 1e-4
TOL = 1e-6


def simulated_imu(model, q, v, a, frame, R_fs):
    """(quaternion, gyro, accelerometer, gyro derivative) in IMU axes, by central differences."""
    def world(s):
        qs = sd.integrate(model, q, s * v + 0.5 * s * s * a)
        V = sd.frame_velocity(model, qs, v + s * a, frame, "local_world_aligned")     # [omega_w; pdot_w]
        return V
    dV = (world(H) - world(-H)) / (2 * H)
    V = world(0.0)
    R_wf, _ = sd.frame_placement(model, q, frame)
    R_ws = R_wf @ R_fs
    g = model.gravity
    return (rot_to_quat(R_ws), R_ws.T @ V[:3], R_ws.T @ (dV[3:] - g), R_ws.T @ dV[:3])


@pytest.fixture(scope="module")
def humanoid():
    return sd.humanoid()


@pytest.mark.parametrize("frame", ["pelvis", "r_hand"])
def test_imu_base_state_recovers_the_base(humanoid, frame):
    model = humanoid
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    R_fs = rotz(0.3) @ rotx(-1.1)               # IMU axes turned in the frame
    quat, gyro, acc, dgyro = simulated_imu(model, q, v, a, frame, R_fs)
    # the base part of the state given to the helper is garbage: it must be replaced
    qg, vg, ag = q.copy(), v.copy(), a.copy()
    qg[3:7] = rot_to_quat(rotx(2.0))
    vg[:6], ag[:6] = rng.normal(size=6), rng.normal(size=6)
    q2, v2, a2 = imu_base_state(model, frame, qg, vg, ag, quat, gyro, acc, dgyro, rotation=R_fs,
                                base_position=q[:3], base_linear_velocity=v[3:6])
    assert np.abs(quat_to_rot(q2[3:7]) - quat_to_rot(q[3:7])).max() < 1e-12
    assert np.abs(q2 - np.concatenate([q[:3], q2[3:7], q[7:]])).max() == 0     # joints and position kept
    assert np.abs(v2 - v).max() < 1e-12 * max(1, np.abs(v).max()) + 1e-12
    assert np.abs(a2 - a).max() < TOL * max(1.0, np.abs(a).max())


def test_base_linear_velocity_changes_no_torque(humanoid):
    """Without the base's linear velocity (an IMU does not see it) the joint torques and the base
    wrench are those of the true state: a uniform translation changes no classical acceleration."""
    model = humanoid
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    quat, gyro, acc, dgyro = simulated_imu(model, q, v, a, "torso", np.eye(3))
    q2, v2, a2 = imu_base_state(model, "torso", q, v, a, quat, gyro, acc, dgyro)
    assert np.all(v2[3:6] == 0)
    tau, tau2 = sd.rnea(model, q, v, a), sd.rnea(model, q2, v2, a2)
    assert np.abs(tau2 - tau).max() < TOL * np.abs(tau).max()


def test_imu_base_state_errors(humanoid):
    m = humanoid
    q, z = m.neutral(), np.zeros(m.nv)
    unit = np.array([0, 0, 0, 1.0])
    with pytest.raises(sd.ModelError, match="no floating base"):
        imu_base_state(sd.serial_chain(3), "link1", np.zeros(3), np.zeros(3), np.zeros(3), unit, z[:3], z[:3], 0)
    with pytest.raises(ValueError, match="unit quaternion"):
        imu_base_state(m, "torso", q, z, z, 2 * unit, z[:3], z[:3], 0)
    with pytest.raises(ValueError, match=r"proper_acceleration: expected finite values of shape \(\.\.\., 3\)"):
        imu_base_state(m, "torso", q, z, z, unit, z[:3], z[:2], 0)
    with pytest.raises(KeyError, match="no_frame"):
        imu_base_state(m, "no_frame", q, z, z, unit, z[:3], z[:3], 0)


def test_estimation_from_imu_and_ankle_ft(humanoid):
    """End to end: ankle F/T readings and an IMU on the torso; the base's state comes from the IMU
    (linear velocity unknown, zero); torques and contact wrenches equal the truth."""
    from sparsedyn.estimation.casestudy import case_problems, consistent_state
    model = humanoid
    prob = case_problems(model)["ankle-ft-imu"]
    rng = np.random.default_rng(5)
    q, v, a, w = consistent_state(prob, rng)
    y_true, truth = prob.measurements(q, v, a, w)
    quat, gyro, acc, dgyro = simulated_imu(model, q, v, a, "torso", np.eye(3))
    enc = (q.copy(), v.copy(), a.copy())
    for x in enc:
        x[:6] = np.nan if x is not enc[0] else x[:6]    # the base part is not known from encoders
    enc[0][3:7] = (0, 0, 0, 1.0)
    q2, v2, a2 = imu_base_state(model, "torso", *enc, quat, gyro, acc, dgyro)
    readings = {k: x for k, x in prob.unpack(y_true).items() if k != "qdd"}
    y = prob.pack(qdd=prob.known_accelerations(a2), **readings)
    e = prob.analyze().solve(q2, v2, y)
    scale = np.abs(truth["tau"]).max()
    assert np.abs(e.tau - truth["tau"]).max() < TOL * scale
    for c in w:
        assert np.abs(e.contacts[c] - truth["contacts"][c]).max() < TOL * max(1.0, np.abs(truth["contacts"][c]).max())


def test_frame_proper_acceleration_is_a_traceable_kernel(humanoid):
    """The IMU model is a registered kernel: its trace evaluates to the NumPy result."""
    from sparsedyn.estimation import frame_proper_acceleration
    from sparsedyn.symbolic.trace import trace_kernel
    model = humanoid
    rng = np.random.default_rng(6)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    prog = trace_kernel(frame_proper_acceleration.__kernel__, model, {"frame": "r_hand"})
    outs = prog.evaluate([q, v, a])
    for traced, direct in zip(outs, frame_proper_acceleration(model, q, v, a, "r_hand")):
        assert np.abs(np.asarray(traced, float).reshape(3) - direct).max() < 1e-12 * max(1.0, np.abs(direct).max())
    # and it is what an IMU reads: the finite-difference readings of simulated_imu (IMU axes = frame axes)
    quat, gyro, acc, dgyro = simulated_imu(model, q, v, a, "r_hand", np.eye(3))
    w, dw, proper = frame_proper_acceleration(model, q, v, a, "r_hand")
    assert np.abs(w - gyro).max() < 1e-12 * max(1, np.abs(w).max())
    assert np.abs(dw - dgyro).max() < TOL * max(1, np.abs(dw).max())
    assert np.abs(proper - acc).max() < TOL * max(1, np.abs(proper).max())
