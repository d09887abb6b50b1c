"""Analytical inverse of the joint-space inertia matrix, ``Minv = H(q)^-1``.

Carpentier, *Analytical Inverse of the Joint Space Inertia Matrix* (2018),
Algorithm 1 (``shared/seeds/carpentier-jsim-inverse.md``): ABA with its affine
terms removed (``qd = 0``, no gravity), run on all unit joint forces at once.
``F_i`` (6 x nv) is the articulated bias force of body ``i`` as a linear
function of ``tau`` (nonzero only in the columns of ``subtree(i)``), ``P_i``
(6 x nv) the spatial acceleration of body ``i`` as a function of ``tau``::

    backward (i = NB-1 .. 0):
        U_i = IA_i S_i ;  D_i = S_i^T U_i
        Minv[i, i] = D_i^-1
        Minv[i, subtree(i)] -= D_i^-1 S_i^T F_i[:, subtree(i)]
        if lambda(i) != -1:
            F_i[:, subtree(i)] += U_i Minv[i, subtree(i)]         (the seed's corrected line 14:
            F_lambda(i)[:, subtree(i)] += Xup_i^T F_i[:, subtree(i)]   F carries U Minv up)
            IA_lambda(i) += Xup_i^T (IA_i - U_i D_i^-1 U_i^T) Xup_i
    forward (i = 0 .. NB-1), columns i: (from joint i's first dof to the end of the tree
    of i's root; columns of other trees, when several bodies hang from the world, stay exact zeros):
        if lambda(i) != -1:
            Minv[i, i:] -= D_i^-1 U_i^T Xup_i P_lambda(i)[:, i:]
            P_i[:, i:] = Xup_i P_lambda(i)[:, i:] + S_i Minv[i, i:]
        else:
            P_i[:, i:] = S_i Minv[i, i:]
    Minv = upper triangle of Minv, mirrored

``H`` is never formed.  Rows are per joint (``nv_i`` rows each), so every joint
type is covered; ``D_i^-1`` comes from :func:`sparsedyn.ltdl.spd_inverse`.
"""

from __future__ import annotations

import numpy as np

from . import _checks
from . import backend as bk
from .aba import float_checker
from .crba import apply_columns, result_dtype
from .kinematics import joint_transforms
from .ltdl import spd_inverse
from .spatial import apply_force_transpose, apply_motion, transform_inertia

__all__ = ["minv", "minv_kernel"]


def _subtree_dofs(model, i) -> slice:
    """Dofs of the subtree of body ``i`` (contiguous: bodies are depth-first)."""
    end = model.subtree_end[i]
    return slice(int(model.v_start[i]), int(model.v_start[end]) if end < model.nbodies else model.nv)


def minv_kernel(model, q, check=None):
    """Unchecked ``H(q)^-1`` (..., nv, nv).  ``check`` as in :func:`sparsedyn.aba.aba_kernel`."""
    NB, nv = model.nbodies, model.nv
    Xup, S = joint_transforms(model, q)
    shape, dtype = q.shape[:-1], result_dtype(q)
    Minv = np.zeros(shape + (nv, nv), dtype=dtype)
    F = [np.zeros(shape + (6, nv), dtype=dtype) for _ in range(NB)]
    IA = [model.inertia[i] for i in range(NB)]
    U, Dinv = [None] * NB, [None] * NB
    for i in range(NB - 1, -1, -1):
        si, sub = model.v_slice(i), _subtree_dofs(model, i)
        below = slice(si.stop, sub.stop)                    # dofs of the proper subtree
        U[i] = IA[i] @ S[i]
        D = S[i].T @ U[i]
        Dinv[i] = spd_inverse(D, None if check is None else check(i, IA[i]))
        Minv[..., si, si] = Dinv[i]
        Minv[..., si, below] = -(Dinv[i] @ (S[i].T @ F[i][..., :, below]))
        p = model.parent[i]
        if p >= 0:
            Fa = F[i][..., :, sub] + U[i] @ Minv[..., si, sub]
            F[p][..., :, sub] = F[p][..., :, sub] + apply_columns(apply_force_transpose, Xup[i], Fa)
            Ia = IA[i] - U[i] @ Dinv[i] @ np.swapaxes(U[i], -1, -2)
            IA[p] = IA[p] + transform_inertia(Xup[i], Ia)
    P = [None] * NB                           # P[i]: columns ``cols`` (i's first dof .. end of its root's tree)
    for i in range(NB):
        si, v0 = model.v_slice(i), int(model.v_start[i])
        cols = slice(v0, _subtree_dofs(model, model.ancestors(i)[-1]).stop)   # other trees: exact zeros
        p = model.parent[i]
        if p >= 0:
            XP = apply_columns(apply_motion, Xup[i], P[p][..., :, v0 - int(model.v_start[p]):])
            Minv[..., si, cols] = Minv[..., si, cols] - Dinv[i] @ (np.swapaxes(U[i], -1, -2) @ XP)
            P[i] = XP + S[i] @ Minv[..., si, cols]
        else:
            P[i] = S[i] @ Minv[..., si, cols]
    r, c = np.triu_indices(nv, 1)                            # mirror the upper triangle
    Minv[..., c, r] = Minv[..., r, c]
    return Minv


def minv(model, q):
    """``H(q)^-1`` (..., nv, nv), symmetric, computed without forming ``H``.

    Raises :class:`sparsedyn.aba.SingularInertiaError` naming the joint when a
    subtree is massless (``H`` singular).
    """
    q = _checks.configuration(model, q)
    return minv_kernel(model, q, check=None if bk.is_symbolic(q) else float_checker(model))
