"""Analytical derivatives of inverse and forward dynamics (RNEA, ABA, gravity, static torques).

Carpentier and Mansard, *Analytical derivatives of rigid body dynamics algorithms*
(RSS 2018), in one frame per tree, the root body's (see
:mod:`sparsedyn.algorithms.kinematics_derivatives` for the frame, the forward pass
and the derivatives of the body velocities ``V_i`` and accelerations ``A_i``; ``A``
includes ``-g`` as in RNEA).  With the body forces in that frame
``f_i = I_i A_i + V_i x* I_i V_i - f_ext_i`` and the sums over the subtree of ``i``
``IC_i = sum I``, ``F_i = sum f``, ``BC_i = sum B``, where ``B_i`` is the linear map
``psi -> I_i (psi x V_i) + psi x* (I_i V_i) + V_i x* (I_i psi)`` (it reads only the
angular part of ``psi``)::

    B_i psi = [B11_i psi_w ; -2 l_i x psi_w],     l_i: linear momentum of body i,
    B11_i = w x I_rot - I_rot w x - (u x h x + h x u x) - (k_i x)

(``V_i = [w; u]``, ``I_i = [[I_rot, h x], [h x^T, m 1]]``, ``I_i V_i = [k_i; l_i]``),
differentiating ``tau_j = xi_j^T F_j`` gives, for a column ``c`` of joint ``k`` and a row
``r`` of joint ``j`` (``chi_k = A_l x xi_k - psi_k x V_l``, ``psi_k``, ``phi_k`` as in the
kinematics)::

    k ancestor of j or k = j:   dtau_r/dq_c = xi_r^T (IC_j chi_c + BC_j psi_c)
                                dtau_r/dv_c = xi_r^T (IC_j phi_c + BC_j xi_c)
    j a strict ancestor of k:   dtau_r/dq_c = xi_r^T (IC_k chi_c + BC_k psi_c + xi_c x* F_k)
                                dtau_r/dv_c = xi_r^T (IC_k phi_c + BC_k xi_c)
    otherwise 0;                dtau/da = H (CRBA) + diag(armature)

(the rigid transport of the subtree's forces ``xi_c x* F_j`` cancels against the change
of ``xi_r`` when ``j`` moves with ``k``).  The first kind is computed per row
(``IC_j xi_r``, ``BC_j^T xi_r``), the second per column, and every pair of dofs on one
branch costs two dot products.  ABA's derivatives follow from RNEA's at
``a = aba(q, v, tau)`` (same paper): ``dqdd/dx = -H^-1 dtau/dx`` for ``x = q, v`` and
``dqdd/dtau = H^-1``, with ``H^-1`` from :func:`sparsedyn.minv`.

``dq`` derivatives are on the tangent space: ``d/d(dq) f(integrate(q, dq))`` at ``dq = 0``.

Conversion to Pinocchio's layout: ``sparsedyn.interop.pinocchio.derivative_to_pinocchio``
(rows ``tau``-like, columns ``v``-like; Pinocchio orders a free joint linear-first).
Pinocchio's ``fext`` is per joint in the joint frame, which for sparsedyn models is the
body frame (``fext_to_pinocchio``).
"""

from __future__ import annotations

import functools
import weakref

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import kernel
from ..spatial import (RigidInertia, apply_force_transpose, cross3, cross_force, cross_motion, rigid_add,
                       rigid_apply, rigid_inertia, rigid_transform, skew)
from .aba import aba_kernel, float_checker
from .kinematics_derivatives import root_motion, stacked
from .minv import minv_kernel

__all__ = ["rnea_derivatives", "aba_derivatives", "generalized_gravity_derivatives", "static_torque_derivatives",
           "rnea_derivative_kernel", "branch_pairs"]

_NVxNV = ("nv", "nv")
_DYN_OPT = {"f_ext": ("nb", 6), "gravity": (3,)}
_PAIRS = weakref.WeakKeyDictionary()


def branch_pairs(model):
    """``(rd, cd, ra, ca)``: the dof pairs on one branch, as index arrays.  ``(rd, cd)``: the column's
    body is an ancestor of the row's or the same body; ``(ra, ca)``: the row's body is a strict
    ancestor of the column's.  Every other pair is a structural zero of the derivatives."""
    pairs = _PAIRS.get(model)
    if pairs is None:
        rd, cd, ra, ca = [], [], [], []
        for r in range(model.nv):
            j = int(model.dof_body[r])
            for k in model.ancestors(j):
                cols = range(int(model.v_start[k]), int(model.v_start[k]) + model.joints[k].nv)
                for c in cols:
                    rd.append(r), cd.append(c)
                    if k != j:
                        ra.append(c), ca.append(r)
        pairs = tuple(np.array(x, dtype=int) for x in (rd, cd, ra, ca))
        _PAIRS[model] = pairs
    return pairs


def _rows(RI: RigidInertia):
    """``RI`` with an axis for a set of vectors (..., n, 6)."""
    return RigidInertia(RI.m[..., None], RI.h[..., None, :], RI.I[..., None, :, :])


def _dot(x, y):
    return np.sum(x * y, -1)


def _B_apply(B11, l, psi):
    """``B psi`` (..., n, 6) for the subtree sum ``(B11, l)`` and twists ``psi`` (..., n, 6)."""
    w = psi[..., :3]
    return np.concatenate([(B11[..., None, :, :] @ w[..., None])[..., 0], -2 * cross3(l[..., None, :], w)], -1)


def _B_transpose(B11, l, xi):
    """Angular part (..., n, 3) of ``B^T xi`` (its linear part is zero)."""
    return (np.swapaxes(B11, -1, -2)[..., None, :, :] @ xi[..., :3, None])[..., 0] \
        + 2 * cross3(l[..., None, :], xi[..., 3:])


def _B11(RI: RigidInertia, V, k):
    """``B11`` (..., 3, 3) of one body (see the module docstring), root coordinates."""
    w, u, h = V[..., :3], V[..., 3:], RI.h
    C = skew(w) @ RI.I
    uh = u[..., :, None] * h[..., None, :]
    return C + np.swapaxes(C, -1, -2) - (uh + np.swapaxes(uh, -1, -2)) \
        + (2 * np.sum(u * h, -1, keepdims=True))[..., None] * np.eye(3) - skew(k)


def rnea_derivative_kernel(model, q, v, a, f_ext=None, gravity=None, want_da=True, velocity=True):
    """Unchecked ``(dtau_dq, dtau_dv, dtau_da)`` (..., nv, nv) (``dtau_da`` only with ``want_da``;
    ``velocity=False``: ``v`` and ``a`` are zero, only ``dtau_dq`` is returned)."""
    NB, nv = model.nbodies, model.nv
    g = model.gravity if gravity is None else gravity
    shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], a.shape[:-1], np.shape(g)[:-1],
                                () if f_ext is None else f_ext.shape[:-2])
    dtype = np.result_type(q, v, a, g, np.float64, *(() if f_ext is None else (f_ext,)))
    K = root_motion(model, q, v, a, -np.concatenate([0 * g, g], -1))
    IC, F, B11, L = [None] * NB, [None] * NB, [None] * NB, [None] * NB
    for i in range(NB):
        I = rigid_inertia(model.inertia[i])
        IC[i] = I if model.parent[i] < 0 else rigid_transform(K.Xr[i], I)
        h = rigid_apply(IC[i], K.V[i]) if velocity else None
        F[i] = rigid_apply(IC[i], K.A[i])
        if velocity:
            F[i] = F[i] + cross_force(K.V[i], h)
            B11[i], L[i] = _B11(IC[i], K.V[i], h[..., :3]), h[..., 3:]
        if f_ext is not None:
            F[i] = F[i] - (f_ext[..., i, :] if model.parent[i] < 0 else apply_force_transpose(K.Xr[i], f_ext[..., i, :]))
    for i in range(NB - 1, 0, -1):                 # subtree sums
        p = model.parent[i]
        if p >= 0:
            IC[p], F[p] = rigid_add(IC[p], IC[i]), F[p] + F[i]
            if velocity:
                B11[p], L[p] = B11[p] + B11[i], L[p] + L[i]
    xi, P, Qw, chi, psi, phi, Tq, Tv = ([] for _ in range(8))
    for k in range(NB):
        x, Vl, Al = K.xi[k], K.Vl[k][..., None, :], K.Al[k][..., None, :]
        ICk = _rows(IC[k])
        c = cross_motion(Al, x)                                          # chi = A_l x xi - psi x V_l
        if velocity:
            s = cross_motion(Vl, x)                                      # psi = V_l x xi
            c = c - cross_motion(s, Vl)
            f = cross_motion(Vl + K.V[k][..., None, :], x)               # phi = (V_l + V_k) x xi
            Tq.append(rigid_apply(ICk, c) + _B_apply(B11[k], L[k], s) + cross_force(x, F[k][..., None, :]))
            Tv.append(rigid_apply(ICk, f) + _B_apply(B11[k], L[k], x))
            Qw.append(_B_transpose(B11[k], L[k], x))
            psi.append(s[..., :3]), phi.append(f)
        else:
            Tq.append(rigid_apply(ICk, c) + cross_force(x, F[k][..., None, :]))
        xi.append(x), P.append(rigid_apply(ICk, x)), chi.append(c)
    xi, P, chi, Tq = (stacked(t, shape) for t in (xi, P, chi, Tq))
    rd, cd, ra, ca = branch_pairs(model)

    def assemble(lower, upper):
        out = np.zeros(shape + (nv, nv), dtype=dtype)
        out[..., rd, cd] = lower
        out[..., ra, ca] = upper
        return out

    low_q = _dot(P[..., rd, :], chi[..., cd, :])
    if not velocity:
        return assemble(low_q, _dot(xi[..., ra, :], Tq[..., ca, :]))
    Qw, psi, phi, Tv = (stacked(t, shape) for t in (Qw, psi, phi, Tv))
    dq = assemble(low_q + _dot(Qw[..., rd, :], psi[..., cd, :]), _dot(xi[..., ra, :], Tq[..., ca, :]))
    dv = assemble(_dot(P[..., rd, :], phi[..., cd, :]) + _dot(Qw[..., rd, :], xi[..., cd, :3]),
                  _dot(xi[..., ra, :], Tv[..., ca, :]))
    if not want_da:
        return dq, dv
    low_a = _dot(P[..., rd, :], xi[..., cd, :])
    da = assemble(low_a, low_a[..., _mirror(model)])
    if np.any(model.armature):
        da[..., np.arange(nv), np.arange(nv)] = da[..., np.arange(nv), np.arange(nv)] + model.armature
    return dq, dv, da


@functools.lru_cache(maxsize=None)
def _mirror_of(rd, cd, ra, ca):
    where = {(r, c): n for n, (r, c) in enumerate(zip(rd, cd))}
    return np.array([where[(c, r)] for r, c in zip(ra, ca)], dtype=int)


def _mirror(model):
    """Index into the ``(rd, cd)`` pairs of the transposed ``(ra, ca)`` pairs."""
    return _mirror_of(*(tuple(int(i) for i in x) for x in branch_pairs(model)))


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, optional=_DYN_OPT,
        outputs={"dtau_dq": _NVxNV, "dtau_dv": _NVxNV, "dtau_da": _NVxNV})
def rnea_derivatives(model, q, v, a, f_ext=None, gravity=None):
    """Partial derivatives of :func:`~sparsedyn.rnea`: ``(dtau_dq, dtau_dv, dtau_da)``, each (..., nv, nv).

    ``dtau_dq`` is on the tangent space (see the module docstring); ``dtau_da = H(q)``
    (with the armature on its diagonal).  ``f_ext`` (..., NB, 6), body frame, and
    ``gravity`` are held constant.  Pinocchio's ``computeRNEADerivatives``.
    """
    q, v, a, f_ext, g, shape, _ = _checks.dynamics(model, q, v, a, f_ext, gravity, "a", "nv joint accelerations")
    return rnea_derivative_kernel(model, q, v, a, f_ext, g)


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional=_DYN_OPT,
        outputs={"dqdd_dq": _NVxNV, "dqdd_dv": _NVxNV, "dqdd_dtau": _NVxNV})
def aba_derivatives(model, q, v, tau, f_ext=None, gravity=None):
    """Partial derivatives of :func:`~sparsedyn.aba`: ``(dqdd_dq, dqdd_dv, dqdd_dtau)``, each (..., nv, nv).

    ``dqdd/dx = -H^-1 dtau/dx`` (RNEA's derivatives at ``qdd = aba(q, v, tau)``) for ``x = q``
    (tangent space) and ``v``; ``dqdd_dtau = H(q)^-1``.  Pinocchio's ``computeABADerivatives``.
    """
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    check = None if symbolic else float_checker(model)
    qdd = aba_kernel(model, q, v, tau, f_ext, g, check=check)
    Minv = minv_kernel(model, q, check=check)
    dq, dv = rnea_derivative_kernel(model, q, v, qdd, f_ext, g, want_da=False)
    Minv = np.broadcast_to(Minv, shape + Minv.shape[-2:])
    return -(Minv @ dq), -(Minv @ dv), Minv.copy()


def _static(model, q, f_ext, gravity):
    z = bk.zeros(q.shape[:-1] + (model.nv,), like=q)
    return rnea_derivative_kernel(model, q, z, z, f_ext, gravity, velocity=False)


@kernel(inputs={"q": ("nq",)}, optional={"gravity": (3,)}, outputs={"dg_dq": _NVxNV})
def generalized_gravity_derivatives(model, q, gravity=None):
    """``dg/dq`` (..., nv, nv) of :func:`~sparsedyn.generalized_gravity`, on the tangent space
    (Pinocchio's ``computeGeneralizedGravityDerivatives``)."""
    q = _checks.configuration(model, q)
    return _static(model, q, None, _checks.gravity(model, gravity))


@kernel(inputs={"q": ("nq",), "f_ext": ("nb", 6)}, optional={"gravity": (3,)}, outputs={"dtau_dq": _NVxNV})
def static_torque_derivatives(model, q, f_ext, gravity=None):
    """``d/dq`` (..., nv, nv) of the static torque ``tau(q) = rnea(q, 0, 0, f_ext)`` (the joint forces
    that hold the model still against gravity and the external forces ``f_ext`` (..., NB, 6), body
    frame, held constant), on the tangent space (Pinocchio's ``computeStaticTorqueDerivatives``)."""
    q = _checks.configuration(model, q)
    f_ext = _checks.body_forces(model, f_ext)
    return _static(model, q, f_ext, _checks.gravity(model, gravity))
