"""The polish's guess of a contact that its iterate holds open (:mod:`~sparsedyn.contact.friction_polish`).

The polish reads each contact's mode from the impulses of an iterate (ADMM's, the previous answer, or a
warm start: the previous step's impulses).  An open contact's impulse is zero, so read alone it stays
open in every polish after it, whatever its velocity: along a trajectory a contact that the previous
step left open (one end of a short capsule lifted while the other rests, a box rocking on one edge)
and that closes in this one is never found by the polish, which then fails and leaves the step to
ADMM from its start.  The active-set rule of the semismooth Newton methods reads the mode from the
impulse and the velocity together, ``lambda_n - k u_n > 0`` (Hintermüller, Ito and Kunisch, "The
primal-dual active set strategy as a semismooth Newton method", 2002); here, per contact, with ``k``
its own ``1 / G_nn``: an open contact (``lambda = 0``) whose normal velocity ``u_n = (G lambda + g)_n``
closes, ``u_n < 0``, is guessed closed with the normal impulse ``-u_n / G_nn`` that stops it alone,
and sticking (no friction: strictly inside its cone).  Sticking, not the friction of its local
problem, which would often be on its cone's circle: on a redundant set (a box's four corners) a
guess of sliding is solved by friction on the circle at zero slip, a pair of opposed frictions that
no motion shows (a solution of Coulomb's law, not the least-norm one that a cold step gives and the
step's derivatives differentiate); a contact that does slide has its friction outside the cone in
the sticking answer, and the next polish, from that answer's projection, has it sliding.  A closed
contact's guess is its impulse as before, and an open one that separates (``u_n >= 0``) stays open:
at a solution the guess is the solution's modes.  Sticking, unless its own rows cannot stop its
tangential velocity within its cone (``|u_t| > mu lambda_n k``, ``k`` the largest eigenvalue of its
``G_tt``: no friction inside the cone stops it): then sliding, its friction ``mu lambda_n`` against
``u_t``, where that slip is more than the iterate's own error (:data:`SLIP_ERROR`).  A velocity, not
the local problem's friction, so a point that lands without slipping (a box's corners) is still guessed
sticking; one that lands slipping (the end of the dm_control humanoid's
foot capsule landing beside the other, which carries the foot: 6 mm/s of slip against 1.8 mm/s of
closing) is guessed sliding, where the guess of it sticking beside the other, a nearly redundant pair
(below), asks the mode system for a squeeze of impulses ten times the answer's.

A polish's answer is read the same way for the round's next step (:func:`answer_closing_guess`), where
the answer's velocity closes an open contact faster than the answer's own error: its velocities are
exact for its modes, so that contact is a mode the answer missed.  There the guess closes it however
little it carries: a contact whose impulse in the solution is below what the modes read as closed
(the polish's ``OPEN`` of the largest) is otherwise open in every answer, whose velocity then fails
the stopping test by its closing (the dm_control humanoid lying with its limits held: an elbow at
its stop carrying 1e-7 of the largest impulse, closing at 7e-8 m/s in the answers: a round of three
polishes rejected and the step's 21 iterations, against 7 with the guess, whose round's second polish
is accepted).

Beside a closed near-duplicate (two points of one body millimetres apart, their normal rows of ``G``
nearly parallel) an open contact that closes is not closed as well: the mode system of the pair is
nearly singular along their difference, and its answer's huge opposite impulses wreck the other
contacts' modes.  In a solution one of such a pair carries the load and the other touches at zero
impulse, so :func:`swap_guess` moves the load to the one that closes (a polish's repeated steps, from
answers whose velocities are exact for their modes, once it closes faster than the answer's own error),
unless the swap before opened it and it closes again (both of the pair close: each foot of solo12
standing on two points a millimetre apart, where the swaps cycled for the whole budget): then the pair's
own normal rows decide, both keep a share where the impulses that stop both press, else the swap
(:func:`_pair_share`); and :func:`merge_guess` gathers the load that ADMM's iterate spreads over such a
group on the member that carries most (a round's first polish).

Two contacts of one body side by side (the two capsules of the dm_control humanoid's foot: normal rows'
correlation 0.87, below :data:`NEAR`) are a nearly redundant pair too: their rows differ by what the
body's rigidity keeps (the distance between the points), so the mode system of both closed is nearly
singular along a squeeze, equal and opposite frictions pressing the points together or apart.  Where
the foot rocks from one capsule onto the other (one closing as the other lifts: a mode change that
its warm start cannot show), the polish of both closed answers with such a squeeze: both sliding,
their frictions opposed, impulses ten times the solution's.  No motion of a body whose points are a few
centimetres apart slides them opposite ways at the rates of a step (a turn about the normal between
them), so on a polish's answer such a pair (correlation above ``1 - PAIR``) is merged on the member
that carries more (:func:`merge_guess` with ``opposed``): its sum is inside the cone, the member
sticks, the other opens, which is the rocking's next mode (steps 1, 8 and 15 of the humanoid's
rollout: two polishes, where the round's polishes stalled and ADMM ran 4 to 13 iterations).
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .friction_problem import _TINY, _abs, _norms, _relu, _step, _vmax

__all__ = ["closing_guess", "answer_closing_guess", "swap_guess", "merge_guess", "answer_error", "pairs_guessed",
           "sticking_guess", "squeeze_guess", "ratio_test", "pairs_apart", "PAIRS_APART"]


#: An open contact that closes is guessed sliding only where its slip is more than this many times the
#: iterate's own error (its closed contacts' largest normal velocity, which their modes ask to be zero):
#: a box warm-started on one edge turns about it, its closed corners moving at 14.7 mm/s, and its far
#: corners slip as fast (the error's, not a slip: the answer sticks); the humanoid's foot capsule lands
#: slipping at 6.2 mm/s beside closed contacts off by 0.32 mm/s.
SLIP_ERROR = 2.0


def closing_guess(G, Z, u, active, open_fraction, mu):
    """The iterate ``Z`` (nc, 3) with each open contact that its velocity ``u`` (nc, 3) closes given the
    normal impulse ``lambda_n`` that stops it alone and no friction (sticking), or where its rows cannot
    stop its tangential velocity within its cone (``|u_t| > mu lambda_n k``, ``k`` the largest eigenvalue
    of its ``G_tt``) and that velocity is more than :data:`SLIP_ERROR` times the iterate's own error
    (:func:`answer_error`), the friction ``mu lambda_n`` against ``u_t`` (sliding; the module docstring):
    ``G`` (m, m), ``active`` (nc,) 1 where the contact has rows in ``G``, ``mu`` (nc,) the contacts'
    friction coefficients; a contact is open where its normal impulse is at most ``open_fraction`` of
    the largest impulse of ``Z`` (the polish's ``OPEN``), and closed by its velocity where that impulse
    is more than this.  Traced values or floats."""
    gnn = np.diagonal(G)[2::3]
    floor = open_fraction * _vmax(_abs(Z))
    ln = _relu(-u[:, 2]) / (_relu(gnn) + _TINY)
    closes = active * _step(floor - Z[:, 2]) * (1.0 - _step(floor - ln))
    a, b, e = np.diagonal(G)[0::3], np.diagonal(G)[1::3], np.diagonal(G, 1)[0::3]
    k = 0.5 * (a + b) + bk.sqrt(0.25 * (a - b) * (a - b) + e * e)
    slip = bk.sqrt(u[:, 0] * u[:, 0] + u[:, 1] * u[:, 1])
    # mu ln / |u_t| where the slip is beyond its rows' reach (then |u_t| > 0) and more than SLIP_ERROR
    # times the iterate's own error, else 0
    err = answer_error(Z, u, active, open_fraction)
    f = (1.0 - _step(mu * ln * k - slip)) * (1.0 - _step(SLIP_ERROR * err - slip)) * mu * ln / (slip + _TINY)
    local = np.stack([-f * u[:, 0], -f * u[:, 1], ln], 1)
    return Z + closes[:, None] * (local - Z)


def answer_closing_guess(G, Z, u, active, open_fraction):
    """A polish's answer ``Z`` (nc, 3) with each open contact that its velocity ``u`` (nc, 3) closes
    faster than the answer's own error (:func:`answer_error`) and that has no closed near-duplicate
    (:data:`NEAR`; those are :func:`swap_guess`'s) guessed closed and sticking, its normal impulse the one
    that stops it alone (as :func:`closing_guess`), at least twice ``open_fraction`` of the largest
    impulse (so that the next polish reads it closed).  The answer's velocities are exact for its modes,
    so such a contact is a mode the answer missed, not ADMM's error: a contact that carries almost
    nothing, whose impulse :func:`closing_guess` (and the polish's modes) would read open (a limp arm
    resting at its joint's limit: its stop closing at 7e-8 m/s, an impulse of 1e-7 of the largest,
    which the stopping test does not forgive).  ``G``, ``active``, ``open_fraction`` as
    :func:`closing_guess`."""
    _, near, floor, closed, ln, beyond = _answer_reading(G, Z, u, active, open_fraction)
    closes = beyond * (1.0 - _step(near @ closed - 0.5))
    ln = ln + _relu(2.0 * floor - ln)
    local = np.stack([0.0 * ln, 0.0 * ln, ln], 1)
    return Z + closes[:, None] * (local - Z)


#: Two contacts are near-duplicates where the correlation of their normal rows of ``G``,
#: ``G_ij / sqrt(G_ii G_jj)``, is above ``1 - NEAR`` (the points of one body a few millimetres apart
#: on one plane: talos's soles on a box, 0.988 to 0.99998).
NEAR = 0.02


#: Two contacts are a nearly redundant pair of one body where the correlation of their normal rows is above
#: ``1 - PAIR`` (the two capsules of the dm_control humanoid's foot: 0.87; its other contacts' pairs
#: below 0.04): merged on a polish's answer only where both slide with opposed frictions
#: (:func:`merge_guess`'s ``opposed``; the module docstring).
PAIR = 0.2


#: Two near-duplicates are copies of one contact where the correlation of their normal rows is above
#: ``1 - DUPLICATE`` (one point given twice: 1 to rounding; talos's nearest pair on a box, 0.99998).
DUPLICATE = 1e-9


def _near(G, Z, copies=True, within=NEAR):
    """``(gnn, near)``: the diagonal of ``G``'s normal rows (nc,) (at least 0) and the 0/1 matrix (nc, nc)
    of the near-duplicate pairs (correlation above ``1 - within``: :data:`NEAR`; 0 on the diagonal;
    ``copies`` False: less the copies of one contact, :data:`DUPLICATE`), of ``Z``'s kind (traced or
    float)."""
    nc = Z.shape[0]
    rows = 3 * np.arange(nc) + 2
    gnn = _relu(np.diagonal(G)[rows])
    Gn = G[rows[:, None], rows[None, :]]

    def pair(i, j):
        root = bk.sqrt(gnn[i] * gnn[j])
        near = _step(Gn[i, j] - (1.0 - within) * root)
        return near if copies else near * (1.0 - _step(Gn[i, j] - (1.0 - DUPLICATE) * root))
    # each pair once, mirrored (G is symmetric: its entries ij and ji are equal)
    near = np.full((nc, nc), 0.0, dtype=object if bk.is_symbolic(Z) else float)
    for i in range(nc):
        for j in range(i + 1, nc):
            near[i, j] = near[j, i] = pair(i, j)
    return gnn, near


#: The swaps of one guess (:func:`swap_guess`): those of the open contacts that close at least this
#: fraction as fast as the fastest (their closing velocity over ``sqrt(G_nn)``).  One pair a guess, not
#: every pair: a pair's choice reads a closing velocity of a few micrometres a second, which the other
#: pairs' wrong choices perturb by as much, so swapping all at once flips a right pair with the wrong
#: ones and the polishes cycle (talos fallen onto a box: two pairs swapping back and forth).
SWAP_SHARE = 0.99


def swap_guess(G, Z, u, active, open_fraction, back=0.0):
    """The iterate ``Z`` (nc, 3) with the load of a closed contact moved to an open near-duplicate
    (:data:`NEAR`) that its velocity ``u`` (nc, 3) closes, the one that closes fastest (and any within
    :data:`SWAP_SHARE` of it): the open one takes the closed one's impulse and the closed one opens.
    ``G`` (m, m), ``active`` (nc,) 1 where the contact has rows in ``G``, ``open_fraction`` as
    :func:`closing_guess`; ``back`` (nc,) 1 for each contact that the last guess's swap opened: where such a
    one closes, the pair's share (:func:`_pair_share`), not the whole load.  Traced values or floats.

    Closing the open contact beside its near-duplicate (:func:`closing_guess`, the primal-dual active
    set's rule) would give a mode system that is nearly singular along their difference (an eigenvalue
    of ``G`` a thousandth of the rest), whose answer carries huge opposite impulses and wrecks the other
    contacts' modes; in a solution of such a pair one carries the load and the other touches at zero
    impulse (its ``u_n`` small and positive), so the guess is which one.  Used on a polish's answers,
    whose velocities are exact for their modes (not on ADMM's iterates) but for the error of its
    Newton step on the sliding directions: an open contact swaps only where it closes faster than
    every closed contact's normal velocity, which the answer's modes ask to be zero, is off (the
    answer's own error; talos fallen onto a box: a pair's closing of 1.5e-6 m/s beside answers off by
    1e-4 m/s, a swap on which sent the polishes round a cycle of two pairs' choices)."""
    gnn, near, floor, closed, ln, beyond = _answer_reading(G, Z, u, active, open_fraction)
    closes = beyond * (1.0 - _step(floor - ln))
    W = near * closes[:, None] * closed[None, :]                    # W[j, i]: j may take i's load
    # the fastest closing of the candidates (an open contact beside a closed near-duplicate)
    speed = _relu(-u[:, 2]) / (bk.sqrt(gnn) + _TINY) * _step(np.sum(W, 1) - 0.5)
    W = W * _step(speed - SWAP_SHARE * _vmax(speed))[:, None]
    F = W * (1.0 + np.reshape(back, (-1, 1)) * (_pair_share(G, Z, u, gnn) - 1.0))     # F[j, i]: j's share of i's
    taken = _relu(1.0 - _relu(1.0 - np.sum(F, 0)))                  # what each closed contact gives, at most all
    return Z * (1.0 - taken)[:, None] + F @ Z


def _answer_reading(G, Z, u, active, open_fraction):
    """``(gnn, near, floor, closed, ln, beyond)`` of a polish's answer ``Z`` (nc, 3) and its velocities
    ``u`` (nc, 3), as :func:`swap_guess` and :func:`answer_closing_guess` read it: :func:`_near`'s
    ``gnn`` and ``near``, the impulse below which a contact is open (``open_fraction`` of the largest),
    1 for each closed contact, the normal impulse ``-u_n / G_nn`` that stops each alone (0 where it
    separates), and 1 for each open contact with rows that closes faster than the answer's own error
    (:func:`answer_error`); ``G``, ``active`` as :func:`closing_guess`."""
    gnn, near = _near(G, Z)
    floor = open_fraction * _vmax(_abs(Z))
    closed = active * _step(Z[:, 2] - floor)
    ln = _relu(-u[:, 2]) / (gnn + _TINY)
    err = answer_error(Z, u, active, open_fraction)
    return gnn, near, floor, closed, ln, active * (1.0 - closed) * (1.0 - _step(err + u[:, 2]))


#: From this many contacts a polish's later step runs its guesses on pairs in a stage of its own, only where
#: :func:`pairs_guessed` says one applies: at 16 contacts they are 27,000 operations and the test 3,900; at
#: 4 the step is 13,000 in all and the test would save nothing.
PAIRS_APART = 16


def pairs_apart(nc):
    """Whether a later step of ``nc`` contacts runs its guesses on pairs in a stage of its own."""
    return nc >= PAIRS_APART


def pairs_guessed(G, Z, u, active, open_fraction, mu, stick):
    """1 where a guess on pairs of contacts may change a polish's answer ``Z`` (nc, 3) (velocities ``u``
    (nc, 3)), else 0: a pair of closed contacts that slide with opposed frictions and are a nearly
    redundant pair of one body (:func:`merge_guess`'s ``opposed``; copies of one contact counted too),
    or an open contact that the answer's velocity closes beside a closed near-duplicate
    (:func:`swap_guess`).  Where it is 0 those guesses give ``Z`` back, so a polish step may leave them
    out: their programs are eight times this test's (the pairs' normal correlations and a product per
    pair).  ``mu`` (nc,), ``stick`` as :func:`merge_guess`'s ``opposed``; ``G``, ``active``,
    ``open_fraction`` as :func:`closing_guess`."""
    _, near, floor, closed, ln, beyond = _answer_reading(G, Z, u, active, open_fraction)
    swaps = np.sum(beyond * (1.0 - _step(floor - ln)) * _step(near @ closed - 0.5))
    _, pairs = _near(G, Z, within=PAIR)
    slide, apart = _opposed_sliding(Z, mu, stick)
    sliding = closed * slide
    nc = Z.shape[0]
    opposed = sum(pairs[i, j] * sliding[i] * sliding[j] * apart[i, j] for i in range(nc) for j in range(i + 1, nc))
    return 1.0 - _step(0.5 - (swaps + opposed))


def _pair_share(G, Z, u, gnn):
    """``F`` (nc, nc): the share ``F[j, i]`` of the closed contact ``i``'s impulse that the open contact ``j``
    takes where both close: from the pair's own normal rows (the others' impulses held), the normal
    impulses ``(n_i, n_j)`` that stop both, ``n = Z_n - G_pair^-1 u_n``; where both press, ``n_j / (n_i + n_j)``
    (a foot's two points each carrying part: solo12 standing), else 1 (the swap).  ``gnn`` (nc,) the
    normal rows' diagonal."""
    rows = 2 + 3 * np.arange(Z.shape[0])
    e = G[rows[:, None], rows[None, :]]                              # e[j, i] = G_ij (symmetric)
    a, b = gnn[None, :], gnn[:, None]                               # i's and j's diagonal
    ui, uj = u[None, :, 2], u[:, None, 2]
    det = _relu(a * b - e * e) + 1e-14 * a * b + _TINY              # (copies of one point: a swap)
    ni = Z[None, :, 2] - (b * ui - e * uj) / det
    nj = Z[:, None, 2] - (a * uj - e * ui) / det
    both = _step(ni - _TINY) * _step(nj - _TINY)
    return both * nj / (ni + nj + (1.0 - both)) + (1.0 - both)


def answer_error(Z, u, active, open_fraction):
    """A polish's answer's own error [m/s]: the largest normal velocity ``|u_n|`` of its closed contacts
    (impulse ``Z`` (nc, 3) above ``open_fraction`` of the largest), which its modes ask to be zero;
    ``u`` (nc, 3) the answer's velocities, ``active`` (nc,) as :func:`closing_guess`."""
    closed = active * _step(Z[:, 2] - open_fraction * _vmax(_abs(Z)))
    return _vmax(closed * _abs(u[:, 2]))


def _opposed_sliding(Z, mu, stick):
    """``(slide (nc,), apart (nc, nc))`` of impulses ``Z`` (nc, 3): 1 for each contact whose friction is within
    ``stick`` of its cone's radius at ``mu`` (nc,) (sliding), and 1 for each pair whose frictions are opposed
    (``lambda_t,i . lambda_t,j < 0``; 0 on the diagonal)."""
    t = Z[:, :2]
    slide = _step(bk.sqrt(t[:, 0] * t[:, 0] + t[:, 1] * t[:, 1]) - (1.0 - stick) * mu * Z[:, 2])
    dot = t[:, None, 0] * t[None, :, 0] + t[:, None, 1] * t[None, :, 1]
    nc = Z.shape[0]
    return slide, np.array([[1.0 - _step(dot[i, j]) for j in range(nc)] for i in range(nc)],
                           dtype=object if bk.is_symbolic(Z) else float)


def merge_guess(G, Z, active, open_fraction, opposed=None):
    """The iterate ``Z`` (nc, 3) with the impulse of each closed contact given to its closed
    near-duplicates (:data:`NEAR`) that carry more (shared evenly among them), twice (a group of three:
    the smallest to the two others, then the middle one to the largest): in a solution one of a group
    of near-duplicates carries the load and the others touch at zero impulse, where ADMM's iterate
    spreads it over them (talos fallen onto a box: pairs of sliding contacts with opposite friction, a
    pair's sum inside its cone: one contact sticking), and the group's resultant is kept to the
    difference of its normal rows.  ``G``, ``active``, ``open_fraction`` as :func:`closing_guess`.
    Traced values or floats.  Used on ADMM's iterates, before a round's first polish.  Copies of one
    contact (:data:`DUPLICATE`) keep their shares: the mode system's least-norm answer splits their load
    evenly, which a merge on rounding's differences would not.

    ``opposed``: ``(mu (nc,), stick)``: the pairs of one body (:data:`PAIR`) instead, only those whose
    both contacts slide (their friction within ``stick`` of their cone's radius) with opposed
    frictions (``lambda_t,i . lambda_t,j < 0``): a polish's squeeze of a nearly redundant pair (the
    module docstring).  Used on a polish's answers."""
    nc = Z.shape[0]
    kind = object if bk.is_symbolic(Z) else float
    _, near = _near(G, Z, copies=False, within=NEAR if opposed is None else PAIR)
    if opposed is not None:
        slide, apart = _opposed_sliding(Z, *opposed)
        near = near * slide[:, None] * slide[None, :] * apart
    for _ in range(2):
        floor = open_fraction * _vmax(_abs(Z))
        closed = active * _step(Z[:, 2] - floor)
        n = Z[:, 2]
        # more[i, j]: 1 where i carries strictly more than j (a tie: neither gives)
        more = np.array([[1.0 - _step(n[j] - n[i]) for j in range(nc)] for i in range(nc)], dtype=kind)
        W = near * more * closed[:, None] * closed[None, :]          # W[i, j]: i takes a share of j's impulse
        count = np.sum(W, 0)
        taken = _step(count - 0.5)
        Z = Z * (1.0 - taken)[:, None] + (W / (count + 1.0 - taken)[None, :]) @ Z
    return Z


#: A contact on its cone's circle is guessed sticking (:func:`sticking_guess`) only where its slip moves along its
#: friction at more than ``ALONG`` of its speed (within 60 degrees of it): a slip nearly across the friction is a
#: sliding direction that Newton's next step turns, not friction that the contact does not need.
ALONG = 0.5


def sticking_guess(Z, u, mu, err, stick):
    """The answer ``Z`` (nc, 3) with each contact on or past its cone's boundary (Newton's next
    iterate, :func:`~sparsedyn.contact.friction_polish.polish`: past it by the second order of its
    turn) whose velocity ``u`` (nc, 3) moves along its friction (``u_t . lambda_t > 0``, which Coulomb's
    law forbids a sliding contact) faster than ``err`` [m/s], the answer's own error (its closed
    contacts' largest normal velocity, which its modes ask to be zero), and at more than :data:`ALONG`
    of its slip's speed (a slip nearly across the friction is a direction Newton's next step turns),
    guessed sticking: its friction's size set to ``1 - 2 stick`` of the cone's radius (``stick`` the
    polish's ``STICK``, so that :func:`~sparsedyn.contact.friction_polish.modes` reads it sticking).
    Below that error the sign is the Newton step's, not the slip's (talos fallen onto a box: slips of
    1e-5 m/s beside answers off by 1e-4).  ``mu`` (nc,).  Traced values or floats."""
    t, n = Z[:, :2], Z[:, 2]
    r = _norms(t)
    edge = _step(r - (1.0 - stick) * mu * n) * _step(n - _TINY)
    a = (u[:, 0] * t[:, 0] + u[:, 1] * t[:, 1]) / (r + _TINY)
    along = _step(a - err) * _step(a - ALONG * _norms(u[:, :2]))
    f = 1.0 + edge * along * ((1.0 - 2.0 * stick) * mu * n / (r + _TINY) - 1.0)
    return np.concatenate([t * f[:, None], n[:, None]], 1)


#: A direction of impulses ``d`` (unit) is in ``G``'s null space where ``|G d|`` is below ``NULL`` of ``G``'s
#: largest diagonal entry: a squeeze of a rigid body's redundant contacts, which no velocity shows (talos lying on
#: the floor: 1e-9), not a slip that the projection of another contact left (``G``'s smallest nonzero
#: eigenvalues, 1e-5 of its scale on talos and the dm_control humanoid).
NULL = 1e-7


def squeeze_guess(Z, u, mu, err, stick, mv, gmax):
    """The answer ``Z`` (nc, 3) squeezed where its sticking contacts slip: where the mode system of the sticking
    contacts has no solution (a rigid body's two contacts, one touching, the other closing its speculative gap
    ``gap / dt``: closing it turns the body, which slips the pair against each other by about
    ``gap^2 / (r dt)``, ``r`` their distance, at the level of the solver's tolerance for gaps of microns), the
    answer's least-squares residual is their slips ``u`` (nc, 3), opposed along the pair's squeeze, a direction
    of ``G``'s null space.  The solution presses the pair along it until one of them reaches its cone's
    boundary and slides; so the impulses of the sticking contacts that slip faster than ``err`` [m/s] (the
    answer's own error) move against their slips, ``Z - s u / |u|`` (a velocity no impulse along ``G``'s null
    space changes), ``s`` as far as the first of them reaches its cone (``stick`` the polish's ``STICK``: on the
    boundary it reads sliding, its friction against its slip), where ``mv`` (a product with ``G``, (m,) -> (m,))
    finds that direction in ``G``'s null space (:data:`NULL` of ``gmax``, ``G``'s largest diagonal entry);
    else ``Z``.  ``mu`` (nc,).  Traced values or floats."""
    t, n = Z[:, :2], Z[:, 2]
    inside = (1.0 - _step(_norms(t) - (1.0 - stick) * mu * n)) * _step(n - _TINY)
    slips = inside * _step(_norms(u[:, :2]) - err)
    d = -u * slips[:, None]
    size = bk.sqrt(np.sum(d * d))
    d = d / (size + _TINY)
    a, b = d[:, :2], d[:, 2]
    # the first s > 0 with |t + s a| = mu (n + s b) (C < 0 inside): the largest 1 / s
    A, B, C, root = _cone_crossing(t, n, a, b, mu)
    crosses = slips * _step(A - _TINY)
    r = _vmax(crosses * (B + root) / (-2.0 * crosses * C + (1.0 - crosses) + _TINY))
    apply = _step(r - _TINY) * _step(NULL * gmax - _vmax(_abs(mv(d.reshape(-1)))))
    s = apply / (r + (1.0 - apply))
    return Z + s * d


def ratio_test(z, lam, op, mu, open_, stick, slips=1.0):
    """The step from the iterate ``z`` (nc, 3) towards the mode system's answer ``lam`` (nc, 3) as far as the first
    contact closed in ``z``'s modes (``op`` (nc,) 0) whose normal impulse the answer makes negative reaches zero
    (``open_`` the polish's ``OPEN``), or, where ``slips`` is 1, whose friction, strictly inside its cone in ``z``
    (``mu`` (nc,), ``stick`` the polish's ``STICK``), the answer puts outside it with a positive normal impulse
    reaches the cone (an active-set method's ratio test); ``lam`` itself where none does.  Traced values or floats.

    For a mode system with no solution, whose regularised answer runs off along ``G``'s null space (by ``1 / EPS``
    of the inconsistency a solve).  A redundant set (a box's four corners on a plane) whose targets ``g_n`` no rigid
    motion meets (one corner within ``TOUCHING_GAP`` of the plane, without the speculative ``gap / dt`` of the
    others: go1's trunk landing flat on it): the answer makes a diagonal pair of corners negative, and the
    solution has one corner open, the first that this direction opens (the full step opens both, and the next
    polishes stall with the other diagonal).  Two sticking contacts whose tangential velocities no impulse zeroes
    together (the dm_control humanoid lying on the floor: two of its contacts slipping +-5.9e-9 m/s, seven times
    the complementarity's test): the answer squeezes them along their internal friction, and the solution has the
    first that reaches its cone sliding at that slip (the full step puts one far outside its cone, and projected the
    answer's residual was 1e7 times the test: rejected rounds until Gauss-Seidel's budget ran out)."""
    zn, ln = z[:, 2], lam[:, 2]
    cut = (1.0 - op) * (1.0 - _step(ln)) * _step(zn - open_ * _vmax(_abs(z)))
    ratio = cut * zn / (cut * (zn - ln) + (1.0 - cut)) + (1.0 - cut)
    # the friction's root in (0, 1), from its value c < 0 at a = 0 and > 0 at a = 1: 2 c / (-b - sqrt(b^2 - 4 a c)),
    # whatever the sign of a (no cancellation)
    t = z[:, :2]
    _, b, c, disc = _cone_crossing(t, zn, lam[:, :2] - t, ln - zn, mu)
    inside = (1.0 - op) * _step(mu - _TINY) * (1.0 - _step(_norms(t) - (1.0 - stick) * mu * zn))
    cone = slips * inside * _step(ln) * (1.0 - _step(mu * ln - _norms(lam[:, :2])))
    root = 2.0 * c / (cone * (-b - disc) + (cone - 1.0))
    alpha = 1.0 - _vmax(np.concatenate([1.0 - ratio, cone * (1.0 - root)]))
    return z + alpha * (lam - z)


def _cone_crossing(t, n, dt, dn, mu):
    """``(A, B, C, sqrt(B^2 - 4 A C))`` (nc,) of the quadratic ``A s^2 + B s + C = 0`` where impulses of tangential
    part ``t + s dt`` (nc, 2) and normal ``n + s dn`` (nc,) reach their cones at ``mu`` (nc,), ``|t + s dt| = mu (n + s
    dn)`` (the root 0 where the discriminant is negative)."""
    A = dt[:, 0] * dt[:, 0] + dt[:, 1] * dt[:, 1] - mu * mu * dn * dn
    B = 2.0 * (t[:, 0] * dt[:, 0] + t[:, 1] * dt[:, 1] - mu * mu * n * dn)
    C = t[:, 0] * t[:, 0] + t[:, 1] * t[:, 1] - mu * mu * n * n
    return A, B, C, bk.sqrt(_relu(B * B - 4.0 * A * C))
