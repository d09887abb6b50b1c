"""The verdict's rank by exact reductions (Schur complement on the Newton-Euler rows, pinned columns)
equals the rank of the whole matrix by SVD, and its null vectors are null vectors of the whole matrix."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.estimation.casestudy import case_problems
from sparsedyn.estimation.verdict import _rank
from sparsedyn.sparse.assembly import SystemPattern


@pytest.fixture(scope="module")
def problems():
    return case_problems(sd.humanoid())


@pytest.mark.parametrize("name", ["eq18", "eq23-nz", "ankle-ft", "redundant"])
def test_reduced_rank_equals_the_svd_rank(problems, name):
    prob = problems[name]
    model = prob.model
    pattern = SystemPattern(prob.sparse_problem())
    # a generic configuration, and the standing posture where eq18 and eq23 lose rank
    for q in (model.random_configuration(np.random.default_rng(11)), sd.humanoid_standing_configuration()):
        A = prob._dense(pattern, q)
        r_svd, _ = _rank(A)
        r, V = prob._rank(A, null=True)
        assert r == r_svd
        assert V.shape == (A.shape[1], A.shape[1] - r)
        if V.size:
            s = np.linalg.svd(A, compute_uv=False)
            # null vectors: |A V| at the level of the discarded singular values, orthonormal columns
            assert np.abs(A @ V).max() <= 1e-10 * s[0]
            assert np.abs(V.T @ V - np.eye(V.shape[1])).max() < 1e-12


def test_unit_triangular_solve_by_levels():
    """``N^-1 B`` for ``N`` triangular up to a symmetric permutation: equal to the dense solve
    (to rounding, the system being well conditioned), and ``None`` for a dependency cycle or a zero
    diagonal entry."""
    import scipy.sparse as sps
    from sparsedyn.estimation.verdict import _unit_triangular_solve
    rng = np.random.default_rng(4)
    k = 60
    L = np.tril(rng.normal(size=(k, k)) * (rng.random((k, k)) < 0.1), -1) + np.diag(rng.uniform(1, 2, k))
    perm = rng.permutation(k)
    N = L[np.ix_(perm, perm)]                          # triangular up to a symmetric permutation
    B = rng.normal(size=(k, 3))
    T = _unit_triangular_solve(sps.csr_matrix(N), B)
    assert np.abs(N @ T - B).max() <= 1e-12 * np.abs(B).max() * k
    assert np.allclose(T, np.linalg.solve(N, B), rtol=1e-10, atol=1e-12)
    cyc = np.eye(3) + np.array([[0, 0.5, 0], [0, 0, 0.5], [0.5, 0, 0]])
    assert _unit_triangular_solve(sps.csr_matrix(cyc), np.ones((3, 1))) is None
    zero = np.diag([1.0, 0.0, 1.0])
    assert _unit_triangular_solve(sps.csr_matrix(zero), np.ones((3, 1))) is None
