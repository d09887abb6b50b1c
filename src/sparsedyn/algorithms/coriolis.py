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
from ..spatial import (apply_force_transpose, apply_motion, crf, crm, cross_motion, rigid_inertia_matrix,
                       rigid_structure, skew)
from .crba import apply_columns, composite_inertias, result_dtype
from .kinematics import joint_transforms

__all__ = ["coriolis_matrix", "coriolis_matrix_kernel"]


def _xbar(f):
    """``(f xbar)`` (..., 6, 6): the matrix of ``u -> u x* f`` (``f = [n; f]`` a force)."""
    nx, fx = skew(f[..., :3]), skew(f[..., 3:])
    return -np.concatenate([np.concatenate([nx, fx], -1), np.concatenate([fx, 0 * fx], -1)], -2)


def coriolis_matrix_kernel(model, q, v):
    """Unchecked ``C(q, v)`` (..., nv, nv); arrays of any backend with common leading axes."""
    Xup, S = joint_transforms(model, q)
    NB = model.nbodies
    vb, Sd, B = [None] * NB, [None] * NB, [None] * NB
    for i in range(NB):
        vJ = (S[i] @ v[..., model.v_slice(i), None])[..., 0]
        p = model.parent[i]
        vb[i] = vJ if p < 0 else apply_motion(Xup[i], vb[p]) + vJ
        Sd[i] = np.swapaxes(cross_motion(vb[i][..., None, :], S[i].T), -1, -2)      # v_i x S_i, by column
        I = rigid_structure(model.inertia[i])
        B[i] = 0.5 * (crf(vb[i]) @ I - I @ crm(vb[i]) + _xbar((I @ vb[i][..., None])[..., 0]))
    IC = [rigid_inertia_matrix(RI) for RI in composite_inertias(model, Xup)]
    BC = list(B)
    for i in range(NB - 1, -1, -1):
        p = model.parent[i]
        if p >= 0:
            BC[p] = BC[p] + _congruence(Xup[i], BC[i])
    shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1])
    C = np.zeros(shape + (model.nv, model.nv), dtype=np.result_type(result_dtype(q), result_dtype(v)))
    for i in range(NB):
        si = model.v_slice(i)
        F1 = IC[i] @ Sd[i] + BC[i] @ S[i]                  # (..., 6, nv_i) forces
        F2 = IC[i] @ S[i]
        F3 = np.swapaxes(BC[i], -1, -2) @ S[i]
        C[..., si, si] = S[i].T @ F1
        j = i
        while model.parent[j] >= 0:
            F1, F2, F3 = (apply_columns(apply_force_transpose, Xup[j], F) for F in (F1, F2, F3))
            j = model.parent[j]
            sj = model.v_slice(j)
            C[..., sj, si] = S[j].T @ F1
            C[..., si, sj] = np.swapaxes(F2, -1, -2) @ Sd[j] + np.swapaxes(F3, -1, -2) @ S[j]
    return C


def _congruence(X, M):
    """``X^T M X`` for a general (not symmetric) 6 x 6 ``M`` (..., 6, 6) in B coordinates, in A."""
    cols = apply_columns(apply_force_transpose, X, M)                       # X^T M
    return np.swapaxes(apply_columns(apply_force_transpose, X, np.swapaxes(cols, -1, -2)), -1, -2)


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
