"""Coordinate partition, assembly and consistent states; bad input gives clear errors."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.constraints import (AssemblyError, ConstraintError, ConstraintSet, PartitionError,
                                   PointCoincidence, Weld, assemble, consistent_acceleration, consistent_velocity,
                                   constrained_inverse_dynamics, delta_robot, five_bar, four_bar, null_space,
                                   partition, project_velocity, slider_crank)


def test_four_bar_3d_closure_is_rank_deficient_and_the_z_row_is_redundant():
    mech = four_bar()
    cs = mech.constraints
    part = partition(cs, mech.q0)
    assert cs.m == 3 and part.rank == 2 and part.redundant_rows == ("loop.z",)
    assert len(part.independent) == 1
    ns = null_space(cs.jacobian(mech.q0), part)
    G = cs.jacobian(mech.q0)
    assert ns.gamma.shape == (3, 1) and np.abs(G @ ns.gamma).max() < 1e-15
    assert ns.R_dep.shape == (2, 2)
    # The row-compressed R = Q^T G is row-equivalent to G: same null space, full row rank.
    R = ns.Q.T @ G
    assert np.linalg.matrix_rank(R) == 2 and np.abs(R @ ns.gamma).max() < 1e-15


def test_pivoted_qr_choice_and_forced_independent_coordinates():
    mech = delta_robot()
    cs, q = mech.constraints, mech.q0
    auto = partition(cs, q)
    assert auto.rank == 9 and len(auto.independent) == 3
    forced = partition(cs, q, independent=list(mech.actuated))
    assert [cs.dof_names[k] for k in forced.independent] == list(mech.actuated)
    # Partially forced: the rest is chosen by the QR.
    part = partition(cs, q, independent=["arm1_joint"])
    assert 3 in part.independent and len(part.independent) == 3
    # An explicit dependent set is accepted when G_dep is invertible.
    explicit = partition(cs, q, dependent=forced.dependent)
    assert np.array_equal(explicit.independent, forced.independent)


def test_singular_dependent_set_is_rejected_with_the_coordinates_named():
    # A two-link arm whose tip is pinned (x, y), with a third joint that spins the tip about its own
    # axis: it moves no point, so its column of G is zero and it can never be dependent.
    b = sd.ModelBuilder("loop")
    rev = sd.make_joint("revolute", (0, 0, 1))
    b.add_body("a", None, rev, mass=1.0, com=[0.5, 0, 0], rot_inertia=np.eye(3) * 0.1)
    b.add_body("b", "a", rev, sd.spatial.xlt(np.array([1.0, 0, 0])), mass=1.0, com=[0.5, 0, 0],
               rot_inertia=np.eye(3) * 0.1)
    b.add_body("spin", "b", sd.make_joint("revolute", (1, 0, 0)), sd.spatial.xlt(np.array([1.0, 0, 0])),
               mass=1.0, rot_inertia=np.eye(3) * 0.1)           # spins about its own axis: moves no point
    b.add_frame("tip", "spin")
    model = b.build()
    loop = ConstraintSet(model, [PointCoincidence(model, "tip", None, point_b=[1.5, 0.5, 0.0], axes="xy")])
    q = assemble(loop, np.array([0.2, 0.8, 0.0]), independent=["spin"])
    with pytest.raises(PartitionError, match=r"G_dep is singular.*\[b, spin\]"):
        partition(loop, q, dependent=["b", "spin"])
    with pytest.raises(PartitionError, match=r"with \[a\] independent, G_dep is singular"):
        partition(loop, q, independent=["a"])
    with pytest.raises(PartitionError, match="needs exactly 2"):
        partition(loop, q, dependent=["a"])
    with pytest.raises(PartitionError, match="only nv - r = 1"):
        partition(loop, q, independent=["a", "b"])
    mech = five_bar()
    with pytest.raises(PartitionError, match=r"3 independent coordinates \[left_joint, right_joint, "
                                             r"left_distal_joint\] requested.*only nv - r = 2"):
        partition(mech.constraints, mech.q0, independent=["left_joint", "right_joint", "left_distal_joint"])
    # A valid partition that becomes singular at another configuration.
    part = partition(loop, q, dependent=["a", "b"])
    straight = np.array([0.0, 0.0, 0.0])
    with pytest.raises(PartitionError, match="G_dep is singular at this configuration"):
        null_space(loop.jacobian(straight), part)


def test_a_locked_mechanism_has_the_determined_answer():
    """Constraints that leave no degree of freedom (rank G = nv) determine the motion: a = 0 at rest, and
    the constraint forces from the equations.  By hand: a 1 kg pendulum (mass at its tip, l from the
    pivot, at angle th) leaning on the ground carries m g on its tip whatever th, less the push of a
    joint torque tau: lambda = m g - tau / (l sin th) (moments about the pivot).  A chain clamped to the
    world by a weld (6 rows, rank 3 = nv): G^T lambda = g(q) - tau."""
    from conftest import pendulum, rel_err, rounding_bound
    from sparsedyn.constraints import PointOnGround, constrained_forward_dynamics
    m, l, th, tau = 1.0, 0.5, 0.7, 0.3
    model, _ = pendulum(m=m, l=l, Iy=1e-3)
    cs = ConstraintSet(model, [PointOnGround(model, "link", point=[0, 0, -l], height=-l * np.cos(th))])
    q, zero = np.array([th]), np.zeros(1)
    part = partition(cs, q)
    assert part.rank == 1 and list(part.dependent) == [0] and part.independent.size == 0
    fd = constrained_forward_dynamics(cs, q, zero, zero)
    assert np.array_equal(fd.a, zero) and rel_err(fd.lam, [9.81 * m]) < rounding_bound(4)
    fd = constrained_forward_dynamics(cs, q, zero, np.array([tau]))
    assert np.array_equal(fd.a, zero) and rel_err(fd.lam, [9.81 * m - tau / (l * np.sin(th))]) < rounding_bound(4)
    unactuated = constrained_inverse_dynamics(cs, q, zero, zero, actuated=[])
    assert unactuated.u.shape == (0,) and unactuated.feasible and rel_err(unactuated.lam, [9.81 * m]) < rounding_bound(4)
    actuated = constrained_inverse_dynamics(cs, q, zero, zero)          # the minimum-norm effort: none
    assert np.array_equal(actuated.u, zero) and rel_err(actuated.lam, [9.81 * m]) < rounding_bound(4)

    chain = sd.serial_chain(3, axis=(0.0, 1.0, 0.0))                  # in the vertical plane: gravity acts
    clamp = ConstraintSet(chain, [Weld(chain, "link3", None, name="clamp")])
    q3, tau3 = np.array([0.3, -0.5, 0.9]), np.array([0.4, -1.0, 2.0])
    assert partition(clamp, q3).rank == 3
    fd = constrained_forward_dynamics(clamp, q3, np.zeros(3), tau3)
    G, g = clamp.jacobian(q3), sd.generalized_gravity(chain, q3)
    assert np.array_equal(fd.a, np.zeros(3))
    assert rel_err(G.T @ fd.lam, g - tau3) < rounding_bound(6, np.linalg.cond(G))
    inv = constrained_inverse_dynamics(clamp, q3, np.zeros(3), np.zeros(3), actuated=[])
    assert inv.feasible and rel_err(G.T @ inv.lam, g) < rounding_bound(6, np.linalg.cond(G))


def test_unreachable_configuration_is_reported():
    mech = slider_crank()
    cs = mech.constraints
    # A rod shorter than needed: crank 0.1 + rod 0.35 cannot reach a slider held at x = 0.6.
    q = mech.q0.copy()
    q[2] = 0.6
    with pytest.raises(AssemblyError, match=r"pin\.x = .*unreachable with 1 coordinate\(s\) held \(slider_joint\)"):
        assemble(cs, q, independent=["slider_joint"])
    # Unsatisfiable by construction: a point pinned to two different world points.
    fb = four_bar()
    bad = ConstraintSet(fb.model, [PointCoincidence(fb.model, "coupler_tip", None, point_b=[0.3, 0.2, 0], name="p1"),
                                   PointCoincidence(fb.model, "coupler_tip", None, point_b=[0.1, 0.2, 0], name="p2")])
    with pytest.raises(AssemblyError, match="cannot assemble.*p[12]"):
        assemble(bad, fb.q0)


def test_assembly_consistent_velocity_and_acceleration():
    mech = delta_robot()
    cs, model = mech.constraints, mech.model
    rng = np.random.default_rng(0)
    q = mech.q0.copy()
    arms = [model.q_start[model.joint(n)] for n in mech.actuated]
    q[arms] += [0.1, -0.05, 0.2]
    q_target = q[arms].copy()
    q = assemble(cs, q, independent=list(mech.actuated), tol=1e-13)
    assert np.abs(cs.residual(q)).max() <= 1e-13 and np.array_equal(q[arms], q_target)
    part = partition(cs, q, independent=list(mech.actuated))
    v = consistent_velocity(cs, q, rng.normal(size=model.nv), part)
    a = consistent_acceleration(cs, q, v, rng.normal(size=3), part)
    g, G, b = cs.evaluate(q, v)
    assert np.abs(G @ v).max() < 1e-14 and np.abs(G @ a + b).max() < 1e-13
    # Projection: the smallest change that makes a velocity consistent.
    w = rng.normal(size=model.nv)
    p = project_velocity(cs, q, w)
    assert np.abs(G @ p).max() < 1e-13 and np.abs(G @ (w - p) - G @ w).max() < 1e-12
    # Assembly without held coordinates projects onto the manifold (minimum-norm correction).
    q2 = assemble(cs, sd.integrate(model, q, 1e-3 * rng.normal(size=model.nv)))
    assert np.abs(cs.residual(q2)).max() <= 1e-12


def test_humanoid_assembly_keeps_quaternions_unit():
    from sparsedyn.constraints import humanoid_double_support
    mech = humanoid_double_support()
    q = mech.random_configuration(3, spread=0.08)
    assert abs(np.linalg.norm(q[3:7]) - 1) < 1e-14
    assert np.abs(mech.constraints.residual(q)).max() <= 1e-12


def test_inconsistent_accelerations_are_rejected():
    mech = four_bar()
    q, v, qdd = mech.random_state(1)
    with pytest.raises(ConstraintError, match="not consistent"):
        constrained_inverse_dynamics(mech.constraints, q, v, qdd + 1.0, actuated=mech.actuated)
    with pytest.raises(ConstraintError, match="give partition="):
        constrained_inverse_dynamics(mech.constraints, q, v, qdd[:1], actuated=mech.actuated)
