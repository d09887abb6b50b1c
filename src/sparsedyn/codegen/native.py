"""Plain calls on native code: the compiler's side of the registry's dispatch.

Importing this module registers :func:`plain_call` with the kernel registry
(:func:`sparsedyn.kernels.set_native`); the package imports it on the first plain
call, so no layer below the compiler imports it.  From then on
``sd.rnea(model, q, v, a)`` on a model with numbers runs the model's compiled
kernel:

* one compiled model per model *fingerprint* (structure and every constant,
  :func:`~sparsedyn.codegen.runtime.model_fingerprint`) and compiler, held for the process (the
  last :data:`KEEP` fingerprints, and as long as a model that used it lives):
  a model rebuilt equal shares it, a changed model gets its own;
  :func:`sparsedyn.compile` ``(model)`` returns the same object;
* a kernel is built on its first plain call (the build cache makes that
  milliseconds in every later process).  A build that is not done within
  :data:`MOMENT` seconds prints one line and goes on in a background thread
  while the calls answer on the NumPy path; the native kernel takes over when it
  is ready.  A build still running when the program ends is finished before the
  process exits (one line says so; on CPython), so that the next run finds it in the
  build cache instead of starting it again and answering on NumPy meanwhile.  In
  deterministic mode (``sd.use_backend("native", deterministic=True)`` or
  ``SPARSEDYN_DETERMINISTIC=1``) the call waits for the build instead;
* one state of float arrays runs through the compiled method's C fast path (a
  dictionary lookup in the registry's wrapper, then C); a batch runs the batch
  runtime (vectorised across states, threads);
* traced (object) arrays, arrays of other libraries and other non-numbers go to
  the NumPy function, as do the calls made while a NumPy answer is computed (so
  a kernel answering on NumPy does not start builds of the kernels it calls);
* on a model whose mass matrix is singular at a generic state (a massless subtree...), a kernel
  whose NumPy function refuses it (:class:`~sparsedyn.SingularInertiaError`, naming the joint)
  stays on NumPy, where the compiled kernel would return inf/nan;
* without a C compiler the NumPy functions answer, after one
  :class:`~sparsedyn.codegen.build.CompilerNotFoundWarning` per process;
* threads racing on a first call share one build (one job per library); other
  processes wait on the build cache's lock.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import inspect
import os
import sys
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from concurrent.futures import Future, TimeoutError as _Timeout

import numpy as np

from .. import _checks
from .. import kernels as _registry
from . import api, build
from .compiled_model import CompiledModel, _native_method
from .runtime import _fast_module, _progress_fn, find_compiler_or_warn, model_fingerprint

__all__ = ["plain_call", "shared", "c_library", "MOMENT", "KEEP"]


def _moment(default=0.5):
    try:
        return max(0.0, float(os.environ.get("SPARSEDYN_BUILD_WAIT", default)))
    except ValueError:
        return default


#: Seconds a first plain call waits for its build before answering on NumPy
#: (``$SPARSEDYN_BUILD_WAIT``).
MOMENT = _moment()
#: Compiled models kept for fingerprints no live model refers to.
KEEP = 64

_tls = threading.local()            # plain: inside a plain call; reference: computing a NumPy answer
_lock = threading.Lock()
_entries: OrderedDict = OrderedDict()
_NUMERIC = frozenset("fiub")
_SCALARS = (float, int, bool, type(None), np.number, np.bool_)


class _NotReady(Exception):
    """The native kernel is still being built: answer on NumPy."""


class _BuildFailed(Exception):
    """The native kernel could not be built (the NumPy function answers, or says what is wrong)."""


_positions: dict = {}


def _arrays(k):
    """``(positions, names)`` of the state arrays (inputs and optional arrays) of kernel ``k``
    among the arguments after the model."""
    got = _positions.get(k.name)
    if got is None or got[0] is not k:
        names = list(k.signature.parameters)[1:]
        arrays = set(k.inputs) | set(k.optional)
        got = _positions[k.name] = (k, tuple(j for j, n in enumerate(names) if n in arrays), frozenset(arrays))
    return got[1:]


def _numeric(k, args, kwargs) -> bool:
    """Whether every state array of this call of ``k`` is a number or an array of numbers (the
    native path's inputs); traced values, other libraries' arrays and other objects go to NumPy.
    The static arguments (a frame, contacts...) are not looked at."""
    positions, names = _arrays(k)
    xs = [args[j] for j in positions if j < len(args)] + [x for n, x in kwargs.items() if n in names]
    for x in xs:
        if type(x) is np.ndarray:
            if x.dtype.kind not in _NUMERIC:
                return False
        elif _checks.flat_reals(x):                 # (one state as plain numbers: the compiled kernel converts it)
            continue
        elif isinstance(x, (list, tuple)):
            try:
                if np.asarray(x).dtype.kind not in _NUMERIC:
                    return False
            except (TypeError, ValueError):
                return False
        elif not isinstance(x, _SCALARS):
            return False
    return True


def _run_job(fut, work):
    _tls.quiet = True
    if fut.set_running_or_notify_cancel():
        try:
            fut.set_result(work())
        except BaseException as e:          # noqa: BLE001 - handed to whoever waits
            fut.set_exception(e)


def _finish_at_exit(ref, what, name, pid):
    """At the program's end: wait for the build of the future ``ref()`` (a weak reference: the build's
    thread holds it while it runs), saying so on stderr where it still runs.  Only in the process ``pid``
    that started it: a forked child (a ``multiprocessing`` worker, which runs these hooks when it ends)
    has no such thread, and would wait for ever."""
    fut = ref()
    if fut is not None and not fut.done() and os.getpid() == pid:
        print(f"sparsedyn: finishing the build of {what} for model {name!r} before exiting, so that "
              f"later runs find it cached", file=sys.stderr, flush=True)
        with contextlib.suppress(BaseException):
            fut.result()


def _await(jobs, key, work, what, model, wait=False, by=None):
    """The result of ``work()``, run once per ``jobs[key]`` in a background thread; raises
    :class:`_NotReady` when it is not done within the plain call's moment (unless ``wait`` or
    deterministic mode), :class:`_BuildFailed` when it failed.  ``by``: who builds (a string, or a
    function of no argument giving it, called when the build is announced)."""
    with _lock:
        fut = jobs.get(key)
        if fut is None:
            fut = jobs[key] = Future()
            fut.announced, fut.t0 = False, time.perf_counter()
            threading.Thread(target=_run_job, args=(fut, work), daemon=True, name=f"sparsedyn build {what}").start()
            # A daemon's build would be lost at exit: the interpreter's end waits for it, before the
            # thread pools that compile its units stop taking work (CPython's hook for that).
            at_exit = getattr(threading, "_register_atexit", None)
            if at_exit is not None:
                importlib.import_module("concurrent.futures.thread")     # (its hook first: it then runs last)
                at_exit(_finish_at_exit, weakref.ref(fut), what, model.name, os.getpid())
    # A build gets one moment from its start (later calls while it runs do not wait again), and a
    # plain call one moment for the compiler setup and the build together.
    deadline = min(fut.t0 + MOMENT, getattr(_tls, "deadline", None) or np.inf)
    moment = max(0.0, deadline - time.perf_counter())
    try:
        try:
            return fut.result(moment)
        except _Timeout:
            background = not (wait or _registry.use_backend.is_deterministic())
            _announce(fut, what, model, background, by)
            if background:
                raise _NotReady() from None
            return fut.result()
    except (_NotReady, KeyboardInterrupt):
        raise
    except Exception as e:
        raise _BuildFailed(e) from e


#: ``None``: build announcements go to stderr as they happen; a list (:func:`announcements_held`)
#: keeps them for a report that must not be cut by them.
_held = None


@contextlib.contextmanager
def announcements_held():
    """A context: the build announcements of plain calls made within are kept and printed (to
    stderr) on leaving it, after the report the block printed (``sparsedyn demo``)."""
    global _held
    outer, _held = _held, []
    try:
        yield
    finally:
        lines, _held = _held, outer
        for line in lines:
            print(line, file=sys.stderr, flush=True)


def _announce(fut, what, model, background, by=None):
    with _lock:
        if fut.announced:
            return
        fut.announced = True
    how = " in the background (NumPy answers meanwhile)" if background else ""
    by = by() if callable(by) else by
    with_ = f" with {by}" if by else ""
    line = (f"sparsedyn: building {what} for model {model.name!r} (nv={model.nv}){with_}{how}; cached in "
            f"{build.cache_dir()}")
    held = _held
    if held is not None:
        held.append(line)
        return
    sys.stdout.flush()            # what was printed before the build comes before its line
    print(line, file=sys.stderr, flush=True)


class SharedModel(CompiledModel):
    """The compiled model of plain calls (and of ``sparsedyn.compile(model)``): a
    :class:`~sparsedyn.codegen.compiled_model.CompiledModel` whose libraries, when a plain call needs them,
    build in the background (see the module docstring); its own methods build as before."""

    def __init__(self, *args, **kwargs):
        self._jobs = {}
        super().__init__(*args, **kwargs)

    def _library(self, group, variant):
        lib = self._libs.get((group, variant))
        if lib is not None or not getattr(_tls, "plain", False):
            return super()._library(group, variant)
        what = f"native {getattr(_tls, 'kname', None) or group}" + (" (batch)" if variant == "batch" else "")
        # the compiler's description when a build is announced, not at every call (it probes the pip compiler)
        return _await(self._jobs, (group, variant), functools.partial(super()._library, group, variant), what,
                      self.model, by=functools.partial(build.describe, self._compiler))


class _Entry:
    """The compiled model of one fingerprint, made once (in the background: the first one sets up
    the compiler and its C extension, once per machine)."""

    def __init__(self, model, key):
        # A copy (equal fingerprint, shared arrays): the entry outlives the model in the plain-call
        # table of each model that uses it, which must not keep that model alive.
        self.model, self.key = copy.copy(model), key
        self.cm = None
        self.jobs = {}
        self._singular = None

    def singular(self) -> bool:
        """Whether the model's mass matrix is singular at a generic state (a massless subtree, a
        point mass on a joint's axis...: a generic-rank question, so one sample answers it).  The
        compiled kernels return inf/nan there, the NumPy functions raise SingularInertiaError."""
        if self._singular is None:
            q = self.model.random_configuration(np.random.default_rng(0), limits=False)
            try:
                _registry.REGISTRY["minv"].fn(self.model, q)
                self._singular = False
            except ValueError as e:
                self._singular = type(e).__name__ == "SingularInertiaError"
        return self._singular

    def compiled(self, wait=False):
        """The :class:`SharedModel`; raises :class:`_NotReady` while it is being made (unless ``wait``)."""
        if self.cm is None:
            self.cm = _await(self.jobs, "make", self._make, "native code (first: the C compiler setup)", self.model,
                             wait)
            if not self.cm.compiled:
                find_compiler_or_warn(stacklevel=6)      # once per process
        return self.cm

    def _make(self):
        show = _progress_fn(None, self.model)
        quiet = show and (lambda msg: None if getattr(_tls, "quiet", False) else show(msg))
        return SharedModel(self.model, build.find_compiler(), quiet or None)


def _entry(model) -> _Entry:
    """The entry of ``model``'s fingerprint and the compiler command (a model first met while no
    compiler was reachable, SPARSEDYN_CC naming none, gets native kernels once one is); the
    model's own one (its plain calls') if it has that key, even when no longer kept."""
    cmd = build._compiler_command()
    key = (model_fingerprint(model), tuple(cmd) if cmd else None, os.environ.get("SPARSEDYN_CFLAGS", ""))
    own = (_registry.native_calls(model) or {}).get(None)
    with _lock:
        e = _entries.get(key)
        if e is None:
            e = _entries[key] = own if own is not None and own.key == key else _Entry(model, key)
        _entries.move_to_end(key)
        while len(_entries) > KEEP:
            _entries.popitem(last=False)
    return e


def _calls(model) -> dict:
    """The model's table of plain-call callables (made on first use; held by the registry,
    :func:`sparsedyn.kernels.native_calls`, as long as the model lives)."""
    calls = _registry.native_calls(model)
    if calls is None:
        entry = _entry(model)
        with _lock:
            calls = _registry.native_calls(model, lambda: {None: entry})
    return calls


def shared(model) -> SharedModel:
    """The compiled model that plain calls on ``model`` use (what ``sparsedyn.compile(model)`` returns)."""
    e = _entry(model)
    try:
        return e.cm if e.cm is not None else e.compiled(wait=True)
    except _BuildFailed as failed:
        raise failed.__cause__ from None


def _reference(fn, model, args, kwargs, failed=None):
    """``fn``'s NumPy answer; nested plain calls answer on NumPy too (no builds start from inside
    a NumPy answer).  An ``out=`` the compiled method takes (one array, or a tuple for several
    results) receives the answer, as the compiled method writes it."""
    out = kwargs.pop("out", None)
    outer = getattr(_tls, "reference", False)
    _tls.reference = True
    try:
        res = fn(model, *args, **kwargs)
    finally:
        _tls.reference = outer
    if failed is not None:
        _warn_failed(fn.__name__, model, failed)
    if out is None:
        return res
    for o, r in zip(out, res) if isinstance(out, tuple) else ((out, res),):
        o[...] = r
    return out


_warned_failed = set()


def _warn_failed(name, model, failed):
    key = (name, model.name)
    if key not in _warned_failed:
        _warned_failed.add(key)
        cause = failed.__cause__ or failed
        warnings.warn(f"sparsedyn: the native {name} of model {model.name!r} could not be built "
                      f"({type(cause).__name__}: {cause}); plain calls of it answer on NumPy", RuntimeWarning,
                      stacklevel=4)


def _plain_method(cm, k):
    """The callable of plain calls of kernel ``k`` on ``cm``'s model: the compiled method's C fast
    path for one state, its general path for the rest, the NumPy function for traced or foreign
    inputs and while the kernel is being built."""
    fn, model = k.fn, cm.model
    meth = getattr(cm, k.name)
    general = getattr(meth, "__wrapped__", meth)

    def plain(*args, **kwargs):
        if getattr(_tls, "reference", False) or not _numeric(k, args, kwargs):
            return _reference(fn, model, args, kwargs)
        outer = getattr(_tls, "plain", False)
        _tls.plain, _tls.kname = True, k.name
        failed = None
        try:
            return general(*args, **kwargs)
        except _NotReady:
            pass
        except _BuildFailed as e:
            failed = e
        finally:
            _tls.plain = outer
        return _reference(fn, model, args, kwargs, failed)

    functools.update_wrapper(plain, fn)
    params = list(inspect.signature(fn).parameters.values())[1:]
    fast = _fast_module(cm._compiler) if cm.fastcall else None
    if fast is not None:                # the public functions reach the C methods with no Python frame
        _registry.set_front(fast.front)
    return _native_method(cm, cm._method_of(k.name), plain, params)


def plain_call(k, model, args, kwargs):
    """The registry's hook: a plain call of kernel ``k`` on ``model`` that found no ready callable
    in the model's table (see the module docstring)."""
    if getattr(_tls, "reference", False) or not _numeric(k, args, kwargs):
        return k.fn(model, *args, **kwargs)
    calls = _calls(model)
    f = calls.get(k.name)
    if f is None:
        _tls.deadline = time.perf_counter() + MOMENT        # one moment for the setup and the build
        try:
            cm = calls[None].compiled()
        except _NotReady:
            return _reference(k.fn, model, args, dict(kwargs))
        except _BuildFailed as e:
            return _reference(k.fn, model, args, dict(kwargs), e)
        finally:
            _tls.deadline = None
        with _lock:
            f = calls.get(k.name)
        if f is None and cm._native and calls[None].singular():
            # On a singular model a kernel that divides by the mass matrix' pivots raises in NumPy
            # (SingularInertiaError naming the joint) and stays there; the others go native.
            try:
                res = _reference(k.fn, model, args, dict(kwargs))
            except ValueError as e:
                if type(e).__name__ == "SingularInertiaError":
                    with _lock:
                        calls.setdefault(k.name, functools.partial(k.fn, cm.model))
                raise
            with _lock:
                calls.setdefault(k.name, _plain_method(cm, k))
            return res
        if f is None:
            # Nothing to compile (no compiler, no moving body): the NumPy function, without a detour.
            f = _plain_method(cm, k) if cm._native else functools.partial(k.fn, cm.model)
            with _lock:
                f = calls.setdefault(k.name, f)
        _tls.deadline = time.perf_counter() + MOMENT
        try:
            return f(*args, **kwargs)
        finally:
            _tls.deadline = None
    return f(*args, **kwargs)


#: :func:`c_library`'s libraries by source (None: none could be built), for the process.
_c_libraries: dict = {}


def c_library(source):
    """The registry's :func:`~sparsedyn.kernels.c_library`: the C translation unit ``source`` after
    the kernels' prelude, built by the kernels' compiler and flags into the build cache (keyed by the
    whole unit, the compiler and the target) and loaded, once per process; None without a compiler or
    where the build fails (the caller keeps its NumPy road)."""
    with _lock:
        if source in _c_libraries:
            return _c_libraries[source]
        compiler = find_compiler_or_warn()
        lib = None
        if compiler is not None:
            import hashlib
            from .cemit import emit_unit
            # keyed by the whole unit as compiled (the prelude and the tail pasted around the source), its key aside
            key = hashlib.sha256("\n".join(["hand-written", build.target(), compiler.ident, " ".join(compiler.flags),
                                            emit_unit([source], key="0" * 40)]).encode()).hexdigest()[:40]
            try:
                lib = build.build_library(key, [emit_unit([source], key=key)], compiler)[0]
            except (OSError, build.BuildError):
                lib = None
        _c_libraries[source] = lib
        return lib


_registry.set_native(plain_call)
_registry.set_compiler(api.compile)
_registry.set_c_library(c_library)
api.shared_model = shared
