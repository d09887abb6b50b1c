"""A scene's contacts as the compiled step's data, straight from the collision kernel: :func:`scene_slot_data`.

:func:`~sparsedyn.contact.scene_step.scene_slots` lays out :class:`~sparsedyn.Contact` objects made
from :func:`~sparsedyn.collide`'s hits; on the default (native) road this module gives the same
:class:`~sparsedyn.contact.friction_problem.ContactSlots` with no object per hit: one native call of
:func:`~sparsedyn.collision_candidates_ahead` on the scene's pairs, which computes each pair's
look-ahead from the step's ``v`` itself (or of :func:`~sparsedyn.collision_candidates_near` with a
given cutoff; data: no new build; a broad phase leaves out the closed forms of the pairs farther
apart; those it computes are :func:`~sparsedyn.collision_candidates`' own, the witness point already
in its body's axes), the candidates within their pair's look-ahead as rows
``[mu, p (3), n (3), n . w_b]`` (a pair of two robot shapes, self-collision, in a two-body slot
keyed by the pair of its bodies' slot frames), placed in the scene's slots (the same growing layout, kept in
``scene.cache``) by a table kept while the layout stays.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..algorithms.kinematics import forward_kinematics
from ..kernels import native_calls, use_backend
from .box_box_native import ROWS, box_box_available, box_box_plan
from .box_box_road import box_box_poses, extra_rows_by_state
from .box_box_step import box_box_rows, box_box_step_rows, one_state
from .collision import _bounds, mesh_vertices, placements
from .collision_hfield import field_pairs, hfield_rows
from .collision_kernel import kernel_plan
from .collision_near import NEAR_COLUMNS, SLACK, collision_candidates_ahead, free_rows, near_rows
from .data_slots import data_slot_base, data_slot_count
from .friction_problem import DATA_SLOT, ContactSlots, fill_slots
from .hull_pairs import hull_pairs, hull_rows
from .look_ahead import STEP_CAPACITY, body_reach, capacity_mask, cutoffs_and_spins, pair_cutoffs, pair_spins
from .mesh_box_step import mesh_box_rows, mesh_box_step_rows
from .mesh_plane_loop import loop_plan, mesh_plane_loop_rows, mesh_plane_step_rows
from .mesh_plane_step import plane_step_rows
from .reduction import MAX_PATCH_POINTS, mesh_plane_patches, plane_axes

__all__ = ["scene_slot_data", "near_candidates", "ahead_candidates", "mesh_plane_rows", "mesh_box_rows",
           "held_contacts"]

#: The columns of a row of :func:`~sparsedyn.collision_candidates_near` that make a slot's data
#: ``[p (3), n (3), offset]``: ``w_a`` in a's body (3), ``n`` (3), ``n . w_b``.
SLOT_COLUMNS = np.array([7, 8, 9, 4, 5, 6, 10])

_AHEAD = collision_candidates_ahead.__name__
_FK = forward_kinematics.__name__
_NONE, _F64 = {}, np.dtype(float)


def _slot_frames(model):
    """Body -> ``(frame, E, r)``: the frame that holds its contacts' slots (as
    :func:`~sparsedyn.contact.friction_problem.contact_slots` chooses it: the body's first frame of
    identity placement, else its first frame) and that frame's placement in the body (``E``, ``r``)."""
    own, first = {}, {}
    for j, f in enumerate(model.frames):
        if f.body < 0:
            continue
        first.setdefault(f.body, (j, f.X.E, f.X.r))
        if f.body not in own and np.array_equal(f.X.E, np.eye(3)) and not np.any(f.X.r):
            own[f.body] = (j, np.eye(3), np.zeros(3))
    return {**first, **own}


def _plan(scene):
    """``(kernel plan, key id per candidate (K,), the slot keys, E, r, friction per candidate, moved)``
    (``E``, ``r``: the slot frame of ``a``'s body in the body, ``moved``: whether one is not the body's
    own), or None where the scene's pairs are not all the kernel's or a touching body has no frame.  A
    candidate of a robot-world pair is keyed by the slot frame of ``a``'s body, one of two robot
    shapes by the pair of slot frames ``(frame_a, frame_b)`` (a two-body slot, as
    :func:`~sparsedyn.contact.friction_problem.contact_slots` keys a
    :class:`~sparsedyn.contact.friction_problem.BodyContact`)."""
    key = "slot data plan"
    if key not in scene.cache:
        kp = kernel_plan(scene)
        scene.cache[key] = _keyed(scene, kp, kp.pair) if kp.pairs and kp.complete else None
    return scene.cache[key]


def _keyed(scene, kp, pair):
    """:func:`_plan`'s tuple for candidates of the scene pairs ``pair`` (K,), or None where a touching
    body has no frame."""
    frames = _slot_frames(scene.model)
    ends = [(scene.shapes[i].body, scene.shapes[j].body) for i, j in scene.index[pair].tolist()]
    if not all(a in frames and (b < 0 or b in frames) for a, b in ends):
        return None
    f = [frames[a] for a, _ in ends]
    keys = [x[0] if b < 0 else (x[0], frames[b][0]) for x, (_, b) in zip(f, ends)]
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    E, r = np.array([x[1] for x in f]).reshape(-1, 3, 3), np.array([x[2] for x in f]).reshape(-1, 3)
    moved = not (np.array_equal(E, np.broadcast_to(np.eye(3), E.shape)) and not r.any())
    return (kp, np.array([ids[k] for k in keys], int), list(ids), E, r, scene.pair_friction[pair], moved)


class _Mixed:
    """The plan of a scene whose pairs are the kernel's, robot meshes on world planes and robot meshes
    on world boxes: the kernel's candidates, then :data:`~sparsedyn.contact.reduction.MAX_PATCH_POINTS`
    rows per mesh-plane pair, then as many per mesh-box pair (``pair``: the scene pair of each;
    ``kernel``: the kernel plan; ``mesh``: the mesh-plane pairs' constants, :func:`_mesh_plan`, or
    None; ``boxes``: the mesh-box pairs (B,); ``others``: robot-world pairs of no rows, refused where
    near, :func:`~sparsedyn.contact.mesh_box_step.mesh_box_step_rows`), then one row per pair of two
    convex shapes that coal measures (``hulls`` (H,): :func:`~sparsedyn.contact.hull_pairs.hull_pairs`), then
    each robot shape's rows on a world height field (``fields``:
    :func:`~sparsedyn.contact.collision_hfield.field_pairs`)."""

    def __init__(self, kernel, mesh, boxes=np.zeros(0, int), bb=None, others=np.zeros(0, int), hulls=np.zeros(0, int),
                 fields=(np.zeros(0, int), np.zeros(0, int))):
        self.kernel, self.mesh, self.boxes, self.bb, self.others = kernel, mesh, boxes, bb, others
        self.hulls, self.fields = hulls, fields
        per = [np.repeat(mesh["pairs"], MAX_PATCH_POINTS)] if mesh is not None else []
        per.append(np.repeat(boxes, MAX_PATCH_POINTS))
        if bb is not None:                                 # then box_box_native.ROWS per pair of two boxes
            per.append(np.repeat(bb.pair, ROWS))
        per += [hulls, np.repeat(*fields)]
        self.pair = np.concatenate(([kernel.pair] if kernel.pairs else []) + per)
        # with pairs of two boxes, meshes on boxes or coal's pairs, the rows by pair (collide's order of the
        # hits: a step's contacts are then in the order of the NumPy road's); None: as they are
        self.order = None
        if bb is not None or len(boxes) or len(hulls) or len(fields[0]):
            order = np.argsort(self.pair, kind="stable")
            if not np.array_equal(order, np.arange(len(order))):
                self.order, self.pair = order, self.pair[order]


def _mixed_plan(scene):
    """:func:`_plan`'s tuple for a scene whose pairs the kernel leaves out are all robot meshes on
    world planes (their rows: :func:`mesh_plane_rows`), on world boxes (:func:`mesh_box_rows`),
    pairs of two boxes (:func:`~sparsedyn.contact.box_box_step.box_box_rows`, where the native routine is
    built) or of two convex shapes that coal measures (:func:`~sparsedyn.contact.hull_pairs.hull_rows`), its
    first entry a :class:`_Mixed` (with mesh-box pairs, robot-world pairs of no rows too: refused
    where near); None where another pair is left out or a touching body has no frame."""
    key = "slot data plan, meshes on planes"
    if key not in scene.cache:
        kp = kernel_plan(scene)
        ks = np.flatnonzero(~kp.inside)
        boxes = ks[_robot_meshes_on(scene, ks, "box")]
        bb = box_box_plan(scene) if box_box_available() else None
        rest = np.setdiff1d(ks, boxes if bb is None else np.concatenate([boxes, bb.pair]))
        planes = rest[_robot_meshes_on(scene, rest, "plane")]
        others = np.setdiff1d(rest, planes)
        hulls = hull_pairs(scene, others)                 # (a cylinder on a world box too: coal's closest pair)
        fields = field_pairs(scene, others)               # (a robot shape on a world height field)
        others = np.setdiff1d(others, np.concatenate([hulls, fields[0]]))
        mesh = _mesh_plan(scene, planes) if len(planes) else None
        plan = None
        world = all(min(scene.shapes[i].body, scene.shapes[j].body) < 0 for i, j in scene.index[others].tolist())
        if (mesh is not None or len(boxes) or bb is not None or len(hulls) or len(fields[0])) and \
                (not len(others) or (len(boxes) and world)):
            mixed = _Mixed(kp, mesh, boxes, bb, others, hulls, fields)
            plan = _keyed(scene, kp, mixed.pair)
            plan = None if plan is None else (mixed,) + plan[1:]
        scene.cache[key] = plan
    return scene.cache[key]


def _mesh_plan(scene, ks):
    """The constants of the mesh-plane pairs ``ks`` (each a robot mesh, ``a``, on a world plane,
    ``b``): their scene pairs, bodies, vertex rows, planes (normal, point), the hull vertices in the
    bodies' frames and the bounding spheres (centre in the body, radius); None where one is not such
    a pair."""
    shapes = scene.shapes
    idx = scene.index[ks]
    if not len(ks) or not all(shapes[i].kind == "mesh" and shapes[i].body >= 0 and shapes[j].kind == "plane"
                              and shapes[j].body < 0 for i, j in idx.tolist()):
        return None
    V, rows = mesh_vertices(scene)
    Vb = V.copy()                                          # each mesh's vertices in its body's frame
    for i, (start, stop) in rows.items():
        Vb[start:stop] = V[start:stop] @ shapes[i].R.T + shapes[i].p
    c, rad = _bounds(scene)
    a, b = idx[:, 0], idx[:, 1]
    centre = np.array([shapes[i].R @ c[i] + shapes[i].p for i in a]).reshape(-1, 3)
    return {"pairs": np.asarray(ks, int), "body": np.array([shapes[i].body for i in a], int),
            "rows": np.array([rows[i] for i in a.tolist()], int).reshape(-1, 2), "V": Vb,
            "axes": plane_axes(np.array([shapes[j].R[:, 2] for j in b])),
            "pb": np.array([shapes[j].p for j in b]), "centre": centre, "radius": rad[a]}


def mesh_plane_rows(scene, mesh, q, cut, spin=None, ahead=None):
    """The rows (Pm * MAX_PATCH_POINTS, 11) (:func:`~sparsedyn.collision_candidates_near`'s columns)
    of the mesh-plane pairs ``mesh`` (the constants a scene's plan keeps of its robot meshes on
    world planes: their bodies, hull vertices in the bodies' frames, planes and bounding spheres)
    at ``q`` (nq,), each pair's patch within
    its cutoff ``cut`` (Pm,) [m] (:func:`~sparsedyn.contact.reduction.mesh_plane_patches`) in its first
    rows; the other rows' distance is +inf.  A pair whose bounding sphere is beyond its cutoff is not
    computed (a broad phase).  ``spin`` (Pm, 3): each pair's rotation over the step where known
    (:func:`~sparsedyn.contact.look_ahead.pair_spins`), each patch's allowance then its points' own;
    or ``ahead`` ``(v, dt)``, a step's, the rotations those of ``pair_spins(scene, q, v, dt)``.
    A batch ``q`` (B, nq) (``cut`` (B, Pm), ``spin`` (B, Pm, 3)): (B, Pm * MAX_PATCH_POINTS, 11), all
    states' patches in one call (each state's its single call's to rounding).

    On the native road one state's rows come from one native loop over the hull vertices and the
    patches (:func:`~sparsedyn.contact.mesh_plane_loop.mesh_plane_loop_rows`, its broad phase the
    same bounding spheres); without a C compiler, on the NumPy backend and for a batch, from NumPy
    (a batch's one product of the heights per mesh for all its near states)."""
    model = scene.model
    one = np.ndim(q) == 1
    if one and use_backend.current() != "numpy":
        lp = _loop_plan(scene, mesh)
        got = None if lp is None else mesh_plane_loop_rows(scene, lp, q, cut, spin, ahead)
        if got is not None:
            return got
    if ahead is not None:
        spin = pair_spins(scene, q, *ahead)[..., mesh["pairs"], :]
    f = (native_calls(model) or _NONE).get(_FK)
    R, o = f(q) if f is not None and one else forward_kinematics(model, q)
    j = mesh["body"]
    Rj, oj = R[..., j, :, :], o[..., j, :]
    axes, pb = mesh["axes"], mesh["pb"]
    centre = np.einsum("...kij,kj->...ki", Rj, mesh["centre"])
    bound = np.einsum("ki,...ki->...k", axes[:, :, 0], centre + oj - pb) - mesh["radius"]
    if one:                                                # (one state: a batch of one)
        Rj, oj, bound, cut = Rj[None], oj[None], bound[None], np.asarray(cut)[None]
        spin = None if spin is None else np.asarray(spin)[None]
    s, near = np.nonzero(bound < cut + SLACK)              # (state, pair), by state
    out = free_rows((len(Rj), len(j) * MAX_PATCH_POINTS))
    if len(near):
        g, d, wa, wb, nn, local = mesh_plane_patches(mesh["V"], mesh["rows"][near], Rj[s, near],
                                                     oj[s, near], axes[near], pb[near], cut[s, near], scene.margin,
                                                     None if spin is None else spin[s, near])
        _put_patches(out, s[g], near[g], g, d, wa, wb, nn, local)
    return out[0] if one else out


def _put_patches(out, b, k, g, d, wa, wb, n, local):
    """Puts the patches' points (``g`` (m,) their patch, sorted; ``b``, ``k``: its state and pair) in
    the rows (B, Pm * MAX_PATCH_POINTS, 11) ``out``, each patch's in its pair's first rows (``b``
    None: ``out`` (Pm * MAX_PATCH_POINTS, 11), one state's)."""
    at = MAX_PATCH_POINTS * k + np.arange(len(g)) - np.searchsorted(g, g)
    rows = np.empty((len(g), NEAR_COLUMNS))               # the rows whole, put at once
    rows[:, 0], rows[:, 1:4], rows[:, 4:7], rows[:, 7:10] = d, (wa + wb) / 2, n, local
    rows[:, 10] = np.einsum("ki,ki->k", n, wb)
    out[at if b is None else (b, at)] = rows


def _loop_plan(scene, mesh):
    """:func:`~sparsedyn.contact.mesh_plane_loop.loop_plan` of the scene where its pairs are those of
    ``mesh`` (the same hull vertices in the bodies' frames, the same order), else None; kept by the scene."""
    key = "slot data mesh-plane loop plan"
    if key not in scene.cache:
        lp = loop_plan(scene)
        scene.cache[key] = lp if lp is not None and np.array_equal(lp.pair, mesh["pairs"]) else None
    return scene.cache[key]


def _robot_meshes_on(scene, ks, kind):
    """Whether each scene pair of ``ks`` is a robot mesh (its ``a``) on a world shape of ``kind`` (its ``b``)."""
    shapes = scene.shapes
    return np.array([shapes[i].kind == "mesh" and shapes[i].body >= 0 and shapes[j].kind == kind and shapes[j].body < 0
                     for i, j in scene.index[ks].tolist()], bool).reshape(-1)


def _filler(scene, keys, layout):
    """``(slots, first, end, free data)`` of the scene's slot layout, kept while it stays: per slot key
    of ``keys`` its first slot and the one after its last (both 0 where it has none)."""
    snap = (len(layout), sum(layout.values()))            # the layout only grows: this changes with it
    got = scene.cache.get("slot filler")
    if got is None or got[0] != snap:
        slots, _, data = fill_slots([], layout, np.zeros((0, 8)))
        at = {}
        for i, k in enumerate(slots):
            at.setdefault(k, i)
        first = [at.get(k, 0) for k in keys]
        got = scene.cache["slot filler"] = (snap, (slots, first, [f + layout.get(k, 0) for f, k in zip(first, keys)],
                                                   data))
    return got[1]


def _slot_index(ids, first, end):
    """The slot of each candidate of key ids ``ids`` (a list), those of a key in its slots in order, or
    None where a key has more than its slots."""
    nxt = first.copy()
    index = []
    for k in ids:
        i = nxt[k]
        if i >= end[k]:
            return None
        nxt[k] = i + 1
        index.append(i)
    return index


def _selection(scene, plan, mask, filler):
    """``(pair, index, base, put, take, A, b, sel, kept, at, frames)`` of the candidates of the boolean
    ``mask`` (K,): their scene pairs, their slots (``at``: the same, None where they fill every slot in
    order), and their slot data (ns, 8): ``base`` (the free slots' data, each
    contact's friction in its slot) with the entries ``take`` of the candidates' rows (flattened) put
    at ``put``, turned by ``A @ x + b`` where a slot frame is not its body's own (``A``, ``b`` None
    where all are); ``frames`` the layout's slot keys (``filler``'s).  None where a key has more
    candidates than its slots.  Remembered per selection while the layout stays (a resting or sliding
    body touches with the same candidates step after step: :func:`_remembered`)."""
    kp, kid, keys, E, r, mu, moved = plan
    memo = scene.cache.get("slot selections")
    if memo is None or memo[1] is not filler:
        memo = scene.cache["slot selections"] = (scene.cache["slot filler"][0], filler, {})
    code = mask.tobytes()
    got = memo[2].get(code)
    if got is None:
        slots, first, end, free = filler
        sel = mask.nonzero()[0]
        index = _slot_index(kid[sel].tolist(), first, end)
        if index is None:
            return None
        index = np.array(index, int)
        # the slot data: the free slots' with each contact's friction, its other entries put from the rows
        base = free.copy()
        base[index, 0] = mu[sel]
        put = (8 * index[:, None] + np.arange(1, 8)).reshape(-1)          # [p (3), n (3), offset] of a slot
        take = (NEAR_COLUMNS * sel[:, None] + SLOT_COLUMNS).reshape(-1)  # [w_a in a's body (3), n (3), n . w_b]
        turn = None
        if moved and not (np.array_equal(E[sel], np.broadcast_to(np.eye(3), (len(sel), 3, 3))) and not r[sel].any()):
            # body axes -> the slot frame's: p_slot = E (p - r) on each contact's 7 taken entries
            turn = np.eye(7 * len(sel)), np.zeros(7 * len(sel))
            for k, (Ek, rk) in enumerate(zip(E[sel], r[sel])):
                turn[0][7 * k:7 * k + 3, 7 * k:7 * k + 3] = Ek
                turn[1][7 * k:7 * k + 3] = -Ek @ rk
        # the per-body slots' index: None where the contacts fill every slot in order (a box's corners)
        at = None if len(index) == len(slots) and index.tolist() == list(range(len(slots))) else index
        got = (kp.pair[sel], index, base, put, take) + (turn or (None, None)) + (sel, [None], at, slots)
        for x in got[:-3]:
            if x is not None:
                x.flags.writeable = False                  # shared by the steps of this selection
        if len(memo[2]) >= 256:
            memo[2].clear()
        memo[2][code] = got
    return got


def _remembered(scene, mask):
    """:func:`_selection`'s tuple of the candidates ``mask`` (K,) where the scene remembers it for its
    layout as it is and it holds no more contacts than the step's capacity (none to leave out), else
    None: what a step whose contacts persist costs (one lookup; the layout's size the check that it
    has not grown)."""
    memo, layout = scene.cache.get("slot selections"), scene.cache.get("step_slots")
    if memo is None or layout is None or memo[0] != (len(layout), sum(layout.values())):
        return None
    got = memo[2].get(mask.tobytes())
    return got if got is not None and len(got[7]) <= STEP_CAPACITY else None


def near_candidates(scene, kp, q, cutoff=None):
    """:func:`~sparsedyn.collision_candidates_near` of the kernel plan ``kp`` of ``scene`` at ``q``
    (nq,) or (B, nq), the cutoff the largest of ``cutoff`` (per pair, any shape; None: the scene's
    margin): (K, 11) or (B, K, 11), by :func:`~sparsedyn.contact.collision_near.near_rows` (the kernel the
    scene's steps run: where every pair is the collision kernel's, the look-ahead one at ``v = 0``; a
    single state through its ready native callable).  The cutoff is data: a new one is no new build."""
    model = scene.model
    top = kp.cutoff if cutoff is None else np.array(max(
        float(cutoff.max()) if type(cutoff) is np.ndarray and cutoff.size else float(np.max(cutoff, initial=0.0)),
        scene.margin))
    return near_rows(model, q, kp.shapes, top, kp.pairs, kp.complete)


def ahead_candidates(scene, kp, q, v, dt):
    """:func:`~sparsedyn.collision_candidates_ahead` of the kernel plan ``kp`` of ``scene`` at ``q``
    (nq,) or (B, nq) and ``v`` (nv,) or (B, nv) for a step of ``dt`` (a float > 0): ``(candidates,
    cutoff)`` (K, 11) and (K,), or with a batch axis.  A single state through the ready native
    callable (as the public function would call it, less its frame)."""
    model = scene.model
    got = scene.cache.get("look")
    f = (native_calls(model) or _NONE).get(_AHEAD)
    if got is None or got[0] != dt or got[3] is not f:     # [margin, dt] and the reach: data, kept while dt stays
        got = scene.cache["look"] = (dt, np.array([scene.margin, dt]), body_reach(scene)[0], f)
    look, reach = got[1], got[2]
    if (f is not None and type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,) and
            type(v) is np.ndarray and v.dtype is _F64 and v.shape == (model.nv,)):
        return f(q, v, kp.shapes, reach, look, kp.pairs)
    return collision_candidates_ahead(model, q, v, kp.shapes, reach, look, kp.pairs)


def _mixed_candidates(scene, mixed, q, cutoff, ahead, fresh=True):
    """``(rows, within)`` of a :class:`_Mixed` plan at ``q``: the kernel's candidates (as
    :func:`scene_slot_data` computes them) and the mesh-plane pairs' rows (:func:`mesh_plane_rows`),
    each with its pair's cutoff (K,) (``cutoff`` (P,), or ``ahead`` ``(v, dt)``: the look-ahead's,
    :func:`~sparsedyn.contact.look_ahead.pair_cutoffs`, and the patches' allowances from each pair's
    rotation, :func:`~sparsedyn.contact.look_ahead.pair_spins`; neither: the margin).  A batch ``q``
    (B, nq) (``cutoff`` (B, P), ``v`` (B, nv) or (nv,)): (B, K, 11) and (B, K), the kernel's and the
    mesh-plane rows of all states at once (the mesh-box pairs' and coal's state by state).  None where a
    pair of no rows (``mixed.others``) may touch.  ``fresh`` False: a state's rows may be this thread's buffers.
    """
    kp, mesh = mixed.kernel, mixed.mesh
    got = cutoff is None and ahead is not None and (
        box_box_step_rows(scene, mixed, box_box_poses, q, *ahead, fresh) or
        plane_step_rows(scene, mixed, q, *ahead, fresh, rest=partial(_other_rows, scene, mixed, q, mesh=True)))
    if got:                                 # (pairs of two boxes, or meshes on planes, beside the kernel's: bound once)
        return got
    spin = look = rows = None
    if cutoff is None and ahead is not None:
        lp = mesh is not None and np.ndim(q) == 1 and use_backend.current() != "numpy" and _loop_plan(scene, mesh)
        if lp:                                             # the rotations in the native loop
            rows = _step_rows(scene, lp, q, *ahead)        # the look-ahead too, in the same call
            cutoff, look = (pair_cutoffs(scene, q, *ahead), ahead) if rows is None else (rows[0], None)
        else:
            cutoff, spin = cutoffs_and_spins(scene, q, *ahead) if mesh is not None else \
                (pair_cutoffs(scene, q, *ahead), None)     # (the rotations: the mesh-plane patches' alone)
    lead = np.shape(q)[:-1]
    cut = np.full(lead + (len(scene.index),), scene.margin) if cutoff is None else cutoff \
        if type(cutoff) is np.ndarray and cutoff.dtype is _F64 and cutoff.shape == lead + (len(scene.index),) else \
        np.broadcast_to(np.asarray(cutoff, float), lead + (len(scene.index),))
    rows = [rows[1]] if rows is not None else [mesh_plane_rows(
        scene, mesh, q, cut[..., mesh["pairs"]], None if spin is None else spin[..., mesh["pairs"], :], look)] \
        if mesh is not None else []
    more = _other_rows(scene, mixed, q, cut, bool(rows))
    if more is None:
        return None
    rows += more
    rows = rows[0] if len(rows) == 1 else np.concatenate(rows, -2)
    if kp.pairs:
        rows = np.concatenate([near_candidates(scene, kp, q, cut).reshape(lead + (-1, NEAR_COLUMNS)), rows], -2)
    return rows if mixed.order is None else rows.take(mixed.order, -2), cut.take(mixed.pair, -1)


def _other_rows(scene, mixed, q, cut, mesh):
    """The rows of a :class:`_Mixed` plan's pairs beyond the kernel's and the mesh-plane pairs' at ``q`` (nq,)
    or (B, nq) with every scene pair's cutoff ``cut`` (P,) or (B, P): those of its robot meshes on world
    boxes, its pairs of two boxes, coal's pairs and the height fields', a list of arrays (..., k, 11) in that
    order (``mesh``: whether the plan has mesh-plane rows); None where a pair of no rows may touch or a pair
    has more hits than its rows."""
    lead, out = np.shape(q)[:-1], []
    states = [(q, cut)] if not lead else list(zip(q, cut))
    # (per state, coal's pairs near: True where no broad phase has run here, hull_rows's own then)
    boxes, others, bb_near, broad = mixed.boxes, mixed.others, True, [True] * len(states)
    if len(boxes) or not (mesh or len(mixed.hulls) or len(mixed.fields[0])):   # (else those rows alone)
        got = [mesh_box_step_rows(scene, boxes, others, mixed.bb, mixed.hulls, x, c) for x, c in states]
        if any(x is None for x in got):
            return None                                    # (a pair of no rows near: mesh_box_rows)
        # (no pair of two boxes within its cutoff: no rows; coal's pairs: the road's answer, True, False or (H,))
        bb_near, broad = any(x[1] for x in got), [x[2] for x in got]
        got = [x[0] for x in got]
        out.append(got[0] if not lead else np.stack(got) if got else np.zeros(lead + (0, NEAR_COLUMNS)))
    if mixed.bb is not None:
        out.append(box_box_rows(scene, mixed.bb, q, cut[..., mixed.bb.pair]) if bb_near else
                    np.full(lead + (len(mixed.bb.pair) * ROWS, NEAR_COLUMNS), np.inf))
    if lead and not len(boxes) and (len(mixed.hulls) or len(mixed.fields[0])):   # (a batch: as each single step)
        got = extra_rows_by_state(scene, mixed.hulls, mixed.fields, [(*placements(scene, x), c) for x, c in states])
        return None if got is None else out + [got]
    if len(mixed.hulls):                                   # (coal's pairs, state by state; none near: free rows)
        if any(m if type(m) is bool else m.any() for m in broad):
            got = [hull_rows(scene, mixed.hulls, *placements(scene, x), np.ascontiguousarray(c), broad=m)
                   for (x, c), m in zip(states, broad)]
            out.append(got[0] if not lead else np.stack(got))
        else:
            out.append(free_rows(lead + (len(mixed.hulls),)))
    if len(mixed.fields[0]):                               # (the height fields', state by state)
        got = [hfield_rows(scene, mixed.fields, *placements(scene, x), np.ascontiguousarray(c)) for x, c in states]
        if any(x is None for x in got):
            return None                                    # (a pair with more hits than its rows)
        out.append(got[0] if not lead else np.stack(got))
    return out


def _step_rows(scene, lp, q, v, dt):
    """:func:`~sparsedyn.contact.mesh_plane_loop.mesh_plane_step_rows` (each pair's look-ahead and the
    mesh-plane rows of a step, one native call) where ``q`` (nq,), ``v`` (nv,) are float64 arrays and
    ``dt`` a number > 0, else None (then :func:`~sparsedyn.contact.look_ahead.pair_cutoffs`)."""
    return mesh_plane_step_rows(scene, lp, q, v, float(dt), body_reach(scene)[0]) if one_state(scene.model, q, v, dt) \
        else None


def scene_slot_data(scene, q, cutoff=None, ahead=None, data_slots=False):
    """``(pair, slots)``: the scene pair (an index of ``scene.pairs``) of each contact of ``scene`` at
    ``q`` (nq,) (nc,) and their :class:`~sparsedyn.contact.friction_problem.ContactSlots` (those of
    ``scene_slots(scene, scene_contacts(scene, q, cutoff=cutoff))`` to rounding, the layout grown as
    there; ``cutoff`` (P,): each pair's look-ahead, None: the margin; ``ahead``: ``(v, dt)``, the
    look-ahead of a step of ``dt`` from ``v`` computed in the collision kernel's call instead, that of
    :func:`~sparsedyn.contact.look_ahead.pair_cutoffs`), or
    ``None`` where this road does not apply (the NumPy backend, a pair of kinds without a closed form
    in the kernel other than a robot mesh on a world plane, a touching body with no frame): then
    take that road.  A robot mesh on a world plane is no closed form of the collision kernel: its rows
    come from its hull vertices' heights (:func:`mesh_plane_rows`: one native loop over the vertices
    and the patches), beside the kernel's candidates of the other pairs.

    ``data_slots``: ``(pair, slots, data, rows)`` instead, ``slots`` made when first called (a function of
    no argument), ``rows`` a function making the contacts' ``[p (3), plane (4)]`` (nc, 7) of those slots
    and ``data`` the same contacts in the scene's data slots
    (:func:`~sparsedyn.contact.data_slots.data_slots` of ``slots``, each contact's point in the world
    its witness point on ``a``, ``x + d n / 2`` of the kernel's row, to rounding the slot frame's
    placement of its point)."""
    if use_backend.current() == "numpy":
        return None
    plan = _plan(scene) or _mixed_plan(scene)
    if plan is None:
        return None
    kp = plan[0]
    # the candidates within their pair's cutoff (d: column 0); the pairs beyond it: [b > cutoff, 0, ...]
    if isinstance(kp, _Mixed):
        got = _mixed_candidates(scene, kp, q, cutoff, ahead)
        if got is None:
            return None
        c, within = got
    elif ahead is not None:
        got = scene.cache.get("look")
        f = got is not None and got[0] == ahead[1] and got[3]
        v = ahead[0]
        if (f and type(q) is np.ndarray and q.dtype is _F64 and q.ndim == 1 and type(v) is np.ndarray and
                v.dtype is _F64 and v.ndim == 1):              # (their lengths checked by the kernel's fast path)
            c, within = f(q, v, kp.shapes, got[2], got[1], kp.pairs)
        else:
            c, within = ahead_candidates(scene, kp, q, *ahead)
    else:
        c = near_candidates(scene, kp, q, cutoff)
        within = scene.margin if cutoff is None else cutoff.take(kp.pair)
    mask = c[:, 0] < within
    got = _remembered(scene, mask) or _select(scene, plan, c, within, mask)
    if not data_slots:
        return got[0], _per_body(got, c)()
    _, index, base, _, _, _, _, sel, kept, _, frames = got
    pair, per_body, rows = _contacts_of(got, c)
    return pair, per_body, _data_slots(scene, frames, index, base, sel, kept, c), rows


def _per_body(got, c):
    """A function of no argument making the per-body :class:`~sparsedyn.contact.friction_problem.ContactSlots`
    of the selection ``got`` (:func:`_selection`'s tuple) of the candidates ``c`` (K, 11)."""
    _, _, base, put, take, A, b, _, _, at, frames = got

    def per_body():
        data = base.copy()                                 # (ns, 8) [mu, p (3), n (3), offset]
        data.put(put, c.take(take) if A is None else A.dot(c.take(take)) + b)
        return tuple.__new__(ContactSlots, (frames, at, data))
    return per_body


def _contacts_of(got, c):
    """``(pair, per_body, rows)`` of the selection ``got`` of the candidates ``c`` (K, 11): their scene
    pairs, :func:`_per_body`, and a function making their ``[p (3), plane (4)]`` (nc, 7) straight from
    the rows (the per-body slots' entries, not laid out), each point in its body's own axes, not
    turned into its slot frame's: the warm start's matching compares the points of one pair, of one
    body, whose distances are the same in either axes, and a fused trajectory step compares these
    rows in its native call (:func:`~sparsedyn.contact.scene_fused.chained_step`)."""
    take = got[4]
    return got[0], _per_body(got, c), lambda: c.take(take).reshape(-1, 7)


def held_contacts(scene, sel, c):
    """``(pair, per_body, rows)`` of the candidates ``sel`` (nc,) of ``c`` (K, 11) of the kernel plan of
    ``scene`` (a fused step's, :mod:`~sparsedyn.contact.scene_fused`; the layout grown where a slot key has
    more of them than its slots: a step in data slots runs without them): the objects of
    :func:`scene_slot_data`'s selection (their scene pairs, a function making their per-body slots, a
    function making their ``[p (3), plane (4)]`` (nc, 7))."""
    plan = _plan(scene) or _mixed_plan(scene)
    mask = np.zeros(len(c), bool)
    mask[sel] = True
    return _contacts_of(_remembered(scene, mask) or _select(scene, plan, c, None, mask), c)


def _select(scene, plan, c, within, mask):
    """:func:`_selection`'s tuple of the candidates ``c`` (K, 11) within their cutoff (``mask``; ``within`` (K,)
    or a number; None: ``mask`` as it is, a native step's), no more than ``look_ahead.STEP_CAPACITY`` where the
    others are beyond the step's reach (:func:`~sparsedyn.contact.look_ahead.capacity_mask`), the layout grown
    where a slot key outgrows its slots."""
    kid, keys = plan[1], plan[2]
    if within is not None and np.count_nonzero(mask) > STEP_CAPACITY:      # the gaps beyond the step's reach left out
        mask = capacity_mask(c[None, :, 0], np.broadcast_to(within, mask.shape)[None], mask[None], scene.margin,
                             STEP_CAPACITY)[0]
    layout = scene.cache.setdefault("step_slots", {})     # shared with scene_slots: it only grows
    got = _selection(scene, plan, mask, _filler(scene, keys, layout))
    if got is None:                                        # a key outgrew its slots: the layout grows
        ids = kid[mask].tolist()
        for k in set(ids):
            n = ids.count(k)
            if layout.get(keys[k], 0) < n:
                layout[keys[k]] = 1 << (n - 1).bit_length()
        got = _selection(scene, plan, mask, _filler(scene, keys, layout))
    return got


def _data_slots(scene, frames, index, base, sel, kept, c):
    """The contacts of the rows ``sel`` of the candidates ``c`` (K, 11), in the per-body slots
    ``frames`` at ``index`` (``base`` their data with the contacts' friction), in the scene's data
    slots (:func:`scene_slot_data`); ``kept``: a list of one entry where the selection keeps its data
    slots' friction and weights while their number stays, and where the entries of ``c`` go."""
    nc = len(sel)
    n = data_slot_count(scene, nc)
    got = kept[0]
    if got is None or got[0] != n:
        keys = tuple(frames[i] for i in index.tolist())
        width = 8 + scene.model.nv
        # one take of the rows' [x (3), n (3), n . w_b] and d (3 times), one put of the first seven:
        # the slot's [p (3), n (3), offset] (a few calls on flat arrays: 2-d slices cost more than the sums)
        k, col = NEAR_COLUMNS * sel[:, None], np.arange(1, 4)
        take = np.concatenate([(k + col).ravel(), (k + col + 3).ravel(), k[:, 0] + 10, np.repeat(k[:, 0], 3)])
        at = width * np.arange(nc)[:, None]
        put = np.concatenate([(at + col).ravel(), (at + col + 3).ravel(), at[:, 0] + 7])
        got = kept[0] = (n, data_slot_base(scene, keys, base[index, 0]), (DATA_SLOT,) * n,
                         None if nc == n else np.arange(nc), take, put)
        for x in got[1], got[3]:
            if x is not None:
                x.flags.writeable = False
    _, empty, structure, at, take, put = got
    data = empty.copy()                                    # (n, 8 + nv) [mu, p (3), n (3), offset, weights]
    if nc:
        x = c.take(take)
        d = x[7 * nc:]
        np.multiply(d, x[3 * nc:6 * nc], out=d)
        d *= 0.5
        x[:3 * nc] += d                                    # w_a = x + d n / 2 (world)
        data.put(put, x[:7 * nc])
    return tuple.__new__(ContactSlots, (structure, at, data))
