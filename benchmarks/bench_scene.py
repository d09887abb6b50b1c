"""Steps and collision detection in a scene beside MuJoCo, paired in one process.

    .venv/bin/python benchmarks/bench_scene.py            # the dm_control humanoid lying on the floor, a box
    .venv/bin/python benchmarks/bench_scene.py --repeat 50

The dm_control suite's humanoid (``sd.Scene(sd.load_mjcf(humanoid.xml, geometry=True))``), dropped in
MuJoCo and settled for 1.5 s so it lies on the floor, and a 0.2 m box resting on a plane: median
microseconds of

* ``sd.collide(scene, q)`` beside MuJoCo's ``mj_collision`` (hits / ``ncon`` printed: MuJoCo counts
  the robot's self-contacts its contype/conaffinity let through, the scene its own pairs);
* ``sd.contact_step(model, q, v, tau, scene, dt)`` on the default road (native, built before the
  timing; the scene's slot layout, grown to what its steps needed) beside ``mj_step``, both at
  MuJoCo's settled state and time step.

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import time
import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np

import sparsedyn as sd
from sparsedyn.contact.scene_step import scene_contacts, scene_slots

HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"
BOX = """<mujoco><option timestep="0.001"/><worldbody><geom name="floor" type="plane" size="5 5 .1"/>
<body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size=".1 .1 .1" mass="2"/></body></worldbody></mujoco>"""


def median_us(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e6 * float(np.median(times))


def case(name, xml_path, xml, settle, repeat):
    m = mujoco.MjModel.from_xml_path(str(xml_path)) if xml_path else mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for _ in range(settle):
        mujoco.mj_step(m, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if xml_path:
            model = sd.load_mjcf(str(xml_path), geometry=True)
        else:
            import tempfile
            with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
                f.write(xml)
            model = sd.load_mjcf(f.name, geometry=True)
    scene = sd.Scene(model)
    q, v, tau, dt = d.qpos.copy(), d.qvel.copy(), np.zeros(model.nv), m.opt.timestep
    hits = sd.collide(scene, q)
    contacts = scene_contacts(scene, q, hits)
    print(f"{name}: nv={model.nv}; sparsedyn hits {len(hits.distances)} (robot-world contacts {len(contacts)}, "
          f"slots {len(scene_slots(scene, contacts).frames)}); MuJoCo ncon {d.ncon}")
    with sd.use_backend("native", deterministic=True):
        t = time.perf_counter()
        sd.contact_step(model, q, v, tau, scene, dt)                        # the build (timed apart)
        print(f"  first native step (builds): {time.perf_counter() - t:.1f} s")
        ours_c = median_us(lambda: sd.collide(scene, q), repeat)
        ours_s = median_us(lambda: sd.contact_step(model, q, v, tau, scene, dt), repeat)
    d2 = mujoco.MjData(m)

    def mj_collision():
        d2.qpos[:], d2.qvel[:] = q, v
        mujoco.mj_kinematics(m, d2)
        mujoco.mj_collision(m, d2)

    def mj_step():
        d2.qpos[:], d2.qvel[:] = q, v
        mujoco.mj_step(m, d2)

    mj_c, mj_s = median_us(mj_collision, repeat), median_us(mj_step, repeat)
    print(f"  collide       {ours_c:10.1f} us   mj_kinematics+mj_collision {mj_c:8.1f} us   ratio {ours_c / mj_c:7.1f}")
    print(f"  contact_step  {ours_s:10.1f} us   mj_step                    {mj_s:8.1f} us   ratio {ours_s / mj_s:7.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=30)
    a = p.parse_args()
    case("box", None, BOX, 200, a.repeat)
    case("humanoid", HUMANOID, None, 1500, a.repeat)


if __name__ == "__main__":
    main()
