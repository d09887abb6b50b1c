"""Inertial-parameter identification: base parameters, least squares and its covariance, physically
consistent fits, streaming (IdentificationData), F/T sensors' readings identified."""
import numpy as np
import pytest
from scipy.stats import chi2

import sparsedyn as sd
from sparsedyn import identification as idn
from sparsedyn.model.sensors import ForceTorque
from conftest import pendulum, rel_err, rounding_bound
import erd


@pytest.fixture(scope="module", params=["chain", "floating", "panda"])
def robot(request):
    if request.param == "panda":
        return erd.load_pair("panda", False)[0]
    if request.param == "chain":
        return sd.random_tree(6, branching=1.0, joint_types="all", seed=11)
    return sd.random_tree(6, branching=2.0, joint_types="all", seed=12, floating_base=True)


@pytest.fixture(scope="module")
def base(robot):
    return idn.base_parameters(robot)


def test_pendulum_base_parameters_by_hand():
    """A body turning about y under gravity along -z: tau = Iyy qdd + g (m cx cos q - m cz sin q)...
    only Iyy, m cx and m cz act (hand derivation), so the rank is 3."""
    model, _ = pendulum()
    bp = idn.base_parameters(model)
    assert bp.rank == 3
    assert sorted(bp.names) == ["link.Iyy", "link.mcx", "link.mcz"]
    assert bp.K.shape == (3, 7) and not bp.K.any()


def test_base_regressor_spans_the_full_one(robot, base):
    q, v, a = idn.random_states(robot, 20, seed=99)
    Y = sd.joint_torque_regressor(robot, q, v, a)
    pi = robot.inertial_parameters()
    assert rel_err(base.regressor(Y) @ base.base(pi), Y @ pi) < 1e-10
    assert rel_err(Y[..., base.dependent], base.regressor(Y) @ base.K) < 1e-10
    assert np.linalg.matrix_rank(Y.reshape(-1, Y.shape[-1])) == base.rank
    # full() maps back onto the reference's dependent parameters
    other = pi * 1.5
    back = base.full(base.base(pi), other)
    assert rel_err(base.base(back), base.base(pi)) < 1e-12 and np.all(back[base.dependent] == other[base.dependent])


def test_noiseless_recovery(robot, base):
    q, v, a = idn.random_states(robot, 30, seed=1)
    tau = sd.rnea(robot, q, v, a)
    res = sd.identify(robot, q, v, a, tau, base=base)
    truth = base.base(robot.inertial_parameters())
    assert rel_err(res.beta, truth) < 1e-8
    # the identified model predicts the torques of other states
    q2, v2, a2 = idn.random_states(robot, 5, seed=2)
    assert rel_err(sd.rnea(res.model(robot), q2, v2, a2), sd.rnea(robot, q2, v2, a2)) < 1e-8


def test_noise_is_consistent_with_the_covariance(robot, base):
    """With Gaussian noise of known sigma, (beta - truth)^T C^-1 (beta - truth) ~ chi2(r)."""
    rng = np.random.default_rng(2024)
    q, v, a = idn.random_states(robot, 40, seed=3)
    tau = sd.rnea(robot, q, v, a)
    sigma = 0.1
    noisy = tau + sigma * rng.normal(size=tau.shape)
    res = sd.identify(robot, q, v, a, noisy, sigma=sigma, base=base)
    e = res.beta - base.base(robot.inertial_parameters())
    stat = e @ np.linalg.solve(res.covariance, e)
    r = base.rank
    assert chi2.ppf(0.0005, r) < stat < chi2.ppf(0.9995, r)
    # the residual variance (whitened: 1) agrees with the noise, within its chi2(dof) spread
    res2 = sd.identify(robot, q, v, a, noisy, base=base)
    assert chi2.ppf(0.0005, res2.dof) / res2.dof < res2.sigma2 / sigma ** 2 < chi2.ppf(0.9995, res2.dof) / res2.dof
    assert rel_err(res2.beta, res.beta) < 1e-12
    assert rel_err(res2.covariance, res.covariance * res2.sigma2 / sigma ** 2) < 1e-10


def test_physically_consistent(robot, base):
    rng = np.random.default_rng(5)
    q, v, a = idn.random_states(robot, 15, seed=4)
    tau = sd.rnea(robot, q, v, a)
    # much noise: the unconstrained full parameters are no longer physical
    noisy = tau + 3.0 * rng.normal(size=tau.shape)
    free = sd.identify(robot, q, v, a, noisy, sigma=3.0, base=base)
    assert np.linalg.eigvalsh(free.pseudo_inertias).min() < 0
    fit = sd.identify(robot, q, v, a, noisy, sigma=3.0, base=base, physically_consistent=True)
    assert np.linalg.eigvalsh(fit.pseudo_inertias).min() > -1e-9 * np.abs(fit.pseudo_inertias).max()
    assert fit.residual_rms >= free.residual_rms * (1 - 1e-9)       # a constrained fit cannot fit better
    # ... but no feasible point fits better than it: the truth is feasible (its regularization term is
    # zero, the reference being the model's own parameters)
    truth_rms = np.sqrt(np.mean(((noisy - sd.rnea(robot, q, v, a)) / 3.0) ** 2))
    assert fit.residual_rms <= truth_rms * (1 + 1e-9)
    # noiseless: the truth is feasible and fits exactly, so the fit reproduces it (barrier gap 1e-10)
    exact = sd.identify(robot, q, v, a, tau, base=base, physically_consistent=True)
    assert rel_err(exact.beta, base.base(robot.inertial_parameters())) < 1e-8


def test_pseudo_inertia_round_trip(robot):
    pi = robot.inertial_parameters()
    J = idn.pseudo_inertia(pi)
    assert J.shape == (robot.nbodies, 4, 4)
    assert rel_err(idn.parameters_from_pseudo_inertia(J), pi) < 1e-14
    # a physical body has a positive semidefinite pseudo-inertia (second moment of mass)
    assert np.linalg.eigvalsh(J).min() > -1e-12




def test_identify_from_force_torque_sensor():
    """A sensor in joint 2 sees the subtree beyond it: its base parameters are recovered exactly."""
    model = sd.random_tree(5, branching=1.0, joint_types=("revolute", "prismatic", "spherical"), seed=21)
    s = ForceTorque("ft", model.joint_names[2])
    bp = idn.base_parameters(model, sensors=[s], joint_torques=False)
    # the sensor's wrench depends on the bodies beyond it only
    beyond = range(2, model.nbodies)
    assert all(c // 10 in beyond for c in bp.independent)
    q, v, a = idn.random_states(model, 10, seed=8)
    y = idn.force_torque_regressor(model, q, v, a, s) @ model.inertial_parameters()
    res = sd.identify(model, q, v, a, ft={s: y}, base=bp)
    assert rel_err(res.beta, bp.base(model.inertial_parameters())) < 1e-8
    # torques and the sensor together
    tau = sd.rnea(model, q, v, a)
    both = sd.identify(model, q, v, a, tau, ft={s: y})
    assert both.base.rank >= bp.rank
    assert rel_err(both.beta, both.base.base(model.inertial_parameters())) < 1e-8


def test_bad_input(robot):
    q, v, a = idn.random_states(robot, 2)
    with pytest.raises(ValueError, match=r"tau: expected shape \(2, "):
        sd.identify(robot, q, v, a, np.zeros((2, 1)))
    with pytest.raises(ValueError, match="no measurements"):
        sd.identify(robot, q, v, a)
    with pytest.raises(ValueError, match="pi: expected"):
        robot.with_inertial_parameters(np.zeros(3))
    with pytest.raises(TypeError, match="expected a ForceTorque"):
        idn.force_torque_regressor(robot, q, v, a, sd.estimation.JointTorque("t", [robot.joint_names[0]]))


@pytest.fixture(scope="module")
def icub():
    return erd.icub_with_sensors()


def test_identify_from_fixed_joint_force_torque_sensors(icub):
    """The six sensors alone, no noise: the base parameters (bodies beyond the sensors and the
    child-side pieces) are recovered."""
    model, sensors = icub
    bp = idn.base_parameters(model, sensors=sensors, joint_torques=False)
    assert bp.pieces == tuple(s.joint for s in sensors)
    q, v, a = idn.random_states(model, 12, seed=10)
    ft = {s: idn.force_torque_regressor(model, q, v, a, s) @ idn.model_parameters(model, (s.joint,))
          for s in sensors}
    res = sd.identify(model, q, v, a, ft=ft, base=bp)
    truth = bp.of_model(model)
    assert rel_err(res.beta, truth) < 1e-8
    assert set(res.child_sides) == set(bp.pieces)


# --- streaming: IdentificationData -------------------------------------------------------------

def _noisy(robot, n, seed):
    rng = np.random.default_rng(seed)
    q, v, a = idn.random_states(robot, n, seed=seed)
    return q, v, a, sd.rnea(robot, q, v, a) + 0.05 * rng.normal(size=(n, robot.nv))


def test_chunks_equal_all_rows_at_once(robot, base, monkeypatch):
    """Chunked accumulation (tiny chunks, uneven add() calls) = one least-squares solve of every stacked
    row (NumPy's SVD-based lstsq on the whitened base regressor: an independent solver)."""
    q, v, a, tau = _noisy(robot, 60, seed=31)
    s = 0.05 * (1 + np.arange(robot.nv) / robot.nv)
    A = (base.regressor(sd.joint_torque_regressor(robot, q, v, a)) / s[:, None]).reshape(-1, base.rank)
    b = (tau / s).reshape(-1)
    beta, res, *_ = np.linalg.lstsq(A, b, rcond=None)
    kappa = np.linalg.cond(A)
    monkeypatch.setattr(idn.least_squares, "CHUNK_BYTES", 1)            # one state per chunk
    data = idn.IdentificationData(robot, sigma=s, base=base)
    for part in np.array_split(np.arange(60), [7, 8, 30]):
        data.add(q[part], v[part], a[part], tau[part])
    out = data.solve()
    assert data.states == 60 and data.rows == 60 * robot.nv and out.dof == 60 * robot.nv - base.rank
    assert rel_err(out.beta, beta) < rounding_bound(A.shape[0], kappa) and rel_err(out.beta, beta) < 1e-10
    assert rel_err(out.covariance, np.linalg.inv(A.T @ A)) < 1e-10 * kappa
    # the residual of the normal equations: b^T b - c^T c, rounded relative to b^T b
    b2 = b @ b
    assert abs(out.residual_rms ** 2 * A.shape[0] - res[0]) < rounding_bound(A.shape[0], kappa ** 2) * b2
    # noise-free torques, one state per chunk: the truth, and the torques of other states, to 1e-8
    exact = sd.identify(robot, q, v, a, sd.rnea(robot, q, v, a), base=base)
    assert rel_err(exact.beta, base.base(robot.inertial_parameters())) < 1e-8
    q2, v2, a2 = idn.random_states(robot, 5, seed=2)
    assert rel_err(sd.rnea(exact.model(robot), q2, v2, a2), sd.rnea(robot, q2, v2, a2)) < 1e-8
    monkeypatch.undo()
    once = sd.identify(robot, q, v, a, tau, sigma=s, base=base)
    assert rel_err(out.beta, once.beta) < 1e-10 and rel_err(out.covariance, once.covariance) < 1e-10


def test_merged_accumulators_and_pickle(robot, base):
    """One accumulator per part of a recording, merged (what a Dask reduction does), and sent through
    pickle: the result of the whole recording."""
    import pickle
    q, v, a, tau = _noisy(robot, 45, seed=32)
    parts = [idn.IdentificationData(robot, base=base).add(q[p], v[p], a[p], tau[p])
             for p in np.array_split(np.arange(45), 3)]
    merged = pickle.loads(pickle.dumps(parts[0])).merge(*parts[1:])
    whole = sd.identify(robot, q, v, a, tau, base=base)
    out = merged.solve()
    assert merged.states == 45
    # sigma2 = (b^T b - c^T c) / dof: summed in another order, it differs by rounding relative to b^T b
    b2 = np.sum(tau ** 2)
    assert rel_err(out.beta, whole.beta) < 1e-10 and abs(out.sigma2 - whole.sigma2) < rounding_bound(tau.size) * b2 / out.dof
    with pytest.raises(ValueError, match="merge: expected IdentificationData of the same model"):
        parts[0].merge(idn.IdentificationData(robot, base=base, sigma=2.0))


def test_streamed_physically_consistent_fit_matches_all_at_once(monkeypatch):
    """The constrained fit works from the accumulated factor: chunked = at once."""
    robot = sd.random_tree(4, branching=1.0, joint_types="all", seed=11)
    rng = np.random.default_rng(5)
    q, v, a = idn.random_states(robot, 15, seed=4)
    noisy = sd.rnea(robot, q, v, a) + 3.0 * rng.normal(size=(15, robot.nv))
    once = sd.identify(robot, q, v, a, noisy, sigma=3.0, physically_consistent=True)
    monkeypatch.setattr(idn.least_squares, "CHUNK_BYTES", 1)
    chunked = sd.identify(robot, q, v, a, noisy, sigma=3.0, physically_consistent=True)
    assert np.linalg.eigvalsh(chunked.pseudo_inertias).min() > -1e-9 * np.abs(chunked.pseudo_inertias).max()
    assert rel_err(chunked.parameters, once.parameters) < 1e-8      # the barrier stops at a gap of 1e-10
    assert abs(chunked.residual_rms - once.residual_rms) < 1e-8 * once.residual_rms


def test_streamed_force_torque_sensors(icub, monkeypatch):
    """F/T sensors (moving-side and child-side pieces) in chunks: noise-free readings give the truth."""
    model, sensors = icub
    bp = idn.base_parameters(model, sensors=sensors, joint_torques=False)
    q, v, a = idn.random_states(model, 12, seed=10)
    ft = {s.name: idn.force_torque_regressor(model, q, v, a, s) @ idn.model_parameters(model, (s.joint,))
          for s in sensors}
    monkeypatch.setattr(idn.least_squares, "CHUNK_BYTES", 1)
    data = idn.IdentificationData(model, sensors=sensors, joint_torques=False, base=bp)
    data.add(q[:5], v[:5], a[:5], ft={k: y[:5] for k, y in ft.items()})
    data.add(q[5:], v[5:], a[5:], ft={k: y[5:] for k, y in ft.items()})
    assert rel_err(data.solve().beta, bp.of_model(model)) < 1e-8
    with pytest.raises(ValueError, match="ft: expected readings of the sensors"):
        data.add(q, v, a, ft={sensors[0]: ft[sensors[0].name]})


def test_gram_is_that_of_the_whitened_augmented_rows(robot, base, monkeypatch):
    """The accumulated matrix is [A_1 b]^T [A_1 b] of every whitened base-regressor row with its
    torque (NumPy's product of the stacked rows), whatever the chunks; the solve is the normal
    equations' (NumPy's solve of them)."""
    q, v, a, tau = _noisy(robot, 40, seed=35)
    s = 0.05 * (1 + np.arange(robot.nv) / robot.nv)
    A = (base.regressor(sd.joint_torque_regressor(robot, q, v, a)) / s[:, None]).reshape(-1, base.rank)
    Ab = np.column_stack([A, (tau / s).reshape(-1)])
    G = Ab.T @ Ab
    monkeypatch.setattr(idn.least_squares, "CHUNK_BYTES", 1)
    data = idn.IdentificationData(robot, sigma=s, base=base).add(q, v, a, tau)
    scale = np.sqrt(np.outer(np.diag(G), np.diag(G)))                # |[A b]_i| |[A b]_j|
    assert np.all(np.abs(data.gram - G) <= rounding_bound(len(Ab)) * scale)
    r = base.rank
    kappa = np.linalg.cond(A / np.linalg.norm(A, axis=0))
    beta = np.linalg.solve(G[:r, :r], G[:r, r])
    assert rel_err(data.solve().beta, beta) < rounding_bound(len(Ab), kappa ** 2)


def test_states_that_do_not_excite_the_parameters_are_ill_posed(robot, base):
    """A robot held still in one configuration excites gravity terms only: refused with the reason."""
    q, v, a = idn.random_states(robot, 30, seed=6)
    q[:] = q[0]
    v[:] = 0.0
    a[:] = 0.0
    tau = sd.rnea(robot, q, v, a)
    with pytest.raises(ValueError, match="do not excite every base parameter"):
        sd.identify(robot, q, v, a, tau, base=base)
    few = idn.IdentificationData(robot, base=base).add(q[:1], v[:1], a[:1], tau[:1])
    tau[17, 0] = np.nan
    with pytest.raises(ValueError, match=r"^tau: row 17 contains NaN or infinite values"):
        idn.IdentificationData(robot, base=base).add(q, v, a, tau)
    with pytest.raises(ValueError, match="measurements for .* base parameters; give more states"):
        few.solve()


def test_memory_beyond_the_inputs_does_not_grow_with_the_states(monkeypatch):
    """tracemalloc's peak while identifying (NumPy reports its buffers to it) stays near the chunk size
    for 4x more states, far below the stacked regressor of all of them."""
    import tracemalloc
    robot = sd.random_tree(6, branching=1.0, joint_types="all", seed=11)
    monkeypatch.setattr(idn.least_squares, "CHUNK_BYTES", 2 ** 20)
    base = idn.base_parameters(robot)
    peaks = []
    for n in (2000, 8000):
        q, v, a = idn.random_states(robot, n, seed=1)
        tau = sd.rnea(robot, q, v, a)
        tracemalloc.start()
        sd.identify(robot, q, v, a, tau, base=base)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    stacked = 8000 * robot.nv * 10 * robot.nbodies * 8
    assert peaks[1] < 8 * 2 ** 20 < stacked and peaks[1] < 1.5 * peaks[0]


def test_compiled_model_gives_the_numpy_result():
    """identify() with a compiled model (native batched regressor) = with the model itself."""
    robot = sd.random_tree(5, branching=1.0, joint_types="all", seed=13)
    cm = sd.compile(robot, kernels=["joint_torque_regressor"])
    q, v, a, tau = _noisy(robot, 300, seed=33)
    assert idn.base_parameters(cm).rank == idn.base_parameters(robot).rank
    base = idn.base_parameters(robot)     # (ties in the pivoting may pick other columns under other rounding)
    mine, native = sd.identify(robot, q, v, a, tau, base=base), sd.identify(cm, q, v, a, tau, base=base)
    assert rel_err(native.beta, mine.beta) < 1e-10 and rel_err(native.covariance, mine.covariance) < 1e-10


def test_dask_partitions_reduce_to_the_whole_recording(robot, base):
    """One accumulator per Dask partition, merged in a tree reduction: the whole recording's result."""
    import dask
    q, v, a, tau = _noisy(robot, 48, seed=34)

    def part(s):
        return idn.IdentificationData(robot, base=base).add(q[s], v[s], a[s], tau[s])

    parts = [dask.delayed(part)(s) for s in np.array_split(np.arange(48), 4)]
    pairs = [dask.delayed(lambda x, y: x.merge(y))(parts[k], parts[k + 1]) for k in (0, 2)]
    data = dask.delayed(lambda x, y: x.merge(y))(*pairs).compute(scheduler="threads")
    assert data.states == 48
    assert rel_err(data.solve().beta, sd.identify(robot, q, v, a, tau, base=base).beta) < 1e-10


def test_example_script_fits_within_its_covariance():
    """``examples/identify_inertial_parameters.py`` runs as written (panda of example-robot-data) and
    what it prints holds: the chi-square of the base-parameter errors against the estimated covariance
    is a draw of chi2(rank) (inside its 1e-6 two-sided quantiles), the fitted model predicts the torques
    of a new trajectory better than the nominal one, and the physically consistent fit is physical."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "examples" / "identify_inertial_parameters.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "SPARSEDYN_BACKEND": "numpy"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    stat, rank = map(float, re.search(r"chi-square of the errors: ([\d.]+) for (\d+) parameters", text).groups())
    assert chi2.ppf(1e-6, rank) < stat < chi2.ppf(1 - 1e-6, rank)
    fit, nominal = map(float, re.search(r"rms error ([\d.]+) N m \(nominal model ([\d.]+) N m", text).groups())
    assert fit < nominal
    smallest = float(re.search(r"physically consistent fit: smallest eigenvalue ([-+\d.e]+)", text).group(1))
    assert smallest >= -1e-9


def test_base_parameters_are_analysed_once_per_model():
    """A second call (identify's own) returns the analysis already made, read-only; other measurements,
    another model (even equal) or a compiled model of the same model are keyed apart or shared as
    they should: the compiled model shares its model's."""
    robot = sd.random_tree(4, branching=1.0, joint_types="all", seed=14)
    first = idn.base_parameters(robot)
    assert idn.base_parameters(robot) is first and not first.K.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        first.independent[0] = 0
    s = ForceTorque("ft", robot.joint_names[1])
    assert idn.base_parameters(robot, [s]) is not first and idn.base_parameters(robot, [s]).rank >= first.rank
    assert idn.base_parameters(sd.compile(robot, kernels=["joint_torque_regressor"])) is first
    other = sd.random_tree(4, branching=1.0, joint_types="all", seed=14)
    again = idn.base_parameters(other)
    assert again is not first and np.array_equal(again.independent, first.independent)


def test_identify_with_sensors_on_the_native_road_equals_numpy(icub):
    """The road users take: plain calls (compiled kernels, built on first use), states as lists, F/T
    readings keyed by name; the same fit as the NumPy functions' to rounding."""
    model, sensors = icub
    q, v, a = idn.random_states(model, 40, seed=12)
    rng = np.random.default_rng(3)
    with sd.use_backend("numpy"):
        tau = sd.rnea(model, q, v, a) + 0.01 * rng.normal(size=(40, model.nv))
        ft = {s.name: idn.force_torque_regressor(model, q, v, a, s) @ idn.force_torque_parameters(model, s)
              for s in sensors}
        data = idn.IdentificationData(model, sensors=list(ft)).add(q, v, a, tau, ft=ft)
        ref = data.solve()
    with sd.use_backend("native", deterministic=True):
        got = sd.identify(model, q.tolist(), v.tolist(), a.tolist(), tau.tolist(), ft=ft)
    # the normal equations: rounding of the rows amplified by the condition number of the scaled matrix
    r = ref.base.rank
    G = data.gram[:r, :r]
    d = np.sqrt(np.diag(G))
    bound = rounding_bound(data.rows, np.linalg.cond(G / np.outer(d, d)))
    assert rel_err(got.beta, ref.beta) < bound
    b2 = data.gram[r, r]                                          # |b|^2: the residual's rounding scale
    assert abs(got.residual_rms ** 2 - ref.residual_rms ** 2) * data.rows < bound * b2
