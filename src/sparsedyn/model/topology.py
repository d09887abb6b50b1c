"""The tables derived from a frozen :class:`~sparsedyn.Model`, owned by the model: ``model.topology``.

Every table an algorithm reads on each call and that depends on the model alone (the ancestors of
each body, the bodies of each depth, the dofs on the path from the root to each body, the pairs of
dofs on one branch, the ancestors of each dof in the expanded tree, the quaternion blocks of ``q``,
the joints' motion subspaces and the model's constants stacked for array passes) is derived here,
and only here.  The Model makes its :class:`Topology` when it is built; each table is computed on
its first use (a property computed once: the model is frozen, so it never changes) and lives as
long as the model.  Algorithms derive their own small tables from these per call, or read them
directly.  What is derived once from a model and is neither structure nor state (derivative programs
traced for it, methods compiled for it, analyses) lives in :func:`model_store`.  No module keeps
tables per model anywhere else (a test of the package reads every module for such tables).
State-dependent results are never kept here.

Names (Featherstone's where the book has one): ``lambda`` (``dof_parent``) is the parent of each
dof in the expanded tree, ``above[i, j] = 1`` when body ``j`` is ``i`` or an ancestor of ``i``
(the support of ``i``: the joints that move it), ``below`` its transpose (the subtree).
"""

from __future__ import annotations

import weakref
from functools import cached_property
from typing import NamedTuple

import numpy as np

from .joints import Joint
from .spatial import Transform, axes_rotation, axis_constants, rigid_inertia, rigid_structure

__all__ = ["Topology", "JointGroup", "Revolutes", "dof_ancestors", "model_store"]


def _readonly(*arrays):
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False
    return arrays[0] if len(arrays) == 1 else arrays


def dof_ancestors(lam) -> tuple:
    """Per dof ``k`` of the expanded-tree parent array ``lam`` (``lam[k] < k``, -1 for the world):
    ``(anc, I, J, pos)``, its proper ancestors ``anc`` (parent first) and the pairs ``(I[p], J[p])``
    of them with ``J[p]`` an ancestor-or-self of ``I[p]`` (``pos[p]``: the index of ``I[p]`` in
    ``anc``), as index arrays: the entries the two inner loops of the ``L^T D L`` factorization
    visit for ``k`` (Featherstone, *Efficient factorization of the joint-space inertia matrix for
    branched kinematic trees*, 2005)."""
    plan = []
    for k in range(len(lam)):
        anc, i = [], lam[k]
        while i >= 0:
            anc.append(i)
            i = lam[i]
        # anc is one path: the ancestors of anc[n] are its later entries
        pairs = [(n, i, j) for n, i in enumerate(anc) for j in anc[n:]]
        pos, I, J = zip(*pairs) if pairs else ((), (), ())
        plan.append(_readonly(*(np.array(x, dtype=int) for x in (anc, I, J, pos))))
    return tuple(plan)


class JointGroup(NamedTuple):
    """Bodies whose joints share one ``jcalc`` (equal joints; revolutes about any constant axes):
    ``joint`` (a joint, or :class:`Revolutes`), ``bodies`` (n,), their coordinates ``qidx`` (n, nq)
    and their tree transforms ``Xtree`` stacked (E (n, 3, 3), r (n, 3))."""

    joint: object
    bodies: np.ndarray
    qidx: np.ndarray
    Xtree: Transform


class Revolutes:
    """Revolute joints about different constant axes (n, 3) as one joint group: ``jcalc`` of the n
    joints at once (the same operations per joint as their own ``jcalc``; one NumPy call for all)."""

    nq = 1

    def __init__(self, axes):
        self.constants = axis_constants(np.stack(axes))

    def jcalc(self, q):
        """``(XJ, None)`` for coordinates ``q`` (..., n, 1): ``E`` (..., n, 3, 3), ``r = 0``."""
        E = axes_rotation(self.constants, q[..., 0])
        return Transform(E, np.zeros(E.shape[:-1], dtype=E.dtype)), None


_REVOLUTE = ("revolute", "continuous")

#: ``{id(model): {kind: table}}``: what is derived once from each live model and is neither its
#: structure (its :class:`Topology`) nor a state (:func:`model_store`).
_stores: dict = {}


def model_store(model, kind) -> dict:
    """The table ``kind`` (a dict the caller fills) of what is derived once from ``model`` (a Model or
    a compiled model) and is neither structure nor state: derivative programs traced for it, methods
    compiled for it, structural analyses.  Kept for as long as ``model`` lives, keyed by ``id`` (as
    the compiler's table of native callables, :func:`sparsedyn.kernels.native_calls`) and emptied by
    ``weakref.finalize`` when it dies, so the frozen Model carries none of it."""
    key = id(model)
    tables = _stores.get(key)
    if tables is None:
        tables = {}
        if _stores.setdefault(key, tables) is tables:           # this thread made it
            weakref.finalize(model, _forget_store, key, tables)
        tables = _stores[key]
    return tables.setdefault(kind, {})


def _forget_store(key, tables):
    # called as the model dies, before its id can be reused
    if _stores.get(key) is tables:
        del _stores[key]


class Topology:
    """The derived tables of one model (see the module docstring).  Holds the model's (frozen)
    arrays, not the model, so that a model and its topology form no reference cycle.

    Body tables: ``above`` (NB, NB) int, ``below`` (NB, NB) float, ``support`` (NB, NB) float
    (``above`` as floats), ``levels`` (the bodies of each depth ``>= 1`` with their parents, ``(L, P)``
    index arrays, root side first), ``roots``, ``nonroot``, ``root_of`` (NB,), ``parent_or_pad`` (NB,)
    (``NB`` for "no parent": the index of an appended zero row), ``chains`` (per body, and for the world
    as ``chains[-1]``: the bodies from the root down, their dofs and each dof's body).

    Dof tables: ``dof_parent`` (lambda, a list), ``dof_body`` (nv,), ``dofs`` (per body, the dofs
    that move it), ``dof_to_body`` (nv, NB) float, ``ltdl_plan`` (:func:`dof_ancestors`),
    ``branch_pairs``, ``multi_dof``, ``free_roots``, ``S`` (nv, 6) the motion subspaces stacked by dof.

    Configuration tables: ``quaternions`` (joints, index array (k, 4) into ``q``),
    ``quaternion_sums`` (4k, k), ``constant_blocks(method)``.

    Constants stacked for array passes: ``joint_groups``, ``group_order``, ``Xtree``, ``inertia``
    (a :class:`~sparsedyn.model.spatial.RigidInertia` of (NB,) arrays), ``own_inertia``.
    """

    def __init__(self, model):
        self.nbodies, self.nv = model.nbodies, model.nv
        self.parent, self.depth, self.joints = model.parent, model.depth, model.joints
        self.q_start, self.v_start, self.subtree_end = model.q_start, model.v_start, model.subtree_end
        self.dof_body = model.dof_body
        self.dof_parent = [int(p) for p in model.dof_parent]
        self._Xtree, self._inertia, self._armature = model.Xtree, model.inertia, model.armature

    def __getstate__(self):
        """Pickled without the computed tables (they are computed again on first use)."""
        keep = ("nbodies", "nv", "parent", "depth", "joints", "q_start", "v_start", "subtree_end", "dof_body",
                "dof_parent", "_Xtree", "_inertia", "_armature")
        return {k: self.__dict__[k] for k in keep}

    def ancestors(self, i) -> list:
        """Bodies from ``i`` up to the root, ``i`` first (empty for the world, ``i = -1``)."""
        out = []
        while i >= 0:
            out.append(int(i))
            i = self.parent[i]
        return out

    def _dof_range(self, i):
        return np.arange(int(self.v_start[i]), int(self.v_start[i]) + self.joints[i].nv)

    # --- bodies ---------------------------------------------------------------------------------
    @cached_property
    def above(self) -> np.ndarray:
        NB = self.nbodies
        above = np.zeros((NB, NB), int)                     # above[i, j] = 1: j is i or an ancestor of i
        for i in range(NB):
            above[i, self.ancestors(i)] = 1
        return _readonly(above)

    @cached_property
    def below(self) -> np.ndarray:
        return _readonly(self.above.T.astype(float))

    @cached_property
    def support(self) -> np.ndarray:
        return _readonly(self.above.astype(float))

    @cached_property
    def levels(self) -> tuple:
        parent, depth = np.asarray(self.parent, int), np.asarray(self.depth, int)
        return tuple(_readonly(np.flatnonzero(depth == d), parent[depth == d])
                     for d in range(1, int(depth.max(initial=0)) + 1))

    @cached_property
    def roots(self) -> np.ndarray:
        return _readonly(np.flatnonzero(np.asarray(self.parent) < 0))

    @cached_property
    def nonroot(self) -> np.ndarray:
        return _readonly(np.flatnonzero(np.asarray(self.parent) >= 0))

    @cached_property
    def root_of(self) -> np.ndarray:
        return _readonly(np.array([self.ancestors(i)[-1] for i in range(self.nbodies)], int))

    @cached_property
    def parent_or_pad(self) -> np.ndarray:
        parent = np.asarray(self.parent, int)
        return _readonly(np.where(parent < 0, self.nbodies, parent))

    @cached_property
    def chains(self) -> tuple:
        """Per body ``i`` (and the world at index -1, the last entry): ``(chain, cols, dof_body)``, the
        bodies from the root down to ``i``, their dofs (index array) and each of those dofs' body."""
        out = []
        for i in list(range(self.nbodies)) + [-1]:
            chain = self.ancestors(i)[::-1]
            cols = np.concatenate([self._dof_range(j) for j in chain] + [np.zeros(0, int)])
            out.append((tuple(chain),) + _readonly(cols, np.asarray(self.dof_body, int)[cols]))
        return tuple(out)

    # --- dofs -----------------------------------------------------------------------------------
    @cached_property
    def dofs(self) -> tuple:
        return tuple(_readonly(np.flatnonzero(self.support[i][self.dof_body])) for i in range(self.nbodies))

    @cached_property
    def dof_to_body(self) -> np.ndarray:
        d2b = np.zeros((self.nv, self.nbodies))
        d2b[np.arange(self.nv), self.dof_body] = 1.0
        return _readonly(d2b)

    @cached_property
    def ltdl_plan(self) -> tuple:
        return dof_ancestors(self.dof_parent)

    @cached_property
    def branch_pairs(self) -> tuple:
        """``(rd, cd, ra, ca, mirror)``: the dof pairs on one branch, as index arrays.  ``(rd, cd)``: the
        column's body is an ancestor of the row's or the same body; ``(ra, ca)``: the row's body is a
        strict ancestor of the column's (``mirror``: the index of ``(ca, ra)`` among the first kind)."""
        rd, cd, ra, ca = [], [], [], []
        for r in range(self.nv):
            j = int(self.dof_body[r])
            for k in self.ancestors(j):
                for c in self._dof_range(k):
                    rd.append(r), cd.append(int(c))
                    if k != j:
                        ra.append(int(c)), ca.append(r)
        where = {(r, c): n for n, (r, c) in enumerate(zip(rd, cd))}
        mirror = [where[(c, r)] for r, c in zip(ra, ca)]
        return _readonly(*(np.array(x, dtype=int) for x in (rd, cd, ra, ca, mirror)))

    @cached_property
    def multi_dof(self) -> np.ndarray:
        """The dofs of the joints with more than one dof."""
        return _readonly(np.array([d for i, j in enumerate(self.joints) if j.nv > 1 for d in self._dof_range(i)],
                                  dtype=int))

    @cached_property
    def free_roots(self) -> tuple:
        """``(cols, dofs, Sinv, armature, upper, rest)``: per root joint with six dofs and an
        invertible ``S``, its dofs ``cols``, the dofs of its tree ``dofs``, ``S^-1`` (6, 6) and the
        armature of ``cols`` (6,); then ``upper = triu_indices(nv, 1)`` and ``rest``, the dofs of no
        such joint."""
        cols, dofs, Sinv, arm = [], [], [], []
        for i, j in enumerate(self.joints):
            c = self._dof_range(i)
            S = np.asarray(j.motion_subspace(), dtype=float)
            if self.parent[i] < 0 and j.nv == 6 and np.linalg.matrix_rank(S) == 6:
                arm.append(np.asarray(self._armature, dtype=float)[c])
                end = int(self.subtree_end[i])
                cols.append(c)
                dofs.append(np.arange(c[0], int(self.v_start[end]) if end < self.nbodies else self.nv))
                Sinv.append(np.linalg.inv(S))
        rest = np.setdiff1d(np.arange(self.nv), np.concatenate(cols) if cols else [])
        _readonly(*cols, *dofs, *Sinv, *arm, rest)
        return tuple(cols), tuple(dofs), tuple(Sinv), tuple(arm), _readonly(*np.triu_indices(self.nv, 1)), rest

    @cached_property
    def S(self) -> np.ndarray:
        if not self.nbodies:
            return _readonly(np.zeros((0, 6)))
        return _readonly(np.concatenate([j.motion_subspace().T for j in self.joints], 0))

    # --- configurations -------------------------------------------------------------------------
    @cached_property
    def quaternions(self) -> tuple:
        """``(joint indices, index array (k, 4) into q)`` of the quaternions of the joints
        (:meth:`~sparsedyn.Joint.quaternions`)."""
        blocks = [(i, int(self.q_start[i]) + k) for i, j in enumerate(self.joints) for k in j.quaternions()]
        idx = np.array([np.arange(k, k + 4) for _, k in blocks], int).reshape(-1, 4)
        return tuple(i for i, _ in blocks), _readonly(idx)

    @cached_property
    def quaternion_sums(self) -> np.ndarray:
        """The float matrix (4k, k) with 1 where entry ``r`` of the quaternions' coordinates belongs to
        block ``r // 4`` (``|quat|^2`` of every block in one product)."""
        return _readonly(np.repeat(np.eye(len(self.quaternions[0])), 4, axis=0))

    def constant_blocks(self, method) -> tuple:
        """``(rows, cols, values, others)`` of the joint Jacobians ``method``
        (``"integrate_jacobians"`` or ``"difference_jacobians"``): the entries of the blocks of the
        joints whose ``method`` is the base class's (they do not read the state), the values of each
        of the two matrices, and the indices of the other joints."""
        return {"integrate_jacobians": self._integrate_blocks,
                "difference_jacobians": self._difference_blocks}[method]

    @cached_property
    def _integrate_blocks(self):
        return self._constant_blocks("integrate_jacobians")

    @cached_property
    def _difference_blocks(self):
        return self._constant_blocks("difference_jacobians")

    def _constant_blocks(self, method):
        rows, cols, values, others = [], [], ([], []), []
        for i, j in enumerate(self.joints):
            if getattr(type(j), method) is not getattr(Joint, method):
                others.append(i)
                continue
            r, c = np.meshgrid(self._dof_range(i), self._dof_range(i), indexing="ij")
            rows.append(r.ravel()), cols.append(c.ravel())
            for vals, B in zip(values, getattr(j, method)(None, None)):
                vals.append(np.asarray(B, dtype=float).ravel())
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, int)     # noqa: E731
        return cat(rows).astype(int), cat(cols).astype(int), tuple(cat(v) for v in values), others

    # --- constants stacked for array passes -----------------------------------------------------
    @cached_property
    def joint_groups(self) -> tuple:
        """:class:`JointGroup` s: equal joints (type, axis, pitch) share one ``jcalc``, revolutes one."""
        groups = {}
        for i, j in enumerate(self.joints):
            groups.setdefault("revolute" if j.type in _REVOLUTE else j, []).append(i)
        if "revolute" in groups:
            groups["revolute"] = groups["revolute"], Revolutes([self.joints[i].a for i in groups["revolute"]])
        groups = [(j, b) if j != "revolute" else b[::-1] for j, b in groups.items()]
        return tuple(JointGroup(j, np.array(b), np.array([np.arange(int(self.q_start[i]), int(self.q_start[i]) + j.nq)
                                                     for i in b]).reshape(len(b), j.nq),
                           Transform(np.stack([self._Xtree[i].E for i in b]), np.stack([self._Xtree[i].r for i in b])))
                for j, b in groups)

    @cached_property
    def group_order(self) -> np.ndarray:
        """The bodies in the order of :attr:`joint_groups` (``take(group_order)`` puts
        group-concatenated rows back in body order)."""
        if not self.nbodies:
            return np.zeros(0, int)
        return _readonly(np.argsort(np.concatenate([g.bodies for g in self.joint_groups]), kind="stable"))

    @cached_property
    def Xtree(self) -> Transform | None:
        if not self.nbodies:
            return None
        return Transform(np.stack([X.E for X in self._Xtree]), np.stack([X.r for X in self._Xtree]))

    @cached_property
    def inertia(self):
        """The bodies' inertias as parameters, a :class:`~sparsedyn.model.spatial.RigidInertia` of (NB,) arrays."""
        return rigid_inertia(self._inertia)

    @cached_property
    def own_inertia(self) -> tuple:
        """Per body ``(scale, smallest)``: ``scale = max|I_i| max(1, max|S_i|)^2`` and the smallest
        eigenvalue of the body's own inertia along its joint's motion ``S_i^T I_i S_i`` (``inf`` for a
        joint without dofs); :func:`~sparsedyn.algorithms.aba.own_inertia_scales` compares the two."""
        out = []
        for i, joint in enumerate(self.joints):
            S = np.asarray(joint.motion_subspace(), dtype=float)
            Smax = max(1.0, float(np.max(np.abs(S), initial=0.0)))
            I = np.asarray(rigid_structure(self._inertia[i]), dtype=float)
            own = S.T @ I @ S
            out.append((float(np.max(np.abs(I), initial=0.0)) * Smax ** 2,
                        float(np.linalg.eigvalsh(own).min()) if own.size else np.inf))
        return tuple(out)
