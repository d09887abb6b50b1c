"""The records a :class:`~sparsedyn.Model` holds besides its bodies and joints: frames, fixed
joints, geometries, mimic couplings, joint dynamics; the model's errors and its magnitude limits.

Each record is an immutable named tuple, checked by the Model that holds it.
"""

from __future__ import annotations

import difflib
from typing import NamedTuple

import numpy as np

from .spatial import Transform

__all__ = ["Frame", "FixedJoint", "Mimic", "JointDynamics", "ModelError", "UnknownNameError", "unknown_name",
           "Geometry", "GEOMETRY_KINDS", "GEOMETRY_SHAPES"]


#: Largest length (m) a model may hold (joint placements, centres of mass): far beyond any
#: mechanism, and small enough that the products the dynamics forms (``m c^2``, ``X^T I X``,
#: velocity products) stay far from floating-point overflow.
MAX_LENGTH = 1e9
#: Largest mass (kg) of one body; spatial inertia entries are limited to ``MAX_MASS * MAX_LENGTH^2``.
MAX_MASS = 1e20


class ModelError(ValueError):
    """A model that cannot be built; the message names the body or joint."""


class UnknownNameError(KeyError):
    """A name (frame, joint, body, sensor, ...) that does not exist; the message lists the closest
    existing names.  A :class:`KeyError`, printed without the quotes ``KeyError`` adds."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


def unknown_name(kind: str, name, names, owner: str, limit: int = 12) -> UnknownNameError:
    """The error for ``name`` not among ``names`` (the ``kind`` of thing, e.g. ``"frame"``, of
    ``owner``, e.g. ``"model 'panda'"``): it names the closest candidates (``difflib``), or the first
    ``limit`` names when none is close.  Raise what it returns::

        raise unknown_name("frame", "r_hnd", model.frame_names, f"model {model.name!r}")
        # KeyError: model 'humanoid' has no frame 'r_hnd'; closest: r_hand, l_hand
    """
    names = [str(n) for n in names]
    close = difflib.get_close_matches(str(name), names, n=5, cutoff=0.6)
    msg = f"{owner} has no {kind} {name!r}"
    if close:
        msg += f"; closest: {', '.join(close)}"
    elif names:
        msg += f"; {kind}s: {', '.join(names[:limit])}" + (f", ... ({len(names)} in all)" if len(names) > limit else "")
    else:
        msg += f" (it has no {kind}s)"
    return UnknownNameError(msg)


class Frame(NamedTuple):
    """A named frame fixed on ``body``: ``X = frame_X_body`` (Plücker, see ``spatial``); ``body = -1``:
    fixed to the world, ``X = frame_X_world``."""

    name: str
    body: int
    X: Transform


class FixedJoint(NamedTuple):
    """A fixed joint merged into ``body`` (see the module docstring).

    ``X = joint_X_body``; ``inertia`` (6, 6): the merged links on the child side,
    body coordinates; ``children``: indices of the moving bodies whose joints sit
    on those links; ``frames``: names of the frames on the child side.
    """

    name: str
    body: int
    X: Transform
    inertia: np.ndarray
    children: tuple = ()
    frames: tuple = ()


#: The two lists of shapes a model may carry (:meth:`Model.geometry`).
GEOMETRY_KINDS = ("visual", "collision")
#: Shape names of :class:`Geometry` and the number of ``size`` entries each takes.
GEOMETRY_SHAPES = {"box": 3, "sphere": 1, "cylinder": 2, "capsule": 2, "ellipsoid": 3, "plane": 2, "mesh": 3,
                   "hfield": 4}


class Geometry(NamedTuple):
    """A shape fixed on ``body`` (a body index; -1 for the world), read from a model file when asked
    (``load_urdf(..., geometry=True)``, ``load_mjcf(..., geometry=True)``).

    ``X = geometry_X_body`` (Plücker): the shape's own frame placed in the body frame.
    ``shape`` and ``size`` (in the shape's frame, metres):

    * ``"box"``: full edge lengths (x, y, z), centred;
    * ``"sphere"``: (radius,);
    * ``"cylinder"``: (radius, length) along z, centred;
    * ``"capsule"``: (radius, length of the cylindrical part) along z, centred;
    * ``"ellipsoid"``: the three radii;
    * ``"plane"``: full lengths (x, y) of a rectangle in the xy plane (0: unbounded);
    * ``"mesh"``: the scale along x, y, z (a negative one mirrors) of the mesh file ``mesh`` (a path when the loader found the
      file, else the reference as the model file wrote it), or of the triangles ``vertices`` (V, 3)
      and ``faces`` (F, 3) when the model file's compiler gave them (MJCF);
    * ``"hfield"``: a height field (MuJoCo's ``hfield``), ``(sx, sy, top, base)``: the grid ``heights``
      (nrow >= 2, ncol >= 2, values in [0, 1], row 0 at ``y = -sy``, column 0 at ``x = -sx``: MuJoCo's
      ``hfield_data`` layout) spans ``[-sx, sx] x [-sy, sy]``, its surface at ``top * heights``, the
      solid down to ``z = -base`` (:mod:`sparsedyn.contact.heightfield`).

    ``kind``: ``"visual"`` or ``"collision"``; ``rgba``: colour (4 numbers in [0, 1]) or ``None``;
    ``link``: the link (URDF) or body (MJCF) of the file that declared it, whose frame may have been
    merged into ``body`` through fixed joints; ``friction``: the Coulomb coefficient the file gave it
    (MJCF: the geom's sliding friction), or ``None``.

    Which pairs a scene (:class:`~sparsedyn.Scene`) checks, as MuJoCo decides them (MJCF): ``contype``
    and ``conaffinity``, the collision bit masks (two shapes may touch when ``contype_a & conaffinity_b``
    or ``contype_b & conaffinity_a`` is non-zero; ``None``: no masks, the URDF rule); ``exclude``: the
    names of the geometries never paired with this one (MuJoCo's parent-child filter and
    ``<contact><exclude>``); ``pairs``: ``((geometry name, friction), ...)``, pairs checked whatever the
    masks and exclusions, with their own Coulomb coefficient (``<contact><pair>``); ``priority``: MuJoCo's
    geom ``priority`` (of two shapes that both give a friction, the higher priority's counts; equal: the
    larger); ``condim``: MuJoCo's geom ``condim`` (1: frictionless; 3, 4, 6: with friction, the default
    3), mixed as MuJoCo does (the higher priority's, else the larger): a pair whose mixed ``condim`` is
    1 has friction 0.
    """

    name: str
    body: int
    X: Transform
    shape: str
    size: tuple
    kind: str = "visual"
    mesh: str | None = None
    rgba: tuple | None = None
    link: str = ""
    vertices: np.ndarray | None = None
    faces: np.ndarray | None = None
    friction: float | None = None
    contype: int | None = None
    conaffinity: int | None = None
    exclude: tuple = ()
    pairs: tuple = ()
    priority: int = 0
    heights: np.ndarray | None = None
    condim: int = 3


class Mimic(NamedTuple):
    """``q[joint] = multiplier * q[mimicked] + offset`` (URDF ``<mimic>``).

    Kept as data: the joints are independent in the Model; a constraint solver
    may impose the coupling.  ``joint``/``mimicked`` are body indices.
    """

    joint: int
    mimicked: int
    multiplier: float
    offset: float


class JointDynamics(NamedTuple):
    """Passive joint properties kept as data (no dynamics algorithm applies them; the springs' and
    dampers' forces: :func:`~sparsedyn.passive_forces`, which ``contact_step(..., passive=True)`` adds).

    ``damping`` (nv,): viscous damping, ``tau = -damping * v``; ``stiffness``
    (nv,): spring stiffness towards ``spring_reference`` (a ball or free joint's
    spring acts on the rotation vector of the relative orientation);
    ``frictionloss`` (nv,): dry friction force bound; ``spring_reference`` (nq,):
    the configuration where the springs are at rest; ``reference`` (nq,): the
    configuration in which the source file placed the bodies (MuJoCo's
    ``qpos0``; the neutral configuration for a URDF or a built model).
    """

    damping: np.ndarray
    stiffness: np.ndarray
    frictionloss: np.ndarray
    spring_reference: np.ndarray
    reference: np.ndarray


def _short(name, n=80):
    """``repr(name)``, clipped to about ``n`` characters for error messages."""
    r = repr(name)
    return r if len(r) <= n else f"{r[:n - 20]}...{r[-12:]} ({len(str(name))} characters)"


def collision_filter(who, g):
    """``(contype, conaffinity, exclude, pairs)`` of geometry ``g``, checked (:class:`Geometry`)."""
    masks = []
    for key in ("contype", "conaffinity"):
        x = getattr(g, key)
        if x is not None and (isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= x < 2 ** 32):
            raise ModelError(f"{who}: {key} must be a bit mask (an integer in [0, 2**32)) or None, got {x!r}")
        masks.append(None if x is None else int(x))
    if (masks[0] is None) != (masks[1] is None):
        raise ModelError(f"{who}: contype and conaffinity are given together or not at all, got "
                         f"{g.contype!r} and {g.conaffinity!r}")
    if isinstance(g.exclude, str) or not all(isinstance(n, str) for n in g.exclude):
        raise ModelError(f"{who}: exclude must be geometry names, got {g.exclude!r}")
    pairs = []
    for entry in g.pairs:
        try:
            other, mu = entry
            mu = float(mu)
        except (TypeError, ValueError):
            raise ModelError(f"{who}: pairs takes (geometry name, friction) entries, got {entry!r}") from None
        if not isinstance(other, str) or not (np.isfinite(mu) and mu >= 0):
            raise ModelError(f"{who}: pairs takes (geometry name, friction >= 0) entries, got {entry!r}")
        pairs.append((other, mu))
    return masks[0], masks[1], tuple(g.exclude), tuple(pairs)


def checked_heights(who, g):
    """The grid ``heights`` of geometry ``g``, checked (:class:`Geometry`) and read-only; None for a
    shape other than ``"hfield"``."""
    if g.shape != "hfield":
        if g.heights is not None:
            raise ModelError(f"{who}: heights is for a height field (shape 'hfield'), got shape {g.shape!r}")
        return None
    try:
        H = np.array(g.heights, float)
    except (TypeError, ValueError):
        raise ModelError(f"{who}: a height field needs heights, a grid of numbers (nrow, ncol), got "
                         f"{type(g.heights).__name__}") from None
    if H.ndim != 2 or min(H.shape) < 2:
        raise ModelError(f"{who}: a height field needs heights of shape (nrow >= 2, ncol >= 2), got shape {H.shape}")
    if not np.all(np.isfinite(H)) or H.min() < 0 or H.max() > 1:
        raise ModelError(f"{who}: a height field's heights are finite numbers in [0, 1] (scaled by size[2]), got "
                         f"values in [{np.nanmin(H):g}, {np.nanmax(H):g}]")
    H.flags.writeable = False
    return H
