"""Reading a recording safely: the arrays of a ``.npz`` file or a Zarr store, a block of rows at a time.

A recording is someone else's file.  :class:`Recording` therefore

* reads only a regular ``.npz`` file or a directory (a FIFO, a device, or a link to one is refused
  before it is opened, so nothing blocks or grows without bound);
* checks every ``.npy`` member's header against the member's size in the archive (and the archive's
  against the file's length) before anything is allocated: a header claiming 10⁹ rows that the file
  does not hold is an error, not a ``MemoryError``;
* checks CRC-32s: a compressed member's as it is decompressed, a stored (memory-mapped) member's over
  its bytes on first use, so flipped bytes are an error naming the array;
* refuses a Zarr array with missing chunk files (Zarr would read them as its fill value);
* accepts real floating-point arrays and integer arrays (converted exactly: a value beyond 2⁵³ is
  refused); complex, boolean, date/time, string and object arrays are refused, naming the array;
* turns every reader's failure (a corrupt archive, a bad decompression, a truncated file) into a
  :class:`RecordingError` naming the recording and the array.

Writing: :func:`write_recording` (arrays at once) and :class:`RecordingWriter` (rows written by ranges,
in any order), both under a temporary name renamed when complete (:mod:`sparsedyn.io.output`).
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .output import atomic_output

__all__ = ["RecordingError", "Recording", "open_recording", "write_recording", "RecordingWriter", "DEFAULT_CHUNK"]

#: Rows per chunk when the recording does not say (a Zarr store's chunks do).
DEFAULT_CHUNK = 20_000

#: Largest integer that converts to float64 exactly (and every one below it).
_EXACT_INT = 2 ** 53


class RecordingError(ValueError):
    """A recording that cannot be read or does not match the estimation problem."""


def _npy_header(f):
    """``(shape, fortran_order, dtype)`` of the ``.npy`` data at the file position."""
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    return read(f)


def _kind(mode) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


class _Member:
    """A ``.npy`` member of a ``.npz``: its header, where its data starts, and (stored) its memory map."""

    def __init__(self, shape, fortran, dtype, info, header, data_offset):
        self.shape, self.fortran, self.dtype, self.info = tuple(shape), fortran, dtype, info
        self.header = header                  # bytes of the .npy header
        self.data_offset = data_offset        # in the archive file (stored members), else None
        self.array, self.crc_checked = None, False


class Recording:
    """The arrays of a recording, read lazily: ``names``, ``shape(name)``, ``dtype(name)``,
    ``rows(name, start, stop)`` (float64).  Pickles as its path (a Dask worker opens it again)."""

    def __init__(self, path):
        try:
            label = os.fspath(path)
        except TypeError:
            raise RecordingError(f"recording: expected a path (str or os.PathLike), got {type(path).__name__}") \
                from None
        if isinstance(label, bytes) or "\0" in label:
            raise RecordingError(f"recording {label!r}: expected a str path without NUL characters")
        self.path = Path(label)
        self.label = f"recording {label!r}"
        self._arrays, self._complete = {}, set()    # arrays; Zarr arrays whose chunks were counted
        try:
            st = os.stat(self.path)             # follows links: a link to /dev/zero is a device
        except FileNotFoundError:
            raise RecordingError(f"{self.label}: no such file or directory") from None
        except OSError as e:
            raise RecordingError(f"{self.label}: cannot read it ({e.strerror or e})") from None
        if stat.S_ISDIR(st.st_mode):
            self.format = "zarr"
            self._open_zarr()
        elif not stat.S_ISREG(st.st_mode):
            raise RecordingError(f"{self.label}: is {_kind(st.st_mode)}; expected a regular .npz file or a Zarr "
                                 f"store (a directory)")
        elif self.path.suffix == ".npz":
            self.format = "npz"
            self._open_npz()
        else:
            raise RecordingError(f"{self.label}: expected a .npz file or a Zarr store (a directory)")

    def __reduce__(self):
        return Recording, (str(self.path),)

    # --- opening ---

    def _open_zarr(self):
        try:
            import zarr
        except ImportError:
            raise ImportError("reading a Zarr recording needs zarr: pip install zarr") from None
        try:
            g = zarr.open_group(str(self.path), mode="r")
            self._arrays = {n: g[n] for n in g.array_keys()}
        except Exception as e:          # zarr raises several kinds for a directory that is no store
            raise RecordingError(f"{self.label}: not a Zarr group ({type(e).__name__}: {e})") from None

    def _open_npz(self):
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):      # replaced between stat and open
                raise RecordingError(f"{self.label}: is {_kind(st.st_mode)}; expected a regular .npz file")
            try:
                with zipfile.ZipFile(f) as zf:
                    for info in zf.infolist():
                        if info.filename.endswith(".npy"):
                            self._arrays[info.filename[:-4]] = self._member(f, zf, info, st.st_size)
            except RecordingError:
                raise
            except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError) as e:
                raise RecordingError(f"{self.label}: not a readable .npz file ({type(e).__name__}: {e})") from None

    def _member(self, f, zf, info, file_size):
        name = info.filename[:-4]
        where = f"{self.label}: array {name!r}"
        try:
            with zf.open(info) as m:
                shape, fortran, dtype = _npy_header(m)
                header = m.tell()
        except (ValueError, EOFError, zipfile.BadZipFile, zlib.error, OSError) as e:
            raise RecordingError(f"{where}: not a readable .npy member ({type(e).__name__}: {e})") from None
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize if not dtype.hasobject else None
        if nbytes is not None and header + nbytes != info.file_size:
            raise RecordingError(f"{where}: its header declares shape {tuple(shape)} of {dtype} ({nbytes} bytes) but "
                                 f"the archive holds {info.file_size - header} bytes of data")
        data_offset = None
        if info.compress_type == zipfile.ZIP_STORED:
            f.seek(info.header_offset)
            head = f.read(30)
            if head[:4] != b"PK\x03\x04":
                raise RecordingError(f"{where}: the archive's local header is damaged")
            data_offset = (info.header_offset + 30 + int.from_bytes(head[26:28], "little")
                           + int.from_bytes(head[28:30], "little") + header)
            if nbytes is not None and data_offset + nbytes > file_size:
                raise RecordingError(f"{where}: declares {nbytes} bytes of data past the end of the file "
                                     f"({file_size} bytes): a truncated file")
        return _Member(shape, fortran, dtype, info, header, data_offset)

    # --- the arrays ---

    @property
    def names(self):
        """The names of the recording's arrays."""
        return list(self._arrays)

    def _where(self, name):
        return f"{self.label}: array {name!r}"

    def shape(self, name) -> tuple:
        """The shape of array ``name`` (rows first)."""
        a = self._arrays[name]
        return a.shape if isinstance(a, _Member) else tuple(a.shape)

    def dtype(self, name):
        """The dtype of array ``name`` as stored."""
        return np.dtype(self._arrays[name].dtype)

    def check_dtype(self, name):
        """Raise unless array ``name`` holds real floating-point numbers or integers."""
        dt = self.dtype(name)
        if dt.kind not in "fiu":
            raise RecordingError(f"{self._where(name)} has dtype {dt}; expected real floating-point numbers (or "
                                 f"integers)")

    def _check_crc(self, m: _Member):
        """The CRC-32 of a stored member, over its bytes in the file (once)."""
        crc, left = 0, m.info.compress_size
        with open(self.path, "rb") as f:
            f.seek(m.data_offset - m.header)         # the CRC covers the .npy header too
            while left > 0:
                block = f.read(min(left, 1 << 22))
                if not block:
                    break
                crc = zlib.crc32(block, crc)
                left -= len(block)
        if left or crc != m.info.CRC:
            raise RecordingError(f"{self._where(m.info.filename[:-4])}: its bytes do not match the archive's "
                                 f"CRC-32: a damaged file")
        m.crc_checked = True

    def _array(self, name):
        a = self._arrays[name]
        if not isinstance(a, _Member):
            return a
        if a.array is None:
            self.check_dtype(name)
            if a.data_offset is None:                 # compressed: read whole, once (its CRC checked by zipfile)
                try:
                    with zipfile.ZipFile(self.path) as zf, zf.open(a.info) as f:
                        a.array = np.lib.format.read_array(f, allow_pickle=False)
                except (ValueError, EOFError, zipfile.BadZipFile, zlib.error, OSError) as e:
                    raise RecordingError(f"{self._where(name)}: cannot be read ({type(e).__name__}: {e}): a "
                                         f"damaged file") from None
            else:
                if not a.crc_checked:
                    self._check_crc(a)
                a.array = (np.memmap(self.path, dtype=a.dtype, mode="r", offset=a.data_offset, shape=a.shape,
                                     order="F" if a.fortran else "C") if np.prod(a.shape) else
                           np.empty(a.shape, a.dtype))
        return a.array

    def check_complete(self, name):
        """Raise unless every chunk of Zarr array ``name`` is stored (a missing one would read as the
        fill value; a store declaring 10**10 rows it does not hold is refused before anything is
        allocated for them).  Nothing to do for a ``.npz``, whose sizes are checked on opening."""
        if self.format != "zarr" or name in self._complete:
            return
        z = self._arrays[name]
        try:
            have, want = z.nchunks_initialized, z.nchunks
        except Exception as e:                        # a store that cannot be listed
            raise RecordingError(f"{self._where(name)}: cannot list its chunks ({type(e).__name__}: {e})") from None
        if have < want:
            raise RecordingError(f"{self._where(name)}: {want - have} of its {want} chunks are missing (Zarr would "
                                 f"read them as the fill value; a writer must store every chunk: "
                                 f"write_empty_chunks=True)")
        self._complete.add(name)

    def rows(self, name, start, stop) -> np.ndarray:
        """Rows ``start:stop`` of array ``name`` as float64 (integers converted exactly)."""
        self.check_dtype(name)
        self.check_complete(name)
        a = self._arrays[name]
        try:
            x = np.asarray(self._array(name)[start:stop])
        except RecordingError:
            raise
        except Exception as e:                        # a codec's error (zstd, blosc), a truncated chunk
            raise RecordingError(f"{self._where(name)}: rows {start}..{stop - 1} cannot be read "
                                 f"({type(e).__name__}: {e}): a damaged store") from None
        if x.dtype.kind in "iu" and x.size and (int(x.max()) > _EXACT_INT or int(x.min()) < -_EXACT_INT):
            raise RecordingError(f"{self._where(name)}: integers beyond 2**53 in rows {start}..{stop - 1} do not "
                                 f"convert to float64 exactly")
        return np.asarray(x, dtype=float)

    def require(self, want: dict, n, hint=None):
        """Raise unless every array ``name`` of ``want`` is present, numeric, complete and of shape
        ``(n, want[name])`` (``n``: the row count, or ``None`` for any); ``hint``: ``{name: text}``
        appended to a shape error."""
        for name, cols in want.items():
            if name not in self._arrays:
                raise RecordingError(f"{self.label}: no array {name!r} (it has {sorted(self.names) or 'none'}); "
                                     f"expected " + ", ".join(f"{k} (N, {c})" for k, c in want.items()))
            shape = self.shape(name)
            self.check_dtype(name)
            self.check_complete(name)
            if len(shape) != 2 or shape[1] != cols or shape[0] != n:
                raise RecordingError(f"{self._where(name)} has shape {shape}, expected ({n}, {cols}) "
                                     f"(states along axis 0){(hint or {}).get(name, '')}")

    def finite_rows(self, names, start, stop) -> dict:
        """``{name: rows start:stop}`` of each array of ``names``; a non-finite value raises, naming the
        array, its row and columns."""
        arrays = {name: self.rows(name, start, stop) for name in names}
        for name, x in arrays.items():
            bad = ~np.all(np.isfinite(x), axis=1)
            if bad.any():
                row = start + int(np.argmax(bad))
                cols = np.nonzero(~np.isfinite(x[row - start]))[0].tolist()
                raise RecordingError(f"{self._where(name)}: row {row} is not finite (NaN or infinite in "
                                     f"column(s) {cols[:8]})")
        return arrays

    def storage_chunk(self, name):
        """Rows per stored chunk (Zarr), or ``None``."""
        a = self._arrays[name]
        return int(a.chunks[0]) if self.format == "zarr" else None


def open_recording(path) -> Recording:
    """A :class:`Recording` of a ``.npz`` file or a Zarr store."""
    return Recording(path)


# --- writing --------------------------------------------------------------------------------

class RecordingWriter:
    """Arrays ``{name: (n,) + shape}`` (``fields``: ``[(name, per-row shape)]``) written by row ranges,
    in any order, to ``path`` inside the private temporary directory ``tmp`` of
    :func:`~sparsedyn.io.output.atomic_output` (a ``.npz`` through ``.npy`` memory maps there, a Zarr
    store in chunks of ``chunk`` rows); :meth:`close` finishes the file."""

    def __init__(self, tmp: Path, path: Path, fields, n, chunk):
        self.path, self.fields = Path(path), list(fields)
        self.format = "zarr" if self.path.suffix == ".zarr" else "npz"
        if self.format == "zarr":
            import zarr
            g = zarr.open_group(str(path), mode="w")
            self.arrays = {name: g.create_array(name, shape=(n,) + tuple(s), chunks=(max(1, min(chunk, n)),) + tuple(s),
                                                dtype="f8", config={"write_empty_chunks": True})
                           for name, s in self.fields}
        else:
            self.dir = Path(tmp)
            self.arrays = {name: np.lib.format.open_memmap(self.dir / f"{k}.npy", mode="w+", dtype=float,
                                                           shape=(n,) + tuple(s))
                           for k, (name, s) in enumerate(self.fields)}

    def write(self, start, values: dict):
        """Rows ``start:start + len(values[name])`` of every field."""
        for name, _ in self.fields:
            x = values[name]
            self.arrays[name][start:start + len(x)] = x

    def close(self):
        if self.format == "npz":
            for a in self.arrays.values():
                a.flush()
            self.arrays = {}
            with zipfile.ZipFile(self.path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for k, (name, _) in enumerate(self.fields):
                    with open(self.dir / f"{k}.npy", "rb") as src, zf.open(name + ".npy", "w", force_zip64=True) as dst:
                        shutil.copyfileobj(src, dst, 1 << 22)
                    os.unlink(self.dir / f"{k}.npy")
        self.arrays = {}


def write_recording(path, arrays: dict, chunk=DEFAULT_CHUNK, *, force=False):
    """Write ``{name: array}`` (float arrays of any shape; Zarr chunks of ``chunk`` rows) as a ``.npz``
    file or a Zarr store (by the name of ``path``), under a temporary name renamed at the end.
    An existing ``path`` is replaced only with ``force=True`` (see :func:`~sparsedyn.io.output.atomic_output`)."""
    arrays = {k: np.asarray(v, float) for k, v in arrays.items()}
    with atomic_output(path, force=force, error=RecordingError) as (_, tmp):
        if tmp.suffix == ".zarr":
            import zarr
            g = zarr.open_group(str(tmp), mode="w")
            for k, x in arrays.items():
                z = g.create_array(k, shape=x.shape, dtype="f8", config={"write_empty_chunks": True},
                                   chunks=((max(1, min(chunk, x.shape[0])),) + x.shape[1:]) if x.ndim else ())
                z[...] = x
        else:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
