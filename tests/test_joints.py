import numpy as np
import pytest

from sparsedyn import spatial as sp
from sparsedyn.joints import JOINT_TYPES, jcalc, make_joint

EXPECTED = {"revolute": (1, 1), "continuous": (1, 1), "prismatic": (1, 1), "helical": (1, 1),
            "cylindrical": (2, 2), "planar": (3, 3), "spherical": (4, 3), "free": (7, 6)}


def all_joints():
    return [make_joint(t, axis=(0.3, -0.5, 0.8), pitch=0.07) for t in sorted(JOINT_TYPES)]


def test_registry_sizes():
    assert set(JOINT_TYPES) == set(EXPECTED)
    for j in all_joints():
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


def test_bad_joint_definitions():
    with pytest.raises(ValueError, match="unknown joint type 'ball'.*known types: continuous"):
        make_joint("ball")
    with pytest.raises(ValueError, match="revolute joint: axis must be a nonzero"):
        make_joint("revolute", axis=(0, 0, 0))
    with pytest.raises(ValueError, match="axis must be"):
        make_joint("prismatic", axis=(1, 0))
