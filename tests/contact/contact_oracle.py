"""Pinocchio's contact dynamics, in our conventions, for the contact tests (the oracle)."""

import numpy as np
import pinocchio as pin

import erd
from sparsedyn.interop import pinocchio as ip

#: Robots and their contacts: feet as points (quadrupeds), soles in 6D (humanoids).
ROBOTS = {
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"),
    "anymal_c": (("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"), "3d"),
    "talos_reduced": (("left_sole_link", "right_sole_link"), "6d"),
    "g1_29dof_rev_1_0": (("left_ankle_roll_link", "right_ankle_roll_link"), "6d"),
}

_PAIRS = {}


def pair(robot):
    """(our model, Pinocchio model, {frame name: Pinocchio frame index}) of a floating-base robot (cached)."""
    if robot not in _PAIRS:
        model, pm = erd.load_pair(robot, True)
        _PAIRS[robot] = (model, pm, erd.pin_frames(pm))
    return _PAIRS[robot]


class Oracle:
    """Pinocchio's ``constraintDynamics`` / ``impulseDynamics`` and their derivatives on ``contacts``
    (``(frame, kind)`` pairs), LOCAL reference (the contact frame's axes, as ours).  ``robot``: a name
    of :data:`ROBOTS`, or one of our models (exported by :func:`sparsedyn.interop.pinocchio.to_pinocchio`)."""

    def __init__(self, robot, contacts, kd=0.0):
        if isinstance(robot, str):
            self.model, self.pm, pf = pair(robot)
        else:
            self.model, self.pm = robot, ip.to_pinocchio(robot)
            pf = erd.pin_frames(self.pm)
        self.kinds = [k for _, k in contacts]
        self.cms = []
        for f, k in contacts:
            fr = self.pm.frames[pf[f]]
            t = pin.ContactType.CONTACT_3D if k == "3d" else pin.ContactType.CONTACT_6D
            cm = pin.RigidConstraintModel(t, self.pm, fr.parentJoint, fr.placement, pin.LOCAL)
            if kd:
                bp = cm.m_baumgarte_parameters
                bp.Kd = kd
                cm.setBaumgarteCorrectorParameters(bp)
            self.cms.append(cm)
        self.fresh()

    def fresh(self):
        """New Pinocchio data: its derivative functions read values a previous call left behind (with
        data reused, a second computeImpulseDynamicsDerivatives differs from the first)."""
        self.pd = self.pm.createData()
        self.cds = [c.createData() for c in self.cms]
        pin.initConstraintDynamics(self.pm, self.pd, self.cms, self.cds)

    def _forces(self, vec):
        out, r = [], 0
        for k in self.kinds:
            n = 3 if k == "3d" else 6
            out.append(vec[r:r + n] if k == "3d" else ip.force_from_pinocchio(vec[r:r + n]))
            r += n
        return np.concatenate(out)

    def _rows(self, M):
        """Rows of a Pinocchio (m, nv) derivative -> ours (force rows reordered, columns to our dofs)."""
        out, r = [], 0
        for k in self.kinds:
            n = 3 if k == "3d" else 6
            out.append(M[r:r + n] if k == "3d" else np.roll(M[r:r + 6], 3, axis=0))
            r += n
        return ip.v_from_pinocchio(self.model, np.concatenate(out))

    def dynamics(self, q, v, tau, mu=0.0):
        m = self.model
        ps = pin.ProximalSettings(1e-14, mu, 1)
        a = pin.constraintDynamics(self.pm, self.pd, ip.q_to_pinocchio(m, q), ip.v_to_pinocchio(m, v),
                                   ip.tau_to_pinocchio(m, tau), self.cms, self.cds, ps)
        return ip.v_from_pinocchio(m, a), self._forces(self.pd.lambda_c.copy())

    def dynamics_derivatives(self, q, v, tau):
        self.fresh()
        self.dynamics(q, v, tau)
        d = pin.computeConstraintDynamicsDerivatives(self.pm, self.pd, self.cms, self.cds)
        m = self.model
        return tuple(ip.derivative_from_pinocchio(m, x) for x in d[:3]) + tuple(self._rows(x) for x in d[3:])

    def impulse(self, q, v, e=0.0, mu=0.0):
        m = self.model
        ps = pin.ProximalSettings(1e-14, mu, 1)
        vp = pin.impulseDynamics(self.pm, self.pd, ip.q_to_pinocchio(m, q), ip.v_to_pinocchio(m, v), self.cms,
                                 self.cds, e, ps)
        return ip.v_from_pinocchio(m, vp), self._forces(self.pd.impulse_c.copy())

    def impulse_derivatives(self, q, v, e=0.0):
        self.fresh()
        self.impulse(q, v, e)
        pin.computeImpulseDynamicsDerivatives(self.pm, self.pd, self.cms, self.cds, e)
        m, d = self.model, self.pd
        # Pinocchio's ddq_dv is the derivative of the velocity jump v+ - v: add dv/dv = I.
        return (ip.derivative_from_pinocchio(m, d.ddq_dq), ip.derivative_from_pinocchio(m, d.ddq_dv) + np.eye(m.nv),
                self._rows(d.dlambda_dq), self._rows(d.dlambda_dv))

