"""The contact solver's stages on one state of ``bench_scene.py``, run on the NumPy reference road
(:func:`sparsedyn.symbolic.loop.run_stages`'s loop, stage by stage): each polish step (ADMM's iteration,
the round's step, its scaled residual, the round's best, the polishes charged) and each new inverse,
then the stage runs of the solve.  The kernel's inputs are the step's own (``sd.contact_step`` on the
NumPy road, its call of the kernel read).

    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/trace_solve.py "talos on a box"
    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/trace_solve.py "talos on the floor" --iterations

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse

import numpy as np

import sparsedyn as sd
from bench_scene import CASES, settled
from sparsedyn.contact import friction, friction_kernel
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco
from sparsedyn.symbolic.loop import next_stage

NAMES = ("dispatch", "factorize", "iterate", "polish", "check", "gauss-seidel", "correct", "correct-polish", "delassus")


def kernel_inputs(name):
    """``(model, inputs, frames)``: the contact step kernel's arguments of the case ``name`` (MuJoCo's
    settled state, cold)."""
    m, _, trajectory, model = settled(*CASES[name]())
    qpos, qvel = trajectory[-1]
    q, v = q_from_mujoco(model, qpos), v_from_mujoco(model, qpos, qvel)
    got = []
    kernel = friction.contact_step_kernel

    def spy(kernels, *args, **kw):
        got.append(args)
        return kernel(kernels, *args, **kw)
    friction.contact_step_kernel = spy
    try:
        with sd.use_backend("numpy"):
            sd.contact_step(model, q, v, np.zeros(model.nv), sd.Scene(model), m.opt.timestep)
    finally:
        friction.contact_step_kernel = kernel
    *inputs, frames = got[-1]
    return model, inputs, tuple(frames)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("case", choices=list(CASES))
    p.add_argument("--iterations", action="store_true", help="print every ADMM iteration too")
    a = p.parse_args()
    model, inputs, frames = kernel_inputs(a.case)
    init, stages, finish = friction_kernel._pieces(model, frames, ())
    lay = stages[0].args[0]
    K, S = init(*inputs)
    stage, runs = 0, {}
    while stage < len(stages):
        S, flag = stages[stage](*inputs, K, S)
        runs[NAMES[stage]] = runs.get(NAMES[stage], 0) + 1
        s = {n: S[k] for n, k in lay.S.items()}
        if NAMES[stage] in ("polish", "factorize") or (a.iterations and NAMES[stage] == "iterate"):
            modes = np.bincount(s["code"].astype(int), minlength=3)
            print(f"{NAMES[stage]:9s} iteration {s['it'][0]:4.0f} flag {float(flag):+.0f} step {s['tries'][0]:2.0f} "
                  f"best {s['pbest'][0]:9.3g} charged {s['polishes'][0]:5.2f} rho {s['rho'][0]:9.3g} "
                  f"modes open/stick/slide {modes[0]}/{modes[1]}/{modes[2]} converged {s['conv'][0]:.0f}")
        stage = next_stage(stage, float(np.reshape(flag, -1)[0]))
    report = finish(*inputs, K, S)[4]
    print(f"stage runs {runs}; iterations (ADMM's and the polishes') {report[3]:.1f}, residuals {report[:3]}")


if __name__ == "__main__":
    main()
