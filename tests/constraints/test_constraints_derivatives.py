"""Derivatives of constrained forward dynamics (implicit differentiation of the traced residual)
against central finite differences."""

import numpy as np
import pytest

import sparsedyn as sd

from conftest import rel_err
from sparsedyn.constraints import constrained_forward_dynamics as fd
from sparsedyn.constraints.derivatives import constrained_forward_dynamics_derivatives
from sparsedyn.constraints.examples import example

H = 1e-6


@pytest.mark.parametrize("name", ["four_bar", "delta_robot"])
def test_constrained_forward_dynamics_derivatives(name):
    mech = example(name)
    cs, m = mech.constraints, mech.constraints.model
    rng = np.random.default_rng(1)
    q, v, tau = mech.q0, rng.normal(size=m.nv), rng.normal(size=m.nv)
    f_ext = rng.normal(size=(m.nbodies, 6))
    part = fd(cs, q, v, tau).partition
    for fx in (None, f_ext) if name == "four_bar" else (None,):
        d = constrained_forward_dynamics_derivatives(cs, q, v, tau, f_ext=fx)
        sol = lambda q_, v_, t_: fd(cs, q_, v_, t_, f_ext=fx, partition=part)

        cols = lambda g: np.stack([(g(H * np.eye(m.nv)[k]) - g(-H * np.eye(m.nv)[k])) / (2 * H)
                                   for k in range(m.nv)], -1)
        # Tangent space in q (the configuration leaves the constraint manifold: qdd(q, v, tau) is
        # defined there too); v and tau in the vector space.  FD error ~ 1e-10 |qdd|.
        for got, want in ((d.dqdd_dq, cols(lambda e: sol(sd.integrate(m, q, e), v, tau).a)),
                          (d.dqdd_dv, cols(lambda e: sol(q, v + e, tau).a)),
                          (d.dqdd_dtau, cols(lambda e: sol(q, v, tau + e).a)),
                          (d.dlam_dtau, cols(lambda e: sol(q, v, tau + e).lam))):
            assert rel_err(got, want) < 1e-6
