"""URDF loading and writing, checked against Pinocchio's URDF parser on example-robot-data."""

import re
import sys
import warnings

import numpy as np
import pinocchio as pin
import pytest
from defusedxml import ElementTree as DET
from scipy.spatial.transform import Rotation

import sparsedyn as sd
from sparsedyn import Mimic, ModelBuilder, make_joint, spatial as sp
from sparsedyn.interop.pinocchio import q_to_pinocchio
from sparsedyn.io.urdf import UrdfError, UrdfWarning, load_urdf, to_urdf

from conftest import rel_err
from erd import robots_dir


ROBOTS = robots_dir()
ROBOT_FILES = sorted(str(p.relative_to(ROBOTS)) for p in ROBOTS.rglob("*.urdf"))

# Files of example-robot-data that load_urdf rejects, with the data error it must report.
# Pinocchio loads the negative-inertia ones without checking; ur3.urdf has no links at all.
INVALID = {
    "ur_description/urdf/ur3.urdf": ("empty robot", None),
    "romeo_description/urdf/romeo_laas_small.urdf": (r"link 'body' <inertial>: .*negative eigenvalue", "body"),
    **{f"tiago_description/robots/{f}.urdf": (r"link 'base_antenna_left_link' <inertial>: .*negative eigenvalue",
                                              "base_antenna_left_link")
       for f in ("tiago", "tiago_dual", "tiago_no_hand")},
}
VALID = [f for f in ROBOT_FILES if f not in INVALID]


def test_example_robot_data_is_installed():
    assert len(ROBOT_FILES) > 40 and set(INVALID) <= set(ROBOT_FILES)


def pin_load(path, floating_base):
    return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating_base else \
        pin.buildModelFromUrdf(str(path))


def pin_frame_id(pm, name):
    """Pinocchio may have a joint and a link frame of the same name; prefer the link (BODY) frame."""
    return pm.getFrameId(name, pin.BODY) if pm.existFrame(name, pin.BODY) else pm.getFrameId(name)


def assert_fk_matches(m, pm, rng, n=2):
    """Body and named-frame world placements agree with Pinocchio's oMi / oMf; returns the worst error."""
    pd = pm.createData()
    worst = 0.0
    shared = [(k, pin_frame_id(pm, f.name)) for k, f in enumerate(m.frames) if pm.existFrame(f.name)]
    assert len(shared) == len(m.frames), "every frame of ours is a Pinocchio frame"
    for _ in range(n):
        q = m.random_configuration(rng)
        R, p = sd.forward_kinematics(m, q)
        pin.framesForwardKinematics(pm, pd, q_to_pinocchio(m, q))
        for i in range(m.nbodies):
            worst = max(worst, rel_err(R[i], pd.oMi[i + 1].rotation), rel_err(p[i], pd.oMi[i + 1].translation))
        if m.frames:
            Rf, pf = sd.frame_placements(m, q)
            for k, fid in shared:
                worst = max(worst, rel_err(Rf[k], pd.oMf[fid].rotation), rel_err(pf[k], pd.oMf[fid].translation))
    assert worst < 1e-9
    return worst


@pytest.mark.filterwarnings("ignore::sparsedyn.io.urdf.UrdfWarning")   # third-party data, checked below
@pytest.mark.parametrize("floating_base", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("file", VALID)
def test_example_robot_matches_pinocchio(file, floating_base, record_property):
    path = ROBOTS / file
    m = load_urdf(path, floating_base=floating_base)
    try:
        pm = pin_load(path, floating_base)
    except Exception as e:   # noqa: BLE001 - Pinocchio failing is recorded, our load was checked above
        record_property("pinocchio_failure", f"{type(e).__name__}: {e}")
        return
    assert list(m.joint_names) == list(pm.names[1:])
    assert m.nv == pm.nv and m.nbodies == pm.njoints - 1
    # Pinocchio's inertias[0] (universe) collects what is fixed to the world; we have no body for it.
    assert m.total_mass == pytest.approx(sum(pm.inertias[i].mass for i in range(1, pm.njoints)), rel=1e-12, abs=1e-12)
    for i in range(m.nbodies):
        mass, com, Ic = sp.inertia_components(m.inertia[i])
        Y = pm.inertias[i + 1]
        assert mass == pytest.approx(Y.mass, rel=1e-12, abs=1e-15)
        assert rel_err(Ic, Y.inertia) < 1e-12
        if mass > 0:
            assert rel_err(com, Y.lever) < 1e-12
    assert_fk_matches(m, pm, np.random.default_rng(sum(map(ord, file))))


@pytest.mark.filterwarnings("ignore:.*triangle inequality:sparsedyn.io.urdf.UrdfWarning")   # same links, also
@pytest.mark.parametrize("file", sorted(INVALID))
def test_example_robot_data_errors_are_reported(file):
    pattern, link = INVALID[file]
    with pytest.raises(UrdfError, match=pattern):
        load_urdf(ROBOTS / file)
    if link is not None:
        with pytest.raises(UrdfError, match="invalid_inertia='warn'"):
            load_urdf(ROBOTS / file)
    if link is None:
        with pytest.raises(ValueError):     # Pinocchio rejects the empty robot too
            pin.buildModelFromUrdf(str(ROBOTS / file))
    else:   # the defect is in the data (Pinocchio loads it without checking)
        pin.buildModelFromUrdf(str(ROBOTS / file))
        el = next(x for x in DET.parse(ROBOTS / file).getroot().findall("link") if x.get("name") == link)
        v = {k: float(el.find("inertial/inertia").get(k)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I = [[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]], [v["ixz"], v["iyz"], v["izz"]]]
        assert np.linalg.eigvalsh(I).min() < -1e-3 * np.linalg.eigvalsh(I).max()
        # ... and the file loads as written when the user asks for it, agreeing with Pinocchio
        with pytest.warns(UrdfWarning, match=f"negative eigenvalue.*on links: .*{link}"):
            m = load_urdf(ROBOTS / file, invalid_inertia="warn")
        assert_fk_matches(m, pin_load(ROBOTS / file, False), np.random.default_rng(0))


@pytest.mark.parametrize("file, frames", [
    ("panda_description/urdf/panda.urdf", ["panda_hand", "panda_link8", "panda_hand_tcp", "panda_hand_joint"]),
    ("solo_description/robots/solo12.urdf", ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]),
    ("anymal_b_simple_description/robots/anymal.urdf", ["LF_FOOT", "RH_FOOT"]),
])
def test_merged_links_are_frames(file, frames):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UrdfWarning)
        m = load_urdf(ROBOTS / file, floating_base=True)
    pm = pin_load(ROBOTS / file, True)
    pd = pm.createData()
    q = m.random_configuration(np.random.default_rng(7))
    pin.forwardKinematics(pm, pd, q_to_pinocchio(m, q))
    pin.updateFramePlacements(pm, pd)
    for name in frames:
        assert m.frames[m.frame(name)].name == name
        assert name not in m.body_names          # merged by a fixed joint, not a body
        R, p = sd.frame_placement(m, q, name)
        M = pd.oMf[pin_frame_id(pm, name)]
        assert rel_err(R, M.rotation) < 1e-12 and rel_err(p, M.translation) < 1e-12


@pytest.mark.filterwarnings("ignore::sparsedyn.io.urdf.UrdfWarning")
def test_mimic_kept_as_data_with_independent_joints():
    m = load_urdf(ROBOTS / "panda_description/urdf/panda.urdf")
    assert m.mimic == (Mimic(m.joint("panda_finger_joint2"), m.joint("panda_finger_joint1"), 1.0, 0.0),)
    for file in ("panda_description/urdf/panda.urdf", "talos_data/robots/talos_full_v2.urdf",
                 "romeo_description/urdf/romeo.urdf", "pr2_description/urdf/pr2.urdf"):
        path = ROBOTS / file
        m = load_urdf(path)
        moving = {j.get("name") for j in DET.parse(path).getroot().findall("joint") if j.get("type") != "fixed"}
        tags = {(j.get("name"), mm.get("joint"), float(mm.get("multiplier", 1)), float(mm.get("offset", 0)))
                for j in DET.parse(path).getroot().findall("joint") for mm in j.findall("mimic")}
        expected = {t for t in tags if t[0] in moving and t[1] in moving}
        assert len(expected) >= 1
        assert {(m.joint_names[x.joint], m.joint_names[x.mimicked], x.multiplier, x.offset) for x in m.mimic} \
            == expected
        assert m.nv == pin.buildModelFromUrdf(str(path)).nv    # mimicking joints stay independent
        if all(x.mimicked < x.joint for x in m.mimic):
            # Pinocchio's mimic build needs each mimicked joint first (talos and romeo fail it).
            assert pin.buildModelFromUrdf(str(path), mimic=True).nv == m.nv - len(m.mimic)


# --- hand-made URDFs -------------------------------------------------------------------

def link(name, mass=1.0, xyz="0 0 0", rpy="0 0 0", I=(0.1, 0, 0, 0.1, 0, 0.1)):
    ixx, ixy, ixz, iyy, iyz, izz = I
    return (f'<link name="{name}"><inertial><origin xyz="{xyz}" rpy="{rpy}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/></inertial></link>')


def joint(name, parent, child, type="revolute", xyz="0 0 0", rpy="0 0 0", axis="0 0 1", extra=""):
    limit = '<limit lower="-2" upper="2" effort="5" velocity="3"/>' if type in ("revolute", "prismatic") else ""
    return (f'<joint name="{name}" type="{type}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>{limit}{extra}</joint>')


def robot(*parts, name="r"):
    return f'<robot name="{name}">' + "".join(parts) + "</robot>"


# Root children in document order zz, mm, aa; 'mm' is fixed and carries b_j (document first) and a_j.
ORDER_URDF = robot(
    link("base"), link("a"), link("b"), link("f"), link("c"), link("d"), link("x"), link("y"),
    joint("zz", "base", "a", xyz="0 0 1"),
    joint("mm", "base", "f", "fixed", xyz="0.2 0 0", rpy="0.1 0.2 0.3"),
    joint("aa", "base", "b", axis="1 0 0", xyz="0 0.3 0"),
    joint("b_j", "f", "c", "prismatic", axis="0 1 1"),
    joint("a_j", "f", "d", "continuous", axis="1 2 3", xyz="0.1 0.1 0"),
    joint("y", "b", "y", xyz="0 0 0.5"),
    joint("x", "b", "x", xyz="0 0.5 0"),
)


def test_joint_order_is_pinocchios_alphabetical_depth_first():
    m = load_urdf(ORDER_URDF)
    pm = pin.buildModelFromXML(ORDER_URDF)
    assert list(m.joint_names) == ["aa", "x", "y", "a_j", "b_j", "zz"] == list(pm.names[1:])
    assert list(m.body_names) == ["b", "x", "y", "d", "c", "a"]
    np.testing.assert_array_equal(m.parent, [-1, 0, 0, -1, -1, -1])
    assert m.root_name == "base" and m.name == "r"
    assert_fk_matches(m, pm, np.random.default_rng(0), n=3)
    mf = load_urdf(ORDER_URDF, floating_base=True)
    pmf = pin.buildModelFromXML(ORDER_URDF, pin.JointModelFreeFlyer())
    assert list(mf.joint_names) == ["root_joint", "aa", "x", "y", "a_j", "b_j", "zz"] == list(pmf.names[1:])
    assert mf.body_names[0] == "base" and mf.frames[mf.frame("f")].body == 0     # f merged into the base
    assert_fk_matches(mf, pmf, np.random.default_rng(1), n=3)


def test_fixed_chains_frames_and_joint_types_match_pinocchio():
    """World-fixed chains before the first moving joint, fixed chains mid-tree, floating and planar joints."""
    text = robot(
        link("world_link"), link("pedestal"), link("mount"), link("arm"), link("elbow_plate"),
        link("elbow_cover", 0.3, "0.01 0.02 0", "0.5 0 0"), link("forearm"), link("tip", 0.0, I=(0,) * 6),
        link("drone"), link("cart"),
        joint("j_pedestal", "world_link", "pedestal", "fixed", xyz="0 0 0.5", rpy="0 0 1.2"),
        joint("j_mount", "pedestal", "mount", "fixed", xyz="0.1 0 0", rpy="0.3 0 0"),
        joint("shoulder", "mount", "arm", axis="0 1 0", xyz="0 0 0.2", rpy="0 0.4 0"),
        joint("plate", "arm", "elbow_plate", "fixed", xyz="0.3 0 0", rpy="0.1 0.2 0.3"),
        joint("cover", "elbow_plate", "elbow_cover", "fixed", xyz="0 0.05 0", rpy="-0.4 0 0.2"),
        joint("elbow", "elbow_cover", "forearm", "prismatic", axis="0.3 -0.4 0.5", xyz="0.1 0.1 0.1"),
        joint("tool", "forearm", "tip", "fixed", xyz="0 0 0.25", rpy="3.0 -1.2 0.7"),
        joint("fly", "mount", "drone", "floating", xyz="1 0 0", rpy="0 1.5707963267948966 0"),
        joint("slide", "drone", "cart", "planar", xyz="0 0.2 0", rpy="0.2 0 0"),
    )
    for floating_base in (False, True):
        m = load_urdf(text, floating_base=floating_base)
        pm = pin.buildModelFromXML(text, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromXML(text)
        assert list(m.joint_names) == list(pm.names[1:])
        assert [j.type for j in m.joints][-4:] == ["free", "planar", "revolute", "prismatic"]
        carriers = {"elbow_plate": "arm", "elbow_cover": "arm", "plate": "arm", "cover": "arm",
                    "tip": "forearm", "tool": "forearm"}
        for frame, body in carriers.items():
            assert m.frames[m.frame(frame)].body == m.body(body)
        assert ("pedestal" in m.frame_names) == floating_base     # world-fixed links have no body
        assert_fk_matches(m, pm, np.random.default_rng(3), n=3)


def test_fixed_child_inertia_is_merged():
    rpy1, rpy_j, rpy2 = (0.3, -0.2, 0.5), (0.2, 0.5, -0.3), (1.0, 0.4, -0.7)
    I1, I2 = (0.3, 0.01, -0.02, 0.4, 0.03, 0.5), (0.01, 0.0, 0.001, 0.02, 0.0, 0.025)
    c1, pj, c2 = np.array([0.1, 0.2, 0.3]), np.array([0.4, -0.1, 0.2]), np.array([-0.05, 0.1, 0.02])
    fmt = lambda v: " ".join(map(str, v))   # noqa: E731
    text = robot(
        link("base", 7.0),
        link("arm", 2.0, fmt(c1), fmt(rpy1), I1), link("tool", 0.5, fmt(c2), fmt(rpy2), I2),
        joint("shoulder", "base", "arm", axis="0 1 0", xyz="0 0 1", rpy="0 0 0.3"),
        joint("wrist", "arm", "tool", "fixed", xyz=fmt(pj), rpy=fmt(rpy_j)))
    m = load_urdf(text)
    assert m.nbodies == 1 and m.total_mass == pytest.approx(2.5)      # the base is the world

    # By hand: rotate each inertia into arm axes, then the parallel-axis theorem about the joint CoM.
    def sym(v):
        ixx, ixy, ixz, iyy, iyz, izz = v
        return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    Rot = lambda rpy: Rotation.from_euler("xyz", rpy).as_matrix()   # noqa: E731  extrinsic x, y, z = Rz Ry Rx
    Ia = Rot(rpy1) @ sym(I1) @ Rot(rpy1).T
    Ib = Rot(rpy_j) @ Rot(rpy2) @ sym(I2) @ Rot(rpy2).T @ Rot(rpy_j).T
    cb = pj + Rot(rpy_j) @ c2
    c = (2.0 * c1 + 0.5 * cb) / 2.5
    Ic = sum(Ik + mk * (np.dot(ck - c, ck - c) * np.eye(3) - np.outer(ck - c, ck - c))
             for Ik, mk, ck in ((Ia, 2.0, c1), (Ib, 0.5, cb)))
    mass, com, I = sp.inertia_components(m.inertia[0])
    assert mass == pytest.approx(2.5, rel=1e-15)
    assert rel_err(com, c) < 1e-14 and rel_err(I, Ic) < 1e-14
    Y = pin.buildModelFromXML(text).inertias[1]
    assert Y.mass == pytest.approx(mass) and rel_err(Y.lever, com) < 1e-14 and rel_err(Y.inertia, I) < 1e-14


def test_limits_and_sources(tmp_path):
    text = robot(link("base"), link("a"), link("b"), link("c"), link("d"),
                 joint("r", "base", "a"), joint("c", "a", "b", "continuous",
                                                extra='<limit lower="-1" upper="1" effort="7" velocity="8"/>'),
                 joint("p", "b", "c", "prismatic"), joint("free", "c", "d", "revolute").replace(
                     '<limit lower="-2" upper="2" effort="5" velocity="3"/>', ""))
    path = tmp_path / "limits.urdf"
    path.write_text(text)
    for source in (text, path, str(path)):
        m = load_urdf(source, name="lim")
        assert m.name == "lim"
        np.testing.assert_array_equal(m.lower, [-2, -np.inf, -2, -np.inf])
        np.testing.assert_array_equal(m.upper, [2, np.inf, 2, np.inf])
        np.testing.assert_array_equal(m.effort_limit, [5, 7, 5, np.inf])
        np.testing.assert_array_equal(m.velocity_limit, [3, 8, 3, np.inf])
    assert load_urdf(path).name == "r"
    # Leading blanks or a byte-order mark before an XML declaration, and a default XML namespace.
    ns = text.replace('<robot name="r">', '<robot xmlns="http://example.org/urdf" name="r">')
    for source in ("\n  " + text, '\ufeff \n<?xml version="1.0" encoding="utf-8"?>\n' + ns):
        assert load_urdf(source).joint_names == ("r", "c", "p", "free")


def test_zero_and_missing_inertia_accepted_without_warning():
    text = robot(link("base"), link("massless", 0.0, I=(0,) * 6), '<link name="dummy"/>',
                 joint("j1", "base", "massless"), joint("j2", "massless", "dummy", "fixed"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = load_urdf(text)
    assert m.nbodies == 1 and not np.any(m.inertia)


def test_triangle_inequality_warning_lists_links():
    text = robot(link("base"), link("rod", I=(0.0, 0, 0, 0.0, 0, 1.0)), link("ok", I=(0.1, 0, 0, 0.2, 0, 0.3)),
                 link("flat", I=(0.1, 0, 0, 0.1, 0, 0.3)),
                 joint("j1", "base", "rod"), joint("j2", "rod", "ok"), joint("j3", "ok", "flat"))
    with pytest.warns(UrdfWarning, match=r"<string>: .*triangle inequality.*links: rod, flat$") as record:
        load_urdf(text)
    assert len(record) == 1


def test_skipped_mimic_warns():
    text = robot(link("base"), link("a"), link("b"), link("c"),
                 joint("j1", "base", "a"), joint("j2", "a", "b", extra='<mimic joint="ghost"/>'),
                 joint("j3", "b", "c", "fixed", extra='<mimic joint="j1" multiplier="2"/>'))
    with pytest.warns(UrdfWarning, match=r"<mimic> ignored on joints 'j2' \(mimics missing joint 'ghost'\); "
                                         r"on 1 fixed joint \(nothing to follow\): j3$"):
        m = load_urdf(text)
    assert m.mimic == () and m.nv == 2


def test_talos_mimic_note_is_one_warning_naming_each_joint_once_at_the_users_line():
    """talos_reduced's 12 fixed gripper joints carry <mimic>: one warning, each joint named once,
    attributed to this file's line (through load_model, as a user calls it)."""
    from erd import robot_path
    path = robot_path("talos_reduced")
    fixed = [j.get("name") for j in DET.parse(path).getroot().iter("joint")
             if j.get("type") == "fixed" and j.find("mimic") is not None]
    assert len(fixed) == 12
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sd.load_model(path)
    notes = [w for w in caught if "<mimic>" in str(w.message)]
    assert len(notes) == 1 and notes[0].filename == __file__
    text = str(notes[0].message)
    assert "12 fixed joints" in text and all(text.count(name) == 1 for name in fixed)


# --- errors ----------------------------------------------------------------------------

BASE = link("base") + link("a")


@pytest.mark.parametrize("text, pattern", [
    ("<model/>", r"<string>: root element is <model>, expected <robot>"),
    (robot(), r"<string>: <robot>: empty robot: no <link> elements"),
    (robot(BASE, joint("j", "base", "nowhere")), r"<string>: joint 'j': child link 'nowhere' does not exist"),
    (robot(BASE, joint("j", "nowhere", "a")), r"<string>: joint 'j': parent link 'nowhere' does not exist"),
    (robot(BASE, link("b")), r"<string>: <robot>: 3 root links .*'base', 'a', 'b'"),
    (robot(BASE, link("b"), joint("j1", "base", "a"), joint("j2", "b", "a")),
     r"<string>: link 'a': has two parent joints, 'j1' and 'j2'"),
    (robot(BASE, link("b"), link("c"), joint("j1", "base", "a"), joint("j2", "b", "c"), joint("j3", "c", "b")),
     r"<string>: <robot>: links 'b', 'c' form a cycle"),
    (robot(BASE, joint("j1", "base", "a"), joint("j2", "a", "base")), r"<string>: <robot>: no root link"),
    (robot(BASE, joint("j", "a", "a")), r"<string>: joint 'j': link 'a' is its own parent"),
    (robot(BASE, joint("knee", "base", "a", "hinge")),
     r"<string>: joint 'knee': unknown joint type 'hinge'; known types: continuous, fixed, floating, planar, "
     r"prismatic, revolute"),
    (robot(BASE, link("a")), r"<string>: link 'a': link name used twice"),
    (robot(BASE, link("b"), joint("j", "base", "a"), joint("j", "a", "b")),
     r"<string>: joint 'j': joint name used twice"),
    (robot(BASE, joint("j", "base", "a", "planar", axis="1 0 0")),
     r"<string>: joint 'j': planar joints are supported only with <axis xyz=\"0 0 1\">"),
    (robot(BASE, joint("j", "base", "a", axis="0 0 0")), r"<string>: joint 'j' <axis>: axis must be a nonzero vector"),
    (robot(BASE, '<joint name="j" type="revolute"><parent link="base"/><child link="a"/>'
                 '<limit upper="-1" effort="1" velocity="1"/></joint>'),
     r"<string>: joint 'j' <limit>: lower limit 0.0 is greater than upper limit -1.0"),
])
def test_structural_errors(text, pattern):
    with pytest.raises(UrdfError, match=pattern):
        load_urdf(text)


@pytest.mark.parametrize("text, pattern", [
    (robot('<link/>'), r"<string>: <link>: missing required attribute 'name'"),
    (robot(BASE, '<joint name="j"><parent link="base"/><child link="a"/></joint>'),
     r"joint 'j': missing required attribute 'type'"),
    (robot(BASE, '<joint name="j" type="fixed"><child link="a"/></joint>'),
     r"joint 'j': missing required element <parent>"),
    (robot(BASE, '<joint name="j" type="fixed"><parent/><child link="a"/></joint>'),
     r"joint 'j' <parent>: missing required attribute 'link'"),
    (robot(link("base").replace('<mass value="1.0"/>', "<mass/>")),
     r"link 'base' <inertial> <mass>: missing required attribute 'value'"),
    (robot(link("base").replace('<mass value="1.0"/>', "")),
     r"link 'base' <inertial>: missing required element <mass>"),
    (robot(link("base").replace('ixy="0" ', "")),
     r"link 'base' <inertial> <inertia>: missing required attribute 'ixy'"),
    (robot(BASE, joint("j", "base", "a").replace('effort="5" ', "")),
     r"joint 'j' <limit>: missing required attribute 'effort'"),
    (robot(BASE, joint("j", "base", "a").replace('<axis xyz="0 0 1"/>', "<axis/>")),
     r"joint 'j' <axis>: missing required attribute 'xyz'"),
])
def test_missing_required(text, pattern):
    with pytest.raises(UrdfError, match=pattern):
        load_urdf(text)


@pytest.mark.parametrize("text, pattern", [
    (robot(link("foot", mass="abc")), r"link 'foot' <inertial> <mass>: value='abc': 'abc' is not a number"),
    (robot(link("foot", mass="1_0")), r"link 'foot' <inertial> <mass>: value='1_0': '1_0' is not a number"),
    (robot(link("foot", xyz="1 2")), r"link 'foot' <inertial> <origin>: xyz='1 2': expected 3 numbers, got 2"),
    (robot(BASE, joint("knee", "base", "a", rpy="0 0 0 0")),
     r"joint 'knee' <origin>: rpy='0 0 0 0': expected 3 numbers, got 4"),
    (robot(link("foot", mass="nan")), r"link 'foot' <inertial> <mass>: value='nan': NaN and infinite values"),
    (robot(BASE, joint("knee", "base", "a", xyz="0 -inf 0")),
     r"joint 'knee' <origin>: xyz='0 -inf 0': NaN and infinite"),
    (robot(link("foot", mass="1e999")),
     r"link 'foot' <inertial> <mass>: value='1e999': value out of floating-point range"),
    (robot(link("foot", mass=-1.5)), r"link 'foot' <inertial>: negative mass -1.5"),
    (robot(link("foot", I=(1, 0, 0, 1, 0, -0.5))),
     r"link 'foot' <inertial>: inertia matrix has a negative eigenvalue -0.5"),
    (robot(link("foot", I=(0.1, 0.2, 0, 0.1, 0, 0.1))),
     r"link 'foot' <inertial>: inertia matrix has a negative eigenvalue"),
])
def test_bad_values(text, pattern):
    with pytest.raises(UrdfError, match=f"<string>: {pattern}"):
        load_urdf(text)


def test_negative_eigenvalue_tolerance_is_relative_to_the_robot():
    # Exporter noise far below the robot's inertia scale reads as zero (icub has such links) ...
    load_urdf(robot(link("base", I=(1, 0, 0, 1, 0, 1)), link("a", I=(0, 0, 2e-20, 0, 0, 0)), joint("j", "base", "a")))
    # ... but the same matrix is indefinite when it is all there is.
    with pytest.raises(UrdfError, match="link 'a' <inertial>: inertia matrix has a negative eigenvalue -2e-20"):
        load_urdf(robot(link("a", I=(0, 0, 2e-20, 0, 0, 0))))


def test_file_errors(tmp_path):
    missing = tmp_path / "missing.urdf"
    with pytest.raises(UrdfError, match=f"^{re.escape(str(missing))}: cannot read the URDF file: file not found$"):
        load_urdf(missing)
    with pytest.raises(UrdfError, match=f"^{re.escape(str(tmp_path))}: is a directory; expected a regular URDF file"):
        load_urdf(tmp_path)
    bad = tmp_path / "bad.urdf"
    bad.write_text('<robot name="r">\n  <link name="a">\n</robot>\n')
    pattern = rf"^{re.escape(str(bad))}: malformed XML at line 3, column 3: mismatched tag$"
    with pytest.raises(UrdfError, match=pattern) as info:
        load_urdf(bad)
    assert info.value.__cause__ is None and info.value.__suppress_context__     # no parser traceback
    with pytest.raises(TypeError, match="expected a path or a URDF XML string"):
        load_urdf(b"<robot/>")


@pytest.mark.parametrize("text, pattern", [
    ('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>\n'
     '<robot name="&lol2;"><link name="a"/></robot>', r"forbidden XML construct \(EntitiesForbidden"),
    ('<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY ext SYSTEM "file:///etc/passwd">]>\n'
     '<robot name="r"><link name="&ext;"/></robot>', r"forbidden XML construct \(EntitiesForbidden"),
])
def test_forbidden_xml(text, pattern):
    with pytest.raises(UrdfError, match=f"^<string>: {pattern}") as info:
        load_urdf(text)
    assert info.value.__cause__ is None and info.value.__suppress_context__


# --- writing -----------------------------------------------------------------------------

def random_inertia(rng):
    """A physical inertia: Ic = tr(S) 1 - S for a positive definite second moment S."""
    A = rng.normal(size=(3, 3))
    S = A @ A.T * 0.1
    return sp.mcI(rng.uniform(0.1, 3), rng.normal(size=3) * 0.2, np.trace(S) * np.eye(3) - S)


def random_X(rng, pitch=None):
    rpy = rng.uniform(-np.pi, np.pi, 3)
    if pitch is not None:
        rpy[1] = pitch
    return sp.from_pose(Rotation.from_euler("xyz", rpy).as_matrix(), rng.normal(size=3))


def hand_built(rng, floating=False):
    b = ModelBuilder("chain", root_name="ground")
    parent = None
    if floating:
        b.add_body("torso", None, make_joint("free"), inertia=random_inertia(rng), joint_name="root_joint")
        parent = "torso"
    specs = [("revolute", rng.normal(size=3), dict(lower=-1.5, upper=0.5, effort_limit=30, velocity_limit=2)),
             ("prismatic", (0, 0, 1), dict(lower=-0.2, upper=0.3, effort_limit=100, velocity_limit=0.5)),
             ("continuous", (0, -1, 0), dict(effort_limit=12)),
             ("revolute", (1, 0, 0), dict(lower=-3, upper=3, effort_limit=1, velocity_limit=1)),
             ("prismatic", rng.normal(size=3), dict(lower=-1, upper=1, effort_limit=2, velocity_limit=3))]
    for k, (jtype, axis, lim) in enumerate(specs):
        b.add_body(f"l{k}", parent, make_joint(jtype, axis), random_X(rng, np.pi / 2 if k == 3 else None),
                   random_inertia(rng), joint_name=f"j{k}", **lim)
        parent = f"l{k}"
    # A branch off l1, with a massless body and the default (infinite) limits.
    b.add_body("side", "l1", make_joint("revolute", (0, 1, 0)), random_X(rng, -np.pi / 2), joint_name="js")
    b.add_mimic("j3", "j0", -1.5, 0.25)
    return b.build()


def assert_same_model(a, b):
    assert (a.body_names, a.joint_names) == (b.body_names, b.joint_names)
    np.testing.assert_array_equal(a.parent, b.parent)
    assert [j.type for j in a.joints] == [j.type for j in b.joints]
    assert all(rel_err(ja.a, jb.a) < 1e-15 for ja, jb in zip(a.joints, b.joints))
    for Xa, Xb in zip(a.Xtree, b.Xtree):
        assert rel_err(Xa.E, Xb.E) < 1e-12 and rel_err(Xa.r, Xb.r) < 1e-12
    assert rel_err(a.inertia, b.inertia) < 1e-12
    for field in ("lower", "upper", "velocity_limit", "effort_limit"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.mimic == b.mimic


def test_round_trip_and_pinocchio_reads_the_export():
    rng = np.random.default_rng(42)
    m = hand_built(rng)
    text = to_urdf(m)
    back = load_urdf(text)
    assert_same_model(m, back)
    assert back.name == "chain" and back.root_name == "ground"
    pm = pin.buildModelFromXML(text)
    assert list(pm.names[1:]) == list(m.joint_names)
    assert pm.upperPositionLimit[pm.idx_qs[pm.getJointId("js")]] == sys.float_info.max   # infinity, as Pinocchio has it
    assert_fk_matches(m, pm, rng, n=3)


def test_round_trip_floating_root():
    rng = np.random.default_rng(5)
    m = hand_built(rng, floating=True)
    text = to_urdf(m)
    back = load_urdf(text, floating_base=True)
    assert_same_model(m, back)
    pm = pin.buildModelFromXML(text, pin.JointModelFreeFlyer())
    assert_fk_matches(m, pm, rng, n=3)


def test_round_trip_keeps_free_and_planar_joints_inside_the_tree():
    text = robot(link("base"), link("a"), link("b"), link("c"),
                 joint("fly", "base", "a", "floating", rpy="0.1 0.2 0.3"), joint("slide", "a", "b", "planar"),
                 joint("turn", "b", "c", xyz="0 0 1"))
    m = load_urdf(text)
    assert [j.type for j in m.joints] == ["free", "planar", "revolute"]
    assert_same_model(m, load_urdf(to_urdf(m)))


def test_to_urdf_rejects_what_urdf_cannot_express():
    b = ModelBuilder("s")
    b.add_body("a", None, make_joint("revolute"))
    b.add_body("ball", "a", make_joint("spherical"), joint_name="hip")
    with pytest.raises(ValueError, match="joint 'hip' of type 'spherical' cannot be written as URDF"):
        to_urdf(b.build())
    b = ModelBuilder("d")
    b.add_body("a", None, make_joint("revolute"), joint_name="j")
    b.add_body("b", "a", make_joint("revolute"), joint_name="j")
    with pytest.raises(ValueError, match="repeated joint names"):
        to_urdf(b.build())
