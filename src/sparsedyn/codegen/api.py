"""``sparsedyn.compile(model)``: the compiled kernels of a fixed model (and of fixed problems).

Offline step (once per model, cached on disk): every kernel is traced into a
straight-line program (:mod:`.trace`, :mod:`.ir`), emitted as C (:mod:`.cemit`)
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
    ``sd_<library key>.so``, is keyed by the content hash of the IR of its
    kernels, the compiler identity and flags, the variant and the sparsedyn
    version.

Without a working C compiler everything still works: the methods call the
NumPy functions, and :func:`compile` warns once per process
(:class:`~sparsedyn.codegen.build.CompilerNotFoundWarning`).

Sparse problems and estimators (``compile(problem | structure | estimation
problem | estimator)``, :mod:`.problems`) go through the same machinery: their
kernels are :class:`~sparsedyn.codegen.trace.KernelSpec` objects built from a
traced callable (:func:`~sparsedyn.codegen.trace.spec_from_callable`), the
shared base :class:`KernelSet` builds, caches and runs them, and the model key
of the manifest is extended by a fingerprint of the problem's structure.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from . import build
from .build import CompilerNotFoundWarning
from .cemit import emit_program, emit_unit
from .trace import DEFAULT_KERNELS, KernelSpec, kernel_spec, trace

__all__ = ["compile", "CompiledModel", "KernelSet", "KernelInfo", "compile_report"]

#: Version of the code generator; part of every cache key.
GENERATOR_VERSION = "2"

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


def model_fingerprint(model) -> str:
    """SHA-256 over everything of ``model`` a kernel can depend on (names excluded)."""
    h = hashlib.sha256()
    h.update(repr((model.nbodies, model.nq, model.nv, [int(p) for p in model.parent])).encode())
    for j in model.joints:
        h.update(repr((j.type, tuple(float(a).hex() for a in j.axis), float(j.pitch).hex())).encode())
    for X in model.Xtree:
        h.update(np.ascontiguousarray(X.E, dtype=float).tobytes())
        h.update(np.ascontiguousarray(X.r, dtype=float).tobytes())
    h.update(np.ascontiguousarray(model.inertia, dtype=float).tobytes())
    h.update(np.ascontiguousarray(model.gravity, dtype=float).tobytes())
    if np.any(model.armature):
        h.update(b"armature" + np.ascontiguousarray(model.armature, dtype=float).tobytes())
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
        for spec in map(kernel_spec, specs):
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
                fb.restype, fb.argtypes = ctypes.c_int, [ctypes.c_long] + [ctypes.c_void_p] * n + [ctypes.c_int]
                self.batch[name] = fb
        lanes = getattr(lib, "sd_lanes")
        lanes.restype = ctypes.c_int
        self.lanes = int(lanes())


def _build_kernels(model, names, compiler, progress, variant="single", directory=None, owner=None, programs=None):
    """Trace, emit, build (or load from the cache) the kernels ``names`` (names of
    :data:`~sparsedyn.codegen.trace.KERNELS` or :class:`~sparsedyn.codegen.trace.KernelSpec`
    objects) in ``variant`` (``"single"``: scalar code; ``"batch"``: code vectorised across states).

    ``owner``: ``None`` for the model's own kernels; for kernels of something built on the
    model (a sparse problem, an estimator), a fingerprint string of everything they depend
    on beyond the model, which joins the manifest key, or ``False`` when nothing identifies
    them safely (then no manifest: they are traced every time and the library, keyed by the
    IR, is still reused).  ``programs``: a dict ``{name: Program}`` of traces to reuse (and to
    fill), so that the second variant of a kernel set is not traced again.

    Returns ``(_Library, {name: KernelInfo}, seconds spent, whether the compiler ran)``.
    """
    from .. import __version__
    specs = [kernel_spec(n) for n in names]
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
    lkey = hashlib.sha256("\n".join(
        ["library", variant, __version__, GENERATOR_VERSION, compiler.ident, " ".join(compiler.flags)]
        + [progs[n].digest() for n in names]).encode()).hexdigest()[:40]
    units = []
    for name in names:
        units += emit_program(progs[name], name, variant)
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


# --- argument handling of the general (batched, broadcast, fallback) path -------------

_SIGNATURES = {
    "rnea": (("q", "v", "a"), True),
    "bias": (("q", "v"), True),
    "aba": (("q", "v", "tau"), True),
    "crba": (("q",), False),
    "minv": (("q",), False),
    "fk": (("q",), False),
}


def _numpy_function(model, name):
    from .. import aba, bias, crba, forward_kinematics, minv, rnea
    f = {"rnea": rnea, "bias": bias, "aba": aba, "crba": crba, "minv": minv, "fk": forward_kinematics}[name]
    return lambda *args, **kw: f(model, *args, **kw)


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
        self.threads = os.cpu_count() or 1
        self.kernels = {}
        self.compiled = compiler is not None
        self.build_seconds, self.built = {}, {}
        self.vectorize = vectorize
        self.lanes = 1
        self.fastcall = False

    def _group_specs(self, group) -> list:           # pragma: no cover - abstract
        raise NotImplementedError

    def _spec(self, kname) -> KernelSpec:
        spec = self._specs.get(kname)
        return spec if spec is not None else kernel_spec(kname)

    def _library(self, group, variant):
        with self._lock:
            lib = self._libs.get((group, variant))
            if lib is None:
                specs = [kernel_spec(s) for s in self._group_specs(group)]
                self._specs.update({s.name: s for s in specs})
                lib, info, seconds, built = _build_kernels(self.model, specs, self._compiler, self._progress, variant,
                                                           owner=self._owner, programs=self._programs)
                self.kernels.update(info)
                tag = variant if group == "main" else f"{group}-{variant}"
                self.build_seconds[tag], self.built[tag] = seconds, built
                self._libs[(group, variant)] = lib
            return lib

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

    def _run(self, group, kname, arrays, out=None):
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
        if out is None:
            outs = [np.empty(batch + tuple(shapes[n])) for n in spec.outputs]
        else:
            outs = list(out) if isinstance(out, tuple) else [out]
            if len(outs) != len(spec.outputs):
                raise ValueError(f"out: expected {len(spec.outputs)} array(s), got {len(outs)}")
            for o, n in zip(outs, spec.outputs):
                want = batch + tuple(shapes[n])
                if not (isinstance(o, np.ndarray) and o.dtype == np.float64 and o.flags.c_contiguous
                        and o.flags.writeable and o.shape == want):
                    raise ValueError(f"out: expected a writeable C-contiguous float64 array of shape {want} "
                                     f"for {n!r}")
        ptrs = [x.ctypes.data for x in xs] + [o.ctypes.data for o in outs]
        single = self._library(group, "single")
        threads = self._threads_for(kname, N)
        if N == 1:
            single.single[kname](*ptrs)
        elif N > 1:
            if self.vectorize is False or N < 2 * self.lanes:
                single.loop[kname](N, *ptrs, threads)
            elif not self._library(group, "batch").batch[kname](N, *ptrs, threads):
                raise MemoryError(f"{kname}: the batched kernel could not allocate its work space")
        return outs[0] if len(outs) == 1 else tuple(outs)


class CompiledModel(KernelSet):
    """Compiled kernels of one model; see :func:`compile`.

    Methods (all accept one state or leading batch axes, which broadcast, and
    return what the NumPy function of the same name returns):

    * ``rnea(q, v, a, f_ext=None, gravity=None)`` -> tau (..., nv)
    * ``bias(q, v, f_ext=None, gravity=None)`` -> C (..., nv)
    * ``aba(q, v, tau, f_ext=None, gravity=None)`` -> qdd (..., nv)
    * ``crba(q)`` -> H (..., nv, nv);  ``minv(q)`` -> H^-1 (..., nv, nv)
    * ``fk(q)`` -> (R (..., NB, 3, 3), p (..., NB, 3))

    Every method also takes ``out=``: a preallocated C-contiguous float64
    array of the result's shape (a tuple of two for ``fk``), filled and
    returned (it saves allocating, and for large batches page-faulting, the
    result: H of a 38-dof robot is 11.5 kB per state).

    One state runs the scalar program (through the C fast path when the Python
    headers are available, else ``ctypes``).  A batch of ``N`` states runs the
    program vectorised across states (``lanes`` states per vector instruction,
    ``threads`` OpenMP threads); that library is built on the first batch call
    unless :func:`compile` was given ``vectorize=True`` (or
    :meth:`prepare_batch` is called).  ``f_ext`` / ``gravity`` use separately
    compiled variants, built on first use.

    Unlike the checked NumPy functions, the compiled ones do not check
    quaternion norms or finiteness (they are the raw kernels), and a model
    with a massless subtree gives ``inf``/``nan`` in ``aba``/``minv`` instead
    of :class:`~sparsedyn.SingularInertiaError`.

    Attributes: ``model``, ``compiled`` (False on the NumPy fallback),
    ``kernels`` (``{name: KernelInfo}``), ``build_seconds`` (``{"single": s,
    "batch": s}``: wall time of the offline step in this process, loading from
    the cache included), ``built`` (``{variant: whether the C compiler ran}``),
    ``lanes``, ``threads`` (the most threads a batch may use; default: all
    CPUs; a batch uses fewer when it is too short to pay for them), ``fastcall``.
    """

    def __init__(self, model, names, compiler, progress=None, vectorize=None):
        super().__init__(model, compiler, progress, vectorize)
        self.names = tuple(names)
        single = self._start()
        fast = _fast_module(compiler) if self.compiled else None
        self.fastcall = fast is not None
        for name in _SIGNATURES:
            general = self._general(name)
            entry = self._fast_kernel(single, name, general) if fast is not None and name in self.names else None
            setattr(self, name, entry if entry is not None else general)

    def __repr__(self):
        state = f"compiled, {self.lanes} lanes" if self.compiled else "NumPy fallback"
        return f"CompiledModel({self.model.name!r}, nv={self.model.nv}, {state}, kernels={list(self.names)})"

    def _group_specs(self, group):
        if group == "main":
            return list(self.names)
        return [f"{n}_ext" for n in ("rnea", "bias", "aba") if n in self.names]

    def flops(self, name) -> dict:
        """Flop counts of kernel ``name`` from its IR (traced on demand on the fallback path)."""
        if name not in self.kernels:
            self.kernels[name] = KernelInfo.of(name, trace(self.model, name))
        return self.kernels[name].flops

    # --- calls ------------------------------------------------------------------
    def _general(self, name):
        argnames, dynamic = _SIGNATURES[name]
        model = self.model
        numpy_fn = _numpy_function(model, name)

        def call(*args, f_ext=None, gravity=None, out=None):
            if len(args) != len(argnames):
                raise TypeError(f"{name}() takes {len(argnames)} positional arguments ({', '.join(argnames)}), "
                                f"got {len(args)}")
            if not dynamic and (f_ext is not None or gravity is not None):
                raise TypeError(f"{name}() takes no f_ext or gravity")
            if not self.compiled or name not in self.names:
                res = numpy_fn(*args, f_ext=f_ext, gravity=gravity) if dynamic else numpy_fn(*args)
                if out is None:
                    return res
                for o, r in zip(out if isinstance(out, tuple) else (out,), res if isinstance(res, tuple) else (res,)):
                    o[...] = r
                return out
            kname, group = name, "main"
            arrays = list(args)
            if f_ext is not None or gravity is not None:
                kname, group = f"{name}_ext", "ext"
                arrays += [np.zeros((model.nbodies, 6)) if f_ext is None else f_ext,
                           model.gravity if gravity is None else gravity]
            return self._run(group, kname, arrays, out)

        call.__name__ = name
        call.__qualname__ = f"CompiledModel.{name}"
        call.__doc__ = f"Compiled ``{name}`` of the model (see :class:`CompiledModel`)."
        return call


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


def compile(model, kernels=DEFAULT_KERNELS, *, vectorize=None, progress=None):  # noqa: A001
    """Compile the kernels of ``model`` (see :class:`CompiledModel`), or a sparse problem or an estimator.

    ``model`` may also be

    * a :class:`sparsedyn.sparse.Problem` (analysed here with the default ordering) or a
      :class:`sparsedyn.sparse.Structure`: returns a
      :class:`~sparsedyn.codegen.problems.CompiledStructure` whose
      ``solve(q, v, y=None, gravity=None, check="auto", info=False)`` returns what
      :meth:`Structure.solve <sparsedyn.sparse.Structure.solve>` returns;
    * an :class:`sparsedyn.estimation.EstimationProblem` (compiled here) or an
      :class:`~sparsedyn.estimation.Estimator`: returns a
      :class:`~sparsedyn.codegen.problems.CompiledEstimator` whose
      ``solve(q, v, y, covariance=False, gravity=None)`` returns what
      :meth:`Estimator.solve <sparsedyn.estimation.Estimator.solve>` returns.

    (``kernels`` applies to models only.)

    ``vectorize``: ``True`` builds the batch library (code vectorised across
    states) now, ``None`` (default) at the first batch call, ``False`` never
    (batches then loop over the scalar code, still in C and on all cores).

    ``kernels``: names from :data:`~sparsedyn.codegen.trace.DEFAULT_KERNELS`
    (``rnea, bias, aba, crba, minv, fk``).  ``progress``: ``True`` prints the
    steps to stderr, a callable receives them as strings, ``None`` (default)
    prints them for models with 20 or more dofs when stderr is a terminal.

    The first call for a model traces and builds (seconds for a humanoid);
    later calls, in this or another process, load the cached library
    (milliseconds).  Without a C compiler (none on ``PATH``, or
    ``$SPARSEDYN_CC`` naming none) the result uses the NumPy kernels and a
    :class:`~sparsedyn.codegen.build.CompilerNotFoundWarning` is issued once
    per process.
    """
    from .problems import compile_problem, is_problem
    if is_problem(model):
        if kernels is not DEFAULT_KERNELS:
            raise TypeError("compile: kernels= applies to models, not to sparse problems or estimators")
        compiler = find_compiler_or_warn()
        return compile_problem(model, compiler, vectorize=vectorize, progress=progress)
    names = tuple(kernels)
    for n in names:
        if n not in _SIGNATURES:
            raise ValueError(f"kernels: unknown kernel {n!r}; choose from {', '.join(DEFAULT_KERNELS)}")
    compiler = find_compiler_or_warn()
    return CompiledModel(model, names, compiler, _progress_fn(progress, model), vectorize)


def compile_report(model, kernels=DEFAULT_KERNELS, progress=None, vectorize=True) -> str:
    """Text for ``sparsedyn compile MODEL``: flop counts per kernel (from the IR) and build times."""
    t0 = time.perf_counter()
    cm = compile(model, kernels, progress=progress, vectorize=vectorize)
    wall = time.perf_counter() - t0
    lines = [f"model {model.name!r}: {model.nbodies} bodies, nq={model.nq}, nv={model.nv}"]
    if cm.compiled:
        c = cm._compiler
        lines.append(f"compiler: {' '.join(c.argv)} ({c.ident.split(' | ')[0]}); flags: {' '.join(c.flags)}")
        lines.append(f"batch: {cm.lanes} states per vector, OpenMP {'on' if c.openmp else 'off'}, "
                     f"single calls via {'the C fast path' if cm.fastcall else 'ctypes'}")
    else:
        lines.append("no C compiler: NumPy fallback (flop counts below are still from the IR)")
    hdr = f"{'kernel':8s} {'mul':>8s} {'add':>8s} {'div':>5s} {'sqrt':>5s} {'sin':>5s} {'cos':>5s} {'total':>9s} " \
          f"{'(neg)':>6s} {'IR nodes':>9s}"
    lines.append(hdr)
    for n in cm.names:
        f = cm.flops(n)
        lines.append(f"{n:8s} {f['mul']:8d} {f['add']:8d} {f['div']:5d} {f['sqrt']:5d} {f['sin']:5d} {f['cos']:5d} "
                     f"{f['total']:9d} {f['neg']:6d} {cm.kernels[n].nodes:9d}")
    if cm.compiled:
        for variant, sec in cm.build_seconds.items():
            how = "built (trace + C compile)" if cm.built[variant] else "loaded from the cache"
            lines.append(f"{variant:6s} library: {how} in {sec:.2f} s")
        lines.append(f"total {wall:.2f} s; cache: {build.cache_dir()}")
    else:
        lines.append(f"traced in {wall:.2f} s")
    return "\n".join(lines)
