"""Plain calls (``sd.rnea(model, q, v, a)``, the first thing a user writes) beside Pinocchio.

    .venv/bin/python benchmarks/bench_plain.py                   # talos_reduced, the user's build cache
    .venv/bin/python benchmarks/bench_plain.py --models panda talos_reduced
    .venv/bin/python benchmarks/bench_plain.py --models humanoid humanoid_spherical_zyx_hips --functions rnea aba
    .venv/bin/python benchmarks/bench_plain.py --models dm_humanoid --roads     # composite joints; lists, keywords

For each function: the first plain call of the process (with a warm build cache: loading the
native kernel; a cold cache builds it, in the background after half a second), then the best
time of one plain call, of the compiled model's method (``sd.compile(model).rnea(q, v, a)``) and of
Pinocchio's Python call, timed alternately in many short rounds (all three see the same load; the
minimum over rounds).  Ratio = plain call /
Pinocchio (< 1: faster), with the geometric mean over the functions; *dispatch* = plain call -
compiled method (the registry's wrapper).  Deterministic mode, so every plain call timed is native.
Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import os
import platform
import sys
import time
import timeit

import numpy as np


def _number(f, target):
    f()
    n = 1
    while timeit.timeit(f, number=n) < target and n < 1 << 20:
        n *= 2
    return n


def interleaved(fs, rounds=400, target=1e-4):
    """Best seconds per call of each of ``fs``: many short rounds (about ``target`` seconds each),
    the functions in turn, the minimum over rounds (on a loaded machine the other processes only
    ever add time; short rounds are the ones that escape them)."""
    ns = [_number(f, target) for f in fs]
    best = [np.inf] * len(fs)
    pc = time.perf_counter
    for _ in range(rounds):
        for j, (f, n) in enumerate(zip(fs, ns)):
            t = pc()
            for _ in range(n):
                f()
            best[j] = min(best[j], (pc() - t) / n)
    return best


def rows_for(name, rng, functions=None):
    import pinocchio as pin

    import sparsedyn as sd
    from bench_compiled import load_bench_model
    from sparsedyn.interop import pinocchio as conv
    model = load_bench_model(name)
    pm = conv.to_pinocchio(model)
    pd = pm.createData()
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp, vp, ap = conv.q_to_pinocchio(model, q), conv.v_to_pinocchio(model, v), conv.v_to_pinocchio(model, a)
    q2 = q.copy()                                  # (off the unit sphere: what normalize is for)
    for i, j in enumerate(model.joints):
        for k in j.quaternions():
            q2[model.q_slice(i).start + k:model.q_slice(i).start + k + 4] *= 1.5
    qp2 = conv.q_to_pinocchio(model, q2)
    frame = model.body_names[-1]
    fid = pm.getFrameId(frame) if pm.existFrame(frame) else pm.nframes - 1
    LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    cases = [
        ("rnea", lambda: sd.rnea(model, q, v, a), "rnea", (q, v, a), lambda: pin.rnea(pm, pd, qp, vp, ap)),
        ("aba", lambda: sd.aba(model, q, v, a), "aba", (q, v, a), lambda: pin.aba(pm, pd, qp, vp, ap)),
        ("crba", lambda: sd.crba(model, q), "crba", (q,), lambda: pin.crba(pm, pd, qp)),
        ("minv", lambda: sd.minv(model, q), "minv", (q,), lambda: pin.computeMinverse(pm, pd, qp)),
        ("forward_kinematics", lambda: sd.forward_kinematics(model, q), "forward_kinematics", (q,),
         lambda: pin.forwardKinematics(pm, pd, qp)),
        ("frame_jacobian", lambda: sd.frame_jacobian(model, q, frame, "local_world_aligned"), "frame_jacobian",
         (q, frame, "local_world_aligned"), lambda: pin.computeFrameJacobian(pm, pd, qp, fid, LWA)),
        ("center_of_mass", lambda: sd.center_of_mass(model, q), "center_of_mass", (q,),
         lambda: pin.centerOfMass(pm, pd, qp)),
        ("normalize", lambda: sd.normalize(model, q2), "normalize", (q2,), lambda: pin.normalize(pm, qp2)),
        ("rnea_derivatives", lambda: sd.rnea_derivatives(model, q, v, a), "rnea_derivatives", (q, v, a),
         lambda: pin.computeRNEADerivatives(pm, pd, qp, vp, ap)),
        ("aba_derivatives", lambda: sd.aba_derivatives(model, q, v, a), "aba_derivatives", (q, v, a),
         lambda: pin.computeABADerivatives(pm, pd, qp, vp, ap)),
        ("centroidal_dynamics_derivatives", lambda: sd.centroidal_dynamics_derivatives(model, q, v, a),
         "centroidal_dynamics_derivatives", (q, v, a),
         lambda: pin.computeCentroidalDynamicsDerivatives(pm, pd, qp, vp, ap)),
    ]
    rows = []
    for fname, plain, meth, args, theirs in cases:
        if functions and fname not in functions:
            continue
        t0 = time.perf_counter()
        plain()
        first = time.perf_counter() - t0
        k = sd.compile(model)
        method = getattr(k, meth)
        t_plain, t_k, t_pin = interleaved([plain, lambda: method(*args), theirs])
        rows.append((name, fname, first, t_plain, t_k, t_pin))
    kinds = sorted({pm.joints[j].shortname() for j in range(1, pm.njoints)})
    return model, rows, kinds


def roads(model, rng, rounds=1000):
    """Best time of one plain call with the state as arrays, as plain Python lists and by keyword
    (``sd.rnea(model, q=q, v=v, a=a)``), for ``rnea`` and ``aba_derivatives``, alternating."""
    import sparsedyn as sd
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    ql, vl, al = q.tolist(), v.tolist(), a.tolist()
    out = {}
    for f in (sd.rnea, sd.aba_derivatives):
        out[f.__name__] = interleaved([lambda: f(model, q, v, a), lambda: f(model, ql, vl, al),
                                       lambda: f(model, q=q, v=v, a=a) if f is sd.rnea else f(model, q=q, v=v, tau=a)],
                                      rounds)
    return out


def dispatch(model, rng, rounds=3000):
    """Best time of ``sd.f(model, ...)`` and of ``k.f(...)`` for ``rnea`` and ``integrate`` over many
    alternating rounds (the registry's wrapper is the difference)."""
    import sparsedyn as sd
    k = sd.compile(model)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    return {"rnea": interleaved([lambda: sd.rnea(model, q, v, a), lambda: k.rnea(q, v, a)], rounds),
            "integrate": interleaved([lambda: sd.integrate(model, q, v), lambda: k.integrate(q, v)], rounds)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["talos_reduced"],
                    help="example-robot-data names, chainN, humanoid, humanoid_spherical_zyx_hips (Euler-angle "
                         "hips: Pinocchio's JointModelSphericalZYX), a built-in name or a URDF path")
    ap.add_argument("--functions", nargs="+", default=None, help="only these functions (default: all)")
    ap.add_argument("--roads", action="store_true", help="also one call with lists and with keywords")
    args = ap.parse_args(argv)
    import sparsedyn as sd
    sd.use_backend("native", deterministic=True)
    rng = np.random.default_rng(0)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"Python {platform.python_version()}")
    for name in args.models:
        model, rows, kinds = rows_for(name, rng, args.functions)
        print(f"\n{name}: {model.nbodies} bodies, nq={model.nq}, nv={model.nv}; Pinocchio joints: {', '.join(kinds)}")
        print(f"| function | first plain call, ms | plain call, us | k.method, us | dispatch, us | Pinocchio, us "
              f"| plain / Pinocchio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        ratios = []
        for _, fname, first, t_plain, t_k, t_pin in rows:
            ratios.append(t_plain / t_pin)
            print(f"| {fname} | {first * 1e3:.1f} | {t_plain * 1e6:.2f} | {t_k * 1e6:.2f} | "
                  f"{(t_plain - t_k) * 1e6:+.2f} | {t_pin * 1e6:.2f} | {t_plain / t_pin:.2f} |")
        print(f"| geometric mean | | | | | | {float(np.exp(np.mean(np.log(ratios)))):.2f} |")
        if args.roads:
            for fname, (t_arr, t_list, t_kw) in roads(model, rng).items():
                print(f"roads ({fname}): arrays {t_arr * 1e6:.2f} us, plain lists {t_list * 1e6:.2f} us, "
                      f"by keyword {t_kw * 1e6:.2f} us")
        for fname, (t_plain, t_k) in dispatch(model, rng).items():
            print(f"dispatch ({fname}, 3000 alternating rounds): sd.{fname}(model, ...) {t_plain * 1e6:.3f} us, "
                  f"k.{fname}(...) {t_k * 1e6:.3f} us, difference {(t_plain - t_k) * 1e6:+.3f} us")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
