"""Run-time bounds of the dense block products of :mod:`.emit_blocks`: the slots a product may skip.

A block product traced with ``live`` (:attr:`~sparsedyn.symbolic.block.Block.live`: the slot of each
row of ``A``, row of ``B`` and column of ``B``, and a node whose value ``b`` is the number of slots in
use) is written as a loop over the rows, the terms and the columns of the slots ``< b`` alone: the
contact step's kernel is built once for a number of slots, and a step whose contacts use fewer
(the free slots of a scene's layout, open contacts after the last closed one) does the work of the
contacts it has.  The slots ``>= b`` are the tracing code's promise: their entries that meet a slot
``< b`` are zeros, so the terms left out are products by zero and the rows and columns of the slots
left out are written ``0.0``; every element of a slot ``< b`` sums the same products in the same
order (bit for bit, the sign of a zero sum aside, as the structural zeros' products of
:mod:`.emit_blocks`).

Only a single state's products (``double``) of :data:`MIN_PAIRS` multiplications or more are
bounded: the lanes of a vector are other states, with other bounds.  An axis whose slots do not
rise along it is not bounded.
"""

from __future__ import annotations

import numpy as np

__all__ = []

#: Multiplications (structural zeros aside) from which a product is bounded: below, the bound's work
#: (its tables, the rows' ends, the zeros written) is about what it saves, and a product by a vector
#: skips only whole passes of rows and runs of four terms (24 rows, 21 in use: none).
MIN_PAIRS = 2048


class Bounds:
    """The C of the run-time bounds of block ``blk`` (named ``name``): :attr:`defs` (file scope: the
    tables of live counts), :attr:`decl` (the statements, at the top of its function, declaring
    ``{name}_nI``, ``_kI``, ``_mI``: the rows of ``A``, rows of ``B`` and columns of ``B`` in use),
    and :attr:`n`, :attr:`k`, :attr:`m` (their C expressions: the variables, or the sizes where an
    axis is not bounded).  ``on`` is False where the block has no bound (then the expressions are
    the sizes and nothing is declared)."""

    def __init__(self, blk, at, name, T="double"):
        sizes = (blk.A.shape[0], blk.A.shape[1], blk.B.shape[1])
        self.n, self.k, self.m = (str(s) for s in sizes)
        self.defs, self.decl, self.on = [], [], False
        if T != "double" or blk.live is None or blk.bound < 0 or int(blk.pairs.sum()) < MIN_PAIRS:
            return
        axes = [np.asarray(a, dtype=np.int64) for a in blk.live]
        bounded = [len(a) > 0 and a.min() >= 0 and (np.diff(a) >= 0).all() for a in axes]
        if not any(bounded):
            return
        ns = max(int(a.max()) for a, ok in zip(axes, bounded) if ok) + 1
        self.on = True
        # the bound: NaN or past the slots counts every slot (a bound never takes work that is needed)
        self.decl = [f"  const double {name}_bd = w[{at(blk.bound)}];",
                     f"  const int {name}_bn = {name}_bd < {ns} ? ({name}_bd > 0.0 ? (int){name}_bd : 0) : {ns};"]
        exprs = []
        for tag, a, ok, size in zip("nkm", axes, bounded, sizes):
            if not ok:
                exprs.append(str(size))
                continue
            counts = [int(np.sum(a < b)) for b in range(ns + 1)]
            self.defs.append(f"static const int {name}_{tag}L[{ns + 1}] = {{{','.join(map(str, counts))}}};")
            self.decl.append(f"  const int {name}_{tag}I = {name}_{tag}L[{name}_bn];")
            exprs.append(f"{name}_{tag}I")
        self.n, self.k, self.m = exprs

    def zero_rows(self, c, mp, n, m, first=None):
        """C statements writing ``0.0`` to the columns ``< m`` of the rows of ``C`` (``c``: the C of
        its address, stride ``mp``, ``n`` rows) from ``first`` (default: the rows in use) on."""
        if not self.on:
            return []
        first = self.n if first is None else first
        if first == str(n):
            return []
        return [f"  for (int i = {first}; i < {n}; i++) for (int j = 0; j < {m}; j++) ({c})[i * {mp} + j] = 0.0;"]

    def empty(self, c, mp, n, m):
        """C statements returning with ``C`` zero where no term is in use (``k`` is 0)."""
        if not self.on or self.k.isdigit():
            return []
        return [f"  if ({self.k} == 0) {{", *self.zero_rows(c, mp, n, m, "0"), "    return;", "  }"]
