"""Builds of the compiled contact step when the contacts change (what a simulator whose contacts come
and go pays), in a fresh build cache:

    .venv/bin/python benchmarks/bench_friction_builds.py             # solo12 and a box on 16 points
    .venv/bin/python benchmarks/bench_friction_builds.py --grid 16 32

For each change: the native libraries built (calls of the compiler's ``build_library``) and the
seconds of the first ``contact_step`` after it, on ``sd.compile(model)``:

* solo12, four feet at mu = 0.7 (the first build), then mu = 0.6, then the same feet with their
  points moved 1 cm, then planes tilted by 0.1 rad;
* a box on a grid of ``n`` points under it (``--grid``), then the grid with other points.

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", type=int, nargs="*", default=[16])
    a = ap.parse_args(argv)
    os.environ["SPARSEDYN_CACHE_DIR"] = tempfile.mkdtemp(prefix="sparsedyn-builds-")
    import sparsedyn as sd
    from erd import load_pair
    from sparsedyn.codegen import build
    count = [0]
    real = build.build_library

    def counted(*args, **kw):
        count[0] += 1
        return real(*args, **kw)
    build.build_library = counted
    warnings.simplefilter("ignore")

    def timed(what, k, q, v, tau, contacts):
        n0, t0 = count[0], time.perf_counter()
        try:
            sd.contact_step(k, q, v, tau, contacts, 1e-3)
        except ValueError as e:
            print(f"| {what} | refused: {str(e)[:60]} | |", flush=True)
            return
        print(f"| {what} | {count[0] - n0} | {time.perf_counter() - t0:.2f} |", flush=True)

    print("| change | libraries built | first step [s] |\n|---|---|---|")
    model, _ = load_pair("solo12", True)
    q = model.neutral()
    feet = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
    k = sd.compile(model)
    Z = np.zeros(model.nv)
    timed("solo12, 4 feet, mu = 0.7 (first)", k, q, Z, Z, [sd.Contact(f, "3d", friction=0.7) for f in feet])
    timed("solo12, mu = 0.6", k, q, Z, Z, [sd.Contact(f, "3d", friction=0.6) for f in feet])
    timed("solo12, points moved 1 cm", k, q, Z, Z,
          [sd.Contact(f, "3d", friction=0.6, point=(0.01, 0, 0)) for f in feet])
    tilted = ((np.sin(0.1), 0.0, np.cos(0.1)), 0.0)
    timed("solo12, planes tilted", k, q, Z, Z,
          [sd.Contact(f, "3d", friction=0.6, point=(0.01, 0, 0), plane=tilted) for f in feet])
    timed("solo12, frictionless", k, q, Z, Z, [sd.Contact(f, "3d", friction=0.0) for f in feet])
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) / 60)
    box = sd.compile(b.add_frame("box", "box").build())
    qb = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    for n in a.grid:
        side = int(np.ceil(np.sqrt(n)))
        xy = [(x, y) for x in np.linspace(-0.1, 0.1, side) for y in np.linspace(-0.1, 0.1, side)][:n]
        pts = [sd.Contact("box", "3d", friction=0.5, point=(x, y, -0.1)) for x, y in xy]
        timed(f"box, {n} points (first)", box, qb, np.zeros(6), np.zeros(6), pts)
        pts = [sd.Contact("box", "3d", friction=0.4, point=(0.9 * x, 0.9 * y, -0.1)) for x, y in xy]
        timed(f"box, {n} other points", box, qb, np.zeros(6), np.zeros(6), pts)


if __name__ == "__main__":
    main()
