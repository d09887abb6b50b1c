"""A step's rows of robot meshes on world boxes (sparsedyn.contact.mesh_box_step): collide's road of
those pairs, each pair's cutoff its look-ahead, beside pairs of no rows (the body's shapes on a flat world
mesh laid on the box).

Oracles: the general rows (``mesh_box_rows``: coal's ``distance`` per pair at the general road's
request, the same patch routine, the columns from coal's witnesses); coal's signed distance between
the mesh's convex hull and the box (each pair's deepest row); the data laid out from Contact objects
(``scene_slots(scene_contacts(...))``, the road the step takes where this one declines).
Tolerances: ``rounding_bound`` (the roads differ in the order of a few operations: the witnesses
rebuilt from the midpoint, ``x +- d n / 2``); coal's GJK at 1e-11 for its distances.
"""

import coal
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact import mesh_box_road, mesh_box_step, scene_data
from sparsedyn.contact.collision import placements
from sparsedyn.contact.hull_pairs import hull_rows
from sparsedyn.contact.collision_coal import _coal_geometry, _hull_convex
from sparsedyn.contact.look_ahead import pair_cutoffs
from test_collision import coal_distance
from test_mesh_box_road import BOX, CENTRE, TURN, _poses, _scene
from test_scene_data import _as_contact_objects_data
from test_scene_fused import _python_road, _same

BOUND = rounding_bound(16)
DT = 1e-3
#: A mat (a flat world mesh, two triangles: its pairs have no rows on this road) laid on the box's top
#: face, its surface MAT [m] above it; and the body's ball 4 cm below the body's origin (among the meshes)
MAT, LOW = 0.002, (0.0, 0.0, -0.04)


def _matted(near):
    """:func:`_scene` with a mat: on the box's top, the ball 4 cm under the body (``near``); or 3 m
    from the box, the ball 1 m above the body (its pairs never near the box)."""
    turn = sd.spatial.rpy_to_rot(TURN)
    at = CENTRE + turn[:, 2] * BOX[2] / 2 if near else np.array([3.0, 0.0, 0.0])
    square = np.array([[-0.1, -0.1, MAT], [0.1, -0.1, MAT], [0.1, 0.1, MAT], [-0.1, 0.1, MAT]])
    mat = sd.Shape("mesh", mesh=(square, np.array([[0, 1, 2], [0, 2, 3]])), placement=(turn, at), name="mat")
    return _scene(False, ball_offset=LOW if near else (0.0, 0.0, 1.0), extra=[mat])


def _states(rng, n):
    """``(q, v)`` of :func:`_poses` with random velocities (a step's look-ahead: the cutoffs vary)."""
    return [(q, 0.3 * rng.standard_normal(6)) for q in _poses(rng, n)]


def _rows(scene, q, v, road=True):
    """The rows of the scene's mesh-box pairs at ``(q, v)`` (each pair's look-ahead of a step of DT):
    the step's (``road``) or the general ones."""
    mixed = scene_data._mixed_plan(scene)[0]
    cut = pair_cutoffs(scene, q, v, DT)
    if road:
        got = mesh_box_step.mesh_box_step_rows(scene, mixed.boxes, mixed.others, mixed.bb, mixed.hulls, q, cut)
        return None if got is None else got[0]
    return mesh_box_step.mesh_box_rows(scene, mixed.boxes, q, cut[mixed.boxes], mixed.others, cut[mixed.others])


def _same_rows(got, want):
    assert np.array_equal(got[:, 0] == np.inf, want[:, 0] == np.inf)
    filled = want[:, 0] != np.inf
    assert np.abs(got[filled] - want[filled]).max(initial=0.0) <= BOUND


def test_the_steps_rows_are_the_general_rows_and_coals_closest_pairs(monkeypatch):
    """At random poses about the box, each pair's cutoff its look-ahead: the rows come from the road
    (its tables per thread; ``mesh_box_rows`` is not called) and equal the general rows, row for row;
    each pair's deepest row has coal's signed distance between the mesh's hull and the box."""
    scene = _matted(False)
    rng = np.random.default_rng(7)
    states = _states(rng, 30)
    with sd.use_backend("native", deterministic=True):
        _rows(scene, *states[0])                           # (builds the native placements the road needs)
        general = mesh_box_step.mesh_box_rows
        monkeypatch.setattr(mesh_box_step, "mesh_box_rows", lambda *a: pytest.fail("the general rows were asked"))
        got = [_rows(scene, q, v) for q, v in states]
        monkeypatch.setattr(mesh_box_step, "mesh_box_rows", general)
        mixed = scene_data._mixed_plan(scene)[0]
        deep = 0
        for (q, v), rows in zip(states, got):
            _same_rows(rows, _rows(scene, q, v, road=False))
            R, p = placements(scene, q)
            for k, pair in enumerate(mixed.boxes.tolist()):
                mine = rows[4 * k:4 * k + 4, 0]
                if mine.min() == np.inf:
                    continue
                m, b = scene.index[pair]
                assert (scene.shapes[m].kind, scene.shapes[b].name) == ("mesh", "box")
                d, _ = coal_distance(_hull_convex(scene, m), coal.Transform3s(R[m], p[m]), _coal_geometry(scene, b),
                                     coal.Transform3s(R[b], p[b]))
                assert abs(mine.min() - d) <= 1e-9
                deep += d < 0
    assert {scene.shapes[j].name for j in scene.index[mixed.others, 1]} == {"mat"}
    assert deep >= 10


def test_a_step_takes_the_road_with_the_contact_objects_data(monkeypatch):
    """The mat far from the box: a state's data (at the margin and with each pair's look-ahead) come with no
    Contact object and equal those laid out from Contact objects."""
    fast, slow = _matted(False), _matted(False)
    states = _states(np.random.default_rng(9), 30)
    with sd.use_backend("native", deterministic=True):
        assert scene_data._mixed_plan(fast) is not None
        assert _as_contact_objects_data(fast, slow, states, monkeypatch) >= 20
        assert fast.cache["mesh-box step road"][2] is not None


def _ball_over_the_mat():
    """``q`` of the body upright, its ball (radius 3 cm, :data:`LOW` under the body's origin) 3 mm over
    the mat's centre along the box's top face's normal (the meshes 2 cm higher)."""
    n = sd.spatial.rpy_to_rot(TURN)[:, 2]
    centre = CENTRE + n * (BOX[2] / 2 + MAT + 0.03 + 0.003)
    return np.r_[centre - LOW, 0.0, 0.0, 0.0, 1.0]


def test_a_step_whose_pair_of_no_rows_is_near_is_the_python_roads(monkeypatch):
    """contact_step where the ball's pair with the mat (no rows on this road) is near: its steps, once the
    scene's layout holds the contacts (the steps before), are the Python road's bit for bit (the ball's
    contact with the mat among them, within the margin)."""
    scene, low = _matted(True), _ball_over_the_mat()
    v, tau = np.zeros(6), np.zeros(6)
    with sd.use_backend("native", deterministic=True):
        for _ in range(3):
            got = sd.contact_step(scene.model, low, v, tau, scene, DT)
        ref = _python_road(monkeypatch, scene.model, low, v, tau, scene, DT)
    assert ("ball", "mat") in sd.collide(scene, low).pairs
    assert _same(got, ref)


def test_a_pair_of_no_rows_near_the_box_refuses_the_rows():
    """The ball 3 mm over the mat on the box: the broad phase leaves the ball's pair with the mat, and
    the rows are refused (no data from this road: the step's contacts then come from Contact objects,
    the ball's on the mat among them, at the gap laid out by hand); the body high above the box: the
    rows answer."""
    scene, low = _matted(True), _ball_over_the_mat()
    high = np.r_[0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0]
    v = np.zeros(6)
    with sd.use_backend("native", deterministic=True):
        _rows(scene, high, v)
        assert _rows(scene, high, v) is not None and scene_data.scene_slot_data(scene, high) is not None
        assert _rows(scene, low, v) is None
        assert scene_data.scene_slot_data(scene, low) is None
        assert scene_data.scene_slot_data(scene, low, ahead=(v, DT), data_slots=True) is None
        hits = sd.collide(scene, low)
    ball = [d for pair, d in zip(hits.pairs, hits.distances) if pair == ("ball", "mat")]
    assert len(ball) == 1 and abs(ball[0] - 0.003) <= 1e-9


def test_a_query_that_epas_cap_stops_gives_the_general_rows(monkeypatch):
    """With EPA capped at one iteration, the road declines the penetrations it does not settle (the
    patch routine's depth test) and the general rows answer: the rows equal them at every pose."""
    monkeypatch.setattr(mesh_box_road, "EPA_ITERATIONS", 1)
    scene = _matted(False)
    states = _states(np.random.default_rng(6), 20)
    declined = 0
    with sd.use_backend("native", deterministic=True):
        _rows(scene, *states[0])
        mixed = scene_data._mixed_plan(scene)[0]
        for q, v in states:
            _same_rows(_rows(scene, q, v), _rows(scene, q, v, road=False))
            plan = mesh_box_step._step_plan(scene, mixed.boxes, mixed.others, mixed.bb, mixed.hulls)
            declined += mesh_box_step._road_rows(scene, plan, q, pair_cutoffs(scene, q, v, DT), mixed.boxes) is False
    assert declined >= 3


def test_a_batchs_rows_are_each_states_and_a_pair_of_no_rows_near_refuses_the_batch():
    """A batch of states about the box (one call, each state's look-ahead): each state's contacts and
    slot data are those of its single call (the same rows, state by state); with the mat on the box, a
    batch holding a state near the mat is refused (None) as that state is alone."""
    from sparsedyn.contact import scene_batch
    scene = _matted(False)
    states = _states(np.random.default_rng(12), 12)
    Q, V = np.array([q for q, _ in states]), np.array([v for _, v in states])
    with sd.use_backend("native", deterministic=True):
        _rows(scene, *states[0])
        pair, _, ends, slots = scene_batch.scene_batch_slot_data(scene, Q, ahead=(V, DT))
        assert ends[-1] >= 12
        for b, (q, v) in enumerate(states):
            one_pair, one = scene_data.scene_slot_data(scene, q, ahead=(v, DT))
            assert np.array_equal(pair[ends[b]:ends[b + 1]], one_pair)
            assert one.frames == slots.frames
            assert np.abs(slots.data[b] - one.data).max(initial=0.0) <= BOUND
        low = _matted(True)
        near = [q for q, v in states if _rows(low, q, v) is None]
        assert near                                        # (the mat on the box's top: near some of them)
        assert scene_batch.scene_batch_slot_data(low, Q, ahead=(V, DT)) is None


def test_coals_pairs_beside_the_road_have_hull_rows_near_the_box_and_away():
    """A cylinder on the body beside its meshes (its pair with the box coal's: rows of ``hull_rows``): at
    random poses, near the box and away from it, the rows of the plan's other pairs are the general mesh-box
    rows and ``hull_rows``'s on the shapes' placements, byte for byte (the road's broad phase tells where
    none is near: the same test as ``hull_rows``'s, on the same poses and cutoffs)."""
    scene = _scene(False, ball_offset=(0.2, 0.0, -0.02), ball=("peg", "cylinder", (0.03, 0.1)))
    states = _states(np.random.default_rng(12), 40)
    near = 0
    with sd.use_backend("native", deterministic=True):
        _rows(scene, *states[0])
        mixed = scene_data._mixed_plan(scene)[0]
        assert len(mixed.hulls) and len(mixed.boxes)
        for q, v in states:
            cut = pair_cutoffs(scene, q, v, DT)
            got = scene_data._other_rows(scene, mixed, q, cut, mesh=False)
            assert len(got) == 2
            _same_rows(got[0], _rows(scene, q, v, road=False))
            want = hull_rows(scene, mixed.hulls, *placements(scene, q), cut)
            assert got[1].tobytes() == want.tobytes()
            near += bool(np.isfinite(want[:, 0]).any())
    assert 5 <= near <= len(states) - 5
