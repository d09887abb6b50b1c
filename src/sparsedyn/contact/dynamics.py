"""Robots in contact: forward dynamics and impacts with rigid contacts, as sparse solves.

A contact (:class:`~sparsedyn.model.sensors.Contact`) holds a frame of the robot still against the
world: ``kind="6d"`` constrains the frame's spatial acceleration ``[omega_dot; a]`` (frame axes,
at its origin; 6 unknowns, the wrench ``[n; f]``), ``kind="3d"`` the classical acceleration of
its origin (frame axes; 3 unknowns, the force ``f``), ``kind="1d"`` the classical acceleration
of its origin along a fixed world direction ``n`` (1 unknown, the force ``lambda n`` on the robot,
``n`` normalised: a frictionless normal contact; its row is ``n^T R_f J_lin`` with ``R_f`` the
frame's orientation, so the direction turns in the frame as the robot moves).  With ``J`` (m, nv)
the contact Jacobian
(rows in the order of the contacts) and ``lambda`` (m) the contact forces applied *on the robot*
(frame axes, about the frame origin)::

    H a + C = tau + J^T lambda,        J a = -(drift + K_d J v)

``drift`` is the contact acceleration at ``a = 0`` (``Jdot v``; for a point the classical term
``omega x v_p`` included) and ``K_d`` (``baumgarte``) a velocity gain that damps a sliding
contact (Pinocchio's ``corrector.Kd``; a contact is made where the frame is, so there is no
position error to correct).

The solve (one straight-line program, no value-dependent branch)::

    H = crba(q) = L^T D L          branch-sparse LTDL, no fill-in (Featherstone, 2005)
    a0 = H^-1 (tau - C)            unconstrained accelerations
    Y = L^-T J^T                   each contact row touches only the dofs of its ancestors
    G = Y^T D^-1 Y                 the Delassus matrix J H^-1 J^T (m x m)
    (G + mu I) lambda = -(J a0 + drift + K_d J v)       a small dense LTDL (written out)
    a = a0 + L^-1 D^-1 Y lambda

``mu`` (``damping``) is the proximal regularisation of Pinocchio's ``ProximalSettings`` with one
iteration: ``mu = 0`` gives the exact rigid solution; ``mu > 0`` keeps a redundant contact set
(four feet in 6D, two hands on one object) solvable.  On the NumPy path a singular Delassus
matrix with ``mu = 0`` is reported by a :class:`ContactWarning` and answered with the
minimum-norm forces (the accelerations are unique when the contacts are consistent).

Cost: CRBA and the LTDL factorization are ``O(n d^2)`` (``d`` the depth of the tree), the
contact rows ``O(m d)``, the Delassus matrix ``O(m^2 d)`` and its factorization ``O(m^3)`` for a
few contacts; compiled, the tracer folds every structural zero (a foot's row has no entry for the
other legs).  This is Pinocchio's route too (a sparse Cholesky of the contact KKT system; Carpentier,
Budhiraja and Mansard, "Proximal and sparse resolution of constrained dynamic equations", 2021).

Impacts (:func:`impulse_dynamics`): ``H (v+ - v) = J^T Lambda``, ``J v+ = -e J v + w`` (``w`` the
target contact velocity, default 0); the same factorization with
``(G + mu I) Lambda = w - (1 + e) J v``.

Derivatives (:func:`contact_dynamics_derivatives`, :func:`impulse_dynamics_derivatives`) are the
traced programs differentiated by the symbolic layer (:func:`~sparsedyn.algorithms.derivatives.derivative_program`), on
the tangent space, as :func:`~sparsedyn.aba_derivatives`.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.crba import bias_kernel, crba_kernel
from ..algorithms.derivatives import derivative_program
from ..algorithms.minv import minv
from ..algorithms.dynamics_derivatives import analytical_model, rnea_derivative_kernel
from ..algorithms.rnea import rnea, rnea_kernel
from ..algorithms.fd import fd_crb_kernel, ltdl_checker
from ..algorithms.kinematics import joint_transforms
from ..algorithms.ltdl import chain_lambda, dof_lambda, ltdl, ltdl_solve, mpyLi, mpyLit, spd_inverse
from ..kernels import Kernel, kernel
from ..model.topology import model_store
from ..model.spatial import apply_force_transpose
from ..symbolic.ad import inline
from ..symbolic.ir import Graph
from ..symbolic.trace import trace_kernel
from .rows import _m, contact_drift, contact_jacobian, contact_size, contacts_of, normal_in_frame

__all__ = ["ContactDynamics", "Impulse", "ContactWarning", "contact_dynamics", "impulse_dynamics",
           "contact_dynamics_derivatives", "impulse_dynamics_derivatives", "contact_jacobian", "contacts_of",
           "DELASSUS_RTOL", "RedundantContactsError", "structurally_redundant"]

#: A Delassus pivot below ``DELASSUS_RTOL`` times the largest diagonal entry marks the contact
#: set as redundant or singular (NumPy path).
DELASSUS_RTOL = 1e-10


class ContactWarning(UserWarning):
    """A contact set is redundant or singular: the forces returned are the minimum-norm ones."""


class RedundantContactsError(ValueError):
    """A contact set is redundant by its structure (its rows are dependent at every state) and no
    ``damping`` was given: a traced (compiled) kernel has no minimum-norm answer to give."""


class ContactDynamics(NamedTuple):
    """Result of :func:`contact_dynamics`: ``a`` (..., nv) and ``forces`` (..., m)."""

    a: np.ndarray
    forces: np.ndarray


class Impulse(NamedTuple):
    """Result of :func:`impulse_dynamics`: post-impact velocity ``v`` (..., nv) and ``impulses`` (..., m)."""

    v: np.ndarray
    impulses: np.ndarray


# the contact set and its rows (Jacobian, drift): .rows

# --- the solve ----------------------------------------------------------------------------------

class _System(NamedTuple):
    lam: list       # dof parents
    L: np.ndarray   # (..., nv, nv) unit LTDL factor of H
    D: np.ndarray   # (..., nv)
    J: np.ndarray   # (..., m, nv)
    Y: np.ndarray   # (..., m, nv): rows of L^-T J^T
    G: np.ndarray   # (..., m, m): J H^-1 J^T


def _system(model, q, contacts, check=None):
    """Factorization of ``H`` and the Delassus matrix of the contacts (kernel use)."""
    lam = dof_lambda(model)
    Xup, S = joint_transforms(model, q)
    H = crba_kernel(model, q)
    L, D = ltdl(model.topology, H, None if check is None else check(H))
    J = contact_jacobian(model, Xup, S, contacts)
    Y = mpyLit(lam, L[..., None, :, :], J, unit=True)
    G = (Y / D[..., None, :]) @ np.swapaxes(Y, -1, -2)
    return _System(lam, L, D, J, Y, G), (Xup, S)


def _hinv_jt(sys, x):
    """``H^-1 J^T x`` (..., nv) for ``x`` (..., m)."""
    y = (x[..., None, :] @ sys.Y)[..., 0, :]
    return mpyLi(sys.lam, sys.L, y / sys.D, unit=True)


def spd_solve(A, b, mu=0.0, check=None):
    """``(A + mu I)^-1 b`` for small symmetric positive (semi)definite ``A`` (..., m, m), ``b`` (..., m):
    a dense ``L^T D L`` written out (no ``np.linalg``: traceable).  ``check(k, D_k)`` sees each pivot."""
    if mu:
        A = A + mu * np.eye(A.shape[-1])
    lam = chain_lambda(A.shape[-1])
    L, D = ltdl(lam, A, check)
    return ltdl_solve(lam, L, D, b)


class _Pivots:
    """Pivot check of the Delassus factorization (float path): remembers a singular one."""

    def __init__(self, G):
        self.scale = np.max(np.abs(np.diagonal(G, axis1=-2, axis2=-1)), axis=-1, initial=0.0)
        self.singular = False

    def __call__(self, k, pivot):
        if np.any(~(pivot > DELASSUS_RTOL * self.scale)):
            self.singular = True


def structurally_redundant(J) -> bool:
    """Whether the contact rows of a traced Jacobian ``J`` (m, nv) (an object array: symbols, and
    numbers for the structural constants) are dependent at every state: their structural rank (a
    maximum matching of rows to columns through the non-zero entries) is below m.  Four feet in
    6D on a quadruped: 24 rows, 18 dofs."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import structural_rank
    pattern = np.vectorize(lambda x: bk.is_symbolic(x) or x != 0, otypes=[bool])(J)
    return structural_rank(csr_matrix(pattern)) < J.shape[-2]


def _solve_forces(sys, rhs, mu, symbolic, who, contacts):
    """``(G + mu I)^-1 rhs``; on the float path a singular ``G`` gives the minimum-norm solution and
    a :class:`ContactWarning` (``pinv`` of ``G + mu I`` with the pivot tolerance).  The traced path
    has no value-dependent branch, so it refuses a structurally redundant set without damping
    (:class:`RedundantContactsError`) rather than divide by a zero pivot."""
    if symbolic:
        if not mu and structurally_redundant(sys.J):
            raise RedundantContactsError(
                f"{who}: the contact set {list(contacts)} is redundant by its structure ({sys.J.shape[-2]} "
                f"contact rows, dependent at every state); the compiled kernel needs damping > 0 (a proximal "
                f"regularisation); the NumPy path (sparsedyn.use_backend('numpy')) returns the minimum-norm "
                f"forces with a ContactWarning")
        return spd_solve(sys.G, rhs, mu)
    piv = _Pivots(sys.G + mu * np.eye(sys.G.shape[-1]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = spd_solve(sys.G, rhs, mu, piv)
    if not piv.singular:
        return x
    warnings.warn(f"{who}: the contact set {list(contacts)} is redundant or singular (a pivot of the Delassus "
                  f"matrix J H^-1 J^T + {mu:g} I is below {DELASSUS_RTOL:g} times its largest diagonal "
                  "entry); returning the minimum-norm forces.  Drop the redundant contacts or pass damping > 0.",
                  ContactWarning, stacklevel=_checks.user_stacklevel())
    A = sys.G + mu * np.eye(sys.G.shape[-1])
    return (np.linalg.pinv(A, rcond=DELASSUS_RTOL, hermitian=True) @ rhs[..., None])[..., 0]


def _settings(model, contacts, gain, damping, who, gain_name="baumgarte"):
    contacts = contacts_of(model, contacts)
    for name, x in ((gain_name, 0.0 if gain is None else gain), ("damping", damping)):
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) \
                or not np.isfinite(x) or x < 0:
            raise ValueError(f"{who}: {name} must be a finite number >= 0, got {x!r}")
    return contacts, float(gain or 0.0), float(damping)


def _checker(model, symbolic):
    return None if symbolic else (lambda H: ltdl_checker(model, H))


_OPT = {"f_ext": ("nb", 6), "gravity": (3,)}


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional=_OPT,
        static=("contacts", "baumgarte", "damping"), sequences=("contacts",),
        outputs={"a": ("nv",), "forces": (_m,)}, result=ContactDynamics)
def contact_dynamics(model, q, v, tau, contacts, *, baumgarte=None, damping=0.0, f_ext=None, gravity=None):
    """Forward dynamics in rigid contact: ``(a, forces)`` (a :class:`ContactDynamics`).

    ``q`` (..., nq), ``v``/``tau`` (..., nv); ``contacts``: a sequence of
    :class:`~sparsedyn.model.sensors.Contact` (frame names are 6D contacts; a tuple is fastest on a
    compiled model).  ``a`` (..., nv): the joint accelerations; ``forces`` (..., m): the contact
    forces applied on the robot, in the order of ``contacts``: ``[n; f]`` (6) per 6D contact,
    ``f`` (3) per point contact, in the contact frame's axes about its origin; ``lambda`` (1) per
    one-direction contact (``Contact(frame, "1d", normal=n)``: the force ``lambda n``, world ``n``).

    Each contact's acceleration is held at ``-K_d`` times its velocity (``baumgarte=K_d`` [1/s],
    default 0: the frame's spatial acceleration, or a point's classical acceleration, is zero
    when it does not move).  ``damping`` (>= 0): the proximal regularisation ``mu`` of the
    contact forces, ``(J H^-1 J^T + mu I) forces = ...`` (Pinocchio's ``ProximalSettings.mu``,
    one iteration); use it for redundant contact sets.  ``f_ext`` (..., NB, 6), ``gravity`` (3,) as
    in :func:`~sparsedyn.aba`.  The method is in the module docstring.

    >>> import numpy as np, sparsedyn as sd
    >>> model = sd.humanoid()
    >>> q = sd.humanoid_standing_configuration()
    >>> soles = (sd.Contact("l_sole"), sd.Contact("r_sole"))
    >>> res = sd.contact_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv), soles)
    >>> res.forces.shape
    (12,)
    >>> bool(np.allclose(sd.frame_acceleration(model, q, np.zeros(model.nv), res.a, "l_sole"), 0))
    True
    """
    who = "contact_dynamics"
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    contacts, kd, mu = _settings(model, contacts, baumgarte, damping, who)
    check = _checker(model, symbolic)
    C = bias_kernel(model, q, v, f_ext, g)
    if not contacts:
        a = fd_crb_kernel(model, q, v, tau, f_ext, g, check)
        return ContactDynamics(_out(a, shape, model.nv), _out(a[..., :0], shape, 0))
    sys, (Xup, S) = _system(model, q, contacts, check)
    a0 = ltdl_solve(sys.lam, sys.L, sys.D, tau - C)
    gamma = contact_drift(model, Xup, S, v, contacts, q)
    if kd:
        gamma = gamma + kd * _mv(sys.J, v)
    forces = _solve_forces(sys, -(_mv(sys.J, a0) + gamma), mu, symbolic, who, contacts)
    a = a0 + _hinv_jt(sys, forces)
    return ContactDynamics(_out(a, shape, model.nv), _out(forces, shape, contact_size(contacts)))


def _mv(A, x):
    return (A @ x[..., None])[..., 0]


def _out(x, shape, n):
    return np.broadcast_to(x, shape + (n,)).copy()


_TARGET = {"target_velocity": (_m,)}


def _target(target_velocity, contacts, who):
    """The target contact velocity (..., m) as an array, checked (``None`` stays ``None``)."""
    if target_velocity is None or bk.is_symbolic(target_velocity):
        return target_velocity
    m = contact_size(contacts)
    t = _checks.numeric("target_velocity", target_velocity, f"(..., {m}), one per contact row")
    if t.shape[-1:] != (m,) or not np.all(np.isfinite(t)):
        raise ValueError(f"{who}: target_velocity must be (..., {m}) finite numbers, one per contact row "
                         f"({', '.join(f'{c.name}: {c.size}' for c in contacts)}), got shape {t.shape}")
    return t


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, optional=_TARGET, static=("contacts", "restitution", "damping"),
        sequences=("contacts",),
        outputs={"v_plus": ("nv",), "impulses": (_m,)}, result=Impulse)
def impulse_dynamics(model, q, v, contacts, restitution=0.0, damping=0.0, *, target_velocity=None):
    """Velocities after an impact on rigid contacts: ``(v, impulses)`` (an :class:`Impulse`).

    The contacts (as in :func:`contact_dynamics`) are hit at state ``(q, v)`` (``v`` the
    velocity before the impact); the impulses ``Lambda`` (..., m) (applied on the robot, contact
    frame axes, ``[n; f]`` per 6D contact, ``f`` per point) change the velocity by
    ``H^-1 J^T Lambda`` so that the contacts' velocities become ``-restitution`` times what they
    were (0: a plastic impact, they stop; 1: elastic).  ``damping``: the proximal ``mu`` as in
    :func:`contact_dynamics` (Pinocchio's ``impulseDynamics``).

    ``target_velocity`` (..., m): the contact velocities wanted after the impact, one per contact
    row (frame axes as the impulses; along the normal for a 1D contact), added to the restitution's:
    ``J v+ = -restitution J v + target_velocity`` (RBDL's ``v_plus`` of a constraint set).
    """
    who = "impulse_dynamics"
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v, "v")
    shape = _checks.batch_shape(q=(q, 1), v=(v, 1))
    symbolic = bk.is_symbolic(q) or bk.is_symbolic(v)
    contacts, e, mu = _settings(model, contacts, restitution, damping, who, "restitution")
    target = _target(target_velocity, contacts, who)
    if target is not None:
        shape = np.broadcast_shapes(shape, target.shape[:-1])
    if not contacts:
        return Impulse(_out(v, shape, model.nv), _out(v[..., :0], shape, 0))
    sys, _ = _system(model, q, contacts, _checker(model, symbolic))
    rhs = -(1.0 + e) * _mv(sys.J, v)
    impulses = _solve_forces(sys, rhs if target is None else rhs + target, mu, symbolic, who, contacts)
    v_plus = v + _hinv_jt(sys, impulses)
    return Impulse(_out(v_plus, shape, model.nv), _out(impulses, shape, contact_size(contacts)))


# --- derivatives: the implicit function theorem on the traced programs ---------------------------
#
# The contact dynamics solve  r1 = rnea(q, v, a, f_ext + X^T lambda) - tau = 0  (the contact wrenches
# are body-fixed: X^T lambda is constant in the body frame; a 1D contact's direction is world-fixed, its
# J_1(q)^T lambda is differentiated apart) and  r2 = J a + drift + K_d J v + mu lambda
# = 0.  Differentiating,  [H  -J^T; J  mu I] [da; dlambda] = -[dr1; dr2],  so with M = H^-1:
#     dlambda = (G + mu I)^-1 (J M dr1 - dr2),        da = M (J^T dlambda - dr1).
# dr1 comes from RNEA's analytical derivatives (Carpentier and Mansard, 2018), dr2 from the derivative
# program of the contact acceleration (traced and differentiated by the symbolic layer); the rest is
# sparse solves with H and products with the small inverse.  Impacts:  r1 = H (v+ - v) - J^T Lambda,
# r2 = J (v+ + e v) - w + mu Lambda (w the target velocity).

def _contact_wrenches(model, contacts, forces, f_ext=None, Xup=None):
    """Body wrenches (..., NB, 6) of the contact forces (..., m) (body frames), plus ``f_ext``.

    A one-direction contact's force turns in its body with the configuration: with ``Xup`` it is
    included (``n_f lambda``); without, it is left out (the caller accounts for it)."""
    shape = forces.shape[:-1]
    out = np.zeros(shape + (model.nbodies, 6), dtype=forces.dtype) if f_ext is None else f_ext + 0
    r = 0
    for c in contacts:
        fr = model.frames[model.frame(c.frame)]
        r, f = r + c.size, forces[..., r:r + c.size]
        if c.kind == "1d":
            if Xup is None:
                continue
            f = normal_in_frame(model, Xup, c) * f
        w = f if c.kind == "6d" else np.concatenate([np.zeros(f.shape[:-1] + (3,), dtype=f.dtype), f], -1)
        out[..., fr.body, :] = out[..., fr.body, :] + apply_force_transpose(fr.X, w)
    return out


def _normal_forces(model, q, forces, contacts):
    """``J_1(q)^T lambda_1`` (..., nv): the generalised force of the one-direction contacts alone
    (kernel use; its derivative in ``q`` adds the turning of their world-fixed directions in the
    bodies to RNEA's derivative with body-fixed wrenches)."""
    rows = [r for r, c in zip(np.cumsum([0] + [c.size for c in contacts]), contacts) if c.kind == "1d"]
    J = _jacobian(model, q, contacts)
    return (forces[..., rows][..., None, :] @ J[..., rows, :])[..., 0, :]


def _acceleration(model, q, v, a, contacts, baumgarte=None):
    """The contacts' accelerations ``J a + drift + K_d J v`` (..., m) (kernel use)."""
    Xup, S = joint_transforms(model, q)
    J = contact_jacobian(model, Xup, S, contacts)
    c = _mv(J, a) + contact_drift(model, Xup, S, v, contacts, q)
    return c + baumgarte * _mv(J, v) if baumgarte else c


def _jacobian(model, q, contacts):
    """The contact Jacobian (..., m, nv) at ``q`` (kernel use)."""
    Xup, S = joint_transforms(model, q)
    return contact_jacobian(model, Xup, S, contacts)


def _velocity(model, q, w, contacts):
    """``J(q) w`` (..., m) (kernel use)."""
    return _mv(_jacobian(model, q, contacts), w)


def _impulse_balance(model, q, w, impulses, contacts):
    """``H(q) w - J(q)^T impulses`` (..., nv): RNEA without velocity and gravity (kernel use)."""
    z = np.zeros(3, dtype=q.dtype)
    Xup, _ = joint_transforms(model, q)
    return rnea_kernel(model, q, bk.zeros(w.shape, like=w), w, _contact_wrenches(model, contacts, impulses, Xup=Xup),
                       z)


_NV, _NQ = ("nv",), ("nq",)
_ACC = Kernel("contact_acceleration", _acceleration, {"q": _NQ, "v": _NV, "a": _NV}, {"c": (_m,)}, {},
              ("contacts", "baumgarte"))
_VEL = Kernel("contact_velocity", _velocity, {"q": _NQ, "w": _NV}, {"c": (_m,)}, {}, ("contacts",))
_BAL = Kernel("impulse_balance", _impulse_balance, {"q": _NQ, "w": _NV, "impulses": (_m,)}, {"r": _NV}, {},
              ("contacts",))
_NRM = Kernel("normal_contact_forces", _normal_forces, {"q": _NQ, "forces": (_m,)}, {"r": _NV}, {},
              ("contacts",))


def _kkt_pieces(model, q, contacts, mu):
    """``(solve, J, MJt, Gi)`` as graph arrays: ``solve(X) = H^-1 X`` for a matrix ``X`` (nv, k) by the
    branch-sparse LTDL factors (cheaper than a product with a dense ``H^-1``), the contact Jacobian,
    ``H^-1 J^T`` and ``(G + mu I)^-1``."""
    sys, _ = _system(model, q, contacts)
    L, D = sys.L[None], sys.D[None]

    Dinv = 1 / D                                   # one division per dof, not per column

    def solve(X):
        return mpyLi(sys.lam, L, mpyLit(sys.lam, L, X.T, unit=True) * Dinv, unit=True).T
    MJt = mpyLi(sys.lam, L, sys.Y / D, unit=True).T
    G = sys.G + mu * np.eye(sys.G.shape[-1]) if mu else sys.G
    return solve, sys.J, MJt, spd_inverse(G)


def _cached(key, model, build):
    """The program ``key`` of ``model`` (its :func:`~sparsedyn.model.topology.model_store`), built once."""
    programs = model_store(model, "contact dynamics programs")
    prog = programs.get(key)
    if prog is None:
        prog = programs.setdefault(key, build())
    return prog


def _run(prog, arrays):
    """Evaluate a derivative program: float arrays (any batch) or object arrays (traced: inlined)."""
    if any(bk.is_symbolic(a) for a in arrays):
        return inline(prog, [np.asarray(a, dtype=object) for a in arrays])
    return prog.evaluate(arrays)


def rnea_partials(model, q, v, a, f_ext=None, gravity=None):
    """RNEA's ``(dtau_dq, dtau_dv)`` (graph arrays; ``f_ext`` body wrenches held constant): the
    analytical kernel (written for constant motion subspaces; composite joints of such parts as
    chains of massless bodies, :func:`~sparsedyn.algorithms.dynamics_derivatives.analytical_model`: a
    fraction of the traced program's operations), or the traced program's derivatives where a
    joint's ``S`` depends on ``q`` otherwise (kernel use)."""
    chained = analytical_model(model, f_ext)
    if chained is not None:
        return rnea_derivative_kernel(chained[0], q, v, a, chained[1], gravity, want_da=False)
    given = [(n, x) for n, x in (("f_ext", f_ext), ("gravity", gravity)) if x is not None]
    prog = derivative_program(rnea, model, ("q", "v"), optional=tuple(n for n, _ in given))
    return tuple(inline(prog, [q, v, a] + [x for _, x in given]))


def _dynamics_derivatives_program(model, static, optional):
    contacts = contacts_of(model, static["contacts"])
    kd, mu = float(static.get("baumgarte") or 0.0), float(static.get("damping") or 0.0)
    optional = tuple(n for n in _OPT if n in set(optional))

    def build():
        shapes = contact_dynamics.__kernel__.shapes(model, contacts=contacts)
        names = ["q", "v", "tau"] + list(optional)
        g = Graph()
        args = [g.inputs(j, shapes[n]) for j, n in enumerate(names)]
        q, v = args[0], args[1]
        opt = dict(zip(optional, args[3:]))
        st = {"contacts": contacts, "baumgarte": kd, "damping": mu}
        a, lam = inline(trace_kernel(contact_dynamics.__kernel__, model, st, optional), args)
        f_tot = _contact_wrenches(model, contacts, lam, opt.get("f_ext"))
        r1q, r1v = rnea_partials(model, q, v, a, f_tot, opt.get("gravity"))
        if any(c.kind == "1d" for c in contacts):        # r1 -= J_1(q)^T lambda_1, left out of f_tot
            r1q = r1q - inline(derivative_program(_NRM, model, ("q",), {"contacts": contacts}), [q, lam])[0]
        r2q, r2v = inline(derivative_program(_ACC, model, ("q", "v"), {"contacts": contacts, "baumgarte": kd}),
                          [q, v, a])
        solve, J, MJt, Gi = _kkt_pieces(model, q, contacts, mu)
        outs_a, outs_f = [], []
        for r1, r2 in ((r1q, r2q), (r1v, r2v)):
            # dr1 and J have the branch structure's zeros: products with them first, one solve last
            dlam = Gi @ (MJt.T @ r1 - r2)
            outs_a.append(solve(J.T @ dlam - r1))
            outs_f.append(dlam)
        dlam_t = -(Gi @ MJt.T)                                   # r1 = -tau
        M = inline(trace_kernel(minv.__kernel__, model), [q])[0]
        outs_a.append(MJt @ dlam_t + M)
        outs_f.append(dlam_t)
        return g.program(outs_a + outs_f, [shapes[n] for n in names],
                         name="contact_dynamics_derivatives" + "".join("_" + n for n in optional),
                         input_names=tuple(names),
                         output_names=("da_dq", "da_dv", "da_dtau", "df_dq", "df_dv", "df_dtau"))
    return _cached(("contact_dynamics_derivatives", contacts, kd, mu, optional), model, build)


def _impulse_derivatives_program(model, static, optional=()):
    contacts = contacts_of(model, static["contacts"])
    e, mu = float(static.get("restitution") or 0.0), float(static.get("damping") or 0.0)
    optional = tuple(n for n in _TARGET if n in set(optional))

    def build():
        nv = model.nv
        g = Graph()
        q, v = g.inputs(0, (model.nq,)), g.inputs(1, (nv,))
        extra = [g.inputs(2, (contact_size(contacts),))] if optional else []
        st = {"contacts": contacts, "restitution": e, "damping": mu}
        vp, imp = inline(trace_kernel(impulse_dynamics.__kernel__, model, st, optional), [q, v] + extra)
        r1q, = inline(derivative_program(_BAL, model, ("q",), {"contacts": contacts}), [q, vp - v, imp])
        r2q, = inline(derivative_program(_VEL, model, ("q",), {"contacts": contacts}), [q, vp + e * v])
        solve, J, MJt, Gi = _kkt_pieces(model, q, contacts, mu)
        dimp_q = Gi @ (MJt.T @ r1q - r2q)
        dv_q = solve(J.T @ dimp_q - r1q)
        dimp_v = -(1.0 + e) * (Gi @ J)                 # r1 = -H dv, r2 = e J dv
        dv_v = MJt @ dimp_v + np.eye(nv, dtype=int)
        return g.program([dv_q, dv_v, dimp_q, dimp_v], [(model.nq,), (nv,)] + [(contact_size(contacts),)] * len(extra),
                         name="impulse_dynamics_derivatives" + "".join("_" + n for n in optional),
                         input_names=("q", "v") + optional,
                         output_names=("dv_dq", "dv_dv", "dimpulses_dq", "dimpulses_dv"))
    return _cached(("impulse_dynamics_derivatives", contacts, e, mu, optional), model, build)


_NVxNV = ("nv", "nv")
_MxNV = (_m, "nv")


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional=_OPT,
        static=("contacts", "baumgarte", "damping"), sequences=("contacts",),
        outputs={"da_dq": _NVxNV, "da_dv": _NVxNV, "da_dtau": _NVxNV,
                 "df_dq": _MxNV, "df_dv": _MxNV, "df_dtau": _MxNV},
        program=_dynamics_derivatives_program)
def contact_dynamics_derivatives(model, q, v, tau, contacts, *, baumgarte=None, damping=0.0, f_ext=None,
                                 gravity=None):
    """Partial derivatives of :func:`contact_dynamics`: ``(da_dq, da_dv, da_dtau, df_dq, df_dv, df_dtau)``,
    shapes (..., nv, nv) and (..., m, nv), ``d/dq`` on the tangent space (as
    :func:`~sparsedyn.aba_derivatives`); ``f_ext`` and ``gravity`` are held constant.

    Analytic, by the implicit function theorem on the contact KKT system (the derivatives of RNEA
    and of the contacts' accelerations, then ``H^-1`` and the small ``(J H^-1 J^T + mu I)^-1``); as
    Pinocchio's ``computeConstraintDynamicsDerivatives``.
    """
    who = "contact_dynamics_derivatives"
    q, v, tau, f_ext, g, shape, _ = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau", "nv joint forces")
    contacts, kd, mu = _settings(model, contacts, baumgarte, damping, who)
    optional = tuple(n for n, x in (("f_ext", f_ext), ("gravity", gravity)) if x is not None)
    if not contacts:
        from ..algorithms.derivatives import aba_derivatives
        d = aba_derivatives(model, q, v, tau, f_ext=f_ext, gravity=gravity)
        return d + tuple(np.zeros(shape + (0, model.nv)) for _ in range(3))
    _warn_if_singular(model, q, contacts, mu, who)
    prog = _dynamics_derivatives_program(model, {"contacts": contacts, "baumgarte": kd, "damping": mu}, optional)
    return tuple(_run(prog, [q, v, tau] + [x for x in (f_ext, g if gravity is not None else None) if x is not None]))


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, optional=_TARGET, static=("contacts", "restitution", "damping"),
        sequences=("contacts",),
        outputs={"dv_dq": _NVxNV, "dv_dv": _NVxNV, "dimpulses_dq": _MxNV, "dimpulses_dv": _MxNV},
        program=_impulse_derivatives_program)
def impulse_dynamics_derivatives(model, q, v, contacts, restitution=0.0, damping=0.0, *, target_velocity=None):
    """Partial derivatives of :func:`impulse_dynamics`: ``(dv_dq, dv_dv, dimpulses_dq, dimpulses_dv)``
    of the post-impact velocity and the impulses, shapes (..., nv, nv) and (..., m, nv), ``d/dq`` on
    the tangent space.  Analytic (the implicit function theorem, as :func:`contact_dynamics_derivatives`).
    Pinocchio's ``computeImpulseDynamicsDerivatives`` returns ``dv_dv - I`` (the derivative of the jump).
    ``target_velocity`` as in :func:`impulse_dynamics` (held constant).
    """
    who = "impulse_dynamics_derivatives"
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v, "v")
    contacts, e, mu = _settings(model, contacts, restitution, damping, who, "restitution")
    target = _target(target_velocity, contacts, who)
    if not contacts:
        shape = _checks.batch_shape(q=(q, 1), v=(v, 1))
        z = np.zeros(shape + (0, model.nv))
        return np.zeros(shape + (model.nv, model.nv)), np.broadcast_to(np.eye(model.nv), shape + (model.nv,) * 2).copy(), z, z
    _warn_if_singular(model, q, contacts, mu, who)
    st = {"contacts": contacts, "restitution": e, "damping": mu}
    if target is None:
        return tuple(_run(_impulse_derivatives_program(model, st), [q, v]))
    return tuple(_run(_impulse_derivatives_program(model, st, tuple(_TARGET)), [q, v, target]))


def _warn_if_singular(model, q, contacts, mu, who):
    """The derivatives need a regular ``J H^-1 J^T + mu I``: the same check (and warning) as the solve."""
    if bk.is_symbolic(q):
        return
    sys, _ = _system(model, q, contacts)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        _solve_forces(sys, np.zeros(sys.G.shape[:-1]), mu, False, who, contacts)
