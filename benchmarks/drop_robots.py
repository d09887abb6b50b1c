"""Robots of example-robot-data dropped on the floor, as a user first simulates one: each robot's URDF
with its collision shapes (meshes as their convex hulls) and its SRDF's disabled pairs, less the pairs that
overlap where it starts or at its reference configuration (as the scene's warning advises), a plane, no torque, the lowest shape 5 cm
above the floor; ``sd.rollout`` of ``--steps`` steps of ``--dt`` on the default road, timed on its
second run (the first, on the native road with its builds waited for, builds the kernels of every slot
layout the trajectory grows to; the default road builds in the background, and its run would wait on them).  Per robot: milliseconds a step, the solver's iterations
(mean, max) and the steps that ran past ADMM's budget (1000 iterations) into Gauss-Seidel's sweeps, which
go on while they gain (up to ten times as many; they stop where a window of 500 sweeps does not halve
the residual), where they fell, and the deepest penetration of any pair along the trajectory.

    PYTHONPATH=src .venv/bin/python benchmarks/drop_robots.py --robots solo12 b1 go2

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import time
import warnings

import numpy as np

import sparsedyn as sd
from sparsedyn.interop import example_robot_data_dir

#: short name: (URDF, SRDF) below example-robot-data's robots directory
ROBOTS = {
    "solo12": ("solo_description/robots/solo12.urdf", "solo_description/srdf/solo.srdf"),
    "b1": ("b1_description/urdf/b1.urdf", "b1_description/srdf/b1.srdf"),
    "go2": ("go2_description/urdf/go2.urdf", "go2_description/srdf/go2.srdf"),
    "a1": ("a1_description/urdf/a1.urdf", "a1_description/srdf/a1.srdf"),
    "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", "anymal_c_simple_description/srdf/anymal.srdf"),
    "anymal_kinova": ("anymal_b_simple_description/robots/anymal-kinova.urdf",
                      "anymal_b_simple_description/srdf/anymal-kinova.srdf"),
    "alex": ("alex_description/urdf/alex_nub_hands.urdf", "alex_description/srdf/alex_nub_hands.srdf"),
    "centauro": ("centauro_description/urdf/centauro.urdf", "centauro_description/srdf/centauro.srdf"),
    "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", None),
    "icub_reduced": ("icub_description/robots/icub_reduced.urdf", "icub_description/srdf/icub.srdf"),
    "romeo_small": ("romeo_description/urdf/romeo_small.urdf", "romeo_description/srdf/romeo_small.srdf"),
    "hyq": ("hyq_description/robots/hyq_no_sensors.urdf", "hyq_description/srdf/hyq.srdf"),
    "go1": ("go1_description/urdf/go1.urdf", "go1_description/srdf/go1.srdf"),
    "bolt": ("bolt_description/robots/bolt.urdf", "bolt_description/srdf/bolt.srdf"),
}
#: iterations beyond which a step ran past ADMM's budget into Gauss-Seidel's sweeps
CAPPED = 1000


def dropped(name):
    """``(model, scene, q)``: the robot ``name`` (:data:`ROBOTS`), its scene (the floor, its SRDF's
    pairs left out, and the pairs that overlap where it starts or at its reference configuration, as the scene's
    ``SelfOverlapWarning`` advises) and its neutral configuration lifted so that its lowest shape is 5 cm up."""
    root = example_robot_data_dir()
    urdf, srdf = ROBOTS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(root / urdf, floating_base=True, geometry=True, package_dirs=[root],
                             invalid_inertia="warn")
        pairs = sd.load_srdf(model, root / srdf) if srdf and (root / srdf).exists() else None
        scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], srdf=pairs)
        refs = list(pairs.reference_configurations.values())[:1] if pairs is not None else []
        gone = {p for x in [model.neutral()] + refs for p in sd.overlapping_pairs(scene, x)}
        scene = scene.with_pairs(remove=sorted(gone))
        wide = sd.Scene(model, world=[sd.Shape("plane", name="floor")], srdf=pairs, margin=5.0)
    q = model.neutral()
    hits = sd.collide(wide, q)
    q[2] += 0.05 - min(d for p, d in zip(hits.pairs, hits.distances) if "floor" in p)
    return model, scene, q


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robots", nargs="+", default=list(ROBOTS), choices=list(ROBOTS))
    p.add_argument("--dt", type=float, default=2e-3)
    p.add_argument("--steps", type=int, default=400)
    a = p.parse_args()
    for name in a.robots:
        model, scene, q = dropped(name)
        v, tau = np.zeros(model.nv), np.zeros(model.nv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.ContactStepWarning)
            with sd.use_backend("native", deterministic=True):      # (builds every kernel it needs, waited for)
                sd.rollout(model, q, v, tau, scene, a.dt, a.steps)
            t = time.perf_counter()
            r = sd.rollout(model, q, v, tau, scene, a.dt, a.steps)
            wall = time.perf_counter() - t
        its = r.iterations
        capped = np.nonzero(its > CAPPED)[0]
        deepest = min(sd.collide(scene, x).distances.min(initial=np.inf) for x in r.q)
        print(f"{name:13s} nv={model.nv:2d}  {1e3 * wall / a.steps:7.2f} ms a step  iterations mean {its.mean():7.1f} "
              f"max {its.max():6d}  past ADMM's budget: {len(capped)} steps {capped[:10].tolist()}  "
              f"contacts at the end {len(r.impulses[-1])}, base height {r.q[-1, 2]:.3f} m, "
              f"deepest penetration {1e3 * max(-deepest, 0.0):.2f} mm")


if __name__ == "__main__":
    main()
