"""Python's cyclic garbage collector paused while large programs are traced or emitted."""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

__all__ = ["paused_gc"]

_gc_lock = threading.Lock()
_gc_pauses = [0, False]         # active pauses, whether the collector was enabled before the first


@contextmanager
def paused_gc():
    """Python's cyclic garbage collector off inside the block (nesting and threads share one
    pause).  Tracing and emitting make millions of small acyclic objects (nodes, tuples), which
    trigger full collections that find nothing: a third of the time of a large trace."""
    with _gc_lock:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()
