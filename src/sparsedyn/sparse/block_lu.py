"""The online phase's arithmetic on the blocks of ``A`` (:mod:`~sparsedyn.sparse.solver`): the LU
factorization of every block in the fixed order (:func:`factor_blocks`) and the block forward
substitution (:func:`substitute`), with the transform blocks applied as transforms where the block
order allows (:func:`transform_plan`).  Generic over backends: float arrays go level by level, traced
(object) arrays pivot by pivot, to the same arithmetic."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..model.spatial import apply_force_transpose, apply_motion
from .articulated import factor_articulated, substitute_articulated
from .ordering import stage_groups

__all__ = ["factor_blocks", "eliminate", "transform_plan", "apply_transform", "SolveStage", "solve_stages",
           "substitute", "update_rows"]


def factor_blocks(model, blocks, W, batch, Xup, S, monitor=None):
    """In-place LU of every block's slots of ``W`` (nslots,) + batch with the fixed order
    (articulated blocks body by body, :mod:`.articulated`; ``Xup``, ``S``: the state's joint transforms
    and motion subspaces).

    The scalar LU runs stage by stage (:meth:`~.ordering.BlockFactor.factor_stages`): on float arrays
    the pivots of a level together, which does the same arithmetic to the bit as pivot by pivot; traced
    (object arrays), one pivot a stage, in order."""
    levels = W.dtype != object
    for blk in blocks:
        if blk.plan is not None:
            factor_articulated(model, blk, W, Xup, S, monitor)
            continue
        check = monitor is not None and monitor.wants(blk)
        if check:
            monitor.checked += 1
            init = W[blk.piv]
        for sg in blk.factor_stages(levels):
            if not (check or len(sg.ls)):
                continue
            piv, lv = W[sg.piv], W[sg.ls]
            if check:
                monitor.pivots(blk, sg, piv, init[sg.ks], lv, W[sg.urow])
            eliminate(W, sg, piv, lv)


def eliminate(W, sg, piv, lv):
    """Stage ``sg`` (:class:`~.ordering.FactorStage`) of the elimination, from its pivots ``piv`` and the
    L columns' values ``lv = W[sg.ls]``: multipliers ``l_ik = a_ik / a_kk``, then the rank-1 updates
    ``a_ij -= l_ik u_kj`` (a slot updated by several pivots of the stage: in pivot order)."""
    l = lv / piv[sg.lk]
    W[sg.ls] = l
    if len(sg.upd):
        p = l[sg.ul] * W[sg.us]
        if sg.dup:
            np.subtract.at(W, sg.upd, p)
        else:
            W[sg.upd] = W[sg.upd] - p


def transform_plan(pattern, blocks):
    """Which transform blocks of ``A`` (:class:`~sparsedyn.sparse.assembly.TransformBlock`) the
    substitution applies as transforms: those whose rows lie in 1x1 blocks solved after every block
    holding one of its six columns (inverse dynamics: ``X a_lambda`` and ``X^T f_j`` once ``a_lambda``,
    ``f_j`` are known).  Applying ``Xup`` as ``(E, r)`` costs fewer operations than its 6x6 matrix
    (``E (v - r x w)`` against the entries of ``-E rx(r)``, RBDA section 2.8).

    Returns ``(first, rows, off)``: ``first[K]``: transform blocks to apply before block ``K``;
    ``rows[K]``: ``(transform block number, local row)`` contributions to block ``K``'s rows;
    ``off[K]``: block ``K``'s remaining scalar off-block entries ``(positions, entry numbers)``.
    """
    nb = len(blocks)
    row_block, col_block = {}, {}
    for K, blk in enumerate(blocks):
        for r in blk.rows.tolist():
            row_block[r] = K
        for c in blk.cols.tolist():
            col_block[c] = K
    first, rows = [[] for _ in range(nb)], [[] for _ in range(nb)]
    taken = set()
    for t, tb in enumerate(pattern.transform_blocks):
        ers = sorted(set(pattern.rows[tb.entries].tolist()))
        rb = [row_block[r] for r in ers]
        cb = [col_block[c] for c in range(tb.col0, tb.col0 + 6)]
        if any(blocks[K].size != 1 for K in rb) or max(cb) >= min(rb):
            continue
        first[min(rb)].append(t)
        for r, K in zip(ers, rb):
            rows[K].append((t, r - tb.row0))
        taken.update(tb.entries.tolist())
    off = []
    for blk in blocks:
        pos, es = blk.off
        keep = np.array([e not in taken for e in es.tolist()], dtype=bool)
        off.append((pos[keep], es[keep]) if len(es) else (pos, es))
    return first, rows, off


def apply_transform(tb, X, x, batch):
    """``T x[cols]`` (6,) + batch of transform block ``tb`` (``X``: the body's ``Xup``)."""
    xc = np.moveaxis(x[tb.col0:tb.col0 + 6], 0, -1)
    t = apply_motion(X, xc) if tb.kind == "X" else apply_force_transpose(X, xc)
    return np.moveaxis(np.broadcast_to(t, batch + (6,)), -1, 0)


class SolveStage(NamedTuple):
    """Blocks solved together by :func:`substitute`: ``block``, one block (any kind), or ``None`` for
    several 1x1 blocks, unchecked; ``rows``, ``cols`` their rows and columns (pivot order), ``piv`` the
    pivots' slots of 1x1 blocks; ``off = (positions, entry numbers)`` of their rows' entries in earlier
    blocks' columns (in entry order per row); ``tnew`` the transform blocks (:func:`transform_plan`)
    to apply first, ``tpos``, ``tidx`` the positions and transform values (``6 t + row``) subtracted
    then, in the order of each row's contributions."""

    block: object
    rows: np.ndarray
    cols: np.ndarray
    piv: np.ndarray
    off: tuple
    tnew: list
    tpos: np.ndarray
    tidx: np.ndarray


def solve_stages(st, transforms, levels):
    """The :class:`SolveStage` s of :func:`substitute` (``transforms``: with the transform plan,
    else entry by entry): one block a stage in block order (``levels=False``: traced, or every block
    checked), or the proven 1x1 blocks of each :func:`~.ordering.stage_levels` level together (every
    other block alone), which does the same arithmetic to the bit (a row's contributions keep their
    order)."""
    pattern, blocks = st.pattern, st.blocks
    first, trows, toff = st.transform_plan if transforms else (None, None, None)
    reads, writes = [], []
    for K, blk in enumerate(blocks):
        es = (toff[K] if transforms else blk.off)[1]
        cols = set(pattern.cols[es].tolist())
        for t, _ in (trows[K] if transforms else ()):
            tb = pattern.transform_blocks[t]
            cols.update(range(tb.col0, tb.col0 + 6))
        reads.append(sorted(cols))
        writes.append(blk.cols.tolist())
    groups = []
    for g in stage_groups(reads, writes, levels):
        alone = [K for K in g if blocks[K].size != 1 or not blocks[K].proven]
        together = [K for K in g if K not in alone]
        groups += ([together] if together else []) + [[K] for K in alone]
    done, stages = set(), []
    for g in groups:
        pos, es, tnew, tpos, tidx = [], [], [], [], []
        at = 0
        for K in g:
            blk = blocks[K]
            p, e = toff[K] if transforms else blk.off
            pos.append(p + at)
            es.append(e)
            for t, k in (trows[K] if transforms else ()):
                if t not in done:
                    done.add(t)
                    tnew.append(t)
                tpos.append(at)
                tidx.append(6 * t + k)
            at += blk.size
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)   # noqa: E731
        one = len(g) == 1 and (blocks[g[0]].size != 1 or not blocks[g[0]].proven or not levels)
        stages.append(SolveStage(
            blocks[g[0]] if one else None, cat([blocks[K].rows for K in g]), cat([blocks[K].cols for K in g]),
            cat([blocks[K].piv for K in g if blocks[K].size == 1]), (cat(pos), cat(es)), tnew,
            np.array(tpos, dtype=np.int64), np.array(tidx, dtype=np.int64)))
    return stages


def substitute(st, vals, W, b, batch, dtype, monitor=None, Xup=None):
    """Block forward substitution: ``x[K] = (L_K U_K)^-1 (-b[K] - A[K, earlier] x[earlier])``.

    ``Xup``: the joint transforms of the state; with them, the transform blocks of
    :func:`transform_plan` are applied as transforms (without, entry by entry).  Float arrays go
    stage by stage (:func:`solve_stages`; the LU blocks' substitutions too), traced ones block by block."""
    pattern = st.pattern
    x = np.zeros((pattern.n,) + batch, dtype=dtype)
    levels = np.dtype(dtype) != object and (monitor is None or monitor.mode != "all")
    transforms = Xup is not None
    tv = np.zeros((6 * len(pattern.transform_blocks),) + batch, dtype=dtype) if transforms else None
    for sg in st.solve_stages(transforms, levels):
        z = -b[sg.rows]
        pos, es = sg.off
        if len(es):
            np.subtract.at(z, pos, vals[es] * x[pattern.cols[es]])
        for t in sg.tnew:
            tb = pattern.transform_blocks[t]
            tv[6 * t:6 * t + 6] = apply_transform(tb, Xup[tb.body], x, batch)
        if len(sg.tpos):
            np.subtract.at(z, sg.tpos, tv[sg.tidx])
        blk = sg.block
        check = blk is not None and monitor is not None and monitor.wants(blk)
        if check:
            rhs = z.copy()
        if blk is None or blk.size == 1:                 # 1x1 blocks (most of them): their pivots alone
            z = z / W[sg.piv]
        elif blk.plan is not None:
            substitute_articulated(st.model, blk, W, z)
        else:
            fwd, back = blk.solve_stages(levels)
            for ss in fwd:                               # unit lower triangular L, by columns
                update_rows(z, ss, W[ss.slots] * z[ss.src])
            for ss in back:                              # upper triangular U, by columns
                z[ss.ks] = z[ss.ks] / W[ss.piv]
                if len(ss.pos):
                    update_rows(z, ss, W[ss.slots] * z[ss.src])
        x[sg.cols] = z
        if check:
            monitor.residual(blk, vals, z, rhs, batch)
    return x


def update_rows(z, ss, p):
    """``z[ss.pos] -= p`` (:class:`~.ordering.SubstituteStage`; a position updated twice: in order)."""
    if ss.dup:
        np.subtract.at(z, ss.pos, p)
    else:
        z[ss.pos] = z[ss.pos] - p
