# Set-up and checks for `lab`. On a fresh machine: `make demo` and `make test` do everything.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The torch installed into the venv, and into the node image (the image copies the venv's version).
TORCH_VERSION ?= 2.13.0
PYTEST_ARGS ?=

.PHONY: setup engine base image test-tools demo test test-long test-fast bench reliability docs docs-serve clean help

help:
	@echo "make demo       2-node lab, every exercise run and checked, torn down"
	@echo "make test       the whole test suite (brings up the Docker engine, builds the image)"
	@echo "make test-fast  unit tests only, no containers"
	@echo "make test-long  the few real cases that wait for minutes (a Slurm time limit), left out of make test"
	@echo "make bench      benchmarks (see bench/)"
	@echo "make reliability  interruption trials + cited tests, rewrites RELIABILITY.md (20-40 min)"
	@echo "make docs       the documentation site, built offline with --strict into site/"
	@echo "make docs-serve the site on http://127.0.0.1:8000, rebuilt as pages change"
	@echo "make setup | engine | base | image | test-tools | clean"

# pyproject.toml's dependencies (dev included) but torch, which `setup` installs at TORCH_VERSION.
LAB_DEPENDENCIES = $(PYTHON) -c 'import tomllib; project = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	print(*(d for d in project["dependencies"] + project["optional-dependencies"]["dev"] if not d.startswith("torch")))'

setup: $(VENV)/.installed

# The venv in two parts: lab and its dependencies first, so that `lab image base` (debootstrap, 45 s on a fresh
# machine) runs while torch installs.
$(VENV)/.lab-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $$($(LAB_DEPENDENCIES))
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(VENV)/.installed: $(VENV)/.lab-installed
	$(BIN)/pip install -q "torch==$(TORCH_VERSION)"
	touch $@

engine:
	bash docker/engine.sh

# The base image needs the engine and lab, not torch: it is made while torch installs (and the engine, apt,
# comes up while lab installs, pip). The build then needs torch's version.
base: $(VENV)/.lab-installed engine
	$(BIN)/lab image base

image:
	@$(MAKE) --no-print-directory -j3 setup base
	$(BIN)/lab image build

# Two exercises at a time (the lab and a copy of it): most of them wait more than they compute.
demo: image
	$(BIN)/lab up --nodes 2
	$(BIN)/lab status
	$(BIN)/lab run --all --jobs 2; status=$$?; $(BIN)/lab down; exit $$status

# What the suite drives besides the engine: Debian's chromium opens the HTML report (tests/unit/test_report.py).
# Installed like the engine (as root on Debian, apt); elsewhere the test says what is missing.
test-tools:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && echo "installing chromium with apt-get" && \
		  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; } || \
		echo "note: no chromium (apt-get install chromium): the HTML report's browser test cannot run"

test: image test-tools
	$(BIN)/python -m pytest -m "not long" $(PYTEST_ARGS)

test-long: image
	$(BIN)/python -m pytest -m long $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -m "not docker and not slow" $(PYTEST_ARGS)

bench: image
	$(BIN)/lab bench

reliability: image
	$(BIN)/python bench/trials.py --write RELIABILITY.md

# The documentation (mkdocs.yml; MkDocs and its theme are in the dev extra). The command line and cause references are
# generated from the code as the site builds (tools/docs_reference.py). Offline: no web fonts, nothing fetched.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-serve: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

clean:
	-$(BIN)/lab down --all
	rm -rf $(VENV) .lab site
