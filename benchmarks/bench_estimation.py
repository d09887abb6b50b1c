"""Compiled vs NumPy estimators on Nori's humanoid case study, side by side in one run.

    .venv/bin/python benchmarks/bench_estimation.py                    # fresh build cache, batch 10000
    .venv/bin/python benchmarks/bench_estimation.py --batch 2000 --cache --cases ankle-ft

For each case (sparsedyn.estimation.casestudy.case_problems on the built-in humanoid):
median microseconds per single-state ``solve`` from Python (NumPy estimator, compiled
estimator, and the compiled kernel alone), states/s on a batch of random consistent
states (``solve`` of the whole batch in one call), their ratios, the flops of one solve
from the compiled program's IR (the estimate alone and with the run-time check
values) next to ``Estimator.flops()`` (the tracer's count), states the kernel sent
back to the NumPy path, and the largest relative difference to the NumPy estimates.
Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
import timeit

import numpy as np


def _best(fn, number, repeat=5):
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def _mad(f):
    return f["mul"] + f["add"] + f["div"]


def run_case(name, problem, batch, rng, log):
    import sparsedyn as sd
    from sparsedyn.estimation.casestudy import consistent_state, sample_noise

    t0 = time.perf_counter()
    est = problem.analyze()
    t_offline = time.perf_counter() - t0
    t0 = time.perf_counter()
    k = sd.compile(est, vectorize=True)
    t_build = time.perf_counter() - t0
    log(f"{name}: offline phase {t_offline:.1f} s, compile {t_build:.1f} s; simulating {batch} states")
    q, qd, qdd, w = consistent_state(problem, rng, batch=(batch,))
    y, _ = problem.measurements(q, qd, qdd, w)
    if not est.square:
        y = y + sample_noise(problem, rng, (batch,))
    q1, qd1, y1 = q[0].copy(), qd[0].copy(), y[0].copy()
    args1 = (q1, qd1, y1) if problem.ny else (q1, qd1)
    argsb = (q, qd, y) if problem.ny else (q, qd)
    row = {"case": name, "kind": est.verdict.kind, "n": est.n, "build_s": t_build}
    row["numpy_us"] = _best(lambda: est.solve(q1, qd1, y1), 3) * 1e6
    row["comp_us"] = _best(lambda: k.solve(q1, qd1, y1), 200) * 1e6
    row["kernel_us"] = _best(lambda: k.raw(*args1), 2000) * 1e6
    row["contacts_us"] = _best(lambda: k.solve(q1, qd1, y1).contacts, 200) * 1e6
    row["named_us"] = _best(lambda: k.solve(q1, qd1, y1).named(), 200) * 1e6
    log(f"{name}: single-state timings done; NumPy batch of {batch}")
    t0 = time.perf_counter()
    e0 = est.solve(q, qd, y)
    row["numpy_sps"] = batch / (time.perf_counter() - t0)
    row["comp_sps"] = batch / _best(lambda: k.solve(q, qd, y), 1, 3)
    row["kernel_sps"] = batch / _best(lambda: k.raw(*argsb), 1, 3)
    e1 = k.solve(q, qd, y)
    out = k.raw(*argsb)
    row["flagged"] = int(k.compiled_kernels.failed(k.kernel_name, tuple(out.values()), (batch,)).sum())
    diff = np.max(np.abs(e1.d - e0.d), -1) / np.maximum(1.0, np.max(np.abs(e0.d), -1))
    row["diff_max"], row["diff_med"] = float(diff.max()), float(np.median(diff))
    r, f = k.flops("result"), k.flops()
    ex = est.flops()
    row.update(ir=_mad(r), ir_checks=f["total"] - r["total"], ir_fun=r["sin"] + r["cos"] + r["sqrt"],
               tracer=ex["total"])
    row["gflops"] = f["total"] * row["kernel_sps"] / 1e9
    return row


def report(rows, batch, threads):
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    import sparsedyn.codegen.build as build
    comp = build.find_compiler()
    out = [f"Estimation, compiled vs NumPy ({platform.machine()}, {os.cpu_count()} CPUs, batch threads <= {threads}; "
           f"Python {platform.python_version()}, NumPy {np.__version__}; compiler "
           f"{comp.ident.split(' | ')[0] if comp else 'none'}); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
           f"single: median-of-best microseconds per solve() of one state from Python; batch: states/s for one "
           f"solve() of {batch} random consistent states",
           "",
           f"{'case':10s} {'kind':15s} | {'NumPy us':>9s} {'compiled us':>11s} {'kernel us':>9s} {'x':>5s} "
           f"{'+contacts':>9s} {'+named':>6s} | "
           f"{'NumPy st/s':>10s} {'compiled st/s':>13s} {'kernel st/s':>11s} {'x':>6s} | {'GFLOP/s':>7s} | "
           f"{'IR flops':>8s} {'+checks':>7s} {'tracer':>7s} | {'resolved':>8s} "
           f"{'max diff':>8s} {'median':>8s} | {'build s':>7s}"]
    for r in rows:
        out.append(
            f"{r['case']:10s} {r['kind']:15s} | {r['numpy_us']:9.0f} {r['comp_us']:11.1f} {r['kernel_us']:9.1f} "
            f"{r['numpy_us'] / r['comp_us']:5.0f} {r['contacts_us']:9.1f} {r['named_us']:6.1f} | "
            f"{r['numpy_sps']:10.0f} {r['comp_sps']:13.0f} {r['kernel_sps']:11.0f} "
            f"{r['comp_sps'] / r['numpy_sps']:6.0f} | {r['gflops']:7.2f} | {r['ir']:8d} {r['ir_checks']:7d} "
            f"{r['tracer']:7d} | {r['flagged']:8d} {r['diff_max']:8.1e} {r['diff_med']:8.1e} | "
            f"{r['build_s']:7.1f}")
    out += ["",
            "x: NumPy time / compiled time (single), compiled states/s / NumPy states/s (batch).  kernel: the native",
            "kernel alone (CompiledEstimator.raw: no input validation, checks or Estimate object).  +contacts, +named:",
            "a compiled solve() of one state that then reads the contact wrenches / builds Estimate.named().  GFLOP/s:",
            "IR flops (with checks, sin/cos counted) x kernel states/s.  IR flops: mul+add+div of the estimate after",
            "folding and CSE; +checks: the run-time check values; tracer: Estimator.flops()['total'] (least squares: one",
            "factorization, k+1 substitutions, normal equations, one refinement step).  resolved: batch states the",
            "kernel's checks sent to the NumPy path.  diff: relative difference to the NumPy estimates per state (max,",
            "median)."]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["eq23-nz", "ankle-ft", "redundant"])
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--cache", action="store_true", help="use the user's build cache instead of a fresh one")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    log = (lambda m: None) if a.quiet else (lambda m: print(f"  .. {m}", file=sys.stderr, flush=True))
    tmp = None
    if not a.cache:
        tmp = tempfile.mkdtemp(prefix="sparsedyn-bench-")
        os.chmod(tmp, 0o700)
        os.environ["SPARSEDYN_CACHE_DIR"] = tmp
    try:
        from sparsedyn.model.builders import humanoid
        from sparsedyn.estimation.casestudy import case_problems
        problems = case_problems(humanoid())
        rng = np.random.default_rng(a.seed)
        rows = [run_case(name, problems[name], a.batch, rng, log) for name in a.cases]
        print(report(rows, a.batch, os.cpu_count()))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
