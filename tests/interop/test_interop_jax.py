"""Kernels as JAX functions: the compiled kernel through XLA's FFI (and a host callback) on CPU, the
traced program replayed with jax.numpy elsewhere; jit, vmap, grad; equal to NumPy and to our
derivative kernels, and to central differences of the NumPy kernels."""

import warnings

import jax
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from kernel_args import arguments
from test_interop_casadi import DERIVATIVE_KERNELS, bound, derivative_kernel_cases
from sparsedyn.codegen.build import CompilerNotFoundWarning
from sparsedyn.interop.jax import function, program_function
from sparsedyn.symbolic.trace import trace_kernel

jax.config.update("jax_enable_x64", True)     # float64, to compare with NumPy at 1e-12

ROADS = ("native", "callback", "replay")


def state(model, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    q = np.stack([model.random_configuration(rng) for _ in range(int(np.prod(batch, dtype=int)))])
    return (q.reshape(batch + (model.nq,)), rng.normal(size=batch + (model.nv,)),
            rng.normal(size=batch + (model.nv,)))


@pytest.fixture(scope="module")
def floating():
    """A free base, spherical and planar joints: every chart that is not q + dq."""
    return sd.random_tree(3, joint_types=("spherical", "planar", "revolute"), seed=2, floating_base=True)


@pytest.fixture(scope="module")
def vector_space():
    """Joints whose configuration space is a vector space: d/dq is the tangent-space derivative."""
    return sd.random_tree(2, joint_types=("helical", "cylindrical"), seed=3)


def central(f, x, h=1e-5):
    """Central differences of ``f`` at ``x`` (columns: the coordinates of ``x``).  Truncation error
    h^2 |f'''| / 6 ~ 1e-10 and rounding eps |f| / h ~ 1e-11 relative to the values here: the
    comparisons below allow 1e-7."""
    cols = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)]
    return np.stack(cols, -1)


@pytest.mark.parametrize("road", ROADS)
def test_jit_and_vmap_equal_numpy(floating, road):
    q, v, a = state(floating, 1, (5,))
    f = function(sd.rnea, floating, backend=road)
    assert f.road() == road
    # (The replay road runs eagerly: XLA's compile time of its unrolled program is not what is tested.)
    jit = jax.jit if road != "replay" else (lambda g: g)
    jf = jit(f)
    assert rel_err(np.asarray(jf(q[0], v[0], a[0])), sd.rnea(floating, q[0], v[0], a[0])) < 1e-12
    want = sd.rnea(floating, q, v, a)
    assert rel_err(np.asarray(jit(jax.vmap(f))(q, v, a)), want) < 1e-12
    assert rel_err(np.asarray(f(q, v, a)), want) < 1e-12                          # leading batch axes
    # vmap over some arguments only, and two batch axes: each state equals its own call.
    got = np.asarray(jax.vmap(f, in_axes=(0, None, 0))(q, v[2], a))
    assert all(rel_err(got[k], np.asarray(jf(q[k], v[2], a[k]))) < 1e-12 for k in range(5))
    q2, v2, a2 = state(floating, 2, (2, 3))
    assert rel_err(np.asarray(jf(q2, v2, a2)), sd.rnea(floating, q2, v2, a2)) < 1e-12
    # A kernel with several outputs, and the derivative kernels themselves (replayed: see
    # test_replay_road_differentiates_with_jax, on a smaller program).
    if road == "replay":
        return
    got = function(sd.rnea_derivatives, floating, backend=road)(q, v, a)
    for g, w in zip(got, sd.rnea_derivatives(floating, q, v, a)):
        assert rel_err(np.asarray(g), w) < 1e-12


@pytest.mark.parametrize("name", DERIVATIVE_KERNELS)
def test_analytical_derivative_kernels(floating, name):
    """Each derivative kernel through the registry as a JAX function on the road CPU users get
    (``auto``: native) equals the NumPy function, one state and a batch under jit, with its optional
    arrays (f_ext, gravity).  One variant each (each builds a library): the references and the
    folded optional arrays are compared in tests/compile/test_compile_kernels.py and through CasADi."""
    m = floating
    fn = getattr(sd, name)
    rng = np.random.default_rng(3)
    for static, optional, args in derivative_kernel_cases(m, name, rng, statics=1, folded=False):
        f = function(fn, m, static=static, optional=optional)
        assert f.road() == "native"
        batch = {n: np.stack([x, arguments(m, name, rng, optional=True, static=static)[n]]) for n, x in args.items()}
        for xs in (args, batch):
            got, want = jax.jit(f)(*xs.values()), fn(m, **xs, **static)
            got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert rel_err(np.asarray(g), w) < bound(m, xs), (static, optional)


def test_auto_runs_native_on_cpu_and_static_arguments(floating):
    q, v, a = state(floating, 3, (16,))                # enough states for the vectorised batch entry
    f = function(sd.aba, floating)
    assert f.road() == "native"
    assert rel_err(np.asarray(jax.jit(jax.vmap(f))(q, v, a)), sd.aba(floating, q, v, a)) < 1e-12
    frame = floating.frame_names[-1] if floating.frame_names else floating.body_names[-1]
    J = function(sd.frame_jacobian, floating, static={"frame": frame, "reference": "world"})
    assert rel_err(np.asarray(J(q)), sd.frame_jacobian(floating, q, frame, "world")) < 1e-12
    # The replay level-scheduled emission (for large programs) computes the same values, under jit.
    P = trace_kernel(sd.rnea.__kernel__, floating)
    assert rel_err(np.asarray(jax.jit(program_function(P, "levels"))(q, v, a)[0]),
                   sd.rnea(floating, q, v, a)) < 1e-12


@pytest.mark.parametrize("road", ("native", "callback"))
def test_jacobians_equal_derivative_kernels_and_central_differences(floating, road):
    """On the native roads jacfwd/jacrev/grad come from rnea_derivatives / aba_derivatives.  The JAX
    input q lives in R^nq: its Jacobian columns are the derivative of f(normalize(q)) (a change of a
    quaternion's norm changes nothing), which central differences of the NumPy kernel measure; and
    moving q along the chart (integrate) maps them back to the tangent-space kernel."""
    m = floating
    q, v, a = state(m, 4)
    for fn, d in ((sd.rnea, sd.rnea_derivatives), (sd.aba, sd.aba_derivatives)):
        f = function(fn, m, backend=road)
        dq, dv, da = d(m, q, v, a)
        jq, jv, ja = (np.asarray(x) for x in jax.jit(jax.jacfwd(f, argnums=(0, 1, 2)))(q, v, a))
        assert rel_err(jv, dv) < 1e-12 and rel_err(ja, da) < 1e-12
        assert rel_err(np.asarray(jax.jacrev(f, argnums=1)(q, v, a)), dv) < 1e-12
        w = np.random.default_rng(5).normal(size=m.nv)
        g = jax.grad(lambda a_: (f(q, v, a_) * w).sum())(a)
        assert rel_err(np.asarray(g), w @ da) < 1e-12
        assert jq.shape == (m.nv, m.nq)
        assert rel_err(np.asarray(jax.jacrev(f)(q, v, a)), jq) < 1e-12            # reverse mode: the same map
        assert rel_err(jq, central(lambda x: fn(m, sd.normalize(m, x), v, a), q)) < 1e-7
        chart = central(lambda t: sd.integrate(m, q, t), np.zeros(m.nv))       # d integrate(q, t)/dt at 0
        assert rel_err(jq @ chart, dq) < 1e-7
        # vmapped Jacobians: one batch call of the derivative kernel
        Q, V, A = state(m, 6, (3,))
        JV = np.asarray(jax.vmap(jax.jacfwd(f, argnums=1))(Q, V, A))
        assert rel_err(JV, d(m, Q, V, A)[1]) < 1e-12


def test_kernels_without_analytic_derivatives_use_ad_on_their_program(vector_space, floating):
    m = vector_space
    q, v, _ = state(m, 7)
    f = function(sd.crba, m)
    assert f.road() == "native"
    # On a vector space the R^nq derivative is the tangent one: sd.derivatives is the reference.
    assert rel_err(np.asarray(jax.jacfwd(f)(q)), sd.derivatives(sd.crba, wrt="q")(m, q)) < 1e-12
    assert rel_err(np.asarray(jax.jacrev(f)(q)), central(lambda x: sd.crba(m, x), q)) < 1e-7
    # A plain function of kernels: JAX's gradient of the kinetic energy 1/2 v^T H v is H v and its
    # Hessian H (second order: the derivative kernel is differentiated in turn).
    def energy(model, q, v):
        return 0.5 * v @ sd.crba(model, q) @ v

    q, v, _ = state(m, 8, (3,))
    e = function(energy, m)
    want = np.array([energy(m, q[k], v[k]) for k in range(3)])
    assert rel_err(np.asarray(jax.jit(e)(q, v)), want) < 1e-12
    H = sd.crba(m, q[0])
    assert rel_err(np.asarray(jax.grad(e, argnums=1)(q[0], v[0])), H @ v[0]) < 1e-12
    assert rel_err(np.asarray(jax.hessian(e, argnums=1)(q[0], v[0])), H) < 1e-12
    with pytest.raises(TypeError, match="interop.jax.function: static= and optional= apply to registered kernels"):
        function(energy, floating, optional=("f_ext",))


def test_replay_road_differentiates_with_jax(vector_space):
    m = vector_space
    q, v, a = state(m, 2)
    f = function(sd.rnea, m, backend="replay")
    dq, dv, da = sd.rnea_derivatives(m, q, v, a)
    jq, jv, ja = jax.jacfwd(f, argnums=(0, 1, 2))(q, v, a)
    assert rel_err(np.asarray(jq), dq) < 1e-12 and rel_err(np.asarray(jv), dv) < 1e-12
    assert rel_err(np.asarray(ja), da) < 1e-12
    assert rel_err(np.asarray(jax.jacrev(function(sd.aba, m, backend="replay"))(q, v, a)),
                   sd.aba_derivatives(m, q, v, a)[0]) < 1e-10
    got = function(sd.rnea_derivatives, m, backend="replay")(q, v, a)
    for g, w in zip(got, (dq, dv, da)):
        assert rel_err(np.asarray(g), w) < 1e-12


def test_without_a_compiler_auto_replays(floating, monkeypatch, tmp_path):
    from sparsedyn.codegen import runtime
    monkeypatch.setenv("SPARSEDYN_CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(runtime, "_warned_no_compiler", set())      # the once-per-process warning, afresh
    q, v, a = state(floating, 9, (2,))
    f = function(sd.rnea, floating)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert f.road() == "replay"
        assert rel_err(np.asarray(f(q, v, a)), sd.rnea(floating, q, v, a)) < 1e-12
        with pytest.raises(RuntimeError, match="backend='native' needs a C compiler.*backend='replay'"):
            function(sd.rnea, floating, backend="native")(q, v, a)
    assert len([w for w in caught if issubclass(w.category, CompilerNotFoundWarning)]) == 1


def test_without_the_ffi_handler_auto_takes_the_callback(floating, monkeypatch):
    import sparsedyn.interop.jax as sdj
    monkeypatch.setattr(sdj, "_registered_target", [(None, "the XLA FFI headers are missing")])
    q, v, a = state(floating, 12, (3,))
    f = function(sd.aba, floating)
    assert f.road() == "callback"
    assert rel_err(np.asarray(jax.jit(jax.vmap(f))(q, v, a)), sd.aba(floating, q, v, a)) < 1e-12
    with pytest.raises(RuntimeError, match="needs the XLA FFI handler: the XLA FFI headers are missing.*backend='callback'"):
        function(sd.aba, floating, backend="native")(q, v, a)


def test_float32_auto_replays_and_native_asks_for_x64(floating):
    q, v, a = state(floating, 10)
    with jax.enable_x64(False):
        f = function(sd.rnea, floating)
        assert f.road() == "replay"
        assert np.asarray(f(q, v, a)).dtype == np.float32
        with pytest.raises(ValueError, match="jax_enable_x64"):
            function(sd.rnea, floating, backend="native")(q, v, a)


def test_bad_input_gives_clear_errors(floating):
    q, v, a = state(floating, 11)
    f = function(sd.rnea, floating)
    with pytest.raises(ValueError, match=r"rnea: v: expected shape \(\.\.\., %d\)" % floating.nv):
        f(q, v[:-1], a)
    with pytest.raises(ValueError, match="batch shapes do not broadcast"):
        f(np.stack([q, q]), np.stack([v, v, v]), a)
    with pytest.raises(TypeError, match="expected 3 arrays"):
        f(q, v)
    with pytest.raises(TypeError, match="v: expected a real array"):
        f(q, v + 1j, a)
    with pytest.raises(ValueError, match="backend: expected one of"):
        function(sd.rnea, floating, backend="gpu")
    bad_q = q.copy()
    bad_q[3:7] *= 1.1                                   # the free joint's quaternion, not unit
    with pytest.raises(ValueError, match="q: the quaternion of joint .* is not of unit norm"):
        f(bad_q, v, a)                                  # eager: the NumPy functions' errors
    with pytest.raises(ValueError, match="v: contains NaN"):
        f(q, np.full_like(v, np.nan), a)
    jf = jax.jit(f)                                     # compiled: the handler says the same
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"rnea: q: the quaternion of joint .* of state 0 is not"):
        jf(bad_q, v, a).block_until_ready()
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"rnea: a: contains NaN or infinite values \(state 1"):
        jax.vmap(jf)(np.stack([q, q]), np.stack([v, v]), np.stack([a, a * np.nan])).block_until_ready()


def test_traced_values_passed_to_a_kernel_point_to_the_bridge(floating):
    q, v, a = state(floating)
    with pytest.raises(TypeError, match=r"v: .*JAX traced value.*sparsedyn\.interop\.jax"):
        jax.jacfwd(lambda v_: sd.rnea(floating, q, v_, a))(v)
    with pytest.raises(TypeError, match="complex"):
        sd.rnea(floating, q, v + 1e-20j, a)


def test_the_first_build_is_announced_like_plain_calls(monkeypatch, tmp_path, capsys):
    """A JAX kernel built on first use (an empty build cache) says so in one line on stderr, as the
    plain calls' builds do; a second function of the same kernel loads it from the cache silently."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    model = sd.random_tree(3, seed=11)
    q, v, a = state(model, 1)
    f = function(sd.rnea, model)
    assert rel_err(np.asarray(jax.jit(f)(q, v, a)), sd.rnea(model, q, v, a)) < 1e-12
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("sparsedyn: building native")]
    assert lines == [f"sparsedyn: building native rnea for JAX for model {model.name!r} (nv={model.nv}); cached in "
                     f"{tmp_path}"], err
    g = function(sd.rnea, model)
    assert rel_err(np.asarray(jax.jit(g)(q, v, a)), sd.rnea(model, q, v, a)) < 1e-12
    assert "sparsedyn: building native" not in capsys.readouterr().err


def test_a_first_jit_builds_one_library_and_vmap_the_vectorised_one(monkeypatch, tmp_path):
    """The first jit of one state builds the kernel's single-state library alone (a user waits for one
    build); a jit of ``vmap`` (its mapped axis hidden from the function) builds the vectorised library
    and runs it: its results are the compiled model's batch call, bit for bit (the same vector code)."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    model = sd.random_tree(4, joint_types=("revolute", "spherical"), seed=12)
    q, v, a = state(model, 1, (20,))
    kernels = lambda: sorted(p.name for p in tmp_path.glob("sd_*.so") if not p.name.startswith("sd_xla"))  # noqa
    f = function(sd.rnea, model)
    assert rel_err(np.asarray(jax.jit(f)(q[0], v[0], a[0])), sd.rnea(model, q[0], v[0], a[0])) < 1e-12
    assert len(kernels()) == 1
    got = np.asarray(jax.jit(jax.vmap(f))(q, v, a))
    assert len(kernels()) == 2
    want = sd.compile(model).rnea(q, v, a)
    assert got.tobytes() == want.tobytes()


def test_kernels_of_the_pip_compiler_run_batches_on_the_handlers_threads(monkeypatch, tmp_path):
    """Kernels built without OpenMP (the pip compiler) under ``vmap``: the FFI handler splits the
    states over threads itself (four here, whatever this machine has), in chunks of whole vectors;
    the results are the compiled batch call's, which runs the same library on one thread, bit for bit."""
    from sparsedyn.codegen import build, runtime
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SPARSEDYN_CC", " ".join(build.pip_compiler()))
    monkeypatch.setattr(build, "_probed", {})
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 4)
    model = sd.random_tree(5, joint_types=("revolute", "spherical"), seed=13, floating_base=True)
    k = sd.compile(model)
    assert not k._compiler.openmp
    f = function(sd.aba, model)
    jax.jit(f)(*state(model, 2))                                   # builds the single-state library
    flops = k.kernels["aba"].flops["total"] if "aba" in k.kernels else None
    if flops is None:
        k.aba(*state(model, 2))
        flops = k.kernels["aba"].flops["total"]
    N = int(4 * 1e10 * 0.005 / flops) + 37                # four threads' worth (the handler's rule), a ragged end
    q, v, tau = state(model, 3, (N,))
    got = np.asarray(jax.jit(jax.vmap(f))(q, v, tau))
    k.threads = 1
    assert got.tobytes() == k.aba(q, v, tau).tobytes()
