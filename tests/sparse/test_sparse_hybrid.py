"""Hybrid dynamics (Featherstone, RBDA ch. 9) as a sparse system, against the partitioned mass matrix.

Oracle: with ``1`` the force-driven dofs (tau known) and ``2`` the acceleration-driven ones (a known),
``H11 a1 = tau1 - C1 - H12 a2`` and ``tau2 = H21 a1 + H22 a2 + C2``, with ``H`` from CRBA and
``C = rnea(q, v, 0, f_ext)`` (gravity, velocity products, external forces).
"""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import sparse

from conftest import random_trees
from erd import load_model
from sparse_oracles import unproven, varying_dof_pivots

EPS = np.finfo(float).eps


def oracle(model, q, v, a_known, tau_known, B, f_ext=None):
    """``(a, tau)`` of one state from the partitioned joint-space equation."""
    two = np.zeros(model.nv, bool)
    for i in B:
        two[model.v_slice(model.joint_names.index(i) if isinstance(i, str) else i)] = True
    one = ~two
    H = sd.crba(model, q)
    C = sd.rnea(model, q, v, np.zeros(model.nv), f_ext)
    a = np.where(two, a_known, 0.0)
    a[one] = np.linalg.solve(H[np.ix_(one, one)], tau_known[one] - C[one] - H[np.ix_(one, two)] @ a[two])
    tau = np.where(one, tau_known, 0.0)
    tau[two] = H[np.ix_(two, one)] @ a[one] + H[np.ix_(two, two)] @ a[two] + C[two]
    return a, tau, np.linalg.cond(H[np.ix_(one, one)]) if one.any() else 1.0


def check(model, B, rng, n=3, f_ext=False):
    st = sparse.hybrid_dynamics_problem(model, B).analyze()
    # every static pivot proven nonzero at every state, but those of D_i = S_i^T IA_i S_i of a
    # force-driven joint whose S depends on q (an Euler-angle joint's S loses rank at gimbal lock)
    assert unproven(st) == varying_dof_pivots(model, B)
    q = np.stack([model.random_configuration(rng, limits=False) for _ in range(n)])
    v, ak, tk = (rng.normal(size=(n, model.nv)) for _ in range(3))
    fx = rng.normal(size=(n, model.nbodies, 6)) if f_ext else None
    a, tau = sd.sparse_hybrid_dynamics(model, q, v, ak, tk, B, f_ext=fx, structure=st)
    assert a.shape == tau.shape == (n, model.nv)
    for k in range(n):
        fk = None if fx is None else fx[k]
        a0, t0, cond = oracle(model, q[k], v[k], ak[k], tk[k], B, fk)
        # backward-stable solves of H11 a1 = r: forward error <= cond(H11) eps (times a modest factor)
        assert np.max(np.abs(a[k] - a0)) <= 1e3 * EPS * cond * max(1.0, np.max(np.abs(a0)))
        # the pair satisfies the equations of motion: rnea(a) = tau, to rounding of the products
        res = sd.rnea(model, q[k], v[k], a[k], fk) - tau[k]
        H = sd.crba(model, q[k])
        scale = np.abs(H) @ np.abs(a[k]) + np.abs(sd.rnea(model, q[k], v[k], np.zeros(model.nv), fk)) + 1.0
        assert np.all(np.abs(res) <= 1e-12 * scale * model.nv)
        # tau2 = H21 a1 + ...: the error of a1 times |H|
        assert np.max(np.abs(tau[k] - t0)) <= 1e3 * EPS * cond * np.max(scale)
    return st


def subsets(model, rng):
    n = model.nbodies
    picks = [[], list(range(n)), [0], sorted(rng.choice(n, n // 2, replace=False).tolist())]
    return picks


@pytest.mark.parametrize("k", range(4), ids=["chain", "binary", "floating", "floating-bf3"])
def test_random_trees_every_joint_type(k):
    model = random_trees()[k]
    rng = np.random.default_rng(40 + k)
    for B in subsets(model, rng):
        check(model, B, rng, f_ext=(k % 2 == 0))


def test_extremes_are_inverse_and_forward_dynamics():
    """All accelerations known: the structure of inverse dynamics (triangular); none: forward dynamics."""
    model = random_trees()[2]
    rng = np.random.default_rng(1)
    st = check(model, list(range(model.nbodies)), rng, n=1)
    assert st.triangular and st.fill == 0
    st = check(model, [], rng, n=1)
    fd = sparse.forward_dynamics_problem(model).analyze()
    assert st.block_sizes() == fd.block_sizes() and st.fill == fd.fill


def test_panda_with_two_prescribed_joints():
    model = load_model("panda_description/urdf/panda.urdf", False)
    check(model, ["panda_joint2", "panda_joint5"], np.random.default_rng(2))


def test_floating_base_with_prescribed_base_motion():
    """talos_reduced on a free-floating base: the base's six accelerations are prescribed, the joints
    are torque-driven; the base wrench it takes to move the base so is the free joint's tau."""
    model = load_model("talos_data/robots/talos_reduced.urdf", True)
    assert model.joints[0].type == "free"
    st = check(model, [model.joint_names[0]], np.random.default_rng(3), n=2)
    assert st.summary().count("pivots proven") >= 1


def test_problem_builder_reads_as_the_statement():
    model = sd.serial_chain(4)
    p = sparse.Problem(model).known("tau", joints=[0, 2]).known("qdd", joints=["joint2", "joint4"]).known("fx")
    q = sparse.hybrid_dynamics_problem(model, ["joint2", "joint4"])
    assert [m.name for m in p.measurements] == [m.name for m in q.measurements]
    with pytest.raises(TypeError, match="not both"):
        sparse.Problem(model).known("tau", [0], joints=[1])
    with pytest.raises(ValueError, match="joint variables"):
        sparse.Problem(model).known("a", joints=[1])
    with pytest.raises(ValueError, match="no joint called 'elbow'"):
        sparse.hybrid_dynamics_problem(model, ["elbow"])
    st = q.analyze()
    z = np.zeros(model.nv)
    with pytest.raises(ValueError, match="not hybrid dynamics"):
        sd.sparse_hybrid_dynamics(model, model.neutral(), z, z, z, [0], structure=st)
    with pytest.raises(ValueError, match=r"tau_known: expected shape \(\.\.\., 4\)"):
        sd.sparse_hybrid_dynamics(model, model.neutral(), z, z, z[:3], [1, 3], structure=st)


def test_each_models_analysis_is_made_once_and_kept(monkeypatch):
    """Without ``structure``, the first call of each sparse function analyzes the model's system (per set of
    known-acceleration joints for hybrid dynamics); later calls reuse that analysis (no new one), with the
    results of passing it as ``structure``, bit for bit."""
    from sparsedyn.sparse.measurements import Problem
    model = random_trees()[1]
    rng = np.random.default_rng(6)
    q, (v, a, tau) = model.random_configuration(rng), rng.normal(size=(3, model.nv))
    made, real = [], Problem.analyze

    def counted(self, *args, **kwargs):
        made.append(self.name)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Problem, "analyze", counted)
    calls = [lambda **s: sd.sparse_inverse_dynamics(model, q, v, a, **s),
             lambda **s: sd.sparse_forward_dynamics(model, q, v, tau, **s),
             lambda **s: sd.sparse_hybrid_dynamics(model, q, v, a, tau, [0], **s),
             lambda **s: sd.sparse_hybrid_dynamics(model, q, v, a, tau, [0, 1], **s)]
    first = [f() for f in calls]
    assert len(made) == 4
    again = [f() for f in calls]
    assert len(made) == 4
    problems = [sparse.inverse_dynamics_problem(model), sparse.forward_dynamics_problem(model),
                sparse.hybrid_dynamics_problem(model, [0]), sparse.hybrid_dynamics_problem(model, [0, 1])]
    given = [f(structure=real(p)) for f, p in zip(calls, problems)]
    for x, y, z in zip(first, again, given):
        for u, w, t in zip(*(r if isinstance(r, tuple) else (r,) for r in (x, y, z))):
            assert np.array_equal(u, w) and np.array_equal(u, t)
