"""The documentation cannot rot: every docstring example runs as a doctest, every tutorial of
the documentation (docs/tutorials, the scripts ``make docs`` executes) runs to the end, and every
Python block of the README (in order, one namespace) and of each guide page (in order, one namespace
per page) runs as written, so a renamed API breaks a test, not a reader."""

import doctest
import importlib
import pkgutil
import re
import runpy
import sys
import textwrap
from pathlib import Path

import pytest

import sparsedyn

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("plot_*.py"))
PAGES = sorted((ROOT / "docs" / "guide").glob("*.rst")) + [ROOT / "docs" / "index.rst"]
SKIP_MODULES = {"sparsedyn.__main__"}          # running it runs the command line


def modules():
    names = ["sparsedyn"]
    for info in pkgutil.walk_packages(sparsedyn.__path__, "sparsedyn."):
        if info.name not in SKIP_MODULES:
            names.append(info.name)
    return names


def _examples(name):
    """Examples of a module that doctest runs (``# doctest: +SKIP`` ones are not run)."""
    finder = doctest.DocTestFinder()
    return sum(1 for t in finder.find(importlib.import_module(name)) for ex in t.examples
               if not ex.options.get(doctest.SKIP))


def modules_with_examples():
    """Only the modules whose docstrings hold examples that run: a doctest item with nothing to run proves
    nothing."""
    return [m for m in modules() if _examples(m)]


def test_there_are_docstring_examples_and_tutorials():
    n = sum(_examples(m) for m in modules())
    assert n >= 10 and len(TUTORIALS) >= 6 and len(modules_with_examples()) >= 3


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failures, attempted = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS,
                                          verbose=False, report=True)
    assert failures == 0 and attempted > 0


def rst_python_blocks(text):
    """The bodies of the ``.. code-block:: python`` directives of a reStructuredText page, in order."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].strip() != ".. code-block:: python":
            i += 1
            continue
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith(":")):
            i += 1                                       # options and the blank line
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i][:1] in " \t"):
            body.append(lines[i])
            i += 1
        blocks.append(textwrap.dedent("\n".join(body)))
    return blocks


def markdown_python_blocks(text):
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _run_blocks(blocks, where, tmp_path, monkeypatch):
    """Run ``blocks`` in one namespace on the road a reader's copy takes: the default backend
    (native plain calls once their builds are ready, NumPy while they build), not the suite's
    NumPy setting."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.chdir(tmp_path)                 # an example writes nothing into the repository
    namespace = {"__name__": "__docs__"}
    with sparsedyn.use_backend("native"):
        for k, block in enumerate(blocks):
            exec(compile(block, f"{where}, Python block {k + 1}", "exec"), namespace)
    plt.close("all")
    return namespace


def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    blocks = markdown_python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 5
    _run_blocks(blocks, "README.md", tmp_path, monkeypatch)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_guide_page_python_blocks_run(path, tmp_path, monkeypatch):
    _run_blocks(rst_python_blocks(path.read_text()), str(path.relative_to(ROOT)), tmp_path, monkeypatch)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_python_in_a_page_is_marked_as_python(path):
    """A literal block (``::``) holding sparsedyn calls would escape the test above: Python is written
    as ``.. code-block:: python``."""
    text = path.read_text()
    literal = re.findall(r"::\n\n((?:[ \t]+.*\n|\n)+)", text)
    bad = [b.strip().splitlines()[0] for b in literal if re.search(r"\b(sd|np)\.\w+\(|^\s*import ", b, re.M)]
    assert not bad, f"{path.name}: literal blocks with Python, not marked as code-block:: python: {bad}"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(path, tmp_path, monkeypatch):
    """A tutorial runs to the end on the road ``make docs`` takes: the default backend (native once
    built, NumPy meanwhile), not the suite's NumPy setting (a humanoid's hundreds of contact steps
    would take minutes on NumPy alone)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    monkeypatch.chdir(tmp_path)                 # a tutorial writes nothing into the repository
    monkeypatch.setattr(sys, "argv", [str(path)])
    with sparsedyn.use_backend("native"):
        runpy.run_path(str(path), run_name="__main__")
    assert plt.get_fignums(), f"{path.name} drew no figure"      # every tutorial shows its result
    plt.close("all")


def test_the_install_page_lists_every_extra_of_pyproject():
    """docs/install.rst's table of extras names exactly the extras pyproject.toml declares."""
    try:
        import tomllib
    except ImportError:                          # Python 3.10
        import tomli as tomllib
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    text = (ROOT / "docs" / "install.rst").read_text()
    table = text.split("extra          what it adds")[1].split("\n\n")[0]
    listed = set(re.findall(r"^``([\w-]+)``", table, re.M))
    assert listed == declared, f"missing from the page: {declared - listed}; not an extra: {listed - declared}"
