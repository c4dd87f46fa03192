"""Merged tables that count right: two sweeps that both ran seed 0 give each cell two
runs of seed 0, not two seeds; ``rows=sweep`` keeps each sweep's losses apart; equal
cells are bold alike. The same through ``GET /v1/grid?ids=`` and ``dicesweep grid``
(a real process over the same MLflow store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft

# Each sweep ran seed 0 of three losses; dsc and focal tie in each sweep and merged.
F1 = ({"ce": 80.0, "dsc": 84.0, "focal": 84.0}, {"ce": 81.0, "dsc": 83.0, "focal": 83.0})
LOSSES = {"ce": {"name": "ce"}, "dsc": {"name": "dsc"}, "focal": {"name": "focal"}}


@pytest.fixture
def two_sweeps(session: Session, alice: Owner, tracking: MlflowClient) -> list[str]:
    """Two of alice's sweeps of the same three losses, seed 0 each."""
    ids = []
    for index, f1 in enumerate(F1):
        sweep = create_sweep(session, alice.id, make_draft(f"rerun-{index}")).sweep
        trials = [FakeTrial(LOSSES[name], seed=0, eval_f1=value) for name, value in f1.items()]
        write_trials(tracking, sweep.id, trials)
        ids.append(sweep.id)
    return ids


def cells_of(table: dict[str, Any]) -> dict[tuple[Any, Any], dict[str, Any]]:
    return {(cell["row"], cell["column"]): cell for cell in table["cells"]}


def test_the_api_counts_runs_of_one_seed_as_runs(
    api: Api, session: Session, alice: Owner, two_sweeps: list[str]
) -> None:
    headers = bearer(create_api_key(session, alice.id).plain_key)
    merged = api.client.get("/v1/grid", params={"ids": two_sweeps}, headers=headers)
    assert merged.status_code == 200, merged.text
    table = merged.json()
    assert (table["rows_key"], table["seeds"]) == ("loss", [0])
    cells = cells_of(table)
    assert {
        row: (cell["mean"], cell["count"], cell["seeds"]) for (row, _), cell in cells.items()
    } == {
        "ce": (80.5, 2, 1),
        "dsc": (83.5, 2, 1),
        "focal": (83.5, 2, 1),
    }
    text = api.client.get(
        "/v1/grid", params={"ids": two_sweeps, "format": "markdown"}, headers=headers
    ).text
    assert "eval_f1: mean ± std over 2 runs of seed 0 (Δ against ce)" in text
    assert "over 2 seeds" not in text  # two runs of one seed are not two seeds
    # Equal means: both bold, not one of them.
    assert text.count("**83.50 ± 0.71 (+3.00)**") == 2


def test_the_api_keeps_each_sweeps_losses_apart_by_sweep(
    api: Api, session: Session, alice: Owner, two_sweeps: list[str]
) -> None:
    headers = bearer(create_api_key(session, alice.id).plain_key)
    params = {"ids": ",".join(two_sweeps), "rows": "sweep"}
    table = api.client.get("/v1/grid", params=params, headers=headers).json()
    assert table["rows_key"] == "sweep / loss"
    cells = cells_of(table)
    expected = {
        (f"{sweep_id} / {loss}", "mrpc"): value
        for sweep_id, f1 in zip(two_sweeps, F1, strict=True)
        for loss, value in f1.items()
    }
    assert {key: cell["mean"] for key, cell in cells.items()} == expected
    assert {(cell["count"], cell["seeds"]) for cell in cells.values()} == {(1, 1)}
    text = api.client.get("/v1/grid", params={**params, "format": "markdown"}, headers=headers).text
    assert "eval_f1: mean ± std over 1 seed; best per column in bold." in text
    assert text.count("**84.00**") == 2  # the two equal best cells of the column


def dicesweep_grid(tracking: MlflowClient, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICESWEEP_")}
    env["DICESWEEP_MLFLOW_TRACKING_URI"] = tracking.tracking_uri
    command = [sys.executable, "-m", "sweep_service.cli", "grid", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_the_cli_says_the_same_as_the_api(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient, two_sweeps: list[str]
) -> None:
    headers = bearer(create_api_key(session, alice.id).plain_key)
    for extra in ([], ["--rows", "sweep"]):
        done = dicesweep_grid(tracking, *two_sweeps, "--format", "json", *extra)
        assert done.returncode == 0, done.stderr
        params: dict[str, Any] = {"ids": two_sweeps, **({"rows": "sweep"} if extra else {})}
        served = api.client.get("/v1/grid", params=params, headers=headers).json()
        printed = json.loads(done.stdout)
        assert printed["rows_key"] == served["rows_key"]
        assert printed["cells"] == served["cells"]
    text = dicesweep_grid(tracking, *two_sweeps).stdout
    assert "eval_f1: mean ± std over 2 runs of seed 0 (Δ against ce)" in text
    assert text.count("**83.50 ± 0.71 (+3.00)**") == 2
    by_sweep = dicesweep_grid(tracking, *two_sweeps, "--rows", "sweep").stdout
    assert "over 1 seed;" in by_sweep and "3 seeds" not in by_sweep
    assert f"| {two_sweeps[0]} / dsc " in by_sweep
