"""The runtime every compiled object shares: cache keys, library build and load, the batch runtime.

* Cache keys: :func:`model_fingerprint` (everything of a model a kernel can read), the sources of
  the traced modules and of this subpackage, the compiler and its flags (see :mod:`.api`).
* :func:`_build_kernels`: trace, emit, build (or load from the cache) the libraries of some kernels.
* :class:`KernelSet`: libraries of some kernels of one model, built per group and variant on first
  use, the thread policy, and :meth:`KernelSet._run`, which checks shapes, broadcasts batch axes
  and calls the single-state, looped or vectorised entry point.
* :func:`find_compiler_or_warn`: the compiler, or one warning per process and a NumPy fallback.

Nothing here knows any physics: kernels are :class:`~sparsedyn.kernels.Kernel` objects.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import json
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import _checks
from ..kernels import Kernel, feed
from ..kernels.threads import batch_pool
from . import build
from .build import CompilerNotFoundWarning
from .cemit import code_shape, emit_unit, emit_units, loop_threshold
from .trace import as_kernel, trace

__all__ = ["KernelSet", "KernelInfo", "model_fingerprint", "find_compiler_or_warn", "GENERATOR_VERSION"]

#: Version of the code generator; part of every cache key.
GENERATOR_VERSION = "16"

_warned_no_compiler = set()
_source_hash = _generator_id = None


#: Modules whose code the traced kernels run (plus this subpackage): their sources are part of
#: every model key, so an edited kernel is re-traced even in an editable install.
TRACED_MODULES = ("backend.py", "_checks.py", "kernels/*.py", "model/*.py", "algorithms/*.py", "symbolic/*.py",
                  "sparse/*.py", "estimation/*.py", "constraints/*.py", "contact/*.py")


def _files_hash(root, files, *more) -> str:
    """SHA-256 of ``files`` (paths under ``root``, named relative to it, then their bytes) and the strings ``more``."""
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update("\0".join(more).encode())
    return h.hexdigest()


def _generator() -> str:
    """:data:`GENERATOR_VERSION` and the SHA-256 of ``sparsedyn.codegen``'s own files (the modules that write the C
    and the C they paste in): part of every library key beside its programs' IR, so an edited generator rebuilds."""
    global _generator_id
    if _generator_id is None:
        here = Path(__file__).resolve().parent
        files = [p for x in ("*.py", "*.h", "*.c") for p in sorted(here.glob(x))]
        _generator_id = f"{GENERATOR_VERSION} {_files_hash(here, files)}"
    return _generator_id


def _package_source_hash() -> str:
    """SHA-256 of the sources of :data:`TRACED_MODULES` and of ``sparsedyn.codegen`` (:func:`_generator`)."""
    global _source_hash
    if _source_hash is None:
        root = Path(__file__).resolve().parents[1]
        files = [p for m in TRACED_MODULES for p in sorted(root.glob(m))]
        _source_hash = _files_hash(root, files, _generator())
    return _source_hash


_UNKEYED = frozenset(("lower", "upper", "velocity_limit", "effort_limit", "sensors", "joint_dynamics",
                      "world_inertia"))


def model_fingerprint(model) -> str:
    """SHA-256 over everything of ``model`` a kernel can depend on: every field (structure, joints, transforms,
    inertias, gravity, frames, mimic and fixed joints, names: a frame or body may be looked up by name), except
    limits, sensors and the world's inertia, which no kernel reads. The encoding is the one of owners' fingerprints
    (:func:`sparsedyn.kernels.feed`)."""
    h = hashlib.sha256()
    for f in type(model).__dataclass_fields__:
        if f not in _UNKEYED:
            h.update(f.encode())
            feed(h, getattr(model, f))
    return h.hexdigest()


class EntryPoints(NamedTuple):
    """Addresses of a compiled kernel's C entry points (see :mod:`.cemit`) and what a caller needs to
    call them: ``single`` ``void sd_K(x..., y...)``, ``loop`` ``void sd_K_loop(n, x..., y..., nthreads)``,
    ``batch`` ``int sd_K_batch(n, x..., y..., nthreads, check)``; ``lanes`` (states per vector),
    ``flops`` (per state, for the thread count), ``threads`` (at most), and the unit-quaternion checks
    ``quaternion_tol``, ``quaternions`` ``((input index, offsets), ...)``."""

    single: int
    loop: int
    batch: int
    lanes: int
    flops: int
    threads: int
    quaternion_tol: float
    quaternions: tuple


class KernelInfo:
    """What is known about one compiled kernel: ``flops`` (dict by kind, see
    :meth:`~sparsedyn.symbolic.ir.Program.flops`), ``nodes`` (live IR nodes), ``trace_seconds``; ``result_flops``:
    the flops of the outputs that are not run-time checks (``None`` for kernels without checks)."""

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
            build.target(), _chosen_compiler(), ",".join(names), f"loops>={loop_threshold()}"]
            + ([] if owner is None else ["owner", owner])).encode()).hexdigest()[:40]
        manifest = d / f"m_{mkey}.json"
    t0 = time.perf_counter()
    try:
        info = json.loads(manifest.read_text()) if manifest is not None else None
        # An entry recorded for another platform or CPU (a cache copied from elsewhere) is refused.
        lib = build.lookup(info["library"], d) if info is not None and info.get("target") == build.target() else None
        if lib is not None and sorted(info["kernels"]) == sorted(names):
            if progress:
                progress(f"{variant} kernels from the cache (built by {info.get('compiler', '?')})")
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
        ["library", variant, __version__, _generator(), build.target(), compiler.ident, " ".join(compiler.flags)]
        + [n + " " + progs[n].digest() + repr(checks.get(n)) + " " + code_shape(progs[n], variant) for n in names]
    ).encode()).hexdigest()[:40]

    def sources():                  # written while the first ones compile (see build.build_library)
        for name in names:
            for u in emit_units(progs[name], name, variant, checks=checks.get(name)):
                yield emit_unit([u])
        yield emit_unit([], key=lkey)

    if progress:
        shapes = sorted({code_shape(p, variant) for p in progs.values()})
        progress(f"compiling C translation units ({variant}, "
                 f"{sum(len(p.nodes) for p in progs.values())} IR nodes, {' and '.join(shapes)}) with "
                 f"{build.describe(compiler)}")
    lib, built = build.build_library(lkey, sources(), compiler, progress, d)
    seconds = time.perf_counter() - t0
    if manifest is not None:
        data = {"library": lkey, "target": build.target(), "compiler": build.describe(compiler), "kernels": {n: {"flops": i.flops, "nodes": i.nodes, "trace_seconds": i.trace_seconds,
                                                 "result_flops": i.result_flops} for n, i in kinfo.items()}}
        fd, tmp = tempfile.mkstemp(prefix="m_", suffix=".tmp", dir=d)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, manifest)
    if progress:
        progress(f"{variant} kernels ready in {seconds:.2f} s "
                 + (f"(built) by {build.describe(compiler)}" if built else "(library from the cache)"))
    return _Library(lib, specs, variant), kinfo, seconds, built


def _chosen_compiler() -> str:
    """The compiler named by ``$SPARSEDYN_CC`` / ``$CC`` and ``$SPARSEDYN_CFLAGS``: part of the manifest
    key, so that a chosen compiler or flags get their own libraries, while the default (the first
    compiler found) shares every library of this platform and CPU, whichever compiler built it."""
    return "cc=" + (os.environ.get("SPARSEDYN_CC") or os.environ.get("CC") or "") + \
        " cflags=" + os.environ.get("SPARSEDYN_CFLAGS", "")


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
        self._shape_tables = {}        # id(spec) -> (spec, spec.shapes(model)): see _shapes
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

    def _shapes(self, spec) -> dict:
        """``spec.shapes(self.model)``, kept per spec (the model is fixed, so are they): a kernel whose
        sizes are counted from its static arguments (a scene's pairs) counts them once, not at every
        call (on the humanoid's 161 pairs, a tenth of a millisecond).  Read-only."""
        got = self._shape_tables.get(id(spec))
        if got is None or got[0] is not spec:
            got = self._shape_tables[id(spec)] = (spec, spec.shapes(self.model))
        return got[1]

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

    def _fast_kernel(self, single, kname, fallback, quaternions=False):
        """A C fast-path callable for one state of ``kname`` (or ``None`` without the extension). ``quaternions``: the
        fast path also checks the unit quaternions of the configuration inputs (:func:`_input_checks`), leaving a
        state that fails to ``fallback``."""
        fast = _fast_module(self._compiler) if self.compiled else None
        if fast is None:
            return None
        spec = self._spec(kname)
        shapes = spec.shapes(self.model)
        groups = _input_checks(self.model, spec)[1] if quaternions else ()
        return fast.Kernel(single.addr[kname], tuple(tuple(shapes[n]) for n in spec.inputs),
                           tuple(tuple(shapes[n]) for n in spec.outputs), fallback,
                           (_checks.QUAT_TOL, groups) if groups else None)

    def entry_points(self, kname, group="main", batch=True) -> "EntryPoints":
        """The C entry points of kernel ``kname`` (of library ``group``) for a caller that calls them without Python,
        such as an XLA custom call (:mod:`.xla_ffi`): builds or loads its single-state and (``batch``) vectorised
        batch libraries now; without ``batch``, ``EntryPoints.batch`` is 0 (batches run the loop entry)."""
        single = self._library(group, "single")
        vec = self._library(group, "batch") if batch else None
        spec = self._spec(kname)
        info = self.kernels.get(kname)
        addr = lambda f: int(ctypes.cast(f, ctypes.c_void_p).value)   # noqa: E731
        return EntryPoints(addr(single.single[kname]), addr(single.loop[kname]), addr(vec.batch[kname]) if vec else 0,
                           (vec or single).lanes, info.flops["total"] if info else 10000, int(self.threads),
                           *_input_checks(self.model, spec))

    def prepare_batch(self):
        """Build (or load) the vectorised batch library now instead of at the first batch call."""
        if self.compiled:
            self._library("main", "batch")
        return self

    def _threads_for(self, kname, N):
        """Threads for a batch of ``N`` states: at most ``self.threads``, and only as many as get about 5 ms of work
        each (estimated from the IR's flop count at 10 GFLOP/s): a fork-join over a short batch costs more than it
        saves, and on a loaded machine a thread that is not scheduled stalls the whole call for a time slice."""
        info = self.kernels.get(kname)
        flops = info.flops["total"] if info else 10000
        if info and "stages" in info.flops:          # an iterative kernel: assume 30 runs of its stages
            flops += 30 * info.flops["stages"]
        return max(1, min(int(self.threads), int(N * flops / 1e10 / 0.005)))

    def _run(self, group, kname, arrays, out=None, recheck=None):
        """Run kernel ``kname`` of library ``group`` on ``arrays`` (one per input, batch axes
        broadcast).  ``recheck``: for arrays whose shapes are checked but whose values are not
        yet, a callable that checks them (raising the library's errors): called before a single
        state or a loop, while the vectorised batch checks the values itself as it reads them and
        calls it only when one fails."""
        spec = self._spec(kname)
        shapes = self._shapes(spec)
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
              else _contiguous(x, batch + tuple(c)) for x, c in zip(xs, core)]
        outs = _out_arrays(out, spec.outputs, [batch + tuple(shapes[n]) for n in spec.outputs])
        if out is not None:             # an input that is also written (out=q): the kernel reads a copy
            xs = [x.copy() if any(np.may_share_memory(x, o) for o in outs) else x for x in xs]
        ptrs = [x.ctypes.data for x in xs] + [o.ctypes.data for o in outs]
        single = self._library(group, "single")
        threads = self._threads_for(kname, N)
        # An iterative kernel's batch entry is its scalar driver state by state (states leave the loop
        # after different numbers of iterations): the single library's loop entry is the same code, so
        # a batch of it runs there rather than in a second library (the humanoid's contact step: 100 s
        # more of building for nothing).
        info = self.kernels.get(kname)
        iterative = info is not None and "stages" in info.flops
        vectorized = N > 1 and self.vectorize is not False and N >= 2 * self.lanes and not iterative
        # Without OpenMP (the pip compiler has none) the states are split over threads here.
        sizes = None if threads < 2 or self._compiler.openmp else \
            [int(np.prod(c, dtype=np.int64)) for c in core] + [int(np.prod(shapes[n], dtype=np.int64))
                                                               for n in spec.outputs]
        if recheck is not None and not vectorized:
            recheck()
        if N == 1:
            single.single[kname](*ptrs)
        elif N > 1 and not vectorized:
            f = single.loop[kname]
            if sizes is None:
                f(N, *ptrs, threads)
            elif iterative:                      # uneven states: small chunks, taken as threads come free
                _in_threads_dynamic(lambda n, p: f(n, *p, 1), N, ptrs, sizes, threads)
            else:
                _in_threads(lambda n, p: f(n, *p, 1), N, ptrs, sizes, threads, 1)
        elif N > 1:
            vec = self._library(group, "batch")
            fb = vec.batch[kname]

            def batch(check):
                if sizes is None:
                    return fb(N, *ptrs, threads, check)
                status = _in_threads(lambda n, p: fb(n, *p, 1, check), N, ptrs, sizes, threads, max(1, vec.lanes))
                return 0 if 0 in status else 2 if 2 in status else 1

            status = batch(recheck is not None)
            if status == 2:                      # a value failed the kernel's checks: say which
                recheck()
                status = batch(0)
            if not status:
                raise MemoryError(f"{kname}: the batched kernel could not allocate its work space")
        return outs[0] if len(outs) == 1 else tuple(outs)


def _contiguous(x, shape):
    """A C-contiguous copy of ``x`` broadcast to ``shape`` (the same values as
    ``np.ascontiguousarray(np.broadcast_to(x, shape))``, with less of NumPy's Python around it)."""
    y = np.empty(shape)
    y[...] = x
    return y


def _in_threads(call, N, ptrs, sizes, threads, step):
    """``call(n, pointers)`` on ``threads`` contiguous chunks of the ``N`` states at once (each chunk
    starting at a multiple of ``step`` states; ``ptrs``: the arrays' addresses, ``sizes``: their
    float64 elements per state); returns the calls' results.  The calls run on the process's pool of
    threads (:func:`~sparsedyn.kernels.threads.batch_pool`; ctypes releases the GIL while C runs): the batch
    threads of a library built without OpenMP."""
    per = -(-N // threads)
    per = -(-per // step) * step
    chunks = [(s, min(per, N - s)) for s in range(0, N, per)]
    pool = batch_pool(len(chunks))
    futures = [pool.submit(call, n, [p + s * z * 8 for p, z in zip(ptrs, sizes)]) for s, n in chunks]
    return [f.result() for f in futures]


#: Chunks per thread of :func:`_in_threads_dynamic`: a state of the contact step may take a hundred times
#: the iterations of another, so equal chunks of states are far from equal work.
DYNAMIC_CHUNKS = 16


def _in_threads_dynamic(call, N, ptrs, sizes, threads):
    """``call(n, pointers)`` on chunks of the ``N`` states, about :data:`DYNAMIC_CHUNKS` per thread,
    which ``threads`` workers of :func:`_in_threads`' pool take in order as each comes free (OpenMP's
    ``schedule(dynamic)``; ``ptrs``, ``sizes``: as there); returns the calls' results in order."""
    per = max(1, -(-N // (threads * DYNAMIC_CHUNKS)))
    chunks = [(s, min(per, N - s)) for s in range(0, N, per)]
    taken = itertools.count()                    # next() of a count is atomic under the GIL
    results = [None] * len(chunks)

    def worker(_, __):
        while (k := next(taken)) < len(chunks):
            s, n = chunks[k]
            results[k] = call(n, [p + s * z * 8 for p, z in zip(ptrs, sizes)])

    _in_threads(worker, threads, [], [], threads, 1)
    return results


def _unit_configuration(spec, name, shape, model):
    """Whether input ``name`` (of kernel ``spec``, if given) is a configuration whose quaternions must
    be of unit norm: a ``q...`` of shape (nq,) that the kernel does not declare ``unnormalized``."""
    return (name.startswith("q") and tuple(shape) == (model.nq,)
            and (spec is None or name not in spec.unnormalized))


def _input_checks(model, spec):
    """``(tol, ((input index, quaternion offsets), ...))``: the unit quaternions of the configuration
    inputs of ``spec`` that a kernel checks (see :func:`~.cemit.emit_program`)."""
    shapes = spec.shapes(model)
    quats = _quaternion_offsets(model)
    groups = tuple((k, quats) for k, n in enumerate(spec.inputs)
                   if quats and _unit_configuration(spec, n, shapes[n], model))
    return _checks.QUAT_TOL, groups


def _quaternion_offsets(model):
    return tuple(int(model.q_slice(i).start) + k for i, j in enumerate(model.joints) for k in j.quaternions())


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
                  "Install gcc or clang, or the pip compiler (pip install ziglang), or point SPARSEDYN_CC at "
                  "one.", CompilerNotFoundWarning,
                stacklevel=stacklevel)
    return compiler
