"""Inertial-parameter regressors: joint forces and joint wrenches are linear in the inertial parameters.

Each body has 10 inertial parameters (the order of Pinocchio's ``dynamicParameters``)::

    pi_i = [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]

with ``h = m c`` the first moment of mass and ``I`` the rotational inertia about
the *body origin*, body axes (:meth:`sparsedyn.Model.inertial_parameters`).  The
Newton-Euler equation of body ``i`` is linear in them (Atkeson, An and Hollerbach,
*Estimation of inertial parameters of manipulator loads and links*, 1986)::

    I_i a_i + v_i x* I_i v_i = K(a_i) pi_i + v_i x* K(v_i) pi_i = A_i pi_i

where ``K(v) pi = I v`` (6 x 10).  The force across joint ``i`` sums the bodies of
its subtree, ``f_i = sum_{j in subtree(i)} i_X_j^* A_j pi_j``, and ``tau_i = S_i^T f_i``
(RNEA's backward pass run on the columns of ``A_j``).  Block ``(i, j)`` is a structural
zero unless ``i`` is an ancestor of (or is) ``j``.  Gravity enters as the fictitious
base acceleration ``-g``, as in RNEA.

Shapes: ``q`` (..., nq), ``v``/``a`` (..., nv).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import apply_force_transpose, cross_force
from .crba import apply_columns, result_dtype
from .kinematics import body_accelerations, joint_transforms

__all__ = ["joint_torque_regressor", "joint_wrench_regressor", "body_regressor", "NPARAM"]

#: Inertial parameters per body.
NPARAM = 10


def momentum_regressor(v):
    """``K(v)`` (..., 6, 10) with ``K(v) pi = I v`` for a spatial velocity ``v = [w; u]`` (..., 6)::

        I v = [ I w + h x u ;  m u + w x h ]
    """
    w, u = v[..., :3], v[..., 3:]
    wx, wy, wz = w[..., 0], w[..., 1], w[..., 2]
    ux, uy, uz = u[..., 0], u[..., 1], u[..., 2]
    o = 0 * wx
    rows = [
        # m    hx   hy   hz   Ixx  Ixy  Iyy  Ixz  Iyz  Izz
        [o, o, uz, -uy, wx, wy, o, wz, o, o],          # (I w + h x u)_x
        [o, -uz, o, ux, o, wx, wy, o, wz, o],          # (I w + h x u)_y
        [o, uy, -ux, o, o, o, o, wx, wy, wz],          # (I w + h x u)_z
        [ux, o, -wz, wy, o, o, o, o, o, o],            # (m u + w x h)_x
        [uy, wz, o, -wx, o, o, o, o, o, o],            # (m u + w x h)_y
        [uz, -wy, wx, o, o, o, o, o, o, o],            # (m u + w x h)_z
    ]
    return np.stack([np.stack(r, -1) for r in rows], -2)


def body_regressor(v, a):
    """``A(v, a)`` (..., 6, 10) with ``A pi = I a + v x* I v`` (the Newton-Euler force of one body)."""
    K = momentum_regressor(v)
    vx = v[..., None, :]
    return momentum_regressor(a) + np.swapaxes(cross_force(vx, np.swapaxes(K, -1, -2)), -1, -2)


def _joint_wrench_blocks(model, q, v, a, gravity, joints=None):
    """``F[i][j]`` (..., 6, 10): the part of ``f_i`` (joint ``i``'s wrench, body ``i`` frame) that
    multiplies ``pi_j``, for ``j`` in the subtree of ``i`` (for ``i`` in ``joints``, indices, when
    given: a body's columns travel up no further than its highest ancestor among them); ``(F, S)``."""
    g = model.gravity if gravity is None else gravity
    Xup, S = joint_transforms(model, q)
    vb, ab = body_accelerations(model, Xup, S, v, a, -np.concatenate([0 * g, g], -1), q=q)
    want = set(range(model.nbodies)) if joints is None else set(joints)
    top = [-1] * model.nbodies                 # per body: its highest ancestor-or-self in ``want``
    for j in range(model.nbodies):
        p = model.parent[j]
        top[j] = top[p] if p >= 0 and top[p] >= 0 else (j if j in want else -1)
    F = [dict() for _ in range(model.nbodies)]
    for j in range(model.nbodies):
        if top[j] < 0:
            continue
        Fj = body_regressor(vb[j], ab[j])
        i = j
        while True:
            if i in want:
                F[i][j] = Fj
            if i == top[j]:
                break
            Fj = apply_columns(apply_force_transpose, Xup[i], Fj)      # parent_X_i^* (columns)
            i = model.parent[i]
    return F, S


def _joint_indices(model, joints):
    """Indices of ``joints`` (moving joints' names or indices), checked."""
    out = []
    for j in joints:
        if isinstance(j, str):
            try:
                j = model.joint_names.index(j)
            except ValueError:
                raise KeyError(f"joints: model {model.name!r} has no moving joint {j!r} (fixed joints are merged "
                               f"into their parent body: a wrench across one is force_torque_regressor's)") from None
        elif not isinstance(j, (int, np.integer)) or isinstance(j, bool) or not 0 <= j < model.nbodies:
            raise ValueError(f"joints: expected names or indices (0..{model.nbodies - 1}) of moving joints, got {j!r}")
        out.append(int(j))
    return out


def _wrench_rows(model, joints=None):
    return model.nbodies if joints is None else len(joints)


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, optional={"gravity": (3,)},
        outputs={"Y": ("nv", lambda m: NPARAM * m.nbodies)})
def joint_torque_regressor(model, q, v, a, gravity=None):
    """Joint-torque regressor ``Y`` (..., nv, 10 NB): ``Y @ model.inertial_parameters() == rnea(model, q, v, a)``
    (Pinocchio's ``computeJointTorqueRegressor``; columns ``10 j .. 10 j + 9`` belong to body ``j``)."""
    q, v, a, _, g, shape, _ = _checks.dynamics(model, q, v, a, None, gravity, "a", "nv joint accelerations")
    F, S = _joint_wrench_blocks(model, q, v, a, g)
    Y = np.zeros(shape + (model.nv, NPARAM * model.nbodies), dtype=result_dtype(q))
    for i in range(model.nbodies):
        for j, Fij in F[i].items():
            Y[..., model.v_slice(i), NPARAM * j:NPARAM * (j + 1)] = np.swapaxes(S[i], -1, -2) @ Fij
    return Y


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, optional={"gravity": (3,)}, static=("joints",),
        outputs={"W": (_wrench_rows, 6, lambda m, **_: NPARAM * m.nbodies)})
def joint_wrench_regressor(model, q, v, a, gravity=None, joints=None):
    """Joint-wrench regressor ``W`` (..., NB, 6, 10 NB): ``W[..., i, :, :] @ pi`` is the spatial force
    ``f_i = [n; f]`` the parent exerts on body ``i`` across joint ``i`` (body ``i`` frame), at state
    ``(q, v, a)`` without external forces (RNEA's ``f_i``; what a 6-axis F/T sensor in joint ``i``
    measures).  ``joint_torque_regressor`` is ``S_i^T W_i``.

    ``joints``: a tuple of moving joints (names or indices): ``W`` (..., len(joints), 6, 10 NB) holds
    their wrenches alone, in that order, computed without the others' (a few sensors' rows of a long
    recording: ``6 len(joints)`` rows a state instead of ``6 NB``)."""
    q, v, a, _, g, shape, _ = _checks.dynamics(model, q, v, a, None, gravity, "a", "nv joint accelerations")
    idx = list(range(model.nbodies)) if joints is None else _joint_indices(model, joints)
    F, _ = _joint_wrench_blocks(model, q, v, a, g, idx)
    W = np.zeros(shape + (len(idx), 6, NPARAM * model.nbodies), dtype=result_dtype(q))
    for k, i in enumerate(idx):
        for j, Fij in F[i].items():
            W[..., k, :, NPARAM * j:NPARAM * (j + 1)] = Fij
    return W
