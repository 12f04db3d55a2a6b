# Set-up and checks for `lab`. On a fresh machine: `make demo` and `make test` do everything.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The torch installed into the venv, and into the node image (the image copies the venv's version).
TORCH_VERSION ?= 2.13.0
PYTEST_ARGS ?=

.PHONY: setup engine base node-image image test-tools demo test test-long test-fast bench reliability docs docs-serve clean help

help:
	@echo "make demo       2-node lab, every exercise run and checked, torn down"
	@echo "make test       the whole test suite (brings up the Docker engine, builds the image)"
	@echo "make test-fast  unit tests only, no containers"
	@echo "make test-long  the few real cases that wait for minutes (a Slurm time limit), left out of make test"
	@echo "make bench      benchmarks (see bench/)"
	@echo "make reliability  interruption trials + cited tests, rewrites RELIABILITY.md (20-40 min)"
	@echo "make docs       the documentation site, built offline with --strict into site/"
	@echo "make docs-serve the site on http://127.0.0.1:8000, rebuilt as pages change"
	@echo "make setup | engine | base | node-image | image | test-tools | clean"

# Every step says when it started (seconds since this `make` began) and how long it took: the README's "starts,
# takes" table of a fresh machine is `make demo 2>&1 | grep '^step '`.
ifndef MAKE_T0
MAKE_T0 := $(shell date +%s.%N)
endif
export MAKE_T0
STEP = t=$$(date +%s.%N); trap 'awk -v s=$$t -v z=$$MAKE_T0 -v e=$$(date +%s.%N) \
	"BEGIN {printf \"step $(1): at %.0f s, took %.0f s\n\", s - z, e - s}"' EXIT;

# pyproject.toml's dependencies (dev included) but torch, which `setup` installs at TORCH_VERSION.
LAB_DEPENDENCIES = $(PYTHON) -c 'import tomllib; project = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	print(*(d for d in project["dependencies"] + project["optional-dependencies"]["dev"] if not d.startswith("torch")))'
# Of those, what `lab image base` and `lab image build` import (a fifth of the packages; pip's time goes by package).
IMAGE_TOOLS = docker click rich packaging requests pathspec
IMAGE_DEPENDENCIES = $(PYTHON) -c 'import re, tomllib; project = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	print(*(d for d in project["dependencies"] if re.split("[<>=!~ ;\\[]", d)[0].lower() in "$(IMAGE_TOOLS)".split()))'

setup: $(VENV)/.installed

# The venv in three parts: what the image tools need, then torch (the node image's build needs its version), then
# the rest of lab's dependencies. `lab image base` (debootstrap, 46-51 s on a fresh machine) starts after the first
# part, and `lab image build` once torch is in: the rest installs while they run (bench/RESULTS.md, "A cold
# `make demo`").
$(VENV)/.image-tools: pyproject.toml
	@$(call STEP,venv with the image tools) $(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q --upgrade pip && \
		$(BIN)/pip install -q $$($(IMAGE_DEPENDENCIES)) && $(BIN)/pip install -q --no-deps -e . && touch $@

# numpy with it: the node image pins the venv's numpy too (lab/nodes/image.py host_pins), and it must be there when the
# build reads it, not come later with matplotlib. lab's other dependencies come in the next part, so pip is told not
# to report them missing here.
$(VENV)/.torch: $(VENV)/.image-tools
	@$(call STEP,torch) $(BIN)/pip install -q --no-warn-conflicts "torch==$(TORCH_VERSION)" numpy && touch $@

$(VENV)/.installed: $(VENV)/.torch
	@$(call STEP,the other dependencies) $(BIN)/pip install -q $$($(LAB_DEPENDENCIES)) && touch $@

engine:
	@$(call STEP,engine) bash docker/engine.sh

# The base image needs the engine and the image tools, not torch nor the rest of lab's dependencies: it is made
# while they install (and the engine, apt, comes up while the image tools install, pip).
base: $(VENV)/.image-tools engine
	@$(call STEP,base image) $(BIN)/lab image base

# The node image needs the base and torch's version; the rest of lab's dependencies install beside it.
node-image: $(VENV)/.torch base
	@$(call STEP,node image) $(BIN)/lab image build

image:
	@$(MAKE) --no-print-directory -j3 node-image setup

# Two exercises at a time (the lab and a copy of it): most of them wait more than they compute (bench/RESULTS.md,
# "Exercises N at a time": 0.66 of one at a time with 3, 0.72 with 2). Three were faster but, on a loaded machine,
# timed exercises (02, 12, 13) missed their steps' timeouts; DEMO_JOBS=3 for the faster demo on a quiet machine.
DEMO_JOBS ?= 2
demo: image
	@$(call STEP,demo lab up) $(BIN)/lab up --nodes 2
	$(BIN)/lab status
	@$(call STEP,demo exercises) $(BIN)/lab run --all --jobs $(DEMO_JOBS); status=$$?; $(BIN)/lab down; exit $$status

# What the suite drives besides the engine: Debian's chromium opens the HTML report (tests/unit/test_report.py).
# Installed like the engine (as root on Debian, apt); elsewhere the test says what is missing.
# After the engine (its apt-get holds dpkg's lock), beside the venv and the images (`make test`).
test-tools: engine
	@$(call STEP,test tools) command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && echo "installing chromium with apt-get" && \
		  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=120 --no-install-recommends chromium >/dev/null; } || \
		echo "note: no chromium (apt-get install chromium): the HTML report's browser test cannot run"

# Three workers (pytest-xdist): most tests wait on containers and timeouts rather than compute; each worker has its
# own labs (lab's pytest plugin: tests/integration/conftest.py), the session one LAB_HOME (tests/conftest.py). Tests
# go out one at a time, the long files first (pyproject.toml's --dist loadgroup, tests/conftest.py's order).
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 3
# PYTHONDONTWRITEBYTECODE= : where a shell sets it (this machine's do), every process of the suite would compile
# lab's modules again and every pytest worker rewrite every test module (5 s of CPU a worker): let Python cache them.
test:
	@$(MAKE) --no-print-directory -j4 node-image setup test-tools
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m "not long" -n $(TEST_WORKERS) $(PYTEST_ARGS)

test-long: image
	$(BIN)/python -m pytest -m long $(PYTEST_ARGS)

test-fast: setup
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m "not docker and not slow" $(PYTEST_ARGS)

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
