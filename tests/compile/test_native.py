"""Plain calls on native code (sparsedyn.codegen.native): every registered function called as
``sd.f(model, ...)`` runs the model's compiled kernel and equals the NumPy function; builds are
shared per model fingerprint and between threads; a long build answers on NumPy meanwhile; no
compiler means one warning and NumPy answers; traced inputs still go through NumPy.

The rest of the suite pins the NumPy reference (tests/conftest.py); the tests here select the
native backend explicitly.  Tolerances as in test_compile_kernels.py: the compiled program does
the NumPy kernel's operations in the same order except NumPy's ``@`` summations, so results
agree to the rounding bound of the kernel times the conditioning of ``H``.
"""

import dataclasses
import gc
import pickle
import subprocess
import sys
import threading
import time
import warnings
import weakref

import numpy as np
import pytest

import sparsedyn as sd
from conftest import constant_subspace_types, quaternion_blocks, random_trees, rel_err, rounding_bound
from erd import load_pair, robot_path
from kernel_args import arguments, static_choices
from sdcompile_helpers import compile_cache, subprocess_env  # noqa: F401  (fixture)
from sparsedyn.codegen import native, runtime
from sparsedyn.codegen.trace import variant
from sparsedyn.kernels import REGISTRY

pytestmark = pytest.mark.usefixtures("compile_cache")

#: On talos_reduced (floating, 38 dof), whose cold builds would add minutes to the suite: the
#: functions of the benchmarks beside Pinocchio; every function runs on the random tree and panda.
TALOS = ("rnea", "aba", "crba", "minv", "forward_kinematics", "frame_jacobian", "center_of_mass",
         "nonlinear_effects", "generalized_gravity", "frame_placements", "integrate", "difference")


@pytest.fixture
def native_backend():
    """Plain calls on the native backend, waiting for their builds (deterministic)."""
    with sd.use_backend("native", deterministic=True):
        yield


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _bound(model, args):
    q = args.get("q", args.get("q0"))
    H = sd.crba(model, q) if q is not None else next(
        np.asarray(x) for x in args.values() if np.ndim(x) >= 2 and np.shape(x)[-1] == np.shape(x)[-2])
    kappa = float(np.max(np.linalg.cond(H))) if H.shape[-1] else 1.0
    return rounding_bound(model.nv + model.nbodies, kappa)


def _robot(name):
    # The floating tree of every joint type and panda are the models test_compile_kernels.py compiles
    # every kernel of: in a run of the suite their libraries come from the session's build cache.
    if name == "random-tree":          # every kernel: the joint types every layer takes (constant S)
        return random_trees(constant_subspace_types())[2]
    return load_pair(name, name == "talos_reduced")[0]


@pytest.mark.parametrize("robot", ["random-tree", "panda", "talos_reduced"])
def test_plain_calls_equal_numpy_for_every_kernel(robot, native_backend, rng):
    """Every registered kernel (on talos_reduced: those of :data:`TALOS`), every static argument,
    one state and a batch."""
    model = _robot(robot)
    k = sd.compile(model)
    for name in sorted(REGISTRY):
        if robot == "talos_reduced" and name not in TALOS:
            continue
        public, fn = getattr(sd, name), REGISTRY[name].fn
        for static in static_choices(model, name):
            for batch in ((), (3,)):
                args = arguments(model, name, rng, batch=batch, static=static)
                ref = fn(model, **args, **static)
                got = public(model, **args, **static)
                for g, r in zip(_as_tuple(got), _as_tuple(ref)):
                    assert isinstance(g, np.ndarray) and g.dtype == np.float64 and g.shape == r.shape
                    assert rel_err(g, r) < _bound(model, args), (name, static, batch)
            assert variant(name, static).name in k.kernels, (name, static)    # it ran native
    # the vectorised batch runtime (at least two vectors of states)
    q = np.stack([model.random_configuration(rng) for _ in range(4 * max(k.lanes, 1))])
    v, a = rng.normal(size=(2, len(q), model.nv))
    args = {"q": q, "v": v, "a": a}
    assert rel_err(sd.rnea(model, q, v, a), REGISTRY["rnea"].fn(model, q, v, a)) < _bound(model, args)
    assert any(kind == "batch" for _, kind in k._libs)


def test_one_compiled_model_per_fingerprint(native_backend):
    """A model rebuilt equal shares the compiled object of plain calls (what sd.compile returns);
    a changed model gets its own."""
    m1, m2 = random_trees()[0], random_trees()[0]
    assert m1 is not m2
    q = m1.random_configuration(0)
    sd.generalized_gravity(m1, q)
    k = sd.compile(m1)
    assert sd.compile(m2) is k and isinstance(k, sd.CompiledModel)
    heavier = dataclasses.replace(m1, inertia=m1.inertia * 2.0)
    assert sd.compile(heavier) is not k
    g1, g2 = sd.generalized_gravity(m1, q), sd.generalized_gravity(heavier, q)
    assert rel_err(g2, 2.0 * g1) < rounding_bound(m1.nv + m1.nbodies)       # gravity is linear in mass


def test_native_kernels_are_held_beside_the_model_not_on_it(native_backend, rng):
    """The plain calls' native callables live in the registry's table, not on the frozen Model:
    the model's attributes and its pickle are the same before and after native calls, and a model
    that dies leaves no entry behind (nor is it kept alive by the table)."""
    model = random_trees()[0]
    q, v, a = (model.random_configuration(rng), rng.standard_normal(model.nv), rng.standard_normal(model.nv))
    before = dict(vars(model))
    pickled = pickle.dumps(model)
    tau = sd.rnea(model, list(q), tuple(v), a)
    assert rel_err(tau, REGISTRY["rnea"].fn(model, q, v, a)) < _bound(model, {"q": q})
    assert vars(model).keys() == before.keys() and all(vars(model)[n] is x for n, x in before.items())
    assert pickle.dumps(model) == pickled
    calls = sd.kernels.native_calls(model)
    assert calls is not None and callable(calls["rnea"])
    key, alive = id(model), weakref.ref(model)
    del model, calls
    gc.collect()
    assert alive() is None and key not in sd.kernels.dispatch._calls


def test_bad_input_keeps_its_errors(native_backend, rng):
    """Shapes, NaN, non-unit quaternions and unknown frames: the NumPy function's errors, on a
    model whose native kernels are ready."""
    model = random_trees()[2]
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    sd.rnea(model, q, v, v)
    sd.frame_jacobian(model, q, model.frames[-1].name)
    bad_quat = q.copy()
    bad_quat[3:7] *= 1.5                        # the free joint's quaternion, not of unit norm
    nan = v.copy()
    nan[2] = np.nan
    cases = [("rnea", (q[:-1], v, v), {}), ("rnea", (q, nan, v), {}), ("rnea", (bad_quat, v, v), {}),
             ("rnea", (q, v, v[None, :2]), {}), ("frame_jacobian", (q, "no_such_frame"), {}),
             ("frame_jacobian", (q, model.frames[-1].name), {"reference": "sideways"})]
    for name, args, kw in cases:
        with pytest.raises(Exception) as ref:
            REGISTRY[name].fn(model, *args, **kw)
        assert isinstance(ref.value, (ValueError, TypeError, KeyError))
        with pytest.raises(type(ref.value)) as got:
            getattr(sd, name)(model, *args, **kw)
        # the same kind of error about the same argument (the wording of a shape error may differ)
        assert str(got.value).split(":")[0] == str(ref.value).split(":")[0], (str(got.value), str(ref.value))


def test_normalize_takes_non_unit_quaternions_natively(native_backend, rng):
    """``normalize`` is for quaternions off the unit sphere: on the native road it takes them (one
    state, a list, a small batch and a vectorised batch) and returns each quaternion divided by its
    norm, the other coordinates unchanged (by hand), from its compiled kernel."""
    model = random_trees(constant_subspace_types())[2]    # a free joint and spherical joints
    k = sd.compile(model)
    quats = quaternion_blocks(model)
    assert len(quats) >= 2
    n = 4 * max(k.lanes, 1)
    q = np.stack([model.random_configuration(rng) for _ in range(n)])
    for j, idx in enumerate(quats):
        q[:, idx] *= (1.01 + 0.5 * j) * rng.uniform(0.5, 2.0, size=(n, 1))
    expected = q.copy()
    for idx in quats:
        expected[:, idx] /= np.linalg.norm(q[:, idx], axis=-1, keepdims=True)
    for x, ref in ((q[0], expected[0]), (list(q[1]), expected[1]), (q[:3], expected[:3]), (q, expected)):
        got = sd.normalize(model, x)
        assert got.shape == ref.shape and rel_err(got, ref) < rounding_bound(4)
    assert variant("normalize").name in k.kernels                        # it ran native
    bad = q[0].copy()
    bad[quats[0]] = 0.0
    with pytest.raises(ValueError, match="is zero"):
        sd.normalize(model, bad)
    bad[quats[0]] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sd.normalize(model, bad)


def test_traced_inputs_go_through_numpy(native_backend, rng):
    """A user kernel calling plain functions is traced through them (object arrays take the NumPy
    path even when the native kernels are ready), and so is a kernel that calls other kernels."""
    model = random_trees()[1]
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    sd.rnea(model, q, v, a)
    sd.center_of_mass_velocity(model, q, v)

    def power(model, q, v, a):
        return sd.rnea(model, q, v, a) @ v

    k = sd.compile(model, (power,))
    assert rel_err(k.power(q, v, a), REGISTRY["rnea"].fn(model, q, v, a) @ v) < rounding_bound(model.nv)
    from sparsedyn.interop.casadi import function
    f = function(sd.center_of_mass_acceleration, model)
    ref = REGISTRY["center_of_mass_acceleration"].fn(model, q, v, a)
    for g, r in zip(f(q, v, a), ref):
        assert rel_err(np.asarray(g).reshape(r.shape), r) < rounding_bound(model.nv + model.nbodies)


def test_threads_racing_build_once(native_backend, tmp_path, monkeypatch, rng):
    """Eight threads making the first plain call of a fresh model together: one build, eight
    equal answers."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    builds = []
    real = runtime._build_kernels

    def counting(model, names, *args, **kwargs):
        builds.append([getattr(n, "name", n) for n in names])
        return real(model, names, *args, **kwargs)
    monkeypatch.setattr(runtime, "_build_kernels", counting)
    model = sd.random_tree(6, joint_types="all", seed=4242)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    start, results = threading.Barrier(8), [None] * 8

    def work(i):
        start.wait()
        results[i] = sd.nonlinear_effects(model, q, v)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == [["nonlinear_effects"]]
    assert all(np.array_equal(r, results[0]) for r in results)
    assert rel_err(results[0], REGISTRY["nonlinear_effects"].fn(model, q, v)) < rounding_bound(model.nv * 2)


def _wait_built(k, name, timeout=300.0):
    t0 = time.monotonic()
    while name not in k.kernels:
        assert time.monotonic() - t0 < timeout, f"{name} was not built in {timeout} s"
        time.sleep(0.05)


def test_long_build_answers_on_numpy_then_native(tmp_path, monkeypatch, capsys, rng):
    """A build longer than the moment (here: zero seconds) goes on in the background: the call
    answers with the NumPy function's result, one line says so, and once built the native kernel
    answers; in deterministic mode the call waits for the build instead."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "MOMENT", 0.0)
    model = sd.random_tree(7, joint_types="all", seed=777)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=(2, model.nv))
    ref = REGISTRY["aba"].fn(model, q, v, tau)
    with sd.use_backend("native", deterministic=False):
        k = sd.compile(model)
        capsys.readouterr()
        first = sd.aba(model, q, v, tau)
        assert np.array_equal(first, ref)                  # the NumPy function's answer, bit for bit
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "sparsedyn: building native aba for model" in err and "background" in err
        _wait_built(k, "aba")
        assert np.array_equal(sd.aba(model, q, v, tau), k.aba(q, v, tau))     # the native one
        assert capsys.readouterr().err == ""
    with sd.use_backend("native", deterministic=True):
        got = sd.crba(model, q)
        assert "crba" in k.kernels and np.array_equal(got, k.crba(q))
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "sparsedyn: building native crba for model" in err and "background" not in err


def test_numpy_answers_write_into_out_as_the_compiled_methods_do(monkeypatch, rng):
    """A plain callable answered by its NumPy function (its kernel not built yet, or inputs the native
    path does not take) writes into an ``out=`` given as the compiled method does: the road that lays a
    step's buffers out once calls it so while a build runs in the background."""
    model = sd.load_urdf(robot_path("ur5"), geometry=True)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    ref = REGISTRY["body_velocities"].fn(model, q, v)
    out = np.full_like(ref, np.nan)
    assert native._reference(REGISTRY["body_velocities"].fn, model, (q, v), {"out": out}) is out
    assert np.array_equal(out, ref)
    refs = REGISTRY["geometry_placements"].fn(model, q, "visual")
    assert len(refs[0]) > 0
    outs = tuple(np.full_like(x, np.nan) for x in refs)
    got = native._reference(REGISTRY["geometry_placements"].fn, model, (q, "visual"), {"out": outs})
    assert got is outs and all(np.array_equal(a, b) for a, b in zip(outs, refs))


def test_a_compiled_models_later_builds_report_themselves(tmp_path, monkeypatch, rng):
    """``sd.compile(model)`` builds each function at its first call and the batch form at the first
    batch call: every such build reports itself through ``sd.compile``'s progress display (nothing is
    built silently), and a call that needs nothing new reports nothing."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))         # a fresh cache: real builds
    model = sd.random_tree(5, floating_base=True, seed=4242)
    msgs = []
    k = sd.compile(model, progress=msgs.append)
    q = np.stack([model.random_configuration(rng) for _ in range(2)])
    steps = []

    def call(q, v):
        n = len(msgs)
        k.rnea(q, v, v)
        steps.append(msgs[n:])
    call(q[0], rng.normal(size=model.nv))
    # A batch takes the vectorised form from two vectors of states on (the lanes of this CPU's
    # vectors, known once the first library is built): enough states for it on any CPU.
    q = np.stack([model.random_configuration(rng) for _ in range(2 * max(k.lanes, 1))])
    v = rng.normal(size=(len(q), model.nv))
    for args in ((q, v), (q[1], v[1]), (q, v)):
        call(*args)
    assert any("single kernels ready" in m and "(built)" in m for m in steps[0])
    assert any(m.startswith("compiling") and "(batch" in m for m in steps[1])
    assert any("batch kernels ready" in m and "(built)" in m for m in steps[1])
    assert steps[2] == steps[3] == []
    assert k.built == {"rnea-single": True, "rnea-batch": True}


def test_numpy_backend_builds_nothing(monkeypatch, rng):
    model = sd.random_tree(5, seed=99)
    q = model.random_configuration(rng)
    calls = []
    monkeypatch.setattr(native, "plain_call", lambda *a: calls.append(a))
    monkeypatch.setattr(sd.kernels.dispatch, "_native", lambda *a: calls.append(a))
    with sd.use_backend("numpy"):
        assert sd.use_backend.current() == "numpy"
        assert np.array_equal(sd.crba(model, q), REGISTRY["crba"].fn(model, q))
    assert calls == [] and sd.kernels.native_calls(model) is None


_NO_COMPILER = """
import warnings, numpy as np, sparsedyn as sd
from sparsedyn.kernels import REGISTRY
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as w:
    for seed in (1, 2):
        m = sd.random_tree(5, joint_types="all", seed=seed)
        q = m.random_configuration(0); v = np.ones(m.nv)
        for name in ("rnea", "crba", "aba"):
            args = (q, v, v) if name != "crba" else (q,)
            assert np.array_equal(getattr(sd, name)(m, *args), REGISTRY[name].fn(m, *args)), name
            assert np.array_equal(getattr(sd, name)(m, *args), REGISTRY[name].fn(m, *args)), name
kinds = [x.category.__name__ for x in w]
print(kinds.count("CompilerNotFoundWarning"), len(kinds))
"""


def test_without_compiler_one_warning_and_numpy_answers(tmp_path):
    env = subprocess_env(tmp_path)
    env.update(SPARSEDYN_CC=str(tmp_path / "no-such-compiler"), SPARSEDYN_BACKEND="native")
    r = subprocess.run([sys.executable, "-c", _NO_COMPILER], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1"]


_ENDS_DURING_A_BUILD = """
import sys, numpy as np, sparsedyn as sd
model = sd.random_tree(7, joint_types="all", seed=777)
rng = np.random.default_rng(0)
q = model.random_configuration(rng)
v, tau = rng.normal(size=(2, model.nv))
if sys.argv[1] == "first":
    sd.compile(model)                  # (the compiler's setup done: the plain call below starts a build)
    ref = sd.aba(model, q, v, tau)     # answered on NumPy, the build in the background; the program ends
elif sys.argv[1] == "fork":
    import multiprocessing
    sd.compile(model)
    ref = sd.aba(model, q, v, tau)     # the build in the background, then a forked worker that ends
    child = multiprocessing.get_context("fork").Process(target=print, args=("child",), daemon=True)
    child.start()
    child.join(120)
    print("child exit", child.exitcode)
else:
    msgs = []
    sd.compile(model, progress=msgs.append).aba(q, v, tau)
    print([m for m in msgs if "tracing" in m])
"""


def test_a_build_running_when_the_program_ends_is_cached_for_the_next_run(tmp_path):
    """A plain call's build in the background is finished before the process exits (it was lost:
    a daemon thread, then thread pools that refuse work at exit), so the next run loads it."""
    env = dict(subprocess_env(tmp_path), SPARSEDYN_BUILD_WAIT="0", SPARSEDYN_BACKEND="native")
    env.pop("SPARSEDYN_DETERMINISTIC", None)
    run = [sys.executable, "-c", _ENDS_DURING_A_BUILD]
    r = subprocess.run(run + ["first"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "finishing the build of native aba for model 'random_tree7' before exiting" in r.stderr
    r = subprocess.run(run + ["second"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr)


def test_a_forked_worker_ending_during_a_build_does_not_wait_for_it(tmp_path):
    """A ``multiprocessing`` worker forked while a build runs (``sphinx -j``'s readers) runs the exit hooks
    when it ends; the build's thread is not in it, so it ends at once, and the parent still finishes
    the build before it exits."""
    env = dict(subprocess_env(tmp_path), SPARSEDYN_BUILD_WAIT="0", SPARSEDYN_BACKEND="native")
    env.pop("SPARSEDYN_DETERMINISTIC", None)
    r = subprocess.run([sys.executable, "-c", _ENDS_DURING_A_BUILD, "fork"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[-2:] == ["child exit 0", ""], (r.stdout, r.stderr)
    assert "finishing the build of native aba for model 'random_tree7' before exiting" in r.stderr


def test_backend_from_the_environment(tmp_path):
    code = "import sparsedyn as sd; print(sd.use_backend.current())"
    for value, want in (("numpy", "numpy"), ("", "native"), ("NATIVE", "native")):
        env = dict(subprocess_env(tmp_path), SPARSEDYN_BACKEND=value)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.stdout.strip() == want, r.stderr
    env = dict(subprocess_env(tmp_path), SPARSEDYN_BACKEND="fortran")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "SPARSEDYN_BACKEND='fortran': expected one of native, numpy" in r.stderr


def test_singular_model_keeps_its_error(native_backend, rng):
    """A massless leaf makes the mass matrix singular at every state: aba and minv still raise
    SingularInertiaError naming the joint (the compiled kernels would return inf/nan), while the
    kernels that do not divide by its pivots run native."""
    import sparsedyn.model.spatial as sp
    b = sd.ModelBuilder("leafy")
    b.add_body("l0", None, sd.make_joint("revolute", (0, 1, 0)), sp.xlt(np.zeros(3)), mass=1.0, com=[0, 0, 0.2],
               rot_inertia=0.01 * np.eye(3))
    b.add_body("leaf", "l0", sd.make_joint("revolute", (0, 0, 1)), sp.xlt(np.array([0.0, 0.0, 0.5])))
    model = b.build()
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    for _ in range(2):
        with pytest.raises(sd.SingularInertiaError, match="joint 'leaf'"):
            sd.aba(model, q, v, v)
        with pytest.raises(sd.SingularInertiaError, match="joint 'leaf'"):
            sd.minv(model, q)
        assert rel_err(sd.rnea(model, q, v, v), REGISTRY["rnea"].fn(model, q, v, v)) < rounding_bound(4)
    assert "rnea" in sd.compile(model).kernels


def test_a_model_first_met_without_compiler_goes_native_with_one(native_backend, monkeypatch, tmp_path, rng):
    """sd.compile(model) while SPARSEDYN_CC names no compiler gives the NumPy fallback; once the
    compiler is back, plain calls and sd.compile of the same model are native."""
    model = sd.random_tree(4, joint_types="all", seed=31337)
    q = model.random_configuration(rng)
    with monkeypatch.context() as mp:
        mp.setenv("SPARSEDYN_CC", str(tmp_path / "no-such-compiler"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.codegen.CompilerNotFoundWarning)    # once per process
            assert not sd.compile(model).compiled
    sd.crba(model, q)
    k = sd.compile(model)
    assert k.compiled and "crba" in k.kernels
