"""The robot's own pairs that overlap where the robot cannot help it: :func:`overlapping_pairs`.

A robot's collision shapes are often drawn generously (convex hulls of its meshes, cylinders around
its joints), so some shapes of two links overlap in every configuration, or at the neutral one where a
controller starts.  Such a pair is not a contact: the step would push the links apart with all the
force Coulomb's law allows, on every step.  An SRDF lists them (its ``disable_collisions``, the
"Default" and "Never" reasons of MoveIt's setup assistant), and :class:`~sparsedyn.Scene` leaves out
what ``srdf=`` names; a robot without one (or with one written for another robot) keeps them, and
:func:`overlapping_pairs` finds them::

    scene = sd.Scene(model, world=[sd.Shape("plane")])
    scene = scene.with_pairs(remove=sd.overlapping_pairs(scene))

A :class:`~sparsedyn.Scene` made with ``self_collision`` whose robot's own pairs penetrate at its
reference configuration (its SRDF's first, else the neutral one within the joint limits) says so
(:class:`SelfOverlapWarning`, :func:`warn_self_overlaps`): a user who does not know of such pairs would
otherwise only see slow steps.  The check is one :func:`collide`, whose cache (coal objects, hulls, the
pairs' plan) the scene's later collisions use.  A scene made from another
(:meth:`~sparsedyn.Scene.with_pairs`) is not checked again: its pairs are the user's choice.
"""

from __future__ import annotations

import warnings

import numpy as np

from .collision import collide
from .scene_base import SceneBase
from .scene_pairs import fixed_base, free_roots

__all__ = ["SelfOverlapWarning", "overlapping_pairs", "warn_self_overlaps"]

#: The pairs named in a :class:`SelfOverlapWarning`, the deepest first.
NAMED = 5


class SelfOverlapWarning(UserWarning):
    """A scene's robot has checked pairs of its own shapes that penetrate at the model's neutral
    configuration (:func:`warn_self_overlaps`)."""


def overlapping_pairs(scene, q=None) -> list:
    """The pairs of two shapes on the robot's moving bodies in ``scene`` that penetrate at the configuration ``q`` (nq,)
    (default: the model's neutral configuration, ``scene.model.neutral()``): ``[(name_a, name_b)]``, each
    once, in the order of ``scene.pairs``, the names :meth:`~sparsedyn.Scene.with_pairs` takes.  Pairs
    with a world shape are never listed (they are what a robot stands on; a fixed-base robot's shapes on its
    base are its own, :func:`~sparsedyn.contact.scene_pairs.fixed_base`), nor pairs of two bodies with
    a free joint between them (objects of their own, placed by the user)."""
    if not isinstance(scene, SceneBase):
        raise TypeError(f"overlapping_pairs: scene must be a sd.Scene, got {type(scene).__name__}")
    return [p for p, _ in _overlaps(scene, q)]


def _overlaps(scene, q):
    """``[((name_a, name_b), depth)]`` of :func:`overlapping_pairs`, ``depth`` [m] (> 0) the deepest
    penetration of the pair's hits."""
    hits = collide(scene, scene.model.neutral() if q is None else q)
    own = _own(scene)
    deep = np.zeros(len(own))
    np.maximum.at(deep, hits.pair, -hits.distances)              # 0 where a pair has no penetrating hit
    return [(scene.pair_names[k], float(deep[k])) for k in np.flatnonzero(own & (deep > 0.0)).tolist()]


def _own(scene):
    """(P,) bool: the pairs of two shapes on the robot's moving bodies, not a body and its parent,
    whose relative placement the configuration's joints fix: no free joint between their bodies
    (two objects each on its own free joint, a ball beside a robot, are wherever the user puts them,
    not where ``neutral`` does)."""
    model = scene.model
    floating = free_roots(model)                               # the deepest free joint's body above each
    body = np.array([s.body for s in scene.shapes], int)
    robot = (body >= 0) | fixed_base(model, scene.shapes)      # a fixed base's shapes are the robot's own
    a, b = body[scene.index[:, 0]], body[scene.index[:, 1]]
    parent = np.append(model.topology.parent, -1)              # a body and its parent (a joint's stops)
    adjacent = (parent[a] == b) | (parent[b] == a)             # touch at their joint by construction
    return robot[scene.index[:, 0]] & robot[scene.index[:, 1]] & (floating[a] == floating[b]) & ~adjacent


def warn_self_overlaps(scene, srdf=None, stacklevel=2):
    """Warn (:class:`SelfOverlapWarning`) where pairs of ``scene``'s robot's own shapes penetrate at its
    reference configuration: the first of ``srdf``'s ``reference_configurations`` (what
    :func:`~sparsedyn.load_srdf` read: a robot's authors' pose, ``half_sitting``), else the model's
    neutral configuration moved into its joint limits (a pose the robot can take): how many, the
    :data:`NAMED` deepest with their depth, and how to leave them out.  Nothing is computed for a scene
    without such pairs to check (no self-collision)."""
    if not np.any(_own(scene)):
        return
    model = scene.model
    refs = getattr(srdf, "reference_configurations", None) or {}
    if refs:
        name, q = next(iter(refs.items()))
        where, call = f"its SRDF's reference configuration {name!r}", f"srdf.reference_configurations[{name!r}]"
    else:
        q = np.clip(model.neutral(), model.lower, model.upper)
        moved = not np.array_equal(q, model.neutral())
        where = "its neutral configuration" + (" (moved into its joint limits)" if moved else "")
        call = "np.clip(model.neutral(), model.lower, model.upper)" if moved else None
    found = _overlaps(scene, q)
    if not found:
        return
    worst = sorted(found, key=lambda x: -x[1])[:NAMED]
    named = ", ".join(f"({a}, {b}) by {1e3 * d:.1f} mm" if d >= 5e-5 else f"({a}, {b}) by {1e3 * d:.1g} mm"
                      for (a, b), d in worst)
    more = f", and {len(found) - len(worst)} more" if len(found) > len(worst) else ""
    listed = "sd.overlapping_pairs(scene" + (f", {call})" if call else ")")
    warnings.warn(
        f"Scene: {len(found)} pair{'s' if len(found) > 1 else ''} of robot {model.name!r}'s own shapes penetrate "
        f"at {where}: {named}{more}.  Each step pushes such a pair apart, with all the force the contact allows "
        f"(slow steps, whose contact problem may have no solution).  Shapes drawn around each other are no "
        f"contact: leave them out with scene = scene.with_pairs(remove={listed}), or pass the robot's SRDF "
        f"(Scene(..., srdf=sd.load_srdf(model, path))).", SelfOverlapWarning, stacklevel=stacklevel + 1)
