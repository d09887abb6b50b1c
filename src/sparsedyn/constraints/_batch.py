"""Looping a one-state solver over leading batch axes (the solvers use LAPACK and value-dependent choices)."""

from __future__ import annotations

import numpy as np

__all__ = ["loop"]


def loop(fn, arrays):
    """Call ``fn`` on every state of ``arrays`` = [(array or None, core ndim), ...] and stack the results.

    Array and number results (or NamedTuple fields) are stacked to ``batch + shape``;
    other values (partitions, strings) are gathered in object arrays of the batch shape.
    """
    shapes = [np.shape(x)[:np.ndim(x) - c] for x, c in arrays if x is not None]
    batch = np.broadcast_shapes(*shapes)
    full = [None if x is None else np.broadcast_to(x, batch + np.shape(x)[np.ndim(x) - c:]) for x, c in arrays]
    outs = [fn(*[None if x is None else x[idx] for x in full]) for idx in np.ndindex(*batch)]
    first = outs[0]

    def stack(vals):
        if isinstance(vals[0], (np.ndarray, float, int, bool, np.number, np.bool_)):
            a = np.asarray(vals)
            return a.reshape(batch + a.shape[1:])
        o = np.empty(len(vals), dtype=object)
        for i, val in enumerate(vals):
            o[i] = val
        return o.reshape(batch)

    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*[stack([getattr(o, f) for o in outs]) for f in first._fields])
    return stack(outs)
