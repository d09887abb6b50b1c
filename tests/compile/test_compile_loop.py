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
