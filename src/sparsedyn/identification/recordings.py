"""Inertial parameters identified from a recording, a chunk at a time (``sparsedyn identify --recording``).

The recording (:mod:`sparsedyn.io.recordings`) holds ``q`` (N, nq), ``v``, ``a``, ``tau`` (N, nv)
and, for each force/torque sensor named, that sensor's readings (N, 6).  Each chunk is reduced to an
:class:`~sparsedyn.identification.IdentificationData` accumulator by a runner of
:mod:`sparsedyn.estimation.recordings` (this process, or Dask workers), and the accumulators are
merged in row order and solved.
"""

from __future__ import annotations

import time

import numpy as np

from ..estimation.recordings import InProcess, chunk_starts, finishing
from ..io.output import check_destination
from ..io.recordings import Recording, RecordingError, write_recording
from .least_squares import IdentificationData, base_parameters

__all__ = ["identify_recording", "identify_chunk"]


def identify_chunk(model, rec: Recording, start, stop, sensors, sigma, base):
    """``(start, IdentificationData of rows start:stop)``: the task a runner maps over the chunks."""
    arrays = rec.finite_rows(("q", "v", "a", "tau") + tuple(sensors), start, stop)
    data = IdentificationData(model, sensors=sensors, sigma=sigma, base=base)
    try:
        return start, data.add(arrays["q"], arrays["v"], arrays["a"], arrays["tau"],
                               ft={s: arrays[s] for s in sensors})
    except ValueError as e:
        raise RecordingError(f"{rec.label}: rows {start}..{stop - 1}: {e}") from None


def identify_recording(model, recording, out, *, sensors=(), sigma=None, physically_consistent=False, chunk=None,
                       progress=None, force=False, runner=None) -> dict:
    """Identify the inertial parameters of ``model`` from a recording and write them to ``out``.

    The recording holds ``q`` (N, nq), ``v``, ``a``, ``tau`` (N, nv) and, for each name in
    ``sensors`` (force/torque sensors of ``model.sensors``), that sensor's readings (N, 6).  Chunks
    are reduced to :class:`~sparsedyn.identification.IdentificationData` accumulators by ``runner``
    (this process by default, or :class:`sparsedyn.interop.dask.DaskRunner`; ``chunk`` and
    ``progress`` as in :func:`~sparsedyn.estimation.recordings.estimate_recording`), merged and solved.
    ``out`` (``.npz`` or Zarr) receives ``beta`` (r,), ``std`` (r,), ``covariance`` (r, r),
    ``parameters`` (10 NB,), ``residual_rms`` and ``sigma2`` (scalars); see
    :class:`~sparsedyn.identification.Identification`; an existing ``out`` is replaced only with
    ``force``, never the recording itself.  Returns ``{"states", "chunks", "seconds", "out",
    "result"}`` (``result`` the Identification).  A result that is not finite (values so large
    that the normal equations overflow) raises :class:`~sparsedyn.io.recordings.RecordingError`,
    nothing written.
    """
    rec = recording if isinstance(recording, Recording) else Recording(recording)
    check_destination(out, force=force, sources=[rec.path], error=RecordingError)   # before any work
    sensors = tuple(sensors)
    if "q" not in rec.names or len(rec.shape("q")) != 2:
        rec.require({"q": model.nq}, None)
    n = rec.shape("q")[0]
    rec.require({"q": model.nq, "v": model.nv, "a": model.nv, "tau": model.nv, **dict.fromkeys(sensors, 6)}, n)
    if n == 0:
        raise RecordingError(f"{rec.label}: no states (its arrays have 0 rows)")
    base = base_parameters(model, sensors, joint_torques=True)
    chunk, starts = chunk_starts(rec, n, chunk)
    runner = InProcess() if runner is None else runner
    t0, parts, rows = time.perf_counter(), [], 0
    items = [(model, rec, s, min(s + chunk, n), sensors, sigma, base) for s in starts]
    with finishing(runner.map(identify_chunk, items)) as results:
        for start, data in results:
            parts.append((start, data))
            rows += data.states
            if progress:
                progress(rows, n, len(parts), len(starts), time.perf_counter() - t0)
    parts = [d for _, d in sorted(parts, key=lambda x: x[0])]      # merged in row order, however they came
    result = parts[0].merge(*parts[1:]).solve(physically_consistent=physically_consistent)
    fields = {"beta": result.beta, "std": result.std, "covariance": result.covariance,
              "parameters": result.parameters, "residual_rms": result.residual_rms, "sigma2": result.sigma2}
    for name, x in fields.items():
        if not np.all(np.isfinite(x)):
            raise RecordingError(f"{rec.label}: the identification's {name} is not finite: the "
                                 f"recording's values are too large for double precision (they overflow in the "
                                 f"normal equations); nothing written")
    write_recording(out, fields, force=force)
    return {"states": n, "chunks": len(starts), "seconds": time.perf_counter() - t0, "out": str(out),
            "result": result}
