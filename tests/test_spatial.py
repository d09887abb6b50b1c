import numpy as np
import pytest

from sparsedyn import spatial as sp
from sparsedyn.model import lie
from sparsedyn.model.joints import quat_exp


def random_transform(rng, batch=()):
    q = rng.normal(size=batch + (4,))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return sp.from_pose(sp.quat_to_rot(q), rng.normal(size=batch + (3,)))


def test_rotz_matches_featherstone(rng):
    th = 0.7
    c, s = np.cos(th), np.sin(th)
    np.testing.assert_allclose(sp.rotz(th), [[c, s, 0], [-s, c, 0], [0, 0, 1]], atol=1e-15)
    np.testing.assert_allclose(sp.rotx(th), [[1, 0, 0], [0, c, s], [0, -s, c]], atol=1e-15)
    np.testing.assert_allclose(sp.roty(th), [[c, 0, -s], [0, 1, 0], [s, 0, c]], atol=1e-15)


def test_axis_rotation_is_transposed_quaternion_rotation(rng):
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    th = rng.uniform(-3, 3, size=(5,))
    E = sp.axis_rotation(axis, th)
    R = sp.quat_to_rot(quat_exp(th[:, None] * axis))
    np.testing.assert_allclose(E, np.swapaxes(R, -1, -2), atol=1e-14)
    np.testing.assert_allclose(E @ np.swapaxes(E, -1, -2), np.broadcast_to(np.eye(3), (5, 3, 3)), atol=1e-14)


def test_quaternion_round_trip(rng):
    q = rng.normal(size=(20, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    q[q[:, 3] < 0] *= -1
    np.testing.assert_allclose(sp.rot_to_quat(sp.quat_to_rot(q)), q, atol=1e-12)
    R = sp.quat_to_rot(q)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)


def test_transform_ops_match_matrices(rng):
    X1, X2 = random_transform(rng), random_transform(rng)
    M1, M2 = sp.motion_matrix(X1), sp.motion_matrix(X2)
    m, f = rng.normal(size=6), rng.normal(size=6)
    np.testing.assert_allclose(sp.motion_matrix(sp.compose(X1, X2)), M1 @ M2, atol=1e-12)
    np.testing.assert_allclose(sp.motion_matrix(sp.inverse(X1)), np.linalg.inv(M1), atol=1e-12)
    np.testing.assert_allclose(sp.force_matrix(X1), np.linalg.inv(M1).T, atol=1e-12)
    np.testing.assert_allclose(sp.apply_motion(X1, m), M1 @ m, atol=1e-12)
    np.testing.assert_allclose(sp.apply_force(X1, f), sp.force_matrix(X1) @ f, atol=1e-12)
    np.testing.assert_allclose(sp.apply_motion_inv(X1, m), np.linalg.solve(M1, m), atol=1e-12)
    np.testing.assert_allclose(sp.apply_force_transpose(X1, f), M1.T @ f, atol=1e-12)
    # power is invariant: (X m) . (X* f) = m . f
    assert np.isclose(sp.apply_motion(X1, m) @ sp.apply_force(X1, f), m @ f)


def test_symmetric_mv_is_the_full_matrix_product(rng):
    """The six entries ``[xx, yy, zz, xy, xz, yz]`` times a vector: the symmetric matrix's product, on
    plain lists of numbers too; small integers, so every product and sum is exact."""
    K = rng.integers(-9, 10, 6).astype(float)
    u = rng.integers(-9, 10, 3).astype(float)
    S = np.array([[K[0], K[3], K[4]], [K[3], K[1], K[5]], [K[4], K[5], K[2]]])
    assert np.array_equal(sp.symmetric_mv(K, u), S @ u)
    assert np.array_equal(sp.symmetric_mv(K.tolist(), u.tolist()), S @ u)


def test_translation_moves_point_velocity():
    # A frame B at r = (1, 0, 0) of A; rotation about z at 1 rad/s moves B's origin at +y.
    X = sp.xlt(np.array([1.0, 0.0, 0.0]))
    vB = sp.apply_motion(X, np.array([0, 0, 1.0, 0, 0, 0]))
    np.testing.assert_allclose(vB, [0, 0, 1, 0, 1, 0])
    # A force f = (0, 1, 0) applied at B's origin has moment r x f = (0, 0, 1) about A's origin.
    fA = sp.apply_force_transpose(X, np.array([0, 0, 0, 0, 1.0, 0]))
    np.testing.assert_allclose(fA, [0, 0, 1, 0, 1, 0])


def test_cross_operators(rng):
    v, m, f = rng.normal(size=(3, 6))
    np.testing.assert_allclose(sp.crm(v) @ m, sp.cross_motion(v, m), atol=1e-13)
    np.testing.assert_allclose(sp.crf(v) @ f, sp.cross_force(v, f), atol=1e-13)
    np.testing.assert_allclose(sp.crf(v), -sp.crm(v).T)
    np.testing.assert_allclose(sp.cross_motion(v, v), 0, atol=1e-13)
    np.testing.assert_allclose(sp.skew(v[:3]) @ m[:3], np.cross(v[:3], m[:3]), atol=1e-13)


def test_spatial_inertia_hand_derivation(rng):
    m, c = 2.5, np.array([0.1, -0.2, 0.3])
    A = rng.normal(size=(3, 3))
    Ic = A @ A.T + np.eye(3)
    I = sp.mcI(m, c, Ic)
    v = rng.normal(size=6)
    w, v0 = v[:3], v[3:]
    vc = v0 + np.cross(w, c)                     # velocity of the CoM
    ke = 0.5 * m * vc @ vc + 0.5 * w @ Ic @ w
    assert np.isclose(0.5 * v @ I @ v, ke)
    m2, c2, Ic2 = sp.inertia_components(I)
    assert np.isclose(m2, m)
    np.testing.assert_allclose(c2, c, atol=1e-14)
    np.testing.assert_allclose(Ic2, Ic, atol=1e-13)


def test_transform_inertia_moves_the_com(rng):
    m, c, Ic = 1.7, rng.normal(size=3), np.diag([0.1, 0.2, 0.25])
    X = random_transform(rng)                    # B_X_A
    IA = sp.transform_inertia(X, sp.mcI(m, c, Ic))
    mA, cA, IcA = sp.inertia_components(IA)
    R, p = sp.pose(X)
    assert np.isclose(mA, m)
    np.testing.assert_allclose(cA, R @ c + p, atol=1e-12)
    np.testing.assert_allclose(IcA, R @ Ic @ R.T, atol=1e-12)


def test_batched_and_object_arrays(rng):
    X = random_transform(rng, (4, 3))
    m = rng.normal(size=(4, 3, 6))
    out = sp.apply_motion(X, m)
    for i in range(4):
        for j in range(3):
            Xij = sp.Transform(X.E[i, j], X.r[i, j])
            np.testing.assert_allclose(out[i, j], sp.apply_motion(Xij, m[i, j]), atol=1e-14)
    Xo = sp.Transform(X.E.astype(object), X.r.astype(object))
    out_o = sp.apply_force_transpose(Xo, m.astype(object))
    assert out_o.dtype == object
    np.testing.assert_allclose(out_o.astype(float), sp.apply_force_transpose(X, m), atol=1e-14)
    th = np.array([0.3, -1.2], dtype=object)
    np.testing.assert_allclose(sp.rotx(th).astype(float), sp.rotx(th.astype(float)), atol=1e-15)


@pytest.mark.parametrize("f", [sp.skew, sp.cross_motion])
def test_no_silent_broadcast_of_wrong_sizes(f):
    with pytest.raises((IndexError, ValueError)):
        f(np.zeros(2)) if f is sp.skew else f(np.zeros(6), np.zeros(5))


# --- structured inertia operations (no 6x6 products) ------------------------------

def _random_rigid(rng, batch=()):
    A = rng.normal(size=batch + (3, 3))
    return sp.mcI(rng.uniform(0.5, 2.0, size=batch), rng.normal(size=batch + (3,)),
                  A @ np.swapaxes(A, -1, -2) + np.eye(3))


def test_transform_inertia_block_formula_equals_matrix_product(rng):
    """X^T I X of a general symmetric 6x6 (an articulated inertia), with leading batch axes."""
    X = random_transform(rng, (5,))
    M = sp.motion_matrix(X)
    S = rng.normal(size=(5, 6, 6))
    S = S + np.swapaxes(S, -1, -2)
    got = sp.transform_inertia(X, S)
    np.testing.assert_allclose(got, np.swapaxes(M, -1, -2) @ S @ M, atol=1e-12)
    np.testing.assert_array_equal(got, np.swapaxes(got, -1, -2))      # symmetric by construction
    E = sp.axis_rotation(np.array([0.0, 0.0, 1.0]), 0.4)
    np.testing.assert_allclose(sp.rotate_symmetric(E, S[0, :3, :3]), E.T @ S[0, :3, :3] @ E, atol=1e-13)


def test_rigid_inertia_parameters_round_trip_and_apply(rng):
    I6 = _random_rigid(rng, (4,))
    RI = sp.rigid_inertia(I6)
    np.testing.assert_array_equal(RI.m, I6[:, 5, 5])
    np.testing.assert_array_equal(sp.rigid_inertia_matrix(RI), I6)
    v = rng.normal(size=(4, 6))
    np.testing.assert_allclose(sp.rigid_apply(RI, v), (I6 @ v[..., None])[..., 0], atol=1e-13)
    J6 = _random_rigid(rng, (4,))
    np.testing.assert_allclose(sp.rigid_inertia_matrix(sp.rigid_add(RI, sp.rigid_inertia(J6))), I6 + J6)


def test_rigid_transform_equals_matrix_product(rng):
    X = random_transform(rng, (3,))
    I6 = _random_rigid(rng, (3,))
    M = sp.motion_matrix(X)
    got = sp.rigid_inertia_matrix(sp.rigid_transform(X, sp.rigid_inertia(I6)))
    np.testing.assert_allclose(got, np.swapaxes(M, -1, -2) @ I6 @ M, atol=1e-12)
    np.testing.assert_allclose(got, sp.transform_inertia(X, I6), atol=1e-12)


def test_structured_operations_on_object_arrays(rng):
    X = random_transform(rng)
    Xo = sp.Transform(X.E.astype(object), X.r.astype(object))
    S = rng.normal(size=(6, 6))
    S = S + S.T
    I6 = _random_rigid(rng)
    np.testing.assert_allclose(sp.transform_inertia(Xo, S.astype(object)).astype(float),
                               sp.transform_inertia(X, S), atol=1e-14)
    RIo = sp.rigid_transform(Xo, sp.rigid_inertia(I6))
    np.testing.assert_allclose(sp.rigid_inertia_matrix(RIo).astype(float),
                               sp.rigid_inertia_matrix(sp.rigid_transform(X, sp.rigid_inertia(I6))), atol=1e-14)


def test_axis_aligned_rotation_has_exact_zeros_and_ones():
    """About a coordinate axis the rotation is [[c, s, 0], [-s, c, 0], [0, 0, 1]] exactly (the tracer
    folds its structural zeros and ones); quarter turns of URDF's rpy are exact too."""
    from sparsedyn.symbolic.ir import COS, Graph
    g = Graph()
    th = g.inputs(0, (1,))
    E = sp.axis_rotation(np.array([0.0, 0.0, 1.0]), th)[0]
    assert [E[2, 2], E[0, 2], E[2, 0], E[1, 2]] == [1.0, 0, 0, 0]
    assert E[0, 0].i == E[1, 1].i and g.nodes[E[0, 0].i][0] == COS      # exactly cos(theta), one node
    np.testing.assert_array_equal(sp.rpy_to_rot([np.pi / 2, 0.0, -np.pi / 2]),
                                  [[0, 0, -1], [-1, 0, 0], [0, 1, 0]])


# --- SO(3) / SE(3): exp, log and their Jacobians against Pinocchio, and identities ---------------

import pinocchio as _pin                       # noqa: E402  (the oracle of this section; never skipped)

import sparsedyn as sd                         # noqa: E402
from conftest import EPS, rel_err, rounding_bound   # noqa: E402

_SWAP = np.zeros((6, 6))
_SWAP[:3, 3:] = _SWAP[3:, :3] = np.eye(3)      # [v; omega] <-> [omega; v]


def _twists(rng, n=40):
    """Twists with rotation angles from 1e-12 to pi - 1e-3 (and exactly zero), random directions."""
    angles = np.concatenate([[0.0, 1e-12, 1e-8, 1e-5, 1e-3], rng.uniform(0, np.pi - 1e-3, n - 5)])
    w = rng.normal(size=(n, 3))
    w *= (angles / np.linalg.norm(w, axis=1))[:, None]
    return np.concatenate([w, rng.normal(size=(n, 3)) * 2], -1)


def test_lie_group_maps_match_pinocchio():
    rng = np.random.default_rng(0)
    xis = _twists(rng)
    R, p = sd.exp6(xis)                         # one batch
    J, L = sd.exp6_jacobian(xis), sd.log6_jacobian((R, p))
    back = sd.log6((R, p))
    assert R.shape == (40, 3, 3) and p.shape == (40, 3) and J.shape == L.shape == (40, 6, 6)
    for k, xi in enumerate(xis):
        w, v = xi[:3], xi[3:]
        M = _pin.exp6(_pin.Motion(v, w))
        assert rel_err(R[k], M.rotation) < 1e-9 and rel_err(p[k], M.translation) < 1e-9
        assert rel_err(back[k], _SWAP @ _pin.log6(M).vector) < 1e-9
        if not 1e-6 < np.linalg.norm(w) < 0.05:
            # Pinocchio's Jexp6 and Jlog6 cancel digits between their Taylor branch and ~0.05 rad
            # (2.5e-7 and 1.7e-7 off at 1e-3 rad against central differences, where ours are 4e-11
            # off): there both are checked by differences (test_jacobians_by_differences)
            assert rel_err(J[k], _SWAP @ _pin.Jexp6(_pin.Motion(v, w)) @ _SWAP) < 1e-9
            assert rel_err(L[k], _SWAP @ _pin.Jlog6(M) @ _SWAP) < 1e-9
        assert rel_err(sd.exp3(w), _pin.exp3(w)) < 1e-9 and rel_err(sd.log3(M.rotation), _pin.log3(M.rotation)) < 1e-9
        assert rel_err(sd.exp3_jacobian(w), _pin.Jexp3(w)) < 1e-9
        assert rel_err(sd.log3_jacobian(M.rotation), _pin.Jlog3(M.rotation)) < 1e-9


def test_lie_group_identities():
    rng = np.random.default_rng(1)
    xis = _twists(rng, 20)
    R, p = sd.exp6(xis)
    # exp6(log6(X)) = X and log6(exp6(xi)) = xi (angles below pi), to rounding
    R2, p2 = sd.exp6(sd.log6((R, p)))
    assert rel_err(R2, R) <= rounding_bound(30) and rel_err(p2, p) <= rounding_bound(30, kappa=10)
    assert rel_err(sd.log6((R, p)), xis) <= rounding_bound(30, kappa=10)
    assert rel_err(sd.exp3(xis[:, :3]), R) <= rounding_bound(30)
    # R is a rotation
    assert rel_err(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape)) <= rounding_bound(10)
    # Jlog6 at exp6(xi) inverts Jexp6(xi)
    JL = sd.log6_jacobian((R, p)) @ sd.exp6_jacobian(xis)
    assert rel_err(JL, np.broadcast_to(np.eye(6), JL.shape)) <= rounding_bound(60, kappa=100)


def test_jacobians_by_differences():
    """(log6(exp6(xi)^-1 exp6(xi + h e_k)) - (same at -h)) / 2h = J e_k + O(h^2) (h = 1e-5: error
    ~ h^2 |d3| + eps / h, about 1e-10 for unit-size twists), small angles included."""
    rng = np.random.default_rng(2)
    for xi in _twists(rng, 8)[2:]:
        R0, p0 = sd.exp6(xi)

        def rel(x):
            R1, p1 = sd.exp6(x)
            return sd.log6((R0.T @ R1, R0.T @ (p1 - p0)))

        h = 1e-5
        fd = np.stack([(rel(xi + h * e) - rel(xi - h * e)) / (2 * h) for e in np.eye(6)], -1)
        assert np.abs(fd - sd.exp6_jacobian(xi)).max() < 1e-9

        def right(d):                               # log6(X exp6(d))
            Rd, pd = sd.exp6(d)
            return sd.log6((R0 @ Rd, p0 + R0 @ pd))

        fd = np.stack([(right(h * e) - right(-h * e)) / (2 * h) for e in np.eye(6)], -1)
        assert np.abs(fd - sd.log6_jacobian((R0, p0))).max() < 1e-9


def test_lie_group_maps_are_traced_and_differentiated():
    """The maps run on the symbolic layer's object arrays, so a user kernel built from them is
    traced, compiled and differentiated: d log6(exp6(xi)) / d xi = 1, d p / d xi = V-part of Jexp6."""
    model = sd.serial_chain(1)

    def roundtrip(model, xi):
        return sd.log6(sd.exp6(xi))

    def position(model, xi):
        R, p = sd.exp6(xi)
        return R.T @ p                              # exp6(xi)^-1 origin: -R^T p up to the sign

    xi = np.array([0.3, -0.2, 0.5, 1.0, 2.0, 3.0])
    d = sd.derivatives(roundtrip, wrt="xi", inputs={"xi": (6,)}, outputs={"y": (6,)})(model, xi)
    assert rel_err(d, np.eye(6)) <= rounding_bound(100)
    dp = sd.derivatives(position, wrt="xi", inputs={"xi": (6,)}, outputs={"y": (3,)})(model, xi)
    h = 1e-6
    fd = np.stack([(position(model, xi + h * e) - position(model, xi - h * e)) / (2 * h) for e in np.eye(6)], -1)
    assert np.abs(dp - fd).max() < 1e-8                # central differences: O(h^2) + eps / h


def test_lie_group_bad_input():
    with pytest.raises(ValueError, match=r"xi: expected a twist of shape \(\.\.\., 6\), \[omega; v\]"):
        sd.exp6(np.zeros(3))
    with pytest.raises(TypeError, match=r"log6: expected a pose \(R, p\)"):
        sd.log6(np.eye(4))
    with pytest.raises(ValueError, match=r"log6: expected R \(\.\.\., 3, 3\) and p \(\.\.\., 3\)"):
        sd.log6((np.eye(3), np.zeros(4)))


def test_small_angle_coefficients_are_exact_to_rounding():
    """The ratios (t - sin t)/t^3 and ((t - sin t)/t^3 - 1/6)/t^2, which cancel catastrophically when
    evaluated as written, against their Taylor series summed in exact rational arithmetic."""
    import math
    from fractions import Fraction

    def series(t, k0, n=90):          # sum_m (-1)^m t^(2m) / (2m + k0)!
        return sum((-1) ** m * Fraction(t) ** (2 * m) / math.factorial(2 * m + k0) for m in range(n))

    for t in (1e-12, 1e-6, 1e-3, 0.1, 1.0, 3.1, 9.0, 20.0):
        c, f = lie._c_f(np.array(t))
        cm = series(t, 3)
        fm = (cm - Fraction(1, 6)) / Fraction(t) ** 2
        assert abs(Fraction(float(c)) - cm) <= 8 * EPS * abs(cm), t
        assert abs(Fraction(float(f)) - fm) <= 16 * EPS * abs(fm), t
