"""Fingerprints: the one scheme of the build cache's keys.

A model's fingerprint (the compiler's key) and an owner's (:class:`~sparsedyn.kernels.Owned`) are
SHA-256 hashes of a canonical, process-independent encoding of values (:func:`feed`) and of the
package's sources (:func:`package_sources`).
"""

from __future__ import annotations

import hashlib

__all__ = ["Unkeyable", "feed", "fingerprint", "package_sources"]

class Unkeyable(Exception):
    """A value that no fingerprint can identify (a function, an object of an unknown kind)."""


def feed(h, x, strict=False):
    """Feed a canonical, process-independent encoding of ``x`` to the hash ``h`` (``hashlib``): arrays
    (dtype, shape, bytes; object arrays element by element), floats (hex), ints, strings, ``None``,
    tuples and lists, dicts (by sorted key), dataclasses and plain objects (type name and fields).
    A model's fingerprint (the compiler's key) and an owner's (:class:`Owned`) are made with it.
    ``strict``: a function or any other callable, or a value of another kind, raises
    :class:`Unkeyable` (an owner's fingerprint must identify everything); otherwise its ``repr``."""
    import numpy as np
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            for e in x.reshape(-1):
                feed(h, e, strict)
            return
        h.update(repr((x.dtype.str, x.shape)).encode())
        h.update(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, float):
        h.update(float(x).hex().encode())
    elif isinstance(x, (str, int, bool, type(None), np.integer)):
        h.update(repr(x).encode() + b"|")
    elif isinstance(x, (tuple, list)):
        h.update(b"(%d" % len(x))
        for e in x:
            feed(h, e, strict)
        h.update(b")")
    elif isinstance(x, dict):
        feed(h, sorted(x.items(), key=lambda kv: repr(kv[0])), strict)
    elif strict and (callable(x) or isinstance(x, type)):
        raise Unkeyable(f"{type(x).__name__} {getattr(x, '__qualname__', '')}".strip())
    elif hasattr(x, "__dataclass_fields__"):
        h.update(type(x).__name__.encode())
        for f in x.__dataclass_fields__:
            feed(h, getattr(x, f), strict)
    elif hasattr(x, "__dict__") or hasattr(x, "__slots__"):
        h.update(type(x).__name__.encode())
        names = sorted(vars(x)) if hasattr(x, "__dict__") else list(x.__slots__)
        for f in names:
            feed(h, getattr(x, f, None), strict)
    elif strict:
        raise Unkeyable(type(x).__name__)
    else:
        h.update(repr(x).encode())


_sources = None


def package_sources() -> str:
    """SHA-256 of every Python source of the package and of the C headers it emits code with, for
    an owner's fingerprint (its kernels may run any of them); computed once per process."""
    global _sources
    if _sources is None:
        from pathlib import Path
        root = Path(__file__).resolve().parents[1]      # the package
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")) + sorted(root.rglob("*.h")):
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
        _sources = h.hexdigest()
    return _sources


def fingerprint(*values) -> str:
    """SHA-256 of ``values`` by :func:`feed` (strict): for :class:`Owned`'s ``fingerprint``; raises
    :class:`Unkeyable` when a value cannot be identified (then an owner hands ``None``)."""
    h = hashlib.sha256()
    feed(h, values, strict=True)
    return h.hexdigest()
