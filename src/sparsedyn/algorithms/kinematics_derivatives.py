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
from .. import backend as bk
from ..kernels import kernel
from ..spatial import Transform, apply_motion, apply_motion_inv, compose, cross3, cross_motion
from .kinematics import _check_reference, _frame_world_transform, joint_transforms, root_transforms, world_transforms

__all__ = ["frame_velocity_derivatives", "frame_acceleration_derivatives", "frame_jacobian_time_variation",
           "RootMotion", "root_motion", "stacked", "broadcast_columns"]


def broadcast_columns(X: Transform):
    """``X`` with an axis for a set of vectors (..., n, 6) to act on."""
    return Transform(X.E[..., None, :, :], X.r[..., None, :])


def stacked(parts, shape):
    """Per-body arrays (..., n_i, k...) broadcast to the batch ``shape`` and joined on the dof axis."""
    parts = [np.broadcast_to(x, shape + x.shape[x.ndim - 2:]) for x in parts]
    return np.concatenate(parts, -2)


class RootMotion:
    """The forward pass in root-body coordinates (lists by body; see the module docstring).

    ``Xup``, ``S``: :func:`~sparsedyn.algorithms.kinematics.joint_transforms`; ``Xr[i] = i_X_root``;
    ``xi[i]`` (..., nv_i, 6): joint ``i``'s twists (one row per dof); ``V[i]``, ``A[i]``: body
    velocity and acceleration (``A`` includes ``a_root``); ``Vl[i]``, ``Al[i]``: those of the parent
    (for a root body ``0`` and ``a_root`` moved into its coordinates).
    """

    __slots__ = ("Xup", "S", "Xr", "xi", "V", "A", "Vl", "Al")


def root_motion(model, q, v, a=None, a_root=None):
    """:class:`RootMotion` of state ``(q, v, a)``; ``a=None``: velocities only.  ``a_root`` (..., 6),
    world coordinates: the acceleration of the world seen by the roots (``-[0; g]`` puts gravity in,
    as RNEA does), ``None`` for zero (no checks; kernel use)."""
    K = RootMotion()
    K.Xup, K.S = joint_transforms(model, q)
    K.Xr = root_transforms(model, K.Xup)
    NB = model.nbodies
    K.xi, K.V, K.A, K.Vl, K.Al = [None] * NB, [None] * NB, [None] * NB, [None] * NB, [None] * NB
    zero = bk.zeros((6,), like=v)
    for i in range(NB):
        sl, p = model.v_slice(i), model.parent[i]
        K.xi[i] = apply_motion_inv(broadcast_columns(K.Xr[i]), K.S[i].T)
        vJ = np.sum(K.xi[i] * v[..., sl, None], -2)
        if p < 0:
            K.Vl[i], K.V[i] = zero, vJ
        else:
            K.Vl[i], K.V[i] = K.V[p], K.V[p] + vJ
        if a is None:
            continue
        aJ = np.sum(K.xi[i] * a[..., sl, None], -2)
        if p < 0:
            K.Al[i] = zero if a_root is None else apply_motion(K.Xup[i], a_root)
            K.A[i] = K.Al[i] + aJ
        else:
            K.Al[i] = K.A[p]
            K.A[i] = K.A[p] + aJ + cross_motion(K.V[i], vJ)
    return K


def _chain_dofs(model, i):
    """The bodies from the root down to ``i`` and their dofs (index array)."""
    chain = model.ancestors(i)[::-1]
    return chain, np.concatenate([np.arange(model.v_slice(j).start, model.v_slice(j).stop) for j in chain])


def _columns(model, shape, dtype, cols, M):
    """A (..., 6, nv) array holding the vectors ``M`` (..., n, 6) in columns ``cols``, zeros elsewhere."""
    out = np.zeros(shape + (6, model.nv), dtype=dtype)
    out[..., :, cols] = np.swapaxes(np.broadcast_to(M, shape + M.shape[-2:]), -1, -2)
    return out


def _shift(M, p):
    """Motion vectors (..., n, 6) at the root origin -> at the point ``p`` (..., 3) (same axes)."""
    return np.concatenate([M[..., :3], M[..., 3:] + cross3(M[..., :3], p[..., None, :])], -1)


class _Frame:
    """A frame ``k`` seen from the root frame of its tree: ``fXr`` (frame_X_root), the origin ``p``
    (root coordinates), the root's ``Xw`` (root_X_world) and the chain of bodies above it."""

    def __init__(self, model, K, k, reference):
        _check_reference(reference)
        f = model.frames[k]
        self.reference, self.body = reference, f.body
        self.chain, self.cols = _chain_dofs(model, f.body)
        self.fXr = compose(f.X, K.Xr[f.body])
        self.p = self.fXr.r
        self.Xw = K.Xup[self.chain[0]]

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


def _stack_chain(K, chain, what):
    return np.concatenate([np.broadcast_to(what(j), np.broadcast_shapes(*(what(j).shape[:-2] for j in chain))
                                           + what(j).shape[-2:]) for j in chain], -2)


def _chain_terms(K, fr, shape):
    """Per dof of the chain (..., n, 6): ``xi``, ``V_l`` and ``V_k`` (the joint's parent and body
    velocities), ``A_l`` when accelerations were computed."""
    rows = lambda x, j: np.broadcast_to(x[..., None, :], x.shape[:-1] + (K.xi[j].shape[-2], 6))
    parts = {"xi": [K.xi[j] for j in fr.chain], "Vl": [rows(K.Vl[j], j) for j in fr.chain],
             "V": [rows(K.V[j], j) for j in fr.chain]}
    if K.A[fr.body] is not None:
        parts["Al"] = [rows(K.Al[j], j) for j in fr.chain]
    return {n: stacked(p, shape) for n, p in parts.items()}


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, static=("frame", "reference"), outputs={"dV_dq": (6, "nv"), "dV_dv": (6, "nv")})
def frame_velocity_derivatives(model, q, v, frame, reference="local"):
    """Partial derivatives ``(dV_dq, dV_dv)`` (..., 6, nv) each of :func:`~sparsedyn.frame_velocity`
    (rows ``[omega; v]`` in ``reference``'s point and axes; ``dV_dq`` on the tangent space,
    ``dV_dv`` the frame Jacobian).  Pinocchio's ``getFrameVelocityDerivatives``."""
    K, fr, shape, dtype = _frame_setup(model, q, v, None, frame, reference, ("q", "v"))
    T = _chain_terms(K, fr, shape)
    xi, Vl, Vi = T["xi"], T["Vl"], K.V[fr.body][..., None, :]
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
    K, fr, shape, dtype = _frame_setup(model, q, v, a, frame, reference, ("q", "v", "a"))
    T = _chain_terms(K, fr, shape)
    xi, Vl, Vk, Al = T["xi"], T["Vl"], T["V"], T["Al"]
    Vi, Ai = K.V[fr.body][..., None, :], K.A[fr.body][..., None, :]
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
    K, fr, shape, dtype = _frame_setup(model, q, v, None, frame, reference, ("q", "v"))
    T = _chain_terms(K, fr, shape)
    xi, Vk, Vi = T["xi"], T["V"], K.V[fr.body][..., None, :]
    if reference == "local":
        dJ = fr.express(cross_motion(Vk - Vi, xi))
    else:
        dJ = fr.express(cross_motion(Vk, xi))
        if reference == "local_world_aligned":
            vp = Vi[..., 3:] + cross3(Vi[..., :3], fr.p[..., None, :])       # velocity of the frame origin
            dJ = dJ + _rotate_linear(fr, cross3(xi[..., :3], vp))
    return _columns(model, shape, dtype, fr.cols, dJ)
