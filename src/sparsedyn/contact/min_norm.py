"""The minimum-norm solve of the linearised mode equations of a contact step.

The derivatives of a step (:mod:`~sparsedyn.contact.friction_derivatives`) solve, per state, the
mode equations of its contacts for the impulses' change, and the position correction's normal rows
for its own: square systems that are singular where the contact set is redundant (a box's four
corners hold more rows than the motions they stop), whose minimum-norm solution is the derivative of
the minimum-norm impulses.
"""

from __future__ import annotations

import numpy as np

__all__ = ["min_norm_solve", "psd_solve", "LU_RCOND", "PSD_RANK_TOL"]


#: Reciprocal condition number (LAPACK's estimate, 1-norm) above which a square system is solved by its
#: LU factors; below, by least squares with the directions of singular values (pivots) below 1e-12 of
#: the largest dropped: the estimate is within a factor of the size of the true one, so a system solved
#: by LU has no singular value the least-squares solve would drop, and both give its one solution.
LU_RCOND = 1e-9

#: Relative tolerance on the pivots of :func:`psd_solve`'s pivoted Cholesky factorisation (a pivot is a
#: diagonal entry of a Schur complement, the scale of an eigenvalue; the largest pivot is ``A``'s largest
#: diagonal entry): below it the rest of the matrix is taken as zero, as :func:`min_norm_solve` drops the
#: eigenvalues below 1e-12 of the largest.
PSD_RANK_TOL = 1e-12


def min_norm_solve(A, B, symmetric=False):
    """The minimum-norm least-squares solution ``X`` (n, k) of ``A X = B`` (``A`` (n, n), ``B`` (n, k)):
    ``pinv(A, rcond=1e-12) @ B`` to rounding times the condition of ``A`` on its range (the directions
    of singular values below 1e-12 of the largest dropped).  A ``symmetric`` ``A`` (its lower triangle
    read) by its Cholesky factors where it is positive definite and regular, else by its
    eigendecomposition, as ``pinv(..., hermitian=True)``; another by its LU factors where
    it is regular (a contact set that is not redundant), else (a box's four corners: more rows than the
    motions they hold) by a complete orthogonal factorisation: QR with column pivoting ``A P = Q [R11
    R12; 0 0]`` (LAPACK's ``geqp3``, the rank by 1e-12 on ``R``'s diagonal), the QR factors ``Z T``
    of ``[R11 R12]^T``, ``x_P = Z T^-T Q1^T B``.  LAPACK factors ``A`` alone and the small triangles
    are inverted; the products with ``B`` are NumPy's (a triangular solve with many right-hand sides
    goes to the BLAS's threads, which cost more than they save at these sizes)."""
    from scipy.linalg import lapack as _lapack          # (here: `import sparsedyn` does not load SciPy)
    n = len(A)
    if symmetric:
        c, info = _lapack.dpotrf(A, lower=1)                   # positive definite and regular: Cholesky
        if info == 0:
            rcond, info = _lapack.dpocon(c, np.abs(A).sum(0).max(), uplo="L")
            if info == 0 and rcond > LU_RCOND:
                return _lapack.dpotrs(c, B, lower=1)[0]
        w, V, info = _lapack.dsyevd(A, lower=1)
        if info:                                # (LAPACK did not converge: the SVD's road)
            return np.linalg.pinv(A, rcond=1e-12, hermitian=True) @ B
        top = max(-float(w[0]), float(w[-1])) if n else 0.0      # (ascending eigenvalues: the largest |w|)
        keep = np.abs(w) > 1e-12 * top
        if not keep.all():
            V, w = V[:, keep], w[keep]
        return V @ ((V.T @ B) / w[:, None])
    lu, piv, info = _lapack.dgetrf(A)
    if info == 0:
        rcond, info = _lapack.dgecon(lu, np.abs(A).sum(0).max(), norm="1")
        if info == 0 and rcond > LU_RCOND:
            return _lapack.dgetri(lu, piv)[0] @ B
    qr, jpvt, tau, _, _ = _lapack.dgeqp3(A)
    d = np.abs(qr.diagonal())
    r = int(np.count_nonzero(d > 1e-12 * d[0])) if n and d[0] > 0 else 0
    x = np.zeros((n,) + B.shape[1:])
    if r:
        y = _lapack.dorgqr(qr[:, :r], tau[:r])[0].T @ B                   # Q1^T B
        z, t, _, _ = _lapack.dgeqrf(np.triu(qr[:r]).T)                   # [R11 R12]^T = Z T
        x[jpvt - 1] = _lapack.dorgqr(z, t)[0] @ (_lapack.dtrtri(np.triu(z[:r]))[0].T @ y)
    return x


def psd_solve(A, B):
    """:func:`min_norm_solve` of a symmetric positive semidefinite ``A`` (n, n) (its lower triangle read;
    a Delassus matrix ``J H^-1 J^T`` or a principal block of it), ``B`` (n, k): ``pinv(A, rcond~1e-12) @
    B`` by a pivoted Cholesky factorisation ``P^T A P = L L^T`` (LAPACK's ``pstrf``; the rank ``r`` where
    the largest pivot left, a diagonal entry of a Schur complement, falls below :data:`PSD_RANK_TOL` of
    ``A``'s largest diagonal entry), no eigendecomposition: regular (``r = n``), ``X = P L^-T L^-1 P^T
    B``; singular (a box's four corners: rank 6 of 12), ``L`` (n, r) of full column rank, ``L = Q R``
    (QR) and ``X = P Q R^-T R^-1 Q^T P^T B``, the minimum-norm least-squares solution.  The factor's
    inverses are LAPACK's, the products NumPy's (as :func:`min_norm_solve`: no triangular solve with
    many right-hand sides on the BLAS's threads).  Not for an indefinite ``A``."""
    from scipy.linalg import lapack as _lapack          # (here: `import sparsedyn` does not load SciPy)
    n = len(A)
    top = float(A.diagonal().max()) if n else 0.0
    if not 0.0 < top < np.inf:                          # zero or empty: no pivot above the tolerance;
        return np.full((n,) + B.shape[1:], 0.0 if top == 0.0 else np.nan)     # NaN, inf: NaN (not zeros)
    c, piv, r, info = _lapack.dpstrf(A, tol=PSD_RANK_TOL * top, lower=1)
    if info < 0:                                        # (an argument LAPACK refused)
        return min_norm_solve(A, B, symmetric=True)
    p = piv - 1
    X = np.empty((n,) + B.shape[1:])
    if r == n:
        Li = _lapack.dtrtri(np.tril(c), lower=1)[0]   # (the factor's strict upper triangle is A's: masked)
        X[p] = Li.T @ (Li @ B[p])
        return X
    qr, tau, _, _ = _lapack.dgeqrf(np.tril(c[:, :r]))
    Ri = _lapack.dtrtri(np.triu(qr[:r, :r]), lower=0)[0]
    Q = _lapack.dorgqr(qr, tau)[0]
    X[p] = Q @ (Ri.T @ (Ri @ (Q.T @ B[p])))
    return X

