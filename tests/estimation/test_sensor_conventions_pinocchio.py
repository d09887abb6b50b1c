"""The conventions of the estimation sensors against an independent truth: Pinocchio's RNEA with
external forces on TALOS (example-robot-data, loaded by Pinocchio itself from the URDF).

The truth is made without the estimation module: a state, a wrench at the left sole and a push at
the left gripper chosen freely, the right sole's wrench solved (in Pinocchio) so that the floating
base needs no actuation; Pinocchio's RNEA then gives every joint torque.  The readings handed to the
estimator are taken from that truth by the documented conventions alone (load cells: components
``nx, ny, fz`` of the contact wrench ``[n; f]`` in the sole frame; a known wrench: ``[n; f]`` at its
frame; a prior on ``fx``: the external wrench on a body in the body frame), never from
``predict()``, so a convention that drifted on either side shows up as an error.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import rel_err
from erd import load_pair

import sparsedyn as sd
from sparsedyn.interop.pinocchio import (force_from_pinocchio, motion_from_pinocchio, q_to_pinocchio,
                                         tau_from_pinocchio, v_to_pinocchio)

L, R, H = "left_sole_link", "right_sole_link", "gripper_left_base_link"
CELLS = [0, 1, 5]          # nx, ny, fz of [n; f]: the documented load-cell components


@pytest.fixture(scope="module")
def talos():
    return load_pair("talos_reduced", True)


def _pinocchio_data(model, pm, q, v, a, wrenches):
    """Pinocchio's data after its RNEA with ``wrenches`` ({frame: [n; f] on the robot, frame axes,
    about its origin})."""
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    for name, w in wrenches.items():
        F = pm.frames[pm.getFrameId(name)]
        fext[F.parentJoint] += F.placement.act(pin.Force(w[3:], w[:3]))
    pd = pm.createData()
    pin.rnea(pm, pd, q_to_pinocchio(model, q), v_to_pinocchio(model, v), v_to_pinocchio(model, a), fext)
    return pd


def pin_torques(model, pm, q, v, a, wrenches):
    """Pinocchio's RNEA with ``wrenches`` ({frame: [n; f] on the robot, frame axes, about its origin})."""
    return tau_from_pinocchio(model, np.array(_pinocchio_data(model, pm, q, v, a, wrenches).tau))


def body_wrench(pm, frame, w):
    """The wrench ``w`` at ``frame`` as the external wrench on the frame's body, body axes, ``[n; f]``."""
    F = pm.frames[pm.getFrameId(frame)]
    return force_from_pinocchio(np.array(F.placement.act(pin.Force(w[3:], w[:3])).vector))


def consistent_truth(model, pm, rng):
    """A state and contact/push wrenches with an unactuated floating base, and Pinocchio's torques."""
    q = model.random_configuration(rng)
    v, a = 0.5 * rng.normal(size=(2, model.nv))
    w_l = np.r_[5 * rng.normal(size=3), 100 * rng.normal(size=3)]
    w_h = np.r_[rng.normal(size=3), 20 * rng.normal(size=3)]
    # tau_base is affine in the right sole's wrench: solve for the one that leaves the base unactuated
    base = model.v_slice(0)
    t0 = pin_torques(model, pm, q, v, a, {L: w_l, H: w_h, R: np.zeros(6)})[base]
    B = np.stack([pin_torques(model, pm, q, v, a, {L: w_l, H: w_h, R: e})[base] - t0 for e in np.eye(6)], 1)
    w_r = np.linalg.solve(B, -t0)
    tau = pin_torques(model, pm, q, v, a, {L: w_l, H: w_h, R: w_r})
    assert np.abs(tau[base]).max() < 1e-9 * np.abs(tau).max()
    return q, v, a, w_l, w_r, w_h, tau


def test_load_cells_known_wrench_prior_and_contacts_against_pinocchio(talos):
    model, pm = talos
    rng = np.random.default_rng(29)
    for _ in range(3):
        q, v, a, w_l, w_r, w_h, tau = consistent_truth(model, pm, rng)
        body_l = model.body_names[model.frames[model.frame(L)].body]
        prior = sd.Prior("l_foot_prior", "fx", body_l, mean=body_wrench(pm, L, w_l), covariance=1e-4)
        prob = sd.EstimationProblem(model, sensors=[sd.ContactLoad("l_cells", L), sd.ContactLoad("r_cells", R),
                                                    sd.KnownWrench("push", H), prior], contacts=[L, R])
        assert prob.verdict().kind == "over-determined"
        y = prob.pack(qdd=prob.known_accelerations(a), l_cells=w_l[CELLS], r_cells=w_r[CELLS], push=w_h)
        e = prob.analyze().solve(q, v, y)
        # consistent data: the least-squares residual is zero whatever the weights, so the estimate is the truth
        assert rel_err(e.contacts[L], w_l) < 1e-7 and rel_err(e.contacts[R], w_r) < 1e-7
        assert rel_err(e.tau, tau) < 1e-7


def test_contact_wrenches_from_joint_torques_against_pinocchio(talos):
    """Joint-torque sensors on every actuated joint and two unknown contact wrenches plus a known push:
    the estimated contact wrenches are Pinocchio's, in the sole frames about their origins."""
    model, pm = talos
    rng = np.random.default_rng(30)
    q, v, a, w_l, w_r, w_h, tau = consistent_truth(model, pm, rng)
    joints = [model.joint_names[i] for i in range(1, model.nbodies)]
    prob = sd.EstimationProblem(model, sensors=[sd.JointTorque("tau", joints), sd.KnownWrench("push", H)],
                                contacts=[L, R])
    assert prob.verdict().ok
    y = prob.pack(qdd=prob.known_accelerations(a), tau=tau[6:], push=w_h)
    e = prob.analyze().solve(q, v, y)
    assert rel_err(e.contacts[L], w_l) < 1e-7 and rel_err(e.contacts[R], w_r) < 1e-7
    # a prior whose frame is wrong by the sole's offset would not be consistent: the convention matters
    wrong = sd.Prior("wrong", "fx", model.body_names[model.frames[model.frame(L)].body], mean=w_l, covariance=1e-8)
    bad = sd.EstimationProblem(model, sensors=[sd.JointTorque("tau", joints), sd.KnownWrench("push", H), wrong],
                               contacts=[L, R])
    e_bad = bad.analyze().solve(q, v, y)
    assert rel_err(e_bad.contacts[L], w_l) > 1e-3


def test_prior_kinds_against_pinocchio(talos):
    """A prior on each kind of variable (``f``, ``tau``, ``a``, ``qdd``; ``fx`` above), with its mean taken
    from Pinocchio's RNEA by the documented convention, where the prior decides the answer: it must
    agree with the exact sensors (the estimate is the truth), while the mean of a drifted convention
    (halves swapped, gravity left out, an offset) moves the estimate.  ``f``/``tau``: the load cells'
    problem, rank-deficient by one without the prior (the feet's squeeze); ``a``/``qdd``: joint
    torques with the floating base's acceleration unknown.  ``a`` is Pinocchio's ``a_gf``: the body's
    spatial acceleration with gravity folded in as the base's fictitious acceleration ``-g``."""
    model, pm = talos
    rng = np.random.default_rng(31)
    q, v, a, w_l, w_r, w_h, tau = consistent_truth(model, pm, rng)
    pd = _pinocchio_data(model, pm, q, v, a, {L: w_l, R: w_r, H: w_h})
    knee = model.body_names.index("leg_left_4_link")
    f_knee = force_from_pinocchio(np.array(pd.f[pm.getJointId(model.joint_names[knee])].vector))
    a_base = motion_from_pinocchio(np.array(pd.a_gf[pm.getJointId(model.joint_names[0])].vector))
    joints = [model.joint_names[i] for i in range(1, model.nbodies)]

    def estimate(kind, where, mean, cells):
        prior = sd.Prior("prior", kind, where, mean=mean, covariance=1e-6)
        if cells:
            prob = sd.EstimationProblem(model, sensors=[sd.ContactLoad("l_cells", L), sd.ContactLoad("r_cells", R),
                                                        sd.KnownWrench("push", H), prior], contacts=[L, R])
            y = prob.pack(qdd=prob.known_accelerations(a), l_cells=w_l[CELLS], r_cells=w_r[CELLS], push=w_h)
        else:
            prob = sd.EstimationProblem(model, sensors=[sd.JointTorque("tau", joints), sd.KnownWrench("push", H),
                                                        prior], contacts=[L, R], unknown_accelerations=["root_joint"])
            y = prob.pack(qdd=prob.known_accelerations(a), tau=tau[6:], push=w_h)
        assert prob.verdict().kind == "over-determined"
        return prob.analyze().solve(q, v, y)

    tau_knee = tau[model.v_slice(knee)]
    cases = [("f", model.body_names[knee], f_knee, np.r_[f_knee[3:], f_knee[:3]], True),
             ("tau", model.joint_names[knee], tau_knee, tau_knee + 1.0, True),
             ("a", model.body_names[0], a_base, a[:6], False),             # wrong: gravity left out
             ("qdd", model.joint_names[0], a[:6], a[:6] + 0.1, False)]
    for kind, where, mean, drifted, cells in cases:
        e = estimate(kind, where, mean, cells)
        assert rel_err(e.tau, tau) < 1e-7 and rel_err(e.contacts[L], w_l) < 1e-7, kind
        if kind == "a":                          # the estimated base acceleration is Pinocchio's a_gf
            assert rel_err(e.a[0], a_base) < 1e-7
        assert rel_err(estimate(kind, where, drifted, cells).tau, tau) > 1e-3, kind
