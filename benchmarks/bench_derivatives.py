"""Analytical derivatives against Pinocchio's, side by side in one run.

    .venv/bin/python benchmarks/bench_derivatives.py                 # panda, talos_reduced; batch 10000
    .venv/bin/python benchmarks/bench_derivatives.py --robots talos_reduced --batch 1000

For each robot (example-robot-data, fixed-base panda and floating-base talos_reduced by default):

* flops of each derivative kernel's traced program next to its primal's (and, for RNEA and ABA,
  next to forward/reverse mode on the primal's program, ``sd.derivatives``), with the seconds
  the trace took;
* best microseconds of one call from Python, measured in alternation (so that both see the same
  load on a shared machine): the compiled kernel vs its Pinocchio counterpart
  (the Pinocchio calls that compute the same matrices: e.g. ``computeForwardKinematicsDerivatives``
  then ``getFrameVelocityDerivatives``), and the NumPy path (the kernel run on NumPy arrays);
* states per second on a batch of random states, for every kernel: a Pinocchio loop vs one batched compiled call,
  in the steady state (each is run once before timing: the first call on a new batch pays page
  faults and builds the batch form; the compiled call writes into the same ``out=`` arrays each
  time, as Pinocchio writes into its ``Data``).  The compiled batch uses the threads the library
  picks (up to the machine's cores); the Pinocchio loop runs on one.

Nothing here is a test: numbers are reported, never asserted.  Pinocchio runs on one OpenMP thread
(``OMP_NUM_THREADS=1`` unless set).
"""

import os

# Pinocchio's dense products (computeABADerivatives) run on Eigen's OpenMP threads unless told otherwise:
# on a shared machine that makes its one-call times depend on the load (46 vs 83 us for talos' ABA
# derivatives, in one minute).  One thread is its stable, single-core time; our batch calls name their
# threads themselves (OpenMP num_threads), so this limits Pinocchio alone.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import platform
import sys
import time
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _best(fn, number, repeat=5):
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def _paired(fns, number, rounds=15):
    """The best time per call of each of ``fns``, measured in alternation (``rounds`` times ``number``
    calls each): on a shared machine both sides then see the same load."""
    for f in fns:
        f()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for n, f in enumerate(fns):
            best[n] = min(best[n], timeit.timeit(f, number=number) / number)
    return best


def _cases(model, pm, pin, ip, frame, pframe):
    """``name -> (our args, static kwargs, Pinocchio callable (pm, pd, x) on Pinocchio's arrays, primal)``."""
    import sparsedyn as sd
    A0, A1 = pin.ArgumentPosition.ARG0, pin.ArgumentPosition.ARG1
    L = pin.LOCAL

    def fk_vel(pm, pd, x):
        pin.computeForwardKinematicsDerivatives(pm, pd, x["q"], x["v"], x["a"])
        return pin.getFrameVelocityDerivatives(pm, pd, pframe, L)

    def fk_acc(pm, pd, x):
        pin.computeForwardKinematicsDerivatives(pm, pd, x["q"], x["v"], x["a"])
        return pin.getFrameAccelerationDerivatives(pm, pd, pframe, L)

    def jdot(pm, pd, x):
        pin.computeJointJacobiansTimeVariation(pm, pd, x["q"], x["v"])
        return pin.getFrameJacobianTimeVariation(pm, pd, pframe, L)

    fr = {"frame": frame, "reference": "local"}
    return {
        "rnea_derivatives": ("qva", {}, lambda pm, pd, x: pin.computeRNEADerivatives(pm, pd, x["q"], x["v"], x["a"]),
                             sd.rnea),
        "aba_derivatives": ("qvt", {}, lambda pm, pd, x: pin.computeABADerivatives(pm, pd, x["q"], x["v"], x["t"]),
                            sd.aba),
        "generalized_gravity_derivatives": ("q", {}, lambda pm, pd, x: pin.computeGeneralizedGravityDerivatives(
            pm, pd, x["q"]), sd.generalized_gravity),
        "static_torque_derivatives": ("qf", {}, lambda pm, pd, x: pin.computeStaticTorqueDerivatives(
            pm, pd, x["q"], x["f"]), None),
        "frame_velocity_derivatives": ("qv", fr, fk_vel, sd.frame_velocity),
        "frame_acceleration_derivatives": ("qva", fr, fk_acc, sd.frame_acceleration),
        "frame_jacobian_time_variation": ("qv", fr, jdot, sd.frame_jacobian_dot_v),
        "centroidal_dynamics_derivatives": ("qva", {}, lambda pm, pd, x: pin.computeCentroidalDynamicsDerivatives(
            pm, pd, x["q"], x["v"], x["a"]), sd.centroidal_momentum_rate),
        "integrate_derivatives": ("qv", {}, lambda pm, pd, x: (pin.dIntegrate(pm, x["q"], x["v"], A0),
                                                                 pin.dIntegrate(pm, x["q"], x["v"], A1)), sd.integrate),
        "difference_derivatives": ("qp", {}, lambda pm, pd, x: (pin.dDifference(pm, x["q"], x["p"], A0),
                                                                  pin.dDifference(pm, x["q"], x["p"], A1)),
                                   sd.difference),
    }


def _ours_args(model, names, state):
    return [state[n] for n in names]


def run_robot(robot, floating, batch, log):
    import pinocchio as pin

    import erd
    import sparsedyn as sd
    from sparsedyn.interop import pinocchio as ip

    model, pm = erd.load_pair(robot, floating)
    pd = pm.createData()
    pframe_of = erd.pin_frames(pm)
    frame = max((n for n in model.body_names if n in pframe_of), key=lambda n: model.depth[model.body(n)])   # deepest
    cases = _cases(model, pm, pin, ip, frame, pframe_of[frame])
    rng = np.random.default_rng(0)
    log(f"\n## {robot} ({'floating' if floating else 'fixed'} base, nv={model.nv}, frame {frame!r})")
    _flop_table(model, cases, log)
    t = time.perf_counter()
    cm = sd.compile(model, kernels=tuple(n for n, c in cases.items() if not c[1]), vectorize=True)
    log(f"\ncompile (all kernels without static arguments, single and batch forms): {time.perf_counter() - t:.1f} s")
    x = _draw(model, rng)
    _single_table(model, cm, cases, pm, pd, x, _to_pin(model, ip, x), log)
    X = _draw(model, rng, batch)
    _batch_table(model, cm, cases, pm, pd, X, [_to_pin(model, ip, {k: X[k][i] for k in X}) for i in range(batch)],
                 log)


def _draw(model, rng, n=None):
    """A random state (``n`` None) or a batch of ``n``: ``q``, ``p`` (configurations), ``v``, ``a``, ``t``,
    ``f`` (external forces)."""
    one = lambda: {"q": model.random_configuration(rng), "p": model.random_configuration(rng),   # noqa: E731
                   "v": rng.normal(size=model.nv), "a": rng.normal(size=model.nv),
                   "t": rng.normal(size=model.nv), "f": rng.normal(size=(model.nbodies, 6))}
    if n is None:
        return one()
    states = [one() for _ in range(n)]
    return {k: np.stack([s[k] for s in states]) for k in states[0]}


def _to_pin(model, ip, x):
    """The state ``x`` (:func:`_draw`'s, one state) in Pinocchio's conventions."""
    return {"q": ip.q_to_pinocchio(model, x["q"]), "p": ip.q_to_pinocchio(model, x["p"]),
            "v": ip.v_to_pinocchio(model, x["v"]), "a": ip.v_to_pinocchio(model, x["a"]),
            "t": ip.tau_to_pinocchio(model, x["t"]),
            "f": ip.fext_to_pinocchio(model, x["f"]) if x["f"].ndim == 2 else None}


def _flop_table(model, cases, log):
    """The kernels' operation counts beside their primal's, and those of the AD programs of RNEA and ABA."""
    import sparsedyn as sd
    from sparsedyn.algorithms.derivatives import derivative_program
    from sparsedyn.kernels import REGISTRY
    from sparsedyn.symbolic.trace import trace_kernel
    log("\n| kernel | flops | primal flops | x primal | trace s |")
    log("|---|---|---|---|---|")
    for name, (_, static, _, primal) in cases.items():
        t = time.perf_counter()
        fl = trace_kernel(REGISTRY[name], model, static).flops()["total"]
        dt = time.perf_counter() - t
        pf = trace_kernel(primal.__kernel__, model, static).flops()["total"] if primal is not None else None
        log(f"| {name} | {fl} | {pf or ''} | {f'{fl / pf:.1f}' if pf else ''} | {dt:.2f} |")
    for name, primal, wrt in (("rnea", sd.rnea, ("q", "v", "a")), ("aba", sd.aba, ("q", "v", "tau"))):
        t = time.perf_counter()
        P = derivative_program(primal, model, wrt)
        pf = trace_kernel(primal.__kernel__, model).flops()["total"]
        log(f"| (AD, {P.ad_mode} mode on {name}'s program) | {P.flops()['total']} | {pf} | "
            f"{P.flops()['total'] / pf:.1f} | {time.perf_counter() - t:.2f} |")


def _single_table(model, cm, cases, pm, pd, x, xp, log):
    """One state from Python: the compiled model ``cm``'s kernels beside Pinocchio's and the NumPy path."""
    import sparsedyn as sd
    log("\n| one state from Python | compiled us | Pinocchio us | x Pinocchio | NumPy path us |")
    log("|---|---|---|---|---|")
    for name, (names, static, pfn, _) in cases.items():
        args = _ours_args(model, names, x)
        f = getattr(cm, name)
        f(*args, **static)                                  # builds a static variant on first call
        t_c, t_p = _paired([lambda: f(*args, **static), lambda: pfn(pm, pd, xp)], 20, rounds=60)
        fn = getattr(sd, name)
        with sd.use_backend("numpy"):                       # a plain call would run the native kernel
            t_n = _best(lambda: fn(model, *args, **static), 3, 3)
        log(f"| {name} | {t_c * 1e6:.1f} | {t_p * 1e6:.1f} | {t_c / t_p:.2f} | {t_n * 1e6:.0f} |")


def _batch_table(model, cm, cases, pm, pd, X, XP, log):
    """A batch (steady state): the compiled kernels on the runtime's threads and on one, beside a Pinocchio loop."""
    batch = len(XP)
    threads = cm.threads
    log(f"\n| batch of {batch} (steady state) | compiled states/s ({threads} threads) | compiled, 1 thread | "
        f"Pinocchio loop states/s | x Pinocchio loop | x, 1 thread |")
    log("|---|---|---|---|---|---|")
    for name, (names, static, pfn, _) in cases.items():
        args = _ours_args(model, names, X)
        f = getattr(cm, name)
        res = f(*args, **static)
        res = res if isinstance(res, tuple) else (res,)
        outs = tuple(np.empty(o.shape) for o in res)                    # reused: no page faults per call
        outs = outs if len(outs) > 1 else outs[0]

        def one_thread():
            cm.threads = 1
            f(*args, **static, out=outs)
            cm.threads = threads

        def loop():
            for xp_ in XP:
                pfn(pm, pd, xp_)

        t_c, t_1, t_p = _paired([lambda: f(*args, **static, out=outs), one_thread, loop], 1, rounds=3)
        log(f"| {name} | {batch / t_c:,.0f} | {batch / t_1:,.0f} | {batch / t_p:,.0f} | {t_p / t_c:.1f} | "
            f"{t_p / t_1:.1f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="+", default=["panda", "talos_reduced"])
    ap.add_argument("--batch", type=int, default=10000)
    args = ap.parse_args(argv)
    import pinocchio as pin
    print(f"# Derivatives: sparsedyn vs Pinocchio {pin.__version__} ({platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()})")
    for robot in args.robots:
        run_robot(robot, robot != "panda", args.batch, lambda s: print(s, flush=True))


if __name__ == "__main__":
    main()
