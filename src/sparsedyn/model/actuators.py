"""Joint actuators: the joint forces that controls ``ctrl`` make (MuJoCo's ``qfrc_actuator``).

An :class:`Actuators` holds ``k`` actuators, each driving one hinge or slide dof through a gear ``g``
(MuJoCo's joint transmission: the actuator's length is ``g q``, its velocity ``g v``, and its force
``f`` acts on the dof as ``g f``), with MuJoCo's affine force law (gain type ``fixed``, bias type
``none`` or ``affine``, no activation state)::

    c   = clip(ctrl, ctrl_range)                                   where ctrl is limited
    f   = gain c + bias[0] + bias[1] g q + bias[2] g v
    f   = clip(f, force_range)                                     where the force is limited
    tau = sum over actuators of g f on its dof, then clip(tau, joint_force_range) per dof

so a motor is ``gain = 1``, ``bias = 0``; a position servo ``gain = kp``, ``bias = [0, -kp, -kv]``; a
velocity servo ``gain = kv``, ``bias = [0, 0, -kv]``.  Unlimited ranges are ``(-inf, inf)``.  The
step takes the forces as joint forces (``tau``): a controller calls :meth:`Actuators.forces` each step.
:func:`~sparsedyn.load_actuators` reads them from an MJCF file.

An actuator may have an activation state ``a`` (MuJoCo's ``act``; ``activation`` other than ``"none"``):
its force law takes ``a`` in place of ``c``, and ``a`` follows the control::

    integrator:               da/dt = c
    filter, filterexact:      da/dt = (c - a) / T                      (T: time_constant)

MuJoCo's Euler step advances it as ``a + dt da/dt`` (``filterexact``: exactly, ``a + (c - a) (1 -
exp(-dt / T))``), then clips it to ``act_range``; an actuator with ``act_early`` takes that next
activation in its force law (MuJoCo's ``actearly``).  The activations of a state are ``act`` (..., na),
one per such actuator in the actuators' order: a controller carries them from step to step with
:meth:`Actuators.next_activation` (a ``<cylinder>``, a ``<position>`` with ``timeconst``, an
``<intvelocity>``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import _checks

__all__ = ["Actuators"]

#: The activation dynamics :class:`Actuators` takes (MuJoCo's ``dyntype`` none, integrator, filter, filterexact).
ACTIVATIONS = ("none", "integrator", "filter", "filterexact")
#: MuJoCo's smallest time constant (``mjMINVAL``): a filter's ``T`` below it is taken as it.
_MINVAL = 1e-15


@dataclasses.dataclass(frozen=True, eq=False)
class Actuators:
    """``k`` joint actuators of a model with ``nv`` dofs (module docstring).

    ``names`` (k,); ``dof`` (k,) int: the driven dof (an index into ``v``); ``q_index`` (k,) int: its
    coordinate (an index into ``q``); ``gear``, ``gain`` (k,); ``bias`` (k, 3); ``ctrl_range``,
    ``force_range`` (k, 2); ``joint_force_range`` (nv, 2); ``nv``, ``nq``: the model's numbers of dofs and
    coordinates; ``activation`` (k,) each ``"none"``, ``"integrator"``, ``"filter"`` or ``"filterexact"``
    (None: all ``"none"``), ``time_constant`` (k,) [s] (a filter's ``T``), ``act_range`` (k, 2),
    ``act_early`` (k,) bool (None: 0, unlimited, False)."""

    names: tuple
    dof: np.ndarray
    q_index: np.ndarray
    gear: np.ndarray
    gain: np.ndarray
    bias: np.ndarray
    ctrl_range: np.ndarray
    force_range: np.ndarray
    joint_force_range: np.ndarray
    nv: int
    nq: int
    activation: tuple = None
    time_constant: np.ndarray = None
    act_range: np.ndarray = None
    act_early: np.ndarray = None

    def __post_init__(self):
        k = len(self.names)
        kinds = ("none",) * k if self.activation is None else tuple(str(a) for a in self.activation)
        if len(kinds) != k or not set(kinds) <= set(ACTIVATIONS):
            raise ValueError(f"Actuators: activation must be {k} of {ACTIVATIONS}, got {kinds}")
        object.__setattr__(self, "activation", kinds)
        for name, default in (("time_constant", np.zeros(k)), ("act_range", np.tile([-np.inf, np.inf], (k, 1))),
                              ("act_early", np.zeros(k, bool))):
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)
        early = np.array(self.act_early, dtype=bool)
        if early.shape != (k,):
            raise ValueError(f"Actuators: act_early must have shape ({k},), got {early.shape}")
        early.flags.writeable = False
        object.__setattr__(self, "act_early", early)
        for name, shape in (("dof", (k,)), ("q_index", (k,)), ("gear", (k,)), ("gain", (k,)), ("bias", (k, 3)),
                            ("ctrl_range", (k, 2)), ("force_range", (k, 2)), ("joint_force_range", (self.nv, 2)),
                            ("time_constant", (k,)), ("act_range", (k, 2))):
            x = np.array(getattr(self, name), dtype=int if name in ("dof", "q_index") else float)
            if x.shape != shape:
                raise ValueError(f"Actuators: {name} must have shape {shape}, got {x.shape}")
            if x.dtype == float and np.isnan(x).any():
                raise ValueError(f"Actuators: {name} holds NaN")
            x.flags.writeable = False
            object.__setattr__(self, name, x)
        if k and (self.dof.min() < 0 or self.dof.max() >= self.nv):
            raise ValueError(f"Actuators: dof must index the model's {self.nv} dofs, got {self.dof.tolist()}")
        if k and (self.q_index.min() < 0 or self.q_index.max() >= self.nq):
            raise ValueError(f"Actuators: q_index must index the model's {self.nq} coordinates, got "
                             f"{self.q_index.tolist()}")
        for name in ("ctrl_range", "force_range", "joint_force_range", "act_range"):
            r = getattr(self, name)
            if (r[:, 0] > r[:, 1]).any():
                raise ValueError(f"Actuators: {name} has a lower bound above its upper bound")
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))

    def __len__(self):
        return len(self.names)

    @property
    def stateful(self) -> np.ndarray:
        """The actuators (indices, (na,)) with an activation state, in the order of ``act``."""
        return np.array([i for i, a in enumerate(self.activation) if a != "none"], dtype=int)

    @property
    def na(self) -> int:
        """The number of activations ``act`` of a state (MuJoCo's ``na``)."""
        return len(self.stateful)

    def _inputs(self, who, q, v, ctrl, act=None, dt=None):
        q = _checks.plain_floats(who, "q", q, f"(..., {self.nq})")
        v = _checks.plain_floats(who, "v", v, f"(..., {self.nv})")
        if v.shape[-1:] != (self.nv,):
            raise ValueError(f"{who}: v must have shape (..., {self.nv}) (one velocity a dof), got {v.shape}")
        ctrl = self._controls(who, ctrl)
        if q.shape[-1:] != (self.nq,):
            raise ValueError(f"{who}: q must have shape (..., {self.nq}) (the model's coordinates), got {q.shape}")
        act = self._activations(who, act)
        dt = self._dt(who, dt) if self.act_early.any() or dt is not None else None
        for name, x in (("q", q), ("v", v)):
            if not np.isfinite(x).all():
                raise ValueError(f"{who}: {name} holds NaN or infinite values")
        try:
            np.broadcast_shapes(q.shape[:-1], v.shape[:-1], ctrl.shape[:-1], act.shape[:-1])
        except ValueError:
            named = f"q {q.shape}, v {v.shape}" + (f", ctrl {ctrl.shape} and act {act.shape}" if self.na else
                                                  f" and ctrl {ctrl.shape}")
            raise ValueError(f"{who}: the leading (batch) axes of {named} do not broadcast") from None
        return q, v, ctrl, act, dt

    def _controls(self, who, ctrl):
        """``ctrl`` (..., k) checked: one finite control per actuator."""
        k = len(self)
        return _finite_rows(who, "ctrl", ctrl, k, f"one control per actuator: "
                            f"{', '.join(self.names[:8])}{', ...' if k > 8 else ''}")

    def _activations(self, who, act):
        """``act`` (..., na) checked; (0,) where no actuator has a state and none is given."""
        na = self.na
        if act is None:
            if na:
                names = ", ".join(self.names[i] for i in self.stateful[:8])
                raise ValueError(f"{who}: act is required: {na} actuator(s) have an activation state ({names}); "
                                 f"pass act (..., {na}), e.g. np.zeros({na}) at rest")
            return np.zeros(0)
        return _finite_rows(who, "act", act, na, "one activation per actuator with a state")

    @staticmethod
    def _dt(who, dt):
        if dt is None:
            raise ValueError(f"{who}: dt is required: an actuator acts early (actearly), on the activation "
                             f"after a step of dt")
        dt = _checks.plain_floats(who, "dt", dt, "a positive number")
        if dt.shape != () or not np.isfinite(dt) or dt <= 0.0:
            raise ValueError(f"{who}: dt must be a positive finite number [s], got {dt}")
        return float(dt)

    def _filters(self):
        """Per stateful actuator (na,): integrator, exact filter (bool) and the time constant ``T``."""
        kinds = np.array(self.activation, dtype=object)[self.stateful]
        return kinds == "integrator", kinds == "filterexact", np.maximum(self.time_constant[self.stateful], _MINVAL)

    def _next(self, c, act, dt):
        """``(next, d next / d c, d next / d act)`` (..., na) each: the activations after a step of ``dt``
        (the module docstring; clipped to ``act_range``, where the derivatives are 0) from the clipped
        controls ``c`` (..., k)."""
        integ, exact, T = self._filters()
        cs = c[..., self.stateful]
        gain = np.where(exact, -np.expm1(-dt / T), dt / T)             # a filter's step: gain (c - a)
        nxt = np.where(integ, act + dt * cs, act + gain * (cs - act))
        dc, da = np.where(integ, dt, gain), np.where(integ, 1.0, 1.0 - gain)
        lo, hi = self.act_range[self.stateful, 0], self.act_range[self.stateful, 1]
        live = (nxt >= lo) & (nxt <= hi)
        return np.clip(nxt, lo, hi), dc * live, da * live

    def _terms(self, q, v, ctrl, act, dt):
        """``(f, live_f, dx_dc, dx_da)``: the actuators' forces (..., k) clipped to their ranges, where they
        are inside them, and the derivatives of the force law's input ``x`` (the control, the activation or
        the next activation) by each actuator's control and by its activation (..., k each; 0 where a range
        clips)."""
        g = self.gear
        c = np.clip(ctrl, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
        live_c = (ctrl >= self.ctrl_range[:, 0]) & (ctrl <= self.ctrl_range[:, 1])
        shape = np.broadcast_shapes(c.shape, act.shape[:-1] + (len(self),))
        x, dx_dc, dx_da = np.broadcast_to(c, shape).copy(), np.broadcast_to(live_c * 1.0, shape).copy(), np.zeros(shape)
        if self.na:
            i = self.stateful
            early = self.act_early[i]
            if early.any():
                nxt, dn_dc, dn_da = self._next(c, act, dt)
            else:
                nxt, dn_dc, dn_da = act, np.zeros_like(act), np.ones_like(act)
            x[..., i] = np.where(early, nxt, act)
            dx_dc[..., i] = np.where(early, dn_dc, 0.0) * live_c[..., i]
            dx_da[..., i] = np.where(early, dn_da, 1.0)
        f = self.gain * x + self.bias[:, 0] + self.bias[:, 1] * g * q[..., self.q_index] + \
            self.bias[:, 2] * g * v[..., self.dof]
        live_f = (f >= self.force_range[:, 0]) & (f <= self.force_range[:, 1])
        return np.clip(f, self.force_range[:, 0], self.force_range[:, 1]), live_f, dx_dc, dx_da

    def _joint(self, f):
        """The joint forces (..., nv) of actuator forces ``f`` (..., k), before the joints' own limits."""
        A = np.zeros((len(self), self.nv))
        A[np.arange(len(self)), self.dof] = self.gear
        return f @ A, A

    def forces(self, q, v, ctrl, act=None, dt=None) -> np.ndarray:
        """The joint forces ``tau`` (..., nv) of the controls ``ctrl`` (..., k) at ``q`` (..., nq), ``v``
        (..., nv) and the activations ``act`` (..., na) (required where an actuator has a state), ``dt`` [s]
        the step (required where one acts early): the module docstring's law, MuJoCo's ``qfrc_actuator`` in
        this model's layout."""
        q, v, ctrl, act, dt = self._inputs("Actuators.forces", q, v, ctrl, act, dt)
        tau, _ = self._joint(self._terms(q, v, ctrl, act, dt)[0])
        return np.clip(tau, self.joint_force_range[:, 0], self.joint_force_range[:, 1])

    def activation_rate(self, ctrl, act) -> np.ndarray:
        """``da/dt`` (..., na) at the controls ``ctrl`` (..., k) and activations ``act`` (..., na): MuJoCo's
        ``act_dot`` (the control clipped to its range first)."""
        ctrl = self._controls("Actuators.activation_rate", ctrl)
        act = self._activations("Actuators.activation_rate", act)
        integ, _, T = self._filters()
        cs = np.clip(ctrl, self.ctrl_range[:, 0], self.ctrl_range[:, 1])[..., self.stateful]
        return np.where(integ, cs, (cs - act) / T)

    def next_activation(self, ctrl, act, dt) -> np.ndarray:
        """The activations (..., na) after a step of ``dt`` [s] from ``act`` (..., na) under ``ctrl`` (..., k):
        MuJoCo's Euler step of ``act`` (``filterexact``: exact), clipped to ``act_range``."""
        who = "Actuators.next_activation"
        c = np.clip(self._controls(who, ctrl), self.ctrl_range[:, 0], self.ctrl_range[:, 1])
        return self._next(c, self._activations(who, act), self._dt(who, dt))[0]

    def next_activation_derivatives(self, ctrl, act, dt):
        """``(dnext_dctrl, dnext_dact)`` (..., na, k), (..., na, na) of :meth:`next_activation` (0 where the
        control or the next activation is clipped by its range)."""
        who = "Actuators.next_activation_derivatives"
        ctrl = self._controls(who, ctrl)
        c = np.clip(ctrl, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
        live_c = (ctrl >= self.ctrl_range[:, 0]) & (ctrl <= self.ctrl_range[:, 1])
        _, dc, da = self._next(c, self._activations(who, act), self._dt(who, dt))
        na, k = self.na, len(self)
        dnc = np.zeros(dc.shape[:-1] + (na, k))
        dnc[..., np.arange(na), self.stateful] = dc * live_c[..., self.stateful]
        return dnc, da[..., :, None] * np.eye(na)

    def derivatives(self, q, v, ctrl, act=None, dt=None):
        """``(dtau_dq, dtau_dv, dtau_dctrl, dtau_dact)`` (..., nv, nv), (..., nv, nv), (..., nv, k), (..., nv,
        na) of :meth:`forces` (``d/dq`` in ``v``'s coordinates: the driven coordinates are hinges and slides).
        A clipped control, activation, actuator force or joint force does not move with its inputs
        (one-sided at a range's end)."""
        q, v, ctrl, act, dt = self._inputs("Actuators.derivatives", q, v, ctrl, act, dt)
        f, live_f, dx_dc, dx_da = self._terms(q, v, ctrl, act, dt)
        tau, A = self._joint(f)
        live_j = (tau >= self.joint_force_range[:, 0]) & (tau <= self.joint_force_range[:, 1])
        g = self.gear
        # d tau / d x = diag(live_j) A^T diag(live_f) d f / d x, d f / d q_dof = bias1 g, d f / d v_dof = bias2 g
        rows = live_j[..., :, None] * A.T * live_f[..., None, :]              # (..., nv, k)
        E = np.zeros((len(self), self.nv))
        E[np.arange(len(self)), self.dof] = 1.0
        dq = rows @ ((self.bias[:, 1] * g)[:, None] * E)
        dv = rows @ ((self.bias[:, 2] * g)[:, None] * E)
        dc = rows * (self.gain * dx_dc)[..., None, :]
        da = (rows * (self.gain * dx_da)[..., None, :])[..., self.stateful]
        return dq, dv, dc, da


def _finite_rows(who, name, x, n, meaning):
    """``x`` (..., n) as float64, checked: its last axis ``n`` long (``meaning`` says what an entry is) and
    every value finite; else a ``ValueError`` naming ``name``."""
    x = _checks.plain_floats(who, name, x, f"(..., {n})")
    if x.shape[-1:] != (n,):
        raise ValueError(f"{who}: {name} must have shape (..., {n}) ({meaning}), got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{who}: {name} holds NaN or infinite values")
    return x
