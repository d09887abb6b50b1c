import dataclasses

import numpy as np
import pytest

from sparsedyn import Model, ModelBuilder, ModelError, make_joint, spatial as sp


def small_tree():
    """world - a(free) - {b(revolute) - d(spherical), c(prismatic)}, added out of order."""
    b = ModelBuilder("tree")
    b.add_body("d", "b", make_joint("spherical"), sp.xlt([0, 0, 0.3]), mass=1.0, com=[0, 0, 0.1],
               rot_inertia=np.eye(3) * 0.01)
    b.add_body("a", None, make_joint("free"), mass=3.0, rot_inertia=np.eye(3) * 0.1, joint_name="root")
    b.add_body("b", "a", make_joint("revolute", (0, 1, 0)), sp.xlt([0, 0.1, 0]), mass=1.0,
               rot_inertia=np.eye(3) * 0.01, lower=-1.0, upper=1.0, effort_limit=50.0)
    b.add_body("c", "a", make_joint("prismatic", (1, 0, 0)), sp.xlt([0, -0.1, 0]), mass=0.5,
               rot_inertia=np.eye(3) * 0.01)
    b.add_frame("tool", "d", sp.xlt([0, 0, 0.2]))
    b.add_mimic("c", "b", 2.0, 0.1)
    return b.build()


def test_depth_first_order_and_derived_data():
    m = small_tree()
    assert m.body_names == ("a", "b", "d", "c")
    assert m.joint_names == ("root", "b", "d", "c")
    np.testing.assert_array_equal(m.parent, [-1, 0, 1, 0])
    np.testing.assert_array_equal(m.subtree_end, [4, 3, 3, 4])
    np.testing.assert_array_equal(m.depth, [0, 1, 2, 1])
    assert (m.nq, m.nv) == (7 + 1 + 4 + 1, 6 + 1 + 3 + 1)
    np.testing.assert_array_equal(m.q_start, [0, 7, 8, 12])
    np.testing.assert_array_equal(m.v_start, [0, 6, 7, 10])
    # lambda: each dof's parent dof (expanded tree)
    np.testing.assert_array_equal(m.dof_parent, [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 5])
    np.testing.assert_array_equal(m.dof_body, [0] * 6 + [1, 2, 2, 2, 3])
    assert m.total_mass == pytest.approx(5.5)
    assert m.lower[7] == -1.0 and m.upper[7] == 1.0 and np.isinf(m.upper[12])
    assert m.effort_limit[6] == 50.0
    assert m.mimic[0].joint == m.joint("c") and m.mimic[0].mimicked == m.joint("b")
    assert m.mimic[0].multiplier == 2.0


def test_frames_and_lookups():
    m = small_tree()
    assert m.frames[m.frame("tool")].body == m.body("d")
    assert {"a", "b", "c", "d", "tool"} == set(m.frame_names)
    with pytest.raises(KeyError, match="no frame 'nope'"):
        m.frame("nope")
    with pytest.raises(KeyError, match="no body 'x'"):
        m.body("x")
    with pytest.raises(KeyError, match="no joint 'x'"):
        m.joint("x")


def test_model_is_frozen():
    m = small_tree()
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.nq = 3
    with pytest.raises(ValueError, match="read-only"):
        m.parent[0] = 2
    with pytest.raises(ValueError, match="read-only"):
        m.inertia[0, 0, 0] = 2.0
    with pytest.raises(ValueError, match="read-only"):
        m.Xtree[1].r[0] = 2.0


def test_configurations():
    m = small_tree()
    q0 = m.neutral()
    np.testing.assert_array_equal(q0, [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0])
    for seed in range(10):
        q = m.random_configuration(seed)
        assert -1.0 <= q[7] <= 1.0
        assert np.isclose(np.linalg.norm(q[3:7]), 1) and np.isclose(np.linalg.norm(q[8:12]), 1)
    np.testing.assert_array_equal(m.random_configuration(5), m.random_configuration(5))
    v = 0.3 * np.random.default_rng(0).normal(size=(4, m.nv))
    Q = np.stack([m.random_configuration(s) for s in range(4)])
    np.testing.assert_allclose(m.difference(Q, m.integrate(Q, v)), v, atol=1e-10)


def test_builder_errors():
    j = make_joint("revolute")
    with pytest.raises(ModelError, match="body 'b' has unknown parent 'zz'"):
        ModelBuilder("m").add_body("a", None, j).add_body("b", "zz", j).build()
    with pytest.raises(ModelError, match="body name 'a' is used twice"):
        ModelBuilder("m").add_body("a", None, j).add_body("a", None, j)
    with pytest.raises(ModelError, match=r"\['a', 'b'\] are not connected to the world"):
        ModelBuilder("m").add_body("a", "b", j).add_body("b", "a", j).build()
    with pytest.raises(ModelError, match="joint must be a Joint"):
        ModelBuilder("m").add_body("a", None, "revolute")
    with pytest.raises(ModelError, match="frame 'f' is on unknown body 'q'"):
        ModelBuilder("m").add_body("a", None, j).add_frame("f", "q").build()


def test_model_rejects_bad_order():
    j = make_joint("revolute")
    X = sp.identity()
    kw = dict(name="m", body_names=("a", "b"), joint_names=("a", "b"), joints=(j, j), Xtree=(X, X),
              inertia=np.zeros((2, 6, 6)))
    with pytest.raises(ModelError, match="body 'a' has parent index 1"):
        Model(parent=np.array([1, -1]), **kw)
    kw3 = dict(name="m", body_names=("a", "b", "c"), joint_names=("a", "b", "c"), joints=(j, j, j),
               Xtree=(X, X, X), inertia=np.zeros((3, 6, 6)))
    with pytest.raises(ModelError, match="not in depth-first order at 'c'"):
        Model(parent=np.array([-1, -1, 0]), **kw3)
    with pytest.raises(ModelError, match=r"inertia has shape \(2, 6, 6\), expected \(3, 6, 6\)"):
        Model(parent=np.array([-1, 0, 1]), **{**kw3, "inertia": np.zeros((2, 6, 6))})


def test_random_configuration_with_and_without_limits():
    """Limits are honoured by default; limits=False draws generic states (angles in [-pi, pi])."""
    b = ModelBuilder("limited")
    b.add_body("a", None, make_joint("revolute"), mass=1.0, com=[0, 0, 0], rot_inertia=np.eye(3),
               lower=[0.0], upper=[0.0])
    b.add_body("b", "a", make_joint("revolute"), mass=1.0, com=[0, 0, 0], rot_inertia=np.eye(3),
               lower=[0.1], upper=[0.2])
    m = b.build()
    rng = np.random.default_rng(0)
    Q = np.stack([m.random_configuration(rng) for _ in range(50)])
    assert np.all(Q[:, 0] == 0.0) and np.all((Q[:, 1] >= 0.1) & (Q[:, 1] <= 0.2))
    Q = np.stack([m.random_configuration(rng, limits=False) for _ in range(50)])
    assert np.all(np.abs(Q) <= np.pi) and np.min(np.ptp(Q, axis=0)) > 3.0
