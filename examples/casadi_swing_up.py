"""Swing-up of a double pendulum with torque limits: CasADi's Opti and IPOPT on sparsedyn's ABA.

The forward dynamics is ``sparsedyn.aba`` traced once into a straight-line program and replayed
on CasADi symbols (:func:`sparsedyn.interop.casadi.function`); CasADi differentiates it for IPOPT.
Direct multiple shooting, one RK4 step per interval, minimal squared torque.

    python examples/casadi_swing_up.py [N]
"""

import sys

import numpy as np

import sparsedyn as sd
from sparsedyn.interop.casadi import function


def double_pendulum():
    """Two 0.3 m, 1 kg links turning about y; q = (pi/2, 0) hangs down, (-pi/2, 0) stands up."""
    return sd.serial_chain(2, "revolute", axis=(0.0, 1.0, 0.0), length=0.3, mass=1.0, name="double_pendulum")


def swing_up(N=40, T=2.0, tau_max=(4.0, 2.0), model=None, verbose=False):
    """Solve the swing-up; returns a dict with the time grid, ``q``, ``v`` (N+1, 2), ``tau`` (N, 2),
    the IPOPT status and the model."""
    import casadi as ca

    model = double_pendulum() if model is None else model
    f = function(sd.aba, model)                  # (q, v, tau) -> qdd, as a casadi.Function
    nv, dt = model.nv, T / N
    down, up = np.array([np.pi / 2, 0.0]), np.array([-np.pi / 2, 0.0])

    def xdot(x, u):
        return ca.vertcat(x[nv:], f(x[:nv], x[nv:], u))

    opti = ca.Opti()
    X = opti.variable(2 * nv, N + 1)
    U = opti.variable(nv, N)
    opti.minimize(dt * ca.sumsqr(U))
    for k in range(N):
        x, u = X[:, k], U[:, k]
        k1 = xdot(x, u)
        k2 = xdot(x + dt / 2 * k1, u)
        k3 = xdot(x + dt / 2 * k2, u)
        k4 = xdot(x + dt * k3, u)
        opti.subject_to(X[:, k + 1] == x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
        opti.subject_to(opti.bounded(-np.asarray(tau_max), u, np.asarray(tau_max)))
    opti.subject_to(X[:, 0] == np.concatenate([down, np.zeros(nv)]))
    opti.subject_to(X[:, N] == np.concatenate([up, np.zeros(nv)]))
    s = np.linspace(0, 1, N + 1)
    opti.set_initial(X[:nv, :], np.outer(down, 1 - s) + np.outer(up, s))
    # expand: Opti's MX graph of the bridged functions becomes one SX graph (several times faster)
    opti.solver("ipopt", {"print_time": False, "expand": True}, {"print_level": 5 if verbose else 0, "sb": "yes",
                                                 "max_iter": 500})
    sol = opti.solve()
    Xs, Us = np.asarray(sol.value(X)), np.asarray(sol.value(U)).reshape(nv, N)
    return {"t": np.linspace(0, T, N + 1), "q": Xs[:nv].T, "v": Xs[nv:].T, "tau": Us.T, "dt": dt,
            "status": sol.stats()["return_status"], "model": model, "tau_max": np.asarray(tau_max)}


if __name__ == "__main__":
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    r = swing_up(N=N, verbose=True)
    print(f"{r['status']}: {N} intervals, max |tau| = {np.abs(r['tau']).max(0)} (limits {r['tau_max']})")
    print("final q", r["q"][-1], "final v", r["v"][-1])
