"""Model resolution: a model from a name or a path, as a command line or a script names it.

:func:`resolve_model` accepts a built-in model name (``humanoid``, ``chain7``, ...), a URDF or
MJCF file, or the name of a URDF of the ``example-robot-data`` package (``panda``,
``talos_reduced``, ...) or the short name by which Pinocchio's loader knows it
(``example_robot_data.load("talos")``: :data:`~sparsedyn.io.robots.EXAMPLE_ROBOT_NAMES`), found by
:func:`~sparsedyn.io.robots.find_example_robot` in
:func:`~sparsedyn.io.robots.example_robot_data_dir` (:mod:`sparsedyn.io.robots`).
"""

from __future__ import annotations

import os

from ..model import ModelError
from .robots import EXAMPLE_ROBOT_NAMES, example_robot_data_dir, example_robot_hint, find_example_robot

__all__ = ["EXAMPLE_ROBOT_NAMES", "example_robot_data_dir", "example_robot_hint", "find_example_robot",
           "resolve_model"]


def resolve_model(spec: str, floating_base: bool = False, invalid_inertia: str = "error", error=ModelError,
                  geometry: bool = False):
    """A :class:`~sparsedyn.model.Model` from ``spec``: a built-in model name, a URDF or MJCF file
    (:func:`sparsedyn.load_model`), or the name of a robot of ``example-robot-data``
    (:func:`~sparsedyn.io.robots.find_example_robot`).
    ``floating_base``, ``invalid_inertia`` and ``geometry``: see :func:`sparsedyn.load_urdf`.
    Raises ``error`` (a :class:`~sparsedyn.model.ModelError` by default) when ``spec`` is none of
    these, naming the closest example-robot-data URDFs."""
    from ..model.builders import BUILTIN_MODELS, builtin
    if spec in BUILTIN_MODELS:
        return builtin(spec)
    path = spec if (spec.endswith((".urdf", ".xml", ".mjcf")) or os.path.sep in spec or "/" in spec
                    or os.path.exists(spec)) else find_example_robot(spec)
    if path is not None:
        from .load import load_model
        return load_model(path, floating_base=floating_base, invalid_inertia=invalid_inertia, geometry=geometry)
    raise error(f"{spec!r} is neither a built-in model ({', '.join(sorted(BUILTIN_MODELS))}), nor a .urdf "
                f"or MJCF .xml file, nor a robot of example-robot-data (e.g. panda, talos, solo12)"
                f"{example_robot_hint(spec)}")
