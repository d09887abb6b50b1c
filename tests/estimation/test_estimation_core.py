"""Estimation from sensors (issue 5): exactness, verdicts, least squares, bad input."""

import warnings

import numpy as np
import pytest
from conftest import rel_err, rounding_bound

import sparsedyn as sd
from sparsedyn import estimation as est
from sparsedyn.estimation.casestudy import consistent_state, sample_noise
from sparsedyn.model.spatial import apply_force, force_matrix

WELL_POSED = ["eq23-nz", "eq23-fz", "ankle-ft", "ankle-ft-imu", "eq23-fz-allqdd", "eq23-nz-allqdd"]


@pytest.fixture(scope="module")
def humanoid():
    return sd.humanoid()


@pytest.fixture(scope="module")
def cases(humanoid):
    return est.case_problems(humanoid)


@pytest.fixture(scope="module")
def solvers(cases):
    return {k: cases[k].analyze() for k in WELL_POSED + ["redundant"]}


def _sole_world(model, q, frame):
    R, p = sd.frame_placement(model, q, frame)
    return R, p


def test_newton_euler_matches_rnea(humanoid):
    rng = np.random.default_rng(0)
    q = np.stack([humanoid.random_configuration(rng) for _ in range(3)])
    qd, qdd = rng.normal(size=(2, 3, humanoid.nv))
    f_ext = rng.normal(size=(3, humanoid.nbodies, 6))
    t = est.newton_euler(humanoid, q, qd, qdd, f_ext)
    assert rel_err(t["tau"], sd.rnea(humanoid, q, qd, qdd, f_ext)) < 1e-12
    # f of a leaf body's joint projected on S is its torque; f of the root equals tau of the free joint
    assert rel_err(t["f"][:, 0, :], t["tau"][:, :6]) < 1e-12


@pytest.mark.parametrize("case", WELL_POSED)
def test_well_posed_cases_recover_ground_truth(cases, solvers, case):
    prob, solver = cases[case], solvers[case]
    assert solver.verdict.ok and solver.verdict.deficiency == 0
    rng = np.random.default_rng(5)
    # single state
    q, qd, qdd, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, qd, qdd, w)
    e = solver.solve(q, qd, y)
    assert rel_err(e.tau, truth["tau"]) < 1e-9
    assert rel_err(e.f, truth["f"]) < 1e-9
    for c in w:
        assert rel_err(e.contacts[c], w[c]) < 1e-9
    assert rel_err(e.d, truth["d"]) < 1e-9
    # batched (different configurations)
    q, qd, qdd, w = consistent_state(prob, rng, batch=(2, 2))
    y, truth = prob.measurements(q, qd, qdd, w)
    e = solver.solve(q, qd, y)
    assert e.tau.shape == (2, 2, prob.model.nv)
    assert rel_err(e.d, truth["d"]) < 1e-9
    for c in w:
        assert rel_err(e.contacts[c], truth["contacts"][c]) < 1e-9
    named = e.named()
    assert rel_err(named["tau[l_knee]"], truth["tau"][..., prob.model.v_slice(prob.model.joint("l_knee"))]) < 1e-9


def test_square_and_least_squares_kinds(solvers):
    assert solvers["ankle-ft"].verdict.kind == "well posed" and solvers["ankle-ft"].square
    assert solvers["eq23-nz"].verdict.kind == "well posed"
    assert solvers["ankle-ft-imu"].verdict.kind == "over-determined" and solvers["ankle-ft-imu"].verdict.redundancy == 6
    assert solvers["eq23-fz-allqdd"].verdict.redundancy == 4


def test_compile_is_the_deprecated_name_of_analyze(cases):
    """``EstimationProblem.compile()`` (the offline phase's old name) warns and does what ``analyze()`` does."""
    prob = cases["redundant"]
    with pytest.warns(DeprecationWarning, match=r"EstimationProblem.compile\(\) is renamed EstimationProblem.analyze"):
        old = prob.compile()
    new = prob.analyze()
    assert type(old) is type(new) and old.verdict.kind == new.verdict.kind and old.n == new.n


def test_eq18_load_cells_ill_posed_with_named_direction(cases, humanoid):
    prob = cases["eq18"]
    v = prob.verdict()
    assert v.kind == "rank-deficient" and not v.ok
    assert v.ranks == (v.n - 1,) * 3 and v.deficiency == 1 and v.nrows == v.n    # square, rank-deficient by 1
    assert "equal and opposite forces at l_sole and r_sole along the line where the two contact planes meet" \
        in v.directions[0]
    assert "moments about the contact normals" in v.directions[0]
    with pytest.raises(est.IllPosedError, match="ILL-POSED"):
        prob.analyze()
    # check the direction numerically: contact wrenches in world axes
    q, nv = v.configuration, v.null_vectors[:, 0]
    L = prob.layout
    W = {}
    for c in ("l_sole", "r_sole"):
        i = prob.contact_body[c]
        w = force_matrix(prob.contact_X[c]) @ nv[L.var("fx", i).slice]      # at the sole, sole axes
        R, p = _sole_world(humanoid, q, c)
        W[c] = (R @ w[:3], R @ w[3:], p, R[:, 2])
    (nl, fl, pl, zl), (nr, fr, pr, zr) = W["l_sole"], W["r_sole"]
    assert np.linalg.norm(fl) > 1e-3
    assert np.allclose(fl, -fr, atol=1e-9 * np.linalg.norm(fl))                      # equal and opposite
    meet = np.cross(zl, zr)
    assert abs(abs(fl @ meet) / np.linalg.norm(fl) / np.linalg.norm(meet) - 1) < 1e-8  # along n_l x n_r
    assert np.linalg.norm(np.cross(nl, zl)) < 1e-8 * np.linalg.norm(nl)               # moments about the normals
    assert np.linalg.norm(np.cross(nr, zr)) < 1e-8 * np.linalg.norm(nr)
    assert np.linalg.norm(nl + nr + np.cross(pl, fl) + np.cross(pr, fr)) < 1e-8      # no net wrench


def test_prototype_facts_on_flat_ground(cases):
    """Soles parallel (standing): eq. 18 loses 3, eq. 23 with the normal moment unknown is singular,
    eq. 23 with the normal force unknown (the paper's H read angular-first) keeps full rank."""
    qs = sd.humanoid_standing_configuration()
    n = cases["eq18"].layout.n
    assert cases["eq18"].rank_at(qs)[0] == n - 3
    assert cases["eq23-nz-allqdd"].rank_at(qs)[0] == n - 1
    assert cases["eq23-fz-allqdd"].rank_at(qs)[0] == n
    assert cases["eq23-nz"].rank_at(qs)[0] == n - 2
    assert cases["eq23-fz"].rank_at(qs)[0] == n - 1     # unknown ankle accelerations: singular when standing


def test_singular_state_raises(cases, solvers):
    prob, solver = cases["eq23-nz-allqdd"], solvers["eq23-nz-allqdd"]
    rng = np.random.default_rng(3)
    qs = sd.humanoid_standing_configuration()
    q, qd, qdd, w = consistent_state(prob, rng, q=np.stack([qs, prob.model.random_configuration(rng)]), batch=(2,))
    y, _ = prob.measurements(q, qd, qdd, w)
    with pytest.raises(est.StateSingularError, match=r"batch index \(0,\).*equal and opposite moments about the contact normals"):
        solver.solve(q, qd, y)


def test_least_squares_matches_dense_reference_and_covariance(cases, solvers):
    prob, solver = cases["redundant"], solvers["redundant"]
    rng = np.random.default_rng(11)
    q, qd, qdd, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, qd, qdd, w)
    yn = y + sample_noise(prob, rng)
    e = solver.solve(q, qd, yn, covariance=True)
    d_ref, cov_ref, chi2_ref = solver.dense_reference(q, qd, yn)
    assert rel_err(e.d, d_ref) < 1e-8
    assert np.max(np.abs(e.cov_d - cov_ref)) < 1e-8 * np.max(np.abs(cov_ref))
    assert abs(e.chi2 - chi2_ref) < 1e-8 * max(1.0, chi2_ref)


def test_least_squares_error_statistics_match_reported_covariance(cases, solvers):
    """Chi-square check over 3000 noisy samples at one state (fixed seed), batched."""
    prob, solver = cases["redundant"], solvers["redundant"]
    rng = np.random.default_rng(2024)
    q, qd, qdd, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, qd, qdd, w)
    N = 3000
    e = solver.solve(q, qd, y + sample_noise(prob, rng, (N,)))
    err = e.d - truth["d"]
    one = solver.solve(q, qd, y, covariance=True)
    C = one.cov_d
    lam, U = np.linalg.eigh(C)
    keep = lam > 1e-10 * lam[-1]
    k = int(keep.sum())
    assert k == solver.k
    z = (err @ U[:, keep]) / np.sqrt(lam[keep])
    chi2 = np.sum(z * z, -1)
    assert abs(chi2.mean() - k) < 4 * np.sqrt(2 * k / N)               # E = k, Var = 2k
    assert abs(chi2.var() / (2 * k) - 1) < 0.2
    # error outside the reported range is zero (the exact constraints hold)
    assert np.max(np.abs(err @ U[:, ~keep])) < 1e-8 * max(1.0, np.max(np.abs(truth["d"])))
    # the knee torques: empirical variance versus reported
    kv = prob.model.v_slice(prob.model.joint("l_knee"))
    rep = one.covariance("tau")[kv, kv]
    emp = np.var(err[:, prob.layout.var("tau", "l_knee").slice], axis=0)
    assert np.allclose(emp, np.diag(rep), rtol=0.15)
    # residual chi-square of the soft sensors: s - k degrees of freedom
    assert abs(e.chi2.mean() - e.dof) < 4 * np.sqrt(2 * e.dof / N)


def test_least_squares_error_shrinks_with_noise(cases, solvers):
    prob, solver = cases["redundant"], solvers["redundant"]
    rng = np.random.default_rng(8)
    q, qd, qdd, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, qd, qdd, w)
    noise = sample_noise(prob, rng, (200,))
    errs = []
    for s in (1.0, 0.1, 0.01):
        e = solver.solve(q, qd, y + s * noise)
        errs.append(np.sqrt(np.mean((e.tau - truth["tau"]) ** 2)))
    assert errs[0] > 0
    assert 8 < errs[0] / errs[1] < 12 and 8 < errs[1] / errs[2] < 12


def test_square_problem_covariance_by_propagation(cases, solvers):
    prob, solver = cases["ankle-ft"], solvers["ankle-ft"]
    rng = np.random.default_rng(4)
    q, qd, qdd, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, qd, qdd, w)
    e1, e2 = solver.solve(q, qd, y), solver.solve(q, qd, y, covariance=True)
    assert rel_err(e1.d, e2.d) < 1e-9 and e2.cov_d.shape == (prob.layout.n,) * 2
    assert e2.chi2 < 1e-12 and e2.dof == 0


def test_prior_makes_load_cells_well_posed(humanoid):
    """MAP: a prior on the feet's tangential forces resolves the eq. 18 ambiguity."""
    cells = [est.ContactLoad(f"{f}_cells", f, est.LOAD_CELLS, covariance=0.01) for f in ("l_sole", "r_sole")]
    prior = est.Prior("no_slip_prior", "fx", ["l_foot"], mean=0.0, covariance=[1e4] * 6)
    prob = est.EstimationProblem(humanoid, cells + [prior], ["l_sole", "r_sole"])
    v = prob.verdict()
    assert v.kind == "over-determined"
    solver = prob.analyze()
    rng = np.random.default_rng(1)
    q, qd, qdd, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, qd, qdd, w)
    e = solver.solve(q, qd, y, covariance=True)
    assert rel_err(e.d, solver.dense_reference(q, qd, y)[0]) < 1e-8
    # the measured load-cell components are reproduced
    i = prob.contact_body["l_sole"]
    sel = force_matrix(prob.contact_X["l_sole"])[[0, 1, 5]]
    assert rel_err(sel @ e.fx[i], sel @ truth["fx"][i]) < 1e-6


def test_accelerometer_prediction_is_proper_acceleration():
    model = sd.random_tree(6, branching=1.5, seed=3, nframes=3)
    rng = np.random.default_rng(0)
    q, qd, qdd = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    frame = "frame2"
    prob = est.EstimationProblem(model, [est.Accelerometer("imu", frame)])
    y, truth = prob.measurements(q, qd, qdd)
    h = 1e-4
    P = [sd.frame_placement(model, q + t * qd + 0.5 * t * t * qdd, frame)[1] for t in (-h, 0.0, h)]
    acc = (P[0] - 2 * P[1] + P[2]) / h ** 2
    R = sd.frame_placement(model, q, frame)[0]
    proper = R.T @ (acc - model.gravity)
    assert np.max(np.abs(prob.unpack(y)["imu"] - proper)) < 1e-5 * max(1.0, np.max(np.abs(proper)))


def test_accelerometer_in_least_squares(humanoid):
    """Ankle F/T with the base acceleration unknown plus an IMU accelerometer on the pelvis."""
    sensors = [est.ForceTorque("lft", "l_ankle_roll", "l_foot"), est.ForceTorque("rft", "r_ankle_roll", "r_foot"),
               est.Accelerometer("imu", "pelvis", covariance=0.01)]
    prob = est.EstimationProblem(humanoid, sensors, ["l_sole", "r_sole"], ["root_joint"])
    solver = prob.analyze()
    assert solver.verdict.kind == "over-determined" and solver.verdict.redundancy == 3
    rng = np.random.default_rng(2)
    q, qd, qdd, w = consistent_state(prob, rng, batch=(3,))
    y, truth = prob.measurements(q, qd, qdd, w)
    e = solver.solve(q, qd, y)
    assert rel_err(e.d, truth["d"]) < 1e-9
    assert rel_err(e.qdd, qdd) < 1e-9


# the superposition's pieces load the free joint on purpose (the final measurements do not)
@pytest.mark.filterwarnings("ignore::sparsedyn.estimation.ModelViolationWarning")
def test_joint_torque_sensors_and_known_wrench(humanoid):
    """Hands pushed by a known wrench; torque sensors on all leg joints replace foot sensing."""
    legs = [j for j in humanoid.joint_names if j.startswith(("l_hip", "l_knee", "l_ankle"))]
    sensors = [est.JointTorque("left_leg_torques", legs), est.KnownWrench("push", "r_hand")]
    prob = est.EstimationProblem(humanoid, sensors, ["l_sole", "r_sole"])
    v = prob.verdict()
    assert v.ok, str(v)
    solver = prob.analyze()
    rng = np.random.default_rng(6)
    q, qd, qdd, _ = consistent_state(prob, rng)
    push = np.array([0.5, -1.0, 0.2, 10.0, 5.0, -3.0])
    # the contact wrenches must balance the push too: solve for r_sole by superposition
    wl = np.array([1.0, 2.0, 0.0, 5.0, -4.0, 300.0])
    base = humanoid.v_slice(0)
    t0 = prob.measurements(q, qd, qdd, {"l_sole": wl, "r_sole": np.zeros(6)}, {"r_hand": push})[1]["tau"][base]
    B = np.stack([prob.measurements(q, qd, qdd, {"l_sole": wl, "r_sole": e_}, {"r_hand": push})[1]["tau"][base] - t0
                  for e_ in np.eye(6)], -1)
    wr = np.linalg.solve(B, -t0)
    y, truth = prob.measurements(q, qd, qdd, {"l_sole": wl, "r_sole": wr}, {"r_hand": push})
    assert abs(truth["tau"][base]).max() < 1e-9
    e = solver.solve(q, qd, y)
    assert rel_err(e.contacts["r_sole"], wr) < 1e-9 and rel_err(e.contacts["l_sole"], wl) < 1e-9
    assert rel_err(e.tau, truth["tau"]) < 1e-9


# --- bad input ------------------------------------------------------------------------------

def test_unknown_names_are_named(humanoid):
    with pytest.raises(KeyError, match="contact 'l_sol'.*no frame 'l_sol'"):
        est.EstimationProblem(humanoid, [], ["l_sol"])
    with pytest.raises(KeyError, match="sensor 'ft'.*no joint 'l_ankle'"):
        est.EstimationProblem(humanoid, [est.ForceTorque("ft", "l_ankle")], ["l_sole"])
    with pytest.raises(KeyError, match="sensor 'cells'.*no frame 'left_sole'"):
        est.EstimationProblem(humanoid, [est.ContactLoad("cells", "left_sole")], ["l_sole"])
    with pytest.raises(KeyError, match="unknown_accelerations.*no joint 'ankle'"):
        est.EstimationProblem(humanoid, [], ["l_sole"], ["ankle"])
    with pytest.raises(ValueError, match="unknown wrench component 'tz'"):
        est.ContactLoad("cells", "l_sole", ["nx", "tz"])
    with pytest.raises(ValueError, match="no contact is declared.*Contact\\('l_sole'\\)"):
        est.EstimationProblem(humanoid, [est.ContactLoad("cells", "l_sole")], ["r_sole"])
    with pytest.raises(ValueError, match="frame 'r_sole' is on body 'r_foot'"):
        est.EstimationProblem(humanoid, [est.ForceTorque("ft", "l_ankle_roll", "r_sole")], ["l_sole"])
    with pytest.raises(ValueError, match="names used twice"):
        est.EstimationProblem(humanoid, [est.JointTorque("a", "l_knee"), est.JointTorque("a", "r_knee")])


def test_bad_measurement_vectors_are_named(cases, solvers):
    prob, solver = cases["ankle-ft"], solvers["ankle-ft"]
    rng = np.random.default_rng(0)
    q, qd, qdd, w = consistent_state(prob, rng)
    y, _ = prob.measurements(q, qd, qdd, w)
    with pytest.raises(ValueError, match=rf"expected shape \(\.\.\., {prob.ny}\).*got \({prob.ny - 1},\).*l_ankle_roll_ft"):
        solver.solve(q, qd, y[:-1])
    bad = y.copy()
    o, _ = prob.addresses["r_ankle_roll_ft"]
    bad[o + 2] = np.nan
    with pytest.raises(ValueError, match=r"NaN.*sensor 'r_ankle_roll_ft' \(component\(s\) \[2\]"):
        solver.solve(q, qd, bad)
    Y = np.stack([y, y, bad])
    with pytest.raises(ValueError, match=r"sensor 'r_ankle_roll_ft'.*batch index \(2,\)"):
        solver.solve(q, qd, Y)
    with pytest.raises(KeyError, match="has no sensor .nope.; sensors: qdd, l_ankle_roll_ft"):
        prob.pack(nope=np.zeros(6))
    parts = prob.unpack(y)
    assert np.array_equal(prob.pack(**parts), y)


def standing_case(model, n=1):
    """The ankle-F/T example file's problem at the standing pose (soles flat: the static order's pivot
    vanishes there and the dense fallback answers) with consistent noise-free measurements."""
    from pathlib import Path
    from sparsedyn.estimation import problem_from_file
    p = problem_from_file(model, Path(__file__).parents[2] / "examples" / "humanoid_ankle_ft.toml")
    q0 = np.broadcast_to(sd.humanoid_standing_configuration(), (n, model.nq))
    q, qd, qdd, w = consistent_state(p, np.random.default_rng(3), q=q0, batch=(n,))
    y, truth = p.measurements(q, qd, qdd, w)
    return p, q, qd, y, truth


def truth_bound(p, q, d):
    from conftest import solve_bound
    from sparsedyn.sparse.assembly import SystemPattern
    A = p._dense(SystemPattern(p.sparse_problem()), q)
    return solve_bound(A, d)


def test_standing_pose_takes_the_dense_fallback(humanoid):
    p, q, qd, y, truth = standing_case(humanoid, 3)
    e = p.analyze()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.sparse.SparsePivotWarning)
        _, info, _ = e.structure._solve(q, qd, p.sparse_values(y), None, "auto")
    assert info.fallback.all()                           # the static order fails at this very state
    bound = truth_bound(p, q[0], truth["d"][0])
    single = e.solve(q[0], qd[0], y[0])                  # one state (a 0-d batch)
    assert single.d.shape == (e.n,) and rel_err(single.d, truth["d"][0]) <= bound
    batched = e.solve(q, qd, y)                          # a batch of such states
    assert batched.d.shape == (3, e.n) and rel_err(batched.d, truth["d"]) <= bound


@pytest.mark.parametrize("case", ["ankle-ft", "redundant"])
def test_estimate_fields_are_the_blocks_of_d(cases, solvers, case):
    """An Estimate's blocks are ``layout.unpack(d)``, its contact wrenches ``X* fx`` of the contact's body
    (Featherstone's force transform, by ``apply_force``), ``named()`` those arrays by joint and contact
    name in the model's joint order; one state and batch shapes alike."""
    prob, solver = cases[case], solvers[case]
    m = prob.model
    rng = np.random.default_rng(2)
    for batch in [(), (3,), (2, 2)]:
        q, qd, qdd, w = consistent_state(prob, rng, batch=batch)
        y, _ = prob.measurements(q, qd, qdd, w)
        e = solver.solve(q, qd, y)
        parts = prob.layout.unpack(e.d)
        for kind in ("a", "f", "tau", "fx", "qdd"):
            assert np.array_equal(getattr(e, kind), parts[kind]) and getattr(e, kind).shape == parts[kind].shape
        expected = {}
        for i, j in enumerate(m.joint_names):
            if m.joints[i].nv:
                expected[f"tau[{j}]"] = e.tau[..., m.v_slice(i)]
                expected[f"qdd[{j}]"] = e.qdd[..., m.v_slice(i)]
            expected[f"f[{j}]"] = e.f[..., i, :]
        assert list(e.contacts) == [c.name for c in prob.contacts]
        for c in prob.contacts:
            X = prob.contact_X[c.name]
            ref = apply_force(X, e.fx[..., prob.contact_body[c.name], :])
            XF = np.abs(force_matrix(X)).sum(1).max()
            assert e.contacts[c.name].shape == batch + (6,)
            assert np.max(np.abs(e.contacts[c.name] - ref)) <= rounding_bound(6, XF) * np.max(np.abs(e.fx))
            expected[f"contact[{c.name}]"] = e.contacts[c.name]
        named = e.named()
        assert list(named) == list(expected)
        for key, x in expected.items():
            assert named[key].shape == x.shape and np.array_equal(named[key], x), key
        assert e.torque("l_knee").shape == batch + (1,)
        assert np.array_equal(e.wrench("l_knee"), e.f[..., m.joint("l_knee"), :])


def test_measurements_of_data_the_model_cannot_have_warn(cases, solvers, humanoid):
    """Random contact wrenches on a floating base need a force on its free joint, which the problem
    takes as zero: ``measurements`` says so (at the caller's line), and indeed the square problem fits
    those data with a chi-square of 0 and other torques.  Consistent data (the free joint's force
    zero, by superposition) are silent and recovered; a moment given to a point contact warns too."""
    prob, solver = cases["ankle-ft"], solvers["ankle-ft"]
    rng = np.random.default_rng(8)
    q, qd, qdd, w = consistent_state(prob, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, truth = prob.measurements(q, qd, qdd, w)
    assert rel_err(solver.solve(q, qd, y).tau, truth["tau"]) < 1e-9
    bad = {c: x + rng.normal(size=6) * 50 for c, x in w.items()}
    with pytest.warns(est.ModelViolationWarning, match=r"force of up to [\d.e+]+ \(N, N m\) on the free joint "
                                                         r"'root_joint'.*square problem with a chi-square of 0") as rec:
        y, truth = prob.measurements(q, qd, qdd, bad)
    assert rec[0].filename == __file__
    e = solver.solve(q, qd, y)
    assert e.chi2 < rounding_bound(humanoid.nv) * (y @ y) and rel_err(e.tau, truth["tau"]) > 1e-3
    # a point contact carries no moment about its point
    point = est.EstimationProblem(humanoid, [], [est.Contact("l_sole", "3d"), "r_sole"])
    q, qd, qdd, w = consistent_state(point, rng)
    w["l_sole"] = w["l_sole"] + np.array([1.0, 0, 0, 0, 0, 0])
    with pytest.warns(est.ModelViolationWarning, match="point contact 'l_sole' has a moment of up to"):
        point.measurements(q, qd, qdd, w)
