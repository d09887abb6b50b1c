"""collide's road for scenes of the collision kernel's pairs and pairs of two boxes, with or without
pairs for coal beside them (sparsedyn.contact.box_box_road): its hits are the general road's bit for
bit (the same routine and queries on the same poses) and the NumPy road's to rounding, and at rest the
hand-derived ones; a step's rows from its gathered poses are the placements' bit for bit, and so is the
step."""

import coal
import numpy as np
import pytest

import sparsedyn as sd
import sparsedyn.contact.box_box_step as box_box_step
import sparsedyn.contact.scene_data as scene_data
from conftest import rounding_bound
from sparsedyn.contact.box_box_road import BoxBoxRoad, box_box_road
from sparsedyn.contact.collision import collide_within
from sparsedyn.contact.collision_kernel import kernel_plan
from sparsedyn.model.spatial import Transform
from test_box_box_native import _stack, _stack_by_a_post
from test_collision import coal_distance, coal_shape

BOUND = rounding_bound(64)


def _poses(rng, n):
    """``n`` configurations of the stack: each cube tilted a little and shifted on its support."""
    out = []
    for _ in range(n):
        q = []
        for z, t in zip((0.2 - 1e-5, 0.35 - 2e-5), rng.normal(scale=0.05, size=(2, 3))):
            quat = np.r_[t / 2, 1.0]
            q += [*rng.uniform(-0.03, 0.03, 2), z, *(quat / np.linalg.norm(quat))]
        out.append(np.array(q))
    return out


def _road(scene):
    road = scene.cache.get("collide road")
    return None if road is None else road[1]


@pytest.mark.parametrize("post", [False, True])
def test_collide_takes_the_road_and_its_hits_are_the_general_roads_bit_for_bit(post):
    """The stacked cubes, and beside a world post (a box and a cylinder: coal's closest pair, its rows the
    road's last, from the same query as the general road's)."""
    scene = _stack_by_a_post() if post else _stack()
    with sd.use_backend("native", deterministic=True):
        poses = _poses(np.random.default_rng(3), 30)
        sd.collide(scene, poses[0]), sd.collide(scene, poses[0])     # (the native calls, then the road, built)
        assert isinstance(_road(scene), BoxBoxRoad) and len(_road(scene).hulls) == (2 if post else 0)
        seen = set()
        for q in poses:
            got, want = sd.collide(scene, q), collide_within(scene, q, None)
            assert got.pairs == want.pairs and np.array_equal(got.pair, want.pair)
            for a, b in zip(got[1:4], want[1:4]):
                assert np.array_equal(a, b)
            with sd.use_backend("numpy"):
                slow = sd.collide(scene, list(q))                 # (a plain list: the checked road)
            assert slow.pairs == got.pairs
            for a, b in zip(got[1:4], slow[1:4]):
                assert np.abs(a - b).max(initial=0.0) <= BOUND
            seen |= set(got.pairs)
    assert {("low", "table"), ("low", "high")} | ({("low", "post")} if post else set()) <= seen


def test_the_stack_at_rest_has_its_cubes_corners():
    """The lower cube (0.2 m) 10 um into the table (top z = 0.1), the upper (0.1 m, shifted by (0.02,
    -0.01)) 10 um into the lower's top: four corners under each, d = -10 um, normals from b to a
    (+z from the table to the lower cube, -z from the upper cube to the lower), the points midway
    between the witnesses, 5 um below each support's top."""
    scene = _stack()
    q = np.r_[0, 0, 0.2 - 1e-5, 0, 0, 0, 1, 0.02, -0.01, 0.35 - 2e-5, 0, 0, 0, 1]
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, q)
        h = sd.collide(scene, q)
    assert isinstance(_road(scene), BoxBoxRoad)
    assert sorted(set(h.pairs)) == [("low", "high"), ("low", "table")]
    for pair, nz, corners in ((("low", "table"), 1.0, [(x, y, 0.1 - 5e-6) for x in (-.1, .1) for y in (-.1, .1)]),
                              (("low", "high"), -1.0, [(.02 + x, -.01 + y, 0.3 - 1.5e-5) for x in (-.05, .05)
                                                       for y in (-.05, .05)])):
        mine = [i for i, p in enumerate(h.pairs) if p == pair]
        assert len(mine) == 4
        assert np.abs(h.distances[mine] + 1e-5).max() <= BOUND
        assert np.abs(h.normals[mine] - [0, 0, nz]).max() <= BOUND
        gap = np.abs(h.points[mine][:, None] - np.array(corners)[None]).max(2)     # (hit, corner)
        assert np.all(gap.min(0) <= BOUND) and np.all(gap.min(1) <= BOUND)     # (midway between the witnesses)


def test_a_pair_neither_the_kernels_nor_two_boxes_has_no_road():
    """A cylinder on the table (coal's pair): box_box_road declines the scene."""
    b = sd.ModelBuilder("drum").add_body("drum", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    eye = sd.spatial.Transform(np.eye(3), np.zeros(3))
    model = b.build().with_geometry(sd.Geometry("drum", 0, eye, "cylinder", (0.1, 0.2), "collision"))
    table = sd.Shape("box", (0.6, 0.6, 0.1), placement=(np.eye(3), [0.0, 0.0, 0.05]), name="table")
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor"), table])
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, [0, 0, 0.2, 0, 0, 0, 1])
        from sparsedyn.contact.box_box_native import box_box_plan
        assert box_box_road(scene, kernel_plan(scene), None, box_box_plan(scene)) is None
        assert not isinstance(_road(scene), BoxBoxRoad)


@pytest.mark.parametrize("moving", [False, True])
def test_a_steps_rows_from_the_gathered_poses_are_the_placements(monkeypatch, moving):
    """contact_step on the stack, its two boxes' rows from the road's gather and from the shapes'
    placements (the road declined): the same step, bit for bit."""
    rng = np.random.default_rng(4)
    tau, dt = np.zeros(12), 1e-3
    first, second = _stack(), _stack()
    gathered = scene_data.box_box_poses
    with sd.use_backend("native", deterministic=True):
        for scene in (first, second):                      # (the native calls built, as a simulation's first step)
            sd.contact_step(scene.model, _poses(rng, 1)[0], np.zeros(12), tau, scene, dt)
        for q in _poses(rng, 8):
            v = rng.normal(scale=0.2, size=12) if moving else np.zeros(12)
            for module in (scene_data, box_box_step):
                monkeypatch.setattr(module, "box_box_poses", gathered)
            a = sd.contact_step(first.model, q, v, tau, first, dt)
            assert first.cache.get("box-box poses") is not None
            for module in (scene_data, box_box_step):
                monkeypatch.setattr(module, "box_box_poses", lambda *args: None)
            b = sd.contact_step(second.model, q, v, tau, second, dt)
            for x, y in zip(a, b):
                if isinstance(x, np.ndarray):
                    assert np.array_equal(x, y)
            assert len(a.impulses) > 0


def test_the_roads_hits_are_their_own_arrays_and_bad_q_is_named():
    """The road picks its hits in a buffer it keeps: a later call leaves an earlier call's hits as they
    were (they equal the general road's at their own q); a NaN in q or a q of the wrong length on the
    road raises an error naming q."""
    scene = _stack()
    poses = _poses(np.random.default_rng(5), 2)
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, poses[0]), sd.collide(scene, poses[0])
        assert isinstance(_road(scene), BoxBoxRoad)
        first = sd.collide(scene, poses[0])
        kept = [np.array(x, copy=True) for x in first[1:5]]
        sd.collide(scene, poses[1])
        want = collide_within(scene, poses[0], None)
        for a, b, c in zip(first[1:5], kept, want[1:5]):
            assert np.array_equal(a, b) and np.array_equal(a, c)
        bad = poses[0].copy()
        bad[2] = np.nan
        with pytest.raises(ValueError, match="q.*NaN"):
            sd.collide(scene, bad)
        with pytest.raises(ValueError, match="q.*shape"):
            sd.collide(scene, poses[0][:7])


def _the_general_roads(scene, q):
    """collide's hits at ``q`` (passed as a plain list: the road's quick call), asserted the general
    road's: the same pairs, their points, normals and distances to rounding (the general road's kernel
    of a scene with pairs beside the kernel's is another build of the same formulas: a sphere's
    witness point one rounding apart)."""
    got, want = sd.collide(scene, list(q)), collide_within(scene, q, None)
    assert got.pairs == want.pairs and np.array_equal(got.pair, want.pair)
    for a, b in zip(got[1:4], want[1:4]):
        assert np.abs(a - b).max(initial=0.0) <= BOUND
    return got


def test_a_scene_without_pairs_of_two_boxes_takes_the_road_with_its_pairs_for_coal():
    """A free cylinder (a drum) over the floor beside a world post: the drum on the floor is the kernel's
    pair, the drum against the post coal's closest pair; the road holds no pair of two boxes, its hits are
    the general road's, the post's coal's own distance (GJK/EPA to 1e-9)."""
    b = sd.ModelBuilder("drum").add_body("drum", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    model = b.build().with_geometry(sd.Geometry("drum", 0, Transform(np.eye(3), np.zeros(3)), "cylinder", (0.1, 0.3),
                                                "collision"))
    post = sd.Shape("cylinder", (0.05, 0.6), placement=(np.eye(3), [0.16, 0.0, 0.3]), name="post")
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor"), post])
    rng = np.random.default_rng(8)
    poses = []
    for _ in range(30):
        axis = rng.normal(size=3)
        quat = np.r_[np.sin(0.6) * axis / np.linalg.norm(axis), np.cos(0.6)]
        poses.append(np.r_[rng.uniform(-0.05, 0.05, 2), rng.uniform(0.1, 0.2), quat])
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, poses[0]), sd.collide(scene, poses[0])
        road = _road(scene)
        assert isinstance(road, BoxBoxRoad) and not len(road.bp.pair) and len(road.hulls) == 1
        seen = set()
        for q in poses:
            got = _the_general_roads(scene, q)
            mine = [i for i, p in enumerate(got.pairs) if p == ("drum", "post")]
            if mine:
                Rg, pg = sd.geometry_placements(model, q, "collision")
                d, _ = coal_distance(coal_shape("cylinder", (0.1, 0.3)), coal.Transform3s(Rg[0], pg[0]),
                                     coal_shape("cylinder", (0.05, 0.6)), coal.Transform3s(post.R, post.p))
                assert len(mine) == 1 and abs(got.distances[mine[0]] - d) <= 1e-9
            seen |= set(got.pairs)
    assert {("drum", "floor"), ("drum", "post")} <= seen


def field_scene():
    """``(scene, poses)``: a free capsule (a leg) and a free ellipsoid (an egg) over a bumpy world height
    field beside a world ball, and 40 random poses of the two over the field."""
    from test_heightfield import SIZE
    b = sd.ModelBuilder("two")
    for name in ("leg", "egg"):
        b = b.add_body(name, None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    model = b.build().with_geometry(
        sd.Geometry("leg", 0, Transform(np.eye(3), np.zeros(3)), "capsule", (0.05, 0.3), "collision"),
        sd.Geometry("egg", 1, Transform(np.eye(3), np.zeros(3)), "ellipsoid", (0.1, 0.08, 0.06), "collision"))
    rng = np.random.default_rng(4)
    field = sd.Shape("hfield", SIZE, heights=rng.uniform(0.0, 1.0, (8, 12)), name="ground")
    ball = sd.Shape("sphere", (0.1,), placement=(np.eye(3), [0.2, 0.0, 0.3]), name="ball")
    scene = sd.Scene(model, world=[field, ball], margin=0.02)
    poses = []
    for _ in range(40):
        q = []
        for _ in range(2):
            axis = rng.normal(size=3)
            half = rng.uniform(0.0, 1.5)
            q += [*rng.uniform(-0.2, 0.4, 1), *rng.uniform(-0.15, 0.15, 1), rng.uniform(0.2, 0.4),
                  *(np.sin(half) * axis / np.linalg.norm(axis)), np.cos(half)]
        poses.append(np.array(q))
    return scene, poses


def test_shapes_on_a_height_field_take_the_road_with_its_rows():
    """:func:`field_scene`: the shapes on the field are its rows (``hfield_rows``, one per point as collide
    keeps them), the ellipsoid against the capsule coal's closest pair, the ellipsoid and the capsule
    against the ball the kernel's; the road's hits are the general road's and the NumPy road's
    to rounding."""
    scene, poses = field_scene()
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, poses[0]), sd.collide(scene, poses[0])
        road = _road(scene)
        assert isinstance(road, BoxBoxRoad) and len(road.fields[0]) == 2 and len(road.hulls) == 1
        seen = set()
        for q in poses:
            got = _the_general_roads(scene, q)
            with sd.use_backend("numpy"):
                slow = sd.collide(scene, q)
            assert slow.pairs == got.pairs
            for a, b in zip(got[1:4], slow[1:4]):
                assert np.abs(a - b).max(initial=0.0) <= BOUND
            seen |= set(got.pairs)
    assert {("leg", "ground"), ("egg", "ground"), ("egg", "ball")} <= seen


def test_a_batch_over_a_field_steps_each_state_as_its_single_step(monkeypatch):
    """:func:`field_scene`'s 40 poses as one batch (a velocity each): the rows of its pair for coal and on the
    field are each state's single step's (``extra_rows_by_state``: the broad phases bound once, the roads where a
    pair is near), so the batch's ``q+``, ``v+``, impulses and iterations are the single steps' bit for bit; both
    the field's and coal's pairs touch in some states."""
    import sparsedyn.contact.box_box_road as road
    scene, poses = field_scene()
    model, rng = scene.model, np.random.default_rng(9)
    Q, V = np.array(poses), rng.normal(scale=0.3, size=(len(poses), 12))
    calls = []
    real = road.extra_rows_by_state
    monkeypatch.setattr(scene_data, "extra_rows_by_state", lambda *a: calls.append(1) or real(*a))
    with sd.use_backend("native", deterministic=True):
        batch = sd.contact_step(model, Q, V, np.zeros(12), scene, 0.002)
        ones = [sd.contact_step(model, Q[i], V[i], np.zeros(12), scene, 0.002) for i in range(len(Q))]
        hits = [sd.collide(scene, q) for q in Q]
    assert calls
    for i, one in enumerate(ones):
        assert batch.q[i].tobytes() == one.q.tobytes() and batch.v[i].tobytes() == one.v.tobytes()
        assert batch.impulses[i].tobytes() == one.impulses.tobytes()
        assert int(batch.iterations[i]) == int(one.iterations)
    names = {x for h in hits for pair in h.pairs for x in pair}
    assert {"ground", "leg", "egg"} <= names and any(("leg" in p and "egg" in p) for h in hits for p in h.pairs)
