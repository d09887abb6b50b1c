"""Joint torques and contact wrenches of a long recording, estimated chunk by chunk with Dask.

A compiled estimator pickles: each Dask worker process receives it, rebuilds it
from the build cache (milliseconds once one process has built it) and solves
its chunk of states in one batched call.  The dataset may be larger than one
machine's memory: Dask reads, solves and writes it a chunk at a time.

    pip install "dask[array]" distributed
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


def main(n_states=200_000, chunk=20_000):
    model = sd.humanoid()
    problem = problem_from_file(model, Path(__file__).with_name("humanoid_ankle_ft.toml"))
    k = sd.compile(problem)                       # a CompiledEstimator; built once, cached on disk

    # A recording: states (q, v, a) and what the sensors measured, in chunks of `chunk` rows.
    rng = np.random.default_rng(0)
    q, v, a, w = consistent_state(problem, rng, batch=(chunk,))
    y, truth = problem.simulate(q, v, a, w)
    reps = n_states // chunk
    Q = da.concatenate([da.from_array(q, chunks=(chunk, model.nq))] * reps)
    V = da.concatenate([da.from_array(v, chunks=(chunk, model.nv))] * reps)
    Y = da.concatenate([da.from_array(y, chunks=(chunk, y.shape[1]))] * reps)

    n = k.solve(q[:1], v[:1], y[:1]).d.shape[-1]  # size of the estimate d per state
    D = da.map_blocks(lambda q, v, y: k.solve(q, v, y).d, Q, V, Y,
                      dtype=float, chunks=(Q.chunks[0], (n,)))

    from dask.distributed import Client           # worker processes: the estimator is pickled to them
    with Client(processes=True, n_workers=2, threads_per_worker=1):
        d = D[-chunk:].compute()                  # or D.to_zarr(...) for a result larger than memory
    err = np.max(np.abs(d - truth["d"])) / np.max(np.abs(truth["d"]))
    print(f"{n_states} states in chunks of {chunk}: largest relative error of the last chunk {err:.1e}")


if __name__ == "__main__":
    main()
