"""The pairs a :class:`~sparsedyn.Scene` checks by default: :func:`default_pairs`.

Two rules, by what the model file said of its collision shapes:

* shapes without bit masks (URDF, shapes built by hand): every robot shape with every world shape,
  and every two robot shapes on different bodies that are not parent and child (adjacent links touch
  at their joint by construction);
* shapes with MuJoCo's collision filter (MJCF, :class:`~sparsedyn.model.Geometry`'s ``contype``,
  ``conaffinity``, ``exclude`` and ``pairs``): the pairs MuJoCo's ``mj_collision`` checks, i.e. two
  shapes on different bodies whose masks match (``contype_a & conaffinity_b | contype_b &
  conaffinity_a``), neither excluding the other, plus the explicit pairs whatever their masks.

A world shape the user adds (no masks) meets every robot shape, except a shape whose masks are both
zero (a joint's stop, :mod:`~sparsedyn.contact.joint_stops`), which is in its explicit pairs only.  A
fixed-base robot's own shapes on its base (a URDF's root link and the links welded to it: the model's
shapes without masks on the world body, :func:`fixed_base`) are the robot's, not world shapes, to the
bodies jointed to the world without a free joint between: they meet those under the self-collision
rule, never the links jointed to the base itself.
Two world shapes never collide, nor two planes.  ``self_collision=False`` drops every pair of two
robot shapes but the explicit pairs of a body and its parent (a joint's stops).
"""

from __future__ import annotations

import numpy as np

from ..model.joints import Free

__all__ = ["default_pairs", "fixed_base", "free_roots"]


def fixed_base(model, shapes):
    """(S,) bool: the shapes that may be a fixed-base robot's base among ``shapes`` (the model's collision
    shapes first, as :func:`default_pairs` takes them): those of the model on the world body without bit
    masks (an MJCF file's world geoms, its floor, have masks: they stay world shapes, under MuJoCo's rule).
    They are the base of the bodies jointed to the world without a free joint between (:func:`free_roots`),
    and world shapes to a free body."""
    geoms = model.geometry("collision")
    return np.array([k < len(geoms) and s.body < 0 and geoms[k].contype is None for k, s in enumerate(shapes)], bool)


def free_roots(model):
    """(nbodies + 1,) int: per body the deepest body at or above it whose joint is free (-1: none, the
    body hangs from the world through other joints); the last entry, the world's (body -1), is -1."""
    root = np.full(model.nbodies + 1, -1)
    for i in range(model.nbodies):                             # (parents come first)
        root[i] = i if isinstance(model.joints[i], Free) else root[model.topology.parent[i]]
    return root


def default_pairs(model, shapes, self_collision):
    """``(pairs [(i, j)], explicit {(i, j): friction})`` over ``shapes`` (robot shapes first, then
    world shapes; the first ``len(model.geometry("collision"))`` are the model's, in that order).  In
    a pair, ``i`` is a robot shape and ``j`` a world shape, or both are robot shapes and ``i < j``."""
    geoms = model.geometry("collision")
    info = [geoms[k] if k < len(geoms) else None for k in range(len(shapes))]
    masked = [g is not None and g.contype is not None for g in info]
    index = {g.name: k for k, g in enumerate(info) if g is not None}
    exclude = [frozenset(index[n] for n in g.exclude if n in index) if g is not None else frozenset() for g in info]
    inert = [m and g.contype == 0 and g.conaffinity == 0 for m, g in zip(masked, info)]
    base, root = fixed_base(model, shapes), free_roots(model)
    parent = model.parent

    def checked(i, j):
        a, b = shapes[i], shapes[j]
        if a.kind == b.kind == "plane" or (b.body >= 0 and not self_collision) or a.body == b.body:
            return False
        if inert[i] or inert[j]:
            return False
        if j in exclude[i] or i in exclude[j]:
            return False
        if base[j] and root[a.body] < 0:           # the robot's own base: a self pair, none with its children
            return self_collision and parent[a.body] >= 0
        if masked[i] and masked[j]:
            return bool(info[i].contype & info[j].conaffinity or info[j].contype & info[i].conaffinity)
        return b.body < 0 or (parent[a.body] != b.body and parent[b.body] != a.body)

    robot = [k for k, s in enumerate(shapes) if s.body >= 0]
    world = [k for k, s in enumerate(shapes) if s.body < 0]
    pairs = [(i, j) for x, i in enumerate(robot) for j in robot[x + 1:] + world if checked(i, j)]
    explicit = {}
    for i, g in enumerate(info):
        for name, mu in (g.pairs if g is not None else ()):
            a, b = i, index[name]
            if shapes[a].body < 0 or (shapes[b].body >= 0 and b < a):
                a, b = b, a
            ka, kb = shapes[a].body, shapes[b].body
            if ka >= 0 and (kb < 0 or self_collision or parent[ka] == kb or parent[kb] == ka):
                explicit[(a, b)] = mu
    return pairs + list(explicit), explicit
