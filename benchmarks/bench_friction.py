"""One-sided frictional contact steps beside Pinocchio 4.1's ADMM step, side by side in one run.

    .venv/bin/python benchmarks/bench_friction.py                       # both robots, NumPy and native
    .venv/bin/python benchmarks/bench_friction.py --robots solo12 --no-native

For solo12 (four point feet) and talos_reduced (eight sole corners, a redundant set), mu = 0.7,
dt = 1 ms, at states with the points on the ground, pressed down, random joint velocities and
torques (sticking, sliding and separating points): median microseconds per step of

* Pinocchio: ``aba`` (free velocity), ``crba``, the constraint Jacobian of its
  ``PointContactConstraintModel`` s, the Delassus matrix (NumPy ``solve`` with Pinocchio's mass
  matrix), ``ADMMConstraintSolver`` (tolerance 1e-8), ``v+`` (NumPy ``solve``); constraint models
  built once per state, outside the timing;
* sparsedyn ``contact_step`` (tol 1e-8): on the NumPy path (``sd.use_backend("numpy")``: the kernel
  ``contact_problem`` and the stages of the step run on floats, state by state) and (unless ``--no-native``) compiled
  (``contact_step(sd.compile(model), ...)``: the whole step, ADMM included, is one native call of the
  iterative kernel ``contact_step_kernel``), and the compiled ``contact_problem`` alone.

The relative difference of ``v+`` to Pinocchio is small where the solution is unique; on eight sole
corners the Coulomb problem can have several solutions (different velocities with residuals at
1e-12), and the two solvers may return different ones.

Then a batch of solo12 steps in one call (the compiled step, state by state on the batch runtime's
threads) against a Pinocchio loop, and iterations per step along a trajectory (solo12 dropped from
5 cm under a PD controller, 300 steps; the compiled step) with and without warm start, and the
largest relative difference of ``v+`` to Pinocchio.
Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "contact"))

MU, DT = 0.7, 1e-3
SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
SOLE = [(x, y, 0.0) for x in (-0.1, 0.1) for y in (-0.05, 0.05)]
POINTS = {"solo12": [(f, (0.0, 0.0, 0.0)) for f in SOLO_FEET],
          "talos_reduced": [(s, p) for s in ("left_sole_link", "right_sole_link") for p in SOLE]}


def _median_us(fn, repeat, clock=time.perf_counter):
    fn()
    t = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        t.append(clock() - t0)
    return 1e6 * float(np.median(t))


def standing(model, robot):
    import sparsedyn as sd
    q = np.zeros(model.nq)
    q[6] = 1.0
    if robot == "solo12":
        q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    z = min((lambda R, p: p + R @ np.asarray(pt))(*sd.frame_placement(model, q, f))[2] for f, pt in POINTS[robot])
    q[2] -= z
    return q


def states(model, n, rng):
    out = []
    for _ in range(n):
        v = rng.normal(size=model.nv)
        v[:6] *= 0.3
        v[5] -= 0.3
        tau = 5 * rng.normal(size=model.nv)
        tau[:6] = 0
        out.append((v, tau))
    return out


def run(robot, native, repeat, log):
    import sparsedyn as sd
    from friction_oracle import PinocchioStep
    from sparsedyn.interop import pinocchio as ip

    oracle = PinocchioStep(robot, POINTS[robot], MU, DT, tol=1e-8)
    model = oracle.model
    q = standing(model, robot)
    contacts = [sd.Contact(f, "3d", friction=MU, point=p, name=f"{f}{i}") for i, (f, p) in enumerate(POINTS[robot])]
    prepared = oracle.prepare(q)
    compiled = sd.compile(model) if native else None
    qp = ip.q_to_pinocchio(model, q)
    rows = []
    for k, (v, tau) in enumerate(states(model, 5, np.random.default_rng(3))):
        vp, tp = ip.v_to_pinocchio(model, v), ip.tau_to_pinocchio(model, tau)
        t_pin = _median_us(lambda: oracle.solve(prepared, qp, vp, tp), repeat)
        v_pin = ip.v_from_pinocchio(model, oracle.solve(prepared, qp, vp, tp)[0])
        it_pin = oracle.iterations
        with sd.use_backend("numpy"):
            t_np = _median_us(lambda: sd.contact_step(model, q, v, tau, contacts, DT), repeat)
            s = sd.contact_step(model, q, v, tau, contacts, DT)
        t_nat = t_kernel = float("nan")
        its = f"{int(s.iterations)} (NumPy)"
        if native:
            t_nat = _median_us(lambda: sd.contact_step(compiled, q, v, tau, contacts, DT), repeat)
            t_kernel = _median_us(lambda: compiled.contact_problem(q, v, tau, tuple(contacts)), repeat)
            s = sd.contact_step(compiled, q, v, tau, contacts, DT)
            its = str(int(s.iterations))
        err = float(np.abs(s.v - v_pin).max() / np.abs(v_pin).max())
        rows.append((k, "/".join(sorted(set(s.modes))), its, it_pin, t_pin, t_np, t_nat, t_kernel, err))
    log(f"\n### {robot}: {len(contacts)} contact points, nv = {model.nv}\n")
    log("| state | modes | iterations (ours / Pinocchio) | Pinocchio step [µs] | sparsedyn, NumPy [µs] | "
        "sparsedyn, compiled step [µs] | of which contact_problem [µs] | ratio compiled / Pinocchio | "
        "rel. diff v+ (compiled) |")
    log("|---|---|---|---|---|---|---|---|---|")
    for k, modes, it, itp, tp_, tn, tc, tk, err in rows:
        log(f"| {k} | {modes} | {it} / {itp} | {tp_:.0f} | {tn:.0f} | {tc:.0f} | {tk:.0f} | {tc / tp_:.1f} | "
            f"{err:.1e} |")
    log(f"\nmedian ratio compiled / Pinocchio: {np.median([r[6] / r[4] for r in rows]):.2f}")


def batch_report(batch, log):
    import sparsedyn as sd
    from friction_oracle import PinocchioStep
    from sparsedyn.interop import pinocchio as ip
    oracle = PinocchioStep("solo12", POINTS["solo12"], MU, DT, tol=1e-8)
    model = oracle.model
    q = standing(model, "solo12")
    contacts = [sd.Contact(f, "3d", friction=MU) for f in SOLO_FEET]
    st = states(model, batch, np.random.default_rng(7))
    V, T = np.stack([s[0] for s in st]), np.stack([s[1] for s in st])
    Q = np.broadcast_to(q, (batch, model.nq)).copy()
    k = sd.compile(model)
    sd.contact_step(k, Q, V, T, contacts, DT)                  # builds the batch library
    prep, qp = oracle.prepare(q), ip.q_to_pinocchio(model, q)
    n = min(batch, 200)
    t_ours, t_pins = [], []
    for _ in range(3):                                          # interleaved, best of 3 each
        t0 = time.perf_counter()
        s = sd.contact_step(k, Q, V, T, contacts, DT)
        t_ours.append((time.perf_counter() - t0) / batch)
        t0 = time.perf_counter()
        out = [oracle.solve(prep, qp, ip.v_to_pinocchio(model, V[i]), ip.tau_to_pinocchio(model, T[i]))[0]
               for i in range(n)]
        t_pins.append((time.perf_counter() - t0) / n)
    t_batch, t_pin = min(t_ours), min(t_pins)
    err = max(float(np.abs(ip.v_from_pinocchio(model, out[i]) - s.v[i]).max() / np.abs(out[i]).max()) for i in range(n))
    log(f"\n### a batch of {batch} solo12 steps (one contact_step call on sd.compile(model)) against a Pinocchio loop\n")
    spec = next(n for n in k.kernels if n.startswith("contact_step_kernel"))
    log("| sparsedyn batch [µs/state] | threads | Pinocchio loop [µs/state] | speed-up | iterations mean / max | "
        f"max rel. diff v+ ({n} states) |")
    log("|---|---|---|---|---|---|")
    log(f"| {1e6 * t_batch:.1f} | {k._threads_for(spec, batch)} of {os.cpu_count()} cores | {1e6 * t_pin:.0f} | "
        f"{t_pin / t_batch:.1f}x | {s.iterations.mean():.1f} / {s.iterations.max()} | {err:.1e} |")


def warm_start_report(log):
    import sparsedyn as sd
    import erd
    model, _ = erd.load_pair("solo12", True)
    q0 = standing(model, "solo12")
    q = q0.copy()
    q[2] += 0.05
    feet = [sd.Contact(f, "3d", friction=MU) for f in SOLO_FEET]

    def pd(t, qq, vv):
        tau = np.zeros(model.nv)
        tau[6:] = 5.0 * (q0[7:] - qq[7:]) - 0.2 * vv[6:]
        return tau

    log("\n### iterations along a trajectory (solo12 dropped from 5 cm, PD controller, 300 steps of 1 ms; "
        "compiled step)\n")
    log("| warm start | mean iterations | max | steps in contact |")
    log("|---|---|---|---|")
    compiled = sd.compile(model)
    for warm in (True, False):
        if True:
            qq, vv, lam, its, touching = q, np.zeros(model.nv), None, [], 0
            for k in range(300):
                s = sd.contact_step(compiled, qq, vv, pd(k * DT, qq, vv), feet, DT, warm_start=lam if warm else None)
                qq, vv, lam = s.q, s.v, s.impulses
                if (s.modes != "open").any():
                    its.append(int(s.iterations))
            log(f"| {'yes' if warm else 'no'} | {np.mean(its):.1f} | {max(its)} | {len(its)} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="+", default=list(POINTS))
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--no-native", action="store_true")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "bench_friction.md"))
    a = ap.parse_args(argv)
    lines = []

    def log(s=""):
        print(s)
        lines.append(s)

    import pinocchio as pin
    log(f"# contact_step beside Pinocchio {pin.__version__} ({platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, one process)\n")
    log(f"mu = {MU}, dt = {DT} s, tolerance 1e-8 for both solvers; command: "
        f"`python benchmarks/bench_friction.py {' '.join(argv or sys.argv[1:])}`")
    warnings.simplefilter("ignore")
    for r in a.robots:
        run(r, not a.no_native, a.repeat, log)
    if not a.no_native:
        batch_report(a.batch, log)
    warm_start_report(log)
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
