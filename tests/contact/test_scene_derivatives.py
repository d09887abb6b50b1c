"""Derivatives of a step in a scene (sparsedyn.contact.scene_derivatives): the per-state pieces on the
step's slots against the step's own contact problem, the native road against the NumPy road (the
reference) and against central differences of the step, and batches of states against single calls.

The scenes are those of test_friction_derivatives.py (a ball rolling and sliding with its sphere off
its body's origin, a hand pressed onto a torso, a box sliding on a table).  Two roads differ in the
rounding of the pieces (``rounding_bound`` of the recursions times ``cond(H)``), which the solve of
the mode equations amplifies by the condition of the contacts' Delassus matrix on its range.
"""

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from conftest import dm_control_humanoid, rel_err, rounding_bound
from test_friction_derivatives import (DT, FIELDS, H, MU, NATURAL, Q0, TOL, Z, _ball_scene, box_model,
                                       check_against_differences, hand_scene, lifted)
from sparsedyn.contact.friction_derivatives import differentiate_step
from sparsedyn.contact.scene_slotted import slotted_scene_step
from sparsedyn.contact.friction_problem import problem_of, slot_structure
from sparsedyn.algorithms.derivatives import derivative_program
from sparsedyn.contact.scene_derivatives import _PRODUCTS, _ROWS, scene_step_partials, slot_products, slot_rows
from sparsedyn.contact.scene_geometry import GEOMETRY, SLIDING, slot_geometry, slot_kinds, slot_shapes
from sparsedyn.contact.scene_step import scene_contacts, scene_slots
from sparsedyn.contact.transport import next_axes_jacobian, to_next_axes, to_old_axes
from sparsedyn.model.spatial import Transform


def _hand_scene():
    """The hand on the torso (a two-body contact), no gravity."""
    return (*hand_scene(), {"gravity": np.zeros(3)})


def _box_on_table():
    model = box_model().with_geometry(sd.Geometry("box", 0, Transform(np.eye(3), np.zeros(3)), "box", (2 * H,) * 3,
                                                  "collision"))
    table = sd.Shape("box", (1.0, 1.0, 0.2), placement=(np.eye(3), [0, 0, 0.1]), name="table")
    scene = sd.Scene(model, world=[table], friction=MU)
    return model, scene, lifted(Q0, 0.2 + 1e-5), np.array([0, 0, 0, 1.0, 0.3, -0.02]), Z, {}


def _box_pressed_into_table():
    """The box 0.1 mm inside the table, landing at 0.2 m/s, pushed at half mu m g: its corners stick and
    the step's position correction lifts it (differentiated at the correction's impulses, those the
    step's kernel computed)."""
    model, scene, q, _, _, _ = _box_on_table()
    tau = np.zeros(6)
    tau[3:5] = 0.5 * MU * 2.0 * 9.81 * np.array([0.6, 0.8])            # the box is not turned: a world force
    return model, scene, lifted(q, -1e-5 - PRESSED), np.array([0, 0, 0, 0, 0, -0.2]), tau, {}


#: How deep the pressed box is [m]; the correction is solved to 1e-6 of it, and that error over the
#: difference step (5e-7) is part of the central differences' noise of dq/dq.
PRESSED = 1e-4
NOISE = {"box pressed into table": {"dq_dq": 4 * 1e-6 * PRESSED / 5e-7}}


def _ball():
    model, scene, q = _ball_scene()
    return model, scene, q, np.array([1.0, 0.5, -0.1, 0.5, -0.3, -0.05]), np.zeros(6), {}


ARM = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 .1"/>
<body name="arm" pos="0 0 {pivot!r}"><joint name="ax" type="hinge" axis="1 0 0"/><joint name="ay" type="hinge" axis="0 1 0"/>
<geom name="hand" type="sphere" size="0.1" pos="0 0 -0.4" mass="2"/></body></worldbody></mujoco>"""


def _composite_arm(tmp=[]):
    """An arm on two hinges at one point (MJCF's several joints of a body: a composite joint, whose
    second axis turns with the first), its sphere 10 um above the floor, swinging down onto it and
    sliding: the RNEA derivatives of a composite joint in the step's."""
    a, b = 0.2, -0.1
    pivot = 0.1 + 1e-5 + 0.4 * np.cos(a) * np.cos(b)              # x_hand = Rx(a) Ry(b) (0, 0, -0.4) + pivot
    if not tmp:
        import tempfile
        tmp.append(tempfile.mkdtemp())
    path = Path(tmp[0]) / "arm.xml"
    path.write_text(ARM.format(pivot=float(pivot)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(str(path), geometry=True)
    assert model.joints[0].type == "composite"
    return model, sd.Scene(model), np.array([a, b]), np.array([-0.5, 0.3]), np.zeros(2), {}


#: An ellipsoid's semi-axes [m] and a cylinder's (radius, length), their axes turned and their centres off
#: their body's origin; the support distances of each along a unit ``n`` in its axes.
EGG, WHEEL = (0.12, 0.08, 0.05), (0.1, 0.04)
SUPPORT = {"ellipsoid": lambda n: np.linalg.norm(np.multiply(EGG, n)),
           "cylinder": lambda n: WHEEL[0] * np.linalg.norm(n[:2]) + WHEEL[1] / 2 * abs(n[2])}
TURNED = Transform(np.array([[np.cos(0.4), -np.sin(0.4), 0], [np.sin(0.4), np.cos(0.4), 0], [0, 0, 1.0]]) @
                   np.array([[1.0, 0, 0], [0, np.cos(0.3), -np.sin(0.3)], [0, np.sin(0.3), np.cos(0.3)]]),
                   np.array([0.02, -0.01, 0.015]))

#: A ramp: a height field whose heights rise linearly (top 0.3 m, 2 m square), the plane
#: ``z = 0.18 + 0.075 x + 0.045 y`` (``top (0.2 + 0.5 (x + 1) / 2 + 0.3 (y + 1) / 2)``): every triangle a face of it.
RAMP = sd.Shape("hfield", (1.0, 1.0, 0.3, 0.1), heights=0.2 + 0.5 * np.linspace(0, 1, 9)[None, :]
                + 0.3 * np.linspace(0, 1, 9)[:, None], name="ramp")
FLOOR, RAMP_UP, RAMP_AT = sd.Shape("plane", name="floor"), [-0.075, -0.045, 1.0], [0, 0, 0.18]


def _curved_on(kind, world, normal, point, turn=0.15):
    """A free body whose shape (an ellipsoid, or a cylinder about its z axis: a wheel rolling on its rim's
    lowest point) rolls and slides, its support point 10 um above the plane of unit ``normal`` through
    ``point`` (the surface of ``world``'s one shape under it): at the distance ``n . (c - point) - h(R^T
    n)`` (``h`` its support distance, :data:`SUPPORT`); the body turned ``turn`` rad about x."""
    I = np.diag([0.004, 0.005, 0.006])
    model = sd.ModelBuilder(kind).add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=I) \
        .add_frame("body", "body").build().with_geometry(
            sd.Geometry(kind, 0, TURNED if kind == "ellipsoid" else Transform(np.eye(3), TURNED.r), kind,
                        EGG if kind == "ellipsoid" else WHEEL, "collision"))
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    q = np.array([0.05, 0.03, 0.5, np.sin(turn / 2), 0.0, 0.0, np.cos(turn / 2)])
    (R,), (p,) = sd.geometry_placements(model, q, "collision")
    q[:3] += (1e-5 - n @ (p - point) + SUPPORT[kind](R.T @ n)) * n
    return model, sd.Scene(model, world=[world], friction=MU), q, np.array([1.0, 0.5, -0.1, 0.5, -0.3, -0.05]), Z, {}


def _turn(axis, angle):
    c, s = np.cos(angle), np.sin(angle)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    R = np.eye(3)
    R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
    return R


def _touching(kind, size, world, turn, offset=(0.0, 0.0, 0.0)):
    """A free body whose shape (``kind``, ``size``, turned by ``turn`` and off its body's origin) is 10 um
    above ``world``'s one shape where their features meet (the body moved along the hit's normal to
    that distance), turning, sliding and closing."""
    model = sd.ModelBuilder(kind).add_body("body", None, sd.make_joint("free"), mass=1.0,
                                           rot_inertia=np.diag([0.004, 0.005, 0.006])).add_frame("body", "body") \
        .build().with_geometry(sd.Geometry(kind, 0, Transform(turn, np.array([0.02, -0.01, 0.015])), kind, size,
                                           "collision"))
    q = np.array([0.03 + offset[0], 0.02 + offset[1], 0.5, 0, 0, np.sin(0.05), np.cos(0.05)])
    far = sd.Scene(model, world=[world], margin=1.0)
    for _ in range(2):                                           # (the features' distance is linear along n)
        hits = sd.collide(far, q)
        q[:3] += (1e-5 - hits.distances[0]) * hits.normals[0]
    return model, sd.Scene(model, world=[world], friction=MU), q, np.array([0.3, 0.2, -0.1, 0.05, 0.03, -0.05]), Z, {}


#: A world capsule (a log along x), a box turned 45 degrees about y (a ridge: its top edge along y) and a ball.
LOG = sd.Shape("capsule", (0.05, 0.6), placement=(_turn(1, np.pi / 2), [0, 0, 0.3]), name="log")
RIDGE = sd.Shape("box", (0.2, 0.6, 0.2), placement=(_turn(1, np.pi / 4), [0, 0, 0.3]), name="ridge")
GLOBE = sd.Shape("sphere", (0.1,), placement=(np.eye(3), [0, 0, 0.3]), name="globe")

#: A world cylinder lying along y (a drum: a ball on its side) and one standing (a post: a ball on its cap).
DRUM = sd.Shape("cylinder", (0.1, 0.6), placement=(_turn(0, np.pi / 2), [0, 0, 0.3]), name="drum")
POST = sd.Shape("cylinder", (0.1, 0.6), placement=(np.eye(3), [0, 0, 0.0]), name="post")

#: A world ellipsoid, turned (its normal under a ball turns as the ball rolls over it).
WORLD_EGG = sd.Shape("ellipsoid", EGG, placement=(_turn(0, 0.7) @ _turn(1, 0.4), [0, 0, 0.3]), name="world egg")


def _ball_on_egg_egg_on_floor():
    """A free body with an ellipsoid 10 um above the floor and a ball beside it 10 um from a world
    ellipsoid (its normal there along ``m``), moving towards both: one slot's ``K`` a sliding point's,
    the other's a turning normal's."""
    model, _, q, v, tau, opt = _curved_on("ellipsoid", FLOOR, [0, 0, 1.0], np.zeros(3))
    model = model.with_geometry(sd.Geometry("ball", 0, Transform(np.eye(3), np.array([0.25, 0, 0.1])), "sphere",
                                            (0.05,), "collision"))
    c = sd.geometry_placements(model, q, "collision")[1][1]     # (the ball's centre)
    m, R = np.array([-1.0, 0.2, 0.3]) / np.sqrt(1.13), _turn(0, 0.7) @ _turn(1, 0.4)
    u = R.T @ m                                                  # (the egg's outward normal at its point, its axes)
    egg = sd.Shape("ellipsoid", EGG, placement=(R, c - (0.05 + 1e-5) * m - R @ (np.square(EGG) * u)
                                                / np.linalg.norm(np.multiply(EGG, u))), name="world egg")
    return model, sd.Scene(model, world=[FLOOR, egg], friction=MU), q, v, tau, opt


def _forearm_across_torso():
    """The hand on the torso's model with a capsule on the forearm crossing the torso's top edge (along
    x) 4 um from it, the normal halfway between the edge's faces: a two-body ``ll`` contact."""
    model, _, q, v, tau = hand_scene()
    R1, p1 = _turn(2, q[-1]), np.array([0.4, 0.1, 0])            # the forearm's pose at q
    n, ea = np.array([0, 1, 1]) / np.sqrt(2), np.array([0.5, 0.75 ** 0.5 / 2 ** 0.5, -0.75 ** 0.5 / 2 ** 0.5])
    c = np.array([0.1, 0.03, 0.03]) + (0.03 + 4e-6) * n
    R = np.stack([np.cross(n, ea), n, ea], 1)                    # the capsule's axis along ea
    # (a Transform's rotation takes the body's axes into the shape's: R^T in the forearm's)
    model = dataclasses.replace(model, geometries=model.geometries[:1]).with_geometry(
        sd.Geometry("hand", 1, Transform(R.T @ R1, R1.T @ (c - p1)), "capsule", (0.03, 0.2), "collision"))
    scene = sd.Scene(model, friction=0.5).with_pairs(add=[("torso", "hand")])
    return model, scene, q, v, tau, {"gravity": np.zeros(3)}


CASES = {"ball": _ball, "hand on torso": _hand_scene, "box on table": _box_on_table,
         "box pressed into table": _box_pressed_into_table, "composite arm": _composite_arm,
         "egg on floor": lambda: _curved_on("ellipsoid", FLOOR, [0, 0, 1.0], np.zeros(3)),
         "egg on ramp": lambda: _curved_on("ellipsoid", RAMP, RAMP_UP, RAMP_AT),
         "egg on table": lambda: _curved_on("ellipsoid", sd.Shape("box", (1.0, 1.0, 0.2), placement=(
             np.eye(3), [0, 0, 0.1]), name="table"), [0, 0, 1.0], [0, 0, 0.2]),
         "wheel on floor": lambda: _curved_on("cylinder", FLOOR, [0, 0, 1.0], np.zeros(3), np.pi / 2),
         "wheel tilted on ramp": lambda: _curved_on("cylinder", RAMP, RAMP_UP, RAMP_AT, 1.2),
         "capsule across log": lambda: _touching("capsule", (0.05, 0.4), LOG, _turn(0, np.pi / 2) @ _turn(1, 0.2)),
         "box edge across ridge": lambda: _touching("box", (0.3, 0.1, 0.1), RIDGE, _turn(2, 0.2) @ _turn(0, np.pi / 4)),
         "ball on ridge's edge": lambda: _touching("sphere", (0.05,), RIDGE, np.eye(3)),
         "box corner on log": lambda: _touching("box", (0.1, 0.1, 0.1), LOG, _turn(0, 0.5) @ _turn(1, 0.6)),
         "forearm across torso": _forearm_across_torso,
         "egg on globe": lambda: _touching("ellipsoid", EGG, GLOBE, _turn(0, 0.7) @ _turn(1, 0.4), (0.06, 0.02, 0)),
         "ball on egg": lambda: _touching("sphere", (0.05,), WORLD_EGG, np.eye(3)),
         "ball on egg, egg on floor": _ball_on_egg_egg_on_floor,
         "ball on drum": lambda: _touching("sphere", (0.05,), DRUM, np.eye(3)),
         "ball on post": lambda: _touching("sphere", (0.05,), POST, np.eye(3)),
         "wheel on globe": lambda: _touching("cylinder", WHEEL, GLOBE, _turn(0, np.pi / 2), (-0.02, -0.015, 0)),
         "wheel's cap on globe": lambda: _touching("cylinder", WHEEL, GLOBE, np.eye(3))}


@pytest.fixture
def native_backend():
    """Plain calls on the native backend, waiting for their builds (deterministic)."""
    with sd.use_backend("native", deterministic=True):
        yield


def _bound(model, q, v, tau, scene, opt):
    """The rounding bound of two evaluations of the derivatives of the step at ``(q, v, tau)``: the
    recursions' (``nv + nb`` steps) times ``cond(H)`` times the condition of the Delassus matrix of the
    slots in contact on its range (its singular values above 1e-12 of the largest: a redundant contact
    set has a null space), which the solve of the mode equations amplifies."""
    with sd.use_backend("numpy"):
        step, _, slotted = slotted_scene_step(model, model, q, v, tau, scene, DT, dict(opt, tol=TOL))
    kappa = np.linalg.cond(sd.crba(model, q))
    used = np.flatnonzero(slotted.modes[0] != "open") if slotted is not None else []
    if len(used):
        nv = model.nv
        P = scene_step_partials(model, q, v, v, slotted.impulses[0], slotted.correction[0],
                                np.zeros((len(slotted.frames), 4)), slotted.data[0], slotted.shapes[0], model.gravity,
                                [DT], slotted.frames)
        rows = (3 * used[:, None] + np.arange(3)).ravel()
        G = P.rows[:, 5 * nv:5 * nv + len(P.rows)]
        s = np.linalg.svd(G[np.ix_(rows, rows)], compute_uv=False)
        s = s[s > 1e-12 * s[0]]
        kappa *= s[0] / s[-1]
    return rounding_bound(model.nv + model.nbodies, kappa)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_slots_rows_at_q_are_the_steps_own(name):
    """At the configuration the geometry was found at, the kernel's rows and gaps in the used slots are
    those of the step's contact problem (problem_of in the same slots, what the step's kernel solves:
    a point fixed in its body against a plane through the other witness point), and the free slots are
    far open."""
    model, scene, q, v, tau, opt = CASES[name]()
    hits = sd.collide(scene, q)
    contacts = scene_contacts(scene, q, hits)
    slots = scene_slots(scene, contacts)
    ns, nv = len(slots.frames), model.nv
    P = scene_step_partials(model, q, v, v, np.zeros((ns, 3)), np.zeros(ns), np.zeros((ns, 4)), slots.data,
                            slot_shapes(scene, q, hits.pair, slots), model.gravity, [DT], list(slots.frames))
    used = np.arange(len(contacts)) if slots.index is None else slots.index
    rows = (3 * used[:, None] + np.arange(3)).ravel()
    frames = tuple(slot_structure(model, f) for f in slots.frames)
    problem = problem_of(model, q, v, tau, frames, slots.data[:, 1:4], slots.data[:, 4:])
    H = sd.crba(model, q)
    bound = rounding_bound(nv + model.nbodies, np.linalg.cond(H))
    assert rel_err(P.rows[rows, :nv], problem.J[rows]) <= bound
    assert rel_err(P.gap[used], hits.distances) <= bound and rel_err(P.gap[used], problem.gap[used]) <= bound
    assert rel_err(P.rows[rows, nv:2 * nv], problem.JMinv[rows]) <= bound
    assert np.all(np.delete(P.gap, used) > 1e5)


#: The kinds of contact of each case's slots, from its shapes' features (a point, a line, a face): a sphere on a
#: plane ``pb``; two boxes (the table, a ridge): a corner on a face ``pb`` or ``ap``, two edges ``ll``; a box
#: (the torso) against a sphere: its face ``ap``, its corner or edge ``pp``; a sphere or a capsule's end
#: against a capsule's side or a box's edge ``pp``, two capsules' sides or a side and an edge ``ll``; a box's
#: corner on a capsule's side ``pp``, its face on the capsule's end ``ap``; an ellipsoid against a sphere ``ap``,
#: its normal turning (``SLIDING``); ``pb`` in every slot (a free slot's).
SLOT_KINDS = {"ball": (1,), "hand on torso": (0, 1, 2), "box on table": (1, 2, 3), "box pressed into table": (1, 2, 3),
              "composite arm": (1,), "egg on floor": (1, SLIDING), "egg on ramp": (1, SLIDING),
              "egg on table": (1, SLIDING),
              "wheel on floor": (1, SLIDING), "wheel tilted on ramp": (1, SLIDING),
              "capsule across log": (0, 1, 3), "box edge across ridge": (1, 2, 3), "ball on ridge's edge": (0, 1),
              "box corner on log": (0, 1, 2, 3), "forearm across torso": (0, 1, 2, 3), "egg on globe": (1, 2, SLIDING),
              "ball on egg": (1, SLIDING), "ball on egg, egg on floor": (1, SLIDING), "ball on drum": (0, 1),
              "ball on post": (0, 1), "wheel on globe": (0, 1, 2), "wheel's cap on globe": (0, 1, 2)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_kernel_of_the_slots_kinds_equals_the_general_one_on_the_native_road(name, native_backend):
    """The kernel built for the kinds of contact a scene's slots may hold (the other kinds' terms left out),
    called with plain lists on the default road, equals the general kernel (every kind, weighted by the
    geometry's one-hot columns) on the NumPy road to the rounding bound, at impulses, a position
    correction and modes that use every column; kinds that are not kinds of contact are refused."""
    model, scene, q, v, tau, opt = CASES[name]()
    hits = sd.collide(scene, q)
    slots = scene_slots(scene, scene_contacts(scene, q, hits))
    ns, nv = len(slots.frames), model.nv
    kinds = slot_kinds(scene, slots.frames)
    assert kinds == (SLOT_KINDS[name],) * ns
    data, shapes = slots.data, slot_shapes(scene, q, hits.pair, slots)
    lam, corr = np.tile([0.1, -0.05, 1.0], (ns, 1)), np.full(ns, 0.01)
    modes = np.tile([0.0, 0.5, 0.5, MU], (ns, 1))                # (stick and slide rows both: every term)
    v_next = v + np.linspace(-0.1, 0.1, nv)
    with sd.use_backend("numpy"):
        ref = scene_step_partials(model, q, v, v_next, lam, corr, modes, data, shapes, model.gravity, [DT],
                                  slots.frames)
    got = scene_step_partials(model, q.tolist(), v.tolist(), v_next.tolist(), lam.tolist(), corr.tolist(),
                              modes.tolist(), data.tolist(), shapes.tolist(), model.gravity.tolist(), [DT],
                              list(slots.frames),
                              [list(k) for k in kinds])
    bound = rounding_bound(nv + model.nbodies, np.linalg.cond(sd.crba(model, q)))
    for f in ("rows", "state", "gap"):
        assert rel_err(getattr(got, f), getattr(ref, f)) <= bound, f
    with pytest.raises(ValueError, match=r"scene_step_partials: kinds must be empty or, per slot \(%d\)" % ns):
        scene_step_partials(model, q, v, v_next, lam, corr, modes, data, shapes, model.gravity, [DT], slots.frames,
                            [[5]] * ns)


def _with_free_slots(scene, q):
    """``(pair, slots)`` of the scene's hits at ``q`` in a layout with free slots: every body's (or body
    pair's) slots grown to hold its contacts twice, then its contacts laid out alone (the rest free)."""
    hits = sd.collide(scene, q)
    contacts = scene_contacts(scene, q, hits)
    scene_slots(scene, contacts + contacts)                      # (the layout only grows)
    return hits.pair, scene_slots(scene, contacts)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_kernels_slot_geometry_is_slot_geometrys_on_the_native_road(name, native_backend):
    """The kernel places each slot's geometry from the step's slot data and shapes itself: its rows and
    gaps on the default road (plain lists) are those of the NumPy geometry (``slot_geometry``) through
    ``slot_rows`` on NumPy, to the rounding bound, in the contacts' slots and the free ones (a vertex on
    the plane 1000 km below: a gap of 1e6 less the slot frame's height)."""
    model, scene, q, v, tau, opt = CASES[name]()
    pair, slots = _with_free_slots(scene, q)
    ns, nv = len(slots.frames), model.nv
    assert slots.index is not None and len(slots.index) < ns            # some slots are free
    shapes = slot_shapes(scene, q, pair, slots)
    P = scene_step_partials(model, q.tolist(), v.tolist(), v.tolist(), np.zeros((ns, 3)).tolist(), [0.0] * ns,
                            np.zeros((ns, 4)).tolist(), slots.data.tolist(), shapes.tolist(), model.gravity.tolist(),
                            [DT], list(slots.frames), [list(k) for k in slot_kinds(scene, slots.frames)])
    frames = tuple(slot_structure(model, f) for f in slots.frames)
    with sd.use_backend("numpy"):
        J, gap = slot_rows(model, q, slot_geometry(scene, q, pair, slots), frames)
    bound = rounding_bound(nv + model.nbodies)
    free = np.setdiff1d(np.arange(ns), slots.index)
    assert rel_err(P.rows[:, :nv], J) <= bound
    assert rel_err(P.gap[slots.index], gap[slots.index]) <= bound and rel_err(P.gap[free], gap[free]) <= bound
    assert np.all(np.abs(gap[free] - 1e6) < 10.0)


def test_the_kernels_new_axes_on_the_native_road(native_backend):
    """The kernel takes the step's next velocity ``v_next`` and turns it into the old axes itself: its
    ``N`` on the native road is the derivative of ``to_next_axes`` at ``w = to_old_axes(v_next)``
    (central differences, h = 1e-5: truncation h^2 |f'''| / 6 and rounding eps / h well below 1e-6), which
    at a ball turning fast in a long step differs from the one at ``v_next`` by order ``dt^2 |omega| |v|``."""
    model, scene, q, v, _, _ = _ball()
    hits = sd.collide(scene, q)
    slots = scene_slots(scene, scene_contacts(scene, q, hits))
    ns = len(slots.frames)
    v_next, dt = np.array([30.0, -20.0, 10.0, 2.0, -1.0, 0.5]), 0.05      # turning fast: the axes differ
    P = scene_step_partials(model, q, v, v_next.tolist(), np.zeros((ns, 3)), np.zeros(ns), np.zeros((ns, 4)),
                            slots.data, slot_shapes(scene, q, hits.pair, slots), model.gravity, [dt], slots.frames)
    N = P.state[:, 6 * model.nv + 1:]
    w, h = to_old_axes(model, v_next, dt), 1e-5
    num = np.stack([(to_next_axes(model, w + h * e, dt) - to_next_axes(model, w - h * e, dt)) / (2 * h)
                    for e in np.eye(model.nv)], -1)
    assert np.abs(N - num).max() <= 1e-6 * np.abs(num).max()
    assert np.abs(next_axes_jacobian(model, v_next, dt) - num).max() > 1e-3 * np.abs(num).max()


@pytest.mark.parametrize("name", sorted(CASES))
def test_native_road_equals_the_numpy_road(name, native_backend):
    """The same step differentiated on both roads: the native kernel (plain call and ``sd.compile``)
    and the NumPy program give the same derivatives to the rounding bound."""
    model, scene, q, v, tau, opt = CASES[name]()
    with sd.use_backend("numpy"):
        step, contacts, slotted = slotted_scene_step(model, model, q, v, tau, scene, DT, dict(opt, tol=TOL))
        ref = differentiate_step(model, model, q, v, tau, contacts, DT, step, slotted=slotted, **opt)
    bound = _bound(model, q, v, tau, scene, opt)
    for kernels in (model, sd.compile(model)):
        got = differentiate_step(model, kernels, q, v, tau, contacts, DT, step, slotted=slotted, **opt)
        for f in FIELDS:
            assert rel_err(getattr(got, f) / NATURAL[f], getattr(ref, f) / NATURAL[f]) <= bound, (f, bound)


@pytest.mark.parametrize("name", sorted(CASES))
def test_native_road_equals_central_differences(name, native_backend):
    """On the default (native) road, the derivatives equal central differences of the step (the
    collision run again at every perturbed state; modes and pairs held), as on NumPy."""
    model, scene, q, v, tau, opt = CASES[name]()
    d = check_against_differences(model, q, v, tau, scene, 1e-6, extra_noise=NOISE.get(name), **opt)
    if name == "box pressed into table":                  # the corners stick and the box is lifted back
        assert list(d.step.modes) == ["stick"] * 4
        assert np.abs(d.dv_dv).max() <= 1e-8 and np.abs(d.dq_dq[5, 5]) <= 1e-6


def test_external_forces_in_a_scene_on_the_native_road(native_backend):
    """With ``f_ext`` (a wrench in the box's axes, held constant: it turns with the box) the step in a scene
    takes the kernel's program with ``f_ext`` on its batch road: the derivatives equal central differences
    of the step, and differ from those without the wrench by far more than rounding."""
    model, scene, q, v, tau, opt = _box_on_table()
    f = np.zeros((model.nbodies, 6))
    f[0] = [0.02, -0.01, 0.03, 3.0, -2.0, 1.0]
    d = check_against_differences(model, q, v, tau, scene, 1e-6, f_ext=f.tolist(), **opt)
    free = sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL, **opt)
    assert np.abs(d.dv_dq - free.dv_dq).max() > 1e-6 * np.abs(free.dv_dq).max()      # far above rounding


def _batch_equals_singles(model, scene, Q, V, T, opt):
    d = sd.contact_step_derivatives(model, Q, V, T, scene, DT, tol=TOL, **opt)
    assert d.dv_dq.shape == (len(Q), model.nv, model.nv)
    for b in range(len(Q)):
        s = sd.contact_step_derivatives(model, Q[b], V[b], T[b], scene, DT, tol=TOL, **opt)
        assert np.array_equal(s.step.v, d.step.v[b]) and list(s.step.modes) == list(d.step.modes[b])
        bound = _bound(model, Q[b], V[b], T[b], scene, opt)
        for f in FIELDS:
            assert rel_err(getattr(d, f)[b] / NATURAL[f], getattr(s, f) / NATURAL[f]) <= bound, (f, bound)
    return d


def _box_batch():
    """The box on the table sliding two ways, 5 cm above it (no contact) and pressed into it (the
    position correction)."""
    model, scene, q, v, tau, opt = _box_on_table()
    _, _, pressed, v_pressed, tau_pressed, _ = _box_pressed_into_table()
    Q = np.stack([q, q, lifted(q, 0.05), pressed])
    V = np.stack([v, np.array([0, 0, 0, -0.4, 0.2, -0.02]), v, v_pressed])
    return model, scene, Q, V, np.stack([tau] * 3 + [tau_pressed]), opt


def test_a_batch_in_a_scene_equals_single_states():
    """Q of shape (n, nq) in a scene (the ball at three velocities; the box on the table sliding two
    ways and off it): one call, each state's derivatives those of its single call (the same layout)."""
    model, scene, q, v, tau, opt = _ball()
    V = np.stack([v, 0.5 * v, v * [1, 1, 1, -1, 1, 1]])
    _batch_equals_singles(model, scene, np.stack([q] * 3), V, np.zeros((3, 6)), opt)
    d = _batch_equals_singles(*_box_batch())
    assert list(d.step.modes[2]) == [] and list(d.step.modes[0]) == ["slide"] * 4
    assert list(d.step.modes[3]) == ["stick"] * 4


def test_a_batch_in_a_scene_equals_single_states_on_the_native_road(native_backend):
    """The box on the table, and the ball on its plane: its batch's contacts found by the collision kernel
    for all states at once (each state's contacts in the layout's slots)."""
    _batch_equals_singles(*_box_batch())
    model, scene, q, v, tau, opt = _ball()
    V = np.stack([v, 0.5 * v, v * [1, 1, 1, -1, 1, 1]])
    _batch_equals_singles(model, scene, np.stack([q] * 3), V, np.zeros((3, 6)), opt)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_batch_in_a_scene_in_which_no_state_touches_equals_single_states(backend):
    """The ball and the box all high above their floors (a batch of falling bodies: no contact in any
    state, the step's impulses a list of empty rows): one call, each state's derivatives those of its
    single call."""
    model, scene, q, v, tau, opt = _ball()
    with sd.use_backend(backend):
        _batch_equals_singles(model, scene, np.stack([lifted(q, 1.0), lifted(q, 2.0)]), np.stack([v, -v]),
                              np.zeros((2, 6)), opt)
        model, scene, Q, V, T, opt = _box_batch()
        d = _batch_equals_singles(model, scene, np.stack([lifted(x, 1.0) for x in Q]), V, T, opt)
    assert [len(x) for x in d.step.impulses] == [0] * len(Q)


def test_plain_lists_and_bad_shapes():
    model, scene, q, v, tau, opt = _ball()
    d = sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL)
    dl = sd.contact_step_derivatives(model, q.tolist(), v.tolist(), tau.tolist(), scene, DT, tol=TOL)
    for f in FIELDS:
        assert np.array_equal(getattr(d, f), getattr(dl, f))
    with pytest.raises(ValueError, match=r"contact_step_derivatives: a step in a scene takes one state.*\(2, 2, 7\)"):
        sd.contact_step_derivatives(model, np.stack([[q, q]] * 2), v, tau, scene, DT)


def _same_step(a, b):
    """Every field of two :class:`~sparsedyn.ContactStep` equal bit for bit (the residuals field by field)."""
    for f in ("q", "v", "impulses", "modes", "iterations"):
        assert np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f))), f
    for f in a.residuals._fields:
        assert np.array_equal(getattr(a.residuals, f), getattr(b.residuals, f)), f


@pytest.mark.parametrize("name", list(CASES))
def test_the_derivatives_step_is_contact_steps_on_the_native_road(name, native_backend):
    """A simulation loop calls contact_step_derivatives alone: its ``step`` is contact_step's for the
    same arguments bit for bit (plain lists on the default road), with a warm start as a loop passes
    the previous impulses too, so the step is taken once."""
    model, scene, q, v, tau, opt = CASES[name]()
    args = (model, q.tolist(), v.tolist(), tau.tolist(), scene, DT)
    s = sd.contact_step(*args, tol=TOL, **opt)
    d = sd.contact_step_derivatives(*args, tol=TOL, **opt)
    _same_step(s, d.step)
    assert len(d.step.modes) and list(d.step.modes) != ["open"] * len(d.step.modes)      # in contact
    warm = np.asarray(s.impulses).tolist()
    _same_step(sd.contact_step(*args, tol=TOL, warm_start=warm, **opt),
               sd.contact_step_derivatives(*args, tol=TOL, warm_start=warm, **opt).step)


#: Slots of the products' test: feet, a hand and the torso on the world; a hand on the torso, a foot on the
#: other shin (two-body slots, both ends moving).
PRODUCT_SLOTS = {"humanoid": (dm_control_humanoid, ("left_foot", "right_hand", "torso", ("left_hand", "torso"),
                                          ("right_foot", "left_shin"))),
                 "box": (box_model, ("box", "box"))}


def _random_geometry(rng, ns):
    """Random slot geometries (ns, 21): centres, radii, a unit normal, one kind each and six numbers
    ``K`` (module docstring of scene_derivatives), every kind among them."""
    g = np.zeros((ns, GEOMETRY))
    g[:, 0:3], g[:, 4:7] = rng.uniform(-0.2, 0.2, (ns, 3)), rng.uniform(-0.2, 0.2, (ns, 3))
    g[:, 3], g[:, 7] = rng.uniform(0.0, 0.1, ns), rng.uniform(0.0, 0.1, ns)
    n = rng.normal(size=(ns, 3))
    g[:, 8:11] = n / np.linalg.norm(n, axis=1, keepdims=True)
    g[np.arange(ns), 11 + np.arange(ns) % 4] = 1.0
    g[:, 15:21] = rng.uniform(-0.1, 0.1, (ns, 6))
    return g


@pytest.mark.parametrize("name", sorted(PRODUCT_SLOTS))
def test_the_contracted_products_equal_the_rows_derivative_contracted_by_hand(name):
    """At random configurations, geometries (every kind of contact), velocities and impulses, the
    derivatives in ``q`` of the slots' products ``J w`` and ``J^T lam`` (velocity and force passes, what the
    derivatives' kernel uses) equal the rows' full derivative ``dJ/dq`` contracted with ``w`` and ``lam``
    in NumPy, and the products themselves ``J w`` and ``J^T lam`` of the rows, to the rounding bound of
    the recursions and the sums of the contraction."""
    make, names = PRODUCT_SLOTS[name]
    model = make()
    frames = tuple(slot_structure(model, f) for f in names)
    ns, nv = len(frames), model.nv
    static = {"frames": frames, "kinds": None}
    rows = derivative_program(_ROWS, model, ("q",), static)
    products = derivative_program(_PRODUCTS, model, ("q",), static)
    rng = np.random.default_rng(7)
    bound = rounding_bound(nv + model.nbodies + 3 * ns)
    for seed in range(3):
        q, g = model.random_configuration(seed), _random_geometry(rng, ns)
        w, lam = rng.normal(size=(nv, 2)), rng.normal(size=(3 * ns, 2))
        dJ = rows.evaluate([q[None], g[None]])[0][0].reshape(3 * ns, nv, nv)      # dJ[i, j, k] = dJ_ij / dq_k
        dJw, dJtL = (x[0] for x in products.evaluate([q[None], g[None], w[None], lam[None]]))
        assert rel_err(dJw.reshape(3 * ns, 2, nv), np.einsum("ijk,jc->ick", dJ, w)) <= bound
        assert rel_err(dJtL.reshape(nv, 2, nv), np.einsum("ijk,ic->jck", dJ, lam)) <= bound
        J = slot_rows(model, q, g, frames)[0]
        Jw, JtL = slot_products(model, q, g, w, lam, frames)
        assert rel_err(Jw, J @ w) <= bound and rel_err(JtL, J.T @ lam) <= bound


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_kernels_mass_matrix_products_are_their_definitions(name, native_backend):
    """The kernel's products with ``H^-1`` (one block product of RNEA's derivatives' transpose, the
    structural zeros of its rows skipped) against their definitions with CRBA's ``H`` and RNEA's
    derivatives at the step's acceleration: ``G = J H^-1 J^T``, ``H (W_v - I - T_j) = -dt dtau/dv``
    (``T_j`` the free joints' transport and gyroscopic terms), ``W_tau = dt H^-1``, and the contact
    velocities' change ``C = J W`` in its ``v`` and ``tau`` columns (``d(J w)/dq`` only in its ``q``
    columns), at impulses, a correction and modes that use every column."""
    from sparsedyn.contact.transport import gyroscopic, gyroscopic_jacobian, transport, transport_jacobian
    model, scene, q, v, tau, opt = CASES[name]()
    with sd.use_backend("numpy"):
        step, _, slotted = slotted_scene_step(model, model, q, v, tau, scene, DT, dict(opt, tol=TOL))
    ns, nv = len(slotted.frames), model.nv
    rng = np.random.default_rng(7)
    gravity = opt.get("gravity", model.gravity)
    v_next = step.v.reshape(nv)
    P = scene_step_partials(model, q, v, v_next, rng.normal(size=(ns, 3)), rng.uniform(0.1, 1.0, ns),
                            np.tile([0.0, 0.5, 0.5, MU], (ns, 1)), slotted.data[0], slotted.shapes[0], gravity, [DT],
                            slotted.frames)
    m = 3 * ns
    J, C, G = P.rows[:, :nv], P.rows[:, 2 * nv:5 * nv], P.rows[:, 5 * nv:5 * nv + m]
    W = P.state[:, :3 * nv]
    H = sd.crba(model, q)
    w = to_old_axes(model, v_next, DT)
    a = (w - v - gyroscopic(model, v, DT)) / DT - transport(model, v)
    Tv = sd.rnea_derivatives(model, q, v, a, gravity=gravity)[1]
    Tj = DT * transport_jacobian(model, v) + gyroscopic_jacobian(model, v, DT)
    bound = rounding_bound(nv + model.nbodies, np.linalg.cond(H))
    assert rel_err(G, J @ np.linalg.solve(H, J.T)) <= bound
    assert rel_err(H @ (W[:, nv:2 * nv] - np.eye(nv) - Tj), -DT * Tv) <= bound
    assert rel_err(W[:, 2 * nv:], DT * np.linalg.inv(H)) <= bound
    assert rel_err(C[:, nv:], J @ W[:, nv:]) <= bound
