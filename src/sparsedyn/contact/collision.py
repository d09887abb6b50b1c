"""Collision detection in a :class:`~sparsedyn.Scene`: :func:`collide`.

Each checked pair ``(a, b)`` gives zero or more *hits*: a signed distance ``d`` (negative:
penetration), a unit normal ``n`` in world axes pointing from ``b`` towards ``a``, and the point
midway between the two witness points, ``x = (w_a + w_b) / 2`` with ``w_a - w_b = d n`` (``w_a`` on
the surface of ``a``, ``w_b`` on that of ``b``; the point MuJoCo reports).  A pair hits when ``d`` is
below the scene's margin.

Broad phase: bounding spheres.  Narrow phase: closed forms, vectorised over the pairs of one kind,
for sphere-sphere, sphere-capsule, capsule-capsule, sphere-box and sphere, capsule, box and cylinder
against a plane; a mesh against a plane by the vertices of its convex hull (up to five hits: the
deepest and the extreme ones along the plane within the margin); coal (Pinocchio's collision library: GJK and EPA, BVHs for meshes) for the other
pairs.  Where a resting contact is a segment or a face, one pair gives several hits: a capsule or a
cylinder on a plane each end (cylinders: four points of each rim), a box on a plane each corner
within the margin, and, beside coal's closest pair, a box's corners against another box and a
capsule's end spheres against a box (closed forms: a point against a box).  The deepest of a
pair's hits is its closest pair of points (coal's ``distance``).  coal's contact patches are not
used: their points carry the depth of the closest pair, not their own.

On the default (native) road the closed-form pairs against a plane and between spheres and capsules
are one compiled kernel of ``q`` instead (:mod:`~sparsedyn.contact.collision_kernel`: the same closed
forms without branches, in one native call, with a broad phase: :mod:`~sparsedyn.contact.collision_near`
computes only the pairs whose bounds come within the margin); the hits are the same to rounding.  ``sd.use_backend("numpy")`` takes the vectorised closed forms above.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks
from ..algorithms.kinematics import geometry_placements
from ..kernels import native_calls, use_backend
from .collision_kernel import kernel_plan
from .collision_near import collision_candidates_near
from .scene import Scene

__all__ = ["Hits", "collide", "sphere_sphere", "sphere_capsule", "capsule_capsule", "sphere_box", "sphere_plane",
           "capsule_plane", "box_plane", "cylinder_plane", "CLOSED_FORM"]


class Hits(NamedTuple):
    """What :func:`collide` found: ``pairs`` ``[(name_a, name_b)]`` (one per hit), ``points`` (n, 3)
    (world, midway between the witness points), ``normals`` (n, 3) (world, unit, from ``b`` towards
    ``a``), ``distances`` (n,) (signed, negative: penetration) [m], ``pair`` (n,) the index of each
    hit's pair in ``scene.pairs``."""

    pairs: list
    points: np.ndarray
    normals: np.ndarray
    distances: np.ndarray
    pair: np.ndarray

    @property
    def witness_a(self) -> np.ndarray:
        """The witness points on ``a`` (n, 3): ``points + distances / 2 * normals``."""
        return self.points + self.distances[:, None] / 2 * self.normals

    @property
    def witness_b(self) -> np.ndarray:
        """The witness points on ``b`` (n, 3): ``points - distances / 2 * normals``."""
        return self.points - self.distances[:, None] / 2 * self.normals


# --- closed forms: arrays over k pairs; each returns (d, w_a, w_b, n) with n from b towards a --------

def _dot(x, y):
    return np.einsum("...i,...i->...", x, y)


def sphere_sphere(ca, ra, cb, rb):
    """Spheres of centres ``ca``, ``cb`` (k, 3) and radii ``ra``, ``rb`` (k,)."""
    w = ca - cb
    L = np.linalg.norm(w, axis=-1)
    n = np.where(L[:, None] > 0, w / np.where(L > 0, L, 1.0)[:, None], [0.0, 0.0, 1.0])
    return L - ra - rb, ca - ra[:, None] * n, cb + rb[:, None] * n, n


def sphere_capsule(ca, ra, pb, ub, hb, rb):
    """Sphere ``(ca, ra)`` and capsule of centre ``pb``, unit axis ``ub``, half length ``hb``, radius ``rb``."""
    t = np.clip(_dot(ca - pb, ub), -hb, hb)
    return sphere_sphere(ca, ra, pb + t[:, None] * ub, rb)


def capsule_capsule(pa, ua, ha, ra, pb, ub, hb, rb):
    """Two capsules: the closest points of their segments (Ericson, "Real-Time Collision Detection",
    2005, section 5.1.9), then two spheres there."""
    P0, d1 = pa - ha[:, None] * ua, 2 * ha[:, None] * ua
    Q0, d2 = pb - hb[:, None] * ub, 2 * hb[:, None] * ub
    r = P0 - Q0
    a, e, f, c, b = _dot(d1, d1), _dot(d2, d2), _dot(d2, r), _dot(d1, r), _dot(d1, d2)
    den = a * e - b * b
    parallel = den <= 1e-12 * a * e
    s = np.where(parallel, 0.0, np.clip((b * f - c * e) / np.where(parallel, 1.0, den), 0.0, 1.0))
    t = (b * s + f) / e
    s = np.where(t < 0, np.clip(-c / a, 0.0, 1.0), np.where(t > 1, np.clip((b - c) / a, 0.0, 1.0), s))
    t = np.clip(t, 0.0, 1.0)
    return sphere_sphere(P0 + s[:, None] * d1, ra, Q0 + t[:, None] * d2, rb)


def sphere_box(ca, ra, Rb, pb, hb):
    """Sphere ``(ca, ra)`` and box of orientation ``Rb`` (k, 3, 3), centre ``pb``, half extents ``hb`` (k, 3).
    A centre inside the box leaves through the nearest face."""
    x = np.einsum("kji,kj->ki", Rb, ca - pb)              # the centre in the box's axes
    y = np.clip(x, -hb, hb)
    w = x - y
    L = np.linalg.norm(w, axis=-1)
    inside = L <= 0
    depth = hb - np.abs(x)
    i = np.argmin(depth, axis=-1)
    k = np.arange(len(x))
    sign = np.where(x[k, i] < 0, -1.0, 1.0)
    n_in = np.zeros_like(x)
    n_in[k, i] = sign
    on_face = x.copy()
    on_face[k, i] = sign * hb[k, i]
    n = np.where(inside[:, None], n_in, w / np.where(inside, 1.0, L)[:, None])
    yb = np.where(inside[:, None], on_face, y)
    d = np.where(inside, -depth[k, i], L) - ra
    n_w = np.einsum("kij,kj->ki", Rb, n)
    return d, ca - ra[:, None] * n_w, pb + np.einsum("kij,kj->ki", Rb, yb), n_w


def _on_plane(x, r, nb, pb):
    """Points ``x`` (k, 3) with radii ``r`` against the planes ``(nb, pb)``."""
    h = _dot(x - pb, nb)
    return h - r, x - r[:, None] * nb, x - h[:, None] * nb, nb


def sphere_plane(ca, ra, nb, pb):
    """Sphere and the half-space below the plane through ``pb`` of unit normal ``nb``."""
    return _on_plane(ca, ra, nb, pb)


def capsule_plane(pa, ua, ha, ra, nb, pb):
    """Capsule and plane: two hits a pair, one per end, shape (2, k, ...)."""
    ends = np.stack([pa - ha[:, None] * ua, pa + ha[:, None] * ua])
    return _on_plane(ends.reshape(-1, 3), np.tile(ra, 2), np.tile(nb, (2, 1)), np.tile(pb, (2, 1)))


def box_plane(Ra, pa, ha, nb, pb):
    """Box and plane: eight hits a pair, one per corner."""
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    corners = pa + np.einsum("kij,ckj->cki", Ra, signs[:, None, :] * ha)        # (8, k, 3)
    k = len(pa)
    return _on_plane(corners.reshape(-1, 3), np.zeros(8 * k), np.tile(nb, (8, 1)), np.tile(pb, (8, 1)))


def cylinder_plane(Ra, pa, ha, ra, nb, pb):
    """Cylinder and plane: eight hits a pair, four points of each rim: the lowest one (the deepest
    point of the cylinder is the lowest point of a rim), the highest and the two between."""
    u = Ra[:, :, 2]
    w = nb - _dot(nb, u)[:, None] * u
    L = np.linalg.norm(w, axis=-1)
    upright = L <= 1e-12
    w = np.where(upright[:, None], Ra[:, :, 0], w / np.where(upright, 1.0, L)[:, None])
    v = np.cross(u, w)
    pts = [pa + s * ha[:, None] * u + ra[:, None] * d for s in (-1, 1) for d in (-w, w, v, -v)]
    k = len(pa)
    return _on_plane(np.concatenate(pts), np.zeros(8 * k), np.tile(nb, (8, 1)), np.tile(pb, (8, 1)))


def box_box_corners(Ra, pa, ha, Rb, pb, hb):
    """Two boxes: the corners of each against the other (a point against a box), sixteen hits a pair:
    the corners of a face resting on a face (the closest pair, an edge on an edge, is coal's)."""
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    k = len(pa)
    ca = (pa + np.einsum("kij,ckj->cki", Ra, signs[:, None, :] * ha)).reshape(-1, 3)
    cb = (pb + np.einsum("kij,ckj->cki", Rb, signs[:, None, :] * hb)).reshape(-1, 3)
    z = np.zeros(8 * k)
    d1, wa1, wb1, n1 = sphere_box(ca, z, np.tile(Rb, (8, 1, 1)), np.tile(pb, (8, 1)), np.tile(hb, (8, 1)))
    d2, wb2, wa2, n2 = sphere_box(cb, z, np.tile(Ra, (8, 1, 1)), np.tile(pa, (8, 1)), np.tile(ha, (8, 1)))
    return np.concatenate([d1, d2]), np.concatenate([wa1, wa2]), np.concatenate([wb1, wb2]), np.concatenate([n1, -n2])


def capsule_box_ends(pa, ua, ha, ra, Rb, pb, hb):
    """A capsule and a box: the capsule's two end spheres against the box, two hits a pair (a
    capsule lying on a face)."""
    ends = np.concatenate([pa - ha[:, None] * ua, pa + ha[:, None] * ua])
    return sphere_box(ends, np.tile(ra, 2), np.tile(Rb, (2, 1, 1)), np.tile(pb, (2, 1)), np.tile(hb, (2, 1)))


def mesh_plane(V, nb, pb, margin):
    """A mesh of world vertices ``V`` (N, 3) (those of its convex hull suffice) and the plane through
    ``pb`` of unit normal ``nb``: the deepest vertex, and of the vertices within ``margin`` those
    farthest along the plane's two tangents each way (a face resting on the plane: its corners),
    at most five hits."""
    h = (V - pb) @ nb
    close = np.flatnonzero(h < margin)
    if not len(close):
        return np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))
    t1 = np.cross(nb, [1.0, 0, 0] if abs(nb[0]) < 0.9 else [0, 1.0, 0])
    t2 = np.cross(nb, t1)
    along = V[close] @ np.stack([t1, t2], 1)                            # (m, 2)
    pick = np.unique(close[[np.argmin(h[close]), *np.argmin(along, 0), *np.argmax(along, 0)]])
    d = h[pick]
    return d, V[pick], V[pick] - d[:, None] * nb, np.broadcast_to(nb, (len(pick), 3))


def _axis(R):
    return R[:, :, 2]


# (kind_a, kind_b) -> f(Ra, pa, size_a, Rb, pb, size_b) -> (d, w_a, w_b, n), hits per pair
CLOSED_FORM = {
    ("sphere", "sphere"): (lambda Ra, pa, sa, Rb, pb, sb: sphere_sphere(pa, sa[:, 0], pb, sb[:, 0]), 1),
    ("sphere", "capsule"): (lambda Ra, pa, sa, Rb, pb, sb:
                            sphere_capsule(pa, sa[:, 0], pb, _axis(Rb), sb[:, 1] / 2, sb[:, 0]), 1),
    ("capsule", "capsule"): (lambda Ra, pa, sa, Rb, pb, sb:
                             capsule_capsule(pa, _axis(Ra), sa[:, 1] / 2, sa[:, 0], pb, _axis(Rb), sb[:, 1] / 2,
                                             sb[:, 0]), 1),
    ("sphere", "box"): (lambda Ra, pa, sa, Rb, pb, sb: sphere_box(pa, sa[:, 0], Rb, pb, sb / 2), 1),
    ("sphere", "plane"): (lambda Ra, pa, sa, Rb, pb, sb: sphere_plane(pa, sa[:, 0], _axis(Rb), pb), 1),
    ("capsule", "plane"): (lambda Ra, pa, sa, Rb, pb, sb:
                           capsule_plane(pa, _axis(Ra), sa[:, 1] / 2, sa[:, 0], _axis(Rb), pb), 2),
    ("box", "plane"): (lambda Ra, pa, sa, Rb, pb, sb: box_plane(Ra, pa, sa / 2, _axis(Rb), pb), 8),
    ("cylinder", "plane"): (lambda Ra, pa, sa, Rb, pb, sb:
                            cylinder_plane(Ra, pa, sa[:, 1] / 2, sa[:, 0], _axis(Rb), pb), 8),
}


# Pairs that coal answers, and the closed-form hits added to coal's closest pair where it is within the margin
FEATURES = {
    ("box", "box"): (lambda Ra, pa, sa, Rb, pb, sb: box_box_corners(Ra, pa, sa / 2, Rb, pb, sb / 2), 16),
    ("capsule", "box"): (lambda Ra, pa, sa, Rb, pb, sb:
                         capsule_box_ends(pa, _axis(Ra), sa[:, 1] / 2, sa[:, 0], Rb, pb, sb / 2), 2),
}


# --- the query ------------------------------------------------------------------------------------

_NEAR, _NONE, _F64 = collision_candidates_near.__name__, {}, np.dtype(float)


def collide(scene, q) -> Hits:
    """The hits of ``scene`` at the configuration ``q`` (nq,) (a :class:`Hits`; module docstring).

    >>> import numpy as np, sparsedyn as sd
    >>> b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0,
    ...                                       rot_inertia=np.eye(3) * 0.004)
    >>> g = sd.Geometry("ball", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)), "sphere", (0.1,), "collision")
    >>> scene = sd.Scene(b.build().with_geometry(g), world=[sd.Shape("plane", name="floor")])
    >>> hits = sd.collide(scene, [0, 0, 0.09, 0, 0, 0, 1])
    >>> hits.pairs, hits.distances.round(12).tolist(), hits.normals.tolist()
    ([('ball', 'floor')], [-0.01], [[0.0, 0.0, 1.0]])
    """
    if not isinstance(scene, Scene):
        raise TypeError(f"collide: scene must be a sd.Scene, got {type(scene).__name__}")
    model = scene.model
    if not (type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,)):
        q = _checks.configuration(model, q)       # else the kernel checks it (one native call)
        if q.ndim != 1:
            raise ValueError(f"collide: q must be one configuration of shape (nq,) = ({model.nq},), got shape "
                             f"{q.shape}")
    out = []                                       # (pair indices, d, w_a, w_b, n) blocks
    inside = None
    if use_backend.current() != "numpy":
        kp = kernel_plan(scene)
        if kp.pairs:
            # the pairs' candidates within the margin (a broad phase leaves out the others' narrow phase);
            # the ready native callable straight away (as the public function would, less its frame)
            f = (native_calls(model) or _NONE).get(_NEAR)
            c = f(q, kp.shapes, kp.cutoff, kp.pairs) if f is not None else \
                collision_candidates_near(model, q, kp.shapes, kp.cutoff, kp.pairs)
            sel = np.less(c[:, 0], kp.cutoff).nonzero()[0]         # cutoff: the margin as an array (faster)
            c, k = c.take(sel, 0), kp.pair.take(sel)
            d, x, n = c[:, 0], c[:, 1:4], c[:, 4:7]
            if kp.complete:                        # the kernel's hits are the vectorised road's (MIN_FEATURE)
                names = scene.pair_names
                return tuple.__new__(Hits, ([names[i] for i in k.tolist()], x, n, d, k))    # Hits(...), less a call
            h = d[:, None] / 2 * n
            out.append((k, d, x + h, x - h, n))
            inside = kp.inside
    R, p = placements(scene, q)
    plan = _plan(scene)
    if len(scene.index):
        ia, ib, c, r = plan["ia"], plan["ib"], plan["c"], plan["r"]
        ca, cb = p[ia] + np.einsum("kij,kj->ki", R[ia], c[ia]), p[ib] + np.einsum("kij,kj->ki", R[ib], c[ib])
        with np.errstate(invalid="ignore"):
            near = np.linalg.norm(ca - cb, axis=-1) - r[ia] - r[ib] < scene.margin
        near |= ~np.isfinite(r[ia] + r[ib])
        if inside is not None:
            near &= ~inside                        # those are the kernel's
        for key, ks, sa, sb in plan["groups"]:
            m = near[ks]
            if not m.any():
                continue
            if key in CLOSED_FORM:
                out.append(_closed_form(scene, key, ks[m], R, p, sizes=(sa[m], sb[m])))
            elif set(key) == {"mesh", "plane"}:
                out.append(_mesh_plane_pairs(scene, ks[m], R, p))
            elif "hfield" in key:
                from .heightfield import hfield_pairs
                out.append(hfield_pairs(scene, ks[m], R, p))
            else:
                out.append(_coal_pairs(scene, ks[m], R, p))
    return _hits(scene, out)


def _plan(scene):
    """What :func:`collide` needs of a scene at every call, computed once and kept by the scene: the
    pairs' shape indices, bounding spheres, the pairs grouped by kinds with their sizes."""
    plan = scene.cache.get("plan")
    if plan is not None:
        return plan
    idx = scene.index
    kinds = [s.kind for s in scene.shapes]
    by_key: dict = {}                              # (kinds of the pair function, the pair's order) -> pairs
    for k, (i, j) in enumerate(idx):
        key = (kinds[i], kinds[j])
        swap = key not in CLOSED_FORM and key[::-1] in CLOSED_FORM
        by_key.setdefault((key[::-1] if swap else key, swap), []).append(k)
    groups = []
    for (key, swap), ks in by_key.items():
        ks = np.array(ks, int)
        sa = sb = None
        if key in CLOSED_FORM:
            ia, ib = (idx[ks, 1], idx[ks, 0]) if swap else (idx[ks, 0], idx[ks, 1])
            sa = np.array([scene.shapes[i].size for i in ia]).reshape(len(ks), -1)
            sb = np.array([scene.shapes[i].size for i in ib]).reshape(len(ks), -1)
        groups.append((key, ks, sa, sb))
    c, r = _bounds(scene)
    plan = {"ia": idx[:, 0], "ib": idx[:, 1], "c": c, "r": r, "groups": groups}
    scene.cache["plan"] = plan
    return plan


def placements(scene, q):
    """World poses of the scene's shapes at ``q``: ``R`` (S, 3, 3), ``p`` (S, 3)."""
    Rg, pg = geometry_placements(scene.model, q, "collision")
    n = len(Rg)
    world = scene.shapes[n:]
    R = np.concatenate([Rg, np.array([s.R for s in world]).reshape(-1, 3, 3)])
    p = np.concatenate([pg, np.array([s.p for s in world]).reshape(-1, 3)])
    return R, p


def _bounds(scene):
    """Bounding spheres of the shapes: centres in the shape frames (S, 3), radii (S,)."""
    c = np.zeros((len(scene.shapes), 3))
    r = np.array([s.bounding_radius for s in scene.shapes])
    for k, s in enumerate(scene.shapes):
        if s.kind in ("mesh", "hfield") and not np.isfinite(r[k]):
            g = _coal_geometry(scene, k)
            c[k], r[k] = np.asarray(g.aabb_center, float), float(g.aabb_radius)
    return c, r


def _closed_form(scene, key, ks, R, p, table=None, sizes=None):
    """The hits of the pairs ``ks`` by the closed form of ``key``; all pairs in one order, ``key`` or
    its reverse (a shape pair of two equal kinds is in ``key``'s order)."""
    f, per = (CLOSED_FORM if table is None else table)[key]
    idx = scene.index[ks]
    swap = (scene.shapes[idx[0, 0]].kind, scene.shapes[idx[0, 1]].kind) != key
    ia, ib = (idx[:, 1], idx[:, 0]) if swap else (idx[:, 0], idx[:, 1])
    if sizes is None:
        sizes = (np.array([scene.shapes[i].size for i in ia]), np.array([scene.shapes[i].size for i in ib]))
    d, wa, wb, n = f(R[ia], p[ia], sizes[0], R[ib], p[ib], sizes[1])
    n = np.broadcast_to(n, wa.shape)
    if swap:
        wa, wb, n = wb, wa, -n
    return np.tile(ks, per), d, wa, wb, n


def _hull_vertices(scene, k):
    """The vertices (V, 3) of the convex hull of mesh shape ``k`` in its frame, scaled; kept by the scene."""
    key = ("hull", k)
    cache = scene.cache
    if key not in cache:
        from scipy.spatial import ConvexHull, QhullError
        s = scene.shapes[k]
        V = np.asarray(s.vertices, float) * s.size if s.vertices is not None else \
            np.asarray(_coal_geometry(scene, k).vertices(), float)
        try:
            V = V[ConvexHull(V).vertices]
        except (QhullError, ValueError):           # flat or degenerate: every vertex
            pass
        cache[key] = V
    return cache[key]


def _mesh_plane_pairs(scene, ks, R, p):
    """Hits of mesh-plane pairs ``ks`` (:func:`mesh_plane`, in the pair's order)."""
    blocks = []
    for k in ks:
        i, j = scene.index[k]
        swap = scene.shapes[i].kind == "plane"
        m, pl = (j, i) if swap else (i, j)
        d, wa, wb, n = mesh_plane(_hull_vertices(scene, m) @ R[m].T + p[m], R[pl][:, 2], p[pl], scene.margin)
        if swap:
            wa, wb, n = wb, wa, -n
        blocks.append((np.full(len(d), k), d, wa, wb, n))
    return tuple(np.concatenate(x) for x in zip(*blocks))


def _hits(scene, blocks):
    if not blocks:
        z = np.zeros((0, 3))
        return Hits([], z, z.copy(), np.zeros(0), np.zeros(0, int))
    k, d, wa, wb, n = (np.concatenate(x) for x in zip(*blocks))
    keep = np.flatnonzero(d < scene.margin)
    # one hit per point: coal's closest pair is often one of the closed-form corners (a repeated
    # contact makes the contact problem degenerate); the deeper one is kept
    keep = keep[np.argsort(d[keep], kind="stable")]
    _, first = np.unique(np.column_stack([k[keep], np.round(wa[keep] / SAME_POINT)]), axis=0, return_index=True)
    keep = np.sort(keep[first])
    keep = keep[np.argsort(k[keep], kind="stable")]
    k, d, wa, wb, n = k[keep], d[keep], wa[keep], wb[keep], n[keep]
    names = scene.pair_names
    return Hits([names[x] for x in k], (wa + wb) / 2, n, d, k)


#: Hits of one pair whose witness points on ``a`` round to the same multiple of this [m] are one hit.
SAME_POINT = 1e-7
#: The tolerance of coal's GJK and EPA iterations here (coal's default, 1e-6, leaves witness points and
#: depths that far from the closed forms) [m], and of the test that a feature is as deep as coal's pair.
COAL_TOLERANCE = 1e-11
SAME_DEPTH = 10 * COAL_TOLERANCE


def _distance_request(coal):
    req = coal.DistanceRequest()
    req.gjk_tolerance = req.epa_tolerance = COAL_TOLERANCE
    req.gjk_max_iterations, req.epa_max_iterations = 1000, 1000
    return req


def _coal_distance(coal, gi, Ti, gj, Tj, name_i, name_j):
    """``(signed distance, coal's DistanceResult)`` of two convex shapes: at :data:`COAL_TOLERANCE`, or
    where EPA fails to reach it (it reports -DBL_MAX on a curved shape deep in another) at coal's
    default tolerance."""
    for req in (_distance_request(coal), coal.DistanceRequest()):
        res = coal.DistanceResult()
        d = coal.distance(gi, Ti, gj, Tj, req, res)
        if -1e300 < d < np.inf and np.all(np.isfinite(res.getNearestPoint1())) and \
                np.all(np.isfinite(res.getNearestPoint2())):
            return d, res
    raise RuntimeError(f"collide: coal's distance failed between shapes {name_i!r} and {name_j!r} "
                       f"(GJK/EPA did not converge)")


# --- coal -----------------------------------------------------------------------------------------

def _coal():
    try:
        import coal
    except ImportError:
        raise ImportError("collide: this scene has pairs that need coal (meshes, ellipsoids, box-box, cylinders "
                          "off a plane): pip install coal") from None
    return coal


def _coal_geometry(scene, k):
    """The coal object of shape ``k``, built on first use and kept by the scene."""
    cache = scene.cache
    if k in cache:
        return cache[k]
    coal, s = _coal(), scene.shapes[k]
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
            raise ValueError(f"Scene: shape {s.name!r}: coal cannot read the mesh file {s.mesh!r}: {e}") from None
    g.computeLocalAABB()
    cache[k] = g
    return g


def _coal_pairs(scene, ks, R, p):
    """Hits of pairs ``ks`` from coal: two convex shapes, ``distance`` (signed: GJK, then EPA where
    they overlap) for the closest pair, and for a box the closed-form hits of the features that rest
    on a face (:data:`FEATURES`); a mesh (a BVH of triangles, as Pinocchio loads it), ``collide`` with
    the margin as coal's security margin: up to four triangle contacts, each with its own signed distance."""
    coal = _coal()
    tf = [coal.Transform3s(R[k], p[k]) for k in range(len(p))]
    blocks, near = [], []
    for k in ks:
        i, j = scene.index[k]
        gi, gj = _coal_geometry(scene, i), _coal_geometry(scene, j)
        if isinstance(gi, coal.BVHModelBase) or isinstance(gj, coal.BVHModelBase):
            # a BVH's distance query is slow (milliseconds): collide within the margin instead
            creq = coal.CollisionRequest()
            creq.num_max_contacts, creq.security_margin = 4, scene.margin
            cres = coal.CollisionResult()
            got = [(c.getNearestPoint1(), c.getNearestPoint2(), c.normal, c.penetration_depth)
                   for c in cres.getContacts()] if coal.collide(gi, tf[i], gj, tf[j], creq, cres) else []
        else:
            d, dres = _coal_distance(coal, gi, tf[i], gj, tf[j], scene.shapes[i].name, scene.shapes[j].name)
            got = [(dres.getNearestPoint1(), dres.getNearestPoint2(), dres.normal, d)] if d < scene.margin else []
            near += [k] if got else []
        for w1, w2, nc, d in got:
            blocks.append((k, d, np.array(w1, float), np.array(w2, float), -np.array(nc, float)))
    kinds = [s.kind for s in scene.shapes]
    extra = []
    for key in FEATURES:
        for order in {key, key[::-1]}:             # one call per order of the pair's kinds
            mine = [k for k in near if (kinds[scene.index[k][0]], kinds[scene.index[k][1]]) == order]
            if mine:
                extra.append(_closed_form(scene, key, np.array(mine), R, p, FEATURES))
    if extra:
        # coal's closest pair is left out where a feature is as deep (within coal's GJK tolerance):
        # it lies on the face the features hold, and a repeated contact makes the problem degenerate
        kf, df = (np.concatenate(x) for x in list(zip(*extra))[:2])
        deepest = {k: df[kf == k].min() for k in set(kf.tolist())}
        blocks = [b for b in blocks if not (b[0] in deepest and deepest[b[0]] <= b[1] + SAME_DEPTH)]
    out = ([tuple(np.array(x) for x in zip(*blocks))] if blocks else []) + extra
    if not out:
        return np.zeros(0, int), np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))
    return tuple(np.concatenate(x) for x in zip(*out))
