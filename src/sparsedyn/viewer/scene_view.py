"""What the viewer draws of a :class:`~sparsedyn.Scene`: its world shapes, and the contacts of a
rollout in it (points and forces in the world).

The model's own shapes fixed to the world (an MJCF file's floor) are drawn with the model; the world
shapes the scene adds (``Scene(model, world=[...])``) are drawn as :class:`~sparsedyn.model.Geometry`
entries on the world.  A rollout in a scene (:func:`~sparsedyn.rollout`) gives, per step ``k``, the
impulses ``(nc_k, 3)`` of the contacts :func:`~sparsedyn.contact.scene_step.scene_contacts` finds at
``q[k]`` within the step's look-ahead from ``v[k]`` (:func:`~sparsedyn.contact.look_ahead.pair_cutoffs`),
in each contact's frame ``[t_x, t_y, n]``; the force drawn at sample ``k`` is that impulse
over ``dt``, in the world, at the contact's point on the robot.  The last sample (no step after it)
has no contacts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.kinematics import frame_placements
from ..contact.friction_problem import contact_basis
from ..contact.scene import Scene
from ..contact.heightfield import hfield_mesh
from ..contact.look_ahead import pair_cutoffs
from ..contact.scene_step import scene_contacts
from ..model import Geometry
from ..model.spatial import Transform

__all__ = ["WorldContacts", "world_geometries", "rollout_contacts"]

_WORLD_GREY = (0.55, 0.57, 0.6, 1.0)


class WorldContacts(NamedTuple):
    """Contacts of one sample: ``points`` (nc, 3) on the robot and ``forces`` (nc, 3) [N] on the robot,
    both in the world."""

    points: np.ndarray
    forces: np.ndarray


def checked_scene(model, scene):
    """``scene`` if it is a :class:`~sparsedyn.Scene` of ``model``, else a ``TypeError`` / ``ValueError``."""
    if not isinstance(scene, Scene):
        raise TypeError(f"scene: expected a sparsedyn Scene, got {type(scene).__name__}")
    if scene.model is not model:
        raise ValueError(f"scene: built on model {scene.model.name!r}, not on the viewer's model {model.name!r}")
    return scene


def world_geometries(scene) -> list:
    """The world shapes ``scene`` adds to its model, as :class:`~sparsedyn.model.Geometry` on the world
    (``body = -1``, ``kind = "collision"``; a plane drawn 20 m wide, a height field as its surface's
    triangles)."""
    own = len(scene.model.geometry("collision"))
    out = []
    for s in scene.shapes[own:]:
        X = Transform(np.array(s.R, float).T, np.array(s.p, float))              # shape_X_world (Plücker)
        mesh = s.mesh if s.vertices is None else None
        if s.kind == "hfield":                          # its surface as triangles
            V, F = hfield_mesh(s.size, s.heights)
            out.append(Geometry(s.name, -1, X, "mesh", (1.0, 1.0, 1.0), "collision", None, _WORLD_GREY, "", V, F,
                                s.friction))
            continue
        out.append(Geometry(s.name, -1, X, s.kind, tuple(s.size), "collision", mesh, _WORLD_GREY, "", s.vertices,
                            s.faces, s.friction))
    return out


def rollout_contacts(scene, qs, vs, impulses, dt) -> list:
    """:class:`WorldContacts` per sample of a rollout in ``scene``: ``qs`` (T + 1, nq), ``vs``
    (T + 1, nv), ``impulses`` the rollout's list of T arrays (nc_k, 3), ``dt`` its step (module
    docstring)."""
    model = scene.model
    if len(impulses) != len(qs) - 1:
        raise ValueError(f"play: a rollout in a scene has one impulse array per step, {len(qs) - 1} for {len(qs)} "
                         f"samples; got {len(impulses)}")
    out = []
    for k, lam in enumerate(impulses):
        contacts = scene_contacts(scene, qs[k], None, pair_cutoffs(scene, qs[k], vs[k], dt))
        lam = np.asarray(lam, float).reshape(-1, 3)
        if len(lam) != len(contacts):
            raise ValueError(f"play: step {k} of the rollout has {len(lam)} impulses, but the scene finds "
                             f"{len(contacts)} contacts at its configuration: not a rollout in this scene")
        Rf, pf = frame_placements(model, qs[k])
        points = np.array([Rf[c.frame] @ np.asarray(c.point, float) + pf[c.frame] for c in contacts]).reshape(-1, 3)
        forces = np.array([contact_basis(c)[0] @ x for c, x in zip(contacts, lam)]).reshape(-1, 3) / dt
        out.append(WorldContacts(points, forces))
    out.append(WorldContacts(np.zeros((0, 3)), np.zeros((0, 3))))
    return out
