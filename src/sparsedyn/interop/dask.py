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
    set it to 1 by default (:func:`local_cluster` keeps the client's).

Threads
    A worker's compiled calls use ``threads`` threads (default 1, since Dask
    runs one task per worker thread already); pass ``threads=`` to use more.

Recordings on workers
    :class:`DaskRunner` is a runner of :mod:`sparsedyn.estimation.recordings`: it solves the chunks
    of a recording on a cluster (``estimate_recording(problem, rec, out,
    runner=DaskRunner(workers=4))``, ``sparsedyn estimate --recording ... --workers 4``), each
    worker reading its own chunks from the file.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

import numpy as np

from ..kernels import compile_owner
from ..estimation.recordings import estimate_fields, field_shapes

__all__ = ["call", "estimate", "warm", "compiled", "DaskRunner", "local_cluster"]


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
        k = compile_owner(recipe.source, recipe.kernels)
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
    compile_owner(_source(obj), tuple(kernels))


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


# --- a runner of recordings' chunks (sparsedyn.estimation.recordings) --------------------------

def local_cluster(workers, **kwargs):
    """``(cluster, client)``: a Dask ``LocalCluster`` of ``workers`` processes with one thread each, as
    ``--workers`` starts it.  Unlike Dask's default, the workers keep this process's BLAS and OpenMP
    thread settings (Dask sets them to 1): the rare states the compiled estimator hands back to NumPy
    are then solved by LAPACK with the same threads, so the results equal this process's bit for bit.
    ``kwargs`` go to ``LocalCluster`` (``memory_limit=`` ...)."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("--workers needs Dask: pip install 'sparsedyn[dask]'") from None
    env = {k: v for k, v in dict(dask.config.get("distributed.nanny.pre-spawn-environ", {})).items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        own = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=True, dashboard_address=None,
                           **kwargs)
    return own, Client(own)


def _compiled_task(task, recipe, *item):
    """``task(k, *item)`` on a worker, ``k`` the recipe's compiled object (built there once)."""
    return task(compiled(recipe), *item)


class DaskRunner:
    """A runner of :mod:`sparsedyn.estimation.recordings` on Dask: ``DaskRunner(workers=N)`` starts a
    :func:`local_cluster` of ``N`` worker processes for each run (and stops it after);
    ``DaskRunner(client=client)`` uses a running cluster.  A bounded number of chunks is in flight
    (two per worker); the results come back as they complete."""

    def __init__(self, workers=0, client=None):
        if client is None and int(workers) < 1:
            raise ValueError(f"workers: expected a positive number of worker processes (or 0: this process), "
                             f"got {workers}")
        self.workers, self.client = int(workers), client

    def map(self, task, items, compiled=None):
        own, client = (None, self.client) if self.client is not None else local_cluster(self.workers)
        try:
            from dask.distributed import as_completed
            if compiled is not None:        # each worker compiles it once; hashing it would cost seconds
                recipe = client.scatter(Recipe(compiled, (), threads=1), broadcast=True, hash=False)
                task, items = _compiled_task, [(task, recipe) + tuple(item) for item in items]
            nworkers = max(1, len(client.scheduler_info().get("workers", {})) or self.workers or 1)
            pending, ac = iter(items), as_completed()

            def submit():
                item = next(pending, None)
                if item is not None:
                    ac.add(client.submit(task, *item, pure=False))

            for _ in range(2 * nworkers):
                submit()
            for fut in ac:
                result = fut.result()
                fut.release()
                submit()
                yield result
        finally:
            if own is not None:
                client.close()
                own.close()
