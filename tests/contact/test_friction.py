"""One-sided frictional contact steps (sparsedyn.contact.friction): a box on its four corners
against Coulomb's law derived by hand, physical checks on a quadruped, bad input (against Pinocchio's
ADMM step: ``test_friction_pinocchio.py``).

The box (mass m, half side h) stands on four corner contacts, friction mu = 0.4, dt = 1 ms.  By
hand (semi-implicit Euler, impulses over one step): at rest the four normal impulses carry
m g dt; a horizontal push F below mu m g is held by static friction (v stays zero); above it the
box slides and gains (F - mu m g) dt / m per step; sliding at speed s it loses mu g dt per step
until it stops; on a plane tilted by theta it sticks if tan theta < mu, otherwise it gains
g (sin theta - mu cos theta) dt per step downhill.  The solver's tolerance is 1e-8 relative to
the impulse and velocity scales of each step, so every comparison is at 1e-8 of those scales
(times a small factor for the rounding of the free motion).
"""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from erd import load_pair
from test_scene import box_model as scene_box_model
from sparsedyn.contact.friction import ContactStepWarning, contact_basis

MU, DT, G, MASS, H = 0.4, 1e-3, 9.81, 2.0, 0.1
TOL = 1e-8


def box_model():
    I = MASS * (2 * H) ** 2 / 6 * np.eye(3)                        # a solid cube of side 2h
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I)
    return b.add_frame("box", "box").build()


def corners(plane=None, mu=MU):
    return [sd.Contact("box", "3d", friction=mu, point=(x, y, -H), plane=plane, name=f"c{i}")
            for i, (x, y) in enumerate([(-H, -H), (H, -H), (-H, H), (H, H)])]


MODEL = box_model()
Q0 = np.array([0, 0, H, 0, 0, 0, 1.0])
Z = np.zeros(6)


def push(direction_angle, magnitude):
    f = np.zeros((1, 6))
    f[0, 3:5] = magnitude * np.array([np.cos(direction_angle), np.sin(direction_angle)])
    return f


def check_residuals(step, v_before):
    """Residuals at most 1e-8 of m g dt (impulses), of the step's velocity scale (the free velocity's
    bound |v| + g dt), and of their product."""
    P = MASS * G * DT
    vscale = np.abs(v_before).max() + G * DT
    assert np.all(step.residuals.primal <= TOL * P)
    assert np.all(step.residuals.dual <= TOL * vscale)
    assert np.all(step.residuals.complementarity <= TOL * P * vscale)


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_box_at_rest_stays_at_rest_and_carries_its_weight(solver):
    q, v, warm = Q0, Z, None
    for _ in range(50):
        s = sd.contact_step(MODEL, q, v, Z, corners(), DT, solver=solver, warm_start=warm)
        q, v, warm = s.q, s.v, s.impulses
        assert np.abs(s.v).max() <= 1e-8
        # the weight is carried: the impulses change the momentum by m (v+ - v_free)
        assert abs(s.impulses[:, 2].sum() - MASS * G * DT) <= MASS * 1e-8
        assert np.abs(s.impulses[:, :2].sum(0)).max() <= MASS * 1e-8
        assert list(s.modes) == ["stick"] * 4
        check_residuals(s, Z)
    assert np.abs(q - Q0).max() <= 50 * DT * 1e-8


@pytest.mark.parametrize("angle", [0.0, 1.0, 2.5, -2.0])
def test_pushed_below_friction_it_sticks(angle):
    f = push(angle, 0.9 * MU * MASS * G)
    q, v, warm = Q0, Z, None
    for _ in range(20):
        s = sd.contact_step(MODEL, q, v, Z, corners(), DT, f_ext=f, warm_start=warm)
        check_residuals(s, v)
        q, v, warm = s.q, s.v, s.impulses
        assert np.abs(s.v).max() <= 1e-8
        assert list(s.modes) == ["stick"] * 4
        # friction balances the push: the impulses change the momentum by m (v+ - v_free)
        assert np.abs(s.impulses[:, :2].sum(0) + f[0, 3:5] * DT).max() <= MASS * 1e-8


@pytest.mark.parametrize("angle", [0.0, 1.0, 2.5])
def test_pushed_above_friction_it_slides_at_a_tenth_of_mu_g(angle):
    f = push(angle, 1.1 * MU * MASS * G)
    d = np.array([np.cos(angle), np.sin(angle)])
    q, v, warm = Q0, Z, None
    for k in range(1, 21):
        s = sd.contact_step(MODEL, q, v, Z, corners(), DT, f_ext=f, warm_start=warm)
        check_residuals(s, v)
        vscale = np.abs(v).max() + G * DT
        q, v, warm = s.q, s.v, s.impulses
        # body axes are world axes (the box does not turn): v[3:5] is the horizontal velocity
        assert np.abs(s.v[3:5] - k * 0.1 * MU * G * DT * d).max() <= 4 * TOL * vscale * k
        assert np.abs(s.v[[0, 1, 2, 5]]).max() <= 4 * TOL * vscale / H * k
        assert list(s.modes) == ["slide"] * 4


def test_sliding_box_loses_mu_g_dt_per_step_stops_and_stays_stopped():
    v = np.array([0, 0, 0, 1.0, 0, 0])
    q, warm, speeds = Q0, None, [1.0]
    stop = 1.0 / (MU * G * DT)                    # 254.8 steps
    for k in range(1, 300):
        s = sd.contact_step(MODEL, q, v, Z, corners(), DT, warm_start=warm)
        check_residuals(s, v)
        q, v, warm = s.q, s.v, s.impulses
        speeds.append(v[3])
        if k < stop - 1:
            assert abs((speeds[-2] - speeds[-1]) - MU * G * DT) <= 4 * TOL * k, k
            assert list(s.modes) == ["slide"] * 4
        elif k > stop + 1:
            assert np.abs(v).max() <= 1e-8, k
            assert list(s.modes) == ["stick"] * 4
    assert np.abs(v[[0, 1, 2, 4, 5]]).max() <= 1e-6
    # the distance slid is the sum of the steps' velocities times dt
    assert abs(q[0] - DT * sum(speeds[1:])) <= 1e-12


def tilted(theta, mu=MU):
    """The box resting on the plane through the origin with normal (sin theta, 0, cos theta)."""
    n = np.array([np.sin(theta), 0.0, np.cos(theta)])
    quat = np.array([0.0, np.sin(theta / 2), 0.0, np.cos(theta / 2)])      # rotation about y by theta
    return np.concatenate([H * n, quat]), corners(plane=(n, 0.0), mu=mu), n


def test_on_a_plane_below_the_friction_angle_it_sticks():
    theta = np.arctan(MU) - 0.05
    q, contacts, _ = tilted(theta)
    v, warm = Z, None
    for _ in range(20):
        s = sd.contact_step(MODEL, q, v, Z, contacts, DT, warm_start=warm)
        check_residuals(s, v)
        q, v, warm = s.q, s.v, s.impulses
        assert np.abs(s.v).max() <= 1e-8
        assert list(s.modes) == ["stick"] * 4
    # the impulses hold the weight: normal m g cos(theta) dt, tangential m g sin(theta) dt uphill
    assert abs(s.impulses[:, 2].sum() - MASS * G * np.cos(theta) * DT) <= MASS * 1e-8
    assert abs(s.impulses[:, 0].sum() - (-MASS * G * np.sin(theta) * DT)) <= MASS * 1e-8


def test_on_a_plane_above_the_friction_angle_it_slides_at_the_coulomb_rate():
    theta = np.arctan(MU) + 0.1
    q, contacts, n = tilted(theta)
    v, warm = Z, None
    rate = G * (np.sin(theta) - MU * np.cos(theta)) * DT
    for k in range(1, 11):
        s = sd.contact_step(MODEL, q, v, Z, contacts, DT, warm_start=warm)
        check_residuals(s, v)
        q, v, warm = s.q, s.v, s.impulses
        downhill_speed = v[3]           # body x = the tangent (cos theta, 0, -sin theta), pointing downhill
        assert abs(downhill_speed - k * rate) <= 4 * TOL * max(G * DT, k * rate) * k
        assert np.abs(v[[0, 1, 2, 4, 5]]).max() <= 4 * TOL * k * G * DT / H
        assert list(s.modes) == ["slide"] * 4


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_on_a_frictionless_slope_it_slides_at_g_sin_theta(backend):
    """friction=0 (a frictionless one-sided contact): on a plane tilted by theta the box gains
    g sin(theta) dt per step downhill (no friction force), the normal impulses carry m g cos(theta) dt
    and the tangential ones are zero, on the NumPy road and the default (native) road."""
    theta = 0.3
    q, contacts, n = tilted(theta, mu=0.0)
    v, warm = Z, None
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
        for k in range(1, 11):
            s = sd.contact_step(MODEL, q, v, Z, contacts, DT, warm_start=warm)
            q, v, warm = s.q, s.v, s.impulses
            downhill_speed = v[3]        # body x = the tangent (cos theta, 0, -sin theta), pointing downhill
            assert abs(downhill_speed - k * G * np.sin(theta) * DT) <= 4 * TOL * G * DT * k
            assert np.abs(v[[0, 1, 2, 4, 5]]).max() <= 4 * TOL * k * G * DT / H
            assert list(s.modes) == ["slide"] * 4
            assert np.abs(s.impulses[:, :2]).max() == 0.0
            assert abs(s.impulses[:, 2].sum() - MASS * G * np.cos(theta) * DT) <= 4 * TOL * MASS * G * DT


def test_contact_basis_is_right_handed_with_z_along_the_normal():
    c = sd.Contact("box", "3d", friction=1.0, plane=((0, 0, 2.0), 1.0))
    R, n, off = contact_basis(c)
    assert np.allclose(R, np.eye(3)) and off == 0.5
    n = np.array([0.3, -0.5, 0.8])
    R, m, _ = contact_basis(sd.Contact("box", "3d", friction=1.0, plane=(n, 0.0)))
    assert np.allclose(R.T @ R, np.eye(3)) and np.isclose(np.linalg.det(R), 1) and np.allclose(R[:, 2], n / np.linalg.norm(n))


def test_batch_equals_single_steps():
    angles = np.array([0.0, 1.0, 2.0])
    mags = np.array([0.5, 1.1, 1.5]) * MU * MASS * G
    f = np.stack([push(a, m_) for a, m_ in zip(angles, mags)])
    v0 = np.array([[0, 0, 0, 0.3, 0, 0], Z, [0.1, 0, 0, 0, 0.2, 0]])
    s = sd.contact_step(MODEL, Q0, v0, Z, corners(), DT, f_ext=f)
    for i in range(3):
        si = sd.contact_step(MODEL, Q0, v0[i], Z, corners(), DT, f_ext=f[i])
        assert np.abs(s.v[i] - si.v).max() <= 1e-8 * max(G * DT, np.abs(v0[i]).max())
        assert list(s.modes[i]) == list(si.modes)
    assert s.impulses.shape == (3, 4, 3) and s.q.shape == (3, 7) and s.iterations.shape == (3,)


def test_dropped_box_never_gains_energy_and_never_sinks():
    """A tumbling box dropped from 5 cm: the mechanical energy never increases (up to the solver
    tolerance times the energy scale) and no corner goes more than 0.1 mm below the ground."""
    rng = np.random.default_rng(0)
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    quat = np.concatenate([np.sin(0.2) * axis, [np.cos(0.2)]])
    q = np.concatenate([[0, 0, 0.05 + 2 * H], quat])
    v = np.array([3.0, -2.0, 1.0, 0.5, 0.2, 0.0])
    E0 = sd.mechanical_energy(MODEL, q, v)
    R = sd.rollout(MODEL, q, v, Z, corners(), DT, 600)
    E = sd.mechanical_energy(MODEL, R.q, R.v)
    assert np.all(np.diff(E) <= 1e-8 * E0), np.diff(E).max()
    lowest = min(np.min(sd.frame_placement(MODEL, R.q, "box")[1][:, 2] +
                        (sd.frame_placement(MODEL, R.q, "box")[0] @ np.array(c.point))[:, 2]) for c in corners())
    assert lowest >= -1e-4
    assert (R.modes == "open").all(axis=1)[:10].all() and (R.modes[-1] != "open").all()      # falls, then lands
    assert E[-1] < E0


def test_unconverged_solve_warns_with_the_residuals():
    with pytest.warns(ContactStepWarning, match="residuals: primal"):
        sd.contact_step(MODEL, Q0, np.array([0, 0, 0, 1.0, 0.5, 0]), Z, corners(), DT, max_iterations=1,
                        solver="pgs")


def test_far_above_the_plane_every_contact_is_open_and_the_box_falls_freely():
    q = Q0 + np.array([0, 0, 1.0, 0, 0, 0, 0])
    s = sd.contact_step(MODEL, q, Z, Z, corners(), DT)
    assert np.allclose(s.impulses, 0) and list(s.modes) == ["open"] * 4
    assert np.abs(s.v - np.array([0, 0, 0, 0, 0, -G * DT])).max() <= 1e-15


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match=r"contact 'c' needs a friction coefficient friction >= 0 \(0: frictionless\), "
                                         r"got None"):
        sd.contact_step(MODEL, Q0, Z, Z, [sd.Contact("box", "3d", name="c")], DT)
    with pytest.raises(ValueError, match="needs a friction coefficient"):
        sd.contact_step(MODEL, Q0, Z, Z, [sd.Contact("box", "3d", point=(0, 0, -H))], DT)
    for mu in (np.nan, -0.1):
        with pytest.raises(ValueError, match="friction must be a finite number >= 0"):
            sd.Contact("box", "3d", friction=mu)
    with pytest.raises(ValueError, match="plane normal must not be zero"):
        sd.Contact("box", "3d", friction=0.5, plane=((0, 0, 0), 0.0))
    with pytest.raises(ValueError, match="point"):
        sd.Contact("box", "3d", friction=0.5, point=(0, 0))
    with pytest.raises(KeyError, match="'nowhere'"):
        sd.contact_step(MODEL, Q0, Z, Z, [sd.Contact("nowhere", "3d", friction=0.5)], DT)
    with pytest.raises(ValueError, match="kind='3d'"):
        sd.contact_step(MODEL, Q0, Z, Z, [sd.Contact("box")], DT)
    for dt in (0.0, -1e-3, np.nan, np.inf):
        with pytest.raises(ValueError, match="dt must be a finite number > 0"):
            sd.contact_step(MODEL, Q0, Z, Z, corners(), dt)
    with pytest.raises(ValueError, match="solver must be one of"):
        sd.contact_step(MODEL, Q0, Z, Z, corners(), DT, solver="lemke")
    with pytest.raises(ValueError, match="warm_start"):
        sd.contact_step(MODEL, Q0, Z, Z, corners(), DT, warm_start=np.zeros((3, 3)))
    for bad in (np.nan, np.inf, -np.inf):
        warm = np.zeros((4, 3))
        warm[2, 1] = bad
        for w in (warm, warm.tolist(), np.array([warm, np.zeros((4, 3))])):          # one state, a list, a batch
            with pytest.raises(ValueError, match="warm_start must be finite"):
                sd.contact_step(MODEL, np.array([Q0, Q0]) if np.ndim(w) == 3 else Q0, Z, Z, corners(), DT,
                                warm_start=w)
    with pytest.raises(ValueError, match="q: contains NaN"):
        sd.contact_step(MODEL, np.full(7, np.nan), Z, Z, corners(), DT)


# --- a quadruped -----------------------------------------------------------------------------

SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


@pytest.mark.parametrize("compiled", [False, True])
def test_solo12_stands_without_drift_under_a_holding_torque(compiled):
    """solo12 on its four point feet (mu = 0.7), standing under the torque that holds its posture
    (gravity compensation with the weight shared by the feet, plus a PD term): over one second the
    feet and the base move by at most 1e-6 m and no foot goes below the ground (NumPy and compiled
    steps)."""
    model, _ = load_pair("solo12", True)
    feet = [sd.Contact(f, "3d", friction=0.7) for f in SOLO_FEET]
    q0 = _solo_standing(model)
    g = sd.generalized_gravity(model, q0)
    J = np.vstack([sd.frame_jacobian(model, q0, f, "local_world_aligned")[3:] for f in SOLO_FEET])
    f = np.linalg.lstsq(J[:, :6].T, g[:6], rcond=None)[0]          # feet forces that carry the base
    hold = g - J.T @ f
    assert np.abs(hold[:6]).max() <= 1e-9 * np.abs(g).max()
    f = f.reshape(4, 3)
    assert np.all(np.linalg.norm(f[:, :2], axis=-1) <= 0.7 * f[:, 2])         # inside the cones

    def controller(t, q, v):
        return hold + np.concatenate([np.zeros(6), 5.0 * (q0[7:] - q[7:]) - 0.2 * v[6:]])

    R = sd.rollout(sd.compile(model) if compiled else model, q0, np.zeros(model.nv), controller, feet, DT, 1000)
    feet_pos = np.stack([sd.frame_placement(model, R.q, name)[1] for name in SOLO_FEET], 1)
    assert np.abs(feet_pos - feet_pos[0]).max() <= 1e-6
    assert np.abs(R.q[:, :3] - q0[:3]).max() <= 1e-6
    assert (R.modes == "stick").all()
    assert feet_pos[..., 2].min() >= -1e-4
    assert np.abs(R.impulses.sum(1)[:, 2] - np.sum(f[:, 2]) * DT).max() <= 1e-6 * np.sum(f[:, 2]) * DT


def _solo_standing(model):
    """Legs bent (hip 0.8 rad, knee -1.6 rad), the feet on the ground z = 0."""
    q = np.zeros(model.nq)
    q[6] = 1.0
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    z = min(sd.frame_placement(model, q, f)[1][2] for f in SOLO_FEET)
    q[2] = -z
    return q


def test_a_compiled_model_gives_the_same_step():
    """``sd.compile(model)`` runs the per-state kernel compiled: the step equals the NumPy one up to
    the rounding of the free motion amplified by the solver's tolerance."""
    k = sd.compile(MODEL)
    f = push(1.0, 1.1 * MU * MASS * G)
    v0 = np.array([0.1, 0, 0, 0.3, 0, 0])
    s = sd.contact_step(MODEL, Q0, v0, Z, corners(), DT, f_ext=f)
    sk = sd.contact_step(k, Q0, v0, Z, corners(), DT, f_ext=f)
    assert np.abs(sk.v - s.v).max() <= 1e-8 * (np.abs(v0).max() + G * DT)
    assert list(sk.modes) == list(s.modes)
    R = sd.rollout(k, Q0, v0, Z, corners(), DT, 3, f_ext=f)
    assert R.q.shape == (4, 7) and np.abs(R.v[1] - sk.v).max() <= 1e-8 * (np.abs(v0).max() + G * DT)


def test_penetration_is_removed_from_the_configuration_without_velocity():
    """A box resting 1 mm inside the ground: one step lifts its corners back onto the plane (to the
    solver's tolerance) and leaves the velocity at rest (the correction is positional only).  The
    correction's Gauss-Seidel stops at a relative tolerance of 1e-6: corner heights within 1e-6 of
    the 1 mm, so a tilt of at most that over the half side."""
    q = Q0 - np.array([0, 0, 1e-3, 0, 0, 0, 0])
    s = sd.contact_step(MODEL, q, Z, Z, corners(), DT)
    assert np.abs(s.v).max() <= 1e-8
    assert abs(s.q[2] - H) <= 1e-9
    assert np.abs(s.q[3:6]).max() <= 1e-6 * 1e-3 / H
    assert abs(s.impulses[:, 2].sum() - MASS * G * DT) <= MASS * 1e-8


def test_rollout_takes_a_torque_sequence_and_checks_its_shape():
    taus = np.zeros((4, 6))
    R = sd.rollout(MODEL, Q0, Z, taus, corners(), DT, 4)
    assert R.q.shape == (5, 7) and R.v.shape == (5, 6) and R.impulses.shape == (4, 4, 3) and R.modes.shape == (4, 4)
    assert np.abs(R.v).max() <= 1e-8
    assert np.abs(R.impulses[:, :, 2].sum(-1) - MASS * G * DT).max() <= MASS * 1e-8
    with pytest.raises(ValueError, match=r"tau_or_controller must be joint forces of shape \(nv,\) = \(6,\)"):
        sd.rollout(MODEL, Q0, Z, np.zeros(5), corners(), DT, 4)
    with pytest.raises(ValueError, match="steps must be an integer >= 0"):
        sd.rollout(MODEL, Q0, Z, Z, corners(), DT, -1)
    assert sd.rollout(MODEL, Q0, Z, Z, corners(), DT, 0).q.shape == (1, 7)


@pytest.mark.parametrize("answer, what", [(lambda t: np.zeros(3), r"shape \(3,\)"),
                                          (lambda t: [0.0] * 5 + [np.nan if t > 0 else 0.0], r"shape \(6,\), not finite"),
                                          (lambda t: None, "NoneType"), (lambda t: "push", "str")])
def test_a_controller_returning_no_joint_forces_is_named_with_its_step(answer, what):
    """A controller of the wrong shape, a NaN (at the second step: t = DT), nothing or a string: refused
    naming the controller, what it returned and the step, on the point contacts' road and a scene's."""
    step = 1 if "not finite" in what else 0
    message = rf"rollout: the controller returned {what} at step {step} \(t = {step * DT:g} s\)"
    with pytest.raises(ValueError, match=message):
        sd.rollout(MODEL, Q0, Z, lambda t, q, v: answer(t), corners(), DT, 3)
    scene = sd.Scene(scene_box_model(), world=[sd.Shape("plane")])
    with pytest.raises(ValueError, match=message):
        sd.rollout(scene.model, Q0, Z, lambda t, q, v: answer(t), scene, DT, 3)


def test_a_point_that_cannot_move_gives_no_impulse_and_no_nan():
    """A contact on a pendulum's axis has a zero Jacobian (G = 0): the step is the free step, without
    NaN or warning; the tip swinging into a wall (plane x = 0) is stopped by a normal impulse
    ``H omega / lever``."""
    b = sd.ModelBuilder("pendulum").add_body("link", None, sd.make_joint("revolute", axis=(0, 1, 0)), mass=1.0,
                                             com=(0, 0, -0.5), rot_inertia=0.01 * np.eye(3))
    model = b.add_frame("pivot", "link").add_frame("tip", "link", (np.eye(3), np.array([0, 0, -1.0]))).build()
    one = np.ones(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = sd.contact_step(model, 0 * one, one, 0 * one, [sd.Contact("pivot", "3d", friction=0.5)], DT)
        assert np.array_equal(s.impulses, np.zeros((1, 3))) and list(s.modes) == ["open"]
        assert np.allclose(s.v, one, rtol=0, atol=1e-15)         # gravity has no moment at q = 0
        s = sd.contact_step(model, 0 * one, one, 0 * one,
                            [sd.Contact("tip", "3d", friction=0.5, plane=((1, 0, 0), 0.0))], DT)
    H = sd.crba(model, 0 * one)[0, 0]                            # 0.26: the tip's effective mass is H / 1^2
    assert abs(s.v[0]) <= 1e-8 and list(s.modes) == ["stick"]
    assert abs(s.impulses[0, 2] - H * 1.0) <= 1e-8 * H and np.abs(s.impulses[0, :2]).max() <= 1e-8 * H


# --- the compiled step ----------------------------------------------------------------------------

def _solo_case():
    model, _ = load_pair("solo12", True)
    feet = [sd.Contact(f, "3d", friction=0.7) for f in SOLO_FEET]
    q0 = _solo_standing(model)
    rng = np.random.default_rng(11)
    V = rng.normal(size=(17, model.nv))
    V[:, :6] *= 0.3
    V[:, 5] -= 0.3                                                # base pressed down: feet stick and slide
    T = 5 * rng.normal(size=(17, model.nv))
    T[:, :6] = 0
    return model, feet, q0, V, T


def _solution_bound(model, q, v, tau, feet, tol=TOL):
    """How far two solutions of one step at tolerance ``tol`` can be apart in ``v+``: each solution's
    contact velocities are within its residuals (``tol`` times the velocity scale, primal and dual) of
    the exact ones, so the impulses differ by at most ``4 tol vscale |G^-1|`` and ``v+`` by that through
    ``H^-1 J^T`` (four feet on the ground: ``G`` is regular)."""
    with sd.use_backend("numpy"):
        P = sd.contact_problem(model, q, v, tau, feet)
    v_free = v + DT * P.a
    vscale = np.abs(P.J @ v_free).max()
    B = P.JMinv.T @ np.linalg.inv(P.G)
    return 4 * tol * vscale * np.abs(B).sum(-1).max()


def test_the_compiled_step_equals_the_numpy_step_and_a_batch_equals_single_steps():
    """solo12's feet pressed down at random joint velocities (sticking, sliding and separating feet):
    ``contact_step(sd.compile(model), ...)`` runs the whole step natively (one call per state) and
    agrees with the NumPy step to the solution bound of the tolerance; a batch (17 states: more than
    any vector width, so the batch entry runs) equals the single compiled steps."""
    model, feet, q0, V, T = _solo_case()
    k = sd.compile(model)
    batch = sd.contact_step(k, q0, V, T, feet, DT)
    modes = set()
    for i in (0, 5, 11, 16):
        with sd.use_backend("numpy"):
            ref = sd.contact_step(model, q0, V[i], T[i], feet, DT)
        one = sd.contact_step(k, q0, V[i], T[i], feet, DT)
        bound = _solution_bound(model, q0, V[i], T[i], feet)
        assert np.abs(one.v - ref.v).max() <= bound
        assert np.abs(one.q - ref.q).max() <= DT * bound
        assert np.array_equal(batch.v[i], one.v) and np.array_equal(batch.q[i], one.q)
        assert np.array_equal(batch.impulses[i], one.impulses) and list(batch.modes[i]) == list(one.modes)
        modes |= set(one.modes)
        assert one.residuals.primal <= TOL * np.abs(one.impulses).max() + 1e-300
    assert {"stick", "slide"} <= modes
    assert batch.iterations.shape == (17,) and batch.iterations.max() > 0


def test_plain_calls_run_the_native_step_by_default():
    """On a model, ``sd.contact_step`` takes the native road like every plain call (deterministic: it
    waits for the build), giving the compiled model's step exactly; ``k.contact_step`` and
    ``k.rollout`` are methods of the compiled model."""
    model, feet, q0, V, T = _solo_case()
    with sd.use_backend("native", deterministic=True):
        plain = sd.contact_step(model, q0, V[3], T[3], feet, DT)
    k = sd.compile(model)
    compiled = sd.contact_step(k, q0, V[3], T[3], feet, DT)
    assert np.array_equal(plain.v, compiled.v) and np.array_equal(plain.iterations, compiled.iterations)
    method = k.contact_step(q0, V[3], T[3], feet, DT)                 # the step is a method of the compiled model
    assert np.array_equal(method.v, compiled.v) and np.array_equal(method.q, compiled.q)
    R = k.rollout(q0, V[3], T[3], feet, DT, 2)
    assert np.array_equal(R.v[1], compiled.v) and R.q.shape == (3, model.nq)


def test_the_compiled_step_on_the_box_follows_coulombs_law():
    """The analytic box cases on the compiled step: at rest it carries m g dt; pushed at 1.1 mu m g it
    slides at 0.1 mu g dt; 1 mm inside the ground it is lifted back onto it at rest; on the pendulum
    with a contact on its axis (G = 0) no NaN, no warning."""
    k = sd.compile(MODEL)
    s = sd.contact_step(k, Q0, Z, Z, corners(), DT)
    assert np.abs(s.v).max() <= 1e-8 * G * DT and list(s.modes) == ["stick"] * 4
    assert abs(s.impulses[:, 2].sum() - MASS * G * DT) <= TOL * MASS * G * DT
    f = push(1.0, 1.1 * MU * MASS * G)
    s = sd.contact_step(k, Q0, Z, Z, corners(), DT, f_ext=f)
    want = 0.1 * MU * G * DT * np.array([np.cos(1.0), np.sin(1.0)])
    assert np.abs(s.v[3:5] - want).max() <= 1e-8 * G * DT and list(s.modes) == ["slide"] * 4
    s = sd.contact_step(k, Q0 - np.array([0, 0, 1e-3, 0, 0, 0, 0]), Z, Z, corners(), DT)     # 1 mm deep
    # lifted to the correction's relative tolerance: corner heights within 1e-6 of the 1 mm, so a tilt
    # of at most that over the half side
    assert np.abs(s.v).max() <= 1e-8 and abs(s.q[2] - H) <= 1e-9 and np.abs(s.q[3:6]).max() <= 1e-6 * 1e-3 / H
    b = sd.ModelBuilder("pendulum").add_body("link", None, sd.make_joint("revolute", axis=(0, 1, 0)), mass=1.0,
                                             com=(0, 0, -0.5), rot_inertia=0.01 * np.eye(3))
    pend = sd.compile(b.add_frame("pivot", "link").build())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = sd.contact_step(pend, np.zeros(1), np.ones(1), np.zeros(1), [sd.Contact("pivot", "3d", friction=0.5)], DT)
    assert np.array_equal(s.impulses, np.zeros((1, 3))) and np.allclose(s.v, 1.0, rtol=0, atol=1e-15)


def test_the_compiled_step_warns_with_the_residuals_when_it_stops_early():
    model, feet, q0, V, T = _solo_case()
    with pytest.warns(ContactStepWarning, match=r"stopped after \d+ iterations in 1 of 1 state\(s\).*primal"):
        s = sd.contact_step(sd.compile(model), q0, V[0], T[0], feet, DT, max_iterations=1)
    assert np.all(np.isfinite(s.v)) and s.iterations <= 1 + 10


def test_contact_step_warning_points_at_the_users_line():
    """On the default (native) road, a step and a rollout that stop early warn from the caller's line
    (this file), not from the library's."""
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sd.contact_step(MODEL, Q0, [0, 0, 0, 1.0, 0.5, 0], Z, corners(), DT, max_iterations=1, solver="pgs")
        sd.rollout(MODEL, Q0, [0, 0, 0, 1.0, 0.5, 0], Z, corners(), DT, 2, max_iterations=1, solver="pgs")
    steps = [w for w in caught if issubclass(w.category, ContactStepWarning)]
    assert len(steps) >= 2 and {w.filename for w in steps} == {__file__}


def test_rollout_limits_as_documented():
    """Only the listed points touch the ground, and joint limits bind nothing: the box carried by the
    corners of one bottom edge tips about it, its other corners through the floor; a pendulum with
    limits of +-0.1 rad swings past them (as docs/guide/friction.rst says)."""
    two = corners()[:2]                                            # the edge y = -h
    R = sd.rollout(MODEL, Q0, Z, Z, two, DT, 400)
    Rb, pb = sd.frame_placement(MODEL, R.q[-1], "box")
    assert (pb + Rb @ np.array([0.0, H, -H]))[2] < -0.01          # an unlisted corner below the floor
    assert np.all(np.asarray(R.modes)[-1] != "open")              # the listed ones still on it
    urdf = """<robot name="p"><link name="base"/>
      <joint name="j" type="revolute"><parent link="base"/><child link="l"/><axis xyz="0 1 0"/>
        <origin xyz="0 0 1"/><limit lower="-0.1" upper="0.1" effort="10" velocity="10"/></joint>
      <link name="l"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>
        <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""
    pend = sd.load_urdf(urdf)
    assert pend.upper[0] == 0.1
    pivot = [sd.Contact("l", "3d", friction=0.5)]                  # 1 m above the floor: never touches it
    P = sd.rollout(pend, [0.0], [0.0], [0.0], pivot, DT, 400)
    assert P.q[-1, 0] > 0.5                       # gravity on the mass at +x turns it about +y, past 0.1


def _arrays(v_next, impulses, velocities, scales=(1.0, 1.0)):
    from sparsedyn.contact.friction_problem import StepArrays
    report = np.array([0.0, 0.0, 0.0, 12.0, 1.0, *scales, 0.0])
    return StepArrays(np.r_[Q0], np.asarray(v_next, float), np.asarray(impulses, float),
                      np.asarray(velocities, float), report, np.zeros(np.shape(impulses)[:-1]))


def test_a_non_finite_step_is_an_error_naming_its_state():
    """Velocities of 1e308 (finite, absurd) are returned as they are; a NaN or an inf in ``v+`` of
    one state of a batch of three is an error naming that state."""
    from sparsedyn.contact.friction import _result
    lam, u = np.zeros((1, 3)), np.zeros((1, 3))
    big = _result("contact_step", "admm", TOL, _arrays([1e308, 1e308, 0, 0, 0, 0], lam, u))
    assert big.v.tolist() == [1e308, 1e308, 0, 0, 0, 0] and int(big.iterations) == 12
    s = _arrays(np.zeros(6), lam, u)
    three = s._replace(**{f: np.stack([x] * 3) for f, x in zip(s._fields, s)})
    for bad in (np.nan, np.inf):
        three.v_next[1, 1] = bad
        with pytest.raises(FloatingPointError, match=r"contact_step: the step of 1 of 3 state\(s\) is not finite "
                                                     r"\(the first at batch index \[1\]\)"):
            _result("contact_step", "admm", TOL, three)


def test_modes_of_one_state_are_those_of_a_batch_and_of_the_definition():
    """Modes by definition (impulse scale 1, velocity scale 1, tol 1e-8): open where the normal
    impulse is at most 1e-8, else stick where the tangential speed is at most 1e-6, else slide; one
    state (the Python road) and the same state in a batch of two (the array road) say the same."""
    from sparsedyn.contact.friction import _result
    lam = [[0.1, 0, 1e-8], [0.1, 0, 2e-8], [0.0, 0, 1.0], [0, 0, 1.0], [0, 0, 0]]
    u = [[1.0, 0, 0], [1.0, 0, 0], [6e-7, 8e-7, 0], [6e-7, 8.1e-7, 0], [0, 0, 0]]
    want = ["open", "slide", "stick", "slide", "open"]
    one = _result("contact_step", "admm", TOL, _arrays(np.zeros(6), lam, u))
    s = _arrays(np.zeros(6), lam, u)
    two = _result("contact_step", "admm", TOL, s._replace(**{f: np.stack([x, x]) for f, x in zip(s._fields, s)}))
    assert one.modes.tolist() == want and two.modes.tolist() == [want, want]
