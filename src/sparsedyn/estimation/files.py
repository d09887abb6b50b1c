"""Sensor files: a small TOML or JSON file next to a URDF.

Schema (the same keys in JSON, as one object)::

    # humanoid_sensors.toml
    unknown_accelerations = ["l_ankle_pitch", "r_ankle_pitch"]   # optional
    contacts = ["l_sole", "r_sole"]                               # unknown contact wrenches at frames

    [[sensor]]
    type = "force_torque"          # force_torque | load_cells | wrench_selection | joint_torque |
    name = "l_ankle_ft"            # joint_acceleration | known_wrench | accelerometer
    joint = "l_ankle_roll"         # a moving joint, or a fixed joint merged into a body (URDF F/T joints)
    frame = "l_foot"               # optional: frame on the joint's child body (default: the joint frame)
    direction = "parent_to_child"  # optional (default); or "child_to_parent" (Gazebo's default)
    rotation = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]   # optional: measurement axes in `frame`
    std = 0.5                      # optional: standard deviation(s), or variance = ..., or covariance = [[..]]

    [[sensor]]
    type = "load_cells"            # components default to ["nx", "ny", "fz"] (Nori eq. 18)
    name = "l_cells"
    frame = "l_sole"
    components = ["nx", "ny", "fz"]    # or selection = [[...6 numbers...], ...]
    exact = false                      # optional

A URDF's own force/torque tags (``<gazebo reference=JOINT><sensor type="force_torque">``)
are already ``model.sensors`` (:func:`sparsedyn.load_urdf`).  A file without
``[[sensor]]`` tables measures those (it then only names the contacts, say);
``model_sensors = true`` adds them to the file's own, ``false`` leaves them out.

Contacts may also be tables: ``[[contact]]`` with ``frame`` and optional ``name``.
"""

from __future__ import annotations

from pathlib import Path

from ..io.files import read_table

from ..sensors import Contact, sensor_from_dict

__all__ = ["load_sensors", "problem_from_file", "parse_sensors"]

_TOP = {"sensor", "sensors", "contacts", "contact", "unknown_accelerations", "name", "model_sensors"}


def parse_sensors(data: dict, where="sensor file") -> dict:
    """``{"sensors", "contacts", "unknown_accelerations", "name", "model_sensors"}`` from a parsed file."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a table/object at the top level")
    extra = set(data) - _TOP
    if extra:
        raise ValueError(f"{where}: unknown top-level key(s) {sorted(extra)}; expected {sorted(_TOP)}")
    raw = list(data.get("sensor", [])) + list(data.get("sensors", []))
    sensors = [sensor_from_dict(e, where) for e in raw]
    contacts = []
    for c in list(data.get("contacts", [])) + list(data.get("contact", [])):
        contacts.append(Contact(c) if isinstance(c, str) else Contact(c["frame"], c.get("name")))
    model_sensors = data.get("model_sensors", not raw)
    if not isinstance(model_sensors, bool):
        raise ValueError(f"{where}: model_sensors must be true or false, got {model_sensors!r}")
    return {"sensors": sensors, "contacts": contacts,
            "unknown_accelerations": list(data.get("unknown_accelerations", [])), "name": data.get("name"),
            "model_sensors": model_sensors}


def load_sensors(path) -> dict:
    """Parse a ``.toml`` or ``.json`` sensor file (see the module docstring)."""
    path = Path(path)
    data = read_table(path, ValueError, "sensor file")
    return parse_sensors(data, str(path))


def problem_from_file(model, path):
    """An :class:`~.problem.EstimationProblem` for ``model`` from a sensor file."""
    from .problem import EstimationProblem
    spec = load_sensors(path)
    sensors = (list(model.sensors) if spec["model_sensors"] else []) + spec["sensors"]
    return EstimationProblem(model, sensors, spec["contacts"], spec["unknown_accelerations"],
                             name=spec["name"] or f"{Path(path).name} on {model.name}")
