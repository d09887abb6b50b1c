"""The position correction of the contact step (split impulse), written once for traced values (the step's
stage) and for Python floats (the derivatives' copy of the same sweeps).

The correction is a normal pseudo-impulse ``l`` (nc,) per contact whose velocity ``dv = H^-1 J_n^T l``
moves only the configuration (``q+ = q (+) dt (v+ + dv)``), found by projected Gauss-Seidel on the
normal block ``A = G_nn`` with ``c = gap / dt`` (where no point penetrates past ``PENETRATION_SLOP``,
``relu(gap) / dt``: rounding-size penetrations are left, as on their planes), ``w = A l + c`` (the
contacts' normal displacement over ``dt``)::

    free rows:    l >= 0  ⊥  w >= 0                         (a penetrating point is moved onto its plane)
    held rows:    w in [0, hi];  l > 0 => w = 0,  l < 0 => w = hi,  l = 0 inside

A *held* row is a load-bearing touching contact: its normal impulse in the step is nonzero and its gap
is below ``TOUCHING_GAP`` and above ``-PENETRATION_SLOP`` (no speculative term: the step has held it at
its gap, which the correction then closes to within the band below; a point penetrating past the slop
stays a free row, pushed out and free to rise: holding a deep one in the band too asks a rigid body's
redundant points for displacements no motion gives). Pushing one point out of its plane moves the rest
of a jointed body: a plain one-sided correction would lift the body's other resting points off their
planes by a fraction of the push, step after step, until one is a speculative contact whose push
``gap / dt`` no motion gives while the other points stick (a degenerate Coulomb problem on which the solver
creeps); and a point that the step stops within ``TOUCHING_GAP`` would hover there. So a held row may
pull (``l < 0``) as far as keeping its point within ``hi = SLOP / (2 dt)`` of the plane: half the slop,
so that the second-order motion of the integration keeps it below the slop. The band ``[0, hi]`` (not
``w = 0``) leaves a redundant set (a face's corners) a feasible set with an interior, and a point
already within it is not moved. The held rows are only those that carry load in the step's own solution,
whose normal velocity is zero, so the correction moves no point that the step separates.

The correction is a linearisation, trusted only for small motions: a row's gap changes by ``J_i dq`` to
first order, and a turn by ``theta`` of a body moves its points off that line by about ``r theta^2 / 2``
(``r`` their distance from the axis).  A row whose gap barely changes with any motion (a thigh's cylinder
nearly coaxial with its hip joint, overlapping the base: its witness points millimetres from the axis, its
row of ``J`` millimetres per radian) asks, to close its gap, for a motion of the gap over that lever:
radians for millimetres, where the linear model means nothing and the next step's overlap is worse.  So
each row asks only for what a small motion gives: the motions of at most ``reach``
(:data:`CORRECTION_REACH`) in every coordinate (a joint's or a free body's angle, a free body's position)
change the gap by at most ``reach |J_i|_1`` (the dual norm), and a penetrating row's ``c_i`` is raised to
``-reach |J_i|_1 / dt`` (:func:`correction_targets`; the step's setup and the derivatives' copy apply it).
A row that no small motion separates stays, a little, overlapping (a step moves it by about ``reach`` in
the coordinates that serve it, where the first-order change is trusted), and a later step goes on.  An
ordinary contact is untouched: its point moves with a free body's translation (``|J_i|_1 >= 1``) or at a
lever of tens of centimetres from its joints, so any penetration short of ``reach`` metres keeps its
``c_i`` bit for bit (a box's, a humanoid's, talos's soles: millimetres).  The derivatives
(:mod:`~sparsedyn.contact.friction_derivatives`) differentiate ``c_i`` as the gap's: where a target is
raised, its own change with ``q`` (that of ``|J_i|_1``) is not the gap's, and it is not taken.

Each row's update is the exact minimiser of its one-dimensional problem: with ``l_0 = l_i - w_i / A_ii``
(``w_i = 0``) and ``l_hi = l_0 + hi / A_ii`` (``w_i = hi``), ``l_i = relu(l_0) - held_i relu(-l_hi)``
(``l_0 < l_hi``: one of the three cases holds).

Gauss-Seidel creeps where the rows are coupled and redundant: a humanoid robot standing, four coplanar
corners a sole, ``A`` has two null directions and a condition of about 170 on the rest, and hundreds of
sweeps remove a few millimetres of penetration.  Its iterate shows the solution's active rows long before
it converges, so the sweeps are *polished* (:func:`_correction_polish`, the friction solver's polish on
the normal block alone): the rows whose sweep would make ``l`` positive are held at ``w = 0``, the held
rows whose sweep would pull at ``w = hi``, the rest at ``l = 0``, and the linear system of the active rows
is solved (regularised by ``POLISH_REG`` of ``A``'s largest diagonal entry against its null directions, one
step of iterative refinement taking its bias out of the rest); the answer, its signs projected, is taken
only where it solves the problem to the sweeps' own tolerance, and the sweeps go on from it (the next one
confirms it).  A refused answer gives the next guess, a primal-dual active-set step (Hintermüller, Ito and
Kunisch, "The primal-dual active set strategy as a semismooth Newton method", 2002) that first only drops
the rows of the wrong sign: a near-duplicate pair of points, whose load the sweeps move from one to the
other by a few percent a sweep, shows both active, and the pair's answer pushes one and pulls the other
(talos lying on the floor: from sweep 8, the second guess is the answer).  Where that too is refused and
the first answer had several rows of the wrong sign, the third guess drops only the first of them that the
path from the first guess's start to its answer crosses, and starts where it crosses (the active-set step of
Goldfarb and Idnani, "A numerically stable dual method for solving strictly convex quadratic programs",
1983): where the guessed rows are redundant (``A`` singular on them) and ``c`` is out of their range, the
regularised answer runs far along a null direction and every row that direction unloads turns wrong,
while the solution lets go of only the first (the perturbed humanoid's limbs pressed into the floor, whose
sweeps shift load between redundant rows for hundreds of sweeps until one reaches zero).  A polish costs
about ``2 + nc / 4`` sweeps (:func:`polish_cost`: a Cholesky factorisation, ``nc^3 / 6``, and a few
products against a sweep's ``2 nc^2``); it runs only where the sweeps, at the rate of their last two
changes of ``l``, would not reach their tolerance in as many sweeps, and not before :func:`polish_first`
sweeps (the active rows show), each pass costing as much, each polish doubling that wait (one refused on
a wrong active set is not tried again on the next sweep).  So an easy problem runs its plain sweeps.

Targets that no impulses meet (a robot's shapes drawn inside each other, pushed apart along rows that
ask for opposite motions) have no solution: the sweeps hold the violation where the first put it while
the impulses grow without bound, to the cap of :data:`CORRECTION_SWEEPS`.  So the sweeps also stop on a
stall (:func:`stalled`: the violation not lowered for :data:`STALL_SWEEPS` sweeps while the impulses
grew :data:`STALL_GROWTH` fold), with the iterate of the smallest violation; a problem that converges
never meets it, and its impulses are the same bits.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import backend as bk
from .friction_linalg import STEP_BLOCK_PAIRS, _cholesky, _cholesky_solve, _mv_sym
from .friction_problem import _TINY, PENETRATION_SLOP, TOUCHING_GAP, _abs, _relu, _step, _vmax

__all__ = ["correction_impulses", "correction_targets", "held_rows", "no_best", "polish_cost", "polish_due",
           "polish_first", "polish_pass", "stalled", "no_guesses", "passes_after"]

#: Sweeps and relative tolerance of the position correction's Gauss-Seidel.
CORRECTION_SWEEPS, CORRECTION_RTOL = 1000, 1e-6
#: The fewest sweeps before the first polish, and the polish's regularisation relative to ``A``'s largest
#: diagonal entry (its square bounds the bias left after the refinement, relative to ``A``'s smallest
#: nonzero eigenvalue over its largest: a condition of 1e4 leaves 1e-10).
POLISH_FIRST, POLISH_REG = 8, 1e-9
#: The guesses of the active rows in one polish (the module docstring): the sweeps' iterate's, then from
#: the first refused answer, without all its rows of the wrong sign, then without the first its path crosses.
POLISH_PASSES = 3
#: The stall of the sweeps (:func:`stalled`): :data:`STALL_SWEEPS` sweeps in a row none of which lowers the
#: violation by :data:`STALL_GAIN` of its value at the last that did, while the impulses grow to
#: :data:`STALL_GROWTH` times their size then.  Targets no impulses meet (a robot's shapes drawn inside
#: each other, pushed apart along opposite rows) leave the violation where the first sweeps put it while
#: the impulses grow by the same amount each sweep, without bound (tiago's hand in its safety box: 30
#: times the first sweep's in 20 sweeps).  A solvable problem's sweeps may also hold the violation for
#: hundreds of sweeps (a humanoid's limbs pressed into the floor: the rows trade their load, then fall
#: into place), but their impulses stay near the solution's, well below twice their size.
STALL_SWEEPS, STALL_GAIN, STALL_GROWTH = 20, 1e-3, 4.0
#: The violation before the first sweep (any sweep's is smaller).
_UNSEEN = 1e300
#: The trust region of the correction: the largest motion of any coordinate (radians of a joint or of a
#: free body's rotation, metres of its translation) whose first-order change of a gap a row may ask for.
CORRECTION_REACH = 0.01


def correction_targets(c, J_n, dt):
    """The correction's ``c`` (nc,) within its trust region (the module docstring): ``max(c_i, -reach
    |J_n,i|_1 / dt)``, ``|J_n,i|_1`` the sum of the magnitudes of the normal row ``J_n`` (nc, nv) (the
    largest first-order change of the gap by a motion of at most ``reach`` (:data:`CORRECTION_REACH`) in
    each coordinate); traced values or floats."""
    return np.asarray(c) + _relu(-CORRECTION_REACH * np.sum(_abs(J_n), 1) / dt - np.asarray(c))


def polish_first(nc):
    """The fewest sweeps before the first polish of a correction of ``nc`` rows (a float): 2 for at most
    four rows (a body's face on a plane, whose redundant corners the sweeps creep on for about ten
    sweeps, where a polish costs three: :func:`polish_cost`), else :data:`POLISH_FIRST` or a quarter of
    the rows (a larger set's polish costs more, and its active rows show later)."""
    return float(2 if nc <= 4 else max(POLISH_FIRST, nc // 4))


def polish_cost(nc):
    """The cost of a polish of ``nc`` rows in sweeps (an int)."""
    return 2 + nc // 4


def polish_due(sweeps, due, l, l0, before):
    """``(flag, change)``: ``flag`` 1 where a polish is due after ``sweeps`` sweeps, the last from ``l0``
    to ``l`` (nc,) (``change`` the largest change of an entry, ``before`` the previous sweep's): at or
    past ``due``, and the sweeps at the rate ``change / before`` (at most 1) would still change ``l`` by
    more than :data:`CORRECTION_RTOL` of its size after :func:`polish_cost` more (traced values or
    floats)."""
    change = _vmax(_abs(l - l0))
    rate, left = (change - _relu(change - before)) / (before + _TINY), change      # at most 1 (not converging)
    for _ in range(polish_cost(len(l))):
        left = left * rate
    return _step(sweeps - due) * (1.0 - _step(CORRECTION_RTOL * _vmax(_abs(l)) - left)), change


def _array(xs, like):
    return np.asarray(xs, dtype=object if bk.is_symbolic(like) else float)


def held_rows(c, lam_n, lam_floor, dt):
    """The held rows (nc,) (1 or 0) of the correction: the contact's normal impulse ``lam_n`` above ``lam_floor`` (the step's
    ``tol`` times its impulse scale: not open) and its gap ``c dt`` in ``(-PENETRATION_SLOP, TOUCHING_GAP)``
    (touching: no speculative term, no penetration to remove); traced values or floats."""
    return (1.0 - _step(lam_floor - lam_n)) * (1.0 - _step(-PENETRATION_SLOP / dt - c)) * (1.0 - _step(c - TOUCHING_GAP / dt))


def _correction_sweep(A, c, l0, sweeps, held, hi, best=None):
    """One projected Gauss-Seidel sweep of the position correction (the module's problem) from ``l0``
    (nc,): ``(l, stop, best)``, ``stop`` 1 when ``l`` solves it to :data:`CORRECTION_RTOL`, when the
    sweeps stall (:func:`stalled`: ``l`` is then the best iterate; ``best`` its bookkeeping, before and
    after this sweep; None: the first sweep's, :func:`no_best`) or this was sweep
    :data:`CORRECTION_SWEEPS` (``sweeps`` the ones before); ``held`` (nc,) the held rows, ``hi`` their
    upper bound of ``w``.  On float arrays (the NumPy road) the rows run through :func:`_float_rows`,
    the same operations in the same order on Python floats."""
    nc = len(c)
    best = no_best(nc) if best is None else best
    if all(type(x) is np.ndarray and x.dtype == np.float64 for x in (A, c, l0, held)):
        n = _rows_in_use(A, c, l0)
        l = _float_rows(A[:n, :n].tolist(), c[:n].tolist(), held[:n].tolist(), float(hi), l0[:n].tolist())
        l += [0.0] * (nc - n)
    else:
        act = _step(np.diagonal(A) - _TINY)
        l = list(l0)
        for i in range(nc):
            w = sum(A[i, j] * l[j] for j in range(nc)) + c[i]
            d = A[i, i] + (1.0 - act[i])
            lo = l[i] - act[i] * w / d
            l[i] = _relu(lo) - held[i] * _relu(-(lo + act[i] * hi / d))
    l = _array(l, A)
    w = _sym_times(A, l) + c
    held = np.asarray(held)
    off = _vmax(_relu(-w) + held * _relu(w - hi))
    ok = _step(CORRECTION_RTOL * _vmax(_relu(-c) + held * _relu(c - hi)) - off)
    size = _vmax(_abs(l))
    done = ok * _step(CORRECTION_RTOL * size - _vmax(_abs(l - l0)))
    l, stall, best = stalled(l, off, ok, size, best)
    return l, 1.0 - (1.0 - done) * (1.0 - _step(sweeps + 1.0 - CORRECTION_SWEEPS)) * (1.0 - stall), best


def _sym_times(A, x):
    """``A @ x`` for the symmetric ``A`` (n, n), its mirrored entries equal (the normal block of ``G``): traced
    and large, a block product (:func:`~sparsedyn.contact.friction_linalg._mv_sym`: a loop in the compiled
    code, the same products in the same order); else NumPy's (floats, or a few rows written out)."""
    return _mv_sym(A, np.asarray(x)) if bk.is_symbolic(A) and A.size >= STEP_BLOCK_PAIRS else A @ x


def no_best(nc):
    """The bookkeeping of :func:`stalled` before the first sweep of ``nc`` rows: ``(l_best (nc,) zeros,
    v_best, v_mark, stale, l_mark)``."""
    return np.zeros(nc), _UNSEEN, _UNSEEN, 0.0, 0.0


def stalled(l, off, ok, size, best):
    """``(l_out, stall, best)`` after a sweep to ``l`` (nc,) whose violation is ``off`` (the largest
    ``relu(-w_i) + held_i relu(w_i - hi)``; ``ok`` 1 where it is within the tolerance) and largest
    impulse ``size`` (``max |l_i|``).  ``best`` =
    ``(l_best, v_best, v_mark, stale, l_mark)``: the iterate of the smallest violation so far and that
    violation; the violation and the largest impulse at the last sweep that lowered the
    violation by :data:`STALL_GAIN` of itself, and the sweeps since.  ``stall`` is 1 where the
    violation is not within the tolerance, :data:`STALL_SWEEPS` sweeps in a row have not lowered it,
    and the impulses have grown to :data:`STALL_GROWTH` times their size at the mark; ``l_out`` is
    then ``l_best``, else ``l`` (the same bits).  Traced values or floats."""
    lbest, vbest, vmark, stale, lmark = best
    better = 1.0 - _step(off - vbest)                               # strictly smaller: the first of equals
    lbest = better * l + (1.0 - better) * lbest
    vbest = better * off + (1.0 - better) * vbest
    gain = 1.0 - _step(off - (1.0 - STALL_GAIN) * vmark)
    vmark = gain * off + (1.0 - gain) * vmark
    lmark = gain * size + (1.0 - gain) * lmark
    stale = (stale + 1.0) * (1.0 - gain)
    stall = (1.0 - ok) * _step(stale - STALL_SWEEPS) * _step(size - STALL_GROWTH * lmark)
    return stall * lbest + (1.0 - stall) * l, stall, (lbest, vbest, vmark, stale, lmark)


def _float_relu(x):
    return 0.5 * (x + abs(x))                                       # _relu of a float


def _float_step(x):
    return 0.5 * (1.0 + math.copysign(1.0, x))                      # _step of a float


def _rows_in_use(A, c, l0):
    """The rows of the float arrays ``A`` (nc, nc), ``c``, ``l0`` (nc,) after which a sweep's ``l`` is
    zero to the bit: past them ``A``'s rows and columns (a scene's free slots), ``l0`` are zeros and ``c``
    finite (such a row's update is ``relu(0 - 0 w / 1) = 0``; its zero products change no update of the
    rows before it: at most the sign of a zero ``w``, which ``relu`` takes out)."""
    nz = np.flatnonzero((A != 0.0).any(0) | (A != 0.0).any(1) | (l0 != 0.0) | ~np.isfinite(c))
    return int(nz[-1]) + 1 if len(nz) else 0


def _float_rows(rows, cs, hs, hi, l):
    """The row updates of one sweep (:func:`_correction_sweep`) on Python floats: ``rows`` (nc lists of
    nc) of ``A``, ``cs``, ``hs`` (the held rows), ``l`` (nc,) lists, updated in place and returned.  The
    same operations in the same order as the traced sweep (each ``w_i`` summed from the left), without
    the tracing layer around each one: the NumPy road's hot loop (a large robot's self-contacts, hundreds
    of rows, run hundreds of sweeps a step)."""
    relu = _float_relu
    for i, row in enumerate(rows):
        act = _float_step(row[i] - _TINY)
        w = sum(map(operator.mul, row, l)) + cs[i]
        d = row[i] + (1.0 - act)
        lo = l[i] - act * w / d
        l[i] = relu(lo) - hs[i] * relu(-(lo + act * hi / d))
    return l


def _correction_polish(A, c, l, held, hi):
    """The polish of the sweeps' iterate ``l`` (nc,) (the module docstring): the exact solution on the
    rows the next sweep would make active, where it solves the problem to :data:`CORRECTION_RTOL`, else
    the same on the next guesses of those rows from that solution (:func:`_next_guesses`), up to
    :data:`POLISH_PASSES` guesses, else ``l`` itself; the rest as :func:`_correction_sweep`.  The step's
    stage runs the passes one stage run each (:func:`polish_pass`), to the same bits."""
    after = no_guesses(len(c))
    for k in range(POLISH_PASSES):
        out, ok, after = polish_pass(A, c, l, held, hi, float(k), after)
        if ok >= 0.5 or k + 1 >= passes_after(after):
            return out
    return l


def no_guesses(nc):
    """The guesses of a polish before its first pass (:func:`polish_pass`'s ``after``: (6 nc + 1,) zeros)."""
    return np.zeros(6 * nc + 1)


def passes_after(after):
    """The passes a polish runs where they are refused (a float; ``after`` its first pass's guesses): 2, or 3
    where the first answer had two rows of the wrong sign or more (``after``'s last entry 1)."""
    return 2.0 + after[-1]


def polish_pass(A, c, l, held, hi, k, after):
    """``(l', ok, after')``: guess ``k`` (0, 1 or 2) of :func:`_correction_polish`: 0: the rows a sweep from
    ``l`` would make active, from ``l``; 1, 2: the first pass's two next guesses, ``after`` (6 nc + 1,)
    ``[a, up, start]`` each and whether the third is worth a pass (:func:`_next_guesses`; before the first
    pass :func:`no_guesses`).  ``l'`` the answer where it solves the problem (``ok`` 1), else ``l``;
    ``after'`` the first pass's guesses (this pass's where ``k`` is 0)."""
    nc = len(c)
    diag = np.diagonal(A)
    act = _step(diag - _TINY)
    d = diag + (1.0 - act)
    held = np.asarray(held)
    scale = CORRECTION_RTOL * _vmax(_relu(-c) + held * _relu(c - hi))
    first, third = 1.0 - _step(k - 0.5), _step(k - 1.5)
    a, up = _guess(A, c, l, held, hi, act, d)
    a, up, base = (first * g + (1.0 - first) * ((1.0 - third) * after[j * nc:(j + 1) * nc]
                                                + third * after[(j + 3) * nc:(j + 4) * nc])
                   for j, g in enumerate((a, up, l)))
    cand, raw, ok = _polish_solve(A, c, base, held, hi, a, up, diag, scale)
    nxt = _next_guesses(A, c, base, raw, held, hi, act, d, a, up)
    return ok * cand + (1.0 - ok) * l, ok, first * nxt + (1.0 - first) * np.asarray(after)


def _guess(A, c, l, held, hi, act, d):
    """``(a, up)`` (nc,): the rows a sweep from ``l`` would make active (its row's own minimiser pushing,
    or a held row's pulling: ``up``), 1 or 0."""
    lo = l - act * (_sym_times(A, l) + c) / d                               # each row's own minimiser (w_i = 0)
    up = held * (1.0 - _step(lo + act * hi / d))                 # a held row pulled to its band's top
    return act * (1.0 - _step(-lo) + up), up                     # active: pushing (l > 0) or pulled (l < 0)


def _next_guesses(A, c, base, raw, held, hi, act, d, a, up):
    """The next two guesses after a refused answer ``raw`` (nc,) of the rows ``a`` (``up`` those pulled)
    from ``base``, ``[a, up, start]`` each, then 1 where the second is worth a pass (6 nc + 1,).  Where
    ``raw`` has rows of the wrong sign (a pushing row's negative impulse, a pulled row's positive one):
    without all of them, from ``raw`` (a near-duplicate pair of points, the sweeps moving the load from one
    to the other by a few percent a sweep, is guessed with both active, and their answer pushes one and
    pulls the other); then, where it has two or more, without the first that the path from ``base`` to
    ``raw`` crosses, from where it crosses (the module docstring).  Where it has none, :func:`_guess` from
    ``raw`` (the rows it leaves violated enter)."""
    wrong = a * ((1.0 - up) * _step(-raw - _TINY) + up * _step(raw - _TINY))
    some = _step(_vmax(wrong) - 0.5)
    a2, up2 = _guess(A, c, raw, held, hi, act, d)
    t = wrong * base / (wrong * (base - raw) + (1.0 - wrong))        # where the path crosses zero (0 to 1)
    t = _relu(t) - _relu(t - 1.0) + 2.0 * (1.0 - wrong)
    t_hit = -_vmax(-t)
    hit = wrong * _step(t_hit - t)
    at = (base + (t_hit - _relu(t_hit - 1.0)) * (raw - base)) * (1.0 - hit)
    def without(rows):
        return [some * a * (1.0 - rows) + (1.0 - some) * a2, some * up * (1.0 - rows) + (1.0 - some) * up2]
    return np.concatenate(without(wrong) + [raw] + without(hit) + [at, [_step(np.sum(wrong) - 1.5)]])


def _polish_solve(A, c, l, held, hi, a, up, diag, scale):
    """``(cand, raw, ok)``: the solution ``raw`` (nc,) of the active rows ``a`` (``w = 0``, or ``w = hi``
    on the pulled rows ``up``; the others ``0``) from ``l``, ``cand`` its signs projected, ``ok`` 1 where
    ``cand`` solves the problem to ``scale``."""
    target = up * hi
    base = a * l
    r = a * (target - (_sym_times(A, base) + c))
    M = A * a[:, None] * a[None, :]
    R = M.copy()                                                 # inactive rows: l = 0 (identity rows)
    for i, x in enumerate(1.0 - a + POLISH_REG * _vmax(diag)):
        R[i, i] = M[i, i] + x
    L, inv = _cholesky(R)
    x = _cholesky_solve(L, inv, r, r)
    x = x + _cholesky_solve(L, inv, r - (_sym_times(M, x) + (1.0 - a) * x), r)  # refinement: the regularisation's bias
    raw = base + a * x
    cand = (1.0 - up) * _relu(raw) - up * _relu(-raw)            # the signs of its rows (inactive: 0)
    w = _sym_times(A, cand) + c
    ok = _step(scale - _vmax(_relu(-w) + held * _relu(w - hi))) * _step(scale - _vmax(a * _abs(w - target)))
    return cand, raw, ok


def correction_impulses(A, c, held=None, hi=0.0):
    """The position correction's normal impulses (B, nc) of the step for ``A`` (B, nc, nc) (``G``'s
    normal block), ``c`` (B, nc) (``gap / dt``) and the held rows ``held`` (B, nc) (:func:`held_rows`;
    None: none) with their bound ``hi``: the sweeps of the step's own stage (:func:`_correction_sweep`),
    the same operations in the same order on Python floats (a float's ``_relu`` and ``_vmax`` without
    the tracing layer around each operation)."""
    out = np.zeros(c.shape)
    held = np.zeros(c.shape) if held is None else np.broadcast_to(held, c.shape)
    for b in range(c.shape[0]):
        out[b] = _float_sweeps(A[b], c[b], held[b], float(hi))
    return out


def _float_sweeps(A, c, held, hi):
    """:func:`correction_impulses` of one state (``A`` (nc, nc), ``c``, ``held`` (nc,) floats); the polish
    (:func:`_correction_polish`) is the step's own function on NumPy floats."""
    relu, step = _float_relu, _float_step

    def vmax(xs):                                                   # _vmax: pairwise a + relu(b - a)
        xs = list(xs)
        while len(xs) > 1:
            xs = [a + relu(b - a) for a, b in zip(xs[::2], xs[1::2])] + xs[len(xs) - len(xs) % 2:]
        return xs[0]
    nc = len(c)
    rows, cs, hs = A.tolist(), c.tolist(), [float(x) for x in held]
    cmax = vmax([relu(-x) + h * relu(x - hi) for x, h in zip(cs, hs)])
    l, sweeps, due, change, best = [0.0] * nc, 0.0, polish_first(nc), 0.0, no_best(nc)
    while True:
        l0 = list(l)
        l = _float_rows(rows, cs, hs, hi, l)
        w = (A @ np.array(l) + c).tolist()
        off = vmax([relu(-x) + h * relu(x - hi) for x, h in zip(w, hs)])
        ok = step(CORRECTION_RTOL * cmax - off)
        size = vmax([abs(x) for x in l])
        done = ok * step(CORRECTION_RTOL * size - vmax([abs(x - y) for x, y in zip(l, l0)]))
        out, stall, best = stalled(np.array(l), off, ok, size, best)
        if 1.0 - (1.0 - done) * (1.0 - step(sweeps + 1.0 - CORRECTION_SWEEPS)) * (1.0 - stall) >= 0.5:
            return out.tolist()
        sweeps += 1.0
        flag, change = polish_due(sweeps, due, np.array(l), np.array(l0), change)
        if flag >= 0.5:
            l = _correction_polish(A, c, np.array(l), np.asarray(held, float), hi).tolist()
            due = 2.0 * sweeps
