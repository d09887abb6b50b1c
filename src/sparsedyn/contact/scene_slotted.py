"""A step in a scene laid out in its slots, for its derivatives
(:func:`~sparsedyn.contact_step_derivatives`): the step taken, and its contacts, impulses, modes and
position correction in the slots its derivatives' kernel
(:func:`~sparsedyn.contact.scene_derivatives.scene_step_partials`) runs in (per body: where the step
ran in the scene's data slots, its contacts put back in their bodies' slots)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks
from .data_slots import runs_per_body
from .friction import StepArrays, _options, _result, _slotted_step, _step_settings
from .friction_problem import DATA_SLOT
from .lazy_modes import MODE_NAMES, mode_codes
from .look_ahead import pair_cutoffs, step_hits
from .per_state import concatenated
from .scene_fused import fused_step
from .slot_modes_native import fused_slotted
from .scene_base import remembered
from .scene_geometry import (FREE_SHAPES, SHAPES, _kind_table, in_order, layout_key, slot_kinds, slot_shapes,
                             told_at_hit)
from .scene_step import FoundContacts, _FoundBatch, scene_slots, step_in_scene

__all__ = ["Slotted", "slotted_scene_step", "one_state_slots", "batch_slots", "MODE_WEIGHTS"]

#: Per mode its weights ``[open, stick, slide]`` (one of them 1) in the derivatives' kernel.
MODE_WEIGHTS = {"open": (1.0, 0.0, 0.0), "stick": (0.0, 1.0, 0.0), "slide": (0.0, 0.0, 1.0)}


class Slotted(NamedTuple):
    """A step in a scene laid out in its slots (batch ``B``, ``ns`` slots): ``frames`` the slots'
    structure, ``data`` (B, ns, 8) their contact data (the step's), ``shapes`` (B, ns, 12) their radii
    and kinds (:func:`~sparsedyn.contact.scene_geometry.slot_shapes`), ``mu`` (B, ns), ``impulses``
    (B, ns, 3) and ``modes`` (B, ns) of the step in its slots (a free slot open, with zero impulse),
    ``correction`` (B, ns) the normal impulses of its position correction (the step kernel's own), and
    ``kinds`` the kinds of contact its slots may hold
    (:func:`~sparsedyn.contact.scene_geometry.slot_kinds`; None: every kind), ``weights`` (B, ns, 4) the
    modes' weights and friction (``[open, stick, slide, mu]``; None: made from ``modes`` and ``mu``)."""

    frames: tuple
    data: np.ndarray
    shapes: np.ndarray
    mu: np.ndarray
    impulses: np.ndarray
    modes: np.ndarray
    correction: np.ndarray
    kinds: tuple = None
    weights: np.ndarray = None


def slotted_scene_step(model, kernels, q, v, tau, scene, dt, options):
    """``(step, contacts, slotted)``: the step in ``scene`` at ``q`` (nq,) or (B, nq), its contacts
    (a list per state for a batch) and its :class:`Slotted` layout (None where there is no slot)."""
    who = "contact_step_derivatives"
    if not (type(q) is np.ndarray and q.dtype == np.float64):   # (plain_floats returns such an array as it is)
        q = _checks.plain_floats(who, "q", q, f"({model.nq},) or (B, {model.nq})")
    if q.ndim not in (1, 2) or q.shape[-1] != model.nq:
        raise ValueError(f"{who}: a step in a scene takes one state, q of shape (nq,) = ({model.nq},), or a batch "
                         f"(B, nq); got shape {q.shape}")
    Q = q.reshape(-1, model.nq)
    opts = _options(options, options.get("warm_start"))
    if q.ndim == 1 and kernels is scene.model and opts["f_ext"] is None and opts["gravity"] is None:
        # contact_step's own road: one native call (collision, layout, solve) where the layout holds the
        # contacts, its arrays (the position correction among them) and contacts as the Python road's
        got = fused_step(model, q, v, tau, scene, dt, _step_settings(
            "contact_step", dt, opts["tol"], opts["max_iterations"], opts["solver"], opts["margin"]),
            opts["warm_start"], contacts=True)
        if got is not None:
            out, index, found = tuple.__new__(StepArrays, got[0]), got[1], got[2]
            step = _result("contact_step", opts["solver"], opts["tol"], out, index, finite=True)
            if not len(found.slots.frames):
                return step, (), None
            in_data = not runs_per_body(scene)
            # the modes and the slots' arrays in one native call (the step's modes left unread)
            slotted = fused_slotted(scene, q, out, index, found, in_data, opts["tol"], Slotted)
            return step, found, slotted if slotted is not None else one_state_slots(
                scene, q, found.pair, found.slots, step.impulses, mode_codes(step), out.correction.reshape(-1), in_data)
    kept = []                                                    # the kernel's arrays: the position correction
    opts["keep"] = kept
    step, found = step_in_scene(_slotted_step, kernels, q, v, tau, scene, dt, opts)
    if isinstance(found, _FoundBatch) and len(found) > 1 and not told_at_hit(scene, found.laid.pair):
        if not len(found.laid.frames):                          # (the collision kernel's batch: no loop over states)
            return step, (), None
        out, in_data = _kernel_arrays(kept)
        return step, found, batch_slots(scene, found, step.impulses, step.modes,
                                        out.correction.reshape(len(found), -1), in_data)
    if q.ndim == 1:
        found, impulses, modes = [found], [step.impulses], [step.modes]
    else:
        impulses, modes = step.impulses, step.modes
    if isinstance(found[0], FoundContacts):                      # the collision kernel's road: slots found
        pair, slots = [f.pair for f in found], [f.slots for f in found]
    else:                                                        # Contact objects: of collide's hits, in order
        cut = np.broadcast_to(pair_cutoffs(scene, Q, v, dt), (len(Q), len(scene.index)))    # the step's look-ahead
        V = np.broadcast_to(np.asarray(v, float), (len(Q), model.nv))
        pair = [step_hits(scene, x, y, dt, c).pair for x, y, c in zip(Q, V, cut)]
        slots = [scene_slots(scene, c) for c in found]           # the layout the step grew: one for all states
    ns = len(slots[0].frames)
    if not ns:
        return step, (), None
    B = len(Q)
    out, in_data = _kernel_arrays(kept)
    if B == 1:
        codes = mode_codes(step) if q.ndim == 1 else [MODE_NAMES.index(x) for x in modes[0].tolist()]
        return step, found[0], one_state_slots(scene, Q[0], pair[0], slots[0], impulses[0], codes,
                                          out.correction.reshape(-1), in_data)
    data, shapes = np.zeros((B, ns, 8)), np.zeros((B, ns, SHAPES))
    lam, held = np.zeros((B, ns, 3)), np.full((B, ns), "open", dtype="<U5")
    step_correction, correction = out.correction.reshape(B, -1), np.zeros((B, ns))
    for b in range(B):
        index = np.arange(len(pair[b])) if slots[b].index is None else slots[b].index
        data[b], shapes[b] = slots[b].data, slot_shapes(scene, Q[b], pair[b], slots[b])
        lam[b, index], held[b, index] = np.reshape(impulses[b], (-1, 3)), modes[b]
        correction[b, index] = step_correction[b, :len(index)] if in_data else step_correction[b, index]
    return step, found if q.ndim == 2 else found[0], Slotted(slots[0].frames, data, shapes, data[:, :, 0], lam, held,
                                                             correction, slot_kinds(scene, slots[0].frames))


def _kernel_arrays(kept):
    """``(out, in_data)``: the step kernel's arrays that ``keep`` received, and whether the step ran in the
    scene's data slots (each state's contacts in order in its first slots), else in per-body slots."""
    out, ran = kept[0]
    return out, bool(ran.frames) and ran.frames[0] == DATA_SLOT


def batch_slots(scene, found, impulses, modes, correction, in_data):
    """The :class:`Slotted` of a batch's step whose contacts the collision kernel laid out (``found``: the
    step's ``_FoundBatch`` of :mod:`~sparsedyn.contact.scene_step`, in a scene whose slot shapes are
    their pairs' own: no pair of boxes, no ellipsoid or cylinder on a face), their ``impulses`` and
    ``modes`` (one array per state: a :class:`~sparsedyn.contact.per_state.PerState`, or any sequence) and the
    kernel's position correction impulses ``correction`` (B,
    ...) (in the step's slots; ``in_data``:
    the scene's data slots, a state's contact ``k`` in slot ``k``): every state's contacts placed at
    once, with no loop over the states (each state's as :func:`one_state_slots` lays it out)."""
    laid = found.laid
    frames, data = laid.frames, laid.data
    B, ns = data.shape[:2]
    st, slot = found.at()
    shapes = np.empty((B, ns, SHAPES))
    shapes[:] = FREE_SHAPES
    lam, held, corr = np.zeros((B, ns, 3)), np.full((B, ns), "open", dtype="<U5"), np.zeros((B, ns))
    if len(slot):
        shapes[st, slot] = _kind_table(scene)[0][laid.pair, 1:]
        lam[st, slot], held[st, slot] = concatenated(impulses, (3,)), concatenated(modes)
        corr[st, slot] = correction[st, np.arange(len(slot)) - laid.ends[st]] if in_data else correction[st, slot]
    return Slotted(frames, data, shapes, data[:, :, 0], lam, held, corr, slot_kinds(scene, frames))


def one_state_slots(scene, q, pair, slots, impulses, codes, correction, in_data):
    """The :class:`Slotted` (B = 1) of one state's step in ``scene`` at ``q`` (nq,): its contacts of the
    scene pairs ``pair`` (nc,) laid out in ``slots``, their ``impulses`` (nc, 3) and modes as ``codes``
    (nc ints indexing :data:`~sparsedyn.contact.lazy_modes.MODE_NAMES`:
    :func:`~sparsedyn.contact.lazy_modes.mode_codes`), the kernel's position correction impulses
    ``correction`` (in the step's slots; ``in_data``: the scene's data slots, contact ``k`` in slot
    ``k``), with the slots' mode weights for the derivatives (a free slot open, with zero impulse).
    What depends on the layout and the codes alone is kept in ``scene.cache`` (:func:`_slot_plan`)."""
    index, inverse, shapes, kinds, held, weights = _slot_plan(scene, q, pair, slots, codes)
    data, ns = slots.data, len(slots.frames)
    if index is None:                                            # in order (the step's own arrays: views)
        lam, corr = impulses.reshape(1, ns, 3), correction[None, :ns]
    elif inverse is not None:                                    # every slot filled: slot j holds contact inverse[j]
        lam = impulses.take(inverse, 0)[None]
        corr = (correction[:ns].take(inverse) if in_data else correction[:ns])[None]
    else:
        nc = len(pair)
        lam, corr = np.zeros((1, ns, 3)), np.zeros((1, ns))
        lam[0, index] = impulses
        corr[0, index] = correction[:nc] if in_data else correction[index]
    weights = weights.copy()
    weights[0, :, 3] = data[:, 0]
    return tuple.__new__(Slotted, (slots.frames, data[None], shapes, data[None, :, 0], lam, held, corr, kinds, weights))


def _slot_plan(scene, q, pair, slots, codes):
    """``(index, inverse, shapes (1, ns, 12), kinds, names (1, ns), weights (1, ns, 4))`` of the contacts of
    the scene pairs ``pair`` (nc,) laid out in ``slots`` at ``q`` in the modes ``codes`` (nc ints): their
    slots (None where contact ``k`` fills slot ``k`` and every slot holds one,
    :func:`~sparsedyn.contact.scene_geometry.in_order`), the contact in each slot where every slot holds
    one (``index``'s inverse permutation; else None),
    :func:`~sparsedyn.contact.scene_geometry.slot_shapes`,
    :func:`~sparsedyn.contact.scene_geometry.slot_kinds`, the slots' modes' names (read-only) and their
    weights ``[open, stick, slide, 0]`` (read-only: ``mu`` for the caller to set in a copy); kept in
    ``scene.cache`` per contact set and codes where the shapes are the pairs' own (no pair of boxes,
    whose corner is told at ``q``, no ellipsoid or cylinder on a face, whose ``K`` is)."""
    pair = np.asarray(pair, np.intp)

    def make():
        at, nc, ns = slots.index, len(pair), len(slots.frames)
        index = None if in_order(slots, nc) else np.arange(nc) if at is None else np.asarray(at)
        inverse = np.argsort(index) if index is not None and nc == ns else None
        slot_codes = codes if index is None else [codes[k] for k in inverse.tolist()] if inverse is not None else \
            _spread(codes, index, ns)
        names = _NAMES.take(slot_codes)[None]
        weights = _ROWS.take(slot_codes, 0)[None]                # (a take of a table: no list of tuples to read)
        shapes = slot_shapes(scene, q, pair, slots)[None]
        for x in (names, weights, shapes):
            x.flags.writeable = False
        return index, inverse, shapes, slot_kinds(scene, slots.frames), names, weights
    if told_at_hit(scene, pair, q, slots):                       # features, a sliding point: told at q
        return make()
    return remembered(scene, "one state plan", layout_key(slots, pair) + (tuple(codes),), make)


def _spread(codes, index, ns):
    """The ``ns`` slots' codes of contacts ``codes`` (nc,) in the slots ``index`` (nc,), the others open (0)."""
    full = np.zeros(ns, np.intp)
    full[index] = codes
    return full


#: The modes' names in the order of their codes and each code's row of weights (``[open, stick, slide,
#: mu]``, ``mu`` set per slot) (tables of constants).
_NAMES = np.array(MODE_NAMES, "<U5")
_ROWS = np.array([MODE_WEIGHTS[x] + (0.0,) for x in MODE_NAMES])
