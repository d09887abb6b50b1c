"""The command line's recordings (sparsedyn.cli_recordings): one error line for a bad recording, outputs that
are never destroyed, the progress bar."""

import io

import numpy as np
import pytest

from recording_cases import chain, leftovers, states  # noqa: F401 (chain: a fixture)
from sparsedyn import cli
from sparsedyn.cli_recordings import TerminalProgress


def test_cli_bad_recording_is_one_error_line(chain, tmp_path, capsys):
    _, problem, sensors = chain
    q, v, a, y = states(problem, 50)
    np.savez(tmp_path / "bad.npz", q=q, v=v, y=y[:, 1:])
    out = tmp_path / "est.npz"
    assert cli.main(["estimate", "chain7", "--sensors", str(sensors), "--recording", str(tmp_path / "bad.npz"),
                     "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "array 'y' has shape (50, 13)" in err
    assert not out.exists()
    assert cli.main(["estimate", "chain7", "--sensors", str(sensors), "--recording", str(tmp_path / "bad.npz")]) == 2


def test_out_never_destroys_an_existing_directory_file_or_the_recording(chain, tmp_path, capsys):
    """``--out`` naming an existing directory of other files, an existing output, or the recording itself
    is one error line naming it; nothing is changed.  ``--force`` replaces an earlier output only."""
    _, problem, sensors = chain
    q, v, a, y = states(problem, 50)
    rec = tmp_path / "rec.npz"
    np.savez(rec, q=q, v=v, y=y)
    (tmp_path / "results.zarr").mkdir()
    (tmp_path / "results.zarr" / "notes.txt").write_text("x")
    est = ["estimate", "chain7", "--sensors", str(sensors), "--recording", str(rec), "--out"]
    for out in ("results.zarr", "rec.npz"):
        for force in ([], ["--force"]):
            assert cli.main(est + [str(tmp_path / out)] + force) == 1
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and f"output '{tmp_path / out}'" in err, err
    assert (tmp_path / "results.zarr" / "notes.txt").read_text() == "x"
    assert sorted(np.load(rec).files) == ["q", "v", "y"]
    assert cli.main(est + [str(tmp_path / "est.npz")]) == 0
    first = np.load(tmp_path / "est.npz")["tau"]
    np.savez(rec, q=q, v=2 * v, y=y)
    assert cli.main(est + [str(tmp_path / "est.npz")]) == 1
    assert "already exists" in capsys.readouterr().err
    assert np.array_equal(np.load(tmp_path / "est.npz")["tau"], first)
    assert cli.main(est + [str(tmp_path / "est.npz"), "--force"]) == 0
    assert not np.array_equal(np.load(tmp_path / "est.npz")["tau"], first)
    ident = ["identify", "chain7", "--recording", str(rec), "--out"]
    assert cli.main(ident + [str(rec), "--force"]) == 1 and "is the input" in capsys.readouterr().err
    assert cli.main(ident + [str(tmp_path / "missing" / "p.npz")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_the_progress_bar_shows_chunks_rate_and_time_left():
    """Half the rows in 2 s: 100 states/s, 2 s left, half the bar; the last chunk ends the line."""
    out = io.StringIO()
    bar = TerminalProgress(out, width=10)
    bar(200, 400, 1, 2, 2.0)
    assert out.getvalue() == "\r[#####     ] 1/2 chunks  100 states/s  00:02 left "
    bar(400, 400, 2, 2, 4.0)
    assert out.getvalue().endswith("\r[##########] 2/2 chunks  100 states/s  00:00 left \n")
    out = io.StringIO()
    TerminalProgress(out, width=4)(0, 10, 0, 1, 0.0)              # nothing done yet: no rate, no estimate
    assert out.getvalue() == "\r[    ] 0/1 chunks  0 states/s  --:-- left "
