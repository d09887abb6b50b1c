"""A step's rows of robot meshes on world boxes: :func:`mesh_box_step_rows` (:func:`mesh_box_rows`).

The rows of :mod:`~sparsedyn.contact.scene_data`'s mixed plan for its pairs of a robot mesh and a
world box, each pair's patch within its own cutoff (a step's look-ahead): the native broad phase
(:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`) of those pairs, coal's closest pair of the
mesh's convex hull and the box for each pair it leaves, then the hull vertices on the box's face in
one native call (:func:`~sparsedyn.contact.collision._mesh_box_pairs`, collide's own).

On the native road, :func:`mesh_box_step_rows` computes the same rows through a road of collide's
(:func:`~sparsedyn.contact.mesh_box_road.step_road`: the pairs' cutoffs, their patches' allowances and
broad phase, and the pairs it keeps, one routine call on the native placements, ``sd_step_road_near``;
coal's queries on objects kept per thread, EPA capped as there; the patches and the columns the step
reads beyond collide's, one routine call, ``sd_step_road_rows``), each pair's cutoff written into the
thread's own copy of its tables; where it declines (a penetration EPA did not settle under its cap, an
answer not finite) the rows above answer.  The columns beyond collide's (the witness on the mesh in
its body's axes, ``n . w_b``) come from the row's ``x``, ``d`` and ``n``: ``w_a = x + d n / 2``,
``w_b = x - d n / 2``.

The plan's other pairs that no road of rows covers (a cylinder on a world box: coal's closest pair
and the closed-form features of the general road, merged) have no rows: the same broad phase, in the
same call, tests them against their cutoffs, and where it leaves one the rows are refused (None), so
that the step takes the road of Contact objects; at rest they lie far apart (a robot's wrist over
the box it leans on) and cost their bound alone.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..kernels import c_routine, native_calls, use_backend
from . import mesh_box_loop
from .collision import _mesh_box_pairs, _plan as _collision_plan, placements
from .collision_near import NEAR_COLUMNS, free_rows
from .mesh_box_loop import near_pairs
from .mesh_box_road import ROAD_TABLES, _GP, _scratch, closest_call, step_road
from .reduction import MAX_PATCH_POINTS, PATCH_DEPTH

__all__ = ["mesh_box_rows", "mesh_box_step_rows"]

_F64 = np.dtype(float)

#: The step's two routines on collide's (``mesh_box_loop.SOURCE``): ``sd_step_road_near`` writes the scene pairs'
#: cutoffs ``cut`` into the road's (by ``rest`` (Q,)) and its slots' (by ``boxes`` (M,)), each slot's patch
#: allowance (``reduction.patch_depth``; ``dpar = [PATCH_DEPTH, margin]``), the shapes' poses and the broad phase
#: (``sd_road_near``), then the slots of the pairs it keeps into ``slots`` and returns their count: -1 where it
#: keeps a pair of no rows (``slot`` -1, ``kind`` 0), ``flag[k - 1]`` 1 where it keeps a pair of ``kind`` k: 1 two
#: boxes, 2 coal's (rows of their own).
#: ``sd_step_road_rows``: ``sd_road_rows``, then each filled row's witness on the mesh ``w_a = x + d n / 2`` in
#: its body's axes, ``E R_m^T (w_a - p_m) + r`` (``E`` (M, 3, 3), ``r`` (M, 3): each slot's mesh placed in its
#: body), and ``n . w_b``, ``w_b = x - d n / 2`` (NumPy's operations in NumPy's order).
STEP_SOURCE = mesh_box_loop.SOURCE + r"""
SD_EXPORT long long sd_step_road_near(const void *const *tab, const double *cut, const long long *rest,
                                      const long long *boxes, const double *dpar, const long long *slot,
                                      const long long *kind, const double *Rg, const double *pg, double *R, double *p,
                                      _Bool *near, long long *slots, long long *flag)
{
  const long long *dims = tab[T_DIMS], Q = dims[0], M = dims[4] / MP;
  double *tcut = (double *)tab[T_CUT], *mcut = (double *)tab[T_MCUT], *depth = (double *)tab[T_DEPTH];
  for (long long i = 0; i < Q; i++) tcut[i] = cut[rest[i]];
  for (long long j = 0; j < M; j++) {
    const double x = (mcut[j] = cut[boxes[j]]) - dpar[1];
    depth[j] = dpar[0] + 2.0 * (x > 0.0 || x != x ? x : 0.0);
  }
  sd_road_near(tab, Rg, pg, R, p, near);
  long long n = 0, bad = 0;
  flag[0] = flag[1] = 0;
  for (long long i = 0; i < Q; i++) {
    if (!near[i]) continue;
    if (slot[i] >= 0) slots[n++] = slot[i];
    else if (!kind[i]) bad = 1;
    if (kind[i]) flag[kind[i] - 1] = 1;
  }
  return bad ? -1 : n;
}

SD_EXPORT long long sd_step_road_rows(const void *const *tab, long long P, const long long *slot, const double *R,
                                      const double *p, const double *got, const double *E, const double *r,
                                      double *out)
{
  const long long n = sd_road_rows(tab, P, slot, R, p, got, out);
  if (n < 0) return n;
  const long long *dims = tab[T_DIMS], *ms = tab[T_MS], width = dims[5];
  for (long long j = 0; j < dims[4]; j++) {
    double *row = out + width * j, h[3], w[3], y[3];
    if (row[0] == __builtin_inf()) continue;
    const long long s = j / MP, m = ms[s];
    const double *Rm = R + 9 * m, *pm = p + 3 * m, *Es = E + 9 * s, *rs = r + 3 * s;
    for (int c = 0; c < 3; c++) {
      h[c] = row[0] / 2.0 * row[4 + c];
      w[c] = (row[1 + c] + h[c]) - pm[c];
    }
    for (int i = 0; i < 3; i++) y[i] = (Rm[i] * w[0] + Rm[3 + i] * w[1]) + Rm[6 + i] * w[2];
    for (int i = 0; i < 3; i++)
      row[7 + i] = ((Es[3 * i] * y[0] + Es[3 * i + 1] * y[1]) + Es[3 * i + 2] * y[2]) + rs[i];
    row[10] = ((row[1] - h[0]) * row[4] + (row[2] - h[1]) * row[5]) + (row[3] - h[2]) * row[6];
  }
  return n;
}
"""
_V = ctypes.c_void_p


def _step_routines():
    """``(sd_step_road_near, sd_step_road_rows)`` (ctypes, untyped addresses), or None where no C compiler
    builds them."""
    near = c_routine(STEP_SOURCE, "sd_step_road_near", [_V] * 14, ctypes.c_longlong)
    return None if near is None else \
        (near, c_routine(STEP_SOURCE, "sd_step_road_rows", [_V, ctypes.c_longlong] + [_V] * 7, ctypes.c_longlong))


def mesh_box_step_rows(scene, boxes, others, bb, hulls, q, cut):
    """``(rows, near, near hulls)``: :func:`mesh_box_rows` of the pairs ``boxes`` (B,) beside ``others`` (O,)
    and ``hulls`` (H,) (sorted scene pairs) at ``q`` (nq,) with each scene pair's cutoff ``cut`` (P,) [m],
    through collide's road of these pairs where it answers (module docstring), whether a pair of ``bb``
    (the scene's pairs of two boxes, rows of their own, or None) may come within its cutoff, and which of
    ``hulls`` (coal's pairs, rows of their own) may, (H,) bool (the same broad phase as theirs, on the same
    poses; True where not run); None as :func:`mesh_box_rows`."""
    if use_backend.current() != "numpy" and type(q) is np.ndarray and q.dtype is _F64 and q.ndim == 1 and \
            q.flags.c_contiguous:                  # (the native placements read q in place)
        plan = _step_plan(scene, boxes, others, bb, hulls)
        got = False if plan is None else _road_rows(scene, plan, q, np.asarray(cut, float), boxes)
        if got is not False:
            return got
    got = mesh_box_rows(scene, boxes, q, cut[boxes], others, cut[others])
    return None if got is None else (got, True, True)


def _step_plan(scene, boxes, others, bb, hulls):
    """``(road, per thread, addresses, arrays)``: the :class:`~sparsedyn.contact.mesh_box_road.BoxRoad` of the
    pairs ``boxes``, ``others``, ``bb``'s and ``hulls`` (their broad phase in one call), each thread's tables
    (:func:`_thread_tables`), and the arrays the routines read (:data:`STEP_SOURCE`) and their addresses:
    ``rest``, ``boxes``, ``slot``, ``kind`` (1 where a road's pair is ``bb``'s, 2 one of ``hulls``, else 0),
    ``E`` (M, 3, 3) and ``r`` (M, 3) (each slot's mesh placed in its body); kept by the scene.  None where
    its slots are not ``boxes`` in order, each mesh its pair's ``a`` (then :func:`mesh_box_rows`), or it is
    not built (yet: asked again)."""
    key = "mesh-box step road"
    got = scene.cache.get(key)
    if got is not None and got[0] is boxes and got[1] is hulls:
        return got[2]
    plan = _collision_plan(scene)
    two = np.zeros(0, int) if bb is None else bb.pair
    rest = np.unique(np.concatenate([boxes, others, two, hulls]).astype(int))
    road = step_road(scene, rest, plan["c"], plan["r"], plan["half"])
    if road is None and (mesh_box_loop._routines() is None or _step_routines() is None or
                         native_calls(scene.model) is None or native_calls(scene.model).get(_GP) is None):
        return None                                # (not built yet)
    if road is not None and not (np.array_equal(road.rest[road.slot >= 0], boxes) and not road.swap.any()):
        road = None
    plan = None
    if road is not None:
        kept = {"rest": np.ascontiguousarray(road.rest, np.int64), "boxes": np.ascontiguousarray(boxes, np.int64),
                "slot": np.ascontiguousarray(road.slot, np.int64),
                "kind": np.isin(road.rest, two) + 2 * np.isin(road.rest, hulls).astype(np.int64),
                "hulls": np.searchsorted(road.rest, hulls).astype(np.int64),
                "E": np.ascontiguousarray([scene.shapes[i].R for i in road.ms], float).reshape(-1, 3, 3),
                "r": np.ascontiguousarray([scene.shapes[i].p for i in road.ms], float).reshape(-1, 3)}
        plan = (road, {}, {k: x.ctypes.data for k, x in kept.items()}, kept)
    scene.cache[key] = (boxes, hulls, plan)
    return plan


def _road_rows(scene, plan, q, cut, boxes):
    """The rows of :func:`mesh_box_rows` through ``plan``'s road (:func:`_step_plan`'s) at ``q`` with the
    scene pairs' cutoffs ``cut`` (P,), whether a pair of two boxes may be near and which of coal's (H,) bool;
    None where a pair of no rows may touch; False where the road declines."""
    gp = (native_calls(scene.model) or {}).get(_GP)
    road, threads = plan[0], plan[1]
    me = threading.get_ident()
    tables = threads.get(me)
    if tables is None:
        routines = _step_routines()
        if routines is None:
            return False
        tables = threads[me] = _thread_tables(scene, road, plan[2]) + (routines,)
    if gp is None:
        return False
    placed, slots, flag, near_args, rows_args, _, closest, out, _, routines = tables
    gp(q, "collision", out=placed)
    cut = np.ascontiguousarray(cut, float)
    n = routines[0](near_args[0], cut.ctypes.data, *near_args[1:])
    if n < 0:
        return None                                # a pair of no rows may touch: the Contact objects' road
    got = closest(slots[:n].tolist()) if n else np.zeros(1)
    n = routines[1](rows_args[0], n, *rows_args[1:4], got.ctypes.data, *rows_args[4:])
    if n == -1:
        raise MemoryError("mesh-box contacts: no memory for the workspace of the hulls' vertices")
    if n < 0:
        return False
    return out.copy(), bool(flag[0]), tables[5].take(plan[3]["hulls"]) if flag[1] else False


def _thread_tables(scene, road, at):
    """This thread's tables of ``road``: its table of addresses with cutoffs of its own, the robot shapes'
    placements (two arrays), the pairs kept (``slots`` (Q,), ``flag`` (2,)), the routines' arguments
    (:data:`STEP_SOURCE`) but the cutoffs and coal's answers, the broad phase's answer (Q,) bool, coal's
    queries of the slots (:func:`~sparsedyn.contact.mesh_box_road.closest_call`), the rows (M * 4, 11) and
    what owns the table; :func:`_road_rows` adds the routines."""
    own = {"cut": np.full(max(len(road.rest), 1), -np.inf), "mcut": np.zeros(len(road.ms)),
           "depth": np.zeros(len(road.ms))}
    tab = (ctypes.c_void_p * len(ROAD_TABLES))(*road.tab)
    for name, x in own.items():
        tab[ROAD_TABLES.index(name)] = x.ctypes.data
    G = len(scene.model.geometry("collision"))
    placed = np.empty((G, 3, 3)), np.empty((G, 3))
    scratch = road.solvers.get(threading.get_ident())
    if scratch is None:
        scratch = road.solvers[threading.get_ident()] = _scratch(road)
    R, p, near, _ = scratch[5]
    out = np.empty((len(road.ms) * MAX_PATCH_POINTS, NEAR_COLUMNS))
    slots, flag, dpar = np.zeros(max(len(road.rest), 1), np.int64), np.zeros(2, np.int64), \
        np.array([PATCH_DEPTH, float(scene.margin)])
    a, t = (lambda x: x.ctypes.data if x.size else None), ctypes.addressof(tab)
    near_args = (t, at["rest"], at["boxes"], a(dpar), at["slot"], at["kind"], a(placed[0]), a(placed[1]), a(R), a(p),
                 a(near), a(slots), a(flag))
    rows_args = (t, a(slots), a(R), a(p), at["E"], at["r"], a(out))
    return placed, slots, flag, near_args, rows_args, near, closest_call(road, scratch), out, (tab, own, dpar)


def mesh_box_rows(scene, boxes, q, cut, others=None, other_cut=None):
    """The rows (B * MAX_PATCH_POINTS, 11) (:func:`~sparsedyn.collision_candidates_near`'s columns) of
    the pairs ``boxes`` (B,) of a robot mesh and a world box at ``q`` (nq,), each pair's patch within
    its cutoff ``cut`` (B,) [m] (:func:`~sparsedyn.collide`'s hits of the pair: coal's closest pair of
    the mesh's hull and the box, the hull vertices on its face) in its first rows; the other rows'
    distance is +inf.  ``others`` (O,): scene pairs without rows, ``other_cut`` (O,) their cutoffs
    [m]: None where the broad phase leaves one of them within its cutoff or cannot be run natively
    (module docstring)."""
    out = free_rows((len(boxes) * MAX_PATCH_POINTS,))
    some = others is not None and len(others) > 0
    if not len(boxes) and not some:
        return out
    R, p = placements(scene, q)
    bounded = False
    if use_backend.current() != "numpy":           # the native broad phase (the other pairs' cutoff -inf: out)
        plan = _collision_plan(scene)
        full = np.full(len(scene.index), -np.inf)
        full[boxes] = cut
        if some:
            full[others] = other_cut
        near = near_pairs(scene, R, p, full, plan["c"], plan["r"])
        if near is not None:
            if some and near.take(others).any():
                return None                        # a pair without rows may touch: the Contact objects' road
            keep = near.take(boxes)
            boxes_near, cut, bounded = boxes[keep], np.asarray(cut, float)[keep], True
    if some and not bounded:
        return None
    if not len(boxes):
        return out
    (k, d, wa, wb, n), _ = _mesh_box_pairs(scene, boxes_near if bounded else boxes, R, p, cut, bounded)
    at = MAX_PATCH_POINTS * np.searchsorted(boxes, k) + np.arange(len(k)) - np.searchsorted(k, k)
    a = scene.index[k, 0]
    E = np.array([scene.shapes[i].R for i in a.tolist()]).reshape(-1, 3, 3)      # the shape in its body
    r = np.array([scene.shapes[i].p for i in a.tolist()]).reshape(-1, 3)
    Rb = np.einsum("kij,klj->kil", R[a], E)                                     # the body's axes (world)
    ob = p[a] - np.einsum("kij,kj->ki", Rb, r)
    out[at, 0], out[at, 1:4], out[at, 4:7] = d, (wa + wb) / 2, n
    out[at, 7:10], out[at, 10] = np.einsum("kji,kj->ki", Rb, wa - ob), np.einsum("ki,ki->k", n, wb)
    return out
