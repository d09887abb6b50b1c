"""coal's side of :func:`~sparsedyn.collide`: its shapes built from a scene's, its signed distance at a
tight tolerance, and the convex hulls of a scene's meshes (their vertices, which a mesh's closed-form
contacts with a plane, a box or a height field use, and coal's hull).

What is derived from a shape's geometry alone (coal's object, read from its file where it has one; its
hulls; whether it is flat) depends on its kind, size, mesh and heights, not on its placement, name or
friction, nor on the scene: it is kept in the model's store (:func:`~sparsedyn.model.topology.model_store`)
under that geometry (:func:`_geometry_key`), so every scene of a model reads and hulls its meshes once,
and the scene keeps a lookup by shape index.  A mesh file is read once for the model's lifetime."""

from __future__ import annotations

import hashlib
import math

import numpy as np

from ..model.topology import model_store

__all__ = ["mesh_vertices", "flat_mesh", "convex_geometry", "closest_pair", "SAME_POINT", "COAL_TOLERANCE",
           "SAME_DEPTH", "FLAT", "one_per_point"]

#: Hits of one pair whose witness points on ``a`` round to the same multiple of this [m] are one hit.
SAME_POINT = 1e-7
#: The tolerance of coal's GJK and EPA iterations here (coal's default, 1e-6, leaves witness points and
#: depths that far from the closed forms) [m], and of the test that a feature is as deep as coal's pair.
COAL_TOLERANCE = 1e-11
SAME_DEPTH = 10 * COAL_TOLERANCE



def one_per_point(k, d, wa, keep):
    """The rows ``keep`` (sorted indices into the hits' pair ``k``, depth ``d`` and witness point on ``a``
    ``wa`` (n, 3)) less those at the point of another hit of their pair: of hits whose ``wa`` round to
    the same multiple of :data:`SAME_POINT`, or lie nearer than it, the deepest is kept, of two as deep
    to within :data:`SAME_DEPTH` the first.  coal's closest pair is often one of the closed-form corners,
    and a repeated contact makes the contact problem degenerate; a box's corner and the same corner as a
    point of its contact polygon have depths, two formulas', a rounding apart, which must not choose."""
    if len(keep) < 2:
        return keep
    x, kk = wa[keep], k[keep]
    if ((np.abs(x[:, None] - x[None]).max(-1) < 2 * SAME_POINT) & (kk[:, None] == kk[None])).sum() == len(keep):
        return keep                                # (no two hits of a pair within 2 SAME_POINT: none goes)
    keep = keep[np.argsort(d[keep], kind="stable")]
    seen: dict = {}                                # per key: its deepest row's depth, and its first row as deep
    for i, key in enumerate(zip(k[keep].tolist(), map(tuple, np.round(wa[keep] / SAME_POINT).tolist()))):
        got = seen.get(key)
        if got is None:
            seen[key] = (d[keep[i]], i)
        elif d[keep[i]] <= got[0] + SAME_DEPTH and keep[i] < keep[got[1]]:
            seen[key] = (got[0], i)
    keep = np.sort(keep[[i for _, i in seen.values()]])
    # (points a rounding apart may round to neighbouring multiples: one nearer than SAME_POINT to a deeper goes)
    x, kk, dd = wa[keep], k[keep], d[keep]
    tie = np.abs(dd[None] - dd[:, None]) <= SAME_DEPTH
    near = (np.linalg.norm(x[:, None] - x[None], axis=-1) < SAME_POINT) & (kk[:, None] == kk[None]) & \
        ((~tie & (dd[None] < dd[:, None])) | (tie & (keep[None] < keep[:, None])))
    return keep[~near.any(1)]

def _geometry_key(shape):
    """What a shape's derived geometry depends on: its kind, size, mesh file, and digests of its vertices,
    faces and heights (None where it has none)."""
    def digest(x):
        if x is None:
            return None
        x = np.ascontiguousarray(x)
        return hashlib.blake2b(x.data, digest_size=16).digest(), x.shape, x.dtype.str
    return shape.kind, tuple(float(x) for x in shape.size), shape.mesh, digest(shape.vertices), \
        digest(shape.faces), digest(shape.heights)


def _kept(scene, k, what, make):
    """``what`` of shape ``k`` of ``scene``: kept in the model's store under the shape's geometry (module
    docstring), made by ``make()`` the first time any scene of the model asks; looked up by index in the
    scene after that."""
    key = (what, k)
    cache = scene.cache
    got = cache.get(key)
    if got is None:
        store = model_store(scene.model, "collision shape geometry")
        of = cache.get(("geometry", k))
        if of is None:
            of = cache[("geometry", k)] = _geometry_key(scene.shapes[k])
        got = store.get((what,) + of)
        if got is None:
            got = store.setdefault((what,) + of, make())
        cache[key] = got
    return got


def _hull_vertices(scene, k):
    """The vertices (V, 3) of the convex hull of mesh shape ``k`` in its frame, scaled (:func:`_kept`)."""
    def make():
        from scipy.spatial import ConvexHull, QhullError, cKDTree
        s = scene.shapes[k]
        V = np.asarray(s.vertices, float) * s.size if s.vertices is not None else \
            np.asarray(_coal_geometry(scene, k).vertices(), float)
        try:
            V = V[ConvexHull(V).vertices]
        except (QhullError, ValueError):           # flat or degenerate: every vertex
            pass
        # each point once (a patch on a plane is not de-duplicated again): one within 2 SAME_POINT of one before goes
        close = cKDTree(V).query_pairs(2 * SAME_POINT, output_type="ndarray") if len(V) else np.zeros((0, 2), int)
        return np.delete(V, np.unique(close[:, 1]), axis=0) if len(close) else V
    return _kept(scene, k, "hull", make)


def _hull_edges(scene, k):
    """``(starts (6,), first (V + 1,), neighbours (E,))`` of mesh shape ``k``'s hull vertices (:func:`_hull_vertices`,
    rows ``0 .. V - 1``): vertex ``v``'s neighbours along the hull's edges are ``neighbours[first[v]:first[v + 1]]``,
    ``starts`` the hull's vertices highest along ``+x, -x, +y, -y, +z, -z``; no edge at all where the vertices make
    no hull (flat, degenerate: every vertex is one to search)."""
    def make():
        from scipy.spatial import ConvexHull, QhullError
        V = _hull_vertices(scene, k)
        try:
            hull = ConvexHull(V)
        except (QhullError, ValueError):
            return np.zeros(6, np.int64), np.zeros(len(V) + 1, np.int64), np.zeros(0, np.int64)
        t = hull.simplices
        e = np.unique(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=0)
        e = np.unique(np.concatenate([e, e[:, ::-1]]), axis=0)          # (sorted by vertex, then neighbour)
        first = np.searchsorted(e[:, 0], np.arange(len(V) + 1)).astype(np.int64)
        h = V[hull.vertices]
        starts = hull.vertices[[f(h[:, i]) for i in range(3) for f in (np.argmax, np.argmin)]]
        return starts.astype(np.int64), first, np.ascontiguousarray(e[:, 1], np.int64)
    return _kept(scene, k, "hull edges", make)


def hull_graph(scene):
    """``(starts (S, 6), first (N + 1,), neighbours (E,))``: the hulls' edges of :func:`mesh_vertices`'s rows
    (:func:`_hull_edges`, as rows of its ``V``), per shape the rows to start a climb from along each axis (0 for no
    mesh); kept by the scene."""
    got = scene.cache.get("hull graph")
    if got is None:
        V, rows = mesh_vertices(scene)
        start = np.zeros((len(scene.shapes), 6), np.int64)
        first, nbrs, at = np.zeros(len(V) + 1, np.int64), [], 0
        for k, (a, b) in rows.items():
            s, f, nb = _hull_edges(scene, k)
            start[k] = a + s
            first[a:b + 1] = at + f
            nbrs.append(nb + a)
            at += len(nb)
        adj = np.concatenate(nbrs) if nbrs else np.zeros(0, np.int64)
        got = scene.cache["hull graph"] = (start, first, np.ascontiguousarray(adj, np.int64) if len(adj) else
                                           np.zeros(1, np.int64))
    return got


def mesh_vertices(scene):
    """``(V, ranges)``: the convex hull vertices of the scene's mesh shapes, each in its shape's frame,
    stacked (N, 3), and per mesh shape the rows of its own (``{shape: (start, stop)}``); kept by the scene."""
    got = scene.cache.get("mesh vertices")
    if got is None:
        meshes = [k for k, s in enumerate(scene.shapes) if s.kind == "mesh"]
        blocks = [_hull_vertices(scene, k) for k in meshes]
        ends = np.cumsum([0] + [len(x) for x in blocks])
        V = np.concatenate(blocks) if blocks else np.zeros((0, 3))
        got = scene.cache["mesh vertices"] = (V, {k: (int(ends[i]), int(ends[i + 1])) for i, k in enumerate(meshes)})
    return got


#: qhull's options for coal's hull of a mesh: triangulated facets; where coal refuses that hull (it keeps at
#: most 255 neighbours per vertex: a fan of thin triangles on a flat face has a vertex with more), facets
#: merged whose centrums lie within 10 um, then 100 um, 1 mm of each other (qhull's ``C-n``), which moves
#: the surface by about that (the few vertices inside a merged facet are left out).
HULL_OPTIONS = ("Qt", "Qt C-1e-5", "Qt C-1e-4", "Qt C-1e-3")


#: A mesh whose vertices' smallest principal extent is at most this fraction of their largest is flat
#: (a plate: a hull without volume, which qhull cannot build).
FLAT = 1e-9


def flat_mesh(scene, k):
    """Whether mesh shape ``k``'s vertices lie in a plane (:data:`FLAT`; :func:`_kept`)."""
    def make():
        V = np.asarray(_coal_geometry(scene, k).vertices(), float)
        s = np.linalg.svd(V - V.mean(0), compute_uv=False) if len(V) >= 3 else np.zeros(3)
        return bool(len(s) < 3 or s[2] <= FLAT * s[0])
    return _kept(scene, k, "flat", make)


def _hull_convex(scene, k):
    """coal's convex hull of mesh shape ``k`` (of its BVH's triangles; qhull's options
    :data:`HULL_OPTIONS`, the first coal takes; :func:`_kept`); a ``ValueError`` naming the shape
    where the mesh is flat (:func:`flat_mesh`)."""
    if flat_mesh(scene, k):
        raise ValueError(f"collide: mesh shape {scene.shapes[k].name!r} is flat (its vertices lie in a plane): "
                         f"its convex hull has no volume; give the mesh a thickness, or use a box shape")
    return _kept(scene, k, "convex", lambda: _built_hull(scene, k))


def _built_hull(scene, k):
    """coal's convex hull of mesh shape ``k``, built (:func:`_hull_convex`)."""
    bvh = _coal_geometry(scene, k)
    for options in HULL_OPTIONS:
        try:
            bvh.buildConvexHull(True, options)
            break
        except RuntimeError as e:              # (coal raises a plain RuntimeError, its message names it)
            if "Too many neighbors" not in str(e) or options == HULL_OPTIONS[-1]:
                raise ValueError(f"collide: coal cannot build the convex hull of mesh shape "
                                 f"{scene.shapes[k].name!r} (qhull options {options!r}): {e}") from None
    return bvh.convex


def _distance_request(coal):
    req = coal.DistanceRequest()
    req.gjk_tolerance = req.epa_tolerance = COAL_TOLERANCE
    req.gjk_max_iterations, req.epa_max_iterations = 1000, 1000
    return req


#: The requests of :func:`_coal_distance` (made once: coal reads a request, never writes it).
_REQUESTS: list = []


def _requests(coal):
    if not _REQUESTS:
        _REQUESTS.extend((_distance_request(coal), coal.DistanceRequest()))
    return _REQUESTS


def _coal_distance(coal, gi, Ti, gj, Tj, name_i, name_j):
    """``(signed distance, coal's DistanceResult)`` of two convex shapes: at :data:`COAL_TOLERANCE`, or
    where EPA fails to reach it (it reports -DBL_MAX on a curved shape deep in another) at coal's
    default tolerance."""
    for req in _REQUESTS or _requests(coal):
        res = coal.DistanceResult()
        d = coal.distance(gi, Ti, gj, Tj, req, res)
        a, b = res.getNearestPoint1(), res.getNearestPoint2()
        if -1e300 < d < math.inf and math.isfinite(((a[0] + a[1]) + (a[2] + b[0])) + (b[1] + b[2])):
            return d, res
    raise RuntimeError(f"collide: coal's distance failed between shapes {name_i!r} and {name_j!r} "
                       f"(GJK/EPA did not converge)")


def convex_geometry(scene, k):
    """The coal object that shape ``k`` collides as: a mesh's convex hull (a flat mesh, which has none,
    its triangles), any other shape's own (:func:`_coal_geometry`)."""
    if scene.shapes[k].kind == "mesh" and not flat_mesh(scene, k):
        return _hull_convex(scene, k)
    return _coal_geometry(scene, k)


def closest_pair(scene, coal, k, Ti, Tj, geometries=None):
    """``(d, w_a, w_b, n)`` of scene pair ``k``, two convex shapes (:func:`convex_geometry`, or
    ``geometries`` where given: theirs) placed at coal's transforms ``Ti`` and ``Tj``: the signed
    distance (:func:`_coal_distance`), the witness points on ``a`` and ``b`` (world, (3,)) and the unit
    normal from ``b`` towards ``a``."""
    i, j = scene.index[k].tolist()
    gi, gj = geometries or (convex_geometry(scene, i), convex_geometry(scene, j))
    d, res = _coal_distance(coal, gi, Ti, gj, Tj, scene.shapes[i].name, scene.shapes[j].name)
    # (coal's witness points come as new arrays of floats; its normal as a view of res: negated, a new one)
    return d, res.getNearestPoint1(), res.getNearestPoint2(), -res.normal


def _coal():
    try:
        import coal
    except ImportError:
        raise ImportError("collide: this scene has pairs that need coal (meshes, ellipsoids, cylinders off a "
                          "plane, a capsule against a box): pip install coal") from None
    return coal


def _coal_geometry(scene, k):
    """The coal object of shape ``k`` (:func:`_kept`: a mesh file read once)."""
    return _kept(scene, k, "coal", lambda: _built_geometry(scene.shapes[k]))


def _built_geometry(s):
    """The coal object of shape ``s``, built."""
    coal = _coal()
    size = s.size
    if s.kind == "sphere":
        g = coal.Sphere(size[0])
    elif s.kind in ("capsule", "cylinder"):
        g = (coal.Capsule if s.kind == "capsule" else coal.Cylinder)(size[0], size[1])
    elif s.kind == "box":
        g = coal.Box(*size)
    elif s.kind == "ellipsoid":
        g = coal.Ellipsoid(*size)
    elif s.kind == "plane":
        g = coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0)
    elif s.kind == "hfield":                       # coal's rows run from +y down to -y
        sx, sy, top, base = size
        g = coal.HeightFieldAABB(2 * sx, 2 * sy, np.ascontiguousarray(top * s.heights[::-1]), -base)
    elif s.vertices is not None:
        g = coal.BVHModelOBBRSS()
        g.beginModel(len(s.faces), len(s.vertices))
        g.addVertices(np.asarray(s.vertices) * size)
        g.addTriangles(np.asarray(s.faces, np.int64))
        g.endModel()
    else:
        try:
            g = coal.MeshLoader().load(s.mesh, np.array(size))
        except Exception as e:                     # coal raises its own types for unreadable files
            # (its message after the place in its own sources where it was raised, on one line)
            why = " ".join(str(e).split("message:", 1)[-1].split())
            raise ValueError(f"Scene: shape {s.name!r}: coal cannot read the mesh file {s.mesh!r}: {why}") from None
    g.computeLocalAABB()
    return g


def _bounds(scene):
    """Bounding spheres of the shapes: centres in the shape frames (S, 3), radii (S,) (read-only, kept by the
    scene; a mesh's or a height field's kept as its geometry, :func:`_kept`)."""
    got = scene.cache.get("bounds")
    if got is None:
        c, r = np.zeros((len(scene.shapes), 3)), np.empty(len(scene.shapes))
        for k, s in enumerate(scene.shapes):
            c[k], r[k] = _kept(scene, k, "bounds", lambda: _shape_bounds(scene, k)) if s.kind in ("mesh", "hfield") \
                else (0.0, s.bounding_radius)
        c.setflags(write=False), r.setflags(write=False)
        got = scene.cache["bounds"] = (c, r)
    return got


def _shape_bounds(scene, k):
    """``(centre (3,), radius)`` of mesh or height field shape ``k``: about its frame's origin where its
    vertices are given; a height field's bounding box's (its grid's extent, from its base to its highest point:
    the box coal would bound it by, without building coal's object of a million cells); else coal's bounding
    box's."""
    s = scene.shapes[k]
    r = s.bounding_radius
    if np.isfinite(r):
        return np.zeros(3), r
    if s.kind == "hfield":
        sx, sy, top, base = s.size
        z = top * np.asarray(s.heights, float)
        lo, hi = np.array([-sx, -sy, min(-base, z.min())]), np.array([sx, sy, z.max()])
        return (lo + hi) / 2, float(np.linalg.norm(hi - lo) / 2)
    g = _coal_geometry(scene, k)
    return np.asarray(g.aabb_center, float), float(g.aabb_radius)
