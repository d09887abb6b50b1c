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
"""

from __future__ import annotations

import numpy as np

from .collision import collide
from .scene import Scene

__all__ = ["overlapping_pairs"]


def overlapping_pairs(scene, q=None) -> list:
    """The pairs of two shapes on the robot's moving bodies in ``scene`` that penetrate at the configuration ``q`` (nq,)
    (default: the model's neutral configuration, ``scene.model.neutral()``): ``[(name_a, name_b)]``, each
    once, in the order of ``scene.pairs``, the names :meth:`~sparsedyn.Scene.with_pairs` takes.  Pairs
    with a world shape are never listed (they are what a robot stands on)."""
    if not isinstance(scene, Scene):
        raise TypeError(f"overlapping_pairs: scene must be a sd.Scene, got {type(scene).__name__}")
    hits = collide(scene, scene.model.neutral() if q is None else q)
    robot = {s.name for s in scene.shapes if s.body >= 0}
    deep = np.unique(hits.pair[hits.distances < 0.0])
    return [scene.pairs[k] for k in deep.tolist() if set(scene.pairs[k]) <= robot]
