"""Seeded fuzzing of the URDF loader and of sensor files.

Each mutant of a small but complete URDF (inertials, limits, fixed joints, a mimic, Gazebo and
iDynTree force/torque tags) or of a sensor file either loads into something that computes finite
results (RNEA and ABA at a random state; ABA may refuse a singular articulated inertia with
SingularInertiaError) or raises exactly one library error naming the file: UrdfError /
SensorFileError.  Never a foreign exception, never a hang (an alarm bounds each mutant).
Mutations: attribute values (huge, NaN, inf, negative, tiny, garbage numbers), dropped and
duplicated elements, elements moved to the wrong parent, truncated files, encodings and stray bytes.
"""

import json
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import sparsedyn as sd
from conftest import time_limit
from sparsedyn.algorithms.aba import SingularInertiaError
from sparsedyn.estimation import SensorFileError, problem_from_file
from sparsedyn.io.urdf import UrdfError, load_urdf

N_MUTANTS = 300
SECONDS_PER_MUTANT = 10

INERTIAL = ('<inertial><origin xyz="{c}" rpy="0.1 0 0.2"/><mass value="{m}"/>'
            '<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.04"/></inertial>')
BASE_URDF = f"""<?xml version="1.0" encoding="utf-8"?>
<robot name="fuzzbot">
  <link name="base">{INERTIAL.format(c="0 0 0.1", m="3")}</link>
  <link name="upper">{INERTIAL.format(c="0 0 0.2", m="1.5")}</link>
  <link name="lower">{INERTIAL.format(c="0.1 0 0.15", m="1")}</link>
  <link name="hand">{INERTIAL.format(c="0 0.05 0", m="0.5")}</link>
  <link name="sensor_link">{INERTIAL.format(c="0 0 0.01", m="0.1")}</link>
  <link name="finger">{INERTIAL.format(c="0 0 0.02", m="0.05")}</link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.3" rpy="0 0.2 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="50" velocity="3"/>
  </joint>
  <joint name="elbow" type="continuous">
    <parent link="upper"/><child link="lower"/>
    <origin xyz="0 0 0.4"/><axis xyz="1 0 0"/>
  </joint>
  <joint name="wrist_ft" type="fixed">
    <parent link="lower"/><child link="sensor_link"/><origin xyz="0 0 0.3"/>
  </joint>
  <joint name="wrist" type="prismatic">
    <parent link="sensor_link"/><child link="hand"/>
    <origin xyz="0 0 0.05"/><axis xyz="0 0 1"/>
    <limit lower="0" upper="0.1" effort="10" velocity="0.5"/>
  </joint>
  <joint name="grip" type="revolute">
    <parent link="hand"/><child link="finger"/>
    <origin xyz="0 0.02 0.05"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
    <mimic joint="elbow" multiplier="0.5" offset="0.1"/>
  </joint>
  <gazebo reference="wrist_ft">
    <sensor name="wrist_sensor" type="force_torque">
      <force_torque><frame>child</frame><measure_direction>child_to_parent</measure_direction></force_torque>
      <pose>0 0 0 0 0 0.3</pose>
    </sensor>
  </gazebo>
  <sensor name="elbow_ft" type="force_torque">
    <parent joint="elbow"/>
    <force_torque><frame>child</frame><measure_direction>parent_to_child</measure_direction></force_torque>
    <origin xyz="0 0 0" rpy="0 0 0"/>
  </sensor>
</robot>
"""

BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "1e308", "1e400", "-1", "-1e9", "0", "1e-300", "5e-324", "abc", "",
               "1 2", "1e154 1e154 1e154", "   ", "9" * 400, "0x10", "1_0", "1e9", "-0", "1e19 1e19 1e19",
               "1 2 3 4", "--1", "1.2.3", "\u0661", "1e-9 1e-9 1e-9", "3e20"]


def mutate_urdf(rng):
    """``(bytes, description)`` of one mutant of BASE_URDF."""
    kind = rng.choice(["attribute", "attribute", "attribute", "drop", "duplicate", "move", "truncate",
                       "encoding", "bytes", "text", "combo"])
    if kind in ("truncate", "encoding", "bytes"):
        data = BASE_URDF.encode()
        if kind == "truncate":
            k = int(rng.integers(0, len(data)))
            return data[:k], f"truncated at byte {k}"
        if kind == "encoding":
            enc = rng.choice(["utf-16", "latin-1", "EBCDIC-XYZ", "ascii", "utf-32", "cp500", "x"])
            body = BASE_URDF.split("?>", 1)[1]
            head = f'<?xml version="1.0" encoding="{enc}"?>'
            try:
                payload = (head + body).encode(enc if enc not in ("EBCDIC-XYZ", "x") else "utf-8")
            except LookupError:
                payload = (head + body).encode()
            if rng.random() < 0.5:
                payload = (head + body).encode("utf-8")            # declared one thing, written another
            return payload, f"encoding {enc}"
        k = int(rng.integers(0, len(data)))
        junk = bytes(rng.integers(0, 256, size=int(rng.integers(1, 8)), dtype=np.uint8))
        return data[:k] + junk + data[k:], f"bytes {junk!r} at {k}"
    root = ET.fromstring(BASE_URDF.split("?>", 1)[1])
    elements = list(root.iter())
    steps = int(rng.integers(2, 5)) if kind == "combo" else 1
    what = []
    for _ in range(steps):
        k = kind if kind != "combo" else rng.choice(["attribute", "drop", "duplicate", "move", "text"])
        el = elements[int(rng.integers(0, len(elements)))]
        if k == "attribute":
            with_attrs = [e for e in elements if e.attrib]
            el = with_attrs[int(rng.integers(0, len(with_attrs)))]
            key = rng.choice(sorted(el.attrib))
            value = rng.choice(BAD_NUMBERS) if rng.random() < 0.85 else rng.choice(["base", "hand", "elbow", "x"])
            el.set(key, value)
            what.append(f"<{el.tag}> {key}={value[:20]!r}")
        elif k == "text":
            el.text = rng.choice(BAD_NUMBERS + ["child", "parent", "sensor", "bogus"])
            what.append(f"<{el.tag}> text {el.text[:20]!r}")
        elif k in ("drop", "duplicate", "move") and el is not root:
            parent = next(p for p in root.iter() if el in list(p))
            if k == "drop":
                parent.remove(el)
            elif k == "duplicate":
                parent.append(ET.fromstring(ET.tostring(el)))
            else:
                target = elements[int(rng.integers(0, len(elements)))]
                if target is not el and el not in target.iter():
                    parent.remove(el)
                    target.append(el)
            what.append(f"{k} <{el.tag}>")
    return ET.tostring(root), "; ".join(what) or kind


def finite_dynamics(model, rng):
    """RNEA and ABA at a random state are finite (ABA may refuse a singular inertia, by name)."""
    q = model.random_configuration(rng) if model.nv else np.zeros(model.nq)
    q = np.where(np.isfinite(q), q, 0.0)
    v, a = rng.normal(size=(2, model.nv))
    tau = sd.rnea(model, q, v, a)
    assert tau.shape == (model.nv,) and np.all(np.isfinite(tau))
    try:
        qdd = sd.aba(model, q, v, tau)
    except SingularInertiaError as e:
        assert "joint" in str(e)
        return "singular"
    assert np.all(np.isfinite(qdd))
    return "finite"


def test_fuzz_urdf_loader(tmp_path):
    rng = np.random.default_rng(20240611)
    path = tmp_path / "mutant.urdf"
    outcomes = {"finite": 0, "singular": 0, "error": 0}
    for k in range(N_MUTANTS):
        data, what = mutate_urdf(rng)
        path.write_bytes(data)
        with time_limit(SECONDS_PER_MUTANT, what), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                model = load_urdf(path, floating_base=bool(k % 2))
            except UrdfError as e:
                assert str(e).startswith(f"{path}: "), (what, str(e))
                assert len(str(e)) < 2100, what
                outcomes["error"] += 1
                continue
            except Exception as e:                          # noqa: BLE001 - the point of the test
                pytest.fail(f"mutant {k} ({what}): foreign {type(e).__name__}: {e}")
            outcomes[finite_dynamics(model, rng)] += 1
    # the mutants exercise both outcomes
    assert outcomes["error"] > 50 and outcomes["finite"] > 50, outcomes


BASE_SENSORS = {
    "name": "fuzz",
    "contacts": ["hand", {"frame": "base", "name": "floor"}],
    "unknown_accelerations": ["root_joint"],
    "sensor": [
        {"type": "force_torque", "name": "ft1", "joint": "elbow", "frame": "lower", "std": [0.1, 0.1, 0.1, 1, 1, 1]},
        {"type": "joint_torque", "name": "tq", "joints": ["shoulder", "wrist"], "std": 0.5},
        {"type": "load_cells", "name": "cells", "frame": "hand", "components": ["nx", "ny", "fz"],
         "covariance": [[1, 0, 0], [0, 1, 0], [0, 0, 2]]},
        {"type": "accelerometer", "name": "imu", "frame": "upper", "exact": False},
    ],
}
BAD_VALUES = [None, "big", -0.5, 0, float("nan"), 1e400, 10 ** 30, "root_joint", "hand", [], [1, 2], {"a": 1},
              [[1, 2], [3]], [[1, 2], [0, 1]], True, [[[[1]]]], "l_knee", ["nx", "bogus"], 5]


def _toml(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value == float("inf") else repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"


def to_toml(doc):
    lines, tables = [], []
    for key, value in doc.items():
        if key in ("sensor", "contact") and isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables.append((key, value))
        elif value is not None:
            lines.append(f"{key} = {_toml(value)}")
    for key, entries in tables:
        for e in entries:
            lines.append(f"\n[[{key}]]")
            lines += [f"{k} = {_toml(v)}" for k, v in e.items() if v is not None]
    return "\n".join(lines) + "\n"


def mutate_sensors(rng):
    """``(suffix, bytes, description)`` of one mutant sensor file."""
    doc = json.loads(json.dumps(BASE_SENSORS))
    kind = rng.choice(["value", "value", "value", "drop", "duplicate", "top", "truncate", "bytes", "nest"])
    what = kind
    if kind == "value":
        e = doc["sensor"][int(rng.integers(0, len(doc["sensor"])))]
        key = rng.choice(sorted(e) + ["std", "covariance", "frame", "joints"])
        e[key] = BAD_VALUES[int(rng.integers(0, len(BAD_VALUES)))]
        what = f"sensor {e.get('name')!r} {key}={e[key]!r:.40}"
    elif kind == "drop":
        e = doc["sensor"][int(rng.integers(0, len(doc["sensor"])))]
        key = rng.choice(sorted(e))
        del e[key]
        what = f"drop {key}"
    elif kind == "duplicate":
        doc["sensor"].append(dict(doc["sensor"][int(rng.integers(0, len(doc["sensor"])))]))
    elif kind == "top":
        key = rng.choice(["contacts", "unknown_accelerations", "name", "model_sensors", "sensor", "sensors", "extra"])
        doc[key] = BAD_VALUES[int(rng.integers(0, len(BAD_VALUES)))]
        what = f"{key}={doc[key]!r:.40}"
    elif kind == "nest":
        deep = 0
        for _ in range(int(rng.integers(10, 3000))):
            deep = [deep]
        doc["contacts"] = deep
    suffix = rng.choice([".toml", ".json"])
    try:
        text = json.dumps(doc) if suffix == ".json" else to_toml(doc)
    except (ValueError, RecursionError):
        text = json.dumps(BASE_SENSORS)
        suffix = ".json"
    data = text.encode()
    if kind == "truncate":
        data = data[:int(rng.integers(0, len(data)))]
    elif kind == "bytes":
        k = int(rng.integers(0, len(data)))
        data = data[:k] + bytes(rng.integers(128, 256, size=3, dtype=np.uint8)) + data[k:]
    return suffix, data, what


def test_fuzz_sensor_files(tmp_path):
    model = load_urdf(BASE_URDF, floating_base=True)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(BASE_SENSORS))
    assert problem_from_file(model, base).ny > 0                     # the unmutated file is valid
    rng = np.random.default_rng(7)
    counts = {"ok": 0, "error": 0}
    for k in range(N_MUTANTS):
        suffix, data, what = mutate_sensors(rng)
        path = tmp_path / f"mutant{suffix}"
        path.write_bytes(data)
        with time_limit(SECONDS_PER_MUTANT, what):
            try:
                p = problem_from_file(model, path)
            except SensorFileError as e:
                assert str(e).startswith(f"{path}: "), (what, str(e))
                assert len(str(e)) < 2100, what
                counts["error"] += 1
                continue
            except Exception as e:                          # noqa: BLE001 - the point of the test
                pytest.fail(f"mutant {k} ({what}): foreign {type(e).__name__}: {e}")
            assert p.ny >= 0 and all(np.all(np.isfinite(e.cov)) for e in p.entries)
            counts["ok"] += 1
    assert counts["error"] > 50 and counts["ok"] > 20, counts


def test_mutations_are_reproducible():
    a = [mutate_urdf(np.random.default_rng(3))[1] for _ in range(2)]
    assert a[0] == a[1] and re.search(r"\S", a[0])
