"""A robot in contact with the world: contact and impulse dynamics, the frictional step.

* :mod:`.dynamics`: bilateral contact dynamics and impulses (:func:`contact_dynamics`,
  :func:`impulse_dynamics` and their derivatives), sparse kernels without a null-space projection;
* :mod:`.friction_problem`, :mod:`.friction_kernel`, :mod:`.friction`: one time step with one-sided
  contacts and exact Coulomb friction (:func:`contact_step`, :func:`rollout`);
* :mod:`.friction_derivatives`: derivatives of that step (:func:`contact_step_derivatives`);
* :mod:`.shapes`, :mod:`.scene`, :mod:`.collision`: collision shapes (:class:`Shape`), a robot and its
  world (:class:`Scene`) and the contacts found from their geometry (:func:`collide`).
* :mod:`.pressure`: centre of pressure, zero-moment point and support polygon from contact wrenches
  (:func:`center_of_pressure`, :func:`zero_moment_point`, :func:`support_polygon`).

Closed kinematic loops and other holonomic constraints live in :mod:`sparsedyn.constraints`.
Contact forces are those applied on the robot, in the contact frame's axes about its origin.
"""

from .dynamics import (ContactDynamics, ContactWarning, Impulse, contact_dynamics, contact_dynamics_derivatives,
                       impulse_dynamics, impulse_dynamics_derivatives)
from .friction import (ContactProblem, ContactStep, ContactStepWarning, Rollout, contact_problem, contact_step,
                       rollout)
from .friction_derivatives import ContactStepDerivatives, contact_step_derivatives
from .shapes import Shape
from .scene import Scene
from .collision import Hits, collide
from .overlaps import SelfOverlapWarning, overlapping_pairs
from .pressure import CentersOfPressure, ZeroMomentPoint, center_of_pressure, support_polygon, zero_moment_point

__all__ = [
    "ContactDynamics", "Impulse", "ContactWarning", "contact_dynamics", "impulse_dynamics",
    "contact_dynamics_derivatives", "impulse_dynamics_derivatives",
    "ContactProblem", "ContactStep", "ContactStepWarning", "Rollout", "contact_problem", "contact_step", "rollout",
    "ContactStepDerivatives", "contact_step_derivatives", "Shape", "Scene", "Hits", "collide", "overlapping_pairs",
    "SelfOverlapWarning",
    "CentersOfPressure", "ZeroMomentPoint", "center_of_pressure", "support_polygon", "zero_moment_point",
]
