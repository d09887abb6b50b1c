"""A time step in a :class:`~sparsedyn.contact.scene.Scene`: the contacts come from the geometry.

Each step runs :func:`~sparsedyn.contact.collision.collide` at ``q`` and turns every hit of a
robot shape ``a`` against a world shape ``b`` into a one-sided point contact
(:class:`~sparsedyn.sensors.Contact`): the witness point ``w_a`` fixed in a frame of ``a``'s body,
against the plane through ``w_b`` of normal ``n`` (from ``b`` towards ``a``), with the pair's
friction; its gap is the hit's signed distance.  The step is then :func:`~sparsedyn.contact_step`'s with that
contact list.

The compiled step keeps its library for new points, planes and frictions on the bodies it was built
for (:func:`~sparsedyn.contact.friction_problem.contact_slots`), but a new set of touching bodies, or
more contacts on a body than its slots, is a new build; the set of touching bodies changes from step
to step here, so a scene's step runs on the NumPy path.  Hits of two robot
shapes (self-collision) are found by :func:`~sparsedyn.collide` but not yet passed to the step: a point
contact holds a robot point against a fixed plane, and two moving bodies need a two-body contact.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kinematics import frame_placements
from ..kernels import use_backend
from ..sensors import Contact
from .collision import collide

__all__ = ["scene_contacts", "scene_step"]


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


def scene_step(step, model, q, v, tau, scene, dt, **options):
    """``step(model, q, v, tau, contacts, dt, **options)`` (:func:`~sparsedyn.contact_step`) with the contacts of
    ``scene`` at ``q``, on the NumPy path (module docstring).  One state: ``q`` (nq,)."""
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
    with use_backend("numpy"):
        return step(inner, qa, v, tau, contacts, dt, **options)
