"""Automatic differentiation of straight-line programs.

:func:`jacobian_program` turns a :class:`~sparsedyn.symbolic.ir.Program`
``y = P(x_0, x_1, ...)`` into a new program computing the Jacobians
``dy_k / dx_j`` for chosen inputs ``j``.  The new program is emitted through a
fresh :class:`~sparsedyn.symbolic.ir.Graph`, so the result is constant-folded,
hash-consed (CSE) and dead-code-free like any traced kernel: it can be
flop-counted, interpreted (:meth:`Program.evaluate`), compiled, or bridged to
CasADi and JAX.

Two modes, with the classical costs (Griewank and Walther, *Evaluating
Derivatives*, 2008):

* **forward** (tangent) mode carries, for every node, the sparse vector of its
  derivatives with respect to the ``n`` seeded input elements: cost about ``n``
  times the primal in the worst case;
* **reverse** (adjoint) mode sweeps the program backwards, carrying for every
  node the sparse vector of the derivatives of the ``m`` output elements with
  respect to it: cost about ``m`` times the primal (the cheap-gradient
  principle for ``m = 1``).

Both are *vector* modes over structurally sparse dicts: a node that does not
depend on a seed (or that no output depends on) carries nothing, so a
Jacobian's structural zeros stay exact integer zeros and are folded away.
``mode="auto"`` picks reverse when there are fewer output elements than seeded
input elements, forward otherwise.

``at`` substitutes constants for whole input arguments before differentiating
(the primal is re-emitted with them folded in).  This is how derivatives on
the tangent space are taken: a kernel ``f(q)`` is traced as
``g(q, dq) = f(chart(q, dq))`` and differentiated with respect to ``dq`` at
``dq = 0`` (see :mod:`sparsedyn.algorithms.derivatives`).

Derivative rules (``r`` the node's primal value):
``d(x*y) = y dx + x dy``, ``d(x/y) = (dx - r dy) / y`` (one reciprocal of
``y`` shared by all directions), ``d sin x = cos x dx``, ``d cos x = -sin x dx``,
``d sqrt x = dx * (0.5 / r)``.  Forward and reverse mode evaluate the same
partial derivatives but sum the chain-rule products in different orders, so
they agree to rounding, not bit for bit.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .ir import ADD, ATAN2, CONST, COPYSIGN, COS, DIV, INPUT, MUL, NEG, SIN, SQRT, SUB, Graph, Program, Sym

__all__ = ["jacobian_program", "inline", "choose_mode", "MODES"]

MODES = ("auto", "forward", "reverse")


def _sin(x):
    return x.sin() if x.__class__ is Sym else math.sin(x)


def _cos(x):
    return x.cos() if x.__class__ is Sym else math.cos(x)


def _sqrt(x):
    return x.sqrt() if x.__class__ is Sym else math.sqrt(x)


def _zero(x):
    return x.__class__ is not Sym and x == 0


def _atan2(y, x):
    if y.__class__ is Sym:
        return y.atan2(x)
    if x.__class__ is Sym:
        return x.g.binary(ATAN2, x.g.operand(y), x.i)
    return math.atan2(y, x)


def _copysign(x, s):
    if x.__class__ is Sym:
        return x.copysign(s)
    if s.__class__ is Sym:
        return s.g.binary(COPYSIGN, s.g.operand(x), s.i)
    return math.copysign(x, s)


_FNS = {"sin": _sin, "cos": _cos, "sqrt": _sqrt, "atan2": _atan2, "copysign": _copysign}


def _reemit(prog, values):
    """Values of every node of ``prog`` with its inputs replaced: ``values[j]`` is the flat
    sequence of the elements of input ``j`` (Sym of some graph, or Python numbers).  Returns
    one value per node (Sym or number); numbers fold, so substituted zeros vanish."""
    return prog.replay(lambda j, k: values[j][k], _FNS)


def _number(c):
    c = float(c)
    return 0 if c == 0.0 else c            # a substituted zero is structural


def inline(prog: Program, args) -> list:
    """Outputs of ``prog`` applied to ``args`` (object arrays of Sym / numbers, or float arrays,
    one per input, of the input shapes): the program's operations are replayed through the
    graph of the symbols, with folding and CSE.  Returns object arrays of the output shapes."""
    _straight(prog)
    values = []
    for j, (a, s) in enumerate(zip(args, prog.input_shapes)):
        a = np.asarray(a)
        if a.shape != tuple(s):
            raise ValueError(f"program {prog.name!r}: argument {j} has shape {a.shape}, expected {tuple(s)}")
        flat = a.reshape(-1)
        values.append([x if x.__class__ is Sym else _number(x) for x in flat])
    val = _reemit(prog, values)
    return [np.array([val[v] if t == "node" else v for t, v in row], dtype=object).reshape(s)
            for row, s in zip(prog.outputs, prog.output_shapes)]


def _partials(prog, val):
    """Per-node local partial derivatives, created lazily: ``(d/dx, d/dy)``."""
    cache = {}

    def partial(i):
        p = cache.get(i)
        if p is None:
            op, x, y = prog.nodes[i]
            if op == MUL:
                p = (val[y], val[x])
            elif op == DIV:
                inv = 1.0 / val[y]
                p = (inv, -(val[i] * inv))
            elif op == SIN:
                p = (_cos(val[x]), None)
            elif op == COS:
                p = (-_sin(val[x]), None)
            elif op == SQRT:
                p = (0.5 / val[i], None)
            elif op == ATAN2:                       # atan2(a, b): (b, -a) / (a^2 + b^2)
                inv = 1.0 / (val[x] * val[x] + val[y] * val[y])
                p = (val[y] * inv, -(val[x] * inv))
            elif op == COPYSIGN:                    # |a| sign(s): sign(a) sign(s), and 0 almost everywhere
                p = (_copysign(1.0, val[x]) * _copysign(1.0, val[y]), 0)
            else:
                raise AssertionError(op)
            cache[i] = p
        return p

    return partial


def _forward(prog, val, seeds, partial):
    """Tangents ``tan[i] = {direction: d node_i / d seed}`` (sparse; missing = 0)."""
    tan = [None] * len(prog.nodes)
    for i, (op, x, y) in enumerate(prog.nodes):
        if op == INPUT:
            tan[i] = seeds.get((x, y))
            continue
        if op == CONST:
            continue
        tx = tan[x]
        ty = tan[y] if y >= 0 else None
        if not tx and not ty:
            continue
        if op == NEG:
            t = {k: -d for k, d in tx.items()}
        elif op == ADD or op == SUB:
            t = dict(tx) if tx else {}
            if ty:
                for k, d in ty.items():
                    e = t.get(k)
                    if op == ADD:
                        t[k] = d if e is None else e + d
                    else:
                        t[k] = -d if e is None else e - d
        else:
            px, py = partial(i)
            t = {}
            if tx:
                for k, d in tx.items():
                    t[k] = d * px
            if ty:
                for k, d in ty.items():
                    e = t.get(k)
                    t[k] = d * py if e is None else e + d * py
        t = {k: d for k, d in t.items() if not _zero(d)}
        tan[i] = t or None
    return tan


def _active(prog, wrt_args):
    """``active[i]``: node ``i`` depends on an input of ``wrt_args``."""
    act = bytearray(len(prog.nodes))
    for i, (op, x, y) in enumerate(prog.nodes):
        if op == INPUT:
            act[i] = x in wrt_args
        elif op != CONST:
            act[i] = act[x] or (y >= 0 and act[y])
    return act


def _reverse(prog, val, out_seeds, active, partial):
    """Adjoints of the input nodes: ``{(arg, index): {output element: d output / d input}}``."""
    adj = [None] * len(prog.nodes)
    for node, key in out_seeds:
        if not active[node]:
            continue
        a = adj[node]
        if a is None:
            a = adj[node] = {}
        a[key] = a.get(key, 0) + 1.0

    def push(t, contrib):
        if not active[t]:
            return
        a = adj[t]
        if a is None:
            adj[t] = {k: c for k, c in contrib.items() if not _zero(c)}
            return
        for k, c in contrib.items():
            if _zero(c):
                continue
            e = a.get(k)
            a[k] = c if e is None else e + c

    grads = {}
    for i in range(len(prog.nodes) - 1, -1, -1):
        a = adj[i]
        if not a:
            continue
        adj[i] = None                      # free as we go
        op, x, y = prog.nodes[i]
        if op == INPUT:
            grads[(x, y)] = a
        elif op == NEG:
            push(x, {k: -c for k, c in a.items()})
        elif op == ADD:
            push(x, a)
            push(y, a)
        elif op == SUB:
            push(x, a)
            push(y, {k: -c for k, c in a.items()})
        else:
            px, py = partial(i)
            if active[x]:
                push(x, {k: c * px for k, c in a.items()})
            if y >= 0 and active[y]:
                push(y, {k: c * py for k, c in a.items()})
    return grads


def choose_mode(prog, wrt, outputs=None) -> str:
    """``"reverse"`` when the Jacobian has fewer rows (output elements) than columns
    (seeded input elements), else ``"forward"``."""
    outputs = range(len(prog.outputs)) if outputs is None else outputs
    m = sum(len(prog.outputs[k]) for k in outputs)
    n = sum(int(np.prod(prog.input_shapes[j], dtype=int)) for j in wrt)
    return "reverse" if m < n else "forward"


def _straight(prog):
    """Refuse an iterative kernel (:class:`~sparsedyn.symbolic.loop.LoopProgram`): it has no derivative program."""
    if getattr(prog, "stages", None) is not None:
        raise TypeError(f"{prog.name}: an iterative kernel (a loop whose iteration count depends on the values) "
                        f"has no derivative program; differentiate its solution instead (implicit function theorem)")


def _jacobians(prog, val, partial, wrt, outputs, mode) -> dict:
    """``{(k, j): object array (output k's size, input j's size)}``: the Jacobian entries of
    :func:`jacobian_program`, by forward tangents or reverse adjoints through ``prog`` (re-emitted
    values ``val``, local ``partial`` derivatives)."""
    jac = {}     # (k, j) -> object array out_shape + in_shape
    for k in outputs:
        for j in wrt:
            jac[(k, j)] = np.zeros((len(prog.outputs[k]), int(np.prod(prog.input_shapes[j], dtype=int))),
                                   dtype=object)
    if mode == "forward":
        seeds = {}
        for j in wrt:
            for e in range(int(np.prod(prog.input_shapes[j], dtype=int))):
                seeds[(j, e)] = {(j, e): 1.0}
        tan = _forward(prog, val, seeds, partial)
        for k in outputs:
            for r, (t, v) in enumerate(prog.outputs[k]):
                if t != "node" or not tan[v]:
                    continue
                for (j, e), d in tan[v].items():
                    jac[(k, j)][r, e] = d
    elif mode == "reverse":
        active = _active(prog, set(wrt))
        out_seeds = [(v, (k, r)) for k in outputs for r, (t, v) in enumerate(prog.outputs[k]) if t == "node"]
        grads = _reverse(prog, val, out_seeds, active, partial)
        for (j, e), a in grads.items():
            if j not in wrt:
                continue
            for (k, r), d in a.items():
                jac[(k, j)][r, e] = d
    return jac


def jacobian_program(prog: Program, wrt, *, outputs=None, mode="auto", at=None, primal=False,
                     name=None, input_names=None, output_names=None) -> Program:
    """A program computing the Jacobians of ``prog``'s outputs with respect to inputs ``wrt``.

    ``wrt``: indices of the differentiated input arguments.  ``outputs``: indices of the
    differentiated outputs (default: all).  ``at``: ``{input index: value}`` substituted
    for whole input arguments before differentiation (an input may be both in ``at`` and in
    ``wrt``: the Jacobian is then taken at that value).  Substituted inputs are removed
    from the new program's inputs, which keep their order otherwise.

    Outputs of the new program: with ``primal=True`` first the differentiated primal outputs;
    then, for each output ``k`` and each ``j`` in ``wrt`` (``k`` outer), the Jacobian of shape
    ``output_shapes[k] + input_shapes[j]``.  ``mode``: ``"forward"``, ``"reverse"`` or
    ``"auto"`` (:func:`choose_mode`).  The returned program carries ``ad_mode`` (the mode
    used) and ``ad_seconds``; ``input_names`` (default: those of ``prog`` that are kept) and
    ``output_names`` name its arguments.
    """
    _straight(prog)
    prog = prog.expanded()                  # block products as the scalar operations they stand for
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    n_in = len(prog.input_shapes)
    wrt = [int(j) for j in wrt]
    bad = [j for j in wrt if not 0 <= j < n_in]
    if bad or len(set(wrt)) != len(wrt):
        raise ValueError(f"wrt: expected distinct input indices in 0..{n_in - 1}, got {wrt}")
    outputs = list(range(len(prog.outputs))) if outputs is None else [int(k) for k in outputs]
    at = dict(at or {})
    flat_at = {}
    for j, value in at.items():
        shape = tuple(prog.input_shapes[j])
        a = np.broadcast_to(np.asarray(value, dtype=float), shape).reshape(-1)
        flat_at[j] = a
    if mode == "auto":
        mode = choose_mode(prog, wrt, outputs)
    t0 = time.perf_counter()
    arg_map, kept = [], []
    for j in range(n_in):
        if j in flat_at:
            arg_map.append(None)
        else:
            arg_map.append(len(kept))
            kept.append(j)
    g = Graph()
    values = [[_number(c) for c in flat_at[j]] if arg_map[j] is None else
              [g.input(arg_map[j], e) for e in range(int(np.prod(prog.input_shapes[j], dtype=int)))]
              for j in range(n_in)]
    val = _reemit(prog, values)
    partial = _partials(prog, val)

    def value(entry):
        t, v = entry
        return val[v] if t == "node" else v

    jac = _jacobians(prog, val, partial, wrt, outputs, mode)     # (k, j) -> out_shape + in_shape
    outs, shapes = [], []
    if primal:
        for k in outputs:
            outs.append(np.array([value(en) for en in prog.outputs[k]], dtype=object))
            shapes.append(tuple(prog.output_shapes[k]))
    for k in outputs:
        for j in wrt:
            outs.append(jac[(k, j)].reshape(-1))
            shapes.append(tuple(prog.output_shapes[k]) + tuple(prog.input_shapes[j]))
    outs = [o.reshape(s) for o, s in zip(outs, shapes)]
    if input_names is None and prog.input_names is not None:
        input_names = tuple(prog.input_names[j] for j in kept)
    return g.program(outs, [prog.input_shapes[j] for j in kept], name=name or f"d_{prog.name}", ad_mode=mode,
                     ad_seconds=time.perf_counter() - t0, output_names=output_names,
                     input_names=None if input_names is None else tuple(input_names))
