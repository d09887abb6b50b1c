"""Ground truth for estimation: the classical Newton-Euler recursion, keeping every variable.

:func:`newton_euler` is RNEA (Featherstone, Table 5.1) written out again so
that it returns ``a_i`` and ``f_i`` as well as ``tau``: the simulated sensor
data of the case study come from the classical algorithm, not from the sparse
system the estimator solves.  Its ``tau`` equals :func:`sparsedyn.rnea` (tested).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..algorithms.rnea import rnea_passes
from ..model.spatial import apply_force, inverse

__all__ = ["newton_euler", "pack_d", "contact_forces_to_bodies"]


def newton_euler(model, q, v, a, f_ext=None, gravity=None) -> dict:
    """Every Newton-Euler variable of the state ``(q, v, a)``: ``{"a", "f", "tau", "fx", "qdd"}``.

    Arrays as :meth:`sparsedyn.sparse.Layout.unpack` returns them: ``"a"`` and ``"f"``
    (..., NB, 6) body spatial accelerations and transmitted wrenches in body frames,
    ``"tau"`` (..., nv), ``"fx"`` (..., NB, 6) and ``"qdd"`` (..., nv) (the sparse
    layer's name for the joint acceleration ``a``).  ``a[i]`` includes ``-g`` (the
    base-acceleration trick), ``f[i]`` is the wrench transmitted from the parent to body
    ``i``, ``fx`` = ``f_ext`` (body frames).
    """
    q, v, a, f_ext, g, shape, _ = _checks.dynamics(model, q, v, a, f_ext, gravity, "a",
                                                   "nv joint accelerations")
    _, acc, f, tau = rnea_passes(model, q, v, a, f_ext, g)
    NB = model.nbodies
    b = lambda x: np.broadcast_to(x, shape + x.shape[-1:])  # noqa: E731
    fx = np.zeros(shape + (NB, 6)) if f_ext is None else np.broadcast_to(f_ext, shape + (NB, 6))
    return {"a": np.stack([b(x) for x in acc], -2), "f": np.stack([b(x) for x in f], -2),
            "tau": np.concatenate([b(t) for t in tau], -1), "fx": np.array(fx),
            "qdd": np.array(np.broadcast_to(a, shape + (model.nv,)))}


def pack_d(parts: dict) -> np.ndarray:
    """The vector ``d`` (..., n) of :class:`~sparsedyn.sparse.Layout` from :func:`newton_euler`'s dict."""
    a, f = parts["a"], parts["f"]
    shape = a.shape[:-2]
    return np.concatenate([a.reshape(shape + (-1,)), f.reshape(shape + (-1,)), parts["tau"],
                           parts["fx"].reshape(shape + (-1,)), parts["qdd"]], -1)


def contact_forces_to_bodies(model, wrenches: dict, shape=()) -> np.ndarray:
    """``f_ext`` (..., NB, 6) in body frames from ``{frame name: wrench at the frame (..., 6)}``."""
    f_ext = np.zeros(shape + (model.nbodies, 6))
    for name, w in wrenches.items():
        fr = model.frames[model.frame(name)]
        f_ext[..., fr.body, :] += apply_force(inverse(fr.X), np.asarray(w, float))
    return f_ext
