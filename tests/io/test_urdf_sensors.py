"""Merged fixed joints (Model.fixed_joints) and URDF force/torque sensor tags (<gazebo>, iDynTree <sensor>).

Oracles: hand derivations on a link hanging under a fixed F/T joint; the Pinocchio
comparison on iCub lives in tests/estimation/test_fixed_joint_ft.py.
"""

import dataclasses
import re
import warnings

import numpy as np
import pytest
from erd import robots_dir

import sparsedyn as sd
from sparsedyn import spatial as sp
from sparsedyn.estimation import EstimationProblem
from sparsedyn.model.builders import ModelBuilder
from sparsedyn.model import FixedJoint, ModelError
from sparsedyn.model.sensors import ForceTorque
from sparsedyn.io.urdf import UrdfError, UrdfWarning, load_urdf

G = 9.81
M1, M2 = 1.5, 2.0            # upper link, lower link (a point mass)
H, D, L = 0.3, 0.05, 0.2     # ft joint below the hip; lower CoM (D, 0, -L) in its frame

GAZEBO_FT = """<gazebo reference="{ref}"><sensor name="{name}" type="force_torque">
  <force_torque>{frame}{direction}</force_torque>{pose}<update_rate>100</update_rate></sensor></gazebo>"""


def gz(ref="ft", name="ft_sensor", frame="child", direction="child_to_parent", pose=""):
    return GAZEBO_FT.format(ref=ref, name=name, frame=frame and f"<frame>{frame}</frame>",
                            direction=direction and f"<measure_direction>{direction}</measure_direction>",
                            pose=pose and f"<pose>{pose}</pose>")


def hanging(extra="", ft_rpy="0 0 0"):
    """A revolute hip about y (link 'upper', CoM H/2 below) and a point mass 'lower' under the fixed joint 'ft'."""
    return f"""<robot name="hang">
  <link name="base"/>
  <link name="upper"><inertial><origin xyz="0 0 {-H / 2}"/><mass value="{M1}"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="lower"><inertial><origin xyz="{D} 0 {-L}"/><mass value="{M2}"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>
  <joint name="hip" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/></joint>
  <joint name="ft" type="fixed"><origin xyz="0 0 {-H}" rpy="{ft_rpy}"/><parent link="upper"/><child link="lower"/>
  </joint>
  {extra}
</robot>"""


def Ry(t):
    return np.array([[np.cos(t), 0, np.sin(t)], [0, 1, 0], [-np.sin(t), 0, np.cos(t)]])


def read(model, q, qd=0.0, qdd=0.0):
    """Noise-free readings of the model's own sensors through the estimation simulation: {name: (6,)}."""
    prob = EstimationProblem(model)
    y, _ = prob.measurements(np.array([q]), np.array([qd]), np.array([qdd]))
    return prob.unpack(y)


# --- the hand derivation -------------------------------------------------------------------

def test_static_reading_is_the_weight_of_what_hangs_below():
    m = load_urdf(hanging(gz()))
    assert m.nbodies == 1 and m.body_names == ("upper",)
    (s,) = m.sensors
    assert (s.name, s.joint, s.direction, s.frame, s.rotation) == ("ft_sensor", "ft", "child_to_parent", None, None)
    # at rest the child (lower) pushes down on the parent with its weight, at its CoM (D, 0, -L)
    y = read(m, 0.0)["ft_sensor"]
    np.testing.assert_allclose(y, [0, D * M2 * G, 0, 0, 0, -M2 * G], rtol=0, atol=1e-12)
    # parent_to_child is the negative
    m2 = load_urdf(hanging(gz(direction="parent_to_child")))
    np.testing.assert_allclose(read(m2, 0.0)["ft_sensor"], -y, rtol=0, atol=1e-12)


@pytest.mark.parametrize("q, qd, qdd", [(0.4, 0.0, 0.0), (-0.7, 1.3, 0.0), (0.9, -2.0, 3.5)])
def test_dynamic_reading_by_hand(q, qd, qdd):
    """Parent-to-child wrench on a point mass: f = m (a_com - g), n = c x f about the joint origin."""
    m = load_urdf(hanging(gz(direction="parent_to_child")))
    g_u = Ry(q).T @ [0, 0, -G]                         # gravity in upper (= lower) axes
    w, al = np.array([0, qd, 0.0]), np.array([0, qdd, 0.0])
    p = np.array([D, 0, -H - L])                       # CoM in the upper frame (hip at the origin)
    a_com = np.cross(al, p) + np.cross(w, np.cross(w, p))
    f = M2 * (a_com - g_u)
    n = np.cross([D, 0, -L], f)
    np.testing.assert_allclose(read(m, q, qd, qdd)["ft_sensor"], np.r_[n, f], rtol=1e-12, atol=1e-12)


def test_moving_joint_sensor_and_axes_by_hand():
    """A Gazebo F/T on the moving hip (child frame) carries both links; <frame>sensor rotates the axes only."""
    yaw = np.pi / 2
    extra = gz("hip", "hip_ft", direction="parent_to_child") + \
        gz("ft", "ft_yaw", frame="sensor", direction="parent_to_child", pose=f"1 2 3 0 0 {yaw!r}")
    m = load_urdf(hanging(extra))
    q = 0.3
    g_u = Ry(q).T @ [0, 0, -G]
    y = read(m, q)
    f = -(M1 + M2) * g_u
    n = np.cross([0, 0, -H / 2], -M1 * g_u) + np.cross([D, 0, -H - L], -M2 * g_u)
    np.testing.assert_allclose(y["hip_ft"], np.r_[n, f], rtol=1e-12, atol=1e-12)
    Rz = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])        # the sensor axes in the joint frame
    fl = -M2 * g_u
    nl = np.cross([D, 0, -L], fl)                              # about the joint origin, not the pose's xyz
    np.testing.assert_allclose(y["ft_yaw"], np.r_[Rz.T @ nl, Rz.T @ fl], rtol=1e-12, atol=1e-12)


def test_parent_frame_axes_on_a_tilted_fixed_joint():
    rpy = (0.2, -0.3, 0.4)
    extra = gz("ft", "c", "child", "parent_to_child") + gz("ft", "p", "parent", "parent_to_child")
    m = load_urdf(hanging(extra, " ".join(map(str, rpy))))
    R = sp.rpy_to_rot(rpy)                                     # child axes in parent axes
    for q in (0.0, 0.8):
        y = read(m, q, 0.5, -1.0)
        np.testing.assert_allclose(y["p"], np.r_[R @ y["c"][:3], R @ y["c"][3:]], rtol=1e-12, atol=1e-12)
    assert np.allclose(m.sensor("p").rotation, R.T)


# --- Model.fixed_joints --------------------------------------------------------------------

def test_fixed_joints_recorded_on_icub():
    path = robots_dir() / "icub_description/robots/icub.urdf"
    m = load_urdf(path, floating_base=True)
    plain = load_urdf(path, floating_base=True, sensors=False)
    assert plain.sensors == () and plain.body_names == m.body_names and plain.joint_names == m.joint_names
    assert [s.name for s in m.sensors] == ["left_arm_ft", "right_arm_ft", "left_leg_ft", "right_leg_ft",
                                           "left_foot_ft", "right_foot_ft"]     # <gazebo> names win
    assert all(s.direction == "child_to_parent" and s.frame is None and s.rotation is None for s in m.sensors)
    foot = m.fixed_joint("l_foot_ft_sensor")
    assert m.body_names[foot.body] == "l_ankle_2" and foot.children == ()
    assert {"l_foot", "l_sole", "l_foot_ft_sensor"} <= set(foot.frames) and "l_ankle_2" not in foot.frames
    np.testing.assert_array_equal(foot.X.r, m.frames[m.frame("l_foot")].X.r)
    # the child side's mass is the mass of the links merged below the joint (URDF text)
    text = path.read_text()
    mass = {mm.group(1): float(re.search(r'<mass value="([^"]+)"', mm.group(2)).group(1))
            for mm in re.finditer(r'<link name="([^"]+)">(.*?)</link>', text, re.S) if "<mass" in mm.group(2)}
    assert np.isclose(foot.inertia[5, 5], sum(mass.get(f, 0.0) for f in foot.frames))
    leg = m.fixed_joint("l_leg_ft_sensor")
    assert [m.body_names[c] for c in leg.children] == ["l_upper_leg"] and m.body_names[leg.body] == "l_hip_2"
    with pytest.raises(KeyError, match="no fixed joint 'l_knee' \\(it is a moving joint\\)"):
        m.fixed_joint("l_knee")
    # frozen, and carried by every copy
    with pytest.raises(ValueError, match="read-only"):
        foot.inertia[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        foot.X.r[0] = 1.0
    with pytest.raises(AttributeError):
        foot.body = 3
    for copy, orig in ((plain.with_sensors(*m.sensors), plain), (dataclasses.replace(m, gravity=np.zeros(3)), m)):
        assert len(copy.fixed_joints) == len(orig.fixed_joints) == 23
        for a, b in zip(copy.fixed_joints, orig.fixed_joints):
            assert (a.name, a.body, a.children, a.frames) == (b.name, b.body, b.children, b.frames)
            np.testing.assert_array_equal(a.inertia, b.inertia)
            np.testing.assert_array_equal(a.X.E, b.X.E)
    # a fixed joint to the world of a fixed-base model has no body: not recorded
    fixed = load_urdf(path)
    assert len(fixed.fixed_joints) == len(m.fixed_joints) - 1
    assert {f.name for f in m.fixed_joints} - {f.name for f in fixed.fixed_joints} == {"base_fixed_joint"}


def test_builder_fixed_joints_follow_the_depth_first_numbering():
    j = sd.make_joint("revolute")
    b = ModelBuilder("m")
    b.add_body("b", "a", j).add_body("a", None, j).add_body("c", "a", j)     # numbered a, b, c
    b.add_frame("tip", "a", sp.xlt([1.0, 0, 0]))
    b.add_fixed_joint("weld", "a", sp.xlt([1.0, 0, 0]), np.eye(6), children=["c"], frames=["tip"])
    m = b.build()
    (fj,) = m.fixed_joints
    assert isinstance(fj, FixedJoint) and fj.body == 0 and fj.children == (2,) and fj.frames == ("tip",)
    assert fj.inertia.flags.writeable is False
    bad = [(dict(children=["c"]), "child body index 2 is not a child of body 'a'"),
           (dict(children=["zz"]), "fixed joint 'w' refers to unknown body 'zz'"),
           (dict(frames=["b"]), "frame 'b' is not a frame of body 'a'")]
    for kw, msg in bad:
        b = ModelBuilder("m").add_body("a", None, j).add_body("b", "a", j).add_body("c", None, j)
        b.add_fixed_joint("w", "a", **kw)
        with pytest.raises(ModelError, match=re.escape(msg)):
            b.build()
    with pytest.raises(ModelError, match="fixed joint 'a': its name must be a non-empty string used by no other"):
        ModelBuilder("m").add_body("a", None, j).add_fixed_joint("a", "a").build()
    with pytest.raises(ModelError, match=r"inertia must be a finite \(6, 6\) array"):
        ModelBuilder("m").add_body("a", None, j).add_fixed_joint("w", "a", inertia=np.eye(3)).build()


# --- parsing: options, warnings, errors -----------------------------------------------------

def test_other_sensors_and_gazebo_content_are_ignored_silently():
    extra = """<gazebo reference="upper"><sensor name="imu" type="imu"><always_on>1</always_on></sensor>
      <material>Gazebo/Red</material></gazebo>
      <gazebo><plugin name="p" filename="libx.so"/></gazebo>
      <gazebo reference="nowhere"><sensor name="cam" type="camera"/></gazebo>
      <sensor name="acc" type="accelerometer"><parent link="upper"/></sensor>"""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = load_urdf(hanging(extra))
    assert m.sensors == ()
    assert load_urdf(hanging(gz()), sensors=False).sensors == ()


def test_idyntree_top_level_sensor_tags():
    top = """<sensor name="ft_top" type="force_torque"><parent joint="ft"/><origin xyz="0 0 0" rpy="0 0 {yaw}"/>
      <force_torque><frame>{frame}</frame><measure_direction>parent_to_child</measure_direction></force_torque>
      </sensor>"""
    m = load_urdf(hanging(top.format(yaw=0.5, frame="sensor")))
    (s,) = m.sensors
    assert (s.name, s.joint, s.direction) == ("ft_top", "ft", "parent_to_child")
    # iDynTree's rule: the sensor frame is the <origin> pose in the child link frame (here a yaw), a named
    # frame on the merged body (the comparison with iDynTree itself: test_urdf_idyntree.py)
    assert s.rotation is None and s.frame == "ft_top"
    R, p = sp.pose(sp.compose(m.frames[m.frame("ft_top")].X, sp.inverse(m.frames[m.frame("lower")].X)))
    np.testing.assert_allclose(R, sp.rpy_to_rot([0, 0, 0.5]), atol=1e-15)
    np.testing.assert_allclose(p, 0, atol=1e-15)
    # a joint described by both tags is one device, named by <gazebo>
    m = load_urdf(hanging(top.format(yaw=0, frame="child") + gz()))
    assert [x.name for x in m.sensors] == ["ft_sensor"]
    with pytest.raises(UrdfError, match=r"<string>: <sensor name='ft_top'>: a force_torque sensor needs the "
                                        r"name of the joint"):
        load_urdf(hanging(top.format(yaw=0, frame="child").replace('<parent joint="ft"/>', "")))


def test_unsupported_sensors_are_skipped_with_one_warning():
    # a fixed joint to the world of a fixed-base model; parent axes on a moving joint
    mount = """<link name="plate"><inertial><mass value="1"/>
        <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
      <joint name="mount" type="fixed"><parent link="base"/><child link="plate"/></joint>"""
    text = hanging(mount + gz("mount", "m_ft") + gz("hip", "h_ft", frame="parent") + gz())
    with pytest.warns(UrdfWarning) as rec:
        m = load_urdf(text)
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert "<gazebo reference='mount'> <sensor name='m_ft'>: fixed joint 'mount' is attached to the world of a " \
           "fixed-base model" in msg and "floating_base=True" in msg
    assert "<gazebo reference='hip'> <sensor name='h_ft'>: <frame>parent</frame> on moving joint 'hip'" in msg
    assert [s.name for s in m.sensors] == ["ft_sensor"]
    with warnings.catch_warnings():                 # with a floating base the mount is inside body 0
        warnings.simplefilter("error")
        mf = load_urdf(hanging(mount + gz("mount", "m_ft")), floating_base=True)
    assert [s.name for s in mf.sensors] == ["m_ft"] and mf.fixed_joint("mount").children == ()


BOTH_SIDES = """<robot name="both">
  <link name="a"/><link name="b"/><link name="c"/><link name="d"/>
  <joint name="ja" type="revolute"><parent link="w"/><child link="a"/></joint><link name="w"/>
  <joint name="weld" type="fixed"><parent link="a"/><child link="b"/></joint>
  <joint name="jc" type="revolute"><parent link="a"/><child link="c"/></joint>
  <joint name="jd" type="revolute"><parent link="b"/><child link="d"/></joint>
  {extra}
</robot>"""


def test_moving_bodies_on_both_sides_of_a_fixed_joint():
    with pytest.warns(UrdfWarning, match=r"fixed joint 'weld' has moving bodies on both sides inside body 'a' "
                                         r"\(child side: \['d'\], parent side: \['c'\]\)"):
        m = load_urdf(BOTH_SIDES.format(extra=gz("weld", "w_ft")))
    assert m.sensors == ()
    with pytest.raises(ValueError, match="sensor 'x': fixed joint 'weld' has moving bodies on both sides inside "
                                         "body 'a'.*configuration-dependent coefficients"):
        EstimationProblem(m.with_sensors(ForceTorque("x", "weld")))


BAD = [
    (gz("nope"), "<gazebo reference='nope'> <sensor name='ft_sensor'>: reference 'nope' names no joint of the "
                 "robot; expected the name of a joint"),
    (gz("lower"), "<gazebo reference='lower'> <sensor name='ft_sensor'>: reference 'lower' is a link; a "
                  "force_torque sensor measures across a joint: expected the name of a joint"),
    (gz(frame="world"), "<gazebo reference='ft'> <sensor name='ft_sensor'> <force_torque> <frame>: 'world'; "
                        "expected one of 'child', 'parent', 'sensor'"),
    (gz(direction="up"), "<gazebo reference='ft'> <sensor name='ft_sensor'> <force_torque> <measure_direction>: "
                         "'up'; expected one of 'child_to_parent', 'parent_to_child'"),
    (gz() + gz("hip"), "<gazebo reference='hip'> <sensor name='ft_sensor'>: sensor name 'ft_sensor' is used twice "
                       "(also <gazebo reference='ft'> <sensor name='ft_sensor'>)"),
    (gz(frame="sensor", pose="0 0 0 0 x 0"), "<gazebo reference='ft'> <sensor name='ft_sensor'> <pose>: "
                                             "'0 0 0 0 x 0': expected 6 numbers (x y z roll pitch yaw)"),
    (gz().replace(' reference="ft"', ""), "<gazebo> <sensor name='ft_sensor'>: a force_torque sensor needs the "
                                          "name of the joint it measures across"),
    (gz().replace(' name="ft_sensor"', ""), "<gazebo reference='ft'> <sensor name=None>: missing required "
                                            "attribute 'name'"),
]


@pytest.mark.parametrize("extra, message", BAD, ids=["unknown", "link", "frame", "direction", "duplicate", "pose",
                                                     "no-reference", "no-name"])
def test_bad_sensor_tags(extra, message):
    with pytest.raises(UrdfError, match="^" + re.escape("<string>: " + message)):
        load_urdf(hanging(extra))


def test_file_label_in_errors(tmp_path):
    p = tmp_path / "robot.urdf"
    p.write_text(hanging(gz(direction="sideways")))
    with pytest.raises(UrdfError, match=re.escape(f"{p}: <gazebo reference='ft'> <sensor name='ft_sensor'> "
                                                  f"<force_torque> <measure_direction>: 'sideways'")):
        load_urdf(p)
