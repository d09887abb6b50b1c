"""coriolis_matrix: against Pinocchio's computeCoriolisMatrix (robots of example-robot-data with an
SRDF, random trees of every joint type; a custom joint against the built-in joint it mimics), and its identities: C v = nonlinear_effects - gravity,
dH/dt - 2 C skew-symmetric (dH/dt by central differences along v), batches, armature."""

import warnings

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import pinocchio as ip
from conftest import random_trees, rel_err, rounding_bound
from custom_joints import custom_universal, with_joints
import erd

TOL = 1e-9
ROBOTS = ["talos_reduced", "solo12", "anymal_c", "ur5", "panda"]


def pin_coriolis(model, pm, q, v):
    pd = pm.createData()
    Cp = np.array(pin.computeCoriolisMatrix(pm, pd, ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v)))
    return ip.tau_from_pinocchio(model, ip.v_from_pinocchio(model, Cp).T).T     # rows tau, columns v


def models():
    out = []
    for name in ROBOTS:
        for fb in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append((f"{name}-{'floating' if fb else 'fixed'}", erd.load_pair(name, fb)[0]))
    out += [(f"tree{k}", m) for k, m in enumerate(random_trees())]
    constant = [t for t in sd.JOINT_TYPES if t not in ("universal", "composite") and sd.make_joint(t).constant_subspace]
    out += [("constant-S", sd.random_tree(12, branching=1.5, joint_types=constant, seed=5))]
    return out


def pinocchio_is_exact(model):
    """Pinocchio (4.1) builds its Coriolis matrix without the rate of change of a joint's S(q) (its
    C v misses the bias of SphericalZYX, Universal and composite joints): it is an oracle for the
    joints with a constant S only; the others are checked by the identities."""
    return all(j.constant_subspace for j in model.joints)


MODELS = models()


def test_the_pinocchio_oracle_covers_every_constant_joint_type():
    covered = {j.type for _, m in MODELS if pinocchio_is_exact(m) for j in m.joints}
    assert covered == {t for t in sd.JOINT_TYPES if t not in ("universal", "composite")
                       and sd.make_joint(t).constant_subspace}


@pytest.mark.parametrize("name, model", MODELS, ids=[n for n, _ in MODELS])
def test_coriolis_matrix_matches_pinocchio(name, model):
    pm = ip.to_pinocchio(model)
    rng = np.random.default_rng(0)
    for _ in range(2):
        q = model.random_configuration(rng)
        v = 3 * rng.normal(size=model.nv)
        C = sd.coriolis_matrix(model, q, v)
        if pinocchio_is_exact(model):
            assert rel_err(C, pin_coriolis(model, pm, q, v)) < TOL
        # C v is the velocity part of the bias force
        ref = sd.nonlinear_effects(model, q, v) - sd.generalized_gravity(model, q)
        assert rel_err(C @ v, ref) <= rounding_bound(model.nv + model.nbodies, c=64) * max(1.0, np.abs(v).max())


@pytest.mark.parametrize("model", random_trees()[1:3] + [sd.humanoid(), with_joints(random_trees()[2], custom_universal())],
                         ids=["binary", "floating", "humanoid", "custom"])
def test_dH_dt_minus_2C_is_skew_symmetric(model):
    """dH/dt = (H(q (+) h v) - H(q (+) -h v)) / (2h) + O(h^2): with h = 1e-4 the truncation error
    (h^2/6 |d3H/dt3| ~ 1e-9 |H| for these models' unit-size states) and the rounding error
    (eps |H| / h ~ 1e-12 |H|) stay far below 1e-6 |H|, while a wrong C is off by order |H| |v|."""
    rng = np.random.default_rng(1)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    h = 1e-4
    Hp, Hm = sd.crba(model, sd.integrate(model, q, h * v)), sd.crba(model, sd.integrate(model, q, -h * v))
    dH = (Hp - Hm) / (2 * h)
    C = sd.coriolis_matrix(model, q, v)
    N = dH - 2 * C
    scale = np.abs(sd.crba(model, q)).max() * max(1.0, np.abs(v).max())
    assert np.abs(N + N.T).max() < 1e-6 * scale
    assert np.abs(N).max() > 1e-3 * scale            # the test is not vacuous: N itself is far from 0
    # and dH/dt = C + C^T
    assert np.abs(dH - C - C.T).max() < 1e-6 * scale


def test_batches_and_armature():
    model = random_trees()[2].with_armature(0.3)
    rng = np.random.default_rng(2)
    q = np.stack([model.random_configuration(rng) for _ in range(6)]).reshape(2, 3, -1)
    v = rng.normal(size=(2, 3, model.nv))
    C = sd.coriolis_matrix(model, q, v)
    assert C.shape == (2, 3, model.nv, model.nv)
    plain = random_trees()[2]
    for i in range(2):
        for j in range(3):
            # armature adds nothing; a batch differs from single calls only by rounding (NumPy's @ order)
            assert rel_err(C[i, j], sd.coriolis_matrix(plain, q[i, j], v[i, j])) <= rounding_bound(model.nv + model.nbodies)
    assert sd.coriolis_matrix(model, q[0, 0], v[:, 0]).shape == (2, model.nv, model.nv)     # broadcast
    with pytest.raises(ValueError, match="v: expected shape"):
        sd.coriolis_matrix(model, q[0, 0], v[0, 0, :-1])
    with pytest.raises(ValueError, match="quaternion"):
        sd.coriolis_matrix(model, np.zeros(model.nq), v[0, 0])


def test_derivative_with_respect_to_v():
    """C is linear in v: its derivative (traced and differentiated) is C at unit velocities."""
    model = random_trees()[0]
    rng = np.random.default_rng(4)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    dC = sd.derivatives(sd.coriolis_matrix, wrt="v")(model, q, v)
    dC = dC[0] if isinstance(dC, tuple) else dC
    assert dC.shape == (model.nv, model.nv, model.nv)
    ref = np.stack([sd.coriolis_matrix(model, q, e) for e in np.eye(model.nv)], -1)
    assert rel_err(dC, ref) <= rounding_bound(model.nv + model.nbodies, c=64)
