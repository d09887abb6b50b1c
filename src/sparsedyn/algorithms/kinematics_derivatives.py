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

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import Transform, apply_motion, apply_motion_inv, compose, cross3, cross_motion
from .derivatives import derivatives, varying_subspaces
from .kinematics import _check_reference, frame_acceleration, frame_jacobian, frame_velocity

__all__ = ["frame_velocity_derivatives", "frame_acceleration_derivatives", "frame_jacobian_time_variation",
           "RootMotion", "root_motion", "stacked", "broadcast_columns", "common_shape"]


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


def levels(model):
    """The tables of level-by-level passes over ``model``: its
    :class:`~sparsedyn.model.topology.Topology` (``levels``, ``roots``, ``nonroot``, ``above``,
    ``below``, ``parent_or_pad``, ``dof_body``, ``S``, ``joint_groups``, ``group_order``, ``Xtree``,
    ``inertia``).  A sum over ancestors is one product with ``above`` (ascending body order, so a
    traced sum is the recursion's chain of partial sums)."""
    return model.topology


def body_transform(X: Transform, i):
    """Body ``i``'s transform from a stacked one (E (..., NB, 3, 3), r (..., NB, 3))."""
    return Transform(X.E[..., i, :, :], X.r[..., i, :])


def _take(X: Transform, index):
    """The stacked transforms of the bodies ``index`` (an index array)."""
    return Transform(X.E.take(index, -3), X.r.take(index, -2))


def segment_sum(x, index, n):
    """``out[..., k, :] = sum of x[..., d, :] over d with index[d] = k`` (..., n, m)."""
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
    of one kind (type, axis, pitch) computed together by one ``jcalc`` (no checks; kernel use)."""
    lv, NB = levels(model), model.nbodies
    if not NB:
        return Transform(np.zeros(shape + (0, 3, 3), dtype=dtype), np.zeros(shape + (0, 3), dtype=dtype))
    E, r = [], []
    for joint, _, qidx, _ in lv.joint_groups:
        XJ, _ = joint.jcalc(q.take(qidx, -1))
        E.append(_batch(XJ.E, shape, 3))
        r.append(_batch(XJ.r, shape, 2))
    E = E[0] if len(E) == 1 else np.concatenate(E, -3)       # groups side by side, then in body order
    r = r[0] if len(r) == 1 else np.concatenate(r, -2)
    XJ = Transform(E.take(lv.group_order, -3).astype(dtype, copy=False), r.take(lv.group_order, -2).astype(dtype, copy=False))
    return compose(XJ, lv.Xtree)                              # one composition for all bodies


def root_transforms_stacked(model, Xup: Transform) -> Transform:
    """``Xr[i] = i_X_root`` of every body, stacked (E (..., NB, 3, 3), r (..., NB, 3)), from ``Xup``
    (:func:`~sparsedyn.algorithms.kinematics.root_transforms` for stacked arrays; the identity for a root).

    Level by level, the recursion ``Xr_i = Xup_i Xr_parent`` (one composition per body)."""
    lv, NB = levels(model), model.nbodies
    Eup, rup = Xup
    E = np.zeros(Eup.shape, dtype=Eup.dtype)
    r = np.zeros(rup.shape, dtype=rup.dtype)
    E[..., lv.roots, :, :] = np.eye(3)
    for L, P in lv.levels:                               # Xr_i = Xup_i Xr_parent
        X = compose(Transform(Eup[..., L, :, :], rup[..., L, :]), Transform(E[..., P, :, :], r[..., P, :]))
        E[..., L, :, :], r[..., L, :] = X.E, X.r
    return Transform(E, r)


class RootMotion:
    """The forward pass in root-body coordinates, stacked by body (see the module docstring).

    ``Xup``: ``i_X_parent(i)`` of every body (:func:`stacked_joint_transforms`); ``Xr``: ``i_X_root`` of every body, a stacked Transform (E (..., NB, 3, 3), r (..., NB, 3));
    ``xi`` (..., nv, 6): the joints' twists, one row per dof; ``V``, ``A`` (..., NB, 6): body velocities
    and accelerations (``A`` includes ``a_root``); ``Vl``, ``Al`` (..., NB, 6): those of the parents
    (for a root body ``0`` and ``a_root`` moved into its coordinates).
    """

    __slots__ = ("Xup", "Xr", "xi", "V", "A", "Vl", "Al")


def root_motion(model, q, v, a=None, a_root=None):
    """:class:`RootMotion` of state ``(q, v, a)``; ``a=None``: velocities only.  ``a_root`` (..., 6),
    world coordinates: the acceleration of the world seen by the roots (``-[0; g]`` puts gravity in,
    as RNEA does), ``None`` for zero.  Level by level: one array operation per depth of the tree
    (no checks; kernel use)."""
    lv, NB = levels(model), model.nbodies
    K = RootMotion()
    dtype = np.result_type(q, v, np.float64, *(() if a is None else (a,)))
    shape = common_shape(q.shape[:-1], v.shape[:-1], *(() if a is None else (a.shape[:-1],)))
    K.Xup = stacked_joint_transforms(model, q, shape, dtype)
    K.Xr = root_transforms_stacked(model, K.Xup)
    K.xi = apply_motion_inv(_take(K.Xr, lv.dof_body), lv.S)
    vJ = segment_sum(K.xi * v[..., :, None], lv.dof_body, NB)
    V = lv.above @ vJ                                        # V_i: the sum of vJ over i's ancestors and i
    K.V, K.Vl = V, with_pad(V).take(lv.parent_or_pad, -2)
    K.A = K.Al = None
    if a is not None:
        A = segment_sum(K.xi * a[..., :, None], lv.dof_body, NB)
        roots, nonroot = lv.roots, lv.nonroot
        if a_root is not None:                               # the world's acceleration in each root's coordinates
            a0 = apply_motion(_take(K.Xup, roots), a_root[..., None, :])
            lead = common_shape(A.shape[:-2], a0.shape[:-2])
            if A.shape[:-2] != lead:                         # a batch of gravities for one state
                A = np.broadcast_to(A, lead + A.shape[-2:]).copy()
            A[..., roots, :] = A[..., roots, :] + a0
        A[..., nonroot, :] = A[..., nonroot, :] + cross_motion(V.take(nonroot, -2), vJ.take(nonroot, -2))
        A = lv.above @ A
        Al = with_pad(A).take(lv.parent_or_pad, -2)
        if a_root is not None:
            Al[..., roots, :] = a0
        K.A, K.Al = A, Al
    return K


def _chain_dofs(model, i):
    """The bodies from the root down to ``i`` (empty for the world, ``i = -1``: no dof moves it),
    their dofs (index array) and each dof's body."""
    return model.topology.chains[i]


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
