"""Constrained forward dynamics where a joint's motion subspace depends on q (``Gdot v`` carries the
joint bias ``cJ = Sdot qd``): a four-bar whose crank is a universal or an Euler-angle spherical joint."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import solve_bound
from sparsedyn.constraints import ConstraintSet, PointCoincidence, assemble, constrained_forward_dynamics
from sparsedyn.model.spatial import xlt


def bar(m, L, w=0.02):
    """Rotational inertia about the centre of mass of a bar of mass m and length L along x."""
    return m * np.diag([w * w / 6, (L * L + w * w) / 12, (L * L + w * w) / 12])


def four_bar(crank_type, crank=0.1, coupler=0.35, rocker=0.3, ground=0.4):
    """The crank-rocker four-bar with its crank on a ``crank_type`` joint (3D: the loop's three rows
    are independent), closed by a point coincidence at the coupler and rocker tips, assembled."""
    b = sd.ModelBuilder("four_bar_" + crank_type)
    rev = sd.make_joint("revolute", (0, 0, 1))
    b.add_body("crank", None, sd.make_joint(crank_type), mass=0.3, com=[crank / 2, 0, 0], rot_inertia=bar(0.3, crank),
               joint_name="crank_joint")
    b.add_body("coupler", "crank", rev, xlt(np.array([crank, 0.0, 0.0])), mass=0.8, com=[coupler / 2, 0.04, 0],
               rot_inertia=bar(0.8, coupler), joint_name="coupler_joint")
    b.add_body("rocker", None, rev, xlt(np.array([ground, 0.0, 0.0])), mass=0.5,
               com=[rocker / 2, 0, 0], rot_inertia=bar(0.5, rocker), joint_name="rocker_joint")
    b.add_frame("coupler_tip", "coupler", xlt(np.array([coupler, 0.0, 0.0])))
    b.add_frame("rocker_tip", "rocker", xlt(np.array([rocker, 0.0, 0.0])))
    model = b.build()
    cs = ConstraintSet(model, [PointCoincidence(model, "coupler_tip", "rocker_tip", name="loop")])
    guess = np.concatenate([0.3 * np.ones(model.joints[0].nq) if crank_type != "spherical" else [1, 0, 0, 0],
                            [0.6, 1.8]])
    return cs, assemble(cs, guess)


@pytest.mark.parametrize("crank_type", ["universal", "spherical_zyx"])
def test_four_bar_with_a_varying_crank_satisfies_the_constrained_equations(crank_type):
    cs, q0 = four_bar(crank_type)
    model = cs.model
    assert not model.joints[0].constant_subspace
    rng = np.random.default_rng(2)
    assert np.abs(cs.residual(q0)).max() < 1e-10 and np.abs(q0[:model.joints[0].nq]).min() > 0.05
    for _ in range(3):
        v = sd.constraints.project_velocity(cs, q0, rng.normal(size=model.nv))
        tau = rng.normal(size=model.nv)
        a, lam, _ = constrained_forward_dynamics(cs, q0, v, tau)
        G, c = cs.jacobian(q0), cs.bias(q0, v)
        H, C = sd.crba(model, q0), sd.nonlinear_effects(model, q0, v)
        K = np.block([[H, -G.T], [G, np.zeros((3, 3))]])
        b = solve_bound(K, np.concatenate([a, lam]), c=64.0)
        assert np.abs(G @ v).max() < 1e-12
        assert np.abs(G @ a + c).max() <= b * max(1.0, np.abs(G).max()) * np.abs(a).max()
        assert np.abs(H @ a + C - tau - G.T @ lam).max() <= b * np.abs(H).max() * max(np.abs(a).max(), 1.0) * 10
        # The loop stays closed: both tips have one world acceleration (the kinematics layer's, with cJ).
        tips = [sd.frame_classical_acceleration(model, q0, v, a, f, "local_world_aligned")[3:]
                for f in ("coupler_tip", "rocker_tip")]
        assert np.abs(tips[0] - tips[1]).max() <= b * max(1.0, np.abs(G).max()) * np.abs(a).max()
