"""Kinetic, potential and mechanical energy.

``T = 1/2 sum_i v_i . I_i v_i + 1/2 sum_k armature_k v_k^2`` (body frames and the rotors'
inertia; equal to ``1/2 v^T H(q) v`` with ``H`` holding the armature, as :func:`~sparsedyn.crba`) and
``U = -sum_i m_i g . c_i = -g . sum_i hw_i`` (world first moments, see
:mod:`.com`), zero at the world origin, as Pinocchio's ``computeKineticEnergy``
and ``computePotentialEnergy``.  Joules; ``q`` (..., nq), ``v`` (..., nv);
``gravity`` (3,) overrides ``model.gravity`` (world frame, m/s^2).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import rigid_apply, rigid_inertia
from .com import world_first_moments
from .kinematics import joint_transforms, velocity_pass, world_transforms
from .rnea import armature_of

__all__ = ["kinetic_energy", "potential_energy", "mechanical_energy"]


def _kinetic(model, Xup, S, v):
    vb, _ = velocity_pass(model, Xup, S, v)
    T = sum(np.sum(vb[i] * rigid_apply(rigid_inertia(model.inertia[i]), vb[i]), -1) for i in range(model.nbodies))
    for i in range(model.nbodies):                # the rotors spin with their dofs
        arm = armature_of(model, i)
        if arm is not None:
            vi = v[..., model.v_slice(i)]
            T = T + np.sum(arm * vi * vi, -1)             # a product, not ** 2: traced values have no power
    return 0.5 * T


def _potential(model, X0, g):
    return -np.sum(sum(world_first_moments(model, X0)) * g, -1)


def _state(model, q, v, gravity):
    q = _checks.configuration(model, q)
    v = None if v is None else _checks.velocity(model, v)
    g = _checks.gravity(model, gravity)
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1), gravity=(None if gravity is None else g, 1))
    return q, v, g, shape


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"T": ()})
def kinetic_energy(model, q, v):
    """Kinetic energy ``T`` (...): ``1/2 v^T H(q) v``, the rotors' armature included (as Pinocchio's
    ``computeKineticEnergy``)."""
    q, v, _, shape = _state(model, q, v, None)
    Xup, S = joint_transforms(model, q)
    return np.broadcast_to(_kinetic(model, Xup, S, v), shape).copy()


@kernel(inputs={"q": ("nq",)}, optional={"gravity": (3,)}, outputs={"U": ()})
def potential_energy(model, q, gravity=None):
    """Gravitational potential energy ``U`` (...): ``-sum_i m_i g . c_i`` (zero at the world origin)."""
    q, _, g, shape = _state(model, q, None, gravity)
    Xup, _ = joint_transforms(model, q)
    return np.broadcast_to(_potential(model, world_transforms(model, Xup), g), shape).copy()


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, optional={"gravity": (3,)}, outputs={"E": ()})
def mechanical_energy(model, q, v, gravity=None):
    """Mechanical energy ``T + U`` (...) (:func:`kinetic_energy` plus :func:`potential_energy`)."""
    q, v, g, shape = _state(model, q, v, gravity)
    Xup, S = joint_transforms(model, q)
    E = _kinetic(model, Xup, S, v) + _potential(model, world_transforms(model, Xup), g)
    return np.broadcast_to(E, shape).copy()
