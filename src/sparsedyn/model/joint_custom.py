"""A joint whose ``jcalc`` the user writes: :class:`CustomJoint`.

The user's functions are written over arrays with the library's array-generic functions
(:mod:`sparsedyn.model.spatial`, :mod:`sparsedyn.backend`: ``bk.sin``, ``bk.cos``, ``bk.sqrt`` ...), as
the built-in joints are, so that they run on float arrays with leading batch axes and on the
tracer's object arrays: a model with a custom joint compiles like any other.  The joint is
checked when it is made: it must trace, return arrays of the declared shapes, and its ``S`` and
``cJ`` must be the rates of change of its placement and of ``S`` (central differences at a few
seeded states).  Its key (the compiler's fingerprint) is the digest of the traced programs, so two
joints that compute the same thing share their compiled code and no two others do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .joints import Joint
from .spatial import Transform, cross_motion, mv, pose
from ..symbolic.trace import UntraceableError, trace_function

__all__ = ["CustomJoint"]


@dataclass(frozen=True, init=False)
class CustomJoint(Joint):
    """A joint with ``nq`` coordinates and ``nv`` velocities defined by user functions.

    ``jcalc(q) -> (XJ, S)``: ``q`` (..., nq); ``XJ`` a :class:`~sparsedyn.model.spatial.Transform`
    ``child_X_parent`` (``E`` (..., 3, 3) turns parent coordinates into child ones, ``r`` (..., 3)
    is the child origin in the parent frame) or a pair ``(E, r)``; ``S`` (6, nv) or (..., 6, nv)
    the motion subspace in the child frame, angular rows first.

    ``bias(q, qd) -> cJ`` (..., 6): ``Sdot qd``, the rate of change of the child-frame components
    of ``S`` along the motion, times ``qd``; ``None`` (default) for a joint whose ``S`` is constant.

    ``integrate(q, v)``, ``difference(q0, q1)``: the configuration space's maps where ``q`` does not
    add like a vector (default ``q + v`` and ``q1 - q0``, which need ``nq == nv``); ``neutral`` (nq,)
    (default zeros); ``random(rng) -> q`` (default uniform in [-pi, pi]).  ``name`` names the joint
    type in messages.  Everything runs where a joint runs; the analytical derivative kernels
    differentiate the traced program for models with such a joint, and the configuration-space
    derivatives (``integrate_derivatives``) need the vector default.

    Bad input raises ``ValueError`` naming the joint: a function that cannot be traced, results of
    the wrong shapes, an ``S`` or ``cJ`` that does not match the placement's motion.
    """

    name: str = "custom"
    key: str = ""
    type: ClassVar[str] = "custom"

    def __init__(self, nq, nv, jcalc, bias=None, *, name="custom", neutral=None, integrate=None,
                 difference=None, random=None):
        where = f"CustomJoint {name!r}"
        for arg, x in (("nq", nq), ("nv", nv)):
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
                raise ValueError(f"{where}: {arg} must be a positive integer, got {x!r}")
        if nv > nq:
            raise ValueError(f"{where}: nv = {nv} is larger than nq = {nq}")
        if nq != nv and (integrate is None or difference is None):
            raise ValueError(f"{where}: nq = {nq} differs from nv = {nv}, so q does not add like a vector; give "
                             f"integrate(q, v) and difference(q0, q1)")
        for arg, f in (("jcalc", jcalc), ("bias", bias), ("integrate", integrate), ("difference", difference),
                       ("random", random)):
            if f is not None and not callable(f):
                raise ValueError(f"{where}: {arg} must be a function, got a {type(f).__name__}")
        object.__setattr__(self, "axis", (0.0, 0.0, 1.0))
        object.__setattr__(self, "pitch", 0.0)
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "nq", int(nq))
        object.__setattr__(self, "nv", int(nv))
        q0 = np.zeros(nq) if neutral is None else np.asarray(neutral, dtype=float).reshape(-1)
        if q0.shape != (nq,) or not np.all(np.isfinite(q0)):
            raise ValueError(f"{where}: neutral must be {nq} finite numbers, got {neutral!r}")
        object.__setattr__(self, "_fns", (jcalc, bias, integrate, difference, random, q0))
        object.__setattr__(self, "key", _check_and_key(self, where))

    # --- the user's functions, with their results put in the library's form ---------------------

    def jcalc(self, q):
        out = self._fns[0](q)
        XJ, S = out
        return (XJ if isinstance(XJ, Transform) else Transform(*XJ)), S

    def bias(self, q, qd):
        return None if self._fns[1] is None else self._fns[1](q, qd)

    @property
    def constant_subspace(self):
        return self._fns[1] is None

    def subspace_rate(self, q, qd):
        """``Sdot`` (..., 6, nv) from the user's ``bias`` and ``S``.

        ``bias(q, u) = sum_kj T_kj u_k u_j`` with ``T_kj = d_k S_j`` (column ``j`` of ``S`` along
        coordinate ``k``) gives the symmetric part ``T_kj + T_jk`` (polarisation); the antisymmetric
        part is ``d_k S_j - d_j S_k = S_j x S_k``, since ``S`` is the child-frame Jacobian
        ``g^-1 dg/dq`` of the placement (Maurer-Cartan equation: ``d_k (g^-1 d_j g) - d_j (g^-1 d_k g)``
        is the Lie bracket of the two columns).  So column ``j`` of ``Sdot = sum_k T_kj qd_k`` is
        ``(bias(q, qd + e_j) - bias(q, qd) - bias(q, e_j)) / 2 + S_j x (S qd) / 2``.  This needs ``q``
        to be coordinates (the default ``integrate``, ``q + v``); along a user's ``integrate`` the
        directions do not commute and the bracket has another term.
        """
        if self.constant_subspace:
            return None
        if self._fns[2] is not None:
            raise NotImplementedError(f"CustomJoint {self.name!r}: Sdot as a matrix (the Coriolis matrix needs it) "
                                      f"is only available for a joint whose q adds like a vector (no integrate "
                                      f"given); this one has its own integrate")
        S = self.jcalc(q)[1]
        b0 = self.bias(q, qd)
        vJ = mv(S, qd)
        cols = []
        for j, e in enumerate(np.eye(self.nv)):
            sym = self.bias(q, qd + e) - b0 - self.bias(q, 0 * qd + e)
            cols.append(0.5 * sym + 0.5 * cross_motion(S[..., :, j], vJ))
        return np.stack(cols, -1)

    def motion_subspace(self):
        return np.array(self.jcalc(self.neutral())[1], dtype=float)

    def neutral(self):
        return self._fns[5].copy()

    def random(self, rng, lower=None, upper=None):
        if self._fns[4] is not None:
            return np.asarray(self._fns[4](rng), dtype=float).reshape(self.nq)
        return Joint.random(self, rng, lower, upper)

    def integrate(self, q, v):
        return Joint.integrate(self, q, v) if self._fns[2] is None else self._fns[2](q, v)

    def difference(self, q0, q1):
        return Joint.difference(self, q0, q1) if self._fns[3] is None else self._fns[3](q0, q1)

    def retract(self, q, dq):
        return self.integrate(q, dq)

    def integrate_jacobians(self, q, v):
        if self._fns[2] is not None:
            raise NotImplementedError(f"CustomJoint {self.name!r}: the derivatives of a user-given integrate "
                                      f"are not available")
        return Joint.integrate_jacobians(self, q, v)

    def difference_jacobians(self, q0, q1):
        if self._fns[3] is not None:
            raise NotImplementedError(f"CustomJoint {self.name!r}: the derivatives of a user-given difference "
                                      f"are not available")
        return Joint.difference_jacobians(self, q0, q1)


def _flat(joint, q, qd):
    """The joint's ``E, r, S, cJ`` as one flat list of arrays (for tracing and checking)."""
    XJ, S = joint.jcalc(q)
    c = joint.bias(q, qd)
    return [np.asarray(XJ.E), np.asarray(XJ.r), np.asarray(S)] + ([] if c is None else [np.asarray(c)])


def _check_shapes(joint, where, q, qd):
    try:
        out = joint._fns[0](q)
        ok = isinstance(out, tuple) and len(out) == 2 and (isinstance(out[0], Transform) or len(out[0]) == 2)
    except (TypeError, ValueError, IndexError) as e:
        raise ValueError(f"{where}: jcalc(q) failed for q of shape ({joint.nq},): {type(e).__name__}: {e}") from e
    if not ok:
        raise ValueError(f"{where}: jcalc(q) must return (XJ, S) with XJ a sparsedyn.model.spatial.Transform or a pair "
                         f"(E, r), got {type(out).__name__}")
    parts = _flat(joint, q, qd)
    want = [(3, 3), (3,), (6, joint.nv)] + ([(6,)] if len(parts) == 4 else [])
    for label, x, shape in zip(("XJ.E", "XJ.r", "S", "bias(q, qd)"), parts, want):
        if x.shape != shape:
            raise ValueError(f"{where}: {label} has shape {x.shape}, expected {shape} (nq = {joint.nq}, "
                             f"nv = {joint.nv})")
    return parts


def _check_and_key(joint, where):
    """Check the joint's functions (shapes, tracing, S and cJ against central differences) and return
    the digest of their traced programs."""
    nq, nv = joint.nq, joint.nv
    rng = np.random.default_rng(0)
    q0, qd0 = joint.neutral(), rng.normal(size=nv)
    _check_shapes(joint, where, q0, qd0)
    progs = []
    try:
        progs.append(trace_function(lambda q, qd: tuple(_flat(joint, q, qd)), [("q", (nq,)), ("qd", (nv,))],
                                    name=f"{where} jcalc", explain=True))
        if joint._fns[2] is not None:
            progs.append(trace_function(joint.integrate, [("q", (nq,)), ("v", (nv,))], name=f"{where} integrate",
                                        explain=True))
            progs.append(trace_function(joint.difference, [("q0", (nq,)), ("q1", (nq,))],
                                        name=f"{where} difference", explain=True))
    except UntraceableError as e:
        raise ValueError(f"{where}: its functions must be written with the library's array-generic functions so "
                         f"that they trace: {e}") from e
    for _ in range(3):
        _check_rates(joint, where, joint.random(rng), rng.normal(size=nv))
    h = hashlib.sha256(repr((joint.name, nq, nv)).encode())
    for p in progs:
        h.update(p.text().encode())
    return h.hexdigest()


def _check_rates(joint, where, q, qd, h=1e-6):
    """``S qd`` is the child-frame twist of ``q (+) t qd`` and ``cJ`` the rate of ``S`` along it."""
    E, r, S, *c = _check_shapes(joint, where, q, qd)
    R, _ = pose(Transform(E, r))
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-9):
        raise ValueError(f"{where}: XJ.E at q = {q.tolist()} is not a rotation matrix")
    plus, minus = (_check_shapes(joint, where, joint.integrate(q, s * h * qd), qd) for s in (1, -1))
    (Rp, pp), (Rm, pm) = pose(Transform(*plus[:2])), pose(Transform(*minus[:2]))
    W = R.T @ (Rp - Rm) / (2 * h)
    twist = np.concatenate([[W[2, 1], W[0, 2], W[1, 0]], R.T @ (pp - pm) / (2 * h)])
    scale = 1e-6 * max(1.0, float(np.max(np.abs(S))), float(np.max(np.abs(twist))))
    if not np.allclose(S @ qd, twist, atol=scale, rtol=0):
        raise ValueError(f"{where}: S qd = {np.round(S @ qd, 9).tolist()} is not the velocity of the placement "
                         f"XJ(q) = {np.round(twist, 9).tolist()} (child frame, [omega; v], by central differences "
                         f"at q = {q.tolist()})")
    Sdot = (plus[2] - minus[2]) / (2 * h)
    cJ = c[0] if c else np.zeros(6)
    if not np.allclose(cJ, Sdot @ qd, atol=scale * max(1.0, float(np.max(np.abs(qd)))), rtol=0):
        what = "bias(q, qd)" if c else "S changes with q, so bias(q, qd) = Sdot qd must be given; its value"
        raise ValueError(f"{where}: {what} {np.round(cJ, 9).tolist()} differs from Sdot qd = "
                         f"{np.round(Sdot @ qd, 9).tolist()} (central differences at q = {q.tolist()})")
