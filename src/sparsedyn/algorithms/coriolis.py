"""The Coriolis matrix ``C(q, v)`` (nv, nv): ``C v`` is the velocity part of the bias force and
``dH/dt - 2 C`` is skew-symmetric (the factorisation built from Christoffel symbols).

Following S. Echeandia and P. M. Wensing, "Numerical Methods to Compute the Coriolis Matrix and
Christoffel Symbols for Rigid-Body Systems" (2021), as Pinocchio's ``computeCoriolisMatrix``:
with ``J_k`` the Jacobian of body ``k`` and ``I_k`` its inertia,

    C = sum_k J_k^T (I_k dJ_k/dt + B(I_k, v_k) J_k),
    B(I, v) = 1/2 ((v x*) I - I (v x) + (I v) xbar),     (f xbar) u = u x* f,

where ``dS_j/dt = v_j x S_j`` (a joint axis moves with its body).  ``B(I, v) v = v x* I v``, so
``C v`` is the velocity product of RNEA; ``dI/dt - 2 B = -(I v) xbar`` is skew-symmetric, hence
``dH/dt - 2 C``.  Summed over subtrees as CRBA sums inertias (composite ``IC_i`` and ``BC_i``, in
body coordinates), for ``j`` an ancestor of ``i``:

    C_ii = S_i^T (IC_i Sd_i + BC_i S_i)
    C_ji = S_j^T (IC_i Sd_i + BC_i S_i)           (transported to j)
    C_ij = (IC_i S_i)^T Sd_j + (BC_i^T S_i)^T S_j

with ``Sd_i = v_i x S_i``.  Every other block is a structural zero (branch-induced sparsity, as ``H``).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import (apply_force_transpose, apply_motion, cross_force, cross_motion, rigid_inertia_matrix,
                       rigid_structure, transform_inertia)
from .crba import apply_columns, composite_inertias, result_dtype
from .kinematics import joint_transforms

__all__ = ["coriolis_matrix", "coriolis_matrix_kernel"]


def _columns(f, x, M):
    """``f(x, m)`` for each column ``m`` of ``M`` (..., 6, n) (``x`` (..., 6) shared)."""
    return np.swapaxes(f(x[..., None, :], np.swapaxes(M, -1, -2)), -1, -2)


def coriolis_matrix_kernel(model, q, v):
    """Unchecked ``C(q, v)`` (..., nv, nv); arrays of any backend with common leading axes.

    ``B(I, v)`` is kept as its symmetric part ``Bs = (G + G^T) / 2``, ``G = (v x*) I`` (because
    ``I (v x) = -G^T``), and its skew part ``(h xbar) / 2`` with ``h = I v`` the momentum: since
    ``X^T (h xbar) X = (X^T h) xbar``, the subtree sums are ``BsC`` (a symmetric congruence, as
    for articulated inertias) and the composite momentum ``hC`` (transported like a force).
    """
    Xup, S = joint_transforms(model, q)
    NB = model.nbodies
    vb, Sd, BsC, hC = [None] * NB, [None] * NB, [None] * NB, [None] * NB
    for i in range(NB):
        vJ = (S[i] @ v[..., model.v_slice(i), None])[..., 0]
        p = model.parent[i]
        vb[i] = vJ if p < 0 else apply_motion(Xup[i], vb[p]) + vJ
        Sd[i] = _columns(cross_motion, vb[i], S[i])                 # v_i x S_i (+ Sdot_i where S_i varies)
        if not model.joints[i].constant_subspace:
            Sd[i] = Sd[i] + model.joints[i].subspace_rate(q[..., model.q_slice(i)], v[..., model.v_slice(i)])
        I = rigid_structure(model.inertia[i])
        G = _columns(cross_force, vb[i], I)                         # (v_i x*) I_i
        BsC[i] = 0.5 * (G + np.swapaxes(G, -1, -2))
        hC[i] = (I @ vb[i][..., None])[..., 0]
    IC = [rigid_inertia_matrix(RI) for RI in composite_inertias(model, Xup)]
    for i in range(NB - 1, -1, -1):
        p = model.parent[i]
        if p >= 0:
            BsC[p] = BsC[p] + transform_inertia(Xup[i], BsC[i])
            hC[p] = hC[p] + apply_force_transpose(Xup[i], hC[i])
    shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1])
    C = np.zeros(shape + (model.nv, model.nv), dtype=np.result_type(result_dtype(q), result_dtype(v)))
    for i in range(NB):
        si = model.v_slice(i)
        hS = 0.5 * _columns(lambda h, s: cross_force(s, h), hC[i], S[i])     # (hC_i xbar) S_i / 2
        BsS = BsC[i] @ S[i]
        F1 = IC[i] @ Sd[i] + BsS + hS                       # (IC Sd + BC S), forces (..., 6, nv_i)
        F2 = IC[i] @ S[i]                                   # IC S
        F3 = BsS - hS                                       # BC^T S
        C[..., si, si] = np.swapaxes(S[i], -1, -2) @ F1
        j = i
        while model.parent[j] >= 0:
            F1, F2, F3 = (apply_columns(apply_force_transpose, Xup[j], F) for F in (F1, F2, F3))
            j = model.parent[j]
            sj = model.v_slice(j)
            C[..., sj, si] = np.swapaxes(S[j], -1, -2) @ F1
            C[..., si, sj] = np.swapaxes(F2, -1, -2) @ Sd[j] + np.swapaxes(F3, -1, -2) @ S[j]
    return C


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"C": ("nv", "nv")})
def coriolis_matrix(model, q, v):
    """The Coriolis matrix ``C(q, v)`` (..., nv, nv) (see the module docstring).

    ``C v = nonlinear_effects(q, v) - generalized_gravity(q)`` and ``dH/dt - 2 C`` is
    skew-symmetric; equal to Pinocchio's ``computeCoriolisMatrix`` after converting the dof order.
    Armature adds nothing (a rotor's inertia is constant in joint space).
    """
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v, "v")
    _checks.batch_shape(q=(q, 1), v=(v, 1))
    return coriolis_matrix_kernel(model, q, v)
