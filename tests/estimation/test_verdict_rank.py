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
