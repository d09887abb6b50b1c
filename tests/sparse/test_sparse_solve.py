"""The online phase: sparse inverse dynamics equals RNEA (every joint wrench too), sparse forward
dynamics equals ABA, single and batched, float and object arrays, at 1,000 random states per model
with no fallback; measurements beyond ID/FD; the runtime pivot check and its fallback; bisection along
paths between random configurations hunting vanishing pivots."""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import sparse
from sparsedyn.sparse import Measurement, Problem, SparsePivotWarning, StructurallySingularError
from conftest import near_singular_state, random_trees, rel_err
from sparse_oracles import (all_models, fd_singular, random_states, rnea_intermediates, robot, robot_cases, unproven,
                            varying_dof_pivots)

TOL = 1e-9
EPS = np.finfo(float).eps


@pytest.fixture(params=range(4), ids=["chain", "binary", "floating", "floating-bf3"], scope="module")
def tree(request):
    """The suite's random trees (every joint type, those whose S depends on q included)."""
    return random_trees()[request.param]


def per_state_rel_err(x, y):
    """rel_err of conftest, state by state along the leading axis."""
    x, y = np.asarray(x, float).reshape(len(x), -1), np.asarray(y, float).reshape(len(y), -1)
    return np.max(np.abs(x - y), axis=1) / np.maximum(1.0, np.max(np.abs(y), axis=1))


def check_id(model, st, q, v, a, f_ext=None, gravity=None):
    out = sparse.sparse_inverse_dynamics(model, q, v, a, f_ext, gravity, structure=st, full=True)
    A, F, tau = rnea_intermediates(model, q, v, a, f_ext, gravity)
    assert rel_err(out["tau"], tau) < TOL
    assert rel_err(out["tau"], sd.rnea(model, q, v, a, f_ext, gravity)) < TOL
    assert rel_err(out["f"], F) < TOL                        # every joint wrench f_i
    assert rel_err(out["a"], A) < TOL
    assert rel_err(out["qdd"], np.broadcast_to(a, out["qdd"].shape)) < 1e-15     # the known values come back
    return out


def check_fd(model, st, q, v, tau, f_ext=None, gravity=None):
    out = sparse.sparse_forward_dynamics(model, q, v, tau, f_ext, gravity, structure=st, full=True)
    qdd = sd.aba(model, q, v, tau, f_ext, gravity)
    assert rel_err(out["qdd"], qdd) < TOL
    A, F, tau2 = rnea_intermediates(model, q, v, qdd, f_ext, gravity)
    assert rel_err(out["f"], F) < 1e-8 and rel_err(out["a"], A) < 1e-8
    return out


# --- random trees of every joint type ------------------------------------------------------

def test_inverse_dynamics_equals_rnea_with_all_joint_wrenches(tree, rng):
    st = sparse.inverse_dynamics_problem(tree).analyze()
    q, v, a = random_states(tree, rng, 1)
    check_id(tree, st, q[0], v[0], a[0])                                     # single state
    Q, V, A = random_states(tree, rng, 4)
    F = rng.normal(size=(4, tree.nbodies, 6))
    out = check_id(tree, st, Q, V, A, F, gravity=[1.0, -2.0, -9.0])          # batched, external forces
    assert out["tau"].shape == (4, tree.nv) and out["f"].shape == (4, tree.nbodies, 6)
    for k in range(4):                                                       # batched == singles
        single = sparse.sparse_inverse_dynamics(tree, Q[k], V[k], A[k], F[k], [1.0, -2.0, -9.0], structure=st)
        np.testing.assert_allclose(single, out["tau"][k], rtol=1e-13, atol=1e-12)


def test_forward_dynamics_equals_aba(tree, rng):
    st = sparse.forward_dynamics_problem(tree).analyze()
    q, v, tau = random_states(tree, rng, 1)
    check_fd(tree, st, q[0], v[0], 5 * tau[0])
    Q, V, T = random_states(tree, rng, 4)
    F = rng.normal(size=(4, tree.nbodies, 6))
    out = check_fd(tree, st, Q, V, T, F, gravity=[0.5, 0.0, -9.81])
    assert out["qdd"].shape == (4, tree.nv)
    # FD(ID(qdd)) = qdd through the two sparse systems
    tau = sparse.sparse_inverse_dynamics(tree, Q, V, out["qdd"], F, [0.5, 0.0, -9.81])
    assert rel_err(sparse.sparse_forward_dynamics(tree, Q, V, tau, F, [0.5, 0.0, -9.81], structure=st),
                   out["qdd"]) < TOL


def test_object_arrays_give_the_same_numbers(tree, rng):
    """The traced form (NumPy object arrays) runs the same kernel: same numbers, object dtype."""
    o = lambda x: np.asarray(x, float).astype(object)  # noqa: E731
    q, v, a = (x[0] for x in random_states(tree, rng, 1))
    for problem, known in ((sparse.inverse_dynamics_problem(tree), dict(qdd=a)),
                           (sparse.forward_dynamics_problem(tree), dict(tau=3 * a))):
        st = problem.analyze()
        y = problem.values(**known)
        d = st.solve(q, v, y)
        do = st.solve(o(q), o(v), o(y))
        assert do.dtype == object and do.shape == d.shape
        # object arithmetic sums in the same order as the float kernel: equal to rounding
        assert rel_err(do.astype(float), d) < 1e-12


# --- example-robot-data robots -------------------------------------------------------------

@pytest.mark.parametrize("name,floating", robot_cases(), ids=[f"{n}-{'floating' if f else 'fixed'}"
                                                             for n, f in robot_cases()])
def test_robots_id_equals_rnea_and_fd_equals_aba(name, floating):
    model = robot(name, floating)
    rng = np.random.default_rng(7)
    st = sparse.inverse_dynamics_problem(model).analyze()
    q, v, a = random_states(model, rng, 5)
    F = rng.normal(size=(5, model.nbodies, 6))
    check_id(model, st, q[0], v[0], a[0])
    check_id(model, st, q, v, a, F)
    if fd_singular(model):
        # massless finger links: ABA fails numerically, the analysis refuses structurally, naming them
        with pytest.raises(StructurallySingularError, match=r"structurally singular.*cannot be determined"):
            sparse.forward_dynamics_problem(model).analyze()
        return
    st = sparse.forward_dynamics_problem(model).analyze()
    assert st.blocks[-1].ordering == "articulated"
    tau = sd.rnea(model, q, v, a)
    check_fd(model, st, q[0], v[0], tau[0])
    check_fd(model, st, q, v, tau, F)


# --- 1,000 random states per model: the static order never fails -------------------------------

@pytest.mark.parametrize("mid,model", all_models(), ids=[m for m, _ in all_models()])
def test_static_order_holds_at_1000_random_states(mid, model):
    """Residual ||A d + b|| / ||b|| < 1e-10 and agreement with RNEA / ABA at 1,000 random states,
    every block checked at run time (check="all") and no fallback triggered.

    Agreement with ABA is asked to 1e-9 relative, or to 100 eps cond(H) where the mass matrix is
    worse conditioned than 1e7 / 100 (two backward-stable solvers differ by about eps cond(H);
    iCub's floating base reaches cond(H) ~ 1e8)."""
    rng = np.random.default_rng(1000)
    n = 1000
    q, v, a = random_states(model, rng, n)
    tau = sd.rnea(model, q, v, a)
    problems = [(sparse.inverse_dynamics_problem(model), dict(qdd=a))]
    if not fd_singular(model):
        problems.append((sparse.forward_dynamics_problem(model), dict(tau=tau)))
    for problem, known in problems:
        st = problem.analyze()
        y = problem.values(**known)
        with warnings.catch_warnings():
            warnings.simplefilter("error", SparsePivotWarning)
            d, info = st.solve(q, v, y, check="all", info=True)
        assert not info.fallback.any()
        assert info.checked == len(st.blocks)
        assert np.min(info.pivot_ratio) > 1e-6
        # residual of the assembled system, state by state
        vals = np.moveaxis(st.values(q), -1, 0)
        b = st.rhs(q, v, y)
        r = b.copy()
        np.add.at(r.T, st.pattern.rows, vals * d.T[st.pattern.cols])
        res = np.max(np.abs(r), axis=1) / np.max(np.abs(b), axis=1)
        assert res.max() < 1e-10, (problem.name, res.max())
        out = st.unpack(d)
        if "qdd" in known:
            assert per_state_rel_err(out["tau"], tau).max() < TOL
        else:
            cond = np.linalg.cond(sd.crba(model, q))
            err = per_state_rel_err(out["qdd"], sd.aba(model, q, v, tau))
            assert np.all(err <= np.maximum(TOL, 100 * EPS * cond)), (err.max(), cond[np.argmax(err)])


# --- other measurement sets ------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 1, 2])
def test_hybrid_dynamics(k, rng):
    """Some accelerations known, the other joints' torques known: the articulated order still applies
    (locked joints pass IA_i on whole) and the solution agrees with ABA/RNEA."""
    from conftest import random_trees
    model = random_trees()[k]
    q, v, _ = (x[0] for x in random_states(model, rng, 1))
    tau = rng.normal(size=model.nv)
    qdd = sd.aba(model, q, v, tau)
    locked = [i for i in range(model.nbodies) if i % 3 == 1]
    free = [i for i in range(model.nbodies) if i % 3 != 1]
    problem = Problem(model, name="hybrid dynamics").known("fx").known("qdd", locked).known("tau", free)
    st = problem.analyze()
    assert unproven(st) == varying_dof_pivots(model, locked) and any(b.ordering == "articulated" for b in st.blocks)
    out = st.unpack(st.solve(q, v, problem.values(qdd=qdd, tau=tau)))
    assert rel_err(out["qdd"], qdd) < TOL and rel_err(out["tau"], tau) < TOL


def test_torque_sensor_in_a_frame_replaces_a_known_torque(rng):
    """A general measurement: joint k's torque is not given, but a sensor in a frame fixed on body k
    measures one component of the joint wrench in its own coordinates,
    y = e^T (sensor_X*_k f_k) with e chosen so that y = S_k^T f_k.  The block is not of articulated
    form, so the general order with run-time checks is used; the answer equals ABA."""
    model = sd.random_tree(6, joint_types=("revolute",), seed=11)
    k = 3
    L = sparse.Layout(model)
    sp = sd.spatial
    Xs = sp.compose(sp.rot(sp.rotx(0.3) @ sp.roty(-0.7)), sp.xlt([0.1, 0.2, 0.0]))
    Xs_star = sd.spatial.force_matrix(Xs)
    S = model.joints[k].motion_subspace()
    e = np.linalg.solve(Xs_star.T, S)                       # e^T Xs* = S^T
    sensor = Measurement("torque sensor", ((L.var("f", k), e.T @ Xs_star),), 1)
    others = [i for i in range(model.nbodies) if i != k]
    problem = Problem(model, name="fd with a torque sensor").known("fx").known("tau", others).measure(sensor)
    st = problem.analyze()
    assert not st.triangular
    q, v, _ = (x[0] for x in random_states(model, rng, 1))
    tau = rng.normal(size=model.nv)
    y = problem.values(tau=tau, **{"torque sensor": tau[model.v_slice(k)]})
    out = st.unpack(st.solve(q, v, y))
    assert rel_err(out["qdd"], sd.aba(model, q, v, tau)) < TOL
    assert rel_err(out["tau"], tau) < TOL


def test_measurement_with_a_state_dependent_bias(rng):
    """An "accelerometer" on body k measures y = S_k^T a_k + 0.5 S_k^T v_k (a bias from the state)
    instead of qdd_k being known; the inverse dynamics comes out the same."""
    model = sd.random_tree(7, branching=2.0, joint_types=("revolute", "prismatic"), seed=12)
    k = 4
    L = sparse.Layout(model)
    S = model.joints[k].motion_subspace()
    bias = lambda kin: 0.5 * (S.T @ kin.v[k][..., None])[..., 0]  # noqa: E731
    acc = Measurement("accelerometer", ((L.var("a", k), S.T),), 1, bias=bias)
    problem = Problem(model).known("fx").known("qdd", [i for i in range(model.nbodies) if i != k]).measure(acc)
    st = problem.analyze()
    q, v, a = random_states(model, rng, 3)
    A, F, tau = rnea_intermediates(model, q, v, a)
    vk = sd.body_velocities(model, q, v)[..., k, :]
    y = problem.values(qdd=a, accelerometer=(A[..., k, :] @ S) + 0.5 * (vk @ S))
    out = st.unpack(st.solve(q, v, y))
    assert rel_err(out["tau"], tau) < TOL and rel_err(out["qdd"], a) < TOL


# --- the runtime check and its fallback -----------------------------------------------------------

def test_near_singular_static_pivot_falls_back_with_a_warning(rng):
    """COLAMD's static order (SuperLU's pivots at one generic state) puts configuration-dependent
    entries on the diagonal.  Bisection finds a configuration where one of them is ~1e-13 of its
    typical size: the unchecked solve is wrong there, the checked one warns, re-solves that state
    with partial pivoting and agrees with ABA; the other states of the batch keep the sparse answer."""
    model = sd.serial_chain(4)
    st = sparse.forward_dynamics_problem(model).analyze(ordering="colamd")
    assert not st.proven
    found = near_singular_state(st, rng)
    assert found is not None
    q_bad, hit = found
    assert hit["proof"] == ""
    Q = np.stack([model.random_configuration(rng), q_bad, model.random_configuration(rng)])
    V = rng.normal(size=(3, model.nv))
    T = rng.normal(size=(3, model.nv))
    ref = sd.aba(model, Q, V, T)
    y = st.problem.values(tau=T)
    unchecked = st.unpack(st.solve(Q, V, y, check="none"))["qdd"]
    assert rel_err(unchecked[1], ref[1]) > 1e-6              # garbage without the check
    with pytest.warns(SparsePivotWarning, match=r"colamd.*1 of 3 states.*partial pivoting"):
        d, info = st.solve(Q, V, y, info=True)
    assert info.fallback.tolist() == [False, True, False]
    assert rel_err(st.unpack(d)["qdd"], ref) < TOL
    # the articulated order has no such state: its pivots there are fine
    art = sparse.forward_dynamics_problem(model).analyze()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparsePivotWarning)
        d, info = art.solve(Q, V, y, check="all", info=True)
    assert not info.fallback.any() and rel_err(art.unpack(d)["qdd"], ref) < TOL


def test_bisection_along_paths_finds_no_vanishing_pivot_of_the_articulated_order():
    """States between random configurations: along 8 paths per model, no pivot of the articulated order
    changes sign (so none vanishes), the constant ones never move and the S^T IA S ones stay
    positive; the same hunt on COLAMD's order does find vanishing pivots."""
    rng = np.random.default_rng(99)
    from conftest import random_trees
    models = random_trees() + [robot("panda", False), robot("anymal_c", True)]
    colamd_hits = 0
    for model in models:
        st = sparse.forward_dynamics_problem(model).analyze()
        assert unproven(st) == varying_dof_pivots(model)        # S(q) loses rank somewhere: checked
        proofs = np.array(st.pivot_proofs())
        for _ in range(8):
            q0, q1 = model.random_configuration(rng), model.random_configuration(rng)
            assert st.hunt_vanishing_pivots(q0, q1, samples=33) == []
            dq = sd.difference(model, q0, q1)
            P = st.pivots(sd.integrate(model, q0, np.linspace(0, 1, 33)[:, None] * dq))
            const = P[:, proofs == "constant"]
            assert np.all(const == const[0]) and np.all(const != 0)
            assert np.all(P[:, proofs == "articulated"] > 0)
            assert np.all(P[:, proofs == ""] > 0)        # D_i of an S(q) is positive but at its singular q
        other = sparse.forward_dynamics_problem(model).analyze(ordering="colamd")
        q0, q1 = model.random_configuration(rng), model.random_configuration(rng)
        colamd_hits += len(other.hunt_vanishing_pivots(q0, q1, samples=33))
    assert colamd_hits > 0


# --- argument checking ------------------------------------------------------------------------

def test_bad_arguments_are_named(rng):
    model = sd.serial_chain(3)
    st = sparse.inverse_dynamics_problem(model).analyze()
    q, v, a = (x[0] for x in random_states(model, rng, 1))
    with pytest.raises(ValueError, match=r"\bv: expected shape \(\.\.\., 3\)"):
        st.solve(q, v[:2], st.problem.values(qdd=a))
    with pytest.raises(ValueError, match=r"y: expected shape \(\.\.\., 21\)"):
        st.solve(q, v, np.zeros(5))
    with pytest.raises(TypeError, match="problem.values"):
        st.solve(q, v)
    with pytest.raises(ValueError, match="check"):
        st.solve(q, v, st.problem.values(qdd=a), check="sometimes")
    with pytest.raises(TypeError, match=r"values for 'qdd' are needed"):
        st.problem.values(tau=a)
    fd = sparse.forward_dynamics_problem(model).analyze()
    with pytest.raises(ValueError, match="not inverse dynamics"):
        sparse.sparse_inverse_dynamics(model, q, v, a, structure=fd)
    with pytest.raises(ValueError, match="analyzed for model"):
        sparse.sparse_inverse_dynamics(sd.serial_chain(3), q, v, a, structure=st)


# --- several right-hand sides at one state ---------------------------------------------------------

def test_several_right_hand_sides_factor_once_per_state(tree, rng, monkeypatch):
    """q (B, 1, nq) with y (B, k, ny): each column equals its own solve (ABA), and the factorization
    runs on the configuration batch (B, 1), not on (B, k)."""
    st = sparse.forward_dynamics_problem(tree).analyze()
    Q, V, _ = random_states(tree, rng, 3)
    T = rng.normal(size=(3, 4, tree.nv))
    shapes = []
    real = sparse.solver.factor_blocks
    monkeypatch.setattr(sparse.solver, "factor_blocks", lambda model, blocks, W, batch, Xup, S, mon=None: (
        shapes.append(W.shape[1:]), real(model, blocks, W, batch, Xup, S, mon)))
    d = st.solve(Q[:, None, :], V[:, None, :], st.problem.values(tau=T))
    assert shapes == [(3, 1)]
    ref = sd.aba(tree, np.repeat(Q[:, None], 4, 1), np.repeat(V[:, None], 4, 1), T)
    assert st.unpack(d)["qdd"].shape == (3, 4, tree.nv)
    assert rel_err(st.unpack(d)["qdd"], ref) < TOL


def test_several_right_hand_sides_fall_back_per_state(rng):
    """A near-singular static pivot at one configuration re-solves all of its right-hand sides."""
    model = sd.serial_chain(4)
    st = sparse.forward_dynamics_problem(model).analyze(ordering="colamd")
    q_bad, _ = near_singular_state(st, rng)
    Q = np.stack([model.random_configuration(rng), q_bad])
    V = rng.normal(size=(2, model.nv))
    T = rng.normal(size=(2, 3, model.nv))
    ref = sd.aba(model, np.repeat(Q[:, None], 3, 1), np.repeat(V[:, None], 3, 1), T)
    with pytest.warns(SparsePivotWarning, match=r"3 of 6 states"):
        d, info = st.solve(Q[:, None, :], V[:, None, :], st.problem.values(tau=T), info=True)
    assert info.fallback.tolist() == [[False] * 3, [True] * 3]
    assert rel_err(st.unpack(d)["qdd"], ref) < TOL
