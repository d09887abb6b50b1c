"""One-direction contacts (``Contact(frame, "1d", normal=n)``) and impacts to a target contact velocity.

A 1D contact is one row ``n . v_p`` (``n`` fixed in the world, ``v_p`` the frame origin's velocity).
Pinocchio has no such contact model, but its ``forwardDynamics`` / ``impulseDynamics`` take any
constraint Jacobian and drift: the oracle builds them from Pinocchio's own frame Jacobian and
classical acceleration (``LOCAL_WORLD_ALIGNED``).  Besides: the KKT identities from the public frame
kernels, a ball on a frictionless plane by hand, derivatives against central differences.
"""

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, rel_err, solve_bound
from contact_oracle import pair
from sparsedyn.interop import pinocchio as ip
from sparsedyn.model.spatial import xlt

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
NORMALS = ((0.0, 0.0, 1.0), (0.3, -0.2, 1.0), (1.0, 0.0, 0.0))


def unit(n):
    return np.asarray(n, float) / np.linalg.norm(n)


def solo_contacts():
    """Three feet on surfaces of different normals (1D) and one foot held as a point (3D)."""
    return [sd.Contact(f, "1d", normal=n) for f, n in zip(FEET, NORMALS)] + [sd.Contact(FEET[3], "3d")]


def pinocchio_rows(robot, q, v, contacts):
    """``(J, gamma)`` of the contacts in Pinocchio's coordinates, from its frame kernels: a 1D row is
    ``n^T`` times the LOCAL_WORLD_ALIGNED linear rows, a 3D contact the LOCAL linear rows."""
    model, pm, pf = pair(robot)
    pd = pm.createData()
    qp, vp = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v)
    pin.computeJointJacobians(pm, pd, qp)
    pin.forwardKinematics(pm, pd, qp, vp, np.zeros(pm.nv))
    pin.updateFramePlacements(pm, pd)
    J, gamma = [], []
    for c in contacts:
        k = pf[c.frame]
        ref = pin.LOCAL_WORLD_ALIGNED if c.kind == "1d" else pin.LOCAL
        Jl = pin.getFrameJacobian(pm, pd, k, ref)[:3]
        al = pin.getFrameClassicalAcceleration(pm, pd, k, ref).linear
        if c.kind == "1d":
            Jl, al = unit(c.normal)[None] @ Jl, np.array([unit(c.normal) @ al])
        J.append(Jl)
        gamma.append(al)
    return pm, pd, qp, vp, np.vstack(J), np.concatenate(gamma)


def test_one_direction_contacts_equal_pinocchio_with_its_own_jacobian(rng):
    model = pair("solo12")[0]
    contacts = solo_contacts()
    for _ in range(3):
        q = model.random_configuration(rng)
        v, tau = rng.normal(size=model.nv), 5 * rng.normal(size=model.nv)
        a, f = sd.contact_dynamics(model, q, v, tau, contacts)
        pm, pd, qp, vp, J, gamma = pinocchio_rows("solo12", q, v, contacts)
        a_p = ip.v_from_pinocchio(model, pin.forwardDynamics(pm, pd, qp, vp, ip.tau_to_pinocchio(model, tau), J, gamma))
        f_p = pd.lambda_c.copy()
        K = np.block([[pd.M, -J.T], [J, np.zeros((len(f_p),) * 2)]])
        bound = solve_bound(K, np.concatenate([a_p, f_p]), c=64.0)
        assert rel_err(np.concatenate([a, f]), np.concatenate([a_p, f_p])) <= bound
        for e in (0.0, 0.4):
            v_plus, imp = sd.impulse_dynamics(model, q, v, contacts, e)
            vp_p = ip.v_from_pinocchio(model, pin.impulseDynamics(pm, pd, qp, vp, J, e))
            assert rel_err(np.concatenate([v_plus, imp]), np.concatenate([vp_p, pd.impulse_c])) <= bound


def random_case(seed):
    model = sd.random_tree(8, joint_types=constant_subspace_types(), seed=seed, floating_base=True)
    rng = np.random.default_rng(seed)
    frames = [model.frame_names[k] for k in rng.choice(len(model.frame_names), 3, replace=False)]
    contacts = [sd.Contact(frames[0], "1d", normal=rng.normal(size=3)), sd.Contact(frames[1], "3d"),
                sd.Contact(frames[2], "1d", normal=list(rng.normal(size=3)))]
    q = model.random_configuration(rng)
    return model, contacts, q, rng.normal(size=model.nv), rng.normal(size=model.nv)


def public_rows(model, q, v, a, contacts):
    """``J`` (m, nv) and the contacts' accelerations ``J a + Jdot v`` from the public frame kernels."""
    J, acc = [], []
    for c in contacts:
        if c.kind == "1d":
            n = unit(c.normal)
            J.append(n @ sd.frame_jacobian(model, q, c.frame, "local_world_aligned")[3:])
            acc.append([n @ sd.frame_classical_acceleration(model, q, v, a, c.frame, "local_world_aligned")[3:]])
        else:
            J.append(sd.frame_jacobian(model, q, c.frame, "local")[3:])
            acc.append(sd.frame_classical_acceleration(model, q, v, a, c.frame, "local")[3:])
    return np.vstack(J), np.concatenate(acc)


@pytest.mark.parametrize("seed", [0, 1])
def test_kkt_identities_by_hand(seed):
    model, contacts, q, v, tau = random_case(seed)
    a, f = sd.contact_dynamics(model, q, v, tau, contacts)
    assert f.shape == (5,)
    J, acc = public_rows(model, q, v, a, contacts)
    H, h = sd.crba(model, q), sd.rnea(model, q, v, np.zeros(model.nv))
    K = np.block([[H, -J.T], [J, np.zeros((5, 5))]])
    bound = solve_bound(K, np.concatenate([a, f]), c=64.0)
    scale = np.abs(H).max() * np.abs(a).max() + np.abs(tau).max() + np.abs(J).max() * np.abs(f).max()
    assert np.abs(H @ a + h - tau - J.T @ f).max() <= bound * scale       # M a + h = tau + J^T f
    assert np.abs(acc).max() <= bound * (np.abs(J).max() * np.abs(a).max() + np.abs(acc - J @ a).max())
    # an impact: H (v+ - v) = J^T Lambda and J v+ = -e J v + target
    target = np.array([0.3, -0.1, 0.2, 0.05, -0.4])
    v_plus, imp = sd.impulse_dynamics(model, q, v, contacts, 0.5, target_velocity=list(target))
    assert np.abs(H @ (v_plus - v) - J.T @ imp).max() <= bound * np.abs(H).max() * np.abs(v_plus - v).max() * 4
    assert np.abs(J @ v_plus - (-0.5 * J @ v + target)).max() <= bound * np.abs(J).max() * np.abs(v).max() * 4


def ball(m=2.0, r=0.1):
    b = sd.ModelBuilder("ball", gravity=(0.0, 0.0, -9.81))
    b.add_body("ball", None, sd.make_joint("free"), mass=m, com=[0, 0, 0], rot_inertia=0.4 * m * r * r * np.eye(3))
    b.add_frame("bottom", "ball", xlt(np.array([0.0, 0.0, -r])))
    return b.build()


def test_ball_on_a_frictionless_plane_by_hand():
    """A ball spinning about x at ``w`` with its bottom point held on the plane (body-fixed point, no
    friction), pushed by ``F`` along x: the bottom point's centripetal acceleration ``w^2 r`` (up)
    must be cancelled, so the centre accelerates by ``-w^2 r`` along z and the normal force is
    ``m (g - w^2 r)``; the force passes through the centre (no torque), the push is free."""
    m, r, g, w, F = 2.0, 0.1, 9.81, 3.0, 1.5
    model = ball(m, r)
    q = np.array([0, 0, r, 0, 0, 0, 1.0])          # position, quaternion (x, y, z, w)
    assert np.allclose(sd.frame_placement(model, q, "bottom")[1], 0)
    v = np.array([w, 0, 0, 0, 0, 0.0])               # [omega; v], body frame
    tau = np.array([0, 0, 0, F, 0, 0.0])
    for contact in (sd.Contact("bottom", "1d", normal=(0, 0, 1)), sd.Contact("bottom", "1d", normal=(0, 0, 2.5))):
        a, f = sd.contact_dynamics(model, q, v, tau, [contact])
        np.testing.assert_allclose(f, [m * (g - w * w * r)], rtol=1e-14)
        np.testing.assert_allclose(a, [0, 0, 0, F / m, 0, -w * w * r], atol=1e-14)
    # a ball falling at speed s onto the plane: restitution e bounces it at e s; a target sets it
    v = np.array([0, 0, 0, 0.7, 0, -2.0])
    for e, target, up in ((0.0, None, 0.0), (0.6, None, 1.2), (0.0, [0.5], 0.5), (0.6, [0.5], 1.7)):
        v_plus, imp = sd.impulse_dynamics(model, q, v, [sd.Contact("bottom", "1d", normal=(0, 0, 1))], e,
                                          target_velocity=target)
        np.testing.assert_allclose(v_plus, [0, 0, 0, 0.7, 0, up], atol=1e-14)
        np.testing.assert_allclose(imp, [m * (up + 2.0)], rtol=1e-14)


def test_target_velocity_equal_to_minus_e_times_the_impact_velocity_is_restitution():
    model, contacts, q, v, _ = random_case(3)
    J, _ = public_rows(model, q, v, np.zeros(model.nv), contacts)
    for e in (0.3, 1.0):
        ref = sd.impulse_dynamics(model, q, v, contacts, e)
        got = sd.impulse_dynamics(model, q, v, contacts, target_velocity=-e * (J @ v))
        K = np.block([[sd.crba(model, q), -J.T], [J, np.zeros((5, 5))]])
        assert rel_err(np.concatenate(got), np.concatenate(ref)) <= solve_bound(K, np.concatenate(ref), c=64.0)
    # a 6D and a 3D contact take a target too (frame axes, one per row)
    model, q = sd.humanoid(), sd.humanoid_standing_configuration()
    v = np.random.default_rng(3).normal(size=model.nv)
    six = [sd.Contact("l_sole"), sd.Contact("r_sole", "3d")]
    t = np.linspace(-0.5, 0.5, 9)
    v_plus, imp = sd.impulse_dynamics(model, q, v, six, target_velocity=t)
    J6 = np.vstack([sd.frame_jacobian(model, q, "l_sole", "local"), sd.frame_jacobian(model, q, "r_sole", "local")[3:]])
    K = np.block([[sd.crba(model, q), -J6.T], [J6, np.zeros((9, 9))]])
    bound = solve_bound(K, np.concatenate([v_plus, imp]), c=64.0)
    assert np.abs(J6 @ v_plus - t).max() <= bound * np.abs(J6).max() * np.abs(v_plus).max() * 4


def central(f, x, dx, h=1e-6):
    return (f(x + h * dx) - f(x - h * dx)) / (2 * h)


@pytest.mark.parametrize("seed", [0, 2])
def test_derivatives_equal_central_differences(seed):
    model, contacts, q, v, tau = random_case(seed)
    rng = np.random.default_rng(seed + 10)
    dq, dv = rng.normal(size=model.nv), rng.normal(size=model.nv)

    def along_q(fn):
        return lambda s: fn(sd.integrate(model, q, s * dq))

    da_dq, da_dv, da_dtau, df_dq, df_dv, df_dtau = sd.contact_dynamics_derivatives(model, q, v, tau, contacts)
    cd = lambda qq, vv, tt: np.concatenate(sd.contact_dynamics(model, qq, vv, tt, contacts))   # noqa: E731
    for D, fd in (((da_dq, df_dq), central(along_q(lambda x: cd(x, v, tau)), 0.0, 1.0)),
                  ((da_dv, df_dv), central(lambda x: cd(q, x, tau), v, dv)),
                  ((da_dtau, df_dtau), central(lambda x: cd(q, v, x), tau, dv))):
        dx = dq if D[0] is da_dq else dv
        got = np.concatenate([D[0] @ dx, D[1] @ dx])
        assert np.abs(got - fd).max() < 1e-6 * max(1.0, np.abs(fd).max())
    target = np.array([0.1, 0.2, -0.3, 0.0, 0.4])
    dvp_dq, dvp_dv, dimp_dq, dimp_dv = sd.impulse_dynamics_derivatives(model, q, v, contacts, 0.3,
                                                                        target_velocity=target)
    im = lambda qq, vv: np.concatenate(sd.impulse_dynamics(model, qq, vv, contacts, 0.3,   # noqa: E731
                                                           target_velocity=target))
    fd = central(along_q(lambda x: im(x, v)), 0.0, 1.0)
    assert np.abs(np.concatenate([dvp_dq @ dq, dimp_dq @ dq]) - fd).max() < 1e-6 * max(1.0, np.abs(fd).max())
    fd = central(lambda x: im(q, x), v, dv)
    assert np.abs(np.concatenate([dvp_dv @ dv, dimp_dv @ dv]) - fd).max() < 1e-6 * max(1.0, np.abs(fd).max())


def test_native_and_batched_equal_numpy(rng):
    model, contacts, q, v, tau = random_case(4)
    Q = np.stack([model.random_configuration(rng) for _ in range(3)])
    V, T = rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    target = rng.normal(size=(3, 5))
    ref = [sd.contact_dynamics(model, Q[i], V[i], T[i], contacts) for i in range(3)]
    imp = [sd.impulse_dynamics(model, Q[i], V[i], contacts, 0.2, target_velocity=target[i]) for i in range(3)]
    A, F = sd.contact_dynamics(model, Q, V, T, contacts)
    for i in range(3):
        np.testing.assert_allclose(A[i], ref[i].a, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(F[i], ref[i].forces, rtol=1e-12, atol=1e-12)
    n = model.nv + 5
    with sd.use_backend("native", deterministic=True):
        for i in range(3):
            got = sd.contact_dynamics(model, Q[i], V[i], T[i], tuple(contacts))
            H = sd.crba(model, Q[i])
            kappa = np.linalg.cond(H) * np.linalg.cond(public_rows(model, Q[i], V[i], got.a, contacts)[0]) ** 2
            assert rel_err(np.concatenate(got), np.concatenate(ref[i])) <= 64 * n * kappa * np.finfo(float).eps
            gi = sd.impulse_dynamics(model, Q[i], V[i], contacts, 0.2, target_velocity=target[i])
            assert rel_err(np.concatenate(gi), np.concatenate(imp[i])) <= 64 * n * kappa * np.finfo(float).eps


def test_bad_one_direction_contacts_are_named():
    with pytest.raises(ValueError, match="normal"):
        sd.Contact("foot", "1d")
    with pytest.raises(ValueError, match="normal must not be zero"):
        sd.Contact("foot", "1d", normal=(0, 0, 0))
    with pytest.raises(ValueError, match="kind='1d'"):
        sd.Contact("foot", "3d", normal=(0, 0, 1))
    with pytest.raises(ValueError, match="normal"):
        sd.Contact("foot", "1d", normal=(0, np.nan, 1))
    model, contacts, q, v, _ = random_case(0)
    with pytest.raises(ValueError, match=r"target_velocity must be \(\.\.\., 5\)"):
        sd.impulse_dynamics(model, q, v, contacts, target_velocity=[0.0, 1.0])
    with pytest.raises(ValueError, match="one-direction contact"):
        sd.EstimationProblem(model, [], contacts=contacts[:1])
    c = sd.Contact("foot", "1d", normal=(0, 0, 1))
    assert c.size == 1 and c == sd.Contact("foot", "1d", normal=[0, 0, 1]) and "normal=(0.0, 0.0, 1.0)" in repr(c)
