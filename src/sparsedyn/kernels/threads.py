"""The threads a batch runs on beside its caller's, one pool for the process: the compiled kernels' batches
where their library has no OpenMP (ctypes releases the GIL while C runs), and a batch's contact rows
(the native calls that release it too)."""

from __future__ import annotations

import os
import threading

__all__ = ["batch_pool"]

_lock = threading.Lock()
_pool = None


def batch_pool(workers):
    """The process's :class:`~concurrent.futures.ThreadPoolExecutor` of at least ``workers`` threads (and
    at least as many as the CPUs), made at the first call; a call that asks for more makes a larger one
    (the old one's running calls finish there)."""
    global _pool
    with _lock:
        if _pool is None or _pool._max_workers < workers:
            from concurrent.futures import ThreadPoolExecutor
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=max(workers, os.cpu_count() or 1),
                                       thread_name_prefix="sparsedyn-batch")
        return _pool
