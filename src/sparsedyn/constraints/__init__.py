"""Holonomic constraints: closed loops and couplings on a tree model.

The dynamics of a tree with ``nv`` dofs and ``m`` holonomic constraints
(*Inverse dynamics with holonomic constraints*, cassie-ik-id documentation)::

    M a + h = B u + J^T f + G^T lambda,        g(q) = 0

is solved by projecting onto the null space of ``G``:

* constraints (:mod:`.frames`, :mod:`.coupling`, :mod:`.user`) stacked in a
  :class:`ConstraintSet`: ``g(q)``, ``G(q)`` (w.r.t. the velocity ``v``) and
  ``Gdot v``;
* :func:`partition` (column-pivoted QR) and :func:`null_space` (``gamma``, the
  row-compressed ``G`` for redundant rows);
* :func:`assemble`, :func:`consistent_velocity`, :func:`consistent_acceleration`;
* :func:`constrained_inverse_dynamics` (fully / over- / under-actuated),
  :func:`constrained_forward_dynamics_derivatives`,
  :func:`constrained_forward_dynamics` (with Baumgarte terms), :func:`simulate`;
* loop-closure files next to a URDF: :mod:`sparsedyn.io.constraints` (``sparsedyn.load_closed_loop``);
* example mechanisms (:mod:`.examples`) and :func:`constraints_demo`;

Robots in contact with the world (contact and impulse dynamics, the frictional step) live in
:mod:`sparsedyn.contact`.

Conventions: world axes for kinematic residuals, angular rows first for welds,
velocities as everywhere in sparsedyn (free joint ``v = [omega; v]`` in the body frame).
"""

from .errors import (AssemblyError, ConstraintError, InfeasibleActuationError, InfeasibleActuationWarning,
                     OverconstrainedError, PartitionError)
from .base import Constraint, ConstraintSet, dof_names
from .frames import PointCoincidence, PointOnGround, Weld
from .coupling import JointCoupling, mimic_constraints
from .user import UserConstraint
from .partition import NullSpace, Partition, null_space, partition
from .assembly import assemble, consistent_acceleration, consistent_velocity, project_velocity
from .inverse import InverseDynamics, actuation_matrix, constrained_inverse_dynamics
from .forward import ForwardDynamics, constrained_forward_dynamics
from .derivatives import ForwardDynamicsDerivatives, constrained_forward_dynamics_derivatives
from .simulate import Trajectory, mechanical_energy, rk_step, simulate
from .examples import (EXAMPLES, Mechanism, delta_robot, example, five_bar, four_bar, humanoid_double_support,
                       slider_crank)
from .demo import constraints_demo

__all__ = [
    "ForwardDynamicsDerivatives", "constrained_forward_dynamics_derivatives",
    "ConstraintError", "AssemblyError", "PartitionError", "OverconstrainedError", "InfeasibleActuationError",
    "InfeasibleActuationWarning",
    "Constraint", "ConstraintSet", "dof_names", "PointCoincidence", "PointOnGround", "Weld", "JointCoupling",
    "mimic_constraints", "UserConstraint",
    "Partition", "NullSpace", "partition", "null_space",
    "assemble", "consistent_velocity", "consistent_acceleration", "project_velocity",
    "actuation_matrix", "InverseDynamics", "constrained_inverse_dynamics",
    "ForwardDynamics", "constrained_forward_dynamics",
    "Trajectory", "simulate", "rk_step", "mechanical_energy",
    "Mechanism", "EXAMPLES", "example", "four_bar", "slider_crank", "five_bar", "delta_robot",
    "humanoid_double_support", "constraints_demo",
]
