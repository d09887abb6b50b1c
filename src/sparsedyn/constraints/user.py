"""A user-supplied constraint ``g(q)`` with its Jacobian ``G(q)`` (and optionally ``Gdot v``)."""

from __future__ import annotations

import numpy as np

from ..algorithms.configuration import integrate
from .base import Constraint
from .errors import ConstraintError

__all__ = ["UserConstraint"]


class UserConstraint(Constraint):
    """Rows given by functions of one state (no batch axes are added for them).

    * ``residual(q) -> (m,)``;
    * ``jacobian(q) -> (m, nv)``, with respect to the velocity ``v`` (for
      quaternion joints this is not ``dg/dq``: ``d/dt g = G v``);
    * ``bias(q, v) -> (m,)``, ``Gdot v``.  When omitted it is computed by a
      central difference of ``G`` along the motion ``q (+) t v``:
      ``(G(q (+) h v) - G(q (+) -h v)) v / 2h`` (accuracy about ``1e-10`` relative);
      give it analytically when it matters.
    """

    kind = "user"
    uses_kinematics = False

    def __init__(self, model, residual, jacobian, bias=None, size=None, name=None, labels=None):
        super().__init__(model, name)
        self._g, self._G, self._b = residual, jacobian, bias
        if not callable(residual) or not callable(jacobian) or (bias is not None and not callable(bias)):
            raise ConstraintError(f"user constraint {self.name!r}: residual, jacobian (and bias) must be callables")
        if size is None:
            size = np.asarray(residual(model.neutral())).reshape(-1).size
        self.size = int(size)
        self.labels = tuple(labels) if labels is not None else tuple(str(k) for k in range(self.size))
        if len(self.labels) != self.size:
            raise ConstraintError(f"user constraint {self.name!r}: {len(self.labels)} labels for {self.size} rows")

    def _one(self, fn, shape, what):
        out = np.asarray(fn(), float)
        if out.shape != shape:
            raise ConstraintError(f"user constraint {self.name!r}: {what} returned shape {out.shape}, "
                                  f"expected {shape}")
        return out

    def residual(self, kin, q):
        return self._batch(q, lambda qq: self._one(lambda: self._g(qq), (self.size,), "residual(q)"))

    def jacobian(self, kin, q):
        shape = (self.size, self.model.nv)
        return self._batch(q, lambda qq: self._one(lambda: self._G(qq), shape, "jacobian(q)"))

    def bias(self, kin, q, v):
        shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1])
        q = np.broadcast_to(q, shape + q.shape[-1:])
        v = np.broadcast_to(v, shape + v.shape[-1:])
        out = np.empty(shape + (self.size,))
        for idx in np.ndindex(*shape):
            out[idx] = self._bias_one(q[idx], v[idx])
        return out

    def _bias_one(self, q, v):
        if self._b is not None:
            return self._one(lambda: self._b(q, v), (self.size,), "bias(q, v)")
        h = 1e-5 / max(1.0, float(np.max(np.abs(v), initial=0.0)))
        Gp = np.asarray(self._G(integrate(self.model, q, h * v)), float)
        Gm = np.asarray(self._G(integrate(self.model, q, -h * v)), float)
        return (Gp - Gm) @ v / (2 * h)

    def _batch(self, q, fn):
        if q.ndim == 1:
            return fn(q)
        out = [fn(q[idx]) for idx in np.ndindex(*q.shape[:-1])]
        return np.stack(out).reshape(q.shape[:-1] + out[0].shape)
