"""The Gram matrix by groups of rows (sparsedyn.identification.gram): groups by hand, and the grouped
matrix of iCub's joint-force and F/T rows equal to NumPy's product of all rows."""
import numpy as np

from sparsedyn import identification as idn
from sparsedyn.identification.gram import add_gram, row_groups
from conftest import rounding_bound
import erd


def test_row_groups_by_hand():
    """Widest first; a kind joins the narrowest group containing it when the group's width squared is
    at most 1.5 times its own (5^2 <= 1.5 5^2 for a copy; 4^2 > 1.5 3^2), else starts a group."""
    m = lambda *cols: np.isin(np.arange(7), cols)          # noqa: E731  (column 6: the right-hand side)
    A, B, C, D, E = m(0, 1, 2, 3, 6), m(0, 1, 6), m(4, 5, 6), m(0, 1, 2, 6), m(0, 1, 2, 3, 6)
    got = [(k, list(c)) for k, c in row_groups([A, B, C, D, E])]
    assert got == [([0, 4], [0, 1, 2, 3, 6]), ([3], [0, 1, 2, 6]), ([1], [0, 1, 6]), ([2], [4, 5, 6])]


def test_grouped_gram_of_a_humanoid_with_sensors_is_that_of_all_rows():
    """iCub's rows split into many groups (its limbs share no parameter); the matrix they add is
    NumPy's [A b]^T [A b] of the stacked rows, and costs a small part of the dense product's flops."""
    model, sensors = erd.icub_with_sensors()
    q, v, a = idn.random_states(model, 6, seed=2)
    rng = np.random.default_rng(0)
    data = idn.IdentificationData(model, sensors=sensors)
    ft = {s: rng.normal(size=(6, 6)) for s in sensors}
    tau = rng.normal(size=(6, model.nv))
    data.add(q, v, a, tau, ft=ft)
    groups = data._row_groups()
    Mb = data._rows(q, v, a, tau, [ft[s] for s in sensors])
    G = Mb.T @ Mb
    mine = np.zeros_like(G)
    add_gram(mine, data._blocks(Mb, 6), groups)
    scale = np.sqrt(np.outer(np.diag(G), np.diag(G)))
    assert len(groups) > 6 and np.all(np.abs(np.triu(mine) - np.triu(G)) <= rounding_bound(len(Mb)) * scale)
    rows = [B.shape[1] for B in data._blocks(Mb, 1)]
    flops = sum(sum(rows[j] for j in k) * len(c) ** 2 for k, c in groups)
    assert flops < 0.5 * sum(rows) * G.shape[0] ** 2
