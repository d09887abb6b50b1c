"""URDF ``<visual>`` / ``<collision>`` shapes (``load_urdf(..., geometry=True)``) and
``geometry_placements`` against Pinocchio's ``buildModelsFromUrdf`` + ``updateGeometryPlacements``
on example-robot-data (an oracle that fails, never skips, when missing), plus hand-built files."""

import os
import warnings

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop.pinocchio import q_to_pinocchio
from sparsedyn.io.urdf import resolve_mesh

from conftest import rel_err, rounding_bound
from erd import ROBOTS, robot_path, robots_dir


def _load(path, floating_base, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # implausible-inertia warnings are tested elsewhere
        return sd.load_urdf(path, floating_base=floating_base, geometry=True, **kw)


@pytest.mark.parametrize("floating_base", [False, True])
@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_placements_meshes_scales_colours_equal_pinocchio(robot, floating_base, rng):
    path = robot_path(robot)
    model = _load(path, floating_base)
    share = str(robots_dir().parent.parent)          # .../share, which holds the example-robot-data package
    args = (str(path), [share]) + ((pin.JointModelFreeFlyer(),) if floating_base else ())
    pm, collision, visual = pin.buildModelsFromUrdf(*args)
    pd = pm.createData()
    q = np.stack([model.random_configuration(rng) for _ in range(3)])
    for kind, gm in (("visual", visual), ("collision", collision)):
        ours = model.geometry(kind)
        assert [g.name for g in ours] and sorted(g.name for g in ours) == sorted(g.name for g in gm.geometryObjects)
        index = {g.name: i for i, g in enumerate(ours)}
        R, p = sd.geometry_placements(model, q, kind)                     # batched
        assert R.shape == (3, len(ours), 3, 3) and p.shape == (3, len(ours), 3)
        gd = pin.GeometryData(gm)
        for s in range(3):
            pin.framesForwardKinematics(pm, pd, q_to_pinocchio(model, q[s]))
            pin.updateGeometryPlacements(pm, pd, gm, gd)
            for k, go in enumerate(gm.geometryObjects):
                i = index[go.name]
                bound = rounding_bound(model.depth.max(initial=0) + 2)
                assert rel_err(R[s, i], gd.oMg[k].rotation) <= bound, (kind, go.name)
                assert rel_err(p[s, i], gd.oMg[k].translation) <= bound, (kind, go.name)
        for go in gm.geometryObjects:
            g = ours[index[go.name]]
            if g.shape == "mesh":
                assert os.path.samefile(g.mesh, go.meshPath)
                np.testing.assert_array_equal(g.size, go.meshScale)
            if kind == "visual" and g.rgba is not None:
                # urdfdom keeps colours in single precision
                np.testing.assert_array_equal(np.float32(g.rgba), np.float32(go.meshColor))


def _pin_geometry_sizes(go):
    """(our shape, our size) of a Pinocchio primitive (hpp-fcl keeps half sizes and half lengths)."""
    G = go.geometry
    kind = type(G).__name__
    if kind == "Box":
        return "box", tuple(2 * G.halfSide)
    if kind == "Sphere":
        return "sphere", (G.radius,)
    if kind == "Cylinder":
        return "cylinder", (G.radius, 2 * G.halfLength)
    if kind == "Capsule":
        return "capsule", (G.radius, 2 * G.halfLength)
    return None


PRIMITIVES = """<robot name="shapes">
  <material name="red"><color rgba="1 0 0 1"/></material>
  <link name="base">
    <visual><origin xyz="0.1 0 0" rpy="0 0.3 0"/><geometry><box size="0.2 0.3 0.4"/></geometry>
      <material name="red"/></visual>
    <collision><geometry><sphere radius="0.25"/></geometry></collision>
  </link>
  <link name="arm">
    <visual><origin xyz="0 0 0.5"/><geometry><cylinder radius="0.05" length="1.0"/></geometry>
      <material name="inline"><color rgba="0 0.5 1 0.5"/></material></visual>
    <collision><origin xyz="0 0 0.5" rpy="0.1 0.2 0.3"/><geometry><capsule radius="0.05" length="0.9"/></geometry>
    </collision>
  </link>
  <link name="tool">
    <visual><origin xyz="0 0.02 0.01" rpy="0.4 0 0"/><geometry><sphere radius="0.03"/></geometry></visual>
  </link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.3" rpy="0 0 0.5"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="1"/></joint>
  <joint name="flange" type="fixed"><parent link="arm"/><child link="tool"/><origin xyz="0 0 1.0" rpy="0 0.2 0"/></joint>
</robot>
"""


@pytest.mark.parametrize("floating_base", [False, True])
def test_primitives_sizes_colours_and_merged_placements(tmp_path, floating_base, rng):
    """Box, sphere, cylinder, capsule; named and inline materials; a shape on a link merged through a
    fixed joint; shapes of the root link fixed to the world (body -1) for a fixed base."""
    path = tmp_path / "shapes.urdf"
    path.write_text(PRIMITIVES)
    model = _load(path, floating_base)
    vis, col = model.geometry("visual"), model.geometry("collision")
    assert [(g.name, g.shape, g.size, g.rgba) for g in vis] == [
        ("base_0", "box", (0.2, 0.3, 0.4), (1.0, 0.0, 0.0, 1.0)),
        ("arm_0", "cylinder", (0.05, 1.0), (0.0, 0.5, 1.0, 0.5)),
        ("tool_0", "sphere", (0.03,), None)]
    assert [(g.name, g.shape, g.size) for g in col] == [("base_0", "sphere", (0.25,)), ("arm_0", "capsule", (0.05, 0.9))]
    assert vis[0].body == (0 if floating_base else -1)
    assert vis[2].body == vis[1].body == model.body("arm") and vis[2].link == "tool"
    # hand derivation of the merged sphere at q = 0, fixed base: arm frame = Rz(0.5) at (0, 0, 0.3);
    # tool = arm * (Ry(0.2), (0, 0, 1)); sphere = tool * (Rx(0.4), (0, 0.02, 0.01))
    if not floating_base:
        Rz, Ry, Rx = (sd.spatial.rpy_to_rot(np.array(a)) for a in ([0, 0, 0.5], [0, 0.2, 0], [0.4, 0, 0]))
        R, p = sd.geometry_placements(model, np.zeros(model.nq), "visual")
        np.testing.assert_allclose(R[2], Rz @ Ry @ Rx, rtol=0, atol=1e-15)
        np.testing.assert_allclose(p[2], [0, 0, 0.3] + Rz @ ([0, 0, 1.0] + Ry @ [0, 0.02, 0.01]), rtol=0, atol=1e-15)
        np.testing.assert_allclose(R[0], sd.spatial.rpy_to_rot(np.array([0, 0.3, 0])), rtol=0, atol=1e-15)
        np.testing.assert_allclose(p[0], [0.1, 0, 0], rtol=0, atol=1e-15)
    # and Pinocchio agrees on poses and sizes at random configurations
    args = (str(path), [str(tmp_path)]) + ((pin.JointModelFreeFlyer(),) if floating_base else ())
    pm, collision, visual = pin.buildModelsFromUrdf(*args)
    pd = pm.createData()
    q = model.random_configuration(rng)
    pin.framesForwardKinematics(pm, pd, q_to_pinocchio(model, q))
    for kind, gm in (("visual", visual), ("collision", collision)):
        gd = pin.GeometryData(gm)
        pin.updateGeometryPlacements(pm, pd, gm, gd)
        R, p = sd.geometry_placements(model, q, kind)
        ours = {g.name: (i, g) for i, g in enumerate(model.geometry(kind))}
        for k, go in enumerate(gm.geometryObjects):
            i, g = ours[go.name]
            assert rel_err(R[i], gd.oMg[k].rotation) <= rounding_bound(4)
            assert rel_err(p[i], gd.oMg[k].translation) <= rounding_bound(4)
            shape, size = _pin_geometry_sizes(go)
            assert g.shape == shape and np.allclose(g.size, size, rtol=1e-15, atol=0)


def test_no_geometry_unless_asked_and_kind_checked():
    path = robot_path("panda")
    plain = sd.load_urdf(path)
    assert plain.geometries == () and plain.geometry("visual") == ()
    R, p = sd.geometry_placements(plain, plain.neutral())
    assert R.shape == (0, 3, 3) and p.shape == (0, 3)
    with pytest.raises(ValueError, match="kind: expected one of"):
        _load(path, False).geometry("visuals")


def test_mesh_references_resolved_like_ros(tmp_path, monkeypatch):
    pkg = tmp_path / "ws" / "src" / "my_robot"
    (pkg / "meshes").mkdir(parents=True)
    (pkg / "urdf").mkdir()
    (pkg / "meshes" / "a.stl").write_bytes(b"solid a\nendsolid a\n")
    urdf = pkg / "urdf" / "r.urdf"
    base = urdf.parent
    # the package folder above the URDF, a relative path, file://, an absolute path, package_dirs
    assert resolve_mesh("package://my_robot/meshes/a.stl", base) == str(pkg / "meshes" / "a.stl")
    assert resolve_mesh("../meshes/a.stl", base) == str(base / "../meshes/a.stl")
    assert resolve_mesh(f"file://{pkg}/meshes/a.stl", base) == f"{pkg}/meshes/a.stl"
    assert resolve_mesh(str(pkg / "meshes" / "a.stl"), None) == str(pkg / "meshes" / "a.stl")
    assert resolve_mesh("package://my_robot/meshes/a.stl", None, [tmp_path / "ws" / "src"]) == \
        str(pkg / "meshes" / "a.stl")
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ws" / "src"))
    assert resolve_mesh("package://my_robot/meshes/a.stl", None) == str(pkg / "meshes" / "a.stl")
    # not found: the reference is kept as written
    assert resolve_mesh("package://other/meshes/a.stl", base) == "package://other/meshes/a.stl"


@pytest.mark.parametrize("body, message", [
    ('<visual><geometry/></visual>', "expected a <geometry> holding one of"),
    ('<visual><geometry><box size="1 2"/></geometry></visual>', "expected 3 numbers"),
    ('<visual><geometry><sphere radius="-1"/></geometry></visual>', "negative size"),
    ('<visual><geometry><mesh/></geometry></visual>', "missing required attribute 'filename'"),
    ('<visual><geometry><box size="1 1 1"/></geometry><material name="m"><color rgba="2 0 0 1"/></material></visual>',
     "must lie in \\[0, 1\\]"),
])
def test_bad_geometry_names_link_and_element(body, message):
    xml = f'<robot name="r"><link name="l">{body}</link></robot>'
    with pytest.raises(sd.UrdfError, match=f"link 'l' <visual> 0.*{message}"):
        sd.load_urdf(xml, geometry=True)
    assert sd.load_urdf(xml).geometries == ()       # not read unless asked


def test_fuzzed_shapes_give_a_model_with_finite_poses_or_one_urdf_error(tmp_path):
    """Mutants of the shapes (bad numbers, dropped or duplicated elements) load with finite shape
    poses and sizes, or raise one UrdfError naming the file; never a foreign exception."""
    import xml.etree.ElementTree as ET
    from test_fuzz import BAD_NUMBERS
    rng = np.random.default_rng(7)
    path = tmp_path / "mutant.urdf"
    outcomes = {"model": 0, "error": 0}
    for k in range(200):
        root = ET.fromstring(PRIMITIVES)
        shapes = [e for link in root.findall("link") for kind in ("visual", "collision")
                  for v in link.findall(kind) for e in v.iter()]
        el = shapes[int(rng.integers(0, len(shapes)))]
        if el.attrib and rng.random() < 0.7:
            key = rng.choice(sorted(el.attrib))
            el.set(key, rng.choice(BAD_NUMBERS + ["package://nowhere/x.stl", "red"]))
        else:
            parent = next(p for p in root.iter() if el in list(p))
            parent.remove(el) if rng.random() < 0.5 else parent.append(ET.fromstring(ET.tostring(el)))
        path.write_bytes(ET.tostring(root))
        try:
            model = sd.load_urdf(path, floating_base=bool(k % 2), geometry=True)
        except sd.UrdfError as e:
            assert str(e).startswith(f"{path}: ")
            outcomes["error"] += 1
            continue
        for kind in ("visual", "collision"):
            R, p = sd.geometry_placements(model, model.random_configuration(rng), kind)
            assert np.all(np.isfinite(R)) and np.all(np.isfinite(p))
            assert all(np.all(np.isfinite(g.size)) for g in model.geometry(kind))
        outcomes["model"] += 1
    assert outcomes["error"] > 30 and outcomes["model"] > 30, outcomes
