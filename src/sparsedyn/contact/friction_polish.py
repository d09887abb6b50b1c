"""The polish of the contact step's solver (:mod:`~sparsedyn.contact.friction_kernel`): from an
iterate of ADMM, guess each contact's mode, solve the linear system that mode fixes, and keep the
answer only where it satisfies Coulomb's law to the solver's own tolerance.

ADMM converges linearly, and slowly on a singular, badly conditioned Delassus matrix ``G`` (a
humanoid's limbs on the floor), but it finds the modes long before the digits: which contacts are
open, which stick, which slide and along which direction.  Once the modes are known the
nonlinear complementarity problem is a linear one (the "solution polishing" of OSQP: Stellato et
al., "OSQP: an operator splitting solver for quadratic programs", 2020; the active-set guess of
Acary, Brémond and Huber, "On solving contact problems with Coulomb friction: formulations and
numerical comparisons", 2018).  Per contact ``i`` of an iterate ``lambda`` ``[t_x, t_y, n]``:

* open (``lambda_n <= OPEN lmax``, ``lmax`` the largest impulse, or no rows in ``G``): ``lambda_i = 0``;
* sticking (strictly inside its cone, ``|lambda_t| < (1 - STICK) mu lambda_n``): its velocity
  ``u_i = (G lambda + g)_i = 0``, three rows;
* sliding (on the cone's boundary; a frictionless contact always): ``u_n = 0`` and
  ``lambda_t = mu lambda_n theta``, ``theta`` the current tangential direction.

Each sliding contact is written in its sliding axes ``[theta, phi, n]`` (``phi`` across ``theta``), and
the system is Newton's step on the directions (``theta = -u_t / |u_t|``, linearised at the iterate):
``u_n = 0``; along ``theta`` the friction is held, ``lambda_theta = mu lambda_n``, a column of the
unknown ``lambda_n`` in the contact's tangential rows (not a value from the last solve: held so, on
talos fallen onto a box, eight sliding contacts at ``mu = 1``, the repeated symmetric solve is a map
of spectral radius 1.5, which diverges even from the answer); across it ``u_phi + w lambda_phi = 0``,
``w = |u_t| / (mu lambda_n)`` (the turn of the direction under a change of ``u_phi``).  The
unknowns are the sticking contacts' three rows and the sliding contacts' ``phi`` and normal rows (a
frictionless contact's normal row alone: its tangential impulses are zero, where at zero slip, ``w = 0``,
its ``phi`` row would hold its velocity with friction it does not have: the dm_control humanoid's
frictionless self-contacts, whose every polish was then undone by the cones' projection).
The symmetric part ``D G D + (I - D) + W`` (``G`` in the sliding axes, ``D`` 1 on the unknowns'
rows, ``W`` the ``w`` on the ``phi`` rows) plus ``eps I`` (``eps = EPS s``, ``s`` the scale of ``G``)
is inverted once (Cholesky; where ``G = Z Z^T`` has many more rows than joints, ``Z`` (m, nv), by
Woodbury's identity: :func:`~sparsedyn.contact.friction_linalg._low_rank_factor`); the held
friction's columns, one per sliding contact, by Woodbury's identity with an ``nc x nc`` capacitance
matrix (not symmetric: its inverse from its normal equations), so each solve is exact for the
system, not a fixed-point iteration.  The solves (:func:`solves`) are the iterated Tikhonov
regularisation: the error along an eigenvalue ``sigma`` shrinks by ``eps / (sigma + eps)`` a solve;
``G`` is singular on a redundant set, a box's four corners, and its null space is left alone: from zero the
answer is the least-norm one, which a round's first step from ADMM's iterate takes; a warm start's first polish
takes the one nearest the warm start, the last step's split carried on (talos fallen onto a box, sticking: the
least-norm split put friction on lightly loaded corners, outside their cones, and each warm round failed), and a
round's later step the one nearest its own iterate, the last answer's split carried on (the dm_control humanoid's
400-step rollouts: the least-norm split of each step undid the last step's, 17 % more iterations).  A
sliding contact's friction is then ``mu lambda_n`` along the answer's new direction.  A polish
takes one or two such steps (:func:`newton_steps`), each from the modes and directions of the last
answer (near the answer: from its impulses before that pull onto the circle, :func:`polish`); the
first direction is the friction of each contact's local problem at the iterate, ``-(u_t - k lambda_t)`` (``k`` the
largest eigenvalue of its ``G_tt``; exact for a point mass), nearer the answer's than ADMM's friction
or velocity (talos on the floor: accepted from ADMM's iteration 16 in one polish of two steps).  The
modes come back from each answer, so repeated polishes also correct ADMM's modes (the perturbed
humanoid's slowest states: a nearly redundant pair of capsule contacts, both sliding in ADMM's
iterate for hundreds of iterations, one sticking and one open in the answer).  An answer's open
contact that its velocity closes faster than the answer's own error is closed for the next step:
beside a closed near-duplicate (the same body's points millimetres apart) by moving the load to it
(:func:`~sparsedyn.contact.polish_guess.swap_guess`; talos fallen onto a box: in each group of near
duplicates one carries the load and the others touch at zero impulse, and a repeated polish whose
modes pick the wrong one stalls with it penetrating), else by guessing it closed however little it
carries (:func:`~sparsedyn.contact.polish_guess.answer_closing_guess`: the dm_control humanoid lying
with its limits held, an elbow's stop closing at 7e-8 m/s, its impulse 1e-7 of the largest, below
what the modes read as closed); and the first polish of every other round, from ADMM's iterate,
which spreads a group's load over its members (pairs sliding with opposite friction), starts with each group's
closed impulses on the member that carries most (:func:`~sparsedyn.contact.polish_guess.merge_guess`; the others
from the iterate as it is: :func:`merges`).  The work per Newton step is the inverse (``m^3``; Woodbury's:
``m nv^2``), the held friction's columns (``m nc^2``; ``nv^2 nc``) and the solves (``4 m^2`` each; ``m^2 + 2 m nv``),
against an ADMM iteration's ``m^2``; rotations and masks are block products by sparse first factors where a matrix
is formed, elementwise where a vector is (``D Gr v`` is ``D R^T (G (R v))``), and a product by ``G`` or the
symmetric ``M^-1`` reads its rows where they lie (:func:`~sparsedyn.contact.friction_linalg._mv_sym`).  Compiled,
a step costs the reading of its code more than its arithmetic: the polish stage runs one step a run.

Two more rules move the modes between the steps of a round.  A mode system with no solution (its residual stays
above the stopping test's velocity tolerance through the solves: a redundant set whose targets no rigid motion
meets, a box's four corners with one touching and the others speculative) runs off along ``G``'s null space, making
a diagonal pair of corners negative, or squeezes two sticking contacts (two of the humanoid's, slipping apart),
putting one outside its cone: its answer is taken only as far as the first closed contact that opens or, after
ADMM's iterations, the first sticking one that reaches its cone (:func:`~sparsedyn.contact.polish_guess.ratio_test`),
not to the end (in a warm start's round the modes change wholesale, a foot rocking from one capsule onto the other,
which the full step and the cones' projection find in one or two polishes, the cone's bound in more than the round's
budget).  And an answer's sliding contact whose velocity moves along
its friction (Coulomb's law wants it opposite; within 60 degrees: across it, Newton's next step turns the direction)
is guessed sticking for the next step (:func:`~sparsedyn.contact.polish_guess.sticking_guess`): the answer's projection
puts a sliding contact back on its cone's circle, so without it no sliding contact would ever stick again.

Along ``G``'s null space the regularisation amplifies rounding by ``1 / EPS``: the impulses of a redundant set carry
rounding of about ``1e-8`` relative there (two evaluations that round differently differ by that much; ``v+`` and the
resultant impulses are untouched).  The answer, projected onto the cones, is accepted only where Coulomb's law's
residuals pass the solver's stopping test (:func:`~sparsedyn.contact.friction_residuals._converged`) and each sliding
contact's velocity opposes its friction (:func:`opposed`): a wrong guess costs time, never accuracy.  Everything is
branch-free arithmetic (``_step``), one fixed-size program: when it runs is :data:`FIRST`'s schedule.
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .friction_linalg import Slots, _low_rank_factor, _lower_inverse, _mm, _mv, _mv_sym, _spd_inverse
from .friction_problem import _TINY, STICKING_SLIP, _abs, _norms, _relu, _step, _vmax
from .friction_residuals import _converged, _residuals, _scales, project_cone
from .polish_guess import (answer_closing_guess, answer_error, closing_guess, merge_guess, pairs_apart,
                           pairs_guessed, ratio_test, squeeze_guess, sticking_guess, swap_guess)

__all__ = []

#: An impulse below this fraction of the largest is an open contact's (its normal impulse is zero).
OPEN = 1e-6
#: A contact whose tangential impulse is within this fraction of its cone's radius slides.
STICK = 1e-6
#: Tikhonov's regularisation of the unknowns' block of ``G``, relative to ``s`` (the scale of ``G``):
#: the repeated solves (:func:`solves`) remove its bias along all but ``G``'s smallest directions.
EPS = 1e-8
#: The fewest refinement steps after the first solve (more on large sets: :func:`solves`).
REFINE = 3
#: Newton's steps on the sliding directions in one polish (each a mode system of its own) where the
#: solver's budget cannot pay for a second polish in the first round (:func:`newton_steps`), else one.
NEWTON = 2
#: A round goes on past the budget of iterations (:data:`FREE`) while its step's Coulomb residuals are within
#: ``NEAR`` of their tests (relative to its stopping test, ``tol``): an answer this near has its modes and is
#: one or two of Newton's steps from the tolerance, cheaper than the ADMM iterations to the next round.
NEAR = 1e3
#: A round's step gains at least this on the round's best where Newton's steps near the answer: the next
#: starts from its next iterate (:func:`polish_stage`; the dm_control humanoid's slow slip: 5e-7, then 1e-4;
#: talos fallen onto a box, 5e-3 at ADMM's iteration 105: there the answer is the better start).
QUADRATIC = 1e-3
#: Tikhonov's regularisation of the normal equations of Woodbury's capacitance matrix (dimensionless).
CAPACITANCE = 1e-14
#: Polishes in a row, each from the modes of the previous answer, before ADMM goes on.
REPEATS = 3
#: The kernel's stages 9, 10, 11 (a round's first steps; 11: a later step's guesses on pairs): ``(start, from 3)``.
FIRST_STEPS = (("warm", 6.0), ("admm", 7.0), (None, 8.0))
#: A round goes on past :data:`REPEATS` polishes, up to ``LONGEST``, while each polish brings Coulomb's
#: residuals (relative to their stopping tests) below ``PROGRESS`` of the round's best so far: a
#: repeated polish that corrects the modes converges as Newton's method does, by orders of magnitude a
#: step, and one whose modes are wrong stalls at one value, so the long rounds are those that end the
#: solve (the dm_control humanoid's perturbed states: a round accepted after four to six polishes,
#: where three left ADMM hundreds of iterations more).
LONGEST, PROGRESS = 8, 0.5
#: A round goes on past the budget of iterations (:data:`FREE`), up to :data:`LONGEST` polishes, while each step
#: brings Coulomb's residuals (relative to their tests) below ``CONVERGING`` of the round's best so far: cheaper to
#: finish than to drop (the next round comes after twice the iterations).  Not :data:`PROGRESS`: gains alternate.
CONVERGING = 0.7
#: When a polish runs: from the start (a warm start, or a cold one: every contact open, those that their
#: free velocity closes guessed closed, :mod:`~sparsedyn.contact.polish_guess`), before the first ADMM
#: iteration; then (a round rejected at iteration ``k``) after ``2 k + FIRST`` or at the first failed
#: check of Coulomb's law (ADMM's own residuals small), whichever comes first; at most ``ROUNDS``
#: rounds, each once ADMM's iterate has kept its modes ``STABLE`` iterations, or ``HOLD`` of the
#: polish's cost in iterations where that is more (a guess from modes still changing is rarely right,
#: and a wrong one costs more the more rows).  A polish is charged ``COST m`` iterations of ``m`` rows,
#: and runs only while the polishes charged exceed by at most ``FREE`` the iterations ADMM has run.
#: Eight rounds, not two: a round's repeated polishes correct ADMM's modes, which on a nearly redundant
#: pair of contacts (a short capsule's two ends on the floor) ADMM settles only after hundreds of
#: iterations; the schedule doubles, so the rounds' cost stays a fraction of ADMM's.
FIRST, ROUNDS, STABLE, COST, FREE, HOLD = 3, 8, 2, 0.25, 16.0, 0.18


def modes(z, mu, active, direction=None):
    """``(open, stick, slide)`` (nc,), each 1 where contact ``i`` of the impulses ``z`` (nc, 3) is in
    that mode (the module docstring), and the sliding direction ``theta`` (nc, 2): that of ``z``'s
    tangential impulse, or of ``direction`` (nc, 2) where given; ``active`` (nc,) 1 where the contact
    has rows in ``G``."""
    t, n = z[:, :2], z[:, 2]
    r = _norms(t)
    lmax = _vmax(_abs(z))
    closed = active * (1.0 - _step(OPEN * lmax - n))
    stick = closed * (1.0 - _step(r - (1.0 - STICK) * mu * n))       # strictly inside (mu = 0: never)
    d = t if direction is None else direction
    return 1.0 - closed, stick, closed - stick, d / (_norms(d) + _TINY)[:, None]


def solves(m):
    """The solves of one polish of ``m`` rows: :data:`REFINE` + 1."""
    return REFINE + 1


def newton_steps(m):
    """Newton's steps in one polish of ``m`` rows: :data:`NEWTON` where one polish is charged more
    iterations than :data:`FREE` (a round then runs one polish: talos on the floor, 96 rows, accepted at
    ADMM's iteration 16 after two steps), else one (a round repeats its polishes, each from the last
    answer's modes, and a second step costs about a polish more: the dm_control humanoid's 24 and 48
    rows)."""
    return NEWTON if COST * m > FREE else 1


def polishes_cold(m):
    """Whether a cold start of ``m`` rows is polished before any ADMM iteration (its guess: each contact
    that its free velocity closes closed and sticking): where one polish costs no more iterations than
    :data:`FREE`; a larger problem's polish (talos on the floor, 96 rows: the guess of a sliding set
    rejected) costs more than the iterations it saves, so it waits for ADMM's ``FIRST`` iterations."""
    return newton_steps(m) == 1


def _axes(x, c, s, back=False):
    """``x`` (..., nc, 3) in the contact axes ``[t_x, t_y, n]`` in each contact's sliding axes
    ``[theta, phi, n]`` (``theta = (c, s)``, ``phi = (-s, c)``), or (``back``) the other way."""
    a, b = x[..., 0], x[..., 1]
    s = -s if back else s
    return np.stack([c * a + s * b, c * b - s * a, x[..., 2]], -1)


def _diagonal_blocks(block, like):
    """The block diagonal matrix (k n, k n) of the blocks ``block[a][b]`` (k x k entries, each an
    array (n,) of the blocks' entries, or a number for all): structural zeros elsewhere (traced: the
    int ``0``, so that a block product skips them); ``like`` (n,) gives the kind."""
    k, n = len(block), np.shape(like)[0]
    X = np.zeros((k * n, k * n), dtype=object if bk.is_symbolic(like) else float)
    i = k * np.arange(n)
    for a in range(k):
        for b in range(k):
            if not (np.ndim(block[a][b]) == 0 and block[a][b] == 0):
                X[i + a, i + b] = block[a][b]
    return X


def _newton_system(G, g, mu, z, scale, active, direction, sl=None):
    """The mode system of the iterate ``z`` in the sliding axes (the module docstring): ``(d, w, c, s,
    Rt, gr, slide, op)``, ``d`` (m,) 1 on the unknowns' rows, ``w`` (m,) the compliance of each sliding
    contact's ``phi`` row, ``(c, s)`` (nc,) the axes' ``theta``, ``Rt`` (m, m) the rotation ``R^T`` into
    them (block diagonal: structural zeros off its blocks), ``gr`` (m,) ``g`` in them, ``slide`` and
    ``op`` (nc,) 1 where sliding, open; ``sl`` the slots in use
    (:class:`~sparsedyn.contact.friction_linalg.Slots`; None: all)."""
    nc = mu.shape[0]
    m = 3 * nc
    sl = Slots(None, nc) if sl is None else sl
    Z = z.reshape(nc, 3)
    u = (_mv_sym(G, z, sl.mm(3, 3)) + g).reshape(nc, 3)
    if direction is None:
        # the friction of each contact's local problem, -(u_t - k lambda_t) (``k`` the largest eigenvalue
        # of its G_tt; a point mass: exact), nearer the answer's than ADMM's friction or velocity alone
        a, b, e = np.diagonal(G)[0::3], np.diagonal(G)[1::3], np.diagonal(G, 1)[0::3]
        k = 0.5 * (a + b) + bk.sqrt(0.25 * (a - b) * (a - b) + e * e)
        direction = (mu * _abs(Z[:, 2]) * k)[:, None] * (Z[:, :2] / (_norms(Z[:, :2]) + _TINY)[:, None]) - u[:, :2]
    op, stick, slide, theta = modes(Z, mu, active, direction)
    # a contact that does not slide keeps its axes (a frictionless one's theta may be zero: also)
    keep = 1.0 - slide * _step(_norms(theta) - 0.5)
    c, s = slide * theta[:, 0] + keep, slide * theta[:, 1]
    # Newton's step on theta = -u_t / |u_t|: across the sliding direction lambda_phi = -(mu lambda_n /
    # |u_t|) u_phi, the perpendicular row with compliance |u_t| / (mu lambda_n) (at most 1 / EPS of s)
    speed = _relu(-(theta[:, 0] * u[:, 0] + theta[:, 1] * u[:, 1]))
    w = slide * speed / (mu * _relu(Z[:, 2]) + _TINY)
    w = w - _relu(w - scale / EPS)
    # a frictionless contact's tangential impulses are zero, not unknowns (the module docstring)
    d = np.stack([stick, stick + slide * _step(mu - _TINY), stick + slide], 1).reshape(m)
    Rt = _diagonal_blocks([[c, s, 0], [-s, c, 0], [0, 0, 1.0]], c)
    gr = _axes(g.reshape(nc, 3), c, s).reshape(m)
    return d, np.stack([0.0 * w, w, 0.0 * w], 1).reshape(m), c, s, Rt, gr, slide, op


def _dense_system(G, Rt, d, mus, sl):
    """``(D Gr D, U)``: the unknowns' block (m, m) of ``Gr = R^T G R`` (``G`` (m, m) symmetric in the sliding
    axes, ``Rt`` (m, m) the rotation ``R^T``, :func:`_newton_system`; ``D = diag(d)``, the others' rows and
    columns zero) and the held friction's columns ``U = D Gr_theta diag(mus)`` (m, nc) (``Gr``'s theta
    column of each contact, ``mus`` (nc,) its ``mu`` where sliding, else 0); ``sl`` the slots in use.
    Block products whose first factor ``D R^T`` or ``R_theta^T`` has two or one entries a row (loops of
    ``O(m^2)``, not ``O(m^2)`` operations written out one by one): ``D Gr D = (D R^T G) (D R^T)^T`` and
    ``U = D R^T (diag(mus) R_theta^T G)^T``, each second factor one transposed copy."""
    RD = Rt * d[:, None]
    DGrD = _mm(RD, _mm(RD, G, sl.mm(3, 3, 3)).T, sl.mm(3, 3, 3))
    return DGrD, _mm(RD, _mm(Rt[0::3] * mus[:, None], G, sl.mm(1, 3, 3)).T, sl.mm(3, 3, 1))


def mode_solution(G, g, mu, z, scale, active, direction=None, start=None, slots=None, Z=None, residual=False):
    """``(lambda, slide, open)`` (``residual``: and the largest residual of the system before its last
    solve, which stays where the system has no solution: :func:`~sparsedyn.contact.polish_guess.ratio_test`): the
    solution (m,) of the mode system of the iterate ``z`` (m,) (the module docstring) in the contact axes, before
    the cones, and which contacts (nc,) slide and are open: ``G`` (m, m), ``g`` (m,), ``mu`` (nc,), ``scale`` the
    size of ``G``'s largest eigenvalue,
    ``active`` (nc,) 1 where a contact has rows in ``G``, ``direction`` (nc, 2) the sliding directions
    where given (else the friction of each contact's local problem at ``z``), ``start`` (m,) where
    given: the answer nearest to it (else the least-norm one); ``slots``: the slots in use
    (:class:`~sparsedyn.contact.friction_linalg.Slots`: past them ``G``, ``g`` and ``z`` are zero);
    ``Z`` (m, k): a factor ``G = Z Z^T`` where the inverse is to be Woodbury's
    (:func:`~sparsedyn.contact.friction_linalg.low_rank`), else None (an ``m x m`` inverse)."""
    nc = mu.shape[0]
    m = 3 * nc
    sl = Slots(None, nc) if slots is None else slots
    d, w, c, s, Rt, gr, slide, op = _newton_system(G, g, mu, z, scale, active, direction, sl)
    mus = slide * mu
    E = 1.0 - d + w + EPS * scale
    if Z is None:
        DGrD, U = _dense_system(G, Rt, d, mus, sl)
        Mx = _spd_inverse(DGrD + np.eye(m) * E[:, None], slots)
    else:
        # M = D Gr D + E = E^1/2 (V V^T + I) E^1/2 with V = E^-1/2 D R^T Z (G = Z Z^T), so
        # M^-1 = e (I - Wt^T Wt) e (e = E^-1/2; Woodbury's identity, an nv x nv factorization)
        e = 1.0 / bk.sqrt(E)
        Wt, Li = _low_rank_factor(_mm(Rt * (d * e)[:, None], Z, sl.mm(3, 3, 0)), 1.0, slots, lower=True)
    # Woodbury's correction for the held friction x_theta = mu x_n (a column of rank one per sliding
    # contact, U = D Gr_theta diag(mus)): (M + U V^T)^-1 = M^-1 - M^-1 U C^-1 V^T M^-1, V^T the normal rows,
    # C = I + V^T M^-1 U (M^-1's normal rows times U: M^-1 U itself is applied as M^-1 (U x)); C is not
    # symmetric: its inverse from the normal equations (the refinement below corrects their rounding)
    if Z is None:
        C = np.eye(nc) + _mm(Mx[2::3], U, sl.mm(1, 3, 1))

        def solve(r):                                              # (M + U V^T)^-1 r
            a = _mv_sym(Mx, r, sl.mm(3, 3))
            return a - _mv_sym(Mx, _mv(U, Ci(a[2::3]), sl.mm(3, 1)), sl.mm(3, 3))
    else:
        # U = D R^T Z Y = e^-1 V Y with Y = Z^T R_theta diag(mus) (nv, nc), so M^-1 U = e V (I + V^T V)^-1 Y
        # = e Wt^T (L^-1 Y): nv^2 nc, not m nv nc (M^-1 times U's m x nc columns)
        LY = _mm(Li, _mm(Rt[0::3] * mus[:, None], Z, sl.mm(1, 3, 0)).T, sl.mm(0, 0, 1))
        C = np.eye(nc) + e[2::3, None] * _mm(Wt[:, 2::3].T, LY, sl.mm(1, 0, 1))

        def solve(r):                                              # (M + U V^T)^-1 r
            # M^-1 r = e (e r - Wt^T t), t = Wt e r, less M^-1 U C^-1 of its normal rows: one product by Wt^T
            er = e * r
            t = _mv(Wt, er, sl.mm(0, 3))
            an = e[2::3] * (er[2::3] - _mv(Wt[:, 2::3].T, t, sl.mm(1, 0)))
            return e * (er - _mv(Wt.T, t + _mv(LY, Ci(an), sl.mm(0, 1)), sl.mm(3, 0)))
    # C^-1 x from the normal equations, (C^T C + CAPACITANCE I)^-1 C^T x = L^-T (L^-1 (C^T x)): three products
    # by vectors a solve, not the nc x nc inverse formed (two nc^3 products a step)
    Lc = _lower_inverse(_mm(C.T, C, sl.mm(1, 1, 1)) + np.eye(nc) * CAPACITANCE, slots, None if slots is None else
                        slots.axis(1))

    def Ci(x):
        return _mv(Lc.T, _mv(Lc, _mv(C.T, x, sl.mm(1, 1)), sl.mm(1, 1)), sl.mm(1, 1))

    def DGrv(v):                                                   # D Gr v
        # D R^T (G (R v)), the rotations elementwise (on Woodbury's road D Gr is not formed; on the dense
        # one a product by D Gr would first copy it transposed, G's rows are read where they lie)
        Rv = _axes(v.reshape(nc, 3), c, s, back=True).reshape(m)
        return d * _axes(_mv_sym(G, Rv, sl.mm(3, 3)).reshape(nc, 3), c, s).reshape(m)

    def held(y):                                                   # x_theta = mu x_n where sliding
        Y = y.reshape(nc, 3)
        return np.stack([Y[:, 0] + mus * Y[:, 2], Y[:, 1], Y[:, 2]], 1).reshape(m)

    y = 0.0 * z if start is None else d * _axes(start.reshape(nc, 3), c, s).reshape(m)
    for _ in range(solves(m)):
        r = -(DGrv(held(y)) + d * gr + w * y)                      # the unregularised system's residual
        y = y + solve(r)
    out = (_axes(held(y).reshape(nc, 3), c, s, back=True).reshape(m), slide, op)
    return out + (_vmax(_abs(r)),) if residual else out


def polish(G, g, mu, z, scale, active, direction=None, start=None, slots=None, steps=None, Z=None, vtol=None,
           newton=False, slips=1.0):
    """The impulses (m,) of the mode system of the iterate ``z`` (:func:`mode_solution`, the same
    arguments) on the cones: a sliding contact's friction ``mu lambda_n`` along the solution's new
    direction (onto the cone's circle at ``lambda_n``: the nearest point of the cone would raise
    ``lambda_n`` by the step across ``theta``), an open contact's impulse zero exactly (rounding stays
    nowhere: its rows are held at 0), then the projection onto the cones.  ``steps``: Newton's steps
    (None: :func:`newton_steps`); ``vtol`` [m/s]: where given, a mode system whose residual stays above it
    (no solution at these modes) steps only to the first contact it opens or, where ``slips`` is 1, that reaches its
    cone (:func:`~sparsedyn.contact.polish_guess.ratio_test`); each step after the first solves for the answer
    nearest its own iterate.
    ``newton``: also Newton's next iterate (m,), the same but for a sliding contact's friction, left as the
    system solved it: off the circle by the second order of its turn ``alpha``, ``(1 / cos alpha - 1) mu
    lambda_n``, and the system's answer itself (m,) (every closed contact as solved: :func:`_next_start`).

    The next step starts there, not from the circle: the system's answer meets every closed contact's
    velocity target, and the friction pulled back onto the circle moves them all, enough, beside a small slip,
    to point the next step's directions anywhere; from the system's answer the turns shrink as Newton's do."""
    nc = mu.shape[0]
    for _ in range(newton_steps(3 * nc) if steps is None else steps):
        lam, slide, op, left = mode_solution(G, g, mu, z, scale, active, direction, start, slots, Z, True)
        lam = lam.reshape(nc, 3)
        if vtol is not None:
            lam = lam + _step(left - vtol) * (ratio_test(z.reshape(nc, 3), lam, op, mu, OPEN, STICK, slips) - lam)
        t, n = lam[:, :2], lam[:, 2]
        f = slide * mu * n / (_norms(t) + _TINY) + (1.0 - slide)
        out = project_cone(np.concatenate([t * f[:, None], n[:, None]], 1) * (1.0 - op)[:, None], mu)
        # Newton's next step from the system's answer, not from the circle (the docstring)
        raw = lam * (1.0 - op)[:, None]
        z = (out + (slide * _step(n))[:, None] * (raw - out)).reshape(3 * nc)
        direction, start = None, z
    out = out.reshape(3 * nc)
    return (out, z, raw.reshape(3 * nc)) if newton else out


def polished(G, g, mu, z, scale, active, gmax, dmax, tol, direction=None, start=None, slots=None, steps=None,
             Z=None, newton=False, slips=1.0):
    """``(lambda, u, res, ls, vs, ok, conv)``: :func:`polish`'s impulses of ``z``, their velocities
    ``G lambda + g``, Coulomb's law's residuals, their scales, the stopping test ``ok`` and the test
    (1: accepted): the stopping test and :func:`opposed` at ``tol vs``; ``newton``: and Newton's next iterate
    (:func:`polish`), the round's progress (:func:`polish_stage`: Coulomb's largest residual relative to its test,
    of the answer's impulses at the next iterate's velocities, without the pull onto the circle, which the next
    step undoes: the residual of the directions and modes) and the system's answer (:func:`polish`); ``slips``
    as :func:`polish`'s."""
    nc = mu.shape[0]
    lam, nxt, raw = polish(G, g, mu, z, scale, active, direction, start, slots, steps, Z, tol * gmax, True, slips)
    u = _mv_sym(G, lam, None if slots is None else slots.mm(3, 3)) + g
    res = _residuals(lam.reshape(nc, 3), lam.reshape(nc, 3), u.reshape(nc, 3), mu)
    ls, vs = _scales(lam, gmax, dmax)
    ok = _converged(res, ls, vs, tol)
    out = lam, u, res, ls, vs, ok, ok * opposed(lam.reshape(nc, 3), u.reshape(nc, 3), mu, active, tol * vs)
    if not newton:
        return out
    un = _mv_sym(G, nxt, None if slots is None else slots.mm(3, 3)) + g
    rn = _residuals(lam.reshape(nc, 3), lam.reshape(nc, 3), un.reshape(nc, 3), mu)
    return out + (nxt, _vmax([rn[1] / vs, rn[2] / (ls * vs)]), raw)


def opposed(lam, u, mu, active, vtol):
    """1 where each sliding contact of the impulses ``lam`` (nc, 3) slips opposite its friction, ``|u_t + |u_t|
    theta| <= vtol`` (``u`` (nc, 3) the velocities, ``theta`` the friction's direction), else 0: Coulomb's residuals
    see a direction's error ``delta`` only as ``mu lambda_n |u_t| delta^2 / 2``, so one off by ``sqrt(tol)`` would
    pass them.  A slip within ``100 vtol``, which the step's modes read as sticking, may take any friction in the
    cone (its work is the complementarity's), and a frictionless contact any slip."""
    _, _, slide, theta = modes(lam, mu, active)
    ut = u[:, :2]
    speed = _norms(ut)
    return _step(vtol - _vmax(slide * _step(mu - _TINY) * _step(speed - STICKING_SLIP * vtol) *
                              _norms(ut + speed[:, None] * theta)))


def polish_stage(lay, *X, start=None, pairs=True):
    """The solver's polish stage (:mod:`~sparsedyn.contact.friction_kernel`'s loop): one Newton step of
    a polish (:func:`newton_steps` of them make one; each run checks its answer) from the ADMM iterate
    ``z``, then (rejected) from the last step's answer (its modes and directions), :data:`REPEATS`
    polishes in all, or up to :data:`LONGEST` while each step gains :data:`PROGRESS` on the round's
    best, while ADMM's iterations pay for them (:data:`FREE`; a step is charged its share of a polish;
    a warm start's round, before any iteration: with :func:`warm_credit` more, and :data:`REPEATS` - 1
    polishes before each must gain or keep the last answer's modes) or, unpaid, while each step gains
    :data:`CONVERGING` or is :data:`NEAR` the tolerance.  In a warm start's round each step starts from its
    iterate with each open contact that its velocity closes guessed closed (:mod:`~sparsedyn.contact.polish_guess`);
    each step after a round's first, from the last answer (near the answer: Newton's next iterate; after a step
    that gains nothing, the best step's unprojected answer: :func:`_next_start`) with the load of a closed contact
    moved to an open near-duplicate that its velocity closes (:func:`~sparsedyn.contact.polish_guess.swap_guess`).
    Accepted: the step's impulses, on to the correction (+3); rejected, the round's last: back to ADMM
    (-1; from a warm start, before any iteration: to the factorisation, -2); else on (0).  ``start``: a
    round's first step, ``"admm"`` or the start's round's ``"warm"`` (:data:`_STARTS`), else a later step
    (``pairs`` False: without its guesses on pairs where :func:`pairs_apart`, :func:`_handed`).  A run is one
    step, not the whole polish (module docstring: a stage costs the reading of its code)."""
    settings, mu, K, S = lay.unpack(X)
    m, tol = lay.m, settings[1]
    steps = newton_steps(m)
    G = S["G"].reshape(m, m)
    fresh, warm = _STARTS[start]
    z = fresh * S["z"] + (1.0 - fresh) * S["pz"]
    # a warm start's round (before any ADMM iteration; a cold start's: all open): its impulses the last step's, its
    # velocities this step's: an open contact that closes is guessed closed (not on ADMM's iterates: their error)
    warm = _step(0.5 - S["it"][0]) if warm is None else warm
    pairs = pairs or not pairs_apart(lay.nc)                  # (few contacts: the guesses on pairs in this step)
    z, out, need = _closing(G, K["g"], mu, z, lay, lay.slots(K), warm, 1.0 - fresh, S["out"],
                            merges(S["rounds"][0], warm), pairs)
    # from ADMM's iterate, then the last answer; a warm start's first polish: the answer nearest it, a later step's:
    # nearest its iterate; a warm start's round steps past a sticking contact's cone (module docstring)
    lam, u, res, ls, vs, ok, conv, nxt, rn, raw = polished(
        G, K["g"], mu, z, S["lmax"][0], active_contacts(G, lay.normal), K["gmax"][0], K["dmax"][0], tol,
        start=warm * fresh * S["z"] + (1.0 - fresh) * z, slots=lay.slots(K), steps=1,
        Z=K["Z"].reshape(m, lay.nv) if lay.low_rank else None, newton=True, slips=1.0 - warm)
    tries, it = S["tries"][0] + 1.0, S["it"][0]
    # the answer in the last answer's modes: the round's steps are Newton's on the sliding directions
    codes = [mode_codes(x, mu, G, lay.normal) for x in (lam, S["pz"])]
    held = (1.0 - fresh) * _step(0.5 - _vmax(_abs(codes[0] - codes[1])))
    # the chain's progress: Coulomb's residuals relative to their tests (the polish's primal is 0), or in the
    # same modes those at the next iterate's velocities where less (a turn's pull onto the circle left out)
    r = _vmax([res[1] / vs, res[2] / (ls * vs)])
    best = fresh * r + (1.0 - fresh) * (S["pbest"][0] - _relu(S["pbest"][0] - r))
    r = r - held * _relu(r - rn)
    nxt, praw, sraw = _next_start(S, lam, nxt, raw, r, fresh, held)
    gains = _step(PROGRESS * S["pbest"][0] - r) * (1.0 - fresh)
    converging = _step(CONVERGING * S["pbest"][0] - r) * (1.0 - fresh)
    # the next step paid by ADMM's iterations; a warm start's round (before any iteration) also by the
    # least that ADMM's start costs, which a polish accepted spares (:func:`warm_credit`), and past its
    # second polish only while each gains or keeps the last answer's modes: the first is from the last
    # step's modes, the second from its answer's, and a mode change that the round can find shows in
    # them (a third without a gain in other modes repeats a cycle of modes: a pair of contacts swapping,
    # one closing as the other lifts; in the same modes it is Newton's next step on the sliding
    # directions); past that budget while the round converges (:data:`CONVERGING`) or is near (:data:`NEAR`)
    paid = _paid(it + warm * warm_credit(m), m, S["polishes"][0] + 2.0 / steps)
    # (or past a swap: its next step may give both of the pair a share, :func:`_closing`)
    kept = held + _vmax(out) * (1.0 - held)
    gains = gains + warm * kept * (1.0 - gains)
    more = (1.0 - _step(tries - steps * (REPEATS - warm)) * (1.0 - gains)) * (1.0 - _step(tries - steps * LONGEST)) * \
        (1.0 - (1.0 - paid) * (1.0 - converging) * _step(r - NEAR * tol))
    # a cold start's round (no impulse yet: the guess of the contacts that close): one Newton step,
    # counted where accepted, else charged to no budget nor round, so that where it fails (a sliding
    # set, whose directions the next polishes find) the solve goes on as from its start: ADMM, and its
    # first polish after FIRST iterations
    cold = warm * _step(_TINY - _vmax(_abs(S["z"])))
    more = (1.0 - cold) * more
    last = (1.0 - conv) * (1.0 - more)                              # rejected, the round's last
    keep = 1.0 - conv
    new = dict(x=keep * S["x"] + conv * lam, z=keep * S["z"] + conv * lam, u=keep * S["u"] + conv * u,
               res=[keep * r0 + conv * r1 for r0, r1 in zip(S["res"], res)], ls=keep * S["ls"][0] + conv * ls,
               vs=keep * S["vs"][0] + conv * vs, conv=conv, pz=nxt, pbest=best, out=out, praw=praw, sraw=sraw,
               tries=tries * (1.0 - last) * keep,
               rounds=S["rounds"][0] + last * (1.0 - cold), polishes=S["polishes"][0] + (1.0 - cold * keep) / steps,
               next=S["next"][0] + last * (2.0 * it + FIRST - S["next"][0]))
    flag = 3.0 * conv - last * (1.0 + _step(0.5 - it))
    new, flag = (new, flag) if pairs else _handed(S, new, flag, need)
    S.update(new)
    return lay.pack(lay.S, S), flag


def _next_start(S, lam, nxt, raw, r, fresh, held):
    """``(start, best raw, from raw)`` of a round's next step after one whose answer ``lam`` scored ``r`` (the
    round's best so far ``S["pbest"]``; ``nxt``, ``raw``: :func:`polish`'s next iterates).  A round's steps start
    from the answer, or where Newton's steps converge as they do near the answer (:data:`QUADRATIC`) from the next
    iterate; after a step that gains nothing, from the system's own answer of the round's best step, no contact
    projected (and after another such, back): a sticking contact that the system puts outside its cone is then read
    sliding with the friction the system gave it, where its projection moves every closed contact's velocity (the
    dm_control humanoid, a slide at 1e-8 m/s on a cone's edge among sticking contacts: the projected restarts stalled
    at a scaled residual of 0.015 for 1,500 iterations; from the system's answers, Newton's steps converge at once)."""
    base = lam + held * _step(QUADRATIC * S["pbest"][0] - r) * (nxt - lam)
    gained = fresh + (1.0 - fresh) * _step(S["pbest"][0] - r)
    sraw = (1.0 - fresh) * (gained * S["sraw"][0] + (1.0 - gained) * (1.0 - S["sraw"][0]))
    praw = gained * raw + (1.0 - gained) * S["praw"]
    return base + sraw * (praw - base), praw, sraw


def _handed(S, new, flag, need):
    """``(new, flag)`` of a later step without its guesses on pairs (most of its program, rarely applied): where one
    would change its start (``need`` 1) the state ``S`` as it was, to stage 11 (:data:`FIRST_STEPS`)."""
    return ({k: need * S[k] + (1.0 - need) * np.reshape(np.asarray(x), -1) for k, x in new.items()},
            need * FIRST_STEPS[2][1] + (1.0 - need) * flag)


#: :func:`polish_stage`'s ``start``: ``(fresh, warm)``, known where it is entered (None: ``warm`` read in the run).
_STARTS = {None: (0.0, None), "warm": (1.0, 1.0), "admm": (1.0, 0.0)}


def _closing(G, g, mu, z, lay, sl, weight, swap=0.0, back=0.0, merge=1.0, pairs=True):
    """``(z, out, need)``: the iterate ``z`` (m,) that a polish starts from, the contacts (nc,) that its swap
    opened, and 1 where a guess on pairs, left out (``pairs`` False), would change ``z`` (else 0):
    (``swap`` 0: a round's first, from ADMM's iterate or a warm start) where ``merge`` (:func:`merges`), the
    impulse of each closed contact given to its closed near-duplicates that carry more
    (:func:`~sparsedyn.contact.polish_guess.merge_guess`), or (``swap`` 1: from the last answer) the load of a
    pair of one body's contacts sliding with opposed frictions (a squeeze) given to the one that carries more
    (``merge_guess``'s ``opposed``), then the load of a closed contact moved to the open near-duplicate that its
    velocity closes fastest, shared where that one was opened by the last step's swap (``back`` (nc,) 1) and the
    pair closes (``swap_guess``), a contact on its cone moving along its friction guessed sticking, sticking
    contacts that slip along ``G``'s null space squeezed until one slides (``squeeze_guess``), each open contact
    that the answer's velocity closes beyond its error guessed closed, then (``weight`` 1, in its stead) each open
    contact that its velocity closes guessed closed, sticking or sliding (``closing_guess``; all
    :mod:`~sparsedyn.contact.polish_guess`)."""
    nc, m, Z = lay.nc, lay.m, z.reshape(lay.nc, 3)
    active = active_contacts(G, lay.normal)
    Z = Z + (1.0 - swap) * merge * (merge_guess(G, Z, active, OPEN) - Z)
    Z = Z + swap * (merge_guess(G, Z, active, OPEN, (mu, STICK)) - Z) if pairs else Z
    u = (_mv_sym(G, Z.reshape(m), sl.mm(3, 3)) + g).reshape(nc, 3)
    closed, Z0 = _step(Z[:, 2] - OPEN * _vmax(_abs(Z))), Z
    Z = Z + swap * (swap_guess(G, Z, u, active, OPEN, back) - Z) if pairs else Z
    out = swap * closed * (1.0 - _step(Z[:, 2] - OPEN * _vmax(_abs(Z))))
    err = answer_error(Z, u, active, OPEN)
    Z = Z + swap * (sticking_guess(Z, u, mu, err, STICK) - Z)
    Z = Z + swap * (squeeze_guess(Z, u, mu, err, STICK, lambda d: _mv_sym(G, d, sl.mm(3, 3)), _vmax(np.diagonal(G))) - Z)
    Z = Z + swap * (1.0 - weight) * (answer_closing_guess(G, Z, u, active, OPEN) - Z)
    need = 0.0 if pairs else pairs_guessed(G, Z0, u, active, OPEN, mu, STICK)
    return (Z + weight * (closing_guess(G, Z, u, active, OPEN, mu) - Z)).reshape(m), out, need


def merges(rounds, warm):
    """1 where a round's first polish puts each group of near-duplicates' load on one member
    (:func:`~sparsedyn.contact.polish_guess.merge_guess`), else 0: every other round of ADMM's iterates
    (``rounds`` even), never a warm start's (``warm`` 1: the last step's solution, its shares a solution's).
    The solution may put the load ADMM spreads on one member (talos fallen onto a box: a sole's corners
    millimetres apart) or share it (the dm_control humanoid's foot: its two capsules' ends 2 cm apart)."""
    return (1.0 - warm) * (1.0 - sum((k % 2 * 2.0 - 1.0) * _step(rounds - k + 0.5) for k in range(1, ROUNDS + 1)))


def active_contacts(G, rows):
    """1 for each contact with rows in ``G`` (its normal rows ``rows``), else 0."""
    return _step(np.diagonal(G)[rows] - _TINY)


def mode_codes(z, mu, G, rows):
    """Each contact's mode in ``z`` (m,) as a number (nc,): 0 open, 1 sticking, 2 sliding."""
    _, stick, slide, _ = modes(z.reshape(-1, 3), mu, active_contacts(G, rows))
    return stick + 2.0 * slide


def polish_allowed(S, it, m):
    """1 where the loop state ``S`` at ADMM iteration ``it`` may run a round of polishes (rounds left,
    the modes kept, the polishes so far paid by ADMM's iterations: :data:`ROUNDS`), else 0."""
    rounds, same, polishes = (np.reshape(S[n], -1)[0] for n in ("rounds", "same", "polishes"))
    return _step(ROUNDS - 0.5 - rounds) * _step(same - _hold(m) + 0.5) * _paid(it, m, polishes)


def warm_credit(m):
    """The iterations a warm start's round of polishes of ``m`` rows may spend beyond :data:`FREE`: what
    the least start of ADMM after it costs, a factorisation and the polish after :data:`FIRST`
    iterations (each charged as a polish, ``COST m``) and those iterations: a round that ends the step
    saves them, and along a trajectory a contact's change of mode (one end of a capsule lifting) takes
    a polish or two more from the last step's modes (the first of them with the lifting contact still
    closed), whose Newton steps on the sliding directions converge in one or two more."""
    return FIRST + 2.0 * COST * m


def _hold(m):
    """The iterations ADMM's modes must have held before a polish of ``m`` rows: :data:`STABLE`, or
    :data:`HOLD` of the polish's cost in iterations (``COST m``), whichever is more."""
    return max(STABLE, HOLD * COST * m)


def _paid(it, m, polishes):
    """1 where ``polishes`` polishes cost at most :data:`FREE` ADMM iterations more than ``it``."""
    return _step(it + FREE - COST * m * polishes)


def polish_due(S, it, m):
    """1 where the loop state ``S`` at ADMM iteration ``it`` is due a round of polishes, else 0."""
    return _step(it - np.reshape(S["next"], -1)[0]) * polish_allowed(S, it, m)
