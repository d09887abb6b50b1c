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


def plot_sparsity(H, pattern, path, title="", labels=None):
    """Save a PNG of ``|H|`` (log colour scale) with the structural pattern outlined; returns ``path``."""
    import matplotlib
    matplotlib.use("Agg")     # files only, no display needed
    import matplotlib.pyplot as plt

    H = np.asarray(H, float)
    n = H.shape[0]
    mag = np.where(np.asarray(pattern, bool), np.log10(np.abs(H) + 1e-12), np.nan)
    fig, ax = plt.subplots(figsize=(7.5, 7))
    im = ax.imshow(mag, cmap="viridis", interpolation="nearest")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, shrink=0.8, label="log10 |H_ij| (blank: structural zero)")
    if labels is not None:
        ax.set_yticks(range(n), labels, fontsize=6)
        ax.set_xticks(range(n), labels, fontsize=6, rotation=90)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
