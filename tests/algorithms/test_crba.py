import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.algorithms.crba import bias_kernel, crba_kernel
from conftest import random_state, rel_err


def mass_matrix_by_rnea(model, q):
    """H column by column: RNEA with unit accelerations, zero velocity and gravity."""
    z = np.zeros(model.nv)
    return np.stack([sd.rnea(model, q, z, e, gravity=np.zeros(3)) for e in np.eye(model.nv)], -1)


def test_crba_columns_equal_rnea_with_unit_accelerations(tree, rng):
    q, _, _ = random_state(tree, rng)
    assert rel_err(sd.crba(tree, q), mass_matrix_by_rnea(tree, q)) < 1e-12


def test_H_is_symmetric_positive_definite(tree, rng):
    q, _, _ = random_state(tree, rng)
    H = sd.crba(tree, q)
    assert H.shape == (tree.nv, tree.nv)
    P = sd.sparsity_pattern(tree)
    same_joint = tree.dof_body[:, None] == tree.dof_body[None, :]
    # blocks between joints are mirrored exactly; a multi-dof joint's diagonal block S^T IC S up to rounding
    np.testing.assert_array_equal(H[~same_joint], H.T[~same_joint])
    assert rel_err(H, H.T) < 1e-15
    assert P.all() or not H[~P].any()
    assert np.linalg.eigvalsh(H).min() > 0


def test_equation_of_motion_H_a_plus_C_is_rnea(tree, rng):
    q, v, a = random_state(tree, rng)
    f_ext = rng.normal(size=(tree.nbodies, 6))
    g = np.array([0.3, -1.0, -4.0])
    H, C = sd.HandC(tree, q, v)
    assert rel_err(H @ a + C, sd.rnea(tree, q, v, a)) < 1e-12
    H2, C2 = sd.HandC(tree, q, v, f_ext, gravity=g)
    np.testing.assert_array_equal(H2, H)
    assert rel_err(H @ a + C2, sd.rnea(tree, q, v, a, f_ext, gravity=g)) < 1e-12
    assert rel_err(sd.nonlinear_effects(tree, q, v, f_ext, gravity=g), C2) < 1e-15


def test_blocks_on_different_branches_are_structural_zeros(tree, rng):
    """CRBA writes only the branch-induced pattern: on object arrays every other entry
    is still the integer 0 it was allocated with (nothing was computed there)."""
    q, _, _ = random_state(tree, rng)
    P = sd.sparsity_pattern(tree)
    H = sd.crba(tree, q.astype(object))
    assert H.dtype == object
    assert all(type(x) is int and x == 0 for x in H[~P])
    assert not any(type(x) is int for x in H[P])
    assert np.all(sd.crba(tree, q)[~P] == 0.0)


def test_hand_derived_double_pendulum():
    """Planar double pendulum (revolute about z, point masses at the link ends)."""
    m1, m2, l1, l2 = 1.5, 0.7, 0.4, 0.3
    b = sd.ModelBuilder("dp")
    tiny = np.eye(3) * 1e-3
    b.add_body("l1", None, sd.make_joint("revolute"), mass=m1, com=[l1, 0, 0], rot_inertia=tiny)
    b.add_body("l2", "l1", sd.make_joint("revolute"), sd.spatial.xlt(np.array([l1, 0, 0])),
               mass=m2, com=[l2, 0, 0], rot_inertia=tiny)
    model = b.build()
    q2 = 0.7
    H = sd.crba(model, [0.3, q2])
    h11 = tiny[2, 2] * 2 + m1 * l1 ** 2 + m2 * (l1 ** 2 + l2 ** 2 + 2 * l1 * l2 * np.cos(q2))
    h12 = tiny[2, 2] + m2 * (l2 ** 2 + l1 * l2 * np.cos(q2))
    h22 = tiny[2, 2] + m2 * l2 ** 2
    np.testing.assert_allclose(H, [[h11, h12], [h12, h22]], rtol=1e-14)


def test_batched_equals_singles(tree, rng):
    Q, V, _ = random_state(tree, rng, (3,))
    F = rng.normal(size=(3, tree.nbodies, 6))
    H = sd.crba(tree, Q)
    HH, CC = sd.HandC(tree, Q, V, F)
    assert H.shape == (3, tree.nv, tree.nv) and CC.shape == (3, tree.nv)
    for k in range(3):
        np.testing.assert_array_equal(H[k], sd.crba(tree, Q[k]))
        assert rel_err(CC[k], sd.nonlinear_effects(tree, Q[k], V[k], F[k])) < 1e-14
    np.testing.assert_array_equal(HH, H)
    # broadcasting: one configuration, a batch of velocities
    H1, C1 = sd.HandC(tree, Q[0], V)
    assert H1.shape == (3, tree.nv, tree.nv)
    for k in range(3):
        assert rel_err(C1[k], sd.nonlinear_effects(tree, Q[0], V[k])) < 1e-14
    Q2 = Q.reshape(3, 1, tree.nq)
    assert sd.crba(tree, Q2).shape == (3, 1, tree.nv, tree.nv)


def test_object_arrays_give_the_same_numbers(tree, rng):
    q, v, _ = random_state(tree, rng)
    f = rng.normal(size=(tree.nbodies, 6))
    o = lambda x: x.astype(object)  # noqa: E731
    H, C = sd.HandC(tree, o(q), o(v), o(f))
    assert H.dtype == object and C.dtype == object
    assert rel_err(H.astype(float), sd.crba(tree, q)) < 1e-13
    assert rel_err(C.astype(float), sd.nonlinear_effects(tree, q, v, f)) < 1e-13
    # kernels directly
    assert rel_err(crba_kernel(tree, o(q)).astype(float), sd.crba(tree, q)) < 1e-13
    assert rel_err(bias_kernel(tree, o(q), o(v)).astype(float), sd.nonlinear_effects(tree, q, v)) < 1e-13


def test_bad_arguments_are_named(tree):
    q, z = tree.neutral(), np.zeros(tree.nv)
    with pytest.raises(ValueError, match=rf"q: expected shape \(\.\.\., {tree.nq}\)"):
        sd.crba(tree, q[:-1])
    with pytest.raises(ValueError, match=rf"v: expected shape \(\.\.\., {tree.nv}\)"):
        sd.nonlinear_effects(tree, q, z[1:])
    with pytest.raises(ValueError, match=rf"f_ext: expected shape \(\.\.\., {tree.nbodies}, 6\)"):
        sd.HandC(tree, q, z, np.zeros((tree.nbodies, 5)))
    with pytest.raises(ValueError, match=r"gravity: expected shape \(\.\.\., 3\)"):
        sd.nonlinear_effects(tree, q, z, gravity=[1.0])
    with pytest.raises(ValueError, match="q: contains NaN"):
        sd.crba(tree, np.full(tree.nq, np.nan))
