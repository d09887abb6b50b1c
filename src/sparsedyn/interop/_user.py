"""The traced program behind a bridge function: a registered kernel, or a plain Python function of
registered kernels written as ``sparsedyn.compile(model, kernels=[f])`` takes it."""

from __future__ import annotations

import inspect

from ..kernels import registered, state_arguments
from ..symbolic.trace import trace_function, trace_kernel


def program(fn, model, static=None, optional=(), bridge="this bridge"):
    """``(Program, input names, output names, name)`` of ``fn`` for ``model``.

    A registered kernel (``sd.rnea``...) is traced with its ``static`` arguments and ``optional`` inputs;
    any other function ``fn(model, q, v, ...)`` whose arguments after the model are state arrays of
    :data:`~sparsedyn.kernels.VOCABULARY` is traced as it stands, as ``sparsedyn.compile(model,
    kernels=[fn])`` traces it (its outputs named ``out0``, ``out1``...).
    """
    k = registered(fn)
    if k is not None:
        prog = trace_kernel(k, model, static or {}, tuple(optional))
        return prog, list(k.inputs) + [n for n in k.optional if n in set(optional)], list(k.outputs), k.name
    name = getattr(fn, "__name__", None)
    if not callable(fn) or inspect.isbuiltin(fn) or inspect.isclass(fn):
        raise TypeError(f"{bridge}: {name or fn!r} is neither a registered kernel (see sparsedyn.kernels) nor a "
                        f"Python function fn(model, q, v, ...) of them")
    if static or optional:
        raise TypeError(f"{bridge}: static= and optional= apply to registered kernels; a function "
                        f"{name!r} takes its constants as a closure or functools.partial")
    inputs = state_arguments(fn, model, bridge)
    name = name or "function"
    prog = trace_function(lambda *args: fn(model, *args), inputs, None, name, explain=True)
    return prog, [n for n, _ in inputs], list(prog.output_names), name
