"""Dense block products in the IR: ``A @ B`` as one block, not ``n k m`` scalar operations.

A product of a dense ``n x k`` matrix by a dense ``k x m`` one, traced element by element, puts
``n k m`` multiplications and about as many additions into the straight-line program: the
program, its trace, its C source and the C compiler's time grow with the cube of the size (the
derivatives of forward dynamics on a 100-body chain: 5 million operations, most of them in
``H^-1 dtau/dq``).  :meth:`~sparsedyn.symbolic.ir.Graph.matmul` records the product as a
:class:`Block` instead: the ids of its operands (``A``, ``B``) and one
``MATMUL`` node per element that is not a structural zero; the emitter writes it as a loop
(:mod:`sparsedyn.codegen.emit_loops`), so the program grows with the operands and the result.

The value of an element ``C[i, j]`` is defined as NumPy's object ``@`` computes it: the products
``A[i, l] B[l, j]`` of the pairs where neither factor is a structural zero, summed in ``l`` order,
the first product first.  :func:`expand` writes exactly those operations out (what the
interpreters and differentiation read; a product by the constant ``1.0`` is its other factor, as
the tracer folds it); the compiled loop runs over every ``l`` with the
structural zeros as ``0.0``, which adds ``+-0`` products: the same value wherever the operands
are finite, the sign of a zero sum aside.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ops import ADD, CONST, DIV, MATMUL, MUL, NEG, SUB

__all__ = ["Block", "record", "renumber", "expand", "pairs"]


@dataclass
class Block:
    """A dense block product ``A @ B`` of :meth:`~sparsedyn.symbolic.ir.Graph.matmul`: ``A`` (n, k)
    and ``B`` (k, m) the node ids of the operands (``-1``: a structural zero), ``phase`` the phase it
    was recorded in, ``pairs`` the products of each element (n, m) that are not by a structural
    zero (in a :class:`~sparsedyn.symbolic.ir.Program`, 0 for the elements no output needs)."""

    A: np.ndarray
    B: np.ndarray
    phase: str
    pairs: np.ndarray
    #: The node of the run-time bound of :attr:`live` (``-1``: none).
    bound: int = -1
    #: ``(ra, rk, rm)``: the slot (tuples of ints) of each row of ``A``, row of ``B`` and column of
    #: ``B`` (``-1``: none), or None.  A promise of the code that traced the product: where the
    #: value of node :attr:`bound` is ``b``, the entries of ``A`` and ``B`` in rows or columns of
    #: slots ``>= b`` that meet a slot ``< b`` are zeros, so the compiled loop may skip those slots
    #: (their rows and columns of ``C`` are written zero, the rest equal bit for bit, the sign of a
    #: zero sum aside).  Interpreters and differentiation compute the whole product.
    live: tuple = None

    def unit_pairs(self, nodes) -> np.ndarray:
        """Per element (n, m), the pairs of :attr:`pairs` with a factor of the constant ``1.0`` (node
        ``(CONST, 1.0, -1)`` of ``nodes``): no multiplication (:func:`expand`)."""
        def one(X):
            return np.array([i >= 0 and tuple(nodes[i]) == (CONST, 1.0, -1) for i in X.reshape(-1).tolist()],
                            dtype=bool).reshape(X.shape)
        nza, nzb = self.A >= 0, self.B >= 0
        oa, ob = one(self.A), one(self.B)
        U = oa.astype(float) @ nzb.astype(float) + (nza & ~oa).astype(float) @ ob.astype(float)
        return np.rint(U).astype(np.int64) * (self.pairs > 0)

    def operands(self):
        """The distinct node ids read by the product."""
        ids = np.union1d(self.A.reshape(-1), self.B.reshape(-1))
        if self.bound >= 0:
            ids = np.union1d(ids, [self.bound])
        return [int(i) for i in ids if i >= 0]


def _is_symbol(x):
    """Whether ``x`` is a traced scalar (a :class:`~sparsedyn.symbolic.ir.Sym`: node ``i`` of graph ``g``),
    not a number."""
    return hasattr(x, "g") and hasattr(x, "i")


def _ids(g, X):
    """Node ids (int64, ``X``'s shape) of the entries of an object or number matrix ``X``: a symbol
    its node, a nonzero number a constant node, a structural zero ``-1``."""
    out = []
    for x in X.reshape(-1).tolist():            # a flat list: np.ndenumerate's index tuples cost more
        if _is_symbol(x):
            if x.g is not g:
                raise ValueError("matmul: an operand holds a symbol of another trace")
            out.append(x.i)
        else:
            out.append(g.const(float(x)) if x != 0 else -1)
    return np.array(out, dtype=np.int64).reshape(X.shape)


def pairs(A, B) -> np.ndarray:
    """The products of each element of ``A @ B`` (n, m) that are not structural zeros (``A`` (n, k),
    ``B`` (k, m) matrices of symbols and numbers, or of node ids with ``-1`` for a zero)."""
    za = (A >= 0) if A.dtype == np.int64 else np.vectorize(lambda x: _is_symbol(x) or x != 0, otypes=[bool])(A)
    zb = (B >= 0) if B.dtype == np.int64 else np.vectorize(lambda x: _is_symbol(x) or x != 0, otypes=[bool])(B)
    return np.rint(za.astype(float) @ zb.astype(float)).astype(np.int64)


def record(g, A, B, live=None):
    """:meth:`~sparsedyn.symbolic.ir.Graph.matmul`: the block of ``A @ B`` recorded in ``g``, the
    result an object array (n, m) of ``MATMUL`` symbols and structural zeros.  ``live``: ``(bound,
    ra, rk, rm)`` (:attr:`Block.live`; ``bound`` a traced scalar) or None."""
    A, B = np.asarray(A, dtype=object), np.asarray(B, dtype=object)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul: expected matrices (n, k) and (k, m), got shapes {A.shape} and {B.shape}")
    ia, ib = _ids(g, A), _ids(g, B)
    P = pairs(ia, ib)
    b = len(g.blocks)
    bound, axes = -1, None
    if live is not None and _is_symbol(live[0]):
        bound = int(_ids(g, np.array([live[0]], dtype=object))[0])
        axes = tuple(tuple(int(v) for v in (np.full(n, -1) if r is None else np.asarray(r).reshape(-1)))
                     for r, n in zip(live[1:], (A.shape[0], A.shape[1], B.shape[1])))
    g.blocks.append(Block(ia, ib, g._phase, P, bound, axes))
    out = np.zeros(P.shape, dtype=object)
    m = P.shape[1]
    for i, j in zip(*np.nonzero(P)):
        out[i, j] = g._sym((MATMUL, b, int(i) * m + int(j)))
    return out


def renumber(blocks, new, nodes) -> list:
    """The ``blocks`` of a program: operands renumbered by ``new`` (graph id -> program id), the
    pairs of the elements no ``MATMUL`` node of ``nodes`` (the program's) reads set to zero."""
    live = [set() for _ in blocks]
    for op, x, y in nodes:
        if op == MATMUL:
            live[x].add(y)
    out = []
    for b, used in zip(blocks, live):
        remap = np.vectorize(lambda i: new[i] if i >= 0 else -1, otypes=[np.int64])
        P = np.zeros_like(b.pairs)
        idx = np.fromiter(used, dtype=np.int64, count=len(used))
        P.reshape(-1)[idx] = b.pairs.reshape(-1)[idx]
        out.append(Block(remap(b.A) if b.A.size else b.A, remap(b.B) if b.B.size else b.B, b.phase, P,
                         new[b.bound] if b.bound >= 0 else -1, b.live))
    return out


_FOLD = {NEG: lambda a, _: -a, ADD: lambda a, b: a + b, SUB: lambda a, b: a - b, MUL: lambda a, b: a * b,
         DIV: lambda a, b: a / b}


def expand(prog):
    """``(flat, new)``: ``prog`` (a :class:`~sparsedyn.symbolic.ir.Program`) with every ``MATMUL``
    node written out as its products and sums (module docstring) and ``new``, the node of ``flat``
    holding each node of ``prog``."""
    import dataclasses
    nodes, out, phases = prog.nodes, [], []
    new = [0] * len(nodes)
    for i, (op, x, y) in enumerate(nodes):
        ph = prog.phases[i] if prog.phases is not None else None
        if op == MATMUL:
            b = prog.blocks[x]
            r, c = divmod(y, b.B.shape[1])
            s = -1
            for a, e in zip(b.A[r], b.B[:, c]):
                if a < 0 or e < 0:
                    continue
                a, e = new[a], new[e]
                if out[a] == (CONST, 1.0, -1) or out[e] == (CONST, 1.0, -1):    # x 1 = x exactly (as traced)
                    t = e if out[a] == (CONST, 1.0, -1) else a
                elif out[a][0] == CONST and out[e][0] == CONST:     # a product of constants: its value, as
                    out.append((CONST, out[a][1] * out[e][1], -1))   # the tracer folds numbers (no vector
                    phases.append(ph)                                # code multiplies two literals)
                    t = len(out) - 1
                else:
                    out.append((MUL, a, e) if a <= e else (MUL, e, a))
                    phases.append(ph)
                    t = len(out) - 1
                if s >= 0 and out[s][0] == CONST and out[t][0] == CONST:
                    out.append((CONST, out[s][1] + out[t][1], -1))
                    phases.append(ph)
                    t = len(out) - 1
                elif s >= 0:
                    out.append((ADD, s, t))
                    phases.append(ph)
                    t = len(out) - 1
                s = t
            new[i] = s
            continue
        if op > CONST:
            x, y = new[x], (new[y] if y >= 0 else -1)
            if op in _FOLD and out[x][0] == CONST and (y < 0 or out[y][0] == CONST) \
                    and not (op == DIV and out[y][1] == 0):
                # an element written out as a constant (products of constants, or a constant times
                # 1): what reads it is folded as the tracer folds numbers (IEEE, exactly)
                op, x, y = CONST, _FOLD[op](out[x][1], out[y][1] if y >= 0 else None), -1
        new[i] = len(out)
        out.append((op, x, y))
        phases.append(ph)
    outputs = [[(kind, new[v]) if kind == "node" else (kind, v) for kind, v in row] for row in prog.outputs]
    flat = dataclasses.replace(prog, nodes=out, outputs=outputs, blocks=[], _text=None,
                               phases=phases if prog.phases is not None else None)
    return flat, new
