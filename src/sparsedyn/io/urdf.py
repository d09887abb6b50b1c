"""URDF reader and writer: ``load_urdf`` builds a :class:`~sparsedyn.model.Model`, ``to_urdf`` writes one.

This module assembles the model (the tree, fixed joints merged, sensors, geometry); the XML and its
elements are read by :mod:`.urdf_elements`, the writer is :mod:`.urdf_writer`.

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
  fixed to it have no body: their frames are dropped and their inertia is
  kept, summed, as ``model.world_inertia`` (no part in the dynamics; see
  :func:`~sparsedyn.append_model`).  With
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
  (:class:`~sparsedyn.model.sensors.ForceTorque`, on a moving or a fixed joint), from
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

import os
import warnings
from pathlib import Path

import numpy as np

from .. import _checks
from ..model import spatial
from ..model.joints import make_joint
from ..model.builders import ModelBuilder
from ..model.model import MAX_LENGTH, Model, ModelError
from ..model.sensors import ForceTorque
from .files import clip, clip_list
from .urdf_elements import _NUMBER, UrdfError, UrdfWarning, _check_moments, _JointSpec, _parse_link, _Parser, _read_xml
from .urdf_writer import to_urdf

__all__ = ["load_urdf", "to_urdf", "UrdfError", "UrdfWarning"]


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
                      UrdfWarning, stacklevel=_checks.user_stacklevel())
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
    dirs = [package_dirs] if isinstance(package_dirs, (str, os.PathLike)) else package_dirs or ()
    if not hasattr(dirs, "__iter__") or not all(isinstance(d, (str, os.PathLike)) for d in dirs):
        raise TypeError(f"package_dirs: expected a folder or a sequence of folders (str or os.PathLike), got "
                        f"{clip(package_dirs)}")
    roots = [Path(d) for d in dirs]
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
    return next((str(c) for c in candidates if _is_file(c)), uri)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a name the system cannot look up (too long, a NUL character) is none."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


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
    _package_roots(package_dirs)                     # a bad argument is named now, not at the first mesh
    label, robot = _read_xml(source, max_bytes)
    P = _Parser(label)
    links, joints, root, children = _links_and_joints(P, robot, invalid_inertia)

    # With a floating base the root link is a body, so the world needs another name.
    builder = ModelBuilder(name or robot.get("name") or (Path(label).stem if label != "<string>" else "robot"),
                           root_name=("universe" if root == "world" else "world") if floating_base else root)
    bodies, frames, body_of, X_in_body, merged = _walk(builder, links, root, children, floating_base)
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
    _add_mimics(P, builder, joints, label)
    try:
        model = builder.build()
    except ModelError as e:
        raise UrdfError(f"{label}: {e}") from None
    if specs:
        model = _attach_sensors(P, model, specs, joints)
    if geometry:
        model = model.with_geometry(*_geometries(P, robot, model, body_of, X_in_body, package_dirs))
    return model


def _links_and_joints(P, robot, invalid_inertia):
    """``(links, joints, root, children)`` of a URDF's ``<robot>``: each link's spatial inertia and
    each joint's :class:`_JointSpec` by name, the root link and each link's child joints."""
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
    return links, joints, root, children


def _walk(builder, links, root, children, floating_base):
    """The depth-first walk of the tree from ``root`` (Pinocchio's joint order): ``(bodies, frames,
    body_of, X_in_body, merged)``, the moving bodies' ``add_body`` arguments by link, the frames,
    each link's body and placement in it, and the fixed joints merged into a body."""
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
        builder.add_world_inertia(links[root])
    # Depth-first walk, explicit stack so that long chains do not hit the recursion limit.
    stack = list(reversed(children[root]))
    while stack:
        j = stack.pop()
        body, X_parent = body_of[j.parent], X_in_body[j.parent]   # parent link's placement in its body
        X = spatial.compose(j.X, X_parent)                        # child frame relative to that body
        if j.type is None:
            body_of[j.child], X_in_body[j.child] = body, X
            if body is None:                     # welded to the world: kept as the world's inertia
                builder.add_world_inertia(links[j.child], X)
            else:
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
    return bodies, frames, body_of, X_in_body, merged


def _add_mimics(P, builder, joints, label):
    """The ``<mimic>`` tags of the moving joints as the model's mimic couplings; one warning names
    the ones that were skipped (on fixed joints, or mimicking a missing or fixed joint)."""
    fixed, skipped = [], []
    for j in joints.values():
        if j.mimic is None:
            continue
        mimicked, multiplier, offset = j.mimic
        if j.type is None:
            fixed.append(j.name)
        elif mimicked not in joints or joints[mimicked].type is None:
            skipped.append(f"{j.name!r} (mimics {'missing' if mimicked not in joints else 'fixed'} joint {mimicked!r})")
        elif mimicked == j.name:
            P.fail(f"joint {j.name!r} <mimic>", "the joint mimics itself; <mimic joint=...> names another joint")
        else:
            builder.add_mimic(j.name, mimicked, multiplier, offset)
    if fixed or skipped:
        # One warning a file, each joint named once (a hand's fixed joints often all carry the tag).
        parts = [f"joints {', '.join(skipped)}"] if skipped else []
        if fixed:
            parts.append(f"{len(fixed)} fixed joint{'s' if len(fixed) > 1 else ''} (nothing to follow): "
                         f"{', '.join(fixed)}")
        warnings.warn(f"{label}: <mimic> ignored on {'; on '.join(parts)}", UrdfWarning,
                      stacklevel=_checks.user_stacklevel())
