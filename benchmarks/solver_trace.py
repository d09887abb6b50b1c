"""The contact solver's course on one state of ``bench_scene.py`` (cold, MuJoCo's settled state), on the
NumPy road (the reference; the native road runs the same stages): the stage runs, each round of
polishes (ADMM's iteration, Newton steps, accepted or not), the iteration from which ADMM's modes are
the solution's, and the groups of nearly duplicated contacts (normal rows of ``G`` whose correlation
``G_ij / sqrt(G_ii G_jj)`` passes ``--similar``) with each member's mode, impulse and normal velocity in
the solution.

    PYTHONPATH=src .venv/bin/python benchmarks/solver_trace.py --case "talos on a box"

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import warnings
from collections import Counter

import numpy as np

import sparsedyn as sd
from bench_scene import CASES, settled
from sparsedyn.contact import friction_kernel
from sparsedyn.contact.friction_polish import mode_codes
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco
from sparsedyn.symbolic.loop import next_stage

STAGES = ("dispatch", "factorize", "ADMM", "polish", "check", "Gauss-Seidel", "correction", "correction polish",
          "Delassus", "first step (warm)", "first step (ADMM)", "first step (later)", "last polish")


def traced_run(record):
    """A stand-in for :func:`~sparsedyn.symbolic.loop.run_stages` that appends each stage run's
    ``(stage, S)`` and the layout and ``K`` to ``record``."""
    def run(init, stages, finish, inputs, cap=1_000_000):
        K, S = init(*inputs)
        lay = init.args[0]
        record.update(lay=lay, K={n: K[s] for n, s in lay.K.items()}, mu=np.asarray(inputs[5])[:, 0], runs=[])
        stage, runs = 0, 0
        while stage < len(stages) and runs < cap:
            S, flag = stages[stage](*inputs, K, S)
            record["runs"].append((stage, {n: np.array(S[s]) for n, s in lay.S.items()}))
            runs += 1
            stage = next_stage(stage, float(np.reshape(flag, -1)[0]))
        return finish(*inputs, K, S), runs
    return run


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="talos on a box", choices=list(CASES))
    p.add_argument("--similar", type=float, default=0.98, help="the correlation of a group's normal rows")
    a = p.parse_args()
    m, d, _, model = settled(*CASES[a.case]())
    q, v = q_from_mujoco(model, d.qpos), v_from_mujoco(model, d.qpos, d.qvel)
    record = {}
    plain, friction_kernel.run_stages = friction_kernel.run_stages, traced_run(record)
    try:
        with sd.use_backend("numpy"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = sd.contact_step(model, q, v, np.zeros(model.nv), sd.Scene(model), m.opt.timestep)
    finally:
        friction_kernel.run_stages = plain
    lay, K, mu, runs = record["lay"], record["K"], record["mu"], record["runs"]
    n, rows = lay.m, lay.normal
    # G is made by the Delassus stage into the loop state (a start solved already never makes it)
    G, g = runs[-1][1]["G"].reshape(n, n), K["g"]
    print(f"{a.case}: {lay.nc} slots, {int(s.iterations)} iterations (ADMM's and polishes)")
    print("  stage runs: " + ", ".join(f"{STAGES[k]} {c}" for k, c in sorted(Counter(k for k, _ in runs).items())))
    rounds, start = [], None
    for k, S in runs:
        if k == 3:
            start = start or (int(S["it"][0]), 0)
            start = (start[0], start[1] + 1)
            if S["tries"][0] == 0.0:
                rounds.append((*start, bool(S["conv"][0])))
                start = None
    print("  rounds of polishes (ADMM's iteration: Newton steps): " +
          ", ".join(f"{i}: {st}{' accepted' if ok else ''}" for i, st, ok in rounds))
    lam = runs[-1][1]["z"]                       # the kernel's slots (the step's impulses leave its unused ones)
    final = mode_codes(lam, mu, G, rows)
    codes = [(int(S["it"][0]), mode_codes(S["z"], mu, G, rows)) for k, S in runs if k == 2]
    differ = [i for i, c in codes if np.any(c != final)]
    settled_at = "never" if codes and differ and differ[-1] == codes[-1][0] else \
        f"from iteration {differ[-1] + 1 if differ else 0}"
    print(f"  ADMM's modes are the solution's: {settled_at} (0 open, 1 sticking, 2 sliding: "
          f"{''.join(str(int(c)) for c in final)})")
    print(f"  G_nn's smallest eigenvalues: {np.array2string(np.linalg.eigvalsh(G[np.ix_(rows, rows)])[:10], precision=2)}")
    Gn = G[np.ix_(rows, rows)]
    dn = np.sqrt(np.maximum(np.diag(Gn), 1e-300))
    C = Gn / np.outer(dn, dn)
    u = (G @ lam + g).reshape(-1, 3)
    seen = set()
    for i in range(lay.nc):
        group = [j for j in range(lay.nc) if j == i or C[i, j] > a.similar]
        if len(group) < 2 or i in seen:
            continue
        seen.update(group)
        print(f"  near-duplicates {group} (correlation {min(C[j, k] for j in group for k in group):.5f}): " +
              "; ".join(f"{j}: mode {int(final[j])}, lambda_n {lam[3 * j + 2]:.3g}, u_n {u[j, 2]:.2g}" for j in group))


if __name__ == "__main__":
    main()
