"""Rollouts from perturbed settled states: the solver's iterations a step over several trajectories, not one.

One 400-step rollout (``bench_scene.py``'s row) follows one trajectory, and a change of the solver that moves
one step's answer within the tolerance moves every later state: its iteration count then says as much about
the trajectory as about the solver.  Here, per case of ``bench_scene.py`` (MuJoCo's settled state, no torque),
``--rollouts`` rollouts of ``--steps`` steps (``sd.rollout`` on a new scene each, native road): the first from
the settled velocity, the others from it plus seeded normal noise of ``--noise`` rad/s (or m/s) on every
joint, the same for every version; per rollout its mean iterations a step, and over all of them the mean, the
steps that ran past the ADMM budget (a :class:`~sparsedyn.ContactStepWarning` each), ours per step (wall,
each rollout's second run: the first builds what it needs) beside MuJoCo's limp rollouts from the same states
(springs and dampers off, as ``bench_scene.py``'s), and the ratio; and per rollout its steps on the Python road
(the others run in native calls: a scene's first step, and any the native calls decline).

    PYTHONPATH=src .venv/bin/python benchmarks/perturbed_rollouts.py
    PYTHONPATH=src .venv/bin/python benchmarks/perturbed_rollouts.py --cases "talos on a box" --rollouts 9

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import time
import warnings

import mujoco
import numpy as np

import sparsedyn as sd
from bench_scene import CASES, settled
from sparsedyn.contact import friction
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco, v_to_mujoco


def mujoco_limp(m, d, velocities, steps):
    """MuJoCo's limp rollouts (springs and dampers off) of ``steps`` from ``d``'s state with each of the
    joint velocities ``velocities`` (MuJoCo's ``qvel``): microseconds a step, all of them together."""
    flags = m.opt.disableflags
    off = mujoco.mjtDisableBit
    m.opt.disableflags = flags | int(off.mjDSBL_SPRING | off.mjDSBL_DAMPER)
    total = 0.0
    for qvel in velocities:
        d2 = mujoco.MjData(m)
        d2.qpos[:], d2.qvel[:], d2.qacc_warmstart[:] = d.qpos, qvel, d.qacc_warmstart
        t = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(m, d2)
        total += time.perf_counter() - t
    m.opt.disableflags = flags
    return total / (steps * len(velocities)) * 1e6


def counted(road):
    """``friction.step_in_scene`` (a rollout's step on the Python road) counting its calls in ``road[0]``."""
    real = friction.step_in_scene

    def step(*args, **kwargs):
        road[0] += 1
        return real(*args, **kwargs)
    return step


def run(name, rollouts, steps, noise):
    m, d, _, model = settled(*CASES[name]())
    q, v, dt = q_from_mujoco(model, d.qpos), v_from_mujoco(model, d.qpos, d.qvel), m.opt.timestep
    tau = np.zeros(model.nv)
    rng = np.random.default_rng(1)
    starts = [v] + [v + noise * rng.standard_normal(model.nv) for _ in range(rollouts - 1)]
    per, wall, roads, road = [], 0.0, [], [0]
    real = friction.step_in_scene
    with warnings.catch_warnings(record=True) as caught, sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        for vk in starts:                    # (builds the kernels of the slot layouts the trajectories grow)
            sd.rollout(model, q, vk, tau, sd.Scene(model), dt, steps)
        warnings.simplefilter("always", sd.ContactStepWarning)
        friction.step_in_scene = counted(road)
        for vk in starts:
            road[0] = 0
            t = time.perf_counter()
            r = sd.rollout(model, q, vk, tau, sd.Scene(model), dt, steps)
            wall += time.perf_counter() - t
            per.append(np.asarray(r.iterations).mean())
            roads.append(road[0])
        friction.step_in_scene = real
    warned = sum(issubclass(w.category, sd.ContactStepWarning) for w in caught)
    ours = wall / (steps * rollouts) * 1e6
    mj = mujoco_limp(m, d, [v_to_mujoco(model, q, vk) for vk in starts], steps)
    print(f"{name}: {rollouts} rollouts of {steps} steps; iterations a step per rollout "
          f"{' '.join(f'{x:.1f}' for x in per)}")
    print(f"  mean {np.mean(per):.2f}, steps past the budget (warned) {warned}; {ours:.1f} us a step beside "
          f"MuJoCo's limp rollouts {mj:.1f} us: {ours / mj:.1f}x; steps on the Python road per rollout "
          f"{' '.join(map(str, roads))}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", choices=list(CASES),
                   default=["humanoid", "talos standing", "talos on the floor", "talos on a box"])
    p.add_argument("--rollouts", type=int, default=9)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--noise", type=float, default=0.05, help="the velocity noise's standard deviation")
    args = p.parse_args()
    for name in args.cases:
        run(name, args.rollouts, args.steps, args.noise)


if __name__ == "__main__":
    main()
