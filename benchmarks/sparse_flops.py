"""Flop counts of dynamics as a sparse linear system vs RNEA / ABA.

    .venv/bin/python benchmarks/sparse_flops.py                      # generic chains, n = 1 .. 100
    .venv/bin/python benchmarks/sparse_flops.py --chain serial_chain # sparsedyn.serial_chain (planar)
    .venv/bin/python benchmarks/sparse_flops.py --ns 1 2 5 --no-safety

Prints, for serial chains of n links:

* inverse dynamics by substitution (the permuted system is triangular) per phase, next to our
  RNEA kernel traced with the same rule and Featherstone's 93n-108 / 81n-100;
* forward dynamics by sparse LU per static ordering (articulated, COLAMD), with the fill-in, next to
  our ABA kernel and Featherstone's 224n-259 / 205n-248;

and (unless --no-safety) how each static ordering behaves at 1,000 random states: how many pivots
change sign between the states, how many states have a pivot below 1e-10 of its scale, the worst
error against ABA of the unchecked solve (check="none"), and what bisection along the path between
two of the states finds (the error of the unchecked solve next to a vanishing pivot, where the mass
matrix is perfectly well conditioned).  Counting rule: sparsedyn.symbolic.ir.Program.flops (the IR
the compiler emits code from).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import sparsedyn as sd                                    # noqa: E402
from sparsedyn import sparse                              # noqa: E402
from sparsedyn.sparse import flops                        # noqa: E402


def safety(model, orderings, nstates=1000, seed=0):
    rng = np.random.default_rng(seed)
    q = np.stack([model.random_configuration(rng) for _ in range(nstates)])
    v, tau = rng.normal(size=(nstates, model.nv)), rng.normal(size=(nstates, model.nv))
    ref = sd.aba(model, q, v, tau)
    lines = []
    for o in orderings:
        st = sparse.forward_dynamics_problem(model).analyze(ordering=o)
        y = st.problem.values(tau=tau)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, info = st.solve(q, v, y, check="all", info=True)
            with np.errstate(all="ignore"):
                raw = st.unpack(st.solve(q, v, y, check="none"))["qdd"]
        err = np.max(np.abs(raw - ref), -1) / np.maximum(1.0, np.max(np.abs(ref), -1))
        err = np.where(np.isfinite(err), err, np.inf)
        bad = ~(info.pivot_ratio > sparse.PIVOT_RTOL)
        P = st.pivots(q)
        flips = int(np.sum(np.any(np.sign(P) != np.sign(P[:1]), axis=0)))
        lines.append(f"  {model.name:>16} {o:>12}: unproven pivots {len(st.unproven_pivots()):>4}, of which "
                     f"{flips:>3} change sign between the states; states with a pivot < 1e-10 of its scale "
                     f"{int(bad.sum())}/{nstates} (smallest ratio {np.min(info.pivot_ratio):.1e}); "
                     f"worst unchecked error vs ABA {np.max(err):.1e}")
        # bisection along a path between two of the states, to where a sign-changing pivot vanishes
        hits = st.hunt_vanishing_pivots(q[0], q[1])
        if hits:
            h = hits[0]
            dq = sd.difference(model, q[0], q[1])
            for dt in (1e-13, 1e-11, 1e-9):
                qb = sd.integrate(model, q[0], (h["t"] + dt) * dq)
                with np.errstate(all="ignore"):
                    raw = st.unpack(st.solve(qb, v[0], y[0], check="none"))["qdd"]
                    good = sd.aba(model, qb, v[0], tau[0])
                e = np.max(np.abs(raw - good)) / max(1.0, np.max(np.abs(good)))
                cond = np.linalg.cond(sd.crba(model, qb))
                lines.append(f"  {'':>16} {'':>12}  bisection: pivot {h['row']} on {h['col']} vanishes at t = "
                             f"{h['t']:.6f}; at t + {dt:.0e}: cond(H) {cond:.1e}, unchecked error vs ABA {e:.1e}")
        else:
            lines.append(f"  {'':>16} {'':>12}  bisection between two states: no pivot changes sign")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ns", type=int, nargs="+", default=[1, 2, 5, 10, 20, 50, 100])
    ap.add_argument("--chain", choices=sorted(flops.CHAINS), default="generic")
    ap.add_argument("--orderings", nargs="+", default=["articulated", "colamd"])
    ap.add_argument("--no-safety", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = flops.flop_table(args.ns, tuple(args.orderings), args.chain)
    print(flops.format_flop_table(rows, args.chain))
    if not args.no_safety:
        print("\nStatic orders at 1,000 random states (forward dynamics; orders chosen once, offline):")
        for model in (flops.generic_chain(10), sd.humanoid(), sd.random_tree(12, branching=2.0, joint_types="all",
                                                                                seed=2, floating_base=True)):
            print("\n".join(safety(model, args.orderings)))
    print(f"\n({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
