"""The build cache: concurrent builds, truncated and foreign files, private directories."""

import ctypes
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sdcompile_helpers import compile_cache, subprocess_env  # noqa: F401  (fixture)
from sparsedyn.codegen import CacheDirWarning, build

CHILD = textwrap.dedent("""
    import sys, numpy as np, sparsedyn as sd
    m = sd.serial_chain(4, name="race")
    k = sd.compile(m, kernels=("rnea",))
    q = np.linspace(-1.0, 1.0, 4)
    t = sd.rnea(m, q, q, q)
    err = np.abs(k.rnea(q, q, q) - t).max() / max(1, np.abs(t).max())
    # the rounding bound of a recursion over 4 bodies (16 n eps; conftest.rounding_bound)
    print("OK" if err < 16 * 4 * np.finfo(float).eps and k.compiled else f"BAD {err}", k.built["rnea-single"])
""")


def run_child(cache, code=CHILD):
    return subprocess.Popen([sys.executable, "-c", code], env=subprocess_env(cache), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def libraries(d):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("sd_") and p.suffix == ".so")


def test_two_processes_build_the_same_kernel(tmp_path):
    cache = tmp_path / "cache"
    procs = [run_child(cache) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.startswith("OK"), out + err
    # One of them built, the other waited for it and loaded it (or both built: same result).
    assert "True" in "".join(o for o, _ in outs)
    libs = libraries(cache)
    assert len(libs) == 1
    so = cache / libs[0]
    assert build._valid(so, so.with_suffix(".sha256"))
    assert not [p for p in cache.iterdir() if p.name.startswith("build-")]     # no temporary leftovers
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    # A third process finds everything in the cache.
    out, err = run_child(cache).communicate(timeout=300)
    assert out.split() == ["OK", "False"], out + err


def test_truncated_and_foreign_libraries_are_rebuilt(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    out, err = run_child(cache).communicate(timeout=300)
    assert out.startswith("OK"), out + err
    (lib,) = libraries(cache)
    so = cache / lib
    data = so.read_bytes()
    # Truncated (an interrupted copy, a full disk): the hash no longer matches.
    so.write_bytes(data[: len(data) // 2])
    out, err = run_child(cache).communicate(timeout=300)
    assert out.split() == ["OK", "True"], out + err
    assert so.read_bytes() == data or build._valid(so, so.with_suffix(".sha256"))
    # Foreign: another valid library with a matching hash file, but not the one for this key.
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(cache))
    other = sd.compile(sd.serial_chain(2, name="other"), kernels=("rnea",))
    (other_lib,) = [p for p in libraries(cache) if p != lib]
    so.write_bytes((cache / other_lib).read_bytes())
    so.with_suffix(".sha256").write_text(hashlib.sha256(so.read_bytes()).hexdigest() + "\n")
    out, err = run_child(cache).communicate(timeout=300)
    assert out.split() == ["OK", "True"], out + err
    assert other.compiled


def test_cache_directory_is_private(tmp_path, monkeypatch):
    d = tmp_path / "new" / "cache"
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(d))
    assert build.cache_dir() == d
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(shared))
    monkeypatch.setattr(build, "_fallback_dir", None)
    with pytest.warns(CacheDirWarning, match="writable by others"):
        used = build.cache_dir()
    try:
        assert used != shared and stat.S_IMODE(used.stat().st_mode) == 0o700
    finally:
        import shutil
        shutil.rmtree(used, ignore_errors=True)


def test_cached_reuse_traces_nothing_and_runs_no_compiler(compile_cache, monkeypatch):
    """Loading a compiled model again needs no tracing (the manifest has the programs' facts) and no
    compiler run: both are counted, never timed."""
    from sparsedyn.symbolic import trace as symtrace
    m = sd.serial_chain(6, name="reuse")
    sd.compile(m, kernels=("rnea", "aba"))
    calls = {"trace": 0, "cc": 0}
    trace_function, run = symtrace.trace_function, build.Compiler.run

    def counted_trace(*args, **kwargs):
        calls["trace"] += 1
        return trace_function(*args, **kwargs)

    def counted_run(self, *args, **kwargs):
        calls["cc"] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(symtrace, "trace_function", counted_trace)
    monkeypatch.setattr(build.Compiler, "run", counted_run)
    k = sd.compile(m, kernels=("rnea", "aba"))
    q = np.zeros(6)
    out = k.aba(q, q, q)
    assert k.built == {"rnea-single": False, "aba-single": False}
    assert calls == {"trace": 0, "cc": 0}
    assert rel_err(out, sd.aba(m, q, q, q)) < rounding_bound(6, np.linalg.cond(sd.crba(m, q)))


def test_compiler_probe_is_cached(compile_cache, monkeypatch):
    monkeypatch.setattr(build, "_probed", {})
    c1 = build.find_compiler()
    assert c1 is not None and "-ffp-contract=off" in c1.flags
    assert list(compile_cache.glob("probe_*.json"))
    monkeypatch.setattr(build, "_probed", {})
    monkeypatch.setattr(build, "_probe", lambda *a: pytest.fail("probed again"))
    c2 = build.find_compiler()
    assert (c2.argv, c2.ident, c2.flags) == (c1.argv, c1.ident, c1.flags)


def test_gcc_builds_without_the_redundant_rtl_passes(compile_cache, monkeypatch, rng):
    """GCC gets build.RTL_SKIP (two RTL passes turned off to cut its time); a derivative kernel built
    so equals the interpreted program bit for bit (no pass that is off changes a rounding)."""
    monkeypatch.setattr(build, "_probed", {})
    comp = build.find_compiler()
    assert comp is not None, "this test needs a C compiler (the system's or the pip compiler)"
    if "clang" in comp.ident:
        assert not set(build.RTL_SKIP) & set(comp.flags)            # clang has no such passes
        return
    assert set(build.RTL_SKIP) <= set(comp.flags), comp.flags          # GCC (the suite's system compiler)
    from sparsedyn.codegen import cemit
    from sparsedyn.codegen.trace import trace
    m = sd.humanoid()
    prog = trace(m, "rnea_derivatives")
    key = hashlib.sha256(b"rtl-skip").hexdigest()
    lib, built = build.build_library(key, [cemit.emit_unit([u]) for u in cemit.emit_program(prog, "rnea_derivatives")]
                                     + [cemit.emit_unit([], key=key)], comp, directory=compile_cache)
    assert built
    xs = [m.random_configuration(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)]
    ys = [np.zeros(s) for s in prog.output_shapes]
    lib.sd_rnea_derivatives.restype = None
    lib.sd_rnea_derivatives(*[ctypes.c_void_p(np.ascontiguousarray(a, dtype=float).ctypes.data) for a in xs + ys])
    for got, want in zip(ys, prog.evaluate(xs)):
        np.testing.assert_array_equal(got, want)


def test_cache_dir_warning_once_per_process(tmp_path, monkeypatch):
    shared = tmp_path / "shared2"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(shared))
    monkeypatch.setattr(build, "_fallback_dir", None)
    monkeypatch.setattr(build, "_warned_dirs", set())
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dirs = {build.cache_dir() for _ in range(4)}
    assert len([w for w in caught if issubclass(w.category, CacheDirWarning)]) == 1
    assert len(dirs) == 1


def test_lock_symlink_is_not_followed(tmp_path):
    target = tmp_path / "victim"
    target.write_text("keep")
    link = tmp_path / "sd_x.lock"
    link.symlink_to(target)
    with build._locked(link):
        pass
    assert target.read_text() == "keep" and not link.is_symlink() and link.is_file()


def test_a_hanging_lock_holder_times_out_with_a_clear_message(tmp_path, monkeypatch):
    lock = tmp_path / "sd_hang.lock"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("SPARSEDYN_LOCK_TIMEOUT", "0.3")
        with pytest.raises(build.BuildError, match="SPARSEDYN_LOCK_TIMEOUT"):
            with build._locked(lock):
                pass
    finally:
        holder.kill()
        holder.wait()
    with build._locked(lock):                  # free again once the holder is gone
        pass


def test_a_valid_but_wrong_probe_file_is_detected_and_rewritten(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(cache))
    monkeypatch.setattr(build, "_probed", {})
    comp = build.find_compiler()
    assert comp is not None
    (probe,) = cache.glob("probe_*.json")
    data = json.loads(probe.read_text())
    data["flags"] = data["flags"] + ["-fno-such-flag-anywhere"]
    probe.write_text(json.dumps(data))                    # valid JSON, the right command, wrong flags
    monkeypatch.setattr(build, "_probed", {})
    m = sd.serial_chain(3, name="probe")
    k = sd.compile(m)
    q = np.linspace(0.1, 0.3, 3)
    assert rel_err(k.rnea(q, q, q), sd.rnea(m, q, q, q)) < 1e-12
    assert "-fno-such-flag-anywhere" not in json.loads(probe.read_text())["flags"]


def _text_section(so):
    """(offset, size) of the machine code (``.text``) of a shared library, read by ``readelf``."""
    out = subprocess.run(["readelf", "-S", "--wide", str(so)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[1] == ".text":
            return int(parts[4], 16), int(parts[5], 16)
    raise AssertionError(f"no .text section in {so}:\n{out}")


def test_altered_library_with_a_rewritten_hash_file_is_rebuilt(tmp_path):
    """Machine code overwritten (x86's ``ud2``, an illegal instruction, everywhere in ``.text``) and
    the ``.sha256`` file recomputed over the altered bytes: the loader must reject the file before
    calling into it and rebuild it (in a child process: a failure here would kill it by SIGILL)."""
    cache = tmp_path / "cache"
    out, err = run_child(cache).communicate(timeout=300)
    assert out.split() == ["OK", "True"], out + err
    (lib,) = libraries(cache)
    so = cache / lib
    data = bytearray(so.read_bytes())
    off, size = _text_section(so)
    data[off: off + size - size % 2] = b"\x0f\x0b" * (size // 2)
    so.write_bytes(bytes(data))
    so.with_suffix(".sha256").write_text(hashlib.sha256(so.read_bytes()).hexdigest() + "\n")
    p = run_child(cache)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, f"the child died ({p.returncode}): {err}"
    assert out.split() == ["OK", "True"], out + err
    assert build._valid(so, so.with_suffix(".sha256"))


def test_an_edit_of_the_c_prelude_changes_the_cache_keys(tmp_path, monkeypatch):
    """The C prelude (``codegen/prelude.h``) is part of the package sources of every cache key: a
    copy of the package hashes as the package does, and the same copy with an edited prelude
    gets other keys (so that its kernels are rebuilt)."""
    from sparsedyn.kernels import fingerprints as kernels
    from sparsedyn.codegen import runtime
    pkg = Path(runtime.__file__).resolve().parents[1]
    for cached in ("_source_hash", "_generator_id"):            # hashed now, from the files as they are
        monkeypatch.setattr(runtime, cached, None)
    monkeypatch.setattr(kernels, "_sources", None)
    here = (runtime._package_source_hash(), kernels.package_sources(), runtime._generator())
    copy = tmp_path / "sparsedyn"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    prelude = copy / "codegen" / "prelude.h"
    assert "typedef double sd_vd" in prelude.read_text()
    monkeypatch.setattr(runtime, "__file__", str(copy / "codegen" / "runtime.py"))
    monkeypatch.setattr(kernels, "__file__", str(copy / "kernels" / "fingerprints.py"))
    keys = []
    for edit in ("", "/* edited */\n"):
        prelude.write_text(prelude.read_text() + edit)
        for cached in ("_source_hash", "_generator_id"):
            monkeypatch.setattr(runtime, cached, None)
        monkeypatch.setattr(kernels, "_sources", None)
        keys.append((runtime._package_source_hash(), kernels.package_sources(), runtime._generator()))
    assert keys[0] == here
    assert all(a != b for a, b in zip(keys[1], here))


def test_an_edit_of_the_code_generator_builds_the_kernels_again(tmp_path, monkeypatch):
    """A library is keyed by all it is compiled from: the programs' IR and the code generator that writes their
    C (``codegen``'s modules and the C they paste in, :func:`~sparsedyn.codegen.runtime._generator`).
    The same model compiled again after an edit of the generator (the same IR) builds a library of its own,
    where it loaded the old one before; without the edit it is loaded from the cache."""
    from sparsedyn.codegen import runtime
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(cache))
    m = sd.serial_chain(4, name="generator")
    q = np.linspace(-1.0, 1.0, 4)
    assert sd.compile(m, kernels=("rnea",)).built == {"rnea-single": True}
    assert sd.compile(m, kernels=("rnea",)).built == {"rnea-single": False}
    first = libraries(cache)
    monkeypatch.setattr(runtime, "_generator_id", runtime._generator() + " edited")     # as an edited one hashes
    monkeypatch.setattr(runtime, "_source_hash", None)
    k = sd.compile(m, kernels=("rnea",))
    assert k.built == {"rnea-single": True}
    assert len(libraries(cache)) == len(first) + 1 and set(first) < set(libraries(cache))
    t = sd.rnea(m, q, q, q)
    assert rel_err(k.rnea(q, q, q), t) < rounding_bound(4)


def test_an_edit_of_the_prelude_builds_hand_written_c_again(tmp_path, monkeypatch):
    """A hand-written C library (:func:`sparsedyn.kernels.c_library`) is keyed by the whole unit it compiles,
    the kernels' prelude pasted before its source included: an edited prelude builds it again."""
    from sparsedyn.codegen import cemit, native
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(cache))
    source = "SD_EXPORT double sd_twice(double x) { return 2.0 * x; }\n"
    built = []
    for edit in ("", "", "/* edited */\n"):
        monkeypatch.setattr(native, "_c_libraries", {})                # (once per process: a new process's call)
        monkeypatch.setattr(cemit, "PRELUDE", cemit.PRELUDE + edit)
        lib = native.c_library(source)
        lib.sd_twice.restype, lib.sd_twice.argtypes = ctypes.c_double, [ctypes.c_double]
        assert lib.sd_twice(1.25) == 2.5
        built.append(libraries(cache))
    assert len(built[0]) == 1 and built[1] == built[0]
    assert len(built[2]) == 2 and set(built[0]) < set(built[2])
