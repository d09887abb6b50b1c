"""The offline verdict of an estimation problem: well posed, over-determined, rank-deficient or
structurally singular, with the numeric rank of the system at a few generic configurations (SVD,
relative tolerance :data:`RANK_RTOL`, the Newton-Euler rows eliminated first) and the unobservable
directions in words; and the errors raised when a problem or a state cannot be solved.
"""

from __future__ import annotations

import functools
import textwrap

import numpy as np

__all__ = ["Verdict", "IllPosedError", "StateSingularError", "RANK_RTOL"]

#: Singular values below this fraction of the largest count as zero (the gap seen on the
#: humanoid is ~1e-4 versus ~1e-17).
RANK_RTOL = 1e-10


class IllPosedError(ValueError):
    """The sensors cannot determine the unknowns at generic states; ``.verdict`` says why."""

    def __init__(self, verdict):
        super().__init__(str(verdict))
        self.verdict = verdict


class StateSingularError(ValueError):
    """A well-posed problem is singular at some of the given states (``.states``: batch indices)."""

    def __init__(self, message, states=()):
        super().__init__(message)
        self.states = tuple(states)


class Verdict:
    """Offline well-posedness verdict.

    ``kind``: ``"structurally singular"``, ``"rank-deficient"``, ``"well posed"`` or
    ``"over-determined"``; ``ok``: solvable; ``n`` unknowns, ``nrows`` equations,
    ``rank`` (smallest numeric rank over the sampled configurations),
    ``deficiency`` = ``n - rank``, ``redundancy`` = ``nrows - n``; ``ranks``: per
    configuration; ``null_vectors`` (n, deficiency) at the worst configuration;
    ``directions``: one sentence per null vector; ``notes``: extra lines;
    ``configuration``: the configuration the null vectors belong to.
    """

    def __init__(self, name, kind, n, nrows, ranks, null_vectors, directions, reason="", notes=(),
                 configuration=None):
        self.name, self.kind, self.n, self.nrows = name, kind, n, nrows
        self.configuration = configuration
        self.ranks = tuple(int(r) for r in ranks)
        self.rank = min(self.ranks) if self.ranks else n
        self.deficiency = n - self.rank
        self.redundancy = nrows - n
        self.null_vectors = null_vectors
        self.directions = list(directions)
        self.reason = reason
        self.notes = list(notes)

    @property
    def ok(self) -> bool:
        """True when the problem can be solved (well posed or over-determined)."""
        return self.kind in ("well posed", "over-determined")

    def headline(self) -> str:
        """The verdict in one sentence, without the problem's name."""
        head = {"well posed": "well posed (square, full rank at generic states)",
                "over-determined": f"over-determined by {self.redundancy} (full rank at generic states): "
                                   f"weighted least squares",
                "rank-deficient": f"ILL-POSED: numerically rank-deficient by {self.deficiency} at generic states "
                                  f"(structurally full rank)",
                "structurally singular": f"ILL-POSED: structurally singular (rank deficit {self.deficiency})"}
        return (f"{head[self.kind]}; {self.n} unknowns, {self.nrows} equations, numeric rank "
                f"{'/'.join(map(str, self.ranks))} at {len(self.ranks)} random configurations")

    def lines(self, width=100, name=True, indent="  ") -> list:
        """The verdict as lines of at most ``width`` characters (first line: the headline)."""
        first = f"{self.name}: {self.headline()}" if name else self.headline()
        out = textwrap.wrap(first, width, subsequent_indent=indent + "  ")
        paras = ([self.reason] if self.reason else []) + [
            f"unobservable direction {k + 1}: {d}" for k, d in enumerate(self.directions)] + list(self.notes)
        for p in paras:
            out += textwrap.wrap(p, width, initial_indent=indent, subsequent_indent=indent + "  ")
        return out

    def __str__(self):
        return "\n".join(self.lines())

    __repr__ = __str__


def _rank(A, null=False):
    """Numeric rank of ``A`` (SVD, :data:`RANK_RTOL`) and, if asked and deficient, its null vectors (n, n - r)."""
    s = np.linalg.svd(A, compute_uv=False)
    r = int(np.sum(s > RANK_RTOL * s[0])) if len(s) else 0
    if not null or r == A.shape[1]:
        return r, np.zeros((A.shape[1], 0))
    _, s, Vt = np.linalg.svd(A)          # deficient (rare): the vectors as well
    return r, Vt[r:].T


def _solve_if_well_conditioned(A, rhs, certify=True):
    """``A^-1 rhs`` for a square sparse-patterned ``A`` (dense array, or SciPy sparse without explicit
    zeros: the same factorization) by SuperLU (sparse LU with threshold partial pivoting, one thread)
    when the estimated reciprocal condition number leaves no doubt that :func:`_rank` finds ``A`` of full
    rank (``1 / (|A|_1 est|A^-1|_1) >= 1e3 n`` :data:`RANK_RTOL`: ``sigma_min / sigma_max >=
    rcond_1 / n``, with a factor 1e3 for the estimate); ``None`` otherwise (the caller then decides
    with the SVD).  ``certify=False``: the caller knows the rank; ``None`` only where ``A`` is
    exactly singular."""
    import scipy.sparse
    import scipy.sparse.linalg as sla
    n = A.shape[0]
    S = scipy.sparse.csc_matrix(A)
    try:
        lu = sla.splu(S)
    except RuntimeError:                               # exactly singular
        return None
    if not certify:
        return lu.solve(rhs)
    inv = sla.LinearOperator((n, n), matvec=lu.solve, rmatvec=lambda x: lu.solve(x, trans="T"), dtype=float)
    anorm = abs(S).sum(0).max()                        # (column sums in row order, as of the dense A)
    rcond = 1.0 / (anorm * sla.onenormest(inv)) if anorm > 0 else 0.0
    if not rcond >= 1e3 * n * RANK_RTOL:
        return None
    return lu.solve(rhs)


def _unit_triangular_solve(N, B):
    """``N^-1 B`` for a sparse (k, k) ``N`` whose diagonal is nonzero and which is triangular up to a
    symmetric permutation (the Newton-Euler rows on their own variables: each row defines its
    variable from its parent's, its children's or its own body's), by substitution: row ``r`` is
    ``(B_r - sum_j N_rj T_j) / N_rr`` over its nonzero off-diagonal entries in stored order, once the
    rows it reads are done.  Each row's arithmetic is fixed by that rule, so any order that respects
    the dependencies gives the same result to the bit: the rows are done level by level (a row's
    level: one more than its dependencies' highest), all the terms of a level's rows in one ``ufunc.at``
    (which takes them in order: a row's in stored order), elementwise only (BLAS threads fight on a busy
    machine); the levels depend on the structure only and are computed once per pattern.
    ``None`` if ``N`` is not of that form."""
    k = N.shape[0]
    diag = N.diagonal()
    if np.any(diag == 0):
        return None
    N = N.tocsr()
    rows = np.repeat(np.arange(k), np.diff(N.indptr))
    keep = (N.indices != rows) & (N.data != 0)
    r, c, x = rows[keep], N.indices[keep], N.data[keep]
    plan = _triangular_levels(k, r.astype(np.int64).tobytes(), c.astype(np.int64).tobytes())
    if plan is None:
        return None
    T = np.array(B, float)
    col = (-1,) + (1,) * (T.ndim - 1)
    for terms, rl in plan:
        if len(terms):                                   # a row's terms in their order (ufunc.at)
            np.subtract.at(T, r[terms], x[terms].reshape(col) * T[c[terms]])
        T[rl] /= diag[rl].reshape(col)
    return T


@functools.lru_cache(maxsize=64)
def _triangular_levels(k, r, c):
    """The levels of :func:`_unit_triangular_solve` for the off-diagonal terms at rows ``r``, columns
    ``c`` (int64 bytes): per level, the terms (indices, each row's in stored order) and the rows;
    ``None`` for a cycle.  Depends on the structure only, so it is computed once per pattern."""
    r, c = np.frombuffer(r, np.int64), np.frombuffer(c, np.int64)
    level = np.zeros(k, dtype=np.int64)
    for _ in range(k + 1):                              # longest dependency path; a cycle never settles
        new = np.zeros(k, dtype=np.int64)
        np.maximum.at(new, r, level[c] + 1)
        if np.array_equal(new, level):
            break
        level = new
    else:
        return None
    counts = np.bincount(r, minlength=k)
    rank = np.arange(len(r)) - (np.cumsum(counts) - counts)[r]      # the term's place in its row
    order = np.lexsort((rank, level[r]))                # the terms by level, then by place in the row
    if not k:
        return []
    ends = np.searchsorted(level[r][order], np.arange(level.max() + 2))
    rows_at = np.split(np.argsort(level, kind="stable"), np.cumsum(np.bincount(level))[:-1])
    return [(order[ends[L]:ends[L + 1]], rl) for L, rl in enumerate(rows_at)]


def _reduced_rank(A, n_ne, P, null=False):
    """:func:`_rank` of the whole system ``A`` (m, n; dense or SciPy sparse) by exact reductions first
    (much faster).

    ``n_ne``: the Newton-Euler rows (first in ``A``); ``P``: the columns of the variables
    they define (``a_i``, ``f_i``, ``tau_i``), on which these rows form a square unit-triangular
    block ``N_P`` (nonsingular at every state).  Then ``rank A = |P| + rank S`` with the Schur
    complement ``S = Y_R - Y_P N_P^-1 N_R`` on the other columns ``R``.  Rows of ``S`` with a
    single nonzero (a known joint acceleration, a zero external wrench) pin their column:
    ``rank S = |pinned| + rank`` of what is left, whose SVD decides (a few dozen columns
    instead of hundreds).  Null vectors are mapped back exactly and orthonormalised.
    """
    import scipy.sparse as sps                 # offline only: imported here
    m, n = A.shape
    R = np.setdiff1d(np.arange(n), P)
    dense = lambda: A.toarray() if sps.issparse(A) else A       # noqa: E731  (A: dense or SciPy sparse)
    if n_ne != len(P):
        return _rank(dense(), null)
    As = sps.csr_matrix(A)
    NE, Y = As[:n_ne], As[n_ne:]
    T = _unit_triangular_solve(NE[:, P].tocsr(), NE[:, R].toarray())      # N_P^-1 N_R
    if T is None:
        return _rank(dense(), null)
    S = Y[:, R].toarray() - Y[:, P] @ T
    nz = S != 0
    single = nz.sum(1) == 1
    pinned = np.unique(np.argmax(nz[single], 1))
    keep = np.setdiff1d(np.arange(S.shape[1]), pinned)
    B = S[~single][:, keep]
    rB, VB = _rank(B, null) if B.size else (0, np.eye(len(keep)))
    r = len(P) + len(pinned) + rB
    if not null or r == n:
        return r, np.zeros((n, 0))
    xR = np.zeros((len(R), VB.shape[1]))
    xR[keep] = VB
    V = np.zeros((n, VB.shape[1]))
    V[R] = xR
    V[P] = -T @ xR
    return r, np.linalg.qr(V)[0]
