"""example-robot-data and Pinocchio for the oracle tests.

Both are test dependencies installed by the test command.  Nothing here skips:
a missing oracle makes the tests that use it fail.
"""

from pathlib import Path

import pinocchio as pin

from sparsedyn import load_urdf
from sparsedyn.interop import example_robot_data_dir


def robots_dir() -> Path:
    d = example_robot_data_dir()
    if d is None:
        raise FileNotFoundError("example-robot-data's robots directory was not found; install the test "
                                "dependencies (make test)")
    return d


# The robots the foundation issue names, by short name.
ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "go2": "go2_description/urdf/go2.urdf",
    "talos_reduced": "talos_data/robots/talos_reduced.urdf",
    "icub_reduced": "icub_description/robots/icub_reduced.urdf",
    "g1_29dof_rev_1_0": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "romeo": "romeo_description/urdf/romeo.urdf",
    "double_pendulum": "double_pendulum_description/urdf/double_pendulum.urdf",
}


def robot_path(name) -> Path:
    return robots_dir() / ROBOTS[name]


def load_pair(robot, floating_base):
    """(our model, Pinocchio model) of an example robot: a name in ROBOTS or a path below robots_dir()."""
    import warnings
    path = robot_path(robot) if robot in ROBOTS else robots_dir() / robot
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # implausible-inertia warnings are tested elsewhere
        model = load_urdf(path, floating_base=floating_base)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating_base \
        else pin.buildModelFromUrdf(str(path))
    return model, pm


def solo12_on_floor():
    """``(model, scene)``: solo12 with its collision shapes (its meshes, as their convex hulls) on the
    floor, its SRDF's pairs left out, as a user first simulates it: and the four pairs whose hulls overlap
    at the SRDF's standing configuration (the base's and each upper leg's), as the scene's warning says."""
    import warnings
    import sparsedyn as sd
    root = robots_dir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # implausible-inertia warnings are tested elsewhere
        model = load_urdf(root / "solo_description/robots/solo12.urdf", floating_base=True, geometry=True,
                          package_dirs=[root], invalid_inertia="warn")
    srdf = sd.load_srdf(model, root / "solo_description/srdf/solo.srdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.SelfOverlapWarning)
        scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], srdf=srdf)
    gone = sd.overlapping_pairs(scene, srdf.reference_configurations["standing"])
    assert len(gone) == 4
    return model, scene.with_pairs(remove=gone)


def convex_meshes(gm):
    """Pinocchio's collision model ``gm`` with each mesh (a BVH of triangles) replaced by its convex hull
    (coal's ``buildConvexHull``, qhull's options as collide's first), as a scene collides a mesh."""
    from sparsedyn.contact.collision_coal import HULL_OPTIONS
    for g in gm.geometryObjects:
        if isinstance(g.geometry, pin.coal.BVHModelBase):
            g.geometry.buildConvexHull(True, HULL_OPTIONS[0])
            g.geometry = g.geometry.convex
    return gm


def random_state(model, rng):
    q = model.random_configuration(rng)
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv)


# Files of example-robot-data that load_urdf rejects with a data error (tested in tests/io/test_urdf.py).
INVALID_URDFS = frozenset({
    "ur_description/urdf/ur3.urdf", "romeo_description/urdf/romeo_laas_small.urdf",
    "tiago_description/robots/tiago.urdf", "tiago_description/robots/tiago_dual.urdf",
    "tiago_description/robots/tiago_no_hand.urdf"})


def urdf_files():
    """Every URDF of example-robot-data that load_urdf accepts (paths relative to robots_dir())."""
    root = robots_dir()
    return sorted(f for f in (str(p.relative_to(root)) for p in root.rglob("*.urdf")) if f not in INVALID_URDFS)


def load_model(file, floating_base):
    """Our model of an example-robot-data URDF (path relative to robots_dir())."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # implausible-inertia warnings are tested elsewhere
        return load_urdf(robots_dir() / file, floating_base=floating_base)


#: Our frame-velocity references and Pinocchio's.
PIN_REFS = {"local": pin.LOCAL, "world": pin.WORLD, "local_world_aligned": pin.LOCAL_WORLD_ALIGNED}


def pin_frames(pm):
    """``{frame name: Pinocchio frame index}``; where Pinocchio names a joint frame and a link frame
    alike, the link frame (ours are the link and merged-link frames)."""
    return {f.name: k for k, f in reversed(list(enumerate(pm.frames))) if f.type != pin.JOINT}


def icub_with_sensors():
    """``(model, sensors)``: iCub (reduced, floating base) with its six F/T sensors, all on merged fixed
    joints: the leg and arm sensors have the moving bodies beyond them on their child side, the foot
    sensors none."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_urdf(robots_dir() / "icub_description/robots/icub_reduced.urdf", floating_base=True)
    sensors = [s for s in model.sensors if s.kind == "force_torque"]
    assert len(sensors) == 6 and {len(model.fixed_joint(s.joint).children) for s in sensors} == {0, 1}
    return model, sensors
