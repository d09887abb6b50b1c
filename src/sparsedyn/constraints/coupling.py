"""Joint couplings ``q_j = k q_i + c`` (URDF ``<mimic>``) as constraints.

One row ``g = q_j - k q_i - c``; ``G`` has ``+1`` at the dof of joint ``j`` and
``-k`` at the dof of joint ``i``; ``Gdot v = 0`` (``G`` is constant).  Both
joints must have one coordinate and one dof (revolute, continuous, prismatic,
helical), so that ``q`` and ``v`` agree.
"""

from __future__ import annotations

import numpy as np

from .base import Constraint
from .errors import ConstraintError

__all__ = ["JointCoupling", "mimic_constraints"]


def _scalar_joint(model, joint, what):
    """Body index of a one-coordinate joint given by name or body index."""
    if isinstance(joint, (int, np.integer)):
        if not 0 <= joint < model.nbodies:
            raise ConstraintError(f"{what}: body index {joint} is out of range (model {model.name!r} has "
                                  f"{model.nbodies} bodies)")
        i = int(joint)
    else:
        try:
            i = model.joint(joint)
        except KeyError as e:
            raise ConstraintError(f"{what}: {e.args[0]}") from None
    j = model.joints[i]
    if j.nq != 1 or j.nv != 1:
        raise ConstraintError(f"{what}: joint {model.joint_names[i]!r} is {j.type} (nq={j.nq}, nv={j.nv}); "
                              f"a coupling needs one-coordinate joints (revolute, continuous, prismatic, helical)")
    return i


class JointCoupling(Constraint):
    """``q[joint] = multiplier * q[mimicked] + offset`` (joints by name or body index)."""

    kind = "coupling"
    uses_kinematics = False
    size = 1
    labels = ("q",)

    def __init__(self, model, joint, mimicked, multiplier=1.0, offset=0.0, name=None):
        super().__init__(model, name)
        w = f"coupling {self.name!r}"
        self.joint = _scalar_joint(model, joint, f"{w}, joint")
        self.mimicked = _scalar_joint(model, mimicked, f"{w}, mimicked joint")
        if self.joint == self.mimicked:
            raise ConstraintError(f"{w}: a joint cannot mimic itself ({model.joint_names[self.joint]!r})")
        self._default_name(model.joint_names[self.joint], model.joint_names[self.mimicked])
        self.multiplier, self.offset = float(multiplier), float(offset)
        if not (np.isfinite(self.multiplier) and np.isfinite(self.offset)):
            raise ConstraintError(f"{w}: multiplier and offset must be finite")
        self.qj, self.qi = int(model.q_start[self.joint]), int(model.q_start[self.mimicked])
        self.vj, self.vi = int(model.v_start[self.joint]), int(model.v_start[self.mimicked])

    def residual(self, kin, q):
        return (q[..., self.qj] - self.multiplier * q[..., self.qi] - self.offset)[..., None]

    def jacobian(self, kin, q):
        row = np.zeros(self.model.nv)
        row[self.vj] += 1.0
        row[self.vi] -= self.multiplier
        return np.broadcast_to(row, q.shape[:-1] + (1, self.model.nv))

    def bias(self, kin, q, v):
        return np.zeros(np.broadcast_shapes(q.shape[:-1], v.shape[:-1]) + (1,))

    def to_dict(self):
        return {"type": "coupling", "name": self.name, "joint": self.model.joint_names[self.joint],
                "mimicked": self.model.joint_names[self.mimicked], "multiplier": self.multiplier,
                "offset": self.offset}


def mimic_constraints(model) -> list:
    """One :class:`JointCoupling` per ``model.mimic`` entry (the URDF ``<mimic>`` tags), named ``mimic_<joint>``."""
    return [JointCoupling(model, m.joint, m.mimicked, m.multiplier, m.offset,
                          name=f"mimic_{model.joint_names[m.joint]}") for m in model.mimic]
