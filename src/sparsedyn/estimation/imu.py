"""The floating base's state from an IMU.

An estimation problem on a floating-base robot needs the base's part of the
state: its orientation in ``q`` (a unit quaternion, world from base), its
velocity ``[omega; v]`` and, when the base acceleration is a known quantity (the
usual case with an IMU), its acceleration ``[domega; dv]``, all in the base
body's frame, as the free joint defines them.  An IMU gives none of these
directly: it gives, in its own axes, at a point of some body,

* the orientation of its axes in the world (a unit quaternion ``[x, y, z, w]``,
  from the IMU's attitude filter),
* the angular velocity (gyroscope, rad/s),
* the proper acceleration, i.e. the classical acceleration of its origin minus
  gravity (accelerometer, m/s^2; an IMU at rest reads ``+9.81`` upwards).

:func:`imu_base_state` turns these, with the joint part of ``q, v, a``, into the
base part: orientation through the kinematic chain from the base to the IMU,
angular velocity and acceleration by subtracting what the joints contribute, and
the base acceleration by solving the (affine, 6 x 6) relation between the base
acceleration and the IMU's readings.  An IMU does not measure angular
acceleration: pass the derivative of the gyroscope signal (e.g.
``np.gradient(omega, dt, axis=0)``), or 0 for slow rotations, knowingly.

Neither the base position nor its linear velocity is seen by an IMU.  Neither
changes the joint torques, joint wrenches or contact wrenches an estimator
returns (a uniform translation of the whole robot changes no classical
acceleration), so they default to zero; only the body spatial accelerations
``a_i`` in the estimate refer to them.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..algorithms.kinematics import frame_placement, frame_velocity
from ..algorithms.proper_acceleration import frame_proper_acceleration
from ..model import ModelError
from ..model.spatial import quat_to_rot, rot_to_quat

__all__ = ["imu_base_state", "frame_proper_acceleration"]


def _base(model):
    if model.nbodies == 0 or model.joints[0].type != "free" or model.parent[0] != -1:
        raise ModelError(f"imu_base_state: model {model.name!r} has no floating base (its first joint must be "
                         f"a free joint on the world; load a URDF with floating_base=True)")
    return model.q_slice(0), model.v_slice(0)


def _checked_inputs(model, q, v, a, orientation, angular_velocity, proper_acceleration, angular_acceleration,
                    rotation):
    """:func:`imu_base_state`'s inputs checked: ``(q, v, a, quat, norm, readings, R_fs, shape)``, the
    state as float copies broadcast to the batch ``shape``, the orientation and its norm, the
    readings ``{name: (..., 3)}``, the IMU axes in the frame's ``R_fs``."""
    q = np.array(q, float)
    v = np.array(v, float)
    a = np.array(a, float)
    for name, x, n in (("q", q, model.nq), ("v", v, model.nv), ("a", a, model.nv)):
        if x.ndim == 0 or x.shape[-1] != n:
            raise ValueError(f"imu_base_state: {name}: expected shape (..., {n}), got {x.shape}")
    quat = np.asarray(orientation, float)
    if quat.shape[-1:] != (4,):
        raise ValueError(f"imu_base_state: orientation: expected a quaternion [x, y, z, w] of shape (..., 4), "
                         f"got {quat.shape}")
    norm = np.linalg.norm(quat, axis=-1)
    if np.any(~np.isfinite(norm)) or np.any(np.abs(norm - 1) > 1e-6):
        raise ValueError(f"imu_base_state: orientation: expected a unit quaternion, got norm(s) "
                         f"{np.unique(np.round(norm, 6))[:5]}")
    readings = {}
    for name, x in (("angular_velocity", angular_velocity), ("proper_acceleration", proper_acceleration),
                    ("angular_acceleration", angular_acceleration)):
        x = np.asarray(x, float)
        if x.ndim == 0:
            x = np.broadcast_to(x, (3,))
        if x.shape[-1:] != (3,) or not np.all(np.isfinite(x)):
            raise ValueError(f"imu_base_state: {name}: expected finite values of shape (..., 3), got {x.shape}")
        readings[name] = x
    R_fs = np.eye(3) if rotation is None else np.asarray(rotation, float)
    if R_fs.shape != (3, 3) or np.abs(R_fs.T @ R_fs - np.eye(3)).max() > 1e-9:
        raise ValueError("imu_base_state: rotation: expected a 3 x 3 rotation matrix (IMU axes in frame axes)")
    shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], a.shape[:-1], quat.shape[:-1],
                                *(x.shape[:-1] for x in readings.values()))
    q, v, a = (np.array(np.broadcast_to(x, shape + x.shape[-1:])) for x in (q, v, a))
    return q, v, a, quat, norm, readings, R_fs, shape


def imu_base_state(model, frame, q, v, a, orientation, angular_velocity, proper_acceleration,
                   angular_acceleration, rotation=None, base_position=None, base_linear_velocity=None):
    """``(q, v, a)`` with the floating base's part filled in from IMU readings.

    ``model``: a model whose first joint is a free joint (floating base).  ``frame``: the
    name of the model frame the IMU is attached to (on any body).  ``q`` (..., nq), ``v``,
    ``a`` (..., nv): the state, whose joint part is used (from encoders; ``a``: the joint
    accelerations) and whose base part is ignored and replaced.  IMU readings, in the IMU's
    axes: ``orientation`` (..., 4) unit quaternion ``[x, y, z, w]`` of the IMU axes in the
    world (world from IMU), ``angular_velocity`` (..., 3) [rad/s], ``proper_acceleration``
    (..., 3) [m/s^2] (accelerometer: classical acceleration minus gravity), and
    ``angular_acceleration`` (..., 3) [rad/s^2] (not measured by an IMU: the derivative of
    the gyroscope signal, or 0 knowingly).  ``rotation`` (3, 3): the IMU axes in the frame's
    axes (default: the frame's axes).  ``base_position`` (..., 3) and ``base_linear_velocity``
    (..., 3, base axes): not seen by an IMU and without effect on estimated torques and
    wrenches (default 0; see the module docstring).

    Returns ``(q, v, a)`` (copies): base quaternion world from base, base ``[omega; v]`` and
    ``[domega; dv]`` in the base frame (the free joint's convention).  Then, for an
    :class:`~sparsedyn.estimation.EstimationProblem` ``prob`` with the base acceleration known::

        q, v, a = imu_base_state(model, "imu_link", q_enc, v_enc, a_enc, quat, gyro, acc, dgyro)
        y = prob.pack(qdd=prob.known_accelerations(a), **force_torque_readings)
        e = prob.analyze().solve(q, v, y)
    """
    _checks.model_first("imu_base_state", model, "model, frame, q, v")
    qs, vs = _base(model)
    q, v, a, quat, norm, readings, R_fs, shape = _checked_inputs(
        model, q, v, a, orientation, angular_velocity, proper_acceleration, angular_acceleration, rotation)
    to_frame = lambda x: x @ R_fs.T                  # noqa: E731  IMU axes -> frame axes (row vectors)

    # orientation: world from IMU = world from base . base from frame . frame from IMU
    q[..., qs.start:qs.start + 3] = 0.0
    q[..., qs.start + 3:qs.stop] = (0.0, 0.0, 0.0, 1.0)
    R_bf, _ = frame_placement(model, q, frame)      # with the base at the world origin
    R_wf = quat_to_rot(quat / norm[..., None]) @ R_fs.T
    R_wb = R_wf @ np.swapaxes(R_bf, -1, -2)
    q[..., qs.start + 3:qs.stop] = rot_to_quat(R_wb)
    if base_position is not None:
        q[..., qs.start:qs.start + 3] = np.asarray(base_position, float)

    # angular velocity: the frame's = the base's (rotated) + what the joints add
    v[..., vs] = 0.0
    w_rel = frame_velocity(model, q, v, frame, "local")[..., :3]
    w_f = to_frame(readings["angular_velocity"])
    v[..., vs.start:vs.start + 3] = ((R_bf @ (w_f - w_rel)[..., None])[..., 0])
    if base_linear_velocity is not None:
        v[..., vs.start + 3:vs.stop] = np.asarray(base_linear_velocity, float)

    # acceleration: the readings are affine in the base acceleration; solve the 6 x 6 system
    a[..., vs] = 0.0
    trial = np.broadcast_to(a[..., None, :], shape + (7, model.nv)).copy()
    trial[..., 1:, vs] = np.eye(6)
    qq, vv = q[..., None, :], v[..., None, :]
    _, dw, acc = frame_proper_acceleration(model, qq, vv, trial, frame)
    F = np.concatenate([dw, acc], -1)                # (..., 7, 6)
    M = np.swapaxes(F[..., 1:, :] - F[..., :1, :], -1, -2)
    target = np.concatenate([to_frame(readings["angular_acceleration"]),
                             to_frame(readings["proper_acceleration"])], -1)
    target = np.broadcast_to(target, shape + (6,))
    a[..., vs] = np.linalg.solve(M, (target - F[..., 0, :])[..., None])[..., 0]
    return q, v, a
