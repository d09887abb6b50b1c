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
