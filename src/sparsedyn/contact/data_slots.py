"""A scene's contacts in slots whose body is data: one build of the step per number of slots.

:func:`~sparsedyn.contact.scene_step.scene_slots` lays out a step's contacts per body (each body's
point fixed in its frame), and the compiled step is built per tuple of slot frames: every body that
touches for the first time, or outgrows its slots, is a new build (a humanoid rolling onto stairs
makes dozens).  Here the same contacts go
into :data:`~sparsedyn.contact.friction_problem.DATA_SLOT` slots, the first ``nc`` of a layout of
``2^k`` or ``3 * 2^(k-2)`` slots in all (:func:`least_slots`): each slot's data is its point in the world, its plane,
its friction and the joint weights of its bodies (:func:`~sparsedyn.contact.friction_problem.slot_weights`: 1 on
the joints that move ``a``, less 1 on ``b``'s), so its rows are ``J_a(x) - J_b(x)`` with the body
chosen by data.  The structure is the number of slots alone; the scene's layout starts at
:data:`MIN_DATA_SLOTS`, grows to the least count that holds a step's contacts where they do not fit and
shrinks back when they have fit in fewer slots for :data:`SHRINK_AFTER` steps (:func:`data_slot_count`): a
scene builds at most the seven counts 8, 12, 16, 24, 32, 48 and 64 (48 and 64 only where a step's reachable
contacts alone are more than :data:`~sparsedyn.contact.look_ahead.STEP_CAPACITY`),
each reused by every contact set it holds, whichever bodies touch.

The problem is the per-body layout's (the same rows, gaps and friction: the same solution to the
solver's tolerance); free slots are open (their plane 1000 km below their point, zero weights) and
leave the problem; the step's block products skip them (past the last slot with joint weights, and
past the last closed contact: :mod:`~sparsedyn.codegen.emit_bounds`), its element-by-element code
still carries their rows.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kinematics import frame_placements
from .friction_problem import DATA_SLOT, FREE_PLANE, ContactSlots, StepArrays, slot_frames, slot_weights

__all__ = ["data_slots", "data_slot_count", "data_slot_base", "step_slots", "batch_slots", "data_slots_of_rows",
           "runs_per_body", "key_weights", "empty_data_slots",
           "data_slots_used", "in_least_slots", "least_slots", "steps_to_shrink", "MIN_DATA_SLOTS", "SHRINK_AFTER"]

#: The fewest slots of a scene's step (a humanoid lying on the floor touches with 9 to 11 points, which 12 hold).
MIN_DATA_SLOTS = 8

#: Single steps in a row whose contacts fit in fewer data slots before the scene's count shrinks to
#: them (:func:`data_slot_count`).  A shrink the contacts undo costs a single step one step on the Python
#: road (its native call declines a step its slots do not hold; a rollout's chain ends and the next runs
#: in the grown count's plan; the kernels and plans of every count stay built); a count too large costs
#: each step the larger solve.  16 bounds the first to one step in 17 where the contacts swing across two
#: counts, and the second to 16 steps after they drop.
SHRINK_AFTER = 16


def runs_per_body(scene):
    """Whether the steps of ``scene`` run in per-body slots: where one robot body alone is in the
    scene's pairs, its layout only doubles (a handful of builds), and the per-body step is the faster
    (its rows touch the body's own joints, its slots are the contacts': a box on a floor 18 us against
    30-50 us in data slots); else in data slots (``scene.cache``)."""
    one = scene.cache.get("one touching body")
    if one is None:
        bodies = {scene.shapes[k].body for k in np.ravel(scene.index).tolist()} - {-1}
        one = scene.cache["one touching body"] = len(bodies) <= 1
    return one


def step_slots(scene, q, slots) -> ContactSlots:
    """The slots a single step in ``scene`` at ``q`` (nq,) runs in: the per-body ``slots`` (of
    :func:`~sparsedyn.contact.scene_step.scene_slots`) where one robot body alone can touch, else
    :func:`data_slots` of them."""
    return slots if runs_per_body(scene) else data_slots(scene, q, slots)


def batch_slots(scene, Q, frames, data, index):
    """The slots a batch's step runs in, as :func:`step_slots` for one state: the per-body layout
    ``(frames, data (B, ns, 8), index)`` unchanged, or :func:`data_slots_batch` of it."""
    return (frames, data, index) if runs_per_body(scene) else data_slots_batch(scene, Q, frames, data, index)


def data_slot_count(scene, nc, step=True):
    """The scene's number of data slots for a step of ``nc`` contacts (``scene.cache``): 0 while no
    step has had a contact, else a count of :func:`least_slots` (at least :data:`MIN_DATA_SLOTS`) that holds
    them.  It grows at once where the contacts do not fit, and follows them down with hysteresis: once
    :data:`SHRINK_AFTER` steps in a row (``step``: whether this call is one, a single state's; a
    batch's only grows the count) have fit in a smaller count, it shrinks to the least count
    holding the most contacts of those steps (this step's count, returned)."""
    cache = scene.cache
    have = cache.get("data_slot_count", 0)
    if nc > have:
        cache["data slots spare"] = None
        have = cache["data_slot_count"] = least_slots(nc)
    elif step and have > MIN_DATA_SLOTS:
        return _follow_down(cache, have, nc)
    return have


def steps_to_shrink(scene):
    """The fewest single steps after which the scene's count of data slots may shrink (an int, 1 to
    :data:`SHRINK_AFTER`): those left of the run of steps that fit in fewer (:func:`data_slot_count`), so a
    chain of steps in one native call ends where a step by step count would shrink."""
    run = scene.cache.get("data slots spare") or (0, 0)
    return max(1, SHRINK_AFTER - run[0])


def _follow_down(cache, have, nc):
    """:func:`data_slot_count` of a step of ``nc`` contacts where ``have`` (> :data:`MIN_DATA_SLOTS`)
    slots hold them: the run of steps in a row that fit in fewer slots (``cache``'s ``(steps, the
    most of their slots)``) counted, the count shrunk at :data:`SHRINK_AFTER` of them."""
    fits = least_slots(nc)
    if fits == have:
        cache["data slots spare"] = None
        return have
    run = cache.get("data slots spare") or (0, 0)
    run = (run[0] + 1, max(run[1], fits))
    if run[0] < SHRINK_AFTER:
        cache["data slots spare"] = run
        return have
    cache["data slots spare"] = None
    cache["data_slot_count"] = run[1]
    return run[1]


def data_slots_used(scene, counts):
    """Tell the scene the contact counts ``counts`` (a sequence of ints) of single steps that ran
    without laying out their slots here (the native roads: one call per step or per chain of steps,
    in the count of slots their plan holds), in order, as :func:`data_slot_count` counts them;
    returns the scene's count after them (a change: the plan of the next steps is another)."""
    n = scene.cache.get("data_slot_count", 0)
    for nc in counts:
        if n <= MIN_DATA_SLOTS:
            break
        n = data_slot_count(scene, nc)
    return n


def _layout(scene, keys):
    """``(fa (n,), W (n, nv))`` of per-body slot keys ``keys`` (a tuple of frames, or of pairs of
    frames): each contact's frame of body ``a`` and its joint weights.  The last layout asked is kept in
    ``scene.cache`` (consecutive steps mostly keep their contacts' bodies), each key's weights too."""
    last = scene.cache.get("data slot layout")
    if last is not None and last[0] == keys:
        return last[1], last[2]
    W = key_weights(scene, keys)
    fa = np.array([slot_frames(k)[0] for k in keys], int)
    scene.cache["data slot layout"] = (keys, fa, W)
    return fa, W


def key_weights(scene, keys):
    """The joint weights (n, nv) of the per-body slot keys ``keys`` (a sequence of frames, or of pairs
    of frames; :func:`~sparsedyn.contact.friction_problem.slot_weights`), each key's kept in
    ``scene.cache``."""
    model = scene.model
    table = scene.cache.setdefault("data slot weights", {})
    W = np.empty((len(keys), model.nv))
    for i, k in enumerate(keys):
        w = table.get(k)
        if w is None:
            a, b = slot_frames(k)
            w = table[k] = slot_weights(model, model.frames[a].body, None if b is None else model.frames[b].body)
        W[i] = w
    return W


def _rows(scene, keys, data, R, p):
    """The data slots' rows (n, 8 + nv) of contacts in per-body slots: ``keys`` their slot keys (a
    tuple), ``data`` (n, 8) their per-body data ``[mu, p (3, frame axes), plane (4)]``, ``R`` (nf, 3, 3)
    and ``p`` (nf, 3) the frames' world poses."""
    fa, W = _layout(scene, tuple(keys))
    out = np.empty((len(fa), 8 + scene.model.nv))
    out[:, 0], out[:, 4:8], out[:, 8:] = data[:, 0], data[:, 4:8], W
    out[:, 1:4] = p[fa] + (R[fa] @ data[:, 1:4, None])[:, :, 0]           # the point in the world
    return out


def empty_data_slots(model, n):
    """``n`` free data slots (n, 8 + nv): open (their plane 1000 km below their point), zero weights."""
    data = np.zeros((n, 8 + model.nv))
    data[:, 4:8] = FREE_PLANE
    return data


def data_slot_base(scene, keys, mu):
    """The scene's data slots (n, 8 + nv) for contacts of per-body slot keys ``keys`` (a tuple) and
    friction ``mu`` (nc,), in order in the first slots: their friction and joint weights set, their
    points and planes left zero (the state's), the other slots free (module docstring); the layout
    grown to hold them (:func:`data_slot_count`)."""
    nc = len(keys)
    data = empty_data_slots(scene.model, data_slot_count(scene, nc, False))
    if nc:
        data[:nc, 0], data[:nc, 8:] = mu, _layout(scene, keys)[1]
        data[:nc, 1:8] = 0.0
    return data


def data_slots(scene, q, slots) -> ContactSlots:
    """The contacts of one state ``q`` (nq,) laid out per body in ``slots`` (a
    :class:`~sparsedyn.contact.friction_problem.ContactSlots` of
    :func:`~sparsedyn.contact.scene_step.scene_slots`) as the same contacts, in order, in the scene's
    data slots (module docstring): ``index`` ``arange(nc)`` (None where they fill every slot), the
    rest free; no slot at all while the scene has never had a contact."""
    index = np.arange(len(slots.frames)) if slots.index is None else np.asarray(slots.index)
    nc = len(index)
    n = data_slot_count(scene, nc)
    data = empty_data_slots(scene.model, n)
    if nc:
        R, p = frame_placements(scene.model, q)
        keys = slots.frames if slots.index is None else tuple(slots.frames[i] for i in index.tolist())
        data[:nc] = _rows(scene, keys, slots.data[index], R, p)
    return ContactSlots((DATA_SLOT,) * n, None if nc == n else np.arange(nc), data)


def data_slots_batch(scene, Q, frames, data, index):
    """A batch's contacts (``Q`` (B, nq)) laid out per body (``frames`` the layout, ``data`` (B, ns, 8),
    ``index`` a list of each state's slots) in the scene's data slots: ``(frames, data (B, n, 8 + nv),
    index)``, each state's contacts in its first slots."""
    counts = [len(i) for i in index]
    n = data_slot_count(scene, max(counts, default=0), False)
    out = np.broadcast_to(empty_data_slots(scene.model, n), (len(Q), n, 8 + scene.model.nv)).copy()
    if sum(counts):
        R, p = frame_placements(scene.model, Q)
        for b, i in enumerate(index):
            if len(i):
                out[b, :len(i)] = _rows(scene, [frames[s] for s in np.asarray(i).tolist()], data[b][i], R[b], p[b])
    return (DATA_SLOT,) * n, out, [np.arange(c) for c in counts]


def data_slots_of_rows(scene, counts, keys, key, rows) -> ContactSlots:
    """The data slots of a batch's contacts given as rows, all states' in order (``counts`` (B,): each
    state's number): ``key`` (n,) each one's per-body slot key as an index of ``keys`` (a list of
    them), ``rows`` (n, 8) its ``[mu, x (3), n (3), offset]``, its friction, its point in the world and
    its plane.  A :class:`~sparsedyn.contact.friction_problem.ContactSlots` of ``data`` (B, ns, 8 + nv):
    state ``b``'s contacts in its first ``counts[b]`` slots, in order, the rest free (as
    :func:`data_slots` lays out one state), with no Python work per state; the layout grown to hold
    the most contacts of a state (:func:`data_slot_count`)."""
    B, nv = len(counts), scene.model.nv
    n = data_slot_count(scene, int(counts.max(initial=0)), False)
    out = np.empty((B, n, 8 + nv))
    out[...] = empty_data_slots(scene.model, n)
    if len(key):
        W = _batch_key_weights(scene, keys).take(key, 0)
        c = int(counts[0])
        if (counts == c).all():                   # every state as many contacts: one block
            out[:, :c, :8], out[:, :c, 8:] = rows.reshape(B, c, 8), W.reshape(B, c, nv)
        else:                                     # contact i, the k-th of state b, to row b n + k of the flat slots
            at = np.arange(len(key)) + np.repeat(np.arange(B) * n - (np.cumsum(counts) - counts), counts)
            out.reshape(B * n, 8 + nv)[at] = np.concatenate([rows, W], 1)
    return ContactSlots((DATA_SLOT,) * n, None, out)


def _batch_key_weights(scene, keys):
    """The joint weights (nk, nv) of the per-body slot keys ``keys`` (a list; :func:`_layout`'s), kept
    in ``scene.cache`` for the last ``keys`` a batch asked (a scene's kernel plan: the same list at
    every batch) apart from the single steps' (which ask for their own contacts' keys)."""
    last = scene.cache.get("batch slot weights")
    if last is None or last[0] is not keys:
        last = scene.cache["batch slot weights"] = (keys, _layout(scene, tuple(keys))[1])
    return last[1]


def least_data_slots(counts):
    """The least number of data slots that holds each of ``counts`` (B,) contacts (:func:`least_slots`, at
    least :data:`MIN_DATA_SLOTS`: the count a fresh scene's single step runs in)."""
    counts = np.asarray(counts, int)
    return np.array([least_slots(c) for c in range(int(counts.max(initial=0)) + 1)]).take(counts)


def least_slots(nc):
    """The least count of data slots that holds ``nc`` contacts: ``2^k`` or ``3 * 2^(k-2)`` (8, 12, 16, 24,
    32, 48, 64, ...), at least :data:`MIN_DATA_SLOTS`.  A step carries its free slots' rows in its
    element-by-element code, so the counts between powers of two pay: the dm_control humanoid's steps of
    17 to 22 contacts take two thirds of their 32 slots' time in 24, those of 10 and 11 contacts two
    thirds of their 16 slots' time in 12 (one more build per count, 4 to 10 s each)."""
    whole = 1 << (int(nc) - 1).bit_length()
    return max(MIN_DATA_SLOTS, 3 * whole // 4 if 4 * nc <= 3 * whole else whole)


def in_least_slots(run, q, v, tau, warm, slots):
    """The step's kernel ``run(q, v, tau, warm, slots)`` (its :class:`StepArrays`) on a batch ``q`` (B, nq)
    laid out in data slots (``slots.data`` (B, ns, 8 + nv), each state's contacts in its first slots),
    each state in the least count of slots that holds its contacts (:func:`least_data_slots`), one
    call per count (so each state's step is its single step's in a fresh scene).  A free slot is not
    free of cost (the step carries its rows), so a batch laid out for its most crowded state would pay
    for that state's slots in every state: the states of the perturbed humanoid that touch with 8
    points or fewer take a third of the time in 8 slots that they take in 16.  ``v``, ``tau`` (nv,) or
    (B, nv); ``warm`` (ns, 3) or (B, ns, 3).  The slots a state did not run are returned as a free
    slot's (no impulse, no velocity, no correction)."""
    data = slots.data
    B, ns = data.shape[:2]
    filled = (data[..., 7] != FREE_PLANE[3]) | data[..., 8:].any(-1)
    counts = np.where(filled.any(1), ns - np.argmax(filled[:, ::-1], 1), 0)
    need = least_data_slots(counts)
    if (need >= ns).all():
        return run(q, v, tau, warm, slots)
    need = np.minimum(need, ns)
    parts = []
    for k in np.unique(need).tolist():
        at = np.flatnonzero(need == k)
        rows = [x if x.ndim == 1 else x.take(at, 0) for x in (v, tau)]
        w = warm[:k] if warm.ndim == 2 else warm.take(at, 0)[:, :k]
        slots_k = ContactSlots((DATA_SLOT,) * k, None, data.take(at, 0)[:, :k])
        parts.append((at, k, run(q.take(at, 0), *rows, w, slots_k)))
    whole = []
    for name, x in zip(StepArrays._fields, parts[0][2]):
        slotted = name in ("impulses", "velocities", "correction")
        out = np.zeros((B, ns) + x.shape[2:] if slotted else (B,) + x.shape[1:])
        for at, k, got in parts:
            if slotted:
                out[at, :k] = getattr(got, name)
            else:
                out[at] = getattr(got, name)
        whole.append(out)
    return StepArrays(*whole)
