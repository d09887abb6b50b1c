"""Centre of pressure and zero-moment point from contact wrenches (measured, estimated or simulated).

A contact's wrench ``[n; f]`` (on the robot, contact frame axes, about the frame origin ``o``; see
:class:`~sparsedyn.model.sensors.Contact`) is moved to world axes, ``n_w = R n``, ``f_w = R f``.  On a
plane through ``p0`` with unit normal ``u`` the point where the wrench has no moment parallel to the
plane is (the moment about ``p`` is ``N_p = N_0 - (p - p0) x F``; ``u x N_p = 0`` gives)::

    p = p0 + (u x N_0) / (u . F),        N_0 = n_w + (o - p0) x f_w

* the **centre of pressure** of one contact: that point on its sole plane, ``p0 = o``, ``u`` the
  frame's z axis (a sole's frame has z along the ground's normal, Pinocchio's and RBDL's convention);
  a point (3D) or one-direction (1D) contact has no moment: its CoP is its origin;
* the **zero-moment point** (Vukobratovic and Borovac, "Zero-moment point: thirty five years of its
  life", 2004): the same point for the sum of every contact's wrench about the world origin, on the
  ground plane ``u . x = height`` (default ``z = 0``).  For a robot standing still it is the ground
  projection of its centre of mass; it equals the CoP of the total contact wrench (Sardain and
  Bessonnet, "Forces acting on a biped robot. Center of pressure - zero moment point", 2004).

Both are undefined where the normal force ``u . F`` is not positive (a foot in the air, a robot
pulled off the ground): those entries are NaN, and the normal forces are returned beside them.

The **support polygon** is the convex hull (:class:`scipy.spatial.ConvexHull`), in the ground
plane, of the contacts' points projected on it: each contact frame's origin, or the corners of its
sole where ``soles`` gives them.  Every contact given counts as touching.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms.kinematics import frame_placement
from ..model.spatial import cross3
from .rows import contact_size, contacts_of

__all__ = ["center_of_pressure", "zero_moment_point", "support_polygon", "ZeroMomentPoint", "CentersOfPressure"]


class CentersOfPressure(NamedTuple):
    """Result of :func:`center_of_pressure`: ``points`` (..., k, 3) world CoP per contact (NaN where
    ``normal_force <= 0``) and ``normal_force`` (..., k) along each frame's z axis [N]."""

    points: np.ndarray
    normal_force: np.ndarray


class ZeroMomentPoint(NamedTuple):
    """Result of :func:`zero_moment_point`: ``point`` (..., 3) in the world on the ground plane (NaN
    where ``normal_force <= 0``); ``normal_force`` (...,) of the total contact wrench along the
    ground normal [N]; ``inside`` (...,) whether the point lies in the support polygon;
    ``margin`` (...,) its distance to the polygon's boundary [m], positive inside, negative outside
    (``-inf`` where the point is undefined)."""

    point: np.ndarray
    normal_force: np.ndarray
    inside: np.ndarray
    margin: np.ndarray


def _unit(x, what):
    u = np.asarray(x, float).reshape(-1)
    if u.shape != (3,) or not np.all(np.isfinite(u)) or not np.linalg.norm(u) > 0:
        raise ValueError(f"{what}: expected a nonzero 3-vector, got {x!r}")
    return u / np.linalg.norm(u)


def _wrenches(model, q, contacts, wrenches, who):
    """Per contact ``(R, o, n_w, f_w)``: the frame's world rotation (..., 3, 3) and origin (..., 3),
    and its wrench in world axes about the origin (..., 3) each."""
    if isinstance(wrenches, dict):
        unknown = set(wrenches) - {c.name for c in contacts}
        if unknown or len(wrenches) != len(contacts):
            raise ValueError(f"{who}: wrenches must have one entry per contact, named "
                             f"{[c.name for c in contacts]}, got {sorted(wrenches)}")
        per = [np.asarray(wrenches[c.name], float) for c in contacts]
    else:
        w = np.asarray(wrenches, float)
        m = contact_size(contacts)
        if w.ndim < 1 or w.shape[-1] != m:
            raise ValueError(f"{who}: wrenches must be (..., {m}) as contact_dynamics returns them "
                             f"({', '.join(f'{c.name}: {c.size}' for c in contacts)}), got shape {w.shape}")
        cuts = np.cumsum([0] + [c.size for c in contacts])
        per = [w[..., a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    out = []
    for c, w in zip(contacts, per):
        if w.shape[-1:] not in ((c.size,), (6,)) or not np.all(np.isfinite(w)):
            raise ValueError(f"{who}: the wrench of contact {c.name!r} must be {c.size} (or 6) finite numbers, "
                             f"got shape {w.shape}")
        R, o = frame_placement(model, q, c.frame)
        if w.shape[-1] == 6:
            n, f = w[..., :3], w[..., 3:]
        elif c.kind == "3d":
            n, f = np.zeros_like(w), w
        else:                                            # 1D: along the world normal
            f = w * _unit(c.normal, c.name)
            n = np.zeros_like(f)
            out.append((R, o, np.broadcast_to(n, f.shape), f))
            continue
        out.append((R, o, (R @ n[..., None])[..., 0], (R @ f[..., None])[..., 0]))
    return out


def _plane_point(p0, u, N0, F):
    """The point of the plane ``(p0, u)`` where the wrench ``(N0 about p0, F)`` has no tangential moment."""
    fn = F @ u
    with np.errstate(divide="ignore", invalid="ignore"):
        p = p0 + cross3(u, N0) / fn[..., None]
    return np.where((fn > 0)[..., None], p, np.nan), fn


def center_of_pressure(model, q, contacts, wrenches) -> CentersOfPressure:
    """The centre of pressure of each contact, in the world (see the module docstring).

    ``q`` (..., nq); ``contacts``: :class:`~sparsedyn.model.sensors.Contact` objects or frame names (6D);
    ``wrenches``: the contact wrenches on the robot, (..., m) as :func:`~sparsedyn.contact_dynamics`
    returns its ``forces`` (``[n; f]`` per 6D contact, ``f`` per point, the force along the normal
    per 1D contact), or a dict ``{contact name: wrench}`` whose wrenches are of that size or 6
    (``[n; f]``, as an estimator's ``contacts``).  Returns a :class:`CentersOfPressure`.
    """
    who = "center_of_pressure"
    contacts = contacts_of(model, contacts, who)
    pts, fns = [], []
    for R, o, n, f in _wrenches(model, q, contacts, wrenches, who):
        u = R[..., :, 2]
        p, fn = _plane_point(o, u, n, f)
        pts.append(p)
        fns.append(fn)
    shape = np.broadcast_shapes(*(p.shape for p in pts)) if pts else np.shape(q)[:-1] + (3,)
    return CentersOfPressure(np.stack([np.broadcast_to(p, shape) for p in pts], -2) if pts
                             else np.zeros(shape[:-1] + (0, 3)),
                             np.stack([np.broadcast_to(x, shape[:-1]) for x in fns], -1) if fns
                             else np.zeros(shape[:-1] + (0,)))


def _sole_points(c, soles, who):
    """The points (k, 3) of contact ``c`` in its frame's coordinates: its sole's corners or its origin."""
    if soles is None or c.name not in soles:
        return np.zeros((1, 3))
    s = np.asarray(soles[c.name], float)
    if s.shape == (2,):                              # (length, width): a rectangle about the origin
        lx, ly = s / 2
        s = np.array([[lx, ly, 0], [lx, -ly, 0], [-lx, -ly, 0], [-lx, ly, 0]])
    if s.ndim != 2 or s.shape[1] not in (2, 3) or not np.all(np.isfinite(s)):
        raise ValueError(f"{who}: soles[{c.name!r}] must be (length, width) or corner points (k, 2 or 3) in "
                         f"the frame's coordinates, got {soles[c.name]!r}")
    return np.pad(s, ((0, 0), (0, 3 - s.shape[1])))


def _plane_basis(u):
    e1 = np.cross(u, [1.0, 0, 0] if abs(u[0]) < 0.9 else [0, 1.0, 0])
    e1 /= np.linalg.norm(e1)
    return np.stack([e1, np.cross(u, e1)])           # (2, 3)


def support_polygon(model, q, contacts, soles=None, normal=(0.0, 0.0, 1.0), height=0.0) -> np.ndarray:
    """The support polygon's vertices (K, 3), counter-clockwise about ``normal``, in the world on the
    ground plane ``normal . x = height``, at one configuration ``q`` (nq,).  ``soles``: optional
    ``{contact name: (length, width)}`` (a rectangle centred on the frame origin, in its xy plane) or
    ``{contact name: corners (k, 2 or 3)}`` in the frame's coordinates; other contacts count by their
    origin.  Fewer than three points, or points on a line, give that point or segment."""
    from scipy.spatial import ConvexHull, QhullError
    u = _unit(normal, "support_polygon: normal")
    q = np.asarray(q, float)
    if q.ndim != 1:
        raise ValueError(f"support_polygon: one configuration (nq,), got shape {q.shape}")
    contacts = contacts_of(model, contacts, "support_polygon")
    pts = []
    for c in contacts:
        R, o = frame_placement(model, q, c.frame)
        pts.append(o + _sole_points(c, soles, "support_polygon") @ R.T)
    if not pts:
        raise ValueError("support_polygon: no contacts, no support")
    P = np.concatenate(pts)
    P = P - ((P @ u) - height)[:, None] * u          # projected on the plane
    B = _plane_basis(u)
    xy = P @ B.T
    try:
        hull = ConvexHull(xy)
        return P[hull.vertices]                      # counter-clockwise in (e1, e2), e1 x e2 = u
    except (QhullError, ValueError):
        # a point or a segment: its extreme points along the principal direction
        d = xy - xy.mean(0)
        axis = np.linalg.svd(d, full_matrices=False)[2][0] if len(xy) > 1 else np.zeros(2)
        s = d @ axis
        return P[np.unique([int(np.argmin(s)), int(np.argmax(s))])]


def _margin(poly2, p2):
    """Signed distance (positive inside) of the 2D point ``p2`` to the convex polygon ``poly2`` (K, 2),
    counter-clockwise; a point or a segment has no inside (negative distance, or zero on it)."""
    K = len(poly2)
    if K < 3:
        a, b = poly2[0], poly2[-1]
        ab = b - a
        t = 0.0 if not ab @ ab > 0 else np.clip((p2 - a) @ ab / (ab @ ab), 0.0, 1.0)
        return -float(np.linalg.norm(p2 - (a + t * ab)))
    a, b = poly2, np.roll(poly2, -1, 0)
    e = b - a
    L = np.linalg.norm(e, axis=1)
    side = (e[:, 0] * (p2 - a)[:, 1] - e[:, 1] * (p2 - a)[:, 0]) / L        # > 0: left of the edge, inside
    if np.all(side >= 0):
        return float(side.min())
    t = np.clip(np.einsum("ij,ij->i", p2 - a, e) / (L * L), 0.0, 1.0)
    return -float(np.min(np.linalg.norm(p2 - (a + t[:, None] * e), axis=1)))


def zero_moment_point(model, q, contacts, wrenches, *, normal=(0.0, 0.0, 1.0), height=0.0,
                      soles=None) -> ZeroMomentPoint:
    """The zero-moment point of the contact wrenches on the ground plane ``normal . x = height``
    (world), and whether it lies in the support polygon (see the module docstring).

    ``q`` (..., nq), ``contacts`` and ``wrenches`` as in :func:`center_of_pressure`; ``soles`` as in
    :func:`support_polygon`.  Returns a :class:`ZeroMomentPoint`; batched states are checked one by
    one against their own polygon.
    """
    who = "zero_moment_point"
    u = _unit(normal, f"{who}: normal")
    contacts = contacts_of(model, contacts, who)
    if not contacts:
        raise ValueError(f"{who}: no contacts, no zero-moment point")
    p0 = float(height) * u
    N0, F = 0.0, 0.0
    for R, o, n, f in _wrenches(model, q, contacts, wrenches, who):
        N0 = N0 + n + cross3(o - p0, f)
        F = F + f
    point, fn = _plane_point(p0, u, N0, F)
    q = np.asarray(q, float)
    shape = point.shape[:-1]
    Q = np.broadcast_to(q, shape + q.shape[-1:]).reshape(-1, q.shape[-1])
    B = _plane_basis(u)
    inside, margin = [], []
    for qk, pk in zip(Q, point.reshape(-1, 3)):
        poly = support_polygon(model, qk, contacts, soles, u, height)
        d = _margin(poly @ B.T, pk @ B.T) if np.all(np.isfinite(pk)) else -np.inf
        margin.append(d)
        inside.append(d >= 0)
    return ZeroMomentPoint(point, fn, np.reshape(inside, shape), np.reshape(margin, shape))
