"""Constrained forward dynamics by null-space projection, with Baumgarte stabilisation.

Unknowns ``a`` (nv) and ``lambda`` (m) of::

    M a + C = tau + G^T lambda,         G a = -(Gdot v + 2 alpha G v + beta^2 g)

(``C = h - J^T f``: :func:`~sparsedyn.algorithms.crba.HandC` with the external forces;
``alpha = beta = 0`` without stabilisation).  With ``gamma`` and the thin QR
``G_dep = Q R_dep`` of :mod:`.partition`::

    a = gamma a_ind + a_p,       a_p[dep] = -R_dep^-1 Q^T c,  a_p[ind] = 0
    (gamma^T M gamma) a_ind = gamma^T (tau - C - M a_p)
    lambda = Q R_dep^-T (M a + C - tau)[dep]          (minimum norm)

``gamma^T M gamma`` is the (nv - r)-square inertia in the independent
coordinates, symmetric positive definite (solved with NumPy's LAPACK: SciPy's
triangular solvers are far slower on such small matrices when threads compete).  Baumgarte's terms pull a drifting
state back to the manifold (``g'' + 2 alpha g' + beta^2 g = 0``, critically
damped for ``alpha = beta``); they vanish on consistent states, so the result
is then the exact inverse of :func:`~.inverse.constrained_inverse_dynamics`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.crba import HandC
from ..algorithms.ltdl import spd_inverse
from .errors import ConstraintError
from .partition import Partition, null_space, partition as choose_partition, unpivoted_null_space

__all__ = ["ForwardDynamics", "constrained_forward_dynamics", "accelerations_in_null_space", "partitioned_forward"]


class ForwardDynamics(NamedTuple):
    """Result of :func:`constrained_forward_dynamics` (one state)."""

    a: np.ndarray         # (nv,)
    lam: np.ndarray         # (m,) constraint forces (minimum norm for redundant rows)
    partition: Partition


def accelerations_in_null_space(H, C, tau, c, ns, solve=np.linalg.solve):
    """``(a, lambda)`` of ``H a + C = tau + G^T lambda``, ``G a = -c`` (the module docstring's
    equations) for the null space ``ns`` of ``G``: a :class:`~.partition.NullSpace`, or an
    :class:`~.partition.UnpivotedNullSpace` with ``solve(A, y) = spd_inverse(A) @ y`` (traced).
    ``solve(A, y)``: ``A^-1 y`` for the symmetric positive definite reduced inertia."""
    dep = ns.partition.dependent
    a_p = np.zeros(H.shape[-1], dtype=H.dtype)
    a_p[dep] = -ns.solve_dependent(c)
    gam = ns.gamma
    Mr = gam.T @ H @ gam
    a = gam @ solve(Mr, gam.T @ (tau - C - H @ a_p)) + a_p
    lam = ns.multipliers((H @ a + C - tau)[dep])
    return a, lam


def _stabilised(G, b, g, v, baumgarte):
    """``c = Gdot v`` plus Baumgarte's terms ``2 alpha G v + beta^2 g`` (``baumgarte=(alpha, beta)``)."""
    if baumgarte is None:
        return b
    alpha, beta = baumgarte
    return b + 2.0 * alpha * (G @ v) + beta * beta * g


def _spd_solve(A, y):
    return spd_inverse(A) @ y


def partitioned_forward(cs, part, q, v, tau, f_ext=None, baumgarte=None):
    """``(a, lambda, check)`` of the constrained forward dynamics for the partition ``part`` with
    ``G`` of full row rank, written for the tracer (:mod:`.compiled`): the null space of
    :func:`~.partition.unpivoted_null_space` (``check``: ``|G_dep G_dep^-1 - I|_F^2``), the reduced
    inertia inverted by :func:`~sparsedyn.algorithms.ltdl.spd_inverse`; ``baumgarte=(alpha, beta)``
    (numbers) adds the stabilisation terms."""
    H, C = HandC(cs.model, q, v, f_ext)
    g, G, b = cs.evaluate(q, v)
    ns = unpivoted_null_space(G, part)
    a, lam = accelerations_in_null_space(H, C, tau, _stabilised(G, b, g, v, baumgarte), ns, _spd_solve)
    return a, lam, ns.check


def _fd_one(cs, q, v, tau, f_ext, baumgarte, part):
    fast = getattr(cs, "forward_dynamics_kernel", None)      # a compiled constraint set (sparsedyn.compile)
    if fast is not None and part is not None and f_ext is None and baumgarte is None:
        res = fast(part, q, v, tau)
        if res is not None:
            return ForwardDynamics(res[0], res[1], part)
    H, C = HandC(cs.model, q, v, f_ext)
    g, G, b = cs.evaluate(q, v)
    if part is None:
        part = choose_partition(cs, q, G=G)
    a, lam = accelerations_in_null_space(H, C, tau, _stabilised(G, b, g, v, baumgarte), null_space(G, part))
    return ForwardDynamics(a, lam, part)


def constrained_forward_dynamics(cs, q, v, tau=None, *, f_ext=None, baumgarte=None,
                                 partition=None) -> ForwardDynamics:
    """Accelerations ``a`` and constraint forces ``lambda`` under generalised forces ``tau``.

    ``cs``: :class:`~.base.ConstraintSet`; ``q`` (nq,), ``v`` (nv,), ``tau``
    (nv,) generalised joint forces (default zero; with actuators use
    ``B @ u``, see :func:`~.inverse.actuation_matrix`); ``f_ext`` (NB, 6)
    external forces per body, body frame.  ``baumgarte=(alpha, beta)`` (1/s)
    adds the stabilisation terms.  ``partition``: default chosen at ``q``.
    Leading batch axes are looped over.
    """
    model = cs.model
    q, v = np.asarray(q, float), np.asarray(v, float)
    tau = np.zeros(model.nv) if tau is None else np.asarray(tau, float)
    if tau.shape[-1:] != (model.nv,):
        raise ConstraintError(f"tau: expected shape (..., {model.nv}) (generalised forces), got {tau.shape}")
    if baumgarte is not None:
        try:
            alpha, beta = (float(x) for x in baumgarte)
        except (TypeError, ValueError):
            raise ConstraintError(f"baumgarte: expected (alpha, beta), got {baumgarte!r}") from None
        baumgarte = (alpha, beta)
    if q.ndim == 1 and v.ndim == 1 and tau.ndim == 1:
        return _fd_one(cs, q, v, tau, f_ext, baumgarte, partition)
    from ._batch import loop
    return loop(lambda qq, vv, tt, ff: _fd_one(cs, qq, vv, tt, ff, baumgarte, partition),
                [(q, 1), (v, 1), (tau, 1), (f_ext, 2)])
