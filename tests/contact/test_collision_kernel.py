"""The closed-form pairs as one compiled kernel (sparsedyn.contact.collision_kernel) and the step's
data made from it (sparsedyn.contact.scene_data), on the native road they take by default.

``collide`` on the native road equals the vectorised NumPy road (the reference, what the rest of
the suite runs) hit for hit, to the rounding of the closed forms, and its deepest hit is coal's
closest pair; ``scene_slot_data`` equals the slots laid out from Contact objects
(``scene_slots(scene, scene_contacts(scene, q))``).  The closed forms are a few dozen dependent
operations on lengths of order one, so two evaluations differ by ``rounding_bound(64)`` times the
size of the values (metres).
"""

import warnings
from pathlib import Path

import coal
import dm_control
import numpy as np
import pytest

import sparsedyn as sd
from conftest import dm_control_humanoid, rounding_bound
from sparsedyn.codegen import native
from sparsedyn.contact.friction_problem import BodyContact, contact_data, problem_of
from sparsedyn.contact.collision_kernel import CANDIDATES, kernel_plan
from sparsedyn.contact.scene_data import scene_slot_data
from sparsedyn.contact.friction import _options, _slotted_step
from sparsedyn.contact.scene_step import FoundContacts, scene_contacts, scene_slots, scene_step
from test_collision import (SIZES, _on_an_ellipsoid, coal_distance, coal_shape, free_body_scene, random_body_q,
                            sphere_in_cylinder)

HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"
KERNEL_PAIRS = [("sphere", "sphere"), ("sphere", "capsule"), ("capsule", "sphere"), ("capsule", "capsule"),
                ("sphere", "plane"), ("capsule", "plane"), ("box", "plane"), ("cylinder", "plane")]


@pytest.fixture
def native_backend():
    with sd.use_backend("native", deterministic=True):
        yield


def _bound(*arrays):
    return rounding_bound(64) * max(1.0, max((np.abs(x).max(initial=0.0) for x in arrays), default=1.0))


def assert_same_hits(got, want):
    assert got.pairs == want.pairs and np.array_equal(got.pair, want.pair)
    for x, y in zip(got[1:4], want[1:4]):
        assert x.shape == y.shape and np.abs(x - y).max(initial=0.0) <= _bound(y)


def _ran_native(model):
    return [n for n in native.shared(model).kernels if n.startswith("collision_candidates")]


#: a sphere or a capsule against a box (either the robot's): a capsule's closest pair, unless an end is as
#: deep, and its two ends
BOX_PAIRS = [("sphere", "box"), ("box", "sphere"), ("capsule", "box"), ("box", "capsule")]
#: a sphere against a cylinder: its closest pair, or from a centre inside the nearer of the side and the caps
CYLINDER_PAIRS = [("sphere", "cylinder"), ("cylinder", "sphere")]
#: an ellipsoid on a plane: its support point along the plane's normal (against a sphere: its own test)
ELLIPSOID_PAIRS = [("ellipsoid", "plane")]


@pytest.mark.parametrize("kind_a, kind_b", KERNEL_PAIRS + BOX_PAIRS + CYLINDER_PAIRS + ELLIPSOID_PAIRS)
def test_native_collide_is_the_numpy_road_and_coals_closest_pair(kind_a, kind_b, native_backend):
    """Random poses of a free body's shape against a world shape (margin 10 m: every candidate is a
    hit): the kernel's hits are the vectorised road's, the deepest coal's distance and witness points
    (a sphere's centre inside a cylinder: the distance by hand, where coal's EPA leaves through the side)."""
    rng = np.random.default_rng((KERNEL_PAIRS + BOX_PAIRS + CYLINDER_PAIRS + ELLIPSOID_PAIRS).index((kind_a, kind_b)))
    scene = free_body_scene(kind_a, kind_b)
    assert kernel_plan(scene).complete
    ga, gb = coal_shape(kind_a, SIZES[kind_a]), coal_shape(kind_b, SIZES[kind_b])
    per = CANDIDATES.get((kind_a, kind_b), CANDIDATES.get((kind_b, kind_a)))
    counts, inside = set(), 0
    for _ in range(30):
        R, p, q = random_body_q(rng, 0.6)
        got = sd.collide(scene, list(q))                                    # a plain list
        with sd.use_backend("numpy"):
            want = sd.collide(scene, q)
        assert_same_hits(got, want)
        counts.add(len(got.distances))
        k = int(np.argmin(got.distances))
        by_hand = sphere_in_cylinder(scene.shapes[0], R, p, scene.shapes[1], np.eye(3), np.zeros(3))
        if by_hand is not None:
            inside += 1
            assert abs(got.distances[k] - by_hand) <= _bound(by_hand)
            continue
        d, res = coal_distance(ga, coal.Transform3s(R, p), gb, coal.Transform3s(np.eye(3), np.zeros(3)))
        assert abs(got.distances[k] - d) <= 1e-9
        if (kind_a, kind_b) not in (("box", "plane"), ("cylinder", "plane")):   # a corner tie: any of them
            assert np.abs(got.witness_a[k] - res.getNearestPoint1()).max() <= 1e-9
            assert np.abs(got.witness_b[k] - res.getNearestPoint2()).max() <= 1e-9
    if {kind_a, kind_b} == {"capsule", "box"}:          # with and without the closest pair (or ends on its corner)
        assert {per - 1, per} <= counts <= {1, 2, 3}
    else:
        assert counts == {per}
    assert inside >= (2 if {kind_a, kind_b} == {"sphere", "cylinder"} else 0)      # (from inside too)
    assert _ran_native(scene.model)


@pytest.mark.parametrize("kind_a, kind_b", [("ellipsoid", "sphere"), ("sphere", "ellipsoid")])
def test_an_ellipsoid_and_a_sphere_in_the_kernel(kind_a, kind_b, native_backend):
    """A free body's ellipsoid against a world ball, or its ball against a world ellipsoid, at random poses
    (apart, overlapping, the centre inside the ellipsoid): the kernel's one hit is the NumPy road's, a
    critical point of the distance (the closest point's conditions), and apart coal's distance."""
    rng = np.random.default_rng(["ellipsoid", "sphere"].index(kind_a))
    scene = free_body_scene(kind_a, kind_b)
    assert kernel_plan(scene).complete
    e, r = SIZES["ellipsoid"], SIZES["sphere"][0]
    ga, gb = coal_shape(kind_a, SIZES[kind_a]), coal_shape(kind_b, SIZES[kind_b])
    seen = {"apart": 0, "overlapping": 0, "inside": 0}
    for _ in range(60):
        _, _, q = random_body_q(rng, 0.6)
        q[3:] /= np.linalg.norm(q[3:])                  # (a rotation to rounding: the closest point's conditions)
        (R,), (p,) = sd.geometry_placements(scene.model, q, "collision")
        got = sd.collide(scene, q.tolist())
        with sd.use_backend("numpy"):
            want = sd.collide(scene, q)
        assert_same_hits(got, want)
        assert len(got.distances) == 1
        if kind_a == "ellipsoid":                       # (the ball at the origin)
            _on_an_ellipsoid(got, R, p, e, r)
        else:                                           # (the ball at p: the pair moved by -p, seen from it)
            _on_an_ellipsoid(got._replace(points=got.points - p, normals=-got.normals), np.eye(3), -p, e, r)
        d = got.distances[0]
        seen["apart" if d > 0 else "inside" if d < -r else "overlapping"] += 1
        if d > 0:
            want_d, _ = coal_distance(ga, coal.Transform3s(R, p), gb, coal.Transform3s(np.eye(3), np.zeros(3)))
            assert abs(d - want_d) <= 1e-9
    assert min(seen.values()) >= 3, seen
    assert _ran_native(scene.model)


def test_native_collide_on_the_humanoid_is_the_numpy_road(native_backend):
    """dm_control's humanoid (capsules and spheres, 165 pairs, self-collision among them) at random
    configurations near the floor: every pair is the kernel's, and the hits are the NumPy road's."""
    model = dm_control_humanoid()
    scene = sd.Scene(model)
    assert kernel_plan(scene).inside.all()
    rng = np.random.default_rng(3)
    self_hits = world_hits = 0
    for _ in range(25):
        q = model.random_configuration(rng)
        q[2] = rng.uniform(0.0, 0.5)
        got = sd.collide(scene, q)
        with sd.use_backend("numpy"):
            want = sd.collide(scene, q)
        assert_same_hits(got, want)
        world_hits += sum(b == "floor" for _, b in got.pairs)
        self_hits += sum(b != "floor" for _, b in got.pairs)
    assert world_hits >= 10 and self_hits >= 10                       # both kinds of pair were compared
    assert _ran_native(model)


def test_a_scene_with_pairs_for_coal_merges_both_roads(native_backend):
    """A box on the floor and on a table (box-box: coal and its corners): the kernel answers the
    floor pair, the vectorised road the table pair, together the NumPy road's hits in its order."""
    from test_scene_step import TABLE, _scene
    scene = _scene(True)
    assert list(kernel_plan(scene).inside) == [True, False]
    seen = set()
    for z in (0.3, 0.05, 0.29):
        q = [0.3, 0.45, z, 0.1, 0.05, 0, np.sqrt(1 - 0.0125)]
        got = sd.collide(scene, q)
        with sd.use_backend("numpy"):
            want = sd.collide(scene, q)
        assert_same_hits(got, want)
        seen |= {b for _, b in got.pairs}
    assert seen == {TABLE.name, "floor"}


@pytest.mark.parametrize("which", ["box", "humanoid"])
def test_slot_data_are_the_slots_of_the_contact_objects(which, native_backend):
    """The step's data straight from the kernel equal those laid out from Contact objects: the same
    slots (frames), the same slot per contact, the same rows to rounding; the humanoid's contacts on
    bodies whose first frame is not the body's own (points in that frame's axes), and its
    self-collision contacts (two-body slots keyed by the pair of frames)."""
    from test_scene_step import _scene
    scene = _scene(False) if which == "box" else sd.Scene(dm_control_humanoid())
    rng = np.random.default_rng(5)
    compared, two_body = 0, 0
    for t in range(12):
        if which == "box":
            _, _, q = random_body_q(rng, 0.05)
            q[2] = 0.08 + 0.05 * rng.random()
        else:
            q = scene.model.random_configuration(rng)
            q[2] = rng.uniform(0.05, 0.3)
        fast = scene_slot_data(scene, q)
        with sd.use_backend("numpy"):            # every contact: robot-world and self-collision
            contacts = scene_contacts(scene, q)
            want = scene_slots(scene, contacts)
        pair, got = fast
        assert ["/".join(scene.pairs[k]) for k in pair.tolist()] == [c.name.rpartition("#")[0] for c in contacts]
        assert got.frames == want.frames and np.array_equal(got.index, want.index)
        assert np.abs(got.data - want.data).max(initial=0.0) <= _bound(want.data[:, :4], want.data[:, 4:7])
        compared += len(pair)
        two_body += sum(isinstance(c, BodyContact) for c in contacts)
    assert compared >= 12
    assert which == "box" or two_body >= 5                # the two-body slots were compared


def _admm_matrix(model, q, v, tau, contacts):
    """The step's problem (two-body contacts too) and ADMM's ``G + rho I`` at its first ``rho``."""
    from test_friction_kernel import RHO_START
    frames, _, points, planes = contact_data(model, contacts)
    with sd.use_backend("numpy"):
        P = problem_of(model, q, v, tau, frames, points, planes)
    m = P.G.shape[-1]
    return P, P.G + (RHO_START * np.trace(P.G) / m) * np.eye(m)


def _step_rounding(model, q, v, tau, contacts, step):
    """test_friction_kernel's rounding bound of a step (the free motion's solve with ``H``, the
    ADMM's product with ``(G + rho I)^-1``), its problem built with two-body contacts too."""
    from test_friction_kernel import DT, solve_bound
    P, A = _admm_matrix(model, q, v, tau, contacts)
    m = A.shape[-1]
    with sd.use_backend("numpy"):
        H = sd.crba(model, q)
    free = solve_bound(H, P.a) * DT * np.abs(P.a).max() / max(1.0, np.abs(step.v).max())
    return free + rounding_bound(m, np.linalg.cond(A))


def test_a_humanoid_step_with_self_contacts_is_the_same_on_both_roads(native_backend):
    """dm_control's humanoid near the floor, its limbs through each other (robot-world and
    self-collision contacts): the step from the kernel's slot data (no Contact object) equals the
    step laid out from Contact objects, both native (the same compiled step), to the rounding of the
    slot data carried through the solve."""
    from test_friction_kernel import DT
    scene = sd.Scene(dm_control_humanoid())
    model = scene.model
    rng = np.random.default_rng(11)
    for _ in range(50):
        q = model.random_configuration(rng)
        q[2] = 0.25
        with sd.use_backend("numpy"):
            contacts = scene_contacts(scene, q)
        if sum(isinstance(c, BodyContact) for c in contacts) >= 1 and len(contacts) >= 3:
            break
    kinds = {isinstance(c, BodyContact) for c in contacts}
    assert kinds == {True, False}
    v = 0.3 * rng.standard_normal(model.nv)
    tau = np.zeros(model.nv)
    with warnings.catch_warnings():                       # a native build that fails is an error here
        warnings.filterwarnings("error", message=".*could not be built")
        fast, found = scene_step(_slotted_step, model, list(q), v, tau, scene, DT, **_options({}, None))
        assert isinstance(found, FoundContacts)           # the kernel's road: no Contact object
        slow, objects = scene_step(_slotted_step, model, q, v, tau, scene, DT, want_contacts=True,
                                   **_options({}, None))
    assert objects is not None and len(objects) == len(contacts)
    bound = _step_rounding(model, q, v, tau, contacts, slow)
    assert fast.impulses.shape == (len(contacts), 3)
    assert list(fast.modes) == list(slow.modes) and int(fast.iterations) == int(slow.iterations)
    assert np.abs(fast.v - slow.v).max() <= bound * max(1.0, np.abs(slow.v).max())
    # The kernel's world points (x + d n / 2) round differently from the bodies' placements of the
    # Contact objects' points, by c eps |x| (the humanoid within 2 m of its base), and so do the gaps,
    # which the step answers with a velocity gap / dt through (G + rho I)^-1: impulses in N s.
    from conftest import EPS
    A = _admm_matrix(model, q, v, tau, contacts)[1]
    gaps = 16 * EPS * (np.abs(q[:3]).max() + 2.0) / DT * np.linalg.norm(np.linalg.inv(A), 2)
    assert np.abs(fast.impulses - slow.impulses).max() <= bound * max(1e-12, np.abs(slow.impulses).max()) + gaps


@pytest.mark.parametrize("pairs, shapes, message", [
    ([("box", "box", 0, 1, 0, -1)], np.zeros((2, 15)), "no closed form"),
    ([("sphere", "plane", 0, 0, 0, -1)], np.zeros((1, 15)), "distinct"),
    ([("sphere", "plane", 0, 1, 3, -1)], np.zeros((2, 15)), "bodies"),
    ([("sphere", "plane", 0, 1)], np.zeros((2, 15)), "four integers"),
    ([("sphere", "plane", 0, 1, 0, -1)], np.zeros((3, 15)), r"shapes must have shape \(\.\.\., 2, 15\)"),
    ([("sphere", "plane", 0, 1, 0, -1)], np.full((2, 15), np.nan), "shapes must be finite"),
])
def test_bad_input_is_named(pairs, shapes, message):
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    with pytest.raises(ValueError, match=message):
        sd.collision_candidates(b.build(), [0, 0, 1, 0, 0, 0, 1], shapes, pairs)


def test_native_collide_refuses_a_nan_configuration(native_backend):
    scene = free_body_scene("sphere", "plane")
    sd.collide(scene, np.array([0, 0, 1, 0, 0, 0, 1.0]))
    with pytest.raises(ValueError, match="q"):
        sd.collide(scene, np.array([0, 0, np.nan, 0, 0, 0, 1.0]))


def test_plain_lists_give_what_arrays_and_tuples_give(native_backend):
    """A ball 1 cm into the floor: d = -0.01, w_a the ball's lowest point, 0.1 m below its centre in
    its body's axes, n = +z, n . w_b = 0 (by hand); lists of lists as tuples and arrays."""
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    model = b.build()
    shapes = np.zeros((2, 15))
    shapes[:, [0, 4, 8]] = 1.0
    shapes[0, 12] = 0.1
    want = [-0.01, 0.3, -0.2, -0.01, 0.3, -0.2, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 1.0, 0.0]
    q = [0.3, -0.2, 0.09, 0, 0, 0, 1]
    for args in ((q, shapes.tolist(), [["sphere", "plane", 0, 1, 0, -1]]),
                 (np.array(q, float), shapes, (("sphere", "plane", 0, 1, 0, -1),))):
        got = sd.collision_candidates(model, *args)
        assert got.shape == (1, 14) and np.abs(got[0] - want).max() <= rounding_bound(8)


def test_a_scene_with_a_height_field_among_its_shapes_collides(native_backend):
    """dm_control's quadruped: its floor, walls and a height field (four sizes) among the world shapes
    before the kernel's last pair's (the plan's shape table once took no shape of four sizes:
    collide raised a broadcasting error).  Its toes (spheres) just above the floor: the hits are the
    NumPy road's, and a toe's gap is its centre's height less its radius."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # the file's tendons, sites and sensors left out
        model = sd.load_mjcf(str(HUMANOID.parent / "quadruped.xml"), geometry=True)
    scene = sd.Scene(model)
    assert [s.kind for s in scene.shapes if s.body < 0].count("hfield") == 1
    q = np.array(model.neutral(), float)
    toes = [k for k, s in enumerate(scene.shapes) if s.kind == "sphere" and s.body >= 0]
    centres = sd.geometry_placements(model, q, "collision")[1]            # (shapes of the model, 3)
    q[2] += scene.shapes[toes[0]].size[0] + 0.002 - centres[toes, 2].min()
    got = sd.collide(scene, q)
    with sd.use_backend("numpy"):
        want = sd.collide(scene, q)
    assert_same_hits(got, want)
    toe_hits = [k for k, (a, b) in enumerate(got.pairs) if b == "floor" and scene.names[a] in toes]
    assert len(toe_hits) >= 4
    z = sd.geometry_placements(model, q, "collision")[1][:, 2]
    for k in toe_hits:
        i = scene.names[got.pairs[k][0]]
        assert abs(got.distances[k] - (z[i] - scene.shapes[i].size[0])) <= _bound(z)
