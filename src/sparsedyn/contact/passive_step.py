"""The joints' springs and dampers in the simulator's step (``passive=True`` or ``"implicit"``).

:func:`~sparsedyn.contact_step`, :func:`~sparsedyn.rollout` and
:func:`~sparsedyn.contact_step_derivatives` with ``passive=True`` add the model's passive joint
forces (:func:`~sparsedyn.passive_forces`: ``-stiffness (q (-) q_s) - damping v``) to the joint
forces given, at the state the step starts from: explicit, as MuJoCo's Euler integrator with its
implicit damping switched off (``mjDSBL_EULERDAMP``), so stable while ``damping dt`` is small beside
each dof's inertia and ``stiffness dt^2`` beside it too.  The step's derivatives take them by the chain
rule: ``d/dq += d/dtau dtau_p/dq``, ``d/dv += d/dtau dtau_p/dv``.

With ``passive="implicit"`` the dampers act at the velocity the step ends with, as in MuJoCo's default
Euler integrator: ``(H + dt D) (v+ - v) = dt (tau + tau_p - C) + J^T lambda`` (``D`` the dampers,
diagonal), which takes any damping without growing (a hinge alone: ``v+ = v I / (I + dt d)``).  ``dt D``
adds to the mass matrix as a rotor inertia does, so the step is that of the model whose ``armature`` holds
``dt D`` more (:func:`implicit_damping`: one such model per ``dt``, kept as long as the model lives, with
kernels of its own, built on first use as any model's), its contact impulses solved with that mass
matrix (MuJoCo solves its constraints with ``H`` and adds ``dt D`` after: the two differ only while a
contact acts).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..algorithms.passive import passive_forces, passive_forces_derivatives
from ..model.joints import Joint
from ..model.topology import model_store
from .friction_problem import _model_and_kernels, _positive
from .scene import Scene
from .scene_step import _same_model

__all__ = ["passive_flag", "with_passive", "passive_inputs", "implicit_damping", "passive_derivatives",
           "vector_springs"]

#: ``passive``'s value that takes the dampers at the step's end velocity.
IMPLICIT = "implicit"
#: The most time steps whose implicitly damped models one model keeps (each holds kernels of its own).
MOST_STEPS = 8


def passive_flag(who, passive):
    """``passive`` checked: True, False or :data:`IMPLICIT` (a ``TypeError`` naming ``who`` for anything
    else)."""
    if passive is True or passive is False:
        return passive
    if isinstance(passive, np.bool_):
        return bool(passive)
    if isinstance(passive, str) and passive == IMPLICIT:
        return IMPLICIT
    raise TypeError(f"{who}: passive must be True or False (add the model's joint springs and dampers) or "
                    f"{IMPLICIT!r} (with the dampers taken at the step's end velocity), got {passive!r}")


def passive_inputs(who, model, q, v, tau, contacts, dt, passive):
    """``(model, tau, contacts)`` of a step with ``passive`` (:func:`passive_flag`'s values): ``tau`` plus
    the passive forces (:func:`with_passive`), and with :data:`IMPLICIT` :func:`implicit_damping`'s model
    and contacts; the arguments as given where ``passive`` is False."""
    if not (passive := passive_flag(who, passive)):
        return model, tau, contacts
    inner = _model_and_kernels(model, who)[0]
    tau = with_passive(who, inner, q, v, tau)
    if passive == IMPLICIT:
        model, contacts = implicit_damping(who, inner, contacts, dt)
    return model, tau, contacts


def implicit_damping(who, model, contacts, dt):
    """``(model_d, contacts_d)``: the :class:`~sparsedyn.Model` whose armature is ``model``'s plus ``dt``
    times its dampers (its mass matrix ``H + dt D``) and ``contacts`` for it (a
    :class:`~sparsedyn.Scene` the same scene on ``model_d``; a list as it is), each made once per ``dt``
    (``model_store(model)`` and ``Scene.cache``); ``model`` itself where no dof is damped."""
    dt = _positive(who, "dt", dt)
    damping = model.joint_dynamics.damping
    if not damping.any():
        return model, contacts
    store = model_store(model, "implicit damping")
    variant = store.get(dt)
    if variant is None:
        if len(store) >= MOST_STEPS:
            store.clear()
        variant = store[dt] = model.with_armature(model.armature + dt * damping)
    if isinstance(contacts, Scene):
        if not _same_model(model, contacts.model):      # (the step says that the scene is another model's)
            return model, contacts
        key = ("implicit damping", dt)
        scene = contacts.cache.get(key)
        if scene is None or scene.model is not variant:
            scene = contacts.cache[key] = contacts._on_model(variant)
        contacts = scene
    return variant, contacts


def with_passive(who, model, q, v, tau):
    """``tau + tau_p(q, v)`` (..., nv): the joint forces ``tau`` (..., nv) of the step plus the passive
    forces of ``model`` (a :class:`~sparsedyn.Model`) at ``q`` (..., nq), ``v`` (..., nv)."""
    tau = _checks.plain_floats(who, "tau", tau, f"(..., {model.nv})")
    if tau.shape[-1:] != (model.nv,):
        raise ValueError(f"{who}: tau must have shape (..., {model.nv}) (one force a dof), got {tau.shape}")
    q = _checks.plain_floats(who, "q", q, f"(..., {model.nq})")
    v = _checks.plain_floats(who, "v", v, f"(..., {model.nv})")
    return tau + passive_forces(model, q, v)


def passive_derivatives(derivatives, model, q, v, tau, contacts, dt, options, passive=True):
    """``derivatives(model, q, v, tau + tau_p, contacts, dt, **options)`` (:func:`~sparsedyn.contact_step_derivatives`
    of the step of :func:`passive_inputs`: its joint forces hold the passive ones, and with ``passive``
    :data:`IMPLICIT` the model is :func:`implicit_damping`'s) with the passive forces' own dependence on
    ``q`` and ``v`` added (``model``: a model or ``sd.compile(model)``)."""
    who = "contact_step_derivatives"
    inner = _model_and_kernels(model, who)[0]
    model, tau, contacts = passive_inputs(who, model, q, v, tau, contacts, dt, passive)
    d = derivatives(model, q, v, tau, contacts, dt, **options)
    Pq, Pv = passive_forces_derivatives(inner, np.asarray(q, float), np.asarray(v, float))
    return d._replace(dv_dq=d.dv_dq + d.dv_dtau @ Pq, dq_dq=d.dq_dq + d.dq_dtau @ Pq,
                      dv_dv=d.dv_dv + d.dv_dtau @ Pv, dq_dv=d.dq_dv + d.dq_dtau @ Pv)


def vector_springs(model):
    """``(D (nv,), iq (k,), iv (k,), K (k,), qs (k,))``: the dampers of ``model`` and its sprung dofs (int64
    indices into ``q`` and ``v``, stiffness, rest position), what a rollout's steps in one native call add to
    their joint forces (:func:`~sparsedyn.contact.scene_fused.chained_steps`), where every sprung joint is a
    vector joint (its stretch ``q - q_s``); None where one is not (a ball's or a free joint's spring: each
    step's forces from :func:`with_passive` then)."""
    jd, iq, iv = model.joint_dynamics, [], []
    for i, j in enumerate(model.joints):
        vs, qs = model.v_slice(i), model.q_slice(i)
        k = np.flatnonzero(jd.stiffness[vs])
        if len(k) and not _vector(j):
            return None
        iq += [qs.start + x for x in k]
        iv += [vs.start + x for x in k]
    iq, iv = np.array(iq, np.int64), np.array(iv, np.int64)
    return jd.damping, iq, iv, jd.stiffness[iv], jd.spring_reference[iq]


def _vector(joint):
    """Whether ``joint``'s :meth:`~sparsedyn.model.joints.Joint.difference` is ``q1 - q0`` (a vector joint,
    or a composite of them, whose difference is its parts' side by side)."""
    if joint.type == "composite":
        return all(_vector(j) for j in joint.joints)
    return joint.nq == joint.nv and type(joint).difference is Joint.difference
