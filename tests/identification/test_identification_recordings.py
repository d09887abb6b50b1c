"""Inertial parameters identified from a recording chunk by chunk (sparsedyn.identification.recordings,
``sparsedyn identify --recording``): the true base parameters of noise-free torques, bad rows named and
nothing written.  (On Dask workers: tests/interop/test_interop_dask_recordings.py.)"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from recording_cases import leftovers
from sparsedyn import cli
from sparsedyn import identification as idn
from sparsedyn.identification.recordings import identify_recording
from sparsedyn.io.recordings import RecordingError, write_recording
from sparsedyn.model.builders import builtin


def test_identify_a_recording_chunk_by_chunk(tmp_path, capsys):
    """Chunk accumulators merged in row order give the true base parameters of noise-free torques (the
    model's own, by the identification's regressor identity), the command line and the function alike."""
    model = builtin("chain7")
    q, v, a = idn.random_states(model, 3000, seed=5)
    tau = sd.rnea(model, q, v, a)
    rec = tmp_path / "log.zarr"
    write_recording(rec, {"q": q, "v": v, "a": a, "tau": tau}, chunk=1000)
    out = tmp_path / "params.npz"
    assert cli.main(["identify", "chain7", "--recording", str(rec), "--out", str(out)]) == 0
    assert "3000 states" in capsys.readouterr().out
    here = np.load(out)
    truth = idn.base_parameters(model).base(model.inertial_parameters())
    assert rel_err(here["beta"], truth) < 1e-8                     # as tests/test_identification.py's recovery
    s = identify_recording(model, rec, tmp_path / "p.zarr", chunk=700)
    assert s["chunks"] == 5 and s["states"] == 3000
    assert rel_err(s["result"].beta, truth) < 1e-8
    # a bad row is named, and nothing is written
    bad = tau.copy()
    bad[1234, 2] = np.nan
    write_recording(tmp_path / "bad.npz", {"q": q, "v": v, "a": a, "tau": bad})
    with pytest.raises(RecordingError, match=r"array 'tau': row 1234 is not finite"):
        identify_recording(model, tmp_path / "bad.npz", tmp_path / "never.npz", chunk=500)
    write_recording(tmp_path / "short.npz", {"q": q, "v": v, "a": a})
    with pytest.raises(RecordingError, match=r"no array 'tau'"):
        identify_recording(model, tmp_path / "short.npz", tmp_path / "never.npz")
    assert not (tmp_path / "never.npz").exists() and leftovers(tmp_path) == []


def test_values_so_large_that_the_normal_equations_overflow_are_an_error(tmp_path, capsys):
    """tau = 1e300 once wrote non-finite covariances, with exit 0."""
    model = builtin("chain7")
    q, v, a = idn.random_states(model, 200, seed=2)
    np.savez(tmp_path / "id.npz", q=q, v=v, a=a, tau=np.full((200, model.nv), 1e300))
    assert cli.main(["identify", "chain7", "--recording", str(tmp_path / "id.npz"), "--out", str(tmp_path / "p.npz")]) \
        == 1
    err = capsys.readouterr().err
    assert "is not finite" in err and "nothing written" in err and not (tmp_path / "p.npz").exists()
