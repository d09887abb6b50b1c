"""Physically consistent parameters: every body's pseudo-inertia positive semidefinite (Wensing, Kim and
Slotine, *Linear matrix inequalities for physically consistent inertial parameter identification*,
2017), fitted by a log-barrier interior-point method (Boyd and Vandenberghe, *Convex Optimization*,
2004, chapter 11); see :mod:`sparsedyn.identification`."""

from __future__ import annotations

import numpy as np

from ..algorithms.regressor import NPARAM

__all__ = ["pseudo_inertia", "parameters_from_pseudo_inertia"]


def pseudo_inertia(pi):
    """Pseudo-inertia matrices (..., NB, 4, 4) ``[[Sigma, h], [h^T, m]]`` of parameters ``pi`` (..., 10 NB)
    (``Sigma = tr(I)/2 1 - I`` is the second moment of mass about the body origin)."""
    P = np.asarray(pi, float).reshape(np.shape(pi)[:-1] + (-1, NPARAM))
    m, h = P[..., 0], P[..., 1:4]
    Ixx, Ixy, Iyy, Ixz, Iyz, Izz = np.moveaxis(P[..., 4:], -1, 0)
    I = np.stack([np.stack([Ixx, Ixy, Ixz], -1), np.stack([Ixy, Iyy, Iyz], -1), np.stack([Ixz, Iyz, Izz], -1)], -2)
    Sigma = 0.5 * np.trace(I, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - I
    top = np.concatenate([Sigma, h[..., :, None]], -1)
    bottom = np.concatenate([h, m[..., None]], -1)[..., None, :]
    return np.concatenate([top, bottom], -2)


def parameters_from_pseudo_inertia(J):
    """Inverse of :func:`pseudo_inertia`: parameters (..., 10 NB) of pseudo-inertias (..., NB, 4, 4)."""
    J = np.asarray(J, float)
    Sigma, h, m = J[..., :3, :3], J[..., :3, 3], J[..., 3, 3]
    I = np.trace(Sigma, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - Sigma
    P = np.concatenate([m[..., None], h, np.stack([I[..., 0, 0], I[..., 0, 1], I[..., 1, 1], I[..., 0, 2],
                                                   I[..., 1, 2], I[..., 2, 2]], -1)], -1)
    return P.reshape(P.shape[:-2] + (-1,))


#: ``E[k]`` (10, 4, 4): the pseudo-inertia is ``J = sum_k pi_k E[k]`` (it is linear in the parameters).
_E = pseudo_inertia(np.eye(NPARAM))[:, 0]


def _lift(pi, nb, rel=1e-6):
    """Parameters whose pseudo-inertias are ``J`` with every eigenvalue raised to at least ``rel`` times the
    largest (a strictly feasible point for the barrier)."""
    w, V = np.linalg.eigh(pseudo_inertia(pi))
    floor = rel * np.maximum(np.abs(w).max(-1, keepdims=True), 1e-9)
    return parameters_from_pseudo_inertia((V * np.maximum(w, floor)[..., None, :]) @ np.swapaxes(V, -1, -2))


def _consistent_fit(R, c, pi0, ref, lam2, nb, tol=1e-10):
    """``min |R pi - c|^2 + lam2 |pi - ref|^2`` subject to ``J_j(pi) >= 0`` for every body (``R`` (k, n),
    ``c`` (k,): a factor of the measurement rows, ``|A pi - b|^2 = |R pi - c|^2 + const``), by the
    barrier method: minimise ``t f(pi) - sum_j log det J_j(pi)`` by Newton's method for increasing
    ``t``; the gap to the optimum is at most ``4 NB / t``."""
    from scipy.linalg import cho_factor, cho_solve

    n = R.shape[1]
    Hf = 2 * (R.T @ R + lam2 * np.eye(n))
    gf0 = 2 * (R.T @ c + lam2 * ref)

    def f(pi):
        return float(np.sum((R @ pi - c) ** 2) + lam2 * np.sum((pi - ref) ** 2))

    def barrier(pi):
        """``(-sum log det J, gradient, block Hessian (NB, 10, 10))``, or None outside the cone."""
        J = pseudo_inertia(pi)
        try:
            L = np.linalg.cholesky(J)
        except np.linalg.LinAlgError:
            return None
        phi = -2 * np.sum(np.log(np.diagonal(L, 0, -2, -1)))
        G = np.linalg.inv(J)[:, None] @ _E                         # J^-1 E_k  (NB, 10, 4, 4)
        g = -np.trace(G, axis1=-2, axis2=-1).reshape(-1)
        H = np.einsum("jkab,jlba->jkl", G, G)
        return phi, g, H

    starts = [_lift(pi0, nb), _lift(ref, nb)]
    pi = min(starts, key=f)
    m = 4 * nb                                                      # barrier parameter (4 x 4 cones)
    t = m / max(f(pi), 1e-12)
    for _ in range(60):                                             # outer: t grows tenfold each time
        for _ in range(50):                                         # Newton on t f + phi
            phi, gb, Hb = barrier(pi)
            g = t * (Hf @ pi - gf0) + gb
            H = t * Hf
            for j in range(nb):
                H[NPARAM * j:NPARAM * (j + 1), NPARAM * j:NPARAM * (j + 1)] += Hb[j]
            step = -cho_solve(cho_factor(H), g)
            dec = -g @ step                                         # Newton decrement squared
            if dec < 1e-10:
                break
            F0, s = t * f(pi) + phi, 1.0
            while True:                                             # backtracking, staying inside the cone
                new = pi + s * step
                bn = barrier(new)
                if bn is not None and t * f(new) + bn[0] <= F0 - 0.25 * s * dec:
                    break
                s *= 0.5
                if s < 1e-12:
                    break
            if s < 1e-12:
                break
            pi = new
        if m / t < tol * max(1.0, f(pi)):
            break
        t *= 10.0
    return pi
