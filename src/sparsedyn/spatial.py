"""Spatial (6D) algebra, angular-first, generic over the array backend.

Conventions (DESIGN.md):

* motion vectors ``m = [omega; v]``, force vectors ``f = [n; f]``, shape ``(..., 6)``;
* a Plücker transform ``B_X_A`` maps motion from frame A to frame B coordinates.
  It is stored as the pair ``Transform(E, r)``: ``E`` (..., 3, 3) rotates A
  coordinates into B coordinates and ``r`` (..., 3) is the origin of B expressed
  in A.  As a 6x6 matrix ``X = [[E, 0], [-E rx, E]]`` and the force transform is
  ``X* = X^-T = [[E, -E rx], [0, E]]``;
* a pose ``(R, p)`` (orientation of B in A, origin of B in A) is the same frame
  relation seen the other way: ``E = R^T``, ``r = p``;
* spatial inertias are 6x6 matrices about the body frame origin, expressed in
  body coordinates.

Every function accepts leading batch axes and never forms a 6x6 matrix unless
its name says so (``*_matrix``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import backend as bk

__all__ = [
    "Transform", "skew", "cross3", "crm", "crf", "cross_motion", "cross_force",
    "rotx", "roty", "rotz", "axis_rotation", "quat_to_rot", "rot_to_quat", "rpy_to_rot",
    "xlt", "rot", "identity", "compose", "inverse", "apply_motion", "apply_force",
    "apply_motion_inv", "apply_force_inv", "apply_force_transpose",
    "motion_matrix", "force_matrix", "mcI", "inertia_components",
    "transform_inertia", "pose", "from_pose",
]


class Transform(NamedTuple):
    """Plücker transform ``B_X_A`` as ``(E, r)``; see the module docstring."""

    E: np.ndarray
    r: np.ndarray


# --- 3D helpers -------------------------------------------------------------

def skew(v):
    """3x3 cross-product matrix ``v x`` of ``v`` (..., 3)."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    o = 0 * x
    return np.stack([np.stack([o, -z, y], -1),
                     np.stack([z, o, -x], -1),
                     np.stack([-y, x, o], -1)], -2)


def cross3(a, b):
    """``a x b`` for (..., 3) arrays, written out (np.cross rejects object arrays)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)


def _mv(A, x):
    """Matrix (..., m, n) times vector (..., n)."""
    return (A @ x[..., None])[..., 0]


def _mtv(A, x):
    """Transposed matrix (..., n, m)^T times vector (..., n)."""
    return (np.swapaxes(A, -1, -2) @ x[..., None])[..., 0]


# --- spatial cross products ---------------------------------------------------

def crm(v):
    """6x6 motion cross operator ``v x`` (..., 6, 6)."""
    w, u = skew(v[..., :3]), skew(v[..., 3:])
    Z = 0 * w
    return np.concatenate([np.concatenate([w, Z], -1),
                           np.concatenate([u, w], -1)], -2)


def crf(v):
    """6x6 force cross operator ``v x* = -crm(v)^T``."""
    return -np.swapaxes(crm(v), -1, -2)


def cross_motion(v, m):
    """``v x m`` without forming ``crm(v)``."""
    w, u = v[..., :3], v[..., 3:]
    return np.concatenate([cross3(w, m[..., :3]),
                           cross3(w, m[..., 3:]) + cross3(u, m[..., :3])], -1)


def cross_force(v, f):
    """``v x* f`` without forming ``crf(v)``."""
    w, u = v[..., :3], v[..., 3:]
    return np.concatenate([cross3(w, f[..., :3]) + cross3(u, f[..., 3:]),
                           cross3(w, f[..., 3:])], -1)


# --- rotations ----------------------------------------------------------------

def axis_rotation(axis, theta):
    """Coordinate rotation ``E`` for a frame turned by ``theta`` about unit ``axis``.

    ``axis`` is a constant (3,) array, ``theta`` has shape (...).  Returns
    ``E = R(axis, theta)^T`` (..., 3, 3): it maps parent coordinates into the
    coordinates of the rotated frame, as Featherstone's ``rotx``/``roty``/``rotz``.
    """
    axis = np.asarray(axis)
    c, s = bk.cos(theta)[..., None, None], bk.sin(theta)[..., None, None]
    K = skew(axis)
    # Rodrigues for R, then transpose: R^T = I - s K + (1 - c) K^2.
    return np.eye(3) - s * K + (1 - c) * (K @ K)


def rotx(theta):
    return axis_rotation(np.array([1.0, 0.0, 0.0]), theta)


def roty(theta):
    return axis_rotation(np.array([0.0, 1.0, 0.0]), theta)


def rotz(theta):
    return axis_rotation(np.array([0.0, 0.0, 1.0]), theta)


def quat_to_rot(quat):
    """Rotation matrix ``R`` (..., 3, 3) of a unit quaternion ``[x, y, z, w]``.

    ``R`` maps child coordinates into parent coordinates (a pose's rotation).
    """
    x, y, z, w = quat[..., 0], quat[..., 1], quat[..., 2], quat[..., 3]
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz, wx, wy, wz = x * y, x * z, y * z, w * x, w * y, w * z
    return np.stack([
        np.stack([1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy)], -1),
        np.stack([2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx)], -1),
        np.stack([2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)], -1),
    ], -2)


def rpy_to_rot(rpy):
    """Rotation ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (fixed-axis roll, pitch, yaw; URDF's ``rpy``), float."""
    r, p, y = (float(x) for x in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def rot_to_quat(R):
    """Unit quaternion ``[x, y, z, w]`` (w >= 0) of rotation matrices (float only)."""
    R = np.asarray(R, dtype=float)
    shape = R.shape[:-2]
    R = R.reshape(-1, 3, 3)
    out = np.empty((R.shape[0], 4))
    for k, m in enumerate(R):
        t = np.trace(m)
        if t > 0:
            s = 2.0 * np.sqrt(t + 1.0)
            q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4]
        else:
            i = int(np.argmax(np.diag(m)))
            j, kk = (i + 1) % 3, (i + 2) % 3
            s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[kk, kk])
            q = [0.0] * 4
            q[i] = s / 4
            q[j] = (m[j, i] + m[i, j]) / s
            q[kk] = (m[kk, i] + m[i, kk]) / s
            q[3] = (m[kk, j] - m[j, kk]) / s
        q = np.array(q)
        out[k] = q if q[3] >= 0 else -q
    return out.reshape(shape + (4,))


# --- Plücker transforms -------------------------------------------------------

def xlt(r):
    """Pure translation: frame B has origin ``r`` (..., 3) in A, same axes."""
    r = bk.asarray(r)
    return Transform(np.broadcast_to(np.eye(3), r.shape[:-1] + (3, 3)), r)


def rot(E):
    """Pure rotation with coordinate rotation ``E`` (..., 3, 3)."""
    E = bk.asarray(E)
    return Transform(E, np.zeros(E.shape[:-1], dtype=E.dtype))


def identity():
    return Transform(np.eye(3), np.zeros(3))


def pose(X: Transform):
    """``(R, p)``: orientation and origin of frame B in A for ``X = B_X_A``."""
    return np.swapaxes(X.E, -1, -2), X.r


def from_pose(R, p) -> Transform:
    """Inverse of :func:`pose`."""
    return Transform(np.swapaxes(bk.asarray(R), -1, -2), bk.asarray(p))


def compose(X1: Transform, X2: Transform) -> Transform:
    """``C_X_A = C_X_B @ B_X_A`` for ``X1 = C_X_B``, ``X2 = B_X_A``."""
    return Transform(X1.E @ X2.E, X2.r + _mtv(X2.E, X1.r))


def inverse(X: Transform) -> Transform:
    """``A_X_B`` from ``B_X_A``."""
    return Transform(np.swapaxes(X.E, -1, -2), -_mv(X.E, X.r))


def apply_motion(X: Transform, m):
    """``X m``: motion (..., 6) from A to B coordinates."""
    w = m[..., :3]
    return np.concatenate([_mv(X.E, w), _mv(X.E, m[..., 3:] - cross3(X.r, w))], -1)


def apply_force(X: Transform, f):
    """``X* f``: force (..., 6) from A to B coordinates."""
    lin = f[..., 3:]
    return np.concatenate([_mv(X.E, f[..., :3] - cross3(X.r, lin)), _mv(X.E, lin)], -1)


def apply_motion_inv(X: Transform, m):
    """``X^-1 m``: motion from B back to A coordinates."""
    w = _mtv(X.E, m[..., :3])
    return np.concatenate([w, _mtv(X.E, m[..., 3:]) + cross3(X.r, w)], -1)


def apply_force_transpose(X: Transform, f):
    """``X^T f``: force from B back to A coordinates (``X^T = (X*)^-1``)."""
    lin = _mtv(X.E, f[..., 3:])
    return np.concatenate([_mtv(X.E, f[..., :3]) + cross3(X.r, lin), lin], -1)


apply_force_inv = apply_force_transpose


def motion_matrix(X: Transform):
    """6x6 motion transform matrix (for tests, plots and interop)."""
    E = X.E
    Z = 0 * E
    return np.concatenate([np.concatenate([E, Z], -1),
                           np.concatenate([-E @ skew(X.r), E], -1)], -2)


def force_matrix(X: Transform):
    """6x6 force transform matrix ``X* = X^-T``."""
    E = X.E
    Z = 0 * E
    return np.concatenate([np.concatenate([E, -E @ skew(X.r)], -1),
                           np.concatenate([Z, E], -1)], -2)


# --- spatial inertia ------------------------------------------------------------

def mcI(m, c, Ic):
    """Spatial inertia (..., 6, 6) about the frame origin.

    ``m`` mass (...), ``c`` centre of mass (..., 3) and ``Ic`` rotational inertia
    about the centre of mass (..., 3, 3), all in the body frame.
    """
    m = bk.asarray(m)
    C = skew(bk.asarray(c))
    mm = m[..., None, None]
    upper = np.concatenate([Ic + mm * (C @ np.swapaxes(C, -1, -2)), mm * C], -1)
    lower = np.concatenate([mm * np.swapaxes(C, -1, -2), mm * np.eye(3)], -1)
    return np.concatenate([upper, lower], -2)


def inertia_components(I):
    """Inverse of :func:`mcI` for float inertias: ``(m, c, Ic)``.

    A massless inertia returns ``c = 0`` and ``Ic`` equal to the rotational block.
    """
    I = np.asarray(I, dtype=float)
    m = I[..., 5, 5]
    mC = I[..., :3, 3:]
    safe = np.where(m > 0, m, 1.0)
    h = np.stack([mC[..., 2, 1], mC[..., 0, 2], mC[..., 1, 0]], -1)
    c = np.where((m > 0)[..., None], h / safe[..., None], 0.0)
    C = skew(c)
    Ic = I[..., :3, :3] - m[..., None, None] * (C @ np.swapaxes(C, -1, -2))
    return m, c, Ic


def transform_inertia(X: Transform, I):
    """``X^T I X``: an inertia expressed in B coordinates, re-expressed in A."""
    M = motion_matrix(X)
    return np.swapaxes(M, -1, -2) @ I @ M
