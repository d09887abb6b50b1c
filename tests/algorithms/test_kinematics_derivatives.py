"""Analytical derivatives of frame velocities, accelerations and Jacobians: against central
differences and forward/reverse mode on the traced primal (random trees of every joint type, every
reference) and Pinocchio (example-robot-data robots, fixed and floating base)."""

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

import erd
import sparsedyn as sd
from conftest import rel_err
from sparsedyn import spatial as sp
from sparsedyn.interop import pinocchio as ip
from test_derivatives import FD_TOL, H_FD, TREES, assert_clear_errors, assert_runs_on_numpy, state, tangent_fd, vector_fd

AD_TOL = 1e-11
REFS = ("local", "world", "local_world_aligned")


def with_frames(model, seed=0):
    """``model`` with a frame at a random pose on its last body (``tool``), one on the body half way
    down the list (``mid``) and one fixed to the world (``ground``): a frame's offset from its body
    enters every reference but ``world``."""
    rng = np.random.default_rng(seed)

    def pose():
        u = rng.normal(size=4)
        return sp.from_pose(sp.quat_to_rot(u / np.linalg.norm(u)), rng.normal(size=3))
    extra = (sd.Frame("tool", model.nbodies - 1, pose()), sd.Frame("mid", model.nbodies // 2, pose()),
             sd.Frame("ground", -1, pose()))
    return dataclasses.replace(model, frames=model.frames + extra)


TREE_FRAMES = ("tool", "mid")


@pytest.fixture(scope="module", params=sorted(TREES))
def tree(request):
    return with_frames(sd.random_tree(**TREES[request.param]))


def frames_of(model):
    """The deepest body's frame and a frame half way down the list (different branches)."""
    return model.body_names[-1], model.frame_names[len(model.frame_names) // 2]


@pytest.mark.parametrize("ref", REFS)
def test_frame_velocity_derivatives(tree, ref):
    q, v, _, _ = state(tree, 1)
    for frame in TREE_FRAMES:
        dq, dv = sd.frame_velocity_derivatives(tree, q, v, frame, ref)
        assert rel_err(dq, tangent_fd(tree, lambda q_: sd.frame_velocity(tree, q_, v, frame, ref), q)) < FD_TOL
        ad_q, ad_v = sd.derivatives(sd.frame_velocity, wrt=("q", "v"))(tree, q, v, frame, reference=ref)
        assert rel_err(dq, ad_q) < AD_TOL and rel_err(dv, ad_v) < AD_TOL
        assert rel_err(dv, sd.frame_jacobian(tree, q, frame, ref)) < 1e-13


@pytest.mark.parametrize("ref", REFS)
def test_frame_acceleration_derivatives(tree, ref):
    q, v, a, _ = state(tree, 2)
    for frame in TREE_FRAMES:
        dq, dv, da = sd.frame_acceleration_derivatives(tree, q, v, a, frame, ref)
        acc = lambda q_, v_: sd.frame_acceleration(tree, q_, v_, a, frame, ref)
        assert rel_err(dq, tangent_fd(tree, lambda q_: acc(q_, v), q)) < FD_TOL
        assert rel_err(dv, vector_fd(lambda v_: acc(q, v_), v)) < FD_TOL
        ad = sd.derivatives(sd.frame_acceleration, wrt=("q", "v", "a"))(tree, q, v, a, frame, reference=ref)
        for x, y in zip((dq, dv, da), ad):
            assert rel_err(x, y) < AD_TOL
        assert rel_err(da, sd.frame_jacobian(tree, q, frame, ref)) < 1e-13


@pytest.mark.parametrize("ref", REFS)
def test_frame_jacobian_time_variation(tree, ref):
    q, v, _, _ = state(tree, 3)
    for frame in TREE_FRAMES:
        dJ = sd.frame_jacobian_time_variation(tree, q, v, frame, ref)
        J = lambda s: sd.frame_jacobian(tree, sd.integrate(tree, q, s * v), frame, ref)
        assert rel_err(dJ, (J(H_FD) - J(-H_FD)) / (2 * H_FD)) < FD_TOL
        # AD of the primal: dJ/dt = sum_k dJ/dq_k v_k (the tangent direction v is the motion)
        assert rel_err(dJ, sd.derivatives(sd.frame_jacobian, wrt="q")(tree, q, frame, reference=ref) @ v) < AD_TOL
        assert rel_err(dJ @ v, sd.frame_jacobian_dot_v(tree, q, v, frame, ref)) < 1e-12


def test_a_frame_fixed_to_the_world_does_not_move(tree):
    """Its velocity, acceleration and Jacobian are zero at every state: so are their derivatives
    (one state and a batch; the primal functions agree)."""
    q, v, a, _ = state(tree, 4)
    for ref in REFS:
        assert not np.any(sd.frame_velocity(tree, q, v, "ground", ref))
        for out, n in ((sd.frame_velocity_derivatives(tree, q, v, "ground", ref), 2),
                       (sd.frame_acceleration_derivatives(tree, q, v, a, "ground", ref), 3),
                       ((sd.frame_jacobian_time_variation(tree, np.stack([q, q]), v, "ground", ref),), 1)):
            assert len(out) == n and all(x.shape[-2:] == (6, tree.nv) and not np.any(x) for x in out)


def test_batched_and_traced():
    from sparsedyn.symbolic.trace import trace_kernel
    model = sd.random_tree(6, branching=1.5, joint_types="all", seed=21, floating_base=True)
    rng = np.random.default_rng(0)
    q = np.stack([model.random_configuration(rng) for _ in range(4)])
    v, a = rng.normal(size=(4, model.nv)), rng.normal(size=(model.nv,))
    frame = model.body_names[-1]
    for ref in REFS:
        calls = ((sd.frame_velocity_derivatives, (q, v)), (sd.frame_acceleration_derivatives, (q, v, a)),
                 (sd.frame_jacobian_time_variation, (q, v)))
        for fn, args in calls:
            out = fn(model, *args, frame, ref)
            out = out if isinstance(out, tuple) else (out,)
            P = trace_kernel(fn.__kernel__, model, {"frame": frame, "reference": ref})
            for i in range(4):
                one = [x[i] if x.ndim == 2 else x for x in args]
                for b, t in zip(out, P.evaluate(one)):
                    assert b.shape == (4, 6, model.nv) and rel_err(b[i], t) < 1e-13


KERNELS = ("frame_velocity_derivatives", "frame_acceleration_derivatives", "frame_jacobian_time_variation")


@pytest.mark.parametrize("name", KERNELS)
def test_bad_arguments_and_the_numpy_path(name, monkeypatch):
    """Clear errors naming the argument (shapes, values, quaternions, frame names, reference values);
    the uncompiled path runs the analytic algorithm in NumPy, no traced program."""
    model = with_frames(sd.random_tree(4, joint_types=("revolute", "spherical"), seed=5, floating_base=True))
    q, v, a, _ = state(model, 5)
    args = dict(zip(("q", "v", "a"), (q, v, a)[:len(getattr(sd, name).__kernel__.inputs)]))
    assert_clear_errors(getattr(sd, name), model, args, {"frame": "tool", "reference": "local_world_aligned"})
    assert_runs_on_numpy(getattr(sd, name), model, args, {"frame": "tool", "reference": "world"}, monkeypatch)


CASES = [(name, fb) for name in erd.ROBOTS for fb in (False, True)]


@pytest.mark.parametrize("name,floating_base", CASES, ids=[f"{n}-{'floating' if fb else 'fixed'}" for n, fb in CASES])
def test_agree_with_pinocchio(name, floating_base):
    model, pm = erd.load_pair(name, floating_base)
    pd = pm.createData()
    pin_frame = erd.pin_frames(pm)
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp, vp, ap = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
    pin.computeForwardKinematicsDerivatives(pm, pd, qp, vp, ap)
    pin.computeJointJacobiansTimeVariation(pm, pd, qp, vp)
    to_pin = lambda J: ip.jacobian_to_pinocchio(model, J)
    frames = [f for f in frames_of(model) if f in pin_frame]
    assert frames, "no frame of ours is a Pinocchio frame"
    for frame in frames:
        k = pin_frame[frame]
        dq, dv = sd.frame_velocity_derivatives(model, q, v, frame, "local")
        pdq, pdv = pin.getFrameVelocityDerivatives(pm, pd, k, pin.LOCAL)
        assert rel_err(to_pin(dq), pdq) < 1e-9 and rel_err(to_pin(dv), pdv) < 1e-9
        dq, dv, da = sd.frame_acceleration_derivatives(model, q, v, a, frame, "local")
        _, padq, padv, pada = pin.getFrameAccelerationDerivatives(pm, pd, k, pin.LOCAL)
        for x, y in zip((dq, dv, da), (padq, padv, pada)):
            assert rel_err(to_pin(x), y) < 1e-9
        for ref in REFS:
            dJ = sd.frame_jacobian_time_variation(model, q, v, frame, ref)
            assert rel_err(to_pin(dJ), pin.getFrameJacobianTimeVariation(pm, pd, k, erd.PIN_REFS[ref])) < 1e-9
