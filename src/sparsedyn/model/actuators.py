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
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import _checks

__all__ = ["Actuators"]


@dataclasses.dataclass(frozen=True, eq=False)
class Actuators:
    """``k`` joint actuators of a model with ``nv`` dofs (module docstring).

    ``names`` (k,); ``dof`` (k,) int: the driven dof (an index into ``v``); ``q_index`` (k,) int: its
    coordinate (an index into ``q``); ``gear``, ``gain`` (k,); ``bias`` (k, 3); ``ctrl_range``,
    ``force_range`` (k, 2); ``joint_force_range`` (nv, 2); ``nv``, ``nq``: the model's numbers of dofs and
    coordinates."""

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

    def __post_init__(self):
        k = len(self.names)
        for name, shape in (("dof", (k,)), ("q_index", (k,)), ("gear", (k,)), ("gain", (k,)), ("bias", (k, 3)),
                            ("ctrl_range", (k, 2)), ("force_range", (k, 2)), ("joint_force_range", (self.nv, 2))):
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
        for name in ("ctrl_range", "force_range", "joint_force_range"):
            r = getattr(self, name)
            if (r[:, 0] > r[:, 1]).any():
                raise ValueError(f"Actuators: {name} has a lower bound above its upper bound")
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))

    def __len__(self):
        return len(self.names)

    def _inputs(self, who, q, v, ctrl):
        k = len(self)
        q = _checks.plain_floats(who, "q", q, f"(..., {self.nq})")
        v = _checks.plain_floats(who, "v", v, f"(..., {self.nv})")
        ctrl = _checks.plain_floats(who, "ctrl", ctrl, f"(..., {k})")
        if v.shape[-1:] != (self.nv,):
            raise ValueError(f"{who}: v must have shape (..., {self.nv}) (one velocity a dof), got {v.shape}")
        if ctrl.shape[-1:] != (k,):
            raise ValueError(f"{who}: ctrl must have shape (..., {k}) (one control per actuator: "
                             f"{', '.join(self.names[:8])}{', ...' if k > 8 else ''}), got {ctrl.shape}")
        if q.shape[-1:] != (self.nq,):
            raise ValueError(f"{who}: q must have shape (..., {self.nq}) (the model's coordinates), got {q.shape}")
        for name, x in (("q", q), ("v", v), ("ctrl", ctrl)):
            if not np.isfinite(x).all():
                raise ValueError(f"{who}: {name} holds NaN or infinite values")
        try:
            np.broadcast_shapes(q.shape[:-1], v.shape[:-1], ctrl.shape[:-1])
        except ValueError:
            raise ValueError(f"{who}: the leading (batch) axes of q {q.shape}, v {v.shape} and ctrl {ctrl.shape} "
                             f"do not broadcast") from None
        return q, v, ctrl

    def _terms(self, q, v, ctrl):
        """``(f, live_ctrl, live_force)``: the actuators' forces (..., k) and where the control and the force
        are inside their ranges (..., k)."""
        g = self.gear
        c = np.clip(ctrl, self.ctrl_range[:, 0], self.ctrl_range[:, 1])
        f = self.gain * c + self.bias[:, 0] + self.bias[:, 1] * g * q[..., self.q_index] + \
            self.bias[:, 2] * g * v[..., self.dof]
        clipped = np.clip(f, self.force_range[:, 0], self.force_range[:, 1])
        live_c = (ctrl >= self.ctrl_range[:, 0]) & (ctrl <= self.ctrl_range[:, 1])
        live_f = (f >= self.force_range[:, 0]) & (f <= self.force_range[:, 1])
        return clipped, live_c, live_f

    def _joint(self, f):
        """The joint forces (..., nv) of actuator forces ``f`` (..., k), before the joints' own limits."""
        A = np.zeros((len(self), self.nv))
        A[np.arange(len(self)), self.dof] = self.gear
        return f @ A, A

    def forces(self, q, v, ctrl) -> np.ndarray:
        """The joint forces ``tau`` (..., nv) of the controls ``ctrl`` (..., k) at ``q`` (..., nq), ``v``
        (..., nv) (the module docstring's law; MuJoCo's ``qfrc_actuator`` in this model's layout)."""
        q, v, ctrl = self._inputs("Actuators.forces", q, v, ctrl)
        tau, _ = self._joint(self._terms(q, v, ctrl)[0])
        return np.clip(tau, self.joint_force_range[:, 0], self.joint_force_range[:, 1])

    def derivatives(self, q, v, ctrl):
        """``(dtau_dq, dtau_dv, dtau_dctrl)`` (..., nv, nv), (..., nv, nv), (..., nv, k) of :meth:`forces`
        (``d/dq`` in ``v``'s coordinates: the driven coordinates are hinges and slides).  A clipped control,
        actuator force or joint force does not move with its inputs (one-sided at a range's end)."""
        q, v, ctrl = self._inputs("Actuators.derivatives", q, v, ctrl)
        f, live_c, live_f = self._terms(q, v, ctrl)
        tau, A = self._joint(f)
        live_j = (tau >= self.joint_force_range[:, 0]) & (tau <= self.joint_force_range[:, 1])
        g = self.gear
        # d tau / d x = diag(live_j) A^T diag(live_f) d f / d x, d f / d q_dof = bias1 g, d f / d v_dof = bias2 g
        rows = live_j[..., :, None] * A.T * live_f[..., None, :]              # (..., nv, k)
        E = np.zeros((len(self), self.nv))
        E[np.arange(len(self)), self.dof] = 1.0
        dq = rows @ ((self.bias[:, 1] * g)[:, None] * E)
        dv = rows @ ((self.bias[:, 2] * g)[:, None] * E)
        dc = rows * (self.gain * live_c)[..., None, :]
        return dq, dv, dc
