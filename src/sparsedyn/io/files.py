"""Reading input files safely: URDFs and the small TOML / JSON side files (loop closures, sensors)
that sit next to them.

Every file is untrusted input.  :func:`read_bytes` reads only regular files (a FIFO, a device
such as ``/dev/zero`` or a directory is refused before anything is read, so nothing blocks or
grows without bound) of at most :func:`max_file_bytes` bytes: 16 MiB by default, far above any
real robot description; pass ``max_bytes=`` to the loading function or set the environment
variable ``SPARSEDYN_MAX_FILE_BYTES`` to change it.  Values echoed in error messages are clipped
(:func:`clip`), so a hostile file cannot make a message of megabytes.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

import defusedxml

__all__ = ["DEFAULT_MAX_FILE_BYTES", "max_file_bytes", "checked_path", "read_bytes",
           "read_table", "clip", "clip_list", "shorten",
           "xml_errors"]

#: Default size limit of an input file (bytes); see :func:`max_file_bytes`.
DEFAULT_MAX_FILE_BYTES = 16 * 2 ** 20


def max_file_bytes(max_bytes=None) -> int:
    """The size limit in force: ``max_bytes`` if given, else ``$SPARSEDYN_MAX_FILE_BYTES``, else
    :data:`DEFAULT_MAX_FILE_BYTES`."""
    where = "max_bytes"
    if max_bytes is None:
        env = os.environ.get("SPARSEDYN_MAX_FILE_BYTES")
        if not env:
            return DEFAULT_MAX_FILE_BYTES
        where, max_bytes = "SPARSEDYN_MAX_FILE_BYTES", env.strip()
    try:
        n = int(max_bytes)
    except (TypeError, ValueError):
        n = -1
    if isinstance(max_bytes, bool) or n <= 0:
        raise ValueError(f"{where}: expected a positive number of bytes, got {clip(max_bytes)}")
    return n


def clip(value, n=80) -> str:
    """``repr(value)`` clipped to about ``n`` characters (with the full length) for error messages."""
    r = repr(value) if not isinstance(value, str) or len(value) <= 4 * n else repr(value[:4 * n])
    if len(r) <= n:
        return r
    size = len(value) if isinstance(value, (str, bytes, list, tuple, dict)) else None
    return f"{r[:n - 15]}...{r[-8:]}" + (f" ({size} {'characters' if isinstance(value, str) else 'items'})"
                                          if size is not None else "")


def shorten(message, n=2000) -> str:
    """``message`` with every quoted value of more than 400 characters clipped, and the whole
    clipped to about ``n`` characters."""
    message = _LONG_QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)[:60]}...{m.group(1)} "
                                         f"({len(m.group(2))} characters)", message)
    if len(message) > n:
        message = f"{message[:n - 200]} ... [{len(message)} characters in all]"
    return message


_LONG_QUOTED = re.compile(r"""(['"])([^'"]{400,})\1""")


def clip_list(names, n=8) -> str:
    """``'a', 'b', ... and 12 more``: at most ``n`` clipped names of a list."""
    names = list(names)
    shown = ", ".join(clip(x, 60) for x in names[:n])
    return shown + (f" ... and {len(names) - n} more" if len(names) > n else "")


def checked_path(path, error=ValueError, what="file") -> str:
    """``path`` (a str, bytes or os.PathLike) as a str; ``error`` for anything else and for a path
    holding a NUL character (which no file name can)."""
    try:
        label = os.fspath(path)
    except TypeError:
        raise error(f"{what}: expected a path (str or os.PathLike), got {clip(path)} "
                    f"({type(path).__name__})") from None
    if isinstance(label, bytes):
        label = os.fsdecode(label)
    if "\0" in label:
        raise error(f"{clip(label)}: the path of the {what} holds a NUL character; no file name can")
    return label


def read_bytes(path, error=ValueError, what="file", max_bytes=None) -> bytes:
    """The bytes of the regular file ``path``, at most :func:`max_file_bytes` of them.

    Raises ``error`` naming the file for a missing, unreadable or non-regular file (a FIFO is
    opened without blocking and refused) and for one over the size limit.
    """
    label = checked_path(path, error, what)
    limit = max_file_bytes(max_bytes)
    try:
        fd = os.open(label, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{label}: cannot read the {what}: file not found") from None
    except OSError as e:
        raise error(f"{label}: cannot read the {what} ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise error(f"{label}: is {kind}; expected a regular {what}")
        if st.st_size > limit:
            raise error(f"{label}: the {what} has {st.st_size} bytes, more than the limit of {limit} "
                        f"(pass max_bytes= or set SPARSEDYN_MAX_FILE_BYTES to read larger files)")
        chunks, size = [], 0
        while size <= limit:                     # the file may grow while it is read
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise error(f"{label}: the {what} has more than the limit of {limit} bytes "
                        f"(pass max_bytes= or set SPARSEDYN_MAX_FILE_BYTES to read larger files)")
        return b"".join(chunks)
    except OSError as e:
        raise error(f"{label}: cannot read the {what} ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_table(path, error=ValueError, what="file", max_bytes=None) -> dict:
    """The top-level table of a ``.toml`` or ``.json`` file.

    TOML is read with :mod:`tomllib` (Python >= 3.11) or ``tomli`` (Python 3.10); the file must
    be UTF-8.  Every problem (unreadable, too large, not UTF-8, malformed, nested too deeply,
    an integer too long to convert) raises ``error`` with a message naming the file.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise error(f"{path}: a {what} must end in .toml or .json")
    data = read_bytes(path, error, what, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: the {what} is not UTF-8 text (byte {e.start}: {clip(data[e.start:e.start + 4])})") \
            from None
    if suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:                                   # pragma: no cover - Python 3.10
            import tomli as tomllib             # a dependency on 3.10 (pyproject.toml)
        parse, kind = tomllib.loads, "TOML"
    else:
        parse, kind = json.loads, "JSON"
    try:
        doc = parse(text)
    except RecursionError:
        raise error(f"{path}: invalid {kind}: nested too deeply") from None
    except ValueError as e:                     # TOMLDecodeError and JSONDecodeError are ValueErrors;
        raise error(f"{path}: invalid {kind}: {shorten(str(e), 300)}") from None   # so is a 5,000-digit integer
    if not isinstance(doc, dict):
        raise error(f"{path}: expected a table/object at the top level, got {type(doc).__name__}")
    return doc


@contextmanager
def xml_errors(label: str, error, dialect: str):
    """Parse XML inside this block: the parser's exceptions become ``error`` (a library exception
    class) naming ``label`` (the file) and, for malformed XML, the line and column; ``dialect``
    (``"URDF"``, ``"SRDF"``) names the format in the messages.  Entities and external references
    (refused by defusedxml) are reported as forbidden constructs."""
    try:
        yield
    except (LookupError, UnicodeError) as e:      # an unknown or wrong encoding in the XML declaration
        raise error(f"{label}: cannot decode the XML: {e}; {dialect} files are UTF-8 (or a declared "
                    f"encoding that Python knows)") from None
    except RecursionError:
        raise error(f"{label}: malformed XML: elements nested too deeply") from None
    except ET.ParseError as e:
        line, col = e.position
        reason = re.sub(r": line \d+, column \d+$", "", str(e))
        raise error(f"{label}: malformed XML at line {line}, column {col + 1}: {reason}") from None
    except defusedxml.DefusedXmlException as e:
        raise error(f"{label}: forbidden XML construct ({type(e).__name__}: {e}); "
                    f"{dialect} needs no DTD entities or external references") from None
