"""Arguments for any registered kernel, from its declaration alone (shared by the tests that run
every function of the registry: tracing, compiled forms)."""

import numpy as np

from sparsedyn.kernels import REGISTRY
from sparsedyn.model.sensors import Contact

#: Values to try for each static argument; a new static argument needs an entry here.
STATIC_SAMPLES = {
    "frame": lambda model: [model.frames[-1].name] if model.frames else [model.body_names[-1]],
    "reference": lambda model: ["local", "world", "local_world_aligned"],
    "unit": lambda model: [False, True],
    "kind": lambda model: ["visual", "collision"],
    "contacts": lambda model: [(Contact(model.frames[-1].name, "3d"),)],
    "frames": lambda model: [(model.frames[-1].name,)],
    # every kind of contact in every slot (the default), and a plane's alone in the one slot of "frames"
    "kinds": lambda model: [(), ((1,),)],
    # a shape on the last body against a world plane, and against a shape on the first body
    "pairs": lambda model: [(("sphere", "plane", 0, 1, model.nbodies - 1, -1),
                             ("capsule", "sphere", 0, 2, model.nbodies - 1, 0))],
    "baumgarte": lambda model: [1.5],
    "damping": lambda model: [0.0],
    "restitution": lambda model: [0.5],
    # every joint (the default), and two joints named, the last first (order kept)
    "joints": lambda model: [None, (model.joint_names[-1], 0)],
}


#: Per kernel, sample values that replace those of STATIC_SAMPLES.
KERNEL_STATIC_SAMPLES = {
    # a mesh of 4 hull vertices on the last body against a world plane
    "mesh_plane_heights": {"pairs": lambda model: [((0, 1, model.nbodies - 1, -1, 4),)]},
}


def static_choices(model, name):
    """Every combination of sample values of the static arguments of kernel ``name`` (dicts)."""
    k = REGISTRY[name]
    combos = [{}]
    for s in k.static:
        samples = KERNEL_STATIC_SAMPLES.get(name, {}).get(s, STATIC_SAMPLES.get(s))
        if samples is None:
            raise AssertionError(f"kernel {name!r}: no test values for static argument {s!r}; add them to "
                                 f"tests/kernel_args.py")
        combos = [dict(c, **{s: x}) for c in combos for x in samples(model)]
    return combos


def _spd(rng, n, batch):
    A = rng.normal(size=batch + (n, n))
    return A @ np.swapaxes(A, -1, -2) + n * np.eye(n)


def arguments(model, name, rng, batch=(), optional=False, static=None):
    """``{argument: array}`` for kernel ``name`` of ``model``: configurations for (nq,) inputs named
    ``q...``, SPD matrices / valid factors for matrix inputs, normal samples otherwise; with
    ``optional``, every optional array too."""
    k = REGISTRY[name]
    shapes = k.shapes(model, **(static or {}))
    names = list(k.inputs) + (list(k.optional) if optional else [])
    n = int(np.prod(batch, dtype=int))
    out = {}
    for a in names:
        s = shapes[a]
        if a.startswith("q") and s == (model.nq,):
            x = np.stack([model.random_configuration(rng) for _ in range(max(n, 1))])[:n] if batch else \
                model.random_configuration(rng)
            out[a] = x.reshape(batch + s)
        elif len(s) == 2 and s[0] == s[1] == model.nv and a == "H":
            out[a] = _spd(rng, model.nv, batch)
        elif len(s) == 2 and s[0] == s[1] == model.nv:          # a factor: unit-ish lower triangular
            L = np.tril(rng.normal(size=batch + s), -1) * 0.3 + np.eye(model.nv) * (1.5 + rng.random(batch + (model.nv,)))[..., None]
            out[a] = L
        elif a == "D":
            out[a] = 1.0 + rng.random(batch + s)
        elif a == "settings":            # a contact step: [dt, tol, admm_iterations, sweeps, margin]
            out[a] = np.broadcast_to(np.array([1e-3, 1e-8, 100.0, 1000.0, 5e-3]), batch + s).copy()
        elif a == "contact_data":        # mu 0.5, the plane 100 m below: the point is open at any sample state
            out[a] = np.broadcast_to(np.array([0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -100.0]), batch + s).copy()
        elif a == "gravity":
            out[a] = np.array([0.3, -1.0, -9.0]) + 0.1 * rng.normal(size=batch + s)
        else:
            out[a] = rng.normal(size=batch + s)
    return out
