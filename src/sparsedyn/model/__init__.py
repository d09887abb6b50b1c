"""The model layer: spatial algebra, joints, the frozen :class:`Model`, builders, sensors and editing.

``spatial``      3D/6D vectors, Plücker transforms, spatial inertias (angular-first)
``lie``          SO(3) and SE(3): exponential, logarithm and their Jacobians
``joints``       the joint registry (``jcalc(joint, q) -> (XJ, S)``) and the elementary joints
``joint_types``  multi-axis joints: Euler-angle spherical, translation, universal, composite
``joint_custom`` :class:`~sparsedyn.CustomJoint`, a joint whose ``jcalc`` the user writes
``model``        :class:`Model` (topology and constant parameters, frozen)
``records``      the records a Model holds: frames, fixed joints, geometry, mimic couplings, joint dynamics
``builders``     building models by hand, random trees, the built-in models
``contacts``     contacts as model entries (an unknown wrench at a frame)
``sensors``      sensors as model entries (what an estimation problem measures)
``edit``         ``reduce_model`` and ``append_model``

The parsers (URDF, MJCF, SRDF) live in :mod:`sparsedyn.io`; they build a Model and nothing else.
"""

from .model import (GEOMETRY_KINDS, GEOMETRY_SHAPES, FixedJoint, Frame, Geometry, JointDynamics, Mimic, Model,
                    ModelError, UnknownNameError, unknown_name)

__all__ = ["Model", "Frame", "FixedJoint", "Mimic", "JointDynamics", "ModelError", "UnknownNameError", "unknown_name",
           "Geometry", "GEOMETRY_KINDS", "GEOMETRY_SHAPES"]
