import dataclasses

import numpy as np
import pytest

import sparsedyn as sd
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
    np.testing.assert_allclose(sd.difference(m, Q, sd.integrate(m, Q, v)), v, atol=1e-10)


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


def test_unknown_names_list_the_closest_candidates():
    import sparsedyn as sd
    from sparsedyn.model import UnknownNameError
    m = sd.humanoid()
    q = m.neutral()
    cases = [(lambda: m.frame("r_hnd"), "no frame 'r_hnd'; closest: r_hand"),
             (lambda: m.joint("l_kne"), "no joint 'l_kne'; closest: l_knee"),
             (lambda: m.body("torsoo"), "no body 'torsoo'; closest: torso"),
             (lambda: sd.frame_jacobian(m, q, "l_sol"), "no frame 'l_sol'; closest: l_sole"),
             (lambda: sd.frame_placement(m, q, "head_camra"), "closest: head_camera"),
             (lambda: m.sensor("imu"), "no sensor 'imu' (it has no sensors)"),
             (lambda: sd.EstimationProblem(m, contacts=["l_sole"], unknown_accelerations=["root_jont"]),
              "unknown_accelerations: model 'humanoid' has no joint 'root_jont'; closest: root_joint"),
             (lambda: sd.EstimationProblem(m, [sd.ForceTorque("ft", "l_ankle_rol")]),
              "has no joint 'l_ankle_rol'; closest: l_ankle_roll")]
    for call, text in cases:
        with pytest.raises(UnknownNameError) as info:
            call()
        assert isinstance(info.value, KeyError) and text in str(info.value), str(info.value)
        assert not str(info.value).startswith("'")            # printed without KeyError's quotes
    # nothing close: the names are listed instead (a few, with the count)
    with pytest.raises(KeyError, match=r"no frame 'zzz'; frames: l_sole, r_sole, .*\(\d+ in all\)"):
        m.frame("zzz")


def test_builder_accepts_pose_pairs_and_homogeneous_matrices():
    R, p = sp.rotz(0.4) @ sp.rotx(-0.2), np.array([0.1, -0.2, 0.3])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    poses = []
    for X in (sp.from_pose(R, p), (R, p), T, T.tolist()):
        b = ModelBuilder("t")
        b.add_body("a", None, make_joint("revolute", [0, 0, 1]), X, mass=1.0, com=[0, 0, 0], rot_inertia=np.eye(3))
        b.add_frame("tip", "a", (np.eye(3), [1.0, 0, 0]))
        m = b.build()
        import sparsedyn as sd
        poses.append(sd.frame_placement(m, np.zeros(1), "tip"))
    for Rk, pk in poses:       # the tip at (1, 0, 0) in a: p + R e_x, for every way of writing the pose
        assert np.allclose(Rk, R, atol=1e-15) and np.allclose(pk, p + R[:, 0], atol=1e-15)
    bad = [(np.eye(3), "got ndarray of shape \\(3, 3\\)"), ("x", "got str"),
           ((np.eye(3), [0, 0]), "position of shape \\(3,\\)"), ((2 * np.eye(3), [0, 0, 0]), "not a proper rotation"),
           ((np.diag([1.0, 1, -1]), [0, 0, 0]), "det"), (np.ones((4, 4)), "last row must be \\[0, 0, 0, 1\\]")]
    for X, msg in bad:
        with pytest.raises(ModelError, match="body 'a': Xtree: .*" + msg):
            ModelBuilder("t").add_body("a", None, make_joint("revolute", [0, 0, 1]), X, mass=1.0)
def test_joint_dynamics_defaults_and_checks():
    import sparsedyn as sd
    m = sd.random_tree(4, joint_types=("revolute", "spherical"), seed=1, floating_base=True)
    jd = m.joint_dynamics
    assert np.array_equal(jd.reference, m.neutral()) and np.array_equal(jd.spring_reference, m.neutral())
    assert not np.any(jd.damping) and jd.damping.shape == (m.nv,) and not jd.damping.flags.writeable
    bad = sd.JointDynamics(np.zeros(m.nv - 1), None, None, None, None)
    with pytest.raises(sd.ModelError, match="joint_dynamics.damping"):
        dataclasses.replace(m, joint_dynamics=bad)
    ok = dataclasses.replace(m, joint_dynamics=sd.JointDynamics(np.full(m.nv, 0.5), None, None, None, None))
    assert np.all(ok.joint_dynamics.damping == 0.5) and not np.any(ok.joint_dynamics.stiffness)
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
