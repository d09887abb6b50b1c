"""The diagonal blocks of ``A`` (units of rows and columns solved together) in a block triangular
order (:func:`block_order`), and forward dynamics' Newton-Euler blocks merged into whole-body
articulated blocks (:func:`merge_articulated`), for :func:`~sparsedyn.sparse.solver.analyze`."""

from __future__ import annotations

import numpy as np

from .matching import topological_order
from .ordering import articulated_order

__all__ = ["block_order", "merge_articulated"]


def block_order(units, pattern, row_entries, whole_transforms=False):
    """Order ``units`` (dicts with rows/cols) so that ``A`` is block lower triangular; ``None`` if cyclic.

    ``whole_transforms``: a unit with a row of a transform block of ``A`` also waits for the units of
    all six columns of that block (so that the substitution can apply it as a transform)."""
    n = pattern.n
    owner = np.empty(n, dtype=np.int64)
    for K, u in enumerate(units):
        owner[u["cols"]] = K
    deps = [set() for _ in units]
    users = [set() for _ in units]
    for K, u in enumerate(units):
        for r in u["rows"]:
            for e in row_entries[r]:
                J = int(owner[pattern.cols[e]])
                if J != K:
                    deps[K].add(J)
                    users[J].add(K)
    if whole_transforms:
        row_unit = {r: K for K, u in enumerate(units) for r in u["rows"]}
        for tb in pattern.transform_blocks:
            for r in set(pattern.rows[tb.entries].tolist()):
                K = row_unit[r]
                for c in range(tb.col0, tb.col0 + 6):
                    J = int(owner[c])
                    if J != K:
                        deps[K].add(J)
                        users[J].add(K)
    order = topological_order(deps, users, key=lambda K: min(units[K]["cols"]))
    return [units[K] for K in order] if len(order) == len(units) else None


def merge_articulated(pattern, units, row_entries):
    """Merge the Newton-Euler-only blocks around each non-triangular one into articulated blocks.

    The fine block triangular form splits forward dynamics further than the
    bodies (a leaf's wrench components selected by ``S_i^T`` follow from
    ``tau_i`` alone, say), so its irreducible blocks are rarely whole bodies.
    Every group of blocks whose rows are ``c(3a), c(3f), c(3tau)`` and whose
    columns are ``a, f, qdd``, connected by entries or by sharing a body, and
    which contains a block larger than 1x1,
    is merged into one block when it consists of whole bodies (the articulated
    form) and the merged blocks still have a block triangular order; the
    articulated order is then proven safe on it (:mod:`.ordering`).  Triangular
    groups (inverse dynamics) are left alone.
    """
    L = pattern.layout
    ne = [all(L.column_owner(c).kind in ("a", "f", "qdd") for c in u["cols"]) and
          all(pattern.row_owner(r).kind in ("3a", "3f", "3tau") for r in u["rows"]) for u in units]
    owner = np.empty(pattern.n, dtype=np.int64)
    for K, u in enumerate(units):
        owner[u["cols"]] = K
    root = list(range(len(units)))

    def find(k):
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    by_body = {}
    for K, u in enumerate(units):
        if ne[K]:
            for r in u["rows"]:
                by_body.setdefault(pattern.row_owner(r).body, []).append(K)
                for e in row_entries[r]:
                    J = int(owner[pattern.cols[e]])
                    if ne[J]:
                        root[find(K)] = find(J)
            for c in u["cols"]:
                by_body.setdefault(L.column_owner(c).body, []).append(K)
    for Ks in by_body.values():                 # a body's blocks belong together (whole bodies)
        for K in Ks[1:]:
            root[find(K)] = find(Ks[0])
    groups = {}
    for K in range(len(units)):
        if ne[K]:
            groups.setdefault(find(K), []).append(K)
    merged, used = [], set()
    for members in groups.values():
        if all(len(units[K]["cols"]) == 1 for K in members):
            continue
        rows = sorted(r for K in members for r in units[K]["rows"])
        cols = sorted(c for K in members for c in units[K]["cols"])
        art = articulated_order(pattern, rows, cols)
        if art is None:
            continue
        merged.append(dict(rows=rows, cols=cols, pivots=art[0], spd=art[1], name="articulated"))
        used.update(members)
    if not merged:
        return units
    out = block_order([u for K, u in enumerate(units) if K not in used] + merged, pattern, row_entries)
    return units if out is None else out
