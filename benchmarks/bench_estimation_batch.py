"""Batched estimation: one compiled ``solve`` of a long recording against a loop of single compiled calls.

    .venv/bin/python benchmarks/bench_estimation_batch.py                      # batch 20000, fresh cache
    .venv/bin/python benchmarks/bench_estimation_batch.py --cache --batch 5000 --no-icub

For each estimation problem (the built-in humanoid with ankle force/torque sensors and both feet in
contact, square; the same with redundant noisy sensors, least squares; iCub with the six
force/torque sensors of its URDF, least squares), in one run on the same warm estimator:

* batch: states/s of ``k.solve(q, v, y)`` on ``--batch`` random consistent states (input checks,
  one native call vectorised across states on the batch runtime's threads, the states its checks
  flag re-solved by NumPy, an Estimate), and of the kernel alone (``k.raw``);
* loop: states/s of ``for i: k.solve(q[i], v[i], y[i])`` (the C fast path of one state, an Estimate)
  over the first ``--loop`` states, the few whose checks flag them re-solved by NumPy as in the batch;
  clean: the same over as many states that no check flags (the C fast path alone);
* the ratios batch / loop and batch / clean, the states re-solved by NumPy, and the largest
  difference between the batch and the single calls (relative to the state's largest value);
* iDynTree (iCub only, when ``idyntree`` imports): microseconds per state of its
  ``ExtWrenchesAndJointTorquesEstimator`` (kinematics update + estimate), one state at a time.

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import contextlib
import os
import platform
import sys
import tempfile
import timeit
import warnings

import numpy as np


def _best(f, repeat=3):
    f()
    return min(timeit.repeat(f, number=1, repeat=repeat))


def run_case(name, problem, batch, loop, rng, log, spread=None):
    import sparsedyn as sd
    from sparsedyn.estimation.casestudy import consistent_state, sample_noise
    log(f"{name}: analysis and compile")
    est = problem.analyze()
    k = sd.compile(est)                                  # builds the single and the batch library
    model = problem.model
    Q = None
    if spread is not None:                               # a recording: poses around standing
        q0 = sd.humanoid_standing_configuration() if model.name == "humanoid" else model.neutral()
        Q = sd.integrate(model, q0, spread * rng.normal(size=(batch, model.nv)))
    q, v, a, w = consistent_state(problem, rng, q=Q, batch=(batch,))
    y, _ = problem.measurements(q, v, a, w)
    if not est.square:
        y = y + sample_noise(problem, rng, (batch,))
    log(f"{name}: timing")
    t_batch = _best(lambda: k.solve(q, v, y))
    t_kernel = _best(lambda: k.raw(q, v, y))
    n = min(loop, batch)

    def single_loop():
        for i in range(n):
            k.solve(q[i], v[i], y[i])
    t_loop = _best(single_loop) / n
    out = k.raw(q, v, y)
    bad = k.compiled_kernels.failed(k.kernel_name, tuple(out.values()), (batch,))
    clean = np.nonzero(~bad)[0][:n]                     # the loop without the states NumPy re-solves

    def clean_loop():
        for i in clean:
            k.solve(q[i], v[i], y[i])
    t_clean = _best(clean_loop) / len(clean)
    eb = k.solve(q, v, y)
    diff = max(np.max(np.abs(eb.d[i] - k.solve(q[i], v[i], y[i]).d)) / max(1.0, np.max(np.abs(eb.d[i])))
               for i in range(n))
    return dict(case=name, kind=est.verdict.kind, n=est.n, batch_sps=batch / t_batch, kernel_sps=batch / t_kernel,
                loop_sps=1.0 / t_loop, clean_sps=1.0 / t_clean, flagged=int(bad.sum()), flagged_loop=int(bad[:n].sum()),
                diff=diff, lanes=k.lanes, threads=k.threads)


def idyntree_us(rng):
    """Microseconds per state of iDynTree's estimator on iCub (see bench_all.icub_estimation)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_all
    bench_all.progress = lambda msg: None
    return bench_all.icub_estimation(rng)[2] * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=20000)
    ap.add_argument("--loop", type=int, default=2000, help="states in the loop of single calls")
    ap.add_argument("--cache", action="store_true", help="use the user's build cache (default: a fresh one)")
    ap.add_argument("--no-icub", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spread", type=float, default=None,
                    help="poses around standing (humanoid) or the neutral pose, this many rad of noise per "
                         "joint, instead of uniformly random configurations")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    log = lambda m: print(f"  .. {m}", file=sys.stderr, flush=True)   # noqa: E731
    with contextlib.ExitStack() as stack:
        if not a.cache:                                  # a fresh private build cache (mode 0700)
            os.environ["SPARSEDYN_CACHE_DIR"] = stack.enter_context(tempfile.TemporaryDirectory(prefix="sparsedyn-"))
        import sparsedyn as sd
        from sparsedyn.estimation import problem_from_file
        from sparsedyn.estimation.casestudy import case_problems
        here = os.path.dirname(os.path.abspath(__file__))
        humanoid = sd.humanoid()
        problems = {"humanoid ankle-ft": problem_from_file(humanoid, os.path.join(here, "..", "examples",
                                                                                  "humanoid_ankle_ft.toml")),
                    "humanoid redundant": case_problems(humanoid)["redundant"]}
        if not a.no_icub:
            from sparsedyn.interop import example_robot_data_dir
            icub = sd.load_urdf(example_robot_data_dir() / "icub_description/robots/icub.urdf", floating_base=True)
            problems["icub 6 F/T"] = problem_from_file(icub, os.path.join(here, "..", "examples",
                                                                          "icub_feet_contacts.toml"))
        rng = np.random.default_rng(a.seed)
        rows = [run_case(name, p, a.batch, a.loop, rng, log, a.spread) for name, p in problems.items()]
        idt = None
        if not a.no_icub:
            try:
                idt = idyntree_us(rng)
            except ImportError as e:
                log(f"iDynTree not installed ({e}); its column is left empty")
        load = os.getloadavg()
        print(f"Batched estimation ({platform.machine()}, {os.cpu_count()} CPUs, load average {load[0]:.2f}; "
              f"Python {platform.python_version()}, NumPy {np.__version__}); batch of {a.batch} states, "
              f"loop of {a.loop} single calls; configurations: "
              + ("uniformly random" if a.spread is None else f"standing/neutral + {a.spread} rad noise"))
        print(f"{'problem':20s} {'kind':15s} {'n':>4s} | {'batch st/s':>10s} {'kernel st/s':>11s} "
              f"{'loop st/s':>9s} {'batch/loop':>10s} | {'clean st/s':>10s} {'batch/clean':>11s} | {'us/state':>8s} "
              f"{'iDynTree us':>11s} | {'resolved':>8s} {'in loop':>7s} {'batch-single':>12s} | lanes threads")
        for r in rows:
            it = f"{idt:11.1f}" if (idt is not None and r["case"].startswith("icub")) else f"{'':11s}"
            print(f"{r['case']:20s} {r['kind']:15s} {r['n']:4d} | {r['batch_sps']:10.0f} {r['kernel_sps']:11.0f} "
                  f"{r['loop_sps']:9.0f} {r['batch_sps'] / r['loop_sps']:10.1f} | {r['clean_sps']:10.0f} "
                  f"{r['batch_sps'] / r['clean_sps']:11.1f} | {1e6 / r['batch_sps']:8.2f} {it} | "
                  f"{r['flagged']:8d} {r['flagged_loop']:7d} {r['diff']:12.1e} | {r['lanes']:5d} {r['threads']:7d}")
        print("batch: one k.solve of the whole batch (validation, native call, re-solves, Estimate); kernel: "
              "k.raw (the native call alone); loop: k.solve per state (the first --loop states, with the states "
              "among them that NumPy re-solves); clean: the same loop over as many states that NumPy does not "
              "re-solve; us/state: of the batch; resolved: states whose check values sent them to NumPy (of the "
              "batch; in loop: of the loop); batch-single: largest difference per state, relative.")


if __name__ == "__main__":
    main()
