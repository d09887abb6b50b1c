"""A batch of states of a scene as the compiled step's data, with no Python work per state:
:func:`scene_batch_slot_data`.

:func:`~sparsedyn.contact.scene_data.scene_slot_data` lays out the contacts of one state from one call
of the collision kernel (a step's: :func:`~sparsedyn.collision_candidates_ahead`, each pair's
look-ahead from the state's velocity in the same call); for a batch ``Q`` (B, nq) the same kernel
runs once on all states (the batch runtime's threads, each state the single state's scalar code, so
its rows are the single call's to the bit), and the candidates within their look-ahead are placed in
the scene's slots by array operations over the whole batch: the layout grows to the most contacts any
state has on a slot key (as the single steps of those states one after the other would grow it), and
each state's contacts of a key fill that key's slots in order (as
:func:`~sparsedyn.contact.scene_data.scene_slot_data` fills them), so a state's data are those of its
single step in the same layout.  Where the scene's steps run in data slots
(:mod:`~sparsedyn.contact.data_slots`) those are made from the same rows as the single step makes
them (each state's contacts in its first slots, the point ``x + d n / 2`` in the world), not from the
per-body slots: the step of each state is then its single step's to the bit, and the batch costs
the solve and the collision kernel, plus a few array operations over all contacts.
"""

from __future__ import annotations

import os

import numpy as np

from ..kernels import native_function, use_backend
from ..kernels.threads import batch_pool
from .collision_near import NEAR_COLUMNS
from .friction_problem import ContactSlots, turned_impulses
from .look_ahead import STEP_CAPACITY, capacity_mask
from .mesh_plane_step import found_stages
from .data_slots import data_slots_of_rows
from .scene_data import (SLOT_COLUMNS, _Mixed, _filler, _mixed_candidates, _mixed_plan, _plan, ahead_candidates,
                         near_candidates)

__all__ = ["scene_batch_slot_data", "batch_contacts", "BatchContacts", "batch_warm_start"]


def _grow(scene, keys, most):
    """Grow the scene's slot layout so that each slot key of ``keys`` holds ``most`` (nk,) contacts,
    the most any state has on it (the power of two that holds them, as the single road)."""
    layout = scene.cache.setdefault("step_slots", {})     # shared with the single road: it only grows
    for k in np.flatnonzero(most).tolist():
        n = int(most[k])
        if layout.get(keys[k], 0) < n:
            layout[keys[k]] = 1 << (n - 1).bit_length()
    return layout


def _runs(g):
    """``(starts, sizes)`` of the runs of equal entries of the sorted ``g`` (n,): where each begins, how long."""
    new = np.empty(len(g), bool)
    new[:1] = True
    np.not_equal(g[1:], g[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    bounds = np.empty(len(starts) + 1, int)
    bounds[:-1], bounds[-1] = starts, len(g)
    return starts, bounds[1:] - bounds[:-1]


def _ranks(group, nk):
    """``(rank, most)``: the rank of each element of ``group`` (n,) among the elements of its group
    before it, and per key ``g % nk`` the largest group (nk,); no array per group (a batch of a
    thousand humanoid states has 79,000 groups, seven thousand elements)."""
    order = np.argsort(group, kind="stable")
    g = group[order]
    starts, sizes = _runs(g)
    rank = np.empty(len(g), int)
    rank[order] = np.arange(len(g)) - np.repeat(starts, sizes)      # (each sorted element's group's start)
    most = np.zeros(nk, int)
    np.maximum.at(most, g[starts] % nk, sizes)
    return rank, most


def _candidates(scene, kp, Q, cutoff, ahead):
    """``(c, within, d)``: the candidates (B, K, 11) of the plan ``kp`` at the states ``Q`` (B, nq), the
    cutoff each is compared with (broadcast to (B, K)) and their distances (B, K) (``c[..., 0]``, or a
    contiguous copy of it), as the single step of each state finds
    them: with ``ahead`` ``(V (B, nv) or (nv,), dt)`` the look-ahead from each state's velocity in
    the collision kernel's call (:func:`~sparsedyn.collision_candidates_ahead`, the single step's
    own), else within ``cutoff`` (B, P) or the margin; None where a pair of no rows may touch."""
    B, K = len(Q), len(kp.pair)
    if isinstance(kp, _Mixed):                             # robot meshes on world shapes: their rows
        if not B:
            return np.zeros((0, K, NEAR_COLUMNS)), np.zeros((0, K)), np.zeros((0, K))
        q = np.asarray(Q, float)
        if ahead is not None:
            V = np.broadcast_to(ahead[0], (B, scene.model.nv))
            got = _each_state(scene, kp, q, V, ahead[1]) or _mixed_candidates(scene, kp, q, None, (V, ahead[1]))
        else:
            got = _mixed_candidates(scene, kp, q, None if cutoff is None else
                                    np.broadcast_to(cutoff, (B, len(scene.index))), None)
        return got if got is None or len(got) == 3 else (*got, got[0][..., 0])
    if ahead is not None:
        c, within = ahead_candidates(scene, kp, Q, *ahead)
        c = c.reshape(B, K, NEAR_COLUMNS)
        return c, within.reshape(B, K), c[..., 0]
    c = near_candidates(scene, kp, Q, cutoff).reshape(B, K, NEAR_COLUMNS)   # far pairs: [b > cutoff, 0, ...]
    within = scene.margin if cutoff is None else np.broadcast_to(cutoff, (B, len(scene.index)))[:, kp.pair]
    return c, within, c[..., 0]


def _each_state(scene, mixed, Q, V, dt):
    """``(c (B, K, 11), within (B, K), d (B, K))`` (:func:`_candidates`') of the plan ``mixed`` of robot meshes on
    world planes or pairs of two boxes at the states ``Q`` (B, nq) and velocities ``V`` (B, nv) for a step of ``dt``:
    each state's as its single step finds them (its native routines, which the general road runs in NumPy for all
    states at once; in one call where they are its call's stages, :func:`_staged`), stacked; None where the plan
    has neither, on the NumPy road, or where a state's candidates are not a row table of the others' shape."""
    if use_backend.current() == "numpy" or (mixed.mesh is None and mixed.bb is None):
        return None
    Q, V = np.ascontiguousarray(Q, float), np.ascontiguousarray(V, float)
    got = _staged(scene, mixed, Q, V, dt)
    if got is not None:
        return got
    c = within = None
    for b, (q, v) in enumerate(zip(Q, V)):
        one = _mixed_candidates(scene, mixed, q, None, (v, dt), fresh=False)      # (this thread's buffers)
        if one is None:
            return None
        if c is None:
            c, within = np.empty((len(Q),) + one[0].shape), np.empty((len(Q),) + one[1].shape)
        elif one[0].shape != c.shape[1:] or one[1].shape != within.shape[1:]:
            return None
        c[b], within[b] = one
    return c, within, c[..., 0]


def _staged(scene, mixed, Q, V, dt):
    """:func:`_each_state`'s answer in one native call (``found_batch``) where the plan's candidates come from
    the stages its single step runs in its own call (:func:`~sparsedyn.contact.mesh_plane_step.found_stages`,
    this thread's buffers): the same stages at each state, so the same rows (their distances also written
    apart: a table of mostly far rows is large, and read for them alone it is read from memory); runs of
    :data:`PER_THREAD` states or more on threads at once, each with its own buffers.  None where they are not
    bound or decline at a state (each state's own road then says why)."""
    run, B = native_function("found_batch"), len(Q)
    kept = run is not None and B and found_stages(scene, mixed, Q[0], V[0])
    if not kept:
        return None
    c, within, d = np.empty((B,) + kept[0][0].shape), np.empty((B,) + kept[0][1].shape), \
        np.empty((B,) + kept[0][1].shape)

    def part(lo, hi, got=None):                    # states lo to hi on this thread's buffers
        got = got or found_stages(scene, mixed, Q[lo], V[lo])
        if not got or got[0][0].shape != c.shape[1:]:
            return None
        found, md, last = got
        if dt != last[0]:                          # (the step's dt, read by the routine: written once)
            md[1] = last[0] = dt
        return run(found, Q[lo:hi], V[lo:hi], c[lo:hi], within[lo:hi], d[lo:hi])

    ends = np.linspace(0, B, max(1, min(os.cpu_count() or 1, B // PER_THREAD)) + 1).astype(int).tolist()
    pool = batch_pool(len(ends) - 2) if len(ends) > 2 else None
    others = [pool.submit(part, lo, hi) for lo, hi in zip(ends[1:-1], ends[2:])]
    ran = [part(ends[0], ends[1], kept)] + [f.result() for f in others]
    return (c, within, d) if all(x is True for x in ran) else None


#: The fewest states a thread of :func:`_staged` takes (the routines of a thousand states: a few milliseconds).
PER_THREAD = 128


class BatchContacts:
    """The contacts of a batch of states laid out (:func:`batch_contacts`), all states' in order, state
    by state: ``pair`` (n,) each one's scene pair, ``slot`` (n,) its slot in the per-body layout
    ``frames`` (the scene's grown layout), ``ends`` (B + 1,) state ``b``'s contacts those from
    ``ends[b]`` to ``ends[b + 1]``, ``counts`` (B,) their numbers; ``rows`` (n, 8) their per-body
    rows ``[mu, p (3, the slot frame's axes), n (3), offset]`` and ``data`` (B, ns, 8) the per-body
    slots of every state (its free ones open), both made when first read (a step in data slots
    reads them only along a trajectory: the warm start of the next step); ``laid`` the same contacts
    in the scene's data slots (a :class:`~sparsedyn.contact.friction_problem.ContactSlots`, each
    state's in its first slots in order), or None where not asked."""

    __slots__ = ("pair", "slot", "ends", "counts", "frames", "laid", "_x", "_j", "_plan", "_b", "_free", "_rows",
                 "_data", "_even")

    def __init__(self, pair, slot, ends, counts, frames, laid, x, j, plan, b, free):
        self.pair, self.slot, self.ends, self.counts, self.frames, self.laid = pair, slot, ends, counts, frames, laid
        self._x, self._j, self._plan, self._b, self._free = x, j, plan, b, free
        self._rows = self._data = self._even = None

    @property
    def even(self):
        """``c`` where every state has ``c`` contacts in its first ``c`` per-body slots, in order (a
        box flat on a plane: its four corners), else -1.  Where ``c >= 0`` the contacts, state by
        state, are a (B, c) grid of slots: placed and split with no index per contact."""
        if self._even is None:
            counts, B = self.counts, len(self.counts)
            c = int(counts[0]) if B else 0
            self._even = c if B and (counts == c).all() and (self.slot.reshape(B, c) == np.arange(c)).all() else -1
        return self._even

    @property
    def rows(self):
        if self._rows is None:
            _, _, _, E, r, mu, moved = self._plan
            j, rows = self._j, np.empty((len(self._j), 8))
            rows[:, 0] = mu[j]
            rows[:, 1:] = self._x[:, SLOT_COLUMNS]             # [w_a in body a (3), n (3), n . w_b]
            if moved:                                          # body axes -> the slot frame's (E, r in the body)
                rows[:, 1:4] = np.einsum("kij,kj->ki", E[j], rows[:, 1:4] - r[j])
            self._rows = rows
        return self._rows

    @property
    def data(self):
        if self._data is None:
            c, free = self.even, self._free
            if c >= 0:                                         # (each state's first c slots filled, the rest free)
                data = np.empty((len(self.counts),) + free.shape)
                data[:, :c], data[:, c:] = self.rows.reshape(len(data), c, 8), free[c:]
            else:
                data = np.repeat(free[None], len(self.counts), 0)
                data[self._b, self.slot] = self.rows
            self._data = data
        return self._data


def batch_contacts(scene, Q, cutoff=None, ahead=None, data_slots=False):
    """The contacts of the states ``Q`` (B, nq) of ``scene`` laid out, a :class:`BatchContacts`
    (:func:`scene_batch_slot_data`: the same contacts, slots and data), or None where the collision
    kernel's road does not apply.  The kernel's candidates of all states are read once: which enter
    (each state's within their look-ahead, no more than the compiled step holds where the others
    are beyond the step's reach: the single step's rule, all states at once), then the rows of
    those alone; with ``data_slots`` their data slots (``laid``), the per-body rows and data made
    only when read."""
    plan = (_plan(scene) or _mixed_plan(scene)) if use_backend.current() != "numpy" else None
    if plan is None:
        return None
    kp, kid, keys, E, r, mu, moved = plan
    B, nk = len(Q), len(keys)
    got = _candidates(scene, kp, Q, cutoff, ahead)
    if got is None:                                        # (a pair of no rows may touch: _mixed_candidates)
        return None
    c, within, d = got
    K = c.shape[1]
    mask = d < within
    f = np.flatnonzero(mask)                               # by state, then in the candidates' order
    b = f // K if K else f
    counts = np.bincount(b, minlength=B)
    if counts.max(initial=0) > STEP_CAPACITY:              # a state beyond the step's capacity
        f = np.flatnonzero(capacity_mask(d, np.broadcast_to(within, d.shape), mask, scene.margin,
                                         STEP_CAPACITY))
        b = f // K
        counts = np.bincount(b, minlength=B)
    j = f - b * K
    x = c.reshape(B * K, NEAR_COLUMNS).take(f, 0)          # (n, 11) the contacts' rows
    kj = kid.take(j)
    rank, most = _ranks(b * nk + kj, nk)
    layout = _grow(scene, keys, most)
    frames, first, _, free = _filler(scene, keys, layout)
    slot = np.asarray(first, int).take(kj) + rank
    ends = np.zeros(B + 1, int)
    np.cumsum(counts, out=ends[1:])
    laid = None
    if data_slots:
        # the single road's data slot rows (scene_data._data_slots): [mu, w_a, n, offset], the point
        # w_a = x + d n / 2 in the world (the same operations, so the same bits)
        rows = np.empty((len(f), 8))
        rows[:, 0] = mu.take(j)
        w = rows[:, 1:4]
        np.multiply(x[:, :1], x[:, 4:7], out=w)
        w *= 0.5
        w += x[:, 1:4]
        rows[:, 4:7], rows[:, 7] = x[:, 4:7], x[:, 10]
        laid = data_slots_of_rows(scene, counts, keys, kj, rows)
    return BatchContacts(kp.pair[j], slot, ends, counts, frames, laid, x, j, plan, b, free)


def scene_batch_slot_data(scene, Q, cutoff=None, ahead=None, data_slots=False):
    """``(pair, slot, ends, slots)`` of the states ``Q`` (B, nq) of ``scene``: the contacts of all
    states in order, state by state, each its scene pair (an index of ``scene.pairs``) in ``pair``
    (n,) and its slot in ``slot`` (n,), state ``b``'s contacts those from ``ends[b]`` to ``ends[b + 1]``
    (``ends`` (B + 1,)); and :class:`~sparsedyn.contact.friction_problem.ContactSlots` of all
    (``frames``: the scene's grown layout, ``index`` None, ``data`` (B, ns, 8), each state's free
    slots open), state ``b``'s data those of ``scene_slot_data(scene, Q[b], cutoff[b])`` in the same
    layout (``cutoff`` (B, P): each state's look-ahead per pair, the kernel's cutoff the largest of
    all; None: the margin; ``ahead`` ``(V, dt)``: each state's look-ahead from its velocity ``V``
    (B, nv) or (nv,) for a step of ``dt`` computed in the collision kernel's call instead, as
    ``scene_slot_data(scene, Q[b], ahead=(V[b], dt))``); each state keeps no more than the compiled step
    holds where its others are beyond the step's reach, as its single step
    (:func:`~sparsedyn.contact.look_ahead.capacity_mask`).
    ``data_slots``: a fifth entry, the same contacts in the scene's data slots
    (:func:`~sparsedyn.contact.data_slots.data_slots_of_rows`: each state's in its first slots, in
    order, their data those of ``scene_slot_data(..., data_slots=True)``, bit for bit).
    ``None`` where the collision kernel's road does not apply (as for
    :func:`~sparsedyn.contact.scene_data.scene_slot_data`).  (:func:`batch_contacts` lays them out.)"""
    got = batch_contacts(scene, Q, cutoff, ahead, data_slots)
    if got is None:
        return None
    out = got.pair, got.slot, got.ends, ContactSlots(got.frames, None, got.data)
    return out + (got.laid,) if data_slots else out


def _nearest(rows, cols, d):
    """Per row of the candidate matches ``(rows, cols, d)`` (``rows`` ascending, each row's ``cols``
    ascending): the first of its nearest (the lowest ``col`` among equal distances), as ``(rows, cols, d)``
    of the rows that have candidates at a distance that is a number."""
    if not len(rows):
        return rows, cols, d
    starts, sizes = _runs(rows)
    at = np.flatnonzero(d == np.repeat(np.fmin.reduceat(d, starts), sizes))     # (each row's nearest: the first)
    first = at[np.r_[True, rows[at[1:]] != rows[at[:-1]]]]
    return rows[first], cols[first], d[first]


def _greedy(rows, cols, d, radius):
    """:func:`~sparsedyn.contact.scene_step.matched_warm_start`'s matching of one state's candidates:
    each row in order takes its nearest column within ``radius`` that no row before it took."""
    taken, out = set(), []
    for i in np.unique(rows).tolist():
        at = (rows == i) & (d <= radius) & ~np.isin(cols, list(taken))
        if at.any():
            r, c, _ = _nearest(rows[at], cols[at], d[at])
            taken.add(int(c[0]))
            out.append((i, int(c[0])))
    return out


def batch_warm_start(before, impulses, now, radius):
    """Impulses (n1, 3) to start the contacts ``now`` of a batch from, given the contacts ``before`` of
    the step before and their ``impulses`` (n0, 3): each contact as
    :func:`~sparsedyn.contact.scene_step.matched_warm_start` starts it, state by state, for all states
    at once.  ``before``, ``now``: ``(state, pair, points, planes)`` of the contacts of a batch in order
    (their state (n,), scene pair (n,), point (n, 3) in their body's slot frame and plane (n, 4)).
    Where two contacts of a state have the same nearest contact before, that state is matched in
    order as the single step matches it (the first takes it).  A state whose contacts are those before,
    pair, point and plane (a box resting or sliding on a floor: its corners), keeps their impulses."""
    (s0, l0, p0, planes0), (s1, l1, p1, planes1) = before, now
    lam = np.asarray(impulses, float).reshape(-1, 3)
    if not len(s0) or not len(s1):
        return np.zeros((len(s1), 3))
    if len(s0) == len(s1) and (s0 == s1).all():            # as many contacts in each state: row by row
        moved = np.zeros(int(s1.max()) + 1, bool)
        moved[s1[(l0 != l1) | (p0 != p1).any(1) | (planes0 != planes1).any(1)]] = True
        rest = moved[s1]                                    # (each contact of the others its own nearest)
        if rest.any():
            out = lam.copy()
            out[rest] = _matched((s0[rest], l0[rest], p0[rest], planes0[rest]), lam[rest],
                                 (s1[rest], l1[rest], p1[rest], planes1[rest]), radius)
            return out
        return lam.copy()
    return _matched(before, lam, now, radius)


def _matched(before, lam, now, radius):
    """:func:`batch_warm_start` of the contacts ``before`` and ``now`` (none empty), ``lam`` (n0, 3) the impulses
    before, by the single step's matching."""
    (s0, l0, p0, planes0), (s1, l1, p1, planes1) = before, now
    out = np.zeros((len(s1), 3))
    width = int(max(l0.max(), l1.max())) + 1
    key0, key1 = s0 * width + l0, s1 * width + l1           # a match is within one state and one pair
    order = np.argsort(key0, kind="stable")
    lo = np.searchsorted(key0[order], key1, "left")
    count = np.searchsorted(key0[order], key1, "right") - lo
    rows = np.repeat(np.arange(len(s1)), count)
    cols = order[np.repeat(lo, count) + np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)]
    gap = [p1[:, k].take(rows) - p0[:, k].take(cols) for k in range(3)]
    d = np.sqrt((gap[0] * gap[0] + gap[1] * gap[1]) + gap[2] * gap[2])       # (the single matching's sums)
    i, j, dij = _nearest(rows, cols, d)
    keep = dij <= radius
    i, j = i[keep], j[keep]
    seen, times = np.unique(j, return_counts=True)
    clash = np.unique(s1[i][np.isin(j, seen[times > 1])])   # (a contact before is of one state only)
    if len(clash):                                          # taken twice: those states in order
        alone = ~np.isin(s1[i], clash)
        pairs = [(i[alone], j[alone])]
        for state in clash.tolist():
            at = s1[rows] == state
            got = _greedy(rows[at], cols[at], d[at], radius)
            pairs.append((np.array([a for a, _ in got], int), np.array([b for _, b in got], int)))
        i, j = (np.concatenate(x) for x in zip(*pairs))
    if len(i):                                              # as the single matching: a state whose normals
        turns = np.zeros(int(s1.max()) + 1, bool)
        turns[s1[i[(planes1[i, :3] != planes0[j, :3]).any(1)]]] = True
        t = turns[s1[i]]
        out[i[~t]] = lam[j[~t]]                             # stay (a floor) keeps its frames, else all turn
        if t.any():
            out[i[t]] = turned_impulses(planes1[i[t]], planes0[j[t]], lam[j[t]])
    return out
