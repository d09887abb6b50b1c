"""The friction cones and Coulomb's law's residuals of the contact step's solver
(:mod:`~sparsedyn.contact.friction_kernel`), branch-free (the stages are traced): the projections onto
the cones and their duals, the residuals of an iterate, and the scales and test that stop the solve.

The stopping test compares each residual with ``tol`` times the scale of its unit, and the scales are
those of the contacts that matter to the solution:

* impulses [N s]: the largest impulse, at least ``1e-4`` of the one that would stop the largest free
  contact velocity at the stiffest contact (``max |g| / max diag G``: the problem's own size before
  any impulse is found);
* velocities [m/s]: the largest free velocity that the impulses must cancel, the tangential
  velocity and the closing normal velocity (``-g_n > 0``) of each closing contact
  (:func:`velocity_scale`).  An open contact's free velocity is no such velocity: a speculative
  contact within the margin carries its gap over the step, ``gap / dt``, in ``g_n`` (5 mm over a
  millisecond: 5 m/s, where a robot resting on the floor has free velocities of ``g dt``, 0.01 m/s),
  and a contact moving apart needs no impulse to stay apart.  Such a scale would loosen the test of
  the contacts that carry the load by its ratio (400 on talos lying on a box) and, read by the
  penalty's residual balancing, set ``rho`` for velocities nothing has.  Where no contact closes
  (all move apart or stay open within the margin), the largest free velocity of all is the scale;
* complementarity [J]: their product, so that ``|lambda . (u + Phi(u))| <= tol ls vs`` is what a
  velocity error of ``tol vs`` at the largest impulse makes: the three tests ask the same relative
  accuracy of the impulses and of the velocities.
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .friction_problem import _TINY, _abs, _norms, _relu, _step, _vmax

__all__ = ["project_cone", "velocity_scale", "closing_contacts"]

#: The velocity scale's floor relative to the largest free joint velocity (:func:`velocity_scale`): far
#: below any closing velocity a step resolves (a resting robot's ``g dt`` against its joints' free
#: velocities), far above the rounding of a difference of two equal point velocities.
VELOCITY_FLOOR = 1e-6


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


def closing_contacts(g):
    """1 for each closing contact of the free contact velocities ``g`` (nc, 3) ``[t_x, t_y, n]`` (``g_n <
    0``; ``-0.0``, a zero row, counts as closing and adds nothing to a scale), else 0 (nc,)."""
    return 1.0 - _step(g[:, 2])


def velocity_scale(g, v_free):
    """The velocity scale [m/s] of the free contact velocities ``g`` (nc, 3) ``[t_x, t_y, n]`` (the
    module docstring): the largest tangential or closing normal velocity of a closing contact
    (:func:`closing_contacts`); where none closes, the largest free velocity of all (the problem's own
    size: a scale of zero would ask the residuals' rounding crumbs to vanish).  At least
    :data:`VELOCITY_FLOOR` times the largest free joint velocity ``v_free`` (nv,): two shapes that move
    together (a self-collision pair overlapping at rest) have a free velocity that is the rounding of
    their difference, no velocity the impulses cancel, and a test relative to it asks the impossible."""
    closing = _vmax(_abs(g) * closing_contacts(g)[:, None])
    scale = closing + (1.0 - _step(closing - _TINY)) * _vmax(_abs(g))
    return _vmax([scale, VELOCITY_FLOOR * _vmax(_abs(v_free))])


def _scales(z, gmax, dmax):
    """Impulse and velocity scales of the stopping tests (the module docstring): the largest impulse of
    ``z`` (at least 1e-4 of ``gmax / dmax``) and the velocity scale ``gmax`` (:func:`velocity_scale`;
    ``max diag G`` times the impulse scale where it is zero: no free velocity at all)."""
    ls = _vmax([_vmax(_abs(z)), 1e-4 * gmax / (dmax + (1.0 - _step(dmax - _TINY)))])
    vs = gmax + (1.0 - _step(gmax - _TINY)) * dmax * ls
    return _vmax([ls, _TINY]), _vmax([vs, _TINY])


def scaled_residual(res, ls, vs, tol):
    """The largest of the residuals ``res`` (3,) relative to their stopping tests (:func:`_converged`): below 1, met."""
    return _vmax([res[0] / (tol * ls), res[1] / (tol * vs), res[2] / (tol * ls * vs)])


def _converged(res, ls, vs, tol):
    """1 where the residuals ``res`` are below ``tol`` times their scales (the module docstring), else 0."""
    return _step(tol * ls - res[0]) * _step(tol * vs - res[1]) * _step(tol * ls * vs - res[2])

