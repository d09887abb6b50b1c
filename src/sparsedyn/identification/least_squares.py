"""Base parameters and the streamed weighted least squares of :mod:`sparsedyn.identification`
(Gautier, *Numerical calculation of the base inertial parameters of robots*, 1991, for the base
parameters)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _checks
from ..model.topology import model_store
from ..algorithms.regressor import NPARAM, joint_torque_regressor, joint_wrench_regressor
from ..model import Model
from .consistency import _consistent_fit, pseudo_inertia
from .gram import add_gram, row_groups
from .force_torque import _pieces, _sensor, _sensor_joint, _sensor_rows, fixed_joint_parameters, model_parameters

__all__ = ["PARAMETER_NAMES", "BaseParameters", "base_parameters", "random_states", "parameter_names", "Identification",
           "IdentificationData", "identify", "CHUNK_BYTES"]

#: Names of the 10 parameters of a body, in order.
PARAMETER_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


def random_states(model, n, seed=0):
    """``(q, v, a)`` with ``n`` leading states: configurations drawn joint by joint ignoring the joint
    limits (angles in [-pi, pi], displacements in [-1, 1] m), standard normal ``v`` and ``a``."""
    rng = np.random.default_rng(seed)
    q = np.stack([np.concatenate([j.random(rng) for j in model.joints]) for _ in range(n)])
    return q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


# --- base parameters ---------------------------------------------------------------------

def parameter_names(model, pieces=()):
    """``"body.param"`` for each of the 10 NB inertial parameters, then ``"joint[child side].param"``
    for the child-side piece of each fixed joint in ``pieces``."""
    return ([f"{b}.{p}" for b in model.body_names for p in PARAMETER_NAMES]
            + [f"{j}[child side].{p}" for j in pieces for p in PARAMETER_NAMES])


@dataclass(frozen=True)
class BaseParameters:
    """The identifiable combinations of a model's inertial parameters (see the module docstring).

    ``independent`` (r,) and ``dependent`` (n - r,): indices into ``pi`` (n = 10 NB, plus 10 per
    fixed joint in ``pieces``: the links on the child side of a merged fixed joint that carries an F/T
    sensor, see :func:`force_torque_regressor`); ``K`` (r, n - r): ``beta = pi[independent] + K @
    pi[dependent]``; ``names``: one readable combination per base parameter.
    """

    independent: np.ndarray
    dependent: np.ndarray
    K: np.ndarray
    names: tuple
    pieces: tuple = ()

    def of_model(self, model):
        """The base parameters of ``model``'s own inertial parameters (and child-side pieces)."""
        return self.base(model_parameters(model, self.pieces))

    @property
    def rank(self) -> int:
        """Number of base (identifiable) parameters."""
        return len(self.independent)

    def base(self, pi):
        """``beta`` (..., r) of full parameters ``pi`` (..., n)."""
        pi = np.asarray(pi, float)
        return pi[..., self.independent] + pi[..., self.dependent] @ self.K.T

    def full(self, beta, reference):
        """Full parameters ``pi`` (n,) with base parameters ``beta`` (r,), closest in the dependent ones
        to ``reference`` (n,): ``pi[dependent] = reference[dependent]``, ``pi[independent] = beta - K
        reference[dependent]``.  (Data cannot tell which split of ``beta`` is right.)"""
        beta, reference = np.asarray(beta, float), np.asarray(reference, float)
        pi = reference.copy()
        pi[self.independent] = beta - self.K @ reference[self.dependent]
        return pi

    def regressor(self, Y):
        """The base regressor ``Y_1 = Y[..., independent]``: ``Y pi = Y_1 base(pi)``."""
        return np.asarray(Y)[..., self.independent]


def _stack(model, q, v, a, joint_torques, sensors, gravity=None):
    pieces = _pieces(model, sensors)
    rows = []
    if joint_torques:
        Y = joint_torque_regressor(model, q, v, a, gravity=gravity)
        rows.append(np.concatenate([Y, np.zeros(Y.shape[:-1] + (NPARAM * len(pieces),))], -1))
    if sensors:
        joints = [_sensor_joint(model, s) for s in sensors]
        W = joint_wrench_regressor(model, q, v, a, gravity=gravity, joints=tuple(joints))
        for k, s in enumerate(sensors):
            rows.append(_sensor_rows(model, s, W[..., k, :, :], pieces))
    if not rows:
        raise ValueError("no measurements: give joint torques and/or F/T sensors")
    return np.concatenate(rows, -2)


def _sensor_key(s):
    R = None if s.rotation is None else np.asarray(s.rotation, float).tobytes()
    return (type(s).__name__, s.name, s.joint, s.frame, s.direction, R)


def base_parameters(model, sensors=(), joint_torques=True, states=None, seed=0, rtol=1e-10,
                    gravity=None) -> BaseParameters:
    """The base parameters of ``model`` for joint-torque measurements (``joint_torques``) and the
    :class:`~sparsedyn.model.sensors.ForceTorque` ``sensors`` (objects or names on the model).

    ``states``: number of random states stacked (default: enough for three times as many rows as
    parameters); ``rtol``: a pivot of R below ``rtol`` times the largest is rank deficiency;
    ``gravity`` (3,): overrides ``model.gravity`` (its direction decides which first moments act).

    The analysis is done once per model (a compiled model shares its model's) and set of arguments;
    later calls return the same (read-only) result.
    """
    _checks.model_first("base_parameters", model, "model, sensors")
    sensors = [_sensor(model, s) for s in sensors]
    owner = model if isinstance(model, Model) else getattr(model, "model", model)
    key = (tuple(map(_sensor_key, sensors)), bool(joint_torques), states, seed, rtol,
           None if gravity is None else tuple(np.asarray(gravity, float).ravel()))
    table = model_store(owner, "base parameters")      # a structural analysis: once per model and arguments
    bp = table.get(key)
    if bp is None:
        bp = table[key] = _analyse(model, sensors, joint_torques, states, seed, rtol, gravity)
    return bp


def _analyse(model, sensors, joint_torques, states, seed, rtol, gravity):
    """:func:`base_parameters`, computed: a pivoted QR of regressors stacked from random states."""
    from scipy.linalg import qr, solve_triangular

    pieces = _pieces(model, sensors)
    n = NPARAM * (model.nbodies + len(pieces))
    rows_per_state = (model.nv if joint_torques else 0) + 6 * len(sensors)
    if rows_per_state == 0:
        raise ValueError("no measurements: give joint torques and/or F/T sensors")
    N = states or max(8, int(np.ceil(3 * n / rows_per_state)))
    W = _stack(model, *random_states(model, N, seed), joint_torques, sensors, gravity).reshape(-1, n)
    # Columns scaled to unit norm so the rank decision does not depend on units (kg vs kg m^2).  A
    # column that is zero up to rounding (a parameter that moves nothing) is set to zero first:
    # scaled up, its rounding noise would look like an independent column.
    scale = np.linalg.norm(W, axis=0)
    zero = scale <= rtol * scale.max(initial=0.0)
    W[:, zero] = 0.0
    scale[zero] = 1.0
    _, R, P = qr(W / scale, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > rtol * d[0])) if d.size and d[0] > 0 else 0
    indep, dep = P[:r], P[r:]
    # In scaled columns: W_2/s_2 = W_1/s_1 K_s  =>  W_2 = W_1 diag(1/s_1) K_s diag(s_2).
    Ks = solve_triangular(R[:r, :r], R[:r, r:]) if r else np.zeros((0, n))
    K = Ks / scale[indep][:, None] * scale[dep][None, :]
    K[np.abs(K) < 1e-12 * max(1.0, np.abs(K).max(initial=0.0))] = 0.0
    names = parameter_names(model, pieces)
    combos = []
    for k, c in enumerate(indep):
        terms = [names[c]] + [f"{K[k, j]:+.6g} {names[dep[j]]}" for j in np.flatnonzero(K[k])]
        combos.append(" ".join(terms))
    arrays = [np.array(indep), np.array(dep), K]
    for x in arrays:
        x.setflags(write=False)                        # shared by every later call
    return BaseParameters(*arrays, tuple(combos), pieces)


# --- least squares ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Identification:
    """Result of :func:`identify`.

    ``beta`` (r,): base parameters; ``covariance`` (r, r): their covariance (of the unconstrained
    least-squares estimate; with ``physically_consistent`` it is the same approximation);
    ``parameters`` (10 NB,): full parameters (the reference's values for what the data cannot tell,
    or the physically consistent fit); ``base``: the :class:`BaseParameters`; ``sigma2``: the noise
    variance used (given, or estimated from the residual); ``residual_rms``: of the whitened
    residual; ``dof``: rows minus base parameters; ``pseudo_inertias`` (NB, 4, 4) of ``parameters``;
    ``child_sides``: ``{fixed joint: 10 parameters}`` of the child-side pieces of fixed joints with an
    F/T sensor (:func:`force_torque_regressor`).
    """

    beta: np.ndarray
    covariance: np.ndarray
    parameters: np.ndarray
    base: BaseParameters
    sigma2: float
    residual_rms: float
    dof: int
    physically_consistent: bool
    child_sides: dict = None

    @property
    def std(self):
        """Standard deviations (r,) of ``beta``."""
        return np.sqrt(np.diag(self.covariance))

    @property
    def pseudo_inertias(self):
        """(NB, 4, 4) pseudo-inertia of each body from :attr:`parameters` (positive semidefinite
        exactly when the body's parameters are physically consistent)."""
        return pseudo_inertia(self.parameters)

    def model(self, model):
        """``model`` with the identified :attr:`parameters`."""
        return model.with_inertial_parameters(self.parameters)


def _rows_sigma(sigma, size, what):
    s = np.broadcast_to(np.asarray(1.0 if sigma is None else sigma, float), (size,))
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"{what}: standard deviations must be finite and positive")
    return s


def _check_states(model, q, v, a):
    q, v, a = (np.asarray(x, float) for x in (q, v, a))
    if q.ndim != 2 or q.shape[-1] != model.nq:
        raise ValueError(f"q: expected shape (N, {model.nq}) (N states of model {model.name!r}), got {q.shape}")
    N = q.shape[0]
    for name, x in (("v", v), ("a", a)):
        if x.shape != (N, model.nv):
            raise ValueError(f"{name}: expected shape ({N}, {model.nv}), got {x.shape}")
    return q, v, a, N


#: Bytes of measurement rows and regressors a chunk of states may hold (what streaming holds beyond the inputs).
CHUNK_BYTES = 32 * 2 ** 20


class IdentificationData:
    """What :func:`identify` keeps of the measurements: the Gram matrix of the whitened base-regressor
    rows augmented by their right-hand side, accumulated chunk by chunk, so that a recording of any
    length is identified in memory independent of its length (a CLI reading a log file, one
    accumulator per Dask partition merged at the end)::

        data = IdentificationData(model, joint_torques=True, sigma=0.1)
        for q, v, a, tau in chunks_of_a_recording:
            data.add(q, v, a, tau)
        result = data.solve()                 # an Identification, as identify() returns

    ``model``: a :class:`~sparsedyn.Model`, or a compiled one (``sparsedyn.compile(model)``);
    ``sensors``: :class:`~sparsedyn.model.sensors.ForceTorque` sensors (objects or names on the model) whose
    readings :meth:`add` is given, whitened with each sensor's covariance; ``joint_torques``: whether
    :meth:`add` is given joint forces; ``sigma``, ``base``, ``gravity``: as in :func:`identify`.

    The measurement rows ``A_1 beta ~ b`` (``A_1`` the base regressor, ``m x r``) are reduced to the
    normal equations: ``gram`` ((r + 1) x (r + 1)) is ``[A_1 b]^T [A_1 b]``, added chunk by chunk of
    states with one BLAS ``syrk`` per group of rows restricted to the columns they touch
    (:mod:`.gram`: the regressor's structural zeros; a single group, the whole rows, on a chain);
    :meth:`merge` adds the matrices of other accumulators.  :meth:`solve` factors it once (Cholesky of the column-scaled matrix).  The
    normal equations square the condition number: the rounding error of ``beta`` is about ``eps
    kappa^2`` for ``kappa`` the column-scaled condition number of ``A_1`` (10 to 40 for random
    states of the robots of example-robot-data; larger for motion that excites the parameters less),
    which is why :meth:`solve` refuses ``kappa`` beyond ``1 / rcond`` = 1e7.

    Attributes: ``model``, ``sensors``, ``base``, ``gram``, ``rows`` (measurement rows so far),
    ``states``.
    """

    def __init__(self, model, *, sensors=(), joint_torques=True, sigma=None, base=None, gravity=None):
        self.model = model
        self.sensors = [_sensor(model, s) for s in sensors]
        if not joint_torques and not self.sensors:
            raise ValueError("identify: no measurements (give tau and/or ft)")
        self.joint_torques = bool(joint_torques)
        self.sigma = sigma
        self.gravity = gravity
        pieces = _pieces(model, self.sensors)
        if base is not None and set(pieces) - set(base.pieces):
            raise ValueError(f"base: it was computed without the child-side pieces of {list(pieces)}; "
                             f"pass base_parameters(model, sensors=...) for the same sensors")
        if base is None:
            base = base_parameters(model, self.sensors, joint_torques=self.joint_torques, gravity=gravity)
        self.base = base
        self._s = _rows_sigma(sigma, model.nv, "sigma") if self.joint_torques else None
        # whitening of each sensor's reading: C^-1 = Linv^T Linv
        self._Linv = [np.linalg.inv(np.linalg.cholesky(s.covariance(6))) for s in self.sensors]
        # the moving joint whose wrench each sensor reads (the body a fixed joint was merged into)
        self._joints = tuple(sorted({_sensor_joint(model, s) for s in self.sensors}))
        # the base columns in increasing order (a gather from the regressor twice as fast) and where
        # each goes in the base order
        self._perm = np.argsort(base.independent, kind="stable")
        self._G = np.zeros((base.rank + 1, base.rank + 1))    # upper triangle, columns in increasing order
        self._groups = None                                   # the rows' groups (gram.row_groups), on first use
        self.rows = 0
        self.states = 0

    def _key(self):
        """What two accumulators must share to be merged: the rows mean the same and are weighted alike."""
        return (self.model.nq, self.model.nv, self.model.nbodies, self.joint_torques,
                tuple(s.name for s in self.sensors), tuple(L.tobytes() for L in self._Linv),
                tuple(self.base.independent), tuple(self.base.dependent),
                None if self._s is None else tuple(self._s),
                None if self.gravity is None else tuple(np.asarray(self.gravity, float).ravel()))

    @property
    def _chunk(self):
        """States per chunk: the regressors and rows of a chunk fit :data:`CHUNK_BYTES`."""
        m, r = self.model, self.base.rank
        n = NPARAM * (m.nbodies + len(self.base.pieces))
        rows = m.nv * self.joint_torques + 6 * len(self.sensors)
        per = 8 * (m.nv * NPARAM * m.nbodies * self.joint_torques + len(self._joints) * 6 * NPARAM * m.nbodies
                   + 6 * n * bool(self.sensors) + rows * (r + 1))
        return max(1, CHUNK_BYTES // per)

    def add(self, q, v, a, tau=None, ft=None, *, first_row=0):
        """Add the measurements of ``N`` states: ``q`` (N, nq), ``v``, ``a`` (N, nv); ``tau`` (N, nv)
        (when ``joint_torques``); ``ft``: ``{sensor: y (N, 6)}`` for every sensor (objects or names).
        Large inputs are worked through in chunks of states.  ``first_row``: the index of the first
        state in the whole recording (errors name rows by it).  Returns ``self``."""
        from scipy.linalg.blas import dsyrk

        model = self.model
        q, v, a, N = _check_states(model, q, v, a)
        if self.joint_torques:
            if tau is None:
                raise ValueError("tau: this accumulator takes joint forces (joint_torques=True); got None")
            tau = np.asarray(tau, float)
            if tau.shape != (N, model.nv):
                raise ValueError(f"tau: expected shape ({N}, {model.nv}), got {tau.shape}")
        elif tau is not None:
            raise ValueError("tau: this accumulator was made without joint forces (joint_torques=False)")
        given = {_sensor(model, s).name: np.asarray(y, float) for s, y in dict(ft or {}).items()}
        names = [s.name for s in self.sensors]
        if set(given) != set(names):
            raise ValueError(f"ft: expected readings of the sensors {names}, got {sorted(given)}")
        ys = [given[n] for n in names]
        for s, y in zip(names, ys):
            if y.shape != (N, 6):
                raise ValueError(f"ft[{s!r}]: expected shape ({N}, 6), got {y.shape}")
        step = self._chunk
        for k in range(0, N, step):
            sl = slice(k, min(N, k + step))
            parts = {"q": q[sl], "v": v[sl], "a": a[sl]}
            if tau is not None:
                parts["tau"] = tau[sl]
            parts.update({f"ft[{n!r}]": y[sl] for n, y in zip(names, ys)})
            for what, x in parts.items():
                bad = ~np.isfinite(x).all(-1)
                if bad.any():
                    raise ValueError(f"{what}: row {first_row + k + int(np.argmax(bad))} contains NaN or "
                                     f"infinite values")
            Mb = self._rows(parts["q"], parts["v"], parts["a"], parts.get("tau"), [y[sl] for y in ys])
            if len(self._row_groups()) == 1:
                # [A_1 b]^T [A_1 b]: the C-ordered rows are the Fortran-ordered transpose (no copy)
                self._G += dsyrk(1.0, Mb.T)
            else:
                add_gram(self._G, self._blocks(Mb, sl.stop - sl.start), self._groups)
            self.rows += len(Mb)
        self.states += N
        return self

    def _blocks(self, Mb, n):
        """The rows ``Mb`` of ``n`` states by kind: one (n, 1, r + 1) per joint force, (n, 6, r + 1) per sensor."""
        nv, c = self.model.nv * self.joint_torques, Mb.shape[1]
        T = Mb[:n * nv].reshape(n, nv, c)
        return [T[:, j:j + 1] for j in range(nv)] + [Mb[n * (nv + 6 * k):n * (nv + 6 * k + 6)].reshape(n, 6, c)
                                                      for k in range(len(self.sensors))]

    def _row_groups(self):
        """:func:`.gram.row_groups` of the kinds of rows, from the columns their rows touch at two random
        states (a structural zero of the regressor is an exact zero)."""
        if self._groups is None:
            m = self.model
            q, v, a = random_states(m, 2, seed=1)
            Mb = self._rows(q, v, a, np.zeros((2, m.nv)) if self.joint_torques else None,
                            [np.zeros((2, 6)) for _ in self.sensors])
            supports = [np.append(np.any(B[..., :-1] != 0, axis=(0, 1)), True) for B in self._blocks(Mb, 2)]
            self._groups = row_groups(supports)
        return self._groups

    def _rows(self, q, v, a, tau, ys):
        """Whitened base-regressor rows of a chunk of ``n`` states with their right-hand side in the last
        column, (n nv + 6 n len(sensors), r + 1): the joint forces' rows first, then each sensor's."""
        model, base = self.model, self.base
        cols, r, n = base.independent[self._perm], base.rank, len(q)
        nP = NPARAM * model.nbodies
        Mb = np.empty((n * (model.nv * self.joint_torques + 6 * len(self.sensors)), r + 1))
        at = 0
        if self.joint_torques:
            Y = joint_torque_regressor(model, q, v, a, gravity=self.gravity)
            T = Mb[:n * model.nv].reshape(n, model.nv, r + 1)
            own = cols < nP                                   # the child-side pieces move no joint force
            if own.all():
                np.take(Y, cols, axis=-1, out=T[..., :r], mode="clip")
            else:
                T[..., :r] = 0.0
                T[..., np.flatnonzero(own)] = Y[..., cols[own]]
            del Y
            T[..., r] = tau
            if np.any(self._s != 1.0):
                T /= self._s[:, None]
            at = n * model.nv
        if self.sensors:
            W = joint_wrench_regressor(model, q, v, a, gravity=self.gravity, joints=self._joints)
            for s, y, Linv in zip(self.sensors, ys, self._Linv):
                S = Mb[at:at + 6 * n].reshape(n, 6, r + 1)
                Ws = W[..., self._joints.index(_sensor_joint(model, s)), :, :]
                S[..., :r] = Linv @ _sensor_rows(model, s, Ws, base.pieces)[..., cols]
                S[..., r] = y @ Linv.T
                at += 6 * n
        return Mb

    def merge(self, *others):
        """A new accumulator holding the measurements of ``self`` and ``others`` (accumulators made for
        the same model, measurements, weights and base parameters, e.g. one per part of a recording)."""
        for o in others:
            if not isinstance(o, IdentificationData) or o._key() != self._key():
                raise ValueError("merge: expected IdentificationData of the same model, measurements, sigma and "
                                 f"base parameters, got {o!r}")
        out = object.__new__(IdentificationData)
        out.__dict__.update(self.__dict__)
        out._G = self._G + sum(o._G for o in others)
        out.rows = self.rows + sum(o.rows for o in others)
        out.states = self.states + sum(o.states for o in others)
        return out

    def __repr__(self):
        return (f"IdentificationData({self.model.name!r}, {self.states} states, {self.rows} rows, "
                f"{self.base.rank} base parameters)")

    @property
    def gram(self):
        """``[A_1 b]^T [A_1 b]`` ((r + 1) x (r + 1)): the Gram matrix of the whitened base-regressor rows
        (base parameters in the order of ``base.independent``) augmented by their right-hand side."""
        r = self.base.rank
        G = np.triu(self._G) + np.triu(self._G, 1).T
        out = np.empty_like(G)
        order = np.append(self._perm, r)
        out[np.ix_(order, order)] = G
        return out

    def _factor(self, rcond):
        """``(R, c, rho)``: the R factor (r, r) of the whitened base regressor, ``c = R^-T A_1^T b`` and the
        norm of the least-squares residual, from :attr:`gram`; ``ValueError`` when the states do not
        excite every base parameter."""
        from scipy.linalg import LinAlgError, cholesky, solve_triangular
        from scipy.linalg.lapack import dtrcon

        base, r = self.base, self.base.rank
        G = self.gram
        d = np.sqrt(np.maximum(np.diag(G)[:r], 0.0))
        Rs, cond = None, np.inf
        if np.all(d > 0):
            try:
                Rs = cholesky(G[:r, :r] / d / d[:, None], check_finite=False)
                # LAPACK's estimate of the 1-norm condition number (an SVD costs more than the rest)
                cond = 1.0 / dtrcon(Rs, norm="1")[0] if r else 1.0
            except LinAlgError:
                Rs = None
        if Rs is None or not cond < 1 / rcond:
            weak = [base.names[k] for k in np.flatnonzero(d == 0)] or (
                [base.names[int(np.argmin(np.abs(np.diag(Rs))))]] if Rs is not None else [])
            eg = f", e.g. {weak[0]!r}" if weak else ""
            number = f" (condition number {cond:.3g} of the scaled base regressor)" if Rs is not None else ""
            raise ValueError(f"identify: the {self.states} states do not excite every base parameter{number}{eg}; "
                             f"record more varied motion (every joint moving, accelerating, in several "
                             f"configurations)")
        R = Rs * d                                            # A = D Rs^T Rs D
        c = solve_triangular(R, G[:r, r], trans="T", check_finite=False)
        rho = np.sqrt(max(G[r, r] - c @ c, 0.0))
        return R, c, rho

    def solve(self, *, physically_consistent=False, reference=None, regularization=1e-6,
              known_noise=None, rcond=1e-7) -> Identification:
        """The :class:`Identification` of the measurements added so far (arguments as in
        :func:`identify`).  Raises ``ValueError`` when there are fewer rows than base parameters, or
        when the states do not excite every base parameter (the column-scaled condition number of the
        base regressor, LAPACK's 1-norm estimate, exceeds ``1 / rcond``)."""
        from scipy.linalg import solve_triangular

        model, base = self.model, self.base
        r = base.rank
        dof = self.rows - r
        if dof < 0:
            raise ValueError(f"identify: {self.rows} measurements for {r} base parameters; give more states")
        R, c, rho = self._factor(rcond)
        beta = solve_triangular(R, c)
        known = self.sigma is not None if known_noise is None else bool(known_noise)
        sigma2 = 1.0 if known else float(rho ** 2 / max(dof, 1))
        Rinv = solve_triangular(R, np.eye(r))
        cov = sigma2 * (Rinv @ Rinv.T)
        nP = NPARAM * model.nbodies
        pieces = base.pieces
        ref = model.inertial_parameters() if reference is None else np.asarray(reference, float)
        if ref.shape != (nP,):
            raise ValueError(f"reference: expected {nP} inertial parameters, got shape {ref.shape}")
        ref = np.concatenate([ref] + [fixed_joint_parameters(model, j) for j in pieces])
        pi = base.full(beta, ref)
        res2 = rho ** 2
        if physically_consistent:
            # A = A_1 T with T pi = beta: |A pi - b|^2 = |R T pi - c|^2 + rho^2.
            T = np.zeros((r, len(ref)))
            T[np.arange(r), base.independent] = 1.0
            T[:, base.dependent] = base.K
            RT = R @ T
            lam2 = regularization * np.sum(RT * RT) / len(ref)
            pi = _consistent_fit(RT, c, pi, ref, lam2, len(ref) // NPARAM)
            beta = base.base(pi)
            res2 = float(np.sum((RT @ pi - c) ** 2)) + rho ** 2
        rms = float(np.sqrt(res2 / self.rows)) if self.rows else 0.0
        child = {j: pi[nP + NPARAM * k:nP + NPARAM * (k + 1)] for k, j in enumerate(pieces)}
        return Identification(beta, cov, pi[:nP], base, sigma2, rms, dof, physically_consistent, child)


def identify(model, q, v, a, tau=None, *, sigma=None, ft=None, base=None, physically_consistent=False,
             reference=None, regularization=1e-6, gravity=None, known_noise=None) -> Identification:
    """Identify the base inertial parameters of ``model`` from measured motion and forces.

    ``q`` (N, nq), ``v``, ``a`` (N, nv): the states; ``tau`` (N, nv): measured joint forces (or None);
    ``ft``: ``{sensor: y}`` with :class:`~sparsedyn.model.sensors.ForceTorque` sensors (objects or names on
    the model, on moving or merged fixed joints, nothing touching the bodies beyond them) and their
    readings ``y`` (N, 6), whitened with the sensor's covariance; a sensor on a fixed joint adds the
    10 parameters of the links on its child side (``child_sides`` of the result; their reference
    values are the model's, :func:`fixed_joint_parameters`).  ``sigma``: standard deviation of the joint-force
    noise (scalar or (nv,)); when given (the noise is known) the covariance of ``beta`` is
    ``(Y_1^T Sigma^-1 Y_1)^-1``, otherwise it is scaled by the variance estimated from the residual
    (``known_noise`` overrides that choice, e.g. ``True`` for F/T readings alone whose sensor
    covariances are the true ones).
    ``base``: a :class:`BaseParameters` (default :func:`base_parameters` for these measurements).

    ``physically_consistent``: fit the full parameters with every pseudo-inertia positive
    semidefinite, minimising the whitened residual plus ``regularization`` (relative to the mean
    diagonal of the normal matrix) times ``|pi - reference|^2``, which picks the parameters the data
    cannot tell from ``reference`` (default: the model's own).

    The states are worked through in chunks (:class:`IdentificationData`): the memory used beyond the
    inputs does not grow with ``N``.  ``model`` may be a compiled model (``sparsedyn.compile(model)``),
    whose native regressors are many times faster on long recordings.
    """
    _checks.model_first("identify", model, "model, q, v, a")
    q, v, a, N = _check_states(model, q, v, a)
    ft = dict(ft or {})
    data = IdentificationData(model, sensors=list(ft), joint_torques=tau is not None, sigma=sigma, base=base,
                              gravity=gravity)
    data.add(q, v, a, tau, ft)
    return data.solve(physically_consistent=physically_consistent, reference=reference,
                      regularization=regularization, known_noise=known_noise)
