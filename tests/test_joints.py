import numpy as np
import pytest

from sparsedyn import spatial as sp
from sparsedyn.model.joints import JOINT_TYPES, jcalc, make_joint

EXPECTED = {"revolute": (1, 1), "continuous": (1, 1), "prismatic": (1, 1), "helical": (1, 1),
            "cylindrical": (2, 2), "planar": (3, 3), "spherical": (4, 3), "free": (7, 6),
            "spherical_zyx": (3, 3), "spherical_xyz": (3, 3), "spherical_yxz": (3, 3), "spherical_zxy": (3, 3),
            "translation": (3, 3), "universal": (2, 2), "composite": (7, 6)}
OPTIONS = {"universal": {"axes": ((0.0, 0.6, 0.8), (1.0, 0.2, 0.0))},
           "composite": {"joints": (make_joint("prismatic", (0.0, 0.6, 0.8)), make_joint("spherical"),
                                    make_joint("universal"))}}


def all_joints():
    """One joint of every type, and a screw whose translation axis is not its rotation axis."""
    return [make_joint(t, axis=(0.3, -0.5, 0.8), pitch=0.07, **OPTIONS.get(t, {})) for t in sorted(JOINT_TYPES)] + [
        make_joint("helical", (0.3, -0.5, 0.8), 0.07, translation_axis=(1.0, 0.5, 0.0))]


def test_registry_sizes():
    assert set(JOINT_TYPES) == set(EXPECTED)
    for j in all_joints()[:-1]:
        assert (j.nq, j.nv) == EXPECTED[j.type]
        assert j.motion_subspace().shape == (6, j.nv)


@pytest.mark.parametrize("joint", all_joints(), ids=lambda j: j.type)
def test_neutral_is_identity(joint):
    XJ, _ = jcalc(joint, joint.neutral())
    np.testing.assert_allclose(XJ.E, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(XJ.r, 0, atol=1e-15)


@pytest.mark.parametrize("joint", all_joints(), ids=lambda j: j.type)
def test_S_is_the_velocity_of_integrate(joint, rng):
    """S v equals the child-frame twist of q(t) = q (+) t v, by central differences."""
    for _ in range(3):
        q = joint.random(rng)
        v = rng.normal(size=joint.nv)
        h = 1e-6
        Rm, pm = sp.pose(jcalc(joint, joint.integrate(q, -h * v))[0])
        Rp, pp = sp.pose(jcalc(joint, joint.integrate(q, h * v))[0])
        R, _ = sp.pose(jcalc(joint, q)[0])
        Rdot, pdot = (Rp - Rm) / (2 * h), (pp - pm) / (2 * h)
        W = R.T @ Rdot
        twist = np.concatenate([[W[2, 1], W[0, 2], W[1, 0]], R.T @ pdot])
        np.testing.assert_allclose(jcalc(joint, q)[1] @ v, twist, atol=1e-7)


@pytest.mark.parametrize("joint", all_joints(), ids=lambda j: j.type)
def test_bias_is_the_rate_of_S(joint, rng):
    """cJ = Sdot qd: the rate of change of the child-frame components of S(q(t)) along q(t) = q (+) t qd,
    by central differences; zero (None) exactly for the joints with a constant S."""
    for _ in range(3):
        q, qd, h = joint.random(rng), rng.normal(size=joint.nv), 1e-6
        Sdot = (jcalc(joint, joint.integrate(q, h * qd))[1] - jcalc(joint, joint.integrate(q, -h * qd))[1]) / (2 * h)
        c = joint.bias(q, qd)
        if joint.constant_subspace:
            assert c is None and joint.subspace_rate(q, qd) is None and np.all(Sdot == 0)
        else:
            np.testing.assert_allclose(c, Sdot @ qd, atol=1e-7)
            np.testing.assert_allclose(joint.subspace_rate(q, qd), Sdot, atol=1e-7)
            Q, QD = np.stack([q, q]), np.stack([qd, 2 * qd])           # batched: one state per row
            np.testing.assert_allclose(joint.bias(Q, QD), [c, 4 * c], atol=1e-14)


@pytest.mark.parametrize("joint", all_joints(), ids=lambda j: j.type)
def test_integrate_difference_round_trip(joint, rng):
    q0 = joint.random(rng)
    v = 0.5 * rng.normal(size=joint.nv)   # rotations below pi: the logarithm is unique
    q1 = joint.integrate(q0, v)
    np.testing.assert_allclose(joint.difference(q0, q1), v, atol=1e-10)
    np.testing.assert_allclose(joint.difference(q0, q0), 0, atol=1e-12)
    # batched
    Q0 = np.stack([joint.random(rng) for _ in range(4)])
    V = rng.normal(size=(4, joint.nv)) * 0.5
    np.testing.assert_allclose(joint.difference(Q0, joint.integrate(Q0, V)), V, atol=1e-10)


def test_hand_derived_transforms():
    th = 0.4
    XJ, S = jcalc(make_joint("revolute", (0, 0, 1)), np.array([th]))
    np.testing.assert_allclose(XJ.E, sp.rotz(th))
    np.testing.assert_allclose(S[:, 0], [0, 0, 1, 0, 0, 0])
    XJ, S = jcalc(make_joint("prismatic", (0, 2, 0)), np.array([0.5]))
    np.testing.assert_allclose(XJ.r, [0, 0.5, 0])
    np.testing.assert_allclose(S[:, 0], [0, 0, 0, 0, 1, 0])
    XJ, S = jcalc(make_joint("helical", (1, 0, 0), pitch=0.1), np.array([2.0]))
    np.testing.assert_allclose(XJ.r, [0.2, 0, 0])
    np.testing.assert_allclose(XJ.E, sp.rotx(2.0))
    np.testing.assert_allclose(S[:, 0], [1, 0, 0, 0.1, 0, 0])
    XJ, _ = jcalc(make_joint("planar"), np.array([1.0, 2.0, np.pi / 2]))
    np.testing.assert_allclose(XJ.r, [1, 2, 0])
    np.testing.assert_allclose(XJ.E, sp.rotz(np.pi / 2), atol=1e-15)
    # free joint: 90 deg about z, quaternion [0, 0, sin 45, cos 45]
    s = np.sqrt(0.5)
    XJ, S = jcalc(make_joint("free"), np.array([1.0, 2.0, 3.0, 0, 0, s, s]))
    np.testing.assert_allclose(XJ.E, sp.rotz(np.pi / 2), atol=1e-15)
    np.testing.assert_allclose(XJ.r, [1, 2, 3])
    np.testing.assert_allclose(S, np.eye(6))


@pytest.mark.parametrize("joint", all_joints(), ids=lambda j: j.type)
def test_object_and_batched_jcalc(joint, rng):
    Q = np.stack([joint.random(rng) for _ in range(3)])
    XJ, _ = jcalc(joint, Q)
    XJo, _ = jcalc(joint, Q.astype(object))
    assert object in (XJo.E.dtype, XJo.r.dtype)   # constant parts may stay float
    np.testing.assert_allclose(XJo.E.astype(float), XJ.E, atol=1e-15)
    np.testing.assert_allclose(np.broadcast_to(XJo.r, XJ.r.shape).astype(float), XJ.r, atol=1e-15)
    for k in range(3):
        np.testing.assert_allclose(jcalc(joint, Q[k])[0].E, XJ.E[k], atol=1e-15)


def test_hand_derived_multi_axis_joints():
    a, b, c = 0.4, -0.3, 1.1
    R = {"x": sp.rotx, "y": sp.roty, "z": sp.rotz}
    for order in ("zyx", "xyz", "yxz", "zxy"):      # parent_R_child = R_1(q0) R_2(q1) R_3(q2); E = R^T
        XJ, S = jcalc(make_joint("spherical_" + order), np.array([a, b, c]))
        Rm = [R[k](t).T for k, t in zip(order, (a, b, c))]              # sp.rot* give E = R^T
        np.testing.assert_allclose(XJ.E, (Rm[0] @ Rm[1] @ Rm[2]).T, atol=1e-15)
        e = {k: np.eye(3)[i] for i, k in enumerate("xyz")}
        # body-frame angular velocity: R3^T R2^T e1 qd0 + R3^T e2 qd1 + e3 qd2
        np.testing.assert_allclose(S[:3], np.stack([Rm[2].T @ Rm[1].T @ e[order[0]], Rm[2].T @ e[order[1]],
                                                   e[order[2]]], -1), atol=1e-15)
        np.testing.assert_allclose(S[3:], 0)
    XJ, S = jcalc(make_joint("translation"), np.array([1.0, -2.0, 0.5]))
    np.testing.assert_allclose(XJ.E, np.eye(3))
    np.testing.assert_allclose(XJ.r, [1.0, -2.0, 0.5])
    np.testing.assert_allclose(S, np.concatenate([np.zeros((3, 3)), np.eye(3)]))
    # a screw turning about z and moving along the parent's x: S = [z; pitch E x]
    XJ, S = jcalc(make_joint("helical", (0, 0, 1), 0.1, translation_axis=(1, 0, 0)), np.array([np.pi / 2]))
    np.testing.assert_allclose(XJ.r, [0.1 * np.pi / 2, 0, 0])
    np.testing.assert_allclose(S[:, 0], [0, 0, 1, 0, -0.1, 0], atol=1e-15)


def test_bad_multi_axis_joints():
    with pytest.raises(ValueError, match="composite joint: joints must hold at least one joint"):
        make_joint("composite", joints=[])
    with pytest.raises(ValueError, match=r"composite joint: joints\[1\] is a str, expected a joint"):
        make_joint("composite", joints=[make_joint("revolute"), "prismatic"])
    two = [make_joint("revolute"), make_joint("prismatic")]
    with pytest.raises(ValueError, match="composite joint: placements must hold one placement .* per part, 2"):
        make_joint("composite", joints=two, placements=[None])
    with pytest.raises(ValueError, match=r"composite joint: placements\[1\] must be a Transform with E a 3x3 rotation"):
        make_joint("composite", joints=two, placements=[None, sp.Transform(2 * np.eye(3), np.zeros(3))])
    with pytest.raises(ValueError, match=r"composite joint: placements\[0\] must be a sparsedyn.model.spatial.Transform"):
        make_joint("composite", joints=two, placements=[3.0, None])
    with pytest.raises(ValueError, match="universal joint: axes .* are parallel"):
        make_joint("universal", axes=((1, 0, 0), (2, 0, 0)))
    with pytest.raises(ValueError, match="universal joint: axes must be two 3-vectors"):
        make_joint("universal", axes=((1, 0, 0),))
    with pytest.raises(ValueError, match="helical joint: translation_axis must be a nonzero"):
        make_joint("helical", translation_axis=(0, 0, 0))
    with pytest.raises(ValueError, match="joint type 'revolute' takes no option 'axes'"):
        make_joint("revolute", axes=((1, 0, 0), (0, 1, 0)))


def test_bad_joint_definitions():
    with pytest.raises(ValueError, match="unknown joint type 'ball'.*known types: composite, continuous"):
        make_joint("ball")
    with pytest.raises(ValueError, match="revolute joint: axis must be a nonzero"):
        make_joint("revolute", axis=(0, 0, 0))
    with pytest.raises(ValueError, match="axis must be"):
        make_joint("prismatic", axis=(1, 0))
