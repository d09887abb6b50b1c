"""No hidden state: the package keeps no module-level table per model (DESIGN.md: everything derived
from structure is computed once when the model is built; per-state quantities are returned).

What is derived from a model lives in one of two owners: the model's own
:class:`~sparsedyn.model.topology.Topology` (index tables, ancestor sets, stacked constants) and
:func:`sparsedyn.model.topology.model_store` (traced programs, compiled methods, analyses, for as long as
the model lives).  This test reads every module of the package (its syntax tree, not its behaviour)
and fails on any other module-level container that a function fills at run time, and on any
``functools.lru_cache``/``cache``, unless the allowlist below names it with the reason it is no
table per model.
"""

import ast
from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.model import topology
from sparsedyn.model.builders import random_tree

ROOT = Path(sd.__file__).resolve().parent

#: Constructors of mutable containers.
CONTAINERS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "WeakKeyDictionary",
              "WeakValueDictionary", "WeakSet", "ModelCache", "Counter"}
#: Methods that fill or empty a container.
MUTATORS = {"setdefault", "update", "append", "add", "extend", "insert", "pop", "popitem", "clear", "remove",
            "discard", "__setitem__", "appendleft"}
CACHES = {"lru_cache", "cache"}

#: (module, name) -> why it is no per-model table.  Keep it short: each entry is a reviewed exception.
#: The module may be a package: the entry then covers its modules (a name moved within it).
ALLOWED = {
    # the two owners
    ("model.topology", "_stores"): "the one store of what is derived once per model (model_store)",
    ("kernels", "_calls"): "the compiler's native callables per live model (native_calls), emptied by finalize",
    ("codegen.native", "_entries"): "the compiler's compiled models by model fingerprint (the last KEEP)",
    # registries, filled when a module is imported (a decorator or a register call), not per model
    ("kernels", "REGISTRY"): "the kernel registry: one entry per @kernel, at import",
    ("kernels", "METHODS"): "the functions compiled models have as methods: one entry per @model_method, at import",
    ("kernels", "_publics"): "the public functions (weak keys) and their direct calls: one per @kernel, at import",
    ("codegen.native", "_positions"): "argument positions per kernel (a function of its signature)",
    ("model.joints", "JOINT_TYPES"): "the joint-type registry: one entry per joint class, at import",
    ("interop.jax", "_registered_target"): "whether the XLA FFI target is registered in this process (once)",
    # the process's build machinery: probes of the C compiler, extension modules loaded, the GC pause
    ("codegen.build", "_probed"): "what each C compiler command supports, probed once per process",
    ("codegen.fastcall", "_loaded"): "the fast-call extension module loaded per compiler",
    ("codegen.xla_ffi", "_loaded"): "the XLA FFI handler library loaded per compiler and headers",
    ("codegen.native", "_c_libraries"): "hand-written C libraries (c_library) loaded per source text",
    ("contact.mesh_plane_loop", "_ROUTINE"): "the mesh-plane routine of its one C source, loaded once",
    ("contact.mesh_box_loop", "_ROUTINE"): "the broad phase and mesh-box routines of its one C source, loaded once",
    ("contact.collision_coal", "_REQUESTS"): "coal's two distance requests, made once (coal reads them, never "
                                             "writes them; no model among their inputs)",
    ("interop.dask", "_compiled"): "a worker's compiled objects by recipe token (the last few)",
    ("symbolic", "_gc_pauses"): "the count of nested pauses of Python's garbage collector",
    # warn-once sets: which warnings this process has given
    ("codegen.build", "_warned_dirs"): "warn once per cache directory",
    ("codegen.native", "_warned_failed"): "warn once per failed build key, not a table of derived data",
    ("codegen.runtime", "_warned_no_compiler"): "warn once per process and reason",
    # pure functions of hashable constants (no model among the inputs), bounded
    ("model.spatial", "_axis_constants"): "lru_cache keyed by a joint axis (3 floats): a pure function of it",
    ("algorithms.ltdl", "_chain"): "lru_cache keyed by a block size n: the LTDL plan of a dense n x n block",
    ("estimation.verdict", "_triangular_levels"): "lru_cache keyed by a sparsity pattern's bytes: a pure "
                                                  "function of the pattern, shared by every problem that has it",
    ("contact.friction", "_plain_settings"): "lru_cache keyed by a step's plain settings (dt, tol, iterations, "
                                             "solver, margin): the checked settings array, a pure function of them",
    ("viewer.meshes", "read_mesh"): "lru_cache of mesh files read from disk, keyed by path",
}


def _modules(root):
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        yield ".".join(p for p in rel.parts if p != "__init__") or "", ast.parse(path.read_text(), str(path))


def _container_value(node):
    if isinstance(node, (ast.Dict, ast.List, ast.Set)):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        return name in CONTAINERS
    return False


def _module_containers(tree):
    """Names bound at module level (also under a top-level ``if``/``try``) to a mutable container."""
    out = {}
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.If, ast.Try)):
            stack.extend(node.body + node.orelse + getattr(node, "finalbody", []) +
                         [s for h in getattr(node, "handlers", []) for s in h.body])
        elif isinstance(node, ast.Assign) and _container_value(node.value):
            out.update({t.id: node.lineno for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and node.value is not None and _container_value(node.value) \
                and isinstance(node.target, ast.Name):
            out[node.target.id] = node.lineno
    return out


def _filled_in_functions(tree, names):
    """The names among ``names`` that a function body fills or empties (item assignment or deletion,
    a mutating method, ``global`` rebinding)."""
    hit = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                    and isinstance(node.value, ast.Name) and node.value.id in names:
                hit.add(node.value.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in MUTATORS and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id in names:
                hit.add(node.func.value.id)
            elif isinstance(node, ast.Global):
                hit.update(n for n in node.names if n in names)
    return hit


def _cached_functions(tree):
    """Functions (and methods) decorated with ``functools.lru_cache`` or ``functools.cache``."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in fn.decorator_list:
                d = d.func if isinstance(d, ast.Call) else d
                name = d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None)
                if name in CACHES:
                    yield fn.name, fn.lineno, [a.arg for a in fn.args.args]


def hidden_state(root):
    """``{(module, name): description}`` of every module-level container filled at run time and every
    cached function of the package at ``root``."""
    found = {}
    for mod, tree in _modules(root):
        containers = _module_containers(tree)
        for name in _filled_in_functions(tree, set(containers)):
            found[(mod, name)] = f"{mod}.py:{containers[name]}: module-level container {name!r} filled at run time"
        for name, line, args in _cached_functions(tree):
            found[(mod, name)] = f"{mod}.py:{line}: {name}({', '.join(args)}) is an lru_cache"
    return found


def _allowed(key, entry):
    (mod, name), (amod, aname) = key, entry
    return name == aname and (mod == amod or mod.startswith(amod + "."))


def test_no_module_level_tables_outside_the_two_owners():
    found = hidden_state(ROOT)
    new = {k: v for k, v in found.items() if not any(_allowed(k, e) for e in ALLOWED)}
    assert not new, ("module-level state per model (put structure-derived tables on "
                     "sparsedyn.model.topology.Topology, other derived objects in sparsedyn.model.topology.model_store):\n"
                     + "\n".join(sorted(new.values())))
    stale = sorted(e for e in ALLOWED if not any(_allowed(k, e) for k in found))
    assert not stale, f"allowlist entries that no longer exist (delete them): {stale}"


def test_the_scan_finds_what_it_looks_for(tmp_path):
    """The scan itself: a per-model WeakKeyDictionary, a dict filled with setdefault, an lru_cache on a
    function of a model, and a global rebinding are found; constants and local dicts are not."""
    (tmp_path / "mod.py").write_text(
        "import functools, weakref\n"
        "_A = weakref.WeakKeyDictionary()\n"
        "_B: dict = {}\n"
        "_C = {'revolute': 1}\n"           # a constant table: never filled
        "_D = []\n"
        "def f(model):\n"
        "    _A[model] = 1\n"
        "    _B.setdefault(model, {})\n"
        "    local = {}\n"
        "    local[model] = 2\n"
        "    return _C['revolute']\n"
        "def g():\n"
        "    global _D\n"
        "    _D = [1]\n"
        "@functools.lru_cache(maxsize=8)\n"
        "def h(model):\n"
        "    return model\n")
    assert set(hidden_state(tmp_path)) == {("mod", "_A"), ("mod", "_B"), ("mod", "_D"), ("mod", "h")}


# --- the owners behave as documented --------------------------------------------------------------

def test_topology_tables_are_the_models_structure():
    """The Topology's tables against the definitions, from the model's parent array alone."""
    model = random_tree(9, seed=3, branching=1.6, joint_types=("revolute", "spherical", "planar"))
    t = model.topology
    for i in range(model.nbodies):
        anc = model.ancestors(i)
        np.testing.assert_array_equal(np.flatnonzero(t.above[i]), sorted(anc))
        assert t.root_of[i] == anc[-1]
        chain, cols, body = t.chains[i]
        assert list(chain) == anc[::-1]
        np.testing.assert_array_equal(cols, [d for d in range(model.nv) if model.dof_body[d] in anc])
        np.testing.assert_array_equal(body, model.dof_body[cols])
    np.testing.assert_array_equal(t.below, t.above.T)
    assert t.chains[-1][0] == () and len(t.chains[-1][1]) == 0            # the world: nothing moves it
    for d, (L, P) in enumerate(t.levels, start=1):
        np.testing.assert_array_equal(L, np.flatnonzero(model.depth == d))
        np.testing.assert_array_equal(P, model.parent[L])
    # the branch pairs cover exactly the branch-induced pattern of H, each pair once
    rd, cd, ra, ca, mirror = t.branch_pairs
    P = np.zeros((model.nv, model.nv), int)
    np.add.at(P, (rd, cd), 1)
    np.add.at(P, (ra, ca), 1)
    np.testing.assert_array_equal(P, sd.sparsity_pattern(model).astype(int))
    np.testing.assert_array_equal(rd[mirror], ca)
    np.testing.assert_array_equal(cd[mirror], ra)
    for table in (t.above, t.levels[0][0], t.ltdl_plan[-1][0]):
        assert not table.flags.writeable


def test_topology_is_made_with_the_model_and_is_no_part_of_its_identity():
    """A copy (``with_armature``) has its own tables; a table is computed once (the same object on
    each read); the build cache's key ignores whether tables were computed."""
    from sparsedyn.codegen.runtime import model_fingerprint
    model = random_tree(6, seed=1, floating_base=True, branching=2.0)
    before = model_fingerprint(model)
    above = model.topology.above
    assert model.topology.above is above
    assert model_fingerprint(model) == before
    other = model.with_armature(0.1)
    assert other.topology is not model.topology
    np.testing.assert_array_equal(other.topology.above, above)
    # the free root's armature is the copy's own (a model constant the tables hold)
    np.testing.assert_array_equal(model.topology.free_roots[3][0], np.zeros(6))
    np.testing.assert_array_equal(other.topology.free_roots[3][0], np.full(6, 0.1))


def test_a_models_pickle_is_the_same_after_use():
    """The tables computed on use (the topology's, the joints' subspaces) are not part of what a model
    is: its pickle is the same bytes before and after the algorithms ran on it."""
    import pickle
    model = random_tree(6, seed=7, floating_base=True, joint_types=("revolute", "spherical", "planar"))
    before = pickle.dumps(model)
    q, z = model.neutral(), np.zeros(model.nv)
    with sd.use_backend("numpy"):
        sd.aba_derivatives(model, q, z, z)
        sd.frame_velocity_derivatives(model, q, z, frame=model.frame_names[-1])
    assert "above" in vars(model.topology) and "subspace" in vars(model.joints[0])     # computed ...
    assert pickle.dumps(model) == before                                                 # ... not pickled
    copy = pickle.loads(before)
    np.testing.assert_array_equal(copy.topology.above, model.topology.above)


def test_model_store_lives_as_long_as_its_model():
    """What :func:`~sparsedyn.model.topology.model_store` keeps for a model goes when the model goes (no
    table outlives its model to be handed to a new one that reuses its id)."""
    import gc
    model = random_tree(4, seed=2)
    table = topology.model_store(model, "a test's table")
    table["x"] = 1
    assert topology.model_store(model, "a test's table") is table
    assert topology.model_store(model, "another") == {}
    key = id(model)
    del model
    gc.collect()
    assert key not in topology._stores


@pytest.mark.parametrize("road", ["numpy", "native"])
def test_derivative_programs_are_kept_per_model_in_the_store(road):
    """``sd.derivatives`` of a registered kernel keeps its program in the model's store: the second
    call reuses it, and a new model gets its own."""
    model = random_tree(5, seed=4)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    with sd.use_backend(road):
        d1 = sd.derivatives(sd.frame_placement, wrt="q")(model, q, frame=model.frame_names[-1])
    programs = topology.model_store(model, "derivative programs")
    assert len(programs) == 1
    prog = next(iter(programs.values()))
    with sd.use_backend(road):
        d2 = sd.derivatives(sd.frame_placement, wrt="q")(model, q, frame=model.frame_names[-1])
    assert next(iter(programs.values())) is prog and len(programs) == 1
    for a, b in zip(d1, d2):
        np.testing.assert_array_equal(a, b)
