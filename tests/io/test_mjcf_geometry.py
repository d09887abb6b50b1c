"""MJCF geoms (``load_mjcf(..., geometry=True)``) and ``geometry_placements`` against MuJoCo's
``geom_xpos`` / ``geom_xmat`` on dm-control's models (oracle tests: they fail, never skip, without
MuJoCo or dm-control)."""

import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.interop import mujoco as mjx

from conftest import rel_err, rounding_bound

SUITE = Path(dm_control.__file__).parent / "suite"
MODELS = ["humanoid.xml", "cheetah.xml", "quadruped.xml", "manipulator.xml", "dog.xml", "acrobot.xml"]


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.MjcfWarning)      # tendons, actuators, ...: tested elsewhere
        return sd.load_mjcf(path, geometry=True, **kw)


@pytest.mark.parametrize("file", MODELS)
def test_geom_poses_equal_mujoco(file, rng):
    path = SUITE / file
    model = _load(path)
    mm = mujoco.MjModel.from_xml_path(str(path))
    md = mujoco.MjData(mm)
    names = [mm.geom(g).name or f"geom{g}" for g in range(mm.ngeom)]
    for _ in range(3):
        q = model.random_configuration(rng)
        md.qpos[:] = mjx.q_to_mujoco(model, q)
        mujoco.mj_kinematics(mm, md)
        for kind in ("visual", "collision"):
            geoms = model.geometry(kind)
            assert geoms
            R, p = sd.geometry_placements(model, q, kind)
            bound = rounding_bound(model.depth.max(initial=0) + 4)
            for i, g in enumerate(geoms):
                k = names.index(g.name)
                xpos, xmat = md.geom_xpos[k], md.geom_xmat[k].reshape(3, 3)
                if mm.geom_sameframe[k] in (2, 4):
                    # mjSAMEFRAME_INERTIA(ROT): MuJoCo copies the body's inertial frame, which its compiler
                    # found equal to the geom's frame only within its own tolerance (up to ~1e-7 m here);
                    # the geom's pose by MuJoCo's definition is the body pose times the geom's local pose.
                    b = mm.geom_bodyid[k]
                    local = np.zeros(9)
                    mujoco.mju_quat2Mat(local, mm.geom_quat[k])
                    Rb = md.xmat[b].reshape(3, 3)
                    xpos, xmat = md.xpos[b] + Rb @ mm.geom_pos[k], Rb @ local.reshape(3, 3)
                    assert rel_err(xpos, md.geom_xpos[k]) <= 1e-6
                assert rel_err(p[i], xpos) <= bound, (file, g.name)
                assert rel_err(R[i], xmat) <= bound, (file, g.name)
    # which geoms are in which list, from the file's groups and contact bits
    visual = {g.name for g in model.geometry("visual")}
    collision = {g.name for g in model.geometry("collision")}
    supported = {n for g, n in enumerate(names) if mm.geom_type[g] != 8}           # SDF geoms are left out
    assert visual == {n for g, n in enumerate(names) if mm.geom_group[g] <= 2} & supported
    assert collision == {n for g, n in enumerate(names) if mm.geom_contype[g] or mm.geom_conaffinity[g]} & supported
    # each collision shape carries MuJoCo's bit masks (the pairs they give: tests/contact/test_scene_pairs.py)
    for g in model.geometry("collision"):
        k = names.index(g.name)
        assert (g.contype, g.conaffinity) == (mm.geom_contype[k], mm.geom_conaffinity[k])


SHAPES = """<mujoco model="shapes">
  <asset><material name="blue" rgba="0 0 1 1"/>
    <mesh name="tet" vertex="0 0 0  1 0 0  0 1 0  0 0 1" scale="0.1 0.2 0.3"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 3 0.1"/>
    <body name="b" pos="0 0 1">
      <joint name="j" type="hinge" axis="0 1 0"/>
      <geom name="box" type="box" size="0.1 0.2 0.3" material="blue"/>
      <geom name="cyl" type="cylinder" size="0.05 0.4" rgba="1 0 0 1" contype="0" conaffinity="0"/>
      <geom name="cap" type="capsule" size="0.05 0.4" group="3"/>
      <geom name="ell" type="ellipsoid" size="0.1 0.2 0.3"/>
      <geom name="ball" type="sphere" size="0.07"/>
      <geom name="tet" type="mesh" mesh="tet"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_shapes_sizes_colours_and_meshes():
    model = _load(SHAPES)
    mm = mujoco.MjModel.from_xml_string(SHAPES)
    vis = {g.name: g for g in model.geometry("visual")}
    col = {g.name: g for g in model.geometry("collision")}
    assert list(vis) == ["floor", "box", "cyl", "ell", "ball", "tet"]          # cap: group 3
    assert list(col) == ["floor", "box", "cap", "ell", "ball", "tet"]          # cyl: no contact bits
    assert vis["floor"].shape == "plane" and vis["floor"].size == (4.0, 6.0) and vis["floor"].body == -1
    assert vis["box"].size == (0.2, 0.4, 0.6) and vis["box"].rgba == (0.0, 0.0, 1.0, 1.0)
    assert vis["cyl"].size == (0.05, 0.8) and vis["cyl"].rgba == (1.0, 0.0, 0.0, 1.0)
    assert col["cap"].size == (0.05, 0.8) and vis["ell"].size == (0.1, 0.2, 0.3) and vis["ball"].size == (0.07,)
    # the compiled mesh (scaled, re-centred by MuJoCo) placed by the geom's pose: its world vertices are
    # the scaled file vertices, with the body at the identity
    tet = vis["tet"]
    assert tet.vertices.shape == (4, 3) and tet.faces.shape[1] == 3
    R, p = sd.geometry_placements(model, np.zeros(model.nq))
    i = list(vis).index("tet")
    world = tet.vertices @ R[i].T + p[i]
    expected = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.2, 0], [0, 0, 0.3]]) + [0, 0, 1]
    np.testing.assert_allclose(np.sort(world, 0), np.sort(expected, 0), rtol=0, atol=1e-6)   # float32 vertices
    assert mm.ngeom == 7


def test_no_geometry_unless_asked():
    assert sd.load_mjcf(SHAPES).geometries == ()
