"""Compiled functions and compiled estimators over Dask arrays (``pip install 'sparsedyn[dask]'``).

::

    import dask.array as da
    from sparsedyn.interop import dask as sdd

    Q = da.from_zarr("log.zarr", component="q")          # (N, nq), chunked along the batch axis
    tau = sdd.call(model, "rnea", Q, V, A)                # a lazy Dask array (N, nv)
    est = sdd.estimate(estimator, Q, V, Y)                # {"tau": .., "contact[l_sole]": .., "chi2": ..}
    est["tau"].to_zarr("tau.zarr")                        # computed a chunk at a time, on any cluster

Inputs are Dask arrays ``(N, k)``, states along axis 0, chunked along it only
(each chunk holds whole states; other chunking is rechunked first), and
NumPy arrays, which are wrapped with the chunks of the first Dask array.
The results are Dask arrays with the same chunks along axis 0; nothing is
computed until you ask (``.compute()``, ``.to_zarr()``, ``dask.compute``).
Several results of one :func:`estimate` share one task per chunk.

How a worker gets the compiled object
    A compiled object holds a loaded shared library and is not sent to the
    workers.  What is sent is what it was compiled from (the
    :class:`~sparsedyn.Model`, or the :class:`~sparsedyn.estimation.Estimator`,
    both picklable); each worker process compiles it on its first chunk,
    with ``sparsedyn.compile``, and keeps it for the later chunks (a few
    objects per process).  ``sparsedyn.compile`` finds the native library in
    the build cache (``$SPARSEDYN_CACHE_DIR``, see
    :mod:`sparsedyn.codegen.build`):

    * **shared cache** (a ``LocalCluster``, whose workers share the client's
      file system, or a cluster whose nodes see one cache directory): the
      library the client built is loaded in milliseconds; compile once on
      the client (``sd.compile(...)`` and one call) before computing;
    * **no shared cache** (nodes with their own disks): the first chunk on
      each node builds the library (seconds to a minute for a humanoid,
      once per node and cache; concurrent workers of one node build it once,
      under the cache's lock).  To pay it before the computation, run
      :func:`warm` on the client: ``client.run(sdd.warm, estimator)``.

    Either way every worker runs the same generated code as the client, so
    the results equal the client's own batched call bit for bit where the
    chunks are the same batches (see the tests) and NumPy's BLAS runs the same
    number of threads: the rare states the compiled kernel flags are re-solved
    by NumPy and LAPACK, whose rounding can depend on it, and Dask's workers
    set it to 1 by default (:func:`sparsedyn.recording.local_cluster` keeps the
    client's).

Threads
    A worker's compiled calls use ``threads`` threads (default 1, since Dask
    runs one task per worker thread already); pass ``threads=`` to use more.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

import numpy as np

__all__ = ["call", "estimate", "warm", "compiled"]


def _da():
    try:
        import dask.array as da
    except ImportError:
        raise ImportError("sparsedyn.interop.dask needs Dask: pip install 'sparsedyn[dask]'") from None
    return da


class Recipe:
    """What a worker compiles: ``source`` (a Model or an Estimator), the kernels to build, and a
    token naming this compiled object in the workers' per-process cache.  Picklable."""

    def __init__(self, source, kernels=(), threads=1):
        self.source, self.kernels, self.threads = source, tuple(kernels), int(threads)
        self.token = uuid.uuid4().hex


#: Compiled objects of this process, by recipe token (the most recent few).
_compiled: OrderedDict = OrderedDict()
_KEEP = 8


def compiled(recipe: Recipe):
    """The compiled object of ``recipe`` in this process (built or loaded from the cache on the
    first call, then kept)."""
    k = _compiled.get(recipe.token)
    if k is None:
        from ..codegen import compile
        k = compile(recipe.source, recipe.kernels)
        k.threads = recipe.threads
        _compiled[recipe.token] = k
        while len(_compiled) > _KEEP:
            _compiled.popitem(last=False)
    else:
        _compiled.move_to_end(recipe.token)
    return k


def _source(obj):
    """``(what to send to the workers, the object to run here)`` for a model, an estimator, an
    estimation problem or their compiled forms."""
    from ..estimation import EstimationProblem, Estimator
    from ..model import Model
    if isinstance(obj, (Model, Estimator)):
        return obj
    if isinstance(obj, EstimationProblem):
        return obj.analyze()
    for attr in ("estimator", "model"):                  # a CompiledEstimator, a CompiledModel
        src = getattr(obj, attr, None)
        if isinstance(src, (Model, Estimator)):
            return src
    raise TypeError(f"sparsedyn.interop.dask: expected a Model, an EstimationProblem, an Estimator or one of "
                    f"their compiled forms, got {type(obj).__name__}")


def warm(obj, kernels=()):
    """Compile ``obj`` in this process (so that its library is in this machine's build cache):
    ``client.run(warm, estimator)`` builds it on every worker before a computation."""
    from ..codegen import compile
    compile(_source(obj), tuple(kernels))


def _batched(arrays, names):
    """The arrays as Dask arrays with the same chunks along axis 0 (whole states per chunk)."""
    da = _da()
    first = next((a for a in arrays if isinstance(a, da.Array)), None)
    if first is None:
        raise TypeError(f"sparsedyn.interop.dask: none of {', '.join(names)} is a Dask array; call the compiled "
                        f"function directly on NumPy arrays")
    n, chunks = first.shape[0], first.chunks[0]
    out = []
    for name, a in zip(names, arrays):
        if not isinstance(a, da.Array):
            try:
                a = np.asarray(a, float)
            except (TypeError, ValueError) as e:
                raise TypeError(f"{name}: expected a Dask or NumPy array of numbers; {e}") from None
        if a.ndim != 2 or a.shape[0] != n:
            raise ValueError(f"{name}: expected shape ({n}, k) (states along axis 0, as the first Dask array), "
                             f"got {a.shape}")
        a = a if isinstance(a, da.Array) else da.from_array(a, chunks=(chunks,) + a.shape[1:])
        out.append(a.rechunk((chunks,) + a.shape[1:]))
    return out


def _packed(arrays_fn, recipe, fields, *blocks):
    """One chunk: the compiled object's results, flattened per state and concatenated."""
    res = arrays_fn(compiled(recipe), *blocks)
    n = blocks[0].shape[0]
    return np.concatenate([np.reshape(res[name], (n, int(np.prod(shape, dtype=int)))) for name, shape in fields],
                          axis=1)


def _unpack(packed, fields):
    out, c = {}, 0
    for name, shape in fields:
        size = int(np.prod(shape, dtype=int))
        out[name] = packed[:, c:c + size].reshape((packed.shape[0],) + tuple(shape))
        c += size
    return out


def _lazy(fn, recipe, fields, arrays):
    da = _da()
    import dask
    width = sum(int(np.prod(s, dtype=int)) for _, s in fields)
    rec = dask.delayed(recipe, pure=True, traverse=False)
    packed = da.map_blocks(_packed, fn, rec, fields, *[a for a in arrays],
                           dtype=float, chunks=(arrays[0].chunks[0], (width,)), meta=np.empty((0, 0)))
    return _unpack(packed, fields)


def _call_kernel(k, name, static, *blocks):
    res = getattr(k, name)(*blocks, **static)
    return {"out": res} if not isinstance(res, tuple) else {f"out{i}": r for i, r in enumerate(res)}


class _Kernel:
    """A picklable ``(compiled object, *blocks) -> {name: array}`` for :func:`call`."""

    def __init__(self, name, static):
        self.name, self.static = name, dict(static)

    def __call__(self, k, *blocks):
        return _call_kernel(k, self.name, self.static, *blocks)


def call(model, name, *arrays, threads=1, **static):
    """``sparsedyn.<name>(model, *arrays, **static)`` over Dask arrays, lazily, compiled in the workers.

    ``model``: a :class:`~sparsedyn.Model` or a compiled model; ``name``: a registered function
    (``"rnea"``, ``"crba"``, ``"frame_jacobian"`` ...); ``arrays``: its array arguments, each
    ``(N, ...)`` with the states along axis 0.  Returns a Dask array ``(N, ...)``, or a tuple of
    them for a function with several results.
    """
    from ..kernels import REGISTRY
    src = _source(model)
    if name not in REGISTRY:
        raise ValueError(f"sparsedyn.interop.dask.call: no function {name!r} among sparsedyn's registered functions "
                         f"(e.g. 'rnea', 'crba', 'frame_jacobian')")
    fn = REGISTRY[name].fn                  # the NumPy function: result shapes without compiling here
    arrays = _batched(arrays, [f"argument {i}" for i in range(len(arrays))])
    # result shapes from one state, in NumPy (no compilation on the client)
    one = [np.asarray(a[:1].compute())[0] for a in arrays]
    res = fn(src, *one, **static)
    several = isinstance(res, tuple)
    res = res if several else (res,)
    fields = [(f"out{i}" if several else "out", np.shape(r)) for i, r in enumerate(res)]
    out = _lazy(_Kernel(name, static), Recipe(src, (name,), threads), fields, arrays)
    return tuple(out[f] for f, _ in fields) if several else out["out"]


def estimate(estimator, q, v, y, *, residual=None, threads=1):
    """Estimates of an estimation problem over Dask arrays, lazily: ``{name: Dask array}``.

    ``estimator``: an :class:`~sparsedyn.EstimationProblem`, its
    :class:`~sparsedyn.estimation.Estimator` or a compiled estimator; ``q`` (N, nq), ``v`` (N, nv),
    ``y`` (N, ny) as for :meth:`Estimator.solve <sparsedyn.estimation.Estimator.solve>`.  The
    names are those of :func:`estimate_fields`: ``"tau"`` (N, nv),
    ``"contact[<name>]"`` (N, 6) per contact, ``"chi2"`` (N,) and, for a least-squares problem
    (or ``residual=True``), ``"residual"`` (N, ny), the measurements minus their prediction from
    the estimate.
    """
    src = _source(estimator)
    q, v, y = _batched([q, v, y], ["q", "v", "y"])
    fields = field_shapes(src, residual)
    return _lazy(_Estimates(residual), Recipe(src, (), threads), fields, [q, v, y])


class _Estimates:
    def __init__(self, residual):
        self.residual = residual

    def __call__(self, k, q, v, y):
        return estimate_fields(k, q, v, y, self.residual)


# --- the estimates of a batch, by name (also what sparsedyn.recording writes) -----------------

def _wants_residual(estimator, residual):
    return (not estimator.square) if residual is None else bool(residual)


def field_shapes(estimator, residual=None) -> list:
    """``[(name, per-state shape)]`` of :func:`estimate_fields` for ``estimator`` (an Estimator or a
    compiled one)."""
    p = estimator.problem
    out = [("tau", (p.model.nv,))] + [(f"contact[{c.name}]", (6,)) for c in p.contacts] + [("chi2", ())]
    if _wants_residual(estimator, residual):
        out.append(("residual", (p.ny,)))
    return out


def estimate_fields(estimator, q, v, y, residual=None) -> dict:
    """``{name: array}``: the estimates of a batch (see the module docstring) from
    ``estimator.solve(q, v, y)`` (an Estimator or a compiled one); ``residual``: ``None`` for
    least-squares problems only, or ``True`` / ``False``."""
    e = estimator.solve(q, v, y)
    out = {"tau": e.tau}
    out.update({f"contact[{name}]": w for name, w in e.contacts.items()})
    out["chi2"] = np.broadcast_to(np.asarray(e.chi2, float), np.shape(e.tau)[:-1])
    if _wants_residual(estimator, residual):
        p = estimator.problem
        out["residual"] = y - p.predict(q, v, e.d)
    return out
