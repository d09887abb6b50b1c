# Two entry points, each setting everything up in its own virtual environment:
#   make demo   install sparsedyn and run the demo on the built-in humanoid
#   make test   install sparsedyn with its test oracles and run the whole test suite
#   make docs   install the documentation tools and build docs/_build/html (tutorials run)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test docs clean browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[plot]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,plot,viewer]'
	touch $@

# The viewer's browser tests drive Debian's chromium (Playwright's own download needs a CDN).
browser:
	@[ -n "$$SPARSEDYN_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium; } || \
	  echo "make test: the viewer's browser tests need Chromium: run 'sudo apt-get install chromium' or set SPARSEDYN_CHROMIUM"

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,plot,docs,viewer]'
	touch $@

demo: $(VENV)/.installed-core
	$(BIN)/sparsedyn demo

# The suite on every core (pytest-xdist), a test file's tests together on one worker; the workers
# share one private build cache of the run (tests/conftest.py), so a kernel is built once.
test: $(VENV)/.installed-test browser
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# Warnings are errors: a broken reference or a malformed docstring fails the build.
docs: $(VENV)/.installed-docs
	$(BIN)/python -m sphinx -W --keep-going -j 2 -b html docs docs/_build/html
	@echo "open docs/_build/html/index.html"

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache docs/_build docs/generated docs/auto_tutorials
