"""Results whose contact modes are computed when first read: a step's (:class:`LazyModesStep`) and a
rollout's in a scene (:class:`LazyModesRollout`, all steps' at once).  Steps along a trajectory
rarely read their modes (``"stick"``, ``"slide"`` or ``"open"`` per contact, from the impulses and
contact velocities: :func:`~sparsedyn.contact.friction_problem._modes`), and a step's modes alone
cost as much as a few steps' together."""

from __future__ import annotations

import itertools

import numpy as np

from .friction_problem import MODE_NAMES, STICKING_SLIP, ContactResiduals, ContactStep, Rollout, StepArrays, _modes

__all__ = ["LazyModesStep", "LazyModesRollout", "MODE_NAMES", "mode_codes"]


def mode_codes(step):
    """The modes of one state's step (a :class:`~sparsedyn.ContactStep`) as codes, a list of ints
    (nc,) indexing :data:`MODE_NAMES`; a step whose modes are not read yet keeps them unread (its
    codes straight from the kernel's arrays, :meth:`_Modes.codes`)."""
    x = tuple.__getitem__(step, 3)
    if type(x) is _Modes:
        return x.codes()
    return [MODE_NAMES.index(m) for m in np.asarray(x).tolist()]


class _Modes:
    """The modes (entry 3 of a :class:`ContactStep`) of one state's step, computed from the kernel's
    arrays ``out`` (a :class:`~sparsedyn.contact.friction_problem.StepArrays` or the plain tuple of its
    entries: its impulses, velocities and scales, :meth:`codes`), ``index`` (the contacts' slots, or
    None) and ``tol`` when first read; its ``residuals`` (entry 4) and ``iterations`` (entry 5) made
    from the report when read (:meth:`get` of the entry's index).  ``value`` and ``code`` (the modes'
    names and codes) are set when first computed (unset before: one step's result made with the least
    work)."""

    __slots__ = ("out", "index", "tol", "value", "code")

    def __init__(self, out, index, tol):
        self.out = out
        self.index = index
        self.tol = tol

    def scales(self):
        """The impulse and velocity scales (Python floats) of the step's stopping test."""
        rep = self.out[4]
        return float(rep[5]), float(rep[6])

    def get(self, i=3):
        if i == 4:
            rep = self.out[4]
            return tuple.__new__(ContactResiduals, (rep[..., 0], rep[..., 1], rep[..., 2]))
        if i == 5:
            return np.array(int(self.out[4][3]))
        if getattr(self, "value", None) is None:
            self.value = np.array([MODE_NAMES[c] for c in self.codes()], "<U5")
        return self.value

    def codes(self):
        """The modes as codes (a list of ints indexing :data:`MODE_NAMES`), computed once: ``"open"``
        where the normal impulse is at most ``tol`` times the impulse scale, ``"stick"`` where the
        tangential speed is at most ``100 tol`` times the velocity scale, else ``"slide"`` (the test of
        :func:`~sparsedyn.contact.friction_problem._modes`, on Python floats: a few contacts)."""
        if getattr(self, "code", None) is None:
            out, index = self.out, self.index
            lam, u, rep = out[2].tolist(), out[3].tolist(), out[4].tolist()
            if index is not None:                # (the rows as lists: fewer NumPy calls than takes)
                at = index.tolist() if type(index) is np.ndarray else list(index)
                lam, u = [lam[k] for k in at], [u[k] for k in at]
            lo, vo = self.tol * rep[5], (STICKING_SLIP * self.tol * rep[6]) ** 2
            self.code = [0 if l[2] <= lo else 1 if x[0] ** 2 + x[1] ** 2 <= vo else 2 for l, x in zip(lam, u)]
        return self.code


class _LazyModes:
    """A result (a NamedTuple, ``_plain``) whose ``modes`` (its entry 3) are computed when first read (a
    :class:`_Modes` or :class:`_TrajectoryModes`; steps along a trajectory rarely read them), and a
    step's residuals and iterations (entries 4 and 5, the same :class:`_Modes`) made when read; as a
    tuple it holds them like any other."""

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
    state's, not computed yet) or the ``(arrays, index)`` to make them of (a kernel's
    :class:`~sparsedyn.contact.friction_problem.StepArrays` as a tuple, the contacts' slots or None;
    their ``tol``: ``tol``), computed when first read in one pass over all steps' contacts (a step's
    modes alone cost as much as a few steps' together)."""

    __slots__ = ("modes", "value", "tol")

    def __init__(self, modes, tol=None):
        self.modes, self.value, self.tol = modes, None, tol

    def get(self, i=3):
        if self.value is None:
            tol = self.tol
            modes = [_Modes(tuple.__new__(StepArrays, m[0]), m[1], tol) if type(m) is tuple else m for m in self.modes]
            self.value, self.modes = _trajectory_modes(modes), None
        return self.value


def _trajectory_modes(modes):
    """The list of the modes of ``modes`` (each step's modes or its :class:`_Modes`, all of one ``tol``
    where lazy): those not computed yet in one pass."""
    lazy = [modes[k] for k, m in enumerate(modes) if type(m) is _Modes and getattr(m, "value", None) is None]
    if len(lazy) < 2:
        return [m.get() if type(m) is _Modes else m for m in modes]
    tol = lazy[0].tol
    if any(m.tol != tol for m in lazy):
        return [m.get() if type(m) is _Modes else m for m in modes]
    n = [len(m.out[2]) for m in lazy]
    lam = np.concatenate([m.out[2] for m in lazy])
    u = np.concatenate([m.out[3] for m in lazy])
    ls, vs = np.array([m.scales() for m in lazy]).reshape(-1, 2).repeat(n, 0).T      # each contact its step's scales
    names = _modes(lam[:, None], u[:, None], ls, vs, tol)[:, 0]
    ends = list(itertools.accumulate(n, initial=0))
    for m, i, j in zip(lazy, ends[:-1], ends[1:]):
        m.value = names[i:j] if m.index is None else names[i:j].take(m.index)
    return [m.get() if type(m) is _Modes else m for m in modes]


_DEFERRED = (_Modes, _TrajectoryModes)
