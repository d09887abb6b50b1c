"""Constraints between frames and points of the tree: weld (6D), point coincidence (3D), ground contact.

Frames are the model's named frames (``model.frames``, every body has one of its
own name); ``None`` stands for the world.  Points are given in the coordinates
of their frame.  All residuals and Jacobian rows use world axes:

====================  ====  ============================================================
constraint            rows  g(q)
====================  ====  ============================================================
``Weld``              6     ``[log3(R_A R_T^T); p_A - p_T]`` (angular first); ``T`` is
                            the target pose: frame B composed with ``placement``; on
                            chosen ``directions``, those rows in frame A's axes
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

from ..model.joints import quat_log
from ..model.spatial import cross3, rot_to_quat
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


_DIRECTIONS = ("rx", "ry", "rz", "x", "y", "z")


def _directions(directions, what):
    """The row indices (sorted, into ``rx ry rz x y z``) of a weld's ``directions``."""
    if isinstance(directions, str):
        directions = (directions,)
    try:
        names = list(directions)
    except TypeError:
        raise ConstraintError(f"{what}: directions must be names among {_DIRECTIONS}, got {directions!r}") from None
    bad = [d for d in names if not isinstance(d, str) or d not in _DIRECTIONS]
    if not names or bad:
        raise ConstraintError(f"{what}: directions must be a nonempty set of names among {_DIRECTIONS} "
                              f"(frame_a's axes), got {directions!r}")
    if len(set(names)) != len(names):
        raise ConstraintError(f"{what}: directions name an axis twice: {directions!r}")
    return sorted(_DIRECTIONS.index(d) for d in names)


class Weld(_TwoPoints):
    """Frame ``frame_a`` is rigidly attached to ``frame_b`` (or to the world for ``None``), on all
    six relative motion directions or on the chosen ``directions``.

    ``placement = (R, p)``: the pose of frame A in frame B (or in the world) that
    the weld holds, default the identity (the frames coincide).  Six rows,
    angular first: ``[log3(R_A R_T^T); p_A - p_T]`` in world axes, ``T`` being
    the target frame ``B * placement`` (see the module docstring for ``G``).

    ``directions``: a subset of ``("rx", "ry", "rz", "x", "y", "z")``, the rotations
    about and translations along frame A's axes that the closure fixes (RBDL's loop
    constraints on chosen axes of the predecessor frame): a revolute closure about
    A's z fixes ``("rx", "ry", "x", "y", "z")``, a spherical one ``("x", "y", "z")``,
    and in a loop moving in A's xy plane a revolute closure fixes ``("x", "y")``
    and a rigid one ``("x", "y", "rz")``.  The rows are then in frame A's axes,
    in that order: ``log3(R_T^T R_A)`` (the orientation error in A's axes) and
    ``R_A^T (p_A - p_T)``.  The translation rows' ``G`` is their exact derivative
    (``R_A^T (v_A - v_T - omega_A x (p_A - p_T))``, the velocity of the point of A
    at ``p_T`` relative to B); the rotation rows' ``G = R_A^T (omega_A - omega_B)``
    is the relative angular velocity in A's axes, the exact velocity constraint of
    a fixed rotation direction and, off the manifold, the quasi-Newton Jacobian
    of the orientation error.  ``None`` (default) or all six: the full weld in
    world axes above.
    """

    kind = "weld"
    size = 6
    labels = _DIRECTIONS

    def __init__(self, model, frame_a, frame_b=None, placement=None, name=None, directions=None):
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
        index = list(range(6)) if directions is None else _directions(directions, w)
        #: whether the rows are a subset in frame A's axes (the full weld stays in world axes)
        self.local = len(index) < 6
        self.index = index
        self.directions = tuple(_DIRECTIONS[k] for k in index)
        self.size = len(index)
        self.labels = self.directions

    def _rotations(self, kin):
        return (K.body_rotation(kin, self.body_a) @ self.Ra, K.body_rotation(kin, self.body_b) @ self.Rb)

    def residual(self, kin, q):
        pa, pb = self._points(kin)
        RA, RT = self._rotations(kin)
        if self.local:
            d = (np.swapaxes(RA, -1, -2) @ (pa - pb)[..., None])[..., 0]
            return np.concatenate([_log3(np.swapaxes(RT, -1, -2) @ RA), d], -1)[..., self.index]
        return np.concatenate([_log3(RA @ np.swapaxes(RT, -1, -2)), pa - pb], -1)

    def jacobian(self, kin, q):
        return self.evaluate(kin, q)[1]

    def bias(self, kin, q, v):
        return self.evaluate(kin, q, v)[2]

    def evaluate(self, kin, q, v=None):
        if self.local:
            return self._evaluate_local(kin, v)
        pa, pb, J, acc = self._all(kin, v)
        return self.residual(kin, None), J, None if acc is None else np.concatenate(acc, -1)

    def _evaluate_local(self, kin, v):
        """The chosen rows in frame A's axes (see the class docstring)."""
        pa, pb = self._points(kin)
        At = np.swapaxes(self._rotations(kin)[0], -1, -2)
        d = pa - pb
        JA = K.point_jacobian(self.model, kin, self.body_a, pa)
        JB = K.point_jacobian(self.model, kin, self.body_b, pb)
        dxw = np.swapaxes(cross3(np.broadcast_to(d[..., None, :], JA.shape[:-2] + (JA.shape[-1], 3)),
                                   np.swapaxes(JA[..., :3, :], -1, -2)), -1, -2)       # d x omega_A columns
        G = np.concatenate([At @ (JA[..., :3, :] - JB[..., :3, :]), At @ (JA[..., 3:, :] - JB[..., 3:, :] + dxw)],
                           -2)
        b = None
        if v is not None:
            wa, va = K.point_velocity(kin, self.body_a, self.r_a)
            wb, vb = K.point_velocity(kin, self.body_b, self.r_b)
            (ala, aa), (alb, ab) = (K.point_bias_acceleration(kin, self.body_a, self.r_a),
                                    K.point_bias_acceleration(kin, self.body_b, self.r_b))
            # d/dt of R_A^T (.) adds -omega_A x (.) to the world-axes derivative
            ang = ala - alb - cross3(wa, wa - wb)
            lin = (aa - ab - cross3(ala, d) - 2.0 * cross3(wa, va - vb) + cross3(wa, cross3(wa, d)))
            b = (At @ np.concatenate([ang[..., None], lin[..., None]], -1))
            b = np.concatenate([b[..., 0], b[..., 1]], -1)
        return self.residual(kin, None), G[..., self.index, :], None if b is None else b[..., self.index]

    def to_dict(self):
        R, p = self.placement
        out = {"type": "weld", "name": self.name, "frame_a": self.frame_a, "frame_b": self.frame_b,
               "placement": {"rotation": R.tolist(), "position": p.tolist()}}
        if self.local:
            out["directions"] = list(self.directions)
        return out


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
