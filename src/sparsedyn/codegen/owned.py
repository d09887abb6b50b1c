"""Compiled kernels of an owner object: ``sparsedyn.compile(owner)`` for anything with
``__sparsedyn_kernels__()`` (see :mod:`sparsedyn.kernels`, *Owners*).

The compiler knows nothing of the owner: it builds the kernels it is handed (one library, cached
under the model fingerprint plus the owner's fingerprint) and exposes each as a method that runs
one state or a batch, with ``out=``.  Without a C compiler the methods call the kernels' NumPy
functions.
"""

from __future__ import annotations

import numpy as np

from .runtime import KernelInfo, KernelSet, _progress_fn, trace

__all__ = ["CompiledKernels", "compile_owned"]


class CompiledKernels(KernelSet):
    """The compiled kernels of ``owner``: method ``k.<kernel name>(*arrays, out=None)`` per kernel
    (arrays in the kernel's input order, leading batch axes broadcast; one array per output, a
    tuple for several), ``k.run(name, *arrays, out=None)`` the same by name, ``k.flops(name)``
    from the IR.  Attributes: ``owner``, ``model``, ``names`` (the kernels' names), ``compiled``
    (False on the NumPy fallback), ``kernels`` (``{name: KernelInfo}`` of the kernels built)."""

    def __init__(self, owner, owned, compiler, progress=None, vectorize=None):
        super().__init__(owned.model, compiler, progress, vectorize,
                         owner=False if owned.fingerprint is None else "owner " + owned.fingerprint)
        self.owner = owner
        ks = tuple(owned.kernels)
        self.names = tuple(k.name for k in ks)
        if len(set(self.names)) != len(ks):
            raise ValueError(f"{type(owner).__name__}.__sparsedyn_kernels__: kernel names repeat: {self.names}")
        self._specs.update(zip(self.names, ks))
        single = self._start()
        if single is not None:
            self.lanes = single.lanes

    def _group_specs(self, group):
        return [self._specs[n] for n in self.names]

    def run(self, name, *arrays, out=None):
        """Kernel ``name`` on ``arrays`` (one per input, float, batch axes broadcast)."""
        k = self._specs.get(name)
        if k is None:
            raise AttributeError(f"{type(self.owner).__name__} has no kernel {name!r}; kernels: {', '.join(self.names)}")
        if len(arrays) != len(k.inputs):
            raise TypeError(f"{name}: expected {len(k.inputs)} arrays ({', '.join(k.inputs)}), got {len(arrays)}")
        if self.compiled:
            return self._run("main", name, arrays, out)
        res = k.fn(self.model, **dict(zip(k.inputs, (np.asarray(a, dtype=float) for a in arrays))))
        if out is None:
            return res
        for o, r in zip(out if isinstance(out, tuple) else (out,), res if isinstance(res, tuple) else (res,)):
            o[...] = r
        return out

    def flops(self, name) -> dict:
        """Operation counts of kernel ``name`` (dict by kind) from its IR."""
        if name not in self.kernels:
            self.kernels[name] = KernelInfo.of(name, trace(self.model, self._specs[name]))
        return dict(self.kernels[name].flops)

    def __getattr__(self, name):
        specs = self.__dict__.get("_specs", {})
        if name in specs and name in self.__dict__.get("names", ()):
            return lambda *arrays, out=None: self.run(name, *arrays, out=out)
        raise AttributeError(name)

    def __repr__(self):
        state = "compiled" if self.compiled else "NumPy fallback"
        return f"CompiledKernels({type(self.owner).__name__}, {', '.join(self.names)}, {state})"


def compile_owned(owner, compiler, progress=None, vectorize=None):
    """``sparsedyn.compile(owner)``: the owner's kernels built, wrapped by its
    ``__sparsedyn_compiled__`` when it has one."""
    owned = owner.__sparsedyn_kernels__()
    compiled = CompiledKernels(owner, owned, compiler, _progress_fn(progress, owned.model), vectorize)
    wrap = getattr(type(owner), "__sparsedyn_compiled__", None)
    return compiled if wrap is None else wrap(owner, compiled)
