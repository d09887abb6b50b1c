"""The contact solver's polish (:mod:`sparsedyn.contact.friction_polish`): the mode guess, the mode
system's solution on hand-built problems against their analytic answers, Coulomb's law at the
polished answers (residuals computed here from their definitions).  The polish stage's rounds in the
kernel's loop: ``test_friction_polish_stage.py``."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import EPS, rounding_bound
from sparsedyn.contact import friction_polish as fp
from test_friction import DT, G, H, MASS, MODEL, MU, Q0, TOL, Z, corners, push, tilted

ACTIVE1 = np.ones(1)


def _coulomb(lam, u, mu):
    """Coulomb's law's worst violations at impulses ``lam`` (nc, 3) and velocities ``u`` (nc, 3), from
    the definitions: outside the cone ``|t| <= mu n``, a closing normal velocity, a normal impulse at
    a separating contact, a tangential velocity at a contact inside its cone, and a sliding velocity
    not opposite its friction."""
    t, n = lam[:, :2], lam[:, 2]
    r, s = np.linalg.norm(t, axis=1), np.linalg.norm(u[:, :2], axis=1)
    cone = np.maximum(r - mu * n, 0.0).max()
    closing = np.maximum(-u[:, 2], 0.0).max()
    separating = np.abs(n * u[:, 2]).max()
    inside = r < mu * n * (1 - 1e-6)
    sticking = (s * inside).max()
    sliding = ~inside & (n > 0) & (mu > 0)
    oppose = (np.linalg.norm(u[:, :2] * r[:, None] + s[:, None] * t, axis=1) / np.maximum(r, 1e-300) * sliding).max()
    return cone, closing, separating, sticking, oppose


def _spd(seed, n=3, cond=10.0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return Q @ np.diag(np.geomspace(1.0, 1.0 / cond, n)) @ Q.T


def _refine_bound(A, scale):
    """The error left by the polish's iterated Tikhonov solve of the symmetric positive definite ``A``
    along its smallest eigenvalue ``sigma``: ``(eps / (sigma + eps))^k`` after its ``k`` solves
    (:func:`~sparsedyn.contact.friction_polish.solves`), ``eps = EPS_polish scale``, plus rounding."""
    w = np.linalg.eigvalsh(A)
    eps = fp.EPS * scale
    return (eps / (w.min() + eps)) ** fp.solves(A.shape[0]) + rounding_bound(A.shape[0], np.linalg.cond(A))


def test_modes_of_an_iterate_open_sticking_sliding_and_frictionless():
    """The mode guess: zero normal impulse (or one below 1e-6 of the largest): open; strictly inside
    the cone: sticking; on its boundary, or any closed frictionless contact: sliding, along the
    tangential impulse; a contact without rows (inactive) is open whatever its impulse."""
    z = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 1.0], [0.3, 0.4, 1.0], [0.0, 0.0, 0.5], [0.2, 0.0, 1e-9],
                  [0.1, 0.1, 2.0]])
    mu = np.array([0.5, 0.5, 0.5, 0.0, 0.5, 0.5])
    active = np.array([1.0, 1, 1, 1, 1, 0])
    op, stick, slide, theta = fp.modes(z, mu, active)
    assert list(op) == [1, 0, 0, 0, 1, 1]
    assert list(stick) == [0, 1, 0, 0, 0, 0]
    assert list(slide) == [0, 0, 1, 1, 0, 0]
    assert np.allclose(theta[2], [0.6, 0.8], rtol=0, atol=4 * EPS)


@pytest.mark.parametrize("seed", range(3))
def test_a_sticking_contact_is_solved_by_one_polish(seed):
    """One contact whose answer is strictly inside its cone: the polish of any iterate inside the cone
    is ``-G^-1 g`` (all three velocities zero), accepted."""
    Gm = _spd(seed)
    lam = np.array([0.1, -0.05, 1.0])                            # |t| = 0.11 < 0.5 * 1
    g = -Gm @ lam
    z = np.array([0.0, 0.0, 0.3])                                # a poor iterate: only its mode counts
    out, u, res, ls, vs, ok, conv = fp.polished(Gm, g, np.array([0.5]), z, 1.0, ACTIVE1, np.abs(g).max(),
                                                Gm.diagonal().max(), TOL)
    assert conv == 1.0 and ok == 1.0
    assert np.abs(out - lam).max() <= _refine_bound(Gm, 1.0) * 10 * np.abs(lam).max()
    assert np.abs(u).max() <= rounding_bound(3, np.linalg.cond(Gm)) * np.abs(g).max() * 10


def test_a_point_sliding_down_a_slope_gets_the_coulomb_impulse():
    """A point of mass ``m`` on a slope of angle ``a`` above the friction angle (``tan a > mu``), in the
    contact's axes ``[t_x (down the slope is -x), t_y, n]``: ``G = I / m``, the free velocity
    ``g = dt g_0 (-sin a, 0, -cos a)``.  It slides: ``lambda_n = m g_0 cos a dt`` (no normal velocity),
    ``lambda_t = mu lambda_n`` up the slope, the velocity ``dt g_0 (mu cos a - sin a)`` down it."""
    m, a, mu = 2.0, 0.6, 0.3
    assert np.tan(a) > mu
    Gm, g = np.eye(3) / m, DT * G * np.array([-np.sin(a), 0.0, -np.cos(a)])
    ln = m * G * np.cos(a) * DT
    z = np.array([mu * 0.5 * ln, 0.0, 0.5 * ln])                 # on the cone, up the slope: the mode, not the size
    out, u, res, ls, vs, ok, conv = fp.polished(Gm, g, np.array([mu]), z, 1.0 / m, ACTIVE1, np.abs(g).max(), 1.0 / m,
                                                TOL)
    assert conv == 1.0
    bound = _refine_bound(Gm, 1.0 / m) * 10
    assert np.abs(out - ln * np.array([mu, 0.0, 1.0])).max() <= bound * ln
    assert np.abs(u - np.array([DT * G * (mu * np.cos(a) - np.sin(a)), 0.0, 0.0])).max() <= bound * np.abs(g).max()


def test_a_sliding_direction_guessed_off_is_corrected_within_the_polish():
    """A point sliding down a slope of 1 rad (``mu = 0.3``) with the friction's direction guessed 1e-4
    rad off: Coulomb's residuals see the error only squared (the complementarity ``mu lambda_n |u_t|
    delta^2 / 2``, below tol = 1e-8 of the scales' product), the polish's own test the velocity's
    opposition to the friction (``|u_t| delta``).  Each of the polish's solves turns the direction to
    the friction of the contact's local problem, ``-(u_t - G_tt lambda_t)``; for a point mass
    (``G = I / m``) that is ``-g_t``, the exact direction, so one polish gives the analytic impulses
    and is accepted."""
    m, a, mu = 2.0, 1.0, 0.3
    Gm, g = np.eye(3) / m, DT * G * np.array([-np.sin(a), 0.0, -np.cos(a)])
    ln, d = m * G * np.cos(a) * DT, 1e-4
    z = np.array([mu * ln * np.cos(d), mu * ln * np.sin(d), ln])
    out, u, res, ls, vs, ok, conv = fp.polished(Gm, g, np.array([mu]), z, 1.0 / m, ACTIVE1, np.abs(g).max(), 1.0 / m,
                                                TOL)
    assert ok == 1.0 and conv == 1.0
    assert np.abs(out - ln * np.array([mu, 0.0, 1.0])).max() <= _refine_bound(Gm, 1.0 / m) * 10 * ln
    slide = DT * G * (np.sin(a) - mu * np.cos(a))
    assert np.abs(u - np.array([-slide, 0.0, 0.0])).max() <= rounding_bound(3, 1.0) * 10 * np.abs(g).max()


def test_held_friction_of_a_sliding_contact_enters_its_normal_row_exactly():
    """A sliding contact's friction ``mu lambda_n theta`` is a column of the mode system: with ``G_nt``
    along the sliding direction ``x`` the normal row asks ``(G_nn + mu G_nt) lambda_n = -g_n``, so
    ``lambda_n = -g_n / (G_nn + mu G_nt)`` from an iterate twice too large (held friction alone, the
    map ``-mu G_nt / G_nn`` of a fixed-point iteration, would need many solves), and across ``x``
    nothing moves: ``lambda_y = 0``."""
    a, b, c, mu, scale = 1.0, 1.0, 0.8, 0.5, 2.0
    Gm = np.array([[a, 0.0, c], [0.0, a, 0.0], [c, 0.0, b]])
    g = np.array([-1.0, 0.0, -0.5])                               # pressed down, pushed towards -x: slides
    ln = 0.5 / (b + mu * c)
    assert c * ln - 1.0 + a * mu * ln < 0                          # u_t < 0 at the answer: friction along +x
    zn = 2.0 * ln
    out = fp.polish(Gm, g, np.array([mu]), np.array([mu * zn, 0.0, zn]), scale, ACTIVE1)
    bound = (_refine_bound(Gm, scale) + rounding_bound(3, np.linalg.cond(Gm))) * 10 * ln
    assert np.abs(out - ln * np.array([mu, 0.0, 1.0])).max() <= bound


def _mode_matrix(Gm, g, mu, z, op, stick, slide):
    """The mode system of the iterate ``z`` built row by row from its definition (module docstring of
    :mod:`~sparsedyn.contact.friction_polish`): open ``lambda_i = 0``; sticking ``u_i = 0``; sliding
    along ``theta`` (``z``'s friction), ``phi`` across it: ``u_n = 0``, ``theta . lambda_t = mu
    lambda_n`` and Newton's row ``phi . u_t + w phi . lambda_t = 0``, ``w = |u_t| / (mu z_n)`` (the
    speed against ``theta`` at ``z``); ``(A, b)`` with ``A lambda = b``."""
    nc, m = len(mu), 3 * len(mu)
    u0 = (Gm @ z + g).reshape(nc, 3)
    A, b = np.zeros((m, m)), np.zeros(m)
    for i in range(nc):
        rows = slice(3 * i, 3 * i + 3)
        if op[i]:
            A[rows, rows] = np.eye(3)
        elif stick[i]:
            A[rows], b[rows] = Gm[rows], -g[rows]
        else:
            th = z[3 * i:3 * i + 2] / np.linalg.norm(z[3 * i:3 * i + 2])
            ph = np.array([-th[1], th[0]])
            w = max(-th @ u0[i, :2], 0.0) / (mu[i] * z[3 * i + 2])
            A[3 * i + 2], b[3 * i + 2] = Gm[3 * i + 2], -g[3 * i + 2]
            A[3 * i, 3 * i:3 * i + 2], A[3 * i, 3 * i + 2] = th, -mu[i]
            A[3 * i + 1] = ph @ Gm[3 * i:3 * i + 2]
            A[3 * i + 1, 3 * i:3 * i + 2] += w * ph
            b[3 * i + 1] = -ph @ g[3 * i:3 * i + 2]
    return A, b


@pytest.mark.parametrize("seed", range(3))
def test_the_mode_system_is_solved_against_numpys_solve_of_its_rows(seed):
    """Four contacts, sticking, sliding (two, along different directions) and open, on a random well
    conditioned ``G``: the polish's solution (symmetric inverse, Woodbury's correction for the held
    friction's columns, iterated refinement) equals ``numpy.linalg.solve`` of the system built row by
    row (:func:`_mode_matrix`), to its Tikhonov bias and rounding."""
    rng = np.random.default_rng(seed)
    Gm, mu = _spd(seed, 12, cond=10.0), np.array([0.5, 1.0, 0.8, 0.5])
    z = np.array([0.1, 0.05, 1.0, 0.6, 0.8, 1.0, -0.8 * 0.7, 0.0, 0.7, 0.0, 0.0, 0.0])
    g = rng.standard_normal(12)
    op, stick, slide, _ = fp.modes(z.reshape(4, 3), mu, np.ones(4))
    assert list(op) == [0, 0, 0, 1] and list(stick) == [1, 0, 0, 0] and list(slide) == [0, 1, 1, 0]
    A, b = _mode_matrix(Gm, g, mu, z, op, stick, slide)
    want = np.linalg.solve(A, b)
    lam, s, o = fp.mode_solution(Gm, g, mu, z, 1.0, np.ones(4), z.reshape(4, 3)[:, :2])
    assert list(s) == [0, 1, 1, 0] and list(o) == [0, 0, 0, 1]
    kappa = np.linalg.cond(A)
    bound = (fp.EPS * kappa) ** fp.solves(12) + rounding_bound(12, kappa)
    assert np.abs(lam - want).max() <= 10 * bound * np.abs(want).max()


def test_a_point_mass_sliding_down_a_slope_on_several_contacts_at_mu_1():
    """A point of mass ``m`` on a slope of angle ``a > 45 deg`` held by four contacts at the point, each
    with its tangential axes turned by ``psi_i`` about the normal (``G_ij = R_i^T R_j / m``: rank 3, a
    redundant set), at ``mu = 1``; the iterate's sliding directions off by up to 0.1 rad and its loads
    unequal.  Each polish is Newton's step on the directions; from its own answer, within
    :data:`~sparsedyn.contact.friction_polish.REPEATS` polishes, the answer is the least-norm one:
    each contact ``lambda_n = m g_0 cos a dt / 4`` and ``mu lambda_n`` up the slope in its own axes,
    the velocity ``dt g_0 (sin a - cos a)`` down the slope, and Coulomb's law holds (from its
    definitions)."""
    m, a, mu, k = 2.0, 1.0, 1.0, 4
    psi = np.array([0.0, 0.7, 2.0, -2.5])
    R = [np.array([[np.cos(p), -np.sin(p), 0.0], [np.sin(p), np.cos(p), 0.0], [0.0, 0.0, 1.0]]) for p in psi]
    Gm = np.block([[Ri.T @ Rj / m for Rj in R] for Ri in R])
    g0 = DT * G * np.array([-np.sin(a), 0.0, -np.cos(a)])          # the free velocity (down the slope: -x)
    g = np.concatenate([Ri.T @ g0 for Ri in R])
    ln = m * G * np.cos(a) * DT / k
    want = np.concatenate([Ri.T @ np.array([mu * ln, 0.0, ln]) for Ri in R])
    off, load = np.array([0.1, -0.07, 0.05, -0.1]), np.array([1.5, 0.5, 1.2, 0.8])
    z = np.concatenate([load[i] * ln * (Ri.T @ np.array([mu * np.cos(off[i]), mu * np.sin(off[i]), 1.0]))
                        for i, Ri in enumerate(R)])
    mus, scale = np.full(k, mu), np.abs(Gm).sum(1).max()
    for n in range(fp.REPEATS):
        out, u, res, ls, vs, ok, conv = fp.polished(Gm, g, mus, z, scale, np.ones(k), np.abs(g).max(),
                                                    Gm.diagonal().max(), TOL)
        z = out
        if conv:
            break
    assert conv == 1.0
    w = np.linalg.eigvalsh(Gm)
    eps = fp.EPS * scale
    small = w[w > 1e-10 * w.max()].min()
    bound = (eps / (small + eps)) ** fp.solves(3 * k) + rounding_bound(3 * k, 1.0 / fp.EPS)
    assert np.abs(out - want).max() <= 10 * bound * ln
    slide = DT * G * (np.sin(a) - mu * np.cos(a))
    assert np.abs(R[0] @ u[:3] - np.array([-slide, 0.0, 0.0])).max() <= 10 * bound * np.abs(g0).max()
    cone, closing, separating, sticking, oppose = _coulomb(out.reshape(k, 3), u.reshape(k, 3), mus)
    assert max(cone, closing, sticking, oppose) <= TOL * vs and separating <= TOL * ls * vs


def test_an_open_contact_gets_no_impulse():
    """Beside a loaded contact, one moving apart under the other's impulse, from an iterate where its
    normal impulse is 1e-9 of the largest: open, ``lambda = 0`` exactly; the other sticks."""
    Gm, mu = _spd(5, 6), np.array([0.5, 0.5])
    held = np.array([0.1, 0.0, 1.0])                             # inside its cone
    g = np.concatenate([np.array([0.01, 0.0, 0.2]) - Gm[:3, 3:] @ held, -Gm[3:, 3:] @ held])
    z = np.array([0.0, 0.0, 1e-9, 0.0, 0.0, 1.0])
    out, u, res, ls, vs, ok, conv = fp.polished(Gm, g, mu, z, 1.0, np.ones(2), np.abs(g).max(), Gm.diagonal().max(),
                                                TOL)
    assert conv == 1.0
    assert np.all(out[:3] == 0.0)
    assert np.abs(out[3:] - held).max() <= _refine_bound(Gm[3:, 3:], 1.0) * 10
    cone, closing, separating, sticking, oppose = _coulomb(out.reshape(2, 3), u.reshape(2, 3), mu)
    assert max(cone, closing, sticking, oppose) <= TOL * vs and separating <= TOL * ls * vs


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_a_frictionless_contact_that_does_not_slip_at_the_iterate_gets_no_friction(seed):
    """A frictionless contact (``mu = 0``: sliding whenever closed) beside a sticking one, from an
    iterate at which it does not slip (its tangential velocity zero: no direction and no Newton's
    compliance across it).  Its tangential impulses are no unknowns: the answer is the solution built
    here, the frictionless contact pressed (``lambda = (0, 0, 1)``) while it slides at ``(0.3, -0.2)``,
    the other sticking at ``(0.1, 0, 1)``, accepted in one polish (held as a velocity target instead,
    its friction would be what stops the slip, and the cone's projection would undo it)."""
    Gm, mu = _spd(seed, 6), np.array([0.0, 0.5])
    want, slip = np.array([0.0, 0.0, 1.0, 0.1, 0.0, 1.0]), np.array([0.3, -0.2, 0.0, 0.0, 0.0, 0.0])
    g = slip - Gm @ want
    # the iterate: the sticking contact's friction (0.1, 0); the two normal impulses where the first does not slip
    a, c = np.linalg.solve(Gm[:2][:, [2, 5]], -(g[:2] + Gm[:2, 3:5] @ np.array([0.1, 0.0])))
    z = np.array([0.0, 0.0, a, 0.1, 0.0, c])
    op, stick, slide, _ = fp.modes(z.reshape(2, 3), mu, np.ones(2))
    assert list(op) == [0, 0] and list(stick) == [0, 1] and list(slide) == [1, 0]
    assert np.abs((Gm @ z + g)[:2]).max() <= rounding_bound(6, np.linalg.cond(Gm)) * 10 * np.abs(g).max()
    out, u, res, ls, vs, ok, conv = fp.polished(Gm, g, mu, z, 1.0, np.ones(2), np.abs(g).max(), Gm.diagonal().max(),
                                                TOL)
    assert conv == 1.0
    assert np.all(out[:2] == 0.0)
    bound = _refine_bound(Gm[[2, 3, 4, 5]][:, [2, 3, 4, 5]], 1.0) * 10
    assert np.abs(out - want).max() <= bound
    assert np.abs(u - slip).max() <= bound * np.abs(Gm).max()


def test_redundant_corners_get_the_least_norm_impulses():
    """A box resting on its four corners (``G`` singular: only the resultant is fixed): the polish gives
    the least-norm answer, ``G^+`` (NumPy's pseudo-inverse) of the sticking system, to the bias its
    regularisation leaves along ``G``'s smallest nonzero direction and its rounding in the null space."""
    with sd.use_backend("numpy"):
        P = sd.contact_problem(MODEL, Q0, Z, Z, corners())
    Gm, g = P.G, P.J @ (DT * P.a)
    lam = -np.linalg.pinv(Gm, rcond=1e-12) @ g
    z = np.tile([0.0, 0.0, 1.0], 4) * lam[2::3].mean()
    w = np.linalg.eigvalsh(Gm)
    out, u, res, ls, vs, ok, conv = fp.polished(Gm, g, np.full(4, MU), z, np.abs(Gm).sum(1).max(), np.ones(4),
                                                np.abs(g).max(), Gm.diagonal().max(), TOL)
    assert conv == 1.0
    assert abs(out[2::3].sum() - MASS * G * DT) <= rounding_bound(12, 1.0 / fp.EPS) * MASS * G * DT
    eps = fp.EPS * np.abs(Gm).sum(1).max()
    small = w[w > 1e-10 * w.max()].min()
    bound = (eps / (small + eps)) ** fp.solves(12) + rounding_bound(12, 1.0 / fp.EPS)
    assert np.abs(out - lam).max() <= bound * np.abs(lam).max()


def test_polished_steps_satisfy_coulombs_law():
    """Steps that the polish finishes (the box at rest, pushed below and above the friction limit, on
    a slope below and above the friction angle): Coulomb's law at the step's impulses and at the
    contact velocities they give, ``u = J (v + dt a) + G lambda`` (from the contact problem: at rest,
    no gap), from the definitions, to the solver's tolerance of its scales ``m g dt`` and ``g dt``."""
    P, vscale = MASS * G * DT, G * DT
    flat = (Q0, corners())
    cases = [(*flat, None), (*flat, push(0.3, 0.5 * MU * MASS * G)), (*flat, push(1.0, 1.5 * MU * MASS * G))]
    cases += [tilted(np.arctan(MU) + d)[:2] + (None,) for d in (-0.05, 0.1)]
    for q, contacts, f in cases:
        s = sd.contact_step(MODEL, q, Z, Z, contacts, DT, f_ext=f)
        with sd.use_backend("numpy"):
            pr = sd.contact_problem(MODEL, q, Z, Z, contacts, f_ext=f)
        u = (DT * pr.J @ pr.a + pr.G @ s.impulses.reshape(-1)).reshape(4, 3)
        cone, closing, separating, sticking, oppose = _coulomb(s.impulses, u, np.full(4, MU))
        assert cone <= TOL * P and closing <= TOL * vscale and separating <= TOL * P * vscale
        assert sticking <= TOL * vscale and oppose <= TOL * vscale


def test_a_box_at_rest_is_solved_by_the_first_polish():
    """A box resting on four corners, cold: every contact sticks, and gravity closes each corner at
    its free velocity, so the first polish, from the cold start's guess (each closing contact closed
    and sticking: :mod:`~sparsedyn.contact.polish_guess`), has the answer's modes and solves the mode
    system exactly: the step stops there, before any ADMM iteration (one iteration: the polish);
    warm-started from half its own impulses (the modes right, the sizes wrong), the polish of the warm
    start ends the solve too."""
    cold = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT)
    assert int(cold.iterations) == 1
    assert list(cold.modes) == ["stick"] * 4
    warm = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT, warm_start=0.5 * cold.impulses)
    assert int(warm.iterations) == 1
    assert abs(warm.impulses[:, 2].sum() - MASS * G * DT) <= MASS * G * DT * rounding_bound(12, 1.0 / fp.EPS)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_cold_start_at_rest_is_its_polish_least_norm_answer(backend):
    """Cold (no impulse yet), the box resting on its four corners: gravity closes every corner at its
    free velocity, so the cold start's guess (each closing contact closed, sticking) holds the answer's
    modes, and the polish of that guess, before any ADMM iteration, is the least-norm answer of the
    redundant set: by the box's symmetry a quarter of the weight's impulse ``m g dt`` at each corner and
    no friction (rounding amplified by ``1 / EPS`` along ``G``'s null space: friction_polish's docstring)."""
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
        cold = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT)
    quarter = MASS * G * DT / 4
    bound = quarter * rounding_bound(12, 1.0 / fp.EPS)
    assert int(cold.iterations) == 1 and list(cold.modes) == ["stick"] * 4
    assert np.abs(cold.impulses[:, 2] - quarter).max() <= bound
    assert np.abs(cold.impulses[:, :2]).max() <= bound


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_warm_start_keeps_its_split_of_a_redundant_set(backend):
    """The box pushed along x at its centre by ``F = 0.3 m g`` (held: ``F < mu m g``) sticks on its four
    corners.  By hand (impulses over ``dt``, ``W = m g dt``): the friction's moment about the centre puts
    ``(W - F) / 4`` on each back corner, ``(W + F) / 4`` on each front one; the friction's split is free.  The
    least-norm split, ``F / 4`` at each corner, puts the back corners outside their cones (``F / (W - F) =
    0.43 > mu``); friction in proportion to the loads (``F / W = 0.3`` at each) is inside them.  Warm-started
    near that split (off by 1e-3), the warm start's polish answers at once (one iteration) with the
    solution nearest to it, ``w - G^+ (G w + g)``: the split carried on, where the least-norm answer of the
    mode system needed ADMM's iterations."""
    W, F = MASS * G * DT, 0.3 * MASS * G * DT
    n = np.array([W - F, W + F, W - F, W + F]) / 4                   # corners (-h, -h), (h, -h), (-h, h), (h, h)
    split = np.stack([-F / W * n, 0 * n, n], 1)
    w = split * (1 + 1e-3 * np.array([1.0, -1.0, 0.5, -0.5]))[:, None]
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
        s = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT, f_ext=push(0.0, F / DT), warm_start=w)
    with sd.use_backend("numpy"):
        pr = sd.contact_problem(MODEL, Q0, Z, Z, corners(), f_ext=push(0.0, F / DT))
    g = DT * pr.J @ pr.a
    nearest = w.reshape(-1) - np.linalg.pinv(pr.G, rcond=1e-12, hermitian=True) @ (pr.G @ w.reshape(-1) + g)
    assert int(s.iterations) == 1 and list(s.modes) == ["stick"] * 4
    # the tolerance's share of the range, and rounding amplified by 1 / EPS along G's null space
    assert np.abs(s.impulses.reshape(-1) - nearest).max() <= TOL * W + W * rounding_bound(12, 1.0 / fp.EPS)
    assert np.abs(nearest.reshape(4, 3) - split).max() <= 1e-3 * W                # the split kept, not F / 4
    assert np.abs(s.v).max() <= TOL * G * DT


def test_a_slip_opposes_its_friction_unless_the_modes_read_it_sticking():
    """:func:`~sparsedyn.contact.friction_polish.opposed` on contacts on their cones' circles (``mu = 0.5``,
    friction along -x), their slips at angle ``b`` from +x: ``|u_t + |u_t| theta| = 2 |u_t| sin(b / 2)`` by hand,
    held to ``vtol`` where ``|u_t| > 100 vtol`` (200 vtol at 8 degrees: 27.9 vtol, refused; at 1e-3 rad: 0.2 vtol),
    and not below it (20 vtol at 8 degrees: the step's modes read it sticking); a frictionless contact, any slip."""
    vtol, b = 1e-10, np.radians(8.0)

    def slip(speed, angle):
        return [speed * vtol * np.cos(angle), speed * vtol * np.sin(angle), 0.0]

    def check(slips, mu):
        lam = np.array([[-m, 0.0, 1.0] for m in mu])                   # on the circle: friction mu along -x
        return fp.opposed(lam, np.array(slips), np.array(mu), np.ones(len(slips)), vtol)
    assert 2 * 200 * np.sin(b / 2) > 1 > 2 * 200 * np.sin(5e-4)
    assert check([slip(200, 0.0), slip(20, b), slip(200, 1e-3)], [0.5] * 3) == 1.0
    assert check([slip(200, 0.0), slip(200, b)], [0.5] * 2) == 0.0
    assert check([slip(200, 0.0), slip(1e4, np.pi / 2)], [0.5, 0.0]) == 1.0          # (frictionless: no cone)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_both_roads_take_the_polish(backend):
    """The default (native) road and the NumPy reference stop at the same polish (the cold box at rest:
    the first, from the cold start's guess; pushed above the friction limit: sliding) and carry the
    weight."""
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
        rest = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT)
        slide = sd.contact_step(MODEL, Q0, Z, Z, corners(), DT, f_ext=push(0.5, 1.5 * MU * MASS * G))
    assert int(rest.iterations) == 1
    assert list(slide.modes) == ["slide"] * 4
    for s in (rest, slide):
        assert abs(s.impulses[:, 2].sum() - MASS * G * DT) <= MASS * G * DT * 1e-8


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_box_sliding_down_a_slope_at_mu_0_9_loads_its_downhill_corners(backend):
    """The box (a cube of side ``2h``) on a slope steeper than its friction angle at ``mu = 0.9``, from
    rest: it slides without turning, ``dt g (sin a - mu cos a)`` downhill.  Its friction ``mu N``
    (``N = m g cos a dt``) acts ``h`` below the centre of mass, so the normal impulses balance its
    moment: ``(N_down - N_up) h = mu N h``, each downhill corner (body ``x = +h``) ``N (1 + mu) / 4``,
    each uphill one ``N (1 - mu) / 4`` (the two of a side equal: the least-norm split); each corner's
    friction ``mu`` times its normal impulse.  Four sliding contacts whose friction enters their
    normal rows (``G_nt`` from the rotation): the polish's mode system with the held friction's
    columns."""
    mu = 0.9
    a = np.arctan(mu) + 0.1
    q, contacts, _ = tilted(a, mu=mu)
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
        s = sd.contact_step(MODEL, q, Z, Z, contacts, DT)
    N = MASS * G * np.cos(a) * DT
    assert list(s.modes) == ["slide"] * 4
    want = np.array([1 - mu, 1 + mu, 1 - mu, 1 + mu]) * N / 4
    # the solver's tolerance of its impulse scale, and the polish's rounding along G's null space
    bound = (TOL + rounding_bound(12, 1.0 / fp.EPS)) * N * 10
    assert np.abs(s.impulses[:, 2] - want).max() <= bound
    assert np.abs(np.linalg.norm(s.impulses[:, :2], axis=1) - mu * s.impulses[:, 2]).max() <= bound
    rate = G * (np.sin(a) - mu * np.cos(a)) * DT
    assert abs(s.v[3] - rate) <= 4 * TOL * G * DT
    assert np.abs(s.v[[0, 1, 2, 4, 5]]).max() <= 4 * TOL * G * DT / H


def test_the_unknowns_rows_of_g_in_the_sliding_axes():
    """The mode system's ``D R^T G R D`` and held friction's columns ``D R^T G R_theta diag(mus)`` (block
    products by the block diagonal rotation, :func:`_dense_system`) equal the rows and columns of ``G``
    turned into each contact's sliding axes one by one (:func:`_axes`, the definition), the rows and
    columns of no unknown zero, ``U`` the theta columns of the sliding contacts times ``mu``; the rotation
    holds five entries a contact and structural zeros elsewhere (the int ``0`` where traced, which a
    block product skips)."""
    rng = np.random.default_rng(3)
    Gm, mu = _spd(3, 12, cond=10.0), np.array([0.5, 1.0, 0.8, 0.5])
    z = np.array([0.1, 0.05, 1.0, 0.6, 0.8, 1.0, -0.8 * 0.7, 0.0, 0.7, 0.0, 0.0, 0.0])
    d, w, c, s, Rt, gr, slide, op = fp._newton_system(Gm, rng.standard_normal(12), mu, z, 1.0, np.ones(4), None)
    turned = fp._axes(fp._axes(Gm.reshape(12, 4, 3), c, s).reshape(12, 12).T.reshape(12, 4, 3), c, s).reshape(12, 12)
    assert list(d) == [1, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0] and list(slide) == [0, 1, 1, 0]
    DGrD, U = fp._dense_system(Gm, Rt, d, slide * mu, fp.Slots(None, 4))
    tol = rounding_bound(3, 1.0) * np.abs(Gm).max()
    assert np.abs(DGrD - d[:, None] * turned * d[None, :]).max() <= tol
    assert np.abs(U - d[:, None] * turned[:, 0::3] * (slide * mu)[None, :]).max() <= tol
    R = fp._diagonal_blocks([[c, s, 0], [-s, c, 0], [0, 0, 1.0]], np.asarray(c, dtype=object))
    assert R.dtype == object and sum(type(x) is int and x == 0 for x in R.flat) == 144 - 5 * 4
