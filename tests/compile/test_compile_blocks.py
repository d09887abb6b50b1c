"""Dense block products by a vector in straight-line code (:mod:`sparsedyn.codegen.emit_blocks`): a
product of which only some rows are read (the contact solver's tangential velocities ``(G lambda)_t``)
runs as the rows product that computes every row, reading an input matrix in place, and its results
equal the interpreted program bit for bit (each element the same products summed in the same order)."""

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
    if lib is None:
        pytest.skip("no C compiler")
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
