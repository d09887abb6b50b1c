"""Steps in a scene against MuJoCo on the same scene (the same MJCF file in both), on the default
(native) road.  MuJoCo's contact is soft (a constraint force regularised towards a spring-damper,
solref/solimp) and ours is exact (rigid, Coulomb's cone), so what is compared is what physics fixes,
each simulator against the analytic value and the two against each other, within bounds stated by
the test: the distance a box pushed along a plane slides, the speed of a sphere rolling on it, the
time a pushed humanoid takes to hit the floor with its head.
"""

import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import sparsedyn as sd
from sparsedyn.interop.mujoco import q_to_mujoco, v_to_mujoco

G = 9.81

SCENE_XML = """<mujoco><option timestep="{dt}" cone="elliptic"/>
<worldbody><geom name="floor" type="plane" size="0 0 1" friction="{mu}"/>
<body name="{name}" pos="0 0 {z}"><freejoint/>
<geom name="{name}" {shape} friction="{mu}"/></body>
</worldbody></mujoco>"""


def load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # the file's visual-only elements
        return sd.load_mjcf(path, geometry=True)


def test_a_box_pushed_along_a_plane_slides_v0_squared_over_two_mu_g(tmp_path):
    """A 2 kg box resting flat, pushed to ``v0`` = 1.5 m/s along x on a plane with ``mu`` = 0.4 (both
    shapes give 0.4; MuJoCo's elliptic cone, as ours): friction ``mu m g`` stops it after
    ``v0^2 / (2 mu g)`` (0.2867 m).

    Ours, by hand: each sliding step takes ``mu g dt`` off the speed and moves the box by ``dt`` times
    the new speed (semi-implicit Euler), so it slides ``dt sum_{k=1..N} (v0 - k mu g dt)``,
    ``N = floor(v0 / (mu g dt))``, which is ``v0^2 / (2 mu g) - v0 dt / 2 + O(mu g dt^2)``; it equals
    that sum to the solver's tolerance accumulated over the steps (``N tol v0 dt``).  Both
    simulators are within ``v0 dt`` of the analytic distance: the scheme's ``v0 dt / 2``, and as much
    again for MuJoCo's soft friction (its regularised friction force creeps to rest); so the two are
    within ``2 v0 dt`` of each other."""
    dt, mu, v0 = 1e-3, 0.4, 1.5
    xml = SCENE_XML.format(dt=dt, mu=mu, name="box", z=0.05, shape='type="box" size="0.1 0.1 0.05" mass="2"')
    path = tmp_path / "slide.xml"
    path.write_text(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for _ in range(200):                                 # settle into its soft contact
        mujoco.mj_step(m, d)
    x0 = d.qpos[0]
    d.qvel[0] = v0
    for _ in range(1000):                                # 1 s: stopped (v0 / (mu g) = 0.38 s)
        mujoco.mj_step(m, d)
    assert np.abs(d.qvel).max() <= 1e-4
    slide_mj = d.qpos[0] - x0

    model = load(path)
    scene = sd.Scene(model)
    assert dict(zip(scene.pairs, scene.pair_friction)) == {("box", "floor"): mu}
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(model, model.joint_dynamics.reference, [0, 0, 0, v0, 0, 0], np.zeros(6), scene, dt, 500)
    assert np.abs(r.v[-1]).max() <= 1e-6 and abs(r.q[-1][2] - 0.05) <= 1e-6
    slide = r.q[-1][0]
    N = int(np.floor(v0 / (mu * G * dt)))
    by_hand = dt * sum(v0 - k * mu * G * dt for k in range(1, N + 1))
    analytic = v0 ** 2 / (2 * mu * G)
    assert abs(slide - by_hand) <= N * 1e-8 * v0 * dt
    assert abs(slide - analytic) <= v0 * dt
    assert abs(slide_mj - analytic) <= v0 * dt
    assert abs(slide - slide_mj) <= 2 * v0 * dt


RADIUS, BALL_MASS, BALL_MU = 0.1, 1.5, 0.3


def test_a_sphere_rolling_on_a_plane_keeps_its_speed_as_mujoco_does(tmp_path):
    """A solid sphere rolling without slipping at 2 m/s (20 rad/s), 400 steps, the same MJCF in both:
    ours keeps its speed to the solver's tolerance accumulated over the steps (``steps tol v``);
    MuJoCo (its free joint's linear velocity is the world's) loses what its soft contact takes
    (rolling on a compliant contact: about 1e-3 of the speed), so the two differ by that loss."""
    speed, steps, dt, tol = 2.0, 400, 1e-3, 1e-8
    xml = SCENE_XML.format(dt=dt, mu=BALL_MU, name="ball", z=RADIUS,
                           shape=f'type="sphere" size="{RADIUS}" mass="{BALL_MASS}"')
    path = tmp_path / "ball.xml"
    path.write_text(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[:] = [speed, 0, 0, 0, speed / RADIUS, 0]                     # world linear, body angular
    for _ in range(steps):
        mujoco.mj_step(m, d)
    speed_mj = np.linalg.norm(d.qvel[:3])

    model = load(path)
    scene = sd.Scene(model)
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        r = sd.rollout(model, [0, 0, RADIUS, 0, 0, 0, 1], [0, speed / RADIUS, 0, speed, 0, 0], np.zeros(6), scene,
                       dt, steps, tol=tol)
    bound = steps * tol * speed
    ours = np.array([np.linalg.norm(Rotation.from_quat(q[3:]).apply(v[3:])) for q, v in zip(r.q, r.v)])
    assert np.abs(ours - speed).max() <= bound
    assert abs(ours[-1] - speed_mj) <= abs(speed - speed_mj) + bound
    assert abs(speed - speed_mj) <= 2e-3 * speed                     # MuJoCo holds it too, but for its softness


HEAD_RADIUS = 0.09                                   # humanoid.xml: the head's sphere


def _head_down_time(clearance, dt, threshold):
    """The time at the end of the first step after which the head is within ``threshold`` of the floor."""
    hit = np.flatnonzero(np.asarray(clearance) <= threshold)
    assert len(hit), "the head never reached the floor"
    return (hit[0] + 1) * dt


@pytest.mark.parametrize("passive", [False, True, "implicit"])
def test_a_pushed_humanoid_hits_the_floor_with_its_head_when_mujoco_does(passive):
    """dm_control's humanoid (its own file and floor in both), standing with its feet just above the
    floor, pushed forwards (1.2 m/s) and pitched (2 rad/s), falls: no joint torque, its joints' limits
    switched off in MuJoCo (ours enforces none); as a rag doll (MuJoCo's springs and dampers switched
    off too), or with the file's springs and dampers in both (``passive=True``; MuJoCo's damping then
    explicit, ``mjDSBL_EULERDAMP``, as ours; ``passive="implicit"``: MuJoCo's default Euler, whose
    constraint solve sees the mass matrix without ``dt D``), so both integrate the same multibody with
    the same armature, the same ``dt`` (the file's 5 ms, semi-implicit Euler in both), the same pairs, the same friction
    on the floor (the larger of the two geoms', MuJoCo's elliptic cone as ours; the file makes its
    parts frictionless on each other, ``condim`` 1, as ours does).  Its feet land first, then its
    hands and hips, then its head.  Measured: the time at which the head's sphere first comes
    within 5 mm of the floor (about 0.65 s limp, 0.57 s with its springs, explicit or implicit).

    Bound: until the feet touch (0.1 s) the fall is ballistic and the two integrate the same
    equations with the same scheme (ours takes the free joint's gyroscopic term backward: a change of
    order dt^2 a step); after it they differ by the contacts.  MuJoCo's contact is soft:
    its support force builds up over the contact's time constant (the file's ``solref``, 0.015 s),
    where ours stops a contact within one step, and it lets the parts that land first sink into the
    floor (its deepest contact before the head lands, ``depth``: the hands, about 3 cm), which lets
    the head come down that much lower, sooner by ``depth / speed`` at the head's speed then.  Each
    simulator sees the crossing at the end of a step (``dt`` each).  So the times agree within
    ``2 dt + 0.015 s + depth / speed`` (about 0.033 s, 5 % of the fall), ``depth`` and ``speed`` read
    from MuJoCo's run."""
    xml = str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml")
    m = mujoco.MjModel.from_xml_path(xml)
    m.jnt_limited[:] = 0
    if passive is True:
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    elif not passive:
        m.jnt_stiffness[:], m.dof_damping[:] = 0.0, 0.0
    m.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    dt, steps, threshold, timeconst = m.opt.timestep, 150, 0.005, 0.015
    assert dt == 0.005 and np.allclose(m.geom_solref[m.geom("head").id], [timeconst, 1.0])

    model = load(xml)
    q0 = np.zeros(model.nq)
    q0[2], q0[6] = 1.35, 1.0                                 # standing, upright (x y z w quaternion)
    v0 = np.zeros(model.nv)
    v0[1], v0[3] = 2.0, 1.2                                  # [omega; v] in the torso's axes
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q_to_mujoco(model, q0), v_to_mujoco(model, q0, v0)
    head = m.body("head").id
    clearance_mj, depth = [], 0.0
    for _ in range(steps):
        mujoco.mj_step(m, d)
        clearance_mj.append(d.xpos[head][2] - HEAD_RADIUS)
        if min(clearance_mj) > threshold:                      # before the head lands
            depth = max(depth, -min((c.dist for c in d.contact[:d.ncon]), default=0.0))
    t_mj = _head_down_time(clearance_mj, dt, threshold)
    k = int(round(t_mj / dt)) - 1
    speed = (clearance_mj[k - 1] - clearance_mj[k]) / dt                 # the head's falling speed then
    assert 0.0 < depth < 0.05 and speed > 0.5

    scene = sd.Scene(model)
    assert not len(sd.collide(scene, q0).pairs)                    # nothing touches at the start
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        r = sd.rollout(model, q0, v0, [0.0] * model.nv, scene, dt, steps, passive=passive)
    frame = model.frame("head")
    clearance = [sd.frame_placements(model, q)[1][frame][2] - HEAD_RADIUS for q in r.q[1:]]
    assert min(clearance) >= -scene.margin                         # ours does not sink into the floor
    t_ours = _head_down_time(clearance, dt, threshold)
    assert 0.4 < t_ours < steps * dt                                # it fell, and was not at once on the floor
    assert abs(t_ours - t_mj) <= 2 * dt + timeconst + depth / speed
