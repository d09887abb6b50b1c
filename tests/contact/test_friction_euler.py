"""One-sided frictional contact steps of a box on Euler angles (a composite of a translation and a
``spherical_zyx`` joint, whose motion subspace depends on q), against the free box of
test_friction and the physics of a drop."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.friction_problem import PENETRATION_SLOP
from sparsedyn.model.spatial import rot_to_quat
from test_friction import DT, G, H, MASS, MODEL, TOL, Z, corners


def euler_box_model():
    """The box on a composite joint, a translation then ZYX Euler angles (``S`` depends on q)."""
    I = MASS * (2 * H) ** 2 / 6 * np.eye(3)
    joint = sd.make_joint("composite", joints=[sd.make_joint("translation"), sd.make_joint("spherical_zyx")])
    b = sd.ModelBuilder("euler_box").add_body("box", None, joint, mass=MASS, rot_inertia=I)
    return b.add_frame("box", "box").build()


EULER = euler_box_model()


@pytest.mark.parametrize("v", [[0.0] * 6, [0.01, 0.0, 0, 0, 0, 0], [0.3, -0.2, 0, 0, 0, 0]])
def test_euler_angle_box_steps_as_the_free_box(v):
    """Standing, yawed by 0.7 rad: without angular velocity (where ``cJ`` vanishes and one step of either
    model's coordinates is the same step) the Euler-angle box gets the free box's impulses and body
    twist; at rest it stays at rest and carries its weight."""
    q, v = np.array([0.1, 0.2, H, 0.7, 0.0, 0.0]), np.array(v)
    R, p = sd.frame_placement(EULER, q, "box")
    qf, vf = np.concatenate([p, rot_to_quat(R)]), sd.body_velocities(EULER, q, v)[0]
    se, sf = sd.contact_step(EULER, q, v, Z, corners(), DT), sd.contact_step(MODEL, qf, vf, Z, corners(), DT)
    assert list(se.modes) == list(sf.modes) == (["stick"] * 4 if not v.any() else ["slide"] * 4)
    assert np.abs(se.impulses - sf.impulses).max() <= 4 * TOL * MASS * G * DT
    assert np.abs(sd.body_velocities(EULER, q, se.v)[0] - sf.v).max() <= 4 * TOL * (np.abs(v).max() + G * DT)
    if not v.any():
        assert abs(se.impulses[:, 2].sum() - MASS * G * DT) <= MASS * 1e-8 and np.abs(se.v).max() <= 1e-8


def test_dropped_euler_angle_box_never_gains_energy_and_never_sinks():
    """The tumbling drop of the free box, on Euler angles (their middle angle stays far from pi/2)."""
    q = np.array([0, 0, 0.05 + 2 * H, 0.2, 0.15, -0.1])
    v = np.array([0.5, 0.2, 0.0, 3.0, -2.0, 1.0])
    E0 = sd.mechanical_energy(EULER, q, v)
    R = sd.rollout(EULER, q, v, Z, corners(), DT, 600)
    E = sd.mechanical_energy(EULER, R.q, R.v)
    assert np.all(np.diff(E) <= 1e-8 * E0), np.diff(E).max()
    Rb, p = sd.frame_placement(EULER, R.q, "box")
    heights = np.array([p[:, 2] + (Rb @ np.array(c.point))[:, 2] for c in corners()])
    assert heights.min() >= -1e-4
    assert (R.modes == "open").all(axis=1)[:10].all()                                      # falls
    # then lands flat: its four corners on the floor (within the slop) carry its weight, split among them
    # as one of the answers of four coplanar points (not unique: two may carry none)
    assert np.abs(heights[:, -1]).max() <= PENETRATION_SLOP
    assert abs(R.impulses[-1][:, 2].sum() - MASS * G * DT) <= 4 * TOL * MASS * G * DT
    assert E[-1] < E0


def test_derivatives_of_a_tumbling_euler_angle_box_are_central_differences():
    """Yawed, pitched and turning on three corners, 10 um above the ground: one corner lifts off, two
    slide; the step's derivatives (RNEA's from the traced program here) against central differences."""
    from test_friction_derivatives import check_against_differences
    q = np.array([0.0, 0.0, H + 1e-5, 0.7, 0.0, 0.0])
    v = np.array([1.0, 0.3, -0.02, 0.2, 0.05, 0.1])
    d = check_against_differences(EULER, q, v, Z, [sd.Contact(c.frame, "3d", friction=c.friction, point=c.point,
                                                              name=c.name) for c in corners()[:3]], 1e-6)
    assert sorted(d.step.modes) == ["open", "slide", "slide"]
