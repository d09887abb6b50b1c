"""Kernels as JAX functions.

``function(sd.rnea, model)`` returns a function of JAX arrays that runs under ``jax.jit``,
``jax.vmap``, ``jax.grad``/``jax.jacfwd``/``jax.jacrev``, accepts leading batch axes directly,
and works for derivative kernels (``sd.rnea_derivatives``...) and user functions alike.  It
takes one of three roads, chosen when it is traced (``backend=``, see :func:`function`):

* ``native`` (CPU): the compiled kernel (:mod:`sparsedyn.codegen`) called by XLA through its
  foreign-function interface, one generic C handler (:mod:`sparsedyn.codegen.xla_ffi`)
  registered once per process as the custom call ``sparsedyn_kernel``; ``vmap`` and batch axes
  become one call of the vectorised batch kernel (``vmap_method="broadcast_all"``).  Its
  derivative rule (``jax.custom_jvp``, so forward and reverse mode) takes the Jacobians from the
  library's derivative kernels (:data:`ANALYTIC`), or from AD on the traced program
  (:func:`sparsedyn.derivatives`) compiled the same way.
* ``callback``: the same compiled kernels through ``jax.pure_callback`` (vectorised).
* ``replay``: the straight-line program replayed with ``jax.numpy`` operations, for
  accelerators (GPU, TPU) and float32: one JAX operation per IR node, or the program's level
  schedule, a gather and one vectorised operation per group of nodes of equal depth (large
  programs such as the derivative kernels: compiles in seconds).

``q`` on the native roads: the JAX input is a point of R^nq, and the kernels' derivatives are
on the tangent space (``d/d(dq) f(integrate(q, dq))``, nv columns).  The JVP maps a direction
``dq`` in R^nq to the tangent direction whose first-order motion is closest to it: the left
inverse ``(J^T J)^-1 J^T`` of each joint's chart derivative ``J = d retract(q, dq)/d dq`` at
``dq = 0`` (a compiled kernel too): ``omega = 2 vec(conj(quat) dquat)`` for a quaternion,
``R^T dp`` for a free joint's position, identity for vector joints.  A change of a quaternion's
norm maps to zero, so the Jacobian is that of ``f(normalize(q))``, what central differences of
the NumPy kernels measure (they take unit quaternions only).

Calling ``sd.rnea`` itself on JAX traced values is not supported (the kernels are written over
NumPy): the argument checks refuse them and point here.  JAX is an optional dependency:
``pip install sparsedyn[jax]``.  Enable ``jax_enable_x64`` for float64 results (and the native
roads); otherwise the replay road computes in float32.
"""

from __future__ import annotations

import re
import threading

import numpy as np


__all__ = ["function", "program_function", "BACKENDS", "ANALYTIC"]


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
    plan = prog.plan()
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


#: The ways a JAX function of a kernel runs (``backend=`` of :func:`function`).
BACKENDS = ("auto", "native", "callback", "replay")

#: Registered kernels with an analytical derivative kernel of the layout of
#: :func:`sparsedyn.derivatives` (for each output, the Jacobian with respect to each input in
#: order, ``q`` on the tangent space), taking the same static arguments.  The others are
#: differentiated by AD on their traced program (:func:`sparsedyn.derivatives`), compiled too.
ANALYTIC = {"rnea": "rnea_derivatives", "aba": "aba_derivatives",
            "generalized_gravity": "generalized_gravity_derivatives",
            "frame_velocity": "frame_velocity_derivatives", "frame_acceleration": "frame_acceleration_derivatives"}

_TARGET = "sparsedyn_kernel"
_registered_target = []
_target_lock = threading.Lock()


def _jax():
    try:
        import jax
    except ImportError:
        raise ImportError("sparsedyn.interop.jax needs JAX: pip install 'sparsedyn[jax]'") from None
    return jax


def _ffi_target():
    """Register the FFI handler with XLA once per process; ``None`` with the reason when it cannot be
    built (then the vectorised callback runs the native kernels)."""
    with _target_lock:
        if _registered_target:
            return _registered_target[0]
        jax = _jax()
        from ..codegen import build, xla_ffi
        if not hasattr(jax, "ffi") or not hasattr(jax.ffi, "include_dir"):
            lib, why = None, f"JAX {jax.__version__} has no jax.ffi (JAX 0.4.35 or later has)"
        else:
            lib, why = xla_ffi.load_handler(build.find_compiler(), jax.ffi.include_dir())
        if lib is not None:
            jax.ffi.register_ffi_target(_TARGET, jax.ffi.pycapsule(lib.sd_xla_call), platform="cpu")
        _registered_target.append((lib, why))
        return lib, why


class _Owner:
    """One kernel handed to the compiler (the owner protocol of :mod:`sparsedyn.kernels`)."""

    def __init__(self, model, spec, fingerprint):
        self.model, self.spec, self.fingerprint = model, spec, fingerprint

    def __sparsedyn_kernels__(self):
        from ..kernels import Owned
        return Owned(self.model, (self.spec,), self.fingerprint)


def _announcer(model, name):
    """The ``progress`` of a JAX kernel's compilation: its first step of a build (a trace, so the build
    cache had no library) prints one line as the builds of plain calls do; a library from the cache is
    silent."""
    said = []

    def progress(msg):
        if not said and "from the cache" not in msg:      # a library loaded from the cache says so
            said.append(msg)
            import sys
            from ..codegen import build
            sys.stdout.flush()
            kernel = re.sub(r"_s[0-9a-f]{10}$", "", name)        # without a variant's suffix
            print(f"sparsedyn: building native {kernel} for JAX for model {model.name!r} (nv={model.nv}); "
                  f"cached in {build.cache_dir()}", file=sys.stderr, flush=True)
    return progress


class _Native:
    """One kernel spec of one model compiled (the compiled kernels of a one-kernel owner), and the
    attributes with which the FFI handler calls its entry points (:meth:`attrs`)."""

    def __init__(self, model, spec, fingerprint, compiler):
        from ..codegen.owned import CompiledKernels
        from ..kernels import Owned
        self.model, self.spec, self.openmp = model, spec, compiler.openmp
        # The single-state library now; the vectorised one when a call is batched (its build would
        # double a first jit's wait); no fast path for one-state calls from Python (XLA calls C).
        self.ck = CompiledKernels(_Owner(model, spec, fingerprint), Owned(model, (spec,), fingerprint), compiler,
                                  _announcer(model, spec.name), vectorize=False, fastcall=False)
        self.ck.vectorize = True                  # the callback road's batches: the vectorised library
        self._attrs = {}
        self._lock = threading.Lock()

    def attrs(self, batched):
        """The handler's attributes: the entry points (the vectorised batch entry when ``batched``, its
        library built now; else 0: the handler then loops over the scalar entry), the size of one state
        of every argument, the thread policy and the checks."""
        with self._lock:
            if batched not in self._attrs:
                self._attrs[batched] = self._make_attrs(batched)
            return self._attrs[batched]

    def _make_attrs(self, batched):
        model, spec = self.model, self.spec
        e = self.ck.entry_points(spec.name, batch=batched)
        shapes = spec.shapes(model)
        sizes = [int(np.prod(shapes[n], dtype=int)) for n in list(spec.inputs) + list(spec.outputs)]
        qjoints = [model.joint_names[i] for i, j in enumerate(model.joints) if j.type in ("spherical", "free")]
        ints = lambda xs: np.array(list(xs) or [-1], dtype=np.int64)   # noqa: E731  (never an empty array)
        return dict(
            f_single=np.int64(e.single), f_loop=np.int64(e.loop), f_batch=np.int64(e.batch), lanes=np.int64(e.lanes),
            sizes=ints(sizes), flops=np.int64(e.flops), max_threads=np.int64(e.threads),
            split=np.int64(not self.openmp),           # without OpenMP the handler runs the threads
            qins=ints(k for k, _ in e.quaternions), quats=ints(e.quaternions[0][1] if e.quaternions else [0]),
            tol=np.float64(e.quaternion_tol), kernel=spec.name,
            names="\n".join(list(spec.inputs) + list(spec.outputs)), joints="\n".join(qjoints))

    def numpy(self, *arrays):
        """The kernel on NumPy arrays (the vectorised callback: inputs checked by the caller)."""
        res = self.ck.run(self.spec.name, *[np.asarray(x, dtype=np.float64) for x in arrays])
        return list(res) if isinstance(res, tuple) else [res]


class _Function:
    """A kernel of a model as a JAX function (see :func:`function`)."""

    def __init__(self, model, kname, spec, static, optional, user_program, backend, style, fingerprint):
        self.model, self.kname, self.spec = model, kname, spec
        self.static, self.optional = dict(static or {}), tuple(optional)
        self._user_program = user_program
        self.backend, self.style, self.fingerprint = backend, style, fingerprint
        shapes = spec.shapes(model)
        self.inputs, self.outputs = list(spec.inputs), list(spec.outputs)
        self.in_shapes = [tuple(shapes[n]) for n in self.inputs]
        self.out_shapes = [tuple(shapes[n]) for n in self.outputs]
        self._replay = self._native = self._primal = self._deriv = self._tangent = None
        self._lock = threading.Lock()

    # --- which road --------------------------------------------------------------------------------
    def road(self):
        """``"native"`` (XLA FFI), ``"callback"`` (vectorised host callback) or ``"replay"`` (jax.numpy)
        for a call now: see :func:`function`."""
        jax = _jax()
        if self.backend == "replay":
            return "replay"
        x64 = bool(jax.config.jax_enable_x64)
        if self.backend == "auto":
            if jax.default_backend() != "cpu" or not x64 or self.model.nbodies == 0 or self.model.nv == 0:
                return "replay"
            if self._compiled_beside_handler() is None:
                return "replay"
            if _ffi_target()[0] is not None:
                return "native"
            return "callback" if hasattr(jax, "ffi") else "replay"      # (an old JAX: no vectorised callback)
        if not x64:
            raise ValueError(f"{self.kname}: backend={self.backend!r} computes in float64: enable "
                             "jax.config.update('jax_enable_x64', True), or use backend='replay'")
        if (self._compiled_beside_handler() if self.backend == "native" else self._compiled()) is None:
            raise RuntimeError(f"{self.kname}: backend={self.backend!r} needs a C compiler (none was found, see "
                               "the CompilerNotFoundWarning); backend='replay' runs without one")
        if self.backend == "native":
            lib, why = _ffi_target()
            if lib is None:
                raise RuntimeError(f"{self.kname}: backend='native' needs the XLA FFI handler: {why}; "
                                   "backend='callback' runs the compiled kernel without it")
        return self.backend

    def _compiled_beside_handler(self):
        """:meth:`_compiled`, while the FFI handler is built or loaded (once per process) in another
        thread: on a machine's first jit both builds share its cores."""
        if _registered_target or self._native is not None:
            return self._compiled()
        handler = threading.Thread(target=_ffi_target, name="sparsedyn-ffi-handler", daemon=True)
        handler.start()
        try:
            return self._compiled()
        finally:
            handler.join()

    def _compiled(self):
        """The :class:`_Native` kernel (built or loaded on first use), or ``None`` without a compiler."""
        if self._native is None:
            with self._lock:
                if self._native is None:
                    from ..codegen.runtime import find_compiler_or_warn
                    compiler = find_compiler_or_warn()
                    self._native = False if compiler is None else \
                        _Native(self.model, self.spec, self.fingerprint, compiler)
        return self._native or None

    # --- the calls ----------------------------------------------------------------------------------
    def __call__(self, *arrays):
        jnp = _jnp()
        if len(arrays) != len(self.inputs):
            raise TypeError(f"{self.kname}: expected {len(self.inputs)} arrays ({', '.join(self.inputs)}), "
                            f"got {len(arrays)}")
        arrays = [jnp.asarray(a) for a in arrays]
        for n, a in zip(self.inputs, arrays):
            if not (jnp.issubdtype(a.dtype, jnp.floating) or jnp.issubdtype(a.dtype, jnp.integer)):
                raise TypeError(f"{self.kname}: {n}: expected a real array, got dtype {a.dtype}")
        batch = _check_shapes(self.kname, self.inputs, arrays, self.in_shapes, self.model)
        road = self.road()
        if road != "replay" and not any(isinstance(a, _jax().core.Tracer) for a in arrays):
            self._check_values(arrays)          # eager: the library's errors (under jit: the handler's)
        if road == "replay":
            outs = self._replay_fn()(*arrays)
        else:
            arrays = [jnp.broadcast_to(jnp.asarray(a, jnp.float64), batch + s) for a, s in zip(arrays, self.in_shapes)]
            outs = self._jvp_fn(road)(*arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _check_values(self, arrays):
        """Concrete inputs checked as the NumPy functions check them (finite, unit quaternions)."""
        from .. import _checks
        for n, a, s in zip(self.inputs, arrays, self.in_shapes):
            x = np.asarray(a, dtype=np.float64)
            if n.startswith("q") and s == (self.model.nq,):
                _checks.configuration(self.model, x, n)
            elif not np.all(np.isfinite(x)):
                raise ValueError(f"{self.kname}: {n}: contains NaN or infinite values")

    def _replay_fn(self):
        if self._replay is None:
            prog = self._user_program
            if prog is None:
                from ..symbolic.trace import trace_kernel
                prog = trace_kernel(self.spec, self.model)
            self._replay = program_function(prog, self.style)
        return self._replay

    def _call_compiled(self, road, arrays):
        """The compiled kernel on float64 arrays of one batch shape (a tuple of outputs)."""
        jax = _jax()
        nat = self._compiled()
        batch = arrays[0].shape[:arrays[0].ndim - len(self.in_shapes[0])] if arrays else ()
        shapes = [jax.ShapeDtypeStruct(batch + s, np.float64) for s in self.out_shapes]
        if road == "native":
            # Batched: batch axes here, or a vmap around (its tracers hide the mapped axis); JAX's
            # tracer class is recognised by name (no import of JAX's private modules).
            batched = bool(batch) or any(type(a).__name__ == "BatchTracer" for a in arrays)
            return tuple(jax.ffi.ffi_call(_TARGET, shapes, vmap_method="broadcast_all")(*arrays,
                                                                                       **nat.attrs(batched)))
        def host(*xs):
            self._check_values(xs)
            return nat.numpy(*xs)
        return tuple(jax.pure_callback(host, shapes, *arrays, vmap_method="broadcast_all"))

    def _jvp_fn(self, road):
        """The compiled call with its derivative rule (``jax.custom_jvp``): the Jacobians come from the
        derivative kernel (compiled the same way), ``q`` mapped from R^nq to the tangent space."""
        key = road
        if self._primal is None:
            self._primal = {}
        f = self._primal.get(key)
        if f is not None:
            return f
        jax = _jax()
        jnp = _jnp()

        def primal(*arrays):
            return self._call_compiled(road, arrays)

        primal = jax.custom_jvp(primal)
        zero = jax.custom_derivatives.SymbolicZero

        def rule(primals, tangents):
            ys = primal(*primals)
            if all(type(dx) is zero for dx in tangents):
                return tuple(ys), tuple(jnp.zeros_like(y) for y in ys)
            D = self.derivative()(*primals)
            D = D if isinstance(D, tuple) else (D,)
            k = len(self.inputs)
            # The tangents in the Jacobians' columns: q's in the tangent space (see tangent()).
            dxs = [None if type(dx) is zero else
                   (self.tangent(x, dx) if n == "q" else jnp.broadcast_to(dx, x.shape))
                   for n, x, dx in zip(self.inputs, primals, tangents)]
            dys = []
            for j, (y, ys_shape) in enumerate(zip(ys, self.out_shapes)):
                batch = y.shape[:y.ndim - len(ys_shape)]
                m = int(np.prod(ys_shape, dtype=int))
                acc = None
                for i, dx in enumerate(dxs):
                    if dx is None:
                        continue
                    J = D[j * k + i].reshape(batch + (m, -1))
                    term = (J @ dx.reshape(batch + (-1, 1)))[..., 0]
                    acc = term if acc is None else acc + term
                dys.append(acc.reshape(y.shape))
            return tuple(ys), tuple(dys)

        primal.defjvp(rule, symbolic_zeros=True)
        self._primal[key] = primal
        return primal

    def derivative(self):
        """The JAX function of the derivative kernel: for each output, its Jacobian with respect to
        each input (``q`` on the tangent space), analytical where the library has one."""
        if self._deriv is None:
            from ..algorithms.derivatives import derivative_program
            from ..kernels import REGISTRY, Kernel
            from ..codegen.trace import variant
            spec = None
            dname = ANALYTIC.get(self.kname) if self._user_program is None and not self.optional else None
            if dname is not None and dname in REGISTRY and set(REGISTRY[dname].static) == set(self.static):
                spec = variant(dname, self.static, ())
                want = [self.out_shapes[j] + ((self.model.nv,) if n == "q" else self.in_shapes[i])
                        for j in range(len(self.outputs)) for i, n in enumerate(self.inputs)]
                shapes = spec.shapes(self.model)
                if list(spec.inputs) != self.inputs or [tuple(shapes[n]) for n in spec.outputs] != want:
                    spec = None
            if spec is None:                        # AD on the traced program, compiled like the rest
                base, wrt = self.spec, tuple(self.inputs)
                outs = {f"d{y}_d{x}": ys + ((self.model.nv,) if x == "q" else xs)
                        for y, ys in zip(self.outputs, self.out_shapes) for x, xs in zip(self.inputs, self.in_shapes)}

                def program(m, s, o):
                    return derivative_program(base, m, wrt)
                # (``fn``: what identifies the kernel in the derivative programs' cache; never called.)
                spec = Kernel("jd_" + self.spec.name, program, dict(zip(self.inputs, self.in_shapes)), outs,
                              program=program)
                fingerprint = None if self._user_program is not None else "jax-ad " + self.spec.name
            else:
                fingerprint = "jax " + spec.name
            self._deriv = _Function(self.model, spec.name, spec, {}, (), None, self.backend, self.style, fingerprint)
        return self._deriv

    def tangent(self, q, dq):
        """``dq`` (..., nq), a direction in R^nq at the configuration ``q``, as a tangent direction
        (..., nv): the velocity whose first-order motion (:meth:`~sparsedyn.Joint.retract`) is the
        closest to ``dq``; for a quaternion the component along ``q`` itself (a change of norm,
        which the kernels do not see: they take unit quaternions) is dropped."""
        if self._tangent is None:
            spec = _chart_inverse(self.model)
            self._tangent = False if spec is None else \
                _Function(self.model, spec.name, spec, {}, (), None, self.backend, self.style, "jax chart inverse")
        if self._tangent is False:
            return dq
        return (self._tangent(q) @ dq[..., None])[..., 0]


def _chart_inverse(model):
    """The kernel ``q (nq,) -> P (nv, nq)`` mapping a direction in R^nq at ``q`` to the tangent
    space (see :meth:`_Function.tangent`), or ``None`` when every joint's chart is ``q + dq``
    (``P = I``).  Block diagonal: identities for those joints, and for the others the left inverse
    ``(J^T J)^-1 J^T`` of the chart's derivative ``J = d retract(q, dq)/d dq`` at ``dq = 0``, traced
    from the joint's :meth:`~sparsedyn.Joint.retract` (the small L^T D L solve written out)."""
    from ..algorithms.ltdl import chain_lambda, ltdl, ltdl_solve
    from ..model.joints import Joint
    from ..kernels import Kernel
    from ..symbolic.ad import inline, jacobian_program
    from ..symbolic.ir import Graph
    if all(type(j).retract is Joint.retract and j.nq == j.nv for j in model.joints):
        return None

    def program(model, static, optional):
        g = Graph()
        q = g.inputs(0, (model.nq,))
        P = np.zeros((model.nv, model.nq), dtype=object)
        for i, j in enumerate(model.joints):
            qs, vs = model.q_slice(i), model.v_slice(i)
            if type(j).retract is Joint.retract and j.nq == j.nv:
                P[vs, qs] = np.eye(j.nv)
                continue
            h = Graph()
            out = np.asarray(j.retract(h.inputs(0, (j.nq,)), h.inputs(1, (j.nv,))), dtype=object)
            J = jacobian_program(h.program([out], [(j.nq,), (j.nv,)], name=f"retract_{j.type}"), [1],
                                 mode="forward", at={1: 0.0}, name=f"chart_{j.type}")
            Jq = inline(J, [q[qs]])[0]                                   # (nq_i, nv_i)
            lam = chain_lambda(j.nv)
            L, D = ltdl(lam, Jq.T @ Jq)
            P[vs, qs] = np.stack([ltdl_solve(lam, L, D, Jq[r]) for r in range(j.nq)], -1)
        return g.program([P], [(model.nq,)], name="jax_chart_inverse")

    return Kernel("jax_chart_inverse", program, {"q": (model.nq,)}, {"P": (model.nv, model.nq)}, program=program)


def _check_shapes(name, names, arrays, in_shapes, model):
    for n, a, s in zip(names, arrays, in_shapes):
        if a.ndim < len(s) or a.shape[a.ndim - len(s):] != s:
            raise ValueError(f"{name}: {n}: expected shape (..., {', '.join(map(str, s))}) for model "
                             f"{model.name!r}, got shape {a.shape}")
    try:
        return tuple(np.broadcast_shapes(*[a.shape[:a.ndim - len(s)] for a, s in zip(arrays, in_shapes)]))
    except ValueError:
        desc = ", ".join(f"{n}: {a.shape}" for n, a in zip(names, arrays))
        raise ValueError(f"{name}: batch shapes do not broadcast ({desc})") from None


def function(fn, model, *, static=None, optional=(), style="auto", backend="auto"):
    """Registered kernel ``fn`` for ``model`` as a JAX function with the kernel's state inputs
    (then the ``optional`` ones) as positional arguments; returns one array, or a tuple for a
    kernel with several outputs.  ``static``: the kernel's static arguments.  ``fn`` may also be a
    plain Python function of registered kernels ``fn(model, q, v, ...)``, as
    ``sparsedyn.compile(model, kernels=[fn])`` takes it.

    ``backend`` (chosen when the function is traced, i.e. at each ``jax.jit`` compilation):

    * ``"native"``: the compiled kernel, called by XLA through its foreign-function interface
      (a generic C handler, built once per machine); one call per batch: under ``jax.vmap`` or
      with leading batch axes all states go to the vectorised batch kernel in one call.
      ``jax.jvp``/``jacfwd``/``jacrev``/``grad`` use the library's derivative kernels
      (``rnea_derivatives``, ``aba_derivatives``...; any other kernel: AD on its traced program,
      compiled too); see the module docstring for ``q``.  CPU only, float64
      (``jax_enable_x64``).
    * ``"callback"``: the same compiled kernels through ``jax.pure_callback`` (vectorised: one call
      per batch), for a JAX without its FFI headers.
    * ``"replay"``: the traced program replayed with ``jax.numpy`` operations (``style``: see
      :func:`program_function`); runs on any device, with JAX's own differentiation.
    * ``"auto"`` (default): ``"native"`` on a CPU default backend with ``jax_enable_x64`` and a C
      compiler (``"callback"`` without the FFI handler), else ``"replay"``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    if style not in ("auto", "scalar", "levels"):
        raise ValueError(f"style: expected 'auto', 'scalar' or 'levels', got {style!r}")
    from ..codegen.trace import variant
    from ..kernels import Kernel, registered
    k = registered(fn)
    if k is not None:
        if static:
            unknown = set(static) - set(k.static)
            if unknown:
                raise TypeError(f"interop.jax.function: {sorted(unknown)} are not static arguments of "
                                f"{k.name} (static: {list(k.static)})")
        unknown = set(optional) - set(k.optional)
        if unknown:
            raise ValueError(f"interop.jax.function: {sorted(unknown)} are not optional inputs of {k.name} "
                             f"(optional: {list(k.optional)})")
        missing = [n for n in k.static if n not in (static or {}) and
                   k.signature.parameters[n].default is k.signature.parameters[n].empty]
        if missing:
            raise TypeError(f"interop.jax.function: {k.name} needs its static arguments {missing} (static=)")
        spec = variant(k.name, static or {}, tuple(optional))
        f = _Function(model, k.name, spec, static, optional, None, backend, style, "jax " + spec.name)
        name = k.name
    else:
        from ._user import program
        prog, inputs, outputs, name = program(fn, model, static, optional, "interop.jax.function")
        cname = "u_" + re.sub(r"[^a-z0-9_]", "_", name.lower())
        spec = Kernel(cname, fn, dict(zip(inputs, map(tuple, prog.input_shapes))),
                      dict(zip(outputs, map(tuple, prog.output_shapes))), program=lambda m, s, o: prog)
        f = _Function(model, name, spec, {}, (), prog, backend, style, None)

    def g(*arrays):
        return f(*arrays)

    g.__name__ = name
    g.road = f.road
    g._function = f
    return g

