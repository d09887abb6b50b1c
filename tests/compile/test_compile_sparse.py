"""sparsedyn.compile of sparse problems, structures, estimation problems and estimators.

The compiled ``solve`` is the traced NumPy online phase: it equals ``Structure.solve`` /
``Estimator.solve`` within the rounding bound of a backward-stable solve at each state
(``conftest.solve_bound``: Skeel's condition number of the state's system), single state and
batched; states the NumPy path would flag are re-solved
by it (warning included); without a compiler everything answers through NumPy;
two problems on one model never share a library.  One state's C fast path: ``test_compile_sparse_one_state.py``.
"""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, near_singular_state, random_trees, rel_err, solve_bound
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
