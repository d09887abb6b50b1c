"""Editing models: lock joints (:func:`reduce_model`) and attach one model to another (:func:`append_model`).

Both return a new frozen :class:`~sparsedyn.model.Model`; the input is not changed.  Both belong to
the model layer: they know topology and constant parameters, nothing about states or algorithms.

Locking (Pinocchio's ``buildReducedModel``)
-------------------------------------------
Locking joint ``i`` at the value ``q_ref`` gives it for good fixes its transform ``XJ(q_ref_i)``, so
body ``i`` is rigidly attached to its parent: it is merged into the nearest kept ancestor (its *host*)
exactly as a URDF ``fixed`` joint is merged (:mod:`sparsedyn.io.urdf`):

* the host's inertia gains ``X^T I_i X`` (``X = i_X_host`` at ``q_ref``; exact, 10 parameters);
* children of a locked body are re-attached to the host with the composed ``Xtree``;
* the locked body's own frame and its named frames stay, as frames on the host (same names);
* the locked joint becomes a :class:`~sparsedyn.model.FixedJoint` (so a
  :class:`~sparsedyn.model.sensors.ForceTorque` sensor on it keeps working), and fixed joints recorded
  on merged bodies are re-attached to the host;
* the locked dofs' armature, limits and passive joint data are dropped; the kept joints keep theirs;
* visual and collision shapes (``model.geometries``) move with their bodies (to the world when the
  chain is locked all the way down).

A body whose chain to the world is locked all the way is welded to the fixed world, as Pinocchio's
``buildReducedModel`` welds it to the universe: its inertia goes to ``model.world_inertia`` (no part
in any dynamics), its frames stay as frames fixed to the world (``Frame.body == -1``), and a fixed
joint whose parent side is the world is dropped.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _checks
from .builders import as_transform
from .model import FixedJoint, Frame, JointDynamics, Mimic, Model, ModelError
from .spatial import compose, identity, rigid_inertia, rigid_inertia_matrix, rigid_transform

__all__ = ["reduce_model", "append_model", "ReductionWarning"]


class ReductionWarning(UserWarning):
    """A model entry (sensor, mimic coupling, frame) that :func:`reduce_model` had to change or drop."""


def _joint_indices(model, joints):
    """Body indices of the joints named in ``joints`` (a name or an iterable of names), sorted; the
    free-floating base refused."""
    out = model.joint_indices(joints, "reduce_model")
    for i in out:
        if model.joints[i].type == "free":
            raise ModelError(f"reduce_model: joint {model.joint_names[i]!r} is the free-floating base of model "
                             f"{model.name!r}; locking it would weld the robot to the world: load the model with "
                             f"floating_base=False instead")
    return sorted(out)


def _inertia_in(X, I):
    """``X^T I X``: a rigid-body inertia (6, 6) of frame B re-expressed in A for ``X = B_X_A``."""
    return rigid_inertia_matrix(rigid_transform(X, rigid_inertia(I)))


def reduce_model(model: Model, joints, q_ref=None) -> Model:
    """``model`` with ``joints`` (names) locked at their values in ``q_ref`` (nq,) (default: the
    neutral configuration), as Pinocchio's ``buildReducedModel``.

    Returns a new :class:`~sparsedyn.model.Model` whose q and v hold the kept joints in their original
    order (``q_ref[keep]`` of the old layout, see :attr:`~sparsedyn.Model.joint_names`).  See the
    module docstring for what happens to bodies, inertias, frames and fixed joints.  Sensors that
    name a locked joint: a :class:`~sparsedyn.model.sensors.ForceTorque` sensor stays (the joint is now a
    fixed joint); joint torque / acceleration sensors lose the locked joints (a sensor left with no
    joint is dropped) with a :class:`ReductionWarning`.  Mimic couplings that involve a locked joint
    are dropped with a warning.  Frames and sensors keep their names, so a
    :class:`~sparsedyn.constraints.ConstraintSet` (which binds its model when it is built, in a layer
    above this one) is rebuilt on the reduced model with the same arguments.

    ``reduce_model(model, [])`` is a copy of ``model`` with the same dynamics.  Locking the free
    joint of a floating base is refused (load the model with ``floating_base=False``).
    """
    _checks.model_first("reduce_model", model, "model, joints")
    locked = _joint_indices(model, joints)
    q_ref = model.neutral() if q_ref is None else _checks.configuration(model, q_ref, "q_ref")
    q_ref = np.asarray(q_ref, float)
    if q_ref.shape != (model.nq,):
        raise ValueError(f"q_ref: expected one configuration of shape ({model.nq},), got shape {q_ref.shape}")
    NB = model.nbodies
    is_locked = np.zeros(NB, bool)
    is_locked[locked] = True
    host, X, Xup = _hosts(model, is_locked, q_ref)
    keep = [k for k in range(NB) if not is_locked[k]]
    new = {k: n for n, k in enumerate(keep)}

    inertia = np.array(model.inertia, float)
    world_inertia = np.array(model.world_inertia, float)
    for k in locked:
        if host[k] >= 0:
            inertia[host[k]] = inertia[host[k]] + _inertia_in(X[k], model.inertia[k])
        else:
            world_inertia = world_inertia + _inertia_in(X[k], model.inertia[k])
    # a frame of a body welded to the world stays, as a world frame (X: frame_X_world)
    frames = [f if f.body < 0 else Frame(f.name, -1 if host[f.body] < 0 else new[host[f.body]],
                                         compose(f.X, X[f.body])) for f in model.frames]
    welded_frames = [f.name for f in model.frames if f.body >= 0 and host[f.body] < 0]

    fixed = _reduced_fixed_joints(model, locked, is_locked, host, X, Xup, keep, new)

    parent, Xtree = [], []
    for k in keep:
        p = model.parent[k]
        parent.append(-1 if p < 0 or host[p] < 0 else new[host[p]])
        Xtree.append(model.Xtree[k] if p < 0 else compose(model.Xtree[k], X[p]))
    qs = np.concatenate([np.arange(model.nq)[model.q_slice(k)] for k in keep]).astype(int) if keep else \
        np.zeros(0, int)
    vs = np.concatenate([np.arange(model.nv)[model.v_slice(k)] for k in keep]).astype(int) if keep else \
        np.zeros(0, int)
    jd = model.joint_dynamics
    mimic = _reduced_mimics(model, is_locked, new)
    locked_names = {model.joint_names[k] for k in locked}
    sensors = _reduced_sensors(model, locked_names, set(welded_frames))
    geometries = tuple(g if g.body < 0 else g._replace(body=-1 if host[g.body] < 0 else new[host[g.body]],
                                                         X=compose(g.X, X[g.body]))
                       for g in model.geometries)
    return Model(
        name=model.name, body_names=tuple(model.body_names[k] for k in keep),
        joint_names=tuple(model.joint_names[k] for k in keep), parent=np.array(parent, int),
        joints=tuple(model.joints[k] for k in keep), Xtree=tuple(Xtree), inertia=inertia[keep].reshape(-1, 6, 6),
        frames=tuple(frames), gravity=model.gravity, lower=model.lower[qs], upper=model.upper[qs],
        velocity_limit=model.velocity_limit[vs], effort_limit=model.effort_limit[vs], mimic=tuple(mimic),
        root_name=model.root_name, sensors=sensors, fixed_joints=tuple(fixed), armature=model.armature[vs],
        joint_dynamics=JointDynamics(jd.damping[vs], jd.stiffness[vs], jd.frictionloss[vs],
                                     jd.spring_reference[qs], jd.reference[qs]), geometries=geometries,
        world_inertia=world_inertia)


def _hosts(model, is_locked, q_ref):
    """``(host, X, Xup)`` by body ``k``: the kept body ``k`` ends up in (-1: the world), ``X[k] =
    k_X_host`` and, for a locked ``k``, ``Xup[k] = k_X_parent``, at ``q_ref``."""
    NB = model.nbodies
    host, X, Xup = [0] * NB, [None] * NB, [None] * NB
    for k in range(NB):
        p = model.parent[k]
        if not is_locked[k]:
            host[k], X[k] = k, identity()
            continue
        XJ, _ = model.joints[k].jcalc(q_ref[model.q_slice(k)])
        Xup[k] = compose(XJ, model.Xtree[k])                       # k_X_parent at q_ref
        host[k] = -1 if p < 0 else host[p]
        X[k] = Xup[k] if p < 0 else compose(Xup[k], X[p])
    return host, X, Xup


def _reduced_fixed_joints(model, locked, is_locked, host, X, Xup, keep, new) -> list:
    """The reduced model's fixed joints: the model's own and the locked joints, on their hosts, with
    the inertias, child bodies and frames of the links merged across them."""

    def merged(c):
        """Body ``c`` and its descendants reached through locked joints only (they share c's host)."""
        out = [c]
        for k in range(c + 1, model.subtree_end[c]):
            if is_locked[k] and model.parent[k] in out:
                out.append(k)
        return out

    def frames_of(bodies):
        return tuple(f.name for f in model.frames if f.body in bodies)

    fixed = []
    records = [(fj.name, fj.body, fj.X, fj.inertia, fj.children, fj.frames) for fj in model.fixed_joints]
    for k in locked:                                 # a locked joint is a fixed joint between parent and k
        if model.parent[k] >= 0:
            records.append((model.joint_names[k], int(model.parent[k]), Xup[k], np.zeros((6, 6)), (k,), ()))
    for name, b, Xj, I_cs, children, fnames in records:
        h = host[b]
        if h < 0:
            continue
        I_new = _inertia_in(X[b], I_cs) if np.any(I_cs) else np.zeros((6, 6))
        kids, fnames = [], list(fnames)
        for c in children:
            if not is_locked[c]:
                kids.append(new[c])
                continue
            M = merged(c)
            for m in M:
                I_new = I_new + _inertia_in(X[m], model.inertia[m])
            kids += [new[k] for k in keep if model.parent[k] in M]
            fnames += list(frames_of(M))
        fixed.append(FixedJoint(name, new[h], compose(Xj, X[b]), I_new, tuple(kids), tuple(fnames)))
    return fixed


def _reduced_mimics(model, is_locked, new) -> list:
    """The mimic couplings between kept joints (renumbered); the others are dropped with a warning."""
    mimic = []
    for m in model.mimic:
        if is_locked[m.joint] or is_locked[m.mimicked]:
            warnings.warn(f"reduce_model: the mimic coupling of joint {model.joint_names[m.joint]!r} on "
                          f"{model.joint_names[m.mimicked]!r} involves a locked joint; it is dropped",
                          ReductionWarning, stacklevel=_checks.user_stacklevel())
        else:
            mimic.append(Mimic(new[m.joint], new[m.mimicked], m.multiplier, m.offset))
    return mimic


def _reduced_sensors(model, locked_names, welded_frames):
    """The model's sensors for the reduced model (see :func:`reduce_model`)."""
    import copy
    out = []
    for x in model.sensors:
        if getattr(x, "frame", None) in welded_frames:
            raise ModelError(f"reduce_model: sensor {x.name!r} is on frame {x.frame!r}, which the locked joints "
                             f"weld to the world; remove the sensor (model.sensors) or lock fewer joints")
        names = getattr(x, "joints", None)
        if names is None or not any(n in locked_names for n in names):
            out.append(x)
            continue
        gone = [n for n in names if n in locked_names]
        left = [n for n in names if n not in locked_names]
        warnings.warn(f"reduce_model: sensor {x.name!r} measured the locked joint(s) {gone}; "
                      + (f"it keeps {left}" if left else "it is dropped"), ReductionWarning,
                      stacklevel=_checks.user_stacklevel())
        if left:
            y = copy.copy(x)
            y.joints = left
            out.append(y)
    return tuple(out)


def append_model(model: Model, other: Model, frame=None, placement=None, prefix: str = "") -> Model:
    """``model`` with ``other``'s tree attached at ``frame`` (Pinocchio's ``appendModel``).

    ``frame``: a frame of ``model`` (name or index), or ``None`` / ``model.root_name`` for the world.
    ``placement``: the pose of ``other``'s world frame in ``frame``, a pose pair ``(R, p)``, a 4 x 4
    homogeneous matrix or a :class:`~sparsedyn.model.spatial.Transform` (default the identity; a matrix
    that is not a rotation is refused).  ``prefix`` is put in front of every body, joint, frame,
    fixed-joint and sensor name of ``other``; names that still clash raise :class:`ModelError`
    listing them.

    The result keeps ``model``'s name, gravity and root name; ``other``'s bodies follow the subtree
    of ``frame``'s body (depth-first order), so ``model``'s bodies before them keep their q and v
    slices.  ``other``'s limits, armature, passive joint data, mimic couplings, fixed joints and
    sensors come along (renamed); a free joint of ``other`` stays free (a mobile manipulator on a
    floating base, for instance).  What ``other`` welds to its world (its ``world_inertia``, the
    root link of a fixed-base arm, and its frames fixed to the world) is welded to ``frame``'s body,
    as Pinocchio's ``appendModel`` does with the universe's inertia and frames.
    """
    _checks.model_first("append_model", model, "model, other")
    if not isinstance(other, Model):
        raise TypeError(f"other: expected a Model, got {type(other).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"append_model: prefix: expected a string put in front of the appended names, got "
                        f"{type(prefix).__name__} {str(prefix)[:60]!r}")
    body, X_att = _attachment(model, frame, placement)
    ren = (lambda n: prefix + n) if prefix else (lambda n: n)
    _refuse_name_clashes(model, other, ren)
    NA, NO = model.nbodies, other.nbodies
    at = NA if body < 0 else int(model.subtree_end[body])       # other's bodies are inserted here
    old_a = list(range(at)) + list(range(at + NO, NA + NO))
    idx_a = np.array(old_a, int)                                  # model's body k -> new index idx_a[k]
    idx_o = np.arange(at, at + NO)
    N = NA + NO
    parent = np.zeros(N, int)
    Xtree, joints = [None] * N, [None] * N
    body_names, joint_names = [None] * N, [None] * N
    inertia = np.zeros((N, 6, 6))
    for appended, src, idx, rn in ((False, model, idx_a, lambda n: n), (True, other, idx_o, ren)):
        for k in range(src.nbodies):
            n, p = idx[k], src.parent[k]
            parent[n] = idx[p] if p >= 0 else -1
            Xtree[n] = src.Xtree[k]
            if appended and p < 0:
                parent[n] = -1 if body < 0 else idx_a[body]
                Xtree[n] = compose(src.Xtree[k], X_att)
            joints[n], inertia[n] = src.joints[k], src.inertia[k]
            body_names[n], joint_names[n] = rn(src.body_names[k]), rn(src.joint_names[k])

    def cat(fa, fo, size):      # per-q or per-v arrays, in the new body order
        return _in_body_order(((model, idx_a, fa), (other, idx_o, fo)), N, size)

    # other's world is welded to `body` (model's world when body < 0) at X_att = other-world_X_body
    at_body = body if body < 0 else int(idx_a[body])
    frames = [f if f.body < 0 else Frame(f.name, int(idx_a[f.body]), f.X) for f in model.frames]
    frames += [Frame(ren(f.name), at_body, compose(f.X, X_att)) if f.body < 0 else
               Frame(ren(f.name), int(idx_o[f.body]), f.X) for f in other.frames]
    welded = _inertia_in(X_att, other.world_inertia)
    world_inertia = np.array(model.world_inertia, float)
    if body < 0:
        world_inertia = world_inertia + welded
    else:
        inertia[at_body] = inertia[at_body] + welded
    fixed, mimic, geometries = _renumbered_records(model, other, idx_a, idx_o, at_body, X_att, ren)
    ja, jo = model.joint_dynamics, other.joint_dynamics
    jd = JointDynamics(*(cat(a, o, "v" if i < 3 else "q") for i, (a, o) in enumerate(zip(ja, jo))))
    return Model(
        name=model.name, body_names=tuple(body_names), joint_names=tuple(joint_names), parent=parent,
        joints=tuple(joints), Xtree=tuple(Xtree), inertia=inertia, frames=tuple(frames), gravity=model.gravity,
        lower=cat(model.lower, other.lower, "q"), upper=cat(model.upper, other.upper, "q"),
        velocity_limit=cat(model.velocity_limit, other.velocity_limit, "v"),
        effort_limit=cat(model.effort_limit, other.effort_limit, "v"), mimic=tuple(mimic), root_name=model.root_name,
        sensors=model.sensors + tuple(_renamed_sensor(x, ren) for x in other.sensors), fixed_joints=tuple(fixed),
        armature=cat(model.armature, other.armature, "v"), joint_dynamics=jd, geometries=geometries,
        world_inertia=world_inertia)


def _attachment(model, frame, placement):
    """``(body, X_att)``: the body of ``model`` the appended model's world is welded to (-1: the
    world) and ``X_att = other-world_X_body`` (see :func:`append_model`)."""
    X_place = as_transform(placement, "append_model: placement")
    if frame is None or frame == model.root_name:
        return -1, X_place                           # other's world in model's world
    f = model.frames[model.frame(frame)]
    return f.body, compose(X_place, f.X)             # other-world_X_body


def _refuse_name_clashes(model, other, ren):
    """:class:`ModelError` listing the names of ``model`` that ``other``'s (renamed by ``ren``) repeat."""
    clashes = []
    for what, mine, theirs in (("body", model.body_names, other.body_names),
                               ("joint", model.joint_names + tuple(fj.name for fj in model.fixed_joints),
                                other.joint_names + tuple(fj.name for fj in other.fixed_joints)),
                               ("frame", model.frame_names, other.frame_names),
                               ("sensor", tuple(x.name for x in model.sensors), tuple(x.name for x in other.sensors))):
        both = sorted(set(mine) & {ren(n) for n in theirs})
        if both:
            clashes.append(f"{what}s {', '.join(map(repr, both[:8]))}" + (" ..." if len(both) > 8 else ""))
    if clashes:
        raise ModelError(f"append_model: models {model.name!r} and {other.name!r} share the names of "
                         f"{'; '.join(clashes)}; pass prefix= to rename the appended model's names")


def _in_body_order(sources, N, size):
    """One per-q (``size="q"``) or per-v array of ``N`` bodies from ``sources``, triples ``(model,
    new index of each of its bodies, its array)``."""
    parts = [None] * N
    for src, idx, x in sources:
        for k in range(src.nbodies):
            sl = src.q_slice(k) if size == "q" else src.v_slice(k)
            parts[idx[k]] = np.asarray(x)[sl]
    return np.concatenate(parts) if parts else np.zeros(0)


def _renumbered_records(model, other, idx_a, idx_o, at_body, X_att, ren):
    """``(fixed joints, mimic couplings, geometries)`` of both models on the new body numbers
    (``idx_a``, ``idx_o``), ``other``'s renamed by ``ren`` and its world's welded to ``at_body``."""
    fixed = [fj._replace(body=int(idx_a[fj.body]), children=tuple(int(idx_a[c]) for c in fj.children))
             for fj in model.fixed_joints]
    fixed += [fj._replace(name=ren(fj.name), body=int(idx_o[fj.body]), children=tuple(int(idx_o[c]) for c in fj.children),
                          frames=tuple(ren(n) for n in fj.frames)) for fj in other.fixed_joints]
    mimic = [m._replace(joint=int(idx_a[m.joint]), mimicked=int(idx_a[m.mimicked])) for m in model.mimic]
    mimic += [m._replace(joint=int(idx_o[m.joint]), mimicked=int(idx_o[m.mimicked])) for m in other.mimic]
    geometries = tuple(g if g.body < 0 else g._replace(body=int(idx_a[g.body])) for g in model.geometries)
    geometries += tuple(g._replace(name=ren(g.name), **_renamed_filter(g, ren),
                                   **(dict(body=at_body, X=compose(g.X, X_att)) if g.body < 0 else
                                      dict(body=int(idx_o[g.body]))))
                        for g in other.geometries)
    return fixed, mimic, geometries


def _renamed_sensor(x, ren):
    """A copy of sensor ``x`` whose own name and the frame / joint names it refers to get ``ren``."""
    import copy
    y = copy.copy(x)
    y.name = ren(x.name)
    for attr in ("frame", "joint"):
        if getattr(x, attr, None) is not None:
            setattr(y, attr, ren(getattr(x, attr)))
    if getattr(x, "joints", None) is not None:
        y.joints = [ren(n) for n in x.joints]
    return y


def _renamed_filter(g, ren):
    """The collision filter of geometry ``g`` naming the other geometries by their new names."""
    return dict(exclude=tuple(map(ren, g.exclude)), pairs=tuple((ren(n), mu) for n, mu in g.pairs))
