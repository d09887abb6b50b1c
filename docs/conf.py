"""Sphinx configuration of the sparsedyn documentation (``make docs``)."""

import os
import sys
from pathlib import Path

import sparsedyn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))          # docs/_ext

project = "sparsedyn"
author = "The sparsedyn developers"
copyright = "2026, the sparsedyn developers"
release = sparsedyn.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "_ext.cheatsheet",
    "_ext.resolve",
    "_ext.apipages",
    "_ext.pagetoc",
]

autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_numpy_docstring = True
napoleon_google_docstring = True
default_role = "py:obj"
suppress_warnings = ["ref.python"]   # "more than one target" for a bare type name (slice): it links to one
nitpicky = True          # a broken cross-reference is a warning, and warnings are errors
#: targets outside this project (no network at build time, so no intersphinx inventories)
nitpick_ignore_regex = [("py:.*", r"(numpy|np|scipy|pathlib|os|typing|inspect|collections|tomllib|mujoco|pinocchio|casadi|jax"
                                   r"|concurrent|multiprocessing|dask)(\..*)?"),
                        ("py:class", r"(optional|callable|array_like|array|ndarray|float|int|str|bool|dict|list|tuple)")]

os.environ.setdefault("MPLBACKEND", "Agg")
sphinx_gallery_conf = {
    "examples_dirs": ["tutorials"],
    "gallery_dirs": ["auto_tutorials"],
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "show_memory": False,
    "plot_gallery": "True",
}

exclude_patterns = ["_build", "tutorials/*", "auto_tutorials/*.ipynb", "auto_tutorials/*.py", "auto_tutorials/*.zip",
                    "auto_tutorials/*.md5", "auto_tutorials/*.codeobj.json"]
html_theme = "furo"
html_title = f"sparsedyn {release}"
html_static_path = []
