"""Fingerprints of a structure's online phase: the key of its compiled kernel in the build cache.

A fingerprint identifies everything a traced kernel depends on beyond the model (the compiler keys
the model itself): the pattern, the values of the constant entries, the measurement matrices and
slots, the block pivot order and symbolic LU, the sources of the package, and every ``bias``
callable's code and captured values.  Arrays and the package's sources are keyed as every owner's
fingerprint is (:func:`sparsedyn.kernels.feed`, :func:`~sparsedyn.kernels.package_sources`); what
this module adds is the key of a ``bias`` callable (its code, closure and defaults).  A ``bias``
defined outside sparsedyn (its globals are unknown) cannot be identified: the fingerprint is then
``None`` and the kernel is traced on every compile (its library, keyed by the program, is still
reused).
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..kernels import Unkeyable, feed, package_sources

__all__ = ["structure_fingerprint", "hash_structure", "hash_array", "value_key", "finish", "Unkeyable"]


def hash_array(h, a):
    """Feed array ``a`` to ``h`` as the build cache's one scheme does (:func:`sparsedyn.kernels.feed`);
    an object array is :class:`Unkeyable`."""
    a = np.asarray(a)
    if a.dtype == object:
        raise Unkeyable("an object array")
    feed(h, a)


def _code_key(co, depth=0):
    parts = [co.co_code.hex(), repr(co.co_names), repr(co.co_varnames), repr(co.co_freevars)]
    for c in co.co_consts:
        parts.append(_code_key(c, depth + 1) if hasattr(c, "co_code") else value_key(c, depth + 1))
    return "code(" + ";".join(parts) + ")"


def value_key(v, depth=0):
    """A string that identifies ``v`` for a cache key, or :class:`Unkeyable`."""
    if depth > 8:
        raise Unkeyable
    if v is None or v is Ellipsis or isinstance(v, (bool, int, float, complex, str, bytes, np.integer, np.floating)):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, frozenset):
        return "frozenset(" + ",".join(sorted(value_key(x, depth + 1) for x in v)) + ")"
    if isinstance(v, np.ndarray):
        h = hashlib.sha256()
        hash_array(h, v)
        return "array:" + h.hexdigest()
    if isinstance(v, (tuple, list)):
        return type(v).__name__ + "(" + ",".join(value_key(x, depth + 1) for x in v) + ")"
    if isinstance(v, dict):
        return "dict(" + ",".join(value_key(k, depth + 1) + ":" + value_key(x, depth + 1)
                                  for k, x in sorted(v.items(), key=lambda kv: repr(kv[0]))) + ")"
    if isinstance(v, slice):
        return f"slice({v.start!r},{v.stop!r},{v.step!r})"
    if hasattr(v, "__func__") and hasattr(v, "__self__"):           # bound method
        return "method(" + value_key(v.__func__, depth + 1) + "," + value_key(v.__self__, depth + 1) + ")"
    mod = getattr(type(v), "__module__", "") or ""
    if hasattr(v, "__code__"):
        fmod = getattr(v, "__module__", "") or ""
        if not fmod.startswith("sparsedyn"):
            raise Unkeyable                                        # its globals are unknown
        cells = [c.cell_contents for c in (v.__closure__ or ())]
        return ("fn(" + fmod + "." + v.__qualname__ + "," + _code_key(v.__code__) + ","
                + value_key(cells, depth + 1) + "," + value_key(v.__defaults__, depth + 1) + ","
                + value_key(v.__kwdefaults__, depth + 1) + ")")
    if mod.startswith("sparsedyn") and hasattr(v, "__dict__"):
        # a library object (a Transform, a sensor, a frame ...): its class and attributes
        return ("obj(" + mod + "." + type(v).__qualname__ + ","
                + value_key({k: x for k, x in vars(v).items() if k != "model"}, depth + 1) + ")")
    if mod.startswith("sparsedyn") and hasattr(type(v), "__slots__"):
        return ("obj(" + mod + "." + type(v).__qualname__ + ","
                + value_key([getattr(v, k, None) for k in type(v).__slots__], depth + 1) + ")")
    raise Unkeyable


def hash_structure(h, st):
    """Feed everything the online phase of structure ``st`` computes with, beyond the model, to ``h``."""
    p, L = st.pattern, st.layout
    for a in (p.rows, p.cols, p.cls, p.const, p.source, p.masks):
        hash_array(h, a)
    h.update(repr((st.n, st.nnz, st.nslots, p.nrows)).encode())
    h.update(repr([(v.kind, v.body, v.offset, v.size) for v in L.variables]).encode())
    h.update(repr([(e.kind, e.body, e.offset, e.size) for e in p.equations]).encode())
    for blk in st.blocks:
        h.update(b"block")
        for a in (blk.rows, blk.cols, blk.piv, blk.entries, *blk.entry_pos, *blk.off):
            hash_array(h, a)
        h.update(repr(list(blk.proof)).encode())
        for k, lpos, ls, us, upd in blk.steps:
            h.update(repr(int(k)).encode())
            for a in (lpos, ls, us, upd):
                hash_array(h, a)
        for pos, sl in list(blk.lcol) + list(blk.ucol):
            hash_array(h, pos)
            hash_array(h, sl)
    for m, slot in zip(st.problem.measurements, st.problem.slots):
        h.update(repr((slot.start, slot.stop, m.size, m.known)).encode())
        for var, M in m.terms:
            h.update(repr((var.kind, var.body, var.offset, var.size)).encode())
            hash_array(h, M)
        h.update(value_key(m.bias).encode())


def finish(h):
    """The hex digest of ``h`` after the package's sources and version (the traced code of an owner's
    kernel, and a ``bias`` callable, may use any module); the model is keyed by the compiler."""
    from .._version import __version__
    h.update((package_sources() + __version__).encode())
    return h.hexdigest()


def structure_fingerprint(st):
    """SHA-256 of everything the traced online phase of ``st`` depends on beyond the model, or
    ``None`` when a ``bias`` callable cannot be identified (see the module docstring)."""
    h = hashlib.sha256(b"structure\0")
    try:
        hash_structure(h, st)
    except Unkeyable:
        return None
    return finish(h)
