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
    (nothing near but the floor and the ball), then the robot sunk 2.2 cm (its toes on the terrain too):
    collide's hits (``q`` an array or a plain list) are the general road's bit for bit; the quiet call
    writes the terrain's rows of both (free, then the toes' hits: spheres alone near the field)."""
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
            assert answers[0] == (None, True)
            assert any("terrain" in p for p in got.pairs) == (dz != 0)


def _feature_scene():
    """``(scene, poses)``: a free ball, a free mesh (a cube's eight corners) and a free capsule over a bumpy
    world height field, and 60 random poses of the three over it (the ball and the mesh low, the capsule
    high or low)."""
    from sparsedyn.model.spatial import Transform
    from test_heightfield import SIZE
    b = sd.ModelBuilder("three")
    for name in ("ball", "cube", "leg"):
        b = b.add_body(name, None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    V = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * 0.05
    F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                  [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    I = Transform(np.eye(3), np.zeros(3))
    model = b.build().with_geometry(sd.Geometry("ball", 0, I, "sphere", (0.04,), "collision"),
                                    sd.Geometry("cube", 1, I, "mesh", (1.0, 1.0, 1.0), "collision", vertices=V,
                                                faces=F),
                                    sd.Geometry("leg", 2, I, "capsule", (0.03, 0.2), "collision"))
    rng = np.random.default_rng(7)
    field = sd.Shape("hfield", SIZE, heights=rng.uniform(0.0, 1.0, (8, 12)), name="ground")
    scene = sd.Scene(model, world=[field], margin=0.02, self_collision=False)
    poses = []
    for k in range(60):
        q = []
        for body in range(3):
            axis, half = rng.normal(size=3), rng.uniform(0.0, 1.5)
            high = 0.6 if body == 2 and k % 2 else 0.0
            q += [*rng.uniform(-0.8, 0.8, 1), *rng.uniform(-0.4, 0.4, 1), rng.uniform(0.0, 0.3) + high,
                  *(np.sin(half) * axis / np.linalg.norm(axis)), np.cos(half)]
        poses.append(np.array(q))
    return scene, poses


def test_features_on_a_field_are_written_in_c_as_the_roads_write_them(monkeypatch):
    """:func:`_feature_scene`'s poses: where only the ball and the mesh (their features' hits alone) come near
    the field, the quiet call writes their rows in C (its answer ``(None, True)`` with hits); where the capsule
    does, the roads answer (``(None, False)``); where none does, the rows are free.  Each answer's rows are the
    roads' (the quiet call switched off): distances, midpoints and normals bit for bit (copies of the same C
    routine's numbers), the contact point in its body and ``n . w_b`` (three-term products, written again)
    to rounding; all three answers occur."""
    from conftest import rounding_bound
    scene, poses = _feature_scene()
    model = scene.model
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, poses[0]), sd.collide(scene, poses[0])
        road = scene.cache["collide road"][1]
        hulls, fields = road.hulls, road.fields
        assert len(hulls) == 0 and len(fields[0]) == 3
        answers = {}
        mine, theirs = _held(scene, hulls, fields, 0.02), _held(scene, hulls, fields, 0.02)
        for q in poses:
            outs = sd.geometry_placements(model, q, "collision")
            R, p = mine[0].copy(), mine[1].copy()
            R[:len(outs[0])], p[:len(outs[1])] = outs
            answer = quiet_call(scene, hulls, fields, (R, p, mine[2], mine[3].copy()))()
            a = extra_rows(scene, hulls, fields, mine, outs)
            with monkeypatch.context() as m:
                m.setattr(box_box_road, "quiet_call", lambda *args: None)
                b = extra_rows(scene, hulls, fields, theirs, outs)
            assert a is mine[3] and b is theirs[3]
            hit = bool(np.isfinite(b[:, 0]).any())
            answers[answer + (hit,)] = answers.get(answer + (hit,), 0) + 1
            assert np.array_equal(a[:, :7], b[:, :7])
            assert np.abs(a[:, 7:] - b[:, 7:]).max() <= rounding_bound(16) * (1 + np.abs(b[:, 7:]).max())
    assert answers.get((None, True, True), 0) >= 5 and answers.get((None, False, True), 0) >= 5
    assert answers.get((None, True, False), 0) >= 1


def test_a_pair_with_more_hits_than_its_rows_is_handed_to_the_road():
    """The C rows of :func:`_feature_scene` with the mesh's pair given no rows: a pose where the mesh touches
    answers False (its hits do not fit: ``hfield_rows`` says so and collide takes the general road), a pose
    where only the ball does answers True with the ball's row written."""
    from sparsedyn.contact.collision_hfield import _plan
    from sparsedyn.contact.quiet_extras import _rows_call
    scene, poses = _feature_scene()
    with sd.use_backend("native", deterministic=True):
        sd.collide(scene, poses[0])
        pairs, counts = scene.cache["collide road"][1].fields
        cube = next(k for k, x in enumerate(pairs.tolist()) if "cube" in scene.pairs[x])
        short = counts.copy()
        short[cube] = 0
        R, p = (x.copy() for x in shape_poses(scene))
        cut = np.full(len(scene.index), 0.02)
        rows = np.full((int(short.sum()), NEAR_COLUMNS), np.nan)
        call = _rows_call(scene, (pairs, short), _plan(scene, pairs)[2], R, p, cut, rows)
        full = _rows_call(scene, (pairs, counts), _plan(scene, pairs)[2], R, p, cut,
                          np.full((int(counts.sum()), NEAR_COLUMNS), np.nan))
        seen = set()
        for q in poses:
            outs = sd.geometry_placements(scene.model, q, "collision")
            R[:len(outs[0])], p[:len(outs[1])] = outs
            if not full():                                   # (the capsule near the field: the road answers)
                continue
            hits = sd.collide(scene, q)
            touching = {b for a, b in hits.pairs if a == "ground"} | {a for a, b in hits.pairs if b == "ground"}
            written = call()
            assert written == ("cube" not in touching)
            if written and "ball" in touching:
                assert np.isfinite(rows[:, 0]).sum() == 1
            seen.add(written)
    assert seen == {True, False}
