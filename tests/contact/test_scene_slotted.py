"""A step in a scene laid out in its slots for its derivatives (sparsedyn.contact.scene_slotted): the
slots hold the step's own impulses and modes, their weights are the modes' with the slots' friction,
and a batch's layout (one loop over the states) is the one-state layout's, on both roads.  The step
itself is checked by hand: a box sliding flat on the floor and landing at 0.1 m/s."""

import numpy as np
import pytest

import sparsedyn as sd
from test_scene import MASS, SIDE, floor_scene
from sparsedyn.contact.friction_problem import ContactSlots, _model_and_kernels
from sparsedyn.contact.lazy_modes import MODE_NAMES
from sparsedyn.contact.scene_slotted import MODE_WEIGHTS, batch_slots, one_state_slots, slotted_scene_step

DT, G, MU, TOL = 1e-3, 9.81, 0.5, 1e-8
Q = [0.1, -0.2, SIDE / 2, 0, 0, 0, 1]                       # flat on the floor (a plain list)
V = [0, 0, 0, 0.3, 0, -0.1]                                 # [omega, v]: sliding along x, landing at 0.1 m/s


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_the_slots_hold_the_steps_impulses_and_modes(backend):
    scene = floor_scene()
    model, kernels = _model_and_kernels(scene.model, "test")
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
        step, _, slotted = slotted_scene_step(model, kernels, Q, V, np.zeros(6), scene, DT, {})
        ref = sd.contact_step(model, Q, V, np.zeros(6), scene, DT)
    # by hand: the four bottom corners slide, the normal impulses stop the fall and carry the weight
    # over the step, and each friction impulse is -mu times its normal impulse along x
    lam = slotted.impulses[0]
    scale = MASS * (0.1 + G * DT)
    assert list(slotted.modes[0]) == ["slide"] * 4 == list(ref.modes)
    assert abs(lam[:, 2].sum() - scale) <= 100 * TOL * scale
    assert np.allclose(lam[:, 0], -MU * lam[:, 2], rtol=0, atol=100 * TOL * scale)
    assert np.abs(lam[:, 1]).max() <= 100 * TOL * scale
    # the slots are the step's
    assert np.array_equal(lam, np.reshape(step.impulses, (4, 3))) and np.array_equal(step.v, ref.v)
    assert np.array_equal(slotted.weights[0], [MODE_WEIGHTS["slide"] + (MU,)] * 4)
    assert np.array_equal(slotted.mu[0], [MU] * 4)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_batchs_slots_are_each_states_slots(backend):
    """Two states (the landing box and the box at rest): the batch's layout (on the native road the
    collision kernel's, every state placed at once) holds each state as the one-state road does (the
    same solve, to the solver's tolerance)."""
    scene = floor_scene()
    model, kernels = _model_and_kernels(scene.model, "test")
    Qs, Vs = np.array([Q, Q], float), np.array([V, np.zeros(6)])
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
        _, _, batch = slotted_scene_step(model, kernels, Qs, Vs, np.zeros((2, 6)), scene, DT, {})
        singles = [slotted_scene_step(model, kernels, q, v, np.zeros(6), scene, DT, {})[2] for q, v in zip(Qs, Vs)]
    assert batch.frames == singles[0].frames and batch.impulses.shape == (2, 4, 3)
    for b, one in enumerate(singles):
        scale = MASS * (abs(Vs[b, 5]) + G * DT)
        assert np.abs(batch.impulses[b] - one.impulses[0]).max() <= 100 * TOL * scale
        assert np.array_equal(batch.data[b], one.data[0]) and np.array_equal(batch.mu[b], one.mu[0])
    # the sliding box's modes are unique (four slides); the box at rest on four corners has a continuum
    # of solutions (a corner with no impulse reads stick or open), and carries its weight over the step
    assert list(batch.modes[0]) == list(singles[0].modes[0]) == ["slide"] * 4
    assert abs(batch.impulses[1, :, 2].sum() - MASS * G * DT) <= 100 * TOL * MASS * G * DT


@pytest.mark.parametrize("in_data", [False, True])
def test_one_states_slots_put_each_contact_in_its_slot(in_data):
    """Contacts laid out in the slots out of order (every slot filled, or one free): slot ``index[k]``
    holds contact ``k``'s impulse, mode and weights, the free slot is open with zero impulse, the
    position correction is read per contact (data slots: contact ``k``'s in entry ``k``) or per slot."""
    scene = floor_scene()
    model, kernels = _model_and_kernels(scene.model, "test")
    with sd.use_backend("native", deterministic=True):
        _, found, _ = slotted_scene_step(model, kernels, Q, V, np.zeros(6), scene, DT, {})
    frames, data = found.slots.frames, np.asarray(found.slots.data)
    data = data + np.arange(4)[:, None]                     # each slot's friction its own
    rng = np.random.default_rng(3)
    for index in ([2, 0, 3, 1], [3, 0, 1]):
        nc = len(index)
        impulses, correction = rng.normal(size=(nc, 3)), rng.normal(size=4)
        codes = [1, 2, 0, 1][:nc]
        slots = ContactSlots(frames, np.array(index), data)
        for _ in range(2):                                   # (the second: the layout kept in scene.cache)
            got = one_state_slots(scene, np.array(Q, float), np.zeros(nc, int), slots, impulses, codes, correction,
                                  in_data)
            lam, corr, modes, weights = np.zeros((4, 3)), np.zeros(4), ["open"] * 4, np.zeros((4, 4))
            weights[:, 0], weights[:, 3] = 1.0, data[:, 0]
            for k, s in enumerate(index):
                lam[s], modes[s] = impulses[k], MODE_NAMES[codes[k]]
                corr[s] = correction[k] if in_data else correction[s]
                weights[s, :3] = MODE_WEIGHTS[modes[s]]
            assert np.array_equal(got.impulses[0], lam) and np.array_equal(got.correction[0], corr)
            assert list(got.modes[0]) == modes and np.array_equal(got.weights[0], weights)
            assert np.array_equal(got.data[0], data) and got.frames == frames


class _Laid:
    """A batch's contacts as the collision kernel lays them out (the fields ``batch_slots`` reads)."""

    def __init__(self, frames, data, index):
        self.frames, self.data = frames, data
        self.pair = np.zeros(sum(map(len, index)), np.intp)
        self.slot = np.concatenate([np.asarray(x, np.intp) for x in index])
        self.ends = np.cumsum([0] + [len(x) for x in index])
        self.laid = self

    def at(self):
        return np.repeat(np.arange(len(self.data)), np.diff(self.ends)), self.slot


@pytest.mark.parametrize("in_data", [False, True])
def test_a_batchs_slots_placed_at_once_are_each_states_one_state_slots(in_data):
    """Three states whose contacts fill the slots out of order, none, and three of four: the batch's
    layout placed at once equals each state's :func:`one_state_slots` (impulses, modes, weights'
    friction, position correction per contact or per slot, shapes of the free slots, data)."""
    scene = floor_scene()
    model, kernels = _model_and_kernels(scene.model, "test")
    with sd.use_backend("native", deterministic=True):
        _, found, _ = slotted_scene_step(model, kernels, Q, V, np.zeros(6), scene, DT, {})
    frames = found.slots.frames
    rng = np.random.default_rng(5)
    index = ([2, 0, 3, 1], [], [3, 0, 1])
    data = np.asarray(found.slots.data)[None] + rng.uniform(0, 0.1, (3, 4, 1))     # each state's friction its own
    impulses = [rng.normal(size=(len(x), 3)) for x in index]
    modes = [np.array([MODE_NAMES[k] for k in rng.integers(0, 3, len(x))], "<U5") for x in index]
    correction = rng.normal(size=(3, 4))
    laid = _Laid(frames, data, index)
    got = batch_slots(scene, laid, impulses, modes, correction, in_data)
    assert got.frames == frames and got.impulses.shape == (3, 4, 3)
    for b, at in enumerate(index):
        codes = [MODE_NAMES.index(x) for x in modes[b].tolist()]
        one = one_state_slots(scene, np.array(Q, float), np.zeros(len(at), np.intp),
                              ContactSlots(frames, np.array(at, np.intp), data[b]), impulses[b], codes, correction[b],
                              in_data)
        for name in ("data", "shapes", "mu", "impulses", "correction"):
            assert np.array_equal(getattr(got, name)[b], getattr(one, name)[0]), (b, name)
        assert got.modes[b].tolist() == one.modes[0].tolist() and got.kinds == one.kinds
