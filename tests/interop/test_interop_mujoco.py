"""MuJoCo layouts and MJCF export, checked against MuJoCo itself (a test dependency: no skip)."""

import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.interop import mujoco as mj
from conftest import rel_err

EXPRESSIBLE = ("revolute", "continuous", "prismatic", "cylindrical", "planar", "spherical")


def models():
    return [sd.random_tree(9, branching=1.0, joint_types=EXPRESSIBLE, seed=21),
            sd.random_tree(12, branching=2.0, skew=0.5, joint_types=EXPRESSIBLE, seed=22, floating_base=True),
            sd.random_tree(10, branching=1.5, joint_types=("planar", "spherical", "revolute"), seed=23,
                           floating_base=True),
            sd.humanoid()]


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_kinematics_dynamics_and_mass_matrix_agree_with_mujoco(model):
    mm = mj.load_mujoco(model)
    d = mujoco.MjData(mm)
    assert (mm.nq, mm.nv) == (model.nq, model.nv)
    rng = np.random.default_rng(5)
    for _ in range(3):
        q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        d.qpos[:], d.qvel[:], d.qacc[:] = mj.q_to_mujoco(model, q), mj.v_to_mujoco(model, q, v), \
            mj.a_to_mujoco(model, q, v, a)
        mujoco.mj_inverse(mm, d)
        R, p = sd.forward_kinematics(model, q)
        assert rel_err(d.xpos[1:], p) < 1e-12
        assert rel_err(d.xmat[1:].reshape(-1, 3, 3), R) < 1e-12
        assert rel_err(mj.tau_from_mujoco(model, d.qpos, d.qfrc_inverse), sd.rnea(model, q, v, a)) < 1e-9
        M = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(mm, d, M)
        T = mj.velocity_map(model, q)
        assert rel_err(T.T @ M @ T, sd.crba(model, q)) < 1e-9
        # body velocities: MuJoCo's cvel is [w; v] at the subtree CoM in world axes; compare the angular part
        assert rel_err(d.cvel[1:, :3], (R @ sd.body_velocities(model, q, v)[:, :3, None])[..., 0]) < 1e-12


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_from_mujoco_takes_mujocos_own_arrays(model):
    """MuJoCo's forward dynamics under an applied generalized force: its own qpos, qvel, qacc and
    qfrc_applied, converted, are a state and torques that our ABA maps to the same acceleration."""
    mm = mj.load_mujoco(model)
    D = mujoco.mjtDisableBit
    mm.opt.disableflags |= int(D.mjDSBL_CONSTRAINT | D.mjDSBL_SPRING | D.mjDSBL_DAMPER | D.mjDSBL_ACTUATION)
    d = mujoco.MjData(mm)
    rng = np.random.default_rng(8)
    d.qpos[:] = mj.q_to_mujoco(model, model.random_configuration(rng))
    d.qvel[:], d.qfrc_applied[:] = rng.normal(size=(2, model.nv))
    mujoco.mj_forward(mm, d)
    q = mj.q_from_mujoco(model, d.qpos)
    v = mj.v_from_mujoco(model, d.qpos, d.qvel)
    tau = mj.tau_from_mujoco(model, d.qpos, d.qfrc_applied)
    a = mj.a_from_mujoco(model, d.qpos, d.qvel, d.qacc)
    assert rel_err(a, sd.aba(model, q, v, tau)) < 1e-9
    assert rel_err(mj.a_to_mujoco(model, q, v, a), d.qacc) < 1e-12
    # batched, with the shapes named in errors
    assert mj.a_from_mujoco(model, np.stack([d.qpos] * 2), np.stack([d.qvel] * 2), np.stack([d.qacc] * 2)).shape \
        == (2, model.nv)
    with pytest.raises(ValueError, match=r"qacc: expected shape"):
        mj.a_from_mujoco(model, d.qpos, d.qvel, d.qacc[:-1])


def test_layout_round_trips_and_orthogonality():
    model = models()[2]
    rng = np.random.default_rng(0)
    Q = np.stack([model.random_configuration(rng) for _ in range(4)])
    V = rng.normal(size=(4, model.nv))
    np.testing.assert_array_equal(mj.q_from_mujoco(model, mj.q_to_mujoco(model, Q)), Q)
    qpos = mj.q_to_mujoco(model, Q)
    np.testing.assert_allclose(mj.v_from_mujoco(model, qpos, mj.v_to_mujoco(model, Q, V)), V, atol=1e-14)
    np.testing.assert_allclose(mj.tau_from_mujoco(model, qpos, mj.tau_to_mujoco(model, Q, V)), V, atol=1e-14)
    T = mj.velocity_map(model, Q)
    np.testing.assert_allclose(T @ np.swapaxes(T, -1, -2), np.broadcast_to(np.eye(model.nv), T.shape), atol=1e-14)
    # the free joint's quaternion moves to MuJoCo's [w, x, y, z] order
    np.testing.assert_array_equal(mj.q_to_mujoco(model, Q)[:, 3:7], Q[:, [6, 3, 4, 5]])


def test_inexpressible_models_are_refused():
    helical = sd.random_tree(3, joint_types=("helical",), seed=0)
    with pytest.raises(ValueError, match="MuJoCo has no helical joint"):
        mj.to_mjcf(helical)
    b = sd.ModelBuilder("m")
    b.add_body("a", None, sd.make_joint("revolute"))
    with pytest.raises(ValueError, match="body 'a' of model 'm': MuJoCo needs a positive mass"):
        mj.to_mjcf(b.build())
    with pytest.raises(ValueError, match=r"qvel: expected shape \(\.\.\., 1\)"):
        mj.v_from_mujoco(b.build(), [0.0], [0.0, 1.0])


def composite_model():
    """A floating base and two bodies moved by composite joints (MuJoCo: several joints in one body)."""
    b = sd.ModelBuilder("composites")
    b.add_body("base", None, sd.make_joint("free"), mass=3.0, com=[0.1, 0, 0], rot_inertia=np.diag([0.1, 0.2, 0.3]))
    parts = [sd.make_joint("revolute", [0.0, 0.6, 0.8]), sd.make_joint("prismatic", [1.0, 0, 0]),
             sd.make_joint("spherical")]
    b.add_body("hip", "base", sd.make_joint("composite", joints=parts), ([[0, -1, 0], [1, 0, 0], [0, 0, 1]],
               [0.2, 0.1, -0.1]), mass=1.5, com=[0, 0.05, -0.2], rot_inertia=np.diag([0.05, 0.04, 0.02]),
               joint_name="hz+hx+hball", armature=[0.1, 0.2, 0.3, 0.3, 0.3])
    b.add_body("slider", "hip", sd.make_joint("composite", joints=[sd.make_joint("prismatic", [0, 0, 1]),
               sd.make_joint("revolute", [1, 0, 0])]), ([[1, 0, 0], [0, 1, 0], [0, 0, 1]], [0, 0, -0.4]),
               mass=0.7, com=[0.02, 0, -0.1], rot_inertia=np.diag([0.01, 0.02, 0.01]), joint_name="s")
    return b.build()


def test_composite_joints_export_as_several_joints_of_one_body():
    model = composite_model()
    mm = mj.load_mujoco(model)
    assert mm.nbody == 4 and mm.njnt == 1 + 3 + 2
    assert [mm.joint(j).name for j in range(mm.njnt)] == ["base", "hz", "hx", "hball", "s_0", "s_1"]
    assert mm.dof_armature.tolist() == [0.0] * 6 + [0.1, 0.2, 0.3, 0.3, 0.3, 0.0, 0.0]
    d = mujoco.MjData(mm)
    rng = np.random.default_rng(4)
    for _ in range(3):
        q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        qpos = mj.q_to_mujoco(model, q)
        assert np.array_equal(qpos[9:13], q[[12, 9, 10, 11]])            # the ball's [w, x, y, z]
        d.qpos[:], d.qvel[:], d.qacc[:] = qpos, mj.v_to_mujoco(model, q, v), mj.a_to_mujoco(model, q, v, a)
        mujoco.mj_inverse(mm, d)
        R, p = sd.forward_kinematics(model, q)
        assert rel_err(d.xpos[1:], p) < 1e-12 and rel_err(d.xmat[1:].reshape(-1, 3, 3), R) < 1e-12
        assert rel_err(mj.tau_from_mujoco(model, d.qpos, d.qfrc_inverse), sd.rnea(model, q, v, a)) < 1e-9
        M = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(mm, d, M)
        T = mj.velocity_map(model, q)
        assert rel_err(T.T @ M @ T, sd.crba(model, q)) < 1e-9
