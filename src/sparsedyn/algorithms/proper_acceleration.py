"""What an ideal inertial measurement unit reads at a frame: angular velocity, angular
acceleration and proper acceleration (the classical acceleration of the frame's origin
minus gravity), from one pass of RNEA's kinematics."""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from ..model.spatial import cross3
from .rnea import rnea_passes

__all__ = ["frame_proper_acceleration"]


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",)}, static=("frame",),
        outputs={"omega": (3,), "domega": (3,), "proper": (3,)})
def frame_proper_acceleration(model, q, v, a, frame):
    """What an ideal IMU at ``frame`` reads, in the frame's axes: ``(omega, domega, proper)``, each (..., 3).

    ``omega``: angular velocity [rad/s], ``domega``: angular acceleration [rad/s^2],
    ``proper``: classical acceleration of the frame's origin minus gravity (``model.gravity``)
    [m/s^2], all in frame axes.  ``q`` (..., nq), ``v`` and ``a`` (..., nv).
    """
    q, v, a, _, g, shape, _ = _checks.dynamics(model, q, v, a, None, None, "a", "nv joint accelerations")
    fr = model.frames[model.frame(frame)]
    if fr.body < 0:                                  # fixed to the world: at rest, it reads -g
        zero = np.zeros(shape + (3,), q.dtype)
        proper = (fr.X.E @ (-np.asarray(g))[..., None])[..., 0]
        return zero, zero.copy(), np.broadcast_to(proper, shape + (3,))
    vb, ab, _, _ = rnea_passes(model, q, v, a, None, g)   # ab includes -g: the proper acceleration comes out
    i = fr.body
    E, r = fr.X.E, fr.X.r                            # frame axes from body axes; frame origin in body coords
    w, vo = vb[i][..., :3], vb[i][..., 3:]
    dw, ao = ab[i][..., :3], ab[i][..., 3:]
    r = np.broadcast_to(r, w.shape)
    vp = vo + cross3(w, r)                           # velocity of the body point at the frame origin
    acc = ao + cross3(dw, r) + cross3(w, vp)         # its classical acceleration minus g (body axes)
    rot = lambda x: (E @ x[..., None])[..., 0]      # noqa: E731
    return tuple(np.broadcast_to(rot(x), shape + (3,)) for x in (w, dw, acc))
