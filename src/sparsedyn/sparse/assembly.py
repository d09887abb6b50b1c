"""Assembly of ``[D; D_Y]`` and ``[b; b_Y]`` in a fixed, worst-case sparse layout.

Offline (:class:`SystemPattern`, once per problem): every scalar entry of the
stacked matrix ``A = [D; D_Y]`` (Nori, eq. 4 and 16) that can be nonzero at
*some* state gets an entry number ``e``, a row, a column and a class:

* ``ONE``: the constant +1 or -1 (the ``-1_6``, ``-1_n`` blocks of eq. 4, the
  ``1`` of a known-variable measurement, unit entries of ``S_i``);
* ``CONST``: another nonzero model constant (entries of ``S_i``, ``I_i``, a
  measurement matrix); exact zeros of these constants are structural zeros;
* ``STATE``: an entry of a joint-dependent transform, ``iX_lambda(i)`` in
  ``c(3a_i)`` (eq. 4a) or ``iX*_j = jX_i^T`` in ``c(3f_i)`` (eq. 4d), that is
  not a structural constant (an entry of such a transform that is the same at
  every configuration, e.g. the 1 on a revolute joint's axis, is ``ONE`` or
  ``CONST``); or an entry of a motion subspace ``S_i(q)`` (in ``c(3a_i)`` and,
  transposed, in ``c(3tau_i)``) of a joint whose ``S`` depends on ``q`` (Euler-angle
  spherical, universal, composite and custom joints), that is not a structural constant.

The worst-case pattern of every state-dependent block is the union of its
nonzeros over all configurations (Nori, section IV-D).  It is derived from
symbols, never from numeric samples: the joint transforms and motion subspaces
are computed once by the kernels themselves on a configuration of symbolic
scalars (:class:`~sparsedyn.symbolic.ir.Sym`), and the one symbolic layer folds
every structural constant.  An entry of ``motion_matrix(Xup_i)`` or of ``S_i``
is a **structural zero** exactly when the trace folds it to the constant 0, a
``ONE`` or ``CONST`` entry exactly when it folds to that constant, and a
``STATE`` entry when it stays a symbol.  The pattern therefore does not depend
on joint limits, on samples or on the configuration (a URDF joint with
``lower = upper`` still turns when a state says so).
Tiny but nonzero model constants (the ``cos`` of a URDF angle rounded near
``pi/2`` gives entries of order 1e-15) stay in the pattern: dropping them would
change the model and cost forward dynamics many digits (Baxter, Kinova).

Online (:func:`d_values`, :func:`rhs_values`): only the values change.  The
value array ``vals`` (nnz, ...) follows the entry order; ``vals[e]`` of a
constant entry is the constant, of a ``STATE`` entry the element of the motion
matrix ``motion_matrix(Xup_i)`` it was taken from.  Arrays are *entry-first*:
a value array has shape ``(nnz,) + batch``, a right-hand side ``(nrows,) + batch``,
so that one index array selects entries of every state of a batch.  Both
kernels are generic: NumPy floats with batch axes, or NumPy object arrays (the
traced form, in which constants are Python numbers and +-1 are the ints 1 and
-1, so a tracer folds them).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.kinematics import joint_transforms, velocity_pass, velocity_products
from ..model.spatial import apply_motion, cross_force, motion_matrix, mv, rigid_structure
from ..symbolic.ir import Graph, Sym
from .variables import Equation, Kinematics

__all__ = ["ONE", "CONST", "STATE", "SystemPattern", "TransformBlock", "traced_transforms", "transform_patterns", "d_values",
           "rhs_values"]

ONE, CONST, STATE = 0, 1, 2
CLASS_NAMES = ("one", "const", "state")


def traced_transforms(model):
    """``motion_matrix(Xup_i)`` and ``S_i`` of every body at a configuration of fresh symbols.

    Returns ``(M, S)``: lists of object arrays (6, 6) and (6, nv_i) whose entries
    are :class:`~sparsedyn.symbolic.ir.Sym` (state-dependent) or numbers
    (structural constants; ``0`` a structural zero).  Computed by
    :func:`~sparsedyn.algorithms.kinematics.joint_transforms` itself, so the
    pattern is that of the code the online phase runs.
    """
    g = Graph()
    q = g.inputs(0, (model.nq,))
    Xup, S = joint_transforms(model, q)
    M = [np.asarray(motion_matrix(X), dtype=object) for X in Xup]
    return M, [np.asarray(Si, dtype=object) for Si in S]


def _structural_zero(x) -> bool:
    return not isinstance(x, Sym) and float(x) == 0.0


def transform_patterns(model):
    """Worst-case nonzero pattern (NB, 6, 6) bool of ``motion_matrix(Xup_i)``, from the trace
    (:func:`traced_transforms`): ``False`` exactly where the entry folds to the constant 0."""
    M, _ = traced_transforms(model)
    out = np.zeros((model.nbodies, 6, 6), bool)
    for i, Mi in enumerate(M):
        out[i] = [[not _structural_zero(x) for x in row] for row in Mi]
    return out


class TransformBlock(NamedTuple):
    """A 6x6 state-dependent block of ``A``: ``motion_matrix(Xup_body)`` (``kind == "X"``, rows
    ``c(3a_body)``, columns ``a_parent``, eq. 4a) or its transpose (``"XT"``, rows ``c(3f_parent)``,
    columns ``f_body``, eq. 4d), at rows ``row0 .. row0+5`` and columns ``col0 .. col0+5``;
    ``entries``: its entry numbers (the worst-case nonzeros).  A substitution may apply it as
    ``apply_motion`` / ``apply_force_transpose`` of the transform rather than entry by entry."""

    body: int
    kind: str
    row0: int
    col0: int
    entries: np.ndarray


class _Entries:
    """The entries of ``A`` as :class:`SystemPattern` lists them: ``rows``, ``cols``, ``cls``, ``const``,
    ``source`` and the transform blocks ``tblocks``; ``Mt``, ``St``, ``masks``: the traced transforms
    and subspaces (:func:`traced_transforms`) and the transforms' worst-case patterns."""

    def __init__(self, model, Mt, St, masks):
        self.model, self.Mt, self.St, self.masks = model, Mt, St, masks
        self.rows, self.cols, self.cls, self.const, self.source, self.tblocks = [], [], [], [], [], []

    def add(self, r, c, value=None, src=-1):
        self.rows.append(r)
        self.cols.append(c)
        if src >= 0:
            self.cls.append(STATE)
            self.const.append(np.nan)
        else:
            self.cls.append(ONE if abs(value) == 1.0 else CONST)
            self.const.append(float(value))
        self.source.append(src)

    def matrix(self, r0, c0, M):
        """The nonzeros of the constant matrix ``M`` at rows ``r0 ..``, columns ``c0 ..``."""
        for r, c in zip(*np.nonzero(M)):
            self.add(r0 + r, c0 + c, M[r, c])

    def subspace(self, r0, c0, i, transpose):
        """``S_i`` (eq. 4a) or ``S_i^T`` (eq. 4e): a traced entry is STATE (gathered online from ``S_i``,
        source ``36 NB + 6 k + r`` for element ``(r, k - first dof of i)``), a folded one a constant."""
        model = self.model
        k0 = model.v_slice(i).start
        for (r, c), x in np.ndenumerate(self.St[i].T if transpose else self.St[i]):
            if _structural_zero(x):
                continue
            rr, cc = (c, r) if transpose else (r, c)
            if isinstance(x, Sym):
                self.add(r0 + r, c0 + c, src=36 * model.nbodies + 6 * (k0 + cc) + rr)
            else:
                self.add(r0 + r, c0 + c, float(x))

    def transform(self, r0, c0, i, transpose):
        """``motion_matrix(Xup_i)`` (eq. 4a) or its transpose (eq. 4d): a traced entry is STATE (gathered
        online), a folded one a constant; the whole block is recorded as a :class:`TransformBlock`."""
        e0 = len(self.rows)
        for rr, cc in zip(*np.nonzero(self.masks[i])):
            x = self.Mt[i][rr, cc]
            r, c = (cc, rr) if transpose else (rr, cc)
            if isinstance(x, Sym):
                self.add(r0 + r, c0 + c, src=36 * i + 6 * rr + cc)
            else:
                self.add(r0 + r, c0 + c, float(x))
        self.tblocks.append((i, "XT" if transpose else "X", r0, c0, range(e0, len(self.rows))))


class SystemPattern:
    """Worst-case scalar pattern of ``A = [D; D_Y]`` for a :class:`~sparsedyn.sparse.Problem`.

    Attributes (all plain ints/floats, fixed for the problem's lifetime):

    ``n`` columns (variables), ``nrows`` rows (``12 NB + nv`` Newton-Euler rows,
    then the measurement rows); ``equations``: Newton-Euler row blocks followed by
    one :class:`~sparsedyn.sparse.Equation` of kind ``"y"`` per measurement;
    ``rows``, ``cols``, ``cls`` (nnz,): entry coordinates and class;
    ``const`` (nnz,): the value of constant entries (NaN for ``STATE``);
    ``source`` (nnz,): for a ``STATE`` entry ``36 i + 6 r + c``, the element
    ``(r, c)`` of ``motion_matrix(Xup_i)``, or ``36 NB + 6 k + r``, the element ``r`` of
    column ``k`` of the model's ``S`` (dof ``k``, element ``(r, k - first dof of i)`` of ``S_i``),
    else -1; ``transform_blocks``: the
    :class:`TransformBlock` each ``STATE`` entry of a transform belongs to.
    """

    def __init__(self, problem):
        model, L = problem.model, problem.layout
        self.problem, self.layout = problem, L
        self.n = L.n
        Mt, St = traced_transforms(model)
        self.masks = np.array([[[not _structural_zero(x) for x in row] for row in Mi] for Mi in Mt],
                              dtype=bool).reshape(model.nbodies, 6, 6)
        E = _Entries(model, Mt, St, self.masks)
        children = [[] for _ in range(model.nbodies)]
        for i in range(model.nbodies):
            if model.parent[i] >= 0:
                children[model.parent[i]].append(i)
        for i in range(model.nbodies):
            a, f, tau, fx, qdd = (L.var(k, i).offset for k in ("a", "f", "tau", "fx", "qdd"))
            # c(3a_i): -a_i + iX_lambda a_lambda + S_i qdd_i (+ c_i in b)          (4a, 4b)
            r = L.eq("3a", i).offset
            E.matrix(r, a, -np.eye(6))
            p = model.parent[i]
            if p >= 0:
                E.transform(r, L.var("a", p).offset, i, False)
            E.subspace(r, qdd, i, False)
            # c(3f_i): -f_i + I_i a_i - fx_i + sum_j iX*_j f_j (+ nu_i in b)       (4c, 4d)
            r = L.eq("3f", i).offset
            E.matrix(r, f, -np.eye(6))
            E.matrix(r, a, rigid_structure(model.inertia[i]))   # exact zeros, as RNEA and ABA use it
            E.matrix(r, fx, -np.eye(6))
            for j in children[i]:
                # iX*_j = (jX_i)^T: element (rr, cc) is element (cc, rr) of motion_matrix(Xup_j)
                E.transform(r, L.var("f", j).offset, j, True)
            # c(3tau_i): -tau_i + S_i^T f_i + armature_i qdd_i                       (4e; rotor inertia)
            r = L.eq("3tau", i).offset
            E.matrix(r, tau, -np.eye(model.joints[i].nv))
            E.subspace(r, f, i, True)
            E.matrix(r, qdd, np.diag(model.armature[model.v_slice(i)]))   # zero armature: no entry
        # measurement rows: sum_k M_k d[var_k] (- y + bias in b_Y)
        equations = list(L.equations)
        r = L.nrows
        for m in problem.measurements:
            equations.append(Equation("y", -1, m.name, r, m.size))
            blocks = {}
            for var, M in m.terms:                       # several terms on one variable add up
                blocks[var] = blocks.get(var, 0) + M
            for var, M in blocks.items():
                E.matrix(r, var.offset, M)
            r += m.size
        self.nrows = r
        self.equations = tuple(equations)
        self._row_owner = [e for e in self.equations for _ in range(e.size)]
        self.rows = np.array(E.rows, dtype=np.int64)
        self.cols = np.array(E.cols, dtype=np.int64)
        self.cls = np.array(E.cls, dtype=np.int8)
        self.const = np.array(E.const, dtype=float)
        self.source = np.array(E.source, dtype=np.int64)
        self.nnz = len(E.rows)
        self.transform_blocks = tuple(TransformBlock(j, kind, r0, c0, np.array(es, dtype=np.int64))
                                      for j, kind, r0, c0, es in E.tblocks if len(es))
        self._gathers(model)

    def _gathers(self, model):
        """The fixed gathers of the value kernel: constant entries, and the ``STATE`` entries by the
        body transform or joint subspace they come from."""
        self.const_pos = np.nonzero(self.cls != STATE)[0]
        self.const_values = self.const[self.const_pos]
        self.const_objects = np.empty(len(self.const_pos), dtype=object)
        self.const_objects[:] = [int(x) if abs(x) == 1.0 else float(x) for x in self.const_values]
        self.state_by_body, self.state_by_joint = [], []
        for i in range(model.nbodies):
            pos = np.nonzero((self.cls == STATE) & (self.source // 36 == i))[0]
            if len(pos):
                rc = self.source[pos] % 36
                self.state_by_body.append((i, pos, rc // 6, rc % 6))
            vs = model.v_slice(i)
            ks = self.source - 36 * model.nbodies
            pos = np.nonzero((self.cls == STATE) & (ks >= 6 * vs.start) & (ks < 6 * vs.stop))[0]
            if len(pos):
                self.state_by_joint.append((i, pos, ks[pos] % 6, ks[pos] // 6 - vs.start))

    def row_owner(self, r: int) -> Equation:
        return self._row_owner[r]

    def row_label(self, r: int) -> str:
        e = self._row_owner[r]
        return f"{e.label}.{r - e.offset}"

    def col_label(self, c: int) -> str:
        v = self.layout.column_owner(c)
        return v.component(c - v.offset)

    def dense(self, vals):
        """Dense ``A`` (nrows, n) of one float state's value array (tests, plots, fallback)."""
        A = np.zeros((self.nrows, self.n))
        np.add.at(A, (self.rows, self.cols), np.asarray(vals, float))
        return A

    def class_matrix(self):
        """(nrows, n) int: -1 for a structural zero, else the entry's class."""
        C = np.full((self.nrows, self.n), -1, dtype=np.int8)
        C[self.rows, self.cols] = self.cls
        return C


def d_values(pattern, Xup, batch, symbolic, S=None):
    """The value array ``vals`` (nnz,) + batch of ``A`` at the state whose transforms are ``Xup``
    and motion subspaces ``S`` (both from :func:`~sparsedyn.algorithms.kinematics.joint_transforms`;
    ``S`` may be omitted for a model whose joints all have a constant ``S``).

    Constant entries are copied; ``STATE`` entries are gathered from
    ``motion_matrix(Xup_i)`` and ``S_i``.  Only entries of the worst-case pattern are read.
    """
    if symbolic:
        vals = np.empty((pattern.nnz,) + batch, dtype=object)
        vals[pattern.const_pos] = pattern.const_objects.reshape((-1,) + (1,) * len(batch))
    else:
        vals = np.empty((pattern.nnz,) + batch)
        vals[pattern.const_pos] = pattern.const_values.reshape((-1,) + (1,) * len(batch))
    for i, pos, r, c in pattern.state_by_body:
        M = motion_matrix(Xup[i])
        vals[pos] = np.moveaxis(np.broadcast_to(M[..., r, c], batch + (len(pos),)), -1, 0)
    if pattern.state_by_joint and S is None:
        raise TypeError("d_values: the model has joints whose motion subspace depends on q; pass their S")
    for i, pos, r, c in pattern.state_by_joint:
        vals[pos] = np.moveaxis(np.broadcast_to(S[i][..., r, c], batch + (len(pos),)), -1, 0)
    return vals


def _put(b, rows, x, batch):
    b[rows] = np.moveaxis(np.broadcast_to(x, batch + x.shape[-1:]), -1, 0)


def rhs_values(pattern, q, qd, y, gravity, Xup, S, batch, symbolic):
    """The right-hand side ``[b; b_Y]`` (nrows,) + batch of Nori's eq. (5)/(16), ``A d + b = 0``.

    Velocities by eq. (2), ``v_i = iX_lambda v_lambda + S_i qd_i``; then::

        b[c(3a_i)] = c_i = v_i x S_i qd_i + cJ_i         (iX_0 a_0 + cJ_i for a root body, a_0 = -a_grav;
                                                           its vJ x vJ vanishes identically)
        b[c(3f_i)] = nu_i = v_i x* I_i v_i
        b[c(3tau_i)] = 0
        b[y_m] = bias_m(kin) - y[slot_m]

    ``cJ_i = Sdot_i qd_i`` is the velocity-product term of a joint whose ``S`` depends on ``q``
    (:meth:`~sparsedyn.Joint.bias`; RBDA section 4.4), the term RNEA and ABA add too.
    """
    problem = pattern.problem
    model, L = problem.model, problem.layout
    b = np.zeros((pattern.nrows,) + batch, dtype=object if symbolic else float)
    a_grav = np.concatenate([0 * gravity, gravity], -1)
    v, vJ = velocity_pass(model, Xup, S, qd)
    cv = velocity_products(model, q, qd, v, vJ)
    for i in range(model.nbodies):
        c = cv[i]
        if model.parent[i] < 0:
            c = apply_motion(Xup[i], -a_grav) if c is None else apply_motion(Xup[i], -a_grav) + c
        nu = cross_force(v[i], mv(rigid_structure(model.inertia[i]), v[i]))
        _put(b, L.eq("3a", i).slice, c, batch)
        _put(b, L.eq("3f", i).slice, nu, batch)
    kin = None
    for m, slot, eq in zip(problem.measurements, problem.slots, pattern.equations[len(L.equations):]):
        val = -y[..., slot]
        if m.bias is not None:
            if kin is None:
                kin = Kinematics(model, q, qd, Xup, S, v)
            val = m.bias(kin) + val
        _put(b, eq.slice, val, batch)
    return b
