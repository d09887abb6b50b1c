"""Composite joints as chains of massless bodies: RNEA's analytical derivatives on the chained model
equal central differences of Pinocchio's RNEA on the model's own composite joints."""

import warnings
from pathlib import Path

import dm_control
import numpy as np
import pinocchio as pin

import sparsedyn as sd
from sparsedyn import spatial
from sparsedyn.algorithms.composite_chains import chain_forces, composite_chains
from sparsedyn.algorithms.dynamics_derivatives import rnea_derivative_kernel
from sparsedyn.interop import pinocchio as ip

from conftest import random_trees, rel_err, rounding_bound
from custom_joints import with_joints

HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"


def _placed_composite():
    parts = [sd.make_joint("prismatic", (0, 0.6, 0.8)), sd.make_joint("spherical"), sd.make_joint("revolute", (1, 0, 0))]
    placements = [spatial.xlt([0.0, 0.1, 0.0]),
                  spatial.from_pose(spatial.rotx(0.5) @ spatial.rotz(-0.3), np.array([0.0, -0.1, 0.3])), None]
    return with_joints(random_trees()[2], sd.make_joint("composite", joints=parts, placements=placements))


def _humanoid():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sd.load_mjcf(str(HUMANOID))


def _pinocchio_rnea(model, pm, pd, q, v, a, fpin):
    args = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
    return ip.tau_from_pinocchio(model, np.array(pin.rnea(pm, pd, *args, *fpin)))


def test_chained_rnea_derivatives_equal_central_differences_of_pinocchios_rnea():
    """The chained model's analytical RNEA derivatives (dtau/dq on the tangent space, dtau/dv) equal
    central differences of Pinocchio's rnea on the model's composite joints, with and without body
    forces, and the traced program's derivatives of the model itself to rounding.  Differences at
    h = 1e-5 of these unit-scale states: truncation h^2 / 6 |tau'''| and rounding eps |tau| / h, both
    well below 1e-6 of the derivatives' size."""
    h = 1e-5
    for model in (_humanoid(), _placed_composite()):
        chains = composite_chains(model)
        assert chains is not None and chains[0].nv == model.nv and chains[0].nbodies > model.nbodies
        pm = ip.to_pinocchio(model)
        pd = pm.createData()
        rng = np.random.default_rng(5)
        q = model.random_configuration(rng)
        v, a = rng.normal(size=(2, model.nv))
        f_ext = rng.normal(size=(model.nbodies, 6))
        for fext, fpin in ((None, ()), (f_ext, (ip.fext_to_pinocchio(model, f_ext),))):
            ours = rnea_derivative_kernel(chains[0], q, v, a, chain_forces(chains, fext), None, want_da=False)
            E = np.eye(model.nv) * h
            dq = np.stack([_pinocchio_rnea(model, pm, pd, sd.integrate(model, q, e), v, a, fpin)
                           - _pinocchio_rnea(model, pm, pd, sd.integrate(model, q, -e), v, a, fpin) for e in E], -1)
            dv = np.stack([_pinocchio_rnea(model, pm, pd, q, v + e, a, fpin)
                           - _pinocchio_rnea(model, pm, pd, q, v - e, a, fpin) for e in E], -1)
            assert rel_err(ours[0], dq / (2 * h)) <= 1e-6
            assert rel_err(ours[1], dv / (2 * h)) <= 1e-6
            traced = sd.rnea_derivatives(model, q, v, a, fext)
            n = model.nv + chains[0].nbodies
            assert rel_err(ours[0], traced[0]) <= rounding_bound(n) and rel_err(ours[1], traced[1]) <= rounding_bound(n)


def test_chained_model_has_the_same_dynamics_and_refuses_varying_subspaces():
    model = _humanoid()
    chained, last = composite_chains(model)
    rng = np.random.default_rng(2)
    q, (v, a), f = model.random_configuration(rng), rng.normal(size=(2, model.nv)), rng.normal(size=(model.nbodies, 6))
    tau = sd.rnea(model, q, v, a, f_ext=f)
    assert rel_err(sd.rnea(chained, q, v, a, f_ext=chain_forces((chained, last), f)), tau) <= rounding_bound(model.nv)
    # each body's inertia on its chain's last body, the parts' bodies massless
    assert np.array_equal(chained.inertia[last], model.inertia)
    assert np.count_nonzero(chained.inertia.reshape(chained.nbodies, -1).any(-1)) == np.count_nonzero(
        model.inertia.reshape(model.nbodies, -1).any(-1))
    # a universal joint is two revolute parts: a chain; a helical joint translating along a fixed axis
    # has a subspace that turns with its angle: no chain makes it constant
    universal = with_joints(random_trees()[2], sd.make_joint("universal"))
    chained, last = composite_chains(universal)
    q, (v, a) = universal.random_configuration(rng), rng.normal(size=(2, universal.nv))
    assert rel_err(sd.rnea(chained, q, v, a), sd.rnea(universal, q, v, a)) <= rounding_bound(universal.nv)
    screw = sd.make_joint("helical", (0, 0, 1), pitch=0.1, translation_axis=(1, 0, 0))
    assert not screw.constant_subspace
    assert composite_chains(with_joints(random_trees()[2], screw)) is None
    assert composite_chains(with_joints(random_trees()[2], sd.make_joint("composite", joints=[screw]))) is None
