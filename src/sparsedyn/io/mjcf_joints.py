"""MuJoCo's joints: its quaternion order in ``qpos`` (:func:`map_quaternions`, also behind
:mod:`sparsedyn.interop.mujoco`'s layout maps), and several joints of a body as one composite joint
(the rule: :mod:`sparsedyn.io.mjcf`).

MuJoCo applies a body's joints one after the other, each about its own anchor ``jnt_pos`` in the
frame the previous ones moved: ``B = B0 T(p1) J1 T(-p1) T(p2) J2 T(-p2) ...``.  With one anchor
``p`` for every hinge and ball (a slide commutes with the translations), that is
``B0 T(p) J1 J2 ... T(-p)``, a composite joint placed at ``p`` whose body frame sits at ``p``.
Otherwise it is ``B0 T(p1) J1 T(p2 - p1) J2 ... T(pn - p(n-1)) Jn T(-pn)``: a composite joint placed
at ``p1`` whose part ``k`` sits at ``T(pk - p(k-1))`` in the frame part ``k - 1`` moved (its
placement), with the body frame at ``pn``.  A part's reference position (``ref``: MuJoCo moves a
joint by ``qpos - qpos0``) turns or shifts its frame by ``-ref`` along its own axis, which commutes
with its motion: it is folded into its placement (the first part's into the joint's ``Xtree``).
"""

from __future__ import annotations

import numpy as np

from ..model.joints import make_joint
from ..model.spatial import axis_rotation, from_pose, quat_to_rot

# MuJoCo enum values (mjtJoint; mjtEq's joint equality), stable across versions.
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_EQ_JOINT = 2


def wxyz(quat):
    """Quaternions ``[x, y, z, w]`` (ours, last axis) as MuJoCo's ``[w, x, y, z]``."""
    return np.concatenate([quat[..., 3:], quat[..., :3]], -1)


def xyzw(quat):
    """MuJoCo's quaternions ``[w, x, y, z]`` (last axis) as ours, ``[x, y, z, w]``."""
    return np.concatenate([quat[..., 1:], quat[..., :1]], -1)


def map_quaternions(model, q, f):
    """Copy of ``q`` (..., nq) with ``f`` (:func:`wxyz` or :func:`xyzw`) applied to the quaternion block of
    every spherical, free and composite joint: MuJoCo's ``qpos`` from our ``q`` and back."""
    q = q.copy()
    for i, j in enumerate(model.joints):
        if j.type in ("spherical", "free", "composite"):
            for k in j.quaternions():
                s = int(model.q_start[i]) + k
                q[..., s:s + 4] = f(q[..., s:s + 4])
    return q


def _transform(T):
    """The Transform ``child_X_parent`` of the 4x4 pose ``T`` of a child frame in its parent."""
    return from_pose(T[:3, :3], T[:3, 3])


def _pose(R=None, p=None):
    """The 4x4 pose of rotation ``R`` (default identity) and position ``p`` (default zero)."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def named_joints(m, read_sensors):
    """MuJoCo joint ids that a mapped constraint or sensor names one by one (kept as their own joints)."""
    out = set()
    for e in range(m.neq):
        if int(m.eq_type[e]) == _EQ_JOINT:
            out.update(int(o) for o in (m.eq_obj1id[e], m.eq_obj2id[e]) if int(o) >= 0)
    if read_sensors:
        import mujoco
        out.update(int(m.sensor_objid[s]) for s in range(m.nsensor)
                   if int(m.sensor_type[s]) == int(mujoco.mjtSensor.mjSENS_JOINTACTFRC))
    return out


def composite_ok(m, b, chained):
    """Whether the joints of MuJoCo body ``b`` are exactly one composite joint: no free joint, and no
    joint that a constraint or sensor names by itself (module docstring)."""
    js = range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b]))
    return not any(int(m.jnt_type[j]) == _FREE or j in chained for j in js)


def _anchors(m, js):
    """Each joint's anchor (3,): the common anchor of the hinges and balls for all where they share one
    (a slide's anchor does not matter), else every joint's own ``jnt_pos``."""
    pos = [np.array(m.jnt_pos[j], float) for j in js]
    rot = [p for j, p in zip(js, pos) if int(m.jnt_type[j]) in (_HINGE, _BALL)]
    common = rot[0] if rot else pos[0]
    if all(np.abs(p - common).max() <= 1e-12 * max(1.0, np.abs(common).max()) for p in rot):
        return [common] * len(js)
    return pos


def _reference(m, j, part):
    """The 4x4 pose of part ``part`` (MuJoCo joint ``j``) moved by ``-ref`` along its axis."""
    r, jt = float(m.qpos0[m.jnt_qposadr[j]]), int(m.jnt_type[j])
    if jt == _HINGE:
        return _pose(axis_rotation(np.array(part.axis), np.float64(r)))
    return _pose(p=-r * np.array(part.axis)) if jt == _SLIDE else np.eye(4)


def composite_body(m, b, body_names, joint_names, parent, T0, specs, ball_limits):
    """Append the spec of MuJoCo body ``b`` moved by one composite joint of its joints, in file order."""
    js = list(range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b])))
    anchors = _anchors(m, js)
    parts, lower, upper = [], [], []
    for j in js:
        jt, axis = int(m.jnt_type[j]), np.array(m.jnt_axis[j], float)
        part = make_joint({_HINGE: "revolute", _SLIDE: "prismatic", _BALL: "spherical"}[jt], axis)
        limited = jt in (_HINGE, _SLIDE) and bool(m.jnt_limited[j])
        lower += [float(m.jnt_range[j][0]) if limited else -np.inf] * part.nq
        upper += [float(m.jnt_range[j][1]) if limited else np.inf] * part.nq
        if jt == _BALL and m.jnt_limited[j]:
            ball_limits.append(joint_names[j])
        parts.append(part)
    # the first part's reference position folded into Xtree as for a single joint, the others' and the
    # anchors' offsets into the parts' placements
    placements = [None] + [_transform(_pose(p=anchors[k] - anchors[k - 1]) @ _reference(m, js[k], parts[k]))
                           for k in range(1, len(js))]
    joint = make_joint("composite", joints=parts, placements=placements)
    j = js[0]
    da = int(m.jnt_dofadr[j])
    bounded = np.isfinite(lower).any()
    specs.append(dict(name=body_names[b], parent=parent, joint=joint,
                      X=T0 @ _pose(p=anchors[0]) @ _reference(m, j, parts[0]),
                      jn="+".join(joint_names[k] for k in js), lower=np.array(lower) if bounded else None,
                      upper=np.array(upper) if bounded else None,
                      arm=np.array(m.dof_armature[da:da + joint.nv], float), mj_body=b, mj_joint=j, mj_joints=js,
                      anchor=anchors[-1]))


def _quat_wxyz(q):
    q = np.asarray(q, float)
    return quat_to_rot(np.array([q[1], q[2], q[3], q[0]]) / np.linalg.norm(q))


def _name(m, kind, i):
    n = getattr(m, kind)(i).name
    return n if n else f"{kind}{i}"


def _list(items, n=6):
    items = list(items)
    return ", ".join(map(str, items[:n])) + (f", ... ({len(items)} in all)" if len(items) > n else "")
