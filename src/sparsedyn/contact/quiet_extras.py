"""The rows of a state's pairs for coal and on height fields where none of them comes near, or where only
shapes' features touch a height field: the broad phases' routines alone, bound once (:func:`quiet_call`).

:func:`~sparsedyn.contact.box_box_road.extra_rows` writes, after the collision kernel's candidates, the rows
of a scene's pairs of two convex shapes (coal's closest pair: :func:`~sparsedyn.contact.hull_pairs.hull_rows`)
and of its robot shapes on world height fields (:func:`~sparsedyn.contact.collision_hfield.hfield_rows`).  A
robot standing on its floor has none of those pairs near at most states (dm_control's quadruped: its legs
against its torso, its shapes over a terrain under its floor), and there the Python around the two roads'
broad phases (their plans looked up, their arguments made) costs several times the routines themselves.
:func:`quiet_call` binds their calls once per thread and table: the bounds of the convex pairs
(:func:`~sparsedyn.contact.mesh_box_loop.near_pairs`' routine) and, per height field, the shapes near it
(:func:`~sparsedyn.contact.heightfield_c.group_call`); where they find no pair near, the pairs' rows are
free rows (distance +inf), as the roads write them; else the roads answer, the convex pairs' with the broad
phase's answer handed on.  Shapes on one height field whose hits are their features' alone (spheres, meshes'
hull vertices: a quadruped's toes on its terrain) have their rows written in C too, from the broad phase's own
call (:func:`~sparsedyn.contact.heightfield_c.group_rows_call`).  The same routines on the same numbers: the
roads' rows, bit for bit (the C rows' point in its body and ``n . w_b``, the same three-term sums written
again: to rounding).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..kernels import use_backend
from .collision_coal import _bounds
from .collision_hfield import _field, _more_kinds, _plan
from .collision_near import _in_bodies, free_rows
from .heightfield_c import group_call, group_rows_call
from .mesh_box_loop import _routines, near_plan
from .mesh_plane_loop import _at

__all__ = ["quiet_call", "QUIET", "TABLES_HELD"]

#: ``scene.cache``'s key of the quiet calls: ``{(thread id, id of the table): (held, the call)}``.
QUIET = "quiet extras"

#: A scene's quiet calls are forgotten when this many tables are held (a thread's collide table and its
#: step's table each have one; threads come and go).
TABLES_HELD = 16


def quiet_call(scene, hulls, fields, held):
    """``quiet() -> (broad, written)`` for the pairs ``hulls`` (H,) and ``fields``
    (:func:`~sparsedyn.contact.collision_hfield.field_pairs`' pairs and rows) of
    :func:`~sparsedyn.contact.box_box_road.extra_rows`' ``held`` ``(R (S, 3, 3), p (S, 3), cut (P,),
    table)`` (the placements and cutoffs as they are when it is called): ``broad`` None where the convex
    pairs' rows (the table's first H) are written free (none near, or none), else the broad phase's
    answer (H,) bool (a new array) for :func:`~sparsedyn.contact.hull_pairs.hull_rows`; ``written`` True
    where the height fields' rows (the next ones) are written: free (no shape near its field, or no pair), or
    on one field the shapes' hits where they are their features' alone (:func:`_rows_call`).
    None where a routine is not built (no C compiler) or the NumPy backend is in use: the roads answer.
    Bound once per thread and table, kept in ``scene.cache[QUIET]``."""
    if use_backend.current() == "numpy":
        return None
    per = scene.cache.setdefault(QUIET, {})
    key = (threading.get_ident(), id(held[3]))
    got = per.get(key)
    if got is None or got[0] is not held:
        if len(per) >= TABLES_HELD:
            per.clear()
        got = per[key] = (held, _bind(scene, hulls, fields, held))
    return got[1]


def _bind(scene, hulls, fields, held):
    """The call of :func:`quiet_call`, or None."""
    R, p, cut, out = held
    H, c = len(hulls), out.shape[1]
    broad = _broad(scene, hulls, R, p, cut) if H else (lambda: None)
    pairs, counts = fields
    plan = _plan(scene, pairs)[2] if len(pairs) else []
    free_h, F = free_rows((H,))[:, :c], int(counts.sum())
    free_f, fields_at = free_rows((F,))[:, :c], slice(H, H + F)
    rows = _rows_call(scene, fields, plan, R, p, cut, out[fields_at]) if len(plan) == 1 else None
    groups = [] if rows is not None else [group_call(field[3], field[2], R, p, g[3], g[4], g[5], pairs.take(at), cut)
                                          for f, at, g in plan for field in (_field(scene, f),)]
    if broad is None or None in groups:
        return None

    def quiet():
        near = broad()
        if near is None and H:
            out[:H] = free_h
        if rows is not None:
            return near, rows()
        written = not any(g() for g in groups)
        if written and F:
            out[fields_at] = free_f
        return near, written
    return quiet


def _rows_call(scene, fields, plan, R, p, cut, rows):
    """The call that writes the rows ``rows`` (F, c) of the pairs ``fields`` on their one height field
    (``plan``: :func:`~sparsedyn.contact.collision_hfield._plan`'s one group) in C where it can
    (:func:`~sparsedyn.contact.heightfield_c.group_rows_call`), or None (a pair whose first shape is the field)."""
    (f, at, g), = plan
    sa, flip = g[1], g[2]
    if flip.any():
        return None
    pairs, counts = fields
    E, r = _in_bodies(scene)
    pose = np.column_stack([(np.cumsum(counts) - counts)[at], counts[at], _more_kinds(scene)[sa],
                            E[sa].reshape(-1, 9), r[sa]])
    field = _field(scene, f)
    return group_rows_call(field[3], field[2], R, p, g[3], g[4], g[5], pairs.take(at), cut, pose, rows)


def _broad(scene, hulls, R, p, cut):
    """``near() -> (H,) bool or None``: the broad phase of the convex pairs ``hulls`` (H,) as
    :func:`~sparsedyn.contact.mesh_box_loop.near_pairs` runs it at the placements ``R``, ``p`` and the
    cutoffs ``cut.take(hulls)`` as they are when called (its routine, tables and buffers bound once), None
    where no pair is near; None where the routine is not built."""
    routines = _routines()
    if routines is None or not all(x.flags.c_contiguous and x.flags.writeable for x in (R, p)):
        return None
    f, H = routines[0], len(hulls)
    at = near_plan(scene, *_bounds(scene), hulls)[1]
    cut_h, near = np.empty(H), np.empty(max(H, 8), bool)
    args = (H, *at[:8], _at(R), _at(p), _at(cut_h), *at[8:], ctypes.c_double.from_buffer(near))
    mine, take = near[:H], cut.take

    def call():
        take(hulls, out=cut_h)
        f(*args)
        return mine.copy() if mine.any() else None
    return call
