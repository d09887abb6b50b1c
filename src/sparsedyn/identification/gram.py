"""The Gram matrix of measurement rows, block by block where the regressor is sparse.

The force across joint ``i`` depends on the parameters of the bodies of its subtree alone (the
regressor's block ``(i, j)`` is a structural zero unless ``i`` is an ancestor of ``j``), and so does
what an F/T sensor reads.  The rows of a hand joint touch a few dozen of a humanoid's hundreds of
base parameters; their share of ``M^T M`` is the Gram matrix of those columns only.  Rows are put in
*groups* whose columns (the union of their supports) are not much more than each row's own, and each
group adds ``syrk`` of its rows restricted to its columns into its block of the matrix: one BLAS-3
call a group, a few times fewer flops than one dense ``syrk`` on a branched robot.
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_groups", "add_gram"]


def row_groups(supports, widen=1.5):
    """Groups of row kinds: ``[(kinds, columns)]`` from ``supports``, one boolean mask over the columns
    per kind of row (the columns its rows may touch).  Kinds are taken widest first; a kind joins the
    narrowest group whose columns contain its own when their square is at most ``widen`` times its
    own (its rows then cost at most ``widen`` times their flops), else it starts a group."""
    order = sorted(range(len(supports)), key=lambda k: -int(supports[k].sum()))
    groups = []                                                    # [kinds, mask]
    for k in order:
        s = supports[k]
        fits = [g for g in groups if not np.any(s & ~g[1])]
        best = min(fits, key=lambda g: int(g[1].sum()), default=None)
        if best is not None and best[1].sum() ** 2 <= widen * max(int(s.sum()), 1) ** 2:
            best[0].append(k)
        else:
            groups.append([[k], s.copy()])
    return [(sorted(kinds), np.flatnonzero(mask)) for kinds, mask in groups]


def add_gram(G, blocks, groups):
    """``G += M^T M`` (upper triangle) for the rows ``blocks``: one array (n, k_j, c) of rows per kind
    ``j`` of row (``n`` states, ``k_j`` rows a state, ``c`` columns, the last one the right-hand
    side, which every group keeps), grouped by :func:`row_groups` (columns increasing, so a group's
    upper triangle lands in ``G``'s)."""
    from scipy.linalg.blas import dsyrk

    for kinds, cols in groups:
        rows = [blocks[j][..., cols].reshape(-1, len(cols)) for j in kinds]
        M = rows[0] if len(rows) == 1 else np.concatenate(rows)
        G[np.ix_(cols, cols)] += dsyrk(1.0, M.T)
