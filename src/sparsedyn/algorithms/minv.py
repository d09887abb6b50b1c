"""Analytical inverse of the joint-space inertia matrix, ``Minv = H(q)^-1``.

Carpentier, *Analytical Inverse of the Joint Space Inertia Matrix* (2018),
Algorithm 1 (LAAS-CNRS technical report): ABA with its affine
terms removed (``qd = 0``, no gravity), run on all unit joint forces at once.
As in Pinocchio's implementation, the ``O(nv^2)`` part of the algorithm (one
spatial vector per pair of a dof and a dof of its subtree or ancestors) is done
in one frame per tree, the root body's (``X0_i = i_X_root``, see
:func:`sparsedyn.algorithms.kinematics.root_transforms`; Pinocchio uses the world frame):
there a force or motion passes from a body to its parent without a transform,
so a pair costs a few dot products instead of a Plücker transform.  The
articulated inertias stay in body coordinates, as in ABA (accumulated in a
common frame far from the bodies they lose about two digits to cancellation);
``S_i`` and ``U_i`` are carried into the root frame once per body::

    backward (i = NB-1 .. 0):
        U_i = IA_i S_i ;  D_i = S_i^T U_i + diag(armature_i)      (body coordinates)
        S0_i = X0_i^-1 S_i ;  U0_i = X0_i^T U_i                   (root-body coordinates)
        Minv[i, i] = D_i^-1
        Minv[i, below(i)] = -D_i^-1 S0_i^T F[:, below(i)]         (below(i): subtree(i) without i)
        if lambda(i) != -1:
            F[:, subtree(i)] += U0_i Minv[i, subtree(i)]          (the seed's corrected line 14; in one frame
                                                                 F_lambda(i) = F_i on these columns,
                                                                 so one 6 x nv array F holds them all)
            IA_lambda(i) += Xup_i^T (IA_i - U_i D_i^-1 U_i^T) Xup_i
    forward (i = 0 .. NB-1), columns i: (from joint i's first dof to the end of the tree
    of i's root; columns of other trees, when several bodies hang from the world, stay exact zeros):
        if lambda(i) != -1:
            Minv[i, i:] -= D_i^-1 U0_i^T P_lambda(i)[:, i:]
            P_i[:, i:] = P_lambda(i)[:, i:] + S0_i Minv[i, i:]
        else:
            P_i[:, i:] = S0_i Minv[i, i:]
    Minv = upper triangle of Minv, mirrored

``H`` is never formed.  Rows are per joint (``nv_i`` rows each), so every joint
type is covered; ``D_i^-1`` comes from :func:`sparsedyn.algorithms.ltdl.spd_inverse`.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from .. import backend as bk
from .aba import articulated_transmitted, constant_subspace, float_checker
from .crba import apply_columns, result_dtype
from .kinematics import joint_transforms, root_transforms
from .ltdl import spd_inverse
from .rnea import armature_of
from ..model.spatial import apply_force_transpose, apply_motion_inv, rigid_structure, transform_inertia

__all__ = ["minv", "minv_kernel"]


def _subtree_dofs(model, i) -> slice:
    """Dofs of the subtree of body ``i`` (contiguous: bodies are depth-first)."""
    end = model.subtree_end[i]
    return slice(int(model.v_start[i]), int(model.v_start[end]) if end < model.nbodies else model.nv)


def minv_kernel(model, q, check=None):
    """Unchecked ``H(q)^-1`` (..., nv, nv).  ``check`` as in :func:`sparsedyn.algorithms.aba.aba_kernel`."""
    NB, nv = model.nbodies, model.nv
    Xup, S = joint_transforms(model, q)
    X0 = root_transforms(model, Xup)
    shape, dtype = q.shape[:-1], result_dtype(q)
    Minv = np.zeros(shape + (nv, nv), dtype=dtype)
    F = np.zeros(shape + (6, nv), dtype=dtype)                 # articulated forces, root-body coordinates
    IA = [rigid_structure(model.inertia[i]) for i in range(NB)]
    S0, UDinv0 = [None] * NB, [None] * NB
    for i in range(NB - 1, -1, -1):
        si, sub = model.v_slice(i), _subtree_dofs(model, i)
        below = slice(si.stop, sub.stop)                    # dofs of the proper subtree
        U = IA[i] @ S[i]
        arm = armature_of(model, i)
        StU = np.swapaxes(S[i], -1, -2) @ U
        D = StU if arm is None else StU + np.diag(arm)
        Dinv = spd_inverse(D, None if check is None else check(i, IA[i]))
        S0[i] = apply_columns(apply_motion_inv, X0[i], S[i])
        U0 = apply_columns(apply_force_transpose, X0[i], U)
        UDinv0[i] = U0 @ Dinv
        Minv[..., si, si] = Dinv
        Minv[..., si, below] = -(np.swapaxes(S0[i] @ Dinv, -1, -2) @ F[..., :, below])
        p = model.parent[i]
        if p >= 0:
            F[..., :, sub] = F[..., :, sub] + U0 @ Minv[..., si, sub]
            Ia = articulated_transmitted(IA[i], U @ Dinv, U, constant_subspace(model, i, S), arm)
            IA[p] = IA[p] + transform_inertia(Xup[i], Ia)
    P = [None] * NB                           # P[i]: columns ``cols`` (i's first dof .. end of its root's tree)
    for i in range(NB):
        si, v0 = model.v_slice(i), int(model.v_start[i])
        cols = slice(v0, _subtree_dofs(model, model.ancestors(i)[-1]).stop)   # other trees: exact zeros
        p = model.parent[i]
        if p >= 0:
            Pp = P[p][..., :, v0 - int(model.v_start[p]):]
            Minv[..., si, cols] = Minv[..., si, cols] - np.swapaxes(UDinv0[i], -1, -2) @ Pp
            P[i] = Pp + S0[i] @ Minv[..., si, cols]
        else:
            P[i] = S0[i] @ Minv[..., si, cols]
    r, c = np.triu_indices(nv, 1)                            # mirror the upper triangle
    Minv[..., c, r] = Minv[..., r, c]
    return Minv


@kernel(inputs={"q": ("nq",)}, outputs={"Minv": ("nv", "nv")})
def minv(model, q):
    """``H(q)^-1`` (..., nv, nv), symmetric, computed without forming ``H``.

    Raises :class:`sparsedyn.algorithms.aba.SingularInertiaError` naming the joint when a
    subtree is massless (``H`` singular).

    >>> import numpy as np, sparsedyn as sd
    >>> model = sd.random_tree(12, branching=2.0, joint_types="all", seed=2)
    >>> q = model.random_configuration(0)
    >>> bool(np.allclose(sd.minv(model, q) @ sd.crba(model, q), np.eye(model.nv)))
    True
    """
    q = _checks.configuration(model, q)
    return minv_kernel(model, q, check=None if bk.is_symbolic(q) else float_checker(model))
