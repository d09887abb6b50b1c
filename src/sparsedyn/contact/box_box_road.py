""":func:`~sparsedyn.collide`'s road, and a step's rows, for a scene whose pairs are all the collision
kernel's, pairs of two boxes, pairs of two convex shapes that coal measures (a box or a cylinder
against a cylinder: :func:`~sparsedyn.contact.hull_pairs.hull_rows`) and a robot's shapes on a world height
field (:func:`~sparsedyn.contact.collision_hfield.hfield_rows`), these last two after the routine, their rows
last.

A box resting on a box (on the floor) has two sorts of pairs: the collision kernel's
(:mod:`~sparsedyn.contact.collision_kernel`: a box on a plane) and pairs of two boxes, whose hits the
hand-written routine of :mod:`~sparsedyn.contact.box_box_native` finds.  The general road
(:func:`~sparsedyn.contact.collision.collide_within`) places every shape, gathers each pair's poses and
half extents into the routine's buffer and assembles its blocks at every call; here that is laid out
once, so that a call of :func:`~sparsedyn.collide` is the kernel's candidates and the native
``geometry_placements`` of the robot's shapes, both written into the road's buffer, then one native
call (``sd_box_box_road``) that gathers the pairs' poses (the world boxes' and the half extents fixed),
runs the routine and writes its rows beside the kernel's in one table of fixed slots
(:data:`~sparsedyn.contact.box_box_native.ROWS` per pair, a free row's distance +inf):
:func:`~sparsedyn.collide` picks its hits from it as it does where every pair is the kernel's.  The
same operations on the same numbers: the general road's hits, bit for bit.  A step's rows
(:func:`box_box_road_hits`) take the gather and the routine apart.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..kernels import native_calls
from .box_box_native import _PAR, ROWS, BoxBoxPlan, _routine, routine
from .collision_hfield import field_pairs, hfield_rows
from .collision_near import NEAR_COLUMNS
from .hull_pairs import hull_pairs, hull_rows, shape_poses
from .quiet_extras import quiet_call

__all__ = ["BoxBoxRoad", "box_box_poses", "box_box_road", "box_box_road_table", "box_box_road_hits", "extra_rows",
           "extra_rows_by_state", "no_boxes"]

_GP = "geometry_placements"


class BoxBoxRoad:
    """A scene's road (:func:`box_box_road`): ``kernel`` the collision kernel's ``(callable, plan)`` or
    None; ``bp`` the :class:`~sparsedyn.contact.box_box_native.BoxBoxPlan`; ``hulls`` (H,) the pairs of
    two convex shapes that coal measures (:func:`~sparsedyn.contact.hull_pairs.hull_pairs`) and ``fields``
    a robot's shapes' pairs with a world height field and their rows
    (:func:`~sparsedyn.contact.collision_hfield.field_pairs`), their rows the table's last; ``every``
    (rows,) each row's scene pair, ``order`` the rows by pair (None: they are); ``cutoff`` the margin (0-d); ``G`` the
    robot's collision shapes; ``const`` the gather's source past the robot's placements (the world
    boxes' poses, the half extents); ``gather`` (P * 30,) each entry of the routine's poses in that
    source; ``scratch`` each thread's buffer, ``tables`` each thread's of :func:`box_box_road_table`."""

    __slots__ = ("kernel", "bp", "hulls", "fields", "every", "order", "cutoff", "G", "const", "gather", "scratch",
                 "tables")


def box_box_road(scene, kp, f, bp):
    """The :class:`BoxBoxRoad` of ``scene``, or None where a pair is neither the collision kernel's
    (plan ``kp``, native callable ``f``) nor in ``bp`` (a :class:`~sparsedyn.contact.box_box_native.BoxBoxPlan`,
    or None where the scene has no pair of two boxes) nor a pair of two convex shapes that coal
    measures nor a robot shape on a world height field, or where the routine, the native placements or
    ``f`` are not built."""
    gp = (native_calls(scene.model) or {}).get(_GP)
    kernel = kp is not None and bool(kp.pairs)
    bp = bp if bp is not None else no_boxes(scene)
    inside = bp.inside | kp.inside if kernel else bp.inside
    if _routine() is None or gp is None or (kernel and f is None):
        return None
    extras = _extras(scene, inside)
    if extras is None:
        return None
    road = _laid_out(scene, bp)
    road.kernel, (road.hulls, road.fields) = ((f, kp) if kernel else None), extras
    road.every = np.concatenate(([kp.pair] if kernel else []) + [np.repeat(bp.pair, ROWS), road.hulls,
                                                                 np.repeat(*road.fields)]).astype(int)
    order = np.argsort(road.every, kind="stable")
    road.order = None if np.array_equal(order, np.arange(len(order))) else order
    return road


def box_box_poses(scene, bp):
    """A :class:`BoxBoxRoad` of the pairs of ``bp`` alone (``kernel``, ``every``, ``order`` None: a step's
    rows, :func:`box_box_road_hits`), kept by the scene; None where the routine or the native placements
    are not built."""
    key = "box-box poses"
    got = scene.cache.get(key)
    if got is None or got.bp is not bp:
        if _routine() is None or (native_calls(scene.model) or {}).get(_GP) is None:
            return None
        got = scene.cache[key] = _laid_out(scene, bp)
        got.kernel = got.every = got.order = None
        got.hulls, got.fields = np.zeros(0, int), (np.zeros(0, int), np.zeros(0, int))
    return got


def no_boxes(scene):
    """A :class:`~sparsedyn.contact.box_box_native.BoxBoxPlan` of no pairs, for a scene with none (the
    routines then copy the kernel's candidates, or compute the look-ahead, alone); kept by the scene."""
    key = "box-box plan, none"
    if key not in scene.cache:
        bp = scene.cache[key] = BoxBoxPlan()
        bp.pair = bp.ia = bp.ib = np.zeros(0, int)
        bp.ha, bp.hb, bp.E, bp.r = np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3, 3)), np.zeros((0, 3))
        bp.inside = np.zeros(len(scene.index), bool)
    return scene.cache[key]


def _extras(scene, inside):
    """``(hulls (H,), fields)`` of the scene pairs outside ``inside`` (P,) bool: the pairs of two convex
    shapes that coal measures and a robot's shapes' pairs with a world height field (``field_pairs``),
    where those are all of them, else None; kept by the scene."""
    key = ("box-box road extras", inside.tobytes())
    if key not in scene.cache:
        rest = np.flatnonzero(~inside)
        hulls = hull_pairs(scene, rest) if len(rest) else rest
        fields = field_pairs(scene, np.setdiff1d(rest, hulls))
        scene.cache[key] = (hulls, fields) if len(hulls) + len(fields[0]) == len(rest) else None
    return scene.cache[key]


def extra_rows(scene, hulls, fields, held, outs):
    """Write the rows of the pairs ``hulls`` (H,) for coal, then of ``fields`` on height fields
    (:func:`~sparsedyn.contact.collision_hfield.field_pairs`' pairs and rows, F rows in all), into the first
    columns of ``held``'s table (H + F, >= 7): ``held`` ``(R (S, 3, 3), p (S, 3), cut (P,), table)``, every
    shape's placement (the world's written once, the robot's from its placements ``outs``, ``(R (G, 3, 3),
    p (G, 3))`` or None) and each scene pair's cutoff; the table, or None where a pair on a height field has
    more hits than its rows."""
    R, p, cut, out = held
    if outs is not None:
        R[:len(outs[0])], p[:len(outs[1])] = outs
    c, H = out.shape[1], len(hulls)
    quiet = quiet_call(scene, hulls, fields, held)    # (no pair near: the broad phases' routines alone)
    broad, written = quiet() if quiet is not None else (True, False)
    if H and broad is not None:
        out[:H] = hull_rows(scene, hulls, R, p, cut, broad=broad)[:, :c]
    if len(fields[0]) and not written:
        got = hfield_rows(scene, fields, R, p, cut)
        if got is None:
            return None
        out[H:] = got[:, :c]
    return out


def extra_rows_by_state(scene, hulls, fields, states):
    """The rows (B, H + F, 11) of the pairs ``hulls`` (H,) for coal and ``fields`` on height fields (F rows) of
    each state of ``states`` ``[(R (S, 3, 3), p (S, 3), cut (P,))]`` (every shape's world placement and every
    scene pair's cutoff), each as its single step writes them (:func:`extra_rows`: the broad phases' routines
    bound once for this thread's table, the roads where a pair is near); None where a pair on a height field has
    more hits than its rows."""
    n = len(hulls) + int(fields[1].sum())
    key = ("extra rows by state", hulls.tobytes(), fields[0].tobytes(), threading.get_ident())
    held = scene.cache.get(key)
    if held is None:
        held = scene.cache[key] = (*shape_poses(scene), np.empty(len(scene.index)), np.empty((n, NEAR_COLUMNS)))
    R, p, cut, table = held
    out = np.empty((len(states), n, NEAR_COLUMNS))
    for b, (Rb, pb, cb) in enumerate(states):
        R[:], p[:], cut[:] = Rb, pb, cb
        if extra_rows(scene, hulls, fields, held, None) is None:
            return None
        out[b] = table
    return out


def _held(scene, road, rows, cut):
    """:func:`extra_rows`' ``held`` for ``road``'s table ``rows`` (the last of them) and the cutoffs ``cut``
    (P,), None where it has no pairs for coal or on height fields."""
    n = len(road.hulls) + int(road.fields[1].sum())
    return (*shape_poses(scene), cut, rows[len(rows) - n:]) if n else None


def _laid_out(scene, bp):
    """A :class:`BoxBoxRoad` of ``bp``'s pairs less its rows' layout: the gather of their poses."""
    road = BoxBoxRoad()
    road.bp = bp
    road.cutoff = np.array(float(scene.margin))
    G = road.G = len(scene.model.geometry("collision"))     # (collide's placements: the robot's, then the world's)
    S = len(scene.shapes)
    R = np.array([s.R for s in scene.shapes], float).reshape(S, 9)
    p = np.array([s.p for s in scene.shapes], float).reshape(S, 3)
    P = len(bp.pair)
    const = np.concatenate([R.ravel(), p.ravel(), bp.ha.ravel(), bp.hb.ravel()])   # (robot rows: replaced)
    base = 12 * G                                          # the source: Rg (G, 9), pg (G, 3), then const
    at_R = lambda i: base + 9 * i + np.arange(9) if i >= G else 9 * i + np.arange(9)      # noqa: E731
    at_p = lambda i: base + 9 * S + 3 * i + np.arange(3) if i >= G else 9 * G + 3 * i + np.arange(3)  # noqa: E731
    gather = np.empty((P, 30), np.int64)
    for k, (a, b) in enumerate(zip(bp.ia.tolist(), bp.ib.tolist())):
        gather[k, 0:9], gather[k, 9:12], gather[k, 15:24], gather[k, 24:27] = at_R(a), at_p(a), at_R(b), at_p(b)
        gather[k, 12:15] = base + 12 * S + 3 * k + np.arange(3)
        gather[k, 27:30] = base + 12 * S + 3 * P + 3 * k + np.arange(3)
    road.const, road.gather, road.scratch, road.tables = const, gather.ravel(), {}, {}
    return road


def _scratch(road):
    """This thread's ``(buffer, views, addresses)``: the routine's source, poses, cutoffs, parameters,
    rows and counts in one buffer (one address to look up), made once per thread."""
    got = road.scratch.get(threading.get_ident())
    if got is None:
        P, n = len(road.bp.pair), 12 * road.G + len(road.const)
        sizes = [n, 30 * P, 2 * P, 2, 10 * ROWS * P, P]
        ends = np.cumsum(sizes)
        buf = np.zeros(int(ends[-1]))
        views = [buf[e - s:e] for s, e in zip(sizes, ends.tolist())]
        views[0][12 * road.G:] = road.const
        views[2][:] = float(road.cutoff)
        views[3][:] = _PAR
        at = buf.ctypes.data
        got = road.scratch[threading.get_ident()] = (buf, views, [at + 8 * int(e - s) for s, e in zip(sizes, ends)])
    return got


def _run(scene, road, q, cut=None):
    """The routine at ``q`` (nq,) float: its rows (P * ROWS, 10) ``[d, w_a, w_b, n]`` and counts (P,) (views
    of this thread's buffer), and the poses (P, 30); ``cut`` (P,) each pair's margin and cutoff (None:
    the scene's margin); None where the native placements are not built."""
    gp = (native_calls(scene.model) or {}).get(_GP)
    if gp is None:
        return None
    _, (src, pose, cuts, _, out, count), at = _scratch(road)
    G = road.G
    if G:
        Rg, pg = gp(q, "collision")
        src[:9 * G], src[9 * G:12 * G] = Rg.reshape(-1), pg.reshape(-1)
    np.take(src, road.gather, out=pose)
    if cut is not None:
        c = cuts.reshape(-1, 2)
        c[:, 0] = c[:, 1] = cut
    _routine()(len(count), at[1], at[2], at[3], at[4], at[5])
    if cut is not None:
        cuts[:] = float(road.cutoff)
    return out.reshape(-1, 10), count, pose.reshape(-1, 30)


def _road_routine():
    """``sd_box_box_road`` (ctypes; :mod:`~sparsedyn.contact.box_box_c`), or None without a C compiler."""
    return routine("sd_box_box_road", [ctypes.c_void_p, ctypes.c_void_p])


def _table_scratch(scene, road):
    """This thread's ``(routine, plan's address, buffer's address, placements' outputs or None, the
    kernel's output or None, the table (N, 7), placements, plan, buffer, :func:`extra_rows`' ``held``
    or None)`` for :func:`box_box_road_table`
    (``sd_box_box_road``'s plan and buffer laid out once: the world boxes' poses, the half extents, the
    cutoffs fixed), or None where the routine or the native placements are not built."""
    f, gp = _road_routine(), (native_calls(scene.model) or {}).get(_GP)
    if f is None or gp is None:
        return None
    P, G, N = len(road.bp.pair), road.G, len(road.every)
    K = 0 if road.kernel is None else len(road.kernel[1].pair)
    nsrc = 12 * G + len(road.const)
    offs = np.cumsum([0, nsrc, 11 * K, 2 * P, 2, 7 * N]).tolist()       # src, kern, cut, par, rows
    buf = np.zeros(offs[-1])
    buf[12 * G:nsrc] = road.const
    buf[offs[2]:offs[3]] = float(road.cutoff)
    buf[offs[3]:offs[4]] = _PAR
    plan = np.concatenate([[P, K, N, *offs[:5]], road.gather]).astype(np.int64)
    outs = (buf[:9 * G].reshape(G, 3, 3), buf[9 * G:12 * G].reshape(G, 3)) if G else None
    kern = buf[offs[1]:offs[2]].reshape(K, 11) if K else None
    got = road.tables[threading.get_ident()] = (f, plan.ctypes.data, buf.ctypes.data, outs, kern,
                                                 buf[offs[4]:offs[5]].reshape(N, 7), gp, plan, buf,
                                                 _held(scene, road, buf[offs[4]:offs[5]].reshape(N, 7),
                                                       np.full(len(scene.index), float(road.cutoff))))
    return got


def box_box_road_table(scene, road, q):
    """The road's table (rows, 7) ``[d, x, n]`` at ``q`` (nq,) float in one native call after the robot's
    placements and the collision kernel's candidates (written into this thread's buffer; the table a
    view of it): the kernel's candidates, then each pair of two boxes' ``ROWS`` rows (``x`` midway
    between the witnesses, ``d`` +inf in a free row), then the pairs for coal and on height fields
    (:func:`extra_rows`); None where the routine or the native placements are not built, or where a pair
    on a height field has more hits than its rows."""
    got = road.tables.get(threading.get_ident())
    if got is None:
        got = _table_scratch(scene, road)
        if got is None:
            return None
    f, plan, buf, outs, kern, rows, gp = got[:7]
    if outs is not None:
        gp(q, "collision", out=outs)
    if kern is not None:
        g, kp = road.kernel
        g(q, kp.shapes, kp.cutoff, kp.pairs, out=kern)
    f(plan, buf)
    return rows if got[9] is None or extra_rows(scene, road.hulls, road.fields, got[9], outs) is not None else None


def box_box_road_hits(scene, road, q, cut):
    """``(at, k, d, w_a, w_b, n, Ra, pa)`` of the pairs of two boxes at ``q`` (nq,) float, each pair's
    hits within its ``cut`` (P,) [m] (as :func:`~sparsedyn.contact.box_box_native.box_box_hits` gives them;
    ``k`` each hit's index of the pairs, sorted; ``at`` its row of the pairs' ``ROWS`` each), with the
    placement ``Ra`` (n, 3, 3), ``pa`` (n, 3) of each hit's box ``a``; None where the native placements
    are not built."""
    got = _run(scene, road, q, cut)
    if got is None:
        return None
    o, _, pose = got
    at = np.flatnonzero(o[:, 0] != np.inf)                 # (a hit's d is below its cutoff: a free row's +inf)
    rows, k = o.take(at, 0), at // ROWS
    a = pose.take(k, 0)
    return at, k, rows[:, 0], rows[:, 1:4], rows[:, 4:7], rows[:, 7:10], a[:, 0:9].reshape(-1, 3, 3), a[:, 9:12]
