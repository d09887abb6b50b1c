"""Sensitivities of an estimate: ``d(q, v, y)`` differentiated with respect to ``q``, ``v``, ``y``.

The online phase of an :class:`~sparsedyn.estimation.Estimator` (its one online
function: the sparse solve with its fixed elimination order, and for least squares the
small normal equations and the refinement step) is generic NumPy code; it is traced once per
estimator into a straight-line program and differentiated by
:func:`sparsedyn.derivatives` (reverse or forward mode, whichever the
Jacobian's shape favours).  ``dd/dy`` is how a measurement's error propagates
into every estimated variable (the estimate is linear in ``y``, so this matrix
is exact for any change of ``y``); ``dd/dq`` (tangent space, as everywhere) and
``dd/dv`` are how errors of the kinematic state do.  The derivatives are those
of the estimate's formula wherever the estimator's fixed pivots are valid (the
states where the compiled estimator would not fall back).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..algorithms.derivatives import derivatives

__all__ = ["estimate_derivatives"]


def _bare(st, q, v, ys, g, batch):
    return st.online(q, v, ys, g, batch, True) + (None,)


def _traced_estimate(est):
    """``fn(model, q, v, y) -> d`` (n,): the estimator's online phase (:meth:`Estimator._online`), one
    state, traced without checks."""
    g = _checks.gravity(est.model, None)
    if not est.square and est._basis is None:
        est._build_basis()

    def fn(model, q, v, y):
        return est._online(q, v, y, g, _bare)[0]
    fn.__name__ = f"estimate_{id(est):x}"
    return fn


def estimate_derivatives(estimator, q, v, y):
    """``(dd_dq, dd_dv, dd_dy)`` of the estimate ``d = estimator.solve(q, v, y).d``.

    Shapes ``(..., n, nv)``, ``(..., n, nv)``, ``(..., n, ny)`` (``n`` estimated variables in
    the problem's layout, ``ny`` measurements); ``dd_dq`` is on the tangent space.  Leading batch
    axes as for ``solve``.  The derivative program is built once per estimator.
    """
    d = estimator.__dict__.get("_derivative_function")     # kept on the estimator, which it refers to
    if d is None:
        p = estimator.problem
        d = derivatives(_traced_estimate(estimator), wrt=("q", "v", "y"),
                        inputs={"q": ("nq",), "v": ("nv",), "y": (p.ny,)}, outputs={"d": (estimator.n,)})
        estimator._derivative_function = d
    y = estimator.problem.check_measurements(y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = d(estimator.model, q, v, y)
    # The inputs are finite (checked), so a non-finite derivative is a zero pivot of the fixed order.
    ok = np.all([np.isfinite(x).all(axis=(-2, -1)) for x in out], axis=0)
    if not np.all(ok):
        where = "this state" if np.ndim(ok) == 0 else \
            f"state {tuple(int(i) for i in np.unravel_index(np.argmin(ok), np.shape(ok)))} of the batch (the first)"
        raise ValueError(f"estimate_derivatives: the estimator's fixed pivot order meets a zero pivot at "
                         f"{where}, where solve() takes its dense fallback (for instance a symmetric pose at "
                         f"rest); the derivative program is not defined there: differentiate at a nearby state")
    return out
