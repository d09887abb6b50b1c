"""sparsedyn.interop.dask: compiled functions and estimators over Dask arrays, on worker processes that
compile what they are sent; bit for bit the in-process batched calls on the same chunks.  Also runs
examples/dask_estimation.py at a small size."""

import runpy
import sys
from pathlib import Path



def no_folder_as_sparse():
    """Under pytest the folder tests/sparse (tests/ is on sys.path, also in spawned worker processes)
    passes for PyData's optional ``sparse`` package, which dask.array registers when it imports: mark
    the name as not installed when it is only that folder (a namespace package, no file)."""
    import importlib.util
    if "sparse" not in sys.modules:
        spec = importlib.util.find_spec("sparse")
        if spec is not None and spec.origin is None:
            sys.modules["sparse"] = None


no_folder_as_sparse()
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from dask.distributed import Client, LocalCluster

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sparsedyn.model.builders import builtin
from sparsedyn.estimation import ForceTorque, EstimationProblem
from sparsedyn.interop import dask as sdd
from sparsedyn.estimation.recordings import estimate_fields

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dask_estimation.py"


@pytest.fixture(scope="module")
def client():
    """One local cluster of two worker processes for the module (a start costs seconds)."""
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = Client(cluster)
    c.run(no_folder_as_sparse)
    yield c
    c.close()
    cluster.close()


def chunked(x, chunk):
    return da.from_array(x, chunks=(chunk, x.shape[1]))


def test_compiled_functions_over_dask_arrays(client):
    model = builtin("chain7")
    rng = np.random.default_rng(0)
    n, chunk = 3000, 1000
    q = rng.uniform(-2, 2, (n, model.nq))
    v, a = rng.normal(size=(2, n, model.nv))
    k = sd.compile(model, kernels=("rnea", "frame_placement"))
    tau = sdd.call(k, "rnea", chunked(q, chunk), chunked(v, chunk), a)      # a NumPy argument is chunked alike
    assert isinstance(tau, da.Array) and tau.shape == (n, model.nv) and tau.chunks[0] == (chunk,) * 3
    frame = model.frame_names[-1]
    R, p = sdd.call(model, "frame_placement", chunked(q, chunk), frame=frame)
    tau, R, p = da.compute(tau, R, p)
    for s in range(0, n, chunk):                    # the compiled batch on the same chunks, bit for bit
        assert np.array_equal(tau[s:s + chunk], k.rnea(q[s:s + chunk], v[s:s + chunk], a[s:s + chunk]))
        Rk, pk = k.frame_placement(q[s:s + chunk], frame=frame)
        assert np.array_equal(R[s:s + chunk], Rk) and np.array_equal(p[s:s + chunk], pk)
    assert rel_err(tau, sd.rnea(model, q, v, a)) <= rounding_bound(model.nv)
    assert rel_err(p, sd.frame_placement(model, q, frame)[1]) <= rounding_bound(model.nv)


def test_estimates_over_dask_arrays(client):
    model = builtin("chain7")
    problem = EstimationProblem(model, sensors=[ForceTorque("ft3", "joint3", covariance=0.01)])
    rng = np.random.default_rng(1)
    n, chunk = 2400, 800
    q = rng.uniform(-2, 2, (n, model.nq))
    v, a = rng.normal(size=(2, n, model.nv))
    y, truth = problem.measurements(q, v, a)
    est = sdd.estimate(problem, chunked(q, chunk), chunked(v, chunk), chunked(y, chunk))
    assert sorted(est) == ["chi2", "residual", "tau"] and est["residual"].shape == (n, problem.ny)
    got = dict(zip(est, da.compute(*est.values())))
    k = sd.compile(problem.analyze())
    for s in range(0, n, chunk):
        ref = estimate_fields(k, q[s:s + chunk], v[s:s + chunk], y[s:s + chunk])
        assert all(np.array_equal(got[name][s:s + chunk], ref[name]) for name in ref)
    H = sd.crba(model, q)
    assert rel_err(got["tau"], truth["tau"]) <= rounding_bound(model.nv, float(np.max(np.linalg.cond(H))))


def test_inputs_are_checked():
    model = builtin("chain7")
    q = np.zeros((10, model.nq))
    with pytest.raises(TypeError, match="none of .* is a Dask array"):
        sdd.call(model, "rnea", q, q, q)
    with pytest.raises(ValueError, match=r"argument 1: expected shape \(10, k\)"):
        sdd.call(model, "rnea", chunked(q, 5), q[:9], q)
    with pytest.raises(ValueError, match="no function 'rena'"):
        sdd.call(model, "rena", chunked(q, 5), q, q)
    with pytest.raises(TypeError, match="expected a Model, an EstimationProblem"):
        sdd.estimate("humanoid", chunked(q, 5), q, q)


def test_example_runs_at_a_small_size(client):
    ns = runpy.run_path(str(EXAMPLE), run_name="example")
    tau, left, e = ns["main"](n_states=3000, chunk=1000, client=client)
    assert np.array_equal(tau, e.tau) and np.array_equal(left, e.contacts["l_sole"])
