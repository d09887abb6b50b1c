"""Every registered kernel traces through its public function, and the program evaluates to the
NumPy result (same operations, same order: agreement to rounding of the result's magnitude)."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.kernels import REGISTRY, kernel
from sparsedyn.symbolic.trace import trace_kernel

from conftest import random_state, rel_err
from kernel_args import arguments, static_choices


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_kernel_traces_to_numpy_result(tree, name, rng, request):
    k = REGISTRY[name]
    for static in static_choices(tree, name):
        prog = trace_kernel(k, tree, static)
        args = arguments(tree, name, rng, static=static)
        out = prog.evaluate([args[n] for n in prog.input_names])
        ref = k.fn(tree, **args, **static)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for o, r in zip(out, ref):
            # one program, the same operations as NumPy up to the summation order inside NumPy's @
            assert rel_err(o, r) < 1e-10, (name, static)


def test_optional_inputs_become_program_inputs(tree, rng):
    prog = trace_kernel(REGISTRY["rnea"], tree, optional=("f_ext", "gravity"))
    assert prog.input_names == ("q", "v", "a", "f_ext", "gravity")
    q, v, a = random_state(tree, rng)
    f = rng.normal(size=(tree.nbodies, 6))
    g = np.array([0.3, -1.0, -9.0])
    (tau,) = prog.evaluate([q, v, a, f, g])
    assert rel_err(tau, sd.rnea(tree, q, v, a, f_ext=f, gravity=g)) < 1e-10
    with pytest.raises(ValueError, match="not optional inputs"):
        trace_kernel(REGISTRY["rnea"], tree, optional=("tau",))


def test_declaration_must_name_parameters():
    with pytest.raises(TypeError, match=r"\['w'\] are not parameters"):
        @kernel(inputs={"q": ("nq",), "w": ("nv",)}, outputs={"y": (1,)})
        def f(model, q):
            return q[..., :1]
