"""Accuracy and operation counts of the sparse Newton-Euler solves against ABA and RNEA.

* Accuracy, on one URDF of every example-robot-data package (fixed and floating base): the worst
  error of sparse forward dynamics on the identity FD(RNEA(a)) = a is at most 10x ABA's worst error
  on the same states plus 1e-13 max|a|, and sparse inverse dynamics agrees with RNEA to
  1e-13 max|tau|.  Both solve the same equations with the same elimination; a larger error means
  the sparse system is not the model's (a dropped entry) or its arithmetic loses digits.
* Cost, counted on the traced programs (``Program.flops()["total"]``: multiplications, additions,
  divisions): the sparse online phase returning ``qdd`` is at most 1.1x the ABA kernel, the one
  returning ``tau`` at most 1.05x the RNEA kernel (operation counts, not timings), on the same
  robots and on seeded random trees of every joint type.
"""

import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import kernels, sparse
from sparsedyn.sparse import flops
from sparsedyn.symbolic.trace import trace_kernel
from erd import robots_dir

# example-robot-data files that load_urdf rejects as invalid data (tests/io/test_urdf.py checks why)
INVALID = {"ur_description/urdf/ur3.urdf", "romeo_description/urdf/romeo_laas_small.urdf",
           "tiago_description/robots/tiago.urdf", "tiago_description/robots/tiago_dual.urdf",
           "tiago_description/robots/tiago_no_hand.urdf"}


def _one_per_package():
    """The first valid URDF (sorted by path) of every example-robot-data package."""
    root = robots_dir()
    out = {}
    for p in sorted(str(x.relative_to(root)) for x in root.rglob("*.urdf")):
        if p not in INVALID:
            out.setdefault(p.split("/")[0], p)
    return sorted(out.values())


FILES = _one_per_package()
#: a quadrotor welded to the world has no joint at all (nv = 0): see test_a_robot_without_joints
NO_JOINTS = ("hector_description/robots/quadrotor_base.urdf", False)
CASES = [(f, fb) for f in FILES for fb in (False, True) if (f, fb) != NO_JOINTS]
IDS = [f"{Path(f).stem}-{'floating' if fb else 'fixed'}" for f, fb in CASES]
#: states per case: 1000 with a floating base; a seeded subset with a fixed base (its tree is the
#: floating-base model's without the root joint), so the whole module stays within a minute or two
NSTATES = {True: 1000, False: 200}

_CACHE = {}


def _case(path, fb):
    """``(model, fd structure or None when FD is undefined, id structure)``, cached for the module."""
    if (path, fb) not in _CACHE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # implausible-inertia warnings are tested elsewhere
            model = sd.load_urdf(robots_dir() / path, floating_base=fb)
        idst = sparse.inverse_dynamics_problem(model).analyze()
        try:
            fd = sparse.forward_dynamics_problem(model).analyze()
        except sparse.StructurallySingularError:
            fd = None                               # massless leaves: forward dynamics is undefined
        _CACHE[path, fb] = model, fd, idst
    return _CACHE[path, fb]


def test_the_robot_set_covers_the_packages():
    assert len(FILES) >= 35
    names = {Path(f).stem for f in FILES}
    assert {"baxter", "kinova", "centauro", "talos_full_v2", "panda"} <= names


def test_a_robot_without_joints():
    model, fd, idst = _case(*NO_JOINTS)
    assert model.nv == 0
    assert sparse.sparse_inverse_dynamics(model, model.neutral(), np.zeros(0), np.zeros(0)).shape == (0,)
    assert sparse.sparse_forward_dynamics(model, model.neutral(), np.zeros(0), np.zeros(0)).shape == (0,)


@pytest.mark.parametrize("path,fb", CASES, ids=IDS)
def test_sparse_solves_are_as_accurate_as_aba_and_rnea(path, fb):
    model, fd, idst = _case(path, fb)
    n = NSTATES[fb]
    rng = np.random.default_rng(11)
    Q = np.stack([model.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    tau = sd.rnea(model, Q, V, A)
    tau_sparse = sparse.sparse_inverse_dynamics(model, Q, V, A, structure=idst)
    assert np.max(np.abs(tau_sparse - tau)) <= 1e-13 * np.max(np.abs(tau))
    if fd is None:
        with pytest.raises(sd.SingularInertiaError):
            sd.aba(model, Q, V, tau)
        return
    # (iCub's mass matrix is nearly singular at some states: ABA's own error reaches 1e-7 there,
    # and the sparse solve falls back to pivoting where a static pivot of a massless link is tiny)
    err_aba = np.max(np.abs(sd.aba(model, Q, V, tau) - A))
    err_sparse = np.max(np.abs(sparse.sparse_forward_dynamics(model, Q, V, tau, structure=fd) - A))
    assert err_sparse <= 10 * err_aba + 1e-13 * np.max(np.abs(A)), (err_sparse, err_aba)


def _ratios(model, fd, idst):
    f_id = flops.trace_solve(idst, ("tau",)).flops()["total"]
    r_id = f_id / trace_kernel(kernels.REGISTRY["rnea"], model).flops()["total"]
    if fd is None:
        return None, r_id
    f_fd = flops.trace_solve(fd, ("qdd",)).flops()["total"]
    return f_fd / trace_kernel(kernels.REGISTRY["aba"], model).flops()["total"], r_id


@pytest.mark.parametrize("path,fb", CASES, ids=IDS)
def test_sparse_solves_cost_no_more_than_aba_and_rnea_on_robots(path, fb):
    model, fd, idst = _case(path, fb)
    r_fd, r_id = _ratios(model, fd, idst)
    assert r_id <= 1.05
    assert fd is None or r_fd <= 1.1


TREES = [(t, fb) for t in sorted(sd.JOINT_TYPES) for fb in (False, True)]


@pytest.mark.parametrize("joint_type,fb", TREES, ids=[f"{t}-{'floating' if fb else 'fixed'}" for t, fb in TREES])
def test_sparse_solves_cost_no_more_than_aba_and_rnea_on_random_trees(joint_type, fb):
    model = sd.random_tree(7, branching=1.5, skew=0.3, joint_types=(joint_type,), seed=3, floating_base=fb)
    fd = sparse.forward_dynamics_problem(model).analyze()
    idst = sparse.inverse_dynamics_problem(model).analyze()
    r_fd, r_id = _ratios(model, fd, idst)
    assert r_id <= 1.05 and r_fd <= 1.1
    # and the traced programs compute the right thing (the counts are of working code)
    rng = np.random.default_rng(2)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    tau = sd.rnea(model, q, v, a)
    y_id, y_fd = idst.problem.values(qdd=a), fd.problem.values(tau=tau)
    assert np.allclose(flops.trace_solve(idst, ("tau",)).evaluate([q, v, y_id])[0], tau, rtol=1e-10, atol=1e-10)
    assert np.allclose(flops.trace_solve(fd, ("qdd",)).evaluate([q, v, y_fd])[0], a, rtol=1e-8, atol=1e-8)
