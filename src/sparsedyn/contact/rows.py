"""The rows of a rigid contact set: the set itself (a static argument of the contact kernels), the
contact Jacobian in the contacts' frames and the drift ``Jdot v``, for 6D, point (3D) and
one-direction (1D) contacts (see :mod:`sparsedyn.contact.dynamics` for the equations).
"""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from ..algorithms.kinematics import body_accelerations
from ..model import UnknownNameError
from ..model.sensors import Contact
from ..model.spatial import apply_motion, compose, cross3

__all__ = ["contacts_of", "contact_size", "contact_jacobian", "contact_drift", "normal_in_frame"]


# --- the contact set (static: its structure selects the program) ----------------------------

def contacts_of(model, contacts, who="contacts"):
    """``contacts`` as a tuple of :class:`~sparsedyn.model.sensors.Contact` (frame names become 6D
    contacts), checked against ``model``: known frames, no contact twice, no one-sided contact."""
    if isinstance(contacts, (Contact, str)):
        contacts = (contacts,)
    try:
        contacts = tuple(contacts)
    except TypeError:
        raise TypeError(f"{who}: expected a sequence of Contact objects or frame names, got {contacts!r}") from None
    out, seen = [], {}
    for c in contacts:
        if isinstance(c, str):
            c = Contact(c)
        if not isinstance(c, Contact):
            raise TypeError(f"{who}: expected Contact objects or frame names, got {c!r}")
        if c.one_sided:
            raise NotImplementedError(f"{who}: {c!r} is a one-sided contact (friction, point or plane); "
                                      "contact dynamics handles bilateral (rigid) contacts only")
        try:
            k = model.frame(c.frame)
        except (KeyError, IndexError) as e:
            raise UnknownNameError(f"{who}: contact {c.name!r}: {e}") from None
        if k in seen:
            raise ValueError(f"{who}: frame {model.frames[k].name!r} has two contacts ({seen[k]!r} and {c!r}); "
                             "give each frame one contact")
        seen[k] = c
        out.append(c)
    return tuple(out)


def contact_size(contacts) -> int:
    """Number of contact unknowns ``m`` (6 per 6D contact, 3 per point contact)."""
    return sum(c.size for c in contacts)


def _m(model, contacts, **_):
    """``m`` for a kernel's shapes (cheap: called on every compiled call; the contacts are checked
    by the kernels themselves)."""
    if isinstance(contacts, (Contact, str)):
        contacts = (contacts,)
    return contact_size(c if isinstance(c, Contact) else Contact(c) for c in contacts)


def contact_jacobian(model, Xup, S, contacts):
    """Contact Jacobian (..., m, nv) in the contacts' frames (no checks; kernel use).

    For each contact the transform ``T = frame_X_j`` walks from the contact's body to the root;
    joint ``j``'s columns are ``T S_j`` (6D) or their linear rows (3D), or those projected on the
    world normal (1D: ``n_f^T`` times the linear rows, ``n_f`` the normal in frame axes, from
    ``T = frame_X_world`` at the end of the walk): only ancestors get entries.
    """
    rows = []
    for c in contacts:
        fr = model.frames[model.frame(c.frame)]
        cols, T, j = {}, fr.X, fr.body
        while j >= 0:
            cols[j] = apply_motion(_columns(T), np.swapaxes(S[j], -1, -2))     # (..., nv_j, 6)
            T = compose(T, Xup[j])
            j = model.parent[j]
        shape = np.broadcast_shapes(*(x.shape[:-2] for x in cols.values())) if cols else ()
        dtype = np.result_type(*(x.dtype for x in cols.values())) if cols else float
        Jc = np.zeros(shape + (6, model.nv), dtype=dtype)
        for j, x in cols.items():
            Jc[..., :, model.v_slice(j)] = np.swapaxes(x, -1, -2)
        if c.kind == "1d":
            rows.append(_rotated(T, c)[..., None, :] @ Jc[..., 3:, :] if cols else Jc[..., :1, :])
        else:
            rows.append(Jc if c.kind == "6d" else Jc[..., 3:, :])
    return np.concatenate(rows, -2)


def _unit(c):
    """The unit world normal (3,) of a one-direction contact."""
    n = np.asarray(c.normal, float)
    return n / np.linalg.norm(n)


def _rotated(T, c):
    """``c``'s unit world normal in the axes of ``T = frame_X_world`` (..., 3)."""
    return (T.E @ _unit(c)[:, None])[..., 0]


def normal_in_frame(model, Xup, c):
    """The unit world normal of the one-direction contact ``c`` in its frame's axes (..., 3)
    (``frame_X_world`` composed from ``Xup``; no checks, kernel use)."""
    fr = model.frames[model.frame(c.frame)]
    T, j = fr.X, fr.body
    while j >= 0:
        T = compose(T, Xup[j])
        j = model.parent[j]
    return _rotated(T, c)


def _columns(T):
    """A transform applied to a stack of columns (..., k, 6)."""
    return type(T)(T.E[..., None, :, :], T.r[..., None, :])


def contact_drift(model, Xup, S, v, contacts, q=None):
    """``Jdot v`` (..., m): the contacts' accelerations at ``a = 0`` without gravity (spatial for 6D,
    classical for a point: ``a_lin + omega x v_p``), frame axes; for 1D the classical one along the
    world normal (``n`` is fixed in the world, so ``d/dt (n . v_p) = n . a_p``).  ``q``: the
    configuration, needed where a joint's ``S`` depends on it (its ``cJ = Sdot qd`` is part of the
    drift) (no checks; kernel use)."""
    vb, ab = body_accelerations(model, Xup, S, v, bk.zeros(v.shape, like=v), q=q)
    out = []
    for c in contacts:
        fr = model.frames[model.frame(c.frame)]
        vf, af = apply_motion(fr.X, vb[fr.body]), apply_motion(fr.X, ab[fr.body])
        if c.kind == "6d":
            out.append(af)
            continue
        ap = af[..., 3:] + cross3(vf[..., :3], vf[..., 3:])       # classical, frame axes
        out.append(ap if c.kind == "3d" else (normal_in_frame(model, Xup, c)[..., None, :] @ ap[..., :, None])[..., 0])
    shape = np.broadcast_shapes(*(x.shape[:-1] for x in out))
    return np.concatenate([np.broadcast_to(x, shape + x.shape[-1:]) for x in out], -1)
