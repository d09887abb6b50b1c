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

Which road a plain call takes is :mod:`sparsedyn.kernels.dispatch`'s; the build cache's keys are
:mod:`sparsedyn.kernels.fingerprints`'s.  This package knows model sizes and nothing about
algorithms, tracing or compilation.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from .dispatch import (BACKENDS, as_tuple, c_library, c_routine, compile_owner, native_calls, native_function, public_function,
                       set_c_library,
                       set_compiler, set_front, set_model_type, set_native, use_backend)
from .fingerprints import Unkeyable, feed, fingerprint, package_sources

__all__ = ["kernel", "Kernel", "Owned", "REGISTRY", "registered", "use_backend", "set_native", "native_calls",
           "native_function", "set_compiler", "set_front", "compile_owner", "c_library", "c_routine", "set_c_library",
           "set_model_type", "as_tuple",
           "BACKENDS", "METHODS", "model_method", "fingerprint", "feed", "Unkeyable", "package_sources"]

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

    The public function returned is ``fn`` behind a thin dispatch (see
    :mod:`sparsedyn.kernels.dispatch`): on a model, the native kernel when it is ready; when its
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

        public = public_function(k)
        public.__kernel__ = k
        REGISTRY[kname] = k
        return public

    return register


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
