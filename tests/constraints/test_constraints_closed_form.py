"""Input torques of the four-bar and the slider-crank for a prescribed crank motion, derived by hand.

Independent derivation (no sparsedyn kinematics or dynamics): planar loop
equations solved by circle intersection, differentiated by hand for the
velocities and accelerations; the torque follows from the principle of virtual
work (power balance with the crank speed factored out)::

    u = sum_i [ m_i a_i . dv_i + I_i alpha_i dw_i - m_i g . dv_i ]

where ``dv_i``, ``dw_i`` are the velocity of body i's centre of mass and its angular
velocity per unit crank speed (kinematic influence coefficients).
"""

import numpy as np

from sparsedyn.constraints import assemble, constrained_inverse_dynamics, four_bar, slider_crank

G = np.array([0.0, -9.81])


def perp(x):
    return np.array([-x[1], x[0]])


def e(t):
    return np.array([np.cos(t), np.sin(t)])


def rot(t, r):
    c, s = np.cos(t), np.sin(t)
    return np.array([c * r[0] - s * r[1], s * r[0] + c * r[1]])


def izz(m, L, w=0.02):
    """The examples' slender bars: rotational inertia about z at the centre of mass."""
    return m / 12.0 * (L * L + w * w)


def crank_motion(t):
    """Prescribed crank angle, speed and acceleration."""
    return 0.7 + 1.3 * t + 0.4 * np.sin(3 * t), 1.3 + 1.2 * np.cos(3 * t), -3.6 * np.sin(3 * t)


def four_bar_closed_form(p, th, w1, a1, branch):
    """Angles (phi, psi), rates and accelerations of coupler and rocker, and the virtual-work torque."""
    a, b, c, d = p["crank"], p["coupler"], p["rocker"], p["ground"]
    A = a * e(th)
    C = np.array([d, 0.0])
    D = C - A
    L = np.linalg.norm(D)
    # Circle intersection: B = A + x D/L + branch * h perp(D)/L with |B - A| = b, |B - C| = c.
    x = (b * b - c * c + L * L) / (2 * L)
    h = np.sqrt(b * b - x * x)
    B = A + x * D / L + branch * h * perp(D) / L
    phi = np.arctan2(*(B - A)[::-1])
    psi = np.arctan2(*(B - C)[::-1])
    # Velocities: a w1 perp(e1) + b w2 perp(e2) = c w3 perp(e3), for unit crank speed first.
    M = np.column_stack([b * perp(e(phi)), -c * perp(e(psi))])
    k2, k3 = np.linalg.solve(M, -a * perp(e(th)))          # w2 = k2 w1, w3 = k3 w1
    w2, w3 = k2 * w1, k3 * w1
    # Accelerations: differentiate once more.
    rhs = -(a * a1 * perp(e(th)) - a * w1 ** 2 * e(th) - b * w2 ** 2 * e(phi) + c * w3 ** 2 * e(psi))
    al2, al3 = np.linalg.solve(M, rhs)
    m1, m2, m3 = p["m"]
    c1, c2, c3 = (np.array(x) for x in p["com"])
    # Centre-of-mass velocity per unit crank speed and acceleration of each body.
    r1, r2, r3 = rot(th, c1), rot(phi, c2), rot(psi, c3)
    dv1, dv2, dv3 = perp(r1), a * perp(e(th)) + k2 * perp(r2), k3 * perp(r3)
    acc1 = a1 * perp(r1) - w1 ** 2 * r1
    accA = a * a1 * perp(e(th)) - a * w1 ** 2 * e(th)
    acc2 = accA + al2 * perp(r2) - w2 ** 2 * r2
    acc3 = al3 * perp(r3) - w3 ** 2 * r3
    I1, I2, I3 = izz(m1, a), izz(m2, b), izz(m3, c)
    u = (m1 * (acc1 - G) @ dv1 + I1 * a1 * 1.0
         + m2 * (acc2 - G) @ dv2 + I2 * al2 * k2
         + m3 * (acc3 - G) @ dv3 + I3 * al3 * k3)
    return (phi, psi), (w2, w3), (al2, al3), u


def test_four_bar_input_torque_matches_virtual_work():
    mech = four_bar()
    cs, p = mech.constraints, mech.params
    # Branch of the example's assembly: sign of (D x (B - A)) at q0.
    th0 = mech.q0[0]
    A0, B0 = p["crank"] * e(th0), p["crank"] * e(th0) + p["coupler"] * e(mech.q0[0] + mech.q0[1])
    D0 = np.array([p["ground"], 0.0]) - A0
    branch = np.sign(D0[0] * (B0 - A0)[1] - D0[1] * (B0 - A0)[0])
    worst = 0.0
    q_prev = mech.q0
    for t in np.linspace(0.0, 4.0, 41):
        th, w1, a1 = crank_motion(t)
        (phi, psi), (w2, w3), (al2, al3), u_ref = four_bar_closed_form(p, th, w1, a1, branch)
        # Our coordinates: crank, coupler relative to crank, rocker.
        q = np.array([th, phi - th, psi])
        q[1:] += 2 * np.pi * np.round((q_prev[1:] - q[1:]) / (2 * np.pi))   # same turn as before
        assert np.abs(cs.residual(q)).max() < 1e-14                          # the hand geometry closes our loop
        qa = assemble(cs, np.array([th, q_prev[1], q_prev[2]]), independent=["crank_joint"])
        assert np.abs(qa - q).max() < 1e-10                                  # and assembly finds it
        v = np.array([w1, w2 - w1, w3])
        qdd = np.array([a1, al2 - a1, al3])
        res = constrained_inverse_dynamics(cs, q, v, qdd, actuated=mech.actuated)
        worst = max(worst, abs(res.u[0] - u_ref) / max(1.0, abs(u_ref)))
        # The independent-acceleration form gives the same torque.
        part = mech.partition(q)
        assert abs(constrained_inverse_dynamics(cs, q, v, np.array([a1]), actuated=mech.actuated,
                                                partition=part).u[0] - u_ref) < 1e-9 * max(1.0, abs(u_ref))
        q_prev = q
    print("four-bar worst relative torque error", worst)
    assert worst < 1e-9


def slider_crank_closed_form(p, th, w1, a1):
    r, L = p["crank"], p["rod"]
    s = r * np.sin(th) / L
    beta = -np.arcsin(s)                                   # rod angle, slider on the +x side
    # r sin th + L sin beta = 0  ->  k = dbeta/dth, and its derivative
    k = -r * np.cos(th) / (L * np.cos(beta))
    w2 = k * w1
    al2 = (r * np.sin(th) * w1 ** 2 + L * np.sin(beta) * w2 ** 2 - r * np.cos(th) * a1) / (L * np.cos(beta))
    # slider x = r cos th + L cos beta
    kx = -r * np.sin(th) - L * np.sin(beta) * k
    ax = -r * np.cos(th) * w1 ** 2 - r * np.sin(th) * a1 - L * np.cos(beta) * w2 ** 2 - L * np.sin(beta) * al2
    m1, m2, m3 = p["m"]
    c1, c2 = (np.array(x) for x in p["com"])
    r1, r2 = rot(th, c1), rot(beta, c2)
    dv1 = perp(r1)
    dv2 = r * perp(e(th)) + k * perp(r2)
    acc1 = a1 * perp(r1) - w1 ** 2 * r1
    acc2 = r * a1 * perp(e(th)) - r * w1 ** 2 * e(th) + al2 * perp(r2) - w2 ** 2 * r2
    u = (m1 * (acc1 - G) @ dv1 + izz(m1, r) * a1
         + m2 * (acc2 - G) @ dv2 + izz(m2, L) * al2 * k
         + m3 * ax * kx)                                   # slider: gravity does no work along x
    x = r * np.cos(th) + L * np.cos(beta)
    return beta, x, w2, kx * w1, al2, ax, u


def test_slider_crank_input_torque_matches_virtual_work():
    mech = slider_crank()
    cs, p = mech.constraints, mech.params
    worst = 0.0
    for t in np.linspace(0.0, 4.0, 41):
        th, w1, a1 = crank_motion(t)
        beta, x, w2, vx, al2, ax, u_ref = slider_crank_closed_form(p, th, w1, a1)
        q = np.array([th, beta - th, x])
        assert np.abs(cs.residual(q)).max() < 1e-14
        v = np.array([w1, w2 - w1, vx])
        qdd = np.array([a1, al2 - a1, ax])
        res = constrained_inverse_dynamics(cs, q, v, qdd, actuated=mech.actuated)
        worst = max(worst, abs(res.u[0] - u_ref) / max(1.0, abs(u_ref)))
    print("slider-crank worst relative torque error", worst)
    assert worst < 1e-9
