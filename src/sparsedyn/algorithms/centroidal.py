"""Centroidal dynamics: momentum about the centre of mass, the centroidal momentum matrix ``A_G``,
its bias ``Adot_G v``, and the centroidal composite inertia.

Orin, Goswami and Lee, *Centroidal dynamics of a humanoid robot*, 2013.  The
centroidal momentum ``h_G = [k_G; l]`` is the spatial momentum of the whole model
about its centre of mass ``c``, in world axes, angular first (our spatial
convention; Pinocchio's ``data.hg`` holds the same two 3-vectors linear first).

Each body's momentum ``I_i v_i`` (body frame) is moved to the world origin with
``0_X_i^*`` and summed into ``h_O``; then ``k_G = k_O - c x l``.  ``A_G`` has one
column group per joint ``j``: the momentum of the composite body of ``j``'s subtree
(``IC_j``, CRBA's composite inertia) moving with ``S_j``::

    A_G[:, j] = G_X_0^* 0_X_j^* IC_j S_j

The rate of the momentum is ``sum_i 0_X_i^* (I_i a_i + v_i x* I_i v_i)`` (gravity
not included), moved to the CoM the same way: ``c`` moves with the linear momentum,
so ``d/dt (c x l) = c x dl/dt``.  With ``a = 0`` it is ``Adot_G v``.

Shapes: ``q`` (..., nq), ``v``/``a`` (..., nv).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import (RigidInertia, Transform, apply_force_transpose, cross3, cross_force, rigid_add, rigid_apply, rigid_inertia,
                       rigid_inertia_matrix, rigid_transform)
from .. import backend as bk
from .com import _com, _roots
from .crba import apply_columns, composite_inertias, inertia_columns, result_dtype
from .kinematics import body_accelerations, velocity_pass

__all__ = ["centroidal_momentum", "centroidal_momentum_rate", "centroidal_momentum_matrix",
           "centroidal_momentum_matrix_dot_v", "centroidal_composite_inertia"]


def _about(c, h_O):
    """Spatial force (..., 6) at the world origin, world axes -> about the point ``c`` (..., 3)."""
    return np.concatenate([h_O[..., :3] - cross3(c, h_O[..., 3:]), h_O[..., 3:]], -1)


def _momentum_and_rate(model, q, v, a):
    """``(h_G, hdot_G)``: centroidal momentum and its rate (``a`` may be None: no rate)."""
    Xup, S, X0, _, com = _com(model, q)
    if a is None:
        vb, ab = velocity_pass(model, Xup, S, v)[0], None
    else:
        vb, ab = body_accelerations(model, Xup, S, v, a, q=q)
    I = [rigid_inertia(model.inertia[i]) for i in range(model.nbodies)]
    p = [rigid_apply(I[i], vb[i]) for i in range(model.nbodies)]
    h_O = sum(apply_force_transpose(X0[i], p[i]) for i in range(model.nbodies))
    if a is None:
        return _about(com, h_O), None
    dp = [rigid_apply(I[i], ab[i]) + cross_force(vb[i], p[i]) for i in range(model.nbodies)]
    hdot_O = sum(apply_force_transpose(X0[i], dp[i]) for i in range(model.nbodies))
    return _about(com, h_O), _about(com, hdot_O)


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"h_G": (6,)})
def centroidal_momentum(model, q, v):
    """Centroidal momentum ``h_G = [k_G; l]`` (..., 6): angular momentum about the CoM and linear
    momentum, world axes (Pinocchio's ``computeCentroidalMomentum``, whose ``Force`` is ``[l; k_G]``)."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1))
    return np.broadcast_to(_momentum_and_rate(model, q, v, None)[0], shape + (6,)).copy()


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, outputs={"h_G": (6,), "hdot_G": (6,)})
def centroidal_momentum_rate(model, q, v, a):
    """``(h_G, hdot_G)`` (..., 6) each: centroidal momentum and its time derivative ``A_G a + Adot_G v``
    (Pinocchio's ``computeCentroidalMomentumTimeVariation``).  Gravity is not included: with gravity
    and external wrenches, ``hdot_G`` equals their total wrench about the CoM."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    a = _checks.vector(model, "a", a, model.nv, "nv joint accelerations")
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1), a=(a, 1))
    h, hdot = _momentum_and_rate(model, q, v, a)
    return np.broadcast_to(h, shape + (6,)).copy(), np.broadcast_to(hdot, shape + (6,)).copy()


@kernel(inputs={"q": ("nq",)}, outputs={"A_G": (6, "nv")})
def centroidal_momentum_matrix(model, q):
    """Centroidal momentum matrix ``A_G`` (..., 6, nv), rows ``[k_G; l]``: ``h_G = A_G v``
    (Orin's CMM; Pinocchio's ``ccrba``, whose rows are ``[l; k_G]``)."""
    q = _checks.configuration(model, q)
    Xup, S, X0, _, com = _com(model, q)
    IC = composite_inertias(model, Xup)
    A = np.zeros(q.shape[:-1] + (6, model.nv), dtype=result_dtype(q))
    for j in range(model.nbodies):
        F = apply_columns(apply_force_transpose, X0[j], inertia_columns(IC[j], S[j]))    # 0_X_j^* IC_j S_j
        F = np.swapaxes(_about(com[..., None, :], np.swapaxes(F, -1, -2)), -1, -2)
        A[..., :, model.v_slice(j)] = F
    return A


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"Adot_G_v": (6,)})
def centroidal_momentum_matrix_dot_v(model, q, v):
    """``Adot_G v`` (..., 6), rows ``[k_G; l]``: the rate of the centroidal momentum at zero joint
    acceleration (Pinocchio's ``dccrba`` times ``v``)."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1))
    hdot = _momentum_and_rate(model, q, v, bk.zeros(v.shape, like=v))[1]
    return np.broadcast_to(hdot, shape + (6,)).copy()


@kernel(inputs={"q": ("nq",)}, outputs={"I_G": (6, 6)})
def centroidal_composite_inertia(model, q):
    """Centroidal composite rigid-body inertia ``I_G`` (..., 6, 6): the inertia of the whole model
    locked in its current configuration, about the CoM, world axes, angular first
    ``[[I_rot, 0], [0, M 1]]`` (Pinocchio's ``data.Ig``; ``h_G = I_G v_G`` defines the average
    spatial velocity ``v_G``)."""
    q = _checks.configuration(model, q)
    Xup, S, X0, _, com = _com(model, q)
    IC = composite_inertias(model, Xup)
    I_O = None
    for r in _roots(model):
        Ir = rigid_transform(X0[r], IC[r])                 # root_X_0^T IC_r root_X_0: world origin, world axes
        I_O = Ir if I_O is None else rigid_add(I_O, Ir)
    E = np.broadcast_to(np.eye(3), com.shape[:-1] + (3, 3))
    I_G = rigid_transform(Transform(E, -com), I_O)        # to the CoM (world axes)
    I_G = RigidInertia(I_G.m, np.zeros(I_G.h.shape), I_G.I)   # the first moment about the CoM is zero
    return np.broadcast_to(rigid_inertia_matrix(I_G), q.shape[:-1] + (6, 6)).copy()
