"""Constrained inverse dynamics by null-space projection (*Inverse dynamics with holonomic
constraints*, cassie-ik-id documentation, cassie-ik-id.readthedocs.io).

Equations (``nv`` dofs, ``m`` constraint rows of rank ``r``, ``nu`` actuators)::

    M a + h = B u + J^T f + G^T lambda,      G a + Gdot v = 0

``tau_req = M a + h - J^T f`` is one RNEA call with the external forces.
Projecting onto the null space of ``G`` (``gamma``, see :mod:`.partition`)
eliminates ``lambda``::

    A u = y,   A = gamma^T B  (nv - r, nu),   y = gamma^T tau_req

* fully actuated (``A`` square, invertible): ``u = A^-1 y``.  When the
  independent coordinates are the actuated ones and ``B`` selects them, ``A = I``
  and this is the seed's feedback-cancellation law ``u = gamma^T tau_req``;
* over-actuated (``rank A = nv - r < nu``, redundantly actuated parallel
  robots, a biped in double support): the minimum-norm ``u``, or the one
  minimising ``u^T W u`` with ``weights`` ``W``;
* under-actuated (``rank A < nv - r``): the least-squares ``u``; the part of
  ``tau_req`` nobody can produce is returned as ``residual`` and
  ``feasible=False`` (a warning, or an error with ``on_infeasible="raise"``).

The constraint forces follow from the dependent rows: ``(G^T lambda)[dep] =
(tau_req - B u)[dep]``, with minimum-norm ``lambda`` for redundant rows (see
:class:`~.partition.NullSpace`).  ``lambda`` is the generalised force the
constraint rows exert (``G^T lambda``); for a :class:`~.frames.PointCoincidence`
it is the force on point A in world axes, for a weld the wrench ``[n; f]`` on
frame A about its origin, world axes.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from .. import _checks
from ..algorithms.rnea import rnea
from .errors import ConstraintError, InfeasibleActuationError, InfeasibleActuationWarning, PartitionError
from .partition import Partition, dof_indices, null_space, partition as choose_partition

__all__ = ["actuation_matrix", "InverseDynamics", "constrained_inverse_dynamics"]

#: Relative tolerance on ``|G a + Gdot v|`` for a given a, and on the residual for ``feasible``.
CONSISTENCY_RTOL = 1e-8


def actuation_matrix(model, actuated=None) -> np.ndarray:
    """``B`` (nv, nu) selecting the actuated dofs (joint names or dof indices; ``None``: every dof)."""
    idx = np.arange(model.nv) if actuated is None else dof_indices(model, actuated, "actuated")
    B = np.zeros((model.nv, len(idx)))
    B[idx, np.arange(len(idx))] = 1.0
    return B


class InverseDynamics(NamedTuple):
    """Result of :func:`constrained_inverse_dynamics` (one state)."""

    u: np.ndarray           # (nu,) actuator efforts
    lam: np.ndarray         # (m,) constraint forces (minimum norm for redundant rows)
    a: np.ndarray         # (nv,) the consistent accelerations used
    residual: np.ndarray    # (nv,) tau_req - B u - G^T lam: the generalised force nobody produced
    regime: str             # "fully actuated" | "over-actuated" | "under-actuated"
    feasible: bool          # residual within tolerance
    partition: Partition


def _selection(B):
    """Dof index per column if ``B`` is a 0/1 selection matrix, else None."""
    if not np.all((B == 0) | (B == 1)) or not np.all(B.sum(0) == 1) or np.any(B.sum(1) > 1):
        return None
    return np.argmax(B, axis=0)


def _min_norm(A, y, weights):
    """``u`` minimising ``|A u - y|`` and then ``u^T W u``: ``u = L^-T (A L^-T)^+ y`` with ``W = L L^T``."""
    nu = A.shape[1]
    if weights is None:
        Lt = np.eye(nu)
    else:
        W = np.asarray(weights, float)
        W = np.diag(W) if W.ndim == 1 else W
        if W.shape != (nu, nu):
            raise ConstraintError(f"weights: expected shape ({nu},) or ({nu}, {nu}) for {nu} actuators, got {W.shape}")
        try:
            Lt = np.linalg.cholesky(W).T                 # W = Lt^T Lt
        except np.linalg.LinAlgError:
            raise ConstraintError("weights: must be positive (definite)") from None
    AL = np.linalg.solve(Lt.T, A.T).T                  # A Lt^-1
    z, *_ = np.linalg.lstsq(AL, y, rcond=None)
    return np.linalg.solve(Lt, z)


def _id_one(cs, q, v, a, B, f_ext, weights, part, on_infeasible):
    model = cs.model
    nv = model.nv
    q, v, a = np.asarray(q, float), np.asarray(v, float), np.asarray(a, float)
    sel = _selection(B)
    _, G, b = cs.evaluate(q, v)
    if part is None:
        part = choose_partition(cs, q, G=G)
        k = nv - part.rank
        if sel is not None and B.shape[1] == k and not np.array_equal(np.sort(sel), part.independent):
            try:                                  # the seed's choice: actuated coordinates independent
                part = choose_partition(cs, q, independent=np.sort(sel), G=G)
            except PartitionError:
                pass
    ns = null_space(G, part)
    k = nv - part.rank
    if a.shape == (nv,):
        viol = float(np.max(np.abs(G @ a + b), initial=0.0))
        scale = float(np.max(np.abs(G), initial=0.0)) * float(np.max(np.abs(a), initial=0.0)) \
            + float(np.max(np.abs(b), initial=0.0)) + 1.0
        if viol > CONSISTENCY_RTOL * scale:
            raise ConstraintError(
                f"a is not consistent with the constraints: |G a + Gdot v| = {viol:.3g}; give the "
                f"independent accelerations (with partition=) or use consistent_acceleration()")
    elif a.shape == (k,):
        full = ns.gamma @ a
        full[part.dependent] -= ns.solve_dependent(b)
        a = full
    else:
        raise ConstraintError(f"a: expected shape ({nv},) (consistent accelerations) or ({k},) (independent "
                              f"accelerations, in the order of partition.independent), got {a.shape}")
    tau_req = rnea(model, q, v, a, f_ext)
    y = ns.gamma.T @ tau_req
    A = ns.gamma.T @ B
    nu = B.shape[1]
    if sel is not None and nu == k and np.array_equal(sel, part.independent):
        u, regime = y.copy(), "fully actuated"          # A = I: u = gamma^T tau_req
    else:
        s = np.linalg.svd(A, compute_uv=False)
        rank_A = int(np.sum(s > 1e-10 * max(s.max(initial=0.0), 1e-300))) if s.size else 0
        if rank_A == k and nu == k:
            u, regime = np.linalg.solve(A, y), "fully actuated"
        else:
            u = _min_norm(A, y, weights)
            regime = "over-actuated" if rank_A == k else "under-actuated"
    f = tau_req - B @ u
    lam = ns.multipliers(f[part.dependent])
    residual = f - G.T @ lam
    tol = CONSISTENCY_RTOL * max(1.0, float(np.max(np.abs(tau_req), initial=0.0)))
    res = float(np.max(np.abs(residual), initial=0.0))
    feasible = res <= tol
    if not feasible and on_infeasible != "ignore":
        worst = np.argsort(-np.abs(residual))[:3]
        msg = (f"under-actuated inverse dynamics of model {model.name!r}: the {nu} actuators cannot produce the "
               f"requested motion; least-squares efforts leave a residual generalised force of {res:.3g} "
               f"({', '.join(f'{cs.dof_names[i]} {residual[i]:+.3g}' for i in worst)})")
        if on_infeasible == "raise":
            raise InfeasibleActuationError(msg)
        warnings.warn(msg, InfeasibleActuationWarning, stacklevel=_checks.user_stacklevel())
    return InverseDynamics(u, lam, a, residual, regime, bool(feasible), part)


def constrained_inverse_dynamics(cs, q, v, a, *, actuated=None, B=None, f_ext=None, weights=None,
                                 partition=None, on_infeasible="warn") -> InverseDynamics:
    """Actuator efforts ``u`` and constraint forces ``lambda`` for a constrained motion.

    ``cs``: :class:`~.base.ConstraintSet`; ``q`` (nq,), ``v`` (nv,) consistent
    (``g(q) = 0``, ``G v = 0``; see :mod:`sparsedyn.constraints.assembly`).  ``a``: consistent
    accelerations (nv,) (checked), or the independent ones (nv - r,) in the
    order of ``partition.independent`` (then ``partition`` is required).
    Actuation: ``actuated`` (joint names / dof indices) or an explicit ``B``
    (nv, nu); default every dof.  ``f_ext`` (NB, 6): external forces per body,
    body frame, as :func:`~sparsedyn.algorithms.rnea.rnea`.  ``weights`` (nu,) or (nu, nu):
    minimise ``u^T W u`` when over-actuated.  ``on_infeasible``: ``"warn"``
    (default), ``"raise"`` or ``"ignore"`` for an under-actuated request that
    cannot be met.  Leading batch axes are looped over (fields stacked).
    """
    model = cs.model
    if on_infeasible not in ("warn", "raise", "ignore"):
        raise ValueError(f"on_infeasible: expected 'warn', 'raise' or 'ignore', got {on_infeasible!r}")
    if B is not None and actuated is not None:
        raise ValueError("give either actuated= or B=, not both")
    B = actuation_matrix(model, actuated) if B is None else np.asarray(B, float)
    if B.ndim != 2 or B.shape[0] != model.nv:
        raise ConstraintError(f"B: expected shape ({model.nv}, nu), got {B.shape}")
    if a is not None and np.ndim(a) == 1 and np.shape(a)[0] != model.nv and partition is None:
        raise ConstraintError("a holds independent accelerations only: give partition= to say which")
    q, v, a = np.asarray(q, float), np.asarray(v, float), np.asarray(a, float)
    if q.ndim == 1 and v.ndim == 1 and a.ndim == 1:
        return _id_one(cs, q, v, a, B, f_ext, weights, partition, on_infeasible)
    from ._batch import loop
    return loop(lambda qq, vv, aa, ff: _id_one(cs, qq, vv, aa, B, ff, weights, partition, on_infeasible),
                [(q, 1), (v, 1), (a, 1), (f_ext, 2)])
