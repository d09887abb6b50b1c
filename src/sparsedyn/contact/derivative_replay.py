"""A fused step's layout met again, its derivatives' slots and plan looked up at once: :func:`replayed`.

:func:`~sparsedyn.contact.fused_derivatives.fused_derivatives` runs the step's one native call
(``scene_step``, which returns the step's candidates ``sel``, their per-body slots ``slot``, the
candidates ``c`` (K, 11), the per-body slots' data and the kernel rows' ``index``), then makes the
step's :class:`~sparsedyn.contact.scene_step.FoundContacts`, their per-body
:class:`~sparsedyn.contact.friction_problem.ContactSlots` (the derivatives' slots) and looks up the
derivatives' plan (:func:`~sparsedyn.contact.fused_derivatives._derivative_plan`) by a key of their
frames, pairs and slots.  For one scene and one road of the step (its plan: the slot layout, the data
slots' count, ``dt``, the options) all three are functions of ``(sel, slot, index)`` and the
tolerance: :func:`remember` keeps, per such tuple of a state that took that road, the plan, the
pieces' callable and how the slots' data are made from the call's arrays, and :func:`replayed`
answers a later state of the same tuple with them (a trajectory's steps keep their contacts): the
same calls on the same values, so the same derivatives bit for bit.  The slots' data are the call's
per-body data where the step runs in per-body slots, else ``base`` with the entries ``take`` of the
candidates' rows put at ``put`` (turned by ``A x + b`` where a slot frame is not its body's own), the
selection's of :mod:`~sparsedyn.contact.scene_data` (what
:func:`~sparsedyn.contact.scene_data.held_contacts` makes its per-body slots from); a selection whose
data made so differ from the slots' is not kept (the road of the first call then, each time).
"""

from __future__ import annotations

import numpy as np

from . import scene_data

__all__ = ["replayed", "remember", "pieces_kernel"]

_KEY = "fused derivatives replay"

#: Layouts kept per scene and road (a trajectory meets a few; a new road starts afresh).
MAX_KEPT = 256


def replayed(scene, road, tol, got):
    """``(plan, pieces' callable, slots' data (ns, 8))`` of the step whose ``scene_step`` call (on the
    road's plan ``road``, tolerance ``tol``) returned ``got`` (``(out, index, sel, slot, c, data)``),
    where :func:`remember` kept its ``(sel, slot, index)``; else None."""
    memo = scene.cache.get(_KEY)
    if memo is None or memo[0] is not road or memo[1] != tol:
        return None
    index = got[1]
    kept = memo[2].get((got[2].tobytes(), got[3].tobytes(), None if index is None else index.tobytes()))
    if kept is None:
        return None
    make = kept[2]
    if make is None:
        return kept[0], kept[1], got[5]
    return kept[0], kept[1], _data(make, got[4])


def remember(scene, road, tol, got, plan, pieces, slots, in_data):
    """Keep for :func:`replayed` the derivatives' ``plan`` and ``pieces`` callable of the step whose
    ``scene_step`` call returned ``got``, its derivatives' ``slots`` (``in_data``: the step ran in the
    scene's data slots, the per-body slots made from the selection); nothing where the index is not
    an array or the data would not be the slots'."""
    index = got[1]
    if not (index is None or type(index) is np.ndarray) or type(got[2]) is not np.ndarray or \
            type(got[3]) is not np.ndarray:
        return
    make = None
    if in_data:
        c = got[4]
        mask = np.zeros(len(c), bool)
        mask[got[2]] = True
        selection = scene_data._remembered(scene, mask)
        if selection is None:
            return
        make = tuple(selection[2:7])                           # (base, put, take, A, b)
        if not np.array_equal(_data(make, c), slots.data):
            return
    elif got[5] is not slots.data:
        return
    memo = scene.cache.get(_KEY)
    if memo is None or memo[0] is not road or memo[1] != tol or len(memo[2]) >= MAX_KEPT:
        memo = scene.cache[_KEY] = (road, tol, {})
    memo[2][(got[2].tobytes(), got[3].tobytes(), None if index is None else index.tobytes())] = (plan, pieces, make)


def _data(make, c):
    """The per-body slots' data (ns, 8) of the candidates ``c`` (K, 11) from the selection's ``(base, put,
    take, A, b)``, as :mod:`~sparsedyn.contact.scene_data` makes them."""
    base, put, take, A, b = make
    data = base.copy()
    data.put(put, c.take(take) if A is None else A.dot(c.take(take)) + b)
    return data


def pieces_kernel(f, frames, kinds):
    """The pieces' callable ``(q, v, v_next, impulses, correction, modes, contact_data, shapes, gravity,
    dt) -> SlotPartials tuple`` of the native method ``f`` of
    :func:`~sparsedyn.scene_step_partials` for the slots ``frames`` and ``kinds``: its built fast kernel
    for them where the method's table holds it (no lookup per call), else ``f`` with them bound."""
    table = getattr(f, "__table__", None)
    k = table.get((frames, kinds)) if table is not None else None
    if type(k).__name__ == "Kernel":
        return k
    return lambda *args: f(*args, frames, kinds)
