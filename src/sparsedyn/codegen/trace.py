"""Kernel specs: what the compiler needs to know of a kernel to build and call it.

A :class:`KernelSpec` names the input arrays (shapes for one state), the
outputs, and how to get the kernel's :class:`~sparsedyn.symbolic.ir.Program`.
Nothing here knows any physics.

* Every function of the registry :data:`sparsedyn.kernels.REGISTRY` has specs
  built from its declaration (:func:`registered_spec`): one per choice of its
  static arguments (a frame, a reference) and of the optional arrays that are
  given (``f_ext``, ``gravity``: those left out are folded as constants, e.g.
  ``model.gravity``).  The program comes from
  :func:`sparsedyn.symbolic.trace.trace_kernel`, which traces the public
  function itself.  There is no list of compiled kernels kept by hand: a
  function registered with ``@kernel`` has a compiled form.
* Other traced callables (the online phase of a sparse problem, an estimator's
  algebra, a user's function) become kernels through :func:`spec_from_callable`:
  a name, the input and output shapes of one state and a function of object
  arrays.  A spec may mark some outputs as *checks* (per-state quantities a
  wrapper inspects, e.g. pivot ratios); :func:`trace` then also counts the flops
  of the other outputs alone (``Program.result_flops``).

Names: ``kernel_spec("rnea")`` is the registered ``rnea`` with gravity folded;
``kernel_spec("rnea_ext")`` takes every optional array as an input.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..kernels import REGISTRY
from ..symbolic.ir import Graph, Program
from ..symbolic.trace import trace_kernel

__all__ = ["KernelSpec", "KERNELS", "DEFAULT_KERNELS", "kernel_spec", "registered_spec", "spec_from_callable",
           "trace"]


@dataclass(frozen=True)
class KernelSpec:
    name: str              # the C identifier
    inputs: tuple          # argument names
    outputs: tuple         # output names
    shapes: Callable       # model -> dict name -> shape (one state)
    call: Callable = None  # (model, *object arrays) -> tuple of output arrays
    checks: tuple = ()     # outputs holding run-time check quantities (not part of the result's flops)
    program: Callable = None   # model -> Program, instead of ``call`` (registered kernels)


def _static_tag(static) -> str:
    return hashlib.sha256(repr(sorted(static.items())).encode()).hexdigest()[:10]


def registered_spec(name, static=None, optional=()) -> KernelSpec:
    """The spec of registered kernel ``name`` for the static arguments ``static`` (a dict) with the
    optional arrays ``optional`` (names) as inputs."""
    try:
        k = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; registered kernels: {', '.join(REGISTRY)}") from None
    static = dict(static or {})
    optional = tuple(n for n in k.optional if n in optional)
    cname = re.sub(r"[^a-z0-9_]", "_", name.lower())
    if cname != name:                        # a C identifier, distinct for distinct Python names
        cname += "_" + hashlib.sha256(name.encode()).hexdigest()[:6]
    if optional:
        cname += "_ext" if optional == tuple(k.optional) else "_" + "_".join(optional)
    if static:
        cname += "_s" + _static_tag(static)
    inputs = tuple(k.inputs) + optional
    return KernelSpec(cname, inputs, tuple(k.outputs), lambda model: k.shapes(model, **static),
                      program=lambda model: trace_kernel(k, model, static, optional))


class _Registered(Mapping):
    """``name -> KernelSpec`` of the registered kernels without static arguments (and their ``_ext``
    forms): a view of :data:`sparsedyn.kernels.REGISTRY`, not a list kept by hand."""

    def _names(self):
        for n, k in REGISTRY.items():
            if not k.static:
                yield n
                if k.optional:
                    yield n + "_ext"

    def __getitem__(self, name):
        if name in REGISTRY and not REGISTRY[name].static:
            return registered_spec(name)
        if name.endswith("_ext") and name[:-4] in REGISTRY and REGISTRY[name[:-4]].optional:
            k = REGISTRY[name[:-4]]
            if not k.static:
                return registered_spec(k.name, optional=tuple(k.optional))
        raise KeyError(name)

    def __iter__(self):
        return self._names()

    def __len__(self):
        return sum(1 for _ in self._names())


KERNELS = _Registered()
#: Kernels built by ``sparsedyn compile MODEL`` (:func:`~sparsedyn.codegen.api.compile_report`).
DEFAULT_KERNELS = ("rnea", "nonlinear_effects", "aba", "crba", "minv", "forward_kinematics")


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
    if spec.program is not None:
        prog = spec.program(model)
        if not hasattr(prog, "result_flops"):
            prog.result_flops = None
        return prog
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
