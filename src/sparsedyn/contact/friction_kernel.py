"""The compiled contact step (see :mod:`sparsedyn.contact.friction` for the method): the same ADMM as
straight-line stages of one iterative kernel, :func:`contact_step_kernel`, which the compiler runs as a loop
steered by the stages' flags (:mod:`sparsedyn.symbolic.loop`)."""

from __future__ import annotations

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.configuration import integrate
from ..kernels import kernel
from .friction_problem import (ADMM_BUDGET, PENETRATION_SLOP, PROXIMAL, RELAX, StepArrays, _nc, _numpy_step,
                               contact_problem, point_contacts)

__all__ = ["contact_step_kernel"]

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


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",), "settings": (4,), "warm_start": (_nc, 3)},
        optional={"f_ext": ("nb", 6), "gravity": (3,)}, static=("contacts",), sequences=("contacts",),
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


