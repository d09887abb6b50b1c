"""The position correction of the contact step (split impulse), written once for traced values (the step's
stage) and for Python floats (the derivatives' copy of the same sweeps).

The correction is a normal pseudo-impulse ``l`` (nc,) per contact whose velocity ``dv = H^-1 J_n^T l``
moves only the configuration (``q+ = q (+) dt (v+ + dv)``), found by projected Gauss-Seidel on the
normal block ``A = G_nn`` with ``c = gap / dt`` (where no point penetrates past ``PENETRATION_SLOP``,
``relu(gap) / dt``: rounding-size penetrations are left, as on their planes), ``w = A l + c`` (the
contacts' normal displacement over ``dt``)::

    free rows:    l >= 0  ⊥  w >= 0                         (a penetrating point is moved onto its plane)
    held rows:    w in [0, hi];  l > 0 => w = 0,  l < 0 => w = hi,  l = 0 inside

A *held* row is a load-bearing touching contact: its normal impulse in the step is nonzero and its gap
is below ``TOUCHING_GAP`` and above ``-PENETRATION_SLOP`` (no speculative term: the step has held it at
its gap, which the correction then closes to within the band below; a point penetrating past the slop
stays a free row, pushed out and free to rise: holding a deep one in the band too asks a rigid body's
redundant points for displacements no motion gives). Pushing one point out of its plane moves the rest
of a jointed body: a plain one-sided correction would lift the body's other resting points off their
planes by a fraction of the push, step after step, until one is a speculative contact whose push
``gap / dt`` no motion gives while the other points stick (a degenerate Coulomb problem on which the solver
creeps); and a point that the step stops within ``TOUCHING_GAP`` would hover there. So a held row may
pull (``l < 0``) as far as keeping its point within ``hi = SLOP / (2 dt)`` of the plane: half the slop,
so that the second-order motion of the integration keeps it below the slop. The band ``[0, hi]`` (not
``w = 0``) leaves a redundant set (a face's corners) a feasible set with an interior, and a point
already within it is not moved. The held rows are only those that carry load in the step's own solution,
whose normal velocity is zero, so the correction moves no point that the step separates.

Each row's update is the exact minimiser of its one-dimensional problem: with ``l_0 = l_i - w_i / A_ii``
(``w_i = 0``) and ``l_hi = l_0 + hi / A_ii`` (``w_i = hi``), ``l_i = relu(l_0) - held_i relu(-l_hi)``
(``l_0 < l_hi``: one of the three cases holds).
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend as bk
from .friction_problem import _TINY, PENETRATION_SLOP, TOUCHING_GAP, _abs, _relu, _step, _vmax

__all__ = ["correction_impulses", "held_rows"]

#: Sweeps and relative tolerance of the position correction's Gauss-Seidel.
CORRECTION_SWEEPS, CORRECTION_RTOL = 1000, 1e-6


def _array(xs, like):
    return np.asarray(xs, dtype=object if bk.is_symbolic(like) else float)


def held_rows(c, lam_n, lam_floor, dt):
    """The held rows (nc,) (1 or 0) of the correction: the contact's normal impulse ``lam_n`` above ``lam_floor`` (the step's
    ``tol`` times its impulse scale: not open) and its gap ``c dt`` in ``(-PENETRATION_SLOP, TOUCHING_GAP)``
    (touching: no speculative term, no penetration to remove); traced values or floats."""
    return (1.0 - _step(lam_floor - lam_n)) * (1.0 - _step(-PENETRATION_SLOP / dt - c)) * (1.0 - _step(c - TOUCHING_GAP / dt))


def _correction_sweep(A, c, l0, sweeps, held, hi):
    """One projected Gauss-Seidel sweep of the position correction (the module's problem) from ``l0``
    (nc,): ``(l, stop)``, ``stop`` 1 when ``l`` solves it to :data:`CORRECTION_RTOL` or this was sweep
    :data:`CORRECTION_SWEEPS` (``sweeps`` the ones before); ``held`` (nc,) the held rows, ``hi`` their
    upper bound of ``w``."""
    nc = len(c)
    act = _step(np.diagonal(A) - _TINY)
    l = list(l0)
    for i in range(nc):
        w = sum(A[i, j] * l[j] for j in range(nc)) + c[i]
        d = A[i, i] + (1.0 - act[i])
        lo = l[i] - act[i] * w / d
        l[i] = _relu(lo) - held[i] * _relu(-(lo + act[i] * hi / d))
    l = _array(l, A)
    w = A @ l + c
    held = np.asarray(held)
    off = _relu(-w) + held * _relu(w - hi)
    done = _step(CORRECTION_RTOL * _vmax(_relu(-c) + held * _relu(c - hi)) - _vmax(off)) * \
        _step(CORRECTION_RTOL * _vmax(_abs(l)) - _vmax(_abs(l - l0)))
    return l, 1.0 - (1.0 - done) * (1.0 - _step(sweeps + 1.0 - CORRECTION_SWEEPS))


def correction_impulses(A, c, held=None, hi=0.0):
    """The position correction's normal impulses (B, nc) of the step for ``A`` (B, nc, nc) (``G``'s
    normal block), ``c`` (B, nc) (``gap / dt``) and the held rows ``held`` (B, nc) (:func:`held_rows`;
    None: none) with their bound ``hi``: the sweeps of the step's own stage (:func:`_correction_sweep`),
    the same operations in the same order on Python floats (a float's ``_relu`` and ``_vmax`` without
    the tracing layer around each operation)."""
    out = np.zeros(c.shape)
    held = np.zeros(c.shape) if held is None else np.broadcast_to(held, c.shape)
    for b in range(c.shape[0]):
        out[b] = _float_sweeps(A[b], c[b], held[b], float(hi))
    return out


def _float_sweeps(A, c, held, hi):
    """:func:`correction_impulses` of one state (``A`` (nc, nc), ``c``, ``held`` (nc,) floats)."""
    relu = (lambda x: 0.5 * (x + abs(x)))                           # noqa: E731  (_relu of a float)
    step = (lambda x: 0.5 * (1.0 + math.copysign(1.0, x)))          # noqa: E731

    def vmax(xs):                                                   # _vmax: pairwise a + relu(b - a)
        xs = list(xs)
        while len(xs) > 1:
            xs = [a + relu(b - a) for a, b in zip(xs[::2], xs[1::2])] + xs[len(xs) - len(xs) % 2:]
        return xs[0]
    nc = len(c)
    rows, cs, hs = A.tolist(), c.tolist(), [float(x) for x in held]
    act = [step(rows[i][i] - _TINY) for i in range(nc)]
    cmax = vmax([relu(-x) + h * relu(x - hi) for x, h in zip(cs, hs)])
    l, sweeps = [0.0] * nc, 0.0
    while True:
        l0 = list(l)
        for i, row in enumerate(rows):
            w = sum([a * x for a, x in zip(row, l)]) + cs[i]
            d = row[i] + (1.0 - act[i])
            lo = l[i] - act[i] * w / d
            l[i] = relu(lo) - hs[i] * relu(-(lo + act[i] * hi / d))
        w = (A @ np.array(l) + c).tolist()
        off = [relu(-x) + h * relu(x - hi) for x, h in zip(w, hs)]
        done = step(CORRECTION_RTOL * cmax - vmax(off)) * \
            step(CORRECTION_RTOL * vmax([abs(x) for x in l]) - vmax([abs(x - y) for x, y in zip(l, l0)]))
        if 1.0 - (1.0 - done) * (1.0 - step(sweeps + 1.0 - CORRECTION_SWEEPS)) >= 0.5:
            return l
        sweeps += 1.0
