"""Pinocchio 4.1's ADMM contact solver, one time step in our conventions (the oracle of the friction tests).

The step is Pinocchio's, assembled as its own unit tests do: the free velocity from ``aba``, the
constraint Jacobian of ``PointContactConstraintModel`` s (a point of the world against a point of the
robot, the world point's axes = the world's: z up), the Delassus matrix ``J M^-1 J^T`` from Pinocchio's
mass matrix, ``ADMMConstraintSolver`` on the NCP with De Saxcé's correction, then ``v+ = v_free +
M^-1 J^T lambda``.
"""

import numpy as np
import pinocchio as pin

import erd
from sparsedyn.interop import pinocchio as ip


class PinocchioStep:
    """``step(q, v, tau)``: Pinocchio's next velocity and impulses (ours: v (nv,), impulses (nc, 3)) for
    point contacts ``(frame, point)`` with friction ``mu`` against the ground, at the current placement
    of the points (the states given have the points on the ground)."""

    def __init__(self, robot, contacts, mu, dt, tol=1e-12):
        self.model, self.pm = erd.load_pair(robot, True)
        self.pf = erd.pin_frames(self.pm)
        self.contacts, self.mu, self.dt, self.tol = contacts, mu, dt, tol

    def constraints(self, pd):
        cms = pin.StdVec_ConstraintModel()
        for f, p in self.contacts:
            fr = self.pm.frames[self.pf[f]]
            on_robot = fr.placement * pin.SE3(np.eye(3), np.asarray(p, float))
            world = pd.oMf[self.pf[f]] * pin.SE3(np.eye(3), np.asarray(p, float))
            c = pin.PointContactConstraintModel(self.pm, 0, pin.SE3(np.eye(3), world.translation), fr.parentJoint,
                                                on_robot)
            c.setFriction(self.mu)
            cms.append(pin.ConstraintModel(c))
        return cms

    def prepare(self, q):
        """Pinocchio's data and the constraints (world points where the robot's points are at ``q``)."""
        pm = self.pm
        pd = pm.createData()
        pin.framesForwardKinematics(pm, pd, ip.q_to_pinocchio(self.model, q))
        cms = self.constraints(pd)
        cds = pin.StdVec_ConstraintData()
        for c in cms:
            cds.append(c.createData())
        return pd, cms, cds

    def step(self, q, v, tau):
        m = self.model
        qp, vp, tp = ip.q_to_pinocchio(m, q), ip.v_to_pinocchio(m, v), ip.tau_to_pinocchio(m, tau)
        v_next, lam = self.solve(self.prepare(q), qp, vp, tp)
        return ip.v_from_pinocchio(m, v_next), lam.reshape(-1, 3)

    def solve(self, prepared, qp, vp, tp):
        """The step in Pinocchio's conventions: ``(v_next, impulses)``."""
        pm = self.pm
        pd, cms, cds = prepared
        M = pin.crba(pm, pd, qp).copy()
        M = np.triu(M) + np.triu(M, 1).T
        v_free = vp + self.dt * pin.aba(pm, pd, qp, vp, tp)
        pin.forwardKinematics(pm, pd, qp)
        pin.computeJointJacobians(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        for c, d in zip(cms, cds):
            c.calc(pm, pd, d)
        J = pin.getConstraintsJacobian(pm, pd, cms, cds)
        G = J @ np.linalg.solve(M, J.T)
        g = J @ v_free
        settings = pin.ADMMSolverSettings()
        settings.absolute_feasibility_tol = settings.absolute_complementarity_tol = self.tol
        settings.relative_feasibility_tol = settings.relative_complementarity_tol = self.tol
        settings.max_iterations = 100000
        result = pin.ADMMSolverResult()
        pin.ADMMConstraintSolver(len(g)).solve(pin.DelassusOperatorDense(G), g, cms, cds, settings, result)
        assert result.converged, "Pinocchio's ADMM did not converge"
        lam = np.asarray(result.retrieveConstraintImpulses()).copy()
        self.iterations = result.iterations
        return v_free + np.linalg.solve(M, J.T @ lam), lam
