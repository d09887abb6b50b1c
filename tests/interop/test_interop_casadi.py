"""Kernels as CasADi functions (from the traced program) and the Opti swing-up example."""

import importlib.util
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sparsedyn.interop.casadi import function
from sparsedyn.kernels import REGISTRY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "casadi_swing_up.py"


@pytest.fixture(scope="module")
def floating():
    return sd.random_tree(5, branching=1.5, joint_types="all", seed=31, floating_base=True)


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    return (model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv),
            rng.normal(size=(model.nbodies, 6)))


def test_kernels_and_derivatives_on_a_floating_base(floating):
    m = floating
    q, v, a, f = state(m)
    F = function(sd.rnea, m, optional=("f_ext",))
    assert F.name_in() == ["q", "v", "a", "f_ext"] and F.name_out() == ["tau"]
    assert rel_err(np.asarray(F(q, v, a, f)).ravel(), sd.rnea(m, q, v, a, f)) < 1e-12
    D = function(sd.rnea_derivatives, m)
    for got, want in zip(D(q, v, a), sd.rnea_derivatives(m, q, v, a)):
        assert rel_err(np.asarray(got), want) < 1e-12
    R, p = function(sd.frame_placement, m, static={"frame": m.body_names[-1]})(q)
    Rw, pw = sd.frame_placement(m, q, m.body_names[-1])
    assert rel_err(np.asarray(R), Rw) < 1e-12 and rel_err(np.asarray(p).ravel(), pw) < 1e-12


def test_casadi_differentiation_equals_our_derivative_kernels():
    """CasADi's own AD of the bridged ABA equals aba_derivatives (vector-space joints: q and its
    tangent coincide, so CasADi's d/dq is ours)."""
    m = sd.random_tree(5, branching=2.0, joint_types=("revolute", "prismatic", "helical", "cylindrical"), seed=4)
    q, v, tau, _ = state(m, 1)
    qs, vs, ts = ca.SX.sym("q", m.nq), ca.SX.sym("v", m.nv), ca.SX.sym("t", m.nv)
    qdd = function(sd.aba, m)(qs, vs, ts)
    J = ca.Function("J", [qs, vs, ts], [ca.jacobian(qdd, qs), ca.jacobian(qdd, vs), ca.jacobian(qdd, ts)])
    for got, want in zip(J(q, v, tau), sd.aba_derivatives(m, q, v, tau)):
        assert rel_err(np.asarray(got), want) < 1e-10


def test_symbols_passed_to_a_kernel_point_to_the_bridge(floating):
    q = ca.SX.sym("q", floating.nq)
    z = np.zeros(floating.nv)
    with pytest.raises(TypeError, match=r"q: .*CasADi SX.*sparsedyn\.interop\.casadi"):
        sd.rnea(floating, q, z, z)
    with pytest.raises(TypeError, match=r"neither a registered kernel \(see sparsedyn.kernels\) nor a Python function"):
        function(len, floating)


def coriolis_and_tip(model, q, v):
    """A plain function of registered kernels, as sd.compile(model, kernels=[f]) takes it."""
    R, p = sd.frame_placement(model, q, model.body_names[-1])
    return sd.nonlinear_effects(model, q, v) - sd.generalized_gravity(model, q), p


def test_a_plain_function_of_kernels(floating):
    q, v, _, _ = state(floating, 2)
    F = function(coriolis_and_tip, floating)
    assert F.name_in() == ["q", "v"] and F.name_out() == ["out0", "out1"]
    c, p = F(q, v)
    want_c, want_p = coriolis_and_tip(floating, q, v)
    assert rel_err(np.asarray(c).ravel(), want_c) < 1e-12 and rel_err(np.asarray(p).ravel(), want_p) < 1e-12
    # Coriolis and centrifugal forces are quadratic in v: c(2 v) = 4 c(v), an identity, not a replay
    assert rel_err(np.asarray(F(q, 2 * v)[0]).ravel(), 4 * want_c) < 1e-12
    with pytest.raises(TypeError, match="argument 'speed' of 'f' is not a state array"):
        function(_bad, floating)
    with pytest.raises(TypeError, match="cannot be traced"):
        function(_branches, floating)


def _bad(model, q, speed):
    return q
_bad.__name__ = "f"


def _branches(model, q):
    return q if q[0] > 0 else -q


def test_swing_up_example():
    spec = importlib.util.spec_from_file_location("casadi_swing_up", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    r = ex.swing_up(N=16, T=2.0)
    assert r["status"] == "Solve_Succeeded"
    q, v, tau, dt, m = r["q"], r["v"], r["tau"], r["dt"], r["model"]
    assert rel_err(q[0], [np.pi / 2, 0]) < 1e-8 and rel_err(q[-1], [-np.pi / 2, 0]) < 1e-8
    assert rel_err(v[-1], [0, 0]) < 1e-8
    assert np.all(np.abs(tau) <= r["tau_max"] + 1e-6)
    # The optimised trajectory obeys sparsedyn's NumPy dynamics: one RK4 step per interval with
    # sd.aba reproduces every next state (to IPOPT's constraint tolerance, 1e-8).
    def xdot(x, u):
        return np.concatenate([x[2:], sd.aba(m, x[:2], x[2:], u)])
    X = np.concatenate([q, v], 1)
    for k in range(len(tau)):
        x, u = X[k], tau[k]
        k1 = xdot(x, u)
        k2 = xdot(x + dt / 2 * k1, u)
        k3 = xdot(x + dt / 2 * k2, u)
        k4 = xdot(x + dt * k3, u)
        assert rel_err(x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), X[k + 1]) < 1e-7


#: The analytical derivative kernels of issue 23 (each is also compiled and tested in
#: tests/compile/test_compile_kernels.py and against Pinocchio in tests/algorithms/).
DERIVATIVE_KERNELS = ("rnea_derivatives", "aba_derivatives", "generalized_gravity_derivatives",
                      "static_torque_derivatives", "frame_velocity_derivatives", "frame_acceleration_derivatives",
                      "frame_jacobian_time_variation", "centroidal_dynamics_derivatives", "integrate_derivatives",
                      "difference_derivatives")


def derivative_kernel_cases(model, name, rng, statics=None, folded=True):
    """``(static, optional, args)`` for kernel ``name``: the first ``statics`` static choices of
    tests/kernel_args.py (all: every reference), with the optional arrays and (``folded``) without;
    ``integrate_derivatives`` also at a velocity of 1e-9 (the small-angle series of the joints'
    Jacobians, picked by a sign)."""
    from kernel_args import arguments, static_choices
    k = REGISTRY[name]
    for static in static_choices(model, name)[:statics]:
        for optional in ([()] if folded or not k.optional else []) + ([tuple(k.optional)] if k.optional else []):
            args = arguments(model, name, rng, optional=bool(optional), static=static)
            yield static, optional, args
            if name == "integrate_derivatives":
                yield static, optional, dict(args, v=1e-9 * args["v"])


def bound(model, args):
    """Rounding of two evaluations of one program in different libraries (conftest.rounding_bound),
    times cond(H) (aba_derivatives solves with H)."""
    q = args.get("q", args.get("q0"))
    return rounding_bound(model.nv + model.nbodies, float(np.max(np.linalg.cond(sd.crba(model, q)))))


@pytest.mark.parametrize("name", DERIVATIVE_KERNELS)
def test_analytical_derivative_kernels(floating, name):
    """Each derivative kernel through the registry as a CasADi function equals the NumPy function,
    for every static choice, with and without its optional arrays (f_ext, gravity)."""
    m = floating
    fn = getattr(sd, name)
    for static, optional, args in derivative_kernel_cases(m, name, np.random.default_rng(3)):
        F = function(fn, m, static=static, optional=optional)
        assert F.name_in() == list(args)
        got, want = F(*args.values()), fn(m, **args, **static)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        assert F.name_out() == list(REGISTRY[name].outputs) and len(got) == len(want)
        for g, w in zip(got, want):
            assert rel_err(np.array(g).reshape(w.shape), w) < bound(m, args), (static, optional)
