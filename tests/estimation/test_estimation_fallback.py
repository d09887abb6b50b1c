"""The dense fallback of ``Estimator.solve`` for a state its checks flag (``_dense_state``): the
sparse LU of the square system, or of the augmented system of the constrained least-squares problem
(assembled sparse), gives the answer of the dense SVD reference (constrained weighted least squares
by null-space projection) to what the problem's conditioning allows."""

import numpy as np
import pytest
from conftest import rel_err

import sparsedyn as sd
from sparsedyn import estimation as est
from sparsedyn.estimation.casestudy import consistent_state, sample_noise


@pytest.fixture(scope="module")
def cases():
    return est.case_problems(sd.humanoid())


@pytest.mark.parametrize("name", ["ankle-ft", "redundant"])
def test_sparse_fallback_equals_the_dense_reference(cases, name):
    problem = cases[name]
    solver = problem.analyze()
    rng = np.random.default_rng(11)
    q, qd, qdd, w = consistent_state(problem, rng, batch=(3,))
    y, truth = problem.measurements(q, qd, qdd, w)
    if not solver.square:
        y = y + sample_noise(problem, rng, (3,))
    for i in range(3):
        d, _, chi2 = solver._dense_state(q[i], qd[i], y[i], None)          # the sparse LU
        d_ref, _, chi2_ref = solver.dense_reference(q[i], qd[i], y[i])      # the SVD
        assert rel_err(d, d_ref) < 1e-8
        assert abs(chi2 - chi2_ref) <= 1e-8 * max(1.0, chi2_ref)
        if solver.square:                        # noise-free: the exact answer
            assert rel_err(d, truth["d"][i]) < 1e-8
        else:
            assert chi2 > 0


@pytest.mark.parametrize("name", ["ankle-ft", "redundant"])
def test_state_matrix_is_the_dense_matrix_in_csc(cases, name):
    """The fallback assembles ``A`` sparse: exactly the CSC matrix of the dense ``A`` (same nonzeros,
    same order, duplicates summed, no explicit zeros), so SuperLU factors the same matrix."""
    import scipy.sparse as sps
    from sparsedyn.algorithms.kinematics import joint_transforms
    from sparsedyn.estimation.estimator import _state_matrix
    from sparsedyn.sparse.assembly import SystemPattern, d_values
    problem = cases[name]
    pat = SystemPattern(problem.sparse_problem())
    q = problem.model.random_configuration(np.random.default_rng(3))
    vals = d_values(pat, joint_transforms(problem.model, q)[0], (), False)
    vals[::7] = 0.0                                   # zeros at this state: no explicit zeros kept
    A, ref = _state_matrix(pat, vals), sps.csc_matrix(pat.dense(vals))
    assert A.shape == ref.shape == (pat.nrows, pat.n)
    assert np.array_equal(A.indptr, ref.indptr) and np.array_equal(A.indices, ref.indices)
    assert np.array_equal(A.data, ref.data) and np.all(A.data != 0)
    assert problem._rank(A)[0] == problem._rank(pat.dense(vals))[0]      # the rank test takes it sparse
