"""Array-backend helpers shared by every kernel.

Kernels are written once and run on

* NumPy float arrays (one state, or leading batch axes ``(..., n)``),
* NumPy ``dtype=object`` arrays (the form the compiler traces: each element is a
  Python number or a symbolic scalar that implements ``sin``/``cos``/``sqrt``),
* later other array namespaces.

Only the elementwise transcendental functions need help: ``np.sin`` on an object
array calls each element's ``.sin()`` method, which plain Python floats lack.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["sin", "cos", "sqrt", "atan2", "copysign", "asarray", "is_symbolic", "zeros", "matmul", "block_pairs",
           "BLOCK_MIN_PAIRS"]

#: Products (multiplications that are not by a structural zero) from which a traced :func:`matmul`
#: is recorded as one dense block (a loop in the compiled code) rather than element by element.
BLOCK_MIN_PAIRS = 32768


def _scalar(name, fallback):
    def f(x):
        method = getattr(x, name, None)
        return method() if method is not None else fallback(x)

    return np.frompyfunc(f, 1, 1)


_obj_sin = _scalar("sin", math.sin)
_obj_cos = _scalar("cos", math.cos)
_obj_sqrt = _scalar("sqrt", math.sqrt)


def _binary(name, fallback):
    def f(a, b):
        method = getattr(a, name, None)
        if method is not None:
            return method(b)
        if getattr(b, name, None) is not None:       # a number and a symbol: lift the number
            return getattr(b.g.const_sym(a), name)(b)
        return fallback(a, b)

    return np.frompyfunc(f, 2, 1)


_obj_atan2 = _binary("atan2", math.atan2)
_obj_copysign = _binary("copysign", math.copysign)


def is_symbolic(x) -> bool:
    """True for NumPy object arrays (the traced form)."""
    return isinstance(x, np.ndarray) and x.dtype == object


def sin(x):
    return np.asarray(_obj_sin(x), dtype=object) if is_symbolic(x) else np.sin(x)


def cos(x):
    return np.asarray(_obj_cos(x), dtype=object) if is_symbolic(x) else np.cos(x)


def sqrt(x):
    return np.asarray(_obj_sqrt(x), dtype=object) if is_symbolic(x) else np.sqrt(x)


def refuse_foreign(x):
    """Symbolic values of other libraries and complex numbers cannot run through a kernel
    (it would fail deep inside NumPy or silently drop the imaginary part): say what works."""
    t = type(x)
    root = t.__module__.split(".")[0]
    if root in ("jax", "jaxlib") and any(c.__name__ == "Tracer" for c in t.__mro__):
        raise TypeError("got a JAX traced value: the kernels run on NumPy arrays; for jit/grad/vmap use "
                        "sparsedyn.interop.jax.function(kernel, model) (the kernel's traced program as a JAX "
                        "function), for derivatives also sparsedyn.derivatives")
    if root == "casadi" and t.__name__ in ("SX", "MX"):
        raise TypeError(f"got a CasADi {t.__name__}: the kernels run on NumPy arrays; use "
                        "sparsedyn.interop.casadi.function(kernel, model) (the kernel's traced program as a "
                        "casadi.Function)")
    if np.iscomplexobj(x):
        raise TypeError("complex values are not supported (a complex step would lose its imaginary part); "
                        "exact derivatives: sparsedyn.derivatives(kernel, wrt=...) or sparsedyn.rnea_derivatives "
                        "and friends")


def _traced(x):
    """An object array or a traced scalar (an element taken out of one)."""
    return is_symbolic(x) or hasattr(x, "atan2")


def atan2(y, x):
    """``arctan2(y, x)`` elementwise (traceable)."""
    if _traced(y) or _traced(x):
        return np.asarray(_obj_atan2(y, x), dtype=object)
    return np.arctan2(y, x)


def copysign(x, s):
    """``|x|`` with the sign of ``s``, elementwise (traceable; a branch on a sign without branching)."""
    if _traced(x) or _traced(s):
        return np.asarray(_obj_copysign(x, s), dtype=object)
    return np.copysign(x, s)


def asarray(x):
    """Array view of ``x``: object arrays stay object, everything else becomes float64 (float32,
    integers, lists, ``np.matrix``: the one conversion of every public function, so that the NumPy
    and the compiled paths compute in the same precision).  Complex input is refused rather than
    silently losing its imaginary part."""
    if isinstance(x, np.ndarray) and (x.dtype == object or x.dtype == np.float64):
        return x if type(x) is np.ndarray else np.asarray(x)
    refuse_foreign(x)              # JAX tracers, CasADi symbols, complex numbers: say what works
    return np.asarray(x, dtype=np.float64)


def zeros(shape, like):
    """Zeros of ``shape`` with the dtype of ``like`` (object zeros stay the int 0,
    a structural zero the tracer folds)."""
    return np.zeros(shape, dtype=like.dtype)


def matmul(A, B, min_pairs=None, live=None):
    """``A @ B`` of matrices ``A`` (n, k) and ``B`` (k, m).  Traced (object arrays of symbols), a
    product of ``min_pairs`` (default :data:`BLOCK_MIN_PAIRS`) multiplications or more, counted from
    the operands' structural zeros, is recorded as one dense block product (the graph's ``matmul``:
    the compiled program then grows with ``n k + k m + n m``, not with ``n k m``); same values
    either way.  ``live``: the slots its compiled loop may skip
    (:attr:`~sparsedyn.symbolic.block.Block.live`: ``(bound, ra, rk, rm)``), or None; numbers ignore it."""
    g = _block_graph(A, B, BLOCK_MIN_PAIRS if min_pairs is None else min_pairs)
    return (g.matmul(A, B, live) if live is not None else g.matmul(A, B)) if g is not None else A @ B


def _block_graph(A, B, min_pairs):
    """The graph that records ``A @ B`` as a block (see :func:`matmul`), or ``None``."""
    if not (is_symbolic(A) or is_symbolic(B)) or np.ndim(A) != 2 or np.ndim(B) != 2:
        return None
    A, B = np.asarray(A, dtype=object), np.asarray(B, dtype=object)
    g = next((x.g for x in (*A.flat, *B.flat) if hasattr(x, "g") and hasattr(x.g, "matmul")), None)
    return g if g is not None and block_pairs(A, B) >= min_pairs else None


def block_pairs(A, B) -> int:
    """The multiplications of ``A @ B`` (matrices of symbols and numbers) that are not by a structural
    zero (an exact ``0``)."""
    nz = np.frompyfunc(lambda x: hasattr(x, "g") or x != 0, 1, 1)
    return int(np.asarray(nz(A), dtype=float).sum(0) @ np.asarray(nz(B), dtype=float).sum(1))
