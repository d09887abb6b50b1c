"""The geometry of a step's contacts in a scene, laid out in its slots: what the derivatives of the step
(:mod:`~sparsedyn.contact.scene_derivatives`, whose module docstring defines a slot's geometry) hold
fixed in the slots' frames.

Two forms of one map: :func:`slot_geometry` (NumPy, the reference: from the scene, the state and the
step's slots) and :func:`slot_geometry_of` (kernel use: from the step's slot data and each slot's
radii, kind and sliding point's derivative, :func:`slot_shapes`, inside the compiled derivatives'
program, so that a step's derivatives place no contact in NumPy).
"""

from __future__ import annotations

from itertools import product

import numpy as np

from ..algorithms.kinematics import frame_placements, frame_world_transform, joint_transforms, world_transforms
from ..model.spatial import pose, symmetric_mv
from .collision import placements
from .curved_points import sliding_point, turning_normal
from .friction_problem import slot_frames
from .scene_base import remembered

__all__ = ["slot_geometry", "slot_geometry_of", "slot_shapes", "slot_kinds", "told_at_hit", "kinds_fixed",
           "witnesses_tell", "own_at_witnesses", "in_order", "GEOMETRY", "SHAPES", "KINDS", "SLIDING", "ROUND_A"]

#: The width of a slot's geometry (the module docstring of :mod:`~sparsedyn.contact.scene_derivatives`).
GEOMETRY = 21

#: The kinds of shapes whose contacts are a sphere's (a center fixed in the body, a radius).
ROUND = ("sphere", "capsule")

#: The kinds of contact, 0 ``pp``, 1 ``pb``, 2 ``ap`` and 3 ``ll`` (the module docstring of
#: :mod:`~sparsedyn.contact.scene_derivatives`), each of which a slot may hold unless told otherwise; as an
#: array, against which a contact's one-hot columns are set.
KINDS, _KINDS = (0, 1, 2, 3), np.arange(4)

#: The mark, among a slot's kinds, of a slot whose ``pb`` contact may slide over a's curved surface (an
#: ellipsoid or a cylinder's rim on a face: a vertex, ``r_a = 0``) or turn its normal over b's (a sphere
#: against an ellipsoid) or whose ``ap`` normal may turn over a's (an ellipsoid against a sphere): its
#: geometry's ``K`` is used.
SLIDING = 4

#: Which of a sliding ``pb`` slot's terms its ``K`` is, told by the data (a sphere's normal turning where
#: ``r_a / (r_a + ROUND_A)`` is 1, exactly so for any radius above 1e-280 m, a vertex's point sliding where it
#: is 0).
ROUND_A = 1e-300

#: The kinds of ``a`` whose contact on a face slides over their curved surface as they turn, and those of
#: ``b`` flat at a face's hit.
_CURVED, _FLAT = ("ellipsoid", "cylinder"), ("plane", "box", "hfield")

#: The kinds of shapes whose hits are told by their features at the hit (a point, a line or a face each:
#: :func:`_feature`), where one of them is a capsule or a box (and a cylinder against a sphere).
_FEATURED = ("sphere", "capsule", "box")

#: The width of a slot's shapes ``[r_a, r_b, w_pp, w_pb, w_ap, w_ll, K (6)]`` (:func:`slot_shapes`).
SHAPES = 12

#: The shapes of a free slot, a vertex on a plane (kind ``pb``).
FREE_SHAPES = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0) + (0.0,) * 6


# --- the geometry of a step's contacts, laid out in its slots ------------------------------------------

def slot_geometry(scene, q, pair, slots) -> np.ndarray:
    """The geometry (ns, 21) of the slots ``slots`` (a :class:`~sparsedyn.contact.friction_problem.ContactSlots`
    of a step in ``scene`` at ``q`` (nq,), whose contact ``k`` is a hit of the scene pair ``pair[k]``
    (an index of ``scene.pairs``)): each contact's centres, radii, normal and kind in its slot's frames
    (:mod:`~sparsedyn.contact.scene_derivatives`), from the slot's data (the witness point of ``a`` in
    the slot's frame, the normal and the plane through the witness point of ``b``); a free slot a
    vertex at its frame's origin on the plane 1000 km below it."""
    Rf, pf = frame_placements(scene.model, q)
    fa, fb, free, two = _slot_ends(scene, slots.frames)
    full = in_order(slots, len(pair))                            # contact k in slot k, no free slot
    out = np.empty((len(pair), GEOMETRY)) if full else free.copy()
    if len(pair):
        index = slice(None) if full else np.arange(len(pair)) if slots.index is None else np.asarray(slots.index)
        a, b = (fa, fb) if full else (fa[index], fb[index])
        data = slots.data if full else slots.data[index]
        kind, shapes, flags = _kinds(scene, q, np.asarray(pair, np.intp), a, b, Rf, pf, data)
        out[index] = _contact_geometry(Rf, pf, a, b, data, kind, shapes, not len(two), *flags)
    if len(two) and not full:                                    # a free slot of two bodies: the plane in b's axes
        two = two[~np.isin(two, np.arange(len(pair)) if slots.index is None else slots.index)]
        R, p = Rf[fb[two]], pf[fb[two]]
        out[two, 4:7] = np.einsum("kji,kj->ki", R, np.array([0.0, 0.0, -1e6]) - p)
        out[two, 8:11] = R[:, 2]
    return out


def slot_geometry_of(model, q, data, shapes, frames, kinds=None):
    """The geometry (ns, 21) of the slots ``frames`` (slot structures: a frame index, or a pair of them)
    at ``q`` (nq,) from their ``data`` (ns, 8) (the step's slot data ``[mu, p_a (3), n (3), offset]``:
    a's witness point in its frame's axes, the world normal and the plane ``n . x = offset`` through b's
    witness point; a free slot's the plane 1000 km below) and ``shapes`` (ns, 12) (:func:`slot_shapes`):
    :func:`slot_geometry`'s map (``_contact_geometry``) written for one state and traced values.
    ``kinds``: per slot the kinds it may hold (None: every one); a slot that holds ``pb`` alone takes
    its normal in b's axes, one without ``pb`` in a's, without the weight.  Kernel use, no checks."""
    Xup, _ = joint_transforms(model, q)
    ends = [slot_frames(f) for f in frames]
    X0 = world_transforms(model, Xup)
    poses = {k: pose(frame_world_transform(model, X0, k)) for e in ends for k in e if k is not None}
    out = []
    for i, (ka, kb) in enumerate(ends):
        d, s = data[i], shapes[i]
        kind = KINDS if kinds is None else tuple(k for k in kinds[i] if k != SLIDING)
        Ra, oa = poses[ka]
        p, n = d[1:4], d[4:7]
        wa = Ra @ p + oa
        cb = wa - (n @ wa + s[1] - d[7]) * n                     # b's centre (its witness point for a vertex)
        na = nt = Ra.T @ n
        if 2 in kind and (kinds is None or SLIDING in kinds[i]):  # an ap normal turning: less K at b's centre
            nt = na - s[4] * symmetric_mv(s[6:SHAPES], Ra.T @ (cb - oa))
        if kb is None:
            Rb, ob, nb = None, None, n
        else:
            Rb, ob = poses[kb]
            cb, nb = Rb.T @ (cb - ob), Rb.T @ n
        if 1 in kind and (kinds is None or SLIDING in kinds[i]):  # a pb normal turning: less K at a's centre
            ca = wa + s[0] * n
            turn = s[3] * s[0] / (s[0] + ROUND_A)
            nb = nb - turn * symmetric_mv(s[6:SHAPES], ca if kb is None else Rb.T @ (ca - ob))
        normal = nb if kind == (1,) else nt if 1 not in kind else s[3] * nb + (1.0 - s[3]) * nt
        out.append(np.concatenate([p + s[0] * na, s[0:1], cb, s[1:2], normal, s[2:SHAPES]]))
    return np.stack(out)


def layout_key(slots, pair):
    """The key of a contact set's layout: the slots' frames, the contacts' scene pairs ``pair`` (nc,)
    intp, and their slots (None: in order)."""
    return slots.frames, pair.tobytes(), None if slots.index is None else np.asarray(slots.index).tobytes()


def _read_only(a):
    a.flags.writeable = False
    return a


def slot_shapes(scene, q, pair, slots) -> np.ndarray:
    """The shapes (ns, 12) ``[r_a, r_b, w_pp, w_pb, w_ap, w_ll, K (6)]`` of the slots ``slots`` (a
    :class:`~sparsedyn.contact.friction_problem.ContactSlots` of a step in ``scene`` at ``q`` (nq,),
    whose contact ``k`` is a hit of the scene pair ``pair[k]``): each contact's radii (0 for a vertex),
    the one-hot weights of its kind and the curvature ``K`` of its sliding point (``_kinds``), a free
    slot's ``FREE_SHAPES``; with the slots' data, what :func:`slot_geometry_of` places."""
    table = _kind_table(scene)
    pair = np.asarray(pair, np.intp)
    if not told_at_hit(scene, pair, q, slots):                   # the shapes fix each slot's: kept per contact set
        return remembered(scene, "slot shapes", layout_key(slots, pair),
                          lambda: _read_only(_laid_out(slots, pair, table[0][pair, 1:])))
    if len(pair):                                                # told at the hit: features, a sliding point
        index = np.arange(len(pair)) if slots.index is None else np.asarray(slots.index)
        fa, fb = (x[index] for x in _slot_ends(scene, slots.frames)[:2])
        Rf, pf = frame_placements(scene.model, q)
        rows = _kinds(scene, q, pair, fa, fb, Rf, pf, slots.data[index])[1]
    else:
        rows = table[0][pair, 1:]
    return _laid_out(slots, pair, rows)


def _laid_out(slots, pair, rows):
    """The shapes ``rows`` (nc, 12) of the contacts of ``pair`` in ``slots``' slots, a free slot's
    ``FREE_SHAPES``."""
    if in_order(slots, len(pair)):
        return rows
    out = np.empty((len(slots.frames), SHAPES))
    out[:] = FREE_SHAPES                                         # (np.tile: a Python function, slower)
    out[np.arange(len(pair)) if slots.index is None else slots.index] = rows
    return out


def _contact_geometry(Rf, pf, a, b, data, kind, shapes, in_world, all_pb, round_a):
    """The geometry (nc, 21) of contacts in the frames ``a`` (nc,) and ``b`` (nc,; -1: the world) placed at
    ``(Rf, pf)`` (the frames' rotations and origins), their slots' ``data`` (nc, 8) ``[mu, p_a (3), n (3),
    offset]``, ``kind`` (nc,) and ``shapes`` (nc, 12) (radii ``r_a``, ``r_b``, one-hot weights of their
    kinds and curvatures ``K``: :func:`slot_shapes`):
    a's centre in a's axes ``R_a^T (w_a + r_a n - o_a) = p_a + r_a R_a^T n`` (``w_a`` the witness point of
    a), b's from its witness point ``w_b = w_a - distance n`` (``w_b - r_b n``: b's centre, the witness
    point for a vertex) in b's axes, the normal in b's axes where it is b's plane (kind 1), else in a's.
    ``in_world``: every ``b`` is the world; ``all_pb``: every kind is 1; ``round_a``: some ``r_a`` is not 0
    (what the scene's pairs tell, sparing NumPy's reductions of these few rows)."""
    out = np.empty((len(a), GEOMETRY))
    ra, rb = shapes[:, 0], shapes[:, 1]
    Ra, p, n = Rf[a], data[:, 1:4], data[:, 4:7]
    wa = np.einsum("kij,kj->ki", Ra, p) + pf[a]
    cb = wa - (np.einsum("ki,ki->k", n, wa) + (rb - data[:, 7]))[:, None] * n
    na = np.einsum("kji,kj->ki", Ra, n) if round_a or not all_pb else None        # n in a's axes
    out[:, 0:3] = p + ra[:, None] * na if round_a else p
    out[:, 3], out[:, 7], out[:, 11:] = ra, rb, shapes[:, 2:]
    if in_world or b.max() < 0:                                  # b in the world: its points in world axes
        out[:, 4:7], nb = cb, n
    else:
        world = b < 0
        Rb, ob = Rf[b], pf[b]
        Rb[world], ob[world] = np.eye(3), 0.0
        out[:, 4:7] = np.einsum("kji,kj->ki", Rb, cb - ob)
        nb = np.einsum("kji,kj->ki", Rb, n)
    turning = np.flatnonzero((kind == 2) & shapes[:, 6:].any(1))  # an ap normal turning: less K at b's centre
    for k, y in zip(turning.tolist(), np.einsum("kji,kj->ki", Ra[turning], (cb - pf[a])[turning])):
        na[k] -= symmetric_mv(shapes[k, 6:], y)
    turning = np.flatnonzero((kind == 1) & (ra > 0) & shapes[:, 6:].any(1))  # a pb normal: less K at a's centre
    if turning.size:
        nb = nb.copy()
        for k in turning.tolist():
            ca = wa[k] + ra[k] * n[k]
            nb[k] -= symmetric_mv(shapes[k, 6:], ca if b[k] < 0 else Rf[b[k]].T @ (ca - pf[b[k]]))
    out[:, 8:11] = nb if all_pb else np.where((kind == 1)[:, None], nb, na)
    return out



def in_order(slots, nc):
    """Whether the ``nc`` contacts laid out in ``slots`` fill them in order (contact ``k`` in slot ``k``)."""
    ns = len(slots.frames)
    return nc == ns and (slots.index is None or np.asarray(slots.index).tolist() == list(range(ns)))


def _slot_ends(scene, frames):
    """``(fa (ns,), fb (ns,), free (ns, 21), two)`` of the slot layout ``frames`` (kept in
    ``scene.cache`` per layout): each slot's frame ``a`` and ``b`` (-1: the world), the geometry of the
    free slots (a vertex at ``a``'s origin on the world plane 1000 km below), and the slots of two
    bodies (whose free geometry is a plane of ``b``, placed at each ``q``)."""
    def make():
        ends = [slot_frames(f) for f in frames]
        fa = np.array([e[0] for e in ends], int)
        fb = np.array([-1 if e[1] is None else e[1] for e in ends], int)
        free = np.zeros((len(frames), GEOMETRY))
        free[:, 6], free[:, 10], free[:, 12] = -1e6, 1.0, 1.0
        return fa, fb, free, np.flatnonzero(fb >= 0)
    return remembered(scene, "slot ends", frames, make, 64)


def _kinds(scene, q, pair, a, b, Rf, pf, data):
    """``(kind (nc,), shapes (nc, 12), (all_pb, round_a))`` of hits of the scene pairs ``pair`` (nc,) in
    the frames ``a`` (nc,) and ``b`` (nc,; -1: the world) placed at ``(Rf, pf)``, their slots' ``data``
    (nc, 8) (the witness point of a in its frame's axes at ``data[:, 1:4]``): kind 0 (``pp``), 1
    (``pb``), 2 (``ap``) or 3 (``ll``) of :mod:`~sparsedyn.contact.scene_derivatives`, and the shapes
    of :func:`slot_shapes` (radii, 0 for a vertex; the kinds' one-hot weights; the ``K`` of a curved shape's
    point on a face or of an ellipsoid's normal turning against a sphere in either order,
    :mod:`~sparsedyn.contact.curved_points`; the lines of a ``pp`` or ``ll`` hit, :func:`_featured`); whether
    every pair of the scene is of kind 1, whether any has a round ``a``."""
    table = _kind_table(scene)
    rows = table[0][pair]                                        # (a copy: what the hit tells is set below)
    kind = rows[:, 0]
    if table[1]:
        told = np.flatnonzero(table[6][pair])                    # spheres, capsules, boxes: their features
        slide = np.flatnonzero(table[4][pair])                   # a curved shape on a face
        R, p = placements(scene, q) if told.size or slide.size else (None, None)
        for k in told.tolist():
            Rb = np.eye(3) if b[k] < 0 else Rf[b[k]]
            kind[k], rows[k, 7:], rows[k, 1:3] = _featured(scene, scene.index[pair[k]], R, p, Rf[a[k]], pf[a[k]], Rb,
                                                           data[k], rows[k, :3])
        rows[told, 3:7] = kind[told, None] == _KINDS
        for k in slide.tolist():
            (i, j), pose = scene.index[pair[k]], (Rf[a[k]], pf[a[k]], data[k])
            wa = pose[0] @ data[k, 1:4] + pose[1]                # (a's witness point)
            if scene.shapes[j].kind == "sphere":                 # an ellipsoid a's normal turning
                rows[k, 7:] = turning_normal(scene, i, R, pose[0], data[k], wa, rows[k, 2], -1.0)
            elif scene.shapes[i].kind == "sphere":               # an ellipsoid b's
                Rb = np.eye(3) if b[k] < 0 else Rf[b[k]]
                rows[k, 7:] = turning_normal(scene, j, R, Rb, data[k], wa, rows[k, 1], 1.0)
            else:
                rows[k, 7:] = sliding_point(scene, (i, j), R, p, *pose)
    return kind, np.ascontiguousarray(rows[:, 1:]), table[2]    # (contiguous: the compiled kernels' fast path)


def _featured(scene, ij, R, p, Ra, oa, Rb, data, pair_row):
    """``(kind, K (6,), (r_a, r_b))`` of the hit ``data`` (a slot's, of frames ``a`` and ``b`` turned by
    ``Ra``, ``Rb``, a's origin at ``oa``) of the shape ``ij[0]`` on ``ij[1]`` (spheres, capsules or boxes,
    or a cylinder and a sphere, placed at ``(R, p)``), from the features of each at the hit
    (:func:`_feature`): a point on a face ``pb``, a face on a point ``ap``, two points or a point and a line
    ``pp`` (the line's direction in ``K``: a's in its frame's axes ``K[0:3]``, b's ``K[3:6]``; a cylinder's
    side its axis, its radius the contact's), two lines crossing ``ll`` (``e_b`` signed so that ``e_a x
    e_b`` is along the normal); else the pair's own kind ``pair_row[0]`` (two boxes: a's corner on b
    ``pb``, else ``ap``) with its point held (parallel lines, an edge on a face, a cylinder's rim)."""
    i, j = ij
    n, ra, rb = data[4:7], pair_row[1], pair_row[2]
    wa = Ra @ data[1:4] + oa
    fa, ea = _feature(scene.shapes[i], R[i], p[i], wa + ra * n)
    fb, eb = _feature(scene.shapes[j], R[j], p[j], wa - (n @ wa - data[7] + rb) * n)
    kind, K = _FEATURE_KINDS.get((fa, fb)), np.zeros(6)
    if kind == 0 and ra + rb == 0.0 or kind == 3 and np.linalg.norm(np.cross(ea, eb)) < _TILTED:
        kind = None                                              # a box's corner on an edge; parallel lines
    if kind is None:
        if pair_row[0] >= 0:
            return pair_row[0], K, (ra, rb)
        return (1 if _corner(scene.shapes[i], R[i], p[i], wa) else 2), K, (ra, rb)
    if kind in (0, 3):
        if kind == 3 and np.cross(ea, eb) @ n < 0:
            eb = -eb
        K[0:3] = 0.0 if ea is None else Ra.T @ ea
        K[3:6] = 0.0 if eb is None else Rb.T @ eb
    if kind == 0:                                                # a cylinder's side: its axis, a radius away
        ra, rb = (scene.shapes[x].size[0] if scene.shapes[x].kind == "cylinder" else r for x, r in ((i, ra), (j, rb)))
    return kind, K, (ra, rb)


#: The kind of a hit of two features (0 a point, 1 a line, 2 a face: :func:`_feature`) of ``a`` and ``b``;
#: the others (a line or a face on a face, a cylinder's rim: 3) hold their point.
_FEATURE_KINDS = {(0, 0): 0, (0, 1): 0, (1, 0): 0, (1, 1): 3, (0, 2): 1, (2, 0): 2}


def _feature(shape, R, p, c):
    """``(feature, e)`` of a sphere, a capsule, a box or a cylinder placed at ``(R, p)`` whose centre or point
    at a hit is ``c`` (world; a round shape's: its witness point moved a radius inwards): 0 a point (a
    sphere's centre, a capsule's end, a box's corner), 1 a line along the unit ``e`` (3,) (world; a
    capsule's side, a box's edge, a cylinder's side: its axis), 2 a face (a box's, a cylinder's cap), 3 a
    cylinder's rim; ``e`` None but for a line."""
    if shape.kind == "sphere":
        return 0, None
    size = np.asarray(shape.size, float)
    x = R.T @ (c - p)
    if shape.kind in ("capsule", "cylinder"):
        tol = _ON_EDGE * max(1.0, size[0], size[1])
        if abs(x[2]) < size[1] / 2 - tol:
            return 1, R[:, 2]
        return (0, None) if shape.kind == "capsule" else (2, None) if np.hypot(x[0], x[1]) < size[0] - tol else \
            (3, None)
    at = np.abs(np.abs(x) - size / 2) <= _ON_EDGE * max(1.0, size.max())
    if at.sum() == 2:
        return 1, R[:, int(np.flatnonzero(~at)[0])]
    return (0, None) if at.all() else (2, None)


#: A point lies on a box's edge or a capsule's end where it is this far from it at most, relative to the
#: shape's size: the closed forms' rounding (their witness points are exact), far below any feature's size.
_ON_EDGE = 1e-9


#: Two lines cross where the sine of their angle is this at least (nearer parallel, their point is held).
_TILTED = 1e-3


def slot_kinds(scene, frames):
    """Per slot of the layout ``frames`` (the slot frames of a step in ``scene``) the kinds of contact it may
    hold (a sorted tuple of 0 ``pp``, 1 ``pb``, 2 ``ap``, 3 ``ll``, and :data:`SLIDING` where a ``pb``
    contact may slide or its normal or an ``ap`` normal turn; :mod:`~sparsedyn.contact.scene_derivatives`):
    a slot of one frame holds the robot's hits of world shapes, one of two frames those of two robot shapes
    (a scene pair is a robot shape and a world shape, or two robot shapes), each of the kinds its pairs'
    shapes give (spheres, capsules and boxes, a cylinder and a sphere: those of the features each may touch
    with, :func:`_featured`; two boxes also ``pb`` or ``ap`` where their lines are parallel; an ellipsoid or
    a cylinder on a plane, a box or a height field: ``pb`` sliding; an ellipsoid against a sphere: ``ap``
    turning; a sphere against an ellipsoid: ``pb`` turning), and ``pb`` (a free slot's).  The ``kinds`` of
    :func:`~sparsedyn.contact.scene_derivatives.scene_step_partials` for the scene's steps."""
    world, robot = _kind_table(scene)[3]
    return remembered(scene, "slot kinds per layout", frames,
                      lambda: tuple(world if slot_frames(f)[1] is None else robot for f in frames), 64)


def told_at_hit(scene, pair, q=None, slots=None, kinds=False) -> bool:
    """Whether some contact of the scene pairs ``pair`` (intp array) has shapes told at its hit, not its pair's
    own (:func:`slot_shapes` then reads the state: the features of spheres, capsules and boxes touching, a
    curved shape's point sliding on a face or its normal turning); a contact set with none has its shapes kept
    per layout.  Given the state ``q`` (nq,) and the contacts' ``slots`` (a
    :class:`~sparsedyn.contact.friction_problem.ContactSlots`), a contact set whose features are its pairs' own
    at ``q`` (a sphere or a capsule on a box's face, capsules touching at their ends) is not; ``kinds``: whether
    its contacts' kinds are told (a sliding or turning point's ``K`` alone is not: their kinds are their pairs')."""
    table = _kind_table(scene)
    if not table[1] or not table[5][pair].any():
        return False
    if q is None or table[4][pair].any() and not kinds or (table[0][pair, 0] < 0).any():     # sliding; two boxes
        return True
    return not _own_features(scene, q, pair, slots)


def kinds_fixed(scene, pair) -> bool:
    """Whether each contact of the scene pairs ``pair`` (intp array) is of its pair's own kind at every state
    (none a pair of boxes or told by its features): a sliding point's or a turning normal's ``K`` alone may
    be told at the hit."""
    table = _kind_table(scene)
    return not (table[1] and (table[6][pair].any() or (table[0][pair, 0] < 0).any()))


def _own_features(scene, q, pair, slots):
    """Whether each contact of the scene pairs ``pair`` in ``slots`` (whose pairs are spheres, capsules and
    boxes, no two boxes) touches with the features its pair's own kind holds at ``q``: a box's face (where
    the other shape is round), a capsule's end (where both are); what :func:`_featured` finds then is its
    pair's own kind with a zero ``K``.  Python's floats: a few contacts' dozens of products, where NumPy's
    calls would cost more than the derivatives this spares."""
    needs, shapes = _kind_table(scene)[7]
    pair = pair.tolist()
    if not any(needs[k][0] for k in pair):
        return True
    Rf, pf = frame_placements(scene.model, q)
    ends = _slot_ends(scene, slots.frames)
    index = range(len(pair)) if slots.index is None else np.asarray(slots.index).tolist()
    for k, at in zip(pair, index):
        need, (i, j), (ra, rb) = needs[k]
        if not need:
            continue
        d, f = slots.data[at].tolist(), int(ends[0][at])
        R, o = Rf[f].tolist(), pf[f].tolist()
        wa = [R[r][0] * d[1] + R[r][1] * d[2] + R[r][2] * d[3] + o[r] for r in range(3)]
        gap = wa[0] * d[4] + wa[1] * d[5] + wa[2] * d[6] - d[7]
        for side, shape, move in ((0, i, ra), (1, j, -gap - rb)):
            if need[side]:
                c = [wa[r] + move * d[4 + r] for r in range(3)]
                frame = f if side == 0 else int(ends[1][at])
                if not _own_feature(scene, q, need[side], shapes[shape], shape, frame, Rf, pf, c):
                    return False
    return True


def _own_feature(scene, q, need, shape, i, frame, Rf, pf, c):
    """Whether the point ``c`` (world, a list) of the shape ``i`` (``shape``: its half sizes, tolerance and
    world placement, None for the robot's, placed from its slot frame ``frame`` at ``(Rf, pf)``) is on a
    box's face (``need`` 1), a capsule's end (2) or a cylinder's cap or rim (3: off its side)."""
    half, tol, placed = shape
    if placed is None:                                           # the robot's: its pose in its frame's, kept
        R, o = Rf[frame].tolist(), pf[frame].tolist()
        c = [R[0][r] * (c[0] - o[0]) + R[1][r] * (c[1] - o[1]) + R[2][r] * (c[2] - o[2]) for r in range(3)]
        placed = remembered(scene, "shape in frame", (i, frame), lambda: _in_frame(scene, q, i, frame))
    x = _local(placed, c)
    return x[2] >= half[2] - tol if need in (2, 3) else _on_a_face(x, half, tol)


def _on_a_face(x, half, tol):
    """Whether the absolute box coordinates ``x`` (a list) lie on one face of the box of half sizes ``half``
    at most (within ``tol``; inside it, none): not on an edge or a corner."""
    return sum(abs(x[r] - half[r]) <= tol for r in range(3)) <= 1


def _local(placed, c):
    """The absolute coordinates (a list) of the point ``c`` (a list) in the axes ``placed = (R, o)``."""
    R, o = placed
    return [abs(R[0][r] * (c[0] - o[0]) + R[1][r] * (c[1] - o[1]) + R[2][r] * (c[2] - o[2])) for r in range(3)]


def witnesses_tell(scene, pair) -> bool:
    """Whether the hits' rows of contacts of the scene pairs ``pair`` (nc,) tell :func:`own_at_witnesses`:
    none of them a pair of boxes, a sliding point or a feature that needs the bodies' poses (a capsule's
    end, a robot box or cylinder as ``b``)."""
    table = _kind_table(scene)
    if table[4][pair].any() or (table[0][pair, 0] < 0).any():
        return False
    needs, shapes = table[7]
    return all(need in ((), (1, 0), (3, 0)) or need in ((0, 1), (0, 3)) and shapes[j][2] is not None
               for need, (_, j), _ in (needs[k] for k in pair.tolist()))


def own_at_witnesses(scene, pair, rows) -> bool:
    """Whether the contacts of the scene pairs ``pair`` (nc,; :func:`witnesses_tell`) touch with their pairs'
    own features (a sphere or a capsule on a world box's face, a robot box's face on a round shape, a sphere
    on a cylinder off its side: not
    :func:`told_at_hit` at their state), from their hits' rows (nc, 11) (those of
    :func:`~sparsedyn.collision_candidates_near`: ``[d, x (3), n (3), w_a in a's body axes (3), n . w_b]``),
    placing no body."""
    needs, shapes = _kind_table(scene)[7]
    for k, r in zip(pair.tolist(), rows.tolist()):
        need, (i, j), _ = needs[k]
        if need in ((1, 0), (3, 0)):                             # a robot box's face: a's witness in its body
            half, tol, _ = shapes[i]
            x = _local((scene.shapes[i].R.tolist(), scene.shapes[i].p.tolist()), r[7:10])
        elif need in ((0, 1), (0, 3)):                           # a world box's face: b's witness
            half, tol, placed = shapes[j]
            x = _local(placed, [r[1 + m] - r[0] / 2 * r[4 + m] for m in range(3)])
        else:
            continue
        if not (_on_a_face(x, half, tol) if 1 in need else x[2] >= half[2] - tol):   # (a cylinder: off its side)
            return False
    return True


def _in_frame(scene, q, i, frame):
    """The rotation and origin (lists) of the robot shape ``i`` in the axes of the frame ``frame`` of its
    body (fixed: any ``q`` tells them)."""
    R, p = placements(scene, q)
    Rf, pf = frame_placements(scene.model, q)
    return (Rf[frame].T @ R[i]).tolist(), (Rf[frame].T @ (p[i] - pf[frame])).tolist()


def _kind_table(scene):
    """:func:`_pair_kinds` of ``scene``, kept in ``scene.cache``."""
    table = scene.cache.get("slot kinds")
    if table is None:
        table = scene.cache["slot kinds"] = _pair_kinds(scene)
    return table


def _pair_kinds(scene):
    """``(table (P, 13), any_told, (all_pb, round_a), kinds, sliding (P,), told (P,), featured (P,))``: per
    scene pair ``[kind, r_a, r_b, w_pp, w_pb, w_ap, w_ll, K (6)]``, the kind of its hits where the shapes fix
    it (-1 for two boxes: a corner of either), the radii of its round shapes, the kind's one-hot weights and a
    zero ``K``; whether some pair's shapes are told at the hit (a pair of spheres, capsules and boxes with a
    capsule or a box, or a cylinder and a sphere, whose hits' kinds are their features', or a curved ``a``
    that may slide on a face of ``b`` or turn its normal against a sphere, or a sphere whose normal turns over
    an ellipsoid ``b``), whether
    every pair is of kind 1 (none told by its features), whether any pair's ``a`` is round (or a cylinder
    whose side is a radius from its axis); the kinds a slot of
    one frame and one of two may hold (:func:`slot_kinds`); which pairs slide or turn (their ``K`` told at the
    hit), which tell their shapes at the hit, which by their features (:func:`_featured`)."""
    P = len(scene.index)
    kind, ra, rb = np.ones(P, int), np.zeros(P), np.zeros(P)
    sliding, featured, may = np.zeros(P, bool), np.zeros(P, bool), []
    for k, (i, j) in enumerate(scene.index.tolist()):
        a, b = scene.shapes[i], scene.shapes[j]
        ra[k] = a.size[0] if a.kind in ROUND else 0.0
        rb[k] = b.size[0] if b.kind in ROUND else 0.0
        sliding[k] = a.kind in _CURVED and b.kind in _FLAT or {a.kind, b.kind} == {"ellipsoid", "sphere"}
        featured[k] = a.kind in _FEATURED and b.kind in _FEATURED and not a.kind == b.kind == "sphere" or \
            {a.kind, b.kind} == {"cylinder", "sphere"}
        if a.kind in ROUND and b.kind in ROUND:
            kind[k] = 0
        elif a.kind in ROUND or b.kind == "plane":
            kind[k] = 1
        elif b.kind in ROUND:
            kind[k] = 2
        elif a.kind == b.kind == "box":
            kind[k] = -1
        own = {1, 2} if kind[k] < 0 else {int(kind[k])}
        if featured[k]:                                          # (a box's corner on an edge: its own kind)
            own |= {_FEATURE_KINDS[f] for f in product(_FEATURES[a.kind], _FEATURES[b.kind]) if f in _FEATURE_KINDS
                    and (_FEATURE_KINDS[f] != 0 or ra[k] + rb[k] > 0)}
        may.append(own | ({SLIDING} if sliding[k] else set()))
    world = np.array([scene.shapes[j].body < 0 for _, j in scene.index.tolist()], bool)
    kinds = tuple(tuple(sorted(set().union({1}, *(m for m, w in zip(may, world) if w == side))))
                  for side in (True, False))
    table = np.concatenate([np.stack([kind, ra, rb], -1), kind[:, None] == _KINDS, np.zeros((P, 6))], 1)
    told = (kind < 0) | sliding | featured
    round_a = ra.any() or any(f and scene.shapes[i].kind == "cylinder" for f, i in zip(featured, scene.index[:, 0]))
    return (table, bool(told.any()), (bool((kind == 1).all() and not featured.any()), bool(round_a)), kinds,
            sliding, told, featured, _own_needs(scene, kind, ra, rb))


def _own_needs(scene, kind, ra, rb):
    """``(needs, shapes)``: per scene pair (of kind ``kind`` (P,) and radii ``ra``, ``rb`` (P,)) ``(need,
    (i, j), (r_a, r_b))``, ``need`` per side the feature its own kind holds (0 any, 1 a box's face where
    the other side is round, 2 a capsule's end where both are, 3 a cylinder's cap or rim (off its side)
    against a sphere: :func:`_own_features`); per shape its half sizes (a box's; a capsule's or a cylinder's
    ``(0, 0, length / 2)``), :func:`_feature`'s tolerance and its placement (lists; None for the robot's)."""
    shapes = []
    for shape in scene.shapes:
        size, of = np.asarray(shape.size, float), shape.kind
        half = size / 2 if of == "box" else (0.0, 0.0, size[1] / 2) if of in ("capsule", "cylinder") else (0.0,) * 3
        tol = _ON_EDGE * max(1.0, size.max() if of == "box" else max(size[0], size[1]) if of in ("capsule", "cylinder")
                             else 1.0)
        shapes.append((list(half), tol, None if shape.body >= 0 else (shape.R.tolist(), shape.p.tolist())))
    needs = []
    for k, ij in enumerate(scene.index.tolist()):
        need = [0, 0]
        for side, i in enumerate(ij):
            if scene.shapes[i].kind == "box" and kind[k] == 2 - side:
                need[side] = 1
            elif scene.shapes[i].kind == "capsule" and kind[k] == 0:
                need[side] = 2
            elif scene.shapes[i].kind == "cylinder" and kind[k] == 2 - side and \
                    scene.shapes[ij[1 - side]].kind == "sphere":
                need[side] = 3
        needs.append((tuple(need) if any(need) else (), tuple(ij), (float(ra[k]), float(rb[k]))))
    return needs, shapes


#: The features a sphere, a capsule, a box and a cylinder (against a sphere; its rim held) may touch with
#: (:func:`_feature`).
_FEATURES = {"sphere": (0,), "capsule": (0, 1), "box": (0, 1, 2), "cylinder": (1, 2)}


def _corner(shape, R, p, x):
    """Whether the world point ``x`` is a corner of the box ``shape`` placed at ``(R, p)``."""
    h = np.asarray(shape.size, float) / 2
    return bool(np.all(np.abs(np.abs(R.T @ (x - p)) - h) <= 1e-9 * max(1.0, h.max())))
