"""Generate one API page per module of sparsedyn (``docs/generated/<module>.rst``) when the build
starts, from ``pkgutil.walk_packages``: every public module is listed and documented, and a new
module appears without editing the documentation.

Each object is documented once: names exported by ``sparsedyn`` itself on the ``sparsedyn`` page,
everything else on the page of the module that defines it (a package page documents only what its
``__init__`` defines)."""

import pkgutil
from pathlib import Path

SKIP = {"sparsedyn.__main__"}


def module_names():
    import sparsedyn
    names = [info.name for info in pkgutil.walk_packages(sparsedyn.__path__, "sparsedyn.")
             if info.name not in SKIP and not any(p.startswith("_") for p in info.name.split(".")[1:])]
    return ["sparsedyn"] + sorted(names)


def page(name, toplevel):
    import importlib
    mod = importlib.import_module(name)
    lines = [name, "=" * len(name), "", f".. automodule:: {name}"]
    if name == "sparsedyn":
        lines += ["   :members:"]
    elif hasattr(mod, "__path__"):
        lines += ["   :members:", "   :ignore-module-all:"]
    else:
        exclude = [n for n in toplevel if n in getattr(mod, "__all__", ())]
        lines += ["   :members:"] + ([f"   :exclude-members: {', '.join(exclude)}"] if exclude else [])
    return "\n".join(lines).rstrip() + "\n"


def generate(app):
    import sparsedyn
    out = Path(app.srcdir) / "generated"
    out.mkdir(exist_ok=True)
    import inspect
    # functions and classes are documented on the sparsedyn page; data (tables, constants) where defined
    toplevel = [n for n in sparsedyn.__all__ if inspect.isfunction(getattr(sparsedyn, n))
                or inspect.isclass(getattr(sparsedyn, n))]
    names = module_names()
    for name in names:
        text = page(name, toplevel)
        path = out / f"{name}.rst"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    index = ["API reference", "=============", "",
             "Generated from the docstrings, one page per module.  Every public name is importable",
             "from :mod:`sparsedyn` itself; the modules show where it lives (the folders are the",
             "library's layers: ``symbolic`` below the model, ``algorithms`` on the model, the sparse",
             "system, estimation and constraints above them, the compiler and the interfaces on top).",
             "", ".. toctree::", "   :maxdepth: 1", ""] + [f"   generated/{n}" for n in names]
    text = "\n".join(index) + "\n"
    api = Path(app.srcdir) / "api.rst"
    if not api.exists() or api.read_text() != text:
        api.write_text(text)


def setup(app):
    app.connect("builder-inited", generate)
    return {"version": "1", "parallel_read_safe": True}
