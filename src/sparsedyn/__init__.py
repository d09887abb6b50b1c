"""sparsedyn: dynamics of articulated rigid bodies.

Quick use::

    import sparsedyn as sd
    model = sd.humanoid()                      # or sd.load_urdf("robot.urdf")
    q = model.random_configuration(0)
    tau = sd.rnea(model, q, v, a)

Conventions (angular-first spatial vectors, quaternions ``[x, y, z, w]``, floating
base ``v = [omega; v]`` in the body frame) are documented in :mod:`sparsedyn.spatial`
and :mod:`sparsedyn.joints`.
"""

from . import spatial
from .joints import JOINT_TYPES, Joint, jcalc, make_joint
from .algorithms.kinematics import (body_velocities, forward_kinematics, frame_jacobian, frame_placement,
                         frame_placements, frame_velocity)
from .model import Frame, Mimic, Model, ModelBuilder, ModelError
from .algorithms.rnea import generalized_gravity, nonlinear_effects, rnea
from .builders import (BUILTIN_MODELS, builtin, humanoid, humanoid_standing_configuration, random_tree,
                       serial_chain)
from .algorithms.crba import HandC, bias, crba
from .algorithms.ltdl import ltdl, ltdl_solve, ltl, ltl_solve, mpyL, mpyLi, mpyLit, mpyLt, sparsity_pattern
from .algorithms.aba import SingularInertiaError, aba
from .algorithms.fd import fd_crb
from .algorithms.minv import minv
from .algorithms.derivatives import (aba_derivatives, derivatives, generalized_gravity_derivatives,
                                     rnea_derivatives)
from .io.urdf import UrdfError, UrdfWarning, load_urdf, to_urdf
from . import sparse
from .sparse import sparse_forward_dynamics, sparse_inverse_dynamics
from . import constraints
from . import estimation
from .estimation import EstimationProblem, estimate_derivatives, estimate_report, estimation_demo
from . import codegen
from .codegen import CompiledModel, compile, compile_report   # sparsedyn.compile(model) -> CompiledModel
from .constraints import (ConstraintSet, JointCoupling, PointCoincidence, PointOnGround, Weld,
                          constrained_forward_dynamics, constrained_forward_dynamics_derivatives,
                          constrained_inverse_dynamics)

__version__ = "0.1.0"

__all__ = [
    "spatial", "JOINT_TYPES", "Joint", "jcalc", "make_joint", "Model", "ModelBuilder", "ModelError",
    "Frame", "Mimic", "forward_kinematics", "frame_placement", "frame_placements", "frame_jacobian",
    "frame_velocity", "body_velocities", "rnea", "generalized_gravity", "nonlinear_effects",
    "BUILTIN_MODELS", "builtin", "humanoid", "humanoid_standing_configuration", "random_tree", "serial_chain",
    "load_urdf", "to_urdf", "UrdfError", "UrdfWarning",
    "crba", "bias", "HandC", "ltdl", "ltl", "ltdl_solve", "ltl_solve", "mpyL", "mpyLt", "mpyLi", "mpyLit",
    "sparsity_pattern", "aba", "SingularInertiaError", "fd_crb", "minv",
    "derivatives", "rnea_derivatives", "aba_derivatives", "generalized_gravity_derivatives",
    "sparse", "sparse_inverse_dynamics", "sparse_forward_dynamics",
    "constraints", "ConstraintSet", "PointCoincidence", "PointOnGround", "Weld", "JointCoupling",
    "constrained_inverse_dynamics", "constrained_forward_dynamics", "constrained_forward_dynamics_derivatives",
    "estimation", "EstimationProblem", "estimate_report", "estimation_demo", "estimate_derivatives",
    "codegen", "CompiledModel", "compile_report",   # not "compile": * must not shadow Python's builtin
]
