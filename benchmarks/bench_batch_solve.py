"""The contact step's native solve on a batch of states, on one thread, beside the same states one call
each (which they must equal bit for bit).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_batch_solve.py                 # box, humanoid
    PYTHONPATH=src .venv/bin/python benchmarks/bench_batch_solve.py --cases box --repeat 60

The states: the last 1000 of MuJoCo's settling of bench_scene.py's case (the box: its resting state,
repeated), laid out in the slots the step uses (``batch_contacts``), cold (no warm start).  The times
are the process's CPU time of ``contact_step_kernel`` on the whole batch, one thread, the fastest of
``--repeat`` calls: on a loaded machine a single wall-clock call (bench_scene.py's batch rows) swings
with the load, while the fastest CPU time is what the call costs.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import sparsedyn as sd
from bench_scene import BATCH, CASES, _last, q_from_mujoco, settled, v_from_mujoco
from sparsedyn.codegen.native import shared
from sparsedyn.contact.data_slots import runs_per_body
from sparsedyn.contact.friction_kernel import contact_step_kernel
from sparsedyn.contact.friction_problem import ContactSlots
from sparsedyn.contact.scene_batch import batch_contacts


def case(name, repeat):
    m, _, trajectory, model = settled(*CASES[name]())
    qpos, qvel = _last(trajectory, BATCH)
    Q = np.array([q_from_mujoco(model, x) for x in qpos])
    V = np.array([v_from_mujoco(model, x, y) for x, y in zip(qpos, qvel)])
    tau, dt, scene = np.zeros(model.nv), m.opt.timestep, sd.Scene(model)
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        sd.contact_step(model, Q, V, tau, scene, dt)                  # grows the layout, builds the step
        got = batch_contacts(scene, Q, None, (V, dt), data_slots=not runs_per_body(scene))
        slots = got.laid if got.laid is not None else ContactSlots(got.frames, None, got.data)
        settings, warm = np.array([dt, 1e-8, 300.0, 10000.0, 0.005]), np.zeros(slots.data.shape[:2] + (3,))

        def solve():
            return contact_step_kernel(model, Q, V, tau, settings, warm, slots.data, slots.frames)
        cm = shared(model)
        threads, cm.threads = cm.threads, 1
        try:
            batch = solve()
            best = np.inf
            for _ in range(repeat):
                t = time.process_time()
                solve()
                best = min(best, time.process_time() - t)
            singles = [contact_step_kernel(model, Q[i], V[i], tau, settings, warm[i], slots.data[i], slots.frames)
                       for i in range(len(Q))]
            t = time.process_time()
            for i in range(len(Q)):
                contact_step_kernel(model, Q[i], V[i], tau, settings, warm[i], slots.data[i], slots.frames)
            loop = time.process_time() - t
        finally:
            cm.threads = threads
    same = all(np.array_equal(getattr(s, f), getattr(batch, f)[i]) for i, s in enumerate(singles) for f in batch._fields)
    print(f"{name}: {len(Q)} states, {len(slots.frames)} slots, iterations mean {batch.report[:, 3].mean():.1f} "
          f"(max {batch.report[:, 3].max():.0f}); one thread, CPU: the batch {1e3 * best:.1f} ms (fastest of {repeat}), "
          f"a loop of single calls {1e3 * loop:.1f} ms; every state equal to its single call: {same}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["box", "humanoid"], choices=sorted(CASES))
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    for name in args.cases:
        case(name, args.repeat)


if __name__ == "__main__":
    main()
