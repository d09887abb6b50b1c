"""Compiled kernels of an owner object: ``sparsedyn.compile(owner)`` for anything with
``__sparsedyn_kernels__()`` (see :mod:`sparsedyn.kernels`, *Owners*).

The compiler knows nothing of the owner: it builds the kernels it is handed (one library, cached
under the model fingerprint plus the owner's fingerprint) and exposes each as a method that runs
one state or a batch, with ``out=``.  Without a C compiler the methods call the kernels' NumPy
functions.  ``compile`` builds both the single-state and the vectorised batch form of the kernels
handed over (so no later call builds behind the user's back).  An owner whose kernels depend on
choices made at run time (a partition of the coordinates, a step size) hands them later, one at a
time, to :meth:`CompiledKernels.add`.  An owner's wrapper pickles as "compile the owner again"
(:meth:`CompiledKernels.compile_again`).

What an owner's wrapper may use besides: :meth:`CompiledKernels.fast`, a C fast path for one
clean state (every input finite, unit quaternions in the configuration inputs, float64 arrays of
the one-state shapes; anything else is declined with ``None``), and the decoding of *check*
outputs (:meth:`CompiledKernels.failed`, :meth:`CompiledKernels.passed`): a state fails when one
of its check values is not positive (NaN included) or one of its other outputs is not finite.
"""

from __future__ import annotations

import numpy as np

from ..kernels import Kernel
from ..symbolic.trace import trace_kernel
from .compiled_model import CompiledModel, _checked
from .runtime import KernelInfo, KernelSet, _fast_module, _input_checks, _progress_fn, find_compiler_or_warn, trace

__all__ = ["CompiledKernels", "compile_owned"]

_min = np.minimum.reduce


def _decline(*args, **kwargs):
    """The fast path's fallback: ``None`` tells the caller to take its checked path."""
    return None


class CompiledKernels(KernelSet):
    """The compiled kernels of ``owner``: method ``k.<kernel name>(*arrays, out=None)`` per kernel
    (arrays in the kernel's input order, leading batch axes broadcast; one array per output, a
    tuple for several), ``k.run(name, *arrays, out=None)`` the same by name, ``k.flops(name)``
    from the IR.  Attributes: ``owner``, ``model``, ``names`` (the kernels' names), ``compiled``
    (False on the NumPy fallback), ``kernels`` (``{name: KernelInfo}`` of the kernels built).

    ``vectorize``: ``None`` (default) or ``True`` build the vectorised batch library with the
    single-state one, ``False`` never (batches loop over the scalar code, in C, on all cores).
    ``fastcall=False``: no C fast path for one-state calls (for a caller that calls the entry points
    without Python, such as XLA: its extension module is not built)."""

    def __init__(self, owner, owned, compiler, progress=None, vectorize=None, fastcall=True):
        super().__init__(owned.model, compiler, progress, vectorize,
                         owner=False if owned.fingerprint is None else "owner " + owned.fingerprint)
        self.owner = owner
        self._fingerprint = owned.fingerprint
        self._added = {}
        self._model_compiled = None
        ks = tuple(owned.kernels)
        self.names = tuple(k.name for k in ks)
        if len(set(self.names)) != len(ks):
            raise ValueError(f"{type(owner).__name__}.__sparsedyn_kernels__: kernel names repeat: {self.names}")
        self._specs.update(zip(self.names, ks))
        self._fast, self._checkpos = {}, {}
        for k in ks:
            outs = list(k.outputs)
            self._checkpos[k.name] = ([i for i, n in enumerate(outs) if n in k.checks],
                                      [i for i, n in enumerate(outs) if n not in k.checks])
        single = self._start(batch=vectorize is not False) if ks else None
        if single is not None:
            self.lanes = single.lanes
            fast = _fast_module(self._compiler) if fastcall else None
            if fast is not None:
                for k in ks:
                    self._fast[k.name] = self._fast_kernel_checked(fast, single, k)
            self.fastcall = any(f is not None for f in self._fast.values())

    def _start(self, batch=False):
        if self.compiled and batch and self.vectorize is None:
            self.vectorize = True               # sd.compile builds everything the object will call
        return super()._start()

    def _group_specs(self, group):
        if group != "main":                 # a kernel handed later (add): a library of its own
            return [self._specs[group]]
        return [self._specs[n] for n in self.names]

    def _owner_of(self, group):
        if group == "main" or self._fingerprint is None:
            return self._owner
        return "owner " + self._fingerprint + " kernel " + group

    def compile_again(self):
        """``(callable, args)`` for the ``__reduce__`` of what ``sparsedyn.compile(owner)`` returned:
        unpickled, it is ``sparsedyn.compile(owner)`` again (the owner pickled, its libraries loaded
        from the build cache in the receiving process)."""
        return _compile_again, (self.owner, self.vectorize)

    def __reduce__(self):
        # unpickled: the owner's kernels compiled again (libraries from the build cache), not wrapped
        return _kernels_again, (self.owner, self.vectorize)

    @property
    def compiled_model(self):
        """The compiled model (:class:`~sparsedyn.codegen.compiled_model.CompiledModel`) of ``model``,
        with this object's compiler, progress display and ``vectorize`` (made on first use)."""
        if self._model_compiled is None:
            self._model_compiled = CompiledModel(self.model, self._compiler, self._progress, self.vectorize)
        return self._model_compiled

    def add(self, kernel: Kernel):
        """Trace ``kernel`` (a :class:`~sparsedyn.kernels.Kernel` of state arrays, e.g.
        :meth:`~sparsedyn.kernels.Kernel.of_arrays`) now and build it on its first call, as a library of
        its own (with the owner's fingerprint, built now, or loaded from the build cache without
        tracing: its key is the fingerprint and the kernel's name, which must then name everything the
        kernel computes beyond the owner); returns ``f(*arrays, out=None)``, which checks its inputs as the NumPy functions do
        (an input named ``q...`` of size ``nq`` is a configuration, with unit quaternions) and runs one
        state or a batch.  Raises :class:`~sparsedyn.symbolic.trace.UntraceableError` when the kernel
        cannot be traced.  The same name twice returns the first kernel's function."""
        name = kernel.name
        f = self._added.get(name)
        if f is not None:
            return f
        if name in self.names:
            raise ValueError(f"{type(self.owner).__name__}: kernel {name!r} was handed already")
        if not self.compiled:
            f = _NumpyKernel(self.model, kernel)
        elif self._fingerprint is None:
            prog = trace_kernel(kernel, self.model, explain=True)   # UntraceableError now, not at the first call
            spec = Kernel(name, kernel.fn, kernel.inputs, kernel.outputs, checks=kernel.checks,
                          program=lambda model, static, optional, p=prog: p)
            self._specs[name] = spec
            f = _AddedKernel(self, spec)
        else:
            # Keyed by the owner's fingerprint and the kernel's name: built, or loaded from the build
            # cache without tracing, now (so an UntraceableError comes now, not at the first call).
            spec = Kernel(name, kernel.fn, kernel.inputs, kernel.outputs, checks=kernel.checks,
                          program=lambda model, static, optional: trace_kernel(kernel, model, explain=True))
            self._specs[name] = spec
            self._library(name, "single")
            f = _AddedKernel(self, spec)
        self._added[name] = f
        return f

    def _fast_kernel_checked(self, fast, single, spec):
        shapes = spec.shapes(self.model)
        tol, groups = _input_checks(self.model, spec)
        # a hair tighter than the NumPy check, so a quaternion accepted here is accepted there whatever
        # the rounding of the two sums
        quats = (tol * (1 - 1e-6), groups) if groups else None
        try:
            return fast.Kernel(single.addr[spec.name], tuple(tuple(shapes[n]) for n in spec.inputs),
                               tuple(tuple(shapes[n]) for n in spec.outputs), _decline, quats)
        except (TypeError, ValueError):                # more arguments or quaternions than it takes
            return None

    def fast(self, name):
        """A C callable for one state of kernel ``name`` (``None`` when there is none): it returns the
        outputs (a tuple) for float64 arrays of the one-state shapes whose values are finite and
        whose configuration quaternions have unit norm, and ``None`` for any other call."""
        f = self._fast.get(name)
        if f is None:
            return None
        if len(self._specs[name].outputs) == 1:
            return lambda *arrays: (lambda r: r if r is None else (r,))(f(*arrays))
        return f

    def passed(self, name, outs) -> bool:
        """Whether one state's outputs ``outs`` (a tuple, in the kernel's output order) pass: every
        check value positive (NaN is not) and every other output finite."""
        chk, res = self._checkpos[name]
        for i in chk:
            c = outs[i]
            if c.size and not _min(c, axis=None) > 0:
                return False
        return all(outs[i].dot(np.zeros(outs[i].shape[-1:])) == 0 for i in res)   # 0 x == 0 iff x finite

    def output_names(self, name) -> tuple:
        """The names of kernel ``name``'s outputs, in the order :meth:`run` returns them."""
        return tuple(self._specs[name].outputs)

    def failed(self, name, outs, batch):
        """``(batch)`` bool: the states whose outputs ``outs`` (a tuple, each ``batch + shape``) fail
        (see :meth:`passed`)."""
        chk, res = self._checkpos[name]
        N = int(np.prod(batch, dtype=np.int64))
        ok = np.ones(N, bool)
        with np.errstate(invalid="ignore", over="ignore"):
            for i in chk:
                c = outs[i].reshape(N, -1)
                if c.shape[1]:
                    ok &= c.min(-1) > 0                # NaN propagates through min (and is not > 0)
            for i in res:
                # one pass, no temporary: a row dotted with zeros is 0 exactly where it is finite (NaN where
                # it holds a NaN or an infinity), as in passed(); for a C-contiguous array that is BLAS's
                # row-by-row dot products on its threads (every term formed: no zero is skipped)
                r = outs[i].reshape(N, -1)
                if not r.shape[1]:
                    continue
                if r.flags.c_contiguous:
                    ok &= r.dot(np.zeros(r.shape[1])) == 0
                else:      # a row whose sum overflows fails too: it goes to the NumPy path (only time)
                    ok &= np.isfinite(r.sum(-1))
        return ~ok.reshape(batch)

    def run(self, name, *arrays, out=None, recheck=None):
        """Kernel ``name`` on ``arrays`` (one per input, float, batch axes broadcast).

        ``recheck``: for arrays whose values are not checked yet, a callable that checks them (raising
        the caller's errors): the vectorised batch checks every input finite and the configurations'
        quaternions of unit norm as it reads them and calls ``recheck`` only when one fails; a single
        state or a looped batch calls it first."""
        k = self._specs.get(name)
        if k is None:
            raise AttributeError(f"{type(self.owner).__name__} has no kernel {name!r}; kernels: {', '.join(self.names)}")
        if len(arrays) != len(k.inputs):
            raise TypeError(f"{name}: expected {len(k.inputs)} arrays ({', '.join(k.inputs)}), got {len(arrays)}")
        if self.compiled:
            return self._run("main", name, arrays, out, recheck)
        if recheck is not None:
            recheck()
        return _numpy_call(self.model, k, arrays, out)

    def flops(self, name, which="kernel") -> dict:
        """Operation counts of kernel ``name`` (dict by kind) from its IR: ``which="kernel"``
        (everything it computes), ``"result"`` (only what its non-check outputs depend on) or
        ``"checks"`` (the difference).  Traced on demand on the NumPy fallback."""
        if which not in ("kernel", "result", "checks"):
            raise ValueError(f"which: expected 'kernel', 'result' or 'checks', got {which!r}")
        if name not in self.kernels:
            self.kernels[name] = KernelInfo.of(name, trace(self.model, self._specs[name]))
        info = self.kernels[name]
        res = info.result_flops or info.flops
        if which == "kernel":
            return dict(info.flops)
        if which == "result":
            return dict(res)
        return {k: info.flops[k] - res.get(k, 0) for k in info.flops}


    def __getattr__(self, name):
        specs = self.__dict__.get("_specs", {})
        if name in specs and name in self.__dict__.get("names", ()):
            return lambda *arrays, out=None: self.run(name, *arrays, out=out)
        raise AttributeError(name)

    def __repr__(self):
        state = "compiled" if self.compiled else "NumPy fallback"
        return f"CompiledKernels({type(self.owner).__name__}, {', '.join(self.names)}, {state})"


class _AddedKernel:
    """A kernel handed to :meth:`CompiledKernels.add`: one state through the C fast path (values
    checked there: finite, unit quaternions), anything else through :meth:`__call__`'s checks."""

    def __init__(self, ks, spec):
        self.ks, self.spec, self.fast = ks, spec, None

    def __call__(self, *arrays, out=None):
        fast = self.fast
        if fast is not None and out is None:
            return fast(*arrays)
        return self._general(*arrays, out=out)

    def _general(self, *arrays, out=None):
        ks, spec = self.ks, self.spec
        if len(arrays) != len(spec.inputs):
            raise TypeError(f"{spec.name}: expected {len(spec.inputs)} arrays ({', '.join(spec.inputs)}), "
                            f"got {len(arrays)}")
        shapes = spec.shapes(ks.model)
        xs = [_checked(ks.model, n, x, shapes[n], spec=spec) for n, x in zip(spec.inputs, arrays)]
        res = ks._run(spec.name, spec.name, xs, out)
        if self.fast is None:
            self.fast = ks._fast_kernel(ks._library(spec.name, "single"), spec.name, self._general, quaternions=True)
        return res


def _numpy_call(model, k, arrays, out):
    """Kernel ``k``'s NumPy function on ``arrays`` (the fallback without a compiler), into ``out``."""
    res = k.fn(model, **dict(zip(k.inputs, (np.asarray(a, dtype=float) for a in arrays))))
    if out is None:
        return res
    for o, r in zip(out if isinstance(out, tuple) else (out,), res if isinstance(res, tuple) else (res,)):
        o[...] = r
    return out


class _NumpyKernel:
    """A kernel handed to :meth:`CompiledKernels.add` without a compiler: its NumPy function."""

    def __init__(self, model, kernel):
        self.model, self.kernel = model, kernel

    def __call__(self, *arrays, out=None):
        return _numpy_call(self.model, self.kernel, arrays, out)


def _compile_again(owner, vectorize):
    return compile_owned(owner, find_compiler_or_warn(), None, vectorize)


def _kernels_again(owner, vectorize):
    return _compiled_kernels(owner, find_compiler_or_warn(), None, vectorize)[1]


def _compiled_kernels(owner, compiler, progress, vectorize):
    owned = owner.__sparsedyn_kernels__()
    owner = owner if owned.owner is None else owned.owner
    return owner, CompiledKernels(owner, owned, compiler, _progress_fn(progress, owned.model), vectorize)


def compile_owned(owner, compiler, progress=None, vectorize=None):
    """``sparsedyn.compile(owner)``: the owner's kernels built, wrapped by its
    ``__sparsedyn_compiled__`` when it has one (the owner named by :class:`~sparsedyn.kernels.Owned`
    when it hands over another object's kernels)."""
    owner, compiled = _compiled_kernels(owner, compiler, progress, vectorize)
    wrap = getattr(type(owner), "__sparsedyn_compiled__", None)
    return compiled if wrap is None else wrap(owner, compiled)
