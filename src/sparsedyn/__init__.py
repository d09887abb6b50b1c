"""sparsedyn: dynamics of articulated rigid bodies.

Quick use::

    import numpy as np
    import sparsedyn as sd
    model = sd.humanoid()                      # or sd.load_model(path): URDF or MJCF
    q = model.random_configuration(0)          # (nq,)
    v = np.zeros(model.nv); a = np.zeros(model.nv)
    tau = sd.rnea(model, q, v, a)              # (nv,)

Conventions (angular-first spatial vectors, quaternions ``[x, y, z, w]``, floating
base ``v = [omega; v]`` in the body frame) are documented in :mod:`sparsedyn.model.spatial`
and :mod:`sparsedyn.model.joints`.  Arguments are named ``q, v, a, tau, f_ext`` everywhere.

The model layer and the classical algorithms are imported with the package; the
URDF reader, the sparse layer, estimation, constraints and the compiler are imported
on first use of one of their names (``sd.load_urdf``, ``sd.EstimationProblem``,
``sd.compile``, ...), so ``import sparsedyn`` stays fast and does not import SciPy.
"""

import importlib as _importlib

from .model import spatial
from . import kernels as _kernels
from .kernels import use_backend
from ._checks import BatchMemoryError, NonFiniteResultError
from .model.lie import exp3, exp3_jacobian, exp6, exp6_jacobian, log3, log3_jacobian, log6, log6_jacobian
from .model.joints import JOINT_TYPES, Joint, jcalc, make_joint
from .model import joint_types as _joint_types       # registers the multi-axis joint types (imported with the package)
from .model.joint_custom import CustomJoint
from .algorithms.kinematics import (body_velocities, forward_kinematics, frame_jacobian, frame_placement,
                                    frame_placements, frame_velocity)
from .model import Frame, JointDynamics, Mimic, Model, ModelError
from .model.actuators import Actuators
from .model.builders import ModelBuilder
from .model import edit
from .model.edit import append_model, reduce_model
from .algorithms.rnea import generalized_gravity, nonlinear_effects, rnea
from .model.builders import (BUILTIN_MODELS, auto_tree, builtin, humanoid, humanoid_standing_configuration, random_tree,
                       serial_chain)
from .algorithms.crba import HandC, crba
from .algorithms.configuration import (difference, difference_derivatives, integrate, integrate_derivatives,
                                       interpolate, normalize)
from .algorithms.coriolis import coriolis_matrix
from .algorithms.ltdl import (ltdl, ltdl_solve, ltl, ltl_solve, mpyL, mpyLi, mpyLit, mpyLt, sparsity_pattern,
                              spd_inverse)
from .algorithms.aba import SingularInertiaError, aba
from .algorithms.fd import fd_crb
from .algorithms.minv import minv
from .model.sensors import (Accelerometer, Contact, ContactLoad, ForceTorque, JointAcceleration, JointTorque,
                      KnownWrench, Prior, Sensor)
from .algorithms.kinematics import frame_acceleration, frame_classical_acceleration, frame_jacobian_dot_v
from .algorithms.kinematics import geometry_placements
from .model import Geometry
from .algorithms.com import (center_of_mass, center_of_mass_acceleration, center_of_mass_velocity, com_jacobian,
                             subtree_centers_of_mass, subtree_masses)
from .algorithms.centroidal import (centroidal_composite_inertia, centroidal_momentum, centroidal_momentum_matrix,
                                    centroidal_momentum_matrix_dot_v, centroidal_momentum_rate)
from .algorithms.energy import kinetic_energy, mechanical_energy, potential_energy
from .algorithms.passive import passive_forces, passive_forces_derivatives
from .algorithms.proper_acceleration import frame_proper_acceleration
from .algorithms.regressor import joint_torque_regressor, joint_wrench_regressor
from .algorithms.derivatives import derivatives
from .algorithms.dynamics_derivatives import (aba_derivatives, generalized_gravity_derivatives, rnea_derivatives,
                                              static_torque_derivatives)
from .contact.dynamics import (ContactDynamics, ContactWarning, Impulse, contact_dynamics, contact_dynamics_derivatives,
                               impulse_dynamics, impulse_dynamics_derivatives)
from .contact.friction import (ContactProblem, ContactStep, ContactStepWarning, Rollout, contact_problem, contact_step,
                               rollout)
from .contact.friction import StepArrays, contact_step_kernel
from .contact.friction_derivatives import ContactStepDerivatives, contact_step_derivatives
from .contact.scene_derivatives import SlotPartials, scene_step_partials
from .contact.point_partials import contact_step_partials
from .contact.shapes import Shape
from .contact.scene import Scene
from .contact.joint_stops import with_joint_stops
from .contact.collision import Hits, collide
from .contact.overlaps import SelfOverlapWarning, overlapping_pairs
from .contact.collision_kernel import collision_candidates
from .contact.collision_near import collision_candidates_ahead, collision_candidates_near
from .contact.mesh_plane import mesh_plane_heights
from .contact.pressure import (CentersOfPressure, ZeroMomentPoint, center_of_pressure, support_polygon,
                               zero_moment_point)
from .algorithms.kinematics_derivatives import (frame_acceleration_derivatives, frame_jacobian_time_variation,
                                                frame_velocity_derivatives)
from .algorithms.centroidal_derivatives import centroidal_dynamics_derivatives

from ._version import __version__

#: Names imported on first use: public name -> (module, attribute or None for the module itself).
_LAZY = {
    "load_urdf": ("sparsedyn.io.urdf", "load_urdf"),
    "to_urdf": ("sparsedyn.io.urdf", "to_urdf"),
    "UrdfError": ("sparsedyn.io.urdf", "UrdfError"),
    "UrdfWarning": ("sparsedyn.io.urdf", "UrdfWarning"),
    "load_mjcf": ("sparsedyn.io.mjcf", "load_mjcf"),
    "MjcfError": ("sparsedyn.io.mjcf", "MjcfError"),
    "MjcfWarning": ("sparsedyn.io.mjcf", "MjcfWarning"),
    "mjcf_measurements": ("sparsedyn.io.mjcf", "mjcf_measurements"),
    "load_model": ("sparsedyn.io.load", "load_model"),
    "load_srdf": ("sparsedyn.io.srdf", "load_srdf"),
    "load_actuators": ("sparsedyn.io.mjcf_actuators", "load_actuators"),
    "Srdf": ("sparsedyn.io.srdf", "Srdf"),
    "SrdfError": ("sparsedyn.io.srdf", "SrdfError"),
    "SrdfWarning": ("sparsedyn.io.srdf", "SrdfWarning"),
    "load_closed_loop": ("sparsedyn.io.constraints", "load_closed_loop"),
    "load_constraints": ("sparsedyn.io.constraints", "load_constraints"),
    "save_constraints": ("sparsedyn.io.constraints", "save_constraints"),
    "constraints_path": ("sparsedyn.io.constraints", "constraints_path"),
    "ClosedLoop": ("sparsedyn.io.constraints", "ClosedLoop"),
    "sparse": ("sparsedyn.sparse", None),
    "sparse_inverse_dynamics": ("sparsedyn.sparse", "sparse_inverse_dynamics"),
    "sparse_forward_dynamics": ("sparsedyn.sparse", "sparse_forward_dynamics"),
    "sparse_hybrid_dynamics": ("sparsedyn.sparse", "sparse_hybrid_dynamics"),
    "constraints": ("sparsedyn.constraints", None),
    "ConstraintSet": ("sparsedyn.constraints", "ConstraintSet"),
    "PointCoincidence": ("sparsedyn.constraints", "PointCoincidence"),
    "PointOnGround": ("sparsedyn.constraints", "PointOnGround"),
    "Weld": ("sparsedyn.constraints", "Weld"),
    "JointCoupling": ("sparsedyn.constraints", "JointCoupling"),
    "constrained_inverse_dynamics": ("sparsedyn.constraints", "constrained_inverse_dynamics"),
    "constrained_forward_dynamics": ("sparsedyn.constraints", "constrained_forward_dynamics"),
    "constrained_forward_dynamics_derivatives": ("sparsedyn.constraints", "constrained_forward_dynamics_derivatives"),
    "estimation": ("sparsedyn.estimation", None),
    "EstimationProblem": ("sparsedyn.estimation", "EstimationProblem"),
    "IllPosedError": ("sparsedyn.estimation", "IllPosedError"),
    "SensorFileError": ("sparsedyn.estimation", "SensorFileError"),
    "imu_base_state": ("sparsedyn.estimation", "imu_base_state"),
    "estimate_report": ("sparsedyn.estimation", "estimate_report"),
    "estimate_derivatives": ("sparsedyn.estimation", "estimate_derivatives"),
    "estimation_demo": ("sparsedyn.estimation", "estimation_demo"),
    "codegen": ("sparsedyn.codegen", None),
    "CompiledModel": ("sparsedyn.codegen", "CompiledModel"),
    "CompiledStructure": ("sparsedyn.sparse", "CompiledStructure"),        # sparsedyn.compile(structure)
    "CompiledEstimator": ("sparsedyn.estimation", "CompiledEstimator"),    # sparsedyn.compile(estimator)
    "compile": ("sparsedyn.codegen", "compile"),          # sparsedyn.compile(model) -> CompiledModel
    "compile_report": ("sparsedyn.codegen", "compile_report"),
    "identification": ("sparsedyn.identification", None),
    "identify": ("sparsedyn.identification", "identify"),
    "IdentificationData": ("sparsedyn.identification", "IdentificationData"),
    "base_parameters": ("sparsedyn.identification", "base_parameters"),
    "BaseParameters": ("sparsedyn.identification", "BaseParameters"),
    "Identification": ("sparsedyn.identification", "Identification"),
    "force_torque_regressor": ("sparsedyn.identification", "force_torque_regressor"),
    "force_torque_parameters": ("sparsedyn.identification", "force_torque_parameters"),
    "interop": ("sparsedyn.interop", None),
    "Viewer": ("sparsedyn.viewer", "Viewer"),
    "io": ("sparsedyn.io", None),
    "Recording": ("sparsedyn.io.recordings", "Recording"),
    "RecordingError": ("sparsedyn.io.recordings", "RecordingError"),
    "open_recording": ("sparsedyn.io.recordings", "open_recording"),
    "write_recording": ("sparsedyn.io.recordings", "write_recording"),
    "estimate_recording": ("sparsedyn.estimation.recordings", "estimate_recording"),
    "identify_recording": ("sparsedyn.identification.recordings", "identify_recording"),
}


# The compiler registers itself with the registry when imported: on the first plain call.
_kernels.dispatch.native_loader = lambda: _importlib.import_module("sparsedyn.codegen.native")


def __getattr__(name):
    """Import the module behind a lazily imported public name on first use (PEP 562)."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'sparsedyn' has no attribute {name!r}") from None
    mod = _importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "spatial", "exp3", "log3", "exp3_jacobian", "log3_jacobian", "exp6", "log6", "exp6_jacobian", "log6_jacobian",
    "JOINT_TYPES", "Joint", "CustomJoint", "jcalc", "make_joint", "Model", "ModelBuilder", "ModelError",
    "Frame", "Mimic", "JointDynamics", "edit", "reduce_model", "append_model", "forward_kinematics", "frame_placement", "frame_placements", "frame_jacobian",
    "frame_velocity", "body_velocities", "rnea", "generalized_gravity", "nonlinear_effects", "coriolis_matrix",
    "BUILTIN_MODELS", "builtin", "humanoid", "humanoid_standing_configuration", "random_tree", "auto_tree",
    "serial_chain",
    "load_urdf", "to_urdf", "UrdfError", "UrdfWarning", "load_mjcf", "MjcfError", "MjcfWarning",
    "mjcf_measurements", "load_model", "load_srdf", "Srdf", "SrdfError", "SrdfWarning", "load_actuators", "Actuators",
    "integrate", "difference", "interpolate", "normalize", "crba", "HandC", "ltdl", "ltl", "ltdl_solve", "ltl_solve", "mpyL", "mpyLt", "mpyLi", "mpyLit",
    "sparsity_pattern", "spd_inverse", "aba", "SingularInertiaError", "fd_crb", "minv",
    "derivatives", "rnea_derivatives", "aba_derivatives", "generalized_gravity_derivatives",
    "static_torque_derivatives", "frame_velocity_derivatives", "frame_acceleration_derivatives",
    "frame_jacobian_time_variation", "centroidal_dynamics_derivatives", "integrate_derivatives",
    "difference_derivatives",
    "Sensor", "ForceTorque", "ContactLoad", "JointTorque", "JointAcceleration", "KnownWrench", "Accelerometer",
    "Prior", "Contact",
    "frame_acceleration", "frame_classical_acceleration", "frame_jacobian_dot_v", "frame_proper_acceleration",
    "geometry_placements", "Geometry", "Viewer", "with_joint_stops",
    "center_of_mass", "center_of_mass_velocity", "center_of_mass_acceleration", "com_jacobian",
    "subtree_centers_of_mass", "subtree_masses", "centroidal_momentum", "centroidal_momentum_rate",
    "centroidal_momentum_matrix", "centroidal_momentum_matrix_dot_v", "centroidal_composite_inertia",
    "kinetic_energy", "potential_energy", "mechanical_energy", "joint_torque_regressor", "joint_wrench_regressor",
    "passive_forces", "passive_forces_derivatives",
    "identification", "identify", "base_parameters", "BaseParameters", "Identification", "force_torque_regressor",
    "IdentificationData", "force_torque_parameters",
    "sparse", "sparse_inverse_dynamics", "sparse_forward_dynamics", "sparse_hybrid_dynamics",
    "constraints", "ConstraintSet", "PointCoincidence", "PointOnGround", "Weld", "JointCoupling",
    "constrained_inverse_dynamics", "constrained_forward_dynamics", "constrained_forward_dynamics_derivatives",
    "load_closed_loop", "load_constraints", "save_constraints", "constraints_path", "ClosedLoop",
    "contact_dynamics", "impulse_dynamics", "contact_dynamics_derivatives", "impulse_dynamics_derivatives",
    "ContactDynamics", "Impulse", "ContactWarning",
    "contact_problem", "contact_step", "rollout", "ContactProblem", "ContactStep", "ContactStepWarning", "Rollout",
    "contact_step_kernel", "StepArrays",
    "contact_step_derivatives", "ContactStepDerivatives", "scene_step_partials", "SlotPartials",
    "contact_step_partials",
    "Shape", "Scene", "Hits", "collide", "overlapping_pairs", "SelfOverlapWarning", "collision_candidates", "collision_candidates_near", "mesh_plane_heights",
    "collision_candidates_ahead",
    "center_of_pressure", "zero_moment_point", "support_polygon", "CentersOfPressure", "ZeroMomentPoint",
    "estimation", "EstimationProblem", "IllPosedError", "SensorFileError", "imu_base_state", "estimate_report", "estimation_demo",
    "estimate_derivatives",
    "Recording", "RecordingError", "open_recording", "write_recording", "estimate_recording", "identify_recording",
    "use_backend", "NonFiniteResultError", "BatchMemoryError",
    "codegen", "CompiledModel", "compile_report",   # not "compile": * must not shadow Python's builtin
]
