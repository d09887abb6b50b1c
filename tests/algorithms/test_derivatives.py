"""Derivatives of any kernel by forward/reverse mode on its traced program (sd.derivatives): finite
differences on the tangent space (random trees of every joint type).  The analytical derivatives are
tested in test_dynamics_derivatives.py (against this module's AD, differences and Pinocchio)."""


import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from sparsedyn.algorithms.derivatives import derivative_program

H_FD = 1e-6


def tangent_fd(model, f, q, *rest):
    """Central differences of ``f(q, *rest)`` along ``integrate(q, h e_k)``: (..., nv) last axis."""
    cols = []
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = H_FD
        fp, fm = f(sd.integrate(model, q, e), *rest), f(sd.integrate(model, q, -e), *rest)
        cols.append((np.asarray(fp) - np.asarray(fm)) / (2 * H_FD))
    return np.stack(cols, -1)


def vector_fd(f, x, *rest, pos=0):
    """Central differences of ``f`` with respect to its argument number ``pos`` (a vector)."""
    cols = []
    for k in range(x.shape[-1]):
        e = np.zeros(x.shape[-1])
        e[k] = H_FD
        args_p = list(rest)
        args_m = list(rest)
        args_p.insert(pos, x + e)
        args_m.insert(pos, x - e)
        cols.append((np.asarray(f(*args_p)) - np.asarray(f(*args_m))) / (2 * H_FD))
    return np.stack(cols, -1)


# Central differences with h = 1e-6: truncation h^2 |f'''| / 6 and cancellation eps |f| / h, both
# about 1e-10 relative for these O(1) models; 1e-6 leaves room for the larger third derivatives
# of the light distal links.
FD_TOL = 1e-6


TREES = {"chain": dict(nbodies=7, joint_types="all", seed=1),
         "branched": dict(nbodies=8, branching=2.0, skew=0.4, joint_types="all", seed=2),
         "floating": dict(nbodies=7, branching=1.5, joint_types="all", seed=3, floating_base=True),
         "all": dict(nbodies=15, branching=1.5, joint_types="all", seed=6)}


@pytest.fixture(scope="module", params=sorted(TREES))
def tree(request):
    """Small seeded random trees with every joint type (helical, cylindrical, planar, spherical...)."""
    return sd.random_tree(**TREES[request.param])


def test_trees_cover_every_joint_type():
    types = {j.type for kw in TREES.values() for j in sd.random_tree(**kw).joints}
    assert types == set(sd.JOINT_TYPES)


def quaternion_start(model):
    """Index in ``q`` of the first quaternion (free or spherical joint), or None."""
    for i, j in enumerate(model.joints):
        if j.type in ("free", "spherical"):
            return model.q_slice(i).start + (3 if j.type == "free" else 0)
    return None


def assert_clear_errors(fn, model, args, static=None):
    """``fn(model, **args, **static)`` runs on ``args`` and refuses bad input with an error that names
    the argument: each array with its last axis one short, with a NaN, with an infinity; a
    configuration whose quaternion is off unit norm; two batches that do not broadcast; an unknown
    frame and an unknown reference (static arguments)."""
    static = dict(static or {})
    fn(model, **args, **static)
    call = lambda **changed: fn(model, **dict(args, **changed), **static)       # noqa: E731
    for name, x in args.items():
        x = np.asarray(x, float)
        with pytest.raises(ValueError, match=rf"^{name}: expected shape \(\.\.\., "):
            call(**{name: x[..., :-1]})
        for value in (np.nan, np.inf):
            bad = x.copy()
            bad.flat[bad.size // 2] = value
            with pytest.raises(ValueError, match=rf"^{name}: contains NaN or infinite values"):
                call(**{name: bad})
        k = quaternion_start(model)
        if name.startswith("q") and x.shape[-1] == model.nq and k is not None:
            bad = x.copy()
            bad[..., k:k + 4] *= 1.01
            with pytest.raises(ValueError, match=rf"^{name}: the quaternion of joint .* is not of unit norm"):
                call(**{name: bad})
    (n0, x0), *others = args.items()
    for n1, x1 in others:
        with pytest.raises(ValueError, match=rf"batch shapes do not broadcast \(.*{n0}: \(2,\).*{n1}: \(3,\)"):
            call(**{n0: np.stack([x0] * 2), n1: np.stack([x1] * 3)})
    if "frame" in static:
        with pytest.raises(KeyError, match="has no frame 'no_such_frame'"):
            fn(model, **args, **dict(static, frame="no_such_frame"))
    if "reference" in static:
        with pytest.raises(ValueError, match=r"reference: expected one of \('local', 'world', 'local_world_aligned'\)"):
            fn(model, **args, **dict(static, reference="global"))


def assert_runs_on_numpy(fn, model, args, static, monkeypatch):
    """The uncompiled path of ``fn`` evaluates its algorithm in NumPy: with tracing (a new Graph) and
    program evaluation (Program.evaluate) made to fail, ``fn`` still gives the result it gave before,
    bit for bit (one state and a batch of two)."""
    from sparsedyn.symbolic import ir
    with sd.use_backend("numpy"):
        want = fn(model, **args, **static)
        batch = {n: np.stack([x, x]) for n, x in args.items()}

        def refuse(*a, **k):
            raise AssertionError("the NumPy path traced or interpreted a program")
        monkeypatch.setattr(ir.Graph, "__init__", refuse)
        monkeypatch.setattr(ir.Program, "evaluate", refuse)
        got, got2 = fn(model, **args, **static), fn(model, **batch, **static)
        monkeypatch.undo()
    for w, g, g2 in zip(*((x if isinstance(x, tuple) else (x,)) for x in (want, got, got2))):
        np.testing.assert_array_equal(g, w)
        assert g2.shape == (2,) + w.shape and np.all(g2[1] == g2[0])


def state(model, seed):
    rng = np.random.default_rng(seed)
    return (model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv),
            rng.normal(size=(model.nbodies, 6)))


def test_kinematics_derivatives_finite_differences(tree):
    q, v, _, _ = state(tree, 3)
    frame = tree.body_names[-1]
    dR, dp = sd.derivatives(sd.frame_placement, wrt="q")(tree, q, frame=frame)
    assert dR.shape == (3, 3, tree.nv) and dp.shape == (3, tree.nv)
    R = lambda q_: sd.frame_placement(tree, q_, frame)[0]
    p = lambda q_: sd.frame_placement(tree, q_, frame)[1]
    assert rel_err(dR, tangent_fd(tree, R, q)) < FD_TOL and rel_err(dp, tangent_fd(tree, p, q)) < FD_TOL
    for ref in ("local", "world"):
        dJ = sd.derivatives(sd.frame_jacobian, wrt="q")(tree, q, frame, reference=ref)
        assert dJ.shape == (6, tree.nv, tree.nv)
        assert rel_err(dJ, tangent_fd(tree, lambda q_: sd.frame_jacobian(tree, q_, frame, ref), q)) < FD_TOL
        dvq, dvv = sd.derivatives(sd.frame_velocity, wrt=("q", "v"))(tree, q, v, frame, reference=ref)
        assert rel_err(dvq, tangent_fd(tree, lambda q_: sd.frame_velocity(tree, q_, v, frame, ref), q)) < FD_TOL
        # The velocity is linear in v with the Jacobian as coefficient matrix.
        assert rel_err(dvv, sd.frame_jacobian(tree, q, frame, ref)) < 1e-12


def test_forward_and_reverse_mode_agree(tree):
    q, v, a, _ = state(tree, 4)
    fwd = sd.derivatives(sd.rnea, mode="forward")(tree, q, v, a)
    rev = sd.derivatives(sd.rnea, mode="reverse")(tree, q, v, a)
    for F, R in zip(fwd, rev):
        assert rel_err(F, R) < 1e-11
    for F, R in zip(fwd, sd.rnea_derivatives(tree, q, v, a)):
        assert rel_err(F, R) < 1e-11


def test_batched_and_cached():
    model = sd.random_tree(5, branching=1.5, joint_types="all", seed=21, floating_base=True)
    rng = np.random.default_rng(0)
    q = np.stack([model.random_configuration(rng) for _ in range(6)]).reshape(2, 3, model.nq)
    v, a = rng.normal(size=(2, 3, model.nv)), rng.normal(size=(model.nv,))
    out = sd.rnea_derivatives(model, q, v, a)
    assert all(o.shape == (2, 3, model.nv, model.nv) for o in out)
    for i in range(2):
        for j in range(3):
            for b, o in zip(out, sd.rnea_derivatives(model, q[i, j], v[i, j], a)):
                np.testing.assert_allclose(b[i, j], o, rtol=0, atol=1e-13)
    # Built once per (model, kernel, static, optional inputs), never per state.
    p1 = derivative_program(sd.rnea, model, ("q", "v", "a"))
    assert derivative_program(sd.rnea, model, ("q", "v", "a")) is p1
    assert derivative_program(sd.rnea, model, ("q", "v", "a"), optional=("f_ext",)) is not p1


def test_user_function_and_bad_arguments():
    model = sd.random_tree(4, joint_types=("revolute", "spherical"), seed=5)
    q = model.random_configuration(1)

    def com_height(model, q):
        R, p = sd.forward_kinematics(model, q)
        m = model.inertia[:, 5, 5]
        return np.array([(m * p[..., 2]).sum(-1) / m.sum()], dtype=p.dtype)

    d = sd.derivatives(com_height, wrt="q", inputs={"q": ("nq",)}, outputs={"z": (1,)})
    fd = tangent_fd(model, lambda q_: com_height(model, q_), q)
    assert d(model, q).shape == (1, model.nv) and rel_err(d(model, q), fd) < FD_TOL
    with pytest.raises(TypeError, match="not a registered kernel"):
        sd.derivatives(com_height)
    with pytest.raises(ValueError, match="wrt"):
        sd.derivatives(sd.rnea, wrt="tau")(model, q, q[:model.nv], q[:model.nv])
    with pytest.raises(ValueError, match="v: expected shape"):
        sd.rnea_derivatives(model, q, np.zeros(2), np.zeros(model.nv))
    with pytest.raises(ValueError, match="quaternion"):
        sd.rnea_derivatives(model, 2 * q, np.zeros(model.nv), np.zeros(model.nv))


def test_mujoco_tangent_columns():
    """Along MuJoCo's own integration (mj_integratePos) the change of a kernel is J T(q)^T dq_mj,
    T = velocity_map (free and planar joints, the documented column conversion)."""
    import mujoco
    from sparsedyn.interop import mujoco as imj
    model = sd.random_tree(4, joint_types=("revolute", "planar", "spherical"), seed=12, floating_base=True)
    mm = imj.load_mujoco(model)
    q, v, a, _ = state(model, 13)
    qm = imj.q_to_mujoco(model, q)

    def step(dq_mj):
        x = qm.copy()
        mujoco.mj_integratePos(mm, x, dq_mj, 1.0)
        return imj.q_from_mujoco(model, x)

    fd = np.stack([(sd.rnea(model, step(H_FD * u), v, a) - sd.rnea(model, step(-H_FD * u), v, a)) / (2 * H_FD)
                   for u in np.eye(model.nv)], -1)
    T = imj.velocity_map(model, q)
    assert rel_err(sd.rnea_derivatives(model, q, v, a)[0] @ T.T, fd) < FD_TOL
