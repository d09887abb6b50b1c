"""Analytical derivatives of the kinematics: frame velocities, accelerations and ``dJ/dt``.

Carpentier and Mansard, *Analytical derivatives of rigid body dynamics algorithms*
(RSS 2018).  Everything is computed in one frame per tree, the root body's
(``Xr_i = i_X_root``, :func:`~sparsedyn.algorithms.kinematics.root_transforms`),
taken as a frame fixed in space at the current instant: the formulas are those of
the paper's world frame, and a floating base keeps its six unit columns.  In that
frame joint ``k``'s motion subspace is the set of twists ``xi_k = Xr_k^-1 S_k``,
the body velocities and accelerations are sums over the ancestors::

    V_i = V_lambda(i) + xi_i v_i
    A_i = A_lambda(i) + xi_i a_i + V_i x xi_i v_i        (d/dt xi_i = V_i x xi_i)

and moving ``q`` along the tangent direction ``dq_k`` moves the whole subtree of
``k`` rigidly by the twist ``xi_k`` (every joint's tangent direction is a twist of
its child frame in child coordinates, see :meth:`sparsedyn.Joint.retract`), except
for the parts that come from above ``k``.  Hence, for a body ``i`` in ``k``'s subtree
(``V_l``, ``A_l``: those of ``k``'s parent)::

    dV_i/dq_k = xi_k x (V_i - V_l)
    dA_i/dq_k = xi_k x (A_i - A_l) + psi_k x (V_i - V_l),     psi_k = V_l x xi_k
    dV_i/dv_k = xi_k,   dA_i/dv_k = xi_k x V_i + phi_k,      phi_k = (V_l + V_k) x xi_k

(``dq_k`` a column of joint ``k``).  A quantity expressed in a frame on body ``i``
changes by ``-xi_k x`` of itself on top of that, which gives the ``local``
derivatives.  Tangent space as everywhere: ``d/d(dq) f(integrate(q, dq))`` at
``dq = 0``.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import kernel
from ..spatial import (Transform, apply_motion, apply_motion_inv, axes_rotation, axis_constants, compose, cross3,
                       cross_motion, cross_motion_products, rigid_inertia, skew)
from .derivatives import derivatives, varying_subspaces
from .kinematics import _check_reference, frame_acceleration, frame_jacobian, frame_velocity

__all__ = ["frame_velocity_derivatives", "frame_acceleration_derivatives", "frame_jacobian_time_variation",
           "RootMotion", "root_motion", "stacked", "broadcast_columns", "common_shape"]


class ModelCache:
    """Per-model constants (a frozen model's index tables and plans), held weakly like a
    ``WeakKeyDictionary`` (``get``, item assignment), with the last model's entry in front: the NumPy
    path asks for a dozen of them on every call, most often for the model it was last asked about."""

    __slots__ = ("_data", "_last")

    def __init__(self):
        self._data = weakref.WeakKeyDictionary()
        self._last = (_dead_ref, None)

    def get(self, model, default=None):
        ref, value = self._last
        if ref() is model:
            return value
        value = self._data.get(model, default)
        if value is not default:
            self._last = (weakref.ref(model, self._forget), value)
        return value

    def __setitem__(self, model, value):
        self._data[model] = value
        self._last = (weakref.ref(model, self._forget), value)

    def _forget(self, ref):
        """The last model is gone: drop its entry (held strongly in front)."""
        if self._last[0] is ref:
            self._last = (_dead_ref, None)


def _dead_ref():
    return None


def common_shape(*shapes):
    """``np.broadcast_shapes(*shapes)``, without its cost when the shapes are equal (one state)."""
    first = shapes[0]
    return first if all(x == first for x in shapes[1:]) else np.broadcast_shapes(*shapes)


def broadcast_columns(X: Transform):
    """``X`` with an axis for a set of vectors (..., n, 6) to act on."""
    return Transform(X.E[..., None, :, :], X.r[..., None, :])


def stacked(parts, shape):
    """Per-body arrays (..., n_i, k) broadcast to the batch ``shape`` and joined on the ``n`` axis."""
    parts = [np.broadcast_to(x, shape + x.shape[x.ndim - 2:]) for x in parts]
    return np.concatenate(parts, -2)


class Levels:
    """Structure of a model for level-by-level passes (computed once per model): ``levels``, the
    bodies of each depth ``>= 1`` with their parents (``(L, P)`` index arrays, root side first);
    ``roots`` and the other bodies, ``nonroot``; ``above`` (NB, NB), 1 where a body is an ancestor
    or self of another (a sum over ancestors is one product with it: ascending body order, so a
    traced sum is the recursion's chain of partial sums); ``root_of`` and ``parent_or_pad`` per
    body (``NB`` for "no parent": the index of an appended zero row); ``dof_body`` and the motion
    subspaces stacked by dof, ``S`` (nv, 6).

    For the NumPy path (float arrays, where one state costs what the number of array operations
    costs): ``below`` (NB, NB) float, ``above`` transposed (a subtree sum is one product with it);
    ``above_float``, ``above`` as floats (a product without a conversion);
    ``dof_sum`` (NB, nv) float, 1 where a dof belongs to a body (a sum over each body's dofs);
    ``jumps``, the index arrays of pointer jumping over ``NB + 1`` rows (the last, ``NB``, an
    appended identity): ``jumps[k][i]`` is the ``2^k``-th ancestor of ``i`` or ``NB``, and
    ``root_or_pad``, ``i`` for a body with a parent and ``NB`` for a root (see
    :func:`root_transforms_stacked`).  ``group_order``: the bodies in the order of
    ``joint_groups`` (``take(group_order)`` puts group-concatenated rows back in body order);
    ``float_groups``, the joint groups for :func:`stacked_joint_transforms` on floats
    (:func:`_float_group`); ``homogeneous_pad`` (NB + 1, 4, 4), the constant parts of the
    homogeneous matrices that :func:`root_transforms_stacked` jumps on floats;
    ``Xtree``: the bodies' tree transforms, stacked; ``inertia``: the bodies' inertias, a
    :class:`~sparsedyn.spatial.RigidInertia` of (NB,) arrays."""

    def __init__(self, model):
        NB = model.nbodies
        parent = np.asarray(model.parent, int)
        depth = np.asarray(model.depth, int)
        self.levels = [(np.flatnonzero(depth == d), parent[depth == d]) for d in range(1, int(depth.max(initial=0)) + 1)]
        self.roots = np.flatnonzero(parent < 0)
        self.nonroot = np.flatnonzero(parent >= 0)
        self.above = np.zeros((NB, NB), int)                # above[i, j] = 1: j is i or an ancestor of i
        for i in range(NB):
            self.above[i, model.ancestors(i)] = 1
        self.below = self.above.T.astype(float)
        self.above_float = self.above.astype(float)
        self.root_of = np.array([model.ancestors(i)[-1] for i in range(NB)], int)
        self.parent_or_pad = np.where(parent < 0, NB, parent)
        self.dof_body = np.asarray(model.dof_body, int)
        self.dof_sum = (self.dof_body[None, :] == np.arange(NB)[:, None]).astype(float)
        jump = np.append(self.parent_or_pad, NB)
        self.jumps = []
        while 1 << len(self.jumps) < len(self.levels):    # 2^k factors cover a chain of depth <= 2^k
            self.jumps.append(jump)
            jump = jump[jump]
        self.root_or_pad = np.append(np.where(parent < 0, NB, np.arange(NB)), NB)
        self.S = np.concatenate([j.motion_subspace().T for j in model.joints], 0) if NB else np.zeros((0, 6))
        groups = {}
        for i, j in enumerate(model.joints):              # equal joints (type, axis, pitch) share one jcalc,
            groups.setdefault("revolute" if j.type in _REVOLUTE else j, []).append(i)   # revolutes one
        if "revolute" in groups:
            groups["revolute"] = groups["revolute"], _Revolutes([model.joints[i].a for i in groups["revolute"]])
        groups = [(j, b) if j != "revolute" else b[::-1] for j, b in groups.items()]
        self.joint_groups = [(j, np.array(b), np.array([np.arange(model.q_slice(i).start, model.q_slice(i).stop)
                                                         for i in b]).reshape(len(b), j.nq),
                              Transform(np.stack([model.Xtree[i].E for i in b]), np.stack([model.Xtree[i].r for i in b])))
                             for j, b in groups]
        self.inertia = rigid_inertia(model.inertia)            # the model's (frozen) inertias as parameters
        self.Xtree = Transform(np.stack([X.E for X in model.Xtree]), np.stack([X.r for X in model.Xtree])) if NB else None
        self.group_order = np.argsort(np.concatenate([b for _, b, _, _ in self.joint_groups]), kind="stable") \
            if NB else np.zeros(0, int)
        self.float_groups = [_float_group(j, b, qidx, Xt, parent) for j, b, qidx, Xt in self.joint_groups]
        self.homogeneous_pad = np.zeros((NB + 1, 4, 4))     # rows [[*, *], [0, 1]], the last the identity
        self.homogeneous_pad[:, 3, 3] = 1.0
        self.homogeneous_pad[NB, :3, :3] = np.eye(3)
        self.homogeneous_pad.flags.writeable = False


def _float_group(joint, bodies, qidx, Xt, parent):
    """A joint group for :func:`stacked_joint_transforms` on floats: ``(joint, where, qidx, consts,
    translate)``, ``where`` a slice for consecutive bodies; for revolutes ``consts`` = the axis
    constants times the tree rotations and translations, (n, 3, 4) each (the rows
    ``[E, -E r] = (c P + aa - s K) [E_tree, -E_tree r_tree]`` of the homogeneous matrices, no
    composition), their first three columns (for ``E`` alone) and ``r = r_tree``, else the tree transforms, ``None`` when they are identities
    (composing with them is exact: skipped); ``translate``: whether a body of the group has a parent
    (only then does :func:`_joint_homogeneous` need its column ``-E r``)."""
    where = slice(int(bodies[0]), int(bodies[-1]) + 1) if len(bodies) and \
        np.array_equal(bodies, np.arange(bodies[0], bodies[-1] + 1)) else bodies
    translate = bool(np.any(parent[bodies] >= 0))
    if isinstance(joint, _Revolutes):
        tree = np.concatenate([Xt.E, -(Xt.E @ Xt.r[..., None])], -1)
        rows = tuple(c @ tree for c in joint.constants)
        rotations = tuple(np.ascontiguousarray(c[..., :3]) for c in rows)      # E alone (contiguous)
        for c in rows + rotations:
            c.flags.writeable = False
        return joint, where, qidx[:, 0], (rows, rotations, Xt.r), translate
    identity = np.array_equal(Xt.E, np.broadcast_to(np.eye(3), Xt.E.shape)) and not np.any(Xt.r)
    return joint, where, qidx, None if identity else Xt, translate


_REVOLUTE = ("revolute", "continuous")


class _Revolutes:
    """Revolute joints about different constant axes (n, 3) as one joint group: ``jcalc`` of the n
    joints at once (the same operations per joint as their own ``jcalc``; one NumPy call for all)."""

    nq = 1

    def __init__(self, axes):
        self.constants = axis_constants(np.stack(axes))

    def jcalc(self, q):
        """``(XJ, None)`` for coordinates ``q`` (..., n, 1): ``E`` (..., n, 3, 3), ``r = 0``."""
        E = axes_rotation(self.constants, q[..., 0])
        return Transform(E, np.zeros(E.shape[:-1], dtype=E.dtype)), None


_LEVELS = ModelCache()


def levels(model) -> Levels:
    """The (cached) :class:`Levels` of ``model``."""
    lv = _LEVELS.get(model)
    if lv is None:
        lv = _LEVELS[model] = Levels(model)
    return lv


def body_transform(X: Transform, i):
    """Body ``i``'s transform from a stacked one (E (..., NB, 3, 3), r (..., NB, 3))."""
    return Transform(X.E[..., i, :, :], X.r[..., i, :])


def _take(X: Transform, index):
    """The stacked transforms of the bodies ``index`` (an index array)."""
    return Transform(X.E.take(index, -3), X.r.take(index, -2))


def segment_sum(x, index, n, matrix=None):
    """``out[..., k, :] = sum of x[..., d, :] over d with index[d] = k`` (..., n, m).  ``matrix``
    (n, len(index)) float, 1 where ``index[d] = k``: on float arrays the sum is one product with it
    (one array operation; a traced program keeps ``add.at``'s additions, no product by zero)."""
    if matrix is not None and not bk.is_symbolic(x):
        return matrix @ x
    out = np.zeros(x.shape[:-2] + (n,) + x.shape[-1:], dtype=x.dtype)
    np.add.at(out, (Ellipsis, index, slice(None)), x)
    return out


def with_pad(x):
    """``x`` (..., NB, 6) with a zero row appended (the "parent" of a root)."""
    return np.concatenate([x, np.zeros(x.shape[:-2] + (1, 6), dtype=x.dtype)], -2)


def _batch(x, shape, core):
    """``x`` broadcast to ``shape + x.shape[-core:]`` (no call when it has that shape already)."""
    want = shape + x.shape[x.ndim - core:]
    return x if x.shape == want else np.broadcast_to(x, want)


def stacked_joint_transforms(model, q, shape, dtype):
    """``Xup`` of every body as one stacked Transform (E (..., NB, 3, 3), r (..., NB, 3)): the joints
    of one kind (type, axis, pitch) computed together by one ``jcalc`` (no checks; kernel use).
    Float arrays: each group written into its rows, the revolutes' tree rotations folded into their
    axis constants (equal to rounding), identity tree transforms not composed."""
    lv, NB = levels(model), model.nbodies
    if not NB:
        return Transform(np.zeros(shape + (0, 3, 3), dtype=dtype), np.zeros(shape + (0, 3), dtype=dtype))
    if not bk.is_symbolic(q) and dtype == np.float64:     # floats: each group written in place
        E, r = np.empty(shape + (NB, 3, 3)), np.empty(shape + (NB, 3))
        for joint, where, qidx, consts, _ in lv.float_groups:
            if isinstance(joint, _Revolutes):
                E[..., where, :, :] = axes_rotation(consts[1], q.take(qidx, -1))
                r[..., where, :] = consts[2]
            else:
                XJ, _ = joint.jcalc(q.take(qidx, -1))
                if consts is not None:
                    XJ = compose(XJ, consts)
                E[..., where, :, :] = XJ.E
                r[..., where, :] = XJ.r
        return Transform(E, r)
    E, r = [], []
    for joint, _, qidx, _ in lv.joint_groups:
        XJ, _ = joint.jcalc(q.take(qidx, -1))
        E.append(_batch(XJ.E, shape, 3))
        r.append(_batch(XJ.r, shape, 2))
    E = E[0] if len(E) == 1 else np.concatenate(E, -3)       # groups side by side, then in body order
    r = r[0] if len(r) == 1 else np.concatenate(r, -2)
    XJ = Transform(E.take(lv.group_order, -3).astype(dtype, copy=False), r.take(lv.group_order, -2).astype(dtype, copy=False))
    return compose(XJ, lv.Xtree)                              # one composition for all bodies


def _joint_homogeneous(model, q, shape):
    """``(H, r)`` of :func:`stacked_joint_transforms` on floats (q (..., nq) float64): ``H``
    (..., NB + 1, 4, 4) the homogeneous matrices ``[[E, -E r], [0, 1]]`` of ``Xup``, the last row
    the identity (:func:`_jump_to_roots` takes them as they are), ``r`` (..., NB, 3).  Each joint
    group is written into its rows; the column ``-E r`` only where a body of the group has a parent
    (a root's row is never read by :func:`_jump_to_roots`), the revolutes' from their constants."""
    lv, NB = levels(model), model.nbodies
    pad = lv.homogeneous_pad
    H = pad.copy() if not shape else np.broadcast_to(pad, shape + pad.shape).copy()
    r = np.empty(shape + (NB, 3))
    for joint, where, qidx, consts, translate in lv.float_groups:
        if isinstance(joint, _Revolutes):
            H[..., where, :3, :] = axes_rotation(consts[0], q.take(qidx, -1))
            r[..., where, :] = consts[2]
        else:
            XJ, _ = joint.jcalc(q.take(qidx, -1))
            if consts is not None:
                XJ = compose(XJ, consts)
            H[..., where, :3, :3] = XJ.E
            r[..., where, :] = XJ.r
            if translate:
                # the column as a slice (3:): an integer index after the slice :3 would, with an array
                # `where`, move the bodies' axis in front of the batch axes
                H[..., where, :3, 3:] = -(XJ.E @ XJ.r[..., None])
    return H, r


def _jump_to_roots(model, H):
    """``Xr`` (:func:`root_transforms_stacked`) on floats by pointer jumping from ``H`` (..., NB + 1, 4, 4),
    ``Xup`` as homogeneous matrices and the identity in the last row (:func:`_joint_homogeneous`;
    the roots' rows are not read)."""
    lv, NB = levels(model), model.nbodies
    T = H.take(lv.root_or_pad, -3)                           # a root's row: the identity
    for J in lv.jumps:
        T = T @ T.take(J, -3)                                # Z_i <- Z_i Z_J(i): compose(Z_i, Z_J(i))
    E = T[..., :NB, :3, :3]
    return Transform(E, -(E.swapaxes(-1, -2) @ T[..., :NB, :3, 3:])[..., 0])


def root_transforms_stacked(model, Xup: Transform) -> Transform:
    """``Xr[i] = i_X_root`` of every body, stacked (E (..., NB, 3, 3), r (..., NB, 3)), from ``Xup``
    (:func:`~sparsedyn.algorithms.kinematics.root_transforms` for stacked arrays; the identity for a root).

    Traced: level by level, the recursion ``Xr_i = Xup_i Xr_parent`` (one composition per body).
    On float arrays by pointer jumping (Hillis and Steele, *Data parallel algorithms*, 1986): after
    step ``k`` each row holds the product of the ``2^k`` transforms up its chain, so the whole tree
    takes ``ceil(log2(depth))`` array steps instead of one per level (talos_reduced: 4 instead of 10;
    a NumPy call costs more than the compositions it does).  The products are associated
    differently, which changes the results by rounding only.  Jumping composes every row at each
    step (``NB log2(depth)`` compositions per state instead of ``NB``; each a product of homogeneous
    4x4 matrices ``[[E, -E r], [0, 1]]``, one NumPy call): beyond
    ``_JUMP_MAX_STATES`` states the arithmetic outweighs the calls and the levels are used again
    (talos_reduced, one core: jumping 3.6x faster for one state, on par near 16, 2.3x slower for 100)."""
    lv, NB = levels(model), model.nbodies
    Eup, rup = Xup
    if bk.is_symbolic(Eup) or bk.is_symbolic(rup) or Eup.size > _JUMP_MAX_STATES * 9 * NB:
        E = np.zeros(Eup.shape, dtype=Eup.dtype)
        r = np.zeros(rup.shape, dtype=rup.dtype)
        E[..., lv.roots, :, :] = np.eye(3)
        for L, P in lv.levels:                               # Xr_i = Xup_i Xr_parent
            X = compose(Transform(Eup[..., L, :, :], rup[..., L, :]), Transform(E[..., P, :, :], r[..., P, :]))
            E[..., L, :, :], r[..., L, :] = X.E, X.r
        return Transform(E, r)
    # rows: Xup for a body with a parent, the identity for a root and for the appended row NB, as
    # homogeneous 4x4 matrices [[E, -E r], [0, 1]] (a composition is one product)
    lead = common_shape(Eup.shape[:-3], rup.shape[:-2])
    T = lv.homogeneous_pad.copy() if not lead else np.broadcast_to(lv.homogeneous_pad, lead + (NB + 1, 4, 4)).copy()
    T[..., :NB, :3, :3] = Eup
    np.matmul(Eup, -rup[..., None], out=T[..., :NB, :3, 3:])
    return _jump_to_roots(model, T)


_JUMP_MAX_STATES = 16


class RootMotion:
    """The forward pass in root-body coordinates, stacked by body (see the module docstring).

    ``Xup``: ``i_X_parent(i)`` of every body (:func:`stacked_joint_transforms`); ``Xr``: ``i_X_root`` of every body, a stacked Transform (E (..., NB, 3, 3), r (..., NB, 3));
    ``xi`` (..., nv, 6): the joints' twists, one row per dof; ``V``, ``A`` (..., NB, 6): body velocities
    and accelerations (``A`` includes ``a_root``); ``Vl``, ``Al`` (..., NB, 6): those of the parents
    (for a root body ``0`` and ``a_root`` moved into its coordinates).  ``EErx`` (..., NB, 18): on
    float arrays ``[E, E rx]`` of ``Xr`` flattened (the entries of its 6x6 matrices), else ``None``.
    """

    __slots__ = ("Xup", "Xr", "xi", "V", "A", "Vl", "Al", "EErx")


def root_motion(model, q, v, a=None, a_root=None):
    """:class:`RootMotion` of state ``(q, v, a)``; ``a=None``: velocities only.  ``a_root`` (..., 6),
    world coordinates: the acceleration of the world seen by the roots (``-[0; g]`` puts gravity in,
    as RNEA does), ``None`` for zero.  Level by level: one array operation per depth of the tree
    (no checks; kernel use)."""
    lv, NB = levels(model), model.nbodies
    K = RootMotion()
    dtype = np.result_type(q, v, np.float64, *(() if a is None else (a,)))
    shape = common_shape(q.shape[:-1], v.shape[:-1], *(() if a is None else (a.shape[:-1],)))
    if NB and dtype == np.float64 and not bk.is_symbolic(q) and math.prod(shape) <= _JUMP_MAX_STATES:
        H, r = _joint_homogeneous(model, q, shape)          # floats: Xup's homogeneous rows, jumped as they are
        K.Xup = Transform(H[..., :NB, :3, :3], r)
        K.Xr = _jump_to_roots(model, H)
    else:
        K.Xup = stacked_joint_transforms(model, q, shape, dtype)
        K.Xr = root_transforms_stacked(model, K.Xup)
    K.EErx = None
    if bk.is_symbolic(K.Xr.E) or bk.is_symbolic(K.Xr.r):
        K.xi = apply_motion_inv(_take(K.Xr, lv.dof_body), lv.S)
    else:               # floats: xi_d = Xr^-1 S_d, linear in the entries of [E, E rx]: one product per dof
        E, r = K.Xr
        lead = E.shape[:-3]
        # E rx: a few states, row i of E crossed with r (no stacked product); more, the product
        Erx = cross3(E, r[..., None, :]) if math.prod(lead) <= _JUMP_MAX_STATES else E @ skew(r)
        K.EErx = np.concatenate([E.reshape(lead + (NB, 9)), Erx.reshape(lead + (NB, 9))], -1)
        K.xi = (_xi_map(model) @ K.EErx.take(lv.dof_body, -2)[..., None])[..., 0]
    xv = K.xi * v[..., :, None]
    if not bk.is_symbolic(xv) and math.prod(xv.shape[:-2]) <= _JUMP_MAX_STATES:
        X = _acceleration_plan(model)[2] @ xv         # few float states: [V; V_l; vJ] in one product
        K.V, K.Vl, vJ = X[..., :NB, :], X[..., NB:2 * NB, :], X[..., 2 * NB:, :]
        V = K.V
    else:
        vJ = segment_sum(xv, lv.dof_body, NB, lv.dof_sum)
        V = (lv.above if bk.is_symbolic(vJ) else lv.above_float) @ vJ   # V_i: the sum of vJ over i's ancestors and i
        K.V, K.Vl = V, with_pad(V).take(lv.parent_or_pad, -2)
    K.A = K.Al = None
    if a is not None and not (bk.is_symbolic(V) or bk.is_symbolic(a) or bk.is_symbolic(K.Xup.E)
                              or a_root is not None and bk.is_symbolic(a_root)):
        _float_accelerations(model, K, a, a_root, vJ)
    elif a is not None:
        A = segment_sum(K.xi * a[..., :, None], lv.dof_body, NB, lv.dof_sum)
        roots, nonroot = lv.roots, lv.nonroot
        if a_root is not None:                               # the world's acceleration in each root's coordinates
            if bk.is_symbolic(a_root) or bk.is_symbolic(K.Xup.E) or a_root[..., :3].any():
                a0 = apply_motion(_take(K.Xup, roots), a_root[..., None, :])
            else:            # floats, a pure linear acceleration (gravity): X [0; u] = [0; E u], exactly
                lin = (K.Xup.E.take(roots, -3) @ a_root[..., None, 3:, None])[..., 0]
                a0 = np.concatenate([np.zeros(lin.shape), lin], -1)
            A[..., roots, :] = A[..., roots, :] + a0
        if bk.is_symbolic(V) or bk.is_symbolic(A):
            A[..., nonroot, :] = A[..., nonroot, :] + cross_motion(V.take(nonroot, -2), vJ.take(nonroot, -2))
        else:       # floats: a root's V x vJ (V = vJ) is exactly 0, so no gather and scatter of the others
            A = A + cross_motion(V, vJ)
        A = lv.above @ A
        Al = with_pad(A).take(lv.parent_or_pad, -2)
        if a_root is not None:
            Al[..., roots, :] = a0
        K.A, K.Al = A, Al
    return K


def _float_accelerations(model, K, a, a_root, vJ):
    """``K.A``, ``K.Al`` of :func:`root_motion` on float arrays: ``A = above (S a + V x vJ + a0)``
    as one product of the per-model matrix ``[above dof_sum, above, above roots]`` with the stacked
    ``[xi a; V x vJ; a0]`` (a root's ``V x vJ`` is exactly 0: ``V = vJ``; the same terms as the
    level form, added in another order), ``Al`` by the same product with the parents' rows of that
    matrix (a root's: its ``a0``) stacked below it for a few states, else gathered from ``[A; a0]``."""
    lv = levels(model)
    roots, V = lv.roots, K.V
    parts = [K.xi * a[..., :, None], cross_motion_products(V, vJ)]
    a0 = None
    if a_root is not None:
        if a_root[0] or a_root[1] or a_root[2] if a_root.ndim == 1 else a_root[..., :3].any():
            a0 = apply_motion(_take(K.Xup, roots), a_root[..., None, :])
        else:            # a pure linear acceleration (gravity): X [0; u] = [0; E u], exactly
            a0 = (K.Xup.E.take(roots, -3) @ a_root[..., None, 3:, None])[..., 0] @ _LINEAR_PART
        parts.append(a0)
    lead = common_shape(*(x.shape[:-2] for x in parts))
    parts = [x if x.shape[:-2] == lead else np.broadcast_to(x, lead + x.shape[-2:]) for x in parts]
    big, parent_or_a0, _ = _acceleration_plan(model)
    NB, ncol = model.nbodies, sum(x.shape[-2] for x in parts)
    if math.prod(lead) <= _JUMP_MAX_STATES:             # few states: A_l by the same product
        AAl = big[:, :ncol] @ np.concatenate(parts, -2)
        K.A, K.Al = AAl[..., :NB, :], AAl[..., NB:, :]
        return
    K.A = A = big[:NB, :ncol] @ np.concatenate(parts, -2)
    if a0 is None:
        K.Al = with_pad(A).take(lv.parent_or_pad, -2)
    else:
        K.Al = np.concatenate([A, parts[2]], -2).take(parent_or_a0, -2)


_ACC_PLANS = ModelCache()
_LINEAR_PART = np.concatenate([np.zeros((3, 3)), np.eye(3)], 1)      # u -> [0; u] (exact)
_LINEAR_PART.flags.writeable = False


def _acceleration_plan(model):
    """``(big, parent_or_a0, vel)`` of :func:`_float_accelerations` and :func:`root_motion`, cached
    per model: ``big`` (2 NB, nv + NB + roots), ``[above dof_sum, above, above R]`` (``R`` the roots'
    columns) over the same rows of the parents (``A_l``; a root's row: the unit row of its ``a0``);
    per body the row of ``[A; a0]`` holding its parent's acceleration (``NB + k`` for the ``k``-th
    root); ``vel`` (3 NB, nv), ``[above dof_sum; its parents' rows (0 for a root); dof_sum]``
    (``[V; V_l; vJ] = vel (xi v)``).  The stacked rows serve a few states; for more, a gather
    from ``A`` costs less than their arithmetic."""
    plan = _ACC_PLANS.get(model)
    if plan is None:
        lv, NB = levels(model), model.nbodies
        nr = len(lv.roots)
        R = np.zeros((NB, nr))
        R[lv.roots, np.arange(nr)] = 1.0
        big = np.concatenate([lv.above_float @ lv.dof_sum, lv.above_float, lv.above_float @ R], 1)
        parent_or_a0 = np.asarray(model.parent, int).copy()
        parent_or_a0[lv.roots] = NB + np.arange(nr)
        unit = np.concatenate([np.zeros((nr, big.shape[1] - nr)), np.eye(nr)], 1)
        big = np.concatenate([big, np.concatenate([big, unit], 0)[parent_or_a0]], 0)
        ad = lv.above_float @ lv.dof_sum
        vel = np.concatenate([ad, np.concatenate([ad, np.zeros((1, model.nv))], 0)[lv.parent_or_pad], lv.dof_sum], 0)
        for x in (big, parent_or_a0, vel):
            x.flags.writeable = False
        plan = _ACC_PLANS[model] = (big, parent_or_a0, vel)
    return plan


_XI_MAPS = ModelCache()


def _xi_map(model):
    """``C`` (nv, 6, 18) with ``xi_d = C_d [E, E rx]`` (the entries of the dof's body's ``Xr``, row-major):
    ``Xr^-1 = [[E^T, 0], [rx E^T, E^T]]`` (``rx E^T = -(E rx)^T``) times the dof's ``S_d``, folded
    (cached per model)."""
    C = _XI_MAPS.get(model)
    if C is None:
        S = levels(model).S
        C = np.zeros((len(S), 6, 18))
        for i in range(3):
            for j in range(3):
                C[:, i, 3 * j + i] += S[:, j]                 # E^T w
                C[:, 3 + i, 3 * j + i] += S[:, 3 + j]         # E^T u
                C[:, 3 + i, 9 + 3 * j + i] -= S[:, j]         # rx E^T w
        C.flags.writeable = False
        C = _XI_MAPS[model] = C
    return C


_CHAINS = weakref.WeakKeyDictionary()


def _chain_dofs(model, i):
    """The bodies from the root down to ``i``, their dofs (index array) and each dof's body
    (cached per model and body)."""
    chains = _CHAINS.setdefault(model, {})
    if i not in chains:
        chain = model.ancestors(i)[::-1]            # empty for the world (i = -1): no dof moves it
        cols = np.concatenate([np.arange(model.v_slice(j).start, model.v_slice(j).stop) for j in chain] +
                              [np.zeros(0, int)])
        chains[i] = chain, cols, np.asarray(model.dof_body, int)[cols]
    return chains[i]


def _columns(model, shape, dtype, cols, M):
    """A (..., 6, nv) array holding the vectors ``M`` (..., n, 6) in columns ``cols``, zeros elsewhere."""
    out = np.zeros(shape + (6, model.nv), dtype=dtype)
    out[..., :, cols] = M.swapaxes(-1, -2)                 # the assignment broadcasts M's batch axes
    return out


def _shift(M, p):
    """Motion vectors (..., n, 6) at the root origin -> at the point ``p`` (..., 3) (same axes)."""
    return np.concatenate([M[..., :3], M[..., 3:] + cross3(M[..., :3], p[..., None, :])], -1)


class _Frame:
    """A frame ``k`` seen from the root frame of its tree: ``fXr`` (frame_X_root), the origin ``p``
    (root coordinates), the root's ``Xw`` (root_X_world) and the chain of bodies above it."""

    def __init__(self, model, K, k, reference):
        reference = _check_reference(reference)
        f = model.frames[k]
        self.reference, self.body = reference, f.body
        self.chain, self.cols, self.dof_body = _chain_dofs(model, f.body)
        if f.body < 0:                      # a frame fixed to the world: every derivative is zero
            return
        self.fXr = compose(f.X, body_transform(K.Xr, f.body))
        self.p = self.fXr.r
        self.Xw = body_transform(K.Xup, self.chain[0])

    def express(self, M):
        """Motion vectors (..., n, 6) in root coordinates (at the root origin) -> ``reference``:
        ``local`` at the frame origin in frame axes, ``world`` at the world origin in world axes,
        ``local_world_aligned`` at the frame origin in world axes."""
        if self.reference == "local":
            return apply_motion(broadcast_columns(self.fXr), M)
        if self.reference == "world":
            return apply_motion_inv(broadcast_columns(self.Xw), M)
        M = _shift(M, self.p)
        Et = np.swapaxes(self.Xw.E, -1, -2)[..., None, :, :]
        return np.concatenate([(Et @ M[..., :3, None])[..., 0], (Et @ M[..., 3:, None])[..., 0]], -1)


def _frame_setup(model, q, v, a, frame, reference, names):
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    arrays = {"q": (q, 1), "v": (v, 1)}
    if a is not None:
        a = _checks.vector(model, "a", a, model.nv, "nv joint accelerations")
        arrays["a"] = (a, 1)
    shape = _checks.batch_shape(**arrays)
    dtype = np.result_type(q, v, np.float64, *(() if a is None else (a,)))
    K = root_motion(model, q, v, a)
    return K, _Frame(model, K, model.frame(frame), reference), shape, dtype


def _world_frame(model, shape, dtype, n):
    """The derivatives of a frame fixed to the world: ``n`` zero (..., 6, nv) arrays (its velocity,
    acceleration and Jacobian are zero whatever the state)."""
    out = tuple(np.zeros(shape + (6, model.nv), dtype=dtype) for _ in range(n))
    return out[0] if n == 1 else out


def _chain_terms(K, fr, shape):
    """Per dof of the chain (..., n, 6): ``xi``, ``Vl`` and ``V`` (the velocities of the joint's
    parent and body), ``Al`` when accelerations were computed."""
    body = fr.dof_body
    out = {"xi": K.xi[..., fr.cols, :], "Vl": K.Vl[..., body, :], "V": K.V[..., body, :]}
    if K.A is not None:
        out["Al"] = K.Al[..., body, :]
    return {n: _batch(x, shape, 2) for n, x in out.items()}


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, static=("frame", "reference"), outputs={"dV_dq": (6, "nv"), "dV_dv": (6, "nv")})
def frame_velocity_derivatives(model, q, v, frame, reference="local"):
    """Partial derivatives ``(dV_dq, dV_dv)`` (..., 6, nv) each of :func:`~sparsedyn.frame_velocity`
    (rows ``[omega; v]`` in ``reference``'s point and axes; ``dV_dq`` on the tangent space,
    ``dV_dv`` the frame Jacobian).  Pinocchio's ``getFrameVelocityDerivatives``."""
    reference = _check_reference(reference)
    if varying_subspaces(model):
        return derivatives(frame_velocity, ("q", "v"))(model, q, v, frame=frame, reference=reference)
    K, fr, shape, dtype = _frame_setup(model, q, v, None, frame, reference, ("q", "v"))
    if fr.body < 0:
        return _world_frame(model, shape, dtype, 2)
    T = _chain_terms(K, fr, shape)
    xi, Vl, Vi = T["xi"], T["Vl"], K.V[..., fr.body, None, :]
    if reference == "local":                      # the frame moves with the joint: dV = fXr (V_l x xi)
        dq = fr.express(cross_motion(Vl, xi))
    else:
        dq = fr.express(cross_motion(xi, Vi - Vl))
        if reference == "local_world_aligned":    # the point moves too: + omega x dp
            dq = dq + _rotate_linear(fr, cross3(Vi[..., :3], _shift(xi, fr.p)[..., 3:]))
    return _columns(model, shape, dtype, fr.cols, dq), _columns(model, shape, dtype, fr.cols, fr.express(xi))


def _rotate_linear(fr, x):
    """``[0; E^T x]``: a linear-part term (..., n, 3) in root axes, rotated to world axes."""
    Et = np.swapaxes(fr.Xw.E, -1, -2)[..., None, :, :]
    y = (Et @ x[..., None])[..., 0]
    return np.concatenate([0 * y, y], -1)


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, static=("frame", "reference"),
        outputs={"dA_dq": (6, "nv"), "dA_dv": (6, "nv"), "dA_da": (6, "nv")})
def frame_acceleration_derivatives(model, q, v, a, frame, reference="local"):
    """Partial derivatives ``(dA_dq, dA_dv, dA_da)`` (..., 6, nv) each of the spatial acceleration
    :func:`~sparsedyn.frame_acceleration` (rows ``[omega_dot; a_lin]``, ``reference`` as there;
    ``dA_dq`` on the tangent space, ``dA_da`` the frame Jacobian).  Pinocchio's
    ``getFrameAccelerationDerivatives`` (its ``a_partial_dq``, ``a_partial_dv``, ``a_partial_da``)."""
    reference = _check_reference(reference)
    if varying_subspaces(model):
        return derivatives(frame_acceleration, ("q", "v", "a"))(model, q, v, a, frame=frame, reference=reference)
    K, fr, shape, dtype = _frame_setup(model, q, v, a, frame, reference, ("q", "v", "a"))
    if fr.body < 0:
        return _world_frame(model, shape, dtype, 3)
    T = _chain_terms(K, fr, shape)
    xi, Vl, Vk, Al = T["xi"], T["Vl"], T["V"], T["Al"]
    Vi, Ai = K.V[..., fr.body, None, :], K.A[..., fr.body, None, :]
    psi = cross_motion(Vl, xi)
    if reference == "local":
        dq = cross_motion(Al, xi) - cross_motion(psi, Vl) + cross_motion(psi, Vi)
    else:
        dq = cross_motion(xi, Ai - Al) + cross_motion(psi, Vi - Vl)
    dv = cross_motion(xi, Vi) + cross_motion(Vl + Vk, xi)
    dq, dv, da = fr.express(dq), fr.express(dv), fr.express(xi)
    if reference == "local_world_aligned":
        dq = dq + _rotate_linear(fr, cross3(Ai[..., :3], _shift(xi, fr.p)[..., 3:]))
    return tuple(_columns(model, shape, dtype, fr.cols, x) for x in (dq, dv, da))


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, static=("frame", "reference"), outputs={"dJ_dt": (6, "nv")})
def frame_jacobian_time_variation(model, q, v, frame, reference="local"):
    """``dJ/dt`` (..., 6, nv): the time derivative of :func:`~sparsedyn.frame_jacobian` along ``v``
    (Pinocchio's ``getFrameJacobianTimeVariation``), so that ``dJ/dt v`` is
    :func:`~sparsedyn.frame_jacobian_dot_v`.  A column of joint ``k`` changes with the body,
    ``d/dt xi_k = V_k x xi_k``; in ``local`` axes the frame's own motion ``-V_f x`` adds to it,
    in ``local_world_aligned`` the moving point adds ``omega_k x v_p``."""
    reference = _check_reference(reference)
    if varying_subspaces(model):                  # dJ/dt = dJ/dq v (q on the tangent space)
        v = _checks.velocity(model, v)
        return (derivatives(frame_jacobian, "q")(model, q, frame=frame, reference=reference) @ v[..., None, :, None])[..., 0]
    K, fr, shape, dtype = _frame_setup(model, q, v, None, frame, reference, ("q", "v"))
    if fr.body < 0:
        return _world_frame(model, shape, dtype, 1)
    T = _chain_terms(K, fr, shape)
    xi, Vk, Vi = T["xi"], T["V"], K.V[..., fr.body, None, :]
    if reference == "local":
        dJ = fr.express(cross_motion(Vk - Vi, xi))
    else:
        dJ = fr.express(cross_motion(Vk, xi))
        if reference == "local_world_aligned":
            vp = Vi[..., 3:] + cross3(Vi[..., :3], fr.p[..., None, :])       # velocity of the frame origin
            dJ = dJ + _rotate_linear(fr, cross3(xi[..., :3], vp))
    return _columns(model, shape, dtype, fr.cols, dJ)
