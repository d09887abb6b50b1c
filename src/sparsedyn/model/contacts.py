"""Contacts as model entries: :class:`Contact`, an unknown wrench (or force) at a frame of the robot.

One vocabulary for estimation (what a problem leaves unknown) and contact dynamics (what holds a
frame still); the sensors (:mod:`sparsedyn.model.sensors`) measure the wrenches it declares.
"""

from __future__ import annotations

import numpy as np

from .model import UnknownNameError

__all__ = ["Contact", "CONTACT_KINDS", "MIN_NORMAL2", "MAX_NORMAL2", "MAX_CONTACT_LENGTH", "body_frame"]


def body_frame(model, who, frame):
    """The :class:`~sparsedyn.Frame` ``frame`` (a name or an index) of ``model``, which must be on a
    body; errors name ``who``."""
    try:
        fr = model.frames[model.frame(frame)]
    except KeyError as e:
        raise UnknownNameError(f"{who}: {e}") from None
    if fr.body < 0:
        raise ValueError(f"{who}: frame {fr.name!r} is fixed to the world, where nothing is measured or acts on "
                         f"the robot; name a frame on a body")
    return fr


#: Kinds of :class:`Contact`: ``"6d"`` (an unknown wrench ``[n; f]``), ``"3d"`` (a point: an unknown force ``f``)
#: and ``"1d"`` (a frictionless point: an unknown force along a fixed world direction).
CONTACT_KINDS = ("6d", "3d", "1d")


class Contact:
    """A contact at ``frame``: an unknown wrench ``[n; f]`` (``kind="6d"``, 6 unknowns) or an
    unknown force ``f`` at the frame origin (``kind="3d"``, a point contact, 3 unknowns), applied
    *on the robot* and expressed in the frame's axes (about its origin); or, with ``kind="1d"``
    and ``normal`` (3,) in *world* axes, one unknown: the force ``lambda normal/|normal|`` at the
    frame origin (a frictionless point contact holding the origin's velocity along the normal:
    RBDL's contact on one axis, MuJoCo's ``condim=1``).  ``normal`` is kept as given; the
    functions that use it normalise it.

    One vocabulary for estimation (:class:`~sparsedyn.estimation.EstimationProblem`) and contact
    dynamics (:func:`~sparsedyn.contact_dynamics`).  ``frame``: a frame name or index; ``name``:
    default the frame's.  A contact is immutable and hashable (a static argument of the compiled
    contact kernels); its ``repr`` names everything that defines it.

    ``friction``, ``point`` and ``plane`` are reserved for one-sided contact (a friction
    coefficient, a point fixed in the frame, the plane ``(normal, offset)`` it touches); they are
    validated here, and the functions that do not model one-sided contact refuse them.
    """

    __slots__ = ("frame", "kind", "name", "friction", "point", "plane", "normal")

    def __init__(self, frame, kind="6d", *, name=None, friction=None, point=None, plane=None, normal=None):
        if not isinstance(frame, (str, int, np.integer)) or isinstance(frame, bool) or frame == "":
            raise TypeError(f"Contact: frame must be a frame name or index, got {frame!r}")
        if kind not in CONTACT_KINDS:
            raise ValueError(f"Contact({frame!r}): kind must be one of {CONTACT_KINDS}, got {kind!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"Contact({frame!r}): name must be a non-empty string, got {name!r}")
        if (friction, point, plane) != (None, None, None) and kind != "3d":
            raise ValueError(f"Contact({frame!r}): friction, point and plane describe a one-sided point "
                             f"contact; they need kind='3d', got kind={kind!r}")
        if (kind == "1d") != (normal is not None):
            raise ValueError(f"Contact({frame!r}): a one-direction contact (kind='1d') needs its world "
                             f"normal=(x, y, z), and only it takes one; got kind={kind!r}, normal={normal!r}")
        if normal is not None:
            normal = _finite_tuple(f"Contact({frame!r}): normal", normal, 3)
            if not any(normal):
                raise ValueError(f"Contact({frame!r}): the normal must not be zero")
        if friction is not None:
            if isinstance(friction, bool) or not isinstance(friction, (int, float, np.floating, np.integer)) \
                    or not np.isfinite(friction) or friction < 0:
                raise ValueError(f"Contact({frame!r}): friction must be a finite number >= 0, got {friction!r}")
            friction = float(friction)
        if point is not None:
            point = _length_tuple(f"Contact({frame!r}): point", point, 3)
        if plane is not None:
            try:
                normal, offset = plane
            except (TypeError, ValueError):
                raise ValueError(f"Contact({frame!r}): plane must be (normal (3,), offset), got {plane!r}") from None
            normal = _finite_tuple(f"Contact({frame!r}): plane normal", normal, 3)
            if not any(normal):
                raise ValueError(f"Contact({frame!r}): the plane normal must not be zero")
            n2 = sum(c * c for c in normal)               # Python floats: inf on overflow, no warning
            if not MIN_NORMAL2 <= n2 <= MAX_NORMAL2:
                raise ValueError(f"Contact({frame!r}): the plane normal {normal} cannot be normalised in double "
                                 f"precision (its squared length {n2:.3g} is outside [{MIN_NORMAL2:.3g}, "
                                 f"{MAX_NORMAL2:.3g}]); give a normal of ordinary length, e.g. a unit vector")
            offset = _length_tuple(f"Contact({frame!r}): plane offset", [offset], 1)[0]
            plane = (normal, offset)
        frame = frame if isinstance(frame, str) else int(frame)
        for k, x in zip(self.__slots__, (frame, kind, name or str(frame), friction, point, plane, normal)):
            object.__setattr__(self, k, x)

    def __setattr__(self, key, value):
        raise AttributeError(f"Contact is immutable (cannot set {key!r}); make a new one")

    @property
    def size(self) -> int:
        """The number of unknowns, 6 (``"6d"``), 3 (``"3d"``) or 1 (``"1d"``)."""
        return {"6d": 6, "3d": 3, "1d": 1}[self.kind]

    @property
    def one_sided(self) -> bool:
        """True when friction, a point or a plane was given (one-sided contact)."""
        return (self.friction, self.point, self.plane) != (None, None, None)

    def _key(self):
        return (self.frame, self.kind, self.name, self.friction, self.point, self.plane, self.normal)

    def __eq__(self, other):
        return isinstance(other, Contact) and self._key() == other._key()

    def __hash__(self):
        return hash(("Contact",) + self._key())

    def __reduce__(self):
        return _contact, self._key()

    def resolve(self, model):
        """``(body index, frame_X_body)`` of the contact frame in ``model``."""
        fr = body_frame(model, f"contact {self.name!r}", self.frame)
        return fr.body, fr.X

    def __repr__(self):
        extra = "" if self.kind == "6d" else f", kind={self.kind!r}"
        if self.name != str(self.frame):
            extra += f", name={self.name!r}"
        for k in ("friction", "point", "plane", "normal"):
            if getattr(self, k) is not None:
                extra += f", {k}={getattr(self, k)!r}"
        return f"Contact({self.frame!r}{extra})"


def _contact(frame, kind, name, friction, point, plane, normal=None):
    return Contact(frame, kind, name=name, friction=friction, point=point, plane=plane, normal=normal)


#: Smallest squared length of a plane normal.  A normal is divided by its length, whose square must
#: not underflow to zero (the smallest normal double is 2.2e-308, kept with a margin).
MIN_NORMAL2 = 1e-300
#: Largest squared length of a plane normal (its square must not overflow to inf).
MAX_NORMAL2 = 1e300
#: Largest coordinate of a contact point in its frame, and largest plane offset, in metres.  A thousand
#: kilometres is far beyond any robot, and larger values overflow the contact problem's products.
MAX_CONTACT_LENGTH = 1e6


def _length_tuple(who, x, n):
    """:func:`_finite_tuple` of lengths in metres, each at most :data:`MAX_CONTACT_LENGTH` in magnitude."""
    t = _finite_tuple(who, x, n)
    if max(abs(c) for c in t) > MAX_CONTACT_LENGTH:
        raise ValueError(f"{who}: expected lengths in metres of at most {MAX_CONTACT_LENGTH:g} in magnitude, "
                         f"got {t if n > 1 else t[0]}")
    return t


def _finite_tuple(who, x, n):
    try:
        a = np.asarray(x, float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: expected {n} finite numbers, got {x!r}") from None
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{who}: expected {n} finite numbers, got {x!r}")
    return tuple(float(t) for t in a)
