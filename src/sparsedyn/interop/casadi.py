"""Kernels as CasADi functions, built from their traced programs.

``function(sd.rnea, model)`` traces the kernel once (the same trace the C
compiler and the derivatives use) and replays its straight-line program on
CasADi ``SX`` symbols: the result is a :class:`casadi.Function` with the
kernel's inputs and outputs, which CasADi can differentiate, code-generate and
use in ``Opti``/IPOPT.  Derivative kernels (``sd.rnea_derivatives``, ...) and
user kernels go through the same path, so exact derivatives of everything the
library computes are available to CasADi too.

Calling ``sd.rnea`` directly on ``SX`` arguments is not supported (the kernels
are written over NumPy; CasADi's matrices are not NumPy arrays): the argument
checks refuse them and point here.

Layout: an input or output of shape ``(n,)`` is an ``n x 1`` column, ``(r, c)``
an ``r x c`` matrix (e.g. ``f_ext`` ``(NB, 6)``, a Jacobian ``(nv, nv)``);
higher-rank arrays are flattened in C order into a column.

CasADi is an optional dependency: ``pip install sparsedyn[casadi]``.
"""

from __future__ import annotations

import numpy as np


__all__ = ["function", "program_function"]


def _casadi():
    try:
        import casadi
    except ImportError:
        raise ImportError("sparsedyn.interop.casadi needs CasADi: pip install 'sparsedyn[casadi]'") from None
    return casadi


def _symbol(ca, name, shape):
    if len(shape) == 2:
        X = ca.SX.sym(name, shape[0], shape[1])
        return X, [X[i, j] for i in range(shape[0]) for j in range(shape[1])]
    n = int(np.prod(shape, dtype=int))
    X = ca.SX.sym(name, n)
    return X, [X[i] for i in range(n)]


def _assemble(ca, elems, shape):
    if len(shape) == 2:
        M = ca.SX.zeros(shape[0], shape[1])
        for i in range(shape[0]):
            for j in range(shape[1]):
                e = elems[i * shape[1] + j]
                if not (isinstance(e, float) and e == 0.0):
                    M[i, j] = e
        return M
    return ca.vertcat(*[ca.SX(e) if isinstance(e, float) else e for e in elems]) if elems else ca.SX(0, 1)


def program_function(prog, name=None, input_names=None, output_names=None):
    """A :class:`casadi.Function` evaluating :class:`~sparsedyn.symbolic.ir.Program` ``prog`` on SX."""
    ca = _casadi()
    input_names = list(input_names or getattr(prog, "input_names", None)
                       or [f"i{k}" for k in range(len(prog.input_shapes))])
    output_names = list(output_names or getattr(prog, "output_names", None)
                        or [f"o{k}" for k in range(len(prog.output_shapes))])
    syms, flat = [], []
    for n, s in zip(input_names, prog.input_shapes):
        X, elems = _symbol(ca, n, tuple(s))
        syms.append(X)
        flat.append(elems)
    val = prog.replay(lambda j, k: flat[j][k], {"sin": ca.sin, "cos": ca.cos, "sqrt": ca.sqrt,
                                                 "atan2": ca.atan2, "copysign": ca.copysign})
    outs = [_assemble(ca, [val[v] if t == "node" else float(v) for t, v in row], tuple(s))
            for row, s in zip(prog.outputs, prog.output_shapes)]
    return ca.Function(name or prog.name, syms, outs, input_names, output_names)


def function(fn, model, *, static=None, optional=(), name=None):
    """Registered kernel ``fn`` (e.g. ``sd.aba``, ``sd.rnea_derivatives``, ``sd.frame_placement``)
    for ``model`` as a :class:`casadi.Function`, or a plain Python function of registered kernels
    ``fn(model, q, v, ...)`` (the state arguments ``sparsedyn.compile(model, kernels=[fn])`` takes:
    ``q``, ``v``, ``a``, ``tau``, ``f_ext``...; outputs ``out0``, ``out1``...).

    ``static``: the kernel's static arguments (``{"frame": "tool"}``); ``optional``: names
    of optional inputs that become inputs of the function (``("f_ext",)``), the others
    are folded in at their defaults.  Inputs are the kernel's state inputs then the optional
    ones, named as in the kernel's signature; outputs are named as declared.
    """
    from ._user import program
    prog, inputs, outputs, kname = program(fn, model, static, optional, "interop.casadi.function")
    return program_function(prog, name or kname, inputs, outputs)
