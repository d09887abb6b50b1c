"""``constraints_demo()``: a short text report on the example mechanisms (for ``sparsedyn demo``)."""

from __future__ import annotations

import textwrap

import numpy as np

from ..algorithms.crba import HandC
from .examples import EXAMPLES
from .forward import constrained_forward_dynamics
from .inverse import constrained_inverse_dynamics
from .simulate import mechanical_energy, simulate

__all__ = ["constraints_demo", "constraints_demo_lines"]


def _kkt_error(mech, q, v, res):
    """Max difference between our (a, G^T lambda) and a direct solve of [M G^T; G 0] with tau = B u."""
    cs, model = mech.constraints, mech.model
    H, C = HandC(model, q, v)
    _, G, b = cs.evaluate(q, v)
    K = np.block([[H, -G.T], [G, np.zeros((cs.m, cs.m))]])
    sol = np.linalg.lstsq(K, np.concatenate([mech.B @ res.u - C, -b]), rcond=None)[0]
    return max(np.abs(sol[:model.nv] - res.a).max() / max(1.0, np.abs(res.a).max()),
               np.abs(G.T @ (sol[model.nv:] - res.lam)).max() / max(1.0, np.abs(G.T @ res.lam).max()))


def constraints_demo_lines(seed: int = 0, simulate_seconds: float = 0.5, dt: float = 0.02):
    """Yields the lines of :func:`constraints_demo` as they are computed (at most 100 characters)."""
    rng = np.random.default_rng(seed)
    yield "Closed loops and holonomic constraints (sparsedyn.constraints):"
    yield "  M a + h = B u + G^T lambda,  g(q) = 0;  one inverse/forward round trip per example mechanism"
    yield ""
    yield (f"  {'example':24s} {'nv':>3s} {'m':>3s} {'rank':>4s} {'dof':>3s} {'nu':>3s}  "
           f"{'regime':15s} {'max|u|':>9s} {'max|lam|':>9s} {'KKT err':>8s}")
    for name, build in EXAMPLES.items():
        mech = build()
        cs = mech.constraints
        q, v, a = mech.random_state(rng)
        res = constrained_inverse_dynamics(cs, q, v, a, actuated=mech.actuated)
        fwd = constrained_forward_dynamics(cs, q, v, mech.B @ res.u)
        err = max(_kkt_error(mech, q, v, res), np.abs(fwd.a - a).max() / max(1.0, np.abs(a).max()))
        yield (f"  {name:24s} {mech.model.nv:3d} {cs.m:3d} {res.partition.rank:4d} "
               f"{mech.model.nv - res.partition.rank:3d} {len(mech.actuated):3d}  {res.regime:15s} "
               f"{np.abs(res.u).max():9.3f} {np.abs(res.lam).max():9.3f} {err:8.1e}")
    fb = EXAMPLES["four_bar"]()
    part = fb.partition(fb.q0)
    yield ""
    yield from textwrap.wrap(f"Four-bar partition (column-pivoted QR of G): {part.describe()}", 100,
                             subsequent_indent="  ")
    tr = simulate(fb.constraints, fb.q0, np.zeros(fb.model.nv), simulate_seconds, dt, every=5)
    E = [mechanical_energy(fb.model, q, v) for q, v in zip(tr.q, tr.v)]
    yield from textwrap.wrap(
        f"Four-bar falling freely for {simulate_seconds} s (order-8 Runge-Kutta, dt = {dt * 1e3:g} ms, projection): "
        f"crank {tr.q[0, 0]:+.2f} -> {tr.q[-1, 0]:+.2f} rad, energy drift {max(abs(e - E[0]) for e in E):.1e} J "
        f"of {abs(E[0]):.2f} J, max |g| = {tr.position_violation.max():.1e}", 100, subsequent_indent="  ")


def constraints_demo(seed: int = 0, simulate_seconds: float = 0.5, dt: float = 0.02) -> str:
    """Closed loops: each example's structure, one inverse/forward dynamics round trip at a random
    consistent state (checked against the full KKT system), and a short unactuated simulation
    of the four-bar (energy and drift)."""
    return "\n".join(constraints_demo_lines(seed, simulate_seconds, dt))
