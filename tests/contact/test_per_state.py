"""A batch step's per-state results (sparsedyn.contact.per_state): each state's rows of the slots' array, made
when read, equal to the rows that the states' contacts occupy; and on the default road, a batch of boxes in a
scene returns them as those of each state's single step."""

import pickle

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.per_state import PerState, concatenated
from test_scene import DT, SIDE, box_model


def _slots():
    """(B, ns, 3) = (3, 4, 3) impulses in slots, and three states' contacts: 2 in slots (1, 3), none, 3 in
    slots (0, 1, 2)."""
    x = np.arange(36.0).reshape(3, 4, 3)
    return x, np.array([1, 3, 0, 1, 2]), [0, 2, 2, 5]


def test_uneven_states_read_the_slots_their_contacts_occupy():
    x, slot, ends = _slots()
    s = PerState(x, -1, slot, ends)
    want = [x[0, [1, 3]], x[1, []], x[2, [0, 1, 2]]]
    assert len(s) == 3 and [a.shape for a in s] == [(2, 3), (0, 3), (3, 3)]
    assert all(np.array_equal(a, b) for a, b in zip(s, want))
    assert np.array_equal(s[-1], want[2]) and [a.shape for a in s[1:]] == [(0, 3), (3, 3)]
    assert np.array_equal(s.rows(), np.concatenate(want)) and np.array_equal(np.concatenate(list(s)), s.rows())
    assert all(np.array_equal(a, b) for a, b in zip(pickle.loads(pickle.dumps(s)), want))     # (to Dask's workers)
    for b in (3, -4):
        with pytest.raises(IndexError):
            s[b]


def test_even_states_are_views_of_their_first_slots():
    x = np.arange(24.0).reshape(2, 4, 3)
    s = PerState(x, 2)
    assert [a.tolist() for a in s] == [[[0, 1, 2], [3, 4, 5]], [[12, 13, 14], [15, 16, 17]]]
    assert np.shares_memory(s[1], x) and s.rows().tolist() == [[0, 1, 2], [3, 4, 5], [12, 13, 14], [15, 16, 17]]
    assert list(PerState(np.zeros((0, 4, 3)), 0)) == [] and PerState(np.zeros((0, 4, 3)), 0).rows().shape == (0, 3)


def test_a_batch_of_boxes_gives_each_state_its_single_steps_impulses_and_modes():
    """Boxes resting on a floor (four corners), one tilted onto an edge (two), one in the air (none): each
    state's impulses and modes of the batch, read from the sequences, are those of its single step."""
    model, t = box_model(), np.pi / 4
    c, s = np.cos(t / 2), np.sin(t / 2)
    Q = np.array([[0, 0, SIDE / 2 - 1e-4, 0, 0, 0, 1.0],
                  [0.5, 0, SIDE / 2 * (np.cos(t) + np.sin(t)) - 1e-4, s, 0, 0, c], [0, 0.5, 1.0, 0, 0, 0, 1.0]])
    scene = sd.Scene(model, world=[sd.Shape("plane")], friction=0.8)
    with sd.use_backend("native", deterministic=True):
        batch = sd.contact_step(model, Q.tolist(), [0.0] * 6, (0.0,) * 6, scene, DT)   # (lists, a tuple)
        ones = [sd.contact_step(model, q, np.zeros(6), np.zeros(6), scene, DT) for q in Q.tolist()]
    assert [len(x) for x in batch.impulses] == [4, 2, 0] and len(batch.modes) == 3
    for b, one in enumerate(ones):
        assert np.array_equal(batch.impulses[b], one.impulses) and list(batch.modes[b]) == list(one.modes)


def test_concatenated_rows_of_a_sequence_or_its_own():
    x, slot, ends = _slots()
    s = PerState(x, -1, slot, ends)
    assert np.array_equal(concatenated(s, (3,)), s.rows())
    assert concatenated([[1.0, 2, 3], np.zeros((0, 3)), [[4, 5, 6]]], (3,)).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert concatenated([np.array(["stick"]), np.array(["open", "slide"])]).tolist() == ["stick", "open", "slide"]
