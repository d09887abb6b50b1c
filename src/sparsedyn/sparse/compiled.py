"""The online phase of a structure as a kernel, and the structure compiled: ``sparsedyn.compile(structure)``.

:func:`solve_kernel` declares the online phase of a :class:`~sparsedyn.sparse.Structure`
(``x = solve(q, v, y)`` with ``model.gravity`` folded in) together with its safety checks
(:func:`~sparsedyn.sparse.checks.checked_solve`) as one kernel of state arrays; a structure hands
it to the compiler through ``__sparsedyn_kernels__`` (see :mod:`sparsedyn.kernels`, *Owners*), and
the compiler hands back compiled kernels, which :class:`CompiledStructure` wraps: the kernel serves
every state its check values pass, the NumPy :meth:`Structure.solve
<sparsedyn.sparse.Structure.solve>` every other one (so its warnings, fallbacks and errors are
unchanged).  Nothing here knows how the kernel is compiled.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import Kernel
from .checks import check_count, checked_solve

__all__ = ["solve_kernel", "CompiledStructure", "CompiledOwner"]


def solve_kernel(st) -> Kernel:
    """Kernel ``sparse_solve``: inputs ``q`` (nq), ``v`` (nv)[, ``y`` (ny)], outputs ``d`` (n)
    [and ``chk``, the check values of :func:`~sparsedyn.sparse.checks.checked_solve`]."""
    model, ny = st.model, st.problem.ny
    nchk = check_count(st)
    g = _checks.gravity(model, None)

    def fn(q, v, y=None):
        y = np.zeros((0,), dtype=object) if y is None else y
        x, chk, _ = checked_solve(st, q, v, y, g, ())
        return (x, np.array(chk, dtype=object)) if nchk else (x,)
    inputs = [("q", (model.nq,)), ("v", (model.nv,))] + ([("y", (ny,))] if ny else [])
    outputs = [("d", (st.n,))] + ([("chk", (nchk,))] if nchk else [])
    return Kernel.of_arrays("sparse_solve", inputs, outputs, fn, checks=("chk",) if nchk else ())


class CompiledOwner:
    """What a compiled structure and a compiled estimator share: the compiled kernels
    (``compiled_kernels``, one kernel ``kernel_name``) and their build attributes."""

    kernel_name = None

    def __init__(self, compiled):
        self.compiled_kernels = c = compiled
        self.model = c.model
        self._fast = c.fast(self.kernel_name) if c.compiled else None

    compiled = property(lambda self: self.compiled_kernels.compiled)
    lanes = property(lambda self: self.compiled_kernels.lanes)
    built = property(lambda self: self.compiled_kernels.built)
    build_seconds = property(lambda self: self.compiled_kernels.build_seconds)
    vectorize = property(lambda self: self.compiled_kernels.vectorize)
    fastcall = property(lambda self: self._fast is not None)

    @property
    def threads(self):
        """Threads of a batch call (at most; see the compiled kernels)."""
        return self.compiled_kernels.threads

    @threads.setter
    def threads(self, n):
        self.compiled_kernels.threads = n

    def __getattr__(self, name):                       # the wrapped structure's / estimator's attributes
        if name.startswith("_") or name in ("wrapped", "compiled_kernels"):
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    def __reduce__(self):
        # unpickled: sparsedyn.compile of the wrapped object again (its libraries from the build cache)
        return self.compiled_kernels.compile_again()

    def _state(self):
        return f"compiled, {self.lanes} lanes" if self.compiled else "NumPy fallback"

    def raw(self, *arrays):
        """The kernel's outputs ``{name: array}`` for float arrays ``q, v[, y]`` (one state or a batch),
        without validation, checks or re-solves (benchmarks, diagnostics)."""
        if not self.compiled:
            raise RuntimeError("raw: not compiled (no C compiler); use solve")
        outs = self._call(*arrays)
        return dict(zip(self.compiled_kernels.output_names(self.kernel_name), outs))

    def _call(self, *arrays, recheck=None):
        out = self.compiled_kernels.run(self.kernel_name, *arrays, recheck=recheck)
        return out if isinstance(out, tuple) else (out,)

    def _failed(self, outs, batch):
        """``None`` (no state fails), ``()`` (the one state of an unbatched call) or the index arrays of
        the failing states of the batch."""
        bad = self.compiled_kernels.failed(self.kernel_name, outs, batch)
        if not bad.any():
            return None
        return () if batch == () else np.nonzero(bad)

    def flops(self, which="kernel") -> dict:
        """Operation counts (dict by kind, as :meth:`~sparsedyn.symbolic.ir.Program.flops`) from the IR.

        ``which``: ``"kernel"`` (everything the compiled kernel computes), ``"result"`` (only what
        its results depend on: the solve without the run-time check quantities) or ``"checks"``
        (the difference)."""
        return self.compiled_kernels.flops(self.kernel_name, which)


class CompiledStructure(CompiledOwner):
    """A compiled :class:`~sparsedyn.sparse.Structure` (see :func:`sparsedyn.compile`).

    ``solve(q, v, y=None, gravity=None, check="auto", info=False)`` has the
    signature and results of :meth:`Structure.solve <sparsedyn.sparse.Structure.solve>`
    (one state or batch axes, which broadcast; several right-hand sides per
    configuration as there).  Inputs are validated as there.  The compiled kernel
    serves ``check="auto"`` and ``"none"`` with the model's gravity; states that its
    check values flag are re-solved by ``Structure.solve`` (warnings and
    errors as there, counting the re-solved states); ``gravity=``, ``check="all"``
    and ``info=True`` go to ``Structure.solve`` directly, as everything does
    without a C compiler.  ``flops()``: see :meth:`CompiledOwner.flops`.
    Other attributes are the structure's (``unpack``, ``n``, ``problem`` ...).
    """

    kernel_name = "sparse_solve"

    def __init__(self, structure, compiled):
        self.structure = self.wrapped = structure
        super().__init__(compiled)
        self._has_y = structure.problem.ny > 0

    def __repr__(self):
        return f"CompiledStructure({self.structure.problem.name!r}, model={self.model.name!r}, " \
               f"n={self.structure.n}, {self._state()})"

    def solve(self, q, v, y=None, gravity=None, check="auto", info=False):
        """``d`` (..., n): see :class:`CompiledStructure` and :meth:`sparsedyn.sparse.Structure.solve`."""
        st = self.structure
        if self._fast is not None and gravity is None and not info and check in ("auto", "none"):
            if self._has_y:
                out = self._fast(q, v, y)
            elif y is None or (type(y) is np.ndarray and y.shape == (0,) and y.dtype == np.float64):
                out = self._fast(q, v)
            else:
                out = None
            if out is not None:                         # one checked state through the C fast path
                if check == "auto" and not self.compiled_kernels.passed(self.kernel_name, out):
                    return st.solve(q, v, y, check=check)
                return out[0]
        if not self.compiled or gravity is not None or info or check not in ("auto", "none"):
            return st.solve(q, v, y, gravity, check=check, info=info)
        q, v, y, _, batch, symbolic = st._inputs(q, v, y, None)
        if symbolic:
            return st.solve(q, v, y, None, check=check)
        full = [np.broadcast_to(a, batch + a.shape[-1:]) for a in (q, v, y)]
        outs = self._call(*(full if self._has_y else full[:2]))
        d = outs[0]
        bad = self._failed(outs, batch) if check == "auto" else None
        if bad == ():
            return st.solve(*full, check=check)
        if bad is not None:
            d[bad] = st.solve(*(a[bad] for a in full), check=check)
        return d
