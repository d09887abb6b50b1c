"""The contact step's builds and runs by slot layout, on the dm_control humanoid.

    nice .venv/bin/python benchmarks/bench_step_slots.py builds 4 8 16        # per-body and data slots
    nice .venv/bin/python benchmarks/bench_step_slots.py step                  # lying on the floor: us per step

``builds``: for ``n`` slots, the step's IR nodes per piece (init, the five stages, finish), and CPU
seconds of the trace, the C emission and the C compiler (its processes), a fresh build each (no
cache), for the per-body layout (the structure a tuple of body frames: a build per set of touching
bodies and their slot counts) and for slots whose body is data (``DATA_SLOT``: a build per slot
count).  ``step``: the humanoid lying on the floor, its contacts in per-body slots and in the scene's
data slots, microseconds of one native step (the kernel's call alone, median), and iterations.
Numbers are reported, never asserted.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

import dm_control
import numpy as np

import sparsedyn as sd
from sparsedyn.codegen import build, cemit
from sparsedyn.contact.data_slots import data_slots
from sparsedyn.contact.friction_kernel import _step_program, contact_step_kernel
from sparsedyn.contact.friction_problem import DATA_SLOT
from sparsedyn.contact.scene_step import scene_contacts, scene_slots

HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"


def _cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sd.load_mjcf(str(HUMANOID), geometry=True)


def builds(model, sizes):
    own = {}
    for k, f in enumerate(model.frames):
        own.setdefault(f.body, k)
    bodies = sorted(k for b, k in own.items() if b >= 0)
    for n in sizes:
        for label, frames in (("per-body", tuple(sorted(bodies[i % len(bodies)] for i in range(n)))),
                              ("data", (DATA_SLOT,) * n)):
            p0, _ = _cpu()
            prog = _step_program(model, {"frames": frames}, ())
            p1, _ = _cpu()
            units = cemit.emit_program(prog, "sd_slots", "single")
            salt = f"/* {uuid.uuid4()} */\n"                 # a source no compiler cache has seen
            sources = [salt + cemit.emit_unit([u]) for u in units] + [salt + cemit.emit_unit([], key="0" * 40)]
            p2, c2 = _cpu()
            with tempfile.TemporaryDirectory() as d:
                build.build_library("0" * 40, sources, build.find_compiler(), directory=Path(d))
            _, c3 = _cpu()
            nodes = [len(p.nodes) for p in prog.programs]
            print(f"{n:3d} slots {label:<9} nodes init {nodes[0]:>7} stages {nodes[1:-1]} finish {nodes[-1]:>6} "
                  f"total {sum(nodes):>8}; cpu s: trace {p1 - p0:5.1f} emit {p2 - p1:5.1f} cc {c3 - c2:6.1f}",
                  flush=True)


def step(model, repeat=200):
    scene = sd.Scene(model)
    q = np.zeros(model.nq)
    q[2], q[3:7] = 0.11, (np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4))     # lying on its back
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    contacts = scene_contacts(scene, q)
    per_body = scene_slots(scene, contacts)
    data = data_slots(scene, q, per_body)
    settings = np.array([0.005, 1e-8, 300.0, 10000.0, 0.005])
    with sd.use_backend("native", deterministic=True):
        for label, s in (("per-body", per_body), ("data", data)):
            warm = np.zeros((len(s.frames), 3))
            out = contact_step_kernel(model, q, v, tau, settings, warm, s.data, s.frames)
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                contact_step_kernel(model, q, v, tau, settings, warm, s.data, s.frames)
                times.append(time.perf_counter() - t)
            print(f"{len(contacts)} contacts in {len(s.frames)} {label} slots: {1e6 * np.median(times):7.1f} us per "
                  f"step, {int(out.report[3])} iterations")


if __name__ == "__main__":
    m = _model()
    if sys.argv[1] == "builds":
        builds(m, [int(x) for x in sys.argv[2:]])
    else:
        step(m)
