"""The batch entry point ``sd_K_batch`` of :mod:`.cemit`: blocks of ``SD_W`` states gathered into
vectors (checking the inputs on the way), the vector program, the results scattered back; and the
register transposes ``sd_rows`` of the prelude that write a block of a large result."""

from __future__ import annotations

from .emit_common import _lit

__all__ = []


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
    lines, zg = _constant_results(consts, nout)
    b += lines
    b += ["#ifdef _OPENMP",
          "    #pragma omp for schedule(static)",
          "#endif",
          "      for (long blk = 0; blk < nblk; blk++) {",
          "        if (!buf) continue;",
          "        const long s0 = blk * SD_W;",
          "        const int m = (n - s0) < SD_W ? (int)(n - s0) : SD_W;",
          "        double acc = 0.0;       /* x - x is 0 only for a finite x */"]
    b += _gather(nin, checks)
    b += ["        if (check && acc != 0.0) {",
          "#ifdef _OPENMP",
          "          #pragma omp atomic write",
          "#endif",
          "          bad = 1;",
          "          continue;",
          "        }"]
    b.append(f"        {cname}_v({', '.join([f'X{k}' for k in range(len(nin))] + [f'Y{k}' for k in range(len(nout))])}, W);")
    statics, scatter = _scatter(nout, zg)
    b += scatter
    at = b.index("#ifdef _OPENMP", 3)
    b[at:at] = statics
    b += ["      }", "    SD_NTFENCE();", "    free(buf);", "  }", "  return ok ? (bad ? 2 : 1) : 0;", "}"]
    at = b.index("  int ok = 1, bad = 0;") + 1
    b[at:at] = [f"  const int nt{k} = (double)n * {n} >= 524288.0, al{k} = "
                + (f"((unsigned long)y{k} & 15) == 0;" if n % 2 == 0 else "0;") + "   /* 4 MiB; rows 16-byte aligned */"
                for k, n in enumerate(nout) if n > 256]
    return b


def _constant_results(consts, nout):
    """``(lines, zg)``: the statements writing the constant results ``consts`` (``(output, element,
    value)``) to the blocks' buffers once per thread, and per output of more than 256 elements the
    flags of its groups of 8 elements that are all zeros."""
    b, zg = [], {}
    # Constant results (rnea_derivatives of talos_reduced: 2,370 zeros of 4,332 elements) are the
    # same in every block: written once here, not by the program for every block.
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
    return b, zg


def _gather(nin, checks):
    """The statements gathering a block's inputs (sizes ``nin``) into the vectors ``X{k}``, adding
    ``inf`` to ``acc`` for a value that is not finite and, with ``check``, for a quaternion of
    ``checks`` off the unit sphere."""
    tol, quats = checks if checks else (0.0, ())
    b = []
    # Reads state by state (each state's row is contiguous: the hardware prefetcher follows it) and
    # prefetches the next block's rows: element by element across the rows is slower once the batch
    # leaves the L2 cache.
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
    return b


def _scatter(nout, zg):
    """``(statics, lines)``: the statements writing a block's results ``Y{k}`` (sizes ``nout``) to
    their rows, and the tables of all-zero groups ``zg`` they read (declared before the threads)."""
    statics, b = [], []
    # Results are written state by state (sequential stores) while the block's output vectors fit in
    # the L1 cache (<= 256 elements); larger outputs (crba, minv) are written element by element across
    # the block's rows, because reading their vectors with a stride is slower.
    # A large output of a large batch (>= 4 MiB: beyond a core's caches) is written to memory with
    # non-temporal stores: ordinary stores first read every line for ownership, which halves the
    # memory's write bandwidth.  A full block is written SD_W elements at a time (sd_rows: SD_W vectors
    # loaded once and transposed in registers, SD_W consecutive elements of each of SD_W rows stored),
    # past the caches when the rows are 16-byte aligned, so that each line is filled by consecutive
    # stores.
    for k, n in enumerate(nout):
        if n <= 256:
            b.append(f"        for (int s = 0; s < m; s++) {{ double *r = y{k} + (s0 + s) * {n}; "
                     f"for (long j = 0; j < {n}; j++) r[j] = Y{k}[j][s]; }}")
        else:
            src = f"(zg{k}[j >> 3] ? sd_zeros : Y{k} + j)" if any(zg.get(k, ())) else f"Y{k} + j"
            if src != f"Y{k} + j":
                statics.append(f"  static const unsigned char zg{k}[{len(zg[k])}] = {{{','.join(map(str, zg[k]))}}};")
            b.append(f"        if (m == SD_W && (al{k} || !nt{k})) {{ for (long j = 0; j + SD_W <= {n}; j += SD_W) "
                     f"sd_rows(y{k} + s0 * {n} + j, {n}, {src}, nt{k}); "
                     f"for (long j = {n} / SD_W * SD_W; j < {n}; j++) for (int s = 0; s < SD_W; s++) "
                     f"y{k}[(s0 + s) * {n} + j] = Y{k}[j][s]; }}")
            b.append(f"        else if (nt{k}) for (int s = 0; s < m; s++) {{ double *r = y{k} + (s0 + s) * {n}; "
                     f"for (long j = 0; j < {n}; j++) SD_NTSTORE(r + j, Y{k}[j][s]); }}")
            b.append(f"        else for (long j = 0; j < {n}; j++) for (int s = 0; s < m; s++) "
                     f"y{k}[(s0 + s) * {n} + j] = Y{k}[j][s];")
    return statics, b
