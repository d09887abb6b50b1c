"""Streaming inertial-parameter identification on long recordings: speed and memory, a table.

    .venv/bin/python benchmarks/bench_identify.py          # panda 100,000; talos 20,000; iCub + 6 F/T 20,000
    .venv/bin/python benchmarks/bench_identify.py --runs panda:20000 icub+ft:5000

A run is ``ROBOT[+ft]:STATES`` (``ROBOT`` a name of example-robot-data's robots in tests/erd.py, or
``icub`` for iCub's full URDF with its six F/T sensors on fixed joints; ``+ft``: the model's F/T
sensors' readings are identified too).  For each, ``N`` random states (joint limits ignored) with
joint torques (noise 0.01 N m) and, with ``+ft``, sensor readings (noise 0.01 N, N m):

* ``sd.identify`` on the default (native) road: states/s of wall-clock time and of this process's
  CPU time (``time.process_time``, every thread of it: on a shared machine the wall clock includes
  other jobs' turns, and a BLAS with several threads adds theirs);
* beside it, what the arithmetic costs alone when done densely: the regressors of every state (the
  joint-torque regressor, and with ``+ft`` the joint wrenches of the sensors' joints) and the Gram
  matrix of all their rows (one dense ``syrk`` per chunk of 2,000 states; ``sd.identify`` skips the
  regressor's structural zeros, so it may take less), and the ratio of the two (CPU time);
* the peak memory beyond the inputs while identifying (``tracemalloc``, in a separate call on at
  most 5,000 states: the streaming keeps it independent of ``N``).

The base-parameter analysis is done once per model (outside the timing, as a second call of
``sd.identify`` finds it done).  The machine's load average is printed with the table.  Nothing here
is a test: numbers are reported, never asserted.
"""

import argparse
import os
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

DEFAULT_RUNS = ("panda:100000", "talos_reduced:20000", "icub+ft:20000")


def _load(robot):
    import sparsedyn as sd
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import erd
    if robot == "icub":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return sd.load_urdf(erd.robots_dir() / "icub_description/robots/icub.urdf")
    return erd.load_pair(robot, False)[0]


def _regressors_and_gram(model, q, v, a, joints, step=2000):
    """The arithmetic of identification alone: regressors and the Gram matrix of their rows."""
    import sparsedyn as sd
    from scipy.linalg.blas import dsyrk
    G = None
    for k in range(0, len(q), step):
        sl = slice(k, k + step)
        Y = sd.joint_torque_regressor(model, q[sl], v[sl], a[sl])
        rows = Y.reshape(-1, Y.shape[-1])
        if joints:
            W = sd.joint_wrench_regressor(model, q[sl], v[sl], a[sl], joints=joints)
            rows = np.concatenate([rows, W.reshape(-1, W.shape[-1])])
        G = dsyrk(1.0, rows.T) if G is None else G + dsyrk(1.0, rows.T)
    return G


def _timed(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def run(spec):
    import sparsedyn as sd
    from sparsedyn import identification as idn
    robot, n = spec.split(":")
    N = int(n)
    ft = robot.endswith("+ft")
    robot = robot[:-3] if ft else robot
    model = _load(robot)
    sensors = [s for s in model.sensors if s.kind == "force_torque"] if ft else []
    rng = np.random.default_rng(0)
    q, v, a = idn.random_states(model, N, seed=1)
    with sd.use_backend("native", deterministic=True):
        tau = sd.rnea(model, q, v, a) + 0.01 * rng.normal(size=(N, model.nv))
        ys = {s: sd.force_torque_regressor(model, q, v, a, s) @ sd.force_torque_parameters(model, s)
              + 0.01 * rng.normal(size=(N, 6)) for s in sensors}
        base = sd.base_parameters(model, sensors)
        k = min(N, 2000)                                        # builds the kernels, finds the analysis done
        sd.identify(model, q[:k], v[:k], a[:k], tau[:k], ft={s: y[:k] for s, y in ys.items()})
        fixed = {f.name: f.body for f in model.fixed_joints}             # the body a fixed joint is merged into
        joints = tuple(sorted({fixed[s.joint] if s.joint in fixed else model.joint(s.joint) for s in sensors}))
        _regressors_and_gram(model, q[:k], v[:k], a[:k], joints)
        res, dt, dc = _timed(lambda: sd.identify(model, q, v, a, tau, ft=ys))
        _, dt0, dc0 = _timed(lambda: _regressors_and_gram(model, q, v, a, joints))
        m = min(N, 5000)
        tracemalloc.start()
        sd.identify(model, q[:m], v[:m], a[:m], tau[:m], ft={s: y[:m] for s, y in ys.items()})
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    truth = base.of_model(model)
    err = np.linalg.norm(res.beta - truth) / np.linalg.norm(truth)
    what = f"{model.name} ({model.nv} dof{f', {len(sensors)} F/T' if sensors else ''}; {base.rank} base)"
    return what, N, N / dt, N / dc, N / dt0, N / dc0, dc / dc0, peak, err


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS), help="ROBOT[+ft]:STATES")
    args = p.parse_args(argv)
    load0 = os.getloadavg()[0]
    rows = [run(spec) for spec in args.runs]
    head = ("robot", "states", "identify/s", "per CPU s", "regr+Gram/s", "per CPU s", "CPU ratio", "peak MB",
            "beta err")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for what, N, r, cr, r0, cr0, ratio, peak, err in rows:
        print(f"| {what} | {N:,} | {r:,.0f} | {cr:,.0f} | {r0:,.0f} | {cr0:,.0f} | {ratio:.2f} | {peak / 1e6:.0f} "
              f"| {err:.1e} |")
    print(f"load average: {load0:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
