"""``Viewer.display(q)`` on humanoids with all their meshes, beside Pinocchio's ``ViserVisualizer``
(the same web viewer, viser) in one run.

    .venv/bin/python benchmarks/bench_viewer.py                      # talos_reduced, g1_29dof_rev_1_0
    .venv/bin/python benchmarks/bench_viewer.py --models romeo --n 500

* display: median time [ms] of one ``display(q)`` from Python (kinematics + the pose messages queued
  for the page) over ``--n`` random configurations, no browser attached: ours with the compiled
  kinematics (the default, once its background build is done) and with NumPy's
  (``compiled=False``), and Pinocchio's ``ViserVisualizer.display(q)`` (``forwardKinematics`` in C++ and
  one pose per mesh).
* playback: a 10 s trajectory at 1 kHz (10001 samples) is shown at 30 frames per second, so 301 frames;
  the time to show all of them back to back, per frame, against the 33 ms a frame may take.

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import contextlib
import io
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def median_ms(fn, qs):
    times = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main(argv=None):
    import pinocchio as pin
    import viser
    from pinocchio.visualize import ViserVisualizer

    import sparsedyn as sd
    from erd import robot_path
    from sparsedyn.interop.pinocchio import q_to_pinocchio

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["talos_reduced", "g1_29dof_rev_1_0"])
    ap.add_argument("--n", type=int, default=300, help="configurations per measurement")
    args = ap.parse_args(argv)
    rows = []
    for name in args.models:
        path = robot_path(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sd.load_urdf(path, floating_base=True, geometry=True)
        rng = np.random.default_rng(0)
        qs = [model.random_configuration(rng) for _ in range(args.n)]
        fast = sd.Viewer(model, verbose=False)
        t0 = time.perf_counter()
        while fast._kinematics is model and time.perf_counter() - t0 < 600:    # the background build
            time.sleep(0.1)
        slow = sd.Viewer(model, verbose=False, compiled=False)
        ours_c = median_ms(fast.display, qs)
        ours_np = median_ms(slow.display, qs)
        T = 10001
        traj = np.stack([qs[k % len(qs)] for k in range(T)])
        fast.play(traj, 1e-3, loop=False)
        fast.pause()
        n = len(fast._traj[0])
        t = time.perf_counter()
        for k in range(n):
            fast._show_frame(k)
        per_frame = 1e3 * (time.perf_counter() - t) / n
        fast.close()
        slow.close()
        share = str(path).split("/example-robot-data/")[0]
        pm, cm, vm = pin.buildModelsFromUrdf(str(path), [share], pin.JointModelFreeFlyer())
        with contextlib.redirect_stdout(io.StringIO()):
            server = viser.ViserServer(port=8600, verbose=False)
        viz = ViserVisualizer(pm, cm, vm)
        viz.initViewer(viewer=server, loadModel=True)
        qs_pin = [q_to_pinocchio(model, q) for q in qs]
        pin_ms = median_ms(viz.display, qs_pin)
        server.stop()
        rows.append((name, model.nbodies, len(model.geometry("visual")), ours_c, ours_np, pin_ms, n, per_frame))
    print("display(q), median of", args.n, "random configurations, no browser attached [ms]\n")
    print("| model | bodies | visual meshes | ours (compiled kinematics) | ours (NumPy kinematics) | "
          "Pinocchio ViserVisualizer | ratio ours/Pinocchio | 10 s at 1 kHz: frames | ms per frame |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, nb, ng, c, npy, p, n, pf in rows:
        print(f"| {name} | {nb} | {ng} | {c:.3f} | {npy:.3f} | {p:.3f} | {c / p:.2f} | {n} | {pf:.3f} |")


if __name__ == "__main__":
    main()
