"""Joint limits as contacts: :func:`with_joint_stops`.

A joint limit is a one-sided constraint, as a contact is: the joint may move away from its limit but
not past it, and the impulse that holds it there only pushes.  So a scene's step enforces the limits
of hinges and slides as contacts of two collision shapes, a *stop*, which every road of the step
(native, batch, derivatives) already solves:

* a small sphere of radius ``rho`` on the joint's child body, its centre at distance ``r`` from a
  hinge's axis (on a slide: at the child's origin);
* per finite limit, a box on the parent body (or the world), whose face the sphere meets exactly at
  the limit.  For a hinge of axis ``a`` in the joint frame, the sphere's centre at angle ``q`` is
  ``c = r R(a, q) u`` (``u`` a unit vector normal to ``a``); the box of the lower limit ``L`` has
  its face in the plane through the axis at angle ``L`` moved back by ``rho``, so the pair's signed
  distance is ``r sin(q - L)`` (``r sin(U - q)`` at the upper limit ``U``); for a slide of axis
  ``a``, ``q - L`` and ``U - q``.  (The box spans ``0.8 r`` to ``1.2 r`` from the axis, so the
  distance is that of its face while the joint is within 36 degrees of the limit; farther, it is
  larger, the box lying behind its face's plane.)

The pair's normal row is then the joint's own speed times ``r cos(q - L)`` (the two bodies' motions
differ by the joint's alone), its friction is zero (a frictionless contact, its impulse a pure joint
torque ``r lambda``), and the step holds ``q`` at the limit as it holds any contact's gap at zero,
to the solver's tolerance.  A limit enters the step as the scene's other contacts do,
within the margin plus the step's look-ahead (``margin / r`` radians for a hinge at rest); a joint
that another contact's impulse jerks past its limit within one step, its stop not yet in the step's
problem, is pushed back by the next steps' position correction (a larger ``r`` narrows the margin in
angle and lets that happen more often).

The stops are collision shapes with no collision bits (``contype = conaffinity = 0``: they meet no
other shape) and one explicit pair each (:class:`~sparsedyn.model.Geometry`'s ``pairs``), so a scene
checks them whatever its ``self_collision`` (:mod:`~sparsedyn.contact.scene_pairs`).  The boxes are
cut so the sphere never reaches them from within the joint's range: a hinge whose range leaves an arc
``f`` free has boxes of depth ``r sin(min(f, pi/2)) / 2`` and a sphere of a fifth of that.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..model import Geometry, Model
from ..model.spatial import axis_rotation, from_pose

__all__ = ["with_joint_stops", "STOP_KINDS", "SPAN"]

#: The joint types whose limits :func:`with_joint_stops` enforces.
STOP_KINDS = ("revolute", "prismatic")
#: A hinge's stop box spans ``SPAN r`` across and along the axis about the sphere's path: small, since a
#: body's shapes set how far its pairs look ahead (:func:`~sparsedyn.contact.look_ahead.body_reach`),
#: and wide enough that the sphere meets the face while the joint is within 36 degrees of its limit.
SPAN = 0.4


def with_joint_stops(model, joints=None, radius=0.1) -> Model:
    """A copy of ``model`` whose hinges and slides with finite limits carry stops (module docstring):
    collision shapes that a :class:`~sparsedyn.Scene` of it pairs so its steps hold each joint within
    ``[model.lower, model.upper]``.

    ``joints``: names of the joints to stop (default: every revolute or prismatic joint with a finite
    limit; the limits of other joints, such as the composite joint of an MJCF body with several
    joints, or of a hinge whose range is a full turn or more, are warned of and not held);
    ``radius`` [m]: ``r``, the distance of a hinge's stop from its axis (the step's tolerance and
    margin on the joint's angle are theirs in metres divided by ``r``).  A named joint that cannot be
    stopped, or without a finite limit, is refused.  The stops are named ``"<joint>/stop"`` (the sphere),
    ``"<joint>/lower"`` and ``"<joint>/upper"`` (the boxes)."""
    if not isinstance(model, Model):
        raise TypeError(f"with_joint_stops: model must be a sparsedyn Model, got {type(model).__name__}")
    if isinstance(radius, bool) or not isinstance(radius, (int, float, np.integer, np.floating)) \
            or not math.isfinite(radius) or radius <= 0:
        raise ValueError(f"with_joint_stops: radius must be a finite number > 0 [m], got {radius!r}")
    chosen = _chosen(model, joints)
    taken = {g.name for g in model.geometries}
    stops = []
    for i in chosen:
        made = _stops_of(model, i, float(radius))
        for g in made:
            if g.name in taken:
                raise ValueError(f"with_joint_stops: model {model.name!r} already has a geometry named {g.name!r}")
        stops += made
    return model.with_geometry(*stops)


def _chosen(model, joints):
    """Indices of the joints to stop (``joints`` named, or every stoppable one, the limits of the
    others warned of)."""
    def why_not(i):
        """Why joint ``i``'s limits cannot be held by a stop ('' where they can, None: it has none)."""
        lo, hi = model.lower[model.q_slice(i)], model.upper[model.q_slice(i)]
        if not (np.isfinite(lo).any() or np.isfinite(hi).any()):
            return None
        kind = model.joints[i].type
        if kind not in STOP_KINDS:
            return (f"it is a {kind} joint (a stop holds one hinge or slide between two bodies: load an MJCF file with "
                    f"composite_joints=False for one body per hinge)")
        if kind == "revolute" and hi[0] - lo[0] >= 2 * math.pi:
            return f"its range, {hi[0] - lo[0]:g} rad, is a full turn or more (a stop sees the angle modulo a turn)"
        return ""

    if joints is None:
        why = [why_not(i) for i in range(model.nbodies)]
        left = [f"{model.joint_names[i]!r}: {w}" for i, w in enumerate(why) if w]
        if left:
            warnings.warn(f"with_joint_stops: the limits of {len(left)} joint(s) of model {model.name!r} are not held; "
                          + "; ".join(left), UserWarning, stacklevel=3)
        return [i for i, w in enumerate(why) if w == ""]
    out = []
    for i in model.joint_indices(joints, "with_joint_stops"):
        name = model.joint_names[i]
        why = why_not(i)
        if why is None:
            raise ValueError(f"with_joint_stops: joint {name!r} ({model.joints[i].type}) has no finite limit to stop")
        if why:
            raise ValueError(f"with_joint_stops: joint {name!r} cannot be stopped: {why}")
        out.append(i)
    return out


def _stops_of(model, i, r):
    """The sphere and boxes (:class:`Geometry`) of joint ``i``'s stops, in the child's and parent's frames."""
    joint, name = model.joints[i], model.joint_names[i]
    k = model.q_start[i]
    lo, hi = float(model.lower[k]), float(model.upper[k])
    a = np.asarray(joint.a, float)
    a = a / np.linalg.norm(a)
    u = _normal_to(a)
    RJ, pJ = np.asarray(model.Xtree[i].E, float).T, np.asarray(model.Xtree[i].r, float)    # joint frame in parent
    if joint.type == "revolute":
        free = 2 * math.pi - (hi - lo) if math.isfinite(lo) and math.isfinite(hi) else math.pi
        h = r * math.sin(min(free, math.pi / 2))
        d, rho = h / 2, h / 10
        centre, boxes = r * u, []
        for limit, side in ((lo, -1.0), (hi, 1.0)):
            if math.isfinite(limit):
                uL = axis_rotation(a, limit).T @ u                  # (E = R^T)
                tL = np.cross(a, uL)
                R = np.column_stack([uL, tL, a])
                boxes.append((R, r * uL + side * (rho + d / 2) * tL, (SPAN * r, d, SPAN * r)))
    else:
        span = max(hi - lo, 0.0) if math.isfinite(lo) and math.isfinite(hi) else 0.0
        d, rho = max(0.1, span), 0.02
        centre, boxes = np.zeros(3), []
        R = np.column_stack([u, np.cross(a, u), a])
        for limit, side in ((lo, -1.0), (hi, 1.0)):
            if math.isfinite(limit):
                boxes.append((R, (limit + side * (rho + d / 2)) * a, (0.1, 0.1, d)))
    parent = int(model.parent[i])
    plink = model.body_names[parent] if parent >= 0 else model.root_name
    names = [f"{name}/{side}" for side, limit in (("lower", lo), ("upper", hi)) if math.isfinite(limit)]
    sphere = Geometry(f"{name}/stop", i, from_pose(np.eye(3), centre), "sphere", (rho,), "collision",
                      link=model.body_names[i], contype=0, conaffinity=0, pairs=tuple((n, 0.0) for n in names),
                      condim=1)
    out = [sphere]
    for n, (R, p, size) in zip(names, boxes):
        out.append(Geometry(n, parent, from_pose(RJ @ R, pJ + RJ @ p), "box", size, "collision", link=plink,
                            contype=0, conaffinity=0, condim=1))
    return out


def _normal_to(a):
    """A unit vector normal to the unit vector ``a`` (the coordinate axis least along it, made normal)."""
    e = np.eye(3)[int(np.argmin(np.abs(a)))]
    u = e - (e @ a) * a
    return u / np.linalg.norm(u)
