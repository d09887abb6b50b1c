"""Loop-closure files next to a URDF (JSON, TOML): reading, writing, errors."""

import json

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import constraints_path, load_closed_loop, load_constraints, save_constraints
from sparsedyn.constraints import ConstraintError, constrained_inverse_dynamics, four_bar
from sparsedyn.model.spatial import rpy_to_rot
from conftest import rel_err

FOUR_BAR_TOML = """
format = "sparsedyn-constraints"
version = 1
gravity = [0.0, -9.81, 0.0]
actuated = ["crank_joint"]

[[constraints]]
type = "point"
name = "loop"
frame_a = "coupler"
point_a = [0.35, 0.0, 0.0]
frame_b = "rocker"
point_b = [0.3, 0.0, 0.0]
"""


def write_four_bar(tmp_path, fmt):
    mech = four_bar()
    urdf = tmp_path / "four_bar.urdf"
    urdf.write_text(sd.to_urdf(mech.model))
    if fmt == "toml":
        (tmp_path / "four_bar.constraints.toml").write_text(FOUR_BAR_TOML)
    else:
        doc = {"format": "sparsedyn-constraints", "version": 1, "gravity": [0, -9.81, 0],
               "actuated": ["crank_joint"],
               "constraints": [{"type": "point", "name": "loop", "frame_a": "coupler", "point_a": [0.35, 0, 0],
                                "frame_b": "rocker", "point_b": [0.3, 0, 0]}]}
        (tmp_path / "four_bar.constraints.json").write_text(json.dumps(doc))
    return mech, urdf


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_urdf_plus_constraints_file_reproduces_the_four_bar(tmp_path, fmt):
    mech, urdf = write_four_bar(tmp_path, fmt)
    assert constraints_path(urdf).name == f"four_bar.constraints.{fmt}"
    loaded = load_closed_loop(urdf)
    assert loaded.actuated == ("crank_joint",)
    assert np.array_equal(loaded.model.gravity, [0, -9.81, 0])
    assert loaded.constraints.rows == ("loop.x", "loop.y", "loop.z")
    rng = np.random.default_rng(2)
    for _ in range(10):
        q, v, qdd = mech.random_state(rng)
        a = constrained_inverse_dynamics(mech.constraints, q, v, qdd, actuated=mech.actuated)
        b = constrained_inverse_dynamics(loaded.constraints, q, v, qdd, actuated=loaded.actuated)
        assert rel_err(b.u, a.u) < 1e-12 and rel_err(b.lam, a.lam) < 1e-12


def test_save_and_load_round_trip_with_every_constraint_type(tmp_path):
    model = sd.random_tree(6, joint_types=("revolute", "prismatic"), seed=3, nframes=2)
    from sparsedyn.constraints import ConstraintSet, JointCoupling, PointCoincidence, PointOnGround, Weld
    R = rpy_to_rot([0.1, -0.2, 0.3])
    cs = ConstraintSet(model, [
        PointCoincidence(model, "body6", "frame1", point_a=[0.1, 0.2, 0.3], axes="xz", name="p"),
        Weld(model, "body5", None, placement=(R, np.array([0.3, 0.2, 0.1])), name="w"),
        PointOnGround(model, "body4", point=[0.0, 0.1, 0.0], normal=[0, 1, 1], height=-0.2, name="g"),
        JointCoupling(model, "joint2", "joint3", 2.0, 0.5, name="c"),
    ])
    path = save_constraints(cs, tmp_path / "tree.constraints.json", actuated=["joint1", "joint2"], gravity=True)
    loaded = load_constraints(path, model)
    assert loaded.actuated == ("joint1", "joint2")
    assert loaded.constraints.rows == cs.rows
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, v = model.random_configuration(rng), rng.normal(size=model.nv)
        for x, y in zip(cs.evaluate(q, v), loaded.constraints.evaluate(q, v)):
            assert np.allclose(x, y, rtol=0, atol=1e-15)
    # A weld placement given as URDF xyz/rpy is the same pose.
    doc = {"constraints": [{"type": "weld", "name": "w", "frame_a": "body5",
                            "placement": {"xyz": [0.3, 0.2, 0.1], "rpy": [0.1, -0.2, 0.3]}}]}
    w = load_constraints(doc, model).constraints["w"]
    assert np.allclose(w.placement[0], R, atol=1e-15)


def test_mimic_couplings_come_from_the_urdf(tmp_path):
    b = sd.ModelBuilder("pair")
    for n in ("j1", "j2"):
        b.add_body(n, None, sd.make_joint("revolute", (0, 0, 1)), mass=1.0, com=[0.1, 0, 0],
                   rot_inertia=np.eye(3) * 0.01, joint_name=n)
    b.add_mimic("j2", "j1", 0.5, 0.1)
    urdf = tmp_path / "pair.urdf"
    urdf.write_text(sd.to_urdf(b.build()))
    loaded = load_closed_loop(urdf)                         # no constraints file: the mimic tag only
    assert loaded.constraints.rows == ("mimic_j2.q",)
    path = save_constraints(loaded.constraints, tmp_path / "pair.constraints.json")
    assert json.loads(path.read_text())["constraints"] == []   # the URDF holds it
    assert load_closed_loop(urdf).constraints.rows == ("mimic_j2.q",)
    path.write_text(json.dumps({"mimic": False}))
    assert load_closed_loop(urdf).constraints.m == 0


def test_bad_files_name_the_file_the_entry_and_the_field(tmp_path):
    mech, urdf = write_four_bar(tmp_path, "json")
    model = mech.model
    bad = {
        '{"constraints": [{"type": "hinge"}]}': r"constraints\[0\]: type must be one of",
        '{"constraints": [{"type": "point", "frame_a": "coupler", "pointa": [0, 0, 0]}]}':
            r"constraints\[0\] \(point\): unknown keys \['pointa'\]",
        '{"constraints": [{"type": "point"}]}': r"missing \['frame_a'\]",
        '{"constraints": [{"type": "point", "frame_a": "nope"}]}': r"constraints\[0\]: .*no frame 'nope'",
        '{"constraints": [{"type": "point", "frame_a": "coupler", "point_a": [1, 2]}]}': "3 finite numbers",
        '{"format": "other"}': "format must be 'sparsedyn-constraints'",
        '{"version": 2}': "version 2 is not supported",
        '{"gravty": [0, 0, -9.81]}': r"unknown top-level keys \['gravty'\]",
        '{"actuated": ["nope"]}': "actuated joint 'nope'",
        '{"constraints": [': "invalid JSON",
        '{"constraints": [{"type": "weld", "frame_a": "coupler", "placement": {"xyz": [0, 0, 0], "q": 1}}]}':
            r"placement: unknown keys \['q'\]",
    }
    path = tmp_path / "bad.constraints.json"
    for text, pattern in bad.items():
        path.write_text(text)
        with pytest.raises(ConstraintError, match=pattern) as info:
            load_constraints(path, model)
        assert str(path) in str(info.value)
    (tmp_path / "four_bar.constraints.toml").write_text(FOUR_BAR_TOML)
    with pytest.raises(ConstraintError, match="keep one"):
        load_closed_loop(urdf)
    with pytest.raises(ConstraintError, match="cannot read"):
        load_constraints(tmp_path / "missing.constraints.json", model)
