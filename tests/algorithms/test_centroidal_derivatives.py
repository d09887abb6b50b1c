"""Analytical derivatives of the centroidal dynamics: against central differences and AD of the
primal (random trees of every joint type, several trees hanging from the world), the centroidal
momentum matrix, and Pinocchio's computeCentroidalDynamicsDerivatives (example-robot-data robots)."""

import numpy as np
import pinocchio as pin
import pytest

import erd
import sparsedyn as sd
from conftest import rel_err
from sparsedyn.interop import pinocchio as ip
from test_derivatives import FD_TOL, TREES, assert_clear_errors, assert_runs_on_numpy, state, tangent_fd, vector_fd

AD_TOL = 1e-11


@pytest.fixture(scope="module", params=sorted(TREES))
def tree(request):
    return sd.random_tree(**TREES[request.param])


def test_equal_differences_ad_and_cmm(tree):
    q, v, a, _ = state(tree, 1)
    dh_dq, dhd_dq, dhd_dv, dhd_da = sd.centroidal_dynamics_derivatives(tree, q, v, a)
    assert rel_err(dh_dq, tangent_fd(tree, lambda q_: sd.centroidal_momentum(tree, q_, v), q)) < FD_TOL
    rate = lambda q_, v_: sd.centroidal_momentum_rate(tree, q_, v_, a)[1]
    assert rel_err(dhd_dq, tangent_fd(tree, lambda q_: rate(q_, v), q)) < FD_TOL
    assert rel_err(dhd_dv, vector_fd(lambda v_: rate(q, v_), v)) < FD_TOL
    assert rel_err(dhd_da, sd.centroidal_momentum_matrix(tree, q)) < 1e-13
    ad = sd.derivatives(sd.centroidal_momentum_rate, wrt=("q", "v"))(tree, q, v, a)
    assert rel_err(dh_dq, ad[0][0]) < AD_TOL
    assert rel_err(dhd_dq, ad[1][0]) < AD_TOL and rel_err(dhd_dv, ad[1][1]) < AD_TOL


def test_several_trees_and_batches():
    """Two trees hanging from the world (each in its own root frame), a batch of states."""
    b = sd.ModelBuilder("two")
    b.add_body("a0", None, sd.make_joint("free"), mass=2.0, com=[0.1, 0, 0], rot_inertia=np.diag([0.1, 0.2, 0.3]))
    b.add_body("a1", "a0", sd.make_joint("revolute", axis=(0, 1, 0)), Xtree=sd.spatial.xlt([0.3, 0, 0]), mass=1.0,
               com=[0, 0, 0.2], rot_inertia=np.diag([0.05, 0.05, 0.02]))
    b.add_body("b0", None, sd.make_joint("spherical"), Xtree=sd.spatial.xlt([0, 1, 0]), mass=1.5, com=[0, 0, 0.3],
               rot_inertia=np.diag([0.1, 0.1, 0.05]))
    b.add_body("b1", "b0", sd.make_joint("prismatic", axis=(0, 0, 1)), mass=0.5, com=[0.1, 0, 0],
               rot_inertia=np.diag([0.01, 0.02, 0.03]))
    model = b.build()
    rng = np.random.default_rng(2)
    q = np.stack([model.random_configuration(rng) for _ in range(3)])
    v, a = rng.normal(size=(2, 3, model.nv))
    out = sd.centroidal_dynamics_derivatives(model, q, v, a)
    for i in range(3):
        fd = tangent_fd(model, lambda q_: sd.centroidal_momentum(model, q_, v[i]), q[i])
        assert rel_err(out[0][i], fd) < FD_TOL
        rate = tangent_fd(model, lambda q_: sd.centroidal_momentum_rate(model, q_, v[i], a[i])[1], q[i])
        assert rel_err(out[1][i], rate) < FD_TOL
        for b_, one in zip(out, sd.centroidal_dynamics_derivatives(model, q[i], v[i], a[i])):
            assert rel_err(b_[i], one) < 1e-13


def test_traced_program_equals_numpy():
    from sparsedyn.symbolic.trace import trace_kernel
    model = sd.random_tree(5, branching=1.5, joint_types="all", seed=6, floating_base=True)
    q, v, a, _ = state(model, 7)
    P = trace_kernel(sd.centroidal_dynamics_derivatives.__kernel__, model)
    for g, w in zip(P.evaluate([q, v, a]), sd.centroidal_dynamics_derivatives(model, q, v, a)):
        assert rel_err(g, w) < 1e-13


CASES = [(name, fb) for name in erd.ROBOTS for fb in (False, True)]


@pytest.mark.parametrize("name,floating_base", CASES, ids=[f"{n}-{'floating' if fb else 'fixed'}" for n, fb in CASES])
def test_agree_with_pinocchio(name, floating_base):
    model, pm = erd.load_pair(name, floating_base)
    pd = pm.createData()
    rng = np.random.default_rng(5)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    ref = pin.computeCentroidalDynamicsDerivatives(pm, pd, ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v),
                                                   ip.v_to_pinocchio(model, a))
    for ours, theirs in zip(sd.centroidal_dynamics_derivatives(model, q, v, a), ref):
        assert rel_err(ip.jacobian_to_pinocchio(model, ours), theirs) < 1e-9


def test_bad_arguments_and_the_numpy_path(monkeypatch):
    """Clear errors naming the argument (shapes, values, quaternions, batches); the uncompiled path
    runs the analytic algorithm in NumPy, no traced program."""
    model = sd.random_tree(4, joint_types=("revolute", "spherical"), seed=5, floating_base=True)
    q, v, a, _ = state(model, 5)
    assert_clear_errors(sd.centroidal_dynamics_derivatives, model, {"q": q, "v": v, "a": a})
    assert_runs_on_numpy(sd.centroidal_dynamics_derivatives, model, {"q": q, "v": v, "a": a}, {}, monkeypatch)


def test_massless_model_is_refused():
    model = sd.ModelBuilder("empty").build()
    z = np.zeros(0)
    with pytest.raises(ValueError, match="no mass"):
        sd.centroidal_dynamics_derivatives(model, z, z, z)


def test_composite_joints_take_the_analytical_derivatives_of_their_chains():
    """dm_control's humanoid (composite joints of hinges): one state and a batch of three, on the native and
    the NumPy roads, the derivatives equal the differentiated program of centroidal_momentum_rate and the
    centroidal momentum matrix."""
    import warnings
    from pathlib import Path
    import dm_control
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml"))
    rng = np.random.default_rng(3)
    Q = np.stack([model.random_configuration(rng) for _ in range(3)])
    V, A = rng.normal(size=(2, 3, model.nv))
    for backend in ("native", "numpy"):
        with sd.use_backend(backend, deterministic=True):
            for q, v, a in ((Q[0], V[0], A[0]), (Q, V, A)):
                dh_dq, dhd_dq, dhd_dv, dhd_da = sd.centroidal_dynamics_derivatives(model, q, v, a)
                ad = sd.derivatives(sd.centroidal_momentum_rate, wrt=("q", "v"))(model, q, v, a)
                assert rel_err(dh_dq, ad[0][0]) < AD_TOL
                assert rel_err(dhd_dq, ad[1][0]) < AD_TOL and rel_err(dhd_dv, ad[1][1]) < AD_TOL
                assert rel_err(dhd_da, sd.centroidal_momentum_matrix(model, q)) < AD_TOL
