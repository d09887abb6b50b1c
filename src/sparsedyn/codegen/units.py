"""Translation units to object files, in parallel, for :func:`~.build.build_library`: a list largest
unit first, an iterator of units as they come (each compiles while the next is written)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = []

#: Compiler processes running at once in this process: one per CPU, shared by all libraries that
#: build concurrently (several kernels of one model build in parallel threads).
_compile_slots = threading.BoundedSemaphore(os.cpu_count() or 1)


class Replay:
    """An iterable over the iterator ``it`` that keeps the items it gave: a second pass (a build
    made again) gets them all again, then the rest."""

    def __init__(self, it):
        self.it, self.seen = iter(it), []

    def __iter__(self):
        yield from list(self.seen)
        for item in self.it:
            self.seen.append(item)
            yield item


def compile_units(compiler, sources, tmp, progress=None):
    """Write the translation units ``sources`` to ``tmp`` and compile them with ``compiler``, in
    parallel (one compiler process per CPU, shared by the builds of this process); returns their
    names, in the order of ``sources``.

    A list is compiled largest unit first, so that no core is left alone with a big one at the
    end.  Any other iterable (:func:`~.cemit.emit_units`) is compiled unit by unit as it comes: the
    compilers work on the first units, on the machine's other cores, while Python writes the next.
    A unit that fails to compile stops the writing (:class:`~.build.BuildError`).
    """
    if isinstance(sources, (list, tuple)):
        items = [(k, sources[k]) for k in sorted(range(len(sources)), key=lambda k: -len(sources[k]))]
    else:
        items = enumerate(sources)
    done, total = [0], [None]

    def cc(name):
        with _compile_slots:
            compiler.run(list(compiler.flags) + ["-c", f"{name}.c", "-o", f"{name}.o"], cwd=tmp)
        done[0] += 1
        if progress:
            progress(f"compiled {done[0]}/{total[0] or '...'} translation units")

    jobs = {}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        try:
            for k, src in items:
                (tmp / f"u{k}.c").write_text(src)
                jobs[k] = pool.submit(cc, f"u{k}")
                failed = next((j for j in jobs.values() if j.done() and j.exception() is not None), None)
                if failed is not None:
                    failed.result()             # a compiler error: stop writing units
            total[0] = len(jobs)
        except BaseException:
            for j in jobs.values():
                j.cancel()
            raise
        for j in jobs.values():
            j.result()
    return [f"u{k}" for k in sorted(jobs)]
