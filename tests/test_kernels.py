"""The kernel registry's wrapper (sparsedyn.kernels): the signature of every public function, the
model-first check, the backend setting and the dispatch to a registered native road."""

import inspect

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_trees
from kernel_args import arguments, static_choices
from sparsedyn import kernels
from sparsedyn.kernels import REGISTRY


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_public_function_has_the_kernels_signature(name):
    public = getattr(sd, name)
    k = REGISTRY[name]
    assert inspect.signature(public) == inspect.signature(k.fn)
    assert public.__doc__ == k.fn.__doc__ and public.__name__ == k.fn.__name__ and public.__kernel__ is k


#: The functions of a dof tree take a model or a parent array first (``model_or_lambda``).
TAKE_A_MODEL = sorted(n for n, k in REGISTRY.items() if next(iter(k.signature.parameters)) == "model")


def test_which_functions_take_a_model_first():
    assert "rnea" in TAKE_A_MODEL and "ltdl" not in TAKE_A_MODEL and len(TAKE_A_MODEL) > 30


@pytest.mark.parametrize("name", TAKE_A_MODEL)
def test_a_model_that_is_not_first_is_a_type_error(name, rng):
    """``sd.rnea(q, model, v, a)`` and its like: a TypeError saying the model comes first."""
    model = random_trees()[0]
    static = static_choices(model, name)[0]
    args = arguments(model, name, rng, static=static)
    for wrong in (next(iter(args.values())), None, "model"):
        with pytest.raises(TypeError, match=rf"^{name}: the model comes first, {name}\(model, .*got "
                                            rf"{type(wrong).__name__} as the first argument"):
            getattr(sd, name)(wrong, **args, **static)


def test_use_backend_setter_and_context_manager(monkeypatch):
    model = random_trees()[1]
    q = model.random_configuration(0)
    seen = []

    def hook(k, m, args, kwargs):
        seen.append(k.name)
        return "native"
    monkeypatch.setattr(kernels, "_native", hook)
    before = sd.use_backend.current()
    try:
        sd.use_backend("native")
        assert sd.crba(model, q) == "native" and seen == ["crba"]
        with sd.use_backend("numpy") as b:
            assert b.name == "numpy" and sd.use_backend.current() == "numpy"
            H = sd.crba(model, q)
            assert np.array_equal(H, REGISTRY["crba"].fn(model, q)) and seen == ["crba"]
        assert sd.use_backend.current() == "native" and sd.crba(model, q) == "native"
        sd.use_backend("numpy")
        assert isinstance(sd.crba(model, q), np.ndarray) and seen == ["crba", "crba"]
    finally:
        sd.use_backend(before)
    with pytest.raises(ValueError, match="use_backend: expected one of 'native', 'numpy', got 'gpu'"):
        sd.use_backend("gpu")
    assert sd.use_backend.current() == before


def test_deterministic_flag_is_restored():
    was = sd.use_backend.is_deterministic()
    with sd.use_backend("native", deterministic=not was):
        assert sd.use_backend.is_deterministic() is (not was)
    assert sd.use_backend.is_deterministic() is was
