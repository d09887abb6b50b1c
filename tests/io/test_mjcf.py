"""MJCF through MuJoCo's compiler: the dm_control corpus against MuJoCo, conventions, sensors,
equality constraints and bad input.  MuJoCo (``mujoco``) and the MJCF files of ``dm-control``
are test dependencies: these oracle tests fail, never skip, without them."""

import builtins
import os
import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.constraints import JointCoupling, PointCoincidence, Weld, assemble
from sparsedyn.interop import mujoco as mjx

DM_CONTROL = Path(dm_control.__file__).parent
CORPUS = sorted(str(p.relative_to(DM_CONTROL)) for p in DM_CONTROL.rglob("*.xml"))

#: Everything but the rigid-body dynamics is switched off in MuJoCo (gravity kept).
_D = mujoco.mjtDisableBit
RIGID_ONLY = int(_D.mjDSBL_CONTACT | _D.mjDSBL_CONSTRAINT | _D.mjDSBL_EQUALITY | _D.mjDSBL_LIMIT
                 | _D.mjDSBL_FRICTIONLOSS | _D.mjDSBL_SPRING | _D.mjDSBL_DAMPER | _D.mjDSBL_ACTUATION)
TOL = 1e-9


def _load(path_or_xml, **kw):
    """``(model or result, [MjcfWarning messages])``."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = sd.load_mjcf(path_or_xml, **kw)
    return out, [str(x.message) for x in w if issubclass(x.category, sd.MjcfWarning)]


def _rel(err, ref):
    return float(np.max(np.abs(err))) / max(1.0, float(np.max(np.abs(ref), initial=0.0)))


def compare_with_mujoco(model, mm, seed=0):
    """Worst relative errors ``{"rnea", "crba", "aba", "frames"}`` at one random state
    (MuJoCo with passive forces and constraints disabled)."""
    mm.opt.disableflags |= RIGID_ONLY
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    v, a, tau = rng.normal(size=(3, model.nv))
    md.qpos[:], md.qvel[:] = mjx.q_to_mujoco(model, q), mjx.v_to_mujoco(model, q, v)
    md.qacc[:] = mjx.a_to_mujoco(model, q, v, a)
    mujoco.mj_inverse(mm, md)
    err = {"rnea": _rel(sd.rnea(model, q, v, a) - mjx.tau_from_mujoco(model, md.qpos, md.qfrc_inverse), md.qfrc_inverse)}
    M = np.zeros((mm.nv, mm.nv))
    mujoco.mj_fullM(mm, md, M)
    T = mjx.velocity_map(model, q)
    err["crba"] = _rel(sd.crba(model, q) - T.T @ M @ T, M)
    md.qfrc_applied[:] = mjx.tau_to_mujoco(model, q, tau)
    mujoco.mj_forward(mm, md)
    err["aba"] = _rel(mjx.a_to_mujoco(model, q, v, sd.aba(model, q, v, tau)) - md.qacc, md.qacc)
    # the file's force, torque and accelerometer sensors, predicted from (q, v, a) as MuJoCo measures them
    sensors = [x for x in model.sensors if not isinstance(x, sd.model.sensors.JointTorque)]
    if sensors:
        a_mj = mjx.a_from_mujoco(model, md.qpos, md.qvel, md.qacc)
        y, _ = sd.EstimationProblem(model, sensors=sensors).measurements(q, v, a_mj)
        y_mj = np.concatenate([md.sensordata[mm.sensor(x.name).adr[0]:][:mm.sensor(x.name).dim[0]] for x in sensors])
        err["sensors"] = _rel(y[y.size - y_mj.size:] - y_mj, y_mj)
    # frames: every site and body that moves, by the loader's naming rules
    worst = 0.0
    R, p = sd.frame_placements(model, q)
    index = {n: k for k, n in enumerate(model.frame_names)}
    for s in range(mm.nsite):                 # every site, those fixed to the world too (mocap ones stay put)
        if mm.body_mocapid[mm.site_bodyid[s]] >= 0:
            continue
        name = mm.site(s).name or f"site{s}"
        k = index.get(f"site:{name}", index.get(name))
        worst = max(worst, np.abs(p[k] - md.site_xpos[s]).max(), np.abs(R[k] - md.site_xmat[s].reshape(3, 3)).max())
    for b in range(1, mm.nbody):
        if not mjx.body_moves(mm, b):
            continue
        k = index[mm.body(b).name or f"body{b}"]
        worst = max(worst, np.abs(p[k] - md.xpos[b]).max(), np.abs(R[k] - md.xmat[b].reshape(3, 3)).max())
    err["frames"] = worst / max(1.0, float(np.abs(md.xpos).max()))
    return err


def _unsupported(mm):
    """What the loader must warn about in a compiled model (a subset of what it reports)."""
    out = []
    if mm.ntendon:
        out.append("tendon")
    if any(int(t) not in (0, 1) for t in mm.actuator_trntype):
        out.append("transmission")
    return out


@pytest.fixture(scope="module")
def corpus_models(tmp_path_factory):
    """``{relative path: (MjModel or MuJoCo's error, load result or exception, warnings)}``, loaded once
    (in a scratch folder: MuJoCo writes its error log to the working directory)."""
    out = {}
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("mujoco_log"))
    try:
        _load_corpus(out)
    finally:
        os.chdir(here)
    return out


def _load_corpus(out):
    for rel in CORPUS:
        path = str(DM_CONTROL / rel)
        try:
            mm = mujoco.MjModel.from_xml_path(path)
        except Exception as e:   # noqa: BLE001 - MuJoCo's verdict is the oracle
            mm = e
        try:
            res, warned = _load(path)
        except Exception as e:   # noqa: BLE001
            res, warned = e, []
        out[rel] = (mm, res, warned)


def test_corpus_is_there():
    assert len(CORPUS) >= 60, CORPUS
    assert "suite/humanoid.xml" in CORPUS and "suite/dog.xml" in CORPUS


@pytest.mark.parametrize("rel", CORPUS)
def test_dm_control_corpus(rel, corpus_models):
    mm, res, warned = corpus_models[rel]
    if isinstance(mm, Exception):
        # MuJoCo's compiler rejects the file: one MjcfError with the file name and MuJoCo's message
        assert isinstance(res, sd.MjcfError), res
        assert str(DM_CONTROL / rel) in str(res)
        assert " ".join(str(mm).split())[:40] in str(res)
        return
    assert isinstance(res, sd.Model), res
    model = res
    assert len(warned) <= 1, warned
    for what in _unsupported(mm):
        assert warned and what in warned[0], (what, warned)
    assert model.nq == mm.nq and model.nv == mm.nv
    assert np.array_equal(model.armature, mjx.tau_from_mujoco(model, mm.qpos0, mm.dof_armature)) \
        or any(mm.jnt_type == 0)
    assert np.allclose(mjx.q_to_mujoco(model, model.joint_dynamics.reference), mm.qpos0, rtol=0, atol=1e-15)
    if model.nv == 0:
        return
    err = compare_with_mujoco(model, mm)
    assert max(err.values()) <= TOL, err


# --- conventions on a hand-written file -----------------------------------------------

ODD = """
<mujoco model="odd">
  <compiler angle="degree"/>
  <option gravity="0.5 -1 -9"/>
  <default><joint armature="0.03" damping="0.7"/></default>
  <worldbody>
    <body name="base" pos="0.1 0.2 1" quat="0.9 0.1 -0.2 0.3">
      <freejoint name="root"/>
      <inertial pos="0.01 0.02 -0.03" mass="3" diaginertia="0.1 0.2 0.15" quat="1 0.2 0 0.1"/>
      <site name="imu" pos="0 0 0.1" euler="0 0 30"/>
      <body name="hip" pos="0 0.2 -0.1" euler="10 20 30">
        <joint name="hx" type="hinge" axis="1 0 0" pos="0.02 0 0.01" ref="25" range="-40 60" stiffness="3"
               springref="5"/>
        <joint name="hy" type="hinge" axis="0 1 1" pos="0 -0.03 0.05" ref="-10"/>
        <joint name="hs" type="slide" axis="0.2 0 1" ref="0.05" armature="0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.05" mass="2"/>
        <site name="knee_site" pos="0 0 -0.4"/>
        <body name="cover" pos="0 0.05 -0.2" euler="0 90 0">
          <geom type="box" size="0.02 0.03 0.04" mass="0.3"/>
          <site name="cover"/>
        </body>
        <body name="shin" pos="0 0 -0.4">
          <joint name="knee" type="ball" pos="0 0.01 0.02" armature="0.02" frictionloss="0.4"/>
          <geom type="capsule" fromto="0 0 0 0.1 0 -0.4" size="0.04" mass="1.2"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_several_joints_per_body_refs_offsets_and_welds():
    model, warned = _load(ODD, composite_joints=False)        # the chain of massless bodies
    mm = mujoco.MjModel.from_xml_string(ODD)
    # the only note: the site named like its body, renamed (its pose is checked against site_xpos below)
    assert len(warned) == 1 and warned[0].endswith("sites named like another frame, renamed (cover -> site:cover)")
    assert model.joint_names == ("root", "hx", "hy", "hs", "knee")
    assert model.body_names == ("base", "hip/hx", "hip/hy", "hip", "shin")
    assert [j.type for j in model.joints] == ["free", "revolute", "revolute", "prismatic", "spherical"]
    assert model.mass[1] == model.mass[2] == 0.0 and abs(model.total_mass - mm.body_mass.sum()) < 1e-12
    # q is qpos: the hinge references are folded into Xtree, the limits are qpos values
    ref = model.joint_dynamics.reference
    assert np.allclose(mjx.q_to_mujoco(model, ref), mm.qpos0)
    assert np.isclose(ref[model.q_start[1]], np.deg2rad(25)) and np.isclose(model.lower[7], np.deg2rad(-40))
    assert np.allclose(model.joint_dynamics.spring_reference[7], np.deg2rad(5))
    assert model.joint_dynamics.stiffness[6] == 3.0 and model.joint_dynamics.damping[8] == 0.7
    assert np.allclose(model.joint_dynamics.frictionloss, [0] * 9 + [0.4] * 3)
    assert np.allclose(model.armature, [0.0] * 6 + [0.03, 0.03, 0.0] + [0.02] * 3)   # <freejoint> takes no defaults
    # at q = qpos0 every body sits where the file draws it
    md = mujoco.MjData(mm)
    mujoco.mj_kinematics(mm, md)
    for b in range(1, mm.nbody):
        R, p = sd.frame_placement(model, ref, mm.body(b).name)
        assert np.allclose(p, md.xpos[b], atol=1e-12) and np.allclose(R, md.xmat[b].reshape(3, 3), atol=1e-12)
    # the welded cover: merged, with a fixed joint, its frame and a renamed site
    fj = model.fixed_joint("cover")
    assert model.body_names[fj.body] == "hip" and set(fj.frames) == {"cover", "site:cover"}
    for seed in range(3):
        err = compare_with_mujoco(model, mm, seed)
        assert max(err.values()) <= TOL, err
    # by default one composite joint, its parts at their anchors with their references
    comp, _ = _load(ODD)
    assert comp.joint_names == ("root", "hx+hy+hs", "knee") and comp.body_names == ("base", "hip", "shin")
    ref = comp.joint_dynamics.reference
    assert np.allclose(mjx.q_to_mujoco(comp, ref), mm.qpos0)
    for b in range(1, mm.nbody):
        R, p = sd.frame_placement(comp, ref, mm.body(b).name)
        assert np.allclose(p, md.xpos[b], atol=1e-12) and np.allclose(R, md.xmat[b].reshape(3, 3), atol=1e-12)
    for seed in range(3):
        err = compare_with_mujoco(comp, mm, seed)
        assert max(err.values()) <= TOL, err


def test_ball_joint_away_from_origin_and_angles():
    xml = """<mujoco><worldbody><body pos="0 0 1"><joint type="ball" pos="0.1 0 0"/>
             <geom size="0.1" pos="0.2 0 0" mass="1"/><body pos="0.3 0 0"><joint type="ball" pos="0 0.05 0"/>
             <geom size="0.05" mass="0.5"/></body></body></worldbody></mujoco>"""
    model, warned = _load(xml)
    assert model.joint_names == ("joint0", "joint1") and model.body_names == ("body1", "body2")
    for seed in range(3):
        assert max(compare_with_mujoco(model, mujoco.MjModel.from_xml_string(xml), seed).values()) <= TOL


# --- sensors --------------------------------------------------------------------------

ARM = """
<mujoco model="arm3">
  <worldbody>
    <body name="link1" pos="0 0 0.5" euler="10 0 0">
      <joint name="j1" type="hinge" axis="0 0 1" ref="20" armature="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" mass="1.5"/>
      <site name="ft1" pos="0.02 0.01 0" euler="0 30 0"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" pos="0.01 0 0.02"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.035" mass="1.0"/>
        <body name="plate" pos="0.25 0 0" euler="0 0 15">
          <geom type="cylinder" size="0.04 0.01" mass="0.2"/>
          <site name="ft2" pos="0 0 0.005"/>
          <body name="link3" pos="0.02 0 0">
            <joint name="j3" type="hinge" axis="0 1 0" armature="0.02"/>
            <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.03" mass="0.6"/>
            <site name="imu" pos="0.1 0.01 0.02" euler="5 10 20"/>
            <site name="tip" pos="0.22 0 0"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="j1"/><motor joint="j2"/><motor joint="j3" gear="2"/></actuator>
  <sensor>
    <force site="ft1" name="f1"/><torque site="ft1" name="t1" noise="0.01"/>
    <force site="ft2" name="f2"/><torque site="ft2" name="t2"/>
    <accelerometer site="imu" name="acc"/>
    <gyro site="imu" name="gyro"/>
    <jointactuatorfrc joint="j2" name="tau2"/>
  </sensor>
</mujoco>
"""


def _simulate_arm(seed, tip_wrench=None):
    """MuJoCo's state, qacc, sensordata and actuator forces under random controls (and a tip wrench)."""
    mm = mujoco.MjModel.from_xml_string(ARM)
    mm.opt.disableflags |= int(_D.mjDSBL_CONTACT | _D.mjDSBL_CONSTRAINT)
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(seed)
    md.qpos[:] = rng.uniform(-1, 1, 3)
    md.qvel[:] = rng.normal(size=3)
    md.ctrl[:] = rng.normal(size=3)
    if tip_wrench is not None:
        md.xfrc_applied[mm.body("link3").id] = tip_wrench
    mujoco.mj_forward(mm, md)
    return mm, md


def test_mjcf_sensors_are_model_sensors():
    model, warned = _load(ARM)
    assert [type(s).__name__ for s in model.sensors] == ["ForceTorque"] * 4 + ["Accelerometer", "JointTorque"]
    assert [s.name for s in model.sensors] == ["f1", "t1", "f2", "t2", "acc", "tau2"]
    assert model.sensor("f2").joint == "plate" and model.sensor("f1").joint == "j1"
    assert np.allclose(model.sensor("t1").covariance(3), 1e-4 * np.eye(3))
    assert len(warned) == 1 and "gyro" in warned[0]
    # every mapped sensor predicts MuJoCo's sensordata (sign, frame and point conventions)
    mm, md = _simulate_arm(0)
    problem = sd.EstimationProblem(model)
    y, truth = problem.measurements(md.qpos, md.qvel, md.qacc)
    y_mj = np.concatenate([md.qacc, sd.mjcf_measurements(model, mm, md.sensordata)])
    assert np.abs(y - y_mj).max() <= 1e-10 * np.abs(y_mj).max()
    assert np.allclose(truth["tau"], md.qfrc_actuator, rtol=1e-10, atol=1e-12)


def test_estimator_recovers_mujoco_torques_from_mjcf_sensors():
    """Unknown tip contact and unknown acceleration of j3: the F/T sensors and the accelerometer
    of the file, as simulated by MuJoCo, give back the joint torques MuJoCo applied."""
    model, _ = _load(ARM, sensors=True)
    sensors = [s for s in model.sensors if s.name != "tau2"]          # no torque sensor: estimate them
    problem = sd.EstimationProblem(model, sensors=sensors, contacts=["tip"], unknown_accelerations=["j3"])
    assert problem.verdict().ok
    est = problem.analyze()
    mm = mujoco.MjModel.from_xml_string(ARM)
    keep = [mm.sensor(s.name).id for s in sensors]
    for seed in range(3):
        mm, md = _simulate_arm(seed, tip_wrench=np.array([0.0, 0.0, -5.0, 0.3, -0.2, 0.1]))
        sel = [int(mm.sensor_adr[k]) + c for k in keep for c in range(int(mm.sensor_dim[k]))]
        y = np.concatenate([md.qacc[:2], md.sensordata[sel]])
        e = est.solve(md.qpos, md.qvel, y)
        assert np.abs(e.tau - md.qfrc_actuator).max() <= 1e-8 * np.abs(md.qfrc_actuator).max()
        assert abs(e.qdd[2] - md.qacc[2]) <= 1e-8 * max(1.0, abs(md.qacc[2]))


# --- equality constraints ------------------------------------------------------------

LOOP = """
<mujoco model="loops">
  <worldbody>
    <body name="a" pos="0 0 1"><joint name="ja" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02" mass="1"/>
      <body name="b" pos="0.5 0 0"><joint name="jb" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02" mass="1"/></body></body>
    <body name="c" pos="1.2 0 1"><joint name="jc" type="hinge" axis="0 1 0" ref="30"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1"/>
      <site name="cs" pos="0 0 -0.5" euler="0 20 0"/>
      <body name="d" pos="0 0 -0.5"><joint name="jd" type="hinge" axis="0 1 0"/>
        <joint name="je" type="slide" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/><site name="ds" pos="0.1 0 0"/>
      </body></body>
    <body name="e" pos="0 1 1"><freejoint name="je_free"/><geom size="0.1" mass="1"/></body>
    <body name="f" pos="0 2 1"><joint name="jf" type="hinge" axis="1 0 0"/><joint name="jg" type="hinge" axis="0 1 0"/>
      <geom size="0.1" mass="1"/></body>
  </worldbody>
  <equality>
    <connect name="close" body1="b" body2="c" anchor="0.5 0 0"/>
    <weld name="hold" body1="e" relpose="0 -1 -1 0.9 0.1 0.1 0"/>
    <weld name="sites" site1="ds" site2="cs"/>
    <joint name="couple" joint1="jg" joint2="jf" polycoef="0.1 -0.5 0 0 0"/>
    <joint name="cubic" joint1="jd" polycoef="0 0 0 0.2 0"/>
    <connect name="off" body1="a" body2="e" anchor="0 0 0" active="false"/>
  </equality>
</mujoco>
"""


def _equality_residual(model, mm, q):
    md = mujoco.MjData(mm)
    md.qpos[:] = mjx.q_to_mujoco(model, q)
    mujoco.mj_forward(mm, md)
    rows = md.efc_type[:md.nefc] == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY)
    return md.efc_pos[:md.nefc][rows], md.efc_id[:md.nefc][rows]


def test_equality_constraints_become_a_constraint_set():
    (model, cs), warned = _load(LOOP, constraints=True)
    assert [type(c) for c in cs.constraints] == [PointCoincidence, Weld, Weld, JointCoupling]
    assert [c.name for c in cs.constraints] == ["close", "hold", "sites", "couple"]
    assert len(warned) == 1 and "cubic" in warned[0] and "off" not in warned[0]
    mm = mujoco.MjModel.from_xml_string(LOOP)
    mm.opt.disableflags |= int(_D.mjDSBL_CONTACT | _D.mjDSBL_LIMIT)
    mm.eq_active0[mm.equality("cubic").id] = 0
    # the joint coupling's residual is MuJoCo's, at any configuration
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    res, ids = _equality_residual(model, mm, q)
    couple = cs.constraints[3]
    assert np.isclose(couple.residual(None, q)[0], res[ids == mm.equality("couple").id][0], rtol=0, atol=1e-14)
    # a configuration that satisfies our constraints satisfies MuJoCo's
    q = assemble(cs, sd.integrate(model, model.joint_dynamics.reference, 0.05 * rng.normal(size=model.nv)))
    res, _ = _equality_residual(model, mm, q)
    assert res.size == 3 + 6 + 6 + 1 and np.abs(res).max() <= 1e-9, res


def test_equality_constraints_without_constraints_are_reported():
    model, warned = _load(LOOP)
    assert isinstance(model, sd.Model)
    assert len(warned) == 1 and "5 active equality constraint(s)" in warned[0] and "constraints=True" in warned[0]


# --- bad input, dispatch, CLI -----------------------------------------------------------

def test_file_rejected_by_mujoco(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)              # MuJoCo's error log goes there
    bad = tmp_path / "bad_robot.xml"
    bad.write_text('<mujoco><worldbody><body><joint type="hinge" axis="0 0 0"/><geom size="1"/></body>'
                   '</worldbody></mujoco>')
    with pytest.raises(sd.MjcfError, match="bad_robot.xml") as e:
        sd.load_mjcf(bad)
    assert "MuJoCo" in str(e.value) and "axis" in str(e.value).lower()
    with pytest.raises(sd.MjcfError, match="<string>.*unrecognized|<string>.*Unrecognized|<string>"):
        sd.load_mjcf("<mujoco><worldbody><bogus/></worldbody></mujoco>")
    with pytest.raises(sd.MjcfError, match="nothere.xml: file not found"):
        sd.load_mjcf(tmp_path / "nothere.xml")


def test_mutated_files_load_or_raise_mjcf_error(tmp_path, monkeypatch):
    """Seeded fuzzing: a mutated file gives a model with finite dynamics or one MjcfError naming it."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(2024)
    numbers = [m for m in __import__("re").finditer(r"-?\d+(\.\d+)?", ARM)]
    outcomes = {"model": 0, "error": 0}
    for k in range(40):
        text = ARM
        kind = k % 4
        if kind == 0:                                   # a number replaced by something odd
            m = numbers[rng.integers(len(numbers))]
            odd = ["0", "-1", "nan", "1e308", "inf", "", "1 2", "x"][rng.integers(8)]
            text = text[:m.start()] + odd + text[m.end():]
        elif kind == 1:                                 # a span deleted
            i = int(rng.integers(len(text) - 20))
            text = text[:i] + text[i + int(rng.integers(1, 20)):]
        elif kind == 2:                                 # a line duplicated
            lines = text.splitlines()
            i = int(rng.integers(len(lines)))
            text = "\n".join(lines[:i + 1] + lines[i:])
        else:                                           # an attribute renamed
            text = text.replace(["mass=", "axis=", "site=", "joint=", "pos="][rng.integers(5)], "bogus=", 1)
        path = tmp_path / f"mutant{k}.xml"
        path.write_text(text)
        try:
            model, _ = _load(path)
        except sd.MjcfError as e:
            assert f"mutant{k}.xml" in str(e)
            outcomes["error"] += 1
            continue
        outcomes["model"] += 1
        if model.nv:
            q = model.random_configuration(0)
            assert np.all(np.isfinite(sd.rnea(model, q, np.ones(model.nv), np.ones(model.nv))))
    assert outcomes["model"] and outcomes["error"], outcomes


def test_missing_mujoco_names_what_to_install(monkeypatch):
    real = builtins.__import__

    def no_mujoco(name, *args, **kw):
        if name == "mujoco" or name.startswith("mujoco."):
            raise ModuleNotFoundError("No module named 'mujoco'")
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_mujoco)
    with pytest.raises(ImportError, match=r"pip install 'sparsedyn\[mjcf\]'"):
        sd.load_mjcf(ARM)


def test_load_model_dispatches_by_extension_and_root(tmp_path):
    urdf = tmp_path / "one.xml"
    urdf.write_text('<?xml version="1.0"?><!-- a URDF with an .xml name --><robot name="one"><link name="base"/>'
                    '<link name="l1"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" '
                    'iyz="0"/></inertial></link><joint name="j" type="continuous"><parent link="base"/>'
                    '<child link="l1"/></joint></robot>')
    assert sd.load_model(urdf).joint_names == ("j",)
    mj = tmp_path / "arm.xml"
    mj.write_text(ARM)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.MjcfWarning)
        assert sd.load_model(mj).joint_names == ("j1", "j2", "j3")
        with pytest.raises(ValueError, match="floating_base"):
            sd.load_model(mj, floating_base=True)
    other = tmp_path / "x.xml"
    other.write_text("<sdf/>")
    with pytest.raises(sd.ModelError, match="root element is <sdf>"):
        sd.load_model(other)


def test_cli_info_reads_mjcf(capsys):
    from sparsedyn.cli import main
    path = str(DM_CONTROL / "suite" / "cartpole.xml")
    assert main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "cart-pole" in out and "slider: prismatic" in out and "hinge_1: revolute" in out
    assert main(["sparsity", path, "--problem", "id"]) == 0
    # two bodies: a, f, fx (6 each per body) + tau, qdd (one per dof) = 40 unknowns
    assert "model 'cart-pole': 40 unknowns" in capsys.readouterr().out


WORLD_SITES = """
<mujoco model="world_sites">
  <option gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <site name="anchor" pos="0.5 -0.2 0.1" euler="0.3 -0.2 1.1"/>
    <body name="stand" pos="0 0.3 0.2" euler="0.2 0 0.4">
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
      <site name="stand_top" pos="0 0 0.1" euler="0 0.5 0"/>
      <body name="arm" pos="0 0 0.3">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="0.7"/>
        <site name="tip" pos="0.4 0 0"/>
        <site name="arm" pos="0.2 0 0.01"/>
      </body>
    </body>
  </worldbody>
  <sensor><accelerometer site="stand_top" name="still"/></sensor>
</mujoco>
"""


def test_sites_fixed_to_the_world_are_frames_on_the_world():
    """A site on the world body, or on a body welded to it, is a frame with body -1 at MuJoCo's
    site_xpos / site_xmat; it does not move (zero velocity and Jacobian) and an ideal IMU there reads
    -g, as MuJoCo's accelerometer does.  A site named like a body is renamed and listed."""
    model, warned = _load(WORLD_SITES)
    mm = mujoco.MjModel.from_xml_string(WORLD_SITES)
    assert [model.frames[model.frame(n)].body for n in ("anchor", "stand_top", "site:arm")] == [-1, -1, 0]
    assert len(warned) == 1 and "renamed (arm -> site:arm)" in warned[0] and "not frames" not in warned[0]
    assert "accelerometer still: at a site fixed to the world" in warned[0]
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(4)
    for _ in range(3):
        q, v, a = rng.normal(size=(3, 1))
        md.qpos[:], md.qvel[:], md.qacc[:] = q, v, a
        mujoco.mj_inverse(mm, md)
        mujoco.mj_rnePostConstraint(mm, md)
        for s in range(mm.nsite):
            k = model.frame(f"site:{mm.site(s).name}" if mm.site(s).name == "arm" else mm.site(s).name)
            R, p = sd.frame_placement(model, q, k)
            assert np.abs(p - md.site_xpos[s]).max() <= TOL and np.abs(R - md.site_xmat[s].reshape(3, 3)).max() <= TOL
        k = model.frame("anchor")
        assert np.array_equal(sd.frame_velocity(model, q, v, k, "world"), np.zeros(6))
        assert np.array_equal(sd.frame_jacobian(model, q, k, "local_world_aligned"), np.zeros((6, 1)))
        assert np.array_equal(sd.frame_acceleration(model, q, v, a, k), np.zeros(6))
        omega, domega, proper = sd.frame_proper_acceleration(model, q, v, a, "stand_top")
        still = md.sensordata[mm.sensor("still").adr[0]:][:3]
        assert np.array_equal(omega, np.zeros(3)) and np.array_equal(domega, np.zeros(3))
        assert np.abs(proper - still).max() <= TOL * 10
    # batches broadcast like any frame's
    qs = rng.normal(size=(4, 1))
    R, p = sd.frame_placement(model, qs, "anchor")
    assert R.shape == (4, 3, 3) and np.array_equal(p[2], md.site_xpos[0])
    # nothing is measured at, or acts on the robot through, a frame of the world
    with pytest.raises(ValueError, match="frame 'anchor' is fixed to the world"):
        sd.EstimationProblem(model, contacts=["anchor"])
