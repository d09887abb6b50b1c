"""Contact dynamics, impulses and their derivatives beside Pinocchio, side by side in one run.

    .venv/bin/python benchmarks/bench_contact.py                  # batch 10000
    .venv/bin/python benchmarks/bench_contact.py --batch 2000 --robots solo12

For talos_reduced (both soles, 6D) and solo12 (four feet, 3D points): median microseconds per
single-state call of Pinocchio (``constraintDynamics``, ``impulseDynamics``,
``computeConstraintDynamicsDerivatives`` after ``constraintDynamics``, each with data allocated
once; the derivatives after the function they differentiate), of
sparsedyn's compiled kernel (``sd.compile(model)``, fast single-state path), and of
sparsedyn's NumPy path (``sd.use_backend("numpy")``); states per second of a batch (one compiled call) against a Pinocchio loop;
the ratios; the largest relative difference to Pinocchio.  Nothing here is a test: numbers are
reported, never asserted.
"""

import argparse
import os
import platform
import sys
import time
import timeit
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "contact"))

ROBOTS = {"talos_reduced": (("left_sole_link", "right_sole_link"), "6d"),
          "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d")}


def _best(fn, number, repeat=5):
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def _numpy(fn):
    """Microseconds per call of the NumPy reference path (``sd.use_backend("numpy")``; a plain call
    otherwise runs the native kernel)."""
    import sparsedyn as sd
    with sd.use_backend("numpy"):
        return _best(fn, 20) * 1e6


def _rel(x, y):
    return float(np.max(np.abs(x - y)) / max(1.0, np.max(np.abs(y))))


def run(robot, batch, derivatives, log):
    import pinocchio as pin
    import sparsedyn as sd
    from contact_oracle import Oracle, pair
    from sparsedyn.interop import pinocchio as ip

    frames, kind = ROBOTS[robot]
    model, pm, _ = pair(robot)
    contacts = tuple(sd.Contact(f, kind) for f in frames)
    o = Oracle(robot, [(f, kind) for f in frames])
    rng = np.random.default_rng(0)
    q = np.stack([model.random_configuration(rng) for _ in range(batch)])
    v, tau = rng.normal(size=(2, batch, model.nv))
    q1, v1, t1 = q[0].copy(), v[0].copy(), tau[0].copy()
    qp, vp, tp = (ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.tau_to_pinocchio(model, tau))
    qp1, vp1, tp1 = qp[0].copy(), vp[0].copy(), tp[0].copy()
    pd, cms, cds = o.pd, o.cms, o.cds
    t0 = time.perf_counter()
    k = sd.compile(model)
    k.contact_dynamics(q1, v1, t1, contacts)
    k.impulse_dynamics(q1, v1, contacts)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    k.contact_dynamics(q[:2], v[:2], tau[:2], contacts)
    t_vec = time.perf_counter() - t0
    log(f"{robot}: nv={model.nv}, m={sum(c.size for c in contacts)}; build {t_build:.1f} s (single), "
        f"{t_vec:.1f} s (batch)")
    rows = []

    # forward dynamics in contact
    pin_cd = lambda: pin.constraintDynamics(pm, pd, qp1, vp1, tp1, cms, cds)
    a, f = k.contact_dynamics(q1, v1, t1, contacts)
    a_p, f_p = o.dynamics(q1, v1, t1)
    err = max(_rel(a, a_p), _rel(f, f_p))
    r = {"what": "contact_dynamics", "pin_us": _best(pin_cd, 2000) * 1e6,
         "comp_us": _best(lambda: k.contact_dynamics(q1, v1, t1, contacts), 2000) * 1e6,
         "numpy_us": _numpy(lambda: sd.contact_dynamics(model, q1, v1, t1, contacts)), "err": err}

    def pin_loop():
        for i in range(batch):
            pin.constraintDynamics(pm, pd, qp[i], vp[i], tp[i], cms, cds)
    r["pin_batch"] = batch / _best(pin_loop, 1, 3)
    r["comp_batch"] = batch / _best(lambda: k.contact_dynamics(q, v, tau, contacts), 1, 3)
    rows.append(r)

    # impulses
    pin_imp = lambda: pin.impulseDynamics(pm, pd, qp1, vp1, cms, cds, 0.0, pin.ProximalSettings(1e-12, 0.0, 1))
    vplus, imp = k.impulse_dynamics(q1, v1, contacts)
    v_p, i_p = o.impulse(q1, v1)
    r = {"what": "impulse_dynamics", "pin_us": _best(pin_imp, 2000) * 1e6,
         "comp_us": _best(lambda: k.impulse_dynamics(q1, v1, contacts), 2000) * 1e6,
         "numpy_us": _numpy(lambda: sd.impulse_dynamics(model, q1, v1, contacts)),
         "err": max(_rel(vplus, v_p), _rel(imp, i_p))}

    def pin_iloop():
        ps = pin.ProximalSettings(1e-12, 0.0, 1)
        for i in range(batch):
            pin.impulseDynamics(pm, pd, qp[i], vp[i], cms, cds, 0.0, ps)
    r["pin_batch"] = batch / _best(pin_iloop, 1, 3)
    r["comp_batch"] = batch / _best(lambda: k.impulse_dynamics(q, v, contacts), 1, 3)
    rows.append(r)

    if derivatives:
        rows += _derivative_rows(k, o, (pm, pd, cms, cds), (q1, v1, t1), (qp1, vp1, tp1), contacts, robot, log)
    return rows


def _derivative_rows(k, o, pin_args, state, pin_state, contacts, robot, log):
    """The rows of the compiled contact and impulse dynamics derivatives ``k`` beside Pinocchio's (``pin_args``
    ``(model, data, constraint models, constraint datas)``) at one state (ours ``(q, v, tau)``, Pinocchio's
    ``pin_state``), their errors against the oracle ``o``."""
    import pinocchio as pin
    pm, pd, cms, cds = pin_args
    q1, v1, t1 = state
    qp1, vp1, tp1 = pin_state
    rows = []
    t0 = time.perf_counter()
    d = k.contact_dynamics_derivatives(q1, v1, t1, contacts)
    k.impulse_dynamics_derivatives(q1, v1, contacts)
    log(f"{robot}: derivatives built in {time.perf_counter() - t0:.1f} s")
    ref = o.dynamics_derivatives(q1, v1, t1)

    def pin_d():
        pin.constraintDynamics(pm, pd, qp1, vp1, tp1, cms, cds)
        pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds)
    rows.append({"what": "contact_dynamics_derivatives", "pin_us": _best(pin_d, 500) * 1e6,
                 "comp_us": _best(lambda: k.contact_dynamics_derivatives(q1, v1, t1, contacts), 500) * 1e6,
                 "numpy_us": float("nan"), "err": max(_rel(x, y) for x, y in zip(d, ref)),
                 "pin_batch": float("nan"), "comp_batch": float("nan")})
    d = k.impulse_dynamics_derivatives(q1, v1, contacts)
    ref = o.impulse_derivatives(q1, v1)
    ps = pin.ProximalSettings(1e-12, 0.0, 1)

    def pin_id():
        pin.impulseDynamics(pm, pd, qp1, vp1, cms, cds, 0.0, ps)
        pin.computeImpulseDynamicsDerivatives(pm, pd, cms, cds, 0.0, ps)
    rows.append({"what": "impulse_dynamics_derivatives", "pin_us": _best(pin_id, 500) * 1e6,
                 "comp_us": _best(lambda: k.impulse_dynamics_derivatives(q1, v1, contacts), 500) * 1e6,
                 "numpy_us": float("nan"), "err": max(_rel(x, y) for x, y in zip(d, ref)),
                 "pin_batch": float("nan"), "comp_batch": float("nan")})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--robots", nargs="*", default=list(ROBOTS))
    ap.add_argument("--no-derivatives", action="store_true")
    args = ap.parse_args(argv)
    import pinocchio as pin
    log = lambda s: print(s, file=sys.stderr, flush=True)
    print(f"# bench_contact: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Pinocchio {pin.__version__}, batch {args.batch}")
    print()
    print("| robot | function | Pinocchio us | compiled us | ratio | NumPy us | Pinocchio loop st/s "
          "| compiled batch st/s | ratio | max rel. diff |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for robot in args.robots:
            for r in run(robot, args.batch, not args.no_derivatives, log):
                print(f"| {robot} | {r['what']} | {r['pin_us']:.1f} | {r['comp_us']:.1f} | "
                      f"{r['comp_us'] / r['pin_us']:.2f}x | {r['numpy_us']:.0f} | {r['pin_batch']:.0f} | "
                      f"{r['comp_batch']:.0f} | {r['comp_batch'] / r['pin_batch']:.1f}x | {r['err']:.1e} |",
                      flush=True)
    print()
    print("ratio (single): compiled time / Pinocchio time (below 1: sparsedyn faster); ratio (batch): "
          "compiled states/s / Pinocchio loop states/s.")


if __name__ == "__main__":
    main()
