"""Building models: :class:`ModelBuilder` (bodies in any order, a depth-first :class:`~sparsedyn.model.Model`),
:func:`as_transform` (a placement from a Transform, a pose pair or a 4 x 4 matrix), and ready-made
models: serial chains, seeded random trees and a humanoid.

* :func:`serial_chain` -- ``n`` identical links in a row;
* :func:`random_tree` -- seeded random trees in the spirit of Featherstone's
  ``autoTree(NB, bf, skew, taper)``, with every registered joint type available;
* :func:`auto_tree` -- Featherstone's ``autoTree`` itself: revolute joints about
  their local z axes, deterministic (the model of the published flop counts);
* :func:`humanoid` -- a 35-dof floating-base humanoid of anthropometric masses;
* :data:`BUILTIN_MODELS` / :func:`builtin` -- the built-in models by name.

Every model is built with :class:`ModelBuilder`, so bodies are
in depth-first order.  Lengths in m, masses in kg, angles in rad, efforts in
N m (N for prismatic dofs), velocities in rad/s.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from .joints import JOINT_TYPES, Joint, make_joint, quat_exp
from .model import MAX_LENGTH, MAX_MASS, FixedJoint, Frame, Mimic, Model, ModelError, _short
from .spatial import Transform, from_pose, identity, mcI, quat_to_rot, rotx, transform_inertia, xlt

__all__ = ["ModelBuilder", "as_transform", "serial_chain", "random_tree", "auto_tree", "humanoid", "humanoid_standing_configuration",
           "HUMANOID_STANDING_HEIGHT", "BUILTIN_MODELS", "builtin"]


def as_transform(X, what="transform") -> Transform:
    """A placement as a :class:`~sparsedyn.model.spatial.Transform` ``B_X_A`` (B: the new frame, A: the
    frame it is placed in), from any of:

    * a :class:`~sparsedyn.model.spatial.Transform` ``(E, r)`` (used as is);
    * a pose pair ``(R, p)``: ``R`` (3, 3) the rotation of B's axes in A (B to A coordinates),
      ``p`` (3,) B's origin in A [m];
    * a 4 x 4 homogeneous matrix ``[[R, p], [0, 0, 0, 1]]`` of the same pose;
    * ``None``: the identity.

    ``what`` names the argument in errors (:class:`ModelError`).
    """
    if X is None:
        return identity()
    if isinstance(X, Transform):
        R, p = np.swapaxes(np.asarray(X.E), -1, -2), X.r
    elif isinstance(X, (tuple, list)) and len(X) == 2:
        R, p = X
    else:
        try:
            T = np.asarray(X, float)
        except (TypeError, ValueError):
            T = None
        if T is None or T.shape != (4, 4):
            raise ModelError(f"{what}: expected a Transform, a pose pair (R (3, 3), p (3,)) or a 4 x 4 homogeneous "
                             f"matrix, got {type(X).__name__}" + (f" of shape {T.shape}" if T is not None else ""))
        if not np.allclose(T[3], [0, 0, 0, 1], rtol=0, atol=1e-12):
            raise ModelError(f"{what}: a homogeneous matrix's last row must be [0, 0, 0, 1], got {T[3].tolist()}")
        R, p = T[:3, :3], T[:3, 3]
    if isinstance(X, Transform) and (np.asarray(X.E).dtype == object or np.asarray(X.r).dtype == object):
        return X                                  # symbolic entries: nothing numeric to check
    try:
        R, p = np.asarray(R, float), np.asarray(p, float)
    except (TypeError, ValueError):
        raise ModelError(f"{what}: rotation and position must be numbers") from None
    if R.shape != (3, 3) or p.shape != (3,):
        raise ModelError(f"{what}: expected a rotation of shape (3, 3) and a position of shape (3,), got "
                         f"{R.shape} and {p.shape}")
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
        raise ModelError(f"{what}: rotation and position must be finite")
    if np.abs(R.T @ R - np.eye(3)).max() > 1e-6 or np.linalg.det(R) < 0:
        raise ModelError(f"{what}: the 3 x 3 rotation is not a proper rotation (orthonormal, det +1): "
                         f"|R^T R - I| = {np.abs(R.T @ R - np.eye(3)).max():.2g}, det = {np.linalg.det(R):.3g}")
    return X if isinstance(X, Transform) else Transform(R.T.copy(), p.copy())


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
        self._world_inertia = np.zeros((6, 6))

    def add_body(self, name, parent, joint, Xtree=None, inertia=None, *, mass=None, com=None,
                 rot_inertia=None, joint_name=None, lower=None, upper=None, velocity_limit=None,
                 effort_limit=None, armature=None):
        """Add body ``name`` attached to ``parent`` (a body name, or ``None`` for the world).

        ``Xtree``: placement joint_X_parent of the joint frame in the parent's frame at q = 0 (default
        identity): a :class:`~sparsedyn.model.spatial.Transform`, a pose pair ``(R, p)`` or a 4 x 4
        homogeneous matrix (see :func:`as_transform`).  ``joint``: a :class:`~sparsedyn.model.joints.Joint`
        (:func:`~sparsedyn.model.joints.make_joint`).  Give
        either ``inertia`` (6x6 about the body origin) or ``mass``, ``com``,
        ``rot_inertia`` (about the CoM, body frame).  Limits are per joint
        coordinate (nq) for positions and per dof (nv) for velocity/effort.
        ``armature``: rotor inertia of the joint's dofs (a scalar or ``nv`` numbers;
        default zero).
        """
        if name in self._bodies or name == self.root_name:
            raise ModelError(f"model {self.name!r}: body name {name!r} is used twice")
        if not isinstance(joint, Joint):
            raise ModelError(f"model {self.name!r}: body {name!r}: joint must be a Joint, got {type(joint).__name__}")
        if inertia is None:
            for what, x, bound in (("mass", mass, MAX_MASS), ("com", com, MAX_LENGTH),
                                   ("rot_inertia", rot_inertia, MAX_MASS * MAX_LENGTH ** 2)):
                try:
                    a = None if x is None else np.asarray(x, float)
                except (TypeError, ValueError):
                    raise ModelError(f"model {self.name!r}: body {_short(name)}: {what} must be numbers") from None
                if a is not None and not (np.all(np.isfinite(a)) and np.abs(a).max(initial=0) <= bound):
                    raise ModelError(f"model {self.name!r}: body {_short(name)}: {what} must be finite with "
                                     f"magnitude at most {bound:g} (MAX_MASS = {MAX_MASS:g} kg, MAX_LENGTH = "
                                     f"{MAX_LENGTH:g} m)")
            inertia = mcI(0.0 if mass is None else mass, np.zeros(3) if com is None else com,
                          np.zeros((3, 3)) if rot_inertia is None else rot_inertia)
        Xtree = as_transform(Xtree, f"model {self.name!r}: body {name!r}: Xtree")
        self._bodies[name] = dict(name=name, parent=parent, joint=joint, Xtree=Xtree,
                                  inertia=np.asarray(inertia, float), joint_name=joint_name or name,
                                  lower=lower, upper=upper, vel=velocity_limit, eff=effort_limit, arm=armature)
        self._order.append(name)
        return self

    def add_frame(self, name, body, X=None):
        """A named frame on ``body`` with placement ``X = frame_X_body`` (a Transform, a pose pair
        ``(R, p)`` of the frame in the body, or a 4 x 4 homogeneous matrix; see :func:`as_transform`);
        ``body=None``: a frame fixed to the world (``X = frame_X_world``)."""
        self._frames.append((name, body, as_transform(X, f"model {self.name!r}: frame {name!r}: X")))
        return self

    def add_world_inertia(self, inertia, X=None):
        """Add the spatial inertia (6, 6) of a link welded to the world, given in the link's frame
        placed by ``X = link_X_world`` (default the identity), to ``model.world_inertia``."""
        X = as_transform(X, f"model {self.name!r}: world inertia: X")
        self._world_inertia = self._world_inertia + transform_inertia(X, np.asarray(inertia, float))
        return self

    def add_fixed_joint(self, name, body, X=None, inertia=None, children=(), frames=()):
        """Record the fixed joint ``name`` merged into ``body`` (see :class:`~sparsedyn.model.FixedJoint`).

        ``X = joint_X_body``; ``inertia`` (6, 6) of the child-side links in body
        coordinates (default zero); ``children``: names of the moving bodies on the
        child side; ``frames``: names of the frames on the child side.
        """
        self._fixed.append((name, body, as_transform(X, f"model {self.name!r}: fixed joint {name!r}: X"),
                            np.zeros((6, 6)) if inertia is None else inertia,
                            tuple(children), tuple(frames)))
        return self

    def add_mimic(self, joint_name, mimicked_joint_name, multiplier=1.0, offset=0.0):
        """Record that ``joint_name`` follows ``multiplier * mimicked + offset`` (kept as data: the joints
        stay independent coordinates of the model)."""
        self._mimic.append((joint_name, mimicked_joint_name, float(multiplier), float(offset)))
        return self

    def build(self) -> Model:
        """The frozen :class:`Model`: bodies renumbered depth-first (parents before children,
        children in the order they were added), frames, fixed joints and mimic couplings resolved."""
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
                if val is None or np.ndim(val) == 0:            # the common case, without array calls
                    parts += [fill if val is None else float(val)] * n
                else:
                    parts += list(np.broadcast_to(np.asarray(val, float), (n,)))
            return np.array(parts, float)

        joint_index = {b["joint_name"]: i for i, b in enumerate(B)}
        mimic, leader = [], {}
        for jn, mn, mul, off in self._mimic:
            if jn not in joint_index or mn not in joint_index:
                raise ModelError(f"model {self.name!r}: mimic refers to unknown joint {jn if jn not in joint_index else mn!r}")
            if not (np.isfinite(mul) and np.isfinite(off)):
                raise ModelError(f"model {self.name!r}: mimic of joint {jn!r}: multiplier and offset must be finite")
            if jn == mn:
                raise ModelError(f"model {self.name!r}: joint {jn!r} mimics itself; a mimic names another joint")
            if jn in leader:
                raise ModelError(f"model {self.name!r}: joint {jn!r} mimics two joints, {leader[jn]!r} and {mn!r}")
            leader[jn] = mn
            mimic.append(Mimic(joint_index[jn], joint_index[mn], mul, off))
        for jn in leader:                           # q[a] = f(q[b]), q[b] = g(q[a]): no joint to follow
            seen, k = [jn], leader[jn]
            while k in leader and k not in seen:
                seen.append(k)
                k = leader[k]
            if k in seen:
                loop = seen[seen.index(k):] + [k]
                raise ModelError(f"model {self.name!r}: mimic joints follow each other in a cycle "
                                 f"({' -> '.join(map(repr, loop))}); one joint of the group must be independent")
        frames = []
        for fname, bname, X in self._frames:
            if bname is not None and bname not in index:
                raise ModelError(f"model {self.name!r}: frame {fname!r} is on unknown body {bname!r}")
            frames.append(Frame(fname, -1 if bname is None else index[bname], X))
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
            mimic=tuple(mimic), root_name=self.root_name, fixed_joints=tuple(fixed),
            armature=lim("arm", "nv", 0.0), world_inertia=self._world_inertia)


# --- rotational inertias about the centre of mass of simple solids -------------

def _box(m, dx, dy, dz):
    """Solid box with edges ``dx, dy, dz`` along the frame axes."""
    return m / 12.0 * np.diag([dy * dy + dz * dz, dx * dx + dz * dz, dx * dx + dy * dy])


def _cylinder(m, radius, length, axis):
    """Solid cylinder whose axis is the coordinate axis ``axis`` (0, 1 or 2)."""
    d = np.full(3, m * (3 * radius * radius + length * length) / 12.0)
    d[axis] = m * radius * radius / 2.0
    return np.diag(d)


def _sphere(m, radius):
    return np.eye(3) * (0.4 * m * radius * radius)


# --- serial chain -------------------------------------------------------------

def serial_chain(n, joint="revolute", axis=(0.0, 0.0, 1.0), length=0.3, mass=1.0, name="chain") -> Model:
    """``n`` identical slender links in a row (bodies ``link1..linkn``, joints ``joint1..jointn``).

    ``joint`` is a registered joint type name (made with ``axis``) or a
    :class:`~sparsedyn.model.joints.Joint` instance used for every link.  Each link is
    a solid cylinder of radius ``length / 20`` along its x axis with its centre
    of mass at ``[length / 2, 0, 0]``; the joint of link ``i + 1`` sits at the
    far end of link ``i`` (``Xtree`` translates by ``length`` along x).
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n: expected a positive number of links, got {n!r}")
    jnt = joint if isinstance(joint, Joint) else make_joint(joint, axis)
    Ic = _cylinder(mass, length / 20.0, length, axis=0)
    b = ModelBuilder(name)
    for i in range(1, int(n) + 1):
        b.add_body(f"link{i}", None if i == 1 else f"link{i - 1}", jnt,
                   Xtree=None if i == 1 else xlt(np.array([length, 0.0, 0.0])),
                   mass=mass, com=np.array([length / 2, 0.0, 0.0]), rot_inertia=Ic, joint_name=f"joint{i}")
    return b.build()


# --- random trees -------------------------------------------------------------

_AXIS_TYPES = ("revolute", "continuous", "prismatic", "helical", "cylindrical")


def _joint_type_list(joint_types):
    if isinstance(joint_types, str):
        joint_types = tuple(JOINT_TYPES) if joint_types == "all" else (joint_types,)
    types = tuple(joint_types)
    if not types:
        raise ValueError("joint_types: expected at least one joint type (or 'all')")
    for t in types:
        if t not in JOINT_TYPES:
            raise ValueError(f"joint_types: unknown joint type {t!r}; known types: {', '.join(sorted(JOINT_TYPES))}")
    return types


def _draw_types(rng, types, n):
    """``n`` joint types from ``types``; each one appears at least once when ``n >= len(types)``."""
    if n <= 0:
        return []
    guaranteed = list(types) if n >= len(types) else []
    drawn = [types[k] for k in rng.integers(len(types), size=n - len(guaranteed))]
    kinds = guaranteed + drawn
    return [kinds[k] for k in rng.permutation(n)]


def _random_rotation(rng, scale=math.pi):
    """Rotation matrix of a random rotation vector with components of size ~``scale``."""
    return quat_to_rot(quat_exp(rng.normal(scale=scale, size=3)))


def _random_axis(rng):
    """A coordinate axis half of the time, otherwise a random (non-aligned) unit vector."""
    if rng.random() < 0.5:
        return np.eye(3)[rng.integers(3)]
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def _random_axes(rng):
    """Two perpendicular axes (a universal joint's): the first as :func:`_random_axis`."""
    a = _random_axis(rng)
    b = np.cross(a, rng.normal(size=3))
    return a, b / np.linalg.norm(b)


def _random_joint(rng, kind, axis, pitch):
    """A joint of type ``kind``; a universal joint gets two random axes, a composite joint a prismatic
    and a universal part along and about random axes (drawn here, after the draws of the other types,
    so that those stay what they were)."""
    if kind == "universal":
        return make_joint(kind, axes=_random_axes(rng))
    if kind == "composite":
        return make_joint(kind, joints=(make_joint("prismatic", _random_axis(rng)),
                                        make_joint("universal", axes=_random_axes(rng))))
    return make_joint(kind, axis, pitch)


def random_tree(nbodies, *, branching=1.0, skew=0.0, taper=1.0, joint_types=("revolute",), seed=0,
                floating_base=False, nframes=0, name=None) -> Model:
    """A seeded random kinematic tree, after Featherstone's ``autoTree(NB, bf, skew, taper)``.

    Structure: numbering the generated bodies ``k = 1..NB`` with 0 for the world,
    ``parent(k) = floor((k - 2 + ceil(bf)) / bf)``, so ``branching = 1`` gives
    a chain and ``branching = 2`` a binary tree (``bf`` may be fractional).
    Body ``k`` is named ``body{k}``, its joint ``joint{k}``; the built model
    renumbers bodies depth-first (use the names to find them).

    Geometry: link ``k`` has length ``taper**(k-1)`` along its x axis and mass
    ``taper**(3(k-1))`` times a random factor in ``[0.5, 2]``; it is a solid box
    (random cross-section, slightly turned) with its centre of mass near the
    middle of the link.  A child's joint frame sits at the end of its parent's
    link, turned by ``skew`` about that link's x axis: ``Xtree = rotx(skew) xlt([len, 0, 0])``.

    Joints: types are drawn from ``joint_types`` (names from
    :data:`~sparsedyn.model.joints.JOINT_TYPES`, or ``"all"``); every listed type
    appears at least once when there are enough bodies.  Axes are random
    (coordinate axes and non-aligned ones), helical pitches random; a universal
    joint gets two perpendicular random axes, a composite joint a prismatic and a
    universal part.
    ``floating_base=True`` makes the first body's joint ``free``.

    ``nframes`` extra frames ``frame1..`` are placed at random on random bodies.
    The random draws do not depend on ``skew`` or ``taper``, so models that
    differ only in those share their random factors.
    """
    if int(nbodies) != nbodies or nbodies < 1:
        raise ValueError(f"nbodies: expected a positive number of bodies, got {nbodies!r}")
    if not branching >= 1.0:
        raise ValueError(f"branching: expected a branching factor >= 1, got {branching!r}")
    nbodies = int(nbodies)
    types = _joint_type_list(joint_types)
    rng = np.random.default_rng(seed)
    kinds = (["free"] if floating_base else []) + _draw_types(rng, types, nbodies - bool(floating_base))
    b = ModelBuilder(name or f"random_tree{nbodies}")
    for k in range(1, nbodies + 1):
        pk = math.floor((k - 2 + math.ceil(branching)) / branching)
        L = taper ** (k - 1)
        kind = kinds[k - 1]
        axis = _random_axis(rng) if kind in _AXIS_TYPES else (0.0, 0.0, 1.0)
        pitch = L * rng.uniform(-0.5, 0.5) if kind == "helical" else 0.0
        mass = taper ** (3 * (k - 1)) * rng.uniform(0.5, 2.0)
        com = L * (np.array([0.5, 0.0, 0.0]) + rng.uniform(-0.1, 0.1, 3))
        dy, dz = L * rng.uniform(0.05, 0.25, 2)
        Rc = _random_rotation(rng, 0.3)
        Ic = Rc @ _box(mass, L, dy, dz) @ Rc.T
        Xtree = None if pk == 0 else Transform(rotx(skew), np.array([taper ** (pk - 1), 0.0, 0.0]))
        b.add_body(f"body{k}", None if pk == 0 else f"body{pk}", _random_joint(rng, kind, axis, pitch), Xtree,
                   mass=mass, com=com, rot_inertia=Ic, joint_name=f"joint{k}")
    for f in range(1, int(nframes) + 1):
        k = int(rng.integers(1, nbodies + 1))
        L = taper ** (k - 1)
        b.add_frame(f"frame{f}", f"body{k}", from_pose(_random_rotation(rng), L * rng.uniform(-0.5, 1.0, 3)))
    return b.build()


def auto_tree(nbodies, branching=1.0, skew=0.0, taper=1.0, floating_base=False, name=None) -> Model:
    """Featherstone's ``autoTree(NB, bf, skew, taper)`` (R. Featherstone, *Rigid Body Dynamics
    Algorithms*, 2008, and his spatial_v2 software): a deterministic tree of revolute joints.

    Bodies ``k = 1..NB`` (named ``body{k}``, joints ``joint{k}``), ``parent(k) =
    floor((k - 2 + ceil(bf)) / bf)`` (``branching = 1``: a chain).  Link ``k`` has
    length ``L_k = taper**(k-1)`` along its x axis, mass ``taper**(3(k-1))``, centre
    of mass ``(L_k / 2, 0, 0)`` and rotational inertia about it
    ``m L_k^2 diag(0.0025, 1.015/12, 1.015/12)`` (a slender rod).  Every joint turns
    about the z axis of its joint frame; a child's joint frame sits at the end of
    its parent's link, turned by ``skew`` about that link's x axis:
    ``Xtree = rotx(skew) xlt([L_parent, 0, 0])``.  Nori's flop comparisons use
    ``auto_tree(NB, 1, 1.5, 0.9)`` (forward dynamics) and ``auto_tree(NB, 1, 1.5, 1)``.
    ``floating_base=True`` makes body 1's joint ``free`` instead (a free-floating chain).
    """
    if int(nbodies) != nbodies or nbodies < 1:
        raise ValueError(f"nbodies: expected a positive number of bodies, got {nbodies!r}")
    if not branching >= 1.0:
        raise ValueError(f"branching: expected a branching factor >= 1, got {branching!r}")
    b = ModelBuilder(name or f"auto_tree{int(nbodies)}")
    for k in range(1, int(nbodies) + 1):
        pk = math.floor((k - 2 + math.ceil(branching)) / branching)
        L, mass = taper ** (k - 1), taper ** (3 * (k - 1))
        Xtree = None if pk == 0 else Transform(rotx(skew), np.array([taper ** (pk - 1), 0.0, 0.0]))
        joint = make_joint("free" if floating_base and k == 1 else "revolute", (0.0, 0.0, 1.0))
        b.add_body(f"body{k}", None if pk == 0 else f"body{pk}", joint, Xtree,
                   mass=mass, com=[L / 2, 0.0, 0.0], rot_inertia=mass * L * L * np.diag([0.0025, 1.015 / 12, 1.015 / 12]),
                   joint_name=f"joint{k}")
    return b.build()


# --- humanoid -----------------------------------------------------------------

#: Height of the pelvis frame above the ground when the humanoid stands in its
#: neutral posture with both soles flat on the plane z = 0.
HUMANOID_STANDING_HEIGHT = 1.01

# Geometry of a 1.75 m, 72 kg adult (segment lengths after Winter, masses after
# de Leva 1996; the small links between the axes of multi-axis joints take their
# mass from the neighbouring segment).  Body frames sit at their joints and are
# aligned with the pelvis in the neutral posture: x forward, y left, z up.
_HIP = (0.0, 0.09, -0.08)        # hip centre in the pelvis frame (left side)
_THIGH, _SHANK, _ANKLE = 0.43, 0.43, 0.07   # hip-knee, knee-ankle, ankle-sole
_WAIST = (0.0, 0.0, 0.10)        # torso joint in the pelvis frame
_SHOULDER = (0.0, 0.19, 0.33)    # shoulder centre in the torso frame (left side)
_UPPER_ARM, _FOREARM = 0.30, 0.25
_NECK = (0.0, 0.0, 0.42)         # neck in the torso frame


def _mirror_limits(lo, hi, side):
    """Limits of a roll or yaw joint on ``side`` (+1 left, -1 right): mirroring y flips their sign."""
    return (lo, hi) if side > 0 else (-hi, -lo)


def humanoid(hips="revolute") -> Model:
    """A 35-dof humanoid (72 kg, 1.75 m), floating base.

    ``hips``: ``"revolute"`` (three revolute joints per hip, below) or an Euler-angle spherical
    joint type (``"spherical_zyx"``, ...): each hip is then one joint ``l_hip``/``r_hip`` of that
    type carrying the thigh, which takes the two small hip links' mass (same nv, two bodies fewer).

    Tree: ``pelvis`` (free joint ``root_joint``); per leg (prefix ``l_``/``r_``)
    ``hip_yaw, hip_roll, hip_pitch, knee, ankle_pitch, ankle_roll``; ``torso_yaw``;
    per arm ``shoulder_pitch, shoulder_roll, shoulder_yaw, elbow, wrist_yaw,
    wrist_pitch, wrist_roll``; ``neck_yaw, neck_pitch``.  Yaw joints turn about
    z, roll about x, pitch about y (pelvis axes in the neutral posture: x
    forward, y left, z up); knee flexion is positive, hip/shoulder/elbow flexion
    negative.  v = 6 (base) + 12 (legs) + 1 (torso) + 14 (arms) + 2 (neck).

    Frames: ``l_sole``/``r_sole`` (under the ankle, on the sole, foot axes),
    ``l_hand``/``r_hand`` (palm centre), ``head_camera`` (optical convention:
    z forward, x right, y down).  In the neutral configuration with the base at
    height :data:`HUMANOID_STANDING_HEIGHT` (see
    :func:`humanoid_standing_configuration`) the robot stands upright with
    both soles flat on z = 0.
    """
    if hips != "revolute" and not (str(hips).startswith("spherical_") and hips in JOINT_TYPES):
        raise ValueError(f"hips: expected 'revolute' or an Euler-angle spherical joint type "
                         f"('spherical_zyx', ...), got {hips!r}")
    b = ModelBuilder("humanoid" if hips == "revolute" else f"humanoid_{hips}_hips")
    rev = {"yaw": make_joint("revolute", (0, 0, 1)), "roll": make_joint("revolute", (1, 0, 0)),
           "pitch": make_joint("revolute", (0, 1, 0))}

    def add(body, parent, joint, kind, offset, mass, com, Ic, limits, effort, velocity):
        b.add_body(body, parent, rev[kind], xlt(np.array(offset, float)) if any(offset) else None,
                   mass=mass, com=np.array(com, float), rot_inertia=Ic, joint_name=joint,
                   lower=limits[0], upper=limits[1], effort_limit=effort, velocity_limit=velocity)

    b.add_body("pelvis", None, make_joint("free"), mass=8.0, com=np.zeros(3),
               rot_inertia=_box(8.0, 0.18, 0.30, 0.16), joint_name="root_joint")
    for s, side in (("l_", 1.0), ("r_", -1.0)):
        _humanoid_leg(b, add, s, side, hips)
    add("torso", "pelvis", "torso_yaw", "yaw", _WAIST, 23.2, (0, 0, 0.22), _box(23.2, 0.20, 0.34, 0.50),
        (-0.8, 0.8), 150.0, 5.0)
    for s, side in (("l_", 1.0), ("r_", -1.0)):
        _humanoid_arm(b, add, s, side)
    add("neck_link", "torso", "neck_yaw", "yaw", _NECK, 0.2, (0, 0, 0), _sphere(0.2, 0.04), (-1.2, 1.2), 10.0, 6.0)
    add("head", "neck_link", "neck_pitch", "pitch", (0, 0, 0), 4.8, (0, 0, 0.11), _sphere(4.8, 0.10),
        (-0.6, 0.9), 10.0, 6.0)
    # Optical frame: its z axis looks forward (head x), its x axis points right (-y), its y axis down (-z).
    R_cam = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    b.add_frame("head_camera", "head", from_pose(R_cam, np.array([0.09, 0.0, 0.12])))
    return b.build()


def _humanoid_leg(b, add, s, side, hips):
    """One leg of :func:`humanoid` (prefix ``s``, ``side`` +1 left, -1 right): hip, knee, ankle, sole."""
    m = partial(_mirror_limits, side=side)
    hip = (_HIP[0], side * _HIP[1], _HIP[2])
    if hips == "revolute":
        add(s + "hip_yaw_link", "pelvis", s + "hip_yaw", "yaw", hip, 0.4, (0, 0, 0), _sphere(0.4, 0.05),
            m(-0.6, 0.8), 100.0, 7.0)
        add(s + "hip_roll_link", s + "hip_yaw_link", s + "hip_roll", "roll", (0, 0, 0), 0.4, (0, 0, 0),
            _sphere(0.4, 0.05), m(-0.4, 0.8), 150.0, 7.0)
        add(s + "thigh", s + "hip_roll_link", s + "hip_pitch", "pitch", (0, 0, 0), 9.4,
            (0, 0, -0.41 * _THIGH), _cylinder(9.4, 0.075, _THIGH, 2), (-2.0, 0.5), 200.0, 8.0)
    else:
        lim = {"z": m(-0.6, 0.8), "x": m(-0.4, 0.8), "y": (-2.0, 0.5)}
        order = hips.split("_")[1]
        I = (mcI(9.4, np.array([0, 0, -0.41 * _THIGH]), _cylinder(9.4, 0.075, _THIGH, 2))
             + 2 * mcI(0.4, np.zeros(3), _sphere(0.4, 0.05)))
        b.add_body(s + "thigh", "pelvis", make_joint(hips), xlt(np.array(hip, float)), I, joint_name=s + "hip",
                   lower=[lim[c][0] for c in order], upper=[lim[c][1] for c in order],
                   effort_limit=200.0, velocity_limit=8.0)
    add(s + "shank", s + "thigh", s + "knee", "pitch", (0, 0, -_THIGH), 3.1,
        (0, 0, -0.44 * _SHANK), _cylinder(3.1, 0.05, _SHANK, 2), (0.0, 2.4), 250.0, 10.0)
    add(s + "ankle_link", s + "shank", s + "ankle_pitch", "pitch", (0, 0, -_SHANK), 0.1, (0, 0, 0),
        _sphere(0.1, 0.03), (-0.6, 0.9), 120.0, 8.0)
    add(s + "foot", s + "ankle_link", s + "ankle_roll", "roll", (0, 0, 0), 0.9,
        (0.06, 0, -_ANKLE / 2), _box(0.9, 0.26, 0.10, _ANKLE), m(-0.4, 0.4), 60.0, 8.0)
    b.add_frame(s + "sole", s + "foot", xlt(np.array([0.0, 0.0, -_ANKLE])))


def _humanoid_arm(b, add, s, side):
    """One arm of :func:`humanoid` (prefix ``s``, ``side`` +1 left, -1 right): shoulder, elbow, wrist, hand."""
    m = partial(_mirror_limits, side=side)
    sh = (_SHOULDER[0], side * _SHOULDER[1], _SHOULDER[2])
    add(s + "shoulder_pitch_link", "torso", s + "shoulder_pitch", "pitch", sh, 0.15, (0, 0, 0),
        _sphere(0.15, 0.04), (-3.1, 1.0), 80.0, 8.0)
    add(s + "shoulder_roll_link", s + "shoulder_pitch_link", s + "shoulder_roll", "roll", (0, 0, 0), 0.15,
        (0, 0, 0), _sphere(0.15, 0.04), m(-0.3, 2.8), 80.0, 8.0)
    add(s + "upper_arm", s + "shoulder_roll_link", s + "shoulder_yaw", "yaw", (0, 0, 0), 1.65,
        (0, 0, -0.577 * _UPPER_ARM), _cylinder(1.65, 0.045, _UPPER_ARM, 2), m(-1.5, 1.5), 40.0, 8.0)
    add(s + "forearm", s + "upper_arm", s + "elbow", "pitch", (0, 0, -_UPPER_ARM), 1.1,
        (0, 0, -0.457 * _FOREARM), _cylinder(1.1, 0.035, _FOREARM, 2), (-2.5, 0.0), 40.0, 10.0)
    add(s + "wrist_yaw_link", s + "forearm", s + "wrist_yaw", "yaw", (0, 0, -_FOREARM), 0.05, (0, 0, 0),
        _sphere(0.05, 0.02), m(-1.5, 1.5), 10.0, 10.0)
    add(s + "wrist_pitch_link", s + "wrist_yaw_link", s + "wrist_pitch", "pitch", (0, 0, 0), 0.05, (0, 0, 0),
        _sphere(0.05, 0.02), (-1.2, 1.2), 10.0, 10.0)
    add(s + "hand_link", s + "wrist_pitch_link", s + "wrist_roll", "roll", (0, 0, 0), 0.42, (0, 0, -0.07),
        _box(0.42, 0.03, 0.08, 0.18), m(-0.4, 0.6), 10.0, 10.0)
    b.add_frame(s + "hand", s + "hand_link", xlt(np.array([0.0, 0.0, -0.08])))


def humanoid_standing_configuration() -> np.ndarray:
    """Configuration (36,) of :func:`humanoid` standing upright, soles flat on z = 0.

    The neutral configuration with the pelvis at height :data:`HUMANOID_STANDING_HEIGHT`.
    """
    q = np.zeros(36)
    q[2] = HUMANOID_STANDING_HEIGHT
    q[6] = 1.0
    return q


# --- registry -----------------------------------------------------------------

#: Built-in models by name; each value builds a fresh Model when called.
BUILTIN_MODELS = {
    "humanoid": humanoid,
    "chain7": partial(serial_chain, 7, name="chain7"),
    "tree15": partial(random_tree, 15, branching=2.0, name="tree15"),
}


def builtin(name: str) -> Model:
    """The built-in model called ``name`` (see :data:`BUILTIN_MODELS`)."""
    try:
        factory = BUILTIN_MODELS[name]
    except KeyError:
        raise KeyError(f"no built-in model {name!r}; available: {', '.join(sorted(BUILTIN_MODELS))}") from None
    return factory()
