"""Compiled constraint sets: ``sparsedyn.compile(ConstraintSet)``.

:func:`compile_constraints` returns a copy of a
:class:`~sparsedyn.constraints.ConstraintSet` whose model is a
:class:`~sparsedyn.codegen.compiled_model.CompiledModel`, whose ``evaluate`` is one traced
kernel, and which carries compiled forms of the constrained dynamics that the
functions of :mod:`sparsedyn.constraints` pick up when they are given such a
set (the constraint layer never imports this one; it looks for the attributes):

``forward_dynamics_kernel`` (:class:`PartitionedForward`)
    :func:`~sparsedyn.constraints.constrained_forward_dynamics` for one fixed
    partition, one traced kernel per partition.
``simulation_kernels`` (:class:`SimulationKernels`)
    the whole explicit Runge-Kutta step of
    :func:`~sparsedyn.constraints.simulate.simulate` (every stage, for a fixed
    partition, step and tableau) as one kernel, and the projections after it
    (a Newton iteration of the minimum-norm correction, the velocity projection).

All of them trace the NumPy code that the uncompiled set runs
(:func:`~sparsedyn.constraints.simulate.rk_step`, ``HandC``, ``evaluate``,
``integrate``); only the dense solves differ: LAPACK's QR and least squares
become the normal equations, written without pivoting (``G_dep^-1 = G_dep^T
(G_dep G_dep^T)^-1``, ``G^+ = G^T (G G^T)^-1``, inverses by
:func:`~sparsedyn.algorithms.ltdl.spd_inverse`).  Their rounding error grows as
``cond^2 eps``, so every kernel also returns ``|A A^-1 - I|_F^2`` of the
matrices it inverted; where that exceeds :data:`CHECK_TOL` (a near-singular
partition, a Jacobian losing rank) the caller takes the NumPy path, which
re-chooses the partition or raises as it always does.  Jacobians with redundant
rows (rank ``G < m``, e.g. a planar loop closed by a 3D point) always take the
NumPy path.
"""

from __future__ import annotations

import copy
import functools
import hashlib

import numpy as np

from ..algorithms.configuration import integrate
from ..algorithms.crba import HandC
from ..algorithms.ltdl import spd_inverse
from ..symbolic.trace import UntraceableError
from .compiled_model import CompiledModel
from .runtime import find_compiler_or_warn

__all__ = ["compile_constraints", "PartitionedForward", "SimulationKernels", "CHECK_TOL"]

#: Largest ``|A A^-1 - I|_F^2`` a compiled kernel may report for the matrices it inverted
#: (``|E|_F <= 1e-6``: about ``cond(A) eps``; beyond it the NumPy path runs instead).
CHECK_TOL = 1e-12


def _reduce_compiled(cs, vectorize, protocol):
    return _recompile, (cs, vectorize)


def _recompile(cs, vectorize):
    return compile_constraints(cs, find_compiler_or_warn(), None, vectorize)


def compile_constraints(cs, compiler, progress=None, vectorize=None):
    """A copy of the :class:`~sparsedyn.constraints.ConstraintSet` ``cs`` that runs compiled: its
    ``model`` is a :class:`~sparsedyn.codegen.compiled_model.CompiledModel` (so ``HandC``, ``integrate``... of
    the constrained dynamics run natively) and its ``evaluate`` (residual, Jacobian and bias of every
    constraint) is one traced kernel.  Everything that takes a constraint set takes it:
    :func:`~sparsedyn.constraints.constrained_forward_dynamics`,
    :func:`~sparsedyn.constraints.constrained_inverse_dynamics`,
    :func:`~sparsedyn.constraints.simulate.simulate` (whose steps and projections then run as
    compiled kernels, see :class:`SimulationKernels`).  Constraints that cannot be traced (a user
    constraint calling back into Python per state) keep their NumPy ``evaluate``.  ``numpy``: the
    original set.
    """
    k = CompiledModel(cs.model, compiler, progress, vectorize)
    out = copy.copy(cs)
    out.model = k
    out.numpy = cs
    # Pickled as "compile the original set again" (its libraries load from the build cache there):
    # the compiled copy holds loaded libraries and closures, the original set pickles.
    out.__reduce_ex__ = functools.partial(_reduce_compiled, cs, vectorize)
    if not k.compiled or cs.m == 0:
        return out

    def with_v(model, q, v):
        return cs.evaluate(q, v)

    def without_v(model, q):
        return cs.evaluate(q)[:2]

    try:
        f_qv = k.add_kernel(with_v, name="constraints_q_v")
        f_q = k.add_kernel(without_v, name="constraints_q")
    except UntraceableError:
        return out

    def evaluate(q, v=None):
        if v is None:
            g, G = f_q(q)
            return g, G, None
        return f_qv(q, v)

    def jacobian(q):
        return f_q(q)[1]

    def residual(q):
        return f_q(q)[0]

    evaluate.__doc__, jacobian.__doc__, residual.__doc__ = cs.evaluate.__doc__, cs.jacobian.__doc__, \
        cs.residual.__doc__
    out.evaluate, out.jacobian, out.residual = evaluate, jacobian, residual
    out.forward_dynamics_kernel = PartitionedForward(cs, k)
    out.simulation_kernels = SimulationKernels(cs, k)
    return out


def _inverse_check(A, Ainv):
    """``|A Ainv - I|_F^2``: how far the unpivoted inverse is from one (a traced scalar)."""
    E = A @ Ainv - np.eye(A.shape[-1])
    return np.sum(E * E)


def partitioned_forward(cs, dep, ind, q, v, tau, f_ext=None, baumgarte=None):
    """``(a, lambda, check)`` of the constrained forward dynamics for the partition ``dep``/``ind``
    (dof indices; ``G_dep`` square, i.e. ``G`` of full row rank), written for the tracer.

    The null-space method of :mod:`sparsedyn.constraints.forward` with
    ``G_dep^-1 = G_dep^T (G_dep G_dep^T)^-1`` and ``(gamma^T H gamma)^-1`` by
    :func:`~sparsedyn.algorithms.ltdl.spd_inverse`; ``baumgarte=(alpha, beta)``
    (numbers) adds the stabilisation terms.  ``check``: ``|G_dep G_dep^-1 - I|_F^2``.
    """
    model = cs.model
    nv, r = model.nv, len(dep)
    H, C = HandC(model, q, v, f_ext)
    g, G, b = cs.evaluate(q, v)
    if baumgarte is not None:
        alpha, beta = baumgarte
        b = b + 2.0 * alpha * (G @ v) + beta * beta * g
    Gd, Gi = G[:, dep], G[:, ind]
    Ginv = Gd.T @ spd_inverse(Gd @ Gd.T)
    a_p = np.zeros(nv, dtype=object)
    a_p[dep] = -(Ginv @ b)
    gamma = np.zeros((nv, nv - r), dtype=object)
    gamma[ind, np.arange(nv - r)] = 1
    gamma[dep] = -(Ginv @ Gi)
    Mr = gamma.T @ H @ gamma
    a = gamma @ (spd_inverse(Mr) @ (gamma.T @ (tau - C - H @ a_p))) + a_p
    lam = Ginv.T @ (H @ a + C - tau)[dep]
    return a, lam, _inverse_check(Gd, Ginv)


def _min_norm(G, y):
    """``(G^+ y, check)`` for ``G`` (m, n) of full row rank: ``G^T (G G^T)^-1 y``."""
    GGt = G @ G.T
    W = spd_inverse(GGt)
    return G.T @ (W @ y), _inverse_check(GGt, W)


def _key_name(prefix, key) -> str:
    return prefix + "_" + hashlib.sha256(repr(key).encode()).hexdigest()[:12]


class PartitionedForward:
    """Constrained forward dynamics for one fixed partition, as one traced kernel per partition
    (:func:`partitioned_forward`).  A call whose check exceeds :data:`CHECK_TOL` (``G_dep`` near
    singular, the partition no longer fits) returns ``None`` and the caller takes the NumPy path.
    """

    def __init__(self, cs, k):
        self.cs, self.k, self.kernels = cs, k, {}

    def _kernel(self, part):
        key = tuple(int(i) for i in part.dependent)
        if key in self.kernels:
            return self.kernels[key]
        cs = self.cs
        dep, ind = np.asarray(part.dependent), np.asarray(part.independent)
        f = None
        if part.rank == cs.m and part.rank > 0 and self.k.compiled:
            def constrained_fd(model, q, v, tau):
                a, lam, chk = partitioned_forward(cs, dep, ind, q, v, tau)
                return a, lam, np.array([chk], dtype=object)

            try:
                f = self.k.add_kernel(constrained_fd, name=_key_name("constrained_fd", key))
            except UntraceableError:
                f = None
        self.kernels[key] = f
        return f

    def __call__(self, part, q, v, tau):
        """``(a, lam)`` for partition ``part`` at one state, or ``None`` (take the NumPy path)."""
        f = self._kernel(part)
        if f is None:
            return None
        a, lam, chk = f(q, v, tau)
        if not chk[0] <= CHECK_TOL:
            return None
        return a, lam


class SimulationKernels:
    """Compiled steps and projections of :func:`~sparsedyn.constraints.simulate.simulate`.

    :meth:`stepper` gives the whole Runge-Kutta step (all stages of
    :func:`~sparsedyn.constraints.simulate.rk_step`, traced with the accelerations of
    :func:`partitioned_forward`) as one kernel per partition, tableau, step ``dt``, Baumgarte
    gains and presence of ``f_ext``; ``tau`` and ``f_ext`` are its inputs.  :meth:`projector`
    gives the projections after a step: Newton's minimum-norm correction of ``q`` onto
    ``g(q) = 0`` (one iteration per kernel call, looped in Python with the tolerance, step
    cap and line-search test of :func:`~sparsedyn.constraints.assembly.newton`) and the
    projection of ``v`` onto ``G v = 0``.  Both return ``None`` (take the NumPy path) where a
    check fails, or a Newton iteration would need the line search or the step cap.
    """

    def __init__(self, cs, k):
        self.cs, self.k, self.kernels = cs, k, {}

    def _add(self, fn, key):
        if key not in self.kernels:
            try:
                self.kernels[key] = self.k.add_kernel(fn, name=_key_name(key[0], key))
            except UntraceableError:
                self.kernels[key] = None
        return self.kernels[key]

    # --- the Runge-Kutta step ----------------------------------------------------------------
    def _step_kernel(self, part, tableau, dt, baumgarte, with_f_ext):
        A, b, c = (np.asarray(x, float) for x in tableau)
        key = ("constrained_rk", tuple(int(i) for i in part.dependent), A.tobytes(), b.tobytes(), c.tobytes(),
               float(dt).hex(), baumgarte, with_f_ext)
        if key in self.kernels:
            return self.kernels[key]
        from ..constraints.simulate import rk_step
        cs = self.cs
        dep, ind = np.asarray(part.dependent), np.asarray(part.independent)

        def step(q, v, tau, f_ext):
            checks = []

            def acc(t, qi, vi):
                a, _, chk = partitioned_forward(cs, dep, ind, qi, vi, tau, f_ext, baumgarte)
                checks.append(chk)
                return a

            q_new, v_new = rk_step(cs, 0.0, q, v, dt, (A, b, c), acc=acc)
            return q_new, v_new, np.array([sum(checks)], dtype=object)

        if with_f_ext:
            def constrained_rk(model, q, v, tau, f_ext):
                return step(q, v, tau, f_ext)
        else:
            def constrained_rk(model, q, v, tau):
                return step(q, v, tau, None)
        return self._add(constrained_rk, key)

    def stepper(self, tableau, dt, *, tau=None, f_ext=None, baumgarte=None):
        """A :class:`_Stepper` for tableau ``(A, b, c)``, step ``dt``, constant ``tau`` (nv,) or
        ``None``, constant ``f_ext`` (NB, 6) or ``None`` and ``baumgarte`` ``(alpha, beta)`` or
        ``None``; ``None`` where there is no compiled step (a callable ``tau``, no compiler)."""
        if callable(tau) or not self.k.compiled or self.cs.m == 0:
            return None
        cs = self.cs
        tau = np.zeros(cs.nv) if tau is None else np.asarray(tau)
        args = (tau,) if f_ext is None else (tau, np.asarray(f_ext))
        if [np.shape(x) for x in args] != [(cs.nv,), (cs.model.nbodies, 6)][:len(args)] \
                or not all(np.issubdtype(np.asarray(x).dtype, np.number) for x in args):
            return None                     # the NumPy path says what is wrong with them
        args = tuple(np.array(x, float) for x in args)
        if baumgarte is not None:
            try:
                baumgarte = tuple(float(x) for x in baumgarte)
            except (TypeError, ValueError):
                return None
            if len(baumgarte) != 2:
                return None
        return _Stepper(self, tableau, float(dt), args, baumgarte)

    # --- the projections ---------------------------------------------------------------------
    def _newton_kernel(self):
        cs = self.cs

        def newton_iteration(model, q):
            g, G = cs.evaluate(q)[:2]
            dv, chk = _min_norm(G, g)
            q1 = integrate(model, q, -dv)
            g1 = cs.evaluate(q1)[0]
            return g, -dv, q1, g1, np.array([chk], dtype=object)
        return self._add(newton_iteration, ("newton_iteration",))

    def _velocity_kernel(self):
        cs = self.cs

        def project_velocity(model, q, v):
            G = cs.evaluate(q)[1]
            dv, chk = _min_norm(G, G @ v)
            v1 = v - dv
            return v1, G @ v1, np.array([chk], dtype=object)
        return self._add(project_velocity, ("project_velocity",))

    def projector(self, tol=1e-12, max_iter=50, max_step=0.5):
        """A :class:`_Projector` with :func:`~sparsedyn.constraints.assembly.newton`'s ``tol``,
        ``max_iter`` and ``max_step``; ``None`` without a compiler."""
        if not self.k.compiled or self.cs.m == 0:
            return None
        newton_k, velocity_k = self._newton_kernel(), self._velocity_kernel()
        if newton_k is None or velocity_k is None:
            return None
        return _Projector(newton_k, velocity_k, tol, max_iter, max_step)


class _Stepper:
    """``step(q, v) -> (q_new, v_new)``: one compiled Runge-Kutta step, or ``None`` (then take the
    NumPy step).  The partition is chosen (pivoted QR) at the first step and kept while the
    kernel's check passes; where it fails, it is chosen again at the current state and the step
    retried once with it, and where that fails too the NumPy step runs (and the next step chooses
    again).  A set whose Jacobian has redundant rows at the first state (``rank G < m``) takes the
    NumPy step throughout."""

    def __init__(self, kernels, tableau, dt, args, baumgarte):
        self.kernels, self.tableau, self.dt, self.args, self.baumgarte = kernels, tableau, dt, args, baumgarte
        self.part, self.kernel, self.enabled, self.first = None, None, True, True

    def _choose(self, q):
        from ..constraints.partition import partition as choose_partition
        ks = self.kernels
        self.part = choose_partition(ks.cs, q)
        self.kernel = None if self.part.rank != ks.cs.m else \
            ks._step_kernel(self.part, self.tableau, self.dt, self.baumgarte, len(self.args) == 2)

    def __call__(self, q, v):
        if not self.enabled:
            return None
        fresh = self.part is None
        if fresh:
            self._choose(q)
            if self.first and self.kernel is None:
                self.enabled = False
        self.first = False
        for _ in range(2):
            if self.kernel is not None:
                q_new, v_new, chk = self.kernel(q, v, *self.args)
                if chk[0] <= CHECK_TOL:
                    return q_new, v_new
            if fresh:
                break
            self._choose(q)
            fresh = True
        self.part = self.kernel = None
        return None


class _Projector:
    """``settle(q, v) -> (q, v, g, G v)``, or ``None`` (then take the NumPy path): ``q`` moved onto
    ``g(q) = 0`` (to ``max |g| <= tol``) by the iterations of
    :func:`~sparsedyn.constraints.assembly.newton` with nothing held, each a kernel call, and ``v``
    projected onto ``G(q) v = 0`` by the smallest change, as
    :func:`~sparsedyn.constraints.assembly.project_velocity` does; ``g`` at the returned ``q`` and
    ``G v`` of the returned ``v``.  An iteration that :func:`newton` would cap (``max_step``) or
    shorten (line search), or a failed check, gives ``None``; a check failing at the first call
    (redundant rows: ``G G^T`` singular) leaves the NumPy path to every later call."""

    def __init__(self, newton_k, velocity_k, tol, max_iter, max_step):
        self.newton_k, self.velocity_k = newton_k, velocity_k
        self.tol, self.max_iter, self.max_step = tol, max_iter, max_step
        self.enabled, self.first = True, True

    def __call__(self, q, v):
        if not self.enabled:
            return None
        first, self.first = self.first, False
        g, dv, q1, g1, chk = self.newton_k(q)
        for it in range(self.max_iter + 1):
            if np.max(np.abs(g)) <= self.tol:
                break
            if not chk[0] <= CHECK_TOL:
                self.enabled = not first
                return None
            if it == self.max_iter or np.max(np.abs(dv)) > self.max_step \
                    or not np.linalg.norm(g1) <= (1 - 1e-4) * np.linalg.norm(g):
                return None
            q = q1
            g, dv, q1, g1, chk = self.newton_k(q)
        v, Gv, chk = self.velocity_k(q, v)
        if not chk[0] <= CHECK_TOL:
            self.enabled = not first
            return None
        return q, v, g, Gv
