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
holds.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kinematics import joint_transforms, velocity_pass
from ..kernels import native_calls
from .collision import _plan as _collision_plan

__all__ = ["pair_cutoffs"]

_NONE, _F64 = {}, np.dtype(float)


def _reach(scene):
    """``(rho, a, b)``: per body, the radius (nb + 1,) about its origin of a sphere holding its shapes
    in the scene (0 for a body with none and, last, for the world), and the bodies ``a``, ``b`` (P,) of
    each pair's shapes (-1, the last entry of ``rho``, for the world); kept by the scene."""
    got = scene.cache.get("look-ahead reach")
    if got is None:
        model = scene.model
        c, r = _collision_plan(scene)["c"], _collision_plan(scene)["r"]
        rho = np.zeros(model.nbodies + 1)
        for k, s in enumerate(scene.shapes):
            if s.body >= 0:                       # the bounding sphere's centre in the body's axes
                rho[s.body] = max(rho[s.body], np.linalg.norm(s.p + s.R @ c[k]) + r[k])
        body = np.array([s.body for s in scene.shapes], int).reshape(-1)
        idx = scene.index.reshape(-1, 2)
        got = scene.cache["look-ahead reach"] = (rho, body[idx[:, 0]], body[idx[:, 1]])
    return got


def _body_velocities(model, q, v):
    """The bodies' spatial velocities (..., nb, 6) ``[omega; v_o]`` (body axes): the model's native
    kernel where it is ready (one state), else the forward velocity pass."""
    f = (native_calls(model) or _NONE).get("body_velocities")
    if f is not None and q.shape == (model.nq,) and v.shape == (model.nv,):
        return f(q, v)
    vb, _ = velocity_pass(model, *joint_transforms(model, q), v)
    shape = np.broadcast_shapes(q.shape[:-1], v.shape[:-1])
    return np.stack([np.broadcast_to(x, shape + (6,)) for x in vb], -2) if vb else np.zeros(shape + (0, 6))


def pair_cutoffs(scene, q, v, dt):
    """The distance (P,) or (B, P) [m] below which each pair of ``scene`` enters a step of ``dt`` [s]
    from ``q`` (nq,) or (B, nq) at ``v`` (nv,) or (B, nv): the scene's margin plus ``dt`` times a
    bound on the pair's closing speed (module docstring).  Where ``v`` or ``dt`` is not a finite
    state of the model's shape (the step reports that), the margin alone."""
    model = scene.model
    rho, a, b = _reach(scene)
    q, v = np.asarray(q, float), np.asarray(v, float)
    lead = q.shape[:-1]
    ok = (np.isscalar(dt) and np.isfinite(dt) and dt > 0 and v.shape[-1:] == (model.nv,) and v.ndim <= 2
          and q.shape[-1:] == (model.nq,) and np.all(np.isfinite(v)) and np.all(np.isfinite(q)))
    if not ok or not len(a):
        return np.full(lead + (len(a),), scene.margin)
    V = _body_velocities(model, q, v)
    s = np.linalg.norm(V[..., 3:], axis=-1) + np.linalg.norm(V[..., :3], axis=-1) * rho[:-1]
    s = np.concatenate([s, np.zeros(s.shape[:-1] + (1,))], -1)      # the world: still
    return scene.margin + float(dt) * (s[..., a] + s[..., b])
