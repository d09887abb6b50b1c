"""Dense block products in the IR (sparsedyn.symbolic.block): ``Graph.matmul`` and ``backend.matmul``.

A block stands for the products and sums NumPy's object ``@`` would trace: the same values (its
expansion is those operations, in that order), the same flop counts, the same structural zeros,
in a program whose size is that of the operands and the result.  No C compiler here.
"""

import numpy as np
import pytest

from conftest import rel_err, rounding_bound
from sparsedyn import backend as bk
from sparsedyn.symbolic.ad import jacobian_program
from sparsedyn.symbolic.ir import MATMUL, MUL, Graph
from sparsedyn.symbolic.trace import trace_function


def _masked(a, b):
    """``A`` (4, 3) with a structural zero and a zero row, ``B`` (3, 5) with a zero column."""
    A = a.reshape(4, 3).copy()
    A[0, 1] = 0
    A[2, :] = 0
    B = b.reshape(3, 5).copy()
    B[:, 4] = 0
    return A, B


def _product(block):
    def f(a, b):
        A, B = _masked(a, b)
        C = Graph.matmul(next(x.g for x in a.flat), A, B) if block else A @ B
        return -C + 2.0 * b[0], C[1:].sum(), C
    return trace_function(f, [("a", (12,)), ("b", (15,))])


def test_block_equals_the_traced_product():
    """Values (against NumPy's float ``@``), structural zeros, flops and the expansion's operations
    equal those of the element-by-element trace; the block program holds one node per element."""
    blk, ref = _product(True), _product(False)
    assert len(blk.blocks) == 1 and sum(op == MATMUL for op, _, _ in blk.nodes) == 3 * 4   # a zero row, a zero column
    assert blk.flops() == ref.flops()
    assert blk.expanded().flops() == ref.flops() and len(blk.expanded().nodes) == len(ref.nodes)
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=12), rng.normal(size=15)
    A, B = _masked(a, b)
    got = blk.evaluate([a, b])
    assert rel_err(got[0], -(A @ B) + 2.0 * b[0]) < rounding_bound(3)
    assert rel_err(got[1], (A @ B)[1:].sum()) < rounding_bound(12)
    for g, r in zip(got, ref.evaluate([a, b])):
        assert np.array_equal(g, r)                  # the same operations in the same order
    # structural zeros stay constants of the program: the zero row of A, the zero column of B
    zeros = [e for e, (kind, _) in enumerate(blk.outputs[2]) if kind == "const"]
    assert zeros == [4, 9, 10, 11, 12, 13, 14, 19] == [e for e, (kind, _) in enumerate(ref.outputs[2]) if kind == "const"]


def test_the_expansion_folds_elements_of_constants():
    """An element whose pairs are all constants (``1 x c``, ``c x d``) is written out as the constant
    the tracer folds from numbers, and so is what reads it (``e * k``, ``e - k``): the expansion holds
    no operation of constants alone (vector code cannot initialise a vector with a product of two
    literals) and evaluates equal bit for bit to the element-by-element trace."""
    from sparsedyn.symbolic.ir import CONST

    def f(a, block):
        A = np.array([[1, 0], [0.1, 3.0], [a[0], 1]], dtype=object)
        B = np.array([[0.7, a[1]], [0.3, 2.0]], dtype=object)
        C = Graph.matmul(next(x.g for x in a.flat), A, B) if block else A @ B
        return C * 1.5 - 0.25, C.sum()
    blk, ref = (trace_function(lambda a: f(a, b), [("a", (2,))]) for b in (True, False))
    assert blk.blocks
    flat = blk.expanded()
    assert not [n for n in flat.nodes if n[0] > CONST and n[1] >= 0 and flat.nodes[n[1]][0] == CONST
                and (n[2] < 0 or flat.nodes[n[2]][0] == CONST)]
    a = np.array([0.3, -1.7])
    for g, r in zip(blk.evaluate([a]), ref.evaluate([a])):
        assert np.array_equal(g, r)


def test_the_expansion_is_made_once():
    """The NumPy road evaluates a block program through its expansion at every call: the expansion (and
    its evaluation plan) is made once and kept, so a second evaluation expands nothing again."""
    blk = _product(True)
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=12), rng.normal(size=15)
    first = blk.evaluate([a, b])
    exp = blk.expanded()
    assert exp is not blk and exp is blk.expanded() and exp.plan() is exp.plan()
    for g, r in zip(blk.evaluate([a, b]), first):
        assert np.array_equal(g, r)


def test_block_is_part_of_the_text_and_dead_blocks_go():
    """The program's text (its cache key) names the block's operands; a block no output reads is
    removed with its operands."""
    g = Graph()
    x = g.inputs(0, (2, 2))
    C = g.matmul(x, x)
    D = g.matmul(x, np.array([[1.0, 0], [0, 3.0]], dtype=object))
    p = g.program([C], [(2, 2)])
    assert len(p.blocks) == 1 and "block0 (2, 2) (2, 2) A 0 1 2 3 B 0 1 2 3" in p.text()
    q = g.program([D], [(2, 2)])
    assert len(q.blocks) == 1 and q.text() != p.text()
    # a diagonal B: one product per element, the two by 1.0 none (x 1 = x, folded as the tracer folds it)
    assert q.flops()["mul"] == 2 and q.flops()["add"] == 0 and q.flops() == q.expanded().flops()
    assert sum(op == MUL for op, _, _ in q.expanded().nodes) == 2
    with pytest.raises(ValueError, match=r"expected matrices \(n, k\) and \(k, m\)"):
        g.matmul(x, g.inputs(1, (3, 2)))


def test_differentiation_reads_the_expansion():
    """``d(A B)/dA`` of a block program: the reverse-mode Jacobian program equals ``B^T`` per row."""
    def f(a, b):
        return bk.matmul(a.reshape(2, 3), b.reshape(3, 2))
    old = bk.BLOCK_MIN_PAIRS
    bk.BLOCK_MIN_PAIRS = 1
    try:
        prog = trace_function(f, [("a", (6,)), ("b", (6,))])
    finally:
        bk.BLOCK_MIN_PAIRS = old
    assert len(prog.blocks) == 1
    J = jacobian_program(prog, [0])
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=6), rng.normal(size=6)
    dC_da = J.evaluate([a, b])[0].reshape(2, 2, 2, 3)
    B = b.reshape(3, 2)
    for i in range(2):
        for j in range(2):
            want = np.zeros((2, 3))
            want[i] = B[:, j]
            assert np.array_equal(dC_da[i, j], want)


def test_backend_matmul_records_large_products_only():
    """``backend.matmul``: a block from :data:`~sparsedyn.backend.BLOCK_MIN_PAIRS` products counted on
    the operands' structural zeros; below, and on float arrays, the plain product."""
    n = 32                                          # 32^3 = BLOCK_MIN_PAIRS products when dense
    g = Graph()
    A, B = g.inputs(0, (n, n)), g.inputs(1, (n, n))
    assert len(g.blocks) == 0
    bk.matmul(A, B)
    assert len(g.blocks) == 1
    A[:, 0] = 0                                     # one structural zero column: fewer products
    bk.matmul(A, B)
    assert len(g.blocks) == 1
    x = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(bk.matmul(x, x.T), x @ x.T)


def test_replay_reads_the_expansion():
    """``Program.replay`` (the interpreter behind inlining and the CasADi and JAX bridges) gives a value
    per node of the block program: run on floats, its outputs equal the interpreted program's."""
    import math
    blk = _product(True)
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=12), rng.normal(size=15)
    val = blk.replay(lambda j, k: (a, b)[j][k], {"sin": math.sin, "cos": math.cos, "sqrt": math.sqrt,
                                                 "atan2": math.atan2, "copysign": math.copysign})
    assert len(val) == len(blk.nodes)
    for row, want in zip(blk.outputs, blk.evaluate([a, b])):
        got = [val[v] if kind == "node" else v for kind, v in row]
        assert np.array_equal(np.reshape(got, np.shape(want)), want)
