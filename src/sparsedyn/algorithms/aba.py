"""Articulated-body algorithm (forward dynamics), Featherstone RBDA Table 7.1.

``qdd = aba(model, q, v, tau, f_ext)`` solves ``H(q) qdd + C(q, v, f_ext) = tau``
in O(NB) (F. Nori, *Inverse, forward and other dynamic computations computationally optimized
with sparse matrix factorizations*, 2017, section V-A and appendix A)::

    pass 1 (i = 0 .. NB-1):  v_i = Xup_i v_lambda(i) + S_i qd_i ;  c_i = v_i x S_i qd_i + cJ_i
                             IA_i = I_i ;  pA_i = v_i x* I_i v_i - f_ext_i
    pass 2 (i = NB-1 .. 0):  U_i = IA_i S_i ;  D_i = S_i^T U_i + diag(armature_i)
                             u_i = tau_i - S_i^T pA_i
                             Ia = IA_i - U_i D_i^-1 U_i^T
                             pa = pA_i + Ia c_i + U_i D_i^-1 u_i
                             IA_lambda(i) += Xup_i^T Ia Xup_i ;  pA_lambda(i) += Xup_i^T pa
    pass 3 (i = 0 .. NB-1):  a'_i = Xup_i a_lambda(i) + c_i      (a_world = -a_grav)
                             qdd_i = D_i^-1 (u_i - U_i^T a'_i) ;  a_i = a'_i + S_i qdd_i

Most joint types have a constant ``S_i`` in the child frame, so ``cJ_i = 0``; the others
(:mod:`sparsedyn.model.joint_types`) add ``cJ_i = Sdot_i qd_i`` (:func:`~sparsedyn.algorithms.kinematics.velocity_products`).
``Ia`` is symmetric with ``Ia S_i = 0``:
only its upper triangle is computed, the row and column along a joint axis
that is a frame axis are structural zeros (:func:`articulated_transmitted`),
and ``Xup_i^T Ia Xup_i`` uses the 3x3 block formula of
:func:`sparsedyn.model.spatial.transform_inertia`, not 6x6 matrix products.  ``D_i`` is
an ``nv_i x nv_i`` symmetric positive definite matrix inverted by
:func:`sparsedyn.algorithms.ltdl.spd_inverse`.

The rotor inertia ``armature_i`` (``model.armature``) enters ``D_i`` only; a joint
with zero armature gets no term.

When a joint's subtree is massless (or has no inertia about the joint's
motion), ``D_i`` is singular and forward dynamics is undefined;
:func:`aba` raises :class:`SingularInertiaError` naming the joint.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from .kinematics import joint_transforms, velocity_pass, velocity_products
from .ltdl import spd_inverse
from .rnea import armature_of
from ..model.spatial import (apply_force_transpose, apply_motion, cross_force, mv, rigid_structure,
                       transform_inertia)

__all__ = ["aba", "aba_kernel", "articulated_transmitted", "mirror_upper", "SingularInertiaError", "PIVOT_RTOL",
           "own_inertia_scales", "constant_subspace",
           "pivot_checker", "float_checker"]

#: A pivot of ``D_i = S_i^T IA_i S_i`` at most ``PIVOT_RTOL * max|IA_i|`` counts as singular.
PIVOT_RTOL = 1e-12


class SingularInertiaError(ValueError):
    """Forward dynamics is undefined: a joint's articulated inertia about its motion is singular."""


def pivot_checker(model, i, scale, what="articulated inertia D = S^T IA S"):
    """A ``check(k, pivot)`` callback for :func:`sparsedyn.algorithms.ltdl.spd_inverse` (float input only):
    raises :class:`SingularInertiaError` naming joint ``i`` when ``pivot <= PIVOT_RTOL * scale``."""
    def check(k, pivot):
        pivot = np.asarray(pivot, dtype=float)
        bad = pivot <= PIVOT_RTOL * np.asarray(scale, dtype=float)
        if np.any(bad):
            j = model.joints[i]
            raise SingularInertiaError(
                f"joint {model.joint_names[i]!r} (body {model.body_names[i]!r}, {j.type}) of model "
                f"{model.name!r}: the {what} about the joint's motion axis is singular "
                f"(pivot {np.min(pivot):.3g} of dof {k} of the joint; scale {np.max(scale):.3g}). The subtree "
                f"it moves is massless or has no inertia along that motion; give its bodies mass and "
                f"inertia, or make the joint fixed and merge the bodies")
    return check


def mirror_upper(M):
    """``M`` (..., n, n) with its strict lower triangle replaced by the upper one's mirror image
    (a symmetric result computed once: traced, the unused lower half is dead code)."""
    r, c = np.triu_indices(M.shape[-1], 1)
    M = M.copy()
    M[..., c, r] = M[..., r, c]
    return M


def constant_subspace(model, i, S):
    """``S[i]`` where joint ``i``'s motion subspace is constant, else ``None``."""
    return S[i] if model.joints[i].constant_subspace else None


def articulated_transmitted(IA, UDinv, U, S, armature=None):
    """``Ia = IA - U D^-1 U^T`` (..., 6, 6), the articulated inertia transmitted across a joint.

    It is symmetric (only the upper triangle is computed) and, with ``D = S^T IA S + diag(armature)``,
    ``Ia S = IA S - U D^-1 (D - diag(armature)) = U D^-1 diag(armature)``: zero on every dof
    without armature.  For such a column of ``S`` along a coordinate axis ``e_k`` (revolute and
    prismatic joints about frame axes, the spherical, planar and free joints), row and column
    ``k`` of ``Ia`` are exactly zero and are written as structural zeros (RBDA section 7.3), so
    transforming ``Ia`` costs less.  ``armature`` (nv_i,) or ``None`` (zero).  ``S``: the joint's
    constant motion subspace, or ``None`` for a joint whose ``S`` depends on ``q`` (no structural zeros).
    """
    Ia = mirror_upper(IA - UDinv @ np.swapaxes(U, -1, -2))
    if S is None:
        return Ia
    S = np.asarray(S)
    for k, col in enumerate(S.T):
        nz = np.flatnonzero(col)
        if len(nz) == 1 and (armature is None or armature[k] == 0):
            Ia[..., nz[0], :] = 0
            Ia[..., :, nz[0]] = 0
    return Ia


def aba_kernel(model, q, qd, tau, f_ext=None, gravity=None, check=None):
    """Unchecked ABA core; arrays of any backend with common leading axes.

    ``check(i, IA_i)``, if given, returns a pivot callback for joint ``i``'s
    ``D_i`` (see :func:`float_checker`); ``None`` when tracing.
    """
    g = model.gravity if gravity is None else gravity
    a_grav = np.concatenate([0 * g, g], -1)
    NB = model.nbodies
    Xup, S = joint_transforms(model, q)
    v, vJ = velocity_pass(model, Xup, S, qd)
    c = velocity_products(model, q, qd, v, vJ)          # None: a structural zero (a root's vJ x vJ)
    IA, pA = [None] * NB, [None] * NB
    for i in range(NB):
        IA[i] = rigid_structure(model.inertia[i])
        pA[i] = cross_force(v[i], mv(IA[i], v[i]))
        if f_ext is not None:
            pA[i] = pA[i] - f_ext[..., i, :]
    U, Dinv, u = [None] * NB, [None] * NB, [None] * NB
    for i in range(NB - 1, -1, -1):
        U[i] = IA[i] @ S[i]                                   # (..., 6, nv_i)
        arm = armature_of(model, i)
        St = np.swapaxes(S[i], -1, -2)
        D = St @ U[i] if arm is None else St @ U[i] + np.diag(arm)    # (..., nv_i, nv_i)
        Dinv[i] = spd_inverse(D, None if check is None else check(i, IA[i]))
        u[i] = tau[..., model.v_slice(i)] - mv(St, pA[i])
        p = model.parent[i]
        if p >= 0:
            UDinv = U[i] @ Dinv[i]
            Ia = articulated_transmitted(IA[i], UDinv, U[i], constant_subspace(model, i, S), arm)
            pa = pA[i] + mv(UDinv, u[i]) if c[i] is None else pA[i] + mv(Ia, c[i]) + mv(UDinv, u[i])
            IA[p] = IA[p] + transform_inertia(Xup[i], Ia)
            pA[p] = pA[p] + apply_force_transpose(Xup[i], pa)
    a, qdd = [None] * NB, [None] * NB
    for i in range(NB):
        p = model.parent[i]
        a1 = apply_motion(Xup[i], -a_grav if p < 0 else a[p])
        if c[i] is not None:
            a1 = a1 + c[i]
        qdd[i] = mv(Dinv[i], u[i] - mv(np.swapaxes(U[i], -1, -2), a1))
        a[i] = a1 + mv(S[i], qdd[i])
    if NB == 0:                                   # no moving body: nv = 0
        return np.zeros(q.shape[:-1] + (0,), dtype=np.result_type(q, qd, tau))
    shape = np.broadcast_shapes(*(x.shape[:-1] for x in qdd))
    out = np.zeros(shape + (model.nv,), dtype=np.result_type(*(x.dtype for x in qdd)))
    for i in range(NB):
        out[..., model.v_slice(i)] = qdd[i]
    return out


def own_inertia_scales(model):
    """Per body ``i``: ``max|I_i| max(1, max|S_i|)^2`` where the body's own inertia ``S_i^T I_i S_i``
    is positive definite (relative to ``PIVOT_RTOL``), else None.

    ``D_i = S_i^T I_i S_i + sum over children of S_i^T (X^T Ia X) S_i`` with every term positive
    semidefinite, so a body with inertia along each of its joint's dofs keeps ``D_i`` away from zero
    however large its subtree: its pivots are compared with its own inertia, not with the largest
    articulated inertia entry (the far end of a long chain makes that entry grow like ``L^3``
    while the pivot stays the size of one link).  Only a joint whose body has no inertia along its
    motion can have ``D_i`` vanish, and only through the children; those pivots are compared with
    ``max|IA_i|``.  From the model's constants (:attr:`~sparsedyn.model.topology.Topology.own_inertia`).
    """
    return [scale if scale > 0 and smallest > 1e3 * PIVOT_RTOL * scale and joint.constant_subspace else None
            for (scale, smallest), joint in zip(model.topology.own_inertia, model.joints)]


def float_checker(model):
    """``check(i, IA_i)`` for :func:`aba_kernel` on float input: pivots of ``D_i`` are compared
    with the body's own inertia where it has inertia along the joint's motion
    (:func:`own_inertia_scales`), else with ``max|IA_i| * max(1, max|S_i|)^2``."""
    own = own_inertia_scales(model)

    def check(i, IA):
        IA = np.asarray(IA, dtype=float)
        if own[i] is not None:
            scale = np.full(IA.shape[:-2], own[i])
        else:
            Smax = max(1.0, float(np.max(np.abs(model.joints[i].motion_subspace()), initial=0.0)))
            scale = np.max(np.abs(IA), axis=(-2, -1)) * Smax ** 2
        return pivot_checker(model, i, scale)
    return check


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional={"f_ext": ("nb", 6), "gravity": (3,)}, outputs={"a": ("nv",)})
def aba(model, q, v, tau, f_ext=None, gravity=None):
    """Joint accelerations ``qdd`` (..., nv) at state ``(q, v)`` under joint forces ``tau``.

    ``f_ext`` (..., NB, 6): external spatial forces ``[n; f]`` on each body, body
    frame; ``gravity`` (3,) overrides ``model.gravity`` (world frame).
    Raises :class:`SingularInertiaError` (a ``ValueError``) naming the joint when
    a subtree is massless, so that its ``D = S^T IA S`` is singular.
    """
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    qdd = aba_kernel(model, q, v, tau, f_ext, g, check=None if symbolic else float_checker(model))
    return np.broadcast_to(qdd, shape + (model.nv,)).copy()
