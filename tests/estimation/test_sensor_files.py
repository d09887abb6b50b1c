"""Sensor files under bad input: every problem is one SensorFileError naming the file, the entry and
what was expected (never a foreign exception, never a silently accepted value); the noise vocabulary
is ``std`` or ``covariance``."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.estimation import SensorFileError, load_sensors, problem_from_file

FT = '[[sensor]]\ntype = "force_torque"\nname = "ft"\njoint = "l_ankle_roll"\n'


@pytest.fixture(scope="module")
def humanoid():
    return sd.humanoid()


def write(tmp_path, text, name="s.toml"):
    f = tmp_path / name
    (f.write_bytes if isinstance(text, bytes) else f.write_text)(text)
    return f


@pytest.mark.parametrize("text, pattern", [
    (FT + 'std = "big"\n', r"sensor\[0\] 'ft': std must be a number, got 'big'"),
    (FT + "std = -0.5\n", r"sensor\[0\] 'ft': std must be positive"),
    (FT + "std = [0.1, 0.1, 0.1, 0.0, 1, 1]\n", r"sensor\[0\] 'ft': std must be positive"),
    (FT + "covariance = [[1, 2], [0, 1]]\n", r"sensor\[0\] 'ft': covariance must be symmetric"),
    (FT + "std = 0.5\ncovariance = [[1]]\n", r"sensor\[0\] 'ft': give std or covariance, not both"),
    (FT + "variance = 0.25\n", r"sensor\[0\] 'ft': 'variance' is not a sensor-file key"),
    (FT + "exact = 1\n", r"sensor\[0\] 'ft': exact must be true or false"),
    (FT + 'frme = "x"\n', r"sensor\[0\] 'ft': unknown key\(s\) \['frme'\] for type 'force_torque'"),
    (FT.replace('joint = "l_ankle_roll"\n', ""), r"sensor\[0\] 'ft': missing \['joint'\]"),
    (FT + "rotation = [[1, 0], [0, 1]]\n", r"sensor\[0\] 'ft': rotation must be a 3 x 3 matrix"),
    ('[[sensor]]\ntype = "joint_torque"\nname = "knee"\njoints = "l_knee"\n',
     r"sensor\[0\] 'knee': joints must be a list of names, got the string 'l_knee' \(write \['l_knee'\]\)"),
    ('unknown_accelerations = "root_joint"\n', r"unknown_accelerations must be a list of names, got the string"),
    ("contacts = 5\n", r"contacts must be a list/array .*got int 5"),
    ('[[contact]]\nname = "foot"\n', r"contact\[0\]: expected a frame name or a table with frame"),
    ('[sensors]\ntype = "force_torque"\n', r"sensors must be a list/array \(of tables\), got dict"),
    ("sensor = [5]\n", r"sensor\[0\]: expected a table/object with type and name, got 5"),
    ("model_sensors = 1\n", r"model_sensors must be true or false"),
    ("x = " + "[" * 3000 + "]" * 3000 + "\n", r"invalid TOML: nested too deeply"),
    (FT + "std = " + "9" * 5000 + "\n", r"invalid TOML: |std must be a finite number"),
    (b"contacts = ['l_sole']\n# \xff\xfe\n", r"the sensor file is not UTF-8 text \(byte 24"),
])
def test_bad_toml_names_the_file_and_the_entry(tmp_path, text, pattern):
    f = write(tmp_path, text)
    with pytest.raises(SensorFileError, match="^" + str(f).replace(".", r"\.") + ": " + pattern) as e:
        load_sensors(f)
    assert (e.value.__context__ is None or e.value.__suppress_context__) and len(str(e.value)) < 1000


@pytest.mark.parametrize("doc, pattern", [
    ("[" * 100_000 + "]" * 100_000, r"invalid JSON: nested too deeply"),
    ('{"contacts": [' + "1" * 5000 + "]}", r"invalid JSON: "),
    ('{"sensors": [{"type": "force_torque", "name": "ft", "joint": "l_ankle_roll", "std": NaN}]}',
     r"sensor\[0\] 'ft': std must be a finite number"),
    ("[1, 2]", r"expected a table/object at the top level, got list"),
])
def test_bad_json_names_the_file(tmp_path, doc, pattern):
    f = write(tmp_path, doc, "s.json")
    with pytest.raises(SensorFileError, match=pattern):
        load_sensors(f)


def test_names_the_model_lacks_name_the_file(tmp_path, humanoid):
    f = write(tmp_path, 'contacts = ["l_sole"]\nunknown_accelerations = ["root_jont"]\n')
    with pytest.raises(SensorFileError, match=r"s\.toml: unknown_accelerations: model 'humanoid' has no joint 'root_jont'"):
        problem_from_file(humanoid, f)
    f = write(tmp_path, FT.replace("l_ankle_roll", "l_ankle") + 'frame = "l_sole"\n')
    with pytest.raises(SensorFileError, match=r"s\.toml: .*'ft'.*no joint 'l_ankle'"):
        problem_from_file(humanoid, f)
    f = write(tmp_path, FT + "covariance = [[1, 0], [0, 1]]\n")          # 2 x 2 for a 6-axis sensor
    with pytest.raises(SensorFileError, match=r"s\.toml: .*'ft': covariance of shape \(2, 2\)"):
        problem_from_file(humanoid, f)


def test_std_and_covariance_give_the_documented_noise(tmp_path, humanoid):
    std = [0.1, 0.2, 0.3, 1.0, 2.0, 3.0]
    C = np.diag(np.square(std)) + 0.001 * (np.ones((6, 6)) - np.eye(6))
    f1 = write(tmp_path, 'contacts = ["l_sole", "r_sole"]\n' + FT + f"std = {std}\n", "a.toml")
    f2 = write(tmp_path, json.dumps({"contacts": ["l_sole", "r_sole"], "sensors": [
        {"type": "force_torque", "name": "ft", "joint": "l_ankle_roll", "covariance": C.tolist()}]}), "b.json")
    f3 = write(tmp_path, 'contacts = ["l_sole", "r_sole"]\n' + FT + "std = 0.5\n", "c.toml")
    cov = {f.name: problem_from_file(humanoid, f).entries[1].cov for f in (f1, f2, f3)}
    assert np.array_equal(cov["a.toml"], np.diag(np.square(std)))
    assert np.array_equal(cov["b.json"], C)
    assert np.array_equal(cov["c.toml"], 0.25 * np.eye(6))


def test_non_regular_and_oversized_sensor_files(tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(SensorFileError, match="pipe.toml: is a FIFO; expected a regular sensor file"):
        load_sensors(fifo)
    f = write(tmp_path, 'contacts = ["l_sole"]\n' + "#" * 5000 + "\n")
    with pytest.raises(SensorFileError, match="more than the limit of 1000"):
        load_sensors(f, max_bytes=1000)
    assert load_sensors(f)["contacts"][0].frame == "l_sole"


def test_the_cli_reports_without_a_traceback(tmp_path):
    f = write(tmp_path, 'unknown_accelerations = "root_joint"\n')
    r = subprocess.run([sys.executable, "-m", "sparsedyn", "estimate", "humanoid", "--sensors", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "s.toml: unknown_accelerations must be a list of names" in r.stderr
