"""Joints whose motion subspace depends on ``q``, and the 3-dof translation.

Built on the registry of :mod:`sparsedyn.model.joints` (``jcalc(joint, q) -> (XJ, S)``).  For these
joints ``S(q)`` (..., 6, nv) is expressed in the child frame and changes with ``q``, so the
joint adds the velocity-product acceleration ``cJ = Sdot qd`` (:meth:`~sparsedyn.Joint.bias`,
the time derivative of the child-frame components of ``S``; Featherstone, *Rigid Body Dynamics
Algorithms*, 2008, section 4.4) to ``v x vJ`` in every algorithm.

==================  ====  ====  ===========================================================
type                nq    nv    q / v
==================  ====  ====  ===========================================================
spherical_zyx       3     3     angles ``[z, y, x]``, ``parent_R_child = Rz Ry Rx``; v = qdot
spherical_xyz       3     3     angles ``[x, y, z]``, ``Rx Ry Rz``; v = qdot
spherical_yxz       3     3     angles ``[y, x, z]``, ``Ry Rx Rz``; v = qdot
spherical_zxy       3     3     angles ``[z, x, y]``, ``Rz Rx Ry``; v = qdot
translation         3     3     ``[x, y, z]`` of the child origin in the parent frame; v = qdot
universal           2     2     angles about ``axes[0]`` (parent side) then ``axes[1]``; v = qdot
composite           sum   sum   the parts' ``q`` and ``v`` one after the other
helical             1     1     with ``translation_axis``: see :class:`Helical`
==================  ====  ====  ===========================================================

A composite joint (Pinocchio's ``JointModelComposite``, RBDL's multi-dof joints, MuJoCo's several
joints in one body) is a sequence of joints without bodies between them: ``XJ = XJ_n ... XJ_1``,
the block of part ``k`` of ``S`` is ``S_k`` carried to the child frame, and ``cJ`` is the
acceleration of the last intermediate frame at ``qdd = 0`` with the parent at rest (the forward
pass of RNEA over the massless chain).  The Euler-angle and universal joints are such chains of
revolute joints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .joints import Joint, Revolute, _register, random_displacement
from .spatial import (Transform, apply_motion, axis_rotation, compose, cross3, cross_motion, mv)

__all__ = ["Composite", "Translation", "Universal", "Helical", "EULER_ORDERS"]

#: The Euler-angle spherical joint types and the axes of their three rotations (parent side first).
EULER_ORDERS = {"spherical_zyx": "zyx", "spherical_xyz": "xyz", "spherical_yxz": "yxz", "spherical_zxy": "zxy"}
_UNIT = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}


def move_columns(X: Transform, S):
    """``X S``: the motion vectors in the columns of ``S`` (..., 6, n) carried by ``X``."""
    Xc = Transform(X.E[..., None, :, :], X.r[..., None, :])
    return np.swapaxes(apply_motion(Xc, np.swapaxes(S, -1, -2)), -1, -2)


def _concat(blocks, axis=-1):
    """Blocks concatenated along ``axis`` after broadcasting their other axes."""
    nd = max(b.ndim for b in blocks)
    lead = np.broadcast_shapes(*(b.shape[:b.ndim - 2] for b in blocks)) if nd > 2 else ()
    return np.concatenate([np.broadcast_to(b, lead + b.shape[-2:]) for b in blocks], axis)


def _block_diagonal(blocks):
    """The block-diagonal (..., n, n) matrix of square blocks (..., n_k, n_k)."""
    n = sum(b.shape[-1] for b in blocks)
    lead = np.broadcast_shapes(*(b.shape[:-2] for b in blocks))
    out = np.zeros(lead + (n, n), dtype=np.result_type(*blocks))
    k = 0
    for b in blocks:
        out[..., k:k + b.shape[-1], k:k + b.shape[-1]] = b
        k += b.shape[-1]
    return out


@_register
@dataclass(frozen=True)
class Composite(Joint):
    """A sequence of joints without bodies between them: ``joints[0]`` moves against the parent,
    each next one against the frame the previous one moved, the last one carries the child.
    ``q``, ``v`` are the parts' coordinates one after the other (nq, nv: their sums).

    ``placements`` (optional, one per part): the fixed placement of each part's frame in the frame
    the previous part moved (the joint frame for the first), a ``sparsedyn.model.spatial.Transform``
    ``part_X_previous`` (``sparsedyn.model.spatial.xlt(p)``: a part whose axis passes through ``p``) or
    ``None`` (coincident; the default for every part), as Pinocchio's ``JointModelComposite``
    joint placements: ``XJ = XJ_n P_n ... XJ_1 P_1``.  MuJoCo's several joints of one body at
    different anchors are such a joint."""

    joints: tuple = ()
    placements: tuple = ()
    type: ClassVar[str] = "composite"
    options: ClassVar[tuple] = ("joints", "placements")

    def __post_init__(self):
        super().__post_init__()
        parts = self._parts()
        if isinstance(parts, Joint) or not hasattr(parts, "__iter__"):
            raise ValueError(f"{self.type} joint: joints must be a sequence of joints, got {type(parts).__name__}")
        parts = tuple(parts)
        if not parts:
            raise ValueError(f"{self.type} joint: joints must hold at least one joint, got an empty sequence")
        for k, j in enumerate(parts):
            if not isinstance(j, Joint):
                raise ValueError(f"{self.type} joint: joints[{k}] is a {type(j).__name__}, expected a joint "
                                 f"(sparsedyn.make_joint or sparsedyn.CustomJoint)")
        object.__setattr__(self, "joints", parts)
        placed = _placements(self.type, self.placements, len(parts))
        object.__setattr__(self, "placements", tuple(None if X is None else (tuple(X.E.reshape(-1).tolist()),
                                                                             tuple(X.r.tolist())) for X in placed))
        object.__setattr__(self, "_placed", placed)
        object.__setattr__(self, "nq", sum(j.nq for j in parts))
        object.__setattr__(self, "nv", sum(j.nv for j in parts))
        qs, vs, a, b = [], [], 0, 0
        for j in parts:
            qs.append(slice(a, a + j.nq)), vs.append(slice(b, b + j.nv))
            a, b = a + j.nq, b + j.nv
        object.__setattr__(self, "_slices", tuple(zip(parts, qs, vs)))

    def _parts(self):
        return self.joints

    @property
    def constant_subspace(self):
        return len(self.joints) == 1 and self.joints[0].constant_subspace

    def motion_subspace(self):
        return np.asarray(self.jcalc(self.neutral())[1], dtype=float)

    @property
    def part_placements(self):
        """The parts' placements as ``sparsedyn.model.spatial.Transform`` (``None``: coincident)."""
        return self._placed

    def _part(self, k, q):
        """``(X_k, S_k)`` of part ``k`` at its coordinates ``q``: ``X_k = XJ_k P_k`` (its placement, then
        its own motion), ``S_k`` in its child frame."""
        Xk, Sk = self.joints[k].jcalc(q)
        P = self._placed[k]
        return (Xk if P is None else compose(Xk, P)), Sk

    def jcalc(self, q):
        X, S = None, []
        for k, (j, qs, _) in enumerate(self._slices):
            Xk, Sk = self._part(k, q[..., qs])
            if X is None:
                X = Xk
            else:
                S = [move_columns(Xk, B) for B in S]
                X = compose(Xk, X)
            S.append(Sk)
        return X, _concat(S)

    def bias(self, q, qd):
        # RNEA's forward pass over the massless chain at qdd = 0, the parent at rest:
        # v_k = X_k v_(k-1) + S_k qd_k,  c_k = X_k c_(k-1) + cJ_k + v_k x (S_k qd_k).
        v = c = None
        for k, (j, qs, vs) in enumerate(self._slices):
            Xk, Sk = self._part(k, q[..., qs])
            vJ = mv(Sk, qd[..., vs])
            terms = [j.bias(q[..., qs], qd[..., vs])]
            if v is not None:
                v = apply_motion(Xk, v) + vJ
                terms += [None if c is None else apply_motion(Xk, c), cross_motion(v, vJ)]
            else:
                v = vJ
            terms = [t for t in terms if t is not None]
            c = None if not terms else sum(terms[1:], terms[0])
        return c

    def quaternions(self):
        return tuple(qs.start + k for j, qs, _ in self._slices for k in j.quaternions())

    def subspace_rate(self, q, qd):
        # Each later part m carries the blocks before it into its frame and moves against the
        # previous frame with vJ_m: d/dt (X_m B) = X_m Bdot - vJ_m x (X_m B).
        S, Sd = [], []
        for k, (j, qs, vs) in enumerate(self._slices):
            Xk, Sk = self._part(k, q[..., qs])      # a constant placement P_k moves the blocks, no rate
            vJ = mv(Sk, qd[..., vs])
            if S:
                S = [move_columns(Xk, B) for B in S]
                Sd = [(B if B is None else move_columns(Xk, B)) for B in Sd]
                Sd = [(0 * C if B is None else B) - _cross_columns(vJ, C) for B, C in zip(Sd, S)]
            S.append(Sk)
            Sd.append(j.subspace_rate(q[..., qs], qd[..., vs]))
        Sd = [0 * np.broadcast_to(C, np.broadcast_shapes(C.shape, qd.shape[:-1] + (1, 1))) if B is None else B
              for B, C in zip(Sd, S)]
        return _concat(Sd)

    def neutral(self):
        return np.concatenate([j.neutral() for j in self.joints])

    def random(self, rng, lower=None, upper=None):
        return np.concatenate([j.random(rng, None if lower is None else np.asarray(lower)[qs],
                                        None if upper is None else np.asarray(upper)[qs])
                               for j, qs, _ in self._slices])

    def _each(self, method, x, y, yslice):
        return [getattr(j, method)(x[..., qs], y[..., qs if yslice == "q" else vs]) for j, qs, vs in self._slices]

    def integrate(self, q, v):
        return _concat_vectors(self._each("integrate", q, v, "v"))

    def difference(self, q0, q1):
        return _concat_vectors(self._each("difference", q0, q1, "q"))

    def retract(self, q, dq):
        return _concat_vectors(self._each("retract", q, dq, "v"))

    def integrate_jacobians(self, q, v):
        parts = self._each("integrate_jacobians", q, v, "v")
        return tuple(_block_diagonal([np.asarray(p[k]) for p in parts]) for k in range(2))

    def difference_jacobians(self, q0, q1):
        parts = self._each("difference_jacobians", q0, q1, "q")
        return tuple(_block_diagonal([np.asarray(p[k]) for p in parts]) for k in range(2))


def _placements(what, placements, n):
    """``n`` placements (``Transform`` or ``None``; an identity one becomes ``None``) from the user's
    sequence (empty or ``None``: all ``None``), checked: rotations, finite translations."""
    if placements is None or (hasattr(placements, "__len__") and len(placements) == 0):
        return (None,) * n
    if isinstance(placements, Transform) or not hasattr(placements, "__len__") or len(placements) != n:
        raise ValueError(f"{what} joint: placements must hold one placement (a sparsedyn.model.spatial.Transform or None) "
                         f"per part, {n}, got {placements!r}")
    out = []
    for k, X in enumerate(placements):
        if X is None:
            out.append(None)
            continue
        try:
            E, r = (np.asarray(x, dtype=float) for x in X)
            E = E.reshape(3, 3) if E.size == 9 else E          # the stored form: E's nine entries
        except (TypeError, ValueError):
            raise ValueError(f"{what} joint: placements[{k}] must be a sparsedyn.model.spatial.Transform (E, r) or None, "
                             f"got {X!r}") from None
        if E.shape != (3, 3) or r.shape != (3,) or not (np.all(np.isfinite(E)) and np.all(np.isfinite(r))) \
                or not np.allclose(E @ E.T, np.eye(3), rtol=0, atol=1e-9) or np.linalg.det(E) <= 0:
            raise ValueError(f"{what} joint: placements[{k}] must be a Transform with E a 3x3 rotation and r a "
                             f"finite 3-vector, got E of shape {E.shape}, r of shape {r.shape}")
        out.append(None if np.array_equal(E, np.eye(3)) and not r.any() else Transform(E, r))
    return tuple(out)


def _cross_columns(v, B):
    """``v x B``: the motion cross product of ``v`` (..., 6) with each column of ``B`` (..., 6, n)."""
    return np.swapaxes(cross_motion(v[..., None, :], np.swapaxes(B, -1, -2)), -1, -2)


def _concat_vectors(parts):
    lead = np.broadcast_shapes(*(p.shape[:-1] for p in parts))
    return np.concatenate([np.broadcast_to(p, lead + p.shape[-1:]) for p in parts], -1)


class _VectorChain(Composite):
    """A composite of 1-dof joints whose ``q`` adds like a vector (the Euler-angle and universal
    joints): the configuration functions are the vector ones of :class:`~sparsedyn.Joint`."""

    options: ClassVar[tuple] = ()
    integrate = Joint.integrate
    difference = Joint.difference
    retract = Joint.retract
    integrate_jacobians = Joint.integrate_jacobians
    difference_jacobians = Joint.difference_jacobians

    def neutral(self):
        return np.zeros(self.nq)

    def random(self, rng, lower=None, upper=None):
        return Joint.random(self, rng, lower, upper)


def _euler_random(self, rng, lower=None, upper=None):
    """Outer angles in [-pi, pi], the middle one in [-1.2, 1.2] (a random orientation kept away from
    the singularity at +-pi/2); finite limits are honoured instead."""
    q = Joint.random(self, rng, lower, upper)
    if lower is None or not np.all(np.isfinite(lower)) or upper is None or not np.all(np.isfinite(upper)):
        q[1] = rng.uniform(-1.2, 1.2)
    return q


def _euler(name, order):
    def _parts(self):
        return tuple(Revolute(axis=_UNIT[c]) for c in order)
    doc = (f"Spherical joint in Euler angles: q the angles about {', '.join(order)} (parent side first), "
           f"``parent_R_child = {' '.join('R' + c for c in order)}``; v = qdot (Pinocchio's and RBDL's "
           f"convention).  Singular where the middle angle is +-pi/2.")
    cls = type(f"Spherical{order.upper()}", (_VectorChain,), {"__doc__": doc, "type": name, "_parts": _parts,
                                                           "random": _euler_random,
                                                           "__annotations__": {"type": ClassVar[str]}})
    return _register(dataclass(frozen=True)(cls))


for _name, _order in EULER_ORDERS.items():
    globals()[f"Spherical{_order.upper()}"] = _euler(_name, _order)
__all__ += [f"Spherical{o.upper()}" for o in EULER_ORDERS.values()]


@_register
@dataclass(frozen=True)
class Universal(_VectorChain):
    """Two revolute joints: about ``axes[0]`` (in the parent frame) by ``q[0]``, then about
    ``axes[1]`` (in the child frame) by ``q[1]``: ``parent_R_child = R(a0, q0) R(a1, q1)``
    (Pinocchio's ``JointModelUniversal``).  The axes must not be parallel."""

    axes: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    type: ClassVar[str] = "universal"
    options: ClassVar[tuple] = ("axes",)

    def _parts(self):
        try:
            a = np.asarray(self.axes, dtype=float)
        except (TypeError, ValueError):
            a = None
        if a is None or a.shape != (2, 3) or not np.all(np.isfinite(a)):
            raise ValueError(f"universal joint: axes must be two 3-vectors, got {self.axes!r}")
        n = np.linalg.norm(a, axis=1)
        if np.any(n < 1e-12):
            raise ValueError(f"universal joint: axes must be nonzero, got {self.axes!r}")
        if np.linalg.norm(np.cross(a[0] / n[0], a[1] / n[1])) < 1e-9:
            raise ValueError(f"universal joint: axes {self.axes!r} are parallel; a universal joint needs two "
                             f"independent axes (use a revolute joint for one)")
        unit = a / n[:, None]
        object.__setattr__(self, "axes", tuple(tuple(float(x) for x in u) for u in unit))
        return tuple(Revolute(axis=tuple(u)) for u in unit)


@_register
@dataclass(frozen=True)
class Translation(Joint):
    """Translation in three dimensions: q the child origin ``[x, y, z]`` in the parent frame, the
    axes kept parallel; ``S = [0; 1]`` (RBDL's ``TranslationXYZ``, Pinocchio's ``Translation``)."""

    type: ClassVar[str] = "translation"
    nq: ClassVar[int] = 3
    nv: ClassVar[int] = 3

    def motion_subspace(self):
        return np.concatenate([np.zeros((3, 3)), np.eye(3)], 0)

    def jcalc(self, q):
        r = q[..., 0:3]
        return Transform(np.broadcast_to(np.eye(3), r.shape[:-1] + (3, 3)), r), self.subspace

    def random(self, rng, lower=None, upper=None):
        return random_displacement(rng, lower, upper, 3)
@_register
@dataclass(frozen=True)
class Helical(Joint):
    """Screw joint: rotation ``theta`` about ``axis`` with translation ``pitch * theta`` along
    ``axis``, or along ``translation_axis`` (a unit vector in the parent frame, RBDL's helical
    joint): then ``S = [axis; pitch E(theta) t]`` depends on ``theta`` and
    ``cJ = [0; -pitch qd^2 axis x (E t)]``."""

    translation_axis: tuple | None = None
    type: ClassVar[str] = "helical"
    options: ClassVar[tuple] = ("translation_axis",)
    nq: ClassVar[int] = 1
    nv: ClassVar[int] = 1

    def __post_init__(self):
        super().__post_init__()
        if self.translation_axis is not None:
            t = np.asarray(self.translation_axis, dtype=float).reshape(-1)
            if t.shape != (3,) or not np.all(np.isfinite(t)) or np.linalg.norm(t) < 1e-12:
                raise ValueError(f"helical joint: translation_axis must be a nonzero finite 3-vector, got "
                                 f"{self.translation_axis!r}")
            object.__setattr__(self, "translation_axis", tuple(float(x) for x in t / np.linalg.norm(t)))

    @property
    def constant_subspace(self):
        return self.translation_axis is None

    def motion_subspace(self):
        t = self.a if self.translation_axis is None else np.array(self.translation_axis)
        return np.concatenate([self.a, self.pitch * t])[:, None]

    def jcalc(self, q):
        E = axis_rotation(self.a, q[..., 0])
        if self.translation_axis is None:
            return Transform(E, (self.pitch * q[..., 0:1]) * self.a), self.subspace
        t = np.array(self.translation_axis)
        lin = self.pitch * (E @ t)
        ang = np.broadcast_to(self.a, lin.shape)
        return Transform(E, (self.pitch * q[..., 0:1]) * t), np.concatenate([ang, lin], -1)[..., None]

    def subspace_rate(self, q, qd):
        if self.translation_axis is None:
            return None
        Et = axis_rotation(self.a, q[..., 0]) @ np.array(self.translation_axis)
        lin = -(self.pitch * qd[..., 0:1]) * cross3(np.broadcast_to(self.a, Et.shape), Et)
        return np.concatenate([0 * lin, lin], -1)[..., None]

    def bias(self, q, qd):
        Sd = self.subspace_rate(q, qd)
        return None if Sd is None else Sd[..., 0] * qd[..., 0:1]

