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
    assert sparsedyn.ForceTorque is importlib.import_module("sparsedyn.model.sensors").ForceTorque
    with pytest.raises(AttributeError, match="no_such_name"):
        sparsedyn.no_such_name
    for name in sparsedyn.__all__:
        assert getattr(sparsedyn, name) is not None, name


PUBLIC_MODULES = ("sparsedyn", "sparsedyn.estimation", "sparsedyn.constraints", "sparsedyn.model.sensors",
                  "sparsedyn.cli", "sparsedyn.plots", "sparsedyn.model", "sparsedyn.model.builders")


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
    """Classes need their own docstring; a method may inherit the one of the method it overrides."""
    missing = []
    for module_name in PUBLIC_MODULES:
        for qual, obj in _public(module_name):
            if inspect.isclass(obj):
                doc = obj.__dict__.get("__doc__")
            elif isinstance(obj, property):
                doc = obj.__doc__ or (obj.fget.__doc__ if obj.fget else None)
                if not doc:
                    owner = getattr(sparsedyn, qual.split(".")[-2], None) or importlib.import_module(
                        qual.rsplit(".", 2)[0])
                    doc = inspect.getdoc(getattr(owner, qual.split(".")[-1], None)) if inspect.isclass(owner) else None
            else:
                doc = obj.__doc__
                if not doc and "." in obj.__qualname__:          # a method: the overridden one's docstring
                    cls_name = obj.__qualname__.rsplit(".", 1)[0]
                    cls = getattr(importlib.import_module(obj.__module__), cls_name, None)
                    doc = inspect.getdoc(getattr(cls, obj.__name__)) if cls is not None else None
            if not (doc and doc.strip()):
                missing.append(qual)
    assert not missing, "public names without a docstring:\n  " + "\n  ".join(sorted(set(missing)))
