"""g(q), G(q) and Gdot v of every constraint type, checked by finite differences along the motion.

``q(t) = q (+) t w`` (``Model.integrate``) moves with constant velocity ``w``, so
``d/dt g = G w`` and ``d/dt (G(q(t)) v) = Gdot v`` when ``w = v``.  Central
differences with ``h = 1e-6`` are accurate to about 1e-9 here.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types
from sparsedyn.constraints import (EXAMPLES, ConstraintError, ConstraintSet, JointCoupling, PointCoincidence,
                                   PointOnGround, UserConstraint, Weld, mimic_constraints)
from sparsedyn.model.spatial import from_pose, quat_to_rot
from sparsedyn.model.joints import quat_exp

H = 1e-6


def fd_residual(cs, q, w):
    m = cs.model
    return (cs.residual(sd.integrate(m, q, H * w)) - cs.residual(sd.integrate(m, q, -H * w))) / (2 * H)


def fd_bias(cs, q, v):
    m = cs.model
    return (cs.jacobian(sd.integrate(m, q, H * v)) @ v - cs.jacobian(sd.integrate(m, q, -H * v)) @ v) / (2 * H)


def random_tree_with_constraints(seed, joint_types=None):
    """A floating random tree (the constant-subspace joint types, or ``joint_types``) with one of each
    constraint type.

    Constraints sit on body frames plus random points and placements, on
    different bodies chosen at random (possibly an ancestor of the other).
    """
    model = sd.random_tree(10, branching=1.6, joint_types=joint_types or constant_subspace_types(), seed=seed,
                           floating_base=True)
    rng = np.random.default_rng(seed)

    def two_bodies():
        a, b = rng.choice(model.nbodies, 2, replace=False)
        return model.body_names[a], model.body_names[b]

    scalar = [model.joint_names[i] for i, j in enumerate(model.joints) if j.nq == 1 and j.nv == 1]
    R = quat_to_rot(quat_exp(rng.normal(size=3)))
    a, b = two_bodies()
    c, d = two_bodies()
    cons = [
        PointCoincidence(model, a, b, point_a=rng.normal(size=3), point_b=rng.normal(size=3), name="point"),
        PointCoincidence(model, c, None, point_a=rng.normal(size=3), point_b=rng.normal(size=3), axes="xz",
                         name="anchor"),
        Weld(model, d, c, placement=(R, rng.normal(size=3)), name="weld"),
        Weld(model, b, None, placement=(R.T, rng.normal(size=3)), name="weld_world"),
        PointOnGround(model, a, point=rng.normal(size=3), normal=rng.normal(size=3), height=0.3, name="ground"),
    ]
    if len(scalar) >= 2:
        cons.append(JointCoupling(model, scalar[0], scalar[1], -1.7, 0.2, name="coupling"))
    return ConstraintSet(model, cons)


#: Joints whose motion subspace depends on q (Gdot v carries their cJ = Sdot qd), with two scalar joints.
VARYING = ("spherical_zyx", "spherical_xyz", "universal", "composite", "translation", "revolute", "prismatic")


@pytest.mark.parametrize("seed,types", [(1, None), (2, None), (3, None), (4, VARYING), (5, VARYING)])
def test_jacobian_and_bias_of_every_constraint_type_by_finite_differences(seed, types):
    cs = random_tree_with_constraints(seed, types)
    model = cs.model
    rng = np.random.default_rng(seed)
    assert {type(c).__name__ for c in cs} >= {"PointCoincidence", "Weld", "PointOnGround"}
    assert {j.type for j in model.joints} >= ({"free", "spherical", "planar", "helical", "cylindrical"} if types is None
                                              else {"spherical_zyx", "universal", "composite"})
    for _ in range(3):
        q = model.random_configuration(rng)
        v = rng.normal(size=model.nv)
        w = rng.normal(size=model.nv)
        g, G, b = cs.evaluate(q, v)
        assert g.shape == (cs.m,) and G.shape == (cs.m, model.nv) and b.shape == (cs.m,)
        # Gdot v: derivative of G(q(t)) v along q(t) = q (+) t v, everywhere.
        assert np.abs(b - fd_bias(cs, q, v)).max() < 1e-7 * max(1.0, np.abs(b).max())
        # G: exact for positions and couplings everywhere; weld orientation rows only on the manifold.
        exact = [k for k, r in enumerate(cs.rows) if not r.split(".")[1].startswith("r")]
        assert np.abs((G @ w - fd_residual(cs, q, w))[exact]).max() < 1e-7 * max(1.0, np.abs(G).max())


def test_weld_orientation_rows_are_exact_on_the_manifold():
    from sparsedyn.constraints import humanoid_double_support
    mech = humanoid_double_support()
    cs = mech.constraints
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = mech.random_configuration(rng)
        w = rng.normal(size=mech.model.nv)
        assert np.abs(cs.jacobian(q) @ w - fd_residual(cs, q, w)).max() < 1e-8


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_examples_jacobian_and_bias_by_finite_differences(name):
    from constraints_helpers import example_states
    mech, states = example_states(name)
    cs = mech.constraints
    rng = np.random.default_rng(1)
    for q, v, qdd in states[:5]:
        g, G, b = cs.evaluate(q, v)
        assert np.abs(g).max() < 1e-11 and np.abs(G @ v).max() < 1e-11 and np.abs(G @ qdd + b).max() < 1e-10
        assert np.abs(b - fd_bias(cs, q, v)).max() < 1e-7 * max(1.0, np.abs(b).max())
        w = rng.normal(size=mech.model.nv)
        assert np.abs(G @ w - fd_residual(cs, q, w)).max() < 1e-8


def test_point_bias_is_the_classical_acceleration_of_the_point():
    """A pendulum tip pinned at the world: Gdot v = -omega^2 r (centripetal), by hand."""
    b = sd.ModelBuilder("pendulum")
    b.add_body("link", None, sd.make_joint("revolute", (0, 0, 1)), mass=1.0, com=[0.5, 0, 0],
               rot_inertia=np.eye(3) * 0.01)
    model = b.build()
    c = PointCoincidence(model, "link", None, point_a=[0.8, 0, 0], point_b=[0, 0, 0])
    cs = ConstraintSet(model, [c])
    th, w = 0.3, 2.5
    g, G, bias = cs.evaluate(np.array([th]), np.array([w]))
    np.testing.assert_allclose(g, 0.8 * np.array([np.cos(th), np.sin(th), 0]), atol=1e-15)
    np.testing.assert_allclose(G[:, 0], 0.8 * np.array([-np.sin(th), np.cos(th), 0]), atol=1e-15)
    np.testing.assert_allclose(bias, -w * w * 0.8 * np.array([np.cos(th), np.sin(th), 0]), atol=1e-14)


def test_batched_evaluation_equals_single_evaluations():
    cs = random_tree_with_constraints(4)
    model = cs.model
    rng = np.random.default_rng(4)
    Q = np.stack([model.random_configuration(rng) for _ in range(3)])
    V = rng.normal(size=(3, model.nv))
    g, G, b = cs.evaluate(Q, V)
    assert g.shape == (3, cs.m) and G.shape == (3, cs.m, model.nv) and b.shape == (3, cs.m)
    for k in range(3):
        gk, Gk, bk = cs.evaluate(Q[k], V[k])
        np.testing.assert_allclose(g[k], gk, atol=1e-14)
        np.testing.assert_allclose(G[k], Gk, atol=1e-14)
        np.testing.assert_allclose(b[k], bk, atol=1e-13)


def test_user_constraint_matches_the_built_in_one():
    """The four-bar closure written as user functions (numerical bias) gives the same dynamics."""
    from sparsedyn.constraints import constrained_forward_dynamics, four_bar
    mech = four_bar()
    point = mech.constraints["loop"]
    sub = ConstraintSet(mech.model, [point])
    user = ConstraintSet(mech.model, [UserConstraint(mech.model, lambda q: sub.residual(q)[:2],
                                                     lambda q: sub.jacobian(q)[:2], name="loop_xy")])
    rng = np.random.default_rng(5)
    for _ in range(5):
        q, v, _ = mech.random_state(rng)
        tau = rng.normal(size=3)
        a = constrained_forward_dynamics(mech.constraints, q, v, tau)
        b = constrained_forward_dynamics(user, q, v, tau)
        assert np.abs(a.a - b.a).max() < 1e-7 * max(1.0, np.abs(a.a).max())
        assert np.abs(user.bias(q, v) - sub.bias(q, v)[:2]).max() < 1e-8
    analytic = ConstraintSet(mech.model, [UserConstraint(mech.model, lambda q: sub.residual(q)[:2],
                                                         lambda q: sub.jacobian(q)[:2],
                                                         bias=lambda q, v: sub.bias(q, v)[:2])])
    q, v, _ = mech.random_state(rng)
    assert np.array_equal(analytic.bias(q, v), sub.bias(q, v)[:2])


def test_mimic_couplings_from_a_urdf():
    b = sd.ModelBuilder("gripper")
    b.add_body("palm", None, sd.make_joint("revolute", (0, 0, 1)), mass=1.0, com=[0.1, 0, 0],
               rot_inertia=np.eye(3) * 0.01, joint_name="wrist")
    for side, y in (("left", 0.03), ("right", -0.03)):
        b.add_body(side, "palm", sd.make_joint("prismatic", (0, 1, 0)), from_pose(np.eye(3), np.array([0.2, y, 0])),
                   mass=0.1, com=[0.02, 0, 0], rot_inertia=np.eye(3) * 1e-4, joint_name=f"{side}_finger")
    b.add_mimic("right_finger", "left_finger", -1.0, 0.0)
    model = sd.load_urdf(sd.to_urdf(b.build()))
    cons = mimic_constraints(model)
    assert len(cons) == 1 and cons[0].name == "mimic_right_finger"
    cs = ConstraintSet(model, cons)
    q = np.array([0.3, 0.01, -0.01])
    g, G, bias = cs.evaluate(q, np.ones(3))
    np.testing.assert_allclose(g, [0.0], atol=1e-16)
    np.testing.assert_allclose(G, [[0.0, 1.0, 1.0]])
    np.testing.assert_allclose(bias, [0.0])


def test_bad_constraint_definitions_name_the_problem():
    from sparsedyn.constraints import four_bar
    model = four_bar().model
    with pytest.raises(ConstraintError, match="no frame 'nope'"):
        PointCoincidence(model, "nope", "rocker")
    with pytest.raises(ConstraintError, match="both points are on body 'coupler'"):
        PointCoincidence(model, "coupler", "coupler_tip")
    with pytest.raises(ConstraintError, match="axes"):
        PointCoincidence(model, "coupler_tip", "rocker_tip", axes="xw")
    with pytest.raises(ConstraintError, match="rotation matrix"):
        Weld(model, "coupler", None, placement=(2 * np.eye(3), np.zeros(3)))
    with pytest.raises(ConstraintError, match="cannot mimic itself"):
        JointCoupling(model, "crank_joint", "crank_joint")
    free = sd.random_tree(3, floating_base=True, seed=0)
    with pytest.raises(ConstraintError, match="free.*one-coordinate"):
        JointCoupling(free, free.joint_names[0], free.joint_names[1])
    with pytest.raises(ConstraintError, match="called 'loop'"):
        ConstraintSet(model, [PointCoincidence(model, "coupler_tip", "rocker_tip", name="loop")] * 2)
    with pytest.raises(ConstraintError, match="built for another Model object"):
        ConstraintSet(four_bar().model, [PointCoincidence(model, "coupler_tip", "rocker_tip")])
    with pytest.raises(ConstraintError, match=r"returned shape \(3,\)"):
        cs = ConstraintSet(model, [UserConstraint(model, lambda q: np.zeros(2), lambda q: np.zeros((2, 3)),
                                                  bias=lambda q, v: np.zeros(3))])
        cs.bias(np.zeros(3), np.zeros(3))


def test_default_names_come_from_the_frames_and_are_unique_in_a_set():
    """Unnamed constraints are named after what they join; two alike get _2 in a set, on a copy (the
    object keeps its name for other sets); given names are kept and their clashes stay errors."""
    from sparsedyn.constraints import four_bar
    model = four_bar().model
    a = PointCoincidence(model, "coupler_tip", "rocker_tip")
    b = PointCoincidence(model, "coupler_tip", "rocker_tip", point_a=[0.0, 0.01, 0.0])
    w = Weld(model, "coupler")
    assert (a.name, w.name) == ("point_coupler_tip_rocker_tip", "weld_coupler_world")
    assert sd.PointOnGround(model, "rocker_tip").name == "ground_rocker_tip"
    assert JointCoupling(model, "rocker_joint", "crank_joint").name == "coupling_rocker_joint_crank_joint"
    cs = ConstraintSet(model, [a, b, w])
    assert [c.name for c in cs] == ["point_coupler_tip_rocker_tip", "point_coupler_tip_rocker_tip_2",
                                    "weld_coupler_world"]
    assert cs.rows[3] == "point_coupler_tip_rocker_tip_2.x" and b.name == "point_coupler_tip_rocker_tip"
    assert cs["point_coupler_tip_rocker_tip_2"].point_a[1] == 0.01
    # a given name that a default would take: the default moves aside
    named = PointCoincidence(model, "coupler_tip", "rocker_tip", name="point_coupler_tip_rocker_tip")
    assert [c.name for c in ConstraintSet(model, [a, named])] == ["point_coupler_tip_rocker_tip_2",
                                                                   "point_coupler_tip_rocker_tip"]
