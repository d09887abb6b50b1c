"""The work of each piece of the contact step's iterative kernel, and how often a step runs it; or of its
derivatives' pieces.

    PYTHONPATH=src .venv/bin/python benchmarks/step_stages.py --cases "talos on the floor" "talos standing"
    PYTHONPATH=src .venv/bin/python benchmarks/step_stages.py --derivatives --cases humanoid "talos standing"

For a scene of :mod:`bench_scene` at MuJoCo's settled state: the step's slots (as the step lays them
out), then per piece of :func:`~sparsedyn.contact.friction_kernel.contact_step_kernel`'s loop
(``init``, the stages ``g0`` ... ``g12``, ``fin``) its straight-line operations (the IR's arithmetic
nodes, each a line of the compiled code), its dense block products and their multiply-adds (loops in
the compiled code; counted without the run-time bounds of the slots in use), and how many times the
NumPy reference runs it from a cold start and from a warm start (the cold step's own impulses, as
:mod:`bench_scene`'s warm-started row).  A piece's cost per step is about its work times its runs:
where that is large against the ADMM iteration's (``g2``), the step spends its time outside ADMM.

``--derivatives``: the pieces' program of that state's step (:func:`~sparsedyn.scene_step_partials`, the
slots and contact kinds :func:`~sparsedyn.contact_step_derivatives` builds it for) and its operations by
phase (:meth:`~sparsedyn.symbolic.ir.Program.phase_flops`'s phases): straight-line operations and the
multiply-adds of its dense block products.  The compiled pieces' cost follows the straight-line count
more than the loops' (the code's size: it is read once a call).
"""

from __future__ import annotations

import argparse
import warnings
from collections import Counter

import numpy as np

import sparsedyn as sd
from bench_scene import CASES, q_from_mujoco, settled, v_from_mujoco
from sparsedyn.contact import friction_kernel as fk
from sparsedyn.contact.data_slots import runs_per_body
from sparsedyn.contact.scene_data import scene_slot_data
from sparsedyn.model.topology import model_store
from sparsedyn.symbolic.ir import CONST, MATMUL, Graph
from sparsedyn.symbolic.loop import run_stages


def _case(name):
    """``(model, scene, q, v, tau, dt)``: the case ``name`` of :data:`bench_scene.CASES` at MuJoCo's settled state."""
    m, d, _, model = settled(*CASES[name]())        # (a case with limits held: a fourth item)
    scene = sd.Scene(model)
    q, v = q_from_mujoco(model, d.qpos.copy()), v_from_mujoco(model, d.qpos.copy(), d.qvel.copy())
    tau, dt = np.zeros(model.nv), m.opt.timestep
    return model, scene, q, v, tau, dt


def stage_table(name):
    """Print the pieces' work and runs of one case of :data:`bench_scene.CASES`."""
    model, scene, q, v, tau, dt = _case(name)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, tau, scene, dt)               # the scene's slot layout grows to the step's
        inside = not runs_per_body(scene)
        found = scene_slot_data(scene, q, ahead=(v, dt), data_slots=inside)
    if found is None:
        print(f"{name}: the step's contact data come from Contact objects (no closed form): not counted")
        return
    slots = found[2] if inside else found[1]
    frames = tuple(fk.slot_structure(model, f) for f in slots.frames)
    settings = np.array([dt, 1e-8, 300.0, 10000.0, 0.005])
    prog = fk._step_program(model, {"frames": slots.frames}, ())
    init, stages, finish = fk._pieces(model, frames, ())

    def runs_from(warm):
        runs = []

        def counted(k, f):
            def run(*a):
                runs.append(k)
                return f(*a)
            return run
        out = run_stages(init, [counted(k, f) for k, f in enumerate(stages)], finish,
                         [q, v, tau, settings, warm, slots.data])[0]
        return runs, out[2]

    runs, impulses = runs_from(np.zeros((len(frames), 3)))
    # warm-started from the cold step's own impulses (as bench_scene's warm row, and a rollout's steps nearly)
    warm_runs = runs_from(impulses)[0]
    times, warm_times = Counter(runs), Counter(warm_runs)
    print(f"{name}: nv={model.nv}, {len(frames)} slots ({3 * len(frames)} rows); stage runs of a cold step: "
          f"{' '.join(f'g{k}' for k in runs)}; warm-started: {' '.join(f'g{k}' for k in warm_runs)}")
    print(f"  {'piece':6s} {'operations':>11s} {'blocks':>7s} {'multiply-adds':>14s} {'runs':>5s} "
          f"{'operations x runs':>18s} {'multiply-adds x runs':>21s} {'warm runs':>10s}")
    pieces = [("init", prog.init, 1, 1)] + \
        [(f"g{k}", p, times[k], warm_times[k]) for k, p in enumerate(prog.stages)] + [("fin", prog.finish, 1, 1)]
    for tag, p, n, w in pieces:
        ops = sum(1 for op, _, _ in p.nodes if op > CONST and op != MATMUL)
        pairs = sum(int(b.pairs.sum()) for b in p.blocks)
        print(f"  {tag:6s} {ops:11d} {len(p.blocks):7d} {pairs:14d} {n:5d} {ops * n:18d} {pairs * n:21d} {w:10d}")


def derivative_table(name):
    """Print the operations by phase of the pieces' program of one case of :data:`bench_scene.CASES`."""
    model, scene, q, v, tau, dt = _case(name)
    store = model_store(model, "contact dynamics programs")
    before = set(store)
    with warnings.catch_warnings(), sd.use_backend("numpy"):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        sd.contact_step_derivatives(model, q, v, tau, scene, dt)       # builds the program on the NumPy road
    keys = [k for k in store if k not in before and k[0] == "scene_step_partials"]
    if not keys:
        print(f"{name}: no pieces' program (the derivatives took another road)")
        return
    prog = store[keys[-1]]
    frames = keys[-1][1]
    straight = {}
    for (op, _, _), phase in zip(prog.nodes, prog.phases):
        if op > CONST and op != MATMUL:
            straight[phase] = straight.get(phase, 0) + 1
    loops = {}
    for b in prog.blocks:
        loops[b.phase] = loops.get(b.phase, 0) + int(b.pairs.sum())
    print(f"{name}: nv={model.nv}, {len(frames)} slots ({3 * len(frames)} rows)")
    print(f"  {'phase':34s} {'straight-line':>14s} {'block multiply-adds':>20s}")
    for phase in dict.fromkeys(list(straight) + list(loops)):
        label = "the rest (assembly, transport)" if phase == Graph.DEFAULT_PHASE else phase
        print(f"  {label:34s} {straight.get(phase, 0):14d} {loops.get(phase, 0):20d}")
    print(f"  {'all':34s} {sum(straight.values()):14d} {sum(loops.values()):20d}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["talos standing", "talos on the floor"], choices=list(CASES))
    p.add_argument("--derivatives", action="store_true", help="the derivatives' pieces by phase")
    args = p.parse_args()
    for name in args.cases:
        (derivative_table if args.derivatives else stage_table)(name)


if __name__ == "__main__":
    main()
