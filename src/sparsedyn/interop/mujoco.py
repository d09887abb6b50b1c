"""Conversions between sparsedyn's and MuJoCo's layouts, and MJCF export.

MuJoCo's layouts, per joint (``qpos`` / ``qvel``; ``qacc`` and ``qfrc`` like ``qvel``):

=============  ==================================  ==============================================
ours           MuJoCo                              relation
=============  ==================================  ==============================================
revolute,      ``hinge``                           identical (``continuous``: an unlimited hinge)
continuous
prismatic      ``slide``                           identical
cylindrical    ``hinge`` + ``slide`` (one body)    identical, ``[angle, displacement]``
planar         ``slide x``, ``slide y``,           q identical; ours ``v = [w, vx, vy]`` with the
               ``hinge z`` (one body)              linear part in the child frame, MuJoCo
                                                   ``[vx, vy, w]`` with it in the parent frame
spherical      ``ball``                            q ``[x, y, z, w]`` vs ``[w, x, y, z]``; v the same
free           ``free``                            q ``[p, x, y, z, w]`` vs ``[p, w, x, y, z]``;
                                                   ours ``v = [w; v]`` body frame, MuJoCo
                                                   ``[v; w]``, linear part in the world frame
composite      several joints of one body          parts revolute, prismatic or spherical: each
               (``load_mjcf`` names the composite  its own MuJoCo joint, in order, as above, at
               ``"a+b+..."``)                      its anchor (parts placed by translations;
                                                   a rotated placement has no MJCF form);
                                                   to_mjcf names them ``a``, ``b``, ... (else
                                                   ``<name>_<k>``)
helical        (none)                              not expressible
=============  ==================================  ==============================================

So MuJoCo's velocity is ``v_mj = T(q) v`` with ``T`` block-diagonal, each block
a permutation times rotations: orthogonal.  Generalized forces follow by power
balance, ``tau_mj = T^-T tau = T tau``; accelerations pick up the derivative of
``T``: ``a_mj = T a + Tdot v`` (the rotating frame of the linear part).
The ``*_from_mujoco`` functions take MuJoCo's own arrays (``qpos``, ``qvel``,
``qacc``, ``qfrc_*``, as ``mjData`` holds them), the ``*_to_mujoco`` functions
sparsedyn's (``q``, ``v``, ``a``, ``tau``).  Everything here is float NumPy with
leading batch axes; MuJoCo itself is only needed by :func:`load_mujoco`.
"""

from __future__ import annotations

import numpy as np

from ..io.mjcf_joints import map_quaternions as _map_quaternions, wxyz as _wxyz, xyzw as _xyzw
from ..model import spatial
from ..model import Model

__all__ = ["mujoco_nq", "q_to_mujoco", "q_from_mujoco", "velocity_map", "v_to_mujoco", "v_from_mujoco",
           "a_to_mujoco", "a_from_mujoco", "tau_to_mujoco", "tau_from_mujoco", "to_mjcf", "load_mujoco", "body_moves"]

_MJ_NQ = {"revolute": 1, "continuous": 1, "prismatic": 1, "cylindrical": 2, "planar": 3, "spherical": 4, "free": 7}


def _expressible(j):
    # a composite of hinges, slides and balls: MuJoCo's several joints of one body, in order
    if j.type == "composite":
        return all(p.type in ("revolute", "continuous", "prismatic", "spherical") for p in j.joints)
    return j.type in _MJ_NQ


def _check_expressible(model):
    for i, j in enumerate(model.joints):
        if not _expressible(j):
            raise ValueError(f"joint {model.joint_names[i]!r} of model {model.name!r}: MuJoCo has no "
                             f"{j.type} joint")


def mujoco_nq(model: Model) -> int:
    _check_expressible(model)
    return model.nq


def _last(name, x, n, what):
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or x.shape[-1] != n:
        raise ValueError(f"{name}: expected shape (..., {n}) ({what}), got {x.shape}")
    return x


def q_to_mujoco(model: Model, q) -> np.ndarray:
    """``qpos`` (..., nq) from our ``q`` (quaternions reordered to ``[w, x, y, z]``)."""
    _check_expressible(model)
    return _map_quaternions(model, _last("q", q, model.nq, f"configuration of model {model.name!r}"), _wxyz)


def q_from_mujoco(model: Model, qpos) -> np.ndarray:
    """Our ``q`` (..., nq) from MuJoCo's ``qpos``."""
    _check_expressible(model)
    qpos = _last("qpos", qpos, model.nq, f"MuJoCo configuration of model {model.name!r}")
    return _map_quaternions(model, qpos, _xyzw)


def _rot2(th):
    c, s = np.cos(th), np.sin(th)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def velocity_map(model: Model, q) -> np.ndarray:
    """``T(q)`` (..., nv, nv) with ``qvel = T v``; orthogonal, so ``qfrc = T tau`` too."""
    _check_expressible(model)
    q = _last("q", q, model.nq, f"configuration of model {model.name!r}")
    T = np.zeros(q.shape[:-1] + (model.nv, model.nv))
    for i, j in enumerate(model.joints):
        qi, k = q[..., model.q_slice(i)], int(model.v_start[i])
        if j.type == "free":
            T[..., k:k + 3, k + 3:k + 6] = spatial.quat_to_rot(qi[..., 3:7])    # world linear velocity
            T[..., k + 3:k + 6, k:k + 3] = np.eye(3)
        elif j.type == "planar":
            T[..., k:k + 2, k + 1:k + 3] = _rot2(qi[..., 2])                    # parent-frame vx, vy
            T[..., k + 2, k] = 1.0
        else:
            T[..., k:k + j.nv, k:k + j.nv] = np.eye(j.nv)
    return T


def _mapped(model, q, name, x, what, inverse=False):
    """``T x`` (or ``T^T x`` = ``T^-1 x``, ``T`` being orthogonal) for ``x`` (..., nv)."""
    x = _last(name, x, model.nv, f"{what} of model {model.name!r}")
    T = velocity_map(model, q)
    return ((np.swapaxes(T, -1, -2) if inverse else T) @ x[..., None])[..., 0]


def v_to_mujoco(model: Model, q, v) -> np.ndarray:
    """MuJoCo's ``qvel`` (..., nv) from our configuration ``q`` (..., nq) and velocity ``v`` (..., nv)."""
    return _mapped(model, q, "v", v, "velocity")


def v_from_mujoco(model: Model, qpos, qvel) -> np.ndarray:
    """Our ``v`` (..., nv) from MuJoCo's ``qpos`` (..., nq) and ``qvel`` (..., nv) (``mjData.qpos``,
    ``mjData.qvel`` as they are)."""
    return _mapped(model, q_from_mujoco(model, qpos), "qvel", qvel, "MuJoCo velocity", inverse=True)


def tau_to_mujoco(model: Model, q, tau) -> np.ndarray:
    """MuJoCo's ``qfrc`` (..., nv) from our ``q`` and joint forces ``tau`` (power balance:
    ``qfrc . qvel = tau . v``)."""
    return _mapped(model, q, "tau", tau, "joint forces")


def tau_from_mujoco(model: Model, qpos, qfrc) -> np.ndarray:
    """Our joint forces ``tau`` (..., nv) from MuJoCo's ``qpos`` and a generalized force ``qfrc``
    (``qfrc_inverse``, ``qfrc_applied``, ``dof_armature`` ...)."""
    return _mapped(model, q_from_mujoco(model, qpos), "qfrc", qfrc, "MuJoCo joint forces", inverse=True)


def _velocity_product(model, q, v):
    """``Tdot v`` (..., nv): the rotating frames of the free and planar joints' linear parts."""
    out = np.zeros(np.broadcast_shapes(q.shape[:-1], v.shape[:-1]) + (model.nv,))
    for i, j in enumerate(model.joints):
        qi, vi, k = q[..., model.q_slice(i)], v[..., model.v_slice(i)], int(model.v_start[i])
        if j.type == "free":       # d/dt (R v) = R (vdot + w x v)
            R = spatial.quat_to_rot(qi[..., 3:7])
            out[..., k:k + 3] = (R @ spatial.cross3(vi[..., :3], vi[..., 3:])[..., None])[..., 0]
        elif j.type == "planar":   # d/dt (R(th) v) = R(th) (vdot + w J v), J = [[0, -1], [1, 0]]
            wJv = vi[..., :1] * np.stack([-vi[..., 2], vi[..., 1]], -1)
            out[..., k:k + 2] = (_rot2(qi[..., 2]) @ wJv[..., None])[..., 0]
    return out


def a_to_mujoco(model: Model, q, v, a) -> np.ndarray:
    """MuJoCo's ``qacc`` (..., nv) from our ``q``, ``v`` and ``a``: ``qacc = T a + Tdot v`` (the rotating
    frames of the free and planar joints' linear parts add terms)."""
    v = _last("v", v, model.nv, f"velocity of model {model.name!r}")
    a = _last("a", a, model.nv, f"acceleration of model {model.name!r}")
    q = _last("q", q, model.nq, f"configuration of model {model.name!r}")
    return (velocity_map(model, q) @ a[..., None])[..., 0] + _velocity_product(model, q, v)


def a_from_mujoco(model: Model, qpos, qvel, qacc) -> np.ndarray:
    """Our ``a`` (..., nv) from MuJoCo's ``qpos``, ``qvel`` and ``qacc``: ``a = T^T (qacc - Tdot v)``."""
    q = q_from_mujoco(model, qpos)
    v = v_from_mujoco(model, qpos, qvel)
    qacc = _last("qacc", qacc, model.nv, f"MuJoCo acceleration of model {model.name!r}")
    return _mapped(model, q, "qacc", qacc - _velocity_product(model, q, v), "MuJoCo acceleration", inverse=True)


def _f(x):
    return " ".join(repr(float(v)) for v in np.ravel(x))


def to_mjcf(model: Model) -> str:
    """An MJCF document with the same bodies, joints, inertias and gravity (no geometry).

    Body frames coincide with ours; a free joint must hang from the world.  Massless
    bodies are refused (MuJoCo requires positive mass on moving bodies).  The rotor
    inertia ``model.armature`` becomes each MuJoCo joint's ``armature``; MuJoCo has
    one value per joint, so a ball joint (and the two slides of a planar joint)
    must have equal armature on its dofs.  A free joint must have none: MuJoCo
    applies it to the world-frame linear velocity, which adds a velocity term ours
    (body frame) does not have.
    """
    _check_expressible(model)
    from xml.sax.saxutils import quoteattr
    body_xml = {}
    for i in range(model.nbodies - 1, -1, -1):
        j, name = model.joints[i], model.body_names[i]
        if j.type == "free" and model.parent[i] >= 0:
            raise ValueError(f"joint {model.joint_names[i]!r}: MuJoCo allows a free joint only on a body of the world")
        m, c, Ic = spatial.inertia_components(model.inertia[i])
        if not m > 0:
            raise ValueError(f"body {name!r} of model {model.name!r}: MuJoCo needs a positive mass on moving bodies")
        R, p = spatial.pose(model.Xtree[i])
        jn = model.joint_names[i]
        shift, anchors = _composite_anchors(model, i) if j.type == "composite" else (None, None)
        if shift is not None:                # MuJoCo's first anchor sits where our first part is placed
            p = p + R @ shift
        ax = _f(j.axis)
        arm = model.armature[model.v_slice(i)]
        A = lambda k: f' armature="{float(arm[k])!r}"' if k < len(arm) and arm[k] else ""   # noqa: E731
        if j.type == "free" and np.any(arm):
            raise ValueError(f"joint {jn!r} of model {model.name!r}: a free joint's armature has no MuJoCo "
                             f"equivalent (MuJoCo applies it to the world-frame linear velocity)")
        groups = {"spherical": [0, 1, 2], "planar": [1, 2]}.get(j.type, [])
        if groups and np.ptp(arm[groups]) != 0:
            raise ValueError(f"joint {jn!r} of model {model.name!r}: MuJoCo has one armature per joint; this "
                             f"{j.type} joint has different armatures on its dofs {arm.tolist()}")
        joints = _composite_mjcf(model, i, arm, anchors) if j.type == "composite" else {
            "revolute": [f'<joint name={quoteattr(jn)} type="hinge" axis="{ax}"{A(0)}/>'],
            "continuous": [f'<joint name={quoteattr(jn)} type="hinge" axis="{ax}"{A(0)}/>'],
            "prismatic": [f'<joint name={quoteattr(jn)} type="slide" axis="{ax}"{A(0)}/>'],
            "cylindrical": [f'<joint name={quoteattr(jn + "_r")} type="hinge" axis="{ax}"{A(0)}/>',
                            f'<joint name={quoteattr(jn + "_p")} type="slide" axis="{ax}"{A(1)}/>'],
            "planar": [f'<joint name={quoteattr(jn + "_x")} type="slide" axis="1 0 0"{A(1)}/>',
                       f'<joint name={quoteattr(jn + "_y")} type="slide" axis="0 1 0"{A(2)}/>',
                       f'<joint name={quoteattr(jn + "_th")} type="hinge" axis="0 0 1"{A(0)}/>'],
            "spherical": [f'<joint name={quoteattr(jn)} type="ball"{A(0)}/>'],
            "free": [f'<freejoint name={quoteattr(jn)}/>'],
        }[j.type]
        full = [Ic[0, 0], Ic[1, 1], Ic[2, 2], Ic[0, 1], Ic[0, 2], Ic[1, 2]]
        children = "".join(body_xml.pop(k) for k in range(i + 1, model.nbodies) if model.parent[k] == i)
        body_xml[i] = (f'<body name={quoteattr(name)} pos="{_f(p)}" quat="{_f(_wxyz(spatial.rot_to_quat(R)))}">'
                       + "".join(joints) + f'<inertial pos="{_f(c)}" mass="{float(m)!r}" fullinertia="{_f(full)}"/>'
                       + children + "</body>")
    roots = "".join(body_xml[i] for i in range(model.nbodies) if model.parent[i] < 0)
    return (f'<mujoco model={quoteattr(model.name)}><compiler angle="radian" autolimits="true"/>'
            f'<option gravity="{_f(model.gravity)}"/><worldbody>{roots}</worldbody></mujoco>')


def _composite_anchors(model, i):
    """``(shift (3,), anchors (n, 3))`` of the composite joint of body ``i``: MuJoCo applies a body's
    joints ``T(p1) J1 T(p2 - p1) J2 ... T(pn - p(n-1)) Jn T(-pn)`` in the body frame, ours
    ``P1 J1 P2 J2 ... Pn Jn`` (the parts' placements) from ``Xtree``: with translations ``Pk = T(dk)``,
    the anchors ``pk = -(d(k+1) + ... + dn)`` and the body's MJCF position moved by ``d1 - p1`` (the
    body frames coincide).  A rotated placement has no MJCF form: refused, naming the joint."""
    j = model.joints[i]
    d = []
    for k, P in enumerate(j.part_placements):
        if P is not None and not np.array_equal(np.asarray(P.E), np.eye(3)):
            raise ValueError(f"joint {model.joint_names[i]!r} of model {model.name!r}: part {k} of the composite "
                             f"joint is placed with a rotation, which MJCF's joints (an anchor and an axis in "
                             f"the body frame) cannot say")
        d.append(np.zeros(3) if P is None else np.asarray(P.r, float))
    anchors = [np.zeros(3)]
    for dk in reversed(d[1:]):
        anchors.insert(0, anchors[0] - dk)
    return d[0] - anchors[0], anchors


def _composite_mjcf(model, i, arm, anchors):
    """MuJoCo joints of one body for the composite joint of body ``i``, in order, each at its anchor
    (:func:`_composite_anchors`; all at the body origin for parts without placements); named after
    the parts of a name ``"a+b+..."`` (``load_mjcf``'s rule), else ``"<name>_<k>"``."""
    from xml.sax.saxutils import quoteattr
    j, jn = model.joints[i], model.joint_names[i]
    names = jn.split("+")
    if len(names) != len(j.joints) or len(set(names)) != len(names):
        names = [f"{jn}_{k}" for k in range(len(j.joints))]
    out, k = [], 0
    for name, part, anchor in zip(names, j.joints, anchors):
        a = arm[k:k + part.nv]
        if np.ptp(a) != 0:
            raise ValueError(f"joint {jn!r} of model {model.name!r}: MuJoCo has one armature per joint; its part "
                             f"{name!r} has different armatures on its dofs {a.tolist()}")
        kind = {"spherical": "ball", "prismatic": "slide"}.get(part.type, "hinge")
        axis = "" if kind == "ball" else f' axis="{_f(part.axis)}"'
        A = f' armature="{float(a[0])!r}"' if a[0] else ""
        pos = f' pos="{_f(anchor)}"' if np.any(anchor) else ""
        out.append(f'<joint name={quoteattr(name)} type="{kind}"{axis}{pos}{A}/>')
        k += part.nv
    return out


def load_mujoco(model: Model):
    """``mujoco.MjModel`` of :func:`to_mjcf` (needs the ``mujoco`` package)."""
    import mujoco
    return mujoco.MjModel.from_xml_string(to_mjcf(model))


def body_moves(mm, b) -> bool:
    """Whether body ``b`` of the ``mujoco.MjModel`` ``mm`` has a joint on its path to the world
    (bodies without one, mocap bodies among them, do not move with ``qpos``)."""
    while b > 0:
        if mm.body_jntnum[b]:
            return True
        b = mm.body_parentid[b]
    return False
