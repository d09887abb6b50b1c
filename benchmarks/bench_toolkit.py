"""The model toolkit beside Pinocchio, measured side by side in one run.

    .venv/bin/python benchmarks/bench_toolkit.py                 # talos_reduced (floating), 10000 poses
    .venv/bin/python benchmarks/bench_toolkit.py --batch 100000

* ``coriolis_matrix``: one call of the compiled kernel (``sparsedyn.compile(model).coriolis_matrix``,
  the C fast path) beside Pinocchio's ``computeCoriolisMatrix`` from Python, best of repeated
  timings taken alternately, microseconds; and a batch of states (one call) beside a Python loop of
  Pinocchio calls.
* ``exp6`` / ``log6`` / ``exp6_jacobian`` / ``log6_jacobian``: one NumPy batch call on ``N`` twists
  (poses) beside a Python loop of Pinocchio's ``exp6`` / ``log6`` / ``Jexp6`` / ``Jlog6`` over the same
  ``N``; and the same functions compiled as user kernels (``sparsedyn.compile(model, kernels=[fn])``)
  and called on the batch: a twist is passed as the ``v`` of a one-body free-floating model (nv = 6),
  a pose ``(R, p)`` as the ``f_ext`` (2, 6) of a two-body model (12 numbers), since user kernels
  take arrays of the model's vocabulary.  The log kernels use the scalar batch loop
  (``vectorize=False``): the SIMD library's lane-by-lane ``atan2`` is slow (see the comment below).

Ratios are sparsedyn / Pinocchio time (< 1: sparsedyn faster).  Nothing is asserted.
"""

import argparse
import os
import sys
import tempfile
import time
import timeit
import warnings

import numpy as np


def best(f, number, repeat=7):
    f()
    return min(timeit.timeit(f, number=number) / number for _ in range(repeat))


def paired(f, g, number, repeat=9):
    f(), g()
    tf, tg = [], []
    for _ in range(repeat):
        tf.append(timeit.timeit(f, number=number) / number)
        tg.append(timeit.timeit(g, number=number) / number)
    return min(tf), min(tg)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=10000, help="poses per SE(3) batch (default %(default)s)")
    ap.add_argument("--states", type=int, default=1000, help="states per coriolis batch (default %(default)s)")
    ap.add_argument("--cache", action="store_true", help="reuse the user's build cache (default: a fresh one)")
    args = ap.parse_args(argv)
    if not args.cache:
        os.environ["SPARSEDYN_CACHE_DIR"] = tempfile.mkdtemp(prefix="sparsedyn-bench-")
    import pinocchio as pin
    lines = ["# sparsedyn model toolkit beside Pinocchio " + pin.__version__, ""]
    rng = np.random.default_rng(0)
    lines += _coriolis_rows(args.states, rng)
    lines += _se3_rows(args.batch, rng)
    print("\n".join(lines))


def _coriolis_rows(N, rng):
    """The compiled ``coriolis_matrix`` of talos_reduced (floating base) beside Pinocchio's
    ``computeCoriolisMatrix``: one state and a batch of ``N`` (per state, against a Python loop)."""
    import pinocchio as pin
    import sparsedyn as sd
    from sparsedyn.interop import example_robot_data_dir
    from sparsedyn.interop import pinocchio as ip
    path = os.path.join(example_robot_data_dir(), "talos_data", "robots", "talos_reduced.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(path, floating_base=True)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    pd = pm.createData()
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    qp, vp = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v)
    t0 = time.perf_counter()
    k = sd.compile(model, kernels=("coriolis_matrix",), vectorize=True)
    build = time.perf_counter() - t0
    C = k.coriolis_matrix(q, v)
    Cp = ip.tau_from_pinocchio(model, ip.v_from_pinocchio(model, pin.computeCoriolisMatrix(pm, pd, qp, vp)).T).T
    err = np.abs(C - Cp).max() / max(1.0, np.abs(Cp).max())
    ts, tp = paired(lambda: k.coriolis_matrix(q, v), lambda: pin.computeCoriolisMatrix(pm, pd, qp, vp), 2000)
    lines = [f"## coriolis_matrix, talos_reduced floating base (nv = {model.nv}); build {build:.1f} s; "
             f"max difference {err:.1e}", "",
             "| call | sparsedyn compiled | Pinocchio computeCoriolisMatrix | ratio |", "|---|---:|---:|---:|",
             f"| one state | {ts * 1e6:.2f} us | {tp * 1e6:.2f} us | {ts / tp:.2f} |"]
    Q = np.stack([model.random_configuration(rng) for _ in range(N)])
    V = rng.normal(size=(N, model.nv))
    QP = ip.q_to_pinocchio(model, Q)
    VP = ip.v_to_pinocchio(model, V)
    out = np.empty((N, model.nv, model.nv))
    tb = best(lambda: k.coriolis_matrix(Q, V, out=out), 3)

    def loop():
        for i in range(N):
            pin.computeCoriolisMatrix(pm, pd, QP[i], VP[i])

    tl = best(loop, 1, 3)
    lines.append(f"| batch of {N} (per state) | {tb / N * 1e6:.2f} us | {tl / N * 1e6:.2f} us (Python loop) | "
                 f"{tb / tl:.2f} |")
    return lines


def _se3_kernels():
    """Two models (a free body: ``v`` a twist; two revolute bodies: ``f_ext`` (2, 6) a pose ``(R, p)``) compiled
    with user kernels of the SE(3) maps: ``(kt, kp)``, ``kt.exp6_k``, ``kt.jexp6_k``, ``kp.log6_k``,
    ``kp.jlog6_k``."""
    import sparsedyn as sd
    free = sd.ModelBuilder("twist")
    free.add_body("b", None, sd.make_joint("free"), mass=1.0)
    free = free.build()                                         # v: (6,), a twist
    two = sd.ModelBuilder("pose")
    two.add_body("b1", None, sd.make_joint("revolute"), mass=1.0)
    two.add_body("b2", "b1", sd.make_joint("revolute"), mass=1.0)
    two = two.build()                                           # f_ext: (2, 6), a pose (R, p)

    def exp6_k(model, v):
        R, p = sd.exp6(v)
        return R, p

    def jexp6_k(model, v):
        return sd.exp6_jacobian(v)

    def log6_k(model, f_ext):
        return sd.log6((f_ext.reshape(f_ext.shape[:-2] + (12,))[..., :9].reshape(f_ext.shape[:-2] + (3, 3)),
                        f_ext.reshape(f_ext.shape[:-2] + (12,))[..., 9:]))

    def jlog6_k(model, f_ext):
        flat = f_ext.reshape(f_ext.shape[:-2] + (12,))
        return sd.log6_jacobian((flat[..., :9].reshape(f_ext.shape[:-2] + (3, 3)), flat[..., 9:]))

    kt = sd.compile(free, kernels=[exp6_k, jexp6_k], vectorize=True)
    # vectorize=False: the SIMD batch library calls atan2 lane by lane at ~1 us a call on this machine
    # (the scalar batch loop: ~30 ns), so log3's atan2 would dominate
    return kt, sd.compile(two, kernels=[log6_k, jlog6_k], vectorize=False)


def _se3_rows(n, rng):
    """The SE(3) maps on ``n`` twists or poses: one NumPy batch call and one compiled batch call beside a
    Python loop of Pinocchio calls."""
    import pinocchio as pin
    import sparsedyn as sd
    w = rng.normal(size=(n, 3))
    w *= (rng.uniform(0, np.pi - 1e-3, n) / np.linalg.norm(w, axis=1))[:, None]
    xi = np.concatenate([w, rng.normal(size=(n, 3))], -1)
    R, p = sd.exp6(xi)
    motions = [pin.Motion(x[3:], x[:3]) for x in xi]
    poses = [pin.SE3(R[i], p[i]) for i in range(n)]
    kt, kp = _se3_kernels()
    F = np.concatenate([R.reshape(n, 9), p], -1).reshape(n, 2, 6)
    assert np.abs(kp.log6_k(F) - sd.log6((R, p))).max() < 1e-12
    assert np.abs(kt.exp6_k(xi)[1] - p).max() < 1e-12
    rows = []
    for name, ours, comp, theirs in (
            ("exp6", lambda: sd.exp6(xi), lambda: kt.exp6_k(xi), lambda: [pin.exp6(m) for m in motions]),
            ("log6", lambda: sd.log6((R, p)), lambda: kp.log6_k(F), lambda: [pin.log6(M) for M in poses]),
            ("exp6_jacobian (Jexp6)", lambda: sd.exp6_jacobian(xi), lambda: kt.jexp6_k(xi),
             lambda: [pin.Jexp6(m) for m in motions]),
            ("log6_jacobian (Jlog6)", lambda: sd.log6_jacobian((R, p)), lambda: kp.jlog6_k(F),
             lambda: [pin.Jlog6(M) for M in poses])):
        a, b = paired(ours, theirs, 1, 5)
        c, b2 = paired(comp, theirs, 1, 5)
        b = min(b, b2)
        rows.append(f"| {name} | {a * 1e3:.2f} ms | {c * 1e3:.2f} ms | {b * 1e3:.2f} ms | {b / a:.1f}x | {b / c:.1f}x |")
    return ["", f"## SE(3) maps on {n} twists / poses (one batch call vs a Python loop of Pinocchio calls)", "",
            "| function | sparsedyn NumPy batch | sparsedyn compiled batch | Pinocchio loop | speed-up NumPy | "
            "speed-up compiled |", "|---|---:|---:|---:|---:|---:|"] + rows

if __name__ == "__main__":
    sys.exit(main())
