""":func:`~sparsedyn.collide`'s quick call: a scene's road bound once into one function of ``q``.

Where :func:`~sparsedyn.collide` has laid out a road for a scene (every pair the collision kernel's,
with robot meshes on world planes: :mod:`~sparsedyn.contact.mesh_plane_loop`; or with pairs of two
boxes: :mod:`~sparsedyn.contact.box_box_road`; or with meshes on world boxes:
:mod:`~sparsedyn.contact.mesh_box_road`), each call looks up the road, its thread's buffers, the
native callables and the scene's tables before the native calls that do the work; on a small scene
that Python takes as long as the work.  :func:`quick_collide` binds all of them once per scene and
thread into a closure (kept in ``scene.cache``): the road's native calls writing into the thread's
table (coal's queries of a mesh-box road bound slot by slot), then the compiler extension's ``pick``
and the hits' pair names remembered per selection.  The same calls on the same numbers: the road's
hits, bit for bit.
"""

from __future__ import annotations

import threading

import numpy as np

from ..kernels import native_calls, native_function
from . import mesh_box_loop
from .box_box_road import BoxBoxRoad, _table_scratch, extra_rows
from .collision_near import NEAR_COLUMNS
from .mesh_box_road import _FROM, _GP, BoxRoad, _scratch, closest_call
from .mesh_plane_loop import mesh_plane_loop_rows, mesh_plane_rows_call

__all__ = ["QUICK", "quick_collide"]

#: ``scene.cache``'s key of the quick calls: ``{thread id: (q's shape, the call or None)}``
QUICK = "collide quick"

#: A scene's remembered pair names are forgotten when this many selections are held (a simulation's
#: contact sets recur, but their number is not bounded).
NAMES_HELD = 256

#: The collision kernel's static ``pairs`` is passed as a plain tuple where it has at most this many:
#: its hash, in C, costs less than a call of :class:`~sparsedyn.contact.collision_kernel.Pairs`'
#: remembered one (a Python method); a longer one is hashed once and kept by ``Pairs``.
PLAIN_PAIRS = 16


def quick_collide(scene, road, hits):
    """This thread's quick call of ``scene`` (module docstring): a function of ``q`` (nq,) float64 that
    returns its ``hits`` (the :class:`~sparsedyn.contact.collision.Hits` type, built from ``pick``'s
    arrays) or None where the general road must answer; None where ``road`` (``scene.cache``'s
    collide road) has no quick call or its native pieces are not built.  Made once per scene and
    thread, kept in ``scene.cache[QUICK]``."""
    per = scene.cache.setdefault(QUICK, {})
    me = threading.get_ident()
    got = per.get(me)
    if got is None:
        got = per[me] = (road[2], _make(scene, road, hits))
    return got[1]


def _make(scene, road, hits):
    """The call of :func:`quick_collide`, or None."""
    kp = road[1]
    pick = native_function("pick")
    if pick is None:
        return None
    if road[0] is not None:
        return _kernel_road(scene, road, pick, hits)
    if type(kp) is BoxRoad:
        rows = _box_road_rows(scene, kp)
        return None if rows is None else _picking(scene, rows, pick, kp.cutoff, kp.order, kp.every, hits)
    if type(kp) is not BoxBoxRoad:
        return None
    got = kp.tables.get(threading.get_ident()) or _table_scratch(scene, kp)
    if got is None:
        return None
    f, plan, buf, outs, kern, rows, gp = got[:7]
    held = got[9]
    g, shapes, pairs = None, None, None
    if kern is not None:
        g, plan_k = kp.kernel
        shapes, pairs = plan_k.shapes, _plain(g, plan_k.pairs)
    cutoff = kp.cutoff

    def table(q):
        if outs is not None:
            gp(q, "collision", out=outs)
        if kern is not None:
            g(q, shapes, cutoff, pairs, out=kern)
        f(plan, buf)
        return rows if held is None or extra_rows(scene, kp.hulls, kp.fields, held, outs) is not None else None
    return _picking(scene, table, pick, cutoff, kp.order, kp.every, hits)


def _plain(g, pairs):
    """The static ``pairs`` to pass to the native method ``g``: a plain tuple where it has at most
    :data:`PLAIN_PAIRS` and ``g`` holds its kernel (the same key), else ``pairs``."""
    built = getattr(g, "__table__", None)
    if len(pairs) <= PLAIN_PAIRS and built is not None and (pairs,) in built:
        return tuple(pairs)
    return pairs


def _kernel_road(scene, road, pick, hits):
    """The call of a road of the collision kernel's pairs (``road``: collide's ``(the native
    collision_candidates_near or the look-ahead's in its stead (near_call), its plan, (nq,), the
    mesh-plane loop plan or None, each row's pair, the rows by pair or None)``): its candidates, then
    the meshes' patches on planes where the plan has them, in one table per thread."""
    f, kp, _, lp, every, order = road
    shapes, cutoff, pairs = kp.shapes, kp.cutoff, _plain(f, kp.pairs)
    if lp is None:
        return _picking(scene, lambda q: f(q, shapes, cutoff, pairs), pick, cutoff, order, every, hits)
    rows = np.empty((len(every), NEAR_COLUMNS))
    head, tail = rows[:len(kp.pair)], rows[len(kp.pair):]
    plane = _plane_rows(scene, lp, tail)

    def table(q):
        f(q, shapes, cutoff, pairs, out=head)
        return rows if plane(q) is not None else None
    return _picking(scene, table, pick, cutoff, order, every, hits)


def _picking(scene, table, pick, cutoff, order, every, hits):
    """The call of ``q``: the ``hits`` of the rows ``table(q)`` (rows, >= 7) below ``cutoff`` picked in
    ``order`` (each row's pair ``every``; ``pick``: the compiler extension's), their pair names remembered
    per selection; None where ``table`` or ``pick`` gives None."""
    names_of, memo, new = scene.pair_names, {}, tuple.__new__

    def call(q):
        rows = table(q)
        if rows is None:
            return None
        picked = pick(rows, cutoff, order, every)
        if picked is None:
            return None
        x, n, d, sel, k = picked
        key = sel.tobytes()
        names = memo.get(key)
        if names is None:
            if len(memo) >= NAMES_HELD:
                memo.clear()
            names = memo[key] = tuple([names_of[i] for i in k.tolist()])
        return new(hits, (list(names), x, n, d, k))
    return call


def _plane_rows(scene, lp, out):
    """A function of ``q``: the rows of the mesh-plane loop plan ``lp`` written into ``out`` (a view of
    this thread's table), bound once (:func:`~sparsedyn.contact.mesh_plane_loop.mesh_plane_rows_call`)
    or, where that cannot be, through :func:`~sparsedyn.contact.mesh_plane_loop.mesh_plane_loop_rows`."""
    return mesh_plane_rows_call(scene, lp, out) or (lambda q: mesh_plane_loop_rows(scene, lp, q, out=out))


def _box_road_rows(scene, road):
    """A function of ``q`` that returns the rows of a :class:`~sparsedyn.contact.mesh_box_road.BoxRoad`
    (:func:`~sparsedyn.contact.mesh_box_road.box_road_rows`' calls, on the same numbers: its rows)
    in this thread's table, or None where the general road must answer; None where the routines or the
    native placements are not built."""
    routines, gp = mesh_box_loop._routines(), (native_calls(scene.model) or {}).get(_GP)
    if routines is None or gp is None:
        return None
    near_routine, rows_routine = routines[3], routines[4]
    nk, nl, lp = road.nk, road.nl, road.lp
    out = np.empty((len(road.every), NEAR_COLUMNS))   # (pick copies the rows: one table per thread)
    kern, plane, boxes = out[:nk], out[nk:nk + nl], _FROM(out[nk + nl:])
    plane_rows = None if lp is None else _plane_rows(scene, lp, plane)
    f, kp = road.kernel if road.kernel is not None else (None, None)
    shapes, cutoff, pairs = (kp.shapes, kp.cutoff, _plain(f, kp.pairs)) if f is not None else (None, None, None)
    G = len(scene.model.geometry("collision"))
    placed = np.empty((G, 3, 3)), np.empty((G, 3))
    Rg, pg = (_FROM(placed[0]), _FROM(placed[1])) if G else (None, None)
    scratch = road.solvers.get(threading.get_ident())
    if scratch is None:
        scratch = road.solvers[threading.get_ident()] = _scratch(road)
    R, p, near, at = scratch[5]
    near, all_slots, tab, none = near[:len(road.slot)], road.slot, road.tab, np.zeros(1)
    closest = closest_call(road, scratch)

    def rows(q):
        if f is not None:
            f(q, shapes, cutoff, pairs, out=kern)
        if lp is not None and plane_rows(q) is None:
            return None
        if G:
            gp(q, "collision", out=placed)
        near_routine(tab, Rg, pg, *at)
        slot = all_slots.compress(near)
        slots = slot.tolist()
        if slots and min(slots) < 0:
            return None                            # a pair that is no mesh on a box: the general road
        got = closest(slots) if slots else none
        n = rows_routine(tab, len(slots), _FROM(slot) if slots else None, at[0], at[1], _FROM(got), boxes)
        if n == -1:
            raise MemoryError("mesh-box contacts: no memory for the workspace of the hulls' vertices")
        return out if n >= 0 else None
    return rows
