"""Inertial-parameter regressors on random trees: Y pi = rnea, W pi = the joint wrenches of RNEA,
linearity in the parameters (a model with other parameters), batched and object arrays."""
import numpy as np
import pytest

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


def test_wrench_regressor_of_some_joints_is_pinocchio_joint_wrench(build_cache):
    """``joints=`` (names or indices, a list as a user writes it) gives those joints' rows alone, in the
    order given: ``W pi`` is Pinocchio's ``data.f`` of RNEA (joint frame, [f; n] there, [n; f] here),
    on the native road (the compiled kernel) and on NumPy alike."""
    import pinocchio as pin
    from erd import load_pair
    model, pm = load_pair("panda", False)
    rng = np.random.default_rng(4)
    q, v, a = (np.stack([model.random_configuration(rng) for _ in range(3)]), rng.normal(size=(3, model.nv)),
               rng.normal(size=(3, model.nv)))
    data = pm.createData()
    joints = [model.joint_names[5], 2]
    pi = model.inertial_parameters()
    for backend in ("native", "numpy"):
        with sd.use_backend(backend, deterministic=True):
            W = sd.joint_wrench_regressor(model, q.tolist(), v, a, joints=joints)
        assert W.shape == (3, 2, 6, 10 * model.nbodies)
        for k in range(3):
            pin.rnea(pm, data, q[k], v[k], a[k])
            for w, i in zip(W[k], (5, 2)):
                f = data.f[pm.getJointId(model.joint_names[i])]
                assert rel_err(w @ pi, np.concatenate([f.angular, f.linear])) < 1e-12
    with sd.use_backend("numpy"):
        with pytest.raises(KeyError, match="no moving joint 'nope'"):
            sd.joint_wrench_regressor(model, q, v, a, joints=("nope",))
        with pytest.raises(ValueError, match=r"joints: expected names or indices \(0..8\) of moving joints, got 99"):
            sd.joint_wrench_regressor(model, q, v, a, joints=(99,))
