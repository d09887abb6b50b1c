"""Pieces shared by the C emitters (:mod:`.cemit`): literals, sizes, operators, translation units."""

from __future__ import annotations

from ..symbolic.ir import ADD, ATAN2, CONST, COPYSIGN, COS, DIV, MATMUL, MUL, SIN, SQRT, SUB

__all__ = []


def _ops(prog) -> int:
    """Operations of the program ``prog``, a dense block product not counted (a loop in every code
    shape): what the loop threshold (:func:`~.cemit.loop_threshold`) weighs."""
    return sum(1 for op, _, _ in prog.nodes if CONST < op != MATMUL)


def _workspace(nws, nout, stack_slots, indent="  ", at="0 * ", leave="return"):
    """``(declaration, release)``: C lines of the workspace ``w`` of ``nws`` doubles, on the stack up to
    ``stack_slots``, else from the heap (threads have small stacks), where a failed allocation makes the
    outputs (sizes ``nout``; state ``at``, e.g. ``"s * "``) NaN and ends with ``leave``."""
    if nws <= stack_slots:
        return [f"{indent}double w[{nws}];"], []
    nan = "".join(f" for (long j = 0; j < {n}; j++) y{k}[{at}{n} + j] = 0.0 / 0.0;" for k, n in enumerate(nout))
    return [f"{indent}double *w = (double *)aligned_alloc(64, {(8 * nws + 63) // 64 * 64});",
            f"{indent}if (!w) {{{nan} {leave}; }}"], [f"{indent}free(w);"]


def _lit(v: float) -> str:
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")):
        return {"nan": "(0.0 / 0.0)", "inf": "(1.0 / 0.0)", "-inf": "(-1.0 / 0.0)"}[repr(v)]
    return f"({v.hex()})" if v < 0 else v.hex()


_SYM = {ADD: "+", SUB: "-", MUL: "*", DIV: "/"}
_SCALAR_FNS = {SIN: "sin", COS: "cos", SQRT: "sqrt", ATAN2: "atan2", COPYSIGN: "copysign"}


def _sizes(shapes):
    out = []
    for s in shapes:
        n = 1
        for d in s:
            n *= int(d)
        out.append(n)
    return out


def _units(funcs, tail, unit_size, head=""):
    """The segment functions ``funcs`` (``(operations, source)``, an iterable) grouped into
    translation units of about ``unit_size`` operations, ``tail`` (the entry points) closing the
    last one; ``head`` opens each unit.  A generator: a unit comes as soon as its functions have."""
    cur, size = [], 0
    for n, f in funcs:
        if cur and size + n > unit_size:
            yield head + "\n".join(cur)
            cur, size = [], 0
        cur.append(f)
        size += n
    cur += tail
    yield head + "\n".join(cur)
