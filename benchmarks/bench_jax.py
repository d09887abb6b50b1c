"""The JAX road beside the native kernel, in one process: ``sparsedyn.interop.jax.function``.

    .venv/bin/python benchmarks/bench_jax.py                         # talos_reduced: rnea, aba
    .venv/bin/python benchmarks/bench_jax.py --replay                # also the jax.numpy replay road (slow to jit)
    .venv/bin/python benchmarks/bench_jax.py --models panda --kernels rnea

For each kernel and road (``native``: XLA's FFI calling the compiled kernel; ``callback``: the
compiled kernel through ``jax.pure_callback``; ``replay``: the traced program as jax.numpy):

* *jit s*: the first call of ``jax.jit(f)`` (tracing and XLA's compilation; a warm build cache, so
  the native kernels load in milliseconds; the FFI handler is built once per machine);
* *call us*: the best time of one jitted call (``block_until_ready``), timed alternately with the
  compiled method ``sd.compile(model).rnea(q, v, a)`` (*native us*); *diff* = call - native;
* *batch states/s*: ``jax.jit(jax.vmap(f))`` over 4,096 states against the compiled batch call
  ``k.rnea(Q, V, A)`` (vectorised lanes and threads), and their ratio (>= 1: JAX as fast);
* *jac*: ``jax.jit(jax.jacfwd(f, argnums=(0, 1, 2)))`` against the derivative kernel
  (``k.rnea_derivatives``), and the largest relative difference of the Jacobians (the ``q`` one
  mapped to the tangent space by the chart, see ``sparsedyn.interop.jax``).

Numbers are reported, never asserted (the machine may be loaded: minimum over short rounds).

``--cold``: instead, the wait of a user's first ``jax.jit``, each in a fresh process: *empty cache*
(a new build cache: the compiler's probe, the FFI handler and the model's kernel are built), *warm
cache* (a new process, the same cache: everything loads), then a *later* jit in that process (another
kernel's function, its library from the cache), as wall-clock and CPU seconds (the process and its
compiler processes); ``--compilers system pip`` as in ``bench_build.py``.

    .venv/bin/python benchmarks/bench_jax.py --cold --models humanoid talos_reduced --compilers system pip
"""

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from bench_plain import interleaved  # noqa: E402

DERIV = {"rnea": "rnea_derivatives", "aba": "aba_derivatives"}


def rows_for(model_name, kernels, roads, batch, rng):
    import jax

    import sparsedyn as sd
    from bench_compiled import load_bench_model
    from sparsedyn.interop import jax as sdj
    model = load_bench_model(model_name)
    k = sd.compile(model)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    Q = np.stack([model.random_configuration(rng) for _ in range(batch)])
    V, A = rng.normal(size=(batch, model.nv)), rng.normal(size=(batch, model.nv))
    rows = []
    for kname in kernels:
        native = getattr(k, kname)
        deriv = getattr(k, DERIV[kname])
        native(q, v, a), native(Q, V, A), deriv(q, v, a)          # built / loaded before timing
        for road in roads:
            f = sdj.function(getattr(sd, kname), model, backend=road)
            t0 = time.perf_counter()
            jf = jax.jit(f)
            jf(q, v, a).block_until_ready()
            jit_s = time.perf_counter() - t0
            qj, vj, aj = (jax.device_put(x) for x in (q, v, a))
            call, nat = interleaved([lambda: jf(qj, vj, aj).block_until_ready(), lambda: native(q, v, a)],
                                    rounds=200)
            jb = jax.jit(jax.vmap(f))
            Qj, Vj, Aj = (jax.device_put(x) for x in (Q, V, A))
            err = float(np.max(np.abs(np.asarray(jb(Qj, Vj, Aj)) - native(Q, V, A))))
            tb, nb = interleaved([lambda: jb(Qj, Vj, Aj).block_until_ready(), lambda: native(Q, V, A)],
                                 rounds=20, target=1e-2)
            jj = jax.jit(jax.jacfwd(f, argnums=(0, 1, 2)))
            t0 = time.perf_counter()
            Jq, Jv, Ja = (np.asarray(x) for x in jj(q, v, a))
            jac_jit = time.perf_counter() - t0
            Dq, Dv, Da = deriv(q, v, a)
            # R^nq -> tangent: J_tangent = J_ambient @ d integrate(q, t)/dt at t = 0 (AD on the IR)
            chart = sd.derivatives(sd.integrate, wrt="v")(model, q, np.zeros(model.nv))
            rel = max(np.max(np.abs(Jq @ chart - Dq)) / np.max(np.abs(Dq)),
                      np.max(np.abs(Jv - Dv)) / np.max(np.abs(Dv)), np.max(np.abs(Ja - Da)) / np.max(np.abs(Da)))
            tj, nj = interleaved([lambda: jax.block_until_ready(jj(qj, vj, aj)), lambda: deriv(q, v, a)], rounds=50)
            rows.append((model_name, kname, road, jit_s, call * 1e6, nat * 1e6, batch / tb, batch / nb, err,
                         jac_jit, tj * 1e6, nj * 1e6, rel))
            print(_fmt(rows[-1]), flush=True)
    return rows


HEADER = ("| model | kernel | road | jit s | call us | native us | diff us | vmap states/s | native batch states/s "
          "| ratio | max abs diff | jacfwd jit s | jacfwd us | derivative kernel us | Jacobian rel diff |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _fmt(r):
    m, k, road, jit_s, call, nat, sb, nb, err, jj, tj, nj, rel = r
    return (f"| {m} | {k} | {road} | {jit_s:.2f} | {call:.1f} | {nat:.1f} | {call - nat:+.1f} | {sb:,.0f} | {nb:,.0f} "
            f"| {sb / nb:.2f} | {err:.1e} | {jj:.2f} | {tj:.1f} | {nj:.1f} | {rel:.1e} |")


COLD = """
import os, resource, sys, time
def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
import numpy as np, jax
jax.config.update("jax_enable_x64", True)
import sparsedyn as sd
from sparsedyn.interop import jax as sdj
sys.path.insert(0, sys.argv[2])
from bench_compiled import load_bench_model
model = load_bench_model(sys.argv[1])
rng = np.random.default_rng(0)
q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
out = []
for name in ("rnea", "aba"):
    c0, t0 = cpu(), time.perf_counter()
    jax.jit(sdj.function(getattr(sd, name), model))(q, v, a).block_until_ready()
    out += [time.perf_counter() - t0, cpu() - c0]
print(" ".join(f"{x:.3f}" for x in out))
"""


def cold(models, compilers):
    """The first jit with an empty build cache, with a warm one, and a later jit (see the docstring)."""
    import subprocess
    import tempfile

    from bench_build import compiler_env
    print(f"first jax.jit, {os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          "seconds, wall / CPU")
    print("| model | compiler | empty cache: first jit | warm cache: first jit | later jit |\n|---|---|---|---|---|")
    here = os.path.dirname(os.path.abspath(__file__))
    for name in models:
        for which in compilers:
            with tempfile.TemporaryDirectory() as cache:
                env = dict(compiler_env(which), SPARSEDYN_CACHE_DIR=cache)
                rows = []
                for _ in range(2):
                    r = subprocess.run([sys.executable, "-c", COLD, name, here], env=env, capture_output=True,
                                       text=True)
                    if r.returncode != 0:
                        raise SystemExit(r.stderr[-3000:])
                    rows.append([float(x) for x in r.stdout.split()[-4:]])
            (w0, c0, _, _), (w1, c1, w2, c2) = rows
            print(f"| {name} | {which} | {w0:.2f} / {c0:.2f} | {w1:.2f} / {c1:.2f} | {w2:.2f} / {c2:.2f} |",
                  flush=True)
    print(f"load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["talos_reduced"])
    ap.add_argument("--kernels", nargs="+", default=["rnea", "aba"], choices=sorted(DERIV))
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--replay", action="store_true", help="also time the jax.numpy replay road (jit takes seconds)")
    ap.add_argument("--cold", action="store_true", help="the first jit with an empty / a warm build cache")
    ap.add_argument("--compilers", nargs="+", choices=("system", "pip"), default=["system"])
    args = ap.parse_args(argv)
    if args.cold:
        return cold(args.models, args.compilers)
    import jax
    jax.config.update("jax_enable_x64", True)
    roads = ["native", "callback"] + (["replay"] if args.replay else [])
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, "
          f"{jax.default_backend()}")
    print(HEADER)
    rng = np.random.default_rng(0)
    for name in args.models:
        rows_for(name, args.kernels, roads, args.batch, rng)


if __name__ == "__main__":
    main()
