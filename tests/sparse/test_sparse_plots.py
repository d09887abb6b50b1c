"""Pictures of [D; D_Y] and the text report behind `sparsedyn sparsity MODEL --problem id|fd`."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import sparse
from sparse_oracles import robot


def _is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("problem", ["id", "fd"])
def test_sparsity_report_and_picture(tmp_path, problem):
    model = sd.random_tree(6, branching=2.0, joint_types="all", seed=3, floating_base=True)
    path = tmp_path / f"{problem}.png"
    text = sparse.sparsity_report(model, problem, str(path))
    assert _is_png(path) and path.stat().st_size > 10_000
    name = "inverse dynamics" if problem == "id" else "forward dynamics"
    assert text.startswith(f"{name} of model '{model.name}'")
    assert "operations of one solve" in text and f"picture: {path}" in text
    if problem == "id":
        assert "triangular, solved by substitution" in text
    else:
        assert "ordering 'articulated'" in text
        # the pivots of a joint whose S depends on q are checked at run time (gimbal lock), the rest proven
        assert any(not j.constant_subspace for j in model.joints)
        assert "unproven (checked at run time), e.g. c(3tau)" in text
        assert "colamd: fill-in" in text


def test_report_of_a_structurally_singular_problem(tmp_path):
    path = tmp_path / "romeo_fd.png"
    text = sparse.sparsity_report(robot("romeo", False), "fd", str(path), flops=False)
    assert text.startswith("structurally singular: forward dynamics of model 'romeo'")
    assert "LFinger" in text and _is_png(path)


def test_plot_of_a_general_problem(tmp_path):
    model = sd.serial_chain(3)
    L = sparse.Layout(model)
    p = sparse.Problem(model).known("fx").known("tau", [0, 2]).measure(
        sparse.Measurement("knee sensor", ((L.var("f", 1), np.eye(6)[2:3]),), 1))
    st = p.analyze()
    out = sparse.plot_system(st, str(tmp_path / "general.png"), title="a sensor instead of a torque")
    assert _is_png(out)
    with pytest.raises(ValueError, match="problem: expected one of"):
        sparse.sparsity_report(model, "hd")
