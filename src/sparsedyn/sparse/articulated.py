"""Numeric phase of an articulated block: block Gaussian elimination with spatial arithmetic.

A diagonal block of whole bodies' ``{a_i, f_i, qdd_i}`` and ``{c(3a_i), c(3f_i), c(3tau_i)}``
pivoted in the articulated order (:func:`sparsedyn.sparse.ordering.articulated_order`: per body,
from the leaves to the root, ``f_i``, ``a_i``, then ``qdd_i``) is factored here body by body
rather than entry by entry.  The elimination is the same (same pivots, same Schur complements);
only its arithmetic is organised around the 6x6 blocks (Nori, "Inverse, forward and other dynamic
computations computationally optimized with sparse matrix factorizations", 2017, appendix A;
Featherstone, "Rigid Body Dynamics Algorithms", 2008, Table 7.1):

* the transforms are applied as ``Xup_i = (E, r)``, never as 6x6 matrices;
* the Schur complement that eliminating body ``i`` adds to its parent's ``c(3f), a`` block is
  symmetric, ``Xup_i^T Ia_i Xup_i`` with ``Ia_i = IA_i - U_i D_i^-1 U_i^T`` (``U_i = IA_i S_i``,
  ``D_i = S_i^T U_i``), and is formed by :func:`sparsedyn.model.spatial.transform_inertia`;
  ``Ia_i S_i = 0`` gives exact zeros (:func:`sparsedyn.algorithms.aba.articulated_transmitted`);
* the multipliers ``-Xup_i^T``, ``-Xup_i^T IA_i``, ``Xup_i^T U_i D_i^-1`` of the scalar LU are never
  stored: the substitutions apply them as products with these factors.

With the block's right-hand side split by rows into ``r_f``, ``r_a``, ``r_t`` (``A_K x_K = r``),
the rows read ``-f_i + I_i a_i + sum_j Xup_j^T f_j = r_f``, ``-a_i + Xup_i a_lambda + S_i qdd_i = r_a``,
``S_i^T f_i = r_t``, and the elimination gives ``f_i = IA_i a_i + pA_i``::

    factor   (leaves to root)  IA_i = I_i + sum_j Xup_j^T Ia_j Xup_j ;  U_i, D_i, D_i^-1, Ia_i
    forward  (leaves to root)  pA_i = -r_f,i + sum_j Xup_j^T pa_j ;  u_i = r_t,i - S_i^T pA_i
                               pa_i = pA_i - Ia_i r_a,i + U_i D_i^-1 u_i
    backward (root to leaves)  a'_i = Xup_i a_lambda - r_a,i ;  qdd_i = D_i^-1 (u_i - U_i^T a'_i)
                               a_i = a'_i + S_i qdd_i ;  f_i = IA_i a_i + pA_i

The pivots of ``D_i`` are those of its ``L^T D L`` factorization
(:func:`sparsedyn.algorithms.ltdl.spd_inverse`), which are the scalar LU's pivots for the articulated
order's dof sequence (a joint's dofs are pivoted last to first).  Everything the substitutions
need (``IA_i``, ``Ia_i``, ``U_i``, ``D_i^-1``, ``U_i D_i^-1``, ``Xup_i``, and ``S_i`` where it depends
on ``q``) is kept in slots of the
factor array ``W`` after the scalar LU's slots, so a factorization can be reused for several
right-hand sides.  Generic over backends (NumPy floats with batch axes, object arrays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..algorithms.aba import articulated_transmitted
from ..algorithms.rnea import armature_of
from ..algorithms.ltdl import spd_inverse
from ..model.spatial import Transform, apply_force_transpose, apply_motion, mv, rigid_structure, transform_inertia

__all__ = ["BodyStep", "articulated_plan", "factor_articulated", "substitute_articulated"]


@dataclass(eq=False)
class BodyStep:
    """One body of an articulated block, in pivot order.

    ``body``, ``parent`` (global indices; ``parent_in``: the parent belongs to the block);
    ``zf``, ``za``, ``zq``: block positions (pivot order) of ``f_i``, ``a_i`` (6 each) and
    ``qdd_i`` (``nv_i``, by dof; none when ``qdd_i`` is known, ``nv = 0``: hybrid dynamics);
    ``slots``: ``{name: first slot}`` of ``IA``, ``U``, ``Dinv``, ``S`` (a joint whose ``S`` depends
    on ``q``) and (with a parent in the block)
    ``Ia``, ``UDinv``, ``E``, ``r`` in ``W``; ``nv``: the joint's dofs.
    """

    body: int
    parent: int
    parent_in: bool
    zf: np.ndarray
    za: np.ndarray
    zq: np.ndarray
    nv: int
    slots: dict


def articulated_plan(pattern, blk, slot_base):
    """The :class:`BodyStep` list of articulated block ``blk`` and the next free slot."""
    L = pattern.layout
    model = L.model
    pos = {(int(r), int(c)): k for k, (r, c) in enumerate(zip(blk.rows, blk.cols))}
    bodies = []
    for r in blk.rows.tolist():
        e = pattern.row_owner(r)
        if e.kind == "3f" and r == e.offset:
            bodies.append(e.body)
    inblock = set(bodies)
    steps, nxt = [], slot_base
    for i in bodies:
        ef, ea, et = L.eq("3f", i), L.eq("3a", i), L.eq("3tau", i)
        f, a, q = L.var("f", i), L.var("a", i), L.var("qdd", i)
        nv = q.size if (et.offset, q.offset) in pos else 0     # 0: qdd_i known (hybrid dynamics)
        zf = np.array([pos[ef.offset + k, f.offset + k] for k in range(6)], dtype=np.int64)
        za = np.array([pos[ea.offset + k, a.offset + k] for k in range(6)], dtype=np.int64)
        zq = np.array([pos[et.offset + k, q.offset + k] for k in range(nv)], dtype=np.int64)
        p = int(model.parent[i])
        sizes = {"IA": 36}
        if nv:
            sizes.update(U=6 * nv, Dinv=nv * nv)
            if not model.joints[i].constant_subspace:
                sizes.update(S=6 * nv)           # S_i(q), for the substitutions
        if p in inblock:
            if nv:
                sizes.update(Ia=36, UDinv=6 * nv)
            sizes.update(E=9, r=3)
        slots = {}
        for name, size in sizes.items():
            slots[name] = nxt
            nxt += size
        steps.append(BodyStep(i, p, p in inblock, zf, za, zq, nv, slots))
    return steps, nxt


def _put(W, start, x, shape):
    """Store ``x`` (batch + shape) in slots ``start ...`` of ``W`` (slots first)."""
    n = int(np.prod(shape, dtype=int))
    batch = W.shape[1:]
    W[start:start + n] = np.moveaxis(np.broadcast_to(x, batch + shape).reshape(batch + (n,)), -1, 0)


def _get(W, start, shape):
    n = int(np.prod(shape, dtype=int))
    return np.moveaxis(W[start:start + n], 0, -1).reshape(W.shape[1:] + shape)


def _subspace(model, i, S):
    """Joint ``i``'s motion subspace: the constant one (its structural zeros kept), else ``S[i]`` of the state."""
    joint = model.joints[i]
    return joint.motion_subspace() if joint.constant_subspace else S[i]


def _stored_subspace(model, st, W):
    """The ``S_i`` of body step ``st``: the constant one, or the state's, as :func:`factor_articulated` stored it."""
    return _get(W, st.slots["S"], (6, st.nv)) if "S" in st.slots else model.joints[st.body].motion_subspace()


def factor_articulated(model, blk, W, Xup, S, monitor=None):
    """Factor articulated block ``blk`` (``blk.plan``) into ``W`` (nslots,) + batch; ``Xup``, ``S``: the
    state's joint transforms and motion subspaces (a joint's ``S_i(q)`` is kept in ``W`` for the
    substitutions where it depends on ``q``).  Writes the dof pivots ``D`` into ``W[blk.piv]``; ``monitor`` (float checks)
    sees each of them with the entries of ``U_i = IA_i S_i`` as its scale."""
    check = monitor is not None and monitor.wants(blk)
    if check:
        monitor.checked += 1
    batch = W.shape[1:]
    IA = {}
    for st in blk.plan:
        i = st.body
        Si = _subspace(model, i, S)
        IAi = IA.pop(i, 0) + rigid_structure(model.inertia[i])
        _put(W, st.slots["IA"], IAi, (6, 6))
        if not st.nv:                  # a known qdd_i: the whole IA_i is passed on (Ia_i = IA_i)
            if st.parent_in:
                IA[st.parent] = IA.get(st.parent, 0) + transform_inertia(Xup[i], IAi)
                _put(W, st.slots["E"], Xup[i].E, (3, 3))
                _put(W, st.slots["r"], Xup[i].r, (3,))
            if check:
                for k in sorted(st.zf.tolist() + st.za.tolist()):
                    monitor.pivot(blk, k, W[blk.piv[k]], W[blk.piv[k]], None, None)
            continue
        U = IAi @ Si
        arm = armature_of(model, i)                  # rotor inertia: the armature_i qdd_i of the tau rows
        St = np.swapaxes(Si, -1, -2)
        D = St @ U if arm is None else St @ U + np.diag(arm)
        piv = {}
        Dinv = spd_inverse(D, check=lambda k, d: piv.__setitem__(k, d))
        for k in range(st.nv):
            W[blk.piv[st.zq[k]]] = np.broadcast_to(piv[k], batch)
        if check:                      # the constant -1 pivots of f_i, a_i, then D's, in pivot order
            # scale of a dof pivot: the entries of its column U = IA S (the scalar LU's L column and
            # U row hold these, transformed by Xup_i)
            scale = np.moveaxis(np.broadcast_to(U, batch + (6, st.nv)).reshape(batch + (6 * st.nv,)), -1, 0)
            for k in sorted(st.zf.tolist() + st.za.tolist() + st.zq.tolist()):
                val = W[blk.piv[k]]
                monitor.pivot(blk, k, val, val, scale if k in st.zq else None, None)
        _put(W, st.slots["U"], U, (6, st.nv))
        _put(W, st.slots["Dinv"], Dinv, (st.nv, st.nv))
        if "S" in st.slots:
            _put(W, st.slots["S"], Si, (6, st.nv))
        if st.parent_in:
            X = Xup[i]
            UDinv = U @ Dinv
            Ia = articulated_transmitted(IAi, UDinv, U, None if "S" in st.slots else Si, arm)
            IA[st.parent] = IA.get(st.parent, 0) + transform_inertia(X, Ia)
            _put(W, st.slots["Ia"], Ia, (6, 6))
            _put(W, st.slots["UDinv"], UDinv, (6, st.nv))
            _put(W, st.slots["E"], X.E, (3, 3))
            _put(W, st.slots["r"], X.r, (3,))


def substitute_articulated(model, blk, W, z):
    """Solve ``A_K x_K = z`` for articulated block ``blk`` with its factors in ``W``; ``z`` (m,) + batch in
    pivot order, overwritten by the solution (position ``k``: column ``blk.cols[k]``)."""
    rhs = lambda p: np.moveaxis(z[p], 0, -1)          # noqa: E731  (batch + (len(p),))
    pA, acc = {}, {}
    u = {}
    for st in blk.plan:                               # forward: articulated bias forces, leaves to root
        i = st.body
        pA[i] = acc.pop(i, 0) - rhs(st.zf)
        if st.nv:
            u[i] = rhs(st.zq) - mv(np.swapaxes(_stored_subspace(model, st, W), -1, -2), pA[i])
        if st.parent_in:
            if st.nv:
                Ia = _get(W, st.slots["Ia"], (6, 6))
                UDinv = _get(W, st.slots["UDinv"], (6, st.nv))
                pa = pA[i] - mv(Ia, rhs(st.za)) + mv(UDinv, u[i])
            else:
                pa = pA[i] - mv(_get(W, st.slots["IA"], (6, 6)), rhs(st.za))
            X = Transform(_get(W, st.slots["E"], (3, 3)), _get(W, st.slots["r"], (3,)))
            acc[st.parent] = acc.get(st.parent, 0) + apply_force_transpose(X, pa)
    a = {}
    for st in reversed(blk.plan):                     # backward: accelerations, root to leaves
        i = st.body
        a1 = -rhs(st.za)
        if st.parent_in:
            X = Transform(_get(W, st.slots["E"], (3, 3)), _get(W, st.slots["r"], (3,)))
            a1 = apply_motion(X, a[st.parent]) + a1
        out = []
        if st.nv:
            U = _get(W, st.slots["U"], (6, st.nv))
            qdd = mv(_get(W, st.slots["Dinv"], (st.nv, st.nv)), u[i] - mv(np.swapaxes(U, -1, -2), a1))
            a[i] = a1 + mv(_stored_subspace(model, st, W), qdd)
            out.append((st.zq, qdd))
        else:
            a[i] = a1
        f = mv(_get(W, st.slots["IA"], (6, 6)), a[i]) + pA[i]
        for p, x in out + [(st.za, a[i]), (st.zf, f)]:
            z[p] = np.moveaxis(np.broadcast_to(x, z.shape[1:] + x.shape[-1:]), -1, 0)
