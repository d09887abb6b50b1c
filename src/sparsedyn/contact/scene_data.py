"""A scene's contacts as the compiled step's data, straight from the collision kernel: :func:`scene_slot_data`.

:func:`~sparsedyn.contact.scene_step.scene_slots` lays out :class:`~sparsedyn.Contact` objects made
from :func:`~sparsedyn.collide`'s hits; on the default (native) road this module gives the same
:class:`~sparsedyn.contact.friction_problem.ContactSlots` with no object per hit: one native call of
:func:`~sparsedyn.contact.collision_kernel.collision_candidates` on the scene's pairs
(the witness point already in its body's axes), the candidates within the margin as rows
``[mu, p (3), n (3), n . w_b]`` (a pair of two robot shapes, self-collision, in a two-body slot
keyed by the pair of its bodies' slot frames), placed in the scene's slots (the same growing layout, kept in
``scene.cache``) by a table kept while the layout stays.
"""

from __future__ import annotations

import numpy as np

from ..kernels import use_backend
from .collision_kernel import collision_candidates, kernel_plan
from .friction_problem import ContactSlots, fill_slots

__all__ = ["scene_slot_data"]


def _slot_frames(model):
    """Body -> ``(frame, E, r)``: the frame that holds its contacts' slots (as
    :func:`~sparsedyn.contact.friction_problem.contact_slots` chooses it: the body's first frame of
    identity placement, else its first frame) and that frame's placement in the body (``E``, ``r``)."""
    own, first = {}, {}
    for j, f in enumerate(model.frames):
        if f.body < 0:
            continue
        first.setdefault(f.body, (j, f.X.E, f.X.r))
        if f.body not in own and np.array_equal(f.X.E, np.eye(3)) and not np.any(f.X.r):
            own[f.body] = (j, np.eye(3), np.zeros(3))
    return {**first, **own}


def _plan(scene):
    """``(kernel plan, key id per candidate (K,), the slot keys, E, r, friction per candidate, moved)``
    (``E``, ``r``: the slot frame of ``a``'s body in the body, ``moved``: whether one is not the body's
    own), or None where the scene's pairs are not all the kernel's or a touching body has no frame.  A
    candidate of a robot-world pair is keyed by the slot frame of ``a``'s body, one of two robot
    shapes by the pair of slot frames ``(frame_a, frame_b)`` (a two-body slot, as
    :func:`~sparsedyn.contact.friction_problem.contact_slots` keys a
    :class:`~sparsedyn.contact.friction_problem.BodyContact`)."""
    key = "slot data plan"
    if key in scene.cache:
        return scene.cache[key]
    kp = kernel_plan(scene)
    frames = _slot_frames(scene.model)
    ends = [(scene.shapes[i].body, scene.shapes[j].body) for i, j in scene.index[kp.pair].tolist()]
    plan = None
    if kp.pairs and kp.complete and all(a in frames and (b < 0 or b in frames) for a, b in ends):
        f = [frames[a] for a, _ in ends]
        keys = [x[0] if b < 0 else (x[0], frames[b][0]) for x, (_, b) in zip(f, ends)]
        ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        E, r = np.array([x[1] for x in f]).reshape(-1, 3, 3), np.array([x[2] for x in f]).reshape(-1, 3)
        moved = not (np.array_equal(E, np.broadcast_to(np.eye(3), E.shape)) and not r.any())
        plan = (kp, np.array([ids[k] for k in keys], int), list(ids), E, r, scene.pair_friction[kp.pair], moved)
    scene.cache[key] = plan
    return plan


def _filler(scene, keys, layout):
    """``(slots, first, end, free data)`` of the scene's slot layout, kept while it stays: per slot key
    of ``keys`` its first slot and the one after its last (both 0 where it has none)."""
    snap = (len(layout), sum(layout.values()))            # the layout only grows: this changes with it
    got = scene.cache.get("slot filler")
    if got is None or got[0] != snap:
        slots, _, data = fill_slots([], layout, np.zeros((0, 8)))
        at = {}
        for i, k in enumerate(slots):
            at.setdefault(k, i)
        first = [at.get(k, 0) for k in keys]
        got = scene.cache["slot filler"] = (snap, slots, first, [f + layout.get(k, 0) for f, k in zip(first, keys)],
                                            data)
    return got[1:]


def _slot_index(ids, first, end):
    """The slot of each candidate of key ids ``ids`` (a list), those of a key in its slots in order, or
    None where a key has more than its slots."""
    nxt = first.copy()
    index = []
    for k in ids:
        i = nxt[k]
        if i >= end[k]:
            return None
        nxt[k] = i + 1
        index.append(i)
    return index


def scene_slot_data(scene, q):
    """``(pair, slots)``: the scene pair (an index of ``scene.pairs``) of each contact of ``scene`` at
    ``q`` (nq,) (nc,) and their :class:`~sparsedyn.contact.friction_problem.ContactSlots` (those of
    ``scene_slots(scene, scene_contacts(scene, q))`` to rounding, the layout grown as there), or
    ``None`` where this road does not apply (the NumPy backend, a pair of kinds without a closed form
    in the kernel, a touching body with no frame): then take that road."""
    if use_backend.current() == "numpy":
        return None
    plan = _plan(scene)
    if plan is None:
        return None
    kp, kid, keys, E, r, mu, moved = plan
    c = collision_candidates(scene.model, q, kp.shapes, kp.pairs)
    sel = (c[:, 0] < scene.margin).nonzero()[0]
    ids = kid[sel].tolist()
    layout = scene.cache.setdefault("step_slots", {})     # shared with scene_slots: it only grows
    slots, first, end, free = _filler(scene, keys, layout)
    index = _slot_index(ids, first, end)
    if index is None:                                      # a key outgrew its slots: the layout grows
        for k in set(ids):
            n = ids.count(k)
            if layout.get(keys[k], 0) < n:
                layout[keys[k]] = 1 << (n - 1).bit_length()
        slots, first, end, free = _filler(scene, keys, layout)
        index = _slot_index(ids, first, end)
    rows = c.take(sel, 0)[:, 6:14]                         # [w_b z, w_a in body a (3), n (3), n . w_b]
    rows[:, 0] = mu[sel]                                   # -> [mu, p (3), n (3), offset]
    if moved:                                              # body axes -> the slot frame's (E, r in the body)
        rows[:, 1:4] = np.einsum("kij,kj->ki", E[sel], rows[:, 1:4] - r[sel])
    data, index = free.copy(), np.array(index, int)
    data[index] = rows
    return kp.pair[sel], ContactSlots(slots, index, data)
