import numpy as np
import pytest

import sparsedyn as sd
from conftest import pendulum, random_state, rel_err


def mass_matrix_by_rnea(model, q):
    """H column by column: RNEA with unit accelerations, zero velocity and gravity."""
    z = np.zeros(model.nv)
    return np.stack([sd.rnea(model, q, z, e, gravity=np.zeros(3)) for e in np.eye(model.nv)], -1)


def kinetic_energy(model, q, v):
    vb = sd.body_velocities(model, q, v)
    return 0.5 * np.einsum("...bi,bij,...bj->...", vb, model.inertia, vb)


def test_zero_velocity_and_acceleration_is_gravity(tree, rng):
    q, _, _ = random_state(tree, rng)
    z = np.zeros(tree.nv)
    np.testing.assert_allclose(sd.rnea(tree, q, z, z), sd.generalized_gravity(tree, q), atol=1e-12)
    v = rng.normal(size=tree.nv)
    np.testing.assert_allclose(sd.rnea(tree, q, v, z), sd.nonlinear_effects(tree, q, v), atol=1e-12)


def test_rnea_is_affine_in_a(tree, rng):
    q, v, a = random_state(tree, rng)
    a2 = rng.normal(size=tree.nv)
    C = sd.nonlinear_effects(tree, q, v)
    lhs = sd.rnea(tree, q, v, 2.0 * a - 3.0 * a2) - C
    rhs = 2.0 * (sd.rnea(tree, q, v, a) - C) - 3.0 * (sd.rnea(tree, q, v, a2) - C)
    assert rel_err(lhs, rhs) < 1e-12


def test_kinetic_energy_consistency(tree, rng):
    """0.5 v^T H v = sum of body kinetic energies; H symmetric positive definite."""
    q, v, _ = random_state(tree, rng)
    H = mass_matrix_by_rnea(tree, q)
    np.testing.assert_allclose(H, H.T, atol=1e-11)
    assert np.linalg.eigvalsh(H).min() > 0
    assert 0.5 * v @ H @ v == pytest.approx(kinetic_energy(tree, q, v), rel=1e-12)


def test_power_balance(tree, rng):
    """Without gravity, v . tau = dT/dt along the motion (central differences)."""
    q, v, a = random_state(tree, rng)
    tau = sd.rnea(tree, q, v, a, gravity=np.zeros(3))
    h = 1e-5
    Tp = kinetic_energy(tree, sd.integrate(tree, q, h * v + 0.5 * h * h * a), v + h * a)
    Tm = kinetic_energy(tree, sd.integrate(tree, q, -h * v + 0.5 * h * h * a), v - h * a)
    assert (Tp - Tm) / (2 * h) == pytest.approx(v @ tau, rel=1e-6, abs=1e-7)


def test_external_forces_enter_through_body_jacobians(tree, rng):
    q, v, a = random_state(tree, rng)
    f_ext = rng.normal(size=(tree.nbodies, 6))
    expected = sd.rnea(tree, q, v, a)
    for i, name in enumerate(tree.body_names):
        expected = expected - sd.frame_jacobian(tree, q, name, "local").T @ f_ext[i]
    assert rel_err(sd.rnea(tree, q, v, a, f_ext), expected) < 1e-12


def test_hand_derived_pendulum():
    """tau = (m l^2 + Iy) qdd - (moment of gravity about the axis)."""
    m, l, Iy = 2.0, 0.7, 0.05
    model, gravity_moment = pendulum(m, l, Iy)
    q, qd, qdd = 0.4, 1.3, -0.8
    tau = sd.rnea(model, [q], [qd], [qdd])
    assert tau[0] == pytest.approx((m * l * l + Iy) * qdd - gravity_moment(q), rel=1e-13)


def test_free_body_gravity_hand_derivation():
    m, c = 3.0, np.array([0.1, 0.2, -0.05])
    b = sd.ModelBuilder("body")
    b.add_body("b", None, sd.make_joint("free"), mass=m, com=c, rot_inertia=np.eye(3) * 0.1)
    model = b.build()
    g = sd.generalized_gravity(model, model.neutral())
    lift = np.array([0, 0, 9.81 * m])
    np.testing.assert_allclose(g, np.concatenate([np.cross(c, lift), lift]), atol=1e-13)


def test_batched_equals_singles(tree, rng):
    Q, V, A = random_state(tree, rng, (4,))
    F = rng.normal(size=(4, tree.nbodies, 6))
    T = sd.rnea(tree, Q, V, A, F)
    for k in range(4):
        np.testing.assert_allclose(T[k], sd.rnea(tree, Q[k], V[k], A[k], F[k]), atol=1e-12)
    # broadcasting: one configuration, a batch of accelerations
    T2 = sd.rnea(tree, Q[0], V[0], A)
    for k in range(4):
        np.testing.assert_allclose(T2[k], sd.rnea(tree, Q[0], V[0], A[k]), atol=1e-12)
    G = sd.generalized_gravity(tree, Q)
    assert G.shape == (4, tree.nv)


def test_object_arrays_give_the_same_numbers(tree, rng):
    q, v, a = random_state(tree, rng)
    f = rng.normal(size=(tree.nbodies, 6))
    t = sd.rnea(tree, q.astype(object), v.astype(object), a.astype(object), f.astype(object))
    assert t.dtype == object
    np.testing.assert_allclose(t.astype(float), sd.rnea(tree, q, v, a, f), rtol=1e-13, atol=1e-12)


def test_bad_arguments_are_named(tree):
    q, z = tree.neutral(), np.zeros(tree.nv)
    with pytest.raises(ValueError, match=rf"a: expected shape \(\.\.\., {tree.nv}\)"):
        sd.rnea(tree, q, z, z[:-1])
    with pytest.raises(ValueError, match=rf"f_ext: expected shape \(\.\.\., {tree.nbodies}, 6\)"):
        sd.rnea(tree, q, z, z, np.zeros((tree.nbodies, 3)))
    with pytest.raises(ValueError, match=r"gravity: expected shape \(\.\.\., 3\)"):
        sd.rnea(tree, q, z, z, gravity=[0, -9.81])
    with pytest.raises(TypeError, match="v: expected a numeric array"):
        sd.rnea(tree, q, ["a"] * tree.nv, z)
    with pytest.raises(TypeError, match="q: expected an array"):
        sd.rnea(tree, None, z, z)
