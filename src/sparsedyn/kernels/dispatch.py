"""The road of a plain call: ``sd.rnea(model, q, v, a)``.

**Which road a plain call takes.**  ``sd.rnea(model, q, v, a)`` on a model with
numbers runs the model's native (compiled) kernel: the compiler registers itself
here (:func:`set_native`) when it is imported, and the package imports it on the
first plain call (:data:`native_loader`), so nothing in this layer imports it.
The road is chosen per call by the public function (:func:`public_function`):

* a compiled model (any object with ``__sparsedyn_kernel__``) as first argument:
  its own method;
* :func:`use_backend` ``("numpy")`` or ``SPARSEDYN_BACKEND=numpy``: the NumPy
  function (the reference);
* a :class:`~sparsedyn.Model` whose native kernel is ready: the native kernel (one
  dictionary lookup); traced (object) arrays, foreign array types and anything the
  native kernel does not take fall back to the NumPy function there;
* otherwise the compiler's hook decides (build, load from the cache, or answer
  on NumPy while a build runs); without the compiler, the NumPy function.

The public function of a kernel is a closure (:func:`public_function`) taking ``(model, *args,
**kwargs)``, with the kernel function's signature for :func:`inspect.signature` and ``help()``.
The common call (the state arrays and the static arguments, a ready native kernel: a
:class:`Direct` call) costs one Python frame and one dictionary lookup; every other call is checked
against the signature (:class:`~sparsedyn.kernels.arguments.Parameters`, Python's own messages) and
takes :func:`_dispatch`.  The compiler's C extension puts a front before each public function
(:func:`set_front`): the function's vectorcall, which answers a direct call as the body would, with no
Python frame (~0.1 us less a call), and hands every other call to the body.  Python 3.11 pushes a Python
function's frame itself when Python code calls it, so there the front answers calls from C only
(``functools.partial``, ``map``); 3.10 and 3.12 on call the function's vectorcall.

This module knows model sizes and nothing about algorithms, tracing or compilation.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple

from .._checks import BatchMemoryError as _BatchMemoryError
from .._checks import batch_memory as _batch_memory, finite_result as _finite
from .arguments import Parameters

__all__ = ["BACKENDS", "use_backend", "set_native", "native_calls", "set_model_type", "public_function", "as_tuple",
           "set_front", "Direct", "native_function"]


class Model:
    """Placeholder until the model layer registers :class:`sparsedyn.Model` (:func:`set_model_type`):
    this layer sits below the model and does not import it."""


def set_model_type(cls):
    """Register the model class (called once by :mod:`sparsedyn.model`): a plain call on an
    instance of it may go native, and a function taking ``model`` first refuses anything else."""
    global Model
    Model = cls

#: The backends a plain call can use, ``"native"`` (the default; compiled kernels, built on
#: first use and cached) and ``"numpy"`` (the NumPy functions, the reference).
BACKENDS = ("native", "numpy")


def _env_backend():
    name = os.environ.get("SPARSEDYN_BACKEND", "").strip().lower() or "native"
    if name not in BACKENDS:
        raise ValueError(f"SPARSEDYN_BACKEND={os.environ['SPARSEDYN_BACKEND']!r}: expected one of "
                         f"{', '.join(BACKENDS)}")
    return name


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


#: The backend of plain calls (see :func:`use_backend`).
_backend = _env_backend()
_numpy = _backend == "numpy"
#: Deterministic mode: a plain call waits for its native build instead of answering on NumPy
#: meanwhile, so one process never mixes the two paths (``SPARSEDYN_DETERMINISTIC=1``).
_deterministic = _env_flag("SPARSEDYN_DETERMINISTIC")

#: The compiler's hook ``(kernel, model, args, kwargs) -> result``, set by :func:`set_native`.
_native = None
#: Set by the package: a callable that imports the module that calls :func:`set_native`.
native_loader = None
#: ``{id(model): {kernel name: native callable}}``: each live model's plain-call callables, filled
#: by the compiler (:func:`native_calls`) and read by the public wrappers.  Keyed by ``id`` (one
#: dictionary lookup, no hashing of the model) and emptied by ``weakref.finalize`` when the model
#: dies, so the frozen Model carries none of it.
_calls: dict = {}
#: The table the public wrappers read: :data:`_calls` on the native backend, an empty one on NumPy.
#: Only live models' ids are keys (``weakref.finalize`` removes a model's entry before its id can be
#: reused), so a hit is a :class:`~sparsedyn.Model`'s table: the wrappers need no type check.
_NONE: dict = {}
_ready: dict = _NONE if _numpy else _calls


def set_native(hook):
    """Register the native road: ``hook(kernel, model, args, kwargs)`` answers a plain call on a
    :class:`~sparsedyn.Model` that has no ready native kernel yet (the compiler calls this when
    it is imported)."""
    global _native
    _native = hook


#: A front of the public functions, set by the compiler (:func:`set_front`), or None.
_front = None
#: The public functions made (:func:`public_function`, one per kernel, at import) and their
#: :class:`Direct` calls, for a front set later.
_publics = weakref.WeakKeyDictionary()


def set_front(install):
    """Register ``install``, which puts a front before a public function: ``install(public, table,
    name, nin, nmin, nfast, statics, sequences, result)`` (:class:`Direct`'s fields after ``table``, the
    name of the global the function's body reads the ready callables from) makes ``public``'s plain
    calls that fit answer as its body would, with no Python frame; the rest still run the body.
    ``install(public, None)`` takes the front away; ``set_front(None)`` takes every front away.
    The compiler calls this when its C extension is loaded (what the fronts call is in its tables)."""
    global _front
    if install is _front:
        return
    previous, _front = _front, install
    for public, direct in list(_publics.items()):
        if previous is not None:
            previous(public, None)
        if install is not None:
            _put_front(public, direct)


def native_function(name):
    """The function ``name`` of the compiler's C extension (the module of the front registered with
    :func:`set_front`), or None where there is no such front or function: what a layer above calls
    directly where one call does the work of several kernels (a step in a scene)."""
    return getattr(getattr(_front, "__self__", None), name, None)


def _put_front(public, direct):
    try:
        _front(public, "_ready", *direct)
    except ValueError:                      # a call shape the front does not take: the body alone
        pass


#: The compiler's ``compile(owner, kernels)`` (``sparsedyn.compile``), set by :func:`set_compiler`.
_compile = None


def set_compiler(fn):
    """Register ``fn(owner, kernels)``, what :func:`compile_owner` calls (the compiler calls this
    when it is imported, with :func:`set_native`)."""
    global _compile
    _compile = fn


def compile_owner(owner, kernels=(), **options):
    """``sparsedyn.compile(owner, kernels)`` for the layers below the compiler (a recording's chunked
    solve compiles its estimator): an owner of kernels (see :mod:`sparsedyn.kernels`) compiled by the
    compiler that registered itself (:func:`set_compiler`), imported on first use like the plain calls';
    ``options`` go to it (``progress=``, ``vectorize=``)."""
    if _compile is None and native_loader is not None:
        native_loader()
    if _compile is None:
        raise RuntimeError("sparsedyn.kernels.compile_owner: no compiler registered itself (sparsedyn.codegen "
                           "does when it is imported)")
    return _compile(owner, kernels, **options)


#: The compiler's ``library(source)`` (:func:`set_c_library`), or None.
_c_library = None


def set_c_library(fn):
    """Register ``fn(source)``, what :func:`c_library` calls (the compiler calls this when it is
    imported, with :func:`set_native`)."""
    global _c_library
    _c_library = fn


def c_library(source: str):
    """The ``ctypes`` library of the C translation unit ``source`` (a routine a layer below the
    compiler writes by hand: a loop over a table that no traced kernel expresses as well), built and
    cached by the compiler that registered itself (:func:`set_c_library`; imported on first use, as
    for the plain calls), or None where it cannot be built (no C compiler).  ``source`` may use the
    compiled kernels' prelude (``SD_EXPORT``, ``sqrt``, ``sin``, ``cos``)."""
    if _c_library is None and native_loader is not None:
        native_loader()
    return None if _c_library is None else _c_library(source)


def c_routine(source: str, name: str, argtypes, restype=None):
    """The routine ``name`` of :func:`c_library`'s library of ``source`` (ctypes), typed with ``argtypes``
    and ``restype`` on first use (ctypes keeps the function object, so once a process), or None where
    the library cannot be built."""
    lib = c_library(source)
    if lib is None:
        return None
    f = getattr(lib, name)
    if f.argtypes is None:
        f.restype = restype
        f.argtypes = argtypes
    return f


def native_calls(model, make=None) -> dict | None:
    """The table ``{kernel name: native callable}`` of ``model``'s plain calls, or ``None`` when it
    has none; with ``make`` (a function of no arguments returning a new table) a missing one is
    made and kept for as long as ``model`` lives.  The wrappers call a ready callable directly; the
    compiler fills the table.  Not thread-safe on its own: the compiler makes tables under its lock."""
    key = id(model)
    calls = _calls.get(key)
    if calls is None and make is not None:
        calls = _calls[key] = make()
        weakref.finalize(model, _forget, key, calls)
    return calls


def _forget(key, calls):
    # Called as the model dies (before its id can be reused); the check guards a table replaced since.
    if _calls.get(key) is calls:
        del _calls[key]


def _set_ready():
    global _ready
    _ready = _NONE if _numpy else _calls


class use_backend:
    """Select the backend of plain calls: ``"native"`` (default) or ``"numpy"`` (the reference).

    A setter and a context manager::

        sd.use_backend("numpy")                 # from now on, process-wide
        with sd.use_backend("numpy"):           # inside the block only
            tau = sd.rnea(model, q, v, a)

    ``deterministic=True`` (or ``SPARSEDYN_DETERMINISTIC=1``): a first call waits for its
    native build instead of answering on NumPy while the build runs in the background, so
    results never switch paths within a run (bitwise reproducible on one machine).
    The environment variable ``SPARSEDYN_BACKEND`` sets the initial backend.  The setting is
    process-wide (all threads).  ``str(use_backend.current())`` is the backend in use.
    """

    def __init__(self, name, *, deterministic=None):
        global _backend, _numpy, _deterministic
        if name not in BACKENDS:
            raise ValueError(f"use_backend: expected one of {', '.join(map(repr, BACKENDS))}, got {name!r}")
        self.name = name
        self.previous = (_backend, _deterministic)
        _backend, _numpy = name, name == "numpy"
        _set_ready()
        if deterministic is not None:
            _deterministic = bool(deterministic)
        self.deterministic = _deterministic

    @staticmethod
    def current() -> str:
        """The backend of plain calls now."""
        return _backend

    @staticmethod
    def is_deterministic() -> bool:
        """Whether a plain call waits for its native build (see above)."""
        return _deterministic

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        global _backend, _numpy, _deterministic
        _backend, _deterministic = self.previous
        _numpy = _backend == "numpy"
        _set_ready()
        return False

    def __repr__(self):
        return f"use_backend({self.name!r}, deterministic={self.deterministic})"


def as_tuple(x):
    """A sequence static argument as a tuple: a list or an iterator becomes the tuple of its items
    (the same key of a compiled kernel as that tuple); anything else (a tuple, one item) is left as it is
    (the function checks it)."""
    return tuple(x) if isinstance(x, (list, Iterator)) else x


#: The model argument of a call that named it (``sd.rnea(model=m, ...)``): it is in ``kwargs``.
_BY_NAME = object()


class Direct(NamedTuple):
    """The plain calls of a kernel that go straight to a model's native callable (``f = _ready[id(model)][name]``,
    ``f(*args, **kwargs)``): after the model, the ``nin`` state arrays by position, then static arguments,
    nothing else; each sequence static argument a tuple.  A call without keywords fits with ``nmin`` to
    ``nfast`` positional arguments after the model; a call with keywords when each keyword is a static
    argument not given by position and the required ones are given (:func:`_keywords_fit`).  The public
    function's body applies this rule, and so does a front (:func:`set_front`) in front of it."""

    name: str               # the kernel's name in a model's table
    nin: int                # the state arrays
    nmin: int
    nfast: int
    statics: tuple          # ((name, position among the static arguments by position or -1, required), ...)
    sequences: tuple        # ((position after the model or -1, name), ...)
    result: Any             # the named tuple of the native callable's plain tuple, or None


def public_function(k):
    """The public function of kernel ``k``: a closure in front of :func:`_dispatch` with ``k.fn``'s
    name, docstring and signature.  A call on a :class:`~sparsedyn.Model` whose native callable
    for ``k`` is ready (in :func:`native_calls`' table) that fits :class:`Direct` goes
    straight to it; every other call takes :func:`_dispatch`."""
    fn = k.fn
    params = list(k.signature.parameters.values())
    if not params or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in params):
        raise TypeError(f"kernel {fn.__name__}: a kernel takes the model first and named arguments "
                        f"(no *args, **kwargs or positional-only arguments)")
    arguments = Parameters(fn.__name__, params)
    direct = _direct(k, params)
    if direct.sequences or direct.result is not None:
        public = _contact_set_public(k, arguments, direct)
    else:
        public = _plain_public(k, arguments, direct)
    functools.update_wrapper(public, fn)         # name, docstring; the signature through __wrapped__
    _publics[public] = direct
    if _front is not None:
        _put_front(public, direct)
    return public


def _plain_public(k, arguments, direct):
    """The public function of a kernel whose static arguments are taken as given and whose
    native callable's outputs are its results (all but the contact kernels).  The checks of
    :func:`_contact_set_public` left out are worth ~30 ns a call."""
    name, nmin, nfast = direct.name, direct.nmin, direct.nfast
    keywords_fit, by_position = _keywords_fit(direct), _inputs_by_position(k, direct)

    def public(model=_BY_NAME, /, *args, **kwargs):
        try:
            f = _ready[id(model)][name]
        except KeyError:
            pass                                # no native callable ready, or NumPy: _dispatch
        else:
            if not kwargs:                      # f(*args): no empty dictionary passed on
                if nmin <= len(args) <= nfast:
                    return f(*args)
            elif keywords_fit(len(args), kwargs):
                return f(*args, **kwargs)
            elif (moved := by_position(args, kwargs)) is not None:
                return f(*moved[0], **moved[1])
        return _dispatch(k, arguments, model, args, kwargs)
    return public


def _contact_set_public(k, arguments, direct):
    """The public function of a kernel with sequence static arguments (a contact set: a list is
    taken as the tuple of its items, on every road) or a named result type (the native callable's
    plain tuple is handed back as ``k.result``)."""
    name, nmin, nfast, sequences, result = direct.name, direct.nmin, direct.nfast, direct.sequences, direct.result
    keywords_fit, by_position = _keywords_fit(direct), _inputs_by_position(k, direct)

    def public(model=_BY_NAME, /, *args, **kwargs):
        for j, n in sequences:                  # inline: a call of _as_tuples costs ~50 ns
            if type(args[j] if 0 <= j < len(args) else kwargs.get(n, ())) is not tuple:
                args, kwargs = _as_tuples(sequences, args, kwargs)
                break
        try:
            f = _ready[id(model)][name]
        except KeyError:
            pass
        else:
            if not kwargs:
                if nmin <= len(args) <= nfast:
                    return f(*args) if result is None else result(*f(*args))
            elif keywords_fit(len(args), kwargs):
                return f(*args, **kwargs) if result is None else result(*f(*args, **kwargs))
            elif (moved := by_position(args, kwargs)) is not None:
                return f(*moved[0], **moved[1]) if result is None else result(*f(*moved[0], **moved[1]))
        return _dispatch(k, arguments, model, args, kwargs)
    return public


def _direct(k, params):
    """The :class:`Direct` calls of kernel ``k`` (parameters ``params``); none when its inputs do
    not come first.  A call that does not fit takes :func:`_dispatch`, which checks it as Python would."""
    names = [p.name for p in params[1:]]
    nin = len(k.inputs)
    where = {p.name: j - 1 for j, p in enumerate(params) if p.kind == p.POSITIONAL_OR_KEYWORD}
    sequences = tuple((where.get(n, -1), n) for n in k.sequences)
    if names[:nin] != list(k.inputs):                     # the inputs do not come first: never
        return Direct(k.name, nin, 1, 0, (), sequences, k.result)
    by_position = []                                      # the static arguments that may come by position
    for p in params[1 + nin:]:
        if p.name not in k.static or p.kind != p.POSITIONAL_OR_KEYWORD:
            break
        by_position.append(p.name)
    required = {p.name for p in params if p.name in k.static and p.default is p.empty}
    statics = tuple((n, by_position.index(n) if n in by_position else -1, n in required) for n in k.static)
    # no keywords: the required static arguments by position, up to every one that may come so
    first = max((j + 1 for n, j, req in statics if req), default=0)
    nmin = nin + first if all(j >= 0 for n, j, req in statics if req) else nin + len(by_position) + 1
    return Direct(k.name, nin, nmin, nin + len(by_position), statics, sequences, k.result)


def _keywords_fit(direct):
    """``keywords_fit(npositional, kwargs)``: whether a call with ``npositional`` arguments after the
    model and the keywords ``kwargs`` fits ``direct``."""
    nin, npos = direct.nin, direct.nfast - direct.nin
    if npos < 0:
        return lambda n, kwargs: False
    statics = frozenset(n for n, _, _ in direct.statics)
    # by the number j of static arguments given by position: those, and the required ones left
    given = [{n for n, p, _ in direct.statics if 0 <= p < j} for j in range(npos + 1)]
    need = [{n for n, _, req in direct.statics if req} - g for g in given]

    def keywords_fit(n, kwargs):
        j = n - nin
        keys = kwargs.keys()
        return 0 <= j <= npos and keys <= statics and keys.isdisjoint(given[j]) and need[j] <= keys
    return keywords_fit


def _inputs_by_position(k, direct):
    """``move(args, kwargs) -> (args, kwargs) or None``: a call of ``direct``'s kernel ``k`` whose state
    arrays come (some or all) by keyword, ``sd.rnea(model, q=q, v=v, a=a)``, with them moved into their
    positions, where the rest then fits :class:`Direct` (no keyword but the static arguments, none given
    twice); None otherwise (the call takes :func:`_dispatch`)."""
    nin, fits = direct.nin, _keywords_fit(direct)
    names = tuple(k.inputs)
    if direct.nfast < nin:
        return lambda args, kwargs: None

    def move(args, kwargs):
        n = len(args)
        if n >= nin or not all(x in kwargs for x in names[n:]):
            return None
        rest = {x: y for x, y in kwargs.items() if x not in names}
        if len(rest) + nin - n != len(kwargs):              # (an input given twice: Python's error)
            return None
        args = args + tuple(kwargs[x] for x in names[n:])
        return (args, rest) if (not rest and direct.nmin <= len(args) <= direct.nfast) or (
            rest and fits(len(args), rest)) else None
    return move


def _as_tuples(sequences, args, kwargs):
    """``args``, ``kwargs`` with the sequence static arguments as tuples (:func:`as_tuple`)."""
    for j, n in sequences:
        if 0 <= j < len(args):
            if type(args[j]) is not tuple:
                args = args[:j] + (as_tuple(args[j]),) + args[j + 1:]
        elif n in kwargs and type(kwargs[n]) is not tuple:
            kwargs[n] = as_tuple(kwargs[n])
    return args, kwargs


def _dispatch(k, arguments, model, args, kwargs):
    """The plain call's road when no ready native kernel answered (see the module docstring):
    ``arguments`` (:class:`Parameters` of ``k.fn``) checks the call first, with Python's messages."""
    if model is _BY_NAME:
        model = kwargs.pop(arguments.names[0], _BY_NAME)
        if model is _BY_NAME:
            arguments.check(args, kwargs)           # "rnea() missing 4 required positional arguments ..."
    arguments.check((model,) + args, kwargs)
    if not isinstance(model, Model):
        # Duck-typed dispatch: this layer knows nothing of how a compiled model runs a kernel.
        dispatch = getattr(type(model), "__sparsedyn_kernel__", None)
        if dispatch is not None:
            return _named(k, dispatch(model, k.name, args, kwargs))
        if next(iter(k.signature.parameters)) != "model":          # e.g. model_or_lambda
            return k.fn(model, *args, **kwargs)
        raise TypeError(f"{k.name}: the model comes first, {k.name}({', '.join(list(k.signature.parameters)[:4])}"
                        f", ...); got {type(model).__name__} as the first argument")
    if _numpy:
        return _outermost(k, model, args, kwargs)
    if _native is None and native_loader is not None:
        native_loader()                     # the compiler registers itself (set_native) on import
    if _native is None:
        return _outermost(k, model, args, kwargs)
    return _named(k, _native(k, model, args, kwargs))


_inside = threading.local()


def _outermost(k, model, args, kwargs):
    """``k.fn``'s NumPy answer; the outermost call checks that it is finite (its inputs are: an
    overflow is an error naming the function the user called, never NaN handed back)."""
    if getattr(_inside, "on", False):
        return k.fn(model, *args, **kwargs)
    _large_batch(k, model, args, kwargs)
    _inside.on = True
    try:
        res = k.fn(model, *args, **kwargs)
    except MemoryError as e:                # NumPy's "Unable to allocate 142 GiB": said as ours
        if isinstance(e, ValueError):
            raise
        raise _BatchMemoryError(f"{k.name}: not enough memory for this call ({e}); split the batch into smaller "
                                f"ones") from None
    finally:
        _inside.on = False
    return _finite(k.name, res, tuple(len(s) for s in k.outputs.values()))


def _large_batch(k, model, args, kwargs):
    """Refuse, before any check reads them, a batch of states whose results cannot fit in memory (a
    broadcast view of 1e12 states costs nothing to make and hours to check)."""
    states = 0
    for x, core in zip(args, k.inputs.values()):
        shape = getattr(x, "shape", None)
        if isinstance(shape, tuple) and len(shape) > len(core):
            states = max(states, math.prod(shape[:len(shape) - len(core)]))
    if states < 1 << 20:
        return
    try:
        table = k.shapes(model, **{n: kwargs[n] for n in k.static if n in kwargs})
        doubles = sum(math.prod(table[n]) for n in k.outputs)
    except Exception:                            # a static argument the function will refuse itself
        doubles = 1
    _batch_memory(k.name, states, doubles)


def _named(k, out):
    """A native call's outputs (a plain tuple) in the kernel's named tuple, if it declares one."""
    return out if k.result is None or isinstance(out, k.result) else k.result(*out)
