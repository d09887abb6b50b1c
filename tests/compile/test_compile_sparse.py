"""sparsedyn.compile of sparse problems, structures, estimation problems and estimators.

The compiled ``solve`` is the traced NumPy online phase: it equals ``Structure.solve`` /
``Estimator.solve`` within the rounding bound of a backward-stable solve at each state
(``conftest.solve_bound``: Skeel's condition number of the state's system), single state and
batched; states the NumPy path would flag are re-solved
by it (warning included); without a compiler everything answers through NumPy;
two problems on one model never share a library.
"""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, near_singular_state, random_trees, rel_err, rounding_bound, solve_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn import sparse
from sparsedyn.codegen import CompilerNotFoundWarning
from sparsedyn.estimation import CompiledEstimator
from sparsedyn.sparse import CompiledStructure
from sparsedyn.sparse.checks import check_count
from sparsedyn.estimation import StateSingularError
from sparsedyn.estimation.casestudy import case_problems, consistent_state, sample_noise
from sparsedyn.sparse import SparsePivotWarning

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(params=range(4), ids=["chain", "binary", "floating", "floating-bf3"], scope="module")
def tree(request):
    """The suite's random trees (every joint type, those whose S depends on q included)."""
    return random_trees()[request.param]


def per_state(x, y):
    x, y = np.asarray(x, float).reshape(len(x), -1), np.asarray(y, float).reshape(len(y), -1)
    return np.max(np.abs(x - y), axis=1) / np.maximum(1.0, np.max(np.abs(y), axis=1))


def numpy_flags_every_state(est):
    """``est._online`` whose sparse checks flag every state (so ``Estimator.solve`` re-solves densely)."""
    online = est._online

    def flagged(*args, **kw):
        d, chi2, core, monitor = online(*args, **kw)
        monitor.bad[...] = True
        return d, chi2, core, monitor
    return flagged


def states(model, rng, n):
    q = np.stack([model.random_configuration(rng) for _ in range(n)])
    return q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


def structure_bound(st, q, d):
    """Per-state bound (B,) on compiled - NumPy for ``Structure.solve`` at ``q`` (B, nq), ``d`` (B, n)."""
    A = np.stack([st.matrix(qi).toarray() for qi in np.reshape(q, (-1, q.shape[-1]))])
    return solve_bound(A, np.reshape(d, (len(A), -1))).reshape(np.shape(d)[:-1])


def check_structure(st, k, q, v, y):
    """Compiled == NumPy: batch, every single state, and several right-hand sides per configuration."""
    ref = st.solve(q, v, y)
    bound = structure_bound(st, q, ref)
    assert k.solve(q, v, y).shape == ref.shape
    assert np.all(per_state(k.solve(q, v, y), ref) <= bound)
    for i in range(min(3, len(q))):
        d = k.solve(q[i], v[i], y[i])
        assert d.shape == (st.n,)
        assert rel_err(d, ref[i]) <= bound[i]
    Y = np.stack([y, y[::-1]], 1)                                  # (B, 2, ny) at (B, 1, nq)
    ref2 = st.solve(q[:, None], v[:, None], Y)
    bound2 = np.stack([bound, structure_bound(st, q, ref2[:, 1])], 1)
    assert np.all(per_state(k.solve(q[:, None], v[:, None], Y).reshape(-1, st.n), ref2.reshape(-1, st.n))
                  <= bound2.reshape(-1))


@pytest.mark.parametrize("kind", ["id", "fd"])
def test_compiled_sparse_dynamics_equals_numpy(tree, kind, rng):
    make = sparse.inverse_dynamics_problem if kind == "id" else sparse.forward_dynamics_problem
    problem = make(tree)
    k = sd.compile(problem)                                        # a Problem: analysed here
    assert isinstance(k, CompiledStructure) and k.compiled
    st = k.structure
    q, v, a = states(tree, rng, 5)
    y = problem.values(qdd=a) if kind == "id" else problem.values(tau=a)
    check_structure(st, k, q, v, y)
    out = st.unpack(k.solve(q, v, y))
    want = sd.rnea(tree, q, v, a) if kind == "id" else sd.aba(tree, q, v, a)
    assert rel_err(out["tau" if kind == "id" else "qdd"], want) < 1e-9
    # a batch long enough for the vectorised library
    q, v, a = states(tree, rng, 4 * k.lanes + 3)
    y = problem.values(qdd=a) if kind == "id" else problem.values(tau=a)
    ref = st.solve(q, v, y)
    assert np.all(per_state(k.solve(q, v, y), ref) <= structure_bound(st, q, ref))
    assert k.built.get("batch") is not None
    # flops from the IR next to the tracer's count (same kernels, different folding rules)
    f = k.flops()
    assert f["total"] > 0
    # proven pivots: no check values; the D_i pivots of a joint with an S(q) are checked
    assert st.proven == (check_count(st) == 0) == (k.flops("result") == f)
    assert st.proven == (kind == "id" or all(j.constant_subspace for j in tree.joints))


def test_compiled_robot_and_a_structure(rng):
    from erd import robot_path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robot_path("anymal_c"), floating_base=True)
    for make, key in ((sparse.inverse_dynamics_problem, "qdd"), (sparse.forward_dynamics_problem, "tau")):
        st = make(model).analyze()
        k = sd.compile(st)                                          # a Structure
        q, v, a = states(model, rng, 6)
        y = st.problem.values(**{key: a})
        check_structure(st, k, q, v, y)
        # the other options answer through the NumPy path
        g = np.array([0.0, 0.0, -1.62])
        assert rel_err(k.solve(q, v, y, gravity=g), st.solve(q, v, y, gravity=g)) == 0.0
        d, info = k.solve(q, v, y, info=True)
        ref = st.solve(q, v, y)
        bound = structure_bound(st, q, ref)
        assert not info.fallback.any() and np.all(per_state(d, ref) <= bound)
        assert np.all(per_state(k.solve(q, v, y, check="all"), st.solve(q, v, y, check="all")) <= bound)
        assert np.all(per_state(k.solve(q, v, y, check="none"), st.solve(q, v, y, check="none")) <= bound)


def test_two_problems_on_one_model_do_not_share_a_library(rng):
    model = random_trees(constant_subspace_types())[1]
    st_id = sparse.inverse_dynamics_problem(model).analyze()
    st_fd = sparse.forward_dynamics_problem(model).analyze()
    st_col = sparse.forward_dynamics_problem(model).analyze(ordering="colamd")
    ks = [sd.compile(s) for s in (st_id, st_fd, st_col)]
    libs = {k.compiled_kernels._libs[("main", "single")].lib._name for k in ks}
    assert len(libs) == 3
    q, v, a = states(model, rng, 3)
    for s, k, y in zip((st_id, st_fd, st_col), ks, (st_id.problem.values(qdd=a), st_fd.problem.values(tau=a),
                                                   st_col.problem.values(tau=a))):
        assert rel_err(k.solve(q, v, y), s.solve(q, v, y)) < 1e-9
    # compiling again loads the same library from the manifest, without tracing
    again = sd.compile(st_fd)
    assert not again.built["single"] and again.compiled_kernels._libs[("main", "single")].lib._name == \
        ks[1].compiled_kernels._libs[("main", "single")].lib._name


def test_measurement_bias_keys_the_manifest(rng):
    """A ``bias`` written in sparsedyn (an accelerometer's) is part of the manifest key; one defined
    elsewhere (its globals are unknown) disables the manifest, and the library, keyed by the IR, is
    still shared.  Either way the compiled solve equals the NumPy one (here with unproven pivots)."""
    from sparsedyn.model import sensors
    from sparsedyn.sparse.fingerprint import structure_fingerprint
    from sparsedyn.estimation.problem import _Entry
    model = sd.serial_chain(5)
    layout = sparse.Layout(model)
    acc = sensors.Accelerometer("acc", model.body_names[-1])
    terms, size, bias = acc.rows(model, layout)
    keyed = _Entry(acc, terms, size, bias, None).measurement([0], "acc x")
    user = sparse.Measurement("acc x", keyed.terms, 1, lambda kin: bias(kin)[..., :1])
    base = sparse.Problem(model, layout=layout).known("tau", list(range(model.nbodies - 1))).known("fx")
    other = sensors.Accelerometer("acc", model.body_names[-2])
    t2, s2, b2 = other.rows(model, layout)
    keyed2 = _Entry(other, t2, s2, b2, None).measurement([0], "acc x")
    fps = [structure_fingerprint(base.measure(m).analyze()) for m in (keyed, user, keyed2)]
    assert fps[0] is not None and fps[1] is None and fps[2] is not None and fps[0] != fps[2]
    libs = []
    for meas in (keyed, user):
        st = base.measure(meas).analyze()
        assert not st.proven
        k = sd.compile(st)
        q, v, a = states(model, rng, 6)
        y = st.problem.values(tau=a, **{"acc x": rng.normal(size=(6, 1))})
        ref = st.solve(q, v, y)
        assert np.all(per_state(k.solve(q, v, y), ref) <= structure_bound(st, q, ref))
        libs.append(k.compiled_kernels._libs[("main", "single")].lib._name)
    assert libs[0] == libs[1]


def test_names_do_not_reach_the_source(rng):
    from test_compile_names import EVIL, hostile_model
    from sparsedyn.codegen.cemit import emit_program, emit_unit
    from sparsedyn.codegen.trace import trace
    model = hostile_model()
    k = sd.compile(sparse.forward_dynamics_problem(model))
    src = emit_unit(emit_program(trace(model, k.compiled_kernels._specs[k.kernel_name]), k.kernel_name, "single"))
    for bad in ("MARKER", "*/ int", "\\slash", "stdio", "naïve", "model \"") + tuple(EVIL[:3]):
        assert bad not in src
    assert src.isascii()
    q, v, a = states(model, rng, 2)
    y = k.problem.values(tau=a)
    ref = k.structure.solve(q, v, y)
    assert np.all(per_state(k.solve(q, v, y), ref) <= structure_bound(k.structure, q, ref))


def test_near_singular_static_pivot_gives_the_numpy_answer_with_its_warning(rng):
    model = sd.serial_chain(4)
    st = sparse.forward_dynamics_problem(model).analyze(ordering="colamd")
    assert not st.proven
    k = sd.compile(st)
    assert check_count(st) > 0 and k.flops("checks")["total"] > 0
    found = near_singular_state(st, rng)
    assert found is not None
    q_bad = found[0]
    Q = np.stack([model.random_configuration(rng), q_bad, model.random_configuration(rng)])
    V, T = rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    y = st.problem.values(tau=T)
    assert rel_err(st.unpack(st.solve(Q, V, y, check="none"))["qdd"][1], sd.aba(model, Q[1], V[1], T[1])) > 1e-6
    with pytest.warns(SparsePivotWarning, match=r"colamd.*1 of 3 states.*partial pivoting"):
        ref = st.solve(Q, V, y)
    out = k.compiled_kernels.run(k.kernel_name, Q, V, y)
    assert k.compiled_kernels.failed(k.kernel_name, out, (3,)).tolist() == [False, True, False]   # flagged
    with pytest.warns(SparsePivotWarning, match=r"colamd.*partial pivoting"):
        d = k.solve(Q, V, y)
    bound = structure_bound(st, Q, ref)
    assert np.all(per_state(d, ref) <= bound)
    assert rel_err(st.unpack(d)["qdd"], sd.aba(model, Q, V, T)) < 1e-9
    with pytest.warns(SparsePivotWarning):
        d1 = k.solve(Q[1], V[1], y[1])
    assert rel_err(d1, ref[1]) <= bound[1]
    # unchecked, the compiled kernel returns the raw static-order answer, as NumPy does
    assert rel_err(k.solve(Q, V, y, check="none"), st.solve(Q, V, y, check="none")) < 1e-6


# --- estimators: the humanoid case study ---------------------------------------------

CASES = ("eq23-nz", "ankle-ft", "redundant")


@pytest.fixture(scope="module")
def humanoid_cases():
    from sparsedyn.model.builders import humanoid
    model = humanoid()
    probs = case_problems(model)
    return model, {name: probs[name] for name in CASES}


def estimator_bound(problem, q, d):
    """Per-state rounding bound (B,) of a solve with the full system (Newton-Euler and every sensor row;
    for least squares that is the square system at the noise-free answer) at ``q`` (B, nq)."""
    from sparsedyn.sparse.assembly import SystemPattern
    pat = SystemPattern(problem.sparse_problem())
    A = np.stack([problem._dense(pat, qi) for qi in q])
    if A.shape[-2] != A.shape[-1]:                                 # over-determined: normal equations' size
        return np.stack([solve_bound(Ai.T @ Ai, di) for Ai, di in zip(A, d)])
    return solve_bound(A, d)


def near_standing(model, problem, rng, n):
    from sparsedyn.model.builders import humanoid_standing_configuration
    q0 = humanoid_standing_configuration()
    Q = np.stack([sd.integrate(model, q0, 0.2 * rng.normal(size=model.nv)) for _ in range(n)])
    return consistent_state(problem, rng, q=Q, batch=(n,))


@pytest.mark.parametrize("name", CASES)
def test_compiled_estimator_equals_numpy_and_truth(humanoid_cases, name):
    model, probs = humanoid_cases
    problem = probs[name]
    rng = np.random.default_rng(7)
    est = problem.analyze()
    k = sd.compile(est) if name != "ankle-ft" else sd.compile(problem)     # an Estimator / a problem
    assert isinstance(k, CompiledEstimator) and k.compiled
    assert k.square == (name != "redundant")
    n = 12
    q, qd, qdd, w = near_standing(model, problem, rng, n)
    y, truth = problem.measurements(q, qd, qdd, w)                   # noise-free: the truth is the exact answer
    e0, e1 = est.solve(q, qd, y), k.solve(q, qd, y)
    assert e1.d.shape == e0.d.shape and e1.chi2.shape == (n,) and e1.dof == e0.dof
    bound = estimator_bound(problem, q, e0.d)                   # rounding bound of a solve, per state
    own = per_state(e0.d, truth["d"])                              # the NumPy path's own error per state
    assert np.all(own <= bound)
    assert np.all(per_state(e1.d, e0.d) <= bound)
    assert np.all(per_state(e1.d, truth["d"]) <= 2 * bound)
    for c in problem.contacts:
        assert rel_err(e1.contacts[c.name], truth["contacts"][c.name]) < 1e-8
    assert rel_err(e1.tau, truth["tau"]) < 1e-8
    for i in (0, 5):                                               # single states
        s = k.solve(q[i], qd[i], y[i])
        assert s.d.shape == (est.n,) and np.shape(s.chi2) == ()
        assert rel_err(s.d, e0.d[i]) <= bound[i]
    if name == "redundant":                                        # noisy: weighted least squares
        yn = y + sample_noise(problem, rng, (n,))
        e0, e1 = est.solve(q, qd, yn), k.solve(q, qd, yn)
        assert np.all(per_state(e1.d, e0.d) < 1e-10)
        assert rel_err(e1.chi2, e0.chi2) < 1e-8 and np.all(e1.chi2 > 0)
        s = k.solve(q[3], qd[3], yn[3])
        assert rel_err(s.d, e0.d[3]) < 1e-10 and abs(s.chi2 - e0.chi2[3]) <= 1e-8 * e0.chi2[3]
        # covariance and gravity answer through the NumPy path
        c1, c0 = k.solve(q[:2], qd[:2], yn[:2], covariance=True), est.solve(q[:2], qd[:2], yn[:2], covariance=True)
        assert rel_err(c1.cov_d, c0.cov_d) == 0.0
    # a batch long enough for the vectorised library, random (not near-standing) states
    q, qd, qdd, w = consistent_state(problem, rng, batch=(40,))
    y, truth = problem.measurements(q, qd, qdd, w)
    e0, e1 = est.solve(q, qd, y), k.solve(q, qd, y)
    bound = estimator_bound(problem, q, e0.d)
    assert np.all(per_state(e0.d, truth["d"]) <= bound)
    assert np.all(per_state(e1.d, e0.d) <= bound)
    empty = k.solve(q[:0], qd[:0], y[:0])                          # an empty batch, as NumPy
    assert empty.d.shape == (0, est.n) == est.solve(q[:0], qd[:0], y[:0]).d.shape
    # flops from the IR: the result's (the solve) and the run-time checks'
    f, r = k.flops(), k.flops("result")
    assert r["total"] > 0 and f["total"] == r["total"] + k.flops("checks")["total"]


def test_estimator_states_flagged_by_the_kernel_go_to_numpy(humanoid_cases):
    """Only the states the kernel's check values flag are re-solved by ``Estimator.solve``; an error
    there (StateSingularError) names the caller's batch index.  Invalid input fails as in NumPy."""
    model, probs = humanoid_cases
    problem = probs["ankle-ft"]
    est = problem.analyze()
    k = sd.compile(est)
    rng = np.random.default_rng(3)
    q, qd, qdd, w = near_standing(model, problem, rng, 4)
    y, _ = problem.measurements(q, qd, qdd, w)
    ynan = y.copy()
    ynan[2, 0] = np.nan
    for solver in (k, est):
        with pytest.raises(ValueError, match="NaN"):
            solver.solve(q, qd, ynan)
    ck = k.compiled_kernels
    out = ck.run(k.kernel_name, q, qd, y)
    assert not ck.failed(k.kernel_name, out, (4,)).any()
    calls = []
    solve = est.solve
    ck.failed = lambda name, outs, batch: np.arange(batch[0]) == 1        # pretend the kernel flags state 1
    est.solve = lambda *a, **kw: calls.append(len(a[0])) or solve(*a, **kw)
    try:
        e1 = k.solve(q, qd, y)
        assert calls == [1]
        assert rel_err(e1.d, solve(q, qd, y).d) < 1e-11
        # a state that is singular for the NumPy path too: its error names the caller's index
        ck.failed = lambda name, outs, batch: np.arange(batch[0]) == 2
        est._online = numpy_flags_every_state(est)

        def singular(q, qd, y, g, idx=(), want_cov=False, system=None):
            raise StateSingularError(f"{problem.name}: singular at the state with batch index {idx}", [idx])
        est._dense_state = singular
        with pytest.raises(StateSingularError, match=r"batch index \(2,\)") as info:
            k.solve(q, qd, y)
        assert info.value.states == ((2,),)
    finally:
        del ck.failed, est.solve, est._online, est._dense_state


def test_without_a_compiler_everything_answers_through_numpy(tmp_path, monkeypatch, humanoid_cases, rng):
    import sparsedyn.codegen.runtime as runtime
    monkeypatch.setenv("SPARSEDYN_CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(runtime, "_warned_no_compiler", set())
    model = random_trees(constant_subspace_types())[2]
    st = sparse.forward_dynamics_problem(model).analyze()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = sd.compile(st)
        ke = sd.compile(humanoid_cases[1]["redundant"])
    ours = [w for w in caught if issubclass(w.category, CompilerNotFoundWarning)]
    assert len(ours) == 1 and "NumPy" in str(ours[0].message)
    assert not k.compiled and not ke.compiled
    q, v, a = states(model, rng, 3)
    y = st.problem.values(tau=a)
    assert rel_err(k.solve(q, v, y), st.solve(q, v, y)) == 0.0
    assert k.flops()["total"] > 0                                   # still counted from the IR
    problem = humanoid_cases[1]["redundant"]
    qh, qdh, qddh, w = near_standing(humanoid_cases[0], problem, rng, 2)
    yh, _ = problem.measurements(qh, qdh, qddh, w)
    assert rel_err(ke.solve(qh, qdh, yh).d, ke.estimator.solve(qh, qdh, yh).d) == 0.0


def test_compile_rejects_kernels_for_problems():
    with pytest.raises(TypeError, match="kernels"):
        sd.compile(sparse.inverse_dynamics_problem(sd.serial_chain(2)), kernels=("rnea",))


# --- one state: the C fast path of CompiledEstimator.solve ----------------------------------

def one_state_cases():
    """Estimation problems whose compiled one-state solve is compared field by field with NumPy's:
    iCub with the six force/torque sensors of its URDF on fixed joints and both soles in contact
    (least squares, k = 6), and random floating-base trees: every joint type, one contact and an
    unknown base acceleration (square); one contact and noisy joint torques, where the exact rows
    alone fix every unknown (least squares with k = 0)."""
    from pathlib import Path

    from erd import robots_dir
    from sparsedyn.estimation import EstimationProblem, problem_from_file
    from sparsedyn.model.sensors import JointTorque
    icub = sd.load_urdf(robots_dir() / "icub_description/robots/icub.urdf", floating_base=True)
    toml = Path(__file__).resolve().parents[2] / "examples" / "icub_feet_contacts.toml"
    trees = random_trees(constant_subspace_types())

    def leaf(m):
        return next(m.body_names[i] for i in range(m.nbodies) if i not in m.parent)
    t3 = trees[3]
    actuated = [t3.joint_names[i] for i in range(t3.nbodies) if t3.joints[i].nv and t3.joints[i].type != "free"]
    return {"icub": problem_from_file(icub, toml),
            "tree-square": EstimationProblem(trees[2], contacts=[leaf(trees[2])],
                                             unknown_accelerations=[trees[2].joint_names[0]]),
            "tree-k0": EstimationProblem(t3, sensors=[JointTorque("jt", actuated, covariance=0.1)],
                                         contacts=[leaf(t3)])}


@pytest.fixture(scope="module")
def one_state(compile_cache):
    out = {}
    for name, problem in one_state_cases().items():
        est = problem.analyze()
        out[name] = (problem, est, sd.compile(est))
    return out


def assert_estimates_agree(problem, est, e1, e0, q):
    """Every field of the compiled Estimate ``e1`` equals the NumPy one ``e0`` (one state at ``q``) within
    the rounding bound of a solve (``estimator_bound``), carried through the linear maps that make the
    other fields from ``d``; the blocks, the contact wrenches and the named view of ``e1`` are those of
    its own ``d`` by their definitions."""
    from sparsedyn.model.spatial import apply_force, force_matrix
    model = problem.model
    assert e1.d.shape == e0.d.shape == (est.n,) and e1.dof == e0.dof and e1.cov_d is None is e0.cov_d
    dabs = estimator_bound(problem, q[None], e0.d[None])[0] * max(1.0, np.max(np.abs(e0.d)))
    assert np.max(np.abs(e1.d - e0.d)) <= dabs
    parts = problem.layout.unpack(e1.d)                            # the blocks: views of d, exactly
    for kind in ("a", "f", "tau", "fx", "qdd"):
        assert np.array_equal(getattr(e1, kind), parts[kind]) and getattr(e1, kind).shape == getattr(e0, kind).shape
    tol = {}
    for c in problem.contacts:                                     # X* fx of the contact's body
        X = problem.contact_X[c.name]
        w = apply_force(X, e1.fx[problem.contact_body[c.name]])
        XF = np.abs(force_matrix(X)).sum(1).max()                 # its infinity norm
        assert np.max(np.abs(e1.contacts[c.name] - w)) <= rounding_bound(6, XF) * np.max(np.abs(e1.fx))
        tol[f"contact[{c.name}]"] = XF * dabs + rounding_bound(6, XF) * np.max(np.abs(e0.fx))
    n0, n1 = e0.named(), e1.named()
    assert list(n1) == list(n0)
    for key, x in n1.items():
        kind, joint = key[:-1].split("[")
        if kind in ("tau", "qdd"):
            assert np.array_equal(x, getattr(e1, kind)[model.v_slice(model.joint(joint))])
        elif kind == "f":
            assert np.array_equal(x, e1.f[model.joint(joint)])
        else:
            assert np.array_equal(x, e1.contacts[joint])
        assert x.shape == n0[key].shape and np.max(np.abs(x - n0[key])) <= tol.get(key, dabs)
    # chi2: the weighted soft residual; d moved by at most dabs per entry moves the residual r by at most
    # |M_soft|_2 sqrt(n) dabs (plus its own rounding), so chi2 = |W^1/2 r|^2 by at most 2 |W^1/2 r| e + e^2
    assert np.shape(e1.chi2) == np.shape(e0.chi2) == ()
    if est.square:
        assert e1.chi2 == e0.chi2 == 0
    else:
        lw, M = np.linalg.eigvalsh(est.W)[-1], est.M_soft
        dr = np.linalg.norm(M, 2) * np.sqrt(est.n) * dabs + rounding_bound(est.n, np.abs(M).sum(1).max()) * (
            1 + np.max(np.abs(e0.d)))
        e = np.sqrt(lw) * dr
        assert abs(e1.chi2 - e0.chi2) <= 2 * np.sqrt(e0.chi2) * e + e * e


@pytest.mark.parametrize("name", ["icub", "tree-square", "tree-k0"])
def test_one_state_estimate_equals_numpy_field_by_field(one_state, name):
    """One state goes through the C fast path (the NumPy ``Estimator.solve`` is not called) and every
    field of its Estimate equals NumPy's; a batch still equals it state by state."""
    problem, est, k = one_state[name]
    assert isinstance(k, CompiledEstimator) and k.compiled and k.square == (name == "tree-square")
    assert (est.k == 6) if name == "icub" else name == "tree-square" or est.k == 0
    from sparsedyn.codegen.runtime import _fast_module
    assert k.fastcall == (_fast_module(k.compiled_kernels._compiler) is not None)   # C fast path where it builds
    rng = np.random.default_rng(11)
    q, qd, qdd, w = consistent_state(problem, rng, batch=(3,))
    y, truth = problem.measurements(q, qd, qdd, w)
    if not est.square:
        y = y + sample_noise(problem, rng, (3,))
    e0 = [est.solve(q[i], qd[i], y[i]) for i in range(3)]
    numpy_solve, est.solve = est.solve, None                      # the fast path must not need it
    try:
        e1 = [k.solve(q[i], qd[i], y[i]) for i in range(3)]
    finally:
        est.solve = numpy_solve
    for i in range(3):
        assert_estimates_agree(problem, est, e1[i], e0[i], q[i])
    eb = k.solve(q, qd, y)                                         # the batch path, same fields
    for i in range(3):
        assert np.max(np.abs(eb.d[i] - e0[i].d)) <= estimator_bound(problem, q[i][None], e0[i].d[None])[0] * max(
            1.0, np.max(np.abs(e0[i].d)))
        assert list(eb.named()) == list(e0[i].named())
        for c in problem.contacts:
            assert eb.contacts[c.name].shape == (3, 6)


def test_one_state_bad_input_fails_as_numpy(one_state):
    """The fast path's input checks are NumPy's: NaN or infinite values, wrong shapes, a quaternion
    that is not of unit norm give the NumPy path's error (same type, same message naming the argument,
    the sensor or the joint); input it does not take (lists, integers, a non-contiguous array, a
    quaternion off unit norm within the tolerance) gives NumPy's answer."""
    problem, est, k = one_state["tree-square"]
    model = problem.model
    rng = np.random.default_rng(5)
    q, qd, qdd, w = consistent_state(problem, rng)
    y, _ = problem.measurements(q, qd, qdd, w)
    quats = [model.q_slice(i).stop - 4 for i in range(model.nbodies) if model.joints[i].type in ("free", "spherical")]
    assert len(quats) >= 3                                         # the free base and spherical joints
    qi = quats[0]
    bad = []
    for arg, i, x in ((0, 3, np.nan), (1, 0, np.inf), (2, 5, np.nan), (2, 0, -np.inf)):
        args = [q.copy(), qd.copy(), y.copy()]
        args[arg][i] = x
        bad.append(args)
    for j, scale in zip(quats, (1 + 1e-4, 0.0, 1 - 1e-5)):
        qq = q.copy()
        qq[j:j + 4] *= scale
        bad.append([qq, qd, y])
    bad += [[q[:-1], qd, y], [q, qd[None, :2], y], [q, qd, y[:-1]], [q, qd, None], [q, qd, "y"]]
    for args in bad:
        with pytest.raises(Exception) as ref:
            est.solve(*args)
        with pytest.raises(type(ref.value)) as got:
            k.solve(*args)
        assert str(got.value) == str(ref.value)
    q_near = q.copy()
    q_near[qi:qi + 4] *= 1 + 2e-6                                  # | |quat|^2 - 1 | = 4e-6 <= QUAT_TOL
    y2 = np.stack([y, y], 1)[:, 0]                                 # a strided view
    assert not y2.flags.c_contiguous
    for args in ([list(q), list(qd), list(y)], [q_near, qd, y], [q, qd, y2], [q, qd.astype(np.float32), y]):
        e0, e1 = est.solve(*args), k.solve(*args)
        bound = estimator_bound(problem, np.asarray(args[0], float)[None], e0.d[None])[0]
        assert rel_err(e1.d, e0.d) <= bound
    # a compiled structure's one-state solve checks its input the same way
    st = sparse.forward_dynamics_problem(model).analyze()
    ks = sd.compile(st)
    tau = rng.normal(size=model.nv)
    yst = st.problem.values(tau=tau)
    ref = st.solve(q, qd, yst)
    assert rel_err(ks.solve(q, qd, yst), ref) <= structure_bound(st, q[None], ref[None])[0]
    qq = q.copy()
    qq[quats[1]:quats[1] + 4] *= 1.01
    for args in ([qq, qd, yst], [q, qd, np.full_like(yst, np.nan)], [q, qd, None], [q, qd[:-1], yst]):
        with pytest.raises(Exception) as ref:
            st.solve(*args)
        with pytest.raises(type(ref.value)) as got:
            ks.solve(*args)
        assert str(got.value) == str(ref.value)
    # a problem the sensors cannot determine is refused as by NumPy (both soles of a tree, nothing else)
    from sparsedyn.estimation import EstimationProblem, IllPosedError
    t3 = random_trees(constant_subspace_types())[3]
    leaves = [t3.body_names[i] for i in range(t3.nbodies) if i not in t3.parent][:2]
    with pytest.raises(IllPosedError, match="ILL-POSED"):
        sd.compile(EstimationProblem(t3, contacts=leaves))


def test_one_state_flagged_or_singular_goes_to_numpy(one_state, monkeypatch):
    """A state the kernel's check values flag is re-solved by ``Estimator.solve`` (its answer, its
    warnings and its StateSingularError); a state that passes never reaches it."""
    problem, est, k = one_state["icub"]
    rng = np.random.default_rng(9)
    q, qd, qdd, w = consistent_state(problem, rng)
    y, _ = problem.measurements(q, qd, qdd, w)
    calls, solve = [], est.solve
    e0 = solve(q, qd, y)
    with monkeypatch.context() as mp:
        mp.setattr(est, "solve", lambda *a, **kw: calls.append(np.shape(a[0])) or solve(*a, **kw))
        e1 = k.solve(q, qd, y)
        assert calls == []
        ck = k.compiled_kernels
        mp.setattr(ck, "passed", lambda name, outs: False)         # pretend the kernel flags the state
        mp.setattr(ck, "failed", lambda name, outs, batch: np.ones(batch, bool))   # (the path without fast calls)
        e2 = k.solve(q, qd, y)
        assert calls == [(problem.model.nq,)] and np.array_equal(e2.d, e0.d)
        assert rel_err(e1.d, e2.d) <= estimator_bound(problem, q[None], e2.d[None])[0]
        mp.setattr(est, "_online", numpy_flags_every_state(est))

        def singular(q, qd, y, g, idx=(), want_cov=False, system=None):
            raise StateSingularError(f"{problem.name}: singular at the state with batch index {idx}", [idx])
        mp.setattr(est, "_dense_state", singular)
        with pytest.raises(StateSingularError, match=r"batch index \(\)") as info:
            k.solve(q, qd, y)
        assert info.value.states == ((),)
    assert np.array_equal(k.solve(q, qd, y).d, e1.d)


def _solve_in_worker(k, q, v, y):
    e = k.solve(q, v, y)
    return np.asarray(e.d if hasattr(e, "d") else e), type(k).__name__, k.compiled


def test_compiled_estimators_and_structures_pickle_into_a_fresh_process(rng):
    """Compiled estimators (least squares, with and without a joint-torque sensor) and a compiled
    structure (forward dynamics) cross a process
    boundary (spawn: a fresh interpreter) and are compiled there again from what they wrap, the
    library found in the build cache: the same program, so the same numbers, bit for bit."""
    import concurrent.futures
    import multiprocessing
    import pickle
    model = sd.humanoid()
    sensors = [sd.ForceTorque("l_ft", "l_ankle_roll"), sd.ForceTorque("r_ft", "r_ankle_roll")]
    ft_only = sd.EstimationProblem(model, sensors=sensors, contacts=["l_sole", "r_sole"])
    lsq = sd.EstimationProblem(model, sensors=sensors + [sd.JointTorque("tau_knee", ["l_knee"])],
                               contacts=["l_sole", "r_sole"])
    fd = sparse.forward_dynamics_problem(model).analyze()
    q = sd.integrate(model, sd.humanoid_standing_configuration(), 0.01 * rng.normal(size=model.nv))
    v = 0.1 * rng.normal(size=model.nv)
    jobs = []
    for x in (ft_only, lsq):
        k = sd.compile(x)
        y = x.pack(qdd=np.zeros(x.model.nv), l_ft=[0, 0, 0, 0, 0, -150.0], r_ft=[0, 0, 0, 0, 0, -150.0],
                   **({"tau_knee": [1.0]} if x is lsq else {}))
        jobs.append((k, q, v, y))
    k = sd.compile(fd)
    jobs.append((k, q, v, fd.problem.values(tau=rng.normal(size=model.nv))))
    for k, qi, vi, yi in jobs:
        assert type(pickle.loads(pickle.dumps(k))) is type(k)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        results = list(pool.map(_solve_in_worker, *zip(*jobs)))
    for (k, qi, vi, yi), (d, name, compiled) in zip(jobs, results):
        ref = k.solve(qi, vi, yi)
        ref = np.asarray(ref.d if hasattr(ref, "d") else ref)
        assert name == type(k).__name__ and compiled == k.compiled
        assert np.array_equal(d, ref)
