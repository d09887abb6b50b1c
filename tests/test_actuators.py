"""Joint actuators (sparsedyn.model.actuators): the force law by hand, its derivatives against central
differences (and zero where a range clips), a position servo holding an arm against gravity in a rollout
(its rest where the servo's torque equals gravity's), activation states (a filter's and an integrator's
steps by hand, their derivatives against central differences), and bad construction and input named."""

import numpy as np
import pytest

import sparsedyn as sd

INF = np.inf


def _two(nv=3):
    """A position servo on dof 0 (gear 2, kp 10, kv 1, force range +-15) and a motor on dof 2 (gear 3,
    controls in [-1, 1]); dof 2's joint force limited to +-2.5."""
    return sd.Actuators(names=("servo", "motor"), dof=[0, 2], q_index=[0, 2], gear=[2.0, 3.0], gain=[10.0, 1.0],
                        bias=[[0.0, -10.0, -1.0], [0.0, 0.0, 0.0]], ctrl_range=[[-INF, INF], [-1.0, 1.0]],
                        force_range=[[-15.0, 15.0], [-INF, INF]], joint_force_range=[[-INF, INF]] * 2 + [[-2.5, 2.5]],
                        nv=nv, nq=nv)


def test_the_force_law_by_hand():
    act = _two()
    with pytest.raises(ValueError, match=r"Actuators.forces: q must have shape \(\.\.\., 3\)"):
        act.forces(np.zeros(2), np.zeros(3), [0.0, 0.0])
    q, v = np.array([0.1, 0.0, 0.3]), np.array([0.5, 0.0, -1.0])
    # servo: f = 10 c - 10 (2 q0) - (2 v0) = 10 * 0.4 - 2 - 1 = 1, on dof 0 as 2 f; motor: 3 * 0.5 on dof 2
    assert np.allclose(act.forces(q, v, [0.4, 0.5]), [2.0, 0.0, 1.5], rtol=1e-15, atol=0)
    # the motor's control clipped to 1 (3 N m), its joint force to 2.5; the servo's force to 15
    assert np.allclose(act.forces(q, v, [9.0, 4.0]), [30.0, 0.0, 2.5], rtol=1e-15, atol=0)


def test_the_derivatives_are_central_differences_and_zero_where_clipped():
    act = _two()
    rng = np.random.default_rng(0)
    h = 1e-6
    for ctrl in ([0.4, 0.2], [9.0, 4.0]):                  # inside the ranges; clipped
        q, v = 0.1 * rng.standard_normal(3), rng.standard_normal(3)
        dq, dv, dc, da = act.derivatives(q, v, ctrl)
        assert da.shape == (3, 0)                          # no activation state
        for D, x, f in ((dq, q, lambda y: act.forces(y, v, ctrl)), (dv, v, lambda y: act.forces(q, y, ctrl)),
                        (dc, np.array(ctrl), lambda y: act.forces(q, v, y))):
            fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))]).T
            assert np.abs(D - fd).max() <= 1e-7 * max(1.0, np.abs(fd).max())
    assert np.array_equal(dc, np.zeros((3, 2)))            # both clipped: nothing moves them
    dq, dv, dc, _ = act.derivatives(np.zeros(3), np.zeros(3), [0.1, 0.1])
    assert dq[0, 0] == -10.0 * 2 * 2 and dv[0, 0] == -1.0 * 2 * 2 and dc[0, 0] == 20.0 and dc[2, 1] == 3.0
    batch = act.derivatives(np.zeros((4, 3)), np.zeros((4, 3)), np.full((4, 2), 0.1))
    assert all(np.array_equal(b[k], o) for b, o in zip(batch[:3], (dq, dv, dc)) for k in range(4))


ARM = """<mujoco><worldbody><body name="arm"><joint name="j" type="hinge" axis="0 1 0" damping="0.5"/>
<geom type="sphere" size="0.02" pos="0.5 0 0" mass="1"/></body></worldbody>
<actuator><position name="hold" joint="j" kp="40" kv="2"/></actuator></mujoco>"""


def test_a_position_servo_holds_an_arm_where_its_torque_meets_gravity():
    """The arm starts horizontal and sags to rest where ``kp (ctrl - q) = g(q)`` (gravity's joint torque):
    a rollout whose controller is the servo, its steps on the default road."""
    model = sd.load_mjcf(ARM)
    act = sd.load_actuators(model, ARM)
    ctrl = [0.2]
    r = sd.rollout(model, np.zeros(1), np.zeros(1), lambda t, q, v: act.forces(q, v, ctrl), [], 0.002, 3000,
                   passive="implicit")
    q, v = r.q[-1], r.v[-1]
    assert abs(v[0]) < 1e-8 and abs(q[0] - ctrl[0]) > 0.05             # at rest, sagged from the command
    assert abs(act.forces(q, v, ctrl)[0] - sd.generalized_gravity(model, q)[0]) <= 1e-8


def test_bad_actuators_are_named():
    with pytest.raises(ValueError, match=r"Actuators: bias must have shape \(2, 3\)"):
        sd.Actuators(names=("a", "b"), dof=[0, 1], q_index=[0, 1], gear=[1, 1], gain=[1, 1], bias=[[0, 0, 0]],
                     ctrl_range=[[-1, 1]] * 2, force_range=[[-1, 1]] * 2, joint_force_range=[[-1, 1]] * 2, nv=2, nq=2)
    with pytest.raises(ValueError, match="dof must index the model's 2 dofs"):
        sd.Actuators(names=("a",), dof=[2], q_index=[2], gear=[1], gain=[1], bias=[[0, 0, 0]],
                     ctrl_range=[[-1, 1]], force_range=[[-1, 1]], joint_force_range=[[-1, 1]] * 2, nv=2, nq=2)
    with pytest.raises(ValueError, match="ctrl_range has a lower bound above its upper bound"):
        sd.Actuators(names=("a",), dof=[0], q_index=[0], gear=[1], gain=[1], bias=[[0, 0, 0]],
                     ctrl_range=[[1, -1]], force_range=[[-1, 1]], joint_force_range=[[-1, 1]] * 2, nv=2, nq=2)


def _stateful():
    """A filter (``T`` 0.1 s, gain 4) on dof 0, an integrator acting early (clipped to [-0.5, 0.5]) on dof 1, a
    motor on dof 2: two activations."""
    return sd.Actuators(names=("filter", "integrator", "motor"), dof=[0, 1, 2], q_index=[0, 1, 2], gear=[1.0, 2.0, 1.0],
                        gain=[4.0, 3.0, 1.0], bias=[[0.0, -1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                        ctrl_range=[[-1.0, 1.0]] * 3, force_range=[[-INF, INF]] * 3, joint_force_range=[[-INF, INF]] * 3,
                        nv=3, nq=3, activation=("filter", "integrator", "none"), time_constant=[0.1, 0.0, 0.0],
                        act_range=[[-INF, INF], [-0.5, 0.5], [-INF, INF]], act_early=[False, True, False])


def test_activation_states_by_hand():
    """The filter's rate is ``(c - a) / T``, its Euler step ``a + dt (c - a) / T``; the integrator's rate is
    ``c``, its step ``a + dt c`` clipped to its range; the filter's force takes ``a``, the early integrator's
    the next activation, the motor's the control."""
    act = _stateful()
    assert act.na == 2 and act.stateful.tolist() == [0, 1]
    q, v, ctrl, a, dt = [0.2, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.4, -0.3], [0.1, 0.2], 0.01
    assert np.allclose(act.activation_rate(ctrl, a), [(0.5 - 0.1) / 0.1, 0.4], rtol=1e-15, atol=0)
    nxt = [0.1 + 0.01 * 4.0, 0.2 + 0.01 * 0.4]
    assert np.allclose(act.next_activation(ctrl, a, dt), nxt, rtol=1e-15, atol=0)
    # filter: 4 a - 1 q = 0.4 - 0.2; integrator: 3 * next on dof 1 with gear 2; motor: -0.3
    assert np.allclose(act.forces(q, v, ctrl, a, dt), [0.2, 2 * 3 * nxt[1], -0.3], rtol=1e-14, atol=0)
    assert act.next_activation(ctrl, [0.1, 0.499], 1.0)[1] == 0.5          # clipped to its range
    assert act.next_activation([0.5, 9.0, 0.0], a, dt)[1] == 0.2 + 0.01 * 1.0   # the control clipped first
    # a batch of states, controls and activations: each row its single call
    rng = np.random.default_rng(3)
    Q, C, A = rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), 0.3 * rng.standard_normal((4, 2))
    for got, one in ((act.forces(Q, Q, C, A, dt), lambda k: act.forces(Q[k], Q[k], C[k], A[k], dt)),
                     (act.next_activation(C, A, dt), lambda k: act.next_activation(C[k], A[k], dt)),
                     (act.derivatives(Q, Q, C, A, dt)[3], lambda k: act.derivatives(Q[k], Q[k], C[k], A[k], dt)[3]),
                     (act.next_activation_derivatives(C, A, dt)[0], lambda k: act.next_activation_derivatives(C[k], A[k], dt)[0])):
        assert all(np.array_equal(got[k], one(k)) for k in range(4))


def test_activation_derivatives_are_central_differences():
    act = _stateful()
    rng = np.random.default_rng(4)
    h, dt = 1e-6, 0.01
    for _ in range(3):
        q, v = rng.standard_normal(3), rng.standard_normal(3)
        ctrl, a = 0.5 * rng.standard_normal(3), 0.2 * rng.standard_normal(2)
        dq, dv, dc, da = act.derivatives(q, v, ctrl, a, dt)
        for D, x, f in ((dc, ctrl, lambda y: act.forces(q, v, y, a, dt)), (da, a, lambda y: act.forces(q, v, ctrl, y, dt)),
                        (act.next_activation_derivatives(ctrl, a, dt)[0], ctrl, lambda y: act.next_activation(y, a, dt)),
                        (act.next_activation_derivatives(ctrl, a, dt)[1], a, lambda y: act.next_activation(ctrl, y, dt))):
            fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))]).T
            assert np.abs(D - fd).max() <= 1e-7 * max(1.0, np.abs(fd).max())
    # the filter's force does not move with this step's control; the early integrator's does (dt a step)
    dq, dv, dc, da = act.derivatives(np.zeros(3), np.zeros(3), [0.1, 0.1, 0.1], [0.0, 0.0], dt)
    assert dc[0, 0] == 0.0 and dc[1, 1] == 2 * 3 * dt and da[0, 0] == 4.0 and da[1, 1] == 2 * 3


def test_activation_input_is_named():
    act = _stateful()
    q = np.zeros(3)
    with pytest.raises(ValueError, match=r"act is required: 2 actuator\(s\) have an activation state \(filter, integrator\)"):
        act.forces(q, q, [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"act must have shape \(\.\.\., 2\)"):
        act.forces(q, q, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.01)
    with pytest.raises(ValueError, match="dt is required: an actuator acts early"):
        act.forces(q, q, [0.0, 0.0, 0.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="act holds NaN"):
        act.next_activation([0.0, 0.0, 0.0], [np.nan, 0.0], 0.01)
    with pytest.raises(ValueError, match="dt must be a positive finite number"):
        act.next_activation([0.0, 0.0, 0.0], (0.0, 0.0), -0.01)
    with pytest.raises(ValueError, match="Actuators: activation must be 3 of"):
        sd.Actuators(names=("a", "b", "c"), dof=[0, 1, 2], q_index=[0, 1, 2], gear=[1] * 3, gain=[1] * 3,
                     bias=[[0, 0, 0]] * 3, ctrl_range=[[-1, 1]] * 3, force_range=[[-1, 1]] * 3,
                     joint_force_range=[[-1, 1]] * 3, nv=3, nq=3, activation=("filter", "muscle", "none"))
