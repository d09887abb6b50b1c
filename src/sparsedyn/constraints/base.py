"""Holonomic constraints ``g(q) = 0`` on a tree Model, and their stack ``ConstraintSet``.

The tree stays a tree: loops, contacts and couplings are constraint objects
added on top of it.  Every constraint block gives, at a state ``(q, v)``:

* ``g(q)`` (..., m): the residual (zero when the constraint holds);
* ``G(q)`` (..., m, nv): its Jacobian *with respect to the velocity* ``v``,
  i.e. ``d/dt g(q(t)) = G(q) v`` on the constraint manifold.  For quaternion
  joints ``v`` is not ``dq/dt`` (sparsedyn's convention: free joint ``v = [omega; v]`` in the
  body frame), so ``G`` maps ``v``, not ``qdot``;
* ``Gdot v`` (..., m), the *bias*: the acceleration-level constraint is
  ``G a + Gdot v = 0``.  It is the derivative of ``G(q(t)) v`` along the motion
  with constant ``v`` (``q(t) = q (+) t v``), computed analytically from the
  bias spatial accelerations (``a = 0``) of the bodies involved.

Residuals of kinematic constraints are in world axes, metres and radians.  The
stack (:class:`ConstraintSet`) evaluates one kinematic workspace per state and
concatenates the blocks in order; ``rows`` names every row ``"<name>.<label>"``.
A constraint built without a name is named after its kind and what it joins
(``point_<frame_a>_<frame_b>``, ``weld_<frame_a>_world``, ``ground_<frame>``,
``coupling_<joint>_<mimicked>``, ``user``); a set makes such default names unique
(``_2``, ``_3`` ...), while two given names that clash are an error.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import _checks
from ..kernels import Owned
from ._kinematics import kinematics
from .errors import ConstraintError

__all__ = ["Constraint", "ConstraintSet", "dof_names"]


class Constraint:
    """One block of constraint rows.  Subclasses set ``size``, ``labels``, ``kind``
    and implement the three kernels; ``model`` is the Model the rows refer to.

    Kernels receive the shared workspace ``kin`` (see :mod:`._kinematics`; ``None``
    for blocks with ``uses_kinematics = False``) and the (checked) ``q``/``v``.
    """

    kind = "constraint"
    uses_kinematics = True
    size = 0
    labels: tuple = ()

    def __init__(self, model, name=None):
        self.model = model
        self.name = name or self.kind
        #: whether the name was given (a default name is made unique by a :class:`ConstraintSet`)
        self.named = bool(name)

    def _default_name(self, *parts):
        """``kind_part_part...`` (``world`` for a missing frame) unless a name was given."""
        if not self.named:
            self.name = "_".join([self.kind] + ["world" if p is None else str(p) for p in parts])

    def residual(self, kin, q):
        """``g(q)`` (..., size) of this block, from the shared kinematics ``kin``."""
        raise NotImplementedError

    def jacobian(self, kin, q):
        """``G(q)`` (..., size, nv) of this block, with respect to the velocity ``v``."""
        raise NotImplementedError

    def bias(self, kin, q, v):
        """``Gdot v`` (..., size) of this block: ``G a + Gdot v = 0`` at the acceleration level."""
        raise NotImplementedError

    def evaluate(self, kin, q, v=None):
        """``(g, G, Gdot v or None)`` in one call (blocks may share work between the three)."""
        return self.residual(kin, q), self.jacobian(kin, q), None if v is None else self.bias(kin, q, v)

    def to_dict(self) -> dict:
        """The file-format entry of this constraint (see :mod:`sparsedyn.io.constraints`)."""
        raise ConstraintError(f"constraint {self.name!r} ({self.kind}) cannot be written to a file")

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, rows={self.size})"


def dof_names(model) -> list:
    """A name per velocity coordinate: the joint name, with ``[k]`` for multi-dof joints."""
    out = []
    for i, j in enumerate(model.joints):
        out += [model.joint_names[i]] if j.nv == 1 else [f"{model.joint_names[i]}[{k}]" for k in range(j.nv)]
    return out


class ConstraintSet:
    """The stacked constraints ``g = [g_1; ...; g_k]`` on one model.

    ``m`` rows in all; ``rows[k]`` names row ``k``.  :meth:`residual`,
    :meth:`jacobian`, :meth:`bias` and :meth:`evaluate` accept leading batch axes
    (a :class:`~.user.UserConstraint`'s functions are called once per state).
    """

    def __init__(self, model, constraints=()):
        self.model = model
        constraints = list(constraints)
        given = {c.name for c in constraints if isinstance(c, Constraint) and c.named}
        names = set()
        for k, c in enumerate(constraints):
            if not isinstance(c, Constraint):
                raise ConstraintError(f"ConstraintSet: expected Constraint objects, got {type(c).__name__}")
            if not c.named and (c.name in names or c.name in given):
                # a default name made unique: name_2, name_3, ... (on a copy: the object may be in other sets)
                n = 2
                while f"{c.name}_{n}" in names or f"{c.name}_{n}" in given:
                    n += 1
                c = copy.copy(c)
                c.name = f"{c.name}_{n}"
                constraints[k] = c
            if c.model is not model:
                raise ConstraintError(f"constraint {c.name!r} was built for another Model object (named "
                                      f"{c.model.name!r}) than this set's {model.name!r}; build the constraints "
                                      f"and the set on the same model")
            if c.name in names:
                raise ConstraintError(f"model {model.name!r}: two constraints are called {c.name!r}; "
                                      f"give them distinct names")
            names.add(c.name)
        self.constraints = tuple(constraints)
        self.m = int(sum(c.size for c in self.constraints))
        self.nv = model.nv
        self.rows = tuple(f"{c.name}.{lab}" for c in self.constraints for lab in c.labels)
        self.dof_names = tuple(dof_names(model))
        self._kin = any(c.uses_kinematics for c in self.constraints)

    def __len__(self):
        return len(self.constraints)

    def __iter__(self):
        return iter(self.constraints)

    def __getitem__(self, name):
        for c in self.constraints:
            if c.name == name:
                return c
        raise KeyError(f"no constraint {name!r}; constraints: {[c.name for c in self.constraints]}")

    def __add__(self, other):
        extra = other.constraints if isinstance(other, ConstraintSet) else tuple(other)
        return ConstraintSet(self.model, self.constraints + tuple(extra))

    def __repr__(self):
        return f"ConstraintSet({self.model.name!r}, m={self.m}, {[c.name for c in self.constraints]})"

    # --- the owner protocol of sparsedyn.compile (see sparsedyn.kernels) ----------------------
    def __sparsedyn_kernels__(self):
        """No kernel up front: the compiled set (:mod:`.compiled`) hands its kernels to the compiler
        as it needs them (the evaluation when it is made, the dynamics per partition and step), under
        the set's fingerprint (:func:`.compiled.fingerprint`)."""
        from .compiled import fingerprint
        return Owned(self.model, (), fingerprint(self))

    def __sparsedyn_compiled__(self, compiled):
        """``sparsedyn.compile(cs)``: a copy of this set that runs compiled (:func:`.compiled.compiled_set`)."""
        from .compiled import compiled_set
        return compiled_set(self, compiled)

    # --- evaluation -----------------------------------------------------------
    def _stack(self, blocks, shape, tail):
        if not blocks:
            return np.zeros(shape + (0,) + tail)
        return np.concatenate([np.broadcast_to(b, shape + b.shape[len(b.shape) - 1 - len(tail):]) for b in blocks],
                              -1 - len(tail))

    def evaluate(self, q, v=None):
        """``(g, G, b)``: residual (..., m), Jacobian (..., m, nv) and bias ``Gdot v`` (..., m).

        ``b`` is ``None`` when ``v`` is not given.
        """
        q = _checks.configuration(self.model, q)
        if v is not None:
            v = _checks.velocity(self.model, v)
        kin = kinematics(self.model, q, v) if self._kin else None
        shape = q.shape[:-1] if v is None else np.broadcast_shapes(q.shape[:-1], v.shape[:-1])
        blocks = [c.evaluate(kin, q, v) for c in self.constraints]
        g = self._stack([np.asarray(x[0]) for x in blocks], shape, ())
        G = self._stack([np.asarray(x[1]) for x in blocks], shape, (self.nv,))
        b = None if v is None else self._stack([np.asarray(x[2]) for x in blocks], shape, ())
        return g, G, b

    def residual(self, q):
        """``g(q)`` (..., m)."""
        q = _checks.configuration(self.model, q)
        kin = kinematics(self.model, q, jacobians=False) if self._kin else None
        return self._stack([np.asarray(c.residual(kin, q)) for c in self.constraints], q.shape[:-1], ())

    def jacobian(self, q):
        """``G(q)`` (..., m, nv), with respect to the velocity ``v``."""
        q = _checks.configuration(self.model, q)
        kin = kinematics(self.model, q) if self._kin else None
        return self._stack([np.asarray(c.jacobian(kin, q)) for c in self.constraints], q.shape[:-1], (self.nv,))

    def bias(self, q, v):
        """``Gdot v`` (..., m): ``G a + Gdot v = 0`` is the acceleration-level constraint."""
        return self.evaluate(q, v)[2]

    def violation(self, q, v=None):
        """``max |g(q)|`` and, with ``v``, ``max |G v|`` (position and velocity drift)."""
        g, G, _ = self.evaluate(q)
        pos = float(np.max(np.abs(g), initial=0.0))
        if v is None:
            return pos
        return pos, float(np.max(np.abs(G @ np.asarray(v, float)), initial=0.0))
