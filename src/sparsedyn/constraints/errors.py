"""Errors and warnings of the constraints layer.

Every one is a ``ValueError`` (or a ``UserWarning``) whose message names the
constraint rows, joints or coordinates involved and says what to change.
"""

from __future__ import annotations

__all__ = ["ConstraintError", "AssemblyError", "PartitionError", "OverconstrainedError",
           "InfeasibleActuationError", "InfeasibleActuationWarning"]


class ConstraintError(ValueError):
    """A constraint that cannot be built or evaluated (unknown frame, wrong shapes, bad joint type)."""


class AssemblyError(ConstraintError):
    """``g(q) = 0`` could not be solved: the configuration is unreachable (or the guess is too far)."""


class PartitionError(ConstraintError):
    """No valid split into independent / dependent coordinates: ``G_dep`` is singular."""


class OverconstrainedError(PartitionError):
    """Kept for code that catches it: constraints that leave no degree of freedom (``rank G = nv``) are
    solved (the motion is the constraints' alone), so the library no longer raises it."""


class InfeasibleActuationError(ConstraintError):
    """Under-actuated inverse dynamics: the requested motion cannot be produced by the actuators."""


class InfeasibleActuationWarning(UserWarning):
    """Under-actuated inverse dynamics returned a least-squares effort with a nonzero residual."""
