"""Welds on chosen directions (loop closures on chosen axes of frame A): kernels, dynamics, simulation.

The rows of a partial weld are in frame A's axes; ``G`` and ``Gdot v`` are checked by central
differences along ``q(t) = q (+) t w`` (accurate to about 1e-9 with ``h = 1e-6``); a planar
four-bar closed by a revolute closure is the same mechanism as the one closed by a point
coincidence in the plane: the constrained accelerations agree to rounding and the forces are the
same vector in rotated axes.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, rel_err, rounding_bound
from sparsedyn.constraints import (ConstraintError, ConstraintSet, PointCoincidence, Weld,
                                   constrained_forward_dynamics)
from sparsedyn.constraints.examples import four_bar
from sparsedyn.constraints.simulate import simulate
from sparsedyn.io.constraints import load_constraints, save_constraints
from sparsedyn.model.joints import quat_exp
from sparsedyn.model.spatial import quat_to_rot
from test_constraints_kernels import fd_bias, fd_residual


def partial_welds(seed):
    model = sd.random_tree(9, branching=1.6, joint_types=constant_subspace_types(), seed=seed, floating_base=True)
    rng = np.random.default_rng(seed)
    R = quat_to_rot(quat_exp(rng.normal(size=3)))
    a, b, c = (model.body_names[k] for k in rng.choice(model.nbodies, 3, replace=False))
    return ConstraintSet(model, [
        Weld(model, a, b, placement=(R, rng.normal(size=3)), directions=("x", "ry", "z", "rz"), name="two"),
        Weld(model, c, None, placement=(R.T, rng.normal(size=3)), directions=["y", "rx"], name="world"),
        Weld(model, b, c, directions=("x", "y", "z"), name="spherical"),
    ])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_partial_weld_jacobian_and_bias_by_finite_differences(seed):
    cs = partial_welds(seed)
    model = cs.model
    assert cs.rows == ("two.ry", "two.rz", "two.x", "two.z", "world.rx", "world.y",
                       "spherical.x", "spherical.y", "spherical.z")
    rng = np.random.default_rng(seed)
    for _ in range(3):
        q = model.random_configuration(rng)
        v, w = rng.normal(size=model.nv), rng.normal(size=model.nv)
        g, G, b = cs.evaluate(q, v)
        assert g.shape == (9,) and G.shape == (9, model.nv) and b.shape == (9,)
        # Gdot v is the exact derivative of G v along the motion, every row, everywhere
        assert np.abs(b - fd_bias(cs, q, v)).max() < 1e-7 * max(1.0, np.abs(b).max())
        # translation rows in A's axes: G is their exact derivative everywhere
        lin = [k for k, r in enumerate(cs.rows) if not r.split(".")[1].startswith("r")]
        assert np.abs((G @ w - fd_residual(cs, q, w))[lin]).max() < 1e-7 * max(1.0, np.abs(G).max())
        # the residual, Jacobian and bias alone equal evaluate's
        np.testing.assert_array_equal(cs.residual(q), g)
        np.testing.assert_array_equal(cs.jacobian(q), G)


def test_partial_weld_rows_are_the_full_welds_rotated_into_frame_a():
    """By hand: R_A^T (p_A - p_T) and R_A^T (omega_A - omega_B) from the full weld's world rows."""
    model = sd.random_tree(6, joint_types=constant_subspace_types(), seed=5, floating_base=True)
    rng = np.random.default_rng(5)
    a, b = model.body_names[2], model.body_names[5]
    full = ConstraintSet(model, [Weld(model, a, b)])
    part = ConstraintSet(model, [Weld(model, a, b, directions=("rz", "x", "y"))])
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    g, G, _ = full.evaluate(q, v)
    gp, Gp, _ = part.evaluate(q, v)
    RA = np.asarray(sd.frame_placement(model, q, a)[0])
    # translation: p_A - p_B rotated into A's axes (the frames' origins, no placement)
    np.testing.assert_allclose(gp[1:], (RA.T @ g[3:])[:2], atol=1e-14)
    # angular velocity rows: G_ang rotated (exact everywhere)
    np.testing.assert_allclose(Gp[0], (RA.T @ G[:3])[2], atol=1e-14)


def closed_four_bars():
    mech = four_bar()
    m = mech.model
    return mech, {
        "point": ConstraintSet(m, [PointCoincidence(m, "coupler_tip", "rocker_tip", axes="xy")]),
        "revolute, in the plane": ConstraintSet(m, [Weld(m, "coupler_tip", "rocker_tip", directions=("x", "y"))]),
        "revolute, five rows": ConstraintSet(m, [Weld(m, "coupler_tip", "rocker_tip",
                                                      directions=("x", "y", "z", "rx", "ry"))]),
    }


def test_four_bar_with_a_revolute_closure_equals_the_point_closure():
    mech, sets = closed_four_bars()
    m = mech.model
    rng = np.random.default_rng(0)
    ref = sets["point"]
    n = m.nv + m.nbodies
    for _ in range(4):
        q, v, _ = mech.random_state(rng)
        tau = rng.normal(size=m.nv)
        r0 = constrained_forward_dynamics(ref, q, v, tau)
        R = np.asarray(sd.frame_placement(m, q, "coupler_tip")[0])
        kappa = np.linalg.cond(sd.crba(m, q)) * np.linalg.cond(ref.jacobian(q)[:, r0.partition.dependent]) ** 2
        for name, cs in sets.items():
            assert np.abs(cs.residual(q)).max() < 1e-12, name      # the same manifold
            r = constrained_forward_dynamics(cs, q, v, tau)
            assert rel_err(r.a, r0.a) < rounding_bound(n, kappa), name
            # the force on the closure: world (x, y) of the point closure = R_A (x, y) of the weld's rows
            lam = dict(zip([s.split(".")[1] for s in cs.rows], r.lam))
            f = np.array([lam["x"], lam["y"]])
            world = f if name == "point" else R[:2, :2] @ f
            assert rel_err(world, r0.lam) < rounding_bound(n, kappa), name
            if "five" in name:        # out-of-plane rows carry nothing (minimum-norm forces)
                assert max(abs(lam["z"]), abs(lam["rx"]), abs(lam["ry"])) < rounding_bound(n, kappa) * np.abs(f).max()


def test_four_bar_with_a_revolute_closure_simulates_with_bounded_drift():
    mech, sets = closed_four_bars()
    cs = sets["revolute, in the plane"]
    q0, v0, _ = mech.random_state(np.random.default_rng(3))
    v0 *= 3.0 / np.abs(v0).max()
    t = simulate(cs, q0, v0, 0.2, 1e-3, project=False)
    # no projection: the drift of an order-8 integration stays at the level of its local error
    assert t.position_violation.max() < 1e-8 and t.velocity_violation.max() < 1e-7
    ref = simulate(sets["point"], q0, v0, 0.2, 1e-3, project=False)
    assert np.abs(t.q - ref.q).max() < 1e-8
    # and the energy is kept (no actuation, no friction)
    E = [sd.mechanical_energy(cs.model, q, v) for q, v in zip(t.q, t.v)]
    assert np.ptp(E) < 1e-8 * max(1.0, abs(E[0]))


def test_compiled_partial_weld_equals_numpy(rng):
    mech, sets = closed_four_bars()
    cs = sets["revolute, five rows"]
    with sd.use_backend("native", deterministic=True):
        kc = sd.compile(cs)
    assert kc.model.compiled
    q, v, _ = mech.random_state(rng)
    n = cs.nv + cs.model.nbodies
    for a, b in zip(kc.evaluate(q, v), cs.evaluate(q, v)):
        assert rel_err(a, b) < rounding_bound(n)


def test_partial_weld_file_round_trip(tmp_path):
    mech, sets = closed_four_bars()
    cs = sets["revolute, five rows"]
    path = tmp_path / "four_bar.constraints.json"
    save_constraints(cs, path)
    back = load_constraints(path, mech.model).constraints
    assert back.rows == cs.rows and back[cs.constraints[0].name].directions == ("rx", "ry", "x", "y", "z")


@pytest.mark.parametrize("directions, says", [((), "nonempty"), (("x", "w"), "'w'"), (("x", "x"), "twice"),
                                               ("xy", "'xy'"), (3, "3")])
def test_bad_directions_are_named(directions, says):
    m = four_bar().model
    with pytest.raises(ConstraintError, match="directions") as e:
        Weld(m, "coupler_tip", "rocker_tip", directions=directions)
    assert says in str(e.value)
