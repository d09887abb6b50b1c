"""Arguments of the loaders and model edits that are not what they should be: the library's own error
naming the argument, what was expected and what came (never Python's "'NoneType' object is not
iterable" or "embedded null byte"); a mesh file name the system cannot look up is a name, not a crash."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.io.srdf import SrdfError, load_srdf
from sparsedyn.io.urdf import UrdfError, load_urdf
from sparsedyn.model import ModelError

INERTIAL = '<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>'


def mesh_urdf(filename):
    return (f'<robot name="r"><link name="a">{INERTIAL}<visual><geometry><mesh filename="{filename}"/>'
            f'</geometry></visual></link></robot>')


@pytest.mark.parametrize("prefix", ["package://p/", "/", ""])
def test_a_300_character_mesh_file_name_is_kept_as_written(tmp_path, prefix):
    """No file can have that name (255 bytes at most): it is not found, and kept as the reference."""
    name = prefix + "x" * 300 + ".stl"
    path = tmp_path / "r.urdf"
    path.write_text(mesh_urdf(name))
    model = load_urdf(path, geometry=True)
    assert model.geometries[0].mesh == name


def test_package_dirs_must_be_folders():
    with pytest.raises(TypeError, match=r"package_dirs: expected a folder or a sequence of folders .*got 5"):
        load_urdf(mesh_urdf("package://p/m.stl"), geometry=True, package_dirs=5)
    with pytest.raises(TypeError, match=r"package_dirs: .*got \[None\]"):
        load_urdf(mesh_urdf("package://p/m.stl"), package_dirs=[None])


@pytest.mark.parametrize("load, error", [(lambda p: load_urdf(p), UrdfError), (lambda p: sd.load_model(p), ModelError),
                                         (lambda p: load_srdf(sd.builtin("chain7"), p), SrdfError)])
def test_none_and_nul_paths_are_the_loaders_errors(load, error):
    with pytest.raises(error, match=r"NUL character"):
        load("robot\0.urdf")
    if error is not UrdfError:                         # load_urdf takes a path or an XML string: a TypeError
        with pytest.raises(error, match=r"expected a path \(str or os.PathLike\), got None"):
            load(None)


def test_srdf_gear_ratio_whose_armature_is_not_finite_is_refused(tmp_path):
    model = sd.builtin("chain7")
    path = tmp_path / "r.srdf"
    path.write_text('<robot name="r"><rotor_params><joint name="joint2" mass="1" gear_ratio="1e200"/>'
                    '</rotor_params></robot>')
    with pytest.raises(SrdfError, match=r"line 1: <joint name='joint2'>: mass=1, gear_ratio=1e\+200: the armature "
                                        r"mass \* gear_ratio\*\*2 = inf is not finite"):
        load_srdf(model, path)
    path.write_text('<robot name="r"><rotor_params><joint name="joint2" mass="0.5" gear_ratio="3"/>'
                    '</rotor_params></robot>')
    srdf = load_srdf(model, path)
    assert srdf.with_armature().armature[1] == 0.5 * 3 ** 2            # I g^2 by hand


def test_with_armature_lists_the_bad_values():
    model = sd.builtin("chain7")
    with pytest.raises(ModelError, match=r"armature must be 7 finite non-negative numbers \(one per dof\); got "
                                         r"dof 2 \('joint3'\): inf, dof 4 \('joint5'\): -1$"):
        model.with_armature([0, 1, np.inf, 0, -1, 0, 0])


def test_model_edit_arguments():
    model = sd.builtin("chain7")
    with pytest.raises(TypeError, match=r"reduce_model: joints: expected a joint name or a sequence of joint names "
                                        r"\(e\.g\. \['joint1'\]\), got NoneType"):
        sd.reduce_model(model, None)
    with pytest.raises(TypeError, match=r"reduce_model: joints: expected joint names \(str\), got NoneType"):
        sd.reduce_model(model, ["joint1", None])
    with pytest.raises(TypeError, match=r"append_model: prefix: expected a string .* got int '5'"):
        sd.append_model(model, model, prefix=5)
    assert sd.reduce_model(model, ("joint2",)).nv == model.nv - 1
    assert sd.append_model(model, model, prefix="b_").nv == 2 * model.nv
