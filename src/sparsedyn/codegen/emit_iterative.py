"""C code of an iterative kernel (:class:`~sparsedyn.symbolic.loop.LoopProgram`, the code shape of
the frictional step): its pieces as straight-line functions and a driver that runs the stages as
their flags say.

A piece of the loop threshold's operations or more (:func:`~.cemit.loop_threshold`) is emitted as
loops over tables (:mod:`.emit_loops`), as a straight-line kernel of that size is: the contact step
in 64 data slots, whose polish and guessed rounds are dense systems of 192 rows, so builds in half
the time (unrolled, those two stages were two thirds of its compiler's work).  The same operations,
so the same roundings."""

from __future__ import annotations

import dataclasses

from ..symbolic.ir import INPUT
from ..symbolic.loop import LoopProgram
from .emit_common import _SCALAR_FNS, _ops, _sizes, _units, _workspace
from .emit_iterative_vec import HEAD as VECTOR_HEAD, vector_loop, vector_loop_entry, vector_loop_fits
from .emit_loops import _loop_functions
from .emit_unrolled import _functions

__all__ = []

#: Doubles of workspace above which a call takes it from the heap, not the stack (a thread's stack may
#: be small; the stages in loops keep a slot per statement: megabytes).
HEAP_SLOTS = 131072
#: Runs of consecutive elements up to which a stage's changed elements are copied into the loop state
#: run by run (each a ``memcpy`` the compiler writes as vector moves), not element by element
#: through a table (a stage that changes many scattered elements).
_MAX_RUNS = 32


def _emit_loop(prog: LoopProgram, cname, variant, chunk, unit_size, threshold):
    """The units of an iterative kernel (:class:`~sparsedyn.symbolic.loop.LoopProgram`): its pieces'
    scalar functions and a driver that runs the stages as their flags say, updating the loop state
    in place (after a stage ran, the elements it takes from others are moved within the loop state,
    then those it computed copied in: :func:`_changed`).  ``single`` gives ``sd_K`` and
    ``sd_K_loop`` as for a straight-line kernel, the loop entry of a small kernel running blocks of
    states in lockstep on vectors (:mod:`.emit_iterative_vec`, bit for bit the scalar driver's
    results); ``batch`` gives ``sd_K_batch`` running the scalar
    driver state by state on OpenMP threads (states leave the loop after different numbers of
    iterations, so they are not packed into vector lanes); it checks no input values (it returns 2
    when asked to: the caller checks them, then calls again).  A piece of ``threshold`` operations or
    more is loops over tables (module docstring)."""
    nin, nout = _sizes(prog.input_shapes), _sizes(prog.output_shapes)
    nK, nS = prog.sizes
    xs = [f"x{k}" for k in range(len(nin))]
    ys = [f"y{k}" for k in range(len(nout))]
    pub = ", ".join([f"const double *{x}" for x in xs] + [f"double *{y}" for y in ys])
    funcs, drivers, nws = [], [], 1
    # A stage updates the loop state in place: it writes the elements it computes to T (compact) and
    # the driver copies them into S after the run; an element it passes through costs nothing, one
    # it takes from another element of S (a memory shifted by one) the driver moves within S first.
    stages, scatter, moves = [], [], []
    for p in prog.stages:
        changed, moved = _changed(p)
        stages.append(dataclasses.replace(p, outputs=[[p.outputs[0][j] for j in changed], p.outputs[1]],
                                          output_shapes=[(len(changed),), (1,)], _text=None))
        scatter.append(changed)
        moves.append(moved)
    for tag, p in [("init", prog.init)] + [(f"g{k}", p) for k, p in enumerate(stages)] + [("fin", prog.finish)]:
        f, d, n = (_loop_functions if _ops(p) >= threshold else _functions)(p, f"{cname}_{tag}", "double", _SCALAR_FNS,
                                                                         chunk)
        funcs += f
        drivers.append(d)
        nws = max(nws, n)
    nst = len(prog.stages)
    X = "".join(x + ", " for x in xs)
    tables = [f"static const int {cname}_c{k}[{max(len(c), 1)}] = {{{', '.join(map(str, c)) or '0'}}};"
              for k, c in enumerate(scatter) if len(_copy_runs(c)) > _MAX_RUNS]
    cases = " ".join(f"case {k}: {cname}_g{k}({X}K, S, T, F, w); {_move(mv)}{_scatter(c, f'{cname}_c{k}')} break;"
                     for k, (c, mv) in enumerate(zip(scatter, moves)))
    alloc, release = _workspace(nws, nout, HEAP_SLOTS)
    body = [f"/* iterative kernel {cname}: {nst} stages, loop state {nS}, constants {nK}, workspace {nws} */",
            *drivers, *tables, *_driver(cname, xs, cases, nst, prog.cap),
            f"static void {cname}_run({pub})", "{",
            f"  double K[{max(nK, 1)}], S[{max(nS, 1)}], T[{max(nS, 1)}], F[1];", *alloc,
            f"  {cname}_init({X}K, S, w);",
            f"  {cname}_drive({X}K, S, T, F, w, 0, 0);",
            f"  {cname}_fin({X}K, S, {', '.join(ys)}, w);", *release, "}"]
    sargs = ", ".join([f"x{k} + s * {n}" for k, n in enumerate(nin)] + [f"y{k} + s * {n}" for k, n in enumerate(nout)])
    omp = ["#ifdef _OPENMP",
           "  #pragma omp parallel for schedule(dynamic, 4) num_threads(nthreads > 0 ? nthreads : 1) "
           "if (nthreads > 1 && n > 1)",
           "#endif",
           f"  for (long s = 0; s < n; s++) {cname}_run({sargs});"]
    head = ""
    if variant == "single" and vector_loop_fits(prog):
        # a small kernel's batch: blocks of SD_W states in lockstep on vectors (:mod:`.emit_iterative_vec`)
        vfuncs, vbody, size = vector_loop(prog, cname, stages, scatter, moves, chunk, nws)
        funcs, body, head = funcs + vfuncs, body + vbody, VECTOR_HEAD
        omp = vector_loop_entry(cname, xs + ys, f"{cname}_run({sargs});", size)
    if variant == "single":
        body += [f"SD_EXPORT void sd_{cname}({pub})", "{", f"  {cname}_run({', '.join(xs + ys)});", "}",
                 f"SD_EXPORT void sd_{cname}_loop(long n, {pub}, int nthreads)", "{", *omp, "}"]
    else:
        body += [f"SD_EXPORT int sd_{cname}_batch(long n, {pub}, int nthreads, int check)", "{",
                 "  if (check) return 2;", *omp, "  return 1;", "}"]
    return _units(funcs, body, unit_size, head)


def _driver(cname, xs, cases, nst, cap):
    """``{cname}_drive``: the stages run as their flags say from stage ``stage`` after ``runs`` runs
    (``cases``: the switch's cases) until past the last stage or ``cap`` runs in all."""
    return [f"static void {cname}_drive({''.join(f'const double *{x}, ' for x in xs)}double *K, double *S, double *T, "
            "double *F, double *w, int stage, long runs)", "{",
            f"  while (stage < {nst} && runs < {int(cap)}L) {{",
            f"    switch (stage) {{ {cases} }}",
            "    runs++;",
            "    const double f = F[0];",
            f"    stage += f > 0.5 ? (f > {nst + 1}.0 ? {nst + 1} : (int)(f + 0.5)) : "
            f"(f < -0.5 ? (f < -{nst + 1}.0 ? -{nst + 1} : -(int)(-f + 0.5)) : 0);",
            "    if (stage < 0) stage = 0;",
            "  }", "}"]


def _runs(pairs):
    """``[(to, from, length)]``: the pairs ``(to, from)``, in order, cut into runs along which both
    step by one."""
    runs = []
    for a, b in pairs:
        if runs and runs[-1][0] + runs[-1][2] == a and runs[-1][1] + runs[-1][2] == b:
            runs[-1][2] += 1
        else:
            runs.append([a, b, 1])
    return [tuple(r) for r in runs]


def _copy_runs(changed):
    """:func:`_runs` of a stage's computed elements ``changed`` (increasing) from their places in ``T``."""
    return _runs((j, t) for t, j in enumerate(changed))


def _scatter(changed, table):
    """The C that copies a stage's changed elements ``changed`` from ``T`` into ``S``: a ``memcpy`` per
    run of consecutive ones (a loop over ``table`` where they fall into more than :data:`_MAX_RUNS`
    runs)."""
    runs = _copy_runs(changed)
    if len(runs) > _MAX_RUNS:
        return f"for (int j = 0; j < {len(changed)}; j++) S[{table}[j]] = T[j];"
    return " ".join(f"S[{a}] = T[{b}];" if n == 1 else f"__builtin_memcpy(S + {a}, T + {b}, {n} * sizeof(double));"
                    for a, b, n in runs)


def _changed(p):
    """``(computed, moves)`` of stage ``p``: the elements of the loop state it computes (in order),
    and the runs ``(to, from, length)`` of those it takes from other elements of the loop state,
    moved within ``S`` in this order, each reading only elements no run before it wrote (else
    ``[]``, and those elements count as computed: copied through ``T``)."""
    s_in = len(p.input_shapes) - 1
    computed, taken = [], []
    for j, (kind, v) in enumerate(p.outputs[0]):
        if kind == "node" and p.nodes[v][0] == INPUT and int(p.nodes[v][1]) == s_in:
            if int(p.nodes[v][2]) != j:
                taken.append((j, int(p.nodes[v][2])))
        else:
            computed.append(j)
    runs = _runs(taken)
    written = []
    for to, frm, n in runs:
        if len(runs) > _MAX_RUNS or any(frm < a + m and a < frm + n for a, m in written):
            return sorted(computed + [j for j, _ in taken]), []
        written.append((to, n))
    return computed, runs


def _move(runs):
    """The C of :func:`_changed`'s moves within ``S`` (a ``memmove`` each: a run may overlap itself)."""
    return "".join(f"S[{a}] = S[{b}]; " if n == 1 else f"__builtin_memmove(S + {a}, S + {b}, {n} * sizeof(double)); "
                   for a, b, n in runs)
