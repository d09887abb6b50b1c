"""Every compiled function of sparsedyn beside its peer, measured side by side in one run.

    .venv/bin/python benchmarks/bench_all.py                  # panda and talos_reduced, fresh build cache
    .venv/bin/python benchmarks/bench_all.py --cache --batch 20000 --models panda

* Single calls (median time of one call from Python, microseconds): each function of a
  compiled model (``sparsedyn.compile(model)``) beside Pinocchio's equivalent Python call
  (``rnea``, ``aba``, ``crba``, ``computeMinverse``, ``framesForwardKinematics``,
  ``computeFrameJacobian``, ``getFrameVelocity``, ``integrate``, ``difference``,
  ``computeGeneralizedGravity``, ``nonLinearEffects``), ratio = sparsedyn / Pinocchio
  (< 1: faster), and MuJoCo's stages where it has one (rnea: kinematics + comPos + comVel + rne).
  Pinocchio's kinematics write into its ``Data``; the rows ``... out=`` put ours beside them writing
  into preallocated arrays too.
  The first call of each function (trace + build, or a load from the cache) is reported too.
* Batches: states/s of one batched call (2 threads) beside Pinocchio's C++
  ``rneaInParallel`` / ``abaInParallel`` with a ``ModelPool`` and 2 threads; bytes/s of
  ``crba`` and ``minv`` (the results written) beside ``memcpy`` of the same size.
* Cold compile: seconds to build the default kernels of a model in a fresh cache.
* The constrained delta robot: seconds to simulate 1 s (NumPy path).

Nothing here is a test: numbers are reported, never asserted.  Progress is one updating line.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
import timeit
import warnings

import numpy as np


def progress(msg):
    sys.stderr.write("\r\033[K" + msg[:150])
    sys.stderr.flush()


def _number(f, target):
    f()
    n = 1
    while True:
        t = timeit.timeit(f, number=n)
        if t > target or n > 1 << 20:
            return n
        n *= 4


def median_call(f, target=0.01, repeat=9):
    """Best of ``repeat`` timings, seconds per call of ``f()`` (the best, not the median: on a shared
    machine the other processes only ever add time)."""
    n = _number(f, target)
    return min(timeit.timeit(f, number=n) / n for _ in range(repeat))


def paired_calls(f, g, target=0.005, repeat=15):
    """Best seconds per call of ``f()`` and of ``g()``, timed alternately (both see the same load)."""
    nf, ng = _number(f, target), _number(g, target)
    tf, tg = [], []
    for _ in range(repeat):
        tf.append(timeit.timeit(f, number=nf) / nf)
        tg.append(timeit.timeit(g, number=ng) / ng)
    return min(tf), min(tg)


def single_calls(name, model, rng, rows):
    import pinocchio as pin

    import sparsedyn as sd
    from sparsedyn.interop import pinocchio as conv
    k = sd.compile(model)
    pm = conv.to_pinocchio(model)
    pd = pm.createData()
    q, q1 = model.random_configuration(rng), model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp, q1p = conv.q_to_pinocchio(model, q), conv.q_to_pinocchio(model, q1)
    vp, ap = conv.v_to_pinocchio(model, v), conv.v_to_pinocchio(model, a)
    frame = model.body_names[-1]
    fid = pm.getFrameId(frame) if pm.existFrame(frame) else pm.nframes - 1
    LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED

    def pin_frame_velocity():
        pin.forwardKinematics(pm, pd, qp, vp)
        return pin.getFrameVelocity(pm, pd, fid, LWA)

    fp_out = tuple(np.empty(x.shape) for x in sd.frame_placements(model, q))
    fk_out = tuple(np.empty(x.shape) for x in sd.forward_kinematics(model, q))
    cases = [
        ("rnea", lambda: k.rnea(q, v, a), lambda: pin.rnea(pm, pd, qp, vp, ap)),
        ("aba", lambda: k.aba(q, v, a), lambda: pin.aba(pm, pd, qp, vp, ap)),
        ("crba", lambda: k.crba(q), lambda: pin.crba(pm, pd, qp)),
        ("minv", lambda: k.minv(q), lambda: pin.computeMinverse(pm, pd, qp)),
        ("nonlinear_effects", lambda: k.nonlinear_effects(q, v), lambda: pin.nonLinearEffects(pm, pd, qp, vp)),
        ("generalized_gravity", lambda: k.generalized_gravity(q), lambda: pin.computeGeneralizedGravity(pm, pd, qp)),
        ("frame_placements", lambda: k.frame_placements(q), lambda: pin.framesForwardKinematics(pm, pd, qp)),
        ("forward_kinematics", lambda: k.forward_kinematics(q), lambda: pin.forwardKinematics(pm, pd, qp)),
        ("frame_jacobian", lambda: k.frame_jacobian(q, frame, "local_world_aligned"),
         lambda: pin.computeFrameJacobian(pm, pd, qp, fid, LWA)),
        ("frame_velocity", lambda: k.frame_velocity(q, v, frame, "local_world_aligned"), pin_frame_velocity),
        # Pinocchio's kinematics write into its Data: beside them, ours into preallocated arrays too.
        ("frame_placements out=", lambda: k.frame_placements(q, out=fp_out), lambda: pin.framesForwardKinematics(pm, pd, qp)),
        ("forward_kinematics out=", lambda: k.forward_kinematics(q, out=fk_out), lambda: pin.forwardKinematics(pm, pd, qp)),
        ("integrate", lambda: k.integrate(q, v), lambda: pin.integrate(pm, qp, vp)),
        ("difference", lambda: k.difference(q, q1), lambda: pin.difference(pm, qp, q1p)),
    ]
    mj = _mujoco_rnea(model, q, v, a)
    for fname, ours, theirs in cases:
        progress(f"{name}: {fname} (first call: trace + build or cache load)")
        t0 = time.perf_counter()
        ours()
        first = time.perf_counter() - t0
        progress(f"{name}: {fname} (timing)")
        t_sd, t_pin = paired_calls(ours, theirs)
        t_mj = median_call(mj) if (fname == "rnea" and mj is not None) else None
        rows.append((name, fname, first, t_sd, t_pin, t_mj))
    return k


def _mujoco_rnea(model, q, v, a):
    try:
        import mujoco

        from sparsedyn.interop import mujoco as conv
        mm = conv.load_mujoco(model)
    except Exception:            # noqa: BLE001 - whatever MuJoCo rejects, its column stays empty
        return None
    d = mujoco.MjData(mm)
    res = np.zeros(mm.nv)
    d.qpos[:] = conv.q_to_mujoco(model, q) if hasattr(conv, "q_to_mujoco") else d.qpos

    def f():
        mujoco.mj_kinematics(mm, d)
        mujoco.mj_comPos(mm, d)
        mujoco.mj_comVel(mm, d)
        mujoco.mj_rne(mm, d, 1, res)
        return res
    return f


def batches(name, model, k, n, rng, rows):
    import pinocchio as pin

    from sparsedyn.interop import pinocchio as conv
    Q = np.stack([model.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    k.threads = 2
    progress(f"{name}: building the batch kernels")
    k.rnea(Q[:64], V[:64], A[:64])
    k.aba(Q[:64], V[:64], A[:64])
    k.crba(Q[:64])
    k.minv(Q[:64])
    pm = conv.to_pinocchio(model)
    pool = pin.ModelPool(pm, 2)
    Qp = np.asfortranarray(conv.q_to_pinocchio(model, Q).T)
    Vp = np.asfortranarray(conv.v_to_pinocchio(model, V).T)
    Ap = np.asfortranarray(conv.v_to_pinocchio(model, A).T)
    tau_p = np.asfortranarray(np.zeros((model.nv, n)))
    out = {"rnea": np.empty((n, model.nv)), "aba": np.empty((n, model.nv)),
           "crba": np.empty((n, model.nv, model.nv)), "minv": np.empty((n, model.nv, model.nv))}
    for fname, ours, theirs in (
            ("rnea", lambda: k.rnea(Q, V, A, out=out["rnea"]), lambda: pin.rneaInParallel(2, pool, Qp, Vp, Ap, tau_p)),
            ("aba", lambda: k.aba(Q, V, A, out=out["aba"]), lambda: pin.abaInParallel(2, pool, Qp, Vp, Ap, tau_p)),
            ("crba", lambda: k.crba(Q, out=out["crba"]), None),
            ("minv", lambda: k.minv(Q, out=out["minv"]), None)):
        progress(f"{name}: batch {fname}")
        t_sd = min(timeit.repeat(ours, number=1, repeat=5))
        t_pin = min(timeit.repeat(theirs, number=1, repeat=5)) if theirs else None
        nbytes = out[fname].nbytes
        src = np.ones(nbytes // 8)
        dst = np.empty_like(src)
        t_cp = min(timeit.repeat(lambda: np.copyto(dst, src), number=1, repeat=5))
        rows.append((name, fname, n / t_sd, None if t_pin is None else n / t_pin, nbytes / t_sd, nbytes / t_cp))


def machine_setup():
    """Seconds for what a fresh cache builds once per machine and Python before any kernel: the
    compiler probe and the fast-call extension."""
    from sparsedyn.codegen import build, fastcall
    tmp = tempfile.mkdtemp(prefix="sparsedyn-cold-")
    old = os.environ.get("SPARSEDYN_CACHE_DIR")
    os.environ["SPARSEDYN_CACHE_DIR"] = tmp
    saved = dict(build._probed), dict(fastcall._loaded)
    build._probed.clear()
    fastcall._loaded.clear()
    try:
        progress("compiler probe and fast-call extension in a fresh cache")
        t0 = time.perf_counter()
        fastcall.load_fastcall(build.find_compiler())
        return time.perf_counter() - t0
    finally:
        build._probed.update(saved[0])
        fastcall._loaded.update(saved[1])
        if old is None:
            os.environ.pop("SPARSEDYN_CACHE_DIR", None)
        else:
            os.environ["SPARSEDYN_CACHE_DIR"] = old
        shutil.rmtree(tmp, ignore_errors=True)


def cold_compile(name, model, rows):
    """Seconds to build the default kernels of ``model`` in a fresh cache (the compiler probe and
    the fast-call extension excluded: see :func:`machine_setup`), then the batch rnea."""
    import sparsedyn as sd
    from sparsedyn.codegen.trace import DEFAULT_KERNELS
    tmp = tempfile.mkdtemp(prefix="sparsedyn-cold-")
    old = os.environ.get("SPARSEDYN_CACHE_DIR")
    os.environ["SPARSEDYN_CACHE_DIR"] = tmp
    try:
        progress(f"{name}: cold compile of the default kernels")
        t0 = time.perf_counter()
        k = sd.compile(model, DEFAULT_KERNELS)
        t_single = time.perf_counter() - t0
        t0 = time.perf_counter()
        k.rnea(np.stack([model.neutral()] * 64), np.zeros((64, model.nv)), np.zeros((64, model.nv)))
        t_batch_rnea = time.perf_counter() - t0
        rows.append((name, t_single, t_batch_rnea, len(DEFAULT_KERNELS)))
    finally:
        if old is None:
            os.environ.pop("SPARSEDYN_CACHE_DIR", None)
        else:
            os.environ["SPARSEDYN_CACHE_DIR"] = old
        shutil.rmtree(tmp, ignore_errors=True)


def delta_robot(seconds=1.0, dt=1e-3, numpy_seconds=0.1):
    """Seconds to simulate the delta robot for ``seconds``: compiled (``sparsedyn.compile`` of its
    constraint set; first run: with the builds of its step and projection kernels; then warm), and the NumPy
    path over ``numpy_seconds`` scaled to ``seconds``."""
    import sparsedyn as sd
    from sparsedyn.constraints.examples import delta_robot
    from sparsedyn.constraints.simulate import simulate
    mech = delta_robot()
    cs, q0, v0 = mech.constraints, mech.q0, np.zeros(mech.constraints.nv)
    progress("delta robot: compiled simulation (first run builds its kernels)")
    t0 = time.perf_counter()
    kc = sd.compile(cs)
    simulate(kc, q0, v0, seconds, dt)
    t_first = time.perf_counter() - t0
    progress("delta robot: compiled simulation (warm)")
    t0 = time.perf_counter()
    simulate(kc, q0, v0, seconds, dt)
    t_warm = time.perf_counter() - t0
    progress("delta robot: NumPy simulation")
    t0 = time.perf_counter()
    simulate(cs, q0, v0, numpy_seconds, dt)
    t_numpy = (time.perf_counter() - t0) * seconds / numpy_seconds
    return t_first, t_warm, t_numpy


def icub_estimation(rng):
    """Median us of one estimation (iCub, six URDF force/torque sensors, both soles in contact):
    sparsedyn's compiled ``solve`` (checks, Estimate), its kernel alone, and iDynTree's
    ``ExtWrenchesAndJointTorquesEstimator`` (kinematics update + estimate)."""
    import idyntree.swig as idt

    import sparsedyn as sd
    from sparsedyn.interop import example_robot_data_dir
    from sparsedyn.estimation import problem_from_file
    from sparsedyn.estimation.casestudy import consistent_state
    urdf = example_robot_data_dir() / "icub_description/robots/icub.urdf"
    progress("iCub: compiling the estimator")
    model = sd.load_urdf(urdf, floating_base=True)
    problem = problem_from_file(model, os.path.join(os.path.dirname(__file__), "..", "examples",
                                                    "icub_feet_contacts.toml"))
    k = sd.compile(problem)
    q, v, a, w = consistent_state(problem, rng)
    y, _ = problem.measurements(q, v, a, w)
    k.solve(q, v, y)
    progress("iCub: timing sparsedyn")
    t_solve = median_call(lambda: k.solve(q, v, y))
    t_kernel = median_call(lambda: k.raw(q, v, y))
    progress("iCub: timing iDynTree")
    ml = idt.ModelLoader()
    ml.loadModelFromFile(str(urdf))
    est = idt.ExtWrenchesAndJointTorquesEstimator()
    est.setModelAndSensors(ml.model(), ml.sensors())
    m = est.model()
    qj, dqj, ddqj = idt.JointPosDoubleArray(m), idt.JointDOFsDoubleArray(m), idt.JointDOFsDoubleArray(m)
    for x in (qj, dqj, ddqj):
        x.zero()
    g, om, dom = idt.Vector3(), idt.Vector3(), idt.Vector3()
    g.zero()
    g.setVal(2, 9.81)
    om.zero()
    dom.zero()
    base = m.getFrameIndex("root_link")
    unk = idt.LinkUnknownWrenchContacts(m)
    for f in ("l_sole", "r_sole"):
        unk.addNewUnknownFullWrenchInFrameOrigin(m, m.getFrameIndex(f))
    meas = idt.SensorsMeasurements(est.sensors())
    contacts, tau = idt.LinkContactWrenches(m), idt.JointDOFsDoubleArray(m)
    est.updateKinematicsFromFloatingBase(qj, dqj, ddqj, base, g, om, dom)
    est.computeExpectedFTSensorsMeasurements(unk, meas, contacts, tau)

    def idyntree_call():
        est.updateKinematicsFromFloatingBase(qj, dqj, ddqj, base, g, om, dom)
        return est.estimateExtWrenchesAndJointTorques(unk, meas, contacts, tau)
    t_idt = median_call(idyntree_call)
    return t_solve, t_kernel, t_idt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["panda", "talos_reduced"])
    ap.add_argument("--batch", type=int, default=20000)
    ap.add_argument("--cache", action="store_true", help="use the user's build cache (default: a fresh one)")
    ap.add_argument("--no-delta", action="store_true", help="skip the delta-robot simulation")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold compiles")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import pinocchio as pin

    import sparsedyn as sd
    from sparsedyn.codegen import build
    from bench_compiled import load_bench_model
    tmp = None
    if not args.cache:
        tmp = tempfile.mkdtemp(prefix="sparsedyn-bench-")
        os.environ["SPARSEDYN_CACHE_DIR"] = tmp
    rng = np.random.default_rng(0)
    singles, batch_rows, colds = [], [], []
    t_delta, t_icub, t_setup = None, None, None
    try:
        for name in args.models:
            model = load_bench_model(name)
            k = single_calls(name, model, rng, singles)
            batches(name, model, k, args.batch, rng, batch_rows)
        t_setup = None if args.no_cold else machine_setup()
        for name in ([] if args.no_cold else list(args.models) + ["chain100"]):
            cold_compile(name, load_bench_model(name), colds)
        t_icub = icub_estimation(rng)
        if not args.no_delta:
            t_delta = delta_robot()
    finally:
        progress("")
        sys.stderr.write("\r")
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    comp = build.find_compiler()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; Python "
          f"{platform.python_version()}; sparsedyn {sd.__version__}; Pinocchio {pin.__version__}; compiler {comp!r}")
    print("\nsingle calls from Python: best us of 15 interleaved timings; ratio = sparsedyn / Pinocchio (< 1: faster); first = first call "
          "(trace + build, or cache load), s")
    print(f"{'model':14s} {'function':24s} {'first s':>8s} {'sd us':>8s} {'pin us':>8s} {'ratio':>6s} {'mj us':>8s}")
    for name, f, first, t_sd, t_pin, t_mj in singles:
        mj = f"{t_mj * 1e6:8.2f}" if t_mj else f"{'-':>8s}"
        print(f"{name:14s} {f:24s} {first:8.3f} {t_sd * 1e6:8.2f} {t_pin * 1e6:8.2f} {t_sd / t_pin:6.2f} {mj}")
    print(f"\nbatches of {args.batch} states, 2 threads: states/s; Pinocchio = rnea/abaInParallel with a ModelPool; "
          "crba/minv: result bytes/s vs memcpy of the same size")
    print(f"{'model':14s} {'function':8s} {'sd st/s':>10s} {'pin st/s':>10s} {'ratio':>6s} {'GB/s':>6s} "
          f"{'memcpy':>6s}")
    for name, f, r_sd, r_pin, bw, bw_cp in batch_rows:
        pin_s = f"{r_pin:10.4g}" if r_pin else f"{'-':>10s}"
        ratio = f"{r_sd / r_pin:6.1f}" if r_pin else f"{'-':>6s}"
        print(f"{name:14s} {f:8s} {r_sd:10.4g} {pin_s} {ratio} {bw / 1e9:6.2f} {bw_cp / 1e9:6.2f}")
    if t_setup is not None:
        print(f"\ncold compile (fresh cache): the default kernels, single-state forms; then the batch rnea. "
              f"Once per machine before these: compiler probe + fast-call extension {t_setup:.2f} s")
    for name, t_single, t_batch, n in colds:
        print(f"{name:14s} {n} kernels {t_single:6.2f} s   batch rnea {t_batch:6.2f} s")
    t_solve, t_kernel, t_idt = t_icub
    print(f"\niCub estimation (six URDF F/T sensors, both soles), one state: sparsedyn compiled solve "
          f"{t_solve * 1e6:.1f} us (its kernel alone {t_kernel * 1e6:.1f} us), iDynTree "
          f"ExtWrenchesAndJointTorquesEstimator {t_idt * 1e6:.1f} us; ratio {t_solve / t_idt:.2f}")
    if t_delta is not None:
        print(f"\ndelta robot, 1 s simulated (dt 1 ms, dop853 + projection): compiled {t_delta[1]:.3f} s "
              f"(first run with kernel builds {t_delta[0]:.2f} s); NumPy {t_delta[2]:.1f} s (0.1 s simulated, "
              f"scaled)")


if __name__ == "__main__":
    main()
