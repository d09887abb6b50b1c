"""The order of a program's operations in its C code (sparsedyn.codegen.cemit.schedule) and the
transposed, cache-bypassing stores of large batch results.

:func:`~sparsedyn.codegen.cemit.schedule` reorders a program's operations (each value computed just
before its first use, output after output): every operation keeps its operands, so the reordered
program is a valid topological order and computes the same numbers bit for bit, which the tests
check by interpreting both programs on random inputs (:meth:`Program.evaluate`).
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, random_trees, rel_err, rounding_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen import cemit
from sparsedyn.codegen.trace import trace
from sparsedyn.kernels import REGISTRY
from sparsedyn.symbolic.ir import CONST, MATMUL

pytestmark = pytest.mark.usefixtures("compile_cache")


def _inputs(prog, model, rng, n):
    xs = []
    for shape in prog.input_shapes:
        x = rng.normal(size=(n,) + tuple(shape))
        if tuple(shape) == (model.nq,):
            x = np.stack([model.random_configuration(rng) for _ in range(n)])
        xs.append(x)
    return xs


@pytest.mark.parametrize("name", ["rnea", "aba", "rnea_derivatives", "aba_derivatives", "crba"])
def test_schedule_is_a_topological_order_with_the_same_results(name, rng):
    model = random_trees()[2]                           # floating base, every joint type
    prog = trace(model, name)
    again = cemit.schedule(prog)
    assert len(again.nodes) == len(prog.nodes) and again.output_shapes == prog.output_shapes
    ops = sorted(op for op, _, _ in prog.nodes)
    assert sorted(op for op, _, _ in again.nodes) == ops
    seen_op = False
    for i, (op, x, y) in enumerate(again.nodes):
        if op == MATMUL:                                     # an element of a block: after its operands
            seen_op = True
            assert all(a < i for a in again.blocks[x].operands()), (i, x)
        elif op > CONST:
            seen_op = True
            assert 0 <= x < i and y < i, (i, op, x, y)      # operands come first
        else:
            assert not seen_op                               # inputs and constants lead
    # the same operations on the same operands: the same values, bit for bit, on every output
    xs = _inputs(prog, model, rng, 7)
    for a, b in zip(prog.evaluate(xs), again.evaluate(xs)):
        np.testing.assert_array_equal(a, b)
    # an output that is a number stays that number; an output computed stays an operation's value
    for row, row2 in zip(prog.outputs, again.outputs):
        for (kind, v), (kind2, v2) in zip(row, row2):
            assert kind == kind2 and (kind != "const" or v == v2)
            assert kind != "node" or again.nodes[v2][0] == prog.nodes[v][0]


def test_schedule_follows_the_outputs():
    """Output after output: an output element that no operation uses is computed after those of the
    elements before it (C order, output after output), each value at its first use."""
    model = random_trees()[2]
    again = cemit.schedule(trace(model, "rnea_derivatives"))
    used = {a for op, x, y in again.nodes if op > CONST for a in (x, y)}
    pos = [v for row in again.outputs for kind, v in row
           if kind == "node" and again.nodes[v][0] > CONST and v not in used]
    firsts = list(dict.fromkeys(pos))
    assert len(firsts) > 100 and firsts == sorted(firsts)


def test_the_emitter_moves_fewer_values_through_the_workspace():
    """The emitted code takes the order (traced or scheduled) that passes fewer values between its
    segments, so a derivative kernel's workspace traffic drops and a small kernel's does not grow."""
    model = random_trees()[2]
    for name in ("rnea", "rnea_derivatives"):
        prog = trace(model, name)
        counts = []
        for p in (prog, cemit.schedule(prog)):
            seg, slot, _ = cemit._chunks(p, 200)
            counts.append(cemit._traffic(p, seg, slot))
        src = "\n".join(cemit.emit_program(prog, name, "single"))
        stored = src.count("  w[")                          # one store per value passed on
        assert stored <= min(counts), (name, counts, stored)
    assert counts[1] < counts[0]                            # rnea_derivatives: scheduled


@pytest.mark.parametrize("aligned", [True, False])
def test_large_batch_results_land_in_place_bit_for_bit(aligned, rng):
    """Results of more than 256 elements, written through an in-register transposition of the
    block's vectors: past the caches (a batch beyond 4 MiB) when every row is 16-byte aligned (an
    even row length, an aligned array), else by ordinary or element-wise stores; full blocks and a
    partial one land in their places, equal bit for bit to short batches and one state at a time."""
    model = sd.random_tree(26, branching=2.0, joint_types="all", seed=3)
    assert model.nv % 2 == 0 and model.nv ** 2 > 256         # rows 16-byte aligned in an aligned array
    k = sd.compile(model, vectorize=True)
    n = (1 << 19) // model.nv ** 2 + 20
    n += 1 - n % 2                                          # odd: a partial block at any width
    Q = np.stack([model.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(2, n, model.nv))
    shape = (n, model.nv, model.nv)
    outs = []
    for _ in range(3):
        raw = np.full(int(np.prod(shape)) + 1, np.nan)
        o = raw[1:] if (raw.ctypes.data % 16 == 0) != aligned else raw[:-1]
        outs.append(o.reshape(shape))
    assert all((o.ctypes.data % 16 == 0) == aligned for o in outs)
    k.rnea_derivatives(Q, V, A, out=tuple(outs))
    assert n * model.nv ** 2 >= 1 << 19
    for lo, hi in ((0, 19), (n - 19, n)):                   # short batches: ordinary stores
        for got, ref in zip(outs, k.rnea_derivatives(Q[lo:hi], V[lo:hi], A[lo:hi])):
            np.testing.assert_array_equal(got[lo:hi], ref)
    for i in (0, 1, n // 2, n - 1):
        for got, ref in zip(outs, sd.rnea_derivatives(model, Q[i], V[i], A[i])):
            np.testing.assert_allclose(got[i], ref, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(ref).max()))


def test_block_products_in_straight_line_code(rng):
    """A floating tree's aba_derivatives multiplies ``H^-1`` into RNEA's derivatives as dense blocks
    (the columns of its dofs that are no free root's): straight-line code, each block a loop at the
    start of a segment of its own, its sums in registers.  One state and a few equal the interpreted
    program bit for bit (the same products, summed in the same order); the vectorised batch (its
    sin and cos are the vector library's) and both equal the NumPy function to rounding."""
    model = random_trees(constant_subspace_types())[2]     # floating base, a joint of every kind of S
    prog = trace(model, "aba_derivatives")
    assert prog.blocks and cemit.code_shape(prog) == "unrolled" and cemit.code_shape(prog, "batch") == "unrolled"
    k = sd.compile(model, kernels=["aba_derivatives"], vectorize=True)
    for n in (None, 3, 4 * 8 + 1):
        xs = _inputs(prog, model, rng, 1 if n is None else n)
        args = [x[0] for x in xs] if n is None else xs
        got = k.aba_derivatives(*args)
        if n is None or n <= 8:
            for a, b in zip(got, prog.evaluate(args)):
                np.testing.assert_array_equal(a, b)
        H = REGISTRY["crba"].fn(model, args[0])
        bound = rounding_bound(model.nv + model.nbodies, float(np.max(np.linalg.cond(H))))
        for a, b in zip(got, sd.aba_derivatives(model, *args)):
            assert rel_err(a, b) < bound, n


#: Block products of (parts of) a matrix ``A`` (8, 8) by columns of ``B`` (8, 3): by one, two and three
#: columns (rows summed side by side), of a computed ``A`` or ``B`` (their slots read through a table),
#: of a triangular ``A`` (structural zeros: the padded rows' loop), and of an ``A`` of four rows'
#: multiples by a vector (four rows in a vector's lanes), ``A`` the input itself (read in place) or
#: its columns (copied).  Name -> (operands, columns).
_PRODUCTS = {"by_one": (lambda A, B: (A[..., :7, :5], B[..., :5, :1]), 1),
             "by_two": (lambda A, B: (A[..., :7, :5], B[..., :5, :2]), 2),
             "by_three": (lambda A, B: (A[..., :7, :5], B[..., :5, :]), 3),
             "computed": (lambda A, B: ((A * A - A)[..., :7, :5], B[..., :5, 1:]), 2),
             "by_computed": (lambda A, B: (A[..., :7, :5], np.concatenate([B[..., :2, :1], B[..., 2:5, :1] *
                                                                            B[..., 2:5, 1:2]], -2)), 1),
             "triangular": (lambda A, B: (np.tril(A[..., :7, :5]), B[..., :5, :1]), 1),
             "lanes_given": (lambda A, B: (A, B[..., :1]), 1),
             "lanes_copied": (lambda A, B: (A[..., :, :4], B[..., 1:5, 1:2] * B[..., 1:5, 2:]), 1)}


def _product_program(name):
    from sparsedyn import backend as bk
    from sparsedyn.symbolic.trace import trace_function
    operands, m = _PRODUCTS[name]
    prog = trace_function(lambda A, B: bk.matmul(*operands(A, B), min_pairs=1), [("A", (8, 8)), ("B", (8, 3))],
                          [("C", (8 if name.startswith("lanes") else 7, m))], name=name)
    assert len(prog.blocks) == 1 and cemit.code_shape(prog) == "unrolled"
    return prog


class _Products:
    """An owner whose kernels are the block products :data:`_PRODUCTS` of its inputs."""

    def __init__(self, model):
        self.model = model

    def __sparsedyn_kernels__(self):
        from sparsedyn.kernels import Kernel, Owned
        ks = []
        for name, (_, m) in _PRODUCTS.items():
            prog = _product_program(name)
            ks.append(Kernel(name, lambda model, A, B, p=prog: tuple(p.evaluate([A, B])), {"A": (8, 8), "B": (8, 3)},
                             {"C": prog.output_shapes[0]}, program=lambda model, static, optional, p=prog: p))
        return Owned(self.model, tuple(ks), "block products")


@pytest.mark.parametrize("name", list(_PRODUCTS))
def test_block_products_by_a_few_columns(name, rng):
    """A block product by fewer columns than a vector's lanes (the contact solver's x-step: a matrix
    times a vector) sums rows side by side: one state, a few and a batch equal the interpreted program
    bit for bit (the same products summed in the same order), and NumPy's float ``@`` to rounding."""
    k = sd.compile(_Products(sd.serial_chain(1)))
    prog = _product_program(name)
    src = "\n".join(cemit.emit_program(prog, name))       # a lane-padded vector per row: zeros in A only
    assert ("_b0_mm(" in src) == (name == "triangular") and ("SD_SHUF4(r0" in src) == name.startswith("lanes")
    for n in (None, 3, 4 * 8 + 1):
        A, B = rng.normal(size=(8, 8) if n is None else (n, 8, 8)), rng.normal(size=(8, 3) if n is None else (n, 8, 3))
        got = getattr(k, name)(A, B)
        got = got[0] if isinstance(got, tuple) else got
        np.testing.assert_array_equal(got, prog.evaluate([A, B])[0])
        X, Y = _PRODUCTS[name][0](A, B)
        assert rel_err(got, X @ Y) < rounding_bound(5), n


@pytest.mark.parametrize("tree, name", [(3, "aba_derivatives"), (2, "rnea_derivatives")])
@pytest.mark.parametrize("chunk", [7, 50])
def test_segments_and_their_traffic_by_definition(tree, name, chunk):
    """The segments of the emitted code and the values they pass (counted with arrays) against their
    definition, node by node: at most ``chunk`` operations a segment, a new one only when the last
    is full or where a block product starts; a value passed on when an operation (or a block product)
    of another segment reads it, until the last such segment; one store per value passed and one
    load per value and segment that reads it."""
    from sparsedyn.codegen.emit_unrolled import _segments
    prog = trace(random_trees()[tree], name)
    assert (name != "aba_derivatives") or prog.blocks               # a program with block products too
    for p in (prog, cemit.schedule(prog)):
        seg, last = _segments(p, chunk)
        seg = [int(s) for s in seg]
        isop = [CONST < op != MATMUL for op, _, _ in p.nodes]
        starts = {}
        for i, (op, x, _) in enumerate(p.nodes):
            if op == MATMUL:
                starts.setdefault(x, i)
        count = {}
        for i, o in enumerate(isop):
            count[seg[i]] = count.get(seg[i], 0) + o
        assert seg == sorted(seg) and seg[0] == 0 and set(seg) == set(range(seg[-1] + 1))
        assert max(count.values()) <= chunk
        for i in range(1, len(seg)):
            if seg[i] != seg[i - 1]:                    # a new segment: the last one full, or a block
                assert seg[i] == seg[i - 1] + 1
                assert count[seg[i - 1]] == chunk or i in starts.values(), i
        for f in starts.values():                      # a block product starts its segment
            assert not any(isop[j] and seg[j] == seg[f] for j in range(f))
        readers = {}                                   # value -> the segments of the nodes reading it
        for i, (op, x, y) in enumerate(p.nodes):
            if CONST < op != MATMUL:
                for a in (x, y) if y >= 0 else (x,):
                    readers.setdefault(a, set()).add(seg[i])
        for b, f in starts.items():
            for a in p.blocks[b].operands():
                readers.setdefault(int(a), set()).add(seg[f])
        want = {a: max(s - {seg[a]}) for a, s in readers.items() if isop[a] and s - {seg[a]}}
        assert last == want
        loads = {(a, seg[i]) for i, (op, x, y) in enumerate(p.nodes) if CONST < op != MATMUL
                 for a in ((x, y) if y >= 0 else (x,)) if a in want and seg[a] != seg[i]}
        assert cemit._traffic(p, seg, last) == len(want) + len(loads) > 0
