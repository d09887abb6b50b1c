"""Collision detection in a :class:`~sparsedyn.Scene`: :func:`collide`.

Each checked pair ``(a, b)`` gives zero or more *hits*: a signed distance ``d`` (negative:
penetration), a unit normal ``n`` in world axes pointing from ``b`` towards ``a``, and the point
midway between the two witness points, ``x = (w_a + w_b) / 2`` with ``w_a - w_b = d n`` (``w_a`` on
the surface of ``a``, ``w_b`` on that of ``b``; the point MuJoCo reports).  A pair hits when ``d`` is
below the scene's margin.

Broad phase: bounding spheres (against a plane, a sphere's height above it).  Narrow phase: closed forms
(:mod:`~sparsedyn.contact.closed_forms`), vectorised over the pairs of one kind, for sphere-sphere,
sphere-capsule, capsule-capsule, sphere-box and sphere, capsule, box and cylinder against a plane, and for
the closest pair of two boxes (the separating axis test, then the closest corner or edges,
:func:`~sparsedyn.contact.closed_forms.box_box`: coal's EPA depends on the queries before it) and of a
capsule and a box (:func:`~sparsedyn.contact.box_pairs.capsule_box`); a mesh against a plane by the
vertices of its convex hull (up to four hits: the vertices within the margin reduced to the points
spanning their patch, :mod:`~sparsedyn.contact.reduction`); coal (Pinocchio's collision library: GJK and
EPA) for the other pairs.  A mesh collides as its convex hull everywhere (as MuJoCo's meshes do): a flat one,
which has no hull, as coal's BVH of its triangles.  Where a resting contact is a segment or a face, one pair
gives several hits: a capsule or a cylinder on a plane each end (cylinders: four points of each rim), a
box on a plane each corner within the margin, and, beside the closest pair, a box's corners against
another box and a capsule's end spheres against a box (closed forms: a point against a box); an
ellipsoid's closest pair to a box, where on a face, is its support point there
(:func:`~sparsedyn.contact.hull_pairs.closest_on_face`).  A shape
against a height field: its features (a sphere, a capsule's end spheres, a box's corners, a mesh's
hull vertices) against the surface's triangles (:mod:`~sparsedyn.contact.heightfield`), an
ellipsoid's support point (:mod:`~sparsedyn.contact.ellipsoid_field`) and a cylinder's rim points on
the faces, and the grid points pressing deeper into a box, a capsule, a cylinder or an ellipsoid, and
the triangle edges into a box's edge, a capsule's or a cylinder's side, a cylinder's rim or an
ellipsoid.
The deepest of a pair's hits is its closest pair of points (coal's ``distance``).  coal's contact
patches are not used: their points carry the depth of the closest pair, not their own.

On the default (native) road the closed-form pairs against a plane, between spheres and capsules and of
spheres and capsules against boxes (:mod:`~sparsedyn.contact.box_pairs`) are one compiled kernel of
``q`` (:mod:`~sparsedyn.contact.collision_kernel`: the same closed forms without branches, with a broad
phase, :mod:`~sparsedyn.contact.collision_near`; where every pair is the kernel's, the steps' own
look-ahead kernel run at ``v = 0``, so that collide and the steps build one kernel), and so are the
heights of a robot mesh's hull vertices above a world plane (:mod:`~sparsedyn.contact.mesh_plane`); two
boxes are one hand-written routine (:mod:`~sparsedyn.contact.box_box_native`); the hits are the same
to rounding.  The pairs left pass a
tighter broad phase in one native call (:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`: a sphere
against a box, the shapes' bounding boxes by separating axes), and a robot mesh's patches on world boxes
(given coal's closest pairs) are one native call (:func:`~sparsedyn.contact.mesh_box_loop.mesh_box_loop_patches`).
Where the pairs left to that broad phase are meshes on world boxes, collide takes them all in one table
(:mod:`~sparsedyn.contact.mesh_box_road`, once the scene has been collided once); where they are
pairs of two boxes, so does :mod:`~sparsedyn.contact.box_box_road`.  From such a table (or the
kernel's candidates) collide picks the rows within the margin, by pair, in one call of the compiler's
extension (its ``pick``: one copy of the rows, the hits' arrays views of it); each road's calls are
bound once per scene and thread (:mod:`~sparsedyn.contact.collision_quick`).
``sd.use_backend("numpy")`` takes the vectorised closed forms.  coal's objects and the meshes' hulls:
:mod:`~sparsedyn.contact.collision_coal`.
"""

from __future__ import annotations

from threading import get_ident
from typing import NamedTuple

import numpy as np

from .. import _checks
from ..algorithms.kinematics import geometry_placements
from ..kernels import native_function, use_backend
from .closed_forms import (CLOSED_FORM, CLOSEST, FEATURES, ON_FACE, box_box, box_box_corners, box_plane,  # noqa: F401
                           capsule_box_ends, capsule_capsule, capsule_plane, cylinder_plane, mesh_plane, sphere_box,
                           sphere_capsule, sphere_plane, sphere_sphere)
from .box_box_native import box_box_pairs, box_box_plan
from .collision_coal import (COAL_TOLERANCE, SAME_DEPTH, SAME_POINT, _bounds, _coal, _coal_distance,  # noqa: F401
                             _coal_geometry, _hull_convex, _hull_vertices, closest_pair, convex_geometry, flat_mesh,
                             mesh_vertices, one_per_point)
from .collision_kernel import kernel_plan
from .collision_near import near_call, near_rows
from .collision_hfield import hfield_pairs
from .collision_quick import QUICK, quick_collide
from .mesh_box_loop import mesh_box_loop_patches, near_pairs
from .box_box_road import box_box_road, box_box_road_table
from .hull_pairs import closed_form_hits, closest_on_face
from .mesh_box_road import BoxRoad, box_road, box_road_rows, shape_rows
from .mesh_plane_loop import loop_plan, mesh_plane_loop_hits, mesh_plane_loop_rows
from .reduction import MAX_PATCH_POINTS, mesh_box_patch, mesh_plane_patches, patch_depth, plane_axes
from .scene_base import SceneBase, remembered

__all__ = ["Hits", "collide", "collide_within"]


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


# --- the query ------------------------------------------------------------------------------------

_NONE, _F64 = {}, np.dtype(float)


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
    if not isinstance(scene, SceneBase):
        raise TypeError(f"collide: scene must be a sd.Scene, got {type(scene).__name__}")
    road = scene.cache.get(_ROAD)
    if type(q) is not np.ndarray:                  # (a plain list of numbers takes the road too)
        q, = _checks.flat_floats(q)
    if (road is not None and type(q) is np.ndarray and q.dtype is _F64 and q.shape == road[2]
            and use_backend.current() != "numpy"):
        quick = scene.cache.get(QUICK, _NONE).get(get_ident())
        if quick is None:
            quick = (None, quick_collide(scene, road, Hits))
        if quick[1] is not None:                   # the road bound once (collision_quick)
            got = quick[1](q)
            if got is not None:
                return got
        f, kp, _, lp, every, order = road          # collide_within's native road, less its lookups
        if f is None:                              # meshes on boxes, or pairs of two boxes (kp: their road)
            c = box_road_rows(scene, kp, q) if type(kp) is BoxRoad else box_box_road_table(scene, kp, q)
            if c is None:
                return collide_within(scene, q, None)
        else:
            c = f(q, kp.shapes, kp.cutoff, kp.pairs)
            if lp is not None:                     # and the meshes' patches on planes, written after the kernel's
                rows = np.empty((len(every), c.shape[1]))
                rows[:len(c)] = c
                mesh_plane_loop_rows(scene, lp, q, out=rows[len(c):])
                c = rows
        return _picked_hits(scene, every, order, c, kp.cutoff)     # (kp.cutoff: the margin, 0-d)
    return collide_within(scene, q, None)


def _picked_hits(scene, every, order, c, cutoff):
    """:func:`_kernel_hits` of the rows of ``c`` below ``cutoff`` (a number), picked in one native call
    (the compiler's extension's ``pick``: the rows' columns copied once, the hits' arrays views of the
    copy) where it is built."""
    pick = native_function("pick")
    got = None if pick is None else pick(c, cutoff, order, every)
    if got is None:
        return _kernel_hits(scene, every, order, c, c[:, 0] < cutoff)
    x, n, d, sel, k = got
    every_name = scene.pair_names
    names = remembered(scene, "hit picks", sel.tobytes(),
                       lambda: tuple(every_name[i] for i in k.tolist()))   # (per selection: rows recur)
    return tuple.__new__(Hits, (list(names), x, n, d, k))


def _kernel_hits(scene, every, order, c, mask):
    """The :class:`Hits` of the rows ``c`` (K, 11) of the boolean ``mask`` (K,) (the collision kernel's
    candidates, its hits the vectorised road's: MIN_FEATURE; then the meshes' patches on planes,
    :func:`~sparsedyn.contact.mesh_plane_loop.mesh_plane_loop_rows`), ``every`` (K,) each row's pair,
    ``order`` (K,) the rows by pair (None: they are), in a scene whose pairs are all theirs."""
    sel, k, names = _selected(scene, every, order, mask)
    c = c.take(sel, 0)
    return tuple.__new__(Hits, (list(names), c[:, 1:4], c[:, 4:7], c[:, 0], k.copy()))      # (less a call)


#: ``scene.cache``'s key of collide's road: ``(the ready native near_call(model), the kernel plan,
#: (nq,), the mesh-plane loop plan or None, each row's pair, the rows by pair or None)`` where every
#: pair is the collision kernel's or a robot mesh's on a world plane; ``(None, a mesh_box_road.BoxRoad, ...)``
#: where the others are meshes on world boxes, ``(None, a box_box_road.BoxBoxRoad, ...)`` pairs of two boxes
_ROAD = "collide road"


def collide_within(scene, q, cutoff, spin=None) -> Hits:
    """:func:`collide` with its own cutoff per pair: the hits of pair ``k`` closer than ``cutoff[k]``
    (``cutoff`` (P,) [m], at least the scene's margin; None: the margin, :func:`collide`'s hits).  A
    scene step's look-ahead (:func:`~sparsedyn.contact.look_ahead.pair_cutoffs`): the narrow phases
    that keep the features within a distance (a mesh's hull vertices, a height field's points, coal's
    security margin) take the largest cutoff, and each pair's hits are then those within its own.
    ``spin`` (P, 3): each pair's rotation over the step (:func:`~sparsedyn.contact.look_ahead.pair_spins`),
    where given a mesh-plane patch's points each take their own allowance from it
    (:func:`~sparsedyn.contact.reduction.rotation_depth`; else the cutoff's, looser)."""
    model = scene.model
    if not (type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,)):
        q = _checks.configuration(model, q)       # else the kernel checks it (one native call)
        if q.ndim != 1:
            raise ValueError(f"collide: q must be one configuration of shape (nq,) = ({model.nq},), got shape "
                             f"{q.shape}")
    per_pair = cutoff is not None
    margin = float(cutoff.max(initial=scene.margin)) if per_pair else scene.margin
    out, patches = [], []                          # (pair indices, d, w_a, w_b, n) blocks; distinct ones apart
    inside = kp = lp = f = None
    if use_backend.current() != "numpy":
        kp = kernel_plan(scene)
        if kp.pairs:
            # the pairs' candidates within the cutoff (a broad phase leaves out the others' narrow phase);
            # the ready native callable straight away (as the public function would, less its frame)
            f = near_call(model, kp.complete)     # (the steps' own kernel: one build a scene)
            top = np.array(margin) if per_pair else kp.cutoff      # a 0-d array (data: no rebuild)
            c = f(q, kp.shapes, top, kp.pairs) if f is not None else \
                near_rows(model, q, kp.shapes, top, kp.pairs, kp.complete)
            if kp.complete:                        # the kernel's hits are the vectorised road's (MIN_FEATURE)
                if f is not None and not per_pair:
                    scene.cache[_ROAD] = (f, kp, (model.nq,), None, kp.pair, None)
                return _kernel_hits(scene, kp.pair, None, c, c[:, 0] < (cutoff.take(kp.pair) if per_pair else top))
            sel = np.less(c[:, 0], cutoff.take(kp.pair) if per_pair else top).nonzero()[0]
            c, k = c.take(sel, 0), kp.pair.take(sel)
            d, x, n = c[:, 0], c[:, 1:4], c[:, 4:7]
            h = d[:, None] / 2 * n
            patches.append((k, d, x + h, x - h, n))   # distinct points (MIN_FEATURE), nothing to merge
            inside = kp.inside
        lp = loop_plan(scene)                      # robot meshes on world planes: their patches natively
        got = None if lp is None else mesh_plane_loop_hits(scene, lp, q, cutoff if per_pair else None, spin)
        if got is not None:
            patches.append(got)
            inside = lp.inside if inside is None else inside | lp.inside
        bp = box_box_plan(scene)                   # two boxes: one hand-written native routine
        if bp is not None and not (inside is not None and inside.all()):
            boxes = box_box_pairs(bp, *placements(scene, q), margin, cutoff if per_pair else None)
            if boxes is not None:
                patches.append(boxes)
                inside = bp.inside if inside is None else inside | bp.inside
        if inside is not None and inside.all():        # the kernels' hits alone: distinct points, within the cutoff
            if kp.pairs and got is not None and f is not None and not per_pair and spin is None and bp is None:
                every = np.concatenate([kp.pair, np.repeat(lp.pair, MAX_PATCH_POINTS)])
                scene.cache[_ROAD] = (f, kp, (model.nq,), lp, every, np.argsort(every, kind="stable"))
            elif bp is not None and got is None and not per_pair and spin is None and _ROAD not in scene.cache:
                road = box_box_road(scene, kp, f, bp)          # the kernel's pairs and two boxes'
                if road is not None:
                    scene.cache[_ROAD] = (None, road, (model.nq,), None, road.every, road.order)
            return _distinct_hits(scene, patches)
    R, p = placements(scene, q)
    plan = _plan(scene)
    if kp is not None and not per_pair and spin is None and _ROAD not in scene.cache:   # (then a road of its own)
        road = box_road(scene, kp, f, lp, plan["c"], plan["r"], plan["half"])
        if road is None and got is None:           # the kernel's pairs and coal's, with two boxes' or not
            road = box_box_road(scene, kp, f, bp)
        if road is not None:
            scene.cache[_ROAD] = (None, road, (model.nq,), None, road.every, road.order)
    if len(scene.index):
        near, bounded = _near(scene, plan, R, p, cutoff if per_pair else margin)
        if inside is not None:
            near &= ~inside                        # those are the kernel's
        _narrow(scene, plan, near, bounded, R, p, cutoff if per_pair else None, margin, spin, out, patches)
    if not out and patches:                        # distinct points within their cutoffs: nothing to merge
        return _distinct_hits(scene, patches)
    return _hits(scene, out, cutoff if per_pair else None, patches)


def _narrow(scene, plan, near, bounded, R, p, cutoff, margin, spin, out, patches):
    """The narrow phase of the pairs ``near`` (S,) bool on the Python road, group by group (``plan``'s),
    at placements ``R``, ``p``: hits to merge appended to ``out``, distinct ones to ``patches``
    (:func:`collide_within`'s blocks); ``cutoff`` (P,) per pair or None (``margin``)."""
    fields = []
    for key, ks, sa, sb in plan["groups"]:
        m = near[ks]
        if not m.any():
            continue
        if key in CLOSED_FORM:
            out.append(closed_form_hits(scene, key, ks[m], R, p, sizes=(sa[m], sb[m])))
        elif set(key) == {"mesh", "plane"}:
            cut = cutoff[ks[m]] if cutoff is not None else np.full(int(m.sum()), margin)
            patches.append(_mesh_plane_pairs(scene, ks[m], R, p, cut, None if spin is None else spin[ks[m]]))
        elif set(key) == {"mesh", "box"}:            # a world box: the hull's patches; else the hull's closest pair
            world = plan["world"][ks[m]]
            kw = ks[m][world]
            cut = cutoff[kw] if cutoff is not None else np.full(len(kw), margin)
            got, distinct = _mesh_box_pairs(scene, kw, R, p, cut, bounded)
            (patches if distinct else out).append(got)
            if not world.all():
                out.append(_coal_pairs(scene, ks[m][~world], R, p, margin, cutoff))
        elif "hfield" in key:
            fields.append(ks[m])                       # (every kind's pairs with a height field: one call)
        else:
            out.append(_coal_pairs(scene, ks[m], R, p, margin, cutoff))
    if fields:
        ks = np.concatenate(fields)
        out.append(hfield_pairs(scene, ks, R, p, margin if cutoff is None else cutoff[ks]))


def _near(scene, plan, R, p, cutoff):
    """``(near (P,) bool, bounded)``: the broad phase, one native call where it is built
    (:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`: bounding spheres, then a sphere against a box
    and the shapes' bounding boxes by separating axes; ``bounded`` True), else the spheres'
    (:func:`_sphere_near`)."""
    near = None if use_backend.current() == "numpy" else near_pairs(scene, R, p, cutoff, plan["c"], plan["r"])
    return (near, True) if near is not None else (_sphere_near(plan, R, p, cutoff), False)


def _sphere_near(plan, R, p, cutoff):
    """(P,) bool: the pairs whose bounding spheres come closer than ``cutoff`` (a float or (P,) [m]), a
    bounded shape and a plane by its sphere's height above the plane (the broad phase)."""
    ia, ib, c, r = plan["ia"], plan["ib"], plan["c"], plan["r"]
    ca, cb = p[ia] + np.einsum("kij,kj->ki", R[ia], c[ia]), p[ib] + np.einsum("kij,kj->ki", R[ib], c[ib])
    with np.errstate(invalid="ignore"):
        near = np.linalg.norm(ca - cb, axis=-1) - r[ia] - r[ib] < cutoff
    near |= ~np.isfinite(r[ia] + r[ib])
    ks, pl, other = plan["on plane"]
    if len(ks):
        cw = p[other] + np.einsum("kij,kj->ki", R[other], c[other])
        h = np.einsum("ki,ki->k", R[pl][:, :, 2], cw - p[pl]) - r[other]
        near[ks] = h < (cutoff[ks] if np.ndim(cutoff) else cutoff) + SAME_POINT
    return near


def _selected(scene, every, order, mask):
    """``(sel, pair, names)`` of the rows of the boolean ``mask`` (K,) (:func:`_kernel_hits`): their
    indices by pair, their scene pairs (read-only) and the pairs' names; remembered per mask by the
    scene (a body resting or sliding touches with the same candidates query after query)."""
    def make():
        sel = mask.nonzero()[0] if order is None else order.compress(mask.take(order))
        k = every.take(sel)
        sel.flags.writeable = k.flags.writeable = False
        names = scene.pair_names
        return sel, k, tuple(names[i] for i in k.tolist())
    return remembered(scene, "hit selections", mask.tobytes(), make)


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
    kinds = np.array(kinds)[idx] if len(idx) else np.zeros((0, 2), str)
    ks = np.flatnonzero((kinds == "plane").any(1) & np.isfinite(r[idx]).any(1)).astype(int)
    pl = np.where(kinds[ks, 0] == "plane", idx[ks, 0], idx[ks, 1])
    body = np.array([s.body for s in scene.shapes], int)
    half = np.array([np.asarray(s.size, float) / 2 if s.kind == "box" else np.zeros(3) for s in scene.shapes])
    plan = {"ia": idx[:, 0], "ib": idx[:, 1], "c": c, "r": r, "groups": groups,
            "world": body[idx].min(1) < 0 if len(idx) else np.zeros(0, bool), "half": half.reshape(-1, 3),
            "mesh": np.array([s.kind == "mesh" for s in scene.shapes], bool),
            "on plane": (ks, pl, np.where(kinds[ks, 0] == "plane", idx[ks, 1], idx[ks, 0]))}
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


def _mesh_plane_pairs(scene, ks, R, p, cutoff, spin=None):
    """Hits of mesh-plane pairs ``ks`` within their ``cutoff`` (len(ks),) [m], in the pairs' order
    (:func:`~sparsedyn.contact.reduction.mesh_plane_patches`: all pairs at once; ``spin`` (len(ks), 3)
    their rotations over the step where known, :func:`~sparsedyn.contact.look_ahead.pair_spins`)."""
    V, rows = mesh_vertices(scene)
    idx = scene.index[ks]
    swap = np.array([scene.shapes[i].kind == "plane" for i in idx[:, 0]])
    m, pl = np.where(swap, idx[:, 1], idx[:, 0]), np.where(swap, idx[:, 0], idx[:, 1])
    g, d, wa, wb, n, _ = mesh_plane_patches(V, [rows[i] for i in m.tolist()], R[m], p[m], plane_axes(R[pl][:, :, 2]),
                                            p[pl], np.asarray(cutoff, float), scene.margin,
                                            None if spin is None else np.where(swap[:, None], -spin, spin))
    s = swap[g][:, None]
    return ks[g], d, np.where(s, wb, wa), np.where(s, wa, wb), np.where(s, -n, n)


def _mesh_box_pairs(scene, ks, R, p, cutoff, bounded=False):
    """Hits of pairs ``ks`` of a robot mesh and a world box within their ``cutoff`` (len(ks),) [m]:
    coal's signed distance (GJK/EPA) between the mesh's convex hull (as on a plane, and as MuJoCo
    collides a mesh) and the box for the closest pair, and where that pair
    lies on a face of the box the hull vertices on that face, reduced
    (:func:`~sparsedyn.contact.reduction.mesh_box_patch`; on the default road all pairs' patches in one
    native call, :func:`~sparsedyn.contact.mesh_box_loop.mesh_box_loop_patches`).  ``bounded``: the
    pairs passed the native broad phase (:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`, which holds
    the test of the mesh's bounding sphere against the box), else that test is made here.  Returns
    ``((k, d, w_a, w_b, n), distinct)``: ``distinct`` where the rows are already merged as
    :func:`_hits` merges a pair's (the native road's)."""
    coal, V, rows = _coal(), *mesh_vertices(scene)
    plan, idx, cutoff = _plan(scene), scene.index[ks], np.asarray(cutoff, float)
    mesh = plan["mesh"][idx[:, 0]]
    ms, bs = np.where(mesh, idx[:, 0], idx[:, 1]), np.where(mesh, idx[:, 1], idx[:, 0])
    half = plan["half"][bs]
    if bounded:
        at = range(len(ks))
    else:                                          # the mesh's bounding sphere against the box itself
        x = np.abs(np.einsum("kji,kj->ki", R[bs], p[ms] + np.einsum("kij,kj->ki", R[ms], plan["c"][ms]) - p[bs])) \
            - half
        gap = np.linalg.norm(np.maximum(x, 0.0), axis=1) + np.minimum(x.max(1, initial=-np.inf), 0.0) - plan["r"][ms]
        at = np.flatnonzero(gap < cutoff + SAME_POINT).tolist()
    near, closest = [], np.empty((len(at), 10))
    for n in at:
        m, b = int(ms[n]), int(bs[n])
        d, res = _coal_distance(coal, _hull_convex(scene, m), _transform(scene, coal, m, R, p), _coal_geometry(scene, b),
                                _transform(scene, coal, b, R, p), scene.shapes[m].name, scene.shapes[b].name)
        if d < cutoff[n]:                          # (coal's normal runs from the mesh to the box)
            row = closest[len(near)]
            row[0], row[1:4], row[4:7], row[7:] = d, res.getNearestPoint1(), res.getNearestPoint2(), res.normal
            near.append(n)
    if not near:
        return (np.zeros(0, int), np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))), True
    near, closest = np.array(near), closest[:len(near)]
    closest[:, 7:] *= -1.0
    m, b, c = ms[near], bs[near], cutoff[near]
    depth = patch_depth(c, scene.margin)
    got = None if use_backend.current() == "numpy" else \
        mesh_box_loop_patches(V, shape_rows(scene), plan["half"], m, b, R, p, closest, c, depth, ~mesh[near])
    if got is not None:                            # (in the pair's order, merged: distinct points)
        return (ks[near].take(got[0]), *got[1:]), True
    if got is None:
        out = []
        for j, (i, lo_hi) in enumerate(zip(m.tolist(), [rows[i] for i in m.tolist()])):
            lo, hi = lo_hi
            x = closest[j]
            got_j = mesh_box_patch(V[lo:hi] @ R[i].T + p[i], R[b[j]], p[b[j]], half[near[j]],
                                   (x[0], x[1:4], x[4:7], x[7:10]), c[j], float(depth[j]), SAME_DEPTH)
            out.append((np.full(len(got_j[0]), j), *got_j))
        got = tuple(np.concatenate(x) for x in zip(*out))
    g, d, wa, wb, nn = got
    swap = ~mesh[near].take(g)[:, None]            # the box first: its witness is w_a
    return (ks[near].take(g), d, np.where(swap, wb, wa), np.where(swap, wa, wb), np.where(swap, -nn, nn)), False


def _transform(scene, coal, k, R, p):
    """coal's placement of shape ``k`` at ``(R[k], p[k])``; a world shape's made once (kept by the scene)."""
    if scene.shapes[k].body >= 0:
        return coal.Transform3s(R[k], p[k])
    key = ("world transform", k)
    got = scene.cache.get(key)
    if got is None:
        got = scene.cache[key] = coal.Transform3s(R[k], p[k])
    return got


def _distinct_hits(scene, blocks):
    """:func:`_hits` of blocks whose rows are within their pairs' cutoffs and distinct points (the
    collision kernel's candidates, :data:`~sparsedyn.contact.collision_kernel.MIN_FEATURE` apart; a
    mesh's patch on a plane), each pair's in one block, each block by pair: nothing to merge."""
    k, d, wa, wb, n = blocks[0] if len(blocks) == 1 else (np.concatenate(x) for x in zip(*blocks))
    if len(blocks) > 1:
        at = np.argsort(k, kind="stable")
        k, d, wa, wb, n = k.take(at), d.take(at), wa.take(at, 0), wb.take(at, 0), n.take(at, 0)
    names = scene.pair_names
    return Hits([names[x] for x in k.tolist()], (wa + wb) / 2, n, d, k)


def _hits(scene, blocks, cutoff=None, distinct=()):
    """The hits of the blocks closer than the margin, or than ``cutoff`` (P,) per pair where given; and of
    the blocks ``distinct``, whose points are distinct (a mesh's patch on a plane), their pairs in no other."""
    if not blocks and not distinct:
        return Hits([], np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0, int))
    k, d, wa, wb, n = (np.concatenate(x) for x in zip(*(list(blocks) + list(distinct))))
    keep = np.flatnonzero(d < (scene.margin if cutoff is None else cutoff[k]))
    keep, alone = np.split(keep, [np.searchsorted(keep, sum(len(b[0]) for b in blocks))])   # distinct's rows last
    keep = one_per_point(k, d, wa, keep)
    keep = np.concatenate([keep, alone])
    keep = keep[np.argsort(k[keep], kind="stable")]
    k, d, wa, wb, n = k[keep], d[keep], wa[keep], wb[keep], n[keep]
    names = scene.pair_names
    return Hits([names[x] for x in k.tolist()], (wa + wb) / 2, n, d, k)


def _coal_pairs(scene, ks, R, p, margin, cutoff=None):
    """Hits of pairs ``ks`` from coal: two convex shapes, ``distance`` (signed: GJK, then EPA where
    they overlap) for the closest pair (two boxes, a capsule and a box, a sphere and a cylinder or an ellipsoid:
    closed forms, :data:`CLOSEST`), and for a box
    the closed-form hits of the features that rest on a face (:data:`FEATURES`).  A mesh is its convex hull
    (:func:`~sparsedyn.contact.collision_coal.convex_geometry`), as on a plane or a world box, and as MuJoCo
    collides a mesh: two meshes' triangle
    surfaces have no signed distance once they cross, and coal's depths of crossing triangles (its ``collide``)
    moved by centimetres between neighbouring configurations, so a step pushed robots' links into each other.
    A flat mesh (no hull) is a BVH of triangles: ``collide`` with the margin as coal's security margin, up to
    four triangle contacts, each with its own signed distance, those touching with the deepest kept
    (:func:`~sparsedyn.contact.reduction.patch_depth` above it or above the surface: the others carry nothing at
    rest); its margin the pair's own ``cutoff[k]`` where given (coal stops at four contacts: within a wider
    margin they may all be near triangles, the overlapping ones never reached)."""
    kinds = [s.kind for s in scene.shapes]
    blocks, near = [], []
    pair_kinds = [(kinds[i], kinds[j]) for i, j in scene.index[ks].tolist()]
    for key in CLOSEST:                            # the pairs whose closest pair has a closed form
        for order in {key, key[::-1]}:
            mine = np.array([x == order for x in pair_kinds], bool)
            if mine.any():
                kc, d, wa, wb, n = closed_form_hits(scene, key, ks[mine], R, p, CLOSEST)
                keep = np.flatnonzero(d < margin)
                blocks += list(zip(kc[keep].tolist(), d[keep], wa[keep], wb[keep], n[keep]))
                near += kc[keep].tolist()
    ks = np.array([k for k, x in zip(ks.tolist(), pair_kinds) if x not in CLOSEST and x[::-1] not in CLOSEST], int)
    coal = _coal() if len(ks) else None
    tf = {i: coal.Transform3s(R[i], p[i]) for i in np.unique(scene.index[ks]).tolist()}     # the pairs' shapes
    for k in ks:
        i, j = scene.index[k]
        gi, gj = convex_geometry(scene, i), convex_geometry(scene, j)
        if isinstance(gi, coal.BVHModelBase) or isinstance(gj, coal.BVHModelBase):
            # a BVH's distance query is slow (milliseconds): collide within the margin instead
            creq = coal.CollisionRequest()
            own = margin if cutoff is None else float(cutoff[k])
            creq.num_max_contacts, creq.security_margin = 4, own
            cres = coal.CollisionResult()
            got = [(c.getNearestPoint1(), c.getNearestPoint2(), c.normal, c.penetration_depth)
                   for c in cres.getContacts()] if coal.collide(gi, tf[i], gj, tf[j], creq, cres) else []
            if got:                                # the contacts touching with the deepest (reduction's rule)
                top = max(min(c[3] for c in got), 0.0) + float(patch_depth(own, scene.margin))
                got = [c for c in got if c[3] <= top]
            got = [(np.array(w1, float), np.array(w2, float), -np.array(nc, float), d) for w1, w2, nc, d in got]
        else:
            d, w1, w2, n = closest_on_face(scene, coal, k, tf[i], tf[j], R, p)
            got = [(w1, w2, n, d)] if d < margin else []
            near += [k] if got else []
        for w1, w2, n, d in got:
            blocks.append((k, d, w1, w2, n))
    extra = []
    for key in FEATURES:
        for order in {key, key[::-1]}:             # one call per order of the pair's kinds
            mine = [k for k in near if (kinds[scene.index[k][0]], kinds[scene.index[k][1]]) == order]
            if mine:
                extra.append(closed_form_hits(scene, key, np.array(mine), R, p, FEATURES))
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
