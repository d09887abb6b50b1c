"""The velocity projection (:func:`sparsedyn.constraints.project_velocity`): the smallest change.

``project_velocity(cs, q, v)`` documents the Euclidean metric: it returns the velocity ``v*`` with
``G v* = 0`` closest to ``v`` in ``|.|_2``.  Checked against SciPy, which shares no code with it:
the KKT system of ``min |w - v|^2 / 2`` subject to ``G w = 0``, ``[I G^T; G 0] [w; mu] = [v; 0]``, by
least squares (the planar loops have redundant rows), and the projector ``N N^T`` onto an orthonormal
basis ``N`` of the null space of ``G`` (``scipy.linalg.null_space``, from the SVD).  Then the
minimality itself: every other feasible velocity ``w = v* + N z`` is farther from ``v``, by exactly
``|N z|^2`` (Pythagoras: ``v - v*`` is orthogonal to the null space).  The compiled projection of a
compiled set meets the same oracle (tests/compile/test_compile_constraints.py).
"""

import numpy as np
import pytest
import scipy.linalg

from conftest import EPS, rel_err
from sparsedyn.constraints import example, project_velocity


def _bound(G, v, c=16.0):
    """Two backward-stable least-squares projections differ by about ``nv eps cond(G) |v|`` (``cond``
    over the nonzero singular values: redundant rows do not count)."""
    s = np.linalg.svd(G, compute_uv=False)
    s = s[s > 1e-9 * s[0]]
    return c * G.shape[1] * EPS * (s[0] / s[-1]) * max(1.0, np.abs(v).max())


def _cases(name, n=4):
    mech = example(name)
    rng = np.random.default_rng(5)
    for _ in range(n):
        q, _, _ = mech.random_state(rng)             # a configuration on the loop
        yield mech.constraints, q, rng.normal(size=mech.model.nv)     # any velocity: G v != 0


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "delta_robot", "humanoid_double_support"])
def test_project_velocity_is_the_smallest_euclidean_change(name):
    rng = np.random.default_rng(9)
    for cs, q, v in _cases(name):
        G = cs.jacobian(q)
        m, nv = G.shape
        assert np.abs(G @ v).max() > 1e-3                       # the input violates the constraints
        ours = project_velocity(cs, q, v)
        bound = _bound(G, v)
        K = np.block([[np.eye(nv), G.T], [G, np.zeros((m, m))]])
        kkt = scipy.linalg.lstsq(K, np.concatenate([v, np.zeros(m)]), cond=1e-12)[0][:nv]
        N = scipy.linalg.null_space(G)
        assert rel_err(ours, kkt) < bound
        assert rel_err(ours, N @ (N.T @ v)) < bound
        assert np.abs(G @ ours).max() < bound * np.abs(G).max() * nv           # feasible
        # optimality: the change v - v* is orthogonal to every feasible direction (N^T (v - v*) = 0), so any
        # other feasible velocity w = v* + N z is farther from v, by |N z|^2 = |z|^2
        assert np.abs(N.T @ (v - ours)).max() < np.sqrt(nv) * bound
        d_star = np.sum((v - ours) ** 2)
        for _ in range(5):
            z = rng.normal(scale=10.0 ** rng.uniform(-3, 0), size=N.shape[1])
            d_w = np.sum((v - ours - N @ z) ** 2)
            assert d_w > d_star
            assert abs(d_w - d_star - z @ z) < 2 * np.sqrt(nv) * bound * np.abs(z).sum() + 8 * nv * EPS * (d_w + d_star)
