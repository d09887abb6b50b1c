"""``load_model``: a URDF or an MJCF file, told apart by its extension or its root element."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..model import ModelError
from .files import checked_path

__all__ = ["load_model", "model_format"]

_COMMENT = re.compile(rb"<!--.*?-->|<\?.*?\?>|<!DOCTYPE[^>]*>", re.DOTALL)
_TAG = re.compile(rb"<\s*([A-Za-z_][\w.:-]*)")


def model_format(path) -> str:
    """``"urdf"`` or ``"mjcf"``: by extension (``.urdf``; ``.mjcf``) or, for ``.xml`` and others,
    by the root element (``<robot>``: URDF, ``<mujoco>``: MJCF)."""
    label = checked_path(path, ModelError, "model file")
    ext = Path(label).suffix.lower()
    if ext == ".urdf":
        return "urdf"
    if ext == ".mjcf":
        return "mjcf"
    try:
        with open(label, "rb") as fh:
            head = fh.read(1 << 16)
    except FileNotFoundError:
        raise ModelError(f"{label}: file not found") from None
    except OSError as e:
        raise ModelError(f"{label}: cannot read file: {e.strerror or e}") from None
    m = _TAG.search(_COMMENT.sub(b"", head))
    root = m.group(1).decode(errors="replace").split(":")[-1] if m else None
    if root == "robot":
        return "urdf"
    if root == "mujoco":
        return "mjcf"
    raise ModelError(f"{label}: root element is {f'<{root}>' if root else 'missing'}; expected <robot> (URDF) "
                     f"or <mujoco> (MJCF)")


def _robot_file(path):
    """``path``, or, for a bare name that is no file (``"solo12"``, ``"talos"``), the URDF of that
    robot of example-robot-data (:func:`sparsedyn.io.robots.find_example_robot`); a bare name that
    names neither is a :class:`ModelError` listing the closest names."""
    label = checked_path(path, ModelError, "model file")
    if not isinstance(label, str) or os.path.exists(label) or Path(label).suffix or "/" in label \
            or os.sep in label or not label:
        return path
    from .robots import example_robot_hint, find_example_robot
    found = find_example_robot(label)
    if found is None:
        raise ModelError(f"{label!r}: no such file, nor a robot of example-robot-data{example_robot_hint(label)}")
    return found


def load_model(path, *, floating_base=False, invalid_inertia="error", sensors=True, constraints=False,
               geometry=False):
    """A :class:`~sparsedyn.model.Model` from a URDF or an MJCF file (see :func:`model_format`), or
    from a robot of example-robot-data named as its URDF is (``"talos_reduced"``) or as Pinocchio's
    loader names it (``"talos"``, ``"solo12"``: :func:`sparsedyn.io.robots.find_example_robot`;
    ``floating_base`` stays yours to choose, where that loader adds a free flyer to legged robots).

    URDF: :func:`sparsedyn.load_urdf` with ``floating_base``, ``invalid_inertia``
    and ``sensors``.  MJCF: :func:`sparsedyn.load_mjcf` with ``sensors`` and
    ``constraints`` (then ``(model, constraint_set)`` is returned); an MJCF file
    declares its floating base itself (a free joint), so ``floating_base=True``
    is refused.  ``geometry=True`` reads the visual and collision shapes (both formats).
    ``constraints=True`` is refused for a URDF (its loop closures
    live in a side file: :func:`sparsedyn.load_closed_loop`).
    """
    path = _robot_file(path)
    kind = model_format(path)
    if kind == "urdf":
        if constraints:
            raise ValueError(f"{os.fspath(path)}: constraints=True applies to MJCF files; a URDF's loop closures "
                             f"are read by sparsedyn.load_closed_loop")
        from .urdf import load_urdf
        return load_urdf(path, floating_base=floating_base, invalid_inertia=invalid_inertia, sensors=sensors,
                         geometry=geometry)
    if floating_base:
        raise ValueError(f"{os.fspath(path)}: an MJCF file declares its floating base with a free joint; "
                         f"floating_base=True applies to URDF files only")
    from .mjcf import load_mjcf
    return load_mjcf(path, sensors=sensors, constraints=constraints, geometry=geometry)
