"""Analytical derivatives of the centroidal dynamics: ``h_G`` and ``dh_G/dt`` with respect to
``q`` (tangent space), ``v`` and ``a``.

Carpentier and Mansard, *Analytical derivatives of rigid body dynamics algorithms* (RSS 2018),
with the quantities of :mod:`sparsedyn.algorithms.dynamics_derivatives` (root-body frame, no
gravity, no external force).  The momentum at the root origin is ``h = sum_i I_i V_i`` and its
rate ``hdot = sum_i (I_i A_i + V_i x* I_i V_i) = F_root``; for a column ``c`` of joint ``k``
(subtree momentum ``M_k``)::

    dh/dq_c = xi_c x* M_k + IC_k psi_c          dh/dv_c = IC_k xi_c
    dhdot/dq_c = Tq_c,   dhdot/dv_c = Tv_c,     dhdot/da_c = IC_k xi_c

and the centre of mass moves by ``dc/dq_c = (IC_k xi_c)_linear / m``.  Moved to world axes and
about the CoM, ``h_G = [k - c x l; l]`` (:mod:`sparsedyn.algorithms.centroidal`), so
``dk_G = dk - dc x l - c x dl``; likewise ``hdot_G = [kdot - c x ldot; ldot]``.

Rows ``[k_G; l]``; Pinocchio's ``computeCentroidalDynamicsDerivatives`` returns the same four
matrices with rows ``[l; k_G]`` and its own column order:
``sparsedyn.interop.pinocchio.jacobian_to_pinocchio`` converts each (it swaps the row halves).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import RigidInertia, Transform, apply_force_transpose, cross3, rigid_transform
from .centroidal import _about, centroidal_momentum_rate
from .derivatives import derivatives
from .com import _total_mass
from .dynamics_derivatives import analytical_model, joint_terms, momentum_columns, subtree_sums
from .kinematics_derivatives import body_transform, broadcast_columns, levels, root_motion

__all__ = ["centroidal_dynamics_derivatives"]

_6xNV = (6, "nv")


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)},
        outputs={"dh_dq": _6xNV, "dhdot_dq": _6xNV, "dhdot_dv": _6xNV, "dhdot_da": _6xNV})
def centroidal_dynamics_derivatives(model, q, v, a):
    """``(dh_dq, dhdot_dq, dhdot_dv, dhdot_da)`` (..., 6, nv) each: the partial derivatives of the
    centroidal momentum ``h_G = [k_G; l]`` and its rate (:func:`~sparsedyn.centroidal_momentum_rate`,
    gravity not included); ``dq`` on the tangent space.  ``dh/dv = dhdot/da = A_G``, the centroidal
    momentum matrix.  Pinocchio's ``computeCentroidalDynamicsDerivatives`` (rows linear first)."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    a = _checks.vector(model, "a", a, model.nv, "nv joint accelerations")
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1), a=(a, 1))
    inv_m = 1.0 / _total_mass(model)
    chained = analytical_model(model, None)
    if chained is None:
        (dh, _, _), rate = derivatives(centroidal_momentum_rate, ("q", "v", "a"))(model, q, v, a)
        return (dh,) + tuple(rate)              # a massless model has no centre of mass: a clear error
    model = chained[0]                          # (composite joints: their chains of massless bodies)
    K = root_motion(model, q, v, a)
    sums = subtree_sums(model, K)
    IC, F, _, M = sums
    T = joint_terms(model, K, sums, shape)
    roots = [int(i) for i in levels(model).roots]
    dh = momentum_columns(model, T, sums)
    # the four per-dof force sets moved to world coordinates together (one transform per tree)
    Y = np.stack([dh, T["Tq"], T["Tv"], T["P"]], -2)                       # (..., nv, 4, 6)
    parts, ends = [], []
    for r in roots:
        end = model.subtree_end[r]
        dofs = slice(int(model.v_start[r]), int(model.v_start[end]) if end < model.nbodies else model.nv)
        X = body_transform(K.Xup, r)
        parts.append(apply_force_transpose(Transform(X.E[..., None, None, :, :], X.r[..., None, None, :]), Y[..., dofs, :, :]))
        # the subtree's momentum and force at the root, to world coordinates: h and hdot
        ends.append(apply_force_transpose(broadcast_columns(X), np.stack([M[..., r, :], F[..., r, :]], -2)))
    W = parts[0] if len(parts) == 1 else np.concatenate([np.broadcast_to(x, shape + x.shape[-3:]) for x in parts], -3)
    dh, dhd_q, dhd_v, P = (W[..., k, :] for k in range(4))
    h = sum(e[..., 0, :] for e in ends)
    hdot = sum(e[..., 1, :] for e in ends)
    first = sum(rigid_transform(body_transform(K.Xup, r), RigidInertia(IC.m[..., r], IC.h[..., r, :], IC.I[..., r, :, :])).h
                for r in roots)
    c = first * inv_m
    # P's linear part at the world origin is the change of the first moment: sum m (w x x + u).
    dc = P[..., 3:] * inv_m
    l, ldot = h[..., None, 3:], hdot[..., None, 3:]
    cc = c[..., None, :]

    def about(D, dl_term):
        return np.concatenate([D[..., :3] - cross3(cc, D[..., 3:]) - dl_term, D[..., 3:]], -1)

    out = (about(dh, cross3(dc, l)), about(dhd_q, cross3(dc, ldot)), _about(cc, dhd_v), _about(cc, P))
    return tuple((x if x.shape[:-2] == shape else np.broadcast_to(x, shape + x.shape[-2:])).swapaxes(-1, -2).copy()
                 for x in out)

