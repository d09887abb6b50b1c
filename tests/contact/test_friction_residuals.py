"""The friction cones and Coulomb's law's residuals (sparsedyn.contact.friction_residuals): the
projection onto a cone is the nearest point of it; the cone and its dual decompose every vector
(Moreau: ``x = P_K(x) - P_K*(-x)`` with orthogonal parts, ``K*`` the dual cone ``mu |t| <= n``); the
residuals vanish on the two modes of Coulomb's law derived by hand (stick: impulse inside the cone,
no contact velocity; slide: impulse on the cone's edge against the sliding velocity) and measure the
distance from them otherwise."""

import numpy as np

from sparsedyn.contact.friction_residuals import _project_dual, _residuals, project_cone

MU = np.array([0.2, 1.0, 3.0, 0.0])                                # 0: the normal half-line


def test_cone_projection_is_the_nearest_point():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 4, 3))
    p = project_cone(x, MU)
    assert np.all(np.linalg.norm(p[..., :2], axis=-1) <= MU * p[..., 2] + 1e-12)
    # nearest: no sampled point of the cone is closer
    for _ in range(50):
        y = project_cone(rng.normal(size=(200, 4, 3)), MU)
        assert np.all(np.linalg.norm(x - p, axis=-1) <= np.linalg.norm(x - y, axis=-1) + 1e-12)


def test_the_cone_and_its_dual_decompose_every_vector():
    """Moreau's decomposition of ``x``: ``P_K(x) - P_K*(-x) = x``, the two
    parts orthogonal, each in its cone (to the rounding of a few operations on unit numbers)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 4, 3))
    x[:50, :, :2] *= 1e-3                                           # near the axis, inside either cone
    p, d = project_cone(x, MU), _project_dual(-x, MU)
    eps = 64 * np.finfo(float).eps * (1 + np.abs(x).max())
    assert np.abs(p - d - x).max() <= eps
    assert np.abs(np.sum(p * d, -1)).max() <= eps * np.abs(x).max()
    assert np.all(np.linalg.norm(p[..., :2], axis=-1) <= MU * p[..., 2] + eps)
    assert np.all(MU * np.linalg.norm(d[..., :2], axis=-1) <= d[..., 2] + eps)


def test_the_residuals_vanish_on_coulombs_law_and_measure_a_violation():
    """Three contacts by hand, mu = 0.5: sticking (impulse inside the cone, no velocity), sliding at
    2 m/s along x (impulse mu n against it, no normal velocity), open (no impulse, separating at 1 m/s).
    Then an impulse outside the cone (primal), a penetrating velocity (dual) and a sticking impulse
    with a sliding velocity (complementarity), each by its hand value."""
    mu = np.full(3, 0.5)
    z = np.array([[0.1, -0.05, 1.0], [-0.5 * 2.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    u = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.3, 0.0, 1.0]])
    assert _residuals(z, z, u, mu) == (0.0, 0.0, 0.0)
    x = z.copy()
    x[0, 0] += 0.25                                                 # the ADMM copy apart from z
    assert abs(_residuals(z, x, u, mu)[0] - 0.25) <= 4 * np.finfo(float).eps
    v = u.copy()
    v[1, 2] = -0.4                                                  # sliding into the ground: w = (2, 0, 0.6)
    # the distance of w from the dual cone mu |t| <= n: onto the ray (1, 0, mu) by (2 + mu 0.6) / (1 + mu^2)
    s = (2.0 + 0.5 * 0.6) / 1.25
    want = np.hypot(2.0 - s, 0.6 - 0.5 * s)
    assert abs(_residuals(z, z, v, mu)[1] - want) <= 4 * np.finfo(float).eps
    v = u.copy()
    v[0] = [1.0, 0.0, 0.0]                                          # the sticking contact slides: z . w
    assert abs(_residuals(z, z, v, mu)[2] - abs(0.1 * 1.0 + 1.0 * 0.5 * 1.0)) <= 4 * np.finfo(float).eps
