"""A time step in a :class:`~sparsedyn.contact.scene.Scene`: the contacts come from the geometry.

Each step runs :func:`~sparsedyn.contact.collision.collide` at ``q`` and turns every hit of a
robot shape ``a`` against a world shape ``b`` into a one-sided point contact
(:class:`~sparsedyn.sensors.Contact`): the witness point ``w_a`` fixed in a frame of ``a``'s body,
against the plane through ``w_b`` of normal ``n`` (from ``b`` towards ``a``), with the pair's
friction; its gap is the hit's signed distance.  The step is then :func:`~sparsedyn.contact_step`'s with that
contact list.

The compiled step keeps its library for new points, planes and frictions on the bodies it was built
for (:func:`~sparsedyn.contact.friction_problem.contact_slots`), but a new set of touching bodies, or
more contacts on a body than its slots, is a new build.  So a scene keeps its own layout of slots
(:func:`scene_slots`), the union of those its steps have needed: each body that has touched the
world holds the power of two of slots that held its most contacts so far, whether it touches now or
not; a slot without a hit is free, its point 1000 km above its plane, open.  A step runs on the
default road (native once built); a trajectory builds a new step only when a body touches for the
first time or outgrows its slots, so its builds are bounded by the bodies that touch and the
doublings of their slots.  Free slots are not free of cost: the step's problem keeps their rows
(open, with zero impulse), so a layout larger than the contacts of the moment costs time and
iterations (the ADMM's penalty scales with the problem's size).  Hits of two robot
shapes (self-collision) are found by :func:`~sparsedyn.collide` but not yet passed to the step: a point
contact holds a robot point against a fixed plane, and two moving bodies need a two-body contact.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kinematics import frame_placements
from ..sensors import Contact
from .collision import collide
from .friction_problem import ContactSlots, contact_slots, fill_slots
from .scene_data import scene_slot_data

__all__ = ["scene_contacts", "scene_slots", "scene_step"]


def _body_frames(model):
    """Body index -> the index of a frame on that body (the first one)."""
    out = {}
    for k, f in enumerate(model.frames):
        out.setdefault(f.body, k)
    return out


def scene_contacts(scene, q, hits=None) -> list:
    """The point contacts (:class:`~sparsedyn.Contact`, ``"3d"``) of the robot-world hits of
    ``scene`` at ``q`` (nq,) (module docstring); ``hits``: :func:`~sparsedyn.collide`'s result at ``q`` if known."""
    if hits is None:
        hits = collide(scene, q)
    model = scene.model
    frames = _body_frames(model)
    Rf, pf = frame_placements(model, q)
    out = []
    for k in range(len(hits.distances)):
        i, j = scene.index[hits.pair[k]]
        a, b = scene.shapes[i], scene.shapes[j]
        if b.body >= 0:                           # self-collision: no two-body contact yet (module docstring)
            continue
        f = frames.get(a.body)
        if f is None:
            raise ValueError(f"scene step: body {model.body_names[a.body]!r} of shape {a.name!r} has no frame to "
                             f"hold a contact")
        n = hits.normals[k]
        wa, wb = hits.witness_a[k], hits.witness_b[k]
        point = Rf[f].T @ (wa - pf[f])
        out.append(Contact(int(f), "3d", friction=float(scene.pair_friction[hits.pair[k]]), point=point,
                           plane=(n, float(n @ wb)), name=f"{a.name}/{b.name}#{k}"))
    return out


def scene_slots(scene, contacts) -> ContactSlots:
    """The point ``contacts`` of :func:`scene_contacts` laid out in the scene's slots (module
    docstring): :func:`~sparsedyn.contact.friction_problem.contact_slots`'s data, each body's contacts in the
    first of its slots, the free ones open.  The layout only grows: a body that touches for the first
    time, or with more contacts than its slots, gets the power of two that holds them."""
    own = contact_slots(scene.model, contacts)
    where = np.arange(len(contacts)) if own.index is None else own.index
    keys = [own.frames[k] for k in where]
    layout = scene.cache.setdefault("step_slots", {})             # slot key -> its number of slots; only grows
    for key in set(keys):
        layout[key] = max(layout.get(key, 0), 1 << (keys.count(key) - 1).bit_length())
    return ContactSlots(*fill_slots(keys, layout, own.data[where]))


def scene_step(step, model, q, v, tau, scene, dt, **options):
    """``step(model, q, v, tau, contacts, slots, dt, **options)`` (:func:`~sparsedyn.contact_step` laid out
    in slots) with the contacts of ``scene`` at ``q`` in the scene's slots (:func:`scene_slots`), on the
    default road.  One state: ``q`` (nq,)."""
    inner = getattr(model, "model", model)
    if inner is not scene.model:
        raise ValueError(f"contact_step: the scene was built on model {scene.model.name!r}, not on the model "
                         f"passed ({getattr(inner, 'name', type(inner).__name__)!r})")
    qa = np.asarray(q, float)
    if qa.ndim != 1:
        raise ValueError(f"contact_step: a step in a scene takes one state, q of shape (nq,) = ({inner.nq},), got "
                         f"shape {qa.shape}; step the states of a batch one by one")
    fast = scene_slot_data(scene, qa)
    if fast is None:
        contacts = scene_contacts(scene, qa)
        slots = scene_slots(scene, contacts)
    else:
        contacts, slots = range(fast[0]), fast[1]    # the step reads the number of contacts only
    if options.get("warm_start") is not None and np.shape(options["warm_start"])[-2:] != (len(contacts), 3):
        options["warm_start"] = None              # the contact set changed
    return step(model, qa, v, tau, contacts, slots, dt, **options)
