"""The physics of steps in a scene (sparsedyn.contact.scene_step), on the default (native) road: boxes
dropped on a fixed box and on each other, a sphere rolling on a plane, the energy of boxes landing
and of a box spinning in the air, a fast box against the floor.

Bounds, from the solver's stopping test (sparsedyn.contact.friction: each contact's velocity within
``tol`` times the velocity scale, the largest free contact velocity) and the step's position
correction (penetrations below ``PENETRATION_SLOP`` are left as they are, deeper ones are moved
back onto the surface):

* at rest the velocity scale is what gravity adds in a step, ``g dt``; a body's velocity is its
  contacts' over the lever arms (half edges of 5 cm or more: x20), summed over the boxes below it
  (x2): ``V_REST = 100 tol g dt`` bounds every velocity of a body at rest (m/s, rad/s);
* weight carried: a body at rest gains ``m (v+_z - v_z)`` in a step from gravity and the contacts
  (Newton), so its normal impulses sum to ``m g dt`` within ``2 m V_REST``;
* penetration at rest: below the slop, plus what one step's residual velocity closes,
  ``PENETRATION_SLOP + dt V_REST``; while moving, also the second-order motion of a point that the
  linearised step does not see, ``dt^2 (|w|^2 rho + |w| |v|) / 2`` (a point at distance ``rho`` from a
  body turning at ``w`` and moving at ``v``), which the next step's correction removes.
"""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact.friction_problem import PENETRATION_SLOP
from sparsedyn.model.spatial import Transform

G, DT, TOL = 9.81, 1e-3, 1e-8
V_REST = 100 * TOL * G * DT
FLOOR = sd.Shape("plane", name="floor")


def boxes_model(sizes, masses):
    """Free boxes (full edge lengths ``sizes``, uniform masses), each with a frame and a box shape."""
    b = sd.ModelBuilder("boxes")
    for k, (s, m) in enumerate(zip(sizes, masses)):
        x, y, z = np.square(s)
        b.add_body(f"box{k}", None, sd.make_joint("free"), mass=m, rot_inertia=m / 12 * np.diag([y + z, x + z, x + y]))
        b.add_frame(f"box{k}", f"box{k}")
    geoms = [sd.Geometry(f"box{k}", k, Transform(np.eye(3), np.zeros(3)), "box", tuple(s), "collision")
             for k, s in enumerate(sizes)]
    return b.build().with_geometry(*geoms)


def turned(axis, angle):
    """The quaternion ``[x, y, z, w]`` of a turn by ``angle`` about ``axis``."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.r_[np.sin(angle / 2) * axis, np.cos(angle / 2)]


def native_rollout(scene, q0, v0, steps, rest=None):
    """``sd.rollout`` on the native road; ``rest``: a state whose step lays out the slots first (so the
    rollout builds one step: its contacts come and go within them)."""
    nv = scene.model.nv
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        # ADMM may stop a few iterations short of tol at an impact (the warning gives its residuals);
        # what the rollout must reach is asserted by each test
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        if rest is not None:
            sd.contact_step(scene.model, rest, np.zeros(nv), np.zeros(nv), scene, DT)
        return sd.rollout(scene.model, q0, v0, np.zeros(nv), scene, DT, steps)


def normal_sums(scene, q, impulses):
    """``{pair: sum of the normal impulses}`` of the step from ``q`` (its contacts are collide's hits
    at ``q``, in order)."""
    hits = sd.collide(scene, q)
    assert len(hits.pairs) == len(impulses)
    out = {}
    for pair, imp in zip(hits.pairs, impulses):
        out[pair] = out.get(pair, 0.0) + imp[2]
    return out


def penetration_bound(r, rho):
    """The deepest penetration a rollout ``r`` may leave (module docstring)."""
    V = np.reshape(r.v, (-1, 6))                          # every free body's [w; v] of every step
    w, u = np.linalg.norm(V[:, :3], axis=1).max(), np.linalg.norm(V[:, 3:], axis=1).max()
    return PENETRATION_SLOP + DT * V_REST + DT ** 2 * (w * w * rho + w * u) / 2


def deepest(scene, qs):
    return min(min(sd.collide(scene, q).distances.min(initial=0.0), 0.0) for q in qs)


# --- boxes on boxes ---------------------------------------------------------------------------------

TOP = (0.2, 0.15, 0.1)                                   # the dropped box: 2 kg
BASE = sd.Shape("box", (0.3, 0.3, 0.2), placement=(np.eye(3), [0, 0, 0.1]), name="base")


@pytest.fixture(scope="module")
def on_fixed_box():
    """A 2 kg box dropped tilted (0.4 rad) from 15 cm above a fixed box (a world shape 20 cm high), 500 steps."""
    model = boxes_model([TOP], [2.0])
    scene = sd.Scene(model, world=[FLOOR, BASE], friction=0.6)
    q0 = np.r_[0.02, -0.01, 0.2 + 0.15, turned([1, 2, 0.5], 0.4)]
    return scene, native_rollout(scene, q0, np.zeros(6), 500, rest=[0, 0, 0.25, 0, 0, 0, 1])


def test_a_box_dropped_on_a_fixed_box_comes_to_rest_on_it_carrying_its_weight(on_fixed_box):
    """The box lands on a corner, tumbles onto its large face and rests on the fixed box: still, at
    z = 0.25, no deeper than the rest bound, its normal impulses on the fixed box sum to ``m g dt``."""
    scene, r = on_fixed_box
    assert {len(x) for x in r.impulses} >= {0, 4}                          # flight, then the face
    assert np.abs(r.v[-100:]).max() <= V_REST                              # at rest for the last 0.1 s
    assert abs(r.q[-1][2] - 0.25) <= PENETRATION_SLOP + DT * V_REST        # on its large face
    sums = normal_sums(scene, r.q[-2], r.impulses[-1])
    assert set(sums) == {("box0", "base")}
    assert abs(sums[("box0", "base")] - 2.0 * G * DT) <= 2 * 2.0 * V_REST
    assert deepest(scene, r.q[-100:]) >= -(PENETRATION_SLOP + DT * V_REST)
    assert deepest(scene, r.q) >= -penetration_bound(r, np.linalg.norm(TOP) / 2)


@pytest.fixture(scope="module")
def stack():
    """A 1 kg box dropped tilted (0.3 rad) from 8 cm onto a free 3 kg box lying on the floor, 500 steps."""
    model = boxes_model([(0.3, 0.3, 0.1), TOP], [3.0, 1.0])
    scene = sd.Scene(model, world=[FLOOR], friction=0.6)
    q0 = np.r_[0, 0, 0.05, 0, 0, 0, 1, 0.02, -0.01, 0.15 + 0.08, turned([1, 2, 0.5], 0.3)]
    rest = [0, 0, 0.05, 0, 0, 0, 1, 0, 0, 0.15, 0, 0, 0, 1]
    return scene, native_rollout(scene, q0, np.zeros(12), 500, rest=rest)


def test_a_stack_of_two_free_boxes_rests_each_carrying_what_lies_on_it(stack):
    """The two come to rest stacked; the contacts between them (a self-collision pair: two free
    bodies) carry the upper box's weight and the floor carries both."""
    scene, r = stack
    assert set(scene.pairs) == {("box0", "box1"), ("box0", "floor"), ("box1", "floor")}
    assert np.abs(r.v[-100:]).max() <= V_REST
    assert abs(r.q[-1][2] - 0.05) <= PENETRATION_SLOP + DT * V_REST
    assert abs(r.q[-1][9] - 0.15) <= 2 * (PENETRATION_SLOP + DT * V_REST)
    sums = normal_sums(scene, r.q[-2], r.impulses[-1])
    assert set(sums) == {("box0", "box1"), ("box0", "floor")}
    assert abs(sums[("box0", "box1")] - 1.0 * G * DT) <= 2 * 1.0 * V_REST
    assert abs(sums[("box0", "floor")] - 4.0 * G * DT) <= 2 * 4.0 * V_REST
    assert deepest(scene, r.q[-100:]) >= -(PENETRATION_SLOP + DT * V_REST)
    assert deepest(scene, r.q) >= -penetration_bound(r, np.linalg.norm((0.3, 0.3, 0.1)) / 2)


# --- a sphere on a plane ----------------------------------------------------------------------------

RADIUS, BALL_MASS, BALL_MU = 0.1, 1.5, 0.3


def ball_scene():
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=BALL_MASS,
                                         rot_inertia=0.4 * BALL_MASS * RADIUS ** 2 * np.eye(3))   # solid sphere
    model = b.add_frame("ball", "ball").build().with_geometry(
        sd.Geometry("ball", 0, Transform(np.eye(3), np.zeros(3)), "sphere", (RADIUS,), "collision"))
    return sd.Scene(model, world=[FLOOR], friction=BALL_MU)


def world_velocity(model, q, v):
    """``(w, c)`` world (3,), (3,): the ball's angular velocity and its centre's velocity, from
    ``v = [w; v]`` in the body frame (the free joint's convention)."""
    R = sd.frame_placements(model, q)[0][0]
    return R @ v[:3], R @ v[3:]


def test_a_sphere_rolling_on_a_plane_keeps_its_rolling_speed():
    """A solid sphere rolling without slipping (``v = w r``, 2 m/s): nothing dissipates (no rolling
    friction, the contact point at rest), so over 400 steps its centre keeps its speed and the contact
    point stays at rest (the stick mode), each to the solver's tolerance: its velocity scale is the
    speed, and the error may add up over the steps (``steps tol v``)."""
    scene = ball_scene()
    speed, steps = 2.0, 400
    r = native_rollout(scene, [0, 0, RADIUS, 0, 0, 0, 1], [0, speed / RADIUS, 0, speed, 0, 0], steps)
    bound = steps * TOL * speed
    for q, v in zip(r.q, r.v):
        w, c = world_velocity(scene.model, q, v)
        assert abs(np.linalg.norm(c) - speed) <= bound
        assert np.linalg.norm(c + np.cross(w, [0, 0, -RADIUS])) <= bound        # the contact point at rest
    assert all(list(m) == ["stick"] for m in r.modes[1:])


# --- energy -----------------------------------------------------------------------------------------

def energy(model, q, v):
    """Kinetic + potential energy [J] (:func:`sparsedyn.mechanical_energy`, the rotors' armature included
    as in the step's mass matrix)."""
    return float(sd.mechanical_energy(model, q, v))


def energy_gain_bound(model, r, scene):
    """The most a step of ``r`` may add (J).  Exact Coulomb friction only dissipates: the contact
    impulses' work in a step, ``lambda . u+ - lambda^T G lambda / 2``, is at most ``lambda . u+``,
    which Coulomb's law makes ``-lambda_n gap / dt <= 0``; the solver leaves it within its
    complementarity residual, ``tol`` times the impulse scale (``M v``) and the velocity scale
    (``v``) per contact (``v`` the largest speed of the rollout, ``M`` the total mass).  The position
    correction lifts a body out of a penetration, returning at most ``M g`` times its depth.  Free
    flight (semi-implicit Euler) loses ``M g^2 dt^2 / 2`` a step."""
    M = float(np.asarray(model.inertia)[:, 5, 5].sum())               # the spatial inertias' mass entries
    speed = max(np.abs(v).max() for v in r.v)
    nc = max(len(x) for x in r.impulses)
    return nc * TOL * (M * speed) * speed + M * G * -deepest(scene, r.q)


def test_no_step_adds_energy_as_a_box_tumbles_onto_a_box(on_fixed_box):
    """The tilted box of the first test, dropped on the fixed box: its corner hits, it tumbles and
    settles; kinetic + potential energy never grows by more than :func:`energy_gain_bound` in a step,
    and the impacts dissipate (the landing is inelastic)."""
    scene, r = on_fixed_box
    E = np.array([energy(scene.model, q, v) for q, v in zip(r.q, r.v)])
    assert np.diff(E).max() <= energy_gain_bound(scene.model, r, scene)
    assert E[-1] < E[0] - 0.5 * 2.0 * G * 0.01                          # it fell more than 1 cm: lost energy


def test_no_step_adds_energy_as_two_boxes_land_on_each_other(stack):
    scene, r = stack
    E = np.array([energy(scene.model, q, v) for q, v in zip(r.q, r.v)])
    assert np.diff(E).max() <= energy_gain_bound(scene.model, r, scene)


def test_no_step_adds_energy_to_a_box_spinning_in_the_air():
    """A box thrown spinning (``w = (3, 5, 7)`` rad/s about no principal axis) in free flight: no
    contact, no torque.  The step holds the box's linear velocity in the world (its centre is the
    free joint's origin), so translation and height change as semi-implicit Euler's free fall,
    ``-M g^2 dt^2 / 2`` a step, and takes the gyroscopic term backward, which never adds rotational
    energy (sparsedyn.contact.transport): each step loses at least ``M g^2 dt^2 / 2``, up to rounding
    of the energy (``rounding_bound(6) E``)."""
    model = boxes_model([(0.3, 0.2, 0.1)], [2.0])
    scene = sd.Scene(model, world=[FLOOR], friction=0.6)
    r = native_rollout(scene, np.r_[0, 0, 1.0, turned([1, 2, 0.5], 0.7)], [3.0, 5.0, 7.0, 0.5, -0.3, 0.0], 200)
    assert all(len(x) == 0 for x in r.impulses)
    E = np.array([energy(model, q, v) for q, v in zip(r.q, r.v)])
    assert np.diff(E).max() <= -0.5 * 2.0 * G ** 2 * DT ** 2 + rounding_bound(6) * np.abs(E).max()


# --- penetration of a fast body ---------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")    # the landing's last iterations
@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_a_fast_box_never_penetrates_the_floor_more_than_the_margin(backend):
    """A box falling flat at 7.85 m/s (a 3.15 m drop), 6 mm above the floor (beyond the 5 mm margin),
    with a step of 2 ms (15.7 mm of travel): the step after must leave it on the floor, no deeper than
    the margin (the step looks ahead by dt times the box's speed), on both roads."""
    model = boxes_model([TOP], [2.0])
    scene = sd.Scene(model, world=[FLOOR], friction=0.6)
    dt, speed, gap = 2e-3, 7.85, 0.006
    assert gap > scene.margin and speed * dt > gap + scene.margin
    q = [0, 0, TOP[2] / 2 + gap, 0, 0, 0, 1]
    with sd.use_backend(backend, deterministic=True):
        r = sd.rollout(model, q, [0, 0, 0, 0, 0, -speed], np.zeros(6), scene, dt, 3)
    assert deepest(scene, r.q) >= -scene.margin


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_a_fast_spinning_bar_never_penetrates_the_floor_more_than_the_margin(backend):
    """A 1 m bar lying 6 mm above the floor, its centre still, spinning at 20 rad/s about its
    horizontal normal: one end falls at 10 m/s (20 mm in a 2 ms step), which only the angular part
    of the look-ahead (``|omega| rho``) sees; the steps leave it no deeper than the margin plus the
    second-order motion a linearised step leaves (``dt^2 |w|^2 rho / 2`` = 0.4 mm)."""
    bar = (0.02, 1.0, 0.02)
    model = boxes_model([bar], [1.0])
    scene = sd.Scene(model, world=[FLOOR], friction=0.6)
    dt, w, gap = 2e-3, 20.0, 0.006
    rho = np.linalg.norm(bar) / 2
    assert w * bar[1] / 2 * dt > gap + scene.margin
    q = [0, 0, bar[2] / 2 + gap, 0, 0, 0, 1]
    with sd.use_backend(backend, deterministic=True):
        r = sd.rollout(model, q, [w, 0, 0, 0, 0, 0], np.zeros(6), scene, dt, 3)
    assert deepest(scene, r.q) >= -(scene.margin + dt ** 2 * w ** 2 * rho / 2)




@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")    # the landings' last iterations
def test_a_humanoid_dropped_on_stairs_never_penetrates_more_than_the_margin():
    """dm_control's humanoid, limp, lying tilted (pitched 80 degrees, rolled 20) 0.95 m above the
    floor over three stairs and thrown down at 2.5 m/s: it lands on the stairs and the floor with its
    hands, arms, torso and legs, its torso falling more than the margin in a step (so only the step's
    look-ahead keeps the landing parts out), and its parts on each other.  On the default (native)
    road, no shape of it is ever deeper than the scene's margin in a floor, a stair or another part."""
    from scipy.spatial.transform import Rotation

    from tests.conftest import dm_control_humanoid
    from tests.contact.test_data_slots import _stairs
    model = dm_control_humanoid()
    scene = sd.Scene(model, world=_stairs())
    q0 = np.zeros(model.nq)
    q0[:3] = (0.9, 0.0, 0.95)
    q0[3:7] = Rotation.from_euler("yx", [80, 20], degrees=True).as_quat()          # x y z w
    v0 = np.zeros(model.nv)
    v0[:3] = (0.5, 1.0, 0.0)                                                   # [omega; v], torso axes
    v0[3:6] = Rotation.from_quat(q0[3:7]).inv().apply([0.0, 0.0, -2.5])
    assert not len(sd.collide(scene, q0).pairs)                               # in the air at the start
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(model, q0, v0, [0.0] * model.nv, scene, 0.005, 100)
    assert np.diff(r.q[:, 2]).min() < -scene.margin                           # faster than margin / dt
    hits = [sd.collide(scene, q) for q in r.q]
    touched = {b for h in hits for a, b in h.pairs}
    assert {"floor", "stair0", "stair1", "stair2"} < touched                  # and parts of itself
    assert min(h.distances.min(initial=0.0) for h in hits) >= -scene.margin

# --- a stack of three boxes ---------------------------------------------------------------------------

CUBE, CUBE_MASS = 0.2, 1.0


def test_three_stacked_boxes_settle_with_every_step_solved_each_level_carrying_what_lies_above():
    """Three 1 kg cubes (20 cm) dropped from 2 mm above each other, each shifted by 3 cm from the one below,
    their side faces coplanar (the tutorial's stack, ``dt = 2 ms``, ``tol = 1e-6``): no step stops at the
    iteration cap (the warning is an error here), they come to rest on each other (each level's height within
    the rest bounds of the levels below), the floor carries ``3 m g``, the lowest box ``2 m g``, the middle
    one ``m g`` (within the rest bound of the weight carried), and no step adds energy."""
    dt, tol = 2e-3, 1e-6
    v_rest = 100 * tol * G * dt
    model = boxes_model([(CUBE,) * 3] * 3, [CUBE_MASS] * 3)
    scene = sd.Scene(model, world=[FLOOR], friction=0.6)
    q0 = np.concatenate([np.r_[0.03 * k, 0.0, CUBE / 2 + k * CUBE + 0.002 * (k + 1), 0.0, 0.0, 0.0, 1.0]
                         for k in range(3)])
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("error", sd.ContactStepWarning)
        r = sd.rollout(model, list(q0), [0.0] * 18, [0.0] * 18, scene, dt, 150, tol=tol)
    assert np.abs(r.v[-20:]).max() <= 3 * v_rest
    heights = r.q[-1][2::7]
    for k in range(3):
        assert abs(heights[k] - (CUBE / 2 + k * CUBE)) <= (k + 1) * (PENETRATION_SLOP + dt * 3 * v_rest)
    sums = normal_sums(scene, r.q[-2], r.impulses[-1])
    assert set(sums) == {("box0", "floor"), ("box0", "box1"), ("box1", "box2")}
    for pair, load in ((("box0", "floor"), 3), (("box0", "box1"), 2), (("box1", "box2"), 1)):
        assert abs(sums[pair] - load * CUBE_MASS * G * dt) <= 2 * load * CUBE_MASS * 3 * v_rest
    E = np.array([energy(model, q, v) for q, v in zip(r.q, r.v)])
    M, speed, nc = 3 * CUBE_MASS, max(np.abs(v).max() for v in r.v), max(len(x) for x in r.impulses)
    assert np.diff(E).max() <= nc * tol * (M * speed) * speed + M * G * -deepest(scene, r.q)      # energy_gain_bound


# --- more contacts than the step's capacity -------------------------------------------------------------

PLANK, PLANK_MASS = (1.0, 0.1, 0.05), 1.0


def planks_on_supports():
    """``(scene, q)``: three free 1 kg planks (1 m x 10 cm x 5 cm) along x, 30 cm apart in y, each lying
    across three world boxes (10 cm wide in x, 1 m long in y, 20 cm high, at x = -0.4, 0, 0.4): every
    plank touches every support through a 10 cm square, its four corners at gap 0, 36 contacts all
    within the step's reach (more than :data:`~sparsedyn.contact.look_ahead.STEP_CAPACITY`)."""
    model = boxes_model([PLANK] * 3, [PLANK_MASS] * 3)
    supports = [sd.Shape("box", (0.1, 1.0, 0.2), placement=(np.eye(3), [x, 0.0, 0.1]), name=f"support{k}")
                for k, x in enumerate((-0.4, 0.0, 0.4))]
    q = np.concatenate([[0.0, y, 0.2 + PLANK[2] / 2, 0.0, 0.0, 0.0, 1.0] for y in (-0.3, 0.0, 0.3)])
    return sd.Scene(model, world=supports, friction=0.6), q


def _slide(u, w, mu):
    """How far [m] a body sliding at ``u`` on a level support and pressed on it at ``w`` (m/s) slides
    under Coulomb friction ``mu``, by hand, in the step's semi-implicit Euler: the first step's
    normal impulse per unit mass stops the fall and carries the weight, ``w + g dt``, and its friction
    takes ``mu`` times that off ``u``; each later step's takes ``mu g dt``, until ``u`` is zero; each
    step moves the body by ``dt`` times its velocity after it."""
    u, x = u - mu * (w + G * DT), 0.0
    while u > 0.0:
        x += DT * u
        u -= mu * G * DT
    return x


def test_planks_sliding_on_36_contacts_stop_natively_carrying_their_weight_and_dissipating():
    """The three planks of :func:`planks_on_supports` pushed along their length at 0.2 m/s and down at
    5 cm/s: each step holds 36 contacts, more than the step's capacity and all within its reach, and
    runs natively in 48 data slots (a fallback to NumPy warns: an error here).  Coulomb friction
    (mu = 0.6) stops them within ``v / (mu g)`` = 34 ms, as far as :func:`_slide` says; after 150 steps
    they are at rest at their height, each plank's normal impulses sum to its weight ``m g dt``, no step adds energy
    (:func:`energy_gain_bound`), and the kinetic energy is gone."""
    scene, q0 = planks_on_supports()
    model = scene.model
    v0 = np.tile([0.0, 0.0, 0.0, 0.2, 0.0, -0.05], 3)                    # [omega; v] in the planks' (world) axes
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = native_rollout(scene, q0, v0, 150)
    assert scene.cache["data_slot_count"] == 48
    assert [len(x) for x in r.impulses] == [36] * 150
    assert np.abs(r.v[-50:]).max() <= V_REST
    assert np.abs(r.q[-1][2::7] - (0.2 + PLANK[2] / 2)).max() <= PENETRATION_SLOP + DT * V_REST
    assert np.abs(r.q[-1][0::7] - _slide(0.2, 0.05, 0.6)).max() <= 150 * DT * V_REST
    hits = sd.collide(scene, r.q[-2])
    for k in range(3):
        mine = np.array([a == f"box{k}" for a, _ in hits.pairs])
        assert abs(r.impulses[-1][mine, 2].sum() - PLANK_MASS * G * DT) <= 2 * PLANK_MASS * V_REST
    E = np.array([energy(model, q, v) for q, v in zip(r.q, r.v)])
    assert np.diff(E).max() <= energy_gain_bound(model, r, scene)
    kinetic = 0.5 * 3 * PLANK_MASS * (0.2 ** 2 + 0.05 ** 2)
    assert E[-1] <= E[0] - kinetic + energy_gain_bound(model, r, scene)
