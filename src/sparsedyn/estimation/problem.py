"""Estimation problems: a model, a sensor set and the unknowns; verdict, compile, solve.

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
* *soft*: every other sensor, with its covariance (and :class:`~sparsedyn.sensors.Prior` rows).

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
import textwrap
import warnings

import numpy as np

from .. import _checks
from .. import sparse
from ..algorithms.kinematics import _world_transforms, joint_transforms, velocity_pass
from ..sparse.assembly import SystemPattern, d_values, rhs_values
from ..sparse.measurements import Kinematics
from ..spatial import apply_force, apply_motion, force_matrix, pose
from ..model import UnknownNameError, unknown_name
from ..sensors import Contact, JointAcceleration, KnownWrench, Sensor, SensorContext
from .truth import contact_forces_to_bodies, newton_euler, pack_d

__all__ = ["EstimationProblem", "Estimator", "Estimate", "Verdict", "IllPosedError", "StateSingularError",
           "RANK_RTOL"]

#: Singular values below this fraction of the largest count as zero (the gap seen on the
#: humanoid is ~1e-4 versus ~1e-17).
RANK_RTOL = 1e-10


class IllPosedError(ValueError):
    """The sensors cannot determine the unknowns at generic states; ``.verdict`` says why."""

    def __init__(self, verdict):
        super().__init__(str(verdict))
        self.verdict = verdict


class StateSingularError(ValueError):
    """A well-posed problem is singular at some of the given states (``.states``: batch indices)."""

    def __init__(self, message, states=()):
        super().__init__(message)
        self.states = tuple(states)


class Verdict:
    """Offline well-posedness verdict.

    ``kind``: ``"structurally singular"``, ``"rank-deficient"``, ``"well posed"`` or
    ``"over-determined"``; ``ok``: solvable; ``n`` unknowns, ``nrows`` equations,
    ``rank`` (smallest numeric rank over the sampled configurations),
    ``deficiency`` = ``n - rank``, ``redundancy`` = ``nrows - n``; ``ranks``: per
    configuration; ``null_vectors`` (n, deficiency) at the worst configuration;
    ``directions``: one sentence per null vector; ``notes``: extra lines;
    ``configuration``: the configuration the null vectors belong to.
    """

    def __init__(self, name, kind, n, nrows, ranks, null_vectors, directions, reason="", notes=(),
                 configuration=None):
        self.name, self.kind, self.n, self.nrows = name, kind, n, nrows
        self.configuration = configuration
        self.ranks = tuple(int(r) for r in ranks)
        self.rank = min(self.ranks) if self.ranks else n
        self.deficiency = n - self.rank
        self.redundancy = nrows - n
        self.null_vectors = null_vectors
        self.directions = list(directions)
        self.reason = reason
        self.notes = list(notes)

    @property
    def ok(self) -> bool:
        """True when the problem can be solved (well posed or over-determined)."""
        return self.kind in ("well posed", "over-determined")

    def headline(self) -> str:
        """The verdict in one sentence, without the problem's name."""
        head = {"well posed": "well posed (square, full rank at generic states)",
                "over-determined": f"over-determined by {self.redundancy} (full rank at generic states): "
                                   f"weighted least squares",
                "rank-deficient": f"ILL-POSED: numerically rank-deficient by {self.deficiency} at generic states "
                                  f"(structurally full rank)",
                "structurally singular": f"ILL-POSED: structurally singular (rank deficit {self.deficiency})"}
        return (f"{head[self.kind]}; {self.n} unknowns, {self.nrows} equations, numeric rank "
                f"{'/'.join(map(str, self.ranks))} at {len(self.ranks)} random configurations")

    def lines(self, width=100, name=True, indent="  ") -> list:
        """The verdict as lines of at most ``width`` characters (first line: the headline)."""
        first = f"{self.name}: {self.headline()}" if name else self.headline()
        out = textwrap.wrap(first, width, subsequent_indent=indent + "  ")
        paras = ([self.reason] if self.reason else []) + [
            f"unobservable direction {k + 1}: {d}" for k, d in enumerate(self.directions)] + list(self.notes)
        for p in paras:
            out += textwrap.wrap(p, width, initial_indent=indent, subsequent_indent=indent + "  ")
        return out

    def __str__(self):
        return "\n".join(self.lines())

    __repr__ = __str__


def _rank(A, null=False):
    """Numeric rank of ``A`` (SVD, :data:`RANK_RTOL`) and, if asked and deficient, its null vectors (n, n - r)."""
    s = np.linalg.svd(A, compute_uv=False)
    r = int(np.sum(s > RANK_RTOL * s[0])) if len(s) else 0
    if not null or r == A.shape[1]:
        return r, np.zeros((A.shape[1], 0))
    _, s, Vt = np.linalg.svd(A)          # deficient (rare): the vectors as well
    return r, Vt[r:].T


def _unit_triangular_solve(N, B):
    """``N^-1 B`` for a sparse (k, k) ``N`` whose diagonal is nonzero and which is triangular up to a
    symmetric permutation (the Newton-Euler rows on their own variables: each row defines its
    variable from its parent's, its children's or its own body's), by substitution in a
    topological order: elementwise NumPy only (BLAS threads fight on a busy machine).
    ``None`` if ``N`` is not of that form."""
    k = N.shape[0]
    diag = N.diagonal()
    if np.any(diag == 0):
        return None
    indptr, indices, data = N.indptr, N.indices, N.data
    deps = [[(int(j), float(x)) for j, x in zip(indices[indptr[r]:indptr[r + 1]], data[indptr[r]:indptr[r + 1]])
             if j != r and x != 0] for r in range(k)]
    users = [[] for _ in range(k)]
    waiting = np.zeros(k, int)
    for r, d in enumerate(deps):
        waiting[r] = len(d)
        for j, _ in d:
            users[j].append(r)
    ready = [r for r in range(k) if waiting[r] == 0]
    T = np.array(B, float)
    done = 0
    while ready:
        r = ready.pop()
        for j, x in deps[r]:
            T[r] -= x * T[j]
        T[r] /= diag[r]
        done += 1
        for u in users[r]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    return T if done == k else None


def _reduced_rank(A, n_ne, P, null=False):
    """:func:`_rank` of the whole system ``A`` (m, n) by exact reductions first (much faster).

    ``n_ne``: the Newton-Euler rows (first in ``A``); ``P``: the columns of the variables
    they define (``a_i``, ``f_i``, ``tau_i``), on which these rows form a square unit-triangular
    block ``N_P`` (nonsingular at every state).  Then ``rank A = |P| + rank S`` with the Schur
    complement ``S = Y_R - Y_P N_P^-1 N_R`` on the other columns ``R``.  Rows of ``S`` with a
    single nonzero (a known joint acceleration, a zero external wrench) pin their column:
    ``rank S = |pinned| + rank`` of what is left, whose SVD decides (a few dozen columns
    instead of hundreds).  Null vectors are mapped back exactly and orthonormalised.
    """
    import scipy.sparse as sps                 # offline only: imported here
    m, n = A.shape
    R = np.setdiff1d(np.arange(n), P)
    if n_ne != len(P):
        return _rank(A, null)
    As = sps.csr_matrix(A)
    NE, Y = As[:n_ne], As[n_ne:]
    T = _unit_triangular_solve(NE[:, P].tocsr(), NE[:, R].toarray())      # N_P^-1 N_R
    if T is None:
        return _rank(A, null)
    S = Y[:, R].toarray() - Y[:, P] @ T
    nz = S != 0
    single = nz.sum(1) == 1
    pinned = np.unique(np.argmax(nz[single], 1))
    keep = np.setdiff1d(np.arange(S.shape[1]), pinned)
    B = S[~single][:, keep]
    rB, VB = _rank(B, null) if B.size else (0, np.eye(len(keep)))
    r = len(P) + len(pinned) + rB
    if not null or r == n:
        return r, np.zeros((n, 0))
    xR = np.zeros((len(R), VB.shape[1]))
    xR[keep] = VB
    V = np.zeros((n, VB.shape[1]))
    V[R] = xR
    V[P] = -T @ xR
    return r, np.linalg.qr(V)[0]


def _kinematics(model, q, v):
    Xup, S = joint_transforms(model, q)
    vb, _ = velocity_pass(model, Xup, S, v)
    return Kinematics(model, q, v, Xup, S, vb), Xup


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

    ``sensors``: :class:`~sparsedyn.sensors.Sensor` objects (:class:`~sparsedyn.sensors.Prior`
    ones have no address); default ``model.sensors`` (see :meth:`Model.with_sensors`).  ``contacts``: :class:`~sparsedyn.sensors.Contact` objects or frame
    names: unknown contact wrenches (at most one per body); a point contact (``kind="3d"``) is a
    wrench without moment about its point (its ``contacts`` entry has a zero moment).
    ``unknown_accelerations``: joint names whose acceleration is unknown.  Every
    other joint acceleration not measured by a :class:`~sparsedyn.sensors.JointAcceleration`
    sensor is known exactly and gets the implicit entry ``"qdd"`` at the front of
    the measurement vector.  Bodies with neither a contact nor a known wrench have
    zero external wrench; floating-base (free) joints have zero joint force.
    ``context`` (:class:`~sparsedyn.sensors.SensorContext`): the frames carrying an
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
        names = [s.name for s in sensors] + [c.name for c in self.contacts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{self.name}: names used twice among sensors and contacts: {dup}")
        # contacts
        self.contact_body = {}
        self.contact_X = {}
        for c in self.contacts:
            i, X = c.resolve(model)
            if i in self.contact_body.values():
                other = [k for k, b in self.contact_body.items() if b == i][0]
                raise ValueError(f"contact {c.name!r}: body {model.body_names[i]!r} already has the unknown contact "
                                 f"{other!r}; one unknown wrench per body (their sum is all the dynamics sees)")
            self.contact_body[c.name], self.contact_X[c.name] = i, X
        contact_bodies = set(self.contact_body.values())
        # unknown accelerations
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
        all_sensors = ([JointAcceleration("qdd", [model.joint_names[i] for i in known])] if known else []) + sensors
        # where external wrenches act (a sensor on a fixed joint needs the side of each)
        wrench_frames = {}
        for c in self.contacts:
            wrench_frames.setdefault(self.contact_body[c.name], []).append(model.frames[model.frame(c.frame)].name)
        for s in sensors:
            if isinstance(s, KnownWrench):
                fr = s.resolve_frame(model)
                wrench_frames.setdefault(fr.body, []).append(fr.name)
        self.context = SensorContext({b: tuple(f) for b, f in wrench_frames.items()})
        # resolve sensors into addressed entries
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
        self.addresses = {e.name: (e.slot.start, e.size) for e in self.entries}
        self.zero_fx = [i for i in range(model.nbodies) if i not in contact_bodies and i not in known_wrench_bodies]
        self.unactuated = [i for i in range(model.nbodies) if model.joints[i].type == "free"]
        self._verdict = None
        self._structure = None

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
        from ..spatial import force_matrix
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
    def check_measurements(self, y, name="measurements"):
        """``y`` as a float array (..., ny); errors name the sensor at fault."""
        y = _checks.numeric(name, y, f"(..., {self.ny})")
        if y.dtype == object:                     # an object array of numbers
            y = y.astype(float)
        if y.ndim == 0 or y.shape[-1] != self.ny:
            raise ValueError(f"{name}: expected shape (..., {self.ny}) for {self.name}, got {y.shape}; layout: "
                             + self.layout_text())
        bad = ~np.isfinite(y)
        if np.any(bad):
            for e in self.entries:
                b = bad[..., e.slot]
                if np.any(b):
                    comp = sorted(set(np.nonzero(b)[-1].tolist()))
                    idx = tuple(int(x) for x in np.argwhere(np.any(b, -1))[0]) if y.ndim > 1 else ()
                    raise ValueError(f"{name}: NaN or infinite value from sensor {e.name!r} (component(s) {comp} "
                                     f"of y[{e.slot.start}:{e.slot.stop}]" + (f", batch index {idx}" if idx else "")
                                     + ")")
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
        :class:`~sparsedyn.sensors.JointAcceleration` sensor), in that order.  Use it with
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
        ``known_wrenches``: ``{frame: wrench at the frame}`` for :class:`~sparsedyn.sensors.KnownWrench`
        sensors.  Returns ``(y, truth)``; ``truth`` is :func:`newton_euler`'s dict plus
        ``"d"`` and ``"contacts"``.
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
        return self.predict(q, v, truth["d"]), truth

    # --- offline ------------------------------------------------------------------------
    def _dense(self, pattern, q):
        Xup, _ = joint_transforms(self.model, q)
        return pattern.dense(d_values(pattern, Xup, (), False))

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
        X0 = _world_transforms(model, Xup)
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
        from ..sensors import COMPONENTS
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

    def __repr__(self):
        return (f"EstimationProblem({self.name!r}, {len(self.entries)} sensors, ny={self.ny}, "
                f"contacts={[c.name for c in self.contacts]})")


class Estimate:
    """Every Newton-Euler variable of an estimate, by name.

    ``d`` (..., n); ``a``, ``f``, ``fx`` (..., NB, 6), ``tau``, ``qdd`` (..., nv) as
    :meth:`sparsedyn.sparse.Layout.unpack`; ``contacts``: ``{name: wrench at the contact
    frame (..., 6)}``; ``cov_d`` (..., n, n) when asked for; ``chi2``: weighted residual
    of the soft sensors (``dof`` degrees of freedom; zero for a square problem).

    Only ``d``, ``chi2`` and ``dof`` are stored: the blocks ``a`` ... ``qdd`` are views of ``d``
    and ``contacts`` is computed from ``fx``, each on first access (an online solve pays only for
    what it reads).
    """

    def __init__(self, problem, d, cov_d=None, chi2=None, dof=0):
        self.problem, self.d, self.chi2, self.dof = problem, d, chi2, dof
        self._cov = cov_d             # (..., n, n), or a pair (N^T (..., k, n), cov(u) (..., k, k)), or None

    def _block(self, kind):
        start, stop, core = self.problem._d_blocks[kind]
        x = self.d[..., start:stop]
        return x if len(core) == 1 else x.reshape(x.shape[:-1] + core)

    @functools.cached_property
    def a(self):
        """Body accelerations (..., NB, 6) (body frames)."""
        return self._block("a")

    @functools.cached_property
    def f(self):
        """Joint wrenches (..., NB, 6), each the wrench a joint transmits to its child (body frame)."""
        return self._block("f")

    @functools.cached_property
    def tau(self):
        """Joint forces (..., nv)."""
        return self._block("tau")

    @functools.cached_property
    def fx(self):
        """External wrenches (..., NB, 6) (body frames)."""
        return self._block("fx")

    @functools.cached_property
    def qdd(self):
        """Joint accelerations (..., nv)."""
        return self._block("qdd")

    @functools.cached_property
    def contacts(self) -> dict:
        """``{contact name: wrench at its frame (..., 6)}`` (computed on first access)."""
        p = self.problem
        if not p.contacts:
            return {}
        idx, XT = p._contact_maps
        w = self.d[..., idx] @ XT                                   # X* fx of each contact's body
        return {c.name: w[..., 6 * j:6 * j + 6] for j, c in enumerate(p.contacts)}

    @property
    def cov_d(self):
        """Covariance (..., n, n) of ``d`` (``None`` unless solved with ``covariance=True``)."""
        if isinstance(self._cov, tuple):
            Nt, cu = self._cov
            self._cov = np.swapaxes(Nt, -1, -2) @ cu @ Nt
        return self._cov

    def torque(self, joint):
        """Estimated forces (..., nv of the joint) of ``joint`` (a name) [N m or N]."""
        return self.tau[..., self.problem.model.v_slice(self.problem.model.joint(joint))]

    def wrench(self, joint):
        """Wrench transmitted across ``joint`` (body frame of its child)."""
        return self.f[..., self.problem.model.joint(joint), :]

    def named(self) -> dict:
        """``{"tau[joint]": .., "f[joint]": .., "contact[name]": .., "qdd[joint]": ..}`` (views of the
        arrays above, in the model's joint order, then the contacts)."""
        tau, qdd, f = self.tau, self.qdd, self.f
        # rows of these are tau[..., s:s + 1], qdd[..., s:s + 1] and f[..., i, :]
        if f.ndim == 2:
            tau1, qdd1 = tau[:, None], qdd[:, None]
        else:
            nb = f.ndim - 2
            tau1, qdd1 = (x[..., None].transpose((nb,) + tuple(range(nb)) + (nb + 1,)) for x in (tau, qdd))
            f = f.transpose((nb,) + tuple(range(nb)) + (nb + 1,))
        out = {}
        for i, sl, one, kt, kq, kf in self.problem._named_plan:
            if sl is not None:
                out[kt] = tau1[sl.start] if one else tau[..., sl]
                out[kq] = qdd1[sl.start] if one else qdd[..., sl]
            out[kf] = f[i]
        for k, w in self.contacts.items():
            out[f"contact[{k}]"] = w
        return out

    def covariance(self, kind="tau"):
        """Covariance (..., m, m) of one variable kind's block of ``d`` (needs ``covariance=True``)."""
        if self._cov is None:
            raise ValueError("no covariance: solve with covariance=True")
        L = self.problem.layout
        idx = np.concatenate([np.arange(v.offset, v.offset + v.size) for v in L.variables if v.kind == kind])
        if isinstance(self._cov, tuple):
            Nt, cu = self._cov
            Ns = Nt[..., idx]
            return np.swapaxes(Ns, -1, -2) @ cu @ Ns
        return self.cov_d[..., idx[:, None], idx[None, :]]


class Estimator:
    """A compiled :class:`EstimationProblem` (offline phase done): :meth:`solve` is online only."""

    def __init__(self, problem, verdict, seed=0):
        self.problem, self.verdict = problem, verdict
        self.model = problem.model
        self.n = problem.layout.n
        self.square = verdict.kind == "well posed"
        self.structure = problem._structure if self.square else None
        soft = [e for e in problem.entries if not e.exact] + problem.priors
        self.soft = soft
        self.exact = [e for e in problem.entries if e.exact]
        self.s = sum(e.size for e in soft)
        self.M_soft = np.concatenate([e.matrix(self.n) for e in soft]) if soft else np.zeros((0, self.n))
        C = np.zeros((self.s, self.s))
        r = 0
        for e in soft:
            C[r:r + e.size, r:r + e.size] = e.cov
            r += e.size
        self.cov_soft = C
        self.W = np.linalg.inv(C) if self.s else C
        self._basis = None
        self._seed = seed
        self._full_pattern = None
        if not self.square:
            self._build_basis()

    # --- offline: the square sub-problem of least squares ------------------------------------
    def _build_basis(self):
        p = self.problem
        exact_problem = p._implicit(sparse.Problem(self.model, [e.measurement() for e in self.exact],
                                                   layout=p.layout))
        pat = SystemPattern(exact_problem)
        q = self.model.random_configuration(np.random.default_rng(self._seed + 7))
        E = p._dense(pat, q)
        import scipy.linalg
        rE, Z = p._rank(E, null=True)                           # Z: orthonormal null space of E
        if rE < E.shape[0]:
            raise ValueError(f"{p.name}: the exact rows (Newton-Euler, implicit zeros and exact sensors "
                             f"{[e.name for e in self.exact]}) are not independent (rank {rE} of {E.shape[0]}); "
                             f"give the redundant sensors a covariance (exact=False)")
        k = Z.shape[1]
        Lw = np.linalg.cholesky(self.W)
        HZ = Lw.T @ self.M_soft @ Z
        _, _, piv = scipy.linalg.qr(HZ.T, pivoting=True)
        chosen = sorted(piv[:k].tolist())
        # group the chosen soft rows by entry
        owner = []
        for e in self.soft:
            owner += [(e, j) for j in range(e.size)]
        groups = {}
        for row in chosen:
            e, j = owner[row]
            groups.setdefault(id(e), (e, []))[1].append(j)
        meas = [e.measurement() for e in self.exact] + [e.measurement(js, f"basis {e.name}{js}")
                                                         for e, js in groups.values()]
        bp = p._implicit(sparse.Problem(self.model, meas, name=f"{p.name} (least-squares basis)", layout=p.layout))
        self.basis_rows = chosen
        self.k = k
        self._basis = bp.analyze()
        # rows of the basis system holding the picked soft rows (after Newton-Euler and the exact rows)
        r0 = p.layout.nrows + sum(e.size for e in self.exact)
        self._picked = np.arange(r0, r0 + k)

    # --- online ----------------------------------------------------------------------------
    def _inputs(self, q, v, y):
        q = _checks.configuration(self.model, q)
        v = _checks.velocity(self.model, v, "v")
        y = self.problem.check_measurements(y)
        batch = _checks.batch_shape(q=(q, 1), v=(v, 1), y=(y, 1))
        return (np.broadcast_to(q, batch + q.shape[-1:]), np.broadcast_to(v, batch + v.shape[-1:]),
                np.broadcast_to(y, batch + y.shape[-1:]), batch)

    def solve(self, q, v, y, covariance=False, gravity=None) -> Estimate:
        """Estimate every variable at states ``(q, v)`` from measurements ``y`` (..., ny); batched.

        ``covariance=True`` also returns ``cov_d`` (..., n, n) from the sensor covariances.
        """
        q, v, y, batch = self._inputs(q, v, y)
        if self.square and not covariance:
            d = self._square(q, v, y, gravity, batch)
            return Estimate(self.problem, d, chi2=np.zeros(batch), dof=0)
        if self._basis is None:
            self._build_basis()
        d, cov, chi2 = self._lsq(q, v, y, gravity, batch, covariance)
        return Estimate(self.problem, d, cov, chi2, self.s - self.k)

    def _sparse_solve(self, st, q, v, ys, gravity):
        """``(d, bad states, factors)``; ``d`` and ``factors`` are None where pivoting could not help."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sparse.SparsePivotWarning)
            try:
                d, info, factors = st._solve(q, v, ys, gravity, "auto")
                bad = info.fallback
            except ValueError:                         # singular even with pivoting at some state
                d, bad, factors = None, np.ones(np.broadcast_shapes(q.shape[:-1], ys.shape[:-1]), bool), None
        return d, bad, factors

    def _square(self, q, v, y, gravity, batch):
        d, bad, _ = self._sparse_solve(self.structure, q, v, self.problem.sparse_values(y), gravity)
        if np.any(bad):
            d = np.zeros(batch + (self.n,)) if d is None else np.array(d)
            bad = np.broadcast_to(bad, batch)
            for idx in np.ndindex(*batch):             # () for one state: np.nonzero refuses 0-d arrays
                if bad[idx]:
                    d[idx] = self._dense_state(q[idx], v[idx], y[idx], gravity, idx)[0]
        return d

    def _lsq(self, q, v, y, gravity, batch, want_cov):
        k = self.k
        Yb = self._lsq_values(y)
        D, bad, factors = self._sparse_solve(self._basis, q[..., None, :], v[..., None, :], Yb, gravity)
        bad_states = np.zeros(batch, bool) if D is not None else np.ones(batch, bool)
        refine = None
        if D is None:
            D = np.zeros(batch + (k + 1, self.n))
        else:
            bad_states |= np.any(bad, -1)
            refine = self._lsq_refiner(*factors)
        d0, Nt, Jt, G, rhs, res0 = self._lsq_core(D, q, v, y)
        if k:                                          # k = 0: the exact rows alone fix d (G is 0 x 0)
            ev = np.linalg.eigvalsh(G)
            bad_states |= ~(ev[..., 0] > RANK_RTOL * ev[..., -1])
        Gs = np.where(bad_states[..., None, None], np.eye(k), G)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):   # bad states are redone below
            d, chi2 = self._lsq_finish(d0, Nt, Jt, Gs, rhs, res0, refine)
        cov = None
        if want_cov:
            cu = np.linalg.inv(Gs)
            cov = (Nt, cu)
            if np.any(bad_states):
                cov = np.swapaxes(Nt, -1, -2) @ cu @ Nt
        if np.any(bad_states):
            d, chi2 = np.array(d), np.array(chi2, dtype=float)
            for idx in (i for i in np.ndindex(*batch) if bad_states[i]):
                out = self._dense_state(q[idx], v[idx], y[idx], gravity, idx, want_cov)
                d[idx] = out[0]
                chi2[idx] = out[2]
                if want_cov:
                    cov[idx] = out[1]
        return d, cov, chi2

    # The algebra of least squares, written once for every backend: NumPy floats with batch axes,
    # or object arrays (sparsedyn.compile traces it; the NumPy path keeps its checks around it).
    def _lsq_values(self, y):
        """Values (..., k + 1, ny) of the basis problem for ``y`` (..., ny): the exact sensors' values,
        then the picked soft rows' values (row 0: zeros, the particular solution; row j: unit j), then
        the implicit zeros."""
        k = self.k
        shp = y.shape[:-1] + (k + 1,)
        U = np.concatenate([np.zeros((1, k), dtype=int), np.eye(k, dtype=int)]).astype(y.dtype)   # (k+1, k)
        parts = [np.broadcast_to(y[..., None, e.slot], shp + (e.size,)) for e in self.exact]
        parts += [np.broadcast_to(U, shp + (k,)), np.zeros(shp + (self.problem._n_implicit(),), dtype=y.dtype)]
        return np.concatenate(parts, -1)

    def _lsq_core(self, D, q, v, y):
        """From the basis solutions ``D`` (..., k + 1, n): ``d0``, ``N^T`` (..., k, n), ``J^T`` (..., k, s),
        the normal matrix ``G = J W J^T`` (..., k, k), its right-hand side and the residual at ``d0``."""
        d0 = D[..., 0, :]
        Nt = D[..., 1:, :] - d0[..., None, :]                                  # (..., k, n)
        kin, _ = _kinematics(self.model, q, v)
        yhat0 = d0 @ self.M_soft.T
        ysoft, r = [], 0
        for e in self.soft:
            if e.bias is not None:
                yhat0[..., r:r + e.size] += e.bias(kin)
            ysoft.append(y[..., e.slot] if e.slot is not None else
                         np.broadcast_to(e.sensor.value(e.size), y.shape[:-1] + (e.size,)))
            r += e.size
        ysoft = np.concatenate(ysoft, -1)
        Jt = Nt @ self.M_soft.T                                                # (..., k, s)
        JW = Jt @ self.W
        G = JW @ np.swapaxes(Jt, -1, -2)
        res0 = ysoft - yhat0
        rhs = (JW @ res0[..., None])[..., 0]
        return d0, Nt, Jt, G, rhs, res0

    def _lsq_refiner(self, vals, W, b, batch):
        """``refine(d) -> delta0`` for :meth:`_lsq_finish` from the basis solve's factors (row 0 of the
        right-hand-side axis): ``A delta0 + r = 0`` with ``r`` = the residual ``A d + b`` of the exact
        rows (Newton-Euler, exact sensors, implicit zeros) at ``d`` and 0 on the picked soft rows."""
        st, picked = self._basis, self._picked
        vals0, W0, b0, batch0 = vals[..., 0], W[..., 0], b[..., 0], batch[:-1]

        def refine(d):
            r = st._residual(vals0, b0, np.moveaxis(d, -1, 0))
            r[picked] = 0
            return np.moveaxis(st._substitute(vals0, W0, r, batch0), 0, -1)
        return refine

    def _lsq_finish(self, d0, Nt, Jt, G, rhs, res0, refine=None):
        """``(d, chi2)``: ``u = G^-1 rhs`` by the small dense ``L^T D L`` of :mod:`sparsedyn.ltdl`
        (no pivoting: ``G`` is symmetric positive definite where the checks passed).

        ``refine`` (:meth:`_lsq_refiner`): one step of iterative refinement of the whole constrained
        problem with the same factors: the exact rows' residual at ``d`` is removed by ``delta0`` and
        the soft residual re-minimised over the null space.  Where the picked basis rows are nearly
        dependent at a state (large ``N``, ill-conditioned ``G``) one step takes the error from ~1e-8
        back to ~1e-13, what a dense QR gets."""
        from ..algorithms.ltdl import chain_lambda, ltdl, ltdl_solve
        lam = chain_lambda(self.k)
        L, Dg = ltdl(lam, G)
        u = ltdl_solve(lam, L, Dg, rhs)
        d = d0 + (u[..., None, :] @ Nt)[..., 0, :]
        res = res0 - (u[..., None, :] @ Jt)[..., 0, :]
        if refine is not None:
            delta0 = refine(d)
            d = d + delta0
            res = res - delta0 @ self.M_soft.T
            u = ltdl_solve(lam, L, Dg, ((Jt @ self.W) @ res[..., None])[..., 0])
            d = d + (u[..., None, :] @ Nt)[..., 0, :]
            res = res - (u[..., None, :] @ Jt)[..., 0, :]
        chi2 = ((res @ self.W) * res).sum(-1)
        return d, chi2

    def _dense_state(self, q, v, y, gravity, idx=(), want_cov=False):
        """One state by dense linear algebra (fallback and reference): constrained weighted LS."""
        p = self.problem
        if self._full_pattern is None:
            self._full_pattern = SystemPattern(p.sparse_problem())
        pat = self._full_pattern
        A = p._dense(pat, q)
        g = _checks.gravity(self.model, gravity)
        kin, Xup = _kinematics(self.model, q, v)
        b = rhs_values(pat, q, v, p.sparse_values(y), g, Xup, kin.S, (), False)
        r, V = _rank(A, True)
        if r < self.n:
            dirs = "; ".join(p.describe_direction(v, q) for v in V.T)
            raise StateSingularError(f"{p.name}: the system is singular at the state with batch index {idx} "
                                     f"(rank {r} of {self.n}); unobservable there: {dirs}", [idx])
        soft_rows = np.zeros(pat.nrows, bool)
        off = self.problem.layout.nrows
        for e in p.entries + p.priors:
            if not e.exact:
                soft_rows[off:off + e.size] = True
            off += e.size
        # ordering of soft rows above equals self.soft's order (entries then priors)
        E, e_ = A[~soft_rows], b[~soft_rows]
        H, h = A[soft_rows], b[soft_rows]
        dp = np.linalg.lstsq(E, -e_, rcond=None)[0]
        _, sE, VEt = np.linalg.svd(E)
        rE = int(np.sum(sE > RANK_RTOL * sE[0]))
        Z = VEt[rE:].T
        if Z.shape[1] == 0:
            return dp, np.zeros((self.n, self.n)), 0.0
        HZ = H @ Z
        res = -(H @ dp + h)
        Gz = HZ.T @ self.W @ HZ
        z = np.linalg.solve(Gz, HZ.T @ self.W @ res)
        d = dp + Z @ z
        rr = res - HZ @ z
        return d, Z @ np.linalg.inv(Gz) @ Z.T, float(rr @ self.W @ rr)

    def dense_reference(self, q, v, y, gravity=None):
        """Dense constrained weighted least squares at one state: ``(d, cov_d, chi2)`` (for tests)."""
        q, v, y, _ = self._inputs(q, v, y)
        return self._dense_state(q, v, y, gravity, (), True)

    # --- cost ------------------------------------------------------------------------------
    def flops(self, seed=0) -> dict:
        """Operation counts of one solve (exact trace of the sparse part) and of a dense solve.

        Returns ``{"sparse": {phase: flops}, "total": .., "dense": .., "dense_formula": str, "k": ..,
        "n": .., "rows": ..}``; ``flops`` = mul + add + div.  Least squares also has ``"post"`` (the
        k x k normal equations), ``"refine"`` (the refinement step) and ``"separate"`` (what k + 1
        independent sparse solves, each refactoring ``A``, would cost instead of ``"total"``).
        """
        from ..sparse.flops import count_solve
        st = self.structure if self.square else self._basis
        ph = {k: v["mul"] + v["add"] + v["div"] for k, v in count_solve(st, seed=seed).items()}
        one = sum(ph.values())
        n, m = self.n, self.verdict.nrows
        out = {"sparse": ph, "n": n, "rows": m}
        if self.square:
            out.update(total=one, k=0,
                       dense=int(round(2 * n ** 3 / 3 + 2 * n ** 2)),
                       dense_formula="dense LU of the n x n system: 2/3 n^3 + 2 n^2")
        else:
            k, s = self.k, self.s
            nnzM = int(np.count_nonzero(self.M_soft))
            post = 2 * nnzM * k + 2 * s * s * k + 2 * k * k * s + k ** 3 // 3 + 2 * k * k + 2 * n * k + 2 * s * k
            fixed = ph.get("transforms", 0) + ph.get("b", 0) + ph.get("factor", 0)
            # refinement: residual A d + b, one more substitution, M_soft delta0, J W res, the k x k
            # solve, and the updates of d and of the soft residual
            refine = (ph.get("solve", 0) + 2 * self._basis.nnz + 2 * nnzM + 2 * k * s + 2 * k * k
                      + 2 * n * k + 2 * s * k)
            out.update(k=k, total=fixed + (k + 1) * ph.get("solve", 0) + post + refine,
                       separate=(k + 1) * one + post + refine, post=post, refine=refine,
                       dense=int(round(2 * m * n ** 2 - 2 * n ** 3 / 3)),
                       dense_formula="dense QR least squares of the m x n system: 2 m n^2 - 2/3 n^3")
        return out

    def report(self, flops=True, width=100) -> str:
        """Verdict, measurement layout, unknowns and (``flops=True``) the cost per solve, in lines of
        at most ``width`` characters.  Flops = multiplications + additions + divisions of one solve,
        counted exactly on the sparse pattern; the dense figure is the textbook count for the same
        system solved densely."""
        p = self.problem
        wrap = lambda t: textwrap.wrap(t, width, subsequent_indent="    ")   # noqa: E731
        lines = self.verdict.lines(width) + wrap("measurement vector y: " + p.layout_text())
        unk = [f"joint torques of {sum(1 for i in range(self.model.nbodies) if self.model.joints[i].nv and i not in p.unactuated)} joints",
               f"joint wrenches of {self.model.nbodies} joints"]
        if p.contacts:
            unk.append("contact wrenches at " + ", ".join(c.frame for c in p.contacts))
        if p.unknown_accelerations:
            unk.append("accelerations of " + ", ".join(self.model.joint_names[i] for i in p.unknown_accelerations))
        lines += wrap("unknowns: " + "; ".join(unk))
        if flops:
            f = self.flops()
            if self.square:
                text = (f"flops per solve: {f['total']:,} on the sparse pattern "
                        f"({', '.join(f'{k} {v:,}' for k, v in f['sparse'].items())}) vs {f['dense']:,} for a "
                        f"{f['dense_formula']} ({f['dense'] / f['total']:,.0f}x)")
            else:
                text = (f"flops per solve: {f['total']:,} (one factorization of the square basis system, "
                        f"{f['k'] + 1} substitutions, {f['post']:,} for the {f['k']}x{f['k']} normal equations, "
                        f"{f['refine']:,} for one refinement step; {f['separate']:,} if each of the {f['k'] + 1} "
                        f"right-hand sides refactored) vs {f['dense']:,} for a {f['dense_formula']} "
                        f"({f['dense'] / f['total']:,.0f}x)")
            lines += wrap(text)
        return "\n".join(lines)
