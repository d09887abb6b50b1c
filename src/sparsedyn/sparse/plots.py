"""Pictures of ``[D; D_Y]`` and the report behind ``sparsedyn sparsity MODEL --problem id|fd``.

:func:`plot_system` draws the worst-case pattern twice, side by side:

* *before*: rows and columns in the natural order of :mod:`.variables`
  (Newton-Euler row blocks ``c(3a)``, ``c(3f)``, ``c(3tau)``, then the
  measurement rows; variables ``a, f, tau, fx, qdd``), with every row and
  column block labelled;
* *after*: rows ``row_order`` and columns ``col_order`` of the analysis (block
  triangular form, then the static pivot order inside each block), the
  diagonal blocks larger than 1x1 outlined and the fill-in of the symbolic LU
  in red.  Labels name the runs of consecutive rows/columns of one block.

Colours (with a legend in the picture): black = constant +-1, blue = other
model constant, orange = state-dependent (joint transforms), red = fill-in; the
meaning of the row and column labels is printed under the picture (:data:`BLOCK_NAMES`).  Needs ``matplotlib``
(``pip install sparsedyn[plot]``); files only, no display.
"""

from __future__ import annotations

import numpy as np

from .assembly import CONST, ONE, STATE, SystemPattern
from .measurements import Problem, forward_dynamics_problem, inverse_dynamics_problem
from .solver import StructurallySingularError, analyze

__all__ = ["plot_system", "sparsity_report", "PROBLEMS", "BLOCK_NAMES"]

PROBLEMS = {"id": inverse_dynamics_problem, "fd": forward_dynamics_problem}
_COLOURS = {ONE: (0.0, 0.0, 0.0), CONST: (0.15, 0.35, 0.85), STATE: (0.95, 0.55, 0.05)}
_FILL = (0.85, 0.1, 0.1)
_MARK = (0.6, 0.0, 0.6)


def _runs(labels):
    """``[(start, stop, label)]`` of consecutive equal labels."""
    out, start = [], 0
    for k in range(1, len(labels) + 1):
        if k == len(labels) or labels[k] != labels[start]:
            out.append((start, k, labels[start]))
            start = k
    return out


def _image(pattern, rows, cols, fill=(), mark_cols=()):
    rpos = {r: k for k, r in enumerate(rows)}
    cpos = {c: k for k, c in enumerate(cols)}
    img = np.ones((len(rows), len(cols), 3))
    for r, c, k in zip(pattern.rows.tolist(), pattern.cols.tolist(), pattern.cls.tolist()):
        img[rpos[r], cpos[c]] = _COLOURS[k]
    for r, c in fill:
        img[rpos[r], cpos[c]] = _FILL
    for c in mark_cols:
        col = img[:, cpos[c]]
        col[np.all(col == 1.0, axis=-1)] = (0.97, 0.85, 0.97)
    return img


def _label_axis(ax, runs, axis, max_labels, lines=True, kinds=None):
    """Tick labels at run centres, at least ``total / max_labels`` apart (no overlaps on big
    systems); separators between runs, or only between kinds when runs are too many to see."""
    total = runs[-1][1] if runs else 0
    gap = total / max_labels
    ticks, names, last = [], [], -np.inf
    for a, b, lab in runs:
        centre = (a + b - 1) / 2
        if centre - last >= gap:
            ticks.append(centre)
            names.append(lab)
            last = centre
    size = 8 if len(ticks) <= 40 else 7 if len(ticks) <= 60 else 5
    if axis == "y":
        ax.set_yticks(ticks, names, fontsize=size)
    else:
        ax.set_xticks(ticks, names, fontsize=size, rotation=90)
    if lines:
        cuts = [a for a, _, _ in runs[1:]]
        if len(cuts) > 120 and kinds is not None:
            cuts = [k for k in range(1, total) if kinds[k] != kinds[k - 1]]
        for a in cuts:
            (ax.axhline if axis == "y" else ax.axvline)(a - 0.5, color=(0.8, 0.8, 0.8), lw=0.3, zorder=0)


#: What the row and column labels of :func:`plot_system` mean (printed under the picture).
BLOCK_NAMES = ("rows: c(3a)[body] its acceleration recursion, c(3f)[body] its force balance (Nori, eqs. 3a, 3f), "
               "c(3tau)[joint] the joint force as the projection of the joint wrench (3tau), y[...] a "
               "measurement (a sensor, or a 'known' variable);\n"
               "columns: a[body] spatial acceleration, f[body] wrench transmitted by its joint, tau[joint] joint "
               "force, fx[body] external wrench, qdd[joint] joint acceleration (all in body frames)")


def plot_system(structure_or_pattern, path, title=None, max_labels=60, undetermined=()):
    """Save the before/after sparsity picture of ``[D; D_Y]`` as a PNG at ``path``; returns ``path``.

    ``structure_or_pattern``: a :class:`~sparsedyn.sparse.Structure` (both
    panels) or a :class:`~sparsedyn.sparse.assembly.SystemPattern` (the *before*
    panel only, e.g. for a structurally singular problem, whose
    ``undetermined`` columns are shaded).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    st = None if isinstance(structure_or_pattern, SystemPattern) else structure_or_pattern
    pattern = structure_or_pattern if st is None else st.pattern
    L = pattern.layout
    nat_rows, nat_cols = list(range(pattern.nrows)), list(range(pattern.n))
    row_lab = lambda r: pattern.row_owner(r).label                  # noqa: E731
    col_lab = lambda c: L.column_owner(c).label                     # noqa: E731
    panels = 1 if st is None else 2
    side = 7.5 if pattern.n < 300 else 9.5
    fig, axes = plt.subplots(1, panels, figsize=(side * panels + 1.5, side + 1.0), squeeze=False)
    ax = axes[0, 0]
    ax.imshow(_image(pattern, nat_rows, nat_cols, mark_cols=undetermined), interpolation="nearest", aspect="auto")
    _label_axis(ax, _runs([row_lab(r) for r in nat_rows]), "y", max_labels,
                kinds=[pattern.row_owner(r).kind for r in nat_rows])
    _label_axis(ax, _runs([col_lab(c) for c in nat_cols]), "x", max_labels,
                kinds=[L.column_owner(c).kind for c in nat_cols])
    ax.set_title("[D; D_Y], natural order" + (" (shaded: undetermined columns)" if undetermined else ""),
                 fontsize=9)
    if st is not None:
        ax = axes[0, 1]
        rows, cols = st.row_order.tolist(), st.col_order.tolist()
        fill = [p for b in st.blocks for p in b.fill_positions]
        ax.imshow(_image(pattern, rows, cols, fill), interpolation="nearest", aspect="auto")
        _label_axis(ax, _runs([row_lab(r) for r in rows]), "y", max_labels, lines=False)
        _label_axis(ax, _runs([col_lab(c) for c in cols]), "x", max_labels, lines=False)
        start = 0
        for b in st.blocks:
            if b.size > 1:
                ax.add_patch(Rectangle((start - 0.5, start - 0.5), b.size, b.size, fill=False,
                                       edgecolor=_MARK, lw=0.8))
            start += b.size
        kind = "triangular (substitution)" if st.triangular else \
            ", ".join(sorted({b.ordering for b in st.blocks if b.size > 1})) + f" order, fill-in {st.fill}"
        ax.set_title(f"permuted: block triangular form, {kind}", fontsize=9)
    from matplotlib.patches import Patch
    name = title or (st.problem.name if st is not None else pattern.problem.name)
    fig.suptitle(f"{name} of model {L.model.name!r}: {pattern.n} unknowns, {pattern.nnz} worst-case nonzeros",
                 fontsize=12)
    legend = [Patch(facecolor=_COLOURS[ONE], label="constant +-1"),
              Patch(facecolor=_COLOURS[CONST], label="other model constant (inertia, geometry)"),
              Patch(facecolor=_COLOURS[STATE], label="depends on the state (joint transforms)")]
    if st is not None:
        legend += [Patch(facecolor=_FILL, label="fill-in of the factorization"),
                   Patch(facecolor="white", edgecolor=_MARK, label="diagonal block solved together")]
    if undetermined:
        legend.append(Patch(facecolor=(0.97, 0.85, 0.97), label="column no equation determines"))
    fig.legend(handles=legend, loc="lower center", ncol=len(legend), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 0.045))
    fig.text(0.5, 0.005, BLOCK_NAMES, ha="center", va="bottom", fontsize=8, wrap=True)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sparsity_report(model, problem="id", path=None, ordering="auto", flops=True) -> str:
    """Text report (and, with ``path``, the PNG of :func:`plot_system`) for the CLI
    ``sparsedyn sparsity MODEL --problem id|fd``.

    ``problem``: ``"id"``, ``"fd"`` or a :class:`~sparsedyn.sparse.Problem` of ``model``.
    Reports sizes, the block structure, fill-in and pivot safety per ordering,
    and (``flops=True``) the operation counts per phase of one solve.  A
    structurally singular problem is reported (with the undetermined variables,
    and the *before* picture shading them) instead of raising.
    """
    if isinstance(problem, str):
        if problem not in PROBLEMS:
            raise ValueError(f"problem: expected one of {sorted(PROBLEMS)} or a Problem, got {problem!r}")
        problem = PROBLEMS[problem](model)
    elif not isinstance(problem, Problem):
        raise TypeError(f"problem: expected 'id', 'fd' or a Problem, got {type(problem).__name__}")
    try:
        st = analyze(problem, ordering=ordering)
    except StructurallySingularError as e:
        out = [f"structurally singular: {e}"]
        if path is not None:
            plot_system(SystemPattern(problem), path, undetermined=e.columns)
            out.append(f"picture (natural order, undetermined columns shaded): {path}")
        return "\n".join(out)
    out = [st.summary()]
    big = [b for b in st.blocks if b.size > 1]
    if big:
        out.append("fill-in of the non-triangular blocks per ordering:")
        for o in ("articulated", "colamd", "mmd_at_plus_a"):
            try:
                other = analyze(problem, o)
            except ValueError:
                out.append(f"  {o:>14}: not applicable (a non-triangular block is not made of whole bodies' "
                           f"Newton-Euler rows)")
                continue
            un = len(other.unproven_pivots())
            out.append(f"  {o:>14}: fill-in {other.fill:>6}, unproven pivots {un}")
    if flops:
        from .flops import count_solve, total
        counts = count_solve(st)
        t = total(counts)
        out.append("operations of one solve (all of d; mul/add/div counted from the IR, the rule of "
                   "sparsedyn.symbolic.ir.Program.flops): " +
                   ", ".join(f"{p} {c['mul']}/{c['add']}/{c['div']}" for p, c in counts.items()) +
                   f"; total {t['mul']}/{t['add']}/{t['div']}")
    if path is not None:
        plot_system(st, path)
        out.append(f"picture: {path}")
    return "\n".join(out)

