"""The layers of the package: nothing below the compiler imports it."""

import ast
from pathlib import Path

import sparsedyn

ROOT = Path(sparsedyn.__file__).resolve().parent
#: The compiler itself and what sits above it (the CLI, the package's public face).
ABOVE = {"cli.py", "__init__.py", "__main__.py"}


def imported_modules(path: Path):
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    package = ".".join(("sparsedyn",) + path.relative_to(ROOT).parent.parts)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append(mod)
            out += [f"{mod}.{a.name}" for a in node.names]     # "from . import codegen"
    return out


def below_compiler():
    return [p for p in sorted(ROOT.rglob("*.py"))       # the viewer sits above the compiler, as the CLI does
            if p.relative_to(ROOT).parts[0] not in ("codegen", "viewer") and str(p.relative_to(ROOT)) not in ABOVE]


def test_nothing_below_the_compiler_imports_it():
    files = below_compiler()
    assert len(files) > 40 and ROOT / "sparse" / "flops.py" in files
    bad = {str(p.relative_to(ROOT)): m for p in files for m in imported_modules(p)
           if m == "sparsedyn.codegen" or m.startswith("sparsedyn.codegen.")}
    assert bad == {}


def test_the_import_parser_sees_relative_imports():
    """The checker resolves the forms a violation would take (a test of the test)."""
    cli = imported_modules(ROOT / "cli.py")
    assert "sparsedyn.codegen" in cli or any(m.startswith("sparsedyn.codegen.") for m in cli)
    assert "sparsedyn.symbolic.ir" in imported_modules(ROOT / "sparse" / "flops.py")
