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

Large programs (:func:`code_shape`: :data:`LOOP_THRESHOLD` operations or more,
160,000; ``$SPARSEDYN_LOOP_THRESHOLD``) are emitted as loops over tables instead
(:func:`_loop_functions`): unrolled, their size, and the C compiler's time, grow
with the number of bodies times the size of the result (minv of a 100-body chain:
112,000 operations, 12 s of compiler CPU unrolled, 3.5 s as loops), while the loops
grow with the number of distinct repeated blocks.  Same operations, same roundings;
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

import dataclasses
import os
import re

from ..symbolic.ir import ADD, ATAN2, CONST, COPYSIGN, COS, DIV, INPUT, MUL, NEG, SIN, SQRT, SUB, Program, paused_gc
from ..symbolic.loop import LoopProgram

__all__ = ["emit_program", "emit_unit", "PRELUDE", "code_shape", "loop_threshold", "LOOP_THRESHOLD", "BATCH_LOOP_FACTOR",
           "schedule"]


def _rows_function(W: int) -> str:
    """C function ``sd_rows(y, n, Y, nt)`` for ``SD_W == W``: the ``W`` vectors ``Y[0..W-1]`` (element
    ``j`` of states ``0..W-1`` in ``Y[j]``) transposed in registers (``log2 W`` stages of two-source
    shuffles, each swapping the off-diagonal blocks of a size) and stored as ``W`` elements of ``W``
    rows, row ``s`` at ``y + s * n``; with ``nt`` by non-temporal stores (every row 16-byte aligned)."""
    lines = [f"#if SD_W == {W}",
             "static inline void sd_rows(double *restrict y, long n, const sd_vd *restrict Y, int nt)", "{"]
    lines += [f"  sd_vd v{i} = Y[{i}];" for i in range(W)]
    b = W // 2
    while b >= 1:
        for i in range(W):
            if not i & b:
                lo = ", ".join(str(p if not p & b else W + p - b) for p in range(W))
                hi = ", ".join(str(p + b if not p & b else W + p) for p in range(W))
                lines.append(f"  {{ const sd_vd a = v{i}, c = v{i + b}; v{i} = SD_SHUF(a, c, {lo}); "
                             f"v{i + b} = SD_SHUF(a, c, {hi}); }}")
        b //= 2
    lines.append("  if (nt) {")
    for r in range(W):
        lines.append("    " + " ".join(f"SD_NTSTORE2(y + {r} * n + {h}, v{r}[{h}], v{r}[{h + 1}]);"
                                         for h in range(0, W, 2)))
    lines.append("  } else {")
    lines += [f"    *(sd_vu *)(y + {r} * n) = v{r};" for r in range(W)]
    lines += ["  }", "}", "#endif", ""]
    return "\n".join(lines)


PRELUDE = r"""/* Generated by sparsedyn.compile: straight-line dynamics kernels. Do not edit. */
/* The few library functions used, declared here rather than through <math.h> and <stdlib.h>:
   preprocessing those headers was a sixth of the compile time of a translation unit. */
double sin(double); double cos(double); double sqrt(double); double atan2(double, double);
#define copysign __builtin_copysign
void *aligned_alloc(__SIZE_TYPE__, __SIZE_TYPE__); void free(void *);
#ifndef SD_W
#  if defined(__AVX512F__) && !defined(SD_NARROW)
#    define SD_W 8
#  elif defined(__AVX__)
#    define SD_W 4
#  else
#    define SD_W 2
#  endif
#endif
#if defined(_WIN32)
#  define SD_EXPORT __declspec(dllexport)
#  define SD_HIDDEN __attribute__((noinline))
#else
#  define SD_EXPORT __attribute__((visibility("default")))
#  define SD_HIDDEN __attribute__((visibility("hidden"), noinline))
#endif
typedef double sd_vd __attribute__((vector_size(8 * SD_W)));

/* Vector sin/cos: glibc's libmvec where the build found it (x86-64 vector ABI), else lane by lane. */
#if defined(SD_LIBMVEC) && SD_W == 8 && defined(__AVX512F__)
sd_vd _ZGVeN8v_sin(sd_vd); sd_vd _ZGVeN8v_cos(sd_vd);
#  define sd_vsin _ZGVeN8v_sin
#  define sd_vcos _ZGVeN8v_cos
#elif defined(SD_LIBMVEC) && SD_W == 4 && defined(__AVX2__)
sd_vd _ZGVdN4v_sin(sd_vd); sd_vd _ZGVdN4v_cos(sd_vd);
#  define sd_vsin _ZGVdN4v_sin
#  define sd_vcos _ZGVdN4v_cos
#elif defined(SD_LIBMVEC) && SD_W == 2 && defined(__x86_64__)
sd_vd _ZGVbN2v_sin(sd_vd); sd_vd _ZGVbN2v_cos(sd_vd);
#  define sd_vsin _ZGVbN2v_sin
#  define sd_vcos _ZGVbN2v_cos
#else
static inline sd_vd sd_vsin(sd_vd x) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = sin(x[k]); return r; }
static inline sd_vd sd_vcos(sd_vd x) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = cos(x[k]); return r; }
#endif
/* A store that bypasses the caches (a write-combined line goes to memory without first being read
   for ownership), for results too large to stay in a core's caches anyway. */
#if defined(__x86_64__) && defined(__SSE2__)
#  define SD_NTSTORE(p, v) do { double sd_v_ = (v); long long sd_u_; __builtin_memcpy(&sd_u_, &sd_v_, 8); \
                                __builtin_ia32_movnti64((long long *)(p), sd_u_); } while (0)
#  define SD_NTFENCE() __builtin_ia32_sfence()
#else
#  define SD_NTSTORE(p, v) (*(p) = (v))
#  define SD_NTFENCE() ((void)0)
#endif
static inline sd_vd sd_vsqrt(sd_vd x) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = sqrt(x[k]); return r; }
static inline sd_vd sd_vatan2(sd_vd y, sd_vd x) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = atan2(y[k], x[k]); return r; }
static inline sd_vd sd_vcopysign(sd_vd x, sd_vd s) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = __builtin_copysign(x[k], s[k]); return r; }
/* Two-source shuffles of vectors, and stores of a pair of doubles to a 16-byte aligned address
   that bypass the caches (see SD_NTSTORE). */
typedef double sd_vu __attribute__((vector_size(8 * SD_W), aligned(8)));
typedef double sd_v2 __attribute__((vector_size(16)));
#if defined(__clang__)
#  define SD_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef long long sd_vi __attribute__((vector_size(8 * SD_W)));
#  define SD_SHUF(a, b, ...) __builtin_shuffle(a, b, (sd_vi){__VA_ARGS__})
#endif
#if defined(__x86_64__) && defined(__SSE2__) && !defined(__clang__)
#  define SD_NTSTORE2(p, a, b) __builtin_ia32_movntpd((p), (sd_v2){(a), (b)})
#elif defined(__clang__)
#  define SD_NTSTORE2(p, a, b) __builtin_nontemporal_store((sd_v2){(a), (b)}, (sd_v2 *)(p))
#else
#  define SD_NTSTORE2(p, a, b) do { (p)[0] = (a); (p)[1] = (b); } while (0)
#endif
/* Eight zero vectors: the source of sd_rows for a group of results that are constant zeros. */
static const sd_vd sd_zeros[8];
""" + "".join(_rows_function(w) for w in (2, 4, 8))

#: First line of a translation unit whose batch kernel runs on half-width vectors (AVX-512 machines).
_NARROW = "#define SD_NARROW 1\n"

_LANES = """
SD_EXPORT int sd_lanes(void) { return SD_W; }
"""



def _lit(v: float) -> str:
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")):
        return {"nan": "(0.0 / 0.0)", "inf": "(1.0 / 0.0)", "-inf": "(-1.0 / 0.0)"}[repr(v)]
    return f"({v.hex()})" if v < 0 else v.hex()


def schedule(prog: Program) -> Program:
    """``prog`` with its operations reordered so that each value is computed just before it is
    first needed: a depth-first post-order from the outputs, element by element in C order (an
    operation's first operand, then its second, then itself), the inputs and constants first.

    The traced order follows the kernel's loops: a derivative kernel computes a value for every
    body and column, then uses it much later, so most values outlive the segment of
    :func:`_functions` that computes them and pass through its workspace (rnea_derivatives of
    talos_reduced: 21,000 of 33,600 values stored, 35,000 loads).  After this reordering an output's
    operations run together, 5,000 values are stored and 18,000 loaded, and the C source is half as
    long.  Measured on talos_reduced (AVX2, 4 lanes, one thread, old and new side by side in one
    process, best of 15): rnea_derivatives 8.8 -> 5.7 us a state in a batch, 22 -> 13 us a single
    state; aba_derivatives (unrolled) 23 -> 12 us a state; the humanoid's estimator (30,000
    operations) 5.9 -> 4.8.  The kernels traced in a good order already (rnea, aba: a forward and a
    backward pass) keep it: :func:`_functions` takes whichever order passes fewer values.

    Every operation keeps its operands, so the results are the same bit for bit; the order is a
    valid topological order (every operand before its user), as :class:`Program` requires.
    Linear in the number of nodes.
    """
    nodes = prog.nodes
    n = len(nodes)
    done = bytearray(n)
    order = []
    for i, (op, _, _) in enumerate(nodes):
        if op <= CONST:
            done[i] = 1
            order.append(i)
    roots = [v for row in prog.outputs for kind, v in row if kind == "node"]
    roots += range(n)                          # nodes no output needs (none after dead-code removal)
    for r in roots:
        if done[r]:
            continue
        stack = [r]
        while stack:
            i = stack[-1]
            if done[i]:
                stack.pop()
                continue
            _, x, y = nodes[i]
            if not done[x]:
                stack.append(x)
            elif y >= 0 and not done[y]:
                stack.append(y)
            else:
                done[i] = 1
                order.append(i)
                stack.pop()
    new = [0] * n
    for k, i in enumerate(order):
        new[i] = k
    out = []
    for i in order:
        op, x, y = nodes[i]
        out.append((op, new[x], new[y] if y >= 0 else -1) if op > CONST else (op, x, y))
    outputs = [[(kind, new[v]) if kind == "node" else (kind, v) for kind, v in row] for row in prog.outputs]
    phases = [prog.phases[i] for i in order] if prog.phases is not None else None
    return dataclasses.replace(prog, nodes=out, outputs=outputs, phases=phases, _text=None)


def _chunks(prog: Program, chunk: int):
    """Split the program into segments of at most ``chunk`` operations.

    Returns ``(seg, slot, nslots)``: ``seg[i]`` the segment of node ``i`` and
    ``slot[i]`` the workspace slot of a value used outside its own segment
    (slots are reused once a value's last use lies behind).
    """
    nodes = prog.nodes
    seg = [0] * len(nodes)
    k = n = 0
    for i, (op, _, _) in enumerate(nodes):
        if op > CONST:
            if n == chunk:
                k, n = k + 1, 0
            n += 1
        seg[i] = k
    last = {}
    for i, (op, x, y) in enumerate(nodes):
        if op > CONST:
            s = seg[i]
            for a in (x, y):
                if a >= 0 and nodes[a][0] > CONST and seg[a] != s:
                    last[a] = s
    # Linear scan over segments: a slot is free again in the segment after its value's last use.
    slot, free, release = {}, [], {}
    nslots = 0
    for i in sorted(last, key=lambda a: (seg[a], a)):
        for s in [s for s in release if s < seg[i]]:
            free.extend(release.pop(s))
        if free:
            slot[i] = free.pop()
        else:
            slot[i] = nslots
            nslots += 1
        release.setdefault(last[i], []).append(slot[i])
    return seg, slot, nslots


def _traffic(prog: Program, seg, slot) -> int:
    """Workspace accesses of one run of the segmented program: a store per value passed on, a load
    per value and later segment that reads it."""
    loads = set()
    nodes = prog.nodes
    for i, (op, x, y) in enumerate(nodes):
        if op > CONST:
            s = seg[i]
            if x in slot and seg[x] != s:
                loads.add((x, s))
            if y in slot and seg[y] != s:
                loads.add((y, s))
    return len(slot) + len(loads)


def _functions(prog: Program, cname: str, T: str, fn: dict, chunk: int, hoist=None):
    """Segment functions ``{cname}_{k}`` and a driver ``{cname}`` computing ``prog`` on type ``T``.

    Values crossing segments go through a workspace ``w`` of ``T`` (``nslots`` entries);
    splitting keeps each function small, which keeps the C compiler's register
    allocator (superlinear in function size) fast.  The operations run in the traced order or
    in that of :func:`schedule`, whichever moves fewer values through the workspace.
    ``hoist`` (a list): the outputs that are constants are not written by the driver but appended
    to it as ``(output, element, value)`` (the batch entry point writes them once per thread).
    """
    seg, slot, nslots = _chunks(prog, chunk)
    again = schedule(prog)
    seg2, slot2, nslots2 = _chunks(again, chunk)
    if _traffic(again, seg2, slot2) < _traffic(prog, seg, slot):
        prog, seg, slot, nslots = again, seg2, slot2, nslots2
    nodes = prog.nodes
    out_at = {}
    for k, row in enumerate(prog.outputs):
        for j, (kind, v) in enumerate(row):
            if kind == "node":
                out_at.setdefault(v, []).append((k, j))
    nin, nout = len(prog.input_shapes), len(prog.output_shapes)
    ptr = "const double" if T == "double" else "const sd_vd"
    optr = "double" if T == "double" else "sd_vd"
    params = ", ".join([f"{ptr} *restrict x{k}" for k in range(nin)] + [f"{optr} *restrict y{k}" for k in range(nout)]
                       + [f"{optr} *restrict w"])
    args = ", ".join([f"x{k}" for k in range(nin)] + [f"y{k}" for k in range(nout)] + ["w"])
    funcs = []
    nseg = (seg[-1] + 1) if nodes else 0
    body = {s: [] for s in range(nseg)}
    local = [None] * nseg               # per segment: node -> local name
    for s in range(nseg):
        local[s] = {}

    # A value used exactly once, by an operation of its own segment, and neither an output nor
    # passed to a later segment is written inline into its user's expression (fully
    # parenthesised, so the same operations round the same way): fewer declarations for the
    # C front end to parse and fewer names for its SSA passes.
    uses = [0] * len(nodes)
    user = [-1] * len(nodes)
    for i, (op, x, y) in enumerate(nodes):
        if op > CONST:
            for a in (x, y):
                if a >= 0:
                    uses[a] += 1
                    user[a] = i
    inline = [op > CONST and uses[i] == 1 and seg[user[i]] == seg[i] and i not in slot and i not in out_at
              for i, (op, _, _) in enumerate(nodes)]
    expr = {}

    def ref(a, s):
        op, x, y = nodes[a]
        if op == CONST:
            return _lit(x)
        if inline[a]:
            return f"({expr.pop(a)})"
        name = local[s].get(a)
        if name is None:
            name = f"t{a}"
            if op == INPUT:
                body[s].append(f"  const {T} {name} = x{int(x)}[{int(y)}];")
            else:                                   # defined in an earlier segment
                body[s].append(f"  const {T} {name} = w[{slot[a]}];")
            local[s][a] = name
        return name

    for i, (op, x, y) in enumerate(nodes):
        if op <= CONST:
            continue
        s = seg[i]
        if op == NEG:
            e = f"-{ref(x, s)}"
        elif op in (ADD, SUB, MUL, DIV):
            e = f"{ref(x, s)} {_SYM[op]} {ref(y, s)}"
        elif op in (SIN, COS, SQRT):
            e = f"{fn[op]}({ref(x, s)})"
        elif op in (ATAN2, COPYSIGN):
            # a constant operand of a vector function is broadcast explicitly (arithmetic does it implicitly)
            a, b = (ref(z, s) if nodes[z][0] != CONST or T == "double" else f"((sd_vd){{0}} + {ref(z, s)})"
                    for z in (x, y))
            e = f"{fn[op]}({a}, {b})"
        else:                                        # pragma: no cover
            raise ValueError(f"unknown opcode {op}")
        if inline[i]:
            expr[i] = e
            continue
        body[s].append(f"  const {T} t{i} = {e};")
        local[s][i] = f"t{i}"
        if i in slot:
            body[s].append(f"  w[{slot[i]}] = t{i};")
        for k, j in out_at.get(i, ()):
            body[s].append(f"  y{k}[{j}] = t{i};")
    # Outputs that are inputs or constants.
    tail = []
    for k, row in enumerate(prog.outputs):
        for j, (kind, v) in enumerate(row):
            if kind == "const" and hoist is not None:
                hoist.append((k, j, v))
            elif kind == "const":
                tail.append(f"  y{k}[{j}] = {_lit(v) if T == 'double' else f'(sd_vd){{0}} + {_lit(v)}'};")
            elif nodes[v][0] == INPUT:
                tail.append(f"  y{k}[{j}] = x{int(nodes[v][1])}[{int(nodes[v][2])}];")
    nops = [0] * nseg
    for i, (op, _, _) in enumerate(nodes):
        if op > CONST:
            nops[seg[i]] += 1
    for s in range(nseg):
        funcs.append((nops[s], "\n".join([f"SD_HIDDEN void {cname}_{s}({params})", "{", *body[s], "}"])))
    protos = [f"SD_HIDDEN void {cname}_{s}({params});" for s in range(nseg)]
    drv = [*protos, f"static void {cname}({params})", "{"]
    drv += [f"  {cname}_{s}({args});" for s in range(nseg)]
    drv += tail + ["}"]
    return funcs, "\n".join(drv), max(nslots, 1)


_SYM = {ADD: "+", SUB: "-", MUL: "*", DIV: "/"}

#: Workspace slots (doubles) above which the single-state entry points take their workspace from
#: the heap instead of the stack.
_STACK_SLOTS = 16384
#: Operations of a program from which it is emitted as loops over tables (:func:`_loop_functions`)
#: rather than unrolled (``$SPARSEDYN_LOOP_THRESHOLD`` overrides it; see :func:`code_shape`).
#: ``benchmarks/bench_loops.py`` with the segmented, scheduled emitter (2026-11-27; one call, the
#: best of many repeats, paired; cold-build CPU seconds): from 40,000 to 182,000 operations the
#: unrolled code runs 1.1-2.3 times faster than the loops (aba_derivatives of talos_reduced, 100,299
#: operations: 28.5 against 45.2 us; minv of a 100-body chain, 111,831: 51.8 against 74.8 us; aba_derivatives
#: of a 30-body chain, 146,473: 65.5 against 73.5 us) and its cold build costs 1.5-5 times the CPU
#: (about 0.12 ms of CPU an operation: 13.0 against 6.2 s; 11.6 against 3.5 s; 20.3 against 4.3 s).
#: The threshold caps that cost at about 20 s of CPU (10 s on two cores) for one kernel; it is
#: also the batch variant's (:data:`BATCH_LOOP_FACTOR`).
LOOP_THRESHOLD = 160000
#: The batch variant is emitted as loops from this many times :func:`loop_threshold` operations:
#: its loops read and write every value in a workspace of one slot per statement, beyond the
#: caches, while the unrolled code keeps most values in registers (aba_derivatives of talos_reduced,
#: 117,500 operations, AVX2, one thread, 10,000 states: 21-27 -> 12 us a state unrolled and
#: scheduled; its cold build 12-16 -> 16-21 s on two cores, paired on a loaded machine).  It was 4
#: while :data:`LOOP_THRESHOLD` was 40,000: the batch threshold is still 160,000 operations.
BATCH_LOOP_FACTOR = 1
#: Operations of one statement of :func:`_statements` at most: a longer expression (a long dot
#: product) is cut into statements of this size, whose shapes then repeat, whatever its length.
_MAX_INLINE = 8
_PLUS_MINUS = re.compile(r" [+-] ")      # the binary additions of a statement's template
#: Longest repeated block of statements :func:`_blocks` looks for.
_MAX_PERIOD = 48


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
    than :func:`loop_threshold` (times :data:`BATCH_LOOP_FACTOR` for the ``batch`` variant), else
    ``"loops"`` (:func:`_loop_functions`)."""
    nops = sum(1 for op, _, _ in prog.nodes if op > CONST)
    return "loops" if nops >= loop_threshold() * (BATCH_LOOP_FACTOR if variant == "batch" else 1) else "unrolled"


def _statements(prog: Program, fn: dict):
    """The program as statements ``w[out] = expression of w[leaf]...``: one per operation whose
    value is used more than once or is an output, or that would make its user's expression longer
    than :data:`_MAX_INLINE` operations (a value used once is written inline, fully parenthesised).

    Returns ``(stmts, slot, nslots, consts, cslot)``: ``stmts`` a list of ``(template, out slot,
    leaf slots, operations)`` (``template``: the C expression with ``@`` for each leaf, in order),
    ``slot[i]`` the value slot of node ``i`` (the inputs first, argument by argument, then the
    constants, then the statements), ``consts`` the constant values in slot order, ``cslot`` the
    slot of each constant (by its ``float.hex()``)."""
    nodes = prog.nodes
    uses = [0] * len(nodes)
    for op, x, y in nodes:
        if op > CONST:
            uses[x] += 1
            if y >= 0:
                uses[y] += 1
    outs = {v for row in prog.outputs for kind, v in row if kind == "node"}
    off, base = [], 0
    for n in _sizes(prog.input_shapes):
        off.append(base)
        base += n
    slot = [-1] * len(nodes)
    consts, cslot = [], {}
    out_consts = [v for row in prog.outputs for kind, v in row if kind == "const"]
    for i, (op, x, y) in enumerate(nodes):
        if op == INPUT:
            slot[i] = off[int(x)] + int(y)
    for v in [x for op, x, _ in nodes if op == CONST] + out_consts:
        key = float(v).hex()
        if key not in cslot:
            cslot[key] = base + len(consts)
            consts.append(float(v))
    for i, (op, x, y) in enumerate(nodes):
        if op == CONST:
            slot[i] = cslot[float(x).hex()]
    nxt = base + len(consts)
    expr = {}                           # inlined node -> (template, leaves, operations)
    stmts = []

    def leaf(a):
        e = expr.pop(a, None)
        return ("@", [slot[a]], 0) if e is None else ("(" + e[0] + ")", e[1], e[2])

    for i, (op, x, y) in enumerate(nodes):
        if op <= CONST:
            continue
        tx, lx, nx = leaf(x)
        if op == NEG:
            t, lv, n = "-" + tx, lx, nx + 1
        else:
            ty, ly, ny = leaf(y) if y >= 0 else ("", [], 0)
            if op in _SYM:
                t = f"{tx} {_SYM[op]} {ty}"
            elif y >= 0:
                t = f"{fn[op]}({tx}, {ty})"
            else:
                t = f"{fn[op]}({tx})"
            lv, n = lx + ly, nx + ny + 1
        if uses[i] == 1 and i not in outs and n < _MAX_INLINE:
            expr[i] = (t, lv, n)
        else:
            slot[i] = nxt
            nxt += 1
            stmts.append((t, slot[i], lv, n))
    return stmts, slot, nxt, consts, cslot


def _blocks(shapes):
    """Cover the list ``shapes`` (one hashable per statement) with ``(start, period, repeats)``: a
    block of ``period`` consecutive statements repeated ``repeats`` times in a row (greedy, the
    longest cover first), or a single statement (``period = repeats = 1``)."""
    n = len(shapes)
    out, p = [], 0
    while p < n:
        best = (1, 1)
        for k in range(1, min(_MAX_PERIOD, (n - p) // 2) + 1):
            if shapes[p + k] != shapes[p] or shapes[p + k:p + 2 * k] != shapes[p:p + k]:
                continue
            r = 2
            while p + (r + 1) * k <= n and shapes[p + r * k:p + (r + 1) * k] == shapes[p:p + k]:
                r += 1
            if r * k > best[0] * best[1]:
                best = (k, r)
        out.append((p,) + best)
        p += best[0] * best[1]
    return out


def _loop_functions(prog: Program, cname: str, T: str, fn: dict, chunk: int):
    """:func:`_functions`' counterpart for large programs: loops over tables.

    Every value used more than once lives in one slot of the workspace ``w`` (the inputs and
    the constants are copied there first), and the program is a list of statements
    ``w[out] = expression of w[leaf]...`` (:func:`_statements`).  A block of statements whose
    expressions repeat, the same block over and over in a row (one body after the other, one
    column of a matrix product after the other), becomes one C loop; the slot numbers of its
    ``repeats`` copies are affine in the iteration (``b + j * s``) or read from a table of
    integers.  The code's size then grows with the number of distinct blocks, not with the
    program's, and the model's numbers are data (the constants' table).  The operations, and
    so every rounding, are those of the unrolled code.
    """
    stmts, slot, nws, consts, cslot = _statements(prog, fn)
    shapes = {}
    # Blocks are found up to the signs of additions: ``x - y`` is ``x + s * y`` with ``s = -1``
    # exactly (the product by +-1 and the sum round once, as the difference does), so statements
    # that differ in signs alone (the products of a matrix with signed entries) share a loop.
    sid = [shapes.setdefault(_PLUS_MINUS.sub(" + ", t), len(shapes)) for t, _, _, _ in stmts]
    nin, nout = len(prog.input_shapes), len(prog.output_shapes)
    ptr = "const double" if T == "double" else "const sd_vd"
    optr = "double" if T == "double" else "sd_vd"
    funcs, names, cur, size = [], [], [], 0

    def flush():
        nonlocal cur, size
        if cur:
            name = f"{cname}_{len(names)}"
            names.append(name)
            funcs.append((size, "\n".join([*[c for c in cur if c.startswith("static")],
                                           f"SD_HIDDEN void {name}({optr} *restrict w)", "{",
                                           *[c for c in cur if not c.startswith("static")], "}"])))
        cur, size = [], 0

    def fill(template, idx):
        parts = template.split("@")
        return "".join(p + (f"w[{idx[k]}]" if k < len(idx) else "") for k, p in enumerate(parts))

    for b, (p, k, r) in enumerate(_blocks(sid)):
        if r == 1:
            t, o, lv, n = stmts[p]
            cur.append(f"  w[{o}] = {fill(t, lv)};")
            size += n
        else:
            cols = []                   # per statement: the out slot's and the leaves' columns over j
            for s in range(k):
                cols.append([[stmts[p + j * k + s][1] for j in range(r)]]
                            + [[stmts[p + j * k + s][2][m] for j in range(r)] for m in range(len(stmts[p + s][2]))])
            table, body = [], []
            for s in range(k):
                idx = []
                for col in cols[s]:
                    d = col[1] - col[0]
                    if all(col[j + 1] - col[j] == d for j in range(r - 1)):
                        idx.append(f"{col[0]}" if d == 0 else f"{col[0]} + j" if d == 1 else f"{col[0]} + j * {d}")
                    else:
                        idx.append(f"I[{len(table)}]")
                        table.append(col)
                t = stmts[p + s][0]
                signs = list(zip(*(_PLUS_MINUS.findall(stmts[p + j * k + s][0]) for j in range(r))))
                if any(len(set(col)) > 1 for col in signs):
                    parts = _PLUS_MINUS.split(t)
                    t = parts[0]
                    for col, part in zip(signs, parts[1:]):
                        if len(set(col)) == 1:
                            t += col[0] + part
                        else:
                            t += f" + (double)I[{len(table)}] * " + part
                            table.append([1 if c == " + " else -1 for c in col])
                body.append(f"    w[{idx[0]}] = {fill(t, idx[1:])};")
            head = [f"  for (int j = 0; j < {r}; j++) {{"]
            if table:
                m = len(table)
                data = ",".join(str(table[c][j]) for j in range(r) for c in range(m))
                cur.append(f"static const int {cname}_t{b}[{r * m}] = {{{data}}};")
                head.append(f"    const int *I = {cname}_t{b} + j * {m};")
            cur += head + body + ["  }"]
            size += sum(stmts[p + s][3] for s in range(k)) + len(table) * r // 16
        if size >= chunk:
            flush()
    flush()
    params = ", ".join([f"{ptr} *restrict x{k}" for k in range(nin)] + [f"{optr} *restrict y{k}" for k in range(nout)]
                       + [f"{optr} *restrict w"])
    drv = [f"SD_HIDDEN void {n}({optr} *restrict w);" for n in names]
    if consts:
        drv.append(f"static const double {cname}_c[{len(consts)}] = {{{','.join(_lit(c) for c in consts)}}};")
    outs = []
    for k, row in enumerate(prog.outputs):
        where = [slot[v] if kind == "node" else cslot[float(v).hex()] for kind, v in row]
        outs.append(where)
    for k, where in enumerate(outs):
        if where:
            drv.append(f"static const int {cname}_o{k}[{len(where)}] = {{{','.join(map(str, where))}}};")
    drv += [f"static void {cname}({params})", "{"]
    base = 0
    for k, n in enumerate(_sizes(prog.input_shapes)):
        drv.append(f"  for (long e = 0; e < {n}; e++) w[{base} + e] = x{k}[e];")
        base += n
    if consts:
        cv = f"{cname}_c[e]" if T == "double" else f"(sd_vd){{0}} + {cname}_c[e]"
        drv.append(f"  for (long e = 0; e < {len(consts)}; e++) w[{base} + e] = {cv};")
    drv += [f"  {n}(w);" for n in names]
    for k, where in enumerate(outs):
        if where:
            drv.append(f"  for (long e = 0; e < {len(where)}; e++) y{k}[e] = w[{cname}_o{k}[e]];")
    drv.append("}")
    return funcs, "\n".join(drv), max(nws, 1)


def _sizes(shapes):
    out = []
    for s in shapes:
        n = 1
        for d in s:
            n *= int(d)
        out.append(n)
    return out


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
    if not re.fullmatch(r"[a-z][a-z0-9_]*", cname):
        raise ValueError(f"kernel identifier must match [a-z][a-z0-9_]*, got {cname!r}")
    if variant not in ("single", "batch"):
        raise ValueError(f"variant: expected 'single' or 'batch', got {variant!r}")
    with paused_gc():
        if isinstance(prog, LoopProgram):
            return _emit_loop(prog, cname, variant, chunk, unit_size)
        return _emit_program(prog, cname, variant, chunk, unit_size, checks)


def _emit_program(prog, cname, variant, chunk, unit_size, checks):
    nin, nout = _sizes(prog.input_shapes), _sizes(prog.output_shapes)
    xs = [f"x{k}" for k in range(len(nin))]
    ys = [f"y{k}" for k in range(len(nout))]
    pub = ", ".join([f"const double *{x}" for x in xs] + [f"double *{y}" for y in ys])
    sargs = ", ".join([f"x{k} + s * {n}" for k, n in enumerate(nin)] + [f"y{k} + s * {n}" for k, n in enumerate(nout)])
    gen = _loop_functions if code_shape(prog, variant) == "loops" else _functions
    if variant == "single":
        funcs, drv, nws = gen(prog, f"{cname}_s", "double", {SIN: "sin", COS: "cos", SQRT: "sqrt", ATAN2: "atan2",
                                                              COPYSIGN: "copysign"}, chunk)
        def workspace(indent, at, leave):
            if nws <= _STACK_SLOTS:
                return [f"{indent}double w[{nws}];"], []
            # a large workspace lives on the heap (threads have small stacks); without it: NaN results
            nan = "".join(f" for (long j = 0; j < {n}; j++) y{k}[{at}{n} + j] = 0.0 / 0.0;"
                          for k, n in enumerate(nout))
            return [f"{indent}double *w = (double *)aligned_alloc(64, {(8 * nws + 63) // 64 * 64});",
                    f"{indent}if (!w) {{{nan} {leave}; }}"], [f"{indent}free(w);"]
        alloc1, free1 = workspace("  ", "0 * ", "return")
        alloc2, free2 = workspace("    ", "s * ", "continue")
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
    # the traffic of its workspace, not by its arithmetic.  Measured on talos_reduced, one thread,
    # paired in one process: rnea_derivatives (2216 vectors) 7.5 -> 7.0 us a state, after the
    # non-temporal stores below; aba (515 vectors, fits at 8 lanes) 0.60 -> 0.77 at 4 lanes, so it
    # stays at 8, as does rnea (308: 0.38 -> 0.47 at 4 lanes).
    return _units(funcs, tail, unit_size, _NARROW if variant == "batch" and nws > 768 else "")


def _units(funcs, tail, unit_size, head=""):
    """The segment functions ``funcs`` (``(operations, source)``) grouped into translation units of
    about ``unit_size`` operations, ``tail`` (the entry points) closing the last one; ``head`` opens
    each unit."""
    units, cur, size = [], [], 0
    for n, f in funcs:
        if cur and size + n > unit_size:
            units.append(head + "\n".join(cur))
            cur, size = [], 0
        cur.append(f)
        size += n
    cur += tail
    units.append(head + "\n".join(cur))
    return units


def _batch_entry(cname, drv, nin, nout, nws, pub, checks=None, consts=None):
    """``sd_{cname}_batch``: blocks of SD_W states gathered into SoA vectors (the last, partial
    block padded by repeating its last state), the vector program, results scattered back.

    With ``check`` nonzero the gather also checks the inputs (every value finite, the unit
    quaternions of ``checks``) and the call returns 2, without finishing, when one fails: the
    caller then runs its own checks, which name the argument.  Returns 0 when a work buffer could
    not be allocated, 1 otherwise.  ``consts``: the outputs that are constants, ``(output, element,
    value)``, which the program does not write (:func:`_functions`' ``hoist``): they are written to
    the blocks' buffers ``Y{k}`` once per thread, and a large output's groups of 8 elements that are
    all zeros are written from ``sd_zeros`` rather than from ``Y{k}``."""
    tol, quats = checks if checks else (0.0, ())
    total = sum(nin) + sum(nout) + nws
    b = [f"/* batched kernel {cname}: workspace {nws} vectors */", drv,
         f"SD_EXPORT int sd_{cname}_batch({'long n, ' + pub}, int nthreads, int check)", "{",
         "  const long nblk = (n + SD_W - 1) / SD_W;",
         "  int ok = 1, bad = 0;",
         "#ifdef _OPENMP",
         "  #pragma omp parallel num_threads(nthreads > 0 ? nthreads : 1) if (nthreads > 1 && nblk > 1)",
         "#endif",
         "  {",
         f"    sd_vd *buf = (sd_vd *)aligned_alloc(64, (sizeof(sd_vd) * {total} + 63) / 64 * 64);",
         "    if (!buf) ok = 0;     /* every thread still meets the work-sharing loop */"]
    off = 0
    for k, n in enumerate(nin):
        b.append(f"    sd_vd *X{k} = buf + {off};")
        off += n
    for k, n in enumerate(nout):
        b.append(f"    sd_vd *Y{k} = buf + {off};")
        off += n
    b.append(f"    sd_vd *W = buf + {off};")
    # Constant results (rnea_derivatives of talos_reduced: 2,370 zeros of 4,332 elements) are the
    # same in every block: written once here, not by the program for every block.
    zg = {}
    if consts:
        b.append("    if (buf) {")
        for k in sorted({k for k, _, _ in consts}):
            zs = [j for kk, j, v in consts if kk == k and float(v) == 0.0]
            if zs:
                b += [f"      static const int z{k}[{len(zs)}] = {{{','.join(map(str, zs))}}};",
                      f"      for (int i = 0; i < {len(zs)}; i++) Y{k}[z{k}[i]] = (sd_vd){{0}} + 0.0;"]
            if nout[k] > 256:
                zero = set(zs)
                zg[k] = [int(all(j in zero for j in range(j0, min(j0 + 8, nout[k])))) for j0 in range(0, nout[k], 8)]
        b += [f"      Y{k}[{j}] = (sd_vd){{0}} + {_lit(v)};" for k, j, v in consts if float(v) != 0.0]
        b.append("    }")
    b += ["#ifdef _OPENMP",
          "    #pragma omp for schedule(static)",
          "#endif",
          "      for (long blk = 0; blk < nblk; blk++) {",
          "        if (!buf) continue;",
          "        const long s0 = blk * SD_W;",
          "        const int m = (n - s0) < SD_W ? (int)(n - s0) : SD_W;",
          "        double acc = 0.0;       /* x - x is 0 only for a finite x */"]
    # Reads state by state (each state's row is contiguous: the hardware prefetcher follows it) and
    # prefetches the next block's rows; measured on talos_reduced's rnea at 20,000 states, 1 thread:
    # element by element across the block's rows is ~1.3x slower once the batch leaves the L2 cache.
    qk = dict(quats)
    for k, n in enumerate(nin):
        qchk = "".join(f" {{ const double *u = r + {o}; const double e = u[0] * u[0] + u[1] * u[1] + u[2] * u[2] "
                       f"+ u[3] * u[3] - 1.0; if (!(e <= {_lit(tol)} && -e <= {_lit(tol)})) acc += 1.0 / 0.0; }}"
                       for o in qk.get(k, ()))
        b.append(f"        for (int s = 0; s < SD_W; s++) {{ const double *r = x{k} + (s0 + (s < m ? s : m - 1)) * {n}; "
                 f"for (long j = 0; j < {n}; j++) {{ X{k}[j][s] = r[j]; acc += r[j] - r[j]; }}"
                 + (f" if (check) {{{qchk} }}" if qchk else "") + " }")
        b.append(f"        for (long j = (s0 + SD_W) * {n}; j < (s0 + 2 * SD_W) * {n} && j < n * {n}; j += 8) "
                 f"__builtin_prefetch(x{k} + j, 0, 0);")
    b += ["        if (check && acc != 0.0) {",
          "#ifdef _OPENMP",
          "          #pragma omp atomic write",
          "#endif",
          "          bad = 1;",
          "          continue;",
          "        }"]
    b.append(f"        {cname}_v({', '.join([f'X{k}' for k in range(len(nin))] + [f'Y{k}' for k in range(len(nout))])}, W);")
    # Results are written state by state (sequential stores) while the block's output vectors fit in
    # the L1 cache (<= 256 elements); larger outputs (crba, minv: 11.5 kB per state on talos_reduced)
    # are written element by element across the block's rows, because reading their vectors with a
    # stride was twice slower.  Measured on talos_reduced: rnea 1.3x faster state by state.
    # A large output of a large batch (>= 4 MiB: beyond a core's caches) is written to memory: its
    # ordinary stores first read every line for ownership, so that the batch ran at half the memory's
    # write bandwidth (rnea_derivatives on talos_reduced writes 34.7 kB a state, and these stores took
    # as long as the program itself).  It is then written state by state with non-temporal stores,
    # each line filled by consecutive stores.  Measured on that scatter alone: 10.7 -> 6.5 us a state.
    # A full block of a large output is now written SD_W elements at a time (sd_rows: SD_W vectors
    # loaded once and transposed in registers, SD_W consecutive elements of each of SD_W rows
    # stored), past the caches when the rows are 16-byte aligned; measured on rnea_derivatives of
    # talos_reduced, 10,000 states, 1 thread (AVX2, 4 lanes, paired): the scatter 2.1 -> 1.5 us a
    # state (23 GB/s, the core's bandwidth of non-temporal stores), the batch 5.6 -> 5.0 us a state.
    for k, n in enumerate(nout):
        if n <= 256:
            b.append(f"        for (int s = 0; s < m; s++) {{ double *r = y{k} + (s0 + s) * {n}; "
                     f"for (long j = 0; j < {n}; j++) r[j] = Y{k}[j][s]; }}")
        else:
            src = f"(zg{k}[j >> 3] ? sd_zeros : Y{k} + j)" if any(zg.get(k, ())) else f"Y{k} + j"
            if src != f"Y{k} + j":
                b.insert(b.index("#ifdef _OPENMP", 3),
                         f"  static const unsigned char zg{k}[{len(zg[k])}] = {{{','.join(map(str, zg[k]))}}};")
            b.append(f"        if (m == SD_W && (al{k} || !nt{k})) {{ for (long j = 0; j + SD_W <= {n}; j += SD_W) "
                     f"sd_rows(y{k} + s0 * {n} + j, {n}, {src}, nt{k}); "
                     f"for (long j = {n} / SD_W * SD_W; j < {n}; j++) for (int s = 0; s < SD_W; s++) "
                     f"y{k}[(s0 + s) * {n} + j] = Y{k}[j][s]; }}")
            b.append(f"        else if (nt{k}) for (int s = 0; s < m; s++) {{ double *r = y{k} + (s0 + s) * {n}; "
                     f"for (long j = 0; j < {n}; j++) SD_NTSTORE(r + j, Y{k}[j][s]); }}")
            b.append(f"        else for (long j = 0; j < {n}; j++) for (int s = 0; s < m; s++) "
                     f"y{k}[(s0 + s) * {n} + j] = Y{k}[j][s];")
    b += ["      }", "    SD_NTFENCE();", "    free(buf);", "  }", "  return ok ? (bad ? 2 : 1) : 0;", "}"]
    at = b.index("  int ok = 1, bad = 0;") + 1
    b[at:at] = [f"  const int nt{k} = (double)n * {n} >= 524288.0, al{k} = "
                + (f"((unsigned long)y{k} & 15) == 0;" if n % 2 == 0 else "0;") + "   /* 4 MiB; rows 16-byte aligned */"
                for k, n in enumerate(nout) if n > 256]
    return b


_SCALAR_FNS = {SIN: "sin", COS: "cos", SQRT: "sqrt", ATAN2: "atan2", COPYSIGN: "copysign"}


def _emit_loop(prog: LoopProgram, cname, variant, chunk, unit_size):
    """The units of an iterative kernel (:class:`~sparsedyn.symbolic.loop.LoopProgram`): its pieces'
    scalar functions and a driver that runs the stages as their flags say, updating the loop state
    in place (a stage's changed elements are copied in after it ran).  ``single`` gives ``sd_K`` and
    ``sd_K_loop`` as for a straight-line kernel; ``batch`` gives ``sd_K_batch`` running the scalar
    driver state by state on OpenMP threads (states leave the loop after different numbers of
    iterations, so they are not packed into vector lanes); it checks no input values (it returns 2
    when asked to: the caller checks them, then calls again)."""
    nin, nout = _sizes(prog.input_shapes), _sizes(prog.output_shapes)
    nK, nS = prog.sizes
    xs = [f"x{k}" for k in range(len(nin))]
    ys = [f"y{k}" for k in range(len(nout))]
    pub = ", ".join([f"const double *{x}" for x in xs] + [f"double *{y}" for y in ys])
    funcs, drivers, nws = [], [], 1
    # A stage updates the loop state in place: it writes the elements it changes to T (compact) and
    # the driver copies them into S after the run; an element it passes through costs nothing.
    stages, scatter = [], []
    for p in prog.stages:
        s_in = len(p.input_shapes) - 1
        changed = [j for j, (kind, v) in enumerate(p.outputs[0])
                   if not (kind == "node" and tuple(p.nodes[v]) == (INPUT, s_in, j))]
        stages.append(dataclasses.replace(p, outputs=[[p.outputs[0][j] for j in changed], p.outputs[1]],
                                          output_shapes=[(len(changed),), (1,)], _text=None))
        scatter.append(changed)
    for tag, p in [("init", prog.init)] + [(f"g{k}", p) for k, p in enumerate(stages)] + [("fin", prog.finish)]:
        f, d, n = _functions(p, f"{cname}_{tag}", "double", _SCALAR_FNS, chunk)
        funcs += f
        drivers.append(d)
        nws = max(nws, n)
    nst = len(prog.stages)
    X = "".join(x + ", " for x in xs)
    tables = [f"static const int {cname}_c{k}[{max(len(c), 1)}] = {{{', '.join(map(str, c)) or '0'}}};"
              for k, c in enumerate(scatter)]
    cases = " ".join(f"case {k}: {cname}_g{k}({X}K, S, T, F, w); "
                     f"for (int j = 0; j < {len(c)}; j++) S[{cname}_c{k}[j]] = T[j]; break;"
                     for k, c in enumerate(scatter))
    body = [f"/* iterative kernel {cname}: {nst} stages, loop state {nS}, constants {nK}, workspace {nws} */",
            *drivers, *tables,
            f"static void {cname}_run({pub})", "{",
            f"  double K[{max(nK, 1)}], S[{max(nS, 1)}], T[{max(nS, 1)}], F[1], w[{nws}];",
            f"  {cname}_init({X}K, S, w);",
            "  long runs = 0;",
            "  int stage = 0;",
            f"  while (stage < {nst} && runs < {int(prog.cap)}L) {{",
            f"    switch (stage) {{ {cases} }}",
            "    runs++;",
            "    const double f = F[0];",
            f"    stage += f > 0.5 ? (f > {nst + 1}.0 ? {nst + 1} : (int)(f + 0.5)) : "
            f"(f < -0.5 ? (f < -{nst + 1}.0 ? -{nst + 1} : -(int)(-f + 0.5)) : 0);",
            "    if (stage < 0) stage = 0;",
            "  }",
            f"  {cname}_fin({X}K, S, {', '.join(ys)}, w);", "}"]
    sargs = ", ".join([f"x{k} + s * {n}" for k, n in enumerate(nin)] + [f"y{k} + s * {n}" for k, n in enumerate(nout)])
    omp = ["#ifdef _OPENMP",
           "  #pragma omp parallel for schedule(dynamic, 4) num_threads(nthreads > 0 ? nthreads : 1) "
           "if (nthreads > 1 && n > 1)",
           "#endif",
           f"  for (long s = 0; s < n; s++) {cname}_run({sargs});"]
    if variant == "single":
        body += [f"SD_EXPORT void sd_{cname}({pub})", "{", f"  {cname}_run({', '.join(xs + ys)});", "}",
                 f"SD_EXPORT void sd_{cname}_loop(long n, {pub}, int nthreads)", "{", *omp, "}"]
    else:
        body += [f"SD_EXPORT int sd_{cname}_batch(long n, {pub}, int nthreads, int check)", "{",
                 "  if (check) return 2;", *omp, "  return 1;", "}"]
    return _units(funcs, body, unit_size)


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
