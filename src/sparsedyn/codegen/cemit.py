"""C code for :class:`~sparsedyn.symbolic.ir.Program` objects.

For a kernel ``K`` with inputs ``x0, x1, ...`` and outputs ``y0, y1, ...``
(flat C-order ``double`` arrays of one state each) two variants exist, each
built into its own shared library:

``single``
    ``void sd_K(const double *x0, ..., double *y0, ...)``: one state, the
    straight-line program on ``double`` scalars; and
    ``void sd_K_loop(long n, const double *x0, ..., double *y0, ..., int nthreads)``:
    ``n`` states one after the other (array of structures: the layout of a
    C-contiguous NumPy array ``(n, size)``), OpenMP across states.

``batch``
    ``int sd_K_batch(long n, const double *x0, ..., double *y0, ..., int nthreads)``:
    the same ``n`` states processed in blocks of ``SD_W`` (the SIMD width: 8
    with AVX-512, 4 with AVX, else 2; 4 with AVX-512 for a kernel whose workspace
    would not fit the L1 cache at 8).  A block is gathered into a
    structure-of-arrays buffer (one vector of ``SD_W`` doubles per input
    element), the *same* program runs on GCC/Clang vector types (one vector
    instruction per IR operation, across states; ``sin``/``cos`` from glibc's
    libmvec where available), and the results are scattered back (a result of
    more than 256 elements ``SD_W`` elements at a time: ``SD_W`` vectors
    transposed in registers, written to ``SD_W`` rows, past the caches in a large
    batch); the last, partial block is padded with copies of its last state.
    Blocks are shared among ``nthreads`` OpenMP threads.  Returns 0 when a work
    buffer could not be allocated.

Code shape: a large straight-line function makes the C compiler's register
allocator superlinearly slow, so the program is cut into segments of ``chunk``
operations, one ``noinline`` function each; values live across segments pass
through a small workspace array whose slots are reused once a value is dead
(linear scan over segments).  The operations run in the traced order or in that
of :func:`schedule` (each value computed just before its first use, output after
output), whichever passes fewer values between segments: a derivative kernel
traced loop by loop computes most of its values long before their use, and the
traffic of its workspace, not its arithmetic, bounded the batch (see
:func:`schedule` for the measurements).  Segments are grouped into translation units of
about ``unit_size`` operations so that they compile in parallel.  A value used once,
by an operation of its own segment, is written inline into that operation's
(fully parenthesised) expression instead of getting a declaration, and the
prelude declares the four library functions it needs instead of including
``<math.h>``/``<stdlib.h>``: both cut the C front end's work, and neither changes
a single rounding (``-ffp-contract=off``; compiled results equal
:meth:`~sparsedyn.symbolic.ir.Program.evaluate` bit for bit).

Dense block products (:meth:`~sparsedyn.symbolic.ir.Graph.matmul`) run as loops in either code
shape: in straight-line code each starts a segment of its own (:mod:`.emit_blocks`); the batch
variant writes them out as scalar operations where it stays unrolled (:func:`_expanded_ops`).

Large programs (:func:`code_shape`: :data:`LOOP_THRESHOLD` operations or more,
160,000; ``$SPARSEDYN_LOOP_THRESHOLD``) are emitted as loops over tables instead
(:func:`_loop_functions`): unrolled, their size, and the C compiler's time, grow
with the number of bodies times the size of the result (minv of a 100-body chain:
112,000 operations, 12 s of compiler CPU unrolled, 3.5 s as loops), while the loops
grow with the number of distinct repeated blocks.  So is each piece of an iterative kernel of that
size (:mod:`.emit_iterative`).  Same operations, same roundings;
the unrolled code, which keeps values in registers, runs 1.1-2.3 times faster up to
the threshold (measured from 40,000 to 182,000 operations), which bounds the cost of
its cold build (about 0.12 ms of compiler CPU an operation).  The batch variant has
the same threshold (:data:`BATCH_LOOP_FACTOR` is 1): its loops keep every value in
its own slot of the workspace (a block of ``SD_W`` states: 22,000 vectors, 700 kB,
for aba_derivatives of talos_reduced), far beyond the caches.

Only numbers and generated identifiers appear in the source: constants are
written as exact C99 hexadecimal floating-point literals, temporaries are
``tN``, kernel identifiers are checked against ``[a-z][a-z0-9_]*``, the cache
key against lowercase hexadecimal, and no name from the model (bodies, joints,
files) is ever emitted.  Every library also exports ``int sd_lanes(void)`` and
``const char *sd_cache_key(void)`` (the build-cache key it was built for, so a
loaded library can prove what it is).
"""

from __future__ import annotations

import os
import re
from importlib import resources

from ..symbolic.ir import ATAN2, COPYSIGN, COS, SIN, SQRT, Program, paused_gc
from ..symbolic.loop import LoopProgram
from .emit_batch import _batch_entry, _rows_function
from .emit_common import _ops, _sizes, _units, _workspace
from .emit_iterative import _emit_loop
from .emit_iterative_vec import vector_loop_fits
from .emit_loops import _loop_functions, statement_shapes
from .emit_unrolled import _chunks, _functions, _traffic, schedule  # noqa: F401  (_chunks, _traffic: tests)

__all__ = ["emit_program", "emit_units", "emit_unit", "PRELUDE", "code_shape", "loop_threshold", "LOOP_THRESHOLD", "BATCH_LOOP_FACTOR",
           "REPEATED_MIN_OPS", "REPEATED_SHAPES", "schedule"]

#: The C prelude of every translation unit, ``prelude.h`` (the library functions and vector types
#: used, the vector width ``SD_W``, export macros; emitted verbatim, so its first line is the
#: generated file's banner) followed by the register transposes ``sd_rows``.
PRELUDE = resources.files(__package__).joinpath("prelude.h").read_text(encoding="utf-8") \
    + "".join(_rows_function(w) for w in (2, 4, 8))

#: First line of a translation unit whose batch kernel runs on half-width vectors (AVX-512 machines).
_NARROW = "#define SD_NARROW 1\n"

_LANES = """
SD_EXPORT int sd_lanes(void) { return SD_W; }
"""

#: Workspace slots (doubles) above which the single-state entry points take their workspace from
#: the heap instead of the stack.
_STACK_SLOTS = 16384
#: Operations of a program from which it is emitted as loops over tables (:func:`_loop_functions`)
#: rather than unrolled (``$SPARSEDYN_LOOP_THRESHOLD`` overrides it; see :func:`code_shape`).
#: Unrolled code keeps values in registers and runs 1.1-2.3 times faster than the loops at these
#: sizes, but its cold build costs 1.5-5 times the CPU (about 0.12 ms an operation;
#: ``benchmarks/bench_loops.py`` compares both): the threshold caps that cost at about 20 s of CPU
#: for one kernel.  It is also the batch variant's (:data:`BATCH_LOOP_FACTOR`).
LOOP_THRESHOLD = 160000
#: The batch variant is emitted as loops from this many times :func:`loop_threshold` operations:
#: its loops read and write every value in a workspace of one slot per statement, beyond the
#: caches, while the unrolled code keeps most values in registers (about twice as fast a state).
BATCH_LOOP_FACTOR = 1
#: A program of :data:`REPEATED_MIN_OPS` operations or more whose statements (:func:`_statements`)
#: take at most :data:`REPEATED_SHAPES` distinct shapes is emitted as loops below the threshold too:
#: the program of a chain of like bodies, which its loops fold into a few dozen blocks (its cold
#: build about 3-4 times cheaper, its calls about 1.45 times longer), where a humanoid's derivative
#: kernels take 128-210 shapes and stay unrolled (``benchmarks/bench_build.py``).  Not applied when
#: ``$SPARSEDYN_LOOP_THRESHOLD`` is set.
REPEATED_MIN_OPS = 40000
REPEATED_SHAPES = 64


def loop_threshold() -> int:
    """:data:`LOOP_THRESHOLD`, or ``$SPARSEDYN_LOOP_THRESHOLD`` when set (an integer)."""
    env = os.environ.get("SPARSEDYN_LOOP_THRESHOLD")
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            raise ValueError(f"SPARSEDYN_LOOP_THRESHOLD={env!r}: expected an integer (operations)") from None
    return LOOP_THRESHOLD


def code_shape(prog: Program, variant: str = "single") -> str:
    """``"unrolled"`` (straight-line code, :func:`_functions`) for a program of fewer operations
    than :func:`loop_threshold` (times :data:`BATCH_LOOP_FACTOR` for the ``batch`` variant; the
    elements of dense block products, :meth:`~sparsedyn.symbolic.ir.Graph.matmul`, not counted: a
    block runs as a loop in either shape) and not made of a few repeated statement shapes
    (:data:`REPEATED_SHAPES`), else ``"loops"`` (:func:`_loop_functions`).
    An iterative kernel (:class:`~sparsedyn.symbolic.loop.LoopProgram`) is ``"iterative"``: its
    pieces are straight-line functions driven by a loop (:mod:`.emit_iterative`); ``"iterative, vector
    loop"`` where its loop entry runs blocks of states on vectors (:mod:`.emit_iterative_vec`); either
    with ``", pieces in loops"`` where a piece of :func:`loop_threshold` operations or more is loops."""
    if isinstance(prog, LoopProgram):
        shape = "iterative, vector loop" if variant == "single" and vector_loop_fits(prog) else "iterative"
        return shape + (", pieces in loops" if any(_ops(p) >= loop_threshold() for p in prog.programs) else "")
    nops = _ops(prog)
    if nops >= loop_threshold() * (BATCH_LOOP_FACTOR if variant == "batch" else 1):
        return "loops"
    if nops >= REPEATED_MIN_OPS and not os.environ.get("SPARSEDYN_LOOP_THRESHOLD") \
            and statement_shapes(prog, REPEATED_SHAPES) <= REPEATED_SHAPES:
        return "loops"
    return "unrolled"


def _expanded_ops(prog) -> int:
    """Operations of ``prog`` with its block products written out (two per pair but one per element)."""
    nops = _ops(prog)
    return nops + sum(2 * int(b.pairs.sum()) - int((b.pairs > 0).sum()) for b in prog.blocks)


def emit_program(prog: Program, cname: str, variant: str = "single", chunk: int = 200,
                 unit_size: int = 4000, checks=None) -> list:
    """C translation units (without the prelude) of kernel ``prog`` under the identifier ``cname``.

    ``variant``: ``"single"`` emits the scalar program with the entry points
    ``sd_{cname}`` (one state) and ``sd_{cname}_loop`` (a loop over states);
    ``"batch"`` emits the vector program with ``sd_{cname}_batch``.
    ``chunk``: operations per generated C function (see :func:`_functions`);
    ``unit_size``: operations per translation unit, so that a large kernel
    compiles in parallel on several cores.  ``checks`` (batch only): ``(tol, ((input index,
    (offset, ...)), ...))``, the unit quaternions ``x[offset:offset + 4]`` that the batch entry
    point checks (``| |x|^2 - 1 | <= tol``) while it gathers the states, besides finiteness.
    """
    return list(emit_units(prog, cname, variant, chunk, unit_size, checks))


def emit_units(prog: Program, cname: str, variant: str = "single", chunk: int = 200, unit_size: int = 4000,
               checks=None):
    """:func:`emit_program`'s translation units, an iterator: each unit is written when it is asked
    for, so that the C compiler works on the first ones while Python writes the next
    (:func:`~.build.build_library`).  The arguments are checked at once; Python's cyclic garbage
    collector is paused while a unit is written, not between two."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", cname):
        raise ValueError(f"kernel identifier must match [a-z][a-z0-9_]*, got {cname!r}")
    if variant not in ("single", "batch"):
        raise ValueError(f"variant: expected 'single' or 'batch', got {variant!r}")
    if isinstance(prog, LoopProgram):
        return _gc_paused(_emit_loop, prog, cname, variant, chunk, unit_size, loop_threshold())
    return _gc_paused(_emit_program, prog, cname, variant, chunk, unit_size, checks)


def _gc_paused(make, *args):
    """The items of the iterable ``make(*args)``, each made with the garbage collector paused."""
    with paused_gc():
        it = iter(make(*args))
    while True:
        with paused_gc():
            item = next(it, None)
        if item is None:
            return
        yield item


def _emit_program(prog, cname, variant, chunk, unit_size, checks):
    nin, nout = _sizes(prog.input_shapes), _sizes(prog.output_shapes)
    xs = [f"x{k}" for k in range(len(nin))]
    ys = [f"y{k}" for k in range(len(nout))]
    pub = ", ".join([f"const double *{x}" for x in xs] + [f"double *{y}" for y in ys])
    sargs = ", ".join([f"x{k} + s * {n}" for k, n in enumerate(nin)] + [f"y{k} + s * {n}" for k, n in enumerate(nout)])
    gen = _loop_functions if code_shape(prog, variant) == "loops" else _functions
    if variant == "batch" and gen is _functions and prog.blocks and \
            _expanded_ops(prog) < loop_threshold() * BATCH_LOOP_FACTOR:
        # A batch's elements are vectors: a block's operands and result, a vector each in the
        # workspace, leave the caches (aba_derivatives of g1: 1.5 times slower calls), where its
        # products written out stay in registers.
        prog = prog.expanded()
    if variant == "single":
        funcs, drv, nws = gen(prog, f"{cname}_s", "double", {SIN: "sin", COS: "cos", SQRT: "sqrt", ATAN2: "atan2",
                                                              COPYSIGN: "copysign"}, chunk)
        alloc1, free1 = _workspace(nws, nout, _STACK_SLOTS)
        alloc2, free2 = _workspace(nws, nout, _STACK_SLOTS, "    ", "s * ", "continue")
        tail = [f"/* kernel {cname}: {len(prog.nodes)} IR nodes, workspace {nws} */", drv,
                f"SD_EXPORT void sd_{cname}({pub})", "{", *alloc1,
                f"  {cname}_s({', '.join(xs + ys)}, w);", *free1, "}",
                f"SD_EXPORT void sd_{cname}_loop(long n, {pub}, int nthreads)", "{",
                "#ifdef _OPENMP",
                "  #pragma omp parallel for schedule(static) num_threads(nthreads > 0 ? nthreads : 1) "
                "if (nthreads > 1 && n > 1)",
                "#endif",
                "  for (long s = 0; s < n; s++) {", *alloc2,
                f"    {cname}_s({sargs}, w);", *free2, "  }", "}"]
    else:
        vfn = {SIN: "sd_vsin", COS: "sd_vcos", SQRT: "sd_vsqrt", ATAN2: "sd_vatan2", COPYSIGN: "sd_vcopysign"}
        consts = [] if gen is _functions else None
        funcs, drv, nws = (_functions(prog, f"{cname}_v", "sd_vd", vfn, chunk, consts) if consts is not None
                           else gen(prog, f"{cname}_v", "sd_vd", vfn, chunk))
        tail = _batch_entry(cname, drv, nin, nout, nws, pub, checks, consts)
    # A batch kernel whose workspace passes 48 kB at 8 lanes (768 vectors, a usual L1 data cache) runs
    # 4 lanes wide: its values then stay twice as long in the L1 cache, and such a kernel is bound by
    # the traffic of its workspace, not by its arithmetic; a smaller one is faster at 8 lanes.
    return _units(funcs, tail, unit_size, _NARROW if variant == "batch" and nws > 768 else "")


def emit_unit(parts: list, key: str | None = None) -> str:
    """One translation unit: the prelude, the given sources and (if ``key``) ``sd_cache_key``."""
    src = [PRELUDE]
    if any(p.startswith(_NARROW) for p in parts):      # the vector width is chosen before the prelude
        src.insert(0, _NARROW)
    src += parts
    if key is not None:
        if not re.fullmatch(r"[0-9a-f]{16,128}", key):
            raise ValueError("cache key must be lowercase hexadecimal")
        src.append(_LANES)
        src.append(f'SD_EXPORT const char *sd_cache_key(void) {{ return "{key}"; }}\n')
    return "\n".join(src)
