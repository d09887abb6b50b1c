"""Hostile and unbounded URDF input: every problem is one UrdfError naming the file, quickly, with a
short message; overflowing numbers and inconsistent mimics are refused at load time."""

import os
import re

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.io.urdf import UrdfError, load_urdf
from sparsedyn.model import ModelError

LINK = ('<link name="{n}"><inertial><origin xyz="{c}"/><mass value="{m}"/>'
        '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>')


def two_links(xyz="0 0 0.5", mass="1", com="0 0 0.1", extra=""):
    return (f'<robot name="r"><link name="base"/>{LINK.format(n="arm", c=com, m=mass)}'
            f'<joint name="j" type="continuous"><parent link="base"/><child link="arm"/>'
            f'<origin xyz="{xyz}"/><axis xyz="0 1 0"/></joint>{extra}</robot>')


def test_non_regular_files_are_refused_without_reading(tmp_path):
    with pytest.raises(UrdfError, match=r"^/dev/zero: is a device; expected a regular URDF file"):
        load_urdf("/dev/zero")                                    # would grow without bound
    fifo = tmp_path / "pipe.urdf"
    os.mkfifo(fifo)
    with pytest.raises(UrdfError, match=re.escape(str(fifo)) + ": is a FIFO"):
        load_urdf(fifo)


def test_size_limit_and_its_override(tmp_path, monkeypatch):
    big = tmp_path / "big.urdf"
    big.write_text(two_links(extra="<!--" + "x" * 3000 + "-->"))
    with pytest.raises(UrdfError, match=r"big.urdf: the URDF file has \d+ bytes, more than the limit of 1000 "
                                        r"\(pass max_bytes= or set SPARSEDYN_MAX_FILE_BYTES"):
        load_urdf(big, max_bytes=1000)
    assert load_urdf(big, max_bytes=10_000).nbodies == 1
    monkeypatch.setenv("SPARSEDYN_MAX_FILE_BYTES", "1000")
    with pytest.raises(UrdfError, match="more than the limit of 1000"):
        load_urdf(big)
    with pytest.raises(UrdfError, match="<string>: the URDF has .* characters, more than the limit of 1000"):
        load_urdf(big.read_text())
    monkeypatch.setenv("SPARSEDYN_MAX_FILE_BYTES", "lots")
    with pytest.raises(ValueError, match="SPARSEDYN_MAX_FILE_BYTES: expected a positive number of bytes"):
        load_urdf(big)


def test_echoed_values_are_clipped(tmp_path):
    f = tmp_path / "long.urdf"
    f.write_text(two_links(xyz="1 " * 300_000))                  # 600 kB in one attribute
    with pytest.raises(UrdfError) as e:
        load_urdf(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: joint 'j' <origin>: xyz=") and "expected 3 numbers" in msg and len(msg) < 400
    f.write_text(two_links(xyz="0 0 " + "7" * 200_000))
    with pytest.raises(UrdfError, match="out of floating-point range") as e:
        load_urdf(f)
    assert len(str(e.value)) < 400
    roots = "".join(f'<link name="root{k:05d}"/>' for k in range(20_000))   # 20,000 root links
    f.write_text(f'<robot name="r">{roots}</robot>')
    with pytest.raises(UrdfError, match=r"20000 root links .*'root00000', .* and 19992 more") as e:
        load_urdf(f)
    assert len(str(e.value)) < 1000
    name = "n" * 100_000
    with pytest.raises(UrdfError) as e:
        load_urdf(f'<robot name="r"><link name="{name}"/><link name="{name}"/></robot>')
    assert "link name used twice" in str(e.value) and len(str(e.value)) < 2100


@pytest.mark.parametrize("urdf, pattern", [
    (two_links(xyz="1e154 1e154 1e154"), r"joint 'j' <origin>: xyz=.*out of range \(magnitude at most 1e\+09 m\)"),
    (two_links(com="0 0 1e200"), r"link 'arm' <inertial> <origin>: xyz=.*out of range"),
    (two_links(mass="1e300"), r"link 'arm' <inertial> <mass>: value=.*out of range \(magnitude at most 1e\+20 kg\)"),
    (two_links(xyz="0 0 1e999"), r"joint .j. <origin>: xyz=.0 0 1e999.: value out of floating-point range"),
    (two_links(xyz="0 0 nan"), r"joint .j. <origin>: xyz=.0 0 nan.: NaN and infinite values are not allowed"),
])
def test_overflowing_numbers_are_refused(urdf, pattern):
    with pytest.raises(UrdfError, match=r"^<string>: " + pattern):
        load_urdf(urdf)


def test_largest_accepted_numbers_give_finite_dynamics():
    model = load_urdf(two_links(xyz="1e9 1e9 1e9", mass="1e20", com="1e9 0 0"))
    rng = np.random.default_rng(0)
    q, v, a = rng.normal(size=(3, model.nv))
    for out in (sd.rnea(model, q, v, a), sd.aba(model, q, v, a), sd.crba(model, q), sd.minv(model, q)):
        assert np.all(np.isfinite(out))


def test_model_builder_refuses_overflowing_parameters():
    b = sd.ModelBuilder("m")
    with pytest.raises(ModelError, match=r"body 'a': com must be finite with magnitude at most 1e\+09"):
        b.add_body("a", None, sd.make_joint("revolute", (0, 0, 1)), mass=1.0, com=[1e154, 0, 0])
    with pytest.raises(ModelError, match=r"body 'a': mass must be finite"):
        b.add_body("a", None, sd.make_joint("revolute", (0, 0, 1)), mass=float("nan"))
    b.add_body("a", None, sd.make_joint("revolute", (0, 0, 1)), sd.spatial.xlt(np.array([0, 0, 1e154])), mass=1.0)
    with pytest.raises(ModelError, match=r"body 'a': its joint placement Xtree must be finite with a translation"):
        b.build()
    b = sd.ModelBuilder("m", gravity=[0, 0, np.nan])
    b.add_body("a", None, sd.make_joint("revolute", (0, 0, 1)), mass=1.0)
    with pytest.raises(ModelError, match="gravity must be 3 finite numbers"):
        b.build()


def test_mimic_of_itself_or_in_a_cycle():
    j2 = ('<link name="b"/><joint name="k" type="continuous"><parent link="arm"/><child link="b"/>'
          '<axis xyz="0 0 1"/>{m}</joint>')
    selfish = two_links(extra=j2.format(m='<mimic joint="k"/>'))
    with pytest.raises(UrdfError, match=r"^<string>: joint 'k' <mimic>: the joint mimics itself"):
        load_urdf(selfish)
    mutual = two_links(extra=j2.format(m='<mimic joint="j" multiplier="2"/>')).replace(
        '<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/><mimic joint="k"/>')
    with pytest.raises(UrdfError, match=r"^<string>: .*mimic joints follow each other in a cycle \('j' -> 'k' -> 'j'\)"):
        load_urdf(mutual)
    ok = two_links(extra=j2.format(m='<mimic joint="j" multiplier="-1"/>'))
    assert load_urdf(ok).mimic[0].multiplier == -1


def test_unknown_encoding_names_the_file(tmp_path):
    f = tmp_path / "ebcdic.urdf"
    f.write_bytes(b'<?xml version="1.0" encoding="EBCDIC-XYZ"?>\n' + two_links().encode())
    with pytest.raises(UrdfError, match=re.escape(str(f)) + r": cannot decode the XML: .*EBCDIC-XYZ"):
        load_urdf(f)
    f.write_bytes(b'<?xml version="1.0" encoding="utf-16"?>\n' + two_links().encode())
    with pytest.raises(UrdfError, match=re.escape(str(f))):
        load_urdf(f)
