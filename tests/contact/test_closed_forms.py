"""The closed forms of sparsedyn.contact.closed_forms: two boxes' signed distance (``box_box``) against
coal's ``distance`` on random poses (apart, touching, overlapping) and by hand.

coal 3.0's EPA answers depend on the queries made before it in the same process (after some deep
queries elsewhere it has returned -0.47 m for a box 1e-7 m above another), so coal's answers here
are taken in a fresh process, which makes no other query.
"""

import io
import subprocess
import sys

import numpy as np
import pytest

from conftest import rel_err, rounding_bound
from sparsedyn.contact.closed_forms import box_box, ellipsoid_box_face, ellipsoid_plane, sphere_cylinder

#: coal's tolerance of GJK and EPA here (its default, 1e-6, is the accuracy of its iterations) [m]
COAL_TOLERANCE = 1e-11
#: the issue's bound on a query's distance, witness points and normal against coal's
EXACT = 1e-9

_ORACLE = f"""
import io, sys
import numpy as np
import coal
x = np.load(io.BytesIO(sys.stdin.buffer.read()))
req = coal.DistanceRequest()
req.gjk_tolerance = req.epa_tolerance = {COAL_TOLERANCE}
req.gjk_max_iterations = req.epa_max_iterations = 1000
out = np.full((len(x["pa"]), 10), np.nan)
for k in range(len(out)):
    res = coal.DistanceResult()
    d = coal.distance(SHAPE_A, coal.Transform3s(x["Ra"][k], x["pa"][k]),
                      coal.Box(*(2 * x["hb"][k])), coal.Transform3s(x["Rb"][k], x["pb"][k]), req, res)
    if -1e300 < d < np.inf:                  # else EPA failed at this tolerance: no answer (nan)
        out[k] = [d, *res.getNearestPoint1(), *res.getNearestPoint2(), *res.normal]
buf = io.BytesIO()
np.save(buf, out)
sys.stdout.buffer.write(buf.getvalue())
"""


def coal_against_boxes(shape_a, **arrays):
    """coal's ``distance`` of shapes ``a`` (``shape_a``: the coal constructor's call on ``x``'s arrays of
    pair ``k``, text) at ``Ra``, ``pa`` and boxes of half extents ``hb`` at ``Rb``, ``pb`` (``arrays``), in
    a fresh process: ``(d, w_a, w_b, n)`` with ``n`` from ``b`` towards ``a`` (coal's runs from shape 1
    to shape 2), nan where coal's EPA fails."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    run = subprocess.run([sys.executable, "-c", _ORACLE.replace("SHAPE_A", shape_a)], input=buf.getvalue(),
                         capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    out = np.load(io.BytesIO(run.stdout))
    return out[:, 0], out[:, 1:4], out[:, 4:7], -out[:, 7:10]


def coal_box_box(Ra, pa, ha, Rb, pb, hb):
    """coal's ``distance`` of the box pairs (:func:`coal_against_boxes`)."""
    return coal_against_boxes('coal.Box(*(2 * x["ha"][k]))', Ra=Ra, pa=pa, ha=ha, Rb=Rb, pb=pb, hb=hb)


def random_pairs(rng, n):
    """``n`` random box pairs: rotations, centres of ``a`` within 0.6 m and of ``b`` within 0.2 m of the
    origin, half extents 0.05 to 0.4 m (about half of them overlap)."""
    def rotations():
        Q = np.linalg.qr(rng.normal(size=(n, 3, 3)))[0]
        return Q * np.sign(np.linalg.det(Q))[:, None, None]
    return (rotations(), rng.uniform(-0.6, 0.6, (n, 3)), rng.uniform(0.05, 0.4, (n, 3)),
            rotations(), rng.uniform(-0.2, 0.2, (n, 3)), rng.uniform(0.05, 0.4, (n, 3)))


def test_box_box_is_coals_distance_on_random_poses():
    pairs = random_pairs(np.random.default_rng(0), 300)
    d, wa, wb, n = box_box(*pairs)
    dc, wac, wbc, nc = coal_box_box(*pairs)
    ok = np.isfinite(dc)
    assert ok.sum() >= 295                                   # coal's EPA rarely fails at this tolerance
    deep, apart = ok & (dc < 0), ok & (dc > 0)
    assert deep.sum() >= 100 and apart.sum() >= 100
    assert np.abs(d - dc)[ok].max() <= EXACT
    assert np.abs(wa - wac)[ok].max() <= EXACT and np.abs(wb - wbc)[ok].max() <= EXACT
    # coal's normal apart is its witness points' difference over the distance (their errors, some
    # 1e-11 m, over it): compared where the boxes are 0.1 m apart or more; EPA's normal everywhere
    far = apart & (dc >= 0.1)
    assert far.sum() >= 50
    assert np.abs(n - nc)[deep | far].max() <= EXACT
    # every pair: a unit normal along the witness points' difference, w_a - w_b = d n
    assert np.allclose(np.linalg.norm(n, axis=1), 1.0, rtol=0, atol=1e-14)
    assert np.allclose(wa - wb, d[:, None] * n, rtol=0, atol=1e-14)


def test_box_box_each_pair_alone_is_the_batch_and_coals():
    # 500 pairs apart, overlapping and touching (150 of those 0.1 m apart or more moved along coal's
    # normal until coal's distance is 0): the batch mixes the two closed forms (split by the separating
    # axis test), a pair alone takes one of them whole; per pair the arithmetic is the same (equal up to
    # rounding, relative to the poses' metre scale), and both are coal's answer
    rng = np.random.default_rng(2)
    Ra, pa, ha, Rb, pb, hb = random_pairs(rng, 500)
    dc, _, _, nc = coal_box_box(Ra, pa, ha, Rb, pb, hb)
    moved = np.flatnonzero(dc >= 0.1)[:150]
    assert len(moved) == 150
    pa[moved] -= dc[moved, None] * nc[moved]
    pairs = (Ra, pa, ha, Rb, pb, hb)
    batch = box_box(*pairs)
    alone = [box_box(*(x[i:i + 1] for x in pairs)) for i in range(500)]
    for x, y in zip(batch, zip(*alone)):
        assert rel_err(np.concatenate(y), x) <= rounding_bound(3)
    d, wa, wb, n = batch
    dc, wac, wbc, nc = coal_box_box(*pairs)
    ok = np.isfinite(dc)
    assert ok.sum() >= 490
    touch = np.zeros(500, bool)
    touch[moved] = True
    assert (ok & touch).sum() >= 145 and (ok & (dc < -1e-3)).sum() >= 100 and (ok & (dc > 1e-3)).sum() >= 50
    assert np.abs(dc[ok & touch]).max() <= EXACT
    assert np.abs(d - dc)[ok].max() <= EXACT
    assert np.abs(wa - wac)[ok].max() <= EXACT and np.abs(wb - wbc)[ok].max() <= EXACT
    assert np.abs(n - nc)[ok & ~touch & ((dc < 0) | (dc >= 0.1))].max() <= EXACT     # (at touch: no coal normal)
    assert np.allclose(wa - wb, d[:, None] * n, rtol=0, atol=1e-14)


def _on_an_axis(Ra, Rb, n, tol):
    """(k,) bool: the unit normals ``n`` (k, 3) within ``tol`` of one of the pairs' separating axes (a
    face normal of either box, or the unit cross product of an edge of each), either sign."""
    cross = np.cross(Ra[:, :, :, None], Rb[:, :, None, :], axis=1).reshape(len(n), 3, 9)
    axes = np.concatenate([Ra, Rb, cross / np.linalg.norm(cross, axis=1, keepdims=True)], -1)
    return (1 - np.abs(np.einsum("ki,kij->kj", n, axes)).max(-1)) <= tol ** 2 / 2


@pytest.mark.parametrize("gap", [1e-10, 0.0, -1e-10])
def test_box_box_is_coals_distance_at_touch(gap):
    # pairs 0.1 m apart or more moved along coal's normal until coal's distance is `gap`: the same
    # closest features; where those are a corner and a face or two edges, the normal is an axis of
    # the pair (a face's normal, two edges' cross product) and the one coal gives well apart (at touch
    # coal's is its witness points' difference over a distance of 1e-10 m: no answer).  A corner on
    # an edge has a normal set by their offset: 1e-10 m, as uncertain as the rounding of the pose
    pairs = random_pairs(np.random.default_rng(1), 200)
    dc, _, _, nc = coal_box_box(*pairs)
    far = np.flatnonzero(dc >= 0.1)
    assert len(far) >= 30
    Ra, pa, ha, Rb, pb, hb = (x[far] for x in pairs)
    pa = pa - (dc[far] - gap)[:, None] * nc[far]
    d, wa, wb, n = box_box(Ra, pa, ha, Rb, pb, hb)
    dt, wat, wbt, _ = coal_box_box(Ra, pa, ha, Rb, pb, hb)
    ok = np.isfinite(dt)
    assert ok.sum() >= len(far) - 3
    assert np.abs(dt[ok] - gap).max() <= EXACT                    # touching by coal's own answer
    assert np.abs(d - dt)[ok].max() <= EXACT
    assert np.abs(wa - wat)[ok].max() <= EXACT and np.abs(wb - wbt)[ok].max() <= EXACT
    facet = _on_an_axis(Ra, Rb, nc[far], 1e-8)
    assert facet.sum() >= 20
    assert np.abs(n - nc[far])[facet].max() <= EXACT
    assert np.allclose(np.linalg.norm(n, axis=1), 1.0, rtol=0, atol=1e-14)


def _rot(axis, angle):
    """The rotation by ``angle`` about the unit ``axis``."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], float)
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _one(Ra, pa, ha, Rb, pb, hb):
    d, wa, wb, n = box_box(*(np.asarray(x, float)[None] for x in (Ra, pa, ha, Rb, pb, hb)))
    return d[0], wa[0], wb[0], n[0]


@pytest.mark.parametrize("z, side", [(0.5, 0.0), (0.19, 0.0), (0.19, 0.55)])
def test_two_axis_aligned_boxes_face_on_face_by_hand(z, side):
    # a cube of side 0.2 over a table 1 x 1 x 0.2 whose top is at z = 0.1, its centre at height z
    # (its bottom at z - 0.1), at x = side (0.55: overhanging the table's edge at 0.5): the distance is
    # z - 0.2, the normal +z, the witness points straight above one another on the two faces, within
    # their overlap (x in [side - 0.1, min(side + 0.1, 0.5)], y in [-0.1, 0.1])
    d, wa, wb, n = _one(np.eye(3), [side, 0, z], [0.1, 0.1, 0.1], np.eye(3), [0, 0, 0], [0.5, 0.5, 0.1])
    assert abs(d - (z - 0.2)) <= 1e-15 and np.array_equal(n, [0.0, 0.0, 1.0])
    assert abs(wa[2] - (z - 0.1)) <= 1e-15 and abs(wb[2] - 0.1) <= 1e-15 and np.allclose(wa[:2], wb[:2], atol=1e-15)
    assert side - 0.1 <= wa[0] <= min(side + 0.1, 0.5) and -0.1 <= wa[1] <= 0.1


@pytest.mark.parametrize("z", [0.4, 0.2 * np.sqrt(2) - 0.01])
def test_two_bars_crossed_edge_on_edge_by_hand(z):
    # a bar 2 x 0.2 x 0.2 along x turned 45 degrees about x, its centre at height z, over a bar along y
    # turned 45 degrees about y at the origin: the lower edge of a (at z - 0.1 sqrt 2, along x) crosses
    # the upper edge of b (at 0.1 sqrt 2, along y) over the origin; the distance z - 0.2 sqrt 2 (0.01
    # deep in the second case: the edges' axis x cross y overlaps least), normal +z, witness points on
    # the two edges above the origin
    r2 = np.sqrt(2)
    d, wa, wb, n = _one(_rot([1, 0, 0], np.pi / 4), [0, 0, z], [1, 0.1, 0.1],
                        _rot([0, 1, 0], np.pi / 4), [0, 0, 0], [0.1, 1, 0.1])
    assert abs(d - (z - 0.2 * r2)) <= 1e-15 and np.allclose(n, [0, 0, 1], rtol=0, atol=1e-15)
    assert np.allclose(wa, [0, 0, z - 0.1 * r2], rtol=0, atol=1e-15)
    assert np.allclose(wb, [0, 0, 0.1 * r2], rtol=0, atol=1e-15)


def test_a_cube_corner_down_into_a_table_by_hand():
    # a cube of half side 0.1 with a diagonal upright (its lowest corner 0.1 sqrt 3 under its centre),
    # pressed 0.01 into the table's top face (z = 0.1): the table's face axis overlaps least, the
    # witness points the corner and the point of the face under it
    u = np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    R = _rot(u, np.arccos(1 / np.sqrt(3)))                    # takes the corner (-1, -1, -1) / sqrt 3 to -z
    assert np.allclose(R @ np.array([-1, -1, -1]) / np.sqrt(3), [0, 0, -1], atol=1e-15)
    z = 0.1 + 0.1 * np.sqrt(3) - 0.01
    d, wa, wb, n = _one(R, [0.2, 0.1, z], [0.1, 0.1, 0.1], np.eye(3), [0, 0, 0], [0.5, 0.5, 0.1])
    assert abs(d + 0.01) <= 1e-15 and np.array_equal(n, [0.0, 0.0, 1.0])
    assert np.allclose(wa, [0.2, 0.1, 0.09], rtol=0, atol=1e-15)
    assert np.allclose(wb, [0.2, 0.1, 0.1], rtol=0, atol=1e-15)


def test_a_box_just_above_a_table_where_coal_after_deep_queries_answered_a_deep_flip():
    # a pose of a dropped box whose distance coal 3.0.3 gave as -0.4689 m, normal -z, after deep queries
    # in the same process: the closed form is coal's fresh answer (1.09e-7 m above, normal +z)
    R = np.array([[0.9814766687531714, 0.01852333124649711, 0.19068412333676305],
                  [0.01852333124725967, 0.9814766687530717, -0.19068412333720217],
                  [-0.190684123336689, 0.19068412333727622, 0.9629533375062432]])
    pair = (R, [-0.00170892625761044, 0.00170892625763934, 0.3344322671975999], [0.1, 0.1, 0.1],
            np.eye(3), [0.0, 0.0, 0.1], [0.5, 0.5, 0.1])
    d, wa, wb, n = _one(*pair)
    dc, wac, wbc, nc = coal_box_box(*(np.asarray(x, float)[None] for x in pair))
    assert 0 < d < 2e-7 and abs(d - dc[0]) <= EXACT
    assert np.abs(wa - wac[0]).max() <= EXACT and np.abs(wb - wbc[0]).max() <= EXACT
    assert np.allclose(n, [0, 0, 1], rtol=0, atol=1e-15)


def _turned(R, p, x):
    """``x`` (the cylinder's axes) in the world of a cylinder at ``(R, p)``."""
    return p + R @ x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sphere_in_a_cylinder_leaves_through_the_nearer_of_side_and_caps_by_hand(seed):
    # a turned, moved cylinder of radius 0.1 and half length h; a sphere of radius 0.03 centred at c in
    # its axes: inside, the depth is the nearer of the side (0.1 - |c_xy|) and the caps (h - |c_z|), plus
    # the radius (coal's EPA leaves through the side where a centre inside a disc is nearer a cap, and
    # gives no normal at the centre: dm_control's dog.xml has a ball resting on such a disc)
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    R, p = Q * np.linalg.det(Q), rng.uniform(-1, 1, 3)
    cases = [  # (h, centre in the cylinder's axes, depth, normal in the cylinder's axes, witness on b there)
        (0.004, [0.0, 0.0, 0.0], 0.004, [0, 0, 1], [0.0, 0.0, 0.004]),             # a disc, at its centre
        (0.004, [0.05, 0.0, -0.001], 0.003, [0, 0, -1], [0.05, 0.0, -0.004]),      # nearer the lower cap
        (0.5, [0.0, 0.08, 0.2], 0.02, [0, 1, 0], [0.0, 0.1, 0.2]),                 # a post, nearer its side
        (0.5, [0.0, 0.0, 0.0], 0.1, [1, 0, 0], [0.1, 0.0, 0.0]),                   # on the axis: along x
    ]
    for h, c, depth, n, wb in cases:          # (8e-15: rounding of a few products of metre-scale numbers)
        ca = _turned(R, p, np.array(c, float))[None]
        d, wa, wbo, nw = sphere_cylinder(ca, np.array([0.03]), R[None], p[None], np.array([h]), np.array([0.1]))
        assert abs(d[0] - (-depth - 0.03)) <= 8e-15
        assert np.abs(nw[0] - R @ np.array(n, float)).max() <= 8e-15
        assert np.abs(wbo[0] - _turned(R, p, np.array(wb, float))).max() <= 8e-15
        assert np.abs(wa[0] - (ca[0] - 0.03 * nw[0])).max() <= 8e-15


def _coals_distance(coal, ga, Ta, gb, Tb, hit):
    """Asserts that ``hit`` ``(d, w_a, w_b, n)`` (one pair's, arrays of one row) is coal's ``distance``
    between ``ga`` at ``Ta`` and ``gb`` at ``Tb`` (GJK at :data:`COAL_TOLERANCE`) to :data:`EXACT`."""
    req = coal.DistanceRequest()
    req.gjk_tolerance = req.epa_tolerance = COAL_TOLERANCE
    res = coal.DistanceResult()
    dc = coal.distance(ga, Ta, gb, Tb, req, res)
    d, wa, wb, n = hit
    assert abs(d[0] - dc) <= EXACT, (d, dc)
    assert np.abs(wa[0] - res.getNearestPoint1()).max() <= EXACT
    assert np.abs(wb[0] - res.getNearestPoint2()).max() <= EXACT
    assert np.abs(n[0] + np.asarray(res.normal)).max() <= EXACT      # (coal's normal runs from a to b)


def test_sphere_outside_a_cylinder_is_coals_distance():
    # centres outside (beside the side, beyond a cap, beyond a rim): coal's GJK, which is right there
    import coal
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(200):
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        R, p = Q * np.linalg.det(Q), rng.uniform(-0.5, 0.5, 3)
        ca, ra, rb, hb = rng.uniform(-0.8, 0.8, 3), rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.3), rng.uniform(0.02, 0.4)
        x = R.T @ (ca - p)
        if np.hypot(x[0], x[1]) <= rb and abs(x[2]) <= hb:
            continue                                   # inside: by hand above
        _coals_distance(coal, coal.Sphere(ra), coal.Transform3s(np.eye(3), ca), coal.Cylinder(rb, 2 * hb),
                        coal.Transform3s(R, p), sphere_cylinder(ca[None], np.array([ra]), R[None], p[None],
                                                                np.array([hb]), np.array([rb])))
        checked += 1
    assert checked >= 150


@pytest.mark.parametrize("h", [0.05, 0.02, -0.01])
def test_an_ellipsoid_turned_about_x_over_a_plane_by_hand(h):
    """Semi-axes (a, b, c) turned by theta about x, centre at height h + its support height over z = 0:
    the lowest point lies ``L = sqrt((b sin theta)^2 + (c cos theta)^2)`` below the centre, ``(b^2 - c^2) sin
    theta cos theta / L`` beside it along -y (the ellipse's point whose normal is -z); the distance is h."""
    a, b, c, t = 0.07, 0.05, 0.03, 0.4
    bound = rounding_bound(16)                       # (a dozen operations on lengths below one)
    R = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(t), -np.sin(t)], [0.0, np.sin(t), np.cos(t)]])
    low = np.hypot(b * np.sin(t), c * np.cos(t))
    centre = np.array([0.2, -0.1, h + low])
    d, wa, wb, n = ellipsoid_plane(R[None], centre[None], np.array([[a, b, c]]), np.array([[0.0, 0.0, 1.0]]),
                                   np.zeros((1, 3)))
    assert abs(d[0] - h) <= bound and np.array_equal(n[0], [0.0, 0.0, 1.0])
    assert abs(wa[0, 2] - h) <= bound and abs(wa[0, 0] - 0.2) <= bound
    assert abs(-(wa[0, 1] + 0.1) * low - (b * b - c * c) * np.sin(t) * np.cos(t)) <= bound
    assert np.abs(wb[0] - [wa[0, 0], wa[0, 1], 0.0]).max() <= bound


@pytest.mark.parametrize("h", [0.05, 0.02, -0.01])
def test_an_ellipsoid_turned_about_x_over_a_box_by_hand(h):
    """The ellipsoid above over a box (half extents 0.3, 0.2, 0.1, turned by 0.3 about z, centred at the
    origin) whose top it rests on: the top's hit, as over the plane z = 0.1 (the test above); beside the
    box (its centre past the top's edge by more than the ellipsoid's reach along x, a corner or an edge
    nearest) none; under it, the bottom's, mirrored."""
    a, b, c, t = 0.07, 0.05, 0.03, 0.4
    bound = rounding_bound(16)
    R = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(t), -np.sin(t)], [0.0, np.sin(t), np.cos(t)]])
    Rb = np.array([[np.cos(0.3), -np.sin(0.3), 0.0], [np.sin(0.3), np.cos(0.3), 0.0], [0.0, 0.0, 1.0]])
    hb = np.array([[0.3, 0.2, 0.1]])
    low = np.hypot(b * np.sin(t), c * np.cos(t))
    for centre, want in [([0.05, -0.1, 0.1 + h + low], 0.1), ([0.8, 0.0, 0.1 + h + low], None),
                         ([0.05, -0.1, -0.1 - h - low], -0.1)]:
        args = (R[None], np.array([centre]), np.array([[a, b, c]]), Rb[None], np.zeros((1, 3)), hb)
        d, wa, wb, n = ellipsoid_box_face(*args)
        if want is None:
            assert d[0] == np.inf
            continue
        top = want > 0
        assert abs(d[0] - h) <= bound and np.abs(n[0] - [0.0, 0.0, 1.0 if top else -1.0]).max() <= bound
        assert abs(wa[0, 2] - want - (h if top else -h)) <= bound and abs(wb[0, 2] - want) <= bound
        assert abs(abs(wa[0, 1] - centre[1]) * low - (b * b - c * c) * np.sin(t) * np.cos(t)) <= bound


def test_an_ellipsoid_apart_from_a_plane_is_coals_distance():
    # apart: coal's GJK (an ellipsoid against a half-space), at its tolerance of 1e-11
    import coal
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(200):
        Qa, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        Qb, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        Ra, Rb = Qa * np.linalg.det(Qa), Qb * np.linalg.det(Qb)
        pa, pb, radii = rng.uniform(-0.5, 0.5, 3), rng.uniform(-0.5, 0.5, 3), rng.uniform(0.02, 0.3, 3)
        d, wa, wb, n = ellipsoid_plane(Ra[None], pa[None], radii[None], Rb[None, :, 2], pb[None])
        if d[0] <= 1e-3:
            continue                                   # (overlapping: by hand above)
        _coals_distance(coal, coal.Ellipsoid(*radii), coal.Transform3s(Ra, pa),
                        coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0), coal.Transform3s(Rb, pb), (d, wa, wb, n))
        checked += 1
    assert checked >= 60
