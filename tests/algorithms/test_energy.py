"""Energies on random trees: T = v^T H v / 2, U by hand, and the power balance dE/dt = v . tau."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.model.spatial import inertia_components
from conftest import random_state, rel_err


def test_kinetic_and_potential_by_hand(tree, rng):
    q, v, _ = random_state(tree, rng)
    assert sd.kinetic_energy(tree, q, v) == pytest.approx(0.5 * v @ sd.crba(tree, q) @ v, rel=1e-12)
    R, p = sd.forward_kinematics(tree, q)
    m, c, _ = inertia_components(tree.inertia)
    U = -np.sum(m * ((p + np.einsum("bij,bj->bi", R, c)) @ tree.gravity))
    assert sd.potential_energy(tree, q) == pytest.approx(U, rel=1e-12, abs=1e-12)
    g = np.array([1.0, -2.0, 3.0])
    assert sd.potential_energy(tree, q, gravity=g) == pytest.approx(
        -np.sum(m * ((p + np.einsum("bij,bj->bi", R, c)) @ g)), rel=1e-12, abs=1e-12)
    assert sd.mechanical_energy(tree, q, v, gravity=g) == pytest.approx(
        sd.kinetic_energy(tree, q, v) + sd.potential_energy(tree, q, gravity=g), rel=1e-14)


def test_power_balance(tree, rng):
    """d/dt (T + U) = v . tau with tau = rnea(q, v, a) (gravity included), by central differences."""
    q, v, a = random_state(tree, rng)
    tau = sd.rnea(tree, q, v, a)
    h = 1e-4
    Ep = sd.mechanical_energy(tree, sd.integrate(tree, q, h * v + 0.5 * h * h * a), v + h * a)
    Em = sd.mechanical_energy(tree, sd.integrate(tree, q, -h * v + 0.5 * h * h * a), v - h * a)
    # truncation ~ h^2 |E'''| (1e-8 relative here), rounding ~ 1e-16 |E| / h
    scale = max(1.0, abs(v @ tau), float(np.abs(tau).max()) * float(np.abs(v).max()))
    assert abs((Ep - Em) / (2 * h) - v @ tau) < 1e-6 * scale


def test_batched_equals_single_and_object_arrays(tree, rng):
    q, v, _ = random_state(tree, rng, (4,))
    E = sd.mechanical_energy(tree, q, v)
    T, U = sd.kinetic_energy(tree, q, v), sd.potential_energy(tree, q)
    assert E.shape == (4,)
    for k in range(4):
        assert E[k] == pytest.approx(float(sd.mechanical_energy(tree, q[k], v[k])), rel=1e-15)
        assert T[k] + U[k] == pytest.approx(E[k], rel=1e-13, abs=1e-13)
    o = lambda x: np.asarray(x[0], dtype=object)  # noqa: E731
    assert float(sd.mechanical_energy(tree, o(q), o(v))) == pytest.approx(E[0], rel=1e-12, abs=1e-12)
    assert float(sd.kinetic_energy(tree, o(q), o(v))) == pytest.approx(T[0], rel=1e-12)


def test_kinetic_energy_holds_the_rotors_armature_as_pinocchio():
    """T = 1/2 v^T (H + diag(armature)) v: the rotors' kinetic energy, as Pinocchio's computeKineticEnergy
    (which holds model.armature); and by hand, T with armature minus T without = 1/2 sum armature v^2."""
    import pinocchio as pin
    from sparsedyn.interop.pinocchio import q_to_pinocchio, to_pinocchio, v_to_pinocchio
    rng = np.random.default_rng(7)
    bare = sd.load_model("solo12", floating_base=True)
    armature = rng.uniform(0.01, 0.1, bare.nv)
    armature[:6] = 0.0                            # no rotor on the free joint
    model = bare.with_armature(armature)
    q = sd.integrate(model, model.neutral(), 0.3 * rng.standard_normal(model.nv))
    v = rng.standard_normal(model.nv)
    T = float(sd.kinetic_energy(model, q, v))
    assert T - float(sd.kinetic_energy(bare, q, v)) == pytest.approx(0.5 * armature @ v ** 2, rel=1e-12)
    assert T == pytest.approx(0.5 * v @ sd.crba(model, q) @ v, rel=1e-12)
    pm = to_pinocchio(model)
    assert np.array_equal(pm.armature, v_to_pinocchio(model, armature))
    T_pin = pin.computeKineticEnergy(pm, pm.createData(), q_to_pinocchio(model, q), v_to_pinocchio(model, v))
    assert T == pytest.approx(T_pin, rel=1e-12)
    E = float(sd.mechanical_energy(model, [*q], [*v]))       # plain lists, the default road
    assert E == pytest.approx(T + float(sd.potential_energy(model, q)), rel=1e-13, abs=1e-13)


def test_the_native_energies_of_a_model_with_rotors_build_and_equal_numpys():
    """The default (native) road of a model with armature: the compiled kinetic and mechanical energies
    build (no fallback warning) and equal the NumPy road's to the rounding of a sum of nv + 6 nb terms."""
    import warnings
    from conftest import rounding_bound
    rng = np.random.default_rng(11)
    bare = sd.load_model("solo12", floating_base=True)
    armature = np.r_[np.zeros(6), rng.uniform(0.01, 0.1, bare.nv - 6)]
    model = bare.with_armature(armature)
    q = sd.integrate(model, model.neutral(), 0.3 * rng.standard_normal(model.nv))
    v = rng.standard_normal(model.nv)
    T, E = float(sd.kinetic_energy(model, q, v)), float(sd.mechanical_energy(model, q, v))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with sd.use_backend("native", deterministic=True):
            Tn, En = float(sd.kinetic_energy(model, [*q], [*v])), float(sd.mechanical_energy(model, q, v))
    bound = rounding_bound(model.nv + 6 * model.nbodies)
    assert abs(Tn - T) <= bound * T
    assert abs(En - E) <= bound * (T + abs(E - T))
