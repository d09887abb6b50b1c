"""Straight-line C code of a :class:`~sparsedyn.symbolic.ir.Program` (the ``unrolled`` code shape of
:mod:`.cemit`): the operations in segments of ``chunk`` operations, one ``noinline`` function each,
values passed between segments through a workspace whose slots are reused, in the traced order or
that of :func:`schedule`, whichever passes fewer values."""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left, bisect_right
from itertools import chain

import numpy as np

from ..symbolic.ir import ADD, ATAN2, CONST, COPYSIGN, COS, DIV, INPUT, MATMUL, MUL, NEG, SIN, SQRT, SUB, Program
from .emit_blocks import Layout, block_call
from .emit_common import _SYM, _lit

__all__ = ["schedule"]


def schedule(prog: Program) -> Program:
    """``prog`` with its operations reordered so that each value is computed just before it is
    first needed: a depth-first post-order from the outputs, element by element in C order (an
    operation's first operand, then its second, then itself), the inputs and constants first.

    The traced order follows the kernel's loops: a derivative kernel computes a value for every
    body and column, then uses it much later, so most values outlive the segment of
    :func:`_functions` that computes them and pass through its workspace (rnea_derivatives of
    talos_reduced: 21,000 of 33,600 values stored, 35,000 loads).  After this reordering an output's
    operations run together, 5,000 values are stored and 18,000 loaded, and the C source is half as
    long, and the kernels run faster (about 1.5-2 times for the derivative kernels, single state and
    batched).  The kernels traced in a good order already (rnea, aba: a forward and a backward pass)
    keep it: :func:`_functions` takes whichever order passes fewer values.

    Every operation keeps its operands, so the results are the same bit for bit; the order is a
    valid topological order (every operand before its user), as :class:`Program` requires.  An
    element of a dense block product (``MATMUL``) needs all of its block's operands.
    Linear in the number of nodes.
    """
    nodes = prog.nodes
    n = len(nodes)
    done = bytearray(n)
    operands = [b.operands() for b in prog.blocks]
    ready = [False] * len(operands)             # per block: all its operands are placed
    order = []
    for i, (op, _, _) in enumerate(nodes):
        if op <= CONST:
            done[i] = 1
            order.append(i)
    roots = [v for row in prog.outputs for kind, v in row if kind == "node"]
    roots += range(n)                          # nodes no output needs (none after dead-code removal)
    for r in roots:
        if done[r]:
            continue
        stack = [r]
        while stack:
            i = stack[-1]
            if done[i]:
                stack.pop()
                continue
            op, x, y = nodes[i]
            if op == MATMUL:
                if not ready[x]:
                    pending = [a for a in operands[x] if not done[a]]
                    if pending:
                        stack += reversed(pending)
                        continue
                    ready[x] = True
                done[i] = 1
                order.append(i)
                stack.pop()
            elif not done[x]:
                stack.append(x)
            elif y >= 0 and not done[y]:
                stack.append(y)
            else:
                done[i] = 1
                order.append(i)
                stack.pop()
    new = [0] * n
    for k, i in enumerate(order):
        new[i] = k
    out = []
    for i in order:
        op, x, y = nodes[i]
        out.append((op, new[x], new[y] if y >= 0 else -1) if CONST < op != MATMUL else (op, x, y))
    outputs = [[(kind, new[v]) if kind == "node" else (kind, v) for kind, v in row] for row in prog.outputs]
    phases = [prog.phases[i] for i in order] if prog.phases is not None else None
    renum = np.asarray(new + [-1], dtype=np.int64)          # a structural zero (-1) stays -1
    blocks = [dataclasses.replace(b, A=renum[b.A], B=renum[b.B], bound=int(renum[b.bound])) for b in prog.blocks]
    return dataclasses.replace(prog, nodes=out, outputs=outputs, phases=phases, blocks=blocks, _text=None)


def _chunks(prog: Program, chunk: int):
    """Split the program into segments of at most ``chunk`` operations.

    Returns ``(seg, slot, nslots)``: ``seg[i]`` the segment of node ``i`` and
    ``slot[i]`` the workspace slot of a value used outside its own segment
    (slots are reused once a value's last use lies behind).  A block product starts a segment
    (:mod:`.emit_blocks`): its operands are then values of earlier segments; its elements
    (``MATMUL``) are no operations of a segment and take no slot.
    """
    seg, last = _segments(prog, chunk)
    seg = seg.tolist()
    return (seg, *_slots(seg, last))


def _segments(prog: Program, chunk: int, arrays=None):
    """``(seg, last)`` of :func:`_chunks`: the segment of each node (an array), and for each value
    used outside its own segment the segment of its last use (a dict).  ``arrays``:
    :func:`_arrays` of ``prog``, when the caller has them."""
    # Vectorised (NumPy): the segments of a derivative kernel's 90,000 nodes are counted twice, in
    # the traced and in the scheduled order, before the first C is written, while the compilers wait.
    op, x, y = _arrays(prog) if arrays is None else arrays
    isop = (op > CONST) & (op != MATMUL)             # an operation, which may take a slot
    starts = _first_elements_at(op, x) if prog.blocks else np.zeros(0, np.int64)
    seg = np.empty(len(op), np.int64)
    k = n = lo = 0
    for hi in [*starts.tolist(), len(op)]:           # a block product starts a segment
        if hi > lo:
            c = n + np.cumsum(isop[lo:hi])           # operations in the segment so far, node by node
            seg[lo:hi] = k + np.maximum(c - 1, 0) // chunk
            end = int(c[-1])
            k, n = k + max(end - 1, 0) // chunk, (end - 1) % chunk + 1 if end else 0
        if hi < len(op) and n:
            k, n = k + 1, 0
        lo = hi
    users = np.flatnonzero(isop)
    pairs = [(x[users], seg[users])]
    two = users[y[users] >= 0]
    pairs.append((y[two], seg[two]))
    for f in starts.tolist():                       # a block's operands, read where it starts
        a = prog.blocks[int(x[f])].operands()
        pairs.append((np.asarray(a, np.int64), np.full(len(a), seg[f])))
    v = np.concatenate([p[0] for p in pairs])
    s = np.concatenate([p[1] for p in pairs])
    keep = isop[v] & (seg[v] != s)
    v, s = v[keep], s[keep]
    order = np.lexsort((s, v))                      # per value, its users' segments ascending
    v, s = v[order], s[order]
    lastpos = np.flatnonzero(np.r_[v[1:] != v[:-1], True]) if len(v) else np.zeros(0, np.int64)
    return seg, dict(zip(v[lastpos].tolist(), s[lastpos].tolist()))


def _arrays(prog: Program):
    """``(op, x, y)``: the nodes' opcodes and operands as integer arrays (``x`` 0 for an input or a
    constant, ``y`` -1 where there is none; for ``MATMUL`` ``x`` the block)."""
    n = len(prog.nodes)
    flat = np.fromiter(chain.from_iterable(prog.nodes), np.float64, 3 * n).reshape(n, 3)
    op = flat[:, 0].astype(np.int64)
    x = np.where(op > CONST, flat[:, 1], 0).astype(np.int64)
    y = np.where(op > CONST, flat[:, 2], -1).astype(np.int64)
    return op, x, y


def _first_elements_at(op, x):
    """The indices of the first ``MATMUL`` node of each block product, ascending."""
    at = np.flatnonzero(op == MATMUL)
    _, first = np.unique(x[at], return_index=True)
    return np.sort(at[first])


def _slots(seg, last):
    """``(slot, nslots)`` of :func:`_chunks`: a linear scan over the segments, a slot free again in
    the segment after its value's last use (``last``, :func:`_segments`)."""
    # ``seg`` grows with the node's index, so the values come segment by segment, and the slots
    # released before a segment are gathered once, when it begins (a value's last use lies in a
    # later segment than the value: none is released within the segment that defines it).
    slot, free, release = {}, [], {}
    nslots, cur = 0, -1
    for i in sorted(last):
        if seg[i] != cur:
            cur = seg[i]
            for s in [s for s in release if s < cur]:
                free.extend(release.pop(s))
        if free:
            slot[i] = free.pop()
        else:
            slot[i] = nslots
            nslots += 1
        release.setdefault(last[i], []).append(slot[i])
    return slot, nslots


def _traffic(prog: Program, seg, slot, arrays=None) -> int:
    """Workspace accesses of one run of the segmented program: a store per value passed on, a load
    per value and later segment that reads it (``slot``: the values passed on, :func:`_chunks`'
    slots or :func:`_segments`' last uses; ``arrays``: :func:`_arrays` of ``prog``)."""
    op, x, y = _arrays(prog) if arrays is None else arrays
    seg = np.asarray(seg, np.int64)
    passed = np.zeros(len(op), bool)
    passed[np.fromiter(slot, np.int64, len(slot))] = True
    users = np.flatnonzero((op > CONST) & (op != MATMUL))
    two = users[y[users] >= 0]
    v = np.concatenate([x[users], y[two]])
    s = np.concatenate([seg[users], seg[two]])
    keep = passed[v] & (seg[v] != s)
    loads = np.unique(v[keep] * (int(seg[-1]) + 1) + s[keep]) if len(op) else ()
    return len(slot) + len(loads)


def _functions(prog: Program, cname: str, T: str, fn: dict, chunk: int, hoist=None):
    """Segment functions ``{cname}_{k}`` and a driver ``{cname}`` computing ``prog`` on type ``T``.

    Values crossing segments go through a workspace ``w`` of ``T`` (``nslots`` entries);
    splitting keeps each function small, which keeps the C compiler's register
    allocator (superlinear in function size) fast.  The operations run in the traced order or
    in that of :func:`schedule`, whichever moves fewer values through the workspace.
    ``hoist`` (a list): the outputs that are constants are not written by the driver but appended
    to it as ``(output, element, value)`` (the batch entry point writes them once per thread).
    Dense block products run as loops at the start of a segment (:mod:`.emit_blocks`).

    Returns ``(funcs, driver, workspace size)``; ``funcs`` is an iterator of ``(operations,
    source)``, one segment after the other, each written when it is asked for: the translation
    units of the first segments compile while the later ones are written (:mod:`.build`).
    """
    prog, seg, slot, nslots, arrays = _segmented(prog, chunk)
    nodes = prog.nodes
    layout = Layout(prog, nslots, T) if prog.blocks else None
    nin, nout = len(prog.input_shapes), len(prog.output_shapes)
    ptr = "const double" if T == "double" else "const sd_vd"
    optr = "double" if T == "double" else "sd_vd"
    params = ", ".join([f"{ptr} *restrict x{k}" for k in range(nin)] + [f"{optr} *restrict y{k}" for k in range(nout)]
                       + [f"{optr} *restrict w"])
    args = ", ".join([f"x{k}" for k in range(nin)] + [f"y{k}" for k in range(nout)] + ["w"])
    nseg = (seg[-1] + 1) if nodes else 0
    funcs = _segment_sources(prog, seg, slot, layout, nseg, (f"SD_HIDDEN void {cname}_", f"({params})"), cname, T, fn,
                             arrays)
    protos = [f"SD_HIDDEN void {cname}_{s}({params});" for s in range(nseg)]
    drv = [*protos, f"static void {cname}({params})", "{"]
    drv += [f"  {cname}_{s}({args});" for s in range(nseg)]
    drv += _tail(prog, T, hoist) + ["}"]
    return funcs, "\n".join(drv), max(nslots, 1) if layout is None else layout.end


def _segment_sources(prog, seg, slot, layout, nseg, head, cname, T, fn, arrays):
    """``(operations, C source)`` of each segment function (``head``: its first line before and after
    the segment's number), in order, written one at a time (see :func:`_functions`; ``arrays``:
    :func:`_arrays` of ``prog``)."""
    nodes = prog.nodes
    op, x, _ = arrays
    first = {i: int(x[i]) for i in _first_elements_at(op, x).tolist()} if prog.blocks else {}
    out_at = _output_places(prog)
    block_out = _block_outputs(nodes, out_at, layout, slot, T) if prog.blocks else {}
    inline = _inlined(nodes, seg, 0, slot, out_at)
    nops = _segment_sizes(prog, seg, first, nseg, op)
    lits = {}
    expr = {}
    cur, body, local, defs = 0, [], {}, []      # the segment being written: statements, names, blocks

    def ref(a):
        op, x, y = nodes[a]
        if op == CONST:
            lit = lits.get(a)                   # per node: 0.0 and -0.0 are equal keys
            if lit is None:
                lit = lits[a] = _lit(x)
            return lit
        if a in inline:
            return f"({expr.pop(a)})"
        name = local.get(a)
        if name is None:
            name = local[a] = f"t{a}"
            if op == INPUT:
                body.append(f"  const {T} {name} = x{int(x)}[{int(y)}];")
            elif op == MATMUL:
                body.append(f"  const {T} {name} = w[{layout.at(nodes, slot, a)}];")
            else:                                   # defined in an earlier segment
                body.append(f"  const {T} {name} = w[{slot[a]}];")
        return name

    for i, (op, x, y) in enumerate(nodes):
        if op <= CONST:
            continue
        while seg[i] != cur:
            yield nops[cur], "\n".join([*defs, f"{head[0]}{cur}{head[1]}", "{", *body, "}"])
            cur, body, local, defs = cur + 1, [], {}, []
            inline = _inlined(nodes, seg, cur, slot, out_at)
        if op == MATMUL:
            if i in first:
                d, run = block_call(prog, x, layout, slot, f"{cname}_b{x}", T)
                defs.append(d)
                body += run + block_out.get(x, [])
            continue
        sym = _SYM.get(op)
        e = f"{ref(x)} {sym} {ref(y)}" if sym is not None else _expression(op, x, y, fn, T, nodes, ref)
        if i in inline:
            expr[i] = e
            continue
        body.append(f"  const {T} t{i} = {e};")
        local[i] = f"t{i}"
        if i in slot:
            body.append(f"  w[{slot[i]}] = t{i};")
        for k, j in out_at.get(i, ()):
            body.append(f"  y{k}[{j}] = t{i};")
    while cur < nseg:
        yield nops[cur], "\n".join([*defs, f"{head[0]}{cur}{head[1]}", "{", *body, "}"])
        cur, body, local, defs = cur + 1, [], {}, []


def _output_places(prog: Program):
    """``{node: [(output, element), ...]}``: where each node's value is an output."""
    out_at = {}
    for k, row in enumerate(prog.outputs):
        for j, (kind, v) in enumerate(row):
            if kind == "node":
                out_at.setdefault(v, []).append((k, j))
    return out_at


#: Elements from which a run of a block product's results that are consecutive outputs is one ``memcpy``.
COPY_RUN = 8


def _block_outputs(nodes, out_at, layout, slot, T) -> dict:
    """``{block: statements}``: the copies of each block product's results that are outputs, written
    right after the block runs (its results stay in their workspace slots).  A run of consecutive
    elements of an output from consecutive slots (a matrix of the constants, ``G`` of the contact step:
    thousands) is one ``memcpy``, not a statement an element (straight-line copies of that many
    elements overflow the instruction cache)."""
    per = {}
    for i, places in out_at.items():
        if nodes[i][0] == MATMUL:
            at = layout.at(nodes, slot, i)
            per.setdefault(int(nodes[i][1]), []).extend((k, j, at) for k, j in places)
    out = {}
    for b, copies in per.items():
        copies.sort()
        stmts, s = [], 0
        while s < len(copies):
            k, j, a = copies[s]
            e = s + 1
            while e < len(copies) and copies[e] == (k, j + e - s, a + e - s):
                e += 1
            if e - s >= COPY_RUN:
                stmts.append(f"  __builtin_memcpy(y{k} + {j}, w + {a}, {e - s} * sizeof({T}));")
            else:
                stmts += [f"  y{kk}[{jj}] = w[{aa}];" for kk, jj, aa in copies[s:e]]
            s = e
        out[b] = stmts
    return out


def _segment_sizes(prog: Program, seg, first, nseg, op):
    """Operations per segment (a block product counted as its multiply-add pairs / 16), by which the
    segments are grouped into translation units (``op``: the opcodes, :func:`_arrays`)."""
    isop = (op > CONST) & (op != MATMUL)
    nops = np.bincount(np.asarray(seg, np.int64)[isop], minlength=nseg).tolist()
    for i, b in first.items():
        nops[seg[i]] += int(prog.blocks[b].pairs.sum()) // 16
    return nops


def _segmented(prog: Program, chunk: int):
    """``(prog, seg, slot, nslots, arrays)`` (:func:`_chunks`, :func:`_arrays`) of ``prog`` in the
    traced order or in that of :func:`schedule`, whichever moves fewer values through the workspace."""
    arrays = _arrays(prog)
    seg, last = _segments(prog, chunk, arrays)
    again = schedule(prog)
    arrays2 = _arrays(again)
    seg2, last2 = _segments(again, chunk, arrays2)
    if _traffic(again, seg2, last2, arrays2) < _traffic(prog, seg, last, arrays):
        prog, seg, last, arrays = again, seg2, last2, arrays2
    seg = seg.tolist()
    return (prog, seg, *_slots(seg, last), arrays)


def _inlined(nodes, seg, s, slot, out_at) -> set:
    """The nodes of segment ``s`` written inline into their user's expression."""
    # A value used exactly once, by an operation of its own segment, and neither an output nor
    # passed to a later segment is written inline into its user's expression (fully
    # parenthesised, so the same operations round the same way): fewer declarations for the
    # C front end to parse and fewer names for its SSA passes.  A value not passed on (not in
    # ``slot``) has all its uses in its own segment: counting them there is enough, segment by
    # segment as the segments are written (``seg`` grows with the node's index).
    lo, hi = bisect_left(seg, s), bisect_right(seg, s)
    uses = {}
    for op, x, y in nodes[lo:hi]:
        if CONST < op != MATMUL:
            uses[x] = uses.get(x, 0) + 1
            if y >= 0:
                uses[y] = uses.get(y, 0) + 1
    return {i for i, n in uses.items() if n == 1 and lo <= i < hi and CONST < nodes[i][0] != MATMUL
            and i not in slot and i not in out_at}


def _tail(prog: Program, T: str, hoist) -> list:
    """The driver's statements writing the outputs that are inputs or constants (the constants
    appended to ``hoist`` instead when it is a list; a run of :data:`COPY_RUN` or more zeros, ``+0.0``,
    one ``memset``: the loop state of an iterative kernel starts with thousands)."""
    nodes, tail = prog.nodes, []
    for k, row in enumerate(prog.outputs):
        zeros = []
        for j, (kind, v) in enumerate(row):
            if kind == "const" and hoist is None and v == 0.0 and math.copysign(1.0, v) > 0.0:
                zeros.append(j)
            elif kind == "const" and hoist is not None:
                hoist.append((k, j, v))
            elif kind == "const":
                tail.append(f"  y{k}[{j}] = {_lit(v) if T == 'double' else f'(sd_vd){{0}} + {_lit(v)}'};")
            elif nodes[v][0] == INPUT:
                tail.append(f"  y{k}[{j}] = x{int(nodes[v][1])}[{int(nodes[v][2])}];")
        for a, b in _spans(zeros):
            if b - a >= COPY_RUN:
                tail.append(f"  __builtin_memset(y{k} + {a}, 0, {b - a} * sizeof({T}));")
            else:
                tail += [f"  y{k}[{j}] = {'0.0' if T == 'double' else '(sd_vd){0}'};" for j in range(a, b)]
    return tail


def _spans(xs):
    """``[(a, b)]``: the increasing integers ``xs`` cut into runs ``a, a + 1, ..., b - 1``."""
    out = []
    for x in xs:
        if out and out[-1][1] == x:
            out[-1][1] = x + 1
        else:
            out.append([x, x + 1])
    return [tuple(r) for r in out]


def _expression(op, x, y, fn, T, nodes, ref) -> str:
    """The C expression of operation ``op`` on the operands ``x``, ``y`` (``ref(z)`` names operand
    ``z``, first ``x`` then ``y``) on type ``T``, the functions named by ``fn``."""
    if op == NEG:
        return f"-{ref(x)}"
    if op in (ADD, SUB, MUL, DIV):
        return f"{ref(x)} {_SYM[op]} {ref(y)}"
    if op in (SIN, COS, SQRT):
        return f"{fn[op]}({ref(x)})"
    if op in (ATAN2, COPYSIGN):
        # a constant operand of a vector function is broadcast explicitly (arithmetic does it implicitly)
        a, b = (ref(z) if nodes[z][0] != CONST or T == "double" else f"((sd_vd){{0}} + {ref(z)})" for z in (x, y))
        return f"{fn[op]}({a}, {b})"
    raise ValueError(f"unknown opcode {op}")                # pragma: no cover
