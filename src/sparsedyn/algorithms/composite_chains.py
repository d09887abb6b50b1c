"""A model's composite joints as chains of massless bodies, for the analytical derivative kernels.

A composite joint (MuJoCo's several hinges of one body; :class:`~sparsedyn.model.joint_types.Composite`)
has a motion subspace that depends on ``q`` (each part's axis moves with the parts before it), so the
analytical RNEA derivatives (Carpentier and Mansard, "Analytical derivatives of rigid body dynamics
algorithms", 2018), written for constant subspaces, do not apply to it.  The same dynamics is that of
a chain of bodies, one per part, the parts' placements between them and the body's inertia on the
last (``XJ = XJ_n P_n ... XJ_1 P_1``: part ``k`` moves the chain's body ``k`` against body ``k - 1``
placed at ``P_k``): the same ``q``, ``v`` and tangent space (the parts' coordinates one after the
other), the same joint forces, and constant subspaces where each part has one.  Pinocchio's
``JointModelComposite`` derivatives come to the same terms.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..model.joint_types import Composite
from ..model.spatial import compose, identity
from ..model.topology import model_store

__all__ = ["composite_chains", "chain_forces"]


def composite_chains(model):
    """``(chained, last)``: ``model`` with each composite joint made a chain of massless bodies
    (module docstring) and ``last`` (nbodies,) the index in ``chained`` of each body of ``model`` (the
    chain's last body, which carries its inertia and moves as the body does).  ``chained`` keeps the
    dynamics alone (the joints, placements, inertias, armature and gravity; no frames, geometries,
    limits, sensors or joint dynamics): what RNEA's derivatives read.  None where a part of a
    composite joint, or another joint, has a motion subspace that depends on ``q`` (the chain does
    not make every subspace constant), or the model has mimic joints.  Made once per model (its store)."""
    store = model_store(model, "composite chains")
    if "chains" not in store:
        store["chains"] = _chained(model)
    return store["chains"]


def _chained(model):
    if model.mimic:                                     # (coupled coordinates: not a plain tree's)
        return None
    names, joint_names, parent, joints, Xtree, inertia, last = [], [], [], [], [], [], []
    for i, j in enumerate(model.joints):
        p = -1 if model.parent[i] < 0 else last[model.parent[i]]
        parts = j.joints if isinstance(j, Composite) else (j,)
        if not all(x.constant_subspace for x in parts):
            return None
        placed = j.part_placements if isinstance(j, Composite) else (None,)
        for k, (x, P) in enumerate(zip(parts, placed)):
            end = k == len(parts) - 1
            X = model.Xtree[i] if k == 0 else identity()
            names.append(model.body_names[i] if end else f"{model.body_names[i]}/part{k}")
            joint_names.append(model.joint_names[i] if len(parts) == 1 else f"{model.joint_names[i]}/part{k}")
            parent.append(p)
            joints.append(x)
            Xtree.append(X if P is None else compose(P, X))
            inertia.append(model.inertia[i] if end else np.zeros((6, 6)))
            p = len(names) - 1
        last.append(p)
    chained = dataclasses.replace(
        model, name=model.name, body_names=tuple(names), joint_names=tuple(joint_names), parent=np.array(parent),
        joints=tuple(joints), Xtree=tuple(Xtree), inertia=np.array(inertia), frames=(), lower=None, upper=None,
        velocity_limit=None, effort_limit=None, mimic=(), sensors=(), fixed_joints=(), geometries=(),
        joint_dynamics=None)
    return chained, np.array(last)


def chain_forces(chains, f_ext):
    """The body forces ``f_ext`` (..., nbodies, 6) of a model (None: none) on its ``chains``'
    (:func:`composite_chains`) bodies (..., nbodies of the chains, 6): each on its body's chain's last
    body, zero on the others."""
    if f_ext is None:
        return None
    chained, last = chains
    f_ext = np.asarray(f_ext)
    out = np.zeros(f_ext.shape[:-2] + (chained.nbodies, 6), dtype=f_ext.dtype)
    out[..., last, :] = f_ext
    return out
