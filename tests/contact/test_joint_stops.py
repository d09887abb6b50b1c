"""Joint limits held by stops (:mod:`sparsedyn.contact.joint_stops`): the stop's gap against its
derivation (``r sin(q - L)``), a pendulum and a slide resting on their limits against the gravity they
hold, energy, MuJoCo's limited hinge, the derivatives against central differences, and a humanoid."""

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from test_friction_derivatives import check_against_differences

G = 9.81
DT = 1e-3

PENDULUM = """<mujoco><option timestep="0.001" integrator="Euler"><flag eulerdamp="disable"/></option><worldbody>
<body name="arm" pos="0.1 -0.2 1" euler="{euler}"><joint name="hinge" type="hinge" axis="{axis}" range="{lo} {hi}"
limited="true"/><geom type="capsule" fromto="0 0 0 0.1 0 -0.5" size="0.02" mass="1"/></body></worldbody></mujoco>"""

SLIDE = """<mujoco><worldbody><body name="slider" pos="0 0 1"><joint name="slide" type="slide" axis="0 0 1"
range="-0.4 0.3" limited="true"/><geom type="box" size="0.1 0.1 0.1" mass="2"/></body></worldbody></mujoco>"""


@pytest.fixture
def native_backend():
    with sd.use_backend("native", deterministic=True):
        yield


def pendulum(lo=20, hi=45, axis="0 1 0", euler="10 20 30"):
    return sd.load_mjcf(PENDULUM.format(axis=axis, lo=lo, hi=hi, euler=euler), geometry=True)


def test_the_gap_of_a_hinges_stop_is_r_sin_of_its_angle_from_the_limit(native_backend):
    """On a tilted axis in a turned and moved joint frame, each stop's signed distance at ``q`` is the
    derivation's ``r sin(q - L)`` and ``r sin(U - q)`` (the module docstring), to rounding."""
    model = sd.with_joint_stops(pendulum(-50, 70, axis="1 2 3"), radius=0.15)
    scene = sd.Scene(model, margin=0.5)
    L, U = math.radians(-50), math.radians(70)
    for q in [L, U, L - 0.05, U + 0.05, L + 0.6, U - 0.6]:       # within 36 degrees: the face's (docstring)
        hits = sd.collide(scene, [q])
        got = dict(zip([b for _, b in hits.pairs], hits.distances))
        if abs(q - L) < 0.64:
            assert got["hinge/lower"] == pytest.approx(0.15 * math.sin(q - L), abs=1e-14)
        if abs(q - U) < 0.64:
            assert got["hinge/upper"] == pytest.approx(0.15 * math.sin(U - q), abs=1e-14)


@pytest.mark.parametrize("axis, euler", [("0 0 1", "0 0 0"), ("1 2 -2", "30 -40 50")])
def test_the_gap_of_a_slides_stop_is_its_distance_from_the_limit(axis, euler):
    """Along a vertical slide, and a tilted one in a turned body: the stops' gaps are ``q - L`` and
    ``U - q`` (a tuple, as a user may give ``q``)."""
    xml = SLIDE.replace('axis="0 0 1"', f'axis="{axis}"').replace('pos="0 0 1"', f'pos="0 0 1" euler="{euler}"')
    model = sd.with_joint_stops(sd.load_mjcf(xml, geometry=True))
    scene = sd.Scene(model, margin=1.0)
    for q in (-0.4, -0.41, 0.0, 0.3, 0.35):
        hits = sd.collide(scene, (q,))
        got = dict(zip([b for _, b in hits.pairs], hits.distances))
        assert got == pytest.approx({"slide/lower": q + 0.4, "slide/upper": 0.3 - q}, abs=1e-14)


def test_stops_pair_with_their_own_joints_only():
    """A stop meets no other shape (not the floor, not the robot), and stays without self-collision."""
    model = pendulum()
    stopped = sd.with_joint_stops(model)
    floor = sd.Shape("plane", name="floor")
    for self_collision in (True, False):
        plain = sd.Scene(model, [floor], self_collision=self_collision).pairs
        both = sd.Scene(stopped, [floor], self_collision=self_collision).pairs
        assert sorted(both) == sorted(plain + [("hinge/stop", "hinge/lower"), ("hinge/stop", "hinge/upper")])
    assert list(sd.Scene(stopped).pair_friction[-2:]) == [0.0, 0.0]
    # an SRDF disabling the arm's pairs with the world keeps the stops (the model's explicit pairs)
    kept = sd.Scene(stopped, [floor], srdf=[("arm", stopped.root_name)]).pairs
    assert ("hinge/stop", "hinge/lower") in kept and ("hinge/stop", "hinge/upper") in kept


def test_a_stop_touching_at_the_reference_configuration_is_no_overlap():
    """The forearm's range excludes its neutral angle, so the scene's reference configuration (the
    neutral one moved into the limits) has it on its stop: touching at the joint by construction, not
    a self-overlap to warn of, nor one to leave out where the joint is past its limit."""
    xml = """<mujoco><worldbody><body name="upper" pos="0 0 1"><joint name="shoulder" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/><body name="fore" pos="0 0 -0.3">
    <joint name="elbow" type="hinge" axis="0 1 0" range="20 45" limited="true"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/></body></body></worldbody></mujoco>"""
    stopped = sd.with_joint_stops(sd.load_mjcf(xml, geometry=True))
    scene = sd.Scene(stopped)
    q = np.clip(stopped.neutral(), stopped.lower, stopped.upper)
    assert q[1] == stopped.lower[1] and ("elbow/stop", "elbow/lower") in scene.pairs
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.SelfOverlapWarning)
        sd.Scene(stopped)
    # past its limit the stop penetrates (what the step pushes back), and is still no pair to leave out
    past = q - np.array([0.0, 0.01])
    assert sd.collide(scene, past).distances.min() < -0.5e-3
    assert sd.overlapping_pairs(scene, past) == []


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_pendulum_rests_on_its_lower_limit_holding_gravitys_torque(backend):
    """Released at 0.6 rad, 0.25 rad above its lower limit of 20 degrees (it hangs at 0), given as
    plain lists, the pendulum falls onto the limit and rests there: ``q`` at the limit far within the
    angle the stop enters at (``margin / r`` = 0.05 rad; a stop that gave way would sink ``g dt^2`` a
    step), and the stop's joint torque ``lambda r / dt`` that of gravity, ``rnea(q, 0, 0)`` (to the
    solver's tolerance)."""
    model = sd.with_joint_stops(pendulum(20, 45, euler="0 0 0"))
    with sd.use_backend(backend, deterministic=True):
        traj = sd.rollout(model, [0.6], [0.0], [0.0], sd.Scene(model), DT, 1500)
    L = math.radians(20)
    assert abs(traj.q[-1, 0] - L) <= 1e-6 and traj.q[:, 0].min() >= L - 1e-6
    assert abs(traj.v[-1, 0]) <= 1e-6
    torque = traj.impulses[-1][0, 2] * 0.1 * math.cos(traj.q[-1, 0] - L) / DT
    assert torque == pytest.approx(sd.rnea(model, traj.q[-1], [0.0], [0.0])[0], rel=1e-6)


def test_a_slide_rests_on_its_lower_stop_carrying_its_weight(native_backend):
    """A 2 kg slider on a vertical slide falls 0.4 m onto its lower limit: it rests there, the stop's
    impulse over ``dt`` its weight ``m g``."""
    model = sd.with_joint_stops(sd.load_mjcf(SLIDE, geometry=True))
    traj = sd.rollout(model, np.zeros(1), np.zeros(1), np.zeros(1), sd.Scene(model), DT, 800)
    assert abs(traj.q[-1, 0] + 0.4) <= 1e-9 and traj.q[:, 0].min() >= -0.4 - 1e-9
    assert traj.impulses[-1][0, 2] / DT == pytest.approx(2.0 * G, rel=1e-6)


def test_a_stop_takes_a_spinning_arms_energy_and_adds_none(native_backend):
    """An arm on a vertical hinge (gravity does no work on it) thrown at 8 rad/s towards its upper limit
    of 45 degrees: its kinetic energy is constant in free flight, and the stop's impact is plastic and
    frictionless, so the arm stops dead at the limit (the step that reaches it closes the gap left,
    the next ones hold it), never past it, and no step adds energy (to rounding)."""
    model = sd.with_joint_stops(pendulum(-30, 45, axis="0 0 1", euler="0 0 0"))
    traj = sd.rollout(model, [0.0], [8.0], [0.0], sd.Scene(model), DT, 300)
    E = np.array([float(sd.mechanical_energy(model, q, v)) for q, v in zip(traj.q, traj.v)])
    assert np.diff(E).max() <= 1e-12 * E[0]
    U = math.radians(45)
    k = int(np.argmax(traj.v[:, 0] < 8.0 - 1e-9))          # the step the stop acted in: it lands at U
    assert 0 < k <= math.ceil(U / (8.0 * DT))
    assert np.abs(traj.q[k:, 0] - U).max() <= 1e-6 and np.abs(traj.v[k + 1:, 0]).max() <= 1e-6
    assert traj.q[:, 0].max() <= U + 1e-6


def test_the_swing_onto_a_limit_is_mujocos(native_backend):
    """The same pendulum in MuJoCo (Euler, no implicit damping: the step ours is) falling onto its
    lower limit: before the limit acts the two trajectories are one (to rounding over 300 steps); both
    rest at the limit, ours at it to the solver's tolerance, MuJoCo's within its soft constraint's
    give (the default ``solref`` lets a limit yield by about ``m g l / k``: here under 0.02 rad)."""
    import mujoco
    xml = PENDULUM.format(axis="0 1 0", lo=20, hi=45, euler="0 0 0")
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[0] = 0.6
    qs = [0.6]
    for _ in range(1500):
        mujoco.mj_step(m, d)
        qs.append(float(d.qpos[0]))
    qs = np.array(qs)
    model = sd.with_joint_stops(sd.load_mjcf(xml, geometry=True))
    traj = sd.rollout(model, [0.6], [0.0], [0.0], sd.Scene(model), DT, 1500)
    L = math.radians(20)
    free = int(np.argmax(qs < L + 0.05))                  # steps before either is within reach of the limit
    assert free > 100
    assert np.abs(traj.q[:free, 0] - qs[:free]).max() <= 1e-9
    assert abs(traj.q[-1, 0] - L) <= 1e-6 and abs(qs[-1] - L) <= 0.02


def test_the_derivatives_of_a_step_on_a_stop_equal_central_differences(native_backend):
    """The pendulum resting on its lower stop, pushed into it by a torque: the stop's impulse takes any
    small change of ``v`` or ``tau`` into the limit (``dv+/dv`` and ``dv+/dtau`` vanish), and the
    derivatives equal central differences of the step (the collision run again at every perturbed
    state; the stop stays in its mode)."""
    model = sd.with_joint_stops(pendulum(20, 45, euler="0 0 0"))
    scene = sd.Scene(model)
    L = math.radians(20)
    d = check_against_differences(model, np.array([L + 1e-5]), np.array([-0.2]), np.array([-1.0]), scene, 1e-6)
    assert abs(d.dv_dv[0, 0]) <= 1e-9 and abs(d.dv_dtau[0, 0]) <= 1e-9


def test_a_humanoid_pushed_over_keeps_its_hinges_in_their_ranges():
    """dm_control's humanoid read with a body per hinge (``composite_joints=False``), its 21 hinges
    stopped, pushed over onto the floor (its limp limbs swing at up to 50 rad/s): no hinge leaves its
    range by more than the step's linearisation leaves (a step holds ``sin(q - L)`` to first order in
    the step's turn ``dq``: the rest is below ``dq^2``) plus the solver's tolerance; without stops
    they leave it by radians."""
    import dm_control
    path = str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(path, geometry=True, composite_joints=False)
    stopped = sd.with_joint_stops(model)
    assert sum(g.name.endswith("/stop") for g in stopped.geometries) == 21
    q = model.neutral()
    q[2] = 1.4
    v = np.zeros(model.nv)
    v[0], v[4] = 2.0, 3.0                                  # forward and pitching
    hinges = slice(7, None)
    for m, held in ((stopped, True), (model, False)):
        traj = sd.rollout(m, q, v, np.zeros(model.nv), sd.Scene(m), 0.005, 60)
        Q = traj.q[:, hinges]
        past = np.maximum(model.lower[hinges] - Q, Q - model.upper[hinges])
        if held:
            assert (past[1:] <= np.diff(Q, axis=0) ** 2 + 1e-6).all()
            assert np.abs(traj.v[:, 6:]).max() > 20.0            # the bound is not empty: fast limbs
        else:
            assert past.max() > 0.5


def test_bad_stops_are_refused_naming_what_is_wrong():
    model = pendulum()
    with pytest.raises(ValueError, match="radius must be a finite number > 0"):
        sd.with_joint_stops(model, radius=0.0)
    with pytest.raises(ValueError, match="radius"):
        sd.with_joint_stops(model, radius=True)
    with pytest.raises(KeyError, match="has no joint 'hinges'; closest: hinge"):
        sd.with_joint_stops(model, joints=["hinges"])
    with pytest.raises(TypeError, match=r"with_joint_stops: joints: expected a joint name or a sequence .*got int"):
        sd.with_joint_stops(model, joints=3)
    with pytest.raises(ValueError, match="already has a geometry named 'hinge/stop'"):
        sd.with_joint_stops(sd.with_joint_stops(model))
    free = sd.load_mjcf("<mujoco><worldbody><body><freejoint name='root'/><geom type='sphere' size='0.1'/>"
                        "<body pos='0 0 -0.3'><joint name='spin' type='hinge'/><geom type='sphere' size='0.1'/>"
                        "</body></body></worldbody></mujoco>", geometry=True)
    with pytest.raises(ValueError, match="joint 'spin' \\(revolute\\) has no finite limit"):
        sd.with_joint_stops(free, joints="spin")
    with pytest.raises(ValueError, match="joint 'root' \\(free\\) has no finite limit"):
        sd.with_joint_stops(free, joints="root")
    turns = pendulum(-200, 200)
    with pytest.raises(ValueError, match="'hinge' cannot be stopped: its range, 6.98132 rad, is a full turn or more"):
        sd.with_joint_stops(turns, joints=["hinge"])
    with pytest.warns(UserWarning, match="limits of 1 joint.* not held; 'hinge': its range, 6.98132 rad, is a full"):
        assert len(sd.with_joint_stops(turns).geometries) == len(turns.geometries)
    assert len(sd.with_joint_stops(free).geometries) == len(free.geometries)       # nothing to stop


def test_the_limits_of_composite_joints_are_warned_of():
    model = sd.load_mjcf("<mujoco><worldbody><body><joint name='a' type='hinge' axis='1 0 0' range='-1 1' "
                         "limited='true'/><joint name='b' type='hinge' axis='0 1 0' range='-1 1' limited='true'/>"
                         "<geom type='sphere' size='0.1'/></body></worldbody></mujoco>", geometry=True)
    with pytest.warns(UserWarning, match="not held; 'a\\+b': it is a composite joint .*composite_joints=False"):
        assert len(sd.with_joint_stops(model).geometries) == len(model.geometries)


def test_a_batch_of_states_on_stops_is_its_single_steps(native_backend):
    """States of the pendulum about both its stops, as one batch call: each state's step is the one of
    its own call (the batch solves each state's own contacts)."""
    model = sd.with_joint_stops(pendulum(-30, 45))
    scene = sd.Scene(model)
    q = np.radians([[-30.0], [-29.9], [0.0], [44.95], [45.0]])
    v = np.array([[-1.0], [-3.0], [2.0], [4.0], [0.5]])
    batch = sd.contact_step(model, q, v, np.zeros((5, 1)), scene, DT)
    for k in range(5):
        one = sd.contact_step(model, q[k], v[k], np.zeros(1), scene, DT)
        assert np.array_equal(batch.v[k], one.v) and np.array_equal(batch.q[k], one.q)
    assert abs(batch.v[0, 0]) <= 1e-9 and abs(batch.v[4, 0]) <= 1e-9      # stopped at the limits it pushed into
