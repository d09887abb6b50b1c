"""Collision detection (sparsedyn.contact.collision) against coal's own ``distance``: a free body
carrying one shape against a world shape, or two bodies, at random poses, for every pair kind the
scene supports (closed forms and the pairs handed to coal).

coal's ``distance`` gives the signed distance (negative: penetration), the witness points on each
shape and the normal from shape 1 to shape 2; ours the normal from b to a.  Where a pair gives
several hits (a box's corners on a plane, the ends of a capsule), the deepest is coal's closest pair.
"""

import warnings

import coal
import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.contact.collision import collide_within, placements
from sparsedyn.interop.pinocchio import q_to_pinocchio
from sparsedyn.model.spatial import Transform

from conftest import dm_control_humanoid, rounding_bound
from erd import ROBOTS, convex_meshes, robots_dir

# shape kinds and sizes used below
SIZES = {"sphere": (0.3,), "capsule": (0.2, 0.5), "cylinder": (0.25, 0.6), "box": (0.3, 0.5, 0.4),
         "ellipsoid": (0.2, 0.3, 0.4), "plane": ()}


def cube_mesh(half):
    V = np.array([[x, y, z] for x in (-half, half) for y in (-half, half) for z in (-half, half)], float)
    F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return V, F


def free_body_scene(kind_a, kind_b, margin=10.0, mesh_a=None, world_pose=None):
    """A free body carrying a ``kind_a`` shape, against a world ``kind_b`` shape."""
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    V, F = mesh_a if mesh_a is not None else (None, None)
    g = sd.Geometry("a", 0, Transform(np.eye(3), np.zeros(3)), kind_a,
                    SIZES.get(kind_a, (1.0, 1.0, 1.0)) if kind_a != "plane" else (0.0, 0.0), "collision",
                    vertices=V, faces=F)
    world = sd.Shape(kind_b, SIZES[kind_b], placement=world_pose, name="b")
    return sd.Scene(b.build().with_geometry(g), world=[world], margin=margin)


def coal_shape(kind, size):
    if kind == "sphere":
        return coal.Sphere(*size)
    if kind == "capsule":
        return coal.Capsule(*size)
    if kind == "cylinder":
        return coal.Cylinder(*size)
    if kind == "box":
        return coal.Box(*size)
    if kind == "ellipsoid":
        return coal.Ellipsoid(*size)
    return coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0)


def coal_distance(ga, Ta, gb, Tb, with_tolerance=False):
    """coal's signed distance and DistanceResult, at tolerance 1e-11 (coal's default, 1e-6, is the
    accuracy of its GJK/EPA iterations), or at coal's default where EPA fails at 1e-11 (it then
    reports -DBL_MAX: a curved shape deep in another); ``with_tolerance``: and the tolerance it ran at."""
    req = coal.DistanceRequest()
    req.gjk_tolerance = req.epa_tolerance = 1e-11
    req.gjk_max_iterations = req.epa_max_iterations = 1000
    res = coal.DistanceResult()
    d = coal.distance(ga, Ta, gb, Tb, req, res)
    tolerance = req.gjk_tolerance
    if d < -1e300:
        res, req = coal.DistanceResult(), coal.DistanceRequest()
        d, tolerance = coal.distance(ga, Ta, gb, Tb, req, res), req.epa_tolerance
    assert -1e300 < d < np.inf
    return (d, res, tolerance) if with_tolerance else (d, res)


def random_body_q(rng, spread):
    """A random pose ``(R, p)`` of a free body and its configuration ``q = [p, quaternion x y z w]``."""
    while True:
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        R, p = Q * np.sign(np.linalg.det(Q)), rng.uniform(-spread, spread, 3)
        w = np.sqrt(max(0.0, 1 + np.trace(R))) / 2
        if w > 1e-3:                                       # away from half turns, where this formula fails
            quat = [(R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w), w]
            return R, p, np.concatenate([p, quat])


PAIRS = [("sphere", "sphere"), ("sphere", "capsule"), ("capsule", "sphere"), ("capsule", "capsule"),
         ("sphere", "box"), ("box", "sphere"), ("sphere", "plane"), ("capsule", "plane"), ("box", "plane"),
         ("cylinder", "plane"),
         # pairs handed to coal
         ("box", "box"), ("capsule", "box"), ("cylinder", "sphere"), ("cylinder", "box"), ("ellipsoid", "plane"),
         ("ellipsoid", "sphere"), ("ellipsoid", "box")]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kind_a, kind_b", PAIRS)
def test_deepest_hit_is_coals_closest_pair(kind_a, kind_b, seed):
    rng = np.random.default_rng([seed, PAIRS.index((kind_a, kind_b))])
    scene = free_body_scene(kind_a, kind_b)
    ga, gb = coal_shape(kind_a, SIZES[kind_a]), coal_shape(kind_b, SIZES[kind_b])
    checked = penetrating = 0
    while checked < 40:
        R, p, q = random_body_q(rng, 0.6)
        Rg, pg = sd.geometry_placements(scene.model, q, "collision")
        assert np.allclose(Rg[0], R, atol=1e-12) and np.allclose(pg[0], p, atol=1e-12)
        # coal gets our placement (equal to R, p to rounding): GJK's witness points move by up to the
        # square root of its tolerance under a rounding-size change of the input
        d, res, tol = coal_distance(ga, coal.Transform3s(Rg[0], pg[0]), gb, coal.Transform3s(np.eye(3), np.zeros(3)),
                                    with_tolerance=True)
        hits = sd.collide(scene, q)
        if d >= scene.margin:
            assert len(hits.distances) == 0
            continue
        assert len(hits.distances) >= 1 and all(pair == ("a", "b") for pair in hits.pairs)
        if (kind_a, kind_b) == ("ellipsoid", "sphere") and d < 0:
            # overlapping: coal's EPA on two curved shapes stops short of 1e-9 (at 1e-11 its depth was 2e-9 off,
            # its normal 4e-6; where it fails there, at its default's 1e-6); the closed form's own conditions
            _on_an_ellipsoid(hits, R, p, SIZES[kind_a], SIZES[kind_b][0])
            checked, penetrating = checked + 1, penetrating + 1
            continue
        assert abs(hits.distances.min() - d) <= 1e-9, (q, hits.distances.min(), d)
        # the deepest hits: one of them (a face on a face ties its corners) is coal's closest pair
        deepest = np.flatnonzero(hits.distances <= d + 1e-9)
        err = [max(np.abs(hits.witness_a[k] - res.getNearestPoint1()).max(),
                   np.abs(hits.witness_b[k] - res.getNearestPoint2()).max(),
                   np.abs(hits.normals[k] + np.asarray(res.normal)).max()) for k in deepest]
        # where coal iterates (GJK, EPA) and we add closed-form ends (capsule-box) or an ellipsoid's support
        # point on a box's face or its closest point to a sphere's centre, that can be the deepest hit: its
        # witness points are exact, coal's EPA witness points converge more slowly than its depth (to about
        # sqrt(tolerance)), its GJK witness on an ellipsoid to sqrt(2 tol R) (R its largest curvature radius,
        # a^2 / c = 0.8 m; a sphere against it only narrows the gap's valley); box-box is closed-form throughout
        on_egg = 1.01 * np.sqrt(2 * tol * 0.4 ** 2 / 0.2)
        bound = {("capsule", "box"): 1e-5, ("ellipsoid", "box"): on_egg, ("ellipsoid", "sphere"): on_egg}
        assert min(err) <= bound.get((kind_a, kind_b), 1e-9), (kind_a, kind_b, q, err)
        # every hit: unit normal, w_a - w_b = d n
        assert np.allclose(np.linalg.norm(hits.normals, axis=1), 1, atol=1e-12)
        checked += 1
        penetrating += d < 0
    assert penetrating >= 3 and checked - penetrating >= 3          # both sides of the surface were tested


def _on_an_ellipsoid(hits, R, p, radii, r):
    """Asserts that ``hits`` (one) of an ellipsoid of semi-axes ``radii`` at ``(R, p)`` against a sphere of
    radius ``r`` centred at the origin is a critical point of their distance: ``w_a`` on the ellipsoid,
    ``n`` its inward normal there (the implicit function's gradient), the sphere's centre on the normal's
    line, ``d + r`` from ``w_a``, and ``w_b`` a radius from the centre towards it.  (That it is the least:
    :mod:`test_ellipsoid`'s sampling of the surface.)"""
    e, (wa,), (wb,), (n,), (d,) = np.asarray(radii), hits.witness_a, hits.witness_b, hits.normals, hits.distances
    bound = rounding_bound(64)
    x = R.T @ (wa - p)
    g = R @ (x / e ** 2)
    assert abs(((x / e) ** 2).sum() - 1) <= bound and np.abs(n + g / np.linalg.norm(g)).max() <= bound
    assert np.abs(wa - (d + r) * n).max() <= bound and np.abs(wb - r * n).max() <= bound


# --- robots' collision models against Pinocchio's computeCollisions --------------------------------

ROBOT_SRDF = {"ur5": "ur_description/srdf/ur5.srdf", "panda": "panda_description/srdf/panda.srdf",
              "solo12": "solo_description/srdf/solo.srdf", "talos_reduced": "talos_data/srdf/talos.srdf"}


def pin_geometry(path, srdf, floating):
    """Pinocchio's model and collision model, all pairs less the SRDF's (example-robot-data's loader), each
    mesh its convex hull (as a scene collides a mesh)."""
    share = str(robots_dir().parent.parent)          # .../share, which holds the example-robot-data package
    args = (str(path), [share]) + ((pin.JointModelFreeFlyer(),) if floating else ())
    pm, gm, _ = pin.buildModelsFromUrdf(*args)
    convex_meshes(gm)
    gm.addAllCollisionPairs()
    pin.removeCollisionPairs(pm, gm, str(srdf))
    return pm, gm


def pin_collisions(pm, gm, q_pin):
    """{frozenset of the two geometry names: whether they collide} for every pair of ``gm``."""
    gd = pin.GeometryData(gm)
    pin.computeCollisions(pm, pm.createData(), gm, gd, q_pin, False)
    names = [g.name for g in gm.geometryObjects]
    return {frozenset((names[p.first], names[p.second])): gd.collisionResults[k].isCollision()
            for k, p in enumerate(gm.collisionPairs)}


@pytest.mark.filterwarnings("ignore::sparsedyn.SelfOverlapWarning")   # talos's grippers in its legs at neutral
@pytest.mark.parametrize("robot", ["ur5", "panda", "solo12", "talos_reduced"])
def test_pairs_that_touch_are_pinocchios(robot):
    floating = robot in ("solo12", "talos_reduced")
    path = robots_dir() / ROBOTS[robot]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(path, floating_base=floating, geometry=True)
        srdf = sd.load_srdf(model, robots_dir() / ROBOT_SRDF[robot])
    scene = sd.Scene(model, srdf=srdf, margin=0.0)
    pm, gm = pin_geometry(path, robots_dir() / ROBOT_SRDF[robot], floating)
    # the pairs Pinocchio checks and we do not are those of a parent and a child link
    ours_pairs = {frozenset(p) for p in scene.pairs}
    for key in set(pin_collisions(pm, gm, pin.neutral(pm))) - ours_pairs:
        a, b = (scene.shape(n).body for n in key)
        assert a == b or (a >= 0 and model.parent[a] == b) or (b >= 0 and model.parent[b] == a), key
    rng = np.random.default_rng(7)
    touched = 0
    for _ in range(5 if robot == "talos_reduced" else 40):
        q = model.random_configuration(rng)
        ref = pin_collisions(pm, gm, q_to_pinocchio(model, q))
        hits = sd.collide(scene, q)
        ours = {frozenset(p) for p, d in zip(hits.pairs, hits.distances) if d < 0}
        for pair in scene.pairs:
            key = frozenset(pair)
            assert key in ref, (pair, "a pair Pinocchio does not check")
            assert (key in ours) == ref[key], (robot, pair, key in ours, ref[key])
        touched += len(ours)
    assert touched > 0                 # random configurations of these robots do bring links together


def mixed_scene():
    """Two free bodies carrying every closed-form kind, so that pairs of one kind come in both orders
    (a sphere of body 0 against a capsule of body 1, a capsule of body 0 against a sphere of body 1)."""
    b = sd.ModelBuilder("two")
    for name in ("one", "two"):
        b.add_body(name, None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    model = b.build()
    geoms = []
    for body in (0, 1):
        for k, kind in enumerate(("sphere", "capsule", "box", "cylinder")):
            X = Transform(np.eye(3), np.array([0.3 * k - 0.45, 0.1 * body, 0.0]))
            geoms.append(sd.Geometry(f"{kind}{body}", body, X, kind, SIZES[kind], "collision", link=f"b{body}"))
    world = [sd.Shape("plane", name="floor"), sd.Shape("box", (0.5, 0.5, 0.5), placement=(np.eye(3), [0.6, 0, 0]),
                                                        name="crate")]
    return sd.Scene(model.with_geometry(*geoms), world=world, margin=0.05)


def sphere_in_cylinder(sa, Ra, pa, sb, Rb, pb):
    """The signed distance of a sphere whose centre lies inside a cylinder, the other of the pair (the
    nearer of leaving through the side and through a cap, less the radius), else None."""
    if {sa.kind, sb.kind} != {"sphere", "cylinder"}:
        return None
    (s, c, pc, Rc) = (sa, sb, pb, Rb) if sa.kind == "sphere" else (sb, sa, pa, Ra)
    ps = pa if sa.kind == "sphere" else pb
    x = Rc.T @ (ps - pc)
    side, cap = c.size[0] - np.hypot(x[0], x[1]), c.size[1] / 2 - abs(x[2])
    return -min(side, cap) - s.size[0] if side >= 0 and cap >= 0 else None


@pytest.mark.parametrize("which", ["mixed", "humanoid"])
def test_every_pair_of_a_scene_is_coals(which):
    if which == "humanoid":
        scene = sd.Scene(dm_control_humanoid(), margin=0.05)
    else:
        scene = mixed_scene()
    model = scene.model
    rng = np.random.default_rng(3)
    kinds = set()
    for _ in range(20):
        q = model.random_configuration(rng)
        q[:3] = rng.uniform(-0.3, 0.3, 3)                # the (first) free body near the floor and the others
        if which == "mixed":
            q[7:10] = q[:3] + rng.uniform(-0.3, 0.3, 3)
        hits = sd.collide(scene, q)
        R, p = placements(scene, q)
        for k, (a, b) in enumerate(scene.pairs):
            i, j = scene.names[a], scene.names[b]
            sa, sb = scene.shapes[i], scene.shapes[j]
            d, res = coal_distance(coal_shape(sa.kind, sa.size), coal.Transform3s(R[i], p[i]),
                                   coal_shape(sb.kind, sb.size), coal.Transform3s(R[j], p[j]))
            mine = np.flatnonzero(hits.pair == k)
            if d >= scene.margin:
                assert len(mine) == 0, (a, b, d)
                continue
            inside = sphere_in_cylinder(sa, R[i], p[i], sb, R[j], p[j])
            if inside is not None:                # coal's EPA leaves a cylinder through its side: by hand
                assert len(mine) == 1 and abs(hits.distances[mine[0]] - inside) <= 4e-15, (a, b, inside)
                kinds.add(frozenset((sa.kind, sb.kind)))
                continue
            assert len(mine) and abs(hits.distances[mine].min() - d) <= 1e-9, (a, b, d)
            exact = {"box", "capsule"} != {sa.kind, sb.kind}
            err = [max(np.abs(hits.witness_a[m] - res.getNearestPoint1()).max(),
                       np.abs(hits.witness_b[m] - res.getNearestPoint2()).max()) for m in mine]
            assert min(err) <= (1e-9 if exact else 1e-5), (a, b, err)
            kinds.add(frozenset((sa.kind, sb.kind)))
    assert len(kinds) >= (4 if which == "mixed" else 2)


def test_mesh_on_a_plane_is_coals_convex_hull_on_a_half_space():
    """A robot mesh (solo12's lower leg, an STL file) against a plane: the deepest hit is coal's
    distance from the mesh's convex hull (coal's own ``buildConvexHull``) to the half-space."""
    path = robots_dir() / "solo_description" / "meshes" / "stl" / "solo12" / "solo12_lower_leg_left_side.stl"
    b = sd.ModelBuilder("leg").add_body("leg", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("shin", 0, Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0), "collision", mesh=str(path))
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("plane", name="floor")], margin=0.01)
    bvh = coal.MeshLoader().load(str(path), np.ones(3))
    bvh.buildConvexHull(True, "Qt")
    rng = np.random.default_rng(5)
    seen = 0
    while seen < 20:
        _, _, q = random_body_q(rng, 0.1)
        Rg, pg = sd.geometry_placements(scene.model, q, "collision")
        res = coal.DistanceResult()
        d = coal.distance(bvh.convex, coal.Transform3s(Rg[0], pg[0]), coal_shape("plane", ()),
                          coal.Transform3s(np.eye(3), np.zeros(3)), coal.DistanceRequest(), res)
        hits = sd.collide(scene, q)
        if d >= scene.margin:
            assert len(hits.distances) == 0
            continue
        k = int(np.argmin(hits.distances))
        assert abs(hits.distances[k] - d) <= 1e-9 and 1 <= len(hits.distances) <= 4
        assert np.allclose(hits.witness_a[k], res.getNearestPoint1(), rtol=0, atol=1e-9)
        assert np.allclose(hits.normals, [0, 0, 1], rtol=0, atol=1e-15)
        seen += 1


@pytest.mark.parametrize("dz", [0.0, -1e-7, 1e-9, 2e-3])
@pytest.mark.parametrize("turn", [0.0, np.pi / 2])
def test_box_stacked_on_a_box_of_its_footprint_touches_through_the_faces(dz, turn):
    # a box resting on a box of the same footprint (coplanar sides; turned by a quarter turn about z, the
    # same footprint again): every corner of the resting faces lies on the common side edges as well,
    # as near to the side faces as to the resting ones; its normal is still the resting face's +z (by
    # hand; coal's normal from a to b is -z), its distance the gap dz, its witness on the face
    size = SIZES["box"][0], SIZES["box"][0], SIZES["box"][2]
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("a", 0, Transform(np.eye(3), np.zeros(3)), "box", size, "collision")
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("box", size, name="b")], margin=0.005)
    top = size[2] + dz
    q = [0.0, 0.0, top, 0.0, 0.0, np.sin(turn / 2), np.cos(turn / 2)]
    hits = sd.collide(scene, q)
    assert len(hits.distances) == 4                     # the four corners of the resting face
    assert np.allclose(hits.normals, [0.0, 0.0, 1.0], atol=1e-12)
    assert np.allclose(hits.distances, dz, atol=1e-12)
    assert np.allclose(np.abs(hits.points[:, :2]), np.array(size[:2]) / 2, atol=1e-12)
    assert np.allclose(hits.points[:, 2], size[2] / 2 + dz / 2, atol=1e-12)
    d, res = coal_distance(coal_shape("box", size), coal.Transform3s(pin.rpy.rpyToMatrix(0, 0, turn), np.array(q[:3])),
                           coal_shape("box", size), coal.Transform3s(np.eye(3), np.zeros(3)))
    assert np.allclose(-np.asarray(res.normal), hits.normals[0], atol=1e-9)
    assert abs(d - hits.distances.min()) <= 1e-9


def test_a_box_resting_shifted_on_a_box_touches_at_the_corners_of_the_faces_overlap():
    # a box resting (1e-7 m deep) on a box of its footprint, shifted along x and y: the faces meet in a
    # rectangle (by hand: x in [-0.1, 0.15], y in [-0.07, 0.15]) two of whose corners are no box's corner
    # (an edge of one face crosses an edge of the other); each of the four is a hit, normal +z, depth 1e-7
    size = SIZES["box"][0], SIZES["box"][0], SIZES["box"][2]
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("a", 0, Transform(np.eye(3), np.zeros(3)), "box", size, "collision")
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("box", size, name="b")], margin=0.005)
    hits = sd.collide(scene, [0.05, 0.08, size[2] - 1e-7, 0.0, 0.0, 0.0, 1.0])
    assert len(hits.distances) == 4
    corners = {(x, y) for x in (-0.1, 0.15) for y in (-0.07, 0.15)}
    assert {tuple(np.round(p[:2], 9)) for p in hits.points} == corners
    assert np.allclose(hits.normals, [0.0, 0.0, 1.0], atol=1e-12)
    assert np.allclose(hits.distances, -1e-7, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_two_boxes_crossed_edge_on_edge_collide_without_coal(backend, monkeypatch):
    """Box a (0.3 x 0.5 x 0.4) turned 45 degrees about x, its centre at height h, over box b of the same
    size turned 45 degrees about y at the origin: a's lowest edge (along x, 0.45 / sqrt 2 under its
    centre, at y = -0.05 / sqrt 2) crosses b's highest (along y, 0.35 / sqrt 2 over its centre, at
    x = 0.05 / sqrt 2), by hand the closest pair, 1 mm deep, normal +z: the deepest hit, found with coal
    unavailable (two boxes are a closed form: coal's EPA answers depend on the queries before them)."""
    from sparsedyn.contact import collision

    def no_coal():
        raise AssertionError("coal was asked about two boxes")
    monkeypatch.setattr(collision, "_coal", no_coal)
    turn = lambda axis: pin.AngleAxis(np.pi / 4, np.array(axis, float)).toRotationMatrix()      # noqa: E731
    scene = free_body_scene("box", "box", margin=0.005, world_pose=(turn([0, 1, 0]), np.zeros(3)))
    h = 0.8 / np.sqrt(2) - 1e-3
    q = np.r_[0.0, 0.0, h, np.sin(np.pi / 8), 0.0, 0.0, np.cos(np.pi / 8)]
    with sd.use_backend(backend):
        hits = sd.collide(scene, q)
    k = int(np.argmin(hits.distances))
    assert abs(hits.distances[k] + 1e-3) <= 1e-15 and np.allclose(hits.normals[k], [0, 0, 1], rtol=0, atol=1e-15)
    x = 0.05 / np.sqrt(2)
    assert np.allclose(hits.witness_a[k], [x, -x, h - 0.45 / np.sqrt(2)], rtol=0, atol=1e-15)
    assert np.allclose(hits.witness_b[k], [x, -x, 0.35 / np.sqrt(2)], rtol=0, atol=1e-15)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_flat_mesh_with_repeated_vertices_touches_a_plane_once_per_corner(backend):
    """A flat square plate (0.2 m) given as two triangles that share no vertex (each shared corner
    twice, one of them again 50 nm off: within a rounding of the same point, the vertex listed first
    kept), lying 1 mm above the floor turned 0.3 rad about z: four hits, one per corner (by hand: the
    corners turned, 1 mm up, the normal +z), not one per vertex."""
    h = 0.1
    V = np.array([[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, -h, 0], [h, h, 0], [-h, h, 0], [h + 5e-8, h, 0]], float)
    F = np.array([[0, 1, 2], [3, 4, 5], [1, 6, 2]])
    scene = free_body_scene("mesh", "plane", margin=0.01, mesh_a=(V, F))
    a, z = 0.3, 1e-3
    q = np.array([0.3, -0.2, z, 0.0, 0.0, np.sin(a / 2), np.cos(a / 2)])
    with sd.use_backend(backend):
        hits = sd.collide(scene, q)
    Rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    corners = np.array([[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, h, 0]]) @ Rz.T + q[:3]
    assert len(hits.distances) == 4
    tol = rounding_bound(4)                                         # a rotation and a shift of coordinates <= 1
    assert np.abs(hits.distances - z).max() <= tol and np.abs(hits.normals - [0, 0, 1]).max() <= tol
    got = hits.witness_a[np.lexsort(hits.witness_a.T[:2])]
    assert np.abs(got - corners[np.lexsort(corners.T[:2])]).max() <= tol


#: talos (talos_full_v2, its SRDF) fallen with no joint torque, its legs folded and an arm against a
#: thigh: robot meshes (coal's triangles) overlapping by up to 6 cm (a rollout's state, rounded)
TALOS_FOLDED = [-0.015, 0.003, 0.321, -0.004, 0.036, -0.039, 0.999, 0.127, 0.054, -1.727, 3.308, -1.67, -0.072,
                0.045, -0.019, -1.697, 3.339, -1.595, -0.048, 0.144, -0.343, 0.248, -0.019, 0.049, 0.29, 0.108,
                -0.688, -1.441, 2.415, -3.859, 4.795, 0.009, -10.419, 0.643, 2.597, -0.441, -0.419, -1.155, 0.568,
                -2.421, -1.655, -3.563, -1.426, -14.894, -11.896, 1.753, 3.921, -1.408, 1.183, 1.082, -0.07]


@pytest.mark.filterwarnings("ignore::sparsedyn.SelfOverlapWarning")   # talos's grippers in its legs at neutral
def test_a_pair_of_meshes_takes_its_own_cutoff_whatever_the_others_are():
    """coal stops at four triangle contacts within its security margin: a step's look-ahead gave it
    the widest pair's cutoff, and the near triangles found first hid the overlapping ones (talos
    folded: the step saw a hip link 3 cm clear of the foot that collide() finds 5 cm inside it, and the
    robot sank into itself).  Each pair now takes its own: with one far pair's cutoff widened, every
    other pair's hits are collide()'s."""
    root = robots_dir()
    model = sd.load_urdf(root / "talos_data/robots/talos_full_v2.urdf", floating_base=True, geometry=True,
                         package_dirs=[root])
    scene = sd.Scene(model, srdf=sd.load_srdf(model, root / "talos_data/srdf/talos.srdf"))
    q = sd.normalize(model, np.array(TALOS_FOLDED))
    want = sd.collide(scene, q)
    assert want.distances.min() < -0.04
    far = next(k for k in range(len(scene.index)) if k not in set(want.pair.tolist()))
    cutoff = np.full(len(scene.index), scene.margin)
    cutoff[far] = 0.05
    got = collide_within(scene, q, cutoff)
    got_far = got.pair == far
    assert [p for p, f in zip(got.pairs, got_far) if not f] == want.pairs
    assert np.array_equal(got.distances[~got_far], want.distances)
    assert np.array_equal(got.points[~got_far], want.points) and np.array_equal(got.normals[~got_far], want.normals)


@pytest.mark.filterwarnings("ignore::sparsedyn.SelfOverlapWarning")   # talos's grippers in its legs at neutral
def test_two_meshes_collide_as_their_convex_hulls_whatever_the_margin():
    """Two robot meshes' triangle surfaces that cross have no signed distance: coal's triangle contacts put
    alex's shoulder 6 cm into its wrist at one margin and 5 cm and 15 cm clear at two others, and moved by
    centimetres from step to step, so the steps pushed links into each other.  A mesh collides as its convex
    hull, as on a plane: talos folded, each hit of two meshes is coal's signed distance between the two
    hulls (GJK and EPA on Pinocchio's collision model, each mesh its hull), with its witness points and
    normal, and a pair's hit is the same within margins of 5 mm, 5 cm and 20 cm."""
    root = robots_dir()
    path = root / "talos_data/robots/talos_full_v2.urdf"
    model = sd.load_urdf(path, floating_base=True, geometry=True, package_dirs=[root])
    srdf = sd.load_srdf(model, root / "talos_data/srdf/talos.srdf")
    q = sd.normalize(model, np.array(TALOS_FOLDED))
    pm, gm = pin_geometry(path, root / "talos_data/srdf/talos.srdf", True)
    gd = pin.GeometryData(gm)
    pin.updateGeometryPlacements(pm, pm.createData(), gm, gd, q_to_pinocchio(model, q))
    index = {g.name: k for k, g in enumerate(gm.geometryObjects)}
    req = coal.DistanceRequest()
    req.gjk_tolerance = req.epa_tolerance = 1e-11
    scenes = [sd.Scene(model, srdf=srdf, margin=m) for m in (0.005, 0.05, 0.2)]
    hits = [sd.collide(scene, q) for scene in scenes]
    kind = {s.name: s.kind for s in scenes[0].shapes}
    meshes = [k for k, (a, b) in enumerate(hits[0].pairs) if kind[a] == kind[b] == "mesh"]
    assert len(meshes) >= 3 and hits[0].distances[meshes].min() < -0.01
    for k in meshes:
        a, b = hits[0].pairs[k]
        res = coal.DistanceResult()
        ga, gb = gm.geometryObjects[index[a]], gm.geometryObjects[index[b]]
        d = coal.distance(ga.geometry, gd.oMg[index[a]], gb.geometry, gd.oMg[index[b]], req, res)
        assert abs(hits[0].distances[k] - d) <= 1e-9, (a, b)
        w_a, w_b = res.getNearestPoint1(), res.getNearestPoint2()
        assert np.abs(hits[0].points[k] - (w_a + w_b) / 2).max() <= 1e-9, (a, b)
        assert np.abs(hits[0].normals[k] + res.normal).max() <= 1e-9, (a, b)
        for wide in hits[1:]:                          # the same pair's hit within wider margins
            j = wide.pairs.index((a, b))
            assert wide.distances[j] == hits[0].distances[k] and np.array_equal(wide.points[j], hits[0].points[k])


def test_a_ball_at_the_centre_of_a_disc_leaves_through_its_cap():
    from sparsedyn.contact.correction import CORRECTION_REACH
    # dm_control's dog.xml: a ball (free body) at the centre of a thin target disc in the world; coal
    # gave no normal there (a contact with a zero plane normal stopped the rollout)
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=0.056,
                                         rot_inertia=2 / 5 * 0.056 * 0.03 ** 2 * np.eye(3))
    g = sd.Geometry("ball", 0, Transform(np.eye(3), np.zeros(3)), "sphere", (0.03,), "collision")
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("cylinder", (0.1, 0.008), name="target")])
    q, v = np.array([0, 0, 0, 0, 0, 0, 1.0]), np.zeros(6)
    for road in ("numpy", "native"):
        with sd.use_backend(road):
            hits = sd.collide(scene, q)
            assert hits.pairs == [("ball", "target")]
            assert abs(hits.distances[0] - (-0.004 - 0.03)) <= 4e-15
            assert np.array_equal(hits.normals[0], [0.0, 0.0, 1.0])
            s = sd.contact_step(scene.model, q, v, np.zeros(6), scene, 1e-3)
            # its weight carried, the overlap corrected along the cap's normal by at most the correction's reach
            assert np.isfinite(s.v).all() and np.abs(s.v).max() <= 1e-12
            assert 0 < s.q[2] <= CORRECTION_REACH * (1 + 1e-12) and np.abs(s.q[:2]).max() <= 1e-15
