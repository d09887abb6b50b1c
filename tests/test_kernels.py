"""The kernel registry (sparsedyn.kernels): the wrapper (the signature of every public function, the
model-first check, the backend setting and the dispatch to a registered native road); adding a
kernel touches its own file and nothing else; the compiler builds whatever an owner hands it."""

import importlib.util
import inspect
import textwrap

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_trees
from kernel_args import arguments, static_choices
from sparsedyn import kernels
from sparsedyn.codegen.cemit import emit_program, emit_unit
from sparsedyn.codegen.trace import trace
from sparsedyn.kernels import REGISTRY, Kernel, Owned


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_public_function_has_the_kernels_signature(name):
    public = getattr(sd, name)
    k = REGISTRY[name]
    assert inspect.signature(public) == inspect.signature(k.fn)
    assert public.__doc__ == k.fn.__doc__ and public.__name__ == k.fn.__name__ and public.__kernel__ is k


def _wrong_calls(k, model):
    """Calls of kernel ``k`` that do not fit its signature, as ``(what, args, kwargs)`` (the values
    are never looked at: binding fails first)."""
    params = list(k.signature.parameters.values())
    positional = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    required = [p for p in positional if p.default is p.empty]
    x = object()
    calls = [("an unknown keyword", (model,) + (x,) * (len(required) - 1), {"bogus_argument": 1}),
             ("one positional too many", (model,) + (x,) * len(positional), {}),
             ("nothing", (), {})]
    if len(required) > 1:
        calls.append(("the last required argument left out", (model,) + (x,) * (len(required) - 2), {}))
        calls.append(("an argument twice", (model, x), {required[1].name: x}))
        calls.append(("the model by name, the rest left out", (), {params[0].name: model}))
    return calls


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_wrong_call_gets_pythons_own_error_on_every_road(name):
    """A call that does not fit the signature raises the TypeError Python raises for the kernel
    function itself (the oracle: CPython's binding of ``k.fn``, which has the public signature),
    on the native road (the default) and on NumPy."""
    model = random_trees()[0]
    k = REGISTRY[name]
    public = getattr(sd, name)
    for backend in ("native", "numpy"):
        with sd.use_backend(backend):
            for what, args, kwargs in _wrong_calls(k, model):
                with pytest.raises(TypeError) as expected:
                    k.fn(*args, **kwargs)
                with pytest.raises(TypeError) as got:
                    public(*args, **kwargs)
                assert str(got.value) == str(expected.value), (backend, what)


#: The functions of a dof tree take a model or a parent array first (``model_or_lambda``).
TAKE_A_MODEL = sorted(n for n, k in REGISTRY.items() if next(iter(k.signature.parameters)) == "model")


def test_which_functions_take_a_model_first():
    assert "rnea" in TAKE_A_MODEL and "ltdl" not in TAKE_A_MODEL and len(TAKE_A_MODEL) > 30


@pytest.mark.parametrize("name", TAKE_A_MODEL)
def test_a_model_that_is_not_first_is_a_type_error(name, rng):
    """``sd.rnea(q, model, v, a)`` and its like: a TypeError saying the model comes first."""
    model = random_trees()[0]
    static = static_choices(model, name)[0]
    args = arguments(model, name, rng, static=static)
    for wrong in (next(iter(args.values())), None, "model"):
        with pytest.raises(TypeError, match=rf"^{name}: the model comes first, {name}\(model, .*got "
                                            rf"{type(wrong).__name__} as the first argument"):
            getattr(sd, name)(wrong, **args, **static)


def test_use_backend_setter_and_context_manager(monkeypatch):
    model = random_trees()[1]
    q = model.random_configuration(0)
    seen = []

    def hook(k, m, args, kwargs):
        seen.append(k.name)
        return "native"
    monkeypatch.setattr(kernels.dispatch, "_native", hook)
    before = sd.use_backend.current()
    try:
        sd.use_backend("native")
        assert sd.crba(model, q) == "native" and seen == ["crba"]
        with sd.use_backend("numpy") as b:
            assert b.name == "numpy" and sd.use_backend.current() == "numpy"
            H = sd.crba(model, q)
            assert np.array_equal(H, REGISTRY["crba"].fn(model, q)) and seen == ["crba"]
        assert sd.use_backend.current() == "native" and sd.crba(model, q) == "native"
        sd.use_backend("numpy")
        assert isinstance(sd.crba(model, q), np.ndarray) and seen == ["crba", "crba"]
    finally:
        sd.use_backend(before)
    with pytest.raises(ValueError, match="use_backend: expected one of 'native', 'numpy', got 'gpu'"):
        sd.use_backend("gpu")
    assert sd.use_backend.current() == before


def test_deterministic_flag_is_restored():
    was = sd.use_backend.is_deterministic()
    with sd.use_backend("native", deterministic=not was):
        assert sd.use_backend.is_deterministic() is (not was)
    assert sd.use_backend.is_deterministic() is was


TOY = '''
"""A toy kernel in a module of its own (a user's or a new algorithm's file)."""
import numpy as np

from sparsedyn.kernels import kernel


@kernel(inputs={"q": ("nq",), "v": ("nv",)}, outputs={"e": (1,)})
def toy_energy(model, q, v):
    """``0.5 |v|^2 + |q|^2`` (..., 1)."""
    return np.asarray(0.5 * (v * v).sum(-1) + (q * q).sum(-1))[..., None]
'''


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "toy_kernel_module.py"
    path.write_text(textwrap.dedent(TOY))
    spec = importlib.util.spec_from_file_location("toy_kernel_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        yield mod.toy_energy
    finally:
        REGISTRY.pop("toy_energy", None)        # the registry is global: leave it as found


def test_a_new_kernel_gets_c_derivatives_and_a_compiled_method(toy, compile_cache):
    model = sd.serial_chain(3)                  # revolute joints: the tangent space is q itself
    rng = np.random.default_rng(0)
    q, v = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    e = 0.5 * (v * v).sum(-1) + (q * q).sum(-1)             # by hand
    assert np.allclose(toy(model, q, v)[..., 0], e, rtol=1e-15, atol=0)

    src = emit_unit(emit_program(trace(model, "toy_energy"), "toy_energy", "single"))
    assert "sd_toy_energy" in src                            # C, from the declaration alone

    de_dq, de_dv = sd.derivatives(toy)(model, q[0], v[0])    # d/dq |q|^2 = 2 q, d/dv 0.5 |v|^2 = v
    assert np.allclose(de_dq, 2 * q[0][None, :], rtol=1e-14, atol=1e-15)
    assert np.allclose(de_dv, v[0][None, :], rtol=1e-14, atol=1e-15)

    k = sd.compile(model)
    assert np.allclose(k.toy_energy(q, v)[..., 0], e, rtol=4e-16 * 6, atol=0)      # a method, batched
    assert np.allclose(toy(k, q[1], v[1]), e[1], rtol=4e-16 * 6, atol=0)            # and f(compiled, ...)


class _Scaler:
    """A toy owner: its kernel scales a state by its own gain (a constant of the kernel)."""

    def __init__(self, model, gain):
        self.model, self.gain = model, float(gain)

    def __sparsedyn_kernels__(self):
        n = self.model.nv
        k = Kernel.of_arrays("scale", [("v", (n,))], [("w", (n,)), ("s", (1,))],
                             lambda v: (self.gain * v, (v * v).sum(-1, keepdims=True)))
        return Owned(self.model, (k,), f"scaler {self.gain!r}")


class _Wrapped(_Scaler):
    def __sparsedyn_compiled__(self, compiled):
        return ("wrapped", compiled)


def test_an_owner_hands_its_kernels_through_the_protocol(compile_cache):
    model = sd.serial_chain(4)
    v = np.random.default_rng(1).normal(size=(5, 4))
    k = sd.compile(_Scaler(model, 2.5))
    assert k.names == ("scale",)
    w, s = k.scale(v)
    assert np.array_equal(w, 2.5 * v) and np.allclose(s[..., 0], (v * v).sum(-1), rtol=1e-15, atol=0)
    out = (np.empty((5, 4)), np.empty((5, 1)))
    res = k.run("scale", v, out=out)
    assert res[0] is out[0] and res[1] is out[1] and np.array_equal(out[0], 2.5 * v)
    assert k.flops("scale")["mul"] == 4 + 4                    # 4 scalings, 4 squares
    tag, inner = sd.compile(_Wrapped(model, 1.0))
    assert tag == "wrapped" and np.array_equal(inner.scale(v)[0], v)
    with pytest.raises(TypeError, match="kernels= applies to models"):
        sd.compile(_Scaler(model, 1.0), kernels=("rnea",))


def test_layers_below_the_compiler_compile_an_owner_through_the_registry(compile_cache):
    """``kernels.compile_owner`` is ``sparsedyn.compile`` for the layers below the compiler (which
    registered itself): the same compiled kernels, the owner's own wrapper included."""
    model = sd.serial_chain(4)
    v = np.random.default_rng(2).normal(size=(3, 4))
    k = kernels.compile_owner(_Scaler(model, 1.5))
    assert k.names == ("scale",) and k.compiled
    w, s = k.scale(v)
    assert np.array_equal(w, 1.5 * v) and np.array_equal(w, sd.compile(_Scaler(model, 1.5)).scale(v)[0])
    tag, inner = kernels.compile_owner(_Wrapped(model, 1.0))
    assert tag == "wrapped" and np.array_equal(inner.scale(v)[0], v)


def _scale_in_worker(k, v):
    return type(k).__name__, k.compiled, k.scale(v)


def test_compiled_kernels_of_an_owner_pickle_into_a_fresh_process(compile_cache):
    """What ``sd.compile(owner)`` returns for an owner without ``__sparsedyn_compiled__`` (a
    :class:`~sparsedyn.codegen.owned.CompiledKernels`) crosses a process boundary (spawn: a fresh
    interpreter) as the owner's kernels compiled again there, the library loaded from the build cache:
    the same program, so the same numbers, bit for bit."""
    import concurrent.futures
    import multiprocessing
    import pickle
    model = sd.serial_chain(4)
    v = np.random.default_rng(3).normal(size=(5, 4))
    k = sd.compile(_Scaler(model, 2.5))
    k2 = pickle.loads(pickle.dumps(k))
    assert type(k2) is type(k) and k2.names == k.names and k2.owner.gain == 2.5
    ref = k.scale(v)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        name, compiled, out = pool.submit(_scale_in_worker, k, v).result()
    assert name == "CompiledKernels" and compiled == k.compiled
    assert all(np.array_equal(x, r) for x, r in zip(out, ref))


class _Late:
    """A toy owner that hands its kernels at run time (as a constraint set does, per partition)."""

    def __init__(self, model):
        self.model = model

    def __sparsedyn_kernels__(self):
        return Owned(self.model, ())

    def __sparsedyn_compiled__(self, compiled):
        return compiled


def test_an_owner_hands_kernels_at_run_time(compile_cache):
    """``CompiledKernels.add``: a kernel traced when handed (an untraceable one says so then), run on one
    state (the C fast path) or a batch, with the NumPy functions' checks of its inputs (a configuration's
    unit quaternions, finite values) and their errors."""
    from sparsedyn.symbolic.trace import UntraceableError
    model = sd.random_tree(3, floating_base=True, seed=1)
    nq, nv = model.nq, model.nv
    ks = sd.compile(_Late(model))
    assert ks.names == () and ks.compiled
    k = Kernel.of_arrays("speed_and_height", [("q", (nq,)), ("v", (nv,))], [("s", (1,)), ("z", (1,))],
                         lambda q, v: ((v * v).sum(-1, keepdims=True), q[..., 2:3] * 2.0))
    f = ks.add(k)
    assert ks.add(k) is f                                    # handed twice: the same kernel
    rng = np.random.default_rng(2)
    q = np.stack([model.random_configuration(rng) for _ in range(6)])
    v = rng.normal(size=(6, nv))
    s, z = f(q[0], v[0])                                     # one state
    assert np.allclose(s, [v[0] @ v[0]], rtol=nv * np.finfo(float).eps, atol=0) and z[0] == 2.0 * q[0, 2]
    s, z = f(q, v)                                           # a batch
    assert s.shape == (6, 1) and np.allclose(s[:, 0], (v * v).sum(-1), rtol=nv * np.finfo(float).eps, atol=0)
    assert np.array_equal(z[:, 0], 2.0 * q[:, 2])
    bad = q[0].copy()
    bad[3:7] = [0.1, 0.2, 0.3, 0.5]
    with pytest.raises(ValueError, match=r"q: the quaternion of joint .* is not of unit norm"):
        f(bad, v[0])
    bad = v[0].copy()
    bad[1] = np.nan
    with pytest.raises(ValueError, match="v: contains NaN"):
        f(q[0], bad)
    with pytest.raises(UntraceableError, match="np.linalg"):
        ks.add(Kernel.of_arrays("solve", [("v", (nv,))], [("x", (nv,))], lambda v: np.linalg.solve(np.eye(nv), v)))


@pytest.fixture
def compile_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path / "cache"))


def test_an_owner_without_a_compiler_runs_its_numpy_kernels(tmp_path, monkeypatch, compile_cache):
    import warnings
    from sparsedyn.codegen import CompilerNotFoundWarning
    monkeypatch.setenv("SPARSEDYN_CC", str(tmp_path / "no-such-cc"))
    model = sd.serial_chain(2)
    v = np.array([[1.0, -2.0], [0.5, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompilerNotFoundWarning)
        k = sd.compile(_Scaler(model, -1.5))
    assert not k.compiled
    w, s = k.scale(v)
    assert np.array_equal(w, -1.5 * v) and np.array_equal(s[..., 0], [5.0, 9.25])


def test_the_batch_pool_is_one_for_the_process_and_grows_when_asked(monkeypatch):
    """``batch_pool``: the same pool for every caller while it has the threads asked (at least the CPUs'),
    a larger one where more are asked; its threads run the calls given (another thread than the caller's)."""
    import threading
    from sparsedyn.kernels import threads
    monkeypatch.setattr(threads, "_pool", None)
    pool = threads.batch_pool(1)
    assert pool._max_workers >= 1 and threads.batch_pool(1) is pool
    more = threads.batch_pool(pool._max_workers + 2)
    assert more is not pool and more._max_workers == pool._max_workers + 2 and threads.batch_pool(2) is more
    assert more.submit(threading.get_ident).result() != threading.get_ident()
    more.shutdown()
