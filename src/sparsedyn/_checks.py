"""Argument checking shared by the public numerical functions."""

from __future__ import annotations

import numpy as np

from . import backend as bk

QUAT_TOL = 1e-5


def vector(model, name, x, size, what):
    """``x`` as an array (..., size); the error names the argument and the size expected."""
    if x is None:
        raise TypeError(f"{name}: expected an array of shape (..., {size}) ({what}), got None")
    try:
        x = bk.asarray(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: expected a numeric array of shape (..., {size}) ({what}); {e}") from None
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{name}: expected shape (..., {size}) ({what} of model {model.name!r}), "
                         f"got shape {x.shape}")
    if not bk.is_symbolic(x) and not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return x


def configuration(model, q, name="q"):
    """Checked configuration; quaternion blocks must be unit quaternions (float input)."""
    q = vector(model, name, q, model.nq, "nq joint coordinates")
    if not bk.is_symbolic(q):
        for i, j in enumerate(model.joints):
            if j.type in ("spherical", "free"):
                s = model.q_slice(i)
                quat = q[..., s][..., -4:]
                err = np.abs(np.sum(quat * quat, -1) - 1.0)
                if np.any(err > QUAT_TOL):
                    raise ValueError(f"{name}: the quaternion of joint {model.joint_names[i]!r} "
                                     f"(q[{s.stop - 4}:{s.stop}], [x, y, z, w]) is not of unit norm "
                                     f"(| |q|^2 - 1 | up to {err.max():.3g}); normalise it")
    return q


def velocity(model, v, name="v"):
    return vector(model, name, v, model.nv, "nv joint velocities")


def body_forces(model, f, name="f_ext"):
    """External forces per body (..., NB, 6)."""
    try:
        f = bk.asarray(f)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: expected a numeric array of shape (..., {model.nbodies}, 6); {e}") from None
    if f.ndim < 2 or f.shape[-2:] != (model.nbodies, 6):
        raise ValueError(f"{name}: expected shape (..., {model.nbodies}, 6) (one spatial force [n; f] per body "
                         f"of model {model.name!r}, body frame), got shape {f.shape}")
    if not bk.is_symbolic(f) and not np.all(np.isfinite(f)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return f


def batch_shape(**arrays):
    """Common leading batch shape of the named arrays (all but their trailing core axes)."""
    shapes = {}
    for name, (x, core) in arrays.items():
        if x is not None:
            shapes[name] = x.shape[:x.ndim - core]
    try:
        return np.broadcast_shapes(*shapes.values()) if shapes else ()
    except ValueError:
        desc = ", ".join(f"{n}: {s}" for n, s in shapes.items())
        raise ValueError(f"batch shapes do not broadcast ({desc})") from None


def gravity(model, g):
    if g is None:
        return model.gravity
    g = bk.asarray(g)
    if g.shape[-1:] != (3,):
        raise ValueError(f"gravity: expected shape (..., 3), got {g.shape}")
    return g


def dynamics(model, q, v, u, f_ext, g, u_name, u_what):
    """Checked arguments of a dynamics function ``f(model, q, v, u, f_ext, gravity)``.

    Returns ``(q, v, u, f_ext, g, batch shape, symbolic)``; ``symbolic`` is true
    when any input is an object array (then no value-dependent checks may run).
    """
    q = configuration(model, q)
    v = velocity(model, v, "v")
    u = vector(model, u_name, u, model.nv, u_what)
    if f_ext is not None:
        f_ext = body_forces(model, f_ext)
    g = gravity(model, g)
    shape = batch_shape(q=(q, 1), v=(v, 1), **{u_name: (u, 1)}, f_ext=(f_ext, 2))
    symbolic = any(bk.is_symbolic(x) for x in (q, v, u, f_ext, g) if x is not None)
    return q, v, u, f_ext, g, shape, symbolic
