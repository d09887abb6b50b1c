"""The case study on a real robot (TALOS, example-robot-data), sensor files and the CLI reports."""

import json

import numpy as np
import pytest
from conftest import rel_err
from erd import load_pair

from sparsedyn import estimation as est
from sparsedyn.estimation.casestudy import consistent_state, sample_noise


@pytest.fixture(scope="module")
def talos_cases():
    model, _ = load_pair("talos_reduced", True)
    return model, est.case_problems(model)


def test_talos_load_cells_ill_posed(talos_cases):
    model, cases = talos_cases
    v = cases["eq18"].verdict()
    assert v.kind == "rank-deficient" and v.deficiency == 1 and v.ranks == (v.n - 1,) * 3
    assert "equal and opposite forces at left_sole_link and right_sole_link along the line where the two contact " \
           "planes meet" in v.directions[0]
    with pytest.raises(est.IllPosedError):
        cases["eq18"].analyze()


@pytest.mark.parametrize("case", ["eq23-nz", "eq23-fz", "ankle-ft", "ankle-ft-imu"])
def test_talos_well_posed_exact(talos_cases, case):
    model, cases = talos_cases
    prob = cases[case]
    solver = prob.analyze()
    rng = np.random.default_rng(0)
    q, qd, qdd, w = consistent_state(prob, rng, batch=(3,))
    y, truth = prob.measurements(q, qd, qdd, w)
    e = solver.solve(q, qd, y)
    assert rel_err(e.tau, truth["tau"]) < 1e-9 and rel_err(e.d, truth["d"]) < 1e-9
    for c in w:
        assert rel_err(e.contacts[c], truth["contacts"][c]) < 1e-9
    e1 = solver.solve(q[1], qd[1], y[1])
    assert rel_err(e1.d, truth["d"][1]) < 1e-9


def test_talos_redundant_least_squares(talos_cases):
    model, cases = talos_cases
    prob = cases["redundant"]
    solver = prob.analyze()
    assert solver.verdict.kind == "over-determined"
    rng = np.random.default_rng(1)
    q, qd, qdd, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, qd, qdd, w)
    noise = sample_noise(prob, rng, (100,))
    errs = [np.sqrt(np.mean((solver.solve(q, qd, y + s * noise).tau - truth["tau"]) ** 2)) for s in (1.0, 0.01)]
    assert 80 < errs[0] / errs[1] < 120
    assert rel_err(solver.solve(q, qd, y).d, truth["d"]) < 1e-9


TOML = """
name = "humanoid feet"
contacts = ["l_sole", "r_sole"]
unknown_accelerations = ["root_joint"]

[[sensor]]
type = "force_torque"
name = "l_ft"
joint = "l_ankle_roll"
frame = "l_sole"
std = [0.1, 0.1, 0.1, 1.0, 1.0, 1.0]

[[sensor]]
type = "force_torque"
name = "r_ft"
joint = "r_ankle_roll"
"""


def test_sensor_files_toml_and_json(tmp_path):
    import sparsedyn as sd
    model = sd.humanoid()
    (tmp_path / "humanoid_sensors.toml").write_text(TOML)
    p1 = est.problem_from_file(model, tmp_path / "humanoid_sensors.toml")
    assert list(p1.addresses) == ["qdd", "l_ft", "r_ft"] and p1.ny == 29 + 12
    assert np.allclose(np.diag(p1.entries[1].cov), [0.01] * 3 + [1.0] * 3)
    spec = {"contacts": [{"frame": "l_sole"}, "r_sole"], "unknown_accelerations": ["root_joint"],
            "sensors": [{"type": "force_torque", "name": "l_ft", "joint": "l_ankle_roll", "frame": "l_sole"},
                        {"type": "force_torque", "name": "r_ft", "joint": "r_ankle_roll"}]}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    p2 = est.problem_from_file(model, tmp_path / "s.json")
    assert p2.verdict().kind == p1.verdict().kind == "well posed"
    text = est.estimate_report(model, tmp_path / "humanoid_sensors.toml")
    assert "well posed" in text and "flops per solve" in text and "dense LU" in text
    err = float(text.split("joint torques ")[-1].split(",")[0])
    assert err < 1e-9
    # errors name the file and the sensor
    bad = TOML.replace('type = "force_torque"\nname = "r_ft"', 'type = "torque_sensor"\nname = "r_ft"')
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(est.SensorFileError, match=r"bad.toml: sensor\[1\] 'r_ft': type must be one of .*, got 'torque_sensor'"):
        est.load_sensors(tmp_path / "bad.toml")
    (tmp_path / "bad2.toml").write_text(TOML.replace('joint = "r_ankle_roll"', 'joint = "r_ankle"'))
    with pytest.raises(est.SensorFileError, match="bad2.toml: sensor 'r_ft'.*no joint 'r_ankle'"):
        est.problem_from_file(model, tmp_path / "bad2.toml")
    (tmp_path / "ill.json").write_text(json.dumps({"contacts": ["l_sole", "r_sole"], "sensors": [
        {"type": "load_cells", "name": "lc", "frame": "l_sole"}, {"type": "load_cells", "name": "rc", "frame": "r_sole"}]}))
    text = est.estimate_report(model, tmp_path / "ill.json")
    assert "ILL-POSED" in text and "no estimate" in text and "seen by no sensor" in text
