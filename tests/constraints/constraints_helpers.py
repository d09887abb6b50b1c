"""Independent formulations used as oracles by the constraint tests.

Nothing here uses the null-space machinery of ``sparsedyn.constraints``: the
full KKT systems are assembled from ``HandC`` (CRBA + RNEA bias) and the
constraint Jacobian and solved directly with NumPy.
"""

import numpy as np

import sparsedyn as sd
from sparsedyn.constraints import EXAMPLES


def terms(model, cs, q, v, f_ext=None):
    """``(H, C, G, Gdot v)`` at one state (``C`` includes ``-J^T f`` for external forces ``f_ext``)."""
    H, C = sd.HandC(model, q, v, f_ext)
    _, G, b = cs.evaluate(q, v)
    return H, C, G, b


def kkt_forward(model, cs, q, v, tau, T=None):
    """``(qdd, lambda)`` from ``[H -G^T; G 0] [qdd; lambda] = [tau - C; -Gdot v]``.

    For a rank-deficient ``G`` the KKT matrix is singular; the least-squares
    (minimum-norm) solution then has the unique ``qdd`` and the minimum-norm ``lambda``.
    ``T``: the :func:`terms` at this state, when already computed.
    """
    H, C, G, b = terms(model, cs, q, v) if T is None else T
    m = cs.m
    K = np.block([[H, -G.T], [G, np.zeros((m, m))]])
    rhs = np.concatenate([tau - C, -b])
    if np.linalg.matrix_rank(G) == m:
        sol = np.linalg.solve(K, rhs)
    else:
        sol = np.linalg.lstsq(K, rhs, rcond=1e-13)[0]
    return sol[:model.nv], sol[model.nv:]


def kkt_inverse(model, cs, q, v, qdd, B, weights=None, T=None):
    """``(u, lambda)`` with ``B u + G^T lambda = H qdd + C``; the minimum-(weighted-)norm ``u`` when
    over-actuated, from the optimality system of ``min u^T W u / 2``::

        [W 0 -B^T; 0 0 G; B G^T 0] [u; lambda; y] = [0; 0; H qdd + C]
    """
    H, C, G, _ = terms(model, cs, q, v) if T is None else T
    tau = H @ qdd + C
    nu, m, nv = B.shape[1], cs.m, model.nv
    W = np.eye(nu) if weights is None else np.diag(weights)
    K = np.block([[W, np.zeros((nu, m)), -B.T],
                  [np.zeros((m, nu)), np.zeros((m, m)), G],
                  [B, G.T, np.zeros((nv, nv))]])
    rhs = np.concatenate([np.zeros(nu + m), tau])
    if np.linalg.matrix_rank(G) == m:
        sol = np.linalg.solve(K, rhs)
    else:
        sol = np.linalg.lstsq(K, rhs, rcond=1e-13)[0]
    return sol[:nu], sol[nu:nu + m]


_STATES = {}


def example_states(name, n=100, seed=7):
    """``(mechanism, [(q, v, qdd), ...])``: ``n`` random consistent states, built once per session."""
    key = (name, n, seed)
    if key not in _STATES:
        mech = EXAMPLES[name]()
        rng = np.random.default_rng(seed)
        _STATES[key] = (mech, [mech.random_state(rng) for _ in range(n)])
    return _STATES[key]
