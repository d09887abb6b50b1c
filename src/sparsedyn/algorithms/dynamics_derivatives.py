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
branch costs two dot products.  For a one-dof joint ``V_k = V_l + xi_k v_k``, so
``phi_k = 2 psi_k`` (``xi x xi = 0``).

ABA's derivatives follow from RNEA's at ``qdd = aba(q, v, tau)`` (same paper):
``dqdd/dx = -H^-1 dtau/dx`` for ``x = q, v`` and ``dqdd/dtau = H^-1``, with ``H = dtau/da``
factorized as ``L^T D L`` (see :func:`aba_derivatives`).  A free root joint (``S`` (6, 6)
invertible, ``psi = 0``) needs no solve for its columns: over its tree
``dtau_dq[:, c] = P chi_c``, ``dtau_dv[:, c] = P phi_c + Qw xi_c_w`` and
``H[:, root] = P S + diag(armature)``, so ``H^-1 P = E S^-1 - H^-1[:, root] diag(armature) S^-1``
(``E``: the unit columns of the root's dofs): moving the whole tree only turns gravity.

``dq`` derivatives are on the tangent space: ``d/d(dq) f(integrate(q, dq))`` at ``dq = 0``.

On float arrays (the NumPy path, where a call costs what its number of NumPy operations costs)
the same quantities are computed in fewer, larger operations: per-body and per-dof matrices
gathered from the parameters by per-model index tables (:class:`_Table`) and applied by one
batched product each, the pair dot products as masked dense products (:func:`_assemble_all`).
The sums are associated differently (equal to rounding); traced, the written-out form runs, so the
compiled program is unchanged.

Conversion to Pinocchio's layout: ``sparsedyn.interop.pinocchio.derivative_to_pinocchio``
(rows ``tau``-like, columns ``v``-like; Pinocchio orders a free joint linear-first).
Pinocchio's ``fext`` is per joint in the joint frame, which for sparsedyn models is the
body frame (``fext_to_pinocchio``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import kernel
from ..spatial import (RigidInertia, apply_force_transpose, cross3, cross_force, cross_motion, cross_motion_products,
                       inner, rigid_apply, rigid_inertia_matrix, rigid_transform, skew)
from .aba import PIVOT_RTOL, aba, own_inertia_scales
from .derivatives import derivatives, varying_subspaces
from .rnea import rnea
from .fd import ltdl_checker
from .kinematics_derivatives import ModelCache, common_shape, levels, root_motion
from .ltdl import dof_lambda, ltdl_inverse_factor, ltdl_kernel

__all__ = ["rnea_derivatives", "aba_derivatives", "generalized_gravity_derivatives", "static_torque_derivatives",
           "rnea_derivative_kernel", "branch_pairs", "subtree_sums", "joint_terms", "dof_rows", "momentum_columns"]

_NVxNV = ("nv", "nv")
_DYN_OPT = {"f_ext": ("nb", 6), "gravity": (3,)}
_PAIRS = ModelCache()


def branch_pairs(model):
    """``(rd, cd, ra, ca, mirror)``: the dof pairs on one branch, as index arrays.  ``(rd, cd)``: the
    column's body is an ancestor of the row's or the same body; ``(ra, ca)``: the row's body is a strict
    ancestor of the column's (``mirror``: the index of ``(ca, ra)`` among the first kind).  Every other
    pair is a structural zero of the derivatives."""
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
        where = {(r, c): n for n, (r, c) in enumerate(zip(rd, cd))}
        mirror = [where[(c, r)] for r, c in zip(ra, ca)]
        pairs = tuple(np.array(x, dtype=int) for x in (rd, cd, ra, ca, mirror))
        _PAIRS[model] = pairs
    return pairs


def _dot(x, y):
    return inner(x, y)


def _B_apply(B11, l2, psi):
    """``B psi`` (..., n, 6) for subtree sums ``B11`` (..., n, 3, 3) and ``l2 = 2 l`` (..., n, 3)
    (twice the linear momentum), one per twist ``psi`` (..., n, 6)."""
    w = psi[..., :3]
    return np.concatenate([(B11 @ w[..., None])[..., 0], -cross3(l2, w)], -1)


def _B_transpose(B11, l2, xi):
    """Angular part (..., n, 3) of ``B^T xi`` (its linear part is zero); ``l2 = 2 l``."""
    return (np.swapaxes(B11, -1, -2) @ xi[..., :3, None])[..., 0] + cross3(l2, xi[..., 3:])


def _B11(RI: RigidInertia, V, k):
    """``B11`` (..., 3, 3) of one body (see the module docstring), root coordinates."""
    w, u, h = V[..., :3], V[..., 3:], RI.h
    C = skew(w) @ RI.I
    uh = u[..., :, None] * h[..., None, :]
    return C + C.swapaxes(-1, -2) - (uh + uh.swapaxes(-1, -2)) \
        + (2 * inner(u, h))[..., None, None] * _EYE3 - skew(k)


_EYE3 = np.eye(3)


def _few_states(x, nb):
    """Whether ``x`` (..., nb, 6) holds at most ``_GATHER_MAX_STATES`` states: the gathered per-body
    and per-dof matrices (:func:`_body_terms`, :func:`_products`, some 150 kB per state on
    talos_reduced) pay off where a state costs its number of NumPy calls; larger batches take the
    written-out form, whose arrays are a few times smaller."""
    return x.size <= _GATHER_MAX_STATES * 6 * max(nb, 1)


_GATHER_MAX_STATES = 16


def _body_terms(model, Xr, V, A, EErx=None):
    """``(hI, f, B11, M)`` per body on float arrays (see :func:`subtree_sums`, before the sums):
    ``hI = [h, I]`` (..., NB, 12) of the inertia in root coordinates, read off ``IC = X^T I X``
    (6x6 products, ``X`` gathered from ``E`` and ``E rx``), ``[IC A, IC V]`` (one product), then
    ``[B11; V x* M] = Q(V) [h, I, M]`` with ``Q`` gathered from ``[w, u, 1]`` (:func:`_body_tables`):
    the products of the generic form in a few NumPy calls, summed in another order (equal to rounding)."""
    E, r = Xr
    nb = V.shape[-2]
    lead = common_shape(E.shape[:-3], r.shape[:-2], V.shape[:-2], A.shape[:-2])
    if not (V.shape[:-2] == A.shape[:-2] == E.shape[:-3] == r.shape[:-2]):
        V, A, r = (np.broadcast_to(x, lead + x.shape[-2:]) for x in (V, A, r))
        E = np.broadcast_to(E, lead + E.shape[-3:])
    (ix, cx), (ih, iq, cq), one = _body_tables(nb)
    src = EErx if EErx is not None and EErx.shape[:-2] == lead else \
        np.concatenate([E.reshape(lead + (nb, 9)), (E @ skew(r)).reshape(lead + (nb, 9))], -1)
    X = src.reshape(lead + (-1,)).take(ix, -1, mode="clip")               # in range: no checked gather
    X *= cx
    X = X.reshape(lead + (nb, 6, 6))                                      # [[E, 0], [-E rx, E]]
    IC = X.swapaxes(-1, -2) @ (_constants(model).inertia6 @ X)
    hI = IC.reshape(lead + (-1,)).take(ih, -1, mode="clip").reshape(lead + (nb, 12))
    IAM = np.concatenate([A, V], -1).reshape(lead + (nb, 2, 6)) @ IC.swapaxes(-1, -2)   # rows (IC A)^T, (IC V)^T
    M = IAM[..., 1, :]
    src = np.concatenate([V, one if not lead else np.ones(lead + (nb, 1))], -1)
    Q = src.reshape(lead + (-1,)).take(iq, -1, mode="clip")
    Q *= cq
    out = (Q.reshape(lead + (nb, 15, 18)) @ np.concatenate([hI, M], -1)[..., None])[..., 0]
    return hI, IAM[..., 0, :] + out[..., 9:], out[..., :9], M


@functools.lru_cache(maxsize=64)
def _body_tables(nb):
    """Gather tables of :func:`_body_terms` for ``nb`` bodies, and a column of ones (nb, 1): ``X``
    (6, 6) from ``[E, E rx]`` (18 per body); ``[h, I]`` from ``IC`` (36 per body); ``Q`` (15, 18)
    from ``[w, u, 1]`` (7 per body), with ``[B11; V x* M] = Q [h, I, k, l]`` (``M = [k; l]``,
    ``V x* M = [w x k + u x l; w x l]``)::

        B11[a, b] = (wx I)[a, b] + (wx I)[b, a] - u_a h_b - h_a u_b + 2 d_ab (u.h) - (kx)[a, b]"""
    x = _Table(6, 6)
    for i in range(3):
        for j in range(3):
            x.put(i, j, 3 * i + j)
            x.put(3 + i, 3 + j, 3 * i + j)
            x.put(3 + i, j, 9 + 3 * i + j, -1.0)
    hI = np.array([2 * 6 + 4, 0 * 6 + 5, 1 * 6 + 3] + [6 * i + j for i in range(3) for j in range(3)])
    q = _Table(15, 18)
    sk = {(0, 1): (2, -1), (0, 2): (1, 1), (1, 0): (2, 1), (1, 2): (0, -1), (2, 0): (1, -1), (2, 1): (0, 1)}
    for a in range(3):
        for b in range(3):
            r = 3 * a + b
            for c in range(3):
                if (a, c) in sk:                     # (wx)[a, c] I[c, b]
                    e, sg = sk[(a, c)]
                    q.put(r, 3 + 3 * c + b, e, sg)
                if (b, c) in sk:                     # (wx)[b, c] I[c, a]
                    e, sg = sk[(b, c)]
                    q.put(r, 3 + 3 * c + a, e, sg)
                if a != b and c in (a, b):           # on h_c: -u_a d_bc - d_ac u_b + 2 d_ab u_c
                    q.put(r, c, 3 + (a if c == b else b), -1.0)
                elif a == b and c != a:
                    q.put(r, c, 3 + c, 2.0)
            if (a, b) in sk:                         # -(kx)[a, b]
                e, sg = sk[(a, b)]
                q.put(r, 12 + e, 6, -sg)
    # V x* M: rows 9-11 w x k + u x l, rows 12-14 w x l; (w x k)_a = (-kx w)_a: -(kx)[a, c] w_c
    for a in range(3):
        for c in range(3):
            if (a, c) in sk:
                e, sg = sk[(a, c)]                   # (kx)[a, c] = sg k_e: coefficient of k_e is -sg w_c
                q.put(9 + a, 12 + e, c, -sg)
                q.put(9 + a, 15 + e, 3 + c, -sg)
                q.put(12 + a, 15 + e, c, -sg)
    one = np.ones((nb, 1))
    one.flags.writeable = False
    rows = np.arange(nb)
    ih = (rows[:, None] * 36 + hI).reshape(-1)
    ih.flags.writeable = False
    return x.flat(rows, 18), (ih,) + q.flat(rows, 7), one


def subtree_sums(model, K, f_ext=None, velocity=True):
    """``(IC, F, B11, M)``, stacked by body: the sums over each body's subtree, in root coordinates,
    of the inertias (a :class:`~sparsedyn.spatial.RigidInertia` of (..., NB) arrays), the forces
    ``f_i = I_i A_i + V_i x* I_i V_i - f_ext_i`` (..., NB, 6), the ``B11`` blocks (..., NB, 3, 3)
    and the momenta ``I_i V_i`` (..., NB, 6) (``B11``, ``M`` ``None`` without ``velocity``).
    ``K``: :func:`~sparsedyn.algorithms.kinematics_derivatives.root_motion` with accelerations."""
    lv = levels(model)
    NB = model.nbodies
    if velocity and not any(bk.is_symbolic(x) for x in (K.A, K.V, K.Xr.E, K.Xr.r)) and _few_states(K.A, NB):
        hI, F, B11, M = _body_terms(model, K.Xr, K.V, K.A, getattr(K, "EErx", None))
        if f_ext is not None:
            F = F - apply_force_transpose(K.Xr, f_ext)
        shape = F.shape[:-2]
        parts = [_constants(model).masses, hI, F, B11, M]
        X = np.concatenate([x if x.shape[:-2] == shape else np.broadcast_to(x, shape + x.shape[-2:]) for x in parts], -1)
        p = _subtree_sum(lv, X)                      # the parameters of _products, [m, h, I, F, B11, M]
        m, X, cores = p[..., 0], p[..., 1:], _SUM_CORES
    else:
        p = None
        IC = rigid_transform(K.Xr, lv.inertia)
        F = rigid_apply(IC, K.A)
        B11 = M = None
        if velocity:
            M = rigid_apply(IC, K.V)
            F = F + cross_force(K.V, M)
            B11 = _B11(IC, K.V, M[..., :3])
        if f_ext is not None:
            F = F - apply_force_transpose(K.Xr, f_ext)
        shape = F.shape[:-2]
        parts = [IC.h, IC.I, F] + ([B11, M] if velocity else [])
        cores = _SUM_CORES[:len(parts)]
        X = np.concatenate([_flat(x, shape + (NB,), c) for x, c in zip(parts, cores)], -1)   # one array: one sum
        m, X = _subtree_sum(lv, np.array(IC.m)), _subtree_sum(lv, X)
    out, k = [], 0
    for c in cores:
        n = _SIZE[c]
        out.append(X[..., k:k + n].reshape(shape + (NB,) + c))
        k += n
    IC = RigidInertia(m, out[0], out[1])
    F = out[2]
    if velocity:
        B11, M = out[3], out[4]
    if p is None:
        return IC, F, B11, M
    sums = _Sums((IC, F, B11, M))
    sums.p = p
    return sums


class _Sums(tuple):
    """:func:`subtree_sums`' ``(IC, F, B11, M)`` on float arrays, with ``p`` (..., NB, 34): the same
    sums side by side, ``[m, h, I, F, B11, M]``, that :func:`_products` gathers from (views of it)."""


def _subtree_sum(lv, X):
    """``X`` (..., NB, k) (or (NB,)) summed over each body's subtree.  Traced: level by level, the
    children into their parents (the recursion's ``NB - 1`` additions per entry).  On float arrays:
    one product with the 0/1 matrix ``below`` (one NumPy call instead of one per level; traced,
    that product would add each body into every ancestor separately)."""
    if not bk.is_symbolic(X):
        return lv.below @ X
    for L, P in reversed(lv.levels):                    # deepest first
        np.add.at(X, (Ellipsis, P) + (slice(None),) * (X.ndim > 1), X[..., L, :] if X.ndim > 1 else X[L])
    return X


_SUM_CORES = [(3,), (3, 3), (6,), (3, 3), (6,)]
_SIZE = {(3,): 3, (3, 3): 9, (6,): 6}


def _flat(x, lead, core):
    """``x`` (..., *core) broadcast to ``lead + core`` and flattened to ``lead + (size,)``."""
    want = lead + core
    return (x if x.shape == want else np.broadcast_to(x, want)).reshape(lead + (_SIZE[core],))


def dof_rows(model, RI: RigidInertia):
    """A stacked-by-body inertia (..., NB) repeated for each dof of the body (..., nv)."""
    db = levels(model).dof_body
    return RigidInertia(RI.m.take(db, -1), RI.h.take(db, -2), RI.I.take(db, -3))


def joint_terms(model, K, sums, shape, velocity=True):
    """Per dof (..., nv, 6): ``xi``; ``P = IC_k xi``; ``chi``; the columns
    ``Tq = IC_k chi + BC_k psi + xi x* F_k`` and, with ``velocity``, ``Tv = IC_k phi + BC_k xi``,
    ``psi``, ``phi`` and the rows ``Qw`` (angular part of ``BC_k^T xi``, (..., nv, 3)); ``k`` the
    dof's body (see the module docstring).  A dof of a one-dof joint has ``V_k = V_l + xi v``,
    so ``phi = 2 psi`` (``xi x xi = 0``)."""
    IC, F, B11, M = sums
    if velocity and not (bk.is_symbolic(K.xi) or bk.is_symbolic(F) or bk.is_symbolic(K.Al)) \
            and _few_states(K.Al, model.nbodies):
        return _float_terms(model, K, sums, shape)
    db = levels(model).dof_body
    x, Vl, Al = K.xi, K.Vl.take(db, -2), K.Al.take(db, -2)
    ICd = dof_rows(model, IC)
    Tq = cross_force(x, F.take(db, -2))
    out = {}
    if velocity:           # the same products stacked on a new first axis: one NumPy call for each kind
        B, L = B11.take(db, -3), (2 * M[..., 3:]).take(db, -2)          # L = 2 l: twice the momentum
        chi, psi = cross_motion(np.stack(_stack_broadcast(Al, Vl)), x)   # A_l x xi, psi = V_l x xi
        chi = chi - cross_motion(psi, Vl)                                # chi = A_l x xi - psi x V_l
        phi = 2 * psi                                  # phi = (V_l + V_k) x xi: 2 psi for one dof
        multi = _multi_dof(model)
        if len(multi):
            phi[..., multi, :] = cross_motion(Vl[..., multi, :] + K.V[..., db[multi], :], x[..., multi, :])
        Bpsi, Bx = _B_apply(B, L, np.stack(_stack_broadcast(psi, x)))
        Iphi, P, Ichi = rigid_apply(ICd, np.stack(_stack_broadcast(phi, x, chi)))
        out.update(Tv=Iphi + Bx, Qw=_B_transpose(B, L, x), psi=psi, phi=phi, xi=x, P=P, chi=chi,
                   Tq=Ichi + (Tq + Bpsi))
    else:
        chi = cross_motion(Al, x)
        out.update(xi=x, P=rigid_apply(ICd, x), chi=chi, Tq=rigid_apply(ICd, chi) + Tq)
    return {n: t if t.shape[:-2] == shape else np.broadcast_to(t, shape + t.shape[-2:]) for n, t in out.items()}


def _float_terms(model, K, sums, shape):
    """:func:`joint_terms` with ``velocity`` on float arrays, in fewer NumPy calls: ``A_l``, ``V_l``
    and ``V_l + V_m`` (``m``: the dof's body for a joint with several dofs, its parent else, so that
    ``phi = (V_l + V_m) x xi`` is ``2 psi`` for one dof) gathered per dof by one ``take`` and crossed
    with ``xi`` by one :func:`~sparsedyn.spatial.cross_motion_products`; the inertia and ``B`` products by
    :func:`_products`."""
    lead = K.Al.shape[:-2]
    x = K.xi if K.xi.shape[:-2] == lead else np.broadcast_to(K.xi, lead + K.xi.shape[-2:])
    body = np.concatenate([K.Al, K.Vl if K.Vl.shape[:-2] == lead else np.broadcast_to(K.Vl, K.Al.shape),
                           K.V if K.V.shape[:-2] == lead else np.broadcast_to(K.V, K.Al.shape)], -2)
    g = body.take(_gather_index(model), -2).reshape(lead + (3,) + x.shape[-2:])     # [A_l, V_l, V_m]
    g[..., 2, :, :] += g[..., 1, :, :]
    c = cross_motion_products(g, x[..., None, :, :])
    chi, psi, phi = c[..., 0, :, :], c[..., 1, :, :], c[..., 2, :, :]
    chi = chi - cross_motion_products(psi, g[..., 1, :, :])          # chi = A_l x xi - psi x V_l
    out = _products(model, sums, x, chi, psi, phi)
    out.update(psi=psi, phi=phi, xi=x, chi=chi)
    if lead == shape and out["_p"].shape[:-2] == shape:
        return out
    return {n: t if t.shape[:t.ndim - c] == shape else np.broadcast_to(t, shape + t.shape[t.ndim - c:])
            for n, t, c in ((n, t, 3 if n == "_out" else 2) for n, t in out.items())}


_GATHER = ModelCache()


def _gather_index(model):
    """Rows of ``[A_l; V_l; V]`` (..., 3 NB, 6) per dof for :func:`_float_terms` (cached per model):
    ``A_l``, ``V_l`` of the dof's body, then ``V`` of the body for a multi-dof joint and ``V_l`` else."""
    index = _GATHER.get(model)
    if index is None:
        NB, db = model.nbodies, levels(model).dof_body
        m = np.where(np.isin(np.arange(model.nv), _multi_dof(model)), 2 * NB + db, NB + db)
        index = _GATHER[model] = np.concatenate([db, NB + db, m])
        index.flags.writeable = False
    return index


def _products(model, sums, xi, chi, psi, phi):
    """``P``, ``Tq``, ``Tv`` (..., nv, 6) and ``Qw`` (..., nv, 3) of :func:`joint_terms` on float arrays,
    by one product per dof of small matrices gathered from ``z = [chi, psi_w, phi, xi, 0]`` and
    from the dof's body's sums (:func:`_product_table`)::

        [xi,  0,      0 ]   [IC^T  Qrow^T]   [P^T   Qw^T]
        [chi, psi_w,  xi] @ [Bw^T  0     ] = [Tq^T  *   ]        (3, 15) @ (15, 9)
        [phi, xi_w,   0 ]   [Xf^T  0     ]   [Tv^T  *   ]

    (``Qrow = [B11^T, 2 lx]``; the products of the generic form, summed in another order: equal to
    rounding; a few NumPy calls instead of some forty).  Also returned: ``_z``, ``z`` (..., nv, 22),
    ``_out`` the product (..., nv, 3, 9) for :func:`_branch_products`, and the parameters ``_p``
    (..., NB, 34)."""
    IC, F, B11, M = sums
    p = getattr(sums, "p", None)
    if p is None:
        lead = common_shape(IC.h.shape[:-2], F.shape[:-2], B11.shape[:-3], M.shape[:-2])
        parts = [IC.m[..., None], IC.h, IC.I.reshape(IC.I.shape[:-2] + (9,)), F, B11.reshape(B11.shape[:-2] + (9,)), M]
        p = np.concatenate([x if x.shape[:-2] == lead else np.broadcast_to(x, lead + x.shape[-2:]) for x in parts], -1)
    lead, nb = p.shape[:-2], p.shape[-2]
    index, coef = _product_table(model)
    G = p.reshape(lead + (nb * _NPAR,)).take(index, -1, mode="clip")      # in range: no checked gather
    G *= coef
    zs = (chi, psi[..., :3], phi, xi)
    zl = common_shape(*(x.shape[:-2] for x in zs))
    zs = [x if x.shape[:-2] == zl else np.broadcast_to(x, zl + x.shape[-2:]) for x in zs]
    z = np.concatenate(zs + [np.zeros(zl + xi.shape[-2:-1] + (1,))], -1)       # and a zero
    out = z.take(_ZL, -1).reshape(z.shape[:-1] + (3, 15)) @ G.reshape(lead + (-1, 15, 9))
    return {"P": out[..., 0, :6], "Qw": out[..., 0, 6:], "Tq": out[..., 1, :6], "Tv": out[..., 2, :6],
            "_z": z, "_out": out, "_p": p}


# the left factor (3, 15) of _products from z = [chi, psi_w, phi, xi, 0] (22 per dof), row-major
_ZL = np.array([list(range(15, 21)) + [21] * 9, list(range(0, 9)) + list(range(15, 21)),
                list(range(9, 15)) + [15, 16, 17] + [21] * 6]).reshape(-1)
_ZL.flags.writeable = False
# the per-body parameters of _products: m, h (3), I (9), F = [n; f], B11 (9), M = [k; l]
_NPAR = 34
_M, _H, _I, _N, _F, _B, _L = 0, 1, 4, 13, 16, 19, 31
_TABLES = ModelCache()


def _product_table(model):
    """``(index, coef)``: the right factor ``p.flat[index[d]] * coef[d]`` (15, 9) of :func:`_products`
    per dof ``d`` (flat, (nv 135,)) from the per-body parameters ``p`` (NB, 34) (``coef`` in 0, +-1,
    +-2), cached per model: ``[[IC^T, Qrow^T], [Bw^T, 0], [Xf^T, 0]]`` with (see :func:`joint_terms`)::

        P  = IC xi,   Tq = Xf xi + IC chi + Bw psi_w,   Tv = Bw xi_w + IC phi,   Qw = [B11^T, 2 lx] xi

    ``IC = [[I, hx], [hx^T, m]]``, ``Xf = [[-nx, -fx], [-fx, 0]]`` (``xi x* F``), ``Bw = [B11; -2 lx]``
    (written as the untransposed blocks, then transposed)."""
    table = _TABLES.get(model)
    if table is None:
        g = _Table(9, 15)                   # [[IC, Bw, Xf], [Qrow, 0, 0]], the transpose of the factor
        g.inertia(0, 0)
        g.bw(0, 6)
        g.skew(0, 9, _N, -1.0), g.skew(0, 12, _F, -1.0), g.skew(3, 9, _F, -1.0)
        for i in range(3):
            for j in range(3):
                g.put(6 + i, j, _B + 3 * j + i)
        g.skew(6, 3, _L, 2.0)
        at, c = g.at.T.reshape(-1), g.c.T.reshape(-1)
        db = levels(model).dof_body
        index = (db[:, None] * _NPAR + at).reshape(-1)
        coef = np.broadcast_to(c, (len(db), len(c))).reshape(-1)
        index.flags.writeable = coef.flags.writeable = False
        table = _TABLES[model] = (index, coef)
    return table


class _Table:
    """A gather table ``(at, c)``: the matrix ``M[r, k] = p[at[r, k]] * c[r, k]`` of a parameter
    vector ``p`` (entries ``c = 0`` are structural zeros), filled block by block."""

    def __init__(self, rows, cols):
        self.at, self.c = np.zeros((rows, cols), int), np.zeros((rows, cols))

    def put(self, r, k, i, sign=1.0):
        self.at[r, k] = i
        self.c[r, k] += sign

    def skew(self, r, k, o, sign=1.0):      # the block (p[o:o+3]) x at (r, k): [[0, -z, y], [z, 0, -x], [-y, x, 0]]
        for i, j, e, s in ((0, 1, 2, -1), (0, 2, 1, 1), (1, 0, 2, 1), (1, 2, 0, -1), (2, 0, 1, -1), (2, 1, 0, 1)):
            self.put(r + i, k + j, o + e, s * sign)

    def inertia(self, r, k):                # [[I, hx], [hx^T, m 1]] from p = [m, h, I, ...]
        for i in range(3):
            for j in range(3):
                self.put(r + i, k + j, _I + 3 * i + j)
            self.put(r + 3 + i, k + 3 + i, _M)
        self.skew(r, k + 3, _H)
        self.skew(r + 3, k, _H, -1.0)       # hx^T = -hx

    def bw(self, r, k):                     # [B11; -2 lx]
        for i in range(3):
            for j in range(3):
                self.put(r + i, k + j, _B + 3 * i + j)
        self.skew(r + 3, k, _L, -2.0)

    def flat(self, rows, width):
        """``(index, coef)`` flat over the stacked parameter vectors (n, width) for the rows ``rows``
        (index array): one table per row, side by side (read-only)."""
        index = (np.asarray(rows)[:, None, None] * width + self.at).reshape(-1)
        coef = np.broadcast_to(self.c, (len(rows),) + self.c.shape).reshape(-1)
        index.flags.writeable = coef.flags.writeable = False
        return index, coef


def momentum_columns(model, T, sums):
    """``xi x* M_k + IC_k psi`` (..., nv, 6) per dof (``k`` the dof's body; ``M``, ``IC`` the subtree
    momenta and inertias of ``sums``, ``xi``, ``psi`` of :func:`joint_terms`' ``T``): the change of
    the subtree momentum along the dof (:mod:`~sparsedyn.algorithms.centroidal_derivatives`).  On
    float arrays one gathered (6, 12) matrix per dof times ``[xi, psi]`` (equal to rounding)."""
    IC, _, _, M = sums
    if "_p" not in T:
        db = levels(model).dof_body
        return cross_force(T["xi"], M.take(db, -2)) + rigid_apply(dof_rows(model, IC), T["psi"])
    p = T["_p"]
    index, coef = _momentum_table(model)
    G = p.reshape(p.shape[:-2] + (-1,)).take(index, -1, mode="clip")
    G *= coef
    x = np.concatenate([T["xi"], T["psi"]], -1)
    return (G.reshape(x.shape[:-2] + (-1, 6, 12)) @ x[..., None])[..., 0]


_MOMENTUM = ModelCache()


def _momentum_table(model):
    """Gather table of :func:`momentum_columns` from :func:`_products`' parameters (34 per body):
    ``[Xm, IC]`` (6, 12) per dof, ``Xm = [[-kx, -lx], [-lx, 0]]`` (``xi x* M``, ``M = [k; l]``)."""
    table = _MOMENTUM.get(model)
    if table is None:
        t = _Table(6, 12)
        t.skew(0, 0, _L - 3, -1.0), t.skew(0, 3, _L, -1.0), t.skew(3, 0, _L, -1.0)
        t.inertia(0, 6)
        table = _MOMENTUM[model] = t.flat(levels(model).dof_body, _NPAR)
    return table


def _stack_broadcast(*xs):
    """``xs`` broadcast to one shape (a tuple of arrays, to stack or unpack)."""
    return xs if all(x.shape == xs[0].shape for x in xs) else np.broadcast_arrays(*xs)


_MULTI = ModelCache()


def _multi_dof(model):
    """The dofs (index array) of the joints with more than one dof (a constant of the frozen model,
    cached per model as :func:`branch_pairs` is: ``joint_terms`` asks for it on every call)."""
    multi = _MULTI.get(model)
    if multi is None:
        multi = np.array([d for i, j in enumerate(model.joints) if j.nv > 1
                          for d in range(int(model.v_start[i]), int(model.v_start[i]) + j.nv)], dtype=int)
        multi.flags.writeable = False
        _MULTI[model] = multi
    return multi


def _derivative_terms(model, q, v, a, f_ext, gravity, velocity):
    """``(T, shape, dtype)``: :func:`joint_terms` at state ``(q, v, a)``, with its batch shape and dtype."""
    g = model.gravity if gravity is None else gravity
    shape = common_shape(q.shape[:-1], v.shape[:-1], a.shape[:-1], np.shape(g)[:-1],
                         *(() if f_ext is None else (f_ext.shape[:-2],)))
    dtype = np.result_type(q, v, a, g, np.float64, *(() if f_ext is None else (f_ext,)))
    K = root_motion(model, q, v, a, _world_acceleration(model, g))
    return joint_terms(model, K, subtree_sums(model, K, f_ext, velocity), shape, velocity), shape, dtype


def _world_acceleration(model, g):
    """``-[0; g]`` (..., 6): the acceleration of the world seen by the roots (RNEA's gravity);
    the model's own gravity on float arrays from the per-model cache."""
    if g is model.gravity and not bk.is_symbolic(g):
        c = _constants(model)
        if c.gravity is g:
            return c.world_acceleration
    return -np.concatenate([0 * g, g], -1)


class _Constants(NamedTuple):
    """Constants of a (frozen) model that the NumPy path asks for on every call: ``armature``
    (nv, nv) diagonal or ``None``; ``world_acceleration = -[0; g]`` of ``gravity``; the bodies'
    inertias as 6x6 matrices ``inertia6`` (NB, 6, 6) and their masses ``masses`` (NB, 1)."""

    armature: np.ndarray | None
    world_acceleration: np.ndarray
    gravity: np.ndarray
    inertia6: np.ndarray
    masses: np.ndarray


_CONSTANTS = ModelCache()


def _constants(model) -> _Constants:
    c = _CONSTANTS.get(model)
    if c is None:
        arm = np.asarray(model.armature, dtype=float)
        g = model.gravity
        lv = levels(model)
        c = _Constants(np.diag(arm) if np.any(arm) else None, -np.concatenate([0 * g, g], -1), g,
                       rigid_inertia_matrix(lv.inertia), np.asarray(lv.inertia.m, dtype=float).reshape(-1, 1))
        for x in c:
            if isinstance(x, np.ndarray):
                x.flags.writeable = False
        _CONSTANTS[model] = c
    return c


def _inertia_matrix(model, T, shape, dtype):
    """``H = dtau/da`` (..., nv, nv): ``H[r, c] = xi_r^T IC_j xi_c`` on the branch pairs, armature
    on the diagonal."""
    if not bk.is_symbolic(T["P"]):
        Dm, Um, _, _ = _pair_masks(model)
        PX = T["P"] @ T["xi"].swapaxes(-1, -2)
        H = Dm * PX + Um * PX.swapaxes(-1, -2)
        arm = _constants(model).armature
        if arm is not None:
            H += arm
        return H if H.shape[:-2] == shape else np.broadcast_to(H, shape + H.shape[-2:]).copy()
    rd, cd, ra, ca, mirror = branch_pairs(model)
    low = _dot(T["P"].take(rd, -2), T["xi"].take(cd, -2))
    H = np.zeros(shape + (model.nv, model.nv), dtype=dtype)
    H[..., rd, cd] = low
    H[..., ra, ca] = low.take(mirror, -1)
    if np.any(model.armature):
        d = np.arange(model.nv)
        H[..., d, d] = H[..., d, d] + model.armature
    return H


def rnea_derivative_kernel(model, q, v, a, f_ext=None, gravity=None, want_da=True, velocity=True):
    """Unchecked ``(dtau_dq, dtau_dv, dtau_da)`` (..., nv, nv) (``dtau_da`` only with ``want_da``;
    ``velocity=False``: ``v`` and ``a`` are zero, only ``dtau_dq`` is returned)."""
    T, shape, dtype = _derivative_terms(model, q, v, a, f_ext, gravity, velocity)
    if want_da and "_out" in T:
        return _assemble_all(model, T)
    out = _assemble(model, T, shape, dtype, velocity)
    if not velocity:
        return out[0]
    return out + (_inertia_matrix(model, T, shape, dtype),) if want_da else out


def _assemble(model, T, shape, dtype, velocity=True):
    """``dtau_dq`` (and ``dtau_dv`` with ``velocity``) from :func:`joint_terms`' ``T``: two dot
    products per pair of dofs on one branch (see the module docstring)."""
    xi, P, chi, Tq = T["xi"], T["P"], T["chi"], T["Tq"]
    if not bk.is_symbolic(P):
        return _assemble_float(model, T, velocity)
    rd, cd, ra, ca, _ = branch_pairs(model)

    def assemble(lower, upper):
        out = np.zeros(shape + (model.nv, model.nv), dtype=dtype)
        out[..., rd, cd] = lower
        out[..., ra, ca] = upper
        return out

    low_q = _dot(P.take(rd, -2), chi.take(cd, -2))
    if not velocity:
        return (assemble(low_q, _dot(xi.take(ra, -2), Tq.take(ca, -2))),)
    Qw, psi, phi, Tv = T["Qw"], T["psi"][..., :3], T["phi"], T["Tv"]
    dq = assemble(low_q + _dot(Qw.take(rd, -2), psi.take(cd, -2)), _dot(xi.take(ra, -2), Tq.take(ca, -2)))
    dv = assemble(_dot(P.take(rd, -2), phi.take(cd, -2)) + _dot(Qw.take(rd, -2), xi.take(cd, -2)[..., :3]),
                  _dot(xi.take(ra, -2), Tv.take(ca, -2)))
    return dq, dv


def _assemble_float(model, T, velocity):
    """:func:`_assemble` on float arrays: the dot products of every pair of dofs as dense products
    (..., nv, 9) @ (..., 9, nv) (a few BLAS calls instead of a gather and a product per term), the
    pairs off the branches zeroed by :func:`_pair_masks` (the same sums of products, added in
    another order: equal to rounding)."""
    if velocity and "_out" in T:
        return _branch_products(model, T["_z"], T["_out"], False)
    xi, P, Tq = T["xi"], T["P"], T["Tq"]
    Dm, Um, _, _ = _pair_masks(model)
    if not velocity:
        return (Dm * (P @ T["chi"].swapaxes(-1, -2)) + Um * (xi @ Tq.swapaxes(-1, -2)),)
    n = xi.shape[-2]
    row = np.concatenate([P, T["Qw"]], -1)                                        # [P_r, Qw_r]
    col = np.concatenate([np.concatenate([T["chi"], T["psi"][..., :3]], -1),     # [chi_c, psi_c_w]
                          np.concatenate([T["phi"], xi[..., :3]], -1)], -2)       # [phi_c, xi_c_w]
    low = row @ col.swapaxes(-1, -2)
    up = xi @ np.concatenate([Tq, T["Tv"]], -2).swapaxes(-1, -2)
    return (Dm * low[..., :n] + Um * up[..., :n], Dm * low[..., n:] + Um * up[..., n:])


def _assemble_all(model, T):
    """``(dtau_dq, dtau_dv, H)`` from :func:`_float_terms`' ``T`` (see :func:`_branch_products`)."""
    return _branch_products(model, T["_z"], T["_out"], True)


def _branch_products(model, z, out, inertia):
    """``(dtau_dq, dtau_dv)``, and ``H`` with ``inertia``, from :func:`_products`' ``z = [chi, psi_w,
    phi, xi, 0]`` (..., nv, 22) and ``out`` (..., nv, 3, 9), whose rows are ``[P, Qw]``, ``[Tq, *]``
    and ``[Tv, *]``, in a few NumPy calls: the lower pairs ``[P, Qw]_r . [chi, psi_w]_c`` and
    ``[P, Qw]_r . [phi, xi_w]_c`` and ``H``'s ``[P, Qw]_r . [xi, 0]_c`` (mirrored above) by one
    product (..., nv, 9) @ (..., 3, 9, nv), the upper pairs ``xi_r . Tq_c`` and ``xi_r . Tv_c`` by
    another, masked by :func:`_pair_masks` (equal to rounding to :func:`_assemble` and
    :func:`_inertia_matrix`)."""
    _, _, lower, branch = _pair_masks(model)
    right = z.take(_BRANCH_RIGHT, -1).reshape(z.shape[:-1] + (3, 9)).swapaxes(-3, -2).swapaxes(-1, -2)
    low = out[..., 0, :][..., None, :, :] @ right                          # (..., 3, nv, nv)
    D = z[..., 15:21][..., None, :, :] @ out[..., 1:, :6].swapaxes(-3, -2).swapaxes(-1, -2)   # the upper pairs
    np.copyto(D, low[..., :2, :, :], where=lower)                          # the lower ones'
    D *= branch                                                            # 0 off the branches
    if not inertia:
        return D[..., 0, :, :], D[..., 1, :, :]
    PX = low[..., 2, :, :]
    H = np.where(lower, PX, PX.swapaxes(-1, -2))                           # mirrored above
    H *= branch
    arm = _constants(model).armature
    if arm is not None:
        H += arm
    return D[..., 0, :, :], D[..., 1, :, :], H


# the right factors of _branch_products per dof from z = [chi, psi_w, phi, xi, 0]:
# [chi, psi_w], [phi, xi_w], [xi, 0]
_BRANCH_RIGHT = np.r_[0:9, 9:18, 15:21, 21, 21, 21]
_BRANCH_RIGHT.flags.writeable = False


_MASKS = ModelCache()


def _pair_masks(model):
    """``(Dm, Um, lower, branch)`` (nv, nv): ``Dm``, ``Um`` float, 1 on the pairs ``(rd, cd)`` and
    ``(ra, ca)`` of :func:`branch_pairs`, 0 elsewhere; ``lower`` where ``Dm`` is 1 (bool) and
    ``branch = Dm + Um`` (cached per model)."""
    masks = _MASKS.get(model)
    if masks is None:
        rd, cd, ra, ca, _ = branch_pairs(model)
        masks = np.zeros((2, model.nv, model.nv))
        masks[0, rd, cd] = 1.0
        masks[1, ra, ca] = 1.0
        lower, branch = masks[0] > 0, masks[0] + masks[1]
        for x in (masks, lower, branch):
            x.flags.writeable = False
        masks = _MASKS[model] = (masks[0], masks[1], lower, branch)
    return masks


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, optional=_DYN_OPT,
        outputs={"dtau_dq": _NVxNV, "dtau_dv": _NVxNV, "dtau_da": _NVxNV})
def rnea_derivatives(model, q, v, a, f_ext=None, gravity=None):
    """Partial derivatives of :func:`~sparsedyn.rnea`: ``(dtau_dq, dtau_dv, dtau_da)``, each (..., nv, nv).

    ``dtau_dq`` is on the tangent space (see the module docstring); ``dtau_da = H(q)``
    (with the armature on its diagonal).  ``f_ext`` (..., NB, 6), body frame, and
    ``gravity`` are held constant.  Pinocchio's ``computeRNEADerivatives``.
    """
    q, v, a, f_ext, g, shape, _ = _checks.dynamics(model, q, v, a, f_ext, gravity, "a", "nv joint accelerations")
    if varying_subspaces(model):
        return derivatives(rnea, ("q", "v", "a"))(model, q, v, a, f_ext=f_ext, gravity=gravity)
    return rnea_derivative_kernel(model, q, v, a, f_ext, g)


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional=_DYN_OPT,
        outputs={"dqdd_dq": _NVxNV, "dqdd_dv": _NVxNV, "dqdd_dtau": _NVxNV})
def aba_derivatives(model, q, v, tau, f_ext=None, gravity=None):
    """Partial derivatives of :func:`~sparsedyn.aba`: ``(dqdd_dq, dqdd_dv, dqdd_dtau)``, each (..., nv, nv).

    ``dqdd/dx = -H^-1 dtau/dx`` (RNEA's derivatives at ``qdd = aba(q, v, tau)``) for ``x = q``
    (tangent space) and ``v``; ``dqdd_dtau = H(q)^-1``.  Pinocchio's ``computeABADerivatives``.
    ``H = dtau/da`` comes with RNEA's derivatives; its tree-sparse factorization ``H = L^T D L``
    (Featherstone, *Efficient factorization of the joint-space inertia matrix for branched kinematic
    trees*, 2005) gives ``H^-1 = W D^-1 W^T`` with ``W = L^-1`` as sparse as ``L``, and
    ``H^-1 dtau/dx = W (D^-1 (W^T dtau/dx))`` never multiplies a structural zero of ``W`` or of
    ``dtau/dx``; a free root's columns need no solve (module docstring).  ``qdd = H^-1 (tau -
    rnea(q, v, 0))`` with the same factor (traced, the pass at ``qdd`` shares all but the
    accelerations with the one at ``0``: cheaper than a separate ABA).  On float input the
    factor's pivots are checked as :func:`~sparsedyn.fd_crb` checks them (a massless subtree
    raises :class:`~sparsedyn.SingularInertiaError` naming the joint).  On talos_reduced: 99k
    flops, the products with ``W`` 45k of them.
    """
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    if varying_subspaces(model):
        return derivatives(aba, ("q", "v", "tau"))(model, q, v, tau, f_ext=f_ext, gravity=gravity)
    lam = dof_lambda(model)
    tau0, H = _bias_and_inertia(model, q, v, f_ext, g)
    W, Dinv = ltdl_inverse_factor(lam, ltdl_kernel(lam, H, None) if symbolic else _checked_factor(model, lam, H))
    qdd = _solve(W, Dinv, (tau - tau0)[..., None])[..., 0]
    T, shp, dtype = _derivative_terms(model, q, v, qdd, f_ext, g, True)
    dq, dv = _assemble(model, T, shp, dtype)
    WD = W * Dinv[..., None, :]
    Minv = WD @ np.swapaxes(W, -1, -2)                   # H^-1 = W D^-1 W^T: upper triangle, mirrored
    free, dofs, Sinv, armature, (r, c), rest = _free_roots(model)
    Minv[..., c, r] = Minv[..., r, c]
    dqdd_dq = np.zeros(dq.shape, dtype=dq.dtype)
    dqdd_dv = np.zeros(dv.shape, dtype=dv.dtype)
    dqdd_dq[..., rest] = -_solve(W, Dinv, dq[..., rest])
    dqdd_dv[..., rest] = -_solve(W, Dinv, dv[..., rest])
    for cols, rows, Si, arm in zip(free, dofs, Sinv, armature):
        # a free root: dtau_dq[:, c] = P chi_c (psi_c = 0), dtau_dv[:, c] = P phi_c + Qw xi_c_w over the
        # rows of its tree, and H[:, cols] = P S + diag(armature): H^-1 P = E S^-1 - Minv[:, cols] arm S^-1
        Y = [Si @ np.swapaxes(T[n][..., cols, :], -1, -2) for n in ("chi", "phi")]       # S^-1 [chi_c], [phi_c]
        Qw = np.zeros(shp + (model.nv, 3), dtype=dtype)
        Qw[..., rows, :] = T["Qw"][..., rows, :]
        dqdd_dv[..., cols] = -(_solve(W, Dinv, Qw) @ np.swapaxes(T["xi"][..., cols, :3], -1, -2))
        for out, y in zip((dqdd_dq, dqdd_dv), Y):
            out[..., cols[0]:cols[-1] + 1, cols] = out[..., cols[0]:cols[-1] + 1, cols] - y
            if np.any(arm):
                out[..., cols] = out[..., cols] + Minv[..., cols] @ (arm[:, None] * y)
    return dqdd_dq, dqdd_dv, Minv


def _checked_factor(model, lam, H):
    """The packed ``L^T D L`` factor of a float ``H`` with its pivots checked as
    :func:`~sparsedyn.fd_crb` checks them: LAPACK's factor (:func:`ltdl_kernel` without a check) and
    one vectorized test of its pivots against twice the threshold; a pivot that is not clearly
    above it sends ``H`` through the checked loop, which raises naming the joint (or agrees)."""
    with np.errstate(divide="ignore", invalid="ignore"):     # a singular H: the checked loop below says so
        P = ltdl_kernel(lam, H, None)
    own, any_unowned = _pivot_scales(model)
    scale = own if not any_unowned else \
        np.where(np.isnan(own), np.max(np.abs(H), axis=(-2, -1), initial=0.0)[..., None], own)
    if np.all(np.diagonal(P, 0, -2, -1) > 2 * PIVOT_RTOL * scale):
        return P
    return ltdl_kernel(lam, H, ltdl_checker(model, H))


_SCALES = ModelCache()


def _pivot_scales(model):
    """``(scale, any_nan)``: per dof the scale of :func:`~sparsedyn.algorithms.aba.own_inertia_scales`
    of its body (nv,), NaN where the body has none (``max|H|`` is used there), cached per model."""
    out = _SCALES.get(model)
    if out is None:
        own = own_inertia_scales(model)
        scale = np.array([np.nan if own[int(i)] is None else own[int(i)] for i in model.dof_body], dtype=float)
        scale.flags.writeable = False
        out = _SCALES[model] = (scale, bool(np.isnan(scale).any()))
    return out


def _bias_and_inertia(model, q, v, f_ext, gravity):
    """``(rnea(q, v, 0), H)``: the bias forces ``tau0 = xi_r^T F_j`` (..., nv) at ``a = 0`` and
    ``H`` (..., nv, nv) from one root-frame pass."""
    g = model.gravity if gravity is None else gravity
    shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], np.shape(g)[:-1],
                                () if f_ext is None else f_ext.shape[:-2])
    dtype = np.result_type(q, v, g, np.float64, *(() if f_ext is None else (f_ext,)))
    K = root_motion(model, q, v, np.zeros(v.shape, dtype=v.dtype), -np.concatenate([0 * g, g], -1))
    IC, F, _, _ = subtree_sums(model, K, f_ext)
    T = {"xi": K.xi, "P": rigid_apply(dof_rows(model, IC), K.xi)}
    T = {n: np.broadcast_to(x, shape + x.shape[-2:]) for n, x in T.items()}
    return _dot(T["xi"], F[..., levels(model).dof_body, :]), _inertia_matrix(model, T, shape, dtype)


def _solve(W, Dinv, X):
    """``H^-1 X = W (D^-1 (W^T X))`` (..., nv, m): the products skip the structural zeros of ``W``
    and ``X``."""
    return W @ (Dinv[..., None] * (np.swapaxes(W, -1, -2) @ X))


_FREE = ModelCache()


def _free_roots(model):
    """``(cols, dofs, Sinv, armature, upper, rest)``: per root joint with six dofs, its dofs ``cols``,
    the dofs of its tree ``dofs`` (index arrays), ``S^-1`` (6, 6) (its motion subspace is invertible:
    ``H[:, cols] = P S + diag(armature)`` over the tree) and the armature of ``cols`` (6,); then the
    model's ``upper = triu_indices(nv, 1)`` and ``rest``, the dofs of no such joint."""
    out = _FREE.get(model)
    if out is None:
        cols, dofs, Sinv, arm = [], [], [], []
        for i, j in enumerate(model.joints):
            c = np.arange(int(model.v_start[i]), int(model.v_start[i]) + j.nv)
            S = np.asarray(j.motion_subspace(), dtype=float)
            if model.parent[i] < 0 and j.nv == 6 and np.linalg.matrix_rank(S) == 6:
                arm.append(np.asarray(model.armature, dtype=float)[c])
                end = int(model.subtree_end[i])
                cols.append(c)
                dofs.append(np.arange(c[0], int(model.v_start[end]) if end < model.nbodies else model.nv))
                Sinv.append(np.linalg.inv(S))
        rest = np.setdiff1d(np.arange(model.nv), np.concatenate(cols) if cols else [])
        out = _FREE[model] = (cols, dofs, Sinv, arm, np.triu_indices(model.nv, 1), rest)
    return out


def _static(model, q, f_ext, gravity):
    z = bk.zeros(q.shape[:-1] + (model.nv,), like=q)
    if varying_subspaces(model):
        return derivatives(rnea, "q")(model, q, z, z, f_ext=f_ext, gravity=gravity)
    return rnea_derivative_kernel(model, q, z, z, f_ext, gravity, velocity=False)


@kernel(inputs={"q": ("nq",)}, optional={"gravity": (3,)}, outputs={"dg_dq": _NVxNV})
def generalized_gravity_derivatives(model, q, gravity=None):
    """``dg/dq`` (..., nv, nv) of :func:`~sparsedyn.generalized_gravity`, on the tangent space
    (Pinocchio's ``computeGeneralizedGravityDerivatives``)."""
    q = _checks.configuration(model, q)
    g = _checks.gravity(model, gravity)
    _checks.batch_shape(q=(q, 1), gravity=(g, 1))           # a clear error for batches that do not broadcast
    return _static(model, q, None, g)


@kernel(inputs={"q": ("nq",), "f_ext": ("nb", 6)}, optional={"gravity": (3,)}, outputs={"dtau_dq": _NVxNV})
def static_torque_derivatives(model, q, f_ext, gravity=None):
    """``d/dq`` (..., nv, nv) of the static torque ``tau(q) = rnea(q, 0, 0, f_ext)`` (the joint forces
    that hold the model still against gravity and the external forces ``f_ext`` (..., NB, 6), body
    frame, held constant), on the tangent space (Pinocchio's ``computeStaticTorqueDerivatives``)."""
    q = _checks.configuration(model, q)
    f_ext = _checks.body_forces(model, f_ext)
    g = _checks.gravity(model, gravity)
    _checks.batch_shape(q=(q, 1), f_ext=(f_ext, 2), gravity=(g, 1))
    return _static(model, q, f_ext, g)
