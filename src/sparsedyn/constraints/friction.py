"""One-sided frictional contact and time stepping: robots that touch the world.

A one-sided contact (:class:`~sparsedyn.sensors.Contact` with ``kind="3d"``, ``friction=mu``,
``point=p``, ``plane=(n, offset)``) is a point ``p`` fixed in a frame of the robot (frame axes;
default the frame's origin) against the plane ``{x : n . x = offset}`` (default the ground z = 0)
with Coulomb friction ``mu``.  Its *contact frame* has z along the plane's unit normal and x, y
tangent (world x and y for a horizontal plane; otherwise x is the world x axis, or y if x is
nearly normal, projected onto the plane, and y = z cross x).  Impulses and contact velocities are
expressed in it, three numbers per contact ``[t_x, t_y, n]``, applied *on the robot*.

**The step** (semi-implicit Euler, velocity level, as Moreau's time stepping; Stewart and
Trinkle, "An implicit time-stepping scheme for rigid body dynamics with inelastic collisions
and Coulomb friction", 1996)::

    v_free = v + dt H^-1 (tau - C(q, v))              free motion (CRBA, branch-sparse LTDL)
    u      = J v_free + b + G lambda                  contact velocities after the step
    G      = J H^-1 J^T                               the Delassus matrix (m x m, m = 3 contacts)
    v+     = v_free + H^-1 J^T lambda,     q+ = q (+) dt v+

where ``b`` is zero but for the normal entry of a contact above the plane: ``gap / dt``
(a *speculative* contact: the point may close its gap within the step, not more, so a contact
above the plane by more than it can travel in ``dt`` is open, and a falling robot does not pass
through the ground).  ``lambda`` solves the nonlinear complementarity problem of Coulomb's law
with De Saxcé's correction ``Phi(u) = [0, 0, mu |u_t|]`` (exact Coulomb friction: maximal
dissipation, no spurious normal velocity while sliding; De Saxcé and Feng, "The bipotential
method", 1998)::

    K_mu  ∋  lambda   ⊥   u + Phi(u)  ∈  K_mu*         per contact, K_mu = {|l_t| <= mu l_n}

**The solver** is ADMM on this problem (Carpentier, Le Lidec, Montaut, "From compliant to rigid
contact simulation: a unified and efficient approach", 2024): the x-step solves
``(G + (eta + rho) I) x = -(g + s) + eta x_prev + rho z - y`` with the proximal term ``eta``, the
z-step projects onto the friction cones, De Saxcé's shift ``s = [0, 0, mu |y_t|]`` is taken from the
multiplier ``y`` (the iterate's estimate of ``-(u + Phi(u))``; taken from ``G z + g`` instead, the
iteration stalls on redundant contact sets such as eight sole corners, where ``G`` is singular), and
the penalty ``rho`` adapts to the ratio of primal and dual residuals.  A state that ADMM has not
solved in ``ADMM_BUDGET`` iterations continues with projected Gauss-Seidel, which is also the
option ``solver="pgs"``.

The iteration count depends on the values, so the whole step is an *iterative kernel*
(:mod:`sparsedyn.symbolic.loop`), :func:`contact_step_kernel`: straight-line stages (the problem
with :func:`contact_problem`; ``(G + (eta + rho) I)^-1`` from its Cholesky factor, again when
``rho`` changes; one ADMM iteration; one Gauss-Seidel sweep; one sweep of the position correction;
the next state) that the compiler runs in a loop steered by the stages' flags: one native call per
state, a batch state by state on the batch runtime's threads.  Its NumPy reference (under
``sd.use_backend("numpy")``) diagonalises ``G`` once per state (``np.linalg.eigh``, so a new
``rho`` costs nothing) and runs ADMM vectorised over a batch of states.

**Penetration** (left by the linearised kinematics of a rotating body, or by solver tolerance)
is removed from the *configuration only*: a normal pseudo-velocity ``dv = H^-1 J_n^T lambda'``
with ``lambda' >= 0 ⊥ G_nn lambda' + gap / dt >= 0`` moves the penetrating points back onto the
plane (the split-impulse method of position correction), and ``v+`` is left as the contact
solution made it; so the correction adds no kinetic energy (the potential energy it returns is
the one the penetration took).

Residuals of a solution ``lambda`` (the largest over the contacts): ``primal`` the ADMM consensus
``|x - z|`` [N s] (0 for PGS, whose iterates are in the cones), ``dual`` the distance of
``u + Phi(u)`` from the dual cone [m/s], ``complementarity`` ``|lambda . (u + Phi(u))|`` [J].  The
solve stops when they are below ``tol`` times the impulse scale (the largest impulse), the velocity
scale (the largest free contact velocity ``|J v_free + b|``) and their product.
"""

from __future__ import annotations

import warnings
from typing import Callable, NamedTuple

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.configuration import integrate
from ..algorithms.crba import bias_kernel, crba_kernel
from ..algorithms.fd import ltdl_checker
from ..algorithms.kinematics import _frame_world_transform, joint_transforms, world_transforms
from ..algorithms.ltdl import dof_lambda, ltdl, ltdl_solve, mpyLi, mpyLit
from ..kernels import kernel, model_method
from ..model import UnknownNameError
from ..sensors import Contact
from ..spatial import pose, skew
from .contact import ContactWarning, contact_jacobian

__all__ = ["ContactProblem", "ContactStep", "StepArrays", "contact_step_kernel", "ContactResiduals",
           "ContactStepWarning", "Rollout", "contact_problem",
           "contact_step", "rollout", "point_contacts", "contact_basis", "SOLVERS"]

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
    (..., nc): ``"open"``, ``"stick"`` or ``"slide"``; ``residuals``: a :class:`ContactResiduals`;
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
        static=("contacts",),
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
        R, o = pose(_frame_world_transform(model, X0, k))         # frame -> world, frame origin
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



# --- the compiled step: the same method as straight-line stages of one iterative kernel -----------
#
# ADMM needs a value-dependent number of iterations, so the compiled step is an iterative kernel
# (:mod:`sparsedyn.symbolic.loop`): ``init`` computes the problem (contact_problem, free velocity,
# open contacts, scales, warm start), stage 0 inverts ``G + (eta + rho) I`` (Cholesky), stage 1
# runs one ADMM iteration with ADMM's own (cheap) residuals and asks for a new inverse when it changes
# ``rho``, stage 2 checks Coulomb's law itself (the residuals of the module docstring) when those are
# small, stage 3 continues a state that ADMM has not solved in ``ADMM_BUDGET`` iterations with
# Gauss-Seidel sweeps (as the NumPy path), stage 4 runs the position correction (projected
# Gauss-Seidel), ``finish`` gives the next state.  Every
# choice is arithmetic (``_step``, ``_relu`` from ``copysign``), so each stage is one traced program.

_TINY = 1e-300


def _abs(x):
    return bk.copysign(x, 1.0)


def _relu(x):
    return 0.5 * (x + _abs(x))


def _step(x):
    """1 where ``x >= 0``, else 0 (elementwise; ``-0.0`` counts as negative)."""
    return 0.5 * (1.0 + bk.copysign(1.0, x))


def _vmax(xs):
    """The largest of the values ``xs`` (a max without branching: ``a + relu(b - a)``)."""
    xs = list(np.asarray(xs, dtype=object).reshape(-1))
    while len(xs) > 1:                                          # pairwise: a short dependency chain
        xs = [a + _relu(b - a) for a, b in zip(xs[::2], xs[1::2])] + xs[len(xs) - len(xs) % 2:]
    return xs[0]


def _norms(t):
    """``|t|`` per row of ``t`` (k, 2)."""
    return bk.sqrt(t[:, 0] * t[:, 0] + t[:, 1] * t[:, 1])


def _proj(x, mu):
    """:func:`project_cone` of ``x`` (nc, 3) written without branches."""
    t, n = x[:, :2], x[:, 2]
    r = _norms(t)
    inside = _step(mu * n - r)
    nb = _relu((mu * r + n) / (1.0 + mu * mu))                # boundary, or the apex (0) below the dual cone
    scale = mu * nb / (r + _TINY)
    out = np.concatenate([t * scale[:, None], nb[:, None]], -1)
    return inside[:, None] * x + (1.0 - inside[:, None]) * out


def _traced_residuals(z, x, u, mu):
    """``(primal, dual, complementarity)`` of impulses ``z`` (nc, 3), the ADMM ``x`` and the contact
    velocities ``u = G z + g`` (nc, 3), as :func:`_residuals`."""
    w = u.copy()
    w[:, 2] = w[:, 2] + mu * _norms(u[:, :2])
    d = w - _proj(w, 1.0 / mu)
    dual = _vmax(bk.sqrt(np.sum(d * d, -1)))
    comp = _vmax(_abs(np.sum(z * w, -1)))
    return _vmax(_abs(x - z)), dual, comp


def _traced_scales(z, gmax, dmax):
    """:func:`_scales` of impulses ``z`` given ``max |g|`` and ``max diag G``."""
    tiny = np.finfo(float).tiny
    ls = _vmax([_vmax(_abs(z)), 1e-4 * gmax / (dmax + (1.0 - _step(dmax - tiny)))])
    vs = gmax + (1.0 - _step(gmax - tiny)) * dmax * ls
    return _vmax([ls, tiny]), _vmax([vs, tiny])


def _cholesky(A):
    """Lower Cholesky factor of the positive definite ``A`` (n, n): ``(rows, inverse diagonal)``, the
    rows as lists (row ``i`` has ``i`` entries left of the diagonal)."""
    n = A.shape[0]
    L, inv = [], []
    for i in range(n):
        row = []
        for j in range(i):
            s = A[i, j]
            for k in range(j):
                s = s - row[k] * L[j][k]
            row.append(s * inv[j])
        s = A[i, i]
        for k in range(i):
            s = s - row[k] * row[k]
        inv.append(1.0 / bk.sqrt(_relu(s) + _TINY))
        L.append(row)
    return L, inv


def _spd_inverse(A):
    """The inverse of the positive definite ``A`` (n, n) from its Cholesky factor ``A = L L^T``:
    ``L^-T L^-1`` (the x-step is then a product with independent rows, not two triangular solves
    whose every row waits for the previous one)."""
    L, inv = _cholesky(A)
    n = len(inv)
    Li = np.zeros((n, n), dtype=object)                         # L^-1, lower triangular
    for j in range(n):
        Li[j, j] = inv[j]
        for i in range(j + 1, n):
            s = 0
            for k in range(j, i):
                s = s + L[i][k] * Li[k, j]
            Li[i, j] = -inv[i] * s
    return Li.T @ Li


class _Layout:
    """Where things are in the iterative kernel's constant block ``K`` and loop state ``S``."""

    def __init__(self, nc, nv):
        m = 3 * nc
        self.nc, self.m, self.nv = nc, m, nv
        self.K = self._table([("G", m * m), ("g", m), ("JMinv", m * nv), ("v_free", nv), ("cn", nc), ("pen", 1),
                              ("eta", 1), ("lmax", 1), ("gmax", 1), ("dmax", 1)])
        self.S = self._table([("x", m), ("z", m), ("y", m), ("u", m), ("M", m * m), ("rho", 1), ("it", 1),
                              ("conv", 1), ("res", 3), ("ls", 1), ("vs", 1), ("l", nc), ("sweeps", 1)])

    @staticmethod
    def _table(items):
        out, k = {}, 0
        for n, size in items:
            out[n] = slice(k, k + size)
            k += size
        return out

    def unpack(self, table, arr):
        return {n: arr[s] for n, s in table.items()}

    def pack(self, table, parts):
        return np.concatenate([np.asarray(parts[n], dtype=object).reshape(-1) for n in table])


def _step_program(model, static, optional):
    """The :class:`~sparsedyn.symbolic.loop.LoopProgram` of :func:`contact_step_kernel` for
    ``static["contacts"]`` (the optional arrays ``optional`` as inputs)."""
    from ..symbolic.loop import trace_loop
    contacts = point_contacts(model, static["contacts"], "contact_step", friction=True)
    nc, nv, nq = len(contacts), model.nv, model.nq
    lay = _Layout(nc, nv)
    m = lay.m
    mu = np.array([c.friction for c in contacts])
    opt = [n for n in ("f_ext", "gravity") if n in optional]
    shapes = contact_step_kernel.__kernel__.shapes(model, contacts=contacts)
    inputs = [(n, shapes[n]) for n in ("q", "v", "tau", "settings", "warm_start")] + [(n, shapes[n]) for n in opt]
    outputs = [(n, shapes[n]) for n in contact_step_kernel.__kernel__.outputs]
    problem = contact_problem.__kernel__.fn
    advance = integrate.__kernel__.fn
    norm_rows = np.arange(nc) * 3 + 2

    def init(q, v, tau, settings, warm, *extra):
        dt, tol, _, margin = settings
        P = problem(model, q, v, tau, contacts, **dict(zip(opt, extra)))
        v_free = v + dt * P.a
        Jv = P.J @ v_free
        closing = _relu(-Jv[norm_rows])
        act = np.repeat(_step(margin - (P.gap - dt * closing)), 3)
        bias = np.zeros(m, dtype=object)
        bias[norm_rows] = _relu(P.gap) / dt
        g = (Jv + bias) * act
        G = P.G * act[:, None] * act[None, :]
        dmax = _vmax(np.diagonal(G))
        trace = np.sum(np.diagonal(G))
        gmax = _vmax(_abs(g))
        e = np.ones(m)                                            # the largest eigenvalue: power iteration
        for _ in range(POWER_STEPS):
            e = G @ e
            e = e / (bk.sqrt(e @ e) + _TINY)
        lmax = _vmax([bk.sqrt((G @ e) @ (G @ e)), dmax]) + _TINY
        z = _proj((warm * act.reshape(nc, 3)), mu).reshape(m)
        u = G @ z + g
        w = u.reshape(nc, 3).copy()
        w[:, 2] = w[:, 2] + mu * _norms(w[:, :2])
        y = -w.reshape(m)                                          # the multiplier of the NCP at z
        res = _traced_residuals(z.reshape(nc, 3), z.reshape(nc, 3), u.reshape(nc, 3), mu)
        ls, vs = _traced_scales(z, gmax, dmax)
        conv = _step(tol * ls - res[0]) * _step(tol * vs - res[1]) * _step(tol * ls * vs - res[2])
        pen = 1.0 - _step(PENETRATION_SLOP - _vmax(-P.gap))       # 1 where some point penetrates
        cn = (pen * P.gap + (1.0 - pen) * _abs(P.gap)) / dt
        K = lay.pack(lay.K, dict(G=G, g=g, JMinv=P.JMinv, v_free=v_free, cn=cn, pen=pen, eta=PROXIMAL * lmax, lmax=lmax,
                                 gmax=gmax, dmax=dmax))
        S = lay.pack(lay.S, dict(x=z, z=z, y=y, u=u, M=np.zeros(m * m), rho=RHO_START * trace / m + _TINY, it=0.0,
                                 conv=conv,
                                 res=res, ls=ls, vs=vs, l=np.zeros(nc), sweeps=0.0))
        return K, S

    def factorize(q, v, tau, settings, warm, *rest):
        K, S = lay.unpack(lay.K, rest[-2]), lay.unpack(lay.S, rest[-1])
        G = K["G"].reshape(m, m)
        c = K["eta"][0] + S["rho"][0]
        S["M"] = _spd_inverse(G + c * np.eye(m))
        return lay.pack(lay.S, S), 1.0 + 3.0 * S["conv"][0]        # converged already: skip the iterations

    def iterate(q, v, tau, settings, warm, *rest):
        _, tol, max_it, _ = settings
        K, S = lay.unpack(lay.K, rest[-2]), lay.unpack(lay.S, rest[-1])
        g, eta, lmax, rho = K["g"], K["eta"][0], K["lmax"][0], S["rho"][0]
        x, z, y = S["x"], S["z"], S["y"]
        s = np.zeros(m, dtype=object)
        s[norm_rows] = mu * _norms(y.reshape(nc, 3)[:, :2])      # De Saxcé's shift from the multiplier (_shift)
        xn = S["M"].reshape(m, m) @ (-(g + s) + eta * x + rho * z - y)
        xr = RELAX * xn + (1.0 - RELAX) * z                          # over-relaxation
        zn = _proj((xr + y / rho).reshape(nc, 3), mu).reshape(m)
        yn = y + rho * (xr - zn)
        # ADMM's own residuals (cheap): primal |x - z| [N s], dual rho |z - z_prev| [m/s]; below the
        # tolerance they send the iterate to the stage that checks Coulomb's law itself
        primal, dual = _vmax(_abs(xn - zn)), rho * _vmax(_abs(zn - z))
        zmax, ymax = _vmax(_abs(zn)), _vmax(_abs(yn))
        ls = _vmax([zmax, 1e-4 * K["gmax"][0] / (K["dmax"][0] + _TINY)])
        check = _step(tol * ls - primal) * _step(tol * (K["gmax"][0] + ymax) - dual)
        it = S["it"][0] + 1.0
        budget = max_it - _relu(max_it - ADMM_BUDGET)               # min(max_iterations, ADMM_BUDGET)
        out = (1.0 - check) * _step(it - budget)
        # adaptive rho (residual balancing as in solve_admm); a new rho needs a new inverse
        gs_max = _vmax(_abs(g + s))
        rp, rd = primal / _vmax([zmax, _vmax(_abs(xn)), ls]), dual / (_vmax([ymax, gs_max]) + _TINY)
        valid = _step(rp - _TINY) * _step(rd - _TINY)
        ratio = valid * bk.sqrt(rp / (rd + (1.0 - valid))) + (1.0 - valid)
        change = (_step(ratio - RHO_RATIO) + _step(1.0 / RHO_RATIO - ratio)) * (1.0 - check) * (1.0 - out)
        new = rho * (change * ratio + (1.0 - change))
        hi, lo = RHO_RANGE[1] * lmax, RHO_RANGE[0] * lmax
        new = lo + _relu(hi - _relu(hi - new) - lo)                 # clipped to [lo, hi] without cancellation
        S.update(x=xn, z=zn, y=yn, rho=new, it=it)
        # small residuals: check (+1); out of iterations: Gauss-Seidel (+2); new rho: invert again (-1)
        return lay.pack(lay.S, S), check + 2.0 * out - change

    def check(q, v, tau, settings, warm, *rest):
        _, tol, max_it, _ = settings
        K, S = lay.unpack(lay.K, rest[-2]), lay.unpack(lay.S, rest[-1])
        G, g, x, z = K["G"].reshape(m, m), K["g"], S["x"], S["z"]
        u = G @ z + g
        res = _traced_residuals(z.reshape(nc, 3), x.reshape(nc, 3), u.reshape(nc, 3), mu)
        ls, vs = _traced_scales(z, K["gmax"][0], K["dmax"][0])
        conv = _step(tol * ls - res[0]) * _step(tol * vs - res[1]) * _step(tol * ls * vs - res[2])
        budget = max_it - _relu(max_it - ADMM_BUDGET)
        out = (1.0 - conv) * _step(S["it"][0] - budget)
        S.update(u=u, conv=conv, res=res, ls=ls, vs=vs)
        # converged: past Gauss-Seidel (+2); out of iterations: Gauss-Seidel (+1); else iterate on (-1)
        return lay.pack(lay.S, S), 2.0 * conv + out - (1.0 - conv) * (1.0 - out)

    def gauss_seidel(q, v, tau, settings, warm, *rest):
        _, tol, max_it, _ = settings
        K, S = lay.unpack(lay.K, rest[-2]), lay.unpack(lay.S, rest[-1])
        G, g = K["G"].reshape(m, m), K["g"]
        lam = list(S["z"])
        for i in range(nc):                                          # one sweep of solve_pgs
            t0, n = 3 * i, 3 * i + 2
            u = [sum(G[r, j] * lam[j] for j in range(m)) + g[r] for r in (t0, t0 + 1, n)]
            ln = _relu(lam[n] - u[2] / (_relu(G[n, n]) + _TINY))
            a, b, d = G[t0, t0], G[t0, t0 + 1], G[t0 + 1, t0 + 1]
            top = 0.5 * (a + d) + bk.sqrt(0.25 * (a - d) * (a - d) + b * b)    # largest eigenvalue of G_tt
            h = 1.0 / (_relu(top) + _TINY)
            lt = [lam[t0 + k] - h * (u[k] + G[t0 + k, n] * (ln - lam[n])) for k in range(2)]
            r = bk.sqrt(lt[0] * lt[0] + lt[1] * lt[1])
            cap = mu[i] * ln
            f = (cap + _TINY) / (_vmax([r, cap]) + _TINY)              # onto the friction disc
            lam[t0], lam[t0 + 1], lam[n] = lt[0] * f, lt[1] * f, ln
        lam = np.array(lam, dtype=object)
        u = G @ lam + g
        res = _traced_residuals(lam.reshape(nc, 3), lam.reshape(nc, 3), u.reshape(nc, 3), mu)
        ls, vs = _traced_scales(lam, K["gmax"][0], K["dmax"][0])
        conv = _step(tol * ls - res[0]) * _step(tol * vs - res[1]) * _step(tol * ls * vs - res[2])
        it = S["it"][0] + 1.0
        budget = max_it - _relu(max_it - ADMM_BUDGET)
        stop = 1.0 - (1.0 - conv) * (1.0 - _step(it - budget - 10.0 * max_it))
        S.update(x=lam, z=lam, u=u, it=it, conv=conv, res=res, ls=ls, vs=vs)
        return lay.pack(lay.S, S), stop

    def correct(q, v, tau, settings, warm, *rest):
        K, S = lay.unpack(lay.K, rest[-2]), lay.unpack(lay.S, rest[-1])
        G = K["G"].reshape(m, m)
        A = G[norm_rows[:, None], norm_rows[None, :]]
        c = K["cn"]
        l0 = S["l"]
        act = _step(np.diagonal(A) - _TINY)
        l = list(l0)
        for i in range(nc):                                          # one Gauss-Seidel sweep
            w = sum(A[i, j] * l[j] for j in range(nc)) + c[i]
            l[i] = _relu(l[i] - act[i] * w / (A[i, i] + (1.0 - act[i])))
        l = np.array(l, dtype=object)
        w = A @ l + c
        scale = _vmax(_relu(-c))
        sweeps = S["sweeps"][0] + 1.0
        done = _step(CORRECTION_RTOL * scale - _vmax(_relu(-w))) * \
            _step(CORRECTION_RTOL * _vmax(l) - _vmax(_abs(l - l0)))
        stop = 1.0 - (1.0 - done) * (1.0 - _step(sweeps - CORRECTION_SWEEPS))
        S.update(l=l, sweeps=sweeps)
        return lay.pack(lay.S, S), stop

    def finish(q, v, tau, settings, warm, *rest):
        dt = settings[0]
        K, S = lay.unpack(lay.K, rest[-2]), lay.unpack(lay.S, rest[-1])
        JMinv = K["JMinv"].reshape(m, nv)
        lam = S["z"]
        v_next = K["v_free"] + lam @ JMinv
        dq = dt * v_next + dt * (S["l"] @ JMinv[norm_rows])
        report = np.concatenate([S["res"], S["it"], S["conv"], S["ls"], S["vs"], K["pen"]])
        return advance(model, q, dq), v_next, lam.reshape(nc, 3), S["u"].reshape(nc, 3), report

    name = contact_step_kernel.__kernel__.variant({"contacts": contacts}, tuple(opt)).name
    return trace_loop(name, inputs, outputs, init, [factorize, iterate, check, gauss_seidel, correct], finish)


#: Power iterations for the largest eigenvalue of the Delassus matrix in the compiled step (the scale
#: of its proximal term and of the range of ``rho``).
POWER_STEPS = 8
#: The compiled step's first ADMM penalty relative to the mean eigenvalue of ``G`` (its trace over
#: its size), and the ratio of the scaled residuals beyond which it changes ``rho`` (and inverts again).
RHO_START, RHO_RATIO = 0.03, 3.0
#: The compiled step's range of ``rho`` relative to the largest eigenvalue of ``G`` (its inverse of
#: ``G + (eta + rho) I`` stays well conditioned).
RHO_RANGE = (1e-6, 1e6)
#: Sweeps and relative tolerance of the position correction's Gauss-Seidel in the compiled step.
CORRECTION_SWEEPS, CORRECTION_RTOL = 1000, 1e-6


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


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",), "settings": (4,), "warm_start": (_nc, 3)},
        optional={"f_ext": ("nb", 6), "gravity": (3,)}, static=("contacts",),
        outputs={"q_next": ("nq",), "v_next": ("nv",), "impulses": (_nc, 3), "velocities": (_nc, 3),
                 "report": (8,)},
        program=_step_program, result=StepArrays)
def contact_step_kernel(model, q, v, tau, settings, warm_start, contacts, *, f_ext=None, gravity=None):
    """:func:`contact_step` as arrays (a :class:`StepArrays`): the kernel that a compiled model runs
    as one native call per state (ADMM only; the iteration is an iterative kernel, see
    :mod:`sparsedyn.symbolic.loop`), and its NumPy reference (``solve_admm`` with the Gauss-Seidel
    fallback).  ``settings`` (..., 4): ``[dt, tol, max_iterations, margin]``; ``warm_start``
    (..., nc, 3); the rest as :func:`contact_step` (checked there)."""
    who = "contact_step_kernel"
    nc = len(point_contacts(getattr(model, "model", model), contacts, who, friction=True))
    settings = _checks.numeric("settings", settings, "(..., 4): [dt, tol, max_iterations, margin]")
    warm_start = _checks.numeric("warm_start", warm_start, f"(..., {nc}, 3) impulses")
    if settings.shape[-1:] != (4,) or warm_start.shape[-2:] != (nc, 3):
        raise ValueError(f"{who}: settings must have shape (..., 4) and warm_start (..., {nc}, 3); got "
                         f"{settings.shape} and {warm_start.shape}")
    s = settings.reshape(-1, 4)
    if not np.all(s == s[:1]) or not (s[0, 0] > 0 and s[0, 1] > 0 and s[0, 2] >= 1 and s[0, 3] > 0):
        raise ValueError(f"{who}: the NumPy path takes one settings vector [dt > 0, tol > 0, max_iterations >= 1, "
                         f"margin > 0] for the whole batch, got {settings}")
    dt, tol, max_it, margin = s[0]
    return _numpy_step(model, q, v, tau, contacts, dt, tol, int(max_it), margin, "admm", f_ext, gravity, warm_start)


# --- the step ------------------------------------------------------------------------------------

def _model_and_kernels(model, who):
    """``(model, where the kernels run)``: a :class:`~sparsedyn.Model` runs them itself; a compiled
    model (``sd.compile(model)``) runs its compiled kernels."""
    inner = getattr(model, "model", None)
    if inner is not None and getattr(type(model), "__sparsedyn_kernel__", None) is not None:
        return inner, model
    return model, model


_CHECKED: dict = {}


def _frictional(model, contacts, who):
    """:func:`point_contacts` with ``friction``, remembered for the last few (model, contacts) pairs
    (a step checks its contacts once per trajectory, not once per step)."""
    try:
        key = (id(model), tuple(contacts) if not isinstance(contacts, Contact) else (contacts,))
        hit = _CHECKED.get(key)
    except TypeError:
        key = hit = None
    if hit is not None and hit[0] is model:
        return hit[1]
    checked = point_contacts(model, contacts, who, friction=True)
    if key is not None:
        if len(_CHECKED) >= 64:
            _CHECKED.clear()
        _CHECKED[key] = (model, checked)
    return checked


def _positive(who, name, x):
    if type(x) is float and 0.0 < x < np.inf:
        return x
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not np.isfinite(x) or x <= 0:
        raise ValueError(f"{who}: {name} must be a finite number > 0, got {x!r}")
    return float(x)


@model_method
def contact_step(model, q, v, tau, contacts, dt, *, tol=1e-8, max_iterations=None, solver="admm", f_ext=None,
                 gravity=None, warm_start=None, margin=0.005):
    """One time step of a robot with one-sided frictional point contacts (a :class:`ContactStep`).

    ``model``: a :class:`~sparsedyn.Model` (the per-state kernel then takes the road of every plain
    call: native once built) or ``sd.compile(model)`` (compiled now; microseconds instead of the
    NumPy path's milliseconds);
    ``q`` (..., nq), ``v``/``tau`` (..., nv): the state and the joint forces held over the step;
    ``contacts``: point contacts ``Contact(frame, "3d", friction=mu, point=p, plane=(n, offset))``
    (``mu > 0``; ``point`` in the frame's axes, default its origin; ``plane`` default the ground
    z = 0); ``dt`` > 0 [s].  ``tol``: the residuals' stopping test, relative to the impulse and
    velocity scales of the problem (``max |lambda|`` and ``max |J v_free|``); ``max_iterations``
    (default 1000 for ADMM, 10000 for PGS): after it a :class:`ContactStepWarning` gives the
    residuals; ``solver``: ``"admm"`` (states that ADMM has not solved in ``ADMM_BUDGET``
    iterations continue with Gauss-Seidel, up to ``10 max_iterations`` sweeps) or ``"pgs"``; ``f_ext`` (..., NB, 6), ``gravity`` (3,) as in
    :func:`~sparsedyn.aba`; ``warm_start`` (..., nc, 3): impulses to start from (the previous
    step's ``impulses`` along a trajectory); ``margin`` [m]: a contact point that would stay higher
    than this above its plane at the end of the step if it kept its free velocity is open and left
    out of the solve.

    The next state is ``v+ = v + dt H^-1 (tau - C) + H^-1 J^T impulses``, ``q+ = q (+) dt v+`` (semi-implicit
    Euler), the impulses the solution of Coulomb's law with De Saxcé's correction; the method (and
    the position correction of a penetrating point) is in the module docstring.  With ``solver="admm"``
    the whole step is the kernel :func:`contact_step_kernel`: on a model (native by default, like the
    other plain calls) or ``sd.compile(model)`` one native call per state (a batch runs state by
    state on the batch runtime's threads), under ``sd.use_backend("numpy")`` the NumPy reference
    (ADMM vectorised over the batch, the Gauss-Seidel fallback).  ``solver="pgs"`` runs on NumPy.

    >>> import numpy as np, sparsedyn as sd
    >>> b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=1.0,
    ...                                      rot_inertia=np.eye(3) / 60)
    >>> model = b.add_frame("box", "box").build()
    >>> corners = [sd.Contact("box", "3d", friction=0.5, point=(x, y, -0.1), name=f"c{i}")
    ...            for i, (x, y) in enumerate([(-.1, -.1), (.1, -.1), (-.1, .1), (.1, .1)])]
    >>> q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    >>> step = sd.contact_step(model, q, np.zeros(6), np.zeros(6), corners, 1e-3)
    >>> bool(np.allclose(step.v, 0, atol=1e-10)), step.modes.tolist()
    (True, ['stick', 'stick', 'stick', 'stick'])
    """
    who = "contact_step"
    model, kernels = _model_and_kernels(model, who)
    contacts = _frictional(model, contacts, who)
    dt = _positive(who, "dt", dt)
    tol = _positive(who, "tol", tol)
    margin = _positive(who, "margin", margin)
    if solver not in _SOLVE:
        raise ValueError(f"{who}: solver must be one of {SOLVERS}, got {solver!r}")
    if max_iterations is None:
        max_iterations = 1000 if solver == "admm" else 10000
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)) or max_iterations < 1:
        raise ValueError(f"{who}: max_iterations must be an integer >= 1, got {max_iterations!r}")
    nc = len(contacts)
    if warm_start is not None:
        warm_start = _checks.numeric("warm_start", warm_start, f"impulses of shape (..., {nc}, 3)")
        if warm_start.shape[-2:] != (nc, 3) or not np.all(np.isfinite(warm_start)):
            raise ValueError(f"{who}: warm_start must be finite impulses of shape (..., {nc}, 3), got shape "
                             f"{warm_start.shape}")
    if not nc:
        q, v, tau, f_ext, _, _, _ = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau", "nv joint forces")
        P = contact_problem(kernels, q, v, tau, contacts, f_ext=f_ext, gravity=gravity)
        v_free = v + dt * P.a
        shape = v_free.shape[:-1]
        return ContactStep(integrate(kernels, np.broadcast_to(q, shape + (model.nq,)), dt * v_free), v_free,
                           np.zeros(shape + (0, 3)), np.zeros(shape + (0,), dtype="<U5"),
                           ContactResiduals(*(np.zeros(shape),) * 3), np.zeros(shape, int))
    # q, v, tau, f_ext and gravity are checked by the kernel (compiled or NumPy), as by every kernel
    warm = np.zeros((nc, 3)) if warm_start is None else warm_start
    if solver == "admm":
        out = contact_step_kernel(kernels, q, v, tau, np.array([dt, tol, float(max_iterations), margin]), warm,
                                  contacts, f_ext=f_ext, gravity=gravity)
    else:
        out = _numpy_step(kernels, q, v, tau, contacts, dt, tol, int(max_iterations), margin, solver, f_ext,
                          gravity, warm)
    finite = np.isfinite(out.v_next).all(-1) & np.isfinite(out.q_next).all(-1) & np.isfinite(out.report).all(-1)
    if not finite.all():                             # never a NaN: such a state is solved again on NumPy
        out = _refine(out, ~finite, kernels, q, v, tau, contacts, dt, tol, int(max_iterations), margin, f_ext,
                      gravity, warm)
    rep = out.report
    res = ContactResiduals(rep[..., 0], rep[..., 1], rep[..., 2])
    iterations = rep[..., 3].astype(int)
    converged = rep[..., 4] > 0.5
    if not converged.all():
        warnings.warn(f"{who}: the {solver} contact solver stopped after {iterations.max()} iterations in "
                      f"{int((~converged).sum())} of {converged.size} state(s) before reaching tol = {tol:g}; worst "
                      f"residuals: primal {res.primal.max():.3g} N s, dual {res.dual.max():.3g} m/s, "
                      f"complementarity {res.complementarity.max():.3g} J (scales {rep[..., 5].min():.3g} N s, "
                      f"{rep[..., 6].min():.3g} m/s)", ContactStepWarning, stacklevel=2)
    modes = _modes(out.impulses, out.velocities, rep[..., 5], rep[..., 6], tol)
    return ContactStep(out.q_next, out.v_next, out.impulses, modes, res, iterations)


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


def _refine(out, bad, kernels, q, v, tau, contacts, dt, tol, max_iterations, margin, f_ext, gravity, warm):
    """``out`` with the states ``bad`` (a mask of the batch shape) solved on the NumPy path."""
    shape = bad.shape
    pick = (lambda x, tail: np.broadcast_to(x, shape + x.shape[x.ndim - tail:])[bad]) if shape else \
        (lambda x, tail: np.asarray(x))
    redo = _numpy_step(kernels, pick(np.asarray(q, float), 1), pick(np.asarray(v, float), 1),
                       pick(np.asarray(tau, float), 1), contacts, dt, tol, max_iterations, margin, "admm",
                       None if f_ext is None else pick(np.asarray(f_ext, float), 2), gravity,
                       pick(np.asarray(warm, float), 2))
    fixed = []
    for a, b in zip(out, redo):
        a = np.array(a, copy=True)
        a[bad] = b
        fixed.append(a)
    return StepArrays(*fixed)


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


# --- trajectories --------------------------------------------------------------------------------

@model_method
def rollout(model, q0, v0, tau_or_controller, contacts, dt, steps, **options):
    """Simulate ``steps`` contact steps (:func:`contact_step`) from ``(q0, v0)`` (a :class:`Rollout`).

    ``tau_or_controller``: joint forces (nv,) held constant, a sequence (steps, ..., nv), or a
    callable ``controller(t, q, v) -> tau`` called before each step (``t = k dt``).  A batch of
    initial states (..., nq) runs all environments at once; ``model`` may be ``sd.compile(model)``.  Each step is warm-started from the
    previous impulses; ``options`` go to :func:`contact_step` (``tol``, ``solver``, ``f_ext``, ...).
    """
    who = "rollout"
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"{who}: steps must be an integer >= 0, got {steps!r}")
    dt = _positive(who, "dt", dt)
    runner = model
    model, _ = _model_and_kernels(model, who)
    contacts = point_contacts(model, contacts, who, friction=True)
    controller: Callable = tau_or_controller if callable(tau_or_controller) else None
    if controller is None:
        taus = _checks.numeric("tau_or_controller", tau_or_controller, "joint forces (..., nv) or (steps, ..., nv)")
        if taus.shape[-1:] != (model.nv,):
            raise ValueError(f"{who}: tau_or_controller must be joint forces of shape (nv,) = ({model.nv},), "
                             f"(steps, ..., nv) or a callable controller(t, q, v); got shape {taus.shape}")
        seq = taus.ndim >= 2 and taus.shape[0] == steps and steps > 0
    q, v = np.asarray(q0, float), np.asarray(v0, float)
    qs, vs, imps, modes, its = [q], [v], [], [], []
    warm = options.pop("warm_start", None)
    for k in range(steps):
        tau = controller(k * dt, q, v) if controller is not None else (taus[k] if seq else taus)
        s = contact_step(runner, q, v, tau, contacts, dt, warm_start=warm, **options)
        q, v, warm = s.q, s.v, s.impulses
        qs.append(q), vs.append(v), imps.append(s.impulses), modes.append(s.modes), its.append(s.iterations)
    shape = np.broadcast_shapes(*(x.shape[:-1] for x in qs[-1:] + vs[-1:]))
    stack = (lambda xs, tail: np.stack([np.broadcast_to(x, shape + tail) for x in xs]) if xs else
             np.zeros((0,) + shape + tail))
    return Rollout(stack(qs, (model.nq,)), stack(vs, (model.nv,)), stack(imps, (len(contacts), 3)),
                   np.stack(modes) if modes else np.zeros((0,) + shape + (len(contacts),), "<U5"),
                   np.stack(its) if its else np.zeros((0,) + shape, int))
