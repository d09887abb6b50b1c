"""Collision shapes of a scene: :class:`Shape`.

A shape has the vocabulary of :class:`~sparsedyn.model.Geometry` (sizes in metres, in the shape's
own frame): ``"box"`` full edge lengths (x, y, z), centred; ``"sphere"`` (radius,); ``"capsule"``
and ``"cylinder"`` (radius, length) along z, centred (a capsule's length is that of its cylindrical
part); ``"ellipsoid"`` the three radii; ``"plane"`` the xy plane of its frame, normal +z, taken as
the half-space z <= 0 (unbounded, as MuJoCo and coal's ``Halfspace`` take it); ``"mesh"`` a mesh file
(``mesh="path"``, ``size`` its scale (x, y, z), default 1) or triangles
(``mesh=(vertices (V, 3), faces (F, 3))``); ``"hfield"`` a height field (MuJoCo's ``hfield``, a world
shape): ``size = (sx, sy, top, base)``, the grid spanning ``[-sx, sx] x [-sy, sy]``, its surface at
``top * heights`` and the solid down to ``z = -base``, with ``heights=`` (nrow >= 2, ncol >= 2) in
[0, 1], row 0 at ``y = -sy`` and column 0 at ``x = -sx`` (MuJoCo's ``hfield_data`` layout;
:mod:`sparsedyn.contact.heightfield`).

``placement``: the shape's frame in its parent's (the world for a world shape, the body for a
robot's shape) as ``(R (3, 3), p (3,))``, a 4x4 homogeneous matrix or a
:class:`~sparsedyn.model.spatial.Transform`; default the identity.
"""

from __future__ import annotations

import os

import numpy as np

from ..model.builders import as_transform
from ..model import GEOMETRY_SHAPES

__all__ = ["Shape", "SHAPE_KINDS"]

#: The kinds of :class:`Shape` and the number of ``size`` entries each takes.
SHAPE_KINDS = dict(GEOMETRY_SHAPES)


def _frozen(x, dtype=float):
    x = np.array(x, dtype)
    x.flags.writeable = False
    return x


class Shape:
    """A collision shape: ``Shape(kind, size=(), *, placement=None, friction=None, name=None, mesh=None,
    heights=None, priority=0, condim=3)`` (module docstring for the kinds and sizes; ``heights`` a height field's grid).

    ``friction``: the Coulomb coefficient (>= 0) of this shape's contacts, default the scene's;
    ``name``: default the kind.  Attributes: ``kind``, ``size`` (tuple), ``R`` (3, 3) and ``p`` (3,)
    (the placement, read-only arrays), ``friction``, ``name``, ``mesh`` (a path or None),
    ``vertices`` (V, 3) / ``faces`` (F, 3) (or None), ``heights`` (nrow, ncol) (or None), ``priority``
    (MuJoCo's geom priority: of two shapes giving a friction, the higher priority's counts), ``condim``
    (MuJoCo's geom condim, 1, 3, 4 or 6: a pair whose mixed condim, the higher priority's else the
    larger, is 1 is frictionless; 4 and 6 keep only the sliding friction), ``body`` (the body index of a robot's shape,
    -1 for the world) and ``link`` (the link the model file put it on).  A shape is immutable.

    >>> import sparsedyn as sd
    >>> sd.Shape("box", (0.4, 0.4, 0.1), placement=([[1, 0, 0], [0, 1, 0], [0, 0, 1]], [1, 0, 0.05]),
    ...          friction=0.6, name="step")
    Shape('box', (0.4, 0.4, 0.1), name='step', friction=0.6)
    """

    __slots__ = ("kind", "size", "R", "p", "friction", "name", "mesh", "vertices", "faces", "body", "link", "heights",
                 "priority", "condim")

    def __init__(self, kind, size=(), *, placement=None, friction=None, name=None, mesh=None, body=-1, link="",
                 heights=None, priority=0, condim=3):
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"Shape: name must be a non-empty string, got {name!r}")
        who = f"Shape {name or kind!r}"
        if kind not in SHAPE_KINDS:
            raise ValueError(f"{who}: kind must be one of {tuple(SHAPE_KINDS)}, got {kind!r}")
        size = _size(who, kind, size)
        R, p = _placement(who, placement)
        if friction is not None:
            if isinstance(friction, bool) or not isinstance(friction, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(friction) or friction < 0:
                raise ValueError(f"{who}: friction must be a finite number >= 0, got {friction!r}")
            friction = float(friction)
        path, vertices, faces = _mesh(who, kind, mesh)
        heights = _heights(who, kind, heights)
        if kind == "hfield" and int(body) >= 0:
            raise ValueError(f"{who}: a height field is supported fixed in the world only (body -1: an MJCF "
                             f"worldbody geom or one on a body welded to it), got body {body}")
        if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)):
            raise ValueError(f"{who}: priority must be an integer, got {priority!r}")
        if isinstance(condim, bool) or condim not in (1, 3, 4, 6):
            raise ValueError(f"{who}: condim must be 1, 3, 4 or 6 (MuJoCo's), got {condim!r}")
        for k, x in zip(self.__slots__, (kind, size, R, p, friction, name or kind, path, vertices, faces,
                                         int(body), str(link), heights, int(priority), int(condim))):
            object.__setattr__(self, k, x)

    def __setattr__(self, key, value):
        raise AttributeError(f"Shape is immutable (cannot set {key!r}); make a new one")

    @classmethod
    def from_geometry(cls, g, friction=None):
        """The shape of a model's :class:`~sparsedyn.model.Geometry` ``g`` (on its body, or the world)."""
        R, p = np.swapaxes(g.X.E, -1, -2), g.X.r
        if friction is None:
            friction = getattr(g, "friction", None)
        mesh = g.mesh if g.vertices is None else (g.vertices, g.faces)
        size = () if g.shape == "plane" else g.size
        return cls(g.shape, size, placement=(R, p), friction=friction, name=g.name, mesh=mesh, body=g.body,
                   link=g.link, priority=getattr(g, "priority", 0), heights=getattr(g, "heights", None),
                   condim=getattr(g, "condim", 3))

    @property
    def bounding_radius(self) -> float:
        """Radius of a sphere about the frame's origin that holds the shape (inf for a plane)."""
        s = self.size
        if self.kind == "sphere":
            return s[0]
        if self.kind == "capsule":
            return s[0] + s[1] / 2
        if self.kind == "cylinder":
            return float(np.hypot(s[0], s[1] / 2))
        if self.kind in ("box", "ellipsoid"):
            return float(np.linalg.norm(s) / 2) if self.kind == "box" else max(s)
        if self.kind in ("plane", "hfield"):
            return np.inf                     # a height field: coal's bounds decide
        if self.vertices is None:
            return np.inf                     # a mesh file: coal's own bounds decide
        return float(np.max(np.linalg.norm(self.vertices * np.asarray(s), axis=-1), initial=0.0))

    def __repr__(self):
        f = "" if self.friction is None else f", friction={self.friction:g}"
        m = "" if self.mesh is None else f", mesh={self.mesh!r}"
        b = "" if self.body < 0 else f", body={self.body}"
        return f"Shape({self.kind!r}, {self.size}, name={self.name!r}{f}{m}{b})"


def _size(who, kind, size):
    n = SHAPE_KINDS[kind]
    if kind == "plane" and (size is None or len(size) == 0):
        return (0.0, 0.0)
    if kind == "mesh" and (size is None or len(size) == 0):
        return (1.0, 1.0, 1.0)
    try:
        s = np.array(size, float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: size must be {n} numbers, got {size!r}") from None
    if s.shape != (n,) or not np.all(np.isfinite(s)):
        raise ValueError(f"{who}: a {kind} takes {n} finite sizes, got {size!r}")
    if kind == "plane" and np.any(s < 0) or kind == "mesh" and np.any(s == 0) or \
            kind not in ("plane", "mesh") and np.any(s <= 0):
        what = "non-negative" if kind == "plane" else "non-zero" if kind == "mesh" else "positive"
        raise ValueError(f"{who}: a {kind}'s sizes must be {what}, got {tuple(float(x) for x in s)}")
    return tuple(float(x) for x in s)


def _heights(who, kind, heights):
    if kind != "hfield":
        if heights is not None:
            raise ValueError(f"{who}: heights= is for kind 'hfield', got kind {kind!r}")
        return None
    try:
        H = np.array(heights, float)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: heights must be a grid of numbers (nrow, ncol), got {type(heights).__name__}") \
            from None
    if H.ndim != 2 or min(H.shape) < 2:
        raise ValueError(f"{who}: a height field needs heights= of shape (nrow >= 2, ncol >= 2), got shape {H.shape}")
    if not np.all(np.isfinite(H)) or H.min() < 0 or H.max() > 1:
        raise ValueError(f"{who}: heights must be finite numbers in [0, 1] (scaled by size[2]), got values in "
                         f"[{np.nanmin(H):g}, {np.nanmax(H):g}]")
    return _frozen(H)


def _placement(who, placement):
    """``(R, p)`` of a placement (anything :func:`~sparsedyn.model.builders.as_transform` takes), read-only."""
    X = as_transform(placement, f"{who}: placement")
    return _frozen(np.swapaxes(X.E, -1, -2)), _frozen(X.r)


def _mesh(who, kind, mesh):
    if kind != "mesh":
        if mesh is not None:
            raise ValueError(f"{who}: mesh= is for kind 'mesh', got kind {kind!r}")
        return None, None, None
    if mesh is None:
        raise ValueError(f"{who}: a mesh needs mesh='path' or mesh=(vertices (V, 3), faces (F, 3))")
    if isinstance(mesh, (str, os.PathLike)):
        path = os.fspath(mesh)
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise ValueError(f"{who}: cannot read the mesh file {path!r} (no such readable file)")
        return path, None, None
    try:
        V, F = mesh
        V, F = np.asarray(V, float), np.asarray(F)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: mesh must be a path or (vertices (V, 3), faces (F, 3)), got {type(mesh).__name__}") \
            from None
    if V.ndim != 2 or V.shape[1] != 3 or len(V) < 4 or not np.all(np.isfinite(V)):
        raise ValueError(f"{who}: mesh vertices must be finite, of shape (V >= 4, 3), got shape {V.shape}")
    if F.ndim != 2 or F.shape[1] != 3 or len(F) == 0 or F.dtype.kind not in "iu" or F.min() < 0 or F.max() >= len(V):
        got = f", {F.dtype} values in [{F.min()}, {F.max()}]" if F.size and F.dtype.kind in "iuf" else ""
        raise ValueError(f"{who}: mesh faces must be integer vertex indices in [0, {len(V)}) of shape (F >= 1, 3), "
                         f"got shape {F.shape}{got}")
    return None, _frozen(V), _frozen(F, int)
