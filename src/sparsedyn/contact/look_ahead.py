"""How far a scene step looks for contacts: :func:`pair_cutoffs`.

A step of ``dt`` moves a point of a body by at most ``dt`` times its speed, so a pair reported only
within the scene's margin lets a point closing faster than ``margin / dt`` pass the surface unseen
(a box falling at 8 m/s with a 2 ms step travels 16 mm).  The step treats a contact with a positive
gap as speculative (its normal velocity closes the gap, no more), so it is enough to report each
pair whose distance is below ``margin + dt * s``, ``s`` a bound on its closing speed: per body
``|v_o| + |omega| rho`` (``v_o`` the velocity of the body's origin, ``omega`` its angular velocity,
``rho`` the radius about the origin of a sphere holding the body's shapes in the scene), a pair's
the sum of its two bodies' (a world shape's is zero: it does not move).  The bound is taken at the
step's start; what the step's own accelerations add in one step (``dt^2`` times them) the margin
holds.  A step of one state on the native road computes the same bound inside the collision kernel's
call (:func:`~sparsedyn.collision_candidates_ahead`, with :func:`body_reach`'s radii); this module's
NumPy form serves the other roads (a batch, the NumPy backend, contact lists for the viewer).

A mesh's patch on a plane needs less than the cutoff's allowance (:mod:`~sparsedyn.contact.reduction`):
its points move together but for the rotation, so the step's road that knows ``v`` passes each pair's
rotation over the step, :func:`pair_spins`, and each point gets its own allowance from it.

The compiled step's program grows with the square of its slots, so a step keeps no more than
:data:`STEP_CAPACITY` contacts where the others cannot act within it.  A robot lying across a floor
and a box finds a few more within the margin (talos: 34, 26 of them reachable within the step), so
where a step's contacts exceed that number :func:`within_capacity` leaves out, widest gap first, the
contacts whose gap is beyond what the step can close: a gap ``d > cutoff - margin`` (plus
:data:`~sparsedyn.contact.reduction.PATCH_DEPTH`, what the step's accelerations add) is wider than
``dt`` times the bound on the pair's closing speed, so at the step's start velocities it stays open
through the step and its impulse is zero; the margin holds it only so that it enters the solve
before it is needed.  Only as many are left out as the count exceeds the capacity: a step that fits
keeps every contact, and one whose reachable contacts alone exceed it keeps them all (an arm lying
across a table, a fallen robot's links pressed on each other), in the larger build of up to
:data:`~sparsedyn.contact.friction_kernel.MAX_COMPILED_CONTACTS` slots (beyond that on the NumPy
road).  A contact left out that the step's own impulses close after all is found by the next step,
at most the step's motion beyond the bound deep, which its position correction lifts out.
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kinematics import body_velocities, forward_kinematics
from ..kernels import native_calls
from .collision import _plan as _collision_plan
from .collision import collide_within
from .reduction import PATCH_DEPTH

__all__ = ["pair_cutoffs", "pair_spins", "cutoffs_and_spins", "body_reach", "within_capacity", "capacity_mask",
           "step_hits", "STEP_CAPACITY"]

_NONE, _F64 = {}, np.dtype(float)

#: The most contacts a step keeps where the others are beyond its reach, as the module docstring
#: says; the 32 data slots' build, half the compiled step's most, whose cost grows with the square
#: of the slots.
STEP_CAPACITY = 32


def body_reach(scene):
    """``(rho, M)``: per body, the radius (nb,) about its origin of a sphere holding its shapes in the
    scene (0 for a body with none), and the (P, nb) matrix of 0 and 1 that sums each pair's two
    bodies' bounds (a world shape adds nothing); kept by the scene."""
    got = scene.cache.get("look-ahead reach")
    if got is None:
        model = scene.model
        plan = _collision_plan(scene)
        rho = np.zeros(model.nbodies)
        for k, s in enumerate(scene.shapes):
            if s.body >= 0:                       # the bounding sphere's centre in the body's axes
                rho[s.body] = max(rho[s.body], np.linalg.norm(s.p + s.R @ plan["c"][k]) + plan["r"][k])
        M = np.zeros((len(scene.index), model.nbodies))
        for k, (i, j) in enumerate(scene.index.tolist()):
            for body in (scene.shapes[i].body, scene.shapes[j].body):
                if body >= 0:
                    M[k, body] += 1.0
        got = scene.cache["look-ahead reach"] = (rho, M)
    return got


def _pair_bodies(scene):
    """Each scene pair's two bodies (P, 2) (``a``'s, ``b``'s; a world shape's ``nb``, past the
    bodies: the world row :func:`pair_spins` pads with zeros); kept by the scene."""
    got = scene.cache.get("look-ahead pair bodies")
    if got is None:
        body = np.array([s.body for s in scene.shapes], int).reshape(-1)[scene.index].reshape(-1, 2)
        got = scene.cache["look-ahead pair bodies"] = np.where(body < 0, scene.model.nbodies, body)
        got.flags.writeable = False
    return got


def _body_velocities(model, q, v):
    """The bodies' spatial velocities (..., nb, 6) ``[omega; v_o]`` (body axes): the model's native
    kernel on the default road (built once per model, as every kernel), the forward velocity pass on
    the NumPy road."""
    f = (native_calls(model) or _NONE).get("body_velocities")
    if f is not None and q.shape == (model.nq,) and v.shape == (model.nv,):
        return f(q, v)
    return body_velocities(model, q, v)


#: Sums the squares of a spatial velocity's angular and linear parts: ``(V * V) @ _PARTS`` (..., 2).
_PARTS = np.repeat(np.eye(2), 3, axis=0)


def pair_cutoffs(scene, q, v, dt):
    """The distance (P,) or (B, P) [m] below which each pair of ``scene`` enters a step of ``dt`` [s]
    from ``q`` (nq,) or (B, nq) at ``v`` (nv,) or (B, nv): the scene's margin plus ``dt`` times a
    bound on the pair's closing speed (module docstring).  Where ``q``, ``v`` or ``dt`` is not a
    finite state of the model's shape (the step reports that), the margin alone."""
    model = scene.model
    rho, M = body_reach(scene)
    q, v = np.asarray(q, float), np.asarray(v, float)
    one = q.shape == (model.nq,) and v.shape == (model.nv,)
    lead = () if one else np.broadcast_shapes(q.shape[:-1], v.shape[:-1]) if q.ndim <= 2 and v.ndim <= 2 else None
    if (lead is None or q.shape[-1:] != (model.nq,) or v.shape[-1:] != (model.nv,) or not M.size
            or not isinstance(dt, (float, int, np.floating, np.integer)) or not 0 < dt < np.inf):
        return np.full((lead or ()) + (len(M),), scene.margin)
    return _cutoffs(scene, _body_velocities(model, q, v), dt, lead)


def _cutoffs(scene, V, dt, lead):
    """:func:`pair_cutoffs` of the bodies' spatial velocities ``V`` (*lead, nb, 6) (checked inputs)."""
    rho, M = body_reach(scene)
    n = np.sqrt((V * V) @ _PARTS)                          # (..., nb, 2): |omega|, |v_o|
    s = n[..., 1] + n[..., 0] * rho
    if not math.isfinite(s.sum()):                         # a non-finite v: the step refuses it
        return np.full(lead + (len(M),), scene.margin)
    return scene.margin + float(dt) * (s @ M.T)


def pair_spins(scene, q, v, dt):
    """Each pair's rotation over a step of ``dt`` [s] from ``q`` (nq,) at ``v`` (nv,): the rotation
    vector ``(omega_a - omega_b) dt`` (P, 3) [rad] of its shape ``a`` relative to ``b`` (world axes,
    ``omega`` a body's angular velocity at the step's start, a world shape's zero), what a mesh-plane
    patch's points need (:func:`~sparsedyn.contact.reduction.rotation_depth`); for a batch ``q`` (B, nq)
    and ``v`` (B, nv) or (nv,): (B, P, 3).  Where ``q``, ``v`` or ``dt`` is not a finite state (the
    step reports that): NaN (unknown)."""
    model = scene.model
    P = len(scene.index)
    q, v = np.asarray(q, float), np.asarray(v, float)
    lead = () if q.shape == (model.nq,) and v.shape == (model.nv,) else \
        _batch_of(q, v, model) if q.ndim == 2 else None
    if (lead is None or not P or not isinstance(dt, (float, int, np.floating, np.integer)) or not 0 < dt < np.inf):
        return np.full((lead or ()) + (P, 3), np.nan)
    return _spins(scene, q, _body_velocities(model, q, v), dt, lead)


def _spins(scene, q, V, dt, lead):
    """:func:`pair_spins` of the bodies' spatial velocities ``V`` (*lead, nb, 6) (checked inputs)."""
    model, P = scene.model, len(scene.index)
    f = (native_calls(model) or _NONE).get("forward_kinematics")
    R = (f(q) if f is not None and not lead else forward_kinematics(model, q))[0]
    w = np.einsum("...kij,...kj->...ki", R, V[..., :3]) * float(dt)    # world axes
    finite = np.isfinite(w).all((-2, -1))
    if not lead and not finite:
        return np.full((P, 3), np.nan)
    w = np.concatenate([w, np.zeros(lead + (1, 3))], -2)      # index nb: the world
    body = _pair_bodies(scene)
    out = w[..., body[:, 0], :] - w[..., body[:, 1], :]
    if lead:
        out[~finite] = np.nan
    return out


def cutoffs_and_spins(scene, q, v, dt):
    """``(pair_cutoffs(scene, q, v, dt), pair_spins(scene, q, v, dt))``, the bodies' velocities
    computed once for both where ``q`` (nq,) and ``v`` (nv,) are float arrays and ``dt`` a float in
    (0, inf) (a step's own; else each function checks its inputs)."""
    model = scene.model
    if (type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,) and type(v) is np.ndarray and
            v.dtype is _F64 and v.shape == (model.nv,) and type(dt) is float and 0 < dt < math.inf and
            len(scene.index) and body_reach(scene)[1].size):
        V = _body_velocities(model, q, v)
        return _cutoffs(scene, V, dt, ()), _spins(scene, q, V, dt, ())
    return pair_cutoffs(scene, q, v, dt), pair_spins(scene, q, v, dt)


def _batch_of(q, v, model):
    """The batch shape (B,) of ``q`` (B, nq) at ``v`` (B, nv) or (nv,), or None where they are not such."""
    if q.shape[-1:] != (model.nq,) or v.shape not in ((model.nv,), (len(q), model.nv)):
        return None
    return (len(q),)


def within_capacity(d, cutoff, margin, capacity=STEP_CAPACITY):
    """The contacts a step keeps (module docstring): ``d`` (n,) their gaps [m], ``cutoff`` (n,) their
    pairs' look-ahead (:func:`pair_cutoffs`) [m], ``margin`` the scene's [m].  Returns None where all
    are kept (``n <= capacity``), else the sorted indices kept: all but the ``n - capacity`` widest
    gaps among those beyond the step's reach (``d > cutoff - margin + PATCH_DEPTH``), or all of
    those where they are fewer."""
    d = np.asarray(d, float)
    if len(d) <= capacity:
        return None
    cutoff = np.broadcast_to(np.asarray(cutoff, float), d.shape)
    return np.flatnonzero(capacity_mask(d[None], cutoff[None], np.ones((1, len(d)), bool), margin, capacity)[0])


def capacity_mask(d, cutoff, mask, margin, capacity=STEP_CAPACITY):
    """:func:`within_capacity` of each row of a batch at once: ``d`` (B, K) the candidates' gaps [m],
    ``cutoff`` (B, K) their pairs' look-ahead [m], ``mask`` (B, K) those within it (the row's
    contacts, in order); returns the mask (B, K) of the contacts each row's step keeps (``mask``
    itself where no row holds more than ``capacity``), each row's those :func:`within_capacity`
    keeps of its contacts."""
    n = np.count_nonzero(mask, -1)
    rows = np.flatnonzero(n > capacity)
    if not len(rows):
        return mask
    d, m = d[rows], mask[rows]
    beyond = m & (d > cutoff[rows] - margin + PATCH_DEPTH)
    order = np.argsort(np.where(beyond, -d, np.inf), axis=1, kind="stable")    # widest first, ties in order
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(d.shape[1]), d.shape), 1)
    out = mask.copy()
    out[rows] = m & ~(beyond & (rank < (n[rows] - capacity)[:, None]))
    return out


def step_hits(scene, q, v, dt, cutoff=None):
    """The hits a step of ``dt`` [s] from ``q`` (nq,) at ``v`` (nv,) takes (a
    :class:`~sparsedyn.contact.collision.Hits`): each pair's within its look-ahead ``cutoff`` (P,)
    (None: :func:`pair_cutoffs`), a mesh's patch on a plane reduced by its rotation over the step
    (:func:`pair_spins`), and no more than :data:`STEP_CAPACITY` where the others are beyond the
    step's reach (:func:`within_capacity`)."""
    if cutoff is None:
        cutoff = pair_cutoffs(scene, q, v, dt)
    hits = collide_within(scene, q, cutoff, pair_spins(scene, q, v, dt))
    keep = within_capacity(hits.distances, cutoff[hits.pair], scene.margin, STEP_CAPACITY)
    if keep is None:
        return hits
    return type(hits)([hits.pairs[k] for k in keep.tolist()], hits.points[keep], hits.normals[keep],
                      hits.distances[keep], hits.pair[keep])
