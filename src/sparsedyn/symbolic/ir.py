"""Symbolic scalars and the straight-line intermediate representation (IR).

A kernel of sparsedyn runs unchanged on NumPy ``dtype=object`` arrays.  When the
elements of the input arrays are :class:`Sym` objects, every arithmetic
operation the kernel performs on them is recorded in a :class:`Graph`: a
static-single-assignment (SSA) program, one node per scalar operation.

While recording, the graph

* **folds constants**: an operation with the int ``0`` (a structural zero, e.g.
  from ``np.zeros(..., dtype=object)``) or a float ``0.0`` / ``1.0`` / ``-1.0``
  (from a model constant or a constant matrix such as ``np.eye(3)``) is
  simplified away (``x * 0 -> 0``, ``x + 0 -> x``, ``x * 1 -> x``,
  ``x * -1 -> -x``, ``0 / x -> 0``); operations between plain numbers never
  reach the graph at all (NumPy evaluates them);
* **canonicalises negations** so that they move outwards and are absorbed by
  additions (``a + (-b) -> a - b``, ``(-a) * b -> -(a * b)``,
  ``x * (-c) -> -(x * c)``, ``-(a - b) -> b - a``); every one of these rewrites
  is exact in IEEE arithmetic;
* **merges common subexpressions** by hash-consing: a node is identified by
  ``(op, operands)`` and the operands of ``+`` and ``*`` are sorted (both are
  exactly commutative in IEEE arithmetic).

No rewrite reassociates or distributes, so the compiled program computes every
value with the same operations, in the same order, as the NumPy kernel up to
the summation order inside NumPy's own reductions (``@``).  The only results
that may differ from the NumPy float path are then the last bits, and the
behaviour on ``inf``/``nan`` (``x * 0`` is ``0`` here, a structural zero).

:meth:`Graph.program` removes dead code (nodes no output depends on) and
returns a :class:`Program`: the live nodes in topological order, renumbered,
with the outputs.  The program is the single source of the emitted C code,
of the structural patterns (an output that folded to a number is a structural
constant, ``0`` a structural zero) and of the flop counts (:meth:`Program.flops`).

**The counting rule** (the one rule behind every flop figure of sparsedyn):
one operation per node of the dead-code-free program, by kind: ``mul``,
``add`` (additions and subtractions), ``div``, ``sqrt``, ``sin``, ``cos``;
``total`` is their sum.  Hence

* only state-dependent values cost: the inputs of the trace (``q``, ``v``,
  ``tau``, measured values ...) are the only symbols; operations between
  model constants are evaluated once, offline, by NumPy;
* a structural zero, a multiplication by ``+-1``, an addition of ``0`` are free
  (folded), and a negation is a sign flip (``neg``, reported, not in ``total``);
* a value computed twice is counted once (hash-consing), and an operation no
  output depends on is not counted (dead code).
* a dense block product (:meth:`Graph.matmul`) counts the multiplications and
  additions it stands for, those of the elements some output depends on.

Phases: :meth:`Graph.phase` tags the nodes created inside a ``with`` block
(a node keeps the phase in which it was first created); :meth:`Program.flops`
counts one phase, :meth:`Program.phase_flops` all of them.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .block import expand, record, renumber
from .eval_plan import EvalPlan
from .gc_pause import paused_gc
from .ops import (ADD, ATAN2, CONST, COPYSIGN, COS, DIV, FLOP_KINDS, INPUT, MATMUL, MUL, NEG, OPS, SIN, SQRT, SUB,
                  UNARY as _UNARY)
from .sym import Sym, _is_num

__all__ = ["Sym", "Graph", "Program", "OPS", "FLOP_KINDS", "MATMUL"]

class Graph:
    """A growing SSA graph with hash-consing and constant folding (see the module docstring).

    ``nodes[i] = (op, x, y)``: operands ``x``, ``y`` are node ids (``y = -1``
    for unary ops); for ``INPUT`` they are (argument index, flat element index),
    for ``CONST`` ``x`` is the float value.
    """

    #: Phase of the nodes created outside any :meth:`phase` block.
    DEFAULT_PHASE = "main"

    def __init__(self):
        self.nodes = []
        self.phases = []        # phase name of every node (when it was first created)
        self._table = {}
        self._neg_of = {}       # node id -> id of its negation's operand (for NEG nodes)
        self._phase = self.DEFAULT_PHASE
        self.blocks = []        # the dense block products (:meth:`matmul`)

    @contextmanager
    def phase(self, name):
        """Tag the nodes created inside the ``with`` block with phase ``name`` (flop counts by phase)."""
        old, self._phase = self._phase, str(name)
        try:
            yield
        finally:
            self._phase = old

    # --- node creation -------------------------------------------------------
    def _node(self, key):
        i = self._table.get(key)
        if i is None:
            i = len(self.nodes)
            self.nodes.append(key)
            self.phases.append(self._phase)
            self._table[key] = i
            if key[0] == NEG:
                self._neg_of[i] = key[1]
        return i

    def _sym(self, key):
        return Sym(self, self._node(key))

    def input(self, arg, index):
        return self._sym((INPUT, arg, index))

    def inputs(self, arg, shape):
        """An object array of fresh input symbols (argument ``arg``, C order)."""
        n = int(np.prod(shape, dtype=int))
        out = np.empty(n, dtype=object)
        for k in range(n):
            out[k] = self.input(arg, k)
        return out.reshape(shape)

    def const(self, value):
        return self._node((CONST, float(value), -1))

    def const_sym(self, value):
        """A :class:`Sym` of the constant ``value``."""
        return Sym(self, self.const(value))

    # --- folding rules (all exact in IEEE arithmetic) ---------------------------
    def neg(self, a):
        x = self._neg_of.get(a)
        if x is not None:
            return Sym(self, x)                       # --x = x
        n = self.nodes[a]
        if n[0] == SUB:
            return self._sym((SUB, n[2], n[1]))      # -(x - y) = y - x
        return self._sym((NEG, a, -1))

    def add(self, a, b):
        na, nb = self._neg_of.get(a), self._neg_of.get(b)
        if nb is not None:
            if na is not None:
                return self.neg(self._node((ADD,) + _sorted(na, nb)))   # -x + -y = -(x + y)
            return self.sub(a, nb)                                         # a + -y = a - y
        if na is not None:
            return self.sub(b, na)                                         # -x + b = b - x
        return self._sym((ADD,) + _sorted(a, b))

    def sub(self, a, b):
        if a == b:
            return 0
        na, nb = self._neg_of.get(a), self._neg_of.get(b)
        if nb is not None:
            if na is not None:
                return self.sub(nb, na)                                    # -x - -y = y - x
            return self.add(a, nb)                                         # a - -y = a + y
        if na is not None:
            return self.neg(self._node((ADD,) + _sorted(na, b)))           # -x - b = -(x + b)
        return self._sym((SUB, a, b))

    def add_const(self, a, c):
        """``a + c`` for a nonzero float ``c``."""
        na = self._neg_of.get(a)
        if na is not None:
            return self.neg(self._node((SUB, na, self.const(c))))          # -x + c = -(x - c)
        if c < 0:
            return self._sym((SUB, a, self.const(-c)))
        return self._sym((ADD,) + _sorted(a, self.const(c)))

    def const_sub(self, c, a):
        """``c - a`` for a nonzero float ``c``."""
        na = self._neg_of.get(a)
        if na is not None:
            return self.add_const(na, c)                                   # c - -x = x + c
        if c < 0:
            return self.neg(self._node((ADD,) + _sorted(a, self.const(-c))))   # -k - a = -(a + k)
        return self._sym((SUB, self.const(c), a))

    def mul(self, a, b):
        na, nb = self._neg_of.get(a), self._neg_of.get(b)
        if na is not None or nb is not None:
            x = a if na is None else na
            y = b if nb is None else nb
            m = self._node((MUL,) + _sorted(x, y))
            return Sym(self, m) if (na is None) == (nb is None) else self.neg(m)
        return self._sym((MUL,) + _sorted(a, b))

    def mul_const(self, a, c):
        """``a * c`` for a nonzero float ``c``."""
        if c == 1.0:
            return Sym(self, a)
        if c == -1.0:
            return self.neg(a)
        neg = c < 0
        na = self._neg_of.get(a)
        if na is not None:
            a, neg = na, not neg
        m = self._node((MUL,) + _sorted(a, self.const(abs(c))))
        return self.neg(m) if neg else Sym(self, m)

    def div(self, a, b):
        na, nb = self._neg_of.get(a), self._neg_of.get(b)
        x = a if na is None else na
        y = b if nb is None else nb
        d = self._node((DIV, x, y))
        return Sym(self, d) if (na is None) == (nb is None) else self.neg(d)

    def div_const(self, a, c):
        if c == 1.0:
            return Sym(self, a)
        if c == -1.0:
            return self.neg(a)
        return self.div(a, self.const(c) if c > 0 else self._node((NEG, self.const(-c), -1)))

    def const_div(self, c, a):
        """``c / a`` for a nonzero float ``c``."""
        na = self._neg_of.get(a)
        x = a if na is None else na
        d = self._node((DIV, self.const(abs(c)), x))
        return Sym(self, d) if (c > 0) == (na is None) else self.neg(d)

    def unary(self, op, a):
        na = self._neg_of.get(a)
        if na is not None:
            if op == COS:
                return self._sym((COS, na, -1))          # cos(-x) = cos(x)
            if op == SIN:
                return self.neg(self._node((SIN, na, -1)))   # sin(-x) = -sin(x)
        return self._sym((op, a, -1))

    def operand(self, x):
        """Node id of ``x``: a :class:`Sym` of this graph or a number (a constant node)."""
        if x.__class__ is Sym:
            return x.i
        if not _is_num(x):
            raise TypeError(f"traced operand of type {type(x).__name__} is neither a symbol nor a number")
        return self.const(float(x))

    def binary(self, op, a, b):
        """A binary node that is not an arithmetic operation (``ATAN2``, ``COPYSIGN``)."""
        if op == COPYSIGN:
            n = self.nodes[b]
            if n[0] == CONST:                      # sign of a constant: known now
                na = self._neg_of.get(a)
                m = a if na is None else na
                m = self._node((COPYSIGN, m, self.const(1.0)))
                return Sym(self, m) if n[1] >= 0 else self.neg(m)
        return self._sym((op, a, b))

    def matmul(self, A, B, live=None):
        """``A @ B`` (n, m) of object arrays ``A`` (n, k) and ``B`` (k, m) (symbols and numbers) as one
        dense block product: an element is a ``MATMUL`` node, the sum in ``k`` order of the products
        of the pairs that are not structural zeros (NumPy's object ``@`` computes the same), the first
        product first; an element without such a pair is the structural zero ``0``.  The program stays
        of the size of the operands and the result, not of the ``n k m`` operations (the emitter
        writes the product as a loop); see :mod:`sparsedyn.symbolic.block`.  ``live``: the slots the
        compiled loop may skip (:attr:`~sparsedyn.symbolic.block.Block.live`), or None."""
        return record(self, A, B, live)

    # --- the program ------------------------------------------------------------
    def program(self, outputs, input_shapes, name="kernel", **about):
        """Dead-code-eliminated :class:`Program` computing ``outputs``.

        ``outputs``: list of object arrays (elements: Sym, int or float);
        ``input_shapes``: list of the shapes of the traced input arguments; ``about``: the
        descriptive fields of :class:`Program` (``input_names``, ``trace_seconds``, ...).
        """
        flat = [np.asarray(o, dtype=object).reshape(-1) for o in outputs]
        live = bytearray(len(self.nodes))
        stack = [x.i for f in flat for x in f if x.__class__ is Sym]
        for i in stack:
            live[i] = 1
        nodes = self.nodes
        blocks = {}                 # live block -> its number in the program (in the graph's order)
        while stack:
            op, x, y = nodes[stack.pop()]
            if op == MATMUL:
                if x not in blocks:
                    blocks[x] = -1
                    stack += [k for k in self.blocks[x].operands() if not live[k]]
                    for k in self.blocks[x].operands():
                        live[k] = 1
            elif op > CONST:
                for k in (x, y):
                    if k >= 0 and not live[k]:
                        live[k] = 1
                        stack.append(k)
        blocks = {b: k for k, b in enumerate(sorted(blocks))}
        new = {}
        prog, phases = [], []
        # the live nodes alone, in order: an iterative kernel's pieces share one graph, each a part of it
        for i in np.flatnonzero(np.frombuffer(live, dtype=np.uint8)).tolist():
            op, x, y = nodes[i]
            if op == MATMUL:
                x = blocks[x]
            elif op > CONST:
                x = new[x]
                y = new[y] if y >= 0 else -1
            new[i] = len(prog)
            prog.append((op, x, y))
            phases.append(self.phases[i])
        if blocks:
            about["blocks"] = renumber([self.blocks[b] for b in sorted(blocks)], new, prog)
        outs = []
        for f in flat:
            row = []
            for x in f:
                if x.__class__ is Sym:
                    row.append(("node", new[x.i]))
                elif _is_num(x):
                    row.append(("const", float(x)))
                else:
                    raise TypeError(f"traced output of type {type(x).__name__} is neither a symbol nor a number")
            outs.append(row)
        about.setdefault("graph_nodes", len(self.nodes))
        return Program(name, prog, outs, [tuple(s) for s in input_shapes], [np.shape(o) for o in outputs],
                       phases=phases, **about)


_FLOP_NAMES = {NEG: "neg", ADD: "add", SUB: "add", MUL: "mul", DIV: "div", SIN: "sin", COS: "cos", SQRT: "sqrt",
               ATAN2: "atan2", COPYSIGN: "neg"}


def _sorted(a, b):
    return (a, b) if a <= b else (b, a)


@dataclass
class Program:
    """A straight-line program: ``nodes`` in topological order, ``outputs[k][j]`` the value of
    element ``j`` (C order) of output ``k`` as ``("node", id)`` or ``("const", value)``.

    Built once, by :meth:`Graph.program`, with every field.  Descriptive fields (not part of
    :meth:`text`, so not of the cache keys): ``input_names``, ``output_names`` (argument names,
    ``None`` when unnamed); ``result_flops``: the flop counts of the outputs that are not run-time
    check quantities (``None`` when there are no checks); ``trace_seconds``, ``graph_nodes`` (nodes
    recorded, dead ones included); ``ad_mode``, ``ad_seconds``: for a Jacobian program, the mode and time of the
    differentiation.  ``blocks`` (part of :meth:`text`): the dense block products (:class:`~sparsedyn.symbolic.block.Block`)
    that the ``MATMUL`` nodes are elements of (:meth:`Graph.matmul`; their operations count as the
    scalar ones they stand for)."""

    name: str
    nodes: list
    outputs: list
    input_shapes: list
    output_shapes: list
    _text: str | None = field(default=None, repr=False)
    phases: list | None = field(default=None, repr=False)
    input_names: tuple | None = field(default=None, repr=False)
    output_names: tuple | None = field(default=None, repr=False)
    result_flops: dict | None = field(default=None, repr=False)
    trace_seconds: float = field(default=0.0, repr=False)
    graph_nodes: int = field(default=0, repr=False)
    ad_mode: str | None = field(default=None, repr=False)
    ad_seconds: float = field(default=0.0, repr=False)
    blocks: list = field(default_factory=list, repr=False)

    def flops(self, phase=None) -> dict:
        """Operation counts by kind (:data:`FLOP_KINDS`, plus ``total``) by the counting rule of the
        module docstring; ``phase``: count only the nodes of that phase (:meth:`Graph.phase`)."""
        count = dict.fromkeys(FLOP_KINDS, 0)
        for k, op in enumerate(self.nodes):
            name = _FLOP_NAMES.get(op[0])
            if name is not None and (phase is None or self.phases[k] == phase):
                count[name] += 1
        for b in self.blocks:               # the operations a block product stands for
            if phase is None or b.phase == phase:
                count["mul"] += int(b.pairs.sum() - b.unit_pairs(self.nodes).sum())
                count["add"] += int(b.pairs.sum() - (b.pairs > 0).sum())
        count["total"] = sum(count[k] for k in FLOP_KINDS if k != "neg")
        return count

    def phase_flops(self) -> dict:
        """``{phase: flops(phase)}`` for every phase that has operations, in order of first use."""
        names = dict.fromkeys([p for p, (op, _, _) in zip(self.phases, self.nodes) if op in _FLOP_NAMES]
                              + [b.phase for b in self.blocks])
        return {p: self.flops(p) for p in names}

    def text(self) -> str:
        """Canonical text of the program (the content the build cache hashes)."""
        if self._text is None:
            lines = [f"program {self.name} inputs {self.input_shapes} outputs {self.output_shapes}"]
            for k, b in enumerate(self.blocks):
                lines.append(f"block{k} {b.A.shape} {b.B.shape} A " + " ".join(map(str, b.A.reshape(-1).tolist()))
                             + " B " + " ".join(map(str, b.B.reshape(-1).tolist()))
                             + ("" if b.live is None else f" live t{b.bound} {b.live}"))
            for i, (op, x, y) in enumerate(self.nodes):
                if op == MATMUL:
                    lines.append(f"t{i} = matmul block{x} {y}")
                elif op == CONST:
                    lines.append(f"t{i} = const {float(x).hex()}")
                elif op == INPUT:
                    lines.append(f"t{i} = input {x} {y}")
                elif op in _UNARY:
                    lines.append(f"t{i} = {OPS[op]} t{x}")
                else:
                    lines.append(f"t{i} = {OPS[op]} t{x} t{y}")
            for k, row in enumerate(self.outputs):
                lines.append(f"out{k} = " + " ".join(f"t{v}" if t == "node" else float(v).hex() for t, v in row))
            self._text = "\n".join(lines) + "\n"
        return self._text

    def digest(self) -> str:
        return hashlib.sha256(self.text().encode()).hexdigest()

    def evaluate(self, inputs):
        """Interpret the program with NumPy on float inputs.

        ``inputs[k]`` has shape ``batch + input_shapes[k]`` (batch shapes broadcast; ``()`` for
        one state); the outputs have shapes ``batch + output_shapes[k]``.  Nodes are grouped by
        depth and operation once per program (:meth:`plan`), so one evaluation is a few NumPy
        calls per depth level, each over all the nodes of that level and all the states;
        large batches are processed in chunks to bound memory.
        """
        if self.blocks:
            return self.expanded().evaluate(inputs)
        arrs = [np.asarray(x, dtype=float) for x in inputs]
        if len(arrs) != len(self.input_shapes):
            raise ValueError(f"program {self.name!r}: expected {len(self.input_shapes)} inputs, got {len(arrs)}")
        batch = []
        for k, (x, s) in enumerate(zip(arrs, self.input_shapes)):
            s = tuple(s)
            if x.shape[x.ndim - len(s):] != s or x.ndim < len(s):
                raise ValueError(f"program {self.name!r}: input {k} has shape {x.shape}, expected (..., "
                                 f"{', '.join(map(str, s))})")
            batch.append(x.shape[:x.ndim - len(s)])
        shape = np.broadcast_shapes(*batch) if batch else ()
        B = int(np.prod(shape, dtype=int))
        flat = [np.broadcast_to(x, shape + tuple(s)).reshape(B, -1).T if np.prod(s, dtype=int) else
                np.zeros((0, B)) for x, s in zip(arrs, self.input_shapes)]
        plan = self.plan()
        n = max(len(self.nodes), 1)
        chunk = max(1, min(B, (1 << 24) // n))      # about 128 MB of node values per chunk
        outs = [np.empty((len(row), B)) for row in self.outputs]
        for b0 in range(0, B, chunk):
            b1 = min(B, b0 + chunk)
            vals = plan.run([f[:, b0:b1] for f in flat], b1 - b0)
            for o, (idx, slots, cidx, cval) in zip(outs, plan.outputs):
                o[idx, b0:b1] = vals[slots]
                o[cidx, b0:b1] = cval[:, None]
        return [o.T.reshape(shape + tuple(s)) for o, s in zip(outs, self.output_shapes)]

    def replay(self, element, fns):
        """Run the program on values of another kind (symbols of another graph, CasADi ``SX``,
        JAX arrays): the one interpreter behind :func:`sparsedyn.symbolic.ad.inline` and the
        CasADi and JAX bridges.

        ``element(j, k)``: element ``k`` (flat, C order) of input ``j``; ``fns``: the functions
        ``"sin"``, ``"cos"``, ``"sqrt"``, ``"atan2"`` and ``"copysign"`` on those values (the
        arithmetic is Python's operators).  Returns one value per node; an output row's entry
        ``("node", i)`` is value ``i``, ``("const", c)`` the number ``c``.
        """
        if self.blocks:             # the block products as their scalar operations, values per node of self
            flat, new = expand(self)
            val = flat.replay(element, fns)
            return [val[k] for k in new]
        unary = {SIN: fns["sin"], COS: fns["cos"], SQRT: fns["sqrt"]}
        binary = {ATAN2: fns["atan2"], COPYSIGN: fns["copysign"]}
        val = [None] * len(self.nodes)
        for i, (op, x, y) in enumerate(self.nodes):
            if op == INPUT:
                val[i] = element(x, y)
            elif op == CONST:
                val[i] = x
            elif op == NEG:
                val[i] = -val[x]
            elif op == ADD:
                val[i] = val[x] + val[y]
            elif op == SUB:
                val[i] = val[x] - val[y]
            elif op == MUL:
                val[i] = val[x] * val[y]
            elif op == DIV:
                val[i] = val[x] / val[y]
            elif op in binary:
                val[i] = binary[op](val[x], val[y])
            else:
                val[i] = unary[op](val[x])
        return val

    def expanded(self) -> "Program":
        """This program with its block products (:meth:`Graph.matmul`) written out as the scalar
        operations they stand for (the program itself when it has none): what the interpreters and
        differentiation read.  Same values, same roundings.  Made on first use and kept with the program
        (the NumPy road evaluates it at every call, with its :meth:`plan`)."""
        if not self.blocks:
            return self
        out = getattr(self, "_expanded", None)
        if out is None:
            out = self._expanded = expand(self)[0]
        return out

    def plan(self):
        """The program's level schedule for vectorised interpretation (its ``groups``: one NumPy call
        per depth level and operation, of the program :meth:`expanded`), made on first use and kept
        with the program."""
        plan = getattr(self, "_eval_plan", None)
        if plan is None:
            plan = self._eval_plan = EvalPlan(self.expanded())
        return plan
