"""The level schedule a :class:`~sparsedyn.symbolic.ir.Program` is interpreted by (vectorised
over states, one NumPy ufunc call per group of nodes)."""

from __future__ import annotations

import numpy as np

from .ops import ADD, ATAN2, CONST, COPYSIGN, COS, DIV, INPUT, MUL, NEG, SIN, SQRT, SUB, UNARY

__all__ = ["EvalPlan"]

class EvalPlan:
    """Level schedule of a :class:`Program` for vectorised interpretation.

    Nodes are renumbered by (depth, operation) so each group's results are one contiguous
    slice of the value array; each group is then a gather of its operands and one ufunc call.
    """

    _UFUNC = {NEG: np.negative, ADD: np.add, SUB: np.subtract, MUL: np.multiply, DIV: np.divide,
              SIN: np.sin, COS: np.cos, SQRT: np.sqrt, ATAN2: np.arctan2, COPYSIGN: np.copysign}

    def __init__(self, prog):
        nodes = prog.nodes
        N = len(nodes)
        op = np.fromiter((n[0] for n in nodes), dtype=np.int64, count=N)
        depth = np.zeros(N, dtype=np.int64)
        for i, (o, x, y) in enumerate(nodes):
            if o > CONST:
                d = depth[x]
                if y >= 0 and depth[y] > d:
                    d = depth[y]
                depth[i] = d + 1
        order = np.lexsort((op, depth))           # inputs and constants (depth 0) first
        pos = np.empty(N, dtype=np.int64)
        pos[order] = np.arange(N)
        self.n = N
        inp = [i for i in order if nodes[i][0] == INPUT]
        self.input_slots = pos[inp] if inp else np.zeros(0, dtype=np.int64)
        self.input_src = [(nodes[i][1], nodes[i][2]) for i in inp]
        const = [i for i in order if nodes[i][0] == CONST]
        self.const_slots = pos[const] if const else np.zeros(0, dtype=np.int64)
        self.const_vals = np.array([nodes[i][1] for i in const], dtype=float)
        by_arg = {}
        for slot, (a, e) in zip(self.input_slots, self.input_src):
            by_arg.setdefault(a, ([], []))
            by_arg[a][0].append(slot)
            by_arg[a][1].append(e)
        self.by_arg = {a: (np.array(s), np.array(e)) for a, (s, e) in by_arg.items()}
        groups = []
        ordered = [order[k] for k in range(N)]
        k = 0
        while k < N:
            i = ordered[k]
            o = nodes[i][0]
            if o <= CONST:
                k += 1
                continue
            d = depth[i]
            k1 = k
            while k1 < N and depth[ordered[k1]] == d and nodes[ordered[k1]][0] == o:
                k1 += 1
            xs = pos[[nodes[j][1] for j in ordered[k:k1]]]
            ys = pos[[nodes[j][2] for j in ordered[k:k1]]] if o not in UNARY else None
            groups.append((self._UFUNC[o], k, k1, xs, ys))
            k = k1
        self.groups = groups
        self.outputs = []
        for row in prog.outputs:
            idx = np.array([r for r, (t, _) in enumerate(row) if t == "node"], dtype=np.int64)
            slots = np.array([pos[v] for t, v in row if t == "node"], dtype=np.int64)
            cidx = np.array([r for r, (t, _) in enumerate(row) if t != "node"], dtype=np.int64)
            cval = np.array([v for t, v in row if t != "node"], dtype=float)
            self.outputs.append((idx, slots, cidx, cval))

    def run(self, flat, B):
        vals = np.empty((self.n, B))
        for a, (slots, elems) in self.by_arg.items():
            vals[slots] = flat[a][elems]
        vals[self.const_slots] = self.const_vals[:, None]
        for f, k0, k1, xs, ys in self.groups:
            if ys is None:
                f(vals[xs], out=vals[k0:k1])
            else:
                f(vals[xs], vals[ys], out=vals[k0:k1])
        return vals
