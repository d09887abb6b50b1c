"""Recordings estimated a chunk at a time (``sparsedyn estimate --recording``).

A recording (:mod:`sparsedyn.io.recordings`: a ``.npz`` file or a Zarr store) holds, with the states
along axis 0 (``N`` rows):

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
bad row) and solved in one batched call of the compiled estimator.

Who solves the chunks is a *runner*: an object with ``map(task, items, compiled=None)`` that returns
an iterator of ``task(*item)`` for every item of ``items`` (a list of tuples), in any order, or,
with ``compiled`` (an owner of kernels, see :mod:`sparsedyn.kernels`), of ``task(k, *item)`` with
``k`` the compiled ``compiled`` (``sparsedyn.compile(compiled)``, built once per process); ``task``
is a module-level function (picklable).  :class:`InProcess` (the default) runs them here, one after
the other; :class:`sparsedyn.interop.dask.DaskRunner` on the workers of a Dask cluster.

The output is written under a temporary name next to ``out`` and renamed when complete: an
interrupted or failed run leaves no output (and an existing ``out`` untouched); an existing ``out``
is replaced only with ``force=True`` (``--force``), the recording itself never
(:mod:`sparsedyn.io.output`).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from ..io.output import atomic_output
from ..io.recordings import DEFAULT_CHUNK, Recording, RecordingError, RecordingWriter
from ..kernels import compile_owner

__all__ = ["estimate_recording", "estimate_fields", "field_shapes", "estimate_chunk", "RecordingLayout", "InProcess",
           "chunk_starts", "finishing", "DEFAULT_CHUNK"]


class InProcess:
    """The runner that solves every chunk in this process, one after the other; a compiled object
    runs ``threads`` threads (default: all cores)."""

    def __init__(self, threads=None):
        self.threads = threads

    def map(self, task, items, compiled=None):
        if compiled is None:
            return (task(*item) for item in items)
        k = compile_owner(compiled)
        if self.threads is not None:
            k.threads = int(self.threads)
        return (task(k, *item) for item in items)


@contextlib.contextmanager
def finishing(results):
    """``results`` (a runner's iterator), closed on leaving (a runner's generator then stops its
    workers and the chunks still in flight, also when the loop over it raised)."""
    results = iter(results)
    try:
        yield results
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


def chunk_starts(rec: Recording, n, chunk=None) -> tuple:
    """``(chunk, starts)``: rows per chunk (``chunk``, else the Zarr store's chunks of ``q``, else
    :data:`DEFAULT_CHUNK`) and the first row of each chunk of ``n`` rows."""
    chunk = int(chunk or rec.storage_chunk("q") or DEFAULT_CHUNK)
    if chunk < 1:
        raise ValueError(f"chunk: expected a positive number of rows, got {chunk}")
    return chunk, list(range(0, n, chunk))


# --- the estimates of a batch, by name ------------------------------------------------------

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


# --- a recording read as a problem's states and measurements ---------------------------------

class RecordingLayout:
    """How recording ``rec`` maps onto ``problem``: its row count ``n``, and whether ``y`` needs ``a``.
    ``check``: raise (:class:`~sparsedyn.io.recordings.RecordingError`) unless every array the
    problem needs is there with its shape (a worker reading a checked recording skips it)."""

    def __init__(self, rec: Recording, problem, check=True):
        m = problem.model
        for name in ("q", "v", "y"):
            if check and name not in rec.names:
                raise RecordingError(f"{rec.label}: no array {name!r} (it has {sorted(rec.names) or 'none'}); a "
                                     f"recording holds q (N, {m.nq}), v (N, {m.nv}) and y (N, {problem.ny})")
        nqdd = problem.addresses.get("qdd", (0, 0))[1]
        self.qdd = problem.addresses.get("qdd")
        self.n = rec.shape("q")[0] if len(rec.shape("q")) == 2 else None
        ny = rec.shape("y")[-1] if rec.shape("y") else None
        self.with_a = nqdd > 0 and ny == problem.ny - nqdd and "y" in rec.names
        want = {"q": m.nq, "v": m.nv, "y": problem.ny - nqdd if self.with_a else problem.ny}
        if self.with_a:
            want["a"] = m.nv
        self.problem, self.names = problem, tuple(want)
        if not check:
            return
        if self.with_a and "a" not in rec.names:
            raise RecordingError(f"{rec.label}: array 'y' holds the {problem.ny - nqdd} sensor values without the "
                                 f"{nqdd} known joint accelerations; then an array 'a' (N, {m.nv}) is needed")
        n = self.n if self.n is not None else (rec.shape("v")[0] if rec.shape("v") else None)
        hint = {"y": f"; the sensor file's measurement layout is {problem.layout_text()}"
                     + (f" (or ({n}, {problem.ny - nqdd}) without qdd, with an array 'a')" if nqdd else "")}
        rec.require(want, n, hint)

    def read(self, rec: Recording, start, stop):
        """``(q, v, y)`` rows ``start:stop``, every value checked finite."""
        arrays = rec.finite_rows(self.names, start, stop)
        y = arrays["y"]
        if self.with_a:
            s, _ = self.qdd
            qdd = self.problem.known_accelerations(arrays["a"])
            y = np.concatenate([y[:, :s], qdd, y[:, s:]], axis=1)
        return arrays["q"], arrays["v"], y


def estimate_chunk(k, rec: Recording, start, stop, residual=None):
    """``(start, {name: rows start:stop of the estimates})``: one chunk read, checked and solved by
    ``k`` (a compiled estimator, or an Estimator), the task a runner maps over the chunks.  An
    estimate that is not finite raises :class:`~sparsedyn.io.recordings.RecordingError`."""
    q, v, y = RecordingLayout(rec, k.problem, check=False).read(rec, start, stop)
    try:
        values = estimate_fields(k, q, v, y, residual)
    except RecordingError:
        raise
    except ValueError as e:                  # the estimator's own checks (q's quaternions ...)
        raise RecordingError(f"{rec.label}: rows {start}..{start + len(q) - 1}: {e} (batch index "
                             f"counted from row {start})") from None
    for name, x in values.items():           # finite inputs so large that the solve overflows
        bad = ~np.isfinite(np.reshape(x, (len(x), -1))).all(axis=1)
        if bad.any():
            row = start + int(np.argmax(bad))
            raise RecordingError(f"{rec.label}: row {row}: the estimate {name!r} is not finite: the "
                                 f"row's values are too large for double precision (they overflow in the solve)")
    return start, values


def estimate_recording(problem, recording, out, *, chunk=None, progress=None, residual=None, threads=None,
                       force=False, runner=None) -> dict:
    """Estimate every state of ``recording`` and write the estimates to ``out`` (see the module docstring).

    ``problem``: an :class:`~sparsedyn.EstimationProblem` or its
    :class:`~sparsedyn.estimation.Estimator`.  ``runner``: who solves the chunks (see the module
    docstring): by default this process (compiled, ``threads`` threads: default all cores);
    ``sparsedyn.interop.dask.DaskRunner(workers=N)`` a local Dask cluster of ``N`` worker processes,
    ``DaskRunner(client=client)`` a running cluster.  ``chunk``: rows per batched call (default: the
    Zarr store's chunks, else :data:`DEFAULT_CHUNK`).  ``progress``: a callable ``(rows, total_rows,
    chunks, total_chunks, seconds)`` called after each chunk.

    ``force``: replace an existing ``out`` (never the recording itself; see
    :func:`~sparsedyn.io.output.atomic_output`).

    Returns ``{"states", "chunks", "seconds", "out"}``.  Raises :class:`~sparsedyn.io.recordings.RecordingError`
    (nothing written) for a recording that does not match the problem or holds a non-finite value,
    for an estimate that is not finite, and for an ``out`` that exists (without ``force``) or cannot
    be written.
    """
    from .problem import EstimationProblem
    est = problem.analyze() if isinstance(problem, EstimationProblem) else problem
    rec = recording if isinstance(recording, Recording) else Recording(recording)
    n = RecordingLayout(rec, est.problem).n
    chunk, starts = chunk_starts(rec, n, chunk)
    runner = InProcess(threads) if runner is None else runner
    t0, rows = time.perf_counter(), 0
    with atomic_output(out, force=force, sources=[rec.path], error=RecordingError) as (tmp, path):
        output = RecordingWriter(tmp, path, field_shapes(est, residual), n, chunk)
        items = [(rec, s, min(s + chunk, n), residual) for s in starts]
        with finishing(runner.map(estimate_chunk, items, compiled=est)) as results:
            for done, (start, values) in enumerate(results, 1):
                output.write(start, values)
                rows += len(values["tau"])
                if progress:
                    progress(rows, n, done, len(starts), time.perf_counter() - t0)
        output.close()
    return {"states": n, "chunks": len(starts), "seconds": time.perf_counter() - t0, "out": str(out)}
