"""The free joint in the contact step (sparsedyn.contact.transport): its linear velocity held in the
world over a step and its body's gyroscopic term taken backward, on both roads.

* a torque-free asymmetric box never gains kinetic energy, and loses at most what the backward term
  may take (``dt^2 |w x L|^2_(I^-1) / 2`` a step: derived in the test);
* a sphere rolling on a plane keeps its speed, as MuJoCo's does to its soft contact's loss
  (test_scene_mujoco);
* a floating tree, a box carrying a spinning rotor, spinning and flying without gravity keeps its
  energy to rounding;
* the pieces against their definitions (rotations by SciPy, derivatives against central differences).
"""

import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact.transport import (gyroscopic, gyroscopic_jacobian, next_axes_jacobian, to_next_axes,
                                         to_old_axes, transport, transport_jacobian)
from sparsedyn.model.spatial import Transform

DT, TOL = 1e-3, 1e-8
NO_GRAVITY = np.zeros(3)
SIZE, MASS = (0.3, 0.2, 0.1), 2.0
I_BOX = MASS / 12 * np.diag([SIZE[1] ** 2 + SIZE[2] ** 2, SIZE[0] ** 2 + SIZE[2] ** 2, SIZE[0] ** 2 + SIZE[1] ** 2])


def box():
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I_BOX)
    return b.add_frame("box", "box").build().with_geometry(
        sd.Geometry("box", 0, Transform(np.eye(3), np.zeros(3)), "box", SIZE, "collision"))


def kinetic(model, q, v):
    return float(sd.mechanical_energy(model, q, v, gravity=NO_GRAVITY))


def roll(model, q, v, contacts, steps, backend):
    with warnings.catch_warnings(), sd.use_backend(backend, deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        return sd.rollout(model, q, v, np.zeros(model.nv), contacts, DT, steps, gravity=NO_GRAVITY)


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("where", ["no contacts", "scene"])
def test_a_torque_free_spinning_box_never_gains_energy(backend, where):
    """An asymmetric box spinning at (3, 5, 7) rad/s (about no principal axis) and flying at 0.6 m/s,
    no gravity, 1000 steps, with a plain empty contact list and in a scene whose floor is 10 m below.

    The backward gyroscopic term: ``(I - dt L x) w+ = L`` with ``L = I w`` gives
    ``w+ . I (w+ - w) = dt w+ . (L x w+) = 0``, so ``T+ - T = -|w+ - w|^2_I / 2 <= 0``; and
    ``w+ - w = -dt (1 - dt I^-1 L x)^-1 I^-1 (w x L)`` where ``I^-1 L x`` is skew-adjoint in the
    ``I`` inner product, so ``|(1 - dt S)^-1| <= 1`` there and each step loses at most
    ``dt^2 |w x L|^2_(I^-1) / 2``.  The linear velocity is held in the world: its kinetic energy does
    not change.  Energies to rounding (``rounding_bound(6) E``)."""
    model = box()
    q0 = np.r_[0, 0, 10.0, Rotation.from_rotvec(0.7 * np.array([1, 2, 0.5]) / np.linalg.norm([1, 2, 0.5])).as_quat()]
    v0 = [3.0, 5.0, 7.0, 0.5, -0.3, 0.2]
    contacts = [] if where == "no contacts" else sd.Scene(model, world=[sd.Shape("plane", name="floor")])
    r = roll(model, q0, v0, contacts, 1000, backend)
    E = np.array([kinetic(model, q, v) for q, v in zip(r.q, r.v)])
    rounding = rounding_bound(6) * E[0]
    loss = -np.diff(E)
    w = np.asarray(r.v)[:-1, :3]
    wL = np.cross(w, w @ I_BOX)
    most = 0.5 * DT ** 2 * np.einsum("ki,ij,kj->k", wL, np.linalg.inv(I_BOX), wL)
    assert loss.min() >= -rounding                                   # never gains
    assert np.all(loss <= most + rounding)                           # loses no more than the bound
    assert most.min() > 1e3 * rounding                               # (the forward term would gain this)
    # the linear velocity is the world's, constant
    u = [Rotation.from_quat(q[3:]).apply(v[3:]) for q, v in zip(r.q, r.v)]
    assert np.abs(np.array(u) - u[0]).max() <= 1000 * rounding_bound(6) * np.linalg.norm(v0[3:])


def gyrostat():
    """A box (free) carrying a rotor (a disc on a revolute joint along the box's z axis through its
    centre): both centres of mass at the free joint's origin, the rotor symmetric about its axis."""
    b = sd.ModelBuilder("gyrostat").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I_BOX)
    b.add_body("rotor", "box", sd.make_joint("revolute", axis=(0, 0, 1)), mass=0.5,
               rot_inertia=np.diag([0.001, 0.001, 0.002]))
    return b.build()


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_a_floating_tree_spinning_in_the_air_keeps_its_energy(backend):
    """The gyrostat spinning about the box's z axis (a principal axis of both bodies) at 7 rad/s, its
    rotor at 30 rad/s relative, flying at 0.6 m/s, no gravity, 1000 steps: no torque turns the axis
    (``w x L = 0``: the backward gyroscopic term is zero) and the mass matrix does not change with
    the rotor's angle, so each step keeps the kinetic energy but for rounding (``rounding_bound(nv) E``
    a step); the forward transport term gained ``m dt^2 |w x v|^2 / 2`` a step (1.6e-5 J)."""
    model = gyrostat()
    q0 = np.r_[0, 0, 1.0, Rotation.from_rotvec([0.3, -0.2, 0.5]).as_quat(), 0.0]
    v0 = [0, 0, 7.0, 0.5, -0.3, 0.2, 30.0]
    r = roll(model, q0, v0, [], 1000, backend)
    E = np.array([kinetic(model, q, v) for q, v in zip(r.q, r.v)])
    assert np.abs(np.diff(E)).max() <= rounding_bound(model.nv) * E[0]
    assert abs(E[-1] - E[0]) <= 1000 * rounding_bound(model.nv) * E[0]
    assert 0.5 * 2.5 * DT ** 2 * np.linalg.norm(np.cross(v0[:3], v0[3:6])) ** 2 > 1e3 * rounding_bound(7) * E[0]


# --- the pieces -------------------------------------------------------------------------------------

def test_the_pieces_against_their_definitions():
    """On a two-joint tree (free + revolute), values and batches: ``to_next_axes`` turns the free
    joint's linear velocity by ``exp(dt w)^T`` (SciPy's rotation) and ``to_old_axes`` undoes it;
    ``transport`` is ``[0; w x v]``; ``gyroscopic`` is the backward step less the forward one; the
    Jacobians equal central differences (to their truncation, ``h^2`` times the third derivative's
    scale, and rounding ``eps / h``)."""
    model = gyrostat()
    rng = np.random.default_rng(3)
    v = rng.normal(size=(4, 7)) * 5
    dt = 0.01
    E = Rotation.from_rotvec(dt * v[:, :3]).as_matrix()
    nxt = to_next_axes(model, v, dt)
    assert np.abs(nxt[:, 3:6] - np.einsum("kji,kj->ki", E, v[:, 3:6])).max() <= 1e-14 * np.abs(v).max()
    assert np.array_equal(nxt[:, :3], v[:, :3]) and np.array_equal(nxt[:, 6], v[:, 6])
    assert np.abs(to_old_axes(model, nxt, dt) - v).max() <= 1e-14 * np.abs(v).max()
    assert np.abs(transport(model, v) - np.c_[np.zeros((4, 3)), np.cross(v[:, :3], v[:, 3:6]), np.zeros(4)]).max() \
        <= 1e-14 * np.abs(v).max() ** 2
    for w in v:
        L = I_BOX @ w[:3]
        back = np.linalg.solve(I_BOX - dt * np.cross(np.eye(3), L), L)
        fwd = w[:3] - dt * np.linalg.solve(I_BOX, np.cross(w[:3], L))
        assert np.abs(gyroscopic(model, w, dt) - np.r_[back - fwd, np.zeros(4)]).max() <= 1e-13 * np.abs(w).max()
    h = 1e-5
    for fn, jac in ((lambda x: to_next_axes(model, x, dt), lambda x: next_axes_jacobian(model, x, dt)),
                    (lambda x: transport(model, x), lambda x: transport_jacobian(model, x)),
                    (lambda x: gyroscopic(model, x, dt), lambda x: gyroscopic_jacobian(model, x, dt))):
        for w in v:
            num = np.stack([(fn(w + h * e) - fn(w - h * e)) / (2 * h) for e in np.eye(7)], -1)
            assert np.abs(jac(w) - num).max() <= 1e-6 * max(1.0, np.abs(num).max())
        assert np.abs(jac(v)[2] - jac(v[2])).max() == 0.0
