"""The documentation cannot rot: every docstring example runs as a doctest, and every tutorial of
the documentation (docs/tutorials, the scripts ``make docs`` executes) runs to the end."""

import doctest
import importlib
import pkgutil
import runpy
import sys
from pathlib import Path

import pytest

import sparsedyn

TUTORIALS = sorted((Path(__file__).resolve().parents[1] / "docs" / "tutorials").glob("plot_*.py"))
SKIP_MODULES = {"sparsedyn.__main__"}          # running it runs the command line


def modules():
    names = ["sparsedyn"]
    for info in pkgutil.walk_packages(sparsedyn.__path__, "sparsedyn."):
        if info.name not in SKIP_MODULES:
            names.append(info.name)
    return names


def test_there_are_docstring_examples_and_tutorials():
    finder = doctest.DocTestFinder()
    n = sum(len(t.examples) for m in modules() for t in finder.find(importlib.import_module(m)))
    assert n >= 10 and len(TUTORIALS) >= 6


@pytest.mark.parametrize("name", modules())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failures, _ = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS,
                                  verbose=False, report=True)
    assert failures == 0


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(path, tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.chdir(tmp_path)                 # a tutorial writes nothing into the repository
    monkeypatch.setattr(sys, "argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    assert plt.get_fignums(), f"{path.name} drew no figure"      # every tutorial shows its result
    plt.close("all")
