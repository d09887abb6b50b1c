"""The pip compiler and the target: what the build cache keys compiled code by, beside the compiler.

* :func:`pip_compiler`: clang as ``zig cc`` from the ``ziglang`` package (a dependency of sparsedyn),
  the C compiler of a machine without one (see :mod:`.build`);
* :func:`target`: the platform and the CPU's instruction-set features, where ``-march=native`` code
  built here runs: part of every key, recorded in every kernel manifest;
* :func:`describe`: one line naming a compiler, for build lines and reports.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["pip_compiler", "is_pip_compiler", "describe", "target"]


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
