"""The broad phase's lower bounds of a pair's distance (sparsedyn.contact.near_bounds_c), through
``mesh_box_loop.near_pairs``: a capsule's own separating-axis gaps to a box, sphere, capsule, cylinder or
ellipsoid, and the gaps of two convex shapes' Frank-Wolfe steps (a mesh's hull about a hull, a box, a sphere,
a capsule, a cylinder, an ellipsoid).

Oracles: by hand (a capsule across an ellipsoid's bounding-box corner, a known distance away); coal's
``distance`` (a bound never parts a pair that coal puts within its cutoff); and the broad phase without the
capsule's gaps (the same scene with the capsule's kind unknown to the bounds: the bounding boxes alone), which
parts a subset.  Tolerance: coal's GJK at 1e-11; a pair coal puts within a micrometre of its cutoff is not
judged.
"""

import coal
import numpy as np

import sparsedyn as sd
from sparsedyn.contact import mesh_box_loop, near_bounds_c
from sparsedyn.contact.collision_coal import _coal_geometry, convex_geometry
from sparsedyn.model.spatial import Transform
from test_collision import coal_distance, random_body_q
from test_mesh_box_loop import _near as all_near

#: The world shapes about the capsule: (name, kind, size).
WORLD = [("egg", "ellipsoid", (0.3, 0.2, 0.1)), ("drum", "cylinder", (0.15, 0.3)), ("crate", "box", (0.3, 0.2, 0.4)),
         ("ball", "sphere", (0.12,)), ("rod", "capsule", (0.05, 0.5))]


def _scene(turns):
    """A free body carrying a capsule (radius 0.03, length 0.4) among the world shapes of :data:`WORLD`,
    each at the origin turned by ``turns[k]`` (one world shape a scene: its pair the only one)."""
    b = sd.ModelBuilder("stick").add_body("stick", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    model = b.build().with_geometry(sd.Geometry("shin", 0, Transform(np.eye(3), np.zeros(3)), "capsule", (0.03, 0.4),
                                                "collision"))
    return [sd.Scene(model, world=[sd.Shape(kind, size, placement=(R, np.zeros(3)), name=name)], margin=0.005)
            for (name, kind, size), R in zip(WORLD, turns)]


def _near(scene, q, cut):
    """Whether the broad phase keeps the scene's one pair (on the native road)."""
    return bool(all_near(scene, q, cut)[0])


def _bounding_boxes_only(monkeypatch, turns):
    """:func:`_scene`'s scenes whose broad phase knows no capsule (the bounding boxes alone), made under
    ``monkeypatch``."""
    hidden = {k: v for k, v in near_bounds_c.KIND_CODES.items() if k != "capsule"}
    monkeypatch.setattr(mesh_box_loop, "KIND_CODES", hidden)
    scenes = _scene(turns)
    for scene in scenes:                                   # (their plans made while the capsule is hidden)
        _near(scene, np.r_[1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0], 0.01)
    monkeypatch.undo()
    return scenes


def test_a_capsule_across_an_ellipsoids_box_corner_is_parted_by_its_gap(monkeypatch):
    """The ellipsoid (0.3, 0.2, 0.1) at the origin; the capsule's axis along (1, -1, 0) / sqrt(2) through
    the point (0.3, 0.2, 0) + s (3, 2, 0) / |(3, 2, 0)| about its box's corner: the bounding boxes overlap
    for every s (the bounds without the capsule's gap keep the pair), and the pair is near exactly where
    coal puts it within the cutoff (0.01), judged a micrometre either side."""
    scene = _scene([np.eye(3)] * len(WORLD))[0]
    bare = _bounding_boxes_only(monkeypatch, [np.eye(3)] * len(WORLD))[0]
    R = np.column_stack([[0.0, 0.0, 1.0], [-1.0, -1.0, 0.0], [1.0, -1.0, 0.0]])       # (its z axis along (1, -1, 0))
    R[:, 1:] /= np.sqrt(2)
    quat = sd.spatial.rot_to_quat(R)
    egg, stick = _coal_geometry(scene, 1), _coal_geometry(scene, 0)
    out = np.array([3.0, 2.0, 0.0]) / np.hypot(3.0, 2.0)
    judged = {True: 0, False: 0}
    for s in np.linspace(-0.14, 0.02, 33):
        p = np.array([0.3, 0.2, 0.0]) + s * out
        d, _ = coal_distance(stick, coal.Transform3s(R, p), egg, coal.Transform3s(np.eye(3), np.zeros(3)))
        assert _near(bare, np.r_[p, quat], 0.01)
        if abs(d - 0.01) < 1e-6:
            continue
        near = _near(scene, np.r_[p, quat], 0.01)
        assert near == (d < 0.01), (s, d)
        judged[near] += 1
    assert judged[True] >= 5 and judged[False] >= 10


def test_no_pair_within_its_cutoff_is_parted_and_many_overlapping_boxes_are(monkeypatch):
    """Random poses of the capsule about each world shape, each turned at random: every pair that coal
    puts within the cutoff is near; each pair near with the capsule's gaps is near without them (the
    bounding boxes alone: the capsule's kind unknown to the bounds, a scene built so); and of the pairs the
    boxes keep that coal puts beyond the cutoff, the gaps part many (most where the other shape is round)."""
    rng = np.random.default_rng(7)
    turns = [random_body_q(rng, 0.0)[0] for _ in WORLD]
    scenes, boxes_only = _scene(turns), _bounding_boxes_only(monkeypatch, turns)
    parted = {name: 0 for name, _, _ in WORLD}
    within = 0
    for scene, bare, (name, _, _) in zip(scenes, boxes_only, WORLD):
        world = coal.Transform3s(scene.shapes[1].R, scene.shapes[1].p)
        for _ in range(300):
            R, p, q = random_body_q(rng, 0.45)
            cut = rng.uniform(0.005, 0.05)
            d, _ = coal_distance(_coal_geometry(scene, 0), coal.Transform3s(R, p), _coal_geometry(scene, 1), world)
            if abs(d - cut) < 1e-6:
                continue
            near, loose = _near(scene, q, cut), _near(bare, q, cut)
            assert loose or not near
            if d < cut:
                assert near, (name, d, cut)
                within += 1
            elif loose and not near:
                parted[name] += 1
    assert within >= 100
    # (a box's and a capsule's bounding boxes are nearly the shapes: the gaps part few more pairs there)
    assert parted["egg"] >= 30 and parted["ball"] >= 15 and parted["drum"] >= 8 and parted["rod"] >= 3, parted


#: The world shapes about the mesh: (name, kind, size); the rock is a second hull (:func:`_hull`).
ABOUT_A_HULL = [("rock", "mesh", (1.0, 1.0, 1.0)), ("crate", "box", (0.3, 0.2, 0.4)), ("ball", "sphere", (0.12,)),
                ("rod", "capsule", (0.05, 0.5)), ("drum", "cylinder", (0.15, 0.3)),
                ("egg", "ellipsoid", (0.3, 0.2, 0.1))]


def _hull(rng, radii, n=400):
    """A convex mesh ``(vertices, faces)``: ``n`` points on the ellipsoid of semi-axes ``radii``, each drawn in
    along its radius by up to 5 %, and their convex hull's triangles (hundreds of hull vertices, as a robot
    link's)."""
    from scipy.spatial import ConvexHull
    u = rng.normal(size=(n, 3))
    V = u / np.linalg.norm(u, axis=1)[:, None] * np.asarray(radii) * rng.uniform(0.95, 1.0, (n, 1))
    return V, ConvexHull(V).simplices


def _hull_scenes(rng, turns):
    """A free body carrying a hull (0.12 x 0.08 x 0.05) among :data:`ABOUT_A_HULL`'s shapes, each at the origin
    turned by ``turns[k]`` (one world shape a scene)."""
    b = sd.ModelBuilder("link").add_body("link", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    V, F = _hull(rng, (0.12, 0.08, 0.05))
    model = b.build().with_geometry(sd.Geometry("link", 0, Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0),
                                                "collision", vertices=V, faces=F))
    rock = _hull(rng, (0.2, 0.1, 0.15))
    return [sd.Scene(model, world=[sd.Shape(kind, size, placement=(R, np.zeros(3)), name=name,
                                            mesh=rock if kind == "mesh" else None)], margin=0.005)
            for (name, kind, size), R in zip(ABOUT_A_HULL, turns)]


def test_a_hull_is_never_parted_from_a_shape_within_its_cutoff_and_often_beyond(monkeypatch):
    """Random poses of the hull about each world shape: coal's distance ``d`` (the hulls coal builds of the same
    vertices); at a cutoff a tenth of a millimetre above ``d`` every pair is near (the gap is a lower bound
    of the distance, the hull climbs find the highest vertex); at random cutoffs each pair near is near without
    the hulls' gaps too (the meshes' vertices hidden from the bounds: the bounding boxes alone, a scene built
    so), and of the pairs the boxes keep beyond the cutoff the gaps part many."""
    rng = np.random.default_rng(11)
    turns = [random_body_q(rng, 0.0)[0] for _ in ABOUT_A_HULL]
    scenes = _hull_scenes(np.random.default_rng(3), turns)
    monkeypatch.setattr(mesh_box_loop, "mesh_vertices", lambda scene: (np.zeros((0, 3)), {}))
    boxes_only = _hull_scenes(np.random.default_rng(3), turns)
    for bare in boxes_only:                                # (their plans made while the vertices are hidden)
        _near(bare, np.r_[1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0], 0.01)
    monkeypatch.undo()
    parted, within = {name: 0 for name, _, _ in ABOUT_A_HULL}, 0
    for scene, bare, (name, _, _) in zip(scenes, boxes_only, ABOUT_A_HULL):
        world = coal.Transform3s(scene.shapes[1].R, scene.shapes[1].p)
        mine, other = (convex_geometry(scene, k) for k in (0, 1))
        for _ in range(200):
            R, p, q = random_body_q(rng, 0.5)
            d, _ = coal_distance(mine, coal.Transform3s(R, p), other, world)
            assert _near(scene, q, max(d, 0.0) + 1e-4), (name, d)
            cut = rng.uniform(0.005, 0.05)
            if abs(d - cut) < 1e-6:
                continue
            near, loose = _near(scene, q, cut), _near(bare, q, cut)
            assert loose or not near
            within += d < cut
            parted[name] += loose and not near
    assert within >= 100
    # (a box's bounding box is the box, a capsule's nearly: there the hull's own extents do most of the parting)
    assert sum(parted.values()) >= 30 and parted["rock"] >= 5 and parted["egg"] >= 10, parted
