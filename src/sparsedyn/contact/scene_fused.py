"""A step in a scene in one native call: collision, slot layout and solve (:func:`fused_step`).

On the default road a step in a :class:`~sparsedyn.contact.scene.Scene` whose pairs are all the
collision kernel's runs three stages: the collision kernel with its look-ahead
(:func:`~sparsedyn.contact.scene_data.ahead_candidates`), the candidates within their pair's
cutoff laid out in the step's slots (:func:`~sparsedyn.contact.scene_data.scene_slot_data`: per
body where one robot body alone touches, else the scene's data slots), and the step's kernel
(:func:`~sparsedyn.contact.friction_kernel.contact_step_kernel`).  Where the layout already holds
the step's contacts (a trajectory's steps after its first few; in data slots, where their count holds
them: a body's per-body slots, which that step does not read, grow when read, by the derivatives or a
warm start's general matching), the three are one call of the
compiler's C extension (its ``scene_step``), which runs the two kernels' own fast paths and lays
the contacts out between them entry by entry as the Python road does: the same data, the same
solve, the same arrays, bit for bit.  The plan of that call (the two kernels, each candidate's slot
key and friction, the free slots' data, each key's joint weights) is kept in ``scene.cache`` while
the layout, the time step and the model's native callables stay.

A scene whose other pairs are robot meshes on world planes (or world boxes) or pairs of two boxes
takes this road too: its candidates are found first as the Python road finds them
(``scene_data._mixed_candidates``: the kernel's candidates of the closed-form
pairs beside the mesh-plane rows and each pair's look-ahead, those two from one call of the
hand-written routine of :mod:`~sparsedyn.contact.mesh_plane_loop`, the mesh-box rows from coal, the
box-box rows from the routine of :mod:`~sparsedyn.contact.box_box_native`; where the other pairs are
pairs of two boxes alone, the look-ahead, the box-box rows and the kernel's candidates in four native
calls, :mod:`~sparsedyn.contact.box_box_step`, which the native call runs itself where it keeps nothing
of the rows, :mod:`~sparsedyn.contact.box_box_fused`) and handed to the native call, which lays them
out and solves as above.

A trajectory's step is one call too (:func:`chained_step`): once the contacts are found and laid
out, the call matches their warm start from the step before's contacts where the matching is plain
(the same pairs in the same order, each point within the radius with its normal: what a resting or
rolling body's contacts do step after step) and asks Python where it is not
(:func:`~sparsedyn.contact.scene_step.matched_warm_start`, whose answer the plain matching is), and
returns the step's contacts' pairs and rows (what the next step matches).  A rollout's steps under
joint forces known beforehand run one after another in one call (:func:`chained_steps`: the
extension's ``scene_rollout``; a mixed plan's candidates found before each step by a Python callable
it calls, :func:`step_candidates`) until one leaves this road; while the scene's data slots are more
than the least, in chains that end where the count may shrink
(:func:`~sparsedyn.contact.data_slots.steps_to_shrink`), whose contact counts are told to
:func:`~sparsedyn.contact.data_slots.data_slots_used` between them (the count shrinks where they fit in
fewer, at the step a step-by-step count would: the next chain runs that count's plan, kept per count as
the kernels are).  A
chain's step whose contacts are more than its data slots ends it with their number: the count grows to
hold them and the next chain, in that count's plan, takes the step.  Any other step takes the Python
road, which grows the layout where needed: external forces or gravity given, a warm start that is not
an array, the NumPy backend, a kernel not built yet, more contacts than the layout holds (per-body
slots; a single step's, more than the data slots), a pair of kinds neither the collision kernel nor
the mesh rows cover (two meshes), slot frames that are not their bodies' own (per-body slots), an
input a kernel's fast path declines (a NaN, a quaternion off unit norm: the Python road says which).
"""

from __future__ import annotations

import math
from threading import get_ident

import numpy as np

from .. import _checks
from ..kernels import native_calls, native_function, use_backend
from .box_box_road import box_box_poses
from .box_box_step import box_box_step_rows
from .collision_near import collision_candidates_ahead
from .data_slots import empty_data_slots, key_weights, runs_per_body
from . import scene_data
from .friction_kernel import contact_step_kernel
from .friction_problem import DATA_SLOT, ContactSlots
from .look_ahead import body_reach
from .mesh_plane_step import boxes_alone, found_stages, meshes_on_planes, plane_stages, plane_step_rows
from .reduction import PATCH_DEPTH
from .scene_data import _Mixed, _filler, _plan, held_contacts
from .scene_step import WARM_RADIUS, FoundContacts, matched_warm_start

__all__ = ["fused_step", "chained_step", "chained_steps", "general_matching", "trajectory_plan", "mixed_call",
           "step_candidates"]

_AHEAD, _STEP = collision_candidates_ahead.__name__, contact_step_kernel.__name__
_NONE, _F64 = {}, np.dtype(float)
_KEY = "fused step"


def fused_step(model, q, v, tau, scene, dt, settings, warm_start=None, previous=None, contacts=False):
    """``(StepArrays tuple, index)`` of one step of ``model`` (the scene's own, a
    :class:`~sparsedyn.Model`) at ``q`` (nq,), ``v``, ``tau`` (nv,) (arrays or sequences of floats)
    in ``scene`` over ``dt`` (a number > 0) with the kernel's ``settings`` (5,), from ``warm_start``
    (None, or an array (m, 3): the contacts' impulses where m is their number, else ignored, as on
    the Python road), in one native call (module docstring); ``index``: the contacts' slots (None: slot ``i`` holds
    contact ``i``, no other).  ``previous``: the ``(contacts, impulses)`` of the step before (a
    :class:`~sparsedyn.contact.scene_step.FoundContacts`): the step starts from them where a contact
    persists (:func:`~sparsedyn.contact.scene_step.matched_warm_start`, called from the native call once
    the contacts are found; ``warm_start`` then unused); with it or ``contacts``, the result is
    ``(StepArrays tuple, index, contacts)``, the step's contacts a
    :class:`~sparsedyn.contact.scene_step.FoundContacts` as on the Python road (what the next step's
    ``previous`` needs).  None where this road does not apply: then the Python road."""
    if use_backend.current() == "numpy" or not (type(dt) in (float, int) and 0 < dt < math.inf) or not (
            warm_start is None or type(warm_start) is np.ndarray):
        return None
    plan = _fused_plan(scene, model, dt)
    if plan is None:
        return None
    # arrays as given: the native call takes float64 arrays of one state's shapes and declines any
    # other (a batch, another dtype); sequences converted with the step's own check (its error, where
    # one is not numbers, is the Python road's)
    qa = q if type(q) is np.ndarray else _checks.plain_floats("contact_step", "q", q, f"(..., {model.nq})")
    va = v if type(v) is np.ndarray else _checks.plain_floats("contact_step", "v", v, f"(..., {model.nv})")
    ta = tau if type(tau) is np.ndarray else _checks.plain_floats("contact_step", "tau", tau, f"(..., {model.nv})")
    run, args, mixed = plan[0], plan[1], plan[4]
    # a scene with robot meshes on world planes: its candidates found as the Python road finds them
    # (scene_data's _mixed_candidates: the mesh-plane loop's rows beside the kernel's), handed over
    # (only for what the native call takes: one state's float64 arrays)
    pre = None
    if mixed is not None:
        if not (qa.dtype is _F64 and va.dtype is _F64 and qa.shape == (model.nq,) and va.shape == (model.nv,)):
            return None
        pre = scene_data._mixed_candidates(scene, mixed, qa, None, (va, float(dt)))
        if pre is None:                            # (a pair of no rows may touch: the Python road)
            return None
    if previous is None and not contacts:
        return run(args, qa, va, ta, settings, warm_start, pre)
    if previous is None:                           # the contacts' layout returned beside the step
        got = run(args, qa, va, ta, settings, warm_start, pre, True)
        return None if got is None else (got[0], got[1], _found(scene, plan, got[2], got[3], got[4], got[5], got[1]))
    if type(previous[0]) is not FoundContacts:
        return None
    found = []

    def warm(sel, slot, c, data):                  # the contacts found, laid out: their warm start
        found.append(_found(scene, plan, sel, slot, c, data))
        return warm_start if previous is None else matched_warm_start(*previous, found[0])
    got = run(args, qa, va, ta, settings, warm, pre)
    return None if got is None else got + (found[0],)


def chained_step(model, q, v, tau, scene, dt, settings, warm_start=None, previous=None, plan=None):
    """:func:`fused_step` of a trajectory's step (its ``contacts``: ``(StepArrays tuple, index,
    contacts)``, or None: then the Python road; in data slots that do not hold the step's contacts, their
    number, an int), whose warm start from ``previous`` (the step
    before's ``(contacts, impulses)``) is matched in the native call where the matching is plain (no
    contact before or now; the same pairs in the same order, each point kept within
    :data:`~sparsedyn.contact.scene_step.WARM_RADIUS` with its normal, or the same points and
    normals: the answer of :func:`~sparsedyn.contact.scene_step.matched_warm_start`, asked of it
    where the matching is not plain); the contacts are then a
    :class:`~sparsedyn.contact.scene_step.FoundContacts` of their pairs and ``[p (3), plane (4)]``
    rows only (what the next step's matching reads; no slots).  ``plan``: :func:`trajectory_plan`'s
    for this scene, model and ``dt`` where the caller holds it (nothing changed the scene's layout
    since: a trajectory's steps one after another on this road), else None (asked here)."""
    if plan is None:
        plan = trajectory_plan(scene, model, dt)
        if plan is None or not (warm_start is None or type(warm_start) is np.ndarray):
            return None
    if previous is not None and type(previous[0]) is not FoundContacts:
        return fused_step(model, q, v, tau, scene, dt, settings, warm_start, previous, True)
    qa = q if type(q) is np.ndarray else _checks.plain_floats("contact_step", "q", q, f"(..., {model.nq})")
    va = v if type(v) is np.ndarray else _checks.plain_floats("contact_step", "v", v, f"(..., {model.nv})")
    ta = tau if type(tau) is np.ndarray else _checks.plain_floats("contact_step", "tau", tau, f"(..., {model.nv})")
    pre = None
    if plan[4] is not None:                        # a mixed plan: its candidates found first (as fused_step)
        if not (qa.dtype is _F64 and va.dtype is _F64 and qa.shape == (model.nq,) and va.shape == (model.nv,)):
            return None
        pre = scene_data._mixed_candidates(scene, plan[4], qa, None, (va, float(dt)))
        if pre is None:
            return None
    if previous is None:
        got = plan[0](plan[1], qa, va, ta, settings, warm_start, pre, (plan[5], WARM_RADIUS, None))
    else:
        got = plan[0](plan[1], qa, va, ta, settings, general_matching(scene, plan), pre,
                      (plan[5], WARM_RADIUS, (previous[0].pair, previous[0]._data(), previous[1])))
    return got if type(got) is not tuple else (got[0], got[1], FoundContacts(got[2], None, got[3]))


def chained_steps(plan, q, v, tau, settings, warm_start, previous, steps, general, into=None, springs=None,
                  candidates=None):
    """Up to ``steps`` steps of :func:`chained_step` one after another in one native call (the
    extension's ``scene_rollout``), from ``(q, v)`` (nq,), (nv,) float64 arrays, with ``tau`` (nv,)
    held or (n, nv) (row k: step k's), ``previous`` as :func:`chained_step`'s (None: the first step
    from ``warm_start``), ``plan``: :func:`trajectory_plan`'s, ``general``: :func:`general_matching`'s,
    ``candidates``: :func:`step_candidates`'s (a mixed plan's).  Returns the list of the steps' ``(StepArrays
    tuple, index, pair, rows, impulses)`` (the contacts' scene pairs (nc,), ``[p (3), plane (4)]``
    rows (nc, 7), impulses in their order (nc, 3)), ending before the first step this road declines (its
    last item that step's number of contacts, an int, where they are more than the plan's data slots).
    ``into``: None, or ``(Q, V, R)`` float64 C-contiguous arrays of at least ``steps + 1``, ``steps + 1``
    and ``steps`` rows of ``nq``, ``nv`` and 8 entries: step k's next ``q``, ``v`` and report are
    copied into their rows k + 1, k + 1 and k (a caller that stacks them).  ``springs``: None, or the
    joints' springs and dampers added to each step's ``tau`` at the state it starts from
    (:func:`~sparsedyn.contact.passive_step.vector_springs`)."""
    if previous is not None and type(previous[0]) is not FoundContacts:
        return []                                  # (Contact objects: the Python road matches them)
    prev = None if previous is None else (previous[0].pair, previous[0]._data(), previous[1])
    return native_function("scene_rollout")(plan[1], q, v, tau, settings, warm_start, (plan[5], WARM_RADIUS, prev),
                                            steps, general, into, springs, candidates)


def step_candidates(scene, plan, dt):
    """The candidates of a mixed ``plan`` (:func:`trajectory_plan`'s) for :func:`chained_steps`: a callable
    ``(q, v)`` returning a step's candidates from ``q`` at ``v`` over ``dt`` as :func:`chained_step` finds
    them, or None where they are not one state's float64 arrays or a pair of no rows may touch (the
    Python road then takes that step); None for a plan of the collision kernel's (found in the call)."""
    mixed, model = plan[4], scene.model
    if mixed is None:
        return None
    nq, nv, ahead = (model.nq,), (model.nv,), float(dt)
    planes = meshes_on_planes(mixed)
    staged = []                                    # plane_stages' (found, md, last) once made (False: never)

    def candidates(q, v):
        if not (q.dtype is _F64 and v.dtype is _F64 and q.shape == nq and v.shape == nv):
            return None
        if planes and not staged:
            kept = plane_stages(scene, mixed, q, v)
            if kept is not None:
                staged.append(kept)
        # robot meshes on planes: found in the step's call, in buffers it reads and keeps nothing of
        if staged and staged[0]:
            found, md, last = staged[0]
            md[1] = last[0] = ahead                # (the rollout's dt, which the routine reads)
            return found
        return planes and plane_step_rows(scene, mixed, q, v, ahead, False) or \
            scene_data._mixed_candidates(scene, mixed, q, None, (v, ahead))
    return candidates


def mixed_call(scene, plan, dt):
    """The native call of a mixed ``plan`` (:func:`trajectory_plan`'s, its candidates found before the
    call) for steps of ``dt`` (a float > 0) in ``scene``, as :func:`fused_step` makes it: a callable
    ``(args, q, v, tau, settings, warm_start, pre=None, *more)`` that finds the candidates at ``q``,
    ``v`` (``pre`` unused) and runs the plan's ``scene_step`` on them, or answers None where ``q``,
    ``v`` are not one state's float64 arrays or a pair the call has no rows for may touch (the Python
    road then).  For a caller that keeps it
    while the plan stays (``contact_step``'s road: no plan lookup, no settings made, each call)."""
    run, mixed, model = plan[0], plan[4], scene.model
    nq, nv = (model.nq,), (model.nv,)
    boxes = boxes_alone(mixed)
    planes = meshes_on_planes(mixed)
    held = {}                                      # thread id -> found_stages' (found, md, last), once made

    def call(args, q, v, tau, settings, warm_start, pre=None, *more):
        if not (q.dtype is _F64 and v.dtype is _F64 and q.shape == nq and v.shape == nv):
            return None
        # pairs of two boxes or robot meshes on planes: their rows in the routine's buffers, which the
        # call reads and keeps nothing of where it returns no layout and asks no warm start (copies where
        # it does); else (and where the routine declines) the general road's, looked up as fused_step does
        # (where it keeps nothing: the calls that find their rows run in the call, box_box_stages' or
        # plane_stages' stages, this thread's bound here once)
        keep = bool(more) or callable(warm_start)
        if (boxes or planes) and not keep:
            kept = held.get(get_ident())
            if kept is None:
                kept = found_stages(scene, mixed, q, v)
                if kept is not None:
                    held[get_ident()] = kept
            if kept:
                found, md, last = kept
                if dt != last[0]:                  # (the step's dt, read by the routine: written once)
                    md[1] = last[0] = dt
                return run(args, q, v, tau, settings, warm_start, found)
        pre = boxes and box_box_step_rows(scene, mixed, box_box_poses, q, v, dt, keep) or \
            planes and plane_step_rows(scene, mixed, q, v, dt, keep)
        if not pre:
            pre = scene_data._mixed_candidates(scene, mixed, q, None, (v, dt))
            if pre is None:                    # (a pair of no rows may touch: the Python road)
                return None
        return run(args, q, v, tau, settings, warm_start, pre, *more)
    return call


def general_matching(scene, plan):
    """The warm start's general matching (contacts that came, went or turned) of a step of
    :func:`chained_step` on ``plan``, as the native call asks it: a callable ``(sel, slot, c, data,
    previous)`` (``previous``: the step before's ``(pair, rows, impulses)``) returning
    :func:`~sparsedyn.contact.scene_step.matched_warm_start`'s impulses."""
    def warm(sel, slot, c, data, previous):
        return matched_warm_start(FoundContacts(previous[0], None, previous[1]), previous[2],
                                  _found(scene, plan, sel, slot, c, data))
    return warm


def trajectory_plan(scene, model, dt):
    """The plan of :func:`chained_step` (:func:`_fused_plan`'s) for ``scene``, ``model`` (its own) and
    ``dt`` now, or None where the fused road does not apply (the NumPy backend, a ``dt`` not a number
    > 0, a kernel not built yet, a layout not made yet)."""
    if use_backend.current() == "numpy" or not (type(dt) in (float, int) and 0 < dt < math.inf):
        return None
    return _fused_plan(scene, model, dt)


def _found(scene, plan, sel, slot, c, data, index=False):
    """The :class:`~sparsedyn.contact.scene_step.FoundContacts` of the candidates ``sel`` (nc,) of ``c``
    (K, 11) laid out in per-body slots ``slot`` (nc,) (their data ``data`` (ns, 8) where the step runs
    in per-body slots), as :func:`~sparsedyn.contact.scene_step.step_in_scene` makes them (``plan``:
    :func:`_fused_plan`'s); ``index``: the native call's (the contacts' slots, None where they fill
    every slot in order), where known."""
    args, frames, pair = plan[1], plan[2], plan[3]
    if args[11]:                                   # data slots: the per-body slots made when read
        return FoundContacts(*held_contacts(scene, sel, c))
    at = index if index is not False else \
        None if len(slot) == len(frames) and slot.tolist() == list(range(len(frames))) else slot
    return FoundContacts(pair[sel], tuple.__new__(ContactSlots, (frames, at, data)))


def _fused_plan(scene, model, dt):
    """``(scene_step, its plan (the C docstring's), the per-body slot keys, each candidate's scene
    pair, the mixed plan or None)`` for ``scene`` and ``dt``, kept in ``scene.cache`` while the slot
    layout and ``dt`` stay, one per count of data slots (the model's native callables, which the plan
    holds, stay once built: a plan is kept only once they are); None where the road does not apply now."""
    cache = scene.cache
    layout = cache.get("step_slots")
    if not layout:
        return None
    # (the capacity: the Python road's, scene_data's)
    # one plan per count of data slots (the count follows the contacts up and down: a return to a
    # count runs its plan again, no new one), each kept while the rest of its snap stays
    n = cache.get("data_slot_count", 0)
    snap = (dt, len(layout), sum(layout.values()), n, scene_data.STEP_CAPACITY)
    plans = cache.get(_KEY)
    if plans is None:
        plans = cache[_KEY] = {}
    got = plans.get(n)
    if got is None or got[0] != snap:
        calls = native_calls(model) or _NONE
        ahead, step = calls.get(_AHEAD), calls.get(_STEP)
        if step is None:                           # (the look-ahead kernel: where the plan runs it)
            return None
        plan = _make_plan(scene, model, dt, layout, ahead, step)
        if plan is False:                          # not built yet: asked again at the next step
            return None
        got = plans[n] = (snap, plan)
    return got[1]


def _make_plan(scene, model, dt, layout, ahead, step):
    """The tuple that :func:`_fused_plan` keeps (its last entry: the scene's
    ``scene_data._Mixed`` plan, whose candidates each step finds before the
    call, or None: the collision kernel's, found in the call); None where the scene's steps never take
    this road (pairs neither covers, per-body slots in frames not the bodies' own), False where a
    kernel is not built yet."""
    # (the module's functions looked up when called: what a caller patched there holds here too)
    plan, run = _plan(scene) or scene_data._mixed_plan(scene), native_function("scene_step")
    if plan is None or run is None:
        return None
    kp, kid, keys, _, _, mu, moved = plan
    mixed = kp if isinstance(kp, _Mixed) else None
    data_slots = not runs_per_body(scene)
    if moved and not data_slots:                   # per-body points turned into their slot frames: the Python road
        return None
    look = scene.cache.get("look")
    if mixed is not None:
        look = (None,) * 4
    elif look is None or look[0] != dt or look[3] is not ahead:      # (as ahead_candidates keeps it)
        look = scene.cache["look"] = (dt, np.array([scene.margin, dt]), body_reach(scene)[0], ahead)
    slots, first, end, free = _filler(scene, keys, layout)
    if data_slots:
        n = scene.cache.get("data_slot_count", 0)
        frames, base, W = (DATA_SLOT,) * n, empty_data_slots(model, n), key_weights(scene, keys)
    else:
        frames, base, W = slots, free, None
    # (a mixed scene's candidates come with the call: no collision kernel in the plan)
    collide = None if mixed is not None else _kernel(ahead, (kp.pairs,))
    solve = _kernel(step, (frames,))
    if (collide is None and mixed is None) or solve is None or not len(frames):
        return False
    ints = lambda x: np.ascontiguousarray(x, np.int64)      # noqa: E731
    shapes = None if mixed is not None else kp.shapes
    args = (collide, shapes, look[2], look[1], solve, ints(kid), np.ascontiguousarray(mu, float), ints(first),
            ints(end), np.ascontiguousarray(base), W, int(data_slots), scene_data.STEP_CAPACITY, float(scene.margin),
            float(PATCH_DEPTH))
    # (a trajectory's chain: each candidate's scene pair; its rows' points in the axes of the body, those
    # of its slot frame where these are per-body slots: their frames are the bodies' own)
    return run, args, slots, kp.pair, mixed, ints(kp.pair)


def _kernel(method, key):
    """The built fast kernel of a native method for its static arguments ``key``, or None."""
    table = getattr(method, "__table__", None)
    f = table.get(key) if table is not None else None
    return f if type(f).__name__ == "Kernel" else None
