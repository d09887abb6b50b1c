"""Rooms of a readable size: no source file of the package over 600 lines, no function (or method)
over 80 lines, its docstring and nested functions included; the same of its C files (the fast-call
extension's parts, each pasted into one source) and their functions, and of the repository's other Python
(its tests, benchmarks, examples and documentation sources; not what a build of the documentation writes).

``KNOWN`` lists today's exceptions; it only shrinks: a new one fails, and so does an entry that is
back within its limit (delete the entry).
"""

import ast
import re
from pathlib import Path

import sparsedyn

ROOT = Path(sparsedyn.__file__).resolve().parent
REPO = Path(__file__).resolve().parent.parent
#: The repository's folders of Python beside the package, and the folders in them that builds write.
OTHERS, WRITTEN = ("tests", "benchmarks", "examples", "docs"), {"_build", "generated", "auto_tutorials"}
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80

#: Files (relative to the package) and functions (``file::qualified name``) allowed over the limits.
KNOWN = set()


def source_files(pattern="*.py", root=ROOT):
    return sorted(p for p in root.rglob(pattern) if not ({"__pycache__"} | WRITTEN) & set(p.relative_to(root).parts))


def other_files():
    """The Python files of the repository's folders beside the package (:data:`OTHERS`)."""
    return [p for d in OTHERS if (REPO / d).is_dir() for p in source_files(root=REPO / d)]


#: A C function's first line: at column 0, a name and the opening of its parameter list.
_C_HEAD = re.compile(r"^[A-Za-z_][\w \*]*?\b(\w+)\(")


def c_functions(text):
    """``(name, number of lines)`` of every function defined in the C source ``text``, written as this
    package writes them: its head at column 0, the body's brace ending its head's last line (a head whose
    lines end in ``;`` or ``)`` first is a declaration or a macro's use), its closing brace alone at column
    0 (or the whole function on one line)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _C_HEAD.match(lines[i])
        if m:
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(("{", ";", ")", "}")):
                j += 1
            end = j if j < len(lines) and lines[j].rstrip().endswith("}") else None
            if end is None and j < len(lines) and lines[j].rstrip().endswith("{"):
                end = next((k for k in range(j + 1, len(lines)) if lines[k].rstrip() == "}"), len(lines) - 1)
            if end is not None:
                out.append((m.group(1), end - i + 1))
                i = end
        i += 1
    return out


def functions(tree):
    """``(qualified name, number of lines)`` of every function and method of a module's ``tree``."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out.append((name, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)
    visit(tree, "")
    return out


def oversized():
    """``{entry: lines}`` of the files and functions over their limits."""
    found = {}
    for path in source_files() + other_files():
        rel = path.relative_to(ROOT if ROOT in path.parents else REPO).as_posix()
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            found[rel] = lines
        for name, n in functions(ast.parse(text, str(path))):
            if n > MAX_FUNCTION_LINES:
                found[f"{rel}::{name}"] = n
    for path in source_files("*.[ch]"):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            found[rel] = len(text.splitlines())
        for name, n in c_functions(text):
            if n > MAX_FUNCTION_LINES:
                found[f"{rel}::{name}"] = n
    return found


def test_no_file_over_600_lines_and_no_function_over_80():
    found = oversized()
    new = {k: v for k, v in found.items() if k not in KNOWN}
    assert new == {}, f"over {MAX_FILE_LINES} lines a file or {MAX_FUNCTION_LINES} a function: {new}"


def test_every_known_exception_is_still_one():
    gone = sorted(KNOWN - set(oversized()))
    assert gone == [], f"within the limits now, so delete them from KNOWN: {gone}"


def test_the_measure_counts_what_it_says():
    """The measure itself (a test of the test): a function's lines run from ``def`` to its last line,
    docstring and nested functions included; methods are named by their class."""
    src = "class A:\n    def f(self):\n        '''doc\n        more'''\n        def g():\n            return 1\n" \
          "        return g\n\n\ndef h():\n    pass\n"
    assert functions(ast.parse(src)) == [("A.f", 6), ("A.f.g", 2), ("h", 2)]


def test_the_c_measure_counts_what_it_says():
    """The C measure: a function from its head to its closing brace (a head over two lines, a one-line
    function), no declaration, macro use or initializer counted."""
    src = ("static int f(int a,\n          int b) {\n    return a + b;\n}\n\nstatic int g(int a);\n"
           "SD_TYPE(Kernel, \"doc\")\nstatic PyMemberDef m[] = {{NULL}};\n"
           "static int h(void) { return 1; }\nPyMODINIT_FUNC init(void) {\n    if (x) {\n        y();\n    }\n}\n")
    assert c_functions(src) == [("f", 4), ("h", 1), ("init", 5)]


def test_the_c_files_and_the_other_folders_are_measured():
    """The measure sees the repository's other folders, the extension's C parts and their functions (a measure
    that found nothing would pass any size)."""
    assert {"tests", "benchmarks", "examples", "docs"} <= {p.relative_to(REPO).parts[0] for p in other_files()}
    parts = {p.name for p in source_files("*.[ch]")}
    assert {"fastcall.c", "scene_step.c", "front.c"} <= parts
    names = {n for n, _ in c_functions((ROOT / "codegen" / "scene_step.c").read_text())}
    assert {"scene_step", "step_plan", "step_run"} <= names
