"""The estimator's online phase as a kernel, and the estimator compiled: ``sparsedyn.compile(estimator)``.

:func:`estimate_kernel` declares :meth:`Estimator._online <sparsedyn.estimation.Estimator>` (the one
online function: the sparse solve with its fixed elimination order, and for least squares the
``k x k`` normal equations and one refinement step), traced with the sparse layer's check values
(:func:`~sparsedyn.sparse.checks.checked_solve`) and, for least squares, those of the normal matrix
``G``: its ``L^T D L`` pivots and ``1 - MARGIN RANK_RTOL trace(G) trace(G^-1)`` (``1 / (trace G
trace G^-1)`` is a lower bound of ``lambda_min / lambda_max`` when the pivots are positive).  An
estimator hands it to the compiler through ``__sparsedyn_kernels__`` (see :mod:`sparsedyn.kernels`,
*Owners*); :class:`CompiledEstimator` wraps the compiled kernel: it serves every state whose check
values pass, :meth:`Estimator.solve <sparsedyn.estimation.Estimator.solve>` every other one.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .. import _checks
from ..algorithms.ltdl import chain_lambda, ltdl_kernel, spd_inverse
from ..kernels import Kernel
from ..sparse.checks import MARGIN, check_count, checked_solve
from ..sparse.compiled import CompiledOwner
from ..sparse.fingerprint import Unkeyable, finish, hash_array, hash_structure, value_key
from .verdict import RANK_RTOL, StateSingularError
from .estimate import Estimate

__all__ = ["estimate_kernel", "estimator_fingerprint", "CompiledEstimator"]


def _lsq_checks(G, k):
    """``L^T D L`` pivots of ``G`` (k) and ``1 - MARGIN RANK_RTOL trace(G) trace(G^-1)``; none for
    ``k = 0`` (the exact rows alone fix ``d``: no normal equations)."""
    if not k:
        return []
    P = ltdl_kernel(chain_lambda(k), G)
    Gi = spd_inverse(G)
    trG, trGi = sum(G[i, i] for i in range(k)), sum(Gi[i, i] for i in range(k))
    return [P[i, i] for i in range(k)] + [1 - trG * trGi * (MARGIN * RANK_RTOL)]


def _checked(st, q, v, ys, g, batch):
    x, chk, (vals, W, b, _) = checked_solve(st, q, v, ys, g, batch)
    return x, vals, b, W, chk


def estimate_kernel(est) -> Kernel:
    """Kernel ``estimate``: inputs ``q`` (nq), ``v`` (nv)[, ``y`` (ny)]; outputs ``d`` (n), (least
    squares) ``chi2`` (1)[, ``chk``: the check values]."""
    model, p = est.model, est.problem
    if not est.square and est._basis is None:
        est._build_basis()
    st, k = (est.structure, 0) if est.square else (est._basis, est.k)
    nchk = check_count(st, k + 1 if k else 1) + (k + 1 if k else 0)
    g = _checks.gravity(model, None)

    def fn(q, v, y=None):
        y = np.zeros((0,), dtype=object) if y is None else y
        d, chi2, (_, G), chk = est._online(q, v, y, g, _checked)
        chk = np.array(chk + ([] if est.square else _lsq_checks(G, k)), dtype=object)
        return ((d,) if est.square else (d, np.array([chi2], dtype=object))) + ((chk,) if nchk else ())
    inputs = [("q", (model.nq,)), ("v", (model.nv,))] + ([("y", (p.ny,))] if p.ny else [])
    outputs = [("d", (est.n,))] + ([] if est.square else [("chi2", (1,))]) + ([("chk", (nchk,))] if nchk else [])
    return Kernel.of_arrays("estimate", inputs, outputs, fn, checks=("chk",) if nchk else ())


def estimator_fingerprint(est):
    """SHA-256 of everything the traced online phase of ``est`` depends on beyond the model, or
    ``None`` when a ``bias`` callable cannot be identified (see :mod:`sparsedyn.sparse.fingerprint`)."""
    h = hashlib.sha256(b"estimator\0")
    p = est.problem
    try:
        hash_structure(h, est.structure if est.square else est._basis)
        h.update(repr((est.square, est.n, est.s, getattr(est, "k", None), getattr(est, "basis_rows", None),
                       p.ny, p._n_implicit())).encode())
        hash_array(h, est.M_soft)
        hash_array(h, est.W)
        for group in (est.soft, est.exact, p.priors):
            h.update(b"group")
            for e in group:
                h.update(repr((None if e.slot is None else (e.slot.start, e.slot.stop), e.size)).encode())
                h.update(value_key(e.bias).encode())
                if e.slot is None:
                    hash_array(h, np.asarray(e.sensor.value(e.size), float))
    except Unkeyable:
        return None
    return finish(h)


class CompiledEstimator(CompiledOwner):
    """A compiled :class:`~sparsedyn.estimation.Estimator` (see :func:`sparsedyn.compile`).

    ``solve(q, v, y, covariance=False, gravity=None)`` has the signature and
    results of :meth:`Estimator.solve <sparsedyn.estimation.Estimator.solve>` (an
    :class:`~sparsedyn.estimation.Estimate`; one state or batch axes).  Inputs
    are validated as there.  The compiled kernel computes ``d`` (and, least
    squares, ``chi2``) with the model's gravity, a batch in one native call
    (vectorised across states, on the batch runtime's threads); states its check values flag
    are re-solved by ``Estimator.solve`` (dense fallback, warnings and
    :class:`~sparsedyn.estimation.StateSingularError` as there, with the original
    batch index); ``covariance=True`` and ``gravity=`` go to ``Estimator.solve``
    directly, as everything does without a C compiler.  ``flops()``: see
    :meth:`~sparsedyn.sparse.compiled.CompiledOwner.flops`.  Other attributes are the estimator's
    (``problem``, ``verdict``, ``report`` ...).
    """

    kernel_name = "estimate"

    def __init__(self, estimator, compiled):
        self.estimator = self.wrapped = estimator
        super().__init__(compiled)
        self._has_y = estimator.problem.ny > 0
        self._dof = 0 if estimator.square else estimator.s - estimator.k

    def __repr__(self):
        return f"CompiledEstimator({self.estimator.problem.name!r}, {self.estimator.verdict.kind}, {self._state()})"

    def solve(self, q, v, y, covariance=False, gravity=None):
        """An :class:`~sparsedyn.estimation.Estimate`: see :class:`CompiledEstimator`."""
        est = self.estimator
        if self._fast is not None and not covariance and gravity is None:
            if self._has_y:
                out = self._fast(q, v, y)
            elif type(y) is np.ndarray and y.shape == (0,) and y.dtype == np.float64:
                out = self._fast(q, v)
            else:
                out = None
            if out is not None:                         # one checked state through the C fast path
                if not self.compiled_kernels.passed(self.kernel_name, out):
                    return est.solve(q, v, y)          # flagged: the NumPy path decides, warns or raises
                return Estimate(est.problem, out[0], None, np.zeros(()) if est.square else out[1][0], self._dof)
        if not self.compiled or covariance or gravity is not None:
            return est.solve(q, v, y, covariance=covariance, gravity=gravity)
        q, v, y, batch = est._inputs(q, v, y, check_values=False)    # the kernel checks the values
        if 0 in batch:                                  # an empty batch: NumPy's empty Estimate
            return est.solve(q, v, y)
        outs = self._call(*([q, v, y] if self._has_y else [q, v]), recheck=lambda: est._inputs(q, v, y))
        d = outs[0]
        chi2 = np.zeros(batch) if est.square else outs[1][..., 0]
        bad = self._failed(outs, batch)
        if bad == ():
            return est.solve(q, v, y)
        if bad is not None:
            try:
                sub = est.solve(q[bad], v[bad], y[bad])
            except StateSingularError as e:            # report the caller's batch index
                orig = [tuple(int(a[s[0]]) for a in bad) for s in e.states]
                msg = str(e)
                for s, o in zip(e.states, orig):
                    msg = msg.replace(f"batch index {s}", f"batch index {o}")
                raise StateSingularError(msg, orig) from None
            d[bad], chi2[bad] = sub.d, sub.chi2          # (the kernel's own output arrays: no copy)
        return Estimate(est.problem, d, None, chi2, self._dof)
