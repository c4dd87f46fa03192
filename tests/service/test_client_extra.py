"""The client extra: ``sweep_service.Client`` submits, waits with its progress bar and
builds its DataFrames without importing the service's packages or the trainer's, and
the ``client`` extra names none of them. (scripts/wheel-check.sh installs the extra
alone into a fresh venv and runs the notebook with it against a real service.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.imports import loaded_by

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
# Imported by the service, the driver or the trials, never by the client; mlflow only by
# Sweep.mlflow_runs, matplotlib only by a plot.
HEAVY = (
    "torch",
    "transformers",
    "ray",
    "mlflow",
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "matplotlib",
    "scipy",
)

# Every call of the client but mlflow_runs, against canned answers of the API.
PROBE = """
import httpx
from sweep_service import Client

TRIAL = {"run_id": "r1", "status": "FINISHED", "loss": "ce", "seed": 0,
          "degenerate_reason": None, "params": {}, "metrics": {"eval_f1": 80.0}}
GRID = {"rows_key": "loss", "cols_key": "dataset", "metric": "eval_f1",
         "cells": [{"row": "ce", "column": "ud", "mean": 80.0, "std": None, "count": 1,
                     "seeds": 1, "delta": None, "ci": None}],
         "budget": {"curves": [{"curve": "ce", "trials": 1, "mean": 80.0, "std": 0.0}]}}
SWEEP = {"id": "sw-1", "name": "smoke", "status": "succeeded", "trial_count": 1,
          "trials": {"done": 1, "running": 0, "failed": 0}, "best_trial": None}
ANSWERS = {
    "/v1/sweeps": SWEEP,
    "/v1/sweeps/sw-1": SWEEP,
    "/v1/sweeps/sw-1/trials": {"data": [TRIAL], "next_page_token": None},
    "/v1/sweeps/sw-1/grid": GRID,
    "/v1/grid": GRID,
}

def answer(request):
    return httpx.Response(200, json=ANSWERS[request.url.path])

http = httpx.Client(transport=httpx.MockTransport(answer), base_url="http://service")
with Client(http=http) as client:
    sweep = client.submit({"extends": "smoke"})
    sweep.wait(progress=True, poll_s=0)
    assert sweep.trials()["eval_f1"].tolist() == [80.0]
    assert sweep.grid()["mean"].tolist() == [80.0]
    assert sweep.budget_curves()["trials"].tolist() == [1]
    assert client.grid(["sw-1"])["loss"].tolist() == ["ce"]
"""


def test_the_client_imports_none_of_the_service_nor_the_trainer() -> None:
    assert loaded_by(PROBE, HEAVY) == []


def requirements(extra: str) -> set[str]:
    """The packages ``pip install 'dicesweep[extra]'`` asks for by name, the core's and
    those of the extras it names (``dicesweep[...]``) included."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    names: set[str] = set()
    for line in [*project["dependencies"], *project["optional-dependencies"][extra]]:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) == "dicesweep":
            for named in requirement.extras:
                names |= requirements(named)
        else:
            names.add(canonicalize_name(requirement.name))
    return names


def test_the_client_extra_names_what_the_client_imports_and_nothing_heavy() -> None:
    client = requirements("client")
    assert {"httpx", "pandas", "tqdm"} <= client
    assert client.isdisjoint(canonicalize_name(name) for name in HEAVY)


def test_the_notebook_extra_names_a_kernel_the_plot_and_mlflows_client() -> None:
    notebook = requirements("notebook")
    assert requirements("client") | {"matplotlib", "ipykernel", "nbclient"} <= notebook
    assert "mlflow-skinny" in notebook and "torch" not in notebook and "ray" not in notebook
