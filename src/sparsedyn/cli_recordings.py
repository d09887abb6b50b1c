"""The command line's recordings: ``sparsedyn estimate --recording`` and ``sparsedyn identify``, their
summary lines and the progress bar they draw (the work: :mod:`sparsedyn.estimation.recordings`,
:mod:`sparsedyn.identification.recordings`; Dask workers: :mod:`sparsedyn.interop.dask`)."""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["TerminalProgress", "recording_report", "identify_report", "runner"]


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


def runner(workers):
    """``--workers N``: ``None`` (this process) for 0, else a :class:`~sparsedyn.interop.dask.DaskRunner`
    of a local cluster of ``N`` worker processes."""
    if not workers:
        return None
    from .interop.dask import DaskRunner
    return DaskRunner(workers=workers)


def _where(workers):
    return f"{workers} Dask worker process(es)" if workers else "this process"


def recording_report(model, sensors, recording, out, *, workers=0, chunk=None, progress=None, force=False) -> str:
    """``sparsedyn estimate MODEL --sensors FILE --recording REC --out OUT``: the run's summary line.
    ``progress``: ``None`` draws :class:`TerminalProgress` when stderr is a terminal."""
    from .estimation import problem_from_file
    from .estimation.recordings import estimate_recording, field_shapes
    problem = problem_from_file(model, sensors)
    if progress is None and sys.stderr.isatty():
        progress = TerminalProgress()
    s = estimate_recording(problem, recording, out, runner=runner(workers), chunk=chunk, progress=progress or None,
                           force=force)
    names = ", ".join(name for name, _ in field_shapes(problem.analyze()))
    return (f"{s['states']} states of {recording} in {s['chunks']} chunk(s) on {_where(workers)}: "
            f"{s['seconds']:.1f} s ({s['states'] / max(s['seconds'], 1e-9):,.0f} states/s) -> {out} ({names})")


def identify_report(model, recording, out, *, sensors=(), sigma=None, physically_consistent=False, workers=0,
                    chunk=None, progress=None, force=False) -> str:
    """``sparsedyn identify MODEL --recording REC --out OUT``: the run's summary."""
    from .identification.recordings import identify_recording
    if progress is None and sys.stderr.isatty():
        progress = TerminalProgress()
    s = identify_recording(model, recording, out, sensors=sensors, sigma=sigma,
                           physically_consistent=physically_consistent, runner=runner(workers), chunk=chunk,
                           progress=progress or None, force=force)
    r = s["result"]
    return (f"{s['states']} states of {recording} in {s['chunks']} chunk(s) on {_where(workers)}: "
            f"{s['seconds']:.1f} s; {r.base.rank} base parameters, residual rms {r.residual_rms:.3g} (whitened), "
            f"{r.dof} degrees of freedom -> {out} (beta, std, covariance, parameters, residual_rms, sigma2)")
