import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import spatial as sp
from sparsedyn.algorithms.aba import aba_kernel
from sparsedyn.algorithms.fd import fd_crb_kernel
from conftest import pendulum, random_state, rel_err


def test_aba_inverts_rnea(tree, rng):
    q, v, a = random_state(tree, rng)
    assert rel_err(sd.aba(tree, q, v, sd.rnea(tree, q, v, a)), a) < 1e-11
    f_ext = rng.normal(size=(tree.nbodies, 6))
    g = np.array([1.0, 2.0, -3.0])
    tau = sd.rnea(tree, q, v, a, f_ext, gravity=g)
    assert rel_err(sd.aba(tree, q, v, tau, f_ext, gravity=g), a) < 1e-11


def test_fd_crb_equals_aba(tree, rng):
    q, v, _ = random_state(tree, rng)
    tau = rng.normal(size=tree.nv) * 5
    f_ext = rng.normal(size=(tree.nbodies, 6))
    assert rel_err(sd.fd_crb(tree, q, v, tau), sd.aba(tree, q, v, tau)) < 1e-11
    assert rel_err(sd.fd_crb(tree, q, v, tau, f_ext), sd.aba(tree, q, v, tau, f_ext)) < 1e-11
    H, C = sd.HandC(tree, q, v, f_ext)
    assert rel_err(sd.aba(tree, q, v, tau, f_ext), np.linalg.solve(H, tau - C)) < 1e-10


def test_hand_derived_pendulum():
    m, l, Iy = 2.0, 0.7, 0.05
    model, gravity_moment = pendulum(m, l, Iy)
    q, qd, tau = 0.4, 1.3, 0.25
    expected = (tau + gravity_moment(q)) / (m * l * l + Iy)
    assert sd.aba(model, [q], [qd], [tau])[0] == pytest.approx(expected, rel=1e-14)
    assert sd.fd_crb(model, [q], [qd], [tau])[0] == pytest.approx(expected, rel=1e-14)


def test_free_body_falls_without_turning(rng):
    """A free body at rest: every point accelerates with g, so qdd = [0; R^T g] (body frame)."""
    b = sd.ModelBuilder("body")
    b.add_body("b", None, sd.make_joint("free"), mass=3.0, com=[0.1, -0.2, 0.3],
               rot_inertia=np.diag([0.1, 0.2, 0.25]))
    model = b.build()
    q = model.random_configuration(rng)
    R = sp.quat_to_rot(q[3:7])
    expected = np.concatenate([np.zeros(3), R.T @ model.gravity])
    z = np.zeros(6)
    np.testing.assert_allclose(sd.aba(model, q, z, z), expected, atol=1e-14)
    np.testing.assert_allclose(sd.fd_crb(model, q, z, z), expected, atol=1e-14)


def test_batched_equals_singles(tree, rng):
    Q, V, A = random_state(tree, rng, (3,))
    F = rng.normal(size=(3, tree.nbodies, 6))
    T = sd.rnea(tree, Q, V, A, F)
    for fn in (sd.aba, sd.fd_crb):
        out = fn(tree, Q, V, T, F)
        assert out.shape == (3, tree.nv)
        for k in range(3):
            assert rel_err(out[k], fn(tree, Q[k], V[k], T[k], F[k])) < 1e-13
        # one state, a batch of joint forces
        out = fn(tree, Q[0], V[0], T)
        for k in range(3):
            assert rel_err(out[k], fn(tree, Q[0], V[0], T[k])) < 1e-13
    assert sd.aba(tree, Q[None], V, T).shape == (1, 3, tree.nv)


def test_object_arrays_give_the_same_numbers(tree, rng):
    q, v, a = random_state(tree, rng)
    f = rng.normal(size=(tree.nbodies, 6))
    tau = sd.rnea(tree, q, v, a, f)
    o = lambda x: x.astype(object)  # noqa: E731
    for fn in (sd.aba, sd.fd_crb):
        out = fn(tree, o(q), o(v), o(tau), o(f))
        assert out.dtype == object
        # object arithmetic sums in a different order than BLAS; cond(H) reaches 1e5 on these trees
        assert rel_err(out.astype(float), fn(tree, q, v, tau, f)) < 1e-11
    # the kernels themselves (no checks), as the tracer calls them
    assert rel_err(aba_kernel(tree, o(q), o(v), o(tau), o(f)).astype(float), a) < 1e-11
    assert rel_err(fd_crb_kernel(tree, o(q), o(v), o(tau), o(f)).astype(float), a) < 1e-11


# --- singular articulated inertia -------------------------------------------------------

def chain_with_leaf(leaf_joint="revolute", **leaf):
    b = sd.ModelBuilder("arm")
    for k, parent in ((1, None), (2, "l1")):
        b.add_body(f"l{k}", parent, sd.make_joint("revolute", (0, 1, 0)), sp.xlt(np.array([0.0, 0.0, 0.5])),
                   mass=1.0, com=[0, 0, 0.25], rot_inertia=np.eye(3) * 0.02, joint_name=f"j{k}")
    b.add_body("leaf", "l2", sd.make_joint(leaf_joint, (0, 0, 1)), sp.xlt(np.array([0.0, 0.0, 0.5])),
               joint_name="wrist", **leaf)
    return b.build()


@pytest.mark.parametrize("leaf_joint, leaf", [
    ("revolute", {}),                                              # massless leaf
    ("revolute", dict(mass=2.0, com=[0, 0, 0.3])),                # point mass on the joint axis
    ("spherical", dict(mass=2.0)),                                 # point mass at the ball's centre
    ("prismatic", dict(mass=0.0, rot_inertia=np.eye(3) * 0.1)),    # inertia but no mass to slide
], ids=["massless", "mass-on-axis", "ball-point-mass", "massless-slider"])
def test_singular_articulated_inertia_names_the_joint(leaf_joint, leaf, rng):
    model = chain_with_leaf(leaf_joint, **leaf)
    q, v, _ = random_state(model, rng)
    tau = np.zeros(model.nv)
    for fn in (lambda: sd.aba(model, q, v, tau), lambda: sd.fd_crb(model, q, v, tau), lambda: sd.minv(model, q)):
        with pytest.raises(sd.SingularInertiaError, match=r"joint 'wrist' \(body 'leaf'.*singular") as e:
            fn()
        assert isinstance(e.value, ValueError)
        assert "massless" in str(e.value)
    # H is still well defined (and singular)
    H = sd.crba(model, q)
    assert np.linalg.eigvalsh(H).min() < 1e-12 * np.abs(H).max()


def test_massless_body_with_massive_children_is_fine(rng):
    b = sd.ModelBuilder("gimbal")
    b.add_body("base", None, sd.make_joint("revolute", (0, 0, 1)), mass=1.0, com=[0.1, 0, 0],
               rot_inertia=np.eye(3) * 0.01)
    b.add_body("ring", "base", sd.make_joint("revolute", (1, 0, 0)))        # massless intermediate
    b.add_body("tip", "ring", sd.make_joint("revolute", (0, 1, 0)), sp.xlt(np.array([0, 0, 0.2])),
               mass=0.5, com=[0, 0, 0.1], rot_inertia=np.eye(3) * 0.003)
    model = b.build()
    q, v, a = random_state(model, rng)
    tau = sd.rnea(model, q, v, a)
    assert rel_err(sd.aba(model, q, v, tau), a) < 1e-11
    assert rel_err(sd.fd_crb(model, q, v, tau), a) < 1e-11


def test_urdf_leaf_without_inertia_after_merging():
    """The typical case: a dummy link on a revolute joint, with a fixed child that is merged into it."""
    urdf = """<robot name="r">
      <link name="base"/>
      <link name="arm"><inertial><mass value="1"/><origin xyz="0 0 0.2"/>
        <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="flange"/>
      <link name="tool0"/>
      <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
        <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="wrist" type="continuous"><parent link="arm"/><child link="flange"/>
        <origin xyz="0 0 0.4"/><axis xyz="0 0 1"/></joint>
      <joint name="tool" type="fixed"><parent link="flange"/><child link="tool0"/></joint>
    </robot>"""
    model = sd.load_urdf(urdf)
    assert model.joint_names == ("shoulder", "wrist")
    with pytest.raises(sd.SingularInertiaError, match="joint 'wrist'"):
        sd.aba(model, model.neutral(), np.zeros(2), np.zeros(2))


def test_bad_arguments_are_named(tree):
    q, z = tree.neutral(), np.zeros(tree.nv)
    for fn in (sd.aba, sd.fd_crb):
        with pytest.raises(ValueError, match=rf"tau: expected shape \(\.\.\., {tree.nv}\)"):
            fn(tree, q, z, z[:-1])
        with pytest.raises(ValueError, match=rf"v: expected shape \(\.\.\., {tree.nv}\)"):
            fn(tree, q, z[:-1], z)
        with pytest.raises(ValueError, match=rf"q: expected shape \(\.\.\., {tree.nq}\)"):
            fn(tree, np.zeros(tree.nq + 1), z, z)
        with pytest.raises(ValueError, match=rf"f_ext: expected shape \(\.\.\., {tree.nbodies}, 6\)"):
            fn(tree, q, z, z, np.zeros(6))
        with pytest.raises(TypeError, match="tau: expected an array"):
            fn(tree, q, z, None)
        with pytest.raises(ValueError, match="batch shapes do not broadcast"):
            fn(tree, np.stack([q, q]), z, np.zeros((3, tree.nv)))


def test_transmitted_articulated_inertia_has_structural_zeros_along_the_joint_axis(rng):
    """Ia = IA - U D^-1 U^T satisfies Ia S = 0: for a joint about a frame axis that row and column are
    written as exact (structural) zeros, and the rest is symmetric."""
    from sparsedyn.algorithms.aba import articulated_transmitted
    from sparsedyn.algorithms.ltdl import spd_inverse
    A = rng.normal(size=(6, 6))
    IA = A @ A.T + np.eye(6)
    for joint in (sd.make_joint("revolute", (0, 1, 0)), sd.make_joint("revolute", (0.6, 0.8, 0)),
                  sd.make_joint("spherical")):
        S = joint.motion_subspace()
        U = IA @ S
        Dinv = spd_inverse(S.T @ U)
        Ia = articulated_transmitted(IA, U @ Dinv, U, S)
        np.testing.assert_allclose(Ia, IA - U @ Dinv @ U.T, atol=1e-12)
        np.testing.assert_array_equal(Ia, Ia.T)
        np.testing.assert_allclose(Ia @ S, 0, atol=1e-12)
        for k in np.flatnonzero(np.count_nonzero(S, axis=0) == 1):
            e = np.flatnonzero(S[:, k])[0]
            assert not Ia[e].any() and not Ia[:, e].any()


# --- models without a moving body; pivots of long chains -----------------------------------------

def test_a_model_without_moving_bodies_gives_empty_results():
    from erd import robots_dir
    single = sd.load_urdf('<robot name="r"><link name="a"/></robot>')
    iris = sd.load_urdf(robots_dir() / "iris_description/robots/iris_simple.urdf")                     # a drone: every link fixed to the base
    for model in (single, iris):
        assert model.nv == model.nq == model.nbodies == 0
        for batch in ((), (4,)):
            z = np.zeros(batch + (0,))
            for fn in (sd.rnea, sd.aba, sd.fd_crb):
                assert fn(model, z, z, z).shape == batch + (0,)
            assert sd.nonlinear_effects(model, z, z).shape == sd.generalized_gravity(model, z).shape == batch + (0,)
            assert sd.crba(model, z).shape == sd.minv(model, z).shape == batch + (0, 0)
            assert sd.body_velocities(model, z, z).shape == batch + (0, 6)


def heavy_rotor(M=1e11):
    """A 1 kg hub on a revolute joint carrying, on a second revolute joint about the same axis and through
    the same point, a rotor of mass M with its centre 1 m off the axis.  The rotor turns freely, so the
    hub's articulated inertia about its axis is its own 0.02 kg m^2 however heavy the rotor, while the
    largest articulated inertia entry grows like M (as the far end of a long chain does)."""
    b = sd.ModelBuilder("heavy")
    b.add_body("hub", None, sd.make_joint("revolute", (0, 0, 1)), mass=1.0, com=[0.1, 0, 0],
               rot_inertia=np.eye(3) * 0.01)
    b.add_body("rotor", "hub", sd.make_joint("revolute", (0, 0, 1)), mass=M, com=[1.0, 0, 0],
               rot_inertia=np.eye(3) * M / 100)
    return b.build()


def test_small_pivot_next_to_large_articulated_inertia_is_not_singular(rng):
    from conftest import rounding_bound
    model = heavy_rotor()
    q, v, a = random_state(model, rng)
    tau = sd.rnea(model, q, v, a)
    H = sd.crba(model, q)
    bound = rounding_bound(model.nv, np.linalg.cond(H))            # H is as ill-conditioned as the masses
    assert rel_err(sd.aba(model, q, v, tau), a) < bound
    assert rel_err(sd.fd_crb(model, q, v, tau), a) < bound
    assert rel_err(sd.minv(model, q) @ H, np.eye(2)) < bound
