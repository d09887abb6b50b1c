"""A batch of states of a scene as the compiled step's data, with no Python work per state:
:func:`scene_batch_slot_data`.

:func:`~sparsedyn.contact.scene_data.scene_slot_data` lays out the contacts of one state from one call
of the collision kernel; for a batch ``Q`` (B, nq) the same kernel runs once on all states (the batch
runtime's threads), and the candidates within the margin are placed in the scene's slots by array
operations over the whole batch: the layout grows to the most contacts any state has on a slot key (as
the single steps of those states one after the other would grow it), and each state's contacts of a
key fill that key's slots in order (as :func:`~sparsedyn.contact.scene_data.scene_slot_data` fills
them), so a state's data are those of its single step in the same layout.
"""

from __future__ import annotations

import numpy as np

from ..kernels import use_backend
from .collision_kernel import collision_candidates
from .friction_problem import ContactSlots
from .scene_data import _filler, _plan

__all__ = ["scene_batch_slot_data"]


def _grow(scene, keys, counts):
    """Grow the scene's slot layout so that each slot key of ``keys`` holds the most contacts
    ``counts`` (B, nk) any state has on it (the power of two that holds them, as the single road)."""
    layout = scene.cache.setdefault("step_slots", {})     # shared with the single road: it only grows
    most = counts.max(0) if len(counts) else np.zeros(len(keys), int)
    for k in np.flatnonzero(most).tolist():
        n = int(most[k])
        if layout.get(keys[k], 0) < n:
            layout[keys[k]] = 1 << (n - 1).bit_length()
    return layout


def _ranks(group, sizes):
    """The rank of each element of ``group`` (n,) among the elements of its group before it
    (``sizes`` (G,): the elements per group)."""
    order = np.argsort(group, kind="stable")
    starts = np.cumsum(sizes) - sizes
    rank = np.empty(len(group), int)
    rank[order] = np.arange(len(group)) - starts[group[order]]
    return rank


def scene_batch_slot_data(scene, Q):
    """``(pair, slot, ends, slots)`` of the states ``Q`` (B, nq) of ``scene``: the contacts of all
    states in order, state by state, each its scene pair (an index of ``scene.pairs``) in ``pair``
    (n,) and its slot in ``slot`` (n,), state ``b``'s contacts those from ``ends[b]`` to ``ends[b + 1]``
    (``ends`` (B + 1,)); and :class:`~sparsedyn.contact.friction_problem.ContactSlots` of all
    (``frames``: the scene's grown layout, ``index`` None, ``data`` (B, ns, 8), each state's free
    slots open), state ``b``'s data those of ``scene_slot_data(scene, Q[b])`` in the same layout.
    ``None`` where the collision kernel's road does not apply (as for
    :func:`~sparsedyn.contact.scene_data.scene_slot_data`)."""
    if use_backend.current() == "numpy":
        return None
    plan = _plan(scene)
    if plan is None:
        return None
    kp, kid, keys, E, r, mu, moved = plan
    B, nk = len(Q), len(keys)
    c = collision_candidates(scene.model, Q, kp.shapes, kp.pairs).reshape(B, len(kid), -1)
    b, j = (c[..., 0] < scene.margin).nonzero()           # by state, then in the candidates' order
    group = b * nk + kid[j]
    counts = np.bincount(group, minlength=B * nk)
    layout = _grow(scene, keys, counts.reshape(B, nk))
    frames, first, _, free = _filler(scene, keys, layout)
    slot = np.asarray(first, int)[kid[j]] + _ranks(group, counts)
    rows = c[b, j, 6:14]                                   # [w_b z, w_a in body a (3), n (3), n . w_b]
    rows[:, 0] = mu[j]                                     # -> [mu, p (3), n (3), offset]
    if moved:                                              # body axes -> the slot frame's (E, r in the body)
        rows[:, 1:4] = np.einsum("kij,kj->ki", E[j], rows[:, 1:4] - r[j])
    data = np.repeat(free[None], B, 0)
    data[b, slot] = rows
    ends = np.concatenate([[0], np.cumsum(np.bincount(b, minlength=B))])
    return kp.pair[j], slot, ends, ContactSlots(frames, None, data)
