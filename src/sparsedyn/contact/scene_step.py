"""A time step in a :class:`~sparsedyn.contact.scene.Scene`: the contacts come from the geometry.

Each step runs :func:`~sparsedyn.contact.collision.collide` at ``q`` and turns every hit of a
robot shape ``a`` against a world shape ``b`` into a one-sided point contact
(:class:`~sparsedyn.sensors.Contact`): the witness point ``w_a`` fixed in a frame of ``a``'s body,
against the plane through ``w_b`` of normal ``n`` (from ``b`` towards ``a``), with the pair's
friction; its gap is the hit's signed distance.  The step is then :func:`~sparsedyn.contact_step`'s with that
contact list.

The compiled step keeps its library for new points, planes and frictions on the bodies it was built
for (:func:`~sparsedyn.contact.friction_problem.contact_slots`), but a new set of touching bodies, or
more contacts on a body than its slots, is a new build.  So the step's structure is the scene's, not
the step's (:func:`scene_slots`): every body with a shape that may touch the world holds a fixed
number of slots (a power of two, at least four), whether it touches or not; a slot without a hit is
free, its point 1000 km above its plane, open and out of the solve.  A step runs on the default road
(native once built) with one build per scene; a body that ever has more hits than its slots gets
twice as many (one more build), so a trajectory settles on one structure.  Hits of two robot
shapes (self-collision) are found by :func:`~sparsedyn.collide` but not yet passed to the step: a point
contact holds a robot point against a fixed plane, and two moving bodies need a two-body contact.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kinematics import frame_placements
from ..sensors import Contact
from .collision import collide
from .friction_problem import ContactSlots, contact_slots, fill_slots

__all__ = ["scene_contacts", "scene_slots", "scene_step"]

#: The fewest slots a body of a scene holds (four: a box's face, a capsule's two ends with room).
MIN_SLOTS = 4


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


def _layout(scene):
    """The scene's slot layout, kept in its cache: ``{slot key: number of slots}`` for every body of a
    shape paired with a world shape, the key the frame :func:`contact_slots` gives the body's contacts."""
    layout = scene.cache.get("step_slots")
    if layout is None:
        frames = _body_frames(scene.model)
        bodies = sorted({scene.shapes[i].body for i, j in scene.index if scene.shapes[j].body < 0
                         and scene.shapes[i].body >= 0 and scene.shapes[i].body in frames})
        if bodies:
            probe = contact_slots(scene.model, [Contact(frames[b], "3d", friction=0.0) for b in bodies])
            layout = dict.fromkeys(probe.frames, MIN_SLOTS)
        else:
            layout = {}
        scene.cache["step_slots"] = layout
    return layout


def scene_slots(scene, contacts) -> ContactSlots:
    """The point ``contacts`` of :func:`scene_contacts` laid out in the scene's slots (module
    docstring): :func:`~sparsedyn.contact.friction_problem.contact_slots`'s data, each body's contacts in the
    first of its slots, the free ones open.  A body with more contacts than its slots doubles them."""
    own = contact_slots(scene.model, contacts)
    where = np.arange(len(contacts)) if own.index is None else own.index
    keys = [own.frames[k] for k in where]
    layout = _layout(scene)
    for key in set(keys):
        need = keys.count(key)
        while layout.get(key, 0) < need:
            layout[key] = max(MIN_SLOTS, 2 * layout.get(key, 0))
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
    contacts = scene_contacts(scene, qa)
    if options.get("warm_start") is not None and np.shape(options["warm_start"])[-2:] != (len(contacts), 3):
        options["warm_start"] = None              # the contact set changed
    return step(model, qa, v, tau, contacts, scene_slots(scene, contacts), dt, **options)
