"""load_srdf against Pinocchio's loadReferenceConfigurations and loadRotorParameters on the SRDFs of
example-robot-data, and hostile or malformed SRDF input (one SrdfError naming the file and line)."""

import re
import warnings

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn import cli
from sparsedyn.interop import pinocchio as ip
from sparsedyn.io.srdf import SrdfError, SrdfWarning, load_srdf
from conftest import rel_err
import erd

#: URDF (robots_dir-relative), floating base, SRDF.
PAIRS = {
    "talos": ("talos_data/robots/talos_reduced.urdf", True, "talos_data/srdf/talos.srdf"),
    "solo12": ("solo_description/robots/solo12.urdf", True, "solo_description/srdf/solo.srdf"),
    "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", True, "anymal_c_simple_description/srdf/anymal.srdf"),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False, "ur_description/srdf/ur5.srdf"),
    "panda": ("panda_description/urdf/panda.urdf", False, "panda_description/srdf/panda.srdf"),
    "go2": ("go2_description/urdf/go2.urdf", True, "go2_description/srdf/go2.srdf"),
    "romeo": ("romeo_description/urdf/romeo.urdf", True, "romeo_description/srdf/romeo.srdf"),
    "icub": ("icub_description/robots/icub_reduced.urdf", True, "icub_description/srdf/icub.srdf"),
}


@pytest.mark.parametrize("robot", sorted(PAIRS))
def test_srdf_matches_pinocchio(robot):
    urdf, fb, srdf = PAIRS[robot]
    model, pm = erd.load_pair(urdf, fb)
    path = str(erd.robots_dir() / srdf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SrdfWarning)
        s = load_srdf(model, path)
    pin.loadReferenceConfigurations(pm, path, False)
    if "<rotor_params" in open(path).read():
        pin.loadRotorParameters(pm, path, False)
    else:                  # Pinocchio raises on a file without rotor parameters; we read none
        assert not np.any(s.rotor_inertia) and np.all(s.gear_ratio == 1.0)
    refs = {e.key(): e.data() for e in pm.referenceConfigurations}
    assert set(s.reference_configurations) == set(refs)
    for name, q in s.reference_configurations.items():
        assert rel_err(ip.q_to_pinocchio(model, q), refs[name]) <= 1e-15, name
    assert np.array_equal(ip.v_to_pinocchio(model, s.rotor_inertia), pm.rotorInertia)
    assert np.array_equal(ip.v_to_pinocchio(model, s.gear_ratio), pm.rotorGearRatio)
    # the armature on request: Pinocchio's rnea with armature = rotor inertia * gear ratio^2
    m2 = s.with_armature()
    pm.armature = np.array(pm.rotorInertia) * np.array(pm.rotorGearRatio) ** 2
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    tau = pin.rnea(pm, pm.createData(), ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v),
                   ip.v_to_pinocchio(model, a))
    assert rel_err(sd.rnea(m2, q, v, a), ip.tau_from_pinocchio(model, tau)) < 1e-9


def test_talos_half_sitting_rotors_and_collisions():
    model, _ = erd.load_pair("talos_data/robots/talos_reduced.urdf", True)
    s = sd.load_srdf(model, erd.robots_dir() / "talos_data/srdf/talos.srdf")
    q = s.reference_configurations["half_sitting"]
    assert q[2] == 1.01927 and q[model.q_slice(model.joint("leg_left_4_joint"))][0] == 0.859395
    k = model.v_slice(model.joint("arm_left_1_joint")).start
    assert s.rotor_inertia[k] == 1e-5 and s.gear_ratio[k] == 100.0 and s.armature[k] == pytest.approx(0.1, rel=1e-15)
    assert ("arm_left_1_link", "arm_left_2_link", "Adjacent") in s.disabled_collisions
    assert "leg_right_sole_fix_joint" in s.groups["r_leg"]


SRDF = """<?xml version="1.0" ?>
<robot name="tiny">
  <group_state name="up" group="all">
    <joint name="joint1" value="0.5"/>
    {extra}
  </group_state>
</robot>
"""


def write(tmp_path, text, name="t.srdf"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_unknown_joints_are_named_in_one_warning(tmp_path):
    model = sd.serial_chain(3)
    p = write(tmp_path, SRDF.format(extra='<joint name="jiont2" value="1"/><joint name="elbow" value="1"/>'))
    with pytest.warns(SrdfWarning, match=r"t.srdf: model 'chain' has no joint 'jiont2', 'elbow'"):
        s = load_srdf(model, p)
    assert s.unknown_joints == ("jiont2", "elbow")
    assert np.array_equal(s.reference_configurations["up"], [0.5, 0.0, 0.0])


@pytest.mark.parametrize("extra, match", [
    ('<joint name="joint2" value="1 2"/>', r"line 5: <joint name='joint2'>: value='1 2': expected 1 number, got 2"),
    ('<joint name="joint2" value="nan"/>', r"line 5: <joint name='joint2'>: value='nan': 'nan' is not a finite number"),
    ('<joint name="joint2"/>', r"line 5: <joint name='joint2'>: missing required attribute 'value'"),
    ('<joint value="1"/>', r"line 5: <joint>: missing required attribute 'name'"),
    ('<joint name="joint2" value="1">', r"malformed XML at line 6, column \d+: mismatched tag"),
])
def test_malformed_srdf_names_file_and_line(tmp_path, extra, match):
    p = write(tmp_path, SRDF.format(extra=extra))
    with pytest.raises(SrdfError, match=r"t\.srdf.*" + match):
        load_srdf(sd.serial_chain(3), p)


def test_hostile_srdf(tmp_path):
    bomb = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
            '<robot name="x">&lol2;</robot>')
    with pytest.raises(SrdfError, match=r"bomb.srdf: forbidden XML construct"):
        load_srdf(sd.serial_chain(2), write(tmp_path, bomb, "bomb.srdf"))
    ext = '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><robot name="x">&x;</robot>'
    with pytest.raises(SrdfError, match="forbidden XML construct"):
        load_srdf(sd.serial_chain(2), write(tmp_path, ext, "ext.srdf"))
    with pytest.raises(SrdfError, match=r"^/dev/zero: is a device"):
        load_srdf(sd.serial_chain(2), "/dev/zero")
    with pytest.raises(SrdfError, match=r"line 1: root element is <model>, expected <robot>"):
        load_srdf(sd.serial_chain(2), write(tmp_path, "<model/>", "m.srdf"))
    big = write(tmp_path, SRDF.format(extra="<!--" + "x" * 3000 + "-->"), "big.srdf")
    with pytest.raises(SrdfError, match="more than the limit of 1000"):
        load_srdf(sd.serial_chain(3), big, max_bytes=1000)


def test_quaternion_values_must_be_unit(tmp_path):
    model = sd.humanoid()
    p = write(tmp_path, SRDF.format(extra='<joint name="root_joint" value="0 0 1 0 0 0 2"/>').replace("joint1", "l_knee"))
    with pytest.raises(SrdfError, match=r"line 5: <joint name='root_joint'>: the quaternion .* is not of unit norm"):
        load_srdf(model, p)


def test_cli_info_shows_the_srdf(capsys):
    urdf, fb, srdf = PAIRS["talos"]
    assert cli.main(["info", str(erd.robots_dir() / urdf), "--floating-base", "--srdf",
                     str(erd.robots_dir() / srdf)]) == 0
    out = capsys.readouterr().out
    assert "reference configuration 'half_sitting'" in out and "leg_left_4_joint=0.859395" in out
    assert "rotor parameters on 30 dofs" in out and "disabled collision pairs: 459" in out


def test_seeded_fuzz(tmp_path):
    """Mutants of an SRDF (values replaced by garbage, elements dropped or duplicated, the file
    truncated, stray bytes) either load into finite reference configurations and rotor parameters or
    raise one SrdfError naming the file; never a foreign exception."""
    model = sd.humanoid()
    base = f"""<?xml version="1.0" ?>
<robot name="humanoid">
  <group name="legs"><joint name="l_knee"/><joint name="r_knee"/></group>
  <group_state name="crouch" group="legs">
    <joint name="root_joint" value="0 0 0.9 0 0 0 1"/>
    <joint name="l_knee" value="1.2"/><joint name="r_knee" value="1.2"/>
  </group_state>
  <rotor_params><joint name="l_knee" mass="1e-4" gear_ratio="100"/></rotor_params>
  <disable_collisions link1="l_thigh" link2="l_shank" reason="Adjacent"/>
</robot>
"""
    rng = np.random.default_rng(0)
    garbage = ["nan", "inf", "-1", "1e400", "", "x", "1 2", "0 0 0 0 0 0 0", "\u00e9", "1e-300"]
    path = tmp_path / "fuzz.srdf"
    for k in range(150):
        text = base
        kind = k % 4
        if kind == 0:                                   # one attribute value replaced
            values = list(re.finditer(r'="([^"]*)"', text))
            m = values[rng.integers(len(values))]
            text = text[:m.start(1)] + garbage[rng.integers(len(garbage))] + text[m.end(1):]
        elif kind == 1:                                 # an element dropped or duplicated
            elements = list(re.finditer(r"<[a-z_]+ [^<>]*/>", text))
            m = elements[rng.integers(len(elements))]
            text = text[:m.start()] + (m.group() * 2 if rng.random() < 0.5 else "") + text[m.end():]
        elif kind == 2:                                 # truncated
            text = text[:rng.integers(1, len(text))]
        else:                                           # stray bytes
            i = int(rng.integers(len(text)))
            text = text[:i] + "".join(chr(int(c)) for c in rng.integers(1, 0x2FF, 3)) + text[i:]
        path.write_text(text, encoding="utf-8")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SrdfWarning)
                s = load_srdf(model, path)
        except SrdfError as e:
            assert str(path) in str(e)
            continue
        for q in s.reference_configurations.values():
            assert q.shape == (model.nq,) and np.all(np.isfinite(q))
            sd.rnea(model, q, np.zeros(model.nv), np.zeros(model.nv))     # a valid configuration
        assert np.all(np.isfinite(s.rotor_inertia)) and np.all(np.isfinite(s.gear_ratio))
