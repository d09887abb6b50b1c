"""Scenes with world boxes beside MuJoCo, paired in one process: ``sd.collide`` against
``mj_kinematics`` + ``mj_collision`` and ``sd.contact_step`` against ``mj_step``.

    .venv/bin/python benchmarks/bench_boxes.py            # 30 timed loops a row
    .venv/bin/python benchmarks/bench_boxes.py 200

dm_control's humanoid (``humanoid.xml``, capsules and spheres) dropped in MuJoCo and settled for 1.5 s
onto a world box (2 m x 2 m x 0.2 m) and onto four stairs (boxes 0.4 m deep, rising 0.1 m each, on
the floor); a 0.2 m cube dropped on a world box (1 s).  Both sides at MuJoCo's settled state and time
step, the same file (``sd.Scene(sd.load_mjcf(path, geometry=True))``), the default (native) road
built before the timing; microseconds per call, the fastest of the timed loops
(:func:`bench_scene.best_us`).  The step is timed from a cold start on both sides (no warm start;
MuJoCo's ``qacc_warmstart`` zeroed before each call) and warm-started on both sides (ours from the
same state's impulses, MuJoCo from its last call's ``qacc_warmstart``, as a trajectory's steps are):
``mj_step`` called again from one state is warm-started by its own last solution, so timing it
without a reset against a cold ``contact_step`` compares two different solves.  The solvers'
iterations are printed beside them.  The hits found and MuJoCo's ``ncon``, whether the collision kernel
holds every pair, the slots the step's solve runs in (its size: the block products skip the free
slots, its element-by-element code does not) and whether the step took its one native call are printed beside them.  Nothing
here is a test: numbers are reported, never asserted.
"""

import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np

import sparsedyn as sd
from bench_scene import best_us, settled
from sparsedyn.contact.collision_kernel import kernel_plan
from sparsedyn.contact.data_slots import runs_per_body
from sparsedyn.contact.scene_fused import fused_step
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco

SUITE = Path(dm_control.__file__).parent / "suite"
FLOOR = '<geom name="floor" type="plane" conaffinity="1" size="100 100 .2" material="grid"/>'
WORLDS = {
    "humanoid on a box": FLOOR + '<geom name="block" type="box" pos="0 0 0.1" size="1 1 0.1"/>',
    "humanoid on stairs": FLOOR + "".join(
        f'<geom name="stair{i}" type="box" pos="{0.4 * i - 0.5} 0 {0.05 * (i + 1)}" size="0.2 1 {0.05 * (i + 1)}"/>'
        for i in range(4)),
}
BOX = """<mujoco><option timestep="0.001"/><worldbody><geom name="floor" type="plane" size="5 5 .1"/>
<geom name="base" type="box" pos="0 0 0.1" size=".3 .3 .1"/>
<body name="box" pos="0 0 0.31"><freejoint/><geom type="box" size=".1 .1 .1" mass="2"/></body></worldbody></mujoco>"""


def case(name, path, xml, settle, repeat):
    m, d, _, model = settled(path, xml, settle)
    scene = sd.Scene(model)
    qpos, qvel = d.qpos.copy(), d.qvel.copy()
    q, v = q_from_mujoco(model, qpos), v_from_mujoco(model, qpos, qvel)
    tau, dt = np.zeros(model.nv), m.opt.timestep
    kp = kernel_plan(scene)
    with sd.use_backend("native", deterministic=True):
        t = time.perf_counter()
        sd.contact_step(model, q, v, tau, scene, dt)                    # the builds, the slot layout
        build = time.perf_counter() - t
        sd.contact_step(model, q, v, tau, scene, dt)
        hits = sd.collide(scene, q)
        fused = fused_step(model, q, v, tau, scene, dt, np.array([dt, 1e-8, 300.0, 1e4, 0.005])) is not None
        tc = best_us(lambda: sd.collide(scene, q), repeat)
        cold = sd.contact_step(model, q, v, tau, scene, dt)
        warm = np.asarray(cold.impulses)
        its = (cold.iterations, sd.contact_step(model, q, v, tau, scene, dt, warm_start=warm).iterations)
        ts = best_us(lambda: sd.contact_step(model, q, v, tau, scene, dt), repeat)
        tw = best_us(lambda: sd.contact_step(model, q, v, tau, scene, dt, warm_start=warm), repeat)
    d2 = mujoco.MjData(m)

    def at_state(*calls, reset=False):         # MuJoCo's calls from the settled state, each time
        def run():
            d2.qpos[:], d2.qvel[:] = qpos, qvel
            if reset:                          # a cold start: no warm start from the last call
                d2.qacc_warmstart[:] = 0
            for call in calls:
                call(m, d2)
        return run

    def niter(run):
        run()
        return int(d2.solver_niter[0])

    mc = best_us(at_state(mujoco.mj_kinematics, mujoco.mj_collision), repeat)
    ms = best_us(at_state(mujoco.mj_step, reset=True), repeat)
    mw = best_us(at_state(mujoco.mj_step), repeat)
    mits = (niter(at_state(mujoco.mj_step, reset=True)), niter(at_state(mujoco.mj_step)))
    left = sorted({tuple(sorted((scene.shapes[i].kind, scene.shapes[j].kind)))
                   for i, j in scene.index[~kp.inside].tolist()})
    slots = (f"{sum(scene.cache['step_slots'].values())} per-body slots" if runs_per_body(scene) else
             f"{scene.cache.get('data_slot_count', 0)} data slots")      # (the solve's size: its rows are 3 a slot)
    print(f"{name}: hits {len(hits.distances)} (MuJoCo ncon {d.ncon}) in {slots}; pairs outside the collision kernel: "
          f"{left or 'none'}; the step one native call: {fused}; first step (builds) {build:.1f} s")
    print(f"  collide      {tc:8.1f} us   mj_kinematics+mj_collision {mc:6.1f} us   ratio {tc / mc:6.1f}")
    print(f"  contact_step {ts:8.1f} us   mj_step (cold)             {ms:6.1f} us   ratio {ts / ms:6.1f}"
          f"   iterations {its[0]}, MuJoCo's {mits[0]}")
    print(f"  ... warm     {tw:8.1f} us   mj_step (warm)             {mw:6.1f} us   ratio {tw / mw:6.1f}"
          f"   iterations {its[1]}, MuJoCo's {mits[1]}")


def main():
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    warnings.simplefilter("ignore")                    # the file's sites and sensors the model leaves out
    src = (SUITE / "humanoid.xml").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(SUITE / "common", Path(tmp) / "common")        # the file's includes
        for name, world in WORLDS.items():
            path = Path(tmp) / (name.replace(" ", "_") + ".xml")
            path.write_text(src.replace(FLOOR, world))
            case(name, path, None, 1500, repeat)
    case("a box on a box", None, BOX, 1000, repeat)


if __name__ == "__main__":
    main()
