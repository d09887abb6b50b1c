"""The native loop of a scene's robot meshes on world planes (sparsedyn.contact.mesh_plane_loop).

Oracles: a cube's hull (its eight corners) resting on a plane, by hand: the corners' heights
``n . (R v + p - p_b)``, the patch of a face lying flat (its four corners), of an edge (its two
corners: the others are higher than the touching ones by more than the patch's allowance), none above
the margin; and the NumPy road (``mesh_plane_patches``, itself checked by hand and against coal in
test_reduction) on a random convex mesh in random poses, with per-pair cutoffs and rotations over a step.  Tolerances: a few products of unit rotations and coordinates below a metre,
``rounding_bound``.
"""

import numpy as np
import pytest
from scipy.spatial import ConvexHull

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import mesh_plane_loop, reduction
from sparsedyn.contact.collision_coal import mesh_vertices
from sparsedyn.model.spatial import Transform
from test_reduction import random_poses

#: A handful of products and sums of numbers below one (the kinematics of one free joint, a vertex).
BOUND = rounding_bound(16)
HALF, OFFSET = 0.1, 0.05                  # the cube's half edge; its mesh 5 cm above its body's origin


def _cube_scene(plane=None):
    """A free cube (its collision shape a mesh of its 8 corners, placed ``OFFSET`` up its body's z) and
    a world plane of placement ``plane`` (None: the floor)."""
    V = HALF * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    g = sd.Geometry("cube", 0, Transform(np.eye(3), np.array([0.0, 0.0, OFFSET])), "mesh", (1.0, 1.0, 1.0),
                    "collision", vertices=V, faces=ConvexHull(V).simplices)
    b = sd.ModelBuilder("cube").add_body("cube", None, sd.make_joint("free"), mass=1.0,
                                          rot_inertia=np.eye(3) * 0.006)
    return sd.Scene(b.build().with_geometry(g), world=[sd.Shape("plane", placement=plane, name="plane")],
                    margin=0.005)


def _pose(R, centre):
    """The cube's configuration whose mesh has the world rotation ``R`` and centre ``centre``."""
    return np.r_[np.asarray(centre) - R @ [0.0, 0.0, OFFSET], sd.spatial.rot_to_quat(R)]


def _native(scene, q):
    with sd.use_backend("native", deterministic=True):
        lp = mesh_plane_loop.loop_plan(scene)
        rows = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, np.asarray(q, float))
        hits = sd.collide(scene, q)
    assert rows is not None                                # the routine was built (a C compiler is there)
    return rows, hits


def test_a_face_flat_on_a_tilted_plane_gives_its_four_corners():
    # the cube in the plane's axes, its centre 0.09 above it: the four corners of its lower face 1 cm
    # into the plane (each the patch's: the deepest, the farthest, one either side), the others 19 cm above
    Rp = sd.spatial.rpy_to_rot([0.3, -0.2, 0.7])
    pb = np.array([0.4, -0.3, 0.2])
    scene = _cube_scene((Rp, pb))
    q = _pose(Rp, pb + Rp @ [0.0, 0.0, HALF - 0.01])
    for given in (q, list(q), tuple(q)):
        rows, hits = _native(scene, given)
        filled = np.isfinite(rows[:, 0])
        assert filled.tolist() == [True] * 4 and rows.shape == (4, 11)
        corners = HALF * np.array([[x, y, -1] for x in (-1, 1) for y in (-1, 1)])
        want = {tuple(np.round(c, 9)) for c in corners}
        # the points in the body's frame (columns 7:10): the corners moved by the mesh's placement
        assert {tuple(np.round(r[7:10] - [0, 0, OFFSET], 9)) for r in rows} == want
        for r in rows:
            local = r[7:10] - [0.0, 0.0, OFFSET]
            assert abs(r[0] + 0.01) <= BOUND
            assert np.abs(r[1:4] - (pb + Rp @ (local[:2].tolist() + [-0.005]))).max() <= BOUND    # midway
            assert np.abs(r[4:7] - Rp[:, 2]).max() <= BOUND
            assert abs(r[10] - Rp[:, 2] @ pb) <= BOUND                     # n . w_b: w_b on the plane
        assert hits.pairs == [("cube", "plane")] * 4
        assert np.abs(hits.distances + 0.01).max() <= BOUND and np.abs(hits.normals - Rp[:, 2]).max() <= BOUND
        assert np.abs(hits.points - rows[:, 1:4]).max() <= BOUND


def test_an_edge_on_the_floor_gives_its_two_corners_and_none_above_the_margin():
    # tipped by a about x: a corner (x, y, -HALF) at (x, y cos a + HALF sin a, z0 + y sin a - HALF cos a)
    # (world, from the centre), the lower face's corners at z0 - HALF cos a -/+ HALF sin a; the lower edge
    # (y = -HALF) 2 mm into the floor, the upper one 2 mm + 2 HALF sin a = 4 mm higher (within the
    # margin, but above the touching edge by more than PATCH_DEPTH: not in the patch)
    a = 0.02
    R = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(a), -np.sin(a)], [0.0, np.sin(a), np.cos(a)]])
    z0 = HALF * (np.cos(a) + np.sin(a)) - 0.002
    scene = _cube_scene()
    rows, hits = _native(scene, _pose(R, [0.1, 0.2, z0]))
    assert np.isfinite(rows[:, 0]).tolist() == [True, True, False, False]
    assert np.abs(rows[:2, 0] + 0.002).max() <= BOUND
    assert sorted(np.round(rows[:2, 7], 9).tolist()) == [-HALF, HALF] and np.allclose(rows[:2, 8], -HALF, atol=0)
    assert np.abs(rows[:2, 1:4] - [[0.1 + x, 0.2 - HALF * np.cos(a) + HALF * np.sin(a), -0.001]
                                       for x in rows[:2, 7]]).max() <= BOUND
    assert hits.pairs == [("cube", "plane")] * 2
    # lifted so that its lowest corner is 6 mm up (above the 5 mm margin): no row, no hit
    rows, hits = _native(scene, _pose(R, [0.1, 0.2, z0 + 0.008]))
    assert not np.isfinite(rows[:, 0]).any() and hits.pairs == []


def test_a_long_link_whose_box_is_above_the_margin_has_no_row_and_one_just_below_has_its_corner():
    """A rod (half sizes 0.4, 0.02, 0.01 m: its bounding sphere reaches 0.4 m below its centre, far
    into the floor) tilted and lowered until its lowest corner is 1e-7 m above the margin, then 1e-7 m
    below it: the box about its hull is the rod itself, so the broad phase of that box must leave the
    first alone and keep the second, whose row is that corner (by hand: the rod's centre height less
    ``sum_i |R[2, i]| h_i``)."""
    h = np.array([0.4, 0.02, 0.01])
    V = h * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    g = sd.Geometry("rod", 0, Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0), "collision",
                    vertices=V, faces=ConvexHull(V).simplices)
    b = sd.ModelBuilder("rod").add_body("rod", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("plane", name="floor")], margin=0.005)
    R = sd.spatial.rpy_to_rot([0.05, 0.03, 0.6])
    low = int(np.argmin(V @ R[2]))                         # the lowest corner
    for gap, found in ((1e-7, False), (-1e-7, True)):
        z0 = scene.margin + gap + np.abs(R[2]) @ h
        rows, hits = _native(scene, np.r_[0.3, -0.1, z0, sd.spatial.rot_to_quat(R)])
        if not found:
            assert not np.isfinite(rows[:, 0]).any() and hits.pairs == []
            continue
        assert np.isfinite(rows[0, 0]) and abs(rows[0, 0] - (scene.margin + gap)) <= BOUND
        assert np.abs(rows[0, 7:10] - V[low]).max() <= BOUND
        assert hits.pairs[0] == ("rod", "floor") and abs(hits.distances.min() - (scene.margin + gap)) <= BOUND


def _pebble_scene(rng):
    """A free body whose collision mesh is the hull of 60 random points of an ellipsoid (half axes 0.12,
    0.08, 0.05 m; generic: no two points at the same height or distance, which a regular solid's
    symmetric vertices are and rounding then decides) on the floor."""
    P = rng.standard_normal((60, 3))
    V = P / np.linalg.norm(P, axis=1, keepdims=True) * [0.12, 0.08, 0.05]
    g = sd.Geometry("pebble", 0, Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0), "collision",
                    vertices=V, faces=ConvexHull(V).simplices)
    b = sd.ModelBuilder("pebble").add_body("pebble", None, sd.make_joint("free"), mass=1.0,
                                            rot_inertia=np.eye(3) * 0.003)
    return sd.Scene(b.build().with_geometry(g), world=[sd.Shape("plane", name="floor")])


def test_the_rows_are_the_numpy_roads_with_cutoffs_and_rotations():
    """A random convex mesh in random poses pressed up to 3 cm into the floor: the loop's rows are
    ``mesh_plane_patches``' (the NumPy road of the same pair, the vertices placed by
    ``geometry_placements``), row by row, with cutoffs of the margin or a look-ahead's, and the pair's
    rotation over a step (known or not)."""
    rng = np.random.default_rng(4)
    scene = _pebble_scene(rng)
    filled = 0
    with sd.use_backend("native", deterministic=True):
        lp = mesh_plane_loop.loop_plan(scene)
    V, rows_of = mesh_vertices(scene)
    m = scene.index[lp.pair[0]][0]
    for t, q in enumerate(random_poses(rng, 40, 0.3, (0.02, 0.05))):
        cut = np.array([scene.margin if t % 3 == 0 else rng.uniform(scene.margin, 0.02)])
        spin = None if t % 2 == 0 else rng.normal(0.0, 0.05, (1, 3)) if t % 4 == 1 else np.full((1, 3), np.nan)
        R, p = sd.geometry_placements(scene.model, q, "collision")
        g, d, wa, wb, n, local = reduction.mesh_plane_patches(
            V, [rows_of[m]], R[m][None], p[m][None], reduction.plane_axes(np.array([[0.0, 0.0, 1.0]])),
            np.zeros((1, 3)), cut, scene.margin, spin)
        with sd.use_backend("native", deterministic=True):
            got = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut, spin)
        k = len(d)
        assert np.isfinite(got[:, 0]).tolist() == [True] * k + [False] * (4 - k)
        assert np.abs(got[:k, 0] - d).max(initial=0.0) <= BOUND
        assert np.abs(got[:k, 1:4] - (wa + wb) / 2).max(initial=0.0) <= BOUND
        assert np.abs(got[:k, 4:7] - n).max(initial=0.0) <= BOUND
        assert np.abs(got[:k, 7:10] - local).max(initial=0.0) <= BOUND      # the mesh's frame is its body's
        filled += k
    assert filled >= 60


def test_the_bound_call_writes_the_numpy_roads_rows_into_its_table_and_declines_without_the_routine(monkeypatch):
    """``mesh_plane_rows_call`` (collide's quick call's): at the margin, at random poses pressed into the
    floor, the rows it writes into the table it was given are ``mesh_plane_patches``' (the NumPy road),
    and bit for bit ``mesh_plane_loop_rows``' (the same routine on the same numbers); a table it cannot
    write into, or no routine, gives no call."""
    rng = np.random.default_rng(5)
    scene = _pebble_scene(rng)
    V, rows_of = mesh_vertices(scene)
    with sd.use_backend("native", deterministic=True):
        lp = mesh_plane_loop.loop_plan(scene)
        table = np.full((8, 11), 7.0)
        call = mesh_plane_loop.mesh_plane_rows_call(scene, lp, table[4:])
        assert mesh_plane_loop.mesh_plane_rows_call(scene, lp, np.empty((11, 4)).T) is None
    m, filled = scene.index[lp.pair[0]][0], 0
    for q in random_poses(rng, 20, 0.3, (0.02, 0.05)):
        R, p = sd.geometry_placements(scene.model, q, "collision")
        g, d, wa, wb, n, local = reduction.mesh_plane_patches(
            V, [rows_of[m]], R[m][None], p[m][None], reduction.plane_axes(np.array([[0.0, 0.0, 1.0]])),
            np.zeros((1, 3)), np.array([scene.margin]), scene.margin, None)
        with sd.use_backend("native", deterministic=True):
            got = call(q)
            assert np.shares_memory(got, table) and np.array_equal(table[:4], np.full((4, 11), 7.0))
            assert np.array_equal(got, mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q))
        k = len(d)
        assert np.isfinite(got[:, 0]).tolist() == [True] * k + [False] * (4 - k)
        assert np.abs(got[:k, 0] - d).max(initial=0.0) <= BOUND
        assert np.abs(got[:k, 1:4] - (wa + wb) / 2).max(initial=0.0) <= BOUND
        assert np.abs(got[:k, 7:10] - local).max(initial=0.0) <= BOUND
        filled += k
    assert filled >= 30
    monkeypatch.setattr(mesh_plane_loop, "_routine", lambda: None)
    assert mesh_plane_loop.mesh_plane_rows_call(scene, lp, table[4:]) is None


def test_a_steps_rotations_from_its_velocities_are_pair_spins():
    """Given a step's ``(v, dt)`` the loop turns each mesh by its body's angular velocity itself: its
    rows are those it gives with the rotations of ``pair_spins`` (and those the NumPy road gives with
    them, the test above); a step of no finite length leaves the rotation unknown (the cutoff's
    allowance, as ``pair_spins``' NaN), and a ``v`` that is not finite is refused by name."""
    from sparsedyn.contact.look_ahead import pair_spins
    rng = np.random.default_rng(6)
    scene = _pebble_scene(rng)
    with sd.use_backend("native", deterministic=True):
        lp = mesh_plane_loop.loop_plan(scene)
        turned = 0
        for q in random_poses(rng, 30, 0.3, (0.02, 0.05)):
            v, dt = rng.normal(0.0, 3.0, 6), 0.01
            cut = np.array([rng.uniform(scene.margin, 0.02)])
            want = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut, pair_spins(scene, q, v, dt)[lp.pair])
            got = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut, ahead=(v, dt))
            rows = np.isfinite(want[:, 0])
            assert np.array_equal(np.isfinite(got[:, 0]), rows)
            assert np.abs(got[rows] - want[rows]).max(initial=0.0) <= BOUND
            still = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut)
            turned += not np.array_equal(np.isfinite(still[:, 0]), rows)
            unknown = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut, np.full((1, 3), np.nan))
            got = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut, ahead=(v, np.inf))
            assert np.array_equal(got, unknown)
        v[3] = np.nan                                       # refused by name, as pair_spins refuses it
        with pytest.raises(ValueError, match="v: contains NaN"):
            mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut, ahead=(v, dt))
    assert turned >= 3                                  # the rotations changed some patches


def test_without_the_routine_the_rows_are_none(monkeypatch):
    monkeypatch.setattr(mesh_plane_loop, "_routine", lambda: None)
    scene = _cube_scene()
    with sd.use_backend("native", deterministic=True):
        lp = mesh_plane_loop.loop_plan(scene)
        assert mesh_plane_loop.mesh_plane_loop_rows(scene, lp, _pose(np.eye(3), [0, 0, 0.09])) is None
        hits = sd.collide(scene, _pose(np.eye(3), [0, 0, 0.09]))               # the NumPy road's
    assert len(hits.pairs) == 4 and np.abs(hits.distances + 0.01).max() <= BOUND


def test_a_scene_without_meshes_on_planes_has_no_plan():
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("ball", 0, Transform(np.eye(3), np.zeros(3)), "sphere", (0.1,), "collision")
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("plane", name="floor")])
    assert mesh_plane_loop.loop_plan(scene) is None


def test_a_steps_look_ahead_and_rows_in_one_call_are_pair_cutoffs_and_the_loops(monkeypatch):
    """``mesh_plane_step_rows`` (a step's look-ahead and rows in one call of the routine): each pair's
    cutoff is ``pair_cutoffs``' (``margin + dt (|v_o| + |omega| rho)``, NumPy) to rounding, and its rows
    are the loop's given that cutoff and ``ahead=(v, dt)``, bit for bit (the same routine on the same
    numbers); a ``v`` with a NaN is refused by name; no routine (no C compiler) and the model's
    kinematics not built natively yet give None (the caller's NumPy bound then)."""
    from sparsedyn.contact.look_ahead import body_reach, pair_cutoffs
    rng = np.random.default_rng(8)
    scene = _pebble_scene(rng)
    rho = body_reach(scene)[0]
    with sd.use_backend("native", deterministic=True):
        lp = mesh_plane_loop.loop_plan(scene)
        q0, v0 = scene.model.neutral(), np.zeros(6)
        assert mesh_plane_loop.mesh_plane_step_rows(scene, lp, q0, v0, 0.01, rho) is None    # (kernels not built)
        sd.forward_kinematics(scene.model, q0), sd.body_velocities(scene.model, q0, v0)     # (now built)
        filled = 0
        for q in random_poses(rng, 30, 0.3, (0.0, 0.05)):
            v, dt = rng.normal(0.0, 3.0, 6), 0.01
            cut, rows = mesh_plane_loop.mesh_plane_step_rows(scene, lp, q, v, dt, rho)
            want = pair_cutoffs(scene, q, v, dt)
            assert cut.shape == want.shape and np.abs(cut - want).max() <= BOUND * max(1.0, want.max())
            assert cut.min() > scene.margin
            loop = mesh_plane_loop.mesh_plane_loop_rows(scene, lp, q, cut[lp.pair], ahead=(v, dt))
            assert rows.tobytes() == loop.tobytes()
            filled += int(np.isfinite(rows[:, 0]).sum())
        assert filled >= 30
        v[0] = np.nan                                       # refused by name, as the loop's ahead refuses it
        with pytest.raises(ValueError, match="v: contains NaN"):
            mesh_plane_loop.mesh_plane_step_rows(scene, lp, q, v, dt, rho)
        monkeypatch.setattr(mesh_plane_loop, "_routine", lambda: None)
        assert mesh_plane_loop.mesh_plane_step_rows(scene, lp, q, v * 0, dt, rho) is None
