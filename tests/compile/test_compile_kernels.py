"""Compiled kernels against the NumPy reference (within the rounding bound of each algorithm), single
and batched.

Each model is compiled once per module (both the scalar and the vectorised
library) into the session's private cache.
"""

import sysconfig
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_trees, rel_err, random_state, rounding_bound
from erd import load_pair
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("compile_cache")


def tol(model, name, q):
    """Compiled (``-march=native``, contracted and reordered) against NumPy: the recursions (RNEA, CRBA,
    kinematics) are products of well-scaled factors (condition 1); ABA and Minv solve with ``H``."""
    kappa = float(np.linalg.cond(sd.crba(model, q)).max()) if name in ("aba", "minv") else 1.0
    return rounding_bound(model.nv, kappa)


def reference(model, name, q, v, a):
    if name == "rnea":
        return sd.rnea(model, q, v, a)
    if name == "bias":
        return sd.bias(model, q, v)
    if name == "aba":
        return sd.aba(model, q, v, a)
    if name == "crba":
        return sd.crba(model, q)
    if name == "minv":
        return sd.minv(model, q)
    return sd.forward_kinematics(model, q)


def call(k, name, q, v, a):
    f = getattr(k, name)
    return f(q, v, a) if name in ("rnea", "aba") else f(q, v) if name == "bias" else f(q)


def check(k, model, q, v, a):
    for name in ("rnea", "bias", "aba", "crba", "minv", "fk"):
        got, ref = call(k, name, q, v, a), reference(model, name, q, v, a)
        if name == "fk":
            assert isinstance(got, tuple) and len(got) == 2
            for x, y in zip(got, ref):
                assert x.shape == y.shape and rel_err(x, y) < tol(model, name, q), name
        else:
            assert got.shape == ref.shape and got.dtype == np.float64, name
            assert rel_err(got, ref) < tol(model, name, q), name


@pytest.fixture(scope="module", params=range(4), ids=["chain", "binary", "floating", "floating-bf3"])
def compiled_tree(request, compile_cache):
    model = random_trees()[request.param]
    return model, sd.compile(model, vectorize=True)


@pytest.fixture(scope="module", params=[("panda", False), ("solo12", True)], ids=["panda", "solo12-floating"])
def compiled_robot(request, compile_cache):
    model, _ = load_pair(*request.param)
    return model, sd.compile(model, vectorize=True)


def test_random_trees_single(compiled_tree, rng):
    model, k = compiled_tree
    assert k.compiled
    if Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        assert k.fastcall                   # single calls take the C fast path where it can be built
    for _ in range(3):
        check(k, model, *random_state(model, rng))


def test_random_trees_batched(compiled_tree, rng):
    model, k = compiled_tree
    # 3 x 7 = 21 states: full vector blocks and a padded partial block, on several threads.
    q, v, a = random_state(model, rng, batch=(3, 7))
    check(k, model, q, v, a)
    k.threads, old = 2, k.threads
    try:
        Q, V, A = random_state(model, rng, batch=(300,))
        check(k, model, Q, V, A)
    finally:
        k.threads = old


def test_robots_single_and_batched(compiled_robot, rng):
    model, k = compiled_robot
    check(k, model, *random_state(model, rng))
    check(k, model, *random_state(model, rng, batch=(13,)))


def test_broadcasting_and_conversions(compiled_tree, rng):
    model, k = compiled_tree
    q, v, a = random_state(model, rng, batch=(5,))
    # one v for all states; lists, float32 and non-contiguous arrays take the general path
    assert rel_err(k.rnea(q, v[0], a), sd.rnea(model, q, v[0], a)) < tol(model, "rnea", q)
    assert rel_err(k.rnea(list(q[0]), list(v[0]), list(a[0])), sd.rnea(model, q[0], v[0], a[0])) < tol(model, "rnea", q)
    qf = np.asfortranarray(np.stack([q[0], q[1]], -1)).T          # non-contiguous rows
    assert rel_err(k.crba(qf), sd.crba(model, qf)) < tol(model, "crba", qf)
    assert rel_err(k.minv(q[:1]), sd.minv(model, q[:1])) < tol(model, "minv", q[:1])      # a batch of one keeps its axis
    assert k.minv(q[:1]).shape == (1, model.nv, model.nv)
    assert k.rnea(q[:0], v[:0], a[:0]).shape == (0, model.nv)
    with pytest.raises(ValueError, match="expected shape"):
        k.rnea(q[0, :-1], v[0], a[0])
    with pytest.raises(ValueError, match="broadcast"):
        k.rnea(q[:2], v[:3], a[0])
    with pytest.raises(TypeError):
        k.crba(q[0], gravity=[0, 0, -9.81])


def test_external_forces_and_gravity(rng, compile_cache):
    model = random_trees()[2]                 # floating base, every joint type
    k = sd.compile(model, kernels=("rnea", "bias", "aba"))
    q, v, a = random_state(model, rng, batch=(4,))
    f_ext = rng.normal(size=(4, model.nbodies, 6))
    g = np.array([0.5, -1.0, -9.0])
    assert rel_err(k.rnea(q, v, a, f_ext=f_ext, gravity=g), sd.rnea(model, q, v, a, f_ext, g)) < tol(model, "rnea", q)
    assert rel_err(k.bias(q[0], v[0], f_ext=f_ext[0]), sd.bias(model, q[0], v[0], f_ext[0])) < tol(model, "bias", q)
    assert rel_err(k.aba(q[1], v[1], a[1], gravity=g), sd.aba(model, q[1], v[1], a[1], gravity=g)) < tol(model, "aba", q[1])
    assert "rnea_ext" in k.kernels
    # kernels that were not compiled still answer, through NumPy
    assert rel_err(k.crba(q[0]), sd.crba(model, q[0])) < tol(model, "crba", q)


def test_cached_reuse_does_not_rebuild(compiled_robot):
    model, k = compiled_robot
    k2 = sd.compile(model, vectorize=True)
    assert k2.built == {"single": False, "batch": False}
    assert k2.kernels["rnea"].flops == k.kernels["rnea"].flops


def test_without_the_fast_path(compiled_robot, monkeypatch, rng):
    """With the C fast path disabled, single calls go through ctypes with the same results."""
    model, _ = compiled_robot
    monkeypatch.setenv("SPARSEDYN_NO_FASTCALL", "1")
    k = sd.compile(model)
    assert not k.fastcall and k.compiled
    check(k, model, *random_state(model, rng))


def test_out_arguments(compiled_tree, rng):
    model, k = compiled_tree
    q, v, a = random_state(model, rng, batch=(10,))
    H = np.empty((10, model.nv, model.nv))
    assert k.crba(q, out=H) is H
    assert rel_err(H, sd.crba(model, q)) < tol(model, "crba", q)
    R, p = np.empty((10, model.nbodies, 3, 3)), np.empty((10, model.nbodies, 3))
    k.fk(q, out=(R, p))
    assert rel_err(p, sd.forward_kinematics(model, q)[1]) < tol(model, "fk", q)
    tau = np.empty(model.nv)
    k.rnea(q[0], v[0], a[0], out=tau)
    assert rel_err(tau, sd.rnea(model, q[0], v[0], a[0])) < tol(model, "rnea", q)
    with pytest.raises(ValueError, match="out"):
        k.crba(q, out=np.empty((10, model.nv, model.nv), dtype=np.float32))


def test_armature_compiled_and_keyed(rng, compile_cache):
    """Armature is traced into the kernels, and a model differing only by armature gets its own build."""
    model = random_trees()[0]
    arm = np.zeros(model.nv)
    arm[1::2] = rng.uniform(0.1, 1.0, len(arm[1::2]))
    k0 = sd.compile(model, kernels=("rnea", "aba", "crba", "minv"))
    ka = sd.compile(model.with_armature(arm), kernels=("rnea", "aba", "crba", "minv"))
    assert ka.built["single"]                 # not the armature-free library from the cache
    q, v, a = random_state(model, rng, batch=(3,))
    m = ka.model
    assert rel_err(ka.rnea(q, v, a), sd.rnea(m, q, v, a)) < TOL
    assert rel_err(ka.aba(q, v, a), sd.aba(m, q, v, a)) < TOL
    assert rel_err(ka.crba(q), sd.crba(m, q)) < TOL and rel_err(ka.minv(q), sd.minv(m, q)) < TOL
    assert rel_err(ka.rnea(q, v, a) - k0.rnea(q, v, a), arm * a) < 1e-10
