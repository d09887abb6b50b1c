"""Pairs of two convex shapes whose one hit is their closest pair, as rows of the step's contact data.

A robot's collision meshes are their convex hulls (:func:`~sparsedyn.contact.collision_coal.convex_geometry`);
two of them (self-collision), or a hull and a sphere, capsule, cylinder or another robot's or the world's
hull, have no closed form in the collision kernel: each such pair's one hit is coal's closest pair (GJK,
then EPA where they overlap), as :func:`~sparsedyn.collide` finds it.  A sphere against a cylinder or an
ellipsoid, and an ellipsoid against a plane, are the collision kernel's; one the kernel leaves out (a
cylinder thinner than its ``MIN_FEATURE``) is its closed form here
(:data:`~sparsedyn.contact.closed_forms.CLOSEST`), as on :func:`~sparsedyn.collide`'s NumPy road
(:func:`closed_form_hits`, :func:`closest_on_face`).
:func:`hull_rows` gives these hits in the columns of :func:`~sparsedyn.collision_candidates_near` (one
row a pair), so that a scene with such pairs (a mesh robot with self-collision, a world mesh or ball)
lays out its contacts beside the kernel's candidates with no Contact object per hit
(:func:`~sparsedyn.contact.scene_data.scene_slot_data`), and its step then runs in one native call after
these queries.  (A robot mesh on a world box keeps the box's own road, the hull's patch on its face:
:mod:`~sparsedyn.contact.mesh_box_step`; a cylinder on a world box is coal's closest pair, here.)
The scene's broad phase (bounding spheres, then bounding boxes) leaves out the pairs farther apart
than their cutoff: only the pairs near each other cost a query of coal.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .closed_forms import CLOSED_FORM, CLOSEST, FEATURES, ON_FACE
from .collision_coal import _bounds, _coal, _requests, closest_pair, convex_geometry, flat_mesh
from .collision_near import free_rows, hit_rows
from .mesh_box_loop import near_pairs
from .mesh_box_road import result_blocks

__all__ = ["hull_pairs", "hull_rows", "closed_form_hits", "closest_on_face", "shape_poses"]

#: Kinds of shape whose pairs have hits of their own (patches on a plane, a height field's points).
_OWN_ROADS = ("plane", "hfield")


def hull_pairs(scene, ks) -> np.ndarray:
    """The scene pairs of ``ks`` (sorted, (K,)) whose one hit is the closest pair of two convex shapes:
    coal's (neither shape a plane, a height field or a flat mesh, which collides as triangles; not a
    mesh and a world box, the hull's patch on the box; the kinds no closed form's), or a closed form's
    with no features beside it (a sphere and a cylinder or an ellipsoid, an ellipsoid and a plane:
    :data:`~sparsedyn.contact.closed_forms.CLOSEST`, less :data:`~sparsedyn.contact.closed_forms.FEATURES`)."""
    shapes, out = scene.shapes, []
    for k, (i, j) in zip(np.asarray(ks, int).tolist(), scene.index[np.asarray(ks, int)].tolist()):
        key = (shapes[i].kind, shapes[j].kind)
        if _closest_key(key) is not None:
            out.append(k)
            continue
        if any(x in table for table in (CLOSED_FORM, CLOSEST, FEATURES) for x in (key, key[::-1])):
            continue
        if any(kind in _OWN_ROADS for kind in key) or (set(key) == {"mesh", "box"} and min(shapes[i].body,
                                                                                          shapes[j].body) < 0):
            continue                                    # (a robot mesh on a world box: the hull's patch on it)
        if any(shapes[s].kind == "mesh" and flat_mesh(scene, s) for s in (i, j)):
            continue
        out.append(k)
    return np.array(out, int)


def _closest_key(key):
    """The key of :data:`~sparsedyn.contact.closed_forms.CLOSEST` of the kinds ``key`` (either order) where
    its closest pair is the pair's one hit (no features beside it), else None."""
    for x in (key, key[::-1]):
        if x in CLOSEST and x not in FEATURES and x[::-1] not in FEATURES:
            return x
    return None


def hull_rows(scene, hulls, R, p, cut, broad=True) -> np.ndarray:
    """The rows (H, 11) (:func:`~sparsedyn.collision_candidates_near`'s columns ``[d, x (3), n (3),
    w_a in a's body axes (3), n . w_b]``, ``x`` the witness points' midpoint, ``n`` from ``b`` towards
    ``a``, world) of the pairs ``hulls`` (H,) (:func:`hull_pairs`) with the shapes' world placements
    ``R`` (S, 3, 3), ``p`` (S, 3) and every scene pair's cutoff ``cut`` (P,) [m]: the closest pair of
    each pair that the broad phase keeps (:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`, one
    native call: bounding spheres, then the shapes' bounding boxes; without a C compiler the spheres
    alone), coal's or its closed form; the other rows' distance is +inf.  ``broad`` (H,) bool: that broad phase's
    answer where the caller has it (the mesh-box road's, on the same poses and cutoffs), else True."""
    out = free_rows((len(hulls),))
    if not len(hulls):
        return out
    c, r = _bounds(scene)
    every = near_pairs(scene, R, p, cut.take(hulls), c, r, hulls) if broad is True else broad
    if every is not None:
        near = np.flatnonzero(every)
    else:
        ia, ib = scene.index[hulls, 0], scene.index[hulls, 1]
        ca, cb = (p[x] + np.einsum("kij,kj->ki", R[x], c[x]) for x in (ia, ib))
        near = np.flatnonzero(np.linalg.norm(ca - cb, axis=-1) - r[ia] - r[ib] < cut[hulls])
    if not len(near):
        return out
    kept = _plan(scene, hulls)
    bound = _bound_queries(scene, hulls, kept)
    coal, hits = None, []
    for h in near.tolist():
        k, got = hulls[h], kept[h]
        i, j = scene.index[k].tolist()
        hit = None if bound is None or bound[h] is None else _bound_query(bound[h], R[i], p[i], R[j], p[j])
        if hit is None and len(got) == 1:               # (a closed form: its key)
            _, *hit = (x[0] for x in closed_form_hits(scene, got[0], hulls[h:h + 1], R, p, CLOSEST))
        elif hit is None:
            coal = coal or _coal()
            hit = closest_on_face(scene, coal, k, coal.Transform3s(R[i], p[i]), coal.Transform3s(R[j], p[j]), R, p,
                                  got)
        hits.append(hit)
    i = scene.index[hulls[near], 0]
    out[near] = hit_rows(scene, i, R[i], p[i], *(np.array(x) for x in zip(*hits)))
    return out


def _bound_queries(scene, hulls, kept):
    """This thread's coal queries of the pairs ``hulls`` (their plan ``kept``), each bound once: per pair whose
    hit is coal's closest pair (no closed form, none on a face), ``(ComputeDistance, its result's view (10,),
    the two placements to fill, the request, the result)``, else None; None where coal hands out no view of its
    results.
    Kept by the scene per thread (coal's objects are not shared between threads)."""
    key = ("hull queries", hulls.tobytes(), threading.get_ident())
    got = scene.cache.get(key)
    if got is None:
        coal = _coal()
        per = []
        for k, plan in zip(hulls.tolist(), kept):
            i, j = scene.index[k].tolist()
            kinds = (scene.shapes[i].kind, scene.shapes[j].kind)
            bind = len(plan) == 2 and kinds not in ON_FACE and kinds[::-1] not in ON_FACE
            per.append((coal.ComputeDistance(*plan), coal.DistanceResult()) if bind else None)
        blocks = result_blocks(coal, [x[1] for x in per if x is not None])
        if blocks is not None:
            blocks, req = iter(blocks), _requests(coal)[0]
            per = [None if x is None else (x[0], next(blocks), coal.Transform3s(), coal.Transform3s(), req, x[1])
                   for x in per]
        got = scene.cache[key] = (None if blocks is None else per,)
    return got[0]


def _bound_query(bound, Ri, pi, Rj, pj):
    """``(d, w_a, w_b, n)`` of a bound query (:func:`_bound_queries`) at the shapes' placements: coal's closest
    pair at :data:`~sparsedyn.contact.collision_coal.COAL_TOLERANCE`, as :func:`closest_pair` gives it; None where
    that query fails (EPA's -DBL_MAX, a point not finite: :func:`closest_pair` retries it)."""
    fn, block, Ti, Tj, req, res = bound
    Ti.setTransform(Ri, pi)
    Tj.setTransform(Rj, pj)
    res.clear()
    d = fn(Ti, Tj, req, res)
    if not (-1e300 < d < math.inf and math.isfinite(block[4:].sum())):
        return None
    return d, block[4:7].copy(), block[7:10].copy(), -block[1:4]


def closed_form_hits(scene, key, ks, R, p, table=None, sizes=None):
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


def closest_on_face(scene, coal, k, Ti, Tj, R, p, geometries=None):
    """``(d, w_a, w_b, n)`` of scene pair ``k``: coal's closest pair
    (:func:`~sparsedyn.contact.collision_coal.closest_pair`, its shapes at coal's transforms ``Ti``,
    ``Tj``), or where its kinds have a closed form in :data:`~sparsedyn.contact.closed_forms.ON_FACE` whose
    hit holds at the shapes' placements ``R``, ``p`` (an ellipsoid on a box's face), that hit."""
    i, j = scene.index[k].tolist()
    key = (scene.shapes[i].kind, scene.shapes[j].kind)
    on = key if key in ON_FACE else key[::-1] if key[::-1] in ON_FACE else None
    if on is not None:
        _, d, wa, wb, n = (x[0] for x in closed_form_hits(scene, on, np.array([k]), R, p, ON_FACE))
        if np.isfinite(d):
            return d, wa, wb, n
    return closest_pair(scene, coal, k, Ti, Tj, geometries)


def shape_poses(scene):
    """New arrays ``R`` (S, 3, 3), ``p`` (S, 3) of every shape's placement as the scene holds it (the world
    shapes' world poses; a robot shape's in its body, for a caller to overwrite with its world pose)."""
    return (np.array([x.R for x in scene.shapes], float).reshape(-1, 3, 3),
            np.array([x.p for x in scene.shapes], float).reshape(-1, 3))


def _plan(scene, hulls):
    """Per pair of ``hulls``: coal's objects ``(g_a, g_b)`` (:func:`convex_geometry`), or ``(key,)`` of
    its closed form (:func:`_closest_key`); kept by the scene."""
    key = ("hull pairs plan", hulls.tobytes())
    got = scene.cache.get(key)
    if got is None:
        got = []
        for i, j in scene.index[hulls].tolist():
            closed = _closest_key((scene.shapes[i].kind, scene.shapes[j].kind))
            got.append((closed,) if closed is not None else (convex_geometry(scene, i), convex_geometry(scene, j)))
        scene.cache[key] = got
    return got
