"""Recordings: states and sensor readings in a file, estimated a chunk at a time (``sparsedyn estimate --recording``).

A recording is a ``.npz`` file (``numpy.savez``) or a Zarr store (a directory)
holding, with the states along axis 0 (``N`` rows):

* ``q`` (N, nq), ``v`` (N, nv): the states;
* ``y`` (N, ny): the measurement vector in the layout of
  :meth:`EstimationProblem.measurements <sparsedyn.EstimationProblem.measurements>`
  (``problem.layout_text()``: the known joint accelerations ``qdd`` first where
  the sensor file leaves them known, then each sensor), or ``y`` (N, ny - nqdd)
  with the sensors only and ``a`` (N, nv), from which the known accelerations are
  taken; ``a`` is not needed when the sensor file leaves every acceleration
  unknown.

The estimates are written in the same format (``.npz`` or Zarr) under the
names of :func:`estimate_fields`: ``tau`` (N, nv), ``contact[<name>]`` (N, 6)
per contact (the wrench on the robot in the contact frame, as
:attr:`Estimate.contacts <sparsedyn.estimation.Estimate.contacts>`), ``chi2``
(N,) (the weighted residual; zero for a square problem) and, for a
least-squares problem, ``residual`` (N, ny): the measurements minus their
prediction from the estimate (a square problem fits them exactly).

Arrays are read a chunk of rows at a time (Zarr stores by their chunks; a
``.npz`` written by ``numpy.savez`` is memory-mapped, a compressed one is read
whole), checked (every value finite; an error names the array and its first
bad row) and solved in one batched call of the compiled estimator, in this
process or, with ``workers``, on a local Dask cluster (see
:mod:`sparsedyn.interop.dask`).  Reading is safe against damaged or hostile
files (:mod:`sparsedyn.io.recordings`).  The output is written under a temporary
name next to ``out`` and renamed when complete: an interrupted or failed run
leaves no output (and an existing ``out`` untouched); an existing ``out`` is
replaced only with ``force=True`` (``--force``), the recording itself never
(:mod:`sparsedyn.io.output`).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from .interop.dask import estimate_fields, field_shapes
from .io.output import atomic_output, check_destination
from .io.recordings import Recording, RecordingError, open_recording

__all__ = ["RecordingError", "Recording", "open_recording", "estimate_fields", "field_shapes", "DEFAULT_CHUNK",
           "estimate_recording", "write_recording", "TerminalProgress", "recording_report",
           "identify_recording", "identify_report", "local_cluster"]

#: Rows per chunk when the recording does not say (a Zarr store's chunks do).
DEFAULT_CHUNK = 20_000


def _check_shapes(rec: Recording, want: dict, n, hint=None):
    """Every array ``name`` of ``want`` is present, numeric, of shape ``(n, want[name])``."""
    where = f"recording {str(rec.path)!r}"
    for name, cols in want.items():
        if name not in rec.names:
            raise RecordingError(f"{where}: no array {name!r} (it has {sorted(rec.names) or 'none'}); expected "
                                 + ", ".join(f"{k} (N, {c})" for k, c in want.items()))
        shape = rec.shape(name)
        rec.check_dtype(name)
        rec.check_complete(name)
        if len(shape) != 2 or shape[1] != cols or shape[0] != n:
            raise RecordingError(f"{where}: array {name!r} has shape {shape}, expected ({n}, {cols}) "
                                 f"(states along axis 0){(hint or {}).get(name, '')}")


def _read_finite(rec: Recording, names, start, stop) -> dict:
    """``{name: rows start:stop}``; a non-finite value raises, naming the array, its row and columns."""
    arrays = {name: rec.rows(name, start, stop) for name in names}
    for name, x in arrays.items():
        bad = ~np.all(np.isfinite(x), axis=1)
        if bad.any():
            row = start + int(np.argmax(bad))
            cols = np.nonzero(~np.isfinite(x[row - start]))[0].tolist()
            raise RecordingError(f"recording {str(rec.path)!r}: array {name!r}: row {row} is not finite (NaN or "
                                 f"infinite in column(s) {cols[:8]})")
    return arrays


class _Layout:
    """How a recording maps onto a problem: row count, and whether ``y`` needs ``a``."""

    def __init__(self, rec: Recording, problem):
        m = problem.model
        where = f"recording {str(rec.path)!r}"
        for name in ("q", "v", "y"):
            if name not in rec.names:
                raise RecordingError(f"{where}: no array {name!r} (it has {sorted(rec.names) or 'none'}); a "
                                     f"recording holds q (N, {m.nq}), v (N, {m.nv}) and y (N, {problem.ny})")
        nqdd = problem.addresses.get("qdd", (0, 0))[1]
        self.qdd = problem.addresses.get("qdd")
        self.n = rec.shape("q")[0] if len(rec.shape("q")) == 2 else None
        ny = rec.shape("y")[-1] if rec.shape("y") else None
        self.with_a = nqdd > 0 and ny == problem.ny - nqdd and "y" in rec.names
        want = {"q": m.nq, "v": m.nv, "y": problem.ny - nqdd if self.with_a else problem.ny}
        if self.with_a:
            want["a"] = m.nv
            if "a" not in rec.names:
                raise RecordingError(f"{where}: array 'y' holds the {problem.ny - nqdd} sensor values without the "
                                     f"{nqdd} known joint accelerations; then an array 'a' (N, {m.nv}) is needed")
        n = self.n if self.n is not None else (rec.shape("v")[0] if rec.shape("v") else None)
        hint = {"y": f"; the sensor file's measurement layout is {problem.layout_text()}"
                     + (f" (or ({n}, {problem.ny - nqdd}) without qdd, with an array 'a')" if nqdd else "")}
        _check_shapes(rec, want, n, hint)
        self.problem = problem
        self.names = tuple(want)

    def read(self, rec: Recording, start, stop):
        """``(q, v, y)`` rows ``start:stop``, every value checked finite."""
        arrays = _read_finite(rec, self.names, start, stop)
        y = arrays["y"]
        if self.with_a:
            s, k = self.qdd
            qdd = self.problem.known_accelerations(arrays["a"])
            y = np.concatenate([y[:, :s], qdd, y[:, s:]], axis=1)
        return arrays["q"], arrays["v"], y


# --- estimates --------------------------------------------------------------------------

# field_shapes and estimate_fields live in sparsedyn.interop.dask (the layer below this one).


# --- writing --------------------------------------------------------------------------------

class _Output:
    """Arrays ``{name: (n,) + shape}`` written by row ranges (in any order) to ``path`` (inside the
    private temporary directory ``tmp`` of :func:`~sparsedyn.io.output.atomic_output`); :meth:`close`
    finishes the file."""

    def __init__(self, tmp: Path, path: Path, fields, n, chunk):
        self.path, self.fields = path, list(fields)
        self.format = "zarr" if path.suffix == ".zarr" else "npz"
        if self.format == "zarr":
            import zarr
            g = zarr.open_group(str(path), mode="w")
            self.arrays = {name: g.create_array(name, shape=(n,) + tuple(s), chunks=(max(1, min(chunk, n)),) + tuple(s),
                                                dtype="f8", config={"write_empty_chunks": True})
                           for name, s in self.fields}
        else:
            self.dir = tmp
            self.arrays = {name: np.lib.format.open_memmap(tmp / f"{k}.npy", mode="w+", dtype=float,
                                                           shape=(n,) + tuple(s))
                           for k, (name, s) in enumerate(self.fields)}

    def write(self, start, values: dict):
        for name, _ in self.fields:
            x = values[name]
            self.arrays[name][start:start + len(x)] = x

    def close(self):
        if self.format == "npz":
            for a in self.arrays.values():
                a.flush()
            self.arrays = {}
            with zipfile.ZipFile(self.path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for k, (name, _) in enumerate(self.fields):
                    with open(self.dir / f"{k}.npy", "rb") as src, zf.open(name + ".npy", "w", force_zip64=True) as dst:
                        shutil.copyfileobj(src, dst, 1 << 22)
                    os.unlink(self.dir / f"{k}.npy")
        self.arrays = {}


def write_recording(path, arrays: dict, chunk=DEFAULT_CHUNK, *, force=False):
    """Write ``{name: array}`` (float arrays of any shape; Zarr chunks of ``chunk`` rows) as a ``.npz``
    file or a Zarr store (by the name of ``path``), under a temporary name renamed at the end.
    An existing ``path`` is replaced only with ``force=True`` (see :func:`~sparsedyn.io.output.atomic_output`)."""
    arrays = {k: np.asarray(v, float) for k, v in arrays.items()}
    with atomic_output(path, force=force, error=RecordingError) as (_, tmp):
        if tmp.suffix == ".zarr":
            import zarr
            g = zarr.open_group(str(tmp), mode="w")
            for k, x in arrays.items():
                z = g.create_array(k, shape=x.shape, dtype="f8", config={"write_empty_chunks": True},
                                   chunks=((max(1, min(chunk, x.shape[0])),) + x.shape[1:]) if x.ndim else ())
                z[...] = x
        else:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)


# --- progress -------------------------------------------------------------------------------

class TerminalProgress:
    """A one-line progress bar on ``stream`` (default stderr): chunks done, states per second, time left."""

    def __init__(self, stream=None, width=30):
        self.stream, self.width = stream or sys.stderr, width

    def __call__(self, rows, total_rows, chunks, total_chunks, elapsed):
        frac = rows / total_rows if total_rows else 1.0
        rate = rows / elapsed if elapsed > 0 else 0.0
        left = (total_rows - rows) / rate if rate > 0 else float("nan")
        bar = "#" * int(round(frac * self.width))
        eta = "--:--" if not np.isfinite(left) else f"{int(left // 60):02d}:{int(left % 60):02d}"
        self.stream.write(f"\r[{bar:<{self.width}}] {chunks}/{total_chunks} chunks  {rate:,.0f} states/s  "
                          f"{eta} left ")
        if chunks == total_chunks:
            self.stream.write("\n")
        self.stream.flush()


# --- the run --------------------------------------------------------------------------------

def _chunk_task(recipe, rec, start, stop, residual):
    """One chunk on a Dask worker: read, check, solve (the compiled estimator rebuilt there)."""
    from .interop.dask import compiled
    k = compiled(recipe)
    q, v, y = _Layout(rec, k.problem).read(rec, start, stop)
    return start, _solve_chunk(k, rec, start, q, v, y, residual)


def _solve_chunk(k, rec, start, q, v, y, residual):
    try:
        values = estimate_fields(k, q, v, y, residual)
    except RecordingError:
        raise
    except ValueError as e:                  # the estimator's own checks (q's quaternions ...)
        raise RecordingError(f"recording {str(rec.path)!r}: rows {start}..{start + len(q) - 1}: {e} (batch index "
                             f"counted from row {start})") from None
    for name, x in values.items():           # finite inputs so large that the solve overflows
        bad = ~np.isfinite(np.reshape(x, (len(x), -1))).all(axis=1)
        if bad.any():
            row = start + int(np.argmax(bad))
            raise RecordingError(f"recording {str(rec.path)!r}: row {row}: the estimate {name!r} is not finite: the "
                                 f"row's values are too large for double precision (they overflow in the solve)")
    return values


def estimate_recording(problem, recording, out, *, workers=0, chunk=None, progress=None, client=None,
                       residual=None, threads=None, force=False) -> dict:
    """Estimate every state of ``recording`` and write the estimates to ``out`` (see the module docstring).

    ``problem``: an :class:`~sparsedyn.EstimationProblem` or its
    :class:`~sparsedyn.estimation.Estimator`.  ``workers``: 0 solves in this process (compiled,
    ``threads`` threads: default all cores); ``N`` starts a local Dask cluster of ``N`` worker
    processes (one thread each); ``client``: a ``dask.distributed.Client`` of a running cluster
    instead.  ``chunk``: rows per batched call (default: the Zarr store's chunks, else
    :data:`DEFAULT_CHUNK`).  ``progress``: a callable ``(rows, total_rows, chunks, total_chunks,
    seconds)`` called after each chunk (:class:`TerminalProgress` draws a bar).

    ``force``: replace an existing ``out`` (never the recording itself; see
    :func:`~sparsedyn.io.output.atomic_output`).

    Returns ``{"states", "chunks", "seconds", "out"}``.  Raises :class:`RecordingError` (nothing
    written) for a recording that does not match the problem or holds a non-finite value, for an
    estimate that is not finite, and for an ``out`` that exists (without ``force``) or cannot be
    written.
    """
    from .estimation import EstimationProblem
    est = problem.analyze() if isinstance(problem, EstimationProblem) else problem
    rec = recording if isinstance(recording, Recording) else Recording(recording)
    layout = _Layout(rec, est.problem)
    n = layout.n
    chunk = int(chunk or rec.storage_chunk("q") or DEFAULT_CHUNK)
    if chunk < 1:
        raise ValueError(f"chunk: expected a positive number of rows, got {chunk}")
    starts = list(range(0, n, chunk))
    fields = field_shapes(est, residual)
    t0 = time.perf_counter()
    done = [0, 0]
    with atomic_output(out, force=force, sources=[rec.path], error=RecordingError) as (tmp, path):
        output = _Output(tmp, path, fields, n, chunk)

        def record(start, values):
            output.write(start, values)
            done[0] += len(values["tau"])
            done[1] += 1
            if progress:
                progress(done[0], n, done[1], len(starts), time.perf_counter() - t0)

        if workers or client is not None:
            _run_dask(est, rec, starts, chunk, n, residual, workers, client, record)
        else:
            import sparsedyn
            k = sparsedyn.compile(est)
            if threads is not None:
                k.threads = int(threads)
            for s in starts:
                q, v, y = layout.read(rec, s, min(s + chunk, n))
                record(s, _solve_chunk(k, rec, s, q, v, y, residual))
        output.close()
    return {"states": n, "chunks": len(starts), "seconds": time.perf_counter() - t0, "out": str(out)}


def _run_dask(est, rec, starts, chunk, n, residual, workers, client, record):
    from .interop.dask import Recipe
    own, client = _client(workers, client)
    try:
        recipe = client.scatter(Recipe(est, (), threads=1), broadcast=True, hash=False)   # hashing it costs seconds
        from dask.distributed import as_completed
        nworkers = max(1, len(client.scheduler_info().get("workers", {})) or int(workers or 1))
        pending = iter(starts)
        ac = as_completed()

        def submit():
            s = next(pending, None)
            if s is not None:
                ac.add(client.submit(_chunk_task, recipe, rec, s, min(s + chunk, n), residual, pure=False))

        for _ in range(2 * nworkers):                 # a bounded number of chunks in flight
            submit()
        for fut in ac:
            start, values = fut.result()
            fut.release()
            record(start, values)
            submit()
    finally:
        _close(own, client)


def _client(workers, client):
    """``(the cluster started here or None, a client)``: ``client``, or one of a new
    :func:`local_cluster` of ``workers`` processes."""
    if client is not None:
        return None, client
    if int(workers) < 1:
        raise ValueError(f"workers: expected a positive number of worker processes (or 0: this process), got {workers}")
    return local_cluster(workers)


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


def _close(own, client):
    if own is not None:
        client.close()
        own.close()


def recording_report(model, sensors, recording, out, *, workers=0, chunk=None, progress=None, force=False) -> str:
    """``sparsedyn estimate MODEL --sensors FILE --recording REC --out OUT``: the run's summary line.
    ``progress``: ``None`` draws :class:`TerminalProgress` when stderr is a terminal."""
    from .estimation import problem_from_file
    problem = problem_from_file(model, sensors)
    if progress is None and sys.stderr.isatty():
        progress = TerminalProgress()
    s = estimate_recording(problem, recording, out, workers=workers, chunk=chunk, progress=progress or None,
                           force=force)
    where = f"{workers} Dask worker process(es)" if workers else "this process"
    names = ", ".join(name for name, _ in field_shapes(problem.analyze()))
    return (f"{s['states']} states of {recording} in {s['chunks']} chunk(s) on {where}: {s['seconds']:.1f} s "
            f"({s['states'] / max(s['seconds'], 1e-9):,.0f} states/s) -> {out} ({names})")


# --- identification over a recording ---------------------------------------------------------

def _identify_chunk(model, rec, start, stop, sensors, sigma, base):
    """``(start, IdentificationData of rows start:stop)`` (on a Dask worker, or here)."""
    from .identification import IdentificationData
    want = ("q", "v", "a", "tau") + tuple(sensors)
    arrays = _read_finite(rec, want, start, stop)
    data = IdentificationData(model, sensors=sensors, sigma=sigma, base=base)
    try:
        return start, data.add(arrays["q"], arrays["v"], arrays["a"], arrays["tau"],
                               ft={s: arrays[s] for s in sensors})
    except ValueError as e:
        raise RecordingError(f"recording {str(rec.path)!r}: rows {start}..{stop - 1}: {e}") from None


def identify_recording(model, recording, out, *, sensors=(), sigma=None, physically_consistent=False,
                       workers=0, chunk=None, progress=None, client=None, force=False) -> dict:
    """Identify the inertial parameters of ``model`` from a recording and write them to ``out``.

    The recording holds ``q`` (N, nq), ``v``, ``a``, ``tau`` (N, nv) and, for each name in
    ``sensors`` (force/torque sensors of ``model.sensors``), that sensor's readings (N, 6).  Chunks
    are reduced to :class:`~sparsedyn.identification.IdentificationData` accumulators, in this process
    or on Dask workers (``workers``, ``client`` as in :func:`estimate_recording`), merged and solved.
    ``out`` (``.npz`` or Zarr) receives ``beta`` (r,), ``std`` (r,), ``covariance`` (r, r),
    ``parameters`` (10 NB,), ``residual_rms`` and ``sigma2`` (scalars); see
    :class:`~sparsedyn.identification.Identification`; an existing ``out`` is replaced only with
    ``force``, never the recording itself.  Returns ``{"states", "chunks", "seconds", "out",
    "result"}`` (``result`` the Identification).  A result that is not finite (values so large
    that the normal equations overflow) raises :class:`RecordingError`, nothing written.
    """
    from .identification import base_parameters
    rec = recording if isinstance(recording, Recording) else Recording(recording)
    check_destination(out, force=force, sources=[rec.path], error=RecordingError)   # before any work
    sensors = tuple(sensors)
    if "q" not in rec.names or len(rec.shape("q")) != 2:
        _check_shapes(rec, {"q": model.nq}, None)
    n = rec.shape("q")[0]
    _check_shapes(rec, {"q": model.nq, "v": model.nv, "a": model.nv, "tau": model.nv, **dict.fromkeys(sensors, 6)},
                  n)
    if n == 0:
        raise RecordingError(f"recording {str(rec.path)!r}: no states (its arrays have 0 rows)")
    base = base_parameters(model, sensors, joint_torques=True)
    chunk = int(chunk or rec.storage_chunk("q") or DEFAULT_CHUNK)
    if chunk < 1:
        raise ValueError(f"chunk: expected a positive number of rows, got {chunk}")
    starts = list(range(0, n, chunk))
    t0 = time.perf_counter()
    parts, done = [], [0]

    def record(part):
        start, data = part
        parts.append((start, data))
        done[0] += data.states
        if progress:
            progress(done[0], n, len(parts), len(starts), time.perf_counter() - t0)

    if workers or client is not None:
        own, client = _client(workers, client)
        try:
            futures = [client.submit(_identify_chunk, model, rec, s, min(s + chunk, n), sensors, sigma, base,
                                     pure=False) for s in starts]
            from dask.distributed import as_completed
            for fut in as_completed(futures):
                record(fut.result())
                fut.release()
        finally:
            _close(own, client)
    else:
        for s in starts:
            record(_identify_chunk(model, rec, s, min(s + chunk, n), sensors, sigma, base))
    parts = [d for _, d in sorted(parts, key=lambda x: x[0])]      # merged in row order, however they came
    result = parts[0].merge(*parts[1:]).solve(physically_consistent=physically_consistent)
    fields = {"beta": result.beta, "std": result.std, "covariance": result.covariance,
              "parameters": result.parameters, "residual_rms": result.residual_rms, "sigma2": result.sigma2}
    for name, x in fields.items():
        if not np.all(np.isfinite(x)):
            raise RecordingError(f"recording {str(rec.path)!r}: the identification's {name} is not finite: the "
                                 f"recording's values are too large for double precision (they overflow in the "
                                 f"normal equations); nothing written")
    write_recording(out, fields, force=force)
    return {"states": n, "chunks": len(starts), "seconds": time.perf_counter() - t0, "out": str(out),
            "result": result}


def identify_report(model, recording, out, *, sensors=(), sigma=None, physically_consistent=False, workers=0,
                    chunk=None, progress=None, force=False) -> str:
    """``sparsedyn identify MODEL --recording REC --out OUT``: the run's summary."""
    if progress is None and sys.stderr.isatty():
        progress = TerminalProgress()
    s = identify_recording(model, recording, out, sensors=sensors, sigma=sigma,
                           physically_consistent=physically_consistent, workers=workers, chunk=chunk,
                           progress=progress or None, force=force)
    r = s["result"]
    where = f"{workers} Dask worker process(es)" if workers else "this process"
    return (f"{s['states']} states of {recording} in {s['chunks']} chunk(s) on {where}: {s['seconds']:.1f} s; "
            f"{r.base.rank} base parameters, residual rms {r.residual_rms:.3g} (whitened), {r.dof} degrees of "
            f"freedom -> {out} (beta, std, covariance, parameters, residual_rms, sigma2)")
