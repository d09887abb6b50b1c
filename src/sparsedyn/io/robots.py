"""example-robot-data's robots by name: the URDF of a name (``"panda"``, ``"talos_reduced"``), or
of the short name by which its Python loader knows a robot (``example_robot_data.load("talos")``,
as used with Pinocchio: :data:`EXAMPLE_ROBOT_NAMES`), in the installed package."""

from __future__ import annotations

import difflib
import site
import sys
from pathlib import Path

__all__ = ["EXAMPLE_ROBOT_NAMES", "example_robot_data_dir", "example_robot_hint", "find_example_robot"]

#: The names of example-robot-data's Python loader (``example_robot_data.load(name)``, as used with
#: Pinocchio) whose URDF is not simply ``<name>.urdf``: name -> the file below the package's
#: ``robots`` folder.  The installed package ships the robots without that loader, so the table is
#: kept here.  The loader adds a free flyer to the legged robots; here ``floating_base`` says so.
EXAMPLE_ROBOT_NAMES = {
    "anymal": "anymal_b_simple_description/robots/anymal.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "anymal_kinova": "anymal_b_simple_description/robots/anymal-kinova.urdf",
    "asr_twodof": "asr_twodof_description/urdf/TwoDofs.urdf",
    "b1_z1": "b1_description/urdf/b1-z1.urdf",
    "hector": "hector_description/robots/quadrotor_base.urdf",
    "hyq": "hyq_description/robots/hyq_no_sensors.urdf",
    "iris": "iris_description/robots/iris_simple.urdf",
    "solo8": "solo_description/robots/solo.urdf",
    "talos": "talos_data/robots/talos_reduced.urdf",
    "talos_box": "talos_data/robots/talos_reduced_box.urdf",
    "talos_arm": "talos_data/robots/talos_left_arm.urdf",
    "talos_full": "talos_data/robots/talos_full_v2.urdf",
    "talos_full_box": "talos_data/robots/talos_full_v2_box.urdf",
    "ur3": "ur_description/urdf/ur3_robot.urdf",
    "ur3_limited": "ur_description/urdf/ur3_joint_limited_robot.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "ur5_limited": "ur_description/urdf/ur5_joint_limited_robot.urdf",
    "ur10": "ur_description/urdf/ur10_robot.urdf",
    "ur10_limited": "ur_description/urdf/ur10_joint_limited_robot.urdf",
}

#: Names of that loader that name no URDF: why each cannot be loaded.
_NOT_URDF = {"cassie": "an SDF model (sparsedyn reads URDF and MJCF)",
             "talos_legs": "cut from talos by the loader's Python code (load 'talos' and keep its legs)"}


def example_robot_data_dir():
    """The ``robots`` folder of the installed ``example-robot-data`` package, or ``None``."""
    bases = [Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"]
    bases += [Path(p) for p in site.getsitepackages()]
    for base in bases:
        d = base / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if d.is_dir():
            return d
    return None


def find_example_robot(name: str):
    """Path of the URDF called ``name`` (e.g. ``"panda"``, ``"talos_reduced"``), or known to
    Pinocchio's loader by ``name`` (``"talos"``, ``"solo8"``:
    :data:`~sparsedyn.io.robots.EXAMPLE_ROBOT_NAMES`), in the installed ``example-robot-data``
    package (see :func:`~sparsedyn.io.robots.example_robot_data_dir`), or ``None``."""
    d = example_robot_data_dir()
    if d is None or not name or "/" in name or "\\" in name:
        return None
    if name in EXAMPLE_ROBOT_NAMES and (d / EXAMPLE_ROBOT_NAMES[name]).is_file():
        return d / EXAMPLE_ROBOT_NAMES[name]
    hits = sorted(d.rglob(f"{name}.urdf"), key=lambda p: (len(p.parts), str(p)))
    return hits[0] if hits else None


def example_robot_hint(name: str) -> str:
    """What to say of a ``name`` that :func:`~sparsedyn.io.robots.find_example_robot` does not find:
    ``"; "`` and the closest names of example-robot-data (its URDFs and the loader's names), why a loader name is no
    URDF, or how to install the package; ``""`` when nothing is close."""
    if name in _NOT_URDF:
        return f"; example-robot-data's {name!r} is {_NOT_URDF[name]}"
    d = example_robot_data_dir()
    if d is None:
        return "; example-robot-data is not installed (pip install example-robot-data) for names like 'panda'"
    names = sorted({p.stem for p in d.rglob("*.urdf")} | set(EXAMPLE_ROBOT_NAMES))
    near = [x for x in names if x.startswith(name)][:6] or difflib.get_close_matches(name, names, n=6, cutoff=0.5)
    return f"; closest example-robot-data names: {', '.join(near)}" if near else ""
