"""The contact solver's iterations on the states of ``bench_scene.py``: the dm_control humanoid lying on
the floor (MuJoCo's settled state, the last 1000 states of its settling, and 1000 states with the joints
moved 0.05 rad: limbs pressed into the floor), talos fallen on the floor and onto a box (cold, at MuJoCo's
state, and warm-started from its own impulses).  Per set: iterations (mean, max), the states not solved
to ``tol`` (the step's :class:`~sparsedyn.ContactStepWarning`) and the whole call's wall time on the
default (native) road.

    PYTHONPATH=src .venv/bin/python benchmarks/solver_iterations.py
    PYTHONPATH=src .venv/bin/python benchmarks/solver_iterations.py --cases humanoid

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import time
import warnings

import numpy as np

import sparsedyn as sd
from bench_scene import CASES, _last, settled
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco

BATCH = 1000


def _load(name):
    m, _, trajectory, model = settled(*CASES[name]())
    return m, model, trajectory


def _solve(label, model, Q, V, dt, warm_start=None):
    """One call of ``sd.contact_step`` on the states ``Q, V`` (a fresh scene): its iterations and time."""
    scene = sd.Scene(model)
    tau = np.zeros(model.nv)
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", sd.ContactStepWarning)
        sd.contact_step(model, Q, V, tau, scene, dt)                      # the builds
        caught.clear()
        t = time.perf_counter()
        s = sd.contact_step(model, Q, V, tau, scene, dt, warm_start=warm_start)
        wall = time.perf_counter() - t
    it = np.atleast_1d(s.iterations)
    failed = "; ".join(str(w.message).split(";")[0].split("solver ")[-1] for w in caught) or "all solved"
    print(f"  {label:42s} iterations mean {it.mean():7.1f} max {it.max():6d}   {1e3 * wall:8.1f} ms   ({failed})")
    return s


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["humanoid", "talos on the floor", "talos on a box"],
                   choices=list(CASES))
    a = p.parse_args()
    for name in a.cases:
        m, model, trajectory = _load(name)
        qpos, qvel = trajectory[-1]
        q, v, dt = q_from_mujoco(model, qpos), v_from_mujoco(model, qpos, qvel), m.opt.timestep
        print(f"{name}:")
        s = _solve("MuJoCo's state, cold", model, q, v, dt)
        _solve("MuJoCo's state, warm-started", model, q, v, dt, warm_start=s.impulses)
        if name != "humanoid":
            continue
        Q = np.repeat(q[None], BATCH, 0)
        Q[:, 7:] += 0.05 * np.random.default_rng(0).standard_normal((BATCH, model.nq - 7))
        _solve(f"{BATCH} states, joints moved 0.05 rad", model, Q, np.repeat(v[None], BATCH, 0), dt)
        qp, qv = _last(trajectory, BATCH)
        Q = np.array([q_from_mujoco(model, x) for x in qp])
        V = np.array([v_from_mujoco(model, x, y) for x, y in zip(qp, qv)])
        _solve(f"the last {BATCH} states of MuJoCo's settling", model, Q, V, dt)


if __name__ == "__main__":
    main()
