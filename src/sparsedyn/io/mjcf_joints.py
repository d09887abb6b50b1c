"""MuJoCo's joints: its quaternion order in ``qpos`` (:func:`map_quaternions`, also behind
:mod:`sparsedyn.interop.mujoco`'s layout maps), and several joints of a body as one composite joint
(the rule: :mod:`sparsedyn.io.mjcf`).

MuJoCo applies a body's joints one after the other, each about its own anchor ``jnt_pos`` in the
frame the previous ones moved: ``B = B0 T(p1) J1 T(-p1) T(p2) J2 T(-p2) ...``.  With one anchor
``p`` for every hinge and ball (a slide commutes with the translations), that is
``B0 T(p) J1 J2 ... T(-p)``, a composite joint placed at ``p`` whose body frame sits at ``p``.
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
    """Whether the joints of MuJoCo body ``b`` are exactly one composite joint (module docstring)."""
    js = range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b]))
    if any(int(m.jnt_type[j]) == _FREE or j in chained for j in js):
        return False
    anchors = np.array([m.jnt_pos[j] for j in js if int(m.jnt_type[j]) in (_HINGE, _BALL)], float)
    if len(anchors) and np.abs(anchors - anchors[0]).max() > 1e-12 * max(1.0, np.abs(anchors).max()):
        return False
    # a reference position (ref) moves the part's frame: possible only before the first part
    return all(float(m.qpos0[m.jnt_qposadr[j]]) == 0.0 for j in js[1:] if int(m.jnt_type[j]) in (_HINGE, _SLIDE))


def composite_body(m, b, body_names, joint_names, parent, T0, specs, ball_limits):
    """Append the spec of MuJoCo body ``b`` moved by one composite joint of its joints, in file order."""
    js = list(range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b])))
    rot = [j for j in js if int(m.jnt_type[j]) in (_HINGE, _BALL)]
    anchor = np.array(m.jnt_pos[rot[0] if rot else js[0]], float)
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
    # the first part's reference position, folded into the placement as for a single joint
    j, r = js[0], float(m.qpos0[m.jnt_qposadr[js[0]]])
    C = _pose(axis_rotation(np.array(parts[0].axis), np.float64(r))) if int(m.jnt_type[j]) == _HINGE else \
        _pose(p=-r * np.array(parts[0].axis)) if int(m.jnt_type[j]) == _SLIDE else np.eye(4)
    joint = make_joint("composite", joints=parts)
    da = int(m.jnt_dofadr[j])
    bounded = np.isfinite(lower).any()
    specs.append(dict(name=body_names[b], parent=parent, joint=joint, X=T0 @ _pose(p=anchor) @ C,
                      jn="+".join(joint_names[k] for k in js), lower=np.array(lower) if bounded else None,
                      upper=np.array(upper) if bounded else None,
                      arm=np.array(m.dof_armature[da:da + joint.nv], float), mj_body=b, mj_joint=j, mj_joints=js,
                      anchor=anchor))


def _quat_wxyz(q):
    q = np.asarray(q, float)
    return quat_to_rot(np.array([q[1], q[2], q[3], q[0]]) / np.linalg.norm(q))


def _transform(T):
    """Plücker ``child_X_parent`` of the pose ``T`` (4x4) of the child frame in the parent frame."""
    return from_pose(T[:3, :3], T[:3, 3])


def _name(m, kind, i):
    n = getattr(m, kind)(i).name
    return n if n else f"{kind}{i}"


def _list(items, n=6):
    items = list(items)
    return ", ".join(map(str, items[:n])) + (f", ... ({len(items)} in all)" if len(items) > n else "")
