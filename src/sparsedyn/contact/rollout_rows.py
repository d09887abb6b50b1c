"""A rollout's states as rows: the steps that the extension's ``scene_rollout`` runs one after another
(:func:`~sparsedyn.contact.scene_fused.chained_steps`) copy their next ``q``, next ``v`` and report into
rows laid out once per rollout (:func:`rollout_rows`), so the rollout's ``q`` (steps + 1, nq) and ``v``
(steps + 1, nv) are those rows where every step ran so, with no array stacked after; the steps of
another road among them are single states, joined to the chains' blocks (:func:`stacked_states`)."""

from __future__ import annotations

import numpy as np

__all__ = ["rollout_rows", "append_chain", "stacked_states"]


def rollout_rows(model, steps, q, v):
    """``(Q (steps + 1, nq), V (steps + 1, nv), R (steps, 8))`` float64 rows for a rollout of ``steps``
    steps of ``model`` from ``q`` (nq,), ``v`` (nv,) (their first rows; the others unset): the ``into``
    of :func:`~sparsedyn.contact.scene_fused.chained_steps`, which sets row k + 1 of ``Q``, ``V`` and row
    k of ``R`` (the step's report) for step k."""
    rows = (np.empty((steps + 1, model.nq)), np.empty((steps + 1, model.nv)), np.empty((steps, 8)))
    rows[0][0], rows[1][0] = q, v
    return rows


def append_chain(runs, rows, k, qs, vs, imps, modes, its, warn):
    """Append the steps ``runs`` of :func:`~sparsedyn.contact.scene_fused.chained_steps` from step
    ``k`` (their arrays finite: the kernel's fast path; their states and reports in ``rows``
    (:func:`rollout_rows`)) to a rollout's lists: their states one block of rows each in ``qs``,
    ``vs``, each step's impulses, its modes as its ``(arrays, index)`` (made when read,
    :class:`~sparsedyn.contact.lazy_modes._TrajectoryModes`), its iterations from the reports at once;
    ``warn(step)`` for each step that stopped before its tolerance (its report's flag 0)."""
    n = len(runs)
    qs.append(rows[0][k + 1:k + 1 + n]), vs.append(rows[1][k + 1:k + 1 + n])
    imps += [got[4] for got in runs]
    modes += [got[:2] for got in runs]
    rep = rows[2][k:k + n].T                      # (8, n): the steps' reports
    its += rep[3].astype(int).tolist()
    ok = rep[4].tolist()                          # (converged: 1)
    if min(ok) <= 0.5:
        for got in (got for got, x in zip(runs, ok) if x <= 0.5):
            warn(got)


def stacked_states(qs, vs, rows, chained, steps):
    """A rollout's states ``(qs, vs)`` of one state, where ``chained`` of its ``steps`` steps appended
    blocks of ``rows`` (:func:`append_chain`): the rows themselves where every step did (stacked
    already), else the lists with each block's rows in turn (as many single states)."""
    if chained and chained == steps:
        return rows[0], rows[1]
    if chained:
        return tuple([y for x in xs for y in (x if x.ndim == 2 else (x,))] for xs in (qs, vs))
    return qs, vs
