"""Rotor inertia (``Model.armature``): identities, Pinocchio and MuJoCo oracles, structural zeros."""

import mujoco
import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import mujoco as mjx
from sparsedyn.interop.pinocchio import q_to_pinocchio, tau_from_pinocchio, to_pinocchio, v_to_pinocchio
from sparsedyn.kernels import REGISTRY
from sparsedyn.symbolic.trace import trace_kernel


def _armatured(model, seed, zero_every=3):
    """``model`` with random armature, exactly zero on every ``zero_every``-th dof."""
    rng = np.random.default_rng(seed)
    arm = rng.uniform(0.05, 2.0, model.nv)
    arm[::zero_every] = 0.0
    return model.with_armature(arm)


TREES = [sd.random_tree(10, branching=1.6, joint_types="all", seed=s, floating_base=fb, name=f"t{s}")
         for s, fb in ((1, False), (2, True), (3, True))]


@pytest.mark.parametrize("model", TREES, ids=lambda m: m.name)
def test_identities_with_armature(model):
    m = _armatured(model, 7)
    rng = np.random.default_rng(0)
    q = np.stack([m.random_configuration(rng) for _ in range(3)])
    v, a = rng.normal(size=(3, m.nv)), rng.normal(size=(3, m.nv))
    tau = sd.rnea(m, q, v, a)
    H = sd.crba(m, q)
    # armature adds exactly diag(armature) to H and armature * a to tau
    H0 = sd.crba(model, q)
    assert np.allclose(H - H0, np.broadcast_to(np.diag(m.armature), H.shape), rtol=0, atol=1e-12 * np.abs(H).max())
    assert np.allclose(tau - sd.rnea(model, q, v, a), m.armature * a, atol=1e-11 * np.abs(tau).max())
    scale = np.abs(a).max()
    cond = np.linalg.cond(H).max()
    tol = 1e-15 * cond * 100
    assert np.abs(sd.aba(m, q, v, tau) - a).max() <= tol * scale
    assert np.abs(sd.fd_crb(m, q, v, tau) - a).max() <= tol * scale
    assert np.abs(sd.minv(m, q) @ H - np.eye(m.nv)).max() <= tol
    assert np.abs(np.einsum("...ij,...j->...i", H, a) + sd.nonlinear_effects(m, q, v) - tau).max() <= 1e-12 * np.abs(tau).max()
    # the sparse system's tau rows (joints whose motion subspace depends on q included)
    assert np.abs(sd.sparse_inverse_dynamics(m, q[0], v[0], a[0]) - tau[0]).max() <= 1e-11 * np.abs(tau).max()
    assert np.abs(sd.sparse_forward_dynamics(m, q[0], v[0], tau[0]) - a[0]).max() <= tol * scale


@pytest.mark.parametrize("model", TREES, ids=lambda m: m.name)
def test_armature_against_pinocchio(model):
    m = _armatured(model, 11)
    pm = to_pinocchio(m)
    assert np.array_equal(np.asarray(pm.armature), v_to_pinocchio(m, m.armature))
    pd = pm.createData()
    rng = np.random.default_rng(5)
    q = m.random_configuration(rng)
    v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
    qp, vp, ap = q_to_pinocchio(m, q), v_to_pinocchio(m, v), v_to_pinocchio(m, a)
    tau_pin = tau_from_pinocchio(m, pin.rnea(pm, pd, qp, vp, ap))
    tau = sd.rnea(m, q, v, a)
    assert np.abs(tau - tau_pin).max() <= 1e-11 * max(1.0, np.abs(tau).max())
    tau_in = rng.normal(size=m.nv)
    a_pin = pin.aba(pm, pd, qp, vp, v_to_pinocchio(m, tau_in))
    a_ours = sd.aba(m, q, v, tau_in)
    assert np.abs(v_to_pinocchio(m, a_ours) - a_pin).max() <= 1e-9 * max(1.0, np.abs(a_pin).max())
    # round trip keeps the armature
    back = sd.interop.pinocchio.from_pinocchio(pm)
    assert np.array_equal(back.armature, m.armature)


def test_armature_against_mujoco():
    model = sd.random_tree(9, branching=1.5, joint_types=("revolute", "prismatic", "spherical", "cylindrical"),
                           seed=4)
    rng = np.random.default_rng(1)
    arm = np.zeros(model.nv)
    for i, j in enumerate(model.joints):     # MuJoCo has one armature per joint: equal on a ball's dofs
        s = model.v_slice(i)
        arm[s] = rng.uniform(0.1, 1.0) if j.type == "spherical" else rng.uniform(0.1, 1.0, j.nv)
    arm[model.v_slice(2)] = 0.0
    m = model.with_armature(arm)
    mm = mujoco.MjModel.from_xml_string(mjx.to_mjcf(m))
    assert np.allclose(mm.dof_armature, mjx.tau_to_mujoco(m, m.neutral(), m.armature))
    md = mujoco.MjData(mm)
    q = m.random_configuration(rng)
    v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
    md.qpos[:], md.qvel[:], md.qacc[:] = mjx.q_to_mujoco(m, q), mjx.v_to_mujoco(m, q, v), mjx.a_to_mujoco(m, q, v, a)
    mujoco.mj_inverse(mm, md)
    tau = sd.rnea(m, q, v, a)
    assert np.abs(tau - mjx.tau_from_mujoco(m, q, md.qfrc_inverse)).max() <= 1e-10 * np.abs(tau).max()
    M = np.zeros((mm.nv, mm.nv))
    mujoco.mj_fullM(mm, md, M)
    assert np.abs(sd.crba(m, q) - M).max() <= 1e-12 * np.abs(M).max()


def test_free_joint_armature_not_exported_to_mujoco():
    m = sd.random_tree(3, seed=0, floating_base=True).with_armature(0.1)
    with pytest.raises(ValueError, match="free joint"):
        mjx.to_mjcf(m)


def test_builder_armature_and_checks():
    b = sd.ModelBuilder("two")
    b.add_body("a", None, sd.make_joint("spherical"), mass=1.0, rot_inertia=np.eye(3) * 0.1, armature=0.3)
    b.add_body("b", "a", sd.make_joint("cylindrical"), mass=1.0, rot_inertia=np.eye(3) * 0.1, armature=[0.1, 0.2])
    m = b.build()
    assert m.armature.tolist() == [0.3, 0.3, 0.3, 0.1, 0.2]
    assert not m.armature.flags.writeable
    with pytest.raises(sd.ModelError, match="armature"):
        m.with_armature([1.0, 2.0])
    with pytest.raises(sd.ModelError, match="armature"):
        m.with_armature([-1.0, 0, 0, 0, 0])
    assert np.array_equal(sd.humanoid().armature, np.zeros(35))


@pytest.mark.parametrize("name, extra", [("rnea", {"add": 1, "mul": 1}), ("crba", {"add": 1}),
                                         ("aba", None), ("minv", None)])
def test_zero_armature_adds_nothing_to_traced_programs(name, extra):
    """A zero armature is a structural zero; one revolute dof with armature adds its few operations."""
    model = sd.serial_chain(4)
    base = trace_kernel(REGISTRY[name], model).flops()
    zero = trace_kernel(REGISTRY[name], model.with_armature(np.zeros(4))).flops()
    assert zero == base
    arm = np.zeros(4)
    arm[2] = 0.5
    one = trace_kernel(REGISTRY[name], model.with_armature(arm)).flops()
    if extra is not None:
        assert {k: one[k] - base[k] for k in extra} == extra
        assert one["total"] - base["total"] == sum(extra.values())
    else:
        assert one["total"] > base["total"]
