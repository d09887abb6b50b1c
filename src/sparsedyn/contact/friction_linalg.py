"""The dense linear algebra of one state of the contact step's solver
(:mod:`~sparsedyn.contact.friction_kernel`): Cholesky factors, the inverse of a positive definite
matrix by block Cholesky halves, and small solves, written elementwise or in block products so that
the same functions run on NumPy floats and trace into the compiled step (no branch on a value)."""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .friction_problem import _TINY, _relu

__all__ = []


def _cholesky(A):
    """Lower Cholesky factor of the positive definite ``A`` (n, n): ``(rows, inverse diagonal)``, the
    rows as lists (row ``i`` has ``i`` entries left of the diagonal).  A float array's factor is
    :func:`_float_cholesky`'s (the same operations in the same order)."""
    if type(A) is np.ndarray and A.dtype == np.float64:
        return _float_cholesky(A)
    n = A.shape[0]
    L, inv = [], []
    for i in range(n):
        row = []
        for j in range(i):
            s = A[i, j]
            for k in range(j):
                s = s - row[k] * L[j][k]
            row.append(s * inv[j])
        s = A[i, i]
        for k in range(i):
            s = s - row[k] * row[k]
        inv.append(1.0 / bk.sqrt(_relu(s) + _TINY))
        L.append(row)
    return L, inv


def _float_cholesky(A):
    """:func:`_cholesky` of the float array ``A`` (n, n), a column at a time: column ``j``'s entries below
    the diagonal at once, each entry's products subtracted from the left as :func:`_cholesky`'s loops do
    (a sequential ``np.add.accumulate`` of the negated products: ``x - y`` is ``x + (-y)`` to the bit),
    so the factor is the same to the last bit in ``n`` NumPy operations instead of ``n^3 / 6`` Python
    ones (the NumPy road's polish of a correction of hundreds of rows)."""
    n = A.shape[0]
    L, inv = np.zeros((n, n)), np.empty(n)
    for j in range(n):
        Lj = L[j, :j]
        s = np.add.accumulate(np.concatenate((A[j, j:j + 1], -(Lj * Lj))))[-1]
        inv[j] = 1.0 / bk.sqrt(_relu(s) + _TINY)
        if j + 1 < n:
            s = np.add.accumulate(np.concatenate((A[j + 1:, j:j + 1], -(L[j + 1:, :j] * Lj)), axis=1), axis=1)
            L[j + 1:, j] = s[:, -1] * inv[j]
    return [L[i, :i].tolist() for i in range(n)], inv.tolist()


#: Rows of the blocks of :func:`_lower_inverse` below which the factor is written out element by element.
LEAF_ROWS = 12
#: Multiplications from which a product of the step's dense linear algebra is one block product (a
#: loop in the compiled code: :func:`~sparsedyn.backend.matmul`), so that its program grows with the
#: square of the contacts, not their cube.
STEP_BLOCK_PAIRS = 256


class Slots:
    """The slots in use of a step of ``nc`` slots: ``bound`` (a traced scalar, or None: no bound) the
    number of leading slots whose rows may be nonzero; past it every slot's entries that meet a slot
    in use are zeros.  :meth:`mm` gives a block product's ``live`` (:attr:`~sparsedyn.symbolic.block.Block.live`),
    so its compiled loop skips the slots not in use (a scene's free slots)."""

    def __init__(self, bound, nc):
        self.bound, self.nc = bound, nc

    def axis(self, per):
        """The slot of each element of an axis of ``per`` elements a slot (0: no slot, None)."""
        return np.repeat(np.arange(self.nc), per) if per else None

    def mm(self, *per):
        """``live`` of a product whose rows of ``A``, rows of ``B`` (and columns of ``B``) have ``per``
        elements a slot (0: not slots), or None without a bound."""
        if self.bound is None:
            return None
        return (self.bound, *(self.axis(p) if np.ndim(p) == 0 else p for p in per), *((None,) * (3 - len(per))))


def _mm(A, B, live=None):
    """``A @ B`` as a block product where it is large; ``live``: its slots in use (:meth:`Slots.mm`)."""
    return bk.matmul(A, B, min_pairs=STEP_BLOCK_PAIRS, live=live)


def _mv(A, x, live=None):
    """``A @ x`` (``A`` (n, n), ``x`` (n,)) as a block product where it is large (:func:`_mm`)."""
    return _mm(A, np.reshape(x, (-1, 1)), live)[:, 0]


def _mv_sym(A, x, live=None):
    """``A @ x`` for a symmetric ``A`` (n, n), its mirrored entries equal (``G`` in a stage's constants, an
    inverse ``L^-T L^-1`` mirrored), written ``A^T x``: the same products summed in the same order, and a
    compiled product by a vector reads the columns of ``A^T`` (an input's or a block's result's rows) where
    they lie, where ``A`` itself is first transposed into the workspace (a copy as large as ``A`` each
    stage run: :mod:`~sparsedyn.codegen.emit_blocks`)."""
    return _mv(A.T, x, live)


def _leaf_inverse(A):
    """``L^-1`` (n, n) of the Cholesky factor of the small positive definite ``A``, element by element."""
    L, inv = _cholesky(A)
    n = len(inv)
    Li = np.zeros((n, n), dtype=object if bk.is_symbolic(A) else float)      # L^-1, lower triangular
    for j in range(n):
        Li[j, j] = inv[j]
        for i in range(j + 1, n):
            s = 0
            for k in range(j, i):
                s = s + L[i][k] * Li[k, j]
            Li[i, j] = -inv[i] * s
    return Li


def _lower_inverse(A, slots=None, rows=None):
    """``L^-1`` (n, n) of the Cholesky factor ``A = L L^T`` of the positive definite ``A``, by halves
    (Golub and Van Loan, "Matrix computations", 2013, 4.2: the block Cholesky factorization):
    ``L11 = chol(A11)``, ``L21 = A21 L11^-T``, ``L22 = chol(A22 - L21 L21^T)``, and
    ``(L^-1)21 = -L22^-1 L21 L11^-1``; the products are block products, so the elementwise work is
    that of the leaves (:data:`LEAF_ROWS`).  ``slots`` (:class:`Slots`) and ``rows`` (n,), the slot of
    each row: ``A`` is block diagonal between the slots in use and the rest (whose block of the
    inverse the products then leave zero: it multiplies only their zero rows)."""
    n = A.shape[0]
    if n <= LEAF_ROWS:
        return _leaf_inverse(A)
    h = n // 2
    sl = Slots(None, 0) if slots is None else slots
    r1, r2 = (None, None) if rows is None else (rows[:h], rows[h:])
    Li11 = _lower_inverse(A[:h, :h], slots, r1)
    # the triangular factors first (a block product skips its first factor's structural zeros only)
    L21 = _mm(Li11, A[h:, :h].T, sl.mm(r1, r1, r2)).T
    Li22 = _lower_inverse(A[h:, h:] - _mm(L21, L21.T, sl.mm(r2, r1, r2)), slots, r2)
    Li = np.zeros((n, n), dtype=object if bk.is_symbolic(A) else float)
    Li[:h, :h], Li[h:, h:] = Li11, Li22
    Li[h:, :h] = -_mm(Li22, _mm(Li11.T, L21.T, sl.mm(r1, r1, r2)).T, sl.mm(r2, r2, r1))
    return Li


def _spd_inverse(A, slots=None, per=3):
    """The inverse of the positive definite ``A`` (n, n) from its Cholesky factor ``A = L L^T``:
    ``L^-T L^-1`` (the x-step is then a product with independent rows, not two triangular solves
    whose every row waits for the previous one).  ``slots`` (:class:`Slots`; ``per`` rows a slot):
    the slots in use, ``A`` block diagonal between them and the rest: that block of the inverse is
    left zero."""
    rows = None if slots is None else slots.axis(per)
    Li = _lower_inverse(A, slots, rows)
    return _mm(Li.T, Li, None if slots is None else slots.mm(rows, rows, rows))


def _low_rank_factor(Z, c, slots=None, lower=False):
    """``Wt`` (nv, m): the factor of ``(Z Z^T + c I)^-1 = (I - Wt^T Wt) / c`` for ``Z`` (m, nv) and ``c > 0``
    (Woodbury's identity: ``Wt = L^-1 Z^T``, ``L L^T = c I + Z^T Z``, an ``nv x nv`` factorization where
    ``G = Z Z^T`` has ``m > nv`` rows: the Delassus matrix of more contact rows than joints).  The
    cancellation in ``I - Wt^T Wt`` costs about ``u (1 + |G| / c)`` relative (``u`` the unit roundoff):
    no more than the explicit inverse's ``u |G| / c``.  ``slots`` (:class:`Slots`, three rows a slot):
    the slots in use (past them ``Z``'s rows are zero, and so ``Wt``'s columns).  ``lower``: ``(Wt, L^-1)``,
    with ``L^-1`` (nv, nv) (``(Z Z^T + c I)^-1 Z = Z (Z^T Z + c I)^-1 = Wt^T L^-1``: a product by ``Z``
    without the ``m x m`` inverse)."""
    sl = Slots(None, 0) if slots is None else slots
    nv = Z.shape[1]
    Li = _lower_inverse(_mm(Z.T, Z, sl.mm(0, 3, 0)) + c * np.eye(nv))
    Wt = _mm(Li, Z.T, sl.mm(0, 0, 3))
    return (Wt, Li) if lower else Wt


def _low_rank_solve(Wt, c, r, slots=None):
    """``(Z Z^T + c I)^-1 r`` (m,) from :func:`_low_rank_factor`'s ``Wt`` (nv, m): ``(r - Wt^T (Wt r)) / c``
    (``c`` None: 1), two products by ``nv x m`` matrices, not one by an ``m x m`` inverse."""
    sl = Slots(None, 0) if slots is None else slots
    x = r - _mv(Wt.T, _mv(Wt, r, sl.mm(0, 3)), sl.mm(3, 0))
    return x if c is None else x * (1.0 / c)


def low_rank(m, k):
    """Whether ``(Z Z^T + E)^-1`` (``Z`` (m, k), ``E`` diagonal) costs less by Woodbury's identity
    (:func:`_low_rank_factor`: ``m k^2`` to factor, ``2 m k`` a solve) than as an ``m x m`` inverse
    (``m^3 / 2``, ``m^2`` a solve): where ``2 k < m`` (talos on the floor, 96 rows of 38 joints; not
    the dm_control humanoid's 48 rows of 27)."""
    return 2 * k < m


def _solve_small(A, b):
    """``A^-1 b`` for the small positive definite ``A`` (k, k): Cholesky, then the two triangular solves."""
    L, inv = _cholesky(A)
    return _cholesky_solve(L, inv, b, A)


def _cholesky_solve(L, inv, b, like):
    """``M^-1 b`` from the Cholesky factor of ``M`` (:func:`_cholesky`'s rows and inverse diagonal): the
    two triangular solves; an array of ``like``'s kind (traced values or floats)."""
    k = len(inv)
    t = []
    for i in range(k):
        t.append((b[i] - sum(L[i][j] * t[j] for j in range(i))) * inv[i])
    x = [0.0] * k
    for i in reversed(range(k)):
        x[i] = (t[i] - sum(L[j][i] * x[j] for j in range(i + 1, k))) * inv[i]
    return _array(x, like)


def _array(xs, like):
    return np.asarray(xs, dtype=object if bk.is_symbolic(like) else float)
