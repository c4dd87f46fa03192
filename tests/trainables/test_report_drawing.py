"""A sweep's report is drawn whatever its names hold, written to a real MLflow store:
a data set named in matplotlib's mathtext (seen: every trial finished, then the
report's ParseFatalException failed the sweep and left its parent run without a
report) is drawn as text, and every rendering is attached."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from tests.stage_rows import two_stage_rows
from trainables.driver.reports import RENDERINGS, write_reports

MATHTEXT = r"$\undefinedmacro{x}$"


def test_a_name_in_mathtext_is_drawn_as_text_and_every_file_attached(tmp_path: Path) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("names", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    rows = two_stage_rows()
    rows = rows[rows["stage"] == "final"].drop(columns=["stage", "status"])
    rows["dataset"] = MATHTEXT
    markdown = write_reports(client, run_id, rows, "eval_f1", name=r"$\frac{a$")
    assert MATHTEXT.replace("\\", "\\\\") in markdown
    names = {item.path for item in client.list_artifacts(run_id, "report")}
    assert {f"report/{name}" for name, _ in RENDERINGS} <= names
    png = Path(client.download_artifacts(run_id, "report/grid.png", str(tmp_path / "down")))
    assert png.read_bytes().startswith(b"\x89PNG")
