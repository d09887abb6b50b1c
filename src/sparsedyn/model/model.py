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
(rotor)        ``armature``                 (nv,) inertia added to each dof's diagonal
=============  ===========================  ==========================================

``armature`` (nv,) is the reflected rotor inertia of each dof (motor inertia
times the gear ratio squared; MuJoCo's and Pinocchio's ``armature``): the
equation of motion is ``(H(q) + diag(armature)) qdd + C = tau``, and every
algorithm (RNEA, CRBA, ABA, the inverse of ``H``, the sparse system) includes
it.  It is zero by default; a dof whose armature is exactly zero adds no term
to any traced program.  :meth:`Model.with_armature` returns a copy with other
values.

``joint_dynamics`` (:class:`JointDynamics`) keeps per-dof viscous damping,
spring stiffness and dry friction and the configurations they refer to, as
data: no dynamics algorithm applies them; :func:`sparsedyn.passive_forces` gives
the springs' and dampers' forces, which the simulator's step adds where asked
(``passive=True``).

Bodies are numbered depth-first, so every subtree is a contiguous index range.
Body ``i`` owns ``q[q_start[i] : q_start[i] + joints[i].nq]`` and
``v[v_start[i] : v_start[i] + joints[i].nv]``.  A body's frame is its joint's
successor frame (as in Pinocchio).  Named frames (``frames``) are fixed
placements on a body, or on the world (``body = -1``: a frame that never moves,
such as an MJCF site fixed to the world); every body also has a frame of its own
name.

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

``geometries`` holds the visual and collision shapes (:class:`Geometry`), each on a
body (or the world) at a fixed placement, merged through fixed joints like the
inertias.  Parsers read them only when asked (``geometry=True``); no algorithm of
the dynamics looks at them.  :meth:`Model.geometry` lists one kind, and
:func:`sparsedyn.geometry_placements` gives their world poses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .. import kernels as _kernels
from .records import (GEOMETRY_KINDS, GEOMETRY_SHAPES, MAX_LENGTH, MAX_MASS, FixedJoint, Frame, Geometry,
                      JointDynamics, Mimic, ModelError, UnknownNameError, _short, checked_heights, collision_filter,
                      unknown_name)
from .spatial import Transform, identity
from .topology import Topology

__all__ = ["Model", "Frame", "FixedJoint", "Mimic", "JointDynamics", "ModelError", "UnknownNameError", "unknown_name",
           "Geometry", "GEOMETRY_KINDS", "GEOMETRY_SHAPES"]


def _frozen(a, dtype=float):
    a = np.array(a, dtype=dtype)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Model:
    """Immutable kinematic tree.  Build it with :class:`~sparsedyn.model.builders.ModelBuilder` or a parser.

    ``topology``: the tables derived from the model (index tables, ancestor sets, its constants
    stacked for array passes), a :class:`~sparsedyn.model.topology.Topology` made when the model is
    built, each table computed on its first use.
    """

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
    armature: np.ndarray | None = None
    joint_dynamics: JointDynamics | None = None
    geometries: tuple = ()
    #: spatial inertia (6, 6) in world coordinates of the links welded to the world (a fixed-base
    #: file's root link and the links fixed to it): no part in the dynamics; :func:`~sparsedyn.append_model`
    #: carries it onto the body it attaches the model to (Pinocchio's universe inertia).  Default zero.
    world_inertia: np.ndarray | None = None
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
    # ``topology`` (:class:`~sparsedyn.model.topology.Topology`), set in __post_init__: the tables
    # derived from this model.  Not a field: derived from the fields, it is no part of the model's
    # identity (its fingerprint, a copy with ``dataclasses.replace``).

    def __post_init__(self):
        NB = len(self.parent)
        s = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        s("parent", _frozen(self.parent, int))
        s("inertia", _frozen(self.inertia))
        s("world_inertia", _frozen(np.zeros((6, 6)) if self.world_inertia is None else self.world_inertia))
        if self.world_inertia.shape != (6, 6) or not np.all(np.isfinite(self.world_inertia)):
            raise ModelError(f"model {self.name!r}: world_inertia must be a finite (6, 6) spatial inertia, got "
                             f"shape {self.world_inertia.shape}")
        s("gravity", _frozen(self.gravity))
        for name, n in (("body_names", NB), ("joint_names", NB), ("joints", NB), ("Xtree", NB)):
            if len(getattr(self, name)) != NB:
                raise ModelError(f"model {self.name!r}: {name} has {len(getattr(self, name))} entries, expected {NB}")
        if self.inertia.shape != (NB, 6, 6):
            raise ModelError(f"model {self.name!r}: inertia has shape {self.inertia.shape}, expected ({NB}, 6, 6)")
        self._check_magnitudes(NB)
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
        s("armature", self._checked_armature())
        s("joint_dynamics", self._checked_joint_dynamics())
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
        self._check_frames()
        s("fixed_joints", self._checked_fixed_joints())
        self._check_sensors()
        s("geometries", self._checked_geometries())
        s("topology", Topology(self))

    def _check_frames(self):
        for f in self.frames:
            if not -1 <= f.body < self.nbodies:
                raise ModelError(f"model {self.name!r}: frame {f.name!r}: body index {f.body} out of range "
                                 f"-1..{self.nbodies - 1} (-1: fixed to the world)")

    def _checked_armature(self):
        if self.armature is None:
            return _frozen(np.zeros(self.nv))
        try:
            arm = np.array(self.armature, dtype=float)
        except (TypeError, ValueError):
            raise ModelError(f"model {self.name!r}: armature must be {self.nv} numbers (one per dof)") from None
        if arm.shape != (self.nv,):
            raise ModelError(f"model {self.name!r}: armature must be {self.nv} finite non-negative numbers "
                             f"(one per dof), got shape {arm.shape}")
        bad = np.flatnonzero(~(np.isfinite(arm) & (arm >= 0)))
        if len(bad):
            listed = ", ".join(f"dof {k} ({self.joint_names[self.dof_body[k]]!r}): {arm[k]:g}" for k in bad[:5])
            raise ModelError(f"model {self.name!r}: armature must be {self.nv} finite non-negative numbers (one per "
                             f"dof); got {listed}" + (f" and {len(bad) - 5} more" if len(bad) > 5 else ""))
        return _frozen(arm)

    def _checked_joint_dynamics(self):
        jd = self.joint_dynamics
        zeros = np.zeros(self.nv)
        neutral = self.neutral()
        if jd is None:
            return JointDynamics(*(_frozen(x) for x in (zeros, zeros, zeros, neutral, neutral)))
        out = []
        for name, x, n in zip(JointDynamics._fields, JointDynamics(*jd),
                              (self.nv, self.nv, self.nv, self.nq, self.nq)):
            default = neutral if name in ("spring_reference", "reference") else zeros
            a = np.array(default if x is None else x, float)
            if a.shape != (n,) or not np.all(np.isfinite(a)):
                raise ModelError(f"model {self.name!r}: joint_dynamics.{name} must be {n} finite numbers, "
                                 f"got shape {a.shape}")
            out.append(_frozen(a))
        return JointDynamics(*out)

    def with_armature(self, armature) -> "Model":
        """A copy of this model with ``armature`` (nv,) (a scalar is broadcast to every dof)."""
        arm = np.broadcast_to(np.asarray(armature, dtype=float), (self.nv,)) if np.ndim(armature) == 0 \
            else armature
        return dataclasses.replace(self, armature=arm)

    def _check_magnitudes(self, NB):
        """Finite parameters within :data:`MAX_LENGTH` and :data:`MAX_MASS` (else the dynamics overflows
        to inf or NaN without a word)."""
        who = f"model {self.name!r}"
        g = self.gravity
        if g.shape != (3,) or not np.all(np.isfinite(g)) or np.abs(g).max() > MAX_LENGTH:
            raise ModelError(f"{who}: gravity must be 3 finite numbers of magnitude <= {MAX_LENGTH:g} m/s^2, "
                             f"got {np.array2string(g, threshold=6)}")
        limit = 1e3 * MAX_MASS * MAX_LENGTH ** 2     # room for m c^2 and for merged links
        big = ~np.isfinite(self.inertia) | (np.abs(self.inertia) > limit)
        bad = np.flatnonzero(big.reshape(NB, -1).any(-1) | (self.inertia[:, 5, 5] > MAX_MASS)) if NB else []
        if len(bad):
            i = int(bad[0])
            raise ModelError(f"{who}: body {_short(self.body_names[i])}: its spatial inertia must be finite with "
                             f"mass <= {MAX_MASS:g} kg and entries <= {limit:g} (1e3 MAX_MASS MAX_LENGTH^2); "
                             f"got mass {self.inertia[i, 5, 5]:.6g}, largest entry {np.abs(self.inertia[i]).max():.6g}")
        if NB == 0:
            return
        E = np.array([X.E for X in self.Xtree], float).reshape(NB, 9)
        r = np.array([X.r for X in self.Xtree], float).reshape(NB, 3)
        ok = np.isfinite(E).all(1) & np.isfinite(r).all(1) & (np.abs(r).max(1) <= MAX_LENGTH)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise ModelError(f"{who}: body {_short(self.body_names[i])}: its joint placement Xtree must be "
                             f"finite with a translation of at most {MAX_LENGTH:g} m, got translation "
                             f"{np.array2string(r[i], threshold=6)}")

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

    def _checked_geometries(self) -> tuple:
        out = []
        for g in self.geometries:
            g = Geometry(*g)
            who = f"model {self.name!r}: geometry {g.name!r}"
            if g.kind not in GEOMETRY_KINDS:
                raise ModelError(f"{who}: kind must be one of {GEOMETRY_KINDS}, got {g.kind!r}")
            if g.shape not in GEOMETRY_SHAPES:
                raise ModelError(f"{who}: shape must be one of {tuple(GEOMETRY_SHAPES)}, got {g.shape!r}")
            if not -1 <= int(g.body) < self.nbodies:
                raise ModelError(f"{who}: body index {g.body} out of range -1..{self.nbodies - 1} (-1: the world)")
            size = np.asarray(g.size, float)
            if size.shape != (GEOMETRY_SHAPES[g.shape],) or not np.all(np.isfinite(size)) or \
                    (g.shape != "mesh" and np.any(size < 0)):
                raise ModelError(f"{who}: a {g.shape} takes {GEOMETRY_SHAPES[g.shape]} finite "
                                 f"{'' if g.shape == 'mesh' else 'non-negative '}sizes, "
                                 f"got {np.array2string(size, threshold=6)}")
            if g.shape == "mesh" and g.mesh is None and (g.vertices is None or g.faces is None):
                raise ModelError(f"{who}: a mesh needs a file (mesh=) or triangles (vertices=, faces=)")
            if g.shape == "hfield" and np.any(size <= 0):
                raise ModelError(f"{who}: a hfield's sizes (sx, sy, top, base) must be positive, got "
                                 f"{np.array2string(size)}")
            heights = checked_heights(who, g)
            rgba = None if g.rgba is None else tuple(float(c) for c in g.rgba)
            if rgba is not None and (len(rgba) != 4 or not all(0.0 <= c <= 1.0 for c in rgba)):
                raise ModelError(f"{who}: rgba must be 4 numbers in [0, 1], got {g.rgba}")
            verts = None if g.vertices is None else _frozen(g.vertices)
            faces = None if g.faces is None else _frozen(g.faces, int)
            friction = None if g.friction is None else float(g.friction)
            if friction is not None and not (np.isfinite(friction) and friction >= 0):
                raise ModelError(f"{who}: friction must be a finite number >= 0, got {g.friction!r}")
            if isinstance(g.priority, bool) or not isinstance(g.priority, (int, np.integer)):
                raise ModelError(f"{who}: priority must be an integer, got {g.priority!r}")
            if isinstance(g.condim, bool) or g.condim not in (1, 3, 4, 6):
                raise ModelError(f"{who}: condim must be 1, 3, 4 or 6 (MuJoCo's), got {g.condim!r}")
            out.append(Geometry(str(g.name), int(g.body), Transform(_frozen(g.X.E), _frozen(g.X.r)), g.shape,
                                tuple(float(x) for x in size), g.kind, g.mesh, rgba, str(g.link), verts, faces,
                                friction, *collision_filter(who, g), int(g.priority), heights, int(g.condim)))
        names = {g.name for g in out}
        for g in out:
            for other, _ in g.pairs:
                if other not in names:
                    raise ModelError(f"model {self.name!r}: geometry {g.name!r}: its pair names no geometry "
                                     f"{other!r}")
        return tuple(out)

    def geometry(self, kind="visual") -> tuple:
        """The :class:`Geometry` entries of ``kind`` (``"visual"`` or ``"collision"``), in file order."""
        if kind not in GEOMETRY_KINDS:
            raise ValueError(f"kind: expected one of {GEOMETRY_KINDS}, got {kind!r}")
        return tuple(g for g in self.geometries if g.kind == kind)

    def with_geometry(self, *geometries) -> "Model":
        """A copy of this model carrying ``geometries`` (:class:`Geometry`) after its own."""
        return dataclasses.replace(self, geometries=self.geometries + tuple(geometries))

    def with_sensors(self, *sensors) -> "Model":
        """A copy of this model carrying ``sensors`` (:mod:`sparsedyn.model.sensors`) after its own.

        Sensors are model entries (as in MuJoCo): an estimation problem built on the
        model without an explicit sensor list measures these, each at an address
        (offset, size) in one flat measurement vector, in this order.
        """
        return dataclasses.replace(self, sensors=self.sensors + tuple(sensors))

    def inertial_parameters(self) -> np.ndarray:
        """The inertial parameters (10 NB,): for each body, in body order,
        ``[m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` with ``c`` the centre of mass and ``I``
        the rotational inertia about the body origin, body axes (the order of Pinocchio's
        ``dynamicParameters``).  ``joint_torque_regressor(model, q, v, a) @ model.inertial_parameters()``
        is ``rnea(model, q, v, a)``.
        """
        I = self.inertia
        return np.stack([I[:, 5, 5], I[:, 2, 4], I[:, 0, 5], I[:, 1, 3], I[:, 0, 0], I[:, 0, 1], I[:, 1, 1],
                         I[:, 0, 2], I[:, 1, 2], I[:, 2, 2]], -1).reshape(-1)

    def with_inertial_parameters(self, pi) -> "Model":
        """A copy of this model whose bodies have the inertial parameters ``pi`` (10 NB,), in the order
        of :meth:`inertial_parameters`.  Merged fixed joints keep their recorded child-side inertias."""
        pi = np.asarray(pi, dtype=float)
        if pi.shape != (10 * self.nbodies,) or not np.all(np.isfinite(pi)):
            raise ValueError(f"pi: expected {10 * self.nbodies} finite inertial parameters (10 per body of model "
                             f"{self.name!r}), got shape {pi.shape}")
        P = pi.reshape(self.nbodies, 10)
        m, h = P[:, 0], P[:, 1:4]
        Ixx, Ixy, Iyy, Ixz, Iyz, Izz = P[:, 4:].T
        I = np.zeros((self.nbodies, 6, 6))
        I[:, :3, :3] = np.stack([np.stack([Ixx, Ixy, Ixz], -1), np.stack([Ixy, Iyy, Iyz], -1),
                                 np.stack([Ixz, Iyz, Izz], -1)], -2)
        H = np.zeros((self.nbodies, 3, 3))     # skew(h)
        H[:, 0, 1], H[:, 0, 2], H[:, 1, 2] = -h[:, 2], h[:, 1], -h[:, 0]
        H = H - np.swapaxes(H, -1, -2)
        I[:, :3, 3:] = H
        I[:, 3:, :3] = np.swapaxes(H, -1, -2)
        I[:, 3:, 3:] = m[:, None, None] * np.eye(3)
        return dataclasses.replace(self, inertia=I)

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
        if name in self.joint_names:
            raise UnknownNameError(f"model {self.name!r} has no fixed joint {name!r} (it is a moving joint)")
        raise unknown_name("fixed joint", name, [fj.name for fj in self.fixed_joints], f"model {self.name!r}")

    def sensor(self, name):
        """The sensor called ``name``."""
        for x in self.sensors:
            if x.name == name:
                return x
        raise unknown_name("sensor", name, [x.name for x in self.sensors], f"model {self.name!r}")

    def _is_ancestor(self, a, k):
        while k >= 0:
            if k == a:
                return True
            k = self.parent[k]
        return False

    # --- lookups -------------------------------------------------------------
    def q_slice(self, i) -> slice:
        """The slice of ``q`` holding joint ``i``'s coordinates (body index ``i``)."""
        return slice(int(self.q_start[i]), int(self.q_start[i]) + self.joints[i].nq)

    def v_slice(self, i) -> slice:
        """The slice of ``v``, ``a`` and ``tau`` holding joint ``i``'s dofs (body index ``i``)."""
        return slice(int(self.v_start[i]), int(self.v_start[i]) + self.joints[i].nv)

    def body(self, name: str) -> int:
        """Index of the body called ``name``."""
        try:
            return self.body_names.index(name)
        except ValueError:
            raise unknown_name("body", name, self.body_names, f"model {self.name!r}") from None

    def joint(self, name: str) -> int:
        """Index of the body whose joint is called ``name``."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise unknown_name("joint", name, self.joint_names, f"model {self.name!r}") from None

    def joint_indices(self, joints, who: str) -> list:
        """Indices of the bodies whose joints are named in ``joints`` (a name or an iterable of names),
        in their order, each once; ``who`` names the caller in the errors (a number or another type given
        for a name, an unknown name: :meth:`joint`'s, with the closest names)."""
        if isinstance(joints, str):
            joints = [joints]
        elif not hasattr(joints, "__iter__"):
            raise TypeError(f"{who}: joints: expected a joint name or a sequence of joint names (e.g. "
                            f"[{self.joint_names[0] if self.joint_names else 'name'!r}]), got {type(joints).__name__}")
        out = []
        for name in joints:
            if isinstance(name, (int, np.integer)):
                raise TypeError(f"joints: give joint names (e.g. {self.joint_names[0]!r}), got the number {name}")
            if not isinstance(name, str):
                raise TypeError(f"{who}: joints: expected joint names (str), got {type(name).__name__} "
                                f"{str(name)[:60]!r}")
            i = self.joint(name)
            if i not in out:
                out.append(i)
        return out

    def frame(self, name_or_index) -> int:
        """Index into ``frames`` of a frame given by name (or an index, checked)."""
        if isinstance(name_or_index, (int, np.integer)):
            if not 0 <= name_or_index < len(self.frames):
                raise UnknownNameError(f"model {self.name!r} has {len(self.frames)} frames; index {name_or_index} is "
                                       f"out of range")
            return int(name_or_index)
        for k, f in enumerate(self.frames):
            if f.name == name_or_index:
                return k
        raise unknown_name("frame", name_or_index, self.frame_names, f"model {self.name!r}")

    @property
    def frame_names(self) -> tuple:
        """Names of all frames (bodies first, then the extra frames), in index order."""
        return tuple(f.name for f in self.frames)

    @property
    def total_mass(self) -> float:
        """Sum of the bodies' masses [kg]."""
        return float(self.mass.sum())

    def ancestors(self, i) -> list:
        """Bodies from ``i`` up to the root, ``i`` first."""
        return self.topology.ancestors(i)

    # --- configurations -----------------------------------------------------
    def neutral(self) -> np.ndarray:
        """The neutral configuration (zeros, identity quaternions)."""
        return np.concatenate([j.neutral() for j in self.joints]) if self.nbodies else np.zeros(0)

    def random_configuration(self, rng=None, limits=True) -> np.ndarray:
        """A random configuration; finite joint limits are honoured unless ``limits=False``
        (then 1-dof angles are uniform in [-pi, pi], displacements in [-1, 1]: a generic state
        for numeric questions such as a rank, which joint limits must not bias)."""
        rng = np.random.default_rng(rng)
        if not self.nbodies:
            return np.zeros(0)
        if not limits:
            return np.concatenate([j.random(rng) for j in self.joints])
        return np.concatenate([j.random(rng, self.lower[self.q_slice(i)], self.upper[self.q_slice(i)])
                               for i, j in enumerate(self.joints)])

    def __repr__(self):
        return f"Model({self.name!r}, bodies={self.nbodies}, nq={self.nq}, nv={self.nv})"


_kernels.set_model_type(Model)         # plain calls on a Model may go native (sparsedyn.kernels)
