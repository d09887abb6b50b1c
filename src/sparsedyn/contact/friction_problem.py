"""The frictional contact problem of one time step and its NumPy solvers (see :mod:`sparsedyn.contact.friction`
for the method): the contact set's structure, the kernel :func:`contact_problem` (Delassus matrix, free
contact velocities), the friction cones and De Saxcé's correction, ADMM and projected Gauss-Seidel
vectorised over a batch of states."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks
from ..algorithms.configuration import integrate
from ..algorithms.crba import bias_kernel, crba_kernel
from ..algorithms.fd import ltdl_checker
from ..algorithms.kinematics import frame_world_transform, joint_transforms, world_transforms
from ..algorithms.ltdl import dof_lambda, ltdl, ltdl_solve, mpyLi, mpyLit
from ..kernels import kernel
from ..model import UnknownNameError
from ..sensors import Contact
from ..spatial import pose, skew
from .dynamics import ContactWarning, contact_jacobian

__all__ = ["ContactProblem", "ContactStep", "ContactResiduals", "ContactStepWarning", "Rollout", "contact_problem",
           "point_contacts", "contact_basis", "project_cone", "solve_admm", "solve_pgs", "SOLVERS", "StepArrays"]

#: The solvers of :func:`contact_step`.
SOLVERS = ("admm", "pgs")


class ContactStepWarning(ContactWarning):
    """The contact solver stopped at ``max_iterations`` before reaching ``tol``; the message gives the residuals."""


class ContactProblem(NamedTuple):
    """Result of :func:`contact_problem` (shapes for one state; leading batch axes as the inputs).

    ``a`` (nv): the free acceleration ``H^-1 (tau - C)``; ``J`` (m, nv): the contact Jacobian in
    the contact frames (``m = 3 len(contacts)``, rows ``[t_x, t_y, n]`` per contact); ``JMinv``
    (m, nv): ``J H^-1``; ``G`` (m, m): the Delassus matrix ``J H^-1 J^T``; ``gap`` (nc): the
    signed distance of each contact point from its plane [m] (negative: penetration).
    """

    a: np.ndarray
    J: np.ndarray
    JMinv: np.ndarray
    G: np.ndarray
    gap: np.ndarray


class ContactResiduals(NamedTuple):
    """Residuals of a contact solution (see the module docstring), each (...) (the batch shape)."""

    primal: np.ndarray
    dual: np.ndarray
    complementarity: np.ndarray


class ContactStep(NamedTuple):
    """Result of :func:`contact_step` (batch shape ``...`` of the inputs).

    ``q`` (..., nq), ``v`` (..., nv): the next state; ``impulses`` (..., nc, 3): the contact
    impulses on the robot over the step [N s], contact frame ``[t_x, t_y, n]``; ``modes``
    (..., nc): ``"open"``, ``"stick"`` or ``"slide"``; ``residuals``: a :class:`~sparsedyn.contact.friction_problem.ContactResiduals`;
    ``iterations`` (...): solver iterations.
    """

    q: np.ndarray
    v: np.ndarray
    impulses: np.ndarray
    modes: np.ndarray
    residuals: ContactResiduals
    iterations: np.ndarray


class Rollout(NamedTuple):
    """Result of :func:`rollout`: ``q`` (steps + 1, ..., nq), ``v`` (steps + 1, ..., nv), ``impulses``
    (steps, ..., nc, 3), ``modes`` (steps, ..., nc), ``iterations`` (steps, ...)."""

    q: np.ndarray
    v: np.ndarray
    impulses: np.ndarray
    modes: np.ndarray
    iterations: np.ndarray


class StepArrays(NamedTuple):
    """Result of :func:`contact_step_kernel` (leading batch axes as the inputs): ``q_next`` (nq),
    ``v_next`` (nv), ``impulses`` (nc, 3), ``velocities`` (nc, 3) (``u = G lambda + g``, contact
    frames), ``report`` (8): primal, dual and complementarity residuals, iterations, converged
    (1 or 0), impulse and velocity scales, whether a point penetrated (1: the position was corrected)."""

    q_next: np.ndarray
    v_next: np.ndarray
    impulses: np.ndarray
    velocities: np.ndarray
    report: np.ndarray


# --- the contact set: structure -------------------------------------------------------------------

def point_contacts(model, contacts, who="contacts", friction=False):
    """``contacts`` as a tuple of point contacts (:class:`~sparsedyn.sensors.Contact` with
    ``kind="3d"``), checked against ``model``; with ``friction``, each must have ``friction > 0``."""
    if isinstance(contacts, Contact):
        contacts = (contacts,)
    try:
        contacts = tuple(contacts)
    except TypeError:
        raise TypeError(f"{who}: expected a sequence of Contact objects, got {contacts!r}") from None
    for c in contacts:
        if not isinstance(c, Contact):
            raise TypeError(f"{who}: expected Contact objects (kind='3d', friction=mu), got {c!r}")
        if c.kind != "3d":
            raise ValueError(f"{who}: {c!r} is a {c.kind} contact; one-sided frictional contact is a point: "
                             "kind='3d'")
        try:
            model.frame(c.frame)
        except (KeyError, IndexError) as e:
            raise UnknownNameError(f"{who}: contact {c.name!r}: {e}") from None
        if friction and (c.friction is None or not c.friction > 0):
            raise ValueError(f"{who}: contact {c.name!r} needs a friction coefficient friction > 0, got "
                             f"{c.friction!r} (bilateral contacts: sparsedyn.contact_dynamics)")
    return tuple(contacts)


def contact_basis(contact):
    """``(R, n, offset)``: the contact frame's axes (3, 3) as columns ``[t_x, t_y, n]`` in the world,
    the plane's unit normal (3,) and its offset along it (the plane is ``n . x = offset``)."""
    normal, offset = contact.plane if contact.plane is not None else ((0.0, 0.0, 1.0), 0.0)
    normal = np.asarray(normal, float)
    size = np.linalg.norm(normal)
    n = normal / size
    e = np.eye(3)[0] if abs(n[0]) < 0.9 else np.eye(3)[1]
    tx = e - (e @ n) * n
    tx = tx / np.linalg.norm(tx)
    return np.stack([tx, np.cross(n, tx), n], -1), n, float(offset) / size


def _m(model, contacts, **_):
    return 3 * len(tuple(contacts))


def _nc(model, contacts, **_):
    return len(tuple(contacts))


def _out(x, shape, tail):
    return np.broadcast_to(x, shape + tail).copy()


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional={"f_ext": ("nb", 6), "gravity": (3,)},
        static=("contacts",), sequences=("contacts",),
        outputs={"a": ("nv",), "J": (_m, "nv"), "JMinv": (_m, "nv"), "G": (_m, _m), "gap": (_nc,)},
        result=ContactProblem)
def contact_problem(model, q, v, tau, contacts, *, f_ext=None, gravity=None):
    """The per-state pieces of a one-sided contact step (a :class:`ContactProblem`).

    ``q`` (..., nq), ``v``/``tau`` (..., nv); ``contacts``: point contacts (``kind="3d"``; their
    ``point`` and ``plane``; friction plays no part here).  One straight-line program::

        H = L^T D L            CRBA and the branch-sparse LTDL factorization
        a = H^-1 (tau - C)     the free acceleration
        J                      rows of the contact points' velocities, contact frames [t_x, t_y, n]
        Y = L^-T J^T,  G = Y D^-1 Y^T,  J H^-1 = (L^-1 D^-1 Y)^T
        gap = n . (o + R p) - offset

    ``f_ext`` (..., NB, 6) and ``gravity`` (3,) as in :func:`~sparsedyn.aba`.
    """
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    contacts = point_contacts(model, contacts, "contact_problem")
    nv, nc = model.nv, len(contacts)
    lam = dof_lambda(model)
    Xup, S = joint_transforms(model, q)
    H = crba_kernel(model, q)
    L, D = ltdl(lam, H, None if symbolic else ltdl_checker(model, H))
    a = ltdl_solve(lam, L, D, tau - bias_kernel(model, q, v, f_ext, g))
    if not nc:
        z = np.zeros(shape + (0, nv))
        return ContactProblem(_out(a, shape, (nv,)), z, z.copy(), np.zeros(shape + (0, 0)), np.zeros(shape + (0,)))
    frames = list(dict.fromkeys(model.frame(c.frame) for c in contacts))
    J6 = contact_jacobian(model, Xup, S, tuple(Contact(k, "6d") for k in frames))
    X0 = world_transforms(model, Xup)
    rows, gaps = [], []
    for c in contacts:
        k = model.frame(c.frame)
        Jf = J6[..., 6 * frames.index(k):6 * frames.index(k) + 6, :]
        R, o = pose(frame_world_transform(model, X0, k))         # frame -> world, frame origin
        Jp, x = Jf[..., 3:, :], o
        if c.point is not None:
            p = np.asarray(c.point, float)
            Jp = Jp - skew(p) @ Jf[..., :3, :]                    # v_p = v_o + omega x p
            x = o + (R @ p)
        Rc, n, offset = contact_basis(c)
        rows.append((Rc.T @ R) @ Jp)
        gaps.append(x @ n - offset)
    J = np.concatenate(rows, -2)
    Y = mpyLit(lam, L[..., None, :, :], J, unit=True)
    YD = Y / D[..., None, :]
    JMinv = mpyLi(lam, L[..., None, :, :], YD, unit=True)
    G = YD @ np.swapaxes(Y, -1, -2)
    gap = np.stack([np.broadcast_to(x, shape) for x in gaps], -1)
    return ContactProblem(_out(a, shape, (nv,)), _out(J, shape, (3 * nc, nv)), _out(JMinv, shape, (3 * nc, nv)),
                          _out(G, shape, (3 * nc, 3 * nc)), gap)


# --- cones ------------------------------------------------------------------------------------------

def project_cone(x, mu):
    """Projection of ``x`` (..., nc, 3) ``[t_x, t_y, n]`` onto the cones ``|t| <= mu n`` (mu (nc,))."""
    t, n = x[..., :2], x[..., 2]
    r = np.sqrt(np.sum(t * t, -1))
    inside = r <= mu * n
    below = mu * r <= -n
    n_b = (mu * r + n) / (1.0 + mu * mu)                        # onto the boundary
    scale = np.where(r > 0, mu * n_b / np.where(r > 0, r, 1.0), 0.0)
    out = np.concatenate([t * scale[..., None], n_b[..., None]], -1)
    out = np.where(inside[..., None], x, out)
    return np.where(below[..., None], 0.0, out)


def _desaxce(u, mu):
    """``u + Phi(u)``: the normal entry of each contact velocity (..., nc, 3) raised by ``mu |u_t|``."""
    s = np.zeros_like(u)
    s[..., 2] = mu * np.sqrt(np.sum(u[..., :2] ** 2, -1))
    return u + s


def _shift(y, mu):
    """De Saxcé's shift ``s`` (B, m) taken from the ADMM multiplier ``y`` (B, m), the iterate's estimate
    of ``-(u + Phi(u))``: zero but the normal entries, ``mu |y_t|`` (taken from the multiplier rather
    than from ``G z + g``, the iteration converges on redundant contact sets too, where ``G`` is
    singular; Carpentier, Le Lidec, Montaut 2024 shift by their dual variable likewise)."""
    yt = y.reshape(y.shape[0], -1, 3)
    s = np.zeros_like(yt)
    s[..., 2] = mu * np.sqrt(yt[..., 0] ** 2 + yt[..., 1] ** 2)
    return s.reshape(y.shape)


def _residuals(lam, x, G, g, mu):
    """``(primal, dual, complementarity)`` (B,) of impulses ``lam`` (B, nc, 3) and the ADMM ``x``."""
    B, nc = lam.shape[:2]
    u = (G @ lam.reshape(B, -1, 1)).reshape(B, nc, 3) + g.reshape(B, nc, 3)
    w = _desaxce(u, mu)
    dual = np.max(np.linalg.norm(w - project_cone(w, 1.0 / mu), axis=-1), -1)      # K_mu* = K_(1/mu)
    comp = np.max(np.abs(np.sum(lam * w, -1)), -1)
    primal = np.max(np.abs(x - lam).reshape(B, -1), -1)
    return primal, dual, comp, u


def _scales(G, g, lam):
    """Impulse and velocity scales (B,) of the problems, the stopping tests are relative to them:
    the largest impulse (at least 1e-4 of the one that would stop the free motion of a contact) and
    the largest free contact velocity ``|J v_free + b|``."""
    B = G.shape[0]
    dmax = np.max(np.diagonal(G, axis1=-2, axis2=-1), -1)
    gmax = np.max(np.abs(g), -1)
    lmax = np.max(np.abs(lam.reshape(B, -1)), -1)
    ls = np.maximum(lmax, 1e-4 * gmax / np.where(dmax > 0, dmax, 1.0))
    vs = np.where(gmax > 0, gmax, dmax * ls)
    tiny = np.finfo(float).tiny
    return np.maximum(ls, tiny), np.maximum(vs, tiny)


class _Solution(NamedTuple):
    lam: np.ndarray        # (B, nc, 3)
    u: np.ndarray          # (B, nc, 3)
    primal: np.ndarray
    dual: np.ndarray
    comp: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    vscale: np.ndarray
    lscale: np.ndarray


def _converged(res, ls, vs, tol):
    primal, dual, comp = res[:3]
    return (primal <= tol * ls) & (dual <= tol * vs) & (comp <= tol * ls * vs)


def solve_admm(G, g, mu, lam0, tol, max_iterations):
    """ADMM on the contact NCP with De Saxcé's correction (module docstring); batched over B.

    ``G`` (B, m, m), ``g`` (B, m), ``mu`` (nc,), ``lam0`` (B, nc, 3) the warm start."""
    B, m = g.shape
    nc = m // 3
    ev, V = np.linalg.eigh(G)
    ev = np.maximum(ev, 0.0)
    lmax = np.maximum(ev[:, -1], np.finfo(float).tiny)
    eta = PROXIMAL * lmax                                       # proximal term
    rho = np.sqrt(np.maximum(ev[:, 0], RHO_FLOOR * lmax) * lmax)     # sqrt(lambda_min lambda_max)
    z = project_cone(lam0, mu).reshape(B, m)
    x = z.copy()
    y = -_desaxce((G @ z[..., None])[..., 0].reshape(B, nc, 3) + g.reshape(B, nc, 3), mu).reshape(B, m)
    it = np.zeros(B, int)
    done = np.zeros(B, bool)
    res = _residuals(z.reshape(B, nc, 3), x.reshape(B, nc, 3), G, g, mu)
    ls, vs = _scales(G, g, z)
    done = _converged(res, ls, vs, tol)
    for k in range(max_iterations):
        if done.all():
            break
        a = ~done
        Ga, ga, Va, eva = G[a], g[a], V[a], ev[a]
        za, xa, ya, rhoa, etaa = z[a], x[a], y[a], rho[a], eta[a]
        s = _shift(ya, mu)
        rhs = -(ga + s) + etaa[:, None] * xa + rhoa[:, None] * za - ya
        xa = (Va @ ((np.swapaxes(Va, -1, -2) @ rhs[..., None])[..., 0] / (eva + (etaa + rhoa)[:, None]))[..., None])[..., 0]
        z_old = za
        xr = RELAX * xa + (1.0 - RELAX) * z_old                    # over-relaxation
        za = project_cone((xr + ya / rhoa[:, None]).reshape(-1, nc, 3), mu).reshape(-1, m)
        ya = ya + rhoa[:, None] * (xr - za)
        # adaptive rho: residual balancing, normalised as in OSQP (Stellato et al., "OSQP: an operator
        # splitting solver for quadratic programs", 2020)
        tiny = np.finfo(float).tiny
        rp = np.max(np.abs(xa - za), -1) / np.maximum(np.maximum(np.abs(xa).max(-1), np.abs(za).max(-1)), tiny)
        rd = rhoa * np.max(np.abs(za - z_old), -1) / np.maximum(np.maximum(
            np.abs(ya).max(-1), np.abs(ga + s).max(-1)), tiny)
        ratio = np.sqrt(np.where((rp > 0) & (rd > 0), rp / np.where(rd > 0, rd, 1.0), 1.0))
        rhoa = np.where((ratio > 3) | (ratio < 1 / 3), rhoa * ratio, rhoa)
        rhoa = np.clip(rhoa, 1e-8 * lmax[a], 1e8 * lmax[a])
        z[a], x[a], y[a], rho[a] = za, xa, ya, rhoa
        it[a] = k + 1
        r = _residuals(za.reshape(-1, nc, 3), xa.reshape(-1, nc, 3), Ga, ga, mu)
        lsa, vsa = _scales(Ga, ga, za)
        idx = np.flatnonzero(a)
        done[idx] = _converged(r, lsa, vsa, tol)
    return _finish(G, g, mu, z.reshape(B, nc, 3), x.reshape(B, nc, 3), it, tol)


def solve_pgs(G, g, mu, lam0, tol, max_iterations):
    """Projected Gauss-Seidel on Coulomb's law (contact by contact: the normal impulse from the normal
    velocity, then the tangential one projected onto the friction disc); batched over B."""
    B, m = g.shape
    nc = m // 3
    lam = project_cone(lam0, mu).reshape(B, m).copy()
    it = np.zeros(B, int)
    tiny = np.finfo(float).tiny
    for k in range(max_iterations + 1):
        res = _residuals(lam.reshape(B, nc, 3), lam.reshape(B, nc, 3), G, g, mu)
        ls, vs = _scales(G, g, lam)
        if _converged(res, ls, vs, tol).all() or k == max_iterations:
            break
        for i in range(nc):
            t, n = slice(3 * i, 3 * i + 2), 3 * i + 2
            u = (G[:, 3 * i:3 * i + 3, :] @ lam[..., None])[..., 0] + g[:, 3 * i:3 * i + 3]
            Gnn = np.maximum(G[:, n, n], tiny)
            ln = np.maximum(lam[:, n] - u[:, 2] / Gnn, 0.0)
            ut = u[:, :2] + G[:, t, n] * (ln - lam[:, n])[:, None]
            lam[:, n] = ln
            Gtt = G[:, t, t]
            step = 1.0 / np.maximum(np.linalg.eigvalsh(Gtt)[:, -1], tiny)
            lt = lam[:, t] - step[:, None] * ut
            r = np.linalg.norm(lt, axis=-1)
            lam[:, t] = lt * np.where(r > mu[i] * ln, mu[i] * ln / np.maximum(r, tiny), 1.0)[:, None]
        it[:] = k + 1
    return _finish(G, g, mu, lam.reshape(B, nc, 3), lam.reshape(B, nc, 3), it, tol)


def _finish(G, g, mu, lam, x, it, tol):
    primal, dual, comp, u = _residuals(lam, x, G, g, mu)
    ls, vs = _scales(G, g, lam)
    ok = _converged((primal, dual, comp), ls, vs, tol)
    return _Solution(lam, u, primal, dual, comp, it, ok, vs, ls)


#: Penetration [m] below which the configuration is left as it is (rounding of a resting contact).
PENETRATION_SLOP = 1e-9

#: ADMM iterations before a state that has not converged is handed to projected Gauss-Seidel (rare:
#: a few states in a thousand random solo12 steps).
ADMM_BUDGET = 300

#: ADMM's proximal term and the floor of the smallest eigenvalue in its first penalty, relative to
#: the largest eigenvalue of the Delassus matrix.
PROXIMAL, RHO_FLOOR = 1e-8, 1e-4

#: ADMM's over-relaxation factor (1: none; 1.5 to 1.8 usually speeds it up).
RELAX = 1.6

_SOLVE = {"admm": solve_admm, "pgs": solve_pgs}


def _nonneg_lcp(A, c, max_iterations=1000, rtol=1e-6):
    """``x >= 0 ⊥ A x + c >= 0`` for PSD ``A`` (B, k, k) by ADMM, to ``rtol`` of ``max(-c)`` (the
    split-impulse position correction)."""
    B, k = c.shape
    ev, V = np.linalg.eigh(A)
    ev = np.maximum(ev, 0.0)
    lmax = np.maximum(ev[:, -1:], np.finfo(float).tiny)
    rho = lmax.copy()
    x = z = y = np.zeros((B, k))
    scale = np.max(np.maximum(-c, 0.0), -1)
    for _ in range(max_iterations):
        rhs = -c + rho * z - y
        x = (V @ ((np.swapaxes(V, -1, -2) @ rhs[..., None])[..., 0] / (ev + rho + 1e-10 * lmax))[..., None])[..., 0]
        z_old, z = z, np.maximum(x + y / rho, 0.0)
        y = y + rho * (x - z)
        w = (A @ z[..., None])[..., 0] + c
        if np.all(np.max(np.maximum(-w, 0.0), -1) <= rtol * scale) and \
                np.all(np.abs(z - z_old).max(-1) <= rtol * np.abs(z).max(-1)):
            break
    return z


# --- the NumPy reference of the whole step (vectorised over a batch of states) ---------------------

def _model_and_kernels(model, who):
    """``(model, where the kernels run)``: a :class:`~sparsedyn.Model` runs them itself; a compiled
    model (``sd.compile(model)``) runs its compiled kernels."""
    inner = getattr(model, "model", None)
    if inner is not None and getattr(type(model), "__sparsedyn_kernel__", None) is not None:
        return inner, model
    return model, model


def _numpy_step(kernels, q, v, tau, contacts, dt, tol, max_iterations, margin, solver, f_ext, gravity, warm_start):
    """The step on the NumPy solvers, vectorised over the batch (a :class:`StepArrays`)."""
    model, kernels = _model_and_kernels(kernels, "contact_step")
    contacts = point_contacts(model, contacts, "contact_step", friction=True)
    nc, nv = len(contacts), model.nv
    P = contact_problem(kernels, q, v, tau, contacts, f_ext=f_ext, gravity=gravity)
    v_free = v + dt * P.a
    shape = v_free.shape[:-1]
    qb = np.broadcast_to(q, shape + (model.nq,))
    B = int(np.prod(shape, dtype=int))
    m = 3 * nc
    if not B:                                    # an empty batch
        z = np.zeros(shape + (nc, 3))
        return StepArrays(qb.copy(), v_free, z, z.copy(), np.zeros(shape + (8,)))
    G = P.G.reshape(B, m, m)
    gap = P.gap.reshape(B, nc)
    bias = np.zeros((B, nc, 3))
    bias[..., 2] = np.maximum(gap, 0.0) / dt                     # speculative contact: close the gap, no more
    gvec = (P.J.reshape(B, m, nv) @ v_free.reshape(B, nv, 1))[..., 0] + bias.reshape(B, m)
    mu = np.array([c.friction for c in contacts])
    lam0 = np.broadcast_to(warm_start, shape + (nc, 3)).reshape(B, nc, 3)
    # a contact that stays above the plane by more than the margin even if it keeps its free normal
    # velocity is open: its rows leave the problem (zero rows of G and g keep its impulse at zero)
    closing = np.maximum(0.0, -(gvec.reshape(B, nc, 3)[..., 2] - bias[..., 2]))
    active = np.repeat(gap - dt * closing <= margin, 3, -1).astype(float)
    G, gvec, lam0 = G * active[:, :, None] * active[:, None, :], gvec * active, lam0 * active.reshape(B, nc, 3)
    first = min(int(max_iterations), ADMM_BUDGET) if solver == "admm" else int(max_iterations)
    sol = _SOLVE[solver](G, gvec, mu, lam0, tol, first)
    if solver == "admm" and not sol.converged.all():            # ADMM stalled: finish with Gauss-Seidel
        bad = np.flatnonzero(~sol.converged)
        redo = solve_pgs(G[bad], gvec[bad], mu, sol.lam[bad], tol, 10 * int(max_iterations))
        redo = redo._replace(iterations=redo.iterations + sol.iterations[bad])
        sol = _Solution(*(_merge(a, b, bad) for a, b in zip(sol, redo)))
    lam = sol.lam
    v_next = v_free.reshape(B, nv) + (lam.reshape(B, 1, m) @ P.JMinv.reshape(B, m, nv))[:, 0]
    dq = dt * v_next
    rows = np.flatnonzero(np.any(gap < -PENETRATION_SLOP, -1))
    if rows.size:
        dq[rows] += dt * _correction(P.JMinv.reshape(B, m, nv)[rows], G[rows], gap[rows], dt)
    q_next = integrate(kernels, qb.reshape(B, model.nq), dq)
    report = np.stack([sol.primal, sol.dual, sol.comp, sol.iterations, sol.converged, sol.lscale, sol.vscale,
                       np.any(gap < -PENETRATION_SLOP, -1)], -1).astype(float)
    return StepArrays(q_next.reshape(shape + (model.nq,)), v_next.reshape(shape + (nv,)), lam.reshape(shape + (nc, 3)),
                      sol.u.reshape(shape + (nc, 3)), report.reshape(shape + (8,)))


def _merge(a, b, idx):
    out = a.copy()
    out[idx] = b
    return out


def _correction(JMinv, G, gap, dt):
    """Pseudo-velocity (B, nv) that lifts the penetrating points onto their planes (split impulse):
    normal impulses ``l >= 0 ⊥ G_nn l + gap / dt >= 0``, applied through ``H^-1 J_n^T``."""
    nrm = np.arange(gap.shape[-1]) * 3 + 2
    lam = _nonneg_lcp(G[:, nrm[:, None], nrm[None, :]], gap / dt)
    return (lam[:, None, :] @ JMinv[:, nrm, :])[:, 0]


def _modes(lam, u, lscale, vscale, tol):
    """``"open"`` where the normal impulse is zero, ``"stick"`` where the tangential velocity is, else
    ``"slide"``: impulses ``lam`` and velocities ``u`` (..., nc, 3), scales (...)."""
    open_ = lam[..., 2] <= tol * lscale[..., None]
    stick = u[..., 0] ** 2 + u[..., 1] ** 2 <= (100 * tol * vscale[..., None]) ** 2
    return _MODE_NAMES[np.where(open_, 2, stick.astype(np.intp))]


_MODE_NAMES = np.array(["slide", "stick", "open"])
