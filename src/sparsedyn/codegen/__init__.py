"""Compiled kernels: trace once, emit native code, run single-state and batched, count every flop.

``k = sparsedyn.compile(model)`` traces the existing NumPy kernels of sparsedyn
(RNEA, bias forces, ABA, CRBA, Carpentier's inverse, forward kinematics) on
symbolic scalars into straight-line programs (:mod:`sparsedyn.symbolic.ir`, :mod:`sparsedyn.codegen.trace`),
emits C (:mod:`.cemit`), builds a shared library in a user-private cache
(:mod:`.build`) and returns a :class:`CompiledModel` whose methods
``k.rnea, k.bias, k.aba, k.crba, k.minv, k.fk`` take one state or a batch.
``sparsedyn.compile`` of an owner of kernels (a sparse structure, an estimator:
anything with ``__sparsedyn_kernels__``) builds the kernels it hands over the same
way (:mod:`.owned`); the owner wraps them (``CompiledStructure``, ``CompiledEstimator``,
written in the layers that own their mathematics).
The compiler never re-implements dynamics: it only records what the kernels do.

``sparsedyn.compile`` is :func:`sparsedyn.codegen.api.compile`; this subpackage
holds the machinery (:mod:`sparsedyn.symbolic.ir`, :mod:`sparsedyn.codegen.trace`, :mod:`.cemit`, :mod:`.build`,
:mod:`.fastcall`); its benchmark against Pinocchio and MuJoCo is ``benchmarks/bench_compiled.py``.
"""

from .api import CompiledModel, KernelInfo, compile, compile_report
from .build import BuildError, CacheDirWarning, CompilerNotFoundWarning
from ..symbolic.ir import Graph, Program, Sym
from .trace import DEFAULT_KERNELS, KERNELS, trace
from .api import UntraceableError
from .owned import CompiledKernels
from . import native  # noqa: F401,E402 - registers the plain calls' native road (and compile's shared object)

__all__ = ["compile", "compile_report", "CompiledModel", "CompiledKernels", "KernelInfo", "CompilerNotFoundWarning",
           "CacheDirWarning", "BuildError", "Graph", "Program", "Sym", "trace", "DEFAULT_KERNELS", "KERNELS"]
