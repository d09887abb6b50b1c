# Two entry points, each setting everything up in its own virtual environment:
#   make demo   install sparsedyn and run the demo on the built-in humanoid
#   make test   install sparsedyn with its test oracles and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[plot]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	touch $@

demo: $(VENV)/.installed-core
	$(BIN)/sparsedyn demo

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
