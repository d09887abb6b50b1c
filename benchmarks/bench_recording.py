"""``sparsedyn estimate --recording`` on two Dask worker processes vs one in-process batched call.

    .venv/bin/python benchmarks/bench_recording.py                      # 1,000,000 humanoid states
    .venv/bin/python benchmarks/bench_recording.py --states 200000 --workers 2

The recording: the built-in humanoid on its ankle force/torque sensors
(examples/humanoid_ankle_ft.toml), ``--block`` random consistent states and their
noise-free measurements, repeated to ``--states`` rows, written as an uncompressed
``.npz`` in a temporary directory.  Side by side in one run, in this order:

1. one in-process batched call: the compiled estimator's ``solve`` on all states at once
   (arrays in memory, all cores), plus reading the contact wrenches;
2. ``estimate_recording(..., runner=DaskRunner(workers=N))`` (what ``--workers N`` runs): a local cluster of
   N worker processes, one thread each, reading, solving and writing the output ``.npz``;
   timed with the cluster start and, separately, on an already started cluster;
3. ``estimate_recording(...)``: the same chunks in this process (all cores, then one
   thread: on a loaded machine a fork-join over cores waits for its slowest thread);
4. the in-process batched call again (the machine's drift between 1 and 4).

Reported: states/s of each and the ratio of the Dask runs to the batched call.  Nothing
here is a test: numbers are reported, never asserted.
"""

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SENSORS = Path(__file__).resolve().parents[1] / "examples" / "humanoid_ankle_ft.toml"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--block", type=int, default=50_000, help="distinct states, repeated (default: %(default)s)")
    ap.add_argument("--chunk", type=int, default=50_000, help="rows per batched call (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the report (markdown) here too")
    args = ap.parse_args(argv)

    import sparsedyn as sd
    from sparsedyn.estimation import problem_from_file
    from sparsedyn.estimation.casestudy import consistent_state

    log = []

    def say(line):
        print(line, flush=True)
        log.append(line)
        if args.out:                                   # the report so far, after every line
            Path(args.out).write_text("\n".join(log) + "\n")

    model = sd.humanoid()
    problem = problem_from_file(model, SENSORS)
    est = problem.analyze()
    k = sd.compile(est)
    rng = np.random.default_rng(0)
    q, v, a, w = consistent_state(problem, rng, batch=(args.block,))
    y, _ = problem.measurements(q, v, a, w)
    k.solve(q[:100], v[:100], y[:100])                 # builds (or loads) the batch library
    reps = -(-args.states // args.block)
    Q, V, Y = (np.tile(x, (reps, 1))[:args.states] for x in (q, v, y))
    n = len(Q)
    say(f"# sparsedyn estimate --recording: {n:,} humanoid states, {args.workers} Dask workers vs one "
        f"in-process batched call")
    say("")
    say(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; "
        f"python {platform.python_version()}; chunks of {args.chunk:,} rows")
    rows = []
    same = _runs(est, k, (Q, V, Y), args, say, rows)
    base = max(rows[0][1], rows[-1][1])            # the slower of the two baselines: the ratio's lower end
    best = min(rows[0][1], rows[-1][1])
    say("")
    say(f"Dask output equal to the in-process run bit for bit: {same}")
    say("")
    say("| run | seconds | states/s | vs the batched call (slower .. faster of runs 1, 4) |")
    say("|---|---:|---:|---:|")
    for label, dt in rows:
        say(f"| {label} | {dt:.1f} | {n / dt:,.0f} | {best / dt:.0%} .. {base / dt:.0%} |")
    say("")
    say(f"load average at the end {os.getloadavg()[0]:.1f}")
    say(f"command: {' '.join([Path(sys.executable).name, 'benchmarks/bench_recording.py'] + (argv or sys.argv[1:]))}")


def _runs(est, k, states, args, say, rows):
    """The four runs on the recording of ``states`` ``(Q, V, Y)`` (written to a temporary .npz): the batched
    call, ``estimate_recording`` on Dask workers and in this process (all cores, one thread), the batched call
    again; each ``(label, seconds)`` appended to ``rows``.  Returns whether Dask's output equals the in-process
    run's bit for bit."""
    from sparsedyn.estimation.recordings import estimate_recording
    from sparsedyn.interop.dask import DaskRunner, local_cluster
    Q, V, Y = states
    n = len(Q)

    def batched(label):
        t0 = time.perf_counter()
        e = k.solve(Q, V, Y)
        e.contacts
        dt = time.perf_counter() - t0
        rows.append((label, dt))
        say(f"- {label}: {dt:.1f} s, {n / dt:,.0f} states/s")

    with tempfile.TemporaryDirectory(prefix="sd-bench-rec-") as tmp:
        rec = Path(tmp) / "log.npz"
        np.savez(rec, q=Q, v=V, y=Y)
        say(f"recording {rec.stat().st_size / 2**20:,.0f} MiB (.npz, uncompressed)")
        say("")
        batched("1. one in-process batched call (k.solve on all states, all cores)")
        t0 = time.perf_counter()
        cluster, client = local_cluster(args.workers)        # what --workers starts
        s = estimate_recording(est, rec, Path(tmp) / "dask.npz", runner=DaskRunner(client=client),
                               chunk=args.chunk)
        dt_all = time.perf_counter() - t0
        client.close()
        cluster.close()
        rows.append(("2. --workers (with the cluster start)", dt_all))
        rows.append(("2'. --workers (on the started cluster)", s["seconds"]))
        say(f"- 2. estimate_recording on {args.workers} workers, reading, solving, writing: {dt_all:.1f} s with the "
            f"cluster start ({n / dt_all:,.0f} states/s), {s['seconds']:.1f} s on the started cluster "
            f"({n / s['seconds']:,.0f} states/s)")
        s0 = estimate_recording(est, rec, Path(tmp) / "here.npz", chunk=args.chunk)
        rows.append(("3. in-process chunks", s0["seconds"]))
        say(f"- 3. estimate_recording in this process (same chunks, all cores): {s0['seconds']:.1f} s "
            f"({n / s0['seconds']:,.0f} states/s)")
        s1 = estimate_recording(est, rec, Path(tmp) / "here1.npz", chunk=args.chunk, threads=1)
        rows.append(("3'. in-process chunks, one thread", s1["seconds"]))
        say(f"- 3'. the same with one thread: {s1['seconds']:.1f} s ({n / s1['seconds']:,.0f} states/s)")
        a1, a2 = np.load(Path(tmp) / "dask.npz"), np.load(Path(tmp) / "here.npz")
        same = all(np.array_equal(a1[f], a2[f]) for f in a1.files)
        batched("4. one in-process batched call again")
    return same

if __name__ == "__main__":
    main()
