"""C code of a large :class:`~sparsedyn.symbolic.ir.Program` as loops over tables (the ``loops`` code
shape of :mod:`.cemit`): statements on one workspace, blocks of statements that repeat in a row
written once as a C loop, their slot numbers affine in the iteration or read from tables."""

from __future__ import annotations

import re

from ..symbolic.ir import CONST, INPUT, MATMUL, NEG, Program
from .emit_common import _SCALAR_FNS, _SYM, _lit, _sizes

__all__ = ["statement_shapes"]

#: Operations of one statement of :func:`_statements` at most: a longer expression (a long dot
#: product) is cut into statements of this size, whose shapes then repeat, whatever its length.
_MAX_INLINE = 8
_PLUS_MINUS = re.compile(r" [+-] ")      # the binary additions of a statement's template
#: Longest repeated block of statements :func:`_blocks` looks for.
_MAX_PERIOD = 48
#: Columns of a block product's row that one pass over the row's entries sums in registers
#: (:func:`_block_lines`), where a pass per entry stores and reloads the whole row.
_SUMS = 16


def _statements(prog: Program, fn: dict):
    """The program as statements ``w[out] = expression of w[leaf]...``: one per operation whose
    value is used more than once or is an output, or that would make its user's expression longer
    than :data:`_MAX_INLINE` operations (a value used once is written inline, fully parenthesised).

    Returns ``(stmts, slot, nslots, consts, cslot)``: ``stmts`` a list of ``(template, out slot,
    leaf slots, operations)`` (``template``: the C expression with ``@`` for each leaf, in order),
    ``slot[i]`` the value slot of node ``i`` (the inputs first, argument by argument, then the
    constants, then the statements), ``consts`` the constant values in slot order, ``cslot`` the
    slot of each constant (by its ``float.hex()``)."""
    slot, consts, cslot, state = _statements_start(prog)
    stmts = list(_statement_iter(prog, fn, slot, cslot, state))
    return stmts, slot, state[0], consts, cslot


def _statements_start(prog: Program):
    """``(slot, consts, cslot, state)`` of :func:`_statements` before its statements: the slots of
    the inputs and constants, ``state[0]`` the first slot of a statement."""
    nodes = prog.nodes
    off, base = [], 0
    for n in _sizes(prog.input_shapes):
        off.append(base)
        base += n
    slot = [-1] * len(nodes)
    consts, cslot = [], {}
    out_consts = [v for row in prog.outputs for kind, v in row if kind == "const"] + ([0.0] if prog.blocks else [])
    for i, (op, x, y) in enumerate(nodes):
        if op == INPUT:
            slot[i] = off[int(x)] + int(y)
    for v in [x for op, x, _ in nodes if op == CONST] + out_consts:
        key = float(v).hex()
        if key not in cslot:
            cslot[key] = base + len(consts)
            consts.append(float(v))
    for i, (op, x, y) in enumerate(nodes):
        if op == CONST:
            slot[i] = cslot[float(x).hex()]
    return slot, consts, cslot, [base + len(consts)]


def _statement_iter(prog, fn, slot, cslot, state):
    """The statements of :func:`_statements`, one at a time (``slot`` filled as they come, from
    ``state[0]``, the next free slot, which is kept up to date)."""
    nodes = prog.nodes
    uses = [0] * len(nodes)
    for op, x, y in nodes:
        if op > CONST and op != MATMUL:
            uses[x] += 1
            if y >= 0:
                uses[y] += 1
    for b in prog.blocks:               # a block reads its operands from their slots
        for a in b.operands():
            uses[a] += 2
    outs = {v for row in prog.outputs for kind, v in row if kind == "node"}
    nxt = state[0]
    expr = {}                           # inlined node -> (template, leaves, operations)

    def leaf(a):
        e = expr.pop(a, None)
        return ("@", [slot[a]], 0) if e is None else ("(" + e[0] + ")", e[1], e[2])

    placed = {}                         # block -> its statement
    for i, (op, x, y) in enumerate(nodes):
        if op <= CONST:
            continue
        if op == MATMUL:
            if x not in placed:
                placed[x] = _block_statement(prog.blocks[x], x, nxt, slot, cslot[float(0).hex()])
                nxt = state[0] = placed[x][2][-1]
                yield placed[x]
            slot[i] = placed[x][2][2] + y
            continue
        tx, lx, nx = leaf(x)
        if op == NEG:
            t, lv, n = "-" + tx, lx, nx + 1
        else:
            ty, ly, ny = leaf(y) if y >= 0 else ("", [], 0)
            if op in _SYM:
                t = f"{tx} {_SYM[op]} {ty}"
            elif y >= 0:
                t = f"{fn[op]}({tx}, {ty})"
            else:
                t = f"{fn[op]}({tx})"
            lv, n = lx + ly, nx + ny + 1
        if uses[i] == 1 and i not in outs and n < _MAX_INLINE:
            expr[i] = (t, lv, n)
        else:
            slot[i] = nxt
            nxt = state[0] = nxt + 1
            yield t, slot[i], lv, n


def statement_shapes(prog: Program, limit: int | None = None) -> int:
    """The number of distinct statement shapes of ``prog`` (:func:`_statements`; shapes that differ in
    the signs of additions alone count once, as :func:`_loop_functions` folds them into one loop),
    kept on the program (a property of its nodes alone).  With a ``limit``, ``limit + 1`` as soon as
    that many are found (a humanoid's aba_derivatives passes 64 within its first third)."""
    n = getattr(prog, "_statement_shapes", None)
    if n is not None:
        return n if limit is None else min(n, limit + 1)
    shapes, stop = set(), None if limit is None else limit + 1
    if stop is not None and getattr(prog, "_statement_shapes_from", stop + 1) <= stop:
        return stop
    slot, _, cslot, state = _statements_start(prog)
    for t, _, _, _ in _statement_iter(prog, _SCALAR_FNS, slot, cslot, state):
        if t is not None:
            shapes.add(_PLUS_MINUS.sub(" + ", t))
            if len(shapes) == stop:
                prog._statement_shapes_from = stop          # at least that many
                return stop
    prog._statement_shapes = len(shapes)
    return len(shapes)


def _block_statement(block, b, base, slot, zero):
    """The statement of block product ``b`` (``(None, b, (abase, bbase, cbase, end), (A slots, B slots,
    (n, k, m), rows, cols))``): the entries of ``A`` (n, k) that are not structural zeros, row by row, gathered
    at ``abase`` (``rows`` (n + 1,) where each row's start, ``cols`` their columns; a row of zeros keeps
    one, the slot ``zero`` of ``0.0``), ``B`` (k, m) at ``bbase`` (a structural zero reads ``zero``),
    ``C`` (n, m) at ``cbase``, the workspace's slots in use up to ``end``."""
    (n, k), m = block.A.shape, block.B.shape[1]
    sa, rows, cols = [], [0], []
    for row in block.A.tolist():
        kept = [(l, slot[a]) for l, a in enumerate(row) if a >= 0] or [(0, zero)]
        cols += [l for l, _ in kept]
        sa += [x for _, x in kept]
        rows.append(len(sa))
    sb = [slot[a] if a >= 0 else zero for a in block.B.reshape(-1).tolist()]
    abase, bbase = base, base + len(sa)
    cbase = bbase + k * m
    return None, b, (abase, bbase, cbase, cbase + n * m), (sa, sb, (n, k, m), rows, cols)


def _block_lines(stmt, name, T):
    """``(lines, size)``: the C code of a block statement (:func:`_block_statement`): the gathers,
    then per row of ``A`` over its entries that are not structural zeros (compressed rows, as the
    unrolled shape's :mod:`.emit_blocks`), ``C[i, :] = A[i, l0] B[l0, :]`` and ``C[i, :] = C[i, :] +
    A[i, l] B[l, :]`` for its next ``l``: every element summed in ``l`` order, the first product first
    (the products by structural zeros left out add ``+-0``: the same value where the operands are
    finite), a group of columns at a time in registers (:func:`_row_sums`).  The product is a function
    of its own, which GCC vectorizes along the rows (``-O1`` alone does not): each element still sees
    the same operations in the same order, as ``-ffp-contract=off`` forbids fusing them."""
    _, _, (abase, bbase, cbase, _), (sa, sb, (n, k, m), rows, cols) = stmt
    W = _SUMS if T == "double" else _SUMS // 4          # (a batch's elements are vectors already)
    fn = "\n".join([
        f"static void {name}(const {T} *restrict a, const {T} *restrict b, {T} *restrict c);",
        "#if defined(__GNUC__) && !defined(__clang__)",
        "#pragma GCC push_options",
        '#pragma GCC optimize("tree-vectorize")',
        "#endif",
        f"static void {name}(const {T} *restrict a, const {T} *restrict b, {T} *restrict c)",
        "{",
        f"  for (int i = 0; i < {n}; i++, c += {m}) {{",
        f"    const int p0 = {name}_p[i], e = {name}_p[i + 1];",
        *_row_sums(name, T, 0, m - m % W, W), *_row_sums(name, T, m - m % W, m, m % W),
        "  }", "}",
        "#if defined(__GNUC__) && !defined(__clang__)",
        "#pragma GCC pop_options",
        "#endif"])
    nnz = len(sa)
    lines = [f"static const int {name}_a[{nnz}] = {{{','.join(map(str, sa))}}};",
             f"static const int {name}_b[{k * m}] = {{{','.join(map(str, sb))}}};",
             f"static const int {name}_p[{n + 1}] = {{{','.join(map(str, rows))}}};",
             f"static const int {name}_l[{nnz}] = {{{','.join(str(l * m) for l in cols)}}};", fn,
             f"  for (int e = 0; e < {nnz}; e++) w[{abase} + e] = w[{name}_a[e]];",
             f"  for (int e = 0; e < {k * m}; e++) w[{bbase} + e] = w[{name}_b[e]];",
             f"  {name}(w + {abase}, w + {bbase}, w + {cbase});"]
    return lines, (2 * nnz + k * m + n) // 16 + 16


def _row_sums(name, T, j0, j1, W):
    """The C lines of :func:`_block_lines`' product on the columns ``j0 .. j1`` of a row, ``W`` at a
    time (a whole number of ``W``), each group summed over the row's entries in ``W`` registers and
    stored once: a trip count the compiler knows, so the sums stay in registers."""
    if j1 <= j0:
        return []
    return [f"    for (int j = {j0}; j < {j1}; j += {W}) {{",
            f"      {T} s[{W}];",
            f"      const {T} *restrict r = b + {name}_l[p0] + j;",
            f"      for (int t = 0; t < {W}; t++) s[t] = a[p0] * r[t];",
            "      for (int p = p0 + 1; p < e; p++) {",
            f"        const {T} x = a[p];",
            f"        r = b + {name}_l[p] + j;",
            f"        for (int t = 0; t < {W}; t++) s[t] = s[t] + x * r[t];",
            "      }",
            f"      for (int t = 0; t < {W}; t++) c[j + t] = s[t];",
            "    }"]


def _blocks(shapes):
    """Cover the list ``shapes`` (one hashable per statement) with ``(start, period, repeats)``: a
    block of ``period`` consecutive statements repeated ``repeats`` times in a row (greedy, the
    longest cover first), or a single statement (``period = repeats = 1``)."""
    n = len(shapes)
    out, p = [], 0
    while p < n:
        best = (1, 1)
        for k in range(1, min(_MAX_PERIOD, (n - p) // 2) + 1):
            if shapes[p + k] != shapes[p] or shapes[p + k:p + 2 * k] != shapes[p:p + k]:
                continue
            r = 2
            while p + (r + 1) * k <= n and shapes[p + r * k:p + (r + 1) * k] == shapes[p:p + k]:
                r += 1
            if r * k > best[0] * best[1]:
                best = (k, r)
        out.append((p,) + best)
        p += best[0] * best[1]
    return out


def _loop_functions(prog: Program, cname: str, T: str, fn: dict, chunk: int):
    """:func:`_functions`' counterpart for large programs: loops over tables.

    Every value used more than once lives in one slot of the workspace ``w`` (the inputs and
    the constants are copied there first), and the program is a list of statements
    ``w[out] = expression of w[leaf]...`` (:func:`_statements`).  A block of statements whose
    expressions repeat, the same block over and over in a row (one body after the other, one
    column of a matrix product after the other), becomes one C loop; the slot numbers of its
    ``repeats`` copies are affine in the iteration (``b + j * s``) or read from a table of
    integers.  The code's size then grows with the number of distinct blocks, not with the
    program's, and the model's numbers are data (the constants' table).  The operations, and
    so every rounding, are those of the unrolled code.
    """
    stmts, slot, nws, consts, cslot = _statements(prog, fn)
    shapes = {}
    # Blocks are found up to the signs of additions: ``x - y`` is ``x + s * y`` with ``s = -1``
    # exactly (the product by +-1 and the sum round once, as the difference does), so statements
    # that differ in signs alone (the products of a matrix with signed entries) share a loop.
    sid = [shapes.setdefault(_PLUS_MINUS.sub(" + ", t) if t is not None else ("block", o), len(shapes))
           for t, o, _, _ in stmts]
    optr = "double" if T == "double" else "sd_vd"
    funcs, names, cur, size = [], [], [], 0

    def flush():
        nonlocal cur, size
        if cur:
            name = f"{cname}_{len(names)}"
            names.append(name)
            funcs.append((size, "\n".join([*[c for c in cur if c.startswith("static")],
                                           f"SD_HIDDEN void {name}({optr} *restrict w)", "{",
                                           *[c for c in cur if not c.startswith("static")], "}"])))
        cur, size = [], 0

    for b, (p, k, r) in enumerate(_blocks(sid)):
        if r == 1 and stmts[p][0] is None:
            lines, n = _block_lines(stmts[p], f"{cname}_m{b}", optr)
            cur += lines
            size += n
        elif r == 1:
            t, o, lv, n = stmts[p]
            cur.append(f"  w[{o}] = {_fill(t, lv)};")
            size += n
        else:
            lines, n = _loop(stmts, p, k, r, f"{cname}_t{b}")
            cur += lines
            size += n
        if size >= chunk:
            flush()
    flush()
    return funcs, _driver(prog, cname, T, names, consts, slot, cslot), max(nws, 1)


def _fill(template, idx):
    """``template`` with its ``@`` replaced by ``w[idx[0]]``, ``w[idx[1]]``..."""
    parts = template.split("@")
    return "".join(p + (f"w[{idx[k]}]" if k < len(idx) else "") for k, p in enumerate(parts))


def _loop(stmts, p, k, r, table_name):
    """``(lines, size)``: the C loop of the block of ``k`` statements from ``stmts[p]`` repeated
    ``r`` times, its slots affine in ``j`` where they are, else read from the table
    ``table_name`` (declared before the loop), as are the signs of additions that differ."""
    cols = []                   # per statement: the out slot's and the leaves' columns over j
    for s in range(k):
        cols.append([[stmts[p + j * k + s][1] for j in range(r)]]
                    + [[stmts[p + j * k + s][2][m] for j in range(r)] for m in range(len(stmts[p + s][2]))])
    table, body = [], []
    for s in range(k):
        idx = []
        for col in cols[s]:
            d = col[1] - col[0]
            if all(col[j + 1] - col[j] == d for j in range(r - 1)):
                idx.append(f"{col[0]}" if d == 0 else f"{col[0]} + j" if d == 1 else f"{col[0]} + j * {d}")
            else:
                idx.append(f"I[{len(table)}]")
                table.append(col)
        t = stmts[p + s][0]
        signs = list(zip(*(_PLUS_MINUS.findall(stmts[p + j * k + s][0]) for j in range(r))))
        if any(len(set(col)) > 1 for col in signs):
            parts = _PLUS_MINUS.split(t)
            t = parts[0]
            for col, part in zip(signs, parts[1:]):
                if len(set(col)) == 1:
                    t += col[0] + part
                else:
                    t += f" + (double)I[{len(table)}] * " + part
                    table.append([1 if c == " + " else -1 for c in col])
        body.append(f"    w[{idx[0]}] = {_fill(t, idx[1:])};")
    lines, head = [], [f"  for (int j = 0; j < {r}; j++) {{"]
    if table:
        m = len(table)
        data = ",".join(str(table[c][j]) for j in range(r) for c in range(m))
        lines.append(f"static const int {table_name}[{r * m}] = {{{data}}};")
        head.append(f"    const int *I = {table_name} + j * {m};")
    return lines + head + body + ["  }"], sum(stmts[p + s][3] for s in range(k)) + len(table) * r // 16


def _driver(prog, cname, T, names, consts, slot, cslot) -> str:
    """The driver ``{cname}`` of the loop functions ``names``: the inputs and the constants copied
    into the workspace, the functions run, the outputs gathered from their slots."""
    nin, nout = len(prog.input_shapes), len(prog.output_shapes)
    ptr = "const double" if T == "double" else "const sd_vd"
    optr = "double" if T == "double" else "sd_vd"
    params = ", ".join([f"{ptr} *restrict x{k}" for k in range(nin)] + [f"{optr} *restrict y{k}" for k in range(nout)]
                       + [f"{optr} *restrict w"])
    drv = [f"SD_HIDDEN void {n}({optr} *restrict w);" for n in names]
    if consts:
        drv.append(f"static const double {cname}_c[{len(consts)}] = {{{','.join(_lit(c) for c in consts)}}};")
    outs = []
    for k, row in enumerate(prog.outputs):
        where = [slot[v] if kind == "node" else cslot[float(v).hex()] for kind, v in row]
        outs.append(where)
    for k, where in enumerate(outs):
        if where:
            drv.append(f"static const int {cname}_o{k}[{len(where)}] = {{{','.join(map(str, where))}}};")
    drv += [f"static void {cname}({params})", "{"]
    base = 0
    for k, n in enumerate(_sizes(prog.input_shapes)):
        drv.append(f"  for (long e = 0; e < {n}; e++) w[{base} + e] = x{k}[e];")
        base += n
    if consts:
        cv = f"{cname}_c[e]" if T == "double" else f"(sd_vd){{0}} + {cname}_c[e]"
        drv.append(f"  for (long e = 0; e < {len(consts)}; e++) w[{base} + e] = {cv};")
    drv += [f"  {n}(w);" for n in names]
    for k, where in enumerate(outs):
        if where:
            drv.append(f"  for (long e = 0; e < {len(where)}; e++) y{k}[e] = w[{cname}_o{k}[e]];")
    drv.append("}")
    return "\n".join(drv)
