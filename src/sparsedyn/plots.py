"""Figures for reports and the demo (needs the optional ``matplotlib``: ``pip install sparsedyn[plot]``)."""

from __future__ import annotations

import numpy as np

__all__ = ["sparsity_text", "plot_sparsity"]


def sparsity_text(pattern, labels=None) -> str:
    """A text picture of a boolean (n, n) pattern: ``#`` nonzero, ``.`` zero, one row per line."""
    pattern = np.asarray(pattern, bool)
    width = max((len(s) for s in labels), default=0) if labels is not None else 0
    rows = []
    for i, row in enumerate(pattern):
        head = f"{labels[i]:>{width}} " if labels is not None else ""
        rows.append(head + "".join("#" if x else "." for x in row))
    return "\n".join(rows)


def plot_sparsity(H, pattern, path, title="", labels=None, zero_rtol=1e-12):
    """Save a PNG of ``|H|`` (log colour scale) over the structural ``pattern``; returns ``path``.

    Three kinds of entry are told apart: structural zeros (white: zero at every state),
    entries that are structurally nonzero but (numerically) zero at this state (light grey
    with a dot: ``|H_ij| <= zero_rtol * max |H|``, e.g. a coupling that vanishes at this
    posture), and data (coloured by ``log10 |H_ij|``).  ``labels``: one name per row/column.
    """
    import matplotlib
    matplotlib.use("Agg")     # files only, no display needed
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    H = np.asarray(H, float)
    pattern = np.asarray(pattern, bool)
    n = H.shape[0]
    absH = np.abs(H)
    top = absH.max() if absH.size else 1.0
    zero_here = pattern & (absH <= zero_rtol * top)
    data = pattern & ~zero_here
    mag = np.where(data, np.log10(np.where(data, absH, 1.0)), np.nan)
    fig, ax = plt.subplots(figsize=(10, 9.2))
    ax.imshow(np.where(zero_here, 1.0, np.nan), cmap="Greys", vmin=0, vmax=6, interpolation="nearest")
    im = ax.imshow(mag, cmap="viridis", interpolation="nearest")
    zr, zc = np.nonzero(zero_here)
    ax.plot(zc, zr, ".", color=(0.45, 0.45, 0.45), ms=2.5)
    ax.set_title(title, fontsize=12)
    cb = fig.colorbar(im, ax=ax, shrink=0.75, pad=0.02)
    cb.set_label("log10 |H_ij| of the nonzero entries", fontsize=10)
    legend = [Patch(facecolor="white", edgecolor="0.5", label="structural zero (every state)"),
              Patch(facecolor=(0.83, 0.83, 0.83), edgecolor="0.5",
                    label=f"structurally nonzero, zero at this state ({int(zero_here.sum())})"),
              Patch(facecolor=plt.get_cmap("viridis")(0.7), edgecolor="0.5",
                    label=f"nonzero at this state ({int(data.sum())})")]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=9,
              frameon=False)
    if labels is not None:
        size = 8 if n <= 40 else 6 if n <= 80 else 4
        ax.set_yticks(range(n), labels, fontsize=size)
        ax.set_xticks(range(n), labels, fontsize=size, rotation=90)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
