"""The minimum-norm solve of the mode equations (:mod:`sparsedyn.contact.min_norm`) against numpy's
pseudo-inverse."""

import numpy as np

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sparsedyn.contact.min_norm import min_norm_solve, psd_solve
from test_friction_derivatives import BOX, CORNERS, Q0, Z, lifted


def test_min_norm_solve_equals_the_pseudo_inverse():
    """min_norm_solve (a complete orthogonal factorisation, LAPACK's gelsy) gives numpy's pinv(A,
    rcond=1e-12) @ B to rounding times the condition of A on its range (squared where B is not in the
    range: least squares): a regular system, a symmetric positive definite one, the Delassus matrix of
    the box's four corners (rank 6 of 12, the right side not in its range) and singular non-symmetric systems (sliding contacts' mode equations)."""
    rng = np.random.default_rng(3)
    P = sd.contact_problem(BOX, lifted(Q0, 1e-3), Z, Z, CORNERS)
    G = np.asarray(P.J @ P.JMinv.T)
    assert np.linalg.matrix_rank(G) == 6                         # four corners on six dofs: redundant
    M = rng.normal(size=(9, 9))
    cases = [(rng.normal(size=(9, 9)), False), (M @ M.T + np.eye(9), True), (G, True)]
    for r in (1, 5):
        cases.append((rng.normal(size=(7, r)) @ rng.normal(size=(r, 7)), False))
    for A, symmetric in cases:
        B = rng.normal(size=(len(A), 5))
        s = np.linalg.svd(A, compute_uv=False)
        kappa = s[0] / s[s > 1e-12 * s[0]][-1]
        got, ref = min_norm_solve(A, B), np.linalg.pinv(A, rcond=1e-12) @ B
        assert rel_err(got, ref) <= rounding_bound(len(A), kappa * kappa), (A.shape, symmetric)


def test_psd_solve_equals_the_pseudo_inverse_on_delassus_matrices():
    """psd_solve (a pivoted Cholesky factorisation, LAPACK's pstrf) gives numpy's pinv(G, rcond=1e-12) @ B to
    rounding times G's condition on its range
    (squared: B off the range, least squares) on the Delassus matrices G = J H^-1 J^T of the box's
    corners: all four (rank 6 of 12), their normal rows (rank 3 of 4: the position correction's
    system), one corner and three normal rows (regular), and a zero matrix; B in G's range and not."""
    rng = np.random.default_rng(4)
    P = sd.contact_problem(BOX, lifted(Q0, 1e-3), Z, Z, CORNERS)
    J, JMinv = np.asarray(P.J), np.asarray(P.JMinv)
    rows = [np.arange(12), np.arange(2, 12, 3), np.arange(3), np.arange(2, 9, 3)]
    Gs = [J[r] @ JMinv[r].T for r in rows]
    assert [np.linalg.matrix_rank(G) for G in Gs] == [6, 3, 3, 3]
    for G in Gs:
        s = np.linalg.svd(G, compute_uv=False)
        kappa = s[0] / s[s > 1e-12 * s[0]][-1]
        for B in (G @ rng.normal(size=(len(G), 5)), rng.normal(size=(len(G), 5))):
            got, ref = psd_solve(G, B), np.linalg.pinv(G, rcond=1e-12) @ B
            assert rel_err(got, ref) <= rounding_bound(len(G), kappa * kappa), len(G)
    assert np.array_equal(psd_solve(np.zeros((3, 3)), np.ones((3, 2))), np.zeros((3, 2)))


def test_psd_solve_of_a_non_finite_matrix_is_nan_not_zero():
    """A NaN or infinite diagonal (an overflowed state) gives NaN, which the derivatives' finite check
    reports, never a silent zero solution."""
    for bad in (np.nan, np.inf):
        A = np.eye(3)
        A[1, 1] = bad
        assert np.isnan(psd_solve(A, np.ones((3, 2)))).all()



def test_psd_solve_reveals_the_rank_of_semidefinite_matrices():
    """On random positive semidefinite A = M M^T (n, n) of every rank r from 1 to n (r = n: the regular
    branch, a triangular inverse; r < n: the Gram matrix of the pivoted factor), M's singular values over
    two decades (A's condition on its range 1e4), and B off A's range (least squares), psd_solve
    gives numpy's pinv(A, rcond=1e-12) @ B (the SVD's) to rounding times that condition squared, and A
    symmetric to rounding only (its lower triangle read) changes nothing beyond rounding."""
    rng = np.random.default_rng(5)
    for n in (1, 2, 5, 12, 21):
        for r in sorted({1, max(1, n // 2), n - 1, n} - {0}):
            U, V = (np.linalg.qr(rng.normal(size=(k, r)))[0] for k in (n, r))
            M = U * np.logspace(0, -2, r) @ V.T                 # singular values 1 to 1e-2
            A = M @ M.T
            B = rng.normal(size=(n, 3 * n))
            s = np.linalg.svd(A, compute_uv=False)
            kappa = s[0] / s[s > 1e-12 * s[0]][-1]
            ref = np.linalg.pinv(A, rcond=1e-12) @ B
            assert np.linalg.matrix_rank(A, 1e-12 * s[0]) == r
            got = psd_solve(A, B)
            assert kappa < 1.01e4 and rel_err(got, ref) <= rounding_bound(n, kappa * kappa), (n, r, kappa)
            skew = A + np.triu(rng.normal(size=(n, n)) * 1e-16 * s[0], 1)
            assert rel_err(psd_solve(skew, B), got) <= rounding_bound(n, kappa * kappa), (n, r)
