"""Joint torques and contact wrenches of a long recording, estimated chunk by chunk with Dask.

``sparsedyn.interop.dask.estimate`` maps the compiled estimator over Dask
arrays chunked along the states: each worker process compiles the estimator
it is sent (loaded from the build cache in milliseconds once the client has
built it) and solves its chunks in one batched call each.  The data may be
larger than one machine's memory: Dask reads, solves and writes it a chunk at
a time (``.to_zarr`` instead of ``.compute`` below).  For a recording on disk,
the command line does all of this: ``sparsedyn estimate humanoid --sensors
examples/humanoid_ankle_ft.toml --recording log.zarr --out est.zarr --workers 2``.

    pip install "sparsedyn[dask]"
    python examples/dask_estimation.py

(Here the recording is synthetic: states and noise-free measurements of the
built-in humanoid standing on its ankle force/torque sensors.)
"""

from pathlib import Path

import dask.array as da
import numpy as np

import sparsedyn as sd
from sparsedyn.estimation import problem_from_file
from sparsedyn.estimation.casestudy import consistent_state
from sparsedyn.interop import dask as sdd


def main(n_states=200_000, chunk=20_000, workers=2, client=None):
    """Estimate ``n_states`` states on a new local cluster of ``workers`` processes (or ``client``'s)."""
    model = sd.humanoid()
    problem = problem_from_file(model, Path(__file__).with_name("humanoid_ankle_ft.toml"))
    estimator = problem.analyze()                  # the offline phase: verdict, elimination order
    k = sd.compile(estimator)                      # native code, built once and cached on disk

    # A recording: states (q, v, a) and what the sensors measured, in chunks of `chunk` rows.
    rng = np.random.default_rng(0)
    q, v, a, w = consistent_state(problem, rng, batch=(chunk,))
    y, truth = problem.measurements(q, v, a, w)
    reps = n_states // chunk
    Q, V, Y = (da.concatenate([da.from_array(x, chunks=(chunk, x.shape[1]))] * reps) for x in (q, v, y))

    est = sdd.estimate(k, Q, V, Y)                 # lazy: {"tau": (N, nv), "contact[l_sole]": (N, 6), ...}

    from dask.distributed import Client           # worker processes: each compiles the estimator it is sent
    own = client is None
    client = client or Client(processes=True, n_workers=workers, threads_per_worker=1, dashboard_address=None)
    try:
        tau, left = da.compute(est["tau"][-chunk:], est["contact[l_sole]"][-chunk:])
        workers = len(client.scheduler_info()["workers"])
    finally:
        if own:
            client.close()
    err = max(np.max(np.abs(tau - truth["tau"])) / np.max(np.abs(truth["tau"])),
              np.max(np.abs(left - truth["contacts"]["l_sole"])) / np.max(np.abs(truth["contacts"]["l_sole"])))
    print(f"{n_states} states in chunks of {chunk} on {workers} workers: largest relative error of the last "
          f"chunk's torques and left contact wrench {err:.1e}")
    return tau, left, k.solve(q, v, y)


if __name__ == "__main__":
    main()
