"""The contact step's builds and runs by slot layout, on the dm_control humanoid.

    nice .venv/bin/python benchmarks/bench_step_slots.py builds 4 8 16        # per-body and data slots
    nice .venv/bin/python benchmarks/bench_step_slots.py step                  # lying on the floor: us per step

``builds``: for ``n`` slots, the step's IR nodes per piece (init, the five stages, finish), and CPU
seconds of the trace, the C emission and the C compiler (its processes), a fresh build each (no
cache), for the per-body layout (the structure a tuple of body frames: a build per set of touching
bodies and their slot counts) and for slots whose body is data (``DATA_SLOT``: a build per slot
count).  ``step``: the humanoid lying on the floor (settled by MuJoCo) and standing, its contacts in
per-body slots and in the fewest data slots that hold them, microseconds of one native step (the
kernel's call alone, cold start, median), and iterations.
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


def _states(model):
    """``{name: q}``: the humanoid settled by MuJoCo lying on the floor (1500 steps of ``mj_step`` from
    the file's initial state, as ``bench_scene.py``), and standing on its feet 1 mm above it."""
    import mujoco
    from sparsedyn.interop.mujoco import q_from_mujoco
    m = mujoco.MjModel.from_xml_path(str(HUMANOID))
    d = mujoco.MjData(m)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    standing = np.zeros(model.nq)
    standing[6], standing[2] = 1.0, 1.2865
    return {"lying (MuJoCo settled)": q_from_mujoco(model, d.qpos.copy()), "standing": standing}


def step(model, repeat=200):
    scene = sd.Scene(model)
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    settings = np.array([0.005, 1e-8, 300.0, 10000.0, 0.005])
    for name, q in _states(model).items():
        contacts = scene_contacts(scene, q)
        per_body = scene_slots(scene, contacts)
        scene.cache.pop("data_slot_count", None)                  # the least data layout for these contacts
        data = data_slots(scene, q, per_body)
        with sd.use_backend("native", deterministic=True):
            for label, s in (("per-body", per_body), ("data", data)):
                warm = np.zeros((len(s.frames), 3))
                out = contact_step_kernel(model, q, v, tau, settings, warm, s.data, s.frames)
                times = []
                for _ in range(repeat):
                    t = time.perf_counter()
                    contact_step_kernel(model, q, v, tau, settings, warm, s.data, s.frames)
                    times.append(time.perf_counter() - t)
                print(f"{name}: {len(contacts)} contacts in {len(s.frames)} {label} slots: "
                      f"{1e6 * np.median(times):7.1f} us per step, {int(out.report[3])} iterations", flush=True)


if __name__ == "__main__":
    m = _model()
    if sys.argv[1] == "builds":
        builds(m, [int(x) for x in sys.argv[2:]])
    else:
        step(m)
