"""The low-rank solves of the contact solver's linear algebra (:mod:`sparsedyn.contact.friction_linalg`):
Woodbury's identity on ``G = Z Z^T`` against dense solves (the compiled step's equality with its NumPy road:
``test_friction_kernel.py``)."""

import numpy as np
import pytest

from sparsedyn.contact.friction_linalg import _low_rank_factor, _low_rank_solve, psd_factor

U = np.finfo(float).eps


def _problem(m, k, seed, spread=1e-5):
    """``Z`` (m, k) of singular values from ``spread`` to 1 (a Delassus factor: more rows than joints)."""
    rng = np.random.default_rng(seed)
    Q1, _ = np.linalg.qr(rng.standard_normal((m, k)))
    Q2, _ = np.linalg.qr(rng.standard_normal((k, k)))
    return Q1 @ np.diag(np.geomspace(spread, 1.0, k)) @ Q2.T, rng.standard_normal(m)


@pytest.mark.parametrize("c", [1e-6, 1e-2, 1.0])
def test_low_rank_solve_is_the_inverse_of_G_plus_c(c):
    """``(r - Wt^T Wt r) / c`` solves ``(Z Z^T + c I) x = r``: the residual within rounding of the
    system's size (``u (|G| + c) |x|``, a few units), for penalties down to 1e-6 of ``|G|``."""
    Z, r = _problem(24, 9, 0)
    A = Z @ Z.T + c * np.eye(24)
    x = _low_rank_solve(_low_rank_factor(Z, c), c, r)
    assert np.linalg.norm(A @ x - r) <= 50 * U * np.linalg.norm(A, 2) * np.linalg.norm(x)
    # against the dense solve: within the conditioning of A
    cond = np.linalg.cond(A)
    assert np.linalg.norm(x - np.linalg.solve(A, r)) <= 50 * U * cond * np.linalg.norm(x)


def test_low_rank_solve_without_c_is_the_inverse_of_G_plus_identity():
    """``c`` None: the solve of ``Z Z^T + I`` without the division (the polish's scaled system)."""
    Z, r = _problem(12, 5, 1)
    x = _low_rank_solve(_low_rank_factor(Z, 1.0), None, r)
    assert np.allclose((Z @ Z.T + np.eye(12)) @ x, r, rtol=0, atol=50 * U * np.linalg.norm(Z, 2) ** 2 * np.abs(x).max())


def test_psd_factor_reproduces_a_singular_G():
    """``psd_factor(G) psd_factor(G)^T = G`` for a singular positive semidefinite ``G`` (rank 4 of 9),
    to rounding of ``|G|``; a traced ``G`` is refused with a message naming the factor."""
    Z, _ = _problem(9, 4, 2)
    G = Z @ Z.T
    F = psd_factor(G)
    assert F.shape == (9, 9)
    assert np.abs(F @ F.T - G).max() <= 100 * U * np.linalg.norm(G, 2)
    from sparsedyn.symbolic.trace import trace_function
    with pytest.raises(ValueError, match="factor Z"):
        trace_function(psd_factor, [("G", (3, 3))])

