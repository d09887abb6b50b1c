"""Constraints between frames and points of the tree: weld (6D), point coincidence (3D), ground contact.

Frames are the model's named frames (``model.frames``, every body has one of its
own name); ``None`` stands for the world.  Points are given in the coordinates
of their frame.  All residuals and Jacobian rows use world axes:

====================  ====  ============================================================
constraint            rows  g(q)
====================  ====  ============================================================
``Weld``              6     ``[log3(R_A R_T^T); p_A - p_T]`` (angular first); ``T`` is
                            the target pose: frame B composed with ``placement``
``PointCoincidence``  1-3   ``(p_A - p_B)[axes]`` (a spherical loop closure)
``PointOnGround``     1     ``n . p_A - height`` (slides on the plane ``n . x = height``)
====================  ====  ============================================================

``G`` rows are the matching rows of ``J_A - J_B`` (world-aligned point
Jacobians, see :mod:`._kinematics`); ``Gdot v`` the matching rows of the
difference of the bias (``a = 0``) angular and classical linear accelerations.
Position rows are exact derivatives everywhere.  The weld's orientation rows
``G = J_omega,A - J_omega,B`` are the exact derivative of ``log3(R_A R_T^T)``
on the constraint manifold (``R_A = R_T``); off it they are the relative angular
velocity (``d log3 = Jl^-1 (omega_A - R omega_T)``), which Newton's method in
:mod:`sparsedyn.constraints.assembly` uses as a quasi-Newton Jacobian.
"""

from __future__ import annotations

import numpy as np

from ..joints import quat_log
from ..spatial import rot_to_quat
from . import _kinematics as K
from .base import Constraint
from .errors import ConstraintError

__all__ = ["Weld", "PointCoincidence", "PointOnGround", "resolve_frame"]


def resolve_frame(model, frame, what):
    """``(body, R, r)`` of a frame: its body (-1 for ``None`` = world), its rotation and origin in body coordinates."""
    if frame is None:
        return -1, np.eye(3), np.zeros(3)
    try:
        k = model.frame(frame)
    except KeyError as e:
        names = model.frame_names
        listed = ", ".join(names[:30]) + (f", ... ({len(names)} in all)" if len(names) > 30 else "")
        raise ConstraintError(f"{what}: {e.args[0]}; frames: {listed}") from None
    f = model.frames[k]
    return f.body, np.array(f.X.E).T, np.array(f.X.r)


def _vec3(x, what):
    try:
        a = np.asarray(x, float).reshape(-1)
    except (TypeError, ValueError):
        raise ConstraintError(f"{what}: expected 3 numbers, got {x!r}") from None
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ConstraintError(f"{what}: expected 3 finite numbers, got {x!r}")
    return a


def _frame_name(model, frame):
    return None if frame is None else model.frames[model.frame(frame)].name


class _TwoPoints(Constraint):
    """Shared kernels of constraints between a point on side A and a point on side B."""

    def _points(self, kin):
        pa = K.point_position(kin, self.body_a, self.r_a)
        pb = K.point_position(kin, self.body_b, self.r_b)
        return pa, pb

    def _jac(self, kin, pa, pb):
        return (K.point_jacobian(self.model, kin, self.body_a, pa)
                - K.point_jacobian(self.model, kin, self.body_b, pb))

    def _acc(self, kin):
        wa, aa = K.point_bias_acceleration(kin, self.body_a, self.r_a)
        wb, ab = K.point_bias_acceleration(kin, self.body_b, self.r_b)
        return wa - wb, aa - ab

    def _all(self, kin, v):
        """Positions, relative Jacobian and bias accelerations, each computed once."""
        pa, pb = self._points(kin)
        return pa, pb, self._jac(kin, pa, pb), None if v is None else self._acc(kin)


class PointCoincidence(_TwoPoints):
    """Point ``point_a`` of ``frame_a`` coincides with point ``point_b`` of ``frame_b`` (a spherical joint).

    ``frame_b=None``: ``point_b`` is a fixed world point (a sticking point contact).
    ``axes``: the world axes constrained, a subset of ``"xyz"`` (``"xy"`` for a
    planar loop whose z rows would be identically zero).  Points default to the
    frame origins.
    """

    kind = "point"

    def __init__(self, model, frame_a, frame_b=None, point_a=None, point_b=None, axes="xyz", name=None):
        super().__init__(model, name)
        w = f"point constraint {self.name!r}"
        if frame_a is None:
            raise ConstraintError(f"{w}: frame_a must be a frame of model {model.name!r}, not the world")
        self.body_a, Ra, oa = resolve_frame(model, frame_a, f"{w}, frame_a")
        self.body_b, Rb, ob = resolve_frame(model, frame_b, f"{w}, frame_b")
        self.frame_a, self.frame_b = _frame_name(model, frame_a), _frame_name(model, frame_b)
        self._default_name(self.frame_a, self.frame_b)
        self.point_a = np.zeros(3) if point_a is None else _vec3(point_a, f"{w}, point_a")
        self.point_b = np.zeros(3) if point_b is None else _vec3(point_b, f"{w}, point_b")
        self.r_a = oa + Ra @ self.point_a
        self.r_b = ob + Rb @ self.point_b
        if self.body_a == self.body_b:
            raise ConstraintError(f"{w}: both points are on body {model.body_names[self.body_a]!r}; "
                                  f"the constraint would not involve any joint")
        if not isinstance(axes, str) or not axes or any(a not in "xyz" for a in axes) or len(set(axes)) != len(axes):
            raise ConstraintError(f"{w}: axes must be distinct letters of 'xyz', got {axes!r}")
        self.axes = "".join(sorted(axes))
        self.index = ["xyz".index(a) for a in self.axes]
        self.size = len(self.index)
        self.labels = tuple(self.axes)

    def residual(self, kin, q):
        pa, pb = self._points(kin)
        return (pa - pb)[..., self.index]

    def jacobian(self, kin, q):
        pa, pb = self._points(kin)
        return self._jac(kin, pa, pb)[..., [3 + k for k in self.index], :]

    def bias(self, kin, q, v):
        return self._acc(kin)[1][..., self.index]

    def evaluate(self, kin, q, v=None):
        pa, pb, J, acc = self._all(kin, v)
        return ((pa - pb)[..., self.index], J[..., [3 + k for k in self.index], :],
                None if acc is None else acc[1][..., self.index])

    def to_dict(self):
        return {"type": "point", "name": self.name, "frame_a": self.frame_a, "point_a": self.point_a.tolist(),
                "frame_b": self.frame_b, "point_b": self.point_b.tolist(), "axes": self.axes}


def _log3(R):
    """Rotation vector (..., 3) of rotation matrices (float only)."""
    return quat_log(rot_to_quat(R))


class Weld(_TwoPoints):
    """Frame ``frame_a`` is rigidly attached to ``frame_b`` (or to the world for ``None``).

    ``placement = (R, p)``: the pose of frame A in frame B (or in the world) that
    the weld holds, default the identity (the frames coincide).  Six rows,
    angular first: ``[log3(R_A R_T^T); p_A - p_T]`` in world axes, ``T`` being
    the target frame ``B * placement`` (see the module docstring for ``G``).
    """

    kind = "weld"
    size = 6
    labels = ("rx", "ry", "rz", "x", "y", "z")

    def __init__(self, model, frame_a, frame_b=None, placement=None, name=None):
        super().__init__(model, name)
        w = f"weld {self.name!r}"
        if frame_a is None:
            raise ConstraintError(f"{w}: frame_a must be a frame of model {model.name!r}, not the world")
        self.body_a, self.Ra, self.r_a = resolve_frame(model, frame_a, f"{w}, frame_a")
        self.body_b, Rb, ob = resolve_frame(model, frame_b, f"{w}, frame_b")
        self.frame_a, self.frame_b = _frame_name(model, frame_a), _frame_name(model, frame_b)
        self._default_name(self.frame_a, self.frame_b)
        if placement is None:
            Ro, po = np.eye(3), np.zeros(3)
        else:
            try:
                Ro, po = np.asarray(placement[0], float), _vec3(placement[1], f"{w}, placement position")
            except (TypeError, IndexError):
                raise ConstraintError(f"{w}: placement must be a pose (R, p), got {placement!r}") from None
            if Ro.shape != (3, 3) or not np.allclose(Ro @ Ro.T, np.eye(3), atol=1e-9) or np.linalg.det(Ro) < 0:
                raise ConstraintError(f"{w}: placement rotation must be a 3x3 rotation matrix, got {Ro!r}")
        self.placement = (Ro, po)
        self.Rb = Rb @ Ro                     # target frame rotation in body-B coordinates
        self.r_b = ob + Rb @ po               # target frame origin in body-B coordinates
        if self.body_a == self.body_b:
            raise ConstraintError(f"{w}: both frames are on body {model.body_names[self.body_a]!r}")

    def residual(self, kin, q):
        pa, pb = self._points(kin)
        RA = K.body_rotation(kin, self.body_a) @ self.Ra
        RT = K.body_rotation(kin, self.body_b) @ self.Rb
        return np.concatenate([_log3(RA @ np.swapaxes(RT, -1, -2)), pa - pb], -1)

    def jacobian(self, kin, q):
        pa, pb = self._points(kin)
        return self._jac(kin, pa, pb)

    def bias(self, kin, q, v):
        return np.concatenate(self._acc(kin), -1)

    def evaluate(self, kin, q, v=None):
        pa, pb, J, acc = self._all(kin, v)
        RA = K.body_rotation(kin, self.body_a) @ self.Ra
        RT = K.body_rotation(kin, self.body_b) @ self.Rb
        g = np.concatenate([_log3(RA @ np.swapaxes(RT, -1, -2)), pa - pb], -1)
        return g, J, None if acc is None else np.concatenate(acc, -1)

    def to_dict(self):
        R, p = self.placement
        return {"type": "weld", "name": self.name, "frame_a": self.frame_a, "frame_b": self.frame_b,
                "placement": {"rotation": R.tolist(), "position": p.tolist()}}


class PointOnGround(Constraint):
    """Point ``point`` of ``frame`` stays on the plane ``normal . x = height`` (world), free to slide on it.

    One row, ``g = n . p - height`` with unit ``n``: a frictionless bilateral
    contact.  (A sticking contact is a :class:`PointCoincidence` with the world.)
    """

    kind = "ground"
    size = 1
    labels = ("n",)

    def __init__(self, model, frame, point=None, normal=(0.0, 0.0, 1.0), height=0.0, name=None):
        super().__init__(model, name)
        w = f"ground contact {self.name!r}"
        if frame is None:
            raise ConstraintError(f"{w}: frame must be a frame of model {model.name!r}, not the world")
        self.body, R, o = resolve_frame(model, frame, f"{w}, frame")
        self.frame = _frame_name(model, frame)
        self._default_name(self.frame)
        self.point = np.zeros(3) if point is None else _vec3(point, f"{w}, point")
        self.r = o + R @ self.point
        n = _vec3(normal, f"{w}, normal")
        if np.linalg.norm(n) < 1e-12:
            raise ConstraintError(f"{w}: normal must be a nonzero vector")
        self.normal = n / np.linalg.norm(n)
        self.height = float(height)

    def residual(self, kin, q):
        return (K.point_position(kin, self.body, self.r) @ self.normal - self.height)[..., None]

    def jacobian(self, kin, q):
        p = K.point_position(kin, self.body, self.r)
        J = K.point_jacobian(self.model, kin, self.body, p)
        return np.einsum("k,...kn->...n", self.normal, J[..., 3:, :])[..., None, :]

    def bias(self, kin, q, v):
        return (K.point_bias_acceleration(kin, self.body, self.r)[1] @ self.normal)[..., None]

    def to_dict(self):
        return {"type": "ground", "name": self.name, "frame": self.frame, "point": self.point.tolist(),
                "normal": self.normal.tolist(), "height": self.height}
