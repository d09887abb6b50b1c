"""MJCF height fields (``<hfield>`` geoms) in ``load_mjcf(..., geometry=True)`` and in a scene made from
the file, against MuJoCo on the same file.

Oracles: the grid by hand from the file (the inline ``elevation`` and a PNG image, each normalised to
[0, 1], rows flipped: the file's first row is at ``+y``, ``hfield_data``'s row 0 at ``-y``); MuJoCo's
``mj_forward`` contacts (``d.contact``: ``dist``, ``pos``, the frame's normal) of a sphere pressed into
the field; the surface by hand from the grid (the plane of a cell's triangle); the rest height and
the weight carried of a sphere dropped on a plateau of the field (the step's bounds, as in
tests/contact/test_scene_physics.py).

MuJoCo collides a convex geom with a height field prism by prism (each cell's triangle extruded down
to the base); where the sphere's deepest point lies inside one triangle (its centre above the
triangle's interior, pressed in less than its distance to the triangle's edges), the prism's
penetration is the sphere's against the triangle's plane, as ours is: the two are compared there.
"""

import struct
import warnings
import zlib

import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.contact.friction_problem import PENETRATION_SLOP
from sparsedyn.kernels.fingerprints import fingerprint

# a 5 x 6 grid with a plateau (rows 1-3, columns 1-3 at 60) around the grid point (2, 2)
ELEVATION = np.array([[10, 40, 20, 70, 0, 30],
                      [50, 60, 60, 60, 90, 20],
                      [80, 60, 60, 60, 10, 40],
                      [30, 60, 60, 60, 50, 100],
                      [20, 0, 90, 40, 70, 60]])
SIZE = (1.0, 0.8, 0.3, 0.1)                                  # sx, sy, top, base
# MuJoCo's own penetration solver (GJK/EPA on a prism) run to 1e-12: its contacts are exact to rounding
XML = """<mujoco><option timestep="0.002" ccd_tolerance="1e-12" ccd_iterations="200"/>
<asset><hfield name="terrain" nrow="5" ncol="6" size="{size}" elevation="{elevation}"/></asset>
<worldbody><geom name="ground" type="hfield" hfield="terrain" pos="0.1 -0.2 0.05" euler="0 0 30" friction="0.9"/>
<body name="ball" pos="0 0 1"><freejoint/><geom name="ball" type="sphere" size="{r}" mass="0.5"/></body>
</worldbody></mujoco>"""
R_BALL = 0.04


def write(tmp_path, r=R_BALL, elevation=ELEVATION, name="terrain.xml"):
    xml = XML.format(size=" ".join(map(str, SIZE)), r=r,
                     elevation="  ".join(" ".join(str(x) for x in row) for row in elevation))
    path = tmp_path / name
    path.write_text(xml)
    return path, mujoco.MjModel.from_xml_string(xml)


def by_hand(E):
    """The grid MuJoCo's compiler makes of the file's values ``E``: scaled to [0, 1], rows flipped."""
    E = np.asarray(E, float)
    return np.flipud((E - E.min()) / (E.max() - E.min()))


def test_the_grid_and_pose_are_the_files(tmp_path):
    """The height field's geometry (visual and collision) holds the file's size, its grid normalised
    by hand (MuJoCo keeps it in float32: within its rounding), the geom's pose and friction; nothing
    is left out (no warning); a different grid gives a different model fingerprint."""
    path, m = write(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.MjcfWarning)
        model = sd.load_mjcf(path, geometry=True)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    for kind in ("visual", "collision"):
        (g,) = [g for g in model.geometry(kind) if g.name == "ground"]
        assert g.shape == "hfield" and g.body == -1 and g.size == SIZE and g.friction == 0.9
        assert g.heights.shape == (5, 6) and not g.heights.flags.writeable
        assert np.abs(g.heights - by_hand(ELEVATION)).max() <= 2 * np.finfo(np.float32).eps
        R, p = g.X.E.T, g.X.r                                 # the geom's frame in the world
        assert np.abs(R - d.geom_xmat[0].reshape(3, 3)).max() <= rounding_bound(8)
        assert np.abs(p - d.geom_xpos[0]).max() <= rounding_bound(8)
    other = by_hand(ELEVATION)
    other[0, 0] = 0.5
    g = model.geometry("collision")[0]
    assert fingerprint(model) != fingerprint(model.with_geometry(g._replace(name="ground2", heights=other)))
    assert fingerprint(model) == fingerprint(sd.load_mjcf(path, geometry=True))


def _png(path, img):
    """An 8-bit greyscale PNG of ``img`` (rows top to bottom)."""
    h, w = img.shape
    raw = b"".join(b"\0" + bytes(row) for row in np.asarray(img, np.uint8))
    chunk = lambda t, x: struct.pack(">I", len(x)) + t + x + struct.pack(">I", zlib.crc32(t + x))  # noqa: E731
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                     chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_a_png_height_field_is_its_image_normalised(tmp_path):
    """A field from a PNG file: the image's grey levels scaled to [0, 1], its top row at ``+y``."""
    img = np.array([[0, 50, 100, 30], [150, 200, 250, 10], [20, 40, 60, 80]])
    _png(tmp_path / "terrain.png", img)
    (tmp_path / "png.xml").write_text(
        '<mujoco><asset><hfield name="t" file="terrain.png" size="2 1 0.5 0.2"/></asset><worldbody>'
        '<geom name="ground" type="hfield" hfield="t"/><body name="ball"><freejoint/>'
        '<geom type="sphere" size="0.1"/></body></worldbody></mujoco>')
    (g,) = [g for g in sd.load_mjcf(tmp_path / "png.xml", geometry=True).geometry("collision")
            if g.name == "ground"]
    assert g.size == (2.0, 1.0, 0.5, 0.2)
    assert np.abs(g.heights - by_hand(img)).max() <= 2 * np.finfo(np.float32).eps


def _surface(g):
    """``P(i, j)``: the grid point (i, j) of geometry ``g`` in its frame, by hand."""
    sx, sy, top, _ = g.size
    nrow, ncol = g.heights.shape
    return lambda i, j: np.array([-sx + 2 * sx * j / (ncol - 1), -sy + 2 * sy * i / (nrow - 1), top * g.heights[i, j]])


def test_a_sphere_pressed_into_the_field_has_mujocos_contact(tmp_path):
    """A sphere pressed 2 mm into the triangle of a cell (its centre above the triangle's centroid,
    along the triangle's normal), at 40 places: one contact, the same as MuJoCo's (``dist``,
    ``pos`` midway between the surfaces, the normal from the field towards the sphere), both equal to
    the triangle's plane by hand (the depth, the normal, the point ``centroid - depth / 2 n``)."""
    path, m = write(tmp_path)
    d = mujoco.MjData(m)
    model = sd.load_mjcf(path, geometry=True)
    scene = sd.Scene(model)
    assert scene.pairs == [("ball", "ground")]
    mujoco.mj_forward(m, d)
    Rg, pg = d.geom_xmat[0].reshape(3, 3).copy(), d.geom_xpos[0].copy()
    P = _surface(model.geometry("collision")[0])
    rng = np.random.default_rng(0)
    depth, bound = 0.002, rounding_bound(64)
    for t in range(40):
        i, j = rng.integers(0, 4), rng.integers(0, 5)
        T = [P(i, j), P(i, j + 1), P(i + 1, j + 1)] if t % 2 else [P(i, j), P(i + 1, j + 1), P(i + 1, j)]
        centroid = sum(T) / 3
        n = np.cross(T[1] - T[0], T[2] - T[0])
        n /= np.linalg.norm(n)
        c = Rg @ (centroid + (R_BALL - depth) * n) + pg
        n, point = Rg @ n, Rg @ (centroid - depth / 2 * n) + pg
        d.qpos[:] = [*c, 1, 0, 0, 0]
        mujoco.mj_forward(m, d)
        hits = sd.collide(scene, [*c, 0, 0, 0, 1])
        assert d.ncon == 1 and len(hits.distances) == 1
        mj = d.contact[0]
        assert abs(hits.distances[0] - mj.dist) <= bound and abs(hits.distances[0] + depth) <= bound
        assert np.abs(hits.normals[0] - mj.frame[:3]).max() <= bound and np.abs(hits.normals[0] - n).max() <= bound
        assert np.abs(hits.points[0] - mj.pos).max() <= bound and np.abs(hits.points[0] - point).max() <= bound


def test_a_sphere_dropped_on_the_field_rests_on_its_surface(tmp_path):
    """A 0.5 kg ball of radius 5 cm dropped from 10 cm above the plateau (the grid point (2, 2) at
    ``0.3 * 0.6`` above the field's frame, the four cells around it flat), on the default (native)
    road: after 0.6 s it is at rest on the surface, its centre ``r`` above the grid point by hand
    (world: the geom's pose), its normal impulse carrying its weight ``m g dt``.  Bounds as in
    tests/contact/test_scene_physics.py: velocities within ``V_REST = 100 tol g dt``, the height within
    ``PENETRATION_SLOP + dt V_REST``, the impulse within ``2 m V_REST``."""
    path, m = write(tmp_path, r=0.05)
    model = sd.load_mjcf(path, geometry=True)
    scene = sd.Scene(model)
    g = model.geometry("collision")[0]
    assert np.all(g.heights[1:4, 1:4] == g.heights[2, 2])      # the plateau: flat around (2, 2)
    top = g.X.E.T @ _surface(g)(2, 2) + g.X.r
    dt, tol, mass = 0.002, 1e-8, 0.5
    v_rest = 100 * tol * 9.81 * dt
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)   # an impact may stop short of tol: the end is asserted
        r = sd.rollout(model, [*(top + [0, 0, 0.1]), 0, 0, 0, 1], [0.0] * 6, [0.0] * 6, scene, dt, 300)
    assert np.abs(r.v[-1]).max() <= v_rest
    assert np.abs(r.q[-1][:3] - (top + [0, 0, 0.05])).max() <= PENETRATION_SLOP + dt * v_rest
    assert abs(np.sum(r.impulses[-1][:, 2]) - mass * 9.81 * dt) <= 2 * mass * v_rest


def test_a_height_field_on_a_body_welded_to_the_world_is_a_world_shape(tmp_path):
    """A height field on a body without joints (welded to the world) is fixed in the world at MuJoCo's
    geom pose (``geom_xpos``, ``geom_xmat``), and the scene pairs it with the ball."""
    xml = ('<mujoco><asset><hfield name="t" nrow="2" ncol="3" size="1 1 0.2 0.1" elevation="0 1 2 1 0 1"/>'
           '</asset><worldbody><body name="stand" pos="1 0 0.5" euler="0 0 90"><geom name="bumps" type="hfield" '
           'hfield="t" pos="0 0.2 0"/></body><body name="ball" pos="1 0 1"><freejoint/>'
           '<geom name="ball" type="sphere" size="0.1"/></body></worldbody></mujoco>')
    (tmp_path / "welded.xml").write_text(xml)
    model = sd.load_mjcf(tmp_path / "welded.xml", geometry=True)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    (g,) = [g for g in model.geometry("collision") if g.name == "bumps"]
    assert g.body == -1
    assert np.abs(g.X.E.T - d.geom_xmat[0].reshape(3, 3)).max() <= rounding_bound(8)
    assert np.abs(g.X.r - d.geom_xpos[0]).max() <= rounding_bound(8)
    assert sd.Scene(model).pairs == [("ball", "bumps")]


def test_a_height_field_on_a_moving_body_is_refused_naming_it(tmp_path):
    """A height field on a body with a joint loads (its geometry on that body) but a scene refuses it,
    naming the geom and the body."""
    (tmp_path / "moving.xml").write_text(
        '<mujoco><asset><hfield name="t" nrow="2" ncol="2" size="1 1 0.2 0.1" elevation="0 1 1 0"/></asset>'
        '<worldbody><geom name="floor" type="plane" size="5 5 0.1"/><body name="tray" pos="0 0 1"><freejoint/>'
        '<geom name="bumps" type="hfield" hfield="t" mass="1"/></body></worldbody></mujoco>')
    model = sd.load_mjcf(tmp_path / "moving.xml", geometry=True)
    (g,) = [g for g in model.geometry("collision") if g.name == "bumps"]
    assert g.shape == "hfield" and model.body_names[g.body] == "tray"
    with pytest.raises(ValueError, match="geometry 'bumps'.*height field on the moving body 'tray'.*fixed in the world"):
        sd.Scene(model)


@pytest.mark.parametrize("change, message", [
    (dict(heights=None), "needs heights"),
    (dict(heights=[[0, 1]]), r"nrow >= 2, ncol >= 2"),
    (dict(heights=[[0, 1.5], [0, 0]]), r"in \[0, 1\]"),
    (dict(size=(1.0, 1.0, 0.0, 0.1)), "must be positive"),
    (dict(shape="box", size=(1.0, 1.0, 1.0)), "heights is for a height field"),
])
def test_bad_height_field_geometries_are_named(tmp_path, change, message):
    path, _ = write(tmp_path)
    model = sd.load_mjcf(path, geometry=True)
    g = model.geometry("collision")[0]._replace(name="terrain2", **change)
    with pytest.raises(sd.ModelError, match=f"geometry 'terrain2'.*{message}"):
        model.with_geometry(g)
