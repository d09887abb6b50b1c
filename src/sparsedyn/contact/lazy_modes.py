"""Results whose contact modes are computed when first read: a step's (:class:`LazyModesStep`) and a
rollout's in a scene (:class:`LazyModesRollout`, all steps' at once).  Steps along a trajectory
rarely read their modes (``"stick"``, ``"slide"`` or ``"open"`` per contact, from the impulses and
contact velocities: :func:`~sparsedyn.contact.friction_problem._modes`), and a step's modes alone
cost as much as a few steps' together."""

from __future__ import annotations

import itertools

import numpy as np

from .friction_problem import ContactResiduals, ContactStep, Rollout, _modes

__all__ = ["LazyModesStep", "LazyModesRollout"]


class _Modes:
    """The modes of one state's step, computed from ``(impulses, velocities, index, lscale, vscale,
    tol)`` (:func:`_modes`; ``index``: the contacts' slots, or None) when first read."""

    __slots__ = ("args", "value")

    def __init__(self, *args):
        self.args, self.value = args, None

    def get(self, i=3):
        if self.value is None:
            lam, u, index, ls, vs, tol = self.args
            if index is not None:
                lam, u = lam.take(index, -2), u.take(index, -2)
            self.value, self.args = _modes(lam, u, ls, vs, tol), None
        return self.value


class _Report:
    """The ``residuals`` (entry 4 of a :class:`ContactStep`) and ``iterations`` (entry 5) of one state's
    step, made from the kernel's ``report`` (8,) when read (:meth:`get` of the entry's index)."""

    __slots__ = ("report",)

    def __init__(self, report):
        self.report = report

    def get(self, i):
        rep = self.report
        if i == 4:
            return tuple.__new__(ContactResiduals, (rep[..., 0], rep[..., 1], rep[..., 2]))
        return np.array(int(rep[3]))


class _LazyModes:
    """A result (a NamedTuple, ``_plain``) whose ``modes`` (its entry 3) are computed when first read (a
    :class:`_Modes` or :class:`_TrajectoryModes`; steps along a trajectory rarely read them), and a
    step's residuals and iterations (entries 4 and 5, a :class:`_Report`) made when read; as a tuple it
    holds them like any other."""

    __slots__ = ()

    @property
    def modes(self):
        x = tuple.__getitem__(self, 3)
        return x.get(3) if type(x) in _DEFERRED else x

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        x = tuple.__getitem__(self, i)
        return x.get(range(len(self))[i]) if type(x) in _DEFERRED else x

    def __iter__(self):
        for i, x in enumerate(tuple.__iter__(self)):
            yield x.get(i) if type(x) in _DEFERRED else x

    def __reduce__(self):
        return self._plain, tuple(self)

    def __repr__(self):
        return repr(self._plain(*self))

    def __eq__(self, other):
        return tuple(self) == (tuple(other) if isinstance(other, tuple) else other)

    def __ne__(self, other):
        return not self == other

    __hash__ = None                               # (its arrays are not hashable either)


class LazyModesStep(_LazyModes, ContactStep):
    """A :class:`ContactStep` of one state whose ``modes`` are computed when first read, its
    ``residuals`` and ``iterations`` made when read."""

    __slots__ = ()
    _plain = ContactStep

    @property
    def residuals(self):
        x = tuple.__getitem__(self, 4)
        return x.get(4) if type(x) in _DEFERRED else x

    @property
    def iterations(self):
        x = tuple.__getitem__(self, 5)
        return x.get(5) if type(x) in _DEFERRED else x


class LazyModesRollout(_LazyModes, Rollout):
    """A :class:`Rollout` of one state in a scene whose ``modes`` (a list, one array per step) are
    computed when first read, all steps at once (:class:`_TrajectoryModes`)."""

    __slots__ = ()
    _plain = Rollout


class _TrajectoryModes:
    """The modes of a trajectory's steps, ``modes`` each step's modes or their :class:`_Modes` (one
    state's, not computed yet), computed when first read in one pass over all steps' contacts (a
    step's modes alone cost as much as a few steps' together)."""

    __slots__ = ("modes", "value")

    def __init__(self, modes):
        self.modes, self.value = modes, None

    def get(self, i=3):
        if self.value is None:
            self.value, self.modes = _trajectory_modes(self.modes), None
        return self.value


def _trajectory_modes(modes):
    """The list of the modes of ``modes`` (each step's modes or its :class:`_Modes`, all of one ``tol``
    where lazy): those not computed yet in one pass."""
    lazy = [k for k, m in enumerate(modes) if type(m) is _Modes and m.value is None]
    if len(lazy) < 2:
        return [m.get() if type(m) is _Modes else m for m in modes]
    args = [modes[k].args for k in lazy]
    tol = args[0][5]
    if any(a[5] != tol for a in args):
        return [m.get() if type(m) is _Modes else m for m in modes]
    n = [len(a[0]) for a in args]
    lam, u = np.concatenate([a[0] for a in args]), np.concatenate([a[1] for a in args])
    ls = np.array([float(a[3]) for a in args]).repeat(n)        # each contact its step's scales
    vs = np.array([float(a[4]) for a in args]).repeat(n)
    names = _modes(lam[:, None], u[:, None], ls, vs, tol)[:, 0]
    ends = list(itertools.accumulate(n, initial=0))
    out = list(modes)
    for k, a, i, j in zip(lazy, args, ends[:-1], ends[1:]):
        out[k] = names[i:j] if a[2] is None else names[i:j].take(a[2])
    return out


_DEFERRED = (_Modes, _TrajectoryModes, _Report)
