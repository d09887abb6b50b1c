"""Run time of one call: the unrolled code against the loops over tables (sparsedyn.codegen.cemit).

    nice .venv/bin/python benchmarks/bench_loops.py --models talos_full chain30 chain100 --kernels rnea aba crba minv

Both code shapes of each kernel are built (the build cache keys them apart), then timed one after
the other in this process (best of 7 repeats of ``timeit`` loops of one state).  Reported, never
asserted: the ratio loops / unrolled (> 1: the loops are slower) and the cold build times,
which set the default ``LOOP_THRESHOLD``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import timeit

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_build import kernel_of, load  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["talos_full", "chain30", "chain100"])
    ap.add_argument("--kernels", nargs="+", default=["rnea", "aba", "crba", "minv", "rnea_derivatives"])
    a = ap.parse_args(argv)
    from sparsedyn.codegen import build, cemit
    from sparsedyn.codegen.compiled_model import CompiledModel
    from sparsedyn.codegen.trace import trace
    compiler = build.find_compiler()
    print(f"{'model':<12}{'kernel':<18}{'ops':>9}{'unrolled us':>13}{'loops us':>10}{'ratio':>7}"
          f"{'build unrolled s':>18}{'build loops s':>15}")
    for m in a.models:
        model = load(m)
        rng = np.random.default_rng(0)
        q = model.random_configuration(rng)
        v, acc = rng.normal(size=(2, model.nv))
        for kn in a.kernels:
            spec = kernel_of(model, kn)
            ops = sum(1 for op, _, _ in trace(model, spec).nodes if op > 1)
            res = {}
            for shape, thr in (("unrolled", 1 << 62), ("loops", 0)):
                os.environ["SPARSEDYN_LOOP_THRESHOLD"] = str(thr)
                k = CompiledModel(model, compiler, vectorize=False)
                args = {"rnea": (q, v, acc), "aba": (q, v, acc), "rnea_derivatives": (q, v, acc),
                        "aba_derivatives": (q, v, acc)}.get(kn, (q,))
                static = {"frame": model.frames[model.nbodies - 1].name} if kn == "frame_jacobian" else {}
                f = getattr(k, kn)
                t0 = time.perf_counter()
                f(*args, **static)
                built = time.perf_counter() - t0
                n = max(1, int(0.02 / max(1e-7, timeit.timeit(lambda: f(*args, **static), number=3) / 3)))
                best = min(timeit.repeat(lambda: f(*args, **static), number=n, repeat=7)) / n
                res[shape] = (best, built)
            os.environ.pop("SPARSEDYN_LOOP_THRESHOLD", None)
            (tu, bu), (tl, bl) = res["unrolled"], res["loops"]
            print(f"{m:<12}{kn:<18}{ops:>9}{tu * 1e6:>13.2f}{tl * 1e6:>10.2f}{tl / tu:>7.2f}{bu:>18.2f}{bl:>15.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
