"""Duplicated contacts: a contact set with contacts given twice (or more), and a body holding two copies
of one shape in a scene (its contacts in two pairs of the same two bodies, each point twice), against
the step without the copies, on both roads.

A copy of a contact adds rows along the null space of the Delassus matrix ``G`` only: the next
velocity is unique (the step's problem is strictly convex in ``v+``), so a duplicated set's step
equals the plain set's to the solver's tolerance (each contact's velocity within ``tol`` of the
velocity scale, over the box's lever arms: :func:`v_tol`); the split of the load between a contact
and its copy is not unique and is not compared, their resultant is.  The solve's cost stays bounded:
the polish's mode system is the same with or without the copies (its least-norm answer handles the
null space), so the duplicated set is solved no more than one round of polishes after the plain set
(a round rejected at iteration ``k`` is followed by one at ``2 k + FIRST``)."""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact import friction_polish as fp
from test_friction import DT, G, H, MASS, MODEL, MU, Q0, TOL, Z, check_residuals, corners, push
from test_scene_physics import FLOOR, boxes_model

#: Velocity bound of two solutions that each pass the stopping test: each contact's velocity within
#: ``tol`` of the velocity scale (the free velocity, at most ``|v| + g dt + |f| dt / m``), over the box's
#: lever arms (its half edge ``H``: ``1 / H`` for the rate of turn), twice (two solutions), and for the
#: three contact directions summed.
def v_tol(vscale):
    return 2 * 3 * TOL * vscale * max(1.0, 1.0 / H)


PUSHES = [(0.0, 0.0), (0.3, 0.5 * MU * MASS * G), (1.1, 2.0 * MU * MASS * G)]     # none, sticking, sliding


@pytest.mark.parametrize("road", ["numpy", "native"])
@pytest.mark.parametrize("angle, force", PUSHES)
@pytest.mark.parametrize("copies", [(0,), (0, 1, 2, 3), (3, 3, 3)])
def test_a_box_on_duplicated_corners_steps_as_on_its_four_corners(road, angle, force, copies):
    """The box resting on its four corners, not pushed, pushed along the floor below friction (its
    corners stick) and beyond it (they slide), with some corners twice or more: the same next state, to
    the solver's tolerance, and the same resultant normal impulse; no more iterations than one round of
    polishes after the plain set (module docstring)."""
    plain = corners()
    doubled = plain + [plain[i] for i in copies]
    f = push(angle, force)
    with sd.use_backend(road, deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        one = sd.contact_step(MODEL, Q0, Z, Z, plain, DT, f_ext=f, tol=TOL)
        two = sd.contact_step(MODEL, Q0, Z, Z, doubled, DT, f_ext=f, tol=TOL)
    assert set(np.asarray(one.modes).tolist()) == ({"slide"} if force > MU * MASS * G else {"stick"})
    vscale = G * DT + force * DT / MASS
    assert np.abs(two.v - one.v).max() <= v_tol(vscale)
    assert np.abs(two.q - one.q).max() <= DT * v_tol(vscale) + 4 * np.finfo(float).eps
    # the resultant normal impulse (the split among the corners is not unique, four corners or eight):
    # m times the change of the vertical velocity, so within m v_tol of each other
    total = [np.asarray(s.impulses)[:, 2].sum() for s in (one, two)]
    assert abs(total[1] - total[0]) <= MASS * v_tol(vscale)
    assert int(two.iterations) <= 2 * int(one.iterations) + fp.FIRST


# --- a body holding two copies of one shape in a scene -------------------------------------------------

@pytest.mark.parametrize("road", ["numpy", "native"])
def test_a_box_with_its_shape_twice_steps_as_with_it_once(road):
    """A free box with two identical box shapes resting tilted 0.05 rad on the floor (one corner
    deeper): its contacts in two pairs of the same two bodies, each corner twice; its step is the
    single shape's to the solver's tolerance, and its iterations at most a round of polishes later."""
    size = (0.2, 0.15, 0.1)
    model = boxes_model([size], [2.0])
    twice = model.with_geometry(sd.Geometry("box0_copy", 0, model.geometry("collision")[0].X, "box", size,
                                            "collision"))
    # turned 0.05 rad about x: one long edge lowest, 0.1 mm into the floor
    q = np.r_[0.0, 0.0, 0.05 * np.cos(0.05) + 0.075 * np.sin(0.05) - 1e-4, np.sin(0.025), 0.0, 0.0, np.cos(0.025)]
    v = np.array([0.0, 0.0, 0.0, 0.1, 0.0, -0.2])
    steps = []
    for m in (model, twice):
        scene = sd.Scene(m, world=[FLOOR], friction=0.6)
        with sd.use_backend(road, deterministic=True), warnings.catch_warnings():
            warnings.simplefilter("error", sd.ContactStepWarning)
            steps.append(sd.contact_step(m, q, v, np.zeros(6), scene, DT))
    one, two = steps
    assert len(np.asarray(two.impulses)) == 2 * len(np.asarray(one.impulses))
    vscale = 0.2 + 0.1 * np.linalg.norm(size) / 2 + G * DT          # |v| + |w| (half diagonal) + g dt
    assert np.abs(two.v - one.v).max() <= 2 * 3 * TOL * vscale / 0.05  # (the shortest half edge: 5 cm)
    assert int(two.iterations) <= 2 * int(one.iterations) + fp.FIRST


# --- one point given twice: a Delassus matrix of rank 3 in 6 rows ---------------------------------------

#: The point below the box's centre (its bottom face's centre), and the box's rotational inertia about
#: its centre, ``I0 = m (2 h)^2 / 6`` (a solid cube).
BELOW, I0 = (0.0, 0.0, -H), MASS * (2 * H) ** 2 / 6


@pytest.mark.parametrize("road", ["numpy", "native"])
@pytest.mark.parametrize("force", [0.0, 0.5 * 2.5 * MU * MASS * G, 2.0 * 2.5 * MU * MASS * G])
def test_one_point_given_twice_carries_the_hand_derived_resultant(road, force):
    """The box balanced on the centre of its bottom face, that one point given as two identical contacts
    (``G`` has rank 3 in its 6 rows: the second contact's rows are the first's), not pushed, pushed
    along x below friction and beyond it.  By hand: the point's Delassus block is
    ``G1 = diag(1/m + h^2/I0, 1/m + h^2/I0, 1/m) = diag(2.5, 2.5, 1) / m`` (``r = (0, 0, -h)``:
    ``[r]x^T [r]x = h^2 diag(1, 1, 0)``, ``m h^2 / I0 = 1.5``) and its free velocity
    ``dt (F / m, 0, -g)``, so the resultant impulse of the pair is unique (only its split is not):
    ``lambda_n = m g dt``, and the friction ``-F dt / 2.5`` (sticking, ``F <= 2.5 mu m g``) or
    ``-mu m g dt`` (sliding).  Coulomb's law holds to the solver's tolerance
    (:func:`~test_friction.check_residuals`); the pair costs at most one round of polishes more than the
    single point (module docstring)."""
    plain = [sd.Contact("box", "3d", friction=MU, point=BELOW, name="p")]
    pair = plain + [sd.Contact("box", "3d", friction=MU, point=BELOW, name="p_copy")]
    f = push(0.0, force)
    with sd.use_backend(road, deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        one = sd.contact_step(MODEL, Q0, Z, Z, plain, DT, f_ext=f, tol=TOL)
        two = sd.contact_step(MODEL, Q0, Z, Z, pair, DT, f_ext=f, tol=TOL)
    assert 1.0 + MASS * H ** 2 / I0 == 2.5
    sticks = force <= 2.5 * MU * MASS * G
    expected = np.array([-force * DT / 2.5 if sticks else -MU * MASS * G * DT, 0.0, MASS * G * DT])
    total = np.asarray(two.impulses).sum(0)
    vscale = G * DT + force * DT / MASS
    # the resultant from velocities within tol vscale of the hand solution (each of 2 contacts, 3 rows),
    # through G1's inverse (at most m), and the cone's primal residual (tol of the impulses m g dt)
    bound = MASS * 2 * 3 * TOL * vscale + 2 * TOL * MASS * G * DT
    assert np.abs(total - expected).max() <= bound
    assert np.abs(np.asarray(one.impulses)[0] - expected).max() <= bound
    assert np.all(np.asarray(two.impulses)[:, 2] >= 0.0)
    check_residuals(two, Z)
    assert np.abs(two.v - one.v).max() <= v_tol(vscale)
    assert int(two.iterations) <= 2 * int(one.iterations) + fp.FIRST
