"""``.. sparsedyn-cheatsheet::``: a table of every registered kernel, generated from
:data:`sparsedyn.kernels.REGISTRY` at build time, so the sheet cannot drift
from the code: signature, shapes of one state (leading batch axes allowed on
every array), and the Pinocchio equivalent."""

import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

#: Pinocchio's closest call for each kernel (``pin.`` prefix); missing names print "-".
PINOCCHIO = {
    "forward_kinematics": "forwardKinematics + data.oMi",
    "frame_placement": "updateFramePlacement / data.oMf[id]",
    "frame_placements": "framesForwardKinematics + data.oMf",
    "body_velocities": "forwardKinematics(q, v) + data.v",
    "frame_jacobian": "computeFrameJacobian(..., LOCAL / WORLD / LOCAL_WORLD_ALIGNED)",
    "frame_velocity": "getFrameVelocity",
    "frame_acceleration": "getFrameAcceleration / getFrameClassicalAcceleration",
    "frame_jacobian_dot_v": "getFrameClassicalAcceleration with a = 0",
    "rnea": "rnea",
    "generalized_gravity": "computeGeneralizedGravity",
    "nonlinear_effects": "nonLinearEffects",
    "crba": "crba (upper triangle filled)",
    "minv": "computeMinverse",
    "aba": "aba",
    "fd_crb": "forwardDynamics without constraints",
    "integrate": "integrate",
    "difference": "difference",
    "center_of_mass": "centerOfMass",
    "com_jacobian": "jacobianCenterOfMass",
    "centroidal_momentum": "computeCentroidalMomentum",
    "centroidal_momentum_matrix": "ccrba (data.Ag)",
    "centroidal_momentum_matrix_dot_v": "dccrba (data.dAg @ v)",
    "kinetic_energy": "computeKineticEnergy",
    "potential_energy": "computePotentialEnergy",
    "mechanical_energy": "computeMechanicalEnergy",
    "joint_torque_regressor": "computeJointTorqueRegressor",
    "rnea_derivatives": "computeRNEADerivatives",
    "aba_derivatives": "computeABADerivatives",
    "generalized_gravity_derivatives": "computeGeneralizedGravityDerivatives",
    "static_torque_derivatives": "computeStaticTorqueDerivatives",
    "frame_velocity_derivatives": "computeForwardKinematicsDerivatives + getFrameVelocityDerivatives",
    "frame_acceleration_derivatives": "computeForwardKinematicsDerivatives + getFrameAccelerationDerivatives",
    "frame_jacobian_time_variation": "computeJointJacobiansTimeVariation + getFrameJacobianTimeVariation",
    "centroidal_dynamics_derivatives": "computeCentroidalDynamicsDerivatives (rows [l; k_G])",
    "integrate_derivatives": "dIntegrate (ARG0, ARG1)",
    "difference_derivatives": "dDifference (ARG0, ARG1)",
}


def _shape(shape):
    parts = []
    for d in shape:
        parts.append(d if isinstance(d, (int, str)) else "k")
    return "(" + ", ".join(str(p) for p in parts) + ("," if len(parts) == 1 else "") + ")"


def _rows():
    from sparsedyn.kernels import REGISTRY
    rows = []
    for name in sorted(REGISTRY):
        k = REGISTRY[name]
        sig = str(inspect.signature(k.fn)).replace("*", r"\*")
        ins = ", ".join(f"``{n}`` {_shape(s)}" for n, s in {**k.inputs, **k.optional}.items())
        outs = ", ".join(f"``{n}`` {_shape(s)}" for n, s in k.outputs.items())
        pin = PINOCCHIO.get(name)
        rows.append((f":func:`~sparsedyn.{name}` ``{sig}``", ins or "-", outs, f"``pin.{pin}``" if pin else "-"))
    return rows


class Cheatsheet(SphinxDirective):
    has_content = False

    def run(self):
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 34 26 18 22", "",
                 "   * - function", "     - inputs (one state)", "     - outputs (one state)",
                 "     - Pinocchio"]
        for row in _rows():
            lines.append(f"   * - {row[0]}")
            lines.extend(f"     - {cell}" for cell in row[1:])
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(StringList(lines, source="cheatsheet"), self.content_offset, node)
        return node.children


def setup(app):
    app.add_directive("sparsedyn-cheatsheet", Cheatsheet)
    return {"version": "1", "parallel_read_safe": True}
