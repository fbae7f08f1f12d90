# Two entry points on a fresh machine:  `make demo`  and  `make test`.
# Both create .venv/ at the repository root and install what they need into it.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Real dataset files for the tests, when the shared folder is present.
SGL_TEST_DATA ?= $(abspath $(wildcard ../shared/datasets))
export SGL_TEST_DATA

.PHONY: demo test install install-test bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(VENV)/bin/python setup.cfg pyproject.toml
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/bin/python setup.cfg pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(VENV)/bin/sgl train --model sgc --dataset karate --seeds 5

test: install-test
	$(PY) -m pytest -q

bench: install-test
	$(PY) benchmarks/bench_propagate.py

clean:
	rm -rf $(VENV) build *.egg-info
