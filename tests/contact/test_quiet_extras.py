"""The quiet call of the extra rows (contact/quiet_extras): where no pair for coal or on a height field comes
near, the broad phases' routines alone write the rows the roads write, bit for bit."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact import box_box_road
from sparsedyn.contact.box_box_road import extra_rows
from sparsedyn.contact.collision_near import NEAR_COLUMNS
from sparsedyn.contact.hull_pairs import shape_poses
from sparsedyn.contact.quiet_extras import quiet_call
from test_box_box_road import field_scene


def _extras(scene, q):
    """``(hulls, fields)``: the scene's pairs for coal and on height fields, as collide's road holds them."""
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, q), sd.collide(scene, q)
    road = scene.cache["collide road"][1]
    assert isinstance(road, box_box_road.BoxBoxRoad)
    return road.hulls, road.fields


def _held(scene, hulls, fields, cut):
    """A fresh ``held`` of :func:`extra_rows`: the shapes' poses, the cutoffs ``cut`` and a table."""
    rows = len(hulls) + int(fields[1].sum())
    return (*shape_poses(scene), np.full(len(scene.index), float(cut)), np.full((rows, NEAR_COLUMNS), np.nan))


def test_the_rows_are_the_roads_bit_for_bit_near_and_far(monkeypatch):
    """:func:`field_scene`'s 40 poses, and each lifted 2 m above the field (nothing near): the rows of the
    quiet call then the roads' where something is near equal the roads' alone (the quiet call switched
    off), bit for bit; both answers occur."""
    scene, poses = field_scene()
    model, (hulls, fields) = scene.model, _extras(scene, poses[0])
    assert len(hulls) == 1 and len(fields[0]) == 2
    answers = set()
    with sd.use_backend("native", deterministic=True):
        mine, theirs = _held(scene, hulls, fields, 0.02), _held(scene, hulls, fields, 0.02)
        for q in poses + [np.r_[q[:2], q[2] + 2.0, q[3:9], q[9] + 2.0, q[10:]] for q in poses[:10]]:
            outs = sd.geometry_placements(model, q, "collision")
            R, p = mine[0].copy(), mine[1].copy()
            R[:len(outs[0])], p[:len(outs[1])] = outs
            broad, still = quiet_call(scene, hulls, fields, (R, p, mine[2], mine[3].copy()))()
            answers.add((broad is None, still))
            a = extra_rows(scene, hulls, fields, mine, outs)
            with monkeypatch.context() as m:
                m.setattr(box_box_road, "quiet_call", lambda *args: None)
                b = extra_rows(scene, hulls, fields, theirs, outs)
            assert a is mine[3] and b is theirs[3] and np.array_equal(a, b)
    assert {(True, True), (False, False)} <= answers


def test_far_from_everything_the_rows_are_free_and_the_numpy_road_has_no_quiet_call():
    """The field scene's shapes 2 m above the field and the ball: the quiet call's answer is ``(None,
    True)`` (none near) and every row's distance is +inf, the others zero; on the NumPy backend there is
    no quiet call (the roads answer)."""
    scene, poses = field_scene()
    hulls, fields = _extras(scene, poses[0])
    q = poses[0].copy()
    q[[0, 7]], q[[2, 9]] = [0.0, 0.3], 2.0
    with sd.use_backend("native", deterministic=True):
        held = _held(scene, hulls, fields, 0.02)
        outs = sd.geometry_placements(scene.model, q, "collision")
        held[0][:2], held[1][:2] = outs
        assert quiet_call(scene, hulls, fields, held)() == (None, True)
        assert np.all(held[3][:, 0] == np.inf) and not held[3][:, 1:].any()
    with sd.use_backend("numpy"):
        assert quiet_call(scene, hulls, fields, held) is None


@pytest.mark.parametrize("as_list", [False, True])
def test_collide_of_the_quadruped_on_its_floor_is_the_general_roads(monkeypatch, as_list):
    """dm_control's quadruped (its legs' pairs with its torso's cylinders and ellipsoid coal's, its shapes on
    its flat terrain 1 cm under its floor rows): its toes 2 mm above the floor and its ball 1 mm into it
    (nothing near but the floor and the ball), then the robot sunk 2.2 cm (on the terrain too): collide's
    hits (``q`` an array or a plain list) are the general road's bit for bit; the quiet call answers the
    first and hands the second to the roads."""
    import warnings
    from pathlib import Path
    import dm_control
    from sparsedyn.contact.collision import collide_within
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # the file's tendons, sites and sensors left out
        model = sd.load_mjcf(str(Path(dm_control.__file__).parent / "suite" / "quadruped.xml"), geometry=True)
    scene = sd.Scene(model)
    q = np.array(model.neutral(), float)
    toes = [k for k, s in enumerate(scene.shapes) if s.kind == "sphere" and s.body >= 0]
    q[2] += scene.shapes[toes[0]].size[0] + 0.002 - sd.geometry_placements(model, q, "collision")[1][toes, 2].min()
    ball = model.q_slice(model.body_names.index("ball"))
    q[ball.start:ball.start + 3] = [1.5, 0.0, 0.149]                # (the fetch task's ball, 1 mm into the floor)
    answers, real = [], quiet_call

    def spy(*args):
        call = real(*args)
        return None if call is None else lambda: answers.append(call()) or answers[-1]
    monkeypatch.setattr(box_box_road, "quiet_call", spy)
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, q), sd.collide(scene, q)
        assert isinstance(scene.cache["collide road"][1], box_box_road.BoxBoxRoad)
        for dz in (0.0, -0.022):
            x = np.r_[q[:2], q[2] + dz, q[3:]]
            del answers[:]
            got, want = sd.collide(scene, x.tolist() if as_list else x), collide_within(scene, x, None)
            assert got.pairs == want.pairs and len(answers) == 1
            for a, b in zip(got[1:4], want[1:4]):
                assert np.array_equal(a, b)
            assert answers[0] == ((None, True) if dz == 0 else (None, False))
            assert any("terrain" in p for p in got.pairs) == (dz != 0)
