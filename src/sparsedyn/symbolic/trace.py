"""Tracing a registered kernel into a :class:`~sparsedyn.symbolic.ir.Program`.

A kernel declared with :func:`sparsedyn.kernels.kernel` is called, unchanged,
on NumPy object arrays of fresh input symbols (one state, the shapes its
declaration gives for the model).  Everything the call does to them is
recorded by the :class:`~sparsedyn.symbolic.ir.Graph`; the outputs become a
dead-code-free program.  This module knows no physics: it only reads the
declaration.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .ir import Graph, Program, paused_gc

__all__ = ["trace_kernel", "trace_function", "UntraceableError"]


class UntraceableError(TypeError):
    """A function cannot be traced into a straight-line program (it branches on a value, or calls
    a routine that cannot see traced values, such as ``np.linalg``)."""


def _untraceable(name, e):
    msg = str(e)
    if isinstance(e, TypeError) and ("no truth value" in msg or "not supported between" in msg):
        return UntraceableError(
            f"user kernel {name!r} cannot be traced: it branches on a value (an if, while, comparison, "
            f"min/max or abs of a state-dependent number). A compiled kernel is one straight-line "
            f"program for every state: write the branch with arithmetic, or keep it outside the "
            f"kernel.")
    return UntraceableError(
        f"user kernel {name!r} cannot be traced: {type(e).__name__}: {msg}. Probably a NumPy routine "
        f"that needs numbers (np.linalg, np.where on values, sorting...): write small solves out "
        f"(sparsedyn.spd_inverse) and use sparsedyn.backend's sin/cos/sqrt/atan2.")


def trace_function(fn, inputs, outputs=None, name="kernel", checks=(), phases=False, explain=False) -> Program:
    """Trace ``fn(*object arrays)`` into a :class:`Program`: the one trace driver of sparsedyn.

    ``inputs``: a sequence of ``(name, shape)`` for one state.  ``outputs``: a sequence of
    ``(name, shape)``; ``fn`` returns one array per output (a single array when there is one
    output), broadcast to the declared shapes; ``None``: the outputs are named ``out0, out1, ...``
    and keep the shapes ``fn`` gives them.  ``checks``: names of outputs that only carry run-time check quantities;
    ``Program.result_flops`` then counts the other outputs alone.  ``phases``: call
    ``fn(phase, *arrays)`` with the graph's phase hook (:meth:`Graph.phase`), so the program's
    nodes carry the phases ``fn`` names.  ``explain``: a failure of ``fn`` (a branch on a traced
    value, a NumPy routine that needs numbers) or an output that is not made of numbers raises
    :class:`UntraceableError` saying so (for functions written by users).
    """
    with paused_gc():
        return _trace_function(fn, inputs, outputs, name, checks, phases, explain)


def _trace_function(fn, inputs, outputs, name, checks, phases, explain):
    inputs = list(inputs)
    g = Graph()
    args = [g.inputs(k, tuple(s)) for k, (_, s) in enumerate(inputs)]
    t0 = time.perf_counter()
    try:
        outs = fn(g.phase, *args) if phases else fn(*args)
    except Exception as e:
        if explain:
            raise _untraceable(name, e) from e
        raise
    many = isinstance(outs, tuple)
    if outputs is None:
        outs = [np.asarray(o, dtype=object) for o in (outs if many else (outs,))]
        outputs = [(f"out{k}", o.shape) for k, o in enumerate(outs)]
    else:
        outputs = list(outputs)
        if len(outputs) == 1 and not many:
            outs = (outs,)
        if len(outs) != len(outputs):
            raise ValueError(f"kernel {name!r} returned {len(outs)} outputs, declared {len(outputs)}")
        outs = [np.broadcast_to(np.asarray(o, dtype=object), tuple(s)) for o, (_, s) in zip(outs, outputs)]
    in_shapes = [tuple(s) for _, s in inputs]
    result_flops = None
    try:
        if checks:
            keep = [o for o, (n, _) in zip(outs, outputs) if n not in checks]
            result_flops = g.program(keep, in_shapes, name=name).flops()
        return g.program(outs, in_shapes, name=name, input_names=tuple(n for n, _ in inputs),
                         output_names=tuple(n for n, _ in outputs), result_flops=result_flops,
                         trace_seconds=time.perf_counter() - t0)
    except TypeError as e:
        if explain:
            raise UntraceableError(f"user kernel {name!r}: a result is not made of numbers and traced values "
                                   f"({e})") from e
        raise


def trace_kernel(k, model, static=None, optional=(), explain=False) -> Program:
    """Trace kernel ``k`` (a :class:`sparsedyn.kernels.Kernel`: a registered one, a
    :meth:`~sparsedyn.kernels.Kernel.variant` of it, or an owner's kernel) for ``model``.

    ``static``: dict of the kernel's static arguments (frame name, reference...).
    ``optional``: names of optional state arrays (e.g. ``"f_ext"``, ``"gravity"``)
    that become inputs of the program; the others are left at ``None`` so the
    kernel folds its defaults (``model.gravity``, no external force) into the
    trace.  Inputs are ordered: declared inputs, then ``optional`` in the
    declared order.  ``explain``: any failure of the kernel's function is an
    :class:`UntraceableError` saying why (see :func:`trace_function`).
    """
    static = dict(static or {})
    if k.program is not None:                  # a derived kernel (a derivative) builds its own program
        t0 = time.perf_counter()
        prog = k.program(model, static, tuple(optional))
        return dataclasses.replace(prog, trace_seconds=time.perf_counter() - t0)
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
    return trace_function(call, inputs, outputs, name=k.name + suffix, checks=k.checks, explain=explain)
