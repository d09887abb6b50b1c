"""The pip compiler and the target: what the build cache keys compiled code by, beside the compiler.

* :func:`pip_compiler`: clang as ``zig cc`` from the ``ziglang`` package (a dependency of sparsedyn),
  the C compiler of a machine without one (see :mod:`.build`);
* :func:`target`: the platform and the CPU's instruction-set features, where ``-march=native`` code
  built here runs: part of every key, recorded in every kernel manifest;
* :func:`describe`: one line naming a compiler, for build lines and reports;
* :func:`machine_id`: the machine's CPU and name, which key the cached probes of compilers;
* :func:`compiler_env`: the environment the pip compiler runs in: zig's caches inside sparsedyn's
  build cache, never the user's ``~/.cache/zig``.

zig's caches
    ``zig cc`` keeps a *global* cache (the C library's stubs for the target, built on its first
    link: about 0.2 s and 1.3 MB) and a *local* cache (a copy of every object and library it
    builds).  Left to itself it puts both in ``~/.cache/zig``, which then grows by every kernel ever
    built.  sparsedyn points the global cache at ``<build cache>/zig-<ziglang version>`` (one per
    version; the others are removed when a new version is first probed) and the local cache into
    the private temporary directory of each build, removed with it: zig's share of the disk stays
    a few megabytes.  ``-rtlib=none`` (the kernels call nothing of compiler-rt: the link is checked
    with ``--no-undefined``) spares the first link building compiler-rt, 4-16 s of CPU per set of
    flags.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["pip_compiler", "is_pip_compiler", "describe", "batch_threads", "target", "compiler_env", "zig_cache_dir",
           "machine_id"]


def pip_compiler():
    """``[zig, "cc"]``: the C compiler of the ``ziglang`` package (clang, with the C libraries of
    every platform it targets), or ``None`` when the package is not installed."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("ziglang")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        for name in ("zig", "zig.exe"):
            exe = Path(d) / name
            if exe.is_file() and os.access(exe, os.X_OK):
                return [str(exe), "cc"]
    return None


def is_pip_compiler(compiler) -> bool:
    """Whether ``compiler`` (a :class:`Compiler` or an argv list) is the pip compiler."""
    argv = getattr(compiler, "argv", compiler) or []
    pip = pip_compiler()
    return pip is not None and list(argv[:2]) == pip


def describe(compiler) -> str:
    """One line naming ``compiler``: its ``--version`` line and command, and whether it is the
    system's or the pip compiler (``"none"`` for ``None``)."""
    if compiler is None:
        return "none"
    name = compiler.ident.split(" | ")[0]
    where = "pip compiler (ziglang)" if is_pip_compiler(compiler) else "system compiler"
    return f"{name} [{where}: {' '.join(compiler.argv)}]"


def _ziglang_version() -> str:
    from importlib import metadata
    try:
        return metadata.version("ziglang")
    except metadata.PackageNotFoundError:        # pragma: no cover - a zig found without its metadata
        return "unknown"


def zig_cache_dir(root) -> Path:
    """zig's global cache for the build cache ``root``: ``root/zig-<ziglang version>``."""
    return Path(root) / f"zig-{_ziglang_version()}"


def prune_zig_caches(root):
    """Remove the zig caches of other ziglang versions from the build cache ``root`` (an upgrade's
    leftovers; run when the pip compiler is probed, once per version and machine)."""
    import shutil
    keep = zig_cache_dir(root).name
    for d in Path(root).glob("zig-*"):
        if d.name != keep and d.is_dir() and not d.is_symlink():
            shutil.rmtree(d, ignore_errors=True)


def compiler_env(argv, cwd, root):
    """The environment of ``argv`` run in the directory ``cwd`` (a private temporary directory of the
    build cache ``root``): ``None`` (this process's) for a system compiler; for the pip compiler,
    zig's global cache in ``root`` and its local cache in ``cwd`` (see the module docstring)."""
    if not is_pip_compiler(argv):
        return None
    return dict(os.environ, ZIG_GLOBAL_CACHE_DIR=str(zig_cache_dir(root)),
                ZIG_LOCAL_CACHE_DIR=str(Path(cwd) / "zig-local"))


def batch_threads(compiler) -> str:
    """Who runs a batch's threads for kernels of ``compiler``: OpenMP where it has it, else
    sparsedyn (the runtime's thread pool, or the XLA handler's threads), one per core either way."""
    return "OpenMP" if compiler.openmp else "sparsedyn's (no OpenMP)"


def machine_id() -> str:
    """What identifies this machine's CPU and compiler installation for the probe cache."""
    import platform
    h = hashlib.sha256(platform.node().encode() + platform.machine().encode())
    try:
        with open("/proc/cpuinfo", "rb") as f:
            for line in f:
                if line.startswith((b"model name", b"flags", b"Features")):
                    h.update(line)
    except OSError:
        h.update(platform.processor().encode())
    return h.hexdigest()


_target = None


def target() -> str:
    """The platform and the CPU's instruction-set features, as ``"<system>-<machine> cpu:<hash>"``:
    where ``-march=native`` code built here runs (the CPU's feature flags: ``flags`` or ``Features``
    of ``/proc/cpuinfo`` on Linux, ``sysctl machdep.cpu`` / ``hw.optional`` on macOS, the
    processor's name elsewhere).  The hash is over the sorted flags, so two machines of one CPU
    level share it whatever their host names, clock speeds or core counts."""
    global _target
    if _target is None:
        import platform
        feats = set()
        try:
            with open("/proc/cpuinfo", "rb") as f:
                for line in f:
                    if line.startswith((b"flags", b"Features", b"isa", b"cpu model")):
                        feats.update(line.split(b":", 1)[-1].decode(errors="replace").split())
                    elif not line.strip() and feats:
                        break                  # the first processor's block is enough
        except OSError:
            pass
        if not feats and sys.platform == "darwin":
            for args in (["sysctl", "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"],
                         ["sysctl", "hw.optional"]):
                try:
                    r = subprocess.run(args, capture_output=True, text=True, timeout=10)
                    feats.update(r.stdout.split())
                except (OSError, subprocess.SubprocessError):
                    pass
        if not feats:
            feats.add(platform.processor() or "unknown")
        h = hashlib.sha256(" ".join(sorted(feats)).encode()).hexdigest()[:16]
        _target = f"{platform.system()}-{platform.machine()} cpu:{h}"
    return _target
