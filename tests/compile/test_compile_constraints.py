"""Compiled constraint sets (``sparsedyn.compile(ConstraintSet)``): the same results as NumPy.

The compiled forward dynamics of a fixed partition inverts ``G_dep`` through the normal
equations (``G_dep^T (G_dep G_dep^T)^-1``), whose rounding error is about ``cond(G_dep)^2 eps``
relative; the partitions chosen by the pivoted QR have ``cond(G_dep) < 1e3`` on these mechanisms,
so 1e-8 relative to max(1, |qdd|) bounds the difference to the LAPACK path with a margin.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
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
    for _ in range(3):
        q, v, _ = mech.random_state(rng)
        for a, b in zip(kc.evaluate(q, v), cs.evaluate(q, v)):
            assert rel_err(a, b) < 1e-12
        tau = rng.normal(size=cs.nv)
        ref = constrained_forward_dynamics(cs, q, v, tau)
        got = constrained_forward_dynamics(kc, q, v, tau, partition=ref.partition)
        assert rel_err(got.qdd, ref.qdd) < 1e-8
        assert rel_err(got.lam, ref.lam) < 1e-8
    # a few simulation steps: the same trajectory (integrated differences stay at rounding level)
    q0 = mech.q0
    t0, t1 = simulate(cs, q0, np.zeros(cs.nv), 0.005, 1e-3), simulate(kc, q0, np.zeros(cs.nv), 0.005, 1e-3)
    assert rel_err(t1.q, t0.q) < 1e-8 and rel_err(t1.v, t0.v) < 1e-8
    assert np.max(t1.position_violation) < 1e-10
    if name == "delta_robot":             # full-rank G: the partitioned kernels ran
        assert any(f is not None for f in kc.forward_dynamics_kernel.kernels.values())
