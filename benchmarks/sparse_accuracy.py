"""Accuracy and operation counts of the sparse Newton-Euler solves against ABA and RNEA, per robot.

    .venv/bin/python benchmarks/sparse_accuracy.py                    # every example-robot-data URDF
    .venv/bin/python benchmarks/sparse_accuracy.py --robots kinova baxter --states 1000
    .venv/bin/python benchmarks/sparse_accuracy.py --no-flops         # accuracy only

For each URDF of example-robot-data, fixed and floating base, at ``--states`` random states
(``model.random_configuration``, velocities and accelerations normal):

* ``FD err``: worst ``|qdd - a|`` of sparse forward dynamics on the identity FD(RNEA(a)) = a, and the
  same for ABA; ``ratio`` = sparse / ABA (the tests allow 10x ABA plus 1e-13 max|a|);
* ``ID err``: worst ``|tau_sparse - tau_rnea| / max|tau|``;
* ``FD flops``, ``ID flops``: the operation count (``Program.flops()["total"]``: multiplications,
  additions, divisions) of the traced sparse online phase returning ``qdd`` (resp. ``tau``), no
  external forces, over the count of the ABA (resp. RNEA) kernel traced the same way.

Models whose forward dynamics is undefined (a massless subtree) get ``-`` in the FD columns.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import sparsedyn as sd                                    # noqa: E402
from sparsedyn import kernels, sparse                     # noqa: E402
from sparsedyn.sparse import flops                        # noqa: E402
from sparsedyn.interop import example_robot_data_dir      # noqa: E402
from sparsedyn.symbolic.trace import trace_kernel        # noqa: E402


def flop_ratios(model, fd, idst):
    """``(fd_ratio or None, id_ratio)``: sparse online phase over the ABA / RNEA kernel counts."""
    f_id = flops.trace_solve(idst, ("tau",)).flops()["total"]
    f_rnea = trace_kernel(kernels.REGISTRY["rnea"], model).flops()["total"]
    if fd is None:
        return None, f_id / f_rnea
    f_fd = flops.trace_solve(fd, ("qdd",)).flops()["total"]
    f_aba = trace_kernel(kernels.REGISTRY["aba"], model).flops()["total"]
    return f_fd / f_aba, f_id / f_rnea


def accuracy(model, fd, idst, n, seed=0):
    rng = np.random.default_rng(seed)
    Q = np.stack([model.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    tau = sd.rnea(model, Q, V, A)
    e_id = np.max(np.abs(sparse.sparse_inverse_dynamics(model, Q, V, A, structure=idst) - tau)) / np.max(np.abs(tau))
    if fd is None:
        return None, None, e_id
    e_aba = np.max(np.abs(sd.aba(model, Q, V, tau) - A))
    e_sp = np.max(np.abs(sparse.sparse_forward_dynamics(model, Q, V, tau, structure=fd) - A))
    return e_sp, e_aba, e_id


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="*", help="URDF stems (default: every example-robot-data URDF)")
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--no-flops", action="store_true")
    args = ap.parse_args(argv)
    root = example_robot_data_dir()
    paths = sorted(root.rglob("*.urdf"))
    if args.robots:
        paths = [p for p in paths if p.stem in args.robots]
    print(f"{'robot':36s} {'base':5s} {'nv':>3s} | {'FD err sparse':>13s} {'ABA':>9s} {'ratio':>7s} | "
          f"{'ID err':>8s} | {'FD flops':>8s} {'ID flops':>8s}")
    for path in paths:
        for fb in (False, True):
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    model = sd.load_urdf(path, floating_base=fb)
                except Exception as exc:                        # noqa: BLE001 (a report, not a test)
                    print(f"{path.stem:36s} {'float' if fb else 'fixed':5s} skipped: {exc}"[:120])
                    continue
                if model.nv == 0:
                    continue
                idst = sparse.inverse_dynamics_problem(model).analyze()
                try:
                    sd.aba(model, model.neutral(), np.zeros(model.nv), np.zeros(model.nv))
                    fd = sparse.forward_dynamics_problem(model).analyze()
                except (sd.SingularInertiaError, sparse.StructurallySingularError):
                    fd = None
                e_sp, e_aba, e_id = accuracy(model, fd, idst, args.states)
                rf, ri = (None, None) if args.no_flops else flop_ratios(model, fd, idst)
            fdcols = "             -         -       -" if fd is None else \
                f"{e_sp:13.2e} {e_aba:9.2e} {e_sp / e_aba:7.1f}"
            fl = "" if args.no_flops else (f"{'-':>8s}" if rf is None else f"{rf:8.3f}") + f" {ri:8.3f}"
            print(f"{path.stem:36s} {'float' if fb else 'fixed':5s} {model.nv:3d} | {fdcols} | {e_id:8.1e} | {fl}"
                  f"   ({time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
