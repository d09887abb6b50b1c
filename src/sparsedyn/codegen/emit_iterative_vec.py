"""The loop entry of a small iterative kernel (:class:`~sparsedyn.symbolic.loop.LoopProgram`) run on
vectors across states: ``sd_K_loop`` of :mod:`.emit_iterative` for the kernels that
:func:`vector_loop_fits` admits.

A block of ``SD_W`` states (the SIMD width of the prelude) runs in lockstep: every piece of the loop is
the same program on vectors (one vector instruction per IR operation, each lane a state), and each lane
keeps its own stage.  The driver runs the smallest stage any lane of the block is at, on all lanes,
and commits the stage's loop state and flag only in the lanes at that stage (a blend: a lane elsewhere
keeps its state, whatever the stage computed in it); a lane past the last stage waits for the others.
Each state so sees exactly the stage runs of its scalar driver, operation by operation, and every
operation rounds as the scalar one does (``-ffp-contract=off``; ``sin``, ``cos`` lane by lane through
the scalar functions, ``sqrt`` correctly rounded in both): the results equal the single call's bit for
bit.  States of a batch leave the loop after different numbers of iterations; a lane that finished
early idles until the block's slowest lane is done, which costs the most where the iteration counts
of neighbouring states differ most (a batch of settled states takes about the same path in every
state).  Once one lane alone is left, the scalar driver finishes it from its loop state (a stage run
on vectors costs about twice a scalar one), and a partial block's missing lanes never run.

Only small programs are emitted so (:data:`MAX_VECTOR_NODES`): the vector pieces double the kernel's
code and its build time.  A block's vectors (constants, loop state, workspace: the box's 46 kB at four
lanes) are one buffer per thread, from the heap.
"""

from __future__ import annotations

from ..symbolic.ir import ATAN2, COPYSIGN, COS, SIN, SQRT
from .emit_common import _sizes
from .emit_unrolled import _functions

__all__ = []

#: IR nodes of all of an iterative kernel's pieces up to which its loop entry runs on vectors.  The
#: contact step of a free box's four contact slots has 60,300 nodes (its polish in three stages) and is
#: emitted so (scalar, the solve of its batch of 1000 resting states took 2.3-2.6 times as long).  The dm_control
#: humanoid's eight data slots (130,000) stay scalar: their vector pieces would solve a batch of 1000
#: settled states faster (1.7 times, one thread) but double the first step's build, which every
#: single-call user pays.
MAX_VECTOR_NODES = 64000

#: The vector functions of the pieces: ``sin``, ``cos``, ``atan2`` lane by lane through the scalar
#: functions (a vector library's ``sin`` may round differently from the scalar one); ``sqrt`` the
#: vector instruction (correctly rounded, as the scalar one), ``copysign`` on the bits.
_LANE_FNS = {SIN: "sd_lsin", COS: "sd_lcos", SQRT: "sd_lsqrt", ATAN2: "sd_vatan2", COPYSIGN: "sd_lcopysign"}

#: Opens every translation unit of such a kernel: the lane-by-lane ``sin`` and ``cos``, and the integer
#: vectors of a lane mask.
HEAD = """#ifndef SD_LANE_FNS
#define SD_LANE_FNS 1
static inline sd_vd sd_lsin(sd_vd x) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = sin(x[k]); return r; }
static inline sd_vd sd_lcos(sd_vd x) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = cos(x[k]); return r; }
typedef long long sd_vl __attribute__((vector_size(8 * SD_W)));
static inline sd_vd sd_blend(sd_vl m, sd_vd a, sd_vd b) { return (sd_vd)(((sd_vl)a & m) | ((sd_vl)b & ~m)); }
/* copysign by its definition on the bits (IEEE 754: the magnitude of x, the sign of s) */
static inline sd_vd sd_lcopysign(sd_vd x, sd_vd s)
{ const sd_vl sign = (sd_vl){0} + (long long)(1ULL << 63); return (sd_vd)(((sd_vl)x & ~sign) | ((sd_vl)s & sign)); }
#if defined(__has_builtin)
#  if __has_builtin(__builtin_elementwise_sqrt)
#    define SD_ELEMENTWISE_SQRT 1
#  endif
#endif
#if defined(SD_ELEMENTWISE_SQRT)
static inline sd_vd sd_lsqrt(sd_vd x) { return __builtin_elementwise_sqrt(x); }
#elif !defined(__clang__) && SD_W == 4 && defined(__AVX__)
static inline sd_vd sd_lsqrt(sd_vd x) { return __builtin_ia32_sqrtpd256(x); }
#elif !defined(__clang__) && SD_W == 2 && defined(__SSE2__)
static inline sd_vd sd_lsqrt(sd_vd x) { return __builtin_ia32_sqrtpd(x); }
#else
static inline sd_vd sd_lsqrt(sd_vd x) { sd_vd r; for (int k = 0; k < SD_W; k++) r[k] = sqrt(x[k]); return r; }
#endif
#endif
"""


def vector_loop_fits(prog) -> bool:
    """Whether the loop entry of ``prog`` runs on vectors: its pieces' nodes at most
    :data:`MAX_VECTOR_NODES`."""
    return sum(len(p.nodes) for p in prog.programs) <= MAX_VECTOR_NODES


def vector_loop(prog, cname, stages, scatter, moves, chunk, nws_scalar):
    """``(funcs, lines, size)``: the vector pieces of ``prog`` (``stages``: its stages cut to the
    elements they compute, ``scatter`` those elements' places in the loop state, ``moves`` the runs
    moved within it, as :mod:`.emit_iterative` makes them), and the C of ``{cname}_vblock``, which runs
    the ``SD_W`` states from ``s0`` (of ``n``) in lockstep (module docstring) in a buffer of ``size``
    vectors."""
    nin, nout = _sizes(prog.input_shapes), _sizes(prog.output_shapes)
    nK, nS = prog.sizes
    nst = len(stages)
    funcs, drivers, nws = [], [], 1
    for tag, p in [("init", prog.init)] + [(f"g{k}", p) for k, p in enumerate(stages)] + [("fin", prog.finish)]:
        f, d, n = _functions(p, f"{cname}_v{tag}", "sd_vd", _LANE_FNS, chunk)
        funcs += f
        drivers.append(d)
        nws = max(nws, n)
    X = "".join(f"X{k}, " for k in range(len(nin)))
    names = ["K", "S", "T", "F", "w"] + [f"X{k}" for k in range(len(nin))] + [f"Y{k}" for k in range(len(nout))]
    sizes = [max(nK, 1), max(nS, 1), max(nS, 1), 1, nws] + [max(c, 1) for c in nin + nout]
    offsets = [sum(sizes[:k]) for k in range(len(sizes))]
    cases = " ".join(f"case {k}: {cname}_vg{k}({X}K, S, T, F, w); {_moves(mv)}{_blend_scatter(c)}break;"
                     for k, (c, mv) in enumerate(zip(scatter, moves)))
    xs = ", ".join(f"const double *x{k}" for k in range(len(nin)))
    ys = ", ".join(f"double *y{k}" for k in range(len(nout)))
    xy = [f"x{k}" for k in range(len(nin))] + [f"y{k}" for k in range(len(nout))]
    lines = [*drivers, *_tail(cname, nin, nout, nK, nS, nws_scalar),
             f"static void {cname}_vblock(long s0, long n, {xs}, {ys}, sd_vd *restrict buf)", "{",
             *[f"  sd_vd *restrict {a} = buf + {o};" for a, o in zip(names, offsets)],
             "  const int m = (n - s0) < SD_W ? (int)(n - s0) : SD_W;",
             # a partial block's last lanes repeat its last state (their results are not written)
             *[f"  for (int s = 0; s < SD_W; s++) {{ const double *r = x{k} + (s0 + (s < m ? s : m - 1)) * {c}; "
               f"for (long j = 0; j < {c}; j++) X{k}[j][s] = r[j]; }}" for k, c in enumerate(nin)],
             f"  {cname}_vinit({X}K, S, w);",
             # (a partial block's repeated lanes start past the last stage: they hold no lane up)
             "  int stage[SD_W], alone = -1; long runs[SD_W];",
             f"  for (int s = 0; s < SD_W; s++) {{ stage[s] = s < m ? 0 : {nst}; runs[s] = 0; }}",
             "  for (;;) {",
             f"    int st = {nst}, left = 0, last = 0;",
             f"    for (int s = 0; s < SD_W; s++) {{ if (stage[s] < st) st = stage[s]; if (stage[s] < {nst}) {{ left++; last = s; }} }}",
             f"    if (st >= {nst}) break;",
             # one lane left: the scalar driver finishes it (a vector stage costs more than a scalar one)
             "    if (left == 1) {",
             f"      {cname}_vtail(s0 + last, last, K, S, stage[last], runs[last], {', '.join(xy)});",
             f"      alone = last; stage[last] = {nst}; break;",
             "    }",
             "    sd_vl on;",
             "    for (int s = 0; s < SD_W; s++) on[s] = stage[s] == st ? -1 : 0;",
             f"    switch (st) {{ {cases} }}",
             "    for (int s = 0; s < SD_W; s++) {",
             "      if (stage[s] != st) continue;",
             "      runs[s]++;",
             "      const double f = F[0][s];",
             f"      stage[s] += f > 0.5 ? (f > {nst + 1}.0 ? {nst + 1} : (int)(f + 0.5)) : "
             f"(f < -0.5 ? (f < -{nst + 1}.0 ? -{nst + 1} : -(int)(-f + 0.5)) : 0);",
             "      if (stage[s] < 0) stage[s] = 0;",
             f"      if (runs[s] >= {int(prog.cap)}L) stage[s] = {nst};",
             "    }",
             "  }",
             f"  {cname}_vfin({X}K, S, {', '.join(f'Y{k}' for k in range(len(nout)))}, w);",
             *[f"  for (int s = 0; s < m; s++) if (s != alone) {{ double *r = y{k} + (s0 + s) * {c}; "
               f"for (long j = 0; j < {c}; j++) r[j] = Y{k}[j][s]; }}" for k, c in enumerate(nout)],
             "}"]
    return funcs, lines, sum(sizes)


def _tail(cname, nin, nout, nK, nS, nws):
    """``{cname}_vtail``: lane ``lane`` of a block's vectors ``K``, ``S`` (state ``s``, at stage
    ``stage`` after ``runs`` runs) finished by the scalar driver (``{cname}_drive``, ``{cname}_fin``)."""
    xs = "".join(f", const double *x{k}" for k in range(len(nin)))
    ys = "".join(f", double *y{k}" for k in range(len(nout)))
    at = ", ".join([f"x{k} + s * {c}" for k, c in enumerate(nin)])
    return [f"static __attribute__((noinline)) void {cname}_vtail(long s, int lane, const sd_vd *restrict K, "
            f"const sd_vd *restrict S, int stage, long runs{xs}{ys})", "{",
            f"  double k[{max(nK, 1)}], z[{max(nS, 1)}], T[{max(nS, 1)}], F[1], w[{nws}];",
            f"  for (int j = 0; j < {nK}; j++) k[j] = K[j][lane];",
            f"  for (int j = 0; j < {nS}; j++) z[j] = S[j][lane];",
            f"  {cname}_drive({at}, k, z, T, F, w, stage, runs);",
            f"  {cname}_fin({at}, k, z, {', '.join(f'y{k} + s * {c}' for k, c in enumerate(nout))}, w);", "}"]


def vector_loop_entry(cname, args, scalar, size):
    """The body of ``sd_{cname}_loop`` (``n`` states; ``args``: the names of its arrays) running blocks
    of ``SD_W`` states (:func:`vector_loop`'s ``{cname}_vblock``) on OpenMP threads, each thread with a
    buffer of ``size`` vectors; without one (no memory) state by state, ``scalar`` (the scalar
    driver's call for state ``s``)."""
    return ["  const long nblk = (n + SD_W - 1) / SD_W;", "#ifdef _OPENMP",
            "  #pragma omp parallel num_threads(nthreads > 0 ? nthreads : 1) if (nthreads > 1 && nblk > 1)",
            "#endif", "  {",
            f"    sd_vd *buf = (sd_vd *)aligned_alloc(64, (sizeof(sd_vd) * {size} + 63) / 64 * 64);",
            "#ifdef _OPENMP", "    #pragma omp for schedule(dynamic, 1)", "#endif",
            "    for (long b = 0; b < nblk; b++) {",
            f"      if (buf) {cname}_vblock(b * SD_W, n, {', '.join(args)}, buf);",
            f"      else for (long s = b * SD_W; s < n && s < (b + 1) * SD_W; s++) {scalar}",
            "    }", "    free(buf);", "  }"]


def _moves(runs):
    """The moves ``(to, from, length)`` within the loop state, in the lanes ``on`` only, each in the
    order a ``memmove`` reads (forward where it moves down, backward where up)."""
    out = []
    for a, b, n in runs:
        order = f"int i = 0; i < {n}; i++" if a < b else f"int i = {n} - 1; i >= 0; i--"
        out.append(f"for ({order}) S[{a} + i] = sd_blend(on, S[{b} + i], S[{a} + i]); ")
    return "".join(out)


def _blend_scatter(changed):
    """The stage's computed elements ``changed`` copied from ``T`` into ``S`` in the lanes ``on``."""
    if not changed:
        return ""
    runs = []
    for t, j in enumerate(changed):
        if runs and runs[-1][0] + runs[-1][2] == j:
            runs[-1][2] += 1
        else:
            runs.append([j, t, 1])
    return "".join(f"for (int i = 0; i < {n}; i++) S[{a} + i] = sd_blend(on, T[{b} + i], S[{a} + i]); "
                   for a, b, n in runs)
