"""Compiled sparse problems and estimators: ``sparsedyn.compile(problem | structure | estimator)``.

The online phase of a :class:`~sparsedyn.sparse.Structure` (:meth:`Structure._kernel
<sparsedyn.sparse.Structure._kernel>`) and an :class:`~sparsedyn.estimation.Estimator`'s
algebra (its well-posed solve, or the least-squares core ``_lsq_values`` /
``_lsq_core`` / ``_lsq_finish``) are generic over backends; here they are traced
on symbolic scalars into one kernel each (:meth:`~sparsedyn.kernels.Kernel.of_arrays`)
and built, cached and run by the same machinery as a model's kernels
(:class:`~sparsedyn.codegen.runtime.KernelSet`).  Nothing is re-implemented: the
kernel *is* the traced NumPy code, with ``model.gravity`` folded in.

Safety.  The float path checks, per state, every pivot of a block whose static
pivots are not proven nonzero (``|u_kk| / scale <= PIVOT_RTOL``) and each such
block's normwise backward error (``> BERR_TOL``), and (least squares) the
conditioning of the ``k x k`` normal matrix ``G`` (``eigvalsh``); flagged states are
re-solved densely, with a warning or an error.  The IR has no ``abs`` or ``max``,
so the compiled kernel returns per-state *check values*, one per test, each
positive only when a bound that is more pessimistic than the float path's test
passes (with safety factors :data:`MARGIN`, :data:`BERR_MARGIN` for rounding):

* per checked pivot ``piv^2 - (MARGIN PIVOT_RTOL)^2 (piv^2 + init^2 + sum l^2 + sum u^2)``
  (the sum of squares bounds the squared scale ``max(|piv|, |init|, max|l|, max|u|)^2``);
* per checked block (``m`` rows) and right-hand side
  ``c (sum (a z)^4 + sum rhs^4) - sum res^4`` with ``c = (BERR_TOL / BERR_MARGIN)^4 / (2 m)``
  (``res = A_K z - rhs``, ``a z`` the block's products: 4-norms bound the max-norms of
  the backward error ``max|res| / (max_r sum_r |a z| + max|rhs|)``), and
  ``1 / (sum (a z)^4 + sum rhs^4 + sum res^4)`` (zero when those overflow, beyond ``1e77``);
* (least squares) the ``L^T D L`` pivots of ``G`` and
  ``1 - MARGIN RANK_RTOL trace(G) trace(G^-1)`` (``1 / (trace G trace G^-1)`` is a
  lower bound of ``lambda_min / lambda_max`` when the pivots are positive).

A state with a check value that is not positive (NaN included), or a result
that is not finite, is re-solved by the NumPy path, which warns, falls back or
raises exactly as it does without compilation (its messages then count the
re-solved states only).  Every other state passes the float path's tests too
(up to the rounding the margin covers), so its compiled result is the float
path's result up to rounding, amplified by the conditioning of the state.

One state.  A ``solve`` of one state given as float64 arrays of the one-state shapes
calls the kernel through the C fast-call ``Kernel`` (:mod:`sparsedyn.codegen.fastcall`),
which checks, as the NumPy path's validation does, that every value is finite and
every quaternion of ``q`` of unit norm; the result is then tested on its check
values and wrapped in an :class:`~sparsedyn.estimation.Estimate` whose blocks,
contact wrenches and named view are computed from ``d`` on first access.  Any other
call (a batch, lists, another dtype, a value the checks refuse) takes the validated
path, so errors and their messages are the NumPy path's.

What stays on the NumPy path (documented in the classes): ``gravity=`` other than
the model's, ``covariance=True``, ``info=True``, ``check="all"``.

Cache.  The library is keyed by the IR (so two problems share a library only if
their programs are identical); the manifest that lets a later process skip the
trace is keyed by the model fingerprint plus a fingerprint of the structure
(pattern, values of the constant entries, measurement matrices and slots, block
pivot order and symbolic LU), the estimator's matrices, the sources of the
package, and of every ``bias`` callable's code and captured values.  A ``bias``
defined outside sparsedyn (its globals are unknown) disables the manifest: the
kernel is then traced each time and the library still reused.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .runtime import KernelInfo, KernelSet, _fast_module, _progress_fn, find_compiler_or_warn, model_fingerprint
from ..symbolic.ir import Sym
from ..kernels import Kernel
from .trace import trace

__all__ = ["CompiledStructure", "CompiledEstimator", "compile_problem", "is_problem", "structure_fingerprint",
           "estimator_fingerprint", "MARGIN", "BERR_MARGIN"]

#: The safety factor of the compiled pre-checks; a pivot ratio bound below ``MARGIN * PIVOT_RTOL`` or a
#: conditioning bound below ``MARGIN * RANK_RTOL`` sends the state to the NumPy path (covers
#: rounding differences between the two computations).
MARGIN = 4.0
#: The same for a backward error bound above ``BERR_TOL / BERR_MARGIN`` (the 4-norm bound is
#: already pessimistic by up to ``(2 m)^(1/4)``; a smaller factor spares false alarms).
BERR_MARGIN = 2.0


# --- what can be compiled -------------------------------------------------------------

def _classes():
    from ..estimation.problem import EstimationProblem, Estimator
    from ..sparse import Problem, Structure
    return Problem, Structure, EstimationProblem, Estimator


def is_problem(x) -> bool:
    """Whether ``x`` is a sparse problem, a structure, an estimation problem or an estimator."""
    return isinstance(x, _classes())


def compile_problem(x, compiler, vectorize=None, progress=None):
    """``sparsedyn.compile`` of a sparse problem / structure / estimation problem / estimator."""
    Problem, Structure, EstimationProblem, Estimator = _classes()
    if isinstance(x, Problem):
        x = x.analyze()
    if isinstance(x, EstimationProblem):
        x = x.analyze()
    prog = _progress_fn(progress, x.model)
    if isinstance(x, Structure):
        return CompiledStructure(x, compiler, prog, vectorize)
    return CompiledEstimator(x, compiler, prog, vectorize)


def _rebuild(x, vectorize, threads):
    """A compiled structure or estimator unpickled: compiled again from ``x`` (the library is found in
    the build cache when the sending process built it on a machine that shares it)."""
    k = compile_problem(x, find_compiler_or_warn(), vectorize)
    k.threads = threads
    return k


# --- fingerprints -----------------------------------------------------------------------

class _Unkeyable(Exception):
    pass


_tree_hash = None


def _sources_hash() -> str:
    """SHA-256 of every Python source of the package (a bias callable may use any of them)."""
    global _tree_hash
    if _tree_hash is None:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")):
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
        _tree_hash = h.hexdigest()
    return _tree_hash


def _arr(h, a):
    a = np.ascontiguousarray(a)
    if a.dtype == object:
        raise _Unkeyable
    h.update(repr((a.dtype.str, a.shape)).encode())
    h.update(a.tobytes())


def _code_key(co, depth=0):
    parts = [co.co_code.hex(), repr(co.co_names), repr(co.co_varnames), repr(co.co_freevars)]
    for c in co.co_consts:
        parts.append(_code_key(c, depth + 1) if hasattr(c, "co_code") else _value_key(c, depth + 1))
    return "code(" + ";".join(parts) + ")"


def _value_key(v, depth=0):
    """A string that identifies ``v`` for a cache key, or :class:`_Unkeyable`."""
    if depth > 8:
        raise _Unkeyable
    if v is None or v is Ellipsis or isinstance(v, (bool, int, float, complex, str, bytes, np.integer, np.floating)):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, frozenset):
        return "frozenset(" + ",".join(sorted(_value_key(x, depth + 1) for x in v)) + ")"
    if isinstance(v, np.ndarray):
        h = hashlib.sha256()
        _arr(h, v)
        return "array:" + h.hexdigest()
    if isinstance(v, (tuple, list)):
        return type(v).__name__ + "(" + ",".join(_value_key(x, depth + 1) for x in v) + ")"
    if isinstance(v, dict):
        return "dict(" + ",".join(_value_key(k, depth + 1) + ":" + _value_key(x, depth + 1)
                                  for k, x in sorted(v.items(), key=lambda kv: repr(kv[0]))) + ")"
    if isinstance(v, slice):
        return f"slice({v.start!r},{v.stop!r},{v.step!r})"
    if hasattr(v, "__func__") and hasattr(v, "__self__"):           # bound method
        return "method(" + _value_key(v.__func__, depth + 1) + "," + _value_key(v.__self__, depth + 1) + ")"
    mod = getattr(type(v), "__module__", "") or ""
    if hasattr(v, "__code__"):
        fmod = getattr(v, "__module__", "") or ""
        if not fmod.startswith("sparsedyn"):
            raise _Unkeyable                                        # its globals are unknown
        cells = [c.cell_contents for c in (v.__closure__ or ())]
        return ("fn(" + fmod + "." + v.__qualname__ + "," + _code_key(v.__code__) + ","
                + _value_key(cells, depth + 1) + "," + _value_key(v.__defaults__, depth + 1) + ","
                + _value_key(v.__kwdefaults__, depth + 1) + ")")
    if mod.startswith("sparsedyn") and hasattr(v, "__dict__"):
        # a library object (a Transform, a sensor, a frame ...): its class and attributes
        return ("obj(" + mod + "." + type(v).__qualname__ + ","
                + _value_key({k: x for k, x in vars(v).items() if k != "model"}, depth + 1) + ")")
    if mod.startswith("sparsedyn") and hasattr(type(v), "__slots__"):
        return ("obj(" + mod + "." + type(v).__qualname__ + ","
                + _value_key([getattr(v, k, None) for k in type(v).__slots__], depth + 1) + ")")
    raise _Unkeyable


def _structure_hash(h, st):
    p, L = st.pattern, st.layout
    for a in (p.rows, p.cols, p.cls, p.const, p.source, p.masks):
        _arr(h, a)
    h.update(repr((st.n, st.nnz, st.nslots, p.nrows)).encode())
    h.update(repr([(v.kind, v.body, v.offset, v.size) for v in L.variables]).encode())
    h.update(repr([(e.kind, e.body, e.offset, e.size) for e in p.equations]).encode())
    for blk in st.blocks:
        h.update(b"block")
        for a in (blk.rows, blk.cols, blk.piv, blk.entries, *blk.entry_pos, *blk.off):
            _arr(h, a)
        h.update(repr(list(blk.proof)).encode())
        for k, lpos, ls, us, upd in blk.steps:
            h.update(repr(int(k)).encode())
            for a in (lpos, ls, us, upd):
                _arr(h, a)
        for pos, sl in list(blk.lcol) + list(blk.ucol):
            _arr(h, pos)
            _arr(h, sl)
    for m, slot in zip(st.problem.measurements, st.problem.slots):
        h.update(repr((slot.start, slot.stop, m.size, m.known)).encode())
        for var, M in m.terms:
            h.update(repr((var.kind, var.body, var.offset, var.size)).encode())
            _arr(h, M)
        h.update(_value_key(m.bias).encode())


def _finish(h, st):
    from .._version import __version__
    h.update(model_fingerprint(st.model).encode())
    h.update((_sources_hash() + __version__).encode())
    return h.hexdigest()


def structure_fingerprint(st):
    """SHA-256 of everything the traced online phase of ``st`` depends on beyond the model, or
    ``None`` when a ``bias`` callable cannot be identified (see the module docstring)."""
    h = hashlib.sha256(b"structure\0")
    try:
        _structure_hash(h, st)
    except _Unkeyable:
        return None
    return _finish(h, st)


def estimator_fingerprint(est):
    """As :func:`structure_fingerprint`, for an estimator's traced solve."""
    h = hashlib.sha256(b"estimator\0")
    p = est.problem
    try:
        st = est.structure if est.square else est._basis
        _structure_hash(h, st)
        h.update(repr((est.square, est.n, est.s, getattr(est, "k", None), getattr(est, "basis_rows", None),
                       p.ny, p._n_implicit())).encode())
        _arr(h, est.M_soft)
        _arr(h, est.W)
        for group in (est.soft, est.exact, p.priors):
            h.update(b"group")
            for e in group:
                h.update(repr((None if e.slot is None else (e.slot.start, e.slot.stop), e.size)).encode())
                h.update(_value_key(e.bias).encode())
                if e.slot is None:
                    _arr(h, np.asarray(e.sensor.value(e.size), float))
    except _Unkeyable:
        return None
    return _finish(h, st)


# --- tracing the online phase with its check quantities -----------------------------------

class _Recorder:
    """A monitor for the traced factorization (``Structure._kernel``'s ``monitor``): it asks for
    the same blocks as the float path's ``check="auto"`` and records what its pivot test reads.
    The solve phase's test is computed afterwards from ``x``, ``vals`` and ``b``, so the monitor
    declines during that phase (``phase`` is the kernel's phase hook)."""

    mode = "auto"

    def __init__(self):
        self.checked = 0
        self.records = []
        self._on = True

    def wants(self, blk):
        return self._on and not blk.proven

    def pivot(self, blk, k, piv, init, lvals, uvals):
        self.records.append((piv, init, lvals, uvals))

    @contextmanager
    def phase(self, name):
        old, self._on = self._on, name != "solve"
        try:
            yield
        finally:
            self._on = old


def _flat(x):
    return list(np.asarray(x, dtype=object).reshape(-1))


def _sumpow(x, p):
    """``sum x^p`` over the first axis (``p`` = 2 or 4)."""
    x = np.asarray(x, dtype=object)
    if not x.shape[0]:
        return np.zeros(x.shape[1:], dtype=object)
    x2 = x * x
    return (x2 if p == 2 else x2 * x2).sum(axis=0)


def _recip(x):
    """``1 / x`` elementwise (a constant zero gives ``inf``)."""
    x = np.asarray(x, dtype=object)
    out = np.empty(x.shape, dtype=object)
    for i in np.ndindex(x.shape):
        out[i] = float("inf") if (not isinstance(x[i], Sym) and x[i] == 0) else 1.0 / x[i]
    return out


def _traced_solve(st, q, v, y, batch):
    """``x`` (n,) + batch of the traced online phase of ``st`` (``model.gravity`` folded), the
    list of its check values (see the module docstring), in :class:`_CheckLayout` order, and the
    factors ``(vals, W, b, batch)``."""
    from .. import _checks
    from ..sparse.solver import BERR_TOL, PIVOT_RTOL
    g = _checks.gravity(st.model, None)
    rec = _Recorder()
    x, vals, b, W = st._kernel(q, v, y, g, batch, True, rec, rec.phase)
    checks = []
    t2 = (MARGIN * PIVOT_RTOL) ** 2
    for piv, init, lvals, uvals in rec.records:
        T = piv * piv + init * init
        if lvals is not None and len(lvals):
            T = T + _sumpow(lvals, 2)
        if uvals is not None and len(uvals):
            T = T + _sumpow(uvals, 2)
        checks += _flat(piv * piv - T * t2)
    cols = st.pattern.cols
    for blk in st.blocks:
        if blk.proven:
            continue
        z = x[blk.cols]
        rhs = -b[blk.rows]                                # exactly as Structure's block solve forms it
        pos, es = blk.off
        if len(es):
            np.subtract.at(rhs, pos, vals[es] * x[cols[es]])
        rl, cl = blk.entry_pos
        p = vals[blk.entries] * z[cl]
        Az = np.zeros(rhs.shape, dtype=object)
        np.add.at(Az, rl, p)
        s_res, s_p, s_rhs = _sumpow(Az - rhs, 4), _sumpow(p, 4), _sumpow(rhs, 4)
        c = (BERR_TOL / BERR_MARGIN) ** 4 / (2 * blk.size)
        checks += _flat((s_p + s_rhs) * c - s_res) + _flat(_recip(s_p + s_rhs + s_res))
    return x, checks, (vals, W, b, batch)


_min = np.minimum.reduce


class _CheckLayout:
    """How many check values a kernel returns (its ``chk`` output) and the test on them."""

    def __init__(self, st, nrhs=1, k=0):
        blocks = [b for b in st.blocks if not b.proven]
        self.npiv = sum(b.size for b in blocks)
        self.nblock = 2 * len(blocks) * nrhs
        self.k = k                        # least squares: the k pivots of G and the conditioning value
        self.size = self.npiv + self.nblock + (k + 1 if k else 0)
        self._zeros = None

    def ok(self, chk, d):
        """Whether one state passes (``chk`` (size,), ``d`` (n,)): every check value positive (NaN
        is not) and ``d`` finite (``0 d`` sums to exactly 0 only for a finite ``d``)."""
        z = self._zeros
        if z is None or z.shape != d.shape:
            z = self._zeros = np.zeros(d.shape)
        return (not self.size or _min(chk) > 0) and d.dot(z) == 0

    @staticmethod
    def bad(chk, d):
        """States (N,) bool that must go to the NumPy path; ``chk`` (N, size), ``d`` (N, ...):
        a check value that is not positive (NaN included) or a result that is not finite."""
        N = chk.shape[0]
        with np.errstate(invalid="ignore"):
            return ~((chk > 0).all(-1) & np.isfinite(d.reshape(N, -1)).all(-1))


def _lsq_checks(G, k):
    """``L^T D L`` pivots of ``G`` (k) and ``1 - MARGIN RANK_RTOL trace(G) trace(G^-1)``; none for
    ``k = 0`` (the exact rows alone fix ``d``: no normal equations)."""
    if not k:
        return []
    from ..estimation.problem import RANK_RTOL
    from ..algorithms.ltdl import chain_lambda, ltdl_kernel, spd_inverse
    P = ltdl_kernel(chain_lambda(k), G)
    Gi = spd_inverse(G)
    trG, trGi = sum(G[i, i] for i in range(k)), sum(Gi[i, i] for i in range(k))
    return [P[i, i] for i in range(k)] + [1 - trG * trGi * (MARGIN * RANK_RTOL)]


# --- the compiled objects -------------------------------------------------------------------

def _decline(*args, **kwargs):
    """The fast-call ``Kernel``'s fallback for ``solve``: ``None`` sends the call to the checked path."""
    return None


class _CompiledProblem(KernelSet):
    """One kernel ``self._kname`` with inputs ``q, v[, y]`` and outputs ``d[, chi2][, chk]``."""

    def __init__(self, model, name, ny, outputs, fn, checks, compiler, progress, vectorize, owner):
        """``fn(q, v[, y])`` traced into kernel ``name``: inputs ``q, v`` (and ``y`` when ``ny``),
        ``outputs`` ``[(name, shape)]`` followed by the check values ``chk`` when ``checks.size``;
        ``owner``: the cache fingerprint (None: trace every time)."""
        inputs = [("q", (model.nq,)), ("v", (model.nv,))] + ([("y", (ny,))] if ny else [])
        outputs = list(outputs) + ([("chk", (checks.size,))] if checks.size else [])
        spec = Kernel.of_arrays(name, inputs, outputs, fn, checks=("chk",) if checks.size else ())
        self._has_y = ny > 0
        owner = None if compiler is None else owner
        super().__init__(model, compiler, progress, vectorize, owner=False if owner is None else owner)
        self._spec_main = spec
        self._specs[spec.name] = spec
        self._kname = spec.name
        self._checks = checks
        single = self._start()
        self._single = self._fast = None
        if single is not None:
            self._single = self._fast_kernel(single, self._kname, self._call_general)
            self.fastcall = self._single is not None
            if self._single is not None:
                self._fast = self._fast_solver(single)
        if self._single is None:
            self._single = self._call_general

    def _fast_solver(self, single):
        """The one-state path of ``solve``: the C fast-call ``Kernel`` of the kernel with the input
        checks of the NumPy path (every value finite, unit quaternions in ``q``, exact one-state
        shapes, float64), which returns ``None`` (its fallback) for any call those checks or its
        array requirements refuse; ``solve`` then takes the checked path, whose errors name the
        argument.  The quaternion tolerance is a hair tighter than :data:`_checks.QUAT_TOL` so a
        quaternion accepted here is accepted there whatever the rounding of the two sums."""
        from .. import _checks
        fast = _fast_module(self._compiler)
        if fast is None:
            return None
        spec = self._spec_main
        shapes = spec.shapes(self.model)
        joints, idx = _checks._quaternions(self.model)
        quats = ((_checks.QUAT_TOL * (1 - 1e-6), ((0, tuple(int(i) for i in idx[:, 0])),)) if joints else None)
        try:
            return fast.Kernel(single.addr[self._kname], tuple(tuple(shapes[n]) for n in spec.inputs),
                               tuple(tuple(shapes[n]) for n in spec.outputs), _decline, quats)
        except (TypeError, ValueError):                # more arguments or quaternions than it takes
            return None

    def _fast_call(self, q, v, y, none_ok):
        """The kernel's outputs (a tuple) for one clean state, or ``None`` (see :meth:`_fast_solver`);
        ``none_ok``: ``y=None`` stands for no measured values (a structure's ``solve``)."""
        if self._has_y:
            out = self._fast(q, v, y)
        elif (y is None and none_ok) or (type(y) is np.ndarray and y.shape == (0,) and y.dtype == np.float64):
            out = self._fast(q, v)
        else:
            return None
        return out if out is None or isinstance(out, tuple) else (out,)

    def _group_specs(self, group):
        return [self._spec_main]

    def __getattr__(self, name):                       # the wrapped structure's / estimator's attributes
        w = self._wrapped
        if name.startswith("_") or name == w:
            raise AttributeError(name)
        return getattr(getattr(self, w), name)

    def _state(self):
        return f"compiled, {self.lanes} lanes" if self.compiled else "NumPy fallback"

    def _call_general(self, *arrays):
        return self._run("main", self._kname, arrays)

    def _outputs(self, arrays, batch):
        outs = self._single(*arrays) if batch == () else self._run("main", self._kname, arrays)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return dict(zip(self._spec_main.outputs, outs))

    def raw(self, *arrays):
        """The kernel's outputs ``{"d", ["chi2",] ["chk"]}`` for float arrays ``q, v[, y]`` (one
        state or a batch), without validation, checks or re-solves (benchmarks, diagnostics)."""
        arrays = [np.asarray(a, dtype=float) for a in arrays]
        if not self.compiled:
            raise RuntimeError("raw: not compiled (no C compiler); use solve")
        batch = np.broadcast_shapes(*(a.shape[:-1] for a in arrays))
        return self._outputs(arrays, batch)

    def _flagged(self, out, batch, check=True):
        """The states to re-solve: ``None`` (none), ``()`` (the one state of an unbatched call) or a
        tuple of index arrays into the batch."""
        if not check or self._checks.size == 0:
            return None
        N = int(np.prod(batch, dtype=np.int64))
        bad = self._checks.bad(out["chk"].reshape(N, -1), out["d"].reshape(N, -1))
        if not bad.any():
            return None
        return () if batch == () else np.nonzero(bad.reshape(batch))

    def flops(self, which="kernel") -> dict:
        """Operation counts (dict by kind, as :meth:`~sparsedyn.symbolic.ir.Program.flops`) from the IR.

        ``which``: ``"kernel"`` (everything the compiled kernel computes), ``"result"`` (only what
        its results depend on: the solve without the run-time check quantities) or ``"checks"``
        (the difference).  Traced on demand on the NumPy fallback."""
        if which not in ("kernel", "result", "checks"):
            raise ValueError(f"which: expected 'kernel', 'result' or 'checks', got {which!r}")
        if self._kname not in self.kernels:
            self.kernels[self._kname] = KernelInfo.of(self._kname, trace(self.model, self._spec_main))
        info = self.kernels[self._kname]
        res = info.result_flops or info.flops
        if which == "kernel":
            return dict(info.flops)
        if which == "result":
            return dict(res)
        return {k: info.flops[k] - res.get(k, 0) for k in info.flops}


class CompiledStructure(_CompiledProblem):
    """A compiled :class:`~sparsedyn.sparse.Structure` (see :func:`sparsedyn.compile`).

    ``solve(q, v, y=None, gravity=None, check="auto", info=False)`` has the
    signature and results of :meth:`Structure.solve <sparsedyn.sparse.Structure.solve>`
    (one state or batch axes, which broadcast; several right-hand sides per
    configuration as there).  Inputs are validated as there.  The compiled kernel
    serves ``check="auto"`` and ``"none"`` with the model's gravity; states that its
    check quantities flag are re-solved by ``Structure.solve`` (warnings and
    errors as there, counting the re-solved states); ``gravity=``, ``check="all"``
    and ``info=True`` go to ``Structure.solve`` directly, as everything does
    without a C compiler.  ``flops()``: see :meth:`_CompiledProblem.flops`.
    Other attributes are the structure's (``unpack``, ``n``, ``problem`` ...).
    """

    _wrapped = "structure"

    def __reduce__(self):
        # Rebuilt in another process from the structure (its library loads from the build cache there).
        return _rebuild, (self.structure, self.vectorize, self.threads)

    def __init__(self, structure, compiler, progress=None, vectorize=None):
        st = self.structure = structure
        model = st.model
        checks = _CheckLayout(st)

        def fn(q, v, y=None):
            y = np.zeros((0,), dtype=object) if y is None else y
            x, chk, _ = _traced_solve(st, q, v, y, ())
            return (x, np.array(chk, dtype=object)) if checks.size else (x,)

        super().__init__(model, "sparse_solve", st.problem.ny, [("d", (st.n,))], fn, checks, compiler, progress,
                         vectorize, structure_fingerprint(st) if compiler is not None else None)

    def __repr__(self):
        state = self._state()
        return f"CompiledStructure({self.structure.problem.name!r}, model={self.model.name!r}, n={self.structure.n}, " \
               f"{state})"

    def solve(self, q, v, y=None, gravity=None, check="auto", info=False):
        """``d`` (..., n): see :class:`CompiledStructure` and :meth:`sparsedyn.sparse.Structure.solve`."""
        st = self.structure
        if self._fast is not None and gravity is None and not info and check in ("auto", "none"):
            out = self._fast_call(q, v, y, True)
            if out is not None:                         # one checked state through the C fast path
                if check == "auto" and not self._checks.ok(out[-1], out[0]):
                    return st.solve(q, v, y, check=check)
                return out[0]
        if not self.compiled or gravity is not None or info or check not in ("auto", "none"):
            return st.solve(q, v, y, gravity, check=check, info=info)
        q, v, y, _, batch, symbolic = st._inputs(q, v, y, None)
        if symbolic:
            return st.solve(q, v, y, None, check=check)
        full = [np.broadcast_to(a, batch + a.shape[-1:]) for a in (q, v, y)]
        out = self._outputs(full if self._has_y else full[:2], batch)
        d = out["d"]
        bad = self._flagged(out, batch, check == "auto")
        if bad == ():
            return st.solve(*full, check=check)
        if bad is not None:
            d = np.array(d)
            d[bad] = st.solve(*(a[bad] for a in full), check=check)
        return d


class CompiledEstimator(_CompiledProblem):
    """A compiled :class:`~sparsedyn.estimation.Estimator` (see :func:`sparsedyn.compile`).

    ``solve(q, v, y, covariance=False, gravity=None)`` has the signature and
    results of :meth:`Estimator.solve <sparsedyn.estimation.Estimator.solve>` (an
    :class:`~sparsedyn.estimation.Estimate`; one state or batch axes).  Inputs
    are validated as there.  The compiled kernel computes ``d`` (and, least
    squares, ``chi2``) with the model's gravity; states its check quantities flag
    are re-solved by ``Estimator.solve`` (dense fallback, warnings and
    :class:`~sparsedyn.estimation.StateSingularError` as there, with the original
    batch index); ``covariance=True`` and ``gravity=`` go to ``Estimator.solve``
    directly, as everything does without a C compiler.  ``flops()``: see
    :meth:`_CompiledProblem.flops`.  Other attributes are the estimator's
    (``problem``, ``verdict``, ``report`` ...).
    """

    _wrapped = "estimator"

    def __reduce__(self):
        # Rebuilt in another process from the estimator (its library loads from the build cache there).
        return _rebuild, (self.estimator, self.vectorize, self.threads)

    def __init__(self, estimator, compiler, progress=None, vectorize=None):
        est = self.estimator = estimator
        model, p = est.model, estimator.problem
        if not est.square and est._basis is None:
            est._build_basis()
        if est.square:
            checks = _CheckLayout(est.structure)

            def fn(q, v, y=None):
                y = np.zeros((0,), dtype=object) if y is None else y
                x, chk, _ = _traced_solve(est.structure, q, v, p.sparse_values(y), ())
                return (x, np.array(chk, dtype=object)) if checks.size else (x,)
            outputs = [("d", (est.n,))]
        else:
            k = est.k
            checks = _CheckLayout(est._basis, k + 1, k)

            def fn(q, v, y=None):
                y = np.zeros((0,), dtype=object) if y is None else y
                x, chk, factors = _traced_solve(est._basis, q[None, :], v[None, :], est._lsq_values(y), (k + 1,))
                D = np.moveaxis(x, 0, -1)                                   # (k + 1, n)
                d0, Nt, Jt, G, rhs, res0 = est._lsq_core(D, q, v, y)
                d, chi2 = est._lsq_finish(d0, Nt, Jt, G, rhs, res0, est._lsq_refiner(*factors))
                chk = np.array(chk + _lsq_checks(G, k), dtype=object)
                return (d, np.array([chi2], dtype=object)) + ((chk,) if checks.size else ())
            outputs = [("d", (est.n,)), ("chi2", (1,))]
        super().__init__(model, "estimate", p.ny, outputs, fn, checks, compiler, progress, vectorize,
                         estimator_fingerprint(est) if compiler is not None else None)
        from ..estimation.problem import Estimate
        self._Estimate, self._square, self._dof = Estimate, est.square, 0 if est.square else est.s - est.k

    def __repr__(self):
        state = self._state()
        return f"CompiledEstimator({self.estimator.problem.name!r}, {self.estimator.verdict.kind}, {state})"

    def solve(self, q, v, y, covariance=False, gravity=None):
        """An :class:`~sparsedyn.estimation.Estimate`: see :class:`CompiledEstimator`."""
        if self._fast is not None and not covariance and gravity is None:
            out = self._fast_call(q, v, y, False)
            if out is not None:                         # one checked state through the C fast path
                if not self._checks.ok(out[-1], out[0]):   # flagged: the NumPy path decides, warns or raises
                    return self.estimator.solve(q, v, y)
                return self._Estimate(self.estimator.problem, out[0], None,
                                      np.zeros(()) if self._square else out[1][0], self._dof)
        from ..estimation.problem import Estimate, StateSingularError
        est = self.estimator
        if not self.compiled or covariance or gravity is not None:
            return est.solve(q, v, y, covariance=covariance, gravity=gravity)
        q, v, y, batch = est._inputs(q, v, y)
        if 0 in batch:                                  # an empty batch: NumPy's empty Estimate
            return est.solve(q, v, y)
        arrays = [q, v, y] if self._has_y else [q, v]
        out = self._outputs(arrays, batch)
        d = out["d"]
        chi2 = np.zeros(batch) if est.square else out["chi2"][..., 0]
        bad = self._flagged(out, batch)
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
            d, chi2 = np.array(d), np.array(chi2)
            d[bad], chi2[bad] = sub.d, sub.chi2
        if est.square:
            return Estimate(est.problem, d, chi2=chi2, dof=0)
        return Estimate(est.problem, d, None, chi2, est.s - est.k)
