"""Assembly: configurations, velocities and accelerations that satisfy the constraints.

* :func:`assemble` solves ``g(q) = 0`` by Newton's method (Gauss-Newton with the
  minimum-norm step for redundant rows) with a backtracking line search on
  ``|g|``, moving only the coordinates that are not held (``independent=``).
  Steps are taken in the velocity space and applied with ``Model.integrate``,
  so quaternions stay unit.  An unreachable configuration (the residual stops
  decreasing before it vanishes) raises :class:`AssemblyError` naming the rows.
* :func:`consistent_velocity` / :func:`consistent_acceleration` keep the
  independent components and solve ``G v = 0`` / ``G a + Gdot v = 0`` for the
  dependent ones (``v = gamma v_ind``); :func:`project_velocity` removes the
  constraint-violating part of any ``v`` with the smallest change.

One state per call; leading batch axes are looped over.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.configuration import integrate
from ._batch import loop
from .errors import AssemblyError, ConstraintError
from .partition import Partition, dof_indices, null_space, partition as choose_partition

__all__ = ["assemble", "newton", "consistent_velocity", "consistent_acceleration", "project_velocity"]


def _worst_rows(cs, g, k=3):
    order = np.argsort(-np.abs(g))[:k]
    return ", ".join(f"{cs.rows[i]} = {g[i]:+.3g}" for i in order if abs(g[i]) > 0)


def _held(cs, independent):
    if isinstance(independent, Partition):
        return independent.independent
    return dof_indices(cs.model, independent, "assemble(independent=...)")


def assemble(cs, q, *, independent=None, tol=1e-12, max_iter=50, max_step=0.5) -> np.ndarray:
    """A configuration near ``q`` with ``max |g| <= tol``.

    ``independent``: coordinates held at their values in ``q`` (joint names, dof
    indices, or a :class:`~.partition.Partition`, whose independent set is held);
    ``None`` moves every coordinate (the minimum-norm correction, a projection
    onto the constraint manifold).  ``max_step`` caps each Newton step (max-norm,
    rad or m) so that a step cannot jump to another assembly branch.
    """
    q = np.asarray(q, float)
    if q.ndim > 1:
        return np.stack([assemble(cs, x, independent=independent, tol=tol, max_iter=max_iter, max_step=max_step)
                         for x in q.reshape(-1, q.shape[-1])]).reshape(q.shape)
    return newton(cs, q, _held(cs, independent), tol, max_iter, max_step)[0]


def newton(cs, q, held, tol=1e-12, max_iter=50, max_step=0.5):
    """:func:`assemble`'s solver: ``(q, g(q), G(q))`` with the coordinates ``held`` (dof indices) fixed.

    Each iteration evaluates ``g`` and ``G`` in one kinematic pass; a full step
    that decreases ``|g|`` is accepted at the cost of that one pass.
    """
    model = cs.model
    free = np.setdiff1d(np.arange(model.nv), held)
    g, G, _ = cs.evaluate(q)
    for it in range(max_iter + 1):
        err = float(np.max(np.abs(g), initial=0.0))
        if err <= tol:
            return q, g, G
        if it == max_iter:
            break
        Gf = G[:, free]
        dx = -np.linalg.lstsq(Gf, g, rcond=None)[0]
        step = float(np.max(np.abs(dx), initial=0.0))
        if step > max_step:
            dx *= max_step / step
        dv = np.zeros(model.nv)
        dv[free] = dx
        norm, alpha = float(np.linalg.norm(g)), 1.0
        while alpha >= 2.0 ** -20:
            q_try = integrate(model, q, alpha * dv)
            g_try, G_try, _ = cs.evaluate(q_try)
            if np.linalg.norm(g_try) <= (1 - 1e-4 * alpha) * norm:
                break
            alpha *= 0.5
        else:
            grad = float(np.max(np.abs(Gf.T @ g), initial=0.0))
            raise AssemblyError(
                f"cannot assemble model {model.name!r}: the residual |g| = {err:.3g} stopped decreasing "
                f"after {it} Newton iterations ({_worst_rows(cs, g)}; |G^T g| = {grad:.3g}): the "
                f"configuration is unreachable with {len(held)} coordinate(s) held"
                + (f" ({', '.join(cs.dof_names[k] for k in held)})" if len(held) else "")
                + ", or the guess is too far from a solution")
        q, g, G = q_try, g_try, G_try
    raise AssemblyError(f"cannot assemble model {model.name!r}: |g| = {err:.3g} > tol = {tol:.3g} after "
                        f"{max_iter} Newton iterations ({_worst_rows(cs, g)}); the configuration may be "
                        f"unreachable or singular")


def _split(name, x, nv, part):
    """Independent values from a full vector (nv,) or an independent-only one (nv - r,)."""
    x = np.asarray(x, float)
    k = len(part.independent)
    if x.shape == (nv,):
        return x[part.independent], x
    if x.shape == (k,):
        return x, None
    raise ConstraintError(f"{name}: expected shape ({nv},) (all coordinates) or ({k},) (the independent ones "
                          f"{[part.dof_names[i] for i in part.independent]}), got {x.shape}")


def consistent_velocity(cs, q, v, partition=None) -> np.ndarray:
    """``v`` (nv,) with the independent components of ``v`` and ``G v = 0``.

    ``v``: all coordinates (dependent ones are overwritten) or only the
    independent ones (then give ``partition``).  ``partition`` defaults to
    :func:`~.partition.partition` at ``q``.  Leading batch axes are looped over.
    """
    q, v = np.asarray(q, float), np.asarray(v, float)
    if q.ndim > 1 or v.ndim > 1:
        return loop(lambda qq, vv: consistent_velocity(cs, qq, vv, partition), [(q, 1), (v, 1)])
    G = cs.jacobian(q)
    part = choose_partition(cs, q, G=G) if partition is None else partition
    v_ind, _ = _split("v", v, cs.nv, part)
    return null_space(G, part).gamma @ v_ind


def consistent_acceleration(cs, q, v, a, partition=None) -> np.ndarray:
    """``a`` (nv,) with the independent components of ``a`` and ``G a + Gdot v = 0``.

    ``a``: all coordinates or only the independent ones, as for :func:`consistent_velocity`.
    """
    q, v, a = np.asarray(q, float), np.asarray(v, float), np.asarray(a, float)
    if q.ndim > 1 or v.ndim > 1 or a.ndim > 1:
        return loop(lambda qq, vv, aa: consistent_acceleration(cs, qq, vv, aa, partition),
                    [(q, 1), (v, 1), (a, 1)])
    _, G, b = cs.evaluate(q, v)
    part = choose_partition(cs, q, G=G) if partition is None else partition
    a_ind, _ = _split("a", a, cs.nv, part)
    ns = null_space(G, part)
    out = ns.gamma @ a_ind
    out[part.dependent] -= ns.solve_dependent(b)
    return out


def project_velocity(cs, q, v, G=None) -> np.ndarray:
    """The velocity closest to ``v`` (Euclidean) with ``G v = 0``: ``v - G^+ G v``.

    ``G``: the Jacobian at ``q`` when already computed.
    """
    q, v = np.asarray(q, float), np.asarray(v, float)
    if G is None and (q.ndim > 1 or v.ndim > 1):
        return loop(lambda qq, vv: project_velocity(cs, qq, vv), [(q, 1), (v, 1)])
    G = cs.jacobian(q) if G is None else G
    return v - np.linalg.lstsq(G, G @ v, rcond=None)[0]
