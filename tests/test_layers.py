"""The layers of the package (DESIGN.md's layer table and layout): the folder tree is the layout,
nothing imports upward, no module and no room imports itself through a circle, the compiler imports
no physics, and no layer uses a private member of another layer's objects.

Every ``import`` statement counts, including the lazy ones inside functions: a lazy import is
still a dependency, it only moves the moment it is paid.  (The package facade's ``_LAZY`` table,
strings resolved by :mod:`importlib`, is the one way the top of the package names the layers below
it without an ``import`` statement.)

``KNOWN`` and ``KNOWN_PRIVATE`` list today's violations, each with the reason it stays; they only
shrink: a new violation fails, and so does an entry whose violation is gone (delete the entry).
"""

import ast
from pathlib import Path

import sparsedyn

ROOT = Path(sparsedyn.__file__).resolve().parent

#: DESIGN.md's layer table, bottom to top: (layer, module prefixes relative to ``sparsedyn``; the
#: longest prefix decides).  A module imports only its own layer and those below it.  ``""`` is the
#: package facade.
LAYERS = [
    # the array backend, argument checks, the kernel registry
    ("foundation", ["backend", "_checks", "kernels", "_version"]),
    # untrusted files read and written safely: bounded readers of side files (bytes, XML, TOML/JSON
    # tables), atomic output, recordings' file format (what the estimation layer reads)
    ("files", ["io.files", "io.output", "io.recordings"]),
    ("spatial", ["model.spatial"]),
    ("symbolic", ["symbolic"]),
    ("model", ["model"]),
    # parsers that build a Model and nothing else (DESIGN.md puts them with the model): URDF, SRDF,
    # example-robot-data's files
    ("parsers", ["io.urdf", "io.urdf_elements", "io.urdf_writer", "io.srdf", "io.robots"]),
    ("algorithms", ["algorithms"]),
    ("sparse", ["sparse"]),
    ("estimation", ["estimation", "identification"]),
    ("constraints", ["constraints"]),
    ("contact", ["contact"]),
    # readers whose files hold constraints too (MJCF equalities, closed-loop side files: a
    # ConstraintSet; MuJoCo's joints and quaternion order: mjcf_joints), and load_model / resolve_model
    ("loaders", ["io"]),
    ("compile", ["codegen"]),
    # other libraries: their layouts and models, and the compiler's bridges (CasADi, JAX, Dask)
    ("interop", ["interop"]),
    ("user", ["cli", "cli_recordings", "plots", "viewer", "__main__", ""]),
]

#: DESIGN.md's layout: the package's rooms (its folders, and the modules at its root).  The root
#: holds the public face, the registry and its foundation, and the command line and plots.
LAYOUT = {
    "__init__", "__main__", "_version",                 # the public face
    "kernels", "backend", "_checks",                    # the registry and its foundation
    "cli", "cli_recordings", "plots",                   # the command line, plots
    "symbolic", "model", "io", "algorithms", "sparse", "estimation", "identification", "constraints", "contact",
    "codegen", "interop", "viewer",
}
#: The compiler compiles what the layers above wrote: it imports only these layers (and itself).
COMPILER_IMPORTS = {"foundation", "symbolic", "compile"}

#: Today's import violations, (importer, imported) -> why it stays.
KNOWN = {
}

#: Today's private members used across a layer boundary, (module, name) -> why it stays.
KNOWN_PRIVATE = {
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


def room(module: str) -> str:
    """The room of a module: its top-level folder, or itself at the package root (``""``: ``__init__``)."""
    return module.split(".")[0] or "__init__"


def rooms_on_disk() -> set:
    return {p.stem for p in ROOT.glob("*.py")} | {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}


#: Room -> the rooms it imports (a room's own modules importing each other left out).
ROOM_GRAPH = {}
for _m, _deps in GRAPH.items():
    ROOM_GRAPH.setdefault(room(_m), set()).update(room(d) for d in _deps if room(d) != room(_m))


# --- private members -------------------------------------------------------------------------

def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


TREES = {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}
#: Private modules (``_checks``, ``constraints/_kinematics``): private to the package, not members.
PRIVATE_MODULES = {m.rpartition(".")[2] for m in MODULES if _private(m.rpartition(".")[2])}


def _assigned(node):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for t in targets:
        for x in ast.walk(t):
            if isinstance(x, ast.Name):
                yield x.id
            elif isinstance(x, ast.Attribute):
                yield x.attr


def private_definitions() -> dict:
    """``{private name: the modules that define it}``: functions, classes, methods, module and class
    variables, attributes assigned (``self._x = ...``, ``object.__setattr__(obj, "_x", ...)``)."""
    out = {}
    for m, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                names = list(_assigned(node))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "__setattr__" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                names = [node.args[1].value]
            else:
                continue
            for n in names:
                if isinstance(n, str) and _private(n) and n not in PRIVATE_MODULES:
                    out.setdefault(n, set()).add(m)
    return out


def private_uses(module: str):
    """``(name, line, defined in)`` for each private member ``module`` uses that it does not define:
    ``obj._x`` (not ``self._x`` or ``cls._x``: the object's own class), ``getattr(obj, "_x")`` and
    ``setattr``/``hasattr`` alike, ``from x import _x`` (``defined in``: ``{x}``)."""
    defs = DEFINITIONS
    package = ".".join(("sparsedyn",) + MODULES[module].relative_to(ROOT).parent.parts)
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            name = node.attr
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2 and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) and \
                _private(node.args[1].value):
            name = node.args[1].value
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            source = _resolve(".".join(base + ([node.module] if node.module else [])))
            for a in node.names:
                if _private(a.name) and a.name not in PRIVATE_MODULES and source not in (None, module):
                    yield a.name, node.lineno, {source}
            continue
        else:
            continue
        where = defs.get(name, set())
        if name not in PRIVATE_MODULES and where and module not in where:
            yield name, node.lineno, where


DEFINITIONS = private_definitions()


def private_reach_ins():
    """``({(module, name): line} across a layer boundary, the number of same-layer uses)``: a private
    member used in a module that does not define it, by name; across a layer boundary when no module
    of the user's own layer defines it."""
    across, same = {}, 0
    for m in MODULES:
        for name, line, where in private_uses(m):
            if any(LAYERS[layer(d)][0] == LAYERS[layer(m)][0] for d in where):
                same += 1
            else:
                across.setdefault((m, name), line)
    return across, same


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


def test_the_folder_tree_is_designs_layout():
    """Every room of the package is one of DESIGN.md's layout, and every room of the layout exists: a new
    folder or root module goes into DESIGN.md's tree (and :data:`LAYOUT`) first."""
    have = rooms_on_disk()
    assert sorted(have - LAYOUT) == [], "rooms that are not in DESIGN.md's layout"
    assert sorted(LAYOUT - have) == [], "rooms of the layout that are gone: delete them from LAYOUT"


def design_table():
    """DESIGN.md's layer table as ``[(layer, [module prefixes])]``, the facade (named in words) as ``""``."""
    rows = []
    for line in (Path(__file__).resolve().parents[1] / "DESIGN.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and cells[0] not in ("layer", "---"):
            names = [w.strip("`") for w in cells[1].split(", ")]
            rows.append((cells[0], ["" if n == "the package facade" else n.replace(" (the rest)", "").strip("`") for n in names]))
    return rows


def test_designs_layer_table_is_this_tests():
    """DESIGN.md's table and :data:`LAYERS` name the same layers in the same order with the same modules."""
    assert design_table() == LAYERS


def test_no_import_circle_between_rooms():
    """The rooms (folders and root modules) import each other downward only: no circle, not even through
    modules that do not import each other (``io -> interop -> estimation -> io`` was one)."""
    assert cycle(ROOM_GRAPH) is None, f"import circle between rooms: {' -> '.join(cycle(ROOM_GRAPH))}"


def test_no_private_member_of_another_layer():
    """No module uses a private member (``obj._x``, ``from m import _x``, ``getattr(obj, "_x")``) that only
    modules of other layers define: a layer talks to another through public names."""
    across, _ = private_reach_ins()
    new = sorted(set(across) - set(KNOWN_PRIVATE))
    gone = sorted(set(KNOWN_PRIVATE) - set(across))
    assert new == [], "private members of another layer: " + ", ".join(f"{m}:{across[m, n]} {n}" for m, n in new)
    assert gone == [], f"no longer used, so delete them from KNOWN_PRIVATE: {gone}"


def test_the_private_member_scan_sees_every_form():
    """The scan finds the forms a reach-in would take, and leaves a class's own members and private modules
    alone (a test of the test)."""
    assert ("interop.jax", "_levels_function") not in private_reach_ins()[0]      # its own function
    fake = "import x\nfrom .solver import _SUPERLU\nfrom . import _kinematics\n" \
           "def f(st, self):\n    st._kernel(); getattr(st, '_fallback'); self._own()\n"
    TREES["sparse.fake"], MODULES["sparse.fake"] = ast.parse(fake), ROOT / "sparse" / "fake.py"
    try:
        found = {(n, tuple(sorted(w))) for n, _, w in private_uses("sparse.fake")}
    finally:
        del TREES["sparse.fake"], MODULES["sparse.fake"]
    assert ("_SUPERLU", ("sparse.solver",)) in found and ("_kinematics", ("constraints",)) not in found
    assert {n for n, _ in found} == {"_SUPERLU", "_kernel", "_fallback"}        # not self._own
    assert "_kinematics" in PRIVATE_MODULES and "_checks" in PRIVATE_MODULES


def test_the_import_parser_sees_every_form():
    """The checker resolves the forms a violation would take (a test of the test)."""
    assert "codegen" in imported_modules(ROOT / "cli.py")                 # from . import codegen (lazy)
    assert "symbolic.ir" in imported_modules(ROOT / "sparse" / "flops.py")  # from ..symbolic.ir import Graph
    assert "backend" in imported_modules(ROOT / "model" / "spatial.py")              # from . import backend as bk
    assert "" in imported_modules(ROOT / "cli.py")                        # from . import __version__
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
    assert [LAYERS[layer(m)][0] for m in ("", "codegen.api", "sparse", "io.urdf", "io.mjcf", "kernels")] == \
        ["user", "compile", "sparse", "parsers", "loaders", "foundation"]
    assert room("io.urdf") == "io" and room("") == "__init__" and room("cli") == "cli"
