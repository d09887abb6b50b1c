"""Derivatives of integrate and difference (sparsedyn.algorithms.configuration): against central
differences on the tangent spaces (random trees of every joint type, large, small and zero
velocities), identities, and Pinocchio's dIntegrate / dDifference (example-robot-data robots)."""

import numpy as np
import pinocchio as pin
import pytest

import erd
import sparsedyn as sd
from conftest import rel_err
from test_derivatives import FD_TOL, H_FD, TREES, assert_clear_errors, assert_runs_on_numpy

ARG0, ARG1 = pin.ArgumentPosition.ARG0, pin.ArgumentPosition.ARG1
# Two evaluations of the same Jacobians in different operation orders (closed forms of the joints'
# exponential and logarithm against the differentiated primal): rounding of a few dozen operations.
AD_TOL = 1e-11


@pytest.fixture(scope="module", params=sorted(TREES))
def tree(request):
    return sd.random_tree(**TREES[request.param])


def tangent_columns(model, f, at):
    """Central differences of ``f(dq)`` (a configuration) measured in the tangent space at ``at``."""
    return np.stack([(sd.difference(model, at, f(H_FD * e)) - sd.difference(model, at, f(-H_FD * e))) / (2 * H_FD)
                     for e in np.eye(model.nv)], -1)


def test_chain_rule_identities(tree):
    """``difference(q, integrate(q, v)) = v`` for every ``q`` and ``v``: its derivative in ``v`` is the
    identity and its derivative in ``q`` (both arguments moving) is zero."""
    rng = np.random.default_rng(4)
    q, v = tree.random_configuration(rng), rng.normal(size=tree.nv)
    dq, dv = sd.integrate_derivatives(tree, q, v)
    d0, d1 = sd.difference_derivatives(tree, q, sd.integrate(tree, q, v))
    assert rel_err(d1 @ dv, np.eye(tree.nv)) < 1e-12
    assert rel_err(d0 + d1 @ dq, np.zeros((tree.nv, tree.nv))) < 1e-12


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e-7, 0.0])
def test_finite_differences(tree, scale):
    rng = np.random.default_rng(1)
    q, v = tree.random_configuration(rng), scale * rng.normal(size=tree.nv)
    dq, dv = sd.integrate_derivatives(tree, q, v)
    at = sd.integrate(tree, q, v)
    assert rel_err(dq, tangent_columns(tree, lambda d: sd.integrate(tree, sd.integrate(tree, q, d), v), at)) < FD_TOL
    assert rel_err(dv, tangent_columns(tree, lambda d: sd.integrate(tree, q, v + d), at)) < FD_TOL
    d0, d1 = sd.difference_derivatives(tree, q, at)
    col = lambda f: np.stack([(f(H_FD * e) - f(-H_FD * e)) / (2 * H_FD) for e in np.eye(tree.nv)], -1)
    assert rel_err(d0, col(lambda d: sd.difference(tree, sd.integrate(tree, q, d), at))) < FD_TOL
    assert rel_err(d1, col(lambda d: sd.difference(tree, q, sd.integrate(tree, at, d)))) < FD_TOL


# AD of the primal.  sd.derivatives differentiates in ``q`` on the tangent space; the other
# configuration arguments are constants of these user kernels, and an output that is a configuration
# is measured by ``difference`` from the point where the derivative is taken (the tangent space
# there: d difference(c, x)/dx at x = c is the identity).
def _integrate_seen_from(model, q, v, q1):
    return sd.difference(model, q1, sd.integrate(model, q, v))


def _difference_from(model, q, q1):
    return sd.difference(model, q, q1)


def _difference_to(model, q, q0):
    return sd.difference(model, q0, q)


def test_equal_ad_of_the_primal(tree):
    rng = np.random.default_rng(3)
    q, q1, v = tree.random_configuration(rng), tree.random_configuration(rng), rng.normal(size=tree.nv)
    decl = dict(outputs={"dq": ("nv",)})
    at = sd.integrate(tree, q, v)
    dq, dv = sd.derivatives(_integrate_seen_from, wrt=("q", "v"),
                            inputs={"q": ("nq",), "v": ("nv",), "q1": ("nq",)}, **decl)(tree, q, v, at)
    want = sd.integrate_derivatives(tree, q, v)
    assert rel_err(want[0], dq) < AD_TOL and rel_err(want[1], dv) < AD_TOL
    d0, d1 = sd.difference_derivatives(tree, q, q1)
    assert rel_err(d0, sd.derivatives(_difference_from, wrt="q", inputs={"q": ("nq",), "q1": ("nq",)}, **decl)(
        tree, q, q1)) < AD_TOL
    assert rel_err(d1, sd.derivatives(_difference_to, wrt="q", inputs={"q": ("nq",), "q0": ("nq",)}, **decl)(
        tree, q1, q)) < AD_TOL


@pytest.mark.parametrize("name", ["integrate_derivatives", "difference_derivatives"])
def test_bad_arguments_and_the_numpy_path(name, monkeypatch):
    """Clear errors naming the argument (shapes, values, quaternions, batches); the uncompiled path
    runs the joints' Jacobians in NumPy, no traced program."""
    model = sd.random_tree(4, joint_types=("revolute", "spherical", "planar"), seed=5, floating_base=True)
    rng = np.random.default_rng(5)
    q0, q1, v = model.random_configuration(rng), model.random_configuration(rng), rng.normal(size=model.nv)
    args = {"q": q0, "v": v} if name == "integrate_derivatives" else {"q0": q0, "q1": q1}
    assert_clear_errors(getattr(sd, name), model, args)
    assert_runs_on_numpy(getattr(sd, name), model, args, {}, monkeypatch)


def test_batched_and_traced():
    from sparsedyn.symbolic.trace import trace_kernel
    model = sd.random_tree(6, branching=1.5, joint_types="all", seed=21, floating_base=True)
    rng = np.random.default_rng(0)
    q0 = np.stack([model.random_configuration(rng) for _ in range(4)])
    q1 = np.stack([model.random_configuration(rng) for _ in range(4)])
    v = rng.normal(size=(4, model.nv)) * np.array([1.0, 1e-3, 1e-9, 0.0])[:, None]
    for fn, a, b in ((sd.integrate_derivatives, q0, v), (sd.difference_derivatives, q0, q1)):
        out = fn(model, a, b)
        P = trace_kernel(fn.__kernel__, model)
        for i in range(4):
            for x, t in zip(out, P.evaluate([a[i], b[i]])):
                assert x.shape == (4, model.nv, model.nv) and rel_err(x[i], t) < 1e-13


CASES = [(name, fb) for name in erd.ROBOTS for fb in (False, True)]


def check_against_pinocchio(model, pm, rng):
    from sparsedyn.interop import pinocchio as ip
    q0, q1 = model.random_configuration(rng), model.random_configuration(rng)
    v = 2 * rng.normal(size=model.nv)
    p0, p1, pv = ip.q_to_pinocchio(model, q0), ip.q_to_pinocchio(model, q1), ip.v_to_pinocchio(model, v)
    conv = lambda J: ip.derivative_to_pinocchio(model, J)
    dq, dv = sd.integrate_derivatives(model, q0, v)
    assert rel_err(conv(dq), pin.dIntegrate(pm, p0, pv, ARG0)) < 1e-9
    assert rel_err(conv(dv), pin.dIntegrate(pm, p0, pv, ARG1)) < 1e-9
    d0, d1 = sd.difference_derivatives(model, q0, q1)
    assert rel_err(conv(d0), pin.dDifference(pm, p0, p1, ARG0)) < 1e-9
    assert rel_err(conv(d1), pin.dDifference(pm, p0, p1, ARG1)) < 1e-9


@pytest.mark.parametrize("name,floating_base", CASES, ids=[f"{n}-{'floating' if fb else 'fixed'}" for n, fb in CASES])
def test_agree_with_pinocchio(name, floating_base):
    model, pm = erd.load_pair(name, floating_base)
    check_against_pinocchio(model, pm, np.random.default_rng(6))


def test_planar_and_spherical_agree_with_pinocchio():
    """The group joints example-robot-data lacks (planar: SE(2), spherical: SO(3)), through a model
    converted to Pinocchio."""
    from sparsedyn.interop import pinocchio as ip
    model = sd.random_tree(6, joint_types=("planar", "spherical", "revolute"), seed=9, floating_base=True)
    assert {j.type for j in model.joints} >= {"planar", "spherical", "free"}
    check_against_pinocchio(model, ip.to_pinocchio(model), np.random.default_rng(7))
