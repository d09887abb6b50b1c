"""reduce_model and append_model against Pinocchio's buildReducedModel and appendModel, and identities.

Pinocchio is imported unconditionally (a missing oracle fails).  Joint-space quantities (rnea, crba,
aba) do not depend on the choice of body frames, so they are compared directly after converting the
layouts with ``sparsedyn.interop.pinocchio``; frame placements are compared by name.
"""

import warnings

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import pinocchio as ip
from sparsedyn.model import ModelError, UnknownNameError
from conftest import rel_err, rounding_bound
import erd

TOL = 1e-9


def from_pin_matrix(model, M):
    return ip.tau_from_pinocchio(model, ip.v_from_pinocchio(model, M).T).T


def compare_dynamics(model, pm, rng, n=3):
    """rnea, crba and aba of ``model`` equal Pinocchio's on ``pm`` at random states."""
    pd = pm.createData()
    for _ in range(n):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=(2, model.nv))
        qp, vp, ap = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
        tau = sd.rnea(model, q, v, a)
        assert rel_err(tau, ip.tau_from_pinocchio(model, pin.rnea(pm, pd, qp, vp, ap))) < TOL
        H = sd.crba(model, q)
        Hp = np.array(pin.crba(pm, pd, qp))
        Hp = np.triu(Hp) + np.triu(Hp, 1).T
        assert rel_err(H, from_pin_matrix(model, Hp)) < TOL
        aa = sd.aba(model, q, v, tau)
        assert rel_err(aa, ip.v_from_pinocchio(model, pin.aba(pm, pd, qp, vp, ip.tau_to_pinocchio(model, tau)))) \
            < TOL * np.linalg.cond(H)


def compare_frames(model, pm, rng):
    pd = pm.createData()
    q = model.random_configuration(rng)
    pin.framesForwardKinematics(pm, pd, ip.q_to_pinocchio(model, q))
    # Pinocchio's FIXED_JOINT frame of a locked joint sits before the joint's motion; our frame of
    # that name is the locked body's frame (after it), as for a moving joint: those are not compared.
    names = {f.name: k for k, f in reversed(list(enumerate(pm.frames)))
             if f.type not in (pin.JOINT, pin.FIXED_JOINT)}
    checked = 0
    for f in model.frames:
        if f.name in names:
            R, p = sd.frame_placement(model, q, f.name)
            M = pd.oMf[names[f.name]]
            assert rel_err(R, M.rotation) < TOL and rel_err(p, M.translation) < TOL, f.name
            checked += 1
    assert checked >= model.nbodies


def quiet_pair(robot, floating_base):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return erd.load_pair(robot, floating_base)


def pin_model(model):
    """Pinocchio's model of ``model`` without our frames named after joints: Pinocchio's
    buildReducedModel refuses a model where a JOINT frame and another frame share a name."""
    import dataclasses
    joint_named = set(model.joint_names) - set(model.body_names)
    fixed = tuple(fj._replace(frames=tuple(n for n in fj.frames if n not in joint_named)) for fj in model.fixed_joints)
    return ip.to_pinocchio(dataclasses.replace(model, frames=tuple(f for f in model.frames if f.name not in joint_named),
                                               fixed_joints=fixed))


LOCKS = {   # robot -> joints to lock (arms, a leg, a wrist ...)
    "talos_reduced": [n for side in "lr" for n in
                      (f"arm_{'left' if side == 'l' else 'right'}_{k}_joint" for k in range(1, 8))] + ["head_1_joint"],
    "solo12": ["FL_HFE", "FL_KFE", "HR_HAA"],
    "anymal_c": ["LF_HAA", "RH_KFE", "RH_HFE"],
    "ur5": ["shoulder_pan_joint", "wrist_2_joint"],
    "panda": ["panda_joint4", "panda_joint7", "panda_finger_joint1"],
}


@pytest.mark.parametrize("robot", sorted(LOCKS))
@pytest.mark.parametrize("floating_base", [False, True])
def test_reduce_model_matches_pinocchio_on_robots(robot, floating_base):
    model, _ = quiet_pair(robot, floating_base)
    pm = pin_model(model)
    rng = np.random.default_rng(1)
    q_ref = model.random_configuration(rng)
    locks = [n for n in LOCKS[robot] if n in model.joint_names]
    assert len(locks) == len(LOCKS[robot])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.edit.ReductionWarning)
        red = sd.reduce_model(model, locks, q_ref)
    pred = pin.buildReducedModel(pm, [pm.getJointId(n) for n in locks], ip.q_to_pinocchio(model, q_ref))
    assert tuple(pred.names)[1:] == red.joint_names
    assert red.nv == model.nv - sum(model.joints[model.joint(n)].nv for n in locks)
    compare_dynamics(red, pred, rng)
    compare_frames(red, pred, rng)
    assert red.total_mass == pytest.approx(model.total_mass if floating_base else red.total_mass, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_reduce_model_matches_pinocchio_on_random_trees(seed):
    model = sd.random_tree(14, branching=1.6, joint_types="all", seed=seed, floating_base=seed % 2 == 1, nframes=5)
    pm = ip.to_pinocchio(model)
    rng = np.random.default_rng(seed)
    q_ref = model.random_configuration(rng)
    # joints below the roots: a locked root joint would weld its frames to the world, which drops them
    movable = [n for n, j, p in zip(model.joint_names, model.joints, model.parent) if j.type != "free" and p >= 0]
    locks = list(rng.choice(movable, size=6, replace=False))
    red = sd.reduce_model(model, locks, q_ref)
    pred = pin.buildReducedModel(pm, [pm.getJointId(n) for n in locks], ip.q_to_pinocchio(model, q_ref))
    assert tuple(pred.names)[1:] == red.joint_names
    compare_dynamics(red, pred, rng)
    # every frame (named, and the locked bodies' own) is where it was at q_ref
    q = q_ref[np.concatenate([np.arange(model.nq)[model.q_slice(model.joint(n))] for n in red.joint_names])]
    assert set(red.frame_names) == set(model.frame_names)
    for f in model.frames:
        R0, p0 = sd.frame_placement(model, q_ref, f.name)
        R1, p1 = sd.frame_placement(red, q, f.name)
        assert rel_err(R1, R0) < TOL and rel_err(p1, p0) < TOL


def spatial_from_pinocchio(I):
    """Our (6, 6) spatial inertia ``[angular; linear]`` of a ``pinocchio.Inertia`` (``[linear; angular]``)."""
    P = np.r_[3:6, 0:3]
    return np.array(I.matrix())[np.ix_(P, P)]


def test_reduce_model_keeps_the_frames_of_bodies_welded_to_the_world():
    """Locking the first joints of a fixed-base arm welds their bodies to the world: their frames stay,
    as world frames where Pinocchio's buildReducedModel puts them (on the universe), and their inertia
    goes to the world's, which equals Pinocchio's universe inertia (with the file's base link)."""
    model, _ = quiet_pair("ur5", False)
    pm = pin_model(model)
    rng = np.random.default_rng(2)
    q_ref = model.random_configuration(rng)
    locks = ["shoulder_pan_joint", "shoulder_lift_joint", "wrist_2_joint"]
    red = sd.reduce_model(model, locks, q_ref)
    pred = pin.buildReducedModel(pm, [pm.getJointId(n) for n in locks], ip.q_to_pinocchio(model, q_ref))
    welded = {"shoulder_link", "upper_arm_link", "shoulder_pan_joint", "shoulder_lift_joint"}
    assert welded <= {f.name for f in red.frames if f.body < 0}
    assert set(red.frame_names) == set(model.frame_names)
    assert welded <= {f.name for f in pred.frames if f.parentJoint == 0}
    compare_frames(red, pred, rng)
    for name in welded:                                          # where they were at q_ref, for good
        R0, p0 = sd.frame_placement(model, q_ref, name)
        R1, p1 = sd.frame_placement(red, red.random_configuration(rng), name)
        assert rel_err(R1, R0) < TOL and rel_err(p1, p0) < TOL
    assert rel_err(red.world_inertia, spatial_from_pinocchio(pred.inertias[0])) < TOL
    compare_dynamics(red, pred, rng)


def test_reduce_model_with_no_joint_is_the_same_model():
    model = sd.humanoid()
    red = sd.reduce_model(model, [], model.random_configuration(0))
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=(2, model.nv))
        assert rel_err(sd.rnea(red, q, v, a), sd.rnea(model, q, v, a)) <= rounding_bound(model.nv)
        assert np.array_equal(sd.crba(red, q), sd.crba(model, q))
    assert red.frame_names == model.frame_names and red.joint_names == model.joint_names


def test_locked_dynamics_equal_the_full_model_with_zero_locked_motion():
    """Identity: with the locked joints at q_ref and zero velocity and acceleration there, the kept
    joints' forces of the full model are those of the reduced one; H_reduced is H's kept block."""
    model = sd.humanoid()
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    locks = ["l_elbow", "r_shoulder_roll", "neck_pitch", "l_knee"]
    red = sd.reduce_model(model, locks, q)
    keep = np.concatenate([np.arange(model.nv)[model.v_slice(model.joint(n))] for n in red.joint_names])
    qk = np.concatenate([q[model.q_slice(model.joint(n))] for n in red.joint_names])
    v, a = np.zeros((2, model.nv))
    v[keep], a[keep] = rng.normal(size=(2, red.nv))
    assert rel_err(sd.rnea(red, qk, v[keep], a[keep]), sd.rnea(model, q, v, a)[keep]) <= rounding_bound(model.nv, c=64)
    assert rel_err(sd.crba(red, qk), sd.crba(model, q)[np.ix_(keep, keep)]) <= rounding_bound(model.nv, c=64)


def test_reduce_model_armature_limits_and_fixed_joint_records():
    model = sd.humanoid().with_armature(np.arange(35) * 0.01)
    red = sd.reduce_model(model, ["l_knee"], model.neutral())
    k = model.v_slice(model.joint("l_knee")).start
    assert np.array_equal(red.armature, np.delete(model.armature, k))
    assert np.array_equal(red.lower, np.delete(model.lower, model.q_slice(model.joint("l_knee")).start))
    fj = red.fixed_joint("l_knee")
    assert red.body_names[fj.body] == "l_thigh"
    assert [red.body_names[c] for c in fj.children] == ["l_ankle_link"]
    assert "l_shank" in fj.frames
    # the child-side inertia is the shank's, in the thigh frame
    X = model.Xtree[model.joint("l_knee")]            # knee at zero: XJ = 1
    I = sd.spatial.motion_matrix(X).T @ model.inertia[model.body("l_shank")] @ sd.spatial.motion_matrix(X)
    assert rel_err(fj.inertia, I) <= rounding_bound(6)


def test_reduce_model_keeps_force_torque_sensors_and_trims_joint_sensors():
    model = sd.humanoid().with_sensors(sd.ForceTorque("knee_ft", "l_knee"),
                                       sd.JointTorque("legs", ["l_knee", "r_knee"]))
    with pytest.warns(sd.edit.ReductionWarning, match="legs.*l_knee"):
        red = sd.reduce_model(model, ["l_knee"])
    assert red.sensor("knee_ft").joint == "l_knee" and red.fixed_joint("l_knee")
    assert red.sensor("legs").joints == ["r_knee"]
    assert model.sensor("legs").joints == ["l_knee", "r_knee"]       # the input is unchanged


def test_reduce_model_bad_input():
    model = sd.humanoid()
    with pytest.raises(UnknownNameError, match="l_knee"):
        sd.reduce_model(model, ["l_kne"])
    with pytest.raises(ModelError, match="root_joint.*floating"):
        sd.reduce_model(model, ["root_joint"])
    with pytest.raises(ValueError, match="q_ref"):
        sd.reduce_model(model, ["l_knee"], np.zeros(5))
    with pytest.raises(ValueError, match="quaternion"):
        sd.reduce_model(model, ["l_knee"], np.zeros(model.nq))
    with pytest.raises(TypeError, match="names"):
        sd.reduce_model(model, [3])


# --- append_model ------------------------------------------------------------------------------

def gripper(armature=0.01):
    b = sd.ModelBuilder("gripper")
    b.add_body("palm", None, sd.make_joint("revolute", (0, 0, 1)), mass=0.4, com=[0, 0, 0.03],
               rot_inertia=np.diag([1e-3, 1e-3, 5e-4]), joint_name="wrist_spin")
    for s, y in (("left", 0.02), ("right", -0.02)):
        b.add_body(f"{s}_finger", "palm", sd.make_joint("prismatic", (0, np.sign(y), 0)), Xtree=(np.eye(3), [0, y, 0.06]),
                   mass=0.05, com=[0, 0, 0.02], rot_inertia=np.eye(3) * 1e-5, joint_name=f"{s}_finger_joint",
                   armature=armature)
    b.add_frame("tool", "palm", (sd.spatial.rotx(0.3).T, [0, 0, 0.1]))
    return b.build()


def placement(rng):
    return sd.spatial.quat_to_rot(sd.model.joints.quat_exp(rng.normal(size=3))), rng.normal(size=3)


@pytest.mark.parametrize("base", ["panda", "talos_reduced", "random"])
def test_append_model_matches_pinocchio(base):
    rng = np.random.default_rng(5)
    if base == "random":
        model = sd.random_tree(9, branching=1.5, joint_types="all", seed=2, floating_base=True, nframes=3)
        frame = "frame2"
    else:
        model, _ = quiet_pair(base, base == "talos_reduced")
        frame = {"panda": "panda_link8", "talos_reduced": "gripper_left_base_link"}.get(base)
    other = gripper(armature=0.0)       # Pinocchio's appendModel drops the appended model's armature
    R, p = placement(rng)
    out = sd.append_model(model, other, frame, (R, p))
    pm, po = pin_model(model), pin_model(other)
    pout = pin.appendModel(pm, po, pm.getFrameId(frame), pin.SE3(R, p))
    # Pinocchio may order the joints differently: compare through names
    assert set(pout.names[1:]) == set(out.joint_names)
    compare_dynamics_named(out, ip.from_pinocchio(pout), rng)
    # the tool frame is where the gripper's world frame, placed at `frame`, puts it
    q = out.random_configuration(rng)
    Rf, pf = sd.frame_placement(out, q, frame)
    qa = q[np.concatenate([np.arange(out.nq)[out.q_slice(out.joint(n))] for n in model.joint_names])]
    assert rel_err(Rf, sd.frame_placement(model, qa, frame)[0]) < TOL
    qo = q[np.concatenate([np.arange(out.nq)[out.q_slice(out.joint(n))] for n in other.joint_names])]
    Rt, pt = sd.frame_placement(other, qo, "tool")
    Rw, pw = Rf @ R, pf + Rf @ p
    Rg, pg = sd.frame_placement(out, q, "tool")
    assert rel_err(Rg, Rw @ Rt) < TOL and rel_err(pg, pw + Rw @ pt) < TOL


@pytest.mark.parametrize("arm", ["kinova_description/robots/kinova.urdf", "xarm_description/urdf/xarm7.urdf"])
def test_append_model_welds_a_fixed_base_arms_root_link(arm):
    """A fixed-base arm on a floating quadruped: what the arm's file welds to its world (kinova: the
    root link itself; xarm7: a link fixed to the root) is welded to the frame it is attached at, as
    Pinocchio's appendModel adds the universe's inertia there: the same total mass and dynamics."""
    base, pb = quiet_pair("hyq_description/robots/hyq_no_sensors.urdf", True)
    other, po = quiet_pair(arm, False)
    assert po.inertias[0].mass > 0.4
    assert rel_err(other.world_inertia, spatial_from_pinocchio(po.inertias[0])) < TOL
    R, p = placement(np.random.default_rng(8))
    out = sd.append_model(base, other, "base_link", (R, p))
    pout = pin.appendModel(pb, po, pb.getFrameId("base_link"), pin.SE3(R, p))
    assert out.total_mass == pytest.approx(sum(I.mass for I in pout.inertias), rel=rounding_bound(out.nbodies))
    assert out.total_mass == pytest.approx(base.total_mass + other.total_mass + po.inertias[0].mass,
                                           rel=rounding_bound(out.nbodies))
    compare_dynamics_named(out, ip.from_pinocchio(pout), np.random.default_rng(9))
    # at the world: the arm's welded links go to the world's inertia
    both = sd.append_model(other, other, None, (R, p), prefix="second_")
    assert both.world_inertia[5, 5] == pytest.approx(2 * po.inertias[0].mass, rel=rounding_bound(2))


def compare_dynamics_named(model, ref, rng):
    """``model`` and ``ref`` (the same joints, maybe in another order) have the same rnea and crba."""
    qi = np.concatenate([np.arange(model.nq)[model.q_slice(model.joint(n))] for n in ref.joint_names])
    vi = np.concatenate([np.arange(model.nv)[model.v_slice(model.joint(n))] for n in ref.joint_names])
    for _ in range(3):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=(2, model.nv))
        assert rel_err(sd.rnea(model, q, v, a)[vi], sd.rnea(ref, q[qi], v[vi], a[vi])) < TOL
        assert rel_err(sd.crba(model, q)[np.ix_(vi, vi)], sd.crba(ref, q[qi])) < TOL


def test_append_model_at_the_world_and_prefix():
    model = gripper()
    both = sd.append_model(model, model, None, (np.eye(3), [1.0, 0, 0]), prefix="second_")
    assert both.nv == 2 * model.nv
    assert "second_tool" in both.frame_names and "second_wrist_spin" in both.joint_names
    assert np.array_equal(both.armature, np.concatenate([model.armature, model.armature]))
    q = both.random_configuration(0)
    R1, p1 = sd.frame_placement(both, q, "tool")
    R2, p2 = sd.frame_placement(both, np.concatenate([q[3:], q[:3]]), "second_tool")
    assert rel_err(R2, R1) < TOL and rel_err(p2, p1 + [1.0, 0, 0]) < TOL


def test_append_model_bad_input():
    model = gripper()
    with pytest.raises(ModelError, match="palm.*prefix="):
        sd.append_model(model, model, "tool")
    with pytest.raises(UnknownNameError, match="tool"):
        sd.append_model(model, model, "tol", prefix="b_")
    with pytest.raises(ModelError, match="not a proper rotation"):
        sd.append_model(model, model, "tool", (np.diag([1.0, 1.0, -1.0]), np.zeros(3)), prefix="b_")
    with pytest.raises(ModelError, match="not a proper rotation"):
        sd.append_model(model, model, "tool", (2 * np.eye(3), np.zeros(3)), prefix="b_")
    with pytest.raises(TypeError, match="other"):
        sd.append_model(model, "gripper.urdf", "tool")


def test_geometries_move_with_their_bodies():
    """Shapes keep their world poses through reduce_model (locked at q_ref, also onto the world) and
    append_model (the appended model's world shapes go to the attachment frame)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(erd.robot_path("ur5"), geometry=True)
    assert len(model.geometries) > 4
    rng = np.random.default_rng(7)
    q_ref = model.random_configuration(rng)
    locks = ["shoulder_pan_joint", "elbow_joint"]       # the first locks the chain onto the world
    red = sd.reduce_model(model, locks, q_ref)
    keep = np.concatenate([np.arange(model.nq)[model.q_slice(model.joint(n))] for n in red.joint_names])
    for kind in ("visual", "collision"):
        R0, p0 = sd.geometry_placements(model, q_ref, kind)
        R1, p1 = sd.geometry_placements(red, q_ref[keep], kind)
        assert rel_err(R1, R0) < TOL and rel_err(p1, p0) < TOL
    Rp, pp = placement(rng)
    both = sd.append_model(gripper(), model, "tool", (Rp, pp), prefix="ur_")
    assert [g.name for g in both.geometries] == ["ur_" + g.name for g in model.geometries]
    q = both.random_configuration(rng)
    qa = q[np.concatenate([np.arange(both.nq)[both.q_slice(both.joint("ur_" + n))] for n in model.joint_names])]
    Rt, pt = sd.frame_placement(both, q, "tool")
    Rw, pw = Rt @ Rp, pt + Rt @ pp                      # the UR5's world frame, carried by the gripper
    for kind in ("visual", "collision"):
        R0, p0 = sd.geometry_placements(model, qa, kind)
        R1, p1 = sd.geometry_placements(both, q, kind)
        assert rel_err(R1, Rw @ R0) < TOL and rel_err(p1, pw + (Rw @ p0[..., None])[..., 0]) < TOL


def test_mimic_couplings_and_renamed_sensors():
    b = sd.ModelBuilder("hand")
    for k in range(1, 4):
        b.add_body(f"f{k}", None if k == 1 else f"f{k - 1}", sd.make_joint("revolute", (0, 1, 0)),
                   Xtree=None if k == 1 else (np.eye(3), [0.05, 0, 0]), mass=0.1, com=[0.02, 0, 0],
                   rot_inertia=1e-5 * np.eye(3), joint_name=f"j{k}")
    b.add_mimic("j3", "j2", 0.5, 0.1)
    b.add_mimic("j2", "j1", 2.0)
    hand = b.build().with_sensors(sd.JointTorque("all", ["j1", "j2", "j3"]), sd.ForceTorque("ft", "j2"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        red = sd.reduce_model(hand, ["j1"], np.array([0.3, 0.0, 0.0]))
    messages = sorted(str(w.message) for w in caught if w.category is sd.edit.ReductionWarning)
    assert len(messages) == 2 and "mimic coupling of joint 'j2' on 'j1'" in messages[1] \
        and "sensor 'all' measured the locked joint(s) ['j1']; it keeps ['j2', 'j3']" in messages[0]
    assert [(red.joint_names[m.joint], red.joint_names[m.mimicked], m.multiplier, m.offset) for m in red.mimic] \
        == [("j3", "j2", 0.5, 0.1)]
    both = sd.append_model(sd.serial_chain(2), hand, "link2", prefix="h_")
    assert both.sensor("h_all").joints == ["h_j1", "h_j2", "h_j3"] and both.sensor("h_ft").joint == "h_j2"
    assert [(both.joint_names[m.joint], both.joint_names[m.mimicked]) for m in both.mimic] == \
        [("h_j3", "h_j2"), ("h_j2", "h_j1")]
    assert hand.sensor("all").joints == ["j1", "j2", "j3"]          # the input is unchanged


SRDF_ROBOTS = {     # URDF, SRDF of example-robot-data (robots_dir-relative), floating base
    "talos": ("talos_data/robots/talos_reduced.urdf", "talos_data/srdf/talos.srdf"),
    "solo12": ("solo_description/robots/solo12.urdf", "solo_description/srdf/solo.srdf"),
    "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", "anymal_c_simple_description/srdf/anymal.srdf"),
    "go2": ("go2_description/urdf/go2.urdf", "go2_description/srdf/go2.srdf"),
    "romeo": ("romeo_description/urdf/romeo_small.urdf", "romeo_description/srdf/romeo.srdf"),
    "icub": ("icub_description/robots/icub_reduced.urdf", "icub_description/srdf/icub.srdf"),
    "panda": ("panda_description/urdf/panda.urdf", "panda_description/srdf/panda.srdf"),
}


@pytest.mark.parametrize("robot", sorted(SRDF_ROBOTS))
def test_reduce_at_the_srdf_reference_configurations(robot):
    """Every reference configuration of the robot's SRDF as q_ref, half of the joints locked (chosen at
    random), against Pinocchio's buildReducedModel at the same configuration."""
    urdf, srdf = SRDF_ROBOTS[robot]
    model, pm = quiet_pair(urdf, True)             # Pinocchio's model from the URDF ...
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.SrdfWarning)
        refs = sd.load_srdf(model, erd.robots_dir() / srdf).reference_configurations
    refs = refs or {"neutral": model.neutral()}
    if robot == "anymal_c":                         # ... except where a joint and a link share a name
        pm = pin_model(model)
    rng = np.random.default_rng(len(robot))
    movable = [n for n, j in zip(model.joint_names, model.joints) if j.type != "free"]
    for name, q_ref in refs.items():
        locks = list(rng.choice(movable, size=len(movable) // 2, replace=False))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.edit.ReductionWarning)
            red = sd.reduce_model(model, locks, q_ref)
        pred = pin.buildReducedModel(pm, [pm.getJointId(n) for n in locks], ip.q_to_pinocchio(model, q_ref))
        assert tuple(pred.names)[1:] == red.joint_names, name
        compare_dynamics(red, pred, rng, n=2)
def test_shapes_follow_reduce_and_append(rng):
    """Every shape keeps its world pose: reduce_model (locked joints at q_ref) and append_model (at a
    frame, with a placement) against the shapes of the original models."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arm = sd.load_urdf(erd.robot_path("panda"), geometry=True)       # link0's shapes are on the world
    locked = ["panda_joint1", "panda_joint4", "panda_joint6"]
    q_ref = arm.random_configuration(rng)
    small = sd.reduce_model(arm, locked, q_ref)
    keep = [i for i, n in enumerate(arm.joint_names) if n not in locked]
    q_full = q_ref.copy()
    q_full[keep] = small.random_configuration(rng)
    for kind in ("visual", "collision"):
        assert [g.name for g in small.geometry(kind)] == [g.name for g in arm.geometry(kind)]
        R, p = sd.geometry_placements(small, q_full[keep], kind)
        R0, p0 = sd.geometry_placements(arm, q_full, kind)
        assert rel_err(R, R0) <= rounding_bound(arm.nbodies) and rel_err(p, p0) <= rounding_bound(arm.nbodies)
    assert small.geometry()[1].body == -1                                # joint1 locked: link1 is on the world
    # append a second arm on the hand, with a placement
    placement = (sd.spatial.rpy_to_rot(np.array([0.1, 0.2, 0.3])), np.array([0.0, 0.05, 0.1]))
    both = sd.append_model(arm, arm, "panda_hand", placement, prefix="b_")
    qa, qb = arm.random_configuration(rng), arm.random_configuration(rng)
    at = arm.subtree_end[arm.frames[arm.frame("panda_hand")].body]     # the second arm's q follows the hand's subtree
    q = np.concatenate([qa[:at], qb, qa[at:]])
    Rh, ph = sd.frame_placement(arm, qa, "panda_hand")
    Rb, pb = sd.geometry_placements(arm, qb, "visual")
    Ra, pa = sd.geometry_placements(arm, qa, "visual")
    R, p = sd.geometry_placements(both, q, "visual")
    n = len(arm.geometry("visual"))
    assert [g.name for g in both.geometry("visual")] == [g.name for g in arm.geometry("visual")] + \
        ["b_" + g.name for g in arm.geometry("visual")]
    Rp, pp = Rh @ placement[0], ph + Rh @ placement[1]                  # the second arm's world in the world
    tol = rounding_bound(2 * arm.nbodies)
    assert rel_err(R[:n], Ra) <= tol and rel_err(p[:n], pa) <= tol
    assert rel_err(R[n:], Rp @ Rb) <= tol and rel_err(p[n:], pp + pb @ Rp.T) <= tol
