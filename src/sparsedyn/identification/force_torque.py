"""F/T sensor regressors: the wrench a :class:`~sparsedyn.model.sensors.ForceTorque` reads is linear in the
inertial parameters (see :mod:`sparsedyn.identification`)."""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..algorithms.regressor import NPARAM, joint_wrench_regressor
from ..model.sensors import ForceTorque
from ..model.spatial import Transform, force_matrix

__all__ = ["force_torque_regressor", "force_torque_parameters", "fixed_joint_parameters", "inertia_parameters",
           "model_parameters", "FT_CHUNK"]


def _sensor(model, sensor):
    if isinstance(sensor, str):
        sensor = model.sensor(sensor)
    if not isinstance(sensor, ForceTorque):
        raise TypeError(f"sensor: expected a ForceTorque sensor (or the name of one on model {model.name!r}), "
                        f"got {sensor!r}")
    return sensor


def _fixed(model, sensor):
    return next((f for f in model.fixed_joints if f.name == sensor.joint), None)


def _pieces(model, sensors):
    """Names of the fixed joints carrying a sensor (each adds a child-side piece: 10 parameters)."""
    out = []
    for s in sensors:
        fj = _fixed(model, s)
        if fj is not None and fj.name not in out:
            out.append(fj.name)
    return tuple(out)


def inertia_parameters(I6):
    """The 10 parameters (..., 10) of spatial inertias (..., 6, 6) (order of
    :meth:`sparsedyn.Model.inertial_parameters`)."""
    I = np.asarray(I6, float)
    return np.stack([I[..., 5, 5], I[..., 2, 4], I[..., 0, 5], I[..., 1, 3], I[..., 0, 0], I[..., 0, 1],
                     I[..., 1, 1], I[..., 0, 2], I[..., 1, 2], I[..., 2, 2]], -1)


def fixed_joint_parameters(model, joint):
    """The 10 parameters of the links on the child side of the merged fixed joint ``joint`` (part of its
    body's parameters; recorded by the URDF loader as ``FixedJoint.inertia``)."""
    return inertia_parameters(model.fixed_joint(joint).inertia)


def _sensor_joint(model, sensor):
    """Index of the moving joint whose wrench ``sensor`` reads: its own, or the one of the body its fixed
    joint was merged into."""
    fj = _fixed(model, sensor)
    if fj is not None:
        return fj.body
    try:
        return model.joint(sensor.joint)
    except KeyError as e:
        raise KeyError(f"sensor {sensor.name!r}: {e.args[0]}") from None


def _sensor_rows(model, sensor, W, pieces):
    """Rows (..., 6, 10 NB + 10 len(pieces)) of a :class:`ForceTorque` from ``W`` (..., 6, 10 NB), the
    joint-wrench regressor of the joint :func:`_sensor_joint` names.

    Moving joint ``i``: ``y = F f_i`` with ``F`` the constant sensor map.  Fixed joint merged into body
    ``B`` (see :class:`~sparsedyn.model.sensors.ForceTorque`): the child-side piece ``P`` (parameters
    ``pi_P``) moves with ``B``, whose Newton-Euler regressor is ``A_B`` (the diagonal block of ``W``);
    with no moving body on ``P``, ``y = F A_B pi_P``; with every moving child of ``B`` on ``P``,
    ``y = F (f_B - A_B (pi_B - pi_P))``.  No external wrench may act on ``P`` and beyond.
    """
    who = f"sensor {sensor.name!r}"
    sign = 1.0 if sensor.direction == "parent_to_child" else -1.0
    nb = model.nbodies
    rows = np.zeros(W.shape[:-2] + (6, NPARAM * (nb + len(pieces))))
    fj = _fixed(model, sensor)
    if fj is None:
        i = _sensor_joint(model, sensor)
        X = sensor.measurement_frame(model, who, i, Transform(np.eye(3), np.zeros(3)),
                                     f"the child body of joint {sensor.joint!r}")
        rows[..., :NPARAM * nb] = sign * force_matrix(X) @ W
        return rows
    b = fj.body
    X = sensor.measurement_frame(model, who, b, fj.X, f"the body fixed joint {sensor.joint!r} was merged into")
    F = sign * force_matrix(X)
    other = [c for c in range(b + 1, nb) if model.parent[c] == b and c not in fj.children]
    if fj.children and other:
        raise ValueError(f"{who}: fixed joint {sensor.joint!r} has moving bodies on both sides inside body "
                         f"{model.body_names[b]!r}; the wrench across it is not a function of its body's and the "
                         f"child side's parameters alone")
    blk = slice(NPARAM * b, NPARAM * (b + 1))
    if fj.children:                                  # every moving child of B beyond the sensor
        rows[..., :NPARAM * nb] = F @ W
        rows[..., blk] = 0.0                         # f_B - A_B pi_B: the children's wrenches only
    k = nb + pieces.index(fj.name)
    rows[..., NPARAM * k:NPARAM * (k + 1)] = F @ W[..., blk]
    return rows


#: States per chunk of :func:`force_torque_regressor` (its working memory beyond the result is about
#: ``FT_CHUNK * 6 * 10 NB * 8`` bytes: 15 MB for 32 bodies).
FT_CHUNK = 1000


def force_torque_regressor(model, q, v, a, sensor, gravity=None):
    """Regressor ``Y_s`` of a 6-axis F/T sensor (:class:`sparsedyn.model.sensors.ForceTorque`, or its name on
    ``model``): what the sensor reads at state ``(q, v, a)`` when no external wrench acts beyond it is
    ``Y_s @ force_torque_parameters(model, sensor)``:

    * on a moving joint: ``Y_s`` (..., 6, 10 NB), the parameters are ``model.inertial_parameters()``;
    * on a merged fixed joint: ``Y_s`` (..., 6, 10 NB + 10), the parameters are followed by the 10 of
      the links on the joint's child side (:func:`fixed_joint_parameters`), which are part of the
      parameters of the body the joint was merged into (what the sensor reads depends on how that
      body's mass splits across it, which ``model.inertial_parameters()`` does not tell).

    It is the constant sensor map (frame, axes, direction) applied to the rows of the sensor's joint
    in :func:`sparsedyn.joint_wrench_regressor` (compiled, like every kernel, on the default road),
    computed :data:`FT_CHUNK` states at a time: the memory beyond the result does not grow with the
    number of states.
    """
    _checks.model_first("force_torque_regressor", model, "model, q, v, a")
    sensor = _sensor(model, sensor)
    pieces = _pieces(model, [sensor])
    i = _sensor_joint(model, sensor)
    if any(np.asarray(x).dtype == object for x in (q, v, a)):          # traced: one piece
        W = joint_wrench_regressor(model, q, v, a, gravity=gravity, joints=(i,))
        return _sensor_rows(model, sensor, W[..., 0, :, :], pieces)
    q, v, a = (np.asarray(x, float) for x in (q, v, a))
    lead = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], a.shape[:-1])
    if not lead:
        W = joint_wrench_regressor(model, q, v, a, gravity=gravity, joints=(i,))
        return _sensor_rows(model, sensor, W[0], pieces)
    qf, vf, af = (np.broadcast_to(x, lead + x.shape[-1:]).reshape(-1, x.shape[-1]) for x in (q, v, a))
    out = np.empty((len(qf), 6, NPARAM * (model.nbodies + len(pieces))))
    for k in range(0, len(qf), FT_CHUNK):
        sl = slice(k, k + FT_CHUNK)
        W = joint_wrench_regressor(model, qf[sl], vf[sl], af[sl], gravity=gravity, joints=(i,))
        out[sl] = _sensor_rows(model, sensor, W[:, 0], pieces)
    return out.reshape(lead + out.shape[1:])


def force_torque_parameters(model, sensor):
    """The parameters the columns of :func:`force_torque_regressor` ``(model, ..., sensor)`` multiply:
    ``model.inertial_parameters()`` (10 NB,) for a sensor on a moving joint; followed by the 10
    parameters of the links on the child side of a merged fixed joint (:func:`fixed_joint_parameters`)
    for a sensor on one (10 NB + 10,)."""
    return model_parameters(model, _pieces(model, [_sensor(model, sensor)]))


def model_parameters(model, pieces=()):
    """``model.inertial_parameters()`` followed by the child-side parameters of the fixed joints ``pieces``."""
    return np.concatenate([model.inertial_parameters()] + [fixed_joint_parameters(model, j) for j in pieces])
