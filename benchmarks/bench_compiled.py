"""Compiled sparsedyn vs Pinocchio, side by side in one run (see sparsedyn.codegen.bench).

    .venv/bin/python benchmarks/bench_compiled.py                  # all models, fresh build cache
    .venv/bin/python benchmarks/bench_compiled.py --models panda chain10 --batch 1000 --cache

Reports median microseconds per single call from Python, states/s for a batch
(Pinocchio: Python loop), the ratios, GFLOP/s from the IR's flop counts, build
times (cold and cached) and the cost of the ways to call a kernel from Python.
"""

import argparse
import sys

from sparsedyn.codegen.bench import DEFAULT_MODELS, KERNELS, bench_report


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    p.add_argument("--kernels", nargs="+", default=list(KERNELS))
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--cache", action="store_true", help="use the user's build cache instead of a fresh one")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    progress = None if a.quiet else (lambda m: print(f"  .. {m}", file=sys.stderr, flush=True))
    print(bench_report(a.models, a.kernels, a.batch, cold=not a.cache, progress=progress))


if __name__ == "__main__":
    main()
