"""Compiled constraint sets (``sparsedyn.compile(ConstraintSet)``): the same results as NumPy.

The compiled forward dynamics of a fixed partition inverts ``G_dep`` through the normal
equations (``G_dep^T (G_dep G_dep^T)^-1``), whose rounding error is about ``cond(G_dep)^2 eps``
relative, times ``cond(H)`` for the solve with the mass matrix: the bound below is computed at
each state from both condition numbers (conftest.rounding_bound), never a fixed number of digits.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.constraints import constrained_forward_dynamics
from sparsedyn.constraints.examples import example
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
