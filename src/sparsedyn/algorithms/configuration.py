"""The configuration manifold: ``integrate`` (q (+) v) and ``difference`` (q1 (-) q0).

Joint by joint: vector joints add, quaternion joints use the exponential map of
their body-frame velocity (Sola, Deray, Atchuthan, "A micro Lie theory for
state estimation in robotics", 2018), as Pinocchio's ``integrate`` and
``difference`` do.  ``difference(model, q0, integrate(model, q0, v)) = v`` for
rotations up to pi.
"""

from __future__ import annotations


import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import kernel

__all__ = ["integrate", "difference", "integrate_derivatives", "difference_derivatives", "interpolate", "normalize"]


def _joined(model, parts, shape, n):
    if not parts:
        return np.zeros(shape + (n,))
    return np.concatenate([np.broadcast_to(p, shape + p.shape[-1:]) for p in parts], -1)


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"q_next": ("nq",)})
def integrate(model, q, v):
    """``q (+) v`` (..., nq): the configuration reached from ``q`` (..., nq) by following the
    velocity ``v`` (..., nv) for unit time (exponential map for quaternion joints, ``v`` in the
    body frame as everywhere)."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v, "v")
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1))
    parts = [j.integrate(q[..., model.q_slice(i)], v[..., model.v_slice(i)]) for i, j in enumerate(model.joints)]
    return _joined(model, parts, shape, model.nq)


@kernel(inputs={"q0": ("nq",), "q1": ("nq",)}, outputs={"v": ("nv",)})
def difference(model, q0, q1):
    """``q1 (-) q0`` (..., nv): the velocity that :func:`integrate` maps ``q0`` to ``q1`` with
    (the shortest rotation for quaternion joints)."""
    q0 = _checks.configuration(model, q0, "q0")
    q1 = _checks.configuration(model, q1, "q1")
    shape = _checks.batch_shape(q0=(q0, 1), q1=(q1, 1))
    parts = [j.difference(q0[..., model.q_slice(i)], q1[..., model.q_slice(i)]) for i, j in enumerate(model.joints)]
    return _joined(model, parts, shape, model.nv)


# --- derivatives of integrate and difference (issue 23) ------------------------------------------

def _joint_jacobians(model, method, x, y, shape, y_slice):
    """The two block-diagonal (..., nv, nv) matrices of ``joint.<method>(x_i, y_i)`` joint by joint
    (``x`` a configuration, ``y`` sliced by ``y_slice``).  The joints that keep the base class's
    method (vector joints: constant blocks, the state unread) are written in one assignment per
    matrix (:meth:`~sparsedyn.model.topology.Topology.constant_blocks`), the others one by one."""
    dtype = np.result_type(x, y, np.float64)
    out = (np.zeros(shape + (model.nv, model.nv), dtype=dtype), np.zeros(shape + (model.nv, model.nv), dtype=dtype))
    rows, cols, values, others = model.topology.constant_blocks(method)
    for o, val in zip(out, values):
        o[..., rows, cols] = val
    for i in others:
        j, sl = model.joints[i], model.v_slice(i)
        for o, B in zip(out, getattr(j, method)(x[..., model.q_slice(i)], y[..., y_slice(i)])):
            o[..., sl, sl] = B
    return out


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"d_dq": ("nv", "nv"), "d_dv": ("nv", "nv")})
def integrate_derivatives(model, q, v):
    """``(d_dq, d_dv)`` (..., nv, nv): the derivatives of :func:`integrate` on the tangent spaces
    (of ``q`` and of the result), block diagonal (Pinocchio's ``dIntegrate`` with ``ARG0`` and
    ``ARG1``).  Vector joints give identity blocks; a quaternion or planar joint ``q exp(v)`` gives
    ``Ad(exp(-v))`` and the right Jacobian ``Jr(v)`` of its group (SO(3), SE(3), SE(2))."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v, "v")
    return _joint_jacobians(model, "integrate_jacobians", q, v, _checks.batch_shape(q=(q, 1), v=(v, 1)), model.v_slice)


@kernel(inputs={"q0": ("nq",), "q1": ("nq",)}, outputs={"d_dq0": ("nv", "nv"), "d_dq1": ("nv", "nv")})
def difference_derivatives(model, q0, q1):
    """``(d_dq0, d_dq1)`` (..., nv, nv): the derivatives of :func:`difference` ``q1 (-) q0`` on the
    tangent spaces of ``q0`` and ``q1``, block diagonal (Pinocchio's ``dDifference`` with ``ARG0`` and
    ``ARG1``): ``-Jl(d)^-1`` and ``Jr(d)^-1`` at ``d = q1 (-) q0`` for the group joints, ``-1`` and
    ``1`` for the vector joints."""
    q0 = _checks.configuration(model, q0, "q0")
    q1 = _checks.configuration(model, q1, "q1")
    return _joint_jacobians(model, "difference_jacobians", q0, q1, _checks.batch_shape(q0=(q0, 1), q1=(q1, 1)),
                            model.q_slice)


# --- interpolation and normalisation (Pinocchio's interpolate / normalize) -------------------

@kernel(inputs={"q0": ("nq",), "q1": ("nq",), "t": ()}, outputs={"q": ("nq",)})
def interpolate(model, q0, q1, t):
    """The configuration (..., nq) at ``t`` (...) on the path from ``q0`` to ``q1`` (..., nq):
    ``integrate(q0, t * difference(q0, q1))`` joint by joint (straight lines for vector joints,
    the constant-velocity screw motion of SE(3) for a free joint, of SE(2) for a planar joint, the
    shortest rotation for a spherical joint), as Pinocchio's ``interpolate``; ``t = 0`` gives
    ``q0``, ``t = 1`` gives ``q1`` (a continuous joint's angle moves along the real line from
    ``q0`` to ``q1``, as :func:`difference` measures it; Pinocchio takes the shorter arc).
    ``t`` outside [0, 1] extrapolates."""
    q0 = _checks.configuration(model, q0, "q0")
    q1 = _checks.configuration(model, q1, "q1")
    t = _checks.numeric("t", t, "(...) (interpolation parameters)")
    tv = _checks.values(t)
    if tv is not None and not np.all(np.isfinite(tv)):
        raise ValueError("t: contains NaN or infinite values")
    shape = _checks.batch_shape(q0=(q0, 1), q1=(q1, 1), t=(t, 0))
    tt = t[..., None]
    parts = [j.integrate(q0[..., model.q_slice(i)], tt * j.difference(q0[..., model.q_slice(i)], q1[..., model.q_slice(i)]))
             for i, j in enumerate(model.joints)]
    return _joined(model, parts, shape, model.nq)


@kernel(inputs={"q": ("nq",)}, outputs={"q": ("nq",)}, unnormalized=("q",))
def normalize(model, q):
    """``q`` (..., nq) with every quaternion (spherical and free joints) scaled to unit norm; the
    other coordinates unchanged (Pinocchio's ``normalize``).  A zero quaternion is refused."""
    q = _checks.configuration(model, q, unit=False)
    parts = []
    for i, j in enumerate(model.joints):
        qi, start = q[..., model.q_slice(i)], 0
        for k in j.quaternions():
            quat = qi[..., k:k + 4]
            parts += [qi[..., start:k], quat / bk.sqrt(np.sum(quat * quat, -1, keepdims=True))]
            start = k + 4
        parts.append(qi[..., start:])
    return _joined(model, parts, q.shape[:-1], model.nq)
