"""The compiled model: ``sparsedyn.compile(model)`` (:class:`CompiledModel`).

Every function of the kernel registry is a method of the compiled model with the NumPy
function's signature plus ``out=``; one state goes through the C fast-call
extension (:mod:`.fastcall`) without a Python frame in between, anything else through
:meth:`CompiledModel._call`, which checks arguments as the NumPy functions do.  User kernels
(:meth:`CompiledModel.add_kernel`) are traced and built the same way.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
import types

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import METHODS, REGISTRY, Kernel, as_tuple, state_arguments
from ..kernels.arguments import Parameters
from ..symbolic.trace import trace_function
from .runtime import (KernelInfo, KernelSet, _fast_module, _input_checks, _out_arrays, _unit_configuration,
                      _progress_fn, find_compiler_or_warn, trace)
from .trace import variant

__all__ = ["CompiledModel"]



class _Method:
    """How one function runs on a compiled model: its declaration (inputs, optional arrays, static
    arguments, outputs), the NumPy function (reference and fallback), and the fast single-state
    callables already built, by static arguments."""

    def __init__(self, name, fn, inputs, optional, static, outputs, user=False, sequences=()):
        self.name, self.fn = name, fn
        self.inputs, self.optional, self.static, self.outputs = tuple(inputs), tuple(optional), tuple(static), \
            tuple(outputs)
        self.sequences = tuple(sequences)       # static arguments taken as tuples (kernels.as_tuple)
        self.user = user
        self.fast = {}          # static arguments (a tuple) -> the fast single-state callable, or None


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
        if name in METHODS:
            m = self.__dict__[name] = types.MethodType(METHODS[name], self)
            return m
        return getattr(self.__dict__["model"], name)

    def __sparsedyn_kernel__(self, name, args, kwargs):
        f = self.__dict__.get(name)
        return (f if f is not None else getattr(self, name))(*args, **kwargs)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(REGISTRY) | set(METHODS))

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
            m = self._methods[name] = _Method(name, k.fn, k.inputs, k.optional, k.static, k.outputs,
                                              sequences=k.sequences)
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
            res = _checks.finite_result(m.name, m.fn(model, **kw), self._core_ndims(m, static))
            if out is None:
                return res
            many = isinstance(res, tuple)
            outs = _out_arrays(out, m.outputs, [r.shape for r in (res if many else (res,))])
            for o, r in zip(outs, res if many else (res,)):
                o[...] = r
            return tuple(outs) if many else outs[0]
        spec = self._user_specs[name] if m.user else self._variant(name, static, given)
        shapes = self._shapes(spec)
        named = list(inputs.items()) + [(n, optional[n]) for n in given]
        # Conversions and shapes now; the values (finite, unit quaternions) are checked by the
        # vectorised batch kernel as it reads them, or by ``recheck`` before the other paths.  The
        # compiled checks know unit quaternions only: a kernel taking others is checked here.
        arrays = [_checked(model, n, x, shapes[n], bool(spec.unnormalized), spec) for n, x in named]
        batch = _checks.batch_shape(**{n: (x, len(shapes[n])) for (n, _), x in zip(named, arrays)})
        if batch:                                    # before the outputs are allocated
            _checks.batch_memory(m.name, math.prod(batch), sum(math.prod(shapes[n]) for n in spec.outputs))

        def recheck():
            for (n, _), x in zip(named, arrays):
                _checked(model, n, x, shapes[n], spec=spec)
        res = _checks.finite_result(m.name, self._run(spec.name, spec.name, arrays, out, recheck),
                                    tuple(len(shapes[n]) for n in spec.outputs))
        if not given and out is None:
            self._install_fast(m, spec, static)
        return res

    def _core_ndims(self, m, static):
        """Per output of method ``m``: the number of axes of one state."""
        k = REGISTRY.get(m.name)
        if k is None or m.user:
            return ()
        try:
            shapes = k.shapes(self.model, **static)
        except Exception:                           # a static argument the NumPy function will refuse
            return ()
        return tuple(len(shapes[n]) for n in k.outputs)

    def _empty(self, m, inputs, optional, given, static, out):
        """The results of a model without moving bodies when all are empty (checked inputs, batch
        shape kept); ``None`` when some result is not empty (a frame on the world)."""
        k = REGISTRY[m.name]
        shapes = k.shapes(self.model, **static)
        if any(int(np.prod(shapes[n])) for n in m.outputs):
            return None
        xs = {n: _checked(self.model, n, x, shapes[n], spec=k) for n, x in inputs.items()}
        xs.update({n: _checked(self.model, n, optional[n], shapes[n], spec=k) for n in given})
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
            k = fast.Kernel(single.addr[spec.name], tuple(tuple(shapes[n]) for n in spec.inputs),
                            tuple(tuple(shapes[n]) for n in spec.outputs), fallback,
                            (_checks.QUAT_TOL, groups) if groups else None)
            k.entry = single.addr[spec.name]         # (its one-state entry, for routines that call it in theirs)
            m.fast[key] = k
        except ValueError:                           # more arrays than the fast path passes: the general path
            m.fast[key] = None

    # --- user kernels -----------------------------------------------------------------------
    def add_kernel(self, fn, name=None):
        """Compile ``fn(model, q, ...)``, a function written with sparsedyn's functions and NumPy, as
        method ``name`` (default ``fn.__name__``) of this compiled model; returns the method.

        Its arguments after the model are state arrays named in the library's vocabulary
        (``q``, ``q0``, ``q1``: (nq,); ``v``, ``a``, ``tau``, ``dq``, ``qdd``: (nv,); ``f_ext``:
        (NB, 6); ``gravity``: (3,)); its results (one array or a tuple) get their shapes from the
        trace.  The method runs one state or a batch, like the library's own.  A function that
        branches on a value or calls a routine that cannot see traced values (``np.linalg``...)
        raises :class:`~sparsedyn.symbolic.trace.UntraceableError`.
        """
        name = name or getattr(fn, "__name__", None)
        model = self.model
        table = dict(state_arguments(fn, model, "user kernel"))
        inputs = list(table)
        if not name or not name.isidentifier() or name in REGISTRY or name.startswith("__") \
                or hasattr(type(self), name):
            raise ValueError(f"user kernel {name!r}: give it (name=) an identifier that is not the name of a "
                             f"library function or of an attribute of CompiledModel")
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


def _checked(model, name, x, shape, check_values=True, spec=None):
    """``x`` checked and converted as the NumPy functions do (``_checks``), as a float64 array;
    ``check_values=False``: conversion and shape only; ``spec``: the kernel ``x`` is an input of
    (a configuration it declares ``unnormalized`` is checked as a vector)."""
    shape = tuple(shape)
    if len(shape) == 1 and _unit_configuration(None, name, shape, model):
        x = _checks.configuration(model, x, name, check_values, _unit_configuration(spec, name, shape, model))
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
    """The method of ``fn`` (a function ``fn(model, ...)``) on ``cm``: ``fn``'s signature without
    ``model``, plus ``out=``.  One state without optional arrays goes straight to the fast C
    callable of its static arguments (``m.fast``); the rest goes through :meth:`CompiledModel._call`."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise TypeError(f"{m.name}: a kernel cannot take *args or **kwargs")
    declared = set(m.inputs) | set(m.optional) | set(m.static)
    # the other arguments, with their defaults: a call that changes one takes the general path
    extra = [(p.name, p.default) for p in params if p.name not in declared]
    empty = inspect.Parameter.empty
    if "out" not in {p.name for p in params}:
        params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    arguments = Parameters(f"CompiledModel.{m.name}", params)
    names = [p.name for p in params]
    nin, nst = len(m.inputs), len(m.static)
    # a call of the inputs and the static arguments, all by position (the common one), needs no binding
    positional = names[:nin + nst] == list(m.inputs) + list(m.static) and not m.sequences \
        and all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params[:nin + nst])

    def method(*args, **kwargs):
        if positional and not kwargs and len(args) == nin + nst:
            f = _fast_callable(m, args[nin:])
            if f is not None:
                return f(*args[:nin])
        values = arguments.bind(args, kwargs)
        for n in m.sequences:
            if type(values[n]) is not tuple:
                values[n] = as_tuple(values[n])
        out = values["out"]
        if out is None and all(values[n] is None for n in m.optional) \
                and all(values[n] is d for n, d in extra if d is not empty):
            f = _fast_callable(m, tuple(values[n] for n in m.static))
            if f is not None:
                return f(*[values[n] for n in m.inputs])
        return cm._call(m.name, {n: values[n] for n in m.inputs}, {n: values[n] for n in m.optional},
                        {n: values[n] for n in m.static},
                        {n: (values[n], None if d is empty else d) for n, d in extra}, out)

    method.__name__, method.__doc__ = m.name, fn.__doc__
    method.__qualname__ = f"CompiledModel.{m.name}"
    method.__module__ = getattr(fn, "__module__", __name__)
    method.__signature__ = inspect.Signature(params)
    return _native_method(cm, m, method, params)


def _fast_callable(m, key):
    """The fast single-state callable of method ``m`` for the static arguments ``key`` (a tuple),
    or ``None`` (not built yet, none, or an unhashable static argument)."""
    try:
        return m.fast.get(key)
    except TypeError:
        return None


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
    k = CompiledModel(model, find_compiler_or_warn(), _progress_fn(None, model), vectorize, tuple(kernels))
    k.threads = threads
    return k
