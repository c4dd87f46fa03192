"""The driver's report of a two-stage sweep, written to a real MLflow store: the table
of stage 2, the budget curves of stage 1 beside it; none for a one-stage sweep."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.stage_rows import STAGE_TWO, two_stage_rows
from trainables.driver.reports import write_reports


@pytest.fixture
def parent(tmp_path: Path) -> tuple[MlflowClient, str]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("budget", artifact_location=str(tmp_path / "art"))
    return client, client.create_run(experiment).info.run_id


def _artifact(client: MlflowClient, run_id: str, path: str, into: Path) -> str:
    return Path(client.download_artifacts(run_id, path, str(into))).read_text()


def test_a_two_stage_report_has_the_curves_beside_the_table(
    parent: tuple[MlflowClient, str], tmp_path: Path
) -> None:
    client, run_id = parent
    rows = two_stage_rows().drop(columns="status")
    markdown = write_reports(
        client, run_id, rows, "eval_f1", name="two-stage", random_sampling=True
    )
    assert (
        "Reading: dsc and ce differ by less than 2 stds of their bests at every budget"
        " (1–6 trials): not resolved." in markdown
    )
    names = {item.path for item in client.list_artifacts(run_id, "report")}
    assert "report/budget_curves.csv" in names and "report/grid.png" in names
    text = _artifact(client, run_id, "report/budget_curves.csv", tmp_path / "down")
    frame = pd.read_csv(io.StringIO(text))
    assert list(frame.columns) == ["curve", "trials", "mean", "std"]
    assert len(frame) == 12 and frame["trials"].max() == 6
    # The table, and so the parent's metrics, are stage 2's alone.
    metrics = client.get_run(run_id).data.metrics
    assert metrics["best_eval_f1/ce"] == pytest.approx(sum(STAGE_TWO["ce"]) / 3)


def test_a_one_stage_report_has_no_curves(parent: tuple[MlflowClient, str]) -> None:
    client, run_id = parent
    rows = two_stage_rows()
    rows = rows[rows["stage"] == "final"].drop(columns=["stage", "status"])
    markdown = write_reports(client, run_id, rows, "eval_f1", name="one-stage")
    assert "Budget curves" not in markdown
    names = {item.path for item in client.list_artifacts(run_id, "report")}
    assert "report/budget_curves.csv" not in names and "report/grid.md" in names
