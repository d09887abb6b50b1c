"""Centroidal dynamics: identities on random trees of every joint type.

* ``A_G v`` is the total momentum about the CoM (summed body by body here, by hand);
* the rate of the momentum is the total external wrench (joint wrenches from the world into the
  roots, external forces on the bodies, gravity), all about the CoM;
* ``Adot_G v`` is the rate at zero acceleration, and equals ``d/dt (A_G) v`` (finite differences).
"""
import numpy as np

import sparsedyn as sd
from sparsedyn.algorithms.rnea import rnea_passes
from conftest import random_state, rel_err


def world_wrench_about(model, q, f_body, c):
    """Body-frame wrenches (NB, 6) -> their sum about the point ``c``, world axes."""
    R, p = sd.forward_kinematics(model, q)
    n = np.einsum("bij,bj->bi", R, f_body[:, :3])
    f = np.einsum("bij,bj->bi", R, f_body[:, 3:])
    return np.concatenate([(n + np.cross(p - c, f)).sum(0), f.sum(0)])


def momentum_by_hand(model, q, v):
    vb = sd.body_velocities(model, q, v)
    hb = np.einsum("bij,bj->bi", model.inertia, vb)           # body momenta, body frames
    return world_wrench_about(model, q, hb, sd.center_of_mass(model, q))


def test_A_G_v_is_total_momentum(tree, rng):
    q, v, _ = random_state(tree, rng)
    h = momentum_by_hand(tree, q, v)
    assert rel_err(sd.centroidal_momentum_matrix(tree, q) @ v, h) < 1e-12
    assert rel_err(sd.centroidal_momentum(tree, q, v), h) < 1e-12
    # linear momentum = M vcom; I_G maps the average velocity to h_G and has no first moment
    assert rel_err(h[3:], tree.total_mass * sd.com_jacobian(tree, q) @ v) < 1e-12
    I_G = sd.centroidal_composite_inertia(tree, q)
    assert rel_err(I_G, I_G.T) < 1e-15 and np.all(I_G[:3, 3:] == 0)
    assert rel_err(I_G[3:, 3:], tree.total_mass * np.eye(3)) < 1e-15
    # locked: every joint velocity equal to a common rigid motion of the whole system is only
    # possible for a floating base; then h_G = I_G v_G with the base twist at the CoM
    if tree.joints[0].type == "free":
        vv = np.zeros(tree.nv)
        vv[:6] = v[:6]
        R, p = sd.forward_kinematics(tree, q)
        w = R[0] @ v[:3]
        vO = R[0] @ v[3:6]                                     # velocity of the base origin, world
        c = sd.center_of_mass(tree, q)
        vG = np.concatenate([w, vO + np.cross(w, c - p[0])])
        assert rel_err(sd.centroidal_momentum(tree, q, vv), I_G @ vG) < 1e-12


def test_momentum_rate_is_total_external_wrench(tree, rng):
    q, v, a = random_state(tree, rng)
    f_ext = rng.normal(size=(tree.nbodies, 6))
    _, _, f, _ = rnea_passes(tree, q, v, a, f_ext)
    c = sd.center_of_mass(tree, q)
    roots = np.zeros((tree.nbodies, 6))
    for i in range(tree.nbodies):
        if tree.parent[i] < 0:
            roots[i] = f[i]                                     # wrench the world exerts on root i
    gravity = np.concatenate([np.zeros(3), tree.total_mass * tree.gravity])
    expected = world_wrench_about(tree, q, roots + f_ext, c) + gravity
    h, hdot = sd.centroidal_momentum_rate(tree, q, v, a)
    assert rel_err(hdot, expected) < 1e-11
    assert rel_err(sd.centroidal_momentum_matrix(tree, q) @ a + sd.centroidal_momentum_matrix_dot_v(tree, q, v),
                   hdot) < 1e-11
    # central differences of h along the motion (error ~ h^2 |h'''|)
    dt = 1e-4
    hp = sd.centroidal_momentum(tree, sd.integrate(tree, q, dt * v + 0.5 * dt * dt * a), v + dt * a)
    hm = sd.centroidal_momentum(tree, sd.integrate(tree, q, -dt * v + 0.5 * dt * dt * a), v - dt * a)
    assert rel_err((hp - hm) / (2 * dt), hdot) < 1e-6


def test_batched_equals_single_and_object_arrays(tree, rng):
    q, v, a = random_state(tree, rng, (2,))
    outs = [sd.centroidal_momentum_matrix(tree, q), sd.centroidal_momentum(tree, q, v),
            sd.centroidal_momentum_matrix_dot_v(tree, q, v), sd.centroidal_momentum_rate(tree, q, v, a)[1],
            sd.centroidal_composite_inertia(tree, q)]
    for k in range(2):
        single = [sd.centroidal_momentum_matrix(tree, q[k]), sd.centroidal_momentum(tree, q[k], v[k]),
                  sd.centroidal_momentum_matrix_dot_v(tree, q[k], v[k]),
                  sd.centroidal_momentum_rate(tree, q[k], v[k], a[k])[1], sd.centroidal_composite_inertia(tree, q[k])]
        for x, y in zip(outs, single):
            assert rel_err(x[k], y) < 1e-14
    o = lambda x: np.asarray(x, dtype=object)  # noqa: E731
    objs = [sd.centroidal_momentum_matrix(tree, o(q[0])), sd.centroidal_momentum(tree, o(q[0]), o(v[0])),
            sd.centroidal_momentum_matrix_dot_v(tree, o(q[0]), o(v[0])),
            sd.centroidal_momentum_rate(tree, o(q[0]), o(v[0]), o(a[0]))[1], sd.centroidal_composite_inertia(tree, o(q[0]))]
    for x, y in zip(objs, outs):
        assert rel_err(np.asarray(x, float), y[0]) < 1e-12
