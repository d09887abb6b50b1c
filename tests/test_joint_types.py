"""The joints of sparsedyn.model.joint_types (Euler-angle spherical, translation, universal, composite, a screw
with its own translation axis) in the algorithms: against Pinocchio (SphericalZYX, Translation, Universal,
Composite) on random trees mixing every joint type, against central differences, and the identities
(H = H^T > 0, dE/dt = v . tau, integrate(difference) = id); the compiled road."""

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import pinocchio as ip
from conftest import rel_err, rounding_bound, solve_bound

NEW = ("spherical_zyx", "spherical_xyz", "spherical_yxz", "spherical_zxy", "translation", "universal", "composite")
H_FD = 1e-6
# Central differences with step h: truncation O(h^2) and rounding O(eps / h), both far below this.
FD_TOL = 1e-6


def screw_chain():
    """A chain with a screw whose translation axis is not its rotation axis, between other joints."""
    b = sd.ModelBuilder("screws")
    joints = [sd.make_joint("free"), sd.make_joint("helical", (0, 0, 1), 0.3, translation_axis=(1, 0.5, 0)),
              sd.make_joint("spherical_zyx"), sd.make_joint("helical", (0.6, 0.8, 0), -0.2, translation_axis=(0, 0, 1)),
              sd.make_joint("universal", axes=((1, 0, 0), (0, 0.6, 0.8)))]
    for k, j in enumerate(joints):
        X = None if k == 0 else sd.spatial.Transform(sd.spatial.rotx(0.3 * k), np.array([0.8, 0.1, -0.2]))
        b.add_body(f"b{k}", None if k == 0 else f"b{k - 1}", j, X, mass=1.0 + 0.3 * k, com=[0.3, 0.05, -0.1],
                   rot_inertia=np.diag([0.05, 0.08, 0.11]) * (1 + k))
    b.add_frame("tip", "b4", sd.spatial.xlt([0.5, 0.2, 0.1]))
    return b.build()


TREES = {"mixed": sd.random_tree(15, branching=1.5, joint_types="all", seed=7, nframes=3),
         "mixed-floating": sd.random_tree(15, branching=2.0, skew=0.3, joint_types="all", seed=8,
                                          floating_base=True, nframes=3),
         "new": sd.random_tree(10, branching=1.5, joint_types=NEW, seed=9, nframes=2)}
PIN_TREES = sorted(TREES)


@pytest.fixture(params=sorted(TREES) + ["screws"])
def tree(request):
    return screw_chain() if request.param == "screws" else TREES[request.param]


def test_trees_mix_every_joint_type():
    assert {j.type for j in TREES["mixed"].joints} == set(sd.JOINT_TYPES)
    assert {j.type for j in TREES["new"].joints} == set(NEW)


def _states(model, n=3, seed=0):
    rng = np.random.default_rng(seed)
    return [(model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)) for _ in range(n)]


@pytest.mark.parametrize("name", PIN_TREES)
def test_dynamics_and_jacobians_against_pinocchio(name):
    model = TREES[name]
    pm = ip.to_pinocchio(model)
    pd = pm.createData()
    for q, v, a in _states(model):
        qp, vp, ap = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
        tau = sd.rnea(model, q, v, a)
        assert rel_err(tau, ip.tau_from_pinocchio(model, pin.rnea(pm, pd, qp, vp, ap))) < rounding_bound(model.nv)
        H = sd.crba(model, q)
        Hp = pin.crba(pm, pd, qp)
        Hp = np.triu(Hp) + np.triu(Hp, 1).T
        perm = ip.v_to_pinocchio(model, np.arange(model.nv)).astype(int)
        assert rel_err(H[np.ix_(perm, perm)], Hp) < rounding_bound(model.nv)
        qdd = sd.aba(model, q, v, tau)
        qdd_pin = ip.v_from_pinocchio(model, pin.aba(pm, pd, qp, vp, ip.tau_to_pinocchio(model, tau)))
        assert rel_err(qdd, qdd_pin) <= solve_bound(H, a, c=16.0)
        assert rel_err(qdd, a) <= solve_bound(H, a, c=16.0)
        pin.computeJointJacobians(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        for f in model.frames:
            fid = pm.getFrameId(f.name, pin.FrameType.OP_FRAME if f.name.startswith("frame") else pin.FrameType.BODY)
            for ref, pref in (("world", pin.WORLD), ("local", pin.LOCAL), ("local_world_aligned", pin.LOCAL_WORLD_ALIGNED)):
                J = ip.jacobian_to_pinocchio(model, sd.frame_jacobian(model, q, f.name, ref))
                assert rel_err(J, pin.getFrameJacobian(pm, pd, fid, pref)) < rounding_bound(model.nv)


def test_identities(tree):
    for q, v, a in _states(tree, seed=1):
        H = sd.crba(tree, q)
        assert rel_err(H, H.T) < rounding_bound(tree.nv) and np.linalg.eigvalsh(H).min() > 0
        tau = sd.rnea(tree, q, v, a)
        assert rel_err(H @ a + sd.nonlinear_effects(tree, q, v), tau) < rounding_bound(tree.nv)
        assert rel_err(sd.aba(tree, q, v, tau), a) <= solve_bound(H, a, c=16.0)
        assert rel_err(sd.minv(tree, q) @ H, np.eye(tree.nv)) <= rounding_bound(tree.nv, np.linalg.cond(H))
        # energy balance along the motion q(t) = q (+) t v, v(t) = v + t qdd: dE/dt = v . tau
        qdd = sd.aba(tree, q, v, tau)
        E = [sd.mechanical_energy(tree, sd.integrate(tree, q, s * H_FD * v), v + s * H_FD * qdd) for s in (1, -1)]
        assert abs((E[0] - E[1]) / (2 * H_FD) - v @ tau) <= FD_TOL * max(1.0, abs(v @ tau), np.abs(E).max())
        # the Coriolis matrix: C v is the velocity part of the bias, dH/dt - 2 C is skew
        C = sd.coriolis_matrix(tree, q, v)
        assert rel_err(C @ v, sd.nonlinear_effects(tree, q, v) - sd.generalized_gravity(tree, q)) < rounding_bound(tree.nv)
        Hd = (sd.crba(tree, sd.integrate(tree, q, H_FD * v)) - sd.crba(tree, sd.integrate(tree, q, -H_FD * v))) / (2 * H_FD)
        N = Hd - 2 * C
        assert np.abs(N + N.T).max() <= FD_TOL * max(1.0, np.abs(Hd).max())


def test_configuration_round_trips(tree):
    rng = np.random.default_rng(2)
    q0, q1 = tree.random_configuration(rng), tree.random_configuration(rng)
    # the same configuration as q1 (a quaternion may come back as -q, a planar angle turned by 2 pi)
    back = sd.integrate(tree, q0, sd.difference(tree, q0, q1))
    assert rel_err(sd.difference(tree, q1, back), np.zeros(tree.nv)) < rounding_bound(tree.nq, 100.0)
    vector = [i for i, j in enumerate(tree.joints) if j.type in NEW]            # vector coordinates: equal
    idx = np.concatenate([np.arange(tree.nq)[tree.q_slice(i)] for i in vector])
    assert rel_err(back[idx], q1[idx]) < rounding_bound(tree.nq, 100.0)
    v = 0.3 * rng.normal(size=tree.nv)
    assert rel_err(sd.difference(tree, q0, sd.integrate(tree, q0, v)), v) < rounding_bound(tree.nq, 100.0)
    assert rel_err(sd.difference(tree, q1, sd.interpolate(tree, q0, q1, 1.0)), np.zeros(tree.nv)) < rounding_bound(tree.nq, 100.0)


def _tangent_fd(model, f, q):
    cols = []
    for e in np.eye(model.nv) * H_FD:
        cols.append((f(sd.integrate(model, q, e)) - f(sd.integrate(model, q, -e))) / (2 * H_FD))
    return np.stack(cols, -1)


def _vector_fd(f, x):
    return np.stack([(f(x + e) - f(x - e)) / (2 * H_FD) for e in np.eye(x.shape[-1]) * H_FD], -1)


def test_derivatives_equal_central_differences(tree):
    q, v, a = _states(tree, 1, seed=3)[0]
    dq, dv, da = sd.rnea_derivatives(tree, q, v, a)
    assert rel_err(dq, _tangent_fd(tree, lambda x: sd.rnea(tree, x, v, a), q)) < FD_TOL
    assert rel_err(dv, _vector_fd(lambda x: sd.rnea(tree, q, x, a), v)) < FD_TOL
    assert rel_err(da, sd.crba(tree, q)) < rounding_bound(tree.nv)
    tau = sd.rnea(tree, q, v, a)
    Dq, Dv, Dtau = sd.aba_derivatives(tree, q, v, tau)
    assert rel_err(Dq, _tangent_fd(tree, lambda x: sd.aba(tree, x, v, tau), q)) < FD_TOL
    assert rel_err(Dv, _vector_fd(lambda x: sd.aba(tree, q, x, tau), v)) < FD_TOL
    assert rel_err(Dtau, sd.minv(tree, q)) <= rounding_bound(tree.nv, np.linalg.cond(sd.crba(tree, q)))
    frame = tree.frames[-1].name
    dJ = sd.frame_jacobian_time_variation(tree, q, v, frame, "world")
    fd = (sd.frame_jacobian(tree, sd.integrate(tree, q, H_FD * v), frame, "world")
          - sd.frame_jacobian(tree, sd.integrate(tree, q, -H_FD * v), frame, "world")) / (2 * H_FD)
    assert rel_err(dJ, fd) < FD_TOL


def test_translation_derivatives_against_pinocchio():
    """Pinocchio's derivatives are exact for joints with a constant S (Translation among the new ones;
    version 4.1 leaves out dS/dq for SphericalZYX and Universal, so central differences judge those)."""
    model = sd.random_tree(8, branching=1.5, joint_types=("translation", "revolute", "spherical", "prismatic"), seed=4)
    pm = ip.to_pinocchio(model)
    pd = pm.createData()
    q, v, a = _states(model, 1, seed=5)[0]
    qp, vp, ap = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
    pin.computeRNEADerivatives(pm, pd, qp, vp, ap)
    dq, dv, _ = sd.rnea_derivatives(model, q, v, a)
    assert rel_err(ip.derivative_to_pinocchio(model, dq), pd.dtau_dq) < 1e-12
    assert rel_err(ip.derivative_to_pinocchio(model, dv), pd.dtau_dv) < 1e-12


def test_screw_with_its_own_translation_axis_reduces_to_the_helical_joint():
    """translation_axis = axis gives the built-in helical joint's numbers."""
    def chain(joint):
        b = sd.ModelBuilder("screw")
        b.add_body("a", None, sd.make_joint("revolute", (1, 0, 0)), mass=1.0, com=[0.2, 0, 0], rot_inertia=np.eye(3) * 0.1)
        b.add_body("b", "a", joint, sd.spatial.xlt([1.0, 0, 0]), mass=2.0, com=[0.1, 0.2, 0], rot_inertia=np.eye(3) * 0.2)
        return b.build()
    axis = (0.0, 0.6, 0.8)
    ref, own = chain(sd.make_joint("helical", axis, 0.4)), chain(sd.make_joint("helical", axis, 0.4, translation_axis=axis))
    assert not own.joints[1].constant_subspace
    for q, v, a in _states(ref, seed=6):
        assert rel_err(sd.rnea(own, q, v, a), sd.rnea(ref, q, v, a)) < rounding_bound(2)
        assert rel_err(sd.crba(own, q), sd.crba(ref, q)) < rounding_bound(2)


def test_native_road_equals_numpy_batched_and_with_lists():
    model = TREES["new"]
    states = _states(model, 4, seed=7)
    Q, V, A = (np.stack(x) for x in zip(*states))
    tau, H, qdd = sd.rnea(model, Q, V, A), sd.crba(model, Q), sd.aba(model, Q, V, A)
    with sd.use_backend("native", deterministic=True):
        assert rel_err(sd.rnea(model, Q, V, A), tau) < rounding_bound(model.nv)
        assert rel_err(sd.crba(model, Q), H) < rounding_bound(model.nv)
        assert rel_err(sd.aba(model, Q, V, A), qdd) <= max(solve_bound(h, x, c=16.0) for h, x in zip(H, qdd))
        q, v, a = (x.tolist() for x in states[0])
        assert rel_err(sd.rnea(model, q, v, a), tau[0]) < rounding_bound(model.nv)
        frame = model.frames[0].name
        for fn, args in ((sd.minv, (Q,)), (sd.frame_jacobian, (Q, frame, "world")), (sd.integrate, (Q, V)),
                         (sd.coriolis_matrix, (Q, V)), (sd.rnea_derivatives, (Q, V, A))):
            with sd.use_backend("numpy"):
                ref = fn(model, *args)
            got = fn(model, *args)
            kappa = max(np.linalg.cond(h) for h in H) if fn in (sd.minv, sd.rnea_derivatives) else 1.0
            for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
                assert rel_err(g, r) < rounding_bound(model.nv + model.nbodies, kappa), fn.__name__


@pytest.mark.parametrize("jtype", NEW)
def test_urdf_export_refuses_what_urdf_cannot_say(jtype):
    joint = next(j for j in TREES["new"].joints if j.type == jtype)
    model = sd.ModelBuilder("one").add_body("b", None, joint, mass=1.0, rot_inertia=np.eye(3), joint_name="j").build()
    with pytest.raises(ValueError, match=rf"to_urdf: joint 'j' of type '{jtype}' cannot be written as URDF .* one axis"):
        sd.to_urdf(model)


def test_the_sparse_system_takes_a_varying_subspace():
    """S(q) is a state-dependent block of the sparse system (its cJ in the right-hand side)."""
    model = TREES["new"]
    for q, v, a in _states(model, 2):
        tau = sd.rnea(model, q, v, a)
        assert rel_err(sd.sparse_inverse_dynamics(model, q, v, a), tau) < rounding_bound(model.nv)
        assert rel_err(sd.sparse_forward_dynamics(model, q, v, tau), a) <= solve_bound(sd.crba(model, q), a, c=16.0)


def test_humanoid_with_euler_hips_against_pinocchio():
    """The built-in humanoid with spherical_zyx hips: same mass and dofs; RNEA and ABA equal Pinocchio's."""
    model, ref = sd.humanoid(hips="spherical_zyx"), sd.humanoid()
    assert (model.nv, model.nbodies) == (ref.nv, ref.nbodies - 4)
    assert abs(model.inertia[:, 5, 5].sum() - ref.inertia[:, 5, 5].sum()) < 1e-12 * ref.inertia[:, 5, 5].sum()
    assert [model.joints[model.joint(s + "hip")].type for s in ("l_", "r_")] == ["spherical_zyx"] * 2
    pm = ip.to_pinocchio(model)
    pd = pm.createData()
    for q, v, a in _states(model, 2, seed=11):
        qp, vp, ap = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
        tau = sd.rnea(model, q, v, a)
        assert rel_err(tau, ip.tau_from_pinocchio(model, pin.rnea(pm, pd, qp, vp, ap))) < rounding_bound(model.nv)
        qdd = ip.v_from_pinocchio(model, pin.aba(pm, pd, qp, vp, ip.tau_to_pinocchio(model, tau)))
        assert rel_err(sd.aba(model, q, v, tau), qdd) <= solve_bound(sd.crba(model, q), a, c=16.0)
    with pytest.raises(ValueError, match="hips: expected 'revolute' or an Euler-angle spherical joint type"):
        sd.humanoid(hips="spherical")
