"""``sparsedyn.compile(model)``: the compiled kernels of a fixed model (and of fixed problems).

Offline step (once per model, cached on disk): every kernel is traced into a
straight-line program (:mod:`sparsedyn.codegen.trace`, :mod:`sparsedyn.symbolic.ir`), emitted as C (:mod:`.cemit`)
and built into shared libraries (:mod:`.build`): a *single* library (scalar
code, one state per call) at :func:`compile` time and a *batch* library (code
vectorised across states) at the first batch call or with ``vectorize=True``.
Online step: the returned :class:`CompiledModel`'s methods only move arrays in
and out of native code; one state goes through a small C extension
(:mod:`.fastcall`) without a Python frame in between.

Cache levels
    ``m_<model key>.json`` maps a *model fingerprint* (structure and every
    constant of the model, the sources of the traced modules and of this
    subpackage, the compiler identity and flags, the kernel list, the variant)
    to the *library key* and the flop counts, so a model compiled before is
    loaded without tracing (a few ms).  The library itself,
    ``sd_<library key>.so``, is keyed by the names and the IR content hashes of its
    kernels, the compiler identity and flags, the variant and the sparsedyn
    version.

Without a working C compiler everything still works: the methods call the
NumPy functions, and :func:`compile` warns once per process
(:class:`~sparsedyn.codegen.build.CompilerNotFoundWarning`).

Sparse problems and estimators (``compile(problem | structure | estimation
problem | estimator)``, :mod:`.problems`) go through the same machinery: their
kernels are :class:`~sparsedyn.kernels.Kernel` objects of state arrays
(:meth:`~sparsedyn.kernels.Kernel.of_arrays`), the
shared base :class:`KernelSet` builds, caches and runs them, and the model key
of the manifest is extended by a fingerprint of the problem's structure.
"""

from __future__ import annotations

import ctypes
import hashlib
import inspect
import json
import os
import sys
import re
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import REGISTRY, Kernel
from ..symbolic.trace import UntraceableError, trace_function
from . import build
from .build import CompilerNotFoundWarning
from .cemit import emit_program, emit_unit
from .trace import DEFAULT_KERNELS, as_kernel, trace, variant

__all__ = ["compile", "CompiledModel", "KernelSet", "KernelInfo", "UntraceableError", "compile_report"]

#: Version of the code generator; part of every cache key.
GENERATOR_VERSION = "3"

_warned_no_compiler = set()
_source_hash = None


#: Modules whose code the traced kernels run (plus this subpackage): their sources are part of
#: every model key, so an edited kernel is re-traced even in an editable install.
TRACED_MODULES = ("backend.py", "_checks.py", "spatial.py", "joints.py", "model.py", "algorithms/*.py",
                  "symbolic/*.py")


def _package_source_hash() -> str:
    """SHA-256 of the sources of :data:`TRACED_MODULES` and of ``sparsedyn.codegen``."""
    global _source_hash
    if _source_hash is None:
        root = Path(__file__).resolve().parents[1]
        files = [p for m in TRACED_MODULES for p in sorted(root.glob(m))]
        files += sorted(Path(__file__).resolve().parent.glob("*.py"))
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
        _source_hash = h.hexdigest()
    return _source_hash


_UNKEYED = frozenset(("lower", "upper", "velocity_limit", "effort_limit", "sensors", "joint_dynamics"))


def _feed(h, x):
    """Feed a canonical, process-independent encoding of ``x`` (model data) to hash ``h``."""
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            for e in x.reshape(-1):
                _feed(h, e)
            return
        h.update(repr((x.dtype.str, x.shape)).encode())
        h.update(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, float):
        h.update(float(x).hex().encode())
    elif isinstance(x, (str, int, bool, type(None), np.integer)):
        h.update(repr(x).encode() + b"|")
    elif isinstance(x, (tuple, list)):
        h.update(b"(%d" % len(x))
        for e in x:
            _feed(h, e)
        h.update(b")")
    elif isinstance(x, dict):
        _feed(h, sorted(x.items(), key=lambda kv: repr(kv[0])))
    elif hasattr(x, "__dataclass_fields__"):
        h.update(type(x).__name__.encode())
        for f in x.__dataclass_fields__:
            _feed(h, getattr(x, f))
    elif hasattr(x, "__dict__") or hasattr(x, "__slots__"):
        h.update(type(x).__name__.encode())
        names = sorted(vars(x)) if hasattr(x, "__dict__") else list(x.__slots__)
        for f in names:
            _feed(h, getattr(x, f, None))
    else:
        h.update(repr(x).encode())


def model_fingerprint(model) -> str:
    """SHA-256 over everything of ``model`` a kernel can depend on: every field (structure, joints,
    transforms, inertias, gravity, frames, mimic and fixed joints, names: a frame or body may be
    looked up by name), except limits and sensors, which no kernel reads."""
    h = hashlib.sha256()
    for f in type(model).__dataclass_fields__:
        if f not in _UNKEYED:
            h.update(f.encode())
            _feed(h, getattr(model, f))
    return h.hexdigest()


class KernelInfo:
    """What is known about one compiled kernel: ``flops`` (dict by kind, see
    :meth:`~sparsedyn.symbolic.ir.Program.flops`), ``nodes`` (live IR nodes),
    ``trace_seconds``; ``result_flops``: the flops of the outputs that are not
    run-time checks (``None`` for kernels without checks)."""

    def __init__(self, name, flops, nodes, trace_seconds, result_flops=None):
        self.name, self.flops, self.nodes, self.trace_seconds = name, dict(flops), int(nodes), float(trace_seconds)
        self.result_flops = None if result_flops is None else dict(result_flops)

    @classmethod
    def of(cls, name, prog):
        return cls(name, prog.flops(), len(prog.nodes), prog.trace_seconds, getattr(prog, "result_flops", None))

    def __repr__(self):
        return f"KernelInfo({self.name!r}, total flops={self.flops.get('total')}, nodes={self.nodes})"


def _progress_fn(progress, model):
    if callable(progress):
        return progress
    if progress is None:
        progress = getattr(model, "nv", 0) >= 20 and getattr(sys.stderr, "isatty", lambda: False)()
    if not progress:
        return None
    t0 = time.perf_counter()

    def show(msg):
        print(f"sparsedyn.compile [{time.perf_counter() - t0:6.2f} s] {msg}", file=sys.stderr, flush=True)
    return show


def _fast_module(compiler):
    if os.environ.get("SPARSEDYN_NO_FASTCALL"):
        return None
    from .fastcall import load_fastcall
    return load_fastcall(compiler)


class _Library:
    """A loaded library of some kernels in one variant (ctypes functions, addresses)."""

    def __init__(self, lib, specs, variant):
        self.lib, self.variant = lib, variant
        self.single, self.loop, self.batch, self.addr = {}, {}, {}, {}
        for spec in map(as_kernel, specs):
            name = spec.name
            n = len(spec.inputs) + len(spec.outputs)
            if variant == "single":
                f = getattr(lib, f"sd_{name}")
                f.restype, f.argtypes = None, [ctypes.c_void_p] * n
                fl = getattr(lib, f"sd_{name}_loop")
                fl.restype, fl.argtypes = None, [ctypes.c_long] + [ctypes.c_void_p] * n + [ctypes.c_int]
                self.single[name], self.loop[name] = f, fl
                self.addr[name] = ctypes.cast(f, ctypes.c_void_p).value
            else:
                fb = getattr(lib, f"sd_{name}_batch")
                fb.restype, fb.argtypes = ctypes.c_int, [ctypes.c_long] + [ctypes.c_void_p] * n + [ctypes.c_int] * 2
                self.batch[name] = fb
        lanes = getattr(lib, "sd_lanes")
        lanes.restype = ctypes.c_int
        self.lanes = int(lanes())


def _build_kernels(model, names, compiler, progress, variant="single", directory=None, owner=None, programs=None):
    """Trace, emit, build (or load from the cache) the kernels ``names`` (names of
    :data:`~sparsedyn.codegen.trace.KERNELS` or :class:`~sparsedyn.kernels.Kernel`
    objects) in ``variant`` (``"single"``: scalar code; ``"batch"``: code vectorised across states).

    ``owner``: ``None`` for the model's own kernels; for kernels of something built on the
    model (a sparse problem, an estimator), a fingerprint string of everything they depend
    on beyond the model, which joins the manifest key, or ``False`` when nothing identifies
    them safely (then no manifest: they are traced every time and the library, keyed by the
    IR, is still reused).  ``programs``: a dict ``{name: Program}`` of traces to reuse (and to
    fill), so that the second variant of a kernel set is not traced again.

    Returns ``(_Library, {name: KernelInfo}, seconds spent, whether the compiler ran)``.
    """
    from .._version import __version__
    specs = [as_kernel(n) for n in names]
    names = [s.name for s in specs]
    d = build.cache_dir() if directory is None else directory
    manifest = None
    if owner is not False:
        mkey = hashlib.sha256("\n".join([
            "model", variant, model_fingerprint(model), _package_source_hash(), __version__, GENERATOR_VERSION,
            compiler.ident, " ".join(compiler.flags), ",".join(names)]
            + ([] if owner is None else ["owner", owner])).encode()).hexdigest()[:40]
        manifest = d / f"m_{mkey}.json"
    t0 = time.perf_counter()
    try:
        info = json.loads(manifest.read_text()) if manifest is not None else None
        lib = build.lookup(info["library"], d) if info is not None else None
        if lib is not None and sorted(info["kernels"]) == sorted(names):
            kinfo = {n: KernelInfo(n, k["flops"], k["nodes"], k["trace_seconds"], k.get("result_flops"))
                     for n, k in info["kernels"].items()}
            return _Library(lib, specs, variant), kinfo, time.perf_counter() - t0, False
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    progs, kinfo = {}, {}
    for k, spec in enumerate(specs):
        name = spec.name
        p = None if programs is None else programs.get(name)
        if p is None:
            if progress:
                progress(f"tracing {name} ({k + 1}/{len(names)}; {model.nbodies} bodies, nv={model.nv})")
            p = trace(model, spec)
            if programs is not None:
                programs[name] = p
        progs[name] = p
        kinfo[name] = KernelInfo.of(name, p)
    checks = {s.name: _input_checks(model, s) for s in specs} if variant == "batch" else {}
    lkey = hashlib.sha256("\n".join(
        ["library", variant, __version__, GENERATOR_VERSION, compiler.ident, " ".join(compiler.flags)]
        + [n + " " + progs[n].digest() + repr(checks.get(n)) for n in names]).encode()).hexdigest()[:40]
    units = []
    for name in names:
        units += emit_program(progs[name], name, variant, checks=checks.get(name))
    sources = [emit_unit([u]) for u in units] + [emit_unit([], key=lkey)]
    if progress:
        progress(f"compiling {len(sources)} C translation units ({variant}, "
                 f"{sum(len(p.nodes) for p in progs.values())} IR nodes) with {' '.join(compiler.argv)}")
    lib, built = build.build_library(lkey, sources, compiler, progress, d)
    seconds = time.perf_counter() - t0
    if manifest is not None:
        data = {"library": lkey, "kernels": {n: {"flops": i.flops, "nodes": i.nodes, "trace_seconds": i.trace_seconds,
                                                 "result_flops": i.result_flops} for n, i in kinfo.items()}}
        fd, tmp = tempfile.mkstemp(prefix="m_", suffix=".tmp", dir=d)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, manifest)
    if progress:
        progress(f"{variant} kernels ready in {seconds:.2f} s ({'built' if built else 'library from the cache'})")
    return _Library(lib, specs, variant), kinfo, seconds, built


def _out_arrays(out, names, wants):
    """The output arrays: new ones (``out=None``) or the checked arrays of ``out`` (one array, or a
    tuple of one per output, each writeable, C-contiguous, float64, of exactly the result's shape)."""
    if out is None:
        return [np.empty(w) for w in wants]
    outs = list(out) if isinstance(out, tuple) else [out]
    if len(outs) != len(names):
        raise ValueError(f"out: expected {len(names)} array(s) ({', '.join(names)}), got {len(outs)}")
    for o, n, want in zip(outs, names, wants):
        if not (isinstance(o, np.ndarray) and o.dtype == np.float64 and o.flags.c_contiguous
                and o.flags.writeable and o.shape == tuple(want)):
            got = f"{type(o).__name__} {getattr(o, 'dtype', '')} {getattr(o, 'shape', '')}".strip()
            raise ValueError(f"out: expected a writeable C-contiguous float64 array of shape {tuple(want)} "
                             f"for {n!r}, got {got}")
    if any(np.may_share_memory(a, b) for k, a in enumerate(outs) for b in outs[:k]):
        raise ValueError(f"out: the arrays for {', '.join(names)} overlap; give each result its own array")
    return outs


class KernelSet:
    """The machinery every compiled object shares: libraries of some kernels of one model
    (built or loaded per *group* and *variant* on first use), the thread policy, and
    :meth:`_run`, which checks shapes, broadcasts batch axes and calls the single-state,
    looped or vectorised entry point.

    Subclasses say which kernel specs a group holds (:meth:`_group_specs`) and, for
    kernels of something built on the model, the ``owner`` fingerprint of the manifest
    key (see :func:`_build_kernels`).
    """

    def __init__(self, model, compiler, progress=None, vectorize=None, owner=None):
        self.model = model
        self._compiler = compiler
        self._progress = progress
        self._owner = owner
        self._libs = {}
        self._specs = {}
        self._programs = None          # traces shared by the two variants while _start builds both
        self._lock = threading.RLock()
        self._building = {}
        self.threads = os.cpu_count() or 1
        self.kernels = {}
        self.compiled = compiler is not None
        self.build_seconds, self.built = {}, {}
        self.vectorize = vectorize
        self.lanes = 1
        self.fastcall = False

    def _group_specs(self, group) -> list:           # pragma: no cover - abstract
        raise NotImplementedError

    def _owner_of(self, group):
        return self._owner

    def _spec(self, kname) -> Kernel:
        spec = self._specs.get(kname)
        return spec if spec is not None else as_kernel(kname)

    def _library(self, group, variant):
        lib = self._libs.get((group, variant))
        if lib is not None:
            return lib
        with self._lock:
            lock = self._building.setdefault((group, variant), threading.Lock())
        with lock:                      # one build per library; other libraries build meanwhile
            lib = self._libs.get((group, variant))
            if lib is None:
                specs = [as_kernel(s) for s in self._group_specs(group)]
                with self._lock:
                    self._specs.update({s.name: s for s in specs})
                lib, info, seconds, built = _build_kernels(self.model, specs, self._compiler, self._progress, variant,
                                                           owner=self._owner_of(group), programs=self._programs)
                tag = variant if group == "main" else f"{group}-{variant}"
                with self._lock:
                    self.kernels.update(info)
                    self.build_seconds[tag], self.built[tag] = seconds, built
                    self._libs[(group, variant)] = lib
            return lib

    def _build_all(self, jobs, also=None):
        """Build (or load) the libraries ``jobs`` (``(group, variant)`` pairs) at once: their
        translation units share the machine's cores (see :func:`~.build.build_library`).
        ``also``: a callable run alongside; returns its result."""
        from concurrent.futures import ThreadPoolExecutor
        tasks = [(self._library, job) for job in jobs] + [(also, ())] if also is not None else \
            [(self._library, job) for job in jobs]
        if len(tasks) < 2:
            results = [f(*a) for f, a in tasks]
        else:
            with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
                results = [f.result() for f in [pool.submit(f, *a) for f, a in tasks]]
        return results[-1] if also is not None else None

    def _start(self):
        """Build (or load) the single library now; returns it (``None`` on the fallback)."""
        if not self.compiled:
            return None
        self._programs = {} if self.vectorize else None
        try:
            single = self._library("main", "single")
            self.lanes = single.lanes
            if self.vectorize:
                self._library("main", "batch")
        finally:
            self._programs = None
        return single

    def _fast_kernel(self, single, kname, fallback):
        """A C fast-path callable for one state of ``kname`` (or ``None`` without the extension)."""
        fast = _fast_module(self._compiler) if self.compiled else None
        if fast is None:
            return None
        spec = self._spec(kname)
        shapes = spec.shapes(self.model)
        return fast.Kernel(single.addr[kname], tuple(tuple(shapes[n]) for n in spec.inputs),
                           tuple(tuple(shapes[n]) for n in spec.outputs), fallback)

    def prepare_batch(self):
        """Build (or load) the vectorised batch library now instead of at the first batch call."""
        if self.compiled:
            self._library("main", "batch")
        return self

    def _threads_for(self, kname, N):
        """Threads for a batch of ``N`` states: at most ``self.threads``, and only as many as get about
        5 ms of work each (estimated from the IR's flop count at 10 GFLOP/s): a fork-join over a short
        batch costs more than it saves, and on a loaded machine a thread that is not scheduled stalls the
        whole call for a time slice."""
        info = self.kernels.get(kname)
        flops = info.flops["total"] if info else 10000
        return max(1, min(int(self.threads), int(N * flops / 1e10 / 0.005)))

    def _run(self, group, kname, arrays, out=None, recheck=None):
        """Run kernel ``kname`` of library ``group`` on ``arrays`` (one per input, batch axes
        broadcast).  ``recheck``: for arrays whose shapes are checked but whose values are not
        yet, a callable that checks them (raising the library's errors): called before a single
        state or a loop, while the vectorised batch checks the values itself as it reads them and
        calls it only when one fails."""
        spec = self._spec(kname)
        shapes = spec.shapes(self.model)
        core = [shapes[n] for n in spec.inputs]
        xs = []
        for n, x, c in zip(spec.inputs, arrays, core):
            try:
                x = np.asarray(x, dtype=float)
            except (TypeError, ValueError):
                raise TypeError(f"{n}: expected a numeric array of shape (..., {', '.join(map(str, c))})") from None
            if x.ndim < len(c) or x.shape[x.ndim - len(c):] != tuple(c):
                raise ValueError(f"{n}: expected shape (..., {', '.join(map(str, c))}) for model "
                                 f"{self.model.name!r}, got shape {x.shape}")
            xs.append(x)
        try:
            batch = np.broadcast_shapes(*(x.shape[:x.ndim - len(c)] for x, c in zip(xs, core)))
        except ValueError:
            desc = ", ".join(f"{n}: {x.shape}" for n, x in zip(spec.inputs, xs))
            raise ValueError(f"batch shapes do not broadcast ({desc})") from None
        N = int(np.prod(batch, dtype=np.int64))
        xs = [x if x.shape == batch + tuple(c) and x.flags.c_contiguous
              else np.ascontiguousarray(np.broadcast_to(x, batch + tuple(c))) for x, c in zip(xs, core)]
        outs = _out_arrays(out, spec.outputs, [batch + tuple(shapes[n]) for n in spec.outputs])
        if out is not None:             # an input that is also written (out=q): the kernel reads a copy
            xs = [x.copy() if any(np.may_share_memory(x, o) for o in outs) else x for x in xs]
        ptrs = [x.ctypes.data for x in xs] + [o.ctypes.data for o in outs]
        single = self._library(group, "single")
        threads = self._threads_for(kname, N)
        vectorized = N > 1 and self.vectorize is not False and N >= 2 * self.lanes
        if recheck is not None and not vectorized:
            recheck()
        if N == 1:
            single.single[kname](*ptrs)
        elif N > 1 and not vectorized:
            single.loop[kname](N, *ptrs, threads)
        elif N > 1:
            fb = self._library(group, "batch").batch[kname]
            status = fb(N, *ptrs, threads, recheck is not None)
            if status == 2:                      # a value failed the kernel's checks: say which
                recheck()
                status = fb(N, *ptrs, threads, 0)
            if not status:
                raise MemoryError(f"{kname}: the batched kernel could not allocate its work space")
        return outs[0] if len(outs) == 1 else tuple(outs)


_VOCABULARY = {"q": "nq", "q0": "nq", "q1": "nq", "v": "nv", "a": "nv", "tau": "nv", "dq": "nv", "qdd": "nv",
               "f_ext": ("nb", 6), "gravity": (3,)}


def _is_configuration(name, shape, model):
    return name.startswith("q") and tuple(shape) == (model.nq,)


def _input_checks(model, spec):
    """``(tol, ((input index, quaternion offsets), ...))``: the unit quaternions of the configuration
    inputs of ``spec`` that a kernel checks (see :func:`~.cemit.emit_program`)."""
    shapes = spec.shapes(model)
    quats = _quaternion_offsets(model)
    groups = tuple((k, quats) for k, n in enumerate(spec.inputs)
                   if quats and _is_configuration(n, shapes[n], model))
    return _checks.QUAT_TOL, groups


def _quaternion_offsets(model):
    return tuple(int(model.q_slice(i).stop) - 4 for i, j in enumerate(model.joints) if j.type in ("spherical", "free"))


class _Method:
    """How one function runs on a compiled model: its declaration (inputs, optional arrays, static
    arguments, outputs), the NumPy function (reference and fallback), and the fast single-state
    callables already built, by static arguments."""

    def __init__(self, name, fn, inputs, optional, static, outputs, user=False):
        self.name, self.fn = name, fn
        self.inputs, self.optional, self.static, self.outputs = tuple(inputs), tuple(optional), tuple(static), \
            tuple(outputs)
        self.user = user
        self.fast = {}
        self.ns = None          # namespace of the generated method (its ``_f0``: the fast callable)


class CompiledModel(KernelSet):
    """A model whose public numeric functions run as native code; see :func:`compile`.

    A compiled model is accepted wherever a :class:`~sparsedyn.Model` is:
    ``sparsedyn.rnea(k, q, v, a)`` runs the compiled RNEA, and so does
    ``k.rnea(q, v, a)``.  Every function of the kernel registry
    (:data:`sparsedyn.kernels.REGISTRY`: ``rnea``, ``aba``, ``crba``, ``minv``,
    ``nonlinear_effects``, ``generalized_gravity``, ``forward_kinematics``,
    ``frame_placement(s)``, ``frame_jacobian``, ``frame_velocity``,
    ``body_velocities``, ``integrate``, ``difference``, ``fd_crb``, and every
    function registered later) is a method with the NumPy function's name,
    signature (without ``model``), docstring and results, plus a keyword
    ``out=``: a preallocated C-contiguous float64 array of the result's shape
    (a tuple of arrays for several results), filled and returned.  Other
    functions and attributes of the model (``nq``, ``HandC``...) work as on the
    model itself, at NumPy speed.

    Each function is traced and built on its first call, and the build is
    cached on disk (later processes load it in milliseconds).  Static
    arguments (a frame, a reference) select a variant built on first use;
    optional arrays (``f_ext``, ``gravity``) select a variant that takes them
    as inputs (left out, they are folded: no external force, ``model.gravity``).

    One state runs the scalar program through a small C extension (or
    ``ctypes``); a batch of ``N`` states runs the program vectorised across
    states (``lanes`` per vector instruction, ``threads`` OpenMP threads),
    built on the first batch call unless :func:`compile` was given
    ``vectorize=True``.  Arguments are checked as the NumPy functions check
    them (shapes, NaN/inf, unit quaternions, float64 conversion), with the
    same errors; a model with a massless subtree gives ``inf``/``nan`` in
    ``aba``/``minv`` instead of :class:`~sparsedyn.SingularInertiaError`.

    Attributes: ``model``, ``compiled`` (False on the NumPy fallback),
    ``kernels`` (``{C name: KernelInfo}`` of the kernels built so far),
    ``build_seconds`` and ``built`` (by kernel and variant), ``lanes``,
    ``threads``, ``fastcall``.
    """

    def __init__(self, model, compiler, progress=None, vectorize=None, kernels=()):
        super().__init__(model, compiler, progress, vectorize)
        self._programs = {}
        self._variants = {}
        self._methods = {}
        self._options = (vectorize, tuple(kernels))
        self.lanes = 0
        self.fastcall = False
        # A model without moving bodies has nothing to compile: its (empty) results come from NumPy.
        self._native = self.compiled and model.nbodies > 0 and model.nv > 0
        names, users = [], []
        for k in kernels:
            if isinstance(k, str):
                names.append(k)
            elif callable(k):
                users.append(k)
            else:
                raise TypeError(f"kernels: expected names of registered functions or callables, got {k!r}")
        jobs = []
        for n in names:
            base = n[:-4] if n.endswith("_ext") and n[:-4] in REGISTRY else n
            if base not in REGISTRY:
                raise ValueError(f"kernels: unknown function {n!r}; registered: {', '.join(REGISTRY)}")
            if REGISTRY[base].static:
                continue                        # built per static argument on first use
            if self._native:
                opt = tuple(REGISTRY[base].optional) if base != n else ()
                spec = self._variant(base, {}, opt)
                jobs += [(spec.name, "single")] + ([(spec.name, "batch")] if vectorize else [])
        # The fast-call extension (built once per machine) builds alongside the kernels.
        fast = self._build_all(jobs, (lambda: _fast_module(compiler)) if self.compiled else None)
        self.fastcall = fast is not None
        if jobs:
            self.lanes = self._libs[jobs[0]].lanes
        for fn in users:
            self.add_kernel(fn)

    def _owner_of(self, group):
        # A user kernel is identified by its IR alone (its source may change under the same name).
        return False if group.startswith("u_") else None

    # --- the model's other attributes, and the duck-typed dispatch of sparsedyn.f(k, ...) -----
    def __getattr__(self, name):
        if name.startswith("__") or "model" not in self.__dict__:
            raise AttributeError(name)
        if name in REGISTRY:
            m = self._make_method(name)
            self.__dict__[name] = m
            return m
        return getattr(self.__dict__["model"], name)

    def __sparsedyn_kernel__(self, name, args, kwargs):
        f = self.__dict__.get(name)
        return (f if f is not None else getattr(self, name))(*args, **kwargs)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(REGISTRY))

    def __repr__(self):
        state = "compiled" if self.compiled else "NumPy fallback"
        built = sorted({n for n, _ in self._libs})
        return f"CompiledModel({self.model.name!r}, nv={self.model.nv}, {state}, built={built})"

    def __reduce__(self):
        # Rebuilt in another process from the model (loaded from the build cache on first use there).
        vectorize, kernels = self._options
        return _rebuild, (self.model, vectorize, kernels, self.threads)

    # --- kernel variants ------------------------------------------------------------------
    def _group_specs(self, group):
        return [self._specs[group]]

    def _variant(self, name, static, optional):
        key = (name, repr(sorted(static.items())), optional)
        spec = self._variants.get(key)
        if spec is None:
            spec = variant(name, static, optional)
            self._variants[key] = spec
            self._specs[spec.name] = spec
        return spec

    def _build(self, spec):
        lib = self._library(spec.name, "single")
        if not self.lanes:
            self.lanes = lib.lanes
        return lib

    def flops(self, name, **static) -> dict:
        """Flop counts of function ``name`` (``static``: its static arguments) from its IR."""
        m = self._method_of(name)
        spec = self._user_specs[name] if m.user else self._variant(name, static, ())
        if spec.name not in self.kernels:
            self.kernels[spec.name] = KernelInfo.of(spec.name, self._program(spec))
        return self.kernels[spec.name].flops

    def _program(self, spec):
        p = self._programs.get(spec.name)
        if p is None:
            p = self._programs[spec.name] = trace(self.model, spec)
        return p

    # --- the methods ------------------------------------------------------------------------
    def _method_of(self, name):
        m = self._methods.get(name)
        if m is None:
            k = REGISTRY[name]
            m = self._methods[name] = _Method(name, k.fn, k.inputs, k.optional, k.static, k.outputs)
        return m

    def _make_method(self, name):
        return _generate(self, self._method_of(name), self._methods[name].fn)

    def _call(self, name, inputs, optional, static, extra, out):
        """The general path: checks, then the compiled kernel (any batch) or the NumPy function."""
        m = self._methods[name]
        model = self.model
        given = tuple(n for n in m.optional if optional.get(n) is not None)
        plain = all(v is d for v, d in extra.values())
        if not (self._native and plain):
            kw = {**inputs, **{n: optional[n] for n in given}, **static, **{n: v for n, (v, _) in extra.items()}}
            if model.nbodies == 0 and not m.user:
                empty = self._empty(m, inputs, optional, given, static, out)
                if empty is not None:
                    return empty
            res = m.fn(model, **kw)
            if out is None:
                return res
            many = isinstance(res, tuple)
            outs = _out_arrays(out, m.outputs, [r.shape for r in (res if many else (res,))])
            for o, r in zip(outs, res if many else (res,)):
                o[...] = r
            return tuple(outs) if many else outs[0]
        spec = self._user_specs[name] if m.user else self._variant(name, static, given)
        shapes = spec.shapes(model)
        named = list(inputs.items()) + [(n, optional[n]) for n in given]
        # Conversions and shapes now; the values (finite, unit quaternions) are checked by the
        # vectorised batch kernel as it reads them, or by ``recheck`` before the other paths.
        arrays = [_checked(model, n, x, shapes[n], False) for n, x in named]

        def recheck():
            for (n, _), x in zip(named, arrays):
                _checked(model, n, x, shapes[n])
        res = self._run(spec.name, spec.name, arrays, out, recheck)
        if not given and out is None:
            self._install_fast(m, spec, static)
        return res

    def _empty(self, m, inputs, optional, given, static, out):
        """The results of a model without moving bodies when all are empty (checked inputs, batch
        shape kept); ``None`` when some result is not empty (a frame on the world)."""
        k = REGISTRY[m.name]
        shapes = k.shapes(self.model, **static)
        if any(int(np.prod(shapes[n])) for n in m.outputs):
            return None
        xs = {n: _checked(self.model, n, x, shapes[n]) for n, x in inputs.items()}
        xs.update({n: _checked(self.model, n, optional[n], shapes[n]) for n in given})
        batch = _checks.batch_shape(**{n: (x, len(shapes[n])) for n, x in xs.items()})
        outs = _out_arrays(out, m.outputs, [batch + tuple(shapes[n]) for n in m.outputs])
        return tuple(outs) if len(outs) > 1 else outs[0]

    def _install_fast(self, m, spec, static):
        key = tuple(static[n] for n in m.static) if m.static else ()
        try:
            if key in m.fast:
                return
        except TypeError:                            # an unhashable static argument: no fast path
            return
        single = self._build(spec)
        fast = _fast_module(self._compiler) if self.fastcall else None
        if fast is None:
            m.fast[key] = None
            return
        shapes = spec.shapes(self.model)
        groups = _input_checks(self.model, spec)[1]
        names = spec.inputs

        def fallback(*arrays):
            return self._call(m.name, dict(zip(names, arrays)), {}, static, {}, None)

        try:
            m.fast[key] = fast.Kernel(single.addr[spec.name], tuple(tuple(shapes[n]) for n in spec.inputs),
                                      tuple(tuple(shapes[n]) for n in spec.outputs), fallback,
                                      (_checks.QUAT_TOL, groups) if groups else None)
        except ValueError:                           # more arrays than the fast path passes: the general path
            m.fast[key] = None
            return
        if key == () and getattr(m, "ns", None) is not None:
            m.ns["_f0"] = m.fast[key]

    # --- user kernels -----------------------------------------------------------------------
    def add_kernel(self, fn, name=None):
        """Compile ``fn(model, q, ...)``, a function written with sparsedyn's functions and NumPy, as
        method ``name`` (default ``fn.__name__``) of this compiled model; returns the method.

        Its arguments after the model are state arrays named in the library's vocabulary
        (``q``, ``q0``, ``q1``: (nq,); ``v``, ``a``, ``tau``, ``dq``, ``qdd``: (nv,); ``f_ext``:
        (NB, 6); ``gravity``: (3,)); its results (one array or a tuple) get their shapes from the
        trace.  The method runs one state or a batch, like the library's own.  A function that
        branches on a value or calls a routine that cannot see traced values (``np.linalg``...)
        raises :class:`UntraceableError`.
        """
        name = name or getattr(fn, "__name__", None)
        model = self.model
        params = list(inspect.signature(fn).parameters.values())[1:]
        inputs = []
        for p in params:
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name not in _VOCABULARY:
                raise TypeError(f"user kernel {name!r}: argument {p.name!r} is not a state array of the "
                                f"vocabulary ({', '.join(_VOCABULARY)}); other values must be constants of "
                                f"the function (a closure or functools.partial)")
            inputs.append(p.name)
        if not name or not name.isidentifier() or name in REGISTRY or name.startswith("__") \
                or hasattr(type(self), name):
            raise ValueError(f"user kernel {name!r}: give it (name=) an identifier that is not the name of a "
                             f"library function or of an attribute of CompiledModel")
        table = {n: tuple(REGISTRY_KERNEL_SIZE(model, d) for d in ((_VOCABULARY[n],) if isinstance(_VOCABULARY[n], str)
                                                                      else _VOCABULARY[n])) for n in inputs}
        prog = trace_function(lambda *args: fn(model, *args), [(n, table[n]) for n in inputs], None, name,
                              explain=True)
        outputs = prog.output_names
        cname = "u_" + re.sub(r"[^a-z0-9_]", "_", name.lower()) + "_" + hashlib.sha256(name.encode()).hexdigest()[:6]
        table.update(zip(outputs, prog.output_shapes))
        spec = Kernel(cname, None, {n: table[n] for n in inputs}, {n: table[n] for n in outputs},
                      program=lambda model, static, optional, p=prog: p)
        self._specs[cname] = spec
        self._user_specs[name] = spec
        m = self._methods[name] = _Method(name, fn, inputs, (), (), outputs, user=True)
        method = _generate(self, m, fn)
        self.__dict__[name] = method
        vectorize, kernels = self._options
        if fn not in kernels and "<locals>" not in getattr(fn, "__qualname__", "<locals>") \
                and name == getattr(fn, "__name__", None):
            self._options = (vectorize, kernels + (fn,))     # a module-level function: pickled by reference
        return method

    @property
    def _user_specs(self):
        d = self.__dict__.get("_user_spec_table")
        if d is None:
            d = self.__dict__["_user_spec_table"] = {}
        return d


def REGISTRY_KERNEL_SIZE(model, d):        # noqa: N802 - a size of the kernel vocabulary
    return d if isinstance(d, int) else {"nq": model.nq, "nv": model.nv, "nb": model.nbodies}[d]


def _checked(model, name, x, shape, check_values=True):
    """``x`` checked and converted as the NumPy functions do (``_checks``), as a float64 array;
    ``check_values=False``: conversion and shape only."""
    shape = tuple(shape)
    if len(shape) == 1 and _is_configuration(name, shape, model):
        x = _checks.configuration(model, x, name, check_values)
    elif len(shape) == 1:
        x = _checks.vector(model, name, x, shape[0], "one value per " + ("dof" if shape[0] == model.nv else "entry"),
                           check_values)
    elif shape == (model.nbodies, 6):
        x = _checks.body_forces(model, x, name, check_values)
    else:
        try:
            x = bk.asarray(x)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name}: expected a numeric array of shape (..., {', '.join(map(str, shape))}); "
                            f"{e}") from None
        if x.ndim < len(shape) or x.shape[x.ndim - len(shape):] != shape:
            raise ValueError(f"{name}: expected shape (..., {', '.join(map(str, shape))}) for model "
                             f"{model.name!r}, got shape {x.shape}")
        if check_values and not bk.is_symbolic(x) and not np.all(np.isfinite(x)):
            raise ValueError(f"{name}: contains NaN or infinite values")
    if bk.is_symbolic(x):
        raise TypeError(f"{name}: a compiled model takes numbers, not traced values")
    return x if x.dtype == np.float64 else np.asarray(x, dtype=np.float64)


def _generate(cm, m, fn):
    """A Python function with the signature of ``fn`` (without ``model``) plus ``out=``: one state
    without optional arrays goes straight to the fast C callable of its static arguments; the rest
    goes through :meth:`CompiledModel._call`."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    ns = {"_fast": m.fast, "_call": cm._call, "_name": m.name}
    text, seen_kwonly = [], False
    declared = set(m.inputs) | set(m.optional) | set(m.static)
    extra = []
    for k, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{m.name}: a kernel cannot take *args or **kwargs")
        if p.kind == p.KEYWORD_ONLY and not seen_kwonly:
            text.append("*")
            seen_kwonly = True
        if p.default is p.empty:
            text.append(p.name)
        else:
            ns[f"_d{k}"] = p.default
            text.append(f"{p.name}=_d{k}")
        if p.name not in declared:
            extra.append((p.name, f"_d{k}" if p.default is not p.empty else None))
    if "out" not in {p.name for p in params}:
        text.append("out=None" if seen_kwonly else "*, out=None")
    ins = ", ".join(m.inputs)
    opt_none = " and ".join(f"{n} is None" for n in m.optional)
    cond = "out is None" + (f" and {opt_none}" if opt_none else "")
    for n, d in extra:
        cond += f" and {n} is {d}" if d else ""
    key = "(" + "".join(f"{n}, " for n in m.static) + ")"
    if m.static:
        lookup = ["        try:",
                  f"            f = _fast.get({key})",
                  "        except TypeError:",
                  "            f = None"]
    else:                                           # the fast callable itself, set once it is built
        lookup = ["        f = _f0"]
    ns["_f0"] = None
    m.ns = ns
    body = [f"def {m.name}({', '.join(text)}):",
            f"    if {cond}:",
            *lookup,
            "        if f is not None:",
            f"            return f({ins})",
            f"    return _call(_name, {{{', '.join(f'{n!r}: {n}' for n in m.inputs)}}}, "
            f"{{{', '.join(f'{n!r}: {n}' for n in m.optional)}}}, {{{', '.join(f'{n!r}: {n}' for n in m.static)}}}, "
            f"{{{', '.join(f'{n!r}: ({n}, {d})' for n, d in extra)}}}, out)"]
    exec("\n".join(body), ns)                       # noqa: S102 - source generated from a signature
    f = ns[m.name]
    f.__doc__ = fn.__doc__
    f.__qualname__ = f"CompiledModel.{m.name}"
    f.__module__ = getattr(fn, "__module__", __name__)
    return _native_method(cm, m, f, params)


def _native_method(cm, m, f, params):
    """``f`` behind the C extension's ``Method`` (no Python frame on a single-state call: the
    inputs, then the static arguments by position or keyword, select a built kernel of ``m.fast``),
    with ``f``'s name, docstring and signature; ``f`` itself without the extension, or when the
    static arguments do not directly follow the inputs."""
    fast = _fast_module(cm._compiler) if cm.fastcall else None
    names = [p.name for p in params]
    nin, nst = len(m.inputs), len(m.static)
    if fast is None or names[:nin] != list(m.inputs) or names[nin:nin + nst] != list(m.static):
        return f
    statics = params[nin:nin + nst]
    defaults = tuple(p.default for p in statics if p.default is not p.empty)
    if any(p.default is p.empty for p in statics[len(statics) - len(defaults):]):
        return f
    meth = fast.Method(f, m.fast, nin, tuple(m.static), defaults)
    meth.__doc__, meth.__name__, meth.__qualname__, meth.__module__ = f.__doc__, f.__name__, f.__qualname__, \
        f.__module__
    meth.__signature__ = inspect.signature(f)
    meth.__wrapped__ = f
    return meth


def _rebuild(model, vectorize, kernels, threads):
    k = compile(model, kernels, vectorize=vectorize)
    k.threads = threads
    return k


def find_compiler_or_warn(stacklevel=3):
    """The :class:`~sparsedyn.codegen.build.Compiler` to use, or ``None`` after warning (once per
    process and setting) that the compiled objects fall back to NumPy."""
    compiler = build.find_compiler()
    if compiler is None:
        cmd = build._compiler_command()
        what = "SPARSEDYN_CC / CC" if (os.environ.get("SPARSEDYN_CC") or os.environ.get("CC")) else "PATH"
        tag = (what, tuple(cmd) if cmd else None)
        if tag not in _warned_no_compiler:
            _warned_no_compiler.add(tag)
            warnings.warn(
                "sparsedyn.compile: no working C compiler was found ("
                + (f"{' '.join(cmd)} cannot build a shared library" if cmd else f"none on {what}")
                + "); the compiled kernels fall back to the NumPy kernels (same results, much slower). "
                  "Install gcc or clang, or point SPARSEDYN_CC at one.", CompilerNotFoundWarning,
                stacklevel=stacklevel)
    return compiler


#: ``model -> CompiledModel`` of plain calls, set by :mod:`.native` (imported with this package).
shared_model = None


def compile(model, kernels=(), *, vectorize=None, progress=None):  # noqa: A001
    """Compile ``model`` (see :class:`CompiledModel`), or a sparse problem or an estimator.

    ``k = sparsedyn.compile(model)`` returns at once; each function is traced and
    built on its first call (cached on disk, so a later process loads it), and
    ``k`` is accepted wherever the model is::

        k = sd.compile(model)
        tau = sd.rnea(k, q, v, a)          # or k.rnea(q, v, a); q, v, a may carry batch axes
        J = sd.frame_jacobian(k, q, "tool0")

    ``kernels``: functions to add or build now.  A callable ``fn(model, q, ...)``
    written with sparsedyn's functions and NumPy becomes method ``k.<fn name>``
    (see :meth:`CompiledModel.add_kernel`); a name of a registered function
    (``"rnea"``, ``"rnea_ext"`` with its optional arrays) is built now instead
    of at its first call.

    ``vectorize``: ``True`` builds the batch form (code vectorised across
    states) together with the single-state form, ``None`` (default) at the
    first batch call, ``False`` never (batches then loop over the scalar code,
    still in C and on all cores).  ``progress``: ``True`` prints the steps to
    stderr, a callable receives them as strings, ``None`` (default) prints them
    for models with 20 or more dofs when stderr is a terminal.

    ``model`` may also be

    * a :class:`sparsedyn.sparse.Problem` (analysed here with the default ordering) or a
      :class:`sparsedyn.sparse.Structure`: returns a
      :class:`~sparsedyn.codegen.problems.CompiledStructure` whose
      ``solve(q, v, y=None, gravity=None, check="auto", info=False)`` returns what
      :meth:`Structure.solve <sparsedyn.sparse.Structure.solve>` returns;
    * a :class:`sparsedyn.constraints.ConstraintSet`: returns a copy that runs compiled (see
      :func:`~sparsedyn.codegen.constraints.compile_constraints`), e.g. ``simulate(sd.compile(cs), q0, v0, 1.0, 1e-3)``;
    * an :class:`sparsedyn.estimation.EstimationProblem` (compiled here) or an
      :class:`~sparsedyn.estimation.Estimator`: returns a
      :class:`~sparsedyn.codegen.problems.CompiledEstimator` whose
      ``solve(q, v, y, covariance=False, gravity=None)`` returns what
      :meth:`Estimator.solve <sparsedyn.estimation.Estimator.solve>` returns.

    Without a C compiler (none on ``PATH``, or ``$SPARSEDYN_CC`` naming none)
    everything runs through the NumPy functions and a
    :class:`~sparsedyn.codegen.build.CompilerNotFoundWarning` is issued once per
    process.
    """
    from .problems import compile_problem, is_problem
    if isinstance(model, CompiledModel):
        model = model.model
    if _is_constraint_set(model):
        if kernels:
            raise TypeError("compile: kernels= applies to models, not to constraint sets")
        return compile_constraints(model, find_compiler_or_warn(), _progress_fn(progress, model.model), vectorize)
    if is_problem(model):
        if kernels:
            raise TypeError("compile: kernels= applies to models, not to sparse problems or estimators")
        compiler = find_compiler_or_warn()
        return compile_problem(model, compiler, vectorize=vectorize, progress=progress)
    if isinstance(kernels, str) or callable(kernels):
        kernels = (kernels,)
    compiler = find_compiler_or_warn()
    if not kernels and vectorize is None and progress is None and shared_model is not None:
        k = shared_model(model)             # the object plain calls use (one per model fingerprint)
        if k._compiler is compiler:
            return k
    return CompiledModel(model, compiler, _progress_fn(progress, model), vectorize, tuple(kernels))


def compile_report(model, kernels=DEFAULT_KERNELS, progress=None, vectorize=True) -> str:
    """Text for ``sparsedyn compile MODEL``: flop counts per kernel (from the IR) and build times."""
    t0 = time.perf_counter()
    cm = compile(model, tuple(kernels), progress=progress, vectorize=vectorize)
    wall = time.perf_counter() - t0
    lines = [f"model {model.name!r}: {model.nbodies} bodies, nq={model.nq}, nv={model.nv}"]
    if cm.compiled:
        c = cm._compiler
        lines.append(f"compiler: {' '.join(c.argv)} ({c.ident.split(' | ')[0]}); flags: {' '.join(c.flags)}")
        lines.append(f"batch: {cm.lanes} states per vector, OpenMP {'on' if c.openmp else 'off'}, "
                     f"single calls via {'the C fast path' if cm.fastcall else 'ctypes'}")
    else:
        lines.append("no C compiler: NumPy fallback (flop counts below are still from the IR)")
    hdr = f"{'kernel':18s} {'mul':>8s} {'add':>8s} {'div':>5s} {'sqrt':>5s} {'sin':>5s} {'cos':>5s} {'total':>9s} " \
          f"{'(neg)':>6s} {'IR nodes':>9s}"
    lines.append(hdr)
    for n in kernels:
        f = cm.flops(n)
        lines.append(f"{n:18s} {f['mul']:8d} {f['add']:8d} {f['div']:5d} {f['sqrt']:5d} {f['sin']:5d} {f['cos']:5d} "
                     f"{f['total']:9d} {f['neg']:6d} {cm.kernels[n].nodes:9d}")
    if cm.compiled:
        for variant, sec in cm.build_seconds.items():
            how = "built (trace + C compile)" if cm.built[variant] else "loaded from the cache"
            lines.append(f"{variant:6s} library: {how} in {sec:.2f} s")
        lines.append(f"total {wall:.2f} s; cache: {build.cache_dir()}")
    else:
        lines.append(f"traced in {wall:.2f} s")
    return "\n".join(lines)


def _is_constraint_set(x) -> bool:
    from ..constraints.base import ConstraintSet
    return isinstance(x, ConstraintSet)


# The compiled constraint sets live in .constraints (imported last: it builds on CompiledModel).
from .constraints import compile_constraints  # noqa: E402
