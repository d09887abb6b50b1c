"""Conversions between sparsedyn's and Pinocchio's conventions.

Both libraries number the joints of a model in the same (depth-first) order
after :func:`to_pinocchio` / :func:`from_pinocchio`, with Pinocchio's joint
``i + 1`` being our body ``i`` (Pinocchio's joint 0 is the universe).  Body
frames coincide with joint frames in both.  The layouts differ as follows
(each difference checked against Pinocchio's forward kinematics in the tests):

=============  =========================  ==================================
quantity       sparsedyn                  Pinocchio
=============  =========================  ==================================
spatial        motion ``[omega; v]``,     motion ``[v; omega]``,
vectors        force ``[n; f]``           force ``[f; n]``
continuous     q ``theta`` (nq = 1)       q ``[cos, sin]`` (nq = 2)
planar         q ``[x, y, theta]``,       q ``[x, y, cos, sin]``,
               v ``[omega_z, vx, vy]``    v ``[vx, vy, omega_z]``
free           v ``[omega; v]``,          v ``[v; omega]``,
               tau ``[n; f]``             tau ``[f; n]``
=============  =========================  ==================================

Everything else is identical: the free joint's q ``[x, y, z, qx, qy, qz, qw]``
and the spherical joint's quaternion ``[qx, qy, qz, qw]``, velocities in the
child frame, revolute / prismatic / helical (translation ``pitch * angle``)
coordinates, and the cylindrical joint ``[angle, displacement]``, which
Pinocchio represents as a composite joint (revolute then prismatic about the
same axis).  Joint torques and accelerations transform like velocities.

A continuous joint's angle lives on the real line here and on the circle in
Pinocchio: :func:`q_from_pinocchio` returns angles in ``(-pi, pi]``, and
``Model.difference`` is ``q1 - q0`` where ``pinocchio.difference`` wraps it
into ``(-pi, pi]``.  Pinocchio's ``integrate`` may return a quaternion with the
opposite sign of ours (the same rotation).

The array conversions need only NumPy; :func:`to_pinocchio`,
:func:`from_pinocchio` and :func:`fext_to_pinocchio` import ``pinocchio``
when called.
"""

from __future__ import annotations

import numpy as np

from ..model.joints import JOINT_TYPES, Joint, make_joint
from ..model.builders import ModelBuilder
from ..model import Model, ModelError
from ..model.spatial import from_pose, inertia_components, mcI, pose

__all__ = [
    "pinocchio_nq", "q_to_pinocchio", "q_from_pinocchio", "v_to_pinocchio", "v_from_pinocchio",
    "tau_to_pinocchio", "tau_from_pinocchio", "motion_to_pinocchio", "motion_from_pinocchio",
    "force_to_pinocchio", "force_from_pinocchio", "jacobian_to_pinocchio", "jacobian_from_pinocchio",
    "derivative_to_pinocchio", "derivative_from_pinocchio", "fext_to_pinocchio", "to_pinocchio", "from_pinocchio",
]

# Pinocchio's largest float stands for "no limit" in its limit vectors.
_PIN_INF = np.finfo(float).max


# --- layouts --------------------------------------------------------------------

def _pin_nq(joint: Joint) -> int:
    return {"continuous": 2, "planar": 4}.get(joint.type, joint.nq)


def pinocchio_nq(model: Model) -> int:
    """Size of Pinocchio's configuration vector for ``model``."""
    return sum(_pin_nq(j) for j in model.joints)


def _v_permutation(joints) -> np.ndarray:
    """Indices ``perm`` with ``v_pin = v[..., perm]`` for a sequence of joints."""
    perm, start = [], 0
    for j in joints:
        local = {"free": [3, 4, 5, 0, 1, 2], "planar": [1, 2, 0]}.get(j.type, list(range(j.nv)))
        perm.extend(start + k for k in local)
        start += j.nv
    return np.array(perm, dtype=int)


def _last_axis(name, x, size, what):
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{name}: expected shape (..., {size}) ({what}), got shape {x.shape}")
    return x


def q_to_pinocchio(model: Model, q) -> np.ndarray:
    """Configuration (..., nq) in Pinocchio's layout (..., :func:`pinocchio_nq`)."""
    q = _last_axis("q", q, model.nq, f"configuration of model {model.name!r}")
    parts = []
    for i, j in enumerate(model.joints):
        qi = q[..., model.q_slice(i)]
        if j.type == "continuous":
            parts.append(np.stack([np.cos(qi[..., 0]), np.sin(qi[..., 0])], -1))
        elif j.type == "planar":
            parts.append(np.stack([qi[..., 0], qi[..., 1], np.cos(qi[..., 2]), np.sin(qi[..., 2])], -1))
        else:
            parts.append(qi)
    return np.concatenate(parts, -1) if parts else q.copy()


def q_from_pinocchio(model: Model, q_pin) -> np.ndarray:
    """Configuration (..., nq) from Pinocchio's layout.

    ``[cos, sin]`` pairs need not be normalised; their angles come back in ``(-pi, pi]``.
    """
    q_pin = _last_axis("q_pin", q_pin, pinocchio_nq(model), f"Pinocchio configuration of model {model.name!r}")
    parts, start = [], 0
    for j in model.joints:
        qi = q_pin[..., start:start + _pin_nq(j)]
        start += _pin_nq(j)
        if j.type == "continuous":
            parts.append(np.arctan2(qi[..., 1:2], qi[..., 0:1]))
        elif j.type == "planar":
            parts.append(np.concatenate([qi[..., :2], np.arctan2(qi[..., 3:4], qi[..., 2:3])], -1))
        else:
            parts.append(qi)
    return np.concatenate(parts, -1) if parts else q_pin.copy()


def _reorder(model, name, x, what, to_pin):
    """Dof vectors (..., nv) between our order and Pinocchio's (free joint: angular and linear halves swapped)."""
    x = _last_axis(name, x, model.nv, f"{what} of model {model.name!r}")
    perm = _v_permutation(model.joints)
    return x[..., perm if to_pin else np.argsort(perm)]


def v_to_pinocchio(model: Model, v) -> np.ndarray:
    """Velocity or acceleration (..., nv) in Pinocchio's order (same size)."""
    return _reorder(model, "v", v, "velocity", True)


def v_from_pinocchio(model: Model, v_pin) -> np.ndarray:
    """Velocity or acceleration (..., nv) from Pinocchio's order."""
    return _reorder(model, "v_pin", v_pin, "Pinocchio velocity", False)


def tau_to_pinocchio(model: Model, tau) -> np.ndarray:
    """Joint forces (..., nv) in Pinocchio's order (the free joint's wrench becomes ``[f; n]``)."""
    return _reorder(model, "tau", tau, "joint forces", True)


def tau_from_pinocchio(model: Model, tau_pin) -> np.ndarray:
    """Joint forces (..., nv) from Pinocchio's order."""
    return _reorder(model, "tau_pin", tau_pin, "Pinocchio joint forces", False)


def _swap_halves(name, x, axis):
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim or x.shape[axis] != 6:
        raise ValueError(f"{name}: expected a spatial vector axis of length 6 at axis {axis}, got shape {x.shape}")
    return np.roll(x, 3, axis=axis)


def motion_to_pinocchio(m, axis=-1) -> np.ndarray:
    """Motion vectors ``[omega; v]`` -> ``[v; omega]`` along ``axis`` (use ``axis=-2`` for Jacobian rows)."""
    return _swap_halves("m", m, axis)


def motion_from_pinocchio(m_pin, axis=-1) -> np.ndarray:
    """Motion vectors ``[v; omega]`` -> ``[omega; v]`` along ``axis``."""
    return _swap_halves("m_pin", m_pin, axis)


def force_to_pinocchio(f, axis=-1) -> np.ndarray:
    """Force vectors ``[n; f]`` -> ``[f; n]`` along ``axis``, e.g. ``f_ext`` (..., NB, 6)."""
    return _swap_halves("f", f, axis)


def force_from_pinocchio(f_pin, axis=-1) -> np.ndarray:
    """Force vectors ``[f; n]`` -> ``[n; f]`` along ``axis``."""
    return _swap_halves("f_pin", f_pin, axis)


def jacobian_to_pinocchio(model: Model, J) -> np.ndarray:
    """Jacobian (..., 6, nv) of a motion ``[omega; v]`` -> Pinocchio's rows ``[v; omega]`` and column order."""
    J = np.asarray(J, dtype=float)
    if J.ndim < 2 or J.shape[-2:] != (6, model.nv):
        raise ValueError(f"J: expected shape (..., 6, {model.nv}) (Jacobian of model {model.name!r}), "
                         f"got shape {J.shape}")
    return np.roll(J, 3, axis=-2)[..., _v_permutation(model.joints)]


def jacobian_from_pinocchio(model: Model, J_pin) -> np.ndarray:
    """Inverse of :func:`jacobian_to_pinocchio`."""
    J_pin = np.asarray(J_pin, dtype=float)
    if J_pin.ndim < 2 or J_pin.shape[-2:] != (6, model.nv):
        raise ValueError(f"J_pin: expected shape (..., 6, {model.nv}) (Pinocchio Jacobian of model "
                         f"{model.name!r}), got shape {J_pin.shape}")
    return np.roll(J_pin, 3, axis=-2)[..., np.argsort(_v_permutation(model.joints))]


def derivative_to_pinocchio(model: Model, J) -> np.ndarray:
    """A derivative matrix (..., nv, nv) of a dof vector (``tau``, ``qdd``) with respect to a dof
    vector (``q`` on the tangent space, ``v``, ``a``, ``tau``) -> Pinocchio's rows and columns
    (``computeRNEADerivatives`` / ``computeABADerivatives`` layout)."""
    J = np.asarray(J, dtype=float)
    if J.ndim < 2 or J.shape[-2:] != (model.nv, model.nv):
        raise ValueError(f"J: expected shape (..., {model.nv}, {model.nv}) (derivative matrix of model "
                         f"{model.name!r}), got shape {J.shape}")
    perm = _v_permutation(model.joints)
    return J[..., perm, :][..., perm]


def derivative_from_pinocchio(model: Model, J_pin) -> np.ndarray:
    """Inverse of :func:`derivative_to_pinocchio`."""
    J_pin = np.asarray(J_pin, dtype=float)
    if J_pin.ndim < 2 or J_pin.shape[-2:] != (model.nv, model.nv):
        raise ValueError(f"J_pin: expected shape (..., {model.nv}, {model.nv}) (Pinocchio derivative matrix of "
                         f"model {model.name!r}), got shape {J_pin.shape}")
    inv = np.argsort(_v_permutation(model.joints))
    return J_pin[..., inv, :][..., inv]


def fext_to_pinocchio(model: Model, f_ext):
    """External forces (NB, 6) ``[n; f]`` per body (body frame) -> Pinocchio's list of ``pinocchio.Force``.

    The list has one entry per Pinocchio joint, the universe first (zero), as
    ``pinocchio.rnea`` / ``aba`` take it.  One state only (no batch axes).
    """
    import pinocchio as pin

    f_ext = np.asarray(f_ext, dtype=float)
    if f_ext.shape != (model.nbodies, 6):
        raise ValueError(f"f_ext: expected shape ({model.nbodies}, 6) (one force [n; f] per body of model "
                         f"{model.name!r}), got shape {f_ext.shape}")
    return [pin.Force.Zero()] + [pin.Force(f[3:], f[:3]) for f in f_ext]


# --- models ---------------------------------------------------------------------

_ALIGNED = {"revolute": ("RX", "RY", "RZ"), "continuous": ("RUBX", "RUBY", "RUBZ"),
            "prismatic": ("PX", "PY", "PZ"), "helical": ("HX", "HY", "HZ")}


def _unbounded_unaligned(pin, axis):
    """A ``JointModelRevoluteUnboundedUnaligned`` about ``axis``.

    Pinocchio's Python bindings give this joint no axis constructor; its URDF
    parser builds one for a ``continuous`` joint with a non-aligned axis.
    """
    xyz = " ".join(repr(float(a)) for a in axis)
    xml = ('<robot name="axis"><link name="a"/><link name="b"/><joint name="j" type="continuous">'
           f'<parent link="a"/><child link="b"/><axis xyz="{xyz}"/></joint></robot>')
    return pin.buildModelFromXML(xml).joints[1]


def _pin_composite(pin, parts, where, placements=None):
    """A ``JointModelComposite`` of the Pinocchio joints of ``parts``, each at its placement in the
    previous part's frame (``placements``: Transforms or None, Pinocchio's joint placements)."""
    for j in parts:
        if j.type in ("continuous", "planar", "free", "composite"):
            raise ModelError(f"{where}: a composite joint with a {j.type} part is not exported to Pinocchio "
                             f"(its coordinates inside a JointModelComposite differ from ours)")
    M = [pin.SE3.Identity() if X is None else _se3(pin, X) for X in (placements or (None,) * len(parts))]
    composite = pin.JointModelComposite(_pin_joint(pin, parts[0], where), M[0])
    for j, Mk in zip(parts[1:], M[1:]):
        composite.addJoint(_pin_joint(pin, j, where), Mk)
    return composite


def _pin_joint(pin, joint: Joint, where: str):
    axis = np.array(joint.axis)
    if joint.type == "helical" and joint.translation_axis is not None:
        raise ModelError(f"{where}: a helical joint whose translation axis {joint.translation_axis} differs from "
                         f"its rotation axis has no Pinocchio equivalent")
    if joint.type == "spherical_zyx":
        return pin.JointModelSphericalZYX()
    if joint.type == "translation":
        return pin.JointModelTranslation()
    if joint.type == "universal":
        return pin.JointModelUniversal(np.array(joint.axes[0]), np.array(joint.axes[1]))
    if joint.type == "composite" or joint.type.startswith("spherical_"):
        return _pin_composite(pin, joint.joints, where, getattr(joint, "part_placements", None))
    if joint.type in _ALIGNED:
        aligned = [k for k in range(3) if axis[k] == 1.0]
        if aligned:
            cls = getattr(pin, "JointModel" + _ALIGNED[joint.type][aligned[0]])
            return cls(joint.pitch) if joint.type == "helical" else cls()
        if joint.type == "revolute":
            return pin.JointModelRevoluteUnaligned(axis)
        if joint.type == "continuous":
            return _unbounded_unaligned(pin, axis)
        if joint.type == "prismatic":
            return pin.JointModelPrismaticUnaligned(axis)
        return pin.JointModelHelicalUnaligned(axis, joint.pitch)
    if joint.type == "cylindrical":
        composite = pin.JointModelComposite(pin.JointModelRevoluteUnaligned(axis))
        composite.addJoint(pin.JointModelPrismaticUnaligned(axis))
        return composite
    simple = {"spherical": "JointModelSpherical", "free": "JointModelFreeFlyer", "planar": "JointModelPlanar"}
    if joint.type in simple:
        return getattr(pin, simple[joint.type])()
    raise ModelError(f"{where}: joint type {joint.type!r} has no Pinocchio equivalent")


def _finite_or(x, fill):
    x = np.asarray(x, dtype=float)
    return np.where(np.isfinite(x), x, fill)


def _se3(pin, X):
    R, p = pose(X)
    return pin.SE3(np.array(R), np.array(p))


def to_pinocchio(model: Model):
    """A ``pinocchio.Model`` with the same joints, placements, inertias, limits, frames and gravity.

    Joint ``i + 1`` of the result is body ``i`` of ``model`` (named by
    ``model.joint_names``).  Frames: every joint gets a ``JOINT`` frame, every
    entry of ``model.frames`` becomes a ``BODY`` frame (a body's own frame) or
    an ``OP_FRAME`` on the body's joint.  Infinite limits become Pinocchio's
    ``numpy.finfo(float).max``; the position limits of continuous and planar
    joints (whose Pinocchio coordinates differ) are left unbounded.  The rotor
    inertia ``model.armature`` becomes Pinocchio's ``armature`` (its v order), and
    ``model.world_inertia`` the universe's inertia.
    """
    import pinocchio as pin

    pm = pin.Model()
    pm.name = model.name
    pm.gravity = pin.Motion(np.array(model.gravity, dtype=float), np.zeros(3))
    perm = _v_permutation(model.joints)
    effort = _finite_or(model.effort_limit[perm], _PIN_INF)
    velocity = _finite_or(model.velocity_limit[perm], _PIN_INF)
    joint_ids, joint_frames = [], []
    for i, j in enumerate(model.joints):
        where = f"model {model.name!r}, joint {model.joint_names[i]!r}"
        p = model.parent[i]
        if j.type in ("continuous", "planar"):
            lo, hi = np.full(_pin_nq(j), -_PIN_INF), np.full(_pin_nq(j), _PIN_INF)
        else:
            lo = _finite_or(model.lower[model.q_slice(i)], -_PIN_INF)
            hi = _finite_or(model.upper[model.q_slice(i)], _PIN_INF)
        vs = model.v_slice(i)
        jid = pm.addJoint(0 if p < 0 else joint_ids[p], _pin_joint(pin, j, where), _se3(pin, model.Xtree[i]),
                          model.joint_names[i], effort[vs], velocity[vs], lo, hi)
        m, c, Ic = inertia_components(model.inertia[i])
        pm.appendBodyToJoint(jid, pin.Inertia(float(m), c, Ic), pin.SE3.Identity())
        joint_ids.append(jid)
        joint_frames.append(pm.addJointFrame(jid, 0 if p < 0 else joint_frames[p]))
    for f in model.frames:
        if f.body < 0:              # fixed to the world: on Pinocchio's universe joint and frame
            pm.addFrame(pin.Frame(f.name, 0, 0, _se3(pin, f.X), pin.FrameType.OP_FRAME), False)
            continue
        ftype = pin.FrameType.BODY if f.name == model.body_names[f.body] else pin.FrameType.OP_FRAME
        # Frame.X is frame_X_body, so its pose is the frame's placement in the body (= joint) frame.
        pm.addFrame(pin.Frame(f.name, joint_ids[f.body], joint_frames[f.body], _se3(pin, f.X), ftype), False)
    pm.armature = np.array(model.armature[perm], dtype=float)
    if np.any(model.world_inertia):             # the links welded to the world: the universe's inertia
        m, c, Ic = inertia_components(model.world_inertia)
        pm.inertias[0] = pin.Inertia(float(m), c, Ic)
    return pm


_PIN_TYPES = {
    "revolute": ("JointModelRX", "JointModelRY", "JointModelRZ", "JointModelRevoluteUnaligned"),
    "continuous": ("JointModelRUBX", "JointModelRUBY", "JointModelRUBZ", "JointModelRevoluteUnboundedUnaligned"),
    "prismatic": ("JointModelPX", "JointModelPY", "JointModelPZ", "JointModelPrismaticUnaligned"),
    "helical": ("JointModelHX", "JointModelHY", "JointModelHZ", "JointModelHelicalUnaligned"),
    "spherical": ("JointModelSpherical",),
    "free": ("JointModelFreeFlyer",),
    "planar": ("JointModelPlanar",),
}


def _joint_from_pin(jmodel, q_neutral, where) -> Joint:
    """Our joint for a Pinocchio joint model; axes and pitch are read off its motion subspace."""
    return _joint_from_pin_q(jmodel, q_neutral[jmodel.idx_q:jmodel.idx_q + jmodel.nq], where)


def _joint_from_pin_q(jmodel, q_local, where) -> Joint:
    """:func:`_joint_from_pin` with the joint's own neutral coordinates ``q_local``."""
    name = jmodel.shortname()
    jdata = jmodel.createData()
    jmodel.calc(jdata, q_local)
    S = np.array(jdata.S).reshape(6, jmodel.nv)   # Pinocchio rows: [v; omega]
    for kind, names in _PIN_TYPES.items():
        if name in names:
            if kind in ("revolute", "continuous"):
                return make_joint(kind, S[3:, 0])
            if kind == "prismatic":
                return make_joint(kind, S[:3, 0])
            if kind == "helical":
                return make_joint(kind, S[3:, 0], float(S[:3, 0] @ S[3:, 0]))
            return make_joint(kind)
    simple = {"JointModelSphericalZYX": "spherical_zyx", "JointModelTranslation": "translation"}
    if name in simple:
        return make_joint(simple[name])
    if name == "JointModelUniversal":
        inner = jmodel.extract() if hasattr(jmodel, "extract") else jmodel
        return make_joint("universal", axes=(np.array(inner.axis1), np.array(inner.axis2)))
    if name == "JointModelComposite":
        inner = jmodel.extract() if hasattr(jmodel, "extract") else jmodel
        kinds = [j.shortname() for j in inner.joints]
        aligned = all(np.allclose(P.homogeneous, np.eye(4), atol=1e-12) for P in inner.jointPlacements)
        if (len(kinds) == 2 and kinds[0] in _PIN_TYPES["revolute"] and kinds[1] in _PIN_TYPES["prismatic"]
                and aligned and np.allclose(S[3:, 0], S[:3, 1], atol=1e-12)):
            return make_joint("cylindrical", S[3:, 0])
        parts, k = [], 0
        for j in inner.joints:
            parts.append(_joint_from_pin_q(j, q_local[k:k + j.nq], where))
            k += j.nq
        if any(p.type in ("continuous", "planar", "free") for p in parts):
            raise ModelError(f"{where}: a Pinocchio composite joint with a {kinds} part has no sparsedyn "
                             f"equivalent (its coordinates differ)")
        order = "".join("xyz"[int(np.argmax(p.axis))] if p.type == "revolute" and max(p.axis) == 1.0 else "?"
                        for p in parts)
        if aligned and "spherical_" + order in JOINT_TYPES:          # our Euler-angle joints are written so
            return make_joint("spherical_" + order)
        placements = [from_pose(np.array(P.rotation), np.array(P.translation)) for P in inner.jointPlacements]
        return make_joint("composite", joints=parts, placements=None if aligned else placements)
    raise ModelError(f"{where}: Pinocchio joint {name} has no sparsedyn equivalent")


def _limits(x):
    """Pinocchio's limit vectors with its huge sentinels mapped back to infinity."""
    x = np.array(x, dtype=float)
    return np.where(x >= 1e300, np.inf, np.where(x <= -1e300, -np.inf, x))


def from_pinocchio(pin_model, name=None) -> Model:
    """A :class:`~sparsedyn.model.Model` of a ``pinocchio.Model``.

    Supported joints: revolute (RX/RY/RZ/unaligned), unbounded revolute
    (continuous), prismatic, helical, spherical, free flyer, planar, SphericalZYX,
    Translation, Universal and composite joints (with their parts' placements;
    the revolute+prismatic one of :func:`to_pinocchio` becomes cylindrical, three revolute
    joints about frame axes an Euler-angle spherical joint).  Body
    ``i`` is Pinocchio's joint ``i + 1``; a body is named after the first
    ``BODY`` frame placed at its joint frame (else after its joint).  Other
    ``OP_FRAME``/``BODY``/``SENSOR`` frames become named frames (the first of
    a name wins); ``JOINT``/``FIXED_JOINT`` frames and frames fixed to the
    universe are dropped; the universe's inertia becomes ``model.world_inertia``.  Pinocchio's joints must be in depth-first order, so
    that both models share their q and v layouts.  Pinocchio's ``armature``
    becomes ``model.armature``.
    """
    import pinocchio as pin

    q0 = pin.neutral(pin_model)
    NJ = pin_model.njoints
    joints = [_joint_from_pin(pin_model.joints[i], q0, f"joint {pin_model.names[i]!r}") for i in range(1, NJ)]
    body_of = {}
    for f in pin_model.frames:
        if (f.type == pin.FrameType.BODY and f.parentJoint > 0 and f.parentJoint not in body_of
                and np.allclose(f.placement.homogeneous, np.eye(4), atol=1e-12)):
            body_of[f.parentJoint] = f.name
    bodies = [body_of.get(i, pin_model.names[i]) for i in range(1, NJ)]
    inv = np.argsort(_v_permutation(joints))
    effort = _limits(pin_model.effortLimit)[inv]
    velocity = _limits(pin_model.velocityLimit)[inv]
    lower, upper = _limits(pin_model.lowerPositionLimit), _limits(pin_model.upperPositionLimit)
    b = ModelBuilder(name or pin_model.name or "model", gravity=np.array(pin_model.gravity.linear))
    U = pin_model.inertias[0]
    b.add_world_inertia(mcI(U.mass, np.array(U.lever), np.array(U.inertia)))
    v0 = 0
    for i, j in enumerate(joints, start=1):
        jm = pin_model.joints[i]
        qs = slice(jm.idx_q, jm.idx_q + jm.nq)
        limited = j.type not in ("continuous", "planar")
        M = pin_model.jointPlacements[i]
        I = pin_model.inertias[i]
        p = pin_model.parents[i]
        b.add_body(bodies[i - 1], None if p == 0 else bodies[p - 1], j,
                   from_pose(np.array(M.rotation), np.array(M.translation)),
                   mcI(I.mass, np.array(I.lever), np.array(I.inertia)), joint_name=pin_model.names[i],
                   lower=lower[qs] if limited else None, upper=upper[qs] if limited else None,
                   velocity_limit=velocity[v0:v0 + j.nv], effort_limit=effort[v0:v0 + j.nv])
        v0 += j.nv
    used = set(bodies)
    skip = (pin.FrameType.JOINT, pin.FrameType.FIXED_JOINT)
    for f in pin_model.frames:
        if f.type in skip or f.parentJoint == 0 or f.name in used:
            continue
        used.add(f.name)
        b.add_frame(f.name, bodies[f.parentJoint - 1],
                    from_pose(np.array(f.placement.rotation), np.array(f.placement.translation)))
    model = b.build()
    armature = np.array(pin_model.armature, dtype=float)[inv]
    if np.any(armature):
        model = model.with_armature(armature)
    if model.joint_names != tuple(pin_model.names[1:]):
        raise ModelError(f"Pinocchio model {pin_model.name!r}: joints are not in depth-first order, so the "
                         f"q and v layouts of the two models would differ")
    return model

