"""The joints' passive forces: springs and viscous dampers of ``model.joint_dynamics``.

``tau_p = -stiffness * e(q) - damping * v`` (..., nv), per dof, with ``e`` the springs' stretch from
their rest configuration ``q_s`` (``joint_dynamics.spring_reference``) as MuJoCo measures it, so that
these are MuJoCo's ``qfrc_spring + qfrc_damper`` for the joints of an MJCF file:

* a hinge or a slide (any vector joint): ``q - q_s``; other joints: :func:`~sparsedyn.difference`
  ``q (-) q_s``;
* a ball joint: the rotation vector of ``R_s^T R`` (its own axes), which is ``q (-) q_s`` too;
* a free joint (``v = [omega; v_o]`` in its body's axes): the rotation vector of ``R_s^T R``, and the
  origin's displacement ``p - p_s`` in the world, as a force there (``R^T (p - p_s)`` in the body's axes).

Dry friction (``frictionloss``) is a constraint, not a force of the state, and is not among them.  No
dynamics algorithm adds them by itself: the simulator's step takes them where asked
(``sd.contact_step(..., passive=True)``).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.joints import make_joint
from ..model.spatial import quat_to_rot, skew
from .configuration import _joint_jacobians

__all__ = ["passive_forces", "passive_forces_derivatives"]

_BALL = make_joint("spherical")


def _state(model, q, v):
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v, "v")
    return q, v, _checks.batch_shape(q=(q, 1), v=(v, 1))


def _sprung(model):
    """Per joint ``(i, its q slice, its v slice, q_s of it)`` of the joints with a spring."""
    jd = model.joint_dynamics
    return [(i, model.q_slice(i), model.v_slice(i), jd.spring_reference[model.q_slice(i)])
            for i in range(len(model.joints)) if np.any(jd.stiffness[model.v_slice(i)] != 0.0)]


def _free_stretch(qi, ref):
    """A free joint's stretch ``[theta (3), R^T (p - p_s)]`` (..., 6) (module docstring)."""
    R = quat_to_rot(qi[..., 3:7])
    dp = qi[..., :3] - ref[:3]
    moved = (np.swapaxes(R, -1, -2) @ dp[..., None])[..., 0]
    return np.concatenate([_BALL.difference(np.broadcast_to(ref[3:7], qi[..., 3:7].shape), qi[..., 3:7]), moved], -1)


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"tau": ("nv",)})
def passive_forces(model, q, v):
    """The joints' passive forces ``tau_p`` (..., nv) [N m or N] at ``q`` (..., nq), ``v`` (..., nv):
    ``-stiffness * e(q) - damping * v`` (module docstring; MuJoCo's ``qfrc_spring + qfrc_damper``)."""
    q, v, shape = _state(model, q, v)
    jd = model.joint_dynamics
    tau = -jd.damping * v
    tau = np.broadcast_to(tau, shape + (model.nv,)).copy()
    for i, qs, vs, ref in _sprung(model):
        j, qi = model.joints[i], q[..., qs]
        e = _free_stretch(qi, ref) if j.type == "free" else j.difference(np.broadcast_to(ref, qi.shape), qi)
        tau[..., vs] = tau[..., vs] - jd.stiffness[vs] * e
    return tau


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"d_dq": ("nv", "nv"), "d_dv": ("nv", "nv")})
def passive_forces_derivatives(model, q, v):
    """``(d_dq, d_dv)`` (..., nv, nv): the derivatives of :func:`passive_forces`, ``d_dq`` on the
    tangent space at ``q`` (block diagonal: ``-stiffness`` times the stretch's derivative, the identity
    for hinges and slides), ``d_dv = -diag(damping)``."""
    q, v, shape = _state(model, q, v)
    jd = model.joint_dynamics
    ref = np.broadcast_to(jd.spring_reference, q.shape[:-1] + (model.nq,))
    E = _joint_jacobians(model, "difference_jacobians", ref, q, q.shape[:-1], model.q_slice)[1]
    for i, qs, vs, r in _sprung(model):
        if model.joints[i].type == "free":        # d theta / d omega: the ball's; d(R^T dp): [R^T dp]x, I
            qi = q[..., qs]
            e = _free_stretch(qi, r)
            E[..., vs, vs] = 0.0
            E[..., vs.start:vs.start + 3, vs.start:vs.start + 3] = _BALL.difference_jacobians(
                np.broadcast_to(r[3:7], qi[..., 3:7].shape), qi[..., 3:7])[1]
            E[..., vs.start + 3:vs.stop, vs.start:vs.start + 3] = skew(e[..., 3:])
            E[..., vs.start + 3:vs.stop, vs.start + 3:vs.stop] = np.eye(3)
    d_dq = -jd.stiffness[:, None] * E
    d_dv = np.zeros(shape + (model.nv, model.nv))
    d_dv[..., np.arange(model.nv), np.arange(model.nv)] = -jd.damping
    return np.broadcast_to(d_dq, shape + (model.nv, model.nv)).copy(), d_dv
