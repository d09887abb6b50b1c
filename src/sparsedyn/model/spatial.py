"""Spatial (6D) algebra, angular-first, generic over the array backend.

Conventions (Featherstone's, *Rigid Body Dynamics Algorithms*, 2008):

* motion vectors ``m = [omega; v]``, force vectors ``f = [n; f]``, shape ``(..., 6)``;
* a Plücker transform ``B_X_A`` maps motion from frame A to frame B coordinates.
  It is stored as the pair ``Transform(E, r)``: ``E`` (..., 3, 3) rotates A
  coordinates into B coordinates and ``r`` (..., 3) is the origin of B expressed
  in A.  As a 6x6 matrix ``X = [[E, 0], [-E rx, E]]`` and the force transform is
  ``X* = X^-T = [[E, -E rx], [0, E]]``;
* a pose ``(R, p)`` (orientation of B in A, origin of B in A) is the same frame
  relation seen the other way: ``E = R^T``, ``r = p``;
* spatial inertias are 6x6 matrices about the body frame origin, expressed in
  body coordinates; a rigid-body inertia can also be held as its 10 parameters
  (:class:`RigidInertia`: mass, first moment ``h = m c``, rotational inertia
  about the origin), on which ``X^T I X``, ``I v`` and sums are cheap
  (:func:`rigid_transform`, :func:`rigid_apply`, :func:`rigid_add`).

Every function accepts leading batch axes (float arrays, or ``dtype=object``
arrays of traced scalars; no value-dependent branches) and never forms a 6x6
matrix product: ``crm``/``crf`` and the ``*_matrix`` functions build 6x6
matrices for tests, plots and interop, :func:`transform_inertia` works on 3x3
blocks and computes one triangle of each symmetric result.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import backend as bk

__all__ = [
    "Transform", "skew", "cross3", "inner", "mv", "mtv", "symmetric_mv", "crm", "crf", "cross_motion", "cross_force",
    "rotx", "roty", "rotz", "axis_rotation", "axes_rotation", "axis_constants", "quat_to_rot", "rot_to_quat", "rpy_to_rot",
    "xlt", "rot", "identity", "compose", "inverse", "apply_motion", "apply_force",
    "apply_motion_inv", "apply_force_inv", "apply_force_transpose",
    "motion_matrix", "force_matrix", "mcI", "inertia_components",
    "transform_inertia", "rotate_symmetric", "RigidInertia", "rigid_inertia", "rigid_inertia_matrix",
    "rigid_add", "rigid_apply", "rigid_transform", "rigid_structure", "RIGID_PATTERN", "pose", "from_pose",
]


class Transform(NamedTuple):
    """Plücker transform ``B_X_A`` as ``(E, r)``; see the module docstring."""

    E: np.ndarray
    r: np.ndarray


# --- 3D helpers -------------------------------------------------------------

def skew(v):
    """3x3 cross-product matrix ``v x`` of ``v`` (..., 3)."""
    v = bk.asarray(v)
    if not bk.is_symbolic(v):                           # floats: one product with a 0/+-1 matrix (exact)
        return (v @ _SKEW_MATRIX).reshape(v.shape[:-1] + (3, 3))
    x = np.concatenate([v, -v, 0 * v[..., :1]], -1)          # [x, y, z, -x, -y, -z, 0]
    return x.take(_SKEW, -1).reshape(x.shape[:-1] + (3, 3))


_SKEW = np.array([6, 5, 1, 2, 6, 3, 4, 0, 6])       # [[0, -z, y], [z, 0, -x], [-y, x, 0]] from [v, -v, 0]
_SKEW_MATRIX = np.zeros((3, 9))                     # the same entries as v @ _SKEW_MATRIX, row-major
_SKEW_MATRIX[[2, 1, 2, 0, 1, 0], [1, 2, 3, 5, 6, 7]] = [-1, 1, 1, -1, -1, 1]
_SKEW_MATRIX.flags.writeable = False
_EYE3 = np.eye(3)
_EYE3.flags.writeable = False


def cross3(a, b):
    """``a x b`` for (..., 3) arrays, written out (np.cross rejects object arrays): the six products
    in one array operation, then three differences (``take`` gathers: the fewest NumPy calls, which is
    what one state costs on the NumPy path; the traced operations are the same 6 + 3)."""
    p = a.take(_C3A, -1) * b.take(_C3B, -1)
    return p[..., :3] - p[..., 3:]


_C3A, _C3B = np.array([1, 2, 0, 2, 0, 1]), np.array([2, 0, 1, 1, 2, 0])       # a_yzx b_zxy - a_zxy b_yzx


def mv(A, x):
    """Matrix (..., m, n) times vector (..., n): ``(A @ x[..., None])[..., 0]``, over any backend."""
    return (A @ x[..., None])[..., 0]


def mtv(A, x):
    """Transposed matrix (..., n, m)^T times vector (..., n), over any backend."""
    return (_t(A) @ x[..., None])[..., 0]


def symmetric_mv(K, u):
    """The symmetric 3x3 matrix of entries ``K`` ``[K_xx, K_yy, K_zz, K_xy, K_xz, K_yz]`` times the vector
    ``u`` (3,), over any backend (traced values too)."""
    return np.stack([K[0] * u[0] + K[3] * u[1] + K[4] * u[2], K[3] * u[0] + K[1] * u[1] + K[5] * u[2],
                     K[4] * u[0] + K[5] * u[1] + K[2] * u[2]])


def inner(x, y):
    """``sum(x * y, -1)``: the inner products of the vectors along the last axis (..., n).  On float
    arrays one product with a vector of ones (NumPy's reduction over a short last axis costs two to
    three times as much); traced, the sum itself (a product by ones would only fold away)."""
    return _sum_last(x * y)


def _sum_last(p):
    """``p.sum(-1)`` (see :func:`inner`), an array also for one vector."""
    return p.sum(-1, keepdims=True)[..., 0] if bk.is_symbolic(p) else p @ np.ones(p.shape[-1])


def _t(A):
    """``A`` with its last two axes swapped (the ndarray method where it can: no Python wrapper)."""
    return A.swapaxes(-1, -2) if isinstance(A, np.ndarray) else np.swapaxes(A, -1, -2)



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
    """``v x m = [w x m_w; w x m_u + u x m_w]`` (``v = [w; u]``) without forming ``crm(v)``."""
    return _cross6(v, m, _CM, True)


def cross_force(v, f):
    """``v x* f = [w x f_n + u x f_f; w x f_f]`` without forming ``crf(v)``."""
    return _cross6(v, f, _CF, False)


def _cross6(v, m, index, single_first):
    """The three 3D cross products of a spatial cross product: the 18 products in one array
    operation, then the 9 differences and 3 sums of three :func:`cross3` calls and one addition
    (the same traced operations in six NumPy calls instead of about thirty).  ``index``: the
    gathers of ``v`` and ``m``; the first two products are summed, the third is alone, and
    ``single_first``: it is the angular half of the result (else the linear one)."""
    d = _crosses(v, m, index)                           # three cross products, (..., 9)
    pair, single = d[..., :3] + d[..., 3:6], d[..., 6:]
    return np.concatenate([single, pair] if single_first else [pair, single], -1)


def cross_motion_products(v, m):
    """:func:`cross_motion` of float64 arrays in three NumPy calls: the 18 products of
    :func:`_crosses`, then one matrix product with their signs (exact +-1) that adds them (the same
    terms, added in another order: equal to rounding).  The sums run in BLAS, whose order may change
    with the arrays' shapes (a batch and its single states can differ by rounding): for the NumPy
    path of kernels that sum by products anyway (the analytical derivatives)."""
    iv, im = _CM
    return (v.take(iv, -1) * m.take(im, -1)) @ _CM_SUM


def _cm_sum():
    """(18, 6): the signed sums of :func:`cross_motion_products`, from the 18 products of
    :func:`_crosses` (the first terms of ``w x m_u``, ``u x m_w``, ``w x m_w``, then the second
    ones) to ``[w x m_w; w x m_u + u x m_w]``."""
    S = np.zeros((18, 6))
    for j in range(9):                                  # entry j of the three 3D cross products
        out = j - 6 if j >= 6 else 3 + j % 3
        S[j, out], S[9 + j, out] = 1.0, -1.0
    S.flags.writeable = False
    return S


def _crosses(v, m, index):
    """The cross products ``v[..., a:a+3] x m[..., b:b+3]`` for the pairs ``(a, b)`` of ``index``
    (:func:`_cross6_index`), side by side (..., 3k): one multiplication and one subtraction (the
    products are gathered with the first terms of all differences before the second terms)."""
    iv, im = index
    p = v.take(iv, -1) * m.take(im, -1)
    k = p.shape[-1] // 2
    return p[..., :k] - p[..., k:]


def _cross6_index(*pairs):
    """Gathers for :func:`_crosses`: ``(iv, im)`` the factors of the products ``a_yzx b_zxy`` of
    every pair, then of the products ``a_zxy b_yzx``."""
    first_v, first_m, second_v, second_m = [], [], [], []
    for a, b in pairs:
        first_v += [a + 1, a + 2, a]
        first_m += [b + 2, b, b + 1]
        second_v += [a + 2, a, a + 1]
        second_m += [b + 1, b + 2, b]
    return np.array(first_v + second_v), np.array(first_m + second_m)


_CM = _cross6_index((0, 3), (3, 0), (0, 0))     # linear: w x m_u + u x m_w; angular: w x m_w
_CF = _cross6_index((0, 0), (3, 3), (0, 3))     # angular: w x f_n + u x f_f; linear: w x f_f
_CM_SUM = _cm_sum()


# --- rotations ----------------------------------------------------------------

def axis_rotation(axis, theta):
    """Coordinate rotation ``E`` for a frame turned by ``theta`` about unit ``axis``.

    ``axis`` is a constant (3,) array, ``theta`` has shape (...).  Returns
    ``E = R(axis, theta)^T`` (..., 3, 3): it maps parent coordinates into the
    coordinates of the rotated frame, as Featherstone's ``rotx``/``roty``/``rotz``.
    """
    return axes_rotation(_axis_constants(tuple(np.asarray(axis, dtype=float).reshape(3).tolist())), theta)


def axes_rotation(constants, theta):
    """:func:`axis_rotation` from ``constants = axis_constants(axes)`` (each (..., 3, 3)): several
    constant axes (n, 3) turned by ``theta`` (..., n) in one array operation, (..., n, 3, 3)."""
    P, aa, K = constants
    c, s = bk.cos(theta)[..., None, None], bk.sin(theta)[..., None, None]
    # Rodrigues for R, then transpose: R^T = c (1 - a a^T) + a a^T - s K.  Written so that for an
    # axis along a coordinate axis the entries are exactly c, +-s, 0 and 1 (the tracer folds the rest).
    return c * P + aa - s * K


def axis_constants(axes):
    """``(1 - a a^T, a a^T, a x)``, each (..., 3, 3), of constant unit axes ``a`` (..., 3) (read-only
    float arrays)."""
    a = np.asarray(axes, dtype=float)
    aa = a[..., :, None] * a[..., None, :]
    out = (np.eye(3) - aa, aa, skew(a))
    for x in out:
        x.flags.writeable = False
    return out


@functools.lru_cache(maxsize=256)
def _axis_constants(axis):
    """:func:`axis_constants` of one axis, cached by its tuple."""
    return axis_constants(np.array(axis))


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
    if not bk.is_symbolic(quat):         # floats: the entries are quadratic forms, one product (equal to rounding)
        return ((quat.take(_QQ_A, -1) * quat.take(_QQ_B, -1)) @ _QQ_C + _QQ_0).reshape(quat.shape[:-1] + (3, 3))
    return _quat_to_rot(quat)


def _quat_to_rot(quat):
    """:func:`quat_to_rot` as written out (any backend)."""
    # products [xx, yy, zz, xy, xz, yz, wx, wy, wz]; sums [yy+zz, xx+zz, xx+yy, xz+wy, xy+wz, yz+wx];
    # differences [xy-wz, yz-wx, xz-wy]: R = [[1 - 2(yy+zz), 2(xy-wz), 2(xz+wy)], ...], each array
    # operation once over all entries (the traced operations of the written-out formula)
    p = quat.take(_Q_A, -1) * quat.take(_Q_B, -1)
    t = 2 * np.concatenate([p.take(_Q_S0, -1) + p.take(_Q_S1, -1), p.take(_Q_D0, -1) - p.take(_Q_D1, -1)], -1)
    e = np.concatenate([1 - t[..., :3], t[..., 3:]], -1)
    return e.take(_Q_R, -1).reshape(e.shape[:-1] + (3, 3))


_Q_A, _Q_B = np.array([0, 1, 2, 0, 0, 1, 3, 3, 3]), np.array([0, 1, 2, 1, 2, 2, 0, 1, 2])
_Q_S0, _Q_S1 = np.array([1, 0, 0, 4, 3, 5]), np.array([2, 2, 1, 7, 8, 6])
_Q_D0, _Q_D1 = np.array([3, 5, 4]), np.array([8, 6, 7])
_Q_R = np.array([0, 6, 3, 4, 1, 7, 8, 5, 2])


def _quadratic_form_table():
    """``(A, B, C, c0)``: ``quat_to_rot(q).flat = (q[A] q[B]) @ C + c0`` (the products ``q_a q_b``,
    ``a <= b``; ``C`` (10, 9) holds the formula's coefficients 0, +-2, read off the written-out form)."""
    pairs = [(a, b) for a in range(4) for b in range(a, 4)]
    e = np.eye(4)
    c0 = _quat_to_rot(np.zeros(4)).reshape(9)
    sq = [_quat_to_rot(e[a]).reshape(9) - c0 for a in range(4)]
    C = np.array([sq[a] if a == b else _quat_to_rot(e[a] + e[b]).reshape(9) - c0 - sq[a] - sq[b] for a, b in pairs])
    out = (np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]), C, c0)
    for x in out:
        x.flags.writeable = False
    return out


_QQ_A, _QQ_B, _QQ_C, _QQ_0 = _quadratic_form_table()


def rpy_to_rot(rpy):
    """Rotation ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (fixed-axis roll, pitch, yaw; URDF's ``rpy``), float."""
    r, p, y = (float(x) for x in rpy)
    # cos(pi/2) is 6e-17 in floating point: such round-off is snapped to the exact 0 and +-1 it
    # stands for, so that the structural zeros of quarter-turn frames stay visible to the compiler.
    cr, sr, cp, sp, cy, sy = (float(np.where(abs(v) < 1e-15, 0.0, np.where(abs(abs(v) - 1) < 1e-15, np.sign(v), v)))
                              for v in (np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)))
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
    return Transform(X1.E @ X2.E, X2.r + mtv(X2.E, X1.r))


def inverse(X: Transform) -> Transform:
    """``A_X_B`` from ``B_X_A``."""
    return Transform(np.swapaxes(X.E, -1, -2), -mv(X.E, X.r))


def apply_motion(X: Transform, m):
    """``X m``: motion (..., 6) from A to B coordinates."""
    w = m[..., :3]
    return np.concatenate([mv(X.E, w), mv(X.E, m[..., 3:] - cross3(X.r, w))], -1)


def apply_force(X: Transform, f):
    """``X* f``: force (..., 6) from A to B coordinates."""
    lin = f[..., 3:]
    return np.concatenate([mv(X.E, f[..., :3] - cross3(X.r, lin)), mv(X.E, lin)], -1)


def apply_motion_inv(X: Transform, m):
    """``X^-1 m``: motion from B back to A coordinates."""
    w = mtv(X.E, m[..., :3])
    return np.concatenate([w, mtv(X.E, m[..., 3:]) + cross3(X.r, w)], -1)


def apply_force_transpose(X: Transform, f):
    """``X^T f``: force from B back to A coordinates (``X^T = (X*)^-1``)."""
    lin = mtv(X.E, f[..., 3:])
    return np.concatenate([mtv(X.E, f[..., :3]) + cross3(X.r, lin), lin], -1)


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


def _upper3(M):
    """The symmetric 3x3 matrices (..., 3, 3) whose upper triangle is that of ``M`` (the strict lower
    triangle of ``M`` is not read: traced, its computation is dead code)."""
    return M.reshape(M.shape[:-2] + (9,)).take(_UPPER9, -1).reshape(M.shape)


_UPPER9 = np.array([0, 1, 2, 1, 4, 5, 2, 5, 8])        # M[min(i, j), max(i, j)], row-major


def rotate_symmetric(E, A):
    """``E^T A E`` for a symmetric ``A`` (..., 3, 3): the upper triangle is computed, then mirrored
    (27 + 18 multiplications instead of 54)."""
    return _upper3(_t(E) @ (A @ E))


def transform_inertia(X: Transform, I):
    """``X^T I X`` for a *symmetric* 6x6 ``I`` (..., 6, 6) in B coordinates (for example an
    articulated-body inertia), re-expressed in A; no 6x6 matrix product is formed.

    With ``I = [[A, B], [B^T, C]]`` (3x3 blocks, ``A``, ``C`` symmetric), ``X = (E, r)``,
    ``A' = E^T A E``, ``B' = E^T B E``, ``C' = E^T C E`` (RBDA section 2.8):

        X^T I X = [[A' - B' rx + rx B''^T, B''], [B''^T, C']],   B'' = B' + rx C'

    whose upper-left block is symmetric: only its upper triangle is computed.
    For a rigid-body inertia :func:`rigid_transform` is cheaper.
    """
    E, r = X.E, X.r
    A1 = rotate_symmetric(E, I[..., :3, :3])
    C1 = rotate_symmetric(E, I[..., 3:, 3:])
    B1 = np.swapaxes(E, -1, -2) @ (I[..., :3, 3:] @ E)
    rb = r[..., None, :]
    B2 = B1 + np.swapaxes(cross3(rb, np.swapaxes(C1, -1, -2)), -1, -2)      # B' + rx C', column by column
    P = cross3(rb, B1)                         # P[i] = r x B'[i, :]:  (rx B'^T)^T[i, j] = P[i, j]
    Q = cross3(rb, B2)                         # Q[j] = r x B''[j, :]: (rx B''^T)[i, j] = Q[j, i]
    A2 = _upper3(A1 + P + np.swapaxes(Q, -1, -2))
    top = np.concatenate([A2, B2], -1)
    bottom = np.concatenate([np.swapaxes(B2, -1, -2), C1], -1)
    return np.concatenate([top, bottom], -2)


# --- rigid-body inertias (10 parameters) ------------------------------------------

class RigidInertia(NamedTuple):
    """A rigid-body spatial inertia about the frame origin as its 10 parameters (RBDA section 2.13):
    mass ``m`` (...), first moment of mass ``h = m c`` (..., 3) and rotational inertia ``I`` about
    the frame origin (..., 3, 3), so that the matrix is ``[[I, hx], [hx^T, m 1]]``."""

    m: np.ndarray
    h: np.ndarray
    I: np.ndarray


def rigid_inertia(I6) -> RigidInertia:
    """The parameters of a rigid-body inertia matrix (..., 6, 6) (read off its entries: ``m`` is
    element (5, 5), ``h`` the skew-symmetric upper-right block, ``I`` the upper-left block)."""
    return RigidInertia(I6[..., 5, 5], np.stack([I6[..., 2, 4], I6[..., 0, 5], I6[..., 1, 3]], -1),
                        I6[..., :3, :3])


#: 1 where a rigid-body inertia matrix ``[[I, hx], [hx^T, m 1]]`` can be nonzero, 0 on its structural zeros.
RIGID_PATTERN = np.ones((6, 6))
RIGID_PATTERN[[0, 1, 2, 3, 4, 5], [3, 4, 5, 0, 1, 2]] = 0.0
RIGID_PATTERN[3:, 3:] = np.eye(3)
RIGID_PATTERN.flags.writeable = False


def rigid_structure(I6):
    """``I6`` (..., 6, 6) with the structural zeros of a rigid-body inertia made exact (round-off such as
    the 1e-17 a merged link's inertia can carry there is dropped, so the tracer folds those entries)."""
    return I6 * RIGID_PATTERN


def rigid_inertia_matrix(RI: RigidInertia):
    """The 6x6 matrix (..., 6, 6) of a :class:`RigidInertia`."""
    H = skew(RI.h)
    M = RI.m[..., None, None] * np.eye(3)
    shape = np.broadcast_shapes(H.shape, M.shape, RI.I.shape)
    H, M, I = (np.broadcast_to(x, shape) for x in (H, M, RI.I))
    return np.concatenate([np.concatenate([I, H], -1), np.concatenate([np.swapaxes(H, -1, -2), M], -1)], -2)


def rigid_add(A: RigidInertia, B: RigidInertia) -> RigidInertia:
    """``A + B`` (the inertia of two bodies rigidly joined, both about the same origin)."""
    return RigidInertia(A.m + B.m, A.h + B.h, A.I + B.I)


def rigid_apply(RI: RigidInertia, v):
    """``I v``: the momentum (force) of a rigid body moving with ``v`` (..., 6)."""
    d = _crosses(RI.h, v, _HU_HW)                        # [h x u, h x w]
    return np.concatenate([mv(RI.I, v[..., :3]) + d[..., :3], RI.m[..., None] * v[..., 3:] - d[..., 3:]], -1)


_HU_HW = _cross6_index((0, 3), (0, 0))


def rigid_transform(X: Transform, RI: RigidInertia) -> RigidInertia:
    """``X^T I X`` for a rigid-body inertia in B coordinates, re-expressed in A (RBDA eq. 2.66).

    With ``d = E^T h``: ``h_A = d + m r`` and
    ``I_A = E^T I E - rx dx - (h_A)x rx = E^T I E - C + trace(C) 1`` with ``C = d r^T + r h_A^T``
    (symmetric: only the upper triangle is computed).
    """
    E, r = X.E, X.r
    d = mtv(E, RI.h)
    hA = d + RI.m[..., None] * r
    C = d[..., :, None] * r[..., None, :] + r[..., :, None] * hA[..., None, :]            # d r^T + r h_A^T
    s = _sum_last(C.diagonal(0, -2, -1))[..., None, None] * _EYE3                      # (r.d + r.h_A) 1
    return RigidInertia(RI.m, hA, _upper3(rotate_symmetric(E, RI.I) - C + s))
