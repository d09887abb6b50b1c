"""The package as a user meets it: what ``import sparsedyn`` loads, and a docstring on every public name."""

import importlib
import inspect
import json
import subprocess
import sys

import pytest

import sparsedyn

HEAVY = ("scipy", "matplotlib", "mujoco", "pinocchio", "casadi", "jax")


def test_import_does_not_load_heavy_dependencies():
    code = ("import json, sys, sparsedyn; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = set(json.loads(out.stdout))
    assert "sparsedyn" in loaded and "numpy" in loaded
    assert not loaded & set(HEAVY), f"import sparsedyn loaded {sorted(loaded & set(HEAVY))}"


def test_lazy_names_resolve_to_the_objects_of_their_modules():
    from sparsedyn.codegen import compile as codegen_compile
    from sparsedyn.estimation import EstimationProblem
    from sparsedyn.io.urdf import load_urdf
    assert sparsedyn.load_urdf is load_urdf
    assert sparsedyn.EstimationProblem is EstimationProblem
    assert sparsedyn.compile is codegen_compile
    assert sparsedyn.ForceTorque is importlib.import_module("sparsedyn.sensors").ForceTorque
    with pytest.raises(AttributeError, match="no_such_name"):
        sparsedyn.no_such_name
    for name in sparsedyn.__all__:
        assert getattr(sparsedyn, name) is not None, name


PUBLIC_MODULES = ("sparsedyn", "sparsedyn.estimation", "sparsedyn.constraints", "sparsedyn.sensors",
                  "sparsedyn.cli", "sparsedyn.plots", "sparsedyn.model", "sparsedyn.builders")


def _public(module_name):
    mod = importlib.import_module(module_name)
    for name in getattr(mod, "__all__", ()):
        obj = getattr(mod, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield f"{module_name}.{name}", obj
            if inspect.isclass(obj):
                for meth_name, meth in vars(obj).items():
                    if meth_name.startswith("_") or not (inspect.isfunction(meth) or isinstance(meth, property)):
                        continue
                    if obj.__module__.startswith("sparsedyn") and not issubclass(obj, tuple):
                        yield f"{module_name}.{name}.{meth_name}", meth


def test_every_public_class_and_function_has_a_docstring():
    missing = []
    for module_name in PUBLIC_MODULES:
        for qual, obj in _public(module_name):
            doc = obj.__doc__ if not isinstance(obj, property) else (obj.fget.__doc__ if obj.fget else None)
            if inspect.isclass(obj) and obj.__doc__ is not None and any(
                    obj.__doc__ is base.__doc__ for base in obj.__mro__[1:]):
                doc = None                      # inherited from a base class: says nothing of this one
            if not (doc and doc.strip()):
                missing.append(qual)
    assert not missing, "public names without a docstring:\n  " + "\n  ".join(sorted(set(missing)))
