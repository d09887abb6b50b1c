"""Kernels as JAX functions (from the traced program): jit, vmap, grad; equal to NumPy and to our
derivative kernels."""

import jax
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from sparsedyn.interop.jax import function, program_function
from sparsedyn.symbolic.trace import trace_kernel

jax.config.update("jax_enable_x64", True)     # float64, to compare with NumPy at 1e-12


def state(model, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    q = np.stack([model.random_configuration(rng) for _ in range(int(np.prod(batch, dtype=int)))])
    return (q.reshape(batch + (model.nq,)), rng.normal(size=batch + (model.nv,)),
            rng.normal(size=batch + (model.nv,)))


@pytest.fixture(scope="module")
def floating():
    return sd.random_tree(2, joint_types=("spherical", "planar"), seed=2, floating_base=True)


@pytest.fixture(scope="module")
def vector_space():
    """Joints whose configuration space is a vector space: d/dq is the tangent-space derivative."""
    return sd.random_tree(2, joint_types=("helical", "cylindrical"), seed=3)


def test_jit_and_vmap_equal_numpy(floating):
    q, v, a = state(floating, 1, (5,))
    f = jax.jit(function(sd.rnea, floating))
    assert rel_err(np.asarray(f(q[0], v[0], a[0])), sd.rnea(floating, q[0], v[0], a[0])) < 1e-12
    want = sd.rnea(floating, q, v, a)
    # (The transformations below run eagerly: XLA's compile time is not what is tested.)
    assert rel_err(np.asarray(jax.vmap(function(sd.rnea, floating))(q, v, a)), want) < 1e-12
    assert rel_err(np.asarray(function(sd.rnea, floating)(q, v, a)), want) < 1e-12   # leading batch axes
    # The derivative kernels bridge the same way.
    got = function(sd.rnea_derivatives, floating)(q, v, a)
    for g, w in zip(got, sd.rnea_derivatives(floating, q, v, a)):
        assert rel_err(np.asarray(g), w) < 1e-12
    # The level-scheduled emission (for large programs) computes the same values, under jit.
    P = trace_kernel(sd.rnea.__kernel__, floating)
    assert rel_err(np.asarray(jax.jit(program_function(P, "levels"))(q, v, a)[0]), want) < 1e-12


def test_jax_differentiation_equals_our_derivative_kernels(vector_space):
    m = vector_space
    q, v, a = state(m, 2)
    f = function(sd.rnea, m)
    dq, dv, da = sd.rnea_derivatives(m, q, v, a)
    jq, jv, ja = jax.jacfwd(f, argnums=(0, 1, 2))(q, v, a)
    assert rel_err(np.asarray(jq), dq) < 1e-12 and rel_err(np.asarray(jv), dv) < 1e-12
    assert rel_err(np.asarray(ja), da) < 1e-12
    w = np.random.default_rng(3).normal(size=m.nv)
    g = jax.grad(lambda v_: (f(q, v_, a) * w).sum())(v)
    assert rel_err(np.asarray(g), w @ dv) < 1e-12
    fd = function(sd.aba, m)
    jq = jax.jacrev(fd)(q, v, a)
    assert rel_err(np.asarray(jq), sd.aba_derivatives(m, q, v, a)[0]) < 1e-10


def test_traced_values_passed_to_a_kernel_point_to_the_bridge(floating):
    q, v, a = state(floating)
    with pytest.raises(TypeError, match=r"v: .*JAX traced value.*sparsedyn\.interop\.jax"):
        jax.jacfwd(lambda v_: sd.rnea(floating, q, v_, a))(v)
    with pytest.raises(TypeError, match="complex"):
        sd.rnea(floating, q, v + 1e-20j, a)


def test_a_plain_function_of_kernels(floating):
    """A Python function of registered kernels, as sd.compile(model, kernels=[f]) takes it: jit and
    batch axes; JAX's gradient of the kinetic energy 1/2 v^T H v is H v (an identity)."""
    def energy(model, q, v):
        return 0.5 * v @ sd.crba(model, q) @ v

    q, v, _ = state(floating, 4, (3,))
    f = jax.jit(function(energy, floating))
    want = np.array([energy(floating, q[k], v[k]) for k in range(3)])
    assert rel_err(np.asarray(f(q, v)), want) < 1e-12
    grad_v = jax.grad(lambda vv: function(energy, floating)(q[0], vv))(v[0])
    assert rel_err(np.asarray(grad_v), sd.crba(floating, q[0]) @ v[0]) < 1e-12
    with pytest.raises(TypeError, match="interop.jax.function: static= and optional= apply to registered kernels"):
        function(energy, floating, optional=("f_ext",))
