"""Recordings' chunks on Dask workers (sparsedyn.interop.dask.DaskRunner, ``--workers``): bit for bit the
in-process run, streaming through a Zarr store larger than a worker's memory limit, identification's
accumulators merged in row order."""

import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from recording_cases import SRC, chain, leftovers, states  # noqa: F401 (chain: a fixture)
from sparsedyn import cli
from sparsedyn import identification as idn
from sparsedyn.estimation.recordings import estimate_recording
from sparsedyn.identification.recordings import identify_recording
from sparsedyn.interop.dask import DaskRunner, local_cluster
from sparsedyn.io.recordings import write_recording
from sparsedyn.model.builders import builtin

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
    s = estimate_recording(square, rec, out, runner=DaskRunner(client=client))
    assert s["chunks"] == n // block
    tau = zarr.open_group(str(out), mode="r")["tau"]
    assert tau.shape == (n, model.nv) and tau.chunks == (block, model.nv)
    ref = sd.compile(square.analyze()).solve(q, v, y).tau
    for k in (0, n // block - 1):                       # first and last chunks: the in-process batch, bit for bit
        assert np.array_equal(tau[k * block:(k + 1) * block], ref)
    assert rel_err(ref, sd.rnea(model, q, v, a)) <= rounding_bound(model.nv, float(np.max(np.linalg.cond(
        sd.crba(model, q[:1000])))))



def test_identify_on_workers_equals_the_in_process_run(tmp_path, client):
    """Chunk accumulators made on the workers, merged in row order however they came back: the parameters
    of the in-process run bit for bit, and the true base parameters of noise-free torques."""
    model = builtin("chain7")
    q, v, a = idn.random_states(model, 3000, seed=5)
    rec = tmp_path / "log.zarr"
    write_recording(rec, {"q": q, "v": v, "a": a, "tau": sd.rnea(model, q, v, a)}, chunk=1000)
    identify_recording(model, rec, tmp_path / "here.npz")
    s = identify_recording(model, rec, tmp_path / "dask.zarr", runner=DaskRunner(client=client))
    assert s["chunks"] == 3
    here = np.load(tmp_path / "here.npz")
    there = zarr.open_group(str(tmp_path / "dask.zarr"), mode="r")
    for name in ("beta", "std", "covariance", "parameters", "residual_rms", "sigma2"):
        assert np.array_equal(here[name], np.asarray(there[name][...])), name
    truth = idn.base_parameters(model).base(model.inertial_parameters())
    assert rel_err(here["beta"], truth) < 1e-8


def test_a_runner_needs_workers_or_a_client():
    for workers in (0, -2):
        with pytest.raises(ValueError, match=rf"workers: expected a positive number of worker processes .*got {workers}"):
            DaskRunner(workers=workers)
