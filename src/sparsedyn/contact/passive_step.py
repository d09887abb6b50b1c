"""The joints' springs and dampers in the simulator's step (``passive=True``).

:func:`~sparsedyn.contact_step`, :func:`~sparsedyn.rollout` and
:func:`~sparsedyn.contact_step_derivatives` with ``passive=True`` add the model's passive joint
forces (:func:`~sparsedyn.passive_forces`: ``-stiffness (q (-) q_s) - damping v``) to the joint
forces given, at the state the step starts from: explicit, as MuJoCo's Euler integrator with its
implicit damping switched off (``mjDSBL_EULERDAMP``), so stable while ``damping dt`` is small beside
each dof's inertia and ``stiffness dt^2`` beside it too.  The step's derivatives take them by the chain
rule: ``d/dq += d/dtau dtau_p/dq``, ``d/dv += d/dtau dtau_p/dv``.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..algorithms.passive import passive_forces, passive_forces_derivatives
from .friction_problem import _model_and_kernels

__all__ = ["passive_flag", "with_passive", "passive_derivatives"]


def passive_flag(who, passive):
    """``passive`` checked: True or False (a ``TypeError`` naming ``who`` for anything else)."""
    if passive is True or passive is False:
        return passive
    if isinstance(passive, np.bool_):
        return bool(passive)
    raise TypeError(f"{who}: passive must be True or False (add the model's joint springs and dampers), "
                    f"got {passive!r}")


def with_passive(who, model, q, v, tau):
    """``tau + tau_p(q, v)`` (..., nv): the joint forces ``tau`` (..., nv) of the step plus the passive
    forces of ``model`` (a :class:`~sparsedyn.Model`) at ``q`` (..., nq), ``v`` (..., nv)."""
    tau = _checks.plain_floats(who, "tau", tau, f"(..., {model.nv})")
    if tau.shape[-1:] != (model.nv,):
        raise ValueError(f"{who}: tau must have shape (..., {model.nv}) (one force a dof), got {tau.shape}")
    q = _checks.plain_floats(who, "q", q, f"(..., {model.nq})")
    v = _checks.plain_floats(who, "v", v, f"(..., {model.nv})")
    return tau + passive_forces(model, q, v)


def passive_derivatives(derivatives, model, q, v, tau, contacts, dt, options):
    """``derivatives(model, q, v, tau + tau_p, contacts, dt, **options)`` (:func:`~sparsedyn.contact_step_derivatives`
    of the step whose joint forces hold the passive ones, :func:`with_passive`) with the passive forces'
    own dependence on ``q`` and ``v`` added (``model``: a model or ``sd.compile(model)``)."""
    who = "contact_step_derivatives"
    inner = _model_and_kernels(model, who)[0]
    d = derivatives(model, q, v, with_passive(who, inner, q, v, tau), contacts, dt, **options)
    Pq, Pv = passive_forces_derivatives(inner, np.asarray(q, float), np.asarray(v, float))
    return d._replace(dv_dq=d.dv_dq + d.dv_dtau @ Pq, dq_dq=d.dq_dq + d.dq_dtau @ Pq,
                      dv_dv=d.dv_dv + d.dv_dtau @ Pv, dq_dv=d.dq_dv + d.dq_dtau @ Pv)
