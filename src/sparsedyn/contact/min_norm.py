"""The minimum-norm solve of the linearised mode equations of a contact step.

The derivatives of a step (:mod:`~sparsedyn.contact.friction_derivatives`) solve, per state, the
mode equations of its contacts for the impulses' change, and the position correction's normal rows
for its own: square systems that are singular where the contact set is redundant (a box's four
corners hold more rows than the motions they stop), whose minimum-norm solution is the derivative of
the minimum-norm impulses.
"""

from __future__ import annotations

import numpy as np

__all__ = ["min_norm_solve", "LU_RCOND"]


#: Reciprocal condition number (LAPACK's estimate, 1-norm) above which a square system is solved by its
#: LU factors; below, by least squares with the directions of singular values (pivots) below 1e-12 of
#: the largest dropped: the estimate is within a factor of the size of the true one, so a system solved
#: by LU has no singular value the least-squares solve would drop, and both give its one solution.
LU_RCOND = 1e-9


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
