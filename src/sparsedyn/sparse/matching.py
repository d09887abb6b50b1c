"""Structure analysis: maximum bipartite matching, Dulmage-Mendelsohn, block triangular form.

Everything here works on the *pattern* (plain ints), in polynomial time:

1. **Structural rank** = size of a maximum matching between rows and columns
   (Hopcroft-Karp, ``O(E sqrt(V))``).  Written here rather than calling
   ``scipy.sparse.csgraph.maximum_bipartite_matching``/``structural_rank``, which
   have been seen to hang on exactly these chain-shaped patterns (SciPy issue
   26147).  The matching is built in stages so that it *prefers* entries that
   are provably nonzero: first only the constants +-1, then any nonzero
   constant, then state-dependent entries; each stage augments the previous
   matching.
2. **Undetermined / over-determined parts** (the coarse Dulmage-Mendelsohn
   decomposition): columns reachable from an unmatched column by alternating
   paths cannot be determined by the equations, rows reachable from an
   unmatched row are redundant.  These sets do not depend on which maximum
   matching was found.
3. **Block triangular form** (the fine decomposition): with a perfect matching,
   column ``c`` depends on column ``c'`` when the row matched to ``c`` has an
   entry in ``c'``; the strongly connected components of that graph
   (``scipy.sparse.csgraph.connected_components(connection="strong")``) are the
   irreducible diagonal blocks, and a topological order of them makes the
   permuted matrix block lower triangular.  Nori's Property 1 (inverse
   dynamics is triangular after permutation) is the statement that every
   block is 1x1; deciding triangularity this way is polynomial, unlike the
   general minimum-fill problem the paper reduces it to.
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["hopcroft_karp", "preferred_matching", "undetermined", "overdetermined", "block_triangular"]

_INF = 1 << 60


def hopcroft_karp(n_rows, n_cols, adj, match_r=None, match_c=None):
    """Maximum matching of the bipartite graph ``adj[r] = [columns of row r]``.

    Starts from ``match_r`` / ``match_c`` (row -> column / column -> row, -1 =
    free) if given, and returns the augmented ``(match_r, match_c)`` lists.
    Iterative (no recursion), so long chains are fine.
    """
    match_r = [-1] * n_rows if match_r is None else list(match_r)
    match_c = [-1] * n_cols if match_c is None else list(match_c)
    # cheap greedy start
    for r in range(n_rows):
        if match_r[r] < 0:
            for c in adj[r]:
                if match_c[c] < 0:
                    match_r[r], match_c[c] = c, r
                    break
    dist = [0] * n_rows
    while True:
        # BFS from the free rows, layered by alternating path length
        queue = []
        for r in range(n_rows):
            if match_r[r] < 0:
                dist[r] = 0
                queue.append(r)
            else:
                dist[r] = _INF
        found = False
        head = 0
        while head < len(queue):
            r = queue[head]
            head += 1
            for c in adj[r]:
                r2 = match_c[c]
                if r2 < 0:
                    found = True
                elif dist[r2] == _INF:
                    dist[r2] = dist[r] + 1
                    queue.append(r2)
        if not found:
            return match_r, match_c
        # DFS along the layers for vertex-disjoint shortest augmenting paths
        it = [0] * n_rows
        for root in range(n_rows):
            if match_r[root] >= 0:
                continue
            stack, path = [root], []
            while stack:
                r = stack[-1]
                advanced = False
                while it[r] < len(adj[r]):
                    c = adj[r][it[r]]
                    it[r] += 1
                    r2 = match_c[c]
                    if r2 < 0:
                        path.append(c)
                        for rr, cc in zip(stack, path):
                            match_r[rr], match_c[cc] = cc, rr
                            dist[rr] = _INF     # paths of one phase are vertex-disjoint
                        stack = []
                        advanced = True
                        break
                    if dist[r2] == dist[r] + 1:
                        path.append(c)
                        stack.append(r2)
                        advanced = True
                        break
                if not advanced:
                    dist[r] = _INF          # dead end: never try this row again in this phase
                    stack.pop()
                    if path:
                        path.pop()


def preferred_matching(n_rows, n_cols, rows, cols, rank):
    """Maximum matching that prefers entries of low ``rank`` (0: +-1, 1: constant, 2: state).

    Stage ``s`` augments the matching of stage ``s - 1`` using the entries of rank
    ``<= s``: every entry matched in an earlier stage stays matched unless an
    augmenting path needs it.
    """
    match_r = match_c = None
    for stage in range(int(max(rank, default=0)) + 1):
        adj = [[] for _ in range(n_rows)]
        for r, c, k in zip(rows.tolist(), cols.tolist(), rank.tolist()):
            if k <= stage:
                adj[r].append(c)
        match_r, match_c = hopcroft_karp(n_rows, n_cols, adj, match_r, match_c)
    if match_r is None:
        match_r, match_c = [-1] * n_rows, [-1] * n_cols
    return match_r, match_c


def _adjacency(n_rows, n_cols, rows, cols):
    by_row = [[] for _ in range(n_rows)]
    by_col = [[] for _ in range(n_cols)]
    for r, c in zip(rows.tolist(), cols.tolist()):
        by_row[r].append(c)
        by_col[c].append(r)
    return by_row, by_col


def _alternating_reach(starts, adjacency, match):
    """Nodes reachable from ``starts`` by alternating paths (any edge out, matched edge back).

    Returns ``(nodes on the starting side, nodes on the other side)``, sorted.
    """
    seen, other = set(starts), set()
    stack = list(seen)
    while stack:
        x = stack.pop()
        for y in adjacency[x]:
            if y not in other:
                other.add(y)
                x2 = match[y]
                if x2 >= 0 and x2 not in seen:
                    seen.add(x2)
                    stack.append(x2)
    return sorted(seen), sorted(other)


def undetermined(n_rows, n_cols, rows, cols, match_r, match_c):
    """``(columns, rows)`` reachable by alternating paths from the unmatched columns.

    These variables cannot be determined by the equations (the horizontal
    block of the Dulmage-Mendelsohn decomposition); empty when the structural
    rank equals the number of columns.
    """
    _, by_col = _adjacency(n_rows, n_cols, rows, cols)
    return _alternating_reach([c for c in range(n_cols) if match_c[c] < 0], by_col, match_r)


def overdetermined(n_rows, n_cols, rows, cols, match_r, match_c):
    """``(rows, columns)`` reachable by alternating paths from the unmatched rows (redundant equations)."""
    by_row, _ = _adjacency(n_rows, n_cols, rows, cols)
    return _alternating_reach([r for r in range(n_rows) if match_r[r] < 0], by_row, match_c)


def topological_order(deps, users, key):
    """Kahn's algorithm on nodes ``0..len(deps)-1``: dependencies first, ties by ``key(k)``.

    ``deps[k]``: nodes that must come before ``k``; ``users[k]``: nodes that depend
    on ``k``.  Returns the order (a list of node indices; shorter than the node
    count when the graph has a cycle).
    """
    waiting = [len(d) for d in deps]
    heap = [(key(k), k) for k in range(len(deps)) if waiting[k] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, k = heapq.heappop(heap)
        order.append(k)
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (key(u), u))
    return order


def block_triangular(n, rows, cols, match_c):
    """Irreducible diagonal blocks, in an order that makes the matrix block lower triangular.

    ``match_c`` must be a perfect matching (column -> row).  Returns a list of
    column lists, one per block, dependencies first.  Ties between independent
    blocks are broken by the smallest column index, so the order is
    deterministic.
    """
    import scipy.sparse as sps                  # imported here: offline only
    from scipy.sparse.csgraph import connected_components
    if n == 0:
        return []
    match_col_of_row = {r: c for c, r in enumerate(match_c)}
    src = np.array([match_col_of_row[r] for r in rows.tolist()], dtype=np.int64)
    dst = cols
    keep = src != dst
    G = sps.csr_matrix((np.ones(int(keep.sum())), (src[keep], dst[keep])), shape=(n, n))
    nb, label = connected_components(G, directed=True, connection="strong")
    members = [[] for _ in range(nb)]
    for c, k in enumerate(label.tolist()):
        members[k].append(c)
    # condensation: block(src) depends on block(dst) -> dst's block must come first
    deps = [set() for _ in range(nb)]
    users = [set() for _ in range(nb)]
    for s, d in zip(label[src[keep]].tolist(), label[dst[keep]].tolist()):
        if s != d and d not in deps[s]:
            deps[s].add(d)
            users[d].add(s)
    order = topological_order(deps, users, key=lambda k: members[k][0])
    assert len(order) == nb                     # the condensation of a digraph is acyclic
    return [members[k] for k in order]
