"""A tiny CPython extension that calls a compiled kernel for one state with minimal overhead.

Measured choice (see ``benchmarks/bench_compiled.py --calls``): a ``ctypes`` call
of a kernel with four pointer arguments costs about 1.5-3 µs from Python once
the pointers of the NumPy arrays are extracted (``arr.ctypes.data`` alone is
~0.3 µs per array), which is more than Pinocchio's whole RNEA on a 7-dof arm;
a Python function in front of the call costs another ~0.1 µs, as much as a
whole ``integrate``.  cffi is not installed by default.  This module's two
callable types and the front are implemented in C (vectorcall: no argument tuple, no Python
frame).

``Kernel(fptr, in_shapes, out_shapes, fallback, quats=None)``: one compiled kernel.

* ``fptr``: address of ``void f(const double *x0, ..., double *y0, ...)``;
* ``in_shapes`` / ``out_shapes``: tuples of shape tuples (one state);
* ``fallback``: called with the same arguments whenever the fast path does not
  apply (keyword arguments, a batch, another dtype, a non-contiguous array, the
  wrong shape, a NaN or infinite input, a quaternion that is not of unit
  norm...), so the object behaves exactly like ``fallback`` otherwise (which
  checks the arguments as the NumPy functions do and raises their errors);
* ``quats`` (optional): ``(tol, ((input index, (offset, ...)), ...))``: the
  quaternions ``x[offset:offset + 4]`` of those inputs must satisfy
  ``| |quat|^2 - 1 | <= tol``.  Every input is checked for finiteness.

``Method(fallback, table, nin, static_names, static_defaults)``: a method of a
compiled model.  A call with the ``nin`` state arrays by position, followed by
the static arguments (by position or keyword; the trailing ones may be left to
their defaults), looks the tuple of static arguments up in ``table`` (a dict
that the Python side fills with ``Kernel`` objects as variants are built) and
runs that kernel; any other call, a missing variant, or a call the kernel does
not take goes to ``fallback`` with the original arguments.

``front(function, table, name, nin, nmin, nfast, statics, sequences, result)``: sets the
vectorcall of a public function (:func:`sparsedyn.kernels.dispatch.set_front`, whose
:class:`~sparsedyn.kernels.dispatch.Direct` gives the arguments after ``table``) to one that calls
``function.__globals__[table][id(model)][name]`` for a direct call, with no Python frame, and
runs the function's own code otherwise; ``front(function, None)`` puts the function's own
vectorcall back.

The two callable types take instance attributes (``__doc__``, ``__signature__``, ``__name__``...)
so that ``help()`` and :func:`inspect.signature` describe them like the
functions they stand for.  The fast path needs float64, C-contiguous, aligned,
native-byte-order arrays of exactly the one-state shapes; outputs are new
arrays.  The extension is compiled against the Python and NumPy headers (NumPy
ships them); it is generic (no model in it), built once per Python version and
compiler into the build cache, and used only when the Python headers are
available; otherwise the kernels are called through ``ctypes``.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import re
import sysconfig
import threading
from importlib import resources
from pathlib import Path

__all__ = ["load_fastcall", "FASTCALL_SOURCE"]


def _pasted(name):
    """The C source ``name`` of this package with each file of it that it includes (``#include "x.c"``) pasted
    where it includes it, and so on in those."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return _LOCAL.sub(lambda m: _pasted(m.group(1)), text)


_LOCAL = re.compile(r'^#include "(\w+\.c)".*$', re.M)
#: The extension's C source, fastcall.c (the kernels' and methods' types) with the files it includes pasted
#: in, front.c (a public function's direct road), scene_step.c with warm_match.c (a step in a scene in one
#: call, a trajectory's warm start), scene_rollout.c (a trajectory's steps, collide's hits) and found_batch.c
#: (a batch's candidates).
FASTCALL_SOURCE = _pasted("fastcall.c")

_lock = threading.Lock()
_loaded: dict = {}


def load_fastcall(compiler):
    """The fast-call extension module for ``compiler`` (built and cached on first use), or ``None``
    when the Python headers are missing or the build fails."""
    from . import build

    import numpy as np

    include = sysconfig.get_paths().get("include")
    np_include = np.get_include()
    if not include or not Path(include, "Python.h").is_file() or compiler is None \
            or not Path(np_include, "numpy", "arrayobject.h").is_file():
        return None
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    ident = "\n".join([FASTCALL_SOURCE, compiler.ident, " ".join(compiler.flags), include, suffix,
                       build.python_tag(), np.__version__, np_include])
    key = hashlib.sha256(ident.encode()).hexdigest()[:32]
    modname = f"sparsedyn_fastcall_{key[:16]}"
    with _lock:
        if key in _loaded:
            return _loaded[key]
        mod = None
        try:
            path = build.sealed_file(modname, suffix, lambda path, side, d: _build(
                compiler, [include, np_include], modname, path, side, d))
            spec = importlib.util.spec_from_file_location(modname, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except (OSError, ImportError, build.BuildError):
            mod = None
        _loaded[key] = mod
        return mod


def _build(compiler, includes, modname, path, side, d):
    from . import build

    flags = [f for f in compiler.flags if f != "-fopenmp"] + ["-O2"] + [f"-I{i}" for i in includes]
    # No compiler-rt for the pip compiler's link either (see .toolchain); not --no-undefined: an
    # extension module leaves Python's symbols to the interpreter.
    rt = [f for f in compiler.libs if f == build.NO_RTLIB]
    build.build_sealed(compiler, flags, "fastcall.c", FASTCALL_SOURCE.replace("MODNAME", modname), rt, path, side, d)
