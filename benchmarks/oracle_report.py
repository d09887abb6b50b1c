"""Worst relative error of every kernel against Pinocchio, per example robot (fixed and floating base).

    .venv/bin/python benchmarks/oracle_report.py        (after `make test` has installed the oracles)

Relative error = max|ours - Pinocchio| / max(1, max|Pinocchio|), over 5 random states.
"""

import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import sparsedyn as sd                                        # noqa: E402
from sparsedyn.interop import pinocchio as conv               # noqa: E402
from conftest import rel_err                                  # noqa: E402
from erd import ROBOTS, load_pair                             # noqa: E402
from test_oracle_pinocchio import compare                     # noqa: E402


def classical(model, pm, rng, nstates=5):
    pd = pm.createData()
    worst = {}
    M = lambda X: conv.tau_from_pinocchio(model, conv.v_from_pinocchio(model, X).T).T  # noqa: E731
    sym = lambda X: np.triu(X) + np.triu(X, 1).T                                     # noqa: E731
    for _ in range(nstates):
        q = model.random_configuration(rng)
        v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        qp, vp, tp = conv.q_to_pinocchio(model, q), conv.v_to_pinocchio(model, v), conv.tau_to_pinocchio(model, tau)
        out = {"crba": (sd.crba(model, q), M(sym(pin.crba(pm, pd, qp)))),
               "bias": (sd.nonlinear_effects(model, q, v), conv.tau_from_pinocchio(model, pin.nonLinearEffects(pm, pd, qp, vp)))}
        try:
            ref = conv.v_from_pinocchio(model, pin.aba(pm, pd, qp, vp, tp))
            out["aba"] = (sd.aba(model, q, v, tau), ref)
            out["fd_crb"] = (sd.fd_crb(model, q, v, tau), ref)
            out["minv"] = (sd.minv(model, q), conv.v_from_pinocchio(model, conv.tau_to_pinocchio(
                model, sym(pin.computeMinverse(pm, pd, qp))).T).T)
        except sd.SingularInertiaError as e:
            worst["singular"] = str(e).split(":")[0]
        for k, (a, b) in out.items():
            worst[k] = max(worst.get(k, 0.0), rel_err(a, b))
    return worst


def main():
    keys = ["fk", "velocity", "jacobian", "rnea", "rnea_fext", "gravity", "nle", "crba", "bias", "aba", "fd_crb",
            "minv"]
    print(f"{'robot':18s} {'base':8s} {'nv':>3s} " + " ".join(f"{k:>9s}" for k in keys))
    overall = {}
    for name in sorted(ROBOTS):
        for fb in (False, True):
            model, pm = load_pair(name, fb)
            rng = np.random.default_rng(0)
            w = {**compare(model, pm, rng, nstates=5), **classical(model, pm, rng)}
            for k in keys:
                if k in w:
                    overall[k] = max(overall.get(k, 0.0), w[k])
            cells = " ".join(f"{w[k]:9.1e}" if k in w else f"{'singular':>9s}" for k in keys)
            print(f"{name:18s} {'floating' if fb else 'fixed':8s} {model.nv:3d} {cells}")
            if "singular" in w:
                print(f"{'':31s}(forward dynamics and Minv refused: {w['singular']} has a singular inertia)")
    print(f"{'worst':31s} " + " ".join(f"{overall.get(k, 0):9.1e}" for k in keys))


if __name__ == "__main__":
    main()
