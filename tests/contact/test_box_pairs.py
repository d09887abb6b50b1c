"""A point and a capsule against a box without branches (sparsedyn.contact.box_pairs): the capsule's
closest pair is coal's ``distance`` on random poses (apart, the capsule's surface in the box, its
segment in the box), and by hand; a point against a box is ``closed_forms.sphere_box``.

coal 3.0's EPA answers depend on the queries made before it in the same process, so coal's answers
are taken in a fresh process, which makes no other query.
"""

import numpy as np
import pytest

from conftest import rounding_bound
from sparsedyn.contact.box_pairs import capsule_box, point_box
from sparsedyn.contact.closed_forms import sphere_box
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
