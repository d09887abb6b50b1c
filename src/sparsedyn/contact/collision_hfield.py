"""A shape against a height field in a :class:`~sparsedyn.Scene`: :func:`hfield_pairs`, collide's narrow
phase for such pairs (:mod:`~sparsedyn.contact.collision` for the hits' conventions), and
:func:`hfield_rows`, the same hits as rows of a step's contact data (a robot's shapes on a world
height field: :func:`field_pairs`), so that such a scene steps in one native call after them."""

from __future__ import annotations

import numpy as np

from ..kernels import use_backend
from ..model.spatial import cross3
from .closed_forms import (_EDGE_AXIS, _EDGE_START, PARALLEL_EDGES, _segments, sphere_box, sphere_capsule,
                           sphere_cylinder, sphere_sphere)
from .collision_coal import SAME_DEPTH, _bounds, _hull_vertices, one_per_point
from .collision_near import free_rows, hit_rows
from .ellipsoid import point_ellipsoid
from .ellipsoid_field import ellipsoid_faces, segment_ellipsoid
from .heightfield import cylinder_faces, hfield_grid, hfield_triangles, points_on_hfield, segment_rims
from .heightfield_c import NO_HITS, field_grid, group_on_hfield_c
from .heightfield_more_c import KIND_CODES, more_on_hfield_c

__all__ = ["hfield_pairs", "hfield_rows", "field_pairs"]

#: Rows a box's, a capsule's, a cylinder's or an ellipsoid's pair with a height field keeps beside its
#: features' and faces' for grid points and edges pressing into it (a step with more falls back to the
#: general road).
GRID_ROWS = 8
#: Rows an ellipsoid's pair with a height field keeps for its support point on the faces, and a cylinder's for
#: its rim points on them.
FACE_ROWS = {"ellipsoid": 4, "cylinder": 8}


def _features(scene, k):
    """The spheres ``(centres (m, 3), radii (m,))`` in shape ``k``'s frame whose contacts with a height
    field are its resting contacts: a sphere, a capsule's end spheres, a box's corners, a mesh's convex
    hull vertices; none for an ellipsoid or a cylinder (their points on each face, :func:`_more_hits`)."""
    s = scene.shapes[k]
    z = np.zeros(3)
    if s.kind == "sphere":
        return z[None], np.array([s.size[0]])
    if s.kind == "capsule":
        return np.array([[0, 0, -s.size[1] / 2], [0, 0, s.size[1] / 2]]), np.full(2, s.size[0])
    if s.kind == "box":
        return np.array([[x, y, w] for x in (-1, 1) for y in (-1, 1) for w in (-1, 1)]) * np.array(s.size) / 2, \
            np.zeros(8)
    if s.kind == "mesh":
        V = _hull_vertices(scene, k)
        return V, np.zeros(len(V))
    return np.zeros((0, 3)), np.zeros(0)


def hfield_pairs(scene, ks, R, p, margin):
    """Hits of pairs ``ks`` of a shape and a height field within ``margin`` (a number, or one per pair): each of
    the shape's features (:func:`_features`) against the surface's triangles (:func:`_feature_hits`: the broad
    test :func:`_near`, then :func:`~sparsedyn.contact.heightfield.points_on_hfield`, the pairs on a field in one
    C call where built, :mod:`~sparsedyn.contact.heightfield_c`, else NumPy), and the hits of :func:`_more_hits`
    (in one C call where built): an ellipsoid's support point and a cylinder's rim points on the faces, and the
    grid points and the triangles' edges pressing into a box, a capsule, a cylinder or an ellipsoid deeper than
    every other hit (a bump or a ridge under a face).  A shape whose lowest point lies higher than ``margin``
    above every grid point under it has none (:func:`_near`).  coal's ``HeightField`` contacts are not used:
    coal 3.0 reports their depth as ``-|d|`` whichever the side, and measures a cell as a prism whose side walls
    are not the surface.  No hit: ``NO_HITS`` (read-only)."""
    ks = np.asarray(ks, int).reshape(-1)
    reach = np.asarray(margin, float)
    reach = np.full(len(ks), float(reach)) if reach.ndim == 0 else reach.reshape(-1)
    field, a, groups = _plan(scene, ks)
    blocks = []
    for f, at, group in groups:
        near, (o, d, wa, wb, n) = _feature_hits(scene, group, R, p, reach[at])
        if not near:
            continue
        at = at[[i for i, _ in near]]                              # (the pairs near the field)
        sa, cut_k, pair = a[at], reach[at], ks[at][o]
        more = _more_kinds(scene)[sa]
        if not more.any():
            blocks.append((pair, d, wa, wb, n))
            continue
        Rl, pl = R[f].T @ R[sa], (p[sa] - p[f]) @ R[f]            # the shapes in the height field's frame
        grid, z, _, _ = _field(scene, f)
        deepest = np.full(len(at), np.inf)
        np.minimum.at(deepest, o, d)
        ts = np.flatnonzero(more)
        t, *hits = _more_hits(scene, sa, ts, [near[x][1] for x in ts.tolist()], grid.reshape(z.shape + (3,)),
                              Rl, pl, R, p, f, cut_k, deepest)
        hits = hits[0], *_flipped(field[at][t][:, None], *hits[1:])
        order = np.argsort(np.concatenate([2 * o, 2 * t + 1]), kind="stable")      # (a pair's features, then more)
        blocks.append(tuple(np.concatenate([x, y])[order] for x, y in zip((pair, d, wa, wb, n), (ks[at][t], *hits))))
    if len(blocks) < 2:
        return blocks[0] if blocks else NO_HITS
    return tuple(np.concatenate(x) for x in zip(*blocks))


def _feature_hits(scene, group, R, p, cut):
    """``(near, (t, d, w_a, w_b, n))`` of the shapes ``sa`` (m,) of ``group`` (:func:`_group`) on its height
    field ``f`` (world placements ``R`` (S, 3, 3), ``p`` (S, 3); cutoffs ``cut`` (m,)): :func:`_near`'s list
    of those near it, and their features' (:func:`_features`) hits within their cutoffs
    (:func:`~sparsedyn.contact.heightfield.points_on_hfield` in the field's frame), in the world as their
    pairs order them (``t`` (h,) each one's shape's position in ``near``; ``w_a`` on the pair's first
    shape, ``n`` towards it; the shapes in turn, each one's features in turn).  Off the NumPy road, in one
    C call where built (:func:`~sparsedyn.contact.heightfield_c.group_on_hfield_c`: the window's own
    highest point)."""
    f, sa, flip, each, table, features = group
    hf, (_, _, top, grid) = scene.shapes[f], _field(scene, f)
    if use_backend.current() != "numpy":
        got = group_on_hfield_c(grid, top, R, p, each, cut, table, features)
        if got is not None:
            return got
    near = _near(scene, f, sa, R, p, cut)
    if not near:
        return near, (np.zeros(0, int), np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)))
    kept = [i for i, _ in near]
    sk = sa[kept]
    Rl, pl = R[f].T @ R[sk], (p[sk] - p[f]) @ R[f]                  # the shapes in the height field's frame
    got = [_features(scene, x) for x in sk.tolist()]
    owner = np.repeat(np.arange(len(sk)), [len(x[1]) for x in got])
    C = np.concatenate([C @ Rl[t].T + pl[t] for t, (C, _) in enumerate(got)]).reshape(-1, 3)
    r, reach = np.concatenate([x[1] for x in got]), cut[kept][owner]
    idx, d, wa, wb, n = points_on_hfield(hf.size, hf.heights, _triangles(scene, f), C, r, reach)
    wa, wb, n = wa @ R[f].T + p[f], wb @ R[f].T + p[f], n @ R[f].T              # (world)
    return near, (owner[idx], d, *_flipped(flip[kept][owner[idx]][:, None], wa, wb, n))


def _flipped(flip, wa, wb, n):
    """``(w_a, w_b, n)`` of hits with a shape first, as their pairs order them: swapped and the normal
    reversed where ``flip`` (k, 1) (the pair's first shape is the height field)."""
    if not flip.any():                             # (a robot's shapes on a world field: the shape first)
        return wa, wb, n
    return np.where(flip, wb, wa), np.where(flip, wa, wb), np.where(flip, -n, n)


def _plan(scene, ks):
    """``(field first (K,) bool, the shape of each pair (K,), [(height field, its pairs' positions in ks, their
    :func:`_group`)])`` of the pairs ``ks`` (K,), kept by the scene."""
    key = ("hfield pairs", ks.tobytes())
    got = scene.cache.get(key)
    if got is None:
        field = np.array([scene.shapes[i].kind == "hfield" for i in scene.index[ks, 0].tolist()], bool)
        a, h = (np.where(field, scene.index[ks, x], scene.index[ks, 1 - x]) for x in (1, 0))
        at = [(f, np.flatnonzero(h == f)) for f in np.unique(h).tolist()]
        got = scene.cache[key] = (field, a, [(f, x, _group(scene, f, a[x], field[x])) for f, x in at])
    return got


def _field(scene, h):
    """``(grid points (nrow ncol, 3), heights z (nrow, ncol), the highest, the grid as the C routine takes it)``
    of height field shape ``h`` in its frame, kept by the scene."""
    key, hf = ("height field grid", h), scene.shapes[h]
    if key not in scene.cache:
        x, y, z = hfield_grid(hf.size, hf.heights)
        X, Y = np.meshgrid(x, y)
        scene.cache[key] = (np.stack([X, Y, z], -1).reshape(-1, 3), z, z.max(), field_grid(x, y, z, hf.size))
    return scene.cache[key]


def _triangles(scene, h):
    """The triangles (T, 3, 3) of height field shape ``h`` in its frame (the NumPy road's; nine numbers per
    triangle, two per cell: made when that road first asks), kept by the scene."""
    key, hf = ("height field triangles", h), scene.shapes[h]
    if key not in scene.cache:
        scene.cache[key] = hfield_triangles(hf.size, hf.heights)
    return scene.cache[key]


def _near(scene, h, a, R, p, cut):
    """``[(i, (i0, i1, j0, j1))]``: of the shapes ``a`` (m,) (world placements ``R`` (S, 3, 3), ``p`` (S,
    3)), those that may have a hit within ``cut`` (m,) of height field ``h``, with the rows ``i0:i1``
    and columns ``j0:j1`` of the grid points within their bounding sphere and ``cut`` and a cell of it
    in x and y.  The others have none: a shape's lowest point (its bounding sphere's centre ``o`` in the
    field's frame less :func:`_reach_down`) more than ``cut`` above the highest of those grid points
    (every surface point and grid point that a feature's or a grid point's hit can reach: the
    surface's triangles lie below their corners), first
    against the field's highest point, then the highest of the blocks of :data:`BLOCK` grid points
    the window meets (:func:`_block_max`, at least the window's), then the window's own, or off the
    grid by as much."""
    (sx, sy, _, _), (_, z, top, _) = scene.shapes[h].size, _field(scene, h)
    c, rad = _bounds(scene)
    o, rb = (p[a] + np.einsum("mij,mj->mi", R[a], c[a]) - p[h]) @ R[h], rad[a]
    maybe = o[:, 2] - rb - top < cut                   # (the bounding sphere first: cheap)
    if not maybe.any():
        return []
    down = rb.copy()
    down[maybe] = _reach_down(scene, a[maybe], R[a[maybe]], R[h][:, 2], rb[maybe])
    maybe &= o[:, 2] - down - top < cut
    if not maybe.any():
        return []
    nrow, ncol = z.shape
    dx, dy = 2 * sx / (ncol - 1), 2 * sy / (nrow - 1)
    w = rb + cut + max(dx, dy)
    maybe &= (o[:, 0] + w >= -sx) & (o[:, 0] - w <= sx) & (o[:, 1] + w >= -sy) & (o[:, 1] - w <= sy)
    i = np.flatnonzero(maybe)
    j0, j1 = (np.clip(np.floor((o[i, 0] + sx + s * w[i]) / dx), 0, ncol - 1).astype(int) for s in (-1, 1))
    i0, i1 = (np.clip(np.floor((o[i, 1] + sy + s * w[i]) / dy), 0, nrow - 1).astype(int) for s in (-1, 1))
    i1, j1 = np.minimum(i1 + 1, nrow - 1), np.minimum(j1 + 1, ncol - 1)      # (the window's last grid points)
    low = (o[i, 2] - down[i] - cut[i]).tolist()
    keep = np.flatnonzero(low < _block_max(scene, h, z, i0, i1, j0, j1)).tolist()
    return [(i[k], (i0[k], i1[k] + 1, j0[k], j1[k] + 1)) for k in keep if low[k] < z[i0[k]:i1[k] + 1, j0[k]:j1[k] + 1].max()]


def _reach_down(scene, a, R, up, rb):
    """How far each shape ``a`` (m,) (orientations ``R`` (m, 3, 3), world) reaches below its bounding
    sphere's centre along the unit vector ``up`` (3,) (its support along ``-up``): a sphere's radius, a
    capsule's ``r + h |u . up|``, a box's ``sum h_i |R_i . up|``, a cylinder's ``h |u . up| + r sqrt(1 -
    (u . up)^2)``, an ellipsoid's ``|D R^T up|``; a mesh's bounding radius ``rb`` (m,).  Each is ``s + L . c +
    r_c sqrt(1 - c_z^2) + |E c|`` with ``c = |R^T up|`` and the shape's coefficients (:func:`_supports`)."""
    coef, other = _supports(scene)
    k = coef[a]
    c = np.abs(np.einsum("mij,i->mj", R, up))                   # |R_j . up|, each axis of each shape
    c[:, 2] = np.minimum(c[:, 2], 1.0)
    out = k[:, 0] + (k[:, 1:4] * c).sum(1) + k[:, 4] * np.sqrt(1.0 - c[:, 2] * c[:, 2]) + \
        np.sqrt(((k[:, 5:8] * c) ** 2).sum(1))
    return np.minimum(np.where(other[a], rb, out), rb)


def _supports(scene):
    """``(coefficients (S, 8) [s, L (3), r_c, E (3)], other (S,) bool)`` of :func:`_reach_down`'s support of
    each shape (a sphere ``s = r``; a capsule ``s = r``, ``L = (0, 0, h)``; a box ``L = h``; a cylinder ``L =
    (0, 0, h)``, ``r_c = r``; an ellipsoid ``E = D``), ``other`` where it has none (its bounding radius);
    kept by the scene."""
    got = scene.cache.get("hfield supports")
    if got is None:
        coef, other = np.zeros((len(scene.shapes), 8)), np.zeros(len(scene.shapes), bool)
        for i, x in enumerate(scene.shapes):
            e = tuple(x.size)
            if x.kind in ("sphere", "capsule"):
                coef[i, 0], coef[i, 3] = e[0], (e[1] / 2 if x.kind == "capsule" else 0.0)
            elif x.kind == "box":
                coef[i, 1:4] = np.array(e) / 2
            elif x.kind == "cylinder":
                coef[i, 3], coef[i, 4] = e[1] / 2, e[0]
            elif x.kind == "ellipsoid":
                coef[i, 5:8] = e
            else:
                other[i] = True
        got = scene.cache["hfield supports"] = (coef, other)
    return got


def _group(scene, f, sa, flip):
    """``(f, sa, flip, each, table, features)``: the shapes ``sa`` (m,) on height field ``f`` (``flip`` (m,):
    where the field is their pair's first shape) as :func:`~sparsedyn.contact.heightfield_c.group_on_hfield_c`
    takes them: ``each`` (m + 1,) the field and the shapes; ``table`` (m, 16), its address and the call's buffers
    per thread: each shape's bounding sphere's centre (its frame) and radius, its :func:`_supports` coefficients,
    1 where it has none, ``flip``, its first feature and their count in ``features`` (the table (N, 4) of their
    :func:`_features`, centre and radius, and its address)."""
    each = [_features(scene, i) for i in sa.tolist()]
    rows = np.concatenate([np.column_stack([C, r]) for C, r in each]).reshape(-1, 4)
    count = np.array([len(r) for _, r in each])
    (c, rad), (coef, other) = _bounds(scene), _supports(scene)
    table = np.column_stack([c[sa], rad[sa], coef[sa], other[sa], flip, np.cumsum(count) - count, count])
    table.flags.writeable = rows.flags.writeable = False             # (kept by the scene's plan, shared by calls)
    return f, sa, flip, np.concatenate([[f], sa]), (table, table.ctypes.data, {}), (rows, rows.ctypes.data)


def _more_kinds(scene):
    """Where each of the scene's shapes (S,) is of a kind of :data:`_MORE`; kept by the scene."""
    got = scene.cache.get("hfield more")
    if got is None:
        got = scene.cache["hfield more"] = np.array([x.kind in _MORE for x in scene.shapes], bool)
    return got


def _more_table(scene):
    """The scene's shapes' (S, 5) kind codes (:data:`~sparsedyn.contact.heightfield_more_c.KIND_CODES`, -1:
    none), :func:`_sizes` and bounding radii, kept by the scene."""
    got = scene.cache.get("hfield more table")
    if got is None:
        codes = [KIND_CODES.get(x.kind, -1) for x in scene.shapes]
        got = scene.cache["hfield more table"] = np.column_stack([codes, _sizes(scene), _bounds(scene)[1]])
        got.flags.writeable = False
    return got


def _sizes(scene):
    """The scene's shapes' sizes (S, 3), padded with zeros (a mesh's and a height field's: zeros); the scene's."""
    got = scene.cache.get("hfield sizes")
    if got is None:
        got = scene.cache["hfield sizes"] = np.zeros((len(scene.shapes), 3))
        for i, x in enumerate(scene.shapes):
            if x.kind not in ("mesh", "hfield"):
                got[i, :len(x.size)] = x.size
    return got


#: The side of the blocks of grid points whose highest :func:`_block_max` keeps.
BLOCK = 8


def _block_max(scene, h, z, i0, i1, j0, j1):
    """At least the highest grid point of each window of rows ``i0..i1`` and columns ``j0..j1`` (each
    (m,), inclusive) of height field ``h``'s heights ``z``: the highest of the blocks of :data:`BLOCK`
    by :data:`BLOCK` grid points it meets (at most two a side), or, where it meets more, its own."""
    key = ("hfield blocks", h)
    blocks = scene.cache.get(key)
    if blocks is None:
        nr, nc = -(-z.shape[0] // BLOCK), -(-z.shape[1] // BLOCK)
        pad = np.full((nr * BLOCK, nc * BLOCK), -np.inf)
        pad[:z.shape[0], :z.shape[1]] = z
        blocks = scene.cache[key] = pad.reshape(nr, BLOCK, nc, BLOCK).max((1, 3))
    a0, a1, b0, b1 = i0 // BLOCK, i1 // BLOCK, j0 // BLOCK, j1 // BLOCK
    out = np.maximum.reduce([blocks[a0, b0], blocks[a0, b1], blocks[a1, b0], blocks[a1, b1]])
    for k in np.flatnonzero((a1 - a0 > 1) | (b1 - b0 > 1)).tolist():        # (a wide window: its own)
        out[k] = z[i0[k]:i1[k] + 1, j0[k]:j1[k] + 1].max()
    return out


#: The kinds whose hits against a height field are more than their features' (:func:`_more_hits`).
_MORE = ("box", "capsule", "cylinder", "ellipsoid")


def _more_hits(scene, sa, ts, windows, grid, Rl, pl, R, p, f, cut, deepest):
    """``(t, d, w_a, w_b, n)`` (world, ``a`` the shape, ``n`` from the field towards it; ``t`` the
    position in ``sa`` of each hit's shape) of the shapes ``sa[ts]`` (boxes, capsules, cylinders,
    ellipsoids; near height field ``f``, each over the ``windows`` of grid rows and columns ``(i0, i1,
    j0, j1)``) beside their features' hits (the deepest of shape ``sa[x]``'s at ``deepest[x]``): an
    ellipsoid's support point or a cylinder's rim points on the faces of its window's triangles
    (:func:`_face_hits`); the window's grid points against a box, a capsule, a cylinder or an ellipsoid,
    and its triangles' edges against a box's edges (:func:`_box_edges`), a capsule's or a cylinder's
    side (:func:`_capsule_edges`), a cylinder's rims (:func:`_rim_edges`) or an ellipsoid
    (:func:`_ellipsoid_hits`) where the edge is a ridge whose least distance to it lies inside it
    (:func:`_local_least`); those within ``cut[x]`` and deeper than every feature and face by
    :data:`SAME_DEPTH` (a bump or a ridge pressing into it).  ``grid`` (nrow, ncol, 3)
    (the NumPy road's; its triangles :func:`_triangles`), ``Rl`` and ``pl`` (the shapes, (m, 3, 3) and (m, 3)) in
    the field's frame; ``R``, ``p`` every shape's world placement.  Off the NumPy road in one C call where built
    (:func:`~sparsedyn.contact.heightfield_more_c.more_on_hfield_c`)."""
    Rh, ph = R[f], p[f]
    if use_backend.current() != "numpy":
        got = more_on_hfield_c(_field(scene, f)[3], (Rh, ph), _more_table(scene)[sa[ts]], ts, windows, (Rl, pl), cut,
                               deepest)
        if got is not None:
            return got
    kinds = np.array([scene.shapes[sa[x]].kind for x in ts.tolist()])
    reach = np.array([scene.shapes[sa[x]].bounding_radius for x in ts.tolist()]) + cut[ts]
    P, own = _window_points(grid, windows, pl[ts], reach)
    own = ts[own]
    size = _sizes(scene)[sa[own]]
    X, Ra, pa = P @ Rh.T + ph, R[sa[own]], p[sa[own]]
    blocks = [[np.zeros(0, int), np.zeros(0), *np.zeros((3, 0, 3)), np.zeros(0, bool)]]
    for kind in ("box", "capsule", "cylinder"):
        k = np.flatnonzero(kinds[np.searchsorted(ts, own)] == kind) if len(own) else np.zeros(0, int)
        if not len(k):
            continue
        if kind == "box":
            dv, wv, ws, n = sphere_box(X[k], np.zeros(len(k)), Ra[k], pa[k], size[k] / 2)
        elif kind == "capsule":
            dv, wv, ws, n = sphere_capsule(X[k], np.zeros(len(k)), pa[k], Ra[k, :, 2], size[k, 1] / 2, size[k, 0])
        else:
            dv, wv, ws, n = sphere_cylinder(X[k], np.zeros(len(k)), Ra[k], pa[k], size[k, 1] / 2, size[k, 0])
        blocks.append([own[k], dv, ws, wv, -n, np.zeros(len(k), bool)])   # (n from the shape: reversed)
    P0, P1, T, o = _edges(scene, f, grid, windows, pl[ts], reach)        # (every shape's edges, found once)
    edges, on = (P0, P1, T, ts[o]), kinds[o]
    for mine, road in (((on == "capsule") | (on == "cylinder"), _capsule_edges), (on == "box", _box_edges)):
        if mine.any():                                            # (a cylinder's side: a capsule's)
            blocks.append(road(scene, sa, tuple(x[mine] for x in edges), Rl, pl, Rh, ph, cut))
    deepest = deepest.copy()
    for i in np.flatnonzero(np.isin(kinds, tuple(FACE_ROWS))).tolist():
        x = ts[i]
        faces = _face_hits(scene, sa[x], grid, windows[i], _triangles(scene, f), (Rl[x], pl[x]), (Rh, ph), cut[x])
        blocks.append([np.full(len(faces[0]), x), *faces, np.ones(len(faces[0]), bool)])    # (faces: all kept)
        mine = tuple(e[edges[3] == x] for e in edges[:3])
        if kinds[i] == "ellipsoid":
            more = _ellipsoid_hits(scene, sa[x], mine, (Rl[x], pl[x]), (Rh, ph), (R[sa[x]], p[sa[x]]), X[own == x],
                                   cut[x], min(deepest[x], faces[0].min(initial=np.inf)))
        else:
            more = _rim_edges(scene, sa[x], mine, (Rl[x], pl[x]), (Rh, ph), cut[x])
        blocks.append([np.full(len(more[0]), x), *more, np.zeros(len(more[0]), bool)])
        deepest[x] = min(deepest[x], faces[0].min(initial=np.inf))
    t, d, wa, wb, n, faces = (np.concatenate(x) for x in zip(*blocks))
    keep = (d < cut[t]) & (faces | (d < deepest[t] - SAME_DEPTH))
    return t[keep], d[keep], wa[keep], wb[keep], n[keep]


def _window_points(grid, windows, c, reach):
    """``(P (k, 3), owner (k,))``: the grid points of each window ``(i0, i1, j0, j1)`` of rows and columns
    of ``grid`` (nrow, ncol, 3) within ``reach[i]`` of the point ``c[i]``, and the window of each."""
    P = [grid[i0:i1, j0:j1].reshape(-1, 3) for i0, i1, j0, j1 in windows]
    owner = np.repeat(np.arange(len(P)), [len(x) for x in P])
    P = np.concatenate(P) if P else np.zeros((0, 3))
    near = ((P - c[owner]) ** 2).sum(1) < reach[owner] ** 2
    return P[near], owner[near]


def _face_hits(scene, a, grid, window, triangles, local, field, cut):
    """An ellipsoid or a cylinder, shape ``a`` (placed ``local = (Rl, pl)`` in the frame of the height
    field, which is ``field = (Rh, ph)``), against the faces of the triangles of the ``window`` of rows
    and columns of the ``grid`` (nrow, ncol, 3): the ``(d, w_a, w_b, n)`` (world) within ``cut`` of the
    ellipsoid's support point on them (:func:`~sparsedyn.contact.ellipsoid_field.ellipsoid_faces`) or
    the cylinder's rim points (:func:`~sparsedyn.contact.heightfield.cylinder_faces`)."""
    (Rl, pl), (Rh, ph), shape = local, field, scene.shapes[a]
    i0, i1, j0, j1 = window
    cells = (np.arange(i0, i1 - 1)[:, None] * (grid.shape[1] - 1) + np.arange(j0, j1 - 1)).ravel()
    T = triangles[np.concatenate([2 * cells, 2 * cells + 1])]
    if shape.kind == "ellipsoid":
        d, wa, wb, n = ellipsoid_faces(T, Rl, pl, np.array(shape.size))
    else:
        d, wa, wb, n = cylinder_faces(T, Rl, pl, shape.size[1] / 2, shape.size[0], cut)
    within = d < cut
    return d[within], wa[within] @ Rh.T + ph, wb[within] @ Rh.T + ph, n[within] @ Rh.T


def _ellipsoid_hits(scene, a, edges, local, field, placed, X, cut, deepest):
    """An ellipsoid, shape ``a`` (placed ``local = (Rl, pl)`` in the frame of a height field, which is
    ``field = (Rh, ph)``, and ``placed = (Ra, pa)`` in the world), against its window of the field beside
    its faces' hits: the ``(d, w_a, w_b, n)`` (world) of the grid points ``X`` (world) and the triangles'
    ``edges`` ``(P0, P1, T)`` near its bounding sphere (:func:`_edges`) whose least distance to it lies
    inside them and is the least about the edge
    (:func:`~sparsedyn.contact.ellipsoid_field.segment_ellipsoid`, :func:`_local_least`) that may come
    nearer than ``cut`` and ``deepest`` (its other hits') less :data:`SAME_DEPTH` (:func:`_lower_bounds`:
    the others are not measured)."""
    (Rl, pl), (Rh, ph), (Ra, pa), (P0, P1, T) = local, field, placed, edges
    radii = np.array(scene.shapes[a].size)
    limit = min(cut, deepest - SAME_DEPTH)
    points = point_ellipsoid(X[_lower_bounds((X - pa) @ Ra, None, radii) < limit], Ra, pa, radii)
    near = _lower_bounds((P0 - pl) @ Rl, (P1 - pl) @ Rl, radii) < limit
    d, wa, wb, n, along = segment_ellipsoid(P0[near], P1[near], Rl, pl, radii)
    inside = (0 < along) & (along < 1) & _local_least(n, T[near])
    edges = (d[inside], wa[inside] @ Rh.T + ph, wb[inside] @ Rh.T + ph, n[inside] @ Rh.T)
    return tuple(np.concatenate(x) for x in zip(points, edges))


def _lower_bounds(Y0, Y1, radii):
    """At most the distance of each point ``Y0`` (k, 3), or segment from ``Y0`` to ``Y1``, from the
    ellipsoid of semi-axes ``radii`` (both in its frame), ``-inf`` for those that reach into it: ``e_min
    (|Z| - 1)``, ``|Z|`` the least norm of the point or segment scaled by ``1 / radii`` (the scaling
    stretches no length by more than ``1 / e_min``, and takes the ellipsoid onto the unit ball)."""
    Z = Y0 / radii
    if Y1 is not None:
        D = Y1 / radii - Z
        s = np.clip(-(Z * D).sum(1) / np.maximum((D * D).sum(1), np.finfo(float).tiny), 0.0, 1.0)
        Z = Z + s[:, None] * D
    rho = np.sqrt((Z * Z).sum(1))
    return np.where(rho >= 1, radii.min() * (rho - 1), -np.inf)


def _edges(scene, f, grid, windows, c, reach):
    """``(P0, P1, T, owner)``: the triangles' edges among the grid points of each window ``(i0, i1, j0,
    j1)`` of rows and columns of height field ``f``'s ``grid`` (nrow, ncol, 3) that come within
    ``reach[i]`` of the point ``c[i]`` (:func:`_edge_table`: their ends ``P0``, ``P1`` (e, 3) and the
    directions ``T`` (e, 2, 3) into their triangles), and the window of each."""
    P0, P1, T, mid, half = _edge_table(scene, f, grid)
    nrow, ncol = grid.shape[:2]
    i0, i1, j0, j1 = np.array(windows, int).reshape(-1, 4).T
    r = i0[:, None] + np.arange(max(1, int((i1 - i0).max(initial=1))))            # (m, rows), past i1: off
    k = j0[:, None] + np.arange(max(1, int((j1 - j0).max(initial=1))))
    on_r, on_k, up_r, up_k = r < i1[:, None], k < j1[:, None], r + 1 < i1[:, None], k + 1 < j1[:, None]
    x = (r[:, :, None] * (ncol - 1) + k[:, None], up_k[:, None] & on_r[:, :, None])           # along x
    y = (nrow * (ncol - 1) + r[:, :, None] * ncol + k[:, None], on_k[:, None] & up_r[:, :, None])  # along y
    g = (nrow * (ncol - 1) + (nrow - 1) * ncol + r[:, :, None] * (ncol - 1) + k[:, None],
         up_k[:, None] & up_r[:, :, None])                                               # diagonals
    owner = np.broadcast_to(np.arange(len(i0))[:, None, None], x[1].shape)
    ids = np.concatenate([e[e_on] for e, e_on in (x, y, g)])
    owner = np.concatenate([owner[e_on] for _, e_on in (x, y, g)])
    near = ((mid[ids] - c[owner]) ** 2).sum(1) < (reach[owner] + half[ids]) ** 2
    ids, owner = ids[near], owner[near]
    return P0[ids], P1[ids], T[ids], owner


def _edge_table(scene, f, grid):
    """``(P0, P1, T, mid, half)`` of every triangle edge of height field ``f`` (its ``grid`` (nrow, ncol,
    3), its frame), kept by the scene: the ends, the directions ``T`` (E, 2, 3) across the edge into its
    two triangles (in each triangle's plane, perpendicular to the edge; zero where the edge is the
    grid's border), the midpoints and half lengths.  The edges along x of row ``i`` from column ``j``
    first (``i (ncol - 1) + j``), then those along y, then the cells' diagonals from (i, j) to (i + 1, j
    + 1); a cell's triangles ``(i, j), (i, j + 1), (i + 1, j + 1)`` and ``(i, j), (i + 1, j + 1), (i + 1,
    j)``."""
    key = ("hfield edges", f)
    got = scene.cache.get(key)
    if got is not None:
        return got
    nrow, ncol = grid.shape[:2]
    r, k = np.meshgrid(np.arange(nrow), np.arange(ncol), indexing="ij")
    x, y, g = (r[:, :-1], k[:, :-1]), (r[:-1], k[:-1]), (r[:-1, :-1], k[:-1, :-1])
    # (start, end, the third corner of the triangle on one side, of the other)
    ends = [(x, (x[0], x[1] + 1), (x[0] + 1, x[1] + 1), (x[0] - 1, x[1])),
            (y, (y[0] + 1, y[1]), (y[0], y[1] - 1), (y[0] + 1, y[1] + 1)),
            (g, (g[0] + 1, g[1] + 1), (g[0], g[1] + 1), (g[0] + 1, g[1]))]
    idx = [np.concatenate([e[s][t].ravel() for e in ends]) for s in range(4) for t in range(2)]
    P0, P1 = grid[idx[0], idx[1]], grid[idx[2], idx[3]]
    e = (P1 - P0) / np.linalg.norm(P1 - P0, axis=1)[:, None]
    T = []
    for a, b in ((idx[4], idx[5]), (idx[6], idx[7])):
        inside = (0 <= a) & (a < nrow) & (0 <= b) & (b < ncol)
        w = grid[np.clip(a, 0, nrow - 1), np.clip(b, 0, ncol - 1)] - P0
        w -= (w * e).sum(1)[:, None] * e
        T.append(np.where(inside[:, None], w, 0.0))
    got = scene.cache[key] = (P0, P1, np.stack(T, 1), (P0 + P1) / 2, np.linalg.norm(P1 - P0, axis=1) / 2)
    return got


def _local_least(n, T):
    """Whether each edge hit of normal ``n`` (e, 3) is the least distance about its edge: moving its
    surface point into either triangle (``T`` (e, 2, 3), :func:`_edges`) takes it no nearer the shape
    (``n . t <= 0``, ``n`` from the surface towards the shape): a ridge's, not a valley's, nor an edge's
    inside a plane."""
    return ((T * n[:, None]).sum(2) <= 0).all(1)


def _capsule_edges(scene, sa, edges, Rl, pl, Rh, ph, cut):
    """``[t, d, w_a, w_b, n, False...]`` (world; ``t`` the position in ``sa`` of each hit's shape) of
    the triangles' ``edges`` ``(P0, P1, T, t)`` (:func:`_edges`, each of its window's capsule or cylinder
    ``sa[t]``, the field's frame, which is ``(Rh, ph)``) crossing the shape over its axis (a ridge across
    its side): the closest points of the edge and the axis inside both (an end of either is a grid
    point's, an end sphere's or a rim's hit), within ``cut``, the least distance about the edge
    (:func:`_local_least`)."""
    P0, P1, T, t = edges
    size = _sizes(scene)[sa[t]]                                      # (radius, length, 0)
    r, h = size[:, 0], size[:, 1]
    u = Rl[t, :, 2]
    A0, d1, d2 = pl[t] - (h / 2)[:, None] * u, h[:, None] * u, P1 - P0
    s_axis, s_edge = _segments(A0, d1, P0, d2)
    d, wa, wb, n = sphere_sphere(A0 + s_axis[:, None] * d1, r, P0 + s_edge[:, None] * d2, np.zeros(len(t)))
    keep = (0 < s_axis) & (s_axis < 1) & (0 < s_edge) & (s_edge < 1) & (d < cut[t]) & _local_least(n, T)
    return [t[keep], d[keep], wa[keep] @ Rh.T + ph, wb[keep] @ Rh.T + ph, n[keep] @ Rh.T,
            np.zeros(int(keep.sum()), bool)]


def _box_edges(scene, sa, edges, Rl, pl, Rh, ph, cut):
    """``[t, d, w_a, w_b, n, False...]`` (world; ``t`` the position in ``sa`` of each hit's box) of the
    triangles' ``edges`` ``(P0, P1, T, t)`` (:func:`_edges`, each of its window's box ``sa[t]``, the
    field's frame, which is ``(Rh, ph)``) crossing one of the box's edges (not nearer parallel than
    :data:`~sparsedyn.contact.closed_forms.PARALLEL_EDGES`): the closest points of the two inside both (an
    end of either is a grid point's or a corner's hit), ``n`` across both from the field's edge towards the
    box (on the side of its centre), ``d`` along it, within ``cut``, where the field's edge is the least
    distance about it (:func:`_local_least`) and ``-n`` lies in the box edge's outward corner (along its
    two faces' outward normals: the box's edge is its nearest feature there)."""
    P0, P1, T, t = edges
    h = _sizes(scene)[sa[t]] / 2
    R, c = Rl[t], pl[t]
    A0 = c[:, None] + np.einsum("eij,ekj->eki", R, _EDGE_START * h[:, None])           # (e, 12, 3): box edges
    A = R[:, :, _EDGE_AXIS].swapaxes(1, 2) * (2 * h[:, _EDGE_AXIS])[..., None]
    # the pairs whose edges may come within the cutoff: their midpoints within their half lengths and it
    gap = np.sqrt((((A0 + A / 2) - (P0 + P1)[:, None] / 2) ** 2).sum(2)) - np.sqrt((A * A).sum(2)) / 2 - \
        np.sqrt(((P1 - P0) ** 2).sum(1))[:, None] / 2
    i, j = np.nonzero(gap < cut[t][:, None])
    A0, A, B0, B, c, R = A0[i, j], A[i, j], P0[i], P1[i] - P0[i], c[i], R[i]
    s_box, s_edge = _segments(A0, A, B0, B)
    Y, X = A0 + s_box[:, None] * A, B0 + s_edge[:, None] * B
    n = cross3(A, B)
    L = np.sqrt((n * n).sum(1))
    crossing = L > np.sin(PARALLEL_EDGES) * np.sqrt((A * A).sum(1) * (B * B).sum(1))   # (not parallel)
    n = n / np.where(crossing, L, 1.0)[:, None]
    n *= np.where(((c - X) * n).sum(1) < 0, -1.0, 1.0)[:, None]                     # towards the box
    d = ((Y - X) * n).sum(1)
    m = np.einsum("kji,kj->ki", R, -n) * _EDGE_START[j] * (np.arange(3) != _EDGE_AXIS[j, None])
    keep = crossing & (0 < s_box) & (s_box < 1) & (0 < s_edge) & (s_edge < 1) & (d < cut[t[i]]) & \
        (m >= -64 * np.finfo(float).eps).all(1) & _local_least(n, T[i])
    return [t[i][keep], d[keep], Y[keep] @ Rh.T + ph, X[keep] @ Rh.T + ph, n[keep] @ Rh.T,
            np.zeros(int(keep.sum()), bool)]


def _rim_edges(scene, a, edges, local, field, cut):
    """``(d, w_a, w_b, n)`` (world) of the triangles' ``edges`` ``(P0, P1, T)`` of the cylinder ``a``'s
    window (:func:`_edges`; the cylinder placed ``local = (Rl, pl)`` in the frame of the height field,
    which is ``field = (Rh, ph)``) crossing one of its rims
    (:func:`~sparsedyn.contact.heightfield.segment_rims`): the edge's point nearest the rim inside it (an
    end is a grid point's hit), in the rim's corner (the rim is the cylinder's nearest point), within
    ``cut``, the least distance about the edge (:func:`_local_least`)."""
    (Rl, pl), (Rh, ph), (radius, length), (P0, P1, T) = local, field, scene.shapes[a].size, edges
    d, wa, wb, n, edge, hit = segment_rims(P0, P1, Rl, pl, length / 2, radius, cut)
    keep = hit & (d < cut) & _local_least(n, T[edge])
    return d[keep], wa[keep] @ Rh.T + ph, wb[keep] @ Rh.T + ph, n[keep] @ Rh.T


def field_pairs(scene, ks):
    """``(pairs (F,), rows (F,))``: the scene pairs of ``ks`` (sorted) of a robot shape (its ``a``) and a
    world height field, and the rows each takes in :func:`hfield_rows` (its features', :data:`GRID_ROWS`
    more for a box, a capsule, a cylinder or an ellipsoid, and :data:`FACE_ROWS` more for an ellipsoid or a
    cylinder)."""
    out, rows = [], []
    for k, (i, j) in zip(np.asarray(ks, int).tolist(), scene.index[np.asarray(ks, int)].tolist()):
        a, b = scene.shapes[i], scene.shapes[j]
        if b.kind == "hfield" and b.body < 0 and a.body >= 0 and a.kind != "hfield":
            out.append(k)
            rows.append(len(_features(scene, i)[1]) + GRID_ROWS * (a.kind in _MORE) + FACE_ROWS.get(a.kind, 0))
    return np.array(out, int), np.array(rows, int)


def hfield_rows(scene, fields, R, p, cut):
    """The rows (sum of ``fields[1]``, 11) (:func:`~sparsedyn.collision_candidates_near`'s columns ``[d, x
    (3), n (3), w_a in a's body axes (3), n . w_b]``, world) of the pairs ``fields`` (:func:`field_pairs`)
    with the shapes' world placements ``R`` (S, 3, 3), ``p`` (S, 3) and every scene pair's cutoff ``cut``
    (P,) [m]: each pair's hits within its cutoff (:func:`hfield_pairs`, one per point as
    :func:`~sparsedyn.collide` keeps them) in its first rows, the other rows' distance +inf; None where
    a pair has more hits than its rows."""
    pairs, counts = fields
    out = free_rows((int(counts.sum()),))
    k, d, wa, wb, n = hfield_pairs(scene, pairs, R, p, cut[pairs])
    if not len(k):
        return out
    rank = 0                                                # (one hit a pair, in order: each its first row)
    if not (k[1:] > k[:-1]).all():
        keep = one_per_point(k, d, wa, np.arange(len(k)))     # (hfield_pairs' hits lie within their cutoffs)
        keep = keep[np.argsort(k[keep], kind="stable")]
        k, d, wa, wb, n = k[keep], d[keep], wa[keep], wb[keep], n[keep]
        rank = np.arange(len(k)) - np.searchsorted(k, k)            # (each pair's hits in order)
    at = np.searchsorted(pairs, k)
    if (rank >= counts[at]).any():
        return None
    i = scene.index[k, 0]
    out[(np.cumsum(counts) - counts)[at] + rank] = hit_rows(scene, i, R[i], p[i], d, wa, wb, n)
    return out
