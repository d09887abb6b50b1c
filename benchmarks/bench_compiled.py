"""Compiled sparsedyn vs Pinocchio (and MuJoCo where it applies), side by side in one run.

    .venv/bin/python benchmarks/bench_compiled.py                  # all models, fresh build cache
    .venv/bin/python benchmarks/bench_compiled.py --models panda chain10 --batch 1000 --cache

``bench_report()`` is what ``sparsedyn bench`` prints (the command loads this file from the
source checkout) and what ``python benchmarks/bench_compiled.py`` runs.  For each model and kernel it measures,
in the same process and one after the other:

* the median time of one call from Python (one state, arrays prepared
  beforehand; ``timeit`` batches of calls, median over repeats);
* the throughput for a batch of ``batch`` states: sparsedyn's batched call
  (native loop, vectorised across states, all cores) against Pinocchio called
  in a Python loop (Pinocchio has no batched API);
* the ratios (sparsedyn time / Pinocchio time for single calls: < 1 is faster;
  sparsedyn states/s / Pinocchio states/s for batches: > 1 is faster);
* GFLOP/s = flops counted in the IR / measured time.

MuJoCo gets the same model through :func:`sparsedyn.interop.mujoco.load_mujoco`
(MJCF, constraints disabled) and is timed on the sequence of its pipeline
stages that produces the same quantity, in its own coordinates; its results are
checked against ours (converted with the interop's velocity map) before timing.
Pinocchio gets the same model through :func:`sparsedyn.interop.pinocchio.to_pinocchio`
(kernels: ``rnea``, ``crba`` (upper triangle only, as Pinocchio computes it),
``aba``, ``computeMinverse``).  Nothing here is a test: numbers are reported,
never asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import timeit
import warnings
from pathlib import Path

import numpy as np

import sparsedyn as sd
from sparsedyn.codegen import build
from sparsedyn.io.resolve import example_robot_data_dir, resolve_model

__all__ = ["bench_report", "DEFAULT_MODELS", "load_bench_model", "call_overhead_report"]

DEFAULT_MODELS = ("panda", "talos_reduced", "chain10", "chain30", "chain100")
KERNELS = ("rnea", "crba", "aba", "minv")
_ERD = {"panda": ("panda_description/urdf/panda.urdf", False),
        "talos_reduced": ("talos_data/robots/talos_reduced.urdf", True)}


def load_bench_model(name):
    """``panda`` (fixed base), ``talos_reduced`` (floating base) from example-robot-data,
    ``chainN``: :func:`sparsedyn.serial_chain` of N revolute links; ``humanoid_<type>_hips``: the
    built-in humanoid with Euler-angle hips (``humanoid_spherical_zyx_hips``); ``dm_humanoid``: dm_control's
    ``humanoid.xml`` (its multi-hinge joints composite ones); or a built-in / URDF path."""
    if name.startswith("chain") and name[5:].isdigit():
        return sd.serial_chain(int(name[5:]), name=name)
    if name.startswith("humanoid_spherical_") and name.endswith("_hips"):
        return sd.humanoid(hips=name[len("humanoid_"):-len("_hips")])
    if name == "dm_humanoid":                  # dm_control's humanoid.xml: composite joints (hips, shoulders)
        import dm_control
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return sd.load_mjcf(str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml"))
    if name in _ERD:
        d = example_robot_data_dir()
        if d is None:
            raise FileNotFoundError("example-robot-data is not installed (pip install example-robot-data)")
        rel, floating = _ERD[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return sd.load_urdf(d / rel, floating_base=floating)
    return resolve_model(name)


def _median_call(f, args, target=0.02, repeat=15):
    """Median seconds per call of ``f(*args)``."""
    n = 1
    while True:
        t = timeit.timeit(lambda: f(*args), number=n)
        if t > target / 10 or n > 1 << 20:
            break
        n *= 4
    n = max(1, int(n * (target / 10) / max(t, 1e-9)))
    times = [timeit.timeit(lambda: f(*args), number=n) / n for _ in range(repeat)]
    return float(np.median(times))


def _states(model, n, rng):
    Q = np.stack([model.random_configuration(rng) for _ in range(n)])
    return Q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


def _pinocchio(model):
    try:
        import pinocchio as pin
        from sparsedyn.interop import pinocchio as conv
    except ImportError:
        return None
    pm = conv.to_pinocchio(model)
    pd = pm.createData()
    return pin, pm, pd, conv


def _mujoco(model):
    """``(mujoco, MjModel, MjData, interop module)`` for ``model`` (through
    :func:`sparsedyn.interop.mujoco.load_mujoco`), or ``None`` when MuJoCo is missing
    or cannot express the model.  Constraints are disabled (joint limits)."""
    try:
        import mujoco
        from sparsedyn.interop import mujoco as conv
        mm = conv.load_mujoco(model)
    except Exception:           # noqa: BLE001 - whatever MuJoCo rejects, the column stays empty
        return None
    mm.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    return mujoco, mm, mujoco.MjData(mm), conv


def _mujoco_kernel(M, kern, nv):
    """A callable running MuJoCo's stages for ``kern`` on the state already in ``d`` and returning the result:
    rnea = kinematics, comPos, comVel, rne; crba = kinematics, comPos, makeM (then fullM, outside the timing);
    aba = forward (the whole pipeline, constraints disabled); minv = kinematics, comPos, crb, factorM, solveM(I)."""
    mujoco, mm, d, _ = M
    res, X, Y = np.zeros(nv), np.zeros((nv, nv)), np.eye(nv)
    if kern == "rnea":
        def f():
            mujoco.mj_kinematics(mm, d); mujoco.mj_comPos(mm, d); mujoco.mj_comVel(mm, d)  # noqa: E702
            mujoco.mj_rne(mm, d, 1, res)
            return res
    elif kern == "crba":
        make = getattr(mujoco, "mj_makeM", mujoco.mj_crb)     # crb, then M in the layout mj_fullM reads

        def f():
            mujoco.mj_kinematics(mm, d); mujoco.mj_comPos(mm, d); make(mm, d)  # noqa: E702
            return d
    elif kern == "aba":
        def f():
            mujoco.mj_forward(mm, d)
            return d.qacc
    else:
        def f():
            mujoco.mj_kinematics(mm, d); mujoco.mj_comPos(mm, d); mujoco.mj_crb(mm, d)  # noqa: E702
            mujoco.mj_factorM(mm, d); mujoco.mj_solveM(mm, d, X, Y)  # noqa: E702
            return X
    return f


def _fmt_rate(x):
    return f"{x / 1e6:6.2f}M" if x >= 1e6 else f"{x / 1e3:6.1f}k"


def bench_report(models=DEFAULT_MODELS, kernels=KERNELS, batch=10000, cold=True, seed=0, progress=None,
                 calls=True) -> str:
    """Run the benchmark and return the table as text (see the module docstring).

    ``cold``: build in a fresh temporary cache (so build times are real) instead
    of the user's cache.  ``calls``: also compare the ways of calling one kernel
    from Python (:func:`call_overhead_report`).
    """

    old_env = os.environ.get("SPARSEDYN_CACHE_DIR")
    tmp = tempfile.mkdtemp(prefix="sparsedyn-bench-") if cold else None
    if tmp:
        os.environ["SPARSEDYN_CACHE_DIR"] = tmp
    rng = np.random.default_rng(seed)
    try:
        comp = build.find_compiler()
        out = _header(comp, batch)
        builds = []
        for name in models:
            try:
                model = load_bench_model(name)
            except (FileNotFoundError, OSError) as e:
                out.append(f"{name:14s} skipped: {e}")
                continue
            out += _model_rows(name, model, kernels, batch, rng, progress, builds)
        out.append("")
        out.append("build times (s): scalar library, vectorised library, total compile() call, then a second "
                   "compile() of the same model (cached reuse)" + (" -- fresh cache" if cold else ""))
        for name, nv, ts, tb, tt, tr, built in builds:
            how = "built" if all(built.values()) else "from cache"
            out.append(f"  {name:14s} nv={nv:3d}  scalar {ts:6.2f}  batch {tb:6.2f}  total {tt:6.2f} ({how})  "
                       f"reuse {tr * 1e3:7.1f} ms")
        if calls and comp is not None:
            out.append("")
            out.append(call_overhead_report(load_bench_model("panda") if example_robot_data_dir() else sd.serial_chain(7)))
    finally:
        if tmp:
            if old_env is None:
                os.environ.pop("SPARSEDYN_CACHE_DIR", None)
            else:
                os.environ["SPARSEDYN_CACHE_DIR"] = old_env
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    return "\n".join(out)


def _header(comp, batch):
    """The report's lines before its rows: the machine, the compiler, what each column holds, the header."""
    try:
        import mujoco
        mj = f"MuJoCo {mujoco.__version__}"
    except ImportError:
        mj = "MuJoCo is not installed (its column stays empty)"
    try:
        import pinocchio as pin
        pv = f"Pinocchio {pin.__version__}"
    except ImportError:
        pv = "Pinocchio not installed (its columns are empty)"
    out = [f"machine: {platform.machine()} {_cpu_name()}, {os.cpu_count()} CPUs; Python "
           f"{platform.python_version()}, NumPy {np.__version__}; {pv}; {mj}"]
    out.append(f"compiler: {comp!r}" if comp else "compiler: none (NumPy fallback: these numbers are NOT "
                                                 "compiled code)")
    out.append("single: median time of one call from Python (us), ratio = sparsedyn / Pinocchio (<1: faster)")
    out.append(f"batch: {batch} states, states/s. sparsedyn: one batched call, up to {os.cpu_count()} threads, fresh "
               f"output (the default), the same on 1 thread, and into a preallocated out=; Pinocchio: a Python "
               f"loop of single calls (results left in its Data, not copied out); ratio = sparsedyn default / "
               f"Pinocchio (>1: faster)")
    out.append("GF/s: IR flops / time (1: single call from Python; N: best batched)")
    out.append("mj: MuJoCo's stages for the same result from Python (rnea: kinematics+comPos+comVel+rne; crba: "
               "kinematics+comPos+makeM; aba: mj_forward, constraints off; minv: ...+factorM+solveM(I)); "
               "ratio = sparsedyn / MuJoCo single-call time")
    out.append("")
    hdr = (f"{'model':13s} {'nv':>3s} {'kern':4s} {'flops':>6s} | {'sd us':>6s} {'pin us':>6s} {'ratio':>5s} | "
           f"{'sd st/s':>7s} {'1 thr':>7s} {'out=':>7s} {'pin':>7s} {'ratio':>5s} | "
           f"{'GF/s1':>5s} {'GF/sN':>5s} | {'mj us':>6s} {'ratio':>5s}")
    return out + [hdr, "-" * len(hdr)]


def _model_rows(name, model, kernels, batch, rng, progress, builds):
    """The rows of ``model``'s ``kernels`` (compiled here; its build times appended to ``builds``)."""
    if progress:
        progress(f"{name}: compiling")
    t0 = time.perf_counter()
    k = sd.compile(model, kernels, vectorize=True, progress=progress)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    sd.compile(model, kernels, vectorize=True)
    t_reuse = time.perf_counter() - t0
    secs = k.build_seconds
    builds.append((name, model.nv, sum(t for n, t in secs.items() if n.endswith("-single")),
                   sum(t for n, t in secs.items() if n.endswith("-batch")), t_build, t_reuse, k.built))
    P, MJ = _pinocchio(model), _mujoco(model)
    Q, V, A = _states(model, batch, rng)
    pin_states = None
    if P:
        conv = P[3]
        pin_states = tuple(np.ascontiguousarray(x) for x in (
            conv.q_to_pinocchio(model, Q), conv.v_to_pinocchio(model, V), conv.tau_to_pinocchio(model, A)))
    rows = []
    for kern in kernels:
        if progress:
            progress(f"{name}: timing {kern}")
        rows.append(_kernel_row(name, model, k, kern, (Q, V, A), P, pin_states, MJ, batch))
    return rows


def _kernel_row(name, model, k, kern, states, P, pin_states, MJ, batch):
    """One row: the compiled kernel ``kern`` of ``k`` on one state and on the batch ``states``, beside
    Pinocchio's (``P``: :func:`_pinocchio`'s, its states ``pin_states``) and MuJoCo's (``MJ``)."""
    Q, V, A = states
    q, v, a = Q[0].copy(), V[0].copy(), A[0].copy()
    f = getattr(k, kern)
    args = {"rnea": (q, v, a), "aba": (q, v, a), "crba": (q,), "minv": (q,)}[kern]
    bargs = {"rnea": (Q, V, A), "aba": (Q, V, A), "crba": (Q,), "minv": (Q,)}[kern]
    t1 = _median_call(f, args)
    tN = min(timeit.repeat(lambda: f(*bargs), number=1, repeat=7)) / batch
    k.threads, threads = 1, k.threads
    tN1 = min(timeit.repeat(lambda: f(*bargs), number=1, repeat=5)) / batch
    k.threads = threads
    res = f(*bargs)
    tNo = min(timeit.repeat(lambda: f(*bargs, out=res), number=1, repeat=7)) / batch
    flops = k.flops(kern)["total"]
    p1, pN = _pinocchio_times(kern, P, pin_states, batch) if P else (None, None)
    mcol = _mujoco_column(model, kern, MJ, (q, v, a), t1) if MJ else f"{'-':>6s} {'-':>5s}"
    r1 = f"{t1 / p1:5.2f}" if p1 else f"{'-':>5s}"
    rN = f"{pN / tN:5.1f}" if pN else f"{'-':>5s}"
    return (f"{name:13s} {model.nv:3d} {kern:4s} {flops:6d} | {t1 * 1e6:6.2f} "
            f"{(p1 or 0) * 1e6:6.2f} {r1} | {_fmt_rate(1 / tN):>7s} {_fmt_rate(1 / tN1):>7s} "
            f"{_fmt_rate(1 / tNo):>7s} {_fmt_rate(1 / pN) if pN else '-':>7s} {rN} | "
            f"{flops / t1 / 1e9:5.2f} {flops / min(tN, tNo) / 1e9:5.2f} | {mcol}")


def _pinocchio_times(kern, P, pin_states, batch):
    """``(one call, a state of a loop)`` of Pinocchio's function for ``kern`` (seconds)."""
    pin, pm, pd, _ = P
    Qp, Vp, Ap = pin_states
    qp, vp, ap = Qp[0].copy(), Vp[0].copy(), Ap[0].copy()
    pf = {"rnea": pin.rnea, "aba": pin.aba, "crba": pin.crba, "minv": pin.computeMinverse}[kern]
    pargs = {"rnea": (pm, pd, qp, vp, ap), "aba": (pm, pd, qp, vp, ap), "crba": (pm, pd, qp),
             "minv": (pm, pd, qp)}[kern]
    p1 = _median_call(pf, pargs)
    cols = (Qp, Vp, Ap) if kern in ("rnea", "aba") else (Qp,)
    nloop = min(batch, 10000)

    def loop():
        for row in zip(*(c[:nloop] for c in cols)):
            pf(pm, pd, *row)
    return p1, min(timeit.repeat(loop, number=1, repeat=3)) / nloop


def _mujoco_column(model, kern, MJ, state, t1):
    """MuJoCo's column for ``kern`` at ``state`` ``(q, v, a)``: its single-call time and our ratio to it
    (``t1``), marked where its result differs from ours."""
    q, v, a = state
    mujoco, mm, d, conv = MJ
    mjk = _mujoco_kernel(MJ, kern, model.nv)
    T = conv.velocity_map(model, q)
    d.qpos[:], d.qvel[:] = conv.q_to_mujoco(model, q), conv.v_to_mujoco(model, q, v)
    d.qacc[:], d.qfrc_applied[:] = conv.a_to_mujoco(model, q, v, a), conv.tau_to_mujoco(model, q, a)
    r = mjk()
    r = np.array(r, copy=True) if kern != "crba" else None
    if kern == "crba":
        r = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(mm, d, r)
    ours = (T @ sd.rnea(model, q, v, a) if kern == "rnea" else T @ sd.crba(model, q) @ T.T
            if kern == "crba" else conv.a_to_mujoco(model, q, v, sd.aba(model, q, v, a))
            if kern == "aba" else T @ sd.minv(model, q) @ T.T)
    same = np.abs(r - ours).max() <= 1e-8 * max(1.0, np.abs(ours).max())
    m1 = _median_call(mjk, ())
    return f"{m1 * 1e6:6.2f} {t1 / m1:5.2f}" + ("" if same else " (results differ!)")


def call_overhead_report(model) -> str:
    """How to call one compiled kernel from Python: the C fast path vs ``ctypes`` (median us)."""
    k = sd.compile(model, kernels=("rnea",))
    rng = np.random.default_rng(1)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    lib = k._library("rnea", "single")
    f = lib.single["rnea"]
    out_arr = np.empty(model.nv)
    pre = [q.ctypes.data, v.ctypes.data, a.ctypes.data, out_arr.ctypes.data]

    def ctypes_fresh():
        o = np.empty(model.nv)
        f(q.ctypes.data, v.ctypes.data, a.ctypes.data, o.ctypes.data)
        return o

    loop = lib.loop["rnea"]
    n = 20000
    Q, V, A = np.tile(q, (n, 1)), np.tile(v, (n, 1)), np.tile(a, (n, 1))
    O = np.empty((n, model.nv))
    t_native = min(timeit.repeat(lambda: loop(n, Q.ctypes.data, V.ctypes.data, A.ctypes.data, O.ctypes.data, 1),
                                 number=1, repeat=5)) / n
    rows = [("kernel alone (native loop over states, per state)", t_native),
            ("C fast path: k.rnea(q, v, a)", _median_call(k.rnea, (q, v, a)) if k.fastcall else float("nan")),
            ("ctypes, pointers precomputed, output reused", _median_call(f, pre)),
            ("ctypes, arr.ctypes.data per call, fresh output", _median_call(ctypes_fresh, ())),
            ("general path (dtype/shape checks, broadcasting)", _median_call(k._general("rnea"), (q, v, a)))]
    lines = [f"calling rnea of {model.name!r} (nv={model.nv}) from Python, median us per call:"]
    lines += [f"  {label:52s} {t * 1e6:7.2f}" for label, t in rows]
    return "\n".join(lines)


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    p.add_argument("--kernels", nargs="+", default=list(KERNELS))
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--cache", action="store_true", help="use the user's build cache instead of a fresh one")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    progress = None if a.quiet else (lambda m: print(f"  .. {m}", file=sys.stderr, flush=True))
    print(bench_report(a.models, a.kernels, a.batch, cold=not a.cache, progress=progress))


if __name__ == "__main__":
    main()
