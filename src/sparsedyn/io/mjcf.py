"""MJCF reader: ``load_mjcf`` builds a :class:`~sparsedyn.model.Model` with MuJoCo's own compiler.

MJCF has default classes, ``childclass``, includes, ``<frame>`` elements,
``<compiler>`` options (angle units, ``eulerseq``, ``inertiafromgeom``), several
orientation forms and inertias computed from geoms.  Rather than a second MJCF
parser, the file is compiled by MuJoCo (``mujoco.MjModel``, the optional
dependency ``sparsedyn[mjcf]``) and the compiled model, in which all of that is
resolved, is translated.

Bodies, joints and coordinates
------------------------------

* A MuJoCo body with several joints (a hip with three hinges) becomes ONE body
  moved by a ``"composite"`` joint (:class:`~sparsedyn.model.joint_types.Composite`)
  whose parts are its joints in file order: MuJoCo applies a body's joints one
  after the other, each about its own anchor ``jnt_pos`` in the frame the
  previous ones moved, which is the composite's rule with each part placed at
  its anchor's offset from the previous one (the parts' placements; none where
  the hinges and balls share one anchor, as a slide may sit anywhere).  A
  part's ``ref`` is folded into its placement (the first part's into
  ``Xtree``).  The composite joint is named ``"<joint 1>+<joint 2>+..."`` (its
  parts' MJCF names in order; its ``q`` and ``v`` are theirs one after the
  other, at the same ``qpos`` / ``qvel`` addresses).  It is used unless (a) a
  free joint is among them, or (b) a joint equality or a ``jointactuatorfrc``
  sensor (when sensors are read) names one of the joints (those map to objects
  that address one 1-dof joint by its name).  Then the body is a chain of
  bodies, one per joint, the first ones massless and named
  ``"<body>/<joint>"``, the last one named after the MuJoCo body and carrying
  its inertia, sites and children.  ``load_mjcf(..., composite_joints=False)``
  gives chains everywhere, and is the default with ``constraints=True``.
* A body's frame is its joint's frame (as for every Model): it sits at the
  joint's ``pos`` (``jnt_pos``; a composite's: its first part's anchor, the
  common anchor of its hinges and balls where they share one) with the MuJoCo
  body's orientation.  The MuJoCo body frame itself is the named frame of the
  body's name (``model.frame(name)``), offset by ``-jnt_pos`` of its last joint
  (of the composite's last part); it coincides with the body frame when the
  joints sit at the body origin.
* Joints: ``hinge`` -> ``revolute``, ``slide`` -> ``prismatic`` (axes as
  compiled), ``ball`` -> ``spherical``, ``free`` -> ``free`` (only on bodies
  attached to the world, as MuJoCo places a free body by its world pose).
* **q is MuJoCo's qpos** up to the quaternion order: ``q = interop.mujoco.q_from_mujoco(model, qpos)``
  (hinge angles and slide displacements are equal, even with a ``ref``:
  MuJoCo moves a joint by ``qpos - qpos0``, and the rotation or translation by
  ``-ref`` is folded into ``Xtree``).  ``v``, ``a`` and ``tau`` relate to
  ``qvel``, ``qacc`` and ``qfrc_*`` through :func:`~sparsedyn.interop.mujoco.v_from_mujoco`,
  :func:`~sparsedyn.interop.mujoco.a_from_mujoco` and :func:`~sparsedyn.interop.mujoco.tau_from_mujoco`
  (which take MuJoCo's ``qpos``; their ``*_to_mujoco`` inverses take our ``q``):
  identical for hinge, slide and ball joints; a free joint's ``v = [omega; v]``
  has both parts in the body frame, MuJoCo's ``[v; omega]`` the linear part in
  the world frame.  ``model.joint_dynamics.reference`` is ``qpos0`` in our
  layout (the configuration the file draws), ``model.neutral()`` is all zeros
  with identity quaternions.
* Bodies without joints are welded to their parent: their inertia is merged
  into the body they are rigidly attached to, their frame and sites become
  frames of that body, and the weld is recorded as a
  :class:`~sparsedyn.model.FixedJoint` named after the welded body (what a
  force/torque sensor on it needs).  Bodies welded to the world (and mocap
  bodies, at their reference pose) are not bodies of the Model.
* Inertias: ``body_mass``, ``body_ipos``, ``body_iquat``, ``body_inertia``
  (as compiled, so inertias from geoms are included).  Gravity:
  ``opt.gravity`` (zero when the file disables gravity).
* Frames: every MuJoCo body that moves (its own frame, see above) and every
  site; a site on the world or on a body welded to it is a frame fixed to the
  world (``Frame.body == -1``) at its world pose (MuJoCo's ``site_xpos``, ``site_xmat``).  A site whose name is already a frame's (a body's, most often) is
  called ``"site:<name>"`` (``"site:<name>#2"`` ... if that is taken too); the
  warning lists each such renaming.
  Unnamed bodies, joints and sites are called ``body<id>``, ``joint<id>``,
  ``site<id>`` (MuJoCo's ids).
* Joint limits: ``jnt_range`` of limited hinge and slide joints -> ``lower``
  / ``upper``.  ``armature`` -> ``model.armature`` (per dof, our dof order);
  ``damping``, ``stiffness``, ``frictionloss`` and ``springref`` ->
  ``model.joint_dynamics`` (data; the springs and dampers as forces:
  ``sd.passive_forces``, in a step with ``passive=True``).

Sensors
-------

MuJoCo sensors that measure what the estimation layer's sensors measure become
``model.sensors`` (named as in the file, in file order, covariance ``noise**2``
when the file gives a noise, else unit variance):

* ``force`` / ``torque`` at a site -> :class:`~sparsedyn.model.sensors.ForceTorque`
  with ``components`` ``("fx", "fy", "fz")`` / ``("nx", "ny", "nz")`` at the
  site's frame, across the joint of the site's body (its last joint, or its
  composite joint) or, for a
  welded body, across its fixed joint: MuJoCo's ``cfrc_int``, the wrench the
  parent exerts on the body's subtree, in site axes about the site;
* ``accelerometer`` -> :class:`~sparsedyn.model.sensors.Accelerometer` (proper
  acceleration in site axes);
* ``jointactuatorfrc`` -> :class:`~sparsedyn.model.sensors.JointTorque` (the joint
  force when actuators are the joint's only forces).

``gyro``, ``jointpos``, ``jointvel`` and the other kinematic sensors measure the
state ``(q, v)``, which estimation takes as given; they are listed in the
warning (below).  :func:`mjcf_measurements` picks the values of the mapped
sensors out of MuJoCo's ``sensordata`` in the order of ``model.sensors``.

Geometry
--------

``load_mjcf(..., geometry=True)`` keeps the compiled geoms in ``model.geometries``
(:class:`~sparsedyn.model.Geometry`, in geom order, named as in the file or ``geom<id>``), each on the
body it is rigidly attached to (-1: the world) at its compiled pose: ``sphere``, ``capsule``,
``ellipsoid``, ``cylinder``, ``box`` (MuJoCo's half sizes become full lengths), ``plane``, ``mesh``
(the compiled triangles, in the geom's frame, as ``vertices`` / ``faces``) and ``hfield`` (the
height field's ``(sx, sy, top, base)`` and its grid as ``heights``, normalised to [0, 1] by MuJoCo's
compiler from a PNG file or the inline ``elevation``; row 0 at ``-sy``, MuJoCo's ``hfield_data``).  As MuJoCo's viewer shows
groups 0 to 2 by default, geoms of those groups are ``"visual"``; geoms that collide (``contype`` or
``conaffinity`` non-zero) are ``"collision"``; a geom may be both.  Colours: the geom's ``rgba``, or its
material's when the geom keeps the default one.  ``friction``: the geom's sliding friction.  SDF geoms are listed in the warning.
Collision geometries carry MuJoCo's collision filter (``contype``, ``conaffinity``, the parent-child
filter and ``<contact><exclude>`` as ``exclude``, ``<contact><pair>`` as ``pairs``;
:mod:`sparsedyn.io.mjcf_geometry`), so that a :class:`~sparsedyn.Scene` checks the pairs MuJoCo checks.

Equality constraints and what is left out
-----------------------------------------

``load_mjcf(..., constraints=True)`` returns ``(model, constraint_set)``: active
``connect`` -> :class:`~sparsedyn.constraints.PointCoincidence`, ``weld`` ->
:class:`~sparsedyn.constraints.Weld` (same manifold; ``torquescale`` only
weighs MuJoCo's residual), ``joint`` with a linear polynomial ->
:class:`~sparsedyn.constraints.JointCoupling`.  Everything the Model cannot
represent (tendons, actuators with other than joint transmissions, flexes,
other equality constraints, unmapped sensors, ball-joint cone limits, gravity
compensation, ...) is listed in ONE :class:`MjcfWarning` per load, never
dropped silently.  A file MuJoCo's compiler rejects raises :class:`MjcfError`
with MuJoCo's message and the file name.  The actuators on joints are read
apart, by :func:`~sparsedyn.load_actuators` (a controller's law, not the body's).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

import numpy as np

from .. import _checks
from ..model.joints import make_joint
from ..model.builders import ModelBuilder
from ..model import JointDynamics, Model, ModelError
from ..model.spatial import axis_rotation, mcI
from .mjcf_geometry import geometries
from .mjcf_sensors import mjcf_measurements, sensors_of
from .mjcf_joints import (_BALL, _EQ_JOINT, _FREE, _HINGE, _SLIDE, _list, _name, _pose, _quat_wxyz, _transform,
                           composite_body, composite_ok, map_quaternions, named_joints, xyzw)

__all__ = ["load_mjcf", "MjcfError", "MjcfWarning", "mjcf_measurements", "MJCF_INSTALL_HINT"]

#: What to install when MuJoCo is missing.
MJCF_INSTALL_HINT = "pip install 'sparsedyn[mjcf]' (or: pip install 'mujoco>=3.2')"

# MuJoCo enum values (mjtJoint, mjtTrn, mjtEq, mjtObj), stable across versions.
_TRN_JOINT, _TRN_JOINTINPARENT = 0, 1
_EQ_CONNECT, _EQ_WELD = 0, 1
_OBJ_BODY, _OBJ_SITE = 1, 6


class MjcfError(ModelError):
    """An MJCF file that cannot be loaded; the message names the file and the problem."""


class MjcfWarning(UserWarning):
    """An MJCF file with elements the Model cannot represent (listed in the message)."""


def _mujoco():
    try:
        import mujoco
    except ImportError:
        raise ImportError(f"load_mjcf needs MuJoCo's compiler, the 'mujoco' package: {MJCF_INSTALL_HINT}") from None
    return mujoco


def _compile(mujoco, source, assets):
    """``(label, MjModel)``: a path, or an XML string (starting with ``<``)."""
    if isinstance(source, str) and source.lstrip("\ufeff \t\r\n").startswith("<"):
        label = "<string>"
        load = lambda: mujoco.MjModel.from_xml_string(source, assets or {})  # noqa: E731
    elif isinstance(source, (str, os.PathLike)):
        label = os.fspath(source)
        if not Path(label).is_file():
            raise MjcfError(f"{label}: file not found")
        load = lambda: mujoco.MjModel.from_xml_path(label, assets or {})  # noqa: E731
    else:
        raise TypeError(f"load_mjcf: expected a path or an MJCF XML string, got {type(source).__name__}")
    try:
        return label, load()
    except Exception as e:   # MuJoCo reports compiler errors as ValueError; keep its message whatever the type
        msg = " ".join(str(e).split())
        raise MjcfError(f"{label}: MuJoCo's compiler rejected the model: {msg}") from None


def _inertia_in(T, mass, com, Ic):
    """Spatial inertia (6, 6), about the origin of a frame in which the body frame has pose ``T``."""
    R, p = T[:3, :3], T[:3, 3]
    return mcI(mass, R @ com + p, R @ Ic @ R.T)


class _Names:
    """Unique names within one namespace."""

    def __init__(self):
        self.used = set()

    def take(self, name):
        base, k = name, 2
        while name in self.used:
            name, k = f"{base}#{k}", k + 1
        self.used.add(name)
        return name


def load_mjcf(source, *, constraints=False, sensors=True, name=None, assets=None, geometry=False,
              composite_joints=None):
    """A :class:`~sparsedyn.model.Model` of an MJCF file or string, compiled by MuJoCo.

    ``source``: a path, or an XML string starting with ``<`` (then relative
    includes and meshes cannot be found; pass ``assets``, MuJoCo's
    ``{file name: bytes}``).  ``constraints=True`` returns ``(model,
    constraint_set)`` with the file's active equality constraints as a
    :class:`~sparsedyn.constraints.ConstraintSet`.  ``sensors=False`` reads no
    sensors.  ``geometry=True`` keeps the geoms in ``model.geometries`` (module docstring).
    ``composite_joints``: whether a body with several joints is one body moved by one composite
    joint (``True``) or a chain of massless bodies (``False``); the default is ``True`` except with
    ``constraints=True``, as the constraint layer takes joints with a constant motion subspace
    only (module docstring, "Bodies, joints and coordinates").
    See the module docstring for every convention (q is MuJoCo's
    qpos with ``[x, y, z, w]`` quaternions).

    Raises :class:`MjcfError` (MuJoCo's message and the file name) for a file
    MuJoCo rejects, ``ImportError`` naming what to install when MuJoCo is
    missing; warns once (:class:`MjcfWarning`) listing what the Model cannot
    represent.
    """
    mujoco = _mujoco()
    label, m = _compile(mujoco, source, assets)
    if composite_joints is None:
        composite_joints = not constraints
    try:
        model, extra = _translate(mujoco, m, label, name, sensors, composite_joints)
    except MjcfError:
        raise
    except (ModelError, ValueError) as e:     # a compiled model the Model cannot hold: name the file
        raise MjcfError(f"{label}: {e}") from None
    notes = extra["notes"]
    if geometry:
        geoms, geom_notes = geometries(m, model, extra)
        model = model.with_geometry(*geoms)
        notes = notes + geom_notes
    cs, eq_notes = None, []
    if constraints:
        cs, eq_notes = _constraints(m, model, extra, label)
    elif any(m.eq_active0):
        eq_notes = [f"{int(np.sum(m.eq_active0))} active equality constraint(s) (pass constraints=True to get "
                    f"them as a ConstraintSet)"]
    notes = notes + eq_notes
    if notes:
        warnings.warn(f"{label}: MJCF elements the model does not represent: " + "; ".join(notes),
                      MjcfWarning, stacklevel=_checks.user_stacklevel())
    return (model, cs) if constraints else model


def _translate(mujoco, m, label, name, read_sensors, composite_joints=True):
    """``(Model, extra)``; ``extra``: per MuJoCo body its host body name and pose, notes, ..."""
    body_names = [_name(m, "body", b) for b in range(m.nbody)]
    joint_names = [_name(m, "joint", j) for j in range(m.njnt)]
    model_name = name or _model_name(m) or Path(label).stem
    gravity = np.zeros(3) if m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY) else np.array(m.opt.gravity)
    t = _bodies(m, label, body_names, joint_names, named_joints(m, read_sensors), composite_joints)
    host, T_host, specs = t["host"], t["T_host"], t["specs"]
    builder = ModelBuilder(model_name, gravity=gravity, root_name=body_names[0] or "world")
    for sp in specs:
        builder.add_body(sp["name"], sp["parent"], sp["joint"], _transform(sp["X"]), t["inertia"][sp["name"]],
                         joint_name=sp["jn"], lower=sp["lower"], upper=sp["upper"], armature=sp["arm"])
    body_frame, site_frame, renamed_sites = _frames(builder, m, body_names, host, T_host, specs)
    fixed_name = _welds(builder, m, body_names, t, body_frame, site_frame)
    model = builder.build()
    _check_layout(m, model, specs, label)
    # per-dof and per-q data, our layout
    model = dataclasses.replace(model, joint_dynamics=_joint_dynamics(m, model, specs))
    our_joint = {j: sp["jn"] for sp in specs for j in sp["mj_joints"]}
    extra = dict(host=host, T_host=T_host, body_frame=body_frame, site_frame=site_frame, fixed_name=fixed_name,
                 body_names=body_names, joint_names=joint_names, specs=specs, our_joint=our_joint)
    sensor_list, sensor_notes = sensors_of(m, model, extra) if read_sensors else ([], [])
    if sensor_list:
        model = model.with_sensors(*sensor_list)
    extra["notes"] = _left_out(m, body_names, t, renamed_sites) + sensor_notes
    return model, extra


def _bodies(m, label, body_names, joint_names, chained, composite_joints):
    """The tree of the file's bodies: ``host`` (the body each MuJoCo body is rigidly attached to, None:
    the world) and ``T_host`` (its pose there) per MuJoCo body, ``specs`` (our bodies: name, parent,
    joint, X, jn, lower, upper, arm, ...), ``inertia`` (our body name -> (6, 6) in its frame),
    ``welded`` (MuJoCo bodies welded to a moving host), and what the notes name (``mocap``,
    ``free_armature``, ``ball_limits``)."""
    nb = m.nbody
    t = dict(host=[None] * nb, T_host=[np.eye(4)] * nb, specs=[], inertia={}, welded=[], mocap=[],
             free_armature=[], ball_limits=[])
    host, T_host, specs, inertia = t["host"], t["T_host"], t["specs"], t["inertia"]
    bnames = _Names()
    bnames.used.update(body_names[1:])
    for b in range(1, nb):
        pb = int(m.body_parentid[b])
        T0 = T_host[pb] @ _pose(_quat_wxyz(m.body_quat[b]), m.body_pos[b])
        nj = int(m.body_jntnum[b])
        if m.body_mocapid[b] >= 0:
            t["mocap"].append(body_names[b])
        if nj == 0:
            host[b], T_host[b] = host[pb], T0
            if host[pb] is not None:
                t["welded"].append(b)
        elif nj > 1 and composite_joints and composite_ok(m, b, chained):
            composite_body(m, b, body_names, joint_names, host[pb], T0, specs, t["ball_limits"])
            host[b], T_host[b] = body_names[b], _pose(p=-specs[-1]["anchor"])
            inertia[body_names[b]] = np.zeros((6, 6))
        else:
            host[b], T_host[b] = _joint_chain(m, label, b, body_names, joint_names, host[pb], T0, bnames, t)
        if host[b] is not None:
            mass, com = float(m.body_mass[b]), np.array(m.body_ipos[b], float)
            Rc = _quat_wxyz(m.body_iquat[b])
            Ic = Rc @ np.diag(np.array(m.body_inertia[b], float)) @ Rc.T
            inertia[host[b]] = inertia[host[b]] + _inertia_in(T_host[b], mass, com, Ic)
    return t


def _joint_chain(m, label, b, body_names, joint_names, parent, T0, bnames, t):
    """The joints of MuJoCo body ``b`` as a chain of our bodies (massless but the last), appended to
    ``t["specs"]``; returns ``(host, T_host)`` of ``b``: the last body and ``b``'s pose in it."""
    j0, nj = int(m.body_jntadr[b]), int(m.body_jntnum[b])
    qpos0 = m.qpos0
    prev = None
    for k, j in enumerate(range(j0, j0 + nj)):
        jt, jn = int(m.jnt_type[j]), joint_names[j]
        qa, da = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        axis = np.array(m.jnt_axis[j], float)
        lower = upper = None
        if jt == _FREE:
            if parent is not None or nj != 1:
                raise MjcfError(f"{label}: body {body_names[b]!r}: a free joint is representable only "
                                f"as the one joint of a body attached to the world")
            p, joint, X = np.zeros(3), make_joint("free"), np.eye(4)
            arm = np.array(m.dof_armature[da:da + 6], float)[[3, 4, 5, 0, 1, 2]]
            if np.any(arm):
                t["free_armature"].append(jn)
        else:
            p = np.array(m.jnt_pos[j], float)
            if jt == _HINGE:
                # the rotation by -ref about the axis: R(axis, -ref) = R(axis, ref)^T
                joint = make_joint("revolute", axis)
                C = _pose(axis_rotation(np.array(joint.axis), np.float64(qpos0[qa])))
            elif jt == _SLIDE:
                joint, C = make_joint("prismatic", axis), _pose(p=-qpos0[qa] * axis / np.linalg.norm(axis))
            else:
                joint, C = make_joint("spherical"), np.eye(4)
                if m.jnt_limited[j]:
                    t["ball_limits"].append(jn)
            if jt in (_HINGE, _SLIDE) and m.jnt_limited[j]:
                lower, upper = float(m.jnt_range[j][0]), float(m.jnt_range[j][1])
            X = (T0 @ _pose(p=p) if prev is None else _pose(p=p - prev)) @ C
            arm = np.array(m.dof_armature[da:da + joint.nv], float)
        bn = body_names[b] if k == nj - 1 else bnames.take(f"{body_names[b]}/{jn}")
        t["specs"].append(dict(name=bn, parent=parent, joint=joint, X=X, jn=jn, lower=lower, upper=upper,
                               arm=arm, mj_body=b, mj_joint=j, mj_joints=[j]))
        t["inertia"][bn] = np.zeros((6, 6))
        parent, prev = bn, p
    return parent, _pose(p=-prev)


def _frames(builder, m, body_names, host, T_host, specs):
    """Frames of the moving MuJoCo bodies (offset from their joint frame), then of the sites:
    ``(body_frame, site_frame, renamed_sites)``."""
    fnames = _Names()
    fnames.used.update(sp["name"] for sp in specs)
    body_frame = {}
    for b in range(1, m.nbody):
        if host[b] is None:
            continue
        if body_names[b] != host[b] or np.any(T_host[b] != np.eye(4)):
            fn = body_names[b] if body_names[b] == host[b] else fnames.take(body_names[b])
            builder.add_frame(fn, host[b], _transform(T_host[b]))
        else:
            fn = body_names[b]
        body_frame[b] = fn
    site_frame, renamed_sites = {}, []
    for s in range(m.nsite):
        b = int(m.site_bodyid[s])
        sn = _name(m, "site", s)
        fn = fnames.take(sn if sn not in fnames.used else f"site:{sn}")
        if fn != sn:
            renamed_sites.append(f"{sn} -> {fn}")
        # a site on the world or on a body welded to it: a frame on the world, at its world pose
        T = _world_pose(m, b) if host[b] is None else T_host[b]
        builder.add_frame(fn, host[b], _transform(T @ _pose(_quat_wxyz(m.site_quat[s]), m.site_pos[s])))
        site_frame[s] = fn
    return body_frame, site_frame, renamed_sites


def _welds(builder, m, body_names, t, body_frame, site_frame):
    """Fixed joints between each welded body and its moving host; ``{MuJoCo body: fixed joint name}``."""
    host, T_host, specs = t["host"], t["T_host"], t["specs"]
    jnames = _Names()
    jnames.used.update(sp["jn"] for sp in specs)
    fixed_name = {}
    children_of = [[] for _ in range(m.nbody)]
    for b in range(1, m.nbody):
        children_of[int(m.body_parentid[b])].append(b)
    for b in t["welded"]:
        sub = _subtree(children_of, b)
        child_side = [c for c in sub if host[c] == host[b]]            # welded to the same host
        I = sum((_inertia_in(T_host[c], float(m.body_mass[c]), np.array(m.body_ipos[c], float),
                             _quat_wxyz(m.body_iquat[c]) @ np.diag(np.array(m.body_inertia[c], float))
                             @ _quat_wxyz(m.body_iquat[c]).T) for c in child_side), np.zeros((6, 6)))
        moving = [_first_body(specs, c) for c in sub if host[c] != host[b] and host[int(m.body_parentid[c])] == host[b]]
        frames = [body_frame[c] for c in child_side if c in body_frame]
        frames += [site_frame[s] for s in range(m.nsite) if int(m.site_bodyid[s]) in child_side and s in site_frame]
        fixed_name[b] = jnames.take(body_names[b])
        builder.add_fixed_joint(fixed_name[b], host[b], _transform(T_host[b]), I, moving, frames)
    return fixed_name


def _left_out(m, body_names, t, renamed_sites):
    """Notes on what the file holds that the model leaves out or changes (for :class:`MjcfWarning`)."""
    notes = []
    if m.ntendon:
        notes.append(f"{m.ntendon} tendon(s) ({_list(_name(m, 'tendon', k) for k in range(m.ntendon))})")
    other_trn = [_name(m, "actuator", a) for a in range(m.nu) if int(m.actuator_trntype[a]) not in
                 (_TRN_JOINT, _TRN_JOINTINPARENT)]
    if other_trn:
        notes.append(f"{len(other_trn)} actuator(s) with a transmission other than a joint ({_list(other_trn)})")
    if getattr(m, "nflex", 0):
        notes.append(f"{m.nflex} flex(es)")
    if getattr(m, "nplugin", 0):
        notes.append(f"{m.nplugin} plugin instance(s)")
    gc = [body_names[b] for b in range(1, m.nbody) if getattr(m, "body_gravcomp", np.zeros(m.nbody))[b] != 0]
    if gc:
        notes.append(f"gravity compensation on {_list(gc)}")
    if t["ball_limits"]:
        notes.append(f"cone limits of ball joints ({_list(t['ball_limits'])})")
    if t["free_armature"]:
        notes.append(f"armature on free joints ({_list(t['free_armature'])}): kept on our body-frame dofs, where "
                     f"MuJoCo applies it to the world-frame linear velocity (the two differ by a velocity term)")
    if t["mocap"]:
        notes.append(f"mocap bodies ({_list(t['mocap'])}), kept fixed at their reference pose")
    if renamed_sites:
        notes.append(f"sites named like another frame, renamed ({_list(renamed_sites)})")
    return notes


def _model_name(m):
    raw = bytes(m.names)
    return raw[:raw.index(b"\0")].decode() if b"\0" in raw else ""


def _subtree(children_of, b):
    out, stack = [], [b]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(children_of[c])
    return out


def _first_body(specs, mj_body):
    for sp in specs:
        if sp["mj_body"] == mj_body:
            return sp["name"]
    raise AssertionError(mj_body)


def _check_layout(m, model, specs, label):
    """Our q and v layouts are MuJoCo's (joints in the same order)."""
    for sp in specs:
        i = model.joint(sp["jn"])
        j = sp["mj_joint"]
        if model.q_start[i] != m.jnt_qposadr[j] or model.v_start[i] != m.jnt_dofadr[j]:
            raise MjcfError(f"{label}: joint {sp['jn']!r}: the body tree is not in depth-first order, so q would "
                            f"not follow MuJoCo's qpos layout")


def _joint_dynamics(m, model, specs):
    """:class:`JointDynamics` in our layout (free joints: angular dofs first)."""
    perm = np.arange(model.nv)
    for sp in specs:
        if sp["joint"].type == "free":
            v0 = int(m.jnt_dofadr[sp["mj_joint"]])
            perm[v0:v0 + 6] = v0 + np.array([3, 4, 5, 0, 1, 2])
    stiff = np.zeros(model.nv)
    for sp in specs:
        parts = sp["joint"].joints if sp["joint"].type == "composite" else (sp["joint"],)
        for j, part in zip(sp["mj_joints"], parts):
            v0 = int(m.jnt_dofadr[j])
            stiff[v0:v0 + part.nv] = float(m.jnt_stiffness[j])
    return JointDynamics(damping=np.array(m.dof_damping, float)[perm], stiffness=stiff,
                         frictionloss=np.array(m.dof_frictionloss, float)[perm],
                         spring_reference=map_quaternions(model, np.array(m.qpos_spring, float), xyzw),
                         reference=map_quaternions(model, np.array(m.qpos0, float), xyzw))


# --- sensors ---------------------------------------------------------------------------

#: MuJoCo sensor kinds that are functions of the configuration and velocity alone.
# --- equality constraints -------------------------------------------------------------

def _frame_ref(model, extra, m, objtype, obj, local_pose):
    """``(frame name or None for the world, pose (4x4) in that frame)`` of a pose given in a MuJoCo body or site."""
    if objtype == _OBJ_SITE:
        b = int(m.site_bodyid[obj])
        local_pose = _pose(_quat_wxyz(m.site_quat[obj]), m.site_pos[obj]) @ local_pose
    else:
        b = obj
    if extra["host"][b] is None:                 # world or welded to it: a world pose
        return None, _world_pose(m, b) @ local_pose
    return extra["body_frame"][b], local_pose


def _world_pose(m, b):
    T = np.eye(4)
    chain = []
    while b > 0:
        chain.append(b)
        b = int(m.body_parentid[b])
    for c in reversed(chain):
        T = T @ _pose(_quat_wxyz(m.body_quat[c]), m.body_pos[c])
    return T


def _constraints(m, model, extra, label):
    from ..constraints import ConstraintError, ConstraintSet
    out, notes = [], []
    for e in range(m.neq):
        if not m.eq_active0[e]:
            continue
        try:
            _equality(m, model, extra, e, out, notes)
        except ConstraintError as err:        # e.g. both sides on one body after welds are merged
            notes.append(f"equality {_name(m, 'equality', e)!r}: {err}")
    return ConstraintSet(model, out), notes


def _equality(m, model, extra, e, out, notes):
    """Append the constraint of equality ``e`` to ``out``, or a note on why it has none."""
    from ..constraints import JointCoupling, PointCoincidence, Weld
    et, ot = int(m.eq_type[e]), int(m.eq_objtype[e])
    o1, o2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
    data = np.array(m.eq_data[e], float)
    en = _name(m, "equality", e)
    if et in (_EQ_CONNECT, _EQ_WELD):
        if ot == _OBJ_SITE:
            A, B = np.eye(4), np.eye(4)
        elif et == _EQ_CONNECT:
            A, B = _pose(p=data[0:3]), _pose(p=data[3:6])
        else:
            # MuJoCo: p1 + R1 relpos = p2 + R2 anchor and R1 relquat = R2, i.e. the frame
            # (relpos, relquat) on body 1 coincides with the frame (anchor, identity) on body 2.
            A, B = _pose(_quat_wxyz(data[6:10]), data[3:6]), _pose(p=data[0:3])
        fa, Pa = _frame_ref(model, extra, m, ot, o1, A)
        fb, Pb = _frame_ref(model, extra, m, ot, o2, B)
        if fa is None:
            fa, Pa, fb, Pb = fb, Pb, fa, Pa
        if fa is None:
            notes.append(f"{'connect' if et == _EQ_CONNECT else 'weld'} {en!r} between two bodies fixed to the world")
            return
        if et == _EQ_CONNECT:
            out.append(PointCoincidence(model, fa, fb, point_a=Pa[:3, 3], point_b=Pb[:3, 3], name=en))
        else:
            # frame_a composed with Pa coincides with frame_b composed with Pb:
            # frame_a = frame_b * Pb * Pa^-1
            P = Pb @ np.linalg.inv(Pa)
            out.append(Weld(model, fa, fb, placement=(P[:3, :3], P[:3, 3]), name=en))
    elif et == _EQ_JOINT:
        c = data[0:5]
        j1 = extra["joint_names"][o1]
        if o2 < 0 or np.any(c[2:] != 0) or int(m.jnt_type[o1]) not in (_HINGE, _SLIDE) \
                or int(m.jnt_type[o2]) not in (_HINGE, _SLIDE):
            notes.append(f"joint equality {en!r} (only a linear coupling of two hinge or slide joints maps "
                         f"to a JointCoupling)")
            return
        r1, r2 = float(m.qpos0[m.jnt_qposadr[o1]]), float(m.qpos0[m.jnt_qposadr[o2]])
        # q1 - r1 = c0 + c1 (q2 - r2)
        out.append(JointCoupling(model, j1, extra["joint_names"][o2], multiplier=c[1],
                                 offset=r1 + c[0] - c[1] * r2, name=en))
    else:
        notes.append(f"equality {en!r} of type {_eq_kind(et)}")


def _eq_kind(et):
    import mujoco
    try:
        return mujoco.mjtEq(et).name.replace("mjEQ_", "").lower()
    except ValueError:
        return str(et)
