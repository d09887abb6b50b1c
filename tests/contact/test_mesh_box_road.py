"""collide's road of meshes on boxes (sparsedyn.contact.mesh_box_road): the collision kernel's pairs, the
meshes on the floor and the meshes on a box in one table of slots.

Oracles: coal's ``distance`` (each mesh-box pair's deepest hit is its closest pair, on the mesh's
convex hull); the general road (``collide_within``: ``coal.distance`` per pair, the same routines)
and the NumPy road (the vectorised closed forms, ``reduction.mesh_box_patch``) at random poses of a
body carrying a pebble, a ball and a stone above a world box and the floor, the box listed before
the body's shapes and after them; and the same hits from two threads at once.
Tolerances: ``rounding_bound`` (the roads differ in the order of a few operations); coal's GJK at
1e-11 for its distances.
"""

import threading

import coal
import numpy as np
import pytest
from scipy.spatial import ConvexHull

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import collision, mesh_box_road
from sparsedyn.contact.collision import collide_within, placements
from sparsedyn.contact.collision_coal import _coal_geometry, _hull_convex, _requests
from sparsedyn.model.spatial import Transform
from test_collision import coal_distance, random_body_q

BOUND = rounding_bound(16)
#: The world box (full edges), its centre and its turn (roll, pitch, yaw): its top face about z = 0.1.
BOX, CENTRE, TURN = (0.5, 0.4, 0.1), np.array([0.0, 0.0, 0.05]), [0.02, -0.03, 0.4]


def _scene(box_first, ball_offset=(0.6, 0.0, 0.0), ball=("ball", "sphere", (0.03,)), extra=()):
    """A free body carrying a pebble (a random convex mesh), a stone (another) and a ball (``ball``:
    its name, kind and size), above a
    world box turned a little and the floor; with ``box_first`` the box is a geometry of the model
    before the body's (the scene's first shape, as a file's world geoms are), else a world shape of
    the scene (its shape after the body's); ``extra``: more world shapes, last."""
    rng = np.random.default_rng(11)
    shapes = []
    for name, axes, at in (("pebble", (0.12, 0.08, 0.05), (0.0, 0.0, 0.0)), ("stone", (0.06, 0.05, 0.04),
                                                                             (-0.15, 0.1, 0.02))):
        P = rng.standard_normal((50, 3))
        V = P / np.linalg.norm(P, axis=1, keepdims=True) * axes + at
        shapes.append((name, V, ConvexHull(V).simplices))
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    model = b.build()
    turn = sd.spatial.rpy_to_rot(TURN)
    box = sd.Geometry("box", -1, Transform(turn.T, CENTRE), "box", BOX, "collision")
    if box_first:
        model = model.with_geometry(box)
    for name, V, F in shapes:
        model = model.with_geometry(sd.Geometry(name, 0, Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0),
                                                "collision", vertices=V, faces=F))
    model = model.with_geometry(sd.Geometry(ball[0], 0, Transform(np.eye(3), np.array(ball_offset)), ball[1], ball[2],
                                            "collision"))
    world = [sd.Shape("plane", name="floor")]
    if not box_first:
        world.append(sd.Shape("box", BOX, placement=(turn, CENTRE), name="box"))
    return sd.Scene(model, world=world + list(extra), margin=0.005)


def _poses(rng, n):
    """Configurations of the body over the box's top and its edges, pressed up to 1 cm in."""
    for _ in range(n):
        _, _, q = random_body_q(rng, 0.1)
        q[:3] = [rng.uniform(-0.35, 0.35), rng.uniform(-0.3, 0.3), 0.1 + rng.uniform(0.0, 0.05)]
        yield q


def _same(got, want):
    assert got.pairs == want.pairs
    assert np.array_equal(got.pair, want.pair)
    for x, y in ((got.distances, want.distances), (got.points, want.points), (got.normals, want.normals)):
        assert np.abs(x - y).max(initial=0.0) <= BOUND


@pytest.mark.parametrize("box_first", [True, False])
def test_the_road_is_the_general_and_the_numpy_roads_hit_for_hit(box_first):
    """At random poses about the box: collide on the road (taken: its scene's cache holds it) equals the
    general road and the NumPy road, pair for pair and hit for hit; q as an array, a list and a tuple."""
    scene = _scene(box_first)
    rng = np.random.default_rng(2)
    boxed = 0
    with sd.use_backend("native", deterministic=True):
        for t, q in enumerate(_poses(rng, 40)):
            want = collide_within(scene, q, None)
            got = sd.collide(scene, q if t % 3 == 0 else list(q) if t % 3 == 1 else tuple(q))
            _same(got, want)
            with sd.use_backend("numpy"):
                _same(got, sd.collide(scene, q))
            boxed += sum(1 for a, b in got.pairs if "box" in (a, b))
        road = scene.cache[collision._ROAD]
        assert road[0] is None and isinstance(road[1], mesh_box_road.BoxRoad)
    assert boxed >= 40
    assert (scene.shapes[0].name == "box") == box_first   # (the box's index below the meshes' or above)


def test_each_pairs_deepest_hit_is_coals_closest_pair():
    """coal's oracle: a mesh-box pair's deepest hit has coal's signed distance between the mesh's hull
    and the box, and its normal; coal's witnesses lie on the hit's line (the midpoint +- d/2 n)."""
    scene = _scene(False)
    rng = np.random.default_rng(4)
    shapes = {s.name: k for k, s in enumerate(scene.shapes)}
    checked = 0
    with sd.use_backend("native", deterministic=True):
        for _ in range(2):                                 # (the native calls, then the road, built)
            sd.collide(scene, np.r_[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
        for q in _poses(rng, 30):
            hits = sd.collide(scene, q)
            R, p = placements(scene, q)
            for pair in set(hits.pairs):
                if pair[1] != "box" or pair[0] == "ball":
                    continue
                m, b = shapes[pair[0]], shapes[pair[1]]
                d, res = coal_distance(_hull_convex(scene, m), coal.Transform3s(R[m], p[m]), _coal_geometry(scene, b),
                                       coal.Transform3s(R[b], p[b]))
                mine = [i for i, x in enumerate(hits.pairs) if x == pair]
                deepest = mine[int(np.argmin(hits.distances[mine]))]
                assert abs(hits.distances[deepest] - d) <= 1e-9
                if np.abs(hits.witness_a[deepest] - res.getNearestPoint1()).max() <= 1e-9:   # coal's own pair
                    assert np.abs(hits.witness_b[deepest] - res.getNearestPoint2()).max() <= 1e-9
                    assert np.abs(hits.normals[deepest] + np.asarray(res.normal)).max() <= 1e-9
                checked += 1
    assert checked >= 30


def test_a_pair_the_road_does_not_hold_gives_way_to_the_general_road():
    """A drum (a cylinder, axis z: a cylinder-box pair, no native road's and no mesh's) 3 mm over the
    box: the road answers None and collide answers the general road's hits, the drum's among them at
    the height of its lowest point over the top face (by hand: the centre's height less the support
    ``L/2 |n_z| + r sqrt(1 - n_z^2)`` of the cylinder along the face's normal ``n``); far from the box
    the road answers."""
    r, L = 0.03, 0.04
    scene = _scene(False, ball_offset=(0.0, 0.0, -0.04), ball=("drum", "cylinder", (r, L)))
    n = sd.spatial.rpy_to_rot(TURN)[:, 2]                 # the top face's normal
    z = 0.04 + CENTRE @ n / n[2] + (BOX[2] / 2 + L / 2 * abs(n[2]) + r * np.sqrt(1 - n[2] ** 2) + 0.003) / n[2]
    with sd.use_backend("native", deterministic=True):
        high = np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0]
        sd.collide(scene, high), sd.collide(scene, high)    # (the first builds the native calls the road needs)
        road = scene.cache[collision._ROAD][1]
        assert mesh_box_road.box_road_rows(scene, road, high) is not None
        low = np.r_[0.0, 0.0, z, 0.0, 0.0, 0.0, 1.0]      # the drum's centre at (0, 0, z - 0.04), over the face
        assert mesh_box_road.box_road_rows(scene, road, low) is None
        got, want = sd.collide(scene, low), collide_within(scene, low, None)
    _same(got, want)
    drum = [d for (a, b), d in zip(got.pairs, got.distances) if "drum" in (a, b)]
    assert len(drum) == 1 and abs(drum[0] - 0.003) <= 1e-9      # (coal's GJK at 1e-11)


def test_two_threads_get_each_their_own_hits():
    """coal's solvers are kept per thread: two threads colliding the same scene at once, each its own
    poses, get the hits of those poses alone."""
    scene = _scene(True)
    rng = np.random.default_rng(8)
    qs = list(_poses(rng, 24))
    got = [None] * len(qs)

    def work(start):                               # (the backend is the process's: chosen around the threads)
        for _ in range(5):
            for i in range(start, len(qs), 2):
                got[i] = sd.collide(scene, qs[i])

    with sd.use_backend("native", deterministic=True):
        want = [collide_within(scene, q, None) for q in qs]
        sd.collide(scene, qs[0]), sd.collide(scene, qs[0])
        threads = [threading.Thread(target=work, args=(s,)) for s in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for g, w in zip(got, want):
        _same(g, w)
    assert len(scene.cache[collision._ROAD][1].solvers) >= 2


def _road_queries(scene, rng, n):
    """``(road, [(slots, R, p)])``: the road of ``scene`` and, at ``n`` poses about the box, the mesh-box
    slots whose pair coal finds within 2 cm and the shapes' placements."""
    with sd.use_backend("native", deterministic=True):
        high = np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0]
        sd.collide(scene, high), sd.collide(scene, high)
        road = scene.cache[collision._ROAD][1]
        out = []
        for q in _poses(rng, n):
            R, p = placements(scene, q)
            slots = [s for s, (m, b) in enumerate(zip(road.ms, road.bs))
                     if coal_distance(_hull_convex(scene, m), coal.Transform3s(R[m], p[m]), _coal_geometry(scene, b),
                                      coal.Transform3s(R[b], p[b]))[0] < 0.02]
            out.append((slots, np.ascontiguousarray(R), np.ascontiguousarray(p)))
    return road, out


def test_the_roads_coal_answers_are_coals_at_the_general_roads_request():
    """The road's coal answers (its results' fields read in place, one view per result; EPA capped at
    EPA_ITERATIONS) equal, bit for bit, coal's accessors' copies (getNearestPoint1, getNearestPoint2,
    normal, the distance returned) of the same queries along the same poses at the general road's
    request (EPA's cap 1000): a run that settles below the cap takes the same steps."""
    scene = _scene(False)
    road, queries = _road_queries(scene, np.random.default_rng(5), 30)
    mine = mesh_box_road._scratch(road)
    assert mine[4] is not None                     # (coal's results laid out as the views read them)
    assert mine[3].epa_max_iterations == mesh_box_road.EPA_ITERATIONS < 1000
    per, tm, tb, _, _, _ = mesh_box_road._scratch(road)
    general = _requests(coal)[0]
    assert general.epa_max_iterations == 1000
    deep = 0
    for slots, R, p in (x for x in queries if x[0]):          # (the road asks for none where none is near)
        road.solvers[threading.get_ident()] = mine
        got = mesh_box_road._closest(road, slots, R, p)
        want = mesh_box_road._closest_copied(per, tm, tb, general, slots, R, p)
        assert np.array_equal(got, want)
        deep += int((want[9 * len(slots):] < 0).sum())
    assert deep >= 10                              # (EPA's runs among them)



def test_a_query_that_epas_cap_stops_goes_to_the_general_road(monkeypatch):
    """With EPA capped at one iteration, coal's penetrations that EPA does not settle in it are caught by
    the patch routine's depth test: the road answers None there and collide answers the general road's
    hits (EPA at 1000 iterations), pair for pair and hit for hit."""
    def road_rows(scene):
        road = scene.cache[collision._ROAD][1]
        return lambda q: mesh_box_road.box_road_rows(scene, road, q)
    assert capped_epa_declines(monkeypatch, 6, road_rows) >= 3


def capped_epa_declines(monkeypatch, seed, answers):
    """With EPA capped at one iteration, collide on 20 poses of :func:`_poses` (``seed``) of the
    scene with a world box, each equal to the general road's hits; returns how many times the road
    ``answers(scene)`` (a function of ``q``, made once the scene has been collided at rest) gave None."""
    monkeypatch.setattr(mesh_box_road, "EPA_ITERATIONS", 1)
    scene = _scene(True)
    rng = np.random.default_rng(seed)
    declined = 0
    with sd.use_backend("native", deterministic=True):
        high = np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0]
        sd.collide(scene, high), sd.collide(scene, high), sd.collide(scene, high)
        road = answers(scene)
        for q in _poses(rng, 20):
            _same(sd.collide(scene, q), collide_within(scene, q, None))
            declined += road(q) is None
    return declined


def test_the_roads_epa_answers_pass_its_depth_test():
    """At the road's own cap, along poses pressed into the box, the road declines none of coal's answers
    (each penetration EPA settled passes the depth test): its rows come from the road itself."""
    scene = _scene(False)
    rng = np.random.default_rng(3)
    with sd.use_backend("native", deterministic=True):
        high = np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0]
        sd.collide(scene, high), sd.collide(scene, high)
        road = scene.cache[collision._ROAD][1]
        for q in _poses(rng, 30):
            assert mesh_box_road.box_road_rows(scene, road, q) is not None
