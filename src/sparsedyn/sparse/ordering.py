"""Static pivot orders for the diagonal blocks, and their symbolic LU factorization.

A pivot order is chosen once, from the structure, and reused at every state, so
every pivot must be nonzero at *every* state.  A pivot is **proven** when

* its value depends on model constants only: an entry of ``A`` that is a
  nonzero constant (+-1, an entry of ``S_i``, ``I_i`` or a measurement matrix),
  updated (if at all) by earlier elimination steps whose operands are constants
  too.  The symbolic phase propagates these constants, so the pivot's value is
  known offline; it is proven when it is not a cancellation (above
  ``CONSTANT_RTOL`` times the terms that formed it); or
* it is a pivot of ``D_i = S_i^T IA_i S_i`` in the articulated-body order below,
  ``S_i`` is constant, and ``S_i^T I_i S_i`` is positive definite: the articulated inertia is the
  body's own inertia plus positive semidefinite terms from its subtree
  (``IA_i = I_i + sum_j jX_i^T Ia_j jX_i``, for physically consistent, i.e.
  positive semidefinite, inertias), so ``D_i >= S_i^T I_i S_i > 0`` at every
  state, and the scalar pivots of ``D_i`` (its ``L D L^T`` diagonal) are positive.
  A body with ``S_i^T I_i S_i`` singular (massless, or no inertia about its
  joint axis) leaves its pivots unproven: they depend on the subtree.

Every other pivot is *unproven*; the online phase checks it at run time.

Orders (``ordering=`` of :func:`sparsedyn.sparse.analyze`):

``"articulated"`` -- for a block made of whole bodies' ``{a_i, f_i[, qdd_i]}``
    and ``{c(3a_i), c(3f_i)[, c(3tau_i)]}`` (forward and hybrid dynamics), visit
    the bodies from the leaves to the root (decreasing index: children have
    larger indices) and pivot, per body::

        c(3f_i) on f_i   (6 pivots, each -1)     f_i = IA_i a_i + pA_i, added to c(3f_lambda)
        c(3a_i) on a_i   (6 pivots, each -1)     a_i = iX_lambda a_lambda + S_i qdd_i + c_i
        c(3tau_i) on qdd_i (nv_i pivots)         S_i^T IA_i S_i qdd_i = tau_i - ..., SPD
                                                 (last dof first: the L^T D L pivots)

    This is the articulated-body algorithm as Gaussian elimination (Nori,
    Appendix A, steps S1-S5): eliminating ``f_j``, ``a_j`` and ``qdd_j`` of a
    child adds ``jX_i^T Ia_j jX_i`` to the ``a_i`` columns of ``c(3f_i)``, so by
    the time body ``i`` is pivoted those columns hold ``IA_i`` and the
    ``c(3tau_i), qdd_i`` block holds ``S_i^T IA_i S_i``.  The ``-1`` pivots are
    never updated (the rows ``c(3a_i)`` only meet columns pivoted later, the
    columns ``f_i`` only rows pivoted later).
``"colamd"``, ``"mmd_ata"``, ``"mmd_at_plus_a"``, ``"natural"`` -- SuperLU's fill-reducing
    column orders (``scipy.sparse.linalg.splu(permc_spec=...)``) with its
    threshold partial pivoting, run once at a generic random state; the pivot
    sequence it chose there (``perm_r``, ``perm_c``) becomes the static order.
    These orders are general but not proven: configuration-dependent entries
    (sines, cosines) can land on the diagonal.
``"matching"`` -- the matched entries of the structural analysis, in block order
    (what a 1x1 block always uses).
``"auto"`` -- articulated where a block (after merging, see
    :func:`sparsedyn.sparse.solver.analyze`) has that form, else COLAMD.

Symbolic factorization (:func:`symbolic_lu`): with the pivots ``(r_k, c_k)``
define ``B[k, l] = A[r_k, c_l]``; right-looking elimination without further
pivoting stores ``l_ik = B[i, k] / B[k, k]`` in the slot of ``(i, k)`` and updates
``B[i, j] -= l_ik B[k, j]`` for ``i, j > k``.  The update positions that are not
entries of ``A`` are the **fill-in**; they get new slots after the ``nnz``
entries of ``A`` in one slot array.  All of this is computed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .assembly import CONST, ONE

__all__ = ["ORDERINGS", "BlockFactor", "articulated_order", "superlu_order", "symbolic_lu", "ARTICULATED_RTOL",
           "stage_levels", "stage_groups"]

ORDERINGS = ("auto", "articulated", "colamd", "mmd_ata", "mmd_at_plus_a", "natural", "matching")
_SUPERLU = {"colamd": "COLAMD", "mmd_ata": "MMD_ATA", "mmd_at_plus_a": "MMD_AT_PLUS_A", "natural": "NATURAL"}
#: A constant pivot (a model constant, or a value computed from constants only) is proven when
#: it exceeds this fraction of the largest term that formed it (exact cancellation leaves ~1e-16).
CONSTANT_RTOL = 1e-10
#: ``S_i^T I_i S_i`` counts as positive definite when its smallest eigenvalue exceeds this times ``max |I_i|``.
ARTICULATED_RTOL = 1e-9


@dataclass(eq=False)
class BlockFactor:
    """Symbolic LU of one irreducible diagonal block (all indices plain ints).

    ``rows``, ``cols`` (m,): global rows / columns in pivot order; ``piv`` (m,):
    slot of each pivot; ``proof`` (m,): ``"constant"``, ``"articulated"`` or ``""``
    (unproven); ``steps``: per pivot ``k`` with a nonempty L column, the tuple
    ``(k, l_pos, l_slots, u_slots, upd_slots)`` (``l_pos`` local positions > k of
    the multipliers, ``upd_slots`` the ``len(l) x len(u)`` update slots, flat);
    ``lcol[k]`` / ``ucol[k]``: ``(positions, slots)`` of the L entries below / U
    entries above pivot ``k`` (forward / back substitution); ``entries``: entry
    numbers of ``A`` inside the block; ``off``: ``(local row positions, entry
    numbers)`` of the block rows' entries in earlier blocks' columns; ``fill``:
    number of fill-in slots, ``fill_positions`` their global ``(row, col)``;
    ``ordering``: the order's name.
    """

    rows: np.ndarray
    cols: np.ndarray
    piv: np.ndarray
    proof: list
    steps: list
    lcol: list
    ucol: list
    entries: np.ndarray
    entry_pos: tuple
    off: tuple
    fill: int
    nnz_lu: int
    ordering: str
    fill_positions: list = field(default_factory=list)
    plan: list | None = None

    def __post_init__(self):
        # look-ups of the numeric phase: step of pivot k, U row of pivot k, nonempty L columns
        self.step_at = {st[0]: st for st in self.steps}
        ur = [[] for _ in range(len(self.rows))]
        for upos, us in self.ucol:
            for k, s in zip(upos.tolist(), us.tolist()):
                ur[k].append(s)
        self.urow = [np.array(u, dtype=np.int64) for u in ur]
        self.fwd = [(k, lpos, ls) for k, (lpos, ls) in enumerate(self.lcol) if len(ls)]
        self._stages = {}

    def factor_stages(self, levels):
        """The elimination steps of :func:`~sparsedyn.sparse.block_lu.factor_blocks` grouped into
        :class:`FactorStage` s: one per pivot, in order (``levels=False``: what a trace records), or
        the pivots of each :func:`stage_levels` level together (float arrays: the same arithmetic to
        the bit in a few NumPy operations per stage instead of per pivot)."""
        key = ("factor", bool(levels))
        if key not in self._stages:
            m = self.size
            empty = np.zeros(0, np.int64)
            step = [self.step_at.get(k, (k, empty, empty, empty, empty)) for k in range(m)]
            reads = [[int(self.piv[k])] + st[2].tolist() + self.urow[k].tolist() for k, st in enumerate(step)]
            writes = [st[2].tolist() + st[4].tolist() for st in step]
            self._stages[key] = [FactorStage.of(self, [step[k] for k in ks])
                                 for ks in stage_groups(reads, writes, levels)]
        return self._stages[key]

    def solve_stages(self, levels):
        """The forward (unit ``L``, by columns) and back (``U``, by columns, last first) substitution
        steps grouped as :meth:`factor_stages` does: two lists of :class:`SubstituteStage`."""
        key = ("solve", bool(levels))
        if key not in self._stages:
            m = self.size
            fwd = [k for k in range(m) if len(self.lcol[k][1])]
            stages = [[SubstituteStage.of([fwd[s] for s in g], None, [self.lcol[fwd[s]] for s in g])
                       for g in stage_groups([[k] for k in fwd], [self.lcol[k][0].tolist() for k in fwd], levels)]]
            back = list(range(m - 1, -1, -1))
            stages.append([SubstituteStage.of([back[s] for s in g], self.piv[[back[s] for s in g]],
                                              [self.ucol[back[s]] for s in g])
                           for g in stage_groups([[k] for k in back], [[k] + self.ucol[k][0].tolist() for k in back],
                                                 levels)])
            self._stages[key] = stages
        return self._stages[key]

    @property
    def size(self) -> int:
        return len(self.rows)

    @property
    def proven(self) -> bool:
        return all(self.proof)


def stage_levels(reads, writes):
    """Stage numbers of a sequence of steps such that running it stage by stage gives the same result to
    the bit: step ``s`` reads the keys ``reads[s]`` and then writes (assigns, or updates from the old
    value) the keys ``writes[s]``.  A step goes to a later stage than every earlier step that writes a key
    it reads or reads a key it writes, and to no earlier stage than every earlier step that writes a key
    it writes.  So within a stage no step reads what another one writes, and a stage that does its steps'
    reads, then their writes in step order (``ufunc.at`` for the updates of a key written by several),
    applies the same operations to every key in the same order."""
    last_w, last_r, out = {}, {}, []
    for r, w in zip(reads, writes):
        level = 0
        for x in r:
            if x in last_w:
                level = max(level, last_w[x] + 1)
        for x in w:
            level = max(level, last_w.get(x, 0), last_r.get(x, -1) + 1)
        for x in r:
            last_r[x] = max(last_r.get(x, 0), level)
        for x in w:
            last_w[x] = level
        out.append(level)
    return out


def stage_groups(reads, writes, levels=True):
    """The steps of each stage of :func:`stage_levels`, in step order (``levels=False``: one step a stage)."""
    if not levels:
        return [[s] for s in range(len(reads))]
    groups = {}
    for s, level in enumerate(stage_levels(reads, writes)):
        groups.setdefault(level, []).append(s)
    return [groups[level] for level in sorted(groups)]


def _cat(parts):
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts]) if parts else np.zeros(0, np.int64)


@dataclass(eq=False)
class FactorStage:
    """Pivots of one stage of the elimination (:meth:`BlockFactor.factor_stages`), all index arrays.

    ``ks`` (K,) pivot numbers, ``piv`` their slots; ``ls`` the slots of their L columns one after the
    other, ``lk`` the pivot (0..K-1) of each; ``upd`` the slots of the rank-1 updates in step order,
    ``ul`` the multiplier (index into ``ls``) and ``us`` the U slot of each, ``dup``: a slot is updated
    more than once; ``urow`` the U rows' slots; ``lptr``, ``uptr`` (K + 1): where each pivot's L column
    and U row start in ``ls`` and ``urow``; ``seg = (order, starts)``: each pivot's scale segment of
    ``[0 (K rows); W[ls]; W[urow]]`` (a zero row, its L column, its U row) for the checks."""

    ks: np.ndarray
    piv: np.ndarray
    ls: np.ndarray
    lk: np.ndarray
    ul: np.ndarray
    us: np.ndarray
    upd: np.ndarray
    dup: bool
    urow: np.ndarray
    lptr: np.ndarray
    uptr: np.ndarray
    seg: tuple

    @classmethod
    def of(cls, blk, steps):
        K = len(steps)
        nl = np.array([len(st[2]) for st in steps], dtype=np.int64)
        l0 = np.concatenate([[0], np.cumsum(nl)]).astype(np.int64)
        nu = [len(blk.urow[st[0]]) for st in steps]
        u0 = np.concatenate([[0], np.cumsum(nu)]).astype(np.int64)
        ul = _cat([np.repeat(np.arange(l0[j], l0[j + 1]), len(st[3])) for j, st in enumerate(steps)])
        us = _cat([np.tile(st[3], len(st[2])) for st in steps])
        upd = _cat([st[4] for st in steps])
        order = _cat([np.concatenate([[j], K + np.arange(l0[j], l0[j + 1]), K + l0[K] + np.arange(u0[j], u0[j + 1])])
                      for j in range(K)])
        starts = np.concatenate([[0], np.cumsum(1 + nl + np.array(nu, dtype=np.int64))[:-1]]).astype(np.int64)
        return cls(ks=_cat([[st[0] for st in steps]]), piv=blk.piv[[st[0] for st in steps]],
                   ls=_cat([st[2] for st in steps]), lk=np.repeat(np.arange(K), nl), ul=ul, us=us, upd=upd,
                   dup=len(np.unique(upd)) < len(upd), urow=_cat([blk.urow[st[0]] for st in steps]),
                   lptr=l0, uptr=u0, seg=(order, starts))


@dataclass(eq=False)
class SubstituteStage:
    """Columns of one stage of a triangular substitution (:meth:`BlockFactor.solve_stages`): ``ks``
    (K,) the positions solved, ``piv`` their pivots' slots (``None``: unit diagonal); ``pos`` the
    positions updated by them, ``slots`` the factor slots and ``src`` the solved position (index
    into the block) of each update, in step order; ``dup``: a position is updated more than once."""

    ks: np.ndarray
    piv: np.ndarray | None
    pos: np.ndarray
    slots: np.ndarray
    src: np.ndarray
    dup: bool

    @classmethod
    def of(cls, ks, piv, cols):
        pos = _cat([p for p, _ in cols])
        return cls(ks=_cat([ks]), piv=piv, pos=pos, slots=_cat([s for _, s in cols]),
                   src=_cat([np.full(len(p), k) for k, (p, _) in zip(ks, cols)]),
                   dup=len(np.unique(pos)) < len(pos))


def articulated_order(pattern, rows, cols):
    """The articulated-body pivot sequence of a block, or ``None`` if the block is not of that form.

    Returns ``(pivots, spd)``: ``pivots`` a list of global ``(row, col)`` pairs,
    ``spd`` a dict ``pivot index -> body`` for the pivots of ``S_i^T IA_i S_i``
    that are proven (``S_i^T I_i S_i`` positive definite).
    """
    L = pattern.layout
    model = L.model
    rowset, colset = set(rows), set(cols)
    bodies = set()
    for c in cols:
        v = L.column_owner(c)
        if v.kind not in ("a", "f", "qdd"):
            return None
        bodies.add(v.body)
    for r in rows:
        e = pattern.row_owner(r)
        if e.kind not in ("3a", "3f", "3tau"):
            return None
        bodies.add(e.body)
    pivots, spd = [], {}
    for i in sorted(bodies, reverse=True):
        a, f, qdd = L.var("a", i), L.var("f", i), L.var("qdd", i)
        ea, ef, et = L.eq("3a", i), L.eq("3f", i), L.eq("3tau", i)
        whole = lambda blk, s: all(x in s for x in range(blk.offset, blk.offset + blk.size))  # noqa: E731
        some = lambda blk, s: any(x in s for x in range(blk.offset, blk.offset + blk.size))   # noqa: E731
        if not (whole(a, colset) and whole(f, colset) and whole(ea, rowset) and whole(ef, rowset)):
            return None
        has_q, has_t = some(qdd, colset), some(et, rowset)
        if has_q != has_t or (has_q and not (whole(qdd, colset) and whole(et, rowset))):
            return None
        pivots += [(ef.offset + k, f.offset + k) for k in range(6)]
        pivots += [(ea.offset + k, a.offset + k) for k in range(6)]
        if has_q:
            joint, I = model.joints[i], model.inertia[i]
            S = joint.motion_subspace()
            D0 = S.T @ I @ S
            # an S(q) (Euler angles, universal, composite joints) can lose rank at some q (gimbal
            # lock): its pivots stay unproven, checked at run time
            ok = joint.constant_subspace and \
                float(np.min(np.linalg.eigvalsh(D0))) > ARTICULATED_RTOL * max(float(np.max(np.abs(I))), 1e-300)
            for k in reversed(range(qdd.size)):       # last dof first: the pivots of L^T D L
                if ok:
                    spd[len(pivots)] = i
                pivots.append((et.offset + k, qdd.offset + k))
    if len(pivots) != len(rows) or len(pivots) != len(cols):
        return None
    return pivots, spd


def superlu_order(pattern, rows, cols, vals, spec):
    """SuperLU's pivot sequence for the block at one state (``vals``: float value array of ``A``).

    ``spec``: a ``permc_spec`` of :func:`scipy.sparse.linalg.splu`.  SuperLU
    factorizes ``Pr A Pc = L U`` with ``Pr[perm_r[i], i] = 1`` and
    ``Pc[j, perm_c[j]] = 1``: row ``i`` and column ``j`` of the block go to
    positions ``perm_r[i]`` and ``perm_c[j]``.
    """
    import scipy.sparse as sps                  # imported here: SciPy's sparse LU is an offline tool
    from scipy.sparse.linalg import splu
    m = len(rows)
    rpos = {r: k for k, r in enumerate(rows)}
    cpos = {c: k for k, c in enumerate(cols)}
    sel = [e for e in range(pattern.nnz) if pattern.rows[e] in rpos and pattern.cols[e] in cpos]
    A = sps.csc_matrix((np.asarray(vals, float)[sel], ([rpos[pattern.rows[e]] for e in sel],
                                                        [cpos[pattern.cols[e]] for e in sel])), shape=(m, m))
    lu = splu(A, permc_spec=spec)
    inv_r = np.empty(m, dtype=np.int64)
    inv_r[lu.perm_r] = np.arange(m)
    inv_c = np.empty(m, dtype=np.int64)
    inv_c[lu.perm_c] = np.arange(m)
    return [(rows[inv_r[k]], cols[inv_c[k]]) for k in range(m)], lu


def _scatter(pattern, rpos, cpos, row_entries, col_block, block):
    """The entries of ``A`` in a block's rows (positions ``rpos``, ``cpos`` by global row and column):
    ``(slot, rowpat, colpat, (entries, rows, cols), (off rows, off entries))``, ``slot[i, j]`` the
    entry at block position ``(i, j)``, the row and column patterns, the entries inside the block
    and those left of it (in earlier blocks)."""
    m = len(rpos)
    slot = {}
    rowpat = [set() for _ in range(m)]
    colpat = [set() for _ in range(m)]
    entries, epos_r, epos_c = [], [], []
    off_pos, off_e = [], []
    for r, i in rpos.items():
        for e in row_entries[r]:
            c = int(pattern.cols[e])
            if c in cpos:
                j = cpos[c]
                slot[i, j] = e
                rowpat[i].add(j)
                colpat[j].add(i)
                entries.append(e)
                epos_r.append(i)
                epos_c.append(j)
            else:
                if col_block is not None and col_block[c] > block:
                    raise AssertionError("block rows reach a later block: not block lower triangular")
                off_pos.append(i)
                off_e.append(e)
    return slot, rowpat, colpat, (entries, epos_r, epos_c), (off_pos, off_e)


def _proof(cp, scale, articulated) -> str:
    """Why a pivot is nonzero at every state: ``"constant"`` (its constant value ``cp`` is not a
    cancellation of terms of size ``scale``), ``"articulated"``, or ``""`` (checked at run time)."""
    if cp is not None and abs(cp) > CONSTANT_RTOL * scale:
        return "constant"
    return "articulated" if articulated else ""


def symbolic_lu(pattern, pivots, row_entries, slot_base, ordering, spd=None, col_block=None, block=None):
    """Symbolic LU of the block with pivot sequence ``pivots`` (global ``(row, col)`` pairs).

    ``row_entries[r]``: entry numbers of ``A`` in row ``r``; fill slots are
    numbered from ``slot_base``.  ``spd``: pivot indices proven by the
    articulated argument.  ``col_block``/``block``: block number of every column
    and of this block (its rows' entries outside its own columns must lie in
    earlier blocks: block lower triangular).
    Returns ``(BlockFactor, next free slot)``.
    """
    spd = spd or {}
    m = len(pivots)
    rows = np.array([r for r, _ in pivots], dtype=np.int64)
    cols = np.array([c for _, c in pivots], dtype=np.int64)
    rpos = {int(r): k for k, r in enumerate(rows)}
    cpos = {int(c): k for k, c in enumerate(cols)}
    if len(rpos) != m or len(cpos) != m:
        raise ValueError(f"ordering {ordering!r}: a row or column is pivoted twice")
    slot, rowpat, colpat, (entries, epos_r, epos_c), (off_pos, off_e) = _scatter(
        pattern, rpos, cpos, row_entries, col_block, block)
    # constant propagation: the value of every slot that depends on model constants only
    cval, scale = {}, {}
    for (i, j), e in slot.items():
        cval[e] = None if pattern.cls[e] not in (ONE, CONST) else float(pattern.const[e])
        scale[e] = 0.0 if cval[e] is None else abs(cval[e])
    proof = []
    steps, lcol, ucol = [], [], [[[], []] for _ in range(m)]
    nxt = slot_base
    for k in range(m):
        if k not in rowpat[k]:
            raise ValueError(f"ordering {ordering!r}: pivot {k} ({pattern.row_label(int(rows[k]))}, "
                             f"{pattern.col_label(int(cols[k]))}) is a structural zero at its turn")
        p = slot[k, k]
        cp = cval[p]
        proof.append(_proof(cp, scale[p], k in spd))
        U = sorted(j for j in rowpat[k] if j > k)
        Lr = sorted(i for i in colpat[k] if i > k)
        u_slots = [slot[k, j] for j in U]
        l_slots = [slot[i, k] for i in Lr]
        for j, s in zip(U, u_slots):
            ucol[j][0].append(k)
            ucol[j][1].append(s)
        lcol.append((np.array(Lr, dtype=np.int64), np.array(l_slots, dtype=np.int64)))
        if Lr:
            upd = []
            for i, ls in zip(Lr, l_slots):
                li = None if cp is None or cval[ls] is None else cval[ls] / cp
                cval[ls] = li
                for j, us in zip(U, u_slots):
                    if (i, j) not in slot:
                        slot[i, j] = nxt
                        cval[nxt], scale[nxt] = 0.0, 0.0
                        nxt += 1
                        rowpat[i].add(j)
                        colpat[j].add(i)
                    dst = slot[i, j]
                    upd.append(dst)
                    if li is None or cval[us] is None or cval[dst] is None:
                        cval[dst] = None
                    else:
                        cval[dst] -= li * cval[us]
                        scale[dst] = max(scale[dst], abs(li * cval[us]))
            steps.append((k, np.array(Lr, dtype=np.int64), np.array(l_slots, dtype=np.int64),
                          np.array(u_slots, dtype=np.int64), np.array(upd, dtype=np.int64)))
    ucol = [(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)) for a, b in ucol]
    piv = np.array([slot[k, k] for k in range(m)], dtype=np.int64)
    fill = nxt - slot_base
    bf = BlockFactor(rows=rows, cols=cols, piv=piv, proof=proof, steps=steps, lcol=lcol, ucol=ucol,
                     entries=np.array(entries, dtype=np.int64),
                     entry_pos=(np.array(epos_r, dtype=np.int64), np.array(epos_c, dtype=np.int64)),
                     off=(np.array(off_pos, dtype=np.int64), np.array(off_e, dtype=np.int64)),
                     fill=fill, nnz_lu=len(entries) + fill, ordering=ordering,
                     fill_positions=[(int(rows[i]), int(cols[j])) for (i, j), sl in slot.items() if sl >= slot_base])
    return bf, nxt
