"""Offline analysis and online solution of ``[D; D_Y] d + [b; b_Y] = 0``.

Offline, :func:`analyze` (structure only, once per problem):

1. worst-case pattern of ``A = [D; D_Y]`` (:class:`~sparsedyn.sparse.assembly.SystemPattern`);
2. structural rank by a maximum matching that prefers provably nonzero entries;
   a structurally singular problem raises :class:`StructurallySingularError`
   naming the variables that cannot be determined, before any numeric work;
3. block triangular form (strongly connected components): inverse dynamics
   comes out as ``n`` 1x1 blocks, i.e. triangular (Nori's Property 1, found
   automatically), forward dynamics as 1x1 blocks for the known ``tau``, ``fx``
   (and then the ``tau`` rows' neighbours) plus one block coupling all
   ``a, f, qdd``;
4. a static pivot order per block (:mod:`~sparsedyn.sparse.ordering`; 1x1
   blocks pivot on their matched entry) and its symbolic LU factorization.

Online, :meth:`Structure.solve` (arithmetic only, generic over backends)::

    vals = d_values(q)                         # refill the values of A (fixed pattern)
    b    = rhs_values(q, qd, y)                # velocities, bias terms, measured values
    W    = [vals, 0 (fill)] ; factor W in place, block by block, fixed order
    for each block K in order:                 # block forward substitution
        z = -b[K] - A[K, earlier] x[earlier]
        x[K] = U_K^-1 L_K^-1 z

The arithmetic follows the structure of the blocks of ``A`` so that it costs what
the recursions cost (Featherstone, "Rigid Body Dynamics Algorithms", 2008, section
2.8 and chapter 7):

* an articulated block (forward and hybrid dynamics) is factored body by body
  (:mod:`~sparsedyn.sparse.articulated`): the same pivots as the scalar LU, with
  the transforms applied as ``(E, r)`` and the symmetric Schur complements
  ``Xup^T Ia Xup`` formed by :func:`~sparsedyn.model.spatial.transform_inertia`;
* a transform block ``Xup_i`` (rows ``c(3a_i)``) or ``Xup_j^T`` (rows ``c(3f_i)``)
  whose rows are 1x1 blocks solved after all its columns (inverse dynamics: the
  block order is chosen so) is applied as ``apply_motion`` / ``apply_force_transpose``
  rather than entry by entry (:func:`~sparsedyn.sparse.block_lu.transform_plan`);
* every other block uses the scalar LU factors.

Runtime checks (float input only; ``check="auto"``: blocks with an unproven
pivot, ``"all"``: every block, ``"none"``): a pivot ``|u_kk| <= PIVOT_RTOL *``
(largest magnitude among the pivot's original value, its L column and U row; for
the dof pivots of an articulated block, the entries of ``U_i = IA_i S_i``)
or a normwise backward error ``max|A_K z - r| / (max(|A_K| |z|) + max|r|)`` of
the block solve above ``BERR_TOL`` (a tiny pivot shows up as element growth) marks
the state; marked states are re-solved by a dense LU with partial pivoting
(LAPACK) and a :class:`SparsePivotWarning` is issued.  Garbage is never
returned: a state that is singular even with pivoting raises.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import Owned
from ..algorithms.configuration import difference, integrate
from ..algorithms.kinematics import joint_transforms
from .articulated import articulated_plan
from .block_lu import factor_blocks, solve_stages, substitute, transform_plan
from .units import block_order, merge_articulated
from .assembly import SystemPattern, d_values, rhs_values
from .checks import BERR_TOL, PIVOT_RTOL, Monitor
from .matching import block_triangular, overdetermined, preferred_matching, undetermined
from .ordering import ORDERINGS, _SUPERLU, superlu_order, symbolic_lu

__all__ = ["analyze", "Structure", "SolveInfo", "StructurallySingularError", "OverdeterminedError",
           "SparsePivotWarning", "PIVOT_RTOL", "BERR_TOL", "describe_columns"]



class StructurallySingularError(ValueError):
    """The problem's equations cannot determine some variables for any state (structural rank deficit)."""

    def __init__(self, message, columns=(), rows=()):
        super().__init__(message)
        self.columns, self.rows = tuple(columns), tuple(rows)


class OverdeterminedError(ValueError):
    """More independent equations than unknowns: a least-squares (estimation) problem, not a solve."""


class SparsePivotWarning(RuntimeWarning):
    """A static pivot was (near) zero at some states; those states were solved with pivoting instead."""


class SolveInfo(NamedTuple):
    """Diagnostics of :meth:`Structure.solve` (float input), each of the batch shape.

    ``fallback``: states re-solved by the pivoted dense fallback; ``pivot_ratio``:
    smallest checked ``|pivot| / scale`` (``inf`` if nothing was checked);
    ``backward_error``: largest normwise backward error of a checked block;
    ``checked``: number of blocks checked.
    """

    fallback: np.ndarray
    pivot_ratio: np.ndarray
    backward_error: np.ndarray
    checked: int


_KIND_ORDER = {"tau": 0, "qdd": 1, "fx": 2, "f": 3, "a": 4}


def describe_columns(pattern, columns, limit=12) -> str:
    """``"tau[joint3], qdd[joint3], a[body3] (components wx, vz), ..."``: column indices grouped by
    variable block, the kinds one usually measures (tau, qdd, fx) first."""
    L = pattern.layout
    groups = {}
    for c in columns:
        v = L.column_owner(c)
        groups.setdefault(v, []).append(c - v.offset)
    parts = []
    for v, comps in sorted(groups.items(), key=lambda kv: (_KIND_ORDER[kv[0].kind], kv[0].offset)):
        if len(comps) == v.size:
            parts.append(v.label)
        else:
            parts.append(f"{v.label} (components {', '.join(v.component(k).split('.')[-1] for k in comps)})")
    more = f", ... ({len(parts) - limit} more)" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def _describe_rows(pattern, rows, limit=12):
    groups = {}
    for r in rows:
        e = pattern.row_owner(r)
        groups.setdefault(e, []).append(r)
    parts = [e.describe() for e in groups]
    more = f", ... ({len(parts) - limit} more)" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


@contextmanager
def _no_phase(name):
    yield


class Structure:
    """The result of the offline phase for one :class:`~sparsedyn.sparse.Problem`.

    Immutable after construction.  Attributes: ``problem``, ``pattern``
    (:class:`~sparsedyn.sparse.assembly.SystemPattern`), ``n`` (unknowns =
    rows), ``nnz``; ``blocks``: the irreducible diagonal blocks in solve order
    (:class:`~sparsedyn.sparse.ordering.BlockFactor`); ``row_order``,
    ``col_order``: the global pivot sequence (the permutation of the picture);
    ``nslots`` = ``nnz`` + fill-in + the slots of the articulated blocks' factors
    (``IA_i``, ``Ia_i``, ``U_i``, ``D_i^-1``, ``Xup_i``); ``ordering``: the requested order.
    """

    def __init__(self, problem, pattern, blocks, nslots, ordering, match_c):
        self.problem, self.pattern, self.blocks = problem, pattern, tuple(blocks)
        self.layout = problem.layout
        self.model = problem.model
        self.n, self.nnz, self.nslots = pattern.n, pattern.nnz, nslots
        self.ordering = ordering
        self.match_c = tuple(match_c)
        self.row_order = np.concatenate([b.rows for b in blocks]) if blocks else np.zeros(0, np.int64)
        self.col_order = np.concatenate([b.cols for b in blocks]) if blocks else np.zeros(0, np.int64)
        # fixed CSC structure of A: the online phase only refills data = vals[csc_order]
        order = np.lexsort((pattern.rows, pattern.cols))
        self.csc_order = order
        self.csc_indices = pattern.rows[order]
        self.csc_indptr = np.searchsorted(pattern.cols[order], np.arange(self.n + 1))
        self.transform_plan = transform_plan(pattern, self.blocks)
        self._stages = {}

    def solve_stages(self, transforms, levels):
        """The stages of the substitution (:func:`~sparsedyn.sparse.block_lu.solve_stages`), computed once."""
        key = (bool(transforms), bool(levels))
        if key not in self._stages:
            self._stages[key] = solve_stages(self, transforms, levels)
        return self._stages[key]

    # --- summary properties ------------------------------------------------------
    @property
    def triangular(self) -> bool:
        """True when every block is 1x1 (the permuted matrix is triangular, solved by substitution)."""
        return all(b.size == 1 for b in self.blocks)

    @property
    def fill(self) -> int:
        return sum(b.fill for b in self.blocks)

    @property
    def proven(self) -> bool:
        """Every pivot proven nonzero at every state (no runtime check needed)."""
        return all(b.proven for b in self.blocks)

    def block_sizes(self) -> dict:
        out = {}
        for b in self.blocks:
            out[b.size] = out.get(b.size, 0) + 1
        return dict(sorted(out.items()))

    def unproven_pivots(self) -> list:
        """``(row label, column label)`` of every unproven pivot."""
        p = self.pattern
        return [(p.row_label(int(b.rows[k])), p.col_label(int(b.cols[k])))
                for b in self.blocks for k in range(b.size) if not b.proof[k]]

    # --- online pieces -------------------------------------------------------------
    def _inputs(self, q, v, y, gravity):
        model = self.model
        q = _checks.configuration(model, q)
        v = _checks.velocity(model, v, "v")
        if y is None:
            if self.problem.ny:
                raise TypeError(f"y: the problem {self.problem.name!r} has {self.problem.ny} measured values; "
                                f"build them with problem.values(...)")
            y = np.zeros((0,))
        y = _checks.vector(model, "y", y, self.problem.ny, "measured values of the problem")
        g = _checks.gravity(model, gravity)
        batch = _checks.batch_shape(q=(q, 1), v=(v, 1), y=(y, 1), gravity=(bk.asarray(g), 1))
        symbolic = any(bk.is_symbolic(x) for x in (q, v, y, g))
        return q, v, y, g, batch, symbolic

    def values(self, q):
        """Values (..., nnz) of ``A`` in entry order (see :meth:`csc_data` for the CSC order)."""
        q = _checks.configuration(self.model, q)
        Xup, S = joint_transforms(self.model, q)
        return np.moveaxis(d_values(self.pattern, Xup, q.shape[:-1], bk.is_symbolic(q), S), 0, -1)

    def csc_data(self, q):
        """``data`` (..., nnz) of ``A`` for the fixed ``(csc_indptr, csc_indices)``."""
        return self.values(q)[..., self.csc_order]

    def matrix(self, q):
        """``A`` at one float configuration as a SciPy CSC matrix (plots, tests)."""
        import scipy.sparse as sps
        return sps.csc_matrix((self.csc_data(np.asarray(q, float)), self.csc_indices, self.csc_indptr),
                              shape=(self.pattern.nrows, self.n))

    def rhs(self, q, v, y=None, gravity=None):
        """``[b; b_Y]`` (..., nrows) at a state."""
        q, v, y, g, batch, symbolic = self._inputs(q, v, y, gravity)
        Xup, S = joint_transforms(self.model, q)
        b = rhs_values(self.pattern, q, v, y, g, Xup, S, batch, symbolic)
        return np.moveaxis(b, 0, -1)

    def solve(self, q, v, y=None, gravity=None, check="auto", info=False):
        """``d`` (..., n) with ``[D; D_Y] d + [b; b_Y] = 0`` at state ``(q, v)``, measured values ``y``.

        ``q`` (..., nq), ``v`` (..., nv), ``y`` (..., ny) from
        :meth:`Problem.values`, ``gravity`` (3,) overrides the model's.  Float
        input with leading batch axes, or object arrays (traced; no checks).
        ``check``: ``"auto"`` | ``"all"`` | ``"none"`` (module docstring).
        ``info=True`` also returns a :class:`SolveInfo`.

        Several right-hand sides at one state: give ``q`` (..., 1, nq) and ``y``
        (..., k, ny); ``A`` is filled and factored once per configuration (the
        batch shape of ``q``) and only ``b`` and the substitutions run ``k`` times.
        """
        d, solve_info, _ = self._solve(q, v, y, gravity, check)
        return (d, solve_info) if info else d

    def _solve(self, q, v, y, gravity, check):
        """:meth:`solve` returning ``(d, SolveInfo, (vals, W, b, batch))``: the factors let a caller
        refine ``d`` or solve more right-hand sides (:meth:`residual`, :meth:`substitute`)."""
        if check not in ("auto", "all", "none"):
            raise ValueError(f"check: expected 'auto', 'all' or 'none', got {check!r}")
        q, v, y, g, batch, symbolic = self._inputs(q, v, y, gravity)
        monitor = None if symbolic or check == "none" else Monitor(check, batch)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x, vals, b, W = self.online(q, v, y, g, batch, symbolic, monitor)
        if monitor is not None and np.any(monitor.bad):
            x = self._fallback(x, vals, b, monitor)
        if monitor is None:
            monitor = Monitor("none", batch)
        return (np.moveaxis(x, 0, -1), SolveInfo(monitor.bad.copy(), monitor.ratio, monitor.berr, monitor.checked),
                (vals, W, b, batch))

    def residual(self, vals, b, x):
        """``A x + b`` (nrows,) + batch for ``x`` (n,) + batch (entry-first, any backend)."""
        p = self.pattern
        r = b.copy()
        np.add.at(r, p.rows, vals * x[p.cols])
        return r

    def substitute(self, vals, W, b, batch):
        """``x`` (n,) + batch with ``A x + b = 0`` for the factors ``W`` of :meth:`online` (unchecked)."""
        return substitute(self, vals, W, b, batch, b.dtype)

    def online(self, q, qd, y, g, batch, symbolic, monitor=None, phase=None):
        """The online phase, unchecked: ``(x, vals, b, W)`` entry-first (``W``: the LU factors, shaped
        by the configurations' batch).  ``phase(name)``: a context manager tagging the operations of
        each phase (flop counting); a no-op by default."""
        ph = phase or _no_phase
        dtype = object if symbolic else float
        # A depends on q alone: factor it once per configuration even when y carries extra
        # axes (several right-hand sides at one state share q with a broadcast axis of 1).
        fbatch = (1,) * (len(batch) - (q.ndim - 1)) + q.shape[:-1]
        with ph("transforms"):
            Xup, S = joint_transforms(self.model, q)
            vals = d_values(self.pattern, Xup, fbatch, symbolic, S)
        with ph("b"):
            b = rhs_values(self.pattern, q, qd, y, g, Xup, S, batch, symbolic)
        W = np.concatenate([vals, np.zeros((self.nslots - self.nnz,) + fbatch, dtype=dtype)])
        with ph("factor"):
            factor_blocks(self.model, self.blocks, W, fbatch, Xup, S, monitor)
        with ph("solve"):
            x = substitute(self, vals, W, b, batch, dtype, monitor, Xup)
        return x, vals, b, W

    def _fallback(self, x, vals, b, monitor):
        p = self.pattern
        bad = np.nonzero(monitor.bad.reshape(-1))[0]
        batch = monitor.bad.shape
        V = np.broadcast_to(vals, (self.nnz,) + batch).reshape((self.nnz, -1))[:, bad]
        B = b.reshape((p.nrows, -1))[:, bad]
        A = np.zeros((len(bad), p.nrows, self.n))
        np.add.at(A, (slice(None), p.rows, p.cols), V.T)
        try:
            sol = np.linalg.solve(A, -B.T[..., None])[..., 0]
        except np.linalg.LinAlgError:
            raise ValueError(f"{self.problem.name} of model {self.model.name!r}: the system is singular at "
                             f"{len(bad)} of {int(np.prod(batch, dtype=int))} states (even with pivoting)") from None
        X = x.reshape((self.n, -1)).copy()
        X[:, bad] = sol.T
        blk, k, val = monitor.first
        where = (f"pivot {k} ({p.row_label(int(blk.rows[k]))} on {p.col_label(int(blk.cols[k]))}, "
                 f"|pivot|/scale = {val:.2g})" if k is not None else f"backward error {val:.2g}")
        warnings.warn(SparsePivotWarning(
            f"{self.problem.name} of model {self.model.name!r}: the static {blk.ordering!r} order of a "
            f"{blk.size}x{blk.size} block failed at {len(bad)} of {int(np.prod(batch, dtype=int))} states "
            f"({where}); those states were solved by dense LU with partial pivoting"),
            stacklevel=_checks.user_stacklevel())
        return X.reshape(x.shape)

    def pivots(self, q):
        """The static pivots ``u_kk`` (..., n) in pivot order (``row_order``, ``col_order``) at
        configurations ``q`` (float): what the runtime check and the bisection tests look at."""
        q = _checks.configuration(self.model, q)
        batch = q.shape[:-1]
        Xup, S = joint_transforms(self.model, q)
        vals = d_values(self.pattern, Xup, batch, False, S)
        W = np.concatenate([vals, np.zeros((self.nslots - self.nnz,) + batch)])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            factor_blocks(self.model, self.blocks, W, batch, Xup, S)
        return np.moveaxis(W[np.concatenate([b.piv for b in self.blocks])], 0, -1)

    def hunt_vanishing_pivots(self, q0, q1, samples=65, iters=55):
        """Hunt for states where a static pivot vanishes, on the path from ``q0`` to ``q1``.

        The path is ``q(t) = q0 (+) t (q1 (-) q0)``, ``t`` in [0, 1] (the model's
        ``integrate``/``difference``).  The pivots are evaluated at ``samples``
        points; wherever one changes sign between neighbours (passing through
        zero, or through a pole when an earlier pivot vanishes), ``t`` is
        bisected ``iters`` times.  Returns a list of dicts ``{"pivot", "row",
        "col", "proof", "t", "q", "value", "relative"}`` (``relative``: ``|value|``
        over the pivot's median magnitude on the path), smallest first.
        """
        model = self.model
        q0, q1 = np.asarray(q0, float), np.asarray(q1, float)
        dq = difference(model, q0, q1)
        path = lambda t: integrate(model, q0, np.asarray(t, float)[..., None] * dq)  # noqa: E731
        ts = np.linspace(0.0, 1.0, samples)
        P = self.pivots(path(ts))
        med = np.median(np.abs(P), axis=0)
        proofs = self.pivot_proofs()
        labels = [(self.pattern.row_label(int(r)), self.pattern.col_label(int(c)))
                  for r, c in zip(self.row_order, self.col_order)]
        flips = np.sign(P[1:]) != np.sign(P[:-1])
        ks = np.nonzero(np.any(flips, axis=0))[0]
        if not len(ks):
            return []
        j = np.argmax(flips[:, ks], axis=0)                       # first sign change of each pivot
        lo, hi = ts[j], ts[j + 1]
        slo = np.sign(P[j, ks])
        for _ in range(iters):                                     # all pivots bisected together
            mid = 0.5 * (lo + hi)
            same = np.sign(self.pivots(path(mid))[np.arange(len(ks)), ks]) == slo
            lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
        pl = np.abs(self.pivots(path(lo))[np.arange(len(ks)), ks])
        ph = np.abs(self.pivots(path(hi))[np.arange(len(ks)), ks])
        found = []
        for n, k in enumerate(ks.tolist()):
            t = lo[n] if pl[n] <= ph[n] else hi[n]
            v = min(pl[n], ph[n])
            found.append(dict(pivot=k, row=labels[k][0], col=labels[k][1], proof=proofs[k], t=float(t),
                              q=path(t), value=float(v), relative=float(v / med[k]) if med[k] > 0 else np.inf))
        return sorted(found, key=lambda f: f["relative"])

    def pivot_proofs(self) -> list:
        """Per pivot (pivot order): ``"constant"``, ``"articulated"`` or ``""`` (unproven)."""
        return [p for b in self.blocks for p in b.proof]

    def unpack(self, d):
        """``{"a", "f", "tau", "fx", "qdd"}`` arrays of a solution ``d`` (see :meth:`Layout.unpack`)."""
        return self.layout.unpack(d)

    # --- the compiler's view (sparsedyn.kernels, Owners): the online phase as one kernel --------------
    def __sparsedyn_kernels__(self):
        from .compiled import solve_kernel
        from .fingerprint import structure_fingerprint
        return Owned(self.model, (solve_kernel(self),), structure_fingerprint(self))

    def __sparsedyn_compiled__(self, compiled):
        from .compiled import CompiledStructure
        return CompiledStructure(self, compiled)

    # --- reports ---------------------------------------------------------------------
    def summary(self) -> str:
        p = self.pattern
        sizes = self.block_sizes()
        big = [b for b in self.blocks if b.size > 1]
        lines = [f"{self.problem.name} of model {self.model.name!r}: {self.n} unknowns, {p.nrows} rows "
                 f"({self.layout.nrows} Newton-Euler + {p.nrows - self.layout.nrows} measurement), {self.nnz} nonzeros "
                 f"(worst case: {int(np.sum(p.cls == 0))} +-1, {int(np.sum(p.cls == 1))} other constants, "
                 f"{int(np.sum(p.cls == 2))} state-dependent)",
                 "blocks (size: count): " + ", ".join(f"{s}: {c}" for s, c in sizes.items()) +
                 ("  -> triangular, solved by substitution" if self.triangular else "")]
        for b in big:
            np_ = sum(1 for x in b.proof if x)
            lines.append(f"  block of {b.size}: ordering {b.ordering!r}, fill-in {b.fill}, L+U nonzeros {b.nnz_lu}, "
                         f"pivots proven {np_}/{b.size} ({sum(1 for x in b.proof if x == 'constant')} constant, "
                         f"{sum(1 for x in b.proof if x == 'articulated')} S^T IA S > 0)")
        un = self.unproven_pivots()
        lines.append("static pivots: all proven nonzero at every state" if not un else
                     f"static pivots: {len(un)} unproven (checked at run time), e.g. " +
                     "; ".join(f"{r} on {c}" for r, c in un[:3]))
        return "\n".join(lines)

    def __repr__(self):
        return (f"Structure({self.problem.name!r}, model={self.model.name!r}, n={self.n}, nnz={self.nnz}, "
                f"blocks={len(self.blocks)}, fill={self.fill}, proven={self.proven})")


def _sample_values(pattern, seed):
    """Values of ``A`` at one generic configuration (joint limits ignored: they are data): what
    SuperLU's threshold pivoting looks at when it picks a static order.  Not used for structure."""
    model = pattern.problem.model
    q = model.random_configuration(np.random.default_rng(seed + 1), limits=False)
    Xup, S = joint_transforms(model, q)
    return d_values(pattern, Xup, (), False, S)


def analyze(problem, ordering="auto", seed=0) -> Structure:
    """Offline phase for ``problem`` (structure only): a :class:`Structure` to solve with.

    ``ordering``: pivot order of the non-triangular blocks, one of
    :data:`~sparsedyn.sparse.ordering.ORDERINGS` (``"auto"``: articulated where the
    block has that form, else ``"colamd"``) or a callable
    ``ordering(pattern, rows, cols) -> [(row, col), ...]``.  The worst-case
    pattern comes from the symbolic trace (:mod:`sparsedyn.sparse.assembly`); ``seed`` picks the
    one generic state (joint limits ignored) at which SuperLU's orders are chosen.

    Raises :class:`StructurallySingularError` (naming the undetermined
    variables) or :class:`OverdeterminedError` before any numeric work.
    """
    if not (callable(ordering) or ordering in ORDERINGS):
        raise ValueError(f"ordering: expected one of {ORDERINGS} or a callable, got {ordering!r}")
    pattern = SystemPattern(problem)
    n, nrows = pattern.n, pattern.nrows
    model = problem.model
    match_r, match_c = preferred_matching(nrows, n, pattern.rows, pattern.cols, pattern.cls)
    rank = sum(1 for r in match_c if r >= 0)
    what = f"{problem.name} of model {model.name!r}"
    if rank < n:
        cols, rows = undetermined(nrows, n, pattern.rows, pattern.cols, match_r, match_c)
        raise StructurallySingularError(
            f"{what} is structurally singular: structural rank {rank} < {n} unknowns ({nrows} equations), "
            f"so at least {n - rank} more independent measurement(s) are needed. These {len(cols)} scalar "
            f"variables cannot be determined at any state: {describe_columns(pattern, cols)}; "
            f"the equations involving them: {_describe_rows(pattern, rows)}. Measure some of them "
            f"(Problem.known / Problem.measure) or give the bodies involved mass", cols, rows)
    if nrows > n:
        rows, cols = overdetermined(nrows, n, pattern.rows, pattern.cols, match_r, match_c)
        raise OverdeterminedError(
            f"{what} has {nrows} equations for {n} unknowns: {nrows - n} more than needed, among "
            f"{_describe_rows(pattern, rows)}. Solving it is a least-squares (estimation) problem; remove "
            f"measurements to make it square")
    blocks_cols = block_triangular(n, pattern.rows, pattern.cols, match_c)
    row_entries = [[] for _ in range(nrows)]
    for e, r in enumerate(pattern.rows.tolist()):
        row_entries[r].append(e)
    units = [dict(rows=[match_c[c] for c in cols], cols=list(cols), pivots=None, spd={}, name=None)
             for cols in blocks_cols]
    if ordering in ("auto", "articulated"):
        units = merge_articulated(pattern, units, row_entries)
    # a block order in which each transform block's columns are all known before its rows are solved,
    # where one exists (inverse dynamics): the substitution then applies it as a transform
    units = block_order(units, pattern, row_entries, whole_transforms=True) or units
    col_block = np.empty(n, dtype=np.int64)
    for K, u in enumerate(units):
        col_block[u["cols"]] = K
    sample = None
    blocks, slot = [], pattern.nnz
    for K, u in enumerate(units):
        brows, bcols = u["rows"], u["cols"]
        pivots, spd, name = u["pivots"], u["spd"], u["name"] or "matching"
        if pivots is not None:
            pass
        elif len(bcols) == 1:
            pivots = [(brows[0], bcols[0])]
        elif callable(ordering):
            pivots, name = list(ordering(pattern, brows, bcols)), getattr(ordering, "__name__", "custom")
        elif ordering == "matching":
            pivots = list(zip(brows, bcols))
        elif ordering == "articulated":
            raise ValueError(f"{what}: a {len(bcols)}x{len(bcols)} block (columns "
                             f"{describe_columns(pattern, bcols, 6)}) is not made of whole bodies' a, f[, qdd] "
                             f"and c(3a), c(3f)[, c(3tau)]; the articulated order does not apply. "
                             f"Use ordering='auto' or 'colamd'")
        else:
            name = "colamd" if ordering == "auto" else ordering
            if sample is None:
                sample = _sample_values(pattern, seed)
            pivots, _ = superlu_order(pattern, brows, bcols, sample, _SUPERLU[name])
        bf, slot = symbolic_lu(pattern, pivots, row_entries, slot, name, spd, col_block, K)
        blocks.append(bf)
    for bf in blocks:                  # articulated blocks: slots of their body-by-body factors
        if bf.ordering == "articulated":
            bf.plan, slot = articulated_plan(pattern, bf, slot)
    return Structure(problem, pattern, blocks, slot, ordering, match_c)
