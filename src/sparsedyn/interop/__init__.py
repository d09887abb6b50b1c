"""Conversions to and from other rigid-body-dynamics libraries.

* :mod:`sparsedyn.interop.mujoco` -- MuJoCo's layouts and MJCF export.
* :mod:`sparsedyn.interop.pinocchio` -- Pinocchio's configuration, velocity and
  force layouts, and :class:`pinocchio.Model` in both directions.

These modules import the other library lazily, so they can be imported (and
their array conversions used) without it.
"""

from ..io.resolve import example_robot_data_dir   # noqa: F401  (its documented home)
