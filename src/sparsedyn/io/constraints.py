"""Loop-closure files: the constraints a URDF cannot express, in a small file next to it.

URDF describes trees only.  A closed-loop mechanism is a URDF (the spanning
tree) plus a *constraints file* with the same stem: ``robot.urdf`` +
``robot.constraints.json`` (or ``robot.constraints.toml``).  Both formats hold
the same document; JSON is always available (and is what :func:`save_constraints`
writes), TOML is read with :mod:`tomllib` (Python >= 3.11) or the ``tomli``
package on Python 3.10.  Example (JSON)::

    {
      "format": "sparsedyn-constraints", "version": 1,
      "gravity": [0, -9.81, 0],                      (optional, overrides the model's)
      "actuated": ["crank_joint"],                   (optional: joint names)
      "mimic": true,                                 (optional, default true: URDF <mimic> couplings)
      "constraints": [
        {"type": "point", "name": "loop", "frame_a": "coupler", "point_a": [0.35, 0, 0],
         "frame_b": "rocker", "point_b": [0.3, 0, 0], "axes": "xyz"},
        {"type": "weld", "name": "l_foot", "frame_a": "l_sole",
         "placement": {"xyz": [0, 0.09, 0], "rpy": [0, 0, 0]}},
        {"type": "ground", "name": "toe", "frame": "foot", "point": [0.1, 0, 0],
         "normal": [0, 0, 1], "height": 0},
        {"type": "coupling", "name": "finger", "joint": "j2", "mimicked": "j1",
         "multiplier": -1, "offset": 0}
      ]
    }

Entries: ``type`` one of ``point`` (:class:`~sparsedyn.constraints.PointCoincidence`),
``weld`` (:class:`~sparsedyn.constraints.Weld`), ``ground`` (:class:`~sparsedyn.constraints.PointOnGround`),
``coupling`` (:class:`~sparsedyn.constraints.JointCoupling`); ``name`` optional (default
``<type><index>``).  Frames are the model's frame names (URDF link names,
including links merged through fixed joints, and joint names); a missing or
``null`` ``frame_b`` is the world.  Points are in their frame's coordinates, in
metres.  A weld ``placement`` (pose of frame A in frame B or in the world) is
either ``{"xyz", "rpy"}`` (URDF convention ``R = Rz(yaw) Ry(pitch) Rx(roll)``) or
``{"position", "rotation"}`` (a 3x3 matrix, rows first); its optional ``directions``
(a list among ``"rx", "ry", "rz", "x", "y", "z"``, frame A's axes) fixes only those
relative motions (a revolute or planar loop closure).  Unknown keys are
errors, so that a typo never silently drops a constraint.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..constraints.base import ConstraintSet
from ..constraints.coupling import JointCoupling, mimic_constraints
from ..constraints.errors import ConstraintError
from ..constraints.frames import PointCoincidence, PointOnGround, Weld
from ..model import ModelError
from ..model.spatial import rpy_to_rot
from .files import clip, read_table, shorten
from .urdf import load_urdf

__all__ = ["load_constraints", "save_constraints", "load_closed_loop", "ClosedLoop", "constraints_path",
           "FORMAT", "VERSION"]

FORMAT, VERSION = "sparsedyn-constraints", 1
_SUFFIXES = (".constraints.json", ".constraints.toml")
_TOP = {"format", "version", "gravity", "actuated", "mimic", "constraints"}
_KEYS = {
    "point": ({"frame_a"}, {"type", "name", "frame_a", "point_a", "frame_b", "point_b", "axes"}),
    "weld": ({"frame_a"}, {"type", "name", "frame_a", "frame_b", "placement", "directions"}),
    "ground": ({"frame"}, {"type", "name", "frame", "point", "normal", "height"}),
    "coupling": ({"joint", "mimicked"}, {"type", "name", "joint", "mimicked", "multiplier", "offset"}),
}


class ClosedLoop(NamedTuple):
    """A URDF tree with its loop closures: ``model``, ``constraints`` and the ``actuated`` joint names."""

    model: object
    constraints: ConstraintSet
    actuated: tuple | None


def _read(path: Path) -> dict:
    return read_table(path, ConstraintError, "constraints file")


def _numbers(where, value, shape):
    try:
        if isinstance(value, (bool, str)) or _has_bool(value):
            raise TypeError
        a = np.array(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ConstraintError(f"{where}: expected numbers of shape {shape}, got {clip(value)}") from None
    if a.shape != shape or not np.all(np.isfinite(a)):
        raise ConstraintError(f"{where}: expected finite numbers of shape {shape}, got {clip(value)}")
    return a


def _has_bool(value):
    return isinstance(value, bool) or (isinstance(value, list) and any(_has_bool(v) for v in value[:16]))


def _placement(where, p):
    if p is None:
        return None
    if not isinstance(p, dict):
        raise ConstraintError(f"{where}: expected a table/object with xyz and rpy (or position and rotation)")
    keys = set(p)
    if keys <= {"xyz", "rpy"}:
        xyz = _numbers(f"{where}.xyz", p.get("xyz", [0, 0, 0]), (3,))
        rpy = _numbers(f"{where}.rpy", p.get("rpy", [0, 0, 0]), (3,))
        return rpy_to_rot(rpy), xyz
    if keys <= {"position", "rotation"}:
        return (_numbers(f"{where}.rotation", p.get("rotation", np.eye(3).tolist()), (3, 3)),
                _numbers(f"{where}.position", p.get("position", [0, 0, 0]), (3,)))
    raise ConstraintError(f"{where}: unknown keys {sorted(keys - {'xyz', 'rpy', 'position', 'rotation'})}; "
                          f"give xyz and rpy, or position and rotation")


def _entry(model, k, e, where):
    if not isinstance(e, dict):
        raise ConstraintError(f"{where}: expected a table/object, got {type(e).__name__}")
    kind = e.get("type")
    if kind not in _KEYS:
        raise ConstraintError(f"{where}: type must be one of {sorted(_KEYS)}, got {kind!r}")
    required, allowed = _KEYS[kind]
    if set(e) - allowed:
        raise ConstraintError(f"{where} ({kind}): unknown keys {sorted(set(e) - allowed)}; allowed: {sorted(allowed)}")
    if required - set(e):
        raise ConstraintError(f"{where} ({kind}): missing {sorted(required - set(e))}")
    name = e.get("name", f"{kind}{k}")
    if not isinstance(name, str):
        raise ConstraintError(f"{where} ({kind}): name must be a string, got {clip(name)}")
    for key in ("frame_a", "frame_b", "frame", "joint", "mimicked", "axes"):
        if key in e and not isinstance(e[key], str):
            raise ConstraintError(f"{where} ({kind}): {key} must be a string (a name), got {clip(e[key])}")
    try:
        if kind == "point":
            return PointCoincidence(model, e["frame_a"], e.get("frame_b"), e.get("point_a"), e.get("point_b"),
                                    e.get("axes", "xyz"), name=name)
        if kind == "weld":
            return Weld(model, e["frame_a"], e.get("frame_b"), _placement(f"{where}.placement", e.get("placement")),
                        name=name, directions=e.get("directions"))
        if kind == "ground":
            return PointOnGround(model, e["frame"], e.get("point"), e.get("normal", (0.0, 0.0, 1.0)),
                                 e.get("height", 0.0), name=name)
        return JointCoupling(model, e["joint"], e["mimicked"], e.get("multiplier", 1.0), e.get("offset", 0.0),
                             name=name)
    except (ValueError, TypeError, KeyError, OverflowError) as err:     # ConstraintError is a ValueError
        raise ConstraintError(f"{where}: {shorten(str(err), 500)}") from None


def _parse(model, doc, label):
    if not isinstance(doc, dict):
        raise ConstraintError(f"{label}: expected a table/object at the top level")
    if set(doc) - _TOP:
        raise ConstraintError(f"{label}: unknown top-level keys {sorted(set(doc) - _TOP)}; allowed: {sorted(_TOP)}")
    if doc.get("format", FORMAT) != FORMAT:
        raise ConstraintError(f"{label}: format must be {FORMAT!r}, got {clip(doc.get('format'))}")
    if doc.get("version", VERSION) != VERSION:
        raise ConstraintError(f"{label}: version {clip(doc.get('version'))} is not supported (this reader: {VERSION})")
    if "gravity" in doc:
        try:
            model = dataclasses.replace(model, gravity=_numbers(f"{label}: gravity", doc["gravity"], (3,)))
        except ModelError as err:
            raise ConstraintError(f"{label}: gravity: {err}") from None
    entries = doc.get("constraints", [])
    if not isinstance(entries, list):
        raise ConstraintError(f"{label}: constraints must be a list/array of tables")
    items = mimic_constraints(model) if doc.get("mimic", True) else []
    items += [_entry(model, k, e, f"{label}: constraints[{k}]") for k, e in enumerate(entries)]
    actuated = doc.get("actuated")
    if actuated is not None:
        if not isinstance(actuated, list) or not all(isinstance(a, str) for a in actuated):
            raise ConstraintError(f"{label}: actuated must be a list of joint names")
        for a in actuated:
            if a not in model.joint_names:
                raise ConstraintError(f"{label}: actuated joint {clip(a)} is not a joint of model {model.name!r}")
        actuated = tuple(actuated)
    try:
        return ClosedLoop(model, ConstraintSet(model, items), actuated)
    except (ValueError, TypeError, KeyError) as err:
        raise ConstraintError(f"{label}: {shorten(str(err), 500)}") from None


def load_constraints(source, model) -> ClosedLoop:
    """Read a constraints file (path, or an already parsed ``dict``) for ``model``.

    Returns a :class:`ClosedLoop`; its ``model`` differs from ``model`` only when
    the file sets ``gravity``.  Errors name the file, the entry and the field.
    """
    if isinstance(source, dict):
        return _parse(model, source, "constraints")
    path = Path(source)
    return _parse(model, _read(path), str(path))


def constraints_path(urdf) -> Path | None:
    """The constraints file next to ``urdf`` (``<stem>.constraints.json`` or ``.toml``), or None."""
    urdf = Path(urdf)
    found = [urdf.with_name(urdf.stem + s) for s in _SUFFIXES if urdf.with_name(urdf.stem + s).is_file()]
    if len(found) > 1:
        raise ConstraintError(f"{urdf}: both {found[0].name} and {found[1].name} exist; keep one")
    return found[0] if found else None


def load_closed_loop(urdf, constraints=None, *, floating_base=False, **urdf_options) -> ClosedLoop:
    """Load a URDF and its loop closures: ``constraints`` (a path) or the file found by :func:`constraints_path`.

    Without a constraints file the URDF's ``<mimic>`` couplings are the only constraints.
    """
    model = load_urdf(urdf, floating_base=floating_base, **urdf_options)
    path = constraints_path(urdf) if constraints is None else Path(constraints)
    if path is None:
        return ClosedLoop(model, ConstraintSet(model, mimic_constraints(model)), None)
    return load_constraints(path, model)


def save_constraints(cs, path, *, actuated=None, gravity=None, mimic=None) -> Path:
    """Write ``cs`` as a JSON constraints file.

    Coupling constraints that come from ``model.mimic`` are not written (the
    URDF holds them) unless ``mimic=False`` (then the file says ``"mimic":
    false`` and lists every coupling).  ``gravity``: write it (e.g. for a
    planar mechanism whose URDF cannot say it); ``True`` writes the model's.
    """
    model = cs.model
    from_urdf = {c.name for c in mimic_constraints(model)} if mimic is not False else set()
    doc = {"format": FORMAT, "version": VERSION}
    if gravity is not None:
        doc["gravity"] = np.asarray(model.gravity if gravity is True else gravity, float).tolist()
    if actuated is not None:
        doc["actuated"] = list(actuated)
    if mimic is False:
        doc["mimic"] = False
    doc["constraints"] = [c.to_dict() for c in cs if c.name not in from_urdf]
    for e in doc["constraints"]:
        for k in [k for k, val in e.items() if val is None]:
            del e[k]                          # a missing frame_b is the world (TOML has no null)
    path = Path(path)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path
