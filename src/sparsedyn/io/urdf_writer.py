"""URDF writer: ``to_urdf`` writes a :class:`~sparsedyn.model.Model` that Pinocchio and
:func:`~sparsedyn.io.urdf.load_urdf` read back (conventions: :mod:`sparsedyn.io.urdf`)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from .. import _checks
from ..model import spatial
from ..model import Model
from .urdf_elements import DBL_MAX, INERTIA_KEYS

__all__ = ["to_urdf"]

URDF_TYPE = {"revolute": "revolute", "continuous": "continuous", "prismatic": "prismatic",
             "free": "floating", "planar": "planar"}


def _rpy(R):
    """Roll, pitch, yaw with ``R = Rz(y) Ry(p) Rx(r)``, accurate also near pitch = +-pi/2.

    Yaw comes first from the first column; the remaining ``Ry(p) Rx(r) = Rz(y)^T R``
    then gives roll from its (well-conditioned) middle row and pitch from its
    first column, so round-off stays at machine precision for every rotation.
    """
    y = math.atan2(R[1, 0], R[0, 0])
    cy, sy = math.cos(y), math.sin(y)
    M = np.array([[cy, sy, 0.0], [-sy, cy, 0.0], [0.0, 0.0, 1.0]]) @ R
    return math.atan2(-M[1, 2], M[1, 1]), math.atan2(-M[2, 0], M[0, 0]), y


def _num(x):
    """Shortest repr that round-trips a double; infinities become the largest double."""
    x = float(x)
    return repr(math.copysign(DBL_MAX, x) if math.isinf(x) else x + 0.0)


def _nums(xs):
    return " ".join(_num(x) for x in xs)


def _write_link(robot, name, I):
    link = ET.SubElement(robot, "link", name=name)
    m, c, Ic = spatial.inertia_components(I)
    if m == 0 and not np.any(Ic):
        return
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=_nums(c), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_num(m))
    S = (Ic + Ic.T) / 2
    ET.SubElement(inertial, "inertia", {k: _num(S[i, j]) for k, (i, j) in
                                       zip(INERTIA_KEYS, ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)))})


def to_urdf(model: Model) -> str:
    """Write ``model`` as a URDF string (Pinocchio and :func:`load_urdf` read it back).

    Every joint must be ``revolute``, ``continuous``, ``prismatic``, ``free``
    (written ``floating``) or ``planar``; other types raise ``ValueError``.
    Each body becomes a link of its name with its parent joint of the joint's
    name; a fixed-base model gets a root link named ``model.root_name``.  If
    body 0 is the only body on the world and has a free joint with identity
    ``Xtree`` (a floating-base robot), it is written as the root link itself and
    the file must be reloaded with ``floating_base=True`` (its joint is then
    called ``'root_joint'``).  Named frames that are not bodies are omitted;
    mimic couplings are written.  Inertias are written about the centre of mass
    in body axes; infinite limits as the largest double (see the module docstring).
    """
    _checks.model_first("to_urdf", model, "model")
    for i, j in enumerate(model.joints):
        if j.type not in URDF_TYPE:
            raise ValueError(f"to_urdf: joint {model.joint_names[i]!r} of type {j.type!r} cannot be written as "
                             f"URDF (supported: {', '.join(sorted(URDF_TYPE))}; URDF has one axis per joint and no "
                             f"screw or user-defined joint)")
    if len(set(model.joint_names)) != model.nbodies:
        raise ValueError(f"to_urdf: model {model.name!r} has repeated joint names; URDF joint names are unique")
    roots = [i for i in range(model.nbodies) if model.parent[i] < 0]
    floating_root = (roots == [0] and model.joints[0].type == "free"
                     and np.array_equal(model.Xtree[0].E, np.eye(3)) and not np.any(model.Xtree[0].r))
    robot = ET.Element("robot", name=model.name)
    joint_elements = {}
    if not floating_root:
        ET.SubElement(robot, "link", name=model.root_name)
    for i in range(model.nbodies):
        _write_link(robot, model.body_names[i], model.inertia[i])
        if floating_root and i == 0:
            continue
        j = model.joints[i]
        joint = joint_elements[i] = ET.SubElement(robot, "joint", name=model.joint_names[i], type=URDF_TYPE[j.type])
        R, p = spatial.pose(model.Xtree[i])
        ET.SubElement(joint, "origin", xyz=_nums(p), rpy=_nums(_rpy(R)))
        p_i = model.parent[i]
        ET.SubElement(joint, "parent", link=model.root_name if p_i < 0 else model.body_names[p_i])
        ET.SubElement(joint, "child", link=model.body_names[i])
        if j.type in ("revolute", "continuous", "prismatic"):
            ET.SubElement(joint, "axis", xyz=_nums(j.axis))
            q0, v0 = model.q_start[i], model.v_start[i]
            limit = {"effort": _num(model.effort_limit[v0]), "velocity": _num(model.velocity_limit[v0])}
            if j.type != "continuous":
                limit.update(lower=_num(model.lower[q0]), upper=_num(model.upper[q0]))
            ET.SubElement(joint, "limit", limit)
        elif j.type == "planar":
            ET.SubElement(joint, "axis", xyz="0 0 1")
    for mimic in model.mimic:
        if mimic.joint not in joint_elements or mimic.mimicked not in joint_elements:
            raise ValueError(f"to_urdf: the floating root joint {model.joint_names[0]!r} cannot take part in a mimic")
        ET.SubElement(joint_elements[mimic.joint], "mimic", joint=model.joint_names[mimic.mimicked],
                      multiplier=_num(mimic.multiplier), offset=_num(mimic.offset))
    ET.indent(robot)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"
