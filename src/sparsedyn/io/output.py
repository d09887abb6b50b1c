"""Writing results without losing anything: an output path is the user's only copy of their results.

:func:`atomic_output` checks a destination before anything is computed or written and hands out a
private temporary directory next to it (same filesystem, so the final rename is atomic):

* an existing file or directory is refused unless ``force`` (and even then a directory that is no
  Zarr store, or anything that is neither a file nor a directory, is never replaced);
* a destination that is one of the ``sources`` being read (or inside one, or holding one) is refused
  always;
* the parent must be an existing, writable directory;
* the temporary directory is created inside the block that removes it, so any failure (an error, a
  full disk, a size limit, Ctrl-C, SIGTERM) leaves nothing behind and an old destination untouched;
* an ``OSError`` while writing becomes the caller's error naming the destination, never the hidden
  temporary name.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

__all__ = ["OutputError", "atomic_output", "check_destination"]

#: The names of a directory that make it a Zarr store (v3, then v2).
_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


class OutputError(ValueError):
    """An output destination that cannot or must not be written."""


def _kind(st) -> str:
    mode = st.st_mode
    return ("a directory" if stat.S_ISDIR(mode) else "a file" if stat.S_ISREG(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a special file")


def _same_or_inside(a: Path, b: Path) -> bool:
    """Whether ``a`` is ``b`` or lies inside it (paths resolved, links followed)."""
    return a == b or b in a.parents


def check_destination(out, *, force=False, sources=(), suffixes=(".npz", ".zarr"), error=OutputError) -> Path:
    """``out`` as a :class:`~pathlib.Path` once it is known to be writable without loss (module
    docstring); raises ``error`` naming ``out`` otherwise.  ``sources``: paths being read."""
    try:
        path = Path(os.fspath(out))
        label = str(path)
        if "\0" in label:
            raise error(f"output {label!r}: a path cannot hold a NUL character")
    except TypeError:
        raise error(f"output: expected a path (str or os.PathLike), got {type(out).__name__}") from None
    if suffixes and path.suffix not in suffixes:
        raise error(f"output {label!r}: expected a name ending in {' or '.join(suffixes)}")
    resolved = path.resolve()
    for src in sources:
        s = Path(os.fspath(src)).resolve()
        if _same_or_inside(resolved, s) or _same_or_inside(s, resolved):
            raise error(f"output {label!r}: is the input {str(src)!r} (or inside it, or holds it); "
                        f"choose another output name")
    parent = path.parent
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise error(f"output {label!r}: the directory {str(parent)!r} does not exist") from None
    except OSError as e:
        raise error(f"output {label!r}: cannot use the directory {str(parent)!r} ({e.strerror or e})") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise error(f"output {label!r}: {str(parent)!r} is not a directory")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise error(f"output {label!r}: cannot use it ({e.strerror or e})") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise error(f"output {label!r}: exists and is a symbolic link; refusing to replace it "
                        f"(remove it or choose another name)")
        if not force:
            raise error(f"output {label!r}: already exists ({_kind(st)}); refusing to replace it "
                        f"(pass --force / force=True to replace it, or choose another name)")
        if stat.S_ISDIR(st.st_mode) and not any((path / m).exists() for m in _ZARR_MARKERS):
            raise error(f"output {label!r}: exists and is a directory that is no Zarr store; refusing to "
                        f"replace it even with force")
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise error(f"output {label!r}: exists and is {_kind(st)}; refusing to replace it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise error(f"output {label!r}: the directory {str(parent)!r} is not writable")
    return path


class _Terminated(SystemExit):
    """SIGTERM while an output is being written: unwinds like Ctrl-C (exit status 128 + 15)."""


@contextmanager
def _term_unwinds():
    """Inside this block, SIGTERM raises (so ``finally`` clauses run) instead of killing the process at
    once; only in the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated(128 + signum)

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):               # pragma: no cover - no signals here (embedded interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def atomic_output(out, *, force=False, sources=(), error=OutputError):
    """Write an output under a temporary name, moved to ``out`` when the block ends without error.

    Yields ``(tmp, path)``: ``tmp`` a fresh private directory next to ``out`` and ``path`` the name
    inside it to write (a file, or a directory for a Zarr store).  On leaving the block normally,
    ``path`` replaces ``out`` (an old ``out`` is moved into ``tmp`` first, then removed with it); on
    any exception (Ctrl-C, SIGTERM included) ``tmp`` is removed and ``out`` is as it was.  An
    ``OSError`` (full disk, size limit, permissions) is re-raised as ``error`` naming ``out``.
    """
    dest = check_destination(out, force=force, sources=sources, error=error)
    label = str(dest)
    tmp = None
    with _term_unwinds():
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
            yield tmp, tmp / dest.name
            old = tmp / (dest.name + ".old")
            if os.path.lexists(dest):                # force: check_destination allowed it
                os.replace(dest, old)
            try:
                os.replace(tmp / dest.name, dest)
            except BaseException:
                if os.path.lexists(old):             # put the old output back before tmp goes
                    os.replace(old, dest)
                raise
        except OSError as e:
            raise error(f"output {label!r}: cannot write it ({e.strerror or e}); nothing was written") from None
        finally:
            if tmp is not None:
                _remove_tree(tmp)


def _remove_tree(tmp: Path):
    """Remove ``tmp`` and everything in it.  A writer's threads (Zarr writes chunks concurrently) may
    still be finishing a write that failed when the error reached here, and add a file while the tree is
    being removed, or create its folder again: remove it until it stays gone for a while (0.1 s; a few
    seconds at most in all)."""
    absent = 0
    for _ in range(100):
        if os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
            absent = 0
        else:
            absent += 1
            if absent >= 5:
                return
        time.sleep(0.02)
