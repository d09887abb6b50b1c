"""Reading recordings made by someone else's robot: special files refused before they are opened,
sizes checked before anything is allocated, damaged bytes found by their CRC-32, missing Zarr chunks
and non-real dtypes refused, every failure a RecordingError naming the recording and the array."""

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zarr

import sparsedyn as sd
from sparsedyn.io.recordings import Recording, RecordingError, open_recording, write_recording

SRC = str(Path(sd.__file__).resolve().parents[1])
Q = np.arange(200 * 7, dtype=float).reshape(200, 7) / 7.0


def read_all(path, name="q"):
    rec = Recording(path)
    return rec.rows(name, 0, rec.shape(name)[0])


OPEN_FIFO = """
import sys
from sparsedyn.io.recordings import Recording, RecordingError
try:
    Recording(sys.argv[1])
except RecordingError as e:
    print(e)
"""


@pytest.mark.parametrize("kind", ["fifo", "dev_zero_link"])
def test_a_fifo_or_a_link_to_a_device_is_refused_before_it_is_opened(tmp_path, kind):
    """Opening a FIFO with no writer blocks forever and /dev/zero never ends: both are refused from their
    status (the subprocess's timeout bounds the test, it is not a claim about speed)."""
    path = tmp_path / "rec.npz"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)
    r = subprocess.run([sys.executable, "-c", OPEN_FIFO, str(path)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=SRC))
    assert r.returncode == 0, r.stderr
    assert f"recording '{path}': is a {'FIFO' if kind == 'fifo' else 'device'}" in r.stdout


def npz_with(path, members: dict, compression=zipfile.ZIP_STORED):
    """A .npz of raw ``{name: .npy bytes}`` members."""
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name + ".npy", data)


def npy_bytes(shape, data: bytes, dtype="<f8"):
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False, "shape": shape})
    return f.getvalue() + data


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_header_claiming_more_rows_than_the_file_holds_is_refused_before_allocating(tmp_path, compression):
    path = tmp_path / "rec.npz"
    npz_with(path, {"q": npy_bytes((10 ** 9, 7), Q.tobytes())}, compression)
    with pytest.raises(RecordingError, match=r"array 'q': its header declares shape \(1000000000, 7\) of float64 "
                                             r"\(56000000000 bytes\) but the archive holds 11200 bytes"):
        Recording(path)


def test_flipped_bytes_in_a_stored_member_are_found_by_its_crc(tmp_path):
    path = tmp_path / "rec.npz"
    np.savez(path, q=Q, v=2 * Q)
    data = bytearray(path.read_bytes())
    at = data.find(Q[100].tobytes())
    data[at + 3] ^= 0x10
    path.write_bytes(bytes(data))
    rec = Recording(path)
    assert np.array_equal(rec.rows("v", 0, 200), 2 * Q)       # the other array is intact
    with pytest.raises(RecordingError, match=r"array 'q': its bytes do not match the archive's CRC-32"):
        rec.rows("q", 0, 10)


def test_a_damaged_compressed_member_is_an_error_naming_it(tmp_path):
    path = tmp_path / "rec.npz"
    np.savez_compressed(path, q=Q, v=2 * Q)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("q.npy")
    at = info.header_offset + 30 + len(info.filename) + info.compress_size // 2
    for flip in (0x01, 0xFF):
        bad = bytearray(data)
        bad[at] ^= flip
        (tmp_path / "bad.npz").write_bytes(bytes(bad))
        with pytest.raises(RecordingError, match=r"'.*bad\.npz'.*array 'q'.*(damaged|not a readable)"):
            read_all(tmp_path / "bad.npz")


def test_a_truncated_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "rec.npz"
    np.savez(path, q=Q)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordingError, match=r"recording '.*rec\.npz': not a readable \.npz file"):
        Recording(path)


@pytest.mark.parametrize("value, dtype", [(Q.astype(complex), "complex128"),
                                          (Q.astype("m8[s]"), r"timedelta64\[s\]"),
                                          (np.array([[object()]] * 3, dtype=object), "object"),
                                          (Q > 3, "bool")])
def test_arrays_that_are_not_real_numbers_are_refused_naming_the_array(tmp_path, value, dtype):
    path = tmp_path / "rec.npz"
    np.savez(path, q=value) if value.dtype != object else np.savez(path, q=value, allow_pickle=True)
    with pytest.raises(RecordingError, match=rf"array 'q' has dtype {dtype}; expected real floating-point"):
        read_all(path)


def test_integers_convert_exactly_or_are_refused(tmp_path):
    path = tmp_path / "rec.npz"
    ints = np.array([[1, -2], [2 ** 53, 7]], dtype=np.int64)
    np.savez(path, q=ints, big=np.array([[2 ** 53 + 1]], dtype=np.int64))
    assert np.array_equal(read_all(path), ints.astype(float)) and read_all(path).dtype == np.float64
    with pytest.raises(RecordingError, match=r"array 'big': integers beyond 2\*\*53"):
        read_all(path, "big")


def test_a_missing_zarr_chunk_is_an_error(tmp_path):
    g = zarr.open_group(str(tmp_path / "rec.zarr"), mode="w")
    z = g.create_array("q", shape=Q.shape, chunks=(50, 7), dtype="f8")
    z[...] = Q
    assert np.array_equal(read_all(tmp_path / "rec.zarr"), Q)
    os.remove(tmp_path / "rec.zarr" / "q" / "c" / "2" / "0")
    with pytest.raises(RecordingError, match=r"array 'q': 1 of its 4 chunks are missing"):
        read_all(tmp_path / "rec.zarr")


def test_a_damaged_zarr_chunk_is_an_error_naming_the_array_and_rows(tmp_path):
    g = zarr.open_group(str(tmp_path / "rec.zarr"), mode="w")
    z = g.create_array("q", shape=Q.shape, chunks=(50, 7), dtype="f8")
    z[...] = Q
    chunk = tmp_path / "rec.zarr" / "q" / "c" / "1" / "0"
    chunk.write_bytes(chunk.read_bytes()[:20] + b"\0" * 40)           # a zstd frame cut and overwritten
    rec = Recording(tmp_path / "rec.zarr")
    assert np.array_equal(rec.rows("q", 0, 50), Q[:50])
    with pytest.raises(RecordingError, match=r"array 'q': rows 50\.\.99 cannot be read"):
        rec.rows("q", 50, 100)


def test_bad_paths_are_errors_naming_them(tmp_path):
    with pytest.raises(RecordingError, match="NUL"):
        Recording(str(tmp_path / "a\0b.npz"))
    with pytest.raises(RecordingError, match="expected a path"):
        Recording(None)
    (tmp_path / "rec.txt").write_text("x")
    with pytest.raises(RecordingError, match=r"expected a \.npz file or a Zarr store"):
        Recording(tmp_path / "rec.txt")


def test_write_recording_round_trip(tmp_path):
    x = np.arange(12.0).reshape(6, 2)
    for name in ("r.npz", "r.zarr"):
        write_recording(tmp_path / name, {"q": x, "y": 2 * x}, chunk=4)
        rec = open_recording(tmp_path / name)
        assert sorted(rec.names) == ["q", "y"] and rec.shape("y") == (6, 2)
        assert np.array_equal(rec.rows("y", 1, 5), 2 * x[1:5])
    assert open_recording(tmp_path / "r.zarr").storage_chunk("q") == 4
