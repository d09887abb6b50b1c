"""The friction cones and Coulomb's law's residuals of the contact step's solver
(:mod:`~sparsedyn.contact.friction_kernel`), branch-free (the stages are traced): the projections onto
the cones and their duals, the residuals of an iterate, and the scales and test that stop the solve.

The stopping test compares each residual with ``tol`` times the scale of its unit: the impulse scale
(the largest impulse), the velocity scale (the largest free contact velocity) and their product.
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .friction_problem import _TINY, _abs, _norms, _relu, _step, _vmax

__all__ = ["project_cone"]


def project_cone(x, mu):
    """Projection of ``x`` (..., nc, 3) ``[t_x, t_y, n]`` onto the friction cones ``|t| <= mu n``
    (``mu`` (nc,), ``mu >= 0``; ``mu = 0``: the normal half-line), without branches."""
    t, n = x[..., :2], x[..., 2]
    r = _norms(t)
    inside = _step(mu * n - r)
    nb = _relu((mu * r + n) / (1.0 + mu * mu))                # boundary, or the apex (0) below the dual cone
    scale = mu * nb / (r + _TINY)
    out = np.concatenate([t * scale[..., None], nb[..., None]], -1)
    return inside[..., None] * x + (1.0 - inside[..., None]) * out


def _project_dual(w, mu):
    """Projection of ``w`` (nc, 3) onto the dual cones ``mu |t| <= n`` (``mu = 0``: the half-space
    ``n >= 0``): onto the ray ``(t / |t|, mu)`` by ``(|t| + mu n) / (1 + mu^2)``, 0 below it."""
    t, n = w[..., :2], w[..., 2]
    r = _norms(t)
    inside = _step(n - mu * r)
    s = _relu(r + mu * n) / (1.0 + mu * mu)
    out = np.concatenate([t * (s / (r + _TINY))[..., None], (mu * s)[..., None]], -1)
    return inside[..., None] * w + (1.0 - inside[..., None]) * out


def _residuals(z, x, u, mu):
    """``(primal, dual, complementarity)`` of impulses ``z`` (nc, 3), the ADMM ``x`` and the contact
    velocities ``u = G z + g`` (nc, 3): ``|x - z|``, the distance of ``u + Phi(u)`` from the dual
    cones, ``|z . (u + Phi(u))|`` (the largest over the contacts)."""
    w = u.copy()
    w[:, 2] = w[:, 2] + mu * _norms(u[:, :2])
    d = w - _project_dual(w, mu)
    dual = _vmax(bk.sqrt(np.sum(d * d, -1)))
    comp = _vmax(_abs(np.sum(z * w, -1)))
    return _vmax(_abs(x - z)), dual, comp


def _scales(z, gmax, dmax):
    """Impulse and velocity scales of the stopping tests: the largest impulse of ``z`` (at least 1e-4
    of the one that would stop the free motion of a contact) and the largest free contact velocity
    ``gmax`` (``max diag G`` times the impulse scale where it is zero)."""
    ls = _vmax([_vmax(_abs(z)), 1e-4 * gmax / (dmax + (1.0 - _step(dmax - _TINY)))])
    vs = gmax + (1.0 - _step(gmax - _TINY)) * dmax * ls
    return _vmax([ls, _TINY]), _vmax([vs, _TINY])


def _converged(res, ls, vs, tol):
    """1 where the residuals ``res`` are below ``tol`` times their scales (the module docstring), else 0."""
    return _step(tol * ls - res[0]) * _step(tol * vs - res[1]) * _step(tol * ls * vs - res[2])

