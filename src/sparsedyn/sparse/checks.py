"""The safety checks of the online phase: pivot and backward-error tests, float and traced.

The online phase (:meth:`Structure.solve <sparsedyn.sparse.Structure.solve>`) factors every
block with a *static* pivot order.  A pivot that is not proven nonzero by the offline phase is
tested at run time, and so is each such block's normwise backward error:

* float input (:class:`Monitor`): a pivot ``|u_kk| <= PIVOT_RTOL *`` (the largest magnitude among
  the pivot's original value, its L column and U row), or a block solve with
  ``max|A_K z - r| / (max(|A_K| |z|) + max|r|) > BERR_TOL`` marks the state, which is then
  re-solved with pivoting;
* traced input (:func:`checked_solve`, what ``sparsedyn.compile`` builds): the IR has no ``abs`` or
  ``max``, so the kernel returns per-state *check values*, one per test, each positive only when a
  bound that is more pessimistic than the float test passes (safety factors :data:`MARGIN`,
  :data:`BERR_MARGIN` for rounding):

  - per checked block, ``1/2 + sum_k (copysign(1, c_k) - 1)`` over its pivots, with
    ``c_k = piv^2 - (MARGIN PIVOT_RTOL)^2 (piv^2 + init^2 + sum l^2 + sum u^2)`` (the sum of squares
    bounds the squared scale ``max(|piv|, |init|, max|l|, max|u|)^2``): positive exactly when every
    ``c_k`` is (a zero pivot, ``c_k = +0``, makes the result infinite, which fails too), one value
    per block instead of one per pivot, so a batch writes and reads a few values per state;
  - per checked block (``m`` rows) and right-hand side
    ``c (sum (a z)^4 + sum rhs^4) - sum res^4`` with ``c = (BERR_TOL / BERR_MARGIN)^4 / (2 m)``
    (``res = A_K z - rhs``, ``a z`` the block's products: 4-norms bound the max-norms of the
    backward error), and ``1 / (sum (a z)^4 + sum rhs^4 + sum res^4)`` (zero when those overflow).

  A state with a check value that is not positive (NaN included) or a result that is not finite
  goes back to the float path, which warns, falls back or raises as it does without compilation;
  every other state passes the float tests too (up to the rounding the margins cover).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from .. import backend as bk
from ..symbolic.ir import Sym

__all__ = ["PIVOT_RTOL", "BERR_TOL", "MARGIN", "BERR_MARGIN", "Monitor", "Recorder", "checked_solve", "check_count",
           "sumpow"]

#: A checked pivot at most this fraction of its scale marks the state for the pivoted fallback.
PIVOT_RTOL = 1e-10
#: A checked block solve with a larger normwise backward error marks the state.
BERR_TOL = 1e-10
#: The safety factor of the traced pre-checks.  A pivot ratio bound below ``MARGIN * PIVOT_RTOL`` (or a
#: conditioning bound below ``MARGIN * RANK_RTOL``, least squares) sends the state to the float path.
MARGIN = 4.0
#: The same for a backward error bound above ``BERR_TOL / BERR_MARGIN`` (the 4-norm bound is already
#: pessimistic by up to ``(2 m)^(1/4)``; a smaller factor spares false alarms).
BERR_MARGIN = 2.0


#: Values the pending pivot tests of a :class:`Monitor` may hold before they are run (memory bound).
_HOLD = 1 << 20


class Monitor:
    """Float-only pivot and backward-error checks of one batched solve (``mode``: ``"auto"`` checks
    the blocks with an unproven pivot, ``"all"`` every block, ``"none"`` none).

    Results: ``bad`` (batch) the states that failed a test, ``ratio`` the smallest ``|pivot| / scale``,
    ``berr`` the largest backward error, ``first`` ``(block, pivot or None, value)`` of the first test
    that failed (in the order the tests come), ``checked`` the blocks checked.

    :meth:`pivot` records what it is shown; a block's pivots are tested together, in one vectorised
    pass, when another block's pivot or a backward error comes, a result is read or they hold
    :data:`_HOLD` values (a block of a few hundred pivots of a few states costs a few NumPy calls,
    not a few thousand; the decisions and values are those of testing each pivot as it comes:
    maxima are exact)."""

    def __init__(self, mode, batch):
        self.mode = mode
        self._bad = np.zeros(batch, bool)
        self._ratio = np.full(batch, np.inf)
        self.berr = np.zeros(batch)
        self.checked = 0
        self._first = None
        self._pending = []                  # (blk, k, |piv|, |init|, lvals, uvals) of one block
        self._held = 0                      # values they hold

    def wants(self, blk):
        return self.mode == "all" or (self.mode == "auto" and not blk.proven)

    @property
    def bad(self):
        self._flush()
        return self._bad

    @property
    def ratio(self):
        self._flush()
        return self._ratio

    @property
    def first(self):
        self._flush()
        return self._first

    def pivot(self, blk, k, piv, init, lvals, uvals):
        """Pivot ``k`` of block ``blk``: its value ``piv`` and original value ``init`` (batch), the
        entries of its L column ``lvals`` and U row ``uvals`` ((m,) + batch, or ``None``; arrays the
        caller does not write afterwards), which set its scale ``max(|piv|, |init|, max|l|, max|u|)``;
        the state fails where ``|piv| / scale <= PIVOT_RTOL`` or the pivot is not finite (a NaN
        scale counts as a zero ratio)."""
        self._hold(blk)
        # magnitudes now for arrays (the caller may write them later), when tested for scalars (immutable)
        fix = lambda x: x if isinstance(x, np.floating) else np.abs(x)          # noqa: E731
        self._pending.append((blk, k, fix(piv), fix(init), lvals, uvals))
        self._held += np.size(piv) * (2 + (0 if lvals is None else len(lvals)) + (0 if uvals is None else len(uvals)))
        if self._held > _HOLD:
            self._flush()

    def pivots(self, blk, sg, piv, init, lvals, uvals):
        """The pivots of stage ``sg`` (:class:`~sparsedyn.sparse.ordering.FactorStage`) of block ``blk``
        at once, as :meth:`pivot` would test them one by one: ``piv``, ``init`` (K,) + batch, ``lvals``
        the stage's L columns (``W[sg.ls]``) and ``uvals`` its U rows (``W[sg.urow]``)."""
        self._hold(blk)
        order, starts = sg.seg
        zero = np.zeros((len(sg.ks),) + piv.shape[1:])
        M = np.maximum.reduceat(np.abs(np.concatenate([zero, lvals, uvals])[order]), starts, axis=0)
        self._pending.append((blk, sg.ks, np.abs(piv), np.abs(init), M))
        self._held += 3 * piv.size
        if self._held > _HOLD:
            self._flush()

    def _hold(self, blk):
        """Test what is pending when a pivot of another block comes."""
        if self._pending and self._pending[0][0] is not blk:
            self._flush()

    def _flush(self):
        pend, self._pending, self._held = self._pending, [], 0
        if not pend:
            return
        if len(pend[0]) == 5:              # stages (pivots): their scales reduced already
            ks = np.concatenate([p[1] for p in pend])
            a, i, M = (np.concatenate([p[j] for p in pend]) for j in (2, 3, 4))
        else:
            ks, a, i, M = self._reduce(pend)
        scale = np.maximum(np.maximum(a, i), M)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(scale > 0, a / np.where(scale > 0, scale, 1.0), 0.0)
        ratio = np.where(np.isfinite(ratio), ratio, 0.0)     # NaN/inf pivots count as zero
        bad = ~(ratio > PIVOT_RTOL) | ~np.isfinite(a)
        self._ratio = np.minimum(self._ratio, ratio.min(0))
        any_k = bad.reshape(len(ks), -1).any(1)
        if any_k.any():
            # the first failing test in pivot order; stages come out of pivot order, so a later flush of
            # the same block's stages may hold a lower failing pivot (a block's pivot tests come together,
            # before any backward error)
            blk, staged = pend[0][0], len(pend[0]) == 5
            j = int(np.argmin(np.where(any_k, ks, np.iinfo(np.int64).max))) if staged else int(np.argmax(any_k))
            if self._first is None or (staged and self._first[0] is blk and self._first[1] is not None
                                       and ks[j] < self._first[1]):
                self._first = (blk, int(ks[j]), float(np.min(ratio[j])))
        self._bad |= bad.any(0)

    @staticmethod
    def _reduce(pend):
        """``(ks, |piv|, |init|, max(|l|, |u|))`` of pivots given one by one (:meth:`pivot`)."""
        shape = np.broadcast_shapes(*{np.shape(x) for p in pend for x in p[2:4]},
                                    *{x.shape[1:] for p in pend for x in p[4:] if x is not None})
        fit = lambda x: x if x.shape[1:] == shape else np.broadcast_to(x, x.shape[:1] + shape)   # noqa: E731
        # each pivot's segment of magnitudes, led by a row of zeros (never empty; |x| >= 0 leaves
        # the maximum as it is, a NaN propagates): one concatenation, one segmented maximum
        zero, parts, starts, n = np.zeros((1,) + shape), [], [], 0
        for p in pend:
            starts.append(n)
            parts.append(zero)
            n += 1
            for x in p[4:]:
                if x is not None and len(x):
                    parts.append(fit(x))
                    n += len(x)
        M = np.maximum.reduceat(np.abs(np.concatenate(parts)), starts, axis=0)      # (K,) + batch
        a, i = (np.abs(np.stack([x if np.shape(x) == shape else np.broadcast_to(x, shape) for x in xs]))
                for xs in zip(*((p[2], p[3]) for p in pend)))
        return np.array([p[1] for p in pend], dtype=np.int64), a, i, M

    def backward(self, blk, err):
        self._flush()
        self.berr = np.maximum(self.berr, err)
        bad = ~(err <= BERR_TOL)
        if np.any(bad) and self._first is None:
            self._first = (blk, None, float(np.max(err)))
        self._bad |= bad

    def residual(self, blk, vals, z, rhs, batch):
        """The backward error of block ``blk``'s solve ``z`` of ``A_K z = rhs`` (float)."""
        rl, cl = blk.entry_pos
        Az = np.zeros((blk.size,) + batch)
        aAz = np.zeros((blk.size,) + batch)
        np.add.at(Az, rl, vals[blk.entries] * z[cl])
        np.add.at(aAz, rl, np.abs(vals[blk.entries] * z[cl]))
        num = np.max(np.abs(Az - rhs), axis=0)
        den = np.max(aAz, axis=0) + np.max(np.abs(rhs), axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            err = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))
        self.backward(blk, np.where(np.isfinite(num), err, np.inf))


class Recorder:
    """The traced counterpart of :class:`Monitor` (``mode="auto"``): it records what the pivot
    test reads; the backward-error test is formed afterwards from ``x``, ``vals`` and ``b``
    (:func:`checked_solve`), so the recorder declines during the solve phase."""

    mode = "auto"

    def __init__(self):
        self.checked = 0
        self.records = []
        self._on = True

    def wants(self, blk):
        return self._on and not blk.proven

    def pivot(self, blk, k, piv, init, lvals, uvals):
        self.records.append((blk, piv, init, lvals, uvals))

    def pivots(self, blk, sg, piv, init, lvals, uvals):
        """A stage's pivots (see :meth:`Monitor.pivots`), recorded one by one."""
        l0, u0 = sg.lptr, sg.uptr
        for j, k in enumerate(sg.ks.tolist()):
            lv = lvals[l0[j]:l0[j + 1]]
            self.pivot(blk, k, piv[j], init[j], lv if len(lv) else None, uvals[u0[j]:u0[j + 1]])

    @contextmanager
    def phase(self, name):
        old, self._on = self._on, name != "solve"
        try:
            yield
        finally:
            self._on = old


def _flat(x):
    return list(np.asarray(x, dtype=object).reshape(-1))


def sumpow(x, p):
    """``sum x^p`` over the first axis (``p`` = 2 or 4), any backend."""
    x = np.asarray(x, dtype=object)
    if not x.shape[0]:
        return np.zeros(x.shape[1:], dtype=object)
    x2 = x * x
    return (x2 if p == 2 else x2 * x2).sum(axis=0)


def _recip(x):
    """``1 / x`` elementwise (a constant zero gives ``inf``)."""
    x = np.asarray(x, dtype=object)
    out = np.empty(x.shape, dtype=object)
    for i in np.ndindex(x.shape):
        out[i] = float("inf") if (not isinstance(x[i], Sym) and x[i] == 0) else 1.0 / x[i]
    return out


def check_count(st, nrhs=1) -> int:
    """How many check values :func:`checked_solve` returns for structure ``st`` (``nrhs``
    right-hand sides per configuration): per checked block, one for its pivots and two per
    right-hand side for its backward error."""
    return sum(1 + 2 * nrhs for b in st.blocks if not b.proven)


def checked_solve(st, q, v, y, g, batch):
    """The online phase of ``st`` on traced (object) arrays with its check values.

    Returns ``(x, checks, (vals, W, b, batch))``: ``x`` (n,) + batch, the list of
    :func:`check_count` check values (see the module docstring) and the factors."""
    rec = Recorder()
    x, vals, b, W = st.online(q, v, y, g, batch, True, rec, rec.phase)
    t2 = (MARGIN * PIVOT_RTOL) ** 2
    signs = {}
    for blk, piv, init, lvals, uvals in rec.records:
        T = piv * piv + init * init
        if lvals is not None and len(lvals):
            T = T + sumpow(lvals, 2)
        if uvals is not None and len(uvals):
            T = T + sumpow(uvals, 2)
        # copysign(1, c) - 1: 0 where c >= +0, -2 where c is negative (exact: the sum stays an integer)
        s = bk.copysign(1.0, piv * piv - T * t2) - 1.0
        signs[id(blk)] = signs.get(id(blk), 0.5) + s
    checks = []
    cols = st.pattern.cols
    for blk in st.blocks:
        if blk.proven:
            continue
        checks += _flat(signs.get(id(blk), 0.5))
        z = x[blk.cols]
        rhs = -b[blk.rows]                                # as the block solve forms it
        pos, es = blk.off
        if len(es):
            np.subtract.at(rhs, pos, vals[es] * x[cols[es]])
        rl, cl = blk.entry_pos
        p = vals[blk.entries] * z[cl]
        Az = np.zeros(rhs.shape, dtype=object)
        np.add.at(Az, rl, p)
        s_res, s_p, s_rhs = sumpow(Az - rhs, 4), sumpow(p, 4), sumpow(rhs, 4)
        c = (BERR_TOL / BERR_MARGIN) ** 4 / (2 * blk.size)
        checks += _flat((s_p + s_rhs) * c - s_res) + _flat(_recip(s_p + s_rhs + s_res))
    return x, checks, (vals, W, b, batch)
