"""MuJoCo's sensors as model sensors (:func:`sensors_of`, for :func:`~sparsedyn.io.mjcf.load_mjcf`) and
the measurement vector of a model's sensors from MuJoCo's ``sensordata`` (:func:`mjcf_measurements`)."""

from __future__ import annotations

import numpy as np

from .. import _checks
from .mjcf_joints import _HINGE, _SLIDE, _list, _name

__all__ = ["sensors_of", "mjcf_measurements"]

_STATE_SENSORS = {"jointpos", "jointvel", "gyro", "velocimeter", "framepos", "framequat", "framexaxis",
                  "frameyaxis", "framezaxis", "framelinvel", "frameangvel", "subtreecom", "subtreelinvel",
                  "subtreeangmom", "ballquat", "ballangvel", "actuatorpos", "actuatorvel", "tendonpos", "tendonvel",
                  "magnetometer", "clock"}

def sensors_of(m, model, extra):
    """``(sensors, notes)``: the model sensors of the MuJoCo sensors of ``m`` that map to one (force,
    torque, accelerometer, joint actuator force), and a note naming the others and why."""
    from ..model.sensors import Accelerometer, ForceTorque, JointTorque
    import mujoco
    T = mujoco.mjtSensor
    out, skipped = [], {}
    site_frame, fixed_name = extra["site_frame"], extra["fixed_name"]
    for s in range(m.nsensor):
        st, obj = int(m.sensor_type[s]), int(m.sensor_objid[s])
        sname = _name(m, "sensor", s)
        noise = float(m.sensor_noise[s])
        cov = noise ** 2 if noise > 0 else None
        kind = T(st).name.replace("mjSENS_", "").lower()
        why = None
        if st in (int(T.mjSENS_FORCE), int(T.mjSENS_TORQUE), int(T.mjSENS_ACCELEROMETER)):
            if extra["host"][int(m.site_bodyid[obj])] is None:
                why = "at a site fixed to the world"
            elif st == int(T.mjSENS_ACCELEROMETER):
                out.append(Accelerometer(sname, site_frame[obj], covariance=cov))
            else:
                b = int(m.site_bodyid[obj])
                if int(m.body_jntnum[b]) > 0:
                    joint = extra["our_joint"][int(m.body_jntadr[b]) + int(m.body_jntnum[b]) - 1]
                elif b in fixed_name:
                    joint = fixed_name[b]
                else:
                    joint = None
                    why = "on a body welded to the world"
                if joint is not None:
                    comp = ("fx", "fy", "fz") if st == int(T.mjSENS_FORCE) else ("nx", "ny", "nz")
                    out.append(ForceTorque(sname, joint, frame=site_frame[obj], components=comp, covariance=cov))
        elif st == int(T.mjSENS_JOINTACTFRC) and int(m.jnt_type[obj]) in (_HINGE, _SLIDE):
            out.append(JointTorque(sname, [extra["joint_names"][obj]], covariance=cov))
        elif kind in _STATE_SENSORS:
            why = "measures the state (q, v), which estimation takes as given"
        else:
            why = "not modelled"
        if why is not None:
            skipped.setdefault((kind, why), []).append(sname)
    notes = []
    if skipped:
        notes = ["sensors not mapped to model sensors (" + "; ".join(f"{kind} {_list(n)}: {w}"
                                                                   for (kind, w), n in skipped.items()) + ")"]
    return out, notes


def mjcf_measurements(model, mj_model, sensordata):
    """The measurement vector ``y`` (..., ny) of ``model.sensors`` from MuJoCo's ``sensordata`` (..., nsensordata).

    ``model`` is a :func:`load_mjcf` model of ``mj_model``; each of its sensors
    is a MuJoCo sensor of the same name and size, taken in ``model.sensors`` order.
    """
    _checks.model_first("mjcf_measurements", model, "model, mj_model, sensordata")
    sensordata = np.asarray(sensordata, float)
    parts = []
    for x in model.sensors:
        try:
            s = mj_model.sensor(x.name)
        except KeyError:
            raise KeyError(f"MuJoCo model has no sensor {x.name!r} (model {model.name!r})") from None
        parts.append(sensordata[..., int(s.adr[0]):int(s.adr[0]) + int(s.dim[0])])
    return np.concatenate(parts, -1) if parts else sensordata[..., :0]
