"""User kernels (``sparsedyn.compile(model, kernels=[fn])``) and compiled models in other processes."""

import concurrent.futures
import multiprocessing
import pickle

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_trees, rel_err, random_state
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen import UntraceableError

pytestmark = pytest.mark.usefixtures("compile_cache")


def _model():
    return random_trees()[2]                  # floating base, every joint type, with frames


def task_space_control(model, q, v):
    """Operational-space control of the last body's origin towards rest: tau = J^T Lambda xdd + C."""
    body = model.body_names[-1]
    J = sd.frame_jacobian(model, q, body, "local_world_aligned")[3:]          # (3, nv) linear part
    Lambda = sd.spd_inverse(J @ sd.minv(model, q) @ J.T)                        # (3, 3) task inertia
    xdd = -10.0 * (J @ v)
    return J.T @ (Lambda @ xdd) + sd.nonlinear_effects(model, q, v)


def _reference(model, q, v):
    body = model.body_names[-1]
    J = sd.frame_jacobian(model, q, body, "local_world_aligned")[3:]
    Lambda = np.linalg.inv(J @ sd.minv(model, q) @ J.T)
    return J.T @ (Lambda @ (-10.0 * (J @ v))) + sd.nonlinear_effects(model, q, v)


def test_user_kernel_single_and_batched(rng):
    model = _model()
    k = sd.compile(model, kernels=[task_space_control])
    q, v, _ = random_state(model, rng)
    # Lambda^-1 = J Minv J^T has cond <= 1e6 on these trees: 1e-7 bounds the rounding of the two inverses
    assert rel_err(k.task_space_control(q, v), _reference(model, q, v)) < 1e-7
    Q, V, _ = random_state(model, rng, batch=(2, 5))
    got = k.task_space_control(Q, V)
    assert got.shape == (2, 5, model.nv)
    assert rel_err(got[1, 3], _reference(model, Q[1, 3], V[1, 3])) < 1e-7
    assert k.flops("task_space_control")["total"] > 0


def _branching(model, q):
    return q if q[0] > 0 else -q


def _linalg(model, q, v):
    return np.linalg.solve(sd.crba(model, q), v)


def _truthy(model, q):
    return q * 2 if q[0] else q


def test_untraceable_user_kernels_are_refused_clearly():
    model = _model()
    with pytest.raises(UntraceableError, match="branches on a value"):
        sd.compile(model, kernels=[_branching])
    with pytest.raises(UntraceableError, match="branches on a value"):
        sd.compile(model, kernels=[_truthy])
    with pytest.raises(UntraceableError, match="np.linalg"):
        sd.compile(model, kernels=[_linalg])
    with pytest.raises(TypeError, match="argument 'gain' of '<lambda>' is not a state array"):
        sd.compile(model, kernels=[lambda model, q, gain: q * gain])


def _rnea_in_worker(k, q, v, a):
    return k.rnea(q, v, a), k.task_space_control(q, v), k.compiled


def test_compiled_models_pickle_into_a_process_pool(rng):
    model = _model()
    k = sd.compile(model, kernels=[task_space_control])
    q, v, a = random_state(model, rng, batch=(4,))
    # built here, loaded from the cache there: the same program, so the same numbers
    ref = [k.rnea(qi, vi, ai) for qi, vi, ai in zip(q, v, a)]
    k2 = pickle.loads(pickle.dumps(k))
    assert rel_err(k2.rnea(q[0], v[0], a[0]), ref[0]) == 0.0
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        results = list(pool.map(_rnea_in_worker, [k] * 2, q[:2], v[:2], a[:2]))
    for (tau, ts, compiled), qi, vi, r in zip(results, q, v, ref):
        assert compiled and rel_err(tau, r) == 0.0
        assert rel_err(ts, k.task_space_control(qi, vi)) == 0.0
