"""Sensors are model entries: attached to a frozen Model, checked against it, used by estimation."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.estimation import EstimationProblem
from sparsedyn.estimation.casestudy import consistent_state
from sparsedyn.model.sensors import ContactLoad, ForceTorque, JointTorque


def test_sensors_live_on_the_model_and_estimation_uses_them():
    base = sd.humanoid()
    model = base.with_sensors(ForceTorque("l_ft", "l_ankle_roll"), ForceTorque("r_ft", "r_ankle_roll"))
    assert base.sensors == () and [s.name for s in model.sensors] == ["l_ft", "r_ft"]
    assert model.sensor("r_ft").joint == "r_ankle_roll"
    assert model.nv == base.nv and model.frame_names == base.frame_names
    with pytest.raises(KeyError, match="no sensor 'x'"):
        model.sensor("x")
    # an estimation problem built without a sensor list measures the model's sensors, in order
    implicit = EstimationProblem(model, contacts=["l_sole", "r_sole"], unknown_accelerations=["root_joint"])
    explicit = EstimationProblem(base, sensors=model.sensors, contacts=["l_sole", "r_sole"],
                                 unknown_accelerations=["root_joint"])
    assert implicit.addresses == explicit.addresses
    est = implicit.analyze()
    q, qd, qdd, w = consistent_state(implicit, np.random.default_rng(3))   # unactuated floating base
    y, truth = implicit.measurements(q, qd, qdd, w)
    e = est.solve(q, qd, y)
    assert np.max(np.abs(e.tau - truth["tau"])) / np.max(np.abs(truth["tau"])) < 1e-9
    assert np.max(np.abs(e.contacts["l_sole"] - w["l_sole"])) / np.max(np.abs(w["l_sole"])) < 1e-9


def test_sensors_are_checked_against_the_model():
    m = sd.humanoid()
    with pytest.raises(sd.ModelError, match="sensor 'ft': model 'humanoid' has no joint 'l_wrist'"):
        m.with_sensors(ForceTorque("ft", "l_wrist"))
    with pytest.raises(sd.ModelError, match="sensor 'cells': model 'humanoid' has no frame 'l_toe'"):
        m.with_sensors(ContactLoad("cells", "l_toe"))
    with pytest.raises(sd.ModelError, match="sensor 'knees': model 'humanoid' has no joint 'knee'"):
        m.with_sensors(JointTorque("knees", ["l_knee", "knee"]))
    with pytest.raises(sd.ModelError, match=r"sensor names used twice: \['a'\]"):
        m.with_sensors(JointTorque("a", ["l_knee"]), JointTorque("a", ["r_knee"]))
