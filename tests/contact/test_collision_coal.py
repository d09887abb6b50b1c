"""coal's side of collide (sparsedyn.contact.collision_coal): a mesh's convex hull vertices (each
vertex once, interior and face points left out, scaled by the shape's size, stacked per mesh), and
coal's signed distance at the module's tolerance against hand values."""

import coal
import numpy as np
import pytest
from scipy.spatial import ConvexHull

import sparsedyn as sd
from sparsedyn.contact.collision_coal import (HULL_OPTIONS, _bounds, _coal_distance, _coal_geometry, _hull_convex,
                                              flat_mesh, hull_graph, mesh_vertices)
from test_scene import box_model

CUBE = np.array([[x, y, z] for x in (-1.0, 1.0) for y in (-1.0, 1.0) for z in (-1.0, 1.0)])


def _cube_mesh(extra):
    """A cube's corners and ``extra`` points, with faces over the corners only (the hull needs no more)."""
    V = np.concatenate([CUBE, extra])
    F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return V, F


def test_a_meshs_hull_vertices_are_its_corners_once_scaled_and_stacked():
    """A cube with a corner repeated 1e-9 away, its centre and a face's centre: the hull vertices are
    the eight corners, each once, times the shape's size; two meshes stack, each with its own rows."""
    extra = np.array([[1.0, 1.0, 1.0 + 1e-9], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    size = (0.5, 0.25, 2.0)
    shapes = [sd.Shape("mesh", size, mesh=_cube_mesh(extra), name="a"),
              sd.Shape("plane", name="floor"),
              sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=_cube_mesh(extra[1:]), name="b")]
    scene = sd.Scene(box_model(), world=shapes)
    V, rows = mesh_vertices(scene)
    ka = next(k for k, s in enumerate(scene.shapes) if s.name == "a")
    kb = next(k for k, s in enumerate(scene.shapes) if s.name == "b")
    assert sorted(rows) == sorted([ka, kb]) and rows[ka][1] - rows[ka][0] == rows[kb][1] - rows[kb][0] == 8
    for k, scale in ((ka, size), (kb, (1.0, 1.0, 1.0))):
        got = V[rows[k][0]:rows[k][1]]
        want = CUBE * scale
        # each corner once (the repeated one, 2e-9 from its own once scaled, kept as one of the two)
        assert all(np.sum(np.abs(got - w).max(1) <= 1e-8) == 1 for w in want)



def test_the_hull_graph_is_the_cubes_edges_and_its_starts_its_highest_corners():
    """Two cubes (scaled) beside a floor: by hand, each corner's neighbours along the hull's edges are the three
    corners one coordinate away (the face diagonals of qhull's triangles too: six in all on the two faces cut
    along them, three to five here), as rows of the stacked vertices; each start along +x, -x, ... is a corner
    with that coordinate the highest; the floor has no rows."""
    size = (0.5, 0.25, 2.0)
    shapes = [sd.Shape("mesh", size, mesh=_cube_mesh(np.zeros((0, 3))), name="a"), sd.Shape("plane", name="floor"),
              sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=_cube_mesh(np.zeros((0, 3))), name="b")]
    scene = sd.Scene(box_model(), world=shapes)
    V, rows = mesh_vertices(scene)
    starts, first, adj = hull_graph(scene)
    for k, (a, b) in rows.items():
        for v in range(a, b):
            nb = adj[first[v]:first[v + 1]]
            assert np.all((a <= nb) & (nb < b)) and len(set(nb.tolist())) == len(nb)
            # the three edges of the cube at v, each an edge of the triangles, plus face diagonals
            moved = np.sum(np.abs(V[nb] - V[v]) > 1e-12, axis=1)
            assert np.sum(moved == 1) == 3 and np.all(moved <= 2) and 3 <= len(nb) <= 6
        for i in range(3):
            hi, lo = V[starts[k, 2 * i], i], V[starts[k, 2 * i + 1], i]
            assert hi == V[a:b, i].max() and lo == V[a:b, i].min()
    floor = next(k for k, s in enumerate(scene.shapes) if s.name == "floor")
    assert floor not in rows and np.all(starts[floor] == 0)

@pytest.mark.parametrize("gap", [0.3, 1e-6, -0.05])
def test_coals_signed_distance_of_two_spheres_is_the_hand_value(gap):
    """Two spheres of radii 0.2 and 0.3 whose surfaces are ``gap`` apart along a random direction:
    the signed distance is ``gap`` and the witness points lie on the surfaces along the centres' line
    (to coal's tolerance, 1e-11 m, and the rounding of the transforms)."""
    u = np.random.default_rng(1).normal(size=3)
    u /= np.linalg.norm(u)
    ca = np.array([0.1, -0.2, 0.3])
    cb = ca + (0.2 + 0.3 + gap) * u
    shapes = [sd.Shape("sphere", (0.2,), name="a", placement=(np.eye(3), ca)),
              sd.Shape("sphere", (0.3,), name="b", placement=(np.eye(3), cb))]
    scene = sd.Scene(box_model(), world=shapes)
    ka, kb = (next(k for k, s in enumerate(scene.shapes) if s.name == n) for n in "ab")
    d, res = _coal_distance(coal, _coal_geometry(scene, ka), coal.Transform3s(np.eye(3), ca),
                            _coal_geometry(scene, kb), coal.Transform3s(np.eye(3), cb), "a", "b")
    assert abs(d - gap) <= 1e-10
    assert np.abs(np.asarray(res.getNearestPoint1()) - (ca + 0.2 * u)).max() <= 1e-10
    assert np.abs(np.asarray(res.getNearestPoint2()) - (cb - 0.3 * u)).max() <= 1e-10


def _fan(n):
    """A cone over a flat ring of ``n`` points (radius 0.1, apex 0.05 above it) and a point 1 um below
    the ring's centre: a triangulated hull has a vertex of about ``n`` neighbours."""
    t = 2 * np.pi * np.arange(n) / n
    V = np.r_[np.c_[0.1 * np.cos(t), 0.1 * np.sin(t), np.zeros(n)], [[0.0, 0.0, 0.05], [0.0, 0.0, -1e-6]]]
    return V, ConvexHull(V).simplices


def test_a_hull_coal_refuses_is_qhulls_with_facets_merged():
    """coal keeps at most 255 neighbours per vertex of a hull, so qhull's triangulated hull of a ring
    of 400 points is refused (centauro's pelvis: a flat face's fan); the robot's hull is then qhull's
    with facets merged within 10 um (HULL_OPTIONS): a subset of the mesh's vertices, the apex among
    them, no vertex of the mesh farther than the merged facets' sagitta (3e-5 m) outside it, and
    collide's distance to a box above the apex (the mesh's hull on a box) is the hand value."""
    V, F = _fan(400)
    bvh = coal.BVHModelOBBRSS()
    bvh.beginModel(len(F), len(V))
    bvh.addVertices(V)
    bvh.addTriangles(F.astype(np.int64))
    bvh.endModel()
    with pytest.raises(RuntimeError, match="Too many neighbors"):
        bvh.buildConvexHull(True, HULL_OPTIONS[0])
    model = box_model(geometry=False).with_geometry(sd.Geometry("fan", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)),
                                                                "mesh", (1.0, 1.0, 1.0), "collision", vertices=V,
                                                                faces=F))
    lid = sd.Shape("box", (0.2, 0.2, 0.2), placement=(np.eye(3), [0.0, 0.0, 0.2]), name="lid")
    scene = sd.Scene(model, world=[lid], margin=1.0)
    hull = np.asarray(_hull_convex(scene, 0).points(), float)
    assert np.abs(hull[:, None] - V[None]).max(2).min(1).max() <= 1e-15          # the mesh's own vertices
    assert np.abs(hull - [0.0, 0.0, 0.05]).max(1).min() == 0.0
    planes = ConvexHull(hull).equations
    assert (V @ planes[:, :3].T + planes[:, 3]).max() <= 3e-5
    hits = sd.collide(scene, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    assert set(hits.pairs) == {("fan", "lid")} and abs(hits.distances.min() - 0.05) <= 1e-10


def test_a_flat_meshs_hull_is_refused_by_name():
    """A square of two triangles (its vertices in the plane z = 0.1) has no hull with volume, which
    qhull cannot build (coal's hull then crashes the process): the scene says so naming the shape, and
    the mesh is flat; a cube is not.  On a world box (the mesh's hull against the box) collide and the
    step refuse it by name on both roads."""
    V = np.array([[0.0, 0.0, 0.1], [1.0, 0.0, 0.1], [1.0, 1.0, 0.1], [0.0, 1.0, 0.1]])
    F = np.array([[0, 1, 2], [0, 2, 3]])
    shapes = [sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=(V, F), name="plate"),
              sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=_cube_mesh(np.zeros((0, 3))), name="cube")]
    scene = sd.Scene(box_model(), world=shapes)
    kp, kc = (next(k for k, s in enumerate(scene.shapes) if s.name == n) for n in ("plate", "cube"))
    assert flat_mesh(scene, kp) and not flat_mesh(scene, kc)
    with pytest.raises(ValueError, match="mesh shape 'plate' is flat"):
        _hull_convex(scene, kp)
    assert len(np.asarray(_hull_convex(scene, kc).points())) == 8
    # a robot's flat sole over a world box (whose road takes the mesh's hull): collide and the step say so
    sole = sd.Geometry("sole", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)), "mesh", (1.0, 1.0, 1.0), "collision",
                       vertices=V - [0.5, 0.5, 0.1], faces=F)
    table = sd.Shape("box", (1.0, 1.0, 0.2), placement=(np.eye(3), [0.0, 0.0, -0.1]), name="table")
    on_table = sd.Scene(box_model(geometry=False).with_geometry(sole), world=[table])
    q = [0.0, 0.0, 0.001, 0.0, 0.0, 0.0, 1.0]
    for backend in ("native", "numpy"):
        with sd.use_backend(backend), pytest.raises(ValueError, match="mesh shape 'sole' is flat"):
            sd.collide(on_table, q)
    with pytest.raises(ValueError, match="mesh shape 'sole' is flat"):
        sd.contact_step(on_table.model, q, [0.0] * 6, [0.0] * 6, on_table, 1e-3)


def test_every_scene_of_a_model_reads_and_hulls_each_mesh_geometry_once():
    """What comes of a shape's geometry alone is the model's, not the scene's: a second scene of one
    model gets the first's coal objects and hulls (the same objects), whatever the shapes' names and
    placements; a mesh of another size or another vertex is its own (its hull the cube's corners times
    its size); another model reads its own; a flat mesh is refused by each scene's own name."""
    model = box_model()
    cube = _cube_mesh(np.zeros((0, 3)))
    moved = (np.eye(3), [0.0, 0.0, 2.0])
    first = sd.Scene(model, world=[sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=cube, name="a")])
    again = sd.Scene(model, world=[sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=cube, placement=moved, name="b"),
                                   sd.Shape("mesh", (0.5, 1.0, 2.0), mesh=cube, name="long"),
                                   sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=(cube[0] * 1.5, cube[1]), name="big")])
    other = sd.Scene(box_model(), world=[sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=cube, name="a")])
    k = {s.name: i for i, s in enumerate(first.shapes)}["a"]
    kb, kl, kg = ({s.name: i for i, s in enumerate(again.shapes)}[n] for n in ("b", "long", "big"))
    assert _coal_geometry(again, kb) is _coal_geometry(first, k) and _hull_convex(again, kb) is _hull_convex(first, k)
    assert _coal_geometry(other, k) is not _coal_geometry(first, k)
    assert _coal_geometry(again, kl) is not _coal_geometry(first, k)
    V, rows = mesh_vertices(again)
    for kk, corners in ((kb, CUBE), (kl, CUBE * [0.5, 1.0, 2.0]), (kg, CUBE * 1.5)):
        got = V[rows[kk][0]:rows[kk][1]]
        assert sorted(map(tuple, got)) == sorted(map(tuple, corners))
    V0, rows0 = mesh_vertices(first)
    assert np.array_equal(V0[rows0[k][0]:rows0[k][1]], V[rows[kb][0]:rows[kb][1]])
    # bounding spheres about each frame's origin: the farthest corner, by hand
    c, r = _bounds(again)
    assert np.array_equal(c[[kb, kl, kg]], np.zeros((3, 3))) and not r.flags.writeable
    ulps = 4 * np.finfo(float).eps                     # (a norm's sum and root, rounded)
    by_hand = [np.sqrt(3.0), np.sqrt(0.25 + 1.0 + 4.0), 1.5 * np.sqrt(3.0)]
    assert np.allclose(r[[kb, kl, kg]], by_hand, rtol=ulps, atol=0)
    plate = (np.array([[0.0, 0.0, 0.1], [1.0, 0.0, 0.1], [1.0, 1.0, 0.1], [0.0, 1.0, 0.1]]),
             np.array([[0, 1, 2], [0, 2, 3]]))
    for name in ("plate", "same plate"):
        scene = sd.Scene(model, world=[sd.Shape("mesh", (1.0, 1.0, 1.0), mesh=plate, name=name)])
        with pytest.raises(ValueError, match=f"mesh shape '{name}' is flat"):
            _hull_convex(scene, len(scene.shapes) - 1)


@pytest.mark.parametrize("size, grid", [((1.0, 0.5, 0.2, 0.1), (8, 12)), ((10.0, 10.0, 0.3, 0.05), (50, 60)),
                                        ((2.0, 3.0, 1.5, 0.4), (5, 5))])
def test_a_height_fields_bounding_sphere_is_that_of_coals_box_of_it(size, grid):
    """A world height field's bounding sphere (centre in its frame, radius) is the one of coal's
    ``HeightFieldAABB`` of the same grid (its local box's centre and half diagonal), to rounding; and coal's
    object of the field is not made for it."""
    from conftest import rounding_bound
    heights = np.random.default_rng(len(grid) + grid[0]).uniform(0.0, 1.0, grid)
    scene = sd.Scene(box_model(), world=[sd.Shape("hfield", size, heights=heights, name="ground")])
    k = next(i for i, s in enumerate(scene.shapes) if s.kind == "hfield")
    c, r = _bounds(scene)
    sx, sy, top, base = size
    g = coal.HeightFieldAABB(2 * sx, 2 * sy, np.ascontiguousarray(top * heights[::-1]), -base)
    g.computeLocalAABB()
    scale = rounding_bound(4) * max(sx, sy, top + base)
    assert np.abs(c[k] - np.asarray(g.aabb_center)).max() <= scale and abs(r[k] - g.aabb_radius) <= scale
    assert ("coal", k) not in scene.cache
