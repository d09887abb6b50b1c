"""Self-collision in a scene step (sparsedyn.contact.scene_step): a hit of two robot shapes is a two-body
contact whose rows are the velocity of one witness point relative to the other body's point at the same
place, and whose impulses are equal and opposite on the two bodies.

The robot: a free-floating torso (a capsule along x) with a two-link arm (a short upper arm without
collision shape and a forearm capsule), folded so that the forearm lies beside the torso and swings
into it; torso and forearm are not parent and child, so the scene checks them.  No gravity.

Checks, by hand and by identities: the rows equal a central difference of the two points' relative
position; their free-floating base columns vanish (internal impulses carry no net wrench: a translation
or rotation of the whole robot moves both points alike); along the swing the base rows of the impulse's
velocity change ``H (v+ - v_free)`` vanish; the forearm stays out of the torso (it passes through it
when the scene has no self-collision); the default (native) road makes the NumPy road's iterations.
"""

import os
import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import sparsedyn as sd
from conftest import EPS, rounding_bound, solve_bound
from sparsedyn.contact.friction_kernel import RHO_START
from sparsedyn.interop import example_robot_data_dir
from sparsedyn.contact.friction_problem import BodyContact, contact_slots, problem_of
from sparsedyn.contact.scene_step import scene_contacts
from sparsedyn.model.spatial import Transform

DT, R, L = 1e-3, 0.03, 0.4
Z_TO_X = np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])        # a capsule's z axis along the body's x
NO_GRAVITY = np.zeros(3)


def arm_model():
    """Torso (free, capsule from x = 0 to 0.4), upper arm (revolute z at x = 0.4, 0.1 long, no
    shape), forearm (revolute z at the upper arm's end, capsule from x = 0 to 0.4)."""
    b = sd.ModelBuilder("arm")
    b.add_body("torso", None, sd.make_joint("free"), mass=4.0, rot_inertia=np.diag([0.01, 0.06, 0.06]),
               com=[0.2, 0, 0])
    b.add_body("upper", "torso", sd.make_joint("revolute", axis=[0, 0, 1]), mass=0.5, rot_inertia=np.eye(3) * 1e-3,
               Xtree=(np.eye(3), [L, 0, 0]), com=[0.05, 0, 0])
    b.add_body("fore", "upper", sd.make_joint("revolute", axis=[0, 0, 1]), mass=1.0,
               rot_inertia=np.diag([1e-3, 0.015, 0.015]), Xtree=(np.eye(3), [0.1, 0, 0]), com=[0.2, 0, 0])
    capsule = Transform(Z_TO_X, np.array([L / 2, 0, 0]))
    return b.build().with_geometry(
        sd.Geometry("torso_c", 0, capsule, "capsule", (R, L), "collision", link="torso"),
        sd.Geometry("fore_c", 2, capsule, "capsule", (R, L), "collision", link="fore"))


MODEL = arm_model()
#: Folded: the forearm parallel to the torso 0.1 m beside it (gap 0.04 m), swinging in at 3 rad/s.
Q_FOLDED = np.r_[0, 0, 0, 0, 0, 0, 1, np.pi / 2, np.pi / 2]
V_SWING = np.r_[0, 0, 0, 0, 0, 0, 0, 3.0]
#: The forearm turned 0.1 rad further: its tip touches the torso's end (0.07 mm apart).
Q_TOUCH = Q_FOLDED + np.r_[np.zeros(8), 0.1]


def _rows(model, q, contacts):
    """The contact rows (m, nv) and gaps of ``contacts`` at ``q`` as the step computes them."""
    s = contact_slots(model, contacts)
    index = np.arange(len(contacts)) if s.index is None else s.index
    P = problem_of(model, q, np.zeros(model.nv), np.zeros(model.nv), s.frames, s.data[:, 1:4], s.data[:, 4:])
    rows = P.J.reshape(-1, 3, model.nv)[index].reshape(-1, model.nv)
    return rows, P.gap[index], P


def test_self_collision_hits_become_two_body_contacts():
    scene = sd.Scene(MODEL, friction=0.3)
    assert scene.pairs == [("torso_c", "fore_c")]
    hits = sd.collide(scene, Q_TOUCH)
    contacts = scene_contacts(scene, Q_TOUCH, hits)
    assert len(contacts) == 1 and isinstance(contacts[0], BodyContact)
    c = contacts[0]
    assert (MODEL.frames[c.frame].body, MODEL.frames[c.other].body) == (0, 2)
    # the gap the step sees is the hit's signed distance (two algorithms over the chain's transforms:
    # their rounding, lengths below a metre)
    _, gap, _ = _rows(MODEL, Q_TOUCH, contacts)
    assert abs(gap[0] - hits.distances[0]) <= rounding_bound(MODEL.nv)


def test_two_body_rows_are_the_relative_velocity_of_the_witness_points_and_carry_no_base_wrench(rng):
    """Rows ``J`` (3, nv) of the hit at ``Q_TOUCH``: ``J dv`` equals the central difference along
    ``dv`` of ``x_a - x_b`` in the contact frame, ``x_a`` the point fixed in the torso, ``x_b`` the
    forearm's point at the same place; the base columns (a motion of the whole robot) are zero."""
    scene = sd.Scene(MODEL, friction=0.3)
    c = scene_contacts(scene, Q_TOUCH)[0]
    J, _, P = _rows(MODEL, Q_TOUCH, [c])
    Rf, pf = sd.frame_placements(MODEL, Q_TOUCH)
    fa, fb = c.frame, c.other
    x = pf[fa] + Rf[fa] @ np.array(c.point)
    pb = Rf[fb].T @ (x - pf[fb])                                   # b's point, b's axes

    def relative(q):
        Rq, pq = sd.frame_placements(MODEL, q)
        return (pq[fa] + Rq[fa] @ np.array(c.point)) - (pq[fb] + Rq[fb] @ pb)

    n = np.asarray(c.plane[0])
    h = 1e-5
    for dv in rng.standard_normal((4, MODEL.nv)):
        plus, minus = (relative(sd.integrate(MODEL, Q_TOUCH, s * h * dv)) for s in (1, -1))
        fd = (plus - minus) / (2 * h)
        # the rows are in the contact frame [t_x, t_y, n]: compare the projections that do not need its
        # tangent axes (the normal and |tangential part|) and the full norm
        Jdv = J @ dv
        # truncation of the central difference: h^2 / 6 times the third derivative (lengths 0.5 m,
        # velocities |dv| ~ 3: about 30 |dv|^3 h^2 / 6); rounding: eps |x| / h
        bound = 10 * np.abs(dv).max() ** 3 * h * h + 10 * EPS / h
        assert abs(Jdv[2] - n @ fd) <= bound
        assert abs(np.linalg.norm(Jdv) - np.linalg.norm(fd)) <= bound
        assert abs(np.linalg.norm(Jdv[:2]) - np.linalg.norm(fd - (n @ fd) * n)) <= 2 * bound
    # internal impulses: no wrench on the floating base (its columns are a rigid motion of both points)
    assert np.abs(J[:, :6]).max() <= rounding_bound(MODEL.nv) * np.abs(J).max()
    assert np.abs(J[:, 6:]).max() > 0.1


def hinge_model():
    """The torso with the forearm hinged on it directly (revolute z at (0.4, 0.1, 0)), folded back
    along it: the two are parent and child, so their pair is added to the scene by hand."""
    b = sd.ModelBuilder("hinge")
    b.add_body("torso", None, sd.make_joint("free"), mass=4.0, rot_inertia=np.diag([0.01, 0.06, 0.06]),
               com=[0.2, 0, 0])
    b.add_body("fore", "torso", sd.make_joint("revolute", axis=[0, 0, 1]), mass=1.0,
               rot_inertia=np.diag([1e-3, 0.015, 0.015]), Xtree=(np.eye(3), [L, 0.1, 0]), com=[0.2, 0, 0])
    capsule = Transform(Z_TO_X, np.array([L / 2, 0, 0]))
    return b.build().with_geometry(
        sd.Geometry("torso_c", 0, capsule, "capsule", (R, L), "collision", link="torso"),
        sd.Geometry("fore_c", 1, capsule, "capsule", (R, L), "collision", link="fore"))


def test_an_elbow_torque_pressing_the_forearm_on_the_torso_is_carried_by_the_contact():
    """Frictionless: the hinge torque ``tau`` closes the forearm onto the torso's end; once they rest
    together the contact carries it, so its normal impulse over a step is ``tau dt`` over the lever of
    the normal about the hinge axis, ``((x - e) x n)_z`` (the forearm's moment balance; by hand), and
    nothing moves: the internal torque and impulse give the whole robot no push."""
    model = hinge_model()
    scene = sd.Scene(model, friction=0.0).with_pairs(add=[("torso_c", "fore_c")])
    tau = [0, 0, 0, 0, 0, 0, 2.0]
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(model, np.r_[0, 0, 0, 0, 0, 0, 1, np.pi + 0.05], np.zeros(7), tau, scene, DT, 300,
                       gravity=NO_GRAVITY)
    assert np.abs(r.v[-1][6]) <= 1e-6 and np.abs(r.v[-1][:6]).max() <= 1e-4     # the swing's last recoil
    hits = sd.collide(scene, r.q[-1])
    assert len(hits.distances) == 1 and abs(hits.distances[0]) <= 1e-9
    _, p = sd.frame_placements(model, r.q[-1])
    lever = np.cross(hits.witness_a[0] - p[1], hits.normals[0])[2]
    expected = tau[6] * DT / lever
    assert lever > 0.3 and r.impulses[-1].shape == (1, 3)
    # the solver's tolerance (1e-8, relative to the impulse scale) amplified by the step's conditioning
    assert abs(r.impulses[-1][0, 2] - expected) <= 100 * 1e-8 * expected
    assert np.abs(r.impulses[-1][0, :2]).max() <= 1e-12


def _swing(scene, steps=150):
    with sd.use_backend("native", deterministic=True):
        return sd.rollout(MODEL, Q_FOLDED, V_SWING, np.zeros(MODEL.nv), scene, DT, steps, gravity=NO_GRAVITY)


def test_the_forearm_swinging_into_the_torso_stays_out():
    """150 steps of the swing: with self-collision the capsules never penetrate beyond the scene's
    margin (the position correction holds them on the surface), the forearm stops against the torso
    (a contact on most steps) and the internal impulses leave the floating base's rows of
    ``H (v+ - v_free) = J^T lambda`` at zero (in the base's axes before the step); without self-collision the forearm passes through."""
    scene = sd.Scene(MODEL, friction=0.3)
    far = sd.Scene(MODEL, friction=0.3, margin=1.0)               # reports the pair at any distance
    r = _swing(scene)
    d = np.array([sd.collide(far, q).distances.min() for q in r.q])
    assert d.min() >= -scene.margin
    touching = [k for k, imp in enumerate(r.impulses) if len(imp)]
    assert len(touching) > 100 and all(imp[:, 2].min() >= 0 for imp in r.impulses if len(imp))
    pushed = [k for k in touching if r.impulses[k][:, 2].max() > 1e-3]          # the impact
    assert pushed
    for k in pushed:
        q, v = r.q[k], r.v[k]
        H = sd.crba(MODEL, q)
        a = sd.aba(MODEL, q, v, np.zeros(MODEL.nv), gravity=NO_GRAVITY)
        # the step holds the base's linear velocity in the world: its free velocity gains dt w x v, and
        # its next velocity is in the axes the step turned the base to (exp(dt w)^T on the linear part)
        # its gyroscopic term is taken backward: (I - dt L x) w_g = L (torque-free), less the forward step
        v_free = v + DT * (a + np.r_[0, 0, 0, np.cross(v[:3], v[3:6]), np.zeros(MODEL.nv - 6)])
        I = np.asarray(MODEL.inertia[0])[:3, :3]
        L = I @ v[:3]
        v_free[:3] += np.linalg.solve(I - DT * np.cross(np.eye(3), L), L) - \
            (v[:3] - DT * np.linalg.solve(I, np.cross(v[:3], L)))
        w = r.v[k + 1].copy()
        w[3:6] = Rotation.from_rotvec(DT * w[:3]).as_matrix() @ w[3:6]
        push = H @ (w - v_free)                                   # J^T lambda
        # the step's free acceleration and ours differ by two solves with H; v+ carries the rounding
        # of H^-1 J^T lambda (cond(H)) and of v itself; H's product sums nv terms
        dv = DT * solve_bound(H, a) * max(1.0, np.abs(a).max()) + \
            rounding_bound(MODEL.nv, np.linalg.cond(H)) * max(np.abs(r.v[k + 1]).max(), np.abs(v).max())
        bound = MODEL.nv * np.abs(H).max() * dv
        assert np.abs(push[:6]).max() <= bound
        assert np.abs(push[6:]).max() > 100 * bound
    through = _swing(sd.Scene(MODEL, friction=0.3, self_collision=False))
    assert min(sd.collide(far, q).distances.min() for q in through.q) < -10 * scene.margin


def test_native_step_with_a_two_body_contact_and_a_floor_equals_the_numpy_step():
    """The arm lying on a floor (each capsule touches it) with the forearm's tip on the torso: world
    and two-body contacts in one step.  The default (native) road, and ``sd.compile(model)`` (which
    holds a copy of the scene's model), make the NumPy road's iterations and modes and agree on ``v+``
    and the impulses to the rounding bound of the step."""
    floor = sd.Shape("plane", placement=(np.eye(3), [0, 0, -R]), name="floor")
    scene = sd.Scene(MODEL, world=[floor], friction=0.5)
    q, v = list(Q_TOUCH), [0.05, -0.02, 0.01, 0.1, 0.0, -0.05, 0.3, 3.0]        # plain lists
    tau = np.zeros(MODEL.nv)
    contacts = scene_contacts(scene, np.array(q))
    kinds = {type(c).__name__ for c in contacts}
    assert kinds == {"Contact", "BodyContact"}
    with sd.use_backend("numpy"):
        ref = sd.contact_step(MODEL, q, v, tau, scene, DT)
    with sd.use_backend("native", deterministic=True):
        one = sd.contact_step(MODEL, q, v, tau, scene, DT)
        compiled = sd.contact_step(sd.compile(MODEL), q, v, tau, scene, DT)     # its copy of the model: the same
    _, _, P = _rows(MODEL, np.array(q), contacts)
    m = P.G.shape[-1]
    A = P.G + (RHO_START * np.trace(P.G) / m) * np.eye(m)
    H = sd.crba(MODEL, np.array(q))
    a = sd.aba(MODEL, np.array(q), np.array(v), tau)
    bound = solve_bound(H, a) * DT * np.abs(a).max() / max(1.0, np.abs(ref.v).max()) + \
        rounding_bound(m, np.linalg.cond(A))
    assert int(one.iterations) == int(ref.iterations) and list(one.modes) == list(ref.modes)
    assert np.abs(one.v - ref.v).max() <= bound * max(1.0, np.abs(ref.v).max())
    assert np.abs(one.impulses - ref.impulses).max() <= bound * np.abs(ref.impulses).max()
    assert int(compiled.iterations) == int(one.iterations)
    assert np.abs(compiled.v - one.v).max() <= bound * max(1.0, np.abs(ref.v).max())


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
@pytest.mark.filterwarnings("ignore::sparsedyn.SelfOverlapWarning")    # at neutral, not its reference pose
def test_the_panda_folding_its_elbow_stops_its_wrist_on_its_upper_arm():
    """Franka's Panda (example-robot-data, its model of spheres and cylinders, its SRDF's disabled
    pairs; joint limits are not enforced), no gravity, a constant torque of -5 N m folding the elbow:
    the wrist (link 6) swings onto the upper arm (link 2) and stays out of it, within the scene's
    margin, over the 200 steps it presses on it; without self-collision it passes through."""
    root = os.path.join(example_robot_data_dir(), "panda_description")
    model = sd.load_urdf(os.path.join(root, "urdf", "panda_collision.urdf"), geometry=True)
    srdf = sd.load_srdf(model, os.path.join(root, "srdf", "panda.srdf"))
    q0 = srdf.reference_configurations["default"]
    tau = np.zeros(model.nv)
    tau[3] = -5.0

    def robot_gap(scene, q):
        h = sd.collide(scene, q)
        return min((d for d, k in zip(h.distances, h.pair) if scene.shapes[scene.index[k][1]].body >= 0),
                   default=np.inf)

    far = sd.Scene(model, srdf=srdf, margin=1.0)
    runs = {}
    for self_collision in (True, False):
        scene = sd.Scene(model, self_collision=self_collision, srdf=srdf, friction=0.5)
        with sd.use_backend("native", deterministic=True):
            r = sd.rollout(model, q0, np.zeros(model.nv), tau, scene, DT, 600, gravity=NO_GRAVITY)
        runs[self_collision] = (scene, r, min(robot_gap(far, q) for q in r.q[::10]))
    scene, r, gap = runs[True]
    pressed = [k for k, imp in enumerate(r.impulses) if len(imp) and imp[:, 2].max() > 0]
    assert len(pressed) > 150
    found = scene_contacts(scene, r.q[pressed[-1]])
    pairs = {c.name.partition("#")[0] for c in found if isinstance(c, BodyContact)}
    assert any("panda_link2" in p and "panda_link6" in p for p in pairs), pairs
    assert gap >= -scene.margin
    assert runs[False][2] < -10 * scene.margin



@pytest.mark.parametrize("road", ["numpy", "native"])
def test_a_pair_overlapping_at_rest_falls_with_the_robot(road):
    """The forearm folded into the torso (its axis 0.05 m from the torso's, the capsules 0.01 m into
    each other, as a robot's collision model overlaps at its neutral pose without an SRDF), the robot
    turned and translating as one rigid body: the pair's free velocity is the rounding of the
    difference of two equal point velocities, no velocity an impulse must cancel.  The step takes the
    first iterate (no ADMM iteration), its impulse is zero, and the robot falls freely: the base's
    linear velocity (body axes) gains ``R^T g dt``, nothing else moves."""
    R0 = Rotation.random(random_state=1)
    q = np.r_[0.1, -0.2, 0.3, R0.as_quat(), np.pi / 6, 5 * np.pi / 6]
    scene = sd.Scene(MODEL, friction=0.5)
    assert sd.collide(scene, q).distances.min() == pytest.approx(-0.01, abs=1e-12)
    v = [0.0, 0.0, 0.0, 0.2, 0.1, -0.5, 0.0, 0.0]                  # a plain list: [w, v] of the base
    with sd.use_backend(road, deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error")
        s = sd.contact_step(MODEL, q, v, np.zeros(MODEL.nv), scene, DT)
    assert s.iterations == 0
    assert np.abs(s.impulses).max() == 0.0
    free = np.r_[0, 0, 0, np.array(v[3:6]) + R0.inv().apply(np.array(MODEL.gravity)) * DT, 0, 0]
    assert np.abs(s.v - free).max() <= rounding_bound(MODEL.nv)


def test_anymal_without_its_srdf_is_solved_where_its_legs_overlap_its_body():
    """anymal's collision model (example-robot-data, no SRDF) puts each thigh into the base at the
    neutral pose: four self-collision pairs whose free velocities are rounding while the robot falls
    towards the floor.  Nothing closes, so each step of the default road takes the solver's first
    iterate and reaches its tolerance (no ContactStepWarning)."""
    root = example_robot_data_dir()
    model = sd.load_urdf(os.path.join(root, "anymal_b_simple_description", "robots", "anymal.urdf"),
                         floating_base=True, geometry=True, package_dirs=[root])
    with pytest.warns(sd.SelfOverlapWarning, match="4 pairs"):
        scene = sd.Scene(model, world=[sd.Shape("plane")], friction=0.8)
    q = np.array(model.neutral(), float)
    q[2] = 0.6                                                      # its feet 2.1 cm above the floor
    hits = sd.collide(scene, q)
    assert len(hits.pairs) == 4 and all("THIGH" in b for _, b in hits.pairs) and hits.distances.max() < 0
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        for _ in range(4):
            s = sd.contact_step(model, q, v, tau, scene, DT)
            assert s.iterations == 0
            q, v = s.q, s.v
