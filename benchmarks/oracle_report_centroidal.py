"""Worst relative error against Pinocchio, per example robot (fixed and floating base), of the centre of
mass, centroidal momentum, frame accelerations, energies and the joint-torque regressor.

    .venv/bin/python benchmarks/oracle_report_centroidal.py [nstates]     (default 5 random states)

Relative error = max|ours - Pinocchio| / max(1, max|Pinocchio|) (the tests assert 1e-9).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "algorithms"))
from erd import ROBOTS, load_pair                             # noqa: E402
from test_oracle_com_centroidal import compare                # noqa: E402

KEYS = ["com", "vcom", "acom", "com_jacobian", "A_G", "h_G", "I_G", "Adot_G_v", "hdot_G", "kinetic", "potential",
        "frame_acc", "frame_classical", "Jdot_v", "regressor", "parameters"]


def main(nstates=5):
    short = {k: k[:9] for k in KEYS}
    print(f"{'robot':18s} {'base':8s} {'nv':>3s} " + " ".join(f"{short[k]:>9s}" for k in KEYS))
    overall = {}
    for name in sorted(ROBOTS):
        for fb in (False, True):
            model, pm = load_pair(name, fb)
            w = compare(model, pm, np.random.default_rng(0), nstates=nstates, frames=6)
            for k in KEYS:
                overall[k] = max(overall.get(k, 0.0), w[k])
            print(f"{name:18s} {'floating' if fb else 'fixed':8s} {model.nv:3d} " + " ".join(f"{w[k]:9.1e}" for k in KEYS))
    print(f"{'worst':31s} " + " ".join(f"{overall[k]:9.1e}" for k in KEYS))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
