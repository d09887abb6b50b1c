"""Derivatives of constrained forward dynamics for a fixed constraint set.

The accelerations ``qdd`` and multipliers ``lambda`` of
:func:`~sparsedyn.constrained_forward_dynamics` (without Baumgarte terms) are the
root of the residual::

    r1 = rnea(q, v, qdd, f_ext) - tau - G(q)^T lambda = 0      (nv rows)
    r2 = G(q) qdd + Gdot v                            = 0      (m rows)

By the implicit function theorem, ``d(qdd, lambda)/dx = -K^+ dr/dx`` with
``K = dr/d(qdd, lambda) = [[H, -G^T], [G, 0]]`` and ``x`` one of ``q``
(tangent space, as everywhere), ``v``, ``tau``.  The residual is a kernel
(RNEA and the constraints' Jacobians and bias terms, traced once per
constraint set), differentiated by :func:`sparsedyn.derivatives`; only the
small solve with ``K`` is numeric.  ``qdd``'s derivatives are unique even for
redundant constraint rows; ``lambda``'s are then the minimum-norm solution's.

Constraints written over NumPy (points, welds, couplings) trace;
:class:`~.user.UserConstraint` (arbitrary Python) does not and is refused.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.derivatives import derivatives
from ..algorithms.rnea import rnea
from ._kinematics import kinematics
from .errors import ConstraintError
from .forward import constrained_forward_dynamics
from .user import UserConstraint

__all__ = ["ForwardDynamicsDerivatives", "constrained_forward_dynamics_derivatives"]



class ForwardDynamicsDerivatives(NamedTuple):
    """Result of :func:`constrained_forward_dynamics_derivatives` (one state); each (rows, nv)."""

    dqdd_dq: np.ndarray
    dqdd_dv: np.ndarray
    dqdd_dtau: np.ndarray
    dlam_dq: np.ndarray
    dlam_dv: np.ndarray
    dlam_dtau: np.ndarray


def _residual_derivative(cs, with_fext):
    # Kept on the set itself (the function refers to it: a weak-keyed table would never let it go).
    table = cs.__dict__.setdefault("_derivative_functions", {})
    d = table.get(with_fext)
    if d is not None:
        return d
    bad = [c.name for c in cs.constraints if isinstance(c, UserConstraint)]
    if bad:
        raise ConstraintError(f"constrained_forward_dynamics_derivatives: user constraints {bad} are arbitrary "
                              "Python functions that cannot be traced; write them with the traceable "
                              "constraint types (PointCoincidence, PointOnGround, Weld, JointCoupling)")
    model, nv = cs.model, cs.model.nv

    def residual(model_, q, v, tau, qdd, lam, f_ext=None):
        kin = kinematics(model, q, v) if cs._kin else None
        shape = ()
        G = cs._stack([np.asarray(c.jacobian(kin, q)) for c in cs.constraints], shape, (nv,))
        b = cs._stack([np.asarray(c.bias(kin, q, v)) for c in cs.constraints], shape, ())
        r1 = rnea(model, q, v, qdd, f_ext) - tau - G.T @ lam
        return np.concatenate([r1, G @ qdd + b])

    residual.__name__ = f"constraint_residual_{id(cs):x}"
    inputs = {"q": ("nq",), "v": ("nv",), "tau": ("nv",), "qdd": ("nv",), "lam": (cs.m,)}
    d = derivatives(residual, wrt=("q", "v", "tau", "qdd", "lam"), inputs=inputs,
                    outputs={"r": (nv + cs.m,)}, optional={"f_ext": ("nb", 6)})
    table[with_fext] = d
    return d


def constrained_forward_dynamics_derivatives(cs, q, v, tau=None, *, f_ext=None,
                                             partition=None) -> ForwardDynamicsDerivatives:
    """Derivatives of :func:`~sparsedyn.constrained_forward_dynamics` (no Baumgarte terms) at one state.

    ``q`` (nq,), ``v`` (nv,), ``tau`` (nv,) (default zero), ``f_ext`` (NB, 6) held constant.
    Returns ``dqdd_dq`` (tangent space), ``dqdd_dv``, ``dqdd_dtau`` (nv, nv) and the same for
    ``lambda`` (m, nv).  The derivative program is built once per constraint set.
    """
    model = cs.model
    tau = np.zeros(model.nv) if tau is None else np.asarray(tau, float)
    res = constrained_forward_dynamics(cs, q, v, tau, f_ext=f_ext, partition=partition)
    if np.ndim(res.a) != 1:
        raise ConstraintError("constrained_forward_dynamics_derivatives: one state at a time (q (nq,), v (nv,))")
    d = _residual_derivative(cs, f_ext is not None)
    Jq, Jv, Jt, Jqdd, Jlam = d(model, q, v, tau, res.a, res.lam, f_ext)
    K = np.concatenate([Jqdd, Jlam], 1)
    sol = -np.linalg.lstsq(K, np.concatenate([Jq, Jv, Jt], 1), rcond=None)[0]
    nv = model.nv
    dx, dl = sol[:nv], sol[nv:]
    return ForwardDynamicsDerivatives(dx[:, :nv], dx[:, nv:2 * nv], dx[:, 2 * nv:],
                                      dl[:, :nv], dl[:, nv:2 * nv], dl[:, 2 * nv:])
