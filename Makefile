# Set-up and checks for `lab`. On a fresh machine: `make demo` and `make test` do everything.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The torch installed into the venv, and into the node image (the image copies the venv's version).
TORCH_VERSION ?= 2.13.0
PYTEST_ARGS ?=

.PHONY: setup engine image demo test test-long test-fast bench reliability clean help

help:
	@echo "make demo       2-node lab, every exercise run and checked, torn down"
	@echo "make test       the whole test suite (brings up the Docker engine, builds the image)"
	@echo "make test-fast  unit tests only, no containers"
	@echo "make test-long  the few real cases that wait for minutes (a Slurm time limit), left out of make test"
	@echo "make bench      benchmarks (see bench/)"
	@echo "make reliability  interruption trials + cited tests, rewrites RELIABILITY.md (20-40 min)"
	@echo "make setup | engine | image | clean"

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

engine:
	bash docker/engine.sh

# The venv (pip) and the engine (apt) need nothing of each other: made at once.
image:
	@$(MAKE) --no-print-directory -j2 setup engine
	$(BIN)/lab image build

demo: image
	$(BIN)/lab up --nodes 2
	$(BIN)/lab status
	$(BIN)/lab run --all; status=$$?; $(BIN)/lab down; exit $$status

test: image
	$(BIN)/python -m pytest -m "not long" $(PYTEST_ARGS)

test-long: image
	$(BIN)/python -m pytest -m long $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -m "not docker and not slow" $(PYTEST_ARGS)

bench: image
	$(BIN)/lab bench

reliability: image
	$(BIN)/python bench/trials.py --write RELIABILITY.md

clean:
	-$(BIN)/lab down --all
	rm -rf $(VENV) .lab
