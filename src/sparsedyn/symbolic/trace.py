"""Tracing a registered kernel into a :class:`~sparsedyn.symbolic.ir.Program`.

A kernel declared with :func:`sparsedyn.kernels.kernel` is called, unchanged,
on NumPy object arrays of fresh input symbols (one state, the shapes its
declaration gives for the model).  Everything the call does to them is
recorded by the :class:`~sparsedyn.symbolic.ir.Graph`; the outputs become a
dead-code-free program.  This module knows no physics: it only reads the
declaration.
"""

from __future__ import annotations

import time

import numpy as np

from .ir import Graph, Program

__all__ = ["trace_kernel", "trace_function"]


def trace_function(fn, inputs, outputs, name="kernel", checks=()) -> Program:
    """Trace ``fn(*object arrays)`` into a :class:`Program`.

    ``inputs``, ``outputs``: sequences of ``(name, shape)`` for one state;
    ``fn`` returns one array per output (a single array when there is one
    output), broadcast to the declared shapes.  ``checks``: names of outputs
    that only carry run-time check quantities; ``Program.result_flops`` then
    counts the other outputs alone (``None`` without checks).
    """
    inputs, outputs = list(inputs), list(outputs)
    g = Graph()
    args = [g.inputs(k, tuple(s)) for k, (_, s) in enumerate(inputs)]
    t0 = time.perf_counter()
    outs = fn(*args)
    if len(outputs) == 1 and not isinstance(outs, tuple):
        outs = (outs,)
    if len(outs) != len(outputs):
        raise ValueError(f"kernel {name!r} returned {len(outs)} outputs, declared {len(outputs)}")
    outs = [np.broadcast_to(np.asarray(o, dtype=object), tuple(s)) for o, (_, s) in zip(outs, outputs)]
    in_shapes = [tuple(s) for _, s in inputs]
    prog = g.program(outs, in_shapes, name=name)
    prog.result_flops = None
    if checks:
        keep = [o for o, (n, _) in zip(outs, outputs) if n not in checks]
        prog.result_flops = g.program(keep, in_shapes, name=name).flops()
    prog.trace_seconds = time.perf_counter() - t0
    prog.graph_nodes = len(g.nodes)
    prog.input_names = tuple(n for n, _ in inputs)
    prog.output_names = tuple(n for n, _ in outputs)
    return prog


def trace_kernel(k, model, static=None, optional=()) -> Program:
    """Trace registered kernel ``k`` (a :class:`sparsedyn.kernels.Kernel`) for ``model``.

    ``static``: dict of the kernel's static arguments (frame name, reference...).
    ``optional``: names of optional state arrays (e.g. ``"f_ext"``, ``"gravity"``)
    that become inputs of the program; the others are left at ``None`` so the
    kernel folds its defaults (``model.gravity``, no external force) into the
    trace.  Inputs are ordered: declared inputs, then ``optional`` in the
    declared order.
    """
    static = dict(static or {})
    if k.program is not None:                  # a derived kernel (a derivative) builds its own program
        t0 = time.perf_counter()
        prog = k.program(model, static, tuple(optional))
        names = list(k.inputs) + [n for n in k.optional if n in optional]
        defaults = {"trace_seconds": time.perf_counter() - t0, "graph_nodes": len(prog.nodes),
                    "result_flops": None, "input_names": tuple(names), "output_names": tuple(k.outputs)}
        for attr, value in defaults.items():
            if not hasattr(prog, attr):
                setattr(prog, attr, value)
        return prog
    unknown = set(optional) - set(k.optional)
    if unknown:
        raise ValueError(f"kernel {k.name!r}: {sorted(unknown)} are not optional inputs "
                         f"(optional: {list(k.optional)})")
    shapes = k.shapes(model, **static)
    names = list(k.inputs) + [n for n in k.optional if n in optional]
    inputs = [(n, shapes[n]) for n in names]
    outputs = [(n, shapes[n]) for n in k.outputs]

    def call(*args):
        return k.fn(model, **dict(zip(names, args)), **static)

    suffix = "".join("_" + n for n in names[len(k.inputs):])
    return trace_function(call, inputs, outputs, name=k.name + suffix)
