"""Derivatives of a frictional contact step (sparsedyn.contact.friction_derivatives) against central
differences of the step itself, on the tangent space, in sticking, sliding and separating states of a box
on its corners (mu = 0.4, dt = 1 ms) and of solo12 on its feet, away from changes of mode.

The differences: ``D(h) = (f(x (+) h e_k) - f(x (-) h e_k)) / 2h`` (``sd.integrate`` for ``q``;
``sd.difference`` at the unperturbed ``q+`` for the next configuration), the step solved to ``tol =
1e-12``.  ``D(h)`` differs from the derivative by its truncation error ``O(h^2)`` and by the solver's
error divided by ``h``; the truncation error of ``D(h/2)`` is a third of ``D(h) - D(h/2)`` (Richardson), so
the test is ``|D(h/2) - d| <= 2 |D(h) - D(h/2)| + noise`` with ``noise = 4 tol V / h`` (``V`` the step's
velocity scale, the unit the solver's tolerance is relative to): nothing in it is fitted to the result.
Every perturbed step is checked to keep the modes of the unperturbed one (away from mode switches).
"""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from erd import load_pair
from sparsedyn.model.spatial import skew

MU, DT, G, MASS, H = 0.4, 1e-3, 9.81, 2.0, 0.1
TOL = 1e-12
FIELDS = ("dv_dq", "dv_dv", "dv_dtau", "dq_dq", "dq_dv", "dq_dtau")


def box_model():
    I = MASS * (2 * H) ** 2 / 6 * np.eye(3)
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I)
    return b.add_frame("box", "box").build()


BOX = box_model()
CORNERS = [sd.Contact("box", "3d", friction=MU, point=(x, y, -H), name=f"c{i}")
           for i, (x, y) in enumerate([(-H, -H), (H, -H), (-H, H), (H, H)])]
Q0 = np.array([0, 0, H, 0, 0, 0, 1.0])
Z = np.zeros(6)


def steps(h):
    """The difference steps of ``q``, ``v`` and ``tau``: ``tau`` by ``h / dt`` (a velocity change of the
    order of ``h`` over one step)."""
    return {"q": h, "v": h, "tau": h / DT}


def central_differences(model, q, v, tau, contacts, h, **options):
    """``{field: D(h)}`` and the modes of every perturbed step (one batched call of contact_step)."""
    nv = model.nv
    E, hs = np.eye(nv), steps(h)
    Q = np.concatenate([sd.integrate(model, q, hs["q"] * E), sd.integrate(model, q, -hs["q"] * E),
                        np.tile(q, (4 * nv, 1))])
    V = np.concatenate([np.tile(v, (2 * nv, 1)), v + hs["v"] * E, v - hs["v"] * E, np.tile(v, (2 * nv, 1))])
    T = np.concatenate([np.tile(tau, (4 * nv, 1)), tau + hs["tau"] * E, tau - hs["tau"] * E])
    s = sd.contact_step(model, Q, V, T, contacts, DT, **options)
    center = sd.contact_step(model, q, v, tau, contacts, DT, **options)
    dq = sd.difference(model, center.q, s.q)
    out = {}
    for j, x in enumerate(("q", "v", "tau")):
        plus, minus = slice(2 * j * nv, (2 * j + 1) * nv), slice((2 * j + 1) * nv, (2 * j + 2) * nv)
        out["dv_d" + x] = ((s.v[plus] - s.v[minus]) / (2 * hs[x])).T
        out["dq_d" + x] = ((dq[plus] - dq[minus]) / (2 * hs[x])).T
    return out, s.modes, center


#: The natural size of each derivative, in the box's units (mass 2 kg, dt 1 ms): the comparison must resolve
#: a thousandth of it (or of the derivative, if larger).
NATURAL = {"dv_dq": 1.0, "dv_dv": 1.0, "dv_dtau": DT / MASS, "dq_dq": 1.0, "dq_dv": DT, "dq_dtau": DT * DT / MASS}


def check_against_differences(model, q, v, tau, contacts, h, extra_noise=None, tol=TOL, **options):
    options["tol"] = tol
    d = sd.contact_step_derivatives(model, q, v, tau, contacts, DT, **options)
    D1, modes1, center = central_differences(model, q, v, tau, contacts, h, **options)
    D2, modes2, _ = central_differences(model, q, v, tau, contacts, h / 2, **options)
    assert (modes1 == d.step.modes).all() and (modes2 == d.step.modes).all(), "a perturbation changed a mode"
    assert np.array_equal(d.step.v, center.v)
    V = max(np.abs(v).max(), np.abs(center.v).max(), G * DT)
    for name in FIELDS:
        scale = DT if name.startswith("dq") else 1.0         # q+ moves by dt times the velocity's change
        noise = 4 * tol * V / steps(h / 2)[name.split("_d")[1]] * scale + (extra_noise or {}).get(name, 0.0)
        err = np.abs(D2[name] - getattr(d, name)).max()
        bound = 2 * np.abs(D1[name] - D2[name]).max() + noise
        assert err <= bound, (name, err, bound)
        # the bound is a small part of the derivative: the comparison is not empty
        assert bound <= 1e-3 * max(np.abs(D2[name]).max(), NATURAL[name]), (name, bound, np.abs(D2[name]).max())
    return d


def lifted(q, dz):
    return q + np.array([0, 0, dz, 0, 0, 0, 0])


# --- the box -----------------------------------------------------------------------------------

def test_sliding_box():
    """Sliding at (1, 0.3) m/s on its four corners, 10 um above the ground and closing: the derivative
    of the next velocity along the sliding velocity is 1 (friction depends on its direction only)."""
    v = np.array([0, 0, 0, 1.0, 0.3, -0.02])
    d = check_against_differences(BOX, lifted(Q0, 1e-5), v, Z, CORNERS, 1e-6)
    assert list(d.step.modes) == ["slide"] * 4
    u = v[3:5] / np.linalg.norm(v[3:5])
    assert abs(u @ d.dv_dv[3:5, 3:5] @ u - 1.0) <= 1e-9
    # along the plane, the box keeps its momentum but for friction: dv/dtau is H^-1 along the slip direction
    assert abs(u @ d.dv_dtau[3:5, 3:5] @ u - DT / MASS) <= 1e-9 * DT / MASS


def test_sticking_box_pushed_below_the_friction_limit():
    """Pushed at half mu m g, landing at 0.2 m/s 0.1 mm inside the ground: the corners stick; the next
    velocity does not depend on the velocity or on small forces (dv/dv and dv/dtau vanish: the impulses
    absorb them), and the penetration is lifted from the configuration (the split-impulse correction,
    solved to 1e-6 of the gap, enters dq/dq: its error over the step h is part of the noise).

    Four corners are a redundant set (12 rows, 6 dofs): above the plane (a speculative contact) the
    differences' tilt makes the corners' gaps unequal, and sticking with unequal closing speeds is
    inconsistent at second order (a corner slips at ~1e-8 m/s), so the sticking state is taken on the
    plane's inside, where each corner's normal velocity is held at zero."""
    f = np.zeros((1, 6))
    f[0, 3:5] = 0.5 * MU * MASS * G * np.array([0.6, 0.8])
    gap = 1e-4
    d = check_against_differences(BOX, lifted(Q0, -gap), np.array([0, 0, 0, 0, 0, -0.2]), Z, CORNERS, 1e-6,
                                  f_ext=f, extra_noise={"dq_dq": 4 * 1e-6 * gap / 5e-7})
    assert list(d.step.modes) == ["stick"] * 4
    assert np.abs(d.dv_dv).max() <= 1e-8 and np.abs(d.dv_dtau).max() <= 1e-8 * DT / MASS
    # the configuration's change along the normal is lifted back onto the plane: q+ does not follow z
    assert np.abs(d.dq_dq[5, 5]) <= 1e-6


def free_flight(v, a, dt):
    """``(w, N)``: the free step's velocity ``w = v + dt (a + [0; omega x v])`` in the body axes before the
    step (the free joint's origin velocity held in the world) and ``N = dv+/dw`` (6, 6), ``v+ = [omega_w;
    exp(dt omega_w)^T v_w]`` the same velocity in the axes after it: on the linear rows ``exp(th)^T`` and
    ``(exp(th)^T v_w) x Jr(th) dt``, ``th = dt omega_w``, ``Jr`` SO(3)'s right Jacobian (Sola, Deray and
    Atchuthan, "A micro Lie theory for state estimation in robotics", 2018).  (The box is a cube,
    ``I w`` parallel to ``w``: the step's backward gyroscopic term vanishes.)"""
    w = v + dt * (a + np.r_[0, 0, 0, np.cross(v[:3], v[3:])])
    th = dt * w[:3]
    t, K = np.linalg.norm(th), skew(th)
    Jr = np.eye(3) - (1 - np.cos(t)) / t ** 2 * K + (t - np.sin(t)) / t ** 3 * K @ K
    Et = Rotation.from_rotvec(th).as_matrix().T
    N = np.eye(6)
    N[3:, 3:], N[3:, :3] = Et, dt * skew(Et @ w[3:]) @ Jr
    return w, N


def transport_jacobian(v):
    """``d [0; omega x v] / dv`` (6, 6)."""
    T = np.zeros((6, 6))
    T[3:, :3], T[3:, 3:] = -skew(v[3:]), skew(v[:3])
    return T


def test_separating_box_falls_freely():
    """2 cm above the ground and rising: every contact is open and the step is free motion, turning:
    ``v+`` is :func:`free_flight` of ``v + dt aba(q, v, tau)``."""
    v = np.array([0.3, 0.1, 0, 1.0, 0.3, 0.2])
    d = check_against_differences(BOX, lifted(Q0, 0.02), v, Z, CORNERS, 1e-5)
    assert list(d.step.modes) == ["open"] * 4
    a = sd.aba_derivatives(BOX, lifted(Q0, 0.02), v, Z)
    w, N = free_flight(v, sd.aba(BOX, lifted(Q0, 0.02), v, Z), DT)
    assert np.abs(d.step.v - np.r_[w[:3], N[3:, 3:] @ w[3:]]).max() <= 1e-15
    assert np.abs(d.dv_dv - N @ (np.eye(6) + DT * (a[1] + transport_jacobian(v)))).max() <= 1e-12
    assert np.abs(d.dv_dtau - DT * N @ a[2]).max() <= 1e-15
    # free motion: those derivatives, with any gravity, and without contacts
    g = np.array([1.0, -2.0, -9.0])
    for contacts in (CORNERS, []):
        d = sd.contact_step_derivatives(BOX, lifted(Q0, 0.02), v, Z, contacts, DT, gravity=g)
        a = sd.aba_derivatives(BOX, lifted(Q0, 0.02), v, Z, gravity=g)
        Ni = np.linalg.inv(free_flight(v, sd.aba(BOX, lifted(Q0, 0.02), v, Z, gravity=g), DT)[1])
        for x, ax in zip((Ni @ d.dv_dq, Ni @ d.dv_dv - np.eye(6) - DT * transport_jacobian(v), Ni @ d.dv_dtau), a):
            assert rel_err(x / DT, ax) <= rounding_bound(6, kappa=np.linalg.cond(sd.crba(BOX, Q0)))


def test_tumbling_box_on_three_corners_slides_and_separates():
    """Three corners (a regular contact set), the box turning: one corner lifts off, two slide."""
    v = np.array([0.1, 0.05, 0.2, 1.0, 0.3, -0.02])
    d = check_against_differences(BOX, lifted(Q0, 1e-5), v, Z, CORNERS[:3], 1e-6)
    assert sorted(d.step.modes) == ["open", "slide", "slide"]


def test_a_batch_equals_single_states():
    v = np.array([[0, 0, 0, 1.0, 0.3, -0.02], [0, 0, 0, 0, 0, -0.02], [0.3, 0.1, 0, 1.0, 0.3, 0.2]])
    q = np.stack([lifted(Q0, 1e-5), lifted(Q0, 1e-5), lifted(Q0, 0.02)])
    d = sd.contact_step_derivatives(BOX, q, v, Z, CORNERS, DT, tol=TOL)
    assert d.dv_dq.shape == (3, 6, 6) and d.step.v.shape == (3, 6)
    for i in range(3):
        di = sd.contact_step_derivatives(BOX, q[i], v[i], Z, CORNERS, DT, tol=TOL)
        for name in FIELDS:
            assert np.abs(getattr(d, name)[i] - getattr(di, name)).max() <= \
                1e-9 * max(1.0, np.abs(getattr(di, name)).max()), name


def test_a_compiled_model_gives_the_same_derivatives():
    """On ``sd.compile(model)`` the per-state pieces run compiled (one user kernel on the compiled model):
    the same derivatives of the same step up to rounding.  (The same step: on four corners the impulses'
    split among the corners is not unique, and the compiled and NumPy solvers may pick different valid
    splits, whose derivatives differ.)"""
    from sparsedyn.contact.friction_derivatives import differentiate_step
    k = sd.compile(BOX)
    for q, v in ((lifted(Q0, 1e-5), np.array([0, 0, 0, 1.0, 0.3, -0.02])),
                 (lifted(Q0, -1e-4), np.array([0, 0, 0, 0, 0, -0.2]))):
        step = sd.contact_step(BOX, q, v, Z, CORNERS, DT)
        d = differentiate_step(BOX, BOX, q, v, Z, tuple(CORNERS), DT, step)
        dk = differentiate_step(BOX, k, q, v, Z, tuple(CORNERS), DT, step)
        for name in FIELDS:
            scale = max(np.abs(getattr(d, name)).max(), NATURAL[name])
            assert np.abs(getattr(dk, name) - getattr(d, name)).max() <= 1e-6 * scale, name


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="contact_step_derivatives: dt must be a finite number > 0"):
        sd.contact_step_derivatives(BOX, Q0, Z, Z, CORNERS, 0.0)
    with pytest.raises(ValueError, match="contact_step_derivatives: contact 'c' needs a friction coefficient"):
        sd.contact_step_derivatives(BOX, Q0, Z, Z, [sd.Contact("box", "3d", name="c")], DT)
    with pytest.raises(KeyError, match="'nowhere'"):
        sd.contact_step_derivatives(BOX, Q0, Z, Z, [sd.Contact("nowhere", "3d", friction=0.5)], DT)
    with pytest.raises(ValueError, match="kind='3d'"):
        sd.contact_step_derivatives(BOX, Q0, Z, Z, [sd.Contact("box")], DT)
    with pytest.raises(ValueError, match="q: contains NaN"):
        sd.contact_step_derivatives(BOX, np.full(7, np.nan), Z, Z, CORNERS, DT)
    with pytest.raises(ValueError, match="tau"):
        sd.contact_step_derivatives(BOX, Q0, Z, np.zeros(5), CORNERS, DT)


# --- solo12 on its feet ----------------------------------------------------------------------------

SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def test_solo12_feet_pressed_down_and_pushed():
    """solo12's feet 10 um above the ground, the base pressed down at random joint velocities and
    torques: the feet stick or slide (both occur), and the derivatives equal central differences."""
    model, _ = load_pair("solo12", True)
    feet = [sd.Contact(f, "3d", friction=0.7) for f in SOLO_FEET]
    q = np.zeros(model.nq)
    q[6] = 1.0
    q[7:] = np.tile([0.0, 0.8, -1.6], 4)
    q[2] = 1e-5 - min(sd.frame_placement(model, q, f)[1][2] for f in SOLO_FEET)
    rng = np.random.default_rng(2)
    modes = set()
    for _ in range(2):
        v = rng.normal(size=model.nv)
        v[:6] *= 0.3
        v[5] -= 0.3
        tau = 5 * rng.normal(size=model.nv)
        tau[:6] = 0
        d = check_against_differences(model, q, v, tau, feet, 1e-6)
        modes |= set(d.step.modes)
    assert {"stick", "slide"} <= modes


# --- a step in a scene: the contacts come from the geometry and move with q ----------------------------

def _ball_scene(offset=0.02, r=0.1):
    """A ball of radius r whose sphere is ``offset`` off its body's origin (so the contact point moves in
    the body as it rolls), on the floor."""
    from sparsedyn.model.spatial import Transform
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0,
                                         rot_inertia=np.eye(3) * 0.4 * r * r)
    model = b.add_frame("ball", "ball").build().with_geometry(
        sd.Geometry("ball", 0, Transform(np.eye(3), np.array([offset, 0, 0])), "sphere", (r,), "collision"))
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], friction=0.3)
    q = np.array([0, 0, 0, np.sin(0.15), 0, 0, np.cos(0.15)])        # turned 0.3 rad about x
    R, p = sd.frame_placements(model, q)
    q[2] = r - 1e-5 - (p[0] + R[0] @ [offset, 0, 0])[2]                   # the sphere 10 um above the floor
    return model, scene, q


def test_scene_step_of_a_ball_rolling_and_sliding_differentiates_with_its_moving_contact_point():
    """A spinning ball sliding on the floor (its sphere off the body's origin): the contact point is the
    sphere's lowest point, which moves in the body as it turns, and the derivatives with respect to q
    follow it (the central differences re-run the collision at every perturbed state).  Holding the
    point fixed in the body, as a point contact does, misses a turn's effect on it: its dv/dq is off by
    more than the derivative's own size."""
    from sparsedyn.contact.scene_step import scene_contacts
    model, scene, q = _ball_scene()
    v = np.array([1.0, 0.5, -0.1, 0.5, -0.3, -0.05])
    d = check_against_differences(model, q, v, np.zeros(6), scene, 1e-6)
    assert list(d.step.modes) == ["slide"]
    fixed = sd.contact_step_derivatives(model, q, v, np.zeros(6), scene_contacts(scene, q), DT, tol=TOL)
    assert np.abs(fixed.dv_dv - d.dv_dv).max() <= 1e-9                      # v enters both alike
    assert np.abs(fixed.dv_dq - d.dv_dq).max() > np.abs(d.dv_dq).max()


def hand_scene():
    """``(model, scene, q, v, tau)``: a hand (a sphere on the forearm's tip) 4 um into the torso's side
    (a box face), pressed there by the elbow's torque: a two-body contact."""
    from sparsedyn.model.spatial import Transform
    b = sd.ModelBuilder("hand")
    b.add_body("torso", None, sd.make_joint("free"), mass=4.0, rot_inertia=np.diag([0.01, 0.06, 0.06]),
               com=[0.2, 0, 0])
    b.add_body("fore", "torso", sd.make_joint("revolute", axis=[0, 0, 1]), mass=1.0,
               rot_inertia=np.diag([1e-3, 0.015, 0.015]), Xtree=(np.eye(3), [0.4, 0.1, 0]), com=[0.2, 0, 0])
    model = b.build().with_geometry(
        sd.Geometry("torso", 0, Transform(np.eye(3), np.array([0.15, 0, 0])), "box", (0.5, 0.06, 0.06), "collision"),
        sd.Geometry("hand", 1, Transform(np.eye(3), np.array([0.4, 0, 0])), "sphere", (0.03,), "collision"))
    scene = sd.Scene(model, friction=0.5).with_pairs(add=[("torso", "hand")])      # parent and child: by hand
    q = np.r_[0, 0, 0, 0, 0, 0, 1, np.pi + np.arcsin(0.1) + 1e-5]            # the hand 4 um into the torso
    return model, scene, q, np.r_[0, 0, 0, 0.02, 0, 0, 0.05], np.r_[0, 0, 0, 0, 0, 0, 2.0]


def test_scene_step_with_a_self_collision_differentiates_with_both_bodies_moving():
    """A hand (a sphere on the forearm's tip) pressed by the elbow's torque onto the torso's side (a box
    face): a two-body contact, the plane moving with the torso and the sphere with the forearm, 4 um
    deep (the position correction acts), sticking; no gravity.  Against central differences."""
    model, scene, q, v, tau = hand_scene()
    d = check_against_differences(model, q, v, tau, scene, 1e-6, gravity=np.zeros(3))
    assert list(d.step.modes) == ["stick"] and d.step.impulses[0, 2] > 0


def test_scene_step_of_a_box_sliding_on_a_box_differentiates_corner_by_corner():
    """The box sliding on a table (a world box): its four corners on the table's top face."""
    from sparsedyn.model.spatial import Transform
    model = box_model().with_geometry(sd.Geometry("box", 0, Transform(np.eye(3), np.zeros(3)), "box", (2 * H,) * 3,
                                                  "collision"))
    table = sd.Shape("box", (1.0, 1.0, 0.2), placement=(np.eye(3), [0, 0, 0.1]), name="table")
    scene = sd.Scene(model, world=[table], friction=MU)
    v = np.array([0, 0, 0, 1.0, 0.3, -0.02])
    d = check_against_differences(model, lifted(Q0, 0.2 + 1e-5), v, Z, scene, 1e-6)
    assert list(d.step.modes) == ["slide"] * 4



def test_the_derivatives_correction_impulses_are_the_steps_own_sweeps():
    """correction_impulses (the position correction the derivatives differentiate) runs the step's own
    stages (_correction_sweep, and _correction_polish where polish_due says, as the kernel runs them)
    operation for operation: the same impulses to the last bit, on redundant, regular and separating
    normal blocks, without and with held rows (a held row's ``w = A l + c`` within ``[0, hi]``, its ``l``
    of either sign)."""
    from sparsedyn.contact.correction import (_correction_polish, _correction_sweep, correction_impulses,
                                              polish_due, polish_first)
    rng = np.random.default_rng(7)
    hi = 1e-3
    for nc in (1, 4, 7):
        for with_held in (False, True):
            J = rng.normal(size=(nc, 3 if nc > 3 else nc))          # four or seven rows on three dofs: redundant
            A = J @ J.T + (0.0 if nc > 3 else 0.1) * np.eye(nc)
            c = rng.normal(size=nc) * 1e-2
            held = (np.arange(nc) % 2 == 1).astype(float) * with_held
            c[held > 0] = 0.5 * hi                                  # held rows: touching, inside their band
            l, stop, sweeps, due, change, best = np.zeros(nc), 0.0, 0.0, polish_first(nc), 0.0, None
            while True:
                l0 = l
                l, stop, best = _correction_sweep(A, c, l, sweeps, held, hi, best)
                sweeps += 1.0
                if stop >= 0.5:
                    break
                flag, change = polish_due(sweeps, due, l, l0, change)
                if flag >= 0.5:
                    l, due = _correction_polish(A, c, l, held, hi), 2.0 * sweeps
            assert np.array_equal(correction_impulses(A[None], c[None], held[None], hi)[0], l)
            w, scale = A @ l + c, 1e-6 * np.abs(c).max()
            assert np.all(w >= -scale) and np.all(l[held == 0] >= 0)                # it solves the LCP
            assert np.all(w[held > 0] <= hi + scale)
            assert np.all(np.abs(l * w * (held == 0)) <= scale * np.abs(l).max() + 1e-300)


def test_correction_derivative_equals_the_pseudo_inverse_on_the_active_normal_rows():
    """The position correction's q derivative (``_correction_derivative``) is ``Wq + (J H^-1)_A^T
    pinv(G_AA) (-(Cq + J / dt)_A)`` on the normal rows ``A`` whose correction impulse is positive (numpy's
    pinv, rcond 1e-12), to rounding times the condition of ``G_AA`` squared (its right side is not in its
    range): every normal row active (read as slices), one inactive (indexed), none, on four contacts
    whose normal rows are redundant (rank 3 of 4: a box's corners) and on two that are not."""
    from sparsedyn.contact.friction_derivatives import _correction_derivative
    rng = np.random.default_rng(7)
    nv, dt = 6, 1e-3
    for nc, rank in ((4, 3), (2, 2)):
        J = rng.normal(size=(3 * nc, nv))
        normals = rng.normal(size=(rank, nv))
        J[2::3] = rng.normal(size=(nc, rank)) @ normals                 # the normal rows: rank `rank`
        M = rng.normal(size=(nv, nv))
        H = M @ M.T + nv * np.eye(nv)
        JMinv = np.linalg.solve(H, J.T).T
        G = J @ JMinv.T
        Wq, Cq = rng.normal(size=(nv, nv)), rng.normal(size=(3 * nc, nv))
        for ln in (np.full(nc, 0.05), np.r_[0.0, np.full(nc - 1, 0.05)], np.zeros(nc)):
            A = 3 * np.flatnonzero(ln > 0) + 2
            got = _correction_derivative(J, JMinv, G, ln, Wq, Cq, dt)
            if not A.size:
                assert np.array_equal(got, Wq)
                continue
            GA = G[np.ix_(A, A)]
            ref = Wq + JMinv[A].T @ (np.linalg.pinv(GA, rcond=1e-12) @ -(Cq[A] + J[A] / dt))
            s = np.linalg.svd(GA, compute_uv=False)
            kappa = s[0] / s[s > 1e-12 * s[0]][-1]
            assert rel_err(got, ref) <= rounding_bound(3 * nc, kappa * kappa), (nc, ln)
