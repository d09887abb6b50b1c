"""Kernels as JAX functions, built from their traced programs.

``function(sd.rnea, model)`` traces the kernel once (the trace the C compiler
and the derivatives use) and returns a function of JAX arrays that replays the
straight-line program with ``jax.numpy`` operations.  It runs under
``jax.jit``, ``jax.vmap``, ``jax.grad``/``jax.jacfwd``/``jax.jacrev``, accepts
leading batch axes directly, and works for derivative kernels
(``sd.rnea_derivatives``...) and user kernels alike.

Calling ``sd.rnea`` itself on JAX traced values is not supported (the kernels
are written over NumPy): the argument checks refuse them and point here.

Cost: the program is unrolled into one JAX operation per IR node, so XLA's
compile time grows with the program (about a second per 10^4 nodes on a CPU);
the compiled function runs the fused scalar code.  JAX is an optional
dependency: ``pip install sparsedyn[jax]``.  Enable ``jax_enable_x64`` for
float64 results (otherwise JAX computes in float32).
"""

from __future__ import annotations

import numpy as np

from ..symbolic.ir import ADD, CONST, COS, DIV, INPUT, MUL, NEG, SIN, SQRT, SUB

__all__ = ["function", "program_function"]


def _jnp():
    try:
        import jax.numpy as jnp
    except ImportError:
        raise ImportError("sparsedyn.interop.jax needs JAX: pip install 'sparsedyn[jax]'") from None
    return jnp


def program_function(prog):
    """A function ``f(*arrays) -> list of arrays`` evaluating ``prog`` with ``jax.numpy``.

    ``arrays[k]``: shape ``batch + input_shapes[k]`` (batch shapes broadcast); outputs
    ``batch + output_shapes[k]``.  Traceable by every JAX transformation.
    """
    jnp = _jnp()
    nodes, outputs = prog.nodes, prog.outputs
    in_shapes = [tuple(s) for s in prog.input_shapes]
    out_shapes = [tuple(s) for s in prog.output_shapes]
    unary = {SIN: jnp.sin, COS: jnp.cos, SQRT: jnp.sqrt}

    def f(*arrays):
        if len(arrays) != len(in_shapes):
            raise TypeError(f"{prog.name}: expected {len(in_shapes)} arrays, got {len(arrays)}")
        arrays = [jnp.asarray(a) for a in arrays]
        for k, (a, s) in enumerate(zip(arrays, in_shapes)):
            if a.ndim < len(s) or a.shape[a.ndim - len(s):] != s:
                raise ValueError(f"{prog.name}: argument {k} has shape {a.shape}, expected (..., "
                                 f"{', '.join(map(str, s))})")
        batch = np.broadcast_shapes(*[a.shape[:a.ndim - len(s)] for a, s in zip(arrays, in_shapes)])
        flat = [a.reshape(a.shape[:a.ndim - len(s)] + (-1,)) for a, s in zip(arrays, in_shapes)]
        val = [None] * len(nodes)
        for i, (op, x, y) in enumerate(nodes):
            if op == INPUT:
                val[i] = flat[x][..., y]
            elif op == CONST:
                val[i] = x
            elif op == NEG:
                val[i] = -val[x]
            elif op == ADD:
                val[i] = val[x] + val[y]
            elif op == SUB:
                val[i] = val[x] - val[y]
            elif op == MUL:
                val[i] = val[x] * val[y]
            elif op == DIV:
                val[i] = val[x] / val[y]
            else:
                val[i] = unary[op](val[x])
        dtype = jnp.result_type(*arrays) if arrays else jnp.float32
        outs = []
        for row, s in zip(outputs, out_shapes):
            elems = [jnp.broadcast_to(jnp.asarray(val[v] if t == "node" else v, dtype=dtype), batch)
                     for t, v in row]
            out = jnp.stack(elems, -1) if elems else jnp.zeros(batch + (0,), dtype=dtype)
            outs.append(out.reshape(batch + s))
        return outs

    f.__name__ = prog.name
    return f


def function(fn, model, *, static=None, optional=()):
    """Registered kernel ``fn`` for ``model`` as a JAX function with the kernel's state inputs
    (then the ``optional`` ones) as positional arguments; returns one array, or a tuple for a
    kernel with several outputs.  ``static``: the kernel's static arguments."""
    from ..kernels import registered
    from ..symbolic.trace import trace_kernel
    k = registered(fn)
    if k is None:
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} is not a registered kernel (see sparsedyn.kernels)")
    f = program_function(trace_kernel(k, model, static or {}, tuple(optional)))

    def g(*arrays):
        outs = f(*arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    g.__name__ = k.name
    return g
