"""Derivatives of every kernel, from its traced program.

A registered kernel (:mod:`sparsedyn.kernels`) is traced once per model (and
static arguments) into a straight-line program; :mod:`sparsedyn.symbolic.ad`
differentiates that program in forward or reverse mode into a new program,
which is kept per (model, kernel, static arguments, optional inputs, ``wrt``) in the model's
:func:`~sparsedyn.model.topology.model_store`
and evaluated with NumPy over any leading batch axes.  State-dependent results
are never cached.  The derivative functions are kernels themselves (declared
with ``program=``), so everything that compiles or bridges a kernel (C, CasADi,
JAX) handles them too.

Derivatives with respect to ``q`` live on the tangent space
    ``df/dq := d/d(dq) f(integrate(q, dq))`` at ``dq = 0``, an ``(..., m, nv)``
    matrix (not ``(..., m, nq)``): column ``k`` is the change of ``f`` when the
    configuration moves along velocity direction ``k`` for unit time.  For a
    free joint the directions are the body-frame twist ``[omega; v]`` (the
    position moves by ``R v``, the orientation by ``R exp(omega)``), for a
    spherical joint the body-frame ``omega``, for a planar joint
    ``[omega_z, vx, vy]`` in the child frame; for the other joints ``dq`` adds
    to ``q``.  The program is traced through :meth:`sparsedyn.Joint.retract`, a
    branch-free map with the value and the first derivative of ``integrate``.

Conversion to Pinocchio's layout
    Pinocchio takes the same tangent space (its ``integrate`` for a free flyer
    is ``M exp6(v)`` with the local twist), ordered linear-first and with its
    own joint order.  A Jacobian ``J`` (rows ``tau``-like, columns ``v``-like)
    converts with ``tau_to_pinocchio`` on the rows and ``v_to_pinocchio`` on
    the columns: ``sparsedyn.interop.pinocchio.derivative_to_pinocchio``.  Pinocchio's ``fext`` is per joint
    in the joint frame, which for sparsedyn models is the body frame
    (``fext_to_pinocchio``).

Conversion to MuJoCo's layout
    MuJoCo's velocity is ``v_mj = T(q) v`` with the orthogonal block-diagonal
    ``T = sparsedyn.interop.mujoco.velocity_map(model, q)`` (free joint:
    ``[v_world; omega]``; planar: linear part in the parent frame), and its
    ``mj_integratePos`` follows ``v_mj`` with the same first-order motion, so a
    MuJoCo tangent direction ``dq_mj`` is ours ``T^T dq_mj``: the columns
    convert as ``J_mj = J T^T`` (``v``-like inputs the same way).  Rows that
    MuJoCo expresses in a ``q``-dependent frame (``qfrc``, ``qacc`` of a free or
    planar joint: ``tau_mj = T tau``) gain the term ``(dT/dq) tau`` in their
    ``q`` derivative; the simplest exact route is to differentiate a user
    kernel that returns the MuJoCo-layout quantity with :func:`derivatives`.

Cost: reverse mode costs about ``m`` primal evaluations, forward mode ``n``
(the Jacobian's rows and columns); ``mode="auto"`` picks the smaller.  The derivatives
of the dynamics and kinematics that optimal control calls most have analytical
recursive kernels (:mod:`sparsedyn.algorithms.dynamics_derivatives`,
:mod:`sparsedyn.algorithms.kinematics_derivatives`, ...), a few times cheaper; this
module differentiates everything else and checks them.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import Kernel, registered
from ..model.topology import model_store
from ..symbolic.ad import MODES, inline, jacobian_program
from ..symbolic.ir import Graph, Sym
from ..symbolic.trace import trace_function, trace_kernel
__all__ = ["derivatives", "derivative_program", "retract", "varying_subspaces"]

_LOCK = threading.Lock()


def retract(model, q, dq):
    """``q (+) dq`` to first order (:meth:`sparsedyn.Joint.retract` joint by joint); traceable."""
    if not model.nbodies:
        return q
    return np.concatenate([j.retract(q[..., model.q_slice(i)], dq[..., model.v_slice(i)])
                           for i, j in enumerate(model.joints)], -1)


def varying_subspaces(model):
    """Whether a joint of ``model`` has a motion subspace that depends on ``q``: the analytical
    derivative kernels (written for constant subspaces) then return the derivatives of the traced
    program (:func:`derivatives`) instead."""
    return not all(j.constant_subspace for j in model.joints)


def _kernel_of(fn, inputs=None, outputs=None, optional=None, static=()):
    if isinstance(fn, Kernel):
        return fn
    k = registered(fn)
    if k is not None:
        return k
    if inputs is None or outputs is None:
        raise TypeError(f"derivatives: {getattr(fn, '__name__', fn)!r} is not a registered kernel; declare it "
                        "with @sparsedyn.kernels.kernel(...) or pass inputs= and outputs= (name -> shape per "
                        "state, as for @kernel)")
    # A user function declared on the fly: the same declaration as @kernel, not entered in the registry.
    return Kernel(getattr(fn, "__name__", "user_kernel"), fn, dict(inputs), dict(outputs), dict(optional or {}),
                  tuple(static))


def _hashable(v):
    if isinstance(v, np.ndarray):
        return (v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def _wrt_names(k, wrt, names):
    if wrt is None:
        wrt = tuple(k.inputs)
    single = isinstance(wrt, str)
    wrt = (wrt,) if single else tuple(wrt)
    bad = [w for w in wrt if w not in names]
    if bad or not wrt or len(set(wrt)) != len(wrt):
        raise ValueError(f"wrt: expected distinct names among the state inputs {names} of kernel {k.name!r} "
                         f"(optional ones only when given), got {wrt}")
    return wrt, single


def derivative_program(fn, model, wrt=None, static=None, optional=(), mode="auto", _store=None):
    """The (cached) program of the Jacobians of kernel ``fn`` with respect to ``wrt``.

    Inputs: the kernel's inputs, then the ``optional`` ones in declared order (as
    :func:`~sparsedyn.symbolic.trace.trace_kernel`).  Outputs: for each kernel output
    ``y`` (outer) and each ``x`` in ``wrt`` (inner), ``dy_dx`` of shape
    ``y.shape + (n,)`` with ``n = nv`` for ``x = "q"`` (tangent space) and ``x.shape``
    otherwise.
    """
    k = _kernel_of(fn)
    static = dict(static or {})
    optional = tuple(n for n in k.optional if n in set(optional))
    names = list(k.inputs) + list(optional)
    wrt, _ = _wrt_names(k, wrt, names)
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    key = (k.name, id(k.fn), tuple(sorted((n, _hashable(v)) for n, v in static.items())), optional, wrt, mode)
    with _LOCK:
        cache = model_store(model, "derivative programs") if _store is None else _store.setdefault(model, {})
        prog = cache.get(key)
    if prog is not None:
        return prog
    name = f"d_{k.name}_d_" + "_".join(wrt)
    out_names = tuple(f"d{y}_d{x}" for y in k.outputs for x in wrt)
    if "q" in wrt:
        # Trace f(retract(q, dq), ...) with dq an extra last input, differentiate at dq = 0.
        iq, nd = names.index("q"), len(names)
        if k.program is None:           # trace the kernel's function directly on the chart
            shapes = k.shapes(model, **static)

            def call(*args):
                args = list(args)
                args[iq] = retract(model, args[iq], args[nd])
                return k.fn(model, **dict(zip(names, args[:nd])), **static)

            T = trace_function(call, [(n, shapes[n]) for n in names] + [("dq", (model.nv,))],
                               [(n, shapes[n]) for n in k.outputs], name=k.name)
        else:                           # a derived kernel: replay its program on the chart
            P = trace_kernel(k, model, static, optional)
            g = Graph()
            args = [g.inputs(j, tuple(s)) for j, s in enumerate(P.input_shapes)]
            dq = g.inputs(nd, (model.nv,))
            args[iq] = retract(model, args[iq], dq)
            T = g.program(inline(P, args), list(P.input_shapes) + [(model.nv,)], name=P.name)
        idx = [nd if w == "q" else names.index(w) for w in wrt]
        prog = jacobian_program(T, idx, mode=mode, at={nd: 0.0}, name=name, input_names=names,
                                output_names=out_names)
    else:
        prog = jacobian_program(trace_kernel(k, model, static, optional), [names.index(w) for w in wrt],
                                mode=mode, name=name, input_names=names, output_names=out_names)
    with _LOCK:
        cache[key] = prog
    return prog


def _check_state(model, k, name, x, shape):
    if name == "q":
        return _checks.configuration(model, x)
    if name == "f_ext":
        return _checks.body_forces(model, x)
    if x is None:
        raise TypeError(f"{k.name}: argument {name!r} is required (shape (..., {', '.join(map(str, shape))}))")
    x = _checks.numeric(name, x, f"(..., {', '.join(map(str, shape))})")
    if x.shape[max(0, x.ndim - len(shape)):] != tuple(shape) or x.ndim < len(shape):
        raise ValueError(f"{name}: expected shape (..., {', '.join(map(str, shape))}) for model {model.name!r}, "
                         f"got shape {x.shape}")
    if not bk.is_symbolic(x) and not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return x


def _run(prog, arrays):
    """Evaluate ``prog`` on checked arrays: floats (batched) or object arrays (traced: inlined)."""
    if any(bk.is_symbolic(a) for a in arrays):
        if any(a.shape != tuple(s) for a, s in zip(arrays, prog.input_shapes)):
            raise ValueError(f"{prog.name}: traced (object array) inputs must be single states of shapes "
                             f"{[tuple(s) for s in prog.input_shapes]}")
        return inline(prog, [np.asarray(a, dtype=object) for a in arrays])
    return prog.evaluate(arrays)


def _call(k, wrt, mode, model, args, kwargs, store=None):
    bound = k.signature.bind(model, *args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    static = {n: values[n] for n in k.static if n in values}
    optional = tuple(n for n in k.optional if values.get(n) is not None)
    prog = derivative_program(k, model, wrt, static, optional, mode, store)
    shapes = k.shapes(model, **static)
    arrays = [_check_state(model, k, n, values[n], shapes[n]) for n in prog.input_names]
    return tuple(_run(prog, arrays))


def derivatives(fn, wrt=None, *, mode="auto", inputs=None, outputs=None, optional=None, static=()):
    """The derivative function of kernel ``fn``: ``d(model, *args, **kwargs)`` with ``fn``'s signature.

    ``fn``: a registered kernel (any public numeric function of sparsedyn, a derivative
    kernel included) or a user function ``fn(model, ...)`` written over NumPy like a
    kernel, declared here with ``inputs``/``outputs`` (and ``optional``, ``static``) as
    for :func:`sparsedyn.kernels.kernel`.  ``wrt``: an input name or a tuple of them
    (default: all non-optional inputs); ``"q"`` is differentiated on the tangent space
    (``nv`` columns, see the module docstring).  ``mode``: ``"auto"``, ``"forward"`` or
    ``"reverse"``.

    ``d`` returns, for each output ``y`` of ``fn``, ``dy/dx`` of shape
    ``(...,) + y.shape + (n_x,)`` for every ``x`` in ``wrt`` (a tuple, or one array when
    ``wrt`` is a single name); a kernel with several outputs gives a tuple of those.
    Example: ``sd.derivatives(sd.frame_placement, wrt="q")(model, q, frame="tool")`` gives
    ``(dR_dq, dp_dq)`` of shapes ``(3, 3, nv)`` and ``(3, nv)``.
    """
    k = _kernel_of(fn, inputs, outputs, optional, static)
    # A user function's programs live with this derivative function (a global table keyed by the
    # function's id could hand a dead function's program to a new one that reuses the id).
    store = None if registered(fn) is not None or isinstance(fn, Kernel) else weakref.WeakKeyDictionary()
    single = isinstance(wrt, str)
    wrt_t = None if wrt is None else ((wrt,) if single else tuple(wrt))
    n_out = len(k.outputs)

    def d(model, *args, **kwargs):
        w = wrt_t if wrt_t is not None else tuple(k.inputs)
        outs = _call(k, w, mode, model, args, kwargs, store)
        per = [outs[i * len(w):(i + 1) * len(w)] for i in range(n_out)]
        per = [p[0] if single else tuple(p) for p in per]
        return per[0] if n_out == 1 else tuple(per)

    d.__name__ = f"d_{k.name}"
    d.__doc__ = f"Derivatives of {k.name} with respect to {wrt_t or tuple(k.inputs)} (see sparsedyn.derivatives)."
    return d
