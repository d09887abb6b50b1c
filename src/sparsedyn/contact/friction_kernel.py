"""The contact step's solver, written once (see :mod:`sparsedyn.contact.friction` for the method): the
stages of one iterative kernel, :func:`contact_step_kernel`, which the compiler traces and runs as a loop
steered by the stages' flags (:mod:`sparsedyn.symbolic.loop`), and which its NumPy reference runs on
floats in the same loop (:func:`~sparsedyn.symbolic.loop.run_stages`), state by state.

``init`` computes the problem (:func:`~sparsedyn.contact.friction_problem.problem_of`, the free velocity, open
contacts, scales, warm start), stage 0 sends a start that is solved already to the correction and any other to stage
8, which makes ``G = Z Z^T`` (``Z`` (m, nv)) and sends it (warm or cold) to the polish (stage 9: that round's first
step), stage 1 factors ``(G + (eta + rho) I)^-1`` (Woodbury's identity, an ``nv x nv`` Cholesky), stage 2 runs one
ADMM iteration with ADMM's own (cheap) residuals and asks for a new inverse when it changes ``rho``, stage 10
polishes the iterate (:mod:`~sparsedyn.contact.friction_polish`: the linear system of its contacts' modes, solved and
accepted where Coulomb's law holds to ``tol``; after a few iterations, once the modes hold, or when the check fails)
and stage 3 takes the round's next steps (stage 11 those whose start a guess on pairs of contacts changes), stage 4
checks Coulomb's law itself (the residuals of :mod:`~sparsedyn.contact.friction`) when ADMM's residuals are small,
stage 5 continues a state that ADMM has not solved in its budget with Gauss-Seidel sweeps until they stall (the whole
solve for ``solver="pgs"``; also where ADMM stalls: :data:`CHECK_STALL`), stage 12 polishes their last iterate where
they stall short of ``tol``, stage 6 runs the position correction (projected Gauss-Seidel), stage 7 polishes it (the
exact solution on its active rows), ``finish`` gives the next state.  Every choice is arithmetic (``_step``,
``_relu`` from ``copysign``), so each stage is one traced program, and the same function of floats.

The iteration, and why (the hard case it is chosen for: the dm_control humanoid lying on the floor, its
joints moved a little: up to 16 contacts on capsules, a singular Delassus matrix whose nonzero
eigenvalues span 1e-5 to 4, some contacts sliding):

* ADMM converges linearly, and there slowly (hundreds of iterations a state; Gauss-Seidel leaves some
  states unsolved after thousands of sweeps).  Each iteration is therefore followed by Anderson's
  extrapolation over the last iterates of the ADMM map (:func:`~sparsedyn.contact.anderson.anderson_step`, memory
  :data:`ANDERSON`; Walker and Ni, "Anderson acceleration for fixed-point iterations", 2011), safeguarded as Zhang,
  O'Donoghue and Boyd ("Globally convergent type-I Anderson acceleration for nonsmooth fixed-point
  iterations", 2020): the extrapolated point is taken only while the fixed-point residual stays below
  its best value, else the plain step and an empty memory (the cone projections make the map
  nonsmooth).  ADMM is Douglas-Rachford splitting (on the dual), whose whole state is one vector of
  the ``m`` rows, its governing point ``s = z + y / rho``: ``z`` is its projection onto the cones,
  ``y / rho`` the rest (Moreau's decomposition).  So Anderson extrapolates ``s -> s'`` (as SCS does its
  Douglas-Rachford iterate), not the pair ``(z, y / rho)`` of ``2 m`` rows: as few iterations, and the
  memory's work, the largest part of an iteration after the x-step, halves.  The checks and the result
  read the plain iterate (in the cones); the next iteration starts from the projection of Anderson's
  ``s`` (the first from the warm start's pair itself, which is no such split of one point).
* ``rho`` starts at :data:`RHO_START` of the mean eigenvalue and changes by residual balancing (Stellato et al.,
  OSQP, 2020) only past a ratio :data:`RHO_RATIO` of 5: every change costs a new inverse (``m^3`` against an
  iteration's ``m^2``) and empties Anderson's memory, and with Anderson a roughly balanced ``rho`` does.  It
  changes by the ratio whatever it is after :data:`STALL` refusals of Anderson's step in a row: a stall, where
  the plain steps creep just above the smallest residual seen and the safeguard refuses every extrapolation; the
  new map's memory and smallest residual start afresh (where a residual is exactly zero, every impulse strictly
  inside its cone, the ratio says nothing and ``rho`` and its inverse are kept).  The ratio weighs each residual
  against the scale of its stopping test (:mod:`~sparsedyn.contact.friction_residuals`): the primal against the
  impulses, the dual against the velocity scale of the closing contacts or their multipliers' size, whichever is
  larger.  Not against ``|g|`` or ``|y|`` of all contacts: those hold an open speculative contact's ``gap / dt``
  (metres a second beside free velocities of centimetres a second), which would drive ``rho`` far up in the
  first iteration and make ADMM creep.  Not against the velocity scale alone: the dual residual of a box resting
  on four corners would look large while ``y`` is, and ``rho`` would fall to its floor, where the x-step runs
  off along ``G``'s null space.
* No over-relaxation (Eckstein and Bertsekas, "On the Douglas-Rachford splitting method and the
  proximal point algorithm for maximal monotone operators", 1992): with the scales above, the relaxed
  map stalls longer under Anderson's extrapolation.
* The proximal term and ``rho``'s range only need the scale of ``G``'s largest eigenvalue: Gershgorin's
  bound (its largest row sum of magnitudes) replaces power iterations (one pass over ``G``).  The cheap
  test (ADMM's primal ``|x - z|`` and dual ``rho |z - z_prev|``) gates the full Coulomb check (a product with ``G``).

The contact set's structure is its frames (a static argument: one build per tuple of frames); the
friction coefficients, the points and the planes are one array of the kernel, ``contact_data`` (nc, 8)
``[mu, p_x, p_y, p_z, n_x, n_y, n_z, offset]`` (a new value never rebuilds).  A slot whose body is
data (:data:`~sparsedyn.contact.friction_problem.DATA_SLOT`, what a scene's steps use) adds its
joint weights to its row: one build per number of such slots.  The dense linear algebra (``G`` and its
factor ``Z``, inverses by block Cholesky halves, the products with them; :mod:`~sparsedyn.contact.friction_linalg`) is
written in block products, loops in the compiled code, so the program grows with the square of the slots;
they run over the slots up to the last closed contact (``K["used"]``: :mod:`~sparsedyn.codegen.emit_bounds`).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.configuration import integrate
from ..kernels import kernel
from ..symbolic.loop import run_stages
from . import friction_polish as polishing
from .anderson import FAR, anderson_step
from .correction import (_correction_sweep, correction_impulses, correction_targets, held_rows,  # noqa: F401
                         no_best, no_guesses, passes_after, polish_due, polish_first, polish_pass)
from .friction_linalg import (Slots, _low_rank_factor, _low_rank_solve, _mm, _mv, _mv_sym, _spd_inverse,
                              low_rank)
from .friction_problem import (_TINY, PENETRATION_SLOP, PROXIMAL, TOUCHING_GAP, StepArrays, _abs, _norms, _relu,
                               _scale_rows, _step, _vmax, problem_of, slot_structure, slot_width)
from .friction_residuals import (_converged, _residuals, _scales, closing_contacts, project_cone, scaled_residual,
                                 velocity_scale)
from .gauss_seidel_rows import contact_sweep, stalled
from .transport import gyroscopic, to_next_axes, transport

__all__ = ["contact_step_kernel", "project_cone", "correction_impulses"]

#: The first ADMM penalty relative to the mean eigenvalue of ``G`` (its trace over its size), and the
#: ratio of the scaled residuals beyond which ``rho`` changes (and ``G + (eta + rho) I`` is inverted again).
#: With Anderson acceleration (:data:`ANDERSON`) the iteration needs no finely balanced ``rho``, and a new
#: inverse is the costly event twice over: ``m^3`` work against an iteration's ``m^2``, and a new map
#: whose Anderson memory starts empty.  So ``rho`` changes only on a ratio of 5, from 0.3 of the mean
#: eigenvalue (the perturbed humanoid's states balance at 0.02-0.1 of it).
RHO_START, RHO_RATIO = 0.3, 5.0
#: Anderson acceleration's memory: the last pairs of differences of iterates and of fixed-point residuals of
#: the ADMM map (Walker and Ni, "Anderson acceleration for fixed-point iterations", 2011), which converges
#: linearly, and slowly where the Delassus matrix is singular and badly conditioned (the humanoid's limbs on
#: the floor).  A contact set of ``m`` rows keeps at most ``m / 4`` (at least 2) pairs: Anderson's work per
#: iteration (about ``3 k m``) then stays below the x-step's ``m^2``.
ANDERSON = 10
#: Anderson's refusals in a row (a stall) after which ``rho`` is balanced whatever the ratio: one memory's length.
STALL = ANDERSON
#: Newton's steps of the last polish (:func:`_last_polish`): the egg landing level in a bowl is accepted after three.
LAST_POLISH = 4
#: ADMM at a point that is no solution: its residuals passed their test ``CHECK_STALL`` times since Coulomb's law's
#: (to their tests) last fell below ``CHECK_GAIN`` of their best: on to Gauss-Seidel.  A sole's corners microns up,
#: each closing its gap, all sticking: no rigid motion meets that (``(gap_i - gap_j)^2 / (dt |x_i - x_j|)``, nm/s).
CHECK_STALL, CHECK_GAIN = 100, 0.9
#: The range of ``rho`` relative to the largest eigenvalue of ``G`` (the inverse of
#: ``G + (eta + rho) I`` stays well conditioned).
RHO_RANGE = (1e-6, 1e6)
#: The loop state's slots of the correction's stall (:func:`~sparsedyn.contact.correction.stalled`).
_STALL = ("lbest", "vbest", "vmark", "stale", "lmark")


def _zeros(n, like):
    """Zeros (n,) of ``like``'s kind: object for traced values, float for numbers."""
    return np.zeros(n, dtype=object if bk.is_symbolic(like) else float)


def _array(xs, like):
    return np.asarray(xs, dtype=object if bk.is_symbolic(like) else float)


# --- the stages ----------------------------------------------------------------------------------------

class _Layout:
    """The structure of one step: sizes, the frames, and where things are in the iterative kernel's
    constant block ``K`` and loop state ``S``."""

    def __init__(self, model, frames, opt):
        nc, nv = len(frames), model.nv
        m = 3 * nc
        self.model, self.frames, self.opt = model, frames, opt
        self.nc, self.m, self.nv = nc, m, nv
        # (G + (eta + rho) I)^-1 as Woodbury's factor of G = Z Z^T (nv x m) where it costs less, else m x m
        self.low_rank = low_rank(m, nv)
        self.normal = np.arange(nc) * 3 + 2                           # the rows of the normal impulses
        self.K = self._table([("Gnn", nc * nc), ("Z", m * nv), ("g", m), ("JMinvT", nv * m), ("v_free", nv), ("cn", nc),
                              ("closing", m), ("pen", 1), ("gmax", 1), ("dmax", 1), ("used", 1)])
        # x, z, y: the plain ADMM iterate (z in the cones: what the checks and the result read); za:
        # the governing point z + y / rho the next ADMM iteration starts from (Anderson's); dW, dF, c,
        # A: Anderson's memory (differences of T(w) and of residuals, which of them are kept, A = dF
        # dF^T), Tp, fp: the last T(w) and residual, fbest: the smallest residual norm since the
        # memory was cleared
        self.k = k = min(ANDERSON, max(2, m // 4))                    # Anderson's memory
        # G, eta, lmax: the Delassus matrix and its scales, made by the stage _delassus (not for a warm start
        # that solves the step already); cbest, cstall: Coulomb's best scaled residual at checks, checks since
        self.S = self._table([("G", m * m), ("eta", 1), ("lmax", 1), ("x", m), ("z", m), ("y", m), ("za", m), ("u", m),
                              ("W", (nv if self.low_rank else m) * m), ("rho", 1), ("cbest", 1), ("cstall", 1),
                              ("it", 1), ("conv", 1), ("res", 3), ("ls", 1), ("vs", 1), ("l", nc), ("sweeps", 1),
                              ("due", 1), ("change", 1), ("lbest", nc), ("vbest", 1), ("vmark", 1), ("stale", 1),
                              ("lmark", 1),
                              ("dW", k * m), ("dF", k * m), ("c", k), ("A", k * k), ("Tp", m), ("fp", m),
                              ("have", 1), ("fbest", 1), ("refused", 1), ("gs", 2),
                              # the polish (friction_polish): its last answer, the tries of
                              # this round and their best scaled residual, the next round's iteration,
                              # rounds and polishes run, the iterate's modes and for how many iterations
                              # they have held, the contacts the last step's swap opened, the round's best
                              # step's unprojected answer and whether the next step starts from it
                              ("pz", m), ("tries", 1), ("next", 1), ("rounds", 1), ("polishes", 1),
                              ("pbest", 1), ("code", nc), ("same", 1), ("out", nc), ("praw", m), ("sraw", 1),
                              # the position correction's polish: its first pass's next guesses, the passes
                              # run (correction.polish_pass)
                              ("cguess", 6 * nc + 1), ("cpass", 1)])

    @staticmethod
    def _table(items):
        out, k = {}, 0
        for n, size in items:
            out[n] = slice(k, k + size)
            k += size
        return out

    def slots(self, K):
        """The :class:`~sparsedyn.contact.friction_linalg.Slots` of ``K``: past ``K["used"]`` the contacts
        are open (zero rows of ``G`` and ``g``)."""
        return Slots(K["used"][0], self.nc)

    def unpack(self, X):
        """``(settings, mu, K, S)`` of a stage's arguments ``X`` (the kernel's inputs, then ``K``, ``S``)."""
        return X[3], X[5][:, 0], {n: X[-2][s] for n, s in self.K.items()}, {n: X[-1][s] for n, s in self.S.items()}

    @staticmethod
    def pack(table, parts):
        return np.concatenate([np.reshape(np.asarray(parts[n]), -1) for n in table])


def _init(lay, q, v, tau, settings, warm, data, *extra):
    """``(K, S)``: the problem of the step, its scales and the first iterate (the warm start)."""
    dt, tol, margin = settings[0], settings[1], settings[4]
    nc, m, rows = lay.nc, lay.m, lay.normal
    mu = data[:, 0]
    P, Z = problem_of(lay.model, q, v, tau, lay.frames, data[:, 1:4], data[:, 4:8], **dict(zip(lay.opt, extra)),
                      weights=data[:, 8:] if data.shape[1] > 8 else None, factor=True)
    v_free = v + dt * (P.a + transport(lay.model, v)) + gyroscopic(lay.model, v, dt)     # module transport
    Jv = _mv(P.J, v_free)                                          # (a loop in the compiled code)
    closing = _relu(-Jv[rows])
    # a contact that stays above its plane by more than the margin even at its free velocity is open:
    # its rows leave the problem (zero rows of G and g keep its impulse at zero)
    act = np.repeat(_step(margin - (P.gap - dt * closing)), 3)
    bias = _zeros(m, Jv)
    # speculative contact: close the gap, no more; a gap within TOUCHING_GAP is a touching contact (the
    # rounding-size gaps a correction leaves, different at each corner of a resting face, and the
    # nanometres a body's second-order motion leaves, would ask for velocities no rigid motion has while
    # the other points stick: a degenerate problem that ADMM and Gauss-Seidel only creep on)
    bias[rows] = _relu(P.gap) * _step(P.gap - TOUCHING_GAP) / dt
    g = (Jv + bias) * act
    # the slots in use: past the last closed contact every row of G, Z, g and the iterates is zero
    used = _vmax(np.arange(1.0, nc + 1.0) * act[rows])
    # Z of the closed contacts' rows (G = Z Z^T), G's diagonal, and the warm start's velocities
    # u = G z + g = Z (Z^T z) + g (two products by Z, not G)
    Z = _scale_rows(act, Z)
    diag = np.sum(Z * Z, 1)
    # the velocity scale: the free velocities of the closing contacts (not an open one's gap / dt)
    dmax, gmax = _vmax(diag), velocity_scale(g.reshape(nc, 3), v_free)
    z = project_cone(warm * act.reshape(nc, 3), mu).reshape(m)
    u = _mv(Z, _mv(Z.T, z, Slots(used, nc).mm(0, 3)), Slots(used, nc).mm(3, 0)) + g
    w = u.reshape(nc, 3).copy()
    w[:, 2] = w[:, 2] + mu * _norms(w[:, :2])
    res = _residuals(z.reshape(nc, 3), z.reshape(nc, 3), u.reshape(nc, 3), mu)
    ls, vs = _scales(z, gmax, dmax)
    conv = _converged(res, ls, vs, tol)
    # G's normal block, the position correction's (a product X X^T: its lower triangle summed, then mirrored)
    Gnn = _mm(Z[rows], Z[rows].T, Slots(used, nc).mm(1, 0, 1))
    pen = 1.0 - _step(PENETRATION_SLOP - _vmax(-P.gap))             # 1 where some point penetrates
    # no point past the slop: the rounding-size penetrations stay (on their planes for the held rows)
    cn = correction_targets((pen * P.gap + (1.0 - pen) * _relu(P.gap)) / dt, P.J[rows], dt)   # its trust region
    K = lay.pack(lay.K, dict(Gnn=Gnn, Z=Z, g=g, JMinvT=P.JMinv.T, v_free=v_free, cn=cn, pen=pen, gmax=gmax, dmax=dmax,
                             closing=np.repeat(closing_contacts(g.reshape(nc, 3)), 3), used=used))
    # the mean eigenvalue of the open contacts' block: open contacts (a layout's free slots) have zero rows
    rows_in = np.sum(act)
    rho = RHO_START * np.sum(diag) / (rows_in + (1.0 - _step(rows_in - 0.5))) + _TINY
    k = lay.k
    # the governing point z + y / rho of the warm start and its multiplier y = -(u + Phi(u))
    S = lay.pack(lay.S, dict(G=np.zeros(m * m), eta=0.0, lmax=0.0, x=z, z=z, y=-w.reshape(m), za=z - w.reshape(m) / rho,
                             u=u, W=np.zeros(lay.S["W"].stop - lay.S["W"].start), rho=rho, it=0.0, conv=conv,
                             res=res, ls=ls, vs=vs, l=np.zeros(nc), sweeps=0.0, due=polish_first(nc), change=0.0,
                             **dict(zip(_STALL, no_best(nc))),
                             dW=np.zeros(k * m), dF=np.zeros(k * m), c=np.zeros(k), A=np.zeros(k * k), Tp=np.zeros(m),
                             fp=np.zeros(m), have=0.0, fbest=FAR, refused=0.0, gs=np.zeros(2), pz=np.zeros(m),
                             out=np.zeros(nc), praw=np.zeros(m), sraw=0.0,
                             tries=0.0, rounds=0.0, polishes=0.0, pbest=0.0, cbest=FAR, cstall=0.0, code=np.zeros(nc),
                             same=0.0,
                             next=_first_polish(m, z), cguess=no_guesses(nc), cpass=0.0))
    return K, S


def _first_polish(m, z):
    """ADMM's iteration of the first polish: 0 (before any: right after G is made) for a warm start
    ``z``, and for a cold one where :func:`~sparsedyn.contact.friction_polish.polishes_cold`; else ``FIRST``."""
    if polishing.polishes_cold(m):
        return 0.0
    return polishing.FIRST * (1.0 - _step(_vmax(_abs(z)) - _TINY))


def _dispatch(lay, *X):
    """The first stage: the start converged already: on to the correction (+6; ``G`` is not made); else
    to :func:`_delassus` (+8)."""
    S = lay.unpack(X)[3]
    return lay.pack(lay.S, S), 8.0 - 2.0 * S["conv"][0]


def _delassus(lay, *X):
    """Stage 8, once where the start has not converged: ``G = Z Z^T`` (a product ``X X^T``: its lower
    triangle summed, then mirrored), ``lmax``: Gershgorin's bound of its largest eigenvalue (``G`` positive
    semidefinite: its largest row sum of magnitudes), the scale of the proximal term ``eta`` and of rho's range
    (power iterations cost a product with ``G`` each); ADMM's budget not zero and its first polish due
    (:func:`_first_polish`): polish (+1: a warm start's modes, or a cold start's guess, each contact that its
    free velocity closes closed, :mod:`~sparsedyn.contact.polish_guess`), else factorize (-7)."""
    settings, _, K, S = lay.unpack(X)
    Z = K["Z"].reshape(lay.m, lay.nv)
    G = _mm(Z, Z.T, lay.slots(K).mm(3, 0, 3))
    lmax = _vmax(np.sum(_abs(G), 1)) + _TINY
    S.update(G=G.reshape(-1), lmax=lmax, eta=PROXIMAL * lmax)
    due = (1.0 - _step(0.5 - settings[2])) * _step(0.5 - S["next"][0])
    return lay.pack(lay.S, S), 8.0 * due - 7.0


def _first_step(start, back, lay, *X):
    """A round's first step (``start``: :data:`~sparsedyn.contact.friction_polish.FIRST_STEPS`), its flag ``-back``."""
    if start is None and not polishing.pairs_apart(lay.nc):         # (stage 3 has the guesses on pairs: never run)
        return X[-1], 1.0
    S, f = polishing.polish_stage(lay, *X, start=start)
    return S, f - back


def _factorize(lay, *X):
    """The factor of ``(G + (eta + rho) I)^-1`` (:func:`~sparsedyn.contact.friction_linalg._low_rank_factor`
    of ``G = Z Z^T``); no ADMM budget (``solver="pgs"``): on to Gauss-Seidel (+4); else iterate (+1)."""
    settings, _, K, S = lay.unpack(X)
    m, c = lay.m, S["eta"][0] + S["rho"][0]
    S["W"] = (_low_rank_factor(K["Z"].reshape(m, lay.nv), c, lay.slots(K)) if lay.low_rank else
              _spd_inverse(S["G"].reshape(m, m) + c * np.eye(m), lay.slots(K)))
    return lay.pack(lay.S, S), 1.0 + 3.0 * _step(0.5 - settings[2])


def _iterate(lay, *X):
    """One ADMM iteration (x-step, projection onto the cones, multiplier) from Anderson's
    governing point ``za`` (``z`` its projection onto the cones, ``y / rho`` the rest), De Saxcé's
    shift from the multiplier, Anderson's next iterate (:func:`~sparsedyn.contact.anderson.anderson_step`),
    and the adaptive ``rho`` (residual balancing, past the ratio :data:`RHO_RATIO` or after :data:`STALL`
    refusals in a row)."""
    settings, mu, K, S = lay.unpack(X)
    tol, budget = settings[1], settings[2]
    nc, m = lay.nc, lay.m
    g, eta, lmax, rho = K["g"], S["eta"][0], S["lmax"][0], S["rho"][0]
    # the iterate is Douglas-Rachford's governing point sa = z + y / rho (Anderson's): its projection
    # onto the cones is z, the rest the scaled multiplier.  The first iteration starts from the warm
    # start's pair (z, y = -(u + Phi(u))) itself: it is no such split of one point (y / rho is not in
    # the normal cone at z), and the projection of z + y / rho would start from other impulses, which
    # on a redundant contact set (a box's four corners) leads to another of the solutions, not the
    # minimum-norm one the step's derivatives differentiate.  After it every pair (zn, yn) is one.
    x, sa = S["x"], S["za"]
    first = _step(0.5 - S["it"][0])
    z = first * S["z"] + (1.0 - first) * project_cone(sa.reshape(nc, 3), mu).reshape(m)
    yr = first * S["y"] / rho + (1.0 - first) * (sa - z)            # y / rho
    y = rho * yr
    s = _zeros(m, y)
    s[lay.normal] = mu * _norms(y.reshape(nc, 3)[:, :2])           # De Saxcé's shift from the multiplier
    r = -(g + s) + eta * x + rho * z - y
    xn = _low_rank_solve(S["W"].reshape(lay.nv, m), eta + rho, r, lay.slots(K)) if lay.low_rank else \
        _mv_sym(S["W"].reshape(m, m), r, lay.slots(K).mm(3, 3))
    sp = xn + yr                                                   # the plain next governing point
    zn = project_cone(sp.reshape(nc, 3), mu).reshape(m)
    yn = rho * (sp - zn)                                           # = y + rho (xn - zn)
    # ADMM's own residuals (cheap): primal |x - z| [N s], dual rho |z - z_prev| [m/s]; below the
    # tolerance they send the iterate to the stage that checks Coulomb's law itself
    primal, dual = _vmax(_abs(xn - zn)), rho * _vmax(_abs(zn - z))
    zmax, ymax = _vmax(_abs(zn)), _vmax(_abs(yn))
    ls, vs = _scales(zn, K["gmax"][0], K["dmax"][0])
    check = _step(tol * ls - primal) * _step(tol * (K["gmax"][0] + ymax) - dual)
    it = S["it"][0] + 1.0
    out = (1.0 - check) * _step(it - budget)
    # adaptive rho: residual balancing (Stellato et al., "OSQP: an operator splitting solver for quadratic
    # programs", 2020), each residual relative to the scale of its stopping test: the primal to the
    # iterates' impulses, the dual to the velocity scale or the closing contacts' multipliers (not |g + s|,
    # |y| of all: an open contact's gap / dt; not the scale alone: at rest on a redundant set, y's size
    # is what keeps rho from falling into G's null space); a new rho needs a new inverse
    rp = primal / _vmax([zmax, _vmax(_abs(xn)), ls])
    rd = dual / _vmax([vs, _vmax(_abs(yn) * K["closing"])])
    valid = _step(rp - _TINY) * _step(rd - _TINY)
    ratio = valid * bk.sqrt(rp / (rd + (1.0 - valid))) + (1.0 - valid)
    stalled = _step(S["refused"][0] - STALL + 0.5)
    outside = _step(ratio - RHO_RATIO) + _step(1.0 / RHO_RATIO - ratio)
    change = (1.0 - (1.0 - outside) * (1.0 - stalled)) * (1.0 - check) * (1.0 - out)
    new = rho * (change * ratio + (1.0 - change))
    hi, lo = RHO_RANGE[1] * lmax, RHO_RANGE[0] * lmax
    new = lo + _relu(hi - _relu(hi - new) - lo)                     # clipped to [lo, hi] without cancellation
    # rho kept (ratio 1: a residual exactly 0; at its bound): no new inverse, Anderson's memory emptied on a stall only
    moved = _step(_abs(new - rho) - _TINY)
    change = change * (1.0 - (1.0 - moved) * (1.0 - stalled))
    invert = change * valid * moved
    new = rho + invert * (new - rho)
    # the first step's start is no governing point: Anderson's memory starts after it
    sn = anderson_step(lay.k, S, sa, sp, 1.0 - (1.0 - change) * (1.0 - first), lay.slots(K))
    # a new rho is a new map: the plain point, rescaled to it (zn + yn / new), not the extrapolation
    S.update(x=xn, z=zn, y=yn, za=change * (zn + yn / new) + (1.0 - change) * sn, rho=new, it=it)
    # the modes of the iterate, and for how many iterations they have not changed (a polish waits for it)
    code = polishing.mode_codes(zn, mu, S["G"].reshape(m, m), lay.normal)
    S.update(code=code, same=(S["same"][0] + 1.0) * (1.0 - _step(_vmax(_abs(code - S["code"])) - 0.5)))
    # small residuals: check (+2); out of iterations: Gauss-Seidel (+3); new rho: invert (-1); polish due (+8)
    due = polishing.polish_due(S, it, m) * (1.0 - check) * (1.0 - out) * (1.0 - change)
    return lay.pack(lay.S, S), 2.0 * check + 3.0 * out - invert + 8.0 * due


def _check(lay, *X):
    """Coulomb's law's residuals at the iterate: converged, past Gauss-Seidel (+2); out of ADMM
    iterations or stalled (:data:`CHECK_STALL`), Gauss-Seidel (+1); else polish (+6) where allowed
    (:func:`~sparsedyn.contact.friction_polish.polish_allowed`), or iterate on (-2)."""
    settings, mu, K, S = lay.unpack(X)
    tol, budget = settings[1], settings[2]
    nc, m = lay.nc, lay.m
    G, g, x, z = S["G"].reshape(m, m), K["g"], S["x"], S["z"]
    u = _mv_sym(G, z, lay.slots(K).mm(3, 3)) + g
    res = _residuals(z.reshape(nc, 3), x.reshape(nc, 3), u.reshape(nc, 3), mu)
    ls, vs = _scales(z, K["gmax"][0], K["dmax"][0])
    conv = _converged(res, ls, vs, tol)
    out = (1.0 - conv) * _step(S["it"][0] - budget)
    ratio, cbest = scaled_residual(res, ls, vs, tol), S["cbest"][0]          # (CHECK_STALL)
    gain = _step(CHECK_GAIN * cbest - ratio)
    cstall = (1.0 - gain) * (S["cstall"][0] + 1.0)
    out = out + (1.0 - conv) * (1.0 - out) * _step(cstall - CHECK_STALL + 0.5)
    S.update(u=u, conv=conv, res=res, ls=ls, vs=vs, cbest=gain * ratio + (1.0 - gain) * cbest, cstall=cstall)
    left = polishing.polish_allowed(S, S["it"][0], m)
    return lay.pack(lay.S, S), 2.0 * conv + out + (1.0 - conv) * (1.0 - out) * (8.0 * left - 2.0)


def _gauss_seidel(lay, *X):
    """One projected Gauss-Seidel sweep (contact by contact: the normal impulse from the normal
    velocity, then the tangential one projected onto the friction disc); stops when converged or after
    ``settings[3]`` sweeps (on to the correction, +1: the caller's budget is kept), or stalled after ADMM
    (:func:`~sparsedyn.contact.gauss_seidel_rows.stalled`; on to :func:`_last_polish`, +7)."""
    settings, mu, K, S = lay.unpack(X)
    tol, budget, sweeps = settings[1], settings[2], settings[3]
    nc, m = lay.nc, lay.m
    G, g = S["G"].reshape(m, m), K["g"]
    lam = contact_sweep(G, g, mu, S["z"])
    lam = _array(lam, G)
    u = _mv_sym(G, lam, lay.slots(K).mm(3, 3)) + g
    res = _residuals(lam.reshape(nc, 3), lam.reshape(nc, 3), u.reshape(nc, 3), mu)
    ls, vs = _scales(lam, K["gmax"][0], K["dmax"][0])
    conv = _converged(res, ls, vs, tol)
    it = S["it"][0] + 1.0
    stall, gs = stalled(res, ls, vs, tol, it, S["gs"], budget)
    stop = 1.0 - (1.0 - conv) * (1.0 - _step(it - budget - sweeps)) * (1.0 - stall)
    S.update(x=lam, z=lam, u=u, it=it, conv=conv, res=res, ls=ls, vs=vs, gs=gs, tries=0.0)
    return lay.pack(lay.S, S), stop + 6.0 * (1.0 - conv) * stall


def _last_polish(lay, *X):
    """Stage 12, where Gauss-Seidel after ADMM stalled short of the tolerance: one Newton step of a polish
    (:func:`~sparsedyn.contact.friction_polish.polished`) from its last sweep, each next one from the step
    before's next iterate, :data:`LAST_POLISH` at most.  Accepted: its impulses; back to the correction
    (-6) when accepted or after the last, else on (0).  Its sweeps creep where ADMM does not converge
    (an egg landing level in a bowl: four faces' contacts at one point, whose sticking no rigid motion
    meets), but their modes are the answer's."""
    settings, mu, K, S = lay.unpack(X)
    m = lay.m
    G, first = S["G"].reshape(m, m), _step(0.5 - S["tries"][0])
    lam, u, res, ls, vs, _, conv, nxt, _, _ = polishing.polished(
        G, K["g"], mu, first * S["z"] + (1.0 - first) * S["pz"], S["lmax"][0], polishing.active_contacts(G, lay.normal),
        K["gmax"][0], K["dmax"][0], settings[1], slots=lay.slots(K), steps=1,
        Z=K["Z"].reshape(m, lay.nv) if lay.low_rank else None, newton=True)
    keep, tries = 1.0 - conv, S["tries"][0] + 1.0
    S.update({n: keep * S[n] + conv * x for n, x in (("x", lam), ("z", lam), ("u", u), ("ls", ls), ("vs", vs))})
    S.update(res=[keep * r0 + conv * r1 for r0, r1 in zip(S["res"], res)], conv=conv, pz=nxt, tries=tries,
             polishes=S["polishes"][0] + 1.0 / polishing.newton_steps(m))
    return lay.pack(lay.S, S), -6.0 * (1.0 - keep * _step(LAST_POLISH - 0.5 - tries))


def _correction_rows(lay, settings, K, S):
    """``(A, held)`` of the position correction: ``G``'s normal block ``Gnn`` (its rows and columns
    ``lay.normal``, every third from the third) and the held rows."""
    return (K["Gnn"].reshape(lay.nc, lay.nc),
            held_rows(K["cn"], S["z"][lay.normal], settings[1] * S["ls"][0], settings[0]))


def _correct(lay, *X):
    """One sweep of the position correction (split impulse) on the normal block of ``G``, the load-bearing
    touching contacts held within half the slop of their planes (:mod:`~sparsedyn.contact.correction`):
    solved or stalled (its best iterate), past the last stage (+7); a polish due (+1:
    :func:`~sparsedyn.contact.correction.polish_due`); else sweep on."""
    settings, _, K, S = lay.unpack(X)
    A, held = _correction_rows(lay, settings, K, S)
    best = (S["lbest"],) + tuple(S[n][0] for n in _STALL[1:])
    l, stop, best = _correction_sweep(A, K["cn"], S["l"], S["sweeps"][0], held, PENETRATION_SLOP / (2.0 * settings[0]),
                                      best)
    sweeps = S["sweeps"][0] + 1.0
    due, change = polish_due(sweeps, S["due"][0], l, S["l"], S["change"][0])
    S.update(l=l, sweeps=sweeps, change=change, **dict(zip(_STALL, best)))
    return lay.pack(lay.S, S), 7.0 * stop + (1.0 - stop) * due


def _correct_polish(lay, *X):
    """One pass of the polish of the position correction's iterate (:func:`~sparsedyn.contact.correction.polish_pass`),
    the next polish due after twice the sweeps: refused with passes left, the next pass (0); else back to
    the sweeps (-1), which confirm it."""
    settings, _, K, S = lay.unpack(X)
    A, held = _correction_rows(lay, settings, K, S)
    npass = S["cpass"][0]
    l, ok, after = polish_pass(A, K["cn"], S["l"], held, PENETRATION_SLOP / (2.0 * settings[0]), npass, S["cguess"])
    more = (1.0 - ok) * _step(passes_after(after) - 1.5 - npass)
    S.update(l=l, due=2.0 * S["sweeps"][0], cguess=after, cpass=(npass + 1.0) * more)
    return lay.pack(lay.S, S), more - 1.0


def _finish(lay, q, v, tau, settings, *X):
    """The next state: ``w = v_free + H^-1 J^T lambda`` (the old axes), ``q+ = q (+) dt (w + H^-1 J_n^T l)``,
    ``v+`` = ``w`` in the new axes (:func:`~sparsedyn.contact.transport.to_next_axes`)."""
    dt = settings[0]
    _, _, K, S = lay.unpack((q, v, tau, settings) + X)
    m, nv, nc = lay.m, lay.nv, lay.nc
    JMinvT = K["JMinvT"].reshape(nv, m)                            # (J H^-1)^T: products read its rows
    lam = S["z"]
    w = K["v_free"] + _mv(JMinvT, lam)
    dq = dt * w + dt * _mv(JMinvT[:, lay.normal], S["l"])
    report = np.concatenate([np.reshape(np.asarray(x), -1) for x in (S["res"], S["it"] + S["polishes"], S["conv"],
                                                                     S["ls"], S["vs"], K["pen"])])
    if not bk.is_symbolic(dq) and not np.all(np.isfinite(dq)):        # (floats: a state too large for them)
        raise _checks.NonFiniteResultError(
            f"contact_step: the step is not finite for finite inputs (the largest joint velocity {_vmax(_abs(v)):.3g}, "
            f"joint force {_vmax(_abs(tau)):.3g}): too large for double precision; a simulation that diverged (joint "
            f"gains too stiff for dt) or inputs to scale to physical magnitudes")
    return (integrate.__kernel__.fn(lay.model, q, dq), to_next_axes(lay.model, w, dt), lam.reshape(nc, 3),
            S["u"].reshape(nc, 3), report)


def _finish_and_correction(lay, *X):
    """:func:`_finish`'s outputs, then the position correction's normal impulses ``l`` (nc,) (zero where
    no point penetrates): the derivatives of the step differentiate the correction at them."""
    return tuple(_finish(lay, *X)) + (lay.unpack(X)[3]["l"],)


def _pieces(model, frames, opt):
    """``(init, stages, finish)`` of the step at ``frames`` with the optional arrays ``opt``."""
    lay = _Layout(model, frames, opt)
    stages = (_dispatch, _factorize, _iterate, partial(polishing.polish_stage, pairs=False), _check, _gauss_seidel,
              _correct, _correct_polish, _delassus, *(partial(_first_step, *x) for x in polishing.FIRST_STEPS),
              _last_polish)
    return partial(_init, lay), [partial(f, lay) for f in stages], partial(_finish_and_correction, lay)


# --- the kernel: traced for the compiler, run on floats as the reference ---------------------------------

def _nc(model, frames, **_):
    return len(tuple(frames))


#: The most contact slots a compiled step is built for (its program grows with the square of the slots: 32 data slots
#: of the dm_control humanoid are about half a million IR nodes, 64 slots four times that, a build of about a minute,
#: once per model).  A scene step keeps no more than :data:`~sparsedyn.contact.look_ahead.STEP_CAPACITY` contacts where
#: the others are beyond its reach; 64 slots hold a robot whose reachable contacts alone are more (an arm lying across
#: a table, a fallen robot's links in contact with each other: 33 to 48 in a sweep of example-robot-data).
MAX_COMPILED_CONTACTS = 64


class CompiledStepSizeError(ValueError):
    """A contact set too large for the compiled step (:data:`MAX_COMPILED_CONTACTS`): its build is
    refused before tracing; plain calls then answer on the NumPy road."""


def _step_program(model, static, optional):
    """The :class:`~sparsedyn.symbolic.loop.LoopProgram` of :func:`contact_step_kernel` at
    ``static["frames"]`` (the optional arrays ``optional`` as inputs)."""
    from ..symbolic.loop import trace_loop
    frames = tuple(slot_structure(model, f) for f in static["frames"])
    if len(frames) > MAX_COMPILED_CONTACTS:
        raise CompiledStepSizeError(
            f"contact_step: {len(frames)} contact slots; the compiled step is built for at most "
            f"{MAX_COMPILED_CONTACTS} (its program grows with the square of the contacts); plain calls answer on "
            f"NumPy (sparsedyn.use_backend('numpy'))")
    opt = tuple(n for n in ("f_ext", "gravity") if n in optional)
    k = contact_step_kernel.__kernel__
    shapes = k.shapes(model, frames=frames)
    inputs = [(n, shapes[n]) for n in list(k.inputs) + list(opt)]
    outputs = [(n, shapes[n]) for n in k.outputs]
    init, stages, finish = _pieces(model, frames, opt)
    return trace_loop(k.variant({"frames": frames}, opt).name, inputs, outputs, init, stages, finish)


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",), "settings": (5,), "warm_start": (_nc, 3),
                "contact_data": (_nc, slot_width)},
        optional={"f_ext": ("nb", 6), "gravity": (3,)}, static=("frames",), sequences=("frames",),
        outputs={"q_next": ("nq",), "v_next": ("nv",), "impulses": (_nc, 3), "velocities": (_nc, 3),
                 "report": (8,), "correction": (_nc,)}, program=_step_program, result=StepArrays)
def contact_step_kernel(model, q, v, tau, settings, warm_start, contact_data, frames, *, f_ext=None, gravity=None):
    """:func:`contact_step` as arrays (a :class:`StepArrays`): the iterative kernel (see
    :mod:`sparsedyn.symbolic.loop`) that a compiled model runs as one native call per state, and that
    the NumPy road runs on floats, state by state, in the same loop.

    ``frames``: the contacts' frames (indices or names; the structure, one build per tuple), or
    :data:`~sparsedyn.contact.friction_problem.DATA_SLOT` for a slot whose body is data (its data
    ``[mu, x (3), n (3), offset, weights (nv)]``, the point in the world and the joint weights of
    :func:`~sparsedyn.contact.friction_problem.slot_weights`: one build per number of slots), or for a
    contact between two bodies of the robot a pair ``(frame_a, frame_b)`` (its point is fixed in
    ``frame_a``, its plane moves with ``frame_b``'s body: rows ``J_a - J_b`` at the point, impulses on
    ``a`` and opposite on ``b``; :class:`~sparsedyn.contact.friction_problem.BodyContact`);
    ``settings`` (..., 5): ``[dt, tol, admm_iterations, sweeps, margin]`` (ADMM for at most
    ``admm_iterations``, then Gauss-Seidel up to ``sweeps`` more; 0 ADMM iterations: Gauss-Seidel
    alone); ``warm_start`` (..., nc, 3); ``contact_data`` (..., nc, 8): per contact
    ``[mu, p_x, p_y, p_z, n_x, n_y, n_z, offset]``, the friction coefficient (``>= 0``), the contact
    point in its frame's axes and the plane ``n . x = offset`` (``n`` not zero, need not be unit); the
    rest as :func:`contact_step`."""
    m = getattr(model, "model", model)
    frames = tuple(slot_structure(m, f) for f in frames)
    nc = len(frames)
    arrays = {"settings": (5,), "warm_start": (nc, 3), "contact_data": (nc, slot_width(m, frames))}
    given = dict(settings=settings, warm_start=warm_start, contact_data=contact_data)
    for name, tail in arrays.items():
        given[name] = _checks.numeric(name, given[name], f"(..., {', '.join(map(str, tail))})")
        if given[name].shape[given[name].ndim - len(tail):] != tail or given[name].ndim < len(tail):
            raise ValueError(f"contact_step_kernel: {name} must have shape (..., {', '.join(map(str, tail))}), got "
                             f"{given[name].shape}")
    q, v, tau, f_ext, _, _, _ = _checks.dynamics(m, q, v, tau, f_ext, gravity, "tau", "nv joint forces")
    extra = dict(f_ext=f_ext, gravity=None if gravity is None else np.asarray(gravity, float))
    opt = tuple(n for n in ("f_ext", "gravity") if extra[n] is not None)
    init, stages, finish = _pieces(m, frames, opt)
    tails = [(m.nq,), (m.nv,), (m.nv,)] + list(arrays.values()) + [extra[n].shape[-2:] if n == "f_ext" else (3,)
                                                                    for n in opt]
    xs = [q, v, tau] + list(given.values()) + [extra[n] for n in opt]
    shape = np.broadcast_shapes(*(x.shape[:x.ndim - len(t)] for x, t in zip(xs, tails)))
    flat = [np.broadcast_to(x, shape + tuple(t)).reshape((-1,) + tuple(t)) for x, t in zip(xs, tails)]
    B = int(np.prod(shape, dtype=int))
    outs = [np.empty((B, m.nq)), np.empty((B, m.nv)), np.empty((B, nc, 3)), np.empty((B, nc, 3)), np.empty((B, 8)),
            np.empty((B, nc))]
    for b in range(B):
        for o, r in zip(outs, run_stages(init, stages, finish, [x[b] for x in flat])[0]):
            o[b] = r
    return StepArrays(*(o.reshape(shape + o.shape[1:]) for o in outs))
