"""Pairs with boxes in one native loop (sparsedyn.contact.mesh_box_loop): the broad phase and a
mesh's patches on a box.

Oracles: by hand (two long boxes side by side, a known gap apart, whose bounding spheres overlap; a
cube flat on a box's face, its four bottom corners); coal's ``distance`` (the broad phase never
leaves out a pair coal finds within its cutoff); and the NumPy road (``reduction.mesh_box_patch``,
itself checked by hand and against coal in test_reduction; ``collide`` on the NumPy road) on a random
convex mesh in random poses about a box's faces and edges.  Tolerances: a few products of unit
rotations and coordinates below a metre, ``rounding_bound``; coal's GJK at its tolerance 1e-11 for
the oracle's distances (a pair that coal puts within a micrometre of its cutoff is not judged).
"""

import coal
import numpy as np
import pytest
from scipy.spatial import ConvexHull

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import mesh_box_loop, reduction
from sparsedyn.contact.collision import _plan, placements
from sparsedyn.contact.collision_coal import SAME_DEPTH, _coal_geometry, _hull_convex
from sparsedyn.model.spatial import Transform
from test_collision import coal_distance, random_body_q
from test_reduction import coal_hull

BOUND = rounding_bound(16)
#: The world box (full edges) and its centre: its top face at z = 0.1.
BOX, CENTRE = (0.4, 0.3, 0.1), np.array([0.0, 0.0, 0.05])


def _free_body(shapes):
    """A free body carrying ``shapes`` [(name, kind, size, vertices, faces)], each at its body's origin."""
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    model = b.build()
    for name, kind, size, V, F in shapes:
        model = model.with_geometry(sd.Geometry(name, 0, Transform(np.eye(3), np.zeros(3)), kind, size, "collision",
                                                vertices=V, faces=F))
    return model


def _pebble(rng, n=60, axes=(0.12, 0.08, 0.05)):
    """``(V, F)``: the hull of ``n`` random points of an ellipsoid (generic: no two vertices at one height)."""
    P = rng.standard_normal((n, 3))
    V = P / np.linalg.norm(P, axis=1, keepdims=True) * axes
    return V, ConvexHull(V).simplices


def _near(scene, q, cutoff):
    with sd.use_backend("native", deterministic=True):
        R, p = placements(scene, q)
        plan = _plan(scene)
        near = mesh_box_loop.near_pairs(scene, R, p, cutoff, plan["c"], plan["r"])
    assert near is not None                               # the routine was built (a C compiler is there)
    return near


def test_two_long_boxes_a_gap_apart_are_near_within_the_gap_alone():
    # two 0.2 x 1.0 x 0.2 boxes side by side along x, their facing sides 0.05 apart (the body's spans
    # x in [-0.05, 0.15], the world's [0.2, 0.4]), both turned alike about x: their bounding spheres
    # (radius 0.52, centres 0.25 apart) overlap; their distance is the gap, face to face
    model = _free_body([("a", "box", (0.2, 1.0, 0.2), None, None)])
    for a in (0.0, 0.7):
        Rx = sd.spatial.rpy_to_rot([a, 0.0, 0.0])
        world = sd.Shape("box", (0.2, 1.0, 0.2), placement=(Rx, [0.3, 0.0, 0.0]), name="b")
        scene = sd.Scene(model, world=[world], margin=0.005)
        q = np.r_[0.05, 0.0, 0.0, sd.spatial.rot_to_quat(Rx)]
        assert np.abs(placements(scene, q)[0][0] - Rx).max() <= BOUND
        assert not _near(scene, q, 0.05 - 1e-6)[0] and _near(scene, q, 0.05 + 1e-6)[0]
        assert not _near(scene, q, np.array([0.05 - 1e-6]))[0] and _near(scene, q, [0.05 + 1e-6])[0]


def _mixed_scene(rng):
    """A free body carrying one shape of each kind (a pebble mesh among them), each offset, against a
    world box, sphere, capsule, cylinder and the floor."""
    V, F = _pebble(rng)
    kinds = [("s", "sphere", (0.1,)), ("c", "capsule", (0.06, 0.2)), ("y", "cylinder", (0.07, 0.15)),
             ("x", "box", (0.1, 0.2, 0.12)), ("e", "ellipsoid", (0.05, 0.08, 0.1))]
    model = _free_body([(n, k, s, None, None) for n, k, s in kinds] + [("m", "mesh", (1.0, 1.0, 1.0), V, F)])
    turn = sd.spatial.rpy_to_rot([0.3, -0.5, 0.9])
    world = [sd.Shape("box", BOX, placement=(turn, CENTRE), name="box"),
             sd.Shape("sphere", (0.15,), placement=(np.eye(3), [0.5, 0.2, 0.1]), name="ball"),
             sd.Shape("capsule", (0.05, 0.4), placement=(turn, [-0.4, 0.3, 0.1]), name="rod"),
             sd.Shape("cylinder", (0.1, 0.2), placement=(turn.T, [0.2, -0.5, 0.1]), name="drum"),
             sd.Shape("plane", name="floor")]
    return sd.Scene(model, world=world, margin=0.005)


def test_no_pair_within_its_cutoff_is_left_out_and_most_overlapping_spheres_are():
    """Random poses of a body of six shapes among five world shapes: every pair coal's distance puts
    within the cutoff is near; and of the pairs whose bounding spheres come within the cutoff, the
    bounds leave many out (the point of them)."""
    rng = np.random.default_rng(0)
    scene = _mixed_scene(rng)
    shapes = scene.shapes
    geoms = [_hull_convex(scene, k) if s.kind == "mesh" else _coal_geometry(scene, k) for k, s in enumerate(shapes)]
    plan = _plan(scene)
    within = parted = 0
    for t in range(60):
        R, p, q = random_body_q(rng, 0.5)
        cut = 0.05 if t % 2 else rng.uniform(0.005, 0.1, len(scene.pairs))
        near = _near(scene, q, cut)
        Rg, pg = placements(scene, q)
        # some of the pairs alone (their cutoffs): the same answer, pair by pair
        some = np.flatnonzero(rng.uniform(size=len(scene.pairs)) < 0.4)
        with sd.use_backend("native", deterministic=True):
            part = mesh_box_loop.near_pairs(scene, Rg, pg, np.broadcast_to(cut, len(scene.pairs))[some], plan["c"],
                                            plan["r"], some)
        assert np.array_equal(part, near[some])
        c = pg + np.einsum("kij,kj->ki", Rg, plan["c"])
        cuts = np.broadcast_to(cut, len(scene.pairs))
        for k, (i, j) in enumerate(scene.index.tolist()):
            d, _ = coal_distance(geoms[i], coal.Transform3s(Rg[i], pg[i]), geoms[j], coal.Transform3s(Rg[j], pg[j]))
            if d < cuts[k] - 1e-6:
                assert near[k], (scene.pair_names[k], d, cuts[k])
                within += 1
            elif "plane" not in (shapes[i].kind, shapes[j].kind) and \
                    np.linalg.norm(c[i] - c[j]) - plan["r"][i] - plan["r"][j] < cuts[k] and not near[k]:
                parted += 1
    assert within >= 40 and parted >= 100


def _cube_on_the_top(offset, tilt):
    """test_reduction's cube (0.1 m) on the world box's top face (z = 0.5 there, the box 1 x 1 x 0.5),
    its closest pair given with a normal tilted by ``tilt``."""
    c = np.array([[x, y, z] for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (0.0, 0.1)])
    W = c + [0.1 + offset, 0.05, 0.5]
    n = np.array([np.sin(tilt), 0.0, np.cos(tilt)])
    return W, n


def _native_patch(V, R, p, Rb, pb, half, closest, cut, depth, swap=False):
    """mesh_box_loop_patches of one pair: the mesh shape 0 at ``(R, p)``, the box shape 1."""
    got = mesh_box_loop.mesh_box_loop_patches(V, [[0, len(V)], [0, 0]], np.array([np.zeros(3), half]), [0], [1],
                                              np.array([R, Rb]), np.array([p, pb]), np.array([closest]),
                                              [cut], [depth], [swap])
    assert got is not None                                 # the routine was built
    return got


@pytest.mark.parametrize("tilt", [0.0, 1e-4, 1e-2])
def test_a_cube_flat_on_a_face_gives_its_four_bottom_corners(tilt):
    """By hand (test_reduction's case): flat on the top face, gap 0, the normal's last digits tilted:
    the four bottom corners at height 0, normal +z; half over the edge, the witness on the edge: the
    two corners on the face where the normal is the face's, else the closest pair alone; the box as
    the pair's ``a``: the same rows, witnesses swapped, normals reversed."""
    Rb, pb, half = np.eye(3), np.array([0.0, 0.0, 0.25]), np.array([0.5, 0.5, 0.25])
    for offset, witness in ((0.0, None), (0.4, np.array([0.5, 0.0, 0.5]))):
        W, n = _cube_on_the_top(offset, tilt)
        w = W[0] if witness is None else witness
        closest = np.r_[0.0, w, w, n]
        k, d, wa, wb, nn = _native_patch(W, np.eye(3), np.zeros(3), Rb, pb, half, closest, 0.005, 1e-5)
        want = reduction.mesh_box_patch(W, Rb, pb, half, (0.0, w, w, n), 0.005, 1e-5, SAME_DEPTH)
        assert len(d) == len(want[0]) == (4 if witness is None else 2 if tilt == 0.0 else 1)
        assert k.tolist() == [0] * len(d)
        for got, ref in zip((d, wa, wb, nn), want):
            assert np.abs(got - ref).max() <= BOUND
        if witness is None:
            assert np.all(d == 0.0) and sorted(map(tuple, wa)) == sorted(map(tuple, W[W[:, 2] == 0.5]))
            assert np.array_equal(nn, np.tile([0.0, 0.0, 1.0], (4, 1)))
        _, d2, wa2, wb2, n2 = _native_patch(W, np.eye(3), np.zeros(3), Rb, pb, half, closest, 0.005, 1e-5, True)
        assert np.array_equal(d2, d) and np.array_equal(wa2, wb) and np.array_equal(wb2, wa)
        assert np.array_equal(n2, -nn)


def test_the_patches_are_the_numpy_roads_on_a_random_mesh_about_a_box():
    """A random convex mesh in random poses about the world box's top face and its edges, pressed up
    to 2 cm in, cutoffs of the margin or a look-ahead's: the routine's rows, given coal's closest pair,
    are ``mesh_box_patch``'s row by row (all pairs in one call)."""
    rng = np.random.default_rng(3)
    V, _ = _pebble(rng)
    V = V[ConvexHull(V).vertices]
    Rb = sd.spatial.rpy_to_rot([0.1, -0.2, 0.4])
    pb, half = CENTRE, np.array(BOX) / 2
    hull, box = coal_hull(V, ConvexHull(V).simplices), coal.Box(*BOX)
    poses, closest, cuts = [], [], []
    for t in range(40):
        R, _, _ = random_body_q(rng, 0.1)
        u, v, h = rng.uniform(-0.25, 0.25), rng.uniform(-0.2, 0.2), rng.uniform(-0.02, 0.01)
        low = np.min(V @ R.T @ Rb[:, 2])                   # the mesh's lowest point along the box's z
        p = Rb @ [u, v, half[2]] + pb + Rb[:, 2] * (h - low)   # h above the top's plane, over (u, v)
        d, res = coal_distance(hull, coal.Transform3s(R, p), box, coal.Transform3s(Rb, pb))
        poses.append((R, p))
        closest.append(np.r_[d, res.getNearestPoint1(), res.getNearestPoint2(), -np.asarray(res.normal)])
        cuts.append(0.005 if t % 3 else rng.uniform(0.005, 0.03))
    P = len(poses)
    Rs, ps = np.array([R for R, _ in poses] + [Rb]), np.array([p for _, p in poses] + [pb])
    halves = np.array([np.zeros(3)] * P + [half])
    with sd.use_backend("native", deterministic=True):
        got = mesh_box_loop.mesh_box_loop_patches(V, [[0, len(V)]] * P + [[0, 0]], halves, np.arange(P),
                                                  np.full(P, P), Rs, ps, np.array(closest), cuts,
                                                  reduction.patch_depth(cuts, 0.005))
    faces = 0
    for k in range(P):
        R, p = poses[k]
        cl = closest[k]
        want = reduction.mesh_box_patch(V @ R.T + p, Rb, pb, half, (cl[0], cl[1:4], cl[4:7], cl[7:10]), cuts[k],
                                        float(reduction.patch_depth(cuts[k], 0.005)), SAME_DEPTH)
        mine = got[0] == k
        assert mine.sum() == len(want[0])
        for x, ref in zip(got[1:], want):
            assert np.abs(x[mine] - ref).max() <= BOUND
        faces += len(want[0]) > 1
    assert faces >= 10                                     # patches of several points, not the closest pair alone


def _box_scenes(rng):
    """A pebble on a free body over a world box and the floor (the mesh the pair's ``a``), and a box on a
    free body over a world pebble (the box the pair's ``a``)."""
    V, F = _pebble(rng)
    turn = sd.spatial.rpy_to_rot([0.05, -0.1, 0.3])
    floor = sd.Shape("plane", name="floor")
    first = sd.Scene(_free_body([("pebble", "mesh", (1.0, 1.0, 1.0), V, F)]),
                     world=[sd.Shape("box", BOX, placement=(turn, CENTRE), name="box"), floor], margin=0.005)
    rock = sd.Shape("mesh", mesh=(V * 3, F), placement=(turn, [0.0, 0.0, 0.0]), name="rock")
    second = sd.Scene(_free_body([("crate", "box", (0.1, 0.08, 0.06), None, None)]), world=[rock, floor],
                      margin=0.005)
    return first, second


def test_collide_on_the_default_road_is_the_numpy_roads_about_a_box():
    """collide (the native broad phase, coal's closest pairs, the patches in one call) beside the
    NumPy road at random poses about the world box's (or the world rock's) top and edges: the same
    pairs, distances, points and normals to rounding; q as an array, a list and a tuple."""
    rng = np.random.default_rng(5)
    hits = 0
    for scene, top in zip(_box_scenes(rng), (0.1, 0.15)):
        for t in range(30):
            _, _, q = random_body_q(rng, 0.1)
            q[:3] = [rng.uniform(-0.3, 0.3), rng.uniform(-0.25, 0.25), top + rng.uniform(0.0, 0.06)]
            with sd.use_backend("numpy"):
                want = sd.collide(scene, q)
            with sd.use_backend("native", deterministic=True):
                got = sd.collide(scene, q if t % 3 == 0 else list(q) if t % 3 == 1 else tuple(q))
            assert got.pairs == want.pairs
            for x, y in ((got.distances, want.distances), (got.points, want.points), (got.normals, want.normals)):
                assert np.abs(x - y).max(initial=0.0) <= BOUND
            hits += sum(1 for a, b in got.pairs if "floor" not in (a, b))
    assert hits >= 30


def test_without_the_routines_collide_takes_the_numpy_road(monkeypatch):
    rng = np.random.default_rng(7)
    scene = _box_scenes(rng)[0]
    q = np.r_[0.1, 0.0, 0.14, 0.0, 0.0, 0.0, 1.0]
    with sd.use_backend("native", deterministic=True):
        want = sd.collide(scene, q)
    monkeypatch.setattr(mesh_box_loop, "_routines", lambda: None)
    with sd.use_backend("native", deterministic=True):
        R, p = placements(scene, q)
        assert mesh_box_loop.near_pairs(scene, R, p, 0.005, *(_plan(scene)[k] for k in "cr")) is None
        got = sd.collide(scene, q)
    assert got.pairs == want.pairs and len(got.pairs) >= 1
    assert np.abs(got.distances - want.distances).max() <= BOUND


def test_tables_of_the_wrong_length_are_refused_by_name():
    rng = np.random.default_rng(9)
    scene = _box_scenes(rng)[0]
    q = np.r_[0.1, 0.0, 0.14, 0.0, 0.0, 0.0, 1.0]
    R, p = placements(scene, q)
    with sd.use_backend("native", deterministic=True), pytest.raises(ValueError, match=r"cutoff must be .* \(2,\)"):
        mesh_box_loop.near_pairs(scene, R, p, [0.1, 0.1, 0.1], *(_plan(scene)[k] for k in "cr"))
    V = np.eye(3)
    with pytest.raises(ValueError, match=r"mesh_box_loop_patches: expected .* P = 1 pairs"):
        mesh_box_loop.mesh_box_loop_patches(V, [[0, 3], [0, 0]], np.ones((2, 3)), [0], [1], np.array([np.eye(3)] * 2),
                                            np.zeros((2, 3)), np.zeros((1, 9)), [0.01], [1e-5])
