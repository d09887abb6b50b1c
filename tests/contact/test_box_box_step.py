"""A step's candidates in a scene of the collision kernel's pairs and pairs of two boxes in four
native calls (sparsedyn.contact.box_box_step): the general road's (each pair's look-ahead from
``look_ahead.pair_cutoffs``, the pairs' rows from ``box_box_step.box_box_rows``, the kernel's
candidates; beside them a box and a cylinder's closest pair, coal's), the rows to rounding (the same
routine on the poses of the native kinematics or of NumPy), the look-ahead to the rounding of its few
sums; the look-ahead by hand for a cube sliding and turning; a velocity the bodies' kernel declines
named as on the general road."""

import numpy as np
import pytest

import sparsedyn as sd
import sparsedyn.contact.box_box_step as box_box_step
import sparsedyn.contact.scene_data as scene_data
from conftest import rounding_bound
from sparsedyn.model.spatial import Transform
from test_box_box_native import _stack, _stack_by_a_post
from test_box_box_road import _poses, field_scene

DT = 1e-3


def _turned_stack():
    """:func:`_stack` with the lower cube's box turned about z and shifted in its body (its rows'
    witness points turned into the body's frame)."""
    c, s = np.cos(0.3), np.sin(0.3)
    E = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    b = sd.ModelBuilder("turned stack")
    for name, m in (("low", 2.0), ("high", 1.0)):
        b = b.add_body(name, None, sd.make_joint("free"), mass=m, rot_inertia=np.eye(3) * 0.01)
    model = b.build().with_geometry(
        sd.Geometry("low", 0, Transform(E, np.array([0.01, -0.02, 0.0])), "box", (0.2, 0.2, 0.2), "collision"),
        sd.Geometry("high", 1, Transform(np.eye(3), np.zeros(3)), "box", (0.1, 0.1, 0.1), "collision"))
    table = sd.Shape("box", (0.6, 0.6, 0.1), placement=(np.eye(3), [0.0, 0.0, 0.05]), name="table")
    return sd.Scene(model, world=[sd.Shape("plane", name="floor"), table])


def _general(monkeypatch, scene, mixed, q, v):
    """The general road's candidates (the pairs' poses placed shape by shape: the three calls declined)."""
    with monkeypatch.context() as m:
        m.setattr(scene_data, "box_box_poses", lambda *args: None)
        m.setattr(box_box_step, "box_box_poses", lambda *args: None)
        return scene_data._mixed_candidates(scene, mixed, q, None, (v, DT))


def _ready(scene):
    """The scene's mixed plan after a first step (the native calls built)."""
    sd.contact_step(scene.model, _poses(np.random.default_rng(0), 1)[0], np.zeros(12), np.zeros(12), scene, DT)
    return scene_data._mixed_plan(scene)[0]


@pytest.mark.parametrize("make", [_stack, _turned_stack, _stack_by_a_post])
def test_the_rows_are_the_general_roads(make, monkeypatch):
    scene = make()
    rng = np.random.default_rng(11)
    answered, post = [], 0
    real = box_box_step.box_box_step_rows
    monkeypatch.setattr(scene_data, "box_box_step_rows", lambda *a: answered.append(real(*a)) or answered[-1])
    with sd.use_backend("native", deterministic=True):
        mixed = _ready(scene)
        answered.clear()
        for q in _poses(rng, 10):
            v = rng.normal(scale=0.3, size=12)
            rows, within = scene_data._mixed_candidates(scene, mixed, q, None, (v, DT))
            want_rows, want_within = _general(monkeypatch, scene, mixed, q, v)
            # the same routine on poses placed by the native kinematics or by NumPy (whose products round
            # by the CPU's own kernels): equal to the rounding of a pose's few products and sums
            assert np.array_equal(np.isfinite(rows), np.isfinite(want_rows))
            finite = np.isfinite(want_rows)
            scale = max(1.0, np.abs(want_rows[finite]).max())
            assert np.abs(rows[finite] - want_rows[finite]).max() <= rounding_bound(8) * scale
            # |omega|, |v_o|: sums of three squares, then two products and three sums per pair
            assert np.abs(within - want_within).max() <= rounding_bound(8) * want_within.max()
            assert np.count_nonzero(rows[:, 0] < within) >= 4           # the cubes' faces on each other, the table
            post += int(np.any(rows[np.isin(mixed.pair, mixed.hulls), 0] < within[np.isin(mixed.pair, mixed.hulls)]))
    assert len(answered) == 20 and sum(a is not None for a in answered) == 10      # (the general road's: None)
    assert (post >= 3) if make is _stack_by_a_post else not len(mixed.hulls)      # (the post within reach)


def test_the_look_ahead_by_hand():
    """The upper cube turning at omega with its centre moving at u: its pairs' look-ahead is
    ``margin + dt (|u| + |omega| rho)``, ``rho`` its half diagonal (sqrt(3) 0.05 m), for each step's
    ``dt``; the lower cube's pair with the table, at rest, the margin."""
    scene = _stack()
    q = _poses(np.random.default_rng(2), 1)[0]
    v = np.zeros(12)
    v[6:9], v[9:12] = [0.0, 0.3, -0.4], [0.6, 0.0, 0.8]              # the upper cube's [omega, v_o]: 0.5, 1 m/s
    with sd.use_backend("native", deterministic=True):
        mixed = _ready(scene)
        steps = [(dt, scene_data._mixed_candidates(scene, mixed, q, None, (v, dt))[1]) for dt in (DT, 2 * DT, DT)]
    margin, rho = scene.margin, np.sqrt(3.0) * 0.05
    names = [tuple(scene.shapes[i].name for i in scene.index[p]) for p in mixed.pair]
    moving = np.array(["high" in n for n in names])
    assert moving.any() and (~moving).any()
    for dt, within in steps:                                              # (a new dt: the look-ahead follows)
        assert np.abs(within[moving] - (margin + dt * (1.0 + 0.5 * rho))).max() <= rounding_bound(8) * margin
        assert np.all(within[~moving] == margin)


def test_a_velocity_the_kernel_declines_is_named_as_on_the_general_road(monkeypatch):
    scene = _stack()
    q = _poses(np.random.default_rng(3), 1)[0]
    v = np.zeros(12)
    v[4] = np.nan
    with sd.use_backend("native", deterministic=True):
        mixed = _ready(scene)
        with pytest.raises(ValueError, match="v: contains NaN"):
            scene_data._mixed_candidates(scene, mixed, q, None, (v, DT))
        with pytest.raises(ValueError, match="v: contains NaN"):
            _general(monkeypatch, scene, mixed, q, v)


def test_a_scene_without_boxes_takes_the_road_with_its_pairs_for_coal_and_on_a_height_field(monkeypatch):
    """``test_box_box_road.field_scene`` (no pair of two boxes: the routine computes the look-ahead alone):
    the rows, coal's and the field's from that look-ahead, are the general road's bit for bit."""
    scene, poses = field_scene()
    rng = np.random.default_rng(12)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, poses[0], np.zeros(12), np.zeros(12), scene, DT)
        mixed = scene_data._mixed_plan(scene)[0]
        assert mixed.bb is None and len(mixed.hulls) == 1 and len(mixed.fields[0]) == 2      # (the egg on the leg)
        touching = 0
        for q in poses[:20]:
            v = rng.normal(scale=0.3, size=12)
            got = box_box_step.box_box_step_rows(scene, mixed, scene_data.box_box_poses, q, v, DT)
            want = _general(monkeypatch, scene, mixed, q, v)
            assert got is not None and want is not None
            for a, b in zip(got, want):
                assert np.array_equal(a, b)
            touching += int(np.any(got[0][:, 0] < got[1]))
    assert touching >= 5
