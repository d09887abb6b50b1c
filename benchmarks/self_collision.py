"""Self-collision of robots with mesh links: ``sd.collide`` beside Pinocchio's ``computeCollisions`` and
``computeDistances`` (coal, each mesh its convex hull) on the same pairs, in one process.

Per robot of example-robot-data (its URDF's collision meshes; talos less its SRDF's disabled pairs), a scene of
the robot alone with ``self_collision=True`` and Pinocchio's collision model holding the scene's pairs.  The
states: the robot's reference configuration (its SRDF's first, else the neutral one) with seeded normal noise
of ``--noise`` rad on every joint, clipped to the limits.  Per state, microseconds of each call (the fastest
of ``--repeat`` loops over all states); and, as a check that both look at the same thing, the pairs both call
touching (ours: a hit of negative distance; Pinocchio's: ``isCollision``).

    PYTHONPATH=src .venv/bin/python benchmarks/self_collision.py
    PYTHONPATH=src .venv/bin/python benchmarks/self_collision.py --robots g1 --states 100

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import time
import warnings

import numpy as np
import pinocchio as pin

import sparsedyn as sd
from sparsedyn.contact.collision_coal import HULL_OPTIONS
from sparsedyn.interop.pinocchio import q_to_pinocchio
from sparsedyn.io.resolve import example_robot_data_dir

#: name: (URDF, SRDF or None), in example-robot-data.
ROBOTS = {"g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", None),
          "talos": ("talos_data/robots/talos_reduced.urdf", "talos_data/srdf/talos.srdf")}


def states(model, q0, n, noise, seed=0):
    """``n`` configurations: ``q0`` with seeded normal noise of ``noise`` on the joints past a floating base,
    clipped to the joint limits."""
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(model.lower, float), np.asarray(model.upper, float)
    out = np.repeat(np.asarray(q0, float)[None], n, 0)
    out[:, 7:] = np.clip(out[:, 7:] + noise * rng.standard_normal((n, model.nq - 7)), lo[7:], hi[7:])
    return out


def pinocchio_of(path, root, scene):
    """Pinocchio's model, data, collision model (meshes as convex hulls) and data, holding ``scene``'s pairs."""
    pm, gm, _ = pin.buildModelsFromUrdf(str(path), [str(root.parent.parent)], pin.JointModelFreeFlyer())
    for g in gm.geometryObjects:
        if isinstance(g.geometry, pin.coal.BVHModelBase):
            g.geometry.buildConvexHull(True, HULL_OPTIONS[0])
            g.geometry = g.geometry.convex
    names = [g.name for g in gm.geometryObjects]
    for a, b in scene.pairs:
        gm.addCollisionPair(pin.CollisionPair(names.index(a), names.index(b)))
    return pm, pm.createData(), gm, pin.GeometryData(gm)


def best_us(fn, Q, repeat):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        for q in Q:
            fn(q)
        best = min(best, (time.perf_counter() - t) / len(Q))
    return best * 1e6


def run(name, n, noise, repeat):
    root = example_robot_data_dir()
    urdf, srdf_path = ROBOTS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(root / urdf, floating_base=True, geometry=True)
        srdf = sd.load_srdf(model, root / srdf_path) if srdf_path else None
        scene = sd.Scene(model, self_collision=True, srdf=srdf)
    q0 = next(iter(srdf.reference_configurations.values())) if srdf and srdf.reference_configurations else \
        model.neutral()
    Q = states(model, q0, n, noise)
    pm, pd, gm, gd = pinocchio_of(root / urdf, root, scene)
    Qp = [q_to_pinocchio(model, q) for q in Q]
    with sd.use_backend("native"):
        for q in Q[:3]:
            sd.collide(scene, q)                     # (builds what the calls need)
        ours = best_us(lambda q: sd.collide(scene, q), Q, repeat)
        hits = [sd.collide(scene, q) for q in Q]
    collisions = best_us(lambda q: pin.computeCollisions(pm, pd, gm, gd, q, False), Qp, repeat)
    distances = best_us(lambda q: pin.computeDistances(pm, pd, gm, gd, q), Qp, repeat)
    names = [g.name for g in gm.geometryObjects]
    agree = touching = 0
    for h, q in zip(hits, Qp):
        pin.computeCollisions(pm, pd, gm, gd, q, False)
        theirs = {frozenset((names[p.first], names[p.second])) for k, p in enumerate(gm.collisionPairs)
                  if gd.collisionResults[k].isCollision()}
        mine = {frozenset(p) for p, d in zip(h.pairs, h.distances) if d < 0}
        touching += len(theirs)
        agree += mine == theirs
    print(f"{name}: nv={model.nv}, {len(scene.pairs)} self pairs, {n} states (noise {noise} rad); "
          f"touching pairs a state {touching / n:.1f}; the touching sets equal in {agree} of {n} states")
    print(f"  sd.collide (hits within the margin {scene.margin} m)   {ours:8.1f} us a state")
    for label, t in (("pin.computeCollisions (booleans)", collisions), ("pin.computeDistances (every pair's distance)",
                                                                           distances)):
        print(f"  {label:46s}{t:8.1f} us a state   ratio {ours / t:5.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robots", nargs="+", choices=list(ROBOTS), default=list(ROBOTS))
    p.add_argument("--states", type=int, default=50)
    p.add_argument("--noise", type=float, default=0.1)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    for name in a.robots:
        run(name, a.states, a.noise, a.repeat)


if __name__ == "__main__":
    main()
