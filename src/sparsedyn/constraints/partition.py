"""Independent / dependent coordinates and the null-space matrix ``gamma`` (the seed's method).

With ``r = rank G`` (``m`` rows, ``nv`` columns) the velocity coordinates are
split into ``nv - r`` independent ones ``ind`` and ``r`` dependent ones ``dep``
such that ``G_dep`` has rank ``r``.  Then every ``v`` with ``G v = 0`` is
``v = gamma v_ind`` with ``gamma[ind] = I`` and ``gamma[dep] = -G_dep^-1 G_ind``.

*Choice* (:func:`partition`): a column-pivoted QR of ``G`` (``G P = Q R``,
``scipy.linalg.qr(pivoting=True)``) reveals the rank and orders the columns by
how much each adds to the span; the first ``r`` pivots are the best-conditioned
dependent set.  ``independent=`` forces coordinates (e.g. the actuated joints,
the seed's natural choice) to be independent: the pivoted QR then runs on the
other columns only, and fails clearly when they cannot carry the constraints.

*Redundant rows* (rank-deficient ``G``, e.g. a planar four-bar closed by a 3D
point constraint, whose z row is identically zero): ``G`` is replaced by the
full-rank row-equivalent ``Q_r^T G`` (same null space), where ``G_dep = Q_r R_dep``
is the thin QR of the dependent columns; ``Q_r`` spans the range of ``G``.  So
``gamma[dep] = -R_dep^-1 Q_r^T G_ind``, dependent values solve
``R_dep x_dep = Q_r^T rhs``, and the constraint forces are taken with minimum
norm: ``lambda = Q_r R_dep^-T f_dep`` (``G^T lambda`` is unique, ``lambda`` is not
when rows are redundant).

The partition is chosen at one configuration and is valid while ``G_dep`` stays
well conditioned; :func:`null_space` raises :class:`PartitionError` when it does not.
These functions are for float arrays of one state (they use LAPACK).  Triangular
systems are solved with ``numpy.linalg.solve``: SciPy's ``solve_triangular`` is
orders of magnitude slower on these small matrices when OpenBLAS threads compete.

*For the tracer* (compiled constraint sets, :mod:`.compiled`): :func:`unpivoted_null_space` and
:func:`unpivoted_min_norm` are the same quantities through the normal equations, written without
pivoting or LAPACK (``G_dep^-1 = G_dep^T (G_dep G_dep^T)^-1``, ``G^+ = G^T (G G^T)^-1``, the inverses
by :func:`~sparsedyn.algorithms.ltdl.spd_inverse`), for ``G`` of full row rank.  Their rounding error
grows as ``cond^2 eps``, so each also returns ``|A A^-1 - I|_F^2`` of the matrix it inverted, for
the caller to check at run time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.ltdl import spd_inverse
from .errors import PartitionError

__all__ = ["Partition", "NullSpace", "partition", "null_space", "dof_indices", "UnpivotedNullSpace",
           "unpivoted_null_space", "unpivoted_min_norm"]

#: Pivots of the QR at most ``RANK_RTOL * max |R_kk|`` count as zero.
RANK_RTOL = 1e-9


def qr(*args, **kwargs):
    """``scipy.linalg.qr``, imported on first use: SciPy takes longer to import than sparsedyn."""
    from scipy.linalg import qr as scipy_qr
    return scipy_qr(*args, **kwargs)


class Partition(NamedTuple):
    """Independent and dependent velocity coordinates (dof indices, ascending) and ``rank G``."""

    independent: np.ndarray
    dependent: np.ndarray
    rank: int
    redundant_rows: tuple       # names of rows that were combinations of the others where chosen
    dof_names: tuple

    def describe(self) -> str:
        ind = ", ".join(self.dof_names[k] for k in self.independent)
        dep = ", ".join(self.dof_names[k] for k in self.dependent)
        red = f"; redundant rows: {', '.join(self.redundant_rows)}" if self.redundant_rows else ""
        return f"independent [{ind}], dependent [{dep}] (rank G = {self.rank}{red})"


class NullSpace(NamedTuple):
    """``gamma`` (nv, nv - r) and the thin QR ``G[:, dep] = Q R_dep`` at one state."""

    gamma: np.ndarray
    Q: np.ndarray
    R_dep: np.ndarray
    partition: Partition

    def solve_dependent(self, rhs):
        """``x_dep`` (r,) with ``G_dep x_dep = rhs`` in the least-squares sense (exact for rhs in range G)."""
        return np.linalg.solve(self.R_dep, self.Q.T @ rhs)

    def multipliers(self, f_dep):
        """Minimum-norm ``lambda`` (m,) with ``(G^T lambda)[dep] = f_dep``."""
        return self.Q @ np.linalg.solve(self.R_dep.T, f_dep)


def dof_indices(model, spec, what) -> np.ndarray:
    """Dof indices from joint names (all dofs of each joint) and/or integer dof indices."""
    if spec is None:
        return np.zeros(0, int)
    if isinstance(spec, (str, int, np.integer)):
        spec = [spec]
    out = []
    for s in spec:
        if isinstance(s, (int, np.integer)):
            if not 0 <= s < model.nv:
                raise PartitionError(f"{what}: dof index {s} is out of range (model {model.name!r} has nv={model.nv})")
            out.append(int(s))
        else:
            try:
                i = model.joint(s)
            except KeyError as e:
                raise PartitionError(f"{what}: {e.args[0]}") from None
            sl = model.v_slice(i)
            out.extend(range(sl.start, sl.stop))
    if len(set(out)) != len(out):
        raise PartitionError(f"{what}: a coordinate is listed twice ({spec!r})")
    return np.array(out, int)


def _rank(diag, scale):
    d = np.abs(diag)
    return int(np.sum(d > RANK_RTOL * max(scale, 1e-300))) if d.size else 0


def _names(names, idx):
    return "[" + ", ".join(names[k] for k in idx) + "]"


def partition(cs, q, *, independent=None, dependent=None, G=None) -> Partition:
    """Choose independent / dependent coordinates at configuration ``q`` (one state).

    ``cs``: a :class:`~.base.ConstraintSet`.  ``independent``: coordinates that
    must be independent (joint names or dof indices; e.g. the actuated joints),
    the rest are chosen by column-pivoted QR.  ``dependent``: impose the whole
    dependent set instead (checked).  Constraints that leave no degree of freedom
    (``rank G = nv``, a locked mechanism) make every coordinate dependent: the motion
    is then determined by the constraints alone.  Raises :class:`PartitionError` when
    the requested coordinates cannot be dependent/independent (``G_dep`` singular).
    ``G``: the Jacobian at ``q`` when already computed (then ``q`` is not used).
    """
    model, names = cs.model, cs.dof_names
    G = np.asarray(cs.jacobian(q) if G is None else G, float)
    if G.ndim != 2:
        raise PartitionError("partition: expected one configuration q (nq,), not a batch")
    m, nv = G.shape
    scale = float(np.max(np.abs(G), initial=0.0))
    if m:
        R, piv = qr(G, mode="r", pivoting=True, check_finite=False)
        r = _rank(np.diag(R), scale)
        _, Rt, rpiv = qr(G.T, mode="economic", pivoting=True, check_finite=False)
        redundant = tuple(cs.rows[k] for k in sorted(rpiv[r:]))
    else:
        r, redundant = 0, ()
    ind_forced = dof_indices(model, independent, "partition(independent=...)")
    if dependent is not None:
        dep = np.sort(dof_indices(model, dependent, "partition(dependent=...)"))
        if len(dep) != r:
            raise PartitionError(f"partition: {len(dep)} dependent coordinates {_names(names, dep)} given, but "
                                 f"rank G = {r} needs exactly {r}")
        if np.intersect1d(dep, ind_forced).size:
            raise PartitionError(f"partition: coordinates {_names(names, np.intersect1d(dep, ind_forced))} are "
                                 f"listed as both independent and dependent")
        rd = _rank(np.diag(qr(G[:, dep], mode="r", pivoting=True, check_finite=False)[0]), scale) if r else 0
        if rd < r:
            raise PartitionError(
                f"partition: G_dep is singular: the dependent coordinates {_names(names, dep)} cannot be solved "
                f"from the constraints at this configuration (rank G_dep = {rd} < rank G = {r}). Choose other "
                f"dependent coordinates, or let partition() choose them")
        ind = np.setdiff1d(np.arange(nv), dep)
        return Partition(ind, dep, r, redundant, names)
    if len(ind_forced) > nv - r:
        raise PartitionError(f"partition: {len(ind_forced)} independent coordinates {_names(names, ind_forced)} "
                             f"requested, but the constraints (rank {r}) leave only nv - r = {nv - r} degrees of "
                             f"freedom")
    cand = np.setdiff1d(np.arange(nv), ind_forced)
    if r:
        Rc, pc = qr(G[:, cand], mode="r", pivoting=True, check_finite=False)
        rc = _rank(np.diag(Rc), scale)
        if rc < r:
            raise PartitionError(
                f"partition: with {_names(names, ind_forced)} independent, G_dep is singular: the other "
                f"coordinates span only rank {rc} of the {r} independent constraints, so those constraints "
                f"would fix the forced coordinates. They cannot all be independent (e.g. both ends of a "
                f"closed loop driven); force fewer or other coordinates")
        dep = np.sort(cand[pc[:r]])
    else:
        dep = np.zeros(0, int)
    ind = np.setdiff1d(np.arange(nv), dep)
    return Partition(ind, dep, r, redundant, names)


def null_space(G, part: Partition) -> NullSpace:
    """``gamma`` and the thin QR of ``G_dep`` at one state (``G`` (m, nv) float).

    Raises :class:`PartitionError` when ``G_dep`` is (numerically) singular here,
    or when ``G`` gained rank since the partition was chosen.
    """
    G = np.asarray(G, float)
    m, nv = G.shape
    dep, ind, r = part.dependent, part.independent, part.rank
    gamma = np.zeros((nv, nv - r))
    gamma[ind, np.arange(nv - r)] = 1.0
    if r == 0:
        return NullSpace(gamma, np.zeros((m, 0)), np.zeros((0, 0)), part)
    Q, R = qr(G[:, dep], mode="economic", check_finite=False)
    scale = float(np.max(np.abs(G), initial=0.0))
    d = np.abs(np.diag(R))
    if d.min() <= RANK_RTOL * 10 * scale:
        k = int(np.argmin(d))
        raise PartitionError(
            f"G_dep is singular at this configuration (pivot {d.min():.3g} for dependent coordinate "
            f"{part.dof_names[dep[k]]!r}, scale {scale:.3g}): the partition {part.describe()} is not valid "
            f"here (a singular configuration of this choice); choose a new partition at this configuration")
    Gind = G[:, ind]
    QtGind = Q.T @ Gind
    off = float(np.max(np.abs(Gind - Q @ QtGind), initial=0.0))
    if off > 1e-7 * max(scale, 1.0):
        raise PartitionError(
            f"rank G grew beyond {r} at this configuration (|G_ind - Q Q^T G_ind| = {off:.3g}): the "
            f"constraints are independent here where they were redundant when {part.describe()} was chosen; "
            f"choose a new partition at this configuration")
    gamma[dep] = -np.linalg.solve(R, QtGind)
    return NullSpace(gamma, Q, R, part)


# --- the same, for the tracer (no pivoting, no LAPACK) --------------------------------------------

def _inverse_check(A, Ainv):
    """``|A Ainv - I|_F^2``: how far an unpivoted inverse is from one (a traced scalar)."""
    E = A @ Ainv - np.eye(A.shape[-1])
    return np.sum(E * E)


class UnpivotedNullSpace(NamedTuple):
    """``gamma`` and ``G_dep^-1`` by the normal equations (see the module docstring); the methods
    of :class:`NullSpace`.  ``check``: ``|G_dep G_dep^-1 - I|_F^2``."""

    gamma: np.ndarray
    Ginv: np.ndarray
    partition: Partition
    check: object

    def solve_dependent(self, rhs):
        """``x_dep`` (r,) with ``G_dep x_dep = rhs``."""
        return self.Ginv @ rhs

    def multipliers(self, f_dep):
        """``lambda`` (m,) with ``(G^T lambda)[dep] = f_dep``."""
        return self.Ginv.T @ f_dep


def unpivoted_null_space(G, part: Partition) -> UnpivotedNullSpace:
    """:func:`null_space` for the tracer: ``G`` (m, nv) of full row rank (``part.rank == m``),
    any array backend (object arrays of traced values)."""
    nv, r = G.shape[-1], len(part.dependent)
    dep, ind = np.asarray(part.dependent), np.asarray(part.independent)
    Gd, Gi = G[:, dep], G[:, ind]
    Ginv = Gd.T @ spd_inverse(Gd @ Gd.T)
    gamma = np.zeros((nv, nv - r), dtype=object)
    gamma[ind, np.arange(nv - r)] = 1
    gamma[dep] = -(Ginv @ Gi)
    return UnpivotedNullSpace(gamma, Ginv, part, _inverse_check(Gd, Ginv))


def unpivoted_min_norm(G, y):
    """``(G^+ y, check)`` for ``G`` (m, n) of full row rank: ``G^T (G G^T)^-1 y`` and
    ``|G G^T (G G^T)^-1 - I|_F^2`` (for the tracer)."""
    GGt = G @ G.T
    W = spd_inverse(GGt)
    return G.T @ (W @ y), _inverse_check(GGt, W)
