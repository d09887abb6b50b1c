"""The contact-by-contact updates of one projected Gauss-Seidel sweep of the friction solver (stage 5 of
:mod:`~sparsedyn.contact.friction_kernel`): each contact's normal impulse from its normal velocity, then
its tangential one projected onto the friction disc.  Written once for traced values (the compiled step)
and once, the same operations in the same order, on Python floats (:func:`_float_contact_sweep`): the
NumPy road runs thousands of such sweeps where ADMM leaves a state unsolved, each of ``3 nc`` sums of
``3 nc`` products, which element by element through NumPy scalars cost seconds a sweep at hundreds of
contacts."""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import backend as bk
from .friction_problem import _TINY, _relu, _step, _vmax
from .friction_residuals import scaled_residual

__all__ = ["contact_sweep", "stalled"]

#: Gauss-Seidel after ADMM stops where a window of ``WINDOW`` sweeps has not brought Coulomb's residuals
#: (relative to their stopping tests) below ``GAIN`` times what they were at its start: it creeps on
#: a degenerate problem, where its budget only burns time.  solo12 standing on its feet's near-duplicate
#: points: its residual falls by 4 % between sweeps 500 and 1000 and by 18 % over the next 9000.
WINDOW, GAIN = 500.0, 0.5


def contact_sweep(G, g, mu, lam):
    """The impulses (a list of ``m = 3 nc``) after one sweep from ``lam`` (m,) on ``G`` (m, m), ``g`` (m,)
    (the contacts' velocity ``u = G lam + g``) and the friction coefficients ``mu`` (nc,); traced values
    or float arrays (:func:`_float_contact_sweep`)."""
    if all(type(x) is np.ndarray and x.dtype == np.float64 for x in (G, g, mu, lam)):
        return _float_contact_sweep(G, g, mu, lam)
    m = G.shape[0]
    lam = list(lam)
    for i in range(len(mu)):
        t0, n = 3 * i, 3 * i + 2
        u = [sum(G[r, j] * lam[j] for j in range(m)) + g[r] for r in (t0, t0 + 1, n)]
        ln = _relu(lam[n] - u[2] / (_relu(G[n, n]) + _TINY))
        a, b, d = G[t0, t0], G[t0, t0 + 1], G[t0 + 1, t0 + 1]
        top = 0.5 * (a + d) + bk.sqrt(0.25 * (a - d) * (a - d) + b * b)    # largest eigenvalue of G_tt
        h = 1.0 / (_relu(top) + _TINY)
        lt = [lam[t0 + k] - h * (u[k] + G[t0 + k, n] * (ln - lam[n])) for k in range(2)]
        r = bk.sqrt(lt[0] * lt[0] + lt[1] * lt[1])
        cap = mu[i] * ln
        # onto the friction disc (cap = 0: exactly 0, not _TINY / r of the direction)
        f = cap / (_vmax([r, cap]) + _TINY)
        lam[t0], lam[t0 + 1], lam[n] = lt[0] * f, lt[1] * f, ln
    return lam


def contacts_in_use(G, g, lam):
    """The contacts of the float arrays ``G`` (m, m), ``g``, ``lam`` (m,) after which a sweep leaves every
    impulse zero to the bit: past them ``G``'s rows and columns and ``lam`` are zeros, the tangential
    ``g`` zero and the normal one in ``[0, 1e8]`` (an open contact: ``ln = relu(-g_n / tiny) = 0``, then
    ``lt = 0 - h 0``, ``f = 0``); their zero products change no update of the contacts before them."""
    t, n = g.reshape(-1, 3)[:, :2], g[2::3]
    busy = (G != 0.0).any(0) | (G != 0.0).any(1) | (lam != 0.0)
    busy = busy.reshape(-1, 3).any(1) | (t != 0.0).any(1) | ~((n >= 0.0) & (n <= 1e8))
    nz = np.flatnonzero(busy)
    return int(nz[-1]) + 1 if len(nz) else 0


def _float_contact_sweep(G, g, mu, lam):
    """:func:`contact_sweep` on float arrays, on Python floats (``_relu(x)`` is ``0.5 (x + |x|)``, the
    max of two ``a + relu(b - a)``, ``math.sqrt`` rounds as NumPy's), over the contacts in use
    (:func:`contacts_in_use`)."""
    k = contacts_in_use(G, g, lam)
    rows, gs, mus, lam = G[:3 * k, :3 * k].tolist(), g.tolist(), mu.tolist(), lam[:3 * k].tolist()
    for i in range(k):
        t0, n = 3 * i, 3 * i + 2
        u = [sum(map(operator.mul, rows[r], lam)) + gs[r] for r in (t0, t0 + 1, n)]
        x = lam[n] - u[2] / (0.5 * (rows[n][n] + abs(rows[n][n])) + _TINY)
        ln = 0.5 * (x + abs(x))
        a, b, d = rows[t0][t0], rows[t0][t0 + 1], rows[t0 + 1][t0 + 1]
        top = 0.5 * (a + d) + math.sqrt(0.25 * (a - d) * (a - d) + b * b)
        h = 1.0 / (0.5 * (top + abs(top)) + _TINY)
        lt = [lam[t0 + j] - h * (u[j] + rows[t0 + j][n] * (ln - lam[n])) for j in range(2)]
        r = math.sqrt(lt[0] * lt[0] + lt[1] * lt[1])
        cap = mus[i] * ln
        f = cap / ((r + 0.5 * ((cap - r) + abs(cap - r))) + _TINY)
        lam[t0], lam[t0 + 1], lam[n] = lt[0] * f, lt[1] * f, ln
    return lam + [0.0] * (len(g) - 3 * k)


def stalled(res, ls, vs, tol, it, mark, budget):
    """``(stop, mark)``: whether a sweep at iteration ``it`` ends a window of :data:`WINDOW` sweeps in which
    Gauss-Seidel after ADMM's ``budget`` iterations (none: ``solver="pgs"``, never stopped so) did not
    bring its scaled residual below :data:`GAIN` times that at the window's start, and the next window's
    mark ``[scaled residual, iteration]`` (``mark`` (2,): ``[0, 0]`` before the first window); ``res`` (3,)
    the residuals, ``ls``, ``vs`` their scales (:func:`~sparsedyn.contact.friction_residuals._converged`'s)."""
    r = scaled_residual(res, ls, vs, tol)
    first = 1.0 - _step(mark[1] - 0.5)                           # (the first window ends at once)
    end = 1.0 - (1.0 - first) * (1.0 - _step(it - mark[1] - WINDOW + 0.5))
    stop = end * _step(mark[1] - 0.5) * _step(r - GAIN * mark[0]) * _step(budget - 0.5)
    kind = object if bk.is_symbolic(mark) else float            # (traced values: an object array)
    return stop, np.array([end * r + (1.0 - end) * mark[0], end * it + (1.0 - end) * mark[1]], dtype=kind)
