import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.algorithms.minv import minv_kernel
from conftest import random_state, rel_err


def test_minv_inverts_crba(tree, rng):
    q, _, _ = random_state(tree, rng)
    Minv = sd.minv(tree, q)
    H = sd.crba(tree, q)
    assert Minv.shape == (tree.nv, tree.nv)
    assert rel_err(Minv @ H, np.eye(tree.nv)) < 1e-11
    assert rel_err(H @ Minv, np.eye(tree.nv)) < 1e-11
    np.testing.assert_array_equal(Minv, Minv.T)          # mirrored from one triangle
    assert np.linalg.eigvalsh(Minv).min() > 0


def test_minv_columns_are_aba_with_unit_forces(tree, rng):
    """Column k of H^-1 is the acceleration produced by a unit force at dof k, at rest, without gravity."""
    q, _, _ = random_state(tree, rng)
    z = np.zeros(tree.nv)
    cols = np.stack([sd.aba(tree, q, z, e, gravity=np.zeros(3)) for e in np.eye(tree.nv)], -1)
    assert rel_err(sd.minv(tree, q), cols) < 1e-12


def test_forward_dynamics_through_minv(tree, rng):
    q, v, a = random_state(tree, rng)
    f_ext = rng.normal(size=(tree.nbodies, 6))
    tau = sd.rnea(tree, q, v, a, f_ext)
    assert rel_err(sd.minv(tree, q) @ (tau - sd.nonlinear_effects(tree, q, v, f_ext)), a) < 1e-10


def test_batched_equals_singles(tree, rng):
    Q, _, _ = random_state(tree, rng, (3,))
    M = sd.minv(tree, Q)
    assert M.shape == (3, tree.nv, tree.nv)
    for k in range(3):
        np.testing.assert_array_equal(M[k], sd.minv(tree, Q[k]))
    assert sd.minv(tree, Q.reshape(1, 3, tree.nq)).shape == (1, 3, tree.nv, tree.nv)


def test_object_arrays_give_the_same_numbers(tree, rng):
    q, _, _ = random_state(tree, rng)
    M = sd.minv(tree, q)
    Mo = sd.minv(tree, q.astype(object))
    assert Mo.dtype == object
    # object arithmetic sums in a different order than BLAS; cond(H) reaches 1e5 on these trees
    assert rel_err(Mo.astype(float), M) < 1e-11
    assert rel_err(minv_kernel(tree, q.astype(object)).astype(float), M) < 1e-11


def test_two_separate_trees_decouple():
    """Bodies on different roots: H and H^-1 are block diagonal (exact zeros, never computed)."""
    b = sd.ModelBuilder("two")
    for name in ("a", "b"):
        b.add_body(f"{name}1", None, sd.make_joint("revolute", (0, 1, 0)), mass=1.0, com=[0, 0, -0.3],
                   rot_inertia=np.eye(3) * 0.01)
        b.add_body(f"{name}2", f"{name}1", sd.make_joint("spherical"), sd.spatial.xlt(np.array([0, 0, -0.5])),
                   mass=0.5, com=[0.1, 0, -0.2], rot_inertia=np.diag([0.01, 0.02, 0.03]))
    model = b.build()
    q = model.random_configuration(3)
    M = sd.minv(model, q)
    np.testing.assert_array_equal(M[:4, 4:], 0.0)
    assert rel_err(M @ sd.crba(model, q), np.eye(8)) < 1e-12
    Mo = sd.minv(model, q.astype(object))
    assert all(type(x) is int and x == 0 for x in Mo[:4, 4:].ravel())


def test_bad_arguments_are_named(tree):
    with pytest.raises(ValueError, match=rf"q: expected shape \(\.\.\., {tree.nq}\)"):
        sd.minv(tree, np.zeros(tree.nq + 1))
    with pytest.raises(TypeError, match="q: expected an array"):
        sd.minv(tree, None)
