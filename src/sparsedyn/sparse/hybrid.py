"""Hybrid dynamics as a sparse system: some joints' accelerations known, the others' forces (and its
two extremes, inverse and forward dynamics: :func:`sparse_inverse_dynamics`, :func:`sparse_forward_dynamics`).

Featherstone, *Rigid Body Dynamics Algorithms* (2008), chapter 9: given the
state, the accelerations ``a_j`` of the joints in a set ``B`` and the forces
``tau_i`` of the others, find the unknown accelerations and forces.  As a
measurement set of the Newton-Euler system (Nori, *Inverse, forward and other
dynamic computations computationally optimized with sparse matrix
factorizations*, 2017) it is nothing new::

    hybrid_dynamics_problem(model, B) ==
        Problem(model).known("tau", joints=A).known("qdd", joints=B).known("fx")     (A = the others)

and the offline analysis finds the structure Featherstone's recursion exploits:
the known accelerations propagate by substitution (as in inverse dynamics),
each subtree of unknown-acceleration joints becomes an articulated block whose
static pivots are proven (``S_i^T IA_i S_i > 0``), and the forces of the
known-acceleration joints follow by substitution.  A floating base with
prescribed motion (its six accelerations known) is one use.

In the system the joint accelerations are the variables ``qdd_i`` and the joint
forces ``tau_i`` (the paper's names); the public arguments are ``a`` and ``tau``.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..model.topology import model_store
from .measurements import Problem, forward_dynamics_problem, inverse_dynamics_problem

__all__ = ["hybrid_dynamics_problem", "sparse_hybrid_dynamics", "sparse_inverse_dynamics", "sparse_forward_dynamics"]


def _joint_set(model, joints, what):
    out = set()
    for j in joints:
        if isinstance(j, (int, np.integer)):
            if not 0 <= int(j) < model.nbodies:
                raise ValueError(f"{what}: joint index {int(j)} out of range (model {model.name!r} has "
                                 f"{model.nbodies} joints)")
            out.add(int(j))
        elif j in model.joint_names:
            out.add(model.joint_names.index(j))
        else:
            raise ValueError(f"{what}: model {model.name!r} has no joint called {j!r}")
    return out


def hybrid_dynamics_problem(model, known_acceleration_joints) -> Problem:
    """The hybrid-dynamics measurement set: ``qdd`` known on ``known_acceleration_joints``
    (indices or joint names), ``tau`` known on every other joint, ``fx`` known."""
    if isinstance(known_acceleration_joints, (str, int, np.integer)):
        known_acceleration_joints = [known_acceleration_joints]
    B = _joint_set(model, known_acceleration_joints, "known_acceleration_joints")
    A = [i for i in range(model.nbodies) if i not in B]
    return (Problem(model, name="hybrid dynamics").known("tau", joints=A).known("qdd", joints=sorted(B))
            .known("fx"))


def sparse_hybrid_dynamics(model, q, v, a_known, tau_known, known_acceleration_joints, f_ext=None, gravity=None,
                           structure=None, full=False, check="auto"):
    """Featherstone's hybrid dynamics (RBDA ch. 9) as a sparse system: ``(a, tau)``, each (..., nv).

    ``q`` (..., nq), ``v`` (..., nv); ``a_known`` (..., nv): the accelerations of
    the joints in ``known_acceleration_joints`` (indices or joint names; the
    other entries are ignored); ``tau_known`` (..., nv): the forces of the
    other joints (the entries of the known-acceleration joints are ignored);
    ``f_ext``, ``gravity`` as in :func:`sparsedyn.rnea`.  Returns the joint
    accelerations ``a`` and joint forces ``tau`` of every joint: the unknown
    accelerations of the force-driven joints and the unknown forces of the
    acceleration-driven ones, with the given values in the other entries.
    ``structure``: a :class:`~sparsedyn.sparse.Structure` of
    :func:`hybrid_dynamics_problem` for the same joints to reuse; ``full=True``
    returns every variable of ``d`` instead (``{"a", "f", "tau", "fx", "qdd"}``
    as :meth:`Structure.unpack`).
    """
    _checks.model_first("sparse_hybrid_dynamics", model, "model, q, v, a_known")
    q, v, a_known, f_ext, g, shape, _ = _checks.dynamics(model, q, v, a_known, f_ext, gravity, "a_known",
                                                         "nv joint accelerations")
    tau_known = _checks.vector(model, "tau_known", tau_known, model.nv, "nv joint forces")
    shape = np.broadcast_shapes(shape, tau_known.shape[:-1])
    problem = hybrid_dynamics_problem(model, known_acceleration_joints)
    if structure is None:                        # (analyzed once per model and set of joints, kept with it)
        store = model_store(model, "sparse structures")
        key = ("hybrid",) + tuple(m.name for m in problem.measurements)
        structure = store.get(key) or store.setdefault(key, problem.analyze())
    elif structure.model is not model or \
            [m.name for m in structure.problem.measurements] != [m.name for m in problem.measurements]:
        raise ValueError(f"structure: analyzed for {structure.problem.name!r} of model {structure.model.name!r}, "
                         f"not hybrid dynamics with these known-acceleration joints of {model.name!r}")
    d = structure.solve(q, v, problem.values(qdd=a_known, tau=tau_known, fx=f_ext), g, check=check)
    out = structure.unpack(np.broadcast_to(d, shape + (structure.n,)))
    return out if full else (out["qdd"].copy(), out["tau"].copy())


# --- the two extremes: every acceleration known (inverse dynamics), none (forward dynamics) ---------

def _structure_for(model, structure, make, kind):
    """``structure`` checked against ``model`` and ``kind``; None: ``make(model)``'s analysis, made once per
    model (it depends on the model's structure alone) and kept with it."""
    if structure is None:
        store = model_store(model, "sparse structures")
        got = store.get(kind)
        return got if got is not None else store.setdefault(kind, make(model).analyze())
    if structure.model is not model:
        raise ValueError(f"structure: analyzed for model {structure.model.name!r}, not {model.name!r}")
    if [m.name for m in structure.problem.measurements] != [m.name for m in make(model).measurements]:
        raise ValueError(f"structure: analyzed for {structure.problem.name!r}, not {kind}")
    return structure


def sparse_inverse_dynamics(model, q, v, a, f_ext=None, gravity=None, structure=None, full=False, check="auto"):
    """Inverse dynamics as the sparse system of Nori's eq. (9): ``tau`` (..., nv).

    Same arguments and conventions as :func:`sparsedyn.rnea` (``a``: joint accelerations, the
    known variables ``qdd_i`` of the system).  ``structure``: a
    :class:`Structure` of ``inverse_dynamics_problem(model)`` to reuse (otherwise
    the model's, analyzed on its first call and kept with the model).  ``full=True`` returns every variable,
    ``{"a", "f", "tau", "fx", "qdd"}`` (``f[..., i, :]``: the wrench transmitted
    through joint ``i``, body ``i`` coordinates).
    """
    _checks.model_first("sparse_inverse_dynamics", model, "model, q, v, a")
    q, v, a, f_ext, g, shape, _ = _checks.dynamics(model, q, v, a, f_ext, gravity, "a", "nv joint accelerations")
    st = _structure_for(model, structure, inverse_dynamics_problem, "inverse dynamics")
    d = st.solve(q, v, st.problem.values(qdd=a, fx=f_ext), g, check=check)
    out = st.unpack(np.broadcast_to(d, shape + (st.n,)))
    return out if full else out["tau"].copy()


def sparse_forward_dynamics(model, q, v, tau, f_ext=None, gravity=None, structure=None, full=False, check="auto"):
    """Forward dynamics as the sparse system of Nori's eq. (15): the joint accelerations ``a``
    (..., nv) (the unknowns ``qdd_i`` of the system).

    Same arguments and conventions as :func:`sparsedyn.aba`; ``structure``,
    ``full`` as in :func:`sparse_inverse_dynamics`.
    """
    _checks.model_first("sparse_forward_dynamics", model, "model, q, v, tau")
    q, v, tau, f_ext, g, shape, _ = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau", "nv joint forces")
    st = _structure_for(model, structure, forward_dynamics_problem, "forward dynamics")
    d = st.solve(q, v, st.problem.values(tau=tau, fx=f_ext), g, check=check)
    out = st.unpack(np.broadcast_to(d, shape + (st.n,)))
    return out if full else out["qdd"].copy()
