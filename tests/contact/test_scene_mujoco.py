"""Steps in a scene against MuJoCo on the same scene (the same MJCF file in both), on the default
(native) road.  MuJoCo's contact is soft (a constraint force regularised towards a spring-damper,
solref/solimp) and ours is exact (rigid, Coulomb's cone), so what is compared is what physics fixes,
each simulator against the analytic value and the two against each other, within bounds stated by
each test: the distance a box pushed along a plane slides, and the time a pushed humanoid takes to
hit the floor.
"""

import itertools
import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np

import sparsedyn as sd
from sparsedyn.contact.scene_step import scene_contacts, scene_slots

G = 9.81

SLIDE_XML = """<mujoco><option timestep="{dt}" cone="elliptic"/>
<worldbody><geom name="floor" type="plane" size="0 0 1" friction="{mu}"/>
<body name="box" pos="0 0 0.05"><freejoint/>
<geom name="box" type="box" size="0.1 0.1 0.05" mass="2" friction="{mu}"/></body>
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
    xml = SLIDE_XML.format(dt=dt, mu=mu)
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


HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"
WATCHED = ("head", "torso", "upper_waist")            # the shapes whose first touch of the floor is timed


def mujoco_as_ours(dt):
    """dm_control's humanoid in MuJoCo with what our step does not model taken out: no joint damping,
    springs or limits (ours applies none), Coulomb friction on every geom (its ``condim=1`` robot
    geoms are frictionless; ours take the pair's friction) on an elliptic cone; the time step ``dt``."""
    m = mujoco.MjModel.from_xml_path(str(HUMANOID))
    m.opt.timestep, m.opt.cone = dt, mujoco.mjtCone.mjCONE_ELLIPTIC
    m.dof_damping[:] = 0
    m.jnt_stiffness[:] = 0
    m.jnt_limited[:] = 0
    m.geom_condim[:] = 3
    return m


def mujoco_fall(m, q0, push, steps):
    """``(time, states)``: MuJoCo's time [s] to the first step that ends with a watched geom on (or in)
    the floor, and its states up to then as our ``q`` (nq,) (its quaternion is ``[w, x, y, z]``)."""
    d = mujoco.MjData(m)
    d.qpos[:] = np.r_[q0[:3], q0[6], q0[3:6], q0[7:]]
    d.qvel[0] = push                                     # world x; the torso's axes are the world's
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(m.ngeom)]
    floor, watched = names.index("floor"), {names.index(n) for n in WATCHED}
    states = []
    for k in range(steps):
        mujoco.mj_step(m, d)
        states.append(np.r_[d.qpos[:3], d.qpos[4:7], d.qpos[3], d.qpos[7:]])
        if any(floor in (c.geom1, c.geom2) and {c.geom1, c.geom2} & watched and c.dist <= 0
               for c in d.contact[:d.ncon]):
            return (k + 1) * m.opt.timestep, states
    return np.inf, states


def test_a_pushed_humanoid_hits_the_floor_when_mujocos_does():
    """dm_control's humanoid standing on the floor (its file's pose lowered until a foot touches),
    no torques (it collapses), pushed forwards at 1.5 m/s: the time its head or torso first touches
    the floor, ours and MuJoCo's (made to model what ours does, :func:`mujoco_as_ours`), steps of 2 ms.

    Bound: the fall takes about 0.65 s and is set by gravity and the joints; the contacts before it
    (feet, knees, hands) set where the body is when the head comes down, and there the contact model
    counts.  MuJoCo's own fall time moves with its contact's stiffness (solref time constant 0.02 s
    or 0.004 s), its slip (``noslip_iterations`` 0 or 50: the no-slip pass makes its friction rigid, as
    ours) and its step (2 or 1 ms); ours, rigid, is one more contact model, so it must fall within
    MuJoCo's range of fall times widened by that range's width on each side."""
    dt, push, steps = 2e-3, 1.5, 400
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(HUMANOID, geometry=True)
    scene = sd.Scene(model)
    far = sd.Scene(model, margin=2.0, self_collision=False)
    q0 = np.array(model.joint_dynamics.reference, float)
    q0[2] -= sd.collide(far, q0).distances.min()                  # standing
    times = []
    for step, stiff, noslip in itertools.product((dt, dt / 2), (False, True), (0, 50)):
        m = mujoco_as_ours(step)
        m.opt.noslip_iterations = noslip
        if stiff:
            m.geom_solref[:, 0] = 0.004
        t, states = mujoco_fall(m, q0, push, int(steps * dt / step))
        times.append(t)
        if step == dt and not stiff and not noslip:
            t_mj = t
            for q in states:            # lay out the step's slots for the contacts MuJoCo met (one build)
                scene_slots(scene, scene_contacts(scene, q))
    spread = max(times) - min(times)
    assert 0.5 <= t_mj <= 0.8 and spread <= 0.1
    v0 = np.zeros(model.nv)
    v0[3] = push
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        r = sd.rollout(model, q0, v0, np.zeros(model.nv), scene, dt, steps)
    t_ours = np.inf
    for k in range(1, steps + 1):
        hits = sd.collide(scene, r.q[k])
        if any(b == "floor" and a in WATCHED and d <= 0 for (a, b), d in zip(hits.pairs, hits.distances)):
            t_ours = k * dt
            break
    assert min(times) - spread <= t_ours <= max(times) + spread
