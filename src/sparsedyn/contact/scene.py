"""A robot and the world it may touch: :class:`Scene`.

The scene's shapes are the model's collision shapes (``model.geometry("collision")``, in file order:
those on bodies move with ``q``; those on the world, such as an MJCF file's floor or a fixed base's
link, stay) followed by the world shapes the user adds.  The checked pairs are

* every robot shape with every world shape;
* with ``self_collision``: every two robot shapes on different bodies that are not parent and child
  (adjacent links touch at their joint by construction);
* for a model whose shapes carry MuJoCo's collision filter (an MJCF file's), the pairs MuJoCo checks
  instead: bit masks, its parent-child filter, ``<contact><exclude>`` and ``<contact><pair>``
  (:mod:`sparsedyn.contact.scene_pairs`);

less the pairs of links an SRDF disables (``<disable_collisions>``, links named as in the model file)
but the model's explicit pairs (MJCF ``<contact><pair>``, a joint's stops:
:func:`~sparsedyn.with_joint_stops`).
Two world shapes never collide, nor two planes (unbounded, they always would).  In a pair ``(a, b)``, ``a`` is a robot shape and ``b`` a world shape,
or both are robot shapes in scene order; hits' normals point from ``b`` towards ``a``.

Friction of a pair: an MJCF ``<pair>``'s own (0 where its ``condim`` is 1); else 0 where the pair's
mixed ``condim`` is 1 (MuJoCo's: the condim of the shape of higher ``priority``, the larger at equal
priority; 1 is a frictionless contact); else, where both shapes give one, the coefficient of the
shape of higher ``priority`` (MuJoCo's geom priority), the larger at equal priority (MuJoCo's rule);
the one given where one does; else the scene's ``friction``.
"""

from __future__ import annotations

import os

import numpy as np

from ..io.srdf import load_srdf
from ..model import Model
from ..model.topology import model_store
from .overlaps import warn_self_overlaps
from .scene_base import SceneBase
from .scene_pairs import default_pairs
from .shapes import Shape

__all__ = ["Scene"]


class Scene(SceneBase):
    """``Scene(model, world=(), *, friction=0.8, self_collision=True, srdf=None, margin=0.005)``.

    ``model``: a :class:`~sparsedyn.Model` read with its collision shapes (``geometry=True``);
    ``world``: :class:`Shape` objects fixed in the world (a floor ``Shape("plane")``, boxes, ...);
    ``friction``: the Coulomb coefficient of shapes that give none (>= 0); ``srdf``: an SRDF file's path
    (read by :func:`~sparsedyn.load_srdf` for ``model``), what :func:`~sparsedyn.load_srdf` read (its
    ``disabled_collisions``) or ``(link1, link2)`` pairs to leave out; ``margin`` [m]: pairs closer than
    this are reported (contacts about to touch).

    Attributes: ``model``, ``shapes`` (tuple of :class:`Shape`, robot shapes first; names unique),
    ``pairs`` (``[(name_a, name_b)]``, the checked pairs), ``index`` (P, 2) (their shape indices),
    ``friction``, ``margin``, ``pair_friction`` (P,), ``explicit`` (``{(i, j): friction}`` of the model
    file's own pairs, MJCF ``<contact><pair>``), ``cache`` (what :func:`~sparsedyn.collide` derives
    from the scene once: coal objects, convex hulls, the pairs grouped by kind).  A scene is
    immutable: :meth:`with_pairs` gives a scene with pairs added or removed.

    With ``self_collision``, pairs of the robot's own shapes that penetrate at its reference configuration
    (``srdf``'s first, else the neutral one within the joint limits) are warned of (:class:`~sparsedyn.SelfOverlapWarning`: each step would push them
    apart), once, here (not by :meth:`with_pairs`, whose pairs are the user's choice).
    """

    def __init__(self, model, world=(), *, friction=0.8, self_collision=True, srdf=None, margin=0.005):
        if not isinstance(model, Model):
            raise TypeError(f"Scene: model must be a sparsedyn Model, got {type(model).__name__}")
        if isinstance(world, Shape):
            world = [world]
        world = list(world)
        for k, s in enumerate(world):
            if not isinstance(s, Shape):
                raise TypeError(f"Scene: world[{k}] must be a Shape, got {type(s).__name__}")
        friction = _nonneg("friction", friction)
        margin = _nonneg("margin", margin)
        if not isinstance(self_collision, (bool, np.bool_)):
            raise TypeError(f"Scene: self_collision must be True or False, got {self_collision!r}")
        robot = list(_robot_shapes(model))
        if not robot:
            raise ValueError(f"Scene: model {model.name!r} has no collision shapes; load it with geometry=True "
                             f"(sd.load_urdf(path, geometry=True), sd.load_mjcf(path, geometry=True))")
        world = [s if s.body < 0 else _on_world(s) for s in world]
        shapes = _unique_names(robot + world)
        pairs, explicit = default_pairs(model, shapes, self_collision)
        self._set(model, shapes, pairs, friction, margin, explicit)
        if isinstance(srdf, (str, os.PathLike)):
            srdf = load_srdf(model, srdf)
        if srdf is not None:
            disabled = getattr(srdf, "disabled_collisions", srdf)
            if isinstance(disabled, (str, bytes)) or not hasattr(disabled, "__iter__"):
                raise TypeError("Scene: srdf must be an SRDF file's path, what sd.load_srdf(model, path) returns or "
                                f"(link1, link2) pairs, got {type(srdf).__name__}")
            links = {s.link for s in shapes} | set(model.body_names) | {f.name for f in model.frames}
            drop = set()
            for entry in disabled:
                try:
                    a, b = tuple(entry)[:2]
                except (TypeError, ValueError):
                    raise ValueError(f"Scene: srdf: a disabled pair must be (link1, link2), got {entry!r}") from None
                for x in (a, b):
                    if x not in links:
                        raise ValueError(f"Scene: srdf: the disabled pair ({a!r}, {b!r}) names {x!r}, which is "
                                         f"no link of model {model.name!r}")
                drop |= {(a, b), (b, a)}
            keep = [(i, j) for i, j in pairs if (i, j) in explicit or (shapes[i].link, shapes[j].link) not in drop]
            self._set(model, shapes, keep, friction, margin, explicit)
        if self_collision:
            warn_self_overlaps(self, srdf, stacklevel=2)

    def _set(self, model, shapes, pairs, friction, margin, explicit):
        d = self.__dict__
        d["explicit"] = explicit                     # {(i, j): friction} of the model file's own pairs
        d["model"], d["shapes"], d["friction"], d["margin"] = model, tuple(shapes), friction, margin
        index = np.array(sorted(set(pairs)), int).reshape(-1, 2)
        index.flags.writeable = False
        d["index"] = index
        mu = np.array([explicit[(i, j)] if (i, j) in explicit else
                       _pair_friction(shapes[i], shapes[j], friction) for i, j in index], float)
        mu.flags.writeable = False
        d["pair_friction"] = mu
        d["names"] = {s.name: k for k, s in enumerate(shapes)}
        d["pair_names"] = tuple((shapes[i].name, shapes[j].name) for i, j in index)
        d["cache"] = {}                              # filled by collide on first use

    def __setattr__(self, key, value):
        raise AttributeError(f"Scene is immutable (cannot set {key!r}); use with_pairs or make a new one")

    @property
    def pairs(self) -> list:
        """The checked pairs ``[(name_a, name_b)]``."""
        return list(self.pair_names)

    def shape(self, name) -> Shape:
        """The shape called ``name``."""
        return self.shapes[self._find(name, "shape")[0]]

    def _find(self, name, who):
        """Indices of the shapes called ``name``, or on the link or body called ``name``."""
        if name in self.names:
            return [self.names[name]]
        hit = [k for k, s in enumerate(self.shapes) if s.link == name or
               (s.body >= 0 and self.model.body_names[s.body] == name)]
        if not hit:
            raise ValueError(f"Scene: {who} {name!r} names no shape and no link with a collision shape (shapes: "
                             f"{', '.join(list(self.names)[:12])}{', ...' if len(self.names) > 12 else ''})")
        return hit

    def with_pairs(self, add=(), remove=()) -> "Scene":
        """A scene that also checks the pairs ``add`` and no longer the pairs ``remove``: ``(x, y)``
        where each names a shape, or a link (all its shapes).  A pair of two world shapes, or of a shape
        with itself, is refused."""
        pairs = {tuple(p) for p in self.index.tolist()}
        for what, group in (("add", add), ("remove", remove)):
            for entry in group:
                try:
                    x, y = entry
                except (TypeError, ValueError):
                    raise ValueError(f"Scene.with_pairs: {what} takes (name, name) pairs, got {entry!r}") from None
                for i in self._find(x, what):
                    for j in self._find(y, what):
                        p = _ordered(self.shapes, i, j, what)
                        pairs.add(p) if what == "add" else pairs.discard(p)
        out = object.__new__(Scene)
        out._set(self.model, self.shapes, sorted(pairs), self.friction, self.margin, self.explicit)
        return out

    def _on_model(self, model) -> "Scene":
        """This scene's shapes, pairs, friction and margin on ``model``, a model of the same bodies and
        shapes with other inertias (its own cache: its kernels are ``model``'s)."""
        out = object.__new__(Scene)
        pairs = [tuple(p) for p in self.index.tolist()]
        out._set(model, self.shapes, pairs, self.friction, self.margin, self.explicit)
        return out

    def __repr__(self):
        nw = sum(s.body < 0 for s in self.shapes)
        return (f"Scene({self.model.name!r}: {len(self.shapes) - nw} robot shapes, {nw} world shapes, "
                f"{len(self.index)} pairs, friction={self.friction:g}, margin={self.margin:g})")


def _nonneg(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not np.isfinite(x) or x < 0:
        raise ValueError(f"Scene: {name} must be a finite number >= 0, got {x!r}")
    return float(x)


def _robot_shapes(model):
    """The :class:`Shape` of each of the model's collision geometries (:func:`_robot_shape`), made once per
    model (shapes are immutable: every scene of the model holds the same)."""
    store = model_store(model, "scene")
    got = store.get("robot shapes")
    if got is None:
        got = store.setdefault("robot shapes", tuple(_robot_shape(model, g) for g in model.geometry("collision")))
    return got


def _robot_shape(model, g):
    """The :class:`Shape` of the model's collision geometry ``g``; a height field moving with a body is
    refused (height fields are world shapes)."""
    if g.shape == "hfield" and g.body >= 0:
        raise ValueError(f"Scene: geometry {g.name!r} of model {model.name!r} is a height field on the moving body "
                         f"{model.body_names[g.body]!r}; a height field is supported fixed in the world only (an "
                         f"MJCF worldbody geom, or one on a body welded to the world)")
    return Shape.from_geometry(g)


def _on_world(s):
    raise ValueError(f"Scene: world shape {s.name!r} is on body {s.body}; world shapes are fixed in the world")


def _unique_names(shapes):
    """The shapes, renamed ``name_2``, ``name_3``, ... where a name repeats (default names do)."""
    seen, out = {}, []
    for s in shapes:
        n = s.name
        if n in seen:
            seen[n] += 1
            n = f"{n}_{seen[n]}"
            s = Shape(s.kind, () if s.kind == "plane" else s.size, placement=(s.R, s.p), friction=s.friction,
                      name=n, mesh=s.mesh if s.vertices is None else (s.vertices, s.faces), body=s.body, link=s.link,
                      heights=s.heights, priority=s.priority, condim=s.condim)
        seen.setdefault(n, 1)
        out.append(s)
    return out


def _ordered(shapes, i, j, who):
    a, b = shapes[i], shapes[j]
    if i == j or (a.body < 0 and b.body < 0) or a.kind == b.kind == "plane":
        raise ValueError(f"Scene.with_pairs: {who}: ({a.name!r}, {b.name!r}) is not a pair that can touch "
                         f"(a shape with itself, two world shapes or two planes)")
    if a.body < 0 or (b.body >= 0 and j < i):
        i, j = j, i
    return i, j


def _pair_friction(a, b, default):
    """MuJoCo's rule: 0 where the mixed condim (the higher priority's, the larger at equal priority)
    is 1; else of two shapes giving a friction, the higher priority's, the larger at equal priority;
    the one given where one gives it; else the scene's."""
    condim = max(a.condim, b.condim) if a.priority == b.priority else \
        (a.condim if a.priority > b.priority else b.condim)
    if condim == 1:
        return 0.0
    ma, mb = a.friction, b.friction
    if ma is None and mb is None:
        return default
    if ma is not None and mb is not None and a.priority != b.priority:
        return ma if a.priority > b.priority else mb
    return max(m for m in (ma, mb) if m is not None)
