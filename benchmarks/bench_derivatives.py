"""Derivatives of RNEA and ABA against Pinocchio's analytical derivatives, side by side in one run.

    .venv/bin/python benchmarks/bench_derivatives.py                 # panda, talos_reduced; batch 10000
    .venv/bin/python benchmarks/bench_derivatives.py --robots panda --batch 1000 --no-jax

For each robot (example-robot-data, fixed-base panda and floating-base talos_reduced by default):

* flops of the derivative programs (our IR) next to the primal's, the ratio (the cheap-gradient
  principle bounds reverse mode by a small constant times the number of outputs; Pinocchio's
  analytical derivatives cost about 2-3 primal evaluations), and the seconds it took to build them;
* median microseconds of one call from Python: Pinocchio's ``computeRNEADerivatives`` /
  ``computeABADerivatives`` vs ours on every path available (NumPy interpretation of the program,
  the compiled derivative kernel when ``sd.compile(model)`` offers it, JAX on the CPU under jit);
* states per second on a batch of random states: a Pinocchio loop vs one batched call of ours.

Nothing here is a test: numbers are reported, never asserted.
"""

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


def _compiled(model, name, log):
    """The compiled derivative kernel, when the compiler offers it (``None`` otherwise)."""
    import sparsedyn as sd
    try:
        cm = sd.compile(model, kernels=(name,))
    except Exception as e:          # the compiler may not know derivative kernels yet
        log(f"  compiled {name}: not available ({type(e).__name__}: {str(e)[:80]})")
        return None
    f = getattr(cm, name, None)
    if f is None:
        log(f"  compiled {name}: not offered by sd.compile(model)")
    return f


def run_robot(robot, floating, batch, use_jax, log):
    import pinocchio as pin

    import erd
    import sparsedyn as sd
    from sparsedyn.algorithms.derivatives import _aba_derivatives_program, derivative_program
    from sparsedyn.interop import pinocchio as ip
    from sparsedyn.symbolic.trace import trace_kernel

    model, pm = erd.load_pair(robot, floating)
    pd = pm.createData()
    rng = np.random.default_rng(0)
    log(f"\n## {robot} ({'floating' if floating else 'fixed'} base, nv={model.nv})")
    t0 = time.perf_counter()
    P_rnea = derivative_program(sd.rnea, model, ("q", "v", "a"))
    t1 = time.perf_counter()
    P_aba = _aba_derivatives_program(model, {}, ())
    t2 = time.perf_counter()
    P_aba_rev = derivative_program(sd.aba, model, ("q", "v", "tau"))
    t3 = time.perf_counter()
    prim_r = trace_kernel(sd.rnea.__kernel__, model).flops()["total"]
    prim_a = trace_kernel(sd.aba.__kernel__, model).flops()["total"]
    log("| program | flops | x primal | build s |")
    log("|---|---|---|---|")
    log(f"| rnea (primal) | {prim_r} | 1 | |")
    log(f"| rnea_derivatives ({P_rnea.ad_mode} mode) | {P_rnea.flops()['total']} | "
        f"{P_rnea.flops()['total'] / prim_r:.1f} | {t1 - t0:.2f} |")
    log(f"| aba (primal) | {prim_a} | 1 | |")
    log(f"| aba_derivatives (ABA + Minv + RNEA derivatives) | {P_aba.flops()['total']} | "
        f"{P_aba.flops()['total'] / prim_a:.1f} | {t2 - t1:.2f} |")
    log(f"| d aba (reverse mode on ABA's program) | {P_aba_rev.flops()['total']} | "
        f"{P_aba_rev.flops()['total'] / prim_a:.1f} | {t3 - t2:.2f} |")

    q = model.random_configuration(rng)
    v, a, tau = rng.normal(size=model.nv), rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp, vp, ap, tp = (ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a),
                      ip.tau_to_pinocchio(model, tau))
    rows = []
    n1 = 200
    t_pin_r = _best(lambda: pin.computeRNEADerivatives(pm, pd, qp, vp, ap), n1)
    t_pin_a = _best(lambda: pin.computeABADerivatives(pm, pd, qp, vp, tp), n1)
    t_np_r = _best(lambda: sd.rnea_derivatives(model, q, v, a), 5)
    t_np_a = _best(lambda: sd.aba_derivatives(model, q, v, tau), 5)
    rows.append(("Pinocchio", t_pin_r, t_pin_a))
    rows.append(("sparsedyn NumPy (program interpreted)", t_np_r, t_np_a))
    comp = {n: _compiled(model, n, log) for n in ("rnea_derivatives", "aba_derivatives")}
    if all(comp.values()):
        t_c_r = _best(lambda: comp["rnea_derivatives"](q, v, a), n1)
        t_c_a = _best(lambda: comp["aba_derivatives"](q, v, tau), n1)
        rows.append(("sparsedyn compiled C", t_c_r, t_c_a))
    jf = {}
    if use_jax:
        import jax
        jax.config.update("jax_enable_x64", True)
        from sparsedyn.interop.jax import program_function
        for name, P in (("rnea", P_rnea), ("aba", P_aba)):
            f = jax.jit(program_function(P))
            t = time.perf_counter()
            jax.block_until_ready(f(q, v, a))
            log(f"  JAX jit compile of {name}_derivatives ({len(P.nodes)} nodes, "
                f"{'scalar' if len(P.nodes) <= 2000 else 'levels'} emission): {time.perf_counter() - t:.1f} s")
            jf[name] = f
        rows.append(("sparsedyn JAX (CPU, jit)",
                     _best(lambda: jax.block_until_ready(jf["rnea"](q, v, a)), 20),
                     _best(lambda: jax.block_until_ready(jf["aba"](q, v, tau)), 20)))
    log("\n| one state from Python | rnea derivatives us | x Pinocchio | aba derivatives us | x Pinocchio |")
    log("|---|---|---|---|---|")
    for name, tr, ta in rows:
        log(f"| {name} | {tr * 1e6:.1f} | {tr / t_pin_r:.2f} | {ta * 1e6:.1f} | {ta / t_pin_a:.2f} |")

    Q = np.stack([model.random_configuration(rng) for _ in range(batch)])
    V, A, T = (rng.normal(size=(batch, model.nv)) for _ in range(3))
    QP = ip.q_to_pinocchio(model, Q)
    VP, AP, TP = ip.v_to_pinocchio(model, V), ip.v_to_pinocchio(model, A), ip.tau_to_pinocchio(model, T)

    def pin_loop(fn, U):
        for k in range(batch):
            fn(pm, pd, QP[k], VP[k], U[k])

    brow = []
    t_pr = _best(lambda: pin_loop(pin.computeRNEADerivatives, AP), 1, 2)
    t_pa = _best(lambda: pin_loop(pin.computeABADerivatives, TP), 1, 2)
    brow.append(("Pinocchio loop", t_pr, t_pa))
    brow.append(("sparsedyn NumPy (one batched call)", _best(lambda: sd.rnea_derivatives(model, Q, V, A), 1, 2),
                 _best(lambda: sd.aba_derivatives(model, Q, V, T), 1, 2)))
    if all(comp.values()):
        brow.append(("sparsedyn compiled C", _best(lambda: comp["rnea_derivatives"](Q, V, A), 1, 2),
                     _best(lambda: comp["aba_derivatives"](Q, V, T), 1, 2)))
    # The level-scheduled JAX emission holds every node for every state: skip what would not fit.
    if use_jax and max(len(P_rnea.nodes), len(P_aba.nodes)) * batch * 8 > 2e9:
        log(f"  JAX batch skipped: {max(len(P_rnea.nodes), len(P_aba.nodes))} nodes x {batch} states exceed 2 GB")
    elif use_jax:
        import jax
        brow.append(("sparsedyn JAX (CPU, jit, batch axis)",
                     _best(lambda: jax.block_until_ready(jf["rnea"](Q, V, A)), 1, 2),
                     _best(lambda: jax.block_until_ready(jf["aba"](Q, V, T)), 1, 2)))
    log(f"\n| batch of {batch} | rnea derivatives states/s | x Pinocchio loop | aba derivatives states/s | "
        "x Pinocchio loop |")
    log("|---|---|---|---|---|")
    for name, tr, ta in brow:
        log(f"| {name} | {batch / tr:,.0f} | {t_pr / tr:.2f} | {batch / ta:,.0f} | {t_pa / ta:.2f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="+", default=["panda", "talos_reduced"])
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--no-jax", action="store_true")
    args = ap.parse_args(argv)
    import pinocchio as pin
    print(f"# Derivatives: sparsedyn vs Pinocchio {pin.__version__} ({platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()})")
    for robot in args.robots:
        run_robot(robot, robot != "panda", args.batch, not args.no_jax, lambda s: print(s, flush=True))


if __name__ == "__main__":
    main()
