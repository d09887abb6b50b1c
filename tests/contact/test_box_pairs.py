"""A point and a capsule against a box without branches (sparsedyn.contact.box_pairs): the capsule's
closest pair is coal's ``distance`` on random poses (apart, the capsule's surface in the box, its
segment in the box), and by hand; a point against a box is ``closed_forms.sphere_box``.

coal 3.0's EPA answers depend on the queries made before it in the same process, so coal's answers
are taken in a fresh process, which makes no other query.
"""

import numpy as np
import pytest

from conftest import rounding_bound
from sparsedyn.contact.box_pairs import box_candidates, capsule_box, point_box
from sparsedyn.contact.closed_forms import capsule_box_ends, sphere_box
from test_closed_forms import coal_against_boxes

#: the issue's bound on a query's distance, witness points and normal against coal's
EXACT = 1e-9


def coal_capsule_box(Ra, pa, ha, ra, Rb, pb, hb):
    """coal's ``distance`` of capsules (rotation ``Ra``: axis its z, half length ``ha``, radius ``ra``)
    and boxes (half extents ``hb``), in a fresh process (test_closed_forms' oracle): ``(d, w_a, w_b,
    n)``, ``n`` from the box towards the capsule, nan where coal fails."""
    return coal_against_boxes('coal.Capsule(x["ra"][k], 2 * x["ha"][k])', Ra=Ra, pa=pa, ha=ha, ra=ra, Rb=Rb, pb=pb,
                              hb=hb)


def _rotations(rng, n):
    Q = np.linalg.qr(rng.normal(size=(n, 3, 3)))[0]
    return Q * np.sign(np.linalg.det(Q))[:, None, None]


def random_pairs(rng, n):
    """``n`` random capsule-box pairs: capsule centres within 0.6 m of the origin, half lengths 0.05 to
    0.4 m, radii 0.02 to 0.15 m; boxes within 0.2 m, half extents 0.05 to 0.4 m."""
    return (_rotations(rng, n), rng.uniform(-0.6, 0.6, (n, 3)), rng.uniform(0.05, 0.4, n), rng.uniform(0.02, 0.15, n),
            _rotations(rng, n), rng.uniform(-0.2, 0.2, (n, 3)), rng.uniform(0.05, 0.4, (n, 3)))


def test_capsule_box_is_coals_distance_on_random_poses():
    Ra, pa, ha, ra, Rb, pb, hb = random_pairs(np.random.default_rng(0), 400)
    d, wa, wb, n = capsule_box(pa, Ra[:, :, 2], ha, ra, Rb, pb, hb)
    dc, wac, wbc, nc = coal_capsule_box(Ra, pa, ha, ra, Rb, pb, hb)
    ok = np.isfinite(dc)
    assert ok.sum() >= 395
    core = dc + ra                                            # the segment's own distance to the box
    # every regime compared: apart, the capsule's surface in the box (coal's GJK), its segment in it (EPA)
    assert (ok & (dc > 0)).sum() >= 100 and (ok & (dc < 0) & (core > 0)).sum() >= 20 and (ok & (core < 0)).sum() >= 20
    assert np.abs(d - dc)[ok].max() <= EXACT
    assert np.abs(wa - wac)[ok].max() <= EXACT and np.abs(wb - wbc)[ok].max() <= EXACT
    assert np.abs(n - nc)[ok & (np.abs(core) >= 1e-3)].max() <= EXACT   # (at touch: coal's normal is rounding)
    assert np.allclose(np.linalg.norm(n, axis=1), 1.0, rtol=0, atol=1e-14)
    assert np.allclose(wa - wb, d[:, None] * n, rtol=0, atol=1e-14)


def test_capsule_box_each_pair_alone_is_the_batch():
    # the same arithmetic over one pair or many: equal bit for bit
    pairs = random_pairs(np.random.default_rng(1), 50)
    Ra, pa, ha, ra, Rb, pb, hb = pairs
    batch = capsule_box(pa, Ra[:, :, 2], ha, ra, Rb, pb, hb)
    for i in range(50):
        alone = capsule_box(pa[i:i + 1], Ra[i:i + 1, :, 2], ha[i:i + 1], ra[i:i + 1], Rb[i:i + 1], pb[i:i + 1],
                            hb[i:i + 1])
        for x, y in zip(batch, alone):
            assert np.array_equal(x[i:i + 1], y)


def _rz(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _one(R, p, h, r, hb, Rb=np.eye(3), pb=np.zeros(3)):
    return [x[0] for x in capsule_box(np.array([p], float), np.array([R[:, 2]]), np.array([h]), np.array([r]),
                                      Rb[None], pb[None], np.array([hb], float))]


# a capsule lying along x (its axis the body's z turned onto x)
_LYING = np.array([[0, 0, 1.0], [0, 1, 0], [-1, 0, 0]])


@pytest.mark.parametrize("z", [0.35, 0.3, 0.27])
def test_a_capsule_across_a_box_edge_by_hand(z):
    # a table's top at z = 0.2 (half extents 0.5, 0.5, 0.2), its edge along y at x = 0.5; a capsule of
    # radius 0.1 along x over that edge, tilted 0.1 rad down towards +x: the segment's point nearest the
    # edge lies beyond it and above the top, so the box's closest point is the edge's, and the distance
    # that of the two less the radius (z = 0.27: the capsule's surface 3 cm into the box, its segment not)
    tilt = np.array([[np.cos(0.1), 0, np.sin(0.1)], [0, 1, 0], [-np.sin(0.1), 0, np.cos(0.1)]])
    R = tilt @ _LYING                                        # the axis (cos 0.1, 0, -sin 0.1)
    u, p, edge = R[:, 2], np.array([0.5, 0.0, z]), np.array([0.5, 0.0, 0.2])
    x = p + ((edge - p) @ u) * u                             # the segment's point nearest the edge
    L = np.linalg.norm(x - edge)
    d, wa, wb, n = _one(R, p, 0.3, 0.1, [0.5, 0.5, 0.2])
    assert abs(L - (z - 0.2) * np.cos(0.1)) <= rounding_bound(8)
    assert abs(d - (L - 0.1)) <= rounding_bound(8)
    assert np.abs(wb - edge).max() <= rounding_bound(8)
    assert np.abs(n - (x - edge) / L).max() <= rounding_bound(8)
    assert np.abs(wa - (x - 0.1 * n)).max() <= rounding_bound(8)


def test_a_capsule_through_a_box_top_by_hand():
    # a capsule nearly upright (0.05 rad about y), its lower end 5 cm below a table's top (z = 0.2):
    # out through the top face, as deep as that end plus the radius; on the box the end's projection
    tilt = np.array([[np.cos(0.05), 0, np.sin(0.05)], [0, 1, 0], [-np.sin(0.05), 0, np.cos(0.05)]])
    u = tilt[:, 2]
    p = np.array([0.1, 0.2, 0.15]) + 0.1 * u
    end = p - 0.1 * u
    d, wa, wb, n = _one(tilt, p, 0.1, 0.03, [0.5, 0.5, 0.2])
    assert abs(d - (-0.05 - 0.03)) <= rounding_bound(8)
    assert np.abs(n - [0, 0, 1]).max() <= rounding_bound(8)
    assert np.abs(wb - [0.1, 0.2, 0.2]).max() <= rounding_bound(8)
    assert np.abs(wa - (end - [0, 0, 0.03])).max() <= rounding_bound(8)


def test_a_capsule_lying_on_a_face_by_hand():
    # along x, 1 mm above a box's top (z = 0.2), turned about z: the distance 1 mm, the normal +z, both
    # ends as near (the first end's pair, the one at -h along the axis)
    for angle in (0.0, 0.3, 1.2):
        R = _rz(angle) @ _LYING
        d, wa, wb, n = _one(R, [0.05, -0.02, 0.301], 0.2, 0.1, [0.5, 0.5, 0.2])
        assert abs(d - 0.001) <= rounding_bound(8)
        assert np.abs(n - [0, 0, 1]).max() <= rounding_bound(8)
        assert np.abs(wb[2] - 0.2) <= rounding_bound(8) and abs(wa[2] - 0.201) <= rounding_bound(8)


def test_point_box_is_sphere_box():
    # centres outside, inside (out through the nearest face) and radii: the same numbers to rounding
    rng = np.random.default_rng(3)
    n = 300
    Rb, pb, hb = _rotations(rng, n), rng.uniform(-0.2, 0.2, (n, 3)), rng.uniform(0.05, 0.4, (n, 3))
    c, r = rng.uniform(-0.6, 0.6, (n, 3)), rng.uniform(0.0, 0.1, n)
    want = sphere_box(c, r, Rb, pb, hb)
    R = [[Rb[:, i, j] for j in range(3)] for i in range(3)]
    d, wa, wb, nn = point_box([c[:, i] for i in range(3)], r, R, [pb[:, i] for i in range(3)],
                              [hb[:, i] for i in range(3)])
    got = (d, np.stack(wa, -1), np.stack(wb, -1), np.stack(nn, -1))
    inside = np.all(np.abs(np.einsum("kji,kj->ki", Rb, c - pb)) < hb, -1)
    assert 20 <= inside.sum() < n
    for x, y in zip(got, want):
        assert np.abs(x - y).max() <= rounding_bound(16)


def _over_edge(delta, ha, ra=0.03, a=0.01, depth=1e-4):
    """A capsule of radius ``ra`` and half length ``ha`` across the edge of a table's top (half extents
    0.5, 0.5, 0.2; the edge along y at x = 0.5, z = 0.2), its axis ``(cos a, 0, -sin a)`` tilted down
    towards the edge, its segment's point nearest the edge ``ra - depth`` from it along
    ``n = (sin a, 0, cos a)`` (the capsule ``depth`` into the box there) and its outer end ``delta`` past
    that point along the axis: ``(R, p, n, x)`` (``x`` that point)."""
    tilt = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    R = tilt @ _LYING
    u, n = R[:, 2], np.array([np.sin(a), 0.0, np.cos(a)])
    x = np.array([0.5, 0.0, 0.2]) + (ra - depth) * n
    return R, x + (delta - ha) * u, n, x


@pytest.mark.parametrize("delta, ha, kept", [(0.002, 0.1, (0, 1)), (0.002, 0.012, (0,)), (0.031, 0.1, (0, 1, 2))])
def test_a_capsule_across_a_box_edge_touches_it_once_by_hand(delta, ha, kept):
    # the segment's distance to the box is least at x (its nearest point to the edge, the normal n
    # perpendicular to the axis): the closest pair, 0.1 mm deep.  The outer end, delta past x, is nearer
    # the edge than the radius (0.03): its sphere touches the same edge through its inner side, inside the
    # capsule, a contact already counted; it goes.  The inner end, 2 ha - delta back, rests over the top
    # (0.2 m back: kept; a short capsule, 0.022 m back: covered too, one hit); an outer end 0.031 past x
    # (beyond the radius) stays (13 mm from the edge: past a margin of 5 mm, the rule drops no end that a
    # margin would keep over an edge but one within the radius).
    ra = 0.03
    R, p, n, x = _over_edge(delta, ha, ra)
    u, edge = R[:, 2], np.array([0.5, 0.0, 0.2])
    got = box_candidates("capsule", R, p, (ra, 2 * ha), np.eye(3), np.zeros(3), (1.0, 1.0, 0.4))
    inner, outer = p - ha * u, p + ha * u
    want = [-1e-4, inner[2] - 0.2 - ra, np.linalg.norm(outer - edge) - ra]
    assert got[0][0] < min(want[1:])                          # the closest pair is the deepest hit
    assert np.abs(got[0][2] - edge).max() <= rounding_bound(8) and np.abs(got[0][3] - n).max() <= rounding_bound(8)
    for i in range(3):
        assert (got[i][0] == 1e300) if i not in kept else abs(got[i][0] - want[i]) <= rounding_bound(8)
    # the NumPy road's end hits: the same ends covered
    d, *_ = capsule_box_ends(p[None], u[None], np.array([ha]), np.array([ra]), np.eye(3)[None], np.zeros((1, 3)),
                             np.array([[0.5, 0.5, 0.2]]))
    assert [x == 1e300 for x in d] == [got[1][0] == 1e300, got[2][0] == 1e300]


def test_a_capsule_lying_on_a_face_keeps_both_ends():
    # the segment over the top (the outer end 2 mm short of the edge), parallel to it: its distance is
    # the same all along, the closest pair goes (an end as deep), both ends stay: the capsule's support
    ra = 0.03
    R, p = _LYING, np.array([0.5 - 0.002 - 0.1, 0.0, 0.2 + ra - 1e-4])
    got = box_candidates("capsule", R, p, (ra, 0.2), np.eye(3), np.zeros(3), (1.0, 1.0, 0.4))
    assert got[0][0] == 1e300
    assert all(abs(g[0] + 1e-4) <= rounding_bound(8) for g in got[1:])


def test_the_humanoid_on_stairs_touches_them_where_mujoco_does(tmp_path):
    """dm_control's humanoid settled by MuJoCo (1.5 s) on four stair boxes, its feet across a stair's
    edge: each pair touches as many times as in MuJoCo's contacts (13: each foot capsule at the edge and
    at its inner end, not again at its outer end 1.3 mm past the edge), on both roads, the same hits."""
    import shutil
    import warnings
    from pathlib import Path

    import dm_control
    import mujoco

    import sparsedyn as sd
    from sparsedyn.interop.mujoco import q_from_mujoco

    suite = Path(dm_control.__file__).parent / "suite"
    floor = '<geom name="floor" type="plane" conaffinity="1" size="100 100 .2" material="grid"/>'
    stairs = floor + "".join(f'<geom name="stair{i}" type="box" pos="{0.4 * i - 0.5} 0 {0.05 * (i + 1)}" '
                             f'size="0.2 1 {0.05 * (i + 1)}"/>' for i in range(4))
    src = (suite / "humanoid.xml").read_text()
    assert floor in src
    shutil.copytree(suite / "common", tmp_path / "common")
    path = tmp_path / "stairs.xml"
    path.write_text(src.replace(floor, stairs))
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    name = lambda g: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)             # noqa: E731
    want = sorted(tuple(sorted((name(c.geom1), name(c.geom2)))) for c in d.contact[:d.ncon])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(str(path), geometry=True)
    scene, q = sd.Scene(model), q_from_mujoco(model, d.qpos)
    got = {}
    for road in ("numpy", "native"):
        with sd.use_backend(road, **({"deterministic": True} if road == "native" else {})):
            got[road] = sd.collide(scene, q)
    assert len(want) == 13 and sum(any(x.startswith("stair") for x in p) for p in want) == 12
    for road, hits in got.items():
        touching = hits.distances < 0                       # MuJoCo's margin is 0; the scene's 5 mm
        assert sorted(tuple(sorted(p)) for p, t in zip(hits.pairs, touching) if t) == want, road
    a, b = got["numpy"], got["native"]
    assert a.pairs == b.pairs
    assert np.abs(a.distances - b.distances).max() <= rounding_bound(64)
    assert np.abs(a.points - b.points).max() <= rounding_bound(64)
    assert np.abs(a.normals - b.normals).max() <= rounding_bound(64)
