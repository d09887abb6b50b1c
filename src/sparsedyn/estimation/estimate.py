"""An estimate: every Newton-Euler variable of a solve by name (blocks, joints, contact wrenches), with
its covariance and the weighted residual of the soft sensors."""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["Estimate"]


class Estimate:
    """Every Newton-Euler variable of an estimate, by name.

    ``d`` (..., n); ``a``, ``f``, ``fx`` (..., NB, 6), ``tau``, ``qdd`` (..., nv) as
    :meth:`sparsedyn.sparse.Layout.unpack`; ``contacts``: ``{name: wrench at the contact
    frame (..., 6)}``; ``cov_d`` (..., n, n) when asked for; ``chi2``: weighted residual
    of the soft sensors (``dof`` degrees of freedom; zero for a square problem).

    Only ``d``, ``chi2`` and ``dof`` are stored: the blocks ``a`` ... ``qdd`` are views of ``d``
    and ``contacts`` is computed from ``fx``, each on first access (an online solve pays only for
    what it reads).
    """

    def __init__(self, problem, d, cov_d=None, chi2=None, dof=0):
        self.problem, self.d, self.chi2, self.dof = problem, d, chi2, dof
        self._cov = cov_d             # (..., n, n), or a pair (N^T (..., k, n), cov(u) (..., k, k)), or None

    def _block(self, kind):
        start, stop, core = self.problem._d_blocks[kind]
        x = self.d[..., start:stop]
        return x if len(core) == 1 else x.reshape(x.shape[:-1] + core)

    @functools.cached_property
    def a(self):
        """Body accelerations (..., NB, 6) (body frames), with gravity folded in (the base's fictitious
        acceleration ``-g``, as Pinocchio's ``a_gf``): a body at rest has ``[0; -R_i^T g]``."""
        return self._block("a")

    @functools.cached_property
    def f(self):
        """Joint wrenches (..., NB, 6), each the wrench a joint transmits to its child (body frame)."""
        return self._block("f")

    @functools.cached_property
    def tau(self):
        """Joint forces (..., nv)."""
        return self._block("tau")

    @functools.cached_property
    def fx(self):
        """External wrenches (..., NB, 6) (body frames)."""
        return self._block("fx")

    @functools.cached_property
    def qdd(self):
        """Joint accelerations (..., nv)."""
        return self._block("qdd")

    @functools.cached_property
    def contacts(self) -> dict:
        """``{contact name: wrench at its frame (..., 6)}`` (computed on first access)."""
        p = self.problem
        if not p.contacts:
            return {}
        idx, XT = p._contact_maps
        w = self.d[..., idx] @ XT                                   # X* fx of each contact's body
        return {c.name: w[..., 6 * j:6 * j + 6] for j, c in enumerate(p.contacts)}

    @property
    def cov_d(self):
        """Covariance (..., n, n) of ``d`` (``None`` unless solved with ``covariance=True``)."""
        if isinstance(self._cov, tuple):
            Nt, cu = self._cov
            self._cov = np.swapaxes(Nt, -1, -2) @ cu @ Nt
        return self._cov

    def torque(self, joint):
        """Estimated forces (..., nv of the joint) of ``joint`` (a name) [N m or N]."""
        return self.tau[..., self.problem.model.v_slice(self.problem.model.joint(joint))]

    def wrench(self, joint):
        """Wrench transmitted across ``joint`` (body frame of its child)."""
        return self.f[..., self.problem.model.joint(joint), :]

    def named(self) -> dict:
        """``{"tau[joint]": .., "f[joint]": .., "contact[name]": .., "qdd[joint]": ..}`` (views of the
        arrays above, in the model's joint order, then the contacts)."""
        tau, qdd, f = self.tau, self.qdd, self.f
        # rows of these are tau[..., s:s + 1], qdd[..., s:s + 1] and f[..., i, :]
        if f.ndim == 2:
            tau1, qdd1 = tau[:, None], qdd[:, None]
        else:
            nb = f.ndim - 2
            tau1, qdd1 = (x[..., None].transpose((nb,) + tuple(range(nb)) + (nb + 1,)) for x in (tau, qdd))
            f = f.transpose((nb,) + tuple(range(nb)) + (nb + 1,))
        out = {}
        for i, sl, one, kt, kq, kf in self.problem._named_plan:
            if sl is not None:
                out[kt] = tau1[sl.start] if one else tau[..., sl]
                out[kq] = qdd1[sl.start] if one else qdd[..., sl]
            out[kf] = f[i]
        for k, w in self.contacts.items():
            out[f"contact[{k}]"] = w
        return out

    def covariance(self, kind="tau"):
        """Covariance (..., m, m) of one variable kind's block of ``d`` (needs ``covariance=True``)."""
        if self._cov is None:
            raise ValueError("no covariance: solve with covariance=True")
        L = self.problem.layout
        idx = np.concatenate([np.arange(v.offset, v.offset + v.size) for v in L.variables if v.kind == kind])
        if isinstance(self._cov, tuple):
            Nt, cu = self._cov
            Ns = Nt[..., idx]
            return np.swapaxes(Ns, -1, -2) @ cu @ Ns
        return self.cov_d[..., idx[:, None], idx[None, :]]
