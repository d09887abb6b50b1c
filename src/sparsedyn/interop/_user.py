"""The traced program behind a bridge function: a registered kernel, or a plain Python function of
registered kernels written as ``sparsedyn.compile(model, kernels=[f])`` takes it."""

from __future__ import annotations

import inspect

import numpy as np

from ..kernels import registered
from ..symbolic.ir import Graph
from ..symbolic.trace import trace_kernel

#: State arguments a plain function may take after the model, with their shapes for one state
#: (the vocabulary of :meth:`sparsedyn.CompiledModel.add_kernel`).
VOCABULARY = {"q": ("nq",), "q0": ("nq",), "q1": ("nq",), "v": ("nv",), "a": ("nv",), "tau": ("nv",),
              "dq": ("nv",), "qdd": ("nv",), "f_ext": ("nb", 6), "gravity": (3,)}
_SIZE = {"nq": lambda m: m.nq, "nv": lambda m: m.nv, "nb": lambda m: m.nbodies}


def program(fn, model, static=None, optional=(), bridge="this bridge"):
    """``(Program, input names, output names, name)`` of ``fn`` for ``model``.

    A registered kernel (``sd.rnea``...) is traced with its ``static`` arguments and ``optional`` inputs;
    any other function ``fn(model, q, v, ...)`` whose arguments after the model are state arrays of
    :data:`VOCABULARY` is traced as it stands (its outputs named ``out0``, ``out1``...).
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
    params = list(inspect.signature(fn).parameters.values())[1:]
    bad = [p.name for p in params if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
           or p.name not in VOCABULARY]
    if bad:
        raise TypeError(f"{bridge}: argument {bad[0]!r} of {name!r} is not a state array of the vocabulary "
                        f"({', '.join(VOCABULARY)}); other values must be constants of the function "
                        f"(a closure or functools.partial)")
    inputs = [(p.name, tuple(_SIZE[d](model) if isinstance(d, str) else d for d in VOCABULARY[p.name]))
              for p in params]
    g = Graph()
    try:
        outs = fn(model, *[g.inputs(k, s) for k, (_, s) in enumerate(inputs)])
    except (TypeError, ValueError, np.linalg.LinAlgError) as e:
        raise TypeError(f"{bridge}: {name!r} cannot be traced (it branches on a value, or calls a routine that "
                        f"needs numbers, such as np.linalg): {e}") from e
    outs = [np.asarray(o, dtype=object) for o in (outs if isinstance(outs, tuple) else (outs,))]
    outputs = [f"out{k}" for k in range(len(outs))]
    prog = g.program(outs, [s for _, s in inputs], name=name or "function")
    return prog, [n for n, _ in inputs], outputs, name or "function"
