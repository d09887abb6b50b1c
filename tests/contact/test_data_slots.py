"""Slots whose body is data (sparsedyn.contact.data_slots, DATA_SLOT in friction_problem.problem_of):
the rows against the world Jacobian of the body (sd.frame_jacobian, "world"), the step against the
per-body layout's step (the same problem: the same solution), and the builds of a humanoid falling
onto stairs bounded by the slot counts."""

import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
import sparsedyn.contact.friction as friction
from sparsedyn.contact.data_slots import MIN_DATA_SLOTS, data_slot_count, data_slots
from sparsedyn.contact.friction_kernel import RHO_START
from sparsedyn.contact.friction_problem import (DATA_SLOT, contact_data, contact_slots, plane_basis, problem_of,
                                                slot_weights)
from sparsedyn.contact.scene_step import scene_contacts, scene_slots
from tests.conftest import rounding_bound, solve_bound

DT = 0.005


def _body_frame(model, body):
    return next(k for k, f in enumerate(model.frames) if f.body == body)


def test_data_slot_rows_are_the_world_jacobian_at_the_point_of_body_a_less_b(rng):
    """A world contact's rows: ``R_c^T (v - x x w)`` of the body's world Jacobian (sd.frame_jacobian,
    "world": the spatial velocity at the world origin) at the world point ``x``; a two-body one the same
    of ``a`` less ``b``'s; the gap ``n . x - offset``; ``J H^-1`` and ``G`` from sd.crba."""
    model = sd.humanoid()
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    hand, foot, torso = (model.frames[model.frame(n)].body for n in ("r_hand", "l_foot", "torso"))
    pairs = [(hand, None), (foot, None), (hand, torso), (torso, foot)]
    x = rng.normal(size=(4, 3))
    planes = np.array([[0, 0, 1, 0.1], [0.2, -0.5, 1, 0.3], [1, 0.3, 0, -0.2], [0, 1, 0.1, 0.0]])
    W = np.array([slot_weights(model, a, b) for a, b in pairs])
    P = problem_of(model, q, v, tau, (DATA_SLOT,) * 4, x, planes, weights=list(W))
    H = sd.crba(model, q)
    J = []
    for (a, b), xi, plane in zip(pairs, x, planes):
        Rc, n, offset = plane_basis(plane)
        rows = 0
        for body, sign in ((a, 1.0), (b, -1.0)):
            if body is not None:
                Jw = sd.frame_jacobian(model, q, _body_frame(model, body), "world")
                rows = rows + sign * (Jw[3:] - np.cross(xi, Jw[:3], axisb=0, axisc=0))
        J.append(Rc.T @ rows)
    J = np.concatenate(J)
    gap = np.array([xi @ (p[:3] / np.linalg.norm(p[:3])) - p[3] / np.linalg.norm(p[:3]) for xi, p in zip(x, planes)])
    bound = rounding_bound(model.nv, 4.0)
    assert np.abs(P.J - J).max() <= bound * max(1.0, np.abs(J).max())
    assert np.abs(P.gap - gap).max() <= bound * max(1.0, np.abs(gap).max())
    JMinv = np.linalg.solve(H, J.T).T
    assert np.abs(P.JMinv - JMinv).max() <= solve_bound(H, JMinv[0]) * 4 * max(1.0, np.abs(JMinv).max()) + \
        rounding_bound(model.nv, np.linalg.cond(H)) * np.abs(JMinv).max()
    assert np.abs(P.G - J @ JMinv.T).max() <= rounding_bound(model.nv, np.linalg.cond(H)) * max(1.0, np.abs(P.G).max())


def test_weights_are_one_on_a_less_b_and_zero_on_the_joints_they_share():
    """``slot_weights``: the joints from the root to ``a`` (1), to ``b`` (-1), the shared ones 0."""
    model = sd.humanoid()
    hand, torso = (model.frames[model.frame(n)].body for n in ("r_hand", "torso"))
    w = slot_weights(model, hand, torso)
    for j in range(model.nbodies):
        on_a, on_b = j in model.ancestors(hand), j in model.ancestors(torso)
        assert (w[model.v_slice(j)] == float(on_a) - float(on_b)).all()


def _mjcf_humanoid():
    import dm_control
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sd.load_mjcf(str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml"), geometry=True)


def _stairs(n=3, rise=0.15, run=0.35, start=0.45):
    """``n`` boxes, each one ``rise`` higher than the one before, ``run`` deep, from ``x = start``."""
    return [sd.Shape("box", (run + 0.05, 1.2, rise * (k + 1)),
                     placement=(np.eye(3), (start + run * k, 0.0, rise * (k + 1) / 2)), name=f"stair{k}")
            for k in range(n)]


@pytest.fixture(scope="module")
def humanoid_scene():
    return sd.Scene(_mjcf_humanoid(), world=_stairs())


def _lying(model):
    """The humanoid lying on its back on the floor, a knee raised (a dozen contacts)."""
    q = np.zeros(model.nq)
    q[2], q[3:7] = 0.11, (np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4))   # x y z w: 90 degrees about x
    return q


def test_a_step_in_data_slots_equals_the_step_in_per_body_slots(humanoid_scene):
    """The humanoid on the floor: the step of its contacts laid out per body (their points fixed in
    their bodies' frames, one build per set of bodies) and in data slots (the point in the world, the
    body by joint weights) solve the same problem: the same iterations and modes, ``v+`` and the
    impulses to the rounding bound of the step.  The default (native) road."""
    scene = humanoid_scene
    model = scene.model
    q, v, tau = _lying(model), np.zeros(model.nv), np.zeros(model.nv)
    contacts = scene_contacts(scene, q)
    assert len(contacts) >= 4
    checked = friction._frictional(model, contacts, "test")[0]
    options = friction._options({}, None)
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        per_body = friction._slotted_step(model, q, v, tau, checked, contact_slots(model, checked), DT, **options)
        data = friction._slotted_step(model, q, v, tau, checked, data_slots(scene, q, scene_slots(scene, contacts)),
                                      DT, **options)
    assert int(per_body.iterations) == int(data.iterations) and list(per_body.modes) == list(data.modes)
    frames, _, points, planes = contact_data(model, checked)
    P = problem_of(model, q, v, tau, frames, points, planes)
    m = P.G.shape[-1]
    A = P.G + (RHO_START * np.trace(P.G) / m) * np.eye(m)
    H = sd.crba(model, q)
    bound = solve_bound(H, P.a) * DT * np.abs(P.a).max() + rounding_bound(m, np.linalg.cond(A))
    scale = max(1.0, np.abs(per_body.v).max())
    assert np.abs(data.v - per_body.v).max() <= bound * scale
    assert np.abs(data.impulses - per_body.impulses).max() <= bound * np.abs(per_body.impulses).max()


def test_the_slot_count_starts_at_its_least_and_doubles_only_when_the_contacts_outgrow_it():
    scene = sd.Scene(_mjcf_humanoid())
    assert data_slot_count(scene, 0) == 0
    assert data_slot_count(scene, 3) == MIN_DATA_SLOTS
    assert data_slot_count(scene, MIN_DATA_SLOTS) == MIN_DATA_SLOTS
    assert data_slot_count(scene, 2) == MIN_DATA_SLOTS                       # it never shrinks
    assert data_slot_count(scene, MIN_DATA_SLOTS + 1) == 2 * MIN_DATA_SLOTS
