"""Estimation problems: a model, a sensor set and the unknowns (the verdict is :mod:`.verdict`, the
solver :mod:`.estimator`, its result :mod:`.estimate`).

::

    from sparsedyn import estimation as est
    prob = est.EstimationProblem(model,
            sensors=[est.ForceTorque("l_ft", "l_ankle_roll"), est.ForceTorque("r_ft", "r_ankle_roll")],
            contacts=[est.Contact("l_sole"), est.Contact("r_sole")])
    print(prob.verdict())                 # offline, before any data
    solver = prob.analyze()               # offline phase once (raises IllPosedError if ill-posed)
    e = solver.solve(q, v, y)            # online, batched: e.tau, e.f, e.contacts["l_sole"], ...

The system is Nori's eq. (16), ``[D; D_Y] d + [b; b_Y] = 0``, built on
:mod:`sparsedyn.sparse`.  Rows fall in two groups:

* *exact*: the Newton-Euler rows, zero external wrench on bodies without a contact,
  zero force on unactuated (floating-base) joints, and exact sensors (known joint
  accelerations and known wrenches by default);
* *soft*: every other sensor, with its covariance (and :class:`~sparsedyn.model.sensors.Prior` rows).

Verdict (offline, :meth:`EstimationProblem.verdict`): the sparse layer's maximum
matching gives the structural rank; the numeric rank of the dense system at a
few seeded random configurations (SVD, relative tolerance :data:`RANK_RTOL`)
decides "rank-deficient at generic states", and the null vectors are mapped back
to named variables and described in words.  Square and full rank: "well
posed", solved by the sparse LU of :func:`sparsedyn.sparse.analyze`.  More rows
than unknowns and full rank: "over-determined", solved by weighted least squares.

Least squares on a fixed sparse pattern: offline, ``k`` soft rows (``k`` = number of
unknowns the exact rows leave free) are picked (pivoted QR of the soft rows on
the null space of the exact rows, at a generic configuration) so that the exact
rows plus these ``k`` rows form a square, well-posed sparse problem, analysed
once.  Online its solution is affine in the values ``u`` of the picked rows,
``d(u) = d0 + N^T u`` (``k + 1`` sparse solves on the fixed pattern); the
predicted soft measurements are ``yhat0 + J^T u`` with ``J = N M^T``, and
``u`` solves the ``k x k`` normal equations ``(J W J^T) u = J W (y - yhat0)``
(``W`` = inverse sensor covariance).  Covariances: ``cov(u) = (J W J^T)^-1``,
``cov(d) = N^T cov(u) N``.  A Gaussian prior is a set of soft rows, so MAP is
the same computation.  States where the picked rows are singular are re-solved
densely; states where the whole system is singular raise :class:`StateSingularError`.
"""

from __future__ import annotations

import copy
import functools
import warnings

import numpy as np

from .. import _checks
from .. import sparse
from ..algorithms.kinematics import joint_transforms, world_transforms
from ..sparse.assembly import SystemPattern, d_values
from ..model.spatial import apply_force, force_matrix, pose
from ..model import UnknownNameError, unknown_name
from ..model.sensors import Contact, JointAcceleration, KnownWrench, Sensor, SensorContext
from .truth import contact_forces_to_bodies, newton_euler, pack_d
from .verdict import RANK_RTOL, IllPosedError, StateSingularError, Verdict, _reduced_rank  # noqa: F401
from .estimate import Estimate
from .estimator import Estimator, _kinematics

__all__ = ["EstimationProblem", "Estimator", "Estimate", "Verdict", "IllPosedError", "StateSingularError",
           "RANK_RTOL", "ModelViolationWarning"]


class ModelViolationWarning(UserWarning):
    """Simulated measurements (:meth:`EstimationProblem.measurements`) of a state and wrenches that the
    problem's model cannot have: an estimate from them fits other values (with a square problem, a
    chi-square of zero) and does not recover the truth they came from."""

class _Entry:
    """One sensor resolved against the model: rows ``terms``, ``size``, ``bias``; ``slot`` in ``y``."""

    def __init__(self, sensor, terms, size, bias, slot):
        self.sensor, self.terms, self.size, self.bias, self.slot = sensor, terms, size, bias, slot
        self.name = sensor.name
        self.exact = sensor.exact
        self.cov = sensor.covariance(size)

    def measurement(self, rows=None, name=None):
        if rows is None:
            return sparse.Measurement(self.name, tuple(self.terms), self.size, self.bias)
        rows = list(rows)
        bias = None if self.bias is None else (lambda kin, b=self.bias, r=rows: b(kin)[..., r])
        return sparse.Measurement(name or f"{self.name}{rows}", tuple((v, M[rows]) for v, M in self.terms),
                                  len(rows), bias)

    def matrix(self, n):
        M = np.zeros((self.size, n))
        for v, B in self.terms:
            M[:, v.slice] += B
        return M


class EstimationProblem:
    """A model, sensors (each an address into one flat measurement vector) and unknowns.

    ``sensors``: :class:`~sparsedyn.model.sensors.Sensor` objects (:class:`~sparsedyn.model.sensors.Prior`
    ones have no address); default ``model.sensors`` (see :meth:`Model.with_sensors`).  ``contacts``: :class:`~sparsedyn.model.sensors.Contact` objects or frame
    names: unknown contact wrenches (at most one per body); a point contact (``kind="3d"``) is a
    wrench without moment about its point (its ``contacts`` entry has a zero moment).
    ``unknown_accelerations``: joint names whose acceleration is unknown.  Every
    other joint acceleration not measured by a :class:`~sparsedyn.model.sensors.JointAcceleration`
    sensor is known exactly and gets the implicit entry ``"qdd"`` at the front of
    the measurement vector.  Bodies with neither a contact nor a known wrench have
    zero external wrench; floating-base (free) joints have zero joint force.
    ``context`` (:class:`~sparsedyn.model.sensors.SensorContext`): the frames carrying an
    external wrench per body, given to every sensor's rows (an F/T sensor on a
    fixed joint needs the side of the joint each body's external wrench acts on).
    """

    def __init__(self, model, sensors=None, contacts=(), unknown_accelerations=(), name=None):
        self.model = model
        self.name = name or f"estimation on {model.name}"
        self.layout = sparse.Layout(model)
        sensors = list(model.sensors if sensors is None else sensors)   # default: the model's own sensors
        for s in sensors:
            if not isinstance(s, Sensor):
                raise TypeError(f"sensors: expected Sensor objects, got {type(s).__name__}")
        self.contacts = [c if isinstance(c, Contact) else Contact(c) for c in contacts]
        for c in self.contacts:
            if c.kind == "1d":
                raise ValueError(f"{self.name}: {c!r} is a one-direction contact; estimation takes 6D and "
                                 f"point (3D) contact wrenches")
        names = [s.name for s in sensors] + [c.name for c in self.contacts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{self.name}: names used twice among sensors and contacts: {dup}")
        self._resolve_contacts(model)
        contact_bodies = set(self.contact_body.values())
        all_sensors = self._joint_accelerations(model, sensors, unknown_accelerations)
        self.context = self._wrench_frames(model, sensors)
        known_wrench_bodies = self._address(model, all_sensors, contact_bodies)
        self.addresses = {e.name: (e.slot.start, e.size) for e in self.entries}
        self.zero_fx = [i for i in range(model.nbodies) if i not in contact_bodies and i not in known_wrench_bodies]
        self.unactuated = [i for i in range(model.nbodies) if model.joints[i].type == "free"]
        self._verdict = None
        self._structure = None

    def _resolve_contacts(self, model):
        """``contact_body``, ``contact_X``: each contact's body and frame placement (one per body)."""
        self.contact_body = {}
        self.contact_X = {}
        for c in self.contacts:
            i, X = c.resolve(model)
            if i in self.contact_body.values():
                other = [k for k, b in self.contact_body.items() if b == i][0]
                raise ValueError(f"contact {c.name!r}: body {model.body_names[i]!r} already has the unknown contact "
                                 f"{other!r}; one unknown wrench per body (their sum is all the dynamics sees)")
            self.contact_body[c.name], self.contact_X[c.name] = i, X

    def _joint_accelerations(self, model, sensors, unknown_accelerations):
        """``unknown_accelerations`` and ``known_joints`` (every joint acceleration neither unknown nor
        measured); returns the sensors with the implicit ``"qdd"`` one of the known ones first."""
        self.unknown_accelerations = []
        for j in unknown_accelerations:
            try:
                self.unknown_accelerations.append(model.joint(j))
            except KeyError as e:
                raise UnknownNameError(f"unknown_accelerations: {e}") from None
        measured_qdd = set()
        for s in sensors:
            if isinstance(s, JointAcceleration) and s.joints is not None:
                measured_qdd.update(s.bodies(model))
        both = measured_qdd & set(self.unknown_accelerations)
        if both:
            raise ValueError(f"{self.name}: joint(s) {[model.joint_names[i] for i in sorted(both)]} are declared "
                             f"unknown_accelerations and also measured by a JointAcceleration sensor")
        known = [i for i in range(model.nbodies) if model.joints[i].nv and i not in measured_qdd
                 and i not in self.unknown_accelerations]
        self.known_joints = tuple(known)
        return ([JointAcceleration("qdd", [model.joint_names[i] for i in known])] if known else []) + sensors

    def _wrench_frames(self, model, sensors) -> SensorContext:
        """Where external wrenches act (a sensor on a fixed joint needs the side of each)."""
        wrench_frames = {}
        for c in self.contacts:
            wrench_frames.setdefault(self.contact_body[c.name], []).append(model.frames[model.frame(c.frame)].name)
        for s in sensors:
            if isinstance(s, KnownWrench):
                fr = s.resolve_frame(model)
                wrench_frames.setdefault(fr.body, []).append(fr.name)
        return SensorContext({b: tuple(f) for b, f in wrench_frames.items()})

    def _address(self, model, all_sensors, contact_bodies) -> set:
        """The sensors resolved into addressed ``entries`` (and unaddressed ``priors``), ``ny``;
        returns the bodies with a known wrench."""
        self.entries, self.priors, off = [], [], 0
        known_wrench_bodies = set()
        for s in all_sensors:
            terms, size, bias = s.rows(model, self.layout, self.context)
            for v, _ in terms:
                if v.kind == "fx" and s.kind == "contact_load" and v.body not in contact_bodies:
                    raise ValueError(f"sensor {s.name!r} measures the contact wrench at frame {s.frame!r} (body "
                                     f"{model.body_names[v.body]!r}) but no contact is declared on that body; "
                                     f"add Contact({s.frame!r})")
                if v.kind == "fx" and s.kind == "known_wrench":
                    if v.body in contact_bodies:
                        raise ValueError(f"sensor {s.name!r}: body {model.body_names[v.body]!r} has an unknown "
                                         f"contact; a known wrench cannot be added to it")
                    known_wrench_bodies.add(v.body)
            if s.addressed:
                self.entries.append(_Entry(s, terms, size, bias, slice(off, off + size)))
                off += size
            else:
                self.priors.append(_Entry(s, terms, size, bias, None))
        self.ny = off
        return known_wrench_bodies

    # --- the sparse systems ------------------------------------------------------------
    def _implicit(self, p):
        if self.zero_fx:
            p = p.known("fx", self.zero_fx)
        if self.unactuated:
            p = p.known("tau", self.unactuated)
        for c in self.contacts:           # a point contact: no moment about its point
            if c.kind == "3d":
                M = force_matrix(self.contact_X[c.name])[:3]
                p = p.measure(sparse.Measurement(f"point contact {c.name}: no moment",
                                                 ((p.var("fx", self.contact_body[c.name]), M),), 3))
        return p

    def sparse_problem(self) -> sparse.Problem:
        """All rows: Newton-Euler, every sensor (flat order), priors, then the implicit zeros."""
        p = sparse.Problem(self.model, [e.measurement() for e in self.entries + self.priors],
                           name=self.name, layout=self.layout)
        return self._implicit(p)

    def _n_implicit(self):
        return 6 * len(self.zero_fx) + sum(self.model.joints[i].nv for i in self.unactuated) + \
            3 * sum(c.kind == "3d" for c in self.contacts)

    def sparse_values(self, y):
        """The sparse problem's value vector from the flat measurement vector ``y`` (..., ny).

        Generic: float ``y``, or an object array (the compiler's trace: the zeros stay structural)."""
        y = y if isinstance(y, np.ndarray) and y.dtype == object else np.asarray(y, float)
        parts = [y] + [np.broadcast_to(p.sensor.value(p.size), y.shape[:-1] + (p.size,)) for p in self.priors]
        parts.append(np.zeros(y.shape[:-1] + (self._n_implicit(),), dtype=y.dtype))
        return np.concatenate(parts, -1)

    # --- what an Estimate reads (fixed by the problem; computed once) -----------------------
    @functools.cached_property
    def _contact_maps(self):
        """``(idx, XT)``: the entries of ``d`` holding the external wrenches ``fx`` of the contacts' bodies
        (6 per contact, in ``contacts`` order) and the transpose of the block-diagonal matrix of their
        force transforms ``X*`` from body to contact frame, so that ``d[..., idx] @ XT`` is every contact
        wrench at once."""
        from ..model.spatial import force_matrix
        start = self._d_blocks["fx"][0]
        idx = np.array([start + 6 * self.contact_body[c.name] + r for c in self.contacts for r in range(6)], int)
        XT = np.zeros((len(idx), len(idx)))
        for j, c in enumerate(self.contacts):
            XT[6 * j:6 * j + 6, 6 * j:6 * j + 6] = force_matrix(self.contact_X[c.name]).T
        return idx, XT

    @functools.cached_property
    def _d_blocks(self):
        """``{kind: (start, stop, shape per state)}`` of the blocks of ``d`` (as ``layout.unpack``)."""
        parts = self.layout.unpack(np.arange(self.layout.n))
        return {k: (int(x.flat[0]), int(x.flat[-1]) + 1, x.shape) if x.size else (0, 0, x.shape)
                for k, x in parts.items()}

    @functools.cached_property
    def _named_plan(self):
        """Per joint ``(index, v slice or None, single dof, "tau[j]", "qdd[j]", "f[j]")`` for
        :meth:`Estimate.named`."""
        m = self.model
        return tuple((i, m.v_slice(i) if m.joints[i].nv else None, m.joints[i].nv == 1,
                      f"tau[{j}]", f"qdd[{j}]", f"f[{j}]") for i, j in enumerate(m.joint_names))

    # --- measurement vector --------------------------------------------------------------
    def check_measurements(self, y, name="measurements", check_values=True):
        """``y`` as a float array (..., ny); errors name the sensor at fault (``check_values=False``:
        the shape only)."""
        y = _checks.numeric(name, y, f"(..., {self.ny})")
        if y.dtype == object:                     # an object array of numbers
            y = y.astype(float)
        if y.ndim == 0 or y.shape[-1] != self.ny:
            raise ValueError(f"{name}: expected shape (..., {self.ny}) for {self.name}, got {y.shape}; layout: "
                             + self.layout_text())
        bad = ~np.isfinite(y) if check_values else None
        if check_values and np.any(bad):
            # the first bad state (batch order), then the sensors at fault in it, components of that state only
            idx = tuple(int(x) for x in np.argwhere(np.any(bad, -1))[0]) if y.ndim > 1 else ()
            row = bad[idx]
            for e in self.entries:
                b = row[e.slot]
                if np.any(b):
                    comp = np.nonzero(b)[0].tolist()
                    raise ValueError(f"{name}: NaN or infinite value from sensor {e.name!r} (component(s) {comp} "
                                     f"of y[{e.slot.start}:{e.slot.stop}]"
                                     + (f", batch index {idx} (the first)" if idx else "") + ")")
        return y

    def layout_text(self) -> str:
        """The measurement vector's layout as text: ``name [start:stop]`` per sensor, in order."""
        return ", ".join(f"{n} [{o}:{o + s}]" for n, (o, s) in self.addresses.items())

    def pack(self, **values) -> np.ndarray:
        """``y`` from ``{sensor name: (..., size)}``; every addressed sensor is needed."""
        extra = set(values) - set(self.addresses)
        if extra:
            raise unknown_name("sensor", sorted(extra)[0], list(self.addresses), f"problem {self.name!r}")
        parts = []
        for e in self.entries:
            if e.name not in values:
                raise KeyError(f"{self.name}: a value for sensor {e.name!r} is needed")
            v = np.asarray(values[e.name], float)
            if v.shape[-1:] != (e.size,):
                raise ValueError(f"sensor {e.name!r}: expected shape (..., {e.size}), got {v.shape}")
            parts.append(v)
        shape = np.broadcast_shapes(*(p.shape[:-1] for p in parts)) if parts else ()
        return np.concatenate([np.broadcast_to(p, shape + p.shape[-1:]) for p in parts], -1) if parts \
            else np.zeros(shape + (0,))

    def known_accelerations(self, a) -> np.ndarray:
        """The implicit ``"qdd"`` entry of ``y`` from the full joint acceleration ``a`` (..., nv): the
        accelerations of the joints in ``known_joints`` (neither unknown nor measured by a
        :class:`~sparsedyn.model.sensors.JointAcceleration` sensor), in that order.  Use it with
        :meth:`pack`: ``y = prob.pack(qdd=prob.known_accelerations(a), **sensor_values)``."""
        a = np.asarray(a, float)
        if a.ndim == 0 or a.shape[-1] != self.model.nv:
            raise ValueError(f"known_accelerations: expected a of shape (..., {self.model.nv}), got {a.shape}")
        idx = [k for i in self.known_joints for k in range(self.model.v_start[i],
                                                           self.model.v_start[i] + self.model.joints[i].nv)]
        return a[..., idx]

    def unpack(self, y) -> dict:
        """``{sensor name: y[..., its slot]}`` from a measurement vector ``y`` (..., ny) (the
        inverse of :meth:`pack`)."""
        y = np.asarray(y)
        return {e.name: y[..., e.slot] for e in self.entries}

    # --- simulation --------------------------------------------------------------------
    def predict(self, q, v, d, entries=None):
        """Noise-free sensor values (..., rows) of the given entries (default: addressed) for ``d``."""
        entries = self.entries if entries is None else entries
        kin, _ = _kinematics(self.model, np.asarray(q, float), np.asarray(v, float))
        out = []
        for e in entries:
            y = sum(np.einsum("ij,...j->...i", M, d[..., var.slice]) for var, M in e.terms)
            if e.bias is not None:
                y = y + e.bias(kin)
            out.append(y)
        shape = np.broadcast_shapes(*(o.shape[:-1] for o in out)) if out else d.shape[:-1]
        return np.concatenate([np.broadcast_to(o, shape + o.shape[-1:]) for o in out], -1) if out \
            else np.zeros(shape + (0,))

    def measurements(self, q, v, a, contact_wrenches=None, known_wrenches=None, gravity=None):
        """Ground truth by the classical recursion and the noise-free measurement vector.

        ``contact_wrenches``: ``{contact name: wrench at its frame (..., 6)}`` (missing: zero);
        ``known_wrenches``: ``{frame: wrench at the frame}`` for :class:`~sparsedyn.model.sensors.KnownWrench`
        sensors.  Returns ``(y, truth)``; ``truth`` is :func:`newton_euler`'s dict plus
        ``"d"`` and ``"contacts"``.  Data the problem's model cannot have (a force on a free joint: the
        contact wrenches do not carry the motion; a moment at a point contact) raise a
        :class:`ModelViolationWarning`: estimates from them do not recover ``truth``.
        """
        q, v, a = (np.asarray(x, float) for x in (q, v, a))
        shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], a.shape[:-1])
        cw = {}
        for name, w in (contact_wrenches or {}).items():
            if name not in self.contact_body:
                raise unknown_name("contact", name, list(self.contact_body), f"problem {self.name!r}")
            cw[self.contacts[[c.name for c in self.contacts].index(name)].frame] = w
        f_ext = contact_forces_to_bodies(self.model, {**cw, **(known_wrenches or {})}, shape)
        truth = newton_euler(self.model, q, v, a, f_ext, gravity)
        truth["d"] = pack_d(truth)
        truth["contacts"] = {c.name: apply_force(self.contact_X[c.name], truth["fx"][..., self.contact_body[c.name], :])
                             for c in self.contacts}
        self._check_truth(truth)
        return self.predict(q, v, truth["d"]), truth

    def _check_truth(self, truth, rtol=1e-9):
        """:class:`ModelViolationWarning` when the ground truth breaks what the problem takes as known:
        a force on an unactuated (free) joint, a moment at a point contact.  Both are zero up to the
        rounding of the recursion, relative to the largest force or moment of the state."""
        scale = max(np.abs(truth["f"]).max(initial=0.0), np.abs(truth["fx"]).max(initial=0.0),
                    np.abs(truth["tau"]).max(initial=0.0))
        tol = rtol * max(scale, 1e-300)
        bad = []
        for i in self.unactuated:
            t = np.abs(truth["tau"][..., self.model.v_slice(i)])
            if t.size and t.max() > tol:
                bad.append(f"the states and wrenches need a force of up to {t.max():.3g} (N, N m) on the free "
                           f"joint {self.model.joint_names[i]!r}, which the problem takes as zero (unactuated): "
                           f"give the contact wrenches that carry the motion (e.g. "
                           f"sparsedyn.estimation.casestudy.consistent_state), or declare contacts that can")
        for c in self.contacts:
            n = np.abs(truth["contacts"][c.name][..., :3]) if c.kind == "3d" else np.zeros(0)
            if n.size and n.max() > tol:
                bad.append(f"the wrench given for point contact {c.name!r} has a moment of up to {n.max():.3g} N m "
                           f"about its point, which a point contact cannot carry (the problem takes it as zero)")
        if bad:
            warnings.warn(f"{self.name}: measurements: " + "; ".join(bad) + ". An estimate from these data fits "
                          "other values (a square problem with a chi-square of 0) and does not recover this truth.",
                          ModelViolationWarning, stacklevel=3)

    # --- offline ------------------------------------------------------------------------
    def _dense(self, pattern, q):
        Xup, S = joint_transforms(self.model, q)
        return pattern.dense(d_values(pattern, Xup, (), False, S))

    def _rank(self, A, null=False):
        """Numeric rank of the whole system's matrix ``A`` (and null vectors): :func:`_reduced_rank`."""
        L = self.layout
        P = np.concatenate([np.arange(x.offset, x.offset + x.size) for x in L.variables
                            if x.kind in ("a", "f", "tau")]).astype(int)
        return _reduced_rank(A, L.nrows, P, null)

    def verdict(self, configurations=3, seed=0, check_at=()) -> Verdict:
        """Offline verdict (structure and numeric rank at ``configurations`` seeded random states).

        ``check_at``: further configurations (e.g. a standing posture) whose rank is
        reported in ``notes`` (they do not change the generic verdict, which is computed
        once and cached).
        """
        key = (configurations, seed)
        if self._verdict is None or self._verdict[0] != key:
            self._verdict = (key, self._generic_verdict(configurations, seed))
        v = self._verdict[1]
        if not len(check_at):
            return v
        n, pattern = self.layout.n, self._pattern
        notes = []
        for k, q in enumerate(check_at):
            rk, Vk = self._rank(self._dense(pattern, np.asarray(q, float)), True)
            line = f"at given configuration {k}: numeric rank {rk} of {n}"
            if rk < n:
                more = (f" (and {n - rk - 1} more null direction(s): EstimationProblem.rank_at gives them all)"
                        if rk < n - 1 else "")
                line += (f" (SINGULAR there, deficiency {n - rk}): "
                         + self.describe_direction(Vk[:, 0], np.asarray(q, float)) + more)
            notes.append(line)
        v = copy.copy(v)
        v.notes = list(v.notes) + notes
        return v

    def _generic_verdict(self, configurations, seed) -> Verdict:
        full = self.sparse_problem()
        n = self.layout.n
        structural, reason = True, ""
        try:
            self._structure = sparse.analyze(full)
        except sparse.StructurallySingularError as e:
            structural, reason = False, str(e)
            self._structure = None
        except sparse.OverdeterminedError:
            self._structure = None
        pattern = self._pattern = SystemPattern(full)
        rng = np.random.default_rng(seed)
        ranks, worst = [], None
        for _ in range(configurations):
            q = self.model.random_configuration(rng, limits=False)   # generic rank: limits are data
            r = self._rank(self._dense(pattern, q))[0]
            ranks.append(r)
            if worst is None or r < worst[0]:
                worst = (r, q)
        r, qw = worst
        V = self._rank(self._dense(pattern, qw), True)[1] if r < n else np.zeros((n, 0))
        if not structural:
            kind = "structurally singular"
        elif r < n:
            kind = "rank-deficient"
            reason = ("structurally full rank, but these sensors see no component of the direction(s) below at any "
                      "generic state; add a sensor that measures it, or a prior")
        else:
            kind = "well posed" if full.ny + self.layout.nrows == n else "over-determined"
        dirs = [self.describe_direction(x, qw) for x in V.T] if r < n else []
        return Verdict(self.name, kind, n, pattern.nrows, ranks, V, dirs, reason, (), qw)

    def rank_at(self, q):
        """``(rank, null vectors (n, n - rank))`` of the whole system at configuration ``q``."""
        return self._rank(self._dense(SystemPattern(self.sparse_problem()), np.asarray(q, float)), True)

    def describe_direction(self, v, q) -> str:
        """Words for a null vector ``v`` (n,) of the system at configuration ``q``."""
        model, L = self.model, self.layout
        v = np.asarray(v, float)
        v = v / np.max(np.abs(v))
        Xup, _ = joint_transforms(model, q)
        X0 = world_transforms(model, Xup)
        tol = 1e-6
        parts, wrenches = [], {}
        for c in self.contacts:
            i, X = self.contact_body[c.name], self.contact_X[c.name]
            w = apply_force(X, v[L.var("fx", i).slice])          # at the contact frame, frame axes
            if np.max(np.abs(w)) > tol:
                R, p = pose(X0[i])
                Rf, pf = pose(X)
                Rw, pw = R @ Rf, p + R @ pf                        # world pose of the contact frame
                wrenches[c.name] = (Rw @ w[:3], Rw @ w[3:], pw, Rw[:, 2], w)
        if len(wrenches) >= 2:
            names = list(wrenches)
            F = sum(wrenches[k][1] for k in names)
            Mo = sum(wrenches[k][0] + np.cross(wrenches[k][2], wrenches[k][1]) for k in names)
            scale = max(np.max(np.abs(wrenches[k][1])) for k in names) + 1e-300
            internal = np.linalg.norm(F) < 1e-6 * max(scale, 1) and np.linalg.norm(Mo) < 1e-6 * max(
                1, max(np.linalg.norm(wrenches[k][0]) for k in names))
            if internal and len(names) == 2:
                (a, b) = names
                Fa, pa, na = wrenches[a][1], wrenches[a][2], wrenches[a][3]
                pb, nb = wrenches[b][2], wrenches[b][3]
                big = max(np.linalg.norm(wrenches[k][4]) for k in names)
                normal_moments = all(np.linalg.norm(np.cross(wrenches[k][0], wrenches[k][3])) <
                                     1e-6 * big for k in names)
                if np.linalg.norm(Fa) > 1e-6 * big:
                    u = Fa / np.linalg.norm(Fa)
                    ang = lambda x: np.degrees(np.arccos(min(1.0, abs(float(u @ x)) / (np.linalg.norm(x) + 1e-300))))  # noqa: E731,E501
                    line = pb - pa
                    meet = np.cross(na, nb)
                    desc = [f"{ang(line):.1f} deg from the line joining the two frames"]
                    if np.linalg.norm(meet) > 1e-9:
                        desc.insert(0, f"{ang(meet):.1f} deg from the line where the two contact planes (frame x-y "
                                       f"planes) meet")
                    else:
                        desc.append("the contact planes are parallel")
                    along = "along the line where the two contact planes meet" if np.linalg.norm(meet) > 1e-9 and \
                        ang(meet) < 1.0 else ("along the line joining the two frames" if ang(line) < 1.0 else
                                              "in a direction fixed by the sensors")
                    text = (f"equal and opposite forces at {a} and {b} {along} ({'; '.join(desc)}), balanced by "
                            f"moments" + (" about the contact normals (frame z axes)" if normal_moments else ""))
                elif normal_moments:
                    text = f"equal and opposite moments about the contact normals (frame z axes) at {a} and {b}"
                else:
                    text = (f"equal and opposite wrenches at {a} ({self._components(wrenches[a][4])} in frame axes) "
                            f"and {b} (no net wrench on the robot)")
                parts.append(text + ", are seen by no sensor")
            else:
                for k in names:
                    parts.append(f"a wrench at {k} with components {self._components(wrenches[k][4])}")
        elif wrenches:
            k = list(wrenches)[0]
            parts.append(f"a wrench at {k} with components {self._components(wrenches[k][4])} is seen by no sensor")
        # other variables touched
        other = {}
        for var in L.variables:
            if var.kind in ("tau", "qdd") and np.max(np.abs(v[var.slice])) > tol:
                other.setdefault(var.kind, []).append(var.name)
        if "qdd" in other:
            parts.append(f"it involves the unknown accelerations of {', '.join(other['qdd'])}")
        if "tau" in other:
            t = other["tau"]
            parts.append(f"it changes the torques of {len(t)} joint(s) ({', '.join(t[:6])}{', ...' if len(t) > 6 else ''})")
        if not parts:
            parts.append("a combination of " + sparse.solver.describe_columns(
                SystemPattern(self.sparse_problem()), list(np.nonzero(np.abs(v) > tol)[0]), 8))
        return "; ".join(parts)

    @staticmethod
    def _components(w):
        from ..model.sensors import COMPONENTS
        w = w / np.max(np.abs(w))
        return "[" + ", ".join(f"{c}={x:+.2f}" for c, x in zip(COMPONENTS, w) if abs(x) > 1e-6) + "]"

    def analyze(self, configurations=3, seed=0) -> "Estimator":
        """The offline phase: verdict, then the sparse structure (raises :class:`IllPosedError`).
        (``sparsedyn.compile(estimator)`` then builds its online phase as native code.)"""
        v = self.verdict(configurations, seed)
        if not v.ok:
            raise IllPosedError(v)
        return Estimator(self, v, seed)

    def compile(self, configurations=3, seed=0) -> "Estimator":
        """Deprecated name of :meth:`analyze` (``compile`` means native code: :func:`sparsedyn.compile`)."""
        warnings.warn("EstimationProblem.compile() is renamed EstimationProblem.analyze() (the offline phase); "
                      "sparsedyn.compile(...) builds native code", DeprecationWarning, stacklevel=2)
        return self.analyze(configurations, seed)

    def __sparsedyn_kernels__(self):
        """``sparsedyn.compile(problem)``: the kernels of its estimator (:meth:`analyze`)."""
        est = self.analyze()
        return est.__sparsedyn_kernels__()._replace(owner=est)

    def __repr__(self):
        return (f"EstimationProblem({self.name!r}, {len(self.entries)} sensors, ny={self.ny}, "
                f"contacts={[c.name for c in self.contacts]})")
