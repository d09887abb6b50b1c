"""Model resolution by name: built-in models, files, example-robot-data URDFs."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.io.resolve import example_robot_data_dir, find_example_robot, resolve_model


def test_builtin_name():
    m = resolve_model("chain7")
    assert m.nv == 7 and m.nbodies == 7


def test_example_robot_data_name_is_the_urdf_of_that_name():
    path = find_example_robot("panda")
    assert path.name == "panda.urdf" and example_robot_data_dir() in path.parents
    m, ref = resolve_model("panda"), sd.load_urdf(path)
    assert m.nv == ref.nv == 9 and np.array_equal(m.parent, ref.parent)


def test_a_path_is_read_as_a_file(tmp_path):
    f = tmp_path / "two.urdf"
    f.write_text(sd.to_urdf(sd.serial_chain(2)))
    assert resolve_model(str(f)).nv == 2


def test_unknown_name_names_the_closest_urdfs():
    with pytest.raises(sd.ModelError, match="'pand' is neither a built-in model.*closest example-robot-data names: "
                                            ".*panda"):
        resolve_model("pand")

    class Custom(Exception):
        pass

    with pytest.raises(Custom):
        resolve_model("pand", error=Custom)


# The names of example-robot-data's Python loader (``example_robot_data.load(name)``) whose URDF
# this library reads; its others are an SDF model (cassie) and one cut by its code (talos_legs).
LOADER_NAMES = ["a1", "allegro_left_hand", "allegro_right_hand", "anymal", "anymal_c", "anymal_kinova", "asr_twodof",
                "b1", "b1_z1", "baxter", "bolt", "double_pendulum", "double_pendulum_continuous",
                "double_pendulum_simple", "finger_edu", "go1", "hector", "hyq", "icub", "icub_reduced", "iris",
                "kinova", "laikago", "panda", "romeo", "simple_humanoid", "simple_humanoid_classical", "solo8",
                "solo12", "talos", "talos_arm", "talos_box", "talos_full", "talos_full_box", "ur10", "ur10_limited",
                "ur3", "ur3_gripper", "ur3_limited", "ur5", "ur5_gripper", "ur5_limited", "z1"]


@pytest.mark.parametrize("name", LOADER_NAMES)
def test_every_name_of_pinocchios_loader_is_found(name):
    path = find_example_robot(name)
    assert path is not None and path.is_file() and example_robot_data_dir() in path.parents


def test_load_model_takes_loader_names_as_pinocchio_does():
    """``sd.load_model("talos")``/``("solo12")``: the loader's URDF (talos_reduced, solo12), equal in size
    and mass to Pinocchio's model of that file with a free flyer."""
    import warnings

    import pinocchio as pin
    for name, file in (("talos", "talos_data/robots/talos_reduced.urdf"),
                       ("solo12", "solo_description/robots/solo12.urdf")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.UrdfWarning)
            m = sd.load_model(name, floating_base=True)
        pm = pin.buildModelFromUrdf(str(example_robot_data_dir() / file), pin.JointModelFreeFlyer())
        assert (m.nq, m.nv) == (pm.nq, pm.nv)
        assert abs(m.total_mass - sum(Y.mass for Y in pm.inertias)) < 1e-12 * m.total_mass


def test_misspelt_names_list_the_close_ones():
    with pytest.raises(sd.ModelError, match=r"'solo13': no such file, nor a robot of example-robot-data; "
                                            r"closest example-robot-data names: solo12"):
        sd.load_model("solo13")
    with pytest.raises(sd.ModelError, match=r"'talo'.*closest example-robot-data names: talos, talos_arm"):
        sd.load_model("talo")
    with pytest.raises(sd.ModelError, match=r"'cassie'.*an SDF model"):
        resolve_model("cassie")


def test_every_cli_command_takes_loader_names(capsys):
    from sparsedyn import cli
    assert cli.main(["info", "solo8", "--floating-base"]) == 0
    out = capsys.readouterr().out
    assert "model 'solo'" in out and "nq=15, nv=14" in out      # solo.urdf's robot name
    assert cli.main(["info", "talo"]) == cli.EXIT_USAGE
    assert "closest example-robot-data names: talos" in capsys.readouterr().err
