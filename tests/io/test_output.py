"""Outputs that never destroy: an existing file or directory is refused without force, the input is
refused always, a failure (an error, a size limit, SIGTERM) leaves nothing behind and an old output
untouched, and errors name the destination."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.io.output import OutputError, atomic_output, check_destination

SRC = str(Path(sd.__file__).resolve().parents[1])


def hidden(d: Path):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_an_existing_file_or_directory_is_refused_without_force(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("x")
    with pytest.raises(OutputError, match=r"'.*results.zarr'.*does not exist|expected a name ending"):
        check_destination(tmp_path / "results")
    (tmp_path / "results.zarr").mkdir()
    (tmp_path / "results.zarr" / "notes.txt").write_text("x")
    with pytest.raises(OutputError, match=r"results\.zarr': already exists \(a directory\).*--force"):
        check_destination(tmp_path / "results.zarr")
    with pytest.raises(OutputError, match=r"directory that is no Zarr store"):
        check_destination(tmp_path / "results.zarr", force=True)       # never a directory of other things
    (tmp_path / "old.npz").write_bytes(b"mine")
    with pytest.raises(OutputError, match=r"old\.npz': already exists \(a file\)"):
        with atomic_output(tmp_path / "old.npz") as (_, path):
            path.write_bytes(b"new")
    assert (tmp_path / "old.npz").read_bytes() == b"mine" and (tmp_path / "results.zarr" / "notes.txt").exists()
    with atomic_output(tmp_path / "old.npz", force=True) as (_, path):
        path.write_bytes(b"new")
    assert (tmp_path / "old.npz").read_bytes() == b"new" and hidden(tmp_path) == []


def test_the_input_is_never_the_output(tmp_path):
    rec = tmp_path / "rec.npz"
    rec.write_bytes(b"data")
    for out in (rec, tmp_path / "." / "rec.npz"):
        with pytest.raises(OutputError, match="is the input"):
            check_destination(out, force=True, sources=[rec])
    os.symlink(rec, tmp_path / "link.npz")
    with pytest.raises(OutputError, match="is the input"):
        check_destination(tmp_path / "link.npz", force=True, sources=[rec])
    store = tmp_path / "rec.zarr"
    store.mkdir()
    with pytest.raises(OutputError, match="is the input"):
        check_destination(store / "inner.zarr", sources=[store])
    assert rec.read_bytes() == b"data"


def test_a_missing_or_unusable_parent_names_the_destination(tmp_path):
    with pytest.raises(OutputError, match=r"'.*nowhere/o\.npz': the directory '.*nowhere' does not exist"):
        check_destination(tmp_path / "nowhere" / "o.npz")
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=r"is not a directory"):
        check_destination(tmp_path / "file" / "o.npz")
    with pytest.raises(OutputError, match="NUL"):
        check_destination(str(tmp_path / "a\0b.npz"))
    with pytest.raises(OutputError, match="expected a path"):
        check_destination(5)


def test_a_failure_inside_the_block_leaves_nothing_and_keeps_the_old_output(tmp_path):
    (tmp_path / "o.npz").write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(tmp_path / "o.npz", force=True) as (tmp, path):
            path.write_bytes(b"half")
            raise KeyboardInterrupt
    assert (tmp_path / "o.npz").read_bytes() == b"old" and hidden(tmp_path) == []


SIZE_LIMITED = """
import resource, sys, numpy as np
from sparsedyn.io.recordings import write_recording
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
try:
    write_recording(sys.argv[1], {"x": np.random.default_rng(0).random((100_000, 4))}, force=True)  # incompressible
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(1)
"""


@pytest.mark.parametrize("name", ["o.npz", "o.zarr"])
def test_a_size_limit_leaves_nothing_behind_and_names_the_destination(tmp_path, name):
    """RLIMIT_FSIZE (what ``ulimit -f`` sets) stands for a full disk: the write fails with EFBIG."""
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", SIZE_LIMITED, str(tmp_path / name)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("RecordingError") and f"output '{tmp_path / name}': cannot write it" in r.stdout
    assert ".partial" not in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


TERMINATED = """
import os, signal, sys
from sparsedyn.io.output import atomic_output
with atomic_output(sys.argv[1]) as (tmp, path):
    path.write_bytes(b"half")
    os.kill(os.getpid(), signal.SIGTERM)
    path.write_bytes(b"never")
"""


def test_sigterm_while_writing_leaves_nothing(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", TERMINATED, str(tmp_path / "o.npz")], capture_output=True,
                       timeout=60, env=env)
    assert r.returncode == 128 + signal.SIGTERM
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_write_recording_refuses_an_existing_output(tmp_path):
    from sparsedyn.io.recordings import RecordingError, write_recording
    write_recording(tmp_path / "r.npz", {"x": np.arange(3.0)})
    with pytest.raises(RecordingError, match="already exists"):
        write_recording(tmp_path / "r.npz", {"x": np.zeros(3)})
    assert np.array_equal(np.load(tmp_path / "r.npz")["x"], [0.0, 1.0, 2.0])
