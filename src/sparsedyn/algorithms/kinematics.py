"""Forward kinematics, body velocities and frame Jacobians.

Shapes: ``q`` (..., nq), ``v`` (..., nv).  Poses are ``(R, p)``: the orientation
(rotation matrix mapping body to world coordinates) and the origin of a body or
frame in the world.  Spatial velocities are angular-first ``[omega; v]``.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.joints import jcalc
from .. import backend as bk
from ..model.spatial import (Transform, apply_motion, apply_motion_inv, compose, cross3, cross_motion, identity, mv,
                       pose)

__all__ = ["joint_transforms", "world_transforms", "frame_world_transform", "root_transforms", "forward_kinematics",
           "frame_placement", "frame_placements", "geometry_placements", "body_velocities", "frame_velocity",
           "frame_jacobian", "REFERENCES", "body_accelerations", "frame_acceleration", "frame_classical_acceleration",
           "frame_jacobian_dot_v", "velocity_products"]

REFERENCES = ("local", "world", "local_world_aligned")


def joint_transforms(model, q):
    """``Xup[i] = i_X_parent(i)`` and ``S[i]`` for every body (no checks; kernel use)."""
    Xup, S = [], []
    for i in range(model.nbodies):
        XJ, Si = jcalc(model.joints[i], q[..., model.q_slice(i)])
        Xup.append(compose(XJ, model.Xtree[i]))
        S.append(Si)
    return Xup, S


def world_transforms(model, Xup):
    """``X0[i] = i_X_world`` from the parent-relative transforms (no checks; kernel use)."""
    X0 = []
    for i in range(model.nbodies):
        p = model.parent[i]
        X0.append(Xup[i] if p < 0 else compose(Xup[i], X0[p]))
    return X0




def root_transforms(model, Xup):
    """``Xr[i] = i_X_root``: body ``i``'s coordinates from those of the root body of its tree
    (the body of ``i``'s ancestors attached to the world; the identity for a root itself).

    Kernels that gather a whole tree in one coordinate frame use the root body's frame
    rather than the world's: the transforms then do not depend on the root joint's
    coordinates, and the root's own quantities (for a floating base, its six unit
    motion-subspace columns and its inertia) keep their structural zeros (no checks; kernel use).
    """
    Xr = []
    for i in range(model.nbodies):
        p = model.parent[i]
        Xr.append(identity() if p < 0 else Xup[i] if model.parent[p] < 0 else compose(Xup[i], Xr[p]))
    return Xr


@kernel(inputs={"q": ("nq",)}, outputs={"R": ("nb", 3, 3), "p": ("nb", 3)})
def forward_kinematics(model, q):
    """World poses of all bodies.

    Returns ``(R, p)`` with ``R`` (..., NB, 3, 3) and ``p`` (..., NB, 3).
    """
    q = _checks.configuration(model, q)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    if not X0:
        return np.zeros(q.shape[:-1] + (0, 3, 3)), np.zeros(q.shape[:-1] + (0, 3))
    shape = np.broadcast_shapes(*(X.E.shape[:-2] for X in X0), q.shape[:-1])
    R = np.stack([np.broadcast_to(pose(X)[0], shape + (3, 3)) for X in X0], -3)
    p = np.stack([np.broadcast_to(X.r, shape + (3,)) for X in X0], -2)
    return R, p


def frame_world_transform(model, X0, k):
    """``frame_X_world`` of frame ``k`` from the bodies' ``X0`` (no checks; kernel use)."""
    f = model.frames[k]
    return f.X if f.body < 0 else compose(f.X, X0[f.body])        # a world frame: frame_X_world itself


@kernel(inputs={"q": ("nq",)}, static=("frame",), outputs={"R": (3, 3), "p": (3,)})
def frame_placement(model, q, frame):
    """World pose ``(R, p)`` of one frame (name or index): (..., 3, 3), (..., 3)."""
    q = _checks.configuration(model, q)
    k = model.frame(frame)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    R, p = pose(frame_world_transform(model, X0, k))
    shape = q.shape[:-1]
    return np.broadcast_to(R, shape + (3, 3)), np.broadcast_to(p, shape + (3,))


@kernel(inputs={"q": ("nq",)}, outputs={"R": ("nf", 3, 3), "p": ("nf", 3)})
def frame_placements(model, q):
    """World poses of all frames: ``R`` (..., NF, 3, 3), ``p`` (..., NF, 3)."""
    q = _checks.configuration(model, q)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    shape = q.shape[:-1]
    Rs, ps = [], []
    for k in range(len(model.frames)):
        R, p = pose(frame_world_transform(model, X0, k))
        Rs.append(np.broadcast_to(R, shape + (3, 3)))
        ps.append(np.broadcast_to(p, shape + (3,)))
    return np.stack(Rs, -3), np.stack(ps, -2)


def _geometry_count(model, kind="visual"):
    return len(model.geometry(kind))


@kernel(inputs={"q": ("nq",)}, static=("kind",), outputs={"R": (_geometry_count, 3, 3), "p": (_geometry_count, 3)})
def geometry_placements(model, q, kind="visual"):
    """World poses of the model's shapes of ``kind`` (``"visual"`` or ``"collision"``, see
    :class:`~sparsedyn.model.Geometry`), in file order: ``R`` (..., NG, 3, 3), ``p`` (..., NG, 3),
    as :func:`frame_placements` returns them (Pinocchio's ``oMg`` after ``updateGeometryPlacements``).
    A shape on the world (body -1) keeps its fixed pose.
    """
    q = _checks.configuration(model, q)
    geoms = model.geometry(kind)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    shape = q.shape[:-1]
    Rs, ps = [], []
    for g in geoms:
        R, p = pose(g.X if g.body < 0 else compose(g.X, X0[g.body]))
        Rs.append(np.broadcast_to(R, shape + (3, 3)))
        ps.append(np.broadcast_to(p, shape + (3,)))
    if not geoms:
        return np.zeros(shape + (0, 3, 3), dtype=q.dtype), np.zeros(shape + (0, 3), dtype=q.dtype)
    return np.stack(Rs, -3), np.stack(ps, -2)


def velocity_pass(model, Xup, S, v):
    """Featherstone's forward velocity recursion (RBDA Table 5.1): ``(vb, vJ)``, lists by body of
    the body velocities ``v_i = Xup_i v_parent + vJ_i`` and the joint velocities ``vJ_i = S_i v``
    (..., 6), in body coordinates; ``Xup``, ``S`` from :func:`joint_transforms`.  The one forward
    velocity pass of the library (RNEA, ABA, kinematics, the sparse layer and estimation use it)."""
    vb, vJ = [], []
    for i in range(model.nbodies):
        vJ.append(mv(S[i], v[..., model.v_slice(i)]))
        p = model.parent[i]
        vb.append(vJ[i] if p < 0 else apply_motion(Xup[i], vb[p]) + vJ[i])
    return vb, vJ


def velocity_products(model, q, v, vb, vJ):
    """``c[i] = v_i x vJ_i + cJ_i`` (..., 6) by body, the acceleration a joint's motion makes at zero
    ``qdd`` (RBDA Table 5.1's ``c_i``): ``cJ_i = Sdot_i qd_i`` (:meth:`~sparsedyn.Joint.bias`) for a
    joint whose ``S`` depends on ``q``, the first term for a body with a parent; ``None`` where both
    are structural zeros.  ``vb``, ``vJ`` from :func:`velocity_pass` (no checks; kernel use)."""
    c = []
    for i, joint in enumerate(model.joints):
        ci = None if model.parent[i] < 0 else cross_motion(vb[i], vJ[i])
        if not joint.constant_subspace:
            cJ = joint.bias(q[..., model.q_slice(i)], v[..., model.v_slice(i)])
            ci = cJ if ci is None else ci + cJ
        c.append(ci)
    return c


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"v_bodies": ("nb", 6)})
def body_velocities(model, q, v):
    """Spatial velocity of every body in its own frame, (..., NB, 6), ``[omega; v]``."""
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1))
    Xup, S = joint_transforms(model, q)
    vb, _ = velocity_pass(model, Xup, S, v)
    if not vb:                                    # no moving body
        return np.zeros(shape + (0, 6), dtype=np.result_type(q, v))
    return np.stack([np.broadcast_to(x, shape + (6,)) for x in vb], -2)


def _express(model, X0, k, Jloc, reference):
    """Re-express a local (frame-origin, frame-axes) motion quantity (..., 6, n)."""
    if reference == "local":
        return Jloc
    Xf = frame_world_transform(model, X0, k)   # frame_X_world
    R = np.swapaxes(Xf.E, -1, -2)[..., None, :, :]
    Jt = np.swapaxes(Jloc, -1, -2)               # (..., n, 6)
    w = (R @ Jt[..., :3, None])[..., 0]
    lin = (R @ Jt[..., 3:, None])[..., 0]
    if reference == "world":
        # Velocity of the body point passing through the world origin: v_O = v_p + w x (0 - p) = v_p + p x w.
        lin = lin + cross3(np.broadcast_to(Xf.r[..., None, :], w.shape), w)
    out = np.concatenate([w, lin], -1)
    return np.swapaxes(out, -1, -2)


def _check_reference(reference):
    """The canonical name (one of :data:`REFERENCES`) of ``reference``: a string in any case
    (``"LOCAL_WORLD_ALIGNED"``) or an enumeration member with such a ``name``, such as Pinocchio's
    ``pin.ReferenceFrame.LOCAL_WORLD_ALIGNED`` (read by its name: Pinocchio is not imported)."""
    name = reference if isinstance(reference, str) else getattr(reference, "name", None)
    canonical = name.lower() if isinstance(name, str) else None
    if canonical not in REFERENCES:
        raise ValueError(f"reference: expected one of {REFERENCES} (any case) or Pinocchio's ReferenceFrame "
                         f"(WORLD, LOCAL, LOCAL_WORLD_ALIGNED), got {reference!r}")
    return canonical


@kernel(inputs={"q": ("nq",)}, static=("frame", "reference"), outputs={"J": (6, "nv")})
def frame_jacobian(model, q, frame, reference="local"):
    """Jacobian (..., 6, nv) of a frame's spatial velocity ``[omega; v]``.

    ``reference``:

    * ``"local"``: velocity of the frame origin, in frame axes;
    * ``"world"``: spatial velocity at the world origin, world axes (Pinocchio ``WORLD``);
    * ``"local_world_aligned"``: velocity of the frame origin, world axes.

    in any case (``"LOCAL_WORLD_ALIGNED"``), or as Pinocchio's ``pin.ReferenceFrame`` member.

    >>> import numpy as np, sparsedyn as sd
    >>> model = sd.humanoid()
    >>> q = model.random_configuration(0)
    >>> v = np.random.default_rng(0).normal(size=model.nv)
    >>> J = sd.frame_jacobian(model, q, "r_hand", "local_world_aligned")
    >>> J.shape
    (6, 35)
    >>> bool(np.allclose(J @ v, sd.frame_velocity(model, q, v, "r_hand", "local_world_aligned")))
    True
    """
    reference = _check_reference(reference)
    q = _checks.configuration(model, q)
    k = model.frame(frame)
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    Xf = frame_world_transform(model, X0, k)          # frame_X_world
    shape = q.shape[:-1]
    cols = {}
    for j in model.ancestors(model.frames[k].body):
        # Motion subspace of joint j in world coordinates (at the world origin): world_X_j S_j.
        X = Transform(X0[j].E[..., None, :, :], X0[j].r[..., None, :])
        c = apply_motion_inv(X, np.swapaxes(S[j], -1, -2))          # (..., nj, 6)
        if reference == "local_world_aligned":
            # Velocity of the point at the frame origin p: v_p = v_O + w x p.
            c = np.concatenate([c[..., :3], c[..., 3:] - cross3(np.broadcast_to(Xf.r[..., None, :], c[..., :3].shape),
                                                                 c[..., :3])], -1)
        elif reference == "local":
            c = apply_motion(Transform(Xf.E[..., None, :, :], Xf.r[..., None, :]), c)
        cols[j] = np.swapaxes(np.broadcast_to(c, shape + c.shape[-2:]), -1, -2)
    J = np.zeros(shape + (6, model.nv), dtype=q.dtype)
    for j, c in cols.items():
        J[..., :, model.v_slice(j)] = c
    return J


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, static=("frame", "reference"), outputs={"v_frame": (6,)})
def frame_velocity(model, q, v, frame, reference="local"):
    """Spatial velocity (..., 6) of a frame, in the same ``reference`` choices as :func:`frame_jacobian`."""
    reference = _check_reference(reference)
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    k = model.frame(frame)
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    vb, _ = velocity_pass(model, Xup, S, v)
    f = model.frames[k]
    vf = apply_motion(f.X, vb[f.body]) if f.body >= 0 else np.zeros(q.shape[:-1] + (6,), q.dtype)
    return _express(model, X0, k, vf[..., :, None], reference)[..., 0]


# --- accelerations ------------------------------------------------------------------

def body_accelerations(model, Xup, S, v, a, a_root=None, q=None):
    """``(vb, ab)``: spatial velocity and acceleration of every body in its own frame (lists by
    body), RBDA Table 5.1's forward pass: ``a_i = Xup_i a_parent + S_i a + v_i x S_i v + cJ_i``.

    ``a_root`` (..., 6): the acceleration of the world seen by the roots (``-[0; g]`` makes
    gravity a fictitious base acceleration, as RNEA does); ``None`` for zero.  ``q``: the
    configuration, needed where a joint's ``S`` depends on it (``cJ``) (no checks; kernel use).
    """
    vb, vJ = velocity_pass(model, Xup, S, v)
    if q is None and not all(j.constant_subspace for j in model.joints):
        raise ValueError("body_accelerations: q is needed for joints whose motion subspace depends on q")
    c = velocity_products(model, q, v, vb, vJ)
    ab = []
    for i in range(model.nbodies):
        aJ = mv(S[i], a[..., model.v_slice(i)])
        p = model.parent[i]
        if p < 0:
            ab.append(aJ if a_root is None else apply_motion(Xup[i], a_root) + aJ)
        else:
            ab.append(apply_motion(Xup[i], ab[p]) + aJ)
        if c[i] is not None:
            ab[i] = ab[i] + c[i]
    return vb, ab


def _frame_motion(model, q, v, a, frame, reference):
    """``(v_frame, a_frame)`` (..., 6) of a frame, both spatial, expressed as ``reference`` says."""
    reference = _check_reference(reference)
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    a = _checks.vector(model, "a", a, model.nv, "nv joint accelerations")
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1), a=(a, 1))
    k = model.frame(frame)
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    vb, ab = body_accelerations(model, Xup, S, v, a, q=q)
    f = model.frames[k]
    # The frame is fixed on its body: its spatial velocity and acceleration are the body's, moved to it.
    if f.body < 0:                                      # a world frame does not move
        m = np.zeros(shape + (6, 2), q.dtype)
    else:
        m = np.stack([apply_motion(f.X, vb[f.body]), apply_motion(f.X, ab[f.body])], -1)
    out = _express(model, X0, k, m, reference)
    return np.broadcast_to(out[..., 0], shape + (6,)), np.broadcast_to(out[..., 1], shape + (6,))


def _classical(vf, af):
    """Classical acceleration ``[omega_dot; a_p]`` of the point ``p`` whose spatial velocity is ``vf``:
    ``a_p = a_lin + omega x v_p`` (the spatial acceleration's linear part is ``d/dt v`` at a fixed point)."""
    return np.concatenate([af[..., :3], af[..., 3:] + cross3(vf[..., :3], vf[..., 3:])], -1)


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, static=("frame", "reference"), outputs={"a_frame": (6,)})
def frame_acceleration(model, q, v, a, frame, reference="local"):
    """Spatial acceleration (..., 6) ``[omega_dot; a_lin]`` of a frame (Pinocchio's ``getFrameAcceleration``).

    ``reference`` as in :func:`frame_jacobian`: ``"local"`` (at the frame origin, frame axes),
    ``"world"`` (at the world origin, world axes), ``"local_world_aligned"`` (at the frame origin,
    world axes).  The spatial acceleration is a motion vector (Featherstone, *Rigid Body Dynamics
    Algorithms*, 2008, section 2.11): its linear part is the rate of change of the velocity field at a
    point fixed in space, not the acceleration of a body point; for that see
    :func:`frame_classical_acceleration`.  Gravity is not included.
    """
    return _frame_motion(model, q, v, a, frame, reference)[1]


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, static=("frame", "reference"), outputs={"a_frame": (6,)})
def frame_classical_acceleration(model, q, v, a, frame, reference="local"):
    """Classical acceleration (..., 6) ``[omega_dot; a_p]`` (Pinocchio's ``getFrameClassicalAcceleration``).

    ``a_p`` is the acceleration of the body point at the reference point (the frame origin for
    ``"local"`` and ``"local_world_aligned"``, the world origin for ``"world"``), in the reference's
    axes: :func:`frame_acceleration` plus ``omega x v_p``.  Gravity is not included.
    """
    vf, af = _frame_motion(model, q, v, a, frame, reference)
    return _classical(vf, af)


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, static=("frame", "reference"), outputs={"Jdot_v": (6,)})
def frame_jacobian_dot_v(model, q, v, frame, reference="local"):
    """``Jdot v`` (..., 6): the time derivative of :func:`frame_jacobian` times ``v``, so that
    ``d/dt (J v) = J a + Jdot v`` (the bias acceleration of the frame).

    ``J v`` is a spatial velocity for ``"local"`` and ``"world"``, whose derivative is the spatial
    acceleration: ``Jdot v = frame_acceleration(q, v, 0)``.  For ``"local_world_aligned"`` ``J v`` is
    ``[omega; v_p]`` of the frame origin in world axes, whose derivative is the classical
    acceleration: ``Jdot v = frame_classical_acceleration(q, v, 0)`` (as Pinocchio's
    ``getFrameJacobianTimeVariation`` times ``v``).
    """
    reference = _check_reference(reference)
    v = _checks.velocity(model, v)
    vf, af = _frame_motion(model, q, v, bk.zeros(v.shape, like=v), frame, reference)
    return _classical(vf, af) if reference == "local_world_aligned" else af
