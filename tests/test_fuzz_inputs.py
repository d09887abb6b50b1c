"""Seeded fuzzing of the surfaces that take someone else's data: the recordings reader, the command
line's ``--out``, contact inputs, SRDF rotor parameters and model-edit arguments.

A case passes when it gives a correct result or exactly one error of the library's own (raised from
sparsedyn's code, so its message is ours); it fails on a foreign exception (raised inside NumPy,
zipfile, Zarr or Python), a hang (an alarm bounds each case), a non-finite result handed back
silently, a recording read with values other than those written, or an output that destroyed or
left behind a file.  The default budget takes well under a minute; ``SPARSEDYN_FUZZ_BUDGET=N``
multiplies the number of cases by N (a longer run, e.g. before a release).
"""

import io
import os
import shutil
import warnings
import traceback
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zarr

import sparsedyn as sd
from conftest import time_limit
from sparsedyn import cli
from sparsedyn.io.recordings import Recording, RecordingError

PACKAGE = str(Path(sd.__file__).resolve().parent)
BUDGET = max(1, int(os.environ.get("SPARSEDYN_FUZZ_BUDGET", "1") or 1))
SECONDS_PER_CASE = 20


def ours(e: BaseException) -> bool:
    """Whether ``e`` was raised by sparsedyn's own code (a library error, its message ours)."""
    if isinstance(e, (TimeoutError, AssertionError)):
        return False
    frames = traceback.extract_tb(e.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(PACKAGE)


def run_case(case, fn):
    """``fn()``'s result, or ``None`` when it raised a library error; a foreign error fails the test."""
    with time_limit(SECONDS_PER_CASE, f"case {case}"):
        try:
            return fn()
        except Exception as e:                      # noqa: BLE001 - classified right here
            if not ours(e):
                raise AssertionError(f"case {case}: foreign {type(e).__name__}: {e}") from e
            return None


# --- the recordings reader ---------------------------------------------------------------------------

def recording_bytes(rng, fmt):
    arrays = {"q": rng.normal(size=(40, 7)), "v": rng.normal(size=(40, 7)).astype(np.float32)}
    f = io.BytesIO()
    (np.savez_compressed if fmt == "compressed" else np.savez)(f, **arrays)
    return f.getvalue(), arrays


def mutate(rng, data: bytes) -> bytes:
    data = bytearray(data)
    kind = rng.integers(4)
    if kind == 0:                                   # flipped bytes anywhere
        for _ in range(rng.integers(1, 4)):
            data[rng.integers(len(data))] ^= 1 << int(rng.integers(8))
    elif kind == 1:                                 # truncated
        del data[rng.integers(len(data)):]
    elif kind == 2:                                 # a shape in a header rewritten
        at = data.find(b"'shape': (")
        if at >= 0:
            data[at + 10:at + 12] = rng.choice([b"99", b"10", b"0,", b"-1", b"1e"])
    else:                                           # a dtype in a header rewritten
        at = data.find(b"'descr': '")
        if at >= 0:
            data[at + 10:at + 13] = rng.choice([b"<c1", b"<m8", b"|O1", b"<i8", b"|b1", b">f8"])
    return bytes(data)


def check_recording(path, arrays, case):
    def read():
        rec = Recording(path)
        return {n: rec.rows(n, 0, rec.shape(n)[0]) for n in rec.names}
    got = run_case(case, read)
    if got is None:
        return
    for name, x in got.items():
        assert x.dtype == np.float64, (case, name)
        if name in arrays and x.shape == arrays[name].shape:
            # what was written, or refused: never other numbers (a rewritten dtype of the same size
            # reads other numbers only when the CRC-32 was recomputed, which a mutation does not do)
            assert np.array_equal(x, arrays[name].astype(float)), (case, name)


@pytest.mark.parametrize("fmt", ["stored", "compressed"])
def test_fuzz_npz_recordings(tmp_path, fmt):
    rng = np.random.default_rng(38 + (fmt == "compressed"))
    for case in range(60 * BUDGET):
        data, arrays = recording_bytes(rng, fmt)
        path = tmp_path / f"r{case}.npz"
        path.write_bytes(mutate(rng, data))
        check_recording(path, arrays, f"{fmt} {case}")
        path.unlink()


def test_fuzz_zarr_recordings(tmp_path):
    rng = np.random.default_rng(380)
    for case in range(20 * BUDGET):
        store = tmp_path / f"r{case}.zarr"
        q = rng.normal(size=(40, 7))
        g = zarr.open_group(str(store), mode="w")
        g.create_array("q", shape=q.shape, chunks=(10, 7), dtype="f8")[...] = q
        files = sorted(p for p in store.rglob("*") if p.is_file())
        victim = files[rng.integers(len(files))]
        action = rng.integers(3)
        if action == 0:
            victim.unlink()
        elif action == 1:
            victim.write_bytes(victim.read_bytes()[: rng.integers(max(1, victim.stat().st_size))])
        else:
            b = bytearray(victim.read_bytes())
            b[rng.integers(len(b))] ^= 0xFF
            victim.write_bytes(bytes(b))
        got = run_case(case, lambda: Recording(store).rows("q", 0, 40))
        # a flipped byte inside a compressed chunk may decompress to other numbers (Zarr keeps no
        # checksum by default): the reader must then still hand back finite float64 rows or refuse
        if got is not None:
            assert got.dtype == np.float64, case
            if action != 2:
                assert np.array_equal(got, q), case


# --- the command line's --out ------------------------------------------------------------------------

def snapshot(d: Path):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_fuzz_cli_out_never_destroys(tmp_path, capsys):
    """Random destinations (new, existing file, existing store, a directory of notes, the recording, a
    missing parent, a file as parent), with and without --force: exit 0 or 1 with one error line;
    on 1 nothing changed, on 0 only the destination; never a hidden temporary left."""
    rng = np.random.default_rng(3838)
    model = sd.builtin("chain7")
    from sparsedyn import identification as idn
    q, v, a = idn.random_states(model, 60, seed=1)
    np.savez(tmp_path / "rec.npz", q=q, v=v, a=a, tau=sd.rnea(model, q, v, a))
    (tmp_path / "notes.zarr").mkdir()
    (tmp_path / "notes.zarr" / "notes.txt").write_text("mine")
    (tmp_path / "plain.txt").write_text("x")
    names = ["new.npz", "new.zarr", "rec.npz", "notes.zarr", "old.npz", "missing/p.npz", "plain.txt/p.npz",
             "no_suffix", "./rec.npz"]
    for case in range(12 * BUDGET):
        out = names[rng.integers(len(names))]
        force = bool(rng.integers(2))
        before = snapshot(tmp_path)
        rc = run_case(case, lambda: cli.main(["identify", "chain7", "--recording", str(tmp_path / "rec.npz"),
                                              "--out", str(tmp_path / out)] + (["--force"] if force else [])))
        err = capsys.readouterr().err
        after = snapshot(tmp_path)
        assert rc in (0, 1), (case, out, rc)
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], (case, out)
        if rc == 1:
            assert len(err.strip().splitlines()) == 1 and str(tmp_path / out).replace("/./", "/") in \
                err.replace("/./", "/"), (case, out, err)
            assert after == before, (case, out)
        else:
            changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
            assert all(k.startswith(Path(out).name) for k in changed), (case, out, changed)
            assert (tmp_path / out).exists(), (case, out)       # (an old output may be rewritten identically)
            assert out not in ("rec.npz", "./rec.npz", "notes.zarr")
        if rc == 0 and out == "new.npz":
            os.replace(tmp_path / out, tmp_path / "old.npz")          # an earlier result from now on
        elif rc == 0 and out == "new.zarr":
            shutil.rmtree(tmp_path / out)


# --- contact inputs -----------------------------------------------------------------------------------

def extreme(rng):
    """A number from the corners of double precision (and ordinary ones)."""
    return float(rng.choice([0.0, -0.0, 1.0, -1.0, 0.3, 1e-300, 1e-160, 5e-324, 1e6, 1e7, 1e150, 1e200, 1e300,
                             -1e300, np.nan, np.inf]))


def test_fuzz_contact_inputs():
    rng = np.random.default_rng(8338)
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) / 60)
    model = b.add_frame("box", "box").build()
    q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    inputs = []
    with sd.use_backend("numpy"):
        for case in range(40 * BUDGET):
            def step():
                kw = {"friction": abs(extreme(rng)) if rng.integers(3) else 0.5}
                if rng.integers(2):
                    kw["point"] = [extreme(rng) if rng.integers(3) == 0 else 0.1 * rng.normal() for _ in range(3)]
                if rng.integers(2):
                    kw["plane"] = ([extreme(rng) if rng.integers(2) else 0.0 for _ in range(2)] + [extreme(rng)],
                                   extreme(rng) if rng.integers(3) == 0 else 0.0)
                contacts = [sd.Contact("box", "3d", **kw)]
                v = np.where(rng.random(6) < 0.2, [extreme(rng) for _ in range(6)], rng.normal(size=6))
                dt = extreme(rng) if rng.integers(3) == 0 else 1e-3
                fn = sd.contact_step_derivatives if rng.integers(2) else sd.contact_step
                inputs.append((fn.__name__, contacts, v, dt))
                return fn(model, q, v, np.zeros(6), contacts, dt)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")        # non-convergence warnings are not what is tested
                res = run_case(case, step)
            if res is not None:
                arrays = [x for x in (res if not hasattr(res, "step") else list(res[:6]) + [res.step.q, res.step.v])
                          if isinstance(x, np.ndarray) and x.dtype.kind == "f"]
                assert all(np.isfinite(x).all() for x in arrays), (case, inputs[-1])


# --- SRDF rotor parameters and model edits -------------------------------------------------------------

def test_fuzz_srdf_rotor_parameters(tmp_path):
    from sparsedyn.io.srdf import load_srdf
    rng = np.random.default_rng(83)
    model = sd.builtin("chain7")
    texts = ["1e200", "1e-200", "-1", "0", "2.5", "nan", "inf", "1e400", "abc", "", "1 2", "0x10"]
    for case in range(40 * BUDGET):
        mass, gear = rng.choice(texts), rng.choice(texts)
        joint = rng.choice(["joint2", "joint9", ""])
        path = tmp_path / "r.srdf"
        path.write_text(f'<robot name="r"><rotor_params><joint name="{joint}" mass="{mass}" gear_ratio="{gear}"/>'
                        f'</rotor_params></robot>')
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")             # an unknown joint is a warning
            srdf = run_case(case, lambda: load_srdf(model, path))
        if srdf is not None:
            m = run_case(case, srdf.with_armature)
            assert m is not None and np.isfinite(m.armature).all() and (m.armature >= 0).all(), (case, mass, gear)


def test_fuzz_model_edit_arguments():
    rng = np.random.default_rng(838)
    model = sd.builtin("chain7")
    junk = [None, 5, 2.5, "joint3", ["joint3"], ("joint3", "joint5"), [None], [5], {"joint3"}, "", "nope", b"joint3",
            [["joint3"]], np.array(["joint3"]), object()]
    for case in range(40 * BUDGET):
        which = rng.integers(2)
        x = junk[rng.integers(len(junk))]
        if which == 0:
            res = run_case(case, lambda: sd.reduce_model(model, x))
        else:
            res = run_case(case, lambda: sd.append_model(model, model, prefix=x))
        if res is not None:
            assert isinstance(res, sd.Model) and np.isfinite(sd.rnea(res, np.zeros(res.nq), np.ones(res.nv),
                                                                      np.zeros(res.nv))).all(), case
