"""Tracing the existing kernels into :class:`~sparsedyn.symbolic.ir.Program` objects.

Each compiled kernel is described by a :class:`KernelSpec`: the named input
arrays (shapes for one state), the output shapes, and a function that calls the
*unchanged* NumPy kernel of sparsedyn on object arrays of symbols.  Nothing
here knows any physics: it only says which kernel takes which arrays.

==============  ==========================================  ==========================================
kernel          inputs (one state)                          outputs (one state)
==============  ==========================================  ==========================================
``rnea``        q (nq), v (nv), a (nv)                      tau (nv)
``bias``        q (nq), v (nv)                              C (nv)
``aba``         q (nq), v (nv), tau (nv)                    qdd (nv)
``crba``        q (nq)                                      H (nv, nv)
``minv``        q (nq)                                      Minv (nv, nv)
``fk``          q (nq)                                      R (NB, 3, 3), p (NB, 3)
``*_ext``       as above plus f_ext (NB, 6), gravity (3)    as above (rnea, bias, aba only)
==============  ==========================================  ==========================================

The plain variants fold ``model.gravity`` (and the absence of external forces)
into the program; the ``_ext`` variants take them as inputs.

Other traced callables (the online phase of a sparse problem, an estimator's
algebra: :mod:`.problems`) become kernels through :func:`spec_from_callable`:
a name, the input and output shapes of one state and a function of object
arrays.  A spec may mark some outputs as *checks* (per-state quantities a
wrapper inspects, e.g. pivot ratios); :func:`trace` then also counts the flops
of the other outputs alone (``Program.result_flops``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..symbolic.ir import Graph, Program

__all__ = ["KernelSpec", "KERNELS", "DEFAULT_KERNELS", "kernel_spec", "spec_from_callable", "trace"]


@dataclass(frozen=True)
class KernelSpec:
    name: str
    inputs: tuple          # argument names
    outputs: tuple         # output names
    shapes: Callable       # model -> dict name -> shape (one state)
    call: Callable         # (model, *object arrays) -> tuple of output arrays
    checks: tuple = ()     # outputs holding run-time check quantities (not part of the result's flops)


def _shapes(model):
    return {"q": (model.nq,), "v": (model.nv,), "a": (model.nv,), "tau": (model.nv,), "qdd": (model.nv,),
            "C": (model.nv,), "H": (model.nv, model.nv), "Minv": (model.nv, model.nv),
            "R": (model.nbodies, 3, 3), "p": (model.nbodies, 3), "f_ext": (model.nbodies, 6), "gravity": (3,)}


def _rnea(model, q, v, a, f_ext=None, g=None):
    from ..algorithms.rnea import rnea_kernel
    return (rnea_kernel(model, q, v, a, f_ext, g),)


def _bias(model, q, v, f_ext=None, g=None):
    from ..algorithms.crba import bias_kernel
    return (bias_kernel(model, q, v, f_ext, g),)


def _aba(model, q, v, tau, f_ext=None, g=None):
    from ..algorithms.aba import aba_kernel
    return (aba_kernel(model, q, v, tau, f_ext, g, check=None),)


def _crba(model, q):
    from ..algorithms.crba import crba_kernel
    return (crba_kernel(model, q),)


def _minv(model, q):
    from ..algorithms.minv import minv_kernel
    return (minv_kernel(model, q, check=None),)


def _fk(model, q):
    from ..algorithms.kinematics import forward_kinematics
    return forward_kinematics(model, q)


KERNELS = {
    "rnea": KernelSpec("rnea", ("q", "v", "a"), ("tau",), _shapes, _rnea),
    "bias": KernelSpec("bias", ("q", "v"), ("C",), _shapes, _bias),
    "aba": KernelSpec("aba", ("q", "v", "tau"), ("qdd",), _shapes, _aba),
    "crba": KernelSpec("crba", ("q",), ("H",), _shapes, _crba),
    "minv": KernelSpec("minv", ("q",), ("Minv",), _shapes, _minv),
    "fk": KernelSpec("fk", ("q",), ("R", "p"), _shapes, _fk),
    "rnea_ext": KernelSpec("rnea_ext", ("q", "v", "a", "f_ext", "gravity"), ("tau",), _shapes, _rnea),
    "bias_ext": KernelSpec("bias_ext", ("q", "v", "f_ext", "gravity"), ("C",), _shapes, _bias),
    "aba_ext": KernelSpec("aba_ext", ("q", "v", "tau", "f_ext", "gravity"), ("qdd",), _shapes, _aba),
}
#: Kernels built by :func:`sparsedyn.compile.compile` unless told otherwise.
DEFAULT_KERNELS = ("rnea", "bias", "aba", "crba", "minv", "fk")


def kernel_spec(name) -> KernelSpec:
    if isinstance(name, KernelSpec):
        return name
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; known kernels: {', '.join(KERNELS)}") from None


def spec_from_callable(name, inputs, outputs, fn, checks=()) -> KernelSpec:
    """A :class:`KernelSpec` for any traceable callable.

    ``inputs``, ``outputs``: sequences of ``(name, shape)`` (one state);
    ``fn(*object arrays)`` returns one array per output (broadcast to its
    shape).  ``name`` becomes the C identifier (``[a-z][a-z0-9_]*``); argument
    names never reach the C source.  ``checks``: names of outputs that only
    carry run-time check quantities.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"kernel name must match [a-z][a-z0-9_]*, got {name!r}")
    table = {}
    for n, shape in list(inputs) + list(outputs):
        if n in table:
            raise ValueError(f"kernel {name!r}: argument name {n!r} used twice")
        table[n] = tuple(int(d) for d in shape)
    unknown = set(checks) - {n for n, _ in outputs}
    if unknown:
        raise ValueError(f"kernel {name!r}: checks {sorted(unknown)} are not outputs")
    return KernelSpec(name, tuple(n for n, _ in inputs), tuple(n for n, _ in outputs), lambda model: table,
                      lambda model, *args: fn(*args), tuple(checks))


def trace(model, name) -> Program:
    """Trace kernel ``name`` (a name of :data:`KERNELS` or a :class:`KernelSpec`) of ``model`` into a
    dead-code-free :class:`Program`.  ``Program.result_flops``: flop counts of the outputs that are not
    checks (``None`` when the spec has no checks)."""
    spec = kernel_spec(name)
    shapes = spec.shapes(model)
    g = Graph()
    args = [g.inputs(k, shapes[n]) for k, n in enumerate(spec.inputs)]
    t0 = time.perf_counter()
    outs = spec.call(model, *args)
    out_shapes = [shapes[n] for n in spec.outputs]
    outs = [np.broadcast_to(np.asarray(o, dtype=object), s) for o, s in zip(outs, out_shapes)]
    in_shapes = [shapes[n] for n in spec.inputs]
    prog = g.program(outs, in_shapes, name=spec.name)
    prog.result_flops = None
    if spec.checks:
        keep = [o for o, n in zip(outs, spec.outputs) if n not in spec.checks]
        prog.result_flops = g.program(keep, in_shapes, name=spec.name).flops()
    prog.trace_seconds = time.perf_counter() - t0
    prog.graph_nodes = len(g.nodes)
    return prog
