"""Analytical derivatives of the kinematics: frame velocities, accelerations and ``dJ/dt``.

Carpentier and Mansard, *Analytical derivatives of rigid body dynamics algorithms*
(RSS 2018).  Everything is computed in one frame per tree, the root body's
(``Xr_i = i_X_root``, :func:`~sparsedyn.algorithms.kinematics.root_transforms`),
taken as a frame fixed in space at the current instant: the formulas are those of
the paper's world frame, and a floating base keeps its six unit columns.  In that
frame joint ``k``'s motion subspace is the set of twists ``xi_k = Xr_k^-1 S_k``,
the body velocities and accelerations are sums over the ancestors::

    V_i = V_lambda(i) + xi_i v_i
    A_i = A_lambda(i) + xi_i a_i + V_i x xi_i v_i        (d/dt xi_i = V_i x xi_i)

and moving ``q`` along the tangent direction ``dq_k`` moves the whole subtree of
``k`` rigidly by the twist ``xi_k`` (every joint's tangent direction is a twist of
its child frame in child coordinates, see :meth:`sparsedyn.Joint.retract`), except
for the parts that come from above ``k``.  Hence, for a body ``i`` in ``k``'s subtree
(``V_l``, ``A_l``: those of ``k``'s parent)::

    dV_i/dq_k = xi_k x (V_i - V_l)
    dA_i/dq_k = xi_k x (A_i - A_l) + psi_k x (V_i - V_l),     psi_k = V_l x xi_k
    dV_i/dv_k = xi_k,   dA_i/dv_k = xi_k x V_i + phi_k,      phi_k = (V_l + V_k) x xi_k

(``dq_k`` a column of joint ``k``).  A quantity expressed in a frame on body ``i``
changes by ``-xi_k x`` of itself on top of that, which gives the ``local``
derivatives.  Tangent space as everywhere: ``d/d(dq) f(integrate(q, dq))`` at
``dq = 0``.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import kernel
from ..spatial import Transform, apply_motion, apply_motion_inv, compose, cross3, cross_motion
from .kinematics import _check_reference, _frame_world_transform, joint_transforms, root_transforms, world_transforms

__all__ = ["frame_velocity_derivatives", "frame_acceleration_derivatives", "frame_jacobian_time_variation",
           "RootMotion", "root_motion", "stacked", "broadcast_columns"]


def broadcast_columns(X: Transform):
    """``X`` with an axis for a set of vectors (..., n, 6) to act on."""
    return Transform(X.E[..., None, :, :], X.r[..., None, :])


def stacked(parts, shape):
    """Per-body arrays (..., n_i, k...) broadcast to the batch ``shape`` and joined on the dof axis."""
    parts = [np.broadcast_to(x, shape + x.shape[x.ndim - 2:]) for x in parts]
    return np.concatenate(parts, -2)


class RootMotion:
    """The forward pass in root-body coordinates (lists by body; see the module docstring).

    ``Xup``, ``S``: :func:`~sparsedyn.algorithms.kinematics.joint_transforms`; ``Xr[i] = i_X_root``;
    ``xi[i]`` (..., nv_i, 6): joint ``i``'s twists (one row per dof); ``V[i]``, ``A[i]``: body
    velocity and acceleration (``A`` includes ``a_root``); ``Vl[i]``, ``Al[i]``: those of the parent
    (for a root body ``0`` and ``a_root`` moved into its coordinates).
    """

    __slots__ = ("Xup", "S", "Xr", "xi", "V", "A", "Vl", "Al")


def root_motion(model, q, v, a=None, a_root=None):
    """:class:`RootMotion` of state ``(q, v, a)``; ``a=None``: velocities only.  ``a_root`` (..., 6),
    world coordinates: the acceleration of the world seen by the roots (``-[0; g]`` puts gravity in,
    as RNEA does), ``None`` for zero (no checks; kernel use)."""
    K = RootMotion()
    K.Xup, K.S = joint_transforms(model, q)
    K.Xr = root_transforms(model, K.Xup)
    NB = model.nbodies
    K.xi, K.V, K.A, K.Vl, K.Al = [None] * NB, [None] * NB, [None] * NB, [None] * NB, [None] * NB
    zero = bk.zeros((6,), like=v)
    for i in range(NB):
        sl, p = model.v_slice(i), model.parent[i]
        K.xi[i] = apply_motion_inv(broadcast_columns(K.Xr[i]), K.S[i].T)
        vJ = np.sum(K.xi[i] * v[..., sl, None], -2)
        if p < 0:
            K.Vl[i], K.V[i] = zero, vJ
        else:
            K.Vl[i], K.V[i] = K.V[p], K.V[p] + vJ
        if a is None:
            continue
        aJ = np.sum(K.xi[i] * a[..., sl, None], -2)
        if p < 0:
            K.Al[i] = zero if a_root is None else apply_motion(K.Xup[i], a_root)
            K.A[i] = K.Al[i] + aJ
        else:
            K.Al[i] = K.A[p]
            K.A[i] = K.A[p] + aJ + cross_motion(K.V[i], vJ)
    return K
