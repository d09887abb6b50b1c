"""Joint registry: ``jcalc(joint, q) -> (XJ, S)``.

Every joint type is one small class.  ``XJ = child_X_parent`` is the joint
transform (a :class:`~sparsedyn.model.spatial.Transform`), ``S`` (6, nv) (or (..., 6, nv)) the
motion subspace expressed in the child (successor) frame.  The joint types of this module
have a constant ``S`` (velocities are taken in the child frame), so ``cJ = 0``; those of
:mod:`sparsedyn.model.joint_types` (Euler-angle spherical joints, universal, composite and custom
joints, a screw with its own translation axis) have an ``S(q)`` and a velocity-product term
``cJ = Sdot qd`` (:meth:`Joint.bias`, the apparent derivative in the child frame, RBDA
section 4.4), which every algorithm adds to ``v x vJ``.

Configuration conventions:

==============  ====  ====  =======================================================
type            nq    nv    q / v
==============  ====  ====  =======================================================
revolute        1     1     angle about ``axis`` (limits kept on the model)
continuous      1     1     same as revolute, unbounded
prismatic       1     1     displacement along ``axis``
helical         1     1     angle; translation ``pitch * angle`` along ``axis`` (or along
                            ``translation_axis``, parent frame)
cylindrical     2     2     ``[angle, displacement]`` about / along ``axis``
planar          3     3     q ``[x, y, theta]`` in the parent's xy plane;
                            v ``[omega_z, vx, vy]`` in the child frame
spherical       4     3     q unit quaternion ``[qx, qy, qz, qw]``; v ``omega`` in child frame
free            7     6     q ``[x, y, z, qx, qy, qz, qw]``; v ``[omega; v]`` in child frame
==============  ====  ====  =======================================================

Adding a joint type means adding a class and registering it; no algorithm
changes.  The other joint types and their conventions: :mod:`sparsedyn.model.joint_types`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from .. import backend as bk
from .spatial import Transform, axis_rotation, cross3, quat_to_rot, skew

__all__ = ["Joint", "JOINT_TYPES", "make_joint", "jcalc", "quat_multiply", "quat_exp", "quat_log"]


@dataclass(frozen=True)
class Joint:
    """Base class of all joint types.  Instances are immutable model data."""

    axis: tuple = (0.0, 0.0, 1.0)
    pitch: float = 0.0
    type: ClassVar[str] = ""
    nq: ClassVar[int] = 0
    nv: ClassVar[int] = 0
    options: ClassVar[tuple] = ()             # the type's own fields that make_joint passes on

    def __post_init__(self):
        a = np.asarray(self.axis, dtype=float).reshape(-1)
        if a.shape != (3,) or not np.all(np.isfinite(a)) or np.linalg.norm(a) < 1e-12:
            raise ValueError(f"{self.type} joint: axis must be a nonzero finite 3-vector, got {self.axis!r}")
        object.__setattr__(self, "axis", tuple(float(x) for x in a / np.linalg.norm(a)))

    @property
    def a(self):
        """The joint axis (3,) as a float array, in the joint (child) frame."""
        return np.array(self.axis)

    def motion_subspace(self):
        """The motion subspace ``S`` (6, nv) in the child frame, angular rows first: the constant
        one, or for a joint whose ``S`` depends on ``q`` (:attr:`constant_subspace` false) its value
        at :meth:`neutral` (for scales and structure only)."""
        raise NotImplementedError

    @cached_property
    def subspace(self) -> np.ndarray:
        """:meth:`motion_subspace` as a read-only array, computed once (the joint is frozen; it is
        no field, so equality, hashing and copies ignore it)."""
        S = np.asarray(self.motion_subspace())
        S.flags.writeable = False
        return S

    def __getstate__(self):
        """Pickled without :attr:`subspace`: the same bytes before and after the joint was used."""
        state = dict(self.__dict__)
        state.pop("subspace", None)
        return state

    @property
    def constant_subspace(self) -> bool:
        """Whether ``S`` is the same at every ``q`` (then ``cJ = 0``)."""
        return True

    def bias(self, q, qd):
        """``cJ = Sdot(q, qd) qd`` (..., 6), the joint's velocity-product acceleration in the child
        frame (``d/dt`` of the child-frame components of ``S``), or ``None`` where it is zero
        (every joint with a constant ``S``)."""
        return None

    def subspace_rate(self, q, qd):
        """``Sdot`` (..., 6, nv): the rate of change of the child-frame components of ``S`` along
        ``qd`` (``bias = Sdot qd``), or ``None`` for a constant ``S``."""
        return None

    def jcalc(self, q):
        """``(XJ, S)`` for joint coordinates ``q`` (..., nq)."""
        raise NotImplementedError

    def quaternions(self):
        """The offsets in this joint's ``q`` of its unit quaternions ``[x, y, z, w]`` (checked and
        normalised by the library)."""
        return ()

    def neutral(self):
        """The neutral configuration (nq,) of this joint (zeros; identity quaternions)."""
        return np.zeros(self.nq)

    def random(self, rng, lower=None, upper=None):
        """A random configuration; bounded 1-dof joints honour finite limits."""
        lo = -np.pi if lower is None or not np.all(np.isfinite(lower)) else lower
        hi = np.pi if upper is None or not np.all(np.isfinite(upper)) else upper
        return rng.uniform(lo, hi, size=self.nq)

    def integrate(self, q, v):
        """``q (+) v``: the configuration reached by following velocity ``v`` for unit time."""
        return q + v

    def difference(self, q0, q1):
        """``q1 (-) q0``: the velocity that takes ``q0`` to ``q1`` in unit time."""
        return q1 - q0

    def integrate_jacobians(self, q, v):
        """``(d_dq, d_dv)`` (..., nv, nv): the derivatives of :meth:`integrate` on the tangent spaces
        (of ``q`` and of the result; Pinocchio's ``dIntegrate``).  Vector joints: identities."""
        return np.eye(self.nv), np.eye(self.nv)

    def difference_jacobians(self, q0, q1):
        """``(d_dq0, d_dq1)`` (..., nv, nv): the derivatives of :meth:`difference` on the tangent
        spaces of ``q0`` and ``q1`` (Pinocchio's ``dDifference``).  Vector joints: ``-1`` and ``1``."""
        return -np.eye(self.nv), np.eye(self.nv)

    def retract(self, q, dq):
        """A chart of the configuration space around ``q``: equal to :meth:`integrate` ``(q, dq)``
        to first order in ``dq`` (same value and same derivative at ``dq = 0``) and polynomial in
        ``q``, ``dq`` (no branch, so it can be traced).  Derivatives with respect to ``q`` on the
        tangent space are taken through it."""
        return q + dq


JOINT_TYPES: dict[str, type] = {}


def _register(cls):
    JOINT_TYPES[cls.type] = cls
    return cls


@_register
@dataclass(frozen=True)
class Revolute(Joint):
    type: ClassVar[str] = "revolute"
    nq: ClassVar[int] = 1
    nv: ClassVar[int] = 1

    def motion_subspace(self):
        return np.concatenate([self.a, np.zeros(3)])[:, None]

    def jcalc(self, q):
        E = axis_rotation(self.a, q[..., 0])
        return Transform(E, np.zeros(E.shape[:-1], dtype=E.dtype)), self.subspace


@_register
@dataclass(frozen=True)
class Continuous(Revolute):
    type: ClassVar[str] = "continuous"


@_register
@dataclass(frozen=True)
class Prismatic(Joint):
    type: ClassVar[str] = "prismatic"
    nq: ClassVar[int] = 1
    nv: ClassVar[int] = 1

    def motion_subspace(self):
        return np.concatenate([np.zeros(3), self.a])[:, None]

    def jcalc(self, q):
        r = q[..., 0:1] * self.a
        return Transform(np.broadcast_to(np.eye(3), r.shape[:-1] + (3, 3)), r), self.subspace

    def random(self, rng, lower=None, upper=None):
        return random_displacement(rng, lower, upper, 1)


def random_displacement(rng, lower, upper, size):
    """Uniform displacements (size,) within finite limits, else in [-1, 1]."""
    lo = -1.0 if lower is None or not np.all(np.isfinite(lower)) else lower
    hi = 1.0 if upper is None or not np.all(np.isfinite(upper)) else upper
    return rng.uniform(lo, hi, size=size)


@_register
@dataclass(frozen=True)
class Cylindrical(Joint):
    """Rotation ``q[0]`` about and translation ``q[1]`` along the same ``axis``."""

    type: ClassVar[str] = "cylindrical"
    nq: ClassVar[int] = 2
    nv: ClassVar[int] = 2

    def motion_subspace(self):
        a, z = self.a, np.zeros(3)
        return np.stack([np.concatenate([a, z]), np.concatenate([z, a])], -1)

    def jcalc(self, q):
        return Transform(axis_rotation(self.a, q[..., 0]), q[..., 1:2] * self.a), self.subspace

    def random(self, rng, lower=None, upper=None):
        return np.array([rng.uniform(-np.pi, np.pi), rng.uniform(-1.0, 1.0)])


# The exponential and logarithm maps below are written without branches on values (so that the
# tracer records them once for every state): the squared angle gets a floor of _TINY, which keeps
# the ratios sin(t)/t, (t - sin t)/t^3 ... finite at t = 0 and moves t by at most 1e-100, far below
# rounding.  Each ratio is evaluated in a form without cancellation error beyond |x| * eps.
_TINY = 1e-200


def _norm(w):
    """``sqrt(|w|^2 + _TINY)`` (..., 1): the angle of a rotation vector, floored."""
    return bk.sqrt(np.sum(w * w, -1, keepdims=True) + _TINY)


def _se2_left_jacobian(th):
    """``(a, b)`` with ``V(th) = [[a, -b], [b, a]]``: the SE(2) exponential moves the origin by ``V v_xy``.

    ``a = sin(th) / th`` (even), ``b = (1 - cos th) / th = (th / 2) (sin(th/2) / (th/2))^2`` (odd).
    """
    t = bk.sqrt(th * th + _TINY)
    h = t / 2
    sc = bk.sin(h) / h
    return bk.sin(t) / t, th / 2 * sc * sc


@_register
@dataclass(frozen=True)
class Planar(Joint):
    """Motion in the parent's xy plane: q ``[x, y, theta]``, v ``[omega_z, vx, vy]`` (child frame)."""

    type: ClassVar[str] = "planar"
    nq: ClassVar[int] = 3
    nv: ClassVar[int] = 3

    def motion_subspace(self):
        S = np.zeros((6, 3))
        S[2, 0] = S[3, 1] = S[4, 2] = 1.0
        return S

    def jcalc(self, q):
        E = axis_rotation(np.array([0.0, 0.0, 1.0]), q[..., 2])
        r = np.stack([q[..., 0], q[..., 1], 0 * q[..., 0]], -1)
        return Transform(E, r), self.subspace

    def random(self, rng, lower=None, upper=None):
        return np.array([rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-np.pi, np.pi)])

    def integrate(self, q, v):
        # SE(2) exponential of the body-frame twist.
        th, vx, vy = v[..., 0], v[..., 1], v[..., 2]
        a, b = _se2_left_jacobian(th)
        dx, dy = a * vx - b * vy, b * vx + a * vy
        c, s = bk.cos(q[..., 2]), bk.sin(q[..., 2])
        return np.stack([q[..., 0] + c * dx - s * dy, q[..., 1] + s * dx + c * dy, q[..., 2] + th], -1)

    def retract(self, q, dq):
        c, s = bk.cos(q[..., 2]), bk.sin(q[..., 2])
        vx, vy = dq[..., 1], dq[..., 2]
        return np.stack([q[..., 0] + c * vx - s * vy, q[..., 1] + s * vx + c * vy, q[..., 2] + dq[..., 0]], -1)

    def difference(self, q0, q1):
        d = q1[..., 2] - q0[..., 2]
        th = bk.atan2(bk.sin(d), bk.cos(d))
        c, s = bk.cos(q0[..., 2]), bk.sin(q0[..., 2])
        ex, ey = q1[..., 0] - q0[..., 0], q1[..., 1] - q0[..., 1]
        dx, dy = c * ex + s * ey, -s * ex + c * ey
        a, b = _se2_left_jacobian(th)
        det = a * a + b * b
        return np.stack([th, (a * dx + b * dy) / det, (-b * dx + a * dy) / det], -1)

    def integrate_jacobians(self, q, v):
        return _se2_adjoint_inverse(v), _se2_right_jacobian(v)

    def difference_jacobians(self, q0, q1):
        d = self.difference(q0, q1)
        return -_se2_right_jacobian_inverse(-d), _se2_right_jacobian_inverse(d)


# --- quaternion helpers ([x, y, z, w], float) ---------------------------------

def quat_multiply(p, q):
    """Hamilton product ``p * q`` of quaternions ``[x, y, z, w]``."""
    pv, pw = p[..., :3], p[..., 3:]
    qv, qw = q[..., :3], q[..., 3:]
    return np.concatenate([pw * qv + qw * pv + cross3(pv, qv), pw * qw - np.sum(pv * qv, -1, keepdims=True)], -1)


def quat_exp(w):
    """Unit quaternion of the rotation vector ``w`` (..., 3)."""
    th = _norm(w)
    h = th / 2
    return np.concatenate([(bk.sin(h) / th) * w, bk.cos(h)], -1)


def quat_log(q):
    """Rotation vector of a unit quaternion (shortest rotation: that of the representative with w >= 0)."""
    sgn = bk.copysign(1.0, q[..., 3:])
    s = _norm(q[..., :3])
    th = 2 * bk.atan2(s, q[..., 3:] * sgn)
    return (th / s * sgn) * q[..., :3]


def _quat_retract(q, w):
    """``q * [w / 2, 1]``: ``q * exp(w)`` to first order in ``w`` (not normalised: the norm
    changes only at second order)."""
    one = np.ones(w.shape[:-1] + (1,), dtype=w.dtype)
    return quat_multiply(q, np.concatenate([0.5 * w, one], -1))


def _quat_conj(q):
    return np.concatenate([-q[..., :3], q[..., 3:]], -1)


def _random_quat(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return q if q[3] >= 0 else -q


@_register
@dataclass(frozen=True)
class Spherical(Joint):
    """Ball joint: q ``[qx, qy, qz, qw]``, v ``omega`` in the child frame."""

    type: ClassVar[str] = "spherical"
    nq: ClassVar[int] = 4
    nv: ClassVar[int] = 3

    def motion_subspace(self):
        return np.concatenate([np.eye(3), np.zeros((3, 3))], 0)

    def quaternions(self):
        return (0,)

    def jcalc(self, q):
        E = np.swapaxes(quat_to_rot(q), -1, -2)
        return Transform(E, np.zeros(E.shape[:-1], dtype=E.dtype)), self.subspace

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 1.0])

    def random(self, rng, lower=None, upper=None):
        return _random_quat(rng)

    def integrate(self, q, v):
        return quat_multiply(q, quat_exp(v))

    def retract(self, q, dq):
        return _quat_retract(q, dq)

    def difference(self, q0, q1):
        return quat_log(quat_multiply(_quat_conj(q0), q1))

    def integrate_jacobians(self, q, v):
        K, A, B, C, _ = _so3_coefficients(v)
        return np.swapaxes(_so3_exp(K, A, B), -1, -2), _so3_right_jacobian(K, B, C)

    def difference_jacobians(self, q0, q1):
        d = self.difference(q0, q1)
        return -_so3_right_jacobian_inverse(-d), _so3_right_jacobian_inverse(d)


@_register
@dataclass(frozen=True)
class Free(Joint):
    """Floating joint: q ``[x, y, z, qx, qy, qz, qw]``, v ``[omega; v]`` in the child frame."""

    type: ClassVar[str] = "free"
    nq: ClassVar[int] = 7
    nv: ClassVar[int] = 6

    def motion_subspace(self):
        return np.eye(6)

    def quaternions(self):
        return (3,)

    def jcalc(self, q):
        return Transform(np.swapaxes(quat_to_rot(q[..., 3:7]), -1, -2), q[..., 0:3]), self.subspace

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])

    def random(self, rng, lower=None, upper=None):
        return np.concatenate([rng.uniform(-1, 1, 3), _random_quat(rng)])

    def integrate(self, q, v):
        # SE(3) exponential of the body twist [omega; v]: p += R V(omega) v, R <- R exp(omega), with
        # V = I + (1 - cos t)/t^2 K + (t - sin t)/t^3 K^2 and (1 - cos t)/t^2 = (sin(t/2)/(t/2))^2 / 2.
        w, u = v[..., :3], v[..., 3:]
        th = _norm(w)[..., None]
        K = skew(w)
        sc = bk.sin(th / 2) / (th / 2)
        b = 0.5 * sc * sc
        c = (th - bk.sin(th)) / (th * th * th)
        V = np.eye(3) + b * K + c * (K @ K)
        R = quat_to_rot(q[..., 3:7])
        p = q[..., :3] + (R @ (V @ u[..., None]))[..., 0]
        return np.concatenate([p, quat_multiply(q[..., 3:7], quat_exp(w))], -1)

    def retract(self, q, dq):
        # p + R v and R exp(omega), to first order (V(omega) = I + O(omega)).
        R = quat_to_rot(q[..., 3:7])
        p = q[..., :3] + (R @ dq[..., 3:, None])[..., 0]
        return np.concatenate([p, _quat_retract(q[..., 3:7], dq[..., :3])], -1)

    def difference(self, q0, q1):
        # Body twist whose exponential takes q0 to q1 (inverse of integrate).
        w = quat_log(quat_multiply(_quat_conj(q0[..., 3:7]), q1[..., 3:7]))
        R0 = quat_to_rot(q0[..., 3:7])
        dp = (np.swapaxes(R0, -1, -2) @ (q1[..., :3] - q0[..., :3])[..., None])[..., 0]
        th = _norm(w)[..., None]
        K = skew(w)
        # V^-1 = I - K/2 + (1/t^2)(1 - (t/2) cot(t/2)) K^2 (t <= pi: the log is the shortest rotation)
        h = th / 2
        d = (1 - h * bk.cos(h) / bk.sin(h)) / (th * th)
        Vinv = np.eye(3) - 0.5 * K + d * (K @ K)
        return np.concatenate([w, (Vinv @ dp[..., None])[..., 0]], -1)

    def integrate_jacobians(self, q, v):
        return _se3_adjoint_inverse(v), _se3_right_jacobian(v)[0]

    def difference_jacobians(self, q0, q1):
        d = self.difference(q0, q1)
        return -_se3_right_jacobian_inverse(-d), _se3_right_jacobian_inverse(d)


# --- Jacobians of integrate and difference on the tangent spaces ----------------------------------
#
# For a Lie group with q (+) v = q exp(v) (body-frame velocities): d/dq = Ad(exp(-v)),
# d/dv = Jr(v) (the right Jacobian); for d = q1 (-) q0 = log(q0^-1 q1): d/dq1 = Jr(d)^-1,
# d/dq0 = -Jl(d)^-1 = -Jr(-d)^-1 (Sola, Deray, Atchuthan, "A micro Lie theory for state estimation
# in robotics", 2018; Barfoot, "State estimation for robotics", 2017, for the SE(3) block Q).
# The ratios that lose digits to cancellation at small angles, such as (t - sin t) / t^3, switch to
# their Taylor series below _SMALL without a branch: a sign (copysign) picks one of two finite values.
_SMALL = 0.02


def _small_angle(t, closed, series):
    """``closed(t)`` for ``|t| >= _SMALL``, ``series(t)`` below (elementwise, branch-free; ``closed`` is
    evaluated away from zero where it is not used)."""
    w = 0.5 + 0.5 * bk.copysign(1.0, t * t - _SMALL * _SMALL)
    return w * closed(t + (1 - w) * (3 * _SMALL)) + (1 - w) * series(t)


def _so3_coefficients(w):
    """``(K, A, B, C, D)`` for the rotation vector ``w`` (..., 3): ``K = w x``, ``A = sin t / t``,
    ``B = (1 - cos t) / t^2``, ``C = (t - sin t) / t^3``, ``D = (1 - (t/2) cot(t/2)) / t^2`` (..., 1, 1)."""
    t = _norm(w)[..., None]
    h = t / 2
    sc = bk.sin(h) / h
    C = _small_angle(t, lambda x: (x - bk.sin(x)) / (x * x * x), lambda x: 1 / 6 - x * x / 120 + (x * x) * (x * x) / 5040)
    D = _small_angle(t, lambda x: (1 - (x / 2) * bk.cos(x / 2) / bk.sin(x / 2)) / (x * x),
                     lambda x: 1 / 12 + x * x / 720 + (x * x) * (x * x) / 30240)
    return skew(w), bk.sin(t) / t, 0.5 * sc * sc, C, D


def _so3_exp(K, A, B):
    return np.eye(3) + A * K + B * (K @ K)


def _so3_right_jacobian(K, B, C):
    return np.eye(3) - B * K + C * (K @ K)


def _so3_right_jacobian_inverse(w):
    K, _, _, _, D = _so3_coefficients(w)
    return np.eye(3) + 0.5 * K + D * (K @ K)


def _blocks(A, B, C, D):
    """``[[A, B], [C, D]]`` from four (..., n, n) blocks."""
    shape = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], C.shape[:-2], D.shape[:-2])
    A, B, C, D = (np.broadcast_to(x, shape + x.shape[-2:]) for x in (A, B, C, D))
    return np.concatenate([np.concatenate([A, B], -1), np.concatenate([C, D], -1)], -2)


def _se3_right_jacobian(nu):
    """``(Jr, Jr_so3, Q)``: the right Jacobian (..., 6, 6) of SE(3)'s exponential at the body twist
    ``nu = [omega; u]``, ``[[Jr(omega), 0], [Q, Jr(omega)]]`` with Barfoot's ``Q`` at ``-nu``."""
    w, u = -nu[..., :3], -nu[..., 3:]
    K, _, B, C, _ = _so3_coefficients(-w)
    t = _norm(w)[..., None]
    E = _small_angle(t, lambda x: (x * x + 2 * bk.cos(x) - 2) / (2 * (x * x) * (x * x)),
                     lambda x: 1 / 24 - x * x / 720 + (x * x) * (x * x) / 40320)
    F = _small_angle(t, lambda x: (2 * x - 3 * bk.sin(x) + x * bk.cos(x)) / (2 * x * (x * x) * (x * x)),
                     lambda x: 1 / 120 - x * x / 2520 + (x * x) * (x * x) / 120960)
    P, U = skew(w), skew(u)
    PU, UP = P @ U, U @ P
    PUP = PU @ P
    Q = 0.5 * U + C * (PU + UP + PUP) + E * (P @ PU + UP @ P - 3 * PUP) + F * (PUP @ P + P @ PUP)
    J = _so3_right_jacobian(K, B, C)
    return _blocks(J, 0 * J, Q, J), J, Q


def _se3_right_jacobian_inverse(nu):
    _, J, Q = _se3_right_jacobian(nu)
    Ji = _so3_right_jacobian_inverse(nu[..., :3])
    return _blocks(Ji, 0 * Ji, -(Ji @ Q @ Ji), Ji)


def _se3_adjoint_inverse(nu):
    """``Ad(exp(-nu))`` (..., 6, 6) on twists ``[omega; u]``: the motion transform into the frame
    reached by ``exp(nu)``."""
    w, u = nu[..., :3], nu[..., 3:]
    K, A, B, C, _ = _so3_coefficients(w)
    R = _so3_exp(K, A, B)
    p = ((np.eye(3) + B * K + C * (K @ K)) @ u[..., None])[..., 0]       # V(omega) u = Jl(omega) u
    Et = np.swapaxes(R, -1, -2)
    return _blocks(Et, 0 * Et, -(Et @ skew(p)), Et)


def _se2_parts(nu):
    """``(c, s, a, b, da, db)`` of the SE(2) twist ``nu = [theta, x, y]``: ``R(theta)``, the left
    Jacobian's ``a``, ``b`` and their derivatives in ``theta``."""
    th = nu[..., 0]
    a, b = _se2_left_jacobian(th)
    da = _small_angle(th, lambda x: (x * bk.cos(x) - bk.sin(x)) / (x * x), lambda x: -x / 3 + x * x * x / 30 - x * (x * x) * (x * x) / 840)
    db = _small_angle(th, lambda x: (x * bk.sin(x) - 1 + bk.cos(x)) / (x * x), lambda x: 0.5 - x * x / 8 + (x * x) * (x * x) / 144)
    return bk.cos(th), bk.sin(th), a, b, da, db


def _mat3(rows):
    return np.stack([np.stack(r, -1) for r in rows], -2)


def _se2_adjoint_inverse(nu):
    """``Ad(exp(-nu))`` (..., 3, 3) on SE(2) twists ``[omega, vx, vy]``."""
    c, s, a, b, _, _ = _se2_parts(nu)
    x, y = a * nu[..., 1] - b * nu[..., 2], b * nu[..., 1] + a * nu[..., 2]      # the origin of exp(nu)
    px, py = -(c * x + s * y), -(-s * x + c * y)                                # that of exp(-nu)
    one, zero = 1 + 0 * c, 0 * c
    return _mat3([[one, zero, zero], [py, c, s], [-px, -s, c]])


def _se2_right_jacobian(nu):
    """The right Jacobian (..., 3, 3) of SE(2)'s exponential: ``[[1, 0], [R^T V'(theta) rho, R^T V]]``."""
    c, s, a, b, da, db = _se2_parts(nu)
    x, y = nu[..., 1], nu[..., 2]
    gx, gy = da * x - db * y, db * x + da * y                                   # V'(theta) rho
    one, zero = 1 + 0 * c, 0 * c
    return _mat3([[one, zero, zero], [c * gx + s * gy, c * a + s * b, -c * b + s * a],
                  [-s * gx + c * gy, -s * a + c * b, s * b + c * a]])


def _se2_right_jacobian_inverse(nu):
    J = _se2_right_jacobian(nu)
    m00, m01, m10, m11 = J[..., 1, 1], J[..., 1, 2], J[..., 2, 1], J[..., 2, 2]
    det = m00 * m11 - m01 * m10
    i00, i01, i10, i11 = m11 / det, -m01 / det, -m10 / det, m00 / det
    gx, gy = J[..., 1, 0], J[..., 2, 0]
    one, zero = 1 + 0 * det, 0 * det
    return _mat3([[one, zero, zero], [-(i00 * gx + i01 * gy), i00, i01], [-(i10 * gx + i11 * gy), i10, i11]])


def make_joint(type: str, axis=(0.0, 0.0, 1.0), pitch: float = 0.0, **options) -> Joint:
    """Build a joint of a registered ``type`` (see ``JOINT_TYPES``).

    ``options`` are the type's own fields: ``translation_axis`` (``"helical"``), ``axes``
    (``"universal"``: two axes), ``joints`` (``"composite"``: a sequence of joints), see
    :mod:`sparsedyn.model.joint_types`.
    """
    try:
        cls = JOINT_TYPES[type]
    except KeyError:
        raise ValueError(f"unknown joint type {type!r}; known types: {', '.join(sorted(JOINT_TYPES))}") from None
    known = set(cls.options)
    bad = sorted(set(options) - known)
    if bad:
        raise ValueError(f"make_joint: joint type {type!r} takes no option {', '.join(map(repr, bad))}; "
                         f"its options: {', '.join(sorted(known)) or 'none beyond axis and pitch'}")
    return cls(axis=axis, pitch=pitch, **options)


def jcalc(joint: Joint, q):
    """Joint transform ``XJ`` (child_X_parent) and motion subspace ``S`` (6, nv) or (..., 6, nv)."""
    return joint.jcalc(q)
