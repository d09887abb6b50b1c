"""The free joint in the contact step: its linear velocity held in the world over a step, its body's
gyroscopic term taken backward.

A free joint's velocity is the body twist ``[omega; v]`` (child axes, ``v`` the velocity of the
child's origin).  Its equations of motion carry two velocity products: the transport term of the
turning axes (``v' + omega x v`` is the origin's acceleration in the world, in body axes) and the
gyroscopic torque ``omega x L``, ``L = I omega``.  Semi-implicit Euler on the body twist takes both
forward, and both then *add* energy at second order: ``|v - dt omega x v|^2 = |v|^2 + dt^2 |omega x
v|^2`` (a sphere rolling at 2 m/s and 20 rad/s is 6 % faster after 400 steps of 1 ms; a humanoid
tumbling to the floor gained up to 0.05 J in a step), and a torque-free asymmetric body gains
``dt^2 |omega x L|^2_(I^-1) / 2`` a step.

**Transport.**  The step solves for the velocity ``w`` in the axes the body has at the start of the
step (the *old axes*), where the origin's velocity is the world's, carried unchanged by the step but
for the forces (MuJoCo's free joint, whose linear velocity is the world's)::

    w   = v + dt (a + [0; omega x v]) + H^-1 J^T lambda       a = H^-1 (tau - C): ABA's
    q+  = q (+) dt w                                          (+ the split-impulse correction)
    v+  = [omega_w; exp(dt omega_w)^T v_w]                    the same velocity in the new axes

``J`` and ``H`` are those of the state at ``q``, whose body axes are the old axes, so the contact
problem keeps its form and its symmetric Delassus matrix ``G = J H^-1 J^T``.  For a floating-base
tree this is exactly the coordinate change ``y = [omega; R v]`` of the root (MuJoCo's), in which the
step is ``y + dt y'``.  The step turns the body about ``omega_w`` (``exp(dt omega_w)^T omega_w =
omega_w``), so only the linear part is re-expressed.  A body whose origin is its centre of mass then
changes its origin's world velocity by the forces alone: a sphere rolling without slipping keeps its
speed exactly.

**Gyroscopic term.**  Each free body's own ``omega x I omega`` (``I`` its rotational inertia about the
joint's origin) is taken backward: to ``w`` is added :func:`gyroscopic`, the torque-free backward
step ``(I - dt L x) omega_g = L`` less the forward one ``omega - dt I^-1 (omega x L)``.  For a single
body whose origin is its centre of mass, ``omega+ = omega_g + dt I^-1 tau`` and
``omega_g . I (omega_g - omega) = dt omega_g . (L x omega_g) = 0``, so its kinetic energy never grows
but by the torque's work: ``T(omega_g) = T(omega) - |omega_g - omega|^2_I / 2``; and since ``I^-1 L x``
is skew-adjoint in the ``I`` inner product, ``(1 - dt I^-1 L x)^-1`` does not lengthen, so a step
loses at most ``dt^2 |omega x L|^2_(I^-1) / 2``.  It is a function of ``v`` alone, added to the free
velocity: the impulses still act through ``H^-1`` (a backward term in the impulses' map would make
``G`` unsymmetric).  A tree's internal joints keep the forward velocity product, as MuJoCo's Euler
integrator does: their energy error stays of second order.

Weighed and not taken: rotating the body-frame velocity or momentum by ``exp(-dt omega)`` of the
old ``omega`` (what the linear part does here) also for the angular momentum: for an asymmetric
body it gains ``dt^2 |omega x L|^2_(I^-1) / 2`` a step as the forward term does; and a backward
transport term ``(1 + dt omega x) v+ = ...``, which loses a rolling sphere's speed at the rate the
forward term gains it.
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from ..model.joints import make_joint
from ..model.spatial import cross3, skew
from ..model.topology import model_store

__all__ = ["free_dofs", "transport", "transport_jacobian", "to_next_axes", "to_old_axes", "next_axes_jacobian",
           "gyroscopic", "gyroscopic_jacobian"]

_BALL = make_joint("spherical")


def free_dofs(model):
    """The first dof (``omega``'s) of each free joint of ``model``, a tuple."""
    return tuple(int(model.v_start[i]) for i, j in enumerate(model.joints) if j.type == "free")


def _free_bodies(model):
    """``(k, I, I^-1)`` of each free joint: its first dof, its body's rotational inertia (3, 3) about the
    joint's origin (child axes) and its inverse; made once per model (``model_store``)."""
    store = model_store(model, "free bodies")
    got = store.get("bodies")
    if got is None:
        got = store["bodies"] = [(int(model.v_start[i]), I, np.linalg.inv(I)) for i, j in enumerate(model.joints)
                                 if j.type == "free" for I in (np.asarray(model.inertia[i], float)[:3, :3],)]
    return got


def _parts(model, x):
    """``x`` (..., nv) cut at the free joints: ``[(None, rest) or (k, block6)]`` in order."""
    out, start = [], 0
    for k in free_dofs(model):
        out += [(None, x[..., start:k]), (k, x[..., k:k + 6])]
        start = k + 6
    return out + [(None, x[..., start:])]


def transport(model, v):
    """``[0; omega x v]`` (..., nv) on each free joint's dofs, zero elsewhere: what turns the body
    twist's acceleration into the old axes' (``v`` (..., nv); values or traced)."""
    parts = [0 * x if k is None else np.concatenate([0 * x[..., :3], cross3(x[..., :3], x[..., 3:])], -1)
             for k, x in _parts(model, v)]
    return np.concatenate(parts, -1)


def _rotate(model, w, dt, sign):
    """Each free joint's linear velocity of ``w`` (..., nv) turned by ``exp(dt omega)^T`` (``sign`` 1)
    or ``exp(dt omega)`` (-1), ``omega`` the joint's own; the rest as it is."""
    parts = []
    for k, x in _parts(model, w):
        if k is None:
            parts.append(x)
            continue
        Et = _BALL.integrate_jacobians(None, dt * x[..., :3])[0]          # exp(dt omega)^T
        E = Et if sign > 0 else np.swapaxes(Et, -1, -2)
        parts.append(np.concatenate([x[..., :3], (E @ x[..., 3:, None])[..., 0]], -1))
    return np.concatenate(parts, -1)


def to_next_axes(model, w, dt):
    """The next velocity ``v+`` (..., nv) of the step's velocity ``w`` in the old axes: each free
    joint's linear part turned into the axes after the step, ``exp(dt omega_w)^T v_w``."""
    return _rotate(model, w, dt, 1)


def to_old_axes(model, v_next, dt):
    """The inverse of :func:`to_next_axes` (``omega`` is the same in both axes)."""
    return _rotate(model, v_next, dt, -1)


def transport_jacobian(model, v):
    """``d transport / dv`` (..., nv, nv): ``-v x`` and ``omega x`` in each free joint's linear rows
    (values or traced)."""
    nv = v.shape[-1]
    out = np.zeros(v.shape[:-1] + (nv, nv), dtype=object if bk.is_symbolic(v) else float)
    for k in free_dofs(model):
        out[..., k + 3:k + 6, k:k + 3] = -skew(v[..., k + 3:k + 6])
        out[..., k + 3:k + 6, k + 3:k + 6] = skew(v[..., k:k + 3])
    return out


def next_axes_jacobian(model, w, dt):
    """``d to_next_axes(w) / dw`` (..., nv, nv) (values or traced): for a free joint's linear rows
    ``exp(th)^T`` on ``v_w`` and ``[exp(th)^T v_w] x Jr(th) dt`` on ``omega_w`` (``th = dt omega_w``,
    ``Jr`` the right Jacobian of SO(3): ``exp(th + d)^T = exp(-(Jr d) x) exp(th)^T``)."""
    symbolic = bk.is_symbolic(w)
    w = w if symbolic else np.asarray(w, float)
    nv = w.shape[-1]
    eye = np.eye(nv, dtype=int).astype(object) if symbolic else np.eye(nv)      # traced: exact 0 and 1
    out = np.broadcast_to(eye, w.shape[:-1] + (nv, nv)).copy()
    for k in free_dofs(model):
        Et, Jr = _BALL.integrate_jacobians(None, dt * w[..., k:k + 3])
        x = (Et @ w[..., k + 3:k + 6, None])[..., 0]
        out[..., k + 3:k + 6, k + 3:k + 6] = Et
        out[..., k + 3:k + 6, k:k + 3] = dt * (skew(x) @ Jr)
    return out


# --- the free body's gyroscopic term, backward -----------------------------------------------------

def _inverse3(A):
    """The inverse of ``A`` (..., 3, 3) by its cofactors (values or traced)."""
    c = [cross3(A[..., 1, :], A[..., 2, :]), cross3(A[..., 2, :], A[..., 0, :]), cross3(A[..., 0, :], A[..., 1, :])]
    det = np.sum(A[..., 0, :] * c[0], -1, keepdims=True)[..., None]
    return np.stack(c, -1) / det


def _gyro(I, Iinv, w, dt):
    """``(delta, A^-1, w_g)`` of one free body: ``A = I - dt L x``, ``L = I w``, ``w_g = A^-1 L``
    (the torque-free backward step) and ``delta = w_g - (w - dt I^-1 (w x L))`` (less the forward
    one), ``delta = -dt^2 A^-1 (L x I^-1 (w x L))`` (no cancellation)."""
    L = (I @ w[..., None])[..., 0]
    Ai = _inverse3(I - dt * skew(L))
    wL = cross3(w, L)
    delta = -dt * dt * (Ai @ cross3(L, (Iinv @ wL[..., None])[..., 0])[..., None])[..., 0]
    return delta, Ai, (Ai @ L[..., None])[..., 0]


def gyroscopic(model, v, dt):
    """The change ``delta`` (..., nv) that takes each free body's gyroscopic term ``w x I w`` backward
    in a step of ``dt`` (on its ``omega`` dofs, zero elsewhere; values or traced): the forward step
    gives ``w + dt I^-1 (tau - w x L)``, ``L = I w``, the backward one solves
    ``(I - dt L x) w+ = L + dt tau``; ``delta = w_g - (w - dt I^-1 (w x L))`` with ``w_g`` the
    torque-free backward step.  ``I`` the body's rotational inertia about the joint's origin.

    Why: ``w+ . I (w+ - w) = dt w+ . (L x w+) + dt w+ . tau``, the first zero, so the kinetic energy
    ``w+ . I w+ / 2 = w . I w / 2 + dt w+ . tau - |w+ - w|^2_I / 2`` never grows but by the torque's
    work (a body whose origin is its centre of mass; the forward term gains ``dt^2 |w x L|^2_(I^-1) / 2``
    a step)."""
    out = 0 * v
    for k, I, Iinv in _free_bodies(model):
        delta = _gyro(I, Iinv, v[..., k:k + 3], dt)[0]
        out = np.concatenate([out[..., :k], delta, out[..., k + 3:]], -1)
    return out


def gyroscopic_jacobian(model, v, dt):
    """``d gyroscopic / dv`` (..., nv, nv) (values or traced): per free body
    ``A^-1 (1 - dt w_g x) I - (1 - dt I^-1 (w x I - L x))`` on its ``omega`` dofs."""
    nv = v.shape[-1]
    out = np.zeros(v.shape[:-1] + (nv, nv), dtype=object if bk.is_symbolic(v) else float)
    for k, I, Iinv in _free_bodies(model):
        w = v[..., k:k + 3]
        _, Ai, wg = _gyro(I, Iinv, w, dt)
        L = (I @ w[..., None])[..., 0]
        forward = np.eye(3) - dt * (Iinv @ (skew(w) @ I - skew(L)))
        out[..., k:k + 3, k:k + 3] = Ai @ ((np.eye(3) - dt * skew(wg)) @ I) - forward
    return out
