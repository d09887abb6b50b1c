"""Every registered function has a compiled form equal to the NumPy function: single state, batched,
``out=``, optional arrays, every static argument; on random trees of every joint type and a robot.

The compiled program performs the NumPy kernel's operations in the same order except the
summation order inside NumPy's ``@``; the differences are rounding errors amplified by the
conditioning of the result (``aba``, ``minv``, ``fd_crb`` invert ``H``; random trees have
``cond(H)`` up to about 1e4), so 1e-9 relative to max(1, |result|) bounds them with a wide margin
while any wrong entry (an error of order one) fails.
"""

import inspect
import sysconfig
import warnings
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, random_trees, rel_err, random_state, rounding_bound
from erd import load_pair
from kernel_args import arguments, static_choices
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.kernels import REGISTRY

pytestmark = pytest.mark.usefixtures("compile_cache")

#: Public functions taking a model that are not kernels, and why.
NOT_KERNELS = {
    "with_joint_stops": "a model edit (shapes added): no state argument",
    "sparsity_pattern": "structure only: no state argument",
    "to_urdf": "writes a file",
    "estimate_report": "a text report",
    "estimation_demo": "a text report",
    "compile_report": "a text report",
    "sparse_inverse_dynamics": "compiled through sparsedyn.compile(problem): the sparse layer's own structure",
    "sparse_forward_dynamics": "compiled through sparsedyn.compile(problem): the sparse layer's own structure",
    "sparse_hybrid_dynamics": "compiled through sparsedyn.compile(problem): the sparse layer's own structure",
    "subtree_masses": "structure only: no state argument",
    "mjcf_measurements": "picks values out of MuJoCo's sensordata: a layout conversion",
    "identify": "a fit over a data set (SciPy least squares), not a function of one state",
    "identify_recording": "identify over a recording's chunks (files in, files out): its kernels are the regressors'",
    "base_parameters": "a structural analysis of stacked regressors (SciPy pivoted QR)",
    "force_torque_regressor": "a constant sensor map applied to joint_wrench_regressor, which is the kernel",
    "force_torque_parameters": "the model's constants (no state argument)",
    "imu_base_state": "quaternion extraction branches on values; frame_proper_acceleration is the kernel",
    "reduce_model": "builds a Model (model layer): no state argument",
    "center_of_pressure": "a point only where the normal force is positive (NaN elsewhere): frame_placement is the kernel",
    "zero_moment_point": "its support polygon check is a convex hull (SciPy), state by state",
    "support_polygon": "a convex hull (SciPy) of projected points",
    "append_model": "builds a Model (model layer): no state argument",
    "load_srdf": "reads a file",
    "load_actuators": "reads a file (the actuators' forces are a method of what it returns)",
    "contact_step": "the iterative kernel contact_step_kernel, plus the modes (strings) and a warning",
    "rollout": "a loop of contact_step calls (or a user's controller)",
    "contact_step_derivatives": "a step (contact_step_kernel) differentiated in its modes around one traced program",
}


def test_every_public_numeric_function_is_registered():
    """A public function of a model (or of its dof tree) is a registered kernel, so it has a
    compiled form; a new one without ``@kernel`` fails here."""
    missing = []
    for name in sd.__all__:
        obj = getattr(sd, name)
        if not inspect.isfunction(obj):
            continue
        first = next(iter(inspect.signature(obj).parameters), None)
        if first in ("model", "model_or_lambda") and name not in NOT_KERNELS:
            if getattr(obj, "__kernel__", None) is None or REGISTRY.get(name) is not obj.__kernel__:
                missing.append(name)
    assert not missing, f"public numeric functions without a kernel declaration: {missing}"
    for name in REGISTRY:
        assert name in sd.__all__, f"registered kernel {name!r} is not public"
    assert "bias" not in sd.__all__ and "bias" not in REGISTRY      # one name: nonlinear_effects


@pytest.fixture(scope="module", params=["floating-all-joints", "panda"])
def compiled(request, compile_cache):
    if request.param == "panda":
        model, _ = load_pair("panda", False)
        return model, sd.compile(model, vectorize=False)
    model = random_trees(constant_subspace_types())[0 if request.param.startswith("chain") else 2]
    # the floating tree also exercises the vectorised batch library
    return model, sd.compile(model, vectorize=True if request.param.startswith("floating") else False)


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _bound(model, args):
    """The rounding bound (conftest.rounding_bound) of the kernels at these arguments: a chain of
    ``nv + nb`` dependent steps, times ``cond(H)`` at the states, the worst conditioned step any
    kernel takes (ABA, Minv and the LTDL solves divide by the mass matrix' pivots)."""
    q = args.get("q", args.get("q0"))
    H = sd.crba(model, q) if q is not None else next(
        np.asarray(x) for x in args.values() if np.ndim(x) >= 2 and np.shape(x)[-1] == np.shape(x)[-2])
    kappa = float(np.max(np.linalg.cond(H))) if H.shape[-1] else 1.0
    return rounding_bound(model.nv + model.nbodies, kappa)


def _same(got, ref, what, bound):
    got, ref = _as_tuple(got), _as_tuple(ref)
    assert len(got) == len(ref), what
    for g, r in zip(got, ref):
        assert isinstance(g, np.ndarray) and g.dtype == np.float64 and g.shape == r.shape, what
        assert rel_err(g, r) < bound, (what, rel_err(g, r), bound)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_compiled_function_equals_numpy(compiled, name, rng):
    model, k = compiled
    assert k.compiled
    public = getattr(sd, name)
    for static in static_choices(model, name):
        for batch in ((), (3, 7)):
            args = arguments(model, name, rng, batch=batch, static=static)
            ref = public(model, **args, **static)
            tol = _bound(model, args)
            _same(getattr(k, name)(**args, **static), ref, (name, static, batch), tol)
            _same(public(k, **args, **static), ref, (name, static, batch, "dispatch"), tol)
            outs = tuple(np.empty(r.shape) for r in _as_tuple(ref))
            res = getattr(k, name)(**args, **static, out=outs if len(outs) > 1 else outs[0])
            assert all(a is b for a, b in zip(_as_tuple(res), outs))
            _same(res, ref, (name, static, batch, "out"), tol)
        if REGISTRY[name].optional:
            args = arguments(model, name, rng, batch=(2,), optional=True, static=static)
            _same(getattr(k, name)(**args, **static), public(model, **args, **static), (name, static, "optional"),
                  _bound(model, args))


def test_fast_path_is_used_and_checks_like_numpy(compiled, rng):
    model, k = compiled
    if Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        assert k.fastcall                   # single calls take the C fast path where it can be built
    q, v, a = random_state(model, rng)
    k.rnea(q, v, a)
    assert k._methods["rnea"].fast.get(()) is not None or not k.fastcall
    for bad, match in ((np.full_like(q, np.nan), "NaN"), (q[:-1], "expected shape")):
        with pytest.raises(ValueError, match=match):
            k.rnea(bad, v, a)
        with pytest.raises(ValueError, match=match):
            sd.rnea(model, bad, v, a)
    with pytest.raises(ValueError, match="expected shape"):
        k.integrate(q, np.zeros(model.nv + 1))
    with pytest.raises(ValueError, match="expected shape"):
        sd.integrate(model, q, np.zeros(model.nv + 1))
    assert k.rnea(q[None][:0], v[None][:0], a[None][:0]).shape == (0, model.nv)
    with pytest.raises(ValueError, match="broadcast"):
        k.rnea(np.stack([q, q]), np.stack([v, v, v]), a)


def test_quaternions_of_wrong_norm_are_refused(rng, compile_cache):
    model = random_trees(constant_subspace_types())[2]                 # floating base: q[3:7] is a quaternion
    k = sd.compile(model)
    q, v, a = random_state(model, rng)
    k.rnea(q, v, a)                           # builds and installs the fast path
    for scale in (0.0, 2.0):
        bad = q.copy()
        bad[3:7] *= scale
        for f in (k.rnea, k.forward_kinematics):
            args = (bad, v, a) if f is k.rnea else (bad,)
            with pytest.raises(ValueError, match="unit norm"):
                f(*args)
            with pytest.raises(ValueError, match="unit norm"):
                f(*(np.stack([x, x]) for x in args))


def test_vectorised_batches_check_every_state(rng, compile_cache):
    """The vectorised batch kernel checks the values as it reads them (no NumPy pass): one bad state
    anywhere in a batch gives the NumPy function's error, and a good batch its results."""
    model = random_trees(constant_subspace_types())[2]                 # floating base: q[3:7] is a quaternion
    k = sd.compile(model, vectorize=True)
    n = 8 * k.lanes + 3                       # full blocks and a partial one
    Q = np.stack([model.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    F = rng.normal(size=(n, model.nbodies, 6))
    ref = sd.rnea(model, Q, V, A, f_ext=F)
    np.testing.assert_allclose(k.rnea(Q, V, A, f_ext=F), ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    for state in (0, n // 2, n - 1):
        cases = []
        for name, X, value, match in (("q", Q, np.nan, "q: contains NaN"), ("v", V, np.inf, "v: contains NaN"),
                                      ("f_ext", F, -np.inf, "f_ext: contains NaN")):
            bad = X.copy()
            bad[state, 0] = value
            cases.append(({"q": Q, "v": V, "f_ext": F, name: bad}, match))
        bad = Q.copy()
        bad[state, 3:7] *= 1.01
        cases.append(({"q": bad, "v": V, "f_ext": F}, "unit norm"))
        for args, match in cases:
            with pytest.raises(ValueError, match=match):
                k.rnea(args["q"], args["v"], A, f_ext=args["f_ext"])
            with pytest.raises(ValueError, match=match):
                sd.rnea(model, args["q"], args["v"], A, f_ext=args["f_ext"])
            with pytest.raises(ValueError, match=match):
                k.rnea(args["q"], args["v"], A, f_ext=args["f_ext"], out=np.empty((n, model.nv)))


def test_vectorised_batch_writes_large_results_to_memory_exactly(rng, compile_cache):
    """A batch whose results pass 4 MiB (rnea_derivatives of a 27-dof tree, 773 states: full blocks and
    a partial one) writes them past the caches; every element lands in its place: the same numbers,
    bit for bit, as a short batch (ordinary stores) and, to rounding, as one state at a time."""
    model = random_trees(constant_subspace_types())[2]
    k = sd.compile(model, vectorize=True)
    n = 773
    assert n * model.nv ** 2 >= 1 << 19
    Q = np.stack([model.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    big = k.rnea_derivatives(Q, V, A)
    for lo, hi in ((0, 19), (n - 19, n)):
        for got, ref in zip(big, k.rnea_derivatives(Q[lo:hi], V[lo:hi], A[lo:hi])):
            np.testing.assert_array_equal(got[lo:hi], ref)
    outs = tuple(np.full_like(x, np.nan) for x in big)
    k.rnea_derivatives(Q, V, A, out=outs)
    for got, ref in zip(outs, big):
        np.testing.assert_array_equal(got, ref)
    tol = _bound(model, {"q": Q})
    for i in range(0, n, 37):
        _same(tuple(x[i] for x in big), k.rnea_derivatives(Q[i], V[i], A[i]), ("state", i), tol)


def test_every_calling_convention_gives_the_numpy_result(compiled, rng):
    """Static arguments by position, by keyword or left to their defaults; arrays by keyword; a
    frame by index: the single-state fast path and its fallback agree with the NumPy function."""
    model, k = compiled
    q, v, _ = random_state(model, rng)
    frame = model.frames[-1].name
    ref = {r: sd.frame_jacobian(model, q, frame, r) for r in ("local", "world", "local_world_aligned")}
    tol = 1e3 * np.finfo(float).eps * (1 + np.abs(ref["world"]).max())
    for _ in range(2):                                  # the first call builds, the second is the fast path
        np.testing.assert_allclose(k.frame_jacobian(q, frame), ref["local"], rtol=0, atol=tol)
        np.testing.assert_allclose(k.frame_jacobian(q, frame, "world"), ref["world"], rtol=0, atol=tol)
        np.testing.assert_allclose(k.frame_jacobian(q, frame, reference="world"), ref["world"], rtol=0, atol=tol)
        np.testing.assert_allclose(k.frame_jacobian(q, reference="local_world_aligned", frame=frame),
                                   ref["local_world_aligned"], rtol=0, atol=tol)
        np.testing.assert_allclose(k.frame_jacobian(q=q, frame=frame), ref["local"], rtol=0, atol=tol)
        np.testing.assert_allclose(k.frame_jacobian(q, len(model.frames) - 1, "world"), ref["world"], rtol=0,
                                   atol=tol)
        np.testing.assert_allclose(k.integrate(q, v), sd.integrate(model, q, v), rtol=0, atol=tol)
        np.testing.assert_allclose(k.integrate(q=q, v=v), sd.integrate(model, q, v), rtol=0, atol=tol)
    with pytest.raises(TypeError):
        k.frame_jacobian(q)                             # the frame is required
    with pytest.raises(TypeError):
        k.frame_jacobian(q, frame, "world", reference="world")
    with pytest.raises(ValueError, match="reference"):
        k.frame_jacobian(q, frame, "body")
    with pytest.raises(TypeError):
        k.integrate(q, v, v)


def test_out_may_be_an_input(compiled, rng):
    """``out=`` naming an input (an in-place update such as ``integrate(q, v, out=q)``) gives the
    NumPy result, one state and batched; overlapping result arrays are refused."""
    model, k = compiled
    tol = 1e3 * np.finfo(float).eps
    for batch in ((), (3,), (8 * max(k.lanes, 1) + 1,)):
        n = int(np.prod(batch, dtype=int))
        Q = np.stack([model.random_configuration(rng) for _ in range(n)]).reshape(batch + (model.nq,))
        V, A = rng.normal(size=batch + (model.nv,)), rng.normal(size=batch + (model.nv,))
        for _ in range(2):                            # the second single call takes the fast path
            ref = sd.integrate(model, Q, V)
            qq = Q.copy()
            assert k.integrate(qq, V, out=qq) is qq
            np.testing.assert_allclose(qq, ref, rtol=0, atol=tol * (1 + np.abs(ref).max()))
            ref = sd.rnea(model, Q, V, A)
            vv = V.copy()
            assert k.rnea(Q, vv, A, out=vv) is vv
            np.testing.assert_allclose(vv, ref, rtol=0, atol=tol * (1 + np.abs(ref).max()) * model.nv)
    q = model.random_configuration(rng)
    buf = np.empty(model.nbodies * 12 + 3)
    R, p = buf[:model.nbodies * 9].reshape(model.nbodies, 3, 3), buf[3:3 + model.nbodies * 3].reshape(model.nbodies, 3)
    with pytest.raises(ValueError, match="overlap"):
        k.forward_kinematics(q, out=(R, p))
    R, p = np.empty((model.nbodies, 3, 3)), np.empty((model.nbodies, 3))
    res = k.forward_kinematics(q, out=(R, p))
    assert res[0] is R and res[1] is p
    for a, b in zip(res, sd.forward_kinematics(model, q)):
        np.testing.assert_allclose(a, b, rtol=0, atol=tol * (1 + np.abs(b).max()))


def test_help_and_signature_match_the_numpy_function(compiled):
    _, k = compiled
    for name in ("rnea", "frame_jacobian", "forward_kinematics", "integrate", "difference"):
        f, public = getattr(k, name), getattr(sd, name)
        params = list(inspect.signature(public).parameters.values())[1:]
        sig = inspect.signature(f)
        assert list(sig.parameters)[:len(params)] == [p.name for p in params]
        assert [p.default for p in list(sig.parameters.values())[:len(params)]] == [p.default for p in params]
        assert sig.parameters["out"].kind is inspect.Parameter.KEYWORD_ONLY
        assert f.__doc__ == public.__doc__ and f.__name__ == name
    with pytest.raises(AttributeError):
        k.fk
    with pytest.raises(AttributeError):
        k.bias
    assert k.nq == k.model.nq and k.frames == k.model.frames     # the model's attributes


def test_model_without_moving_bodies(compile_cache):
    model = sd.ModelBuilder("nothing").build()
    k = sd.compile(model)
    q = np.zeros((4, 0))
    assert k.rnea(q, q, q).shape == (4, 0)
    assert sd.rnea(k, np.zeros(0), np.zeros(0), np.zeros(0)).shape == (0,)
    assert k.crba(q).shape == (4, 0, 0)
    assert k.aba(q, q, q).shape == (4, 0)


def test_out_is_checked_on_the_numpy_fallback(tmp_path, monkeypatch, rng):
    from sparsedyn.codegen import CompilerNotFoundWarning
    monkeypatch.setenv("SPARSEDYN_CC", str(tmp_path / "no-such-cc"))
    model = random_trees(constant_subspace_types())[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompilerNotFoundWarning)
        k = sd.compile(model)
    assert not k.compiled
    q, v, a = random_state(model, rng, batch=(3,))
    H = np.empty((3, model.nv, model.nv))
    assert k.crba(q, out=H) is H and rel_err(H, sd.crba(model, q)) == 0.0
    for bad in (np.empty((3, model.nv, model.nv), np.float32), np.empty((3, model.nv, model.nv), np.int64),
                np.empty((2, model.nv, model.nv)), [[0.0]]):
        with pytest.raises(ValueError, match="out"):
            k.crba(q, out=bad)
    assert rel_err(sd.rnea(k, q, v, a), sd.rnea(model, q, v, a)) == 0.0


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_one_conversion_on_both_paths(compiled, rng):
    """float32, integer and np.matrix inputs become float64 on the NumPy and the compiled path alike;
    complex input is refused on both."""
    model, k = compiled
    q, v, a = random_state(model, rng)
    ref = sd.rnea(model, q.astype(np.float32).astype(np.float64), v, a)
    for got in (sd.rnea(model, q.astype(np.float32), v, a), k.rnea(q.astype(np.float32), v, a)):
        assert got.dtype == np.float64 and rel_err(got, ref) < rounding_bound(model.nv + model.nbodies)
    assert rel_err(k.crba(np.asmatrix(q)), sd.crba(model, q[None])) < rounding_bound(model.nv + model.nbodies)
    for f in (lambda x: sd.rnea(model, x, v, a), lambda x: k.rnea(x, v, a)):
        with pytest.raises(TypeError, match="complex"):
            f(q + 0j)


def test_armature_compiled_and_keyed(rng, compile_cache):
    """Armature is traced into the kernels, and a model differing only by armature gets its own build."""
    model = random_trees(constant_subspace_types())[0]
    arm = np.zeros(model.nv)
    arm[1::2] = rng.uniform(0.1, 1.0, len(arm[1::2]))
    k0 = sd.compile(model)
    ka = sd.compile(model.with_armature(arm))
    q, v, a = random_state(model, rng, batch=(3,))
    m = ka.model
    bound = rounding_bound(model.nv + model.nbodies, float(np.linalg.cond(sd.crba(m, q)).max()))
    for name, args in (("rnea", (q, v, a)), ("aba", (q, v, a)), ("crba", (q,)), ("minv", (q,))):
        assert rel_err(getattr(ka, name)(*args), getattr(sd, name)(m, *args)) < bound, name
    assert ka.built["rnea-single"]            # built for this model: not the armature-free library
    # and the armature-free model's kernel differs by exactly the rotor term
    assert rel_err(ka.rnea(q, v, a) - k0.rnea(q, v, a), arm * a) < bound
