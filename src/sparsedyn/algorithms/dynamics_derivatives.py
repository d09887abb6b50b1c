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

Conversion to Pinocchio's layout: ``sparsedyn.interop.pinocchio.derivative_to_pinocchio``
(rows ``tau``-like, columns ``v``-like; Pinocchio orders a free joint linear-first).
Pinocchio's ``fext`` is per joint in the joint frame, which for sparsedyn models is the
body frame (``fext_to_pinocchio``).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import kernel
from ..model.spatial import (RigidInertia, apply_force_transpose, cross3, cross_force, cross_motion, inner, rigid_apply,
                       rigid_transform, skew)
from .aba import aba_kernel, float_checker
from .minv import minv_kernel
from .composite_chains import chain_forces, composite_chains
from .derivatives import derivatives, varying_subspaces
from .rnea import rnea
from .fd import ltdl_checker
from .kinematics_derivatives import common_shape, levels, root_motion
from .ltdl import dof_lambda, ltdl_inverse_factor, ltdl_kernel

__all__ = ["rnea_derivatives", "aba_derivatives", "generalized_gravity_derivatives", "static_torque_derivatives",
           "rnea_derivative_kernel", "branch_pairs", "subtree_sums", "joint_terms", "dof_rows", "momentum_columns"]

_NVxNV = ("nv", "nv")
_DYN_OPT = {"f_ext": ("nb", 6), "gravity": (3,)}
def branch_pairs(model):
    """``(rd, cd, ra, ca, mirror)``: the dof pairs on one branch, as index arrays.  ``(rd, cd)``: the
    column's body is an ancestor of the row's or the same body; ``(ra, ca)``: the row's body is a strict
    ancestor of the column's (``mirror``: the index of ``(ca, ra)`` among the first kind).  Every other
    pair is a structural zero of the derivatives (the model's
    :attr:`~sparsedyn.model.topology.Topology.branch_pairs`)."""
    return model.topology.branch_pairs


def _dot(x, y):
    return inner(x, y)


def _pair_dot(X, Y, r, c):
    """``X[..., r[p], :] . Y[..., c[p], :]`` (..., len(r)) for the dof pairs ``(r, c)``.  Traced, when
    the pairs are at least a quarter of all (a long chain) and their products
    :data:`~sparsedyn.backend.BLOCK_MIN_PAIRS` or more, as the elements of one dense block
    ``X Y^T`` (:func:`~sparsedyn.backend.matmul`: the same products summed in the same order, a
    program of ``n^2`` elements, not of ``6 n^2`` operations; the elements of no pair are dead)."""
    n = X.shape[-2]
    if bk.is_symbolic(X) and X.ndim == Y.ndim == 2 and 4 * len(r) >= n * n:
        Yt = Y.T
        if bk.block_pairs(X, Yt) >= bk.BLOCK_MIN_PAIRS:
            return bk.matmul(X, Yt)[r, c]
    return _dot(X.take(r, -2), Y.take(c, -2))


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


def subtree_sums(model, K, f_ext=None, velocity=True):
    """``(IC, F, B11, M)``, stacked by body: the sums over each body's subtree, in root coordinates,
    of the inertias (a :class:`~sparsedyn.model.spatial.RigidInertia` of (..., NB) arrays), the forces
    ``f_i = I_i A_i + V_i x* I_i V_i - f_ext_i`` (..., NB, 6), the ``B11`` blocks (..., NB, 3, 3)
    and the momenta ``I_i V_i`` (..., NB, 6) (``B11``, ``M`` ``None`` without ``velocity``).
    ``K``: :func:`~sparsedyn.algorithms.kinematics_derivatives.root_motion` with accelerations."""
    lv = levels(model)
    NB = model.nbodies
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
    m, X = lv.below @ np.array(IC.m), _subtree_sum(lv, X)        # the subtree masses: model constants
    out, k = [], 0
    for c in cores:
        n = _SIZE[c]
        out.append(X[..., k:k + n].reshape(shape + (NB,) + c))
        k += n
    IC = RigidInertia(m, out[0], out[1])
    F = out[2]
    if velocity:
        B11, M = out[3], out[4]
    return IC, F, B11, M


def _subtree_sum(lv, X):
    """``X`` (..., NB, k) summed over each body's subtree, in place: level by level, the children
    into their parents (the recursion's ``NB - 1`` additions per entry)."""
    for L, P in reversed(lv.levels):                    # deepest first
        np.add.at(X, (Ellipsis, P, slice(None)), X[..., L, :])
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
    db = levels(model).dof_body
    # to the batch shape first: the products below stack their operands on a new first axis
    x, Vl, Al = (t if t.shape[:-2] == shape else np.broadcast_to(t, shape + t.shape[-2:])
                 for t in (K.xi, K.Vl.take(db, -2), K.Al.take(db, -2)))
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


def momentum_columns(model, T, sums):
    """``xi x* M_k + IC_k psi`` (..., nv, 6) per dof (``k`` the dof's body; ``M``, ``IC`` the subtree
    momenta and inertias of ``sums``, ``xi``, ``psi`` of :func:`joint_terms`' ``T``): the change of
    the subtree momentum along the dof (:mod:`~sparsedyn.algorithms.centroidal_derivatives`)."""
    IC, _, _, M = sums
    db = levels(model).dof_body
    return cross_force(T["xi"], M.take(db, -2)) + rigid_apply(dof_rows(model, IC), T["psi"])


def _stack_broadcast(*xs):
    """``xs`` broadcast to one shape (a tuple of arrays, to stack or unpack)."""
    return xs if all(x.shape == xs[0].shape for x in xs) else np.broadcast_arrays(*xs)


def _multi_dof(model):
    """The dofs (index array) of the joints with more than one dof."""
    return model.topology.multi_dof


def _derivative_terms(model, q, v, a, f_ext, gravity, velocity):
    """``(T, shape, dtype)``: :func:`joint_terms` at state ``(q, v, a)``, with its batch shape and dtype."""
    g = model.gravity if gravity is None else gravity
    shape = common_shape(q.shape[:-1], v.shape[:-1], a.shape[:-1], np.shape(g)[:-1],
                         *(() if f_ext is None else (f_ext.shape[:-2],)))
    dtype = np.result_type(q, v, a, g, np.float64, *(() if f_ext is None else (f_ext,)))
    K = root_motion(model, q, v, a, -np.concatenate([0 * g, g], -1))     # RNEA's gravity: the world accelerates
    return joint_terms(model, K, subtree_sums(model, K, f_ext, velocity), shape, velocity), shape, dtype


def _inertia_matrix(model, T, shape, dtype):
    """``H = dtau/da`` (..., nv, nv): ``H[r, c] = xi_r^T IC_j xi_c`` on the branch pairs, armature
    on the diagonal."""
    rd, cd, ra, ca, mirror = branch_pairs(model)
    low = _pair_dot(T["P"], T["xi"], rd, cd)
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
    out = _assemble(model, T, shape, dtype, velocity)
    if not velocity:
        return out[0]
    return out + (_inertia_matrix(model, T, shape, dtype),) if want_da else out


def _assemble(model, T, shape, dtype, velocity=True):
    """``dtau_dq`` (and ``dtau_dv`` with ``velocity``) from :func:`joint_terms`' ``T``: two dot
    products per pair of dofs on one branch (see the module docstring)."""
    xi, P, chi, Tq = T["xi"], T["P"], T["chi"], T["Tq"]
    rd, cd, ra, ca, _ = branch_pairs(model)

    def assemble(lower, upper):
        out = np.zeros(shape + (model.nv, model.nv), dtype=dtype)
        out[..., rd, cd] = lower
        out[..., ra, ca] = upper
        return out

    low_q = _pair_dot(P, chi, rd, cd)
    if not velocity:
        return (assemble(low_q, _pair_dot(xi, Tq, ra, ca)),)
    Qw, psi, phi, Tv = T["Qw"], T["psi"][..., :3], T["phi"], T["Tv"]
    dq = assemble(low_q + _pair_dot(Qw, psi, rd, cd), _pair_dot(xi, Tq, ra, ca))
    dv = assemble(_pair_dot(P, phi, rd, cd) + _pair_dot(Qw, xi[..., :3], rd, cd), _pair_dot(xi, Tv, ra, ca))
    return dq, dv


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, optional=_DYN_OPT,
        outputs={"dtau_dq": _NVxNV, "dtau_dv": _NVxNV, "dtau_da": _NVxNV})
def rnea_derivatives(model, q, v, a, f_ext=None, gravity=None):
    """Partial derivatives of :func:`~sparsedyn.rnea`: ``(dtau_dq, dtau_dv, dtau_da)``, each (..., nv, nv).

    ``dtau_dq`` is on the tangent space (see the module docstring); ``dtau_da = H(q)``
    (with the armature on its diagonal).  ``f_ext`` (..., NB, 6), body frame, and
    ``gravity`` are held constant.  Pinocchio's ``computeRNEADerivatives``.
    """
    q, v, a, f_ext, g, shape, _ = _checks.dynamics(model, q, v, a, f_ext, gravity, "a", "nv joint accelerations")
    chained = analytical_model(model, f_ext)
    if chained is None:
        return derivatives(rnea, ("q", "v", "a"))(model, q, v, a, f_ext=f_ext, gravity=gravity)
    return rnea_derivative_kernel(chained[0], q, v, a, chained[1], g)


def analytical_model(model, f_ext):
    """``(model, f_ext)`` whose analytical derivatives (constant motion subspaces) are ``model``'s at the
    body forces ``f_ext`` (..., nbodies, 6) or None: ``model`` itself, or where a joint's subspace turns
    with ``q`` its composite joints as chains of massless bodies with the forces on their last bodies
    (:func:`~sparsedyn.algorithms.composite_chains.composite_chains`: the same ``q``, ``v``, tangent space and
    joint forces); None where no chain makes every subspace constant (the program's derivatives then)."""
    if not varying_subspaces(model):
        return model, f_ext
    chains = composite_chains(model)
    return None if chains is None else (chains[0], chain_forces(chains, f_ext))


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional=_DYN_OPT,
        outputs={"dqdd_dq": _NVxNV, "dqdd_dv": _NVxNV, "dqdd_dtau": _NVxNV})
def aba_derivatives(model, q, v, tau, f_ext=None, gravity=None):
    """Partial derivatives of :func:`~sparsedyn.aba`: ``(dqdd_dq, dqdd_dv, dqdd_dtau)``, each (..., nv, nv).

    ``dqdd/dx = -H^-1 dtau/dx`` (RNEA's derivatives at ``qdd = aba(q, v, tau)``) for ``x = q``
    (tangent space) and ``v``; ``dqdd_dtau = H(q)^-1``.  Pinocchio's ``computeABADerivatives``.
    ``H = dtau/da`` comes with RNEA's derivatives; its tree-sparse factorization ``H = L^T D L``
    (Featherstone, *Efficient factorization of the joint-space inertia matrix for branched kinematic
    trees*, 2005) gives ``H^-1 = W D^-1 W^T`` with ``W = L^-1`` as sparse as ``L``, and
    ``H^-1 dtau/dx = (W D^-1) (W^T dtau/dx)`` never multiplies a structural zero of ``W`` or of
    ``dtau/dx``; a free root's columns need no solve (module docstring).  Below a floating base
    (dofs every dof descends from) ``W``'s columns of the base are dense: the factor is taken by
    blocks and those columns' products in ``W`` and ``H^-1`` are dense blocks (:func:`_inverse_factor`,
    :func:`_inverse`; talos_full's program: 92,500 nodes without, 70,700 with).  ``qdd = H^-1 (tau -
    rnea(q, v, 0))`` with the same factor (traced, the pass at ``qdd`` shares all but the
    accelerations with the one at ``0``: cheaper than a separate ABA).  On float input the
    factor's pivots are checked as :func:`~sparsedyn.fd_crb` checks them (a massless subtree
    raises :class:`~sparsedyn.SingularInertiaError` naming the joint).  On talos_reduced: 99k
    flops, the products with ``W`` 45k of them, traced as dense blocks (:func:`_block`).  On a model with a path of 24 dofs or more from
    the root (a long chain), where the factor and its inverse cost the depth squared per dof,
    ``H^-1`` comes from :func:`~sparsedyn.minv` instead (its cost: the depth per dof), ``qdd`` from
    ABA, and the products ``-H^-1 dtau/dx`` are dense blocks of the traced program
    (:func:`~sparsedyn.backend.matmul`): a 100-body chain's program has 225,000 nodes, not 5 million.
    """
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    chained = analytical_model(model, f_ext)
    if chained is not None:                      # (composite joints: their chains of massless bodies)
        model, f_ext = chained
    if chained is None or _by_minv(model):
        return _aba_derivatives_minv(model, q, v, tau, f_ext, g, symbolic)
    tau0, H = _bias_and_inertia(model, q, v, f_ext, g)
    W, Dinv = _inverse_factor(model, H, None if symbolic else ltdl_checker(model, H))
    WD, Wt = W * Dinv[..., None, :], np.swapaxes(W, -1, -2)
    qdd = _block(WD, _block(Wt, (tau - tau0)[..., None]))[..., 0]
    T, shp, dtype = _derivative_terms(model, q, v, qdd, f_ext, g, True)
    dq, dv = _assemble(model, T, shp, dtype)
    Minv = _inverse(W, WD, _shared_dofs(model))          # H^-1 = W D^-1 W^T: upper triangle, mirrored
    free, dofs, Sinv, armature, (r, c), rest = _free_roots(model)
    Minv[..., c, r] = Minv[..., r, c]
    dqdd_dq = np.zeros(dq.shape, dtype=dq.dtype)
    dqdd_dv = np.zeros(dv.shape, dtype=dv.dtype)
    # -H^-1 X = (W (-D^-1)) (W^T X): traced, the entries of W are mostly negations, so those of
    # W (-D^-1) are WD's products without their negation (no new node), where scaling W^T X by
    # -D^-1 costs a product and a negation per entry
    nWD = W * -Dinv[..., None, :]
    dqdd_dq[..., rest] = _block(nWD, _block(Wt, dq[..., rest]))
    dqdd_dv[..., rest] = _block(nWD, _block(Wt, dv[..., rest]))
    for cols, rows, Si, arm in zip(free, dofs, Sinv, armature):
        # a free root: dtau_dq[:, c] = P chi_c (psi_c = 0), dtau_dv[:, c] = P phi_c + Qw xi_c_w over the
        # rows of its tree, and H[:, cols] = P S + diag(armature): H^-1 P = E S^-1 - Minv[:, cols] arm S^-1
        Y = [Si @ np.swapaxes(T[n][..., cols, :], -1, -2) for n in ("chi", "phi")]       # S^-1 [chi_c], [phi_c]
        Qw = np.zeros(shp + (model.nv, 3), dtype=dtype)
        Qw[..., rows, :] = T["Qw"][..., rows, :]
        dqdd_dv[..., cols] = _block(nWD, _block(Wt, Qw)) @ np.swapaxes(T["xi"][..., cols, :3], -1, -2)
        for out, y in zip((dqdd_dq, dqdd_dv), Y):
            out[..., cols[0]:cols[-1] + 1, cols] = out[..., cols[0]:cols[-1] + 1, cols] - y
            if np.any(arm):
                out[..., cols] = out[..., cols] + Minv[..., cols] @ (arm[:, None] * y)
    return dqdd_dq, dqdd_dv, Minv


def _shared_dofs(model):
    """``r``: the dofs ``0 .. r-1`` are ancestors (or self) of every dof (a floating base's six; ``0``
    on a model with several root joints)."""
    lam = dof_lambda(model)
    shared = None
    for i in set(range(len(lam))) - set(lam):       # the ancestors-or-self of each leaf dof, intersected
        anc, k = set(), i
        while k >= 0:
            anc.add(k)
            k = lam[k]
        shared = anc if shared is None else shared & anc
    return len(shared or ())


def _inverse_factor(model, H, check):
    """``(W, Dinv)``: ``W = L^-1`` (..., n, n) and ``D^-1`` (..., n) of ``H = L^T D L`` (``L`` unit,
    tree-sparse: :func:`~sparsedyn.algorithms.ltdl.ltdl_kernel`, ``check`` its pivot check, and
    :func:`~sparsedyn.algorithms.ltdl.ltdl_inverse_factor`).  With ``r`` dofs shared by every dof
    (:func:`_shared_dofs`: a floating base) the factor is taken by blocks, rest ``N`` first, as the
    recursion eliminates them: ``L_NN``, ``D_N`` of ``H_NN`` (a tree's), then ``L_NR = D_N^-1 W_NN^T H_NR``
    (from ``H_NR = L_NN^T D_N L_NR``), ``L_RR``, ``D_R`` of the Schur complement
    ``H_RR - L_NR^T (W_NN^T H_NR)``, and ``W_NR = -W_NN (L_NR W_RR)``.  The same operations in exact
    arithmetic; traced, the dense products with the ``r`` shared columns are block products
    (:func:`~sparsedyn.backend.matmul`) of ``(n - r) r`` elements, where the recursions sum ``r``
    products per ancestor of each dof, twice (talos_full: 13,000 operations of 92,500 down to about 3,000)."""
    r, lam = _shared_dofs(model), dof_lambda(model)
    n = len(lam)
    if not 0 < r < n:
        return ltdl_inverse_factor(model, ltdl_kernel(model, H, check))
    rest, chain = [p - r for p in lam[r:]], list(range(-1, r - 1))      # dofs r.. as a tree of their own
    PN = ltdl_kernel(rest, H[..., r:, r:], None if check is None else (lambda k, pivot: check(k + r, pivot)))
    WN, DiN = ltdl_inverse_factor(rest, PN)
    Y = _block(np.swapaxes(WN, -1, -2), H[..., r:, :r])                   # W_NN^T H_NR
    LNR = DiN[..., :, None] * Y
    WR, DiR = ltdl_inverse_factor(chain, ltdl_kernel(chain, H[..., :r, :r] - _block(np.swapaxes(LNR, -1, -2), Y),
                                                     check))
    W = np.zeros(H.shape, dtype=np.result_type(WN, WR))
    W[..., :r, :r], W[..., r:, r:] = WR, WN
    W[..., r:, :r] = _block(-WN, _block(LNR, WR))     # -W_NN: traced, mostly W's own negated sums (no new node)
    return W, np.concatenate([DiR, DiN], -1)


def _block(A, B):
    """``A @ B``; traced (matrices of symbols), as one dense block product (:func:`~sparsedyn.backend.matmul`:
    the same products summed in the same order), which the compiled code runs as a loop over ``A``'s
    entries that are not structural zeros, vectorized along ``B``'s columns: the products with ``W``
    of ``H^-1 X = W D^-1 W^T X`` (G1's aba_derivatives: 90,000 operations unrolled, 43,000 with
    them as blocks; talos_full's ``qdd``, one column: 2,070 operations, 100 elements, calls no slower)."""
    if bk.is_symbolic(A) and A.ndim == 2 and B.ndim == 2:
        return bk.matmul(A, B, min_pairs=0)
    return A @ B


def _inverse(W, WD, r):
    """``H^-1 = W D^-1 W^T`` (..., n, n) from ``W`` and ``WD = W D^-1``, with ``r`` the dofs shared by every
    dof (:func:`_shared_dofs`).  Their columns of ``W`` are dense, so every entry of ``H^-1`` sums their
    ``r`` products: traced, that part is one dense block (:func:`~sparsedyn.backend.matmul`, a program of
    ``n^2`` elements, not of ``2 r n^2 / 2`` operations), and the rest of the sum, over the dofs two
    rows share below the root, is added to it."""
    Wt = np.swapaxes(W, -1, -2)
    if not r:
        return WD @ Wt
    return _block(WD[..., :r], Wt[..., :r, :]) + WD[..., r:] @ Wt[..., r:, :]


def _by_minv(model):
    """Whether :func:`aba_derivatives` takes ``H^-1`` from :func:`~sparsedyn.minv` and multiplies it
    by ``dtau/dx`` as dense blocks (:func:`_aba_derivatives_minv`) rather than by the factor ``W``."""
    return max(_depths(model)) >= _MINV_DEPTH


#: The depth (dofs on one path from the root) from which :func:`aba_derivatives` takes the
#: :func:`_aba_derivatives_minv` route: its program grows with ``n d`` (``n^2`` with the blocks),
#: the factor's with ``n d^2``.  Traced, a 30-dof chain: 125,000 operations against 146,000;
#: Unitree G1 (35 dofs, depth 16): 135,000 against 89,000.
_MINV_DEPTH = 24


def _depths(model):
    """The number of dofs on the path from the root to each dof, itself included."""
    d = []
    for p in dof_lambda(model):
        d.append(1 if p < 0 else d[p] + 1)
    return d or [0]


def _aba_derivatives_minv(model, q, v, tau, f_ext, g, symbolic):
    """:func:`aba_derivatives` as ``dqdd/dx = -H^-1 dtau/dx`` with ``H^-1`` from the recursive
    :func:`~sparsedyn.minv` (Carpentier and Mansard, 2018: ``O(n d)`` operations and a program of
    that size, where the factorization ``L^T D L`` and its inverse cost ``O(n d^2)`` each) and
    ``qdd`` from ABA.  A model with a joint whose motion subspace turns with ``q`` and no chain of
    constant ones (:func:`analytical_model`) takes ``dtau/dx`` from RNEA's program differentiated
    (:func:`~sparsedyn.derivatives`): ABA's program differentiated costs several times as much.  On a
    long chain ``H^-1`` and ``dtau/dx`` are dense: each product, ``n^3`` multiplications, is traced as
    one dense block (:func:`~sparsedyn.backend.matmul`), so that the compiled program grows with
    ``n^2``, not ``n^3``."""
    Minv = minv_kernel(model, q, check=None if symbolic else float_checker(model))
    qdd = aba_kernel(model, q, v, tau, f_ext, g, check=None if symbolic else float_checker(model))
    if varying_subspaces(model):                # (a composite joint: RNEA's program differentiated)
        dq, dv = derivatives(rnea, ("q", "v"))(model, q, v, qdd, f_ext=f_ext, gravity=g)
        shp = dq.shape[:-2]
    else:
        T, shp, dtype = _derivative_terms(model, q, v, qdd, f_ext, g, True)
        dq, dv = _assemble(model, T, shp, dtype)
    Minv = np.broadcast_to(Minv, shp + Minv.shape[-2:])
    nM = -Minv                  # (-a) b = -(a b) exactly: one negation per entry of H^-1, not two per product
    if Minv.ndim == 2:
        return bk.matmul(nM, dq), bk.matmul(nM, dv), Minv.copy()
    return nM @ dq, nM @ dv, Minv.copy()


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


def _free_roots(model):
    """``(cols, dofs, Sinv, armature, upper, rest)``: per root joint with six dofs, its dofs ``cols``,
    the dofs of its tree ``dofs`` (index arrays), ``S^-1`` (6, 6) (its motion subspace is invertible:
    ``H[:, cols] = P S + diag(armature)`` over the tree) and the armature of ``cols`` (6,); then the
    model's ``upper = triu_indices(nv, 1)`` and ``rest``, the dofs of no such joint
    (:attr:`~sparsedyn.model.topology.Topology.free_roots`)."""
    return model.topology.free_roots


def _static(model, q, f_ext, gravity):
    z = bk.zeros(q.shape[:-1] + (model.nv,), like=q)
    chained = analytical_model(model, f_ext)
    if chained is None:
        return derivatives(rnea, "q")(model, q, z, z, f_ext=f_ext, gravity=gravity)
    return rnea_derivative_kernel(chained[0], q, z, z, chained[1], gravity, velocity=False)


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
