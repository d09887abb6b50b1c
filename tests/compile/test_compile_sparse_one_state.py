"""One state's compiled estimate, the C fast path of ``CompiledEstimator.solve``: iCub with its six
force/torque sensors and random floating-base trees, field by field against NumPy's estimate, bad input
failing as NumPy's does, flagged or singular states handed to NumPy."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, random_trees, rel_err, rounding_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn import sparse
from sparsedyn.estimation import CompiledEstimator
from sparsedyn.estimation import StateSingularError
from sparsedyn.estimation.casestudy import consistent_state, sample_noise
from test_compile_sparse import estimator_bound, numpy_flags_every_state, structure_bound

pytestmark = pytest.mark.usefixtures("compile_cache")


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
