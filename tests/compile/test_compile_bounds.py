"""Block products bounded at run time (:mod:`sparsedyn.codegen.emit_bounds`): a product traced with
``live`` (the slot of each row and column, and a traced number of slots in use) whose operands are
block diagonal between the slots in use and the rest runs over the slots in use alone: those rows and
columns equal the interpreted (whole) product bit for bit, the others are zero, whatever the bound
(none, some, all, NaN), in every shape of loop (general, rows, lanes, columns, the mirrored ``X^T X``)."""

import numpy as np
import pytest

from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn import backend as bk
from sparsedyn.codegen import emit_bounds
from sparsedyn.symbolic.trace import trace_function
from test_compile_blocks import _compiled

NS = 8                              # slots; three rows a slot: 24 rows (several passes of every loop)
R3 = np.repeat(np.arange(NS), 3)


def _products(A, B, x, b):
    """Bounded products of the slots ``< b[0]``: ``A B`` (general), ``A x`` read twice (columns: the
    matrix transposed once), ``B x`` (lanes: an input matrix read once by a vector), ``A [x, 2 x]``
    (rows: two columns), ``A^T A`` (mirrored), and ``A x`` unbounded (the same value)."""
    n = A.shape[0]
    live = (b[0], R3, R3, R3)
    mv = (b[0], R3, R3, None)
    X = np.reshape(x, (-1, 1))
    C = bk.matmul(A, B, min_pairs=1, live=live)
    y1 = bk.matmul(A, X, min_pairs=1, live=mv)[:, 0]
    y2 = bk.matmul(A, np.reshape(y1 + x, (-1, 1)), min_pairs=1, live=mv)[:, 0]
    y3 = bk.matmul(B, X, min_pairs=1, live=mv)[:, 0]
    Y = bk.matmul(A, np.stack([x, 2.0 * x], 1), min_pairs=1, live=mv)
    L = np.array([[A[i, j] if j <= i else 0 for j in range(n)] for i in range(n)], dtype=object)
    T = bk.matmul(L.T, L, min_pairs=1, live=live)
    y0 = bk.matmul(A, X, min_pairs=1)[:, 0]
    return np.concatenate([C.reshape(-1), y1, y2, y3, Y.reshape(-1), T.reshape(-1), y0])


def _split(out, n):
    sizes = [n * n, n, n, n, 2 * n, n * n, n]
    return np.split(out, np.cumsum(sizes)[:-1])


def _block_diagonal(rng, used):
    """A random (24, 24) matrix whose entries between the slots ``< used`` and the rest are zero."""
    A = rng.standard_normal((3 * NS, 3 * NS))
    live = R3 < used
    A[np.ix_(live, ~live)] = 0.0
    A[np.ix_(~live, live)] = 0.0
    return A


@pytest.mark.parametrize("used", [0, 1, 5, NS, np.nan])
def test_a_bounded_product_equals_the_whole_one_on_the_slots_in_use_and_is_zero_elsewhere(used, compile_cache,  # noqa
                                                                                         monkeypatch):
    """Operands block diagonal between the slots in use and the rest (the rest's own block random):
    every bounded product's rows and columns of the slots in use equal the interpreter's (the whole
    product: the terms left out are products by zero) bit for bit, the rest are zeros; a NaN bound,
    or one past the slots, bounds nothing (the whole product)."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(compile_cache))
    monkeypatch.setattr(emit_bounds, "MIN_PAIRS", 0)                  # (the products by a vector too)
    n = 3 * NS
    prog = trace_function(_products, [("A", (n, n)), ("B", (n, n)), ("x", (n,)), ("b", (1,))], None, name="bounded")
    assert len(prog.blocks) == 7 and sum(b.live is not None for b in prog.blocks) == 6
    src, call = _compiled(prog, "bounded")
    assert "switch" in src and "_nL[" in src and src.count("t[l * 24 + i]") == 1 and "SD_SHUF4(r0" in src
    rng = np.random.default_rng(13)
    k = NS if np.isnan(used) else used
    live = np.repeat(np.arange(NS) < k, 3)
    for _ in range(3):
        A, B = _block_diagonal(rng, k), _block_diagonal(rng, k)
        x = rng.standard_normal(n) * live if k < NS else rng.standard_normal(n)
        got = _split(call(A, B, x, [used]), n)
        ref = _split(np.asarray(prog.evaluate([A, B, x, [used]])[0], float).reshape(-1), n)
        for g, r, cols in zip(got, ref, [n, 1, 1, 1, 2, n, 1]):
            G, Rf = g.reshape(n, cols), r.reshape(n, cols)
            keep = np.outer(live, live if cols == n else np.ones(cols, bool))
            assert np.array_equal(G[keep], Rf[keep])
            assert not G[~keep].any()
        assert np.array_equal(got[-1], ref[-1])                       # the unbounded product: all of it
