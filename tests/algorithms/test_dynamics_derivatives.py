"""Analytical derivatives of RNEA, ABA, gravity and static torques: against reverse/forward mode on
the traced primal (sd.derivatives), central differences on the tangent space (random trees of every
joint type) and Pinocchio's analytical derivatives on the example-robot-data robots."""

import time

import numpy as np
import pinocchio as pin
import pytest

import erd
import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sparsedyn.interop import pinocchio as ip
from test_derivatives import FD_TOL, TREES, assert_clear_errors, assert_runs_on_numpy, state, tangent_fd, vector_fd

# Two evaluations of the same derivatives in different operation orders (the analytic recursion and
# the differentiated primal program) differ by rounding: a few hundred operations on O(1) numbers.
AD_TOL = 1e-11


@pytest.fixture(scope="module", params=sorted(TREES))
def tree(request):
    """Seeded random trees with every joint type, with armature on every other dof."""
    m = sd.random_tree(**TREES[request.param])
    return m.with_armature(np.where(np.arange(m.nv) % 2 == 0, 0.3, 0.0))


def test_rnea_derivatives_equal_ad_and_finite_differences(tree):
    q, v, a, f = state(tree, 1)
    g = np.array([0.3, -1.0, -9.0])
    for fext, grav in ((None, None), (f, None), (f, g)):
        got = sd.rnea_derivatives(tree, q, v, a, fext, grav)
        ad = sd.derivatives(sd.rnea)(tree, q, v, a, fext, grav)
        for x, y in zip(got, ad):
            assert rel_err(x, y) < AD_TOL
        r = lambda q_, v_, a_: sd.rnea(tree, q_, v_, a_, fext, grav)
        assert rel_err(got[0], tangent_fd(tree, r, q, v, a)) < FD_TOL
        assert rel_err(got[1], vector_fd(lambda v_: r(q, v_, a), v)) < FD_TOL
        assert rel_err(got[2], sd.crba(tree, q)) < 1e-12          # dtau/da = H, armature included


def test_aba_derivatives_equal_ad_and_finite_differences(tree):
    q, v, tau, f = state(tree, 2)
    g = np.array([0.3, -1.0, -9.0])
    for fext, grav in ((None, None), (f, g)):
        dq, dv, dtau = sd.aba_derivatives(tree, q, v, tau, fext, grav)
        ad_q, ad_v, ad_tau = sd.derivatives(sd.aba)(tree, q, v, tau, fext, grav)
        assert rel_err(dq, ad_q) < AD_TOL and rel_err(dv, ad_v) < AD_TOL and rel_err(dtau, ad_tau) < AD_TOL
        fd = lambda q_, v_, t_: sd.aba(tree, q_, v_, t_, fext, grav)
        assert rel_err(dq, tangent_fd(tree, fd, q, v, tau)) < FD_TOL
        assert rel_err(dv, vector_fd(lambda v_: fd(q, v_, tau), v)) < FD_TOL
        assert rel_err(dtau, sd.minv(tree, q)) < 1e-10


def test_aba_derivatives_of_a_free_root_without_armature():
    """The free root's columns come from ``H^-1 H[:, root] = E`` (no solve), with and without
    armature on its dofs: against AD of ABA, on the NumPy path and in the traced program."""
    bare = sd.random_tree(**TREES["floating"])
    for model in (bare, bare.with_armature(np.where(np.arange(bare.nv) < 6, 0.2, 0.0))):
        assert_aba_derivatives_equal_ad(model, 4)


def assert_aba_derivatives_equal_ad(model, seed):
    """The NumPy path and the traced program of ``aba_derivatives`` equal AD of ABA (with ``f_ext``)."""
    from sparsedyn.kernels import REGISTRY
    from sparsedyn.symbolic.trace import trace_kernel
    q, v, tau, f = state(model, seed)
    ad = sd.derivatives(sd.aba)(model, q, v, tau, f)
    with sd.use_backend("numpy"):
        got = sd.aba_derivatives(model, q, v, tau, f)
    traced = trace_kernel(REGISTRY["aba_derivatives"], model, optional=("f_ext",)).evaluate([q, v, tau, f])
    for x, y, z in zip(got, traced, ad):
        assert rel_err(x, z) < AD_TOL and rel_err(y, z) < AD_TOL


def test_aba_derivatives_of_a_forest():
    """Three trees in one model: a free root with a revolute and a spherical child, a revolute root, a
    free root with armature and a prismatic child (each free root's columns touch its own tree only)."""
    from sparsedyn.model.builders import ModelBuilder
    from sparsedyn.model.joints import make_joint
    rng = np.random.default_rng(0)

    def body(name, parent, joint, **kw):
        A = rng.normal(size=(3, 3))
        b.add_body(name, parent, joint, mass=rng.uniform(1, 2), com=0.1 * rng.normal(size=3),
                   rot_inertia=0.1 * A @ A.T + 0.05 * np.eye(3), **kw)

    b = ModelBuilder("forest")
    body("a0", None, make_joint("free"))
    body("a1", "a0", make_joint("revolute", axis=(0, 1, 0)), Xtree=(np.eye(3), [0.2, 0, 0]))
    body("a2", "a0", make_joint("spherical"), Xtree=(np.eye(3), [0, 0.2, 0]))
    body("c0", None, make_joint("revolute"))
    body("b0", None, make_joint("free"), armature=0.1)
    body("b1", "b0", make_joint("prismatic", axis=(1, 0, 0)))
    assert_aba_derivatives_equal_ad(b.build(), 5)


def test_gravity_and_static_torque_derivatives(tree):
    q, _, _, f = state(tree, 3)
    g = np.array([1.0, 2.0, -9.0])
    dg = sd.generalized_gravity_derivatives(tree, q)
    assert rel_err(dg, sd.derivatives(sd.generalized_gravity, wrt="q")(tree, q)) < AD_TOL
    assert rel_err(dg, tangent_fd(tree, lambda q_: sd.generalized_gravity(tree, q_), q)) < FD_TOL
    dg_g = sd.generalized_gravity_derivatives(tree, q, g)
    assert rel_err(dg_g, sd.derivatives(sd.generalized_gravity, wrt="q")(tree, q, g)) < AD_TOL
    assert rel_err(dg_g, tangent_fd(tree, lambda q_: sd.generalized_gravity(tree, q_, g), q)) < FD_TOL
    z = np.zeros(tree.nv)
    ds = sd.static_torque_derivatives(tree, q, f)
    assert rel_err(ds, sd.derivatives(sd.rnea, wrt="q")(tree, q, z, z, f)) < AD_TOL     # AD of the primal
    assert rel_err(ds, tangent_fd(tree, lambda q_: sd.rnea(tree, q_, z, z, f), q)) < FD_TOL
    ds_g = sd.static_torque_derivatives(tree, q, f, g)
    assert rel_err(ds_g, sd.derivatives(sd.rnea, wrt="q")(tree, q, z, z, f, g)) < AD_TOL
    assert rel_err(ds_g, tangent_fd(tree, lambda q_: sd.rnea(tree, q_, z, z, f, g), q)) < FD_TOL


@pytest.mark.parametrize("nb, seed", [(6, 21), (10, 3)])   # seed 3: joint groups of non-consecutive bodies
def test_batched_states_equal_single_states(nb, seed):
    model = sd.random_tree(nb, branching=1.5, joint_types="all", seed=seed, floating_base=True)
    rng = np.random.default_rng(0)
    q = np.stack([model.random_configuration(rng) for _ in range(6)]).reshape(2, 3, model.nq)
    v, a = rng.normal(size=(2, 3, model.nv)), rng.normal(size=(model.nv,))
    f = rng.normal(size=(3, model.nbodies, 6))
    one = lambda i, j: {"q": q[i, j], "v": v[i, j], "a": a, "f": f[j]}
    calls = ((sd.rnea_derivatives, "qvaf"), (sd.aba_derivatives, "qvaf"), (sd.generalized_gravity_derivatives, "q"),
             (sd.static_torque_derivatives, "qf"))
    for fn, names in calls:
        out = fn(model, *({"q": q, "v": v, "a": a, "f": f}[n] for n in names))
        out = out if isinstance(out, tuple) else (out,)
        assert all(o.shape == (2, 3, model.nv, model.nv) for o in out)
        for i in range(2):
            for j in range(3):
                single = fn(model, *(one(i, j)[n] for n in names))
                for b, o in zip(out, single if isinstance(single, tuple) else (single,)):
                    assert rel_err(b[i, j], o) < 1e-13


def test_branch_induced_zeros_are_structural():
    """Dofs on different branches do not interact: exact zeros, not rounding."""
    model = sd.humanoid()
    q, v, a, f = state(model, 5)
    l, r = model.v_slice(model.joint("l_knee")), model.v_slice(model.joint("r_knee"))
    for J in sd.rnea_derivatives(model, q, v, a, f):
        assert np.all(J[l, r] == 0.0) and np.all(J[r, l] == 0.0)


def test_traced_program_equals_numpy():
    from sparsedyn.kernels import REGISTRY
    from sparsedyn.symbolic.trace import trace_kernel
    model = sd.random_tree(5, branching=1.5, joint_types="all", seed=6, floating_base=True)
    q, v, a, f = state(model, 7)
    for name, args in (("rnea_derivatives", (q, v, a)), ("aba_derivatives", (q, v, a)),
                       ("generalized_gravity_derivatives", (q,)), ("static_torque_derivatives", (q, f))):
        P = trace_kernel(REGISTRY[name], model)
        want = getattr(sd, name)(model, *args)
        for g, w in zip(P.evaluate(list(args)), want if isinstance(want, tuple) else (want,)):
            assert rel_err(g, w) < 1e-13


def test_aba_derivatives_of_a_massless_subtree_name_the_joint():
    """The factor of ``H`` is checked as ``fd_crb`` checks it: a massless leaf is a clear error."""
    from test_aba import chain_with_leaf
    model = chain_with_leaf()
    q, v, tau, _ = state(model, 6)
    with pytest.raises(sd.SingularInertiaError, match=r"joint 'wrist' \(body 'leaf'.*singular"):
        with sd.use_backend("numpy"):
            sd.aba_derivatives(model, q, v, tau)


def test_aba_derivatives_of_a_floating_base_massless_leaf_name_the_joint():
    """With a floating base the factor of ``H`` is taken by blocks (the rest of the tree first, then
    the base's Schur complement): its pivot check still names the massless leaf's joint."""
    b = sd.ModelBuilder("floating arm")
    b.add_body("base", None, sd.make_joint("free"), mass=3.0, rot_inertia=np.eye(3) * 0.1)
    for k, parent in ((1, "base"), (2, "l1")):
        b.add_body(f"l{k}", parent, sd.make_joint("revolute", (0, 1, 0)), sd.spatial.xlt(np.array([0.0, 0.0, 0.5])),
                   mass=1.0, com=[0, 0, 0.25], rot_inertia=np.eye(3) * 0.02, joint_name=f"j{k}")
    b.add_body("leaf", "l2", sd.make_joint("revolute", (0, 0, 1)), sd.spatial.xlt(np.array([0.0, 0.0, 0.5])),
               joint_name="wrist")
    model = b.build()
    q, v, tau, _ = state(model, 6)
    with pytest.raises(sd.SingularInertiaError, match=r"joint 'wrist' \(body 'leaf'.*singular"):
        with sd.use_backend("numpy"):
            sd.aba_derivatives(model, q, v, tau)


def test_aba_derivatives_factor_a_floating_base_by_blocks():
    """A floating base's six dofs are ancestors of every dof, so ``W = L^-1``'s columns of them and their
    terms in every entry of ``H^-1 = W D^-1 W^T`` are dense.  The factor by blocks
    (``W_NR = -W_NN (L_NR W_RR)``, ``L_NR = D_N^-1 W_NN^T H_NR``) equals the tree's factor row by row
    (:func:`~sparsedyn.algorithms.ltdl.ltdl_inverse_factor`) to rounding, keeps its structural zeros
    exact, and inverts ``H``; traced, those dense products are block products of inner size ``r``, the
    dofs every dof descends from (two of them: ``L_NR W_RR`` and the base's terms of ``H^-1``), and the kernel equals AD of ABA."""
    from sparsedyn.algorithms import dynamics_derivatives as dd
    from sparsedyn.algorithms.ltdl import ltdl_inverse_factor, ltdl_kernel
    from sparsedyn.codegen.trace import trace
    humanoid = sd.humanoid()
    for model in (humanoid, erd.load_pair("talos_reduced", True)[0]):
        r = dd._shared_dofs(model)           # the base's six, and the dofs of a chain below it
        assert r >= 6
        q = model.random_configuration(np.random.default_rng(3))
        H = sd.crba(model, q)
        W, Dinv = dd._inverse_factor(model, H, None)
        W0, Dinv0 = ltdl_inverse_factor(model, ltdl_kernel(model, H))
        kappa = np.linalg.cond(H)
        assert rel_err(W, W0) < rounding_bound(model.nv, kappa) and rel_err(Dinv, Dinv0) < rounding_bound(model.nv, kappa)
        assert np.all(np.triu(W, 1) == 0) and np.all(np.diag(W) == 1) and np.all(W[W0 == 0] == 0)
        assert rel_err((W * Dinv) @ W.T @ H, np.eye(model.nv)) < rounding_bound(model.nv, kappa)
        prog = trace(model, "aba_derivatives")
        assert sum(b.A.shape[1] == r for b in prog.blocks) == 2
    assert_aba_derivatives_equal_ad(humanoid, 7)


KERNELS = ("rnea_derivatives", "aba_derivatives", "generalized_gravity_derivatives", "static_torque_derivatives")


@pytest.mark.parametrize("name", KERNELS)
def test_bad_arguments_and_the_numpy_path(name, monkeypatch):
    """Clear errors naming the argument (shapes, values, quaternions; optional arrays too); the
    uncompiled path runs the analytic algorithm in NumPy, no traced program."""
    model = sd.random_tree(4, joint_types=("revolute", "spherical"), seed=5, floating_base=True)
    q, v, a, f = state(model, 5)
    values = {"q": q, "v": v, "a": a, "tau": a, "f_ext": f, "gravity": np.array([0.3, -1.0, -9.0])}
    k = getattr(sd, name).__kernel__
    args = {n: values[n] for n in list(k.inputs) + list(k.optional)}
    assert_clear_errors(getattr(sd, name), model, args)
    assert_runs_on_numpy(getattr(sd, name), model, args, {}, monkeypatch)


# --- Pinocchio ---------------------------------------------------------------------------

CASES = [(name, fb) for name in erd.ROBOTS for fb in (False, True)]
TOL = 1e-9


def upper_to_symmetric(M):
    return np.triu(M) + np.triu(M, 1).T


@pytest.mark.parametrize("name,floating_base", CASES, ids=[f"{n}-{'floating' if fb else 'fixed'}" for n, fb in CASES])
def test_agree_with_pinocchio(name, floating_base, record_property):
    t0 = time.perf_counter()
    model, pm = erd.load_pair(name, floating_base)
    rng = np.random.default_rng(3)
    model = model.with_armature(rng.uniform(0.0, 0.2, model.nv))
    pm.armature = ip.v_to_pinocchio(model, model.armature)
    pd = pm.createData()
    q = model.random_configuration(rng)
    v, a, tau = rng.normal(size=model.nv), rng.normal(size=model.nv), 10 * rng.normal(size=model.nv)
    f_ext = rng.normal(size=(model.nbodies, 6))
    qp, vp = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v)
    ap, tp = ip.v_to_pinocchio(model, a), ip.tau_to_pinocchio(model, tau)
    fp = ip.fext_to_pinocchio(model, f_ext)
    to_pin = lambda J: ip.derivative_to_pinocchio(model, J)
    for fext, fpin in ((None, ()), (f_ext, (fp,))):
        ours = sd.rnea_derivatives(model, q, v, a, fext)
        pin.computeRNEADerivatives(pm, pd, qp, vp, ap, *fpin)
        for J, ref in zip(ours, (pd.dtau_dq, pd.dtau_dv, upper_to_symmetric(pd.M))):
            assert rel_err(to_pin(J), ref) < TOL
        ours = sd.aba_derivatives(model, q, v, tau, fext)
        pin.computeABADerivatives(pm, pd, qp, vp, tp, *fpin)
        for J, ref in zip(ours, (pd.ddq_dq, pd.ddq_dv, upper_to_symmetric(pd.Minv))):
            assert rel_err(to_pin(J), ref) < TOL
    dg_dq = pin.computeGeneralizedGravityDerivatives(pm, pd, qp)
    assert rel_err(to_pin(sd.generalized_gravity_derivatives(model, q)), dg_dq) < TOL
    ds_dq = pin.computeStaticTorqueDerivatives(pm, pd, qp, fp)
    assert rel_err(to_pin(sd.static_torque_derivatives(model, q, f_ext)), ds_dq) < TOL
    record_property("seconds", round(time.perf_counter() - t0, 2))


def test_one_state_with_a_batch_of_gravities_or_forces_equals_its_elements():
    """One state with a batch of gravities (a plain list) or of external forces: each element of the
    answer equals the call with that element alone (the batch axis comes from the optional input)."""
    model = sd.humanoid()
    q, v, a, _ = state(model, 11)
    rng = np.random.default_rng(12)
    gs = rng.normal(size=(3, 3)).tolist()
    fs = rng.normal(size=(2, model.nbodies, 6))
    bound = rounding_bound(model.nv)
    kappa = np.linalg.cond(sd.crba(model, q))                # aba's derivatives solve with H
    with sd.use_backend("numpy"):
        for fn, k in ((sd.rnea_derivatives, 1.0), (sd.aba_derivatives, kappa)):
            out = fn(model, q, v, a, gravity=gs)
            for i, g in enumerate(gs):
                for x, y in zip(out, fn(model, q, v, a, gravity=g)):
                    assert x.shape == (3, model.nv, model.nv)
                    assert rel_err(x[i], y) <= bound * k
            out = fn(model, q, v, a, f_ext=fs)
            for i in range(len(fs)):
                for x, y in zip(out, fn(model, q, v, a, f_ext=fs[i])):
                    assert rel_err(x[i], y) <= bound * k
        dg = sd.generalized_gravity_derivatives(model, q, gravity=gs)
        for i, g in enumerate(gs):
            assert rel_err(dg[i], sd.generalized_gravity_derivatives(model, q, gravity=g)) <= bound


# --- long chains: H^-1 from minv, its products with dtau/dx as dense blocks --------------------------

def _long_chain_pair(n, floating_base):
    """(our model, Pinocchio model) of a chain of ``n`` revolute links with a random armature, both read
    from one URDF (so that the dof orders agree)."""
    urdf = sd.to_urdf(sd.serial_chain(n))
    pm = pin.buildModelFromXML(urdf, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromXML(urdf)
    model = sd.load_urdf(urdf, floating_base=floating_base)
    arm = np.random.default_rng(n).uniform(0.0, 0.2, model.nv)
    pm.armature = ip.v_to_pinocchio(model, arm)
    return model.with_armature(arm), pm


@pytest.mark.parametrize("floating_base", [False, True], ids=["fixed", "floating"])
def test_long_chain_aba_derivatives_agree_with_pinocchio(floating_base, build_cache):
    """A chain deep enough for the route through ``minv`` (``-Minv dtau/dx``), on NumPy and native (its
    compiled program holds the two products as dense blocks, so it grows with the square of the chain,
    not the cube): Pinocchio's ``computeABADerivatives``, to the rounding of a solve with ``H``."""
    from sparsedyn.algorithms.dynamics_derivatives import _by_minv
    from sparsedyn.codegen.trace import trace
    model, pm = _long_chain_pair(40, floating_base)
    assert _by_minv(model)
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), 10 * rng.normal(size=model.nv)
    f_ext = rng.normal(size=(model.nbodies, 6))
    pd = pm.createData()
    bound = rounding_bound(model.nv, float(np.linalg.cond(sd.crba(model, q))))
    to_pin = lambda J: ip.derivative_to_pinocchio(model, J)
    prog = trace(model, "aba_derivatives")
    assert len(prog.blocks) == 2 and len(prog.nodes) < model.nv ** 3
    for fext, fpin in ((None, ()), (f_ext, (ip.fext_to_pinocchio(model, f_ext),))):
        pin.computeABADerivatives(pm, pd, ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v),
                                  ip.tau_to_pinocchio(model, tau), *fpin)
        refs = (pd.ddq_dq, pd.ddq_dv, upper_to_symmetric(pd.Minv))
        for backend in ("numpy", "native"):
            with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})):
                ours = sd.aba_derivatives(model, q.tolist(), list(v), tau, fext)
            for J, ref in zip(ours, refs):
                assert rel_err(to_pin(J), ref) < bound, backend


def test_long_chain_of_every_joint_type_equals_ad_and_finite_differences():
    """The route through ``minv`` on a chain of every joint type with a constant motion subspace
    (armature on every other dof): the reverse-mode derivatives of the traced ABA and central
    differences."""
    from sparsedyn.algorithms.derivatives import varying_subspaces
    from sparsedyn.algorithms.dynamics_derivatives import _by_minv
    types = ("revolute", "continuous", "prismatic", "helical", "cylindrical", "planar", "spherical", "translation",
             "free")
    m = sd.random_tree(14, branching=1.0, joint_types=types, seed=9)
    model = m.with_armature(np.where(np.arange(m.nv) % 2 == 0, 0.3, 0.0))
    assert _by_minv(model) and not varying_subspaces(model)
    q, v, tau, f = state(model, 8)
    kappa = float(np.linalg.cond(sd.crba(model, q)))
    dq, dv, dtau = sd.aba_derivatives(model, q, v, tau, f)
    ad_q, ad_v, ad_tau = sd.derivatives(sd.aba)(model, q, v, tau, f)
    for x, y in ((dq, ad_q), (dv, ad_v), (dtau, ad_tau)):
        assert rel_err(x, y) < rounding_bound(model.nv, kappa)
    fd = lambda q_, v_, t_: sd.aba(model, q_, v_, t_, f)
    assert rel_err(dq, tangent_fd(model, fd, q, v, tau)) < FD_TOL
    assert rel_err(dv, vector_fd(lambda v_: fd(q, v_, tau), v)) < FD_TOL


def test_composite_joints_take_the_analytical_derivatives_of_their_chains():
    """dm_control's humanoid (its hips and shoulders composite joints of hinges, whose subspaces turn with
    ``q``): the analytical model is the chains of massless bodies; rnea_derivatives, aba_derivatives and
    generalized_gravity_derivatives, one state and a batch of three with body forces, on the native road
    and the NumPy road, equal the differentiated programs of rnea and aba (sd.derivatives) to rounding
    times the inertia's condition (ABA's), and ABA's central differences."""
    import warnings
    from pathlib import Path
    import dm_control
    from sparsedyn.algorithms.dynamics_derivatives import analytical_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml"))
    chained, f = analytical_model(model, np.ones((2, model.nbodies, 6)))
    assert chained.nbodies > model.nbodies and chained.nv == model.nv and f.shape == (2, chained.nbodies, 6)
    rng = np.random.default_rng(12)
    Q = np.stack([model.random_configuration(rng) for _ in range(3)])
    V, T = rng.normal(size=(2, 3, model.nv))
    F = rng.normal(size=(3, model.nbodies, 6))
    kappa = max(np.linalg.cond(h) for h in sd.crba(model, Q))
    for backend in ("native", "numpy"):
        with sd.use_backend(backend, deterministic=True):
            for q, v, tau, fext in ((Q[0], V[0], T[0], None), (Q, V, T, F)):
                qdd = sd.aba(model, q, v, tau, fext)
                got = sd.rnea_derivatives(model, q, v, qdd, fext)
                for x, y in zip(got, sd.derivatives(sd.rnea)(model, q, v, qdd, fext)):
                    assert rel_err(x, y) < AD_TOL
                got = sd.aba_derivatives(model, q, v, tau, fext)
                for x, y in zip(got, sd.derivatives(sd.aba, ("q", "v", "tau"))(model, q, v, tau, fext)):
                    assert rel_err(x, y) < rounding_bound(model.nv + chained.nbodies, kappa)
                g = sd.generalized_gravity_derivatives(model, q)
                assert rel_err(g, sd.derivatives(sd.generalized_gravity, "q")(model, q)) < AD_TOL
    Dq, Dv, _ = sd.aba_derivatives(model, Q[1], V[1], T[1])
    assert rel_err(Dq, tangent_fd(model, lambda q_, v_, t_: sd.aba(model, q_, v_, t_), Q[1], V[1], T[1])) < FD_TOL
    assert rel_err(Dv, vector_fd(lambda v_: sd.aba(model, Q[1], v_, T[1]), V[1])) < FD_TOL
