"""Oracle: centre of mass, centroidal momentum, frame accelerations, energies and the joint-torque
regressor against Pinocchio on every example-robot-data robot, fixed and floating base.

Pinocchio is imported unconditionally: a missing oracle is a failure, never a skip.  Conventions:
Pinocchio's spatial vectors and the rows of ``ccrba``/``dccrba`` are linear first (``[l; k]``), ours
angular first; columns are converted with ``tau_from_pinocchio`` (a row of a matrix acting on ``v``
transforms like a joint force).  The relative error ``rel_err`` is max|ours - theirs| / max(1, max|theirs|):
both libraries do the same O(depth) recursions in double precision, so 1e-9 leaves four orders of
magnitude above their rounding for the deepest trees here.
"""

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import pinocchio as ip
from conftest import rel_err
import erd
from erd import PIN_REFS as REFS

TOL = 1e-9
def compare(model, pm, rng, nstates=1, frames=3):
    """Worst relative error of each function against Pinocchio over ``nstates`` random states (dict)."""
    pd = pm.createData()
    worst = {}

    def note(key, ours, theirs):
        worst[key] = max(worst.get(key, 0.0), rel_err(ours, theirs))

    cols = lambda M: ip.tau_from_pinocchio(model, M)                       # noqa: E731  columns -> our dofs
    force = lambda f: ip.force_from_pinocchio(np.asarray(f))                # noqa: E731
    pin_frame = erd.pin_frames(pm)
    frame_names = [f for f in model.frame_names if f in pin_frame]
    frame_names = frame_names[:: max(1, len(frame_names) // frames)][:frames]
    for _ in range(nstates):
        q, v, a = erd.random_state(model, rng)
        qp, vp, ap = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
        # centre of mass
        pin.centerOfMass(pm, pd, qp, vp, ap)
        com, vcom, acom = sd.center_of_mass(model, q, v, a)
        note("com", com, pd.com[0])
        note("vcom", vcom, pd.vcom[0])
        note("acom", acom, pd.acom[0])
        note("com_jacobian", sd.com_jacobian(model, q), cols(pin.jacobianCenterOfMass(pm, pd, qp)))
        # centroidal momentum
        note("A_G", sd.centroidal_momentum_matrix(model, q), np.roll(cols(pin.ccrba(pm, pd, qp, vp)), 3, axis=0))
        note("h_G", sd.centroidal_momentum(model, q, v), force(pin.computeCentroidalMomentum(pm, pd, qp, vp).vector))
        note("I_G", sd.centroidal_composite_inertia(model, q), np.roll(pd.Ig.matrix(), 3, axis=(0, 1)))
        pin.dccrba(pm, pd, qp, vp)
        note("Adot_G_v", sd.centroidal_momentum_matrix_dot_v(model, q, v), force(pd.dAg @ vp))
        hdot = pin.computeCentroidalMomentumTimeVariation(pm, pd, qp, vp, ap)
        note("hdot_G", sd.centroidal_momentum_rate(model, q, v, a)[1], force(hdot.vector))
        # energies
        note("kinetic", sd.kinetic_energy(model, q, v), pin.computeKineticEnergy(pm, pd, qp, vp))
        note("potential", sd.potential_energy(model, q), pin.computePotentialEnergy(pm, pd, qp))
        # frame accelerations and Jdot v
        pin.forwardKinematics(pm, pd, qp, vp, ap)
        pin.updateFramePlacements(pm, pd)
        pin.computeJointJacobiansTimeVariation(pm, pd, qp, vp)
        for f in frame_names:
            for ref, pref in REFS.items():
                mot = lambda m: ip.motion_from_pinocchio(np.asarray(m))     # noqa: E731
                note("frame_acc", sd.frame_acceleration(model, q, v, a, f, ref),
                     mot(pin.getFrameAcceleration(pm, pd, pin_frame[f], pref).vector))
                note("frame_classical", sd.frame_classical_acceleration(model, q, v, a, f, ref),
                     mot(pin.getFrameClassicalAcceleration(pm, pd, pin_frame[f], pref).vector))
                note("Jdot_v", sd.frame_jacobian_dot_v(model, q, v, f, ref),
                     mot(pin.getFrameJacobianTimeVariation(pm, pd, pin_frame[f], pref) @ vp))
        # regressor and parameters
        Y_pin = pin.computeJointTorqueRegressor(pm, pd, qp, vp, ap)
        note("regressor", sd.joint_torque_regressor(model, q, v, a), ip.tau_from_pinocchio(model, Y_pin.T).T)
    pi_pin = np.concatenate([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)])
    note("parameters", model.inertial_parameters(), pi_pin)
    return worst


CASES = [(name, fb) for name in erd.ROBOTS for fb in (False, True)]


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{'floating' if fb else 'fixed'}" for n, fb in CASES])
def robot(request):
    name, fb = request.param
    model, pm = erd.load_pair(name, fb)
    assert tuple(pm.names)[1:] == model.joint_names
    return model, pm


def test_against_pinocchio(robot):
    model, pm = robot
    worst = compare(model, pm, np.random.default_rng(7))
    assert len(worst) == 16
    bad = {k: e for k, e in worst.items() if not e < TOL}
    assert not bad, bad
