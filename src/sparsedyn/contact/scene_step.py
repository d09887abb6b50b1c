"""A time step in a :class:`~sparsedyn.contact.scene.Scene`: the contacts come from the geometry.

Each step runs :func:`~sparsedyn.contact.collision.collide` at ``q``, looking ahead (each pair
within the margin plus ``dt`` times a bound on its closing speed at ``v``:
:func:`~sparsedyn.contact.look_ahead.pair_cutoffs`; a hit with a gap is a speculative contact the
step may close, no more, so a fast body does not pass a surface unseen; no more contacts than the
compiled step holds where the others are beyond the step's reach:
:func:`~sparsedyn.contact.look_ahead.step_hits`), and turns every hit of a
robot shape ``a`` against a world shape ``b`` into a one-sided point contact
(:class:`~sparsedyn.model.sensors.Contact`): the witness point ``w_a`` fixed in a frame of ``a``'s body,
against the plane through ``w_b`` of normal ``n`` (from ``b`` towards ``a``), with the pair's
friction; its gap is the hit's signed distance.  The step is then :func:`~sparsedyn.contact_step`'s with that
contact list.

The contacts are first laid out per body (:func:`scene_slots`: each body that has touched holds the
power of two of slots that held its most contacts so far, its points fixed in its frame; what the
warm start and the derivatives read).  Where more than one robot body is in the scene's pairs they
are handed to the step in the scene's data slots (:mod:`~sparsedyn.contact.data_slots`): each
contact's point in the world and its bodies as joint weights, the first ``nc`` of 8, 12, 16, 24, 32, 48
or 64 slots (:func:`~sparsedyn.contact.data_slots.data_slot_count`).  The compiled step is then built per
number of slots, not per set of touching bodies, so a trajectory builds at most seven steps whichever bodies
touch.  Where one body alone can touch (a box, a ball) the step runs in its per-body slots, which
only double, and whose step is the faster.  Free slots are not free of cost: the step's
problem keeps their rows (open, with zero impulse), so a layout larger than the contacts of the
moment costs time.

A hit of two robot shapes ``a`` and ``b`` (self-collision) is a two-body contact
(:class:`~sparsedyn.contact.friction_problem.BodyContact`): ``w_a`` fixed in a frame of ``a``'s body
against the plane through ``w_b`` of normal ``n``, its rows the velocity of ``w_a`` relative to the
point of ``b``'s body at the same place (``J_a - J_b``), so its impulse pushes ``a`` along ``n``
and ``b`` as much the other way, and the pair's internal impulses carry no net wrench.  The normal row is the rate of
the gap ``n . (w_a - w_b)`` for a normal fixed in ``b`` (``n . (v_b(w_a) - v_b(w_b)) = 0``); its
slots are keyed by the pair of bodies.

A batch of states is one call of the step: each state's contacts are found alone (on the collision
kernel's road with no Python work per state: :mod:`~sparsedyn.contact.scene_batch`), laid out in one
layout that holds them all, and solved on the batch runtime's threads, in data slots each state in
the least count that holds it (:func:`~sparsedyn.contact.data_slots.in_least_slots`).  Along a
trajectory a step starts from the impulses of the step before where a contact persists
(:func:`matched_warm_start`): contacts are matched by their pair of shapes and the nearest point, not
by their order, which changes as contacts come and go.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import _checks
from ..algorithms.kinematics import frame_placements
from ..model.sensors import Contact
from .collision import collide_within
from .data_slots import batch_slots, runs_per_body, step_slots
from .friction_problem import BodyContact, ContactSlots, contact_slots, fill_slots, turned_impulses
from .scene_batch import batch_contacts, batch_warm_start
from .look_ahead import pair_cutoffs, step_hits
from .per_state import PerState, concatenated, contact_places, even_count
from .scene_data import scene_slot_data

__all__ = ["scene_contacts", "scene_slots", "scene_step", "step_in_scene", "matched_warm_start", "FoundContacts", "WARM_RADIUS",
           "batch_previous", "batch_states"]


def _body_frames(model):
    """Body index -> the index of a frame on that body (the first one)."""
    out = {}
    for k, f in enumerate(model.frames):
        out.setdefault(f.body, k)
    return out


def scene_contacts(scene, q, hits=None, cutoff=None, spin=None) -> list:
    """The point contacts of the hits of ``scene`` at ``q`` (nq,) (module docstring), in the hits'
    order: a :class:`~sparsedyn.Contact` (``"3d"``) for a robot-world hit, a
    :class:`~sparsedyn.contact.friction_problem.BodyContact` for a hit of two robot shapes;
    ``hits``: :func:`~sparsedyn.collide`'s result at ``q`` if known; else the hits within ``cutoff``
    (P,) per pair (a step's look-ahead, :func:`~sparsedyn.contact.look_ahead.pair_cutoffs`; None: the
    scene's margin), ``spin`` (P, 3) the pairs' rotations over the step where known
    (:func:`~sparsedyn.contact.collision.collide_within`)."""
    if hits is None:
        hits = collide_within(scene, q, cutoff, spin)
    model = scene.model
    frames = _body_frames(model)
    Rf, pf = frame_placements(model, q)
    out = []
    for k in range(len(hits.distances)):
        i, j = scene.index[hits.pair[k]]
        a, b = scene.shapes[i], scene.shapes[j]
        f, fb = (_frame_of(model, frames, s) for s in (a, b))
        n = hits.normals[k]
        wa, wb = hits.witness_a[k], hits.witness_b[k]
        point, plane = Rf[f].T @ (wa - pf[f]), (n, float(n @ wb))
        mu, name = float(scene.pair_friction[hits.pair[k]]), f"{a.name}/{b.name}#{k}"
        out.append(Contact(int(f), "3d", friction=mu, point=point, plane=plane, name=name) if fb is None else
                   BodyContact(int(f), int(fb), mu, tuple(point), plane, name))
    return out


def _frame_of(model, frames, shape):
    """The frame that holds the contacts of ``shape``'s body (None for a world shape)."""
    if shape.body < 0:
        return None
    f = frames.get(shape.body)
    if f is None:
        raise ValueError(f"scene step: body {model.body_names[shape.body]!r} of shape {shape.name!r} has no frame to "
                         f"hold a contact")
    return f


def scene_slots(scene, contacts) -> ContactSlots:
    """The point ``contacts`` of :func:`scene_contacts` laid out in the scene's slots (module
    docstring): :func:`~sparsedyn.contact.friction_problem.contact_slots`'s data, each body's contacts in the
    first of its slots, the free ones open (``index`` None where the contacts fill every slot in
    order).  The layout only grows: a body that touches for the first time, or with more contacts
    than its slots, gets the power of two that holds them."""
    own = contact_slots(scene.model, contacts)
    where = np.arange(len(contacts)) if own.index is None else own.index
    keys = [own.frames[k] for k in where]
    layout = scene.cache.setdefault("step_slots", {})             # slot key -> its number of slots; only grows
    for key in set(keys):
        layout[key] = max(layout.get(key, 0), 1 << (keys.count(key) - 1).bit_length())
    frames, index, data = fill_slots(keys, layout, own.data[where])
    # (None: the contacts fill every slot in order, as the collision kernel's road says it)
    return ContactSlots(frames, None if index.tolist() == list(range(len(frames))) else index, data)


#: How far [m] a contact's point (in its body's axes) may move between two steps and still be the same
#: contact for the warm start: more than a step's sliding or rolling at ordinary speeds (1 m/s over a
#: millisecond: 1 mm), less than the distance between a box's corners or a mesh's features.
WARM_RADIUS = 0.01


class FoundContacts:
    """The contacts of a step on the collision kernel's road (:func:`scene_step`; no Contact object
    per hit), as much of them as :func:`matched_warm_start` needs: ``pair`` (nc,) each contact's
    scene pair (an index of ``scene.pairs``), ``points`` (nc, 3) its point in the axes of its body's
    slot frame (in the scene's data slots: of its body; the matching compares the points of one pair,
    of one body), ``planes`` (nc, 4) its plane ``[n (3), offset]`` (world, ``n . x = offset``), read
    from the step's :class:`~sparsedyn.contact.friction_problem.ContactSlots` ``slots`` when asked
    (given, or a function of no argument that makes them when first read: a step in data slots
    reads them only along a trajectory).  ``len()`` is the number of contacts."""

    __slots__ = ("pair", "_slots", "_rows", "_where")

    def __init__(self, pair, slots, rows=None):
        # rows: the contacts' [p (3), plane (4)] (nc, 7) where known, or a function of no argument making them
        self.pair, self._slots, self._rows, self._where = pair, slots, rows, None

    @property
    def slots(self):
        if callable(self._slots):
            self._slots = self._slots()
        return self._slots

    def __len__(self):
        return len(self.pair)

    def _data(self):
        """The contacts' ``[p (3), plane (4)]`` (nc, 7), gathered once (a step's contacts are matched
        twice: as the step's, then as the next step's ``previous``)."""
        rows = self._rows
        if type(rows) is np.ndarray:
            return rows
        if rows is None:
            slots = self.slots
            # (C-contiguous: the native call matches a trajectory's next warm start from these rows)
            rows = self._rows = np.ascontiguousarray(slots.data[:, 1:] if slots.index is None else
                                                     slots.data.take(slots.index, 0)[:, 1:])
        elif callable(rows):
            rows = self._rows = rows()
        return rows

    def _points_normals(self):
        """The bytes of the contacts' ``[p (3), n (3)]``, made once (:func:`_same_pairs` compares a
        step's with the step before's)."""
        if self._where is None:
            self._where = self._data()[:, :6].tobytes()
        return self._where

    @property
    def points(self):
        return self._data()[:, :3]

    @property
    def planes(self):
        return self._data()[:, 3:]


def _pair_of(c):
    """The pair of shapes of a contact of :func:`scene_contacts` (its name up to ``#``)."""
    return c.name.rpartition("#")[0]


def _matching(contacts):
    """``(labels, points, planes)`` of contacts (a list of :func:`scene_contacts`' or a
    :class:`FoundContacts`): two contacts may match where their labels are equal (the pair of shapes
    and the frame of the point)."""
    if type(contacts) is FoundContacts:
        rows = contacts._data()
        return contacts.pair, rows[:, :3], rows[:, 3:]
    labels = np.array([f"{_pair_of(c)}@{c.frame}" for c in contacts], dtype=object)
    points = np.array([c.point for c in contacts], float).reshape(-1, 3)
    return labels, points, np.array([(*c.plane[0], c.plane[1]) for c in contacts], float).reshape(-1, 4)


def matched_warm_start(previous, impulses, contacts) -> np.ndarray:
    """Impulses (nc, 3) to start a step at ``contacts`` from, given the contacts ``previous`` of the step
    before and their ``impulses`` (np, 3): each contact, in order, takes the impulse of the nearest
    previous contact of the same pair of shapes whose point (body axes) lies within
    :data:`WARM_RADIUS` and that no contact before it took, turned from that contact's frame into
    its own; the others start from zero.  Both a list of :func:`scene_contacts` or both a
    :class:`FoundContacts` (else nothing matches)."""
    if not (type(impulses) is np.ndarray and impulses.dtype is _F64 and impulses.ndim == 2):
        impulses = np.asarray(impulses, float).reshape(-1, 3)
    if type(previous) is type(contacts) is FoundContacts and len(impulses) == len(previous.pair):
        same = _same_pairs(previous, impulses, contacts)
        if same is not None:
            return same
    if (not len(previous) or not len(contacts) or len(impulses) != len(previous)
            or isinstance(previous, FoundContacts) != isinstance(contacts, FoundContacts)):
        return np.zeros((len(contacts), 3))
    (l0, p0, planes0), (l1, p1, planes1) = _matching(previous), _matching(contacts)
    d = p1[:, None] - p0
    D = np.sqrt(np.add.reduce(np.square(d, out=d), 2))
    D[l1[:, None] != l0] = np.inf                # other labels never match
    i, j = _greedy(D)
    out = np.zeros((len(contacts), 3))
    if len(i):
        n1, n0 = planes1[i, :3], planes0[j, :3]
        if n1.tobytes() == n0.tobytes() or (n1 == n0).all():               # same normals (a floor): same frames
            out[i] = impulses[j]
        else:
            out[i] = turned_impulses(planes1[i], planes0[j], impulses[j])
    return out


_F64 = np.dtype(float)
#: A contact whose point's coordinates each moved by at most half :data:`WARM_RADIUS` moved by less than it.
_HALF_RADIUS_SQUARED = (WARM_RADIUS / 2) ** 2


def _same_pairs(previous, impulses, contacts):
    """The warm start of the :class:`FoundContacts` ``contacts`` from ``previous`` (as many) and their
    ``impulses`` where both hold the same pairs in the same order, and either the same points (body
    axes) with the same normals (a box resting or sliding on a plane: its corners, fixed in its body,
    found by one selection of the collision kernel's candidates step after step: each its own at
    distance 0, in the same contact frame) or each pair once (a humanoid's limbs on a floor: each
    contact can only take its own previous one, where its point moved by at most
    :data:`WARM_RADIUS`); else None (the general matching)."""
    l0, l1 = previous.pair, contacts.pair
    if not len(l1) or not (l0 is l1 or len(l0) == len(l1) and l0.dtype == l1.dtype and _same(l0, l1)):
        return None
    if previous._points_normals() == contacts._points_normals():
        return impulses.copy()
    r0, r1 = previous._data(), contacts._data()
    if len(set(l1.tolist())) != len(l1):
        return None
    d = np.square(r1 - r0)                          # (nc, 7): [p (3), n (3), offset] less the previous, squared
    n1, n0 = r1[:, 3:6], r0[:, 3:6]
    if n1.tobytes() == n0.tobytes():                # same normals (a floor): same frames
        if np.maximum.reduce(d, None) <= _HALF_RADIUS_SQUARED:
            return impulses.copy()                  # each coordinate within half the radius: within 0.87 of it
        return np.where((np.sqrt(np.add.reduce(d[:, :3], 1)) <= WARM_RADIUS)[:, None], impulses, 0.0)
    near = np.sqrt(np.add.reduce(d[:, :3], 1)) <= WARM_RADIUS
    i = np.flatnonzero(near)
    out = np.zeros((len(l1), 3))
    if n1[i].tobytes() == n0[i].tobytes():
        out[i] = impulses[i]
        return out
    out[i] = turned_impulses(r1[i, 3:], r0[i, 3:], impulses[i])
    return out


def _same(a, b):
    """Whether the arrays ``a`` and ``b`` of one shape and dtype are equal entry by entry (their bytes
    first: equal bytes are equal numbers, but for NaN, which a step's contacts never hold)."""
    return a is b or a.tobytes() == b.tobytes() or bool((a == b).all())


def _greedy(D):
    """``(i, j)``: row by row, each row ``i`` of the distances ``D`` (n, np) takes the nearest
    column ``j`` within :data:`WARM_RADIUS` that no row before it took (the first of equals).  Where
    the rows' nearest columns within the radius are distinct (a contact set that persists or moves
    a little) that is each row's nearest, found at once; else row by row."""
    n = len(D)
    if not D.size:
        return (np.zeros(0, int),) * 2
    j = D.argmin(1)
    i = np.flatnonzero(D[np.arange(n), j] <= WARM_RADIUS)
    j = j.take(i)
    if len(set(j.tolist())) == len(j):          # no column wanted twice: row by row takes the same
        return i, j
    D = D.copy()
    turn = []
    for i in range(n):
        j = int(D[i].argmin())
        if D[i, j] <= WARM_RADIUS:
            D[:, j] = np.inf                     # taken
            turn.append((i, j))
    return tuple(np.array(x, int).reshape(-1) for x in zip(*turn)) if turn else (np.zeros(0, int),) * 2


def scene_step(step, model, q, v, tau, scene, dt, *, previous=None, hits=None, want_contacts=False,
               **options):
    """``(result, contacts)``: ``step(model, q, v, tau, contacts, slots, dt, **options)``
    (:func:`~sparsedyn.contact_step` laid out in slots) with the contacts of ``scene`` at ``q`` in the
    scene's slots (:func:`scene_slots`), on the default road, and those contacts.

    ``q`` (nq,): one state; (B, nq): a batch (``v``, ``tau`` (B, nv) or (nv,)), its contacts found for
    each state and laid out in one layout (the union of their slots), so the batch is one call of the
    step (the native kernel runs it on the batch runtime's threads); its ``impulses`` and ``modes``
    are then sequences (:class:`~sparsedyn.contact.per_state.PerState`) of one array (nc_b, 3) and
    (nc_b,) per state, and ``contacts`` a sequence per state.
    ``previous``: the ``(contacts, impulses)`` of the step before (for a batch, :func:`batch_previous`
    of them, which on the kernel's road warm-starts all states at once): the
    step starts from them where a contact persists (:func:`matched_warm_start`); else a
    ``warm_start`` of the contacts' shape is taken as given, in the contacts' order.  ``hits``:
    :func:`~sparsedyn.collide`'s result at ``q`` if known (one state).  Without ``hits`` or
    ``want_contacts``, and with ``previous`` of this road or none, a state in a scene whose pairs are
    all the collision kernel's (:func:`~sparsedyn.contact.scene_data.scene_slot_data`) is laid out
    with no Contact object per hit, and ``contacts`` is then a :class:`FoundContacts` (what
    ``previous`` needs of them)."""
    return step_in_scene(step, model, q, v, tau, scene, dt, options, previous, hits, want_contacts)


def step_in_scene(step, model, q, v, tau, scene, dt, options, previous=None, hits=None, want_contacts=False):
    """:func:`scene_step` with its ``options`` a dict (the caller's own: the warm start is set in it),
    for the callers that hold them so (a step costs less without a keyword dict made per call)."""
    inner = scene.model
    if model is not inner:
        inner = getattr(model, "model", model)
        if inner is not scene.model and not _same_model(inner, scene.model):
            raise ValueError(f"contact_step: the scene was built on model {scene.model.name!r}, not on the model passed "
                             f"({getattr(inner, 'name', type(inner).__name__)!r}, another object): pass scene.model")
    qa = q if type(q) is np.ndarray and q.dtype is _F64 else np.asarray(q, float)
    if qa.shape != (inner.nq,):
        if qa.ndim != 2 or qa.shape[1] != inner.nq:
            raise ValueError(f"contact_step: a step in a scene takes one state, q of shape (nq,) = ({inner.nq},), "
                             f"or a batch (B, nq); got shape {qa.shape}")
        return _batch_step(step, model, qa, v, tau, scene, dt, previous, options)
    # the pairs that may touch within the step: closer than the margin plus dt times their closing speed
    va = v if type(v) is np.ndarray and v.dtype is _F64 else np.asarray(v, float)
    ahead = va.shape == (inner.nv,) and type(dt) in (float, int) and 0 < dt < math.inf
    if not want_contacts and hits is None and (previous is None or type(previous[0]) is FoundContacts):
        # no Contact object per hit (the native road); the look-ahead in the collision kernel's call
        # where the step runs in data slots, those straight from the kernel's rows (the per-body slots
        # made when read: the warm start of the next step, the derivatives)
        inside = not runs_per_body(scene)
        fast = scene_slot_data(scene, qa, None, (va, float(dt)), inside) if ahead else \
            scene_slot_data(scene, qa, pair_cutoffs(scene, qa, v, dt), None, inside)
        if fast is not None:
            found, slots = (FoundContacts(fast[0], fast[1], fast[3]), fast[2]) if inside else \
                (FoundContacts(fast[0], fast[1]), fast[1])
            # a warm start matched from the step before's impulses (finite: that step checked them) is
            # not checked again
            options["warm_checked"] = previous is not None
            if previous is not None:
                options["warm_start"] = matched_warm_start(*previous, found)
            elif options.get("warm_start") is not None:
                options["warm_start"] = _given_warm_start(options["warm_start"], len(found.pair))
            return step(model, qa, va, tau, found, slots, dt, **options), found
    contacts = scene_contacts(scene, qa, step_hits(scene, qa, v, dt) if hits is None else hits)
    if previous is not None:
        options["warm_start"] = matched_warm_start(*previous, contacts)
    elif options.get("warm_start") is not None:
        options["warm_start"] = _given_warm_start(options["warm_start"], len(contacts))
    return step(model, qa, v, tau, contacts, step_slots(scene, qa, scene_slots(scene, contacts)), dt, **options), \
        contacts


def _given_warm_start(warm_start, nc):
    """A ``warm_start`` given to a step in a scene: the impulses as an array where they are those of ``nc``
    contacts, None where their shape says the contact set changed (a warm start is a guess); a
    :class:`TypeError` naming the argument where they are not impulses at all."""
    if type(warm_start) is not np.ndarray:
        if hasattr(warm_start, "impulses") and hasattr(warm_start, "modes"):
            raise TypeError("contact_step: warm_start takes impulses (nc, 3), not a step's result: pass "
                            "warm_start=step.impulses, or use sd.rollout, which matches each contact to the "
                            "previous step's by its pair of shapes and point")
        warm_start = _checks.numeric("warm_start", warm_start, f"({nc}, 3) (impulses)")
    if warm_start.ndim < 2 or warm_start.shape[-1] != 3:
        raise ValueError(f"contact_step: warm_start takes impulses (nc, 3), one row per contact; got shape "
                         f"{warm_start.shape}")
    return warm_start if warm_start.shape[-2:] == (nc, 3) else None       # (the contact set changed)


def _given_batch_warm_start(given, B):
    """A batch's ``warm_start``: impulses (B, nc, 3) or B arrays (nc_b, 3) (each taken where its count is its
    state's contacts'), checked finite; a :class:`ValueError` naming the argument where they are not."""
    if type(given) is np.ndarray and given.shape[:1] + given.shape[2:] == (B, 3) and np.isfinite(given).all():
        return given
    try:
        rows = [np.asarray(x, float) for x in given] if not isinstance(given, (str, bytes)) and \
            len(given) == B else None
    except (TypeError, ValueError):
        rows = None
    if rows is None:
        raise ValueError(f"contact_step: a batch of {B} states takes warm_start as impulses (B, nc, 3) or a sequence "
                         f"of B arrays (nc_b, 3); got {type(given).__name__}" +
                         (f" of length {len(given)}" if hasattr(given, "__len__") else ""))
    for b, x in enumerate(rows):
        if x.ndim != 2 or x.shape[1] != 3 or not np.isfinite(x).all():
            raise ValueError(f"contact_step: warm_start of a batch: state {b}'s impulses must be finite, of shape "
                             f"(nc_b, 3); got shape {x.shape}" + (", not finite" if x.ndim == 2 and x.shape[1] == 3 else ""))
    return rows


def _same_model(a, b):
    """Whether ``a`` is the model ``b`` or a shallow copy of it (a compiled model holds one)."""
    if a is b:
        return True
    fields = getattr(type(b), "__dataclass_fields__", None)
    return type(a) is type(b) and fields is not None and all(getattr(a, f) is getattr(b, f) for f in fields)


class _FoundBatch(Sequence):
    """The contacts of a batch on the collision kernel's road: a sequence of B :class:`FoundContacts`,
    made when asked from a :class:`~sparsedyn.contact.scene_batch.BatchContacts` (its per-body rows
    made when first read)."""

    def __init__(self, laid):
        self.laid, self.pair, self.slot, self.ends = laid, laid.pair, laid.slot, laid.ends.tolist()

    def __len__(self):
        return len(self.ends) - 1

    def __getitem__(self, b):
        if isinstance(b, slice):
            return [self[k] for k in range(*b.indices(len(self)))]
        b = range(len(self))[b]
        i, j, laid = self.ends[b], self.ends[b + 1], self.laid
        return FoundContacts(self.pair[i:j], lambda: ContactSlots(laid.frames, self.slot[i:j], laid.data[b]),
                             lambda: laid.rows[i:j, 1:])

    def at(self):
        """``(state, slot)`` (n,) of every contact in order (its per-body slot)."""
        return contact_places(self.laid, True)

    def flat(self):
        """``(state, pair, points, planes)`` of every contact in order (:func:`batch_warm_start`)."""
        rows = self.laid.rows
        return self.at()[0], self.pair, rows[:, 1:4], rows[:, 4:]


class _BatchPrevious(Sequence):
    """The ``previous`` of a batch's next step (:func:`batch_previous`): state ``b``'s ``(contacts,
    impulses)``, and the batch's contacts whole (a warm start for all states at once)."""

    def __init__(self, found, impulses):
        self.found, self.impulses = found, impulses

    def __len__(self):
        return len(self.found)

    def __getitem__(self, b):
        return self.found[b], self.impulses[b]


def batch_previous(contacts, impulses):
    """The ``previous`` of :func:`scene_step` for the next step of a batch whose step gave
    ``contacts`` (one per state) and ``impulses`` (one array per state): a sequence of each state's
    ``(contacts, impulses)``."""
    if isinstance(contacts, _FoundBatch):
        return _BatchPrevious(contacts, impulses)
    return list(zip(contacts, impulses))


def _look_ahead(scene, q, v, dt):
    """``(V, dt)`` where the look-ahead of a batch ``q`` (B, nq) is the collision kernel's, as for a
    single state (``v`` (nv,) or (B, nv) of floats, ``dt`` a plain number > 0), else None (then
    :func:`~sparsedyn.contact.look_ahead.pair_cutoffs`)."""
    nv = scene.model.nv
    if type(dt) not in (float, int) or not 0 < dt < math.inf:
        return None
    try:
        V = np.asarray(v, float)
    except (TypeError, ValueError):
        return None
    return (V, float(dt)) if V.shape in ((nv,), (len(q), nv)) and np.isfinite(V).all() else None


def batch_states(who, q, v, tau_lead):
    """``(q, v)`` of a rollout in a scene broadcast to the states their and the joint forces' leading
    axes ``tau_lead`` make (None: a controller's, unknown), which must be one state or a batch (B,)."""
    try:
        lead = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], *(() if tau_lead is None else (tau_lead,)))
    except ValueError:
        lead = None
    if lead is None or len(lead) > 1:
        raise ValueError(f"{who}: a rollout in a scene takes one state or a batch (B,): q0 {q.shape}, v0 {v.shape} "
                         f"and the joint forces' leading axes {tau_lead} do not make one")
    if q.shape[:-1] != lead or v.shape[:-1] != lead:
        q, v = (np.array(np.broadcast_to(x, lead + x.shape[-1:])) for x in (q, v))
    return q, v


def _batch_step(step, model, q, v, tau, scene, dt, previous, options):
    """:func:`scene_step` of a batch ``q`` (B, nq): one layout for all states, one call of ``step``.
    On the collision kernel's road (:func:`~sparsedyn.contact.scene_batch.batch_contacts`) the
    contacts of all states are found and laid out without Python work per state (each state's data
    those of its single step: in the scene's data slots, straight from the kernel's rows), and
    ``contacts`` is a sequence of :class:`FoundContacts`, one per state; else a list of
    :func:`scene_contacts`' per state."""
    B, nv = len(q), scene.model.nv
    for name, x in (("v", v), ("tau", tau)):
        if np.shape(x) not in ((nv,), (B, nv)):
            raise ValueError(f"contact_step: a batch of {B} states in a scene takes {name} of shape ({nv},) or "
                             f"({B}, {nv}); got shape {np.shape(x)}")
    if previous is not None and len(previous) != B:
        raise ValueError(f"contact_step: previous holds {len(previous)} states for a batch of {B}")
    if options.get("warm_start") is not None:
        options["warm_start"] = _given_batch_warm_start(options["warm_start"], B)
    whole = isinstance(previous, _BatchPrevious)
    laid = None
    ahead = _look_ahead(scene, q, v, dt)
    if previous is None or whole or all(isinstance(p[0], FoundContacts) for p in previous):
        laid = batch_contacts(scene, q, None if ahead else pair_cutoffs(scene, q, v, dt), ahead,
                              data_slots=not runs_per_body(scene))
    if laid is None:
        return _batch_step_of_contacts(step, model, q, v, tau, scene, dt, previous, options)
    contacts = _FoundBatch(laid)
    given = options.pop("warm_start", None)
    per_body = laid.laid is None                  # (else data slots: each state's contacts first, in order)
    slots = ContactSlots(laid.frames, None, laid.data) if per_body else laid.laid
    ns = len(slots.frames)
    warm = np.zeros((B, ns, 3))
    if whole or previous is not None or given is not None:
        state, slot = contact_places(laid, per_body)
    if whole:                                     # all states' warm start at once
        imp = concatenated(previous.impulses, (3,)) if B else np.zeros((0, 3))
        warm[state, slot] = batch_warm_start(previous.found.flat(), imp, contacts.flat(), WARM_RADIUS)
    elif previous is not None or given is not None:
        ends = contacts.ends
        for b in range(B):
            at = slot[ends[b]:ends[b + 1]]
            if previous is not None:
                warm[b, at] = matched_warm_start(*previous[b], contacts[b])
            elif len(given) == B and np.shape(given[b]) == (len(at), 3):
                warm[b, at] = given[b]
    out = step(model, q, v, tau, (None,) * ns, slots, dt, warm_start=warm, **options)
    if out.impulses.shape[-2] != ns:              # (the free step has no slot)
        return out, contacts
    c = even_count(laid, per_body)
    slot = None if c >= 0 else contact_places(laid, per_body)[1]
    return out._replace(impulses=PerState(out.impulses, c, slot, contacts.ends),
                        modes=PerState(out.modes, c, slot, contacts.ends)), contacts


def _batch_step_of_contacts(step, model, q, v, tau, scene, dt, previous, options):
    """:func:`_batch_step` on the road of :func:`scene_contacts`' Contact objects, state by state."""
    B = len(q)
    cutoff = np.broadcast_to(pair_cutoffs(scene, q, v, dt), (B, len(scene.index)))
    V = np.asarray(v, float)
    V = V if V.ndim == 2 and len(V) == B else [V] * B
    contacts = [scene_contacts(scene, x, step_hits(scene, x, V[b], dt, cutoff[b])) for b, x in enumerate(q)]
    for c in contacts:
        scene_slots(scene, c)                     # grow the layout to hold every state's contacts
    each = [scene_slots(scene, c) for c in contacts]
    frames = each[0].frames
    index = [np.arange(len(c)) if s.index is None else s.index for c, s in zip(contacts, each)]
    data = np.stack([s.data for s in each]) if len(frames) else np.zeros((B, 0, 8))
    ns = len(frames)
    given = options.pop("warm_start", None)
    warm = np.zeros((B, ns, 3))
    for b in range(B) if previous is not None or given is not None else ():
        if previous is not None:
            warm[b, index[b]] = matched_warm_start(*previous[b], contacts[b])
        elif len(given) == B and np.shape(given[b]) == (len(contacts[b]), 3):
            warm[b, index[b]] = given[b]
    laid = batch_slots(scene, q, frames, data, index)
    if laid[0] is frames:                         # per-body slots
        warm_slots = warm
    else:                                         # data slots: each state's contacts in its first slots, in order
        warm = [warm[b, index[b]] for b in range(B)]
        frames, data, index = laid
        ns = len(frames)
        warm_slots = np.zeros((B, ns, 3))
        for b in range(B):
            warm_slots[b, index[b]] = warm[b]
    out = step(model, q, v, tau, (None,) * ns, ContactSlots(frames, None, data), dt, warm_start=warm_slots, **options)
    if out.impulses.shape[-2] != ns:              # (the free step has no slot)
        return out, contacts
    return out._replace(impulses=[out.impulses[b][index[b]] for b in range(B)],
                        modes=[out.modes[b][index[b]] for b in range(B)]), contacts
