"""Conversions to and from other rigid-body-dynamics libraries.

* :mod:`sparsedyn.interop.mujoco` -- MuJoCo's layouts and MJCF export.
* :mod:`sparsedyn.interop.pinocchio` -- Pinocchio's configuration, velocity and
  force layouts, and :class:`pinocchio.Model` in both directions.

These modules import the other library lazily, so they can be imported (and
their array conversions used) without it.
"""

import site as _site
import sys as _sys
from pathlib import Path as _Path


def example_robot_data_dir():
    """The ``robots`` folder of the installed ``example-robot-data`` package, or ``None``."""
    bases = [_Path(_sys.prefix) / "lib" / f"python{_sys.version_info.major}.{_sys.version_info.minor}" / "site-packages"]
    bases += [_Path(p) for p in _site.getsitepackages()]
    for base in bases:
        d = base / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if d.is_dir():
            return d
    return None
