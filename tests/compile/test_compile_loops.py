"""Large programs as loops over tables (sparsedyn.codegen.cemit, code shape "loops").

A program of :func:`~sparsedyn.codegen.cemit.loop_threshold` operations or more is emitted as
loops over tables of slot numbers instead of straight-line code.  The tests force that shape on
small models (``SPARSEDYN_LOOP_THRESHOLD=0``), so they build in a moment, and compare with the
NumPy functions: the loops do the unrolled code's operations, so the results agree to the
kernel's rounding bound (times the conditioning of ``H`` for the solves).
"""

from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen import build, cemit, emit_loops
from sparsedyn.codegen.compiled_model import CompiledModel
from sparsedyn.codegen.trace import trace
from sparsedyn.kernels import REGISTRY

pytestmark = pytest.mark.usefixtures("compile_cache")

MODELS = {"chain": lambda: sd.random_tree(7, branching=1.0, joint_types="all", seed=11),
          "tree": lambda: sd.random_tree(8, branching=2.0, joint_types="all", seed=12, floating_base=True)}
KERNELS = ("rnea", "aba", "minv", "rnea_derivatives")        # crba: test_large_workspace_on_the_heap


def _args(model, name, rng, n=None):
    states = [model.random_configuration(rng) for _ in range(n or 1)]
    q = np.stack(states) if n else states[0]
    v, a = rng.normal(size=(2,) + q.shape[:-1] + (model.nv,))
    return {"q": (q,), "v": (q, v), "a": (q, v, a)}["q" if name in ("crba", "minv", "forward_kinematics") else "a"]


def _bound(model, q):
    H = REGISTRY["crba"].fn(model, q)
    return rounding_bound(model.nv + model.nbodies, float(np.max(np.linalg.cond(H))))


@pytest.fixture
def loops(monkeypatch):
    monkeypatch.setenv("SPARSEDYN_LOOP_THRESHOLD", "0")


@pytest.mark.parametrize("which", sorted(MODELS))
def test_loops_equal_numpy(which, loops, rng):
    """Every kernel of :data:`KERNELS` built as loops: one state, a loop over states and the
    vectorised batch equal the NumPy function to rounding."""
    model = MODELS[which]()
    k = CompiledModel(model, build.find_compiler(), vectorize=which == "tree")
    for name in KERNELS:
        prog = trace(model, name)
        src = "\n".join(cemit.emit_program(prog, name, "batch"))
        # loops, some of whose additions take their signs from the tables
        assert cemit.code_shape(prog) == "loops" and "for (int j = 0; j <" in src and "(double)I[" in src
        for n in (None, 3, 4 * 8):
            args = _args(model, name, rng, n)
            ref, got = REGISTRY[name].fn(model, *args), getattr(k, name)(*args)
            for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
                assert g.shape == r.shape and rel_err(g, r) < _bound(model, args[0]), (name, n)


def test_repeated_blocks_become_loops(loops):
    """On a chain, the bodies' repeated statements are C loops (the code does not grow with the
    number of bodies as the program does)."""
    sizes = {}
    for nb in (12, 24):
        prog = trace(sd.serial_chain(nb), "minv")
        src = "\n".join(cemit.emit_program(prog, "minv"))
        assert "for (int j = 0; j <" in src
        sizes[nb] = (len(prog.nodes), src.count(";"))
    (n1, c1), (n2, c2) = sizes[12], sizes[24]
    assert n2 > 3.5 * n1 and c2 < 2.5 * c1          # minv's program is quadratic in the chain's length


def test_large_workspace_on_the_heap(loops, monkeypatch, tmp_path, rng):
    """A workspace too large for the stack is allocated per call (one state and the state loop)."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cemit, "_STACK_SLOTS", 0)
    model = MODELS["chain"]()
    assert "aligned_alloc(64" in "\n".join(cemit.emit_program(trace(model, "crba"), "crba"))
    k = CompiledModel(model, build.find_compiler(), vectorize=False)
    for n in (None, 3):
        (q,) = _args(model, "crba", rng, n)
        assert rel_err(k.crba(q), REGISTRY["crba"].fn(model, q)) < _bound(model, q)


def test_threshold_from_the_environment(monkeypatch):
    prog = trace(sd.serial_chain(3), "rnea")
    monkeypatch.setenv("SPARSEDYN_LOOP_THRESHOLD", str(len(prog.nodes) + 1))
    assert cemit.code_shape(prog) == "unrolled"
    monkeypatch.setenv("SPARSEDYN_LOOP_THRESHOLD", "1")
    assert cemit.code_shape(prog) == "loops"
    monkeypatch.setenv("SPARSEDYN_LOOP_THRESHOLD", "many")
    with pytest.raises(ValueError, match="SPARSEDYN_LOOP_THRESHOLD='many': expected an integer"):
        cemit.code_shape(prog)


def _program_of(nops):
    """A program of exactly ``nops`` operations (a chain of additions), for the threshold alone."""
    from sparsedyn.symbolic.ir import ADD, INPUT, Program
    nodes = [(INPUT, 0, 0)] + [(ADD, k, 0) for k in range(nops)]
    return Program("sum", nodes, [[("node", nops)]], [(1,)], [(1,)])


def test_default_threshold(monkeypatch):
    """Without ``$SPARSEDYN_LOOP_THRESHOLD``, single-state and batch code are unrolled below
    :data:`~sparsedyn.codegen.cemit.LOOP_THRESHOLD` (160,000) operations and loops from it on, so a
    derivative kernel of a humanoid (aba_derivatives of talos_reduced: about 100,000 operations;
    unrolled it runs 1.6 times faster, benchmarks/bench_loops.py) is unrolled.  (The synthetic
    programs here repeat one statement: the rule of repeated shapes is set aside.)"""
    monkeypatch.delenv("SPARSEDYN_LOOP_THRESHOLD", raising=False)
    monkeypatch.setattr(cemit, "REPEATED_MIN_OPS", 1 << 62)
    assert cemit.loop_threshold() == cemit.LOOP_THRESHOLD == 160000
    for variant in ("single", "batch"):
        assert cemit.code_shape(_program_of(100000), variant) == "unrolled"
        assert cemit.code_shape(_program_of(159999), variant) == "unrolled"
        assert cemit.code_shape(_program_of(160000), variant) == "loops"


def test_programs_of_few_repeated_shapes_are_loops_below_the_threshold(monkeypatch):
    """A chain's program, a few dozen statement shapes repeated body after body, is emitted as loops
    from :data:`~sparsedyn.codegen.cemit.REPEATED_MIN_OPS` operations; a humanoid's derivative kernel,
    as large but of a hundred shapes and more, stays unrolled, as does any program when
    ``$SPARSEDYN_LOOP_THRESHOLD`` is set."""
    import erd
    monkeypatch.delenv("SPARSEDYN_LOOP_THRESHOLD", raising=False)
    chain = trace(sd.serial_chain(100), "minv")
    humanoid = trace(erd.load_pair("talos_reduced", True)[0], "aba_derivatives")
    nops = [sum(1 for op, _, _ in p.nodes if op > 1) for p in (chain, humanoid)]
    assert all(cemit.REPEATED_MIN_OPS <= n < cemit.LOOP_THRESHOLD for n in nops)
    assert emit_loops.statement_shapes(chain) <= cemit.REPEATED_SHAPES < emit_loops.statement_shapes(humanoid)
    for variant in ("single", "batch"):
        assert cemit.code_shape(chain, variant) == "loops" and cemit.code_shape(humanoid, variant) == "unrolled"
    monkeypatch.setenv("SPARSEDYN_LOOP_THRESHOLD", str(cemit.LOOP_THRESHOLD))
    assert cemit.code_shape(chain) == "unrolled"


def _blocky(model, q, v):
    """``A X`` with ``A = H^-1`` but for a structural zero row and entry (a row the compiled product skips
    whole, one it skips an entry of) and ``X = v v^T`` but for a structural zero column: a dense block
    product once :data:`~sparsedyn.backend.BLOCK_MIN_PAIRS` is lowered (a user kernel: the road users
    take)."""
    from sparsedyn import backend as bk
    X = v[..., :, None] * v[..., None, :]
    X[..., :, 0] = 0
    A = sd.minv(model, q)
    A[..., 1, :] = 0
    A[..., 2, 0] = 0
    return bk.matmul(A, X) - v[..., :, None]


@pytest.mark.parametrize("shape", ["unrolled", "loops"])
def test_block_products_compile_to_the_interpreted_values(shape, monkeypatch, rng):
    """A program with a dense block product (``Graph.matmul``), in straight-line code (the block a
    loop at the start of a segment of its own) or as loops; one state, a loop over states equal the
    interpreted program bit for bit (the same products summed in the same order), and they and the
    vectorised batch (its sin and cos are the vector library's) NumPy's float ``@`` to rounding."""
    from sparsedyn import backend as bk
    from sparsedyn.symbolic.trace import trace_function
    monkeypatch.setattr(bk, "BLOCK_MIN_PAIRS", 1)
    if shape == "loops":
        monkeypatch.setenv("SPARSEDYN_LOOP_THRESHOLD", "0")
    model = MODELS["chain"]()
    prog = trace_function(lambda q, v: _blocky(model, q, v), [("q", (model.nq,)), ("v", (model.nv,))])
    assert len(prog.blocks) == 1 and cemit.code_shape(prog) == shape
    k = sd.compile(model, kernels=[_blocky], vectorize=True)
    for n in (None, 3, 4 * 8 + 1):
        q, v = _args(model, "a", rng, n)[:2]
        got = k._blocky(q, v)
        assert n is not None and n > 8 or np.array_equal(got, prog.evaluate([q, v])[0]), n
        A = np.linalg.inv(REGISTRY["crba"].fn(model, q))
        A[..., 1, :] = 0
        A[..., 2, 0] = 0
        ref = A @ np.where(np.arange(model.nv) == 0, 0.0, v[..., :, None] * v[..., None, :])
        assert rel_err(got, ref - v[..., :, None]) < _bound(model, q), n


def test_an_iterative_kernel_keeps_its_own_code_shape(monkeypatch):
    """An iterative kernel (the frictional step) is driven by its own loop over straight-line pieces:
    the straight-line programs' rule of few statement shapes does not apply to it, whatever its size
    (the humanoid's step with self-collision slots is over its size), and its C is the iterative
    emitter's (a piece of the loop threshold's size is loops: tests/compile/test_compile_loop.py)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "symbolic"))
    from test_loop import newton_loop
    monkeypatch.setattr(cemit, "REPEATED_MIN_OPS", 0)        # as if it were that large
    prog = newton_loop()
    # (a program this small runs its loop entry on vectors too: emit_iterative_vec)
    assert cemit.code_shape(prog) == "iterative, vector loop" and cemit.code_shape(prog, "batch") == "iterative"
    src = "\n".join(cemit.emit_program(prog, "newton"))
    assert "iterative kernel newton" in src and "SD_EXPORT void sd_newton(" in src
