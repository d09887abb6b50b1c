"""The layers of the package (DESIGN.md's layer table): nothing imports upward, no module imports
itself through a circle, and the compiler imports no physics.

Every ``import`` statement counts, including the lazy ones inside functions: a lazy import is
still a dependency, it only moves the moment it is paid.  (The package facade's ``_LAZY`` table,
strings resolved by :mod:`importlib`, is the one way the top of the package names the layers below
it without an ``import`` statement.)

``KNOWN`` lists today's violations, each with the step that removes it; it only shrinks: a new
violation fails, and so does an entry whose violation is gone (delete the entry).
"""

import ast
from pathlib import Path

import sparsedyn

ROOT = Path(sparsedyn.__file__).resolve().parent

#: DESIGN.md's layer table, bottom to top: (layer, module prefixes relative to ``sparsedyn``).
#: A module imports only its own layer and those below it.  ``""`` is the package facade.
LAYERS = [
    # the array backend, argument checks, the kernel registry, reading untrusted files safely (bytes, TOML/JSON tables)
    ("foundation", ["backend", "_checks", "kernels", "_version", "io.files"]),
    ("spatial", ["model.spatial"]),
    ("symbolic", ["symbolic"]),
    ("model", ["model"]),
    ("algorithms", ["algorithms"]),
    ("sparse", ["sparse"]),
    ("estimation", ["estimation", "identification"]),
    ("constraints", ["constraints"]),
    ("contact", ["contact"]),
    ("compile", ["codegen"]),
    ("io", ["io", "interop"]),      # readers of files (a file's model, sensors, constraints), other libraries' layouts
    ("user", ["cli", "plots", "viewer", "recording", "__main__", ""]),
]
#: The compiler compiles what the layers above wrote: it imports only these layers (and itself).
COMPILER_IMPORTS = {"foundation", "symbolic", "compile"}

#: Today's violations, (importer, imported) -> the step of issue 21 that removes it.
KNOWN = {
    # edges that close a circle (same layer)
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The package module ``name`` lives in (``sparsedyn.a.b.c`` -> ``a.b`` if that is a module)."""
    if name != "sparsedyn" and not name.startswith("sparsedyn."):
        return None
    name = name[len("sparsedyn."):] if name != "sparsedyn" else ""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imported_modules(path: Path):
    """The package modules ``path`` imports, relative to ``sparsedyn`` (``""``: the facade itself).
    ``from pkg import sub`` names the submodule ``pkg.sub``; ``from pkg import name`` names ``pkg``."""
    package = ".".join(("sparsedyn",) + path.relative_to(ROOT).parent.parts)
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {_resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                out.add(full[len("sparsedyn."):] if full.startswith("sparsedyn.") and
                        full[len("sparsedyn."):] in MODULES else _resolve(mod))
    return out - {None, module_name(path)}


def layer(module: str) -> int:
    """Index in :data:`LAYERS` of ``module`` (longest matching prefix)."""
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or (p and module.startswith(p + ".")):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    assert best is not None, f"sparsedyn.{module} is in no layer of LAYERS: add it to DESIGN.md's table and here"
    return best[0]


GRAPH = {m: imported_modules(p) for m, p in MODULES.items()}


def violations():
    """Upward imports, and the compiler's imports of physics."""
    out = set()
    for m, deps in GRAPH.items():
        for d in deps:
            if layer(d) > layer(m):
                out.add((m, d))
            if LAYERS[layer(m)][0] == "compile" and LAYERS[layer(d)][0] not in COMPILER_IMPORTS:
                out.add((m, d))
    return out


def cycle(graph):
    """One import circle of ``graph`` as a list of modules, or ``None``."""
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_every_module_has_a_layer():
    assert len(MODULES) > 60
    for m in MODULES:
        layer(m)


def test_nothing_imports_upward_and_the_compiler_imports_no_physics():
    found = violations()
    new = sorted(found - set(KNOWN))
    gone = sorted(set(KNOWN) - found - {e for e in KNOWN if KNOWN[e].startswith("circle")})
    assert new == [], f"imports against DESIGN.md's layer table: {new}"
    assert gone == [], f"fixed, so delete them from KNOWN: {gone}"


def test_no_import_circles():
    pruned = {m: {d for d in deps if (m, d) not in KNOWN} for m, deps in GRAPH.items()}
    assert cycle(pruned) is None, f"import circle: {' -> '.join(cycle(pruned))}"
    stale = sorted(e for e in KNOWN if KNOWN[e].startswith("circle") and e[1] not in GRAPH[e[0]])
    assert stale == [], f"no longer imported, so delete them from KNOWN: {stale}"


def test_the_import_parser_sees_every_form():
    """The checker resolves the forms a violation would take (a test of the test)."""
    assert "codegen" in imported_modules(ROOT / "cli.py")                 # from . import codegen (lazy)
    assert "symbolic.ir" in imported_modules(ROOT / "sparse" / "flops.py")  # from ..symbolic.ir import Graph
    assert "backend" in imported_modules(ROOT / "model" / "spatial.py")              # from . import backend as bk
    assert "" in imported_modules(ROOT / "cli.py")                        # from . import __version__
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
    assert [LAYERS[layer(m)][0] for m in ("", "codegen.api", "sparse", "io.urdf", "kernels")] == \
        ["user", "compile", "sparse", "io", "foundation"]
