"""URDF reader and writer: ``load_urdf`` builds a :class:`~sparsedyn.model.Model`, ``to_urdf`` writes one.

Frames and conventions
----------------------

* A body's frame is the frame of the joint that carries it, which URDF also
  uses as the child link's frame (as in Pinocchio).  A joint's ``<origin xyz
  rpy>`` is the pose ``(R, p)`` of the child link frame in the parent link
  frame at ``q = 0``, with ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (fixed-axis
  roll-pitch-yaw); the Plücker ``Xtree = child_X_parent`` is
  ``spatial.from_pose(R, p)``.
* ``<inertial>``: ``<origin>`` places the centre of mass and the axes of the
  ``<inertia>`` matrix ``I`` in the link frame; the rotational inertia about
  the centre of mass in link axes is ``R I R^T``.
* Joint types: ``revolute``, ``continuous`` and ``prismatic`` map to the
  joints of the same name (axis normalised, default ``(1, 0, 0)``), ``floating``
  to ``free`` and ``planar`` to ``planar``.  Our planar joint moves in the xy
  plane of the joint frame, so a URDF planar joint must say
  ``<axis xyz="0 0 1"/>`` (the plane normal); other axes are rejected rather
  than silently re-oriented.
* ``fixed`` joints are merged, as Pinocchio does: the child link's inertia is
  added to the body it is rigidly attached to, its child joints are re-attached
  to that body with composed ``Xtree``, and the merged link and the fixed joint
  stay reachable as named frames on that body.  Moving joints also get a frame
  of their own name (identity on their body) unless a link has that name.
  Each merged fixed joint is recorded in ``model.fixed_joints``
  (:class:`~sparsedyn.model.FixedJoint`: its frame, the inertia of the links on
  its child side, the moving bodies and frames there), which is what a
  force/torque sensor on it needs; the body numbering is not affected.
* The root link is the one link that is no joint's child.  With
  ``floating_base=False`` it is the fixed world (``model.root_name``); links
  fixed to it have no body, so their mass and frames are dropped.  With
  ``floating_base=True`` it becomes body 0 on a ``free`` joint called
  ``'root_joint'`` (Pinocchio's name) with identity ``Xtree``.
* Bodies are numbered as Pinocchio's ``buildModelFromUrdf`` numbers its joints:
  depth first, the child joints of a link taken in alphabetical order of their
  names (urdfdom keeps joints in a name-sorted map), not in document order.
* ``<limit lower upper effort velocity>`` fills ``lower``/``upper`` (per q) and
  ``velocity_limit``/``effort_limit`` (per dof).  As in urdfdom, ``effort`` and
  ``velocity`` are required in a ``<limit>`` and ``lower``/``upper`` default to
  0; a revolute or prismatic joint without ``<limit>`` is unbounded (urdfdom
  rejects it; we accept it).  Continuous joints have infinite position limits;
  the limits of floating and planar joints are ignored.  URDF cannot write
  infinity, so ``to_urdf`` writes the largest double for an infinite limit and
  ``load_urdf`` reads that value back as infinite.
* ``<mimic>`` is kept as :class:`~sparsedyn.model.Mimic` data; the mimicking
  joint stays an independent joint (Pinocchio's default build).
* Force/torque sensors become ``model.sensors``
  (:class:`~sparsedyn.sensors.ForceTorque`, on a moving or a fixed joint), from
  Gazebo's tags::

      <gazebo reference="l_leg_ft_sensor">          <!-- a joint -->
        <sensor name="left_leg_ft" type="force_torque">
          <force_torque><frame>child</frame><measure_direction>child_to_parent</measure_direction></force_torque>
          <pose>0 0 0 0 0 0</pose>                   <!-- used by <frame>sensor</frame> -->
        </sensor>
      </gazebo>

  and from iDynTree's top-level ``<sensor name type="force_torque"><parent
  joint="..."/>`` (same ``<force_torque>`` content, ``<origin>`` for the sensor
  frame) on joints that have no such ``<gazebo>`` sensor (a joint with both is
  one device, named by the ``<gazebo>`` tag).  Each tag follows its own
  dialect's rule for the point the torque is taken about:

  - ``<gazebo>`` (Gazebo's rule): the torque is always about the joint origin
    (the child link origin); ``<frame>`` only picks the axes: ``child``
    (default) the child link's, ``parent`` the parent link's, ``sensor`` the
    ``<pose>`` rotation relative to the joint frame.
  - top-level ``<sensor>`` (iDynTree's rule, as its URDF parser builds the
    sensor frame): ``child`` (default) the child link frame; ``sensor`` the
    frame ``<origin xyz rpy>`` placed in the child link frame, torque about
    its origin; ``parent`` the parent link frame, torque about the parent
    link's origin.  A ``sensor`` frame becomes a named frame of the model (the
    sensor's name, or ``<name>_frame`` if that name is taken), which the
    sensor's ``frame`` refers to.

  ``<measure_direction>``: ``child_to_parent`` (default: the wrench the child
  exerts on the parent) or ``parent_to_child``.  Sensors of other types and all
  other gazebo content are ignored.  Unsupported but valid sensors are skipped
  with one :class:`UrdfWarning`: a fixed joint attached to the world of a
  fixed-base model, ``parent`` axes on a moving joint (they turn with it), a
  fixed joint with moving bodies on both sides inside its merged body.  A
  reference to a link or to no joint, an unknown ``<frame>`` or
  ``<measure_direction>``, a malformed ``<pose>`` or a sensor name used twice
  raise :class:`UrdfError`.  ``load_urdf(..., sensors=False)`` reads none.
* ``<visual>`` and ``<collision>`` are read only with ``load_urdf(..., geometry=True)``, into
  ``model.geometries`` (:class:`~sparsedyn.model.Geometry`, :meth:`~sparsedyn.model.Model.geometry`):
  ``<box size>``, ``<cylinder radius length>``, ``<sphere radius>``, ``<capsule radius length>`` and
  ``<mesh filename scale>``, placed by their ``<origin>`` in the link frame and, like the inertias, moved
  onto the body the link is merged into (or onto the world, body -1, for links fixed to the world of a
  fixed-base model).  They are named ``<link>_<k>`` (the k-th element of that kind in the link, as
  Pinocchio names them) and kept in file order.  A visual's colour is its ``<material><color rgba>``,
  inline or by name from the robot's top-level ``<material>`` elements.  Mesh references are resolved
  to files as ROS and ``example-robot-data`` lay them out: ``package://PKG/rest`` is searched in
  ``package_dirs``, ``$ROS_PACKAGE_PATH``, ``$AMENT_PREFIX_PATH/share`` and the folders above the URDF
  (one named ``PKG``, or holding ``PKG``); ``file://`` and absolute paths are used as they are;
  relative paths are taken from the URDF's folder.  A mesh that is not found keeps its reference as
  written (the viewer warns about it); meshes are not read here.  Transmission elements are ignored.

A URDF is untrusted input: it is parsed with ``defusedxml`` and every problem
raises one :class:`UrdfError` naming the source, the element and the problem.
Only regular files of at most 16 MiB are read (``max_bytes=`` or the environment
variable ``SPARSEDYN_MAX_FILE_BYTES`` change the limit; :mod:`sparsedyn.io.files`),
values echoed in messages are clipped, and numbers must be finite and within the
model's range: lengths (``xyz``, centres of mass) at most ``MAX_LENGTH`` = 1e9 m,
masses at most ``MAX_MASS`` = 1e20 kg, inertia entries at most ``MAX_MASS *
MAX_LENGTH^2`` (:mod:`sparsedyn.model`), so that no dynamics result overflows to
inf or NaN.  A joint that mimics itself, or mimic joints that follow each other
in a cycle, are refused.
"""

from __future__ import annotations

import math
import os
import re
import sys
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import defusedxml.ElementTree as DET
import numpy as np

from .. import spatial
from ..joints import make_joint
from ..model import MAX_LENGTH, MAX_MASS, Model, ModelBuilder, ModelError
from .files import clip, clip_list, max_file_bytes, read_bytes, shorten, xml_errors
from ..sensors import ForceTorque

__all__ = ["load_urdf", "to_urdf", "UrdfError", "UrdfWarning"]

JOINT_TYPE_MAP = {"revolute": "revolute", "continuous": "continuous", "prismatic": "prismatic",
                  "floating": "free", "planar": "planar", "fixed": None}
URDF_TYPE = {"revolute": "revolute", "continuous": "continuous", "prismatic": "prismatic",
             "free": "floating", "planar": "planar"}
INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
EIG_TOL = 1e-12         # negative principal moments tolerated, relative to the robot's largest one
TRIANGLE_TOL = 1e-3     # relative slack in a + b >= c (inertias are often printed with few digits)
DBL_MAX = sys.float_info.max
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_NONFINITE = re.compile(r"[+-]?(?:nan|inf|infinity)\Z", re.IGNORECASE)


class UrdfError(ModelError):
    """A URDF that cannot be loaded; the message names the file, the element and the problem."""

    def __init__(self, message):
        super().__init__(shorten(str(message)))


class UrdfWarning(UserWarning):
    """A URDF that loads but has physically implausible data."""


# --- reading ----------------------------------------------------------------------

def _read_xml(source, max_bytes=None):
    """``(label, root element)``; ``label`` is the path or ``'<string>'`` for error messages."""
    head = source.lstrip("\ufeff \t\r\n") if isinstance(source, str) else ""
    if head.startswith("<"):
        # An XML declaration must open the document; otherwise keep the text so line numbers stay right.
        label, text = "<string>", head if head.startswith("<?xml") else source
        limit = max_file_bytes(max_bytes)
        if len(text) > limit:
            raise UrdfError(f"<string>: the URDF has {len(text)} characters, more than the limit of {limit} "
                            f"(pass max_bytes= or set SPARSEDYN_MAX_FILE_BYTES to read larger ones)")
    elif isinstance(source, (str, os.PathLike)):
        label = os.fspath(source)
        if not isinstance(label, str):
            label = os.fsdecode(label)
        text = read_bytes(label, UrdfError, "URDF file", max_bytes)
    else:
        raise TypeError(f"load_urdf: expected a path or a URDF XML string, got {type(source).__name__}")
    with xml_errors(label, UrdfError, "URDF"):
        root = DET.fromstring(text)
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith("{"):
            el.tag = el.tag.split("}", 1)[1]   # a namespaced <robot xmlns=...> reads like a plain one
    if root.tag != "robot":
        raise UrdfError(f"{label}: root element is <{root.tag}>, expected <robot>")
    return label, root


_ZERO3 = (0.0, 0.0, 0.0)
_EYE3 = np.eye(3)
_EYE3.setflags(write=False)


class _Parser:
    """Attribute parsing with error messages that name the source and element."""

    def __init__(self, label):
        self.label = label

    def fail(self, where, problem):
        raise UrdfError(f"{self.label}: {where}: {problem}")

    def name(self, el, where, attr="name"):
        value = el.get(attr)
        if not value:
            self.fail(where, f"missing required attribute {attr!r}")
        return value

    def floats(self, el, attr, where, n, default=None, bound=MAX_LENGTH, unit="m"):
        """``n`` whitespace-separated finite numbers of magnitude at most ``bound`` (None: any finite
        value); ``default`` if the attribute is absent."""
        text = el.get(attr)
        if text is None:
            if default is None:
                self.fail(where, f"missing required attribute {attr!r}")
            return np.array(default, float)
        tokens = text.split()
        if len(tokens) != n:
            self.fail(where, f"{attr}={clip(text)}: expected {n} number{'s' if n > 1 else ''}, got "
                             f"{len(tokens) if len(tokens) < 10 else 'more'}")
        return np.array(self._values(tokens, text, attr, where, bound, unit))

    def _values(self, tokens, text, attr, where, bound, unit):
        values = []
        for t in tokens:
            if not _NUMBER.match(t):
                if _NONFINITE.match(t):
                    self.fail(where, f"{attr}={clip(text)}: NaN and infinite values are not allowed")
                self.fail(where, f"{attr}={clip(text)}: {clip(t, 40)} is not a number")
            x = float(t)
            if not math.isfinite(x):
                self.fail(where, f"{attr}={clip(text)}: value out of floating-point range")
            if bound is not None and abs(x) > bound:
                self.fail(where, f"{attr}={clip(text)}: {t} is out of range (magnitude at most {bound:g} {unit})")
            values.append(x)
        return values

    def scalar(self, el, attr, where, default=None, bound=MAX_LENGTH, unit="m"):
        text = el.get(attr)
        if text is None:
            if default is None:
                self.fail(where, f"missing required attribute {attr!r}")
            return float(default)
        tokens = text.split()
        if len(tokens) != 1:
            self.fail(where, f"{attr}={clip(text)}: expected 1 number, got {len(tokens) if len(tokens) < 10 else 'more'}")
        return self._values(tokens, text, attr, where, bound, unit)[0]

    def limit(self, el, attr, where, default=None):
        """A limit value; the largest double stands for infinity (see the module docstring)."""
        x = self.scalar(el, attr, where, default, bound=None)
        return math.copysign(math.inf, x) if abs(x) >= DBL_MAX else x

    def origin(self, parent, where):
        """Pose ``(R, p)`` of an optional ``<origin xyz rpy>`` child of ``parent``."""
        el = parent.find("origin")
        if el is None:
            return np.eye(3), np.zeros(3)
        where = f"{where} <origin>"
        rpy = self.floats(el, "rpy", where, 3, _ZERO3, bound=MAX_LENGTH, unit="rad")
        R = _EYE3 if rpy is _ZERO3 or not rpy.any() else spatial.rpy_to_rot(rpy)
        return R, self.floats(el, "xyz", where, 3, _ZERO3)


def _parse_link(P, el):
    """``(name, spatial inertia about the link origin in link axes, principal moments ascending)``."""
    name = P.name(el, "<link>")
    inertial = el.find("inertial")
    if inertial is None:
        return name, np.zeros((6, 6)), np.zeros((3, 3))
    where = f"link {name!r} <inertial>"
    R, com = P.origin(inertial, where)
    mass_el, inertia_el = inertial.find("mass"), inertial.find("inertia")
    if mass_el is None:
        P.fail(where, "missing required element <mass>")
    if inertia_el is None:
        P.fail(where, "missing required element <inertia>")
    m = P.scalar(mass_el, "value", f"{where} <mass>", bound=MAX_MASS, unit="kg")
    if m < 0:
        P.fail(where, f"negative mass {m}")
    ixx, ixy, ixz, iyy, iyz, izz = (P.scalar(inertia_el, k, f"{where} <inertia>", bound=MAX_MASS * MAX_LENGTH ** 2,
                                             unit="kg m^2") for k in INERTIA_KEYS)
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return name, _spatial_inertia(m, com, I if R is _EYE3 else R @ I @ R.T), I


def _spatial_inertia(m, c, Ic):
    """:func:`sparsedyn.spatial.mcI` for one float body, the same operations without batch machinery
    (a URDF of thousands of links calls it once per link)."""
    cx, cy, cz = c
    C = np.array([[0.0, -cz, cy], [cz, 0.0, -cx], [-cy, cx, 0.0]])
    out = np.zeros((6, 6))
    out[:3, :3] = Ic + m * (C @ C.T)
    out[:3, 3:] = m * C
    out[3:, :3] = m * C.T
    out[3, 3] = out[4, 4] = out[5, 5] = m
    return out


def _check_moments(P, moments, invalid_inertia):
    """Reject negative principal moments (or warn, if asked); warn once about triangle-inequality violations.

    Tolerances are relative to the largest principal moment of the whole robot,
    so that exporter noise (icub has moments of +-1e-20 kg m^2) reads as zero.
    """
    noise = EIG_TOL * max((abs(lam).max() for lam in moments.values()), default=0.0)
    negative = [name for name, lam in moments.items() if lam[0] < -noise]
    if negative and invalid_inertia == "error":
        name = negative[0]
        P.fail(f"link {name!r} <inertial>",
               f"inertia matrix has a negative eigenvalue {moments[name][0]:.6g} (principal moments "
               f"{moments[name].tolist()}); it must be positive semi-definite (pass invalid_inertia='warn', "
               f"or --invalid-inertia warn on the command line, to load the file as written)")
    if negative:
        warnings.warn(f"{P.label}: inertia matrices with a negative eigenvalue (not a physical rigid body; "
                      f"loaded as written, dynamics involving them are meaningless) on links: "
                      f"{', '.join(negative)}", UrdfWarning, stacklevel=3)
    bad = [name for name, (a, b, c) in moments.items() if c > noise and a + b < c * (1 - TRIANGLE_TOL)]
    if bad:
        warnings.warn(f"{P.label}: principal moments of inertia violate the triangle inequality a + b >= c "
                      f"(not a physical rigid body) on links: {', '.join(bad)}", UrdfWarning, stacklevel=3)


class _JointSpec:
    """One URDF ``<joint>``, parsed and checked."""

    def __init__(self, P, el):
        self.name = name = P.name(el, "<joint>")
        where = f"joint {name!r}"
        urdf_type = P.name(el, where, "type")
        if urdf_type not in JOINT_TYPE_MAP:
            P.fail(where, f"unknown joint type {urdf_type!r}; known types: {', '.join(sorted(JOINT_TYPE_MAP))}")
        self.type = JOINT_TYPE_MAP[urdf_type]
        for tag in ("parent", "child"):
            link_el = el.find(tag)
            if link_el is None:
                P.fail(where, f"missing required element <{tag}>")
            setattr(self, tag, P.name(link_el, f"{where} <{tag}>", "link"))
        R, p = P.origin(el, where)
        self.X = spatial.from_pose(R, p)           # child_X_parent at q = 0
        axis_el = el.find("axis")
        self.axis = (np.array([1.0, 0.0, 0.0]) if axis_el is None
                     else P.floats(axis_el, "xyz", f"{where} <axis>", 3))
        if self.type in ("revolute", "continuous", "prismatic") and np.linalg.norm(self.axis) < 1e-12:
            P.fail(f"{where} <axis>", "axis must be a nonzero vector")
        if self.type == "planar" and not (abs(self.axis[0]) + abs(self.axis[1]) == 0 and self.axis[2] > 0):
            P.fail(where, f"planar joints are supported only with <axis xyz=\"0 0 1\"> (motion in the xy plane "
                          f"of the joint frame), got axis {self.axis.tolist()}")
        self.lower, self.upper, self.velocity, self.effort = -math.inf, math.inf, math.inf, math.inf
        limit_el = el.find("limit")
        if limit_el is not None and self.type in ("revolute", "continuous", "prismatic"):
            lw = f"{where} <limit>"
            self.effort = P.limit(limit_el, "effort", lw)
            self.velocity = P.limit(limit_el, "velocity", lw)
            if self.type != "continuous":
                self.lower = P.limit(limit_el, "lower", lw, 0.0)
                self.upper = P.limit(limit_el, "upper", lw, 0.0)
                if self.lower > self.upper:
                    P.fail(lw, f"lower limit {self.lower} is greater than upper limit {self.upper}")
        self.mimic = None
        mimic_el = el.find("mimic")
        if mimic_el is not None:
            mw = f"{where} <mimic>"
            self.mimic = (P.name(mimic_el, mw, "joint"), P.scalar(mimic_el, "multiplier", mw, 1.0, unit=""),
                          P.scalar(mimic_el, "offset", mw, 0.0, unit=""))


def _topology(P, links, joints):
    """Root link and, per link, its child joints in alphabetical order of joint name."""
    parent_joint, children = {}, {name: [] for name in links}
    for j in joints.values():
        for tag in ("parent", "child"):
            if getattr(j, tag) not in links:
                P.fail(f"joint {j.name!r}", f"{tag} link {getattr(j, tag)!r} does not exist")
        if j.parent == j.child:
            P.fail(f"joint {j.name!r}", f"link {j.child!r} is its own parent (cycle)")
        if j.child in parent_joint:
            P.fail(f"link {j.child!r}", f"has two parent joints, {parent_joint[j.child]!r} and {j.name!r} "
                                        f"(URDF describes a tree)")
        parent_joint[j.child] = j.name
        children[j.parent].append(j)
    roots = [name for name in links if name not in parent_joint]
    if not roots:
        P.fail("<robot>", "no root link: every link is some joint's child (the joints form a cycle)")
    if len(roots) > 1:
        P.fail("<robot>", f"{len(roots)} root links (links that are no joint's child): "
                          f"{clip_list(roots)}; a URDF has exactly one")
    reached, stack = set(), [roots[0]]
    while stack:
        link = stack.pop()
        reached.add(link)
        stack.extend(j.child for j in children[link])
    if len(reached) != len(links):
        cyc = [name for name in links if name not in reached]
        P.fail("<robot>", f"links {clip_list(cyc)} form a cycle not connected to the root link "
                          f"{clip(roots[0])}")
    # urdfdom stores joints in a std::map keyed by name: children come out sorted (byte order = code points).
    return roots[0], {name: sorted(js, key=lambda j: j.name) for name, js in children.items()}


def _add_fixed_joint(builder, j, links, children, body_of, X_in_body):
    """Record fixed joint ``j`` (merged into a body) with its child side: links, inertia, moving children, frames."""
    body = body_of[j.parent]
    side, stack, kids, names = [], [j], [], []
    while stack:                                   # the links reached from j.child through fixed joints
        jj = stack.pop()
        side.append(jj.child)
        names += [jj.child] + ([jj.name] if jj.name not in links else [])
        for c in children[jj.child]:
            if c.type is None:
                stack.append(c)
            else:
                kids.append(c.child)
    inertia = sum(spatial.transform_inertia(X_in_body[link], links[link]) for link in side)
    builder.add_fixed_joint(j.name, body, X_in_body[j.child], inertia, kids, names)


# Gazebo's force_torque <frame> and <measure_direction> values, and their defaults.
FT_FRAMES = ("child", "parent", "sensor")
FT_DIRECTIONS = ("child_to_parent", "parent_to_child")


def _text(P, el, tag, where, allowed, default):
    """Text of the optional child ``tag`` of ``el``, one of ``allowed``."""
    sub = None if el is None else el.find(tag)
    if sub is None:
        return default
    value = (sub.text or "").strip()
    if value not in allowed:
        P.fail(f"{where} <{tag}>", f"{clip(value)}; expected one of {', '.join(repr(a) for a in allowed)}")
    return value


def _ft_sensors(P, robot, links, joints, body_of):
    """Force/torque sensors of ``<gazebo reference=JOINT>`` and top-level ``<sensor>`` tags, checked.

    Returns dicts ``(name, joint, frame, direction, R, where)``; ``R`` is the
    orientation of the ``sensor`` frame in the joint frame (``None`` otherwise).
    """
    specs, on_joint = [], set()

    def add(name, ref, ft, R, where, dialect="gazebo"):
        if ref is None:
            P.fail(where, "a force_torque sensor needs the name of the joint it measures across "
                          "(<gazebo reference=\"JOINT\">, or <parent joint=\"JOINT\"/> in a top-level <sensor>)")
        if ref not in joints:
            if ref in links:
                P.fail(where, f"reference {ref!r} is a link; a force_torque sensor measures across a joint: "
                              f"expected the name of a joint")
            P.fail(where, f"reference {ref!r} names no joint of the robot; expected the name of a joint")
        frame = _text(P, ft, "frame", f"{where} <force_torque>", FT_FRAMES, "child")
        direction = _text(P, ft, "measure_direction", f"{where} <force_torque>", FT_DIRECTIONS, "child_to_parent")
        for other in specs:
            if other["name"] == name:
                P.fail(where, f"sensor name {name!r} is used twice (also {other['where']})")
        pose = R() if frame == "sensor" else None
        specs.append(dict(name=name, joint=ref, frame=frame, direction=direction, dialect=dialect,
                          R=pose if dialect == "gazebo" else None, pose=pose, where=where))

    for gz in robot.findall("gazebo"):
        ref = gz.get("reference")
        for el in gz.findall("sensor"):
            if el.get("type") != "force_torque":
                continue
            where = f"<gazebo reference={ref!r}> <sensor name={el.get('name')!r}>" if ref is not None \
                else f"<gazebo> <sensor name={el.get('name')!r}>"
            name = P.name(el, where)

            def pose(el=el, where=where):
                pose_el = el.find("pose")
                if pose_el is None:
                    return np.eye(3)
                tokens = (pose_el.text or "").split()
                if len(tokens) != 6 or not all(_NUMBER.match(t) and abs(float(t)) <= MAX_LENGTH for t in tokens):
                    P.fail(f"{where} <pose>", f"{clip(pose_el.text)}: expected 6 numbers (x y z roll pitch yaw) of "
                                              f"magnitude at most {MAX_LENGTH:g}")
                return spatial.rpy_to_rot([float(t) for t in tokens[3:]])
            add(name, ref, el.find("force_torque"), pose, where)
            on_joint.add(ref)
    for el in robot.findall("sensor"):                # iDynTree's URDF extension
        if el.get("type") != "force_torque":
            continue
        where = f"<sensor name={el.get('name')!r}>"
        name = P.name(el, where)
        parent = el.find("parent")
        ref = None if parent is None else parent.get("joint")
        if ref in on_joint:
            continue                                   # the same device, described by a <gazebo> tag too
        add(name, ref, el.find("force_torque"), lambda el=el, where=where: P.origin(el, where), where, "idyntree")
    for sp in specs:
        j = joints[sp["joint"]]
        if j.type is None and body_of[j.parent] is None:
            sp["skip"] = (f"fixed joint {j.name!r} is attached to the world of a fixed-base model (no body carries "
                          f"it; load with floating_base=True to measure across it)")
        elif j.type is not None and sp["frame"] == "parent":
            sp["skip"] = (f"<frame>parent</frame> on moving joint {j.name!r} turns with the joint (the measurement "
                          f"would not be a constant map of the wrench)")
        if sp["frame"] == "parent" and "skip" not in sp and sp["dialect"] == "gazebo":
            R = np.array(spatial.pose(j.X)[0]).T          # parent link axes in the joint frame
            sp["R"] = R
    return specs


def _sensor_frames(builder, specs, joints, body_of, X_in_body, taken):
    """Frames of iDynTree-dialect sensors (module docstring): ``sp["frame_name"]`` per spec."""
    for sp in specs:
        if "skip" in sp or sp["dialect"] != "idyntree" or sp["frame"] == "child":
            continue
        j = joints[sp["joint"]]
        if sp["frame"] == "parent":                # a fixed joint (moving ones were skipped): the parent link
            sp["frame_name"] = j.parent
            continue
        R, p = sp["pose"]                          # the sensor frame in the child link frame
        fname = sp["name"] if sp["name"] not in taken else f"{sp['name']}_frame"
        while fname in taken:
            fname += "_"
        taken.add(fname)
        builder.add_frame(fname, body_of[j.child], spatial.compose(spatial.from_pose(R, p), X_in_body[j.child]))
        sp["frame_name"] = fname


def _attach_sensors(P, model, specs, joints):
    """``model`` with the F/T sensors of ``specs``; unsupported ones are skipped with one UrdfWarning."""
    out, skipped = [], []
    for sp in specs:
        if "skip" not in sp and joints[sp["joint"]].type is None:
            fj = model.fixed_joint(sp["joint"])
            other = [model.body_names[c] for c in range(model.nbodies)
                     if model.parent[c] == fj.body and c not in fj.children]
            if fj.children and other:
                sp["skip"] = (f"fixed joint {fj.name!r} has moving bodies on both sides inside body "
                              f"{model.body_names[fj.body]!r} (child side: "
                              f"{[model.body_names[c] for c in fj.children]}, parent side: {other})")
        if "skip" in sp:
            skipped.append(f"{sp['where']}: {sp['skip']}")
            continue
        R = sp["R"]
        rotation = None if R is None or np.array_equal(R, np.eye(3)) else R
        out.append(ForceTorque(sp["name"], sp["joint"], frame=sp.get("frame_name"), direction=sp["direction"],
                               rotation=rotation))
    if skipped:
        warnings.warn(f"{P.label}: force_torque sensors not supported, skipped: " + "; ".join(skipped),
                      UrdfWarning, stacklevel=3)
    try:
        return model.with_sensors(*out)
    except ModelError as e:
        raise UrdfError(f"{P.label}: {e}") from None


_SHAPE_TAGS = ("box", "cylinder", "sphere", "capsule", "mesh")


def _rgba(P, el, where):
    rgba = P.floats(el, "rgba", where, 4, bound=None)
    if np.any(rgba < 0) or np.any(rgba > 1):
        P.fail(where, f"rgba={clip(el.get('rgba'))}: the colour components must lie in [0, 1]")
    return tuple(rgba)


def _materials(P, robot):
    """``name -> rgba`` of the robot's top-level ``<material>`` elements that give a colour."""
    out = {}
    for el in robot.findall("material"):
        color = el.find("color")
        if el.get("name") and color is not None:
            out[el.get("name")] = _rgba(P, color, f"<material name={clip(el.get('name'))}> <color>")
    return out


def _package_roots(package_dirs):
    """Folders that may hold ROS packages, in search order: ``package_dirs``, ``$ROS_PACKAGE_PATH``,
    ``$AMENT_PREFIX_PATH/share``."""
    roots = [Path(d) for d in ([package_dirs] if isinstance(package_dirs, (str, os.PathLike)) else package_dirs or ())]
    roots += [Path(d) for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
    roots += [Path(d) / "share" for d in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if d]
    return roots


def resolve_mesh(uri, base=None, package_dirs=()):
    """The file a URDF mesh reference names, as a path string, or ``uri`` itself when no file is found.

    ``package://PKG/rest``: ``rest`` inside the package folder ``PKG``, looked for in ``package_dirs``,
    ``$ROS_PACKAGE_PATH``, ``$AMENT_PREFIX_PATH/share`` and the folders above ``base`` (the URDF's folder:
    a folder named ``PKG``, or one holding ``PKG``), as ROS and ``example-robot-data`` lay packages out;
    ``file://path`` and absolute paths as they are; other relative paths from ``base``.
    """
    if uri.startswith("package://"):
        pkg, _, rest = uri[len("package://"):].partition("/")
        roots = _package_roots(package_dirs)
        candidates = [r / pkg / rest for r in roots] + [r / rest for r in roots if r.name == pkg]
        for a in ([base, *base.parents] if base is not None else []):
            candidates += [a / rest] if a.name == pkg else []
            candidates.append(a / pkg / rest)
    elif uri.startswith("file://"):
        candidates = [Path(uri[len("file://"):])]
    elif os.path.isabs(uri) or base is None:
        candidates = [Path(uri)]
    else:
        candidates = [base / uri]
    return next((str(c) for c in candidates if c.is_file()), uri)


def _geometries(P, robot, model, body_of, X_in_body, package_dirs):
    """The ``<visual>`` and ``<collision>`` shapes of every link (module docstring), in file order."""
    from ..model import Geometry
    materials = _materials(P, robot)
    base = None if P.label == "<string>" else Path(P.label).resolve().parent
    out = []
    for link_el in robot.findall("link"):
        link = link_el.get("name")
        body = -1 if body_of[link] is None else model.body(body_of[link])
        for kind in ("visual", "collision"):
            for k, el in enumerate(link_el.findall(kind)):
                where = f"link {link!r} <{kind}> {k}"
                R, p = P.origin(el, where)
                geo = el.find("geometry")
                shape = None if geo is None else next((c for c in geo if c.tag in _SHAPE_TAGS), None)
                if shape is None:
                    P.fail(where, "expected a <geometry> holding one of " + ", ".join(f"<{t}>" for t in _SHAPE_TAGS))
                w = f"{where} <{shape.tag}>"
                mesh = None
                if shape.tag == "box":
                    size = tuple(P.floats(shape, "size", w, 3))
                elif shape.tag == "sphere":
                    size = (P.scalar(shape, "radius", w),)
                elif shape.tag in ("cylinder", "capsule"):
                    size = (P.scalar(shape, "radius", w), P.scalar(shape, "length", w))
                else:
                    mesh = resolve_mesh(P.name(shape, w, "filename"), base, package_dirs)
                    size = tuple(P.floats(shape, "scale", w, 3, (1.0, 1.0, 1.0)))   # negative: mirrored
                if mesh is None and any(x < 0 for x in size):
                    P.fail(w, f"negative size {size}")
                rgba = None
                material = el.find("material")
                if kind == "visual" and material is not None:
                    color = material.find("color")
                    rgba = _rgba(P, color, f"{where} <material> <color>") if color is not None \
                        else materials.get(material.get("name"))
                out.append(Geometry(f"{link}_{k}", body, spatial.compose(spatial.from_pose(R, p), X_in_body[link]),
                                    "mesh" if shape.tag == "mesh" else shape.tag, size, kind, mesh, rgba, link))
    return out


def load_urdf(source, floating_base=False, *, name=None, invalid_inertia="error", sensors=True,
              max_bytes=None, geometry=False, package_dirs=()) -> Model:
    """Build a :class:`~sparsedyn.model.Model` from a URDF file path or XML string.

    ``source``: a path (``str`` or ``os.PathLike``) or a string whose first
    non-blank character is ``<``.  ``floating_base``: put the root link on a
    ``free`` joint named ``'root_joint'`` instead of fixing it to the world.
    ``name``: model name (default: the robot's ``name`` attribute).
    ``invalid_inertia``: ``"error"`` (default) rejects an inertia matrix with a
    negative eigenvalue; ``"warn"`` loads it as written with a
    :class:`UrdfWarning` (a few published files need this).  Frames,
    joint order, fixed-joint merging and limits follow Pinocchio; see the
    module docstring.  ``sensors``: read Gazebo / iDynTree force-torque sensor
    tags into ``model.sensors`` (module docstring).  ``max_bytes``: the size limit of the
    file (default 16 MiB, or ``$SPARSEDYN_MAX_FILE_BYTES``).  ``geometry=True``: read the
    ``<visual>`` and ``<collision>`` shapes into ``model.geometries``, resolving ``package://``
    mesh references with ``package_dirs`` (folders holding ROS packages) among other places
    (module docstring).  Raises :class:`UrdfError`;
    warns (once each) with :class:`UrdfWarning` about inertias that violate the
    triangle inequality, about ``<mimic>`` tags that had to be skipped (fixed or
    missing joints) and about force/torque sensors that cannot be represented.
    """
    if invalid_inertia not in ("error", "warn"):
        raise ValueError(f"invalid_inertia: expected 'error' or 'warn', got {invalid_inertia!r}")
    label, robot = _read_xml(source, max_bytes)
    P = _Parser(label)
    links, rot, joints = {}, {}, {}
    for el in robot.findall("link"):
        link_name, inertia, I = _parse_link(P, el)
        if link_name in links:
            P.fail(f"link {link_name!r}", "link name used twice")
        links[link_name], rot[link_name] = inertia, I
    principal = np.linalg.eigvalsh(np.array(list(rot.values()))) if rot else []   # one call for every link
    _check_moments(P, dict(zip(rot, principal)), invalid_inertia)
    for el in robot.findall("joint"):
        j = _JointSpec(P, el)
        if j.name in joints:
            P.fail(f"joint {j.name!r}", "joint name used twice")
        joints[j.name] = j
    if not links:
        P.fail("<robot>", "empty robot: no <link> elements")
    root, children = _topology(P, links, joints)

    # With a floating base the root link is a body, so the world needs another name.
    builder = ModelBuilder(name or robot.get("name") or (Path(label).stem if label != "<string>" else "robot"),
                           root_name=("universe" if root == "world" else "world") if floating_base else root)
    bodies = {}      # body name -> add_body arguments; insertion order = Pinocchio's joint order
    frames = []      # (frame name, body name, frame_X_body)
    body_of, X_in_body = {}, {}   # link -> (body it belongs to or None for the world, link_X_body)
    merged = []      # fixed joints merged into a body, in walk order

    joint_cache = {}        # joints are immutable: one object per (type, axis)

    def joint_of(jtype, axis=None):
        key = (jtype, None if axis is None else tuple(axis))
        if key not in joint_cache:
            joint_cache[key] = make_joint(jtype) if axis is None else make_joint(jtype, key[1])
        return joint_cache[key]

    def add_moving(link, parent_body, joint_name, joint, Xtree, limits):
        lower, upper, velocity, effort = limits
        bodies[link] = dict(parent=parent_body, joint=joint, Xtree=Xtree, inertia=links[link].copy(),
                            joint_name=joint_name, lower=lower, upper=upper, velocity_limit=velocity,
                            effort_limit=effort)
        body_of[link], X_in_body[link] = link, spatial.identity()
        if joint_name not in links:
            frames.append((joint_name, link, spatial.identity()))

    if floating_base:
        add_moving(root, None, "root_joint", make_joint("free"), spatial.identity(), (None,) * 4)
    else:
        body_of[root], X_in_body[root] = None, spatial.identity()
    # Depth-first walk, explicit stack so that long chains do not hit the recursion limit.
    stack = list(reversed(children[root]))
    while stack:
        j = stack.pop()
        body, X_parent = body_of[j.parent], X_in_body[j.parent]   # parent link's placement in its body
        X = spatial.compose(j.X, X_parent)                        # child frame relative to that body
        if j.type is None:
            body_of[j.child], X_in_body[j.child] = body, X
            if body is not None:
                merged.append(j)
                # Spatial inertia of the child link re-expressed in the body frame: X^T I X.
                bodies[body]["inertia"] += spatial.transform_inertia(X, links[j.child])
                frames.append((j.child, body, X))
                if j.name not in links:
                    frames.append((j.name, body, X))
        else:
            if j.type in ("free", "planar"):    # no axis to take, no limits kept
                add_moving(j.child, body, j.name, joint_of(j.type), X, (None,) * 4)
            else:
                add_moving(j.child, body, j.name, joint_of(j.type, j.axis), X,
                           (j.lower, j.upper, j.velocity, j.effort))
        stack.extend(reversed(children[j.child]))

    for link, b in bodies.items():
        builder.add_body(link, b.pop("parent"), b.pop("joint"), **b)
    for frame in frames:
        builder.add_frame(*frame)
    for j in merged:
        _add_fixed_joint(builder, j, links, children, body_of, X_in_body)
    specs = _ft_sensors(P, robot, links, joints, body_of) if sensors else []
    if specs:
        _sensor_frames(builder, specs, joints, body_of, X_in_body,
                       set(links) | set(joints) | {f[0] for f in frames})
    skipped = []
    for j in joints.values():
        if j.mimic is None:
            continue
        mimicked, multiplier, offset = j.mimic
        if j.type is None:
            skipped.append(f"{j.name!r} (a fixed joint)")
        elif mimicked not in joints or joints[mimicked].type is None:
            skipped.append(f"{j.name!r} (mimics {'missing' if mimicked not in joints else 'fixed'} joint {mimicked!r})")
        elif mimicked == j.name:
            P.fail(f"joint {j.name!r} <mimic>", "the joint mimics itself; <mimic joint=...> names another joint")
        else:
            builder.add_mimic(j.name, mimicked, multiplier, offset)
    if skipped:
        warnings.warn(f"{label}: <mimic> ignored on joints {', '.join(skipped)}", UrdfWarning, stacklevel=2)
    try:
        model = builder.build()
    except ModelError as e:
        raise UrdfError(f"{label}: {e}") from None
    if specs:
        model = _attach_sensors(P, model, specs, joints)
    if geometry:
        model = model.with_geometry(*_geometries(P, robot, model, body_of, X_in_body, package_dirs))
    return model


# --- writing ------------------------------------------------------------------------

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
    for i, j in enumerate(model.joints):
        if j.type not in URDF_TYPE:
            raise ValueError(f"to_urdf: joint {model.joint_names[i]!r} of type {j.type!r} cannot be written as "
                             f"URDF (supported: {', '.join(sorted(URDF_TYPE))})")
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

