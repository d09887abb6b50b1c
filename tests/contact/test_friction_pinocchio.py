"""The contact step against Pinocchio 4.1's ADMM step (``ADMMConstraintSolver``): solo12's feet and
talos_reduced's sole corners on the ground, pressed down and pushed at random joint velocities and
torques (the oracle: ``friction_oracle.PinocchioStep``)."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import sparsedyn as sd
from test_friction import DT, SOLO_FEET, _solo_standing

SOLE = [(x, y, 0.0) for x in (-0.1, 0.1) for y in (-0.05, 0.05)]
ORACLE_CASES = {
    "solo12": ([(f, (0.0, 0.0, 0.0)) for f in SOLO_FEET], 0.7),
    "talos_reduced": ([(s, p) for s in ("left_sole_link", "right_sole_link") for p in SOLE], 0.7),
}


def _on_ground(model, q, points):
    """``q`` with the base lowered so that the lowest contact point touches the ground."""
    q = q.copy()
    z = min((lambda R, p: p + R @ np.asarray(pt))(*sd.frame_placement(model, q, f))[2] for f, pt in points)
    q[2] -= z
    return q


@pytest.mark.parametrize("robot", list(ORACLE_CASES))
def test_next_velocity_equals_pinocchio_admm_step(robot):
    """Feet (solo12) or sole corners (talos_reduced, 8 points: a redundant set) on the ground, pressed
    down and pushed sideways at random joint velocities and torques (sticking, sliding and separating
    points): the next velocity (and for the four feet the impulses) equal Pinocchio's
    ``ADMMConstraintSolver`` step to 1e-6 relative.

    Pinocchio's step takes the free base's body twist explicitly (``v_free = v + dt aba``); ours holds
    the base's linear velocity in the world over the step (``v_free + dt [0; omega x v]`` in the axes
    before the step, then ``v+`` in the axes after it) and takes the base's gyroscopic term
    ``omega x I omega`` backward (``v_free + [delta; 0]``: :mod:`sparsedyn.contact.transport`).  The same
    problem is Pinocchio's with the joint forces ``tau + H [delta / dt; omega x v]`` (the shift of its
    free velocity), whose answer re-expressed in the turned axes, ``[omega; exp(dt omega)^T v]`` of the
    base, is ours."""
    from friction_oracle import PinocchioStep
    points, mu = ORACLE_CASES[robot]
    oracle = PinocchioStep(robot, points, mu, DT)
    model = oracle.model
    q0 = _solo_standing(model) if robot == "solo12" else _on_ground(model, model.neutral(), points)
    contacts = [sd.Contact(f, "3d", friction=mu, point=p, name=f"{f}{i}") for i, (f, p) in enumerate(points)]
    rng = np.random.default_rng(5)
    modes = set()
    for _ in range(6):
        v = rng.normal(size=model.nv)
        v[:6] *= 0.3
        v[5] -= 0.3                                     # base pressed down (body z is world z here)
        tau = 5 * rng.normal(size=model.nv)
        tau[:6] = 0
        shift = np.zeros(model.nv)
        shift[3:6] = np.cross(v[:3], v[3:6])
        I, w = np.asarray(model.inertia[0])[:3, :3], v[:3]      # the base's gyroscopic term, backward
        L = I @ w
        w_back = np.linalg.solve(I - DT * np.cross(np.eye(3), L), L)      # (I - dt L x) w+ = L
        shift[:3] = (w_back - (w - DT * np.linalg.solve(I, np.cross(w, L)))) / DT
        v_pin, lam_pin = oracle.step(q0, v, tau + sd.crba(model, q0) @ shift)
        v_pin[3:6] = Rotation.from_rotvec(DT * v_pin[:3]).as_matrix().T @ v_pin[3:6]
        s = sd.contact_step(model, q0, v, tau, contacts, DT)
        modes |= set(s.modes)
        assert np.abs(s.v - v_pin).max() <= 1e-6 * np.abs(v_pin).max(), robot
        if robot == "solo12":               # four feet: unique impulses (8 sole corners: only v+ is unique)
            assert np.abs(s.impulses - lam_pin).max() <= 1e-6 * np.abs(lam_pin).max()
    assert {"stick", "slide"} <= modes
