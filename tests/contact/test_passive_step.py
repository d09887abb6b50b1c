"""The joints' springs and dampers in the simulator's step (sparsedyn.contact.passive_step, ``passive=True``):
a chain's trajectory against MuJoCo's Euler integrator with its implicit damping off (the same
explicit forces: the same numbers to rounding), in a scene the native road against the NumPy road, a
rollout against the loop of its steps and against the same forces given by a controller, and the
step's derivatives against central differences.  With ``passive="implicit"``: the chain against
MuJoCo's default Euler (its dampers implicit), a hinge damped far past the explicit step's stability
against its hand-derived decay, in a scene the step of a model whose armature holds ``dt D`` written by
hand, and the derivatives against central differences."""

import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from sparsedyn.contact.passive_step import vector_springs
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco
from test_friction_derivatives import DT as STEP, TOL, check_against_differences

#: A ball, a slide and a hinge in a chain, each with a spring and a damper, rotor inertia on the ball.
CHAIN = """<mujoco><option timestep="0.002"/><worldbody>
<body name="a" pos="0 0 1"><joint name="ball" type="ball" damping="0.4" stiffness="3" armature="0.02"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
<body name="b" pos="0.3 0 0"><joint name="s1" type="slide" axis="1 0 0" damping="0.5" stiffness="20" springref="0.05"/>
<geom type="box" size="0.05 0.05 0.05" mass="0.5"/>
<body name="c" pos="0.1 0 0"><joint name="h2" type="hinge" axis="0 0 1" damping="0.1" stiffness="2" springref="10"/>
<geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02" mass="0.3"/></body></body></body></worldbody></mujoco>"""

#: An arm on two hinges (one composite joint) with springs and dampers, its hand a sphere just above
#: the floor, swinging onto it.
ARM = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 .1"/>
<body name="arm" pos="0 0 {pivot!r}"><joint name="ax" type="hinge" axis="1 0 0" damping="2" stiffness="30"/>
<joint name="ay" type="hinge" axis="0 1 0" damping="1" stiffness="10" springref="5"/>
<geom name="hand" type="sphere" size="0.1" pos="0 0 -0.4" mass="2"/></body></worldbody></mujoco>"""

DT = 0.002


def _chain(tmp_path):
    path = tmp_path / "chain.xml"
    path.write_text(CHAIN)
    return mujoco.MjModel.from_xml_path(str(path)), sd.load_mjcf(str(path))


def _arm(tmp_path):
    """The arm's model, its scene (the file's floor), a state whose hand is 10 um above the floor and
    swinging down and sideways (it touches and slides in the step)."""
    a, b = 0.2, -0.1
    path = tmp_path / "arm.xml"
    path.write_text(ARM.format(pivot=float(0.1 + 1e-5 + 0.4 * np.cos(a) * np.cos(b))))
    model = sd.load_mjcf(str(path), geometry=True)
    return model, sd.Scene(model), np.array([a, b]), np.array([-0.5, 0.3])


@pytest.mark.parametrize("passive", [True, "implicit"])
def test_a_chain_follows_mujocos_euler_steps(tmp_path, passive):
    """300 steps of the chain from a random velocity, no contact: ours with ``passive=True`` and MuJoCo's
    ``mj_step`` (Euler, ``mjDSBL_EULERDAMP``: the dampers taken at the step's start, as ours), or ours with
    ``passive="implicit"`` and MuJoCo's default Euler (the dampers implicit: ``M + dt D``), give the
    same states.  Both compute the same products in different orders; a damped chain does not amplify
    the rounding of one step, so 300 steps stay within 1e-10 of the velocities' size.  The rollout is
    the loop of its steps, plain lists taken."""
    m, model = _chain(tmp_path)
    off = mujoco.mjtDisableBit
    m.opt.disableflags |= int(off.mjDSBL_EULERDAMP | off.mjDSBL_CONTACT) if passive is True else int(off.mjDSBL_CONTACT)
    d = mujoco.MjData(m)
    d.qvel[:] = np.random.default_rng(3).standard_normal(m.nv)
    q, v = q_from_mujoco(model, d.qpos), v_from_mujoco(model, d.qpos, d.qvel)
    q0, v0, tau = q.copy(), v.copy(), np.zeros(model.nv)
    for _ in range(300):
        mujoco.mj_step(m, d)
        s = sd.contact_step(model, q, v, tau, [], DT, passive=passive)
        q, v = s.q, s.v
    assert np.abs(v).max() > 0.1                              # (still moving: the springs swing it)
    assert rel_err(q, q_from_mujoco(model, d.qpos)) <= 1e-10
    assert rel_err(v, v_from_mujoco(model, d.qpos, d.qvel)) <= 1e-10
    # without its springs and dampers the chain goes elsewhere, and the explicit dampers elsewhere than
    # the implicit ones: the comparison sees them
    other = sd.rollout(model, q0, v0, tau, [], DT, 300, passive=False if passive is True else True)
    assert np.abs(other.q[-1] - q).max() > (1e-2 if passive is True else 1e-4)
    r = sd.rollout(model, q0.tolist(), v0.tolist(), [0.0] * model.nv, [], DT, 300, passive=passive)
    assert np.array_equal(r.q[-1], q) and np.array_equal(r.v[-1], v)


def test_in_a_scene_the_native_road_equals_the_numpy_road_and_the_rollout_its_steps(tmp_path):
    """The arm swinging onto the floor with its springs: one step on the default road equals the NumPy
    road's to the solver's tolerance; a rollout (its steps in one native call, which adds the springs'
    and dampers' forces itself) equals the same forces given as a controller (each step's on its own:
    computed alike, so equal bit for bit) and differs from the one without them."""
    model, scene, q, v = _arm(tmp_path)
    tau = np.zeros(model.nv)
    s = sd.contact_step(model, q, v, tau, scene, DT, passive=True)
    with sd.use_backend("numpy"):
        ref = sd.contact_step(model, q, v, tau, scene, DT, passive=True)
    assert len(s.impulses) == 1 and s.impulses[0][2] > 0.0              # the hand touches
    assert rel_err(s.v, ref.v) <= 1e-7 and rel_err(s.q, ref.q) <= 1e-9
    plain = sd.contact_step(model, q, v, tau, scene, DT)
    assert np.abs(s.v - plain.v).max() > 1e-4                            # (the springs act)
    # a batch of states (one call) equals its states stepped one by one, each with its own springs
    Q, V = np.array([q, q + [0.01, -0.02], q + [0.2, 0.1]]), np.array([v, -v, 2 * v])
    batch = sd.contact_step(model, Q, V, tau, scene, DT, passive=True)
    for b in range(3):
        one = sd.contact_step(model, Q[b], V[b], tau, scene, DT, passive=True)
        assert rel_err(batch.v[b], one.v) <= 1e-7 and rel_err(batch.q[b], one.q) <= 1e-9
    assert vector_springs(model) is not None           # (the rollout's steps: one native call, springs in it)
    r = sd.rollout(model, q, v, tau, scene, DT, 50, passive=True)
    jd = model.joint_dynamics
    controller = lambda t, q, v: -jd.damping * v - jd.stiffness * sd.difference(model, jd.spring_reference, q)  # noqa
    c = sd.rollout(model, q, v, controller, scene, DT, 50)
    assert np.array_equal(r.q, c.q) and np.array_equal(r.v, c.v)
    assert np.abs(r.v - sd.rollout(model, q, v, tau, scene, DT, 50).v).max() > 1e-4


def test_the_derivatives_include_the_springs_and_dampers(tmp_path):
    """The step's derivatives with ``passive=True`` equal central differences of the step with it (the
    hand sliding on the floor: the springs' stiffness enters d/dq, the dampers' d/dv; the differences'
    own step, ``STEP``)."""
    model, scene, q, v = _arm(tmp_path)
    tau = np.zeros(model.nv)
    d = check_against_differences(model, q, v, tau, scene, 1e-6, passive=True)
    plain = sd.contact_step_derivatives(model, q, v, tau, scene, STEP, tol=TOL)
    assert np.abs(d.dv_dq - plain.dv_dq).max() > 1e-3 and np.abs(d.dv_dv - plain.dv_dv).max() > 1e-4
    step = sd.contact_step(model, q, v, tau, scene, STEP, tol=TOL, passive=True)
    assert np.array_equal(d.step.v, step.v)
    # a chain in the air: no contact, the same on point contacts' road (an empty list)
    _, chain = _chain(tmp_path)
    rng = np.random.default_rng(2)
    check_against_differences(chain, chain.random_configuration(rng), rng.standard_normal(chain.nv),
                              np.zeros(chain.nv), [], 1e-6, passive=True)


def test_passive_must_be_true_false_or_implicit(tmp_path):
    model, scene, q, v = _arm(tmp_path)
    for call in (lambda: sd.contact_step(model, q, v, np.zeros(2), scene, DT, passive="yes"),
                 lambda: sd.rollout(model, q, v, np.zeros(2), scene, DT, 2, passive=1),
                 lambda: sd.contact_step_derivatives(model, q, v, np.zeros(2), scene, DT, passive=None),
                 lambda: sd.contact_step(model, q, v, np.zeros(2), scene, DT, passive="Implicit")):
        with pytest.raises(TypeError, match="passive must be True or False .* or 'implicit'"):
            call()
    with pytest.raises(ValueError, match="contact_step: dt must be a finite number > 0, got -0.1"):
        sd.contact_step(model, q, v, np.zeros(2), scene, -0.1, passive="implicit")
    other = sd.load_mjcf(str(tmp_path / "arm.xml"), geometry=True)      # (the same file: another model)
    with pytest.raises(ValueError, match="the scene was built on model .*another object.*pass scene.model"):
        sd.contact_step(other, q, v, np.zeros(2), scene, DT, passive="implicit")


def test_the_springs_of_vector_joints_are_the_native_rollouts(tmp_path):
    """``vector_springs``: the dampers and the sprung dofs of hinges and slides (a composite of them too), as
    indices into ``q`` and ``v``; None where a ball's or a free joint's spring needs its rotation (that
    rollout's steps then add the forces one by one)."""
    model, _, _, _ = _arm(tmp_path)
    D, iq, iv, K, qs = vector_springs(model)
    assert np.array_equal(D, [2.0, 1.0]) and np.array_equal(iq, [0, 1]) and np.array_equal(iv, [0, 1])
    assert np.array_equal(K, [30.0, 10.0]) and np.allclose(qs, [0.0, np.radians(5.0)], rtol=1e-15, atol=0.0)
    _, chain = _chain(tmp_path)
    assert vector_springs(chain) is None                                 # its ball joint's spring


# --- implicit damping -------------------------------------------------------------------------------

#: A hinge carrying a 1 kg point 0.5 m from its axis (a sphere of radius 0.01), no gravity, damped 100 times
#: past what the explicit step takes: ``dt d / I = 8`` at ``dt = DT``.
HINGE = """<mujoco><option gravity="0 0 0"/><worldbody><body name="arm">
<joint name="h" type="hinge" axis="0 0 1" damping="{damping!r}"/>
<geom type="sphere" size="0.01" pos="0.5 0 0" mass="1"/></body></worldbody></mujoco>"""


def test_a_hinge_damped_past_the_explicit_steps_limit_decays(tmp_path):
    """The hinge's inertia is ``I = m l^2 + 2/5 m r^2``; with ``k = dt d / I = 8`` the explicit step multiplies
    its speed by ``1 - k = -7`` (it grows), the implicit one by ``1 / (1 + k) = 1/9`` (MuJoCo's default)."""
    inertia = 0.5 ** 2 + 0.4 * 0.01 ** 2
    damping = 8 * inertia / DT
    path = tmp_path / "hinge.xml"
    path.write_text(HINGE.format(damping=damping))
    model = sd.load_mjcf(str(path))
    q, v, tau = np.zeros(1), np.array([1.0]), np.zeros(1)
    implicit = sd.rollout(model, q, v, tau, [], DT, 5, passive="implicit")
    assert rel_err(implicit.v[1:, 0], (1 / 9) ** np.arange(1, 6)) <= 1e-12
    explicit = sd.rollout(model, q, v, tau, [], DT, 5, passive=True)
    assert rel_err(explicit.v[1:, 0], (-7.0) ** np.arange(1, 6)) <= 1e-12


def test_in_a_scene_the_implicit_step_is_the_step_with_dt_d_in_the_armature(tmp_path):
    """The arm swinging onto the floor: ``passive="implicit"`` is the explicit step of the model whose
    armature holds ``dt D`` (written here by hand, on a scene of its own), for one state, a batch and a
    rollout (its steps in one native call against the loop of single steps); it differs from the
    explicit step; its derivatives equal central differences."""
    model, scene, q, v = _arm(tmp_path)
    tau = np.zeros(model.nv)
    jd = model.joint_dynamics
    by_hand = model.with_armature(model.armature + DT * jd.damping)
    hand_scene = sd.Scene(by_hand)
    s = sd.contact_step(model, q, v, tau, scene, DT, passive="implicit")
    ref = sd.contact_step(by_hand, q, v, tau, hand_scene, DT, passive=True)
    assert len(s.impulses) == 1 and s.impulses[0][2] > 0.0
    assert rel_err(s.v, ref.v) <= 1e-7 and rel_err(s.q, ref.q) <= 1e-9
    assert np.abs(s.v - sd.contact_step(model, q, v, tau, scene, DT, passive=True).v).max() > 1e-5
    Q, V = np.array([q, q + [0.01, -0.02], q + [0.2, 0.1]]), np.array([v, -v, 2 * v])
    batch = sd.contact_step(model, Q, V, tau, scene, DT, passive="implicit")
    for b in range(3):
        one = sd.contact_step(by_hand, Q[b], V[b], tau, hand_scene, DT, passive=True)
        assert rel_err(batch.v[b], one.v) <= 1e-7 and rel_err(batch.q[b], one.q) <= 1e-9
    r = sd.rollout(model, q, v, tau, scene, DT, 50, passive="implicit")
    x, y = q, v
    for k in range(50):
        step = sd.contact_step(by_hand, x, y, tau, hand_scene, DT, passive=True)
        x, y = step.q, step.v
    assert rel_err(r.v[-1], y) <= 1e-6 and rel_err(r.q[-1], x) <= 1e-8
    d = check_against_differences(model, q, v, tau, scene, 1e-6, passive="implicit")
    explicit = sd.contact_step_derivatives(model, q, v, tau, scene, STEP, tol=TOL, passive=True)
    assert np.abs(d.dv_dv - explicit.dv_dv).max() > 1e-4
