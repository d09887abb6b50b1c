"""Kernels as JAX functions, built from their traced programs.

``function(sd.rnea, model)`` traces the kernel once (the trace the C compiler
and the derivatives use) and returns a function of JAX arrays that replays the
straight-line program with ``jax.numpy`` operations.  It runs under
``jax.jit``, ``jax.vmap``, ``jax.grad``/``jax.jacfwd``/``jax.jacrev``, accepts
leading batch axes directly, and works for derivative kernels
(``sd.rnea_derivatives``...) and user kernels alike.

Calling ``sd.rnea`` itself on JAX traced values is not supported (the kernels
are written over NumPy): the argument checks refuse them and point here.

Two emissions (``style``): one JAX operation per IR node (small programs; XLA
fuses them, but its compile time grows quickly with the program), or the
program's level schedule, a gather and one vectorised operation per group of
nodes of equal depth (large programs such as the derivative kernels: compiles
in seconds).  JAX is an optional
dependency: ``pip install sparsedyn[jax]``.  Enable ``jax_enable_x64`` for
float64 results (otherwise JAX computes in float32).
"""

from __future__ import annotations

import numpy as np


__all__ = ["function", "program_function"]


def _jnp():
    try:
        import jax.numpy as jnp
    except ImportError:
        raise ImportError("sparsedyn.interop.jax needs JAX: pip install 'sparsedyn[jax]'") from None
    return jnp


def _check(prog, arrays, in_shapes):
    if len(arrays) != len(in_shapes):
        raise TypeError(f"{prog.name}: expected {len(in_shapes)} arrays, got {len(arrays)}")
    for k, (a, s) in enumerate(zip(arrays, in_shapes)):
        if a.ndim < len(s) or a.shape[a.ndim - len(s):] != s:
            raise ValueError(f"{prog.name}: argument {k} has shape {a.shape}, expected (..., "
                             f"{', '.join(map(str, s))})")
    return np.broadcast_shapes(*[a.shape[:a.ndim - len(s)] for a, s in zip(arrays, in_shapes)])


def program_function(prog, style="auto"):
    """A function ``f(*arrays) -> list of arrays`` evaluating ``prog`` with ``jax.numpy``.

    ``arrays[k]``: shape ``batch + input_shapes[k]`` (batch shapes broadcast); outputs
    ``batch + output_shapes[k]``.  Traceable by every JAX transformation.

    ``style``: ``"scalar"`` unrolls one JAX operation per IR node (fastest to run, but XLA's
    compile time grows quickly with the program); ``"levels"`` runs the program's level
    schedule (the nodes of equal depth and operation as one gather and one vectorised
    operation, as :meth:`Program.evaluate` does), a few operations per depth level, which
    compiles in seconds for programs of 10^5 nodes; ``"auto"``: ``"scalar"`` up to 2,000 nodes.
    """
    if style == "auto":
        style = "scalar" if len(prog.nodes) <= 2000 else "levels"
    if style == "levels":
        return _levels_function(prog)
    if style != "scalar":
        raise ValueError(f"style: expected 'auto', 'scalar' or 'levels', got {style!r}")
    jnp = _jnp()
    outputs = prog.outputs
    in_shapes = [tuple(s) for s in prog.input_shapes]
    out_shapes = [tuple(s) for s in prog.output_shapes]
    fns = {"sin": jnp.sin, "cos": jnp.cos, "sqrt": jnp.sqrt, "atan2": jnp.arctan2, "copysign": jnp.copysign}

    def f(*arrays):
        if len(arrays) != len(in_shapes):
            raise TypeError(f"{prog.name}: expected {len(in_shapes)} arrays, got {len(arrays)}")
        arrays = [jnp.asarray(a) for a in arrays]
        batch = _check(prog, arrays, in_shapes)
        flat = [a.reshape(a.shape[:a.ndim - len(s)] + (-1,)) for a, s in zip(arrays, in_shapes)]
        val = prog.replay(lambda j, k: flat[j][..., k], fns)
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


def _levels_function(prog):
    jnp = _jnp()
    plan = prog._plan()
    in_shapes = [tuple(s) for s in prog.input_shapes]
    out_shapes = [tuple(s) for s in prog.output_shapes]
    groups = [(getattr(jnp, f.__name__), k0, k1, xs, ys) for f, k0, k1, xs, ys in plan.groups]

    def f(*arrays):
        arrays = [jnp.asarray(a) for a in arrays]
        batch = _check(prog, arrays, in_shapes)
        dtype = jnp.result_type(*arrays) if arrays else jnp.float32
        B = int(np.prod(batch, dtype=int))
        flat = [jnp.broadcast_to(a, batch + s).reshape((B, -1)).T for a, s in zip(arrays, in_shapes)]
        vals = jnp.zeros((plan.n, B), dtype=dtype)
        for a, (slots, elems) in plan.by_arg.items():
            vals = vals.at[slots].set(flat[a][elems])
        if len(plan.const_slots):
            vals = vals.at[plan.const_slots].set(jnp.asarray(plan.const_vals, dtype=dtype)[:, None])
        for fn, k0, k1, xs, ys in groups:
            r = fn(vals[xs]) if ys is None else fn(vals[xs], vals[ys])
            vals = vals.at[k0:k1].set(r)
        outs = []
        for (idx, slots, cidx, cval), s, row in zip(plan.outputs, out_shapes, prog.outputs):
            o = jnp.zeros((len(row), B), dtype=dtype)
            if len(idx):
                o = o.at[idx].set(vals[slots])
            if len(cidx):
                o = o.at[cidx].set(jnp.asarray(cval, dtype=dtype)[:, None])
            outs.append(o.T.reshape(batch + s))
        return outs

    f.__name__ = prog.name
    return f


def function(fn, model, *, static=None, optional=(), style="auto"):
    """Registered kernel ``fn`` for ``model`` as a JAX function with the kernel's state inputs
    (then the ``optional`` ones) as positional arguments; returns one array, or a tuple for a
    kernel with several outputs.  ``static``: the kernel's static arguments; ``style``: see
    :func:`program_function`.  ``fn`` may also be a plain Python function of registered kernels
    ``fn(model, q, v, ...)``, as ``sparsedyn.compile(model, kernels=[fn])`` takes it."""
    from ._user import program
    prog, _, outputs, kname = program(fn, model, static, optional, "interop.jax.function")
    f = program_function(prog, style)

    def g(*arrays):
        outs = f(*arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    g.__name__ = kname
    return g
