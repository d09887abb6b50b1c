"""The minimum-norm solves in C (sparsedyn.contact.min_norm_native) against NumPy's pseudo-inverse, to
rounding times the condition of the system on its range, squared (``rounding_bound``)."""

import numpy as np

from conftest import rel_err, rounding_bound
from test_scene_derivatives import _box_pressed_into_table
from test_state_derivatives_native import _pieces
from sparsedyn.contact.min_norm_native import native_pinv_solve


def _kappa(A):
    s = np.linalg.svd(A, compute_uv=False)
    return s[0] / s[s > 1e-12 * s[0]][-1]


def test_the_solves_equal_the_pseudo_inverse():
    """The two solves against numpy's pinv(A, rcond=1e-12) @ B (the SVD's), to rounding times A's
    condition on its range squared (B off the range: least squares): the general one on regular,
    rank-deficient and non-symmetric matrices and the box corners' Delassus matrix (rank 6 of 12); the
    positive semidefinite one on A = M M^T of every rank (M's singular values over two decades).  Sizes
    from 1 to 40: the reflections' rows in whole vectors and the columns past them."""
    rng = np.random.default_rng(6)
    model, rows = _pieces(_box_pressed_into_table)[:2]
    G = rows[:, 5 * model.nv:5 * model.nv + len(rows)]
    general = [rng.normal(size=(9, 9)), rng.normal(size=(30, 30)), G]
    for r in (1, 5, 6):
        general.append(rng.normal(size=(7, r)) @ rng.normal(size=(r, 7)))
    for A in general:
        B = rng.normal(size=(len(A), 5))
        got, ref = native_pinv_solve(A, B, True), np.linalg.pinv(A, rcond=1e-12) @ B
        kappa = _kappa(A)
        assert rel_err(got, ref) <= rounding_bound(len(A), kappa * kappa), (A.shape, kappa)
    for n in (1, 5, 12, 21, 40):
        for r in sorted({1, max(1, n // 2), n - 1, n} - {0}):
            U, V = (np.linalg.qr(rng.normal(size=(k, r)))[0] for k in (n, r))
            M = U * np.logspace(0, -2, r) @ V.T
            A, B = M @ M.T, rng.normal(size=(n, 3 * n))
            ref, kappa = np.linalg.pinv(A, rcond=1e-12) @ B, _kappa(A)
            for general in (False, True):
                got = native_pinv_solve(A, B, general)
                assert rel_err(got, ref) <= rounding_bound(n, kappa * kappa), (n, r, general)
    assert np.array_equal(native_pinv_solve(np.zeros((3, 3)), np.ones((3, 2)), False), np.zeros((3, 2)))
