"""Building generated C into shared libraries, and the on-disk build cache.

Compiler
    ``$SPARSEDYN_CC`` if set (a path or a command name; no shell syntax), else
    ``$CC``, else the first of ``cc``, ``gcc``, ``clang`` on ``PATH``; when none
    is found there, or the one found cannot build a shared library (a compiler
    without the C library's headers), the *pip compiler*: clang as ``zig cc`` from
    the ``ziglang`` package, which installs with sparsedyn (:func:`pip_compiler`).
    It has no OpenMP runtime: the runtime splits batches over threads.  The compiler's identity
    (``--version`` first line) and flags are part of every library key.

Target
    :func:`target`: the platform and the CPU's instruction-set features (``-march=native``
    code runs only where they are all present).  It is part of every key, and a
    kernel manifest records it: a cache directory copied to a machine of the same
    platform and CPU features is used there (whichever compiler built it); on
    another one its entries are not found, or refused, and rebuilt.

Flags
    :data:`DEFAULT_FLAGS`: ``-O1 -ffp-contract=off -fno-math-errno`` plus ``-march=native`` and
    ``-fopenmp`` where the compiler accepts them (each is probed once per compiler).
    ``-ffp-contract=off`` forbids fused multiply-adds so that every operation rounds as NumPy's
    does; ``-fno-math-errno`` lets ``sqrt`` be one instruction; :data:`SKIP_PASSES` turns off GCC
    passes that are redundant on already-optimised straight-line code, :data:`CSE_PARAMS` shortens
    the memory of its CSE passes and :data:`RTL_SKIP` turns off two of its RTL passes.  ``-O1``,
    not ``-O2``: on these kernels ``-O2`` compiles 30-50 % longer and its scheduling made
    CRBA/ABA/Minv *slower* (more spills).  ``$SPARSEDYN_CFLAGS`` replaces all of these when set.

Cache directory
    ``$SPARSEDYN_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparsedyn``, else
    ``~/.cache/sparsedyn``.  It is created with mode 0700 and must be owned by
    the current user and not writable by group or others; otherwise (or when
    it cannot be created) a private temporary directory is used instead, with
    a warning, so a library is never loaded from a place another user can
    write to.

Entries
    ``<key>.so`` plus ``<key>.sha256``: an HMAC-SHA256 of the library's file name
    (which holds the key) and bytes, under a random secret private to the cache
    directory (``secret``, 32 bytes, mode 0600, made on first use).  A library
    is loaded only after that digest matches, so no byte of it runs before it is
    known to be the file sparsedyn built for this key: a truncated, altered or
    swapped file fails the check even when its ``.sha256`` was recomputed over the
    new bytes by anything else (an altered library once crashed the process with
    an illegal instruction).  A loaded library must also return ``key`` from its
    exported ``sd_cache_key()``.  A file failing either check is rebuilt; deleting
    ``secret`` makes every entry rebuild once.  Builds happen in
    a private temporary directory inside the cache directory and are moved in
    place with :func:`os.replace` (atomic), under an advisory lock per key
    (``fcntl.flock``, where available) so that concurrent processes building
    the same key build it once and never see a half-written file.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

from . import toolchain
from .toolchain import describe, is_pip_compiler, machine_id, pip_compiler, target  # noqa: F401 (re-exported)
from .units import Replay as _Replay, compile_units as _compile_units

__all__ = ["CompilerNotFoundWarning", "CacheDirWarning", "Compiler", "find_compiler", "pip_compiler", "describe",
           "target", "cache_dir", "build_library", "DEFAULT_FLAGS", "BuildError"]

#: Optimisation and floating-point flags (see the module docstring).
DEFAULT_FLAGS = ("-O1", "-ffp-contract=off", "-fno-math-errno")
#: GCC passes with nothing to find in code the IR has already value-numbered, constant-folded and
#: dead-code-eliminated, whose only pointers are the arguments, and whose segment functions only read
#: their arguments and write their workspace: about a third of the compile time of straight-line
#: kernels, for the same code speed.  Dropped when the compiler rejects them.
SKIP_PASSES = ("-fno-tree-dse", "-fno-dse", "-fno-tree-dominator-opts", "-fno-tree-fre", "-fno-tree-ccp",
               "-fno-tree-pta", "-fno-ipa-modref", "-fno-ipa-pure-const", "-fno-ipa-reference",
               "-fno-ipa-reference-addressable")
#: GCC's RTL common-subexpression passes with shorter memories (``cse``: 100 instructions, ``cselib``:
#: 50 memory locations; the combiner merges two instructions): the IR has no common subexpression
#: left, and a segment function is one basic block of thousands of instructions, which those passes
#: search instruction by instruction.  Results stay equal bit for bit.  Not given to clang.
CSE_PARAMS = ("--param=max-cse-insns=100", "--param=max-cselib-memory-locations=50", "--param=max-combine-insns=2")
#: Two more GCC RTL passes with nothing to find in these kernels: the CSE after register allocation
#: and forward propagation into addresses and operands (done on the IR already).  Not given to clang.
RTL_SKIP = ("-fdisable-rtl-postreload", "-fno-forward-propagate")
#: For clang as ``zig cc``, which compiles ``-O1`` as clang's ``-O2`` with debug information and frame
#: pointers: no debug information, no SLP vectorizer (most of the rest of its time on straight-line
#: kernels; it reassociates nothing, so results stay equal), the frame pointer's register back, and
#: clang's own ``-O1`` pipeline after zig's ``-O2`` (as fast, bit for bit equal).  Dropped when the
#: compiler rejects them (gcc).
CLANG_FLAGS = ("-g0", "-fno-slp-vectorize", "-fomit-frame-pointer", "-Xclang=-O1")
#: Link flag of the pip compiler: no compiler-rt (see :mod:`.toolchain`); kept when a probe links
#: without it under ``--no-undefined``, and dropped for a link that needs it.
NO_RTLIB = "-rtlib=none"
_BASE_FLAGS = ("-fPIC", "-std=gnu11", "-w")


class CompilerNotFoundWarning(RuntimeWarning):
    """No working C compiler: compiled kernels fall back to the NumPy kernels."""


class CacheDirWarning(RuntimeWarning):
    """The cache directory is unsafe or unusable; a private temporary directory is used."""


class BuildError(RuntimeError):
    """The C compiler failed on generated code (a bug in sparsedyn: please report it)."""


class Compiler:
    """A probed C compiler: ``argv`` (the command), ``ident`` (version and resolved target),
    ``flags`` (all flags used for generated code), ``openmp`` (whether ``-fopenmp`` works),
    ``libs`` (libraries to link: ``-lm``, and ``-lmvec`` when glibc's vector math library works)."""

    def __init__(self, argv, ident, flags, openmp, libs=("-lm",)):
        self.argv, self.ident, self.flags, self.openmp = list(argv), ident, tuple(flags), openmp
        self.libs = tuple(libs)
        self.probe_file = None          # the cached probe this came from (None: probed in this process)

    def __repr__(self):
        return f"Compiler({' '.join(self.argv)!r}, flags={' '.join(self.flags)!r}, openmp={self.openmp})"

    def run(self, args, cwd):
        """Run the compiler with ``args`` in ``cwd`` (a private temporary directory of the build cache,
        where the pip compiler also keeps its local cache); :class:`BuildError` when it fails."""
        r = subprocess.run(self.argv + list(args), cwd=cwd, capture_output=True, text=True,
                           env=toolchain.compiler_env(self.argv, cwd, cache_dir()))
        if r.returncode != 0:
            raise BuildError(f"{' '.join(self.argv + list(args))} failed:\n{r.stderr[-4000:]}")
        return r


_PROBE_VERSION = 12
_probe_lock = threading.Lock()
_probed: dict = {}


def _system_compiler():
    """The command of ``$SPARSEDYN_CC`` / ``$CC`` (``None`` when it names nothing runnable), or the
    first of ``cc``, ``gcc``, ``clang`` on ``PATH``; second item: whether it was set explicitly."""
    spec = os.environ.get("SPARSEDYN_CC") or os.environ.get("CC")
    if spec:
        argv = shlex.split(spec)
        exe = shutil.which(argv[0]) if argv else None
        return ([exe] + argv[1:] if exe else None), True
    for name in ("cc", "gcc", "clang"):
        exe = shutil.which(name)
        if exe:
            return [exe], False
    return None, False


def _compiler_command():
    """The command of the compiler to try first (see the module docstring), or ``None``."""
    argv, explicit = _system_compiler()
    if argv is None and not explicit:
        return pip_compiler()
    return argv


def _probe(argv, tmp):
    """``Compiler`` for ``argv`` or ``None`` when it cannot build a shared library."""
    pip = is_pip_compiler(argv)
    env = toolchain.compiler_env(argv, tmp, cache_dir())
    try:
        ver = subprocess.run(argv + ["--version"], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    if ver.returncode != 0:
        return None
    name = ver.stdout.splitlines()[0].strip() if ver.stdout.strip() else "unknown"
    if pip:
        toolchain.prune_zig_caches(cache_dir())
        zv = subprocess.run(argv[:1] + ["version"], capture_output=True, text=True, env=env)
        name = f"zig cc {zv.stdout.strip()} ({name})"
    # The CPU features -march=native resolves to (so caches never mix CPUs).
    ident = [name, target()]
    src = Path(tmp) / "probe.c"
    src.write_text("#include <math.h>\ndouble sd_probe(double x) { return sin(x) + sqrt(x); }\n")
    opt = tuple(shlex.split(os.environ["SPARSEDYN_CFLAGS"])) if os.environ.get("SPARSEDYN_CFLAGS") else DEFAULT_FLAGS
    # Undefined symbols are errors at link time (a library that cannot load is no use): an OpenMP
    # the compiler accepts but has no runtime for (zig cc) is refused here, not at dlopen.
    strict = ["-Wl,--no-undefined"] if sys.platform.startswith("linux") else []

    rt = []

    def ok(flags, name="probe", libs=("-lm",)):
        r = subprocess.run(argv + list(_BASE_FLAGS) + list(flags) + ["-shared"] + strict
                           + ["-o", f"{name}.so", f"{name}.c"] + rt + list(libs), cwd=tmp, capture_output=True,
                           text=True, env=env)
        return r.returncode == 0

    # The pip compiler without compiler-rt where the probe links without it (see .toolchain).
    if pip and strict:
        rt.append(NO_RTLIB)
        if not ok(opt):
            rt.clear()
    if not rt and not ok(opt):
        return None
    flags = list(opt)
    if not os.environ.get("SPARSEDYN_CFLAGS"):
        for extra in (SKIP_PASSES, CSE_PARAMS, RTL_SKIP, CLANG_FLAGS):
            if extra in (CSE_PARAMS, RTL_SKIP) and "clang" in name:
                continue                    # clang accepts GCC's --param and ignores it
            if ok(flags + list(extra)):
                flags += list(extra)
    if ok(flags + ["-march=native"]):
        flags.append("-march=native")
    (Path(tmp) / "omp.c").write_text(
        "void sd_probe3(int n, double *x) {\n#pragma omp parallel for\n"
        "  for (int i = 0; i < n; i++) x[i] *= 2;\n}\n")
    openmp = ok(flags + ["-fopenmp"], "omp")
    if openmp:
        flags.append("-fopenmp")
    libs = rt + ["-lm"]
    # glibc's libmvec (vector sin/cos for the batched kernels), x86-64 only.
    (Path(tmp) / "mvec.c").write_text(
        "typedef double v2 __attribute__((vector_size(16)));\n"
        "v2 _ZGVbN2v_sin(v2); v2 _ZGVbN2v_cos(v2);\n"
        "v2 sd_probe2(v2 x) { return _ZGVbN2v_sin(x) + _ZGVbN2v_cos(x); }\n")
    if strict and ok(flags, "mvec", ("-lmvec", "-lm")):
        flags.append("-DSD_LIBMVEC")
        libs.insert(len(rt), "-lmvec")
    return Compiler(argv, " | ".join(ident), list(_BASE_FLAGS) + flags, openmp, libs)


def find_compiler():
    """The :class:`Compiler` to use, or ``None``: the system's (``$SPARSEDYN_CC``, ``$CC`` or the
    ``PATH``'s), else, unless one was named explicitly, the pip compiler (:func:`pip_compiler`).

    Probing runs the compiler a few times (about 0.2 s; the pip compiler's first run on a machine
    prepares its C library, several seconds), so its result is kept per process and in the cache
    directory (``probe_<hash>.json``), keyed by the command, the executable's size and modification
    time, ``$SPARSEDYN_CFLAGS`` and the machine; a failed probe is not cached on disk.
    """
    argv, explicit = _system_compiler()
    comp = _probed_compiler(argv) if argv is not None else None
    if comp is None and not explicit:
        pip = pip_compiler()
        comp = _probed_compiler(pip) if pip is not None else None
    return comp


def _probed_compiler(argv):
    import json
    try:
        st = os.stat(argv[0])
        exe = (st.st_size, st.st_mtime_ns)
    except OSError:
        exe = None
    key = (tuple(argv), exe, os.environ.get("SPARSEDYN_CFLAGS", ""))
    with _probe_lock:
        if key in _probed:
            return _probed[key]
        d = cache_dir()
        pkey = hashlib.sha256(repr((key, machine_id(), sys.version, _PROBE_VERSION)).encode()).hexdigest()[:32]
        pfile = d / f"probe_{pkey}.json"
        comp = None
        try:
            data = json.loads(pfile.read_text())
            if data.get("argv") == list(argv) and isinstance(data["ident"], str) \
                    and all(isinstance(f, str) for f in data["flags"] + data["libs"]):
                comp = Compiler(data["argv"], data["ident"], data["flags"], bool(data["openmp"]), data["libs"])
                comp.probe_file = pfile
        except (OSError, ValueError, KeyError, TypeError):
            comp = None
        if comp is None:
            with tempfile.TemporaryDirectory(prefix="sparsedyn-probe-") as tmp:
                comp = _probe(list(argv), tmp)
            if comp is not None:
                fd, tmpname = tempfile.mkstemp(prefix="probe_", suffix=".tmp", dir=d)
                with os.fdopen(fd, "w") as f:
                    json.dump({"argv": comp.argv, "ident": comp.ident, "flags": list(comp.flags),
                               "openmp": comp.openmp, "libs": list(comp.libs)}, f)
                os.replace(tmpname, pfile)
        _probed[key] = comp
        return comp


# --- cache directory ------------------------------------------------------------

def _is_private_dir(p: Path) -> bool:
    try:
        st = p.stat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return not (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


_fallback_dir = None
_warned_dirs: set = set()           # CacheDirWarning once per process and directory


def cache_dir() -> Path:
    """The user-private cache directory (created 0700); see the module docstring."""
    global _fallback_dir
    env = os.environ.get("SPARSEDYN_CACHE_DIR")
    if env:
        d = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME")
        d = (Path(base) if base and os.path.isabs(base) else Path.home() / ".cache") / "sparsedyn"
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass
    if _is_private_dir(d):
        return d
    if _fallback_dir is None or not _is_private_dir(_fallback_dir):
        _fallback_dir = Path(tempfile.mkdtemp(prefix="sparsedyn-cache-"))
    if str(d) in _warned_dirs:
        return _fallback_dir
    _warned_dirs.add(str(d))
    warnings.warn(f"sparsedyn.compile: the cache directory {str(d)!r} is missing, not owned by this user or "
                  f"writable by others; using the private temporary directory {str(_fallback_dir)!r} instead "
                  f"(set SPARSEDYN_CACHE_DIR to a directory of your own)", CacheDirWarning, stacklevel=3)
    return _fallback_dir


def lock_timeout() -> float:
    """Seconds to wait for another process's build of the same kernel (``$SPARSEDYN_LOCK_TIMEOUT``,
    default 600)."""
    try:
        return max(0.0, float(os.environ.get("SPARSEDYN_LOCK_TIMEOUT", "600")))
    except ValueError:
        return 600.0


def _open_lock(path: Path) -> int:
    """The lock file, never through a symbolic link: one found at ``path`` is removed (the cache
    directory is private, so it can only be a leftover) and a plain file created instead."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(3):
        try:
            return os.open(path, flags, 0o600)
        except OSError as e:
            if not os.path.islink(path):
                raise
            os.unlink(path)
            last = e
    raise BuildError(f"cannot create the lock file {path}: {last}")


@contextmanager
def _locked(path: Path):
    try:
        import fcntl
    except ImportError:                 # pragma: no cover - not POSIX: atomic replaces only
        yield
        return
    fd = _open_lock(path)
    try:
        timeout = lock_timeout()
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - t0 >= timeout:
                    raise BuildError(
                        f"sparsedyn.compile: waited {timeout:.0f} s for {path}, held by another process "
                        f"building the same kernel; that process may hang. Stop it, or raise "
                        f"SPARSEDYN_LOCK_TIMEOUT (seconds).") from None
                time.sleep(0.05)
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _secret(d: Path) -> bytes:
    """The cache directory's secret (see the module docstring), made atomically on first use: a
    process that loses the race to create it reads the winner's."""
    path = d / "secret"
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            fd = None
        if fd is not None:
            with os.fdopen(fd, "rb") as f:
                data = f.read(64)
            if len(data) == 32:
                return data
            os.unlink(path)                   # a damaged secret: a new one (every entry rebuilds once)
            continue
        fd, tmp = tempfile.mkstemp(prefix="secret-", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
            try:
                os.link(tmp, path)            # create-if-absent, atomic
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    raise OSError(f"cannot create the cache secret {path}")


def _digest(so: Path, final: Path | None = None) -> str:
    """The sealed digest of the library ``so`` (see the module docstring) for its place in the
    cache, ``final`` (default: where it is)."""
    import hmac
    final = so if final is None else final
    h = hmac.new(_secret(final.parent), final.name.encode() + b"\0", hashlib.sha256)
    with open(so, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _seal(lib: Path, side: Path, final: Path):
    """Write to ``side`` the digest of the freshly built ``lib`` that will be moved to ``final``."""
    side.write_text(_digest(lib, final) + "\n")


def _valid(so: Path, side: Path) -> bool:
    """Whether ``so`` is the library sealed for its name (checked before any byte of it is loaded)."""
    import hmac
    try:
        want = side.read_text().strip()
        return len(want) == 64 and hmac.compare_digest(_digest(so), want)
    except (OSError, UnicodeDecodeError):
        return False


def _load(so: Path, key: str):
    """Load a verified library and check that it is the one for ``key``; a foreign library is
    unloaded again (so that a rebuilt file at the same path is really re-read)."""
    lib = ctypes.CDLL(str(so))
    try:
        f = lib.sd_cache_key
        f.restype = ctypes.c_char_p
        f.argtypes = []
        ok = f().decode(errors="replace") == key
    except AttributeError:
        ok = False
    if not ok:
        try:
            import _ctypes
            _ctypes.dlclose(lib._handle)
        except (ImportError, AttributeError, OSError):
            pass
        raise BuildError(f"{so} is not the library for key {key}")
    return lib


def library_paths(key: str, directory: Path | None = None):
    d = cache_dir() if directory is None else directory
    return d / f"sd_{key}.so", d / f"sd_{key}.sha256"


def sealed_file(stem: str, suffix: str, make, directory: Path | None = None) -> Path:
    """The cache file ``<stem><suffix>`` (a library or module that is not a kernel library), made by
    ``make(path, side, directory)`` (build it, seal it with :func:`_seal` into ``side``) when it is
    missing or not the one sealed for its name; other processes wait on its lock."""
    d = cache_dir() if directory is None else directory
    path, side = d / f"{stem}{suffix}", d / f"{stem}.sha256"
    if not _valid(path, side):
        with _locked(d / f"{stem}.lock"):
            if not _valid(path, side):
                make(path, side, d)
    return path


def build_sealed(compiler: Compiler, flags, name: str, source: str, libs, path: Path, side: Path, d: Path):
    """Compile the one C file ``source`` (written as ``name``) with ``flags`` into a shared object,
    linked with ``libs``, in a private temporary folder of ``d``; seal it into ``side`` and move it to
    ``path`` whole (the ``make`` of :func:`sealed_file` for single-file modules)."""
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=d))
    try:
        (tmp / name).write_text(source)
        compiler.run(list(flags) + ["-shared", "-o", "mod.so", name] + list(libs), cwd=tmp)
        _seal(tmp / "mod.so", tmp / "mod.sha256", path)
        os.replace(tmp / "mod.so", path)
        os.replace(tmp / "mod.sha256", side)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def lookup(key: str, directory: Path | None = None):
    """The loaded library of ``key`` if a valid one is cached, else ``None``."""
    so, side = library_paths(key, directory)
    if so.exists() and _valid(so, side):
        try:
            return _load(so, key)
        except (OSError, AttributeError, BuildError):
            return None
    return None


def _reprobe(compiler: Compiler) -> bool:
    """After a failed build with a compiler read from a cached probe file: probe again; when the
    fresh probe differs (a valid but wrong probe file), replace the file, update ``compiler`` in
    place and return True (build again)."""
    pfile = compiler.probe_file
    if pfile is None:
        return False
    compiler.probe_file = None
    with tempfile.TemporaryDirectory(prefix="sparsedyn-probe-") as tmp:
        fresh = _probe(compiler.argv, tmp)
    try:
        os.unlink(pfile)
    except OSError:
        pass
    if fresh is None or (fresh.flags, fresh.libs, fresh.openmp, fresh.ident) == \
            (compiler.flags, compiler.libs, compiler.openmp, compiler.ident):
        return False
    import json
    fd, tmpname = tempfile.mkstemp(prefix="probe_", suffix=".tmp", dir=pfile.parent)
    with os.fdopen(fd, "w") as f:
        json.dump({"argv": fresh.argv, "ident": fresh.ident, "flags": list(fresh.flags),
                   "openmp": fresh.openmp, "libs": list(fresh.libs)}, f)
    os.replace(tmpname, pfile)
    compiler.ident, compiler.flags, compiler.openmp, compiler.libs = fresh.ident, fresh.flags, fresh.openmp, \
        fresh.libs
    return True


def build_library(key: str, sources, compiler: Compiler, progress=None, directory: Path | None = None):
    """The library for ``key`` built from ``sources`` (C translation units), cached.

    Returns ``(ctypes library, built)`` where ``built`` says whether the compiler ran.
    Translation units are compiled in parallel (one process per CPU); ``sources`` may be an
    iterator (:func:`~.cemit.emit_units`), whose units are then made only when the library is not
    cached, each compiled as it comes while the next is made.  A build that fails with a compiler
    read from a cached probe file probes the compiler again and, when the probe file was wrong,
    rewrites it and builds again (from the same units).
    """
    if not isinstance(sources, (list, tuple)):
        sources = _Replay(sources)
    try:
        return _build_library(key, sources, compiler, progress, directory)
    except BuildError:
        if not _reprobe(compiler):
            raise
        return _build_library(key, sources, compiler, progress, directory)


def _build_library(key, sources, compiler, progress=None, directory=None):
    d = cache_dir() if directory is None else directory
    so, side = library_paths(key, d)
    lib = lookup(key, d)
    if lib is not None:
        return lib, False
    with _locked(d / f"sd_{key}.lock"):
        lib = lookup(key, d)                      # another process may have built it meanwhile
        if lib is not None:
            return lib, False
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=d))
        try:
            names = _compile_units(compiler, sources, tmp, progress)
            _link(compiler, ["-shared", "-o", "lib.so"] + [f"{n}.o" for n in names], tmp)
            _seal(tmp / "lib.so", tmp / "lib.sha256", so)
            os.chmod(tmp / "lib.so", 0o700)
            os.replace(tmp / "lib.so", so)
            os.replace(tmp / "lib.sha256", side)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        lib = lookup(key, d)
        if lib is None:
            raise BuildError(f"the freshly built library {so} does not verify")
        return lib, True


def _link(compiler, args, cwd):
    """Link with ``compiler``'s flags and libraries; without compiler-rt (``-rtlib=none``, the pip
    compiler) every symbol must resolve (``--no-undefined``), else the link is made again with it."""
    libs = list(compiler.libs)
    if NO_RTLIB in libs:
        try:
            return compiler.run(list(compiler.flags) + args + ["-Wl,--no-undefined"] + libs, cwd=cwd)
        except BuildError:
            libs.remove(NO_RTLIB)
    return compiler.run(list(compiler.flags) + args + libs, cwd=cwd)


def python_tag() -> str:
    return f"{sys.implementation.name}-{sys.version_info.major}.{sys.version_info.minor}"
