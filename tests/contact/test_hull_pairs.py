"""Pairs of two convex shapes that coal alone measures, as rows of the step's contact data
(sparsedyn.contact.hull_pairs).

Which pairs: by hand, from the kinds of the shapes and whether one is the world's.  Their rows:
against coal's own ``distance`` between convex hulls that coal builds from the same vertices (the
oracle's own ``buildConvexHull``), at coal's tolerance (1e-11, the library's request; the hulls are
the same qhull output, so the witnesses agree to that tolerance); a witness point in its body's axes
against the body's placement (an identity); a pair whose bounding spheres are farther apart than its
cutoff has no row (+inf).
"""

import coal
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact.collision import placements
from sparsedyn.contact.hull_pairs import hull_pairs, hull_rows
from sparsedyn.model.spatial import Transform
from test_collision import coal_distance, random_body_q
from test_reduction import coal_hull, prism

GJK = 1e-9              # coal's GJK/EPA at 1e-11 on shapes of 0.1 m, witness points compared in metres


def _two_bodies():
    """Two free bodies: ``a`` a prism mesh, a capsule and a cylinder (a drum), ``b`` a prism mesh, a sphere
    and a box (0.1 m shapes); in the world a floor, a box, a sphere and a prism mesh."""
    b = sd.ModelBuilder("two")
    for name in ("a", "b"):
        b.add_body(name, None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 1e-3)
        b.add_frame(name, name)
    V, F = prism()
    turn = Transform(sd.spatial.rpy_to_rot([0.3, -0.2, 0.5]), np.array([0.01, -0.02, 0.03]))
    model = b.build().with_geometry(
        sd.Geometry("a_mesh", 0, turn, "mesh", (1.0, 1.0, 1.0), "collision", vertices=V, faces=F),
        sd.Geometry("a_capsule", 0, Transform(np.eye(3), np.array([0.0, 0.0, 0.3])), "capsule", (0.02, 0.1),
                    "collision"),
        sd.Geometry("a_drum", 0, Transform(np.eye(3), np.array([0.0, -0.2, 0.0])), "cylinder", (0.03, 0.08),
                    "collision"),
        sd.Geometry("b_mesh", 1, Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0), "collision",
                    vertices=V, faces=F),
        sd.Geometry("b_sphere", 1, Transform(np.eye(3), np.array([0.0, 0.3, 0.0])), "sphere", (0.03,), "collision"),
        sd.Geometry("b_box", 1, Transform(np.eye(3), np.array([0.3, 0.0, 0.0])), "box", (0.05, 0.05, 0.05),
                    "collision"))
    world = [sd.Shape("plane", name="floor"),
             sd.Shape("box", (0.2, 0.2, 0.2), placement=(np.eye(3), [1.0, 0.0, 0.1]), name="crate"),
             sd.Shape("sphere", (0.05,), placement=(np.eye(3), [-1.0, 0.0, 0.1]), name="ball"),
             sd.Shape("mesh", mesh=(V, F), placement=(np.eye(3), [0.0, 1.0, 0.1]), name="rock")]
    return sd.Scene(model, world=world, self_collision=True)


SCENE = _two_bodies()


def _pair(scene, a, b):
    names = list(scene.pair_names)
    return names.index((a, b)) if (a, b) in names else names.index((b, a))


def test_the_pairs_of_one_closest_pair_are_those_of_a_mesh_or_a_cylinder_against_a_convex_shape():
    """coal's pairs (a mesh against any convex shape, a cylinder against a box, a capsule or a cylinder)
    and the closed form of a sphere and a cylinder."""
    scene = SCENE
    hulls = {scene.pair_names[k] for k in hull_pairs(scene, np.arange(len(scene.index)))}
    want = {("a_mesh", "b_mesh"), ("a_mesh", "b_sphere"), ("a_mesh", "b_box"), ("a_capsule", "b_mesh"),
            ("a_mesh", "ball"), ("a_mesh", "rock"), ("b_mesh", "ball"), ("b_mesh", "rock"),
            ("a_capsule", "rock"), ("b_sphere", "rock"),
            ("a_drum", "b_mesh"), ("a_drum", "b_sphere"), ("a_drum", "b_box"), ("a_drum", "ball"), ("a_drum", "rock"),
            ("a_drum", "crate")}
    got = {tuple(sorted(p)) for p in hulls}
    assert got == {tuple(sorted(p)) for p in want}
    # (a mesh on the floor, on the crate, a box on the rock: a patch; capsule-box, box-box: closed forms)
    for pair in [("a_mesh", "floor"), ("a_mesh", "crate"), ("b_box", "rock"), ("a_capsule", "b_box"),
                 ("b_box", "crate")]:
        assert _pair(scene, *pair) not in hull_pairs(scene, np.arange(len(scene.index)))


def _oracle_geometry(scene, k):
    """coal's object of shape ``k`` built here: a mesh's hull from its triangles, a primitive's own."""
    s = scene.shapes[k]
    if s.kind == "mesh":
        return coal_hull(*prism())
    return {"sphere": lambda: coal.Sphere(s.size[0]), "capsule": lambda: coal.Capsule(s.size[0], s.size[1]),
            "cylinder": lambda: coal.Cylinder(s.size[0], s.size[1]), "box": lambda: coal.Box(*s.size)}[s.kind]()


@pytest.mark.parametrize("seed, broad", [(0, "native"), (1, "native"), (2, "spheres")])
def test_the_rows_are_coals_closest_pairs_and_the_witness_in_its_bodys_axes(seed, broad, monkeypatch):
    """The broad phase native (bounding spheres, then boxes) or, without a C compiler, the spheres alone."""
    from sparsedyn.contact import hull_pairs as module
    if broad == "spheres":
        monkeypatch.setattr(module, "near_pairs", lambda *a: None)
    scene = SCENE
    rng = np.random.default_rng(seed)
    hulls = hull_pairs(scene, np.arange(len(scene.index)))
    cut = np.full(len(scene.index), 0.3)
    near = closed = 0
    for _ in range(30):
        (Ra, pa, qa), (Rb, pb, qb) = random_body_q(rng, 0.08), random_body_q(rng, 0.08)
        q = np.concatenate([qa, qb])
        R, p = placements(scene, q)
        rows = hull_rows(scene, hulls, R, p, cut)
        for h, k in enumerate(hulls.tolist()):
            i, j = scene.index[k]
            d, res = coal_distance(_oracle_geometry(scene, i), coal.Transform3s(R[i], p[i]),
                                   _oracle_geometry(scene, j), coal.Transform3s(R[j], p[j]))
            if np.isinf(rows[h, 0]):                # left out by the broad phase: beyond the cutoff
                assert d > cut[k]
                continue
            kinds = {scene.shapes[i].kind, scene.shapes[j].kind}
            if kinds == {"sphere", "cylinder"}:     # (a closed form: coal's EPA is its oracle only apart)
                closed += d > 0
                if d <= 0:
                    continue
            near += 1
            wa, wb = np.array(res.getNearestPoint1()), np.array(res.getNearestPoint2())
            assert abs(rows[h, 0] - d) <= GJK
            assert np.abs(rows[h, 1:4] - (wa + wb) / 2).max() <= GJK
            if abs(d) > 1e-6:                       # (the normal: defined where the shapes are apart or overlap)
                assert np.abs(rows[h, 4:7] + np.array(res.normal)).max() <= GJK / abs(d) + 1e-9
            body = scene.shapes[i].body
            Rbody, pbody = (Ra, pa) if body == 0 else (Rb, pb)
            assert np.abs(Rbody @ rows[h, 7:10] + pbody - wa).max() <= GJK
            assert abs(rows[h, 10] - rows[h, 4:7] @ wb) <= GJK
    assert near >= 20 and closed >= 1


def test_the_bound_queries_are_the_general_roads_bit_for_bit(monkeypatch):
    """coal's queries bound once per pair (a ComputeDistance, its result read in place) give the rows of the
    general road (``coal.distance`` through ``closest_pair``), the same numbers, at random poses with a cutoff
    of a metre (the pairs of the two bodies all near, penetrating ones among them)."""
    from sparsedyn.contact import hull_pairs as module
    scene = SCENE
    rng = np.random.default_rng(5)
    hulls = hull_pairs(scene, np.arange(len(scene.index)))
    cut = np.full(len(scene.index), 1.0)
    bound = module._bound_queries(scene, hulls, module._plan(scene, hulls))
    assert bound is not None and sum(x is not None for x in bound) >= 4
    deep = queried = 0
    for _ in range(30):
        q = np.concatenate([random_body_q(rng, 0.05)[2], random_body_q(rng, 0.05)[2]])
        R, p = placements(scene, q)
        rows = hull_rows(scene, hulls, R, p, cut)
        with monkeypatch.context() as m:
            m.setattr(module, "_bound_queries", lambda *a: None)
            general = hull_rows(scene, hulls, R, p, cut)
        assert np.array_equal(rows, general, equal_nan=True)
        queried += sum(bound[h] is not None for h in np.flatnonzero(np.isfinite(rows[:, 0])))
        deep += int((rows[:, 0] < 0).sum())
    assert queried >= 100 and deep >= 10

def _two_prisms():
    """Two free prisms (1.5 kg and 3 kg), no world shape: ``a`` 5 cm left of ``b``, moving right at 1 m/s
    and turning a little."""
    b = sd.ModelBuilder("two prisms")
    V, F = prism()
    for name, mass in (("a", 1.5), ("b", 3.0)):
        b.add_body(name, None, sd.make_joint("free"), mass=mass, rot_inertia=mass * np.diag([4e-3, 4e-3, 7.5e-3]))
        b.add_frame(name, name)
    model = b.build().with_geometry(*(sd.Geometry(f"{name}_mesh", k, Transform(np.eye(3), np.zeros(3)), "mesh",
                                                  (1.0, 1.0, 1.0), "collision", vertices=V, faces=F)
                                      for k, name in enumerate("ab")))
    q0 = np.r_[-0.25, 0.01, 0.0, 0, 0, 0, 1, 0.0, 0.0, 0.0, 0, 0, 0, 1]
    v0 = [0.0, 0.0, 0.3, 1.0, 0.0, 0.0] + [0.0] * 6                # a plain list: [w; v] of each body
    return model, q0, v0


def _kinetic(model, q, v):
    return 0.5 * np.asarray(v) @ sd.crba(model, q) @ np.asarray(v)


def test_two_meshes_colliding_on_the_default_road_stay_apart_and_lose_energy(monkeypatch):
    """The prisms collide (self-collision of two free bodies: coal's closest pair of their hulls, laid
    out with no Contact object on the default road): ``a`` never enters ``b`` by more than the margin,
    ``b`` is pushed along, no step adds kinetic energy (no gravity), and the impact (no restitution,
    nearly central) keeps at most half of it (a perfectly inelastic central impact of 1.5 kg on 3 kg keeps
    a third of the translation's; the spin holds 0.1 %); without the pair ``a`` passes through ``b``."""
    from sparsedyn.contact import scene_step
    model, q0, v0 = _two_prisms()
    scene, through = sd.Scene(model, friction=0.5), sd.Scene(model, friction=0.5, self_collision=False)
    no_gravity = np.zeros(3)
    with sd.use_backend("native", deterministic=True):
        objects = scene_step.scene_contacts
        monkeypatch.setattr(scene_step, "scene_contacts", lambda *a, **k: pytest.fail("a Contact object was made"))
        r = sd.rollout(model, q0, v0, np.zeros(12), scene, 1e-3, 400, gravity=no_gravity)
        monkeypatch.setattr(scene_step, "scene_contacts", objects)
        passed = sd.rollout(model, q0, v0, np.zeros(12), through, 1e-3, 400, gravity=no_gravity)
    assert any(len(imp) and imp[:, 2].max() > 0 for imp in r.impulses)
    assert min(sd.collide(scene, q).distances.min(initial=np.inf) for q in r.q) >= -scene.margin
    assert r.q[-1][7] > 0.02 and r.q[-1][0] < r.q[-1][7]             # b pushed; a still left of it
    E = np.array([_kinetic(model, q0, v0)] + [_kinetic(model, q, v) for q, v in zip(r.q, r.v)])
    assert np.diff(E).max() <= rounding_bound(12) * E[0]
    assert E[-1] <= 0.5 * E[0]
    assert passed.q[-1][0] > passed.q[-1][7]                          # without the pair: through b
