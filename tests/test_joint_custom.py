"""sparsedyn.CustomJoint: user-written joints give the built-in joints' numbers (NumPy and compiled),
and bad definitions are refused by name."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import spatial as sp
from sparsedyn.interop.pinocchio import to_pinocchio
from conftest import rel_err, rounding_bound, solve_bound

AXIS = np.array([0.0, 0.6, 0.8])
EX, EY, EZ = np.eye(3)


def revolute_jcalc(q):
    E = sp.axis_rotation(AXIS, q[..., 0])
    return sp.Transform(E, 0 * E[..., 0]), np.concatenate([AXIS, np.zeros(3)])[:, None]


def _rotations(q):
    """E_k = R_k^T of the three turns of parent_R_child = Rz(q0) Ry(q1) Rx(q2)."""
    return [sp.axis_rotation(e, q[..., k]) for k, e in enumerate((EZ, EY, EX))]


def zyx_jcalc(q):
    Ez, Ey, Ex = _rotations(q)
    c0 = sp.mv(Ex, sp.mv(Ey, np.broadcast_to(EZ, q.shape)))          # R_x^T R_y^T e_z, R_x^T e_y, e_x
    c1 = sp.mv(Ex, np.broadcast_to(EY, q.shape))
    S = np.concatenate([np.stack([c0, c1, np.broadcast_to(EX, q.shape)], -1), np.zeros(q.shape[:-1] + (3, 3))], -2)
    return sp.Transform(Ex @ Ey @ Ez, 0 * q), S


def zyx_bias(q, qd):
    """Sdot qd by hand: d/dt E_k = -qd_k (e_k x) E_k."""
    _, Ey, Ex = _rotations(q)
    dz, dy, dx = qd[..., 0:1], qd[..., 1:2], qd[..., 2:3]
    X, Y = np.broadcast_to(EX, q.shape), np.broadcast_to(EY, q.shape)
    Yz = sp.mv(Ey, np.broadcast_to(EZ, q.shape))
    d0 = -dx * sp.cross3(X, sp.mv(Ex, Yz)) - sp.mv(Ex, dy * sp.cross3(Y, Yz))
    d1 = -dx * sp.cross3(X, sp.mv(Ex, Y))
    w = dz * d0 + dy * d1
    return np.concatenate([w, 0 * w], -1)


def two_bodies(j1, j2):
    b = sd.ModelBuilder("pair")
    b.add_body("a", None, j1, mass=1.0, com=[0.3, 0.1, 0.0], rot_inertia=np.diag([0.1, 0.2, 0.3]))
    b.add_body("b", "a", j2, sp.Transform(sp.rotx(0.4), np.array([1.0, 0, 0])), mass=2.0, com=[0.2, 0, 0.1],
               rot_inertia=np.diag([0.3, 0.2, 0.1]))
    b.add_frame("tip", "b", sp.xlt([0.4, 0.0, 0.1]))
    return b.build()


CUSTOM = two_bodies(sd.CustomJoint(3, 3, zyx_jcalc, zyx_bias, name="my_zyx"),
                    sd.CustomJoint(1, 1, revolute_jcalc, name="my_revolute"))
BUILTIN = two_bodies(sd.make_joint("spherical_zyx"), sd.make_joint("revolute", AXIS))


def _states(n=3):
    rng = np.random.default_rng(0)
    return [(BUILTIN.random_configuration(rng), rng.normal(size=4), rng.normal(size=4)) for _ in range(n)]


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_custom_joints_give_the_builtin_numbers(backend):
    with sd.use_backend(backend, deterministic=True):
        for q, v, a in _states():
            H = sd.crba(BUILTIN, q)
            assert rel_err(sd.rnea(CUSTOM, q, v, a), sd.rnea(BUILTIN, q, v, a)) < rounding_bound(4)
            assert rel_err(sd.crba(CUSTOM, q), H) < rounding_bound(4)
            assert rel_err(sd.aba(CUSTOM, q, v, a), sd.aba(BUILTIN, q, v, a)) <= solve_bound(H, a, c=16.0)
            for ref in ("local", "world"):
                assert rel_err(sd.frame_jacobian(CUSTOM, q, "tip", ref), sd.frame_jacobian(BUILTIN, q, "tip", ref)) \
                    < rounding_bound(4)
        Q, V, A = (np.stack(x) for x in zip(*_states()))                      # batched
        assert rel_err(sd.rnea(CUSTOM, Q, V, A), sd.rnea(BUILTIN, Q, V, A)) < rounding_bound(4)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_custom_joint_coriolis_matrix(backend):
    """Sdot of a custom joint comes from its bias and S: C equals the built-in joint's (built from its own
    Sdot), C v is the velocity part of the bias forces and dH/dt - 2 C is skew-symmetric."""
    h = 1e-4            # central differences of H along v: truncation ~ h^2 |d3H|, far below 1e-6 |H| |v|
    with sd.use_backend(backend, deterministic=True):
        for q, v, _ in _states():
            C = sd.coriolis_matrix(CUSTOM, q, v)
            assert rel_err(C, sd.coriolis_matrix(BUILTIN, q, v)) < rounding_bound(4, c=64)
            bias = sd.nonlinear_effects(CUSTOM, q, v) - sd.generalized_gravity(CUSTOM, q)
            assert rel_err(C @ v, bias) < rounding_bound(4, c=64) * max(1.0, np.abs(v).max())
            dH = (sd.crba(CUSTOM, q + h * v) - sd.crba(CUSTOM, q - h * v)) / (2 * h)
            N = dH - 2 * C
            scale = np.abs(sd.crba(CUSTOM, q)).max() * max(1.0, np.abs(v).max())
            assert np.abs(N + N.T).max() < 1e-6 * scale and np.abs(N).max() > 1e-3 * scale


def test_coriolis_matrix_of_a_custom_joint_with_its_own_integrate_is_refused():
    """Along a user's integrate the directions need not commute: Sdot cannot be had from the bias."""
    joint = sd.CustomJoint(3, 3, zyx_jcalc, zyx_bias, name="my_zyx", integrate=lambda q, v: q + v,
                           difference=lambda q0, q1: q1 - q0)
    model = two_bodies(joint, sd.make_joint("revolute", AXIS))
    q, v, _ = _states(1)[0]
    with pytest.raises(NotImplementedError, match="CustomJoint 'my_zyx'.*own integrate"):
        sd.coriolis_matrix(model, q, v)


def test_custom_joint_derivatives_and_energy():
    q, v, a = _states(1)[0]
    for x, y in zip(sd.rnea_derivatives(CUSTOM, q, v, a), sd.rnea_derivatives(BUILTIN, q, v, a)):
        assert rel_err(x, y) < rounding_bound(4, 10.0)


def test_equal_definitions_share_their_key():
    again = sd.CustomJoint(1, 1, revolute_jcalc, name="my_revolute")
    assert again == CUSTOM.joints[1] and again.key == CUSTOM.joints[1].key
    other = sd.CustomJoint(1, 1, lambda q: (sp.Transform(sp.axis_rotation(EX, q[..., 0]), 0 * q[..., :1] * EX),
                                            np.array([[1.0], [0], [0], [0], [0], [0]])), name="my_revolute")
    assert other != again and other.key != again.key


def test_bad_custom_joints_are_refused_by_name():
    with pytest.raises(ValueError, match=r"CustomJoint 'k': S has shape \(6, 1\), expected \(6, 2\)"):
        sd.CustomJoint(2, 2, lambda q: revolute_jcalc(q[..., :1]), name="k")

    def branching(q):
        E = sp.axis_rotation(AXIS, q[..., 0] if q[0] > 0 else -q[..., 0])
        return sp.Transform(E, 0 * E[..., 0]), np.concatenate([AXIS, np.zeros(3)])[:, None]
    with pytest.raises(ValueError, match="CustomJoint 'b': its functions must be written .* branches on a value"):
        sd.CustomJoint(1, 1, branching, name="b")

    def linalg(q):
        XJ, S = revolute_jcalc(q)
        return sp.Transform(np.linalg.inv(XJ.E.T), XJ.r), S
    with pytest.raises(ValueError, match="CustomJoint 'l': its functions must be written"):
        sd.CustomJoint(1, 1, linalg, name="l")
    with pytest.raises(ValueError, match=r"CustomJoint 'z': S changes with q, so bias\(q, qd\) = Sdot qd must be given"):
        sd.CustomJoint(3, 3, zyx_jcalc, name="z")
    with pytest.raises(ValueError, match=r"CustomJoint 'w': S qd = .* is not the velocity of the placement"):
        sd.CustomJoint(1, 1, lambda q: (revolute_jcalc(q)[0], 2 * revolute_jcalc(q)[1]), name="w")
    with pytest.raises(ValueError, match=r"CustomJoint 'c': bias\(q, qd\) .* differs from Sdot qd"):
        sd.CustomJoint(3, 3, zyx_jcalc, lambda q, qd: 2 * zyx_bias(q, qd), name="c")
    with pytest.raises(ValueError, match="CustomJoint 'n': nq = 4 differs from nv = 3, so q does not add like a vector; give integrate"):
        sd.CustomJoint(4, 3, zyx_jcalc, name="n")
    with pytest.raises(ValueError, match="CustomJoint 'j': jcalc must be a function"):
        sd.CustomJoint(1, 1, "revolute", name="j")
    with pytest.raises(ValueError, match=r"CustomJoint 'r': jcalc\(q\) must return \(XJ, S\)"):
        sd.CustomJoint(1, 1, lambda q: q, name="r")


def test_custom_joints_are_not_exported_where_they_cannot_be_written():
    with pytest.raises(sd.ModelError, match="joint type 'custom' has no Pinocchio equivalent"):
        to_pinocchio(CUSTOM)
    with pytest.raises(ValueError, match="to_urdf: joint .* of type 'custom' cannot be written as URDF"):
        sd.to_urdf(CUSTOM)
