"""``sparsedyn.compile(model)``: the compiled kernels of a fixed model (and of fixed problems).

Offline step (once per model, cached on disk): every kernel is traced into a
straight-line program (:mod:`sparsedyn.codegen.trace`, :mod:`sparsedyn.symbolic.ir`), emitted as C (:mod:`.cemit`)
and built into shared libraries (:mod:`.build`): a *single* library (scalar
code, one state per call) at :func:`compile` time and a *batch* library (code
vectorised across states) at the first batch call or with ``vectorize=True``.
Online step: the returned :class:`CompiledModel`'s methods only move arrays in
and out of native code; one state goes through a small C extension
(:mod:`.fastcall`) without a Python frame in between.

Cache levels
    ``m_<model key>.json`` maps a *model fingerprint* (structure and every
    constant of the model, the sources of the traced modules and of this
    subpackage, the compiler identity and flags, the kernel list, the variant)
    to the *library key* and the flop counts, so a model compiled before is
    loaded without tracing (a few ms).  The library itself,
    ``sd_<library key>.so``, is keyed by the names and the IR content hashes of its
    kernels, the compiler identity and flags, the variant and the sparsedyn
    version.

Without a working C compiler everything still works: the methods call the
NumPy functions, and :func:`compile` warns once per process
(:class:`~sparsedyn.codegen.build.CompilerNotFoundWarning`).

Sparse problems and estimators (``compile(problem | structure | estimation
problem | estimator)``) are owners of kernels: they hand their kernels over
through ``__sparsedyn_kernels__`` (:mod:`sparsedyn.kernels`, *Owners*), which
:mod:`.owned` builds, caches (the model key of the manifest extended by the
owner's fingerprint) and runs on the shared :class:`KernelSet`.
"""

from __future__ import annotations

import time

from .. import _checks
from ..symbolic.trace import UntraceableError
from . import build, toolchain
from .compiled_model import CompiledModel
from .owned import CompiledKernels, compile_owned
from .runtime import KernelInfo, KernelSet, _progress_fn, find_compiler_or_warn
from .trace import DEFAULT_KERNELS

__all__ = ["compile", "CompiledModel", "CompiledKernels", "KernelSet", "KernelInfo", "UntraceableError",
           "compile_report", "build_info", "prebuild_report"]


#: ``model -> CompiledModel`` of plain calls, set by :mod:`.native` (imported with this package).
shared_model = None


def compile(model, kernels=(), *, vectorize=None, progress=None):  # noqa: A001
    """Compile ``model`` (see :class:`CompiledModel`), or a sparse problem or an estimator.

    ``k = sparsedyn.compile(model)`` returns at once; each function is traced and
    built on its first call (cached on disk, so a later process loads it), and
    ``k`` is accepted wherever the model is::

        k = sd.compile(model)
        tau = sd.rnea(k, q, v, a)          # or k.rnea(q, v, a); q, v, a may carry batch axes
        J = sd.frame_jacobian(k, q, "tool0")

    ``kernels``: functions to add or build now.  A callable ``fn(model, q, ...)``
    written with sparsedyn's functions and NumPy becomes method ``k.<fn name>``
    (see :meth:`CompiledModel.add_kernel`); a name of a registered function
    (``"rnea"``, ``"rnea_ext"`` with its optional arrays) is built now instead
    of at its first call.

    ``vectorize``: ``True`` builds the batch form (code vectorised across
    states) together with the single-state form, ``None`` (default) at the
    first batch call, ``False`` never (batches then loop over the scalar code,
    still in C and on all cores).  ``progress``: ``True`` prints the steps to
    stderr, a callable receives them as strings, ``None`` (default) prints them
    for models with 20 or more dofs when stderr is a terminal.

    ``model`` may also be

    * an owner of kernels (an object with ``__sparsedyn_kernels__()``, see :mod:`sparsedyn.kernels`):
      returns a :class:`~sparsedyn.codegen.owned.CompiledKernels` (a method per kernel), or what the
      owner's ``__sparsedyn_compiled__`` makes of it;
    * a :class:`sparsedyn.sparse.Problem` (analysed here with the default ordering) or a
      :class:`sparsedyn.sparse.Structure` (owners of kernels): returns a
      :class:`~sparsedyn.sparse.compiled.CompiledStructure` whose
      ``solve(q, v, y=None, gravity=None, check="auto", info=False)`` returns what
      :meth:`Structure.solve <sparsedyn.sparse.Structure.solve>` returns;
    * a :class:`sparsedyn.constraints.ConstraintSet` (an owner of kernels): returns a copy that runs
      compiled (see :mod:`sparsedyn.constraints.compiled`), e.g. ``simulate(sd.compile(cs), q0, v0, 1.0, 1e-3)``;
    * an :class:`sparsedyn.estimation.EstimationProblem` (analysed here) or an
      :class:`~sparsedyn.estimation.Estimator` (owners of kernels): returns a
      :class:`~sparsedyn.estimation.compiled.CompiledEstimator` whose
      ``solve(q, v, y, covariance=False, gravity=None)`` returns what
      :meth:`Estimator.solve <sparsedyn.estimation.Estimator.solve>` returns.

    Without a C compiler (none on ``PATH``, or ``$SPARSEDYN_CC`` naming none)
    everything runs through the NumPy functions and a
    :class:`~sparsedyn.codegen.build.CompilerNotFoundWarning` is issued once per
    process.
    """
    _checks.model_first("compile", model, "model, kernels")
    if isinstance(model, CompiledModel):
        model = model.model
    if getattr(type(model), "__sparsedyn_kernels__", None) is not None:     # an owner of kernels
        if kernels:
            raise TypeError("compile: kernels= applies to models, not to owners of kernels")
        return compile_owned(model, find_compiler_or_warn(), progress, vectorize)
    if isinstance(kernels, str) or callable(kernels):
        kernels = (kernels,)
    compiler = find_compiler_or_warn()
    if not kernels and vectorize is None and progress is None and shared_model is not None:
        k = shared_model(model)             # the object plain calls use (one per model fingerprint)
        if k._compiler is compiler:
            return k
    return CompiledModel(model, compiler, _progress_fn(progress, model), vectorize, tuple(kernels))


def compile_report(model, kernels=DEFAULT_KERNELS, progress=None, vectorize=True) -> str:
    """Text for ``sparsedyn compile MODEL``: flop counts per kernel (from the IR) and build times."""
    t0 = time.perf_counter()
    cm = compile(model, tuple(kernels), progress=progress, vectorize=vectorize)
    wall = time.perf_counter() - t0
    lines = [f"model {model.name!r}: {model.nbodies} bodies, nq={model.nq}, nv={model.nv}"]
    if cm.compiled:
        c = cm._compiler
        lines.append(f"compiler: {build.describe(c)}; flags: {' '.join(c.flags)}; target: {build.target()}")
        lines.append(f"batch: {cm.lanes} states per vector, threads: {toolchain.batch_threads(c)}, "
                     f"single calls via {'the C fast path' if cm.fastcall else 'ctypes'}")
    else:
        lines.append("no C compiler: NumPy fallback (flop counts below are still from the IR)")
    hdr = f"{'kernel':18s} {'mul':>8s} {'add':>8s} {'div':>5s} {'sqrt':>5s} {'sin':>5s} {'cos':>5s} {'total':>9s} " \
          f"{'(neg)':>6s} {'IR nodes':>9s}"
    lines.append(hdr)
    for n in kernels:
        f = cm.flops(n)
        lines.append(f"{n:18s} {f['mul']:8d} {f['add']:8d} {f['div']:5d} {f['sqrt']:5d} {f['sin']:5d} {f['cos']:5d} "
                     f"{f['total']:9d} {f['neg']:6d} {cm.kernels[n].nodes:9d}")
    if cm.compiled:
        for variant, sec in cm.build_seconds.items():
            how = "built (trace + C compile)" if cm.built[variant] else "loaded from the cache"
            lines.append(f"{variant:6s} library: {how} in {sec:.2f} s")
        lines.append(f"total {wall:.2f} s; cache: {build.cache_dir()}")
    else:
        lines.append(f"traced in {wall:.2f} s")
    return "\n".join(lines)



def build_info() -> str:
    """Lines saying how native kernels are built here: the compiler (the system's or the pip
    compiler, or none: NumPy answers), the target (platform and CPU features) and the cache."""
    c = build.find_compiler()
    lines = [f"compiler: {build.describe(c)}" + ("" if c is None else f"; batch threads: {toolchain.batch_threads(c)}")]
    if c is None:
        lines.append("  no C compiler: plain calls answer on NumPy (install gcc or clang, or pip install ziglang)")
    lines += [f"target: {build.target()}", f"cache: {build.cache_dir()}"]
    return "\n".join(lines)


def prebuild_report(model, kernels=DEFAULT_KERNELS, progress=None, vectorize=True) -> str:
    """Text for ``sparsedyn build MODEL``: build (or find) the single-state and batch libraries of
    ``kernels`` in the cache, the ones plain calls and :func:`compile` load, and say what was done.
    Functions with static arguments (a frame...) build per argument on first use: refused here."""
    from ..kernels import REGISTRY
    for n in kernels:
        base = n[:-4] if n.endswith("_ext") and n[:-4] in REGISTRY else n
        if base not in REGISTRY:
            raise ValueError(f"--kernels: unknown function {n!r}; registered: {', '.join(REGISTRY)}")
        if REGISTRY[base].static:
            raise ValueError(f"--kernels: {n!r} takes {', '.join(REGISTRY[base].static)}: it is built per value on "
                             f"its first call, not prebuilt")
    return compile_report(model, tuple(kernels), progress, vectorize)
