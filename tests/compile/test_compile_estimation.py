"""The compiled estimator's batch path (``sparsedyn.compile(estimator).solve`` of many states).

A batch runs the whole solve for every state in one native call (the batch runtime's vectorised
lanes and threads): it equals the single-state compiled call state by state to rounding (the
vectorised code runs the same program; only ``sin``/``cos`` may round differently), on a square
problem and on least-squares problems with soft rows and with priors; it is bit for bit the same
between repeated and concurrent calls; bad input names the first bad row; and ``sparsedyn.compile``
builds everything the object will call, so no later call builds anything.
"""

import concurrent.futures

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_trees
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen import runtime
from sparsedyn.codegen.owned import CompiledKernels
from sparsedyn.estimation import EstimationProblem
from sparsedyn.estimation.casestudy import case_problems, consistent_state, sample_noise
from sparsedyn.model.sensors import JointTorque, Prior
from test_compile_sparse import estimator_bound

pytestmark = pytest.mark.usefixtures("compile_cache")


def _leaf(m):
    return next(m.body_names[i] for i in range(m.nbodies) if i not in m.parent)


def _problems():
    """A square problem (the humanoid with ankle F/T sensors, both feet in contact), least squares with
    redundant noisy sensors (ankle F/T, load cells, knee torques), and least squares with a Gaussian
    prior on a contact wrench (MAP) on a random floating-base tree."""
    probs = case_problems(sd.humanoid())
    t = random_trees()[3]
    actuated = [t.joint_names[i] for i in range(t.nbodies) if t.joints[i].nv and t.joints[i].type != "free"]
    prior = EstimationProblem(t, sensors=[JointTorque("jt", actuated, covariance=0.1),
                                          Prior("contact prior", "fx", _leaf(t), covariance=100.0)],
                              contacts=[_leaf(t)])
    return {"ankle-ft": probs["ankle-ft"], "redundant": probs["redundant"], "tree-prior": prior}


@pytest.fixture(scope="module")
def cases():
    out = {}
    rng = np.random.default_rng(5)
    for name, problem in _problems().items():
        est = problem.analyze()
        k = sd.compile(est)
        n = 2 * k.lanes + 3                       # whole vectors and a partial one
        if problem.model.name == "humanoid":
            from sparsedyn.model.builders import humanoid_standing_configuration
            q0 = humanoid_standing_configuration()
            Q = np.stack([sd.integrate(problem.model, q0, 0.2 * rng.normal(size=problem.model.nv)) for _ in range(n)])
            q, qd, qdd, w = consistent_state(problem, rng, q=Q, batch=(n,))
        else:
            q, qd, qdd, w = consistent_state(problem, rng, batch=(n,))
        y, _ = problem.measurements(q, qd, qdd, w)
        if not est.square:
            y = y + sample_noise(problem, rng, (n,))
        out[name] = (problem, est, k, (q, qd, y))
    return out


NAMES = ("ankle-ft", "redundant", "tree-prior")


@pytest.mark.parametrize("name", NAMES)
def test_a_batch_is_one_native_call_equal_to_single_calls(cases, name, monkeypatch):
    problem, est, k, (q, qd, y) = cases[name]
    assert k.compiled and est.square == (name == "ankle-ft")
    calls, run = [], CompiledKernels.run
    monkeypatch.setattr(CompiledKernels, "run", lambda self, *a, **kw: calls.append(a[0]) or run(self, *a, **kw))
    numpy_calls, numpy_solve = [], est.solve
    monkeypatch.setattr(est, "solve", lambda *a, **kw: numpy_calls.append(1) or numpy_solve(*a, **kw))
    eb = k.solve(q, qd, y)
    assert calls == ["estimate"] and numpy_calls == []          # one native call, no state re-solved in Python
    e1 = [k.solve(q[i], qd[i], y[i]) for i in range(len(q))]
    assert numpy_calls == []
    # The vectorised program is the single-state one, operation for operation, except sin and cos
    # (libmvec's vector forms round within a few ulps of libm's): the states differ by at most 1e-12
    # relative, or by what a backward-stable solve of the state's system allows where its
    # conditioning amplifies those ulps beyond that (the humanoid's 610 unknowns, standing).
    bound = np.maximum(1e-12, estimator_bound(problem, q, eb.d))
    for i, e in enumerate(e1):
        scale = max(1.0, np.max(np.abs(e.d)))
        assert np.max(np.abs(eb.d[i] - e.d)) <= bound[i] * scale
        assert abs(eb.chi2[i] - e.chi2) <= bound[i] * max(1.0, e.chi2)


@pytest.mark.parametrize("name", ("ankle-ft", "redundant"))
def test_repeated_and_concurrent_batches_are_bit_identical(cases, name):
    problem, est, k, (q, qd, y) = cases[name]
    Q, QD, Y = (np.concatenate([a] * 40) for a in (q, qd, y))      # long enough for every thread
    ref = k.solve(Q, QD, Y)
    again = k.solve(Q, QD, Y)
    assert np.array_equal(ref.d, again.d) and np.array_equal(ref.chi2, again.chi2)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: k.solve(Q, QD, Y), range(4)))
    for e in outs:
        assert np.array_equal(e.d, ref.d) and np.array_equal(e.chi2, ref.chi2)
    n = len(q)
    assert np.array_equal(ref.d[:n], ref.d[n:2 * n])               # a state's answer is its own


def test_bad_rows_of_a_batch_are_named(cases):
    problem, est, k, (q, qd, y) = cases["ankle-ft"]
    ynan = y.copy()
    ynan[3, 2] = ynan[6, 0] = np.nan            # two bad rows: the first is named
    qnan = q.copy()
    qnan[4, 8] = np.inf
    qquat = q.copy()
    qquat[2, 3:7] *= 1.1
    qquat[5, 3:7] *= 0.9
    # the first bad state, the sensor at fault in it and its own components (not those of later states)
    last, (o, sz) = list(problem.addresses.items())[-1]
    first = list(problem.addresses)[0]
    ylate = y.copy()
    ylate[5, 0] = ylate[1, o + sz - 1] = np.nan                # an earlier sensor bad in a later state
    for solver in (k, est):
        with pytest.raises(ValueError, match=rf"NaN or infinite value from sensor '{first}' \(component\(s\) \[2\] "
                                             rf"of y\[0:\d+\], batch index \(3,\) \(the first\)\)"):
            solver.solve(q, qd, ynan)
        with pytest.raises(ValueError, match=rf"from sensor '{last}' \(component\(s\) \[{sz - 1}\] of "
                                             rf"y\[{o}:{o + sz}\], batch index \(1,\) \(the first\)\)"):
            solver.solve(q, qd, ylate)
        with pytest.raises(ValueError, match=r"q: contains NaN or infinite values at batch index \(4,\) \(the first\)"):
            solver.solve(qnan, qd, y)
        with pytest.raises(ValueError, match=r"quaternion of joint .root_joint.*batch index \(2,\) \(the first\)"):
            solver.solve(qquat, qd, y)
        with pytest.raises(ValueError, match=r"measurements: expected shape \(\.\.\., 41\)"):
            solver.solve(q, qd, y[:, :-1])
        with pytest.raises(ValueError, match="do not broadcast"):
            solver.solve(q[:-1], qd, y)


def test_compile_builds_everything_the_estimator_calls(cases, monkeypatch):
    """``sparsedyn.compile(estimator)`` builds (or loads) the single-state and the batch library,
    reporting both; no later call, single or batched, builds anything."""
    t = random_trees()[3]
    problem = EstimationProblem(t, sensors=[Prior("contact prior", "fx", _leaf(t), covariance=50.0)],
                                contacts=[_leaf(t)])      # not built before in this session
    msgs = []
    k = sd.compile(problem.analyze(), progress=msgs.append)
    assert any("single kernels ready" in m for m in msgs) and any("batch kernels ready" in m for m in msgs)
    assert k.built == {"single": True, "batch": True}
    n = len(msgs)
    builds = []
    real = runtime._build_kernels
    monkeypatch.setattr(runtime, "_build_kernels", lambda *a, **kw: builds.append(a[4:5]) or real(*a, **kw))
    rng = np.random.default_rng(2)
    q, qd, qdd, w = consistent_state(problem, rng, batch=(5,))
    y, _ = problem.measurements(q, qd, qdd, w)
    k.solve(q, qd, y)
    k.solve(q[0], qd[0], y[0])
    k.solve(np.concatenate([q] * 50), np.concatenate([qd] * 50), np.concatenate([y] * 50))
    assert builds == [] and len(msgs) == n


@pytest.mark.parametrize("name", ("ankle-ft", "redundant"))
def test_a_state_with_a_result_that_is_not_finite_fails(cases, name):
    """``failed`` flags exactly the states with a NaN or an infinity among their results (a check
    value that is not positive aside), whatever the array's memory order."""
    problem, est, k, (q, qd, y) = cases[name]
    ck = k.compiled_kernels
    outs = ck.run(k.kernel_name, q, qd, y)
    outs = outs if isinstance(outs, tuple) else (outs,)
    B = len(q)
    assert not ck.failed(k.kernel_name, outs, (B,)).any()
    d = outs[0]
    d[1, 7], d[4, -1], d[6, 0] = np.inf, np.nan, -np.inf
    d[0, 3] = np.finfo(float).max                  # large but finite: passes
    expect = np.isin(np.arange(B), [1, 4, 6])
    assert ck.failed(k.kernel_name, outs, (B,)).tolist() == expect.tolist()
    fortran = (np.asfortranarray(d),) + outs[1:]
    assert ck.failed(k.kernel_name, fortran, (B,)).tolist() == expect.tolist()
