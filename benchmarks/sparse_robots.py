"""Sparse inverse / forward dynamics on example-robot-data robots: error and operation counts.

    .venv/bin/python benchmarks/sparse_robots.py                  # centauro, baxter, kinova, talos, panda
    .venv/bin/python benchmarks/sparse_robots.py --states 1000 centauro_description/urdf/centauro.urdf

Per robot (floating base): the worst relative error of sparse inverse dynamics against RNEA and of
sparse forward dynamics against ABA over random states whose 1-dof joints ignore the joint limits
(limits are data, not structure: centauro's wheels have lower = upper = 0), and the operation counts
(mul + add + div, the counting rule of sparsedyn.symbolic.ir.Program.flops) of sparse FD (the qdd
outputs) over the ABA kernel and of sparse ID (the tau outputs) over the RNEA kernel.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import sparsedyn as sd                                    # noqa: E402
from sparsedyn import sparse                              # noqa: E402
from sparsedyn.interop import example_robot_data_dir     # noqa: E402
from sparsedyn.sparse import flops                        # noqa: E402

ROBOTS = ["centauro_description/urdf/centauro.urdf", "baxter_description/urdf/baxter.urdf",
          "kinova_description/robots/kinova.urdf", "talos_data/robots/talos_full_v2.urdf",
          "panda_description/urdf/panda.urdf"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", default=ROBOTS)
    ap.add_argument("--states", type=int, default=20)
    args = ap.parse_args(argv)
    root = example_robot_data_dir()
    print(f"{'robot':24s} {'nv':>3s} | {'ID err':>8s} {'FD err':>8s} | {'FD/ABA':>6s} {'ID/RNEA':>7s}")
    for f in args.files:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = sd.load_urdf(root / f, floating_base=True)
        rng = np.random.default_rng(0)
        n = args.states
        q = np.stack([m.random_configuration(rng, limits=False) for _ in range(n)])
        v, a = rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))
        sid = sparse.inverse_dynamics_problem(m).analyze()
        sfd = sparse.forward_dynamics_problem(m).analyze()
        tau = sd.rnea(m, q, v, a)
        aba = sd.aba(m, q, v, tau)
        eid = np.max(np.abs(sparse.sparse_inverse_dynamics(m, q, v, a, structure=sid) - tau)) / np.max(np.abs(tau))
        efd = np.max(np.abs(sparse.sparse_forward_dynamics(m, q, v, tau, structure=sfd) - aba)) / np.max(np.abs(aba))
        fd = flops.arith(flops.trace_solve(sfd, ("qdd",)).flops()) / flops.arith(flops.count_aba(m))
        id_ = flops.arith(flops.trace_solve(sid, ("tau",)).flops()) / flops.arith(flops.count_rnea(m))
        print(f"{Path(f).stem:24s} {m.nv:3d} | {eid:8.1e} {efd:8.1e} | {fd:6.3f} {id_:7.3f}")


if __name__ == "__main__":
    main()
