"""Recordings estimated chunk by chunk (sparsedyn.estimation.recordings): missing known accelerations taken
from ``a``, a runner's results in any order, bad recordings refused with nothing written, interrupted runs and
full disks leaving nothing.  (On Dask workers: tests/interop/test_interop_dask_recordings.py; the command
line: tests/test_cli_recordings.py.)"""

import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from recording_cases import SRC, chain, leftovers, states  # noqa: F401 (chain: a fixture)
from sparsedyn.estimation.recordings import InProcess, estimate_recording
from sparsedyn.io.recordings import RecordingError, open_recording


def test_a_measurement_vector_without_qdd_takes_the_known_accelerations_from_a(chain, tmp_path):
    model, problem, _ = chain
    q, v, a, y = states(problem, 3000)
    s, k = problem.addresses["qdd"]
    np.savez(tmp_path / "full.npz", q=q, v=v, y=y)
    np.savez_compressed(tmp_path / "split.npz", q=q, v=v, a=a, y=np.delete(y, np.s_[s:s + k], axis=1))
    estimate_recording(problem, tmp_path / "full.npz", tmp_path / "o1.npz", chunk=1000)
    estimate_recording(problem, tmp_path / "split.npz", tmp_path / "o2.npz", chunk=1000)
    o1, o2 = np.load(tmp_path / "o1.npz"), np.load(tmp_path / "o2.npz")
    assert all(np.array_equal(o1[n], o2[n]) for n in o1.files)
    # y's qdd block is a's known accelerations: the recorded values, exactly
    assert np.array_equal(y[:, s:s + k], problem.known_accelerations(a))


def _expect_error(problem, rec, out, match):
    with pytest.raises(RecordingError, match=match):
        estimate_recording(problem, rec, out, chunk=100)
    assert not out.exists() and leftovers(out.parent) == []


def test_bad_recordings_name_the_array_and_row_and_write_nothing(chain, tmp_path):
    model, problem, _ = chain
    q, v, a, y = states(problem, 500)
    out = tmp_path / "out" / "est.npz"
    out.parent.mkdir()
    np.savez(tmp_path / "noy.npz", q=q, v=v)
    _expect_error(problem, tmp_path / "noy.npz", out, r"no array 'y'")
    np.savez(tmp_path / "shape.npz", q=q[:, :5], v=v, y=y)
    _expect_error(problem, tmp_path / "shape.npz", out, r"array 'q' has shape \(500, 5\), expected \(500, 7\)")
    np.savez(tmp_path / "rows.npz", q=q, v=v[:-1], y=y)
    _expect_error(problem, tmp_path / "rows.npz", out, r"array 'v' has shape \(499, 7\), expected \(500, 7\)")
    bad = v.copy()
    bad[377, 3] = np.nan
    bad[420] = np.inf
    np.savez(tmp_path / "nan.npz", q=q, v=bad, y=y)
    _expect_error(problem, tmp_path / "nan.npz", out, r"array 'v': row 377 is not finite .*column\(s\) \[3\]")
    # a sensor file that does not match: y of another layout
    np.savez(tmp_path / "other.npz", q=q, v=v, y=y[:, :-1])
    _expect_error(problem, tmp_path / "other.npz", out, r"array 'y' has shape \(500, 13\), expected \(500, 14\).*"
                                                         r"qdd \[0:7\], ft2 \[7:13\], tau4 \[13:14\]")
    np.savez(tmp_path / "noa.npz", q=q, v=v, y=y[:, 7:])
    _expect_error(problem, tmp_path / "noa.npz", out, r"an array 'a' \(N, 7\) is needed")
    (tmp_path / "text.npz").write_text("not a zip")
    _expect_error(problem, tmp_path / "text.npz", out, r"not a readable \.npz")
    with pytest.raises(RecordingError, match="no such file"):
        open_recording(tmp_path / "missing.npz")


@pytest.mark.parametrize("fmt", ["npz", "zarr"])
def test_an_interrupted_run_leaves_no_output_and_keeps_an_old_one(chain, tmp_path, fmt):
    _, problem, _ = chain
    q, v, a, y = states(problem, 1000)
    rec = tmp_path / "log.npz"
    np.savez(rec, q=q, v=v, y=y)
    out = tmp_path / f"est.{fmt}"
    estimate_recording(problem, rec, out, chunk=250)
    before = np.asarray((np.load(out) if fmt == "npz" else zarr.open_group(str(out), mode="r"))["tau"][:])

    def stop(rows, total, chunks, total_chunks, seconds):
        if chunks == 2:
            raise KeyboardInterrupt

    np.savez(rec, q=q, v=2 * v, y=y)
    with pytest.raises(KeyboardInterrupt):
        estimate_recording(problem, rec, out, chunk=250, progress=stop, force=True)
    after = np.asarray((np.load(out) if fmt == "npz" else zarr.open_group(str(out), mode="r"))["tau"][:])
    assert np.array_equal(before, after) and leftovers(tmp_path) == []


LIMITED_RUN = """
import resource, sys
from sparsedyn.estimation import problem_from_file
from sparsedyn.model.builders import builtin
from sparsedyn.estimation.recordings import estimate_recording
problem = problem_from_file(builtin("chain7"), sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))  # per file: below one chunk
try:
    estimate_recording(problem, sys.argv[2], sys.argv[3], chunk=5000)
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(1)
"""


@pytest.mark.parametrize("fmt", ["npz", "zarr"])
def test_a_full_disk_while_estimating_leaves_nothing(chain, tmp_path, fmt):
    """A file size limit (RLIMIT_FSIZE, in a subprocess) stands for a full disk: the run fails with an error
    naming the output, and leaves no temporary file."""
    _, problem, sensors = chain
    q, v, a, y = states(problem, 5000)
    (tmp_path / "in").mkdir()
    rec = tmp_path / "in" / "rec.npz"
    np.savez(rec, q=q, v=v, y=y)
    out = tmp_path / "out" / f"est.{fmt}"
    out.parent.mkdir()
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", LIMITED_RUN, str(sensors), str(rec), str(out)], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 1, r.stderr
    assert f"output '{out}': cannot write it" in r.stdout and "partial" not in r.stdout
    assert list(out.parent.iterdir()) == []


def test_a_zarr_store_declaring_rows_it_does_not_hold_is_refused_before_anything_is_written(chain, tmp_path):
    """Metadata claiming 10**10 rows with no chunk stored once allocated a 560 GB output and failed: the
    missing chunks are found first, and nothing is written."""
    _, problem, _ = chain
    g = zarr.open_group(str(tmp_path / "rec.zarr"), mode="w")
    for name, cols in (("q", 7), ("v", 7), ("y", 14)):
        g.create_array(name, shape=(10 ** 10, cols), chunks=(10 ** 6, cols), dtype="f8")
    (tmp_path / "out").mkdir()
    with pytest.raises(RecordingError, match=r"array 'q': 10000 of its 10000 chunks are missing"):
        estimate_recording(problem, tmp_path / "rec.zarr", tmp_path / "out" / "est.npz")
    assert list((tmp_path / "out").iterdir()) == []


def test_values_so_large_that_the_solve_overflows_are_an_error_not_inf(chain, tmp_path):
    """y = 1e300 once wrote chi2 = inf with exit 0."""
    _, problem, _ = chain
    q, v, a, y = states(problem, 300)
    y[123, 8] = 1e300                                 # a force/torque reading of ft2
    np.savez(tmp_path / "rec.npz", q=q, v=v, y=y)
    out = tmp_path / "est.npz"
    with pytest.raises(RecordingError, match=r"row 123: the estimate '\w+' is not finite"):
        estimate_recording(problem, tmp_path / "rec.npz", out, chunk=100)
    assert leftovers(tmp_path) == [] and not out.exists()


class Reversed(InProcess):
    """A runner that hands the chunks back last first (as workers may)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def map(self, task, items, compiled=None):
        self.calls += 1
        return reversed(list(super().map(task, items, compiled)))


def test_a_runner_may_return_the_chunks_in_any_order(chain, tmp_path):
    """The runner protocol: what a runner maps is written where its rows belong, whatever the order; the
    estimates are the compiled solve's of the whole batch, and the joint torques the classical ones."""
    model, problem, _ = chain
    q, v, a, y = states(problem, 1000)
    np.savez(tmp_path / "rec.npz", q=q, v=v, y=y)
    runner = Reversed()
    s = estimate_recording(problem, tmp_path / "rec.npz", tmp_path / "est.npz", chunk=300, runner=runner)
    assert runner.calls == 1 and s["chunks"] == 4 and s["states"] == 1000
    out = np.load(tmp_path / "est.npz")
    whole = sd.compile(problem.analyze()).solve(q, v, y)
    bound = rounding_bound(model.nv, float(np.max(np.linalg.cond(sd.crba(model, q[:500])))))
    assert rel_err(out["tau"], whole.tau) <= bound and rel_err(out["chi2"], whole.chi2) <= bound
    assert rel_err(out["tau"], sd.rnea(model, q, v, a)) <= bound          # noise-free: the truth
    assert sorted(out.files) == ["chi2", "residual", "tau"]
