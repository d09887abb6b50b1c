"""The dynamic variables ``d`` and the Newton-Euler row blocks, as named objects.

Nori (*Inverse, forward and other dynamic computations computationally optimized with
sparse matrix factorizations*, 2017, section III-A) writes the dynamics
of a kinematic tree as linear equations in the set of dynamic variables::

    D = { a_i, f_i, tau_i, fx_i, qdd_i },  i = 1 .. NB

and the row blocks (constraints)::

    C = { c(3a_i), c(3f_i), c(3tau_i) },  i = 1 .. NB

    c(3a_i):    a_i = iX_lambda(i) a_lambda(i) + S_i qdd_i + c_i
    c(3f_i):    f_i = I_i a_i + nu_i - fx_i + sum_{j in mu(i)} iX*_j f_j
    c(3tau_i):  tau_i = S_i^T f_i + armature_i qdd_i     (rotor inertia; no term where it is zero)

Gravity enters as the base's fictitious acceleration ``a_0 = -g`` (Featherstone, *Rigid Body
Dynamics Algorithms*, 2008, section 5.3), so ``a_i`` is the body's acceleration minus gravity's
(Pinocchio's ``a_gf``; ``[0; -R_i^T g]`` at rest).
Every variable is expressed in its own body's coordinates (Nori's Remark 1),
``fx_i`` included: the external force ``f_ext[i]`` of :func:`sparsedyn.rnea`, the
same convention as Pinocchio's ``fext``.  Sizes: ``a_i, f_i, fx_i`` have 6
components (angular first: motion ``[omega; v]``, force ``[n; f]``), ``tau_i`` and
``qdd_i`` have ``nv_i`` (the joint's velocity dimension: 1 for revolute, 3 for
spherical, 6 for the free floating base, whose ``S = 1_6``).

Layout of the vector ``d`` (``n_d = 18 NB + 2 nv`` scalars), kind-major so that
each kind unpacks to the arrays the classical functions use::

    d = [ a_0 .. a_{NB-1} | f_0 .. | tau (nv, in model dof order) | fx_0 .. | qdd (nv) ]

and of the Newton-Euler rows (``12 NB + nv`` scalars)::

    [ c(3a_0) .. c(3a_{NB-1}) | c(3f_0) .. | c(3tau_0) .. ]

The variable kinds keep the paper's names (``a_i`` a body's spatial acceleration,
``qdd_i`` a joint's acceleration); the public arguments of the sparse layer use
the vocabulary of the rest of sparsedyn (``q``, ``v`` joint velocities, ``a``
joint accelerations, ``tau``, ``f_ext``), so ``sparse_inverse_dynamics(model, q,
v, a)`` fills the known variables ``qdd_i`` from ``a``.

Bodies are indexed ``0..NB-1`` (the paper numbers them ``1..NB``, 0 = world).
Variables ``a, f, fx`` and row blocks ``c(3a), c(3f)`` are named after their body;
``tau, qdd`` and ``c(3tau)`` after their joint.  Labels read ``f[l_ankle]`` and
``c(3f)[l_ankle]``; :meth:`Variable.describe` and :meth:`Equation.describe` give
the long forms used in messages ("row block c(3f) of l_ankle").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["KINDS", "EQUATION_KINDS", "Variable", "Equation", "Layout", "Kinematics"]

#: Variable kinds, in the order of ``d``.
KINDS = ("a", "f", "tau", "fx", "qdd")
#: Newton-Euler row-block kinds, in row order (measurement rows follow, kind ``"y"``).
EQUATION_KINDS = ("3a", "3f", "3tau")

_JOINT_KINDS = ("tau", "qdd", "3tau")
_WHAT = {"a": "spatial acceleration", "f": "joint wrench (force transmitted from the parent)",
         "tau": "joint force", "fx": "external wrench", "qdd": "joint acceleration"}
_MOTION = ("wx", "wy", "wz", "vx", "vy", "vz")
_FORCE = ("nx", "ny", "nz", "fx", "fy", "fz")


@dataclass(frozen=True)
class Variable:
    """A block of ``d``: ``d[offset : offset + size]`` holds variable ``kind`` of body ``body``."""

    kind: str
    body: int
    name: str          # body name (a, f, fx) or joint name (tau, qdd)
    offset: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.kind}[{self.name}]"

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.size)

    def describe(self) -> str:
        owner = "joint" if self.kind in _JOINT_KINDS else "body"
        return f"{self.kind} of {owner} {self.name} ({_WHAT[self.kind]})"

    def component(self, k: int) -> str:
        """Label of scalar component ``k``: ``a[l_ankle].wz``, ``qdd[knee].0``."""
        names = _MOTION if self.kind == "a" else _FORCE if self.kind in ("f", "fx") else None
        return f"{self.label}.{names[k] if names else k}"


@dataclass(frozen=True)
class Equation:
    """A block of rows: ``kind`` is ``"3a"``, ``"3f"``, ``"3tau"`` or ``"y"`` (a measurement)."""

    kind: str
    body: int          # -1 for measurement rows
    name: str          # body/joint name, or the measurement's name
    offset: int
    size: int

    @property
    def label(self) -> str:
        return f"c({self.kind})[{self.name}]" if self.kind != "y" else f"y[{self.name}]"

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.size)

    def describe(self) -> str:
        if self.kind == "y":
            return f"measurement rows {self.name}"
        return f"row block c({self.kind}) of {self.name}"


class Layout:
    """Variables and Newton-Euler row blocks of a model (structure only; built once).

    ``variables`` / ``equations``: tuples in vector order; ``n`` = ``len(d)``,
    ``nrows`` = number of Newton-Euler rows.  Look-ups: :meth:`var`,
    :meth:`eq`, :meth:`column_owner`, :meth:`row_owner`.
    """

    def __init__(self, model):
        self.model = model
        self.variables, self.n, self._var = self._blocks(model, Variable, KINDS)
        self.equations, self.nrows, self._eq = self._blocks(model, Equation, EQUATION_KINDS)
        self._col_owner = [v for v in self.variables for _ in range(v.size)]
        self._row_owner = [e for e in self.equations for _ in range(e.size)]

    @staticmethod
    def _blocks(model, cls, kinds):
        """Blocks of ``cls`` (Variable or Equation) kind by kind, body by body: ``(blocks, size, index)``."""
        blocks, index, off = [], {}, 0
        for kind in kinds:
            for i in range(model.nbodies):
                joint_kind = kind in _JOINT_KINDS
                size = model.joints[i].nv if joint_kind else 6
                b = cls(kind, i, model.joint_names[i] if joint_kind else model.body_names[i], off, size)
                blocks.append(b)
                index[kind, i] = b
                off += size
        return tuple(blocks), off, index

    def body_index(self, body) -> int:
        """A body given by index, body name or joint name."""
        m = self.model
        if isinstance(body, (int,)) or hasattr(body, "__index__"):
            i = int(body)
            if not 0 <= i < m.nbodies:
                raise KeyError(f"model {m.name!r} has {m.nbodies} bodies; index {i} is out of range")
            return i
        if body in m.body_names:
            return m.body_names.index(body)
        if body in m.joint_names:
            return m.joint_names.index(body)
        raise KeyError(f"model {m.name!r} has no body or joint called {body!r}")

    def var(self, kind: str, body) -> Variable:
        """The variable block ``kind`` (one of :data:`KINDS`) of a body (index, body or joint name)."""
        if kind not in KINDS:
            raise ValueError(f"unknown variable kind {kind!r}; expected one of {KINDS}")
        return self._var[kind, self.body_index(body)]

    def eq(self, kind: str, body) -> Equation:
        """The Newton-Euler row block ``kind`` (one of :data:`EQUATION_KINDS`) of a body."""
        if kind not in EQUATION_KINDS:
            raise ValueError(f"unknown row-block kind {kind!r}; expected one of {EQUATION_KINDS}")
        return self._eq[kind, self.body_index(body)]

    def column_owner(self, c: int) -> Variable:
        return self._col_owner[c]

    def row_owner(self, r: int) -> Equation:
        return self._row_owner[r]

    def unpack(self, d):
        """Split ``d`` (..., n) into ``{"a": (..., NB, 6), "f": .., "tau": (..., nv), "fx": .., "qdd": ..}``."""
        NB, nv = self.model.nbodies, self.model.nv
        out, off = {}, 0
        for kind in KINDS:
            if kind in _JOINT_KINDS:
                out[kind] = d[..., off:off + nv]
                off += nv
            else:
                out[kind] = d[..., off:off + 6 * NB].reshape(d.shape[:-1] + (NB, 6))
                off += 6 * NB
        return out

    def __repr__(self):
        return f"Layout({self.model.name!r}: {self.n} variables, {self.nrows} Newton-Euler rows)"


class Kinematics(NamedTuple):
    """Per-state kinematic quantities a measurement's ``bias`` may use.

    ``Xup[i]`` = ``i_X_lambda(i)`` (:class:`~sparsedyn.model.spatial.Transform`), ``S[i]``
    (6, nv_i), ``v[i]`` (..., 6) body velocity in body coordinates; ``q`` (..., nq),
    ``qd`` (..., nv).
    """

    model: object
    q: object
    qd: object
    Xup: list
    S: list
    v: list
