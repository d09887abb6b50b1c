"""SO(3) and SE(3): the exponential, the logarithm and their Jacobians, generic over the array backend.

Twists are angular-first, ``xi = [omega; v]`` (Pinocchio's Motion vectors are ``[v; omega]``: swap
the halves to compare), and poses are pairs ``(R, p)``: ``R`` (..., 3, 3) rotates the moving frame's
coordinates into the fixed frame's, ``p`` (..., 3) is its origin.  ``exp6(xi)`` is the pose reached
from the identity by the constant body twist ``xi`` in unit time (the free joint's integrate).  The
Jacobians are the *right* (body, local) ones, as Pinocchio's ``Jexp3``/``Jexp6``/``Jlog3``/``Jlog6``::

    log6(exp6(xi)^-1 exp6(xi + d)) = exp6_jacobian(xi) d + O(d^2)
    log6(X exp6(d)) = log6(X) + log6_jacobian(X) d + O(d^2)

Everything is written without branches on values (traceable, batched): the angle ``t = |omega|`` has
a floor of 1e-100, and each ratio of the formulas, which cancels to ``O(t^k) / t^k`` near zero, is
evaluated in a form without that cancellation (half-angle products, and the triple-angle series of
``_c_f``), so the results are accurate to rounding for small angles too.  ``log3`` divides by
``sin(t)``: a rotation within angle ~1e-8 of a half turn loses digits (its axis is ill-defined there
from the antisymmetric part alone).
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .spatial import cross3

__all__ = ["exp3", "log3", "exp3_jacobian", "log3_jacobian", "exp6", "log6", "exp6_jacobian", "log6_jacobian"]


_TINY_ANGLE2 = 1e-200


def _sq3(w):
    """``|w|^2`` (..., 1) of 3-vectors (..., 3), written out (a reduction over 3 entries is slow in NumPy)."""
    x, y, z = w[..., 0:1], w[..., 1:2], w[..., 2:3]
    return x * x + y * y + z * z


def _angle(w):
    """``sqrt(|w|^2 + 1e-200)`` (..., 1): the angle of a rotation vector, floored away from zero."""
    return bk.sqrt(_sq3(w) + _TINY_ANGLE2)


def _sinc(t):
    return bk.sin(t) / t


def _c_f(t, levels=5):
    """``(c, f)`` with ``c = (t - sin t) / t^3`` (1/6 at 0) and ``f = (c - 1/6) / t^2`` (-1/120 at 0).

    ``sin t = 3 sin(t/3) - 4 sin(t/3)^3`` gives, with ``u = t/3`` and ``s = sin(u)/u``,
    ``c(t) = c(u)/9 + (4/27) s^3`` and ``f(t) = f(u)/81 - (4/243) c(u) (1 + s + s^2)``: sums of
    terms of one sign for |t| < 3 pi, so no cancellation; ``levels`` thirds down (|u| < 0.1 for
    |t| < 24), the Taylor polynomials are exact to rounding."""
    u = t / 3 ** levels
    u2 = u * u
    u4 = u2 * u2
    c = 1 / 6 - u2 / 120 + u4 / 5040 - u4 * u2 / 362880
    f = -1 / 120 + u2 / 5040 - u4 / 362880 + u4 * u2 / 39916800
    for _ in range(levels):
        s = _sinc(u)
        c, f = c / 9 + (4 / 27) * s * s * s, f / 81 - (4 / 243) * c * (1 + s + s * s)
        u = 3 * u
    return c, f


def _half_sq(t):
    """``(1 - cos t) / t^2 = (sin(t/2) / (t/2))^2 / 2`` (1/2 at 0)."""
    s = _sinc(t / 2)
    return 0.5 * s * s


def _inv_coefficient(t):
    """``(1 - (t/2) cot(t/2)) / t^2`` (1/12 at 0) = ``(b(h) - c(h)) / (4 sinc(h))`` with ``h = t/2``."""
    h = t / 2
    return (_half_sq(h) - _c_f(h)[0]) / (4 * _sinc(h))


def _cross_matrix(w):
    """``w x`` (..., 3, 3) as :func:`skew`, filled entry by entry (faster on batches than stacking)."""
    W = np.zeros(w.shape[:-1] + (3, 3), dtype=w.dtype)
    W[..., 0, 1], W[..., 0, 2], W[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    W[..., 1, 0], W[..., 2, 0], W[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    return W


def _rotation(w, a, b):
    """``1 + a W + b W^2`` (..., 3, 3) for ``a``, ``b`` (..., 1) or numbers, with ``W^2 = w w^T - |w|^2 1``, entry by
    entry (no matrix product, no stacked skew matrix: several times faster on batches)."""
    R = (b * w)[..., :, None] * w[..., None, :] + (1 - b * _sq3(w))[..., None] * np.eye(3)
    aw = a * w
    R[..., 0, 1] -= aw[..., 2]
    R[..., 0, 2] += aw[..., 1]
    R[..., 1, 0] += aw[..., 2]
    R[..., 1, 2] -= aw[..., 0]
    R[..., 2, 0] -= aw[..., 1]
    R[..., 2, 1] += aw[..., 0]
    return R


def exp3(w):
    """``R = exp(w x)`` (..., 3, 3): the rotation by the angle ``|w|`` about ``w`` (..., 3) (Rodrigues)."""
    w = bk.asarray(w)
    t = _angle(w)
    return _rotation(w, _sinc(t), _half_sq(t))


def log3(R):
    """The rotation vector ``w`` (..., 3) of ``R`` (..., 3, 3), angle in [0, pi] (inverse of :func:`exp3`)."""
    R = bk.asarray(R)
    vee = np.concatenate([R[..., 2, 1:2] - R[..., 1, 2:3], R[..., 0, 2:3] - R[..., 2, 0:1],
                          R[..., 1, 0:1] - R[..., 0, 1:2]], -1)           # 2 sin(t) axis
    s = 0.5 * _angle(vee)                                                  # sin t
    c = 0.5 * (R[..., 0, 0:1] + R[..., 1, 1:2] + R[..., 2, 2:3] - 1)      # cos t
    t = bk.atan2(s, c)
    return (0.5 * t / s) * vee


def exp3_jacobian(w):
    """Right Jacobian of :func:`exp3` (..., 3, 3): ``log3(exp3(w)^T exp3(w + d)) = J d + O(d^2)``;
    ``J = 1 - (1 - cos t)/t^2 W + (t - sin t)/t^3 W^2``."""
    w = bk.asarray(w)
    t = _angle(w)
    return _rotation(w, -_half_sq(t), _c_f(t)[0])


def log3_jacobian(R):
    """Right Jacobian of :func:`log3` (..., 3, 3): ``log3(R exp3(d)) = log3(R) + J d + O(d^2)``;
    the inverse of :func:`exp3_jacobian` at ``log3(R)``: ``1 + W/2 + (1 - (t/2) cot(t/2))/t^2 W^2``."""
    w = log3(R)
    return _rotation(w, 0.5, _inv_coefficient(_angle(w)))


def _pose(X, what):
    if not (isinstance(X, (tuple, list)) and len(X) == 2):
        raise TypeError(f"{what}: expected a pose (R, p) with R (..., 3, 3) and p (..., 3), got {type(X).__name__}")
    R, p = bk.asarray(X[0]), bk.asarray(X[1])
    if R.shape[-2:] != (3, 3) or p.shape[-1:] != (3,):
        raise ValueError(f"{what}: expected R (..., 3, 3) and p (..., 3), got shapes {R.shape} and {p.shape}")
    return R, p


def _twist(xi, what="xi"):
    xi = bk.asarray(xi)
    if xi.shape[-1:] != (6,):
        raise ValueError(f"{what}: expected a twist of shape (..., 6), [omega; v] (angular first), got shape {xi.shape}")
    return xi


def exp6(xi):
    """The pose ``(R, p)`` reached from the identity by the constant body twist ``xi = [omega; v]``
    (..., 6) in unit time: ``R = exp3(omega)``, ``p = V(omega) v`` with
    ``V = 1 + (1 - cos t)/t^2 W + (t - sin t)/t^3 W^2`` (Pinocchio's ``exp6`` of ``Motion(v, omega)``)."""
    xi = _twist(xi)
    w, v = xi[..., :3], xi[..., 3:]
    t = _angle(w)
    sin = bk.sin(t)
    b = _half_sq(t)
    R = _rotation(w, sin / t, b)
    # V v = v + b w x v + c w x (w x v); c = (t - sin t)/t^3 multiplies |w|^2: its rounding error,
    # eps/t^2 near t = 0, costs only eps |v| there
    wv = cross3(w, v)
    return R, v + b * wv + ((t - sin) / (t * t * t)) * cross3(w, wv)


def log6(X):
    """The twist ``xi = [omega; v]`` (..., 6) with ``exp6(xi) = X`` for a pose ``X = (R, p)``,
    ``omega = log3(R)`` (angle in [0, pi]), ``v = V(omega)^-1 p`` with
    ``V^-1 = 1 - W/2 + (1 - (t/2) cot(t/2))/t^2 W^2``."""
    R, p = _pose(X, "log6")
    w = log3(R)
    t = _angle(w)
    h = t / 2
    wp = cross3(w, p)
    # (1 - h cot h) / t^2 multiplies |w|^2: its rounding error, eps/t^2 near t = 0, costs only eps |p|
    v = p - 0.5 * wp + ((1 - h * bk.cos(h) / bk.sin(h)) / (t * t)) * cross3(w, wp)
    return np.concatenate([np.broadcast_to(w, v.shape[:-1] + (3,)), v], -1)


def _q_left(rho, phi):
    """Barfoot's ``Q(rho, phi)`` (..., 3, 3), the lower-left block of the left Jacobian of SE(3)
    (T. D. Barfoot, State Estimation for Robotics, 2017, eq. 7.86), coefficients without cancellation."""
    t = _angle(phi)[..., None]
    c, f = _c_f(t)
    h = t / 2
    d = _c_f(h)[0] * (1 + _sinc(h)) / 8                  # (t^2/2 + cos t - 1) / t^4
    e = 0.5 * (d + 3 * f)                                # (2t - 3 sin t + t cos t) / (2 t^5)
    P, Rh = _cross_matrix(phi), _cross_matrix(rho)
    PR, RP = P @ Rh, Rh @ P
    PRP = PR @ P
    return (0.5 * Rh + c * (PR + RP + PRP) + d * (P @ PR + RP @ P - 3 * PRP)
            + e * (PRP @ P + P @ PRP))


def exp6_jacobian(xi):
    """Right Jacobian of :func:`exp6` (..., 6, 6), angular first:
    ``log6(exp6(xi)^-1 exp6(xi + d)) = J d + O(d^2)``, ``J = [[Jr3(omega), 0], [Q(-v, -omega), Jr3(omega)]]``
    (Pinocchio's ``Jexp6`` with rows and columns reordered to [angular; linear])."""
    xi = _twist(xi)
    A = exp3_jacobian(xi[..., :3])
    Q = _q_left(-xi[..., 3:], -xi[..., :3])
    A = np.broadcast_to(A, Q.shape)
    return np.concatenate([np.concatenate([A, 0 * A], -1), np.concatenate([Q, A], -1)], -2)


def log6_jacobian(X):
    """Right Jacobian of :func:`log6` (..., 6, 6), angular first: ``log6(X exp6(d)) = log6(X) + J d +
    O(d^2)``; the inverse of :func:`exp6_jacobian` at ``log6(X)``, ``[[A^-1, 0], [-A^-1 Q A^-1, A^-1]]``
    (Pinocchio's ``Jlog6`` with rows and columns reordered to [angular; linear])."""
    xi = log6(X)
    w = xi[..., :3]
    Ai = _rotation(w, 0.5, _inv_coefficient(_angle(w)))
    Q = _q_left(-xi[..., 3:], -w)
    B = -(Ai @ Q @ Ai)
    Ai = np.broadcast_to(Ai, B.shape)
    return np.concatenate([np.concatenate([Ai, 0 * Ai], -1), np.concatenate([B, Ai], -1)], -2)
