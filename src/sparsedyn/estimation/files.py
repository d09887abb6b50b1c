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
    std = 0.5                      # optional: standard deviation(s); or covariance = [[...]] (see below)

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

Noise: each sensor takes **one** of

* ``std``: the standard deviation, in the measurement's units (N, N m, rad/s^2, m/s^2): one
  positive number for every component, or a list of positive numbers, one per component;
* ``covariance``: the full covariance matrix, a list of ``size`` lists of ``size`` numbers,
  symmetric and positive definite, in squared units.

Neither: unit variance.  Both, or ``variance``, are refused (a bare number under
``covariance`` could be read either way).  ``exact = true`` makes the sensor a hard
constraint (its noise is then unused).

Every value is checked: a wrong type, a non-positive ``std``, a non-symmetric covariance, a
name given as a string where a list is expected (``joints = ["l_knee"]``,
``unknown_accelerations = ["root_joint"]``), an unknown key or an unknown name raise one
:class:`SensorFileError` naming the file, the entry (``sensor[2] 'l_ankle_ft'``) and what
was expected.  Files are read as :mod:`sparsedyn.io.files` describes (regular UTF-8 files of
at most 16 MiB).
"""

from __future__ import annotations

import math
from pathlib import Path

from ..io.files import clip, read_table, shorten
from ..model.sensors import SENSOR_TYPES, Contact, sensor_from_dict

__all__ = ["load_sensors", "problem_from_file", "parse_sensors", "SensorFileError"]

_TOP = {"sensor", "sensors", "contacts", "contact", "unknown_accelerations", "name", "model_sensors"}
_COMMON = {"type", "name", "std", "covariance", "exact"}
_KEYS = {   # type -> (required keys, optional keys) beyond _COMMON
    "force_torque": ({"joint"}, {"frame", "direction", "rotation"}),
    "load_cells": ({"frame"}, {"components", "selection"}),
    "joint_torque": ({"joints"}, set()),
    "joint_acceleration": ({"joints"}, set()),
    "known_wrench": ({"frame"}, set()),
    "accelerometer": ({"frame"}, set()),
}
_ALIAS = {"ft": "force_torque", "contact_load": "load_cells", "wrench_selection": "load_cells"}


class SensorFileError(ValueError):
    """A sensor file that cannot be used; the message names the file, the entry and what was expected."""

    def __init__(self, message):
        super().__init__(shorten(str(message)))


def _fail(where, problem):
    raise SensorFileError(f"{where}: {problem}")


def _string(where, key, value):
    if not isinstance(value, str) or not value:
        _fail(where, f"{key} must be a non-empty string (a name), got {clip(value)}")
    return value


def _names(where, key, value):
    if isinstance(value, str):
        _fail(where, f"{key} must be a list of names, got the string {clip(value)} (write [{clip(value)}])")
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        _fail(where, f"{key} must be a list of names (strings), got {clip(value)}")
    return list(value)


def _number(where, key, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(where, f"{key} must be a number, got {clip(value)}")
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        _fail(where, f"{key} must be a finite number, got {clip(value)}")
    return x


def _matrix(where, key, value, rows=None, cols=None):
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        _fail(where, f"{key} must be a list of rows (lists of numbers), got {clip(value)}")
    n = len(value[0])
    if any(len(r) != n for r in value) or (rows is not None and len(value) != rows) or (cols is not None and n != cols):
        want = f"{rows if rows is not None else 'm'} x {cols if cols is not None else 'n'}"
        _fail(where, f"{key} must be a {want} matrix (rows of equal length), got {clip(value)}")
    return [[_number(where, key, x) for x in r] for r in value]


def _noise(where, e):
    """The sensor's ``covariance`` argument from ``std`` or ``covariance`` (module docstring)."""
    if "variance" in e:
        _fail(where, "'variance' is not a sensor-file key; give std (standard deviations) or covariance "
                     "(a full matrix)")
    if "std" in e and "covariance" in e:
        _fail(where, "give std or covariance, not both")
    if "std" in e:
        std = e["std"]
        values = [_number(where, "std", x) for x in std] if isinstance(std, list) else [_number(where, "std", std)]
        if not values or min(values) <= 0:
            _fail(where, f"std must be positive (a standard deviation, or one per component), got {clip(std)}")
        return [x * x for x in values] if isinstance(std, list) else values[0] ** 2
    if "covariance" in e:
        C = _matrix(where, "covariance", e["covariance"])
        n = len(C)
        if len(C[0]) != n:
            _fail(where, f"covariance must be a square matrix, got {n} x {len(C[0])}")
        scale = max(abs(x) for r in C for x in r)
        if any(abs(C[i][j] - C[j][i]) > 1e-9 * scale for i in range(n) for j in range(i)):
            _fail(where, "covariance must be symmetric")
        return C
    return None


def _sensor(k, e, label):
    where = f"{label}: sensor[{k}]"
    if not isinstance(e, dict):
        _fail(where, f"expected a table/object with type and name, got {clip(e)}")
    name = e.get("name")
    where += f" {clip(name)}" if isinstance(name, str) else ""
    kind = e.get("type")
    if not isinstance(kind, str) or kind not in SENSOR_TYPES:
        _fail(where, f"type must be one of {sorted(SENSOR_TYPES)}, got {clip(kind)}")
    required, optional = _KEYS[_ALIAS.get(kind, kind)]
    unknown = set(e) - _COMMON - required - optional - {"variance"}
    if unknown:
        _fail(where, f"unknown key(s) {clip(sorted(map(str, unknown)))} for type {kind!r}; allowed: "
                     f"{sorted(_COMMON | required | optional)}")
    missing = ({"name"} | required) - set(e)
    if missing:
        _fail(where, f"missing {sorted(missing)} (type {kind!r})")
    _string(where, "name", name)
    args = {"type": kind, "name": name}
    for key in ("joint", "frame", "direction"):
        if key in e:
            args[key] = _string(where, key, e[key])
    if "joints" in e:
        args["joints"] = _names(where, "joints", e["joints"])
    if "rotation" in e:
        args["rotation"] = _matrix(where, "rotation", e["rotation"], 3, 3)
    if "components" in e:
        args["components"] = _names(where, "components", e["components"])
    if "selection" in e:
        args["selection"] = _matrix(where, "selection", e["selection"], None, 6)
    if "exact" in e:
        if not isinstance(e["exact"], bool):
            _fail(where, f"exact must be true or false, got {clip(e['exact'])}")
        args["exact"] = e["exact"]
    cov = _noise(where, e)
    if cov is not None:
        args["covariance"] = cov
    try:
        return sensor_from_dict(args, where)
    except (ValueError, TypeError, KeyError) as err:
        _fail(where, shorten(str(err), 500))


def _contact(k, c, label):
    where = f"{label}: contact[{k}]"
    if isinstance(c, str) and c:
        return Contact(c)
    if not isinstance(c, dict) or set(c) - {"frame", "name", "kind"} or "frame" not in c:
        _fail(where, f"expected a frame name or a table with frame (and optional name, kind), got {clip(c)}")
    _string(where, "frame", c["frame"])
    if "name" in c:
        _string(where, "name", c["name"])
    try:
        return Contact(c["frame"], c.get("kind", "6d"), name=c.get("name"))
    except (TypeError, ValueError) as err:
        _fail(where, str(err))


def _list(label, data, key):
    value = data.get(key, [])
    if not isinstance(value, list):
        _fail(label, f"{key} must be a list/array (of {'tables' if key.startswith('sensor') else 'names or tables'}), "
                     f"got {type(value).__name__} {clip(value)}")
    return value


def parse_sensors(data: dict, where="sensor file") -> dict:
    """``{"sensors", "contacts", "unknown_accelerations", "name", "model_sensors"}`` from a parsed file.

    Raises :class:`SensorFileError` naming ``where``, the entry and what was expected."""
    if not isinstance(data, dict):
        _fail(where, f"expected a table/object at the top level, got {type(data).__name__}")
    extra = set(data) - _TOP
    if extra:
        _fail(where, f"unknown top-level key(s) {clip(sorted(map(str, extra)))}; expected {sorted(_TOP)}")
    raw = _list(where, data, "sensor") + _list(where, data, "sensors")
    sensors = [_sensor(k, e, where) for k, e in enumerate(raw)]
    contacts = [_contact(k, c, where) for k, c in enumerate(_list(where, data, "contacts") + _list(where, data, "contact"))]
    model_sensors = data.get("model_sensors", not raw)
    if not isinstance(model_sensors, bool):
        _fail(where, f"model_sensors must be true or false, got {clip(model_sensors)}")
    name = data.get("name")
    if name is not None:
        _string(where, "name", name)
    unknown = _names(where, "unknown_accelerations", data["unknown_accelerations"]) \
        if "unknown_accelerations" in data else []
    return {"sensors": sensors, "contacts": contacts, "unknown_accelerations": unknown, "name": name,
            "model_sensors": model_sensors}


def load_sensors(path, max_bytes=None) -> dict:
    """Parse a ``.toml`` or ``.json`` sensor file (see the module docstring); :class:`SensorFileError`
    names the file.  ``max_bytes``: the file size limit (:mod:`sparsedyn.io.files`)."""
    path = Path(path)
    data = read_table(path, SensorFileError, "sensor file", max_bytes)
    return parse_sensors(data, str(path))


def problem_from_file(model, path, max_bytes=None):
    """An :class:`~.problem.EstimationProblem` for ``model`` from a sensor file.

    Names that ``model`` lacks (joints, frames), and sensors that do not fit it, raise
    :class:`SensorFileError` naming the file."""
    from .problem import EstimationProblem
    spec = load_sensors(path, max_bytes)
    sensors = (list(model.sensors) if spec["model_sensors"] else []) + spec["sensors"]
    try:
        return EstimationProblem(model, sensors, spec["contacts"], spec["unknown_accelerations"],
                                 name=spec["name"] or f"{Path(path).name} on {model.name}")
    except (ValueError, KeyError, TypeError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        raise SensorFileError(f"{path}: {shorten(str(msg), 1000)}") from None
