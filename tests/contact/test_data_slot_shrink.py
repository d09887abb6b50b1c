"""A scene's count of data slots follows its contacts down as well as up
(sparsedyn.contact.data_slots.data_slot_count: grown at once where a step's contacts do not fit,
shrunk once SHRINK_AFTER single steps in a row fit in fewer), and a return to a count already built
builds nothing: the kernels and the fused road's plans of each count are kept."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.codegen import native
from sparsedyn.contact.data_slots import (MIN_DATA_SLOTS, SHRINK_AFTER, data_slot_count, data_slots_used,
                                          least_data_slots, least_slots, steps_to_shrink)
from tests.conftest import dm_control_humanoid
from tests.contact.test_data_slots import _lying, _standing, _stairs

DT = 0.005


@pytest.fixture(scope="module")
def humanoid():
    return dm_control_humanoid()


def test_the_least_count_is_a_power_of_two_or_three_quarters_of_one():
    """The counts 8, 12, 16, 24, 32, 48, 64: the least of ``2^k`` and ``3 * 2^(k-2)`` holding the contacts."""
    nc = [0, 1, 8, 9, 12, 13, 16, 17, 24, 25, 32, 33, 48, 49, 64]
    want = [8, 8, 8, 12, 12, 16, 16, 24, 24, 32, 32, 48, 48, 64, 64]
    assert [least_slots(n) for n in nc] == want
    assert least_data_slots(nc).tolist() == want
    assert least_data_slots([5, 20, 9]).tolist() == [8, 24, 12]


def test_the_count_grows_at_once_and_shrinks_after_the_rules_steps(humanoid):
    scene = sd.Scene(humanoid)
    assert data_slot_count(scene, 0) == 0
    assert data_slot_count(scene, 3) == MIN_DATA_SLOTS == 8
    assert data_slot_count(scene, 31) == 32                              # at once, 8 -> 32
    # steps that fit in 8 and in 12 slots: after SHRINK_AFTER of them, the least count holding them all
    for k in range(SHRINK_AFTER - 1):
        assert data_slot_count(scene, 9 if k == 3 else 2) == 32
    assert data_slot_count(scene, 2) == 12
    # a step that needs the count breaks the run: SHRINK_AFTER more steps before it shrinks
    for k in range(SHRINK_AFTER - 1):
        data_slot_count(scene, 2)
    assert data_slot_count(scene, 12) == 12
    for k in range(SHRINK_AFTER - 1):
        assert data_slot_count(scene, 2) == 12
    # a batch's count (step=False) grows it but counts no step of the run
    assert data_slot_count(scene, 2, False) == 12
    assert data_slot_count(scene, 2) == 8
    assert data_slot_count(scene, 0) == 8                                # never below the least
    # the native roads' counts, told after their steps, run the same rule
    assert data_slot_count(scene, 17, False) == 24
    assert data_slots_used(scene, [5] * (SHRINK_AFTER - 1)) == 24
    assert data_slots_used(scene, [5, 5]) == 8


def test_a_chain_of_steps_ends_where_the_count_may_shrink(humanoid):
    """``steps_to_shrink``: the steps left of the run that fit in fewer slots (a rollout's native chain
    ends there, so its count shrinks at the step a step-by-step count does): SHRINK_AFTER with no run,
    SHRINK_AFTER - 5 after five such steps, and a chain of that many shrinks at its last step."""
    scene = sd.Scene(humanoid)
    assert data_slot_count(scene, 20) == 24 and steps_to_shrink(scene) == SHRINK_AFTER
    assert data_slots_used(scene, [20, 5, 5, 5, 5, 5]) == 24 and steps_to_shrink(scene) == SHRINK_AFTER - 5
    assert data_slots_used(scene, [5] * (SHRINK_AFTER - 6)) == 24 and steps_to_shrink(scene) == 1
    assert data_slots_used(scene, [12]) == 12 and steps_to_shrink(scene) == SHRINK_AFTER   # (12 holds the run's most)


def _builds(model):
    return sorted(n for n in native.shared(model).kernels if n.startswith("contact_step_kernel"))


def test_a_humanoid_lying_then_standing_steps_in_the_least_count_again_with_no_new_build(humanoid):
    """The dm_control humanoid lying on the floor (a dozen contacts: 16 data slots), then standing (a
    few: 8 would hold them): after SHRINK_AFTER single default (native) steps standing the count is 8
    again, and that step is bit for bit a fresh scene's first step at that state (the same count of
    slots: the same kernel, the same problem, the same solver from the same start).  Lying down again
    grows the count at once; standing again shrinks it; no kernel is built after the first visit of each
    count, and each count's fused plan is the same object at each visit while the slot layout stays
    (kept, not made again)."""
    scene = sd.Scene(humanoid, world=_stairs())
    model = scene.model
    lying, standing = _lying(model), _standing(scene)
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    plans, before = {}, set(_builds(model))    # (kernels of the model that other tests built in this process)
    with sd.use_backend("native", deterministic=True):
        fresh = sd.contact_step(model, standing, v, tau, sd.Scene(humanoid, world=_stairs()), DT)
        assert len(fresh.impulses) <= MIN_DATA_SLOTS
        for visit in range(3):
            many = sd.contact_step(model, lying, v, tau, scene, DT)
            assert len(many.impulses) > MIN_DATA_SLOTS
            assert scene.cache["data_slot_count"] == 2 * MIN_DATA_SLOTS
            sd.contact_step(model, lying, v, tau, scene, DT)           # (the fused road's, once planned)
            if visit == 0:
                built = _builds(model)
            plans.setdefault(16, []).append(scene.cache["fused step"].get(16))
            for k in range(SHRINK_AFTER):
                assert scene.cache["data_slot_count"] == 2 * MIN_DATA_SLOTS
                few = sd.contact_step(model, standing, v, tau, scene, DT)
            assert scene.cache["data_slot_count"] == MIN_DATA_SLOTS
            few = sd.contact_step(model, standing, v, tau, scene, DT)   # in 8 slots
            plans.setdefault(8, []).append(scene.cache["fused step"].get(8))
            for name in ("q", "v", "impulses", "iterations"):
                assert np.array_equal(getattr(few, name), getattr(fresh, name)), name
            assert list(few.modes) == list(fresh.modes)
            if visit == 0:
                built = _builds(model)
            assert _builds(model) == built
    assert len(set(built) - before) <= 2                                # 8 and 16 slots, where not built before
    # (the first visit's standing steps add slot keys to the per-body layout, which the plans hold: from
    # the second visit on the layout stays, and so does each count's plan)
    assert plans[8][1] is not None and plans[8][1] is plans[8][2] and plans[16][1] is plans[16][2]


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_rollout_whose_contacts_drop_comes_back_to_the_least_count():
    """A rollout from the humanoid lying on the floor, then one from it standing, in the same scene (the
    default, native road: the steps in chains of native calls): the first runs in 16 slots, the second
    shrinks to 8 within 3 SHRINK_AFTER steps (through 12: the run of steps that fit in fewer slots began
    with the lying rollout's last steps, 9 and 10 contacts; a chain's steps are counted when it returns)
    and its last steps equal bit for bit those of a rollout from the same state in a fresh scene (8 slots
    all along) once both count 8: the same kernel from the same state and warm start."""
    model = dm_control_humanoid()
    scene = sd.Scene(model)
    lying = _lying(model)
    v, tau = np.zeros(model.nv), [0.0] * model.nv
    with sd.use_backend("native", deterministic=True):
        sd.rollout(model, lying, v, tau, scene, DT, 4)
        assert scene.cache["data_slot_count"] == 2 * MIN_DATA_SLOTS
        standing = _standing(scene)
        r = sd.rollout(model, standing, v, tau, scene, DT, 4 * SHRINK_AFTER)
        assert scene.cache["data_slot_count"] == MIN_DATA_SLOTS
        k = 3 * SHRINK_AFTER                       # (counted 8 from here at the latest)
        assert max(len(x) for x in r.impulses[k - SHRINK_AFTER:]) <= MIN_DATA_SLOTS
        again = sd.rollout(model, r.q[k], r.v[k], tau, sd.Scene(model), DT, SHRINK_AFTER, warm_start=r.impulses[k - 1])
    assert np.array_equal(again.q, r.q[k:]) and np.array_equal(again.v, r.v[k:])


@pytest.mark.parametrize("controlled", [False, True])
def test_a_rollout_whose_contacts_outgrow_the_data_slots_grows_them_in_its_native_chain(monkeypatch, controlled):
    """The humanoid standing (a few contacts: 8 data slots), then a rollout lying on the floor in the same
    scene (more contacts than 8 slots hold, from its first step; the kernel of their count built by a step
    in another scene), under joint forces given (its steps in chains of native calls) or a controller's
    (a native call a step): the native call answers the count its first step needs, the scene's count
    grows to it, and every step is one native call; the rollout is bit for bit that of a twin scene on
    the Python road (each step laid out and counted there: its count grown at the same step)."""
    from test_scene_fused import _Spy, _python_road_rollout
    from sparsedyn.contact import scene_fused
    model = dm_control_humanoid()
    scene, twin = sd.Scene(model), sd.Scene(model)
    lying, standing = _lying(model), _standing(scene)
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    forces = (lambda t, q, v: tau) if controlled else list(tau)
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        many = len(sd.contact_step(model, lying, v, tau, sd.Scene(model), DT).impulses)   # (builds their count)
        sd.rollout(model, standing, v, tau, scene, DT, 3)
        assert scene.cache["data_slot_count"] == MIN_DATA_SLOTS
        spy.answered = 0
        r = sd.rollout(model, list(lying), tuple(v), forces, scene, DT, 10)
        answered, count = spy.answered, scene.cache["data_slot_count"]
        _python_road_rollout(monkeypatch, model, standing, v, tau, twin, DT, 3)
        ref = _python_road_rollout(monkeypatch, model, lying, v, forces, twin, DT, 10)
    # (the spy counts a native call's answers: the first is the count alone, then the 10 steps)
    assert many > MIN_DATA_SLOTS and answered == 1 + 10 and count == least_slots(many) == twin.cache["data_slot_count"]
    assert r.q.tobytes() == ref.q.tobytes() and r.v.tobytes() == ref.v.tobytes()
    assert r.iterations.tobytes() == ref.iterations.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(r.impulses, ref.impulses))
