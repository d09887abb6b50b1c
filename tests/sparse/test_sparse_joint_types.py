"""The sparse system on joints whose motion subspace depends on q (Euler-angle spherical, universal,
composite and custom joints): inverse and forward dynamics equal RNEA and ABA to rounding on trees
mixing every joint type, and the pattern of ``S_i(q)`` comes from its symbols (derived by hand here).

Row ``c(3a_i)`` of such a joint reads ``a_i = iX_lambda a_lambda + S_i(q) qdd_i + v_i x S_i qd_i + cJ_i``
with ``cJ_i = Sdot_i qd_i`` (Featherstone, Rigid Body Dynamics Algorithms, 2008, section 4.4), the term
RNEA and ABA add for it too."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import sparse
from sparsedyn.sparse.assembly import ONE, STATE
from conftest import random_trees, rel_err, rounding_bound, solve_bound
from custom_joints import custom_universal, with_joints

VARYING = ("spherical_zyx", "spherical_xyz", "spherical_yxz", "spherical_zxy", "universal", "composite")

MODELS = [(f"tree{k}", m) for k, m in enumerate(random_trees()[:3])] + [
    ("varying", sd.random_tree(9, branching=1.5, joint_types=VARYING, seed=21, floating_base=True)),
    ("custom", with_joints(random_trees()[0], custom_universal())),
]


@pytest.mark.parametrize("name,model", MODELS, ids=[n for n, _ in MODELS])
def test_sparse_dynamics_equal_rnea_and_aba_to_rounding(name, model):
    assert any(not j.constant_subspace for j in model.joints)
    rng = np.random.default_rng(5)
    n = 4
    q = np.stack([model.random_configuration(rng) for _ in range(n)])
    v, a = rng.normal(size=(2, n, model.nv))
    fx = rng.normal(size=(n, model.nbodies, 6))
    tau = sd.rnea(model, q, v, a, fx)
    # inverse dynamics: the same products in another order
    out = sparse.sparse_inverse_dynamics(model, q, v, a, fx, full=True)
    assert rel_err(out["tau"], tau) <= rounding_bound(model.nv)
    # forward dynamics: two backward-stable solutions of H a = tau - C, state by state
    qdd = sparse.sparse_forward_dynamics(model, q, v, tau, fx)
    ref = sd.aba(model, q, v, tau, fx)
    H = sd.crba(model, q)
    for k in range(n):
        assert rel_err(qdd[k], ref[k]) <= solve_bound(H[k], ref[k])
        assert rel_err(qdd[k], a[k]) <= solve_bound(H[k], a[k])
    # plain lists, one state
    one = sparse.sparse_inverse_dynamics(model, q[0].tolist(), v[0].tolist(), a[0].tolist())
    assert rel_err(one, sd.rnea(model, q[0], v[0], a[0])) <= rounding_bound(model.nv)


def test_motion_subspace_pattern_of_spherical_zyx_by_hand():
    """S of spherical_zyx (q = Z, Y, X angles) in the child frame: columns Rx^T Ry^T e_z =
    (-sy, cy sx, cy cx), Rx^T e_y = (0, cx, -sx), e_x; no linear rows.  Entries with a sine or
    cosine are STATE (even where a sample is 0: the pattern is from symbols), the 1 is ONE, and
    every other entry is a structural zero, in c(3a) (S) and c(3tau) (S^T)."""
    b = sd.ModelBuilder("zyx")
    b.add_body("ball", None, sd.make_joint("spherical_zyx"), mass=2.0, com=[0.1, 0.2, 0.3],
               rot_inertia=np.diag([0.1, 0.2, 0.3]))
    model = b.build()
    st = sparse.forward_dynamics_problem(model).analyze()
    p, L = st.pattern, st.layout
    C = p.class_matrix()
    expected = np.full((6, 3), -1)
    expected[[0, 1, 2, 1, 2], [0, 0, 0, 1, 1]] = STATE
    expected[0, 2] = ONE
    assert np.array_equal(C[L.eq("3a", 0).slice, L.var("qdd", 0).slice], expected)
    assert np.array_equal(C[L.eq("3tau", 0).slice, L.var("f", 0).slice], expected.T)
    # the values at a state where sx = 0 and sy = 0: S itself, structural entries kept
    q = np.array([0.7, 0.0, 0.0])
    A = p.dense(st.values(q))
    S = np.zeros((6, 3))
    S[:3] = [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert np.array_equal(A[L.eq("3a", 0).slice, L.var("qdd", 0).slice], S)
    assert np.array_equal(A[L.eq("3tau", 0).slice, L.var("f", 0).slice], S.T)
    # and at a generic state, the closed form
    y, x = 0.4, -1.1
    S[:3] = [[-np.sin(y), 0, 1], [np.cos(y) * np.sin(x), np.cos(x), 0], [np.cos(y) * np.cos(x), -np.sin(x), 0]]
    A = p.dense(st.values(np.array([0.3, y, x])))
    assert rel_err(A[L.eq("3a", 0).slice, L.var("qdd", 0).slice], S) <= 4 * np.finfo(float).eps
