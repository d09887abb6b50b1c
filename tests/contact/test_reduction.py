"""A touching patch as a few points (sparsedyn.contact.reduction): the points kept by hand on flat
patches, a mesh on a plane against coal (its convex hull on a half-space), and a mesh prism dropped
on the floor, which rests as it does with every vertex of its face a contact.

Bounds of the physics (as in test_scene_physics, from the solver's stopping test and the step's
position correction): a body at rest moves slower than ``V_REST = 100 tol g dt``, lies no deeper than
``PENETRATION_SLOP + dt V_REST``, and its normal impulses sum to ``m g dt`` within ``2 m V_REST``.
"""

import warnings

import coal
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact import mesh_plane_loop, reduction, scene_data
from sparsedyn.contact.friction_problem import PENETRATION_SLOP
from sparsedyn.model.spatial import Transform

G, DT, TOL = 9.81, 1e-3, 1e-8
V_REST = 100 * TOL * G * DT
SIDES, RADIUS, HEIGHT, MASS = 12, 0.1, 0.06, 1.5           # a regular 12-gon prism: its corners' radius


def prism():
    """``(V, F)`` of a regular ``SIDES``-gon prism of corner radius ``RADIUS`` and height ``HEIGHT``,
    centred on its frame, axis z; faces outward."""
    a = 2 * np.pi * np.arange(SIDES) / SIDES
    ring = np.column_stack([RADIUS * np.cos(a), RADIUS * np.sin(a), np.zeros(SIDES)])
    V = np.concatenate([ring - [0, 0, HEIGHT / 2], ring + [0, 0, HEIGHT / 2], [[0, 0, -HEIGHT / 2],
                                                                             [0, 0, HEIGHT / 2]]])
    lo, hi = 2 * SIDES, 2 * SIDES + 1
    F = []
    for i in range(SIDES):
        j = (i + 1) % SIDES
        F += [[lo, j, i], [hi, SIDES + i, SIDES + j], [i, j, SIDES + j], [i, SIDES + j, SIDES + i]]
    return V, np.array(F)


def random_poses(rng, n, xy, z):
    """``n`` free-joint configurations: x and y uniform in ``(-xy, xy)``, z in ``z = (lo, hi)``, tipped
    up to 0.6 rad about a random axis."""
    for _ in range(n):
        axis = rng.standard_normal(3)
        quat = np.r_[np.sin(0.5 * rng.uniform(0, 0.6)) * axis / np.linalg.norm(axis), 0.0]
        quat[3] = np.sqrt(1 - quat[:3] @ quat[:3])
        yield np.r_[rng.uniform(-xy, xy, 2), rng.uniform(*z), quat]


def prism_hull():
    """coal's convex hull of :func:`prism` (a BVH model's, as coal builds it from the triangles)."""
    return coal_hull(*prism())


def coal_hull(V, F):
    """coal's convex hull of the triangles ``(V, F)`` (a BVH model's, as collide builds it)."""
    bvh = coal.BVHModelOBBRSS()
    bvh.beginModel(len(F), len(V))
    bvh.addVertices(V)
    bvh.addTriangles(F)
    bvh.endModel()
    bvh.buildConvexHull(True, "Qt")
    return bvh.convex


def prism_scene():
    b = sd.ModelBuilder("prism")
    r2, h2 = RADIUS ** 2, HEIGHT ** 2                       # about a cylinder's inertia (near enough: any SPD)
    b.add_body("prism", None, sd.make_joint("free"), mass=MASS,
               rot_inertia=MASS * np.diag([r2 / 4 + h2 / 12, r2 / 4 + h2 / 12, r2 / 2]))
    b.add_frame("prism", "prism")
    V, F = prism()
    g = sd.Geometry("prism", 0, Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0), "collision",
                    vertices=V, faces=F)
    return sd.Scene(b.build().with_geometry(g), world=[sd.Shape("plane", name="floor")], friction=0.8)


# --- the rule by hand ----------------------------------------------------------------------------------

def test_a_rectangular_patch_keeps_its_deepest_point_and_its_corners():
    # a 5 x 4 grid on the rectangle [0, 0.4] x [0, 0.3], deepest at the interior point (0.1, 0.1): the
    # farthest point from it is the corner (0.4, 0.3); the farthest from the line between them on either
    # side the corners (0.4, 0) and (0, 0.3) (distances 0.3 * 0.3 / 0.3606... and 0.3 * 0.2 / ... by hand:
    # the line's normal (-0.2, 0.3) / |.|: (0.4, 0) is at -0.06 / |.|, (0, 0.3) at +0.04 / |.|, the largest
    # each way; (0, 0) at +0.01 / |.|)
    x, y = np.meshgrid(np.linspace(0, 0.4, 5), np.linspace(0, 0.3, 4))
    T = np.column_stack([x.ravel(), y.ravel()])
    d = np.full(len(T), 1e-3)
    deep = int(np.flatnonzero(np.all(np.isclose(T, [0.1, 0.1]), axis=1))[0])
    d[deep] = -2e-3
    keep = reduction.reduce_patches(d, T, np.zeros(len(T), int))
    assert {tuple(np.round(T[k], 12)) for k in keep} == {(0.1, 0.1), (0.4, 0.3), (0.4, 0.0), (0.0, 0.3)}


def test_each_patch_keeps_at_most_four_and_a_line_or_a_point_fewer():
    rng = np.random.default_rng(0)
    T = np.concatenate([rng.uniform(-1, 1, (50, 2)),                   # a cloud: four
                        np.column_stack([np.linspace(0, 1, 7), 2 * np.linspace(0, 1, 7)]),   # a line: two
                        [[3.0, 3.0]]])                                  # a point: one
    g = np.repeat([0, 1, 2], [50, 7, 1])
    d = rng.uniform(-0.01, 0.01, len(T))
    keep = reduction.reduce_patches(d, T, g)
    assert np.bincount(g[keep]).tolist() == [4, 2, 1]
    for k in range(3):                                                  # the deepest of each patch is kept
        assert np.flatnonzero(g == k)[np.argmin(d[g == k])] in keep
    line = np.flatnonzero(g == 1)
    assert set(keep[g[keep] == 1]) == {line[np.argmin(d[line])], line[0] if np.argmin(d[line]) >= 3 else line[-1]}


def test_a_patch_alone_keeps_what_it_keeps_beside_others():
    """One patch keeps the points it keeps beside another patch and among four (its indices shifted),
    ties included: points and depths on a coarse grid (several equally deep, equally far), with and
    without allowances, on a line and on a point."""
    rng = np.random.default_rng(4)
    for t in range(40):
        m = [1, 2, 5, 30][t % 4]
        T = np.round(rng.uniform(-1, 1, (m, 2)), 1) if t % 5 else np.column_stack([np.linspace(0, 1, m)] * 2)
        d = np.round(rng.uniform(-0.01, 0.01, m), 2 + t % 2)
        depth = None if t % 3 == 0 else rng.uniform(0, 0.01, m)
        alone = reduction.reduce_patches(d, T, np.zeros(m, int), depth)
        other = rng.uniform(-1, 1, (7, 2))
        for labels in ([0] * 7, [0, 0, 1, 1, 2, 2, 3]):                 # one patch before it; four
            both = reduction.reduce_patches(np.r_[rng.uniform(-0.01, 0.01, 7), d], np.concatenate([other, T]),
                                            np.r_[labels, np.full(m, 9)],
                                            None if depth is None else np.r_[np.ones(7), depth])
            assert alone.tolist() == (both[both >= 7] - 7).tolist()
        assert int(np.argmin(d)) in alone.tolist() and len(alone) <= 4


def _patch_by_hand(h, T, depth):
    """The module docstring's rule on one patch, point by point in plain Python: the kept indices."""
    m = len(h)
    p0 = min(range(m), key=lambda i: (h[i], i))                         # the first deepest
    touch = [depth is None or h[i] <= max(h[p0], 0.0) + depth[i] for i in range(m)]
    rel = [(T[i][0] - T[p0][0], T[i][1] - T[p0][1]) for i in range(m)]
    D = [rel[i][0] * rel[i][0] + rel[i][1] * rel[i][1] if touch[i] else 0.0 for i in range(m)]
    p1 = min(range(m), key=lambda i: (-D[i], i))                        # the first farthest
    L = D[p1] ** 0.5 if D[p1] > 0 else 1.0
    e = rel[p1]
    A = [(e[0] * rel[i][1] - e[1] * rel[i][0]) / L if touch[i] else 0.0 for i in range(m)]
    p2, p3 = min(range(m), key=lambda i: (-A[i], i)), min(range(m), key=lambda i: (A[i], i))
    return sorted({p0} | ({p1} if D[p1] > reduction.SPAN ** 2 else set()) | ({p2} if A[p2] > reduction.SPAN
                                                                              else set()) |
                  ({p3} if A[p3] < -reduction.SPAN else set()))


def _spin_depth_by_hand(x, theta):
    """Each point's allowance of one patch turning by ``theta`` (3,) (plane axes): the module
    docstring's ``PATCH_DEPTH + max(0, -n . (theta x r)) + |r| (|theta| - sin|theta| + 1 - cos|theta|)``."""
    r = x - x[int(np.argmin(x[:, 0]))]
    lowering = theta[1] * r[:, 2] - theta[2] * r[:, 1]
    a = np.sqrt(np.einsum("ij,ij->i", np.tile(theta, (len(r), 1)), np.tile(theta, (len(r), 1))))
    return reduction.PATCH_DEPTH + np.maximum(0.0, -lowering) + \
        np.sqrt(np.einsum("ij,ij->i", r, r)) * (a - np.sin(a) + 1.0 - np.cos(a))


@pytest.mark.parametrize("padded", [True, False])
def test_close_patches_keeps_each_patchs_points_by_the_rule_spinning_or_not(padded, monkeypatch):
    """``close_patches`` (all pairs' patches at once, the blocks and deepest points shared by the
    allowances and the reduction) equals the rule applied patch by patch in plain Python, bit for bit:
    random patches of 1 to 30 points on a coarse grid (ties in depth and in distance), pairs with no
    point, rotations known, unknown (NaN) and absent, and ``reduce_patches``/``rotation_depth`` alone
    the same; each patch's first least by a padded table and (a batch's many patches) by passes over
    the segments."""
    if not padded:
        monkeypatch.setattr(reduction, "PADDED", 0)
    rng = np.random.default_rng(11)
    for t in range(60):
        P = int(rng.integers(1, 7))
        sizes = rng.integers(0 if P > 1 else 1, 31, P)
        sizes[rng.integers(P)] = max(sizes.max(), 1)
        g = np.repeat(np.arange(P), sizes)
        m = len(g)
        x = np.column_stack([np.round(rng.uniform(-2e-3, 3e-3, m), 3 + t % 3),     # ties in depth, distance
                             np.round(rng.uniform(-0.1, 0.1, (m, 2)), 2)])
        Vl = rng.standard_normal((m, 3))
        Rm = np.array([np.linalg.qr(rng.standard_normal((3, 3)))[0] for _ in range(P)])
        n = rng.standard_normal((P, 3))
        pm, axes = rng.standard_normal((P, 3)), reduction.plane_axes(n / np.linalg.norm(n, axis=1, keepdims=True))
        cutoff, margin = rng.uniform(0.005, 0.02, P), 0.005
        spin = None if t % 4 == 0 else rng.uniform(-0.02, 0.02, (P, 3)) * (t % 5 != 1)
        if t % 4 == 3:
            spin[rng.integers(P)] = np.nan                              # one pair's rotation unknown
        got = reduction.close_patches(g, x, Vl, Rm, pm, axes, cutoff, margin, None if spin is None else spin.tolist())
        keep, depth = [], np.zeros(m)
        for k in range(P):
            at = np.flatnonzero(g == k)
            if not len(at):
                continue
            theta = None if spin is None else np.einsum("ji,j->i", axes[k], spin[k])    # plane axes
            if theta is None or np.isnan(theta).any():
                depth[at] = reduction.PATCH_DEPTH + 2.0 * max(cutoff[k] - margin, 0.0)
            else:
                depth[at] = _spin_depth_by_hand(x[at], theta)
                assert np.array_equal(reduction.rotation_depth(x[at], np.zeros(len(at), int),
                                                               np.tile(theta, (len(at), 1))), depth[at])
            keep += (at[0] + np.array(_patch_by_hand(x[at, 0].tolist(), x[at, 1:].tolist(),
                                                     depth[at].tolist()), int)).tolist()
        keep = np.array(keep, int)
        assert np.array_equal(reduction.reduce_patches(x[:, 0], x[:, 1:], g, depth), keep)
        assert np.array_equal(got[0], g[keep]) and np.array_equal(got[1], x[keep, 0])
        assert np.array_equal(got[5], Vl[keep])
        W = np.einsum("kij,kj->ki", Rm[g[keep]], Vl[keep]) + pm[g[keep]]
        assert np.array_equal(got[2], W) and np.array_equal(got[4], axes[g[keep], :, 0])
        assert np.array_equal(got[3], W - x[keep, :1] * axes[g[keep], :, 0])
        nokeep = reduction.reduce_patches(x[:, 0], x[:, 1:], g)
        assert nokeep.tolist() == [at[0] + i for k in range(P) if len(at := np.flatnonzero(g == k))
                                   for i in _patch_by_hand(x[at, 0].tolist(), x[at, 1:].tolist(), None)]


def test_a_patch_is_spanned_by_the_points_touching_with_its_deepest_only():
    """Patch 0, the grid of the first test: the deepest point (0.1, 0.1) at -2 mm, the row y = 0
    penetrating (-1 mm), the rest 1 mm above the plane.  With an allowance of 1e-5 m only the row
    touches with the deepest point: the farthest of it from (0.1, 0.1) is (0.4, 0) (squared distance
    0.1, by hand), and every point of the row lies on the same side of the line between them (cross
    products -0.04, -0.03, -0.02, -0.01 and 0 for x = 0 ... 0.4): (0, 0) the farthest, none on the
    other side.  With an allowance of 1 cm every point touches: the first test's four corners.
    Patch 1, above the plane (its deepest at +2 mm): a point 5e-6 m higher touches with it, one 1e-4 m
    higher does not (a line of two points)."""
    x, y = np.meshgrid(np.linspace(0, 0.4, 5), np.linspace(0, 0.3, 4))
    T = np.concatenate([np.column_stack([x.ravel(), y.ravel()]), [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    d = np.where(np.isclose(T[:20, 1], 0.0), -1e-3, 1e-3)
    d[int(np.flatnonzero(np.all(np.isclose(T[:20], [0.1, 0.1]), axis=1))[0])] = -2e-3
    d = np.r_[d, 2e-3, 2e-3 + 5e-6, 2e-3 + 1e-4]
    g = np.repeat([0, 1], [20, 3])
    kept = lambda keep, k: {tuple(np.round(T[i], 12)) for i in keep if g[i] == k}     # noqa: E731
    tight = reduction.reduce_patches(d, T, g, np.full(len(d), 1e-5))
    assert kept(tight, 0) == {(0.1, 0.1), (0.4, 0.0), (0.0, 0.0)}
    assert kept(tight, 1) == {(0.0, 0.0), (1.0, 0.0)}
    loose = reduction.reduce_patches(d, T, g, np.full(len(d), 1e-2))
    assert kept(loose, 0) == {(0.1, 0.1), (0.4, 0.3), (0.4, 0.0), (0.0, 0.3)}


def test_a_patchs_allowance_is_patch_depth_and_twice_its_look_ahead():
    # the look-ahead's cutoff, margin + dt s, bounds how far the body's rotation lowers a point relative
    # to the deepest one in a step (|omega| |r_i - r_0| dt <= 2 rho |omega| dt <= 2 dt s)
    got = reduction.patch_depth([0.005, 0.007, 0.004], 0.005)
    assert np.allclose(got, reduction.PATCH_DEPTH + np.array([0.0, 0.004, 0.0]), rtol=0, atol=1e-15)
    assert np.allclose(reduction.patch_depth([0.005]), reduction.PATCH_DEPTH, rtol=0, atol=0)


def test_a_left_out_point_of_a_spinning_falling_prism_stays_above_its_deepest_through_the_step():
    """Random poses of the prism near the floor, spinning (up to ~30 rad/s) and moving (up to 2 m/s)
    for a step of 2 ms: every hull vertex within the cutoff that each point's allowance from the
    rotation (``rotation_depth``) puts above the patch (higher than ``max(d0, 0)`` plus its allowance)
    stays above the deepest vertex, which the patch keeps, at each of 400 instants of the step, the
    motion the exact rigid one (scipy's rotation of ``omega t`` about the body's origin, the origin
    moving at ``v``), by more than PATCH_DEPTH less rounding; and the rule leaves out points the
    cutoff's allowance (twice the look-ahead) keeps."""
    from scipy.spatial.transform import Rotation
    V, _ = prism()
    rho = float(np.linalg.norm(V, axis=1).max())               # the prism's reach about its origin
    rng = np.random.default_rng(5)
    dt, margin = 2e-3, 0.005
    ts = np.linspace(0.0, dt, 401)
    left, tighter = 0, 0
    for q in random_poses(rng, 300, 0.1, (0.0, 0.06)):
        R = Rotation.from_quat(q[3:7]).as_matrix()
        w, vo = rng.standard_normal(3) * rng.uniform(0, 17), rng.standard_normal(3) * rng.uniform(0, 1.2)
        cut = np.array([margin + dt * (np.linalg.norm(vo) + np.linalg.norm(w) * rho)])
        args = (V, [(0, len(V))], R[None], q[None, :3], reduction.plane_axes(np.array([[0.0, 0, 1]])),
                np.zeros((1, 3)), cut, margin)
        _, d, W, _, _, _ = reduction.mesh_plane_patches(*args, spin=(w * dt)[None])
        _, d_loose, *_ = reduction.mesh_plane_patches(*args)
        if not len(d):
            continue
        tighter += len(d_loose) > len(d)
        X0 = V @ R.T + q[:3]
        p0 = int(np.argmin(np.linalg.norm(X0 - W[int(np.argmin(d))], axis=1)))
        assert X0[p0, 2] == X0[:, 2].min()                      # the deepest vertex is kept
        near = np.flatnonzero(X0[:, 2] < cut[0])
        A = reduction.plane_axes(np.array([[0.0, 0, 1]]))[0]   # the floor's axes (columns n, t1, t2)
        x, theta = X0[near] @ A, A.T @ (w * dt)               # (h, t1, t2) and the rotation in those axes
        depth = reduction.rotation_depth(x, np.zeros(len(near), int), np.tile(theta, (len(near), 1)))
        out = near[x[:, 0] > max(X0[p0, 2], 0.0) + depth]
        left += len(out)
        for t in ts:                                            # the exact motion, instant by instant
            Xt = (X0 - q[:3]) @ Rotation.from_rotvec(w * t).as_matrix().T + q[:3] + vo * t
            assert np.all(Xt[out, 2] - Xt[p0, 2] > reduction.PATCH_DEPTH - 1e-12)
    assert left >= 100 and tighter >= 20


def test_a_falling_tipped_prism_keeps_its_corner_alone_given_its_rotation():
    """The prism tipped 0.02 rad (its lowest corner 1e-4 m deep, the next 0.15 mm and more above it)
    falling at 1 m/s without turning, a step of 1 ms: the cutoff's allowance (twice the look-ahead,
    2 mm) keeps four corners, the rotation's (none: the patch falls together) the lowest alone, on
    both roads (``collide_within`` given ``pair_spins``, and the collision kernel's with ``(v, dt)``)."""
    from sparsedyn.contact.collision import collide_within
    from sparsedyn.contact.look_ahead import pair_cutoffs, pair_spins
    scene = prism_scene()
    V, _ = prism()
    quat = np.r_[np.sin(0.01) * np.array([0.6, 0.8, 0.0]), np.cos(0.01)]
    R0, _ = sd.geometry_placements(scene.model, np.r_[0.0, 0.0, 0.0, quat], "collision")
    q = np.array([0.0, 0.0, -float(np.min(V @ R0[0].T[:, 2])) - 1e-4, *quat.tolist()])
    v = np.r_[0.0, 0.0, 0.0, R0[0].T @ [0.0, 0.0, -1.0]]        # [omega; v_o] in the body's axes
    cut, spin = pair_cutoffs(scene, q, v, 1e-3), pair_spins(scene, q, v, 1e-3)
    assert np.allclose(cut, scene.margin + 1e-3, rtol=0, atol=1e-15) and np.all(spin == 0.0)
    assert len(collide_within(scene, q, cut).distances) == 4
    hits = collide_within(scene, q, cut, spin)
    assert len(hits.distances) == 1 and abs(hits.distances[0] + 1e-4) <= 1e-12
    with sd.use_backend("native"):
        pair, _ = scene_data.scene_slot_data(scene, q, ahead=(v, 1e-3))
    assert len(pair) == 1


# --- a mesh on a plane against coal ----------------------------------------------------------------------

def test_a_prism_on_a_plane_is_coals_hull_on_a_half_space_with_at_most_four_hits():
    """Random poses of the prism near the floor: the deepest hit is coal's distance from the prism's
    convex hull to the half-space, its witness coal's; every hit is a hull vertex within the margin at
    its own distance (its height); at most four."""
    scene = prism_scene()
    V, F = prism()
    hull = prism_hull()
    rng = np.random.default_rng(7)
    seen = 0
    for q in random_poses(rng, 200, 0.1, (0.0, 0.08)):
        R, p = sd.geometry_placements(scene.model, q, "collision")
        res = coal.DistanceResult()
        dist = coal.distance(hull, coal.Transform3s(R[0], p[0]), coal.Halfspace(np.array([0.0, 0, 1]), 0.0),
                             coal.Transform3s(np.eye(3), np.zeros(3)), coal.DistanceRequest(), res)
        hits = sd.collide(scene, q.tolist())
        W = V @ R[0].T + p[0]
        if dist >= scene.margin:
            assert len(hits.distances) == 0
            continue
        seen += 1
        k = int(np.argmin(hits.distances))
        assert 1 <= len(hits.distances) <= 4
        assert abs(hits.distances[k] - dist) <= 1e-9
        assert np.allclose(hits.witness_a[k], res.getNearestPoint1(), rtol=0, atol=1e-9)
        near = np.linalg.norm(hits.witness_a[:, None] - W[None], axis=-1).min(1)
        assert near.max() <= 1e-12 and np.all(hits.distances < scene.margin)
        assert np.allclose(hits.distances, hits.witness_a[:, 2], rtol=0, atol=1e-12)
    assert seen >= 20


def test_a_prism_tipped_on_a_corner_keeps_that_corner_alone(monkeypatch):
    """Tipped 0.02 rad about (0.6, 0.8, 0), its lowest corner 1e-4 m deep: the next corners are 0.15 mm
    and more above it (within the margin, beyond PATCH_DEPTH), so the patch is that corner alone, at
    coal's distance and witness; with every point of the margin touching (the rule without the
    allowance) four are kept."""
    scene = prism_scene()
    V, F = prism()
    quat = np.r_[np.sin(0.01) * np.array([0.6, 0.8, 0.0]), np.cos(0.01)]
    R0, _ = sd.geometry_placements(scene.model, np.r_[0.0, 0.0, 0.0, quat], "collision")
    q = [0.0, 0.0, -float(np.min(V @ R0[0].T[:, 2])) - 1e-4, *quat.tolist()]
    R, p = sd.geometry_placements(scene.model, q, "collision")
    res = coal.DistanceResult()
    dist = coal.distance(prism_hull(), coal.Transform3s(R[0], p[0]), coal.Halfspace(np.array([0.0, 0, 1]), 0.0),
                         coal.Transform3s(np.eye(3), np.zeros(3)), coal.DistanceRequest(), res)
    hits = sd.collide(scene, q)
    assert len(hits.distances) == 1 and abs(hits.distances[0] - dist) <= 1e-9 and abs(dist + 1e-4) <= 1e-12
    assert np.allclose(hits.witness_a[0], res.getNearestPoint1(), rtol=0, atol=1e-9)
    monkeypatch.setattr(reduction, "PATCH_DEPTH", scene.margin)
    assert len(sd.collide(scene, q).distances) == 4


def test_a_prism_lying_flat_keeps_the_largest_square_of_its_face():
    """Flat on the floor (1e-4 m deep), the twelve corners of the face are within the margin; the four
    kept are the deepest (a tie: one of them), its opposite corner and the two at right angles: a
    square of area ``2 r^2`` (by hand), the largest quadrilateral in the 12-gon through two opposite
    corners."""
    scene = prism_scene()
    hits = sd.collide(scene, (0.0, 0.0, HEIGHT / 2 - 1e-4, 0.0, 0.0, 0.0, 1.0))
    assert len(hits.distances) == 4 and np.allclose(hits.distances, -1e-4, rtol=0, atol=1e-15)
    P = hits.witness_a[:, :2]
    order = np.argsort(np.arctan2(P[:, 1], P[:, 0]))
    x, y = P[order, 0], P[order, 1]
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    assert abs(area - 2 * RADIUS ** 2) <= 1e-12


# --- a mesh on a box: coal's closest pair, the hull vertices on the face -------------------------------

def box_scene():
    """The prism over a world box 0.4 x 0.4 x 0.1 m whose top face is z = 0."""
    return sd.Scene(prism_scene().model, world=[sd.Shape("box", (0.4, 0.4, 0.1), placement=(np.eye(3), [0, 0, -0.05]),
                                                         name="top")], friction=0.8)


def _tipped(scene, angle, depth=1e-4, xy=(0.01, -0.02)):
    """The prism tipped ``angle`` about (0.6, 0.8, 0), its lowest corner ``depth`` below z = 0."""
    quat = np.r_[np.sin(angle / 2) * np.array([0.6, 0.8, 0.0]), np.cos(angle / 2)]
    R0, _ = sd.geometry_placements(scene.model, np.r_[0.0, 0.0, 0.0, quat], "collision")
    return [*xy, -float(np.min(prism()[0] @ R0[0].T[:, 2])) - depth, *quat.tolist()]


def test_a_prism_on_a_box_is_coals_hull_and_box_with_the_vertices_on_its_face():
    """Random poses over the box, overhanging its edges too: the deepest hit is coal's distance between
    the prism's convex hull and the box (GJK/EPA), its normal coal's, its witness coal's or (a face on
    the face, whose closest pair is any point of it) a hull vertex at that distance; the others are hull vertices
    within the margin whose feet lie on the face of coal's normal, at their heights; at most four."""
    scene = box_scene()
    V = prism()[0]
    hull, box = prism_hull(), coal.Box(0.4, 0.4, 0.1)
    rng = np.random.default_rng(11)
    seen = 0
    for q in random_poses(rng, 150, 0.3, (0.0, 0.08)):
        R, p = sd.geometry_placements(scene.model, q, "collision")
        res = coal.DistanceResult()
        dist = coal.distance(hull, coal.Transform3s(R[0], p[0]), box,
                             coal.Transform3s(np.eye(3), np.array([0, 0, -0.05])), coal.DistanceRequest(), res)
        hits = sd.collide(scene, q.tolist())
        if dist >= scene.margin:
            assert len(hits.distances) == 0
            continue
        seen += 1
        assert 1 <= len(hits.distances) <= 4 and np.all(hits.distances < scene.margin)
        assert abs(hits.distances[0] - dist) <= 1e-9 and np.all(hits.distances[1:] >= hits.distances[0])
        W = V @ R[0].T + p[0]
        vertex = np.linalg.norm(W - hits.witness_a[0], axis=1).min() <= 1e-12
        if not vertex:                        # else a face on the face: the vertex at coal's distance
            assert np.allclose(hits.witness_a[0], res.getNearestPoint1(), rtol=0, atol=1e-9)
        assert np.allclose(hits.normals[0], -np.asarray(res.normal), rtol=0, atol=1e-9)
        rest = hits.witness_a[1:]
        assert np.linalg.norm(rest[:, None] - W[None], axis=-1).min(1, initial=0).max(initial=0) <= 1e-12
        gap = rest - hits.witness_b[1:] - hits.distances[1:, None] * hits.normals[1:]
        assert np.abs(gap).max(initial=0) <= 1e-12 and np.allclose(hits.normals[1:], hits.normals[0], rtol=0, atol=1e-9)
        on = np.abs(hits.witness_b[1:] - [0, 0, -0.05]) / [0.2, 0.2, 0.05]    # the box's faces: 1 in one axis
        assert np.all(on <= 1 + 1e-12) and np.allclose(on.max(1, initial=1), 1, rtol=0, atol=1e-12)
    assert seen >= 20


def test_a_prism_flat_on_a_box_keeps_the_largest_square_and_tipped_its_corner():
    """Flat, 1e-4 m deep: four hits at -1e-4 m spanning the square of area ``2 r^2`` (as on a plane);
    tipped 0.02 rad: the lowest corner alone, 1e-4 m deep (coal's collide on the mesh's triangles
    reports four triangles within the margin, not the deepest)."""
    scene = box_scene()
    hits = sd.collide(scene, (0.01, -0.02, HEIGHT / 2 - 1e-4, 0.0, 0.0, 0.0, 1.0))
    assert len(hits.distances) == 4 and np.allclose(hits.distances, -1e-4, rtol=0, atol=1e-12)
    P = hits.witness_a[:, :2] - [0.01, -0.02]
    order = np.argsort(np.arctan2(P[:, 1], P[:, 0]))
    x, y = P[order, 0], P[order, 1]
    assert abs(0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) - 2 * RADIUS ** 2) <= 1e-12
    hits = sd.collide(scene, _tipped(scene, 0.02))
    assert len(hits.distances) == 1 and abs(hits.distances[0] + 1e-4) <= 1e-9


# --- physics: the reduced patch rests as the whole face does -----------------------------------------------

def _drop(scene, steps=700):
    q0 = np.r_[0.0, 0.0, HEIGHT / 2 + 0.03, np.sin(0.1) * np.array([0.6, 0.8, 0.0]), np.cos(0.1)]   # tilted 0.2 rad
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        return sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, steps)


@pytest.fixture(scope="module")
def drops():
    """The prism dropped tilted from 3 cm, with the patch reduced and with every vertex of it a contact."""
    reduced = _drop(prism_scene())
    mp = pytest.MonkeyPatch()
    mp.setattr(reduction, "_reduce", lambda d, *_: np.arange(len(d)))   # every point: reduce_patches, close_patches
    mp.setattr(scene_data, "_mixed_plan", lambda scene: None)        # the Contact objects' road: any number
    mp.setattr(mesh_plane_loop, "_routine", lambda: None)            # and NumPy's patches (the native loop reduces)
    try:
        whole = _drop(prism_scene())
    finally:
        mp.undo()
    return reduced, whole


def test_a_dropped_prism_rests_on_four_points_carrying_its_weight(drops):
    reduced, whole = drops
    assert max(len(x) for x in reduced.impulses) <= 4
    assert len(whole.impulses[-1]) == SIDES                         # unreduced: every corner of the face
    for r in (reduced, whole):
        assert np.abs(r.v[-100:]).max() <= V_REST                  # at rest for the last 0.1 s
        assert abs(np.sum(r.impulses[-1][:, 2]) - MASS * G * DT) <= 2 * MASS * V_REST


def test_a_dropped_prism_rests_where_it_rests_on_its_whole_face(drops):
    """Height and tilt at rest: each lies on its face within the rest bound, so the two differ by at most
    twice it (height) and twice it over the corner radius (tilt)."""
    reduced, whole = drops
    bound = PENETRATION_SLOP + DT * V_REST
    for r in (reduced, whole):
        assert abs(r.q[-1][2] - HEIGHT / 2) <= bound
    assert abs(reduced.q[-1][2] - whole.q[-1][2]) <= 2 * bound
    tilt = [np.arccos(min(1.0, sd.spatial.quat_to_rot(r.q[-1][3:7])[2, 2])) for r in (reduced, whole)]
    assert max(tilt) <= 2 * bound / RADIUS


def test_a_robots_meshes_on_a_floor_are_each_pairs_own_patch():
    """solo12's 17 meshes at random configurations near a floor: :func:`~sparsedyn.collide` (all
    pairs at once, a pair computed only where its bounding sphere comes within the margin of the
    plane) gives, pair by pair, the single pair's patch of every hull vertex (``mesh_plane_reduced``,
    no broad phase), with the same hit count."""
    from erd import robots_dir
    from sparsedyn.contact.collision import _hull_vertices
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "solo_description" / "robots" / "solo12.urdf", floating_base=True,
                             geometry=True)
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False)
    rng = np.random.default_rng(3)
    total = 0
    for _ in range(20):
        q = model.random_configuration(rng)
        q[2] = rng.uniform(0.0, 0.3)
        hits = sd.collide(scene, q)
        R, p = sd.geometry_placements(model, q, "collision")
        for k, (i, j) in enumerate(scene.index.tolist()):
            d, wa, wb, n = reduction.mesh_plane_reduced(_hull_vertices(scene, i) @ R[i].T + p[i], [0, 0, 1.0],
                                                        [0, 0, 0.0], scene.margin)
            mine = hits.pair == k
            assert mine.sum() == len(d) <= 4
            assert np.abs(hits.distances[mine] - d).max(initial=0) <= 1e-12
            assert np.abs(hits.witness_a[mine] - wa).max(initial=0) <= 1e-12
            total += len(d)
    assert total >= 30


def test_a_prism_dropped_on_a_box_rests_on_its_face_on_the_no_contact_object_road(monkeypatch):
    """Dropped tilted onto the box's top (a world box: its contacts the hull's, rows with no Contact
    object): at rest on at most four points within the rest bound of the top, level within it over
    the corner radius, its weight carried."""
    from sparsedyn.contact import scene_step
    monkeypatch.setattr(scene_step, "scene_contacts", lambda *a, **k: pytest.fail("a Contact object was made"))
    r = _drop(box_scene())
    bound = PENETRATION_SLOP + DT * V_REST
    assert max(len(x) for x in r.impulses) <= 4 and len(r.impulses[-1]) >= 3
    assert np.abs(r.v[-100:]).max() <= V_REST
    assert abs(r.q[-1][2] - HEIGHT / 2) <= bound
    assert np.arccos(min(1.0, sd.spatial.quat_to_rot(r.q[-1][3:7])[2, 2])) <= 2 * bound / RADIUS
    assert abs(np.sum(r.impulses[-1][:, 2]) - MASS * G * DT) <= 2 * MASS * V_REST



@pytest.mark.parametrize("tilt", [0.0, 1e-4, 1e-2])
def test_a_cube_resting_on_a_box_face_keeps_its_four_corners_whatever_the_normals_last_digits(tilt):
    """A 0.1 m cube resting flat on a box's top face (gap 0): the closest pair given with a normal
    tilted by ``tilt`` rad off the face's (coal's for shapes that touch: about 1e-4 seen), still makes the face's
    patch, the cube's four bottom corners (by hand: heights 0 on the top face, normal +z); the cube
    half over the edge, its witness on the edge: the face's two corners on the face where the normal is
    the face's, else the closest pair alone (an edge's contact)."""
    c = np.array([[x, y, z] for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (0.0, 0.1)])
    W = c + [0.1, 0.05, 0.5]                        # the box's top face at z = 0.5
    Rb, pb, half = np.eye(3), np.array([0.0, 0.0, 0.25]), np.array([0.5, 0.5, 0.25])
    n = np.array([np.sin(tilt), 0.0, np.cos(tilt)])
    d, wa, wb, nn = reduction.mesh_box_patch(W, Rb, pb, half, (0.0, W[0], W[0] - [0, 0, 0.0], n), 0.005, 1e-5, 1e-10)
    bottom = W[W[:, 2] == 0.5]
    assert len(d) == 4 and np.all(d == 0.0)
    assert sorted(map(tuple, wa)) == sorted(map(tuple, bottom)) and np.array_equal(wb, wa)
    assert np.array_equal(nn, np.tile([0.0, 0.0, 1.0], (4, 1)))
    edge = np.array([0.5, 0.0, 0.5])                # the same normal at a witness on the top face's edge
    d1, wa1, wb1, nn1 = reduction.mesh_box_patch(W + [0.4, 0, 0], Rb, pb, half, (0.0, edge, edge, n), 0.005, 1e-5,
                                                 1e-10)
    assert len(d1) == (2 if tilt == 0.0 else 1)
    assert np.all(wa1[:, 0] == 0.45) if tilt == 0.0 else np.array_equal(wa1[0], edge)
