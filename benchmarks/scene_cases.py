"""The scenes of :mod:`bench_scene` and the scripts beside it, each beside MuJoCo's model of the same MJCF:
the dm_control suite's humanoid, a box on a plane, talos (example-robot-data's talos_reduced with its
collision meshes as convex hulls) standing, lying on the floor and fallen onto a box, and dm_control's
quadruped on its floor and on the escape task's terrain; :func:`settled` runs MuJoCo to the state a row
starts from.

Nothing here is a test: numbers are reported, never asserted.
"""

import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np

import sparsedyn as sd

HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"
BOX = """<mujoco><option timestep="0.001"/><worldbody><geom name="floor" type="plane" size="5 5 .1"/>
<body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size=".1 .1 .1" mass="2"/></body></worldbody></mujoco>"""


TALOS = "talos_data/robots/talos_reduced.urdf"
#: the box talos falls onto (half sizes, centre): in front of it, its top at 0.3 m
TALOS_BOX = ((0.25, 0.5, 0.15), (0.55, 0.0, 0.15))


def quadruped_on_terrain(seed=0):
    """The path of dm_control's quadruped with its terrain made as its escape task makes it (a bowl about
    the robot, 5 m deep at 30 m, times smooth random bumps of 2 m, 15-100 % of it: a few centimetres
    under the robot), written inline (``elevation``) beside a copy of the suite's shared files: the same
    height field for MuJoCo and the scene."""
    import shutil
    import tempfile
    from scipy.ndimage import zoom
    res, suite = 201, HUMANOID.parent
    y, x = np.meshgrid(np.linspace(-1, 1, res), np.linspace(-1, 1, res), indexing="ij")
    bowl = 0.5 - np.cos(2 * np.pi * np.clip(np.hypot(x, y), 0.04, 1)) / 2
    terrain = bowl * zoom(np.random.default_rng(seed).uniform(0.15, 1, (30, 30)), res / 30)
    out = Path(tempfile.mkdtemp())
    shutil.copytree(suite / "common", out / "common")
    field = '<hfield name="terrain" ncol="201" nrow="201" size="30 30 5 .1"'
    (out / "quadruped.xml").write_text((suite / "quadruped.xml").read_text().replace(
        field, field + ' elevation="' + " ".join(f"{h:.9g}" for h in terrain.ravel()) + '"'))
    return out / "quadruped.xml"


def talos_xml(box=False, height=1.08):
    """MJCF of talos (example-robot-data's talos_reduced, ``geometry=True``) with its collision shapes,
    each mesh as its convex hull (inline vertices and faces, so that MuJoCo, which collides a mesh's
    hull, and the scene, which reads the file's triangles back, have the same shape), standing at
    ``height`` (its neutral pose) above a floor and, with ``box``, a box in front of it.  The robot
    touches the world only (contype 1 / conaffinity 0 on the robot, 0 / 1 on the world: no
    self-collision, in MuJoCo and in the scene that reads the masks)."""
    import xml.etree.ElementTree as ET
    from scipy.spatial import ConvexHull
    from sparsedyn.interop.mujoco import to_mjcf
    from sparsedyn.io.resolve import example_robot_data_dir
    from sparsedyn.viewer.meshes import read_mesh
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(example_robot_data_dir() / TALOS, floating_base=True, geometry=True)
    root = ET.fromstring(to_mjcf(model))
    asset = ET.SubElement(root, "asset")
    bodies = {b.get("name"): b for b in root.iter("body")}
    f = lambda x: " ".join(repr(float(v)) for v in np.ravel(x))    # noqa: E731
    for k, g in enumerate(model.geometry("collision")):
        R, p = g.X.E.T, g.X.r                                        # the shape's frame in its body's
        quat = sd.spatial.rot_to_quat(R)                             # [x, y, z, w]
        attrs = dict(name=f"c{k}_{g.name}", pos=f(p), quat=f(np.roll(quat, 1)), contype="1", conaffinity="0")
        if g.shape == "mesh":
            V = np.asarray(read_mesh(g.mesh).vertices, float) * np.asarray(g.size)
            hull = ConvexHull(V)
            F = hull.simplices.copy()
            flip = np.einsum("ki,ki->k", np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]]),
                             hull.equations[:, :3]) < 0                # outward faces
            F[flip] = F[flip][:, ::-1]
            used, F = np.unique(F, return_inverse=True)
            ET.SubElement(asset, "mesh", name=f"m{k}", vertex=f(V[used]), face=" ".join(map(str, F.ravel())))
            attrs.update(type="mesh", mesh=f"m{k}")
        elif g.shape == "box":
            attrs.update(type="box", size=f(np.asarray(g.size) / 2))
        elif g.shape in ("cylinder", "capsule", "sphere"):
            s = g.size
            attrs.update(type=g.shape, size=f([s[0]] if g.shape == "sphere" else [s[0], s[1] / 2]))
        else:
            raise ValueError(f"talos_xml: collision shape {g.name!r} of kind {g.shape!r} has no MJCF form here")
        ET.SubElement(bodies[model.body_names[g.body]], "geom", attrs)
    world = root.find("worldbody")
    ET.SubElement(world, "geom", name="floor", type="plane", size="5 5 0.1", contype="0", conaffinity="1")
    if box:
        (hx, hy, hz), c = TALOS_BOX
        ET.SubElement(world, "geom", name="box", type="box", size=f([hx, hy, hz]), pos=f(c), contype="0",
                      conaffinity="1")
    base = world.find("body")
    base.set("pos", f([0, 0, height]))
    ET.SubElement(root, "option", timestep="0.001")
    return ET.tostring(root, encoding="unicode")


def settled(xml_path, xml, settle, stops=False):
    """``(m, d, trajectory, model)``: MuJoCo's model of the MJCF file ``xml_path`` (or the text ``xml``)
    after ``settle`` steps from the file's pose (``d``; ``trajectory`` its ``(qpos, qvel)`` on the way)
    and the model of the same file (``geometry=True``); ``stops``: read with a body per hinge and its
    limits held (:func:`sparsedyn.with_joint_stops`), as MuJoCo holds them."""
    m = mujoco.MjModel.from_xml_path(str(xml_path)) if xml_path else mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    trajectory = []
    for _ in range(settle):
        mujoco.mj_step(m, d)
        trajectory.append((d.qpos.copy(), d.qvel.copy()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if xml_path:
            model = sd.load_mjcf(str(xml_path), geometry=True, composite_joints=not stops)
        else:
            import tempfile
            with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
                f.write(xml)
            model = sd.load_mjcf(f.name, geometry=True, composite_joints=not stops)
    return m, d, trajectory, (sd.with_joint_stops(model) if stops else model)


#: name -> () -> (MJCF path, MJCF text, MuJoCo steps to settle from the file's pose[, its limits held])
CASES = {"box": lambda: (None, BOX, 200),
         "humanoid": lambda: (HUMANOID, None, 1500),
         "humanoid, limits held": lambda: (HUMANOID, None, 1500, True),    # a body per hinge, stopped
         "talos standing": lambda: (None, talos_xml(), 1),            # its soles on the floor
         "talos on the floor": lambda: (None, talos_xml(), 1500),     # fallen (no torque): lying
         "talos on a box": lambda: (None, talos_xml(box=True), 1500),  # fallen onto the box
         "quadruped": lambda: (HUMANOID.parent / "quadruped.xml", None, 1500),  # on its floor, its terrain under it
         "quadruped on terrain": lambda: (quadruped_on_terrain(), None, 1500)}  # the escape task's bumps
