"""The low-rank solves of the contact solver's linear algebra (:mod:`sparsedyn.contact.friction_linalg`):
Woodbury's identity on ``G = Z Z^T`` against dense solves (the compiled step's equality with its NumPy road:
``test_friction_kernel.py``)."""

import numpy as np
import pytest

from sparsedyn.contact import friction_polish as fp
from sparsedyn.contact.friction_linalg import _low_rank_factor, _low_rank_solve, low_rank

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


@pytest.mark.parametrize("c", [1e-2, 1.0])
def test_low_rank_factor_lower_gives_the_solve_of_Z_itself(c):
    """``lower``: ``(Wt, L^-1)`` with ``Wt^T L^-1 = (Z Z^T + c I)^-1 Z = Z (Z^T Z + c I)^-1`` (the polish's
    product by its held friction's columns without the ``m x m`` inverse), ``Wt`` the factor without it."""
    Z, _ = _problem(24, 9, 2)
    Wt, Li = _low_rank_factor(Z, c, lower=True)
    assert np.array_equal(Wt, _low_rank_factor(Z, c))
    assert np.allclose(Li, np.tril(Li), rtol=0, atol=0)                     # lower triangular
    X = np.linalg.solve(Z @ Z.T + c * np.eye(24), Z)
    cond = np.linalg.cond(Z.T @ Z + c * np.eye(9))
    assert np.linalg.norm(Wt.T @ Li - X) <= 50 * U * cond * np.linalg.norm(X)


def test_woodbury_only_where_it_costs_less():
    """Woodbury's factor where ``2 k < m`` (its solve, ``2 m k``, below the inverse's ``m^2``)."""
    assert low_rank(96, 38) and not low_rank(48, 27) and not low_rank(12, 6) and low_rank(13, 6)


def test_a_polish_by_woodbury_solves_the_mode_system_of_the_dense_inverse():
    """The polish's mode system (:func:`~sparsedyn.contact.friction_polish.mode_solution`) solved from a
    factor ``G = Z Z^T`` (Woodbury's identity) and from ``G`` (an ``m x m`` inverse): the same system,
    regularised by ``EPS`` of ``G``'s scale (its condition at most ``1 / EPS``), solved with the same
    refinement; answers equal within ``1 / EPS`` rounding units of the largest impulse, and the
    modes equal."""
    rng = np.random.default_rng(4)
    nc, k = 8, 5
    Z = rng.standard_normal((3 * nc, k))
    G = Z @ Z.T
    g = rng.standard_normal(3 * nc)
    mu = np.full(nc, 0.6)
    z = np.abs(rng.standard_normal((nc, 3))) * [0.1, 0.1, 1.0]
    z[[1, 5], :2] = [[0.6, 0.0], [0.0, -0.6]]                            # two on the cone's boundary: sliding
    z[3] = 0.0                                                           # one open
    z = z.reshape(-1)
    scale = np.abs(G).sum(1).max()
    dense = fp.mode_solution(G, g, mu, z, scale, np.ones(nc))
    wood = fp.mode_solution(G, g, mu, z, scale, np.ones(nc), Z=Z)
    assert np.array_equal(dense[1], wood[1]) and np.array_equal(dense[2], wood[2]) and dense[1][[1, 5]].all()
    assert np.abs(dense[0] - wood[0]).max() <= 100 * U / fp.EPS * np.abs(dense[0]).max()


@pytest.mark.parametrize("n", [1, 2, 13, 40])
def test_the_cholesky_factor_of_floats_is_the_elementwise_one_to_the_bit(n):
    """:func:`_cholesky` of a float array (column by column in NumPy, each entry's products subtracted
    from the left) against its element-by-element loops run on numbers (an object array of Python floats,
    the traced formulation): the same rows and inverse diagonal to the last bit; and ``L L^T = A`` to
    rounding (``A`` of condition 1e6)."""
    from sparsedyn.contact.friction_linalg import _cholesky
    rng = np.random.default_rng(n)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = Q @ np.diag(np.geomspace(1e-6, 1.0, n)) @ Q.T
    L, inv = _cholesky(A)
    ref_L, ref_inv = _cholesky(A.astype(object))
    assert [len(r) for r in L] == list(range(n))
    assert all(np.array_equal(np.array(a, float), np.array(b, float)) for a, b in zip(L, ref_L))
    assert np.array_equal(np.array(inv, float), np.array(ref_inv, float))
    F = np.zeros((n, n))
    for i, (row, d) in enumerate(zip(L, inv)):
        F[i, :i], F[i, i] = row, 1.0 / d
    assert np.abs(F @ F.T - A).max() <= 4 * n * U * np.abs(A).max()


def test_a_symmetric_product_reads_the_transpose_in_place():
    """:func:`_mv_sym` of a traced matrix input (``K["G"]`` of a stage: its mirrored entries equal values):
    a block whose first factor is the input's transpose, which the compiled product by a vector reads
    where it lies (:func:`~sparsedyn.codegen.emit_blocks._column_source`: ``"xt"``, no transposed copy);
    at a symmetric value its rows' products ``A[i, l] x[l]`` summed in ``l`` order, to the bit; on floats,
    ``A @ x`` to rounding (``n u |A| |x|``)."""
    from sparsedyn.codegen.emit_blocks import _column_source
    from sparsedyn.contact.friction_linalg import _mv_sym
    from sparsedyn.symbolic.ir import Graph
    n = 24
    g = Graph()
    A, x = g.inputs(0, (n, n)), g.inputs(1, (n,))
    p = g.program([_mv_sym(A, x)], [(n, n), (n,)])
    assert len(p.blocks) == 1 and _column_source(p, 0, "double")[0] == "xt"
    rng = np.random.default_rng(5)
    S, v = rng.standard_normal((n, n)), rng.standard_normal(n)
    S = np.tril(S) + np.tril(S, -1).T
    want = np.zeros(n)
    for r in range(n):
        for col in range(n):
            want[r] = S[r, col] * v[col] if col == 0 else want[r] + S[r, col] * v[col]
    assert np.array_equal(p.evaluate([S, v])[0], want)
    assert np.abs(_mv_sym(S, v) - S @ v).max() <= n * U * np.abs(S).max() * np.abs(v).sum()
