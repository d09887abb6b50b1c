# Two entry points, each setting everything up in its own virtual environment:
#   make demo   install sparsedyn and run the demo on the built-in humanoid
#   make test   install sparsedyn with its test oracles and run the whole test suite
#   make docs   install the documentation tools and build docs/_build/html (tutorials run)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[plot]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	touch $@

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,plot,docs]'
	touch $@

demo: $(VENV)/.installed-core
	$(BIN)/sparsedyn demo

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

# Warnings are errors: a broken reference or a malformed docstring fails the build.
docs: $(VENV)/.installed-docs
	$(BIN)/python -m sphinx -W --keep-going -j 2 -b html docs docs/_build/html
	@echo "open docs/_build/html/index.html"

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache docs/_build docs/generated docs/auto_tutorials
