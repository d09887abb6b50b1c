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
from ..kernels import kernel

__all__ = ["integrate", "difference"]


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
