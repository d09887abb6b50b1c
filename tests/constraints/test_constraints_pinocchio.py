"""Constrained forward dynamics against Pinocchio's ``constraintDynamics`` (pin 4.1, ``RigidConstraintModel``).

Our point constraints become ``CONTACT_3D`` and our welds ``CONTACT_6D`` models
between the same joints and placements (``LOCAL`` reference frame).  On a
consistent state the relative velocity of the constrained frames is zero, so
Pinocchio's local-frame acceleration constraint and our world-frame one agree.
Forces: Pinocchio returns ``[f; n]`` in the local frame of the first placement;
ours are ``[n; f]`` (weld) or ``f`` (point) in world axes, so we rotate ours.
The planar loops (four-bar, slider-crank, five-bar) have a redundant z row in
Pinocchio's 3D contact, which its proximal solver regularises (``mu > 0``).
Pinocchio is a test dependency: these tests fail (never skip) without it.
"""

import numpy as np
import pinocchio as pin
import pytest

from sparsedyn.constraints import EXAMPLES, PointCoincidence, Weld, constrained_forward_dynamics, \
    constrained_inverse_dynamics
from sparsedyn.constraints._kinematics import body_rotation, kinematics
from sparsedyn.interop import pinocchio as conv
from conftest import rel_err
from constraints_helpers import example_states


def pinocchio_constraints(model, cs, pm):
    models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in cs:
        j1 = pm.getJointId(model.joint_names[c.body_a])
        j2 = 0 if c.body_b < 0 else pm.getJointId(model.joint_names[c.body_b])
        if isinstance(c, Weld):
            kind, M1, M2 = pin.ContactType.CONTACT_6D, pin.SE3(c.Ra, c.r_a), pin.SE3(c.Rb, c.r_b)
        elif isinstance(c, PointCoincidence):
            kind, M1, M2 = pin.ContactType.CONTACT_3D, pin.SE3(np.eye(3), c.r_a), pin.SE3(np.eye(3), c.r_b)
        else:
            raise AssertionError(f"no Pinocchio counterpart for {c!r}")
        rcm = pin.RigidConstraintModel(kind, pm, j1, M1, j2, M2, pin.ReferenceFrame.LOCAL)
        models.append(rcm)
        datas.append(rcm.createData())
    return models, datas


def ours_in_pinocchio_frames(model, cs, q, lam):
    """Our multipliers re-expressed as Pinocchio's contact forces (local frame of placement 1, [f; n])."""
    kin = kinematics(model, q)
    out, row = [], 0
    for c in cs:
        RA = body_rotation(kin, c.body_a) @ (c.Ra if isinstance(c, Weld) else np.eye(3))
        lc = lam[row:row + c.size]
        row += c.size
        if isinstance(c, Weld):
            out.append(np.concatenate([RA.T @ lc[3:], RA.T @ lc[:3]]))
        else:
            full = np.zeros(3)
            full[c.index] = lc
            out.append(RA.T @ full)
    return np.concatenate(out)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_constrained_forward_dynamics_agrees_with_pinocchio(name):
    mech, states = example_states(name)
    model, cs = mech.model, mech.constraints
    pm = conv.to_pinocchio(model)
    pd = pm.createData()
    models, datas = pinocchio_constraints(model, cs, pm)
    pin.initConstraintDynamics(pm, pd, models, datas)
    redundant = cs.m > np.linalg.matrix_rank(cs.jacobian(states[0][0])) or any(
        isinstance(c, PointCoincidence) and c.size < 3 for c in cs)
    rng = np.random.default_rng(11)
    worst_qdd = worst_lam = 0.0
    for q, v, qdd in states[:25]:
        # Realistic efforts: those of a random motion, plus a random perturbation.
        u = constrained_inverse_dynamics(cs, q, v, qdd, actuated=mech.actuated).u
        tau = mech.B @ (u * (1 + 0.3 * rng.normal(size=u.shape)))
        ours = constrained_forward_dynamics(cs, q, v, tau)
        prox = pin.ProximalSettings(1e-14, 1e-10, 200) if redundant else pin.ProximalSettings(1e-14, 0.0, 1)
        a = pin.constraintDynamics(pm, pd, conv.q_to_pinocchio(model, q), conv.v_to_pinocchio(model, v),
                                   conv.tau_to_pinocchio(model, tau), models, datas, prox)
        worst_qdd = max(worst_qdd, rel_err(ours.a, conv.v_from_pinocchio(model, a)))
        worst_lam = max(worst_lam, rel_err(ours_in_pinocchio_frames(model, cs, q, ours.lam), pd.lambda_c))
    print(name, "qdd", worst_qdd, "lambda", worst_lam)
    assert worst_qdd < 1e-9 and worst_lam < 1e-9, (worst_qdd, worst_lam)
