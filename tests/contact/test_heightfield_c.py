"""Spheres against a height field in one C call (sparsedyn.contact.heightfield_c): the NumPy road's hits
(sparsedyn.contact.heightfield.points_on_hfield, itself checked against coal's distance to the surface in
test_heightfield) on random fields, spheres and cutoffs; without a C compiler, None and collide's hits
from the NumPy road.

Tolerances: both roads write the same operations in the same order; a compiler that fuses a multiply and
an add moves a result by a rounding, ``rounding_bound(64)`` times the size of the coordinates, and a
normal ``(c - w_b) / D`` by that over the distance ``D`` from the centre to the surface.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import heightfield, heightfield_c
from test_collision_hfield import _scene


def _random_case(rng, flat=False):
    """A field of 2-11 rows and columns (flat or random), spheres over and off it (some of radius 0:
    points), some centres on the grid's lines, and a cutoff per sphere."""
    nrow, ncol = rng.integers(2, 12, 2)
    size = (rng.uniform(0.2, 2), rng.uniform(0.2, 2), rng.uniform(0.01, 1), rng.uniform(0.01, 0.5))
    H = np.full((nrow, ncol), 0.3) if flat else rng.uniform(0, 1, (nrow, ncol))
    k = rng.integers(1, 30)
    C = np.column_stack([rng.uniform(-1.3, 1.3, k) * size[0], rng.uniform(-1.3, 1.3, k) * size[1],
                         rng.uniform(-0.3, 1.2, k) * size[2]])
    C[::3, :2] = np.round(C[::3, :2], 1)
    r = rng.uniform(0, 0.2, k) * (rng.uniform(size=k) < 0.7)
    return size, H, C, r, rng.uniform(0.001, 0.3, k)


@pytest.mark.parametrize("flat", [False, True])
def test_the_c_routine_gives_the_numpy_roads_hits(flat):
    rng = np.random.default_rng(11 + flat)
    compared = below = 0
    for _ in range(300):
        size, H, C, r, reach = _random_case(rng, flat)
        x, y, z = heightfield.hfield_grid(size, H)
        want = heightfield.points_on_hfield(size, H, heightfield.hfield_triangles(size, H), C, r, reach)
        got = heightfield_c.points_on_hfield_c(heightfield_c.field_grid(x, y, z, size), C, r, list(reach))
        if got is None:
            pytest.fail("the C routine was not built (the test environment has a C compiler)")
        assert np.array_equal(got[0], want[0])
        scale = max(1.0, np.abs(C).max(), np.abs(z).max())
        bound = rounding_bound(64) * scale
        for g, w in zip(got[1:4], want[1:4]):
            assert np.abs(g - w).max(initial=0.0) <= bound
        D = np.abs(want[1] + r[want[0]])                          # the centre's distance to the surface
        assert (np.abs(got[4] - want[4]).max(1, initial=0.0) <= bound / np.maximum(D, 1e-300) + bound).all()
        compared += len(want[0])
        below += int((want[1] + r[want[0]] < 0).sum())
    assert compared >= 1000 and below >= 50


def test_without_a_c_compiler_collide_takes_the_numpy_road(monkeypatch):
    """The routine not built: None, and the ball's hit on the flat field (surface 0.1 high) still its
    height less its radius, from the NumPy road."""
    scene = _scene("sphere", (0.1,))
    monkeypatch.setattr(heightfield_c, "_routine", lambda: None)
    size, H, C, r, reach = _random_case(np.random.default_rng(0))
    x, y, z = heightfield.hfield_grid(size, H)
    assert heightfield_c.points_on_hfield_c(heightfield_c.field_grid(x, y, z, size), C, r, reach) is None
    with sd.use_backend("native"):
        hits = sd.collide(scene, [0.3, -0.1, 0.23, 0, 0, 0, 1])
    assert len(hits.distances) == 1 and abs(hits.distances[0] - 0.03) <= rounding_bound(64)
