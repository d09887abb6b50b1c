"""FK, Jacobians and RNEA against Pinocchio on example-robot-data URDFs and exported random trees."""

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import pinocchio as conv
from conftest import rel_err
from erd import PIN_REFS as REFS, ROBOTS, load_pair, pin_frames, random_state

def compare(model, pm, rng, nstates=2, frames=4):
    """Worst relative errors of our kernels against Pinocchio over a few random states."""
    pd = pm.createData()
    worst = {}

    def note(key, ours, theirs):
        worst[key] = max(worst.get(key, 0.0), rel_err(ours, theirs))

    pin_frame = pin_frames(pm)
    frame_names = [f for f in model.frame_names if f in pin_frame]
    frame_names = frame_names[:: max(1, len(frame_names) // frames)]
    for _ in range(nstates):
        q, v, a = random_state(model, rng)
        qp, vp, ap = conv.q_to_pinocchio(model, q), conv.v_to_pinocchio(model, v), conv.v_to_pinocchio(model, a)
        # FK of every body
        pin.forwardKinematics(pm, pd, qp, vp)
        R, p = sd.forward_kinematics(model, q)
        for i, name in enumerate(model.body_names):
            jid = pm.getJointId(model.joint_names[i])
            note("fk", np.concatenate([R[i].ravel(), p[i]]),
                 np.concatenate([pd.oMi[jid].rotation.ravel(), pd.oMi[jid].translation]))
        note("velocity", sd.body_velocities(model, q, v),
             np.stack([conv.motion_from_pinocchio(pd.v[pm.getJointId(n)].vector) for n in model.joint_names]))
        # Jacobians of frames, three references
        pin.computeJointJacobians(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        for f in frame_names:
            for ref, pref in REFS.items():
                Jp = pin.getFrameJacobian(pm, pd, pin_frame[f], pref)
                note("jacobian", sd.frame_jacobian(model, q, f, ref), conv.jacobian_from_pinocchio(model, Jp))
        # RNEA without and with external forces
        note("rnea", sd.rnea(model, q, v, a), conv.tau_from_pinocchio(model, pin.rnea(pm, pd, qp, vp, ap)))
        f_ext = rng.normal(size=(model.nbodies, 6))
        tp = pin.rnea(pm, pd, qp, vp, ap, conv.fext_to_pinocchio(model, f_ext))
        note("rnea_fext", sd.rnea(model, q, v, a, f_ext), conv.tau_from_pinocchio(model, tp))
        note("gravity", sd.generalized_gravity(model, q),
             conv.tau_from_pinocchio(model, pin.computeGeneralizedGravity(pm, pd, qp)))
        note("nle", sd.nonlinear_effects(model, q, v),
             conv.tau_from_pinocchio(model, pin.nonLinearEffects(pm, pd, qp, vp)))
    return worst


@pytest.mark.parametrize("floating_base", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_example_robot_agrees_with_pinocchio(robot, floating_base, record_property):
    model, pm = load_pair(robot, floating_base)
    assert list(model.joint_names) == list(pm.names)[1:]
    worst = compare(model, pm, np.random.default_rng(7))
    record_property("worst_rel_err", worst)
    assert set(worst) == {"fk", "velocity", "jacobian", "rnea", "rnea_fext", "gravity", "nle"}
    assert max(worst.values()) < 1e-9, worst


@pytest.mark.parametrize("seed,branching,floating_base",
                         [(11, 1.0, False), (12, 2.0, False), (13, 1.7, True), (14, 3.0, True)])
def test_random_tree_exported_to_urdf_agrees_with_pinocchio(seed, branching, floating_base):
    tree = sd.random_tree(14, branching=branching, skew=0.3, joint_types=("revolute", "prismatic", "continuous"),
                          seed=seed, floating_base=floating_base)
    text = sd.to_urdf(tree)
    model = sd.load_urdf(text, floating_base=floating_base)
    pm = pin.buildModelFromXML(text, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromXML(text)
    assert list(model.joint_names) == list(pm.names)[1:]
    worst = compare(model, pm, np.random.default_rng(seed))
    assert max(worst.values()) < 1e-9, worst
