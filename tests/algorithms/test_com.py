"""Centre of mass: identities on random trees of every joint type (hand sums, finite differences)."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.model.spatial import inertia_components
from conftest import random_state, rel_err


def com_by_hand(model, q):
    """sum_i m_i (p_i + R_i c_i) / M from forward kinematics."""
    R, p = sd.forward_kinematics(model, q)
    m, c, _ = inertia_components(model.inertia)
    return np.einsum("b,...bi->...i", m, p + np.einsum("...bij,bj->...bi", R, c)) / m.sum()


def path(model, q, v, a, t):
    """State at time t along q(t) = q (+) (t v + t^2/2 a), whose velocity is v + t a + O(t^2)."""
    return sd.integrate(model, q, t * v + 0.5 * t * t * a), v + t * a


def test_com_is_mass_weighted_mean(tree, rng):
    q, _, _ = random_state(tree, rng, (3,))
    assert rel_err(sd.center_of_mass(tree, q), com_by_hand(tree, q)) < 1e-13


def test_velocity_acceleration_and_jacobian_are_derivatives(tree, rng):
    q, v, a = random_state(tree, rng)
    com, vcom, acom = sd.center_of_mass(tree, q, v, a)
    assert rel_err(sd.center_of_mass(tree, q, v)[1], vcom) < 1e-14
    assert rel_err(sd.com_jacobian(tree, q) @ v, vcom) < 1e-12
    h = 1e-4
    qp, vp = path(tree, q, v, a, h)
    qm, vm = path(tree, q, v, a, -h)
    # central differences: error ~ h^2 |x'''| (about 1e-8 here), rounding ~ 1e-16 / h
    assert rel_err((sd.center_of_mass(tree, qp) - sd.center_of_mass(tree, qm)) / (2 * h), vcom) < 1e-6
    dv = (sd.center_of_mass(tree, qp, vp)[1] - sd.center_of_mass(tree, qm, vm)[1]) / (2 * h)
    assert rel_err(dv, acom) < 1e-6


def test_subtrees(tree, rng):
    q, _, _ = random_state(tree, rng)
    ms = sd.subtree_masses(tree)
    cs = sd.subtree_centers_of_mass(tree, q)
    R, p = sd.forward_kinematics(tree, q)
    m, c, _ = inertia_components(tree.inertia)
    world_c = p + np.einsum("bij,bj->bi", R, c)
    for i in range(tree.nbodies):
        sub = slice(i, tree.subtree_end[i])
        assert ms[i] == pytest.approx(m[sub].sum(), rel=1e-14)
        assert rel_err(cs[i], m[sub] @ world_c[sub] / m[sub].sum()) < 1e-13
    roots = [i for i in range(tree.nbodies) if tree.parent[i] < 0]
    assert rel_err(sum(ms[r] * cs[r] for r in roots) / ms[roots].sum(), sd.center_of_mass(tree, q)) < 1e-13


def test_batched_equals_single_and_object_arrays(tree, rng):
    q, v, a = random_state(tree, rng, (2, 3))
    out = sd.center_of_mass(tree, q, v, a)
    J = sd.com_jacobian(tree, q)
    for k in np.ndindex(2, 3):
        for x, y in zip(out, sd.center_of_mass(tree, q[k], v[k], a[k])):
            assert rel_err(x[k], y) < 1e-15
        assert rel_err(J[k], sd.com_jacobian(tree, q[k])) < 1e-15
    obj = lambda x: np.asarray(x[0, 0], dtype=object)  # noqa: E731
    for x, y in zip(sd.center_of_mass(tree, obj(q), obj(v), obj(a)), out):
        assert rel_err(x.astype(float), y[0, 0]) < 1e-13
    assert rel_err(sd.com_jacobian(tree, obj(q)).astype(float), J[0, 0]) < 1e-13


def test_bad_input():
    model = sd.random_tree(3, seed=0)
    with pytest.raises(TypeError, match="a .* without v"):
        sd.center_of_mass(model, model.neutral(), a=np.zeros(model.nv))
    with pytest.raises(ValueError, match=r"v: expected shape \(\.\.\., 3\)"):
        sd.center_of_mass(model, model.neutral(), np.zeros(4))
    b = sd.ModelBuilder("massless")
    b.add_body("link", None, sd.make_joint("revolute", (0, 0, 1)))
    with pytest.raises(ValueError, match="'massless' has no mass"):
        sd.center_of_mass(b.build(), np.zeros(1))
