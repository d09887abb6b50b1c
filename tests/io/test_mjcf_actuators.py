"""An MJCF file's actuators (sparsedyn.io.mjcf_actuators) against MuJoCo's ``qfrc_actuator``: the
dm_control humanoid's motors and a file of position and velocity servos, general actuators, gears,
clipped controls, forces and joint forces (a composite joint among them), at random states and
controls beyond their ranges; actuators with activation states (filters, an exact filter, integrators,
acting early, clipped) against MuJoCo's ``act_dot``, its step's ``act`` and a closed loop of its steps;
bad input named."""

from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.interop.mujoco import q_to_mujoco, tau_from_mujoco, v_to_mujoco

HUMANOID = str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml")

#: A free base, a body with two hinges (one composite joint), a slide and a hinge, driven by every
#: force law the reader takes; ``h2``'s joint force limited on its own.
SERVOS = """<mujoco><worldbody><body name="base"><freejoint/><geom size=".1" mass="2"/>
<body name="arm" pos="0 0 .2"><joint name="ax" type="hinge" axis="1 0 0"/><joint name="ay" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0 0 .3" size=".03" mass="1"/>
<body name="slider" pos="0 0 .3"><joint name="s" type="slide" axis="0 0 1"/><geom size=".05" mass=".5"/>
<body name="tip" pos="0 0 .1"><joint name="h2" type="hinge" axis="0 1 0" actuatorfrcrange="-2 2"/>
<geom size=".03" mass=".2"/></body></body></body></body></worldbody>
<actuator><motor name="m" joint="ax" gear="30" ctrlrange="-1 1"/>
<position name="p" joint="ay" kp="50" kv="3" forcerange="-20 20"/>
<velocity name="v" joint="s" kv="8" gear="2"/>
<general name="g" joint="h2" gainprm="4" biastype="affine" biasprm="0.5 -3 -0.2" gear="1.5" ctrlrange="-2 2"/>
</actuator></mujoco>"""


def _against_mujoco(xml_or_path, seed, scale):
    """Our forces and MuJoCo's ``qfrc_actuator`` (our layout) at random states and controls up to ``scale``
    times the unit (beyond the ranges)."""
    m = mujoco.MjModel.from_xml_path(xml_or_path) if xml_or_path.endswith(".xml") else \
        mujoco.MjModel.from_xml_string(xml_or_path)
    model = sd.load_mjcf(xml_or_path)
    act = sd.load_actuators(model, xml_or_path)
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    for _ in range(10):
        q, v = model.random_configuration(rng), rng.standard_normal(model.nv)
        ctrl = scale * rng.standard_normal(m.nu)
        d.qpos[:], d.qvel[:], d.ctrl[:] = q_to_mujoco(model, q), v_to_mujoco(model, q, v), ctrl
        mujoco.mj_forward(m, d)
        ref = tau_from_mujoco(model, d.qpos, d.qfrc_actuator)
        got = act.forces(q, v, ctrl)
        assert np.abs(got - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max()), (got, ref)
    return act


def test_the_humanoids_motors_are_mujocos():
    """21 motors (gears 20 to 120), controls limited to [-1, 1], drawn up to 3: clipped as MuJoCo clips."""
    act = _against_mujoco(HUMANOID, 0, 3.0)
    assert len(act) == 21 and act.gear.max() > act.gear.min() and np.all(act.ctrl_range == [-1.0, 1.0])


def test_servos_gears_and_limits_are_mujocos():
    """Position and velocity servos, a general actuator with an affine bias, gears, a force range and a
    joint force range, on a composite joint, a slide and a hinge behind a free joint: equal to MuJoCo at
    random states whose forces reach past the ranges."""
    act = _against_mujoco(SERVOS, 1, 3.0)
    assert act.names == ("m", "p", "v", "g")
    # the joint force range binds somewhere in these draws: the comparison sees it
    model = sd.load_mjcf(SERVOS)
    rng = np.random.default_rng(1)
    tips = [act.forces(model.random_configuration(rng), rng.standard_normal(model.nv), 3 * rng.standard_normal(4))[-1]
            for _ in range(10)]
    assert max(np.abs(tips)) == 2.0


def test_a_batch_plain_lists_and_tuples():
    model = sd.load_mjcf(SERVOS)
    act = sd.load_actuators(model, SERVOS)
    rng = np.random.default_rng(2)
    Q = np.array([model.random_configuration(rng) for _ in range(4)])
    V, C = rng.standard_normal((4, model.nv)), rng.standard_normal((4, 4))
    batch = act.forces(Q, V, C)
    for b in range(4):
        assert np.array_equal(batch[b], act.forces(Q[b].tolist(), V[b].tolist(), C[b].tolist()))
        assert np.array_equal(batch[b], act.forces(tuple(Q[b]), tuple(V[b]), tuple(C[b])))


def test_unsupported_actuators_and_a_wrong_model_are_named(tmp_path):
    bad = SERVOS.replace('<motor name="m" joint="ax" gear="30" ctrlrange="-1 1"/>',
                         '<motor name="m" joint="ax" gear="30" ctrlrange="-1 1"/>'
                         '<muscle name="biceps" joint="ay" lengthrange="-1 1"/>')
    with pytest.raises(sd.MjcfError, match=r"biceps has activation dynamics other than a filter or an integrator "
                                           r"\(a muscle, a user's\); biceps has a gain other than a fixed one"):
        sd.load_actuators(sd.load_mjcf(bad), bad)
    with pytest.raises(ValueError, match="has nq=.*pass the model sd.load_mjcf read from that file"):
        sd.load_actuators(sd.load_mjcf(HUMANOID), SERVOS)
    with pytest.raises(TypeError, match="model must be a sparsedyn Model"):
        sd.load_actuators(SERVOS, SERVOS)
    act = sd.load_actuators(sd.load_mjcf(SERVOS), SERVOS)
    q, v = sd.load_mjcf(SERVOS).neutral(), np.zeros(10)
    with pytest.raises(ValueError, match=r"ctrl must have shape \(\.\.\., 4\) \(one control per actuator: m, p, v, g"):
        act.forces(q, v, [0.0, 1.0])
    with pytest.raises(ValueError, match="ctrl holds NaN"):
        act.forces(q, v, [0.0, np.nan, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"the leading \(batch\) axes of q \(3, 11\), v \(2, 10\) and ctrl"):
        act.derivatives(np.tile(q, (3, 1)), np.zeros((2, 10)), np.zeros(4))


#: A hinge, a hinge and a slide driven by each activation dynamics the reader takes: a filter (a
#: ``<cylinder>``), an exact filter acting early and clipped (a ``<general>``), an
#: integrator (an ``<intvelocity>``, clipped), an integrator acting early, a motor, and an exact filter
#: (a ``<position>`` with ``timeconst``).
FILTERS = """<mujoco><option timestep="0.01"/><worldbody>
<body><joint name="a" type="hinge" axis="0 1 0"/><geom type="capsule" size=".05" fromto="0 0 0 .3 0 0" mass="1"/>
<body pos=".3 0 0"><joint name="b" type="hinge" axis="0 1 0"/><geom type="capsule" size=".05" fromto="0 0 0 .3 0 0" mass="1"/>
<body pos=".3 0 0"><joint name="c" type="slide" axis="1 0 0"/><geom type="sphere" size=".05" mass="1"/>
</body></body></body></worldbody>
<actuator><cylinder name="piston" joint="a" area="2" timeconst="0.05" ctrlrange="-1 1"/>
<general name="early" joint="b" dyntype="filterexact" dynprm="0.2" gainprm="8" biastype="affine" biasprm="0 -8 -0.5"
 actearly="true" actlimited="true" actrange="-0.3 0.4"/>
<intvelocity name="iv" joint="c" kp="20" actrange="-0.2 0.2"/>
<general name="int" joint="a" dyntype="integrator" gainprm="1" actlimited="true" actrange="-0.5 0.7" actearly="true"/>
<motor name="m" joint="b" gear="2"/>
<position name="slow" joint="c" kp="5" kv="0.3" timeconst="0.1"/></actuator></mujoco>"""


def test_activation_dynamics_are_mujocos():
    """At random states, activations (some outside their ranges) and controls (some beyond theirs): the forces
    equal MuJoCo's ``qfrc_actuator``, the rates its ``act_dot``, the next activations its step's ``act``."""
    m = mujoco.MjModel.from_xml_string(FILTERS)
    model = sd.load_mjcf(FILTERS)
    act = sd.load_actuators(model, FILTERS)
    assert act.activation == ("filter", "filterexact", "integrator", "integrator", "none", "filterexact")
    assert act.na == m.na == 5
    d, rng = mujoco.MjData(m), np.random.default_rng(5)
    for _ in range(10):
        q, v = rng.standard_normal(3), rng.standard_normal(3)
        ctrl, a = 2.0 * rng.standard_normal(m.nu), 0.5 * rng.standard_normal(m.na)
        d.qpos[:], d.qvel[:], d.ctrl[:], d.act[:] = q, v, ctrl, a
        mujoco.mj_forward(m, d)
        for got, ref in ((act.forces(q, v, ctrl, a, dt=0.01), d.qfrc_actuator), (act.activation_rate(ctrl, a), d.act_dot)):
            assert np.abs(got - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max()), (got, ref)
        mujoco.mj_step(m, d)
        assert np.abs(act.next_activation(ctrl.tolist(), tuple(a), 0.01) - d.act).max() <= 1e-14


def test_a_closed_loop_of_activations_follows_mujocos_steps():
    """A rollout whose controller carries the activations (the forces at this step's, then the next) follows
    MuJoCo's default Euler steps of the same controls for 100 steps: positions, velocities and activations
    to 1e-9 (the steps equal to rounding; the chain's dynamics amplify it over the horizon)."""
    m = mujoco.MjModel.from_xml_string(FILTERS)
    model = sd.load_mjcf(FILTERS)
    act = sd.load_actuators(model, FILTERS)
    dt, n = m.opt.timestep, 100
    control = lambda t: np.array([np.sin(5 * t), 0.4 * np.cos(3 * t), 0.5, 0.3 * np.sin(t), 0.1, 0.2])   # noqa: E731
    d = mujoco.MjData(m)
    for k in range(n):
        d.ctrl[:] = control(k * dt)
        mujoco.mj_step(m, d)
    state = {"act": np.zeros(act.na), "k": 0}

    def policy(t, q, v):
        ctrl = control(state["k"] * dt)
        tau = act.forces(q, v, ctrl, state["act"], dt)
        state["act"], state["k"] = act.next_activation(ctrl, state["act"], dt), state["k"] + 1
        return tau
    with sd.use_backend("native", deterministic=True):                    # the default road
        r = sd.rollout(model, np.zeros(3), np.zeros(3), policy, [], dt, n, passive="implicit")
    assert state["k"] == n
    for got, ref in ((r.q[-1], d.qpos), (r.v[-1], d.qvel), (state["act"], d.act)):
        assert np.abs(got - ref).max() <= 1e-9 * max(1.0, np.abs(ref).max()), (got, ref)
