"""Model resolution: a model from a name or a path, as a command line or a script names it.

:func:`resolve_model` accepts a built-in model name (``humanoid``, ``chain7``, ...), a URDF or
MJCF file, or the name of a URDF of the ``example-robot-data`` package (``panda``,
``talos_reduced``, ...), found by :func:`find_example_robot` in :func:`example_robot_data_dir`.
"""

from __future__ import annotations

import difflib
import os
import site
import sys
from pathlib import Path

from ..model import ModelError

__all__ = ["example_robot_data_dir", "find_example_robot", "resolve_model"]


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
    """Path of the URDF called ``name`` (e.g. ``"panda"``, ``"talos_reduced"``) in the installed
    ``example-robot-data`` package (see :func:`example_robot_data_dir`), or ``None``."""
    d = example_robot_data_dir()
    if d is None or not name or "/" in name or "\\" in name:
        return None
    hits = sorted(d.rglob(f"{name}.urdf"), key=lambda p: (len(p.parts), str(p)))
    return hits[0] if hits else None


def resolve_model(spec: str, floating_base: bool = False, invalid_inertia: str = "error", error=ModelError,
                  geometry: bool = False):
    """A :class:`~sparsedyn.model.Model` from ``spec``: a built-in model name, a URDF or MJCF file
    (:func:`sparsedyn.load_model`), or the name of a URDF of ``example-robot-data``.
    ``floating_base``, ``invalid_inertia`` and ``geometry``: see :func:`sparsedyn.load_urdf`.
    Raises ``error`` (a :class:`~sparsedyn.model.ModelError` by default) when ``spec`` is none of
    these, naming the closest example-robot-data URDFs."""
    from ..builders import BUILTIN_MODELS, builtin
    if spec in BUILTIN_MODELS:
        return builtin(spec)
    path = spec if (spec.endswith((".urdf", ".xml", ".mjcf")) or os.path.sep in spec or "/" in spec
                    or os.path.exists(spec)) else find_example_robot(spec)
    if path is not None:
        from .load import load_model
        return load_model(path, floating_base=floating_base, invalid_inertia=invalid_inertia, geometry=geometry)
    d = example_robot_data_dir()
    if d is None:
        hint = "; example-robot-data is not installed (pip install example-robot-data) for names like 'panda'"
    else:
        stems = sorted({p.stem for p in d.rglob("*.urdf")})
        near = [x for x in stems if x.startswith(spec)][:6] or difflib.get_close_matches(spec, stems, n=6, cutoff=0.5)
        hint = f"; closest example-robot-data URDFs: {', '.join(near)}" if near else ""
    raise error(f"{spec!r} is neither a built-in model ({', '.join(sorted(BUILTIN_MODELS))}), nor a .urdf "
                f"or MJCF .xml file, nor a URDF of example-robot-data (e.g. panda, talos_reduced, ur5_robot){hint}")
