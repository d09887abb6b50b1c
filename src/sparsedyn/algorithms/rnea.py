"""Recursive Newton-Euler algorithm (inverse dynamics), Featherstone RBDA Table 5.1.

``tau = rnea(model, q, v, a, f_ext)`` solves ``tau = H(q) a + C(q, v, f_ext)``.

Shapes: ``q`` (..., nq), ``v``/``a`` (..., nv), ``f_ext`` (..., NB, 6): one
spatial force ``[n; f]`` per body, *expressed in that body's frame* (the same
convention as Pinocchio's ``fext``), acting on the body.  Gravity is
``model.gravity`` (world frame) unless given.

The rotor inertia ``model.armature`` adds ``armature_i * qdd_i`` to each joint's
force (``tau_i = S_i^T f_i + armature_i qdd_i``); a joint whose armature is zero
gets no term at all.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from .kinematics import joint_transforms, velocity_pass, velocity_products
from ..model.spatial import apply_force_transpose, apply_motion, cross_force, mtv, mv, rigid_structure

__all__ = ["rnea", "generalized_gravity", "nonlinear_effects", "rnea_kernel", "rnea_passes", "armature_of",
           "armature_force"]


def armature_of(model, i):
    """Armature (nv_i,) of joint ``i``, or ``None`` when it is exactly zero (a structural zero: no term)."""
    arm = model.armature[model.v_slice(i)]
    return arm if np.any(arm) else None


def armature_force(model, i, qdd):
    """``armature_i * qdd_i`` (..., nv_i) for joint ``i`` (``qdd`` (..., nv)), or ``None`` without armature."""
    arm = armature_of(model, i)
    return None if arm is None else arm * qdd[..., model.v_slice(i)]


def rnea_passes(model, q, qd, qdd, f_ext=None, gravity=None):
    """Unchecked RNEA core: ``(v, a, f, tau)`` lists by body (backend-generic).

    ``v[i]``, ``a[i]``: body velocity and acceleration in body coordinates, ``a``
    including ``-g`` (the fictitious base acceleration); ``f[i]``: the spatial
    force transmitted from the parent across joint ``i`` (Nori's ``f_i``);
    ``tau[i]``: joint ``i``'s forces ``S_i^T f_i + armature_i qdd_i``.
    """
    g = model.gravity if gravity is None else gravity
    a_grav = np.concatenate([0 * g, g], -1)
    Xup, S = joint_transforms(model, q)
    v, vJ = velocity_pass(model, Xup, S, qd)
    c = velocity_products(model, q, qd, v, vJ)
    a, f = [None] * model.nbodies, [None] * model.nbodies
    for i in range(model.nbodies):
        aJ = mv(S[i], qdd[..., model.v_slice(i)])
        p = model.parent[i]
        if p < 0:
            a[i] = apply_motion(Xup[i], -a_grav) + aJ
        else:
            a[i] = apply_motion(Xup[i], a[p]) + aJ
        if c[i] is not None:
            a[i] = a[i] + c[i]
        I = rigid_structure(model.inertia[i])
        f[i] = mv(I, a[i]) + cross_force(v[i], mv(I, v[i]))
        if f_ext is not None:
            f[i] = f[i] - f_ext[..., i, :]
    tau = [None] * model.nbodies
    for i in range(model.nbodies - 1, -1, -1):
        tau[i] = mtv(S[i], f[i])
        rotor = armature_force(model, i, qdd)
        if rotor is not None:
            tau[i] = tau[i] + rotor
        p = model.parent[i]
        if p >= 0:
            f[p] = f[p] + apply_force_transpose(Xup[i], f[i])
    return v, a, f, tau


def rnea_kernel(model, q, qd, qdd, f_ext=None, gravity=None):
    """Unchecked RNEA: ``tau`` (..., nv); arrays of any backend with common leading axes."""
    tau = rnea_passes(model, q, qd, qdd, f_ext, gravity)[3]
    if not tau:                                   # no moving body: nothing to move, nv = 0
        return np.zeros(q.shape[:-1] + (0,), dtype=np.result_type(q, qd, qdd))
    shape = np.broadcast_shapes(*(t.shape[:-1] for t in tau))
    return np.concatenate([np.broadcast_to(t, shape + t.shape[-1:]) for t in tau], -1)


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, optional={"f_ext": ("nb", 6), "gravity": (3,)}, outputs={"tau": ("nv",)})
def rnea(model, q, v, a, f_ext=None, gravity=None):
    """Joint forces ``tau`` (..., nv) that produce accelerations ``a`` at state ``(q, v)``.

    ``f_ext`` (..., NB, 6): external spatial forces on each body, body frame.
    ``gravity`` (3,): overrides ``model.gravity`` (world frame, m/s^2).

    Example (a batch of 10 states; inverse dynamics undoes forward dynamics):

    >>> import numpy as np, sparsedyn as sd
    >>> model = sd.humanoid()
    >>> rng = np.random.default_rng(0)
    >>> q = np.stack([model.random_configuration(rng) for _ in range(10)])
    >>> v, a = rng.normal(size=(2, 10, model.nv))
    >>> tau = sd.rnea(model, q, v, a)
    >>> tau.shape
    (10, 35)
    >>> bool(np.allclose(sd.aba(model, q, v, tau), a))
    True
    """
    q, v, a, f_ext, g, shape, _ = _checks.dynamics(model, q, v, a, f_ext, gravity, "a", "nv joint accelerations")
    tau = rnea_kernel(model, q, v, a, f_ext, g)
    return np.broadcast_to(tau, shape + (model.nv,)).copy()


@kernel(inputs={"q": ("nq",)}, optional={"gravity": (3,)}, outputs={"g": ("nv",)})
def generalized_gravity(model, q, gravity=None):
    """``g(q)`` (..., nv): RNEA with zero velocity and acceleration."""
    q = _checks.configuration(model, q)
    z = np.zeros(q.shape[:-1] + (model.nv,), dtype=q.dtype)
    return rnea(model, q, z, z, gravity=gravity)


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, optional={"f_ext": ("nb", 6), "gravity": (3,)}, outputs={"C": ("nv",)})
def nonlinear_effects(model, q, v, f_ext=None, gravity=None):
    """``C(q, v)`` (..., nv): Coriolis, centrifugal, gravity (and external) forces: RNEA with a = 0."""
    v = _checks.velocity(model, v, "v")
    return rnea(model, q, v, np.zeros_like(v), f_ext=f_ext, gravity=gravity)
