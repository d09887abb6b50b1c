"""Iterative kernels compiled (the loop driver of sparsedyn.codegen.cemit): one native call runs the
stages as their flags say; results equal the reference interpreter bit for bit (the same operations,
no contraction)."""

import numpy as np

import sparsedyn as sd
from sparsedyn.kernels import Kernel, Owned

from sdcompile_helpers import compile_cache  # noqa: F401 - fixture
from symbolic.test_loop import newton_loop


class _Newton:
    """An owner whose one kernel is the iterative Newton square root of tests/symbolic/test_loop.py."""

    def __init__(self, model, cap):
        self.model, self.cap = model, cap

    def __sparsedyn_kernels__(self):
        prog = newton_loop(self.cap)
        k = Kernel("newton", lambda model, a: tuple(prog.evaluate([a])), {"a": (1,)}, {"x": (1,), "counts": (2,)},
                   program=lambda model, static, optional: prog)
        return Owned(self.model, (k,), f"newton {self.cap}")


def test_a_compiled_loop_equals_the_interpreter_single_and_batched(compile_cache):  # noqa: F811
    prog = newton_loop()
    k = sd.compile(_Newton(sd.serial_chain(1), 1000))
    a = np.geomspace(1e-3, 1e9, 37)[:, None]                      # more states than any vector width
    x, counts = k.newton(a)                                       # the batch entry (threads)
    xe, ce = prog.evaluate([a])
    assert np.array_equal(x, xe) and np.array_equal(counts, ce)
    for j in (0, 17, 36):
        xs, cs = k.newton(a[j])                                   # one state
        assert np.array_equal(xs, xe[j]) and np.array_equal(cs, ce[j])
    assert np.array_equal(k.newton(a[:3])[1], ce[:3])              # a short batch (the looped entry)
    capped = sd.compile(_Newton(sd.serial_chain(1), 5))
    assert capped.newton(np.array([1e6]))[1].tolist() == [1.0, 2.0]


def _shift_loop():
    """A memory of four values shifted by one each iteration (``[a1, a2, a3, a3 + a0 / 2]``: elements
    of the loop state taken from others, which the driver moves within the state), ten times, then
    its halves swapped (moves that would read what a move before them wrote: copied as computed)."""
    from sparsedyn.symbolic.loop import trace_loop

    def init(a):
        return np.array([0.0]), np.array([a[0], a[1], a[2], a[3], 0.0])

    def shift(a, K, S):
        n = S[4] + 1.0
        return np.array([S[1], S[2], S[3], S[3] + 0.5 * S[0], n]), 0.5 * (1.0 + bk.copysign(1.0, n - 10.0))

    def swap(a, K, S):
        return np.array([S[2], S[3], S[0], S[1], S[4]]), 1.0

    from sparsedyn import backend as bk
    return trace_loop("shift", [("a", (4,))], [("x", (5,))], init, [shift, swap], lambda a, K, S: S)


def _python_shift(a):
    m = list(a)
    for _ in range(10):
        m = m[1:] + [m[3] + 0.5 * m[0]]
    return m[2:] + m[:2] + [10.0]


class _Shift:
    def __init__(self, model):
        self.model = model

    def __sparsedyn_kernels__(self):
        prog = _shift_loop()
        k = Kernel("shift", lambda model, a: tuple(prog.evaluate([a])), {"a": (4,)}, {"x": (5,)},
                   program=lambda model, static, optional: prog)
        return Owned(self.model, (k,), "shift")


def test_a_compiled_loop_moves_state_elements_taken_from_others(compile_cache):  # noqa: F811
    """Elements of the loop state a stage takes from other elements (a memory shifted by one, halves
    swapped): the compiled loop equals the interpreter and the same iteration in plain Python bit for
    bit, one state and a batch."""
    from sparsedyn.codegen.emit_iterative import _changed
    prog = _shift_loop()
    assert _changed(prog.stages[0]) == ([3, 4], [(0, 1, 3)])       # one run moved within the state
    assert _changed(prog.stages[1]) == ([0, 1, 2, 3], [])           # a swap: copied through T
    k = sd.compile(_Shift(sd.serial_chain(1)))
    a = np.random.default_rng(3).normal(size=(9, 4))
    x = k.shift(a)
    x = x[0] if isinstance(x, tuple) else x
    assert np.array_equal(x, prog.evaluate([a])[0])
    assert np.array_equal(x, [_python_shift(r) for r in a.tolist()])
    one = k.shift(a[4])
    assert np.array_equal(one[0] if isinstance(one, tuple) else one, x[4])


def test_a_small_loop_runs_blocks_of_states_on_vectors_as_its_scalar_driver(compile_cache):  # noqa: F811
    """The loop entry of a small iterative kernel runs blocks of states in lockstep on vectors
    (sparsedyn.codegen.emit_iterative_vec): each state's results equal the reference interpreter's and
    the single call's bit for bit, whatever the other states of its block do (states that restart,
    iterate for different counts or stop at the cap, partial blocks), and the shifted memory's moves
    happen in a state's lane only when it runs that stage."""
    from sparsedyn.codegen import cemit
    prog = newton_loop(5)
    assert cemit.code_shape(prog) == "iterative, vector loop" and cemit.code_shape(_shift_loop()) == \
        "iterative, vector loop"
    src = "\n".join(cemit.emit_program(prog, "newton"))
    assert "newton_vblock" in src and "sd_blend" in src
    # neighbours that iterate for different counts (restarting once each), and the same capped at 5
    # stage runs (the slow ones stopped mid-way)
    a = np.array([1.0, 4.0, 1e6, 2.0, 1e-3, 9.0, 1e9, 0.25, 3.0, 7.0, 1e4])[:, None]
    assert len({tuple(c) for c in newton_loop().evaluate([a])[1]}) > 4        # the states' paths differ
    for cap in (1000, 5):
        k = sd.compile(_Newton(sd.serial_chain(1), cap))
        for n in (2, 3, 5, 7, 11):
            x, counts = k.newton(a[:n])
            xe, ce = newton_loop(cap).evaluate([a[:n]])
            assert np.array_equal(x, xe) and np.array_equal(counts, ce)
    # the shifted memory: a batch whose blocks hold the same state repeated and different ones
    k = sd.compile(_Shift(sd.serial_chain(1)))
    b = np.random.default_rng(5).normal(size=(13, 4))
    got = k.shift(b)
    got = got[0] if isinstance(got, tuple) else got
    assert np.array_equal(got, [_python_shift(r) for r in b.tolist()])


def test_pieces_over_the_loop_threshold_are_loops_and_equal_the_interpreter(monkeypatch, tmp_path):
    """A piece of an iterative kernel of :func:`~sparsedyn.codegen.cemit.loop_threshold` operations or
    more is emitted as loops over tables (the contact step's polish in 64 data slots), here every piece
    (``SPARSEDYN_LOOP_THRESHOLD=0``); a workspace past
    :data:`~sparsedyn.codegen.emit_iterative.HEAP_SLOTS` doubles is the heap's.  The same operations:
    one state, the loop entry on vectors and the threaded batch equal the reference interpreter bit
    for bit, the shifted memory's moves too."""
    from sparsedyn.codegen import cemit, emit_iterative
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))       # a build of its own: no shared library key
    prog = newton_loop()
    unrolled = "\n".join(cemit.emit_program(prog, "newton", "batch"))
    monkeypatch.setenv("SPARSEDYN_LOOP_THRESHOLD", "0")
    monkeypatch.setattr(emit_iterative, "HEAP_SLOTS", 0)
    assert cemit.code_shape(prog) == "iterative, vector loop, pieces in loops"
    assert cemit.code_shape(prog, "batch") == "iterative, pieces in loops"
    src = "\n".join(cemit.emit_program(prog, "newton", "batch"))
    copies = "for (long e = 0; e <"                 # the loops' driver copies its inputs into the workspace
    assert copies in src and copies not in unrolled and "aligned_alloc(64" in src and "aligned_alloc" not in unrolled
    k = sd.compile(_Newton(sd.serial_chain(1), 1000))
    a = np.geomspace(1e-3, 1e9, 37)[:, None]
    x, counts = k.newton(a)
    xe, ce = prog.evaluate([a])
    assert np.array_equal(x, xe) and np.array_equal(counts, ce)
    assert all(np.array_equal(k.newton(a[j])[0], xe[j]) for j in (0, 17, 36))
    assert np.array_equal(k.newton(a[:3])[1], ce[:3])
    b = np.random.default_rng(7).normal(size=(9, 4))
    got = sd.compile(_Shift(sd.serial_chain(1))).shift(b)
    got = got[0] if isinstance(got, tuple) else got
    assert np.array_equal(got, [_python_shift(r) for r in b.tolist()])
