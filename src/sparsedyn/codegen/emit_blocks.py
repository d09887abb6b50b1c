"""Dense block products (:meth:`~sparsedyn.symbolic.ir.Graph.matmul`) inside straight-line code (the
``unrolled`` code shape of :mod:`.cemit`, :mod:`.emit_unrolled`).

A block product starts a segment of its own: its operands are then values of earlier segments, in
their workspace slots, and it runs as a loop at the start of that segment.  Its result ``C`` (n, m)
lives in a region of the workspace of its own, after the reused slots, which the ``MATMUL`` nodes
read like values of an earlier segment.  Layout of that fixed region (:class:`Layout`): a slot of
``0.0`` (the structural zeros of ``B``), a slot per input or constant operand (copied there before
the product), each block's ``C``, then one scratch area where ``B`` is gathered (k, m) before each
product (a ``B`` whose rows lie in consecutive slots already is read there).

The product runs row by row over the entries of ``A`` that are not structural zeros (compressed
rows): ``C[i, j] = A[i, l0] B[l0, j] + A[i, l1] B[l1, j] + ...``, every element summing its products
in ``l`` order, the first first (the definition of :mod:`sparsedyn.symbolic.block`), plus the
products by the structural zeros of ``B``, which add ``+-0`` (the same value where the operands are
finite, the sign of a zero sum aside).  It runs over all rows for one group of columns, then the next
group (a 96-column ``B`` then stays in the first level cache a group at a time: it is not read from
the second for every row).  A single state's product takes ``SD_W`` columns at a time
(a vector of the row of ``B``, the sum in a register: a row of ``C`` summed in memory waits on its
own stores); a batch's elements are vectors already.  A tree's ``H^-1 dtau/dx`` so multiplied
compiles in half the time of its unrolled code.

A product by fewer columns than a vector's lanes (a matrix times a vector: the contact solver's
x-step) whose ``A`` has no structural zero instead sums rows side by side (:func:`_rows_product`):
a padded vector per row would wait on its own chain of additions with most lanes idle.  It computes
every row, also those no output reads, where most are read (:data:`_ROWS_NEEDED`).  Where ``A``
is one input's matrix (the loop state's inverse) it is read there, not copied to the workspace.
A matrix that several such products read (an input's, or the whole result of an earlier block: the
contact solver's polish reads ``G`` and its masked inverse dozens of times each) is transposed once
into the workspace, and those products sum its columns (:func:`_columns_product`): the same sums in
the same order, without the transposes in registers of :func:`_lanes_product`, which took more
instructions than the products themselves.  A product by a vector whose matrix is itself a transpose
(the contact solver's ``Wt^T r``: an input's or an earlier block's result's) reads those columns where
they lie, rows of the matrix transposed, with no table of slots (a gather through one took twice the
time of the product by ``Wt`` itself).
"""

from __future__ import annotations

import numpy as np

from ..symbolic.ir import CONST, INPUT, MATMUL
from .emit_bounds import Bounds
from .emit_common import _lit

__all__ = []


#: Doubles of the vectors a single state's block product sums in (``sd_v4u``), and the most sums
#: (registers) one pass over a row of ``A`` keeps.
_LANES, _GROUP = 4, 8
#: Scalar sums one pass of a product by a few columns keeps (:func:`_rows_product`): as many chains
#: in flight as registers allow (16 of SSE/AVX, with the operands' two).
_ROW_SUMS = 12
#: The fraction of a product's rows that some output must need for :func:`_rows_product`, which
#: computes every row: the rows of a velocity ``G lambda`` of which only the tangential ones are read
#: (two of three) cost a third more arithmetic there, against the general loop's copy of ``A`` to
#: the workspace and one chain of sums per row.
_ROWS_NEEDED = 0.5


def padded(T, m) -> int:
    """The row stride of ``B`` and ``C`` (``m`` columns): a multiple of :data:`_LANES` for a single
    state (``T`` ``double``), ``m`` for a batch (its elements are vectors already)."""
    return -(-m // _LANES) * _LANES if T == "double" else m


class Layout:
    """The workspace slots of the block products of ``prog`` (element type ``T``) from ``base`` (the
    first slot after the reused ones): ``zero``, ``copy`` (operand node -> slot, inputs and
    constants), ``cbase`` and ``stride`` (per block), ``scratch`` and ``end`` (the workspace's
    size)."""

    def __init__(self, prog, base, T):
        nodes = prog.nodes
        self.zero = base
        self.copy = {}
        nxt = base + 1
        self.operands = [b.operands() for b in prog.blocks]
        for ops in self.operands:
            for a in ops:
                if nodes[a][0] <= CONST and a not in self.copy:
                    self.copy[a] = nxt
                    nxt += 1
        self.cbase, self.stride = [], []
        self.columns = [b.B.shape[1] for b in prog.blocks]
        for b in prog.blocks:
            self.stride.append(padded(T, b.B.shape[1]))
            self.cbase.append(nxt)
            nxt += b.A.shape[0] * self.stride[-1]
        self.scratch = nxt
        nxt += max((b.B.shape[0] * mp for b, mp in zip(prog.blocks, self.stride)), default=0)
        # the matrices read by several products by a vector: each transposed once into a region of
        # its own (:func:`_columns_product`), by the first product that reads it (in the order they run)
        self.source = [_column_source(prog, b, T) for b in range(len(prog.blocks))]
        uses = {}
        for key in self.source:
            uses[key] = uses.get(key, 0) + 1
        self.transposed, self.made = {}, set()
        for b, key in enumerate(self.source):
            if key is not None and key[0] in _IN_PLACE:                 # a transpose read where it lies
                self.transposed.setdefault(key, None)
            elif key is not None and uses[key] > 1 and key not in self.transposed:
                self.transposed[key] = nxt
                nxt += prog.blocks[b].A.size
        self.end = nxt

    def at(self, nodes, slot, a):
        """The workspace slot holding node ``a``'s value (``-1``: the structural zero)."""
        if a < 0:
            return self.zero
        op, x, y = nodes[a]
        if op == MATMUL:
            r, c = divmod(y, self.columns[x])
            return self.cbase[x] + r * self.stride[x] + c
        if op <= CONST:
            return self.copy[a]
        return slot[a]


def block_call(prog, b, layout, slot, name, T):
    """``(definitions, statements)``: the C of block product ``b`` of ``prog`` named ``name`` (its
    tables and functions, file scope) and the statements of its segment that run it (the inputs and
    constants it reads copied to their slots, the zero slot written)."""
    nodes, blk = prog.nodes, prog.blocks[b]
    (n, k), m = blk.A.shape, blk.B.shape[1]
    mp = layout.stride[b]
    at = lambda a: layout.at(nodes, slot, int(a))              # noqa: E731
    ptr, ai, al = [0], [], []
    for i in range(n):
        if blk.pairs[i].any():                  # a row no output needs is not computed
            for l in range(k):
                if blk.A[i, l] >= 0:
                    ai.append(at(blk.A[i, l]))
                    al.append(l * mp)
        ptr.append(len(ai))
    bi = [at(blk.B[l, j]) if j < m else layout.zero for l in range(k) for j in range(mp)]
    zero = "0.0" if T == "double" else "(sd_vd){0}"
    stmts = [f"  w[{layout.zero}] = {zero};"]
    for a in layout.operands[b]:
        op, x, y = nodes[a]
        if op == CONST:
            stmts.append(f"  w[{layout.copy[a]}] = {_lit(x) if T == 'double' else f'(sd_vd){{0}} + {_lit(x)}'};")
    bd = Bounds(blk, at, name, T)
    if layout.source[b] in layout.transposed:
        return _columns_call(prog, b, layout, at, name, stmts, bd)
    if T == "double" and m < _LANES and (blk.A >= 0).all() and _ROWS_NEEDED * n <= blk.pairs.any(1).sum():
        # an A that is one input's elements row after row (the loop state's matrix) is read there
        src = _input_matrix(nodes, blk.A)
        skip = set(blk.A.reshape(-1).tolist()) - set(blk.B.reshape(-1).tolist()) if src else set()
        stmts += _input_copies(nodes, layout, b, skip)
        stmts.append(f"  {name}(w, x{src[0]} + {src[1]});" if src else f"  {name}(w, 0);")
        return _rows_product(blk, at, layout, b, name, src is not None, bd), stmts
    stmts += _input_copies(nodes, layout, b)
    stmts.append(f"  {name}(w);")
    return _general_product(blk, name, layout, b, T, (ptr, ai, al, bi), bd), stmts


def _general_product(blk, name, layout, b, T, tables, bd):
    """The C (file scope) of block ``b``'s general loop (module docstring): ``tables`` its compressed
    rows ``(ptr, ai, al, bi)``.  A product ``X^T X`` (``A`` the transpose of ``B``, node for node, every
    row read: the contact solver's ``L^-T L^-1``, ``G = Z Z^T``) sums only the chunks of four columns on
    or left of each row's diagonal (a pass per band of four rows) and copies the rest from its mirror:
    ``C[j, i]`` is ``C[i, j]``'s products with their factors swapped, summed in the same order (bit for
    bit; the work above the diagonal, about half, is not done), and gathers only the columns of ``B``
    its passes read.  ``bd``: its run-time bounds (:class:`~.emit_bounds.Bounds`): the rows, terms and
    groups of columns of the slots in use."""
    (n, k), m = blk.A.shape, blk.B.shape[1]
    mp = layout.stride[b]
    ptr, ai, al, bi = tables
    gram = n == m and blk.A.shape == blk.B.T.shape and (blk.A == blk.B.T).all() and blk.pairs.any(1).all()
    # a B whose padded rows lie in consecutive slots (an earlier product's whole result, an input copied
    # in one run) is read where it lies: no table, no gathering copy (each as large as B); one whose
    # slots step evenly along its rows and columns (a transposed result) is gathered without a table
    run = bi[0] if bi and all(x == bi[0] + e for e, x in enumerate(bi)) else None
    even = None if run is not None else _even(bi, k, m, mp, layout.zero)
    table = lambda v: ",".join(map(str, v)) or "0"             # noqa: E731
    step = _LANES if T == "double" else 1
    body = []
    chunks = list(range(0, mp, step))
    split = bd.on and bd.m != str(m)                    # columns bounded: the group's live chunks chosen
    if split:
        body.append(f"  const int {name}_nch = ({bd.m} + {step - 1}) / {step};")
    if bd.on and bd.k != str(k):                        # each row's terms in use, found once for all passes
        body += [f"  int {name}_e[{n}];", f"  for (int i = 0; i < {bd.n}; i++) {{",
                 f"    int e = {name}_p[i + 1];",
                 f"    while (e > {name}_p[i] && {name}_l[e - 1] >= {bd.k} * {mp}) e--;",
                 f"    {name}_e[i] = e;", "  }"]
    # X^T X with the same rows and columns in use (or none bounded): a pass per band of four rows, over the
    # chunks on or left of its diagonal; else the rows above a group's first column skip it (not group 0)
    bands = gram and T == "double" and (not split or blk.live[0] == blk.live[2])
    # (A[i, l] is then B[l, i], read with its row of B, no table; every row of A whole: rows of B in turn)
    own = ("dense" if (blk.A >= 0).all() else "gram") if bands else None
    for g in range(0, len(chunks), _GROUP):          # a pass over the row's entries per group of sums
        cols = chunks[g:g + _GROUP]
        first = cols[0] if gram and g > 0 and T == "double" else 0     # rows above: mirrored
        # all the rows for one group of columns, then the next group: the group's columns of B stay
        # in the first level cache (all of a 96-column B, 72 kB, is read from the second for every row)
        if bands:
            for c in range(1, len(cols) + 1):        # rows [cols[c - 1], +4) need the group's first c chunks
                if cols[c - 1] < n:
                    top = cols[c - 1] + step if c < len(cols) else n
                    body += _group_pass(name, cols[:c], (cols[c - 1], min(top, n)), bd, (n, k, mp), T, own)
            continue
        if not split:
            body += _group_pass(name, cols, (first, n), bd, (n, k, mp), T)
            continue
        # the chunks of columns in use of this group (a pass summing those alone): one case each
        body.append(f"  switch ({name}_nch - {g} >= {len(cols)} ? {len(cols)} : {name}_nch - {g}) {{")
        for c in range(len(cols), 0, -1):
            body += [f"  case {c}: {{", *_group_pass(name, cols[:c], (first, n), bd, (n, k, mp), T), "  } break;"]
        body.append("  default: break; }")
    if split and not bands:                          # the columns of chunks not in use: zeros
        body.append(f"  for (int i = 0; i < {n}; i++) for (int j = {name}_nch * {step}; j < {mp}; j++) "
                    f"c0[i * {mp} + j] = 0.0;")
    return "\n".join([
        "#ifndef SD_V4U",
        "#define SD_V4U",
        "typedef double sd_v4u __attribute__((vector_size(32), aligned(8)));",
        "#endif",
        f"static const int {name}_p[{n + 1}] = {{{table(ptr)}}};",
        *([f"static const int {name}_a[{max(len(ai), 1)}] = {{{table(ai)}}};"] if own is None else []),
        *([f"static const int {name}_l[{max(len(al), 1)}] = {{{table(al)}}};"]
          if own != "dense" or (bd.on and bd.k != str(k)) else []),
        *([f"static const int {name}_b[{k * mp}] = {{{table(bi)}}};"] if run is None and even is None else []),
        *bd.defs,
        f"static void {name}_mm(const {T} *restrict w, const {T} *restrict b, {T} *restrict c0)",
        "{", *bd.decl, *body, *bd.zero_rows("c0", mp, n, mp), "}",
        f"static void {name}({T} *restrict w)",
        "{", *bd.decl,
        *([f"  {name}_mm(w, w + {run}, w + {layout.cbase[b]});"] if run is not None else
          [*_gather(name, bd.k, m, mp, layout, bi, even, _read_columns(blk, mp) if bands else None),
           f"  {name}_mm(w, w + {layout.scratch}, w + {layout.cbase[b]});"]),
        *([f"  {{ {T} *restrict c = w + {layout.cbase[b]}; for (int i = 0; i < {n}; i++) for (int j = "
           f"{'(i | 3) + 1' if bands else 'i + 1'}; j < {n}; j++) c[i * {mp} + j] = c[j * {mp} + i]; }}"]
          if gram and T == "double" else []),
        "}"])


def _even(bi, k, m, mp, zero):
    """``(first, row step, column step)`` where the gather table ``bi`` (k rows of ``mp`` slots, the
    columns past ``m`` the zero slot ``zero``) is ``first + l row + j column`` at row ``l``, column
    ``j``; else None."""
    first = bi[0]
    row = bi[mp] - first if k > 1 else 0
    col = bi[1] - first if m > 1 else 0
    ok = all(bi[l * mp + j] == (first + l * row + j * col if j < m else zero) for l in range(k) for j in range(mp))
    return (first, row, col) if ok else None


def _read_columns(blk, mp):
    """Per row ``l`` of ``B`` of a product ``X^T X`` summed by bands (:func:`_general_product`), the
    columns its passes read: the chunks up to the last band whose rows ``i`` have ``A[i, l]`` (``X``
    triangular: the chunks on or left of the diagonal of ``B``; the rest is never gathered)."""
    nz = blk.A >= 0
    return [min(mp, _LANES * (int(np.flatnonzero(nz[:, l])[-1]) // _LANES + 1)) if nz[:, l].any() else 0
            for l in range(blk.A.shape[1])]


def _gather(name, rows, m, mp, layout, bi, even, read=None):
    """The C that gathers ``B`` (its first ``rows``, a C expression) into the scratch area: by the table
    ``{name}_b`` (``bi``; ``read``, where given: the leading columns of each row read, the rest left
    as they are), or (``even``: :func:`_even`'s steps) by them, no table read."""
    if even is None and read is not None and min(read) < mp:
        return [f"  {{ static const int r[{len(read)}] = {{{','.join(map(str, read))}}};",
                f"    for (int l = 0; l < {rows}; l++) for (int j = 0; j < r[l]; j++) "
                f"w[{layout.scratch} + l * {mp} + j] = w[{name}_b[l * {mp} + j]]; }}"]
    if even is None:
        return [f"  for (int e = 0; e < {rows} * {mp}; e++) w[{layout.scratch} + e] = w[{name}_b[e]];"]
    first, row, col = even
    pad = f" for (int j = {m}; j < {mp}; j++) w[{layout.scratch} + l * {mp} + j] = w[{layout.zero}];" if mp > m else ""
    return [f"  for (int l = 0; l < {rows}; l++) {{ for (int j = 0; j < {m}; j++) "
            f"w[{layout.scratch} + l * {mp} + j] = w[{first} + l * {row} + j * {col}];{pad} }}"]


def _group_pass(name, cols, rows, bd, sizes, T, own=None):
    """The C of one pass of :func:`_general_product` over the rows ``rows`` (``(first, end)``; those in
    use: ``bd``) summing the columns of the chunks ``cols`` (offsets).  ``own``: ``A[i, l]`` read as
    ``B[l, i]`` in the row of ``B`` the term reads (a product ``X^T X`` by bands; ``"gram"``), those rows
    one after the other where every row of ``A`` is whole (``"dense"``); else (None) by their tables."""
    n, k, mp = sizes
    V = "sd_v4u" if T == "double" else T
    ld = (lambda o: f"*(const sd_v4u *)(r + {o})") if T == "double" else (lambda o: f"r[{o}]")      # noqa: E731
    st = (lambda o: f"*(sd_v4u *)(c + {o})") if T == "double" else (lambda o: f"c[{o}]")            # noqa: E731
    zero = "".join(f" {st(o)} = ({V}){{0}};" for o in cols) if bd.on else ""
    end = f"{name}_e[i]" if bd.on and bd.k != str(k) else f"{name}_p[i + 1]"
    lo, hi = rows
    top = bd.n if hi == n else str(hi) if not bd.on or bd.n == str(n) else f"({bd.n} < {hi} ? {bd.n} : {hi})"
    return [f"  for (int i = {lo}; i < {top}; i++) {{",
            f"    const int p0 = {name}_p[i], e = {end};",
            f"    {T} *restrict c = c0 + i * {mp};",
            f"    if (p0 == e) {{{zero} continue; }}",
            f"    {{ const {T} *restrict r = {'b' if own == 'dense' else f'b + {name}_l[p0]'}; "
            f"{'double' if T == 'double' else T} x = {f'w[{name}_a[p0]]' if own is None else 'r[i]'};",
            f"      {V} " + ", ".join(f"s{q} = x * {ld(o)}" for q, o in enumerate(cols)) + ";",
            "      for (int p = p0 + 1; p < e; p++) {",
            f"        {f'r = b + {name}_l[p]' if own != 'dense' else f'r += {mp}'}; "
            f"x = {f'w[{name}_a[p]]' if own is None else 'r[i]'};",
            *[f"        s{q} = s{q} + x * {ld(o)};" for q, o in enumerate(cols)],
            "      }",
            *[f"      {st(o)} = s{q};" for q, o in enumerate(cols)], "    }", "  }"]


def _input_copies(nodes, layout, b, skip=()):
    """The statements that copy block ``b``'s operands that are inputs, but those in ``skip``, to their
    slots: a ``memcpy`` per run of consecutive elements of one input into consecutive slots, not one
    statement per element."""
    runs = []                           # [input, first element, first slot, length]
    for a in layout.operands[b]:
        op, x, y = nodes[a]
        if op != INPUT or a in skip:
            continue
        r = runs[-1] if runs else None
        if r is not None and r[0] == int(x) and r[1] + r[3] == int(y) and r[2] + r[3] == layout.copy[a]:
            r[3] += 1
        else:
            runs.append([int(x), int(y), layout.copy[a], 1])
    return [f"  w[{s}] = x{x}[{y}];" if n == 1 else f"  __builtin_memcpy(w + {s}, x{x} + {y}, {n} * sizeof w[0]);"
            for x, y, s, n in runs]


def _input_matrix(nodes, A):
    """``(input, first element)`` where the node ids ``A`` (n, k) are the elements of one input from
    its ``first``, row after row; else ``None``."""
    ids = A.reshape(-1).tolist()
    op, x, y = nodes[ids[0]]
    if op != INPUT or any(tuple(nodes[a]) != (INPUT, x, y + e) for e, a in enumerate(ids)):
        return None
    return int(x), int(y)


def _rows_product(blk, at, layout, b, name, given=False, bd=None):
    """The C of a single state's block product ``name`` whose ``B`` has fewer than :data:`_LANES`
    columns (a matrix times a vector) and whose ``A`` has no structural zero: rows of ``C`` summed
    side by side, one scalar sum per row and column, up to :data:`_ROW_SUMS` at a time (each sum a chain
    of ``k`` additions that waits on itself: several in flight hide the latency that a lane-padded
    vector per row, ``m`` of its lanes used, waits on).  Every element sees the operations of
    :func:`block_call`'s loop in the same order: ``A[i, 0] B[0, j]``, then ``+ A[i, l] B[l, j]``.
    ``given``: ``A`` is read from the input matrix the call passes as ``x``, not from its slots;
    ``bd``: its run-time bounds (:class:`~.emit_bounds.Bounds`; its columns are not bounded)."""
    bd = Bounds(blk, at, name, "none") if bd is None else bd
    (n, k), m = blk.A.shape, blk.B.shape[1]
    mp, cb = layout.stride[b], layout.cbase[b]
    ai = [at(blk.A[i, l]) for i in range(n) for l in range(k)]
    bi = [at(blk.B[l, j]) for l in range(k) for j in range(m)]
    rows = max(1, _ROW_SUMS // m)
    # operands in consecutive slots, row after row, are read in place; ``given``: A is the matrix at ``x``
    dense = [v == list(range(v[0], v[0] + len(v))) for v in (ai, bi)]
    dense[0] = dense[0] or given
    ta = f"x + ({{}}) * {k}" if given else f"w + {ai[0]} + ({{}}) * {k}" if dense[0] else f"{name}_a + ({{}}) * {k}"
    A = (lambda e: f"ra[{e}]") if dense[0] else (lambda e: f"w[ra[{e}]]")       # noqa: E731
    B = (lambda e: f"w[{bi[0]} + {e}]") if dense[1] else (lambda e: f"w[{name}_b[{e}]]")   # noqa: E731

    if m == 1 and n % _LANES == 0 and k % _LANES == 0 and dense[0]:
        return _lanes_product(n, k, mp, cb, ta, B, name, [] if dense[1] else [(name + "_b", bi)], bd)

    def chunk(r, i0):
        """The loop body of ``r`` rows from row ``i0`` (a C expression)."""
        sums = [(q, j) for q in range(r) for j in range(m)]
        s = lambda q, j: f"s{q * m + j}"                                         # noqa: E731
        return [f"    const {'double' if dense[0] else 'int'} *restrict ra = {ta.format(i0)};",
                "    double " + ", ".join(f"{s(q, j)} = {A(q * k)} * {B(j)}" for q, j in sums) + ";",
                f"    for (int l = 1; l < {bd.k}; l++) {{",
                *[f"      {s(q, j)} = {s(q, j)} + {A(f'{q * k} + l')} * {B(f'l * {m} + {j}')};" for q, j in sums],
                "    }",
                *[f"    w[{cb} + (({i0}) + {q}) * {mp} + {j}] = {s(q, j)};" for q, j in sums]]
    full, rest = divmod(n, rows)
    body = []
    if full:                                         # (the rows in use: whole passes, the rest zero)
        top = f"({bd.n} < {full * rows} ? {bd.n} : {full * rows})" if bd.on else full * rows
        body += [f"  for (int i = 0; i < {top}; i += {rows}) {{", *chunk(rows, "i"), "  }"]
    if rest:
        body += [f"  if ({full * rows} < {bd.n}) {{" if bd.on else "  {", *chunk(rest, str(full * rows)), "  }"]
    if bd.on:
        last = f"(({bd.n} + {rows - 1}) / {rows} * {rows} < {n} ? ({bd.n} + {rows - 1}) / {rows} * {rows} : {n})"
        body += bd.zero_rows(f"w + {cb}", mp, n, m, last)
    tables = [f"static const int {name}_{t}[{len(v)}] = {{{','.join(map(str, v))}}};"
              for t, v, d in zip("ab", (ai, bi), dense) if not d]
    return "\n".join([*tables, *bd.defs, f"static void {name}(double *restrict w, const double *restrict x)", "{",
                      *bd.decl, *bd.empty(f"w + {cb}", mp, n, m), *body, "}"])


def _lanes_product(n, k, mp, cb, ta, B, name, tables, bd):
    """:func:`_rows_product` of a dense ``A`` (n, k) in consecutive elements (``ta``: the C of the
    address of row ``{}``) by a vector (``B(e)``: the C of its element ``e``), ``n`` and ``k``
    multiples of :data:`_LANES`: four rows in the lanes of one vector, their 4 x 4 blocks of ``A``
    loaded row by row and transposed in registers, so every lane sums its row's products in ``l``
    order, the first first, as a scalar sum does (bit for bit), with a quarter of the operations.
    ``bd``: the run-time bounds (:class:`~.emit_bounds.Bounds`): passes of rows in use, their terms in
    use to the next multiple of four."""
    def block(g, l):
        """Lines loading rows ``4 g ...`` at columns ``l ... l + 3`` transposed into ``c0 ... c3``."""
        r = [f"*(const sd_v4u *)(ra + {(4 * g + q) * k} + {l})" for q in range(4)]
        return [f"      {{ const sd_v4u r0 = {r[0]}, r1 = {r[1]}, r2 = {r[2]}, r3 = {r[3]};",
                "        const sd_v4u t0 = SD_SHUF4(r0, r1, 0, 4, 2, 6), t1 = SD_SHUF4(r0, r1, 1, 5, 3, 7), "
                "t2 = SD_SHUF4(r2, r3, 0, 4, 2, 6), t3 = SD_SHUF4(r2, r3, 1, 5, 3, 7);",
                "        const sd_v4u c0 = SD_SHUF4(t0, t2, 0, 1, 4, 5), c1 = SD_SHUF4(t1, t3, 0, 1, 4, 5), "
                "c2 = SD_SHUF4(t0, t2, 2, 3, 6, 7), c3 = SD_SHUF4(t1, t3, 2, 3, 6, 7);"]

    body = []
    for i0 in range(0, n, 4 * _LANES):                   # up to four vectors of sums (16 rows) a pass
        groups = range(min(_LANES, (n - i0) // 4))
        body += [f"  if ({i0} < {bd.n}) {{" if bd.on else "  {", f"    const double *restrict ra = {ta.format(i0)};",
                 "    sd_v4u " + ", ".join(f"s{g}" for g in groups) + ";"]
        for first in (True, False):
            l = "0" if first else "l"
            if not first:
                body.append(f"    for (int l = 4; l < {bd.k}; l += 4) {{")
            body.append("    { const double " + ", ".join(f"b{c} = {B(f'{l} + {c}')}" for c in range(4)) + ";")
            for g in groups:
                body += block(g, l)
                body.append(f"        s{g} = " + ("c0 * b0" if first else f"s{g} + c0 * b0") + "; " +
                            " ".join(f"s{g} = s{g} + c{c} * b{c};" for c in range(1, 4)) + " }")
            body.append("    }" + ("" if first else " }"))
        body += [f"    w[{cb} + {(i0 + 4 * g + r) * mp}] = s{g}[{r}];" for g in groups for r in range(4)]
        body.append("  }")
    if bd.on:                                        # the rows after the passes in use
        body += bd.zero_rows(f"w + {cb}", mp, n, 1, f"(({bd.n} + 15) / 16 * 16 < {n} ? ({bd.n} + 15) / 16 * 16 : {n})")
    defs = [f"static const int {t}[{len(v)}] = {{{','.join(map(str, v))}}};" for t, v in tables]
    return "\n".join([*_SHUFFLES, *defs, *bd.defs, f"static void {name}(double *restrict w, const double *restrict x)",
                      "{", *bd.decl, *bd.empty(f"w + {cb}", mp, n, 1), *body, "}"])


#: The vector of four doubles and its two-source shuffle (GCC's and clang's builtins), once per unit.
_SHUFFLES = ("#ifndef SD_V4U", "#define SD_V4U", "typedef double sd_v4u __attribute__((vector_size(32), aligned(8)));",
             "#endif", "#ifndef SD_SHUF4", "#if defined(__clang__)",
             "#define SD_SHUF4(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)", "#else",
             "typedef long long sd_v4i __attribute__((vector_size(32)));",
             "#define SD_SHUF4(a, b, ...) __builtin_shuffle(a, b, (sd_v4i){__VA_ARGS__})", "#endif", "#endif")


#: The kinds of :func:`_column_source` whose columns lie consecutive where ``A`` is (the transpose of
#: an input's matrix or of a block's result): read there, never transposed.
_IN_PLACE = ("xt", "bt")


def _column_source(prog, b, T):
    """The matrix ``A`` of block ``b`` of ``prog`` where it is a product by one vector that
    :func:`_columns_product` can run (``A`` (n, k) without structural zeros, most rows read, ``n`` a
    multiple of :data:`_LANES`) and ``A`` is one input's elements row after row (``("x", input, first
    element)``) or the whole result of an earlier block (``("b", block)``), both with ``k`` a multiple
    of :data:`_LANES` (they are transposed into the workspace), or the transpose of either (``("xt",
    input, first element)``, ``("bt", block)``: the contact solver's ``Wt^T r``, whose columns are
    ``Wt``'s rows, read where they lie); else None."""
    blk, nodes = prog.blocks[b], prog.nodes
    (n, k), m = blk.A.shape, blk.B.shape[1]
    if T != "double" or m != 1 or n % _LANES or not (blk.A >= 0).all() or _ROWS_NEEDED * n > blk.pairs.any(1).sum():
        return None
    for kind, ids in (("", blk.A), ("t", blk.A.T)):
        if kind == "" and k % _LANES:
            continue
        rows, cols = ids.shape
        src = _input_matrix(nodes, ids)
        if src is not None:
            return ("x" + kind,) + src
        op, c, _ = nodes[int(ids[0, 0])]
        if op != MATMUL or prog.blocks[c].A.shape[0] != rows or prog.blocks[c].B.shape[1] != cols:
            continue
        if all(tuple(nodes[a]) == (MATMUL, c, e) for e, a in enumerate(ids.reshape(-1).tolist())):
            return ("b" + kind, c)
    return None


def _transpose(key, n, k, layout):
    """The C statement writing the matrix ``key`` (:func:`_column_source`, (n, k)) transposed, (k, n),
    into its region of the workspace."""
    if key[0] == "x":
        src, stride = f"x{key[1]} + {key[2]}", k
    else:
        src, stride = f"w + {layout.cbase[key[1]]}", layout.stride[key[1]]
    return (f"  {{ const double *restrict a = {src}; double *restrict t = w + {layout.transposed[key]};"
            f" for (int i = 0; i < {n}; i++) for (int l = 0; l < {k}; l++) t[l * {n} + i] = a[i * {stride} + l]; }}")


def _columns_call(prog, b, layout, at, name, stmts, bd):
    """:func:`block_call` of a product by a vector whose matrix is transposed (:func:`_column_source`):
    the first product that reads the matrix (in the order they run) transposes it; a transpose's
    columns are read where they lie (an input's, or an earlier block's result: its row stride)."""
    blk, key = prog.blocks[b], layout.source[b]
    skip = set(blk.A.reshape(-1).tolist()) - set(blk.B.reshape(-1).tolist())
    stmts += _input_copies(prog.nodes, layout, b, skip)
    if key[0] == "xt":
        at_, stride = f"x{key[1]} + {key[2]}", blk.A.shape[0]
    elif key[0] == "bt":
        at_, stride = f"w + {layout.cbase[key[1]]}", layout.stride[key[1]]
    else:
        if key not in layout.made:
            layout.made.add(key)
            stmts.append(_transpose(key, *blk.A.shape, layout))
        at_, stride = f"w + {layout.transposed[key]}", blk.A.shape[0]
    stmts.append(f"  {name}(w, {at_});")
    return _columns_product(blk, at, layout, b, name, stride, bd), stmts


def _columns_product(blk, at, layout, b, name, stride, bd):
    """The C of a single state's product ``A x`` (``A`` (n, k), :func:`_column_source`) from ``A``'s
    transpose at the address ``t`` the call passes, column ``l`` of ``A`` at ``t + l stride``
    (consecutive there), so a vector
    of four rows' sums takes ``A[i:i + 4, l] x[l]`` without the transposes in registers of
    :func:`_lanes_product`, eight such sums a pass; every lane sums its row's products in ``l`` order,
    the first first (bit for bit the same value).  Worth it where several products read one matrix
    (the contact solver's polish: ``G`` and its masked inverse, dozens of times each).  ``bd``: the
    run-time bounds (:class:`~.emit_bounds.Bounds`): passes of rows in use, their terms in use."""
    (n, k) = blk.A.shape
    mp, cb = layout.stride[b], layout.cbase[b]
    bi = [at(blk.B[l, 0]) for l in range(k)]
    dense = bi == list(range(bi[0], bi[0] + k))
    B = (lambda e: f"w[{bi[0]} + {e}]") if dense else (lambda e: f"w[{name}_b[{e}]]")     # noqa: E731
    body = []
    for i0 in range(0, n, 8 * _LANES):                   # up to eight vectors of sums (32 rows) a pass
        groups = range(min(8, (n - i0) // _LANES))
        at_ = lambda l, g: f"*(const sd_v4u *)(t + {l} * {stride} + {i0 + _LANES * g})"      # noqa: E731
        body += [f"  if ({i0} < {bd.n}) {{" if bd.on else "  {", f"    double x = {B(0)};",
                 "    sd_v4u " + ", ".join(f"s{g} = {at_(0, g)} * x" for g in groups) + ";",
                 f"    for (int l = 1; l < {bd.k}; l++) {{", f"      x = {B('l')};",
                 *[f"      s{g} = s{g} + {at_('l', g)} * x;" for g in groups], "    }"]
        body += [f"    w[{cb} + {(i0 + _LANES * g + r) * mp}] = s{g}[{r}];" for g in groups for r in range(_LANES)]
        body.append("  }")
    if bd.on:                                        # the rows after the passes in use
        body += bd.zero_rows(f"w + {cb}", mp, n, 1, f"(({bd.n} + 31) / 32 * 32 < {n} ? ({bd.n} + 31) / 32 * 32 : {n})")
    table = [] if dense else [f"static const int {name}_b[{k}] = {{{','.join(map(str, bi))}}};"]
    return "\n".join([*_SHUFFLES, *table, *bd.defs,
                      f"static void {name}(double *restrict w, const double *restrict t)", "{", *bd.decl,
                      *bd.empty(f"w + {cb}", mp, n, 1), *body, "}"])
