"""Unactuated simulation conserves energy and keeps the constraints (5 s, order-8 Runge-Kutta + projection).

Both mechanisms start at rest away from their stable equilibrium and swing
under gravity.  Energy: ``E = v^T M v / 2 + V`` with the potential measured
from the world origin (the crank pivot for the four-bar, the motor plane for
the delta); the criterion is ``max |E(t) - E(0)| <= 1e-6 |E(0)|``.  Drift:
``max |g|`` and ``max |G v|`` on every recorded state, recomputed here, below 1e-8.
"""

import numpy as np
import pytest

import sparsedyn as sd

from sparsedyn.constraints import delta_robot, four_bar, mechanical_energy, simulate

CASES = {
    # name: (mechanism, independent joints at the start, step)
    "four_bar": (four_bar, [-1.775 + 0.5], 1 / 32),             # stable equilibrium near -1.775 rad
    "delta_robot": (delta_robot, [1.45, 1.65, 1.85], 1 / 25),   # equilibrium with the arms near 1.65 rad
}


@pytest.mark.parametrize("name", list(CASES))
def test_unactuated_simulation_conserves_energy_and_constraints(name):
    build, start, dt = CASES[name]
    mech = build()
    cs, model = mech.constraints, mech.model
    q0 = mech.configuration(start, steps=12)
    tr = simulate(cs, q0, np.zeros(model.nv), 5.0, dt, every=10)
    assert tr.t[-1] == pytest.approx(5.0)
    E = np.array([mechanical_energy(model, q, v) for q, v in zip(tr.q, tr.v)])
    T = np.array([0.5 * v @ v for v in tr.v])
    assert T.max() > 0                                          # it moves
    drift = max(max(cs.violation(q, v)) for q, v in zip(tr.q, tr.v))
    rel = np.abs(E - E[0]).max() / abs(E[0])
    print(name, "energy drift", np.abs(E - E[0]).max(), "relative", rel, "constraint drift", drift)
    assert rel <= 1e-6
    assert drift < 1e-8 and tr.position_violation.max() < 1e-8 and tr.velocity_violation.max() < 1e-8
    # The motion is a real swing, not a crawl: the independent joints move by a good fraction of a radian.
    ind = [model.q_start[model.joint(j)] for j in mech.independent]
    assert np.ptp(tr.q[:, ind], axis=0).max() > 0.3


def test_baumgarte_pulls_a_drifting_state_back():
    """Without projection, Baumgarte's terms damp an initial constraint violation (critically, alpha = beta)."""
    mech = four_bar()
    cs, model = mech.constraints, mech.model
    q = sd.integrate(model, mech.q0, np.array([0.0, 0.02, -0.01]))      # off the manifold by ~1e-2
    g0 = np.abs(cs.residual(q)).max()
    free = simulate(cs, q, np.zeros(3), 0.5, 0.005, method="rk4", project=False)
    damped = simulate(cs, q, np.zeros(3), 0.5, 0.005, method="rk4", project=False, baumgarte=(20.0, 20.0))
    assert free.position_violation[-1] > 0.3 * g0                    # plain dynamics keeps the violation
    assert damped.position_violation[-1] < 1e-3 * g0


def test_rk4_converges_with_order_four():
    """Halving the step divides the RK4 error after 0.2 s by about 16 (reference: DOP853, small step)."""
    mech = four_bar()
    cs = mech.constraints
    q0 = mech.configuration([-1.3], steps=6)
    z = np.zeros(3)
    ref = simulate(cs, q0, z, 0.2, 0.005, project=False).q[-1]
    e1 = np.abs(simulate(cs, q0, z, 0.2, 0.02, method="rk4", project=False).q[-1] - ref).max()
    e2 = np.abs(simulate(cs, q0, z, 0.2, 0.01, method="rk4", project=False).q[-1] - ref).max()
    assert 10 < e1 / e2 < 24
