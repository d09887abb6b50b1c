"""The viewer draws a scene (sparsedyn.viewer.scene_view): the world shapes' scene-graph nodes against
the shapes' poses and sizes, and a rollout's contact points and force arrows against the rollout's
impulses.  No browser: what viser holds is what a page would draw.

By hand: a box of mass m resting flat on a table (normal +z) carries its weight, so the four corner
forces sum to m g up; a contact on a plane of normal +z has the frame [x, y, z] (the world x axis
projected on the plane), so each force in the world is the step's impulse over dt as it is.
"""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.model.spatial import Transform, axis_rotation

MASS, SIDE, DT, G = 2.0, 0.2, 1e-3, 9.81


def box_model():
    I = MASS * SIDE ** 2 / 6 * np.eye(3)
    model = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I) \
        .add_frame("box", "box").build()
    return model.with_geometry(sd.Geometry("box", 0, Transform(np.eye(3), np.zeros(3)), "box", (SIDE,) * 3,
                                           "collision"))


def world_shapes():
    R = np.asarray(axis_rotation(np.array([1.0, 2.0, 3.0]) / np.sqrt(14), 0.7), float).T   # a rotation matrix
    tet = (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float), np.array([[0, 2, 1], [0, 1, 3],
                                                                                    [0, 3, 2], [1, 2, 3]]))
    return [sd.Shape("plane", name="floor"),
            sd.Shape("box", (1.0, 0.6, 0.1), placement=(np.eye(3), [0.5, 0, 0.05]), name="table"),
            sd.Shape("sphere", (0.15,), placement=(R, [2, 0, 0.3]), name="ball"),
            sd.Shape("capsule", (0.05, 0.4), placement=(R, [-1, 1, 0.2]), name="rail"),
            sd.Shape("cylinder", (0.1, 0.3), placement=(R, [-1, -1, 0.2]), name="drum"),
            sd.Shape("mesh", (2.0, 1.0, 0.5), placement=(R, [0, 2, 0]), mesh=tet, name="wedge")]


@pytest.fixture
def viewer_and_scene():
    model = box_model()
    scene = sd.Scene(model, world=world_shapes())
    v = sd.Viewer(model, scene=scene, compiled=False, kind="collision")
    yield v, scene
    v.close()


def _rotation(wxyz):
    w, x, y, z = wxyz
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def test_world_shapes_are_drawn_at_their_poses_with_their_sizes(viewer_and_scene):
    v, scene = viewer_and_scene
    shapes = scene.shapes[1:]                                # the model's box first, then the world
    handles = v._scene_handles
    assert [h.name for h in handles] == [f"/scene/{k}" for k in range(len(shapes))]
    tol = 1e-6                                               # viser holds float32
    for s, h in zip(shapes, handles):
        np.testing.assert_allclose(h.position, s.p, rtol=0, atol=tol)
        np.testing.assert_allclose(_rotation(h.wxyz), s.R, rtol=0, atol=tol)
        V = np.asarray(h.vertices, float)                    # in the shape's own frame
        r, z = np.hypot(V[:, 0], V[:, 1]), V[:, 2]
        if s.kind == "box":
            np.testing.assert_allclose(V.max(0) - V.min(0), s.size, rtol=0, atol=tol)
        elif s.kind == "sphere":
            np.testing.assert_allclose(np.linalg.norm(V, axis=1), s.size[0], rtol=0, atol=tol)
        elif s.kind == "capsule":                            # every vertex at the radius from the segment
            d = np.hypot(r, np.maximum(np.abs(z) - s.size[1] / 2, 0))
            np.testing.assert_allclose(d, s.size[0], rtol=0, atol=tol)
        elif s.kind == "cylinder":
            assert abs(r.max() - s.size[0]) <= tol and np.all(r <= s.size[0] + tol)
            np.testing.assert_allclose([z.min(), z.max()], [-s.size[1] / 2, s.size[1] / 2], rtol=0, atol=tol)
        elif s.kind == "mesh":                               # the triangles, scaled by the size
            np.testing.assert_allclose(V, s.vertices * s.size, rtol=0, atol=tol)
        else:                                                # the unbounded plane: a thin 20 m slab about z = 0
            np.testing.assert_allclose(V.max(0) - V.min(0), [20, 20, 1e-3], rtol=0, atol=tol)
    # the model's own box is drawn with the model, not again with the scene
    assert len(v._shapes["collision"]) == 1


def test_rollout_contacts_are_drawn_at_the_points_with_the_impulse_over_dt(viewer_and_scene):
    v, scene = viewer_and_scene
    model = scene.model
    q0 = np.array([0.5, 0.0, 0.1 + SIDE / 2, 0, 0, 0, 1.0])            # resting flat on the table
    steps = 5
    traj = sd.rollout(model, q0, np.zeros(6), np.zeros(6), scene, DT, steps)
    v.play(traj, DT, fps=1 / DT, loop=False)
    v.pause()
    weight = MASS * G
    scale = 0.5 * v._size / weight                           # the documented default: m g is half the robot's size
    corners = [[0.5 + x, y, 0.1] for x in (-SIDE / 2, SIDE / 2) for y in (-SIDE / 2, SIDE / 2)]
    for k in range(steps):
        v.seek(k * DT)
        start, end = np.asarray(v._contact_handles[1].points, float).transpose(1, 0, 2)
        balls = np.asarray(v._contact_handles[0].points, float)
        lam = np.asarray(traj.impulses[k])
        assert len(lam) == 4
        # viser keeps a point cloud in float16 (11 significant bits)
        np.testing.assert_allclose(balls, start, rtol=0, atol=2.0 ** -11 * np.abs(start).max())
        np.testing.assert_allclose(end - start, scale * lam / DT, rtol=1e-6, atol=1e-6 * scale * weight)
        # by hand: the points are the box's lower corners, the forces carry its weight
        assert sorted(map(tuple, np.round(start, 5))) == sorted(map(tuple, np.round(corners, 5)))
        np.testing.assert_allclose(lam.sum(0) / DT, [0, 0, weight], rtol=0, atol=1e-6 * weight)
    v.seek(steps * DT)                                       # the last sample: no step after it, no contacts
    assert v._contact_handles == ()
    v.seek(0.0)
    v.play(traj.q, DT, loop=False)                           # a plain trajectory: the rollout's contacts go
    v.pause()
    assert v._contact_handles == ()


def test_scene_of_another_model_and_rollout_without_its_scene_are_refused(viewer_and_scene):
    v, scene = viewer_and_scene
    other = sd.Scene(box_model())
    with pytest.raises(ValueError, match="built on model 'box', not on the viewer's model 'box'"):
        v.show_scene(other)
    with pytest.raises(TypeError, match="expected a sparsedyn Scene, got list"):
        v.show_scene([sd.Shape("plane")])
    traj = sd.rollout(scene.model, np.array([0.5, 0, 0.2, 0, 0, 0, 1.0]), np.zeros(6), np.zeros(6), scene, DT, 2)
    bare = sd.Viewer(scene.model, compiled=False)
    try:
        with pytest.raises(ValueError, match="give it to the viewer first"):
            bare.play(traj, DT)
    finally:
        bare.close()
    with pytest.raises(ValueError, match="one impulse array per step"):
        v.play(traj._replace(impulses=traj.impulses[:1]), DT)


def test_a_height_field_is_drawn_as_its_surface():
    """A 2 x 3 height field (sx 1, sy 0.5, top 0.2) drawn as a mesh through its grid points: x from -1
    to 1 along a row, y from -0.5 to 0.5 down the rows, z = 0.2 * heights (by hand), two triangles a
    cell, each facing up."""
    from sparsedyn.viewer.scene_view import world_geometries
    H = np.array([[0.0, 0.5, 1.0], [0.25, 0.75, 0.0]])
    scene = sd.Scene(box_model(), world=[sd.Shape("hfield", (1.0, 0.5, 0.2, 0.1), heights=H, name="terrain")])
    g, = world_geometries(scene)
    assert g.shape == "mesh" and g.name == "terrain" and g.body == -1
    assert np.abs(g.vertices - [[-1, -0.5, 0], [0, -0.5, 0.1], [1, -0.5, 0.2],
                                [-1, 0.5, 0.05], [0, 0.5, 0.15], [1, 0.5, 0]]).max() <= 1e-15   # one product
    V = g.vertices[g.faces]
    assert len(g.faces) == 4 and np.all(np.cross(V[:, 1] - V[:, 0], V[:, 2] - V[:, 0])[:, 2] > 0)


def test_a_rollout_with_look_ahead_contacts_is_drawn_at_their_points():
    """A box falling at 8 m/s from 6 mm above the floor: its first step's contacts are beyond the margin
    (found by the step's look-ahead, dt times the speed); the drawing finds the same four corners from
    the rollout's q and v and draws each impulse over dt (no browser needed)."""
    from sparsedyn.viewer.scene_view import rollout_contacts
    model = box_model()
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], friction=0.5)
    q0 = [0.0, 0.0, SIDE / 2 + 0.006, 0, 0, 0, 1.0]
    v0 = [0.0, 0.0, -8.0, 0.0, 0.0, 0.0]
    assert len(sd.collide(scene, q0).distances) == 0                 # nothing within the margin at q0
    traj = sd.rollout(model, q0, v0, [0.0] * 6, scene, DT, 2)
    assert len(traj.impulses[0]) == 4                                # the look-ahead's four corners
    world = rollout_contacts(scene, traj.q, traj.v, traj.impulses, DT)
    assert len(world) == 3 and len(world[-1].points) == 0
    corners = np.array([[x, y, traj.q[0][2] - SIDE / 2] for x in (-SIDE / 2, SIDE / 2) for y in (-SIDE / 2, SIDE / 2)])
    order = np.lexsort(world[0].points.T[:2])
    np.testing.assert_allclose(world[0].points[order], corners[np.lexsort(corners.T[:2])], atol=1e-12)
    np.testing.assert_allclose(world[0].forces.sum(0)[2], np.sum(np.asarray(traj.impulses[0])[:, 2]) / DT, rtol=1e-12)
