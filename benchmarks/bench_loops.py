"""Run time of one call: the unrolled code against the loops over tables (sparsedyn.codegen.cemit).

    nice .venv/bin/python benchmarks/bench_loops.py --models talos_full chain30 chain100 --kernels rnea aba crba minv

Both code shapes of each kernel are built (the build cache keys them apart), then timed one after
the other in this process (alternately, the best of 100 short repeats of one state).  Reported, never
asserted: the ratio loops / unrolled (> 1: the loops are slower) and the CPU seconds of each cold
build (trace, emission and the C compiler's processes), which set the default ``LOOP_THRESHOLD``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_build import kernel_of, load  # noqa: E402


def _cpu():
    """CPU seconds of this process and of the compiler processes it ran (a build's cost, whatever
    else the machine runs)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["talos_full", "chain30", "chain100"])
    ap.add_argument("--kernels", nargs="+", default=["rnea", "aba", "crba", "minv", "rnea_derivatives"])
    a = ap.parse_args(argv)
    from sparsedyn.codegen import build
    from sparsedyn.codegen.compiled_model import CompiledModel
    from sparsedyn.codegen.trace import trace
    compiler = build.find_compiler()
    print(f"{'model':<12}{'kernel':<18}{'ops':>9}{'unrolled us':>13}{'loops us':>10}{'ratio':>7}"
          f"{'build unrolled cpu s':>22}{'build loops cpu s':>19}")
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
                        "aba_derivatives": (q, v, acc),
                        "centroidal_dynamics_derivatives": (q, v, acc)}.get(kn, (q,))
                static = {"frame": model.frames[model.nbodies - 1].name} if kn == "frame_jacobian" else {}
                f = getattr(k, kn)
                c0 = _cpu()
                f(*args, **static)
                built = _cpu() - c0
                res[shape] = (f, built)
            # Timed alternately, in short repeats (about 0.5 ms), the best of many: on a machine other
            # work shares, the best repeats are those no other process interrupted.
            fu, fl = res["unrolled"][0], res["loops"][0]
            n = max(1, int(5e-4 / max(1e-7, timeit.timeit(lambda: fu(*args, **static), number=3) / 3)))
            best = {"unrolled": np.inf, "loops": np.inf}
            for _ in range(100):
                for shape, f in (("unrolled", fu), ("loops", fl)):
                    best[shape] = min(best[shape], timeit.timeit(lambda: f(*args, **static), number=n) / n)
            res = {s: (best[s], res[s][1]) for s in res}
            os.environ.pop("SPARSEDYN_LOOP_THRESHOLD", None)
            (tu, bu), (tl, bl) = res["unrolled"], res["loops"]
            print(f"{m:<12}{kn:<18}{ops:>9}{tu * 1e6:>13.2f}{tl * 1e6:>10.2f}{tl / tu:>7.2f}{bu:>22.2f}{bl:>19.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
