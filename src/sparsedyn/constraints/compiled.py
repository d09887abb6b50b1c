"""Compiled constraint sets: what ``sparsedyn.compile(cs)`` returns for a :class:`~.base.ConstraintSet`.

A constraint set owns its kernels (the owner protocol of :mod:`sparsedyn.kernels`): the compiler
hands it a compiled kernel set (``ks``: ``ks.add(kernel)`` builds a kernel of state arrays,
``ks.compiled_model`` is the compiled model) and :func:`compiled_set` returns a copy of the set
that runs compiled: its ``model`` is the compiled model (so ``HandC``, ``integrate``... of the
NumPy paths run natively), its ``evaluate``, ``jacobian`` and ``residual`` are one traced kernel,
and it carries compiled forms of the constrained dynamics that the functions of this package pick
up when they are given such a set:

``forward_dynamics_kernel`` (:class:`PartitionedForward`)
    :func:`~.forward.constrained_forward_dynamics` for one fixed partition, one traced kernel per
    partition (:func:`~.forward.partitioned_forward`).
``simulation_kernels`` (:class:`SimulationKernels`)
    the whole explicit Runge-Kutta step of :func:`~.simulate.simulate` (every stage, for a fixed
    partition, step and tableau) as one kernel, and the projections after it (a Newton iteration
    of the minimum-norm correction, the velocity projection).

All of them trace the NumPy code that the uncompiled set runs (:func:`~.simulate.rk_step`,
:func:`~.forward.accelerations_in_null_space`, ``HandC``, ``evaluate``, ``integrate``); only the
dense solves differ: LAPACK's QR and least squares become the normal equations
(:func:`~.partition.unpivoted_null_space`, :func:`~.partition.unpivoted_min_norm`).  Their rounding
error grows as ``cond^2 eps``, so every kernel also returns ``|A A^-1 - I|_F^2`` of the matrices
it inverted; where that exceeds :data:`CHECK_TOL` (a near-singular partition, a Jacobian losing
rank) the caller takes the NumPy path, which re-chooses the partition or raises as it always does.
Jacobians with redundant rows (rank ``G < m``, e.g. a planar loop closed by a 3D point) always
take the NumPy path.  Constraints that cannot be traced (a user constraint calling back into
Python per state) keep their NumPy ``evaluate``.  A compiled set pickles as "compile the original
set again" (its libraries load from the build cache in the receiving process).
"""

from __future__ import annotations

import copy
import hashlib

import numpy as np

from ..algorithms.configuration import integrate
from ..kernels import Kernel, Unkeyable, fingerprint as _fingerprint, package_sources
from ..symbolic.trace import UntraceableError
from .forward import partitioned_forward
from .partition import partition as choose_partition, unpivoted_min_norm
from .simulate import rk_step

__all__ = ["compiled_set", "fingerprint", "PartitionedForward", "SimulationKernels", "CHECK_TOL"]

#: Largest ``|A A^-1 - I|_F^2`` a compiled kernel may report for the matrices it inverted
#: (``|E|_F <= 1e-6``: about ``cond(A) eps``; beyond it the NumPy path runs instead).
CHECK_TOL = 1e-12


def fingerprint(cs):
    """The fingerprint of ``cs``'s kernels beyond the model (:class:`~sparsedyn.kernels.Owned`): the
    constraints' kinds and data in order, and the package's sources; ``None`` when a constraint holds
    what no fingerprint identifies (a :class:`~.user.UserConstraint`'s functions: its kernels are then
    traced on every compile)."""
    try:
        return _fingerprint("constraint set", package_sources(),
                            [(type(c).__module__, type(c).__qualname__,
                              {k: v for k, v in vars(c).items() if k != "model"}) for c in cs])
    except Unkeyable:
        return None


def compiled_set(cs, ks):
    """The compiled copy of ``cs`` (see the module docstring), from the compiled kernel set ``ks``
    that ``sparsedyn.compile`` made for it.  ``numpy``: the original set."""
    out = copy.copy(cs)
    out.model = ks.compiled_model
    out.numpy = cs
    out.__reduce_ex__ = lambda protocol: ks.compile_again()
    if not ks.compiled or cs.m == 0:
        return out
    m, nv, nq = cs.m, cs.nv, cs.model.nq
    try:
        f_qv = ks.add(Kernel.of_arrays("constraints_q_v", [("q", (nq,)), ("v", (nv,))],
                                       [("g", (m,)), ("G", (m, nv)), ("b", (m,))], cs.evaluate))
        f_q = ks.add(Kernel.of_arrays("constraints_q", [("q", (nq,))], [("g", (m,)), ("G", (m, nv))],
                                      lambda q: cs.evaluate(q)[:2]))
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
    out.forward_dynamics_kernel = PartitionedForward(cs, ks)
    out.simulation_kernels = SimulationKernels(cs, ks)
    return out


def _key_name(prefix, key) -> str:
    return prefix + "_" + hashlib.sha256(repr(key).encode()).hexdigest()[:12]


def _check(x):
    return np.array([x], dtype=object)


class _Kernels:
    """Kernels of one constraint set built on demand, by key (``None``: not traceable)."""

    def __init__(self, cs, ks):
        self.cs, self.ks, self.kernels = cs, ks, {}

    def _add(self, key, prefix, inputs, outputs, fn):
        """The kernel ``fn`` of state arrays under ``key`` (named ``prefix`` and a hash of ``key``),
        built on first use; its last output, ``check``, is a run-time check."""
        if key not in self.kernels:
            try:
                self.kernels[key] = self.ks.add(Kernel.of_arrays(_key_name(prefix, key), inputs, outputs, fn,
                                                                 checks=("check",)))
            except UntraceableError:
                self.kernels[key] = None
        return self.kernels[key]

    def _sizes(self):
        cs = self.cs
        return cs.model.nq, cs.nv, cs.m


class PartitionedForward(_Kernels):
    """Constrained forward dynamics for one fixed partition, as one traced kernel per partition
    (:func:`~.forward.partitioned_forward`).  A call whose check exceeds :data:`CHECK_TOL`
    (``G_dep`` near singular, the partition no longer fits) returns ``None`` and the caller takes
    the NumPy path."""

    def _kernel(self, part):
        key = tuple(int(i) for i in part.dependent)
        if key in self.kernels:
            return self.kernels[key]
        cs = self.cs
        # traced for G of full row rank and at least one independent coordinate (a locked mechanism,
        # rank G = nv, has no reduced inertia to invert: the NumPy path)
        if not (part.rank == cs.m and 0 < part.rank < cs.nv and self.ks.compiled):
            self.kernels[key] = None
            return None
        nq, nv, m = self._sizes()

        def constrained_fd(q, v, tau):
            a, lam, chk = partitioned_forward(cs, part, q, v, tau)
            return a, lam, _check(chk)
        return self._add(key, "constrained_fd", [("q", (nq,)), ("v", (nv,)), ("tau", (nv,))],
                         [("a", (nv,)), ("lam", (m,)), ("check", (1,))], constrained_fd)

    def __call__(self, part, q, v, tau):
        """``(a, lam)`` for partition ``part`` at one state, or ``None`` (take the NumPy path)."""
        f = self._kernel(part)
        if f is None:
            return None
        a, lam, chk = f(q, v, tau)
        if not chk[0] <= CHECK_TOL:
            return None
        return a, lam


class SimulationKernels(_Kernels):
    """Compiled steps and projections of :func:`~.simulate.simulate`.

    :meth:`stepper` gives the whole Runge-Kutta step (all stages of :func:`~.simulate.rk_step`,
    traced with the accelerations of :func:`~.forward.partitioned_forward`) as one kernel per
    partition, tableau, step ``dt``, Baumgarte gains and presence of ``f_ext``; ``tau`` and
    ``f_ext`` are its inputs.  :meth:`projector` gives the projections after a step: Newton's
    minimum-norm correction of ``q`` onto ``g(q) = 0`` (one iteration per kernel call, looped in
    Python with the tolerance, step cap and line-search test of :func:`~.assembly.newton`) and the
    projection of ``v`` onto ``G v = 0``.  Both return ``None`` (take the NumPy path) where a
    check fails, or a Newton iteration would need the line search or the step cap.
    """

    # --- the Runge-Kutta step ----------------------------------------------------------------
    def _step_kernel(self, part, tableau, dt, baumgarte, with_f_ext):
        A, b, c = (np.asarray(x, float) for x in tableau)
        key = ("constrained_rk", tuple(int(i) for i in part.dependent), A.tobytes(), b.tobytes(), c.tobytes(),
               float(dt).hex(), baumgarte, with_f_ext)
        if key in self.kernels:
            return self.kernels[key]
        cs = self.cs
        nq, nv, m = self._sizes()

        def step(q, v, tau, f_ext=None):
            checks = []

            def acc(t, qi, vi):
                a, _, chk = partitioned_forward(cs, part, qi, vi, tau, f_ext, baumgarte)
                checks.append(chk)
                return a

            q_new, v_new = rk_step(cs, 0.0, q, v, dt, (A, b, c), acc=acc)
            return q_new, v_new, _check(sum(checks))

        inputs = [("q", (nq,)), ("v", (nv,)), ("tau", (nv,))] + ([("f_ext", (cs.model.nbodies, 6))]
                                                                 if with_f_ext else [])
        return self._add(key, key[0], inputs, [("q_new", (nq,)), ("v_new", (nv,)), ("check", (1,))], step)

    def stepper(self, tableau, dt, *, tau=None, f_ext=None, baumgarte=None):
        """A :class:`_Stepper` for tableau ``(A, b, c)``, step ``dt``, constant ``tau`` (nv,) or
        ``None``, constant ``f_ext`` (NB, 6) or ``None`` and ``baumgarte`` ``(alpha, beta)`` or
        ``None``; ``None`` where there is no compiled step (a callable ``tau``, no compiler)."""
        if callable(tau) or not self.ks.compiled or self.cs.m == 0:
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
        nq, nv, m = self._sizes()

        def newton_iteration(q):
            g, G = cs.evaluate(q)[:2]
            dv, chk = unpivoted_min_norm(G, g)
            q1 = integrate(cs.model, q, -dv)
            g1 = cs.evaluate(q1)[0]
            return g, -dv, q1, g1, _check(chk)
        return self._add(("newton_iteration",), "newton_iteration", [("q", (nq,))],
                         [("g", (m,)), ("dv", (nv,)), ("q1", (nq,)), ("g1", (m,)), ("check", (1,))],
                         newton_iteration)

    def _velocity_kernel(self):
        cs = self.cs
        nq, nv, m = self._sizes()

        def project_velocity(q, v):
            G = cs.evaluate(q)[1]
            dv, chk = unpivoted_min_norm(G, G @ v)
            v1 = v - dv
            return v1, G @ v1, _check(chk)
        return self._add(("project_velocity",), "project_velocity", [("q", (nq,)), ("v", (nv,))],
                         [("v1", (nv,)), ("Gv", (m,)), ("check", (1,))], project_velocity)

    def projector(self, tol=1e-12, max_iter=50, max_step=0.5):
        """A :class:`_Projector` with :func:`~.assembly.newton`'s ``tol``, ``max_iter`` and
        ``max_step``; ``None`` without a compiler."""
        if not self.ks.compiled or self.cs.m == 0:
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
    ``g(q) = 0`` (to ``max |g| <= tol``) by the iterations of :func:`~.assembly.newton` with
    nothing held, each a kernel call, and ``v`` projected onto ``G(q) v = 0`` by the smallest
    change, as :func:`~.assembly.project_velocity` does; ``g`` at the returned ``q`` and ``G v``
    of the returned ``v``.  An iteration that :func:`~.assembly.newton` would cap (``max_step``) or
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
