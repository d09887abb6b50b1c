"""The registry of public numeric functions (kernels).

Every public numeric function of sparsedyn is a *kernel*: written once over
NumPy, generic over the array backend, and declared here with the shapes of
its state arrays for one state.  The declaration is what lets the symbolic
layer trace it, the compiler build it, and the derivative machinery
differentiate it, without a list kept by hand anywhere else::

    @kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)},
            optional={"f_ext": ("nb", 6), "gravity": (3,)},
            outputs={"tau": ("nv",)})
    def rnea(model, q, v, a, f_ext=None, gravity=None):
        ...

* ``inputs``: the state arrays, in signature order, each with its shape for
  one state.  Leading batch axes are added by the caller.
* ``optional``: state arrays that may be ``None`` (then a constant is folded
  into the trace, e.g. ``model.gravity``, no external force).
* ``static``: the other arguments (a frame name, a reference frame, a flag).
  They select the structure of the computation, never a value that varies per
  state, and they are part of the key of a traced or compiled form.
* ``sequences``: the static arguments that are sequences (a contact set).  The
  public function takes them as tuples, so a list selects the same compiled
  kernel as the tuple of its items.
* ``outputs``: the outputs in return order.  A function returning one array
  has one output; several outputs are returned as a tuple.
* ``unnormalized``: the configuration inputs whose quaternions may have any
  norm (``normalize`` takes them so).  Every other configuration input (a
  ``q...`` of shape ``(nq,)``) is checked for unit quaternions, on every road.

A shape entry is an int, one of the model sizes ``"nq"``, ``"nv"``, ``"nb"``
(bodies), ``"nf"`` (frames), or a callable ``(model, **static) -> int``.
Shapes are resolved by :meth:`Kernel.shapes`.

A :class:`Kernel` is also what the compiler builds: :meth:`Kernel.variant` fixes
the static arguments and chooses the optional arrays of a registered kernel
(a kernel whose every argument is a state array, named by a C identifier), and
:meth:`Kernel.of_arrays` declares the kernel of an owner object (the online
phase of a sparse structure, an estimator's solve, constrained dynamics): a
function of state arrays alone, with outputs that may be run-time *checks*.
:func:`sparsedyn.symbolic.trace.trace_kernel` traces any of them.

Owners.  An object that owns kernels (a sparse structure, an estimator, a
contact set) hands them to the compiler through one protocol, so the compiler
imports no physics: its ``__sparsedyn_kernels__()`` returns :class:`Owned`
(the model, its kernels, a fingerprint of everything they depend on beyond
the model, for the build cache).  ``sparsedyn.compile(owner)`` builds them and
returns a compiled kernel set (a method per kernel, one state or a batch), or,
when the owner also has ``__sparsedyn_compiled__(compiled)``, what that returns
(the owner's own wrapper around the compiled kernels).  An owner whose kernels
depend on choices made at run time (a constraint set: one kernel per partition
of the coordinates, per integration step) hands them later, one at a time, to
the compiled kernel set's ``add(kernel)``.

**Which road a plain call takes.**  ``sd.rnea(model, q, v, a)`` on a model with
numbers runs the model's native (compiled) kernel: the compiler registers itself
here (:func:`set_native`) when it is imported, and the package imports it on the
first plain call (:data:`native_loader`), so nothing in this layer imports it.
The road is chosen per call by the wrapper of :func:`kernel`:

* a compiled model (any object with ``__sparsedyn_kernel__``) as first argument:
  its own method;
* :func:`use_backend` ``("numpy")`` or ``SPARSEDYN_BACKEND=numpy``: the NumPy
  function (the reference);
* a :class:`~sparsedyn.Model` whose native kernel is ready: the native kernel (one
  dictionary lookup); traced (object) arrays, foreign array types and anything the
  native kernel does not take fall back to the NumPy function there;
* otherwise the compiler's hook decides (build, load from the cache, or answer
  on NumPy while a build runs); without the compiler, the NumPy function.

This module knows model sizes and nothing about algorithms, tracing or
compilation.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import os
import re
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from ._checks import BatchMemoryError as _BatchMemoryError
from ._checks import batch_memory as _batch_memory, finite_result as _finite


class Model:
    """Placeholder until the model layer registers :class:`sparsedyn.Model` (:func:`set_model_type`):
    this layer sits below the model and does not import it."""


def set_model_type(cls):
    """Register the model class (called once by :mod:`sparsedyn.model`): a plain call on an
    instance of it may go native, and a function taking ``model`` first refuses anything else."""
    global Model
    Model = cls

__all__ = ["kernel", "Kernel", "Owned", "REGISTRY", "registered", "use_backend", "set_native", "native_calls",
           "set_model_type",
           "BACKENDS", "METHODS", "model_method", "fingerprint", "feed", "Unkeyable", "package_sources"]

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


def set_native(hook):
    """Register the native road: ``hook(kernel, model, args, kwargs)`` answers a plain call on a
    :class:`~sparsedyn.Model` that has no ready native kernel yet (the compiler calls this when
    it is imported)."""
    global _native
    _native = hook


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
        return False

    def __repr__(self):
        return f"use_backend({self.name!r}, deterministic={self.deterministic})"

#: name -> :class:`Kernel`, in registration order.
REGISTRY: dict = {}

_SIZES = {
    "nq": lambda m: m.nq,
    "nv": lambda m: m.nv,
    "nb": lambda m: m.nbodies,
    "nf": lambda m: len(m.frames),
}


@dataclass(frozen=True)
class Kernel:
    """A registered public numeric function and the shapes of its arrays (one state)."""

    name: str
    fn: Callable
    inputs: dict
    outputs: dict
    optional: dict = field(default_factory=dict)
    static: tuple = ()
    program: Callable = None
    result: Callable = None         # a named tuple type the outputs are handed back in (else a plain tuple)
    #: outputs that only carry run-time check quantities (not part of the result's flops)
    checks: tuple = ()
    #: configuration inputs whose quaternions need not be of unit norm (not checked so)
    unnormalized: tuple = ()
    #: static arguments that are sequences, taken as tuples (a list is the tuple of its items)
    sequences: tuple = ()

    def _dim(self, model, d, static):
        if isinstance(d, int):
            return d
        if isinstance(d, str):
            return int(_SIZES[d](model))
        return int(d(model, **static))

    def shapes(self, model, **static) -> dict:
        """``name -> shape`` (tuple of ints) of every input, optional input and output, for one state
        of ``model`` with the given static arguments."""
        table = {}
        for group in (self.inputs, self.optional, self.outputs):
            for n, shape in group.items():
                table[n] = tuple(self._dim(model, d, static) for d in shape)
        return table

    @property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.fn)

    def variant(self, static=None, optional=()) -> "Kernel":
        """This kernel with the static arguments ``static`` (a dict) fixed and the optional arrays
        ``optional`` (names) as inputs, the others folded (``model.gravity``, no external force):
        a kernel of state arrays alone, named by a C identifier that is distinct for distinct
        choices (``rnea``; ``rnea_ext`` with every optional array; ``frame_jacobian_s<hash>``)."""
        static = dict(static or {})
        optional = tuple(n for n in self.optional if n in optional)
        cname = re.sub(r"[^a-z0-9_]", "_", self.name.lower())
        if cname != self.name:                  # a C identifier, distinct for distinct Python names
            cname += "_" + hashlib.sha256(self.name.encode()).hexdigest()[:6]
        if optional:
            cname += "_ext" if optional == tuple(self.optional) else "_" + "_".join(optional)
        if static:
            cname += "_s" + hashlib.sha256(repr(sorted(static.items())).encode()).hexdigest()[:10]
        if not static and not optional and cname == self.name:
            return self

        def bind(d):
            return d if not callable(d) else (lambda model: d(model, **static))
        inputs = {n: tuple(map(bind, s)) for n, s in list(self.inputs.items()) + [(n, self.optional[n])
                                                                                for n in optional]}
        outputs = {n: tuple(map(bind, s)) for n, s in self.outputs.items()}
        fn = self.fn
        program = self.program
        return Kernel(cname, lambda model, **arrays: fn(model, **arrays, **static), inputs, outputs,
                      program=None if program is None else (lambda model, s, o: program(model, static, optional)),
                      checks=self.checks, unnormalized=self.unnormalized)

    @classmethod
    def of_arrays(cls, name, inputs, outputs, fn, checks=()) -> "Kernel":
        """The kernel of an owner object: ``fn(*arrays)`` of the state arrays ``inputs`` returns one
        array per output (broadcast to its shape).  ``inputs``, ``outputs``: sequences of
        ``(name, shape)`` (one state, ints); ``name``: the C identifier (``[a-z][a-z0-9_]*``);
        ``checks``: names of outputs that only carry run-time check quantities."""
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"kernel name must match [a-z][a-z0-9_]*, got {name!r}")
        table = {}
        for n, shape in list(inputs) + list(outputs):
            if n in table:
                raise ValueError(f"kernel {name!r}: argument name {n!r} used twice")
            table[n] = tuple(int(d) for d in shape)
        unknown = set(checks) - {n for n, _ in outputs}
        if unknown:
            raise ValueError(f"kernel {name!r}: checks {sorted(unknown)} are not outputs")
        names = [n for n, _ in inputs]
        return cls(name, lambda model, **arrays: fn(*[arrays[n] for n in names]),
                   {n: table[n] for n in names}, {n: table[n] for n, _ in outputs}, checks=tuple(checks))


#: The state arrays a plain function ``fn(model, q, v, ...)`` of kernels may take after the model,
#: with their shapes for one state: what ``sparsedyn.compile(model, kernels=[fn])`` and the CasADi
#: and JAX bridges accept (other values are constants of the function: a closure, a partial).
VOCABULARY = {"q": ("nq",), "q0": ("nq",), "q1": ("nq",), "v": ("nv",), "a": ("nv",), "tau": ("nv",),
              "dq": ("nv",), "qdd": ("nv",), "f_ext": ("nb", 6), "gravity": (3,)}


def state_arguments(fn, model, where="user kernel") -> list:
    """``[(name, shape)]`` of the arguments after the model of a plain function ``fn(model, q, v, ...)``
    (shapes for one state of ``model``, from :data:`VOCABULARY`); a :class:`TypeError` starting with
    ``where`` names the first argument that is not a state array of the vocabulary."""
    name = getattr(fn, "__name__", None)
    out = []
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name not in VOCABULARY:
            raise TypeError(f"{where}: argument {p.name!r} of {name!r} is not a state array of the vocabulary "
                            f"({', '.join(VOCABULARY)}); other values must be constants of the function "
                            f"(a closure or functools.partial)")
        out.append((p.name, tuple(d if isinstance(d, int) else int(_SIZES[d](model)) for d in VOCABULARY[p.name])))
    return out


class Owned(NamedTuple):
    """What an owner's ``__sparsedyn_kernels__()`` returns (see the module docstring).

    ``model``: the model the kernels are built for; ``kernels``: a tuple of :class:`Kernel`
    (each of state arrays alone, e.g. :meth:`Kernel.of_arrays`), with distinct names;
    ``fingerprint``: a string that identifies everything the kernels compute beyond the model
    (two owners with one fingerprint must trace to the same programs), or ``None`` when nothing
    identifies them safely (then they are traced on every compile; the library, keyed by the
    programs, is still reused); ``owner``: the object the kernels belong to when it is not the one
    asked (a sparse problem hands over the kernels of its analysed structure): the compiled kernels
    are wrapped by *its* ``__sparsedyn_compiled__``."""

    model: Any
    kernels: tuple
    fingerprint: str | None = None
    owner: Any = None


def kernel(*, inputs, outputs, optional=None, static=(), name=None, program=None, result=None, unnormalized=(),
           sequences=()):
    """Declare a public numeric function as a kernel (see the module docstring).

    ``program``: for a function that is not itself traced but derived from the
    traced program of another kernel (a derivative), a callable
    ``(model, static, optional) -> Program`` that builds its program; by default
    the function is traced by calling it on object arrays of symbols.

    The public function returned is ``fn`` behind a thin dispatch (see the
    module docstring): on a model, the native kernel when it is ready; when its
    first argument is not a Model but an object with a
    ``__sparsedyn_kernel__(name, args, kwargs)`` method (a compiled model), the
    call goes to that method, so ``f(compiled, ...)`` runs the compiled form of
    ``f``; any other first argument is a :class:`TypeError` (the model comes
    first).  The declaration is attached as ``__kernel__`` and entered in
    :data:`REGISTRY` under ``name`` (default: the function's name);
    ``Kernel.fn`` is the undecorated function (what tracing calls).

    ``result``: for a function returning a named tuple, its type; a compiled model's
    outputs (a plain tuple) are handed back as ``result(*outputs)``.

    ``unnormalized``: names of configuration inputs whose quaternions may have any norm
    (the compiled kernels then check them finite only, as the function does).

    ``sequences``: names of static arguments that are sequences; the public function hands
    a list (or another iterator) on as a tuple (``as_tuple``), on every road.
    """
    def register(fn):
        params = inspect.signature(fn).parameters
        declared = list(inputs) + list(optional or {}) + list(static)
        missing = [n for n in declared if n not in params]
        if missing:
            raise TypeError(f"kernel {fn.__name__}: declared arguments {missing} are not parameters "
                            f"of {fn.__name__}{inspect.signature(fn)}")
        if not set(unnormalized) <= set(inputs):
            raise TypeError(f"kernel {fn.__name__}: unnormalized {sorted(set(unnormalized) - set(inputs))} "
                            f"are not inputs")
        if not set(sequences) <= set(static):
            raise TypeError(f"kernel {fn.__name__}: sequences {sorted(set(sequences) - set(static))} "
                            f"are not static arguments")
        k = Kernel(name or fn.__name__, fn, dict(inputs), dict(outputs), dict(optional or {}), tuple(static), program,
                   result, unnormalized=tuple(unnormalized), sequences=tuple(sequences))
        kname = k.name

        public = _public(k)
        public.__kernel__ = k
        REGISTRY[kname] = k
        return public

    return register


def signature_source(params, ns):
    """The source of a generated function's parameter list with the parameters ``params``
    (:class:`inspect.Parameter`, neither ``*args`` nor ``**kwargs``): ``(texts, keyword_only,
    defaults)``, ``texts`` one string a parameter (``"*"`` before the first keyword-only one),
    ``keyword_only`` whether there is one, ``defaults`` ``{name: "_d<j>"}`` of the parameters with a
    default, which is entered in the namespace ``ns`` under that name."""
    texts, keyword_only, defaults = [], False, {}
    for j, p in enumerate(params):
        if p.kind == p.KEYWORD_ONLY and not keyword_only:
            texts.append("*")
            keyword_only = True
        if p.default is p.empty:
            texts.append(p.name)
        else:
            defaults[p.name] = f"_d{j}"
            ns[f"_d{j}"] = p.default
            texts.append(f"{p.name}=_d{j}")
    return texts, keyword_only, defaults


def as_tuple(x):
    """A sequence static argument as a tuple: a list or an iterator becomes the tuple of its items
    (the same key of a compiled kernel as that tuple); anything else (a tuple, one item) is left as it is
    (the function checks it)."""
    return tuple(x) if isinstance(x, (list, Iterator)) else x


def sequence_source(names) -> list:
    """Source lines of a generated function that take the sequence static arguments ``names`` as
    tuples (``as_tuple``, in the namespace as ``_as_tuple``): one type test on a tuple."""
    return [f"    if type({n}) is not tuple:\n        {n} = _as_tuple({n})" for n in names]


def _public(k):
    """The public function of kernel ``k``: ``k.fn``'s signature (generated, so that a call costs
    one Python frame and no argument packing) in front of the dispatch.  A model whose native
    callable for ``k`` is ready (in :func:`native_calls`' table) and a call without optional arrays
    or other non-default extras go straight to it, the state arrays and the static arguments by
    position; every other call goes through :func:`_dispatch`."""
    fn = k.fn
    params = list(inspect.signature(fn).parameters.values())
    if not params or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in params):
        raise TypeError(f"kernel {fn.__name__}: a kernel takes the model first and named arguments "
                        f"(no *args, **kwargs or positional-only arguments)")
    ns = {"_k": k, "_dispatch": _dispatch, "_as_tuple": as_tuple, "_table": _calls, "_id": id}
    native = "f({fast})" if k.result is None else "_k.result(*f({fast}))"
    sig, _, default = signature_source(params, ns)
    defaults_ok = [f"{n} is {d}" for n, d in default.items()
                   if n != params[0].name and n not in k.inputs and n not in k.static]
    names = [p.name for p in params[1:]]
    nin, nst = len(k.inputs), len(k.static)
    kinds = {p.name: p.kind for p in params}
    # the statics by position where they directly follow the inputs and may be given so, else by keyword
    positional = names[:nin] == list(k.inputs) and names[nin:nin + nst] == list(k.static)
    by_position = [positional and kinds[s] == inspect.Parameter.POSITIONAL_OR_KEYWORD for s in k.static]
    by_position = [all(by_position[:j + 1]) for j in range(nst)]
    fast = ", ".join(list(k.inputs) + [s if pos else f"{s}={s}" for s, pos in zip(k.static, by_position)])
    cond = " and ".join(["f is not None"] + defaults_ok)
    rest = [n for n in names if n not in k.inputs]
    m = params[0].name
    src = "\n".join([
        f"def {fn.__name__}({', '.join(sig)}):",
        *sequence_source(k.sequences),
        f"    if type({m}) is Model and not _numpy:",
        "        try:",                       # subscripts, not .get(): one call fewer (~40 ns)
        f"            f = _table[_id({m})][{k.name!r}]",
        "        except KeyError:",
        "            f = None",
        f"        if {cond}:",
        f"            return {native.format(fast=fast)}",
        f"    return _dispatch(_k, {m}, ({''.join(n + ', ' for n in k.inputs)}), "
        f"{{{', '.join(f'{n!r}: {n}' for n in rest)}}})"])
    factory = f"def _factory({', '.join(ns)}):\n" + "\n".join("    " + line for line in src.split("\n")) \
        + f"\n    return {fn.__name__}"
    local = {}
    exec(factory, globals(), local)         # noqa: S102 - source generated from the kernel's signature
    public = local["_factory"](**ns)
    functools.update_wrapper(public, fn)
    return public


def _dispatch(k, model, args, kwargs):
    """The plain call's road when no ready native kernel answered (see the module docstring)."""
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


#: The public functions (``name -> function``) that take a model first and are not kernels
#: themselves but run kernels (a time step, a rollout).  A compiled model has them as methods,
#: ``k.f(...)`` being ``f(k, ...)`` (see :func:`model_method`).
METHODS: dict = {}


def model_method(fn):
    """Declare ``fn(model, ...)`` (a function that runs kernels on ``model``) a method of compiled
    models: ``sd.compile(model).f(...)`` is ``f(compiled, ...)``.  Returns ``fn`` unchanged."""
    METHODS[fn.__name__] = fn
    return fn


def registered(fn):
    """The :class:`Kernel` declaration of ``fn`` (a public function), or ``None``."""
    return getattr(fn, "__kernel__", None)


# --- fingerprints: the one scheme of the build cache's keys -------------------------------------

class Unkeyable(Exception):
    """A value that no fingerprint can identify (a function, an object of an unknown kind)."""


def feed(h, x, strict=False):
    """Feed a canonical, process-independent encoding of ``x`` to the hash ``h`` (``hashlib``): arrays
    (dtype, shape, bytes; object arrays element by element), floats (hex), ints, strings, ``None``,
    tuples and lists, dicts (by sorted key), dataclasses and plain objects (type name and fields).
    A model's fingerprint (the compiler's key) and an owner's (:class:`Owned`) are made with it.
    ``strict``: a function or any other callable, or a value of another kind, raises
    :class:`Unkeyable` (an owner's fingerprint must identify everything); otherwise its ``repr``."""
    import numpy as np
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            for e in x.reshape(-1):
                feed(h, e, strict)
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
            feed(h, e, strict)
        h.update(b")")
    elif isinstance(x, dict):
        feed(h, sorted(x.items(), key=lambda kv: repr(kv[0])), strict)
    elif strict and (callable(x) or isinstance(x, type)):
        raise Unkeyable(f"{type(x).__name__} {getattr(x, '__qualname__', '')}".strip())
    elif hasattr(x, "__dataclass_fields__"):
        h.update(type(x).__name__.encode())
        for f in x.__dataclass_fields__:
            feed(h, getattr(x, f), strict)
    elif hasattr(x, "__dict__") or hasattr(x, "__slots__"):
        h.update(type(x).__name__.encode())
        names = sorted(vars(x)) if hasattr(x, "__dict__") else list(x.__slots__)
        for f in names:
            feed(h, getattr(x, f, None), strict)
    elif strict:
        raise Unkeyable(type(x).__name__)
    else:
        h.update(repr(x).encode())


_sources = None


def package_sources() -> str:
    """SHA-256 of every Python source of the package and of the C headers it emits code with, for
    an owner's fingerprint (its kernels may run any of them); computed once per process."""
    global _sources
    if _sources is None:
        from pathlib import Path
        root = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")) + sorted(root.rglob("*.h")):
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
        _sources = h.hexdigest()
    return _sources


def fingerprint(*values) -> str:
    """SHA-256 of ``values`` by :func:`feed` (strict): for :class:`Owned`'s ``fingerprint``; raises
    :class:`Unkeyable` when a value cannot be identified (then an owner hands ``None``)."""
    h = hashlib.sha256()
    feed(h, values, strict=True)
    return h.hexdigest()
