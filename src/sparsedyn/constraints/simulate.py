"""Simulating a constrained mechanism with bounded drift: explicit Runge-Kutta plus projection.

Each step of :func:`simulate` is an explicit Runge-Kutta step on ``(q, v)``
whose stage configurations are reached through ``Model.integrate``
(``q_i = q_n (+) dt sum_j a_ij v_j``), with the accelerations of
:func:`~.forward.constrained_forward_dynamics`.  Two tableaus:

* ``"dop853"`` (default): the 12-stage, order-8 Dormand-Prince scheme (its
  coefficients are taken from ``scipy.integrate.DOP853``), used with a fixed step;
* ``"rk4"``: the classical 4-stage, order-4 scheme.

Then (``project=True``)

* ``q`` is projected back onto ``g(q) = 0`` by the minimum-norm Newton
  correction (:func:`~.assembly.assemble` with every coordinate free), and
* ``v`` onto ``G v = 0`` by the smallest change (:func:`~.assembly.project_velocity`),

so the drift never accumulates: it stays at the Newton tolerance.  The
projections move the state by the local integration error only, so they do not
spoil the energy balance.  Optional Baumgarte terms (``baumgarte=(alpha,
beta)``) act inside the stages (useful without projection).  For revolute,
prismatic, helical and cylindrical joints the schemes have their full order; on
quaternion and planar joints the stage velocities are combined in the tangent
space at ``q_n`` without the ``dexp`` correction, which limits the order to 2
there (the projection still keeps the state on the constraints).

A partition is chosen (pivoted QR) at the start of every step, kept for its
stages and re-chosen if it becomes singular, so a mechanism may pass through
configurations where one fixed choice of dependent coordinates would fail.

Given a compiled constraint set (``sparsedyn.compile(cs)``), a step with constant
``tau`` (or none) and constant ``f_ext`` (or none), with or without Baumgarte
terms, runs as one compiled kernel (every stage, for the partition of the step),
and the projections as one kernel per Newton iteration plus one for the
velocity.  There the partition is kept from step to step while it stays well
conditioned (the kernel checks its inverse at every stage) and chosen again, as
above, where it does not; the accelerations do not depend on the partition when
``G`` has full row rank, so this changes rounding only.  A callable ``tau``, a
Newton iteration needing the step cap or the line search, a failed check and a
Jacobian with redundant rows take the NumPy path, step by step, with the same
results up to rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.energy import mechanical_energy as _mechanical_energy
from ..algorithms.configuration import integrate
from .assembly import newton, project_velocity
from .errors import ConstraintError, PartitionError
from .forward import constrained_forward_dynamics

__all__ = ["Trajectory", "simulate", "mechanical_energy", "rk_step"]


class Trajectory(NamedTuple):
    """States of a simulation: ``t`` (N,), ``q`` (N, nq), ``v`` (N, nv) and the drift per state."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    position_violation: np.ndarray      # (N,) max |g(q)|
    velocity_violation: np.ndarray      # (N,) max |G v|


def mechanical_energy(model, q, v, gravity=None):
    """Kinetic plus potential energy (J) of one state: :func:`sparsedyn.mechanical_energy` as a float."""
    return float(_mechanical_energy(model, q, v, gravity))


def _forces(tau, t, q, v, nv):
    if tau is None:
        return np.zeros(nv)
    return np.asarray(tau(t, q, v) if callable(tau) else tau, float)


class _Accelerations:
    """``a(t, q, v)`` of the constrained dynamics, keeping one partition while it stays valid
    (choosing one costs a few QR decompositions; it only changes near singular configurations)."""

    def __init__(self, cs, tau, f_ext, baumgarte):
        self.cs, self.tau, self.f_ext, self.baumgarte, self.part = cs, tau, f_ext, baumgarte, None

    def __call__(self, t, q, v):
        tau = _forces(self.tau, t, q, v, self.cs.nv)
        if self.part is not None:
            try:
                return constrained_forward_dynamics(self.cs, q, v, tau, f_ext=self.f_ext, baumgarte=self.baumgarte,
                                                    partition=self.part).a
            except PartitionError:
                pass
        out = constrained_forward_dynamics(self.cs, q, v, tau, f_ext=self.f_ext, baumgarte=self.baumgarte)
        self.part = out.partition
        return out.a


def _tableau(method):
    """``(A, b, c)`` of an explicit Runge-Kutta scheme."""
    if method == "rk4":
        A = np.array([[0, 0, 0, 0], [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 1.0, 0]])
        return A, np.array([1, 2, 2, 1]) / 6.0, np.array([0, 0.5, 0.5, 1.0])
    if method == "dop853":
        from scipy.integrate import DOP853
        return np.asarray(DOP853.A, float), np.asarray(DOP853.B, float), np.asarray(DOP853.C, float)
    raise ConstraintError(f"method: expected 'dop853' or 'rk4', got {method!r}")


def rk_step(cs, t, q, v, dt, method="dop853", *, tau=None, f_ext=None, baumgarte=None, acc=None):
    """One explicit Runge-Kutta step of the constrained dynamics from ``(q, v)`` at time ``t`` (no projection).

    ``method``: ``"dop853"`` or ``"rk4"``, or a tableau ``(A, b, c)``.  ``acc``:
    the acceleration function ``acc(t, q, v)`` (default built from ``tau``,
    ``f_ext`` and ``baumgarte`` as in :func:`simulate`).
    """
    model = cs.model
    A, b, c = _tableau(method) if isinstance(method, str) else method
    acc = _Accelerations(cs, tau, f_ext, baumgarte) if acc is None else acc
    V, Acc = [], []
    for i in range(len(b)):
        dq = sum((A[i, j] * V[j] for j in range(i) if A[i, j] != 0), np.zeros(model.nv))
        da = sum((A[i, j] * Acc[j] for j in range(i) if A[i, j] != 0), np.zeros(model.nv))
        qi = q if i == 0 else integrate(model, q, dt * dq)
        vi = v + dt * da
        V.append(vi)
        Acc.append(acc(t + c[i] * dt, qi, vi))
    q_new = integrate(model, q, dt * sum(bi * Vi for bi, Vi in zip(b, V) if bi != 0))
    v_new = v + dt * sum(bi * Ai for bi, Ai in zip(b, Acc) if bi != 0)
    return q_new, v_new


def simulate(cs, q0, v0, t_end, dt, *, method="dop853", tau=None, f_ext=None, baumgarte=None, project=True,
             tol=1e-12, every=1) -> Trajectory:
    """Integrate the constrained dynamics from ``(q0, v0)`` for ``t_end`` seconds with fixed step ``dt``.

    ``method``: ``"dop853"`` (order 8, 12 stages) or ``"rk4"`` (order 4, 4 stages).
    ``tau``: generalised forces (nv,), or a callable ``tau(t, q, v)``; ``f_ext``
    (NB, 6) constant external forces.  ``project``: project ``q`` and ``v`` back
    onto the constraints after every step (to ``tol``); the initial state is
    projected too.  Every ``every``-th state is recorded (the first and last
    always), with its drift ``max |g|`` and ``max |G v|``.  ``cs`` compiled (``sparsedyn.compile(cs)``):
    the steps and projections run as compiled kernels (see the module docstring for which).
    """
    if not dt > 0 or not t_end >= 0:
        raise ConstraintError(f"simulate: need dt > 0 and t_end >= 0, got dt={dt!r}, t_end={t_end!r}")
    tableau = _tableau(method)
    q, v = np.asarray(q0, float), np.asarray(v0, float)
    held = np.zeros(0, int)
    acc = _Accelerations(cs, tau, f_ext, baumgarte)
    n = int(round(t_end / dt))
    out = ([], [], [], [], [])
    # A compiled set (sparsedyn.compile) brings its own kernels for the step and the projections.
    fast = getattr(cs, "simulation_kernels", None)
    stepper = None if fast is None else fast.stepper(tableau, dt, tau=tau, f_ext=f_ext, baumgarte=baumgarte)
    projector = None if fast is None or not project else fast.projector(tol)

    def settle(k, q, v, last):
        Gv = None
        if project:
            res = None if projector is None else projector(q, v)
            if res is None:
                q, g, G = newton(cs, q, held, tol)
                v = project_velocity(cs, q, v, G)
            else:
                q, v, g, Gv = res
        if last or k % every == 0:
            if not project:
                g, G, _ = cs.evaluate(q)
            if Gv is None:
                Gv = G @ v
            for lst, x in zip(out, (k * dt, q, v, float(np.max(np.abs(g), initial=0.0)),
                                    float(np.max(np.abs(Gv), initial=0.0)))):
                lst.append(x)
        return q, v

    q, v = settle(0, q, v, True)
    for k in range(n):
        res = None if stepper is None else stepper(q, v)
        if res is None:
            acc.part = None      # a fresh, well-conditioned partition at the start of every step
            res = rk_step(cs, k * dt, q, v, dt, tableau, acc=acc)
        q, v = settle(k + 1, *res, k == n - 1)
    return Trajectory(*(np.array(x) for x in out))
