"""collide's quick call on a mesh-box road (sparsedyn.contact.collision_quick): the road's calls bound
once give the road's own rows, so collide's hits are those picked from mesh_box_road.box_road_rows'
table, bit for bit, at poses about the box; and where the road declines (EPA stopped by its cap) the
quick call declines too and collide answers the general road's hits."""

import numpy as np
import pytest

import sparsedyn as sd
import sparsedyn.contact.collision as collision
from sparsedyn.contact import mesh_box_road
from sparsedyn.contact.collision import collide_within
from sparsedyn.contact.collision_quick import QUICK
from test_collision import random_body_q
from test_mesh_box_road import _poses, _same, _scene, capped_epa_declines


def test_the_quick_call_is_the_roads_table_picked_bit_for_bit():
    scene = _scene(True)
    rng = np.random.default_rng(21)
    with sd.use_backend("native", deterministic=True):
        high = np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0]
        sd.collide(scene, high), sd.collide(scene, high)
        road = scene.cache[collision._ROAD]
        assert isinstance(road[1], mesh_box_road.BoxRoad)
        boxed = 0
        for q in _poses(rng, 30):
            got = sd.collide(scene, q)
            rows = mesh_box_road.box_road_rows(scene, road[1], q)
            if rows is None:                               # (declined: the general road's)
                _same(got, collide_within(scene, q, None))
                continue
            want = collision._kernel_hits(scene, road[4], road[5], rows, rows[:, 0] < float(road[1].cutoff))
            assert got.pairs == want.pairs and np.array_equal(got.pair, want.pair)
            for a, b in zip(got[1:4], want[1:4]):
                assert np.array_equal(a, b)
            boxed += sum(1 for a, b in got.pairs if "box" in (a, b))
        assert all(c[1] is not None for c in scene.cache[QUICK].values())
    assert boxed >= 30


def test_a_plain_list_takes_the_quick_call(monkeypatch):
    """``q`` as a plain list (Python floats, and ``list(q)``'s NumPy floats) and as a tuple: the quick call
    answers (the general road is never asked) with the hits of the same state as a float64 array, bit for
    bit."""
    scene = _scene(True)
    with sd.use_backend("native", deterministic=True):
        q = np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0]
        sd.collide(scene, q), sd.collide(scene, q)
        for x in _poses(np.random.default_rng(21), 5):
            want = sd.collide(scene, x)
            with monkeypatch.context() as m:
                m.setattr(collision, "collide_within", lambda *args: pytest.fail("the general road was asked"))
                for given in (x.tolist(), list(x), tuple(x.tolist())):
                    got = sd.collide(scene, given)
                    assert got.pairs == want.pairs and all(np.array_equal(a, b) for a, b in zip(got[1:], want[1:]))


def test_where_the_road_declines_so_does_the_quick_call(monkeypatch):
    def quick_call(scene):
        quick = scene.cache[QUICK]
        assert len(quick) == 1
        return next(iter(quick.values()))[1]
    assert capped_epa_declines(monkeypatch, 22, quick_call) >= 3


def _on_the_floor():
    """test_mesh_box_road's body (two convex meshes and a ball) over the floor alone: the collision kernel's
    pair (the ball) and the meshes' on the plane (mesh_plane_loop)."""
    scene = _scene(False)
    return sd.Scene(scene.model, world=[sd.Shape("plane", name="floor")], margin=0.005)


def test_the_quick_call_on_a_kernel_and_mesh_plane_road_is_the_general_roads_bit_for_bit():
    scene = _on_the_floor()
    rng = np.random.default_rng(23)
    with sd.use_backend("native", deterministic=True):
        rest = np.r_[0.0, 0.0, 0.04, 0.0, 0.0, 0.0, 1.0]
        sd.collide(scene, rest), sd.collide(scene, rest)
        road = scene.cache[collision._ROAD]
        assert road[0] is not None and road[3] is not None      # (the kernel's and the mesh-plane loop's)
        earlier, touching = None, 0
        for _ in range(30):
            _, _, q = random_body_q(rng, 0.1)
            q[2] = rng.uniform(0.0, 0.1)
            got, want = sd.collide(scene, q), collide_within(scene, q, None)
            assert got.pairs == want.pairs and np.array_equal(got.pair, want.pair)
            for a, b in zip(got[1:4], want[1:4]):
                assert np.array_equal(a, b)
            if earlier is not None:                           # (the table is the thread's: the hits their own)
                assert all(np.array_equal(a, b) for a, b in zip(earlier[0][1:5], earlier[1]))
            earlier = (got, [np.array(a, copy=True) for a in got[1:5]])
            touching += sum(1 for a, b in got.pairs if a in ("pebble", "stone") or b in ("pebble", "stone"))
        assert all(c[1] is not None for c in scene.cache[QUICK].values())
    assert touching >= 20
