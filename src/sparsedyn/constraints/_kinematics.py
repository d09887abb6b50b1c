"""Kinematic workspace shared by the constraint kernels (world-frame formulation).

One pass over the tree gives ``X0[i] = i_X_world`` for every body
(a :class:`~sparsedyn.model.spatial.Transform`: ``E`` rotates world coordinates into
body coordinates, ``r`` is the body origin in the world).  Everything else is in
world axes, with spatial vectors taken at the world origin, and vectorised over
bodies and dofs instead of recursed:

* ``J0`` (..., 6, nv): column ``k`` is the motion of dof ``k``'s joint for a unit
  rate, ``[omega; v_O] = [E^T S_w; E^T S_v + o x omega]`` (``o`` the body origin);
* ``V`` (..., NB, 6): body spatial velocities, ``V_i = sum_{j <= i} J0_j v_j``
  over the joints ``j`` that support body ``i``;
* ``A`` (..., NB, 6): their *bias* accelerations, with ``a = 0`` and gravity
  off.  A motion subspace fixed in body ``j`` moves with it, ``d/dt S_j = V_j x S_j``,
  so ``A_i = sum_{j <= i} V_parent(j) x (J0_j v_j) + cJ_j`` with ``cJ_j = Sdot_j qd_j``
  (:meth:`~sparsedyn.Joint.bias`, moved to the world origin) for a joint whose ``S``
  depends on ``q``.

From these, a body point at world position ``p`` has the world-aligned Jacobian
``[omega; v_O + omega x p]`` (Pinocchio's ``LOCAL_WORLD_ALIGNED`` at that point),
velocity ``v_p = V_lin + omega x p`` and classical bias acceleration
``a_p = A_lin + alpha x p + omega x v_p``.

A body index of ``-1`` is the world: its points are fixed, with zero Jacobian,
velocity and acceleration.  The workspace is an explicit value computed once
per state; the structure (which joints support which body) is derived once per
model.  Kernels accept leading batch axes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.kinematics import joint_transforms
from ..model.spatial import apply_motion_inv, compose, cross3, cross_motion, mtv

__all__ = ["Kinematics", "kinematics", "body_rotation", "point_position", "point_jacobian",
           "point_velocity", "point_bias_acceleration"]


def structure(model):
    """The support pattern of ``model``: its :class:`~sparsedyn.model.topology.Topology`, whose
    ``support`` (NB, NB) is 1 where joint j moves body i (j is i or an ancestor of i), ``dof_to_body``
    (nv, NB) 1 where dof k belongs to the joint of body i, ``dofs`` per body the dofs that move it."""
    return model.topology


class Kinematics(NamedTuple):
    X0: tuple                 # i_X_world per body
    J0: np.ndarray | None     # (..., 6, nv) dof motions at the world origin, world axes
    V: np.ndarray | None      # (..., NB, 6) body velocities at the world origin (None without v)
    A: np.ndarray | None      # (..., NB, 6) bias accelerations (a = 0, no gravity)
    shape: tuple              # leading batch shape
    nv: int
    dofs: tuple               # per body, the dofs that move it


def kinematics(model, q, v=None, jacobians=True) -> Kinematics:
    """The workspace at ``q`` (..., nq) and, optionally, ``v`` (..., nv).

    ``jacobians=False`` (and no ``v``) computes only the transforms (for residuals).
    """
    Xup, S = joint_transforms(model, q)
    X0 = []
    for i in range(model.nbodies):
        p = model.parent[i]
        X0.append(Xup[i] if p < 0 else compose(Xup[i], X0[p]))
    shape = q.shape[:-1] if v is None else np.broadcast_shapes(q.shape[:-1], v.shape[:-1])
    st = structure(model)
    if (not jacobians and v is None) or model.nbodies == 0:
        z = np.zeros(shape + (0, 6)) if v is not None else None
        return Kinematics(tuple(X0), np.zeros(shape + (6, 0)) if model.nbodies == 0 else None, z, z,
                          shape, model.nv, st.dofs)
    # Per dof: the rotation and origin of its body, and its column of S.
    qs = q.shape[:-1]
    b = model.dof_body
    Et = np.stack([np.broadcast_to(np.swapaxes(X.E, -1, -2), qs + (3, 3)) for X in X0], -3)[..., b, :, :]
    o = np.stack([np.broadcast_to(X.r, qs + (3,)) for X in X0], -2)[..., b, :]
    # S_j depends on q for some joints: broadcast all to q's batch, dofs as rows (..., nv, 6)
    Scol = np.swapaxes(np.concatenate([np.broadcast_to(x, qs + x.shape[-2:]) for x in S], -1), -1, -2)
    w = (Et @ Scol[..., :3, None])[..., 0]                                        # (..., nv, 3)
    vO = (Et @ Scol[..., 3:, None])[..., 0] + cross3(o, w)
    J0 = np.swapaxes(np.concatenate([w, vO], -1), -1, -2)                         # (..., 6, nv)
    if v is None:
        return Kinematics(tuple(X0), J0, None, None, shape, model.nv, st.dofs)
    vdof = np.swapaxes(J0, -1, -2) * v[..., :, None]                              # (..., nv, 6)
    vJ = np.swapaxes(np.swapaxes(vdof, -1, -2) @ st.dof_to_body, -1, -2)          # (..., NB, 6) joint motions
    V = st.support @ vJ                                                           # body velocities
    has_parent = (model.parent >= 0).astype(int)[:, None]      # 0/1 ints: structural for the tracer
    Vp = V[..., np.where(model.parent >= 0, model.parent, 0), :] * has_parent    # parent velocities
    A = st.support @ (cross_motion(Vp, vJ) + _joint_biases(model, q, v, X0))
    return Kinematics(tuple(X0), J0, V, A, shape, model.nv, st.dofs)


def _joint_biases(model, q, v, X0):
    """``cJ_j = Sdot_j qd_j`` of every joint at the world origin, world axes (..., NB, 6): zero
    (the integer 0, structural) where every ``S`` is constant."""
    if all(j.constant_subspace for j in model.joints):
        return 0
    shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1])
    cJ = np.zeros(shape + (model.nbodies, 6), dtype=np.result_type(q, v))
    for i, joint in enumerate(model.joints):
        if not joint.constant_subspace:
            c = joint.bias(q[..., model.q_slice(i)], v[..., model.v_slice(i)])
            cJ[..., i, :] = apply_motion_inv(X0[i], c)
    return cJ


def body_rotation(kin, body):
    """Rotation (..., 3, 3) mapping body coordinates into world coordinates (identity for the world)."""
    if body < 0:
        return np.broadcast_to(np.eye(3), kin.shape + (3, 3))
    return np.broadcast_to(np.swapaxes(kin.X0[body].E, -1, -2), kin.shape + (3, 3))


def point_position(kin, body, r):
    """World position (..., 3) of the point with body coordinates ``r`` (3,)."""
    if body < 0:
        return np.broadcast_to(np.asarray(r, float), kin.shape + (3,))
    X = kin.X0[body]
    return np.broadcast_to(X.r + mtv(X.E, r), kin.shape + (3,))


def point_jacobian(model, kin, body, p):
    """Jacobian (..., 6, nv) of ``[omega; v_p]`` (world axes) of the body point at world position ``p`` (..., 3).

    The columns of the joints that move ``body`` are those of ``kin.J0`` moved from
    the world origin to ``p`` (``v_p = v_O + omega x p``); the others are zero.
    """
    J = np.zeros(kin.shape + (6, kin.nv), dtype=np.result_type(p, np.float64))
    if body < 0:
        return J
    idx = kin.dofs[body]
    cols = np.broadcast_to(kin.J0[..., idx], kin.shape + (6, len(idx)))
    w = cols[..., :3, :]
    pp = np.broadcast_to(np.asarray(p)[..., None, :], kin.shape + (len(idx), 3))
    J[..., :3, idx] = w
    J[..., 3:, idx] = cols[..., 3:, :] + np.swapaxes(cross3(np.swapaxes(w, -1, -2), pp), -1, -2)
    return J


def point_velocity(kin, body, r):
    """``(omega, v_p)`` in world axes (..., 3) each, of the body point with body coordinates ``r``."""
    if body < 0:
        z = np.zeros(kin.shape + (3,))
        return z, z
    p = point_position(kin, body, r)
    w = kin.V[..., body, :3]
    return np.broadcast_to(w, kin.shape + (3,)), kin.V[..., body, 3:] + cross3(w, p)


def point_bias_acceleration(kin, body, r):
    """``(alpha, a_p)`` in world axes (..., 3) each: angular and classical linear acceleration
    of the body point ``r`` (body coordinates) when ``a = 0`` and gravity is off:
    ``a_p = A_lin + alpha x p + omega x v_p`` from the spatial acceleration at the world origin."""
    if body < 0:
        z = np.zeros(kin.shape + (3,))
        return z, z
    p = point_position(kin, body, r)
    w, vp = point_velocity(kin, body, r)
    al = kin.A[..., body, :3]
    return (np.broadcast_to(al, kin.shape + (3,)),
            kin.A[..., body, 3:] + cross3(al, p) + cross3(w, vp))
