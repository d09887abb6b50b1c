"""Microseconds per step of the dm_control humanoid after its scene's contacts peaked: a data slot count
that follows the contacts down (sparsedyn.contact.data_slots.data_slot_count) against one kept at the peak.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_slot_shrink.py [repeats] [steps] [dt]

Each repeat: one step lying on its back (a dozen contacts: 16 data slots; or the count then raised to
32 as after a fall of 21 contacts), then a rollout of ``steps`` steps from standing (its feet: at most
8 contacts at dt 1 ms over 0.2 s), timed, and again the peak and ``steps`` single ``contact_step``
calls at the standing state, timed; the fastest repeat (after one untimed) of each, per step.
"""

import sys
import time
import warnings
from pathlib import Path

import dm_control
import numpy as np

import sparsedyn as sd
from sparsedyn.contact.collision import collide_within
from sparsedyn.contact.data_slots import data_slot_count


def main():
    repeats, steps = (int(sys.argv[i]) if len(sys.argv) > i else d for i, d in ((1, 5), (2, 200)))
    dt = float(sys.argv[3]) if len(sys.argv) > 3 else 0.001
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml"), geometry=True)
    scene = sd.Scene(model)
    lying = np.zeros(model.nq)
    lying[2], lying[3:7] = 0.11, (np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4))     # x y z w quaternion
    standing = np.zeros(model.nq)
    standing[6], standing[2] = 1.0, 2.0
    hits = collide_within(scene, standing, np.full(len(scene.pairs), 10.0))
    standing[2] -= min(d for d, pair in zip(hits.distances, hits.pairs) if "floor" in pair) - 0.001
    v, tau = np.zeros(model.nv), np.zeros(model.nv)

    def peak(slots):
        sd.contact_step(model, lying, v, tau, scene, dt)
        if slots == 32:
            data_slot_count(scene, 21)            # (as after a fall: 21 contacts)
    with sd.use_backend("native"):
        for slots in (16, 32):
            roll, single = [], []
            for _ in range(repeats + 1):
                peak(slots)
                t = time.perf_counter()
                r = sd.rollout(model, standing, v, tau, scene, dt, steps)
                roll.append(time.perf_counter() - t)
                most, end = max(len(x) for x in r.impulses), scene.cache["data_slot_count"]
                peak(slots)
                t = time.perf_counter()
                for _ in range(steps):
                    sd.contact_step(model, standing, v, tau, scene, dt)
                single.append(time.perf_counter() - t)
            print(f"peak {slots} slots: rollout {min(roll[1:]) / steps * 1e6:8.1f} us/step, single steps "
                  f"{min(single[1:]) / steps * 1e6:8.1f} us/step (at most {most} contacts; {end} slots at the end)")


if __name__ == "__main__":
    main()
