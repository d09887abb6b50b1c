"""The frozen Model: topology and constant parameters as parallel arrays by body.

Glossary (Featherstone's names -> Model fields):

=============  ===========================  ==========================================
book           field                        meaning
=============  ===========================  ==========================================
``NB``         ``nbodies``                  number of moving bodies
``parent``     ``parent``                   ``parent[i] < i``; -1 for the world
``jtype``      ``joints``                   joint of body ``i`` (see ``joints``)
``Xtree``      ``Xtree``                    ``Xtree[i] = joint_X_parent`` at q = 0
``I``          ``inertia``                  (NB, 6, 6) spatial inertia, body frame
``lambda``     ``dof_parent``               parent of each dof in the expanded tree
``nu(i)``      ``subtree_end``              subtree of i = bodies ``i .. subtree_end[i]-1``
=============  ===========================  ==========================================

Bodies are numbered depth-first, so every subtree is a contiguous index range.
Body ``i`` owns ``q[q_start[i] : q_start[i] + joints[i].nq]`` and
``v[v_start[i] : v_start[i] + joints[i].nv]``.  A body's frame is its joint's
successor frame (as in Pinocchio).  Named frames (``frames``) are fixed
placements on a body; every body also has a frame of its own name.

Fixed joints (URDF ``fixed``) are merged into the body they are rigidly attached
to (as in Pinocchio), so they do not number a body.  ``fixed_joints`` keeps what
is needed to know the wrench transmitted across each of them (an F/T sensor sits
on one in most real robots): :class:`FixedJoint` ``(name, body, X, inertia,
children, frames)`` with ``X = joint_X_body`` (the joint frame, which URDF also
uses as its child link's frame), ``inertia`` the spatial inertia (6, 6), in body
coordinates about the body origin, of the links on the joint's child side that
were merged into ``body``, ``children`` the moving bodies attached to those links
and ``frames`` the names of the frames on the child side (every other frame of
``body`` is on the parent side).  Fixed joints between the world and a link of a
fixed-base model have no body and are not recorded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .joints import Joint
from .spatial import Transform, identity, mcI

__all__ = ["Model", "Frame", "FixedJoint", "Mimic", "ModelBuilder", "ModelError"]


class ModelError(ValueError):
    """A model that cannot be built; the message names the body or joint."""


class Frame(NamedTuple):
    """A named frame fixed on ``body``: ``X = frame_X_body`` (Plücker, see ``spatial``)."""

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


class Mimic(NamedTuple):
    """``q[joint] = multiplier * q[mimicked] + offset`` (URDF ``<mimic>``).

    Kept as data: the joints are independent in the Model; a constraint solver
    may impose the coupling.  ``joint``/``mimicked`` are body indices.
    """

    joint: int
    mimicked: int
    multiplier: float
    offset: float


def _frozen(a, dtype=float):
    a = np.array(a, dtype=dtype)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Model:
    """Immutable kinematic tree.  Build it with :class:`ModelBuilder` or a parser."""

    name: str
    body_names: tuple
    joint_names: tuple
    parent: np.ndarray
    joints: tuple
    Xtree: tuple
    inertia: np.ndarray
    frames: tuple = ()
    gravity: np.ndarray = field(default_factory=lambda: _frozen([0.0, 0.0, -9.81]))
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    velocity_limit: np.ndarray | None = None
    effort_limit: np.ndarray | None = None
    mimic: tuple = ()
    root_name: str = "world"
    sensors: tuple = ()
    fixed_joints: tuple = ()
    # structure-derived, filled in __post_init__
    nbodies: int = field(init=False)
    nq: int = field(init=False)
    nv: int = field(init=False)
    q_start: np.ndarray = field(init=False)
    v_start: np.ndarray = field(init=False)
    subtree_end: np.ndarray = field(init=False)
    depth: np.ndarray = field(init=False)
    dof_parent: np.ndarray = field(init=False)
    dof_body: np.ndarray = field(init=False)
    mass: np.ndarray = field(init=False)

    def __post_init__(self):
        NB = len(self.parent)
        s = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        s("parent", _frozen(self.parent, int))
        s("inertia", _frozen(self.inertia))
        s("gravity", _frozen(self.gravity))
        for name, n in (("body_names", NB), ("joint_names", NB), ("joints", NB), ("Xtree", NB)):
            if len(getattr(self, name)) != NB:
                raise ModelError(f"model {self.name!r}: {name} has {len(getattr(self, name))} entries, expected {NB}")
        if self.inertia.shape != (NB, 6, 6):
            raise ModelError(f"model {self.name!r}: inertia has shape {self.inertia.shape}, expected ({NB}, 6, 6)")
        for i, p in enumerate(self.parent):
            if not -1 <= p < i:
                raise ModelError(f"model {self.name!r}: body {self.body_names[i]!r} has parent index {p}; "
                                 f"bodies must be numbered parents first (parent[i] < i)")
        s("nbodies", NB)
        nqs = np.array([j.nq for j in self.joints], dtype=int)
        nvs = np.array([j.nv for j in self.joints], dtype=int)
        s("q_start", _frozen(np.concatenate([[0], np.cumsum(nqs)[:-1]]) if NB else [], int))
        s("v_start", _frozen(np.concatenate([[0], np.cumsum(nvs)[:-1]]) if NB else [], int))
        s("nq", int(nqs.sum()))
        s("nv", int(nvs.sum()))
        end = np.arange(1, NB + 1)
        for i in range(NB - 1, -1, -1):
            if self.parent[i] >= 0:
                end[self.parent[i]] = max(end[self.parent[i]], end[i])
        depth = np.zeros(NB, int)
        for i in range(NB):
            depth[i] = 0 if self.parent[i] < 0 else depth[self.parent[i]] + 1
            # Depth-first (pre-)order <=> each parent lies on the path from body i-1 to the root,
            # which makes every subtree a contiguous index range.
            if i > 0 and self.parent[i] >= 0 and not self._is_ancestor(self.parent[i], i - 1):
                raise ModelError(f"model {self.name!r}: bodies are not in depth-first order at "
                                 f"{self.body_names[i]!r}")
        s("subtree_end", _frozen(end, int))
        s("depth", _frozen(depth, int))
        dof_parent = np.full(self.nv, -1, int)
        dof_body = np.zeros(self.nv, int)
        for i in range(NB):
            v0 = self.v_start[i]
            dof_body[v0:v0 + nvs[i]] = i
            p = self.parent[i]
            while p >= 0 and nvs[p] == 0:
                p = self.parent[p]
            dof_parent[v0] = -1 if p < 0 else self.v_start[p] + nvs[p] - 1
            for k in range(1, nvs[i]):
                dof_parent[v0 + k] = v0 + k - 1
        s("dof_parent", _frozen(dof_parent, int))
        s("dof_body", _frozen(dof_body, int))
        s("mass", _frozen(self.inertia[:, 5, 5] if NB else []))
        lim = lambda a, n, fill: _frozen(np.full(n, fill) if a is None else a)  # noqa: E731
        s("lower", lim(self.lower, self.nq, -np.inf))
        s("upper", lim(self.upper, self.nq, np.inf))
        s("velocity_limit", lim(self.velocity_limit, self.nv, np.inf))
        s("effort_limit", lim(self.effort_limit, self.nv, np.inf))
        frames = tuple(self.frames)
        have = {f.name for f in frames}
        extra = tuple(Frame(n, i, identity()) for i, n in enumerate(self.body_names) if n not in have)
        s("frames", frames + extra)
        s("Xtree", tuple(Transform(_frozen(X.E), _frozen(X.r)) for X in self.Xtree))
        s("joints", tuple(self.joints))
        s("body_names", tuple(self.body_names))
        s("joint_names", tuple(self.joint_names))
        s("mimic", tuple(self.mimic))
        s("sensors", tuple(self.sensors))
        s("frames", tuple(Frame(f.name, int(f.body), Transform(_frozen(f.X.E), _frozen(f.X.r))) for f in self.frames))
        s("fixed_joints", self._checked_fixed_joints())
        self._check_sensors()

    def _checked_fixed_joints(self) -> tuple:
        out, names = [], set(self.joint_names)
        frame_body = {}
        for f in self.frames:
            frame_body.setdefault(f.name, f.body)
        for fj in self.fixed_joints:
            fj = FixedJoint(*fj)
            who = f"model {self.name!r}: fixed joint {fj.name!r}"
            if not isinstance(fj.name, str) or not fj.name or fj.name in names:
                raise ModelError(f"{who}: its name must be a non-empty string used by no other joint")
            names.add(fj.name)
            b = int(fj.body)
            if not 0 <= b < self.nbodies:
                raise ModelError(f"{who}: body index {fj.body} out of range 0..{self.nbodies - 1}")
            inertia = _frozen(fj.inertia)
            if inertia.shape != (6, 6) or not np.all(np.isfinite(inertia)):
                raise ModelError(f"{who}: inertia must be a finite (6, 6) array, got shape {inertia.shape}")
            children = tuple(int(c) for c in fj.children)
            for c in children:
                if not 0 <= c < self.nbodies or self.parent[c] != b:
                    raise ModelError(f"{who}: child body index {c} is not a child of body "
                                     f"{self.body_names[b]!r}")
            frames = tuple(str(n) for n in fj.frames)
            for n in frames:
                if frame_body.get(n) != b:
                    raise ModelError(f"{who}: frame {n!r} is not a frame of body {self.body_names[b]!r}")
            out.append(FixedJoint(fj.name, b, Transform(_frozen(fj.X.E), _frozen(fj.X.r)), inertia, children,
                                  frames))
        return tuple(out)

    def _check_sensors(self):
        """Sensor names are unique and every frame or joint a sensor names exists."""
        names = [getattr(x, "name", None) for x in self.sensors]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ModelError(f"model {self.name!r}: sensor names used twice: {dup}")
        for x in self.sensors:
            for attr, lookup in (("frame", self.frame), ("joint", self._any_joint)):
                ref = getattr(x, attr, None)
                if ref is not None:
                    try:
                        lookup(ref)
                    except KeyError as e:
                        raise ModelError(f"model {self.name!r}: sensor {x.name!r}: {e.args[0]}") from None
            for j in getattr(x, "joints", None) or ():
                try:
                    self.joint(j)
                except KeyError as e:
                    raise ModelError(f"model {self.name!r}: sensor {x.name!r}: {e.args[0]}") from None

    def with_sensors(self, *sensors) -> "Model":
        """A copy of this model carrying ``sensors`` (:mod:`sparsedyn.sensors`) after its own.

        Sensors are model entries (DESIGN.md): an estimation problem built on the
        model without an explicit sensor list measures these, each at an address
        (offset, size) in one flat measurement vector, in this order.
        """
        return dataclasses.replace(self, sensors=self.sensors + tuple(sensors))

    def _any_joint(self, name):
        """A moving joint's body index, or the :class:`FixedJoint` called ``name``."""
        try:
            return self.joint(name)
        except KeyError:
            for fj in self.fixed_joints:
                if fj.name == name:
                    return fj
            raise

    def fixed_joint(self, name) -> FixedJoint:
        """The merged fixed joint called ``name`` (see the module docstring)."""
        for fj in self.fixed_joints:
            if fj.name == name:
                return fj
        raise KeyError(f"model {self.name!r} has no fixed joint {name!r}"
                       + (" (it is a moving joint)" if name in self.joint_names else ""))

    def sensor(self, name):
        """The sensor called ``name``."""
        for x in self.sensors:
            if x.name == name:
                return x
        raise KeyError(f"model {self.name!r} has no sensor {name!r}")

    def _is_ancestor(self, a, k):
        while k >= 0:
            if k == a:
                return True
            k = self.parent[k]
        return False

    # --- lookups -------------------------------------------------------------
    def q_slice(self, i) -> slice:
        return slice(int(self.q_start[i]), int(self.q_start[i]) + self.joints[i].nq)

    def v_slice(self, i) -> slice:
        return slice(int(self.v_start[i]), int(self.v_start[i]) + self.joints[i].nv)

    def body(self, name: str) -> int:
        """Index of the body called ``name``."""
        try:
            return self.body_names.index(name)
        except ValueError:
            raise KeyError(f"model {self.name!r} has no body {name!r}") from None

    def joint(self, name: str) -> int:
        """Index of the body whose joint is called ``name``."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"model {self.name!r} has no joint {name!r}") from None

    def frame(self, name_or_index) -> int:
        """Index into ``frames`` of a frame given by name (or an index, checked)."""
        if isinstance(name_or_index, (int, np.integer)):
            if not 0 <= name_or_index < len(self.frames):
                raise KeyError(f"model {self.name!r} has {len(self.frames)} frames; index {name_or_index} is out of range")
            return int(name_or_index)
        for k, f in enumerate(self.frames):
            if f.name == name_or_index:
                return k
        raise KeyError(f"model {self.name!r} has no frame {name_or_index!r}")

    @property
    def frame_names(self) -> tuple:
        return tuple(f.name for f in self.frames)

    @property
    def total_mass(self) -> float:
        return float(self.mass.sum())

    def ancestors(self, i) -> list:
        """Bodies from ``i`` up to the root, ``i`` first."""
        out = []
        while i >= 0:
            out.append(int(i))
            i = self.parent[i]
        return out

    # --- configurations -----------------------------------------------------
    def neutral(self) -> np.ndarray:
        """The neutral configuration (zeros, identity quaternions)."""
        return np.concatenate([j.neutral() for j in self.joints]) if self.nbodies else np.zeros(0)

    def random_configuration(self, rng=None) -> np.ndarray:
        """A random configuration; finite joint limits are honoured."""
        rng = np.random.default_rng(rng)
        return np.concatenate([j.random(rng, self.lower[self.q_slice(i)], self.upper[self.q_slice(i)])
                               for i, j in enumerate(self.joints)]) if self.nbodies else np.zeros(0)

    def integrate(self, q, v):
        """``q (+) v``: :func:`sparsedyn.integrate` of this model."""
        from .algorithms.configuration import integrate   # the algorithm layer, imported on use
        return integrate(self, q, v)

    def difference(self, q0, q1):
        """``q1 (-) q0``: :func:`sparsedyn.difference` of this model."""
        from .algorithms.configuration import difference
        return difference(self, q0, q1)

    def __repr__(self):
        return f"Model({self.name!r}, bodies={self.nbodies}, nq={self.nq}, nv={self.nv})"


class ModelBuilder:
    """Collects bodies in any order and builds a depth-first :class:`Model`.

    Children are visited in the order they were added.
    """

    def __init__(self, name="model", gravity=(0.0, 0.0, -9.81), root_name="world"):
        self.name = name
        self.gravity = gravity
        self.root_name = root_name
        self._bodies = {}     # name -> dict
        self._order = []
        self._frames = []     # (name, body name, X)
        self._mimic = []      # (joint name, mimicked joint name, multiplier, offset)
        self._fixed = []      # (name, body name, X, inertia, child body names, frame names)

    def add_body(self, name, parent, joint, Xtree=None, inertia=None, *, mass=None, com=None,
                 rot_inertia=None, joint_name=None, lower=None, upper=None, velocity_limit=None,
                 effort_limit=None):
        """Add body ``name`` attached to ``parent`` (a body name, or ``None`` for the world).

        ``Xtree``: transform joint_X_parent at q = 0 (default identity).  Give
        either ``inertia`` (6x6 about the body origin) or ``mass``, ``com``,
        ``rot_inertia`` (about the CoM, body frame).  Limits are per joint
        coordinate (nq) for positions and per dof (nv) for velocity/effort.
        """
        if name in self._bodies or name == self.root_name:
            raise ModelError(f"model {self.name!r}: body name {name!r} is used twice")
        if not isinstance(joint, Joint):
            raise ModelError(f"model {self.name!r}: body {name!r}: joint must be a Joint, got {type(joint).__name__}")
        if inertia is None:
            inertia = mcI(0.0 if mass is None else mass, np.zeros(3) if com is None else com,
                          np.zeros((3, 3)) if rot_inertia is None else rot_inertia)
        self._bodies[name] = dict(name=name, parent=parent, joint=joint, Xtree=Xtree or identity(),
                                  inertia=np.asarray(inertia, float), joint_name=joint_name or name,
                                  lower=lower, upper=upper, vel=velocity_limit, eff=effort_limit)
        self._order.append(name)
        return self

    def add_frame(self, name, body, X=None):
        """A named frame on ``body`` with placement ``X = frame_X_body``."""
        self._frames.append((name, body, X or identity()))
        return self

    def add_fixed_joint(self, name, body, X=None, inertia=None, children=(), frames=()):
        """Record the fixed joint ``name`` merged into ``body`` (see :class:`FixedJoint`).

        ``X = joint_X_body``; ``inertia`` (6, 6) of the child-side links in body
        coordinates (default zero); ``children``: names of the moving bodies on the
        child side; ``frames``: names of the frames on the child side.
        """
        self._fixed.append((name, body, X or identity(), np.zeros((6, 6)) if inertia is None else inertia,
                            tuple(children), tuple(frames)))
        return self

    def add_mimic(self, joint_name, mimicked_joint_name, multiplier=1.0, offset=0.0):
        self._mimic.append((joint_name, mimicked_joint_name, float(multiplier), float(offset)))
        return self

    def build(self) -> Model:
        children = {None: []}
        for n in self._order:
            children.setdefault(n, [])
        for n in self._order:
            p = self._bodies[n]["parent"]
            if p is not None and p not in self._bodies:
                raise ModelError(f"model {self.name!r}: body {n!r} has unknown parent {p!r}")
            children[p].append(n)
        order = []
        stack = list(reversed(children[None]))
        while stack:
            n = stack.pop()
            order.append(n)
            stack.extend(reversed(children[n]))
        if len(order) != len(self._order):
            cyc = sorted(set(self._order) - set(order))
            raise ModelError(f"model {self.name!r}: bodies {cyc} are not connected to the world (cycle)")
        index = {n: i for i, n in enumerate(order)}
        B = [self._bodies[n] for n in order]

        def lim(key, size_attr, fill):
            parts = []
            for b in B:
                n = getattr(b["joint"], size_attr)
                val = b[key]
                parts.append(np.full(n, fill) if val is None else np.broadcast_to(np.asarray(val, float), (n,)))
            return np.concatenate(parts) if parts else np.zeros(0)

        joint_index = {b["joint_name"]: i for i, b in enumerate(B)}
        mimic = []
        for jn, mn, mul, off in self._mimic:
            if jn not in joint_index or mn not in joint_index:
                raise ModelError(f"model {self.name!r}: mimic refers to unknown joint {jn if jn not in joint_index else mn!r}")
            mimic.append(Mimic(joint_index[jn], joint_index[mn], mul, off))
        frames = []
        for fname, bname, X in self._frames:
            if bname not in index:
                raise ModelError(f"model {self.name!r}: frame {fname!r} is on unknown body {bname!r}")
            frames.append(Frame(fname, index[bname], X))
        fixed = []
        for fname, bname, X, inertia, kids, fnames in self._fixed:
            for n in (bname,) + kids:
                if n not in index:
                    raise ModelError(f"model {self.name!r}: fixed joint {fname!r} refers to unknown body {n!r}")
            fixed.append(FixedJoint(fname, index[bname], X, inertia, tuple(index[k] for k in kids), fnames))
        return Model(
            name=self.name, body_names=tuple(order), joint_names=tuple(b["joint_name"] for b in B),
            parent=np.array([-1 if b["parent"] is None else index[b["parent"]] for b in B], int),
            joints=tuple(b["joint"] for b in B), Xtree=tuple(b["Xtree"] for b in B),
            inertia=np.array([b["inertia"] for b in B]).reshape(len(B), 6, 6), frames=tuple(frames),
            gravity=np.asarray(self.gravity, float),
            lower=lim("lower", "nq", -np.inf), upper=lim("upper", "nq", np.inf),
            velocity_limit=lim("vel", "nv", np.inf), effort_limit=lim("eff", "nv", np.inf),
            mimic=tuple(mimic), root_name=self.root_name, fixed_joints=tuple(fixed))
