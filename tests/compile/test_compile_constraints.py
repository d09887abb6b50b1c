"""Compiled constraint sets (``sparsedyn.compile(ConstraintSet)``): the same results as NumPy.

The compiled forward dynamics of a fixed partition inverts ``G_dep`` through the normal
equations (``G_dep^T (G_dep G_dep^T)^-1``), whose rounding error is about ``cond(G_dep)^2 eps``
relative, times ``cond(H)`` for the solve with the mass matrix: the bound below is computed at
each state from both condition numbers (conftest.rounding_bound), never a fixed number of digits.
"""

import numpy as np
import pytest
import scipy.linalg

import sparsedyn as sd
from conftest import EPS, rel_err, rounding_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.constraints import constrained_forward_dynamics
from sparsedyn.constraints.examples import example
from sparsedyn.constraints.compiled import CHECK_TOL
from sparsedyn.constraints.simulate import simulate

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.mark.parametrize("name", ["delta_robot", "four_bar"])
def test_compiled_constraint_set_equals_numpy(name, rng):
    mech = example(name)
    cs = mech.constraints
    kc = sd.compile(cs)
    assert kc.model.compiled and kc.m == cs.m
    n = cs.nv + cs.model.nbodies
    worst = 0.0
    for _ in range(3):
        q, v, _ = mech.random_state(rng)
        for a, b in zip(kc.evaluate(q, v), cs.evaluate(q, v)):
            assert rel_err(a, b) < rounding_bound(n)
        tau = rng.normal(size=cs.nv)
        ref = constrained_forward_dynamics(cs, q, v, tau)
        got = constrained_forward_dynamics(kc, q, v, tau, partition=ref.partition)
        G = cs.evaluate(q, v)[1]
        kappa = np.linalg.cond(sd.crba(cs.model, q)) * np.linalg.cond(G[:, ref.partition.dependent]) ** 2
        worst = max(worst, kappa)
        assert rel_err(got.a, ref.a) < rounding_bound(n, kappa)
        assert rel_err(got.lam, ref.lam) < rounding_bound(n, kappa)
    # a few simulation steps: the same trajectory (integrated differences stay at rounding level)
    q0 = mech.q0
    t0, t1 = simulate(cs, q0, np.zeros(cs.nv), 0.005, 1e-3), simulate(kc, q0, np.zeros(cs.nv), 0.005, 1e-3)
    # 5 steps of 12 stages, each within the bound of one solve (the flow barely amplifies over 5 ms)
    steps = 5 * 12
    assert rel_err(t1.q, t0.q) < steps * rounding_bound(n, worst)
    assert rel_err(t1.v, t0.v) < steps * rounding_bound(n, worst)
    assert np.max(t1.position_violation) < 1e-10
    if name == "delta_robot":             # full-rank G: the partitioned kernels ran
        assert any(f is not None for f in kc.forward_dynamics_kernel.kernels.values())


# --- the compiled simulation (SimulationKernels) -------------------------------------------------
#
# The compiled and the NumPy simulation differ in two ways only: rounding inside each stage (the
# normal equations: within rounding_bound(n, kappa) of one solve, kappa = cond(H) cond(G_dep)^2 as
# above, 12 stages per step), and where Newton's projection stops: both stop as soon as
# max |g| <= tol, i.e. within tol / sigma_min(G) of the constraint manifold, so the projected
# configurations of one step may differ by up to 2 tol / sigma_min(G).  Over the few steps compared
# (10 to 20 ms, far below the mechanisms' time constants) the flow does not amplify differences, so
# the bound is the sum over the steps.

def _simulation_bound(cs, q, steps, stages, tol=1e-12):
    G = cs.jacobian(q)
    s = np.linalg.svd(G, compute_uv=False)
    sigma_min = s[s > 1e-9 * s[0]][-1]                   # the smallest non-zero one (redundant rows: zero)
    from sparsedyn.constraints import partition
    part = partition(cs, q)
    kappa = np.linalg.cond(sd.crba(cs.model, q)) * np.linalg.cond(G[:, part.dependent]) ** 2 \
        if part.rank == cs.m else np.linalg.cond(sd.crba(cs.model, q))
    n = cs.nv + cs.model.nbodies
    return steps * (stages * rounding_bound(n, kappa) + 2 * tol / sigma_min)


def _built(kc, prefix):
    return [f for key, f in kc.simulation_kernels.kernels.items() if key[0] == prefix]


@pytest.mark.parametrize("name", ["delta_robot", "four_bar"])
def test_compiled_simulation_equals_numpy(name):
    mech = example(name)
    cs = mech.constraints
    kc = sd.compile(cs)
    q0, v0, steps = mech.q0, np.zeros(cs.nv), 10
    t0 = simulate(cs, q0, v0, steps * 1e-3, 1e-3)
    t1 = simulate(kc, q0, v0, steps * 1e-3, 1e-3)
    bound = _simulation_bound(cs, q0, steps, 12)
    assert t1.q.shape == t0.q.shape == (steps + 1, cs.model.nq)
    assert rel_err(t1.q, t0.q) < bound
    assert rel_err(t1.v, t0.v) < bound
    assert np.max(t1.position_violation) <= 1e-12             # Newton's tolerance, reached by the kernels
    assert np.max(np.abs(t1.v[-1])) > 0.01                    # it moved (falls under gravity)
    if name == "delta_robot":
        # full-rank G: the step, the Newton iteration and the velocity projection ran as kernels
        assert [f is not None for f in _built(kc, "constrained_rk")] == [True]
        assert all(f is not None for f in _built(kc, "newton_iteration") + _built(kc, "project_velocity"))
    else:
        # the z row of the planar loop is structurally zero: no step kernel; G G^T cannot be
        # inverted without pivoting, so the projections are not traceable either (NumPy path)
        assert _built(kc, "constrained_rk") == []
        assert all(f is None for f in _built(kc, "newton_iteration"))


def _slider_crank():
    mech = example("slider_crank")
    return mech, mech.constraints, sd.compile(mech.constraints)


@pytest.mark.parametrize("case", ["tau_rk4", "f_ext_baumgarte", "callable_tau"])
def test_compiled_simulation_with_forces(case):
    mech, cs, kc = _slider_crank()
    tau = np.array([0.8, -0.1, 0.3])
    kw = {"tau_rk4": dict(tau=tau, method="rk4"),
          "f_ext_baumgarte": dict(tau=tau, f_ext=np.tile([0.0, 0.0, 0.05, 0.4, -0.2, 0.0], (cs.model.nbodies, 1)),
                                  baumgarte=(5.0, 5.0)),
          "callable_tau": dict(tau=lambda t, q, v: np.array([np.sin(10 * t), 0.0, -v[2]]))}[case]
    steps = 20
    t0 = simulate(cs, mech.q0, np.zeros(cs.nv), steps * 1e-3, 1e-3, **kw)
    t1 = simulate(kc, mech.q0, np.zeros(cs.nv), steps * 1e-3, 1e-3, **kw)
    bound = _simulation_bound(cs, mech.q0, steps, 12)
    assert rel_err(t1.q, t0.q) < bound
    assert rel_err(t1.v, t0.v) < bound
    ref = simulate(cs, mech.q0, np.zeros(cs.nv), steps * 1e-3, 1e-3, **{**kw, "tau": None})
    assert rel_err(t1.v, ref.v) > 1e3 * bound                 # the forces act
    built = _built(kc, "constrained_rk")
    if case == "callable_tau":                                # no compiled step for a callable tau
        assert built == [] and kc.simulation_kernels.stepper(np.eye(1), 1e-3, tau=kw["tau"]) is None
    else:
        assert len(built) == 1 and built[0] is not None


def test_singular_partition_is_chosen_again():
    """At the dead centre (crank and rod aligned) the partition with the crank and the rod
    dependent is singular: the step kernel's check fails, the stepper chooses the partition again
    (pivoted QR) and steps with it, equal to the NumPy step."""
    from sparsedyn.constraints import consistent_velocity, partition
    from sparsedyn.constraints.simulate import _tableau, rk_step
    mech, cs, kc = _slider_crank()
    crank, rod = mech.params["crank"], mech.params["rod"]
    q = np.array([0.0, 0.0, crank + rod])                      # dead centre, assembled exactly
    assert cs.violation(q) < 1e-15
    v = consistent_velocity(cs, q, np.array([2.0, 0.0, 0.0]), partition(cs, q, independent=["crank_joint"]))
    forced = partition(cs, mech.q0, dependent=["crank_joint", "rod_joint"])   # regular away from the dead centre
    tableau, dt = _tableau("rk4"), 1e-3
    st = kc.simulation_kernels.stepper(tableau, dt)
    st.part, st.kernel, st.first = forced, kc.simulation_kernels._step_kernel(forced, tableau, dt, None, False), False
    assert not st.kernel(q, v, np.zeros(cs.nv))[2][0] <= CHECK_TOL         # singular here
    assert st.kernel(mech.q0, np.zeros(cs.nv), np.zeros(cs.nv))[2][0] <= CHECK_TOL   # fine where chosen
    q1, v1 = st(q, v)
    assert list(st.part.dependent) != list(forced.dependent)
    assert list(st.part.dependent) == list(partition(cs, q).dependent)
    ref = rk_step(cs, 0.0, q, v, dt, tableau)
    bound = _simulation_bound(cs, q, 1, 4, tol=0.0)
    assert rel_err(q1, ref[0]) < bound and rel_err(v1, ref[1]) < bound
    assert rel_err(v1, v) > 1e3 * bound                                      # a real step
    kept = st.part
    st(q1, v1)
    assert st.part is kept                                                   # kept while its check passes


def test_failed_checks_take_the_numpy_path(monkeypatch):
    """With every check failing, each compiled step and projection hands over to the NumPy path,
    and the trajectory is the NumPy one."""
    import sparsedyn.constraints.compiled as cc
    mech, cs, kc = _slider_crank()
    tau, steps = np.array([0.5, 0.0, 0.0]), 10
    monkeypatch.setattr(cc, "CHECK_TOL", -1.0)
    calls = []
    real = cc._Stepper.__call__

    def spy(self, q, v):
        calls.append(real(self, q, v))
        return calls[-1]
    monkeypatch.setattr(cc._Stepper, "__call__", spy)
    t1 = simulate(kc, mech.q0, np.zeros(cs.nv), steps * 1e-3, 1e-3, tau=tau)
    t0 = simulate(cs, mech.q0, np.zeros(cs.nv), steps * 1e-3, 1e-3, tau=tau)
    assert len(calls) == steps and all(c is None for c in calls)
    bound = _simulation_bound(cs, mech.q0, steps, 12)
    assert rel_err(t1.q, t0.q) < bound and rel_err(t1.v, t0.v) < bound
    assert np.max(t1.position_violation) <= 1e-12


def _evaluate_in_worker(cs, q, v):
    g, G, b = cs.evaluate(q, v)
    return g, G, b, type(cs.model).__name__


def test_a_compiled_constraint_set_pickles_into_a_fresh_process():
    """A compiled constraint set crosses a process boundary (spawn) as "compile the original set
    again", its library found in the build cache there: the same kernel, the same numbers."""
    import concurrent.futures
    import multiprocessing
    from sparsedyn import constraints as sc
    mech = sc.four_bar()
    k = sd.compile(mech.constraints)
    q, v, _ = mech.random_state(np.random.default_rng(2))
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        g, G, b, kind = pool.submit(_evaluate_in_worker, k, q, v).result()
    ref = k.evaluate(q, v)
    assert kind == "CompiledModel"
    assert all(np.array_equal(x, r) for x, r in zip((g, G, b), ref))


@pytest.mark.parametrize("name", ["delta_robot", "slider_crank"])
def test_the_compiled_projection_is_the_smallest_change(name):
    """The compiled set projects through the normal equations (``v - G^T (G G^T)^-1 G v``), whose error grows
    as ``cond(G)^2 eps``: the same velocity as SciPy's KKT solve of ``min |w - v|^2`` subject to
    ``G w = 0`` to that bound (the NumPy projection's own test: tests/constraints/test_assembly.py)."""
    mech = example(name)
    kc = sd.compile(mech.constraints)
    project = kc.simulation_kernels._velocity_kernel()
    assert project is not None
    rng = np.random.default_rng(5)
    for _ in range(4):
        cs, (q, _, _) = mech.constraints, mech.random_state(rng)
        v = rng.normal(size=cs.nv)
        G = cs.jacobian(q)
        m, nv = G.shape
        K = np.block([[np.eye(nv), G.T], [G, np.zeros((m, m))]])
        kkt = scipy.linalg.lstsq(K, np.concatenate([v, np.zeros(m)]), cond=1e-12)[0][:nv]
        v1, Gv1, check = project(q, v)
        assert check[0] <= CHECK_TOL                          # the kernel's own test of its inverse passes
        s = np.linalg.svd(G, compute_uv=False)
        assert rel_err(v1, kkt) < 16 * nv * EPS * (s[0] / s[-1]) ** 2 * max(1.0, np.abs(v).max())
        assert np.allclose(Gv1, G @ v1, rtol=0, atol=16 * nv * EPS * np.abs(G).max() * np.abs(v1).max())


def test_a_compiled_set_loads_its_kernels_without_tracing(monkeypatch):
    """A set's fingerprint (its constraints' kinds and data, the package's sources) keys its kernels in
    the build cache: compiled again (in another process, or here another compile), nothing is traced.
    Equal sets share a fingerprint, a moved point changes it, and a user constraint's functions leave
    none (its kernels are traced on every compile, as the build cache cannot identify them)."""
    import sparsedyn.symbolic.trace as tracing
    from sparsedyn.constraints import ConstraintSet, UserConstraint, four_bar
    from sparsedyn.constraints.compiled import fingerprint
    assert fingerprint(four_bar().constraints) == fingerprint(four_bar().constraints)
    assert fingerprint(four_bar().constraints) != fingerprint(four_bar(coupler=0.36).constraints)
    model = sd.serial_chain(3)
    user = UserConstraint(model, lambda q: q[:1] - q[2:], lambda q: np.array([[1.0, 0.0, -1.0]]))
    assert fingerprint(ConstraintSet(model, [user])) is None
    mech = example("delta_robot")
    cs, v0 = mech.constraints, np.zeros(mech.constraints.nv)
    first = simulate(sd.compile(cs), mech.q0, v0, 0.003, 1e-3)          # builds (or loads) every kernel
    traced = []
    real = tracing.trace_function             # the one trace driver (every kernel is traced through it)
    monkeypatch.setattr(tracing, "trace_function", lambda *a, **k: traced.append(k.get("name")) or real(*a, **k))
    again = simulate(sd.compile(cs), mech.q0, v0, 0.003, 1e-3)
    assert traced == []
    assert np.array_equal(again.q, first.q) and np.array_equal(again.v, first.v)     # the same kernels
