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
    with pytest.raises(sd.ModelError, match="'pand' is neither a built-in model.*closest example-robot-data URDFs: "
                                            ".*panda"):
        resolve_model("pand")

    class Custom(Exception):
        pass

    with pytest.raises(Custom):
        resolve_model("pand", error=Custom)
