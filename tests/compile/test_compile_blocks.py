"""Dense block products by a vector in straight-line code (:mod:`sparsedyn.codegen.emit_blocks`): a
product of which only some rows are read (the contact solver's tangential velocities ``(G lambda)_t``)
runs as the rows product that computes every row, reading an input matrix in place, and its results
equal the interpreted program bit for bit (each element the same products summed in the same order)."""

import os

import numpy as np
import pytest

from conftest import rel_err, rounding_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn import backend as bk
from sparsedyn.codegen.cemit import emit_program
from sparsedyn.kernels import c_library
from sparsedyn.symbolic.trace import trace_function

N = 24


def _velocities(G, x, rows):
    """``(G (2 x + 1))[rows]``: a product by a computed vector, some of its rows read."""
    return bk.matmul(G, np.reshape(2.0 * x + 1.0, (-1, 1)), min_pairs=1)[rows, 0]


def _compiled(prog, name):
    """The C of ``prog`` and its single-state entry point, built into the test run's cache."""
    import ctypes
    src = "\n".join(emit_program(prog, name, "single"))
    lib = c_library(src)
    if lib is None:                 # (the project's own install brings one: ziglang)
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no C compiler")
    P = ctypes.POINTER(ctypes.c_double)

    def call(*xs):
        xs = [np.ascontiguousarray(x, float) for x in xs]
        y = np.zeros(prog.output_shapes[0])
        getattr(lib, f"sd_{name}")(*[x.ctypes.data_as(P) for x in xs], y.ctypes.data_as(P))
        return y
    return src, call


@pytest.mark.parametrize("kept", ["tangential", "one in three"])
def test_a_product_read_in_part_runs_as_rows_and_equals_the_interpreter(kept, compile_cache, monkeypatch):  # noqa: F811
    """Two rows of three read (the tangential ones): the rows product, ``G`` read where it lies (no
    copy to the workspace, no general loop); one row in three: the general loop, which computes only
    the rows read.  Either way the compiled values equal the interpreter's bit for bit and NumPy's
    float product to rounding (``N`` products summed, Wilkinson's bound)."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(compile_cache))
    rows = np.flatnonzero(np.arange(N) % 3 != 2) if kept == "tangential" else np.arange(0, N, 3)
    prog = trace_function(lambda G, x: _velocities(G, x, rows), [("G", (N, N)), ("x", (N,))], None,
                          name=f"partial_{len(rows)}")
    assert len(prog.blocks) == 1 and 0 < prog.blocks[0].pairs.any(1).sum() < N      # rows left out
    src, call = _compiled(prog, f"partial_{len(rows)}")
    rows_product = "_mm(" not in src and "memcpy" not in src
    assert rows_product == (kept == "tangential")
    rng = np.random.default_rng(3)
    for _ in range(3):
        A = rng.standard_normal((N, N))
        G, x = A @ A.T, rng.standard_normal(N)
        got = call(G, x)
        assert np.array_equal(got, np.asarray(prog.evaluate([G, x])[0], float).reshape(-1))
        assert rel_err(got, (G @ (2.0 * x + 1.0))[rows]) < rounding_bound(N, kappa=np.abs(G).sum(1).max() * np.abs(
            2.0 * x + 1.0).max() / np.abs(G @ (2.0 * x + 1.0)).max())


def _repeated(G, x):
    """Products by a vector that read one matrix several times, an input's (``G``) and a block's
    (``M = G G``): ``G (2 x + 1)``, ``G`` by that times ``x``, and ``M`` by both."""
    y1 = bk.matmul(G, np.reshape(2.0 * x + 1.0, (-1, 1)), min_pairs=1)[:, 0]
    y2 = bk.matmul(G, np.reshape(y1 * x, (-1, 1)), min_pairs=1)[:, 0]
    M = bk.matmul(G, G, min_pairs=1)
    return np.concatenate([y1, y2, bk.matmul(M, np.reshape(y1, (-1, 1)), min_pairs=1)[:, 0],
                           bk.matmul(M, np.reshape(y2, (-1, 1)), min_pairs=1)[:, 0]])


def test_a_matrix_read_by_several_products_is_transposed_once_and_equals_the_interpreter(compile_cache,  # noqa: F811
                                                                                        monkeypatch):
    """An input matrix and a block's result, each read by two products by a vector: each transposed
    once into the workspace (one transposing loop per matrix in the C), the products run on its
    columns, and the compiled values equal the interpreter's bit for bit (every row's products summed
    in the same order) and NumPy's float products to rounding (two products in a chain, ``N`` terms
    each, bounded through the magnitudes ``|G| |x|``)."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(compile_cache))
    prog = trace_function(_repeated, [("G", (N, N)), ("x", (N,))], None, name="repeated")
    assert len(prog.blocks) == 5
    src, call = _compiled(prog, "repeated")
    assert src.count(f"t[l * {N} + i]") == 2
    rng = np.random.default_rng(5)
    for _ in range(3):
        G, x = rng.standard_normal((N, N)), rng.standard_normal(N)
        got = call(G, x)
        assert np.array_equal(got, np.asarray(prog.evaluate([G, x])[0], float).reshape(-1))
        y1 = G @ (2.0 * x + 1.0)
        y2 = G @ (y1 * x)
        M = G @ G
        ref = np.concatenate([y1, y2, M @ y1, M @ y2])
        a = np.abs(G)
        size = np.concatenate([a @ np.abs(2.0 * x + 1.0), a @ (a @ np.abs(2.0 * x + 1.0) * np.abs(x)),
                               a @ a @ np.abs(y1), a @ a @ (a @ (a @ np.abs(2.0 * x + 1.0) * np.abs(x)))])
        assert np.all(np.abs(got - ref) <= rounding_bound(3 * N) * size)


def _grams(X):
    """``X^T X`` of a lower triangular ``X`` (its structural zeros above the diagonal) and ``Y Y^T``
    of the dense ``Y = X + X^T``: products whose ``A`` is ``B``'s transpose."""
    n = X.shape[0]
    L = np.array([[X[i, j] if j <= i else 0 for j in range(n)] for i in range(n)], dtype=object)
    Y = X + X.T
    return np.concatenate([bk.matmul(L.T, L, min_pairs=1).reshape(-1), bk.matmul(Y, Y.T, min_pairs=1).reshape(-1)])


def _ordered(A, B):
    """``A @ B`` in floats, every element's products summed in ``l`` order, the first first (the
    compiled loop's order: NumPy's ``@`` sums in its own), elementwise (no fused multiply-add)."""
    C = A[:, :1] * B[:1, :]
    for l in range(1, A.shape[1]):
        C = C + A[:, l:l + 1] * B[l:l + 1, :]
    return C


@pytest.mark.parametrize("N", [24, 27, 40])
def test_a_product_of_a_transpose_and_its_matrix_sums_its_lower_triangle_and_mirrors_it(N, compile_cache,  # noqa: F811
                                                                                        monkeypatch):
    """``X^T X``, ``X`` triangular or dense, of 24 rows (the humanoid's contact rows: one group of
    columns), 27 (padded to 28) and 40 (two groups): the compiled loop runs one pass per band of four
    rows, each summing only the chunks of four columns on or left of the band's diagonal (1 + 2 + ...
    chunks in each group of eight, not all of them for every row; ``A[i, l]`` read as ``B[l, i]``), and
    mirrors the rest; the result is symmetric and equals the interpreter's and NumPy's products summed in
    the same order bit for bit (``C[j, i]`` the products of ``C[i, j]`` with their factors swapped, in the
    same order; a triangular factor's structural zeros add ``+-0``) and NumPy's ``@`` to rounding (``N``
    terms, bounded through ``|X|^T |X|``)."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(compile_cache))
    prog = trace_function(_grams, [("X", (N, N))], None, name=f"grams_{N}")
    assert len(prog.blocks) == 2
    src, call = _compiled(prog, f"grams_{N}")
    mp, chunks = -(-N // 4) * 4, -(-N // 4)
    assert src.count(f"c[i * {mp} + j] = c[j * {mp} + i]") == 2 and src.count("j = (i | 3) + 1;") == 2
    # a pass per band of four rows, from the band's first row; chunk q's band sums (q mod 8) + 1 chunks
    for q in range(chunks):
        top = f"{4 * q + 4}" if q % 8 < 7 and q < chunks - 1 else f"{N}"
        assert src.count(f"for (int i = {4 * q}; i < {top}; i++)") == 2
    assert src.count("s0 = s0 + x *") == 2 * chunks
    # A[i, l] read as B[l, i] (no table of A's slots); Y Y^T, whose A is whole, steps through B's rows
    assert "_a[" not in src and src.count(f"r += {mp}; x = r[i];") == chunks
    # the triangular factor's rows gathered up to the chunk of their diagonal (never read further on)
    read = ",".join(str(min(mp, 4 * (l // 4 + 1))) for l in range(N))
    assert src.count("static const int r[") == 1 and src.count(f"r[{N}] = {{{read}}};") == 1
    assert src.count(" + x * *(const sd_v4u *)") == 2 * sum(q % 8 + 1 for q in range(chunks))
    rng = np.random.default_rng(7)
    for _ in range(3):
        X = rng.standard_normal((N, N))
        got = call(X)
        assert np.array_equal(got, np.asarray(prog.evaluate([X])[0], float).reshape(-1))
        L, Y = np.tril(X), X + X.T
        C1, C2 = got[:N * N].reshape(N, N), got[N * N:].reshape(N, N)
        assert np.array_equal(C1, C1.T) and np.array_equal(C2, C2.T)
        assert np.array_equal(C1, _ordered(L.T, L)) and np.array_equal(C2, _ordered(Y, Y.T))
        assert np.all(np.abs(C1 - L.T @ L) <= rounding_bound(N) * (np.abs(L).T @ np.abs(L)))
        assert np.all(np.abs(C2 - Y @ Y.T) <= rounding_bound(N) * (np.abs(Y) @ np.abs(Y).T))


def _chains(X, Y):
    """Products whose ``B`` lies in different ways: an input (copied in one run), an earlier product's
    whole result, its transpose, and values computed one by one (``2 P + 1``)."""
    P = bk.matmul(X, Y, min_pairs=1)
    out = [P, bk.matmul(X, P, min_pairs=1), bk.matmul(X, P.T, min_pairs=1), bk.matmul(X, 2.0 * P + 1.0, min_pairs=1)]
    return np.concatenate([o.reshape(-1) for o in out])


@pytest.mark.parametrize("n", [6, 8])
def test_a_product_reads_an_evenly_laid_out_operand_without_a_table(n, compile_cache, monkeypatch):  # noqa: F811
    """A product's ``B`` whose slots step evenly along its rows and columns (an input copied in one run,
    an earlier result, its transpose) is read in place (consecutive, ``n`` a multiple of the vector's
    four lanes) or gathered by its two steps, with no table of slots (only the values computed one by
    one, ``2 P + 1``, may need one); the compiled values equal the interpreter's bit for bit (the same
    products in the same order) and NumPy's to rounding (two products in a chain: ``2 n`` terms,
    bounded through the magnitudes)."""
    import re
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(compile_cache))
    prog = trace_function(_chains, [("X", (n, n)), ("Y", (n, n))], None, name=f"chains{n}")
    assert len(prog.blocks) == 4
    src, call = _compiled(prog, f"chains{n}")
    assert len(re.findall(r"static const int \w+_b\[", src)) <= 1
    even, places = src.count("for (int l = 0; l < "), set(re.findall(r"_mm\(w, w \+ (\d+), w", src))
    # n = 6: rows padded to 8 slots, every B gathered by its steps (the transpose, and the rest); n = 8: the
    # transpose gathered, the input and the earlier result read where they lie (each its own place)
    assert even >= 3 if n == 6 else (even >= 1 and len(places) >= 3)
    rng = np.random.default_rng(n)
    for _ in range(3):
        X, Y = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        got = call(X, Y)
        assert np.array_equal(got, np.asarray(prog.evaluate([X, Y])[0], float).reshape(-1))
        P = X @ Y
        ref = np.concatenate([P.ravel(), (X @ P).ravel(), (X @ P.T).ravel(), (X @ (2.0 * P + 1.0)).ravel()])
        a, b = np.abs(X), np.abs(Y)
        size = np.concatenate([(a @ b).ravel(), (a @ a @ b).ravel(), (a @ (a @ b).T).ravel(),
                               (a @ (2.0 * a @ b + 1.0)).ravel()])
        assert np.all(np.abs(got - ref) <= rounding_bound(2 * n + 1) * size)


def _transposes(W, Y, r):
    """Products by a vector whose matrix is a transpose: ``W^T r`` of an input ``W`` (k, n) and
    ``P^T r`` of an earlier block's result ``P = W Y`` (k, n): the contact solver's ``Wt^T (Wt r)``."""
    x = bk.matmul(W.T, np.reshape(r[:W.shape[0]] * 2.0, (-1, 1)), min_pairs=1)[:, 0]
    P = bk.matmul(W, Y, min_pairs=1)
    return np.concatenate([x, bk.matmul(P.T, np.reshape(r[:P.shape[0]], (-1, 1)), min_pairs=1)[:, 0]])


def test_a_product_by_a_transposed_matrix_reads_its_rows_in_place(compile_cache, monkeypatch):  # noqa: F811
    """``W^T r`` and ``P^T r`` (``W`` an input, ``P`` a block's result, ``k = 7`` rows: no multiple of
    the vector's lanes): each runs on the columns of the transpose, which are the rows of ``W`` and
    ``P`` where they lie (no table of slots for ``A``, no transposing loop, the input not copied); the
    compiled values equal the interpreter's bit for bit (every row's products summed in the same order)
    and NumPy's to rounding (``k`` terms, and the chain ``P = W Y`` before: ``2 k``, through the
    magnitudes)."""
    import re
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(compile_cache))
    k, n = 7, N
    prog = trace_function(_transposes, [("W", (k, n)), ("Y", (n, n)), ("r", (n,))], None, name="transposes")
    assert len(prog.blocks) == 3
    src, call = _compiled(prog, "transposes")
    assert "t[l * " not in src and not re.findall(r"static const int \w+_b[02]_a\[", src)
    assert re.search(r"_b0\(w, x0 \+ 0\);", src) and re.search(r"_b2\(w, w \+ \d+\);", src)
    assert f"(t + l * {n} + " in src and "(t + l * 24 + " in src
    rng = np.random.default_rng(11)
    for _ in range(3):
        W, Y, r = rng.standard_normal((k, n)), rng.standard_normal((n, n)), rng.standard_normal(n)
        got = call(W, Y, r)
        assert np.array_equal(got, np.asarray(prog.evaluate([W, Y, r])[0], float).reshape(-1))
        P = W @ Y
        ref = np.concatenate([W.T @ (2.0 * r[:k]), P.T @ r[:k]])
        a = np.abs(W)
        size = np.concatenate([a.T @ np.abs(2.0 * r[:k]), (a @ np.abs(Y)).T @ np.abs(r[:k])])
        assert np.all(np.abs(got - ref) <= rounding_bound(2 * k + n) * size)
