"""Inertial-parameter regressors on random trees: Y pi = rnea, W pi = the joint wrenches of RNEA,
linearity in the parameters (a model with other parameters), batched and object arrays."""
import numpy as np

import sparsedyn as sd
from sparsedyn.algorithms.rnea import rnea_passes
from conftest import random_state, rel_err


def test_Y_pi_is_rnea(tree, rng):
    q, v, a = random_state(tree, rng, (3,))
    pi = tree.inertial_parameters()
    assert pi.shape == (10 * tree.nbodies,)
    assert rel_err(sd.joint_torque_regressor(tree, q, v, a) @ pi, sd.rnea(tree, q, v, a)) < 1e-12
    g = np.array([0.5, 1.0, -3.0])
    assert rel_err(sd.joint_torque_regressor(tree, q, v, a, gravity=g) @ pi, sd.rnea(tree, q, v, a, gravity=g)) < 1e-12
    # other parameters, other model: the regressor does not depend on them
    other = pi * rng.uniform(0.5, 2.0, size=pi.shape)
    m2 = tree.with_inertial_parameters(other)
    assert rel_err(m2.inertial_parameters(), other) < 1e-15
    assert rel_err(sd.joint_torque_regressor(tree, q, v, a) @ other, sd.rnea(m2, q, v, a)) < 1e-12


def test_wrench_regressor_is_rnea_joint_wrench(tree, rng):
    q, v, a = random_state(tree, rng)
    W = sd.joint_wrench_regressor(tree, q, v, a)
    f = rnea_passes(tree, q, v, a)[2]
    assert rel_err(W @ tree.inertial_parameters(), np.stack(f)) < 1e-12
    # block (i, j) is a structural zero unless i is an ancestor of j (or j itself)
    for i in range(tree.nbodies):
        for j in range(tree.nbodies):
            block = W[i, :, 10 * j:10 * j + 10]
            assert np.any(block) == (i <= j < tree.subtree_end[i])


def test_batched_equals_single_and_object_arrays(tree, rng):
    q, v, a = random_state(tree, rng, (2,))
    Y = sd.joint_torque_regressor(tree, q, v, a)
    for k in range(2):
        assert rel_err(Y[k], sd.joint_torque_regressor(tree, q[k], v[k], a[k])) < 1e-15
    o = lambda x: np.asarray(x[0], dtype=object)  # noqa: E731
    assert rel_err(np.asarray(sd.joint_torque_regressor(tree, o(q), o(v), o(a)), float), Y[0]) < 1e-12
