"""Resolve Python cross-references to re-exported and relative names.

sparsedyn documents every object once, at its defining module (or on the
``sparsedyn`` page for names exported at the top).  Docstrings refer to objects
by the path a user types (``sparsedyn.sparse.Structure``, re-exported from
``sparsedyn.sparse.solver``) or by a name relative to their own module
(``Program`` inside :mod:`sparsedyn.symbolic.ir`).  This handler imports the
referenced object, finds where it is documented and points the reference there,
so a reference that still fails is truly broken (the build runs nitpicky, with
warnings as errors).
"""

import importlib

from sphinx.util import logging

logger = logging.getLogger(__name__)


def _lookup(path):
    """The object at dotted ``path`` (module, then attributes), or None."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj
    return None


def _candidates(target, node):
    mod = node.get("py:module") or ""
    cls = node.get("py:class") or ""
    paths = [target]
    if mod:
        if cls:
            paths.append(f"{mod}.{cls}.{target}")
        paths.append(f"{mod}.{target}")
        pkg = mod.rsplit(".", 1)[0]
        paths.append(f"{pkg}.{target.lstrip('.')}")
    if target.startswith("."):
        paths = [f"{mod}{target}", f"{mod.rsplit('.', 1)[0]}{target}"]
    return paths


def _canonical(obj, path):
    names = [path]
    if hasattr(obj, "__qualname__") and hasattr(obj, "__module__"):
        names.insert(0, f"{obj.__module__}.{obj.__qualname__}")
    if hasattr(obj, "__name__") and hasattr(obj, "__path__") or type(obj).__name__ == "module":
        names.insert(0, obj.__name__)
    # names exported at the top are documented on the sparsedyn page (methods with their class)
    qual = getattr(obj, "__qualname__", None)
    if qual and "." in qual:
        import sparsedyn
        if qual.split(".")[0] in getattr(sparsedyn, "__all__", ()):
            names.insert(0, f"sparsedyn.{qual}")
    short = getattr(obj, "__name__", None)
    if short:
        import sparsedyn
        if short in getattr(sparsedyn, "__all__", ()) and getattr(sparsedyn, short, None) is obj:
            names.insert(0, f"sparsedyn.{short}")
    return names


def missing_reference(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if any(part.startswith("_") and not part.startswith("__") for part in target.lstrip(".~").split(".")):
        return contnode          # a private name: shown as code, never a link (it has no public page)
    domain = env.get_domain("py")
    # a name relative to the docstring's own module (``ltdl_kernel``, ``Structure.unpack``): the one
    # documented object whose full name ends with it, searched within the referencing package first
    mod = node.get("py:module") or ""
    tail = "." + target.lstrip(".~")
    found = [name for name in domain.objects if name.endswith(tail)]
    for scope in (mod, mod.rsplit(".", 1)[0], "sparsedyn"):
        near = [n for n in found if n.startswith(scope + ".")]
        if len(set(near)) == 1:
            ref = domain.resolve_xref(env, node.get("refdoc"), app.builder, "obj", near[0], node, contnode)
            if ref is not None:
                return ref
    for path in _candidates(target, node):
        obj = _lookup(path.lstrip("."))
        if obj is None:
            continue
        for name in _canonical(obj, path.lstrip(".")):
            if name == target:
                continue
            for role in ("obj", "class", "func", "meth", "mod", "attr", "data", "exc"):
                ref = domain.resolve_xref(env, node.get("refdoc"), app.builder, role, name, node, contnode)
                if ref is not None:
                    return ref
    # the name exists but has no page of its own (a constant or helper outside ``__all__``): code, no link
    if any(_lookup(path.lstrip(".")) is not None for path in _candidates(target, node)):
        return contnode
    return None


def setup(app):
    app.connect("missing-reference", missing_reference, priority=900)
    return {"version": "1", "parallel_read_safe": True}
