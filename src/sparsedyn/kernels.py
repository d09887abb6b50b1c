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
* ``outputs``: the outputs in return order.  A function returning one array
  has one output; several outputs are returned as a tuple.

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
(the owner's own wrapper around the compiled kernels).

This module knows model sizes and nothing about algorithms, tracing or
compilation.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

__all__ = ["kernel", "Kernel", "Owned", "REGISTRY", "registered"]

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
    #: outputs that only carry run-time check quantities (not part of the result's flops)
    checks: tuple = ()

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
                      checks=self.checks)

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


class Owned(NamedTuple):
    """What an owner's ``__sparsedyn_kernels__()`` returns (see the module docstring).

    ``model``: the model the kernels are built for; ``kernels``: a tuple of :class:`Kernel`
    (each of state arrays alone, e.g. :meth:`Kernel.of_arrays`), with distinct names;
    ``fingerprint``: a string that identifies everything the kernels compute beyond the model
    (two owners with one fingerprint must trace to the same programs), or ``None`` when nothing
    identifies them safely (then they are traced on every compile; the library, keyed by the
    programs, is still reused)."""

    model: Any
    kernels: tuple
    fingerprint: str | None = None


def kernel(*, inputs, outputs, optional=None, static=(), name=None, program=None):
    """Declare a public numeric function as a kernel (see the module docstring).

    ``program``: for a function that is not itself traced but derived from the
    traced program of another kernel (a derivative), a callable
    ``(model, static, optional) -> Program`` that builds its program; by default
    the function is traced by calling it on object arrays of symbols.

    The public function returned is ``fn`` behind a thin dispatch: when its
    first argument is not a Model but an object with a
    ``__sparsedyn_kernel__(name, args, kwargs)`` method (a compiled model), the
    call goes to that method, so ``f(compiled, ...)`` runs the compiled form of
    ``f``.  The declaration is attached as ``__kernel__`` and entered in
    :data:`REGISTRY` under ``name`` (default: the function's name);
    ``Kernel.fn`` is the undecorated function (what tracing calls).
    """
    def register(fn):
        params = inspect.signature(fn).parameters
        declared = list(inputs) + list(optional or {}) + list(static)
        missing = [n for n in declared if n not in params]
        if missing:
            raise TypeError(f"kernel {fn.__name__}: declared arguments {missing} are not parameters "
                            f"of {fn.__name__}{inspect.signature(fn)}")
        k = Kernel(name or fn.__name__, fn, dict(inputs), dict(outputs), dict(optional or {}), tuple(static), program)
        kname = k.name

        @functools.wraps(fn)
        def public(model, *args, **kwargs):
            # Duck-typed dispatch: this layer knows nothing of how a compiled model runs a kernel.
            dispatch = getattr(type(model), "__sparsedyn_kernel__", None)
            if dispatch is not None:
                return dispatch(model, kname, args, kwargs)
            return fn(model, *args, **kwargs)

        public.__kernel__ = k
        REGISTRY[kname] = k
        return public

    return register


def registered(fn):
    """The :class:`Kernel` declaration of ``fn`` (a public function), or ``None``."""
    return getattr(fn, "__kernel__", None)
