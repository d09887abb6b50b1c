"""The geometry of a step's contacts in its slots (sparsedyn.contact.scene_geometry): the kinds of
contact a slot may hold, from the kinds of its scene's shape pairs, derived by hand (0 ``pp``: two
round shapes, or a point and a line; 1 ``pb``: a point of ``a`` on ``b``'s surface (``a`` round or ``b`` a
plane); 2 ``ap``: ``b`` round; 3 ``ll``: two lines, a capsule's side or a box's edge each; two boxes: a corner
of either, so ``pb`` or ``ap``, or two edges; an ellipsoid on a plane, a box or a height field: ``pb``
sliding; a sphere against an ellipsoid ``pb`` turning; a sphere and a cylinder: its side a line, its cap a
face; every slot also ``pb``, a free slot's), a sphere's, a capsule's, a box's and a cylinder's features at a
point and the kind of two capsules' hit by hand, and where a contact set's kinds are told at its state (random
poses).  The curvatures themselves are tested in tests/contact/test_curved_points.py, the geometry compared
with the compiled kernel's and differentiated in tests/contact/test_scene_derivatives.py."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.collision import placements
from sparsedyn.contact.scene_step import scene_contacts, scene_slots
from sparsedyn.contact.scene_geometry import ROUND_A, SLIDING, _feature, _featured, slot_kinds, slot_shapes, told_at_hit
from sparsedyn.model.spatial import Transform
from test_scene import SIDE, box_model

BALL = sd.Shape("sphere", (0.1,), placement=(np.eye(3), [1.0, 0, 0.1]), name="ball")
BLOCK = sd.Shape("box", (0.4, 0.4, 0.1), placement=(np.eye(3), [-1.0, 0, 0.05]), name="block")
FLOOR = sd.Shape("plane", name="floor")
LOG = sd.Shape("capsule", (0.05, 0.6), placement=(np.eye(3), [0, 1.0, 0.05]), name="log")
DRUM = sd.Shape("cylinder", (0.1, 0.6), name="drum")


def _ball_model():
    g = sd.Geometry("ball", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)), "sphere", (SIDE / 2,), "collision")
    return box_model(geometry=False).with_geometry(g)


def _cylinder_model():
    g = sd.Geometry("wheel", 0, Transform(np.eye(3), np.zeros(3)), "cylinder", (0.1, 0.04), "collision")
    return box_model(geometry=False).with_geometry(g)


#: An ellipsoid's axes, turned and off its body's origin.
TURNED = Transform(np.array([[0.36, 0.48, -0.8], [-0.8, 0.6, 0.0], [0.48, 0.64, 0.6]]), np.array([0.02, -0.01, 0.03]))


def _egg_model(size=(0.12, 0.08, 0.05)):
    return box_model(geometry=False).with_geometry(sd.Geometry("egg", 0, TURNED, "ellipsoid", size, "collision"))


def _ball_and_egg():
    return _ball_model().with_geometry(sd.Geometry("egg", 0, TURNED, "ellipsoid", (0.12, 0.08, 0.05), "collision"))


#: A world ellipsoid, its axes turned.
EGG = sd.Shape("ellipsoid", (0.12, 0.08, 0.05), placement=(TURNED.E, [0.1, -0.3, 0.2]), name="world egg")


@pytest.mark.parametrize("model, world, want", [
    (box_model, [FLOOR], (1,)),                      # a box on a plane: its corners, pb
    (box_model, [FLOOR, BALL], (0, 1, 2)),           # a world sphere under a box's face: ap; its edge, corner: pp
    (box_model, [FLOOR, BLOCK], (1, 2, 3)),          # two boxes: a corner of either; two edges: ll
    (box_model, [LOG], (0, 1, 2, 3)),                # a box's corner on a capsule's side pp, its edge ll
    (_ball_model, [FLOOR], (1,)),                    # a robot sphere on a plane: pb
    (_ball_model, [FLOOR, BALL], (0, 1)),            # two spheres: pp
    (_ball_model, [BLOCK], (0, 1)),                  # a sphere on a box's face: pb; on its edge or corner: pp
    (_egg_model, [FLOOR], (1, SLIDING)),             # an ellipsoid on a plane: pb, sliding
    (_egg_model, [BLOCK, BALL], (1, 2, SLIDING)),    # on a box's face sliding; against a sphere: ap
    (_ball_model, [EGG], (1, SLIDING)),              # a sphere against an ellipsoid: pb, its normal turning
    (_ball_model, [DRUM], (0, 1)),                   # a sphere on a cylinder's cap pb, on its side pp
    (_cylinder_model, [BALL], (0, 1, 2)),            # a cylinder's cap on a sphere ap, its side pp
])
def test_a_slots_kinds_are_its_pairs_kinds(model, world, want):
    """One-frame slots (the robot against the world) take the kinds of the world pairs; a slot of two
    frames (robot against robot) those of the robot pairs, here none: ``pb`` alone."""
    scene = sd.Scene(model(), world=world)
    assert slot_kinds(scene, (0, 0, (0, 0))) == (want, want, (1,))


Q = np.array([0.1, -0.2, 0.5, 0.3, -0.1, 0.2, 0.9])


def test_a_balls_normal_turns_over_a_world_ellipsoid_beside_a_sliding_point():
    """On one body an ellipsoid over the floor and a ball against a world ellipsoid, both ``pb`` in slots that
    may slide: the ellipsoid's ``K`` is a vertex's sliding point (``r_a = 0``), the ball's the world
    ellipsoid's turning normal (``r_a`` its radius: what tells them apart, ``r_a / (r_a + ROUND_A)``, is 0 and
    1 exactly), each not zero."""
    scene = sd.Scene(_ball_and_egg(), world=[FLOOR, EGG], margin=1.0)
    q = np.r_[Q[:3], Q[3:] / np.linalg.norm(Q[3:])]
    hits = sd.collide(scene, q)
    slots = scene_slots(scene, scene_contacts(scene, q, hits))
    shapes = slot_shapes(scene, q, hits.pair, slots)
    assert slot_kinds(scene, slots.frames)[0] == (1, SLIDING)
    for names, ra in ((("egg", "floor"), 0.0), (("ball", "world egg"), SIDE / 2)):
        (k,) = [k for k, pair in enumerate(hits.pairs) if pair == names]
        at = k if slots.index is None else slots.index[k]
        assert shapes[at, 0] == ra and shapes[at, 3] == 1.0 and np.abs(shapes[at, 6:]).max() > 0.01, names
        assert ra / (ra + ROUND_A) == (1.0 if ra else 0.0)


def test_a_contact_set_tells_its_shapes_at_the_hit_only_where_its_pairs_do():
    """A box and an ellipsoid on one body over the floor and a block: the ellipsoid's contacts with either
    (a point sliding on a face) and the box's with the block (a corner of either) are told at the hit;
    the box's on the floor (its corners: the pair's own shapes) and an empty set are not."""
    egg = sd.Geometry("egg", 0, TURNED, "ellipsoid", (0.12, 0.08, 0.05), "collision")
    scene = sd.Scene(box_model().with_geometry(egg), world=[FLOOR, BLOCK])
    pair = {tuple(scene.shapes[i].name for i in ij): k for k, ij in enumerate(scene.index.tolist())}
    for names, want in [((("egg", "floor"),), True), ((("egg", "block"),), True), ((("box", "block"),), True),
                        ((("box", "floor"),), False), ((), False), ((("box", "floor"), ("egg", "floor")), True)]:
        assert told_at_hit(scene, np.array([pair[x] for x in names], np.intp)) is want, names


@pytest.mark.parametrize("local, want", [
    ([0.2, 0.2, 0.05], (0, None)),                   # a corner
    ([0.2, -0.1, -0.05], (1, 1)),                    # an edge along y
    ([0.05, -0.2, 0.05], (1, 0)),                    # one along x
    ([0.2, -0.1, 0.01], (2, None)),                  # a face
])
def test_a_boxs_feature_at_a_point_by_hand(local, want):
    """A point on the block (0.4 x 0.4 x 0.1, turned) is a corner where it is at three of its half sizes, an
    edge along the remaining axis (world) at two, a face at one."""
    R = np.array([[0.36, 0.48, -0.8], [-0.8, 0.6, 0.0], [0.48, 0.64, 0.6]])
    shape, p = BLOCK, np.array([0.3, -0.2, 0.5])
    feature, e = _feature(shape, R, p, p + R @ np.asarray(local))
    assert feature == want[0]
    assert (e is None) if want[1] is None else np.array_equal(e, R[:, want[1]])


def test_a_capsules_feature_is_its_side_or_its_end():
    """A capsule's centre point at a hit is a line (its side, along its axis) inside its segment, a point
    at either end; a sphere's is a point."""
    R, p = np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]]), np.array([0.1, 0.2, 0.3])
    assert _feature(LOG, R, p, p + 0.29 * R[:, 2])[0] == 1 and np.array_equal(_feature(LOG, R, p, p)[1], R[:, 2])
    assert _feature(LOG, R, p, p - 0.3 * R[:, 2]) == (0, None) and _feature(BALL, R, p, p) == (0, None)


@pytest.mark.parametrize("local, want", [
    ([0.06, 0.08, 0.2], 1),                          # on its side (radius 0.1): its axis
    ([0.03, -0.04, 0.3], 2),                         # on its cap: a face
    ([-0.06, 0.08, -0.3], 3),                        # on a rim: a curve (held)
])
def test_a_cylinders_feature_is_its_side_its_cap_or_its_rim(local, want):
    """A cylinder's witness point is a line (its side: the axis, the contact a radius away) inside its
    length, a face on a cap off the rim, and its rim (a curve, held) on both."""
    R, p = np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]]), np.array([0.1, 0.2, 0.3])
    kind, e = _feature(DRUM, R, p, p + R @ np.array(local))
    assert kind == want and (np.array_equal(e, R[:, 2]) if want == 1 else e is None)


def _capsule_model(turn):
    g = sd.Geometry("rod", 0, Transform(turn, np.zeros(3)), "capsule", (0.02, 0.4), "collision")
    return box_model(geometry=False).with_geometry(g)


@pytest.mark.parametrize("angle, want", [(0.7, 3), (0.0, 0)])
def test_two_capsules_crossing_are_two_lines_and_parallel_ones_their_pairs_own(angle, want):
    """A rod (a capsule along the body's x, turned ``angle`` about z) 2 mm above the world's log (along x):
    crossing, the hit is ``ll``, ``K`` holding the rod's axis in the body's axes and the log's (world),
    signed so that their cross product is the normal (up); parallel, it is the pair's own ``pp``, ``K`` zero
    (its point held)."""
    c, s = np.cos(angle), np.sin(angle)
    turn = np.array([[0, 0, 1.0], [0, 1, 0], [-1, 0, 0]])        # z to x (either way: the rod's and the log's)
    log = sd.Shape("capsule", (0.05, 0.6), placement=(turn, [0, 1.0, 0.05]), name="log")
    scene = sd.Scene(_capsule_model(turn), world=[log])
    q = np.array([0.1, 1.0, 0.1 + 0.02 + 0.002, 0, 0, np.sin(angle / 2), np.cos(angle / 2)])
    Rf, pf = sd.frame_placements(scene.model, q)
    R, p = placements(scene, q)
    hits = sd.collide(scene, q)
    eps = 64 * np.finfo(float).eps                                # (the rounding of a few turns of unit vectors)
    assert len(hits.pairs) == 1 and np.abs(hits.normals[0] - [0, 0, 1]).max() <= eps
    assert abs(hits.distances[0] - 0.002) <= eps
    wa = hits.witness_a[0]
    data = np.concatenate([[MU_ANY], Rf[0].T @ (wa - pf[0]), hits.normals[0], [hits.witness_b[0] @ hits.normals[0]]])
    kind, K, radii = _featured(scene, scene.index[0], R, p, Rf[0], pf[0], np.eye(3), data, np.array([0, 0.02, 0.05]))
    assert kind == want and radii == (0.02, 0.05)                # (two capsules: their radii)
    if want == 3:
        ea, eb = Rf[0] @ K[0:3], K[3:6]
        assert np.allclose(ea, [c, s, 0] if ea[0] > 0 else [-c, -s, 0], atol=eps)
        assert np.allclose(np.abs(eb), [1, 0, 0], atol=eps) and np.cross(ea, eb)[2] > 0
    else:
        assert np.array_equal(K, np.zeros(6))


#: A friction coefficient (what a slot's data carries first; no part of its geometry).
MU_ANY = 0.5


def _shaped(kind, size):
    g = sd.Geometry(kind, 0, Transform(np.array([[0.36, 0.48, -0.8], [-0.8, 0.6, 0.0], [0.48, 0.64, 0.6]]),
                                       np.array([0.02, -0.01, 0.03])), kind, size, "collision")
    return box_model(geometry=False).with_geometry(g)


@pytest.mark.parametrize("kind, size", [("sphere", (0.05,)), ("capsule", (0.04, 0.3)), ("box", (0.2, 0.1, 0.15)),
                                        ("cylinder", (0.08, 0.2))])
def test_a_contact_set_is_told_at_its_state_where_a_feature_is_not_its_pairs_own(kind, size):
    """At random poses of a sphere, a capsule or a box over a turned world box, a world capsule and a world
    cylinder (faces, edges, corners, sides, ends, caps and rims touching), or of a cylinder over a world
    sphere, a contact set is told at its state (``told_at_hit`` given ``q`` and the slots) exactly where
    the kinds found from its features (``slot_shapes``' told road) differ from its pairs' own (the shapes
    kept per layout: ``slot_geometry``'s weights, radii and ``K``); where its hits' rows tell
    (``witnesses_tell``), ``own_at_witnesses`` agrees, from those rows alone."""
    from sparsedyn.contact.scene_geometry import _kind_table, own_at_witnesses, slot_geometry, witnesses_tell
    from sparsedyn.contact.scene_step import scene_contacts, scene_slots
    turned = np.array([[0.8, 0.0, 0.6], [0.0, 1.0, 0.0], [-0.6, 0.0, 0.8]])
    world = [sd.Shape("box", (0.3, 0.4, 0.2), placement=(turned, [0, 0, 0]), name="crate"),
             sd.Shape("capsule", (0.05, 0.5), placement=(turned, [0.6, 0, 0]), name="log"),
             sd.Shape("cylinder", (0.06, 0.3), placement=(turned.T, [0.3, -0.3, 0]), name="drum")] \
        if kind != "cylinder" else [sd.Shape("sphere", (0.1,), placement=(np.eye(3), [0.3, 0, 0]), name="ball")]
    model = _shaped(kind, size)
    scene = sd.Scene(model, world=world, margin=0.05)
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(150):
        u = rng.normal(size=4)
        q = np.r_[rng.uniform([-0.3, -0.3, -0.3], [0.9, 0.3, 0.3]), u / np.linalg.norm(u)]
        hits = sd.collide(scene, q)
        if not len(hits.pairs):
            continue
        slots = scene_slots(scene, scene_contacts(scene, q, hits))
        pair = np.asarray(hits.pair, np.intp)
        at = np.arange(len(pair)) if slots.index is None else np.asarray(slots.index)
        geometry, table = slot_geometry(scene, q, pair, slots)[at], _kind_table(scene)[0][pair]
        own = np.array_equal(geometry[:, 11:], table[:, 3:]) and np.array_equal(geometry[:, [3, 7]], table[:, 1:3])
        assert told_at_hit(scene, pair, q, slots) is (not own)
        seen.add(own)
        if witnesses_tell(scene, pair):
            Rf, pf = sd.frame_placements(model, q)
            rows = np.concatenate([hits.distances[:, None], hits.points, hits.normals,
                                   (hits.witness_a - pf[0]) @ Rf[0], np.zeros((len(pair), 1))], 1)
            assert own_at_witnesses(scene, pair, rows) is own
    assert seen == {True, False}                                 # both kinds of contact set met
