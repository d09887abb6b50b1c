import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import spatial as sp
from conftest import random_state, rel_err, rounding_bound

REFS = ("local", "world", "local_world_aligned")


def test_jacobian_times_v_is_frame_velocity(tree, rng):
    q, v, _ = random_state(tree, rng)
    for frame in tree.frame_names:
        for ref in REFS:
            J = sd.frame_jacobian(tree, q, frame, ref)
            assert J.shape == (6, tree.nv)
            assert rel_err(J @ v, sd.frame_velocity(tree, q, v, frame, ref)) < 1e-12


def test_body_velocities_are_body_frame_velocities(tree, rng):
    q, v, _ = random_state(tree, rng)
    vb = sd.body_velocities(tree, q, v)
    for i, name in enumerate(tree.body_names):
        assert rel_err(vb[i], sd.frame_velocity(tree, q, v, name, "local")) < 1e-12


def test_finite_differences_of_fk_match_jacobian(tree, rng):
    q, v, _ = random_state(tree, rng)
    h = 1e-6
    Rp, pp = sd.frame_placements(tree, sd.integrate(tree, q, h * v))
    Rm, pm = sd.frame_placements(tree, sd.integrate(tree, q, -h * v))
    R, p = sd.frame_placements(tree, q)
    for k, frame in enumerate(tree.frame_names):
        J = sd.frame_jacobian(tree, q, frame, "local_world_aligned")
        np.testing.assert_allclose((pp[k] - pm[k]) / (2 * h), J[3:] @ v, atol=1e-6)
        W = (Rp[k] - Rm[k]) / (2 * h) @ R[k].T          # skew(omega_world)
        np.testing.assert_allclose([W[2, 1], W[0, 2], W[1, 0]], J[:3] @ v, atol=1e-6)


def test_fk_consistency_between_entry_points(tree, rng):
    q, _, _ = random_state(tree, rng)
    R, p = sd.forward_kinematics(tree, q)
    Rf, pf = sd.frame_placements(tree, q)
    for i, name in enumerate(tree.body_names):
        k = tree.frame(name)
        np.testing.assert_allclose(Rf[k], R[i], atol=1e-14)
        np.testing.assert_allclose(pf[k], p[i], atol=1e-14)
        R1, p1 = sd.frame_placement(tree, q, name)
        np.testing.assert_allclose(p1, p[i], atol=1e-14)
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)


def test_world_and_local_jacobians_are_related_by_the_frame_pose(tree, rng):
    q, _, _ = random_state(tree, rng)
    frame = tree.frame_names[-1]
    R, p = sd.frame_placement(tree, q, frame)
    Jl = sd.frame_jacobian(tree, q, frame, "local")
    Jw = sd.frame_jacobian(tree, q, frame, "world")
    Ja = sd.frame_jacobian(tree, q, frame, "local_world_aligned")
    X_world_from_frame = sp.motion_matrix(sp.inverse(sp.from_pose(R, p)))
    np.testing.assert_allclose(Jw, X_world_from_frame @ Jl, atol=1e-12)
    np.testing.assert_allclose(Ja[:3], R @ Jl[:3], atol=1e-12)
    np.testing.assert_allclose(Ja[3:], R @ Jl[3:], atol=1e-12)


def test_hand_derived_planar_two_link():
    b = sd.ModelBuilder("2R")
    b.add_body("l1", None, sd.make_joint("revolute", (0, 0, 1)))
    b.add_body("l2", "l1", sd.make_joint("revolute", (0, 0, 1)), sp.xlt([1.0, 0, 0]))
    b.add_frame("tip", "l2", sp.xlt([0.5, 0, 0]))
    m = b.build()
    q = np.array([0.3, 0.9])
    _, p = sd.frame_placement(m, q, "tip")
    np.testing.assert_allclose(p, [np.cos(0.3) + 0.5 * np.cos(1.2), np.sin(0.3) + 0.5 * np.sin(1.2), 0], atol=1e-15)
    J = sd.frame_jacobian(m, q, "tip", "local_world_aligned")
    np.testing.assert_allclose(J[3:5], [[-np.sin(0.3) - 0.5 * np.sin(1.2), -0.5 * np.sin(1.2)],
                                        [np.cos(0.3) + 0.5 * np.cos(1.2), 0.5 * np.cos(1.2)]], atol=1e-15)
    np.testing.assert_allclose(J[2], [1, 1])


def test_batched_equals_singles_and_object_arrays(tree, rng):
    Q, V, _ = random_state(tree, rng, (3, 2))
    R, p = sd.forward_kinematics(tree, Q)
    vb = sd.body_velocities(tree, Q, V)
    frame = tree.frame_names[-1]
    J = sd.frame_jacobian(tree, Q, frame, "world")
    assert R.shape == (3, 2, tree.nbodies, 3, 3) and J.shape == (3, 2, 6, tree.nv)
    for i in range(3):
        for j in range(2):
            np.testing.assert_allclose(sd.forward_kinematics(tree, Q[i, j])[1], p[i, j], atol=1e-14)
            np.testing.assert_allclose(sd.body_velocities(tree, Q[i, j], V[i, j]), vb[i, j], atol=1e-13)
            np.testing.assert_allclose(sd.frame_jacobian(tree, Q[i, j], frame, "world"), J[i, j], atol=1e-13)
    q, v = Q[0, 0], V[0, 0]
    Ro, po = sd.forward_kinematics(tree, q.astype(object))
    assert po.dtype == object
    np.testing.assert_allclose(po.astype(float), p[0, 0], atol=1e-13)
    Jo = sd.frame_jacobian(tree, q.astype(object), frame, "world")
    np.testing.assert_allclose(Jo.astype(float), J[0, 0], atol=1e-13)
    vo = sd.body_velocities(tree, q.astype(object), v.astype(object))
    np.testing.assert_allclose(vo.astype(float), vb[0, 0], atol=1e-13)


def test_bad_arguments_are_named(tree):
    q = tree.neutral()
    with pytest.raises(ValueError, match=rf"q: expected shape \(\.\.\., {tree.nq}\)"):
        sd.forward_kinematics(tree, q[:-1])
    with pytest.raises(ValueError, match=rf"v: expected shape \(\.\.\., {tree.nv}\)"):
        sd.body_velocities(tree, q, np.zeros(tree.nv + 1))
    with pytest.raises(KeyError, match="no frame 'nope'"):
        sd.frame_jacobian(tree, q, "nope")
    with pytest.raises(ValueError, match="reference: expected one of"):
        sd.frame_jacobian(tree, q, tree.frame_names[0], "global")
    with pytest.raises(ValueError, match="batch shapes do not broadcast"):
        sd.body_velocities(tree, np.stack([q] * 3), np.zeros((2, tree.nv)))
    with pytest.raises(ValueError, match="NaN"):
        sd.forward_kinematics(tree, np.full(tree.nq, np.nan))


def test_non_unit_quaternion_is_refused():
    from sparsedyn.model.builders import random_tree
    m = random_tree(3, joint_types=("revolute",), floating_base=True, seed=0)
    q = m.neutral()
    q[3:7] = [0, 0, 0, 2.0]
    with pytest.raises(ValueError, match=r"quaternion of joint .* \(q\[3:7\], \[x, y, z, w\]\) is not of unit norm"):
        sd.forward_kinematics(m, q)


def _with_shapes(tree, rng):
    """``tree`` with one random box on every body and one on the world, and a frame at each box's pose."""
    import dataclasses
    geoms, frames = [], []
    for b in range(-1, tree.nbodies):
        q4 = rng.normal(size=4)
        X = sp.from_pose(sp.quat_to_rot(q4 / np.linalg.norm(q4)), rng.normal(size=3))
        geoms.append(sd.Geometry(f"g{b}", b, X, "box", (0.1, 0.2, 0.3), rng.choice(["visual", "collision"])))
        if b >= 0:
            frames.append(sd.Frame(f"shape{b}", b, X))
    return tree.with_geometry(*geoms), dataclasses.replace(tree, frames=tree.frames + tuple(frames))


def test_geometry_placements_are_frame_placements_of_the_same_pose(tree, rng):
    shaped, framed = _with_shapes(tree, rng)
    q = np.stack([tree.random_configuration(rng) for _ in range(2)])
    Rf, pf = sd.frame_placements(framed, q)
    for kind in ("visual", "collision"):
        geoms = shaped.geometry(kind)
        R, p = sd.geometry_placements(shaped, q, kind)
        assert R.shape == (2, len(geoms), 3, 3) and p.shape == (2, len(geoms), 3)
        for i, g in enumerate(geoms):
            if g.body < 0:                          # on the world: its own fixed pose
                R0, p0 = sp.pose(g.X)
                np.testing.assert_array_equal(R[:, i], np.broadcast_to(R0, (2, 3, 3)))
                np.testing.assert_array_equal(p[:, i], np.broadcast_to(p0, (2, 3)))
                continue
            k = framed.frame(f"shape{g.body}")
            assert rel_err(R[:, i], Rf[:, k]) == 0 and rel_err(p[:, i], pf[:, k]) == 0


def test_geometry_placements_traced_equal_numpy(rng):
    from sparsedyn.kernels import REGISTRY
    from sparsedyn.symbolic.trace import trace_kernel
    tree = sd.random_tree(5, joint_types="all", seed=3)
    shaped, _ = _with_shapes(tree, rng)
    q = shaped.random_configuration(rng)
    for kind in ("visual", "collision"):
        want = sd.geometry_placements(shaped, q, kind)
        got = trace_kernel(REGISTRY["geometry_placements"], shaped, {"kind": kind}).evaluate([q])
        for a, c in zip(got, want):
            assert a.shape == c.shape and rel_err(a, c) <= rounding_bound(tree.nbodies + 2)


def test_reference_in_any_case_and_as_pinocchios_enum_on_the_native_road(rng):
    """``"LOCAL_WORLD_ALIGNED"`` and ``pin.ReferenceFrame.LOCAL_WORLD_ALIGNED`` are accepted by the
    plain (native) call and give Pinocchio's ``getFrameJacobian`` in that reference."""
    import pinocchio as pin
    from erd import load_pair, pin_frames
    model, pm = load_pair("panda", False)
    pd = pm.createData()
    q = model.random_configuration(rng)
    pin.computeJointJacobians(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    kf = pin_frames(pm)["panda_hand"]
    bound = rounding_bound(model.nv)
    with sd.use_backend("native", deterministic=True):
        for ref, pref in (("LOCAL_WORLD_ALIGNED", pin.LOCAL_WORLD_ALIGNED), ("World", pin.WORLD),
                          (pin.ReferenceFrame.LOCAL_WORLD_ALIGNED, pin.LOCAL_WORLD_ALIGNED),
                          (pin.ReferenceFrame.LOCAL, pin.LOCAL)):
            want = pin.getFrameJacobian(pm, pd, kf, pref)
            got = sd.frame_jacobian(model, list(q), "panda_hand", ref)
            # Pinocchio orders [v; omega], ours [omega; v].
            assert rel_err(got, np.vstack([want[3:], want[:3]])) < bound, ref
            v = rng.normal(size=model.nv)
            assert rel_err(sd.frame_velocity(model, q, v, "panda_hand", ref), got @ v) < bound, ref
    with pytest.raises(ValueError, match=r"reference: expected one of .*got 'lokal'"):
        sd.frame_jacobian(model, q, "panda_hand", "lokal")
    with pytest.raises(ValueError, match=r"reference: expected one of .*got 2"):
        sd.frame_jacobian(model, q, "panda_hand", 2)
