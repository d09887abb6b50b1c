"""Test-side references for the sparse-system tests, written independently of sparsedyn.sparse.

* :func:`rnea_intermediates`: RNEA (Featherstone Table 5.1) returning every body's
  acceleration ``a_i`` and joint wrench ``f_i`` besides ``tau`` -- the same
  recursion as :func:`sparsedyn.rnea`, kept here so that rnea.py's public
  behaviour does not change;
* :func:`dense_newton_euler`: the rows ``c(3a), c(3f), c(3tau)`` of Nori's eq. (4)
  and their ``b``, assembled densely with 6x6 matrices (``crm``/``crf``,
  ``motion_matrix``/``force_matrix``) -- an independent check of the
  worst-case pattern and of the value and right-hand-side kernels.
"""

import numpy as np

import sparsedyn as sd
from sparsedyn import spatial as sp
from sparsedyn.algorithms.kinematics import joint_transforms
from erd import ROBOTS, load_pair
from conftest import random_trees


def joint_bias(model, i, q, qd):
    """``cJ_i = Sdot_i qd_i`` (..., 6) of joint ``i`` (the joint's own term; 0 for a constant S)."""
    cJ = model.joints[i].bias(q[..., model.q_slice(i)], qd[..., model.v_slice(i)])
    return 0.0 if cJ is None else cJ


def varying_dof_pivots(model, known=()):
    """``{"qdd[joint]", ...}``: the dof pivots of the articulated order that cannot be proven nonzero
    offline, those of ``D_i = S_i^T IA_i S_i`` of a joint whose ``S`` depends on ``q`` (it loses rank at
    some states: an Euler-angle joint's gimbal lock) whose acceleration is not among ``known``
    (body indices or joint names).  The unproven pivots of a structure are ``{col.rsplit(".", 1)[0]
    for _, col in st.unproven_pivots()}``."""
    known = {model.joint_names.index(i) if isinstance(i, str) else int(i) for i in known}
    return {f"qdd[{model.joint_names[i]}]" for i, j in enumerate(model.joints)
            if i not in known and j.nv and not j.constant_subspace}


def unproven(st):
    """The variables of ``st``'s unproven pivots (``"qdd[joint]"``, ...)."""
    return {col.rsplit(".", 1)[0] for _, col in st.unproven_pivots()}


def rnea_intermediates(model, q, qd, qdd, f_ext=None, gravity=None):
    """``(a, f, tau)``: (..., NB, 6), (..., NB, 6), (..., nv), body coordinates."""
    g = model.gravity if gravity is None else np.asarray(gravity, float)
    a_grav = np.concatenate([0 * g, g])
    Xup, S = joint_transforms(model, q)
    NB = model.nbodies
    v, a, f = [None] * NB, [None] * NB, [None] * NB
    for i in range(NB):
        vJ = (S[i] @ qd[..., model.v_slice(i), None])[..., 0]
        aJ = (S[i] @ qdd[..., model.v_slice(i), None])[..., 0] + joint_bias(model, i, q, qd)
        X = sp.motion_matrix(Xup[i])
        p = model.parent[i]
        if p < 0:
            v[i] = vJ
            a[i] = (X @ -a_grav) + aJ
        else:
            v[i] = (X @ v[p][..., None])[..., 0] + vJ
            a[i] = (X @ a[p][..., None])[..., 0] + aJ + (sp.crm(v[i]) @ vJ[..., None])[..., 0]
        I = model.inertia[i]
        f[i] = (I @ a[i][..., None])[..., 0] + (sp.crf(v[i]) @ (I @ v[i][..., None]))[..., 0]
        if f_ext is not None:
            f[i] = f[i] - f_ext[..., i, :]
    for i in range(NB - 1, -1, -1):
        p = model.parent[i]
        if p >= 0:
            f[p] = f[p] + (np.swapaxes(sp.motion_matrix(Xup[i]), -1, -2) @ f[i][..., None])[..., 0]
    shape = np.broadcast_shapes(*(x.shape[:-1] for x in a + f))
    A = np.stack([np.broadcast_to(x, shape + (6,)) for x in a], -2)
    F = np.stack([np.broadcast_to(x, shape + (6,)) for x in f], -2)
    tau = np.concatenate([(np.swapaxes(S[i], -1, -2) @ F[..., i, :, None])[..., 0] for i in range(NB)], -1)
    return A, F, tau


def dense_newton_euler(model, q, qd, gravity=None):
    """Dense ``D`` (12 NB + nv, 18 NB + 2 nv) and ``b`` of eq. (4)/(5) at one float state.

    Column order ``[a | f | tau | fx | qdd]``, row order ``[c(3a) | c(3f) | c(3tau)]``,
    each kind by body, as in :mod:`sparsedyn.sparse.variables`.
    """
    NB, nv = model.nbodies, model.nv
    g = model.gravity if gravity is None else np.asarray(gravity, float)
    a0 = -np.concatenate([0 * g, g])
    Xup, S = joint_transforms(model, q)
    ca, cf, ct, cx, cq = 0, 6 * NB, 12 * NB, 12 * NB + nv, 18 * NB + nv
    ra, rf, rt = 0, 6 * NB, 12 * NB
    D = np.zeros((12 * NB + nv, 18 * NB + 2 * nv))
    b = np.zeros(12 * NB + nv)
    v = [None] * NB
    for i in range(NB):
        X = np.asarray(sp.motion_matrix(Xup[i]), float)
        sv, Si = model.v_slice(i), S[i]
        vJ = Si @ qd[sv]
        p = model.parent[i]
        r, c = slice(ra + 6 * i, ra + 6 * i + 6), slice(ca + 6 * i, ca + 6 * i + 6)
        D[r, c] = -np.eye(6)
        D[r, cq + sv.start:cq + sv.stop] = Si
        if p < 0:
            v[i] = vJ
            b[r] = X @ a0 + joint_bias(model, i, q, qd)
        else:
            v[i] = X @ v[p] + vJ
            D[r, ca + 6 * p:ca + 6 * p + 6] = X
            b[r] = sp.crm(v[i]) @ vJ + joint_bias(model, i, q, qd)
            rp = slice(rf + 6 * p, rf + 6 * p + 6)
            D[rp, cf + 6 * i:cf + 6 * i + 6] = np.asarray(sp.force_matrix(sp.inverse(Xup[i])), float)
        r = slice(rf + 6 * i, rf + 6 * i + 6)
        D[r, cf + 6 * i:cf + 6 * i + 6] = -np.eye(6)
        D[r, c] = model.inertia[i]
        D[r, cx + 6 * i:cx + 6 * i + 6] = -np.eye(6)
        b[r] = sp.crf(v[i]) @ model.inertia[i] @ v[i]
        r = slice(rt + sv.start, rt + sv.stop)
        D[r, ct + sv.start:ct + sv.stop] = -np.eye(Si.shape[1])
        D[r, cf + 6 * i:cf + 6 * i + 6] = Si.T
    return D, b


def robot_cases():
    return [(name, fb) for name in sorted(ROBOTS) for fb in (False, True)]


_CACHE = {}


def robot(name, fb):
    if (name, fb) not in _CACHE:
        _CACHE[name, fb] = load_pair(name, fb)[0]
    return _CACHE[name, fb]


def all_models():
    """``(id, model)`` for the random trees of conftest and every example robot, fixed and floating."""
    out = [(f"tree{k}", m) for k, m in enumerate(random_trees())]
    out += [(f"{n}-{'floating' if fb else 'fixed'}", robot(n, fb)) for n, fb in robot_cases()]
    return out


def random_states(model, rng, n):
    q = np.stack([model.random_configuration(rng) for _ in range(n)])
    return q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


def fd_singular(model):
    """True when some joint's subtree cannot resist its motion (ABA's SingularInertiaError)."""
    q = model.neutral()
    try:
        sd.aba(model, q, np.zeros(model.nv), np.zeros(model.nv))
    except sd.SingularInertiaError:
        return True
    return False
