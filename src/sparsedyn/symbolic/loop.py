"""Iterative kernels: a few straight-line programs run in a loop that their own outputs steer.

A value-dependent number of iterations (an iterative solver run to a tolerance) cannot be one
straight-line program, but each of its *stages* can.  A :class:`LoopProgram` is

* ``init(X) -> (K, S)``: the inputs ``X`` give a constant block ``K`` (read by everything after)
  and the first loop state ``S``;
* stages ``stage_k(X, K, S) -> (S', flag)``, run one at a time, starting with stage 0: after a
  run the loop state is ``S'``, and the flag (rounded to an integer) says which stage runs next:
  ``0`` the same again, ``+j`` the ``j``-th next one, ``-j`` the ``j``-th previous one; moving past
  the last stage ends the loop (so does ``cap`` stage runs in all, a guard: the stages count
  their own iterations and stop themselves);
* ``finish(X, K, S) -> Y``: the outputs.

Every piece is an ordinary traced :class:`~sparsedyn.symbolic.ir.Program`, so a stage is written
like any kernel (no branch on a value: a choice is arithmetic, e.g. with ``copysign``), and the
compiler emits the loop around them (one native call runs the whole iteration).  Nothing here
knows what is iterated.  :meth:`LoopProgram.evaluate` is the reference interpreter (NumPy, state
by state).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

from .ir import Program
from .trace import trace_function

__all__ = ["LoopProgram", "trace_loop", "next_stage", "run_stages"]

#: Version of the loop's protocol (what a driver does between stages): part of :meth:`LoopProgram.text`,
#: so that compiled loops are rebuilt when it changes.
PROTOCOL = "2"


def next_stage(stage: int, flag: float) -> int:
    """The stage after ``stage`` for a stage's ``flag`` (the rule of the module docstring; a flag
    that is not a number repeats the stage, a stage before the first is the first)."""
    step = int(flag + 0.5) if flag > 0.5 else (-int(-flag + 0.5) if flag < -0.5 else 0)
    return max(0, stage + step)


def run_stages(init, stages, finish, inputs, cap=1_000_000):
    """Run an iterative kernel's pieces (functions, or the ``evaluate`` of traced programs) on one
    state's values ``inputs``: ``(outputs, stage runs)``, the driver of the module docstring (what the
    compiled loop does between stages).  The NumPy reference of an iterative kernel runs its stage
    functions here on floats; :meth:`LoopProgram.run` runs the traced programs."""
    K, S = init(*inputs)
    stage, runs = 0, 0
    while stage < len(stages) and runs < cap:
        S, flag = stages[stage](*inputs, K, S)
        runs += 1
        stage = next_stage(stage, float(np.reshape(flag, -1)[0]))
    return finish(*inputs, K, S), runs


@dataclass
class LoopProgram:
    """An iterative kernel (module docstring): ``init``, ``stages``, ``finish`` are programs;
    ``cap`` the largest number of stage runs.  ``input_shapes``, ``output_shapes``: those of the
    kernel (the inputs of ``init``, the outputs of ``finish``)."""

    name: str
    init: Program
    stages: tuple
    finish: Program
    cap: int
    input_shapes: list
    output_shapes: list
    input_names: tuple | None = field(default=None, repr=False)
    output_names: tuple | None = field(default=None, repr=False)
    result_flops: dict | None = field(default=None, repr=False)
    trace_seconds: float = field(default=0.0, repr=False)

    @property
    def programs(self):
        return (self.init, *self.stages, self.finish)

    @property
    def nodes(self):
        """All the pieces' nodes (for counts)."""
        return [n for p in self.programs for n in p.nodes]

    @property
    def sizes(self):
        """``(len(K), len(S))``."""
        return tuple(int(np.prod(s, dtype=int)) for s in self.init.output_shapes)

    def flops(self, phase=None) -> dict:
        """Operation counts of ``init``, one run of every stage and ``finish`` together (how many
        stage runs a call makes depends on the values), and ``"stages"``: the total of one run of
        every stage."""
        total = {}
        for p in self.programs:
            for k, n in p.flops(phase).items():
                total[k] = total.get(k, 0) + n
        total["stages"] = sum(p.flops(phase)["total"] for p in self.stages)
        return total

    def text(self) -> str:
        head = f"loop v{PROTOCOL} {self.name} cap {self.cap} stages {len(self.stages)}\n"
        return head + "".join(p.text() for p in self.programs)

    def digest(self) -> str:
        return hashlib.sha256(self.text().encode()).hexdigest()

    def run(self, inputs):
        """One state: ``(outputs, stage runs)`` from float ``inputs`` (one array per input)."""
        return run_stages(lambda *x: self.init.evaluate(list(x)),
                          [lambda *x, p=p: p.evaluate(list(x)) for p in self.stages],
                          lambda *x: self.finish.evaluate(list(x)), list(inputs), self.cap)

    def evaluate(self, inputs):
        """Interpret the loop with NumPy on float inputs (leading batch axes broadcast, state by
        state); the outputs have shapes ``batch + output_shapes[k]``."""
        arrs = [np.asarray(x, dtype=float) for x in inputs]
        batch = np.broadcast_shapes(*(x.shape[:x.ndim - len(s)] for x, s in zip(arrs, self.input_shapes)))
        flat = [np.broadcast_to(x, batch + tuple(s)).reshape((-1,) + tuple(s)) for x, s in zip(arrs, self.input_shapes)]
        B = int(np.prod(batch, dtype=int))
        outs = [np.empty((B,) + tuple(s)) for s in self.output_shapes]
        for b in range(B):
            for o, r in zip(outs, self.run([f[b] for f in flat])[0]):
                o[b] = r
        return [o.reshape(batch + tuple(s)) for o, s in zip(outs, self.output_shapes)]


def trace_loop(name, inputs, outputs, init, stages, finish, cap=1_000_000) -> LoopProgram:
    """Trace an iterative kernel (module docstring) into a :class:`LoopProgram`.

    ``inputs``, ``outputs``: sequences of ``(name, shape)`` of the kernel (one state);
    ``init(*X) -> (K, S)`` (two 1-D arrays); each of ``stages``: ``stage(*X, K, S) -> (S', flag)``
    (``S'`` of the shape of ``S``, ``flag`` a scalar); ``finish(*X, K, S)`` returns the outputs.
    """
    t0 = time.perf_counter()
    inputs = [(n, tuple(s)) for n, s in inputs]
    p_init = trace_function(lambda *x: tuple(np.asarray(o, dtype=object).reshape(-1) for o in init(*x)), inputs,
                            None, name=f"{name}_init")
    if len(p_init.output_shapes) != 2:
        raise ValueError(f"loop kernel {name!r}: init must return (K, S), got {len(p_init.output_shapes)} arrays")
    nK, nS = (int(np.prod(s, dtype=int)) for s in p_init.output_shapes)
    carried = inputs + [("K", (nK,)), ("S", (nS,))]
    progs = []
    for k, st in enumerate(stages):
        def body(*x, st=st):
            s, flag = st(*x)
            return np.asarray(s, dtype=object).reshape(-1), np.asarray(flag, dtype=object).reshape(1)
        progs.append(trace_function(body, carried, [("S", (nS,)), ("flag", (1,))], name=f"{name}_stage{k}"))
    p_fin = trace_function(finish, carried, outputs, name=f"{name}_finish")
    return LoopProgram(name, p_init, tuple(progs), p_fin, int(cap), [s for _, s in inputs],
                       [tuple(s) for _, s in outputs], tuple(n for n, _ in inputs), tuple(n for n, _ in outputs),
                       trace_seconds=time.perf_counter() - t0)
