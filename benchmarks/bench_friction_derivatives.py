"""Derivatives of a frictional contact step: their cost against the step's, and their accuracy against
central differences, side by side in one run.

    .venv/bin/python benchmarks/bench_friction_derivatives.py                 # solo12 and the box, compiled
    .venv/bin/python benchmarks/bench_friction_derivatives.py --no-native     # the NumPy path only
    .venv/bin/python benchmarks/bench_friction_derivatives.py --scenes-only   # steps in a scene only

For solo12 (four point feet, mu = 0.7, dt = 1 ms; feet 10 um above the ground, the base pressed
down, random joint velocities and torques: sticking and sliding feet) and a box on its four corners
(mu = 0.4; sliding, sticking, separating): median microseconds of ``contact_step`` (tol 1e-8), of
``contact_step_derivatives`` (the step and its six derivatives) and of the derivatives alone
(``differentiate_step``, the part beyond the step), on ``sd.compile(model)`` and on the NumPy path;
and the largest difference of the derivatives to central differences of the step (tol 1e-12, step
h = 1e-6, ``sd.integrate`` for ``q``, ``h / dt`` for ``tau``), each relative to the larger of its largest
entry and its natural unit (1 for ``dv/dq``, ``dv/dv``, ``dq/dq``; ``dt`` [s/kg] for ``dv/dtau``; ``dt``
times those for ``dq/dv``, ``dq/dtau``): a difference of central differences is also their
truncation error and the solver's error over ``h``.  Then steps in a scene (:func:`scenes`).  Nothing here is a
test: numbers are reported, never asserted (the tests compare with error bounds).
"""

import argparse
import os
import platform
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "contact"))
sys.path.insert(0, os.path.dirname(__file__))

from bench_friction import _median_us                                      # noqa: E402

DT = 1e-3
FIELDS = ("dv_dq", "dv_dv", "dv_dtau", "dq_dq", "dq_dv", "dq_dtau")


def cases():
    """``(name, model, contacts, q, v, tau, options)``."""
    import sparsedyn as sd
    from erd import load_pair
    solo, _ = load_pair("solo12", True)
    feet = [sd.Contact(f, "3d", friction=0.7) for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")]
    q = np.zeros(solo.nq)
    q[6] = 1.0
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    q[2] = 1e-5 - min(sd.frame_placement(solo, q, c.frame)[1][2] for c in feet)
    rng = np.random.default_rng(2)
    out = []
    for i in range(3):
        v = rng.normal(size=solo.nv)
        v[:6] *= 0.3
        v[5] -= 0.3
        tau = 5 * rng.normal(size=solo.nv)
        tau[:6] = 0
        out.append((f"solo12 #{i}", solo, feet, q, v, tau, {}))
    h, m = 0.1, 2.0
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=m,
                                        rot_inertia=np.eye(3) * m * (2 * h) ** 2 / 6)
    box = b.add_frame("box", "box").build()
    corners = [sd.Contact("box", "3d", friction=0.4, point=(x, y, -h), name=f"c{i}")
               for i, (x, y) in enumerate([(-h, -h), (h, -h), (-h, h), (h, h)])]
    Z = np.zeros(6)
    lift = np.array([0, 0, h, 0, 0, 0, 1.0])
    push = np.zeros((1, 6))
    push[0, 3:5] = 0.5 * 0.4 * m * 9.81 * np.array([0.6, 0.8])
    out += [("box sliding", box, corners, lift + [0, 0, 1e-5, 0, 0, 0, 0], np.array([0, 0, 0, 1.0, 0.3, -0.02]), Z, {}),
            ("box sticking (pushed, 0.1 mm inside)", box, corners, lift - [0, 0, 1e-4, 0, 0, 0, 0],
             np.array([0, 0, 0, 0, 0, -0.2]), Z, {"f_ext": push}),
            ("box separating", box, corners, lift + [0, 0, 0.02, 0, 0, 0, 0], np.array([0.3, 0.1, 0, 1.0, 0.3, 0.2]),
             Z, {})]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--no-native", action="store_true")
    ap.add_argument("--no-scenes", action="store_true")
    ap.add_argument("--scenes-only", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "bench_friction_derivatives.md"))
    a = ap.parse_args(argv)
    import sparsedyn as sd
    from sparsedyn.contact.friction_derivatives import differentiate_step
    from test_friction_derivatives import central_differences
    lines = []

    def log(s=""):
        print(s)
        lines.append(s)

    warnings.simplefilter("ignore")
    log(f"# contact_step_derivatives against contact_step ({platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, one process)\n")
    log(f"dt = {DT} s, tol 1e-8 for the timings; command: "
        f"`python benchmarks/bench_friction_derivatives.py {' '.join(argv if argv is not None else sys.argv[1:])}`\n")
    log("| case | modes | path | step [µs] | step + derivatives [µs] | derivatives alone [µs] | "
        "(step + derivatives) / step | largest rel. difference to central differences |")
    log("|---|---|---|---|---|---|---|---|")
    compiled = {}
    for name, model, contacts, q, v, tau, opt in ([] if a.scenes_only else cases()):
        D = central_differences(model, q, v, tau, contacts, 1e-6, tol=1e-12, **opt)[0]
        d = sd.contact_step_derivatives(model, q, v, tau, contacts, DT, tol=1e-12, **opt)
        unit = {"dv_dq": 1.0, "dv_dv": 1.0, "dv_dtau": DT, "dq_dq": 1.0, "dq_dv": DT, "dq_dtau": DT * DT}
        err = max(float(np.abs(D[f] - getattr(d, f)).max() / max(np.abs(D[f]).max(), unit[f])) for f in FIELDS)
        modes = "/".join(sorted(set(d.step.modes)))
        paths = [("NumPy", model)]
        if not a.no_native:
            compiled.setdefault(model.name, sd.compile(model))
            paths.insert(0, ("compiled", compiled[model.name]))
        for path, m in paths:
            ctx = sd.use_backend("numpy") if path == "NumPy" else sd.use_backend(sd.use_backend.current())
            with ctx:
                s = sd.contact_step(m, q, v, tau, contacts, DT, **opt)
                t_step = _median_us(lambda: sd.contact_step(m, q, v, tau, contacts, DT, **opt), a.repeat)
                t_all = _median_us(lambda: sd.contact_step_derivatives(m, q, v, tau, contacts, DT, **opt), a.repeat)
                t_der = _median_us(lambda: differentiate_step(model, m, q, v, tau, tuple(contacts), DT, s,
                                                              opt.get("f_ext")), a.repeat)
            log(f"| {name} | {modes} | {path} | {t_step:.0f} | {t_all:.0f} | {t_der:.0f} | {t_all / t_step:.2f} | "
                f"{err:.1e} |")
    if not a.no_scenes:
        scenes(a.repeat, log)
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


def scenes(repeat, log):
    """Steps in a scene (contacts from the geometry, points and normals moving with q): a 0.2 m box
    resting on a plane and the dm_control humanoid lying on the floor (both settled in MuJoCo, as in
    bench_scene.py), ``contact_step`` beside ``contact_step_derivatives`` on the default (native)
    road, built before the timing, and on the NumPy road: median CPU time of the process per call
    (``time.process_time``: on a shared machine the wall clock also counts the time others hold the
    cores; one state runs on one thread)."""
    import time
    import sparsedyn as sd
    from scene_cases import BOX, HUMANOID

    def median_us(fn, n):
        return _median_us(fn, n, clock=time.process_time)
    log("\n| scene | nv | contacts | modes | road | step [µs] | step + derivatives [µs] | "
        "(step + derivatives) / step |")
    log("|---|---|---|---|---|---|---|---|")
    for name, path, xml, settle in (("box on a plane", None, BOX, 200), ("humanoid lying on the floor", HUMANOID,
                                                                          None, 1500)):
        model, scene, q, v, tau, dt = settled(path, xml, settle)
        for road in ("native", "numpy"):
            with sd.use_backend(road, deterministic=True):
                d = sd.contact_step_derivatives(model, q, v, tau, scene, dt)          # the builds, untimed
                t_step = median_us(lambda: sd.contact_step(model, q, v, tau, scene, dt), repeat)
                t_all = median_us(lambda: sd.contact_step_derivatives(model, q, v, tau, scene, dt), repeat)
            log(f"| {name} | {model.nv} | {len(d.step.modes)} | {'/'.join(sorted(set(d.step.modes)))} | {road} | "
                f"{t_step:.0f} | {t_all:.0f} | {t_all / t_step:.1f} |")


def settled(path, xml, settle):
    """``(model, scene, q, v, tau, dt)`` of a MuJoCo model (file or text) after ``settle`` steps of
    ``mj_step``, in sparsedyn's layout (as bench_scene.py)."""
    import tempfile
    import mujoco
    import sparsedyn as sd
    from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco
    m = mujoco.MjModel.from_xml_path(str(path)) if path else mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for _ in range(settle):
        mujoco.mj_step(m, d)
    if not path:
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(xml)
        path = f.name
    model = sd.load_mjcf(str(path), geometry=True)
    q, v = q_from_mujoco(model, d.qpos.copy()), v_from_mujoco(model, d.qpos.copy(), d.qvel.copy())
    return model, sd.Scene(model), q, v, np.zeros(model.nv), m.opt.timestep


if __name__ == "__main__":
    main()
