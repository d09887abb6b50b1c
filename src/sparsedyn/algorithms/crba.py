"""Composite-rigid-body algorithm: the joint-space inertia matrix ``H`` and bias ``C``.

Featherstone, *Rigid Body Dynamics Algorithms* (RBDA) Table 6.2, in body
coordinates (and R. Featherstone, *Computational Robot Dynamics, Part 4: Forward Dynamics*,
lecture notes)::

    IC_i = I_i + sum_{j in mu(i)} jX_i^T IC_j jX_i           (composite inertias)
    F = IC_i S_i ;  H_ii = S_i^T F + diag(armature_i)
    walk j up the ancestors of i:  F = Xup_j^T F ;  j = parent(j) ;
                                   H_ij = F^T S_j ; H_ji = H_ij^T

The composite inertias are rigid-body inertias, kept as their 10 parameters
(:class:`sparsedyn.model.spatial.RigidInertia`), so ``jX_i^T IC_j jX_i`` is
:func:`~sparsedyn.model.spatial.rigid_transform` (about 80 multiplications for a
general transform, instead of two 6x6 matrix products) and ``F = IC_i S_i``
reads columns of ``IC_i`` for a joint about a frame axis.

Only the blocks ``H_ij`` with ``j`` an ancestor-or-self of ``i`` (or vice
versa) are computed; every other block is a structural zero (*branch-induced
sparsity*, see :func:`sparsedyn.algorithms.ltdl.sparsity_pattern`).

The bias force ``C = nonlinear_effects(model, q, v)``, the force that produces zero acceleration, is RNEA
with ``qdd = 0`` (so ``H qdd + C = tau``).  Kernels (``*_kernel``) are unchecked
and generic over the backend; the public functions check their arguments.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from .. import backend as bk
from .kinematics import joint_transforms
from .rnea import armature_of, rnea_kernel
from ..model.spatial import (RigidInertia, Transform, apply_force_transpose, rigid_add, rigid_inertia, rigid_inertia_matrix,
                      rigid_transform)

__all__ = ["crba", "HandC", "crba_kernel", "bias_kernel", "composite_inertias", "apply_columns",
           "inertia_columns"]


def apply_columns(f, X: Transform, M):
    """Apply a spatial-vector map ``f(X, x)`` (e.g. ``apply_force``) to each column of ``M`` (..., 6, n)."""
    Xc = Transform(X.E[..., None, :, :], X.r[..., None, :])
    return np.swapaxes(f(Xc, np.swapaxes(M, -1, -2)), -1, -2)


def result_dtype(x):
    """Dtype of a kernel's output for input ``x``: object stays object, floats widen to float64."""
    return np.result_type(x.dtype, np.float64)


def composite_inertias(model, Xup):
    """``IC[i]``: inertia of the composite body formed by the subtree of ``i``, in frame ``i``, as a
    :class:`~sparsedyn.model.spatial.RigidInertia` (10 parameters, so ``jX_i^T IC_j jX_i`` is
    :func:`~sparsedyn.model.spatial.rigid_transform`, not a product of 6x6 matrices)."""
    IC = [rigid_inertia(model.inertia[i]) for i in range(model.nbodies)]
    for i in range(model.nbodies - 1, -1, -1):
        p = model.parent[i]
        if p >= 0:
            IC[p] = rigid_add(IC[p], rigid_transform(Xup[i], IC[i]))
    return IC


def inertia_columns(RI: RigidInertia, M):
    """``I M`` for a rigid-body inertia and the columns of ``M`` (..., 6, n)."""
    return rigid_inertia_matrix(RI) @ M          # the matrix's structural zeros fold when traced


def crba_kernel(model, q):
    """Unchecked CRBA: ``H`` (..., nv, nv) for configurations ``q`` (..., nq)."""
    Xup, S = joint_transforms(model, q)
    IC = composite_inertias(model, Xup)
    H = np.zeros(q.shape[:-1] + (model.nv, model.nv), dtype=result_dtype(q))
    for i in range(model.nbodies):
        si = model.v_slice(i)
        F = inertia_columns(IC[i], S[i])                    # (..., 6, nv_i)
        arm = armature_of(model, i)
        StF = np.swapaxes(S[i], -1, -2) @ F
        H[..., si, si] = StF if arm is None else StF + np.diag(arm)
        j = i
        while model.parent[j] >= 0:
            F = apply_columns(apply_force_transpose, Xup[j], F)   # parent(j)_X_j^* F
            j = model.parent[j]
            sj = model.v_slice(j)
            Hij = np.swapaxes(F, -1, -2) @ S[j]             # (..., nv_i, nv_j)
            H[..., si, sj] = Hij
            H[..., sj, si] = np.swapaxes(Hij, -1, -2)
    return H


def bias_kernel(model, q, v, f_ext=None, gravity=None):
    """Unchecked bias force ``C(q, v, f_ext)``: RNEA with zero acceleration."""
    return rnea_kernel(model, q, v, bk.zeros(v.shape, like=v), f_ext, gravity)


@kernel(inputs={"q": ("nq",)}, outputs={"H": ("nv", "nv")})
def crba(model, q):
    """Joint-space inertia matrix ``H(q)`` (..., nv, nv), symmetric positive definite.

    Blocks between dofs on different branches are exact (structural) zeros.

    >>> import numpy as np, sparsedyn as sd
    >>> model = sd.humanoid()
    >>> H = sd.crba(model, sd.humanoid_standing_configuration())
    >>> H.shape, bool(np.allclose(H, H.T)), bool(np.all(np.linalg.eigvalsh(H) > 0))
    ((35, 35), True, True)
    >>> l, r = model.joint("l_knee"), model.joint("r_knee")      # two legs: no coupling
    >>> float(H[model.v_slice(l), model.v_slice(r)].item())
    0.0
    """
    q = _checks.configuration(model, q)
    return crba_kernel(model, q)


def _state(model, q, v, f_ext, gravity):
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v, "v")
    if f_ext is not None:
        f_ext = _checks.body_forces(model, f_ext)
    g = _checks.gravity(model, gravity)
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1), f_ext=(f_ext, 2), gravity=(None if gravity is None else g, 1))
    return q, v, f_ext, g, shape


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, optional={"f_ext": ("nb", 6), "gravity": (3,)},
        outputs={"H": ("nv", "nv"), "C": ("nv",)})
def HandC(model, q, v, f_ext=None, gravity=None):
    """``(H, C)``: joint-space inertia matrix and bias force (RBDA's ``HandC``)."""
    q, v, f_ext, g, shape = _state(model, q, v, f_ext, gravity)
    H = crba_kernel(model, q)
    C = bias_kernel(model, q, v, f_ext, g)
    return (np.broadcast_to(H, shape + (model.nv, model.nv)).copy(),
            np.broadcast_to(C, shape + (model.nv,)).copy())
