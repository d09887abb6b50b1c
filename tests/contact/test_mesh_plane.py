"""Meshes against planes on the native road: the traced kernel of the hull vertices' heights
(sparsedyn.contact.mesh_plane), and ``collide``'s hits from the native loop (sparsedyn.contact.mesh_plane_loop).

Oracles: the heights ``n . (R v + p - p_b)`` of each hull vertex from ``geometry_placements`` (equal
to Pinocchio's ``oMg``, test_kinematics) by hand; the NumPy road of ``collide``
(``sd.use_backend("numpy")``: each pair's vertices by NumPy, itself checked against coal and the
single pair's patch in test_reduction), whose hits the native road must give on talos (its 47 meshes)
at random configurations on a floor.  Tolerances: two evaluations of the same products that differ in
rounding (the kinematics of 38 joints, then a product of three terms), ``rounding_bound``.
"""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from erd import robots_dir
from sparsedyn.contact.collision_coal import mesh_vertices
from sparsedyn.contact.mesh_plane import mesh_plane_plan

#: The kinematics' chain (talos: 38 dofs, a few operations a joint) and the vertex's product.
BOUND = rounding_bound(64)


@pytest.fixture(scope="module")
def talos():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "talos_data" / "robots" / "talos_reduced.urdf", floating_base=True,
                             geometry=True)
    return model, sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False)


def _on_the_floor(model, scene, rng):
    """A random configuration with a random base orientation, lowered so that its lowest hull vertex is
    5 to 40 mm below the floor (the links near it within the margin, some pressed in)."""
    q = model.random_configuration(rng)
    q[:3] = 0.0
    V, rows = mesh_vertices(scene)
    R, p = sd.geometry_placements(model, q, "collision")
    low = min(float((V[a:b] @ R[i].T + p[i])[:, 2].min()) for i, (a, b) in rows.items())
    q[2] = -low - rng.uniform(0.005, 0.04)
    return q


def test_native_hits_are_the_numpy_roads_on_talos(talos, monkeypatch):
    """``collide`` on the native road (each pair's patch from the native loop of
    ``mesh_plane_loop``, no vertex's height in NumPy) gives the NumPy road's hits on talos lying on a
    floor in random poses: the same pairs and hits in the same order, points, normals and distances to
    rounding; with each pair's own cutoff too (``collide_within``), and each pair's rotation over a
    step (its points' own allowances).  ``collide`` called again takes its kept road (the collision
    kernel and the loop, no lookups): the same hits."""
    from sparsedyn.contact import collision
    from sparsedyn.contact.collision import collide_within
    model, scene = talos
    rng = np.random.default_rng(11)
    hits = pairs = 0
    for t in range(8):
        q = _on_the_floor(model, scene, rng)
        cutoff = None if t % 2 == 0 else rng.uniform(scene.margin, 0.03, len(scene.pairs))
        spin = rng.normal(0.0, 0.02, (len(scene.pairs), 3)) if t % 4 == 3 else None   # a step's rotations
        with sd.use_backend("numpy"):
            want = collide_within(scene, q, cutoff, spin)
        with sd.use_backend("native", deterministic=True), monkeypatch.context() as m:
            m.setattr(collision, "mesh_plane_patches", lambda *a, **k: pytest.fail("a vertex's height in NumPy"))
            got = [collide_within(scene, list(q), cutoff, spin)]
            if cutoff is None and spin is None:
                got += [sd.collide(scene, q), sd.collide(scene, q)]
                assert scene.cache[collision._ROAD][3] is not None          # the road kept, with the loop
        for g in got:
            assert g.pairs == want.pairs and np.array_equal(g.pair, want.pair)
            for x, y in ((g.points, want.points), (g.distances, want.distances), (g.normals, want.normals)):
                assert np.abs(x - y).max(initial=0.0) <= BOUND
        hits, pairs = hits + len(want.pairs), pairs + len(set(want.pairs))
    assert hits >= 30 and pairs >= 12                          # many links touched, most with several points


def test_without_a_c_compiler_the_numpy_road_answers(talos, monkeypatch):
    """Where the native loop cannot be built (no C compiler), ``collide`` on the native backend takes
    the NumPy road for the meshes: the same hits as the native loop's."""
    from sparsedyn.contact import collision, mesh_plane_loop
    model, _ = talos
    q = _on_the_floor(model, talos[1], np.random.default_rng(2))
    with sd.use_backend("native", deterministic=True):
        want = sd.collide(sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False), q)
        monkeypatch.setattr(mesh_plane_loop, "_routine", lambda: None)
        calls, patches = [], collision.mesh_plane_patches
        monkeypatch.setattr(collision, "mesh_plane_patches", lambda *a, **k: calls.append(1) or patches(*a, **k))
        scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False)
        got = [sd.collide(scene, q), sd.collide(scene, q)]
    assert calls == [1, 1] and len(want.pairs) >= 4
    for g in got:
        assert g.pairs == want.pairs
        assert np.abs(g.points - want.points).max() <= BOUND and np.abs(g.distances - want.distances).max() <= BOUND


def test_heights_are_the_hull_vertices_heights_by_hand(talos):
    """The kernel's heights of the pairs near the floor are ``n . (R v + p - p_b)`` per hull vertex
    (``geometry_placements``), its poses the meshes' world poses; a pair beyond the cutoff holds a
    lower bound of its heights above the cutoff.  On the native road and the NumPy one (the stages
    run on floats, a plain list for ``q``), which agree."""
    model, scene = talos
    mp = mesh_plane_plan(scene)
    rng = np.random.default_rng(5)
    near = far = 0
    for _ in range(3):
        q = _on_the_floor(model, scene, rng)
        R, p = sd.geometry_placements(model, q, "collision")
        with sd.use_backend("numpy"):
            h0, poses0 = sd.mesh_plane_heights(model, list(q), mp.shapes, mp.hull, mp.spheres, 0.02, mp.pairs)
        with sd.use_backend("native", deterministic=True):
            h, poses = sd.mesh_plane_heights(model, q, mp.shapes, mp.hull, mp.spheres, 0.02, mp.pairs)
        assert np.abs(h - h0).max() <= BOUND and np.abs(poses - poses0).max() <= BOUND
        for k, (m, _, _, _, _) in enumerate(mp.pairs):
            rows = mp.row_pair == k
            true = (mp.hull[rows] @ R[m].T + p[m])[:, 2]              # the floor: z = 0, normal +z
            assert np.abs(poses[k] - np.r_[R[m].reshape(-1), p[m]]).max() <= BOUND
            if np.all(h[rows] == h[rows][0]) and h[rows][0] > 0.02:  # left out: one bound, above the cutoff
                assert h[rows][0] <= true.min() + BOUND
                far += 1
            else:
                assert np.abs(h[rows] - true).max() <= BOUND
                near += 1
    assert near >= 10 and far >= 10                             # both branches compared


def test_bad_input_is_named():
    b = sd.ModelBuilder("cube").add_body("cube", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    model = b.build()
    shapes = np.zeros((2, 15))
    shapes[:, [0, 4, 8]] = 1
    hull = np.ones((4, 3))
    q = [0, 0, 0.1, 0, 0, 0, 1]
    bad = hull.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="hull must be finite"):
        sd.mesh_plane_heights(model, q, shapes, bad, [[0, 0, 0, 1.0]], 0.01, [(0, 1, 0, -1, 4)])
    with pytest.raises(ValueError, match=r"hull must have shape \(\.\.\., 4, 3\)"):
        sd.mesh_plane_heights(model, q, shapes, hull[:3], [[0, 0, 0, 1.0]], 0.01, [(0, 1, 0, -1, 4)])
    with pytest.raises(ValueError, match="five integers"):
        sd.mesh_plane_heights(model, q, shapes, hull, [[0, 0, 0, 1.0]], 0.01, [(0, 1, 0, -1)])
    with pytest.raises(ValueError, match="bodies in"):
        sd.mesh_plane_heights(model, q, shapes, hull, [[0, 0, 0, 1.0]], 0.01, [(0, 1, 3, -1, 4)])
