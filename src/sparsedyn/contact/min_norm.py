"""The minimum-norm solve of the linearised mode equations of a contact step.

The derivatives of a step (:mod:`~sparsedyn.contact.friction_derivatives`) solve, per state, the
mode equations of its contacts for the impulses' change, and the position correction's normal rows
for its own: square systems that are singular where the contact set is redundant (a box's four
corners hold more rows than the motions they stop), whose minimum-norm solution is the derivative of
the minimum-norm impulses: a general one by a complete orthogonal factorisation
(:func:`min_norm_solve`), a symmetric positive semidefinite one (sticking contacts, the position
correction: a Delassus matrix) by a pivoted Cholesky factorisation (:func:`psd_solve`).  At these sizes
(a few to a hundred rows) each call from Python costs more than its arithmetic: few calls, no solve
with many right-hand sides where a product does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["min_norm_solve", "psd_solve", "RANK_RCOND"]


#: Reciprocal condition number below which :func:`min_norm_solve` drops the rest of a triangular
#: factor (the rank of the system), as ``pinv(A, rcond=1e-12)`` drops the singular values below 1e-12 of
#: the largest; :func:`psd_solve` the rest of its Cholesky factorisation whose diagonal is below it
#: times the trace.
RANK_RCOND = 1e-12


def min_norm_solve(A, B):
    """The minimum-norm least-squares solution ``X`` (n, k) of ``A X = B`` (``A`` (n, n), ``B`` (n, k)):
    ``pinv(A, rcond~1e-12) @ B`` (a regular contact set, or a box's four corners: more rows than the
    motions they hold) by LAPACK's ``gelsy`` in one call: QR with
    column pivoting ``A P = Q [R11 R12; 0 R22]``, the rank the largest leading ``R11`` whose estimated
    condition stays below 1e12 (incremental condition estimation), ``[R11 R12] = [T 0] Z`` and ``x_P = Z^T
    T^-1 Q1^T B``: the minimum-norm least-squares solution (the factorisation, the rank and the solve in
    LAPACK: at these sizes each call from Python costs more than its arithmetic).  Where ``B`` has more
    columns than rows (the 3 nv columns of the state's change) ``gelsy`` gives ``pinv(A)`` (``B = I``) and
    NumPy the product: LAPACK's unblocked solves with many right-hand sides cost more than a product."""
    n, k = A.shape[0], B.shape[1]
    wide = k > n
    C = np.eye(n) if wide else B
    work = max(4 * n + 1, 2 * n + C.shape[1])               # (the unblocked code's: faster at these sizes)
    x, _, _, info = _gelsy()(A, C, np.zeros(n, np.int32), RANK_RCOND, work)[1:]
    if info:                                                   # (an argument LAPACK refused)
        return np.linalg.pinv(A, rcond=1e-12) @ B
    return x @ B if wide else x


def psd_solve(A, B):
    """:func:`min_norm_solve` of a symmetric positive semidefinite ``A`` (n, n) (a Delassus matrix ``J H^-1
    J^T`` or a principal block of it, symmetric to rounding: its lower triangle is read; a box's four
    corners: rank 6 of 12), ``B`` (n, k); a zero ``A`` gives zeros, a NaN or infinite diagonal NaN (never
    a silent zero solution).

    By the Cholesky factorisation with complete (diagonal) pivoting, LAPACK's ``pstrf`` (Higham,
    "Analysis of the Cholesky decomposition of a semi-definite matrix", 1990; Lucas, "LAPACK-style
    codes for level 2 and 3 pivoted Cholesky factorizations", 2004): ``P^T A P = U^T U`` with ``U``
    (r, n) upper trapezoidal, ``r`` the rank: the factorisation stops where the largest diagonal of the
    rest (the Schur complement, positive semidefinite, so its norm is at most ``n`` times that
    diagonal) falls below ``RANK_RCOND`` times ``A``'s trace.  With ``S = U U^T`` (r, r) positive
    definite (``U`` has full row rank) and ``X = S^-1 U`` (r, n), ``pinv(U^T U) = X^T X`` (``X =
    pinv(U^T)``), so the minimum-norm least-squares solution is::

        x = P X^T X P^T B

    ``X P^T`` from one Cholesky solve with ``S`` (``posv``, the right side ``U P^T``), whose condition is
    ``A``'s on its range (what ``pinv`` resolves); where ``A`` is regular (``r = n``) ``x = P U^-1 U^-T P^T
    B`` (``trtri``).  Two LAPACK calls and a few products: a complete orthogonal factorisation
    (:func:`min_norm_solve`) costs more at these sizes."""
    n = len(A)
    top = A.trace() if n else 0.0                       # (A positive semidefinite: its diagonal's sum)
    if not 0.0 < top < np.inf:                          # zero or empty: no pivot above the tolerance;
        return np.full((n,) + B.shape[1:], 0.0 if top == 0.0 else np.nan)     # NaN, inf: NaN (not zeros)
    lapack = (_LAPACK or _lapack())[0]
    # A's lower triangle, zeros above, as the upper triangle of its transpose in Fortran's order (no copy)
    lower = _LOWER.get(n)
    U, piv, r, info = lapack.dpstrf((A * (_lower(n) if lower is None else lower)).T, RANK_RCOND * top, 0, 1)
    if info < 0 or r == 0:                              # (an argument LAPACK refused; no pivot: A is not
        return min_norm_solve(A, B)                     # semidefinite, its diagonal's sum despite)
    p = piv - 1
    if r == n:                                          # regular: A^-1 = V V^T, V = P U^-1 (no solve with
        V = np.empty((n, n))                            # k right sides: OpenBLAS may thread those)
        V[p] = lapack.dtrtri(U)[0]
        return V @ (V.T @ B)
    Up = np.empty((r, n))                               # U P^T: S = U U^T is the same, X P^T from one solve
    Up[:, p] = U[:r]
    X, info = lapack.dposv(Up @ Up.T, Up)[1:]
    if info:                                            # S not positive definite to rounding (never after
        return min_norm_solve(A, B)                     # a pivoted factorisation): the general solve
    return X.T @ (X @ B)


_LOWER, _LAPACK = {}, []


def _lower(n):
    """The lower triangle of ones (n, n) (kept per size; read-only)."""
    got = _LOWER[n] = np.tri(n)
    got.flags.writeable = False
    return got


def _lapack():
    """SciPy's LAPACK module (imported on first use: ``import sparsedyn`` does not load SciPy)."""
    from scipy.linalg import lapack
    _LAPACK.append(lapack)
    return _LAPACK


def _gelsy():
    """LAPACK's ``dgelsy``."""
    return (_LAPACK or _lapack())[0].dgelsy
