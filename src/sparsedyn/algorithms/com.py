"""Centre of mass: position, velocity, acceleration, Jacobian, and the subtree masses and centres.

Everything is gathered in world coordinates through each body's *first moment of
mass* ``h_i = m_i c_i`` (body frame, a model constant) placed in the world::

    hw_i = m_i p_i + R_i h_i          (world first moment of body i)
    c    = sum_i hw_i / M             (M = total mass)

Subtrees are contiguous index ranges, so one backward pass ``hw[parent] += hw[i]``
gives every subtree's first moment (Pinocchio's ``data.com[i]``, ``data.mass[i]``).
The CoM velocity is the total linear momentum over ``M``, its acceleration the rate
of that momentum (the linear part of ``I a + v x* I v`` per body, gravity not
included).  The CoM Jacobian has one column group per joint ``j``: the velocity of
the subtree's centre when only ``j`` moves, scaled by the subtree's share of the mass
(Orin, Goswami and Lee, *Centroidal dynamics of a humanoid robot*, 2013)::

    Jcom[:, j] = (m_sub(j) s_lin + s_ang x hw_sub(j)) / M,    [s_ang; s_lin] = 0_X_j S_j

Shapes: ``q`` (..., nq), ``v``/``a`` (..., nv); positions (..., 3) in world
coordinates, metres.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import apply_motion_inv, cross3, cross_force, rigid_apply, rigid_inertia
from .crba import apply_columns, result_dtype
from .kinematics import body_accelerations, joint_transforms, velocity_pass, world_transforms

__all__ = ["center_of_mass", "center_of_mass_velocity", "center_of_mass_acceleration", "com_jacobian",
           "subtree_masses", "subtree_centers_of_mass", "world_first_moments", "subtree_first_moments"]


def world_first_moments(model, X0):
    """``hw[i] = m_i p_i + R_i h_i`` (..., 3) for every body, world coordinates (kernel use)."""
    hw = []
    for i in range(model.nbodies):
        RI = rigid_inertia(model.inertia[i])
        R, p = np.swapaxes(X0[i].E, -1, -2), X0[i].r
        hw.append(RI.m * p + (R @ RI.h[..., None])[..., 0])
    return hw


def subtree_first_moments(model, hw):
    """First moments of every subtree (world coordinates): ``hw[parent] += hw[i]`` (kernel use)."""
    hs = list(hw)
    for i in range(model.nbodies - 1, -1, -1):
        p = model.parent[i]
        if p >= 0:
            hs[p] = hs[p] + hs[i]
    return hs


def subtree_masses(model) -> np.ndarray:
    """Mass of every subtree (NB,): body ``i`` and all its descendants (a model constant)."""
    _checks.model_first("subtree_masses", model, "model")
    return np.array([model.mass[i:model.subtree_end[i]].sum() for i in range(model.nbodies)])


def _total_mass(model):
    M = float(model.mass.sum())
    if not M > 0:
        raise ValueError(f"model {model.name!r} has no mass: its centre of mass is undefined")
    return M


def _roots(model):
    return [i for i in range(model.nbodies) if model.parent[i] < 0]


def _com(model, q):
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    hw = world_first_moments(model, X0)
    return Xup, S, X0, hw, sum(hw) * (1.0 / _total_mass(model))   # one constant factor, no division when traced


def _linear_momentum_world(model, X0, f):
    """Sum over bodies of the linear part of body-frame forces ``f[i]``, in world coordinates."""
    return sum((np.swapaxes(X0[i].E, -1, -2) @ f[i][..., 3:, None])[..., 0] for i in range(model.nbodies))


@kernel(inputs={"q": ("nq",)}, outputs={"com": (3,)})
def center_of_mass(model, q, v=None, a=None):
    """Centre of mass of the whole model, world coordinates.

    Returns ``com`` (..., 3) when only ``q`` is given, ``(com, vcom)`` with ``v``, and
    ``(com, vcom, acom)`` with ``v`` and ``a``: the outputs follow the state arrays
    given (as Pinocchio's ``centerOfMass(model, data, q[, v[, a]])`` fills ``com``,
    ``vcom``, ``acom``).  ``vcom``: CoM velocity (..., 3); ``acom``: CoM acceleration
    (..., 3), gravity not included.  ``a`` needs ``v``.
    """
    q = _checks.configuration(model, q)
    if v is None:
        if a is not None:
            raise TypeError("center_of_mass: a (joint accelerations) was given without v (joint velocities)")
        return np.broadcast_to(_com(model, q)[-1], q.shape[:-1] + (3,)).copy()
    v = _checks.velocity(model, v)
    if a is None:
        return center_of_mass_velocity(model, q, v)
    return center_of_mass_acceleration(model, q, v, a)


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"com": (3,), "vcom": (3,)})
def center_of_mass_velocity(model, q, v):
    """``(com, vcom)`` (..., 3) each: CoM position and velocity (see :func:`center_of_mass`)."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1))
    Xup, S, X0, _, com = _com(model, q)
    vb, _ = velocity_pass(model, Xup, S, v)
    p = [rigid_apply(rigid_inertia(model.inertia[i]), vb[i]) for i in range(model.nbodies)]
    vcom = _linear_momentum_world(model, X0, p) * (1.0 / _total_mass(model))
    return np.broadcast_to(com, shape + (3,)).copy(), np.broadcast_to(vcom, shape + (3,)).copy()


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, outputs={"com": (3,), "vcom": (3,), "acom": (3,)})
def center_of_mass_acceleration(model, q, v, a):
    """``(com, vcom, acom)`` (..., 3) each: CoM position, velocity and acceleration (gravity not
    included; see :func:`center_of_mass`)."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    a = _checks.vector(model, "a", a, model.nv, "nv joint accelerations")
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1), a=(a, 1))
    Xup, S, X0, _, com = _com(model, q)
    vb, ab = body_accelerations(model, Xup, S, v, a, q=q)
    M = _total_mass(model)
    I = [rigid_inertia(model.inertia[i]) for i in range(model.nbodies)]
    p = [rigid_apply(I[i], vb[i]) for i in range(model.nbodies)]
    vcom = _linear_momentum_world(model, X0, p) * (1.0 / M)
    # rate of momentum of body i, body frame: I a + v x* I v (Newton-Euler)
    dp = [rigid_apply(I[i], ab[i]) + cross_force(vb[i], p[i]) for i in range(model.nbodies)]
    acom = _linear_momentum_world(model, X0, dp) * (1.0 / M)
    return tuple(np.broadcast_to(x, shape + (3,)).copy() for x in (com, vcom, acom))


@kernel(inputs={"q": ("nq",)}, outputs={"Jcom": (3, "nv")})
def com_jacobian(model, q):
    """Jacobian (..., 3, nv) of the CoM velocity: ``vcom = Jcom v`` (Pinocchio's ``jacobianCenterOfMass``)."""
    q = _checks.configuration(model, q)
    Xup, S, X0, hw, _ = _com(model, q)
    hs = subtree_first_moments(model, hw)
    ms = subtree_masses(model)
    M = _total_mass(model)
    J = np.zeros(q.shape[:-1] + (3, model.nv), dtype=result_dtype(q))
    for j in range(model.nbodies):
        s = apply_columns(apply_motion_inv, X0[j], S[j])              # 0_X_j S_j (..., 6, nv_j), world origin
        w, lin = np.swapaxes(s[..., :3, :], -1, -2), np.swapaxes(s[..., 3:, :], -1, -2)
        col = ms[j] * lin + cross3(w, np.broadcast_to(hs[j][..., None, :], w.shape))
        J[..., :, model.v_slice(j)] = np.swapaxes(col, -1, -2) * (1.0 / M)
    return J


@kernel(inputs={"q": ("nq",)}, outputs={"com_subtree": ("nb", 3)})
def subtree_centers_of_mass(model, q):
    """Centre of mass (..., NB, 3) of every subtree (body ``i`` and its descendants), world coordinates.

    A subtree without mass has no centre of mass; its entry is its root body's origin.
    Masses: :func:`subtree_masses`.
    """
    q = _checks.configuration(model, q)
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    hs = subtree_first_moments(model, world_first_moments(model, X0))
    ms = subtree_masses(model)
    out = [hs[i] * (1.0 / ms[i]) if ms[i] > 0 else X0[i].r for i in range(model.nbodies)]
    return np.stack([np.broadcast_to(x, q.shape[:-1] + (3,)) for x in out], -2)
