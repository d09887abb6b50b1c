"""The curved pieces of the height field's C routine (sparsedyn.contact.heightfield_curved_c, compiled with
sparsedyn.contact.heightfield_more_c) by hand: an ellipsoid over a ridge (Eberly's iteration on the ellipse
it makes seen along the ridge's edge) and a cylinder standing with its rim across a ridge (Newton's
iteration along the edge), each a distance ``delta`` above the ridge, where the faces on either side fall
away more steeply than the shape: the deepest hit is ``delta``, on the ridge, the normal along the field's
up (the cylinder's rim crosses the ridge twice: a hit at each crossing).  The NumPy road's agreement with
the routine on random states: test_heightfield_more_c.

Tolerances: the routine rounds a few dozen operations on coordinates below 1 (themselves a rounding off
the decimal values) and Newton's or Eberly's iteration converges to rounding: ``rounding_bound(64)``; the
normal is a difference over ``delta`` (0.01): that bound over it.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import collision_hfield
from sparsedyn.model.spatial import Transform

DELTA = 0.01
#: The ridge: the middle column of a 5 x 5 field 2 m square, 0.5 m high (x = 0), the others 0 m.
TOP = 0.5


def _on_ridge(kind, size, R, p, monkeypatch):
    """The hits (native road) of shape ``kind`` placed ``(R, p)`` on the ridge, and whether the C routine
    measured them."""
    b = sd.ModelBuilder("one").add_body("body", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    g = sd.Geometry("s", 0, Transform(np.eye(3), np.zeros(3)), kind, size, "collision")
    heights = np.zeros((5, 5))
    heights[:, 2] = 1.0
    scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("hfield", (1.0, 1.0, TOP, 0.1), heights=heights)],
                     margin=0.05)
    h = next(i for i, s in enumerate(scene.shapes) if s.kind == "hfield")
    Rs, ps = np.stack([np.eye(3)] * 2), np.zeros((2, 3))
    Rs[1 - h], ps[1 - h] = R, p
    calls = []
    routine = collision_hfield.more_on_hfield_c
    monkeypatch.setattr(collision_hfield, "more_on_hfield_c", lambda *x: calls.append(routine(*x)) or calls[-1])
    with sd.use_backend("native"):
        hits = collision_hfield.hfield_pairs(scene, np.array([0]), Rs, ps, np.array([0.05]))
    return hits, len(calls) == 1 and calls[0] is not None


@pytest.mark.parametrize("kind, size, R, p, where", [
    # an ellipsoid level over the ridge, off its grid points (y = 0.25): its lowest point over the edge
    ("ellipsoid", (0.3, 0.2, 0.1), np.eye(3), [0.0, 0.25, TOP + 0.1 + DELTA], [0.0, 0.25, TOP]),
    # a cylinder of radius 0.1 standing 0.06 beside the ridge: its bottom rim crosses x = 0 at y = 0.25 -+ 0.08
    ("cylinder", (0.1, 0.3), np.eye(3), [0.06, 0.25, TOP + 0.15 + DELTA], [0.0, 0.17, TOP]),
    ("cylinder", (0.1, 0.3), np.eye(3), [0.06, 0.25, TOP + 0.15 + DELTA], [0.0, 0.33, TOP]),
])
def test_a_curved_shape_over_a_ridge_is_its_gap_above_it(kind, size, R, p, where, monkeypatch):
    (k, d, wa, wb, n), in_c = _on_ridge(kind, size, R, np.array(p), monkeypatch)
    assert in_c
    bound = rounding_bound(64)
    i = np.argmin(np.abs(wb - where).max(1) + (d > DELTA + bound))    # (the hit there, among the deepest)
    assert abs(d[i] - DELTA) <= bound and d.min() >= DELTA - bound
    assert np.abs(wb[i] - where).max() <= bound and np.abs(wa[i] - (np.array(where) + [0, 0, DELTA])).max() <= bound
    assert np.abs(n[i] - [0, 0, 1]).max() <= bound / DELTA
