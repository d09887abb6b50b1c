"""The pip compiler (``zig cc`` of the ``ziglang`` package) where no system compiler is found, and
build caches that travel between machines of one platform and CPU level.

A child process with ``cc``, ``gcc`` and ``clang`` hidden from its ``PATH`` and ``CC`` unset runs
plain calls natively with the pip compiler, in a fresh cache, and its results equal the system
compiler's bit for bit: both compilers build the same C with ``-O1 -ffp-contract=off`` (no fused
multiply-add, no reassociation), call the same libm / libmvec for sin and cos, and neither
vectorises a reduction at ``-O1`` without ``-ffast-math``, so every operation rounds alike.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from sdcompile_helpers import compile_cache, subprocess_env  # noqa: F401  (fixture)
from sparsedyn.codegen import build, toolchain

pytestmark = pytest.mark.usefixtures("compile_cache")

#: Kernels with every kind of operation the compiler emits: trigonometry (joint transforms),
#: square roots and divisions (the articulated-body pivots), long sums (the mass matrix).
KERNELS = ("rnea", "aba", "crba", "minv", "rnea_derivatives", "forward_kinematics")

CALLS = textwrap.dedent("""
    import numpy as np, sparsedyn as sd

    def model(name):
        if name in sd.model.builders.BUILTIN_MODELS:          # what `sparsedyn build NAME` builds
            return sd.model.builders.builtin(name)
        # conftest.random_trees()[2]: every joint type, floating base (quaternions)
        return sd.random_tree(10, branching=1.5, joint_types="all", seed=3, floating_base=True)

    def arguments(m, name, batch):
        rng = np.random.default_rng(7)
        n = 20 if batch else 1          # 20: at least two vectors of 8 lanes (the vectorised entry)
        q = np.stack([m.random_configuration(rng) for _ in range(n)])
        v, a = rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))
        args = {"crba": (q,), "minv": (q,), "forward_kinematics": (q,)}.get(name, (q, v, a))
        # one state as plain Python lists (the road of a user's first call), a batch as arrays
        return args if batch else tuple(x[0].tolist() for x in args)

    def results(m, kernels):
        out = {}
        with sd.use_backend("native", deterministic=True):
            for name in kernels:
                for batch in (False, True):
                    r = getattr(sd, name)(m, *arguments(m, name, batch))
                    for j, x in enumerate(r if isinstance(r, tuple) else (r,)):
                        out[f"{name}-{'batch' if batch else 'single'}-{j}"] = np.asarray(x)
        return out
""")

CHILD = CALLS + textwrap.dedent("""
    import json, os, shutil, sys, warnings
    warnings.simplefilter("error")              # no CompilerNotFoundWarning (nor anything else)
    from sparsedyn.codegen import build
    hidden = {c: shutil.which(c) for c in ("cc", "gcc", "clang")}
    m = model(sys.argv[3])
    out = results(m, sys.argv[2].split(","))
    np.savez(sys.argv[1], **out)
    cm = sd.compile(m)
    print(json.dumps({"hidden": hidden, "CC": os.environ.get("CC"), "compiled": cm.compiled, "built": cm.built,
                      "argv": cm._compiler.argv if cm.compiled else None,
                      "pip": build.pip_compiler(), "openmp": cm._compiler.openmp if cm.compiled else None,
                      "ziglang": __import__("importlib.metadata").metadata.version("ziglang")}))
""")


def _without_compilers(cache):
    """The environment of a child process on a machine without a C compiler: ``PATH`` an empty
    directory (the child is started by the interpreter's absolute path), ``CC``, ``CXX`` and their
    sparsedyn counterparts unset, ``cache`` its build cache; ``HOME`` a fresh directory (where zig
    would keep its own cache, ``~/.cache/zig``, were it not pointed into the build cache)."""
    env = subprocess_env(cache)
    for var in ("CC", "CXX", "SPARSEDYN_CC", "SPARSEDYN_CXX", "SPARSEDYN_CFLAGS", "XDG_CACHE_HOME",
                "ZIG_GLOBAL_CACHE_DIR", "ZIG_LOCAL_CACHE_DIR"):
        env.pop(var, None)
    empty = Path(cache).parent / "empty-path"
    empty.mkdir(exist_ok=True)
    env["PATH"] = str(empty)
    home = Path(cache).parent / "home"
    home.mkdir(exist_ok=True)
    env["HOME"] = str(home)
    return env


def _zig_files(cache):
    """The files zig left: in the child's home (``~/.cache``) and in the build cache ``cache``."""
    home = Path(cache).parent / "home"
    return sorted(p for p in home.rglob("*")), sorted(p for p in Path(cache).rglob("*") if p.is_file()
                                                       and any(q.name.startswith("zig") for q in p.parents))


def _run_child(tmp_path, cache, kernels, model="floating-tree"):
    res = tmp_path / "results.npz"
    r = subprocess.run([sys.executable, "-c", CHILD, str(res), ",".join(kernels), model], env=_without_compilers(cache),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    info = json.loads(r.stdout.strip().splitlines()[-1])
    with np.load(res) as f:
        return info, {k: f[k] for k in f.files}, r.stderr


def _system_results(kernels, model="floating-tree"):
    ns = {}
    exec(CALLS, ns)
    return ns["results"](ns["model"](model), kernels)


def test_pip_compiler_is_installed_with_the_project():
    """The pip compiler comes with sparsedyn's dependencies (pyproject.toml): CI starts from them."""
    argv = build.pip_compiler()
    assert argv is not None and Path(argv[0]).is_file() and argv[1] == "cc"
    try:
        import tomllib
    except ImportError:                     # Python 3.10
        import tomli as tomllib
    deps = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("ziglang") for d in deps["dependencies"])


def test_without_a_system_compiler_the_pip_compiler_builds_native_kernels_equal_to_the_systems(tmp_path):
    info, zig, err = _run_child(tmp_path, tmp_path / "cache", KERNELS)
    # The child saw no system compiler and built with the pip compiler, without a warning.
    assert info["hidden"] == {"cc": None, "gcc": None, "clang": None} and info["CC"] is None
    assert info["compiled"] and info["argv"] == info["pip"] and info["argv"] == build.pip_compiler()
    # Native answered: deterministic mode waits for each build (no NumPy answer meanwhile), and every
    # kernel's single-state and batch libraries were built by the child in its fresh cache.
    assert info["built"] == {f"{k}-{v}": True for k in KERNELS for v in ("single", "batch")}
    assert "with zig cc" in err and "pip compiler (ziglang)" in err
    # The same C, the same libm: bit for bit what the system compiler's kernels give.
    ours = _system_results(KERNELS)
    assert sorted(ours) == sorted(zig)
    differ = [k for k in ours if ours[k].shape != zig[k].shape or ours[k].tobytes() != zig[k].tobytes()]
    assert not differ, f"{build.describe(build.find_compiler())} and the pip compiler differ on {differ}"
    # zig kept its cache inside the build cache, not in the user's home, and kept no copy of what
    # it compiled (no object, no library: its local cache went with each build's temporary
    # directory), only the C library's stubs of its first link.
    home, kept = _zig_files(tmp_path / "cache")
    assert home == [] and kept, (home, kept)
    assert {p.relative_to(tmp_path / "cache").parts[0] for p in kept} == {f"zig-{info['ziglang']}"}
    assert not [p for p in kept if p.suffix == ".o" and p.name.startswith("u") or p.name in ("lib.so", "mod.so")]
    assert {p.name for p in kept if p.suffix == ".so" or ".so." in p.name} <= {
        "libc.so.6", "libm.so.6", "libmvec.so.1", "libld.so.2", "libresolv.so.2", "libpthread.so.0", "libdl.so.2",
        "librt.so.1", "libutil.so.1"}


def test_a_cache_travels_to_a_machine_without_a_compiler(tmp_path, monkeypatch, capsys):
    """A cache prebuilt by ``sparsedyn build`` with the system compiler is used as it is by a process
    that has only the pip compiler (same platform and CPU): nothing is rebuilt, and the results are
    the system compiler's, bit for bit."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path / "elsewhere"))     # restored after the test
    from sparsedyn.cli import main
    assert main(["build", "tree15", "--kernels", "rnea", "crba", "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "compiler: " + build.describe(build.find_compiler()) in out and f"target: {build.target()}" in out
    info, zig, _ = _run_child(tmp_path, cache, ("rnea", "crba"), "tree15")
    assert info["argv"] == build.pip_compiler()
    assert info["built"] == {f"{k}-{v}": False for k in ("rnea", "crba") for v in ("single", "batch")}
    ours = _system_results(("rnea", "crba"), "tree15")
    assert sorted(ours) == sorted(zig) and all(ours[k].tobytes() == zig[k].tobytes() for k in ours)


def test_an_entry_of_another_cpu_is_refused_and_rebuilt(tmp_path, monkeypatch):
    """Entries record the target (platform and CPU features) they were built for: on a machine of
    other CPU features nothing of them is used (faked by changing the target this process sees), and
    a manifest recording another target is refused (traced again) even where its name matches."""
    from sparsedyn.symbolic import trace as symtrace
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(cache))
    m = sd.serial_chain(5, name="travel")
    q = np.linspace(-1.0, 1.0, 5)
    k = sd.compile(m, kernels=("rnea",))
    assert k.built == {"rnea-single": True}
    want = k.rnea(q, q, q)
    (manifest,) = cache.glob("m_*.json")
    recorded = json.loads(manifest.read_text())
    assert recorded["target"] == build.target() and recorded["compiler"] == build.describe(build.find_compiler())
    with monkeypatch.context() as mp:
        mp.setattr(toolchain, "_target", build.target().split(" cpu:")[0] + " cpu:0123456789abcdef")
        other = sd.compile(m, kernels=("rnea",))
        assert other.built == {"rnea-single": True}                   # rebuilt for that CPU
        assert other.rnea(q, q, q).tobytes() == want.tobytes()
    assert len(list(cache.glob("sd_*.so"))) == 2
    # The first manifest, made to record another CPU, is refused: the kernel is traced again.
    manifest.write_text(json.dumps(dict(recorded, target="Linux-x86_64 cpu:0123456789abcdef")))
    traced = []
    trace_function = symtrace.trace_function
    monkeypatch.setattr(symtrace, "trace_function", lambda *a, **kw: traced.append(1) or trace_function(*a, **kw))
    again = sd.compile(m, kernels=("rnea",))
    assert traced and again.rnea(q, q, q).tobytes() == want.tobytes()
    assert json.loads(manifest.read_text())["target"] == build.target()      # rewritten for this machine


def test_cli_says_which_compiler_builds(tmp_path, monkeypatch, capsys):
    from sparsedyn.cli import main
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["info", "chain7", "--build"]) == 0
    out = capsys.readouterr().out
    assert f"compiler: {build.describe(build.find_compiler())}" in out and f"target: {build.target()}" in out
    assert f"cache: {tmp_path / 'cache'}" in out
    # Functions of static arguments are built per argument on first use: refused with the reason.
    assert main(["build", "chain7", "--kernels", "frame_jacobian", "--cache-dir", str(tmp_path / "c2")]) == 1
    assert "'frame_jacobian' takes frame" in capsys.readouterr().err


def test_a_system_compiler_that_cannot_build_gives_way_to_the_pip_compiler(tmp_path, monkeypatch):
    """A ``cc`` on the PATH that cannot build a shared library (a compiler without the C library's
    headers) is passed over for the pip compiler; one named explicitly is not (no compiler then)."""
    fake = tmp_path / "bin" / "cc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'cc (broken) 1.0'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    for var in ("CC", "SPARSEDYN_CC", "SPARSEDYN_CFLAGS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "_probed", {})
    c = build.find_compiler()
    assert c is not None and c.argv == build.pip_compiler() and "pip compiler (ziglang)" in build.describe(c)
    monkeypatch.setenv("SPARSEDYN_CC", str(fake))
    assert build.find_compiler() is None


def test_the_pip_compiler_links_without_compiler_rt_unless_a_library_needs_it(tmp_path, monkeypatch):
    """zig's compiler-rt (built on its first use: seconds of CPU) is left out of the link; a library
    that calls one of its functions (here a 128-bit division: ``__divti3``) is linked again with it,
    loads, and computes what the C semantics give."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "_probed", {})
    zig = build._probed_compiler(build.pip_compiler())
    assert zig is not None and build.NO_RTLIB in zig.libs
    assert not list((tmp_path / "cache").glob("zig-*/o/*/libcompiler_rt.a"))    # the probe did without it
    key = "1" * 40
    src = textwrap.dedent("""
        __attribute__((visibility("default"))) const char *sd_cache_key(void) { return "KEY"; }
        __attribute__((visibility("default"))) long long sd_div(long long a, long long b, long long c) {
          return (long long)(((__int128)a * b) / c);
        }
    """).replace("KEY", key)
    lib, built = build.build_library(key, [src], zig)
    assert built and list((tmp_path / "cache").glob("zig-*/o/*/libcompiler_rt.a"))
    import ctypes
    f = lib.sd_div
    f.restype, f.argtypes = ctypes.c_longlong, [ctypes.c_longlong] * 3
    a, b, c = 3 << 60, 5 << 57, (1 << 62) + 1                # the product needs 121 bits
    assert f(a, b, c) == (a * b) // c


def test_batches_built_by_the_pip_compiler_run_on_several_threads(tmp_path, monkeypatch):
    """The pip compiler has no OpenMP: a plain batched call on the native road splits its states over
    threads in the runtime instead, and gives what the same library gives on one thread, bit for bit,
    and what one-state calls give (bit for bit for the scalar loop; within rounding of the vector
    code, whose sin and cos come from the vector math library)."""
    from sparsedyn.codegen import native, runtime
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARSEDYN_CC", " ".join(build.pip_compiler()))
    monkeypatch.setattr(build, "_probed", {})
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 4)      # four threads whatever this machine has
    chunks = []
    in_threads = runtime._in_threads

    def spy(call, N, *a):
        # Each chunk waits for the others before it runs: they finish only if they all run at once.
        meet = threading.Barrier(a[-2], timeout=120)
        return in_threads(lambda n, p: chunks.append((n, threading.current_thread().name, meet.wait()))
                          or call(n, p), N, *a)
    monkeypatch.setattr(runtime, "_in_threads", spy)
    m = sd.random_tree(8, branching=1.5, joint_types="all", seed=11, floating_base=True)
    rng = np.random.default_rng(5)
    k = sd.compile(m)
    assert k is native.shared(m) and not k._compiler.openmp and k.threads == 4
    with sd.use_backend("native", deterministic=True):
        sd.aba(m, m.random_configuration(rng), np.zeros(m.nv), np.zeros(m.nv))     # builds the kernels
    flops = k.kernels["aba"].flops["total"]
    N = int(4 * 1e10 * 0.005 / flops) + 4 * k.lanes          # enough work for four threads (runtime's rule)
    Q = [m.random_configuration(rng).tolist() for _ in range(N)]           # plain lists, as users pass them
    V, T = rng.normal(size=(N, m.nv)), rng.normal(size=(N, m.nv))
    with sd.use_backend("native", deterministic=True):
        got = sd.aba(m, Q, V, T)
    plain = got
    assert len(chunks) == 4 and sum(n for n, _, _ in chunks) == N
    assert len({name for _, name, _ in chunks}) == 4 and all(n.startswith("sparsedyn-batch") for _, n, _ in chunks)
    k.threads = 1                                # the object plain calls use
    chunks.clear()
    with sd.use_backend("native", deterministic=True):
        one = sd.aba(m, Q, V, T)
    assert not chunks and got.tobytes() == one.tobytes()
    from conftest import rel_err, rounding_bound
    for i in range(0, N, max(1, N // 50)):
        single = k.aba(Q[i], V[i], T[i])
        H = sd.crba(m, np.asarray(Q[i]))
        assert rel_err(got[i], single) <= rounding_bound(m.nv + m.nbodies, np.linalg.cond(H)), i
    # The scalar loop (no vector code): chunks of the same function, equal to one-state calls bit for bit.
    loop = sd.compile(m, vectorize=False)
    loop.threads = 4
    chunks.clear()
    got = loop.aba(np.asarray(Q), V, T)
    assert len(chunks) == 4
    assert all(got[i].tobytes() == loop.aba(Q[i], V[i], T[i]).tobytes() for i in range(0, N, max(1, N // 50)))
    # A compiled object of its own whose first call is a batch: the same vector code, the same results.
    vec = sd.compile(m, vectorize=True)
    vec.threads = 4
    chunks.clear()
    assert vec.aba(np.asarray(Q), V, T).tobytes() == plain.tobytes() and len(chunks) == 4
