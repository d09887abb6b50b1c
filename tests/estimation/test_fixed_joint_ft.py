"""F/T sensors on fixed joints (iCub's leg and foot sensors), against Pinocchio and through estimation.

Oracle: in the iCub URDF text the fixed joints ``l_leg_ft_sensor`` and ``l_foot_ft_sensor``
become revolute joints (random axes) held at q = 0 with zero velocity and acceleration;
Pinocchio's RNEA on that model gives ``data.f[j]``, the wrench the joint transmits to its
child, in the joint frame.  Ours comes from the ORIGINAL (merged) model, through
``EstimationProblem.simulate`` (classical Newton-Euler + the sensor rows).
"""

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
from conftest import rel_err
from erd import robots_dir

from sparsedyn import load_urdf
from sparsedyn.estimation import EstimationProblem
from sparsedyn.estimation.files import parse_sensors
from sparsedyn.estimation.casestudy import consistent_state
from sparsedyn.interop.pinocchio import force_from_pinocchio, q_to_pinocchio, v_to_pinocchio
from sparsedyn.model.sensors import ForceTorque, KnownWrench

ICUB = "icub_description/robots/icub.urdf"
UNFIXED = ("l_leg_ft_sensor", "l_foot_ft_sensor")
TOL = 1e-9
WORST = {}        # largest relative error seen per comparison (printed with -s)


def unfix(text, names, rng):
    root = ET.fromstring(text)
    for j in root.findall("joint"):
        if j.get("name") in names:
            assert j.get("type") == "fixed"
            axis = rng.normal(size=3)
            j.set("type", "revolute")
            j.find("axis").set("xyz", " ".join(repr(float(x)) for x in axis / np.linalg.norm(axis)))
            ET.SubElement(j, "limit", effort="10", velocity="10", lower="-1", upper="1")
    return ET.tostring(root, encoding="unicode")


@pytest.fixture(scope="module", params=[False, True], ids=["fixed-base", "floating-base"])
def icub(request):
    fb = request.param
    path = robots_dir() / ICUB
    rng = np.random.default_rng(7)
    ff = (pin.JointModelFreeFlyer(),) if fb else ()
    model = load_urdf(path, floating_base=fb)
    po = pin.buildModelFromUrdf(str(path), *ff)
    pm = pin.buildModelFromXML(unfix(path.read_text(), UNFIXED, rng), *ff)
    assert pm.njoints == po.njoints + 2 and model.nbodies == po.njoints - 1
    return model, po, pm


def pin_rnea(model, po, pm, q, v, a, wrenches):
    """Pinocchio's data (modified model) at our state; ``wrenches``: {frame: [n; f] at the frame}."""
    qo, vo, ao = q_to_pinocchio(model, q), v_to_pinocchio(model, v), v_to_pinocchio(model, a)
    qm, vm, am = pin.neutral(pm), np.zeros(pm.nv), np.zeros(pm.nv)     # the unfixed joints stay at 0
    for jid in range(1, po.njoints):
        k = pm.getJointId(po.names[jid])
        qm[pm.idx_qs[k]:pm.idx_qs[k] + po.nqs[jid]] = qo[po.idx_qs[jid]:po.idx_qs[jid] + po.nqs[jid]]
        for src, dst in ((vo, vm), (ao, am)):
            dst[pm.idx_vs[k]:pm.idx_vs[k] + po.nvs[jid]] = src[po.idx_vs[jid]:po.idx_vs[jid] + po.nvs[jid]]
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    for name, w in wrenches.items():
        F = pm.frames[pm.getFrameId(name)]
        fext[F.parentJoint] += F.placement.act(pin.Force(w[3:], w[:3]))
    pd = pm.createData()
    pin.rnea(pm, pd, qm, vm, am, fext)
    return pd


def sensors_for_oracle(rot):
    return [ForceTorque("leg", "l_leg_ft_sensor"), ForceTorque("foot", "l_foot_ft_sensor"),
            ForceTorque("leg_c2p", "l_leg_ft_sensor", direction="child_to_parent"),
            ForceTorque("foot_c2p", "l_foot_ft_sensor", direction="child_to_parent"),
            ForceTorque("foot_at_sole", "l_foot_ft_sensor", frame="l_sole"),
            ForceTorque("leg_at_hip2", "l_leg_ft_sensor", frame="l_hip_2"),
            ForceTorque("foot_rot", "l_foot_ft_sensor", direction="child_to_parent", rotation=rot)]


# External wrenches on the two merged bodies: (A) on the child side of both sensors, (B) on the parent side.
SIDES = {"child-side": ("l_sole", "l_hip_3", "r_sole"), "parent-side": ("l_ankle_2", "l_hip_2", "r_sole")}


# random states and wrenches load the free joint: the readings are compared, never estimated
@pytest.mark.filterwarnings("ignore::sparsedyn.estimation.ModelViolationWarning")
@pytest.mark.parametrize("sides", list(SIDES))
def test_fixed_joint_ft_matches_pinocchio(icub, sides):
    model, po, pm = icub
    rng = np.random.default_rng(11)
    rot = pin.rpy.rpyToMatrix(*rng.normal(size=3))
    prob = EstimationProblem(model, sensors=sensors_for_oracle(rot), contacts=SIDES[sides])
    jl, jf = pm.getJointId("l_leg_ft_sensor"), pm.getJointId("l_foot_ft_sensor")
    for _ in range(4):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        w = {c: np.r_[rng.normal(size=3), 30 * rng.normal(size=3)] for c in SIDES[sides]}
        y, _ = prob.measurements(q, v, a, w)
        got = prob.unpack(y)
        pd = pin_rnea(model, po, pm, q, v, a, w)
        leg, foot = (force_from_pinocchio(np.array(pd.f[j].vector)) for j in (jl, jf))
        sole = pm.frames[pm.getFrameId("l_sole")]
        assert sole.parentJoint == jf
        at_sole = force_from_pinocchio(np.array(sole.placement.actInv(pd.f[jf]).vector))
        hip2 = pm.frames[pm.getFrameId("l_hip_2")]
        assert hip2.parentJoint == pm.parents[jl]
        at_hip2 = force_from_pinocchio(np.array(hip2.placement.actInv(pm.jointPlacements[jl].act(pd.f[jl])).vector))
        expected = {"leg": leg, "foot": foot, "leg_c2p": -leg, "foot_c2p": -foot, "foot_at_sole": at_sole,
                    "leg_at_hip2": at_hip2, "foot_rot": -np.r_[rot.T @ foot[:3], rot.T @ foot[3:]]}
        for name, ref in expected.items():
            err = float(np.max(np.abs(got[name] - ref)) / np.max(np.abs(ref)))
            WORST[name] = max(WORST.get(name, 0.0), err)
            assert err < TOL, (name, err)
    print(f"\nworst relative error vs Pinocchio ({sides}, {model.joints[0].type} root):",
          {k: f"{x:.1e}" for k, x in WORST.items()})


def test_icub_urdf_sensors_estimate_torques_and_contacts(icub):
    """iCub with its own URDF F/T sensors (six, <gazebo> tags) and two foot contacts: exact data -> exact truth."""
    model = icub[0]
    assert [s.joint for s in model.sensors][-2:] == ["l_foot_ft_sensor", "r_foot_ft_sensor"]
    rng = np.random.default_rng(5)
    problems = [EstimationProblem(model, contacts=["l_sole", "r_sole"])]      # all six: least squares
    if model.joints[0].type == "free":      # the two foot sensors, base acceleration unknown: square
        problems.append(EstimationProblem(model, sensors=model.sensors[-2:], contacts=["l_sole", "r_sole"],
                                          unknown_accelerations=["root_joint"]))
    kinds = []
    for prob in problems:
        solver = prob.analyze()
        kinds.append(solver.verdict.kind)
        q, qd, qdd, w = consistent_state(prob, rng, batch=(3,))
        y, truth = prob.measurements(q, qd, qdd, w)
        e = solver.solve(q, qd, y)
        assert rel_err(e.tau, truth["tau"]) < TOL and rel_err(e.d, truth["d"]) < TOL
        for c in w:
            assert rel_err(e.contacts[c], truth["contacts"][c]) < TOL
        assert solver.flops()["total"] > 0          # the sensor rows also trace on symbolic (object) arrays
    assert kinds == (["over-determined", "well posed"] if len(problems) == 2 else ["over-determined"])


def test_direction_in_sensor_files_and_argument_errors(icub):
    model = icub[0]
    spec = parse_sensors({"contacts": ["l_sole"], "sensor": [
        {"type": "force_torque", "name": "a", "joint": "l_foot_ft_sensor", "direction": "child_to_parent"},
        {"type": "force_torque", "name": "b", "joint": "l_foot_ft_sensor", "frame": "l_sole",
         "rotation": [[0, -1, 0], [1, 0, 0], [0, 0, 1]]}]})
    a, b = spec["sensors"]
    assert (a.direction, b.direction, b.frame) == ("child_to_parent", "parent_to_child", "l_sole")
    prob = EstimationProblem(model, sensors=spec["sensors"], contacts=spec["contacts"])
    assert prob.addresses == {"qdd": (0, model.nv), "a": (model.nv, 6), "b": (model.nv + 6, 6)}
    with pytest.raises(ValueError, match=r"sensor 'x': direction 'up'; expected one of \('parent_to_child', "
                                         r"'child_to_parent'\)"):
        parse_sensors({"sensor": [{"type": "force_torque", "name": "x", "joint": "j", "direction": "up"}]})
    with pytest.raises(ValueError, match=r"sensor 'x': rotation must be a \(3, 3\) rotation matrix"):
        ForceTorque("x", "l_foot_ft_sensor", rotation=np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ValueError, match="sensor 'x': frame 'l_knee' is on body 'l_lower_leg', not on 'l_ankle_2', the "
                                         "body fixed joint 'l_foot_ft_sensor' was merged into"):
        EstimationProblem(model, sensors=[ForceTorque("x", "l_foot_ft_sensor", frame="l_knee")])


# random states and wrenches load the free joint: the readings are compared, never estimated
@pytest.mark.filterwarnings("ignore::sparsedyn.estimation.ModelViolationWarning")
def test_external_wrenches_on_both_sides_of_a_fixed_joint_sensor(icub):
    model = icub[0]
    ft = ForceTorque("ft", "l_foot_ft_sensor")
    with pytest.raises(ValueError, match=r"sensor 'ft': body 'l_ankle_2' has external wrenches on both sides of "
                                         r"fixed joint 'l_foot_ft_sensor' \(child side: \['l_sole'\], parent side: "
                                         r"\['l_ankle_2'\]\)"):
        EstimationProblem(model, sensors=[ft, KnownWrench("k1", "l_sole"), KnownWrench("k2", "l_ankle_2")])
    # a known wrench on the child side is seen by the sensor; on the parent side it is not
    rng = np.random.default_rng(3)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    k = np.r_[rng.normal(size=3), 10 * rng.normal(size=3)]
    zero = EstimationProblem(model, sensors=[ft]).measurements(q, v, a)[0]
    for frame, seen in (("l_sole", True), ("l_ankle_2", False)):
        prob = EstimationProblem(model, sensors=[ft, KnownWrench("k", frame)])
        y = prob.unpack(prob.measurements(q, v, a, known_wrenches={frame: k})[0])
        assert np.allclose(y["k"], k)
        assert (np.max(np.abs(y["ft"] - zero[-6:])) > 1e-3) == seen


def test_a_sensor_file_without_sensors_uses_the_urdf_sensors(icub, tmp_path):
    """examples/icub_feet_contacts.toml names only the contacts: the six URDF F/T sensors are measured.
    ``model_sensors`` adds them to a file's own sensors or leaves them out."""
    from pathlib import Path

    from sparsedyn.estimation.files import problem_from_file
    model = icub[0]
    urdf = [s.name for s in model.sensors]
    assert len(urdf) == 6
    example = Path(__file__).resolve().parents[2] / "examples" / "icub_feet_contacts.toml"
    prob = problem_from_file(model, example)
    assert [e.name for e in prob.entries] == ["qdd"] + urdf
    assert [c.frame for c in prob.contacts] == ["l_sole", "r_sole"]
    est = prob.analyze()
    q, qd, qdd, w = consistent_state(prob, np.random.default_rng(5), batch=(3,))
    y, truth = prob.measurements(q, qd, qdd, w)
    assert rel_err(est.solve(q, qd, y).d, truth["d"]) < TOL
    own = '[[sensor]]\ntype = "joint_torque"\nname = "knees"\njoints = ["l_knee", "r_knee"]\n'
    for extra, names in (("", ["knees"]), ("model_sensors = true\n", urdf + ["knees"]),
                         ("model_sensors = false\n", ["knees"])):
        f = tmp_path / "s.toml"
        f.write_text('contacts = ["l_sole"]\n' + extra + own)
        assert [e.name for e in problem_from_file(model, f).entries] == ["qdd"] + names
    f.write_text('contacts = ["l_sole"]\nmodel_sensors = "yes"\n')
    with pytest.raises(ValueError, match=r"s\.toml: model_sensors must be true or false, got 'yes'"):
        problem_from_file(model, f)
