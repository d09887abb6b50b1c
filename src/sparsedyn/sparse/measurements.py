"""Measurement rows ``D_Y d + b_Y = 0`` and problems (a model plus a measurement set).

A measurement (Nori, section VI, eq. 16) is a linear map of some variables equal to
a value::

    y_m = sum_k M_k d[var_k] + bias_m(q, qd)          (M_k constant, m x size_k)

so its rows are ``D_Y = [.. M_k ..]`` and ``b_Y = bias_m - y_m``.  Knowing a
variable is the special case ``M = 1`` (Nori's eq. 7-8 and 14: ``c(7qdd_i)``,
``c(7fx_i)``, ``c(14tau_i)``); a selection (``M`` = some rows of ``1``) or a
constant frame transform (a force/torque sensor: ``M = sensor_X*_body``) are
others.  ``bias`` is an optional state-dependent offset, a callable
``bias(kin) -> (..., m)`` of the :class:`Kinematics` of the state written with
the generic spatial helpers (an accelerometer's ``omega x v`` term, say); it must
follow the kernel rules (any backend, no value-dependent control flow).

Inverse dynamics and forward dynamics are two measurement sets::

    inverse_dynamics_problem(model) == Problem(model).known("qdd").known("fx")
    forward_dynamics_problem(model) == Problem(model).known("tau").known("fx")

Every measurement owns a slot ``y[slot]`` in one flat value vector (as the
sensors of a Model own an address), so a solver sees one ``y`` (..., ny);
:meth:`Problem.values` builds it from the arrays the classical functions use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .variables import KINDS, Kinematics, Layout, Variable  # noqa: F401  (Kinematics: a bias reads it)

__all__ = ["Measurement", "Problem", "Kinematics", "inverse_dynamics_problem", "forward_dynamics_problem"]


@dataclass(frozen=True, eq=False)
class Measurement:
    """``y = sum_k matrix_k d[variable_k] + bias(kin)``: ``size`` scalar rows, one value slot.

    ``terms``: tuple of ``(Variable, matrix)`` with constant ``matrix`` (size, variable.size).
    ``known``: the variable kind when this is a "known variable" measurement made
    by :meth:`Problem.known` (its value is taken from that kind's array by
    :meth:`Problem.values`), else ``None``.
    """

    name: str
    terms: tuple
    size: int
    bias: Callable | None = None
    known: str | None = None

    def __post_init__(self):
        terms = []
        for var, M in self.terms:
            if not isinstance(var, Variable):
                raise TypeError(f"measurement {self.name!r}: a term must be (Variable, matrix), "
                                f"got {type(var).__name__}")
            M = np.array(M, dtype=float)
            if M.ndim == 1 and self.size == 1:
                M = M[None, :]
            if M.shape != (self.size, var.size):
                raise ValueError(f"measurement {self.name!r}: the matrix of {var.label} has shape {M.shape}, "
                                 f"expected ({self.size}, {var.size})")
            if not np.all(np.isfinite(M)):
                raise ValueError(f"measurement {self.name!r}: the matrix of {var.label} is not finite")
            M.setflags(write=False)
            terms.append((var, M))
        object.__setattr__(self, "terms", tuple(terms))

    @property
    def label(self) -> str:
        return self.name


def _selection(var, components):
    if components is None:
        return np.eye(var.size)
    comp = [int(k) for k in np.atleast_1d(components)]
    for k in comp:
        if not 0 <= k < var.size:
            raise ValueError(f"{var.label}: component {k} out of range (size {var.size})")
    return np.eye(var.size)[comp]


class Problem:
    """A model and a measurement set: the linear system ``[D; D_Y] d + [b; b_Y] = 0``.

    Immutable: :meth:`known` and :meth:`measure` return new problems, so
    ``Problem(model).known("qdd").known("fx")`` reads as the problem statement.
    :meth:`analyze` runs the offline phase (:func:`sparsedyn.sparse.analyze`).
    """

    def __init__(self, model, measurements=(), name=None, layout=None):
        self.model = model
        self.layout = layout if layout is not None else Layout(model)
        self.measurements = tuple(measurements)
        self.name = name or "problem"
        names = [m.name for m in self.measurements]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"problem {self.name!r}: measurement names used twice: {sorted(dup)}")
        slots, off = [], 0
        for m in self.measurements:
            slots.append(slice(off, off + m.size))
            off += m.size
        self.slots = tuple(slots)
        self.ny = off

    def _with(self, extra, name=None):
        return Problem(self.model, self.measurements + tuple(extra), name or self.name, self.layout)

    def renamed(self, name) -> Problem:
        return Problem(self.model, self.measurements, name, self.layout)

    def var(self, kind, body) -> Variable:
        return self.layout.var(kind, body)

    def known(self, kind: str, bodies=None, components=None, *, joints=None) -> Problem:
        """The problem with variable ``kind`` known for ``bodies`` (default: all).

        ``bodies``: indices, body names or joint names.  ``joints``: the same, for
        the joint kinds ``tau`` and ``qdd`` (``known("tau", joints=["knee"])``
        reads as the statement); give one of ``bodies`` and ``joints``.
        ``components``: a selection of the variable's components (default: all),
        e.g. ``[5]`` for the vertical force of ``fx``.  An empty selection of
        bodies adds no measurement.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown variable kind {kind!r}; expected one of {KINDS}")
        if joints is not None:
            if bodies is not None:
                raise TypeError("known: give bodies or joints, not both")
            if kind not in ("tau", "qdd"):
                raise ValueError(f"known: joints= selects joint variables (tau, qdd), not {kind!r}; use bodies=")
            bodies = joints
        if bodies is None:
            idx = range(self.model.nbodies)
        else:
            single = isinstance(bodies, (str, int, np.integer))
            idx = [self.layout.body_index(b) for b in ([bodies] if single else bodies)]
        extra = []
        for i in idx:
            var = self.layout.var(kind, i)
            M = _selection(var, components)
            suffix = "" if components is None else "." + ",".join(str(int(k)) for k in np.atleast_1d(components))
            extra.append(Measurement(f"known {var.label}{suffix}", ((var, M),), M.shape[0], known=kind))
        return self._with(extra)

    def measure(self, measurement: Measurement) -> Problem:
        """The problem with one more (general) measurement."""
        for var, _ in measurement.terms:
            if var not in self.layout.variables:
                raise ValueError(f"measurement {measurement.name!r}: {var.label} is not a variable of model "
                                 f"{self.model.name!r}")
        return self._with([measurement])

    def values(self, **arrays):
        """The flat value vector ``y`` (..., ny).

        Known-variable measurements take their value from the kind's array:
        ``qdd``/``tau`` (..., nv), ``a``/``f``/``fx`` (..., NB, 6); any other
        measurement from a keyword with its name (..., size).  A missing ``fx``
        means no external forces (zeros).
        """
        parts, shapes = [], []
        for m in self.measurements:
            if m.known is not None:
                x = arrays.get(m.known)
                if x is None:
                    if m.known != "fx":
                        raise TypeError(f"problem {self.name!r}: values for {m.known!r} are needed "
                                        f"(measurement {m.name!r})")
                    x = np.zeros((self.model.nbodies, 6))
                x = np.asarray(x)
                (var, M), = m.terms
                if m.known in ("qdd", "tau"):
                    if x.shape[-1:] != (self.model.nv,):
                        raise ValueError(f"{m.known}: expected shape (..., {self.model.nv}), got {x.shape}")
                    v = x[..., self.model.v_slice(var.body)]
                else:
                    if x.shape[-2:] != (self.model.nbodies, 6):
                        raise ValueError(f"{m.known}: expected shape (..., {self.model.nbodies}, 6), got {x.shape}")
                    v = x[..., var.body, :]
                sel = [int(np.argmax(row)) for row in M]
                v = v[..., sel] if len(sel) != var.size or sel != list(range(var.size)) else v
            else:
                if m.name not in arrays:
                    raise TypeError(f"problem {self.name!r}: a value for measurement {m.name!r} is needed")
                v = np.asarray(arrays[m.name])
                if v.shape[-1:] != (m.size,):
                    raise ValueError(f"{m.name}: expected shape (..., {m.size}), got {v.shape}")
            parts.append(v)
            shapes.append(v.shape[:-1])
        shape = np.broadcast_shapes(*shapes) if shapes else ()
        if not parts:
            return np.zeros(shape + (0,))
        dtype = object if any(p.dtype == object for p in parts) else float
        return np.concatenate([np.broadcast_to(p, shape + p.shape[-1:]).astype(dtype) for p in parts], -1)

    def analyze(self, ordering="auto", **kw):
        """Offline phase: see :func:`sparsedyn.sparse.analyze`."""
        from .solver import analyze
        return analyze(self, ordering=ordering, **kw)

    def __sparsedyn_kernels__(self):
        """``sparsedyn.compile(problem)``: the kernels of the structure analysed with the default ordering."""
        st = self.analyze()
        return st.__sparsedyn_kernels__()._replace(owner=st)

    def __repr__(self):
        return f"Problem({self.name!r}, model={self.model.name!r}, {len(self.measurements)} measurements, ny={self.ny})"


def inverse_dynamics_problem(model) -> Problem:
    """Nori's eq. (7)-(9): ``qdd`` and ``fx`` known, ``a, f, tau`` unknown."""
    return Problem(model, name="inverse dynamics").known("qdd").known("fx")


def forward_dynamics_problem(model) -> Problem:
    """Nori's eq. (14)-(15): ``tau`` and ``fx`` known, ``a, f, qdd`` unknown."""
    return Problem(model, name="forward dynamics").known("tau").known("fx")
