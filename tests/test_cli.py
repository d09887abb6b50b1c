import subprocess
import sys

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import cli
from sparsedyn.model.builders import humanoid


def run(*args):
    return subprocess.run([sys.executable, "-m", "sparsedyn", *args], capture_output=True, text=True, timeout=120)


def test_info_builtin(capsys):
    assert cli.main(["info", "humanoid"]) == 0
    out = capsys.readouterr().out
    m = humanoid()
    assert f"nq={m.nq}, nv={m.nv}" in out
    assert f"total mass {m.total_mass:.4g} kg" in out
    assert "pelvis  [root_joint: free, nq=7 nv=6]" in out
    # one tree line per body, indented by depth
    lines = [ln for ln in out.splitlines() if "[" in ln and "nq=" in ln and "]" in ln]
    assert len(lines) == m.nbodies
    assert "l_sole@" in out


def one_link_urdf(path, name, mass=1.0, ixy=0):
    """A URDF with one revolute link ``l1`` (joint ``j1``) under ``base``, written to ``path``."""
    path.write_text(f"""<robot name="{name}"><link name="base"/>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <link name="l1"><inertial><mass value="{mass}"/><inertia ixx="1" iyy="1" izz="1" ixy="{ixy}" ixz="0" iyz="0"/>
      </inertial></link>
    </robot>""")
    return path


def test_info_urdf_file(tmp_path, capsys):
    path = one_link_urdf(tmp_path / "two.urdf", "two", mass=1.5)
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 bodies, nq=1, nv=1" in out and "l1  [j1: revolute" in out and "mass=1.5 kg" in out
    assert cli.main(["info", str(path), "--floating-base"]) == 0
    assert "nq=8, nv=7" in capsys.readouterr().out


def test_bad_model_argument_gives_one_clear_line(tmp_path):
    r = run("info", "no_such_robot")           # a name that is nothing: a usage error
    assert r.returncode == cli.EXIT_USAGE and "neither a built-in model" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'></robot>")
    r = run("info", str(bad))                  # a file the library refuses: an error, in one line
    assert r.returncode == cli.EXIT_ERROR and "bad.urdf" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("sparsedyn: error: ")
    r = run("info")                            # a missing argument: argparse's usage error
    assert r.returncode == cli.EXIT_USAGE and "usage:" in r.stderr


def test_benchmarks_load_from_the_source_checkout_only():
    """``sparsedyn bench`` runs ``benchmarks/bench_compiled.py`` of the checkout; a missing file is a usage error."""
    assert callable(cli.benchmark_module("bench_compiled").bench_report)
    with pytest.raises(cli.UsageError, match="no_such_benchmark.py not found: the benchmarks ship with the source"):
        cli.benchmark_module("no_such_benchmark")


def test_demo_reports_consistent_numbers(tmp_path):
    png = tmp_path / "H.png"
    r = run("demo", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "built-in humanoid" in out
    m = humanoid()
    # the vertical base force at rest equals the weight
    assert f"vertical force {m.total_mass * 9.81:.2f} N" in out
    err = float(out.split("|J v - v_hand| = ")[1].split(";")[0])
    assert err < 1e-12
    # H: pattern rows (one per dof), no fill-in, forward dynamics two ways agree
    assert f"Joint-space inertia H ({m.nv} x {m.nv})" in out
    assert "fill-in = 0 " in out
    assert float(out.split("max |ABA - CRBA+LTDL| over all 35 dofs = ")[1].split(";")[0]) < 1e-9
    assert float(out.split("|H a + C - tau| = ")[1].split()[0]) < 1e-9
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # closed loops: every example's KKT cross-check is printed and tiny
    kkt = [float(line.split()[-1]) for line in out.splitlines()
           if line.strip().startswith(("four_bar", "slider_crank", "five_bar", "delta_robot", "humanoid_double"))]
    assert len(kkt) == 5 and max(kkt) < 1e-9
    # a report for people: no line over 100 characters, the paper cited by author, title and year,
    # the ill-posed case presented as a finding, no heading printed twice
    lines = out.splitlines()
    # (the PNG's path is the caller's, printed whole)
    wide = [line for line in lines if len(line) > 100 and str(png) not in line]
    assert not wide, wide
    assert 'Nori, "Inverse, forward and other dynamic computations computationally' in out and "2017" in out
    assert "finding: these sensors cannot determine the unknowns" in out
    heads = [line for line in lines if line.startswith("(") and ")" in line[:4]]
    assert len(heads) == len(set(heads)) >= 5


def test_invalid_inertia_option_and_warning_format(tmp_path):
    path = one_link_urdf(tmp_path / "neg.urdf", "neg", ixy=2)
    r = run("info", str(path))
    assert r.returncode == cli.EXIT_ERROR and "link 'l1' <inertial>: inertia matrix has a negative eigenvalue" in r.stderr
    assert "--invalid-inertia warn" in r.stderr
    r = run("info", str(path), "--invalid-inertia", "warn")
    assert r.returncode == 0 and "1 bodies, nq=1, nv=1" in r.stdout
    assert r.stderr.startswith("sparsedyn: warning: ") and "on links: l1" in r.stderr and "Traceback" not in r.stderr


def test_sparsity_command(tmp_path):
    png = tmp_path / "id.png"
    r = run("sparsity", "chain7", "--problem", "id", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert "inverse dynamics of model 'chain7'" in r.stdout and "triangular, solved by substitution" in r.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"
    r = run("sparsity", "humanoid", "--problem", "fd")
    assert r.returncode == 0 and "all proven nonzero at every state" in r.stdout


def test_estimate_command():
    from pathlib import Path
    examples = Path(__file__).resolve().parents[1] / "examples"
    r = run("estimate", "humanoid", "--sensors", str(examples / "humanoid_ankle_ft.toml"))
    assert r.returncode == 0, r.stderr
    assert "well posed" in r.stdout.splitlines()[0]
    err = float(r.stdout.split("max relative error joint torques ")[1].split(",")[0])
    assert err < 1e-9
    assert max(len(line) for line in r.stdout.splitlines()) <= 100
    flop_lines = [line for line in r.stdout.splitlines() if "flops" in line]
    assert "after folding" in r.stdout or len(flop_lines) == 1        # two counts are explained, or one
    r = run("estimate", "humanoid", "--sensors", str(examples / "humanoid_load_cells.json"))
    assert r.returncode == cli.EXIT_ILL_POSED and "ILL-POSED: numerically rank-deficient by 1" in r.stdout
    assert "no estimate" in r.stdout
    r = run("estimate", "humanoid", "--sensors", str(examples / "nope.toml"))
    assert r.returncode == cli.EXIT_ERROR and "nope.toml" in r.stderr and "Traceback" not in r.stderr


def test_version_and_help():
    import sparsedyn
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"sparsedyn {sparsedyn.__version__}"
    r = run("--help")
    assert r.returncode == 0
    for command in ("info", "sparsity", "estimate", "compile", "bench", "demo"):
        assert f"    {command} " in r.stdout
    assert "exit codes:" in r.stdout and "example-robot-data" in r.stdout


def test_info_by_example_robot_data_name(capsys):
    """`sparsedyn info panda` finds panda.urdf in the installed example-robot-data package."""
    from sparsedyn import load_urdf
    path = cli.find_example_robot("panda")
    assert path is not None and path.name == "panda.urdf"
    assert cli.main(["info", "panda"]) == 0
    out = capsys.readouterr().out
    assert f"nv={load_urdf(path).nv}" in out and "panda_joint7: revolute axis=(0, 0, 1)" in out
    assert "e-1" not in out                    # no rounding residue such as 6.12e-17 in axes
    assert max(len(line) for line in out.splitlines() if "[" not in line) <= 100     # wrapped lists


def test_info_lists_sensors(tmp_path, capsys):
    path = one_link_urdf(tmp_path / "s.urdf", "s")
    text = path.read_text().replace("</robot>", """<gazebo reference="j1"><sensor name="j1_ft" type="force_torque">
      <force_torque><frame>child</frame><measure_direction>child_to_parent</measure_direction></force_torque>
      </sensor></gazebo></robot>""")
    path.write_text(text)
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sensors (1" in out and "j1_ft:" in out


def test_identify_command_streams_a_recording(tmp_path, capsys):
    """A recording (.npz, read a chunk at a time): the identified parameters predict the torques of other
    states (noise 0.01 N m); a recording without torques, or with a non-finite row, is refused with the
    array and row named, and nothing is written."""
    from sparsedyn import identification as idn
    model = sd.builtin("chain7")
    rng = np.random.default_rng(3)
    q, v, a = idn.random_states(model, 500, seed=4)
    tau = sd.rnea(model, q, v, a) + 0.01 * rng.normal(size=(500, model.nv))
    np.savez(tmp_path / "rec.npz", q=q, v=v, a=a, tau=tau)
    out = tmp_path / "pi.npz"
    assert cli.main(["identify", "chain7", "--recording", str(tmp_path / "rec.npz"), "--sigma", "0.01",
                     "--out", str(out), "--chunk", "128"]) == 0
    text = capsys.readouterr().out
    assert "500 states" in text and "4 chunk(s)" in text
    q2, v2, a2 = idn.random_states(model, 20, seed=5)
    fitted = model.with_inertial_parameters(np.load(out)["parameters"])
    truth = sd.rnea(model, q2, v2, a2)
    assert np.abs(sd.rnea(fitted, q2, v2, a2) - truth).max() < 0.05 * max(1.0, np.abs(truth).max())
    np.savez(tmp_path / "no_tau.npz", q=q, v=v, a=a)
    assert cli.main(["identify", "chain7", "--recording", str(tmp_path / "no_tau.npz"),
                     "--out", str(tmp_path / "x.npz")]) == 1
    assert "tau" in capsys.readouterr().err and not (tmp_path / "x.npz").exists()
    tau[300, 2] = np.inf
    np.savez(tmp_path / "bad.npz", q=q, v=v, a=a, tau=tau)
    assert cli.main(["identify", "chain7", "--recording", str(tmp_path / "bad.npz"), "--out", str(tmp_path / "y.npz"),
                     "--chunk", "128"]) == 1
    err = capsys.readouterr().err
    assert "tau" in err and "300" in err and not (tmp_path / "y.npz").exists()


def _recording(path):
    """The ``durationSeconds`` and message count of a viser recording embedded in a standalone page."""
    import base64
    import re
    import msgspec
    import zstandard
    data = base64.b64decode(re.search(r'__VISER_EMBED_DATA__="([^"]+)"', path.read_text()).group(1))
    inner = zstandard.ZstdDecompressor().decompress(data[8:], max_output_size=int.from_bytes(data[:8], "little"))
    n = int.from_bytes(inner[:8], "little")
    rec = msgspec.msgpack.decode(inner[8:8 + n])
    return rec["durationSeconds"], len(rec["messages"])


def test_view_saves_a_standalone_page_of_a_recording(tmp_path, capsys):
    import numpy as np
    model = cli.load_model("panda")
    T, dt = 11, 0.1
    qs = np.tile(model.neutral(), (T, 1))
    qs[:, 1] = np.linspace(0.0, -1.0, T)
    rec, est = tmp_path / "motion.npz", tmp_path / "estimates.npz"
    np.savez(rec, q=qs)                                  # a recording (sparsedyn.io.recordings) and its estimates
    np.savez(est, tau=np.zeros((T, model.nv)), **{"contact[panda_hand]": np.tile([0, 0, 0, 0, 0, 20.0], (T, 1))})
    out = tmp_path / "motion.html"
    assert cli.main(["view", "panda", "--recording", str(rec), "--estimates", str(est), "--dt", str(dt),
                     "--save", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    duration, messages = _recording(out)
    assert abs(duration - 31 / 30) <= 31 * np.finfo(float).eps   # 1 s at 30 frames/s: a sum of 31 frames of 1/30 s
    assert messages > 31 * 2                         # every frame moves the bodies
    q_file = tmp_path / "q.txt"
    np.savetxt(q_file, qs[:, :-1])                   # one number short per row
    assert cli.main(["view", "panda", "--q", str(q_file), "--save", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{q_file}: expected configurations of model 'panda' with nq = {model.nq}" in err
    np.savez(est, **{"contact[floor]": np.zeros((T, 6))})
    assert cli.main(["view", "panda", "--recording", str(rec), "--estimates", str(est), "--save", str(out)]) == 1
    assert "contact[floor]: 'floor' is no frame of model 'panda'" in capsys.readouterr().err


def test_view_serves_the_page(capsys):
    assert cli.main(["view", "humanoid", "--seconds", "0.2", "--port", "8300"]) == 0
    assert "viewer of 'humanoid' at http://127.0.0.1:" in capsys.readouterr().out


def test_demo_build_lines_come_after_its_report_when_piped(tmp_path):
    """On the default (native) road with an empty build cache, stdout and stderr into one pipe: the
    lines announcing the builds follow the report instead of cutting it."""
    import os
    env = {k: v for k, v in os.environ.items() if k != "SPARSEDYN_BACKEND"}
    env["SPARSEDYN_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([sys.executable, "-m", "sparsedyn", "demo", "--plot", ""], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    builds = [k for k, line in enumerate(lines) if line.startswith("sparsedyn: building")]
    report = [k for k, line in enumerate(lines) if not line.startswith("sparsedyn: building")]
    assert builds, "an empty cache builds native code"
    assert min(builds) > max(report), lines[min(builds) - 2:min(builds) + 2]
    assert lines[0].startswith("sparsedyn demo: built-in humanoid")
