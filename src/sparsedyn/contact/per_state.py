"""A batch step's results in a scene, state by state, made when read: :class:`PerState`.

A batch of states in a scene is one call of the step on a layout of slots that holds every state's
contacts (:func:`~sparsedyn.contact.scene_step.scene_step`); its impulses and modes come back in those
slots, (B, ns, 3) and (B, ns).  Each state has its own number of contacts, so the result is one array
per state, each made where it is read (a loop over a batch reads a few of them, or none).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["PerState", "concatenated", "even_count", "contact_places"]


class PerState(Sequence):
    """The rows of each state's contacts in a batch step's array ``x`` (B, ns, ...) in slots: a sequence of
    B arrays (nc_b, ...), state ``b``'s made when read.  Where every state's ``c`` contacts fill its first
    ``c`` slots in order (``c >= 0``), state ``b``'s is the view ``x[b, :c]``; else (``c`` -1) contact ``i``
    of state ``b`` (``ends[b] <= i < ends[b + 1]``, ``ends`` a list of B + 1 ints) is in slot ``slot[i]``
    (``slot`` (n,)), and state ``b``'s is ``x[b, slot[ends[b]:ends[b + 1]]]``."""

    __slots__ = ("_x", "_c", "_slot", "_ends")

    def __init__(self, x, c, slot=None, ends=None):
        self._x, self._c, self._slot, self._ends = x, c, slot, ends

    def __len__(self):
        return len(self._x)

    def __getitem__(self, b):
        if isinstance(b, slice):
            return [self[k] for k in range(*b.indices(len(self)))]
        b = range(len(self._x))[b]                 # (an int: negative from the end; out of range: IndexError)
        if self._c >= 0:
            return self._x[b, :self._c]
        return self._x[b, self._slot[self._ends[b]:self._ends[b + 1]]]

    def __repr__(self):
        return f"PerState({list(self)!r})"

    def rows(self):
        """All states' rows in order, state by state (n, ...): what concatenating the states' arrays gives."""
        x, c = self._x, self._c
        if c >= 0:
            return x[:, :c].reshape((-1,) + x.shape[2:])
        counts = np.diff(self._ends)
        return x[np.repeat(np.arange(len(x)), counts), self._slot]


def concatenated(states, shape=()):
    """All states' rows in order, state by state, (n,) + ``shape``: a :class:`PerState`'s :meth:`~PerState.rows`,
    else the arrays of the sequence ``states``, each reshaped to (-1,) + ``shape``, concatenated."""
    if isinstance(states, PerState):
        return states.rows()
    return np.concatenate([np.reshape(x, (-1,) + shape) for x in states])


def even_count(laid, per_body):
    """``c`` where every state of the batch layout ``laid`` (a
    :class:`~sparsedyn.contact.scene_batch.BatchContacts`) has ``c`` contacts in its first ``c`` slots, in
    order, else -1: its per-body slots (``per_body``), or its data slots (each state's contacts in its
    first slots in order: an equal count)."""
    if per_body:
        return laid.even
    counts = laid.counts
    return int(counts[0]) if len(counts) and (counts == counts[0]).all() else -1


def contact_places(laid, per_body):
    """``(state, slot)`` (n,) of each contact of the batch layout ``laid`` in order: its state, and its slot in
    the per-body slots (``per_body``) or in the data slots (each state's contacts in its first slots, in
    order)."""
    state = np.repeat(np.arange(len(laid.counts)), laid.counts)
    if per_body:
        return state, laid.slot
    return state, np.arange(len(state)) - np.repeat(laid.ends[:-1], laid.counts)
