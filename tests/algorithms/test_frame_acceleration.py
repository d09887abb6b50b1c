"""Frame accelerations and ``Jdot v`` on random trees: ``J a + Jdot v`` is the frame acceleration, and
``Jdot v`` is the time derivative of ``J v`` (central differences along a motion)."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.algorithms.kinematics import REFERENCES
from conftest import random_state, rel_err


@pytest.mark.parametrize("reference", REFERENCES)
def test_J_a_plus_Jdot_v_is_the_acceleration(tree, rng, reference):
    q, v, a = random_state(tree, rng)
    frames = tree.frame_names[-3:]
    for f in frames:
        J = sd.frame_jacobian(tree, q, f, reference)
        Jdv = sd.frame_jacobian_dot_v(tree, q, v, f, reference)
        # J v is a spatial velocity for local / world, [omega; v_origin] (world axes) otherwise
        acc = sd.frame_classical_acceleration if reference == "local_world_aligned" else sd.frame_acceleration
        assert rel_err(J @ a + Jdv, acc(tree, q, v, a, f, reference)) < 1e-12
        # d/dt (J v) along q(t) = q (+) (t v + t^2 a / 2), v(t) = v + t a: error ~ h^2
        h = 1e-4
        Vp = sd.frame_velocity(tree, sd.integrate(tree, q, h * v + 0.5 * h * h * a), v + h * a, f, reference)
        Vm = sd.frame_velocity(tree, sd.integrate(tree, q, -h * v + 0.5 * h * h * a), v - h * a, f, reference)
        assert rel_err((Vp - Vm) / (2 * h), J @ a + Jdv) < 1e-6


def test_classical_acceleration_of_the_frame_origin(tree, rng):
    """The classical acceleration (local_world_aligned) is the second derivative of the origin's position."""
    q, v, a = random_state(tree, rng)
    f = tree.frame_names[-1]
    h = 1e-3
    p = [sd.frame_placement(tree, sd.integrate(tree, q, t * v + 0.5 * t * t * a), f)[1] for t in (-h, 0.0, h)]
    acc = sd.frame_classical_acceleration(tree, q, v, a, f, "local_world_aligned")
    # error ~ h^2 |p''''| / 12; the path's acceleration differs from a by O(t^2) terms
    assert rel_err((p[2] - 2 * p[1] + p[0]) / h ** 2, acc[3:]) < 1e-4


def test_batched_equals_single_and_object_arrays(tree, rng):
    q, v, a = random_state(tree, rng, (3,))
    f = tree.frame_names[-1]
    for ref in REFERENCES:
        outs = [sd.frame_acceleration(tree, q, v, a, f, ref), sd.frame_classical_acceleration(tree, q, v, a, f, ref),
                sd.frame_jacobian_dot_v(tree, q, v, f, ref)]
        for k in range(3):
            single = [sd.frame_acceleration(tree, q[k], v[k], a[k], f, ref),
                      sd.frame_classical_acceleration(tree, q[k], v[k], a[k], f, ref),
                      sd.frame_jacobian_dot_v(tree, q[k], v[k], f, ref)]
            for x, y in zip(outs, single):
                assert rel_err(x[k], y) < 1e-15
        o = lambda x: np.asarray(x[0], dtype=object)  # noqa: E731
        objs = [sd.frame_acceleration(tree, o(q), o(v), o(a), f, ref),
                sd.frame_classical_acceleration(tree, o(q), o(v), o(a), f, ref),
                sd.frame_jacobian_dot_v(tree, o(q), o(v), f, ref)]
        for x, y in zip(objs, outs):
            assert rel_err(np.asarray(x, float), y[0]) < 1e-12


def test_bad_reference():
    model = sd.random_tree(2, seed=0)
    with pytest.raises(ValueError, match="reference: expected one of"):
        sd.frame_acceleration(model, model.neutral(), np.zeros(2), np.zeros(2), model.frame_names[0], "body")
