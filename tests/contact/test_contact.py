"""Contact dynamics and impulses (sparsedyn.contact.dynamics) against Pinocchio and identities."""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import EPS, random_state, random_trees, rel_err, rounding_bound, solve_bound
from contact_oracle import ROBOTS, Oracle, pair
from sparsedyn.contact.dynamics import ContactWarning, contact_drift, contact_jacobian
from sparsedyn.algorithms.kinematics import joint_transforms


@pytest.fixture(params=range(4), ids=["chain", "binary", "floating", "floating-bf3"], scope="module")
def tree(request):
    """The suite's random trees, every joint type (those whose motion subspace depends on q too)."""
    return random_trees()[request.param]


def contacts_of(robot):
    frames, kind = ROBOTS[robot]
    return tuple(sd.Contact(f, kind) for f in frames)


def kkt(model, q, v, contacts):
    """The contact KKT matrix [[H, -J^T], [J, 0]] and the contact Jacobian, from the public kernels
    (frame Jacobians, LOCAL; a point contact keeps the linear rows)."""
    H = sd.crba(model, q)
    J = np.vstack([sd.frame_jacobian(model, q, c.frame, "local")[3 if c.kind == "3d" else 0:] for c in contacts])
    m = J.shape[0]
    return np.block([[H, -J.T], [J, np.zeros((m, m))]]), J


def drift(model, q, v, contacts):
    """Contact accelerations at a = 0 from the public frame kernels: spatial (6D), classical (3D)."""
    z = np.zeros(model.nv)
    return np.concatenate([sd.frame_acceleration(model, q, v, z, c.frame) if c.kind == "6d"
                           else sd.frame_classical_acceleration(model, q, v, z, c.frame)[3:] for c in contacts])


def bound(model, q, v, contacts, a, f):
    K, _ = kkt(model, q, v, contacts)
    return solve_bound(K, np.concatenate([a, f]), c=64.0)


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_equals_pinocchio_constraint_dynamics(robot):
    model = pair(robot)[0]
    contacts = contacts_of(robot)
    rng = np.random.default_rng(7)
    for kd in (0.0, 3.0):
        oracle = Oracle(robot, [(c.frame, c.kind) for c in contacts], kd=kd)
        for _ in range(3):
            q, v, tau = random_state(model, rng)
            tau = 20 * tau
            a, f = sd.contact_dynamics(model, q, v, tau, contacts, baumgarte=kd)
            a_p, f_p = oracle.dynamics(q, v, tau)
            err = rel_err(np.concatenate([a, f]), np.concatenate([a_p, f_p]))
            assert err <= min(1e-9, bound(model, q, v, contacts, a_p, f_p)), (robot, kd, err)


#: A tree of the joints whose motion subspace depends on q that Pinocchio has (JointModelSphericalZYX,
#: Universal, Translation), with contacts on two branches.
VARYING = sd.random_tree(8, branching=1.5, joint_types=("spherical_zyx", "universal", "translation"), seed=5,
                         nframes=2)
VARYING_CONTACTS = ((("frame2", "3d"), ("body8", "6d")), (("body7", "3d"), ("frame1", "6d")))


@pytest.mark.parametrize("pairs", VARYING_CONTACTS, ids=["point+6d", "6d+point"])
def test_varying_subspaces_equal_pinocchio(pairs):
    """Contact dynamics and impulses where the joints' S depends on q (the drift carries cJ = Sdot qd)."""
    model, contacts = VARYING, tuple(sd.Contact(f, k) for f, k in pairs)
    rng = np.random.default_rng(5)
    for kd in (0.0, 3.0):
        oracle = Oracle(model, pairs, kd=kd)
        q, v, tau = random_state(model, rng)
        a, f = sd.contact_dynamics(model, q, v, 5 * tau, contacts, baumgarte=kd)
        a_p, f_p = oracle.dynamics(q, v, 5 * tau)
        err = rel_err(np.concatenate([a, f]), np.concatenate([a_p, f_p]))
        assert err <= bound(model, q, v, contacts, a_p, f_p), (kd, err)
        vp, imp = sd.impulse_dynamics(model, q, v, contacts)
        vp_p, imp_p = oracle.impulse(q, v)
        err = rel_err(np.concatenate([vp, imp]), np.concatenate([vp_p, imp_p]))
        assert err <= bound(model, q, v, contacts, vp_p, imp_p), (kd, err)


def robot_case(robot):
    """``(model, contacts, oracle)``: the robot, its feet or soles as contacts, and Pinocchio on them."""
    model, contacts = pair(robot)[0], contacts_of(robot)
    return model, contacts, Oracle(robot, [(c.frame, c.kind) for c in contacts])


@pytest.mark.parametrize("robot", ["solo12", "talos_reduced"])
def test_damping_equals_pinocchio_proximal_step(robot):
    model, contacts, oracle = robot_case(robot)
    rng = np.random.default_rng(3)
    q, v, tau = random_state(model, rng)
    for mu in (1e-6, 1e-2):
        a, f = sd.contact_dynamics(model, q, v, tau, contacts, damping=mu)
        a_p, f_p = oracle.dynamics(q, v, tau, mu=mu)
        assert rel_err(np.concatenate([a, f]), np.concatenate([a_p, f_p])) <= 1e-9
        # and it is the damped system: (J H^-1 J^T + mu I) f = -(J a0 + drift)
        K, J = kkt(model, q, v, contacts)
        H = K[:model.nv, :model.nv]
        a0 = np.linalg.solve(H, tau - sd.nonlinear_effects(model, q, v))
        G = J @ np.linalg.solve(H, J.T)
        r = (G + mu * np.eye(len(f))) @ f + J @ a0 + drift(model, q, v, contacts)
        assert np.max(np.abs(r)) <= 1e-9 * max(1.0, np.max(np.abs(G)) * np.max(np.abs(f)))


def test_batched_and_compiled_equal_one_state():
    robot = "solo12"
    model = pair(robot)[0]
    contacts = contacts_of(robot)
    rng = np.random.default_rng(11)
    q, v, tau = random_state(model, rng, (5,))
    A, F = sd.contact_dynamics(model, q, v, tau, contacts)
    assert A.shape == (5, model.nv) and F.shape == (5, 12)
    one = [sd.contact_dynamics(model, q[i], v[i], tau[i], contacts) for i in range(5)]
    for i in range(5):
        assert np.array_equal(A[i], one[i].a) or rel_err(A[i], one[i].a) <= 64 * model.nv * EPS * 1e3
        b = bound(model, q[i], v[i], contacts, one[i].a, one[i].forces)
        assert rel_err(np.concatenate([A[i], F[i]]), np.concatenate(one[i])) <= b
    k = sd.compile(model)
    for i in (0, 3):
        res = sd.contact_dynamics(k, q[i], v[i], tau[i], contacts)
        assert isinstance(res, sd.ContactDynamics)
        b = bound(model, q[i], v[i], contacts, one[i].a, one[i].forces)
        assert rel_err(np.concatenate(res), np.concatenate(one[i])) <= b
    Ab, Fb = k.contact_dynamics(q, v, tau, contacts)
    for i in range(5):
        b = bound(model, q[i], v[i], contacts, one[i].a, one[i].forces)
        assert rel_err(np.concatenate([Ab[i], Fb[i]]), np.concatenate(one[i])) <= b


def test_compiled_talos_equals_pinocchio():
    robot = "talos_reduced"
    model, contacts, oracle = robot_case(robot)
    k = sd.compile(model)
    rng = np.random.default_rng(5)
    q, v, tau = random_state(model, rng, (3,))
    A, F = k.contact_dynamics(q, v, tau, contacts)
    for i in range(3):
        a_p, f_p = oracle.dynamics(q[i], v[i], tau[i])
        assert rel_err(np.concatenate([A[i], F[i]]), np.concatenate([a_p, f_p])) <= 1e-9


def test_identities_on_random_trees(tree, rng):
    """G a = -drift (the contacts do not accelerate), and the equation of motion with J^T f."""
    frames = [f.name for f in tree.frames[-3:]]
    for kinds in (("6d", "3d", "3d"), ("3d", "3d", "3d")):
        contacts = tuple(sd.Contact(f, k) for f, k in zip(frames, kinds))
        q, v, tau = random_state(tree, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ContactWarning)
            try:
                a, f = sd.contact_dynamics(tree, q, v, tau, contacts)
            except ContactWarning:       # more constraints than the branch's dofs: tested below
                continue
        K, J = kkt(tree, q, v, contacts)
        b = bound(tree, q, v, contacts, a, f)
        assert rel_err(J @ a, -drift(tree, q, v, contacts)) <= b * max(1.0, np.max(np.abs(J)))
        H = K[:tree.nv, :tree.nv]
        assert rel_err(H @ a + sd.nonlinear_effects(tree, q, v), tau + J.T @ f) <= b * np.max(np.abs(H)) * 10
        # the kernel's own Jacobian and drift are the public frame kernels'
        Xup, S = joint_transforms(tree, q)
        assert rel_err(contact_jacobian(tree, Xup, S, contacts), J) <= 64 * tree.nv * EPS
        assert rel_err(contact_drift(tree, Xup, S, v, contacts, q), drift(tree, q, v, contacts)) <= 64 * tree.nv * EPS


def test_no_contact_is_forward_dynamics(tree, rng):
    q, v, tau = random_state(tree, rng)
    a, f = sd.contact_dynamics(tree, q, v, tau, ())
    assert f.shape == (0,)
    assert rel_err(a, sd.aba(tree, q, v, tau)) <= solve_bound(sd.crba(tree, q), a, c=64.0)


@pytest.mark.parametrize("robot", ["talos_reduced", "solo12"])
def test_forces_equal_the_estimator_with_known_accelerations(robot):
    """With all accelerations known (the contact dynamics' own) and the joint torques measured (consistent
    data, so least squares fits them exactly), the
    estimation solver finds the same 6D contact wrenches."""
    model = pair(robot)[0]
    contacts = contacts_of(robot)
    rng = np.random.default_rng(2)
    q, v, tau = random_state(model, rng)
    tau[:6] = 0.0                                    # the floating base is not actuated
    a, f = sd.contact_dynamics(model, q, v, tau, contacts)
    joints = [n for i, n in enumerate(model.joint_names) if model.joints[i].nv and model.joints[i].type != "free"]
    prob = sd.EstimationProblem(model, [sd.JointTorque("tau", joints, covariance=0.01)], contacts)
    idx = [k for j in joints for k in range(model.v_start[model.joint(j)], model.v_start[model.joint(j)] + 1)]
    y = prob.pack(qdd=prob.known_accelerations(a), tau=tau[idx])
    e = prob.analyze().solve(q, v, y)
    got = np.concatenate([e.contacts[c.name][3 if c.kind == "3d" else 0:] for c in contacts])
    assert rel_err(got, f) <= 1e-9
    if contacts[0].kind == "3d":                   # a point contact has no moment about its point
        assert max(np.max(np.abs(e.contacts[c.name][:3])) for c in contacts) <= 1e-9 * np.max(np.abs(f))


def test_redundant_contacts_warn_and_give_minimum_norm_forces():
    """Four feet in 6D on a quadruped: the Delassus matrix is singular (24 rows, 18 dofs)."""
    model = pair("solo12")[0]
    contacts = tuple(sd.Contact(f) for f in ROBOTS["solo12"][0])
    rng = np.random.default_rng(4)
    q, v, tau = random_state(model, rng)
    with pytest.warns(ContactWarning, match="redundant or singular"), sd.use_backend("numpy"):   # the NumPy path's
        a, f = sd.contact_dynamics(model, q, v, tau, contacts)                                  # answer
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(f))
    K, J = kkt(model, q, v, contacts)
    H = K[:model.nv, :model.nv]
    # consistent (the contacts' accelerations vanish where they can) and the equation of motion holds
    scale = np.max(np.abs(H @ a)) + np.max(np.abs(J.T @ f)) + np.max(np.abs(tau))
    assert np.max(np.abs(H @ a + sd.nonlinear_effects(model, q, v) - tau - J.T @ f)) <= 1e-8 * scale
    # minimum norm: f has no component in the null space of J^T
    N = np.linalg.svd(J.T)[2][np.linalg.matrix_rank(J.T):]
    assert np.max(np.abs(N @ f)) <= 1e-8 * np.max(np.abs(f))
    # damping: no warning, finite, close to the minimum-norm forces for a small mu
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a2, f2 = sd.contact_dynamics(model, q, v, tau, contacts, damping=1e-6)
    assert np.all(np.isfinite(f2)) and rel_err(a2, a) <= 1e-3


def test_redundant_contacts_without_damping_are_refused_by_the_traced_kernel():
    """The compiled kernel has no value-dependent branch, so a structurally redundant set (four feet in
    6D: 24 rows, 18 dofs) without damping is refused with a clear error, never answered with the
    forces of a zero pivot; a plain call then answers on the NumPy path (minimum-norm forces, warned),
    and a set that is only redundant at some states (two soles in 6D) is not refused."""
    from sparsedyn.algorithms.kinematics import joint_transforms
    from sparsedyn.contact.dynamics import RedundantContactsError, contact_jacobian, structurally_redundant
    from sparsedyn.symbolic.ir import Graph
    model = pair("solo12")[0]
    feet6 = tuple(sd.Contact(f) for f in ROBOTS["solo12"][0])
    feet3 = tuple(sd.Contact(f, "3d") for f in ROBOTS["solo12"][0])

    def traced_jacobian(contacts):
        g = Graph()
        q = g.inputs(0, (model.nq,))
        Xup, S = joint_transforms(model, q)
        return contact_jacobian(model, Xup, S, contacts)
    assert structurally_redundant(traced_jacobian(feet6)) and not structurally_redundant(traced_jacobian(feet3))
    with pytest.raises(RedundantContactsError, match="damping > 0"):
        sd.compile(model).contact_dynamics(*random_state(model, np.random.default_rng(4)), feet6)
    q, v, tau = random_state(model, np.random.default_rng(4))
    with sd.use_backend("numpy"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a_ref, f_ref = sd.contact_dynamics(model, q, v, tau, feet6)
    with sd.use_backend("native", deterministic=True), pytest.warns(ContactWarning):
        a, f = sd.contact_dynamics(model, q, v, tau, feet6)
    assert np.array_equal(a, a_ref) and np.array_equal(f, f_ref)


def test_bad_input():
    model = pair("solo12")[0]
    q, v, tau = random_state(model, np.random.default_rng(0))
    with pytest.raises(sd.model.UnknownNameError, match="no_such_frame"):
        sd.contact_dynamics(model, q, v, tau, (sd.Contact("no_such_frame", "3d"),))
    with pytest.raises(ValueError, match="kind"):
        sd.Contact("FL_FOOT", "2d")
    with pytest.raises(ValueError, match="two contacts"):
        sd.contact_dynamics(model, q, v, tau, (sd.Contact("FL_FOOT", "3d"), sd.Contact("FL_FOOT")))
    with pytest.raises(TypeError, match="Contact objects"):
        sd.contact_dynamics(model, q, v, tau, (3.5,))
    with pytest.raises(NotImplementedError, match="one-sided"):
        sd.contact_dynamics(model, q, v, tau, (sd.Contact("FL_FOOT", "3d", friction=0.7),))
    with pytest.raises(ValueError, match="friction"):
        sd.Contact("FL_FOOT", "3d", friction=-1)
    with pytest.raises(ValueError, match="kind='3d'"):
        sd.Contact("FL_FOOT", friction=0.5)
    bad = v.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="v: contains NaN"):
        sd.contact_dynamics(model, q, bad, tau, (sd.Contact("FL_FOOT", "3d"),))
    with pytest.raises(ValueError, match="damping"):
        sd.contact_dynamics(model, q, v, tau, (sd.Contact("FL_FOOT", "3d"),), damping=-1.0)
    with pytest.raises(ValueError, match="baumgarte"):
        sd.contact_dynamics(model, q, v, tau, (sd.Contact("FL_FOOT", "3d"),), baumgarte=float("nan"))
    with pytest.raises(ValueError, match="tau"):
        sd.contact_dynamics(model, q, v, tau[:-1], (sd.Contact("FL_FOOT", "3d"),))
    with pytest.raises(ValueError, match="restitution"):
        sd.impulse_dynamics(model, q, v, (sd.Contact("FL_FOOT", "3d"),), restitution=-0.5)
    with pytest.raises(sd.model.UnknownNameError, match="no_such_frame"):
        sd.contact_dynamics_derivatives(model, q, v, tau, ("no_such_frame",))
    with pytest.raises(ValueError, match="two contacts"):
        sd.impulse_dynamics_derivatives(model, q, v, ("FL_FOOT", "FL_FOOT"))


def test_contact_is_immutable_hashable_and_named_by_its_repr():
    c = sd.Contact("FL_FOOT", "3d")
    assert c == sd.Contact("FL_FOOT", "3d") and hash(c) == hash(sd.Contact("FL_FOOT", "3d"))
    assert c != sd.Contact("FL_FOOT") and repr(c) == "Contact('FL_FOOT', kind='3d')"
    assert repr(sd.Contact("s", name="left")) == "Contact('s', name='left')"
    with pytest.raises(AttributeError, match="immutable"):
        c.kind = "6d"
    import pickle
    assert pickle.loads(pickle.dumps(c)) == c


# --- impulses ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("robot", list(ROBOTS))
def test_impulse_equals_pinocchio(robot):
    model, contacts, oracle = robot_case(robot)
    rng = np.random.default_rng(8)
    for e in (0.0, 0.4):
        q, v, _ = random_state(model, rng)
        vp, imp = sd.impulse_dynamics(model, q, v, contacts, restitution=e)
        vp_p, imp_p = oracle.impulse(q, v, e)
        K, J = kkt(model, q, v, contacts)
        b = solve_bound(K, np.concatenate([vp_p, imp_p]), c=64.0)
        assert rel_err(np.concatenate([vp, imp]), np.concatenate([vp_p, imp_p])) <= min(1e-9, b)
        # the contacts' velocities after the impact are -e times those before
        assert rel_err(J @ vp, -e * (J @ v)) <= b * np.max(np.abs(J))
        # momentum: H (v+ - v) = J^T impulses
        H = K[:model.nv, :model.nv]
        assert rel_err(H @ (vp - v), J.T @ imp) <= b * np.max(np.abs(H))


def test_impulse_batched_compiled_and_named():
    robot = "talos_reduced"
    model = pair(robot)[0]
    contacts = contacts_of(robot)
    rng = np.random.default_rng(9)
    q, v, _ = random_state(model, rng, (4,))
    res = sd.impulse_dynamics(model, q, v, contacts)
    assert isinstance(res, sd.Impulse) and res.v.shape == (4, model.nv) and res.impulses.shape == (4, 12)
    k = sd.compile(model)
    for i in range(4):
        one = sd.impulse_dynamics(model, q[i], v[i], contacts)
        K, _ = kkt(model, q[i], v[i], contacts)
        b = solve_bound(K, np.concatenate(one), c=64.0)
        assert rel_err(np.concatenate([res.v[i], res.impulses[i]]), np.concatenate(one)) <= b
        c = sd.impulse_dynamics(k, q[i], v[i], contacts)
        assert isinstance(c, sd.Impulse) and rel_err(np.concatenate(c), np.concatenate(one)) <= b


# --- derivatives --------------------------------------------------------------------------------

def _dbound(model, q, v, contacts, x):
    """Two evaluations of a derivative: each row a solve with the KKT matrix (its condition number)."""
    K, _ = kkt(model, q, v, contacts)
    return 1e3 * model.nv * EPS * np.linalg.cond(K)


@pytest.mark.parametrize("robot", ["solo12", "talos_reduced"])
def test_derivatives_equal_pinocchio(robot):
    model, contacts, oracle = robot_case(robot)
    rng = np.random.default_rng(10)
    q, v, tau = random_state(model, rng)
    ours = sd.contact_dynamics_derivatives(model, q, v, tau, contacts)
    theirs = oracle.dynamics_derivatives(q, v, tau)
    names = ("da_dq", "da_dv", "da_dtau", "df_dq", "df_dv", "df_dtau")
    for n, x, y in zip(names, ours, theirs):
        assert x.shape == y.shape, n
        assert rel_err(x, y) <= min(1e-9, _dbound(model, q, v, contacts, y)) * max(1.0, np.max(np.abs(y))), n


@pytest.mark.parametrize("robot", ["solo12", "talos_reduced"])
def test_impulse_derivatives_equal_pinocchio(robot):
    model, contacts, oracle = robot_case(robot)
    rng = np.random.default_rng(12)
    q, v, _ = random_state(model, rng)
    for e in (0.0, 0.3):
        ours = sd.impulse_dynamics_derivatives(model, q, v, contacts, restitution=e)
        theirs = oracle.impulse_derivatives(q, v, e)
        for n, x, y in zip(("dv_dq", "dv_dv", "dimpulses_dq", "dimpulses_dv"), ours, theirs):
            assert rel_err(x, y) <= min(1e-9, _dbound(model, q, v, contacts, y)) * max(1.0, np.max(np.abs(y))), n


def test_derivatives_are_central_differences(tree, rng):
    contacts = (sd.Contact(tree.frames[-1].name, "3d"),)
    q, v, tau = random_state(tree, rng)
    fx = rng.normal(size=(tree.nbodies, 6))
    kw = dict(baumgarte=2.0, damping=0.05, f_ext=fx)
    d = sd.contact_dynamics_derivatives(tree, q, v, tau, contacts, **kw)
    # The step balances the truncation error of central differences (h^2 |f'''| / 6) against rounding
    # (eps kappa |f| / h, kappa the contact system's conditioning): on the third tree the difference
    # to the derivatives is 7e-8 at h = 1e-4 but grows as h shrinks (2e-6 at 1e-5, 3e-5 at 1e-6, where
    # it depended on the BLAS build): rounding, amplified by kappa.
    h = 1e-4

    def f(q, v, tau):
        return np.concatenate(sd.contact_dynamics(tree, q, v, tau, contacts, **kw))
    for k in range(tree.nv):
        e = np.zeros(tree.nv)
        e[k] = h
        num = [(f(sd.integrate(tree, q, e), v, tau) - f(sd.integrate(tree, q, -e), v, tau)) / (2 * h),
               (f(q, v + e, tau) - f(q, v - e, tau)) / (2 * h), (f(q, v, tau + e) - f(q, v, tau - e)) / (2 * h)]
        for j, n in enumerate(num):
            got = np.concatenate([d[j][:, k], d[3 + j][:, k]])
            assert rel_err(got, n) <= 1e-5 * max(1.0, np.max(np.abs(n))), (k, j)


def test_impulse_derivatives_are_central_differences(tree, rng):
    contacts = (sd.Contact(tree.frames[-1].name, "3d"),)
    q, v, _ = random_state(tree, rng)
    d = sd.impulse_dynamics_derivatives(tree, q, v, contacts, restitution=0.3, damping=0.01)
    h = 1e-6

    def f(q, v):
        return np.concatenate(sd.impulse_dynamics(tree, q, v, contacts, restitution=0.3, damping=0.01))
    for k in range(tree.nv):
        e = np.zeros(tree.nv)
        e[k] = h
        num = [(f(sd.integrate(tree, q, e), v) - f(sd.integrate(tree, q, -e), v)) / (2 * h), (f(q, v + e) - f(q, v - e)) / (2 * h)]
        for j, n in enumerate(num):
            got = np.concatenate([d[j][:, k], d[2 + j][:, k]])
            assert rel_err(got, n) <= 1e-5 * max(1.0, np.max(np.abs(n))), (k, j)


def test_casadi_and_jax_bridges_through_the_registry():
    """The contact kernels reach CasADi and JAX from their traced programs, as every kernel does."""
    from sparsedyn.interop import casadi as sc_casadi
    from sparsedyn.interop import jax as sc_jax
    model = pair("solo12")[0]
    contacts = contacts_of("solo12")
    q, v, tau = random_state(model, np.random.default_rng(6))
    a, f = sd.contact_dynamics(model, q, v, tau, contacts)
    b = bound(model, q, v, contacts, a, f)
    static = {"contacts": contacts, "baumgarte": None, "damping": 0.0}
    F = sc_casadi.function(sd.contact_dynamics, model, static=static)
    a_c, f_c = (np.asarray(x).reshape(-1) for x in F(q, v, tau))
    assert rel_err(np.concatenate([a_c, f_c]), np.concatenate([a, f])) <= b
    import jax
    jax.config.update("jax_enable_x64", True)
    g = sc_jax.function(sd.impulse_dynamics, model, static={"contacts": contacts, "restitution": 0.0,
                                                             "damping": 0.0})
    vp, imp = sd.impulse_dynamics(model, q, v, contacts)
    vp_j, imp_j = (np.asarray(x) for x in g(q, v))
    assert rel_err(np.concatenate([vp_j, imp_j]), np.concatenate([vp, imp])) <= b


@pytest.mark.usefixtures("build_cache")
@pytest.mark.parametrize("name", ["contact_dynamics", "contact_dynamics_derivatives", "impulse_dynamics",
                                  "impulse_dynamics_derivatives"])
def test_a_list_of_contacts_runs_the_native_kernel_of_the_tuple(name):
    """Contacts given as a list, on the native road: the compiled kernel of the tuple of the same
    contacts runs (the list is called first, and the tuple's kernel is the one built), with the
    tuple's results bit for bit, one state and a batch, as a plain call and as a compiled method;
    and they equal the NumPy function to the KKT solve's rounding bound."""
    from kernel_args import arguments, static_choices
    from sparsedyn.codegen.trace import variant
    from sparsedyn.kernels import REGISTRY
    model = random_trees()[2]   # the floating tree whose kernels tests/compile builds (shared cache)
    static = static_choices(model, name)[0]
    contacts = static.pop("contacts")
    assert isinstance(contacts, tuple)
    rng = np.random.default_rng(11)
    public = getattr(sd, name)
    with sd.use_backend("native", deterministic=True):
        k = sd.compile(model)
        for batch in ((), (3,)):
            args = arguments(model, name, rng, batch=batch, static={"contacts": contacts, **static})
            by_list = public(model, **args, contacts=list(contacts), **static)
            assert variant(name, {"contacts": contacts, **static}).name in k.kernels        # it ran native
            n = len(k.kernels)
            by_tuple = public(model, **args, contacts=contacts, **static)
            by_method = getattr(k, name)(**args, contacts=list(contacts), **static)
            assert len(k.kernels) == n                                  # the list built nothing of its own
            ref = REGISTRY[name].fn(model, **args, contacts=contacts, **static)
            # the bound of tests/compile/test_native.py: a recursion over the tree times cond(H)
            tol = rounding_bound(model.nv + model.nbodies, float(np.max(np.linalg.cond(sd.crba(model, args["q"])))))
            for x, y, z, r in zip(by_list, by_tuple, by_method, ref):
                assert np.array_equal(x, y) and np.array_equal(x, z)
                assert rel_err(x, r) < tol
