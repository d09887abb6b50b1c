"""Recordings estimated chunk by chunk (sparsedyn.recording, ``sparsedyn estimate --recording``): in this
process and on Dask worker processes (bit for bit the same), streaming through a Zarr store larger than a
worker's memory limit, bad recordings refused with nothing written, interrupted runs leaving nothing."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sparsedyn import cli
from sparsedyn.model.builders import builtin
from sparsedyn.estimation import problem_from_file
from sparsedyn.recording import RecordingError, estimate_recording, local_cluster, open_recording, write_recording

SRC = str(Path(sd.__file__).resolve().parents[1])

#: chain7 (the CLI's built-in 7-link chain) with known accelerations, a redundant force/torque sensor and a
#: joint torque sensor: a least-squares problem, so the residuals are written too.
SENSORS = """
[[sensor]]
type = "force_torque"
name = "ft2"
joint = "joint2"
std = 0.1

[[sensor]]
type = "joint_torque"
name = "tau4"
joints = ["joint4"]
std = 0.05
"""

#: A worker's memory limit in the streaming test (a worker with sparsedyn, Zarr and a compiled
#: estimator loaded holds ~150 MiB), and the recording, larger than it.
WORKER_MEMORY = 256 * 2**20


@pytest.fixture(scope="module")
def client():
    """One local cluster of two worker processes for the module (a start costs seconds).  The memory
    limit is enforced by the nanny, which ends a worker past 95 % of it; pausing a worker near it
    (which would wait, not fail) is off."""
    import dask
    import distributed  # noqa: F401  (its configuration is loaded before it is changed here)
    with dask.config.set({"distributed.worker.memory.pause": False}):
        cluster, c = local_cluster(2, memory_limit=WORKER_MEMORY)         # as --workers 2 starts it
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    d = tmp_path_factory.mktemp("chain")
    (d / "chain.toml").write_text(SENSORS)
    model = builtin("chain7")
    problem = problem_from_file(model, d / "chain.toml")
    return model, problem, d / "chain.toml"


def states(problem, n, block=2000, seed=0):
    """``(q, v, a, y)`` of ``n`` states: ``block`` random states repeated (cheap to make, still every
    state solved on its own)."""
    rng = np.random.default_rng(seed)
    m = problem.model
    q = rng.uniform(-2, 2, (block, m.nq))
    v, a = rng.normal(size=(2, block, m.nv))
    y, _ = problem.measurements(q, v, a)
    reps = -(-n // block)
    return tuple(np.tile(x, (reps, 1))[:n] for x in (q, v, a, y))


def leftovers(d: Path):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_cli_on_two_worker_processes_equals_the_in_process_solve(chain, tmp_path, capsys):
    model, problem, sensors = chain
    q, v, a, y = states(problem, 100_000)
    rec = tmp_path / "log.npz"
    np.savez(rec, q=q, v=v, y=y)
    args = ["estimate", "chain7", "--sensors", str(sensors), "--recording", str(rec)]
    assert cli.main(args + ["--out", str(tmp_path / "here.npz")]) == 0
    assert "100000 states" in capsys.readouterr().out
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "sparsedyn", *args, "--out", str(tmp_path / "dask.npz"), "--workers",
                        "2"], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    assert "on 2 Dask worker process(es)" in r.stdout
    here, there = np.load(tmp_path / "here.npz"), np.load(tmp_path / "dask.npz")
    assert sorted(here.files) == sorted(there.files) == sorted(["tau", "chi2", "residual"])
    for name in here.files:
        assert np.array_equal(here[name], there[name]), name            # the same code on the same batches
    # and they are the estimates: the compiled solve of the whole batch, the classical torques, y's fit
    k = sd.compile(problem.analyze())
    whole = k.solve(q, v, y)
    H = sd.crba(model, q[:2000])
    bound = rounding_bound(model.nv, float(np.max(np.linalg.cond(H))))
    assert rel_err(here["tau"], whole.tau) <= bound and rel_err(here["chi2"], whole.chi2) <= bound
    assert rel_err(here["tau"], sd.rnea(model, q, v, a)) <= bound         # noise-free: the truth
    assert rel_err(here["residual"], np.zeros_like(y)) <= bound
    assert leftovers(tmp_path) == []


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


def test_zarr_recording_larger_than_a_worker_memory_limit_streams_through(chain, tmp_path, client):
    model, problem, _ = chain
    square = sd.EstimationProblem(model)                # inverse dynamics: y = the known accelerations
    block = 50_000
    n = 40 * block
    rec = tmp_path / "big.zarr"
    g = zarr.open_group(str(rec), mode="w")
    q, v, a, y = states(square, block, block=block, seed=3)
    arrays = {name: g.create_array(name, shape=(n, x.shape[1]), chunks=(block, x.shape[1]), dtype="f8")
              for name, x in (("q", q), ("v", v), ("y", y))}
    for s in range(0, n, block):                        # written a block at a time, never whole
        for name, x in (("q", q), ("v", v), ("y", y)):
            arrays[name][s:s + block] = x
    size = sum(x.nbytes for x in (q, v, y)) * (n // block)
    assert size > WORKER_MEMORY
    assert client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit) == \
        dict.fromkeys(client.scheduler_info()["workers"], WORKER_MEMORY)
    out = tmp_path / "est.zarr"
    s = estimate_recording(square, rec, out, client=client)
    assert s["chunks"] == n // block
    tau = zarr.open_group(str(out), mode="r")["tau"]
    assert tau.shape == (n, model.nv) and tau.chunks == (block, model.nv)
    ref = sd.compile(square.analyze()).solve(q, v, y).tau
    for k in (0, n // block - 1):                       # first and last chunks: the in-process batch, bit for bit
        assert np.array_equal(tau[k * block:(k + 1) * block], ref)
    assert rel_err(ref, sd.rnea(model, q, v, a)) <= rounding_bound(model.nv, float(np.max(np.linalg.cond(
        sd.crba(model, q[:1000])))))


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


def test_cli_bad_recording_is_one_error_line(chain, tmp_path, capsys):
    _, problem, sensors = chain
    q, v, a, y = states(problem, 50)
    np.savez(tmp_path / "bad.npz", q=q, v=v, y=y[:, 1:])
    out = tmp_path / "est.npz"
    assert cli.main(["estimate", "chain7", "--sensors", str(sensors), "--recording", str(tmp_path / "bad.npz"),
                     "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "array 'y' has shape (50, 13)" in err
    assert not out.exists()
    assert cli.main(["estimate", "chain7", "--sensors", str(sensors), "--recording", str(tmp_path / "bad.npz")]) == 2


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


def test_write_recording_round_trip(tmp_path):
    x = np.arange(12.0).reshape(6, 2)
    for name in ("r.npz", "r.zarr"):
        write_recording(tmp_path / name, {"q": x, "y": 2 * x}, chunk=4)
        rec = open_recording(tmp_path / name)
        assert sorted(rec.names) == ["q", "y"] and rec.shape("y") == (6, 2)
        assert np.array_equal(rec.rows("y", 1, 5), 2 * x[1:5])
    assert open_recording(tmp_path / "r.zarr").storage_chunk("q") == 4


def test_identify_a_recording_in_process_and_on_workers(tmp_path, client, capsys):
    """``sparsedyn identify`` over a recording: chunk accumulators (here, and on the module's workers,
    merged in row order) give the same parameters bit for bit, and the true base parameters of
    noise-free torques (the model's own, by the identification's regressor identity)."""
    from sparsedyn import identification as idn
    from sparsedyn.recording import identify_recording
    model = builtin("chain7")
    q, v, a = idn.random_states(model, 3000, seed=5)
    tau = sd.rnea(model, q, v, a)
    rec = tmp_path / "log.zarr"
    write_recording(rec, {"q": q, "v": v, "a": a, "tau": tau}, chunk=1000)
    out = tmp_path / "params.npz"
    assert cli.main(["identify", "chain7", "--recording", str(rec), "--out", str(out)]) == 0
    assert "3000 states" in capsys.readouterr().out
    s = identify_recording(model, rec, tmp_path / "dask.zarr", client=client)
    assert s["chunks"] == 3
    here = np.load(out)
    there = zarr.open_group(str(tmp_path / "dask.zarr"), mode="r")
    for name in ("beta", "std", "covariance", "parameters", "residual_rms", "sigma2"):
        assert np.array_equal(here[name], np.asarray(there[name][...])), name
    base = idn.base_parameters(model)
    truth = base.base(model.inertial_parameters())
    assert rel_err(here["beta"], truth) < 1e-8                     # as tests/test_identification.py's recovery
    # a bad row is named, and nothing is written
    bad = tau.copy()
    bad[1234, 2] = np.nan
    write_recording(tmp_path / "bad.npz", {"q": q, "v": v, "a": a, "tau": bad})
    with pytest.raises(RecordingError, match=r"array 'tau': row 1234 is not finite"):
        identify_recording(model, tmp_path / "bad.npz", tmp_path / "never.npz", chunk=500)
    write_recording(tmp_path / "short.npz", {"q": q, "v": v, "a": a})
    with pytest.raises(RecordingError, match=r"no array 'tau'"):
        identify_recording(model, tmp_path / "short.npz", tmp_path / "never.npz")
    assert not (tmp_path / "never.npz").exists() and leftovers(tmp_path) == []


def test_out_never_destroys_an_existing_directory_file_or_the_recording(chain, tmp_path, capsys):
    """``--out`` naming an existing directory of other files, an existing output, or the recording itself
    is one error line naming it; nothing is changed.  ``--force`` replaces an earlier output only."""
    _, problem, sensors = chain
    q, v, a, y = states(problem, 50)
    rec = tmp_path / "rec.npz"
    np.savez(rec, q=q, v=v, y=y)
    (tmp_path / "results.zarr").mkdir()
    (tmp_path / "results.zarr" / "notes.txt").write_text("x")
    est = ["estimate", "chain7", "--sensors", str(sensors), "--recording", str(rec), "--out"]
    for out in ("results.zarr", "rec.npz"):
        for force in ([], ["--force"]):
            assert cli.main(est + [str(tmp_path / out)] + force) == 1
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and f"output '{tmp_path / out}'" in err, err
    assert (tmp_path / "results.zarr" / "notes.txt").read_text() == "x"
    assert sorted(np.load(rec).files) == ["q", "v", "y"]
    assert cli.main(est + [str(tmp_path / "est.npz")]) == 0
    first = np.load(tmp_path / "est.npz")["tau"]
    np.savez(rec, q=q, v=2 * v, y=y)
    assert cli.main(est + [str(tmp_path / "est.npz")]) == 1
    assert "already exists" in capsys.readouterr().err
    assert np.array_equal(np.load(tmp_path / "est.npz")["tau"], first)
    assert cli.main(est + [str(tmp_path / "est.npz"), "--force"]) == 0
    assert not np.array_equal(np.load(tmp_path / "est.npz")["tau"], first)
    ident = ["identify", "chain7", "--recording", str(rec), "--out"]
    assert cli.main(ident + [str(rec), "--force"]) == 1 and "is the input" in capsys.readouterr().err
    assert cli.main(ident + [str(tmp_path / "missing" / "p.npz")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


LIMITED_RUN = """
import resource, sys
from sparsedyn.estimation import problem_from_file
from sparsedyn.model.builders import builtin
from sparsedyn.recording import estimate_recording
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


def test_values_so_large_that_the_solve_overflows_are_an_error_not_inf(chain, tmp_path, capsys):
    """y = 1e300 once wrote chi2 = inf, and identify with tau = 1e300 non-finite covariances, with exit 0."""
    _, problem, sensors = chain
    q, v, a, y = states(problem, 300)
    y[123, 8] = 1e300                                 # a force/torque reading of ft2
    np.savez(tmp_path / "rec.npz", q=q, v=v, y=y)
    out = tmp_path / "est.npz"
    with pytest.raises(RecordingError, match=r"row 123: the estimate '\w+' is not finite"):
        estimate_recording(problem, tmp_path / "rec.npz", out, chunk=100)
    assert leftovers(tmp_path) == [] and not out.exists()
    from sparsedyn import identification as idn
    model = builtin("chain7")
    q, v, a = idn.random_states(model, 200, seed=2)
    np.savez(tmp_path / "id.npz", q=q, v=v, a=a, tau=np.full((200, model.nv), 1e300))
    assert cli.main(["identify", "chain7", "--recording", str(tmp_path / "id.npz"), "--out", str(tmp_path / "p.npz")]) \
        == 1
    err = capsys.readouterr().err
    assert "is not finite" in err and "nothing written" in err and not (tmp_path / "p.npz").exists()
