"""Contact inputs under hostile conditions: absurd planes, points and time steps refused where they
enter, zero states an empty answer, object and ragged arrays the library's own errors."""

import re

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.friction_derivatives import MIN_DT
from sparsedyn.model.sensors import MAX_CONTACT_LENGTH


def box():
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) / 60)
    return b.add_frame("box", "box").build()


def corners(**kw):
    return [sd.Contact("box", "3d", friction=0.5, point=(x, y, -0.1), name=f"c{i}", **kw)
            for i, (x, y) in enumerate([(-.1, -.1), (.1, -.1), (-.1, .1), (.1, .1)])]


Q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
BOX_URDF = """<robot name="crate"><link name="crate"><inertial><mass value="1"/>
  <inertia ixx="0.0167" iyy="0.0167" izz="0.0167" ixy="0" ixz="0" iyz="0"/></inertial>
  <collision><geometry><box size="0.2 0.2 0.2"/></geometry></collision></link></robot>"""


@pytest.mark.parametrize("normal, squared", [((0, 0, 1e200), "inf"), ((0, 0, 1e-300), "0"),
                                             ([1e-160, 0, 0], "1e-320")])
def test_a_plane_normal_that_cannot_be_normalised_is_refused(normal, squared):
    """(0, 0, 1e200) once overflowed to a zero normal and the box fell through the ground."""
    with pytest.raises(ValueError, match=rf"plane normal .* cannot be normalised.*squared length {squared} "):
        sd.Contact("box", "3d", friction=0.5, plane=(normal, 0.0))


def test_a_scaled_normal_of_ordinary_length_is_the_unit_normal():
    """A normal (0, 0, 2) (squared length inside the bounds) is the ground: the resting box stays at
    rest exactly as with (0, 0, 1) (zero velocity, by the step's own stick solution)."""
    model = box()
    step = sd.contact_step(model, Q, np.zeros(6), np.zeros(6), corners(plane=((0, 0, 2.0), 0.0)), 1e-3)
    ref = sd.contact_step(model, Q, np.zeros(6), np.zeros(6), corners(), 1e-3)
    assert np.allclose(step.v, ref.v, atol=1e-10) and np.allclose(step.v, 0, atol=1e-10)


@pytest.mark.parametrize("kw", [dict(point=(0, 0, 1e300)), dict(point=[0, 0, -2e6]), dict(plane=((0, 0, 1), 1e7))])
def test_points_and_offsets_beyond_a_thousand_kilometres_are_refused(kw):
    with pytest.raises(ValueError, match=re.escape(f"expected lengths in metres of at most {MAX_CONTACT_LENGTH:g}")):
        sd.Contact("box", "3d", friction=0.5, **kw)


@pytest.mark.parametrize("dt", [5e-324, 1e-12, MIN_DT / 2])
def test_contact_step_derivatives_refuses_a_time_step_below_its_floor(dt):
    with pytest.raises(ValueError, match=re.escape(f"contact_step_derivatives: dt must be at least {MIN_DT:g} s")):
        sd.contact_step_derivatives(box(), Q, np.zeros(6), np.zeros(6), corners(), dt)


def test_zero_states_are_an_empty_answer():
    """(The empty batch is handled before and after the per-state kernel, the same code on both roads;
    the NumPy road spares the suite a native build of the contact kernel.)"""
    model = box()
    with sd.use_backend("numpy"):
        step = sd.contact_step(model, np.zeros((0, 7)), np.zeros((0, 6)), np.zeros((0, 6)), corners(), 1e-3)
        d = sd.contact_step_derivatives(model, np.zeros((0, 7)), np.zeros((0, 6)), np.zeros((0, 6)), corners(), 1e-3)
    assert step.v.shape == (0, 6) and step.impulses.shape == (0, 4, 3)
    assert all(x.shape == (0, 6, 6) for x in d[:6]) and d.step.q.shape == (0, 7)


def test_object_arrays_of_numbers_are_numbers_and_other_objects_are_refused():
    model = box()
    ref = sd.contact_step(model, Q, np.zeros(6), np.zeros(6), corners(), 1e-3)
    step = sd.contact_step(model, Q.astype(object), np.zeros(6, dtype=object), [0] * 6, corners(), 1e-3)
    assert np.array_equal(step.v, ref.v) and np.array_equal(step.q, ref.q)
    with pytest.raises(TypeError, match=r"contact_step: q: expected a numeric array of real numbers.*str"):
        sd.contact_step(model, np.array(["a"] * 7, dtype=object), np.zeros(6), np.zeros(6), corners(), 1e-3)


def test_ragged_lists_to_rollout_name_the_argument():
    model = box()
    with pytest.raises(ValueError, match=r"rollout: q0: expected a numeric array of shape \(\.\.\., 7\); got a ragged"):
        sd.rollout(model, [[0, 0, 0.1], [0, 0, 0, 1.0]], np.zeros(6), np.zeros(6), corners(), 1e-3, 3)
    with pytest.raises(ValueError, match=r"rollout: v0: .*ragged"):
        sd.rollout(model, Q, [[0], [0, 0]], np.zeros(6), corners(), 1e-3, 3)
    r = sd.rollout(model, Q.tolist(), [0.0] * 6, np.zeros(6), corners(), 1e-3, 2)     # plain lists
    assert r.q.shape == (3, 7) and np.allclose(r.v, 0, atol=1e-10)


@pytest.mark.parametrize("scene", [False, True])
@pytest.mark.parametrize("steps", [0, 3])
def test_a_state_of_the_wrong_length_or_not_finite_names_rollouts_argument(scene, steps):
    """A list q0 one short, with a list of contacts or a scene, names rollout's own argument, also
    for a rollout of no step (which takes no step that would check it: it once answered a
    broadcasting error, and with NaN a trajectory of NaN)."""
    model = box() if not scene else sd.load_urdf(BOX_URDF, floating_base=True, geometry=True)
    contacts = corners() if not scene else sd.Scene(model, world=[sd.Shape("plane")])
    v, tau = np.zeros(6), np.zeros(6)
    with pytest.raises(ValueError, match=r"^rollout: q0: expected shape \(\.\.\., 7\) .*got shape \(6,\)"):
        sd.rollout(model, Q.tolist()[:-1], v, tau, contacts, 1e-3, steps)
    with pytest.raises(ValueError, match=r"^rollout: v0: expected shape \(\.\.\., 6\) .*got shape \(5,\)"):
        sd.rollout(model, Q, [0.0] * 5, tau, contacts, 1e-3, steps)
    with pytest.raises(ValueError, match=r"^rollout: q0: contains NaN"):
        sd.rollout(model, np.r_[Q[:6], np.nan], v, tau, contacts, 1e-3, steps)
    r = sd.rollout(model, Q.tolist(), v.tolist(), tau, contacts, 1e-3, 0)
    assert r.q.shape == (1, 7) and np.array_equal(r.q[0], Q) and np.array_equal(r.v[0], v)


@pytest.mark.parametrize("road", ["native", "numpy"])
def test_derivatives_that_overflow_are_an_error_naming_the_function(road):
    """Found by the fuzzing harness: a velocity of 1e150 gives a finite (absurd) step whose
    derivatives overflow (the configuration's, and the velocity's, whose axes the step turns by
    ``dt omega``); the function says so, on both roads, instead of handing back inf/NaN or naming the
    kernel of its pieces."""
    from sparsedyn._checks import NonFiniteResultError
    v = np.array([-0.66, 1e150, -6e-4, -0.099, 0.27, 0.23])
    message = r"^contact_step_derivatives: the result \(output 'd[vq]_dq'\) is not finite"
    with sd.use_backend(road, deterministic=True), np.errstate(all="ignore"), \
            pytest.raises(NonFiniteResultError, match=message):
        sd.contact_step_derivatives(box(), Q, v, np.zeros(6), [sd.Contact("box", "3d", friction=0.5)], 1e-3)


@pytest.mark.parametrize("road", ["native", "numpy"])
def test_a_step_that_overflows_is_an_error_naming_the_step_and_the_state(road):
    """A box on its four corners moving at 1e200 m/s (a simulation that diverged): the step's velocity
    overflows double precision, and ``contact_step`` says so, with the largest velocity and joint force of
    the state, instead of an error about a ``v`` it was not given or NaN handed back; at 1e3 m/s along the
    floor the box slides on (its velocity, [omega, v] in its axes: friction takes off ``mu g dt``)."""
    from sparsedyn._checks import NonFiniteResultError
    with sd.use_backend(road), np.errstate(over="ignore", invalid="ignore"):
        fast = sd.contact_step(box(), Q, [0, 0, 0, 1e3, 0, 0], np.zeros(6), corners(), 1e-3)
        assert np.allclose(fast.v, [0, 0, 0, 1e3 - 0.5 * 9.81e-3, 0, 0], rtol=1e-12, atol=1e-9)
        with pytest.raises(NonFiniteResultError, match=r"^contact_step: the step is not finite for finite inputs "
                                                       r"\(the largest joint velocity 1e\+200, joint force 0\)"):
            sd.contact_step(box(), Q, [0, 0, 0, 1e200, 0, 0], [0.0] * 6, corners(), 1e-3)
