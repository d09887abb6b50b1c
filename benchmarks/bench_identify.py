"""Streaming inertial-parameter identification on a long recording: speed and memory, one run.

    .venv/bin/python benchmarks/bench_identify.py                     # panda, 100,000 states
    .venv/bin/python benchmarks/bench_identify.py --states 20000 --robot panda

For the robot (``example-robot-data``) and ``N`` random states with noisy joint torques:

* ``sparsedyn.identify`` with the compiled model (``sparsedyn.compile(model)``: native batched
  regressor) and with the NumPy model: states/s of wall-clock time, and of this process's CPU time
  (``time.process_time``; on a machine shared with other jobs the wall clock includes their turns;
  with several BLAS threads CPU time adds theirs: run with ``OPENBLAS_NUM_THREADS=1`` to compare);
* peak memory beyond the inputs while identifying (``tracemalloc``: NumPy reports its buffers to
  it; measured in a second, separate call so the tracing does not slow the timed one);
* side by side, what the same fit cost before it streamed: every regressor row stacked, then one
  least-squares solve (SciPy ``lstsq``), on at most 20,000 states (its memory grows with ``N``);
* Pinocchio's ``computeJointTorqueRegressor`` state by state (the peer's regressor alone, no solve).

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robot", default="panda")
    p.add_argument("--states", type=int, default=100_000)
    p.add_argument("--stacked", type=int, default=20_000, help="states for the all-rows-at-once reference")
    args = p.parse_args(argv)

    import sparsedyn as sd
    from sparsedyn import identification as idn
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import erd

    model = erd.load_pair(args.robot, False)[0]
    N = args.states
    rng = np.random.default_rng(0)
    q, v, a = idn.random_states(model, N, seed=1)
    tau = sd.rnea(model, q, v, a) + 0.01 * rng.normal(size=(N, model.nv))
    base = idn.base_parameters(model)
    print(f"{model.name}: nv={model.nv}, {model.nbodies} bodies, {base.rank} base parameters, {N} states, "
          f"inputs {sum(x.nbytes for x in (q, v, a, tau)) / 1e6:.1f} MB, chunk budget "
          f"{idn.CHUNK_BYTES / 2 ** 20:.0f} MiB")

    t = time.perf_counter()
    cm = sd.compile(model, kernels=["joint_torque_regressor"], vectorize=True)
    print(f"sd.compile (joint_torque_regressor, batch): {time.perf_counter() - t:.2f} s (cached after the first run)")
    sd.identify(cm, q[:2000], v[:2000], a[:2000], tau[:2000], base=base)          # warm the batch runtime

    rows = []
    for label, m, n in (("compiled", cm, N), ("NumPy", model, min(N, 20_000))):
        t, c = time.perf_counter(), time.process_time()
        res = sd.identify(m, q[:n], v[:n], a[:n], tau[:n], base=base)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        peak = _peak(lambda: sd.identify(m, q[:n], v[:n], a[:n], tau[:n], base=base))
        rows.append((f"sd.identify, {label} model", n, n / dt, n / dc, peak))
        if label == "compiled":
            beta = res.beta

    n = min(N, args.stacked)

    def stacked():
        from scipy.linalg import lstsq
        A = base.regressor(sd.joint_torque_regressor(cm, q[:n], v[:n], a[:n])).reshape(-1, base.rank)
        return lstsq(A, tau[:n].reshape(-1))[0]

    t, c = time.perf_counter(), time.process_time()
    stacked()
    dt, dc = time.perf_counter() - t, time.process_time() - c
    rows.append(("stacked rows + lstsq (before), compiled model", n, n / dt, n / dc, _peak(stacked)))

    try:
        import pinocchio as pin
        pm = erd.load_pair(args.robot, False)[1]
        data = pm.createData()
        k = min(N, 20_000)
        qp = q[:k]                                               # panda: revolute and prismatic joints only
        t, c = time.perf_counter(), time.process_time()
        for i in range(k):
            pin.computeJointTorqueRegressor(pm, data, qp[i], v[i], a[i])
        dt, dc = time.perf_counter() - t, time.process_time() - c
        rows.append(("pinocchio computeJointTorqueRegressor loop (regressor only)", k, k / dt, k / dc,
                     float("nan")))
    except Exception as e:                                       # noqa: BLE001 - a report, not a test
        print(f"pinocchio: not measured ({e})")

    print(f"{'what':62s} {'states':>8s} {'states/s':>10s} {'per CPU s':>10s} {'peak MB beyond inputs':>22s}")
    for what, n, rate, crate, peak in rows:
        print(f"{what:62s} {n:8d} {rate:10.0f} {crate:10.0f} {peak / 1e6:22.1f}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    truth = base.base(model.inertial_parameters())
    print(f"relative error of the base parameters (compiled, {N} states, noise 0.01 N m): "
          f"{np.linalg.norm(beta - truth) / np.linalg.norm(truth):.2e}")


if __name__ == "__main__":
    main()
